#!/usr/bin/env bash
# NCCL's environment variables (issue 14) against real NCCL on the 2 x H200 (kind nvidia-h200-x2), in one command:
# for each case NCCL runs one pinned Ring/Simple all-reduce sweep (planner verify --backend nccl) with the case's
# variables and NCCL_DEBUG=INFO, then `planner audit` compares that init log (graphs, channels, TUNING table) with the
# model under the log's own variables. About 2 minutes.
#
# Here (dev machine), at the repository root:
#   cargo build --release
# There (device tool `run`, kind nvidia-h200-x2, timeout_s 600, carry ["target/release/planner"]):
#   bash scripts/device/nccl_env.sh
# Writes into $OUT: one CASE.txt per case (the variables, the log's channel lines, the audit's verdict) and
# summary.txt. What planner predicts on this machine (fixture h200x2-nvswitch-vm, NVLS off):
#   default                  24 coll channels, ring 12 x 30 GB/s NVL          (audit: no difference)
#   NCCL_MAX_NCHANNELS=4      4 coll channels, same graphs                    (connect.cc:503)
#   NCCL_MIN_NCHANNELS=32    32 coll channels, same graphs                    (connect.cc:505)
#   NCCL_MAX_CTAS=8           8 coll channels                                 (init.cc:2025-2035, connect.cc:503)
#   NCCL_P2P_DISABLE=1        4 coll channels, ring 2 x 20 GB/s PHB, "via SHM" (paths.cc:250-251,762-775)
#   NCCL_NTHREADS=256         same graphs and TUNING table; Ring/Simple calls run 288 threads (enqueue.cc:2106-2107)
# Each CASE.txt should end with "audit: no differences"; any difference it lists is the finding.
set -u
# ABSOLUTE SAFETY RULE: NVLink multicast stays off for every process started here.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/nccl-env-out}
mkdir -p "$OUT"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PLANNER=${PLANNER:-$ROOT/target/release/planner}
WORK=$(mktemp -d)

run_case() {
  local name=$1; shift
  local dir=$WORK/$name
  mkdir -p "$dir"
  {
    echo "case: $name: $*"
    env "$@" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH,ENV,TUNING NCCL_DEBUG_FILE="$dir/nccl.%h.%p.log" \
      NCCL_TOPO_DUMP_FILE="$dir/topo.xml" \
      timeout 240 "$PLANNER" verify --backend nccl --pair Ring/Simple --sweep 1M..4M --iters 5 --warmup 2 \
      --repeats 1 >"$dir/verify.txt" 2>&1
    echo "verify exit $?"
    # Rank 0's init log: the one that prints "rank 0 nRanks".
    local log
    log=$(grep -l "comm .* rank 0 nRanks" "$dir"/nccl.*.log 2>/dev/null | head -1)
    if [ -z "$log" ]; then
      echo "no rank-0 NCCL log; verify said:"; tail -5 "$dir/verify.txt"; return
    fi
    grep -E "set by environment|coll channels|Pattern 4,|Channel 00/|via (P2P|SHM)" "$log" | head -12
    local topo=$dir/topo.xml
    [ -f "$topo" ] || topo=$(ls "$dir"/*.xml 2>/dev/null | head -1)
    local audit
    audit=$("$PLANNER" audit --topo "$topo" "$log" 2>&1)
    echo "$audit" | tail -15
    if echo "$audit" | grep -qiE "no difference|0 difference"; then echo "audit: no differences"; fi
  } >"$OUT/$name.txt" 2>&1
  echo "$name: $(tail -1 "$OUT/$name.txt")" >>"$OUT/summary.txt"
}

: >"$OUT/summary.txt"
run_case default X_UNUSED=1
run_case max-nchannels-4 NCCL_MAX_NCHANNELS=4
run_case min-nchannels-32 NCCL_MIN_NCHANNELS=32
run_case max-ctas-8 NCCL_MAX_CTAS=8
run_case p2p-disable NCCL_P2P_DISABLE=1
run_case nthreads-256 NCCL_NTHREADS=256
cat "$OUT/summary.txt"
rm -rf "$WORK"
