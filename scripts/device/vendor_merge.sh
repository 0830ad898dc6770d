#!/usr/bin/env bash
# NCCL's merge of a partial vendor topology file with what it detects, next to planner's (`--topo FILE` on a GPU
# machine): NCCL_TOPO_FILE=<vendor file> + NCCL_TOPO_DUMP_FILE, and `planner topo --xml --topo <vendor file>`.
# On a machine whose bus ids the file does not name (e.g. the 2x H200 VM), both should trim every branch of the file
# except the first CPU, which receives the virtual NIC (xml.cc:947-949), and add the detected GPUs under their own CPU.
#
# Here (dev machine), from the repository root:
#   cargo build --release
#   mkdir -p .dev/vendor && cp target/release/planner scripts/device/vendor_merge.sh .dev/vendor/
# There (device tool, kind nvidia-h200-x2, carry [".dev/vendor"]), from the repository root:
#   bash .dev/vendor/vendor_merge.sh
# Writes into $OUT, per file F in azure-ndv4, aws-p4d-24xl: nccl-F.xml (NCCL's dump), planner-F.xml (planner's),
# planner-F.stderr, diff-F.txt (canonical diff, empty when they agree); prints "F: SAME" or "F: DIFF" per file.
set -u
# ABSOLUTE SAFETY RULE: NVLink multicast stays off for every process started here.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/vendor-out}
mkdir -p "$OUT"
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(pwd)
PLANNER=$HERE/planner

cat > /tmp/nccl_vendor.py <<'PY'
import os, torch, torch.distributed as dist
rank = int(os.environ["RANK"])
torch.cuda.set_device(rank)
dist.init_process_group("nccl")
x = torch.ones(1024, device="cuda")
dist.all_reduce(x)
torch.cuda.synchronize()
dist.destroy_process_group()
PY

cat > /tmp/canon.py <<'PY'
# One line per element: depth, tag and attributes in order; guid and maxconn dropped (the socket plugin's values
# differ from what the probe can read), everything else compared.
import sys, xml.etree.ElementTree as ET
def walk(e, d, out):
    attrs = " ".join(f'{k}="{v}"' for k, v in e.attrib.items() if k not in ("guid", "maxconn"))
    out.append(f"{'  ' * d}<{e.tag} {attrs}>")
    for c in e:
        walk(c, d + 1, out)
out = []
walk(ET.parse(sys.argv[1]).getroot(), 0, out)
print("\n".join(out))
PY

GPUS=$(nvidia-smi -L | wc -l)
for F in azure-ndv4 aws-p4d-24xl; do
  FILE=$ROOT/tests/integration/vendor_topo/$F-topo.xml
  (cd /tmp && NCCL_TOPO_FILE="$FILE" NCCL_TOPO_DUMP_FILE="$OUT/nccl-$F.xml" NCCL_DEBUG=WARN \
    timeout 120 python3 -m torch.distributed.run --nproc_per_node="$GPUS" /tmp/nccl_vendor.py > "$OUT/nccl-$F.log" 2>&1)
  timeout 60 "$PLANNER" topo --xml --topo "$FILE" -o "$OUT/planner-$F.xml" 2> "$OUT/planner-$F.stderr"
  if [ -s "$OUT/nccl-$F.xml" ] && [ -s "$OUT/planner-$F.xml" ]; then
    diff <(python3 /tmp/canon.py "$OUT/nccl-$F.xml") <(python3 /tmp/canon.py "$OUT/planner-$F.xml") > "$OUT/diff-$F.txt"
    [ -s "$OUT/diff-$F.txt" ] && echo "$F: DIFF" || echo "$F: SAME"
  else
    echo "$F: MISSING (see nccl-$F.log, planner-$F.stderr)"
  fi
done
ls -la "$OUT"
