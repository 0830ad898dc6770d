#!/usr/bin/env bash
# Fault injection and an interrupted measurement on a lent GPU machine (kind nvidia-h200: one GPU is enough),
# in one command (issue 15, items 3 and 4):
#   1. a control run and `planner run --inject-fault F --virtual-ranks 4` for F in wrong-element, hang, oom and
#      each Ring/Tree x LL/LL128/Simple pair: each fault must exit 1 with its message (#wrong 1; the watchdog's
#      timeout naming the GPU and the kernel; cuMemAlloc out of memory naming the GPU, the buffer and the bytes),
#      and no run may hang (each is bounded by `timeout`);
#   2. a real `planner verify --backend both` over 1M..64M stopped with SIGINT once 3 sizes are in the file:
#      exit 130, no NCCL child left, and `verify --load` of the file says it is incomplete (exit 0).
#
# Here (dev machine), as scripts/device/verify.sh does:
#   cargo build --release
#   mkdir -p /work/main/.dev && cp target/release/planner /work/main/.dev/planner
# There (device tool, carry [".dev"]), from the repository root:
#   bash scripts/device/faults.sh        (or: cp scripts/device/faults.sh .dev/ and bash .dev/faults.sh)
# The binary: $PLANNER, else `planner` next to this script, else .dev/planner or target/release/planner.
# Writes into $OUT: summary.txt (one line per check, PASS/FAIL, then the totals) and faults.tar.gz (every
# command's output and exit code, the result files).
set -u
# ABSOLUTE SAFETY RULE: NVLink multicast stays off for every process started here
# (planner sets these again in every child it starts).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/faults-out}
mkdir -p "$OUT"
HERE=$(cd "$(dirname "$0")" && pwd)
if [ -z "${PLANNER:-}" ]; then
  for p in "$HERE/planner" "$PWD/.dev/planner" "$HERE/../../.dev/planner" "$PWD/target/release/planner"; do
    if [ -x "$p" ]; then PLANNER=$p; break; fi
  done
fi
[ -x "${PLANNER:-}" ] || { echo "no planner binary (set PLANNER)"; exit 1; }
W=$(mktemp -d)
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
pass=0; fail=0
check() { # name, PASS|FAIL, detail
  echo "$2 $1: $3" | tee -a "$SUMMARY"
  if [ "$2" = PASS ]; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
}
# Flag spellings (another change may rename them): the first candidate the subcommand's --help lists.
flag_of() { # subcommand, candidates...
  local sub=$1 help f; shift
  help=$("$PLANNER" "$sub" --help 2>/dev/null)
  for f in "$@"; do
    if grep -Eq -- "$f( |,|=|$)" <<<"$help"; then echo "$f"; return; fi
  done
  echo "$1"
}
VSIZES=$(flag_of verify --sweep --sizes --size)
RSIZE=$(flag_of run --size --sizes --sweep)
echo "flags: verify $VSIZES, run $RSIZE"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  planner: $PLANNER"
  nvidia-smi --query-gpu=index,name,memory.used,memory.total,driver_version --format=csv
  env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM)_' | sort
} > "$W/machine.txt" 2>&1
cat "$W/machine.txt"

