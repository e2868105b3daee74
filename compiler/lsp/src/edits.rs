//! Requests that edit or outline a document: formatting (whole and range,
//! `flowc fmt`'s layout), quick fixes from the compiler's suggestions,
//! rename checks, highlights of a symbol's uses, and folding ranges.

use crate::analysis::Analysis;
use flow_diagnostics::Diagnostic;
use flow_syntax::lexer::TokenKind as T;
use lsp_types::{
    CodeAction, CodeActionKind, DocumentHighlight, DocumentHighlightKind, FoldingRange, FoldingRangeKind, Position, PrepareRenameResponse,
    Range, TextEdit, Uri, WorkspaceEdit,
};
use std::collections::HashMap;

impl Analysis {
    /// The edits that format the document as `flowc fmt` does, or why not
    /// (a syntax error). Only changed lines are edited; with `range`, only
    /// the changes that touch its lines.
    pub fn formatting(&self, range: Option<Range>) -> Result<Vec<TextEdit>, String> {
        let text = self.source();
        let formatted = flow_fmt::format(text).map_err(|e| match e {
            flow_fmt::FormatError::Syntax(_) => "the document has syntax errors: not formatted".to_string(),
            flow_fmt::FormatError::Internal(message) => format!("the formatter would change the meaning ({message}): not formatted"),
        })?;
        let diff = similar::TextDiff::from_lines(text, &formatted);
        let mut edits = Vec::new();
        for op in diff.ops() {
            if op.tag() == similar::DiffTag::Equal {
                continue;
            }
            let (old, new) = (op.old_range(), op.new_range());
            if let Some(range) = range {
                // Lines [old.start, old.end) of the text; an insertion touches the line it goes before.
                let (first, last) = (old.start as u32, (old.end.max(old.start + 1) - 1) as u32);
                if last < range.start.line || first > range.end.line {
                    continue;
                }
            }
            let start = Position { line: old.start as u32, character: 0 };
            let end = Position { line: old.end as u32, character: 0 };
            let new_text: String = diff.new_slices()[new].concat();
            edits.push(TextEdit { range: Range { start, end }, new_text });
        }
        Ok(edits)
    }

    /// Quick fixes for the diagnostics (`more`: the model checker's) whose
    /// primary label is in this document and touches `range`: a compiler
    /// suggestion ("did you mean") applied at every use it labels, an
    /// inserted handler or property.
    pub fn code_actions(&self, uri: &Uri, range: Range, more: &[Diagnostic]) -> Vec<CodeAction> {
        let shown = self.lsp_diagnostics_with(uri, more);
        let mut actions = Vec::new();
        for d in self.diagnostics.iter().chain(more) {
            let Some(primary) = d.primary() else { continue };
            if primary.file != self.root {
                continue;
            }
            let at = self.range_here(primary.span.start, primary.span.end);
            if at.end < range.start || at.start > range.end {
                continue;
            }
            let diagnostic = shown.iter().find(|s| s.range == at && s.code == Some(lsp_types::NumberOrString::String(d.code.0.into())));
            for fix in d.fixes(&self.db) {
                let edits: Vec<TextEdit> = fix
                    .edits
                    .into_iter()
                    .filter(|edit| edit.file == self.root)
                    .map(|edit| TextEdit { range: self.range_here(edit.span.start, edit.span.end), new_text: edit.text })
                    .collect();
                #[allow(clippy::mutable_key_type)] // `Uri` is the protocol's key type.
                let changes = HashMap::from([(uri.clone(), edits)]);
                actions.push(CodeAction {
                    title: fix.title,
                    kind: Some(CodeActionKind::QUICKFIX),
                    diagnostics: diagnostic.map(|d| vec![d.clone()]),
                    edit: Some(WorkspaceEdit { changes: Some(changes), ..Default::default() }),
                    is_preferred: Some(true),
                    ..Default::default()
                });
            }
        }
        actions
    }

    /// What a rename at `position` would rename (the name's range and
    /// text), or why it cannot be renamed.
    pub fn prepare_rename(&self, position: Position) -> Result<PrepareRenameResponse, String> {
        let key = self.key_at(position).ok_or("no symbol here")?;
        let symbols = &self.checked.symbols;
        let def = symbols.def(key).ok_or("no declaration for this name")?;
        if def.file != self.root {
            return Err(format!("`{}` is declared in another file ({})", def.name, self.db.name(def.file)));
        }
        let at = self.offset_here(position);
        let span = std::iter::once(def.span)
            .chain(symbols.uses(key).filter(|r| r.file == self.root).map(|r| r.span))
            .find(|s| s.start <= at && at <= s.end)
            .unwrap_or(def.span);
        Ok(PrepareRenameResponse::RangeWithPlaceholder { range: self.range_here(span.start, span.end), placeholder: def.name.clone() })
    }

