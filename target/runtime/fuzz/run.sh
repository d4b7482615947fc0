#!/usr/bin/env bash
# Fuzzes hilt-runtime: load_and_plan for SECONDS (default 1200), then
# plan_requests for PLAN_SECONDS (default SECONDS / 4), one libFuzzer job each.
#
#   target/runtime/fuzz/run.sh [SECONDS [PLAN_SECONDS]]
#
# Environment:
#   CARGO_TARGET_DIR     build output (default: <repo>/build/fuzz; never target/)
#   FUZZ_SANITIZER       address (default) or none; falls back to none if an
#                        address-sanitizer build fails
#   FUZZ_MAX_SEED_BYTES  conformance models up to this size join the corpus
#                        (default 131072)
#   FUZZ_RSS_LIMIT_MB    libFuzzer -rss_limit_mb (default 2048)
set -euo pipefail

seconds="${1:-1200}"
plan_seconds="${2:-$(( seconds / 4 > 10 ? seconds / 4 : 10 ))}"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
cd "$here"

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/build/fuzz}"
# cargo-fuzz passes -Z flags (sanitizers, sancov); the pinned toolchain is
# stable, so let it accept them. Harmless on a nightly toolchain.
export RUSTC_BOOTSTRAP=1

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "run.sh: installing cargo-fuzz" >&2
    cargo install cargo-fuzz --locked
fi

sanitizer="${FUZZ_SANITIZER:-address}"
if ! cargo fuzz build --debug-assertions -s "$sanitizer"; then
    if [ "$sanitizer" = none ]; then
        exit 1
    fi
    echo "run.sh: the $sanitizer-sanitizer build failed; retrying with -s none" >&2
    sanitizer=none
    cargo fuzz build --debug-assertions -s none
fi

# Seed corpus: models written by hilt's ModelWriter, plus the conformance
# models when this checkout sits next to them (corpus/ is not tracked).
cargo run --quiet --example build_corpus -- corpus
conformance="$repo/../shared/conformance/models"
if [ -d "$conformance" ]; then
    max_bytes="${FUZZ_MAX_SEED_BYTES:-131072}"
    find "$conformance" -maxdepth 1 -name '*.tflite' -size -"$((max_bytes + 1))"c \
        -exec cp -f {} corpus/load_and_plan/ \;
fi

rss="${FUZZ_RSS_LIMIT_MB:-2048}"
status=0
run() {
    local target="$1" time="$2"
    mkdir -p "corpus/$target"
    echo "run.sh: fuzzing $target for ${time}s (sanitizer: $sanitizer)" >&2
    cargo fuzz run --debug-assertions -s "$sanitizer" "$target" \
        "corpus/$target" "seeds/$target" -- \
        -max_total_time="$time" -rss_limit_mb="$rss" -timeout=30 -print_final_stats=1 \
        || { echo "run.sh: $target failed (exit $?); see artifacts/$target/" >&2; status=1; }
}
run load_and_plan "$seconds"
run plan_requests "$plan_seconds"
exit "$status"