# 1. Faults on one GPU, 4 virtual ranks.
one() { # name, expected exit, pattern the output must hold, planner args...
  local name=$1 want=$2 pattern=$3; shift 3
  local t0; t0=$(date +%s)
  timeout 120 "$PLANNER" "$@" > "$W/$name.out" 2> "$W/$name.err"
  local rc=$? dt=$(( $(date +%s) - t0 ))
  echo "exit $rc after $dt s: $PLANNER $*" > "$W/$name.cmd"
  local last; last=$(grep -v '^planner: *[0-9]' "$W/$name.err" | tail -1 | cut -c1-300)
  if [ "$rc" = "$want" ] && grep -Eq -- "$pattern" "$W/$name.out" "$W/$name.err"; then
    check "$name" PASS "exit $rc in $dt s: $last"
  else
    check "$name" FAIL "exit $rc (want $want) in $dt s: $last"
  fi
}
one control-Ring-LL 0 '#wrong 0' run $RSIZE 64M --pair Ring/LL --virtual-ranks 4 --timeout 5
for pair in Ring/LL Ring/LL128 Ring/Simple Tree/LL Tree/LL128 Tree/Simple; do
  tag=${pair/\//-}
  one "wrong-element-$tag" 1 '1 wrong element' run $RSIZE 64M --pair "$pair" --virtual-ranks 4 --timeout 5 --inject-fault wrong-element
  one "hang-$tag" 1 'timeout: .* did not finish within 5 s on GPU 0 .*kernel planner_collective' \
    run $RSIZE 64M --pair "$pair" --virtual-ranks 4 --timeout 5 --inject-fault hang
  one "oom-$tag" 1 'GPU 0 .*cuMemAlloc .*OUT_OF_MEMORY|GPU 0 .*cuMemAlloc .*out of memory' \
    run $RSIZE 64M --pair "$pair" --virtual-ranks 4 --timeout 5 --inject-fault oom
done
nvidia-smi --query-gpu=index,memory.used --format=csv > "$W/memory-after-faults.txt" 2>&1

# 2. A real verify stopped with SIGINT after 3 sizes, then loaded.
RES=$W/interrupted.json
"$PLANNER" verify --backend both $VSIZES 1M..64M --timeout 60 --out "$RES" > "$W/interrupted.out" 2> "$W/interrupted.err" &
pid=$!
t0=$(date +%s)
rows=0
while kill -0 "$pid" 2>/dev/null && [ $(( $(date +%s) - t0 )) -lt 300 ]; do
  rows=$(python3 -c 'import json,sys
try: print(sum(r["status"]=="ok" for r in json.load(open(sys.argv[1]))["rows"]))
except Exception: print(0)' "$RES" 2>/dev/null)
  [ "${rows:-0}" -ge 3 ] && break
  sleep 0.5
done
kill -INT "$pid" 2>/dev/null
t1=$(date +%s)
wait "$pid"; rc=$?
dt=$(( $(date +%s) - t1 ))
echo "exit $rc, $dt s after SIGINT (sent with $rows ok rows in the file)" > "$W/interrupted.cmd"
if [ "$rc" = 130 ]; then check verify-sigint PASS "exit 130, $dt s after SIGINT at $rows rows"
else check verify-sigint FAIL "exit $rc (want 130), $dt s after SIGINT at $rows rows; $(tail -2 "$W/interrupted.err" | tr '\n' ' ')"; fi
sleep 1
left=$(pgrep -f '__nccl-child' | wc -l)
if [ "$left" = 0 ]; then check no-child-left PASS "no __nccl-child process after the interrupt"
else check no-child-left FAIL "$left __nccl-child process(es) still running"; for p in $(pgrep -f '__nccl-child'); do kill -KILL "$p"; done; fi
"$PLANNER" verify --load "$RES" > "$W/load.out" 2> "$W/load.err"; lrc=$?
if [ "$lrc" = 0 ] && grep -q 'incomplete run (interrupted' "$W/load.err"; then
  check verify-load-partial PASS "$(grep 'incomplete run' "$W/load.err" | cut -c1-300)"
else
  check verify-load-partial FAIL "exit $lrc: $(tail -2 "$W/load.err" | tr '\n' ' ')"
fi
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("complete", d["complete"], "stopped", d.get("stopped"), "rows", len(d["rows"]))' "$RES" >> "$W/interrupted.cmd" 2>&1

echo "total: $pass PASS, $fail FAIL" | tee -a "$SUMMARY"
cp "$SUMMARY" "$W/"
tar -czf "$OUT/faults.tar.gz" -C "$W" .
rm -rf "$W"
[ "$fail" = 0 ]
