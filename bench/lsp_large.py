#!/usr/bin/env python3
"""The language server on large documents, driven by a real client (pygls).

For generated workflows (`flow-gen NODES`: routers, loops, gates, three
policies) of about 2,000, 16,000 and 100,000 lines, measures with
`flowc lsp` (release):
  * open: from didOpen to the first diagnostics (the checks and the static
    verification), and to the model checker's (the second publication:
    together they are what `flowc verify` prints);
  * hover, semantic tokens (full): request to answer, on the analysed text;
  * edits: five full-text edits sent at once (each adds a comment line),
    from the last edit to the first diagnostics of its version and to the
    model checker's — earlier edits are skipped or their analyses cancelled;
and `flowc verify` on the same file, for comparison.

Machines are shared and noisy: several runs, read the spread.

Usage: bench/lsp_large.py [NODES ...]   (default 780 6450 40300)
"""
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLOWC = ROOT / "target" / "release" / "flowc"
GEN = ROOT / "target" / "release" / "flow-gen"


async def measure(text: str, name: str):
    from lsprotocol import types as lsp
    from pygls.lsp.client import LanguageClient

    client = LanguageClient("flow-lsp-bench", "1.0")
    versions = {}
    arrived = asyncio.Event()

    @client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_diagnostics(params):
        versions.setdefault(params.version, []).append(time.perf_counter())
        arrived.set()

    await client.start_io(str(FLOWC), "lsp")
    await client.initialize_async(lsp.InitializeParams(capabilities=lsp.ClientCapabilities(), root_uri=ROOT.as_uri()))
    client.initialized(lsp.InitializedParams())
    uri = (ROOT / "target" / name).as_uri()

    async def published(version, count=1):
        """When the `count`th publication of `version` arrived."""
        while len(versions.get(version, [])) < count:
            arrived.clear()
            await asyncio.wait_for(arrived.wait(), timeout=600)
        return versions[version][count - 1]

    started = time.perf_counter()
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(text_document=lsp.TextDocumentItem(uri=uri, language_id="flow", version=1, text=text)))
    opened = await published(1) - started
    # The generated flows have policies: a second publication follows.
    checked = await published(1, 2) - started
    doc = lsp.TextDocumentIdentifier(uri=uri)
    line = text[: text.index("node n10:")].count("\n")
    started = time.perf_counter()
    await client.text_document_hover_async(lsp.HoverParams(text_document=doc, position=lsp.Position(line=line, character=8)))
    hover = time.perf_counter() - started
    started = time.perf_counter()
    await client.text_document_semantic_tokens_full_async(lsp.SemanticTokensParams(text_document=doc))
    tokens = time.perf_counter() - started
    for version in range(2, 7):
        edited = text + "// edit\n" * (version - 1)
        change = lsp.TextDocumentContentChangeWholeDocument(text=edited)
        client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version), content_changes=[change])
        )
    sent = time.perf_counter()
    edits = await published(6) - sent
    edits_checked = await published(6, 2) - sent
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return opened, checked, hover, tokens, edits, edits_checked


def main():
    subprocess.run(["python3", "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "pygls>=2,<3"], check=True)
    subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "flowc", "-p", "flow-tests", "--bins"], cwd=ROOT, check=True)
    sizes = sys.argv[1:] or ["780", "6450", "40300"]
    print(
        f"{'nodes':>7} {'lines':>8} {'flowc verify s':>15} {'open: checks s':>15} {'+ policies s':>13} {'hover ms':>9} {'tokens ms':>10}"
        f" {'5 edits: checks s':>18} {'+ policies s':>13}"
    )
    for nodes in sizes:
        text = subprocess.run([str(GEN), nodes], capture_output=True, text=True, check=True).stdout
        path = ROOT / "target" / f"lsp-bench-{nodes}.flow"
        path.write_text(text)
        started = time.perf_counter()
        subprocess.run([str(FLOWC), "verify", str(path)], capture_output=True)
        verify = time.perf_counter() - started
        opened, checked, hover, tokens, edits, edits_checked = asyncio.run(measure(text, path.name))
        lines = text.count("\n")
        print(
            f"{nodes:>7} {lines:>8} {verify:>15.3f} {opened:>15.3f} {checked:>13.3f} {hover * 1000:>9.1f} {tokens * 1000:>10.1f}"
            f" {edits:>18.3f} {edits_checked:>13.3f}"
        )


if __name__ == "__main__":
    main()
