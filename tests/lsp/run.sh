#!/usr/bin/env bash
# The real-client LSP tests: installs pygls (PyPI) and Neovim (Debian),
# builds flowc, then drives `flowc lsp` with pygls's LanguageClient
# (test_lsp.py) and with Neovim's own LSP client (neovim.lua, headless).
set -euo pipefail
cd "$(dirname "$0")/../.."
python3 -m pip install --quiet --disable-pip-version-check "pygls>=2,<3"
if ! command -v nvim >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends neovim >/dev/null
fi
command -v nvim >/dev/null 2>&1 || { echo "tests/lsp/run.sh: neovim is not installed" >&2; exit 1; }
cargo build --release --locked --quiet -p flowc
mkdir -p target
FLOWC="$PWD/target/release/flowc" python3 tests/lsp/test_lsp.py

echo "== Neovim's LSP client ($(nvim --version | head -1))"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cat > "$work/broken.flow" <<'FLOW'
provider local: scripted
agent researcher { provider: local }
workflow w {
  start: research
  node research: agent reseacher { output: string }
  node done: end ok
  research -> done
}
FLOW
(cd "$work" && FLOWC="$OLDPWD/target/release/flowc" timeout 120 nvim --headless -u NONE -i NONE -c "luafile $OLDPWD/tests/lsp/neovim.lua")
echo
