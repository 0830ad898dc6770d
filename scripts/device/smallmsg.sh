#!/usr/bin/env bash
# planner's all-reduce kernels beyond NCCL's menu (OneShot/LL, TwoShot/Simple)
# on a lent GPU machine (kind nvidia-h200-x2), in one command, under 8 minutes:
#   1. every size 8 B..256 MiB (x2 steps), every type (f32, bf16, f16), both
#      kernels, CUDA graph and eager, as 2, 4 and 8 virtual ranks on GPU 0 and
#      on the real GPUs when there are 2 or more;
#   2. ragged sizes (odd element and unit counts, 26 B..208 MiB) on 3, 5 and
#      16 virtual ranks; 3. in place on 4 virtual ranks and the real GPUs.
# Every output element of every run is checked (out of place: also after the
# timed calls); #wrong must be 0 everywhere. Then a compact table of the
# times (µs per call, f32 and bf16, graph and eager, per rank setup).
#
# Here (dev machine), from the worktree:
#   cargo build --release
#   mkdir -p /work/main/.dev/smallmsg && cp target/release/planner scripts/device/smallmsg.sh /work/main/.dev/smallmsg/
# There (device tool, kind nvidia-h200-x2, carry [".dev/smallmsg"]):
#   bash .dev/smallmsg/smallmsg.sh
# Prints one line per run (ok / FAILED exit N), the tables, and last
#   smallmsg: R runs, F failed, W wrong elements, S skipped (time)
# which must read "0 failed, 0 wrong elements, 0 skipped". Into $OUT (3 files):
#   smallmsg.log (every run's stderr), smallmsg-runs.jsonl (one line per run:
#   label, exit code, planner's --json report), smallmsg-table.txt (the tables).
set -u
# ABSOLUTE SAFETY RULE: NVLink multicast stays off for every process started here.
# (planner's own kernels never use it: no cuMulticastCreate, no NVLS.)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/smallmsg-out}
mkdir -p "$OUT"
HERE=$(cd "$(dirname "$0")" && pwd)
PLANNER=${PLANNER:-$HERE/planner}
SIZES=${SIZES:-8..256M}
RAGGED=${RAGGED:-26..208M}
BUDGET_S=${BUDGET_S:-420}   # no new run starts after this many seconds (the whole script stays < 8 min)
LOG=$OUT/smallmsg.log
RUNS=$OUT/smallmsg-runs.jsonl
TABLE=$OUT/smallmsg-table.txt
: > "$LOG"; : > "$RUNS"
N_RUNS=0 FAILED=0 SKIPPED=0
T0=$(date +%s)
TMP=$(mktemp -d)
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
echo "smallmsg: $NGPU GPU(s); $("$PLANNER" --version 2>/dev/null)" | tee -a "$LOG"
nvidia-smi -L >> "$LOG" 2>&1

# One planner run: label, then planner run's flags. planner exits 1 on #wrong > 0.
run() {
  local label=$1; shift
  if [ $(( $(date +%s) - T0 )) -ge "$BUDGET_S" ]; then
    SKIPPED=$((SKIPPED + 1)); echo "SKIPPED (time) $label"; return
  fi
  N_RUNS=$((N_RUNS + 1))
  echo "== $label: planner run $*" >> "$LOG"
  timeout 90 "$PLANNER" run --iters 10 --warmup 3 --timeout 20 --json "$@" > "$TMP/out.json" 2>> "$LOG"
  local rc=$?
  python3 - "$label" "$rc" "$TMP/out.json" >> "$RUNS" <<'EOF'
import json, sys
label, rc, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
try:
    report = json.load(open(path))
except Exception:
    report = None
print(json.dumps({"label": label, "rc": rc, "report": report}))
EOF
  if [ $rc -eq 0 ]; then echo "ok              $label"; else FAILED=$((FAILED + 1)); echo "FAILED exit $rc   $label"; fi
}

setups="vr2 vr4 vr8"
[ "$NGPU" -ge 2 ] && setups="$setups real2"
flags_of() {
  case $1 in
    vr*) echo "--virtual-ranks ${1#vr}";;
    real2) echo "--gpus 2";;
  esac
}

