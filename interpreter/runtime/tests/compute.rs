//! Computed nodes at run time (reference §6.1, `compute`): the value is
//! made by the control plane from what the agents said, recorded with the
//! digests of its inputs, checked against its type, and trace check makes
//! it again. The workflow is `tests/ui/ok/compute.flow`.

mod common;

use common::{ending, forge_computed, program, run, Ran};
use flow_runtime::tracecheck;
use flow_trace::{Body, Decision, Event};
use serde_json::{json, Value};

fn source() -> String {
    include_str!("../../../tests/ui/ok/compute.flow").to_string()
}

fn said(role: &str, claims: &[(&str, f64)], challenges: &[&str]) -> Value {
    let claims: Vec<Value> = claims.iter().map(|(t, c)| json!({ "text": t, "confidence": c })).collect();
    json!({ "role": role, "claims": claims, "challenges": challenges })
}

/// Runs the panel: `first` and `second` say what they are given, the
/// chair's verdict says whether to end.
fn panel(first: Value, second: Value, end: bool) -> Ran {
    let verdict = json!({ "end": end, "summary": "as discussed" });
    let reply = move |a: &flow_runtime::proto::AgentRequest| match a.node.as_str() {
        "first" => first.clone(),
        "second" => second.clone(),
        _ => verdict.clone(),
    };
    run(program(&source()), json!({ "panel_size": 2 }), reply, |_| Decision::Approve)
}

fn computed(events: &[Event]) -> (&std::collections::BTreeMap<String, Option<flow_trace::ArtifactRef>>, &flow_trace::ArtifactRef) {
    events
        .iter()
        .find_map(|e| match &e.body {
            Body::Computed { node, inputs, output, .. } if node == "check" => Some((inputs, output)),
            _ => None,
        })
        .expect("the check was computed")
}

#[test]
fn agreeing_speakers_make_a_consensus_the_control_plane_computes() {
    let events =
        panel(said("market", &[("ship the beta in may", 0.9)], &[]), said("tech", &[("ship the beta in may please", 0.8)], &[]), true)
            .events;
    assert_eq!(ending(&events), "consensus");
    // The value is recorded with what it read, by digest.
    let (inputs, _) = computed(&events);
    let names: Vec<&str> = inputs.keys().map(String::as_str).collect();
    assert_eq!(names, ["first", "input", "second"]);
    assert!(inputs.values().all(|a| a.as_ref().is_some_and(|a| a.digest.starts_with("sha256:") && a.size > 0)), "{inputs:?}");
    // No model, tool or human was asked for it: it follows the chair's turn
    // with no attempt of its own.
    let check_attempts = events.iter().filter(|e| matches!(&e.body, Body::AttemptStarted { node, .. } if node == "check")).count();
    assert_eq!(check_attempts, 0);
}

#[test]
fn a_chair_ending_on_one_weak_claim_is_not_a_consensus() {
    // One claim, challenged by the other speaker: support 1/2, risk 1.
    let events = panel(said("market", &[("ship now", 0.99)], &[]), said("tech", &[], &["no tests yet"]), true).events;
    assert_eq!(ending(&events), "decided_without_consensus");
    // Split speakers: two clusters of equal weight, no margin.
    let events =
        panel(said("market", &[("ship the beta in may", 0.9)], &[]), said("tech", &[("wait for the security audit", 0.9)], &[]), true)
            .events;
    assert_eq!(ending(&events), "decided_without_consensus");
    // The chair's verdict is the chair's: no end, no ending as consensus.
    let events =
        panel(said("market", &[("ship the beta in may", 0.9)], &[]), said("tech", &[("ship the beta in may please", 0.8)], &[]), false)
            .events;
    assert_eq!(ending(&events), "open");
}

