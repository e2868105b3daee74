//! One analysed document: the compiler's view of it, and the queries the
//! server answers from it.

use crate::position::{range, LineIndex};
use flow_check::{Checked, SymbolDef};
use flow_diagnostics::{Diagnostic, FileId, Severity, SourceDb};
use lsp_types::{
    DiagnosticRelatedInformation, DiagnosticSeverity, DocumentSymbol, Location, NumberOrString, Position, Range, SemanticToken, SymbolKind,
    TextEdit, Uri,
};
use std::collections::HashMap;
use std::str::FromStr;
use std::sync::OnceLock;

/// A document checked and verified as `flowc verify` would.
#[derive(Debug)]
pub struct Analysis {
    pub db: SourceDb,
    pub root: FileId,
    pub checked: Checked,
    /// Checker and verifier diagnostics, sorted.
    pub diagnostics: Vec<Diagnostic>,
    /// Where the document's lines start (positions in O(log n)).
    lines: LineIndex,
    /// The same for the other files (imports, schemas), built when first
    /// needed.
    other_lines: Vec<OnceLock<LineIndex>>,
    /// The digest of the program's sources (the model checker's plan digest).
    digest: String,
    /// The static budget bounds (inlay hints).
    pub(crate) budgets: Vec<flow_verify::BudgetBound>,
}

/// The file-system path of a `file:` URI (percent-decoded), if it is one.
pub fn uri_path(uri: &Uri) -> Option<String> {
    let text = uri.as_str();
    let rest = text.strip_prefix("file://")?;
    let bytes = rest.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Some(Ok(b)) = rest.get(i + 1..i + 3).map(|hex| u8::from_str_radix(hex, 16)) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).ok()
}

fn path_uri(path: &str) -> Option<Uri> {
    let mut encoded = String::from("file://");
    for c in path.chars() {
        match c {
            'A'..='Z' | 'a'..='z' | '0'..='9' | '/' | '-' | '_' | '.' | '~' => encoded.push(c),
            other => {
                let mut buf = [0u8; 4];
                for b in other.encode_utf8(&mut buf).bytes() {
                    encoded.push_str(&format!("%{b:02X}"));
                }
            }
        }
    }
    Uri::from_str(&encoded).ok()
}

impl Analysis {
    /// Checks and verifies `text` as the document at `uri` (imports and
    /// schemas resolve relative to its path), as `flowc verify` does: the
    /// static checks and the model checker on every policy.
    pub fn new(uri: &Uri, text: &str) -> Analysis {
        Analysis::until(uri, text, &flow_verify::Cancel::default()).expect("never cancelled")
    }

    /// [`Analysis::new`], or `None` once `cancel` is set (the next edit
    /// replaced the text).
    pub fn until(uri: &Uri, text: &str, cancel: &flow_verify::Cancel) -> Option<Analysis> {
        Analysis::bounded(uri, text, flow_verify::policies::DEFAULT_MAX_STATES, cancel)
    }

    /// [`Analysis::until`], with the model checker's bound on states per
    /// policy (the fuzzer keeps it small so one input stays quick): the
    /// two phases the server runs one after the other, at once.
    pub fn bounded(uri: &Uri, text: &str, max_states: usize, cancel: &flow_verify::Cancel) -> Option<Analysis> {
        let mut analysis = Analysis::structural(uri, text, cancel)?;
        let found = analysis.policy_diagnostics(max_states, cancel)?;
        analysis.add_policy_diagnostics(found);
        Some(analysis)
    }

    /// The first phase: the document checked and verified as `flowc verify`
    /// does, but for the model checker (quick: the editor shows it at once).
    pub fn structural(uri: &Uri, text: &str, cancel: &flow_verify::Cancel) -> Option<Analysis> {
        let mut db = SourceDb::new();
        let name = uri_path(uri).unwrap_or_else(|| uri.as_str().to_string());
        let depth = flow_pipeline::Depth::Static;
        let compiled = flow_pipeline::compile_text_until(&mut db, &name, text.to_string(), &flow_pipeline::FsLoader, depth, true, cancel)?;
        let lines = LineIndex::new(text);
        let other_lines = (0..db.len()).map(|_| OnceLock::new()).collect();
        Some(Analysis {
            db,
            root: compiled.root,
            checked: compiled.checked,
            diagnostics: compiled.diagnostics,
            lines,
            other_lines,
            digest: compiled.digest,
            budgets: compiled.budgets,
        })
    }

