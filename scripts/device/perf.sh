#!/usr/bin/env bash
# planner executor, large-size A/B on a lent GPU machine, in one call:
# variants of our Ring/Simple and Ring/LL128 side by side with NCCL, a
# correctness pass of every pair, and the Ring/LL small-size latency.
# Builds nothing. Next to this script: `planner` (new build), optionally
# `planner_old` (the previous build, its graph flag is `--graph`), kernel
# directories (kernels = what `planner` embeds, kernels_* = variants) and
# nccl_ref.py. Results under $OUT: summary.txt, log.txt, res/*.json(l).
#
#   perf.sh   (env: DEADLINE seconds after which no new step starts, default 270;
#              ROUNDS A/B repetitions, default 2; SIZES default 64M..4G;
#              VARIANTS space-separated NAME:VAR=VALUE,VAR=VALUE launch variants of
#              the new build, e.g. "nocluster:PLANNER_CGA_CLUSTER=0 default:")
#
# NVLink multicast must stay off, here and in every child process.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/planner-perf-out}
RES="$OUT/res"
mkdir -p "$RES"
SUMMARY="$OUT/summary.txt"
LOG="$OUT/log.txt"
: >"$SUMMARY"
START=$(date +%s)
SIZES=${SIZES:-64M..4G}
PAIRS="Ring/LL Ring/LL128 Ring/Simple Tree/LL Tree/LL128 Tree/Simple"

in_time() {
  if [ $(($(date +%s) - START)) -gt "${DEADLINE:-270}" ]; then
    echo "# past the deadline: skipping $1" | tee -a "$SUMMARY"
    return 1
  fi
}

# run NAME BIN GRAPHFLAG KERNELDIR ARGS...: one `planner run --json`
# (RUN_ENV: extra VAR=VALUE words for the child's environment).
run() {
  local name=$1 bin=$2 gflag=$3 kdir=$4
  shift 4
  in_time "$name" || return 0
  local t0=$(date +%s%N)
  env ${RUN_ENV:-} PLANNER_KERNEL_DIR="$kdir" timeout -k 5 90 "$bin" run --json "$@" ${gflag:+$gflag} >"$RES/$name.json" 2>>"$LOG"
  local rc=$?
  local t1=$(date +%s%N)
  local wrong
  wrong=$(python3 -c "import json; d=json.load(open('$RES/$name.json')); print(sum(r['wrong'] for r in d['results']), len(d['results']))" 2>/dev/null || echo "? ?")
  printf '%-36s rc=%-3s wrong/sizes=%-8s %5d ms  %s\n' "$name" "$rc" "$wrong" "$(((t1 - t0) / 1000000))" "$*" | tee -a "$SUMMARY"
}

echo "# $(date -u +%FT%TZ) perf.sh sizes=$SIZES" | tee -a "$SUMMARY"
{
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm,clocks.mem --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())"
  "$HERE/planner" --version
} >>"$SUMMARY" 2>&1

# 1. Correctness with the new build: every pair, 8 B .. 4 GiB, out-of-place, every element checked.
for p in $PAIRS; do
  run "correct-${p/\//-}" "$HERE/planner" "" "$HERE/kernels" --pair "$p" --sweep 8..4G --iters 1 --warmup 0 --timeout 8
done
run "correct-virtual4-Ring-Simple" "$HERE/planner" "" "$HERE/kernels" --virtual-ranks 4 --channels 4 --pair Ring/Simple --sweep 8..16M --iters 1 --warmup 0 --timeout 8
run "correct-virtual8-Ring-LL128" "$HERE/planner" "" "$HERE/kernels" --virtual-ranks 8 --channels 8 --pair Ring/LL128 --sweep 8..16M --iters 1 --warmup 0 --timeout 8
for k in "$HERE"/kernels_*; do
  [ -d "$k" ] || continue
  for p in Ring/LL128 Ring/Simple; do
    run "correct-$(basename "$k")-${p/\//-}" "$HERE/planner" "" "$k" --pair "$p" --sweep 8..4G --iters 1 --warmup 0 --timeout 8
  done
done

