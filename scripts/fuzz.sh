#!/usr/bin/env bash
# Runs every cargo-fuzz target in fuzz/fuzz_targets/ (one file per target) for SECONDS each, starting from the
# committed seeds in fuzz/seeds/TARGET/ (read-only) and the working corpus fuzz/corpus/TARGET/ (not committed).
# A crash stops the script with libFuzzer's report; its input is saved under fuzz/artifacts/TARGET/.
#
#   scripts/fuzz.sh                 # every target, 60 s each
#   scripts/fuzz.sh 300 tuner_plan  # one target, 5 minutes
#
# Needs a nightly toolchain and cargo-fuzz: `rustup toolchain install nightly`, `cargo install cargo-fuzz`.
set -euo pipefail

seconds="${1:-60}"
shift || true
cd "$(dirname "$0")/.."

if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -eq 0 ]; then
    echo "fuzz.sh: SECONDS must be a whole number above 0, got '$seconds'" >&2
    exit 2
fi
if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz.sh: no nightly toolchain (rustup toolchain install nightly)" >&2
    exit 1
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: cargo-fuzz is missing (cargo install cargo-fuzz)" >&2
    exit 1
fi

if [ "$#" -gt 0 ]; then
    targets=("$@")
else
    targets=()
    for file in fuzz/fuzz_targets/*.rs; do
        targets+=("$(basename "$file" .rs)")
    done
fi

summary=()
for target in "${targets[@]}"; do
    if [ ! -f "fuzz/fuzz_targets/$target.rs" ]; then
        echo "fuzz.sh: no target '$target' (fuzz/fuzz_targets/$target.rs)" >&2
        exit 2
    fi
    corpus="fuzz/corpus/$target"
    mkdir -p "$corpus"
    dirs=("$corpus")
    [ -d "fuzz/seeds/$target" ] && dirs+=("fuzz/seeds/$target")
    options=("-max_total_time=$seconds")
    [ -f "fuzz/dicts/$target.dict" ] && options+=("-dict=fuzz/dicts/$target.dict")
    log="$(mktemp)"
    echo "== $target: ${seconds} s" >&2
    # libFuzzer writes new inputs to the first directory only, so the seeds stay as committed.
    if ! cargo +nightly fuzz run "$target" "${dirs[@]}" -- "${options[@]}" 2>&1 | tee "$log" >&2; then
        echo "fuzz.sh: $target FAILED (see above; the input is under fuzz/artifacts/$target/)" >&2
        rm -f "$log"
        exit 1
    fi
    runs="$(grep -Eo 'Done [0-9]+ runs in [0-9]+ second' "$log" | tail -n 1 || true)"
    rm -f "$log"
    summary+=("$target: ${runs:-no run count printed}")
done

echo "== summary"
printf '%s\n' "${summary[@]}"
