#!/usr/bin/env bash
# Builds and checks the book (docs/, configured by mkdocs.yml) without a
# network beyond PyPI (ci/run-tests.sh runs it; it runs on its own too, in
# seconds, no cargo):
# - `mkdocs build --strict` into build/book: mkdocs.yml's `validation:`
#   makes every broken link between pages, every anchor that no heading
#   or id defines and every page left out of the nav a warning, and
#   --strict makes any warning an error;
# - ci/check-docs.py: the README's links into docs/ name existing files
#   and anchors (the anchors of the book just built), and the commands the
#   README and the book show exist: every `hilt SUBCOMMAND` (in console/sh
#   blocks and inline code) is a subcommand of hilt's `Command` enum, and
#   every ci/ script, cargo test, bench and example named is a file.
# MkDocs, not mdBook: pure-Python wheels from PyPI install in seconds, where
# `cargo install mdbook` compiles ~200 crates on every fresh CI clone. The
# version is the one pinned in ci/requirements-docs.txt, installed with pip
# when missing or at another version (into build/docs-tools, a virtualenv,
# where the system's Python refuses pip). Runs every check, then exits 1 if
# any failed.
set -uo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
req=ci/requirements-docs.txt
venv="$REPO/build/docs-tools"
py=python3

pinned() { sed -n "s/^$1==\([^ ;#]*\).*/\1/p" "$req"; }
# `python -m mkdocs, version 1.6.1 from … (Python 3.11)`
mkdocs_version() { "$py" -m mkdocs --version 2>/dev/null | sed -n 's/.*, version \([^ ]*\) .*/\1/p'; }
tools_ok() { [ "$(mkdocs_version)" = "$(pinned mkdocs)" ]; }
use_venv() { py="$venv/bin/python"; }

# A virtualenv left by an earlier run comes first.
[ -x "$venv/bin/python" ] && use_venv
if ! tools_ok; then
  echo "installing $(grep -v '^#' "$req" | xargs) for the book"
  { [ -x "$venv/bin/python" ] || python3 -m venv "$venv" </dev/null >/dev/null 2>&1; } &&
    "$venv/bin/python" -m pip install --quiet -r "$req" </dev/null >/dev/null 2>&1
  use_venv
  if ! tools_ok; then
    echo "could not install the book's builder ($req): python3 -m venv $venv && $venv/bin/pip install -r $req" >&2
    exit 1
  fi
fi

status=0
echo "-- the book: mkdocs $(mkdocs_version) build --strict (docs/ -> build/book)"
rm -rf build/book
# No --quiet: it drops the warnings before --strict counts them, and a
# broken link would pass.
"$py" -m mkdocs build --strict --config-file mkdocs.yml --site-dir build/book || status=1
echo "-- the README's links into docs/, and the commands shown: ci/check-docs.py"
if [ -d build/book ]; then
  "$py" ci/check-docs.py --book build/book || status=1
else
  echo "no build/book: the README's anchors cannot be checked" >&2
  status=1
fi
exit "$status"
