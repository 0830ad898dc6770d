#!/usr/bin/env bash
# The whole pipeline on a lent GPU machine (kind nvidia-h200-x2), in one command:
# live probe -> search -> model -> native kernels and NCCL, with the binary of
# one commit. Builds nothing there.
#
# Here (dev machine):
#   cargo build --release
#   mkdir -p /work/main/.dev/integration && cp target/release/planner scripts/device/integration.sh /work/main/.dev/integration/
# There (device tool, carry [".dev/integration"]):
#   bash .dev/integration/integration.sh          (or PARTS="run small" bash ...)
# Writes into $OUT (8 files at most come back):
#   machine.txt        date, kernel, driver, GPUs, NCCL library
#   probe-topo.xml     planner topo --xml (live probe)
#   live.txt           planner topo, channels, explain on the live probe (stderr included)
#   calls.txt          planner explain --nccl-calls 4..4G (the model's per-call choices on the live probe)
#   run.txt            planner run, every Ring/Tree x LL/LL128/Simple pair on the search's plan, + virtual ranks
#   verify.json/.txt   planner verify --backend both --sweep 8..4G on the live probe with the planner's search
#   small.tar.gz       NCCL at 8 B..64 KiB (PROC_SIZES): one process (eager, CUDA graphs) vs 2 processes under launcher
#                      variables (eager): result files and their text output
# PARTS selects what runs (default: all of live run verify small).
set -u
PARTS=${PARTS:-live run verify small}
want() { case " $PARTS " in *" $1 "*) return 0;; *) return 1;; esac; }
# ABSOLUTE SAFETY RULE: NVLink multicast stays off for every process started here.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/integration-out}
mkdir -p "$OUT"
HERE=$(cd "$(dirname "$0")" && pwd)
PLANNER=$HERE/planner
T0=$(date +%s)
elapsed() { echo $(( $(date +%s) - T0 )); }

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "kernel: $(uname -r)"
  nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version --format=csv
  ls -l /usr/lib/x86_64-linux-gnu/libnccl.so* 2>&1
  env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM)_' | sort
} > "$OUT/machine.txt" 2>&1

if want live; then
{
  echo "== planner topo --xml (exit code below)"
  timeout 60 "$PLANNER" topo --xml -o "$OUT/probe-topo.xml"; echo "exit $?"
  echo "== planner topo"; timeout 60 "$PLANNER" topo; echo "exit $?"
  echo "== planner channels"; timeout 60 "$PLANNER" channels; echo "exit $?"
  echo "== planner explain --size 16M"; timeout 60 "$PLANNER" explain --size 16M; echo "exit $?"
  echo "== planner explain --nccl-table"; timeout 60 "$PLANNER" explain --nccl-table; echo "exit $?"
} > "$OUT/live.txt" 2>&1
timeout 60 "$PLANNER" explain --sweep 4..4G --nccl-calls > "$OUT/calls.txt" 2>&1
echo "live views done at $(elapsed) s"
fi

if want run; then
{
  for pair in Ring/LL Ring/LL128 Ring/Simple Tree/LL Tree/LL128 Tree/Simple; do
    echo "== run $pair 8..1G (search plan, CUDA graph, in place)"
    timeout 60 "$PLANNER" run --pair "$pair" --sweep 8..1G --cuda-graph --in-place --iters 5 --warmup 2 --timeout 10
    echo "exit $?"
  done
  # Virtual ranks: n ranks as n buffers on GPU 0; 8 channels keep n x 8 CTAs co-resident (132 SMs).
  for n in 2 4 8; do
    for pair in Ring/LL Ring/LL128 Ring/Simple Tree/LL Tree/LL128 Tree/Simple; do
      echo "== run $pair --virtual-ranks $n --channels 8 8..64M"
      timeout 60 "$PLANNER" run --pair "$pair" --virtual-ranks "$n" --channels 8 --sweep 8..64M --iters 3 --warmup 1 --timeout 10
      echo "exit $?"
    done
  done
} > "$OUT/run.txt" 2>&1
echo "runs done at $(elapsed) s"
grep -c "exit 0" "$OUT/run.txt"; grep "exit [1-9]" "$OUT/run.txt" | head
fi

if want verify; then
timeout 300 "$PLANNER" verify --backend both --sweep 8..4G --timeout 30 --out "$OUT/verify.json" \
  > "$OUT/verify.txt" 2>&1
echo "verify exit $?" >> "$OUT/verify.txt"
echo "verify done at $(elapsed) s"
fi
if want small; then
SMALL=/tmp/small; mkdir -p $SMALL
timeout 100 "$PLANNER" verify --backend nccl --sweep "${PROC_SIZES:-8..64K}" --timeout 30 --out $SMALL/nccl-eager-1proc.json \
  > $SMALL/nccl-eager-1proc.txt 2>&1
timeout 100 "$PLANNER" verify --backend nccl --cuda-graph --sweep "${PROC_SIZES:-8..64K}" --timeout 30 \
  --out $SMALL/nccl-graph-1proc.json > $SMALL/nccl-graph-1proc.txt 2>&1
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29541 \
    timeout 100 "$PLANNER" verify --backend nccl --sweep "${PROC_SIZES:-8..64K}" --timeout 30 \
    --out $SMALL/nccl-eager-2proc.json > $SMALL/nccl-eager-2proc-rank$r.txt 2>&1 &
done
wait
tar -C $SMALL -czf "$OUT/small.tar.gz" .
echo "small sizes done at $(elapsed) s"
fi
ls -la "$OUT"
