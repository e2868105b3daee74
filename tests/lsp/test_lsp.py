"""Drives `flowc lsp` with a real LSP client (pygls's LanguageClient).

Opens a broken file and expects diagnostics with the CLI's codes and
ranges; then hover, go to definition, references, document symbols,
completion, rename and semantic tokens on a clean file. Run by
`tests/lsp/run.sh` (CI), which builds flowc and installs pygls.

Usage: python3 test_lsp.py PATH/TO/flowc
"""

import asyncio
import os
import sys
import time
import unittest
from pathlib import Path

from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient

FLOWC = os.environ.get("FLOWC") or (sys.argv[1] if len(sys.argv) > 1 else "flowc")
ROOT = Path(__file__).resolve().parents[2]

BROKEN = """provider local: scripted
agent researcher { provider: local }

workflow w {
  start: research
  node research: agent reseacher { output: string }
  node done: end ok
  research -> done
}
"""

CLEAN = """provider local: scripted
agent writer { provider: local }
type Draft = { title: string, sections: [string] }

workflow w {
  start: draft
  node draft: agent writer { output: Draft }
  node done: end ok
  draft -> done when len(draft.sections) > 0
  draft -> done else
}
"""


def position_of(text: str, needle: str, occurrence: int = 0, offset: int = 0) -> lsp.Position:
    index = -1
    for _ in range(occurrence + 1):
        index = text.index(needle, index + 1)
    index += offset
    line = text.count("\n", 0, index)
    column = index - (text.rfind("\n", 0, index) + 1)
    return lsp.Position(line=line, character=column)


