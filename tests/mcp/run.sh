#!/usr/bin/env bash
# MCP end to end: installs two reference MCP servers with npm into
# target/mcp-node/ (once) and runs `flow run` against them
# (interpreter/flow/tests/mcp.rs). Needs Node 20+ and npm.
#
#   bash tests/mcp/run.sh            # from anywhere in the repository
#   bash tests/mcp/run.sh -- --nocapture   # extra arguments go to cargo test
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"

prefix="$root/target/mcp-node"
modules="$prefix/node_modules"
packages=(@modelcontextprotocol/server-filesystem @modelcontextprotocol/server-everything)

command -v node >/dev/null || { echo "tests/mcp/run.sh: node is not installed (Node 20+ is needed)" >&2; exit 2; }
command -v npm >/dev/null || { echo "tests/mcp/run.sh: npm is not installed" >&2; exit 2; }

missing=()
for package in "${packages[@]}"; do
  [ -f "$modules/$package/dist/index.js" ] || missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "tests/mcp/run.sh: installing ${missing[*]} into $prefix" >&2
  mkdir -p "$prefix"
  npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error "${packages[@]}"
fi
for package in "${packages[@]}"; do
  [ -f "$modules/$package/dist/index.js" ] || { echo "tests/mcp/run.sh: $package did not install" >&2; exit 2; }
done

echo "tests/mcp/run.sh: node $(node --version); servers in $modules" >&2
FLOW_MCP_NODE_MODULES="$modules" exec cargo test -p flow-cli --test mcp "$@"
