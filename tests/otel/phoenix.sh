#!/usr/bin/env bash
# A real Arize Phoenix server (PyPI `arize-phoenix`) on 127.0.0.1, for the
# OpenTelemetry export tests: OTLP over HTTP/protobuf in, Phoenix's REST API out.
#
# As a library (the usual way):
#   source tests/otel/phoenix.sh
#   phoenix_start            # installs once, starts, waits until ready
#   trap phoenix_stop EXIT   # recommended: the server outlives a script that forgets
#   ... export spans to "$PHOENIX_URL/v1/traces", read "$PHOENIX_URL/v1/projects/NAME/spans"
#   phoenix_stop
# Call phoenix_start in the current shell, not in $(...), or the exports are lost.
#
# As a command:
#   bash tests/otel/phoenix.sh --setup   only install into the venv
#   bash tests/otel/phoenix.sh --check   install, start, send two spans, read them back, stop
#   bash tests/otel/phoenix.sh --serve   install, start, print the URL, stay up until Ctrl-C
#
# phoenix_start exports:
#   PHOENIX_URL      base URL, e.g. http://127.0.0.1:41234 (OTLP: $PHOENIX_URL/v1/traces)
#   PHOENIX_PID      the server's process id
#   PHOENIX_PYTHON   the venv's python (has opentelemetry-sdk and the OTLP HTTP exporter)
#   PHOENIX_TMP      the server's temporary working dir (SQLite db, phoenix.log); removed by phoenix_stop
#
# Installs, when missing: a venv at target/phoenix-venv with arize-phoenix pinned
# (about 40 s and 860 MB). Phoenix runs with a fresh SQLite database in a temp dir,
# the HTTP port a free one on 127.0.0.1, the gRPC port (always on; it binds every
# interface) an ephemeral one, and everything that reaches beyond the machine off:
# telemetry pixels, web fonts, the WASM sandbox download, the agent assistant.
#
# Environment (optional):
#   FLOW_PHOENIX_VENV       the venv (default: <repo>/target/phoenix-venv)
#   FLOW_PHOENIX_PORT       HTTP port (default: a free one)
#   FLOW_PHOENIX_TIMEOUT    seconds to wait for readiness (default 120)
#   FLOW_PHOENIX_KEEP_TMP   1 keeps the working dir after phoenix_stop

PHOENIX_PINNED_VERSION="20.26.1"
_phoenix_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

_phoenix_say() { echo "== phoenix: $*" >&2; }
_phoenix_err() { echo "error: phoenix: $*" >&2; }

_phoenix_venv() { echo "${FLOW_PHOENIX_VENV:-$_phoenix_root/target/phoenix-venv}"; }

# Installs the pinned arize-phoenix into the venv unless it is already there.
phoenix_setup() {
  local venv py t0
  venv="$(_phoenix_venv)"
  py="$venv/bin/python"
  if [ -x "$py" ] && "$py" - "$PHOENIX_PINNED_VERSION" <<'EOF' >/dev/null 2>&1; then
import importlib.metadata as m, sys
sys.exit(m.version("arize-phoenix") != sys.argv[1])
EOF
    return 0
  fi
  if [ ! -x "$py" ]; then
    command -v python3 >/dev/null 2>&1 || {
      _phoenix_err "python3 is missing (need Python >= 3.11 with venv)"
      return 1
    }
    _phoenix_say "creating venv $venv"
    mkdir -p "$(dirname "$venv")" || return 1
    python3 -m venv "$venv" || {
      _phoenix_err "python3 -m venv $venv failed (on Debian: apt-get install python3-venv)"
      return 1
    }
    # Python 3.11's bundled pip 23 takes twice as long to resolve Phoenix's ~150 dependencies.
    "$py" -m pip install --disable-pip-version-check -q --upgrade pip ||
      _phoenix_say "could not upgrade pip; going on with $("$py" -m pip --version)"
  fi
  _phoenix_say "pip install arize-phoenix==$PHOENIX_PINNED_VERSION into $venv (about 40 s)"
  t0=$SECONDS
  "$py" -m pip install --disable-pip-version-check -q "arize-phoenix==$PHOENIX_PINNED_VERSION" || {
    _phoenix_err "pip install arize-phoenix==$PHOENIX_PINNED_VERSION failed"
    return 1
  }
  "$py" -c "import phoenix.server.main, opentelemetry.exporter.otlp.proto.http.trace_exporter" || {
    _phoenix_err "arize-phoenix installed but does not import"
    return 1
  }
  _phoenix_say "installed in $((SECONDS - t0)) s"
}

