//! Structural types across edges and handoffs: does what one node produces
//! satisfy what the next one requires?

use crate::flowgraph::{loc_span, EdgeKind, FlowGraph};
use flow_check::ir::Program;
use flow_check::ir::{NodeKind, TransferKind};
use flow_check::types::Ty;
use flow_diagnostics::{codes, Diagnostic, Label};
use petgraph::visit::EdgeRef;

/// Named-type expansion over a program's type table.
#[derive(Debug)]
pub struct Types<'p> {
    program: &'p Program,
}

/// Where and why a producer's type fails a consumer's.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    /// The field path, `$` for the value itself (`$.sections[].name`).
    pub path: String,
    pub have: Option<Ty>,
    pub want: Ty,
}

impl Mismatch {
    pub fn describe(&self) -> String {
        match &self.have {
            None => format!("`{}` is required ({}) but not produced", self.path, self.want),
            Some(have) => format!("`{}` is {have} where {} is required", self.path, self.want),
        }
    }
}

impl<'p> Types<'p> {
    pub fn new(program: &'p Program) -> Types<'p> {
        Types { program }
    }

    /// The program whose types these are.
    pub fn program(&self) -> &'p Program {
        self.program
    }

    pub fn expand(&self, ty: &Ty) -> Ty {
        let mut current = ty.clone();
        for _ in 0..32 {
            match &current {
                Ty::Named { name } => match self.program.types.get(name) {
                    Some(def) => current = def.ty.clone(),
                    None => return Ty::Any,
                },
                Ty::Nullable { inner } if matches!(**inner, Ty::Named { .. }) => current = Ty::nullable(self.expand(inner)),
                _ => return current,
            }
        }
        Ty::Any
    }

    /// The first place where a value of type `have` fails type `want`
    /// (structural subsumption: required fields present, field types
    /// compatible, list items, enum values, nullability).
    pub fn mismatch(&self, have: &Ty, want: &Ty, path: &str, depth: usize) -> Option<Mismatch> {
        if depth > 24 {
            return None;
        }
        let (have_x, want_x) = (self.expand(have), self.expand(want));
        let fail = || Some(Mismatch { path: path.to_string(), have: Some(have.clone()), want: want.clone() });
        match (&have_x, &want_x) {
            (Ty::Any, _) | (_, Ty::Any) => None,
            (Ty::Null, Ty::Nullable { .. }) => None,
            (Ty::Nullable { inner: h }, Ty::Nullable { inner: w }) => self.mismatch(h, w, path, depth + 1),
            (Ty::Nullable { .. }, _) => fail(),
            (h, Ty::Nullable { inner }) => self.mismatch(&h.clone(), inner, path, depth + 1),
            (Ty::Int, Ty::Float) => None,
            (Ty::Enum { .. }, Ty::String) => None,
            (Ty::Enum { values: h }, Ty::Enum { values: w }) => {
                if h.iter().all(|v| w.contains(v)) {
                    None
                } else {
                    fail()
                }
            }
            (Ty::List { item: h }, Ty::List { item: w }) => self.mismatch(h, w, &format!("{path}[]"), depth + 1),
            (Ty::Record { fields: h }, Ty::Record { fields: w }) => {
                for (name, field) in w {
                    let sub = format!("{path}.{name}");
                    match h.get(name) {
                        Some(have_field) => {
                            if have_field.optional && !field.optional && !matches!(self.expand(&field.ty), Ty::Nullable { .. } | Ty::Any) {
                                return Some(Mismatch {
                                    path: sub,
                                    have: Some(Ty::nullable(have_field.ty.clone())),
                                    want: field.ty.clone(),
                                });
                            }
                            if let Some(m) = self.mismatch(&have_field.ty, &field.ty, &sub, depth + 1) {
                                return Some(m);
                            }
                        }
                        None if field.optional => {}
                        None => return Some(Mismatch { path: sub, have: None, want: field.ty.clone() }),
                    }
                }
                None
            }
            (h, w) if h == w => None,
            _ => fail(),
        }
    }
}

/// E0601 (edges) and E0602 (handoffs).
pub fn check_contracts(flow: &FlowGraph<'_>, types: &Types<'_>, out: &mut Vec<Diagnostic>) {
    let workflow = flow.workflow;
    for edge in flow.graph.edge_references() {
        if !matches!(edge.weight(), EdgeKind::Written(_) | EdgeKind::Fanout) {
            continue;
        }
        let from = flow.node(edge.source());
        let to = flow.node(edge.target());
        let Some(want) = input_type(to, types.program) else { continue };
        if matches!(from.kind(), NodeKind::End | NodeKind::Parallel | NodeKind::Loop | NodeKind::Map) {
            continue;
        }
        if let Some(m) = types.mismatch(&from.output, &want, "$", 0) {
            let (file, span) = match edge.weight() {
                EdgeKind::Written(i) => loc_span(workflow.edges[*i].loc),
                _ => loc_span(to.loc),
            };
            let (from_file, from_span) = loc_span(from.loc);
            let (to_file, to_span) = loc_span(to.loc);
            out.push(
                Diagnostic::new(
                    codes::EDGE_TYPE_MISMATCH,
                    file,
                    span,
                    format!("`{}`'s output does not satisfy `{}`'s input: {}", from.name, to.name, m.describe()),
                )
                .with_primary_message("on this edge")
                .with_label(Label::secondary(from_file, from_span, format!("`{}` produces {}", from.name, from.output)))
                .with_label(Label::secondary(
                    to_file,
                    to_span,
                    format!("`{}` requires {want} (at `{}`: {})", to.name, m.path, m.want),
                )),
            );
        }
    }
    for transfer in workflow.transfers.iter().filter(|t| t.kind() == TransferKind::Handoff) {
        let Some(payload) = transfer.payload_type() else { continue };
        let (Some(from), Some(to)) = (workflow.nodes.get(&transfer.from), workflow.nodes.get(&transfer.to)) else { continue };
        let (file, span) = loc_span(transfer.loc);
        if let Some(m) = types.mismatch(&from.output, payload, "$", 0) {
            let (f, s) = loc_span(from.loc);
            out.push(
                Diagnostic::new(
                    codes::HANDOFF_TYPE_MISMATCH,
                    file,
                    span,
                    format!("`{}`'s output does not fit the handoff payload: {}", from.name, m.describe()),
                )
                .with_label(Label::secondary(f, s, format!("`{}` produces {}", from.name, from.output))),
            );
        }
        if let Some(want) = to.input_type() {
            if let Some(m) = types.mismatch(payload, want, "$", 0) {
                let (f, s) = loc_span(to.loc);
                out.push(
                    Diagnostic::new(
                        codes::HANDOFF_TYPE_MISMATCH,
                        file,
                        span,
                        format!("the handoff payload does not satisfy `{}`'s input: {}", to.name, m.describe()),
                    )
                    .with_label(Label::secondary(f, s, format!("`{}` requires {want}", to.name))),
                );
            }
        }
    }
}

/// The input type a node requires from its predecessor: its declared
/// `input`, or for a tool node without `args`, the tool's input.
fn input_type(node: &flow_check::ir::Node, program: &Program) -> Option<Ty> {
    if let Some(ty) = node.input_type() {
        return Some(ty.clone());
    }
    if node.kind() == NodeKind::Tool && node.args().is_none() {
        let tool = program.decls.get(node.target.first()?)?;
        return tool.input_type().cloned();
    }
    None
}
