#!/usr/bin/env bash
# The real-client LSP test: installs pygls, builds flowc, drives `flowc lsp`.
set -euo pipefail
cd "$(dirname "$0")/../.."
python3 -m pip install --quiet --disable-pip-version-check "pygls>=2,<3"
cargo build --release --locked --quiet -p flowc
mkdir -p target
FLOWC="$PWD/target/release/flowc" python3 tests/lsp/test_lsp.py
