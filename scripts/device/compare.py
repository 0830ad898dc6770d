#!/usr/bin/env python3
"""Compare `planner run --json` results with nccl_ref.py output (run locally on
the files a device sweep brought back). Prints a CSV of every size and the
target ratios of issue 5.

Usage: compare.py RESULTS_DIR [--nccl-fallback OTHER_RESULTS_DIR] > table.csv
RESULTS_DIR holds perf-small-<pair>.json, perf-large-<pair>.json and
nccl-<pair>.jsonl as sweep.sh writes them (pair like Ring-LL128).
"""
import glob
import json
import os
import sys

PAIRS = ["Ring-LL", "Ring-LL128", "Ring-Simple", "Tree-LL", "Tree-LL128", "Tree-Simple"]


def ours(path):
    d = json.load(open(path))
    return {r["bytes"]: r for r in d["results"]}, d


def nccl(path):
    out = {}
    for line in open(path):
        r = json.loads(line)
        out[r["bytes"]] = r
    return out


def main():
    root = sys.argv[1]
    fallback = sys.argv[3] if len(sys.argv) > 3 and sys.argv[2] == "--nccl-fallback" else None
    rows = []
    targets = []
    meta = None
    for p in PAIRS:
        o = {}
        for part in ("small", "large"):
            f = os.path.join(root, f"perf-{part}-{p}.json")
            if os.path.exists(f):
                res, meta = ours(f)
                o.update(res)
        nf = os.path.join(root, f"nccl-{p}.jsonl")
        if not os.path.exists(nf) and fallback:
            nf = os.path.join(fallback, f"nccl-{p}.jsonl")
        if not o or not os.path.exists(nf):
            continue
        n = nccl(nf)
        for b in sorted(o):
            if b not in n:
                continue
            r, q = o[b], n[b]
            t_ratio = r["time_us"] / q["time_us"]
            bw_ratio = r["busbw_gbs"] / q["busbw_gbs"] if q["busbw_gbs"] > 0 else float("nan")
            rows.append((p, b, r["n_channels"], r["n_threads"], r["time_us"], r["busbw_gbs"], r["wrong"],
                         q["time_us"], q["busbw_gbs"], t_ratio, bw_ratio, q["nccl_version"]))
            if p in ("Ring-Simple", "Ring-LL128") and b >= 64 << 20:
                targets.append((p, b, "busbw ratio >= 0.9", bw_ratio, bw_ratio >= 0.9))
            if p == "Ring-LL" and b <= 64 << 10:
                targets.append((p, b, "time ratio <= 1.2", t_ratio, t_ratio <= 1.2))
    print("pair,bytes,channels,threads,ours_time_us,ours_busbw_gbs,ours_wrong,nccl_time_us,nccl_busbw_gbs,time_ratio,busbw_ratio,nccl_version")
    for r in rows:
        print("%s,%d,%d,%d,%.2f,%.2f,%d,%.2f,%.2f,%.3f,%.3f,%s" % r)
    if meta:
        print("# ours: %s; driver %s; NVRTC %s" % (", ".join(meta["device"]["gpus"]), meta["device"]["driver_version"],
                                                    meta["device"]["nvrtc_version"]))
    ok = sum(1 for t in targets if t[4])
    print("# targets met: %d of %d" % (ok, len(targets)))
    for t in targets:
        if not t[4]:
            print("# MISSED %s %d B: %s is %.3f" % (t[0], t[1], t[2], t[3]))


if __name__ == "__main__":
    main()
