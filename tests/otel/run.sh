#!/usr/bin/env bash
# OpenTelemetry export against a real receiver: starts Arize Phoenix on
# 127.0.0.1 (installed once into target/phoenix-venv, see phoenix.sh) and
# runs interpreter/flow/tests/phoenix.rs, which exports example runs to it
# and reads the spans back through Phoenix's own REST API.
#
#   bash tests/otel/run.sh            # from anywhere in the repository
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
# shellcheck source=tests/otel/phoenix.sh
source tests/otel/phoenix.sh
phoenix_start
trap phoenix_stop EXIT
echo "tests/otel/run.sh: Phoenix at $PHOENIX_URL" >&2
FLOW_PHOENIX_URL="$PHOENIX_URL" cargo test --locked -p flow-cli --test phoenix "$@"
