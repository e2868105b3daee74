"""Drives `flowc lsp` with a real LSP client (pygls's LanguageClient).

Opens a broken file and expects diagnostics with the CLI's codes and
ranges; then hover, go to definition, references, document symbols,
completion, rename (prepared, and refused onto a taken name), semantic
tokens, formatting (whole and range), quick fixes, highlights, folding and
workspace symbols; and, for a client that takes progress, the checks'
diagnostics first and the model checker's after a progress report. Run by
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

VIOLATED = """provider p: scripted
agent a { provider: p }
workflow w {
  start: n
  node n: agent a { output: string }
  node done: end ok
  n -> done
  policy never_done: never completed(done)
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

    async def test_rename_is_prepared_and_refused_onto_a_taken_name(self):
        uri = await self.open("prepare.flow", CLEAN)
        doc = lsp.TextDocumentIdentifier(uri=uri)
        self.assertTrue(self.capabilities.rename_provider.prepare_provider)
        prepared = await self.client.text_document_prepare_rename_async(
            lsp.PrepareRenameParams(text_document=doc, position=position_of(CLEAN, "Draft", occurrence=1))
        )
        self.assertEqual(prepared.placeholder, "Draft")
        self.assertEqual(prepared.range.start, position_of(CLEAN, "Draft", occurrence=1))
        with self.assertRaises(Exception) as refused:
            await self.client.text_document_rename_async(lsp.RenameParams(text_document=doc, position=position_of(CLEAN, "Draft"), new_name="writer"))
        self.assertIn("already the name of agent `writer`", str(refused.exception))

    async def test_formatting_code_actions_highlights_folds_workspace_symbols(self):
        messy = CLEAN.replace("agent writer { provider: local }", "agent   writer {provider: local}")
        uri = await self.open("messy.flow", messy)
        doc = lsp.TextDocumentIdentifier(uri=uri)
        options = lsp.FormattingOptions(tab_size=2, insert_spaces=True)
        edits = await self.client.text_document_formatting_async(lsp.DocumentFormattingParams(text_document=doc, options=options))
        self.assertEqual(len(edits), 1, edits)
        self.assertEqual(edits[0].range.start.line, 1)
        self.assertEqual(edits[0].new_text, "agent writer { provider: local }\n")
        # A range elsewhere: nothing to format there.
        elsewhere = lsp.Range(start=lsp.Position(line=6, character=0), end=lsp.Position(line=6, character=4))
        edits = await self.client.text_document_range_formatting_async(
            lsp.DocumentRangeFormattingParams(text_document=doc, range=elsewhere, options=options)
        )
        self.assertFalse(edits, edits)
        # The broken file's "did you mean" as a quick fix.
        broken = await self.open("fixable.flow", BROKEN)
        at = position_of(BROKEN, "reseacher")
        actions = await self.client.text_document_code_action_async(
            lsp.CodeActionParams(
                text_document=lsp.TextDocumentIdentifier(uri=broken),
                range=lsp.Range(start=at, end=at),
                context=lsp.CodeActionContext(diagnostics=list(self.diagnostics[broken])),
            )
        )
        self.assertEqual([a.title for a in actions], ["Replace `reseacher` with `researcher`"])
        self.assertEqual(actions[0].kind, lsp.CodeActionKind.QuickFix)
        self.assertEqual([e.new_text for e in actions[0].edit.changes[broken]], ["researcher"])
        highlights = await self.client.text_document_document_highlight_async(
            lsp.DocumentHighlightParams(text_document=doc, position=position_of(messy, "draft", occurrence=0, offset=0))
        )
        self.assertEqual(len(highlights), 5, highlights)
        folds = await self.client.text_document_folding_range_async(lsp.FoldingRangeParams(text_document=doc))
        workflow_line = messy[: messy.index("workflow w")].count("\n")
        self.assertIn(workflow_line, [f.start_line for f in folds])
        symbols = await self.client.workspace_symbol_async(lsp.WorkspaceSymbolParams(query="WRIT"))
        self.assertIn("writer", [s.name for s in symbols])

    async def test_missing_handlers_and_rounds_are_quick_fixes(self):
        # The checker's error hides the model checker's: one file for each.
        loop = (
            "provider p: scripted\nagent a { provider: p }\n"
            "workflow w {\n  start: n\n  node n: agent a { output: { ok: bool } }\n"
            "  node rounds: loop [n] { until: n.ok }\n  node done: end ok\n  rounds -> done\n}\n"
        )
        gate = (
            "provider p: scripted\nagent a { provider: p }\n"
            "workflow w {\n  start: n\n  node n: agent a { output: { ok: bool } }\n"
            "  node m: agent a { output: string }\n  node done: end ok\n  n -> m -> done\n"
            "  gate g: n -> m {\n    evaluate: [predicate(n.ok)]\n    on PASS -> continue\n  }\n}\n"
        )

        async def fix_at(name, text, needle, code):
            uri = await self.open(name, text)
            self.assertIn(code, [d.code for d in self.diagnostics[uri]])
            at = position_of(text, needle)
            actions = await self.client.text_document_code_action_async(
                lsp.CodeActionParams(
                    text_document=lsp.TextDocumentIdentifier(uri=uri),
                    range=lsp.Range(start=at, end=at),
                    context=lsp.CodeActionContext(diagnostics=list(self.diagnostics[uri])),
                )
            )
            self.assertEqual(len(actions), 1, actions)
            self.assertEqual(actions[0].kind, lsp.CodeActionKind.QuickFix)
            return actions[0], actions[0].edit.changes[uri]

        rounds, edits = await fix_at("rounds.flow", loop, "rounds:", "E0111")
        self.assertEqual(rounds.title, "Add `max_rounds: 3`")
        self.assertEqual([e.new_text for e in edits], ["; max_rounds: 3"])
        handler, edits = await fix_at("handler.flow", gate, "g:", "E0502")
        self.assertEqual(handler.title, "Add `on BLOCK -> terminate(g_blocked)`")
        self.assertEqual([e.new_text for e in edits], ["\n    on BLOCK -> terminate(g_blocked)"])
        self.assertEqual(edits[0].range.start, position_of(gate, "on PASS -> continue", offset=len("on PASS -> continue")))

    async def test_inlay_hints(self):
        text = (
            "provider p: scripted { max_tokens: 1k, max_input_tokens: 1k }\nagent a { provider: p }\n"
            'tool t: builtin { description: "Looks up", input: { q: string }, output: { hits: int } }\n'
            "budget small { steps: 10, tokens: 1k }\nworkflow w {\n  start: n\n  budget: small\n"
            "  node n: agent a { output: string }\n  node look: tool t { args: { q: n } }\n  node done: end ok\n"
            "  n -> look\n  look -> done\n}\n"
        )
        uri = await self.open("hints.flow", text)
        whole = lsp.Range(start=lsp.Position(line=0, character=0), end=lsp.Position(line=20, character=0))
        hints = await self.client.text_document_inlay_hint_async(lsp.InlayHintParams(text_document=lsp.TextDocumentIdentifier(uri=uri), range=whole))
        labels = {(h.position.line, h.label) for h in hints}
        self.assertIn((8, ": { hits: int }"), labels)
        self.assertIn((3, "worst case: 2/10 steps, 16000/1000 tokens (exceeds)"), labels)

    async def test_symbols_completion_tokens(self):
        uri = await self.open("symbols.flow", CLEAN)
        doc = lsp.TextDocumentIdentifier(uri=uri)
        symbols = await self.client.text_document_document_symbol_async(lsp.DocumentSymbolParams(text_document=doc))
        names = [s.name for s in symbols]
        self.assertEqual(names, ["local", "writer", "Draft", "w"])
        workflow = symbols[-1]
        self.assertEqual([c.name for c in workflow.children], ["draft", "done"])
        async def labels_at(position):
            completion = await self.client.text_document_completion_async(lsp.CompletionParams(text_document=doc, position=position))
            items = completion if isinstance(completion, list) else completion.items
            return [item.label for item in items]

        # By context: a node's fields after `draft.`, an agent after `agent`,
        # the workflow's properties and nodes where an entry goes.
        self.assertEqual(await labels_at(position_of(CLEAN, "draft.sections", offset=len("draft."))), ["title", "sections"])
        self.assertEqual(await labels_at(position_of(CLEAN, "writer { output", offset=0)), ["writer"])
        entry = await labels_at(position_of(CLEAN, "draft -> done when"))
        self.assertTrue({"draft", "done", "node", "deadline"} <= set(entry), entry)
        self.assertNotIn("writer", entry)
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


class FlowLspPolicies(unittest.IsolatedAsyncioTestCase):
    """A client that takes progress reports: the checks' diagnostics first,
    then, between a progress begin and end, the model checker's."""

    async def test_policies_arrive_after_the_checks_with_progress(self):
        client = LanguageClient("flow-lsp-progress-test", "1.0")
        seen = []
        done = asyncio.Event()

        @client.feature(lsp.WINDOW_WORK_DONE_PROGRESS_CREATE)
        def on_create(params: lsp.WorkDoneProgressCreateParams):
            seen.append("create")
            return None

        @client.feature(lsp.PROGRESS)
        def on_progress(params: lsp.ProgressParams):
            kind = params.value.get("kind") if isinstance(params.value, dict) else getattr(params.value, "kind", "?")
            seen.append(f"progress {kind}")

        @client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def on_diagnostics(params: lsp.PublishDiagnosticsParams):
            codes = " ".join(str(d.code) for d in params.diagnostics)
            seen.append(f"diagnostics {codes}".strip())
            if "E1001" in codes:
                done.set()

        await client.start_io(FLOWC, "lsp")
        capabilities = lsp.ClientCapabilities(window=lsp.WindowClientCapabilities(work_done_progress=True))
        await client.initialize_async(lsp.InitializeParams(capabilities=capabilities, root_uri=ROOT.as_uri(), process_id=os.getpid()))
        client.initialized(lsp.InitializedParams())
        uri = (ROOT / "target" / "violated.flow").as_uri()
        client.text_document_did_open(
            lsp.DidOpenTextDocumentParams(text_document=lsp.TextDocumentItem(uri=uri, language_id="flow", version=1, text=VIOLATED))
        )
        await asyncio.wait_for(done.wait(), timeout=20)
        await client.shutdown_async(None)
        client.exit(None)
        await client.stop()
        self.assertEqual(seen, ["create", "progress begin", "diagnostics", "progress end", "diagnostics E1001"])


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
