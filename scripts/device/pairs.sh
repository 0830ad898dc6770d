#!/usr/bin/env bash
# Every pair planner's kernels run (NCCL's Ring/Tree x LL/LL128/Simple, and planner's own OneShot/LL and
# TwoShot/Simple), all-reduce f32, on the one GPU and as 2/4/8 virtual ranks, 8 B..16 MiB; every output element is
# checked (#wrong must be 0: `planner run` exits 1 otherwise). Issue 23's acceptance run after the kernel registry.
#
# Here (dev machine): cargo build --release
#   mkdir -p .devcarry/pairs && cp target/release/planner scripts/device/pairs.sh .devcarry/pairs/
# There (device tool, kind nvidia-h200, carry [".devcarry/pairs"]): bash .devcarry/pairs/pairs.sh
# Prints one line per run and the summary "pairs: R runs, F failed" (must be 0 failed). Outputs in $OUT/pairs.txt.
set -u
# ABSOLUTE SAFETY RULE: NVLink multicast stays off for every process started here.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/pairs-out}
mkdir -p "$OUT"
HERE=$(cd "$(dirname "$0")" && pwd)
PLANNER=$HERE/planner
SWEEP=${SWEEP:-8..16M}
RUNS=0 FAILED=0
: > "$OUT/pairs.txt"
nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version --format=csv >> "$OUT/pairs.txt" 2>&1
for pair in Ring/LL Ring/LL128 Ring/Simple Tree/LL Tree/LL128 Tree/Simple OneShot/LL TwoShot/Simple; do
  for n in 1 2 4 8; do
    RUNS=$((RUNS + 1))
    if [ "$n" = 1 ]; then extra=(); else extra=(--virtual-ranks "$n" --channels 8); fi
    echo "== run --pair $pair ${extra[*]} --sweep $SWEEP" >> "$OUT/pairs.txt"
    timeout 180 "$PLANNER" run --pair "$pair" "${extra[@]}" --sweep "$SWEEP" --iters 3 --warmup 1 --timeout 10 \
      >> "$OUT/pairs.txt" 2>&1
    rc=$?
    wrong=$(awk '/^\|/ {print}' "$OUT/pairs.txt" | tail -n 1)
    if [ $rc -eq 0 ]; then echo "ok            $pair ranks $n"; else FAILED=$((FAILED + 1)); echo "FAILED exit $rc $pair ranks $n"; fi
  done
done
echo "pairs: $RUNS runs, $FAILED failed"