    /// Whether `new_name` is taken where the symbol at `position` lives: a
    /// global by another global, a node or gate by another of its workflow.
    pub fn rename_collision(&self, position: Position, new_name: &str) -> Option<String> {
        let key = self.key_at(position)?;
        let symbols = &self.checked.symbols;
        let def = symbols.def(key)?;
        let taken = symbols.defs.iter().find(|other| other.key != def.key && other.name == new_name && other.container == def.container)?;
        Some(format!("`{new_name}` is already the name of {} `{}` here: renaming onto it would break the file", taken.kind, taken.name))
    }

    /// The declaration and every use, in this document, of the symbol at `position`.
    pub fn highlights(&self, position: Position) -> Vec<DocumentHighlight> {
        let Some(key) = self.key_at(position) else { return Vec::new() };
        let symbols = &self.checked.symbols;
        let mut out: Vec<DocumentHighlight> = symbols
            .def(key)
            .filter(|d| d.file == self.root)
            .map(|d| DocumentHighlight { range: self.range_here(d.span.start, d.span.end), kind: Some(DocumentHighlightKind::WRITE) })
            .into_iter()
            .collect();
        out.extend(
            symbols
                .uses(key)
                .filter(|r| r.file == self.root)
                .map(|r| DocumentHighlight { range: self.range_here(r.span.start, r.span.end), kind: Some(DocumentHighlightKind::READ) }),
        );
        out
    }

    /// Blocks (`{ … }` and `[ … ]` over several lines) and runs of line
    /// comments, from the lexer: they fold even in a document with errors.
    pub fn folding_ranges(&self) -> Vec<FoldingRange> {
        let text = self.source();
        let mut out = Vec::new();
        let mut open: Vec<u32> = Vec::new();
        // The first and last line of the current run of line comments.
        let mut comments: Option<(u32, u32)> = None;
        let flush = |comments: &mut Option<(u32, u32)>, out: &mut Vec<FoldingRange>| {
            if let Some((first, last)) = comments.take() {
                if last > first {
                    out.push(fold(first, last, Some(FoldingRangeKind::Comment)));
                }
            }
        };
        for token in flow_syntax::lexer::lex(text) {
            let line = self.range_here(token.span.start, token.span.start).start.line;
            match token.kind {
                T::LineComment => {
                    comments = match comments {
                        Some((first, last)) if line == last + 1 => Some((first, line)),
                        _ => {
                            flush(&mut comments, &mut out);
                            Some((line, line))
                        }
                    };
                    continue;
                }
                T::LBrace | T::LBracket => open.push(line),
                T::RBrace | T::RBracket => {
                    if let Some(start) = open.pop() {
                        if line > start {
                            // The closing line stays visible.
                            out.push(fold(start, line - 1, None));
                        }
                    }
                }
                T::BlockComment => {
                    let end = self.range_here(token.span.end, token.span.end).start.line;
                    if end > line {
                        out.push(fold(line, end, Some(FoldingRangeKind::Comment)));
                    }
                }
                _ => {}
            }
            if token.kind != T::Whitespace {
                flush(&mut comments, &mut out);
            }
        }
        flush(&mut comments, &mut out);
        out.sort_by_key(|r| (r.start_line, r.end_line));
        out
    }
}

