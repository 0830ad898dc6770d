#!/usr/bin/env bash
# NCCL's socket path on the 1-GPU H200 (kind nvidia-h200): two ranks on GPU 0 with distinct NCCL_HOSTID (two nodes of
# one GPU), so NCCL connects them through NET/Socket, with P2P and SHM off as in issue 27's 2x H200 case. PyTorch's
# NCCL (2.28.9 there). Cases: NCCL's own choice, Ring pinned, Tree pinned, NCCL's choice over lo. For each: rank 0's INFO log (INIT, GRAPH,
# ENV, NET, TUNING), NCCL's topology and graph dumps, and eager all-reduce times per size (CSV). About 3 minutes.
# There (device tool, kind nvidia-h200): bash scripts/device/socket_capture.sh   (writes into $OUT)
set -u
# ABSOLUTE SAFETY RULE: NVLink multicast stays off for every process started here.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/socket-out}
mkdir -p "$OUT"
HERE=$(cd "$(dirname "$0")" && pwd)
SIZES=${SIZES:-8,64,512,4096,32768,65536,262144,1048576,4194304,16777216,67108864}
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; ip -o link 2>/dev/null | awk '{print $2}';
  for d in /sys/class/net/*; do echo "$d speed=$(cat $d/speed 2>/dev/null)"; done; } >"$OUT/machine.txt" 2>&1
run_case() {
  local name=$1; shift
  local dir=$OUT/$name
  mkdir -p "$dir"
  env "$@" NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH,ENV,NET,TUNING \
    NCCL_DEBUG_FILE="$dir/nccl.%h.%p.log" NCCL_TOPO_DUMP_FILE="$dir/topo.xml" NCCL_GRAPH_DUMP_FILE="$dir/graph.xml" \
    timeout 200 torchrun --standalone --nproc_per_node=2 "$HERE/socket_2node.py" "$name" "$SIZES" \
    >"$dir/times.csv" 2>"$dir/stderr.txt"
  echo "$name: exit $? $(grep -c ',ok$' "$dir/times.csv") sizes ok, $(grep -c WRONG "$dir/times.csv") wrong" >>"$OUT/summary.txt"
}
: >"$OUT/summary.txt"
run_case default X_UNUSED=1
run_case ring NCCL_ALGO=Ring
run_case tree NCCL_ALGO=Tree
# The same over the loopback interface: is the ~4.5 ms floor the eth0 path (the VM shapes it through ifb devices)?
run_case default-lo NCCL_SOCKET_IFNAME=lo
# Keep the logs small enough to come back: per-call lines only for the first sizes.
for f in "$OUT"/*/nccl.*.log; do
  [ -f "$f" ] || continue
  s=$(stat -c %s "$f"); [ "$s" -gt 4000000 ] && { head -c 4000000 "$f" >"$f.cut" && mv "$f.cut" "$f"; }
done
cat "$OUT/summary.txt"
# The device tool brings back at most a few files: one archive of everything.
(cd "$OUT" && tar czf /tmp/socket-capture.tgz . && mv /tmp/socket-capture.tgz "$OUT/")