#[test]
fn the_recorded_values_are_the_computed_ones() {
    let ran = panel(
        said("market", &[("ship the beta in may", 0.9), ("hire two testers", 0.5)], &["budget"]),
        said("tech", &[("ship the beta in may please", 0.7)], &[]),
        true,
    );
    let events = &ran.events;
    let output = events.iter().find_map(|e| match &e.body {
        Body::NodeCompleted { node, output, .. } if node == "check" => output.clone(),
        _ => None,
    });
    assert_eq!(output.as_ref(), Some(computed(events).1));
    // Two clusters: {ship… ×2: weight 1.6, 2 roles, size 2} and {hire…: 0.5}.
    // support 2/2, confidence 0.8, risk 1/3, margin (1.6-0.5)/2.1,
    // disagreement 0.5/2.1, score 0.5 + 0.28 - 0.05.
    let value = ran.output_of("check");
    let close = |field: &str, want: f64| {
        let got = value[field].as_f64().unwrap_or(f64::NAN);
        assert!((got - want).abs() < 1e-9, "{field}: {got} != {want}");
    };
    close("support", 1.0);
    close("confidence", 0.8);
    close("risk", 1.0 / 3.0);
    close("margin", 1.1 / 2.1);
    close("disagreement", 0.5 / 2.1);
    close("score", 0.5 + 0.35 * 0.8 - 0.15 / 3.0);
    assert_eq!(value["clusters"], json!(2));
    // 0.73: below the 0.75 a consensus needs.
    assert_eq!(value["agreed"], json!(false));
    assert_eq!(ending(events), "decided_without_consensus");
}

#[test]
fn trace_check_makes_the_value_again_and_refuses_a_forged_one() {
    let ran = panel(said("market", &[("ship now", 0.99)], &[]), said("tech", &[], &["no tests yet"]), true);
    let program = program(&source());
    // A forged check: `agreed: true` in place of the computed value, its
    // artifact stored and named by the `computed` event and the completion.
    let original = ran.events.clone();
    let (events, store) = forge_computed(ran, "check", |v| {
        v["agreed"] = json!(true);
        v["score"] = json!(0.99);
    });
    let fake = events
        .iter()
        .find_map(|e| match &e.body {
            Body::Computed { output, .. } => Some(output.clone()),
            _ => None,
        })
        .expect("computed");
    let options = tracecheck::Options { artifacts: Some(&store), ..Default::default() };
    let report = tracecheck::check(&program, &events, &options);
    let codes: Vec<&str> = report.deviations.iter().map(|d| d.code.0).collect();
    assert_eq!(codes, ["T015"], "{:#?}", report.deviations);
    assert!(report.deviations[0].message.contains("does not follow from its inputs"), "{:#?}", report.deviations);
    // The untouched run is conformant with its artifacts (what `run` held).
    let report = tracecheck::check(&program, &original, &options);
    assert!(report.conformant, "{:#?}", report.deviations);
    // Inputs other than the node reads: `second` named by another digest.
    let mut events = original.clone();
    for e in &mut events {
        if let Body::Computed { inputs, .. } = &mut e.body {
            inputs.insert("second".into(), Some(fake.clone()));
        }
    }
    let report = tracecheck::check(&program, &events, &options);
    assert!(report.deviations.iter().any(|d| d.code.0 == "T015" && d.message.contains("other inputs")), "{:#?}", report.deviations);
    // Without the artifacts the value is not made again, and the report says so.
    let report = tracecheck::check(&program, &original, &tracecheck::Options::default());
    assert!(report.notes.iter().any(|n| n.contains("computed value(s) not made again")), "{:?}", report.notes);
}

const FAILING: &str = r#"
provider p: scripted
agent a { provider: p }
workflow w {
  input: { n: int }
  start: ask
  node ask: agent a { output: { level: string, items: [int] } }
  node mean: compute {
    output: { mean: float, level: "low" | "high" }
    value: { mean: sum(ask.items) / input.n, level: ask.level }
    on invalid_output -> goto(bad_level)
    on failure -> goto(no_mean)
  }
  node ok: end ok
  node bad_level: end bad_level { status: failure }
  node no_mean: end no_mean { status: failure }
  ask -> mean
  mean -> ok
}
"#;

