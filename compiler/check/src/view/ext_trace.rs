//! Typed readers the trace needs beyond the shared ones (to be merged into
//! `decl.rs` / `flow.rs`).

use super::{word, Props};
use crate::ir::{Gate, Value};

impl Gate {
    /// The node a REPLAN through the gate re-runs first: the first node of
    /// [`Gate::replan_scope`], borrowed (`None`: the scope is the whole workflow).
    pub fn replan_start(&self) -> Option<&str> {
        match self.prop("replan_scope")? {
            Value::List(items) => items.iter().find_map(|v| word(Some(v))),
            Value::Str(_) => None,
            single => word(Some(single)),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::ir::{Gate, Value};

    fn gate(scope: Option<Value>) -> Gate {
        let mut props = indexmap::IndexMap::new();
        if let Some(scope) = scope {
            props.insert("replan_scope".to_string(), scope);
        }
        Gate { name: "g".into(), from: "a".into(), to: "b".into(), props, handlers: Vec::new(), loc: Default::default() }
    }

    #[test]
    fn replan_start_is_the_first_of_the_replan_scope() {
        let list = Value::List(vec![Value::Node("draft".into()), Value::Node("review".into())]);
        assert_eq!(gate(Some(list.clone())).replan_start(), Some("draft"));
        assert_eq!(gate(Some(list)).replan_scope().first().map(String::as_str), Some("draft"));
        assert_eq!(gate(Some(Value::List(Vec::new()))).replan_start(), None);
        assert_eq!(gate(None).replan_start(), None);
    }
}
