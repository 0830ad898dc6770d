#!/usr/bin/env bash
# NCCL loads the planner tuner plugin in real communicators (issue 12, "Done when"). One GPU is enough.
#
# Here (dev machine):  cargo build --release -p planner-tuner      -> target/release/libnccl_tuner_planner.so
# There (device tool, repository root, carry ["target/release/libnccl_tuner_planner.so"], kind nvidia-h200):
#   bash scripts/device/tuner_smoke.sh
# Needs nvcc (or cc with CUDA headers and libcudart) and libnccl.so.2: the system one, else PyTorch's nvidia-nccl
# wheel (LIBNCCL=/path/libnccl.so.2 overrides). python3 only for the check of run E. Takes about a minute.
#
# Writes into $OUT:
#   machine.txt              date, GPU, NCCL library, compiler
#   plan.json                the plan of runs B and E (nccl_version "2.0.0" on purpose: the version WARN must show)
#   a-no-plan.log            1 rank, plugin, no PLANNER_TUNER_PLAN. Expect "TUNER/Plugin: Using planner (v5)",
#                            "Successfully loaded external tuner plugin ..." and one WARN
#                            "planner-tuner: PLANNER_TUNER_PLAN is not set; NCCL's own choices stay in place"
#   b-plan-1rank.log         1 rank, plan with a rule for nRanks 1. Expect the WARN "... was made with NCCL 2.0.0,
#                            this is NCCL 2.28.3; applying it anyway" and the INFO "planner-tuner: plan ... applies:
#                            2 of 5 rules for nRanks 1 nNodes 1 (...)". No decision lines: NCCL runs 1-rank
#                            collectives as a copy and never calls getCollInfo (src/enqueue.cc:2552-2553, v2.28.3-1).
#   c-garbage-plan.log       1 rank, a plan that is not JSON. Expect one WARN "planner-tuner: invalid plan ...".
#   d-2rank-default.r{0,1}.log  two processes on GPU 0 posing as two nodes (different NCCL_HOSTID, NET/Socket over
#                            lo), NCCL_TUNER_PLUGIN=none: NCCL's own per-call picks ("AllReduce: N Bytes -> Algo ...")
#   e-2rank-plan.r{0,1}.log  the same with the plugin and the plan: per call one "planner-tuner: AllReduce N bytes
#                            nRanks 2 nNodes 2 -> ..." line, then NCCL's per-call line, which must agree
#   summary.txt              exit codes, every planner-tuner line of runs A-C, the run E check (also printed)
set -u
# ABSOLUTE SAFETY RULE: NVLink multicast stays off for every process started here.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/tuner-smoke}
mkdir -p "$OUT"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PLUGIN=${PLUGIN:-$ROOT/target/release/libnccl_tuner_planner.so}
WORK=$(mktemp -d /tmp/tuner-smoke.XXXXXX)
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }

if [ ! -f "$PLUGIN" ]; then
  say "FAIL: no plugin at $PLUGIN (build it with cargo build --release -p planner-tuner and carry it)"
  exit 1
fi

# libnccl.so.2: LIBNCCL, the system library, or the one in PyTorch's wheel.
if [ -z "${LIBNCCL:-}" ]; then
  for candidate in /usr/lib/x86_64-linux-gnu/libnccl.so.2 /usr/lib64/libnccl.so.2 /usr/local/lib/libnccl.so.2; do
    [ -f "$candidate" ] && LIBNCCL=$candidate && break
  done
fi
if [ -z "${LIBNCCL:-}" ] && command -v python3 >/dev/null; then
  LIBNCCL=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
fi
if [ -z "${LIBNCCL:-}" ] || [ ! -f "$LIBNCCL" ]; then
  say "FAIL: no libnccl.so.2 found (set LIBNCCL=/path/libnccl.so.2)"
  exit 1
fi

# Compile the test program against that library (own declarations, no NCCL header needed).
NVCC=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null | head -1)
BIN=$WORK/tuner_smoke
LIBDIR=$(dirname "$LIBNCCL")
if [ -n "$NVCC" ]; then
  "$NVCC" -O2 -o "$BIN" "$ROOT/scripts/device/tuner_smoke.c" -L"$LIBDIR" -l:"$(basename "$LIBNCCL")" -Xlinker -rpath -Xlinker "$LIBDIR" \
    > "$WORK/build.txt" 2>&1
else
  CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
  cc -O2 -std=c11 -D_DEFAULT_SOURCE -o "$BIN" "$ROOT/scripts/device/tuner_smoke.c" -L"$LIBDIR" -l:"$(basename "$LIBNCCL")" \
    -L"$CUDA_HOME/lib64" -lcudart -Wl,-rpath,"$LIBDIR" -Wl,-rpath,"$CUDA_HOME/lib64" > "$WORK/build.txt" 2>&1
fi
BUILD_RC=$?

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version --format=csv 2>&1
  echo "libnccl: $LIBNCCL -> $(readlink -f "$LIBNCCL")"
  echo "plugin: $PLUGIN ($(stat -c %s "$PLUGIN") bytes)"
  echo "compiler: ${NVCC:-cc} (exit $BUILD_RC)"
  cat "$WORK/build.txt"
  env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM)_' | sort
} > "$OUT/machine.txt" 2>&1
if [ "$BUILD_RC" != 0 ]; then
  say "FAIL: could not compile tuner_smoke.c (see machine.txt)"
  exit 1
fi

