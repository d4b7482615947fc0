#!/usr/bin/env bash
# A throw-away PostgreSQL cluster for the results store's tests: Debian's
# server (installed with apt-get when missing), a cluster in build/, listening
# only on a Unix socket in it, owned by the `postgres` user (initdb refuses
# root).
#
#   eval "$(ci/postgres.sh start)"   # exports HILT_TEST_POSTGRES (a URL)
#   ci/postgres.sh stop
set -euo pipefail
cd "$(dirname "$0")/.."
REPO="$PWD"
dir="$REPO/build/postgres"
port=54329

bin_dir() {
  local d
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/initdb" ] && { echo "$d"; return; }
  done
}

as_postgres() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

case "${1:-}" in
start)
  bin="$(bin_dir)"
  if [ -z "$bin" ]; then
    sudo_cmd=""
    [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
    echo "ci/postgres.sh: installing Debian's postgresql" >&2
    $sudo_cmd apt-get update -qq </dev/null >/dev/null
    $sudo_cmd apt-get install -y -qq postgresql </dev/null >/dev/null
    bin="$(bin_dir)"
  fi
  "$0" stop >/dev/null 2>&1 || true
  rm -rf "$dir"
  mkdir -p "$dir/data" "$dir/socket"
  [ "$(id -u)" = 0 ] && chown -R postgres "$dir"
  as_postgres "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 >"$dir/initdb.log" 2>&1
  as_postgres "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
    -o "-k $dir/socket -p $port -c listen_addresses=''" start >/dev/null
  as_postgres "$bin/createdb" -h "$dir/socket" -p "$port" -U postgres hilt
  echo "export HILT_TEST_POSTGRES='postgresql://postgres@localhost/hilt?host=$dir/socket&port=$port'"
  ;;
stop)
  # Stopping a server that is not running is done, not an error (the CI
  # script stops it after the tests and again on its way out).
  bin="$(bin_dir)"
  if [ -n "$bin" ] && [ -f "$dir/data/postmaster.pid" ]; then
    as_postgres "$bin/pg_ctl" -D "$dir/data" -m fast stop >/dev/null
  fi
  ;;
*)
  echo "usage: ci/postgres.sh start|stop" >&2
  exit 2
  ;;
esac
