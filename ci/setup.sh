#!/usr/bin/env bash
# Installs what hilt's commands need, only when it is missing: the pinned Rust
# toolchain with its thumb targets and llvm-tools (rust-toolchain.toml),
# qemu-system-arm for the virtual boards, xmllint (libxml2-utils) for the
# report schema test, and TFLM's Python interpreter (build/tflm-venv) for the
# offline-plan check. Safe to run again; never prompts.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"

say() { printf 'setup: %s\n' "$*" >&2; }

if ! command -v rustup >/dev/null 2>&1; then
  say "rustup is required (https://rustup.rs); it is not installed"
  exit 1
fi

toolchain="$(sed -n 's/^channel *= *"\(.*\)"/\1/p' rust-toolchain.toml)"
targets="$(sed -n 's/^targets *= *\[\(.*\)\]/\1/p' rust-toolchain.toml | tr -d '",')"
if ! rustup toolchain list | grep -q "^${toolchain}"; then
  say "installing Rust ${toolchain}"
  rustup toolchain install "$toolchain" --profile minimal --component rustfmt,clippy,llvm-tools
fi
installed="$(rustup target list --installed --toolchain "$toolchain")"
for t in $targets; do
  if ! grep -qx "$t" <<<"$installed"; then
    say "adding target $t"
    rustup target add --toolchain "$toolchain" "$t"
  fi
done
if ! rustup component list --installed --toolchain "$toolchain" | grep -q '^llvm-tools'; then
  say "adding llvm-tools"
  rustup component add --toolchain "$toolchain" llvm-tools
fi

if ! command -v qemu-system-arm >/dev/null 2>&1; then
  if [ "${HILT_SKIP_QEMU:-0}" = 1 ]; then
    say "qemu-system-arm missing (HILT_SKIP_QEMU=1: not installing)"
  elif command -v apt-get >/dev/null 2>&1; then
    say "installing qemu-system-arm"
    sudo_cmd=""
    [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo -n"
    export DEBIAN_FRONTEND=noninteractive
    $sudo_cmd apt-get update -qq </dev/null >/dev/null
    $sudo_cmd apt-get install -y -qq qemu-system-arm </dev/null >/dev/null
  else
    say "qemu-system-arm missing and apt-get unavailable: install it with your package manager"
    exit 1
  fi
fi
# xmllint checks the JUnit report against its schema in the tests.
if ! command -v xmllint >/dev/null 2>&1; then
  if [ "${HILT_SKIP_XMLLINT:-0}" = 1 ]; then
    say "xmllint missing (HILT_SKIP_XMLLINT=1: not installing)"
  elif command -v apt-get >/dev/null 2>&1; then
    say "installing libxml2-utils (xmllint)"
    sudo_cmd=""
    [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo -n"
    export DEBIAN_FRONTEND=noninteractive
    $sudo_cmd apt-get update -qq </dev/null >/dev/null
    $sudo_cmd apt-get install -y -qq libxml2-utils </dev/null >/dev/null
  else
    say "xmllint missing and apt-get unavailable: install libxml2-utils with your package manager"
    exit 1
  fi
fi
# TFLM's Python interpreter (ci/requirements-tflm.txt) in a virtualenv of its
# own, build/tflm-venv: ci/tflm-offline-check.py runs hilt's offline plans
# under TFLM with it. Reinstalled when the requirements change; a failed
# install is reported, and host/tests/tflm_offline.rs then fails under
# HILT_CONFORMANCE_REQUIRED=1 (skips otherwise).
tflm_venv="$REPO/build/tflm-venv"
tflm_req="$REPO/ci/requirements-tflm.txt"
if [ "${HILT_SKIP_TFLM:-0}" = 1 ]; then
  say "tflite-micro not installed (HILT_SKIP_TFLM=1)"
elif ! cmp -s "$tflm_req" "$tflm_venv/.requirements" ||
  ! "$tflm_venv/bin/python" -c 'import tflite_micro' >/dev/null 2>&1; then
  say "installing tflite-micro (ci/requirements-tflm.txt) into build/tflm-venv"
  if { [ -x "$tflm_venv/bin/python" ] || python3 -m venv "$tflm_venv" </dev/null >/dev/null; } &&
    "$tflm_venv/bin/python" -m pip install --quiet -r "$tflm_req" </dev/null >/dev/null; then
    cp "$tflm_req" "$tflm_venv/.requirements"
  else
    say "could not install tflite-micro into build/tflm-venv (pip install -r ci/requirements-tflm.txt)"
  fi
fi
say "ok ($(rustc +"$toolchain" --version), $(qemu-system-arm --version 2>/dev/null | head -1 || echo 'no qemu'))"