    /// Whether the second phase has work: policies to model-check in a
    /// program without errors (`flowc verify` runs the model checker only then).
    pub fn has_policies_to_check(&self) -> bool {
        let program = &self.checked.program;
        !self.checked.has_errors() && (!program.policies.is_empty() || program.workflows.values().any(|w| !w.policies.is_empty()))
    }

    /// The second phase: what the model checker finds (E1001, W1001), as
    /// `flowc verify` reports it; `None` once `cancel` is set.
    pub fn policy_diagnostics(&self, max_states: usize, cancel: &flow_verify::Cancel) -> Option<Vec<Diagnostic>> {
        if !self.has_policies_to_check() {
            return Some(Vec::new());
        }
        let reductions = flow_verify::policies::Reductions::default();
        let reports = flow_verify::policies::check_policies_until(&self.checked.program, &self.digest, max_states, reductions, cancel)?;
        Some(reports.into_iter().filter_map(|r| r.diagnostic).collect())
    }

    /// Adds the second phase's diagnostics (kept sorted, as `flowc verify` sorts).
    pub fn add_policy_diagnostics(&mut self, found: Vec<Diagnostic>) {
        if found.is_empty() {
            return;
        }
        self.diagnostics.extend(found);
        flow_diagnostics::sort_diagnostics(&mut self.diagnostics);
    }

    fn text(&self) -> &str {
        self.db.text(self.root)
    }

    /// The document's text, as analysed.
    pub fn source(&self) -> &str {
        self.text()
    }

    /// Whether a change to the file at `path` can change this analysis: a
    /// file it imported (or a schema it read), or any file when an import
    /// was not found (the file may be the one that was missing).
    pub fn reads(&self, path: &str) -> bool {
        let wanted = flow_pipeline::normalize(std::path::Path::new(path));
        let imported = (0..self.db.len() as u32).map(FileId).any(|f| f != self.root && self.db.name(f) == wanted);
        imported || self.diagnostics.iter().any(|d| d.code == flow_diagnostics::codes::MODULE_NOT_FOUND)
    }

    /// The range of `start..end` in this document.
    pub(crate) fn range_here(&self, start: u32, end: u32) -> Range {
        self.lines.range(self.text(), start, end)
    }

    /// The byte offset of `position` in this document.
    pub(crate) fn offset_here(&self, position: Position) -> u32 {
        self.lines.offset(self.text(), position)
    }

    fn location(&self, uri: &Uri, file: FileId, start: u32, end: u32) -> Option<Location> {
        if file == self.root {
            return Some(Location { uri: uri.clone(), range: self.range_here(start, end) });
        }
        let text = self.db.text(file);
        let range = match self.other_lines.get(file.0 as usize) {
            Some(lines) => lines.get_or_init(|| LineIndex::new(text)).range(text, start, end),
            None => range(text, start, end),
        };
        Some(Location { uri: path_uri(self.db.name(file))?, range })
    }

    /// The diagnostics as the protocol shows them. Diagnostics located in
    /// other files (an import, a schema) are shown at the top of this one.
    pub fn lsp_diagnostics(&self, uri: &Uri) -> Vec<lsp_types::Diagnostic> {
        self.lsp_diagnostics_with(uri, &[])
    }

