//! Unit tests of the engine's small parts.

use super::record::RECENT_IDS;
use super::*;
use flow_check::types::Ty;

fn node_with_retry(backoff: u64, max: Option<u64>) -> Node {
    let mut retry = flow_check::ir::NameMap::default();
    retry.insert("attempts".to_string(), IrValue::Int(5));
    retry.insert("backoff".to_string(), IrValue::Duration(backoff));
    if let Some(max) = max {
        retry.insert("max_backoff".to_string(), IrValue::Duration(max));
    }
    let mut props = flow_check::ir::NameMap::default();
    props.insert("retry".to_string(), IrValue::Record(retry));
    Node::new("n", NodeKind::Tool, vec!["t".into()], &props, Ty::Any, Default::default())
}

#[test]
fn backoff_waits_only_before_retries_and_doubles_up_to_the_cap() {
    let node = node_with_retry(1000, Some(3000));
    let delays: Vec<u64> = (1..=5).map(|a| Engine::backoff(&node, a)).collect();
    assert_eq!(delays, [0, 1000, 2000, 3000, 3000]);
    assert_eq!(Engine::max_attempts(&node), 5);
}

#[test]
fn the_envelope_shares_ids_parents_and_producers() {
    let mut envelope = Envelope::new("run-1", "exec-1");
    let first = envelope.id(1);
    assert_eq!(&*first, "run-1/1");
    assert!(Arc::ptr_eq(&envelope.parent("run-1/1"), &first));
    // A parent that is not recent is still the id it names.
    assert_eq!(&*envelope.parent("run-0/7"), "run-0/7");
    assert_eq!(&*envelope.parent("run-0/1"), "run-0/1");
    assert_eq!(&*envelope.parent("odd"), "odd");
    let ids: Vec<Str> = (2..=(RECENT_IDS + 1)).map(|seq| envelope.id(seq)).collect();
    assert!(!Arc::ptr_eq(&envelope.parent("run-1/1"), &first));
    assert_eq!(&*envelope.parent("run-1/1"), "run-1/1");
    // The last RECENT_IDS ids are shared, the oldest of them too.
    assert!(Arc::ptr_eq(&envelope.parent("run-1/2"), &ids[0]));
    assert!(Arc::ptr_eq(&envelope.parent(&format!("run-1/{}", RECENT_IDS + 1)), ids.last().unwrap()));
    let tool = envelope.producer("tool.", "noop");
    assert_eq!(&*tool, "tool.noop");
    assert!(Arc::ptr_eq(&envelope.producer("tool.", "noop"), &tool));
    assert!(Arc::ptr_eq(&envelope.producer("", "tool.noop"), &tool));
    assert_eq!(&*envelope.producer("tool.", "noo"), "tool.noo");
    assert_eq!(&*envelope.producer("agent.", "noop"), "agent.noop");
    let control = envelope.producer("", "control");
    assert_eq!(&*control, "control");
    assert!(Arc::ptr_eq(&envelope.producer("", "control"), &control));
    assert_eq!(&*envelope.producer("tool.", "control"), "tool.control");
}

#[test]
fn outstanding_commands_leave_in_any_order_and_list_in_issue_order() {
    let probe = |index| Waiting::Probe { gate: "g".into(), index, item: 0 };
    let mut out = Outstanding::default();
    for (i, key) in ["c", "a", "d", "b", "e"].iter().enumerate() {
        out.insert(key.to_string(), probe(i));
    }
    assert!(matches!(out.remove("a"), Some(Waiting::Probe { index: 1, .. })));
    assert!(out.remove("a").is_none());
    assert!(!out.contains("a") && out.contains("c"));
    assert!(out.remove("e").is_some());
    out.insert("a".into(), probe(9));
    let keys: Vec<String> = out.entries().into_iter().map(|(k, _, _)| k).collect();
    assert_eq!(keys, ["c", "d", "b", "a"]);
    assert_eq!(out.len(), 4);
    out.clear();
    assert!(out.is_empty());
}

#[test]
fn outcomes_combine_by_severity() {
    // Outcomes are ordered by severity: the most severe one wins.
    assert_eq!(Outcome::Pass.max(Outcome::RequiresDecision), Outcome::RequiresDecision);
    assert_eq!(Outcome::Block.max(Outcome::RequiresDecision), Outcome::Block);
    assert_eq!(Outcome::RequiresDecision.max(Outcome::Pass), Outcome::RequiresDecision);
    let gate = Gate {
        name: "g".into(),
        from: "a".into(),
        to: "b".into(),
        props: flow_check::ir::NameMap::default(),
        handlers: Vec::new(),
        records: Vec::new(),
        loc: Default::default(),
    };
    assert_eq!(gate.on_error(), Outcome::Block, "undeclared: fail-closed");
}

#[test]
fn effects_stay_small() {
    // Every transition is an effect pushed and popped once: a large variant
    // is boxed so the common ones stay cheap to move.
    let size = std::mem::size_of::<Effect>();
    eprintln!(
        "Effect: {size} bytes; Ctx {}, Action {}, PendingCall {}, Value {}",
        std::mem::size_of::<Ctx>(),
        std::mem::size_of::<Action>(),
        std::mem::size_of::<PendingCall>(),
        std::mem::size_of::<Value>()
    );
    assert!(size <= 128, "Effect is {size} bytes");
}
