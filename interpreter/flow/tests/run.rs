//! `flow run` end to end: deterministic runs with a fake clock, traces
//! valid against the published schema, crash-and-resume at every event
//! boundary, pauses for decisions, budgets, repair, record/replay.
#![allow(clippy::disallowed_methods)]

mod common;
use common::*;

use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// The trace holds against the schema, `seq` is 1..n without gaps, and
/// every event but the run's start (and resumes) names an earlier parent.
fn assert_valid_trace(run_dir: &Path) -> Vec<Value> {
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(repo().join("stdlib/schemas/trace-event.schema.json")).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let events = events(run_dir);
    assert!(!events.is_empty());
    let mut ids = std::collections::HashSet::new();
    for (i, event) in events.iter().enumerate() {
        let errors: Vec<String> = validator.iter_errors(event).map(|e| format!("{} at {}", e, e.instance_path())).collect();
        assert!(errors.is_empty(), "event {} is invalid: {errors:?}\n{event}", i + 1);
        assert_eq!(event["seq"], (i + 1) as u64, "seq has a gap at line {}", i + 1);
        let kind = event["kind"].as_str().unwrap();
        match event.get("parent_event_id").and_then(Value::as_str) {
            Some(parent) => assert!(ids.contains(parent), "event {} names a parent {parent} that is not earlier", i + 1),
            None => {
                assert!(matches!(kind, "run_started" | "run_resumed" | "run_paused"), "event {} ({kind}) has no parent_event_id", i + 1)
            }
        }
        ids.insert(event["event_id"].as_str().unwrap().to_string());
    }
    events
}

fn kinds(events: &[Value], kind: &str) -> usize {
    events.iter().filter(|e| e["kind"] == kind).count()
}

fn last(events: &[Value]) -> &Value {
    events.last().unwrap()
}

#[test]
fn research_writer_runs_offline_with_no_flags() {
    let scratch = tempfile::tempdir().unwrap();
    let file = repo().join("examples/research_writer/research_writer.flow");
    let out = flow_env(&["run", file.to_str().unwrap()], scratch.path(), &[]);
    assert!(out.status.success(), "{}", text(&out));
    // The default run directory is printed and lives under .flow/runs/.
    let runs: Vec<_> = std::fs::read_dir(scratch.path().join(".flow/runs")).unwrap().collect();
    assert_eq!(runs.len(), 1);
    let run_dir = runs[0].as_ref().unwrap().path();
    assert!(text(&out).contains(&run_dir.file_name().unwrap().to_string_lossy().to_string()));
    let events = assert_valid_trace(&run_dir);
    let end = last(&events);
    assert_eq!(end["kind"], "run_terminated");
    assert_eq!(end["payload"]["reason"], "published");
    assert_eq!(end["payload"]["status"], "success");
    // Review asked for a rewrite once: write ran twice, outline once.
    let started = |node: &str| events.iter().filter(|e| e["kind"] == "node_started" && e["payload"]["node"] == node).count();
    assert_eq!((started("research"), started("outline"), started("write"), started("review")), (1, 1, 2, 2));
}

#[test]
fn fake_clock_runs_are_deterministic_and_match_the_snapshot() {
    let file = repo().join("examples/research_writer/research_writer.flow");
    let mut shows = Vec::new();
    for _ in 0..2 {
        let dir = tempfile::tempdir().unwrap();
        let run_dir = dir.path().join("run");
        let out = flow_env(
            &["run", file.to_str().unwrap(), "--run-dir", run_dir.to_str().unwrap(), "--run-id", "snap", "--fake-clock", "-q"],
            dir.path(),
            &[],
        );
        assert!(out.status.success(), "{}", text(&out));
        let show = flow_env(&["show", run_dir.to_str().unwrap()], dir.path(), &[]);
        shows.push(String::from_utf8_lossy(&show.stdout).replace(run_dir.to_str().unwrap(), "RUN_DIR"));
    }
    assert_eq!(shows[0], shows[1], "two runs with the fake clock differ");
    let snapshot = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots/research_writer.show.txt");
    if std::env::var_os("FLOW_BLESS").is_some() {
        std::fs::create_dir_all(snapshot.parent().unwrap()).unwrap();
        std::fs::write(&snapshot, &shows[0]).unwrap();
    }
    let expected = std::fs::read_to_string(&snapshot).expect("snapshot exists (bless with FLOW_BLESS=1)");
    assert_eq!(shows[0], expected, "the timeline changed; review and bless with FLOW_BLESS=1");
}

