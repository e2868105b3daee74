#!/usr/bin/env bash
# Builds the VS Code extension (grammar/editors/vscode) into
# target/flow-lang.vsix and checks the package.
#
#   bash .ci/build-vsix.sh
#
# Needs Node.js >= 20 with npm, the npm registry, cargo (to build flowc), and python3 or unzip to
# inspect the package. Steps: install exactly the locked dependencies
# (`npm ci`), run the grammar tests (`npm test`: VS Code's TextMate engine on
# every .flow file of the repository), package with vsce (which bundles the
# production dependencies, vscode-languageclient, and leaves the dev tools
# out), check that the .vsix is a zip holding what VS Code needs, then let
# the packaged client start the real `flowc lsp` (test/packaged.test.js).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
extension="$root/grammar/editors/vscode"
out="$root/target/flow-lang.vsix"

fail() {
  echo "build-vsix: FAILED: $*" >&2
  exit 1
}
trap 'status=$?; [ "$status" -eq 0 ] || echo "build-vsix: FAILED (exit $status) at line $LINENO" >&2' EXIT

echo "== vsix: toolchain"
command -v node >/dev/null 2>&1 || fail "node is not installed (Node.js >= 20 is needed)"
command -v npm >/dev/null 2>&1 || fail "npm is not installed"
node_major="$(node -p 'process.versions.node.split(".")[0]')"
[ "$node_major" -ge 20 ] || fail "Node.js $(node --version) is too old; @vscode/vsce 3 needs >= 20"
echo "node $(node --version), npm $(npm --version)"

cd "$extension"

echo "== vsix: dependencies"
if [ -f package-lock.json ]; then
  npm ci --no-audit --no-fund
else
  echo "no package-lock.json: resolving afresh (commit the lockfile this writes)"
  npm install --no-audit --no-fund
fi

echo "== vsix: grammar tests"
npm test

echo "== vsix: package"
mkdir -p "$(dirname "$out")"
rm -f "$out"
# No repository URL is published yet; without the flag vsce asks on stdin.
npx --no-install vsce package --allow-missing-repository --out "$out" </dev/null
[ -s "$out" ] || fail "vsce reported success but $out is missing or empty"

echo "== vsix: contents"
required=(
  extension/package.json
  extension/extension.js
  extension/language-configuration.json
  extension/syntaxes/flow.tmLanguage.json
  extension/LICENSE.txt
  extension/readme.md
  extension/node_modules/vscode-languageclient/package.json
  extension/node_modules/vscode-languageclient/node.js
  extension/node_modules/vscode-languageserver-protocol/package.json
  extension/node_modules/vscode-jsonrpc/package.json
  extension.vsixmanifest
  "[Content_Types].xml"
)
# Development files that must stay out of the package.
forbidden_prefixes=(
  extension/test/
  extension/node_modules/@vscode/vsce/
  extension/node_modules/vscode-textmate/
  extension/node_modules/vscode-oniguruma/
  extension/package-lock.json
)

if command -v python3 >/dev/null 2>&1; then
  python3 - "$out" "${#required[@]}" "${required[@]}" "${forbidden_prefixes[@]}" <<'PY'
import json, sys, zipfile

path, count = sys.argv[1], int(sys.argv[2])
required = sys.argv[3:3 + count]
forbidden = sys.argv[3 + count:]
if not zipfile.is_zipfile(path):
    sys.exit(f"build-vsix: FAILED: {path} is not a zip archive")
with zipfile.ZipFile(path) as archive:
    bad = archive.testzip()
    if bad is not None:
        sys.exit(f"build-vsix: FAILED: {path}: corrupt member {bad}")
    names = archive.namelist()
    lower = {name.lower() for name in names}
    missing = [name for name in required if name.lower() not in lower]
    if missing:
        sys.exit(f"build-vsix: FAILED: {path} lacks {missing}")
    leaked = sorted(n for n in names if any(n.startswith(prefix) for prefix in forbidden))
    if leaked:
        sys.exit(f"build-vsix: FAILED: {path} contains development files: {leaked[:10]}")
    manifest = json.loads(archive.read("extension/package.json"))
    for grammar in manifest["contributes"]["grammars"]:
        member = "extension/" + grammar["path"].removeprefix("./")
        if member not in names:
            sys.exit(f"build-vsix: FAILED: contributes.grammars names {grammar['path']}, not in the package")
        json.loads(archive.read(member))
    for language in manifest["contributes"]["languages"]:
        member = "extension/" + language["configuration"].removeprefix("./")
        if member not in names:
            sys.exit(f"build-vsix: FAILED: the language configuration {member} is not in the package")
        json.loads(archive.read(member))
    print(f"{path}: {len(names)} files, manifest {manifest['publisher']}.{manifest['name']} {manifest['version']}")
PY
elif command -v unzip >/dev/null 2>&1; then
  unzip -tq "$out" >/dev/null || fail "$out is not a valid zip archive"
  listing="$(unzip -Z1 "$out")"
  for name in "${required[@]}"; do
    grep -qixF -- "$name" <<<"$listing" || fail "$out lacks $name"
  done
  for prefix in "${forbidden_prefixes[@]}"; do
    if grep -q "^$(printf '%s' "$prefix" | sed 's/[.[\*^$/]/\\&/g')" <<<"$listing"; then
      fail "$out contains development files under $prefix"
    fi
  done
else
  fail "neither python3 nor unzip is available to inspect $out"
fi

echo "== vsix: the packaged client against the real flowc"
# The .vsix unpacked, its extension.js and bundled vscode-languageclient
# loaded (only the vscode API is a stand-in), `flowc lsp` started by that
# client on a broken twin: the E1001 must reach the diagnostics.
(cd "$root" && cargo build --release --locked --quiet -p flowc)
FLOWC="$root/target/release/flowc" node "$extension/test/packaged.test.js" "$out"

size="$(wc -c <"$out" | tr -d ' ')"
echo "build-vsix: OK: $out ($size bytes)"
