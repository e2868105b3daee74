//! Small lookups into the IR that several check families share.

use flow_check::ir::{Decl, Node, Program, Value};
use indexmap::IndexMap;

/// The names in a list property: references, strings and words.
pub fn names(value: Option<&Value>) -> Vec<String> {
    match value {
        Some(Value::List(items)) => items
            .iter()
            .filter_map(|i| match i {
                Value::Ref { name, .. } | Value::Str(name) | Value::Word(name) => Some(name.clone()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// The agent an agent node runs.
pub fn agent_of<'p>(node: &Node, program: &'p Program) -> Option<&'p Decl> {
    (node.kind == "agent").then(|| program.decls.get(node.target.first()?)).flatten()
}

/// A budget value: a reference to a budget declaration or an inline record.
pub fn budget_record<'p>(value: Option<&'p Value>, program: &'p Program) -> Option<&'p IndexMap<String, Value>> {
    match value? {
        Value::Record(r) => Some(r),
        Value::Ref { name, .. } => Some(&program.decls.get(name)?.props),
        _ => None,
    }
}

/// Whether a tool needs a human before it is called: `risk: high` or
/// `critical`, or `confirm: true`.
pub fn is_risky_tool(program: &Program, tool: &str) -> bool {
    program.decls.get(tool).is_some_and(|t| {
        matches!(t.props.get("confirm"), Some(Value::Bool(true)))
            || matches!(t.props.get("risk"), Some(Value::Word(r)) if r == "high" || r == "critical")
    })
}

/// A single-word property: a word, string, node or reference name.
pub fn word(value: Option<&Value>) -> Option<&str> {
    match value? {
        Value::Word(w) | Value::Str(w) | Value::Node(w) | Value::Ref { name: w, .. } => Some(w),
        _ => None,
    }
}

/// A whole-number property.
pub fn int(value: Option<&Value>) -> Option<u64> {
    match value? {
        Value::Int(i) if *i >= 0 => Some(*i as u64),
        _ => None,
    }
}
