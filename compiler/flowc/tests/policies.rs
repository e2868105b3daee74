//! The model checker through `flowc verify`: the examples' policies hold,
//! the broken twins' intended violations come with witnesses that are
//! valid trace events, lassos, `--witness-dir`, and the state bound.
// Tests read and write files: the pure-core lint does not apply.
#![allow(clippy::disallowed_methods)]

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn verify_json(file: &str, extra: &[&str]) -> (i32, Value) {
    let output = Command::new(env!("CARGO_BIN_EXE_flowc"))
        .args(["verify", file, "--format", "json"])
        .args(extra)
        .current_dir(repo_root())
        .output()
        .expect("flowc runs");
    let doc: Value =
        serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{file}: {e}: {}", String::from_utf8_lossy(&output.stdout)));
    (output.status.code().unwrap_or(-1), doc)
}

fn policy<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["policies"].as_array().and_then(|ps| ps.iter().find(|p| p["name"] == name)).unwrap_or_else(|| panic!("no policy {name} in {doc}"))
}

fn event_validator() -> jsonschema::Validator {
    let text = std::fs::read_to_string(repo_root().join("stdlib/schemas/trace-event.schema.json")).expect("schema");
    let schema: Value = serde_json::from_str(&text).expect("schema JSON");
    jsonschema::validator_for(&schema).expect("valid schema")
}

const EXAMPLES: [&str; 6] = ["agent_proxy", "decision_meeting", "delegation", "harness", "research_writer", "short_video"];

#[test]
fn every_policy_of_every_example_holds() {
    for name in EXAMPLES {
        let (code, doc) = verify_json(&format!("examples/{name}/{name}.flow"), &[]);
        assert_eq!(code, 0, "{name}: {doc}");
        let policies = doc["policies"].as_array().expect("policies");
        assert!(!policies.is_empty(), "{name} declares policies");
        for p in policies {
            assert_eq!(p["status"], "holds", "{name}: {p}");
            assert!(p["states"].as_u64().unwrap_or(0) > 0, "{name}: the checker explored states: {p}");
        }
    }
}

