#!/usr/bin/env bash
# Runs the CPU-only commands (topo, channels, explain, audit, verify --load) on every fixture and committed result file
# and writes each command's stdout, stderr and exit code under DIR, so two builds can be compared byte for byte:
#   scripts/snapshot-outputs.sh before && (change, build) && scripts/snapshot-outputs.sh after && diff -r before after
set -uo pipefail
out=${1:?usage: scripts/snapshot-outputs.sh DIR [BINARY]}
bin=$(realpath "${2:-target/release/planner}")
cd "$(dirname "$0")/.."
mkdir -p "$out"
golden=tests/golden/h200x2-nvswitch-vm
n=0
snap() {
  n=$((n + 1))
  # Named by the command itself, so two trees with different fixture lists still compare file by file.
  local f; f="$out/$(printf '%s' "$*" | sed "s#$PWD/##g" | tr -c 'A-Za-z0-9._-' '_' | cut -c1-200)"
  printf '%s\n' "$*" | sed "s#$PWD/##g" >"$f.cmd"
  (cd "$tmp" && env -u NCCL_ALGO -u NCCL_PROTO -u NCCL_NVLS_ENABLE "$bin" "$@") >"$f.out" 2>"$f.err"
  echo "exit $?" >>"$f.cmd"
}
tmp=$(mktemp -d)
for fx in $(ls fixtures | sed 's/\.xml$//'); do
  snap topo --fixture "$fx"
  snap topo --fixture "$fx" --json
  snap channels --fixture "$fx"
  snap channels --fixture "$fx" --json
  snap channels --fixture "$fx" --graph-xml
  snap explain --fixture "$fx" --size 16M
  snap explain --fixture "$fx" --size 4K --coll all-gather --json
  snap explain --fixture "$fx" --sweep 8..4G
  snap explain --fixture "$fx" --nccl-table
done
snap topo --fixture hgx-h100-8 --nodes 4 --net-latency 2
snap channels --fixture hgx-h200-8 --nodes 16
snap explain --fixture hgx-h200-8 --nodes 4 --sweep 8..4G --json
snap explain --topo "$PWD/$golden/topo.xml" --nvls off --nccl-version 2.28 --sweep 4..4G --nccl-calls
snap explain --topo "$PWD/$golden/topo.xml" --graph "$PWD/$golden/graph.xml" --nvls off --nccl-version 2.28 --nccl-table
snap explain --algo ring,tree --proto ^LL128 --size 1M
snap explain --size 16M
snap audit "$PWD/$golden/nccl-init-rank0.log" --topo "$PWD/$golden/topo.xml"
snap audit "$PWD/$golden/nccl-init-rank0.log" --topo "$PWD/$golden/topo.xml" --json
snap audit "$PWD/$golden/nccl-init-rank0.log" --topo "$PWD/$golden/topo.xml" --graph "$PWD/$golden/graph.xml"
snap fixtures
snap fixtures --json
for f in $(git ls-files 'bench/results/*.json'); do
  snap verify --load "$PWD/$f"
  snap verify --load "$PWD/$f" --json
done
snap explain --size 0
snap explain --fixture nope
snap topo --topo /nonexistent.xml
rm -rf "$tmp"
echo "$n commands -> $out"
