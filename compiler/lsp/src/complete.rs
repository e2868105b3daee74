//! Completion by context: the fields of a node's output after `node.`, the
//! properties a block accepts (with their docs) where a property goes, the
//! names of the right kind where a reference goes (an agent after
//! `node x: agent`, a provider after `provider:`, a node after `->`, a
//! declared record in `recorded(…)`), the policy atoms in a policy's
//! formula, and every name and keyword elsewhere.

use crate::analysis::Analysis;
use flow_check::facts;
use flow_check::spec::{self, AtomArgKind, Kind, Target, P, V};
use flow_check::types::{FieldTy, Ty, PRIMITIVES};
use flow_syntax::lexer::TokenKind as T;
use flow_trace::NodeKind;
use indexmap::IndexMap;
use lsp_types::{CompletionItem, CompletionItemKind, Documentation, MarkupContent, MarkupKind, Position};
use std::collections::HashSet;

/// A block open at the cursor, as its header says.
#[derive(Debug, Clone)]
enum Block {
    /// A declaration (`agent a {`), with its variant (`tool t: command {`).
    Decl(Kind, Option<String>),
    /// A node of a kind (`node n: agent a {`).
    Node(String),
    Gate,
    Policy,
    /// A transfer (`handoff a -> b {`, `delegate …`).
    Transfer(String),
    /// A record value of a property of the enclosing block (`retry: {`).
    Record(&'static [P]),
    /// A declared record of a node or a gate (`record NAME {`): its fields
    /// are free names, their values expressions (a gate's read `outcome`).
    Declared {
        in_gate: bool,
    },
    /// A block this completion does not know.
    Other,
}

impl Block {
    /// The properties the block accepts.
    fn props(&self) -> Vec<&'static P> {
        match self {
            Block::Decl(kind, variant) => {
                let Some(decl) = spec::ALL_DECLS.iter().find(|d| d.kind == *kind) else { return Vec::new() };
                let variant = variant.as_deref().or(decl.default_variant);
                let extra = decl.variants.iter().filter(|(name, _)| Some(*name) == variant).flat_map(|(_, props)| props.iter());
                decl.block.props.iter().chain(extra).collect()
            }
            Block::Node(kind) => spec::node_spec(kind).map(|s| s.props.iter().chain(spec::NODE_COMMON).collect()).unwrap_or_default(),
            Block::Gate => spec::GATE_BLOCK.props.iter().collect(),
            Block::Policy => spec::POLICY_BLOCK.props.iter().collect(),
            Block::Transfer(kind) if kind == "delegate" => spec::DELEGATE_BLOCK.props.iter().collect(),
            Block::Transfer(_) => spec::HANDOFF_BLOCK.props.iter().collect(),
            Block::Record(props) => props.iter().collect(),
            Block::Declared { .. } | Block::Other => Vec::new(),
        }
    }
}

/// The declaration kind a keyword starts.
fn decl_kind(word: &str) -> Option<Kind> {
    spec::ALL_DECLS.iter().map(|d| d.kind).find(|k| k.as_str() == word)
}

/// The blocks open at `offset`, outermost first, from the lexer (so a
/// document with errors still has them): each `{` classified by the words
/// before it on its line.
fn open_blocks(text: &str, offset: usize) -> Vec<Block> {
    let mut stack: Vec<Block> = Vec::new();
    let mut header: Vec<String> = Vec::new();
    for token in flow_syntax::lexer::lex(text) {
        if token.span.start as usize >= offset {
            break;
        }
        let word = &text[token.span.range()];
        match token.kind {
            T::Whitespace if word.contains('\n') => header.clear(),
            T::Whitespace | T::LineComment | T::BlockComment => {}
            T::LBrace => {
                let block = classify(&header, stack.last());
                stack.push(block);
                header.clear();
            }
            T::RBrace => {
                stack.pop();
                header.clear();
            }
            T::Comma => header.clear(),
            _ => header.push(word.to_string()),
        }
    }
    stack
}

/// What a block is, from the words before its `{` and its parent.
fn classify(header: &[String], parent: Option<&Block>) -> Block {
    let words: Vec<&str> = header.iter().map(String::as_str).collect();
    match words.as_slice() {
        // `record` is a contextual word: a record only before a name
        // (`record: {` is a property, `record -> b` an edge).
        ["record", name] if is_name(name) => Block::Declared { in_gate: matches!(parent, Some(Block::Gate)) },
        ["node", _, ":", kind, ..] => Block::Node(kind.to_string()),
        ["gate", ..] => Block::Gate,
        ["policy", ..] => Block::Policy,
        [kind @ ("handoff" | "delegate"), ..] => Block::Transfer(kind.to_string()),
        [first, _, ":", variant, ..] if decl_kind(first).is_some() => {
            Block::Decl(decl_kind(first).expect("a kind"), Some(variant.to_string()))
        }
        [first, ..] if decl_kind(first).is_some() => Block::Decl(decl_kind(first).expect("a kind"), None),
        [.., name, ":"] => {
            let prop = parent.map(Block::props).unwrap_or_default().into_iter().find(|p| p.name == *name);
            match prop.map(|p| p.value) {
                Some(V::Record(props)) => Block::Record(props),
                Some(V::Budget) => Block::Record(spec::BUDGET_PROPS),
                _ => Block::Other,
            }
        }
        _ => Block::Other,
    }
}