/// The final state of a run as `flow replay` derives it from the journal.
fn final_state(run_dir: &Path) -> String {
    let out = flow_env(&["replay", run_dir.to_str().unwrap()], run_dir.parent().unwrap(), &[]);
    assert!(out.status.success(), "replay failed: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).lines().skip(1).collect::<Vec<_>>().join("\n")
}

#[test]
fn a_run_killed_at_any_event_boundary_resumes_to_the_same_state() {
    let dir = fixtures();
    let clean = dir.path().join("clean");
    let out = flow_env(&["run", "crash.flow", "--run-dir", clean.to_str().unwrap(), "--fake-clock", "-q", "--no-prompt"], dir.path(), &[]);
    assert!(out.status.success(), "{}", text(&out));
    let expected = final_state(&clean);
    let total = events(&clean).len();
    assert!(total > 30, "the sample run is too short to be interesting: {total}");
    std::fs::remove_file(dir.path().join("ledger.txt")).unwrap();
    for k in 1..total {
        let run_dir = dir.path().join(format!("crash-{k}"));
        let rd = run_dir.to_str().unwrap();
        let crashed = flow_env(
            &["run", "crash.flow", "--run-dir", rd, "--fake-clock", "-q", "--no-prompt"],
            dir.path(),
            &[("FLOW_CRASH_AFTER_SEQ", &k.to_string())],
        );
        assert!(!crashed.status.success(), "crash point {k} did not crash");
        let status = text(&flow_env(&["status", rd], dir.path(), &[]));
        assert!(status.contains(&format!("events: {k}\n")), "crash point {k}: the journal lost or gained events: {status}");
        let mut resumed = flow_env(&["resume", rd, "--fake-clock", "-q", "--no-prompt"], dir.path(), &[]);
        if resumed.status.code() == Some(4) {
            // Killed between issuing the non-idempotent call and its
            // result: the outcome is unknown, so the run asks instead of
            // re-running it. (Here we know it never ran: approve a retry.)
            let trace = events(&run_dir);
            let rec = trace.iter().find(|e| e["kind"] == "reconciliation_required").expect("paused for reconciliation");
            let subject = format!("reconcile.{}", rec["payload"]["attempt_id"].as_str().unwrap());
            let approve = flow_env(&["approve", rd, &subject, "--decision", "approve"], dir.path(), &[]);
            assert!(approve.status.success(), "{}", text(&approve));
            resumed = flow_env(&["resume", rd, "--fake-clock", "-q", "--no-prompt"], dir.path(), &[]);
        }
        assert!(resumed.status.success(), "crash point {k}: resume failed: {}", text(&resumed));
        assert_eq!(final_state(&run_dir), expected, "crash point {k}: a different final state");
        let trace = assert_valid_trace(&run_dir);
        // Completed attempts are never re-run: each node completes once.
        for node in ["draft", "check", "publish"] {
            let completed = trace.iter().filter(|e| e["kind"] == "node_completed" && e["payload"]["node"] == node).count();
            assert_eq!(completed, 1, "crash point {k}: `{node}` completed {completed} times");
        }
        let ledger = std::fs::read_to_string(dir.path().join("ledger.txt")).unwrap_or_default();
        assert_eq!(ledger.lines().count(), 1, "crash point {k}: the non-idempotent call ran {} times", ledger.lines().count());
        std::fs::remove_file(dir.path().join("ledger.txt")).unwrap();
    }
}

#[test]
fn a_decision_pauses_the_run_is_recorded_once_and_never_asked_again() {
    let dir = fixtures();
    let run_dir = dir.path().join("run");
    let rd = run_dir.to_str().unwrap();
    let out = flow_env(&["run", "decide.flow", "--run-dir", rd, "--fake-clock", "--no-prompt"], dir.path(), &[]);
    assert_eq!(out.status.code(), Some(4), "awaiting decision: {}", text(&out));
    assert!(text(&out).contains("flow approve"), "{}", text(&out));
    let status = flow_env(&["status", rd], dir.path(), &[]);
    assert_eq!(status.status.code(), Some(4));
    assert!(text(&status).contains("waiting for a decision on `review`: approve/revise/reject"), "{}", text(&status));
    // Wrong decision, wrong principal: usage errors, nothing recorded.
    let bad = flow_env(&["approve", rd, "review", "--decision", "replan"], dir.path(), &[]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad).contains("not allowed"), "{}", text(&bad));
    let bad = flow_env(&["approve", rd, "review", "--decision", "approve", "--by", "mallory"], dir.path(), &[]);
    assert_eq!(bad.status.code(), Some(2));
    // Revise: the writer runs again, the second draft passes.
    let ok = flow_env(&["approve", rd, "review", "--decision", "revise"], dir.path(), &[]);
    assert!(ok.status.success(), "{}", text(&ok));
    let again = flow_env(&["approve", rd, "review", "--decision", "approve"], dir.path(), &[]);
    assert_eq!(again.status.code(), Some(2), "a decision is recorded once: {}", text(&again));
    let resumed = flow_env(&["resume", rd, "--fake-clock", "-q", "--no-prompt"], dir.path(), &[]);
    assert!(resumed.status.success(), "{}", text(&resumed));
    let trace = assert_valid_trace(&run_dir);
    assert_eq!(kinds(&trace, "decision_requested"), 1, "asked again after resume");
    assert_eq!(kinds(&trace, "decision_applied"), 1);
    assert_eq!(kinds(&trace, "run_paused"), 1);
    assert_eq!(kinds(&trace, "run_resumed"), 1);
    assert_eq!(last(&trace)["payload"]["reason"], "published");
    // Resuming a finished run changes nothing.
    let before = trace.len();
    let resumed = flow_env(&["resume", rd, "--fake-clock", "-q", "--no-prompt"], dir.path(), &[]);
    assert!(resumed.status.success(), "{}", text(&resumed));
    assert_eq!(events(&run_dir).len(), before);
}

