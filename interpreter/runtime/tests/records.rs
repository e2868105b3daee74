//! Declared events (reference §6.8, `record NAME { … }`): a node writes
//! its records as it completes, a gate as it records its outcome; each is
//! a typed `recorded` event with its values and its inputs, a step of the
//! policy trace (`recorded(NAME)`), and trace check makes its values again
//! (T016).

mod common;

use common::{ending, program, renumber, run, Ran};
use flow_runtime::tracecheck;
use flow_trace::{Body, Decision, Event};
use serde_json::{json, Value};

const REVIEW: &str = r#"
provider p: scripted
agent writer { provider: p }
type Draft = { score: int, text: string }
workflow review {
  start: draft
  node draft: agent writer {
    output: Draft
    record draft_scored {
      score: draft.score,
      words: len(split(draft.text, " ")),
      per_word: draft.score / len(split(draft.text, " ")),
      ratio: 10 / draft.score,
    }
  }
  node publish: end published
  node held: end held { status: partial }
  draft -> publish
  gate quality: draft -> publish {
    evaluate: [predicate(draft.score > 5)]
    on PASS -> continue
    on BLOCK -> goto(held)
    record quality_check { outcome: outcome, score: draft.score, topic: input.topic }
  }
}

policy publish_after_check: never started(publish) before recorded(quality_check)
"#;

fn review(score: i64, text: &str) -> Ran {
    let draft = json!({ "score": score, "text": text });
    run(program(REVIEW), json!({ "topic": "tides" }), move |_| draft.clone(), |_| Decision::Approve)
}

/// The `recorded` events: name, owner (node or gate), values, errors.
fn records(events: &[Event]) -> Vec<(String, String, Value, Vec<String>)> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            Body::Recorded { name, node, gate, values, errors, .. } => Some((
                name.clone(),
                node.clone().or(gate.clone()).unwrap_or_default(),
                Value::Object(values.clone()),
                errors.keys().cloned().collect(),
            )),
            _ => None,
        })
        .collect()
}

fn kinds(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(|e| e.body.kind()).filter(|k| *k != "artifact_recorded").collect()
}

#[test]
fn a_node_and_a_gate_write_their_records_with_the_values_of_their_fields() {
    let ran = review(8, "high tide at noon");
    assert_eq!(ending(&ran.events), "published");
    let written = records(&ran.events);
    assert_eq!(written.len(), 2, "{written:#?}");
    assert_eq!(written[0].0, "draft_scored");
    assert_eq!(written[0].1, "draft");
    assert_eq!(written[0].2, json!({ "score": 8, "words": 4, "per_word": 2.0, "ratio": 1.25 }));
    assert!(written[0].3.is_empty());
    assert_eq!(written[1], ("quality_check".into(), "quality".into(), json!({ "outcome": "PASS", "score": 8, "topic": "tides" }), vec![]));
    // Right after the completion, and between the gate's outcome and its crossing.
    let order = kinds(&ran.events);
    let completed = order.iter().position(|k| *k == "node_completed").unwrap();
    assert_eq!(order[completed + 1], "recorded");
    let gate = order.iter().position(|k| *k == "gate_recorded").unwrap();
    assert_eq!(order[gate + 1], "recorded");
    // The inputs are the artifacts of what the fields read.
    let inputs = ran.events.iter().find_map(|e| match &e.body {
        Body::Recorded { name, inputs, .. } if name == "quality_check" => Some(inputs.keys().cloned().collect::<Vec<_>>()),
        _ => None,
    });
    assert_eq!(inputs, Some(vec!["draft".to_string(), "input".to_string()]));
}

#[test]
fn a_field_that_cannot_be_made_is_named_in_errors_and_the_record_is_still_written() {
    let ran = review(0, "low tide");
    assert_eq!(ending(&ran.events), "held");
    let written = records(&ran.events);
    assert_eq!(written[0].2, json!({ "score": 0, "words": 2, "per_word": 0.0 }));
    assert_eq!(written[0].3, ["ratio"], "10 / 0 has no value");
    assert_eq!(written[1].2["outcome"], "BLOCK");
}

fn check(events: &[Event], ran: &Ran) -> tracecheck::Report {
    let options = tracecheck::Options { artifacts: Some(&ran.store), ..Default::default() };
    tracecheck::check(&program(REVIEW), events, &options)
}

fn t016(report: &tracecheck::Report) -> Vec<String> {
    report.deviations.iter().filter(|d| d.code == tracecheck::codes::RECORD).map(|d| d.message.clone()).collect()
}

#[test]
fn trace_check_makes_the_values_again_and_catches_a_forged_one() {
    let ran = review(8, "high tide at noon");
    let mut events = ran.events.clone();
    for e in &mut events {
        if let Body::Recorded { name, values, .. } = &mut e.body {
            if name == "draft_scored" {
                values.insert("score".into(), json!(99));
            }
        }
    }
    let found = t016(&check(&events, &ran));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("do not follow from its inputs"), "{found:?}");
    // Without the artifacts the values are not made again, and a note says so.
    let report = tracecheck::check(&program(REVIEW), &events, &Default::default());
    assert!(t016(&report).is_empty());
    assert!(report.notes.iter().any(|n| n.contains("declared record(s) not made again")), "{:?}", report.notes);
}

#[test]
fn trace_check_catches_a_record_left_out_or_a_field_dropped() {
    let ran = review(8, "high tide at noon");
    let without: Vec<Event> =
        ran.events.iter().filter(|e| !matches!(&e.body, Body::Recorded { name, .. } if name == "draft_scored")).cloned().collect();
    let found = t016(&check(&renumber(without), &ran));
    assert!(found.iter().any(|m| m.contains("record `draft_scored` was not written")), "{found:?}");
    let mut dropped = ran.events.clone();
    for e in &mut dropped {
        if let Body::Recorded { values, .. } = &mut e.body {
            values.remove("score");
        }
    }
    let found = t016(&check(&dropped, &ran));
    assert!(found.iter().any(|m| m.contains("does not hold each declared field once")), "{found:?}");
}

#[test]
fn a_block_policy_on_a_record_stops_the_run_before_it_is_written() {
    let source = REVIEW.replace(
        "policy publish_after_check",
        "policy no_scoring: never recorded(draft_scored) { response: block }\npolicy publish_after_check",
    );
    let draft = json!({ "score": 8, "text": "a b" });
    let ran = run(program(&source), json!({ "topic": "t" }), move |_| draft.clone(), |_| Decision::Approve);
    assert_eq!(ending(&ran.events), "policy_blocked");
    assert!(records(&ran.events).is_empty());
}
