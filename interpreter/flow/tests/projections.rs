//! Projections (issue "Computed, not claimed", deliver 4): a declared,
//! pure function of a run's recorded events, rendered by `flow project RUN
//! NAME` — the Meetkat minutes, the FlockMind evidence report.
#![allow(clippy::disallowed_methods)]

mod common;
use common::*;

use serde_json::Value;
use std::path::{Path, PathBuf};

/// An example copied to a scratch directory, one of its files edited, run
/// (exit `code`) with the fake clock and the run id `id`; the directory
/// and the run directory.
fn run_example(name: &str, id: &str, code: i32, edit: Option<(&str, &dyn Fn(String) -> String)>) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    copy_tree(&repo().join("examples").join(name), d);
    if let Some((file, edit)) = edit {
        let original = std::fs::read_to_string(d.join(file)).unwrap();
        let edited = edit(original.clone());
        assert_ne!(edited, original, "the edit changed nothing");
        std::fs::write(d.join(file), edited).unwrap();
    }
    let run = d.join("run");
    let flow_file = format!("{name}.flow");
    let out = flow(&["run", &flow_file, "--run-dir", run.to_str().unwrap(), "--run-id", id, "--fake-clock", "-q", "--no-prompt"], d);
    assert_eq!(out.status.code(), Some(code), "{}", text(&out));
    (dir, run)
}

/// `flow project RUN NAME --plan PLAN` in `dir`: exit code, stdout, stderr.
fn project(dir: &Path, run: &Path, name: Option<&str>, plan: &str) -> (i32, String, String) {
    let mut args = vec!["project", run.to_str().unwrap()];
    args.extend(name);
    args.extend(["--plan", plan]);
    let out = flow(&args, dir);
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).to_string(), String::from_utf8_lossy(&out.stderr).to_string())
}

#[test]
fn the_minutes_are_a_deterministic_projection_of_the_meeting() {
    let (one, run_one) = run_example("decision_meeting", "first", 0, None);
    let (code, minutes, err) = project(one.path(), &run_one, Some("minutes"), "decision_meeting.flow");
    assert_eq!(code, 0, "{err}");
    assert!(minutes.starts_with("# Minutes: Should we ship the offline sync feature in the Q3 release?\n"), "{minutes}");
    // Round by round, from the events: the speakers in the order the host
    // gave the floor, and the check the control plane computed each round.
    let rounds: Vec<&str> = minutes.lines().filter(|l| l.starts_with("## Round")).collect();
    assert_eq!(rounds, ["## Round 1", "## Round 2", "## Round 3"]);
    let speakers: Vec<&str> = minutes.lines().filter(|l| l.starts_with("**Focus**")).collect();
    assert_eq!(speakers.len(), 3);
    assert!(speakers[1].contains("(risk_specialist)"), "{minutes}");
    let checks: Vec<&str> = minutes.lines().filter(|l| l.starts_with("**Check** (token_jaccard, computed)")).collect();
    assert!(checks[0].contains("1 speaker(s), score 0.72") && checks[0].ends_with("thresholds met: no."), "{minutes}");
    assert!(checks[2].contains("3 speaker(s), score 0.76") && checks[2].ends_with("thresholds met: yes."), "{minutes}");
    assert!(minutes.contains("- Ship offline sync in Q3 behind a feature flag (confidence 0.9)"), "{minutes}");
    assert!(minutes.contains("Ended as **consensus** (success).\nDecision: ship_behind_flag.\n"), "{minutes}");
    // Another run of the same meeting (another id, another directory):
    // the same minutes, byte for byte.
    let (two, run_two) = run_example("decision_meeting", "second", 0, None);
    let (_, again, _) = project(two.path(), &run_two, Some("minutes"), "decision_meeting.flow");
    assert_eq!(minutes, again);
    // To a file, with -o.
    let file = one.path().join("minutes.md");
    let out = flow(
        &["project", run_one.to_str().unwrap(), "minutes", "--plan", "decision_meeting.flow", "-o", file.to_str().unwrap()],
        one.path(),
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(file).unwrap(), minutes);
}

#[test]
fn the_minutes_say_how_a_meeting_the_agent_ended_early_ended() {
    let edit = |text: String| text.replacen("should_end_meeting: false", "should_end_meeting: true", 1);
    let (dir, run) = run_example("decision_meeting", "early", 5, Some(("cassettes/decision_meeting.yaml", &edit)));
    let (code, minutes, err) = project(dir.path(), &run, Some("minutes"), "decision_meeting.flow");
    assert_eq!(code, 0, "{err}");
    assert_eq!(minutes.lines().filter(|l| l.starts_with("## Round")).count(), 1);
    assert!(minutes.contains("End the meeting: yes."), "{minutes}");
    assert!(minutes.contains("thresholds met: no."), "{minutes}");
    assert!(minutes.contains("Ended as **synthesis_decision** (partial)."), "{minutes}");
}

