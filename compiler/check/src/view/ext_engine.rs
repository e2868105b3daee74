//! Typed readers the engine needs beyond the shared ones (to be merged into
//! `decl.rs` / `flow.rs`).

use super::{int, record, EvaluatorRef, Props};
use crate::ir::{Decl, Gate, Node, Program, Transfer, Value, Workflow};
use flow_trace::ContextMode;
use indexmap::IndexMap;

impl Workflow {
    /// The run budget's properties whole (inline, or the named budget's),
    /// for a reader that takes them as written (the runtime's budget scopes).
    pub fn budget_props<'p>(&'p self, program: &'p Program) -> Option<&'p IndexMap<String, Value>> {
        crate::lookup::budget_props(program, self.prop("budget"))
    }
}

impl Decl {
    /// The budget's properties whole (agent, contract), as
    /// [`Workflow::budget_props`].
    pub fn budget_props<'p>(&'p self, program: &'p Program) -> Option<&'p IndexMap<String, Value>> {
        crate::lookup::budget_props(program, self.prop("budget"))
    }
}

impl Node {
    /// The node budget's properties whole, as [`Workflow::budget_props`].
    pub fn budget_props<'p>(&'p self, program: &'p Program) -> Option<&'p IndexMap<String, Value>> {
        crate::lookup::budget_props(program, self.prop("budget"))
    }

    /// Attempts per visit, the first included: the retry policy's (at
    /// least 1), or 1 without one.
    pub fn attempts(&self) -> u64 {
        record(self.prop("retry")).map_or(1, |r| int(r.get("attempts")).unwrap_or(1).max(1))
    }

    /// Rounds a loop runs at most (1 when undeclared).
    pub fn rounds(&self) -> u64 {
        self.max_rounds().unwrap_or(1)
    }

    /// What an agent node's `agent` sees: the node's override, else the
    /// agent's context, else isolated.
    pub fn agent_context(&self, agent: &Decl) -> ContextMode {
        self.context().or_else(|| agent.context()).unwrap_or(ContextMode::Isolated)
    }

    /// The decisions a human node offers (default approve and reject).
    pub fn offered_decisions(&self) -> Vec<String> {
        self.decisions().unwrap_or_else(|| vec!["approve".into(), "reject".into()])
    }
}

impl Gate {
    /// Every item the gate's `evaluate` lists, in order: `None` for one that
    /// is not an evaluator (never in a checked plan), so a reader can fail
    /// closed on it.
    pub fn evaluator_items(&self) -> Vec<Option<EvaluatorRef<'_>>> {
        match self.prop("evaluate") {
            Some(Value::List(items)) => items
                .iter()
                .map(|v| match v {
                    Value::Evaluator { name, builtin, args } => Some(EvaluatorRef { name, builtin: *builtin, args }),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The decisions allowed (default all four, [`crate::spec::DECISIONS`]).
    pub fn allowed_decisions(&self) -> Vec<String> {
        self.decisions().unwrap_or_else(|| crate::spec::DECISIONS.iter().map(|d| d.to_string()).collect())
    }
}

impl Transfer {
    /// A handoff's context mode: as declared, else the spec's default
    /// (isolated).
    pub fn handoff_context(&self) -> ContextMode {
        self.context()
            .or_else(|| crate::spec::HANDOFF_BLOCK.default_word("context").and_then(ContextMode::parse))
            .unwrap_or(ContextMode::Isolated)
    }
}
