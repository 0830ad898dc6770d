"""Two NCCL ranks on one GPU as two 'nodes' (distinct NCCL_HOSTID), so every hop is NET/Socket.

Launched by scripts/device/socket_capture.sh with torchrun --nproc_per_node=2. Each rank sets its own NCCL_HOSTID
before NCCL starts (NCCL hashes it into the host hash, init.cc getHostHash), so NCCL sees 2 nodes of 1 GPU and both
ranks may share GPU 0. Prints one CSV line per (size, run) on rank 0: case,bytes,time_us (eager all_reduce, float32,
median of ITERS calls timed with CUDA events after WARMUP calls, as nccl-tests' out-of-place time).
"""
import os
import statistics
import sys

rank = int(os.environ["RANK"])
os.environ["NCCL_HOSTID"] = f"planner-socket-node{rank}"
# ABSOLUTE SAFETY RULE: NVLink multicast stays off (set again here in case a launcher dropped it).
os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
os.environ["NVSHMEM_DISABLE_NVLS"] = "1"

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

case = sys.argv[1]
sizes = [int(s) for s in sys.argv[2].split(",")]
iters = int(os.environ.get("ITERS", "20"))
warmup = int(os.environ.get("WARMUP", "5"))

torch.cuda.set_device(0)
dist.init_process_group("nccl", device_id=torch.device("cuda", 0))
if rank == 0:
    print(f"# torch {torch.__version__} nccl {'.'.join(map(str, torch.cuda.nccl.version()))}", flush=True)
for nbytes in sizes:
    n = max(1, nbytes // 4)
    src = torch.ones(n, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    times = []
    for i in range(warmup + iters):
        dst.copy_(src)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dist.all_reduce(dst)
        end.record()
        end.synchronize()
        if i >= warmup:
            times.append(start.elapsed_time(end) * 1000.0)
    ok = bool(torch.all(dst == 2.0).item())
    if rank == 0:
        print(f"{case},{n * 4},{statistics.median(times):.2f},{'ok' if ok else 'WRONG'}", flush=True)
dist.barrier()
dist.destroy_process_group()
