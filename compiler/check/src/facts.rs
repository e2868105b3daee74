//! What the control plane knows of a node that no agent can forge
//! (reference §4.5): `calls.NODE.TOOL`, the results its tool calls
//! returned in its latest visit, and `facts.NODE`, what the runtime
//! measured of its latest completed visit. Both are names in every
//! expression over the workflow's nodes, typed here from the plan: a node
//! that may call no tool has no `calls` entry, and a tool's results have
//! its declared output type.

use crate::check::{Checker, WorkflowCtx};
use crate::types::{FieldTy, Ty};
use flow_diagnostics::{codes, DiagnosticMut};
use flow_syntax::ast::{self, Entry, ExprKind, NodeTarget};
use indexmap::IndexMap;

/// The names the control plane fills in, which no node may take.
pub const RUNTIME_NAMES: &[&str] = &["calls", "facts", "input"];

/// One returned call: the attempt it was made in (1, 2, …) and its output.
pub fn call_type(output: Ty) -> Ty {
    record(vec![("attempt", Ty::Int), ("output", output)])
}

/// `facts.NODE`: the node's latest completed visit — its number, the
/// digest and size of its output artifact (`digest` null without one), the
/// tokens its agent turns used and the tool calls that completed in it. No
/// wall-clock time: a resumed run replays its decisions, and a time read
/// again is another time.
pub fn facts_type() -> Ty {
    record(vec![
        ("visit", Ty::Int),
        ("digest", Ty::Nullable { inner: Box::new(Ty::String) }),
        ("bytes", Ty::Int),
        ("tokens", Ty::Int),
        ("tool_calls", Ty::Int),
    ])
}

fn record(fields: Vec<(&str, Ty)>) -> Ty {
    Ty::Record { fields: fields.into_iter().map(|(n, ty)| (n.to_string(), FieldTy { ty, optional: false })).collect() }
}

impl Checker<'_> {
    /// The types of `calls` and `facts` in the workflow `body` (whose nodes
    /// `ctx` lists), and an error for a node that takes a runtime name.
    pub(crate) fn runtime_names(&mut self, body: &ast::Block, ctx: &mut WorkflowCtx) {
        let mut calls: IndexMap<String, FieldTy> = IndexMap::new();
        let mut facts: IndexMap<String, FieldTy> = IndexMap::new();
        for entry in &body.entries {
            let Entry::Node(node) = entry else { continue };
            let name = &node.name.text;
            if RUNTIME_NAMES.contains(&name.as_str()) {
                self.error(codes::DUPLICATE_DECLARATION, node.name.span, format!("a node may not be named `{name}`"))
                    .with_note(format!("`{name}` is a name the control plane fills in expressions (reference §4.5)"));
                continue;
            }
            facts.insert(name.clone(), FieldTy { ty: facts_type(), optional: false });
            let tools = match (node.kind.text.as_str(), &node.target) {
                ("agent", NodeTarget::Name(agent)) => self.decl_prop_names(&agent.text, "tools"),
                ("tool", NodeTarget::Name(tool)) => vec![tool.text.clone()],
                _ => Vec::new(),
            };
            if tools.is_empty() {
                continue;
            }
            let mut by_tool = IndexMap::new();
            for tool in tools {
                let output = self.decl_prop_type(&tool, "output").unwrap_or(Ty::Any);
                by_tool.insert(tool, FieldTy { ty: Ty::list(call_type(output)), optional: false });
            }
            calls.insert(name.clone(), FieldTy { ty: Ty::Record { fields: by_tool }, optional: false });
        }
        ctx.calls = Some(Ty::Record { fields: calls });
        ctx.facts = Some(Ty::Record { fields: facts });
    }

    /// The names a declaration's list property holds (`tools: [a, b]`).
    fn decl_prop_names(&self, name: &str, key: &str) -> Vec<String> {
        let Some(global) = self.globals.get(name) else { return Vec::new() };
        let ast = &self.files[global.item.0].ast;
        let ast::Item::Decl(decl) = &ast.items[global.item.1] else { return Vec::new() };
        let value = decl.body.as_ref().and_then(|b| {
            b.entries.iter().find_map(|e| match e {
                Entry::Property(p) if p.key.text == key => Some(&p.value),
                _ => None,
            })
        });
        match value.map(|v| &v.kind) {
            Some(ExprKind::List(items)) => items
                .iter()
                .filter_map(|i| match &i.kind {
                    ExprKind::Name(n) => Some(n.clone()),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        }
    }
}
