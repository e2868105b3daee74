//! The decision meeting's consensus check is computed, not claimed (issue
//! "Computed, not claimed"; seed 000, Meetkat): the control plane computes
//! std.consensus from what the specialists said, the synthesis agent owns
//! the end decision, and a meeting ends as a consensus only when the
//! computed signals agree — which the recorded check shows.
#![allow(clippy::disallowed_methods)]

mod common;
use common::*;

use serde_json::Value;
use std::path::Path;

/// The decision meeting copied to a scratch directory, its cassette
/// edited by `edit`, run (exit `code`: 0 for success, 5 for a partial
/// ending); the run directory.
fn meeting(code: i32, edit: impl Fn(String) -> String) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    copy_tree(&repo().join("examples/decision_meeting"), d);
    let cassette = d.join("cassettes/decision_meeting.yaml");
    let original = std::fs::read_to_string(&cassette).unwrap();
    std::fs::write(&cassette, edit(original)).unwrap();
    let run = d.join("run");
    let out = flow(&["run", "decision_meeting.flow", "--run-dir", run.to_str().unwrap(), "--fake-clock", "-q", "--no-prompt"], d);
    assert_eq!(out.status.code(), Some(code), "{}", text(&out));
    let check = flow(&["trace", "check", run.to_str().unwrap(), "--plan", "decision_meeting.flow"], d);
    assert!(check.status.success(), "trace check: {}", text(&check));
    (dir, run)
}

fn ending(run: &Path) -> String {
    let events = events(run);
    let last = events.last().unwrap();
    assert_eq!(last["kind"], "run_terminated");
    last["payload"]["reason"].as_str().unwrap().to_string()
}

/// Every consensus check the run computed, in order: its recorded value.
fn checks(run: &Path) -> Vec<Value> {
    computed(run, "check")
}

#[test]
fn the_meeting_ends_as_a_consensus_when_the_computed_signals_agree() {
    let (_dir, run) = meeting(0, |text| text);
    assert_eq!(ending(&run), "consensus");
    let checks = checks(&run);
    assert_eq!(checks.len(), 3, "one check per round");
    let speakers: Vec<&Value> = checks.iter().map(|c| &c["speakers"]).collect();
    assert_eq!(speakers, [1, 2, 3]);
    let last = &checks[2];
    assert_eq!(last["signals_met"], true);
    assert_eq!(last["end_reason"], "consensus");
    assert!(last["score"].as_f64().unwrap() >= 0.75, "{last}");
}

#[test]
fn a_synthesis_agent_ending_on_one_speaker_does_not_end_the_meeting_as_a_consensus() {
    // The synthesis agent ends the meeting in round 1, after one specialist
    // spoke: the agent's decision stands, but not as a consensus.
    let (_dir, run) = meeting(5, |text| text.replacen("should_end_meeting: false", "should_end_meeting: true", 1));
    assert_eq!(ending(&run), "synthesis_decision");
    let checks = checks(&run);
    assert_eq!(checks.len(), 1);
    let check = &checks[0];
    // The recorded check shows the computed values: one speaker, two claims
    // in two clusters, the thresholds that failed, and the disagreement
    // between the agent and the signals.
    assert_eq!(check["speakers"], 1);
    assert_eq!(check["claims"], 2);
    assert_eq!(check["clusters"], 2);
    assert_eq!(check["verdicts"]["quorum"], false);
    assert_eq!(check["verdicts"]["score"], false);
    assert_eq!(check["signals_met"], false);
    assert_eq!(check["agent_ends"], true);
    assert_eq!(check["ended"], true);
    assert_eq!(check["end_reason"], "synthesis_decision");
}

#[test]
fn inflated_confidence_from_one_claim_is_still_not_a_consensus() {
    // One specialist, one claim at full confidence, no challenge: the
    // score the agent might report is beside the point — one voice is no
    // quorum, and the meeting, ended by the agent, is not a consensus.
    let (_dir, run) = meeting(5, |text| {
        let text = text.replacen("should_end_meeting: false", "should_end_meeting: true", 1);
        let text = text.replacen(
            "      - { text: Ship offline sync in Q3, confidence: 0.85 }\n",
            "      - { text: Ship offline sync in Q3, confidence: 1.0 }\n",
            1,
        );
        let text = text.replacen("      - { text: Field customers rank offline mode as their top request, confidence: 0.7 }\n", "", 1);
        text.replacen("      challenges: [Deferring to Q4 risks renewals in the field segment]\n", "      challenges: []\n", 1)
    });
    assert_eq!(ending(&run), "synthesis_decision");
    let check = &checks(&run)[0];
    assert_eq!(check["claims"], 1);
    assert_eq!(check["score"].as_f64(), Some(0.85), "0.5 + 0.35: {check}");
    assert_eq!(check["verdicts"]["score"], true);
    assert_eq!(check["verdicts"]["quorum"], false);
    assert_eq!(check["end_reason"], "synthesis_decision");
}

/// The `consensus_check` records of the run, in order: their values.
fn recorded_checks(run: &Path) -> Vec<Value> {
    events(run)
        .into_iter()
        .filter(|e| e["kind"] == "recorded" && e["payload"]["name"] == "consensus_check")
        .map(|e| {
            assert_eq!(e["payload"]["node"], "check");
            assert!(e["payload"].get("errors").is_none(), "every field made: {e}");
            e["payload"]["values"].clone()
        })
        .collect()
}

#[test]
fn each_round_records_the_consensus_check_and_shows_when_agent_and_signals_disagree() {
    // The seed's `consensus.check` event: one per round, with the computed
    // values, the verdicts, whether the meeting ended and why.
    let (dir, run) = meeting(0, |text| text);
    let recorded = recorded_checks(&run);
    let computed = checks(&run);
    assert_eq!(recorded.len(), computed.len());
    for (r, c) in recorded.iter().zip(&computed) {
        for field in ["score", "margin_top1_top2", "disagreement", "verdicts", "signals_met", "agent_ends", "ended", "end_reason"] {
            assert_eq!(r[field], c[field], "{field}");
        }
        assert_eq!(r["agent_and_signals_disagree"], false, "agent and signals agree each round: {r}");
    }
    assert_eq!(recorded.last().unwrap()["end_reason"], "consensus");
    // The agent ending alone: the record says the two disagree.
    let (_other, early) = meeting(5, |text| text.replacen("should_end_meeting: false", "should_end_meeting: true", 1));
    let record = &recorded_checks(&early)[0];
    assert_eq!(record["agent_and_signals_disagree"], true);
    assert_eq!(record["end_reason"], "synthesis_decision");
    // `flow show` prints each record.
    let shown = flow(&["show", run.to_str().unwrap()], dir.path());
    assert!(shown.status.success(), "{}", text(&shown));
    let lines = String::from_utf8_lossy(&shown.stdout).lines().filter(|l| l.contains("≡ record consensus_check by node check")).count();
    assert_eq!(lines, recorded.len(), "{}", text(&shown));
}
