//! Scoped re-runs (reference §6.3): a `replan` re-runs exactly its scope
//! and what depends on it, from the scope's entry whatever the order it
//! is listed in; a `revise` re-runs its node and what depends on it; every
//! other node keeps its output; a node that runs again sees its earlier
//! output and the outputs it depends on; each re-run is recorded (`rerun`)
//! and trace check holds it to the plan (T013).

mod common;

use common::{program, renumber, run, Ran};
use flow_runtime::tracecheck;
use flow_trace::{Body, Decision, Event, TriggerReason};
use serde_json::{json, Value};

const HEAD: &str = "provider p: scripted { max_tokens: 1k }\nprincipal lead\nagent a { provider: p }\n";

/// research -> outline -> write -> review -> done, the review gated; the
/// gate's BLOCK handler is `on_block`, its other lines `extra`.
fn article(extra: &str, on_block: &str) -> String {
    format!(
        r#"{HEAD}workflow w {{
  start: research
  escalate_to: lead
  node research: agent a {{ output: string }}
  node outline: agent a {{ output: string, max_visits: 2 }}
  node write: agent a {{ output: string, max_visits: 2 }}
  node review: agent a {{ output: string, max_visits: 2 }}
  node done: end ok
  research -> outline -> write -> review -> done
  gate accepted: review -> done {{
    evaluate: [predicate(review == "accept")]
    {extra}
    on PASS -> continue
    on BLOCK -> {on_block}
  }}
}}
"#
    )
}

/// Each agent answers with its node's name and visit (`write#2`); the
/// reviewer rejects its first draft and accepts the second.
fn answer(a: &flow_runtime::proto::AgentRequest) -> Value {
    let visit = a.context.get("rerun").and_then(|r| r["visit"].as_u64()).unwrap_or(1);
    match (a.node.as_str(), visit) {
        ("review", 1) => json!("redo"),
        ("review", _) => json!("accept"),
        (node, visit) => json!(format!("{node}#{visit}")),
    }
}

fn reruns(ran: &Ran) -> Vec<(TriggerReason, Vec<String>, String, Vec<String>)> {
    ran.events
        .iter()
        .filter_map(|e| match &e.body {
            Body::Rerun { trigger, scope, entry, superseded, .. } => Some((*trigger, scope.clone(), entry.clone(), superseded.clone())),
            _ => None,
        })
        .collect()
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_replan_reruns_its_scope_from_its_entry_and_keeps_every_other_output() {
    // Listed out of order: the scope starts at `outline`, which leads to
    // `write`; `research` is outside it and runs once.
    let source = article("replan_scope: [write, outline]", "replan");
    let ran = run(program(&source), json!({}), answer, |_| Decision::Approve);
    assert_eq!(ran.started(), names(&["research", "outline", "write", "review", "outline", "write", "review", "done"]));
    assert_eq!(
        reruns(&ran),
        vec![(TriggerReason::Replan, names(&["write", "outline"]), "outline".into(), names(&["outline", "write", "review", "done"]))]
    );
    // The re-run outline sees its earlier output and what it depends on
    // (research's, kept); the re-run write sees the new outline.
    let outline = ran.contexts_of("outline");
    assert!(outline[0].get("rerun").is_none(), "a first visit has no earlier work: {}", outline[0]);
    assert_eq!(outline[1]["rerun"], json!({ "visit": 2, "previous": "outline#1", "depends_on": { "research": "research#1" } }));
    let write = ran.contexts_of("write");
    assert_eq!(write[1]["rerun"], json!({ "visit": 2, "previous": "write#1", "depends_on": { "outline": "outline#2" } }));
}

#[test]
fn a_revise_reruns_its_node_and_what_depends_on_it() {
    let ran = run(program(&article("", "revise(write)")), json!({}), answer, |_| Decision::Approve);
    assert_eq!(ran.started(), names(&["research", "outline", "write", "review", "write", "review", "done"]));
    assert_eq!(reruns(&ran), vec![(TriggerReason::Revise, names(&["write"]), "write".into(), names(&["write", "review", "done"]))]);
    // A decider's `replan` with the gate's scope: the same rule.
    let decided = article("decided_by: [lead]\n    decisions: [approve, replan, reject]\n    replan_scope: [outline]", "decide");
    let ran = run(program(&decided), json!({}), answer, |_| Decision::Replan);
    assert_eq!(reruns(&ran)[0].2, "outline");
    assert_eq!(ran.started()[4], "outline");
}

#[test]
fn a_rework_node_entered_again_by_an_edge_sees_its_draft_and_the_outline() {
    // review -> write is a plain edge back: write's input is the review,
    // and its context also carries its own draft and the outline.
    let source = format!(
        r#"{HEAD}workflow w {{
  start: outline
  node outline: agent a {{ output: string }}
  node write: agent a {{ output: string, max_visits: 2 }}
  node review: agent a {{ output: string, max_visits: 2 }}
  node done: end ok
  outline -> write -> review
  review -> done when review == "accept"
  review -> write else
}}
"#
    );
    let ran = run(program(&source), json!({}), answer, |_| Decision::Approve);
    let write = ran.contexts_of("write");
    assert_eq!(write.len(), 2);
    assert_eq!(write[1]["input"], json!("redo"));
    assert_eq!(write[1]["rerun"], json!({ "visit": 2, "previous": "write#1", "depends_on": { "outline": "outline#1", "review": "redo" } }));
    assert!(reruns(&ran).is_empty(), "an edge is not a re-run");
}

#[test]
fn trace_check_holds_a_rerun_to_the_plan() {
    let source = article("replan_scope: [write, outline]", "replan");
    let plan = program(&source);
    let ran = run(plan.clone(), json!({}), answer, |_| Decision::Approve);
    let check = |events: Vec<Event>| {
        let report = tracecheck::check(&plan, &renumber(events), &tracecheck::Options::default());
        report.deviations.iter().map(|d| d.code.to_string()).collect::<Vec<_>>()
    };
    assert!(check(ran.events.clone()).is_empty(), "the run itself is conformant");
    let at = ran.events.iter().position(|e| matches!(e.body, Body::Rerun { .. })).expect("a rerun");
    let forged = |edit: &dyn Fn(&mut Body)| {
        let mut events = ran.events.clone();
        edit(&mut events[at].body);
        check(events)
    };
    // Superseding less than depends on the entry.
    assert!(forged(&|b| if let Body::Rerun { superseded, .. } = b {
        superseded.retain(|n| n != "review")
    })
    .contains(&"T013".into()));
    // A scope no gate names.
    assert!(forged(&|b| if let Body::Rerun { scope, .. } = b {
        *scope = vec!["write".into()]
    })
    .contains(&"T013".into()));
    // Starting at the first listed node instead of the entry.
    assert!(forged(&|b| if let Body::Rerun { entry, .. } = b {
        *entry = "write".into()
    })
    .contains(&"T013".into()));
    // The replan edge with no rerun before it.
    let mut events = ran.events.clone();
    events.remove(at);
    assert!(check(events).contains(&"T013".into()));
}
