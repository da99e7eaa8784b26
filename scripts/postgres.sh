#!/usr/bin/env bash
# Starts a throw-away PostgreSQL 15 on a loopback port for the tests and
# prints the export line for its admin URL. initdb refuses to run as root, so
# the cluster belongs to the postgres user.
#   eval "$(scripts/postgres.sh start)"   # sets TABBRIDGE_TEST_POSTGRES and TB_PGDATA
#   scripts/postgres.sh stop "$TB_PGDATA"
set -euo pipefail

pgbin() {
  local d
  for d in /usr/lib/postgresql/*/bin; do [ -x "$d/initdb" ] && { echo "$d"; return; }; done
  return 1
}

ensure_installed() {
  pgbin >/dev/null && return
  echo "installing postgresql" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2 && apt-get install -y -qq postgresql >&2
  pgbin >/dev/null || { echo "postgresql could not be installed" >&2; exit 1; }
}

free_port() {
  python3 - <<'PY' 2>/dev/null || echo 55432
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()
PY
}

as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

start() {
  ensure_installed
  local bin dir port
  bin=$(pgbin)
  dir=$(mktemp -d /tmp/tabbridge-pg.XXXXXX)
  [ "$(id -u)" = 0 ] && chown postgres "$dir"
  port=$(free_port)
  as_pg "$bin/initdb" -D "$dir/data" -U postgres -A trust --no-sync >"$dir/initdb.log" 2>&1 ||
    { cat "$dir/initdb.log" >&2; exit 1; }
  as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c max_connections=300 -c full_page_writes=off" \
    start >&2 || { cat "$dir/server.log" >&2; exit 1; }
  echo "export TABBRIDGE_TEST_POSTGRES='postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable' TB_PGDATA='$dir'"
}

stop() {
  local dir=${1:?data directory}
  local bin
  bin=$(pgbin)
  as_pg "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}

case "${1:-}" in
  start) start ;;
  stop) stop "${2:-}" ;;
  *) echo "usage: $0 start | stop DIR" >&2; exit 2 ;;
esac