#[test]
fn the_evidence_report_shows_what_the_gates_saw() {
    let (dir, run) = run_example("research_writer", "report", 0, None);
    let (code, out, err) = project(dir.path(), &run, Some("evidence_report"), "research_writer.flow");
    assert_eq!(code, 0, "{err}");
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["minimum_citations"], 2);
    let pack = &report["packs"][0];
    let cited: Vec<&str> = pack["cited"].as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(cited, ["lewis2020", "zakka2024", "kresevic2024"]);
    assert_eq!(pack["dropped"][0]["citation_id"], "ragvendor2025");
    assert_eq!(report["linkage"][0]["claims"].as_array().unwrap().len(), 2);
    let gates: Vec<(&str, &str)> =
        report["gates"].as_array().unwrap().iter().map(|g| (g["gate"].as_str().unwrap(), g["outcome"].as_str().unwrap())).collect();
    assert_eq!(gates, [("evidence_gate", "PASS"), ("linkage_gate", "PASS")]);
    assert_eq!(report["ended"]["reason"], "published");

    // A run the evidence gate stopped: partial coverage, no outline, no linkage.
    let edit = |text: String| text.replace("\"minimum_citations\": 2", "\"minimum_citations\": 3");
    let (dir, run) = run_example("research_writer", "blocked", 1, Some(("research_writer.input.json", &edit)));
    let (code, out, err) = project(dir.path(), &run, Some("evidence_report"), "research_writer.flow");
    assert_eq!(code, 0, "{err}");
    let report: Value = serde_json::from_str(&out).unwrap();
    let statuses: Vec<&Value> = report["packs"][0]["coverage"].as_array().unwrap().iter().map(|c| &c["status"]).collect();
    assert_eq!(statuses, ["partial", "partial"]);
    assert_eq!(report["linkage"], serde_json::json!([]));
    assert_eq!(report["gates"][0]["outcome"], "BLOCK");
    assert_eq!(report["ended"], serde_json::json!({ "status": "failure", "reason": "search_evidence_gate" }));
}

#[test]
fn flow_project_lists_projections_and_refuses_what_it_cannot_render() {
    let (dir, run) = run_example("research_writer", "errors", 0, None);
    let d = dir.path();
    let (code, list, _) = project(d, &run, None, "research_writer.flow");
    assert_eq!(code, 0);
    assert!(list.starts_with("evidence_report      of research_writer — The evidence behind the article"), "{list}");
    // An unknown name: a usage error with the close one.
    let (code, _, err) = project(d, &run, Some("evidence_reprot"), "research_writer.flow");
    assert_eq!(code, 2);
    assert!(err.contains("declares no projection `evidence_reprot`") && err.contains("did you mean `evidence_report`?"), "{err}");
    // Another plan than the run's.
    copy_tree(&repo().join("examples/decision_meeting"), &d.join("meeting"));
    let (code, _, err) = project(d, &run, Some("minutes"), "meeting/decision_meeting.flow");
    assert_eq!(code, 2);
    assert!(err.contains("the run was made from another plan"), "{err}");
    // A trace file without its artifacts beside it: the outputs cannot be read.
    let alone = d.join("alone");
    std::fs::create_dir_all(&alone).unwrap();
    std::fs::copy(run.join("trace.jsonl"), alone.join("trace.jsonl")).unwrap();
    let (code, _, err) = project(d, &alone.join("trace.jsonl"), Some("evidence_report"), "research_writer.flow");
    assert_eq!(code, 1);
    assert!(err.contains("no artifacts/ beside the trace"), "{err}");
    // A stored output that is not what the trace references.
    let events = events(&run);
    let evidence = events.iter().find(|e| e["kind"] == "computed" && e["payload"]["node"] == "evidence").unwrap();
    let hex = evidence["payload"]["output"]["digest"].as_str().unwrap().trim_start_matches("sha256:").to_string();
    let stored = run.join("artifacts").join(&hex[..2]).join(format!("{hex}.json"));
    std::fs::write(&stored, "{\"items\": []}").unwrap();
    let (code, _, err) = project(d, &run, Some("evidence_report"), "research_writer.flow");
    assert_eq!(code, 1);
    assert!(err.contains("the output of `evidence`") && err.contains("cannot be read"), "{err}");
}
