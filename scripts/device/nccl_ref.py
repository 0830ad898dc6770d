#!/usr/bin/env python3
"""NCCL reference timings for `planner run`, nccl-tests style, through PyTorch.

Two processes (one per GPU, torch.multiprocessing), NCCL pinned to one
algorithm/protocol pair with NCCL_ALGO / NCCL_PROTO, in-place float32 sum
all-reduce, the timed iterations captured in one CUDA graph and replayed once
between two CUDA events (like nccl-tests -G). Prints one JSON object per size:
  {"pair", "bytes", "time_us" (mean over ranks), "algbw_gbs", "busbw_gbs", "nccl_version", ...}

Usage: nccl_ref.py --pair Ring/LL --sizes 8..4G [--iters-small 200 --iters-large 10 --small-max 64K] [--out FILE]
NVLink multicast stays off: NCCL_NVLS_ENABLE=0 (set here too, before NCCL loads).
"""
import argparse
import json
import os
import socket
import sys

for k, v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ[k] = v


def parse_size(text):
    text = text.strip().upper().replace("IB", "").replace("B", "")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if text and text[-1] in mult:
        return int(float(text[:-1]) * mult[text[-1]])
    return int(text)


def parse_sizes(text):
    if ".." not in text:
        return [parse_size(text)]
    lo, hi = (parse_size(t) for t in text.split(".."))
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= 2
    return out


def worker(rank, world, args, port, results):
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, device_id=dev)
    stream = torch.cuda.Stream()
    out = []
    for size in args.sizes:
        n = max(size // 4, 1)
        iters = args.iters_small if size <= args.small_max else args.iters_large
        x = torch.ones(n, dtype=torch.float32, device=dev)
        with torch.cuda.stream(stream):
            for _ in range(args.warmup):
                dist.all_reduce(x)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(iters):
                dist.all_reduce(x)
        graph.replay()  # warm replay
        torch.cuda.synchronize()
        dist.barrier(device_ids=[rank])
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(stream):
            start.record()
            graph.replay()
            end.record()
        end.synchronize()
        t_us = torch.tensor([start.elapsed_time(end) * 1000.0 / iters], dtype=torch.float64, device=dev)
        dist.all_reduce(t_us)  # sum over ranks
        t_us = t_us.item() / world
        del graph
        if rank == 0:
            algbw = n * 4 / (t_us * 1e3)
            out.append({
                "pair": args.pair, "bytes": n * 4, "time_us": t_us, "algbw_gbs": algbw,
                "busbw_gbs": algbw * 2 * (world - 1) / world, "iters": iters,
                "nccl_version": ".".join(str(v) for v in torch.cuda.nccl.version()),
                "torch": torch.__version__, "in_place": True, "graph": True,
            })
    dist.destroy_process_group()
    if rank == 0:
        results.extend(out)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--pair", required=True, help="ALGO/PROTO, e.g. Ring/LL128")
    p.add_argument("--sizes", required=True)
    p.add_argument("--iters-small", type=int, default=200, help="timed iterations up to --small-max")
    p.add_argument("--iters-large", type=int, default=10, help="timed iterations above 64 KiB")
    p.add_argument("--small-max", default="64K")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--out")
    args = p.parse_args()
    algo, proto = args.pair.split("/")
    os.environ["NCCL_ALGO"] = algo
    os.environ["NCCL_PROTO"] = proto
    args.sizes = parse_sizes(args.sizes)
    args.small_max = parse_size(args.small_max)
    import torch
    import torch.multiprocessing as mp

    world = torch.cuda.device_count()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    manager = mp.Manager()
    results = manager.list()
    mp.spawn(worker, args=(world, args, port, results), nprocs=world, join=True)
    lines = [json.dumps(r) for r in results]
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.out:
        with open(args.out, "a") as f:
            f.write(text)


if __name__ == "__main__":
    main()
