#!/usr/bin/env bash
# planner executor, Ring/LL128 kernel A/B on a lent GPU machine, one call:
# kernel directories side by side (kernels_old = before, kernels_* = variants),
# NCCL (nccl_ref.py), correctness of Ring/LL128 + Tree/LL128 8 B .. 4 GiB for
# every variant, and Ring/LL128 small-size times 8 B .. 64 KiB.
# Next to this script: `planner`, kernels_old/, kernels_<variant>/, nccl_ref.py.
# Results under $OUT: summary.txt, log.txt, res/*.json(l).  env: DEADLINE (s, default 180), ROUNDS (2)
# NVLink multicast must stay off, here and in every child process.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/planner-perf-out}
RES="$OUT/res"; mkdir -p "$RES"
SUMMARY="$OUT/summary.txt"; LOG="$OUT/log.txt"; : >"$SUMMARY"
START=$(date +%s)
SIZES=${SIZES:-64M..4G}
in_time() {
  if [ $(($(date +%s) - START)) -gt "${DEADLINE:-180}" ]; then echo "# past the deadline: skipping $1" | tee -a "$SUMMARY"; return 1; fi
}
run() {
  local name=$1 kdir=$2; shift 2
  in_time "$name" || return 0
  local t0=$(date +%s%N)
  PLANNER_KERNEL_DIR="$kdir" timeout -k 5 60 "$HERE/planner" run --json "$@" >"$RES/$name.json" 2>>"$LOG"
  local rc=$? t1=$(date +%s%N) wrong
  wrong=$(python3 -c "import json; d=json.load(open('$RES/$name.json')); print(sum(r['wrong'] for r in d['results']), len(d['results']))" 2>/dev/null || echo "? ?")
  printf '%-30s rc=%-3s wrong/sizes=%-8s %5d ms  %s\n' "$name" "$rc" "$wrong" "$(((t1 - t0) / 1000000))" "$*" | tee -a "$SUMMARY"
}
echo "# $(date -u +%FT%TZ) perf_ll128.sh sizes=$SIZES" | tee -a "$SUMMARY"
{ nvidia-smi --query-gpu=index,name,driver_version --format=csv; "$HERE/planner" --version; } >>"$SUMMARY" 2>&1
VARS=$(cd "$HERE" && ls -d kernels_* | grep -v kernels_old)
# 1. Correctness of the variants (out-of-place, every element checked).
for k in $VARS; do
  for p in Ring/LL128 Tree/LL128; do
    run "correct-$k-${p/\//-}" "$HERE/$k" --pair "$p" --sweep 8..4G --iters 1 --warmup 0 --timeout 8
  done
done
# 2. A/B interleaved: in-place, CUDA graph of 10 iterations.
for round in $(seq 1 "${ROUNDS:-2}"); do
  for k in kernels_old $VARS; do
    run "ab$round-$k" "$HERE/$k" --pair Ring/LL128 --size "$SIZES" --in-place --iters 10 --warmup 3 --timeout 20 --cuda-graph
  done
done
# 3. NCCL, same sizes and timing.
if in_time nccl; then
  timeout -k 5 80 python3 "$HERE/nccl_ref.py" --pair Ring/LL128 --sizes "$SIZES" --iters-large 10 --warmup 3 >"$RES/nccl-Ring-LL128.jsonl" 2>>"$LOG"
  echo "nccl rc=$? $(($(date +%s) - START))s" | tee -a "$SUMMARY"
fi
# 4. Small sizes, time per call.
for k in kernels_old $VARS; do
  run "small-$k" "$HERE/$k" --pair Ring/LL128 --sweep 8..64K --in-place --iters 200 --warmup 20 --timeout 10 --cuda-graph
done
python3 - "$RES" <<'PY' | tee -a "$SUMMARY"
import glob, json, os, sys
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.json*"))):
    name = os.path.basename(f).split(".")[0]
    if name.startswith("correct"): continue
    try:
        rs = [json.loads(l) for l in open(f) if l.strip()] if f.endswith(".jsonl") else json.load(open(f))["results"]
    except Exception as e:
        print(name, "unreadable:", e); continue
    key = "time_us" if name.startswith("small") else "busbw_gbs"
    print(f"{name:28s} {key} " + " ".join(f"{r['bytes']}:{r.get(key):.2f}" for r in rs if r.get(key) is not None))
PY
tar -C "$OUT" -czf "$OUT/res.tar.gz" res && rm -rf "$RES"
echo "# done after $(($(date +%s) - START))s" | tee -a "$SUMMARY"
