#!/usr/bin/env python3
"""tests/data/expect-own/points.csv from planner's own 2x H200 NCCL runs (bench/results/verify-h200x2-nccl-*-2proc.json):
NCCL's pinned pairs and its free choice, eager and CUDA graph, every other size of the sweep (8 B, 32 B, ... 4 GiB),
in the columns of tests/data/expect-train/points.csv. Run from the repository root."""
import csv, json

RUNS = [("H01", "bench/results/verify-h200x2-nccl-eager-2proc.json", "eager"),
        ("H02", "bench/results/verify-h200x2-nccl-graph-2proc.json", "graph")]
COLS = ["case", "machine", "nodes", "gpus_per_node", "collective", "nccl_version", "env", "size_bytes",
        "measured_busbw_gbs", "measured_time_us", "column", "kind", "planner_topology_args", "source", "status",
        "launch", "dtype", "gpu_model", "network"]
out = csv.writer(open("tests/data/expect-own/points.csv", "w", newline=""), lineterminator="\n")
out.writerow(COLS)
for case, path, launch in RUNS:
    for r in json.load(open(path))["rows"]:
        if r["backend"] != "nccl" or r["status"] != "ok" or (r["bytes"].bit_length() - 1) % 2 != 1:
            continue
        pair = r.get("pair")
        args = "explain --fixture h200x2-nvswitch-vm --nccl-version 2.28"
        env = "default"
        if pair:
            args += f" --algo {pair['algo'].lower()} --proto {pair['proto'].lower()}"
            env = f"NCCL_ALGO={pair['algo']} NCCL_PROTO={pair['proto']}"
        out.writerow([case, "2x H200 SXM VM, 18 NVLinks each to an NVSwitch", 1, 2, "all-reduce", "2.28.3", env,
                      r["bytes"], "", f"{r['median_us']:.3f}", "out-of-place", "verify-median", args, path,
                      "healthy", launch, "float", "H200 SXM", "none (1 node)"])