# 200 from GET $1? (no proxy: the server is on loopback)
_phoenix_http_ok() {
  if command -v curl >/dev/null 2>&1; then
    curl -fsS --noproxy '*' -o /dev/null --max-time 2 "$1" 2>/dev/null
  else
    "$(_phoenix_venv)/bin/python" -c '
import sys, urllib.request
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
sys.exit(0 if opener.open(sys.argv[1], timeout=2).status == 200 else 1)' "$1" 2>/dev/null
  fi
}

_phoenix_free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# Starts Phoenix and waits for /readyz; exports PHOENIX_URL, PHOENIX_PID, PHOENIX_PYTHON, PHOENIX_TMP.
phoenix_start() {
  local venv py tmp port url pid attempt deadline timeout t0
  if [ -n "${PHOENIX_PID:-}" ] && kill -0 "$PHOENIX_PID" 2>/dev/null; then
    _phoenix_err "already running (PHOENIX_PID=$PHOENIX_PID, ${PHOENIX_URL:-}); phoenix_stop first"
    return 1
  fi
  phoenix_setup || return 1
  venv="$(_phoenix_venv)"
  py="$venv/bin/python"
  timeout="${FLOW_PHOENIX_TIMEOUT:-120}"
  for attempt in 1 2 3; do
    tmp="$(mktemp -d "${TMPDIR:-/tmp}/phoenix.XXXXXX")" || return 1
    port="${FLOW_PHOENIX_PORT:-$(_phoenix_free_port)}" || return 1
    url="http://127.0.0.1:$port"
    t0=$SECONDS
    # Every setting that matters is set here, so no PHOENIX_* of the caller's
    # (a Postgres URL, auth, TLS, a root path) leaks into the test server.
    env \
      PHOENIX_HOST=127.0.0.1 \
      PHOENIX_PORT="$port" \
      PHOENIX_GRPC_PORT=0 \
      PHOENIX_WORKING_DIR="$tmp" \
      PHOENIX_SQL_DATABASE_URL="sqlite:///$tmp/phoenix.db" \
      PHOENIX_HOST_ROOT_PATH= \
      PHOENIX_ENABLE_AUTH=false \
      PHOENIX_TLS_ENABLED=false \
      PHOENIX_ALLOW_EXTERNAL_RESOURCES=false \
      PHOENIX_TELEMETRY_ENABLED=false \
      PHOENIX_ALLOWED_SANDBOX_PROVIDERS=NONE \
      PHOENIX_DISABLE_AGENT_ASSISTANT=true \
      PHOENIX_ENABLE_MCP_SERVER=false \
      PHOENIX_ENABLE_PROMETHEUS=false \
      PHOENIX_LOG_MIGRATIONS=false \
      "$py" -m phoenix.server.main serve </dev/null >"$tmp/phoenix.log" 2>&1 &
    pid=$!
    deadline=$((SECONDS + timeout))
    while :; do
      if ! kill -0 "$pid" 2>/dev/null; then
        wait "$pid" 2>/dev/null || true
        if [ "$attempt" -lt 3 ] && [ -z "${FLOW_PHOENIX_PORT:-}" ] &&
          grep -qiE 'address already in use|errno 98' "$tmp/phoenix.log"; then
          _phoenix_say "port $port was taken meanwhile; trying another"
          rm -rf "$tmp"
          continue 2
        fi
        _phoenix_err "the server exited during startup; last lines of $tmp/phoenix.log:"
        tail -n 30 "$tmp/phoenix.log" >&2
        return 1
      fi
      # The log line proves the answer on $port is this server's, not a stranger's.
      if grep -q "Uvicorn running on $url" "$tmp/phoenix.log" && _phoenix_http_ok "$url/readyz"; then
        break 2
      fi
      if [ "$SECONDS" -ge "$deadline" ]; then
        _phoenix_err "not ready after ${timeout}s at $url/readyz; last lines of $tmp/phoenix.log:"
        tail -n 30 "$tmp/phoenix.log" >&2
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        return 1
      fi
      sleep 0.25
    done
  done
  export PHOENIX_URL="$url" PHOENIX_PID="$pid" PHOENIX_PYTHON="$py" PHOENIX_TMP="$tmp"
  _phoenix_say "ready in $((SECONDS - t0)) s at $PHOENIX_URL (pid $PHOENIX_PID, log $PHOENIX_TMP/phoenix.log)"
  echo "$PHOENIX_URL"
}