    /// [`Analysis::lsp_diagnostics`] with `more` (the model checker's,
    /// found after this analysis) among them, sorted as `flowc verify` sorts.
    pub fn lsp_diagnostics_with(&self, uri: &Uri, more: &[Diagnostic]) -> Vec<lsp_types::Diagnostic> {
        let merged;
        let all: &[Diagnostic] = if more.is_empty() {
            &self.diagnostics
        } else {
            let mut together = self.diagnostics.clone();
            together.extend_from_slice(more);
            flow_diagnostics::sort_diagnostics(&mut together);
            merged = together;
            &merged
        };
        let max = flow_diagnostics::cap::DEFAULT_MAX_PER_FILE;
        let capped = flow_diagnostics::cap::cap_per_file(all, max);
        let mut shown: Vec<lsp_types::Diagnostic> = capped
            .shown
            .iter()
            .map(|d| {
                let primary = d.primary();
                let (range_here, elsewhere) = match primary {
                    Some(label) if label.file == self.root => (self.range_here(label.span.start, label.span.end), None),
                    Some(label) => (Range::default(), Some(self.db.name(label.file).to_string())),
                    None => (Range::default(), None),
                };
                let mut related: Vec<DiagnosticRelatedInformation> = d
                    .labels
                    .iter()
                    .filter(|l| !l.primary && !l.message.is_empty())
                    .filter_map(|l| {
                        Some(DiagnosticRelatedInformation {
                            location: self.location(uri, l.file, l.span.start, l.span.end)?,
                            message: l.message.clone(),
                        })
                    })
                    .collect();
                if let Some(witness) = &d.witness {
                    for (i, step) in witness.steps.iter().enumerate() {
                        if let Some(location) = self.location(uri, step.file, step.span.start, step.span.end) {
                            related.push(DiagnosticRelatedInformation { location, message: format!("step {}: {}", i + 1, step.message) });
                        }
                    }
                }
                let mut message = d.message.clone();
                if let Some(file) = elsewhere {
                    message = format!("{file}: {message}");
                }
                for note in &d.notes {
                    message.push_str(&format!("\nnote: {note}"));
                }
                if let Some(witness) = &d.witness {
                    message.push_str(&format!("\nwitness: {}", witness.compact()));
                }
                if let Some(help) = &d.help {
                    message.push_str(&format!("\nhelp: {help}"));
                }
                lsp_types::Diagnostic {
                    range: range_here,
                    severity: Some(match d.severity {
                        Severity::Error => DiagnosticSeverity::ERROR,
                        Severity::Warning => DiagnosticSeverity::WARNING,
                    }),
                    code: Some(NumberOrString::String(d.code.0.to_string())),
                    source: Some("flowc".into()),
                    message,
                    related_information: (!related.is_empty()).then_some(related),
                    ..Default::default()
                }
            })
            .collect();
        // "and N more", as `flowc verify` prints it, at the top of the document.
        for note in capped.notes(&self.db, max) {
            shown.push(lsp_types::Diagnostic {
                severity: Some(DiagnosticSeverity::INFORMATION),
                source: Some("flowc".into()),
                message: note.trim_start_matches("note: ").to_string(),
                ..Default::default()
            });
        }
        shown
    }

    pub(crate) fn key_at(&self, position: Position) -> Option<&str> {
        let at = self.offset_here(position);
        self.checked.symbols.key_at(self.root, at)
    }

    fn def_at(&self, position: Position) -> Option<&SymbolDef> {
        let key = self.key_at(position)?;
        self.checked.symbols.def(key)
    }

