#!/usr/bin/env bash
# The main job, on a fresh machine: set up (Rust targets, qemu-system-arm),
# build hilt and the firmware, and run a scenario on a virtual board: the
# firmware boots under QEMU, the host streams the inputs over RTT, the board
# computes, and the outputs, cycles and arena are checked and printed. Then
# the arena plan of the same model is shown (table; JSON and SVG under
# build/reports/).
# Usage: ci/run-example.sh [SCENARIO.toml] [hilt run options...]
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CARGO_TARGET_DIR="$REPO/build"
cd "$REPO"
ci/setup.sh
# Cargo shows its own progress: a first build takes minutes on a fresh machine.
cargo build --release -p hilt
scenario="${1:-scenarios/tiny_convnet_int8.toml}"
shift || true
if [ "$#" -eq 0 ]; then
  set -- --board qemu-mps2-an386
fi
build/release/hilt run "$scenario" "$@"
model="$(sed -n 's/^model *= *"\(.*\)"/\1/p' "$scenario")"
if [ -n "$model" ]; then
  model="$(dirname "$scenario")/$model"
  reports="$REPO/build/reports"
  mkdir -p "$reports"
  name="$(basename "$model" .tflite)"
  echo
  build/release/hilt layout "$model"
  build/release/hilt layout "$model" --format json -o "$reports/$name.layout.json"
  build/release/hilt layout "$model" --format svg -o "$reports/$name.layout.svg"
  echo "wrote $reports/$name.layout.json and $reports/$name.layout.svg"
fi
