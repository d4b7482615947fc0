#!/usr/bin/env bash
# One CI run of scenarios, as the nightly and gate workflows do it: builds
# hilt (release), then `hilt run` (or `hilt $HILT_COMMAND`: `gate` checks
# the accepted snapshots in snapshots/gate) on the scenario files matching
# $HILT_SCENARIOS (a glob, default scenarios/*.toml) with the options given,
# e.g. ci/run-scenarios.sh --board 'qemu-*' --shard 1/2 --report-dir reports/q1
#
# Scenarios built on the TFLM conformance set need it (HILT_CONFORMANCE_DIR,
# else ../shared/conformance beside the repository). Where it is missing they
# are left out with a warning, so a runner without the set still checks the
# others; HILT_CONFORMANCE_REQUIRED=1 makes that an error instead.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/build}"
cd "$REPO"

warn() {
  if [ "${GITHUB_ACTIONS:-}" = true ]; then
    echo "::warning::$*"
  else
    echo "warning: $*" >&2
  fi
}

# An empty value (an unset CI variable) means "not given", not "this folder".
[ -n "${HILT_CONFORMANCE_DIR:-}" ] || unset HILT_CONFORMANCE_DIR

command="${HILT_COMMAND:-run}"
case "$command" in
  run | gate) ;;
  *) echo "HILT_COMMAND must be run or gate, not '$command'" >&2; exit 2 ;;
esac

cargo build --quiet --release --locked -p hilt

shopt -s nullglob
# shellcheck disable=SC2206 # the pattern is meant to be expanded
scenarios=(${HILT_SCENARIOS:-scenarios/*.toml})
if [ "${#scenarios[@]}" -eq 0 ]; then
  echo "no scenario file matches '${HILT_SCENARIOS:-scenarios/*.toml}'" >&2
  exit 1
fi
if [ -z "${HILT_CONFORMANCE_DIR:-}" ] && [ ! -d ../shared/conformance ]; then
  if [ "${HILT_CONFORMANCE_REQUIRED:-0}" = 1 ]; then
    echo "the conformance set is required (HILT_CONFORMANCE_REQUIRED=1) but missing: set HILT_CONFORMANCE_DIR" >&2
    exit 1
  fi
  kept=()
  for s in "${scenarios[@]}"; do
    if grep -q '^conformance *=' "$s"; then
      warn "no conformance set (set HILT_CONFORMANCE_DIR): skipping $s"
    else
      kept+=("$s")
    fi
  done
  scenarios=("${kept[@]}")
  if [ "${#scenarios[@]}" -eq 0 ]; then
    warn "no scenario left to run without the conformance set"
    exit 0
  fi
fi
exec "$CARGO_TARGET_DIR/release/hilt" "$command" "${scenarios[@]}" "$@"
