#!/usr/bin/env bash
# Starts a throwaway PostgreSQL cluster on a free port on 127.0.0.1, as a
# non-root user (initdb refuses root), and prints its URL. Source it:
#   . tests/postgres/server.sh && pg_start DIR   # sets FLOW_TEST_DB; pg_stop DIR stops it
# The Debian `postgresql` package is installed when no initdb is found.
set -euo pipefail

pg_bindir() {
  local dir
  dir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)"
  if [ -z "$dir" ] || [ ! -x "$dir/initdb" ]; then
    local SUDO=""
    [ "$(id -u)" = 0 ] || SUDO="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq >&2
    $SUDO apt-get install -y -qq --no-install-recommends postgresql >/dev/null
    dir="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
  fi
  echo "$dir"
}

# Who runs the server: this user, or (as root) the `postgres` user the
# Debian package makes (created here if missing).
pg_user() {
  if [ "$(id -u)" != 0 ]; then
    id -un
    return
  fi
  id -u postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
  echo postgres
}

as_pg() {
  local user="$1"; shift
  if [ "$(id -un)" = "$user" ]; then
    "$@"
  else
    runuser -u "$user" -- "$@"
  fi
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# pg_start DIR [durable]: with `durable`, the server keeps its defaults
# (fsync on, synchronous commit): what a benchmark measures.
pg_start() {
  local dir="$1" mode="${2:-fast}" bin user port settings
  bin="$(pg_bindir)"
  user="$(pg_user)"
  mkdir -p "$dir"
  chown "$user" "$dir" 2>/dev/null || true
  chmod 700 "$dir"
  port="$(free_port)"
  as_pg "$user" "$bin/initdb" -D "$dir/data" -U flow --auth=trust -E UTF8 --no-instructions >/dev/null
  settings="-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=200"
  # Tests: durability off (fsync) for speed. The benchmark keeps it on.
  [ "$mode" = durable ] || settings="$settings -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
  as_pg "$user" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 -o "$settings" start >/dev/null
  as_pg "$user" "$bin/createdb" -h 127.0.0.1 -p "$port" -U flow flow
  export FLOW_TEST_DB="postgres://flow@127.0.0.1:$port/flow"
  export FLOW_TEST_PG_BIN="$bin"
  export FLOW_TEST_PG_USER="$user"
  export FLOW_TEST_PG_DIR="$dir"
}

pg_stop() {
  local dir="$1" bin user
  bin="$(pg_bindir)"
  user="$(pg_user)"
  [ -d "$dir/data" ] && as_pg "$user" "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
}
