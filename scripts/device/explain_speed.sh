#!/usr/bin/env bash
# Whole-process time and peak memory of `planner explain` with the expected model (issue 24's targets: < 5 ms at
# 8 GPUs; 100k GPUs < 1 s and < 1 GB), on the device's idle 16-core host rather than the loaded 2-core dev host.
# Each command runs RUNS times in a row (after 3 warm-ups); python's os.wait4 gives each child's wall time
# (perf_counter around fork/exec/wait) and max RSS. Usage (device tool, carrying target/release/planner):
#   scripts/device/explain_speed.sh
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
{ date -u; nproc; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; uname -r; } >"$out/machine.txt" 2>&1
python3 - "$out" <<'PY' 2>&1 | tee "$out/explain-speed.txt"
import os, sys, time, statistics
out = sys.argv[1]
P = "target/release/planner"
cases = [
    ("planner --version (process start, baseline)", [P, "--version"], 50),
    ("explain --fixture hgx-h200-8 --size 16M", [P, "explain", "--fixture", "hgx-h200-8", "--size", "16M"], 50),
    ("explain --fixture hgx-h200-8 --size 16M --json", [P, "explain", "--fixture", "hgx-h200-8", "--size", "16M", "--json"], 50),
    ("explain --fixture hgx-b200-8 --size 16M", [P, "explain", "--fixture", "hgx-b200-8", "--size", "16M"], 50),
    ("explain --size 16M (live probe of this 1-GPU VM, NVML)", [P, "explain", "--size", "16M"], 20),
    ("explain --fixture hgx-h200-8 --nodes 12500 --size 16M (100,000 GPUs)", [P, "explain", "--fixture", "hgx-h200-8", "--nodes", "12500", "--size", "16M"], 5),
    ("explain --fixture hgx-h200-8 --nodes 65536 --size 16M (524,288 GPUs)", [P, "explain", "--fixture", "hgx-h200-8", "--nodes", "65536", "--size", "16M"], 3),
]
def once(argv):
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 1); os.dup2(fd, 2)
        os.execv(argv[0], argv)
    _, status, ru = os.wait4(pid, 0)
    dt = time.perf_counter() - t0
    return dt, ru.ru_maxrss, os.waitstatus_to_exitcode(status)
print("| command | runs | median ms | min ms | max ms | max RSS MB | exit |")
print("|---|---|---|---|---|---|---|")
for name, argv, runs in cases:
    for _ in range(3 if runs > 5 else 1):
        once(argv)
    res = [once(argv) for _ in range(runs)]
    ts = [r[0] * 1000 for r in res]
    rss = max(r[1] for r in res) / 1024
    codes = sorted(set(r[2] for r in res))
    print(f"| `{name}` | {runs} | {statistics.median(ts):.2f} | {min(ts):.2f} | {max(ts):.2f} | {rss:.1f} | {codes} |", flush=True)
PY
