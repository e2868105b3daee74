//! Online policy monitors in `flow run` (reference §8.4): each response
//! (warn, halt, block, escalate) applied by the control plane before the
//! offending action takes effect, obligations still open at the end, one
//! report per policy, resume rebuilding the monitors by replay, and every
//! example running without a violation.
//!
//! The programs are compiled to plans with the checker only (no model
//! checker) and run with `--unverified` (`flow run` would otherwise check
//! them again and refuse), so that a policy the model checker would refute
//! statically can still be run and watched online.
#![allow(clippy::disallowed_methods)]

mod common;
use common::*;

use flow_check::plan::Plan;
use flow_diagnostics::SourceDb;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;

/// Checks `source` (no errors allowed) and writes its plan as
/// `DIR/NAME.plan.json`.
fn plan(dir: &Path, name: &str, source: &str) -> PathBuf {
    let file = format!("{name}.flow");
    let mut db = SourceDb::new();
    let root = db.add(file.clone(), source.to_string());
    let checked = flow_check::check_program(&mut db, root, &flow_pipeline::FsLoader);
    let errors: Vec<String> = checked.diagnostics.iter().filter(|d| d.is_error()).map(|d| format!("{d:?}")).collect();
    assert!(errors.is_empty(), "{name} does not check: {errors:#?}");
    let plan = Plan::new(checked.program, "monitors-test", &[(&file, source)]);
    let path = dir.join(format!("{name}.plan.json"));
    std::fs::write(&path, serde_json::to_string_pretty(&plan).unwrap()).unwrap();
    path
}

/// Runs a plan with the fake clock, no prompts, into `DIR/run`.
fn run(dir: &Path, plan: &Path) -> (Output, PathBuf) {
    let run_dir = dir.join("run");
    let args = ["run", plan.to_str().unwrap(), "--run-dir", run_dir.to_str().unwrap(), "--fake-clock", "-q", "--no-prompt", "--unverified"];
    let out = flow_env(&args, dir, &[]);
    (out, run_dir)
}

/// The trace holds against the published schema, `seq` is 1..n, parents
/// are earlier events, and nothing follows `run_terminated`.
fn valid_trace(run_dir: &Path) -> Vec<Value> {
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(repo().join("stdlib/schemas/trace-event.schema.json")).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let events = events(run_dir);
    let mut ids = std::collections::HashSet::new();
    for (i, event) in events.iter().enumerate() {
        let errors: Vec<String> = validator.iter_errors(event).map(|e| format!("{e} at {}", e.instance_path())).collect();
        assert!(errors.is_empty(), "event {} is invalid: {errors:?}\n{event}", i + 1);
        assert_eq!(event["seq"], (i + 1) as u64, "seq gap at line {}", i + 1);
        if let Some(parent) = event.get("parent_event_id").and_then(Value::as_str) {
            assert!(ids.contains(parent), "event {} names a parent {parent} that is not earlier", i + 1);
        }
        ids.insert(event["event_id"].as_str().unwrap().to_string());
        if event["kind"] == "run_terminated" {
            assert_eq!(i + 1, events.len(), "events follow run_terminated");
        }
    }
    events
}

fn find<'a>(events: &'a [Value], kind: &str, node: &str) -> Option<&'a Value> {
    events.iter().find(|e| e["kind"] == kind && e["payload"]["node"] == node)
}

fn violations(events: &[Value]) -> Vec<&Value> {
    events.iter().filter(|e| e["kind"] == "policy_violated").collect()
}

fn last(events: &[Value]) -> &Value {
    events.last().unwrap()
}

/// `prepare -> ship -> done`, both tool nodes; `ship` calls `mark`, a
/// command that appends to `ledger.txt` (so a dispatched call shows).
fn program(policies: &str) -> String {
    format!(
        r#"
tool echo: builtin {{ description: "Echoes", input: {{ n: int }}, output: {{ n: int }}, function: "identity" }}
tool mark: command {{
  description: "Appends to the ledger"
  input: {{ n: int }}
  output: {{ n: int }}
  argv: ["python3", "-c", "import sys, json; open('ledger.txt', 'a').write('x\\n'); print(json.dumps({{'n': int(sys.argv[1])}}))", "{{n}}"]
  env: ["PATH"]
}}
principal lead: human
workflow guarded {{
  start: prepare
  node prepare: tool echo {{ args: {{ n: 1 }} }}
  node ship: tool mark {{ args: {{ n: 2 }} }}
  node done: end shipped
  prepare -> ship -> done
{policies}
}}
"#
    )
}