#[test]
fn a_blackboard_append_waits_for_its_approval_and_a_resumed_run_reads_the_entry() {
    let dir = fixtures();
    let run_dir = dir.path().join("run");
    let rd = run_dir.to_str().unwrap();
    let out = flow_env(&["run", "board.flow", "--run-dir", rd, "--fake-clock", "--no-prompt"], dir.path(), &[]);
    assert_eq!(out.status.code(), Some(4), "awaiting the append's approval: {}", text(&out));
    let status = flow_env(&["status", rd], dir.path(), &[]);
    let subject = "blackboard.decisions.record";
    assert!(
        text(&status).contains(&format!("waiting for a decision on `{subject}`: approve/reject (deciders: editor)")),
        "{}",
        text(&status)
    );
    assert_eq!(kinds(&events(&run_dir), "blackboard_appended"), 0, "appended before the approval");
    // Only approve or reject, only by the editor.
    let bad = flow_env(&["approve", rd, subject, "--decision", "revise"], dir.path(), &[]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
    let bad = flow_env(&["approve", rd, subject, "--decision", "approve", "--by", "mallory"], dir.path(), &[]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
    let ok = flow_env(&["approve", rd, subject, "--decision", "approve"], dir.path(), &[]);
    assert!(ok.status.success(), "{}", text(&ok));
    let resumed = flow_env(&["resume", rd, "--fake-clock", "-q", "--no-prompt"], dir.path(), &[]);
    assert!(resumed.status.success(), "{}", text(&resumed));
    let trace = assert_valid_trace(&run_dir);
    let appended: Vec<&Value> = trace.iter().filter(|e| e["kind"] == "blackboard_appended").collect();
    assert_eq!(appended.len(), 1);
    assert_eq!(appended[0]["payload"]["approved_by"], "editor");
    let read = trace.iter().find(|e| e["kind"] == "blackboard_read").expect("the planner read the blackboard");
    assert_eq!(read["payload"]["entries"], 1, "the resumed run rebuilt the blackboard from its journal");
    assert_eq!(last(&trace)["payload"]["reason"], "planned");
    let checked = trace_check(dir.path(), &run_dir, "board.flow");
    assert!(checked.status.success(), "{}", text(&checked));
}

/// The decision events of a trace: (subject, decision, by, action).
fn decisions_applied(trace: &[Value]) -> Vec<(String, String, String, String)> {
    let field = |e: &Value, k: &str| e["payload"][k].as_str().unwrap_or_default().to_string();
    trace
        .iter()
        .filter(|e| e["kind"] == "decision_applied")
        .map(|e| (field(e, "subject"), field(e, "decision"), field(e, "by"), field(e, "action")))
        .collect()
}

fn trace_check(dir: &Path, run_dir: &Path, plan: &str) -> std::process::Output {
    let trace = run_dir.join("trace.jsonl");
    flow_env(&["trace", "check", trace.to_str().unwrap(), "--plan", plan], dir, &[])
}

#[test]
fn a_gate_decision_that_does_not_come_in_time_times_out_and_its_handler_runs() {
    let dir = fixtures();
    let run_dir = dir.path().join("run");
    let rd = run_dir.to_str().unwrap();
    // A real clock: the gate's `timeout: 1s` runs out while the run waits.
    let out = flow_env(&["run", "decide_timeout.flow", "--run-dir", rd, "--no-prompt", "-q"], dir.path(), &[]);
    assert_eq!(out.status.code(), Some(4), "awaiting decision: {}", text(&out));
    let requested = events(&run_dir).into_iter().find(|e| e["kind"] == "decision_requested").expect("asked");
    let expires_at = requested["payload"]["expires_at"].as_str().expect("the request records its deadline");
    assert!(expires_at > requested["time"].as_str().unwrap(), "{requested}");
    let status = text(&flow_env(&["status", rd], dir.path(), &[]));
    assert!(status.contains(&format!("times out at {expires_at}")), "{status}");
    std::thread::sleep(std::time::Duration::from_millis(1_300));
    // Too late: the answer is refused, nothing is recorded.
    let late = flow_env(&["approve", rd, "review", "--decision", "approve"], dir.path(), &[]);
    assert_eq!(late.status.code(), Some(2), "{}", text(&late));
    assert!(text(&late).contains("timed out"), "{}", text(&late));
    let resumed = flow_env(&["resume", rd, "--no-prompt", "-q"], dir.path(), &[]);
    assert_eq!(resumed.status.code(), Some(1), "{}", text(&resumed));
    let trace = assert_valid_trace(&run_dir);
    assert_eq!(decisions_applied(&trace), [("review".into(), "timeout".into(), "control".into(), "terminate(review_timed_out)".into())]);
    assert_eq!(last(&trace)["payload"]["reason"], "review_timed_out");
    let checked = trace_check(dir.path(), &run_dir, "decide_timeout.flow");
    assert!(checked.status.success() && text(&checked).contains("conformant"), "{}", text(&checked));
    // Held against a plan whose gate has no timeout, the same trace departs.
    let source = std::fs::read_to_string(dir.path().join("decide_timeout.flow")).unwrap();
    let untimed = source.replace("    timeout: 1s\n", "");
    assert_ne!(untimed, source);
    std::fs::write(dir.path().join("untimed.flow"), untimed).unwrap();
    let checked = trace_check(dir.path(), &run_dir, "untimed.flow");
    assert!(!checked.status.success(), "{}", text(&checked));
    assert!(text(&checked).contains("T023") && text(&checked).contains("declares no `timeout`"), "{}", text(&checked));
}

#[test]
fn a_human_node_whose_decision_does_not_come_in_time_fails_with_timeout() {
    let dir = fixtures();
    let run_dir = dir.path().join("run");
    let rd = run_dir.to_str().unwrap();
    let out = flow_env(&["run", "decide_timeout.flow", "--run-dir", rd, "--no-prompt", "-q"], dir.path(), &[]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    // In time: the gate's approval applies, the human node asks next.
    let ok = flow_env(&["approve", rd, "review", "--decision", "approve"], dir.path(), &[]);
    assert!(ok.status.success(), "{}", text(&ok));
    let resumed = flow_env(&["resume", rd, "--no-prompt", "-q"], dir.path(), &[]);
    assert_eq!(resumed.status.code(), Some(4), "{}", text(&resumed));
    std::thread::sleep(std::time::Duration::from_millis(1_300));
    let resumed = flow_env(&["resume", rd, "--no-prompt", "-q"], dir.path(), &[]);
    assert_eq!(resumed.status.code(), Some(1), "{}", text(&resumed));
    let trace = assert_valid_trace(&run_dir);
    assert_eq!(
        decisions_applied(&trace),
        [
            ("review".into(), "approve".into(), "editor".into(), "continue".into()),
            ("sign_off".into(), "timeout".into(), "control".into(), "fail".into())
        ]
    );
    let failed = trace.iter().find(|e| e["kind"] == "node_failed").expect("the node failed");
    assert_eq!((&failed["payload"]["node"], &failed["payload"]["error_code"]), (&"sign_off".into(), &"timeout".into()));
    assert_eq!(last(&trace)["payload"]["reason"], "sign_off_failed");
    let checked = trace_check(dir.path(), &run_dir, "decide_timeout.flow");
    assert!(checked.status.success(), "{}", text(&checked));
}

#[test]
fn budget_exhaustion_takes_the_declared_path_and_exits_3() {
    let dir = fixtures();
    let run_dir = dir.path().join("run");
    let out = flow_env(&["run", "budget.flow", "--run-dir", run_dir.to_str().unwrap(), "--fake-clock", "-q"], dir.path(), &[]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let trace = assert_valid_trace(&run_dir);
    assert_eq!(kinds(&trace, "budget_exhausted"), 1);
    assert_eq!(last(&trace)["payload"]["reason"], "budget_exhausted");
    // Reserved before, settled after, for every turn.
    assert_eq!(kinds(&trace, "budget_reserved"), kinds(&trace, "agent_turn"));
    assert!(kinds(&trace, "budget_settled") >= 1);
    // Each reported cost is over its turn's ceiling ($0 at no prices):
    // recorded and counted, never silent.
    let over_ceiling =
        trace.iter().filter(|e| e["kind"] == "warning" && e["payload"]["message"].as_str().unwrap().contains("over the $0.0000")).count();
    assert_eq!(over_ceiling, kinds(&trace, "agent_turn"));
    assert!(text(&out).contains("reported more than the per-turn ceilings"), "{}", text(&out));
}

#[test]
fn invalid_output_gets_a_repair_turn_then_fails_without_flowing_on() {
    let dir = fixtures();
    let run_dir = dir.path().join("run");
    let out = flow_env(&["run", "repair.flow", "--run-dir", run_dir.to_str().unwrap(), "--fake-clock", "-q"], dir.path(), &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let trace = assert_valid_trace(&run_dir);
    assert_eq!(kinds(&trace, "agent_turn"), 2, "one turn and one repair turn");
    let failed = trace.iter().find(|e| e["kind"] == "attempt_failed").unwrap();
    assert_eq!(failed["payload"]["error_code"], "invalid_output");
    assert!(!trace.iter().any(|e| e["kind"] == "node_started" && e["payload"]["node"] == "two"), "invalid data flowed on");
    assert_eq!(last(&trace)["payload"]["reason"], "invalid_data");
}

#[test]
fn fan_out_join_and_map_complete() {
    let dir = fixtures();
    let run_dir = dir.path().join("run");
    let out = flow_env(&["run", "fanout.flow", "--run-dir", run_dir.to_str().unwrap(), "--fake-clock", "-q"], dir.path(), &[]);
    assert!(out.status.success(), "{}", text(&out));
    let trace = assert_valid_trace(&run_dir);
    let merged = trace.iter().find(|e| e["kind"] == "node_completed" && e["payload"]["node"] == "merge").unwrap();
    assert_eq!(merged["payload"]["status"], "completed");
    let items = trace.iter().filter(|e| e["kind"] == "node_started" && e["payload"]["node"] == "item").count();
    assert_eq!(items, 3, "the map ran its node once per item");
    let replay = flow_env(&["replay", run_dir.to_str().unwrap()], dir.path(), &[]);
    let state = text(&replay);
    assert!(state.contains(r#"each = [{"n":1},{"n":2},{"n":3}]"#), "{state}");
}

#[test]
fn record_then_replay_is_identical_and_a_miss_fails_with_a_diff() {
    let dir = fixtures();
    let cassette = dir.path().join("crash.rec.yaml");
    let recorded = dir.path().join("recorded");
    let out = flow_env(
        &[
            "run",
            "crash.flow",
            "--run-dir",
            recorded.to_str().unwrap(),
            "--run-id",
            "r",
            "--fake-clock",
            "-q",
            "--record",
            cassette.to_str().unwrap(),
        ],
        dir.path(),
        &[],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(dir.path().join("ledger.txt")).unwrap().lines().count(), 1);
    let replayed = dir.path().join("replayed");
    let out = flow_env(
        &[
            "run",
            "crash.flow",
            "--run-dir",
            replayed.to_str().unwrap(),
            "--run-id",
            "r",
            "--fake-clock",
            "-q",
            "--replay",
            cassette.to_str().unwrap(),
        ],
        dir.path(),
        &[],
    );
    assert!(out.status.success(), "{}", text(&out));
    // Replay made no call: the ledger still has one line.
    assert_eq!(std::fs::read_to_string(dir.path().join("ledger.txt")).unwrap().lines().count(), 1);
    let show = |d: &Path| {
        String::from_utf8_lossy(&flow_env(&["show", d.to_str().unwrap()], dir.path(), &[]).stdout)
            .lines()
            .skip(1)
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(show(&recorded), show(&replayed));
    // Change the script and drop the recorded model turns: the scripted
    // agent answers from its script (offline, deterministic: no miss), its
    // reply changes, so the tool request differs from the recording and
    // replay fails loudly, with the difference.
    std::fs::write(dir.path().join("crash.script.yaml"), "replies:\n  draft:\n  - output: { title: \"goodbye\", words: 5 }\n").unwrap();
    let cassette_text = std::fs::read_to_string(&cassette).unwrap();
    let without_model: String = {
        let mut c: Value = serde_yaml_to_json(&cassette_text);
        c["entries"].as_array_mut().unwrap().retain(|e| e["kind"] != "model");
        serde_json::to_string(&c).unwrap()
    };
    std::fs::write(&cassette, without_model).unwrap();
    let missed = dir.path().join("missed");
    let out = flow_env(
        &["run", "crash.flow", "--run-dir", missed.to_str().unwrap(), "--fake-clock", "-q", "--replay", cassette.to_str().unwrap()],
        dir.path(),
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let message = text(&out);
    assert!(message.contains("replay miss"), "{message}");
    assert!(message.contains("the call of tool `stamp` is not in the cassette"), "{message}");
    assert!(message.contains(r#"/input/text: requested "goodbye", recorded "hello world""#), "{message}");
}

/// Cassettes are YAML.
fn serde_yaml_to_json(text: &str) -> Value {
    serde_yaml::from_str(text).expect("cassette parses")
}

#[test]
fn usage_errors_exit_2_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let out = flow_env(&["resume", "nope"], dir.path(), &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("no run `nope`"), "{}", text(&out));
    let out = flow_env(&["run", "missing.flow"], dir.path(), &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("cannot read missing.flow"), "{}", text(&out));
}

#[test]
fn research_writer_evidence_gate_blocks_before_the_planner_is_called() {
    let dir = fixtures();
    let run_dir = dir.path().join("run");
    let file = repo().join("examples/research_writer/research_writer.flow");
    // Strict replay: a planner call would be a replay miss, not a silent call.
    let out = flow_env(
        &[
            "run",
            file.to_str().unwrap(),
            "--run-dir",
            run_dir.to_str().unwrap(),
            "--fake-clock",
            "-q",
            "--input",
            "research_blocked.input.json",
            "--replay",
            "research_blocked.cassette.yaml",
        ],
        dir.path(),
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let trace = assert_valid_trace(&run_dir);
    let gate = trace.iter().find(|e| e["kind"] == "gate_recorded").expect("the gate ran");
    assert_eq!(gate["payload"]["outcome"], "BLOCK");
    assert_eq!(gate["payload"]["reason"], "search_evidence_gate");
    let end = last(&trace);
    assert_eq!((end["payload"]["reason"].as_str(), end["payload"]["status"].as_str()), (Some("search_evidence_gate"), Some("failure")));
    // The planner (and every agent) was called zero times.
    assert_eq!(kinds(&trace, "agent_turn"), 0);
    assert!(!trace.iter().any(|e| e["kind"] == "node_started" && e["payload"]["node"] == "outline"));
}

#[test]
fn gate_outcome_is_the_most_severe_whatever_the_order() {
    let dir = fixtures();
    let run_dir = dir.path().join("run");
    let out =
        flow_env(&["run", "precedence.flow", "--run-dir", run_dir.to_str().unwrap(), "--fake-clock", "-q", "--no-prompt"], dir.path(), &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let trace = assert_valid_trace(&run_dir);
    let gate = trace.iter().find(|e| e["kind"] == "gate_recorded").unwrap();
    let outcomes: Vec<&str> = gate["payload"]["evaluators"].as_array().unwrap().iter().map(|e| e["outcome"].as_str().unwrap()).collect();
    assert_eq!(outcomes, ["REQUIRES_DECISION", "BLOCK"]);
    assert_eq!(gate["payload"]["outcome"], "BLOCK");
    assert_eq!(kinds(&trace, "decision_requested"), 0, "BLOCK wins: nobody is asked");
    assert_eq!(last(&trace)["payload"]["reason"], "blocked");
}

#[test]
fn an_evaluator_error_is_never_pass() {
    let dir = fixtures();
    let run_dir = dir.path().join("run");
    let out = flow_env(&["run", "failclosed.flow", "--run-dir", run_dir.to_str().unwrap(), "--fake-clock", "-q"], dir.path(), &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let trace = assert_valid_trace(&run_dir);
    let gate = trace.iter().find(|e| e["kind"] == "gate_recorded").unwrap();
    let evaluators = gate["payload"]["evaluators"].as_array().unwrap();
    assert_eq!(evaluators[0]["outcome"], "PASS");
    assert_eq!(evaluators[1]["outcome"], "BLOCK");
    assert_eq!(evaluators[1]["error"], true);
    assert_eq!(gate["payload"]["outcome"], "BLOCK");
    assert_eq!(last(&trace)["payload"]["reason"], "errored");
}

#[test]
fn a_probe_that_exits_non_zero_is_an_error_whatever_it_prints() {
    let dir = tempfile::tempdir().unwrap();
    let flow_text = r#"
evaluator says_ok: command {
  argv: ["sh", "-c", "echo '{\"ok\": true}'; echo 'segfault in probe' >&2; exit 3"]
  expect: json, output: { ok: bool }, check: output.ok
}
evaluator exits_two: command { argv: ["sh", "-c", "echo 'no audio stream' >&2; exit 2"], expect: exit_zero }
tool nothing: builtin { description: "Does nothing", input: any, output: any, function: "noop" }
workflow probed {
  start: first
  node first: tool nothing { args: {} }
  node done: end ok
  node errored: end probe_errored { status: failure }
  first -> done
  gate checked: first -> done {
    evaluate: [says_ok(first), exits_two(first)]
    on_error: BLOCK
    on PASS -> continue
    on BLOCK -> goto(errored)
  }
}
"#;
    std::fs::write(dir.path().join("probed.flow"), flow_text).unwrap();
    let run_dir = dir.path().join("run");
    let out = flow_env(&["run", "probed.flow", "--run-dir", run_dir.to_str().unwrap(), "--fake-clock", "-q"], dir.path(), &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let trace = assert_valid_trace(&run_dir);
    let gate = trace.iter().find(|e| e["kind"] == "gate_recorded").unwrap();
    let evaluators = gate["payload"]["evaluators"].as_array().unwrap();
    // `{"ok": true}` from a probe that exited 3 is not a PASS: an error.
    assert_eq!(evaluators[0]["outcome"], "BLOCK", "{gate}");
    assert_eq!(evaluators[0]["error"], true, "{gate}");
    let why = evaluators[0]["reason"].as_str().unwrap();
    assert!(why.contains("exited with 3") && why.contains("segfault in probe"), "{why}");
    // A non-zero exit of an exit-code probe is its genuine negative.
    assert_eq!(evaluators[1]["outcome"], "BLOCK", "{gate}");
    assert_eq!(evaluators[1]["error"], false, "{gate}");
    let why = evaluators[1]["reason"].as_str().unwrap();
    assert!(why.contains("exited with 2") && why.contains("no audio stream"), "{why}");
    assert_eq!(gate["payload"]["outcome"], "BLOCK");
    assert_eq!(last(&trace)["payload"]["reason"], "probe_errored");
}

#[test]
fn kill_9_during_a_call_then_resume_expires_the_lease_and_reruns_it() {
    let dir = fixtures();
    let run_dir = dir.path().join("run");
    let mut child = Command::new(env!("CARGO_BIN_EXE_flow"))
        .args(["run", "slow.flow", "--run-dir", run_dir.to_str().unwrap(), "-q"])
        .current_dir(dir.path())
        .env_remove("FLOW_CRASH_AFTER_SEQ")
        .spawn()
        .unwrap();
    // Wait until the call is issued (persisted), then SIGKILL the process.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let started = std::fs::read_to_string(run_dir.join("trace.jsonl")).unwrap_or_default().contains("\"tool_call_started\"");
        if started {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the call never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let before = events(&run_dir);
    assert_eq!(kinds(&before, "tool_call_completed"), 0, "killed before the call returned");
    let out = flow_env(&["resume", run_dir.to_str().unwrap(), "-q", "--no-prompt"], dir.path(), &[]);
    assert!(out.status.success(), "{}", text(&out));
    let trace = assert_valid_trace(&run_dir);
    assert_eq!(kinds(&trace, "lease_expired"), 1);
    let retried = trace.iter().find(|e| e["kind"] == "attempt_started" && e["payload"]["trigger_reason"] == "lease_expired").unwrap();
    assert_eq!(retried["payload"]["attempt_no"], 2);
    assert_eq!(retried["execution_id"], "exec-2");
    assert_eq!(last(&trace)["payload"]["status"], "success");
}

#[test]
fn native_evaluators_gate_on_real_files() {
    for (content, reason) in [("{\"ok\": true}", "ok"), ("not json", "blocked")] {
        let dir = fixtures();
        std::fs::write(dir.path().join("data.json"), content).unwrap();
        let run_dir = dir.path().join("run");
        let out = flow_env(&["run", "natives.flow", "--run-dir", run_dir.to_str().unwrap(), "--fake-clock", "-q"], dir.path(), &[]);
        let trace = assert_valid_trace(&run_dir);
        assert_eq!(last(&trace)["payload"]["reason"], reason, "{}", text(&out));
        let gate = trace.iter().find(|e| e["kind"] == "gate_recorded").unwrap();
        let outcomes: Vec<&str> =
            gate["payload"]["evaluators"].as_array().unwrap().iter().map(|e| e["outcome"].as_str().unwrap()).collect();
        assert_eq!(outcomes, if reason == "ok" { ["PASS", "PASS"] } else { ["PASS", "BLOCK"] });
    }
}

#[test]
fn a_closed_stdout_ends_a_command_quietly() {
    // A run whose timeline is far larger than a pipe's buffer (64 KiB).
    let dir = tempfile::tempdir().unwrap();
    let source = flow_tests::generate::chain_source(800, "");
    let file = dir.path().join("chain.flow");
    std::fs::write(&file, source).unwrap();
    let run_dir = dir.path().join("run");
    let out = flow_env(&["run", file.to_str().unwrap(), "--run-dir", run_dir.to_str().unwrap(), "-q"], dir.path(), &[]);
    assert!(out.status.success(), "{}", text(&out));
    let full = flow_env(&["show", run_dir.to_str().unwrap()], dir.path(), &[]);
    assert!(full.stdout.len() > 128 * 1024, "the timeline is only {} bytes", full.stdout.len());
    // `flow show RUN | head`: the reader goes away without reading.
    let mut child = Command::new(env!("CARGO_BIN_EXE_flow"))
        .args(["show", run_dir.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(flow_diagnostics::cli::CLOSED_STDOUT_EXIT), "{stderr}");
}

/// Runs one workflow of `strict.flow` (a JSON Schema file with
/// `minLength`, `maximum`, `minItems` and `additionalProperties: false`)
/// and holds its trace against the plan.
fn strict_run(workflow: &str) -> (Option<i32>, Vec<Value>) {
    let dir = fixtures();
    let run_dir = dir.path().join("run");
    let out = flow_env(
        &["run", "strict.flow", "--workflow", workflow, "--run-dir", run_dir.to_str().unwrap(), "--fake-clock", "-q", "--no-prompt"],
        dir.path(),
        &[],
    );
    let trace = assert_valid_trace(&run_dir);
    let check = flow_env(&["trace", "check", run_dir.to_str().unwrap(), "--plan", "strict.flow"], dir.path(), &[]);
    assert!(check.status.success(), "{workflow}: the trace is not conformant:\n{}", text(&check));
    (out.status.code(), trace)
}

/// Every keyword the output breaks is named.
fn names_every_broken_keyword(message: &str, additional: bool) {
    for broken in ["shorter than 5 characters", "greater than the maximum of 3", "has less than 2 items"] {
        assert!(message.contains(broken), "`{broken}` missing from: {message}");
    }
    assert_eq!(message.contains("Additional properties are not allowed ('extra' was unexpected)"), additional, "{message}");
}

#[test]
fn a_schema_files_keywords_hold_at_an_agents_output() {
    // The reply breaks minLength, maximum, minItems and additionalProperties;
    // the repair still breaks the first three: invalid_output, nothing flows on.
    let (code, trace) = strict_run("typed");
    assert_eq!(code, Some(1));
    assert_eq!(kinds(&trace, "agent_turn"), 2, "one turn and one repair turn");
    let failed = trace.iter().find(|e| e["kind"] == "attempt_failed").unwrap();
    assert_eq!(failed["payload"]["error_code"], "invalid_output");
    names_every_broken_keyword(failed["payload"]["message"].as_str().unwrap(), false);
    assert_eq!(kinds(&trace, "node_completed"), 0, "the invalid output flowed on");
    assert_eq!(last(&trace)["payload"]["reason"], "invalid_data");
}

#[test]
fn a_schema_valid_gate_over_a_schema_file_blocks_what_breaks_its_keywords() {
    let (code, trace) = strict_run("gated");
    assert_eq!(code, Some(1));
    let gate = trace.iter().find(|e| e["kind"] == "gate_recorded").unwrap();
    assert_eq!(gate["payload"]["outcome"], "BLOCK");
    names_every_broken_keyword(gate["payload"]["reason"].as_str().unwrap(), true);
    assert_eq!(last(&trace)["payload"]["reason"], "blocked");
    // A value that keeps them passes the same checks.
    let (code, trace) = strict_run("valid");
    assert_eq!(code, Some(0));
    let gate = trace.iter().find(|e| e["kind"] == "gate_recorded").unwrap();
    assert_eq!(gate["payload"]["outcome"], "PASS");
    assert_eq!(last(&trace)["payload"]["status"], "success");
}

#[test]
fn a_runs_result_must_be_of_the_workflows_output_type() {
    let (code, trace) = strict_run("returns");
    assert_eq!(code, Some(1));
    let end = last(&trace);
    assert_eq!((end["payload"]["reason"].as_str(), end["payload"]["status"].as_str()), (Some("ok"), Some("failure")));
    let warning = trace.iter().find(|e| e["kind"] == "warning").unwrap()["payload"]["message"].as_str().unwrap();
    assert!(
        warning.starts_with("invalid output: the run's result (`loose`'s output) is not the workflow's `output` type Item"),
        "{warning}"
    );
    names_every_broken_keyword(warning, true);
}

#[test]
fn handoff_payloads_and_delegation_inputs_are_held_to_their_types() {
    let (code, trace) = strict_run("handing");
    assert_eq!(code, Some(1));
    let handoff = trace.iter().find(|e| e["kind"] == "handoff").unwrap();
    assert_eq!(handoff["payload"]["accepted"], false);
    let failed = trace.iter().find(|e| e["kind"] == "node_failed").unwrap();
    assert_eq!((failed["payload"]["node"].as_str(), failed["payload"]["error_code"].as_str()), (Some("first"), Some("handoff_refused")));
    names_every_broken_keyword(failed["payload"]["message"].as_str().unwrap(), true);
    assert!(!trace.iter().any(|e| e["kind"] == "node_started" && e["payload"]["node"] == "second"), "the payload crossed");

    let (code, trace) = strict_run("delegating");
    assert_eq!(code, Some(1));
    assert_eq!(kinds(&trace, "delegation"), 0, "the delegation happened");
    let failed = trace.iter().find(|e| e["kind"] == "node_failed").unwrap();
    assert_eq!((failed["payload"]["node"].as_str(), failed["payload"]["error_code"].as_str()), (Some("boss"), Some("delegation_refused")));
    names_every_broken_keyword(failed["payload"]["message"].as_str().unwrap(), false);
    assert!(!trace.iter().any(|e| e["kind"] == "node_started" && e["payload"]["node"] == "worker"));
}

#[test]
fn a_role_among_the_deciders_lets_its_members_and_holders_decide() {
    let dir = fixtures();
    let run_dir = dir.path().join("run");
    let rd = run_dir.to_str().unwrap();
    let out = flow_env(&["run", "decide_role.flow", "--run-dir", rd, "--fake-clock", "--no-prompt"], dir.path(), &[]);
    assert_eq!(out.status.code(), Some(4), "awaiting decision: {}", text(&out));
    // Someone outside the role: refused, and told who may decide.
    let bad = flow_env(&["approve", rd, "review", "--decision", "approve", "--by", "mallory"], dir.path(), &[]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
    assert!(text(&bad).contains("deciders: alice, bob, editors"), "{}", text(&bad));
    // A member of the role decides.
    let ok = flow_env(&["approve", rd, "review", "--decision", "approve", "--by", "alice"], dir.path(), &[]);
    assert!(ok.status.success(), "a member of `editors` may decide: {}", text(&ok));
    let resumed = flow_env(&["resume", rd, "--fake-clock", "-q", "--no-prompt"], dir.path(), &[]);
    assert!(resumed.status.success(), "{}", text(&resumed));
    let trace = assert_valid_trace(&run_dir);
    assert_eq!(decisions_applied(&trace)[0].2, "alice");
    assert_eq!(last(&trace)["payload"]["reason"], "published");
    let checked = trace_check(dir.path(), &run_dir, "decide_role.flow");
    assert!(checked.status.success(), "trace check accepts the member's decision: {}", text(&checked));
}

#[test]
fn a_replay_provider_answers_from_its_own_cassette_and_fails_a_turn_it_does_not_hold() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let flow_with = |provider: &str| {
        format!(
            "provider tape: {provider}\nagent a {{ provider: tape }}\nworkflow w {{\n  start: x\n  node x: agent a {{ output: {{ note: string }} }}\n  node done: end ok\n  x -> done\n}}\n"
        )
    };
    // Record the scripted provider's turn under the name `tape`.
    std::fs::write(d.join("w.flow"), flow_with("scripted { script: \"s.yaml\" }")).unwrap();
    std::fs::write(d.join("s.yaml"), "replies:\n  a:\n  - output: { note: recorded }\n").unwrap();
    let recorded = flow(&["run", "w.flow", "--run-dir", "r1", "--record", "tape.yaml", "-q"], d);
    assert_eq!(recorded.status.code(), Some(0), "{}", text(&recorded));
    // The same flow on a replay provider: its turn comes from tape.yaml, with no flag.
    std::fs::write(d.join("w.flow"), flow_with("replay { cassette: \"tape.yaml\" }")).unwrap();
    std::fs::remove_file(d.join("s.yaml")).unwrap();
    let replayed = flow(&["run", "w.flow", "--run-dir", "r2", "-q"], d);
    assert_eq!(replayed.status.code(), Some(0), "{}", text(&replayed));
    let ends = |run: &str| events(&d.join(run)).into_iter().filter(|e| e["kind"] == "run_terminated").collect::<Vec<_>>();
    let output = |run: &str| ends(run)[0]["payload"]["output"]["digest"].clone();
    assert!(output("r1").is_string(), "{:?}", ends("r1"));
    assert_eq!(output("r2"), output("r1"), "the same result, from the cassette");
    // A cassette without the turn: the turn fails with the miss, never a made-up answer.
    std::fs::write(d.join("tape.yaml"), "flow_cassette: 1\nentries: []\n").unwrap();
    let missed = flow(&["run", "w.flow", "--run-dir", "r3"], d);
    assert_ne!(missed.status.code(), Some(0), "{}", text(&missed));
    assert!(text(&missed).contains("replay miss"), "{}", text(&missed));
}

#[test]
fn a_run_records_its_cassette_and_sources_from_its_directory_so_it_resumes_from_anywhere() {
    // Run an example with its cassette from one directory, then re-derive
    // and resume the run from another: the run directory names the
    // cassette and the sources relative to itself.
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&repo().join("examples/research_writer"), &dir.path().join("project/flows"));
    let project = dir.path().join("project");
    let out = flow(&["run", "flows/research_writer.flow", "--run-dir", "runs/one", "--fake-clock", "-q", "--no-prompt"], &project);
    assert!(out.status.success(), "{}", text(&out));
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let run_dir = project.join("runs/one");
    let rd = run_dir.to_str().unwrap();
    let replayed = flow(&["replay", rd], &elsewhere);
    assert!(replayed.status.success(), "{}", text(&replayed));
    assert!(text(&replayed).contains("the journal is consistent with the plan"), "{}", text(&replayed));
    let resumed = flow(&["resume", rd, "--fake-clock", "-q", "--no-prompt"], &elsewhere);
    assert!(resumed.status.success(), "{}", text(&resumed));
    // The whole project moved: still found, relative to the run directory.
    let moved = dir.path().join("moved");
    std::fs::rename(&project, &moved).unwrap();
    let replayed = flow(&["replay", moved.join("runs/one").to_str().unwrap()], &elsewhere);
    assert!(replayed.status.success(), "{}", text(&replayed));
}

#[test]
fn status_and_show_print_one_json_document_for_scripts() {
    let dir = fixtures();
    let run_dir = dir.path().join("run");
    let rd = run_dir.to_str().unwrap();
    let out = flow_env(&["run", "decide.flow", "--run-dir", rd, "--fake-clock", "--no-prompt"], dir.path(), &[]);
    assert_eq!(out.status.code(), Some(4), "awaiting decision: {}", text(&out));
    let status = flow(&["status", rd, "--format", "json"], dir.path());
    assert_eq!(status.status.code(), Some(4), "the same exit status as the text form");
    let document: Value = serde_json::from_slice(&status.stdout).expect("one JSON document");
    assert_eq!(document["version"], 1);
    assert_eq!(document["state"], "paused");
    assert_eq!(document["events"], events(&run_dir).len());
    let pending = &document["pending_decisions"][0];
    assert_eq!(pending["subject"], "review");
    assert_eq!(pending["decisions"], serde_json::json!(["approve", "revise", "reject"]));
    assert!(document["nodes_completed"].as_array().is_some_and(|n| !n.is_empty()), "{document}");
    let used = &document["used"];
    assert_eq!(
        used["input_tokens"].as_u64().unwrap_or(0) + used["output_tokens"].as_u64().unwrap_or(0),
        used["tokens"].as_u64().unwrap_or(1),
        "{used}"
    );
    let show = flow(&["show", rd, "--format", "json"], dir.path());
    assert!(show.status.success(), "{}", text(&show));
    let document: Value = serde_json::from_slice(&show.stdout).expect("one JSON document");
    let listed = document["events"].as_array().expect("events");
    assert_eq!(listed.len(), events(&run_dir).len(), "every event");
    assert_eq!(listed[0]["kind"], "run_started");
    assert!(listed[0]["summary"].as_str().is_some_and(|s| s.starts_with("run started")), "{}", listed[0]);
    assert!(listed.windows(2).all(|w| w[0]["seq"].as_u64() < w[1]["seq"].as_u64()));
    // The text form shows the same lines.
    let text_form = String::from_utf8_lossy(&flow(&["show", rd], dir.path()).stdout).into_owned();
    for summary in listed.iter().filter_map(|e| e["summary"].as_str()) {
        assert!(text_form.contains(summary.lines().next().unwrap_or("")), "{summary}");
    }
    let completions = flow(&["completions", "bash"], dir.path());
    assert!(completions.status.success());
    assert!(String::from_utf8_lossy(&completions.stdout).contains("complete -F _flow"), "a bash completion script");
}

#[test]
fn a_command_tool_runs_in_its_declared_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("work/inner")).unwrap();
    std::fs::write(dir.path().join("work/inner/marker.txt"), "here").unwrap();
    let tool = |name: &str, cwd: &str| {
        format!(
            "tool {name}: command {{\n  description: \"Names the directory it runs in\"\n  input: any\n  output: {{ dir: string, marker: bool }}\n  \
             argv: [\"sh\", \"-c\", \"printf '{{\\\"dir\\\": \\\"%s\\\", \\\"marker\\\": %s}}' \\\"$(basename \\\"$PWD\\\")\\\" \\\"$(test -f marker.txt && echo true || echo false)\\\"\"]\n  \
             effect: idempotent\n{cwd}}}\n"
        )
    };
    let source = format!(
        "{}{}workflow w {{\n  start: inside\n  node inside: tool inner {{ args: {{}} }}\n  node beside: tool flow_dir {{ args: {{}} }}\n  node done: end ok\n  inside -> beside -> done\n}}\n",
        tool("inner", "  cwd: \"work/inner\"\n"),
        tool("flow_dir", "")
    );
    std::fs::write(dir.path().join("cwd.flow"), source).unwrap();
    let run_dir = dir.path().join("run");
    let out = flow(&["run", "cwd.flow", "--run-dir", run_dir.to_str().unwrap(), "--fake-clock", "-q"], dir.path());
    assert!(out.status.success(), "{}", text(&out));
    let state = final_state(&run_dir);
    assert!(state.contains(r#"inside = {"dir":"inner","marker":true}"#), "`cwd` is relative to the flow file:\n{state}");
    let flow_dir = dir.path().file_name().unwrap().to_str().unwrap();
    assert!(state.contains(&format!(r#"beside = {{"dir":"{flow_dir}","marker":false}}"#)), "no `cwd`: the flow file's directory:\n{state}");
}

#[test]
fn a_workflows_concurrency_bounds_the_calls_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let source = |concurrency: &str| {
        format!(
            r#"tool nap: command {{
  description: "Sleeps a little, saying when it started and ended"
  input: {{ n: int }}
  output: {{ start: float, end: float }}
  argv: ["python3", "-c", "import json, time; s = time.time(); time.sleep(1.0); print(json.dumps({{'start': s, 'end': time.time()}}))"]
  env: ["PATH"]
  effect: idempotent
}}
workflow naps {{
  start: split
  {concurrency}
  node split: parallel [a, b, c]
  node a: tool nap {{ args: {{ n: 1 }} }}
  node b: tool nap {{ args: {{ n: 2 }} }}
  node c: tool nap {{ args: {{ n: 3 }} }}
  node merge: join [a, b, c]
  node done: end ok
  split -> merge -> done
}}
"#
        )
    };
    // How many calls were ever running at once, from the intervals they report.
    let most_at_once = |name: &str, concurrency: &str| -> usize {
        std::fs::write(dir.path().join(format!("{name}.flow")), source(concurrency)).unwrap();
        let run_dir = dir.path().join(name);
        let out = flow(&["run", &format!("{name}.flow"), "--run-dir", run_dir.to_str().unwrap(), "-q"], dir.path());
        assert!(out.status.success(), "{}", text(&out));
        let state = final_state(&run_dir);
        let spans: Vec<(f64, f64)> = ["a", "b", "c"]
            .iter()
            .map(|node| {
                let line = state.lines().find_map(|l| l.trim().strip_prefix(&format!("{node} = "))).expect(node);
                let v: Value = serde_json::from_str(line).unwrap();
                (v["start"].as_f64().unwrap(), v["end"].as_f64().unwrap())
            })
            .collect();
        spans.iter().map(|(s, _)| spans.iter().filter(|(s2, e2)| s2 <= s && s < e2).count()).max().unwrap()
    };
    assert_eq!(most_at_once("one", "concurrency: 1"), 1, "one call at a time");
    assert_eq!(most_at_once("three", "concurrency: 3"), 3, "all three at once");
}

#[test]
fn rate_limits_space_out_a_tools_calls_and_an_agents_turns() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("rates.script.yaml"),
        "replies:\n  writer:\n  - output: \"one\"\n  - output: \"two\"\n  - output: \"three\"\n",
    )
    .unwrap();
    // Three calls of each at most 1 per 600 ms: the third waits 1.2 s after
    // the first; without the limits the run takes milliseconds.
    let source = |tool_rate: &str, agent_rate: &str| {
        format!(
            r#"provider local: scripted {{ script: "rates.script.yaml" }}
agent writer {{ provider: local{agent_rate} }}
tool stamp: builtin {{ description: "Echoes", input: any, output: any, function: "identity"{tool_rate} }}
workflow rates {{
  start: t1
  node t1: tool stamp {{ args: {{ n: 1 }} }}
  node t2: tool stamp {{ args: {{ n: 2 }} }}
  node t3: tool stamp {{ args: {{ n: 3 }} }}
  node w1: agent writer {{ output: string }}
  node w2: agent writer {{ output: string }}
  node w3: agent writer {{ output: string }}
  node done: end ok
  t1 -> t2 -> t3 -> w1 -> w2 -> w3 -> done
}}
"#
        )
    };
    let elapsed = |name: &str, tool_rate: &str, agent_rate: &str| {
        std::fs::write(dir.path().join(format!("{name}.flow")), source(tool_rate, agent_rate)).unwrap();
        let run_dir = dir.path().join(name);
        let started = std::time::Instant::now();
        let out = flow(&["run", &format!("{name}.flow"), "--run-dir", run_dir.to_str().unwrap(), "-q"], dir.path());
        assert!(out.status.success(), "{}", text(&out));
        started.elapsed().as_secs_f64()
    };
    let tools = elapsed("tools", ", rate_limit: 1 / 600ms", "");
    assert!(tools >= 1.2, "three tool calls at 1 per 600 ms took {tools:.2} s");
    let agents = elapsed("agents", "", ", rate_limit: 1 / 600ms");
    assert!(agents >= 1.2, "three turns at 1 per 600 ms took {agents:.2} s");
    let both = elapsed("both", ", rate_limit: 1 / 600ms", ", rate_limit: 1 / 600ms");
    assert!(both >= 2.4, "each limit holds its own calls back: {both:.2} s");
}

#[test]
fn a_probe_past_its_evaluators_timeout_is_never_a_pass() {
    let dir = tempfile::tempdir().unwrap();
    let source = |timeout: &str| {
        format!(
            r#"tool make: builtin {{ description: "Makes", input: any, output: any, function: "identity" }}
evaluator slow_probe: command {{
  input: any
  argv: ["python3", "-c", "import time; time.sleep(30)"]
  {timeout}
}}
workflow probed {{
  start: x
  node x: tool make {{ args: {{ n: 1 }} }}
  node done: end ok
  node stopped: end stopped {{ status: failure }}
  x -> done
  gate g: x -> done {{
    evaluate: [slow_probe(x)]
    on PASS -> continue
    on BLOCK -> goto(stopped)
  }}
}}
"#
        )
    };
    std::fs::write(dir.path().join("probed.flow"), source("timeout: 1s")).unwrap();
    let run_dir = dir.path().join("run");
    let started = std::time::Instant::now();
    let out = flow(&["run", "probed.flow", "--run-dir", run_dir.to_str().unwrap(), "-q"], dir.path());
    let took = started.elapsed().as_secs_f64();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(took < 20.0, "the probe was stopped at its timeout, not after its 30 s: {took:.1} s");
    let trace = assert_valid_trace(&run_dir);
    let gate = trace.iter().find(|e| e["kind"] == "gate_recorded").expect("the gate was recorded");
    assert_eq!(gate["payload"]["outcome"], "BLOCK", "{gate}");
    assert_eq!(last(&trace)["payload"]["reason"], "stopped");
}
