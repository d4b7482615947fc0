#!/usr/bin/env bash
# Checks the GitHub Actions workflows in ci/github/ without GitHub
# (ci/run-tests.sh runs it; it runs on its own too):
# - check-jsonschema: each validates against GitHub's workflow schema
#   (`--builtin-schema vendor.github-workflows`, SchemaStore's, vendored);
# - zizmor --offline: no security finding (actions not pinned by hash,
#   checkouts that keep credentials, broad permissions, template injection,
#   dangerous triggers …);
# - ci/check-workflows.py: hilt's own rules the tools do not cover (no farm
#   job where a pull request can start it, a release comment on each pinned
#   action, the ci/ scripts the steps call exist, `needs` names a job).
# The tools are those pinned in ci/requirements-ci.txt: installed with pip
# when missing or at another version (into build/ci-tools, a virtualenv,
# where the system's Python refuses pip). Runs every check, then exits 1 if
# any failed.
set -uo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
req=ci/requirements-ci.txt
venv="$REPO/build/ci-tools"
py=python3

pinned() { sed -n "s/^$1==\([^ ;#]*\).*/\1/p" "$req"; }
version() { "$@" --version 2>/dev/null | awk '{ print $NF; exit }'; }
tools_ok() {
  [ "$(version zizmor)" = "$(pinned zizmor)" ] &&
    [ "$(version check-jsonschema)" = "$(pinned check-jsonschema)" ] &&
    "$py" -c 'import yaml' 2>/dev/null
}
use_venv() { PATH="$venv/bin:$PATH"; py="$venv/bin/python"; }

# A virtualenv left by an earlier run comes first.
[ -x "$venv/bin/python" ] && use_venv
if ! tools_ok; then
  echo "installing $(grep -v '^#' "$req" | xargs) for the workflow checks"
  # Where pip puts commands: the interpreter's scripts folder, or the
  # user's (~/.local/bin) when it falls back to a user install.
  PATH="$PATH:$("$py" -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$("$py" -c 'import os, sysconfig; print(sysconfig.get_path("scripts", os.name + "_user"))')"
  "$py" -m pip install --quiet -r "$req" </dev/null >/dev/null 2>&1 || true
  if ! tools_ok; then
    # E.g. Debian's and Ubuntu's Python: "externally managed", no pip.
    { [ -x "$venv/bin/python" ] || python3 -m venv "$venv" </dev/null >/dev/null 2>&1; } &&
      "$venv/bin/python" -m pip install --quiet -r "$req" </dev/null >/dev/null 2>&1
    use_venv
  fi
  if ! tools_ok; then
    echo "could not install the workflow checkers ($req): pip install -r $req" >&2
    exit 1
  fi
fi

status=0
workflows=(ci/github/*.yml)
echo "-- schema: check-jsonschema $(version check-jsonschema) (vendor.github-workflows)"
check-jsonschema --builtin-schema vendor.github-workflows "${workflows[@]}" || status=1
echo "-- security: zizmor $(version zizmor) --offline"
# --no-config: no configuration file can quietly turn an audit off; an
# exception is an inline `# zizmor: ignore[AUDIT]` comment, in review.
zizmor --offline --no-config --no-progress --quiet "${workflows[@]}" || status=1
echo "-- hilt's rules: ci/check-workflows.py"
"$py" ci/check-workflows.py || status=1
exit "$status"