    pub fn hover(&self, position: Position) -> Option<String> {
        let def = self.def_at(position)?;
        let mut text = format!("```flow\n{}\n```\n\n{} `{}`", def.detail, def.kind, def.name);
        if let Some(container) = &def.container {
            text.push_str(&format!(" in workflow `{container}`"));
        }
        let program = &self.checked.program;
        match def.kind.as_str() {
            "type" => {
                if let Some(t) = program.types.get(&def.name) {
                    text.push_str(&format!("\n\ntype: `{}`", t.ty));
                }
            }
            "node" => {
                if let Some(node) = def.container.as_ref().and_then(|w| program.workflows.get(w)).and_then(|w| w.nodes.get(&def.name)) {
                    text.push_str(&format!("\n\noutput: `{}`", node.output));
                    if let flow_check::types::Ty::Named { name } = &node.output {
                        if let Some(t) = program.types.get(name) {
                            text.push_str(&format!("\n\n`{name}` = `{}`", t.ty));
                        }
                    }
                    if let Some(budget) = &node.common.budget {
                        text.push_str(&format!("\n\nbudget: `{}`", serde_json::to_string(budget).unwrap_or_default()));
                    }
                }
            }
            "record" => {
                let workflow = def.container.as_ref().and_then(|w| program.workflows.get(w));
                if let Some(record) = workflow.and_then(|w| w.records().find(|r| r.name == def.name)) {
                    text.push_str(&format!("\n\nvalues: `{}`", record.ty()));
                }
                text.push_str(&format!("\n\npolicy atom: `recorded({})`", def.name));
            }
            _ => {
                if let Some(decl) = program.decls.get(&def.name) {
                    for key in ["description", "input", "output", "budget", "risk", "provider", "tools"] {
                        if let Some(value) = decl.props.get(key) {
                            text.push_str(&format!("\n\n{key}: `{}`", show_value(value)));
                        }
                    }
                }
            }
        }
        Some(text)
    }

    pub fn definition(&self, uri: &Uri, position: Position) -> Option<Location> {
        let def = self.def_at(position)?;
        self.location(uri, def.file, def.span.start, def.span.end)
    }

    pub fn references(&self, uri: &Uri, position: Position, include_declaration: bool) -> Vec<Location> {
        let Some(key) = self.key_at(position) else { return Vec::new() };
        let symbols = &self.checked.symbols;
        let mut out = Vec::new();
        if include_declaration {
            if let Some(def) = symbols.def(key) {
                out.extend(self.location(uri, def.file, def.span.start, def.span.end));
            }
        }
        out.extend(symbols.uses(key).filter_map(|r| self.location(uri, r.file, r.span.start, r.span.end)));
        out
    }

    /// Edits renaming the symbol at `position` in this document, or why not.
    pub fn rename(&self, position: Position, new_name: &str) -> Result<Vec<TextEdit>, String> {
        let valid = new_name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && new_name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !flow_syntax::lexer::KEYWORDS.iter().any(|(k, _)| *k == new_name);
        if !valid {
            return Err(format!("`{new_name}` is not a valid Flow name"));
        }
        let key = self.key_at(position).ok_or("no symbol here")?;
        let symbols = &self.checked.symbols;
        let def = symbols.def(key).ok_or("no declaration for this name")?;
        if def.file != self.root {
            return Err(format!("`{}` is declared in another file ({})", def.name, self.db.name(def.file)));
        }
        if let Some(why) = self.rename_collision(position, new_name) {
            return Err(why);
        }
        let mut edits = vec![TextEdit { range: self.range_here(def.span.start, def.span.end), new_text: new_name.to_string() }];
        edits.extend(
            symbols
                .uses(key)
                .filter(|r| r.file == self.root)
                .map(|r| TextEdit { range: self.range_here(r.span.start, r.span.end), new_text: new_name.to_string() }),
        );
        Ok(edits)
    }

    #[allow(deprecated)] // `DocumentSymbol::deprecated` must still be written.
    pub fn document_symbols(&self) -> Vec<DocumentSymbol> {
        let symbols = &self.checked.symbols;
        let make = |def: &SymbolDef, children: Option<Vec<DocumentSymbol>>| {
            let full = self.range_here(def.span.start, def.span.end);
            DocumentSymbol {
                name: def.name.clone(),
                detail: Some(def.detail.clone()),
                kind: symbol_kind(&def.kind),
                tags: None,
                deprecated: None,
                range: full,
                selection_range: full,
                children,
            }
        };
        // A workflow's nodes and gates, gathered in one pass.
        let mut members: HashMap<&str, Vec<DocumentSymbol>> = HashMap::new();
        for c in symbols.defs.iter().filter(|c| c.file == self.root) {
            if let Some(container) = &c.container {
                members.entry(container.as_str()).or_default().push(make(c, None));
            }
        }
        symbols
            .defs
            .iter()
            .filter(|d| d.file == self.root && d.container.is_none())
            .map(|def| {
                let children = if def.kind == "workflow" { members.remove(def.name.as_str()) } else { None };
                make(def, children.filter(|c| !c.is_empty()))
            })
            .collect()
    }

