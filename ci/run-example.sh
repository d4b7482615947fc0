#!/usr/bin/env bash
# The main job, on a fresh machine: set up, build hilt, and plan the shipped
# example model's arena (table on stdout, JSON and SVG under build/reports/).
# Usage: ci/run-example.sh [MODEL.tflite] [hilt layout options...]
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CARGO_TARGET_DIR="$REPO/build"
cd "$REPO"
ci/setup.sh
cargo build --quiet --release -p hilt
model="${1:-scenarios/models/tiny_convnet_int8.tflite}"
shift || true
reports="$REPO/build/reports"
mkdir -p "$reports"
name="$(basename "$model" .tflite)"
build/release/hilt layout "$model" "$@"
build/release/hilt layout "$model" "$@" --format json -o "$reports/$name.layout.json"
build/release/hilt layout "$model" "$@" --format svg -o "$reports/$name.layout.svg"
echo
echo "wrote $reports/$name.layout.json and $reports/$name.layout.svg"
