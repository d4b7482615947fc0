#!/usr/bin/env bash
# The test command: set up, then every test suite hilt has.
# - rustfmt, and clippy over every target with warnings as errors;
# - the workspace's unit, integration, property and doc tests;
# - the runtime, protocol and agent checked no_std with defmt for ARMv6-M
#   (the firmware builds compile them without it for every pinned target);
# - the firmware built for every real board in boards/ (hilt's, or the
#   crate a board names with `firmware = "..."`; compiled and linked into
#   the board's memory map, without fat LTO); the virtual boards' own
#   builds, the bring-your-own example's included, are the QEMU tests' and
#   the gate's, which run them;
# - the fuzz targets (target/runtime/fuzz, a workspace of its own), each
#   fuzzed for a fixed count of executions (seeded, so a failure reproduces;
#   10–40 s each) on its committed seeds with plain
#   cargo (ci/fuzz-bounded.sh; no cargo-fuzz or nightly needed), in the
#   background beside the sections up to the workspace tests;
# - the QEMU end-to-end tests (qemu-system-arm is installed by setup);
# - `hilt gate` over the shipped scenarios on the virtual boards, then
#   `hilt bench-target` (hilt's instructions beside TFLM's, in
#   build/reports/bench-target.md; it fails when hilt needs more than TFLM +
#   CMSIS-NN on the M4, and ci/check-figures.py holds the book's table to it),
#   then the QEMU plugin's overhead (ci/plugin-overhead.sh, fails above 3x);
# - the README's and the book's transcripts (`$ hilt ...` and its output),
#   run again and compared line for line (ci/check-transcripts.py);
# - no QEMU left running at the end (one left would hold a core);
# - the CI workflows in ci/github/: GitHub's schema, no zizmor finding, and
#   hilt's rules for them (ci/check-workflows.sh);
# - the book (docs/): built with `mkdocs build --strict`, every link and
#   anchor, the README's links into it, the commands it shows
#   (ci/check-docs.sh);
# - the conformance suites against ../shared/conformance and
#   ../shared/conformance-ops (or the `:`-separated folders of
#   HILT_CONFORMANCE_DIR), every model of every set; they fail when a set
#   is missing only if HILT_CONFORMANCE_REQUIRED=1, which CI sets.
set -uo pipefail
set -e
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CARGO_TARGET_DIR="$REPO/build"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
cd "$REPO"
# Each section's header carries the seconds since the start, so that a CI
# log shows where the time goes.
start_seconds=$SECONDS
section() { echo "== $* [$((SECONDS - start_seconds)) s]"; }
ci/setup.sh

section "format"
cargo fmt --all -- --check

section "clippy (every target of the workspace, warnings are errors)"
cargo clippy --quiet --workspace --all-targets -- -D warnings

section "no_std check of the target crates with defmt (the firmware builds below and in the QEMU tests compile them without it for every pinned target)"
# ARMv6-M: the pinned target with the least (no atomic read-modify-write,
# no DSP); the real boards below are ARMv7E-M and ARMv8-M, and the QEMU
# tests build for all three.
cargo check --quiet -p hilt-runtime -p hilt-proto -p hilt-agent \
  --features hilt-agent/cortex-m,hilt-agent/defmt --target thumbv6m-none-eabi
echo "hilt-runtime, hilt-proto and hilt-agent (with defmt) check for thumbv6m-none-eabi"

section "fuzz targets (target/runtime/fuzz), in the background: built here, run beside the sections below"
# Coverage-guided, with debug assertions, on stable cargo (ci/fuzz-bounded.sh
# says how); new inputs stay in build/. The nightly workflow fuzzes an hour.
# A fuzzer runs on one core, as does a firmware's fat-LTO link, so the two
# share the machine's two; the runs are counted in executions, not seconds,
# so sharing changes no input drawn. Its report is printed before the
# workspace tests.
fuzz_log="$(mktemp)"
ci/fuzz-bounded.sh build
ci/fuzz-bounded.sh >"$fuzz_log" 2>&1 &
fuzz_pid=$!