#[test]
fn a_value_that_cannot_be_made_or_is_not_of_its_type_fails_the_node_as_declared() {
    let program = program(FAILING);
    let reply = |level: &str| {
        let v = json!({ "level": level, "items": [1, 2, 3] });
        move |_: &flow_runtime::proto::AgentRequest| v.clone()
    };
    let ran = run(program.clone(), json!({ "n": 2 }), reply("low"), |_| Decision::Approve);
    assert_eq!(ending(&ran.events), "ok");
    assert_eq!(ran.output_of("mean"), json!({ "mean": 3.0, "level": "low" }));
    // Divided by zero: the expression has no value; `failure`'s handler.
    let ran = run(program.clone(), json!({ "n": 0 }), reply("low"), |_| Decision::Approve);
    assert_eq!(ending(&ran.events), "no_mean");
    let (code, message) = ran.failure_of("mean").expect("mean failed");
    assert_eq!(code, flow_trace::ErrorCode::EvalError);
    assert!(message.contains("divides by zero"), "{message}");
    assert!(!ran.events.iter().any(|e| matches!(e.body, Body::Computed { .. })));
    // A level outside the output type's: `invalid_output`'s handler.
    let ran = run(program, json!({ "n": 2 }), reply("medium"), |_| Decision::Approve);
    assert_eq!(ending(&ran.events), "bad_level");
}

/// Two computations of one type, swapped by naming the other one.
const STRATEGIES: &str = r#"
provider p: scripted
agent a { provider: p }
type Scores = { xs: [float] }
compute mean_of { input: Scores, output: { v: float }, value: { v: avg(input.xs) } }
compute best_of { input: Scores, output: { v: float }, let: { top: max(input.xs) }, value: { v: top } }
compute level_of { input: { label: "low" | "high" }, output: { ok: bool }, value: { ok: input.label == "high" } }
workflow w {
  start: ask
  node ask: agent a { output: { scores: [float], label: string } }
  node score: compute STRATEGY { args: { xs: ask.scores } }
  node level: compute level_of { args: { label: ask.label } }
  node pass: end pass
  node fail: end fail { status: partial }
  ask -> score -> level
  level -> pass when score.v >= 0.5 and level.ok
  level -> fail else
}
"#;

#[test]
fn a_declared_computation_is_applied_to_its_args_and_swapped_by_name() {
    let said = json!({ "scores": [0.2, 0.3, 0.9], "label": "high" });
    let reply = move |_: &flow_runtime::proto::AgentRequest| said.clone();
    // The mean is under 0.5, the best over it.
    let mean = run(program(&STRATEGIES.replace("STRATEGY", "mean_of")), json!({}), reply.clone(), |_| Decision::Approve);
    assert_eq!(ending(&mean.events), "fail");
    assert!((mean.output_of("score")["v"].as_f64().unwrap() - 1.4 / 3.0).abs() < 1e-9);
    let best = run(program(&STRATEGIES.replace("STRATEGY", "best_of")), json!({}), reply, |_| Decision::Approve);
    assert_eq!(ending(&best.events), "pass");
    assert_eq!(best.output_of("score"), json!({ "v": 0.9 }));
    // What the node read is what its args read: the agent's output.
    let inputs = best.events.iter().find_map(|e| match &e.body {
        Body::Computed { node, inputs, .. } if node == "score" => Some(inputs.keys().cloned().collect::<Vec<_>>()),
        _ => None,
    });
    assert_eq!(inputs, Some(vec!["ask".to_string()]));
}

#[test]
fn a_computations_input_is_held_to_its_type_at_run_time() {
    // `label` is a string where the computation takes "low" | "high": a
    // value outside it fails the node before anything is computed.
    let said = json!({ "scores": [0.9], "label": "medium" });
    let ran = run(program(&STRATEGIES.replace("STRATEGY", "best_of")), json!({}), move |_| said.clone(), |_| Decision::Approve);
    let (code, message) = ran.failure_of("level").expect("level failed");
    assert_eq!(code, flow_trace::ErrorCode::InvalidInput);
    assert!(message.contains("level_of"), "{message}");
    assert!(!ran.events.iter().any(|e| matches!(&e.body, Body::Computed { node, .. } if node == "level")));
}
