//! Typed views of a resolved plan: the one place that reads properties.
//!
//! Nodes and transfers store their properties typed, per kind
//! ([`crate::node`], [`crate::transfer`]); their methods here are
//! accessors over those payloads. Declarations, gates, workflows and
//! policies keep their properties as a checked `NameMap` (the plan's wire
//! form), and every reader of a plan — the verifier, the model checker,
//! the engine, trace check — reads them through the methods here, which
//! return typed values (`Option<u64>`, `Outcome`, [`Budget`], …) and apply
//! each documented fallback in exactly one place. Outside this crate no
//! code looks a property up by its name: `rg 'props\.get\('
//! compiler/verify interpreter` is empty, and `tests/tests/architecture.rs`
//! keeps it so.
//!
//! Defaults that the spec declares (`def(…)` in [`crate::spec`]) are filled
//! in at lowering, so a view of a lowered plan never falls back for them;
//! the fallbacks written here serve IR built by hand (tests, tools) and say
//! the same thing.

mod budget;
mod decl;
mod declared;
mod flow;
mod resolved;

pub use crate::node::Retry;
pub use budget::{Budget, Reserve, ZoneSpec, MEASURES};
pub use decl::{Audit, Rate, Route};
pub use flow::{EvaluatorRef, Trigger};

use crate::ir::{Action, TExpr, Value};
use crate::types::Ty;

/// The properties of one block, read by name: private to the views.
pub(crate) trait Props {
    fn props(&self) -> &crate::ir::NameMap<Value>;

    fn prop(&self, key: &str) -> Option<&Value> {
        self.props().get(key)
    }
}

macro_rules! props_of {
    ($($ty:ty),*) => {
        $(impl Props for $ty {
            fn props(&self) -> &crate::ir::NameMap<Value> {
                &self.props
            }
        })*
    };
}
props_of!(crate::ir::Decl, crate::ir::Gate, crate::ir::Workflow, crate::ir::Policy);

impl Props for crate::ir::NameMap<Value> {
    fn props(&self) -> &crate::ir::NameMap<Value> {
        self
    }
}

/// A single-word value: a word, a string, a node or a reference's name.
pub(crate) fn word(value: Option<&Value>) -> Option<&str> {
    crate::lookup::word(value)
}

/// A whole number (never negative in a checked plan).
pub(crate) fn int(value: Option<&Value>) -> Option<u64> {
    crate::lookup::int(value)
}

/// The names a value lists (a single name is a list of one).
pub(crate) fn names(value: Option<&Value>) -> Vec<String> {
    crate::lookup::names(value)
}

/// A duration, in milliseconds.
pub(crate) fn duration(value: Option<&Value>) -> Option<u64> {
    match value? {
        Value::Duration(ms) => Some(*ms),
        _ => None,
    }
}

/// An amount of money (dollars).
pub(crate) fn money(value: Option<&Value>) -> Option<f64> {
    match value? {
        Value::Money(m) | Value::Float(m) => Some(*m),
        Value::Int(i) => Some(*i as f64),
        _ => None,
    }
}

/// A share in 0..=1.
pub(crate) fn fraction(value: Option<&Value>) -> Option<f64> {
    match value? {
        Value::Fraction(f) | Value::Float(f) => Some(*f),
        Value::Int(i) => Some(*i as f64),
        _ => None,
    }
}

/// A type.
pub(crate) fn ty(value: Option<&Value>) -> Option<&Ty> {
    match value? {
        Value::Type(t) => Some(t),
        _ => None,
    }
}

/// An expression.
pub(crate) fn expr(value: Option<&Value>) -> Option<&TExpr> {
    match value? {
        Value::Expr(e) => Some(e),
        _ => None,
    }
}

/// The expressions a list of predicates holds.
pub(crate) fn exprs(value: Option<&Value>) -> Vec<&TExpr> {
    match value {
        Some(Value::List(items)) => items.iter().filter_map(|v| expr(Some(v))).collect(),
        Some(Value::Expr(e)) => vec![e],
        _ => Vec::new(),
    }
}

/// A record.
pub(crate) fn record(value: Option<&Value>) -> Option<&crate::ir::NameMap<Value>> {
    match value? {
        Value::Record(r) => Some(r),
        _ => None,
    }
}

/// One action, or a list of actions taken in order.
pub(crate) fn actions(value: Option<&Value>) -> Vec<&Action> {
    match value {
        Some(Value::Action(a)) => vec![a],
        Some(Value::List(items)) => items.iter().filter_map(|v| if let Value::Action(a) = v { Some(a) } else { None }).collect(),
        _ => Vec::new(),
    }
}

/// A boolean.
pub(crate) fn flag(value: Option<&Value>) -> Option<bool> {
    match value? {
        Value::Bool(b) => Some(*b),
        _ => None,
    }
}

use flow_trace::closed_word;
pub use flow_trace::PolicyResponse;

closed_word!(
    /// A tool's risk level (reference §5.4).
    pub Risk {
        Low = "low": "Low risk.",
        Medium = "medium": "Medium risk.",
        High = "high": "High risk: a human must come before every call (E0705).",
        Critical = "critical": "Critical risk: a human must come before every call (E0705).",
    }
);
closed_word!(
    /// A tool's side effects (reference §5.4).
    pub Effect {
        None = "none": "No side effects: a call may be repeated freely.",
        Idempotent = "idempotent": "Repeating a call with the same idempotency key has the effect of one call.",
        NonIdempotent = "non_idempotent": "Every call has an effect: an unknown outcome needs reconciliation.",
    }
);
closed_word!(
    /// Where data sent to a tool ends up (reference §5.4).
    pub Sink {
        Public = "public": "Data sent to it becomes public: private-labelled data must not reach it (E0706).",
        Internal = "internal": "Data sent to it stays internal.",
        Private = "private": "Data sent to it stays private.",
    }
);
closed_word!(
    /// What happens when a node's attempts are exhausted (reference §6.3).
    pub OnFailure {
        Retry = "retry": "Attempt again under the node's retry policy.",
        Degrade = "degrade": "Complete the visit as degraded with an empty output.",
        Skip = "skip": "Complete the visit as skipped with an empty output.",
        Terminate = "terminate": "End the run as a failure.",
    }
);
closed_word!(
    /// How a command evaluator's probe is read (reference §5.5).
    pub Expect {
        ExitZero = "exit_zero": "The probe passes when the command exits 0.",
        Json = "json": "The command prints a JSON verdict.",
    }
);
closed_word!(
    /// What a join does with conflicting results (reference §6.1).
    pub Conflicts {
        Keep = "keep": "Keep every branch's result.",
        Fail = "fail": "Fail the join when branches disagree on a field.",
    }
);

impl OnFailure {
    /// The action an `on_failure` word takes (each is an action's name).
    pub fn action(self) -> crate::ir::ActionKind {
        use crate::ir::ActionKind;
        match self {
            OnFailure::Retry => ActionKind::Retry,
            OnFailure::Degrade => ActionKind::Degrade,
            OnFailure::Skip => ActionKind::Skip,
            OnFailure::Terminate => ActionKind::Terminate,
        }
    }
}

#[cfg(test)]
mod tests;
