#!/usr/bin/env bash
# The shared test data (src/gpu/pattern.rs + kernels/pattern.cu) on a lent GPU
# machine (kind nvidia-h200-x2), in one command: every native kernel variant
# (collective x pair x type) on the real GPUs and as 2/4/8 virtual ranks (16
# for two pairs: the executor's most ranks), and the NCCL backend for every
# collective and type, one process and two; every output element is checked
# (#wrong must be 0), and for outputs up to 1 MiB the native run also compares
# the GPU's count with the CPU mirror (a mismatch fails the run: "the check
# kernel is broken").
#
# Here (dev machine), from the worktree:
#   cargo build --release
#   mkdir -p /work/main/.dev/pattern && cp target/release/planner scripts/device/pattern.sh /work/main/.dev/pattern/
# There (device tool, carry [".dev/pattern"]):
#   bash .dev/pattern/pattern.sh            (or PARTS="native" / PARTS="nccl" bash ...)
# Prints one line per run (ok / FAILED exit N / WRONG N), then the summary
#   pattern: R runs, F failed, W wrong elements
# which must read "0 failed, 0 wrong elements". Full outputs in $OUT/native.txt, $OUT/nccl.txt.
set -u
PARTS=${PARTS:-native nccl}
want() { case " $PARTS " in *" $1 "*) return 0;; *) return 1;; esac; }
# ABSOLUTE SAFETY RULE: NVLink multicast stays off for every process started here.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/pattern-out}
mkdir -p "$OUT"
HERE=$(cd "$(dirname "$0")" && pwd)
PLANNER=$HERE/planner
SIZES=${SIZES:-8..16M}
RUNS=0 FAILED=0 WRONG=0
T0=$(date +%s)

# One native run: a non-zero exit is a failure (planner run exits 1 on #wrong > 0).
native() {
  local label=$1; shift
  RUNS=$((RUNS + 1))
  echo "== run $label: $*" >> "$OUT/native.txt"
  timeout 120 "$PLANNER" run --size "$SIZES" --iters 2 --warmup 1 --timeout 10 "$@" >> "$OUT/native.txt" 2>&1
  local rc=$?
  if [ $rc -eq 0 ]; then echo "ok           run $label"; else FAILED=$((FAILED + 1)); echo "FAILED exit $rc  run $label"; fi
}

# One NCCL verify: every row must be ok or unavailable, and its #wrong 0.
nccl() {
  local label=$1; shift
  RUNS=$((RUNS + 1))
  local json="$OUT/nccl-$RUNS.json"
  echo "== verify $label: $*" >> "$OUT/nccl.txt"
  timeout 300 "$PLANNER" verify --backend nccl --sweep "$SIZES" --iters 2 --warmup 1 --repeats 1 \
    --timeout 30 --out "$json" "$@" >> "$OUT/nccl.txt" 2>&1
  local rc=$?
  local w
  w=$(python3 - "$json" <<'EOF' 2>>"$OUT/nccl.txt"
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
wrong = sum(r.get("wrong") or 0 for r in rows)
bad = [r for r in rows if r["status"] not in ("ok", "unavailable", "skipped")]
for r in bad:
    print(f"row {r.get('pair')} {r['bytes']}: {r['status']} {r.get('note', '')}", file=sys.stderr)
print(wrong + (10**9 if bad else 0) if rows else 10**9)
EOF
)
  w=${w:-1000000000}
  if [ $rc -ne 0 ] || [ "$w" -ge 1000000000 ]; then FAILED=$((FAILED + 1)); echo "FAILED exit $rc  verify $label"
  elif [ "$w" -gt 0 ]; then WRONG=$((WRONG + w)); echo "WRONG $w      verify $label"
  else echo "ok           verify $label"; fi
}

if want native; then
  : > "$OUT/native.txt"
  for dtype in f32 bf16 f16; do
    variants="all-reduce:Ring/LL all-reduce:Ring/LL128 all-reduce:Ring/Simple all-reduce:Tree/LL all-reduce:Tree/LL128 all-reduce:Tree/Simple all-gather:Ring/Simple reduce-scatter:Ring/Simple broadcast:Ring/Simple"
    for v in $variants; do
      coll=${v%%:*} pair=${v#*:}
      native "$coll $pair $dtype real GPUs" --coll "$coll" --pair "$pair" --dtype "$dtype"
      for n in 2 4 8; do
        # n x 8 CTAs stay co-resident on one GPU (132 SMs).
        native "$coll $pair $dtype --virtual-ranks $n" --coll "$coll" --pair "$pair" --dtype "$dtype" \
          --virtual-ranks "$n" --channels 8
      done
    done
    for pair in Ring/LL Tree/Simple; do
      native "all-reduce $pair $dtype --virtual-ranks 16" --pair "$pair" --dtype "$dtype" \
        --virtual-ranks 16 --channels 4
    done
  done
  echo "native done at $(( $(date +%s) - T0 )) s"
fi

if want nccl; then
  : > "$OUT/nccl.txt"
  for dtype in f32 bf16 f16; do
    nccl "all-reduce $dtype" --coll all-reduce --dtype "$dtype"
  done
  for coll in all-gather reduce-scatter broadcast reduce; do
    nccl "$coll bf16" --coll "$coll" --dtype bf16
  done
  # Two processes (torchrun-style variables): #wrong is summed over the ranks
  # with NCCL; rank 0 writes the result file.
  RUNS=$((RUNS + 1))
  for r in 0 1; do
    RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29543 \
      timeout 300 "$PLANNER" verify --backend nccl --coll reduce-scatter --dtype f16 --sweep 8..1M \
      --iters 2 --warmup 1 --repeats 1 --timeout 30 --out "$OUT/nccl-2proc-rank$r.json" >> "$OUT/nccl.txt" 2>&1 &
  done
  wait
  w=$(python3 -c 'import json,sys; rows=json.load(open(sys.argv[1]))["rows"]; print(sum(r.get("wrong") or 0 for r in rows) if rows else 10**9)' \
    "$OUT/nccl-2proc-rank0.json" 2>>"$OUT/nccl.txt")
  w=${w:-1000000000}
  if [ "$w" -ge 1000000000 ]; then FAILED=$((FAILED + 1)); echo "FAILED       verify reduce-scatter f16, 2 processes"
  elif [ "$w" -gt 0 ]; then WRONG=$((WRONG + w)); echo "WRONG $w      verify reduce-scatter f16, 2 processes"
  else echo "ok           verify reduce-scatter f16, 2 processes"; fi
  echo "nccl done at $(( $(date +%s) - T0 )) s"
fi

echo "pattern: $RUNS runs, $FAILED failed, $WRONG wrong elements"