# 1. The grid.
for setup in $setups; do
  for pair in OneShot/LL TwoShot/Simple; do
    for dtype in f32 bf16 f16; do
      for mode in graph eager; do
        g=""; [ $mode = graph ] && g="--cuda-graph"
        # shellcheck disable=SC2046
        run "$setup $pair $dtype $mode" --pair $pair --dtype $dtype --size "$SIZES" $g $(flags_of $setup)
      done
    done
  done
done
echo "grid done at $(( $(date +%s) - T0 )) s"

# 2. Ragged sizes and rank counts that do not divide them (16 ranks: fewer channels
# so that 16 x 8 CTAs stay co-resident on GPU 0).
for pair in OneShot/LL TwoShot/Simple; do
  for dtype in f32 bf16 f16; do
    run "vr3 $pair $dtype eager ragged" --pair $pair --dtype $dtype --size "$RAGGED" --virtual-ranks 3
    run "vr5 $pair $dtype graph ragged" --pair $pair --dtype $dtype --size "$RAGGED" --virtual-ranks 5 --cuda-graph
    run "vr16 $pair $dtype eager ragged" --pair $pair --dtype $dtype --size "$RAGGED" --virtual-ranks 16 --channels 8
  done
done

# 3. In place (the first call of each size is checked).
for pair in OneShot/LL TwoShot/Simple; do
  run "vr4 $pair f32 graph in-place" --pair $pair --dtype f32 --size "$SIZES" --virtual-ranks 4 --cuda-graph --in-place
  [ "$NGPU" -ge 2 ] && run "real2 $pair bf16 graph in-place" --pair $pair --dtype bf16 --size "$SIZES" --gpus 2 --cuda-graph --in-place
done
echo "all done at $(( $(date +%s) - T0 )) s"

# The tables: per rank setup, µs per call by size (into $TABLE and on stdout),
# and the wrong elements over every run (into $TMP/wrong).
python3 - "$RUNS" "$TABLE" "$TMP/wrong" <<'EOF'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
out = open(sys.argv[2], "w")
def say(s=""):
    print(s)
    out.write(s + "\n")
wrong = 0
times = {}  # (setup, pair, dtype, mode) -> {bytes: us}
for r in runs:
    rep = r["report"]
    if not rep:
        continue
    for res in rep["results"]:
        wrong += res["wrong"]
    parts = r["label"].split()
    if len(parts) == 4:
        times[tuple(parts)] = {res["bytes"]: res["time_us"] for res in rep["results"]}
cols = [(p, d, m) for m in ("graph", "eager") for d in ("f32", "bf16") for p in ("OneShot/LL", "TwoShot/Simple")]
short = {"OneShot/LL": "1shot", "TwoShot/Simple": "2shot"}
for setup in ("vr2", "vr4", "vr8", "real2"):
    have = [c for c in cols if (setup,) + c in times]
    if not have:
        continue
    sizes = sorted({b for c in have for b in times[(setup,) + c]})
    where = "virtual ranks on GPU 0" if setup.startswith("vr") else "real GPUs"
    say(f"# {setup}: time per call, us ({where})")
    say("| size | " + " | ".join(f"{short[p]} {d} {m}" for p, d, m in have) + " |")
    say("|---:|" + "---:|" * len(have))
    for b in sizes:
        cells = []
        for c in have:
            t = times[(setup,) + c].get(b)
            cells.append("" if t is None else f"{t:.2f}")
        label = f"{b} B" if b < 1024 else (f"{b >> 10} KiB" if b < 1 << 20 else f"{b >> 20} MiB")
        say(f"| {label} | " + " | ".join(cells) + " |")
    say()
open(sys.argv[3], "w").write(str(wrong))
EOF
WRONG=$(cat "$TMP/wrong" 2>/dev/null || echo unknown)
rm -rf "$TMP"
echo "smallmsg: $N_RUNS runs, $FAILED failed, $WRONG wrong elements, $SKIPPED skipped (time) in $(( $(date +%s) - T0 )) s" | tee -a "$LOG"
