//! The function library at run time (reference §4.3): a tool node's
//! arguments computed from an agent's output with binding functions, sets,
//! tokens and records, and a guard over them that picks the ending. The
//! workflow is `tests/ui/ok/functions.flow`, which the checker accepts.

mod common;

use common::{ending, program, run};
use flow_trace::Decision;
use serde_json::{json, Value};

fn source() -> String {
    include_str!("../../../tests/ui/ok/functions.flow").to_string()
}

fn minutes(first_claim: &str, tags: Value) -> Value {
    json!({
        "claims": [
            { "speaker": "Ana", "text": first_claim, "support": 3, "confidence": 0.8 },
            { "speaker": "Bo", "text": "Costs are high", "support": 0, "confidence": 0.35 },
            { "speaker": "ana", "text": "Ship in May", "support": 5, "confidence": 0.9 },
        ],
        "tags": tags,
        "meta": { "chair": "Ana" },
    })
}

#[test]
fn arguments_and_guards_are_computed_by_the_control_plane() {
    let reply = minutes("Ship the launch plan", json!(["final", "budget"]));
    let ran = run(program(&source()), json!({ "topic": "the launch plan", "quorum": 2 }), |_| reply.clone(), |_| Decision::Approve);
    let summary = &ran.tools.first().expect("the summary tool was called").input;
    assert_eq!(summary["speakers"], json!(["Ana", "Bo", "ana"]));
    assert_eq!(summary["strongest"], json!(["Ship in May", "Ship the launch plan", "Costs are high"]));
    assert_eq!(summary["by_speaker"][0]["key"], json!("ana"));
    assert_eq!(summary["by_speaker"][0]["items"].as_array().map(Vec::len), Some(2));
    assert_eq!(summary["words"].as_array().map(|w| w[..3].to_vec()), Some(vec![json!("ship"), json!("the"), json!("launch")]));
    assert_eq!(summary["mean_confidence"], json!(0.68));
    assert_eq!(summary["pairs"], json!([{ "first": "final", "second": "chair" }]));
    assert_eq!(summary["room"], json!("main"));
    // Two claims have support, the first shares 3 of 4 tokens with the
    // topic, no tag vetoes, `final` is a tag, the support sums past 2.
    assert_eq!(ending(&ran.events), "ok");
}

#[test]
fn the_guard_fails_on_the_values_it_computes() {
    let program = program(&source());
    let input = json!({ "topic": "the launch plan", "quorum": 2 });
    // A vetoing tag (matched by the regular expression).
    let vetoed = minutes("Ship the launch plan", json!(["final", "veto:legal"]));
    assert_eq!(ending(&run(program.clone(), input.clone(), |_| vetoed.clone(), |_| Decision::Approve).events), "split");
    // A first claim with no words in common with the topic.
    let off_topic = minutes("Hire more staff", json!(["final"]));
    assert_eq!(ending(&run(program.clone(), input.clone(), |_| off_topic.clone(), |_| Decision::Approve).events), "split");
    // A quorum the supported claims do not reach.
    let quorum = json!({ "topic": "the launch plan", "quorum": 3 });
    let reply = minutes("Ship the launch plan", json!(["final"]));
    assert_eq!(ending(&run(program, quorum, |_| reply.clone(), |_| Decision::Approve).events), "split");
}