/// Whether `word` is a name (not punctuation).
fn is_name(word: &str) -> bool {
    word.starts_with(|c: char| c.is_alphabetic() || c == '_') && word.chars().all(|c| c.is_alphanumeric() || c == '_')
}

/// Whether a node of `kind` may declare records: every node that completes
/// with an output (as the checker allows).
fn node_writes_records(kind: &str) -> bool {
    !matches!(kind, "end" | "parallel" | "flow")
}

/// The policy atom whose argument list is open at the end of `prefix`
/// (`never started(dr`: `started`), with the argument being written: its
/// position and whether it is the named `by:`.
fn open_atom(prefix: &str) -> Option<(&'static str, &'static [AtomArgKind], usize, bool)> {
    let mut depth = 0usize;
    let open = prefix.char_indices().rev().find_map(|(i, c)| match c {
        ')' => {
            depth += 1;
            None
        }
        '(' if depth == 0 => Some(i),
        '(' => {
            depth -= 1;
            None
        }
        _ => None,
    })?;
    let (_, name) = split_word(prefix[..open].trim_end());
    let &(atom, params, _) = spec::ATOMS.iter().find(|(a, _, _)| *a == name)?;
    let args = &prefix[open + 1..];
    let current = args.rsplit(',').next().unwrap_or("");
    let named = current.split_once(':').is_some_and(|(key, _)| key.trim() == "by");
    Some((atom, params, args.matches(',').count(), named))
}

/// The last name being typed in `prefix` (letters, digits, `_`) and what
/// comes before it.
fn split_word(prefix: &str) -> (&str, &str) {
    let start = after_last(prefix, |c| !(c.is_alphanumeric() || c == '_'));
    (&prefix[..start], &prefix[start..])
}

/// The byte index just after the last char of `text` matching `pred`
/// (0 when none does) — always a char boundary.
fn after_last(text: &str, pred: impl Fn(char) -> bool) -> usize {
    text.char_indices().rev().find(|&(_, c)| pred(c)).map_or(0, |(i, c)| i + c.len_utf8())
}

impl Analysis {
    /// What may be written at `position`, by context (see the module docs).
    pub fn completions(&self, position: Position) -> Vec<CompletionItem> {
        let text = self.source();
        let at = (self.offset_here(position) as usize).min(text.len());
        let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
        let prefix = &text[line_start..at];
        let (before, _typed) = split_word(prefix);
        let blocks = open_blocks(text, at);
        let workflow = self.enclosing_workflow(at as u32);
        if let Some(chain) = before.strip_suffix('.') {
            return self.fields_after(chain, workflow.as_deref());
        }
        let trimmed = before.trim_start();
        // `node x: KIND TARGET`: the kinds, then the target's declarations.
        let words: Vec<&str> = trimmed.split(|c: char| c.is_whitespace() || c == ':').filter(|w| !w.is_empty()).collect();
        if trimmed.starts_with("node ") && trimmed.contains(':') && !trimmed.contains('{') {
            return match words.as_slice() {
                ["node", _] => spec::NODE_KINDS.iter().map(|k| item(k.kind, CompletionItemKind::KEYWORD, Some(k.doc))).collect(),
                ["node", _, kind] => match spec::node_spec(kind).map(|s| s.target) {
                    Some(Target::Decl(kind) | Target::DeclOrNone(kind)) => self.globals_of(&[kind]),
                    Some(Target::Node | Target::Nodes) => self.nodes_of(workflow.as_deref()),
                    _ => Vec::new(),
                },
                _ => Vec::new(),
            };
        }
        if trimmed.ends_with("->") || trimmed.ends_with("-> ") || trimmed.ends_with("goto(") {
            return self.nodes_of(workflow.as_deref());
        }
        // `recorded(…`, `started(…`: the names the atom's argument takes.
        if let Some((_, params, index, named)) = open_atom(before) {
            let in_workflow = blocks.iter().any(|b| matches!(b, Block::Decl(Kind::Workflow, _)));
            let scope = if in_workflow { workflow.as_deref() } else { None };
            return match (named, params.get(index)) {
                (true, _) => self.globals_of(&[Kind::Agent]),
                (false, Some(kind)) => self.atom_args(*kind, scope),
                (false, None) => Vec::new(),
            };
        }
        let block = blocks.last();
        // `record NAME`: a new name.
        let naming_record = trimmed.split_whitespace().eq(["record"]) && trimmed.ends_with(char::is_whitespace);
        if naming_record && matches!(block, Some(Block::Node(_) | Block::Gate)) {
            return Vec::new();
        }
        // `policy NAME: …`: the formula's atoms among the names.
        if trimmed.starts_with("policy ") && trimmed.contains(':') && !trimmed.contains('{') {
            let mut items = self.everything(workflow.as_deref());
            items.extend(spec::ATOMS.iter().map(|(atom, params, doc)| CompletionItem {
                detail: Some(atom_signature(atom, params)),
                ..item(atom, CompletionItemKind::FUNCTION, Some(doc))
            }));
            return items;
        }
        // What follows the last `{` or `,` of the line: `prop: …` or a property being named.
        let local = trimmed.rsplit(['{', ',']).next().unwrap_or("").trim_start();
        // A declared record's field: an expression over the nodes.
        if let Some(Block::Declared { in_gate }) = block {
            if !local.is_empty() {
                return self.expression(workflow.as_deref(), *in_gate);
            }
        }
        // `prop: …`: the values of the property's form.
        if let Some((name, _)) = local.split_once(':') {
            let name = name.trim();
            if let Some(prop) = block.map(Block::props).unwrap_or_default().into_iter().find(|p| p.name == name) {
                return self.values_of(&prop.value, workflow.as_deref());
            }
        }
        // Where a property goes: the block's properties not yet written.
        if local.is_empty() {
            if let Some(block) = block.filter(|b| !matches!(b, Block::Other)) {
                let written = self.written_props(text, at);
                let mut items: Vec<CompletionItem> = block
                    .props()
                    .into_iter()
                    .filter(|p| !written.contains(p.name))
                    .map(|p| CompletionItem {
                        insert_text: Some(format!("{}: ", p.name)),
                        ..item(p.name, CompletionItemKind::PROPERTY, Some(p.doc))
                    })
                    .collect();
                let records = match block {
                    Block::Node(kind) => node_writes_records(kind),
                    Block::Gate => true,
                    _ => false,
                };
                if records {
                    items.push(item("record", CompletionItemKind::KEYWORD, Some(RECORD_DOC)));
                }
                if matches!(block, Block::Decl(Kind::Workflow, _)) {
                    items.extend(
                        ["node", "gate", "handoff", "delegate", "policy", "on"].map(|k| item(k, CompletionItemKind::KEYWORD, None)),
                    );
                    items.extend(self.nodes_of(workflow.as_deref()));
                }
                return items;
            }
        }
        self.everything(workflow.as_deref())
    }