#[test]
fn broken_twins_violate_their_intended_policy_with_a_schema_valid_witness() {
    let validator = event_validator();
    // twin, policy, the event kind and node/gate the violation ends on (None: an open obligation).
    let cases = [
        ("agent_proxy", "merge_needs_pm", Some(("node_started", "merge"))),
        ("research_writer", "outline_after_evidence", Some(("node_started", "outline"))),
        ("short_video", "compose_after_audio_gate", Some(("node_started", "compose"))),
        ("decision_meeting", "meeting_terminates", None),
    ];
    for (name, policy_name, last) in cases {
        let (code, doc) = verify_json(&format!("examples/{name}/{name}.broken.flow"), &[]);
        assert_eq!(code, 1, "{name}");
        let p = policy(&doc, policy_name);
        assert_eq!(p["status"], "violated", "{name}: {p}");
        let diag = doc["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["code"] == "E1001" && d["message"].as_str().unwrap().contains(policy_name));
        assert!(diag.is_some(), "{name}: an E1001 diagnostic names the policy");
        let trace = p["witness"]["trace"].as_array().unwrap_or_else(|| panic!("{name}: witness trace: {p}"));
        assert_eq!(trace[0]["kind"], "run_started");
        for (i, event) in trace.iter().enumerate() {
            assert_eq!(event["seq"], i as u64 + 1, "{name}: seq without gaps");
            let errors: Vec<String> = validator.iter_errors(event).map(|e| e.to_string()).collect();
            assert!(errors.is_empty(), "{name}: event {event} is not valid: {errors:?}");
        }
        // The violating event is the last policy event (a tool call is followed by its completion).
        let bookkeeping = ["tool_call_completed", "attempt_started", "attempt_completed", "attempt_failed", "run_paused"];
        let end = trace.iter().rev().find(|e| !bookkeeping.contains(&e["kind"].as_str().unwrap_or(""))).unwrap();
        match last {
            Some((kind, subject)) => {
                assert_eq!(end["kind"], kind, "{name}: {end}");
                let payload = &end["payload"];
                assert!(payload["node"] == subject || payload["tool"] == subject, "{name}: {end}");
                assert!(p["witness"]["cycle_start"].is_null());
            }
            None => {
                // A lasso: the meeting can talk forever.
                let start = p["witness"]["cycle_start"].as_u64().unwrap_or_else(|| panic!("{name}: a lasso: {p}"));
                let steps = p["witness"]["steps"].as_array().unwrap();
                assert!((start as usize) < steps.len());
                assert!(!trace.iter().any(|e| e["kind"] == "run_terminated"), "{name}: a lasso never terminates");
            }
        }
    }
}

#[test]
fn witnesses_are_shortest_for_a_safety_violation() {
    let (_, doc) = verify_json("tests/ui/policies/violated.flow", &[]);
    let p = policy(&doc, "reviewed_first");
    let kinds: Vec<&str> = p["witness"]["trace"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    // build starts and completes (with its attempt), the edge, ship starts: nothing shorter breaks the policy.
    assert_eq!(
        kinds,
        [
            "run_started",
            "node_started",
            "attempt_started",
            "attempt_completed",
            "node_completed",
            "edge_taken",
            "node_started",
            "attempt_started"
        ]
    );
    assert_eq!(policy(&doc, "ends")["status"], "holds");
    let lasso = policy(&doc, "answered");
    assert_eq!(lasso["status"], "violated");
    assert!(lasso["witness"]["cycle_start"].is_u64());
}

#[test]
fn the_state_bound_gives_unknown_never_holds() {
    let (code, doc) = verify_json("examples/harness/harness.flow", &["--max-states", "5"]);
    assert_eq!(code, 0, "unknown is a warning: {doc}");
    for p in doc["policies"].as_array().unwrap() {
        assert_eq!(p["status"], "unknown", "{p}");
    }
    assert!(doc["diagnostics"].as_array().unwrap().iter().any(|d| d["code"] == "W1001"));
}

#[test]
fn witness_dir_writes_violations_and_positive_witnesses() {
    let tmp = tempfile::Builder::new().prefix("flowc-witness-").tempdir().expect("temp dir");
    // A directory `--witness-dir` creates.
    let dir = tmp.path().join("witnesses");
    let status = Command::new(env!("CARGO_BIN_EXE_flowc"))
        .args(["verify", "examples/research_writer/research_writer.broken.flow", "--witness-dir"])
        .arg(&dir)
        .current_dir(repo_root())
        .output()
        .expect("flowc runs")
        .status;
    assert_eq!(status.code(), Some(1));
    let index: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("index.json")).expect("index.json")).expect("JSON");
    let violations = index["violations"].as_array().unwrap();
    assert!(violations.iter().any(|v| v["policy"] == "outline_after_evidence"), "{index}");
    let validator = event_validator();
    for v in violations {
        let text = std::fs::read_to_string(dir.join(v["file"].as_str().unwrap())).expect("witness file");
        for line in text.lines() {
            let event: Value = serde_json::from_str(line).expect("JSONL");
            assert!(validator.is_valid(&event), "{line}");
        }
    }
    let cover = index["cover"].as_array().unwrap();
    assert!(!cover.is_empty(), "positive witnesses: {index}");
    for c in cover {
        let text = std::fs::read_to_string(dir.join(c["file"].as_str().unwrap())).expect("cover file");
        let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        assert_eq!(last["kind"], "run_terminated", "a positive witness is a whole run: {}", c["file"]);
    }
    // The gate's PASS outlet is covered by a run that records it.
    let pass = cover.iter().find(|c| c["obligation"] == "gate_outlet:evidence_gate:PASS").expect("PASS outlet covered");
    let text = std::fs::read_to_string(dir.join(pass["file"].as_str().unwrap())).unwrap();
    assert!(text.contains("\"outcome\":\"PASS\""), "{text}");
}
