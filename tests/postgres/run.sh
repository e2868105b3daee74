#!/usr/bin/env bash
# Runs against a real PostgreSQL server: the journal's append and fencing
# rules, and workers (`flow worker --db`) — many runs over four workers,
# kill -9 and takeover, SIGSTOP and fencing, approval from another process.
# Starts its own server (tests/postgres/server.sh) and stops it after.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/postgres/server.sh
dir="$(mktemp -d /tmp/flow-pg.XXXXXX)"
trap 'pg_stop "$dir"; rm -rf "$dir"' EXIT
pg_start "$dir"
echo "PostgreSQL at $FLOW_TEST_DB"
cargo build --locked --quiet -p flow-cli --bin flow
cargo test --locked -p flow-cli --test postgres -- --test-threads=1
