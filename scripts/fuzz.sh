#!/usr/bin/env bash
# Runs the cargo-fuzz targets in fuzz/fuzz_targets/ (one file per target), one at a time on one core.
#
#   scripts/fuzz.sh                   # every target, 60 s each
#   scripts/fuzz.sh 300 tuner_plan    # one target, 5 minutes
#   scripts/fuzz.sh --regress         # every target over its committed corpus once (-runs=0): CI's check
#
# Inputs: the committed seeds fuzz/corpus/TARGET/ (read-only here) and the working corpus fuzz/work/TARGET/ (not
# committed; libFuzzer writes new inputs to the first directory it is given). Builds are release with debug
# assertions (overflow checks on) and no sanitizer (safe Rust: a panic is the finding; 2-3x the throughput).
# A crash stops the script with libFuzzer's report; the input is saved under fuzz/artifacts/TARGET/ (reproduce:
# `cargo +nightly fuzz run -a -s none TARGET fuzz/artifacts/TARGET/crash-...`). At the end one line per target:
# inputs, seconds, libFuzzer's final cov/ft, the working corpus size; the logs are in fuzz/work/logs/.
#
# Needs a nightly toolchain and cargo-fuzz: `rustup toolchain install nightly`, `cargo install cargo-fuzz`.
set -euo pipefail
cd "$(dirname "$0")/.."

regress=false
if [ "${1:-}" = "--regress" ]; then
    regress=true
    shift
    seconds=0
else
    seconds="${1:-60}"
    shift || true
    if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -eq 0 ]; then
        echo "fuzz.sh: SECONDS must be a whole number above 0, got '$seconds'" >&2
        exit 2
    fi
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: needs nightly and cargo-fuzz (rustup toolchain install nightly; cargo install cargo-fuzz)" >&2
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
for target in "${targets[@]}"; do
    if [ ! -f "fuzz/fuzz_targets/$target.rs" ]; then
        echo "fuzz.sh: no target '$target' (fuzz/fuzz_targets/$target.rs)" >&2
        exit 2
    fi
done

build=(-a -s none)
# One build of every target first (each `run` then finds it up to date).
if [ "$#" -gt 0 ]; then
    for target in "${targets[@]}"; do cargo +nightly fuzz build "${build[@]}" "$target"; done
else
    cargo +nightly fuzz build "${build[@]}"
fi

mkdir -p fuzz/work/logs
summary=()
for target in "${targets[@]}"; do
    seeds="fuzz/corpus/$target"
    log="fuzz/work/logs/$target.log"
    if $regress; then
        echo "== $target: regression over $seeds" >&2
        if ! cargo +nightly fuzz run "${build[@]}" "$target" "$seeds" -- -runs=0 >"$log" 2>&1; then
            tail -n 40 "$log" >&2
            echo "fuzz.sh: $target FAILED on its committed corpus (log: $log)" >&2
            exit 1
        fi
        summary+=("$target: $(find "$seeds" -type f | wc -l) seeds pass")
        continue
    fi
    work="fuzz/work/$target"
    mkdir -p "$work"
    options=("-max_total_time=$seconds" "-print_final_stats=1" "-close_fd_mask=3")
    [ -f "fuzz/dicts/$target.dict" ] && options+=("-dict=fuzz/dicts/$target.dict")
    echo "== $target: ${seconds} s" >&2
    start=$(date +%s)
    if ! cargo +nightly fuzz run "${build[@]}" "$target" "$work" "$seeds" -- "${options[@]}" >"$log" 2>&1; then
        tail -n 40 "$log" >&2
        echo "fuzz.sh: $target FAILED (log: $log; the input is under fuzz/artifacts/$target/)" >&2
        exit 1
    fi
    took=$(($(date +%s) - start))
    runs="$(grep -Eo 'Done [0-9]+ runs' "$log" | tail -n 1 | grep -Eo '[0-9]+' || echo '?')"
    cov="$(grep -E '^#[0-9]+' "$log" | tail -n 1 | grep -Eo 'cov: [0-9]+ ft: [0-9]+' || echo 'cov: ? ft: ?')"
    files=$(find "$work" -type f | wc -l)
    bytes=$(du -sk "$work" | cut -f1)
    summary+=("$target: $runs inputs in ${took} s, $cov, corpus $files files ${bytes} KiB")
done

echo "== summary"
printf '%s\n' "${summary[@]}"
