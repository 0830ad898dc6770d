#!/usr/bin/env bash
# Live probe on a lent GPU machine, next to NCCL's own view of the same machine.
#
# Here (dev machine), from the worktree:
#   cargo build --release
#   mkdir -p /work/main/.dev/probe && cp target/release/planner scripts/device/probe.sh /work/main/.dev/probe/
# There (device tool, kind nvidia-h200-x2, carry [".dev/probe"]):
#   bash .dev/probe/probe.sh
# Writes into $OUT (at most 8 files come back):
#   probe-topo.xml      planner topo --xml (the live probe's NCCL topology XML)
#   probe-stderr.txt    the probe's warnings (one line per oddity)
#   probe-topo.txt      planner topo on the live probe (matrix + NCCL paths)
#   nvidia-smi-topo-m.txt
#   nccl-topo.xml       NCCL's own NCCL_TOPO_DUMP_FILE (PyTorch's bundled NCCL, 2 ranks)
#   nccl-init.log       rank 0's NCCL_DEBUG=INFO log (INIT,GRAPH: the path lines)
#   machine.txt         date, host name, boot id, kernel, driver, GPUs, sysfs PCI view
set -u
# ABSOLUTE SAFETY RULE: NVLink multicast stays off for every process started here.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/probe-out}
mkdir -p "$OUT"
HERE=$(cd "$(dirname "$0")" && pwd)
PLANNER=$HERE/planner

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "hostname: $(cat /proc/sys/kernel/hostname)"
  echo "boot_id: $(cat /proc/sys/kernel/random/boot_id)"
  echo "kernel: $(uname -r)"
  nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version --format=csv
  echo "--- /sys/bus/pci/devices -> realpath, class"
  for d in /sys/bus/pci/devices/*; do
    echo "$(basename "$d") $(readlink -f "$d") $(cat "$d/class" 2>/dev/null) numa=$(cat "$d/numa_node" 2>/dev/null)"
  done
  echo "--- /sys/class/net"
  for n in /sys/class/net/*; do echo "$(basename "$n") $(readlink -f "$n") flags=$(cat "$n/flags" 2>/dev/null)"; done
  echo "--- /sys/class/infiniband"
  ls /sys/class/infiniband 2>&1
  echo "--- /proc/cpuinfo (first CPU)"
  grep -m4 -E '^(vendor_id|cpu family|model\s|model name)' /proc/cpuinfo
} > "$OUT/machine.txt" 2>&1

timeout 60 "$PLANNER" topo --xml -o "$OUT/probe-topo.xml" 2> "$OUT/probe-stderr.txt"
echo "exit code: $?" >> "$OUT/probe-stderr.txt"
timeout 60 "$PLANNER" topo > "$OUT/probe-topo.txt" 2>&1
echo "exit code: $?" >> "$OUT/probe-topo.txt"
nvidia-smi topo -m > "$OUT/nvidia-smi-topo-m.txt" 2>&1

# NCCL's own detection on the same boot (same host hash), 2 ranks, one all-reduce.
cat > /tmp/nccl_dump.py <<'PY'
import os, torch, torch.distributed as dist
rank = int(os.environ["RANK"])
# NCCL reads this when it first logs, after this point: one log file per rank.
os.environ["NCCL_DEBUG_FILE"] = f"/tmp/nccl-rank{rank}.log"
torch.cuda.set_device(rank)
dist.init_process_group("nccl")
x = torch.ones(1024, device="cuda")
dist.all_reduce(x)
torch.cuda.synchronize()
assert x[0].item() == dist.get_world_size()
dist.destroy_process_group()
PY
cd /tmp && NCCL_TOPO_DUMP_FILE="$OUT/nccl-topo.xml" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH,ENV \
  timeout 120 python3 -m torch.distributed.run --nproc_per_node=2 /tmp/nccl_dump.py > /tmp/nccl-run.txt 2>&1
echo "nccl run exit code: $?" >> "$OUT/machine.txt"
# Rank 0's log (the dump and the path lines come from rank 0), else whatever the run printed.
if [ -s /tmp/nccl-rank0.log ]; then cp /tmp/nccl-rank0.log "$OUT/nccl-init.log"
else cp /tmp/nccl-run.txt "$OUT/nccl-init.log"; fi
ls -la "$OUT"
