//! Readers that resolve a value from several places: a property, else
//! another block's, else the spec's default (the node's context, else its
//! agent's, else isolated).

use super::{EvaluatorRef, Props};
use crate::ir::{Decl, Gate, Node, Transfer, Value};
use flow_trace::ContextMode;

impl Node {
    /// Attempts per visit, the first included: the retry policy's (at
    /// least 1), or 1 without one.
    pub fn attempts(&self) -> u64 {
        self.retry().map_or(1, |r| r.attempts.max(1))
    }

    /// Rounds a loop runs at most (1 for any other node).
    pub fn rounds(&self) -> u64 {
        self.max_rounds().unwrap_or(1)
    }

    /// What an agent node's `agent` sees: the node's override, else the
    /// agent's context, else isolated.
    pub fn agent_context(&self, agent: &Decl) -> ContextMode {
        self.context().or_else(|| agent.context()).unwrap_or(ContextMode::Isolated)
    }

    /// The decisions a human node offers (none at any other node).
    pub fn offered_decisions(&self) -> Vec<flow_trace::Decision> {
        match &self.body {
            crate::ir::NodeBody::Human(h) => h.decisions.clone(),
            _ => Vec::new(),
        }
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

    /// The decisions allowed (default all four).
    pub fn allowed_decisions(&self) -> Vec<flow_trace::Decision> {
        self.decisions().unwrap_or_else(|| flow_trace::Decision::CHOICES.to_vec())
    }
}

impl Transfer {
    /// What the receiver of a handoff sees (a delegation's context is its
    /// contract's: isolated here).
    pub fn handoff_context(&self) -> ContextMode {
        self.context().unwrap_or(ContextMode::Isolated)
    }
}

#[cfg(test)]
mod tests {
    use crate::ir::{Decl, Gate, Node, NodeKind, Transfer, TransferKind, Value};
    use crate::spec::Kind;
    use crate::types::Ty;
    use flow_trace::{ContextMode, Decision};

    fn props(items: &[(&str, Value)]) -> crate::ir::NameMap<Value> {
        items.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    }

    fn node(items: &[(&str, Value)]) -> Node {
        Node::new("n", NodeKind::Agent, vec!["a".into()], &props(items), Ty::Any, Default::default())
    }

    fn human(items: &[(&str, Value)]) -> Node {
        Node::new("n", NodeKind::Human, vec!["p".into()], &props(items), Ty::Any, Default::default())
    }

    #[test]
    fn a_node_attempts_at_least_once_and_a_loop_runs_one_round_by_default() {
        assert_eq!(node(&[]).attempts(), 1);
        let retry = |n| Value::Record(props(&[("attempts", Value::Int(n))]));
        assert_eq!(node(&[("retry", retry(3))]).attempts(), 3);
        assert_eq!(node(&[("retry", retry(0))]).attempts(), 1);
        assert_eq!(node(&[("retry", Value::Record(Default::default()))]).attempts(), 1);
        assert_eq!(node(&[]).rounds(), 1);
        let looped = |items: &[(&str, Value)]| Node::new("l", NodeKind::Loop, vec!["n".into()], &props(items), Ty::Any, Default::default());
        assert_eq!(looped(&[("max_rounds", Value::Int(4))]).rounds(), 4);
        assert_eq!(node(&[("max_rounds", Value::Int(4))]).rounds(), 1, "only a loop has rounds");
    }

    #[test]
    fn an_agent_node_sees_its_override_else_its_agents_context_else_isolated() {
        let agent = |items: &[(&str, Value)]| Decl {
            kind: Kind::Agent,
            name: "a".into(),
            variant: None,
            props: props(items),
            loc: Default::default(),
            imported: false,
        };
        let fork = ("context", Value::Word("fork".into()));
        let filtered = ("context", Value::Word("filtered".into()));
        assert_eq!(node(&[]).agent_context(&agent(&[])), ContextMode::Isolated);
        assert_eq!(node(&[]).agent_context(&agent(std::slice::from_ref(&fork))), ContextMode::Fork);
        assert_eq!(node(&[filtered]).agent_context(&agent(&[fork])), ContextMode::Filtered);
    }

    #[test]
    fn decisions_default_to_approve_and_reject_at_a_human_node_and_all_four_at_a_gate() {
        assert_eq!(human(&[]).offered_decisions(), [Decision::Approve, Decision::Reject]);
        let only = ("decisions", Value::List(vec![Value::Word("revise".into())]));
        assert_eq!(human(std::slice::from_ref(&only)).offered_decisions(), [Decision::Revise]);
        assert_eq!(node(&[]).offered_decisions(), [], "only a human node offers decisions");
        let gate = |items: &[(&str, Value)]| Gate {
            name: "g".into(),
            from: "a".into(),
            to: "b".into(),
            props: props(items),
            handlers: Vec::new(),
            records: Vec::new(),
            loc: Default::default(),
        };
        assert_eq!(flow_trace::join(&gate(&[]).allowed_decisions(), ","), crate::spec::DECISIONS.join(","));
        assert_eq!(gate(&[only]).allowed_decisions(), [Decision::Revise]);
        // An item that is not an evaluator keeps its place, to fail closed on.
        let ev = Value::Evaluator { name: "predicate".into(), builtin: true, args: Vec::new() };
        let g = gate(&[("evaluate", Value::List(vec![Value::Int(1), ev]))]);
        let items: Vec<Option<&str>> = g.evaluator_items().iter().map(|e| e.map(|e| e.name)).collect();
        assert_eq!(items, [None, Some("predicate")]);
    }

    #[test]
    fn a_handoff_is_isolated_unless_it_says_otherwise() {
        let transfer = |items: &[(&str, Value)]| Transfer::new(TransferKind::Handoff, "a", "b", &props(items), Default::default());
        assert_eq!(transfer(&[]).handoff_context(), ContextMode::Isolated);
        assert_eq!(transfer(&[("context", Value::Word("fork".into()))]).handoff_context(), ContextMode::Fork);
    }
}