#[test]
fn warn_records_the_violation_and_the_run_goes_on_reporting_each_policy_once() {
    let dir = tempfile::tempdir().unwrap();
    let source = program(
        r#"  policy no_ship: never started(ship) { response: warn, description: "ship only after review" }
  policy quiet: never (completed(prepare) or completed(ship)) { response: warn }"#,
    );
    let (out, run_dir) = run(dir.path(), &plan(dir.path(), "warn", &source));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let trace = valid_trace(&run_dir);
    let found = violations(&trace);
    assert_eq!(found.len(), 2, "one report per policy, though `quiet` is broken twice: {found:#?}");
    let quiet = found.iter().find(|e| e["payload"]["policy"] == "quiet").unwrap();
    assert_eq!(quiet["payload"]["offending"], "node_completed");
    let no_ship = found.iter().find(|e| e["payload"]["policy"] == "no_ship").unwrap();
    assert_eq!(no_ship["payload"]["response"], "warn");
    assert_eq!(no_ship["payload"]["offending"], "node_started");
    assert!(no_ship["payload"].get("owed").is_none());
    let message = no_ship["payload"]["message"].as_str().unwrap();
    assert!(message.contains("started(ship)") && message.contains("ship only after review"), "{message}");
    // Recorded right after the offending event, which it names as parent.
    let started = find(&trace, "node_started", "ship").unwrap();
    assert_eq!(no_ship["parent_event_id"], started["event_id"]);
    assert_eq!(no_ship["seq"].as_u64().unwrap(), started["seq"].as_u64().unwrap() + 1);
    // The run went on: ship ran, the run succeeded.
    assert!(find(&trace, "attempt_started", "ship").is_some());
    assert_eq!(std::fs::read_to_string(dir.path().join("ledger.txt")).unwrap(), "x\n");
    assert_eq!(last(&trace)["payload"]["reason"], "shipped");
    assert_eq!(last(&trace)["payload"]["status"], "success");
    // The violations show in the run's timeline.
    let show = flow_env(&["show", run_dir.to_str().unwrap()], dir.path(), &[]);
    let shown = String::from_utf8_lossy(&show.stdout);
    assert!(shown.contains("policy no_ship violated by node_started (warn)"), "{shown}");
}

