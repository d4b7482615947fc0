#!/usr/bin/env bash
# Every fuzz target of target/runtime/fuzz, each for a bounded number of
# executions on its committed seeds (CI: ci/run-tests.sh, 10–40 s a
# target on the 2-core machine, a smoke test beside the other sections;
# the nightly workflow runs target/runtime/fuzz/run.sh for an hour
# instead).
#
#   ci/fuzz-bounded.sh [SCALE]   # executions × SCALE (default 1)
#   ci/fuzz-bounded.sh build     # only build the targets (CI builds them
#                                # first, then fuzzes in the background)
#
# Seeded: a fixed libFuzzer seed and a fixed count of executions (not a
# time), so the same binary draws the same inputs and a failure reproduces
# with the same command. (A checkout at another path builds a slightly
# different binary, so CI may still find what a local run did not: then
# the reproducer it names is a real bug.) A time cap (5 minutes a target)
# only guards against a hang.
#
# Plain cargo on the pinned stable toolchain, no cargo-fuzz: libfuzzer-sys
# builds libFuzzer itself, and the coverage instrumentation libFuzzer needs
# (SanitizerCoverage) is the LLVM pass `sancov-module`, which stable rustc
# runs through -C passes / -C llvm-args (what cargo-fuzz passes too, less
# AddressSanitizer, which needs a nightly flag). Debug assertions stay on,
# so an integer overflow is a crash. New inputs go to build/, never into
# seeds/. Exit 1 if a target crashes, naming its reproducer (add it to
# seeds/TARGET/ with the fix: tests/fuzz_seeds.rs replays it).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mode="${1:-1}"
fuzz="$REPO/target/runtime/fuzz"
out="$REPO/build/fuzz-bounded"
export CARGO_TARGET_DIR="$out/cargo"
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
# An explicit --target keeps RUSTFLAGS off the build scripts (they would
# need libFuzzer's symbols), as cargo-fuzz does.
host="$(rustc -vV | sed -n 's/^host: //p')"
(cd "$fuzz" && cargo build --quiet --locked --release --bins --target "$host")
if [ "$mode" = build ]; then
  exit 0
fi
scale="$mode"
bin="$CARGO_TARGET_DIR/$host/release"
status=0
for target in load_and_plan plan_requests invoke; do
  case "$target" in
    load_and_plan) runs=500000 ;;
    plan_requests) runs=300000 ;;
    invoke) runs=800000 ;;
  esac
  runs=$((runs * scale))
  started=$SECONDS
  corpus="$out/corpus/$target"
  artifacts="$out/artifacts/$target/"
  mkdir -p "$corpus" "$artifacts" "$fuzz/seeds/$target"
  log="$out/$target.log"
  # A fresh corpus folder each run: what an earlier run grew would change
  # the inputs this one draws.
  rm -rf "$corpus" && mkdir -p "$corpus"
  if "$bin/$target" "$corpus" "$fuzz/seeds/$target" -seed=1 -runs="$runs" \
    -max_total_time=300 -rss_limit_mb=2048 -timeout=30 -print_final_stats=1 \
    -artifact_prefix="$artifacts" >"$log" 2>&1; then
    done_runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
    edges="$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)"
    echo "fuzz $target: ${done_runs:-?} executions in $((SECONDS - started)) s, ${edges:-?} coverage edges, no crash"
  else
    echo "fuzz $target: FAILED after $(grep -c . "$log") log lines; reproducer under $artifacts:"
    tail -n 30 "$log"
    status=1
  fi
done
exit "$status"
