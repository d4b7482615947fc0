#!/usr/bin/env bash
# Fuzzes hilt-runtime: load_and_plan for SECONDS (default 1200), then
# plan_requests for PLAN_SECONDS (default SECONDS / 4), then invoke for
# INVOKE_SECONDS (default SECONDS), one libFuzzer job each.
#
#   target/runtime/fuzz/run.sh [SECONDS [PLAN_SECONDS [INVOKE_SECONDS]]]
#
# Environment:
#   CARGO_TARGET_DIR     build output (default: <repo>/build/fuzz; never target/)
#   FUZZ_SANITIZER       address (default) or none; falls back to none if an
#                        address-sanitizer build fails
#   FUZZ_MAX_SEED_BYTES  conformance models up to this size join the corpus
#                        (default 131072)
#   FUZZ_RSS_LIMIT_MB    libFuzzer -rss_limit_mb (default 2048)
#   FUZZ_TARGETS         which targets to run (default: all three, in order)
#   FUZZ_RUNS            stop each target after this many executions instead
#                        of (or before) its time (libFuzzer -runs)
#   FUZZ_LOG_SECONDS     a target that ran at least this long gets a row in
#                        runs.md (default 600; the log of long runs)
set -euo pipefail

seconds="${1:-1200}"
plan_seconds="${2:-$(( seconds / 4 > 10 ? seconds / 4 : 10 ))}"
invoke_seconds="${3:-$seconds}"

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
# models of both sets when this checkout sits next to them (corpus/ is not
# tracked). invoke also starts from the one-op models of the TFLM vector
# tests, which reach every kernel in the types it takes.
cargo run --quiet --example build_corpus -- corpus
mkdir -p corpus/invoke
cp -f corpus/load_and_plan/*.tflite corpus/invoke/
cp -f "$repo"/target/runtime/tests/data/tflm_ops/*.tflite corpus/invoke/
max_bytes="${FUZZ_MAX_SEED_BYTES:-131072}"
IFS=: read -r -a sets <<< "${HILT_CONFORMANCE_DIR:-$repo/../shared/conformance:$repo/../shared/conformance-ops}"
for set in "${sets[@]}"; do
    if [ -d "$set/models" ]; then
        find "$set/models" -maxdepth 1 -name '*.tflite' -size -"$((max_bytes + 1))"c \
            -exec cp -f {} corpus/load_and_plan/ \; -exec cp -f {} corpus/invoke/ \;
    fi
done

rss="${FUZZ_RSS_LIMIT_MB:-2048}"
status=0
runs=()
if [ -n "${FUZZ_RUNS:-}" ]; then
    runs=(-runs="$FUZZ_RUNS")
fi
log_seconds="${FUZZ_LOG_SECONDS:-600}"
commit="$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [ -n "$(git -C "$repo" status --porcelain -- target/runtime/src 2>/dev/null)" ]; then
    commit="$commit + uncommitted runtime changes"
fi
# One row of runs.md: what ran, on which code, how much, with what result.
record() {
    local target="$1" output="$2" seconds="$3" crashes="$4" limit="$5"
    local executions
    executions="$(sed -n 's/^stat::number_of_executed_units: *//p' "$output" | tail -1)"
    printf '| %s | %s | %s | %s | %s | %s | %s | run.sh, %s |\n' \
        "$(date -u +%Y-%m-%d)" "$commit" "$target" "$sanitizer" "${executions:-?}" \
        "$seconds" "$crashes" "${FUZZ_RUNS:+-runs=$FUZZ_RUNS, }-max_total_time=$limit" >>"$here/runs.md"
}
run() {
    local target="$1" time="$2" started output crashes=0
    mkdir -p "corpus/$target" "seeds/$target"
    echo "run.sh: fuzzing $target for ${time}s (sanitizer: $sanitizer)" >&2
    started=$SECONDS
    output="$(mktemp)"
    cargo fuzz run --debug-assertions -s "$sanitizer" "$target" \
        "corpus/$target" "seeds/$target" -- \
        -max_total_time="$time" "${runs[@]}" -rss_limit_mb="$rss" -timeout=30 \
        -print_final_stats=1 2> >(tee "$output" >&2) \
        || { echo "run.sh: $target failed (exit $?); see artifacts/$target/" >&2; status=1; crashes=1; }
    local took=$((SECONDS - started))
    if [ "$took" -ge "$log_seconds" ]; then
        record "$target" "$output" "$took" "$crashes" "$time"
        echo "run.sh: recorded the run in $here/runs.md" >&2
    fi
    rm -f "$output"
}
for target in ${FUZZ_TARGETS:-load_and_plan plan_requests invoke}; do
    case "$target" in
        load_and_plan) run load_and_plan "$seconds" ;;
        plan_requests) run plan_requests "$plan_seconds" ;;
        invoke) run invoke "$invoke_seconds" ;;
        *) echo "run.sh: unknown target $target" >&2; exit 2 ;;
    esac
done
exit "$status"