#[test]
fn halt_records_the_event_then_stops_before_its_attempt_runs() {
    let dir = tempfile::tempdir().unwrap();
    // `response` defaults to halt.
    let source = program(r#"  policy no_ship: never started(ship)"#);
    let (out, run_dir) = run(dir.path(), &plan(dir.path(), "halt", &source));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let trace = valid_trace(&run_dir);
    let started = find(&trace, "node_started", "ship").expect("the offending event is recorded");
    assert!(find(&trace, "attempt_started", "ship").is_none(), "the offending node's attempt ran");
    assert!(!trace.iter().any(|e| e["kind"] == "tool_call_started" && e["payload"]["tool"] == "mark"), "a call was made after the halt");
    assert!(!dir.path().join("ledger.txt").exists(), "the tool ran");
    let found = violations(&trace);
    assert_eq!(found.len(), 1);
    let v = found[0];
    assert_eq!(v["payload"]["policy"], "no_ship");
    assert_eq!(v["payload"]["response"], "halt");
    assert_eq!(v["payload"]["offending"], "node_started");
    assert_eq!(v["parent_event_id"], started["event_id"]);
    let end = last(&trace);
    assert_eq!(end["kind"], "run_terminated");
    assert_eq!(end["payload"]["reason"], "policy_violation");
    assert_eq!(end["payload"]["status"], "failure");
    assert_eq!(end["parent_event_id"], v["event_id"]);
}

#[test]
fn halt_on_a_tool_call_records_it_and_never_dispatches_it() {
    let dir = tempfile::tempdir().unwrap();
    let source = program(r#"  policy no_mark: never called(mark) { response: halt }"#);
    let (out, run_dir) = run(dir.path(), &plan(dir.path(), "halt_call", &source));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let trace = valid_trace(&run_dir);
    assert!(trace.iter().any(|e| e["kind"] == "tool_call_started" && e["payload"]["tool"] == "mark"));
    assert!(!trace.iter().any(|e| e["kind"] == "tool_call_completed" && e["payload"]["tool"] == "mark"));
    assert!(!dir.path().join("ledger.txt").exists(), "the call was dispatched");
    assert_eq!(violations(&trace)[0]["payload"]["offending"], "tool_call_started");
    assert_eq!(last(&trace)["payload"]["reason"], "policy_violation");
}

#[test]
fn block_stops_the_run_before_the_event_happens() {
    let dir = tempfile::tempdir().unwrap();
    let source = program(r#"  policy no_ship: never started(ship) { response: block }"#);
    let (out, run_dir) = run(dir.path(), &plan(dir.path(), "block", &source));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let trace = valid_trace(&run_dir);
    assert!(find(&trace, "node_started", "ship").is_none(), "the blocked event was recorded");
    assert!(find(&trace, "node_completed", "prepare").is_some());
    let found = violations(&trace);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0]["payload"]["response"], "block");
    assert_eq!(found[0]["payload"]["offending"], "node_started");
    let end = last(&trace);
    assert_eq!(end["payload"]["reason"], "policy_blocked");
    assert_eq!(end["payload"]["status"], "failure");
    assert_eq!(end["parent_event_id"], found[0]["event_id"]);
}

#[test]
fn a_top_level_block_policy_stops_a_tool_call_before_it_is_made() {
    let dir = tempfile::tempdir().unwrap();
    let source = program("") + "policy no_mark: never called(mark) { response: block }\n";
    let (out, run_dir) = run(dir.path(), &plan(dir.path(), "block_call", &source));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let trace = valid_trace(&run_dir);
    assert!(find(&trace, "attempt_started", "ship").is_some());
    assert!(!trace.iter().any(|e| e["kind"] == "tool_call_started" && e["payload"]["tool"] == "mark"), "the blocked call was recorded");
    assert!(!dir.path().join("ledger.txt").exists(), "the blocked call was made");
    assert_eq!(violations(&trace)[0]["payload"]["offending"], "tool_call_started");
    assert_eq!(last(&trace)["payload"]["reason"], "policy_blocked");
}

fn escalated(decision: &str) -> (tempfile::TempDir, PathBuf, Vec<Value>, Output) {
    let dir = tempfile::tempdir().unwrap();
    let source = program(r#"  policy no_ship: never started(ship) { response: escalate, escalate_to: lead }"#);
    let (out, run_dir) = run(dir.path(), &plan(dir.path(), "escalate", &source));
    assert_eq!(out.status.code(), Some(4), "awaiting the decision: {}", text(&out));
    let rd = run_dir.to_str().unwrap();
    let paused = valid_trace(&run_dir);
    assert!(find(&paused, "node_started", "ship").is_none(), "the held event was recorded before the decision");
    let v = violations(&paused);
    assert_eq!(v.len(), 1);
    assert_eq!(v[0]["payload"]["response"], "escalate");
    let asked = paused.iter().find(|e| e["kind"] == "decision_requested").unwrap();
    assert_eq!(asked["payload"]["subject"], "policy.no_ship");
    assert_eq!(asked["payload"]["deciders"], serde_json::json!(["lead"]));
    assert_eq!(asked["parent_event_id"], v[0]["event_id"]);
    assert_eq!(last(&paused)["kind"], "run_paused");
    let status = flow_env(&["status", rd], dir.path(), &[]);
    assert_eq!(status.status.code(), Some(4));
    assert!(text(&status).contains("waiting for a decision on `policy.no_ship`"), "{}", text(&status));
    let ok = flow_env(&["approve", rd, "policy.no_ship", "--decision", decision], dir.path(), &[]);
    assert!(ok.status.success(), "{}", text(&ok));
    let resumed = flow_env(&["resume", rd, "--fake-clock", "-q", "--no-prompt"], dir.path(), &[]);
    let trace = valid_trace(&run_dir);
    assert_eq!(trace.iter().filter(|e| e["kind"] == "decision_requested").count(), 1, "asked again");
    assert_eq!(violations(&trace).len(), 1, "reported again");
    (dir, run_dir, trace, resumed)
}

#[test]
fn escalate_pauses_and_approve_lets_the_held_action_happen() {
    let (dir, _run_dir, trace, resumed) = escalated("approve");
    assert_eq!(resumed.status.code(), Some(0), "{}", text(&resumed));
    let applied = trace.iter().find(|e| e["kind"] == "decision_applied").unwrap();
    assert_eq!(applied["payload"]["decision"], "approve");
    assert_eq!(applied["payload"]["by"], "lead");
    let started = find(&trace, "node_started", "ship").expect("the approved event happened");
    assert_eq!(started["parent_event_id"], applied["event_id"]);
    assert_eq!(std::fs::read_to_string(dir.path().join("ledger.txt")).unwrap(), "x\n");
    assert_eq!(last(&trace)["payload"]["reason"], "shipped");
    assert_eq!(last(&trace)["payload"]["status"], "success");
}

#[test]
fn escalate_then_reject_terminates_without_the_held_action() {
    let (dir, _run_dir, trace, resumed) = escalated("reject");
    assert_eq!(resumed.status.code(), Some(1), "{}", text(&resumed));
    assert!(find(&trace, "node_started", "ship").is_none());
    assert!(!dir.path().join("ledger.txt").exists());
    let end = last(&trace);
    assert_eq!(end["payload"]["reason"], "policy_violation");
    assert_eq!(end["payload"]["status"], "failure");
}

/// [`program`] with a gate and a handoff on `prepare -> ship`.
fn gated(policies: &str) -> String {
    program(policies).replace(
        "  prepare -> ship -> done\n",
        "  prepare -> ship -> done\n  handoff prepare -> ship\n  gate checked: prepare -> ship {\n    evaluate: [predicate(prepare.n > 0)]\n    on PASS -> continue\n    on BLOCK -> terminate(unchecked)\n  }\n",
    )
}

#[test]
fn an_escalated_handoff_crosses_only_once_approved() {
    let dir = tempfile::tempdir().unwrap();
    let source = gated(r#"  policy no_handoff: never handed_off(prepare, ship) { response: escalate, escalate_to: lead }"#);
    let (out, run_dir) = run(dir.path(), &plan(dir.path(), "handoff", &source));
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    let paused = valid_trace(&run_dir);
    assert!(paused.iter().any(|e| e["kind"] == "gate_recorded"));
    assert!(!paused.iter().any(|e| e["kind"] == "handoff"), "the held handoff was recorded");
    assert_eq!(violations(&paused)[0]["payload"]["offending"], "handoff");
    let rd = run_dir.to_str().unwrap();
    let ok = flow_env(&["approve", rd, "policy.no_handoff", "--decision", "approve"], dir.path(), &[]);
    assert!(ok.status.success(), "{}", text(&ok));
    let resumed = flow_env(&["resume", rd, "--fake-clock", "-q", "--no-prompt"], dir.path(), &[]);
    assert_eq!(resumed.status.code(), Some(0), "{}", text(&resumed));
    let trace = valid_trace(&run_dir);
    let applied = trace.iter().find(|e| e["kind"] == "decision_applied").unwrap();
    let handoffs: Vec<&Value> = trace.iter().filter(|e| e["kind"] == "handoff").collect();
    assert_eq!(handoffs.len(), 1);
    assert_eq!(handoffs[0]["parent_event_id"], applied["event_id"]);
    assert!(find(&trace, "node_started", "ship").is_some());
    assert_eq!(last(&trace)["payload"]["reason"], "shipped");
}

#[test]
fn a_blocked_gate_outcome_is_never_recorded_nor_acted_on() {
    let dir = tempfile::tempdir().unwrap();
    let source = gated(r#"  policy no_pass: never outcome(checked, PASS) { response: block }"#);
    let (out, run_dir) = run(dir.path(), &plan(dir.path(), "gate", &source));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let trace = valid_trace(&run_dir);
    assert!(!trace.iter().any(|e| e["kind"] == "gate_recorded"));
    assert!(!trace.iter().any(|e| e["kind"] == "handoff"));
    assert!(find(&trace, "node_started", "ship").is_none());
    assert_eq!(violations(&trace)[0]["payload"]["offending"], "gate_recorded");
    assert_eq!(last(&trace)["payload"]["reason"], "policy_blocked");
}

/// `prepare` goes to `done` (n is 1), never to `ship`.
fn unshipped(policies: &str) -> String {
    program(policies)
        .replace("  prepare -> ship -> done\n", "  prepare -> ship when prepare.n > 5\n  prepare -> done else\n  ship -> done\n")
}

#[test]
fn an_obligation_open_at_the_end_is_reported_before_termination() {
    // warn: reported, the run still succeeds.
    let dir = tempfile::tempdir().unwrap();
    let source = unshipped(r#"  policy shipped: started(prepare) => eventually completed(ship) { response: warn }"#);
    let (out, run_dir) = run(dir.path(), &plan(dir.path(), "owed_warn", &source));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let trace = valid_trace(&run_dir);
    assert!(find(&trace, "node_started", "ship").is_none());
    let found = violations(&trace);
    assert_eq!(found.len(), 1);
    let v = found[0];
    assert_eq!(v["payload"]["offending"], "end");
    assert_eq!(v["payload"]["response"], "warn");
    assert!(v["payload"]["owed"].as_str().unwrap().contains("eventually completed(ship)"), "{v}");
    let end = last(&trace);
    assert_eq!(end["seq"].as_u64().unwrap(), v["seq"].as_u64().unwrap() + 1, "reported right before run_terminated");
    assert_eq!(end["payload"]["reason"], "shipped");
    assert_eq!(end["payload"]["status"], "success");

    // halt (the default): the run that would have succeeded fails.
    let dir = tempfile::tempdir().unwrap();
    let source = unshipped(r#"  policy shipped: eventually completed(ship)"#);
    let (out, run_dir) = run(dir.path(), &plan(dir.path(), "owed_halt", &source));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let trace = valid_trace(&run_dir);
    assert_eq!(violations(&trace)[0]["payload"]["offending"], "end");
    assert_eq!(last(&trace)["payload"]["reason"], "shipped");
    assert_eq!(last(&trace)["payload"]["status"], "failure");

    // A termination that discharges the obligation is no violation.
    let dir = tempfile::tempdir().unwrap();
    let source = unshipped(r#"  policy ends: eventually terminated(shipped)"#);
    let (out, run_dir) = run(dir.path(), &plan(dir.path(), "discharged", &source));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(violations(&valid_trace(&run_dir)).is_empty());
}

#[test]
fn a_termination_that_violates_a_block_policy_does_not_happen() {
    let dir = tempfile::tempdir().unwrap();
    let source = unshipped(r#"  policy ship_first: never terminated(shipped) before completed(ship) { response: block }"#);
    let (out, run_dir) = run(dir.path(), &plan(dir.path(), "block_end", &source));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let trace = valid_trace(&run_dir);
    let v = violations(&trace);
    assert_eq!(v.len(), 1);
    assert_eq!(v[0]["payload"]["offending"], "run_terminated");
    assert_eq!(trace.iter().filter(|e| e["kind"] == "run_terminated").count(), 1);
    assert_eq!(last(&trace)["payload"]["reason"], "policy_blocked");
}

/// Monitors are rebuilt by replay: a run killed at any event boundary
/// resumes to the same violations (each reported once) and the same end.
#[test]
fn a_monitored_run_killed_at_any_event_boundary_resumes_to_the_same_verdicts() {
    let dir = tempfile::tempdir().unwrap();
    let source = program(
        r#"  policy no_ship: never started(ship) { response: warn }
  policy owed: eventually completed(nothing_yet) { response: warn }"#,
    )
    .replace("  node done: end shipped\n", "  node done: end shipped\n  node nothing_yet: tool echo { args: { n: 3 } }\n");
    let plan = plan(dir.path(), "crash", &source);
    let (out, clean) = run(dir.path(), &plan);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let verdicts = |events: &[Value]| -> Vec<Value> {
        events.iter().filter(|e| e["kind"] == "policy_violated" || e["kind"] == "run_terminated").map(|e| e["payload"].clone()).collect()
    };
    let clean_trace = valid_trace(&clean);
    let expected = verdicts(&clean_trace);
    assert_eq!(expected.len(), 3, "two violations and the end: {expected:#?}");
    let total = clean_trace.len();
    for k in 1..total {
        let run_dir = dir.path().join(format!("crash-{k}"));
        let rd = run_dir.to_str().unwrap();
        let crashed = flow_env(
            &["run", plan.to_str().unwrap(), "--run-dir", rd, "--fake-clock", "-q", "--no-prompt", "--unverified"],
            dir.path(),
            &[("FLOW_CRASH_AFTER_SEQ", &k.to_string())],
        );
        assert!(!crashed.status.success(), "crash point {k} did not crash");
        let resumed = flow_env(&["resume", rd, "--fake-clock", "-q", "--no-prompt"], dir.path(), &[]);
        assert!(resumed.status.success(), "crash point {k}: {}", text(&resumed));
        assert_eq!(verdicts(&valid_trace(&run_dir)), expected, "crash point {k}: different verdicts");
    }
}

/// The examples keep their policies: running each offline violates none.
#[test]
fn every_example_runs_without_a_policy_violation() {
    let mut checked = 0;
    for entry in std::fs::read_dir(repo().join("examples")).unwrap() {
        let dir = entry.unwrap().path();
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let file = dir.join(format!("{name}.flow"));
        if !file.exists() {
            continue;
        }
        let cwd = tempfile::tempdir().unwrap();
        let run_dir = cwd.path().join("run");
        let out = flow_env(&["run", file.to_str().unwrap(), "--run-dir", run_dir.to_str().unwrap(), "-q"], cwd.path(), &[]);
        assert!(out.status.success(), "{name}: {}", text(&out));
        let trace = events(&run_dir);
        let found = violations(&trace);
        assert!(found.is_empty(), "{name} violates its policies: {found:#?}");
        checked += 1;
    }
    assert!(checked >= 6, "examples missing");
}