    /// Semantic tokens from the lexer, names classified by the symbol index.
    pub fn semantic_tokens(&self) -> Vec<SemanticToken> {
        use flow_syntax::lexer::TokenKind as T;
        let text = self.text();
        let symbols = &self.checked.symbols;
        // What each name in this document declares or refers to, by offset.
        let mut kinds: HashMap<u32, &str> = HashMap::new();
        for d in symbols.defs.iter().filter(|d| d.file == self.root) {
            kinds.entry(d.span.start).or_insert(d.kind.as_str());
        }
        let mut def_kinds: HashMap<&str, &str> = HashMap::new();
        for d in &symbols.defs {
            def_kinds.entry(d.key.as_str()).or_insert(d.kind.as_str());
        }
        for r in symbols.refs.iter().filter(|r| r.file == self.root) {
            if let Some(kind) = def_kinds.get(r.key.as_str()) {
                kinds.entry(r.span.start).or_insert(kind);
            }
        }
        let kind_of_span = |start: u32| kinds.get(&start).copied();
        // `record` is a contextual word: a keyword only before the name of
        // a declared record (`record NAME {`).
        let record_names: std::collections::HashSet<u32> =
            symbols.defs.iter().filter(|d| d.file == self.root && d.kind == "record").map(|d| d.span.start).collect();
        let tokens = flow_syntax::lexer::lex(text);
        let starts_record = |i: usize| {
            let mut next = tokens[i + 1..].iter().filter(|t| !matches!(t.kind, T::Whitespace | T::LineComment | T::BlockComment));
            &text[tokens[i].span.range()] == "record" && next.next().is_some_and(|t| record_names.contains(&t.span.start))
        };
        let mut out = Vec::new();
        let (mut last_line, mut last_start) = (0u32, 0u32);
        for (i, token) in tokens.iter().enumerate() {
            let class = match token.kind {
                T::Ident if starts_record(i) => Some(TOKEN_KEYWORD),
                T::LineComment | T::BlockComment => Some(TOKEN_COMMENT),
                T::String => Some(TOKEN_STRING),
                T::Number | T::Money => Some(TOKEN_NUMBER),
                T::Ident => match kind_of_span(token.span.start) {
                    Some("type") => Some(TOKEN_TYPE),
                    Some("node" | "gate") => Some(TOKEN_VARIABLE),
                    Some("evaluator") => Some(TOKEN_FUNCTION),
                    Some("record") => Some(TOKEN_EVENT),
                    Some(_) => Some(TOKEN_CLASS),
                    None => None,
                },
                kind if kind.is_keyword() => Some(TOKEN_KEYWORD),
                T::Arrow | T::FatArrow | T::EqEq | T::NotEq | T::LtEq | T::GtEq | T::Lt | T::Gt | T::Pipe => Some(TOKEN_OPERATOR),
                _ => None,
            };
            let Some(class) = class else { continue };
            // Tokens spanning lines (block comments) are split per line.
            let mut start = token.span.start;
            let slice = &text[token.span.range()];
            for piece in slice.split_inclusive('\n') {
                let piece_text = piece.trim_end_matches('\n');
                let position = self.lines.position(text, start);
                let length = piece_text.encode_utf16().count() as u32;
                if length > 0 {
                    let delta_line = position.line - last_line;
                    let delta_start = if delta_line == 0 { position.character - last_start } else { position.character };
                    out.push(SemanticToken { delta_line, delta_start, length, token_type: class, token_modifiers_bitset: 0 });
                    last_line = position.line;
                    last_start = position.character;
                }
                start += piece.len() as u32;
            }
        }
        out
    }
}