    /// The workflow whose declaration precedes `at` most closely.
    fn enclosing_workflow(&self, at: u32) -> Option<String> {
        let symbols = &self.checked.symbols;
        symbols
            .defs
            .iter()
            .filter(|d| d.kind == "workflow" && d.file == self.root && d.span.start <= at)
            .max_by_key(|d| d.span.start)
            .map(|d| d.name.clone())
    }

    /// Property names already written in the innermost block around `at`.
    fn written_props(&self, text: &str, at: usize) -> HashSet<String> {
        let mut depth = 0usize;
        let mut start = 0;
        for (i, c) in text[..at].char_indices().rev() {
            match c {
                '}' => depth += 1,
                '{' if depth == 0 => {
                    start = i + 1;
                    break;
                }
                '{' => depth -= 1,
                _ => {}
            }
        }
        let end = text[at..].find('}').map_or(text.len(), |i| at + i);
        text[start..end]
            .lines()
            .filter_map(|l| l.trim_start().split_once(':').map(|(name, _)| name.trim().to_string()))
            .filter(|n| n.chars().all(|c| c.is_alphanumeric() || c == '_'))
            .collect()
    }

    /// The fields after `chain.` (`draft.`, `draft.meta.`): `chain` starts
    /// with a node of the workflow, whose output type is followed, with
    /// `input`, the workflow's input type, or with `calls` or `facts`, as
    /// the checker types them ([`runtime_type`]).
    fn fields_after(&self, chain: &str, workflow: Option<&str>) -> Vec<CompletionItem> {
        let (_, last) = split_word(chain);
        let start = chain.len() - last.len();
        // The whole dotted chain before the cursor.
        let dotted_start = after_last(&chain[..start], |c| !(c.is_alphanumeric() || c == '_' || c == '.'));
        let names: Vec<&str> = chain[dotted_start..].split('.').collect();
        let program = &self.checked.program;
        let Some(workflow) = workflow.and_then(|w| program.workflows.get(w)) else { return Vec::new() };
        let runtime;
        let mut ty = match (workflow.nodes.get(names[0]), workflow.props.get("input")) {
            (Some(node), _) => &node.output,
            // `input.`: the run's input, as the workflow declares it.
            (None, Some(flow_check::ir::Value::Type(input))) if names[0] == "input" => input,
            // `calls.`, `facts.`: what the control plane knows of the nodes.
            _ => match runtime_type(program, workflow, names[0]) {
                Some(ty) => {
                    runtime = ty;
                    &runtime
                }
                None => return Vec::new(),
            },
        };
        for field in &names[1..] {
            let Some(next) = self.record_fields(ty).and_then(|fields| fields.get(*field)) else { return Vec::new() };
            ty = &next.ty;
        }
        self.record_fields(ty)
            .map(|fields| {
                fields
                    .iter()
                    .map(|(name, f)| CompletionItem { detail: Some(f.ty.to_string()), ..item(name, CompletionItemKind::FIELD, None) })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The fields of a record type (through names and nullables).
    fn record_fields<'t>(&'t self, ty: &'t Ty) -> Option<&'t indexmap::IndexMap<String, flow_check::types::FieldTy>> {
        match ty {
            Ty::Record { fields } => Some(fields),
            Ty::Nullable { inner } => self.record_fields(inner),
            Ty::Named { name } => self.checked.program.types.get(name).and_then(|t| self.record_fields(&t.ty)),
            _ => None,
        }
    }

    /// The declarations of `kinds`.
    fn globals_of(&self, kinds: &[Kind]) -> Vec<CompletionItem> {
        let symbols = &self.checked.symbols;
        let mut seen = HashSet::new();
        symbols
            .defs
            .iter()
            .filter(|d| d.container.is_none() && kinds.iter().any(|k| k.as_str() == d.kind) && seen.insert(d.name.as_str()))
            .map(|d| CompletionItem { detail: Some(d.detail.clone()), ..item(&d.name, completion_kind(&d.kind), None) })
            .collect()
    }

    /// The nodes of `workflow`.
    fn nodes_of(&self, workflow: Option<&str>) -> Vec<CompletionItem> {
        let symbols = &self.checked.symbols;
        symbols
            .defs
            .iter()
            .filter(|d| d.kind == "node" && d.container.as_deref() == workflow && workflow.is_some())
            .map(|d| CompletionItem { detail: Some(d.detail.clone()), ..item(&d.name, CompletionItemKind::VARIABLE, None) })
            .collect()
    }

    /// What a property of form `value` may be.
    fn values_of(&self, value: &V, workflow: Option<&str>) -> Vec<CompletionItem> {
        match value {
            V::Ref(kinds) => self.globals_of(kinds),
            V::Node => self.nodes_of(workflow),
            V::Word(words) => words.iter().map(|w| item(w, CompletionItemKind::ENUM_MEMBER, None)).collect(),
            V::Bool => ["true", "false"].map(|w| item(w, CompletionItemKind::KEYWORD, None)).to_vec(),
            V::Type => {
                let mut items = self.globals_of(&[Kind::Type]);
                items.extend(PRIMITIVES.iter().map(|p| item(p, CompletionItemKind::TYPE_PARAMETER, None)));
                items
            }
            V::Budget => self.globals_of(&[Kind::Budget]),
            V::List(inner) => self.values_of(inner, workflow),
            V::OneOf(forms) => forms.iter().flat_map(|f| self.values_of(f, workflow)).collect(),
            _ => Vec::new(),
        }
    }

    /// An expression over the workflow's nodes (a declared record's field):
    /// every name, and the variables `input`, `calls`, `facts` and, in a
    /// gate, `outcome`.
    fn expression(&self, workflow: Option<&str>, in_gate: bool) -> Vec<CompletionItem> {
        let mut items = self.everything(workflow);
        let input = CompletionItem { detail: Some("the run's input".into()), ..item("input", CompletionItemKind::VARIABLE, None) };
        items.push(input);
        for (name, detail, doc) in RUNTIME_VARIABLES {
            items.push(CompletionItem { detail: Some(detail.to_string()), ..item(name, CompletionItemKind::VARIABLE, Some(doc)) });
        }
        if in_gate {
            let outcomes = spec::OUTCOMES.iter().map(|o| format!("\"{o}\"")).collect::<Vec<_>>().join(" | ");
            items.push(CompletionItem {
                detail: Some(outcomes),
                ..item("outcome", CompletionItemKind::VARIABLE, Some("The outcome the gate records."))
            });
        }
        items
    }

    /// What an atom's argument of `kind` may be: in a workflow's policy its
    /// nodes, gates and records; in a program's, every workflow's.
    fn atom_args(&self, kind: AtomArgKind, workflow: Option<&str>) -> Vec<CompletionItem> {
        let words = |words: &[&str]| words.iter().map(|w| item(w, CompletionItemKind::ENUM_MEMBER, None)).collect();
        let members = |what: &str| {
            let mut seen = HashSet::new();
            self.checked
                .symbols
                .defs
                .iter()
                .filter(|d| d.kind == what && d.container.is_some() && (workflow.is_none() || d.container.as_deref() == workflow))
                .filter(|d| seen.insert(d.name.as_str()))
                .map(|d| CompletionItem { detail: Some(d.detail.clone()), ..item(&d.name, completion_kind(&d.kind), None) })
                .collect()
        };
        match kind {
            AtomArgKind::Node => members("node"),
            AtomArgKind::Gate => members("gate"),
            AtomArgKind::Record => members("record"),
            AtomArgKind::Tool => self.globals_of(&[Kind::Tool]),
            AtomArgKind::Agent => self.globals_of(&[Kind::Agent]),
            AtomArgKind::Principal => self.globals_of(&[Kind::Principal]),
            AtomArgKind::Outcome => words(spec::OUTCOMES),
            AtomArgKind::Decision => words(spec::DECISIONS),
            AtomArgKind::Zone => words(&flow_trace::Zone::ALL.iter().map(|z| z.as_str()).collect::<Vec<_>>()),
            AtomArgKind::Reason => Vec::new(),
        }
    }

    /// Every name in scope, every keyword and every primitive type.
    fn everything(&self, workflow: Option<&str>) -> Vec<CompletionItem> {
        let symbols = &self.checked.symbols;
        let mut seen: HashSet<&str> = HashSet::new();
        let mut items = Vec::with_capacity(symbols.defs.len() + flow_syntax::lexer::KEYWORDS.len() + PRIMITIVES.len());
        for def in &symbols.defs {
            let in_scope = def.container.is_none() || def.container.as_deref() == workflow;
            if !in_scope || !seen.insert(def.name.as_str()) {
                continue;
            }
            items.push(CompletionItem { detail: Some(def.detail.clone()), ..item(&def.name, completion_kind(&def.kind), None) });
        }
        for (keyword, _) in flow_syntax::lexer::KEYWORDS {
            items.push(item(keyword, CompletionItemKind::KEYWORD, None));
        }
        for primitive in PRIMITIVES {
            if seen.insert(primitive) {
                items.push(item(primitive, CompletionItemKind::TYPE_PARAMETER, None));
            }
        }
        // The function library, each with its signature (reference §4.3).
        for (function, signature) in flow_check::functions::FUNCTIONS {
            if seen.insert(function) {
                items.push(CompletionItem { detail: Some(signature.to_string()), ..item(function, CompletionItemKind::FUNCTION, None) });
            }
        }
        items
    }
}

/// The names the control plane fills in every expression over a
/// workflow's nodes besides `input` (reference §4.5): each with a detail
/// and its documentation.
pub(crate) const RUNTIME_VARIABLES: &[(&str, &str, &str)] = &[
    (
        "calls",
        "what the nodes' tool calls returned (control plane)",
        "`calls.NODE.TOOL`: the results of NODE's calls of TOOL in its latest visit, `[{ attempt: int, output: T }]` with T the tool's declared output. Only nodes that can call tools have an entry.",
    ),
    (
        "facts",
        "what the runtime measured of each node's latest visit",
        "`facts.NODE`: `{ visit: int, digest: string?, bytes: int, tokens: int, tool_calls: int }` of NODE's latest completed visit.",
    ),
];

/// The type of the runtime name `name` (`calls`, `facts`) in `workflow`,
/// as the checker gives it: `calls` has a field per node that can call
/// tools (an agent node: its agent's `tools`; a tool node: its tool), each
/// a field per tool holding the list of its returned calls; `facts` a
/// field per node.
pub(crate) fn runtime_type(program: &flow_check::ir::Program, workflow: &flow_check::ir::Workflow, name: &str) -> Option<Ty> {
    let field = |ty: Ty| FieldTy { ty, optional: false };
    let nodes = workflow.nodes.values().filter(|n| !facts::RUNTIME_NAMES.contains(&n.name.as_str()));
    let fields: IndexMap<String, FieldTy> = match name {
        "facts" => nodes.map(|n| (n.name.clone(), field(facts::facts_type()))).collect(),
        "calls" => nodes
            .filter_map(|node| {
                let target = node.target.first()?;
                let tools = match node.kind() {
                    NodeKind::Agent => program.decls.get(target).map(|agent| agent.tools()).unwrap_or_default(),
                    NodeKind::Tool => vec![target.clone()],
                    _ => Vec::new(),
                };
                let by_tool: IndexMap<String, FieldTy> = tools
                    .into_iter()
                    .map(|tool| {
                        let output = program.decls.get(&tool).and_then(|t| t.output_type()).cloned().unwrap_or(Ty::Any);
                        (tool, field(Ty::list(facts::call_type(output))))
                    })
                    .collect();
                (!by_tool.is_empty()).then(|| (node.name.clone(), field(Ty::Record { fields: by_tool })))
            })
            .collect(),
        _ => return None,
    };
    Some(Ty::Record { fields })
}

/// The documentation of the `record` entry.
const RECORD_DOC: &str = "A declared record: `record NAME { field: expression, … }` writes a `recorded` event with these values as the node completes (a gate's: as it records its outcome, readable as `outcome`). Policies name it with `recorded(NAME)`.";

/// `recorded(record)`: an atom with the kinds of its arguments.
fn atom_signature(atom: &str, params: &[AtomArgKind]) -> String {
    let params: Vec<String> = params.iter().map(|p| format!("{p:?}").to_lowercase()).collect();
    format!("{atom}({})", params.join(", "))
}

fn item(label: &str, kind: CompletionItemKind, doc: Option<&str>) -> CompletionItem {
    CompletionItem {
        label: label.to_string(),
        kind: Some(kind),
        documentation: doc.map(|d| Documentation::MarkupContent(MarkupContent { kind: MarkupKind::Markdown, value: d.to_string() })),
        ..Default::default()
    }
}

pub(crate) fn completion_kind(kind: &str) -> CompletionItemKind {
    match kind {
        "type" => CompletionItemKind::STRUCT,
        "agent" | "principal" => CompletionItemKind::CLASS,
        "tool" | "evaluator" | "compute" => CompletionItemKind::FUNCTION,
        "provider" | "budget" | "contract" | "blackboard" | "projection" => CompletionItemKind::MODULE,
        "workflow" | "machine" => CompletionItemKind::MODULE,
        "node" | "gate" => CompletionItemKind::VARIABLE,
        "record" => CompletionItemKind::EVENT,
        "policy" => CompletionItemKind::INTERFACE,
        _ => CompletionItemKind::TEXT,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    /// The items offered where `|` is in `marked` (the marker removed).
    fn completions(marked: &str) -> Vec<CompletionItem> {
        let at = marked.find('|').expect("a cursor");
        let text = marked.replacen('|', "", 1);
        let uri = lsp_types::Uri::from_str("file:///complete.flow").expect("a URI");
        let analysis = Analysis::new(&uri, &text);
        let line = text[..at].matches('\n').count() as u32;
        let character = text[..at].rsplit('\n').next().unwrap_or("").encode_utf16().count() as u32;
        analysis.completions(Position { line, character })
    }

    /// The labels offered where `|` is in `marked` (the marker removed).
    fn offered(marked: &str) -> Vec<String> {
        completions(marked).into_iter().map(|i| i.label).collect()
    }

    const HEAD: &str = "provider p: scripted\nprovider q: scripted\nagent writer { provider: p }\nagent critic { provider: q }\ntool search: builtin { output: string }\ntype Meta = { words: int, lang: string }\ntype Draft = { title: string, meta: Meta, tags: [string] }\nbudget small { steps: 10 }\n";

    fn flow(body: &str) -> String {
        format!("{HEAD}workflow w {{\n  start: draft\n  node draft: agent writer {{ output: Draft }}\n  node done: end ok\n{body}\n}}\n")
    }

    #[test]
    fn fields_follow_a_node_and_its_record_types() {
        assert_eq!(offered(&flow("  draft -> done when draft.|")), ["title", "meta", "tags"]);
        assert_eq!(offered(&flow("  draft -> done when draft.meta.|")), ["words", "lang"]);
        assert_eq!(offered(&flow("  draft -> done when draft.meta.wo|")), ["words", "lang"], "the client filters by the typed prefix");
        assert!(offered(&flow("  draft -> done when nothing.|")).is_empty(), "no node, no fields");
    }

    #[test]
    fn a_dot_after_a_multibyte_char_offers_nothing_and_does_not_panic() {
        // Found by the fuzzer: a byte-order mark before the dot.
        assert!(offered("  node a: \u{feff}.|x\n").is_empty());
        assert!(offered(&flow("  draft -> done when é.|")).is_empty());
        assert_eq!(offered(&flow("  draft -> done when é draft.|")), ["title", "meta", "tags"]);
    }

    #[test]
    fn a_block_offers_its_properties_not_yet_written() {
        let in_agent = offered(&format!("{HEAD}agent third {{\n  provider: p\n  |\n}}\n"));
        assert!(in_agent.contains(&"tools".to_string()) && in_agent.contains(&"budget".to_string()), "{in_agent:?}");
        assert!(!in_agent.contains(&"provider".to_string()), "already written: {in_agent:?}");
        assert!(!in_agent.contains(&"writer".to_string()), "no names where a property goes: {in_agent:?}");
        let in_node = offered(&flow("  node other: agent critic {\n    |\n  }"));
        assert!(in_node.contains(&"output".to_string()) && in_node.contains(&"retry".to_string()), "{in_node:?}");
        let in_retry = offered(&flow("  node other: agent critic {\n    output: string\n    retry: {\n      |\n    }\n  }"));
        assert_eq!(in_retry, ["attempts", "backoff", "max_backoff"], "a record property's own keys");
        let in_workflow = offered(&flow("  |"));
        assert!(in_workflow.contains(&"node".to_string()) && in_workflow.contains(&"deadline".to_string()), "{in_workflow:?}");
        assert!(!in_workflow.contains(&"start".to_string()), "already written: {in_workflow:?}");
    }

    #[test]
    fn an_expression_offers_the_function_library() {
        let guard = offered(&flow("  draft -> done when |"));
        for function in ["filter", "jaccard", "tokens", "len"] {
            assert!(guard.contains(&function.to_string()), "no `{function}` in {guard:?}");
        }
        assert!(guard.contains(&"draft".to_string()), "the workflow's nodes too: {guard:?}");
    }

    /// The workflow with a record in a node and one in a gate.
    fn with_records(node_record: &str, gate_record: &str, rest: &str) -> String {
        flow(&format!(
            "  node scored: agent critic {{\n    output: string\n    record {node_record}\n  }}\n  gate g: draft -> done {{\n    evaluate: [predicate(true)]\n    on PASS -> continue\n    on BLOCK -> goto(done)\n    on REQUIRES_DECISION -> goto(done)\n    record {gate_record}\n  }}\n{rest}"
        ))
    }

    #[test]
    fn record_is_offered_where_a_node_or_a_gate_takes_an_entry() {
        let in_node = offered(&flow("  node other: agent critic {\n    output: string\n    |\n  }"));
        assert!(in_node.contains(&"record".to_string()), "{in_node:?}");
        let in_gate = offered(&flow("  gate g: draft -> done {\n    evaluate: [predicate(true)]\n    |\n  }"));
        assert!(in_gate.contains(&"record".to_string()) && in_gate.contains(&"on_error".to_string()), "{in_gate:?}");
        let in_end = offered(&flow("  node fin: end ok {\n    |\n  }"));
        assert!(!in_end.contains(&"record".to_string()), "an end node writes no records: {in_end:?}");
        let in_workflow = offered(&flow("  |"));
        assert!(!in_workflow.contains(&"record".to_string()), "records belong to nodes and gates: {in_workflow:?}");
        let in_agent = offered(&format!("{HEAD}agent third {{\n  provider: p\n  |\n}}\n"));
        assert!(!in_agent.contains(&"record".to_string()), "{in_agent:?}");
        assert!(offered(&flow("  node other: agent critic {\n    output: string\n    record |\n  }")).is_empty(), "a new name");
    }

    #[test]
    fn a_record_field_is_an_expression_over_the_nodes() {
        let in_node = offered(&with_records("r { n: |len(draft.tags) }", "q { o: outcome }", ""));
        for name in ["draft", "done", "input", "len", "filter"] {
            assert!(in_node.contains(&name.to_string()), "no `{name}` in {in_node:?}");
        }
        assert!(!in_node.contains(&"outcome".to_string()), "`outcome` is a gate's: {in_node:?}");
        let in_gate = offered(&with_records("r { n: 1 }", "q { o: |outcome, s: len(draft.tags) }", ""));
        for name in ["draft", "input", "outcome", "len"] {
            assert!(in_gate.contains(&name.to_string()), "no `{name}` in {in_gate:?}");
        }
        let later = offered(&with_records("r { n: 1, m: |1 }", "q { o: outcome }", ""));
        assert!(later.contains(&"input".to_string()), "a second field: {later:?}");
        let multiline = offered(&with_records("r {\n      n: 1\n      m: |\n    }", "q { o: outcome }", ""));
        assert!(multiline.contains(&"input".to_string()), "a field on its own line: {multiline:?}");
        let field_name = offered(&with_records("r {\n      n: 1\n      |\n    }", "q { o: outcome }", ""));
        assert!(field_name.is_empty(), "a field's name is free: {field_name:?}");
        assert_eq!(offered(&with_records("r { n: draft.| }", "q { o: outcome }", "")), ["title", "meta", "tags"]);
    }

    #[test]
    fn input_offers_the_fields_of_the_workflows_input() {
        let text = format!("{HEAD}workflow w {{\n  input: Meta\n  start: draft\n  node draft: agent writer {{\n    output: Draft\n    record r {{ lang: input.| }}\n  }}\n}}\n");
        assert_eq!(offered(&text), ["words", "lang"]);
        assert!(offered(&flow("  draft -> done when input.|")).is_empty(), "no declared input, no fields");
    }

    /// A workflow whose nodes can call tools: an agent node (its agent's
    /// tools) and a tool node.
    fn with_tools(body: &str) -> String {
        format!(
            "{HEAD}tool fetch: builtin {{ output: Meta }}\nagent researcher {{ provider: p\n  tools: [search, fetch] }}\nworkflow w {{\n  start: research\n  node research: agent researcher {{ output: Draft }}\n  node lookup: tool fetch\n  node done: end ok\n  research -> lookup\n  lookup -> done\n{body}\n}}\n"
        )
    }

    #[test]
    fn an_expression_offers_calls_and_facts() {
        let uri = lsp_types::Uri::from_str("file:///complete.flow").expect("a URI");
        let without = Analysis::new(&uri, &with_tools("")).diagnostics;
        let with = Analysis::new(&uri, &with_tools("  research -> done when len(calls.research.search) > 0 and facts.lookup.tokens < 10"));
        assert_eq!(with.diagnostics, without, "the checker knows both names");
        let items = completions(&with_tools("  gate g: research -> lookup {\n    evaluate: [predicate(true)]\n    on PASS -> continue\n    on BLOCK -> goto(done)\n    on REQUIRES_DECISION -> goto(done)\n    record q { n: | }\n  }"));
        for (name, detail) in [
            ("calls", "what the nodes' tool calls returned (control plane)"),
            ("facts", "what the runtime measured of each node's latest visit"),
        ] {
            let found = items.iter().find(|i| i.label == name).unwrap_or_else(|| panic!("no `{name}`"));
            assert_eq!(found.detail.as_deref(), Some(detail));
            assert_eq!(found.kind, Some(CompletionItemKind::VARIABLE));
        }
        let in_node = offered(&with_records("r { n: | }", "q { o: outcome }", ""));
        assert!(in_node.contains(&"calls".to_string()) && in_node.contains(&"facts".to_string()), "{in_node:?}");
    }

    #[test]
    fn calls_offers_the_nodes_that_call_tools_and_their_tools() {
        assert_eq!(offered(&with_tools("  research -> done when calls.|")), ["research", "lookup"]);
        assert_eq!(offered(&with_tools("  research -> done when calls.research.|")), ["search", "fetch"]);
        assert_eq!(offered(&with_tools("  research -> done when calls.lookup.|")), ["fetch"]);
        assert!(offered(&with_tools("  research -> done when calls.done.|")).is_empty(), "an end node calls no tool");
        assert!(offered(&flow("  draft -> done when calls.|")).is_empty(), "an agent without tools calls none");
        let record =
            offered(&with_tools("  node r2: agent researcher {\n    output: string\n    record r { n: len(calls.research.|) }\n  }"));
        assert_eq!(record, ["search", "fetch"]);
    }

    #[test]
    fn calls_are_typed_by_the_tools_declared_outputs() {
        let details: Vec<Option<String>> =
            completions(&with_tools("  research -> done when calls.research.|")).into_iter().map(|i| i.detail).collect();
        assert_eq!(details, [Some("[{ attempt: int, output: string }]".to_string()), Some("[{ attempt: int, output: Meta }]".to_string())]);
    }

    #[test]
    fn facts_offers_every_node_and_its_measures() {
        assert_eq!(offered(&with_tools("  research -> done when facts.|")), ["research", "lookup", "done"]);
        assert_eq!(offered(&with_tools("  research -> done when facts.done.|")), ["visit", "digest", "bytes", "tokens", "tool_calls"]);
        assert_eq!(offered(&flow("  draft -> done when facts.draft.|")), ["visit", "digest", "bytes", "tokens", "tool_calls"]);
        assert!(offered(&flow("  draft -> done when facts.nothing.|")).is_empty(), "no node, no facts");
    }

    #[test]
    fn a_policy_offers_the_atoms_and_recorded_its_records() {
        let atoms = offered(&with_records("r { n: 1 }", "q { o: outcome }", "  policy p: never |"));
        for atom in ["started", "completed", "outcome", "recorded"] {
            assert!(atoms.contains(&atom.to_string()), "no `{atom}` in {atoms:?}");
        }
        assert!(atoms.contains(&"never".to_string()) && atoms.contains(&"draft".to_string()), "{atoms:?}");
        let guard = offered(&flow("  draft -> done when |"));
        assert!(!guard.contains(&"recorded".to_string()), "atoms are a policy's: {guard:?}");
        let in_workflow = offered(&with_records("r { n: 1 }", "q { o: outcome }", "  policy p: never started(done) before recorded(|)"));
        assert_eq!(in_workflow, ["r", "q"]);
        let top_level =
            format!("{}policy t: never completed(done) before recorded(|)\n", with_records("r { n: 1 }", "q { o: outcome }", ""));
        assert_eq!(offered(&top_level), ["r", "q"]);
        let nodes = offered(&with_records("r { n: 1 }", "q { o: outcome }", "  policy p: never started(|)"));
        assert_eq!(nodes, ["draft", "done", "scored"]);
        let outcomes = offered(&with_records("r { n: 1 }", "q { o: outcome }", "  policy p: never outcome(g, |)"));
        assert_eq!(outcomes, ["PASS", "REQUIRES_DECISION", "BLOCK"]);
        let by = offered(&with_records("r { n: 1 }", "q { o: outcome }", "  policy p: never called(search, by: |)"));
        assert_eq!(by, ["writer", "critic"]);
    }

    #[test]
    fn a_reference_offers_the_names_of_its_kind() {
        let providers = offered(&format!("{HEAD}agent third {{\n  provider: |\n}}\n"));
        assert_eq!(providers, ["p", "q"]);
        assert_eq!(offered(&flow("  node other: agent |")), ["writer", "critic"]);
        assert_eq!(offered(&flow("  node other: tool |")), ["search"]);
        let kinds = offered(&flow("  node other: |"));
        assert!(kinds.contains(&"agent".to_string()) && kinds.contains(&"parallel".to_string()), "{kinds:?}");
        assert_eq!(offered(&flow("  draft -> |")), ["draft", "done"]);
        let types = offered(&flow("  node other: agent critic { output: | }"));
        assert!(types.contains(&"Draft".to_string()) && types.contains(&"string".to_string()), "{types:?}");
        let budgets = offered(&flow("  node other: agent critic {\n    output: string\n    budget: |\n  }"));
        assert_eq!(budgets, ["small"]);
    }
}
