#!/bin/sh
# Time `planner calibrate` on 30,000 distinct sizes of one pinned pair (issue 28: the fit cost ~1.8 ms per size).
# Usage: fit-scaling.sh BEFORE_BINARY AFTER_BINARY [WORKDIR]. Writes WORKDIR/big.txt: an nccl-tests text file of
# all_reduce Ring/LL on 2 GPUs, 30,000 sizes log-spaced from 8 B to 4 GiB, time = 10.5 us + bytes / 120 GB/s (the
# in-place column 1 % slower), then prints `time` of each binary's `calibrate big.txt -o out.json` (5-fold check
# included, the default).
set -e
BEFORE=$1; AFTER=$2; W=${3:-/tmp/fit-scaling}
mkdir -p "$W"
python3 - "$W/big.txt" <<'PY'
import sys, random
head = """# nccl-tests version 2.19.6 nccl-headers=22803 nccl-library=22803
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 2 minBytes 8 maxBytes 4294967296 step: 2(factor) warmup iters: 2 iters: 10 agg iters: 1 validation: 1 graph: 0 unalign: 0
#
# Using devices
#  Rank  0 Group  0 Pid   1412 on         vm device  0 [0000:00:06] NVIDIA H200
#  Rank  1 Group  0 Pid   1412 on         vm device  1 [0000:00:07] NVIDIA H200
vm:1412:1412 [0] NCCL INFO NCCL_ALGO set by environment to Ring
vm:1412:1412 [0] NCCL INFO NCCL_PROTO set by environment to LL
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)"""
n = 30000
sizes = sorted({max(8, int(round(8 * 2 ** (i * 29 / (2 * n - 1)))) // 4 * 4) for i in range(2 * n)})
random.seed(1)
sizes = sorted(random.sample(sizes, n))
out = [head]
for b in sizes:
    t = 10.5 + b / 120e3
    bw = b / t / 1e3
    out.append("%12d %13d     float     sum      -1 %8.2f %7.2f %7.2f       0 %8.2f %7.2f %7.2f       0"
               % (b, b // 4, t, bw, bw, t * 1.01, bw, bw))
out.append("# Out of bounds values : 0 OK")
open(sys.argv[1], "w").write("\n".join(out) + "\n")
PY
for bin in "$BEFORE" "$AFTER"; do
    echo "== $bin"
    /usr/bin/time -f "wall %e s, user %U s, max rss %M KiB" "$bin" calibrate "$W/big.txt" -o "$W/out.json" 2>&1 \
        | grep -E "fitted|wall"
done
