//! Small lookups into the IR that several check families share.

use flow_check::ir::{Program, Value};
pub use flow_check::lookup::{agent_of, int, names, word};
use indexmap::IndexMap;

/// A budget value: a reference to a budget declaration or an inline record.
pub fn budget_record<'p>(value: Option<&'p Value>, program: &'p Program) -> Option<&'p IndexMap<String, Value>> {
    flow_check::lookup::budget_props(program, value)
}

/// Whether a tool needs a human before it is called: `risk: high` or
/// `critical`, or `confirm: true`.
pub fn is_risky_tool(program: &Program, tool: &str) -> bool {
    program.decls.get(tool).is_some_and(|t| {
        matches!(t.props.get("confirm"), Some(Value::Bool(true)))
            || matches!(t.props.get("risk"), Some(Value::Word(r)) if r == "high" || r == "critical")
    })
}
