#!/usr/bin/env bash
# planner on a one-GPU machine with the live probe (issue 14): topo, channels, explain --size 16M and
# explain --sweep 8..1G --json, each with its exit code, plus NCCL's own graph lines for one rank when
# PyTorch's NCCL is there (a 1-rank all-reduce with NCCL_DEBUG=INFO, SUBSYS INIT,GRAPH).
#
# Here (dev machine), from the worktree:
#   cargo build --release
#   mkdir -p .dev/one_gpu && cp target/release/planner scripts/device/one_gpu.sh .dev/one_gpu/
# There (device tool, kind nvidia-h200, carry [".dev/one_gpu"]):
#   bash .dev/one_gpu/one_gpu.sh
# Writes into $OUT:
#   topo.txt, channels.txt, explain-16M.txt, sweep.json   planner's outputs, "exit code: N" appended to the .txt
#   stderr.txt                                            every command's stderr (probe warnings), in order
#   nccl-1rank.log                                        NCCL's own log for one rank (when torch is installed)
# Expected: every exit code 0; channels.txt shows "1 GPU(s) x 1 node(s) = 1 ranks", "Pattern 4, crossNic 0,
# nChannels 32, bw 60.000000/60.000000, type LOC/PIX, sameChannels 1" (sm90, NCCL 2.25+: MAXCHANNELS 64) and
# "runtime channels: 64"; explain-16M.txt ends with "One rank: NCCL runs no algorithm, protocol or channel.";
# sweep.json has "one_rank_note". nccl-1rank.log (NCCL 2.25+) should show the same Pattern lines and
# "64 coll channels".
set -u
# ABSOLUTE SAFETY RULE: NVLink multicast stays off for every process started here.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/one-gpu-out}
mkdir -p "$OUT"
HERE=$(cd "$(dirname "$0")" && pwd)
PLANNER=$HERE/planner

run() { # run NAME ARGS...: stdout to $OUT/NAME, stderr appended to stderr.txt, exit code noted
  local name=$1
  shift
  echo "== planner $*" >> "$OUT/stderr.txt"
  timeout 120 "$PLANNER" "$@" > "$OUT/$name" 2>> "$OUT/stderr.txt"
  local rc=$?
  echo "exit code: $rc" >> "$OUT/stderr.txt"
  case $name in *.txt) echo "exit code: $rc" >> "$OUT/$name" ;; esac
}

nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version --format=csv > "$OUT/gpus.txt" 2>&1
run topo.txt topo
run channels.txt channels
run explain-16M.txt explain --size 16M
run sweep.json explain --sweep 8..1G --json

# NCCL's own view of one rank (graph lines, channel count), when PyTorch is there.
if python3 -c "import torch" 2>/dev/null; then
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH NCCL_DEBUG_FILE="$OUT/nccl-1rank.log" \
    MASTER_ADDR=127.0.0.1 MASTER_PORT=29533 RANK=0 WORLD_SIZE=1 timeout 300 python3 - <<'PY' >> "$OUT/stderr.txt" 2>&1
import torch, torch.distributed as dist
torch.cuda.set_device(0)
dist.init_process_group("nccl")
x = torch.ones(1 << 20, device="cuda")
dist.all_reduce(x)
torch.cuda.synchronize()
print("nccl", torch.cuda.nccl.version(), "all_reduce ok:", x[0].item() == 1.0)
dist.destroy_process_group()
PY
  echo "torch exit code: $?" >> "$OUT/stderr.txt"
fi
ls -l "$OUT"
