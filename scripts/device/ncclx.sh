#!/usr/bin/env bash
# NCCL steered by the planner tuner plugin against NCCL alone (issue 12 item 3) and NCCL's symmetric kernels on
# registered windows (issue 13 item 3), on the 2 x H200 (kind nvidia-h200-x2), in one command: about 3 minutes,
# at most 7 (every step has its own time limit).
#
# Here (dev machine), at the repository root:
#   cargo build --release      # target/release/planner and target/release/libnccl_tuner_planner.so
# There (device tool `run`, kind nvidia-h200-x2, timeout_s 600,
#        carry ["target/release/planner", "target/release/libnccl_tuner_planner.so"]):
#   bash scripts/device/ncclx.sh [PLAN.json]
# PLAN.json: a tuner plan (path in the repository, e.g. one made here and committed or carried). Without it the
# script makes one from the committed 2 x H200 run:
#   planner tune --from bench/results/verify-h200x2-final-2026-11-30/verify.json -o $OUT/plan.json
# and stops with a message where this planner has no `tune` yet.
#
# Writes into $OUT (8 files, the most that come back):
#   machine.txt            date, GPUs, libnccl, environment, how the plan was made, each step's exit code and time,
#                          and the summary lines of every run (also printed at the end)
#   plan.json              the plan the tuned run used
#   tuned.json / .txt      verify --backend nccl --tuner plan.json --sweep 8..1G (eager): 6 pinned pairs, `auto`,
#                          `tuned`; the text ends with "tuned / auto" per size, the geomean over all sizes and over
#                          1-16 MiB, the worst and best size
#   symm-eager.json / .txt verify --backend nccl,nccl-symm --pair Ring/LL,Ring/Simple --sweep 8..1G (eager): the
#                          `symm` row (kernel NCCL ran, model's kernel and time) beside `auto`, "symm / auto" per size
#   symm-graph.json / .txt the same with --cuda-graph (issue 13's table was measured with CUDA graphs)
# The symm runs also carry `auto` and two pinned pairs (SYMM_BACKEND=nccl-symm SYMM_PAIRS=all runs the symm row alone).
set -u
# ABSOLUTE SAFETY RULE: NVLink multicast stays off for every process started here (planner sets these again in every
# NCCL child it starts, and the child refuses to run without them).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/ncclx-out}
mkdir -p "$OUT"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
PLANNER=${PLANNER:-$ROOT/target/release/planner}
PLUGIN=${PLUGIN:-$ROOT/target/release/libnccl_tuner_planner.so}
SOURCE=bench/results/verify-h200x2-final-2026-11-30/verify.json
SIZES=${SIZES:-8..1G}
SYMM_BACKEND=${SYMM_BACKEND:-nccl,nccl-symm}
SYMM_PAIRS=${SYMM_PAIRS:-Ring/LL,Ring/Simple}
MACHINE=$OUT/machine.txt
T0=$(date +%s)
elapsed() { echo $(( $(date +%s) - T0 )); }
say() { echo "$*" | tee -a "$MACHINE"; }

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "hostname: $(cat /proc/sys/kernel/hostname)"
  nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
  ls -l /usr/lib/x86_64-linux-gnu/libnccl.so* 2>&1
  echo "planner: $PLANNER ($(stat -c %s "$PLANNER" 2>&1) bytes)"
  echo "plugin: $PLUGIN ($(stat -c %s "$PLUGIN" 2>&1) bytes)"
  env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM|PLANNER)_' | sort
} > "$MACHINE" 2>&1

for f in "$PLANNER" "$PLUGIN"; do
  [ -f "$f" ] || { say "FAIL: $f is missing: build with cargo build --release and carry it"; exit 1; }
done

# The plan.
if [ $# -ge 1 ]; then
  cp "$1" "$OUT/plan.json" || { say "FAIL: cannot read the plan $1"; exit 1; }
  say "plan: $1 (given)"
elif "$PLANNER" tune --help > /dev/null 2>&1; then
  "$PLANNER" tune --from "$SOURCE" -o "$OUT/plan.json" >> "$MACHINE" 2>&1
  rc=$?
  say "plan: planner tune --from $SOURCE -o plan.json: exit $rc"
  [ "$rc" = 0 ] || { say "FAIL: planner tune failed (see machine.txt)"; exit 1; }
  "$PLANNER" tune --show "$OUT/plan.json" >> "$MACHINE" 2>&1
else
  say "FAIL: this planner has no 'tune' command yet: give a plan, bash scripts/device/ncclx.sh PLAN.json"
  exit 1
fi

step() { # name, time limit (s), verify arguments...
  local name=$1 limit=$2; shift 2
  local start; start=$(elapsed)
  timeout "$limit" "$PLANNER" verify "$@" --timeout 30 --out "$OUT/$name.json" > "$OUT/$name.txt" 2>&1
  local rc=$?
  say "$name: exit $rc in $(( $(elapsed) - start )) s: planner verify $*"
}

step tuned 170 --backend nccl --tuner "$OUT/plan.json" --tuner-plugin "$PLUGIN" --sweep "$SIZES"
step symm-eager 120 --backend "$SYMM_BACKEND" --pair "$SYMM_PAIRS" --sweep "$SIZES"
step symm-graph 120 --backend "$SYMM_BACKEND" --pair "$SYMM_PAIRS" --sweep "$SIZES" --cuda-graph

# The lines that say how it went.
for name in tuned symm-eager symm-graph; do
  say "== $name"
  grep -E '^(tuner plugin|  (Successfully|NCCL_TUNER|External|planner-tuner)|symm predictions|geomean|planner: )' \
    "$OUT/$name.txt" | tee -a "$MACHINE"
  ok=$(grep -c '"status": "ok"' "$OUT/$name.json" 2>/dev/null)
  bad=$(grep -cE '"status": "(failed|unavailable|skipped)"' "$OUT/$name.json" 2>/dev/null)
  say "rows: ${ok:-0} ok, ${bad:-0} not ok (failed, unavailable or skipped)"
  # size | symm = KERNEL | predicted | measured, per size
  grep -E 'symm = ' "$OUT/$name.txt" | sed 's/┆/|/g' | cut -d'|' -f1-4 | tr -s ' ' | tee -a "$MACHINE"
done
say "done in $(elapsed) s"