pub const TOKEN_KEYWORD: u32 = 0;
pub const TOKEN_STRING: u32 = 1;
pub const TOKEN_NUMBER: u32 = 2;
pub const TOKEN_COMMENT: u32 = 3;
pub const TOKEN_OPERATOR: u32 = 4;
pub const TOKEN_TYPE: u32 = 5;
pub const TOKEN_CLASS: u32 = 6;
pub const TOKEN_FUNCTION: u32 = 7;
pub const TOKEN_VARIABLE: u32 = 8;
/// A declared record (`record NAME { … }`, `recorded(NAME)`).
pub const TOKEN_EVENT: u32 = 9;

/// The legend, in the order of the constants above.
pub const TOKEN_TYPES: &[&str] = &["keyword", "string", "number", "comment", "operator", "type", "class", "function", "variable", "event"];

fn symbol_kind(kind: &str) -> SymbolKind {
    match kind {
        "workflow" => SymbolKind::MODULE,
        "type" => SymbolKind::STRUCT,
        "agent" => SymbolKind::CLASS,
        "tool" | "evaluator" => SymbolKind::FUNCTION,
        "node" => SymbolKind::VARIABLE,
        "gate" | "record" => SymbolKind::EVENT,
        "machine" => SymbolKind::ENUM,
        "policy" => SymbolKind::INTERFACE,
        "budget" | "contract" => SymbolKind::OBJECT,
        _ => SymbolKind::CONSTANT,
    }
}

