//! Blackboards at run time (reference §5.8): writers append their output
//! (after an approval or a gate's PASS where the blackboard requires one),
//! readers get every entry so far in their context, and every append and
//! read is an event trace check holds to the plan. Each run is driven in
//! process on a fake clock and checked by `flow trace check` too.

mod common;

use common::{program, renumber, Ran};
use flow_check::ir::Program;
use flow_runtime::proto::{AgentRequest, HumanRequest};
use flow_runtime::tracecheck;
use flow_trace::{Applied, Body, Decision, Event};
use serde_json::{json, Value};

fn appended(ran: &Ran) -> Vec<(String, String, u32, Option<String>)> {
    ran.events
        .iter()
        .filter_map(|e| match &e.body {
            Body::BlackboardAppended { blackboard, node, entries, approved_by, .. } => {
                Some((blackboard.clone(), node.clone(), *entries, approved_by.clone()))
            }
            _ => None,
        })
        .collect()
}

/// Runs `program` on `{}` (the trace must be conformant).
fn run(program: Program, reply: impl Fn(&AgentRequest) -> Value, decide: impl Fn(&HumanRequest) -> Decision) -> Ran {
    common::run(program, json!({}), reply, decide)
}

const HEAD: &str = r#"provider p: scripted { max_tokens: 1k }
principal lead
agent scribe { provider: p }
agent planner { provider: p }
"#;

#[test]
fn writers_append_and_readers_read_every_entry_so_far_in_their_context() {
    let source = format!(
        r#"{HEAD}blackboard notes {{ entry: {{ text: string }}, writers: [scribe], readers: [planner] }}
workflow w {{
  start: first
  node first: agent scribe {{ output: {{ text: string }}, writes: [notes] }}
  node look: agent planner {{ output: string, reads: [notes] }}
  node second: agent scribe {{ output: {{ text: string }}, writes: [notes] }}
  node again: agent planner {{ output: string, reads: [notes] }}
  node done: end ok
  first -> look -> second -> again -> done
}}
"#
    );
    let ran = run(
        program(&source),
        |a| match a.node.as_str() {
            "first" => json!({ "text": "one" }),
            "second" => json!({ "text": "two" }),
            _ => json!("seen"),
        },
        |_| Decision::Approve,
    );
    let appended = appended(&ran);
    assert_eq!(appended, vec![("notes".into(), "first".into(), 1, None), ("notes".into(), "second".into(), 2, None)]);
    assert_eq!(ran.context_of("look")["blackboards"], json!({ "notes": [{ "text": "one" }] }));
    assert_eq!(ran.context_of("again")["blackboards"], json!({ "notes": [{ "text": "one" }, { "text": "two" }] }));
    // A writer that does not read sees nothing of the blackboard.
    assert!(ran.context_of("second").get("blackboards").is_none());
    let reads: Vec<(String, u32)> = ran
        .events
        .iter()
        .filter_map(|e| match &e.body {
            Body::BlackboardRead { node, entries, .. } => Some((node.clone(), *entries)),
            _ => None,
        })
        .collect();
    assert_eq!(reads, vec![("look".into(), 1), ("again".into(), 2)]);
}