fn fold(start_line: u32, end_line: u32, kind: Option<FoldingRangeKind>) -> FoldingRange {
    FoldingRange { start_line, end_line, kind, ..Default::default() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    fn analysed(text: &str) -> (Uri, Analysis) {
        let uri = Uri::from_str("file:///edits.flow").expect("a URI");
        let analysis = Analysis::new(&uri, text);
        (uri, analysis)
    }

    /// `text` with `edits` applied (LSP ranges, applied from the last).
    fn apply(text: &str, edits: &[TextEdit]) -> String {
        let offset = |p: Position| {
            let line_start: usize = text.split_inclusive('\n').take(p.line as usize).map(str::len).sum();
            line_start + p.character as usize
        };
        let mut sorted: Vec<&TextEdit> = edits.iter().collect();
        sorted.sort_by_key(|e| std::cmp::Reverse((e.range.start.line, e.range.start.character)));
        let mut out = text.to_string();
        for edit in sorted {
            out.replace_range(offset(edit.range.start)..offset(edit.range.end), &edit.new_text);
        }
        out
    }

    const MESSY: &str = "provider p: scripted\nagent   a {provider: p}\n\nagent b {  provider: p }\nagent c { provider: p }\n";

    #[test]
    fn formatting_edits_only_changed_lines_and_a_range_only_its_own() {
        let (_, analysis) = analysed(MESSY);
        let edits = analysis.formatting(None).expect("formatted");
        assert_eq!(apply(MESSY, &edits), flow_fmt::format(MESSY).expect("formats"));
        assert!(edits.iter().all(|e| e.range.start.line >= 1), "line 0 is already formatted: {edits:?}");
        // Only line 3 (agent b).
        let range = Range { start: Position { line: 3, character: 0 }, end: Position { line: 3, character: 5 } };
        let edits = analysis.formatting(Some(range)).expect("formatted");
        let partly = apply(MESSY, &edits);
        assert!(partly.contains("agent   a {provider: p}"), "line 1 is left alone:\n{partly}");
        assert!(partly.contains("agent b { provider: p }"), "line 3 is formatted:\n{partly}");
        // Syntax errors: refused, nothing edited.
        let (_, broken) = analysed("agent a {\n");
        assert!(broken.formatting(None).is_err());
    }

    #[test]
    fn a_did_you_mean_is_a_quick_fix_at_every_use() {
        let text = "provider p: scripted\nagent researcher { provider: p }\ntype Missing = string\nworkflow w {\n  start: r\n  node r: agent reseacher { output: Mising }\n  node s: agent a { output: Mising }\n  node done: end ok\n  r -> s\n  s -> done\n}\n";
        let (uri, analysis) = analysed(text);
        let everywhere = Range { start: Position { line: 0, character: 0 }, end: Position { line: 20, character: 0 } };
        let actions = analysis.code_actions(&uri, everywhere, &[]);
        let titles: Vec<&str> = actions.iter().map(|a| a.title.as_str()).collect();
        assert!(titles.contains(&"Replace `reseacher` with `researcher`"), "{titles:?}");
        assert!(titles.contains(&"Replace `Mising` with `Missing`"), "{titles:?}");
        let missing = actions.iter().find(|a| a.title.contains("Mising")).expect("the type's fix");
        let edits = &missing.edit.as_ref().expect("an edit").changes.as_ref().expect("changes")[&uri];
        assert_eq!(edits.len(), 2, "both uses of the undefined type: {edits:?}");
        assert!(missing.diagnostics.as_ref().is_some_and(|d| d.len() == 1), "tied to its diagnostic");
        let fixed = apply(text, edits);
        assert!(!fixed.contains("Mising"));
        // A range away from the diagnostics: no action.
        let first_line = Range { start: Position { line: 0, character: 0 }, end: Position { line: 0, character: 3 } };
        assert!(analysis.code_actions(&uri, first_line, &[]).is_empty());
    }

    #[test]
    fn rename_is_prepared_on_a_name_and_refused_onto_a_taken_one() {
        let text = "provider p: scripted\nagent writer { provider: p }\nagent critic { provider: p }\nworkflow w {\n  start: n\n  node n: agent writer { output: string }\n  node done: end ok\n  n -> done\n}\n";
        let (_, analysis) = analysed(text);
        let on_use = Position { line: 5, character: 19 };
        match analysis.prepare_rename(on_use).expect("renameable") {
            PrepareRenameResponse::RangeWithPlaceholder { range, placeholder } => {
                assert_eq!(placeholder, "writer");
                assert_eq!(range.start, Position { line: 5, character: 16 });
                assert_eq!(range.end, Position { line: 5, character: 22 });
            }
            other => panic!("{other:?}"),
        }
        assert!(analysis.prepare_rename(Position { line: 3, character: 1 }).is_err(), "`workflow` is a keyword");
        let refused = analysis.rename(on_use, "critic").expect_err("a collision");
        assert!(refused.contains("already the name of agent `critic`"), "{refused}");
        assert_eq!(analysis.rename(on_use, "author").expect("renamed").len(), 2);
        // Node names are a workflow's: `done` is taken, `agent` names are not.
        assert!(analysis.rename(Position { line: 5, character: 7 }, "done").is_err());
        assert!(analysis.rename(Position { line: 5, character: 7 }, "critic").is_ok());
    }

    #[test]
    fn highlights_and_folds() {
        let text = "// one\n// two\nprovider p: scripted\nagent a {\n  provider: p\n}\nworkflow w {\n  start: n\n  node n: agent a { output: string }\n  node done: end ok\n  n -> done\n}\n";
        let (_, analysis) = analysed(text);
        let highlights = analysis.highlights(Position { line: 8, character: 7 });
        let lines: Vec<u32> = highlights.iter().map(|h| h.range.start.line).collect();
        assert_eq!(lines, [8, 7, 10], "the node's declaration, then its uses");
        let folds: Vec<(u32, u32)> = analysis.folding_ranges().iter().map(|f| (f.start_line, f.end_line)).collect();
        assert_eq!(folds, [(0, 1), (3, 4), (6, 10)], "the comments, the agent's block, the workflow's");
    }
}