fn show_value(value: &flow_check::ir::Value) -> String {
    use flow_check::ir::Value;
    match value {
        Value::Str(s) => format!("\"{s}\""),
        Value::Type(t) => t.to_string(),
        Value::Ref { name, .. } | Value::Word(name) => name.clone(),
        Value::List(items) => format!("[{}]", items.iter().map(show_value).collect::<Vec<_>>().join(", ")),
        Value::Record(fields) => {
            format!("{{ {} }}", fields.iter().map(|(k, v)| format!("{k}: {}", show_value(v))).collect::<Vec<_>>().join(", "))
        }
        Value::Int(i) => i.to_string(),
        Value::Money(m) => format!("${m:.2}"),
        Value::Bool(b) => b.to_string(),
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLEAN: &str = "provider local: scripted\nagent writer { provider: local }\ntype Draft = { title: string, sections: [string] }\n\nworkflow w {\n  start: draft\n  node draft: agent writer { output: Draft }\n  node done: end ok\n  draft -> done when len(draft.sections) > 0\n  draft -> done else\n}\n";

    fn analysis() -> (Uri, Analysis) {
        let uri = Uri::from_str("file:///tmp/clean.flow").unwrap();
        let a = Analysis::new(&uri, CLEAN);
        (uri, a)
    }

    #[test]
    fn symbols_of_a_clean_file() {
        let (_, a) = analysis();
        assert!(a.diagnostics.is_empty(), "{:?}", a.diagnostics);
        let names: Vec<String> = a.document_symbols().into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["local", "writer", "Draft", "w"]);
    }

    const RECORDS: &str = "provider local: scripted\nagent writer { provider: local }\ntype Draft = { text: string, score: int }\n\nworkflow review {\n  start: draft\n  node draft: agent writer {\n    output: Draft\n    record draft_scored { score: draft.score, words: len(split(draft.text, \" \")) }\n  }\n  node publish: end ok\n  gate quality: draft -> publish {\n    evaluate: [predicate(draft.score > 5)]\n    on PASS -> continue\n    on BLOCK -> terminate(blocked)\n    on REQUIRES_DECISION -> terminate(blocked)\n    record quality_check { outcome: outcome, score: draft.score }\n  }\n  draft -> publish\n}\npolicy publish_after_check: never started(publish) before recorded(quality_check)\n";

    fn records() -> (Uri, Analysis) {
        let uri = Uri::from_str("file:///tmp/records.flow").unwrap();
        let a = Analysis::new(&uri, RECORDS);
        assert!(a.diagnostics.is_empty(), "{:?}", a.diagnostics);
        (uri, a)
    }

    /// The position `skip` bytes into the first `needle` of RECORDS.
    fn at(needle: &str, skip: usize) -> Position {
        crate::position::position(RECORDS, (RECORDS.find(needle).unwrap() + skip) as u32)
    }

    #[test]
    fn hover_on_a_record_shows_its_fields_and_their_types() {
        let (uri, a) = records();
        let declared = a.hover(at("record quality_check", "record ".len() + 2)).expect("a hover on the declaration");
        assert!(declared.contains("record quality_check { outcome, score } — written by gate quality"), "{declared}");
        assert!(declared.contains("values: `{ outcome: \"PASS\" | \"BLOCK\" | \"REQUIRES_DECISION\", score: int }`"), "{declared}");
        let used = a.hover(at("recorded(quality_check)", "recorded(".len() + 1)).expect("a hover on `recorded(…)`");
        assert_eq!(used, declared);
        let node_record = a.hover(at("record draft_scored", "record ".len())).expect("a node's record");
        assert!(node_record.contains("values: `{ score: int, words: int }`"), "{node_record}");
        assert!(node_record.contains("policy atom: `recorded(draft_scored)`"), "{node_record}");
        let definition = a.definition(&uri, at("recorded(quality_check)", "recorded(".len())).expect("a definition");
        assert_eq!(definition.range.start, at("record quality_check", "record ".len()));
        assert_eq!(a.references(&uri, at("record quality_check", "record ".len()), true).len(), 2);
    }

    #[test]
    fn records_are_events_in_the_outline_and_the_tokens() {
        let (_, a) = records();
        let symbols = a.document_symbols();
        let review = symbols.iter().find(|s| s.name == "review").and_then(|s| s.children.as_ref()).expect("the workflow's members");
        let kind = |name: &str| review.iter().find(|s| s.name == name).map(|s| s.kind);
        assert_eq!(kind("draft_scored"), Some(SymbolKind::EVENT));
        assert_eq!(kind("quality_check"), Some(SymbolKind::EVENT));
        let tokens = absolute_tokens(&a);
        let class = |position: Position| tokens.iter().find(|t| (t.0, t.1) == (position.line, position.character)).map(|t| (t.2, t.3));
        assert_eq!(class(at("record draft_scored", 0)), Some((6, TOKEN_KEYWORD)), "`record` before a name is a keyword");
        assert_eq!(class(at("record draft_scored", "record ".len())), Some((12, TOKEN_EVENT)));
        assert_eq!(class(at("recorded(quality_check)", "recorded(".len())), Some((13, TOKEN_EVENT)));
        assert_eq!(class(at("recorded(quality_check)", 0)), None, "an atom's name, like `started`");
        assert_eq!(TOKEN_TYPES[TOKEN_EVENT as usize], "event");
        // `record` is contextual: a key before `:`, a name elsewhere.
        let key = "workflow w {\n  start: a\n  node a: end ok\n  record: 1\n}\n";
        let key = absolute_tokens(&Analysis::new(&Uri::from_str("file:///tmp/key.flow").unwrap(), key));
        assert!(!key.iter().any(|t| (t.0, t.1, t.3) == (3, 2, TOKEN_KEYWORD)), "`record:` is a key: {key:?}");
    }

    /// The (line, start, length, type) of each semantic token.
    fn absolute_tokens(a: &Analysis) -> Vec<(u32, u32, u32, u32)> {
        let (mut line, mut start) = (0, 0);
        let mut tokens = Vec::new();
        for t in a.semantic_tokens() {
            line += t.delta_line;
            start = if t.delta_line == 0 { start + t.delta_start } else { t.delta_start };
            tokens.push((line, start, t.length, t.token_type));
        }
        tokens
    }

    #[test]
    fn references_and_rename_of_a_node() {
        let (uri, a) = analysis();
        let at = crate::position::position(CLEAN, CLEAN.find("draft.sections").unwrap() as u32 + 1);
        assert_eq!(a.references(&uri, at, true).len(), 5);
        assert_eq!(a.rename(at, "sketch").unwrap().len(), 5);
        assert!(a.rename(at, "node").is_err(), "keywords are refused");
    }
}
