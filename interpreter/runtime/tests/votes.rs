//! Votes at joins (reference §6.1, join rules `majority(key)`,
//! `quorum(n, key)`, `weighted(key, {…})`): the control plane counts the
//! branches' votes once they all arrived, records the count as `computed`
//! with the outputs it read, and a split vote takes its declared path.

mod common;

use common::{ending, forge_computed, program, run, Ran};
use flow_runtime::tracecheck;
use flow_trace::{Body, Decision};
use serde_json::{json, Value};

const REVIEW: &str = r#"
provider p: scripted
agent reviewer { provider: p }
type Review = { verdict: "approve" | "reject" | "revise", note: string }
workflow review {
  start: fan
  node fan: parallel [a, b, c]
  node a: agent reviewer { output: Review }
  node b: agent reviewer { output: Review }
  node c: agent reviewer { output: Review }
  node vote: join [a, b, c] { rule: RULE }
  node approved: end approved
  node rejected: end rejected { status: failure }
  node split: end no_majority { status: escalated }
  vote -> split when not vote.decided
  vote -> approved when vote.result == "approve"
  vote -> rejected else
}
"#;

/// The events of [`review`].
fn review_events(rule: &str, verdicts: [&str; 3]) -> Vec<flow_trace::Event> {
    review(rule, verdicts).events
}

/// The review run under `rule`, the three reviewers voting `verdicts`.
fn review(rule: &str, verdicts: [&str; 3]) -> Ran {
    let by_node: Vec<(String, Value)> =
        ["a", "b", "c"].iter().zip(verdicts).map(|(n, v)| (n.to_string(), json!({ "verdict": v, "note": "" }))).collect();
    let reply = move |a: &flow_runtime::proto::AgentRequest| {
        by_node.iter().find(|(n, _)| *n == a.node).map(|(_, v)| v.clone()).expect("a reviewer node")
    };
    run(program(&REVIEW.replace("RULE", rule)), json!({}), reply, |_| Decision::Approve)
}

#[test]
fn a_majority_over_three_different_verdicts_is_no_majority_and_takes_its_path() {
    let ran = review("majority(verdict)", ["approve", "reject", "revise"]);
    assert_eq!(ending(&ran.events), "no_majority");
    let count = ran.output_of("vote");
    assert_eq!(count["decided"], false);
    assert_eq!(count["result"], Value::Null);
    let weights: Vec<f64> = count["votes"].as_array().unwrap().iter().map(|v| v["weight"].as_f64().unwrap()).collect();
    assert_eq!(weights, [1.0, 1.0, 1.0]);
    // Recorded with the three outputs it counted.
    let inputs = ran.events.iter().find_map(|e| match &e.body {
        Body::Computed { node, inputs, .. } if node == "vote" => Some(inputs.keys().cloned().collect::<Vec<_>>()),
        _ => None,
    });
    assert_eq!(inputs, Some(vec!["a".to_string(), "b".to_string(), "c".to_string()]));
}

#[test]
fn two_of_three_is_a_majority() {
    let ran = review("majority(verdict)", ["approve", "reject", "approve"]);
    assert_eq!(ending(&ran.events), "approved");
    let count = ran.output_of("vote");
    assert_eq!(count["votes"][0], json!({ "value": "approve", "weight": 1.0 + 1.0, "branches": ["a", "c"] }));
    assert_eq!(review("majority(verdict)", ["reject", "reject", "approve"]).output_of("vote")["result"], "reject");
}

#[test]
fn weights_and_quorums_decide_as_declared() {
    // a weighs 3 of 5: alone it passes half.
    assert_eq!(ending(&review_events("weighted(verdict, { a: 3, b: 1, c: 1 })", ["approve", "reject", "reject"])), "approved");
    // Equal weights: one vote in three is not half.
    assert_eq!(ending(&review_events("weighted(verdict, { a: 1, b: 1, c: 1 })", ["approve", "reject", "revise"])), "no_majority");
    // A quorum of two: two approvals decide, three different verdicts do not.
    assert_eq!(ending(&review_events("quorum(2, verdict)", ["approve", "reject", "approve"])), "approved");
    assert_eq!(ending(&review_events("quorum(2, verdict)", ["approve", "reject", "revise"])), "no_majority");
    // A quorum of one met by two values at once is a tie: no result.
    assert_eq!(ending(&review_events("quorum(1, verdict)", ["approve", "reject", "reject"])), "rejected");
    assert_eq!(ending(&review_events("quorum(1, verdict)", ["approve", "reject", "revise"])), "no_majority");
}

#[test]
fn trace_check_counts_the_votes_again() {
    let ran = review("majority(verdict)", ["approve", "reject", "revise"]);
    let program = program(&REVIEW.replace("RULE", "majority(verdict)"));
    // A forged count: "approve" decided.
    let original = ran.events.clone();
    let (events, store) = forge_computed(ran, "vote", |v| {
        v["decided"] = json!(true);
        v["result"] = json!("approve");
    });
    let options = tracecheck::Options { artifacts: Some(&store), ..Default::default() };
    let report = tracecheck::check(&program, &events, &options);
    assert!(report.deviations.iter().any(|d| d.code.0 == "T015" && d.message.contains("does not follow")), "{:#?}", report.deviations);
    let report = tracecheck::check(&program, &original, &options);
    assert!(report.conformant, "{:#?}", report.deviations);
}