# The plan: rule 0 for the 1-rank runs; rules 1-3 steer 2 ranks on 2 nodes away from NCCL's usual picks; rule 4
# names a pair NCCL masks on this machine (no CollNet), so the plugin must keep NCCL's choice.
cat > "$OUT/plan.json" <<'EOF'
{"format":"planner-tuner-plan","version":1,
 "provenance":{"planner_version":"0.1.0","created_unix":0,"machine":"tuner_smoke.sh","nccl_version":"2.0.0",
               "topology_hash":null,"source_kind":"verify","source_file":"tuner_smoke.sh",
               "source_hash":"0000000000000000","margin_percent":0},
 "rules":[
  {"collective":"AllReduce","n_ranks":1,"n_nodes":1,"min_bytes":0,"max_bytes":18446744073709551615,
   "algorithm":"Ring","protocol":"Simple","channels":null},
  {"collective":"AllReduce","n_ranks":2,"n_nodes":2,"min_bytes":0,"max_bytes":65535,
   "algorithm":"Ring","protocol":"Simple","channels":null},
  {"collective":"AllReduce","n_ranks":2,"n_nodes":2,"min_bytes":65536,"max_bytes":1048575,
   "algorithm":"Tree","protocol":"LL","channels":1},
  {"collective":"AllReduce","n_ranks":2,"n_nodes":2,"min_bytes":1048576,"max_bytes":18446744073709551615,
   "algorithm":"Ring","protocol":"LL","channels":2},
  {"collective":"Broadcast","n_ranks":null,"n_nodes":null,"min_bytes":0,"max_bytes":18446744073709551615,
   "algorithm":"CollNetDirect","protocol":"Simple","channels":null}]}
EOF
echo '{"format": "planner-tuner-plan", "rules": [' > "$WORK/garbage.json"

DEBUG_ENV=(NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING)
run_one() { # name, env assignments...
  local name=$1; shift
  env "${DEBUG_ENV[@]}" "$@" timeout 120 "$BIN" one > "$OUT/$name.log" 2>&1
  say "run $name: exit $?"
  grep -E 'TUNER/Plugin|external tuner plugin|planner-tuner' "$OUT/$name.log" | sed 's/^/    /' | tee -a "$SUMMARY"
}
run_two() { # name, env assignments...
  local name=$1; shift
  local idfile=$WORK/$name.id pids=() r
  rm -f "$idfile"
  for r in 0 1; do
    env "${DEBUG_ENV[@]}" "$@" NCCL_HOSTID=tuner-smoke-node$r NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_NET=Socket \
      timeout 180 "$BIN" rank $r 2 "$idfile" > "$OUT/$name.r$r.log" 2>&1 &
    pids+=($!)
  done
  for r in 0 1; do
    wait "${pids[$r]}"
    say "run $name rank $r: exit $?"
  done
}

unset PLANNER_TUNER_PLAN
run_one a-no-plan NCCL_TUNER_PLUGIN="$PLUGIN"
run_one b-plan-1rank NCCL_TUNER_PLUGIN="$PLUGIN" PLANNER_TUNER_PLAN="$OUT/plan.json"
run_one c-garbage-plan NCCL_TUNER_PLUGIN="$PLUGIN" PLANNER_TUNER_PLAN="$WORK/garbage.json"
run_two d-2rank-default NCCL_TUNER_PLUGIN=none
run_two e-2rank-plan NCCL_TUNER_PLUGIN="$PLUGIN" PLANNER_TUNER_PLAN="$OUT/plan.json"

# Run E: every planner-tuner decision against NCCL's per-call line for the same size (rank 0 logs both), and
# NCCL's default pick from run D beside it.
if command -v python3 >/dev/null; then
python3 - "$OUT/d-2rank-default.r0.log" "$OUT/e-2rank-plan.r0.log" <<'PY' | tee -a "$SUMMARY"
import re, sys
call = re.compile(r"NCCL INFO (\w+): (\d+) Bytes -> Algo (\w+) proto (\w+) channel\{Lo\.\.Hi\}=\{(\d+)\.\.(\d+)\}")
mine = re.compile(r"planner-tuner: ([\w-]+) (\d+) bytes nRanks (\d+) nNodes (\d+) -> (.*)$")
applied = re.compile(r"(\w+)/(\w+) channels (\S+) \(rule (\d+)\)$")
def calls(path):
    seen = {}
    for line in open(path, errors="replace"):
        m = call.search(line)
        if m:
            seen.setdefault((m[1], int(m[2])), set()).add((m[3], m[4], int(m[6]) - int(m[5]) + 1))
    return seen
default, steered = calls(sys.argv[1]), calls(sys.argv[2])
decisions = {}
for line in open(sys.argv[2], errors="replace"):
    m = mine.search(line)
    if m:
        decisions.setdefault((m[1], int(m[2])), set()).add(m[5])
print("run E check (%d decision sizes, %d NCCL per-call sizes):" % (len(decisions), len(steered)))
bad = 0
for key in sorted(decisions, key=lambda k: (k[0], k[1])):
    for outcome in sorted(decisions[key]):
        got = sorted(steered.get(key, set()))
        verdict = "kept"
        m = applied.match(outcome)
        if m:
            algo, proto, channels = m[1].upper(), m[2].upper(), m[3]
            ok = bool(got) and all(a == algo and p == proto and (channels == "-" or n <= int(channels))
                                   for a, p, n in got)
            verdict = "OK" if ok else "MISMATCH"
            bad += not ok
        print("  %-9s %9d bytes  NCCL alone %-22s plugin: %-40s NCCL ran %s  %s" % (
            key[0], key[1], sorted(default.get(key, set())), outcome, got, verdict))
if not decisions:
    print("  FAIL: no decision lines in run E")
    bad += 1
print("run E: %s" % ("PASS" if bad == 0 else "FAIL (%d)" % bad))
PY
else
  say "python3 missing: check run E by eye (grep -E 'planner-tuner|Bytes -> Algo' $OUT/e-2rank-plan.r0.log)"
fi
rm -rf "$WORK"
