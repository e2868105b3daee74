//! Projections (reference §5.10): what their expressions see of a run, and
//! the form of their value.

use crate::check::{Checker, WorkflowCtx};
use crate::ir;
use crate::types::{FieldTy, Ty};
use flow_diagnostics::{codes, DiagnosticMut};
use flow_syntax::ast::{self, ExprKind};
use indexmap::IndexMap;

fn record(fields: &[(&str, Ty, bool)]) -> Ty {
    Ty::Record { fields: fields.iter().map(|(n, t, optional)| (n.to_string(), FieldTy { ty: t.clone(), optional: *optional })).collect() }
}

fn words(values: &[&str]) -> Ty {
    Ty::Enum { values: values.iter().map(|v| v.to_string()).collect() }
}

/// One completed visit of a node, in run order: `steps`.
pub fn step_type() -> Ty {
    record(&[
        ("seq", Ty::Int, false),
        ("node", Ty::String, false),
        ("visit", Ty::Int, false),
        ("status", Ty::String, false),
        ("output", Ty::Any, false),
    ])
}

/// One recorded gate outcome, in run order: `gates`.
pub fn gate_type() -> Ty {
    record(&[
        ("seq", Ty::Int, false),
        ("gate", Ty::String, false),
        ("outcome", words(&["PASS", "BLOCK", "REQUIRES_DECISION"]), false),
        ("reason", Ty::nullable(Ty::String), false),
    ])
}

/// The run itself: `run`.
pub fn run_type() -> Ty {
    record(&[
        ("id", Ty::String, false),
        ("workflow", Ty::String, false),
        ("state", words(&["running", "paused", "terminated"]), false),
        ("status", Ty::nullable(Ty::String), false),
        ("reason", Ty::nullable(Ty::String), false),
        ("events", Ty::Int, false),
    ])
}

impl Checker<'_> {
    /// The workflow a projection's block names, if it was checked.
    pub(crate) fn projected_workflow(&mut self, body: &ast::Block) -> Option<WorkflowCtx> {
        let named = Self::block_prop(Some(body), "workflow")?;
        let ExprKind::Name(name) = &named.kind else { return None };
        // A projection reads the run's events: `calls` and `facts` are not
        // among its names.
        self.workflows_seen.get(name.as_str()).cloned().map(|ctx| WorkflowCtx { calls: None, facts: None, ..ctx })
    }

    /// `visits` (each node's outputs, one per completed visit), `steps`,
    /// `gates` and `run`, typed from the projected workflow.
    pub(crate) fn projection_vars(&self) -> IndexMap<String, Ty> {
        let visits = match &self.workflow {
            Some(ctx) => Ty::Record {
                fields: ctx
                    .nodes
                    .iter()
                    .map(|(name, (_, ty, _))| (name.clone(), FieldTy { ty: Ty::list(ty.clone()), optional: false }))
                    .collect(),
            },
            None => Ty::Any,
        };
        let mut vars = IndexMap::new();
        vars.insert("visits".to_string(), visits);
        vars.insert("steps".to_string(), Ty::list(step_type()));
        vars.insert("gates".to_string(), Ty::list(gate_type()));
        vars.insert("run".to_string(), run_type());
        vars
    }

    /// A Markdown projection's value is a string.
    pub(crate) fn check_projection_value(&mut self, props: &ir::NameMap<ir::Value>, body: &ast::Block) {
        let markdown = !matches!(props.get("format"), Some(ir::Value::Word(w)) if w == "json");
        let Some(ir::Value::Expr(value)) = props.get("value") else { return };
        if !markdown || self.assignable(&value.ty, &Ty::String) {
            return;
        }
        let Some(at) = Self::block_prop(Some(body), "value") else { return };
        self.error(codes::TYPE_MISMATCH, at.span, format!("a Markdown projection's value is a string, but this is {}", value.ty))
            .with_primary_message(format!("this is {}", value.ty))
            .with_help("build the text with `+` and `join(…)`, or write `format: json` to render any value as JSON");
    }
}