# 2. A/B, interleaved rounds: in-place, CUDA graph of 10 iterations, NCCL's channel/thread rule.
PERF=(--size "$SIZES" --in-place --iters 10 --warmup 3 --timeout 20)
for round in $(seq 1 "${ROUNDS:-2}"); do
  for p in Ring/Simple Ring/LL128; do
    n=${p/\//-}
    if [ -x "$HERE/planner_old" ]; then
      run "ab$round-old-$n" "$HERE/planner_old" --graph "$HERE/kernels" --pair "$p" "${PERF[@]}"
    fi
    run "ab$round-new-$n" "$HERE/planner" --cuda-graph "$HERE/kernels" --pair "$p" "${PERF[@]}"
    for v in ${VARIANTS:-}; do
      ev=${v#*:}
      RUN_ENV="${ev//,/ }" run "ab$round-${v%%:*}-$n" "$HERE/planner" --cuda-graph "$HERE/kernels" --pair "$p" "${PERF[@]}"
    done
    for k in "$HERE"/kernels_*; do
      [ -d "$k" ] || continue
      run "ab$round-$(basename "$k")-$n" "$HERE/planner" --cuda-graph "$k" --pair "$p" "${PERF[@]}"
    done
  done
done

# 3. NCCL, same sizes and timing (nccl_ref.py: 2 processes, in-place, one CUDA graph).
for p in Ring/Simple Ring/LL128; do
  n=${p/\//-}
  in_time "nccl-$n" || continue
  t0=$(date +%s)
  timeout -k 5 120 python3 "$HERE/nccl_ref.py" --pair "$p" --sizes "$SIZES" --iters-large 10 --warmup 3 \
    >"$RES/nccl-$n.jsonl" 2>>"$LOG"
  echo "nccl-$n rc=$? $(($(date +%s) - t0))s sizes=$(wc -l <"$RES/nccl-$n.jsonl")" | tee -a "$SUMMARY"
done

# 4. Ring/LL latency at small sizes, ours (new build) then NCCL.
run "small-new-Ring-LL" "$HERE/planner" --cuda-graph "$HERE/kernels" --pair Ring/LL --sweep 8..64K --in-place --iters 200 --warmup 20 --timeout 10
if in_time nccl-small-Ring-LL; then
  t0=$(date +%s)
  timeout -k 5 90 python3 "$HERE/nccl_ref.py" --pair Ring/LL --sizes 8..64K --iters-small 200 --warmup 5 \
    >"$RES/nccl-small-Ring-LL.jsonl" 2>>"$LOG"
  echo "nccl-small-Ring-LL rc=$? $(($(date +%s) - t0))s" | tee -a "$SUMMARY"
fi

# Busbw table (GB/s) of every timed run, sizes as columns.
python3 - "$RES" <<'EOF' | tee -a "$SUMMARY"
import glob, json, os, sys
res = sys.argv[1]
rows = {}
for f in sorted(glob.glob(os.path.join(res, "*.json*"))):
    name = os.path.basename(f).split(".")[0]
    if name.startswith("correct"):
        continue
    try:
        if f.endswith(".jsonl"):
            rs = [json.loads(l) for l in open(f) if l.strip()]
        else:
            rs = json.load(open(f))["results"]
    except Exception as e:
        print(name, "unreadable:", e)
        continue
    key = "time_us" if "small" in name else "busbw_gbs"
    rows[name] = {r["bytes"]: r.get(key) for r in rs}
for name, r in rows.items():
    print(f"{name:32s} " + " ".join(f"{b}:{v:.2f}" for b, v in sorted(r.items()) if v is not None))
EOF
# Channel scaling of the new build (is one CTA's pipeline the limit?).
run "channels32-new-Ring-Simple" "$HERE/planner" --cuda-graph "$HERE/kernels" --pair Ring/Simple --channels 32 "${PERF[@]}"
tar -C "$OUT" -czf "$OUT/res.tar.gz" res && rm -rf "$RES"
echo "# done $(date -u +%FT%TZ) after $(($(date +%s) - START))s" | tee -a "$SUMMARY"
