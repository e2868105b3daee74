//! Reading property values of the plan, shared by the control plane
//! ([`crate::engine`]) and the trace checker ([`crate::conformance`]): both
//! must read the plan the same way.

use flow_check::ir::{Program, Value};
use indexmap::IndexMap;

/// A single-word property: a word or a string.
pub fn word(v: Option<&Value>) -> Option<&str> {
    match v {
        Some(Value::Word(w)) | Some(Value::Str(w)) => Some(w),
        _ => None,
    }
}

/// A whole-number property (a negative one counts as 0).
pub fn int(v: Option<&Value>) -> Option<u64> {
    match v {
        Some(Value::Int(i)) => Some((*i).max(0) as u64),
        _ => None,
    }
}

/// The names a property lists: references, nodes, words and strings; a
/// single reference, node or word is a list of one.
pub fn names(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::List(items)) => items
            .iter()
            .filter_map(|i| match i {
                Value::Ref { name, .. } | Value::Node(name) | Value::Word(name) | Value::Str(name) => Some(name.clone()),
                _ => None,
            })
            .collect(),
        Some(Value::Ref { name, .. }) | Some(Value::Node(name)) | Some(Value::Word(name)) => vec![name.clone()],
        _ => Vec::new(),
    }
}

/// The name a reference or node property names.
pub fn ref_name(v: Option<&Value>) -> Option<&str> {
    match v {
        Some(Value::Ref { name, .. }) | Some(Value::Node(name)) => Some(name),
        _ => None,
    }
}

/// A budget property: an inline record, or the record of the budget it
/// names.
pub fn budget_props<'p>(program: &'p Program, value: Option<&'p Value>) -> Option<&'p IndexMap<String, Value>> {
    match value? {
        Value::Record(r) => Some(r),
        Value::Ref { name, .. } => program.decls.get(name).map(|d| &d.props),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_lists_and_single_names() {
        let list = Value::List(vec![Value::Word("a".into()), Value::Str("b".into()), Value::Node("c".into()), Value::Int(3)]);
        assert_eq!(names(Some(&list)), ["a", "b", "c"]);
        assert_eq!(names(Some(&Value::Word("ops".into()))), ["ops"]);
        assert_eq!(names(Some(&Value::Str("free text".into()))), Vec::<String>::new());
        assert_eq!(names(None), Vec::<String>::new());
        assert_eq!(int(Some(&Value::Int(-4))), Some(0));
        assert_eq!(word(Some(&Value::Node("n".into()))), None);
        assert_eq!(ref_name(Some(&Value::Node("n".into()))), Some("n"));
    }
}
