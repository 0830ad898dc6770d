#!/usr/bin/env bash
# Build the Python wheel (maturin, pyproject.toml) with `planner` and the tuner plugin, install it into a fresh
# virtual environment and smoke-test it from there: `planner explain --size 16M`, `planner env`, and the plugin
# loaded with dlopen from Python's ctypes, looking up the symbol NCCL asks a tuner for (ncclTunerPlugin_v5).
# Usage: scripts/wheel.sh   (CI runs it after `cargo test --release`, whose target/ it reuses)
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
PY=${PYTHON:-python3}

# maturin builds only the root package's binary; the plugin (workspace member tuner/) is built here and staged in
# the tree pyproject.toml's `data` names, which the wheel installs under <env>/ (data/lib/ -> <env>/lib/).
# The whole workspace, as `cargo test --release` built it (building only -p planner-tuner unifies features
# differently and recompiles its dependencies).
cargo build --release
mkdir -p target/wheel-data/data/lib
cp target/release/libnccl_tuner_planner.so target/wheel-data/data/lib/

if [ ! -x target/wheel-build-venv/bin/maturin ]; then
  "$PY" -m venv target/wheel-build-venv
  target/wheel-build-venv/bin/pip install --quiet 'maturin>=1.5,<2'
fi
rm -rf target/wheels
target/wheel-build-venv/bin/maturin build --release --quiet --out target/wheels
wheel=$(ls target/wheels/*.whl)

# A fresh environment, as a user's PyTorch venv would be: only the wheel goes in.
rm -rf target/wheel-venv
"$PY" -m venv target/wheel-venv
target/wheel-venv/bin/pip install --quiet "$wheel"
venv="$PWD/target/wheel-venv"
(cd "$venv" && bin/planner explain --size 16M >/dev/null)
exports=$(cd /tmp && env -u NCCL_TUNER_PLUGIN "$venv/bin/planner" env 2>/dev/null)
# A herestring, not `echo | grep -q`: grep stops at the first of the two lines, and echo writing the second into the
# closed pipe then dies of SIGPIPE, which pipefail turns into a failure (seen once in a clean-clone CI run).
grep -qx "export NCCL_TUNER_PLUGIN=$venv/lib/libnccl_tuner_planner.so" <<<"$exports" \
  || { echo "wheel: planner env did not name the installed plugin: $exports" >&2; exit 1; }
"$venv/bin/python" - "$venv/lib/libnccl_tuner_planner.so" <<'PYEOF'
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
for symbol in ("ncclTunerPlugin_v5", "ncclTunerPlugin_v6"):
    getattr(lib, symbol)  # AttributeError (a failed check) when NCCL would not find the tuner
print("wheel: plugin loads from", sys.argv[1], "with ncclTunerPlugin_v5 and _v6")
PYEOF
echo "wheel: $(basename "$wheel") built, installed and smoke-tested in $((SECONDS - start)) s"