#[test]
fn an_append_that_requires_approval_waits_for_it_and_a_rejected_one_is_left_out() {
    let source = format!(
        r#"{HEAD}blackboard decisions {{ entry: string, writers: [scribe], readers: [planner], requires: approval }}
workflow w {{
  start: first
  escalate_to: lead
  node first: agent scribe {{ output: string, writes: [decisions] }}
  node second: agent scribe {{ output: string, writes: [decisions] }}
  node look: agent planner {{ output: string, reads: [decisions] }}
  node done: end ok
  first -> second -> look -> done
}}
"#
    );
    // The lead approves the first append and rejects the second.
    let ran = run(
        program(&source),
        |a| json!(a.node.clone()),
        |h| if h.subject.ends_with(".first") { Decision::Approve } else { Decision::Reject },
    );
    let subjects: Vec<&str> = ran.humans.iter().map(|h| h.subject.as_str()).collect();
    assert_eq!(subjects, ["blackboard.decisions.first", "blackboard.decisions.second"]);
    assert_eq!(ran.humans[0].principals, ["lead"]);
    assert_eq!(appended(&ran), vec![("decisions".into(), "first".into(), 1, Some("lead".into()))]);
    assert_eq!(ran.context_of("look")["blackboards"], json!({ "decisions": ["first"] }));
    let applied: Vec<Applied> = ran
        .events
        .iter()
        .filter_map(|e| match &e.body {
            Body::DecisionApplied { action, .. } => Some(action.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(applied, [Applied::Append, Applied::Refuse]);
    // Nothing follows the writer before its append is decided.
    let position = |pred: &dyn Fn(&Body) -> bool| ran.events.iter().position(|e| pred(&e.body)).expect("event");
    let decided = position(&|b| matches!(b, Body::DecisionApplied { subject, .. } if subject == "blackboard.decisions.first"));
    let second = position(&|b| matches!(b, Body::NodeStarted { node, .. } if node == "second"));
    assert!(decided < second, "`second` started before the append of `first` was decided");
}

#[test]
fn an_append_that_requires_a_gate_pass_happens_only_when_the_gate_passes() {
    let source = format!(
        r#"{HEAD}blackboard checked {{ entry: string, writers: [scribe], readers: [planner], requires: gate_pass }}
workflow w {{
  start: draft
  node draft: agent scribe {{ output: string, writes: [checked], max_visits: 2 }}
  node look: agent planner {{ output: string, reads: [checked] }}
  node done: end ok
  draft -> look -> done
  gate long_enough: draft -> look {{
    evaluate: [predicate(len(draft) > 3)]
    on PASS -> continue
    on BLOCK -> revise(draft)
  }}
}}
"#
    );
    // The first draft is too short (BLOCK: not appended), the second passes.
    let drafts = std::sync::Mutex::new(vec!["long enough", "no"]);
    let ran = run(
        program(&source),
        |a| match a.node.as_str() {
            "draft" => json!(drafts.lock().expect("drafts").pop().expect("a draft")),
            _ => json!("seen"),
        },
        |_| Decision::Approve,
    );
    assert_eq!(appended(&ran), vec![("checked".into(), "draft".into(), 1, None)]);
    assert_eq!(ran.context_of("look")["blackboards"], json!({ "checked": ["long enough"] }));
}

#[test]
fn trace_check_holds_appends_and_reads_to_the_plan() {
    let source = format!(
        r#"{HEAD}blackboard decisions {{ entry: string, writers: [scribe], readers: [planner], requires: approval }}
workflow w {{
  start: first
  escalate_to: lead
  node first: agent scribe {{ output: string, writes: [decisions] }}
  node look: agent planner {{ output: string, reads: [decisions] }}
  node done: end ok
  first -> look -> done
}}
"#
    );
    let plan = program(&source);
    let ran = run(plan.clone(), |a| json!(a.node.clone()), |_| Decision::Approve);
    let deviations = |events: &[Event]| -> Vec<String> {
        tracecheck::check(&plan, events, &tracecheck::Options::default())
            .deviations
            .into_iter()
            .filter(|d| d.code == tracecheck::codes::BLACKBOARD)
            .map(|d| d.message)
            .collect()
    };
    assert_eq!(deviations(&ran.events), Vec::<String>::new());
    // An append without its approval: the decision removed (and the seqs
    // renumbered so only the blackboard check can object).
    let without_approval: Vec<Event> = ran
        .events
        .iter()
        .filter(|e| !matches!(&e.body, Body::DecisionApplied { .. } | Body::DecisionRequested { .. } | Body::Message { .. }))
        .cloned()
        .collect();
    let found = deviations(&renumber(without_approval));
    assert!(found.iter().any(|m| m.contains("requires an approval")), "{found:?}");
    // A read that claims fewer entries than were appended.
    let mut short_read = ran.events.clone();
    for e in &mut short_read {
        if let Body::BlackboardRead { entries, .. } = &mut e.body {
            *entries = 0;
        }
    }
    let found = deviations(&short_read);
    assert!(found.iter().any(|m| m.contains("read 0 entries")), "{found:?}");
    // An append by a node that does not write the blackboard.
    let mut forged = ran.events.clone();
    for e in &mut forged {
        if let Body::BlackboardAppended { node, .. } = &mut e.body {
            *node = "look".into();
        }
    }
    let found = deviations(&forged);
    assert!(found.iter().any(|m| m.contains("`look` does not write blackboard `decisions`")), "{found:?}");
}
