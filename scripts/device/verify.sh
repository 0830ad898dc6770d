#!/usr/bin/env bash
# planner verify on a lent GPU machine (kind nvidia-h200-x2), in one command:
#   1. smoke run (small sizes, both backends, CUDA graphs): decides whether the
#      native executor takes part (every native row ok with #wrong 0) or not;
#   2. the goal run: `verify --backend both --sweep 8..4G` (eager loops, as nccl-tests);
#   3. the same in CUDA-graph mode (launch overhead out, as nccl-tests -G);
#   4. the NCCL sweep in CUDA-graph mode as 2 processes under torchrun-style
#      variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT).
#
# Here (dev machine), from the worktree:
#   cargo build --release
#   mkdir -p /work/main/.dev/verify && cp target/release/planner scripts/device/verify.sh /work/main/.dev/verify/
# There (device tool, carry [".dev/verify"]):
#   bash .dev/verify/verify.sh
# Writes into $OUT (8 files, the most that come back):
#   machine.txt, smoke.txt, eager-1proc.json/.txt, graph-1proc.json/.txt,
#   graph-2proc.json, graph-2proc.txt (rank 0's output, then rank 1's)
set -u
# ABSOLUTE SAFETY RULE: NVLink multicast stays off for every process started here
# (planner sets these again in every child it starts).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/verify-out}
mkdir -p "$OUT"
HERE=$(cd "$(dirname "$0")" && pwd)
PLANNER=$HERE/planner
SIZES=${SIZES:-8..4G}
T0=$(date +%s)
elapsed() { echo $(( $(date +%s) - T0 )); }

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "hostname: $(cat /proc/sys/kernel/hostname)"
  echo "kernel: $(uname -r)"
  nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  ls -l /usr/lib/x86_64-linux-gnu/libnccl.so* 2>&1
  env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM)_' | sort
} > "$OUT/machine.txt" 2>&1

echo "== smoke (both backends, CUDA graphs, 8 B..4 MiB) at $(elapsed) s"
timeout 120 "$PLANNER" verify --backend both --cuda-graph --sweep 8..4M --iters 5 --warmup 2 --repeats 3 \
  --timeout 15 --out "$OUT/smoke.json" > "$OUT/smoke.txt" 2>&1
echo "smoke exit $?" >> "$OUT/smoke.txt"
BACKEND=nccl
if [ -s "$OUT/smoke.json" ]; then
  BACKEND=$(python3 - "$OUT/smoke.json" <<'PY'
import json, sys
rows = [r for r in json.load(open(sys.argv[1]))["rows"] if r["backend"] == "native"]
ok = rows and all(r["status"] == "ok" and r.get("wrong") == 0 for r in rows)
print("both" if ok else "nccl")
PY
)
else
  echo "smoke run gave no result file"; tail -c 4000 "$OUT/smoke.txt"; exit 1
fi
echo "native rows all ok: backend $BACKEND"
grep -A6 "^picks" "$OUT/smoke.txt" | head -6
rm -f "$OUT/smoke.json"

echo "== goal run: --backend $BACKEND --sweep $SIZES (eager) at $(elapsed) s"
timeout 200 "$PLANNER" verify --backend "$BACKEND" --sweep "$SIZES" --timeout 30 \
  --out "$OUT/eager-1proc.json" > "$OUT/eager-1proc.txt" 2>&1
echo "exit $? at $(elapsed) s"
sed -n '/^prediction error/,$p' "$OUT/eager-1proc.txt" | grep -v "^$" | head -30

echo "== CUDA graphs, one process at $(elapsed) s"
timeout 150 "$PLANNER" verify --backend "$BACKEND" --cuda-graph --sweep "$SIZES" --timeout 30 \
  --out "$OUT/graph-1proc.json" > "$OUT/graph-1proc.txt" 2>&1
echo "exit $? at $(elapsed) s"
sed -n '/^picks/,$p' "$OUT/graph-1proc.txt" | grep -v "^$" | head -8

echo "== CUDA graphs, NCCL, 2 processes (RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT) at $(elapsed) s"
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29533 \
    timeout 120 "$PLANNER" verify --backend nccl --cuda-graph --sweep "$SIZES" --timeout 30 \
    --out "$OUT/graph-2proc.json" > "$OUT/graph-2proc-rank$r.txt" 2>&1 &
done
wait
echo "done at $(elapsed) s"
{ cat "$OUT/graph-2proc-rank0.txt"; echo "=== rank 1"; cat "$OUT/graph-2proc-rank1.txt"; } > "$OUT/graph-2proc.txt"
rm -f "$OUT/graph-2proc-rank0.txt" "$OUT/graph-2proc-rank1.txt"
sed -n '/^picks/,$p' "$OUT/graph-2proc.txt" | grep -v "^$" | head -8
