#!/usr/bin/env bash
# planner topo beside nvidia-smi topo -m on the device: the CPU and NUMA affinity columns must agree (issue 26).
# Usage (device tool, carrying target/release/planner): scripts/device/topo_affinity.sh
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } >"$out/machine.txt" 2>&1
nvidia-smi topo -m >"$out/nvidia-smi-topo-m.txt" 2>&1
target/release/planner topo >"$out/planner-topo.txt" 2>"$out/planner-topo-stderr.txt"
target/release/planner topo --json >"$out/planner-topo.json" 2>/dev/null
cat "$out/nvidia-smi-topo-m.txt" "$out/planner-topo.txt"
