#!/usr/bin/env bash
# The HIL loop's own cost: wall time of `hilt run` per (scenario, board) on
# a virtual board, firmware already built, over RTT (gdbstub) and over the
# UART (pty). A run should cost what the guest executes plus a fixed
# start-up; this shows whether it does.
# Usage: ci/bench-loop.sh [RUNS]   (default 5 runs per pair)
# Prints one line per run and the median per pair; needs the conformance set
# (KWS) and qemu-system-arm (ci/setup.sh installs it).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CARGO_TARGET_DIR="$REPO/build"
cd "$REPO"
runs="${1:-5}"
cargo build --quiet --release -p hilt
hilt="$REPO/build/release/hilt"
report_dir="$(mktemp -d)"
trap 'rm -rf "$report_dir"' EXIT

pairs=(
  "scenarios/hello_world_int8.toml qemu-mps2-an386"
  "scenarios/hello_world_int8.toml qemu-mps2-an386-uart"
  "scenarios/kws_dscnn_int8.toml qemu-mps2-an386"
  "scenarios/kws_dscnn_int8.toml qemu-mps2-an386-uart"
)
printf '%-22s %-22s %s\n' scenario board 'wall s per run (median)'
for pair in "${pairs[@]}"; do
  read -r scenario board <<<"$pair"
  # Warm-up: builds the firmware once, outside the timed runs.
  "$hilt" run "$scenario" --board "$board" --report-dir "$report_dir" >/dev/null
  times=()
  for _ in $(seq "$runs"); do
    start=$(date +%s.%N)
    "$hilt" run "$scenario" --board "$board" --report-dir "$report_dir" >/dev/null
    end=$(date +%s.%N)
    times+=("$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')")
  done
  median=$(printf '%s\n' "${times[@]}" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
  printf '%-22s %-22s %s (%s)\n' "$(basename "$scenario" .toml)" "$board" \
    "$(printf '%.2f ' "${times[@]}")" "$(printf '%.2f' "$median")"
done
