#!/usr/bin/env bash
# Where `explain`'s time goes on the device, beside scripts/device/explain_speed.sh's table: the machine's NCCL
# (choose_table dlopens libnccl when no --nccl-version is given), the binary's file system, syscalls.
# Carries target/release/planner (this branch) and target/planner-seed (main at 07a3d0a).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
out=${OUT:-/tmp/out}; mkdir -p "$out"
P=target/release/planner
{ md5sum $P target/planner-seed; df -hT . /tmp; ldconfig -p | grep -i -e nccl -e libcuda; echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}";
  cat /sys/kernel/mm/transparent_hugepage/enabled; command -v strace perf; } >"$out/diag.txt" 2>&1
cp $P /tmp/pl; cp target/planner-seed /tmp/seed
$P explain --fixture hgx-h200-8 --size 16M >"$out/explain-h200.txt" 2>&1
command -v strace >/dev/null && strace -f -r -o "$out/strace-h200.txt" $P explain --fixture hgx-h200-8 --size 16M >/dev/null 2>&1
python3 - "$out" <<'PY' 2>&1 | tee "$out/diag-times.txt"
import os, sys, time, statistics
def once(argv):
    t0 = time.perf_counter(); pid = os.fork()
    if pid == 0:
        fd = os.open(os.devnull, os.O_WRONLY); os.dup2(fd, 1); os.dup2(fd, 2); os.execv(argv[0], argv)
    os.wait4(pid, 0); return (time.perf_counter() - t0) * 1000
print("| binary | args | median ms | min ms |\n|---|---|---|---|")
for b in ["/tmp/seed", "/tmp/pl"]:
    for args in [["--version"], ["explain", "--fixture", "hgx-h200-8", "--size", "16M"],
                 ["explain", "--fixture", "hgx-h200-8", "--size", "16M", "--nccl-version", "2.30"],
                 ["explain", "--fixture", "hgx-b200-8", "--size", "16M"],
                 ["explain", "--fixture", "hgx-b200-8", "--size", "16M", "--nccl-version", "2.30"]]:
        for _ in range(3): once([b] + args)
        ts = [once([b] + args) for _ in range(30)]
        print(f"| {b} | {' '.join(args)} | {statistics.median(ts):.2f} | {min(ts):.2f} |", flush=True)
PY
