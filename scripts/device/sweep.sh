#!/usr/bin/env bash
# planner executor on a lent GPU machine: correctness sweeps of every kernel
# and the benchmark against NCCL, in one call. Builds nothing: it expects the
# release binary `planner` next to this script (copied there with kernels/ and
# these scripts). Results go under $OUT: summary.txt, log.txt, results.tar.gz.
#
#   sweep.sh [PHASES]   PHASES: comma list of info,smoke,correct,dtypes,colls,virtual,perf,nccl (default all)
#
# NVLink multicast must stay off, here and in every child process.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
BIN="$HERE/planner"
OUT=${OUT:-/tmp/planner-out}
W=/tmp/planner-sweep
PHASES=${1:-info,smoke,correct,dtypes,colls,virtual,perf,nccl}
mkdir -p "$OUT" "$W/res"
SUMMARY="$OUT/summary.txt"
LOG="$OUT/log.txt"
: >"$SUMMARY"
PAIRS="Ring/LL Ring/LL128 Ring/Simple Tree/LL Tree/LL128 Tree/Simple"
START=$(date +%s)
# A phase starts only before DEADLINE seconds have passed (the tool's call limit is 10 minutes).
has() {
  if [ $(($(date +%s) - START)) -gt "${DEADLINE:-420}" ]; then
    echo "# past the deadline: skipping $1" | tee -a "$SUMMARY"
    return 1
  fi
  case ",$PHASES," in *",$1,"*) return 0 ;; *) return 1 ;; esac
}

# run NAME TIMEOUT ARGS...: one `planner run`, JSON to res/NAME.json, stderr to the log.
run() {
  local name=$1 limit=$2
  shift 2
  local t0=$(date +%s%N)
  timeout -k 5 "$limit" "$BIN" run --json "$@" >"$W/res/$name.json" 2>>"$LOG"
  local rc=$?
  local t1=$(date +%s%N)
  local wrong
  wrong=$(python3 -c "import json,sys; d=json.load(open('$W/res/$name.json')); print(sum(r['wrong'] for r in d['results']), len(d['results']))" 2>/dev/null || echo "? ?")
  printf '%-44s rc=%-3s wrong/sizes=%-10s %6.1fs  %s\n' "$name" "$rc" "$wrong" "$(( (t1 - t0) / 1000000 ))e-3" "$*" | tee -a "$SUMMARY"
}

echo "# $(date -u +%FT%TZ) phases=$PHASES" | tee -a "$SUMMARY"

if has info; then
  {
    nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
    nvidia-smi topo -m
    python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version(), 'gpus', torch.cuda.device_count())"
    ls -l /usr/lib/x86_64-linux-gnu/libnccl.so* 2>/dev/null
    "$BIN" --version
  } >"$W/res/info.txt" 2>&1
  cat "$W/res/info.txt" >>"$SUMMARY"
fi

if has smoke; then
  # One size per pair first: a hang or a wrong sum shows up in seconds.
  for p in $PAIRS; do
    run "smoke-${p/\//-}" 30 --pair "$p" --size 1M --iters 2 --warmup 1 --timeout 8
  done
  run "smoke-virtual4-Ring-Simple" 30 --virtual-ranks 4 --channels 4 --pair Ring/Simple --size 1M --iters 1 --warmup 0 --timeout 8
  if [ "$(grep -c '^smoke.*rc=0 ' "$SUMMARY")" -lt 3 ]; then
    echo "# smoke failed: skipping the rest" | tee -a "$SUMMARY"
    PHASES=info
  fi
fi

if has correct; then
  # Every pair, 8 B .. 4 GiB, out-of-place f32, every element checked; a short timing.
  for p in $PAIRS; do
    run "correct-${p/\//-}" 150 --pair "$p" --sweep 8..4G --iters 2 --warmup 1 --timeout 8
  done
fi

if has dtypes; then
  # bf16 / f16 from 3 elements up (ragged at the small end), and ragged sizes on odd channel counts.
  for p in $PAIRS; do
    run "bf16-${p/\//-}" 90 --pair "$p" --sweep 6..256M --dtype bf16 --iters 1 --warmup 0 --timeout 8
    run "ragged-${p/\//-}" 30 --pair "$p" --size 1000012 --channels 7 --iters 1 --warmup 0 --timeout 8
  done
  for p in Ring/LL Ring/LL128 Ring/Simple Tree/Simple; do
    run "f16-${p/\//-}" 90 --pair "$p" --sweep 6..256M --dtype f16 --iters 1 --warmup 0 --timeout 8
  done
fi

if has colls; then
  for c in all_gather reduce_scatter broadcast; do
    run "coll-$c" 90 --coll "$c" --pair Ring/Simple --sweep 8..1G --iters 1 --warmup 0 --timeout 8 --root 1
    run "coll-$c-inplace" 90 --coll "$c" --pair Ring/Simple --sweep 8..1G --iters 1 --warmup 0 --timeout 8 --in-place --root 1
  done
fi

if has virtual; then
  # N ranks as N buffers on GPU 0; rings alternate 0..n-1 / reversed, trees chain / binary.
  for v in 2 4 8; do
    for p in $PAIRS; do
      run "virtual$v-${p/\//-}" 60 --virtual-ranks "$v" --channels 8 --pair "$p" --sweep 8..16M --iters 1 --warmup 0 --timeout 8
    done
  done
  for c in all_gather reduce_scatter broadcast; do
    run "virtual4-$c" 60 --virtual-ranks 4 --channels 8 --coll "$c" --root 1 --sweep 8..16M --iters 1 --warmup 0 --timeout 8
  done
fi

if has perf; then
  # Benchmark, nccl-tests style: in-place, CUDA graph, NCCL's channel/thread rule per size.
  for p in ${PERF_PAIRS:-$PAIRS}; do
    run "perf-small-${p/\//-}" 60 --pair "$p" --sweep 8..64K --in-place --cuda-graph --iters 200 --warmup 20 --timeout 10
    run "perf-large-${p/\//-}" 120 --pair "$p" --sweep 128K..4G --in-place --cuda-graph --iters 10 --warmup 5 --timeout 20
  done
  # A/B: the first kernel version (kernels_v1 next to this script), same binary.
  if [ -d "$HERE/kernels_v1" ]; then
    for p in ${AB_PAIRS:-}; do
      PLANNER_KERNEL_DIR="$HERE/kernels_v1" run "perf-v1-large-${p/\//-}" 120 --pair "$p" --sweep 64M..4G --in-place --cuda-graph --iters 10 --warmup 5 --timeout 20
    done
  fi
fi

if has nccl; then
  for p in ${NCCL_PAIRS:-$PAIRS}; do
    n=${p/\//-}
    t0=$(date +%s)
    timeout -k 5 300 python3 "$HERE/nccl_ref.py" --pair "$p" --sizes 8..4G --iters-small 200 --iters-large 10 \
      --warmup 5 >"$W/res/nccl-$n.jsonl" 2>>"$LOG"
    echo "nccl-$n rc=$? $(( $(date +%s) - t0 ))s sizes=$(wc -l <"$W/res/nccl-$n.jsonl")" | tee -a "$SUMMARY"
  done
fi

tar -C "$W" -czf "$OUT/results.tar.gz" res
echo "# done $(date -u +%FT%TZ)" | tee -a "$SUMMARY"