class FlowLsp(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.client = LanguageClient("flow-lsp-test", "1.0")
        self.diagnostics = {}
        self.published = asyncio.Event()

        @self.client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def on_diagnostics(params: lsp.PublishDiagnosticsParams):
            self.diagnostics[params.uri] = params.diagnostics
            self.published.set()

        await self.client.start_io(FLOWC, "lsp")
        result = await self.client.initialize_async(
            lsp.InitializeParams(capabilities=lsp.ClientCapabilities(), root_uri=ROOT.as_uri(), process_id=os.getpid())
        )
        self.capabilities = result.capabilities
        self.client.initialized(lsp.InitializedParams())

    async def asyncTearDown(self):
        await self.client.shutdown_async(None)
        self.client.exit(None)
        await self.client.stop()

    async def open(self, name: str, text: str) -> str:
        uri = (ROOT / "target" / name).as_uri()
        self.published.clear()
        self.client.text_document_did_open(
            lsp.DidOpenTextDocumentParams(text_document=lsp.TextDocumentItem(uri=uri, language_id="flow", version=1, text=text))
        )
        await asyncio.wait_for(self.published.wait(), timeout=20)
        return uri

    async def test_capabilities(self):
        caps = self.capabilities
        self.assertTrue(caps.hover_provider)
        self.assertTrue(caps.definition_provider)
        self.assertTrue(caps.references_provider)
        self.assertTrue(caps.rename_provider)
        self.assertTrue(caps.document_symbol_provider)
        self.assertIsNotNone(caps.completion_provider)
        self.assertIsNotNone(caps.semantic_tokens_provider)

    async def test_broken_file_gets_the_cli_diagnostic(self):
        uri = await self.open("broken.flow", BROKEN)
        diagnostics = self.diagnostics[uri]
        codes = [d.code for d in diagnostics]
        self.assertIn("E0101", codes)
        undefined = next(d for d in diagnostics if d.code == "E0101")
        self.assertEqual(undefined.severity, lsp.DiagnosticSeverity.Error)
        start = position_of(BROKEN, "reseacher")
        self.assertEqual(undefined.range.start, start)
        self.assertEqual(undefined.range.end, lsp.Position(line=start.line, character=start.character + len("reseacher")))
        self.assertIn("undefined agent `reseacher`", undefined.message)
        self.assertIn("did you mean `researcher`?", undefined.message)

    async def test_changes_update_diagnostics(self):
        uri = await self.open("changing.flow", BROKEN)
        self.assertTrue(self.diagnostics[uri])
        self.published.clear()
        fixed = BROKEN.replace("reseacher", "researcher")
        self.client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=2),
                content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=fixed)],
            )
        )
        await asyncio.wait_for(self.published.wait(), timeout=20)
        self.assertEqual(list(self.diagnostics[uri]), [])

    async def test_hover_definition_references(self):
        uri = await self.open("clean.flow", CLEAN)
        self.assertEqual(list(self.diagnostics[uri]), [])
        doc = lsp.TextDocumentIdentifier(uri=uri)
        use = position_of(CLEAN, "writer", occurrence=1, offset=2)  # in `agent writer { output… }` node
        hover = await self.client.text_document_hover_async(lsp.HoverParams(text_document=doc, position=use))
        self.assertIsNotNone(hover)
        self.assertIn("agent writer", hover.contents.value)
        definition = await self.client.text_document_definition_async(lsp.DefinitionParams(text_document=doc, position=use))
        self.assertEqual(definition.range.start, position_of(CLEAN, "writer"))
        node_use = position_of(CLEAN, "draft.sections", offset=1)
        hover = await self.client.text_document_hover_async(lsp.HoverParams(text_document=doc, position=node_use))
        self.assertIn("output", hover.contents.value)
        self.assertIn("title: string", hover.contents.value)
        refs = await self.client.text_document_references_async(
            lsp.ReferenceParams(text_document=doc, position=node_use, context=lsp.ReferenceContext(include_declaration=True))
        )
        # Declaration, `start: draft`, `draft -> done` twice, `draft.sections`.
        self.assertEqual(len(refs), 5, refs)

    async def test_rename(self):
        uri = await self.open("rename.flow", CLEAN)
        doc = lsp.TextDocumentIdentifier(uri=uri)
        edit = await self.client.text_document_rename_async(
            lsp.RenameParams(text_document=doc, position=position_of(CLEAN, "Draft"), new_name="Article")
        )
        edits = edit.changes[uri]
        self.assertEqual(len(edits), 2)
        self.assertTrue(all(e.new_text == "Article" for e in edits))

    async def test_symbols_completion_tokens(self):
        uri = await self.open("symbols.flow", CLEAN)
        doc = lsp.TextDocumentIdentifier(uri=uri)
        symbols = await self.client.text_document_document_symbol_async(lsp.DocumentSymbolParams(text_document=doc))
        names = [s.name for s in symbols]
        self.assertEqual(names, ["local", "writer", "Draft", "w"])
        workflow = symbols[-1]
        self.assertEqual([c.name for c in workflow.children], ["draft", "done"])
        completion = await self.client.text_document_completion_async(
            lsp.CompletionParams(text_document=doc, position=position_of(CLEAN, "draft -> done when"))
        )
        items = completion if isinstance(completion, list) else completion.items
        labels = {item.label for item in items}
        self.assertTrue({"writer", "Draft", "draft", "done", "workflow"} <= labels, labels)
        tokens = await self.client.text_document_semantic_tokens_full_async(lsp.SemanticTokensParams(text_document=doc))
        self.assertEqual(len(tokens.data) % 5, 0)
        self.assertGreater(len(tokens.data) // 5, 20)

    async def test_answers_quickly_on_a_large_file(self):
        # A 2,000-line file: a report, not an assertion (machines are shared).
        text = (ROOT / "target" / "lsp-large.flow").read_text() if (ROOT / "target" / "lsp-large.flow").exists() else None
        if text is None:
            lines = [CLEAN.split("workflow")[0], "workflow big {", "  start: n0"]
            count = 0
            while len(lines) < 2000:
                lines.append(f"  node n{count}: agent writer {{ output: Draft }}")
                lines.append(f"  n{count} -> n{count + 1}")
                count += 1
            lines.append(f"  node n{count}: end ok")
            lines.append("}")
            text = "\n".join(lines) + "\n"
        started = time.perf_counter()
        uri = await self.open("large.flow", text)
        opened = time.perf_counter() - started
        doc = lsp.TextDocumentIdentifier(uri=uri)
        started = time.perf_counter()
        hover = await self.client.text_document_hover_async(lsp.HoverParams(text_document=doc, position=position_of(text, "n10 ->")))
        answered = time.perf_counter() - started
        self.assertIsNotNone(hover)
        print(f"\n2,000-line file: diagnostics in {opened * 1000:.1f} ms, hover in {answered * 1000:.1f} ms", file=sys.stderr)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
