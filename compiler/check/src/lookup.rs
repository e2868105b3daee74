//! Reading property values of the IR: the one way, for every reader of a
//! plan (the verifier, the model checker, the engine, trace check). Two
//! readers that read `escalate_to: editor` differently — a list of one, or
//! nothing — are two semantics; there is one set of readers, here.

use crate::ir::NodeKind;
use crate::ir::{Decl, Node, Program, Value};

/// A single-word property: a word, a string, a node or a reference's name.
pub fn word(value: Option<&Value>) -> Option<&str> {
    match value? {
        Value::Word(w) | Value::Str(w) | Value::Node(w) | Value::Ref { name: w, .. } => Some(w),
        _ => None,
    }
}

/// A whole-number property (`None` for a negative one, which the checker
/// never lets through).
pub fn int(value: Option<&Value>) -> Option<u64> {
    match value? {
        Value::Int(i) if *i >= 0 => Some(*i as u64),
        _ => None,
    }
}

/// The names a property lists: references, nodes, words and strings; a
/// single reference, node or word is a list of one.
pub fn names(value: Option<&Value>) -> Vec<String> {
    match value {
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
pub fn ref_name(value: Option<&Value>) -> Option<&str> {
    match value {
        Some(Value::Ref { name, .. }) | Some(Value::Node(name)) => Some(name),
        _ => None,
    }
}

/// The agent an agent node runs.
pub fn agent_of<'p>(node: &Node, program: &'p Program) -> Option<&'p Decl> {
    (node.kind() == NodeKind::Agent).then(|| program.decls.get(node.target.first()?)).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_lists_and_single_names() {
        let list = Value::List(vec![Value::Word("a".into()), Value::Str("b".into()), Value::Node("c".into()), Value::Int(3)]);
        assert_eq!(names(Some(&list)), ["a", "b", "c"]);
        assert_eq!(names(Some(&Value::Word("ops".into()))), ["ops"]);
        assert_eq!(names(Some(&Value::Ref { kind: crate::spec::Kind::Principal, name: "lead".into() })), ["lead"]);
        assert_eq!(names(Some(&Value::Str("free text".into()))), Vec::<String>::new());
        assert_eq!(names(None), Vec::<String>::new());
        assert_eq!(int(Some(&Value::Int(-4))), None);
        assert_eq!(int(Some(&Value::Int(4))), Some(4));
        assert_eq!(word(Some(&Value::Node("n".into()))), Some("n"));
        assert_eq!(ref_name(Some(&Value::Node("n".into()))), Some("n"));
    }
}