section "firmware for every real board (the virtual ones are built and run by the QEMU tests and the gate below)"
# A check that each compiles and links into its board's memory map: the
# release profile without fat LTO (an unoptimised link is larger, so what
# fits here fits LTO'd; the fat-LTO link is a minute of one core per
# board). hilt builds the LTO firmware it flashes when it runs a board, as
# the QEMU tests and the gate do for the virtual ones.
export CARGO_PROFILE_RELEASE_LTO=off CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16
for board_file in boards/*.toml; do
  board="$(basename "$board_file" .toml)"
  triple="$(sed -n 's/^target *= *"\(.*\)"/\1/p' "$board_file")"
  firmware="$(sed -n 's/^firmware *= *"\(.*\)"/\1/p' "$board_file")"
  if grep -q '^runner *= *"qemu"' "$board_file"; then
    continue
  elif [ -n "$firmware" ]; then
    # The board's own firmware crate (no board features: it reads HILT_BOARD).
    (cd "$firmware" && HILT_BOARD="$board" CARGO_TARGET_DIR="$REPO/build/firmware/check" \
      cargo build --quiet --release --target "$triple")
    echo "firmware $firmware builds for $board ($triple)"
  else
    (cd target/firmware && CARGO_TARGET_DIR="$REPO/build/firmware/check" \
      cargo build --quiet --release --target "$triple" --features "board-$board")
    echo "firmware builds for $board ($triple)"
  fi
done

unset CARGO_PROFILE_RELEASE_LTO CARGO_PROFILE_RELEASE_CODEGEN_UNITS

log="$(mktemp)"
# (Every command of the trap may fail without changing the exit status:
# under `set -e` a failing one would turn a green run's 0 into a 1.)
trap 'rm -f "$log" "$fuzz_log" || true; ci/postgres.sh stop >/dev/null 2>&1 || true; [ -z "${fuzz_pid:-}" ] || { pkill -P "$fuzz_pid"; kill "$fuzz_pid"; } 2>/dev/null || true' EXIT
status=0
# A step that fails says so where it fails, and the run goes on (every
# section's result is worth having); the exit status is 1 at the end.
failed() {
  local code=$?
  echo "== FAILED: $1 (exit status $code)"
  failures+=("$1")
  status=1
}
failures=()

section "CI workflows (ci/github/*.yml)"
# Schema (check-jsonschema), security (zizmor --offline) and hilt's own rules
# (ci/check-workflows.py); installs the pinned tools when missing.
ci/check-workflows.sh || failed "the CI workflows"

section "the book (docs/, mkdocs.yml)"
# mkdocs build --strict into build/book (every broken link or anchor fails),
# the README's links into docs/, and the commands the docs show
# (ci/check-docs.sh; installs the pinned MkDocs when missing).
ci/check-docs.sh || failed "the book"

section "conformance suite"
# --workspace: the same features as the workspace tests below, so those reuse
# this build instead of compiling probe-rs and hilt again with other features.
cargo test --workspace --test conformance -- --nocapture 2>&1 | tee -a "$log" || failed "the conformance suite"

section "QEMU plugin (host/qemu-plugin, a workspace and licence of its own): format and unit tests"
cargo fmt --manifest-path host/qemu-plugin/Cargo.toml -- --check || failed "the QEMU plugin's format"
CARGO_TARGET_DIR="$CARGO_TARGET_DIR/qemu-plugin-tests" \
  cargo test --quiet --manifest-path host/qemu-plugin/Cargo.toml 2>&1 | tee -a "$log" || failed "the QEMU plugin's tests"

section "fuzz targets: their report (run since the firmware section)"
wait "$fuzz_pid" || failed "the fuzz targets"
cat "$fuzz_log"
rm -f "$fuzz_log"

section "workspace tests (with a throw-away PostgreSQL for the results store's: ci/postgres.sh)"
if postgres="$(ci/postgres.sh start)"; then
  eval "$postgres"
else
  echo "no PostgreSQL server could be started: the results store's PostgreSQL tests are skipped"
fi
# With cargo-nextest (on the dev machines and CI; `cargo install
# cargo-nextest` elsewhere) every test of every binary shares one pool of
# test threads (.config/nextest.toml): a binary's longest QEMU test no
# longer holds the next binary back while a core idles. Doc tests are
# cargo's own. Without nextest, plain `cargo test` runs the same tests.
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast 2>&1 | tee -a "$log" || failed "the workspace tests (nextest)"
  cargo test --workspace --doc 2>&1 | tee -a "$log" || failed "the doc tests"
else
  cargo test --workspace --no-fail-fast 2>&1 | tee -a "$log" || failed "the workspace tests"
fi
ci/postgres.sh stop || true

section "the runtime built as hilt's lean firmware is (features no-offload, no-pools, no-lean and no-constant-image, for a scenario without an engine, pools, the lean schedule or constants in flash): a backend, a split arena, the lean schedule and a constant image are refused by name"
cargo test --quiet -p hilt-runtime --features no-offload,no-pools,no-lean,no-constant-image --test accel --test pools --test lean_schedule --test constant_image a_no_ 2>&1 | tee -a "$log" || failed "the lean-firmware runtime tests"

section "regression gate: shipped scenarios on the virtual boards vs snapshots/gate"
# The binary the workspace tests built and ran (an optimised build would
# cost minutes and save seconds: the host only drives QEMU and compares).
hilt="$CARGO_TARGET_DIR/debug/hilt"
[ -x "$hilt" ] || cargo build --quiet -p hilt
# The first conformance set (HILT_CONFORMANCE_DIR may name several, `:`-separated).
first_set="${HILT_CONFORMANCE_DIR:-$REPO/../shared/conformance}"
first_set="${first_set%%:*}"
if [ -f "$first_set/manifest.json" ]; then
  "$hilt" gate || failed "the gate"
  section "target benchmark: instructions per inference against TFLM's (hilt bench-target)"
  "$hilt" bench-target --format markdown | tee build/reports/bench-target.md || failed "hilt bench-target"
  # The book's table (docs/performance.md) is this run's, figure for figure.
  ci/check-figures.py build/reports/bench-target.md || failed "the book's figures"
  section "QEMU plugin overhead: KWS with access checks on against off (fails above 3x)"
  ci/plugin-overhead.sh "$hilt" || failed "the plugin's overhead"
  section "transcripts: every hilt command the README and the book show, run again and compared"
  ci/check-transcripts.py "$hilt" || failed "the transcripts"
elif [ "${HILT_CONFORMANCE_REQUIRED:-0}" = 1 ]; then
  echo "conformance set missing: the gate's shipped scenarios need it"
  failures+=("the conformance set"); status=1
else
  "$hilt" gate scenarios/smoke_reshape.toml scenarios/tiny_convnet_int8.toml || failed "the gate"
fi

section "no QEMU left running"
# Every QEMU a test or the gate starts must end with it: one left spinning
# holds a core for the rest of the run (a daemonized QEMU once did, SIGTERM
# being blocked while its guest spins).
leftover="$(pgrep -af "qemu-system-arm.*$REPO/build" || true)"
if [ -n "$leftover" ]; then
  echo "QEMU left running by the tests:"
  echo "$leftover"
  pkill -9 -f "qemu-system-arm.*$REPO/build" || true
  failures+=("QEMU left running"); status=1
else
  echo "none"
fi

section "done"
# One closing line over every cargo test run above.
awk '/^test result:|^ *Summary \[/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "hilt: %d passed, %d failed\n", p, f }' "$log"
if [ "$status" != 0 ]; then
  echo "hilt: failed: ${failures[*]:-a step above}"
fi
exit "$status"
