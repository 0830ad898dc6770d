#!/usr/bin/env bash
# explain side by side: a new binary (target/dev/planner) beside an older one (target/dev/planner-seed), call by
# call in one run on the device's idle host, plus the harness's own floor (/bin/true) and which NCCL version each
# picks. Python's os.wait4 gives each child's wall time (perf_counter around fork/exec/wait) and max RSS.
# Usage (device tool): copy both binaries into target/dev/, then run this script carrying target/dev.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
out=${OUT:-/tmp/out}; mkdir -p "$out"
cp target/dev/planner /tmp/pl; cp target/dev/planner-seed /tmp/seed
{ date -u; nproc; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; uname -r; md5sum /tmp/pl /tmp/seed;
  readlink -f /lib/x86_64-linux-gnu/libnccl.so.2 /lib/x86_64-linux-gnu/libnccl.so; } >"$out/machine.txt" 2>&1
for b in /tmp/seed /tmp/pl; do echo "== $b"; $b explain --fixture hgx-h200-8 --size 16M 2>&1 | head -1; done >"$out/nccl-version-picked.txt"
python3 - <<'PY' 2>&1 | tee "$out/explain-speed.txt"
import os, time, statistics
def once(argv):
    t0 = time.perf_counter(); pid = os.fork()
    if pid == 0:
        fd = os.open(os.devnull, os.O_WRONLY); os.dup2(fd, 1); os.dup2(fd, 2); os.execv(argv[0], argv)
    _, st, ru = os.wait4(pid, 0); return (time.perf_counter() - t0) * 1000, ru.ru_maxrss / 1024, os.waitstatus_to_exitcode(st)
variants = [
    ("--version", ["--version"], 50),
    ("explain --fixture hgx-h200-8 --size 16M", ["explain", "--fixture", "hgx-h200-8", "--size", "16M"], 50),
    ("same, --nccl-version 2.28", ["explain", "--fixture", "hgx-h200-8", "--size", "16M", "--nccl-version", "2.28"], 50),
    ("explain --fixture hgx-h200-8 --size 16M --json", ["explain", "--fixture", "hgx-h200-8", "--size", "16M", "--json"], 50),
    ("explain --fixture hgx-b200-8 --size 16M", ["explain", "--fixture", "hgx-b200-8", "--size", "16M"], 50),
    ("explain --fixture hgx-h200-8 --nodes 12500 --size 16M (100,000 GPUs)", ["explain", "--fixture", "hgx-h200-8", "--nodes", "12500", "--size", "16M"], 5),
]
def row(name, res):
    ts = [r[0] for r in res]
    print(f"| {name} | {len(res)} | {statistics.median(ts):.2f} | {min(ts):.2f} | {max(ts):.2f} | {max(r[1] for r in res):.1f} | {sorted(set(r[2] for r in res))} |", flush=True)
print("| command | runs | median ms | min ms | max ms | max RSS MB | exit |\n|---|---|---|---|---|---|---|")
for _ in range(3): once(["/bin/true"])
row("`/bin/true` (the harness's floor: fork, exec, wait)", [once(["/bin/true"]) for _ in range(50)])
# the two binaries alternate call by call, so the VM's drift hits both alike
for name, args, runs in variants:
    for _ in range(3 if runs > 5 else 1): once(["/tmp/seed"] + args); once(["/tmp/pl"] + args)
    seed, new = [], []
    for _ in range(runs):
        seed.append(once(["/tmp/seed"] + args)); new.append(once(["/tmp/pl"] + args))
    row(f"seed 07a3d0a: `{name}`", seed)
    row(f"merged: `{name}`", new)
PY