# Stops the server phoenix_start started (TERM, then KILL after 15 s) and removes its temp dir.
phoenix_stop() {
  local pid="${PHOENIX_PID:-}" i
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 1 60); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.25
    done
    if kill -0 "$pid" 2>/dev/null; then
      _phoenix_say "pid $pid ignored TERM; killing"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true  # reaps it when this shell started it
  fi
  if [ -n "${PHOENIX_TMP:-}" ] && [ "${FLOW_PHOENIX_KEEP_TMP:-0}" != 1 ]; then
    rm -rf "$PHOENIX_TMP"
  fi
  unset PHOENIX_URL PHOENIX_PID PHOENIX_TMP
  return 0
}

# Sends a parent and a child span (gen_ai.* attributes, a gen_ai.evaluation.result
# event) over OTLP HTTP/protobuf and reads them back through the REST API.
phoenix_selftest() {
  [ -n "${PHOENIX_URL:-}" ] || {
    _phoenix_err "phoenix_selftest needs a running server (phoenix_start)"
    return 1
  }
  "$PHOENIX_PYTHON" - "$PHOENIX_URL" <<'EOF'
import json, sys, time, urllib.error, urllib.request
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

base = sys.argv[1]
project = "flow-selftest"
provider = TracerProvider(resource=Resource.create({
    "service.name": "flow-selftest",
    # Phoenix files spans under this resource attribute's project ("default" without it;
    # an x-project-name request header overrides both).
    "openinference.project.name": project,
}))
provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=base + "/v1/traces")))
tracer = provider.get_tracer("flow.selftest")
with tracer.start_as_current_span("workflow demo", attributes={"flow.workflow": "demo"}) as parent:
    with tracer.start_as_current_span("chat smollm2", attributes={
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "smollm2",
        "gen_ai.usage.input_tokens": 12,
        "gen_ai.usage.output_tokens": 34,
    }) as child:
        child.add_event("gen_ai.evaluation.result", {
            "gen_ai.evaluation.name": "relevance",
            "gen_ai.evaluation.score.value": 0.75,
            "gen_ai.evaluation.score.label": "relevant",
        })
provider.shutdown()
trace_id = format(parent.get_span_context().trace_id, "032x")
parent_id = format(parent.get_span_context().span_id, "016x")
child_id = format(child.get_span_context().span_id, "016x")

# Ingestion is asynchronous, and the project exists only once its first span is written (404 until then).
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
spans, deadline = [], time.time() + 30
while time.time() < deadline:
    try:
        with opener.open(f"{base}/v1/projects/{project}/spans?trace_id={trace_id}", timeout=5) as r:
            spans = json.load(r)["data"]
    except urllib.error.HTTPError as e:
        if e.code != 404:
            raise
    if len(spans) == 2:
        break
    time.sleep(0.2)
by_id = {s["context"]["span_id"]: s for s in spans}
assert set(by_id) == {parent_id, child_id}, f"spans read back: {spans}"
p, c = by_id[parent_id], by_id[child_id]
assert p["name"] == "workflow demo" and p["parent_id"] is None, p
assert c["name"] == "chat smollm2" and c["parent_id"] == parent_id, c
assert c["context"]["trace_id"] == trace_id, c
assert c["attributes"]["gen_ai.usage.input_tokens"] == 12, c
[event] = c["events"]
assert event["name"] == "gen_ai.evaluation.result", event
assert event["attributes"]["gen_ai.evaluation.score.value"] == 0.75, event
print(json.dumps(c, indent=2))
print("phoenix selftest: 2 spans sent and read back")
EOF
}

# Run as a command rather than sourced.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -uo pipefail
  case "${1:---check}" in
    --setup)
      phoenix_setup || exit 1
      ;;
    --check)
      phoenix_start >/dev/null || exit 1
      trap phoenix_stop EXIT
      phoenix_selftest || exit 1
      ;;
    --serve)
      phoenix_start || exit 1
      trap phoenix_stop EXIT
      trap 'exit 0' INT TERM
      echo "OTLP/HTTP: $PHOENIX_URL/v1/traces   spans: $PHOENIX_URL/v1/projects/default/spans   (Ctrl-C stops)"
      wait "$PHOENIX_PID"
      ;;
    *)
      echo "usage: bash tests/otel/phoenix.sh [--setup|--check|--serve], or source it and call phoenix_start / phoenix_stop" >&2
      exit 2
      ;;
  esac
fi
