//! Messages (reference §6.5): the control plane stamps each handoff's
//! message — recorded as a `message` event, its envelope in the
//! receiver's context — holds its payload to the workflow's `messages`
//! type for its message type, and dead-letters a message it refuses
//! (`dead_letter`), after which the workflow's `dead_letter` handler acts,
//! else the sender fails. Trace check holds dead letters to the plan.

mod common;

use common::{program, renumber, run, Ran};
use flow_runtime::tracecheck;
use flow_trace::{Body, Decision, Event, MessageType};
use serde_json::json;

const HEAD: &str = "provider p: scripted { max_tokens: 1k }\nagent a { provider: p }\n";

/// `ask` sends `answer` a QUERY (`messages` types its payload), with the
/// workflow's other lines `extra`.
fn query(extra: &str) -> String {
    format!(
        r#"{HEAD}type Question = {{ question: string }}
workflow w {{
  start: ask
  messages: {{ QUERY: Question }}
  node ask: agent a {{ output: any }}
  node answer: agent a {{ output: string }}
  node done: end ok
  node apology: end undeliverable {{ status: failure }}
  ask -> answer -> done
  handoff ask -> answer {{ message: QUERY }}
{extra}}}
"#
    )
}

fn ended(ran: &Ran) -> String {
    ran.events
        .iter()
        .find_map(|e| if let Body::RunTerminated { reason, .. } = &e.body { Some(reason.clone()) } else { None })
        .expect("ended")
}

fn dead_letters(ran: &Ran) -> Vec<(MessageType, String, String, String)> {
    ran.events
        .iter()
        .filter_map(|e| match &e.body {
            Body::DeadLetter { message_type, from, to, reason, .. } => Some((*message_type, from.clone(), to.clone(), reason.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn the_receiver_gets_the_envelope_the_control_plane_stamped() {
    let ran = run(
        program(&query("")),
        json!({}),
        |r| if r.node == "ask" { json!({ "question": "why?" }) } else { json!("because") },
        |_| Decision::Approve,
    );
    let seq = ran.events.iter().find(|e| matches!(e.body, Body::Message { .. })).map(|e| e.seq).expect("a message event");
    assert_eq!(ran.context_of("answer")["message"], json!({ "seq": seq, "msg_type": "QUERY", "source": "ask", "target": "answer" }));
    assert_eq!(ran.context_of("answer")["input"], json!({ "question": "why?" }));
    assert!(ran.context_of("ask").get("message").is_none(), "the start node was handed no message");
    assert!(dead_letters(&ran).is_empty());
    assert_eq!(ended(&ran), "ok");
}

#[test]
fn a_message_not_of_its_types_payload_is_dead_lettered_and_its_sender_fails() {
    let ran = run(program(&query("")), json!({}), |_| json!({ "note": "no question" }), |_| Decision::Approve);
    let dead = dead_letters(&ran);
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!((dead[0].0, dead[0].1.as_str(), dead[0].2.as_str()), (MessageType::Query, "ask", "answer"));
    assert!(dead[0].3.contains("QUERY"), "the reason names the message type: {}", dead[0].3);
    assert!(!ran.events.iter().any(|e| matches!(e.body, Body::Message { .. })), "nothing was delivered");
    assert!(ran.contexts_of("answer").is_empty(), "the receiver never ran");
    let failed = ran.events.iter().find_map(|e| match &e.body {
        Body::NodeFailed { node, error_code, .. } => Some((node.clone(), error_code.to_string())),
        _ => None,
    });
    assert_eq!(failed, Some(("ask".into(), "handoff_refused".into())));
    assert_eq!(ended(&ran), "ask_failed");
}

#[test]
fn the_workflows_dead_letter_handler_acts_for_the_sender() {
    let ran =
        run(program(&query("  on dead_letter -> goto(apology)\n")), json!({}), |_| json!({ "note": "no question" }), |_| Decision::Approve);
    assert_eq!(dead_letters(&ran).len(), 1);
    assert!(!ran.events.iter().any(|e| matches!(e.body, Body::NodeFailed { .. })), "the handler acted instead of a failure");
    assert_eq!(ended(&ran), "undeliverable");
}

#[test]
fn trace_check_holds_dead_letters_and_delivered_payloads_to_the_plan() {
    let plan = program(&query("  on dead_letter -> goto(apology)\n"));
    let check = |events: Vec<Event>| {
        let report = tracecheck::check(&plan, &renumber(events), &tracecheck::Options::default());
        report.deviations.iter().map(|d| d.code.to_string()).collect::<Vec<_>>()
    };
    let ran = run(plan.clone(), json!({}), |_| json!({ "note": "no question" }), |_| Decision::Approve);
    assert!(check(ran.events.clone()).is_empty());
    let at = ran.events.iter().position(|e| matches!(e.body, Body::DeadLetter { .. })).expect("a dead letter");
    // Another message type than the handoff sends.
    let mut events = ran.events.clone();
    if let Body::DeadLetter { message_type, .. } = &mut events[at].body {
        *message_type = MessageType::Vote;
    }
    assert!(check(events).contains(&"T030".to_string()));
    // A dead letter with no refused handoff before it.
    let mut events = ran.events.clone();
    if let Body::Handoff { accepted, .. } = &mut events[at - 1].body {
        *accepted = true;
    }
    assert!(check(events).contains(&"T030".to_string()));
}
