#!/usr/bin/env bash
# planner verify on a lent GPU machine: a short smoke run, then the full sweep
# in one process, then the same NCCL sweep as 2 processes under torchrun-style
# launcher variables. Stops after the smoke run if it fails.
#
# Here (dev machine), from the worktree:
#   cargo build --release
#   mkdir -p /work/main/.dev/verify && cp target/release/planner scripts/device/verify.sh /work/main/.dev/verify/
# There (device tool, kind nvidia-h200-x2, carry [".dev/verify"]):
#   bash .dev/verify/verify.sh [BACKEND]        # BACKEND: nccl (default) or both
# Writes into $OUT (at most 8 files come back):
#   machine.txt             date, host, driver, GPUs, clocks
#   smoke.txt               the smoke run's output
#   verify-1proc.json/.txt  the full sweep, one process for both GPUs
#   verify-2proc.json       the NCCL sweep, one process per GPU (RANK/WORLD_SIZE/...)
#   verify-2proc-rank0.txt, verify-2proc-rank1.txt
set -u
# ABSOLUTE SAFETY RULE: NVLink multicast stays off for every process started here
# (planner sets these again in every child it starts).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/verify-out}
mkdir -p "$OUT"
HERE=$(cd "$(dirname "$0")" && pwd)
PLANNER=$HERE/planner
BACKEND=${1:-nccl}
SIZES=${SIZES:-8..4G}

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "hostname: $(cat /proc/sys/kernel/hostname)"
  echo "kernel: $(uname -r)"
  nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  ls -l /usr/lib/x86_64-linux-gnu/libnccl.so* 2>&1
  env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM)_' | sort
} > "$OUT/machine.txt" 2>&1

echo "== smoke"
timeout 100 "$PLANNER" verify --backend "$BACKEND" --sizes 8..4M --iters 5 --warmup 2 --repeats 3 \
  --out "$OUT/smoke.json" > "$OUT/smoke.txt" 2>&1
rc=$?
echo "smoke exit $rc" | tee -a "$OUT/smoke.txt"
if [ $rc -ne 0 ] || ! grep -q "picks" "$OUT/smoke.txt"; then
  tail -c 6000 "$OUT/smoke.txt"
  exit 1
fi
rm -f "$OUT/smoke.json"
grep -A12 "^picks" "$OUT/smoke.txt" | head -8

echo "== full sweep, one process ($BACKEND, $SIZES)"
start=$(date +%s)
timeout 200 "$PLANNER" verify --backend "$BACKEND" --sizes "$SIZES" \
  --out "$OUT/verify-1proc.json" > "$OUT/verify-1proc.txt" 2>&1
echo "exit $? after $(( $(date +%s) - start )) s"
sed -n '/^prediction error/,$p' "$OUT/verify-1proc.txt" | head -40

echo "== NCCL sweep, 2 processes (RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT)"
start=$(date +%s)
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29533 \
    timeout 200 "$PLANNER" verify --backend nccl --sizes "$SIZES" \
    --out "$OUT/verify-2proc.json" > "$OUT/verify-2proc-rank$r.txt" 2>&1 &
done
wait
echo "done after $(( $(date +%s) - start )) s"
tail -n 3 "$OUT/verify-2proc-rank1.txt"
sed -n '/^picks/,$p' "$OUT/verify-2proc-rank0.txt" | head -12
