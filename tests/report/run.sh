#!/usr/bin/env bash
# `flow report` and `flowc graph --format html` in a real headless Chromium
# (the Debian `chromium` package, installed here when missing): runs
# interpreter/flow/tests/browser.rs. Screenshots land in
# target/report-screenshots/.
#
#   bash tests/report/run.sh          # from anywhere in the repository
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
if ! command -v chromium >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
command -v chromium >/dev/null 2>&1 || { echo "tests/report/run.sh: chromium is not installed" >&2; exit 1; }
cargo build --locked --quiet -p flowc
echo "tests/report/run.sh: $(chromium --version 2>/dev/null | head -1)" >&2
FLOW_CHROMIUM="$(command -v chromium)" FLOW_FLOWC="$root/target/debug/flowc" \
  cargo test --locked -p flow-cli --test browser "$@"
ls -l target/report-screenshots/*.png >&2
