//! `flow trace check` and `flow coverage` on real runs.
//!
//! Every example runs offline once (shared by the tests of this file) and
//! its trace is conformant to its plan. Each tamper test starts from one of
//! those real traces, changes it the way a forger or a bug would, and
//! expects its own deviation code. Coverage is measured over the example
//! runs and compared with what the traces show, computed here from their
//! events.
#![allow(clippy::disallowed_methods)]

mod common;
use common::*;

use flow_check::ir::NodeKind;
use flow_check::plan::Plan;
use flow_diagnostics::SourceDb;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

fn example(name: &str) -> PathBuf {
    repo().join(format!("examples/{name}/{name}.flow"))
}

/// This process's scratch directory: test runners that start a process
/// per test (nextest) run two of these at once, and each makes the runs.
fn scratch() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("trace_check-{}", std::process::id()))
}

/// One offline run of every example: (name, run directory).
fn runs() -> &'static Vec<(String, PathBuf)> {
    static RUNS: OnceLock<Vec<(String, PathBuf)>> = OnceLock::new();
    RUNS.get_or_init(|| {
        let root = scratch().join("runs");
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        example_names()
            .into_iter()
            .map(|name| {
                let dir = root.join(&name);
                let out = flow(&["run", example(&name).to_str().unwrap(), "--run-dir", dir.to_str().unwrap(), "-q", "--no-prompt"], &root);
                assert!(out.status.success(), "{name} did not run: {}", text(&out));
                (name, dir)
            })
            .collect()
    })
}

fn run_of(name: &str) -> &'static Path {
    &runs().iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no run of {name}")).1
}

/// `flow trace check TRACE --plan PLAN --format json`: exit code and document.
fn check(trace: &Path, plan: &Path) -> (i32, Value) {
    let out = flow(&["trace", "check", trace.to_str().unwrap(), "--plan", plan.to_str().unwrap(), "--format", "json"], &repo());
    let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(&out)));
    (out.status.code().unwrap_or(-1), doc)
}

fn codes(doc: &Value) -> BTreeSet<String> {
    doc["deviations"].as_array().unwrap().iter().map(|d| d["code"].as_str().unwrap().to_string()).collect()
}

/// Copies a run (its artifacts), replaces its trace with `events` (each
/// a JSON value, or a raw line) and checks it against the example's plan.
fn tampered(name: &str, test: &str, events: Vec<Value>) -> (i32, Value) {
    let dir = scratch().join("tampered").join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("artifacts")).unwrap();
    copy_tree(&run_of(name).join("artifacts"), &dir.join("artifacts"));
    let lines = rechained(events);
    std::fs::write(dir.join("trace.jsonl"), lines.join("\n") + "\n").unwrap();
    check(&dir, &example(name))
}

/// The lines of `events` (JSON values, or raw lines kept as they are) with
/// the hash chain recomputed over the events: the forger who knows the
/// chain's rule, so that what is tested is the check the edit is for (only
/// a signature sees a recomputed chain: `tamper.rs`).
fn rechained(events: Vec<Value>) -> Vec<String> {
    let run = events.iter().find_map(|e| e["run_id"].as_str()).unwrap_or("r").to_string();
    let mut prev = flow_trace::chain::genesis(&run);
    events
        .into_iter()
        .map(|mut e| match e.as_str() {
            Some(raw) => raw.to_string(),
            None => {
                e["prev"] = json!(prev);
                let line = e.to_string();
                prev = flow_trace::chain::link(&line);
                line
            }
        })
        .collect()
}

fn position(events: &[Value], kind: &str, test: impl Fn(&Value) -> bool) -> usize {
    events.iter().position(|e| e["kind"] == kind && test(&e["payload"])).unwrap_or_else(|| panic!("no {kind} event"))
}

fn assert_code(result: &(i32, Value), code: &str) {
    let (status, doc) = result;
    assert_eq!(*status, 1, "deviations exit 1: {doc:#}");
    assert_eq!(doc["conformant"], false);
    assert!(codes(doc).contains(code), "expected {code}, got {:?}:\n{doc:#}", codes(doc));
}

// ---------------------------------------------------------------- conformance

#[test]
fn every_example_trace_is_conformant_to_its_plan() {
    for (name, run) in runs() {
        let (status, doc) = check(run, &example(name));
        assert_eq!(status, 0, "{name}: {doc:#}");
        assert_eq!(doc["conformant"], true, "{name}");
        assert_eq!(doc["format_version"], 1);
        assert_eq!(doc["trace"]["state"], "terminated", "{name}");
        assert_eq!(doc["trace"]["events"].as_u64().unwrap() as usize, events(run).len(), "{name}");
        let policies = doc["policies"].as_array().unwrap();
        assert!(!policies.is_empty(), "{name} declares policies");
        for p in policies {
            assert_eq!(p["verdict"], "holds", "{name}: {p}");
        }
        // The run directory has its artifacts: payload types were checked.
        let notes = doc["notes"].as_array().unwrap();
        assert!(!notes.iter().any(|n| n.as_str().unwrap().contains("no artifact store")), "{name}: {notes:?}");
        // The trace file alone checks the same, from the artifacts beside it.
        let (status, _) = check(&run.join("trace.jsonl"), &example(name));
        assert_eq!(status, 0, "{name} as a trace.jsonl");
    }
}

#[test]
fn a_plan_from_flowc_build_checks_like_the_source() {
    let file = example("research_writer");
    let source = std::fs::read_to_string(&file).unwrap();
    let mut db = SourceDb::new();
    let root = db.add(flow_pipeline::normalize(&file), source);
    let checked = flow_check::check_program(&mut db, root, &flow_pipeline::FsLoader);
    assert!(!checked.has_errors());
    let files: Vec<(&str, &str)> = (0..db.len() as u32).map(flow_diagnostics::FileId).map(|id| (db.name(id), db.text(id))).collect();
    let plan = Plan::new(checked.program, "trace-check-test", &files);
    let dir = scratch().join("plan");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("research_writer.plan.json");
    std::fs::write(&path, serde_json::to_string(&plan).unwrap()).unwrap();
    let (status, doc) = check(run_of("research_writer"), &path);
    assert_eq!(status, 0, "{doc:#}");
    assert_eq!(doc["plan"]["digest"], plan.source.digest);
}

#[test]
fn human_output_names_code_seq_expected_and_actual() {
    let mut trace = events(run_of("research_writer"));
    let handoff = position(&trace, "handoff", |_| true);
    trace[handoff]["payload"]["context"] = json!("fork");
    let dir = scratch().join("human");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let lines = rechained(trace.clone());
    std::fs::write(dir.join("trace.jsonl"), lines.join("\n")).unwrap();
    let out = flow(
        &["trace", "check", dir.join("trace.jsonl").to_str().unwrap(), "--plan", example("research_writer").to_str().unwrap()],
        &repo(),
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let seq = trace[handoff]["seq"].as_u64().unwrap();
    assert!(stdout.contains(&format!("T030 seq {seq}: handoff linkage -> write")), "{stdout}");
    assert!(stdout.contains("expected: context filtered, context_fields [claims]"), "{stdout}");
    assert!(stdout.contains("actual:   context fork, context_fields [claims]"), "{stdout}");
    assert!(stdout.contains("node write"), "{stdout}");
    assert!(stdout.contains("not conformant: 1 deviation(s) (T030 ×1)"), "{stdout}");
    assert!(stdout.contains("payload type(s) not checked"), "no artifacts next to this trace: {stdout}");
}

#[test]
fn usage_errors_exit_2_and_codes_are_explained() {
    let missing = flow(&["trace", "check", "/nonexistent/trace.jsonl", "--plan", example("research_writer").to_str().unwrap()], &repo());
    assert_eq!(missing.status.code(), Some(2), "{}", text(&missing));
    let run = run_of("research_writer").to_str().unwrap();
    let bad_plan = flow(&["trace", "check", run, "--plan", "/nonexistent/plan.json"], &repo());
    assert_eq!(bad_plan.status.code(), Some(2), "{}", text(&bad_plan));
    let no_plan = flow(&["trace", "check", run], &repo());
    assert_eq!(no_plan.status.code(), Some(2), "{}", text(&no_plan));
    let explain = flow(&["trace", "explain", "T020"], &repo());
    assert!(explain.status.success());
    assert!(text(&explain).contains("gate not passed"), "{}", text(&explain));
    let all = flow(&["trace", "explain"], &repo());
    assert!(text(&all).lines().count() >= 18, "{}", text(&all));
    assert_eq!(flow(&["trace", "explain", "T999"], &repo()).status.code(), Some(2));
}

#[test]
fn the_trace_vocabulary_is_explained_word_by_word() {
    let timeout = flow(&["trace", "explain", "timeout"], &repo());
    assert!(timeout.status.success(), "{}", text(&timeout));
    let out = text(&timeout);
    for registry in ["timeout: error code (attempt_failed.error_code", "timeout: handler event", "timeout: decision"] {
        assert!(out.contains(registry), "{registry} missing from:\n{out}");
    }
    let failed = text(&flow(&["trace", "explain", "review_failed"], &repo()));
    assert!(failed.contains("termination reason (chosen by the engine)") && failed.contains("no handler"), "{failed}");
    let all = text(&flow(&["trace", "explain"], &repo()));
    for heading in ["deviation codes", "error code (", "termination reason (chosen by the engine) (", "decision (", "budget zone ("] {
        assert!(all.contains(heading), "{heading} missing from:\n{all}");
    }
    assert!(all.contains("input_too_large") && all.contains("awaiting_decision"), "{all}");
    let unknown = flow(&["trace", "explain", "frobnicate"], &repo());
    assert_eq!(unknown.status.code(), Some(2));
    assert!(text(&unknown).contains("neither a deviation code nor a word"), "{}", text(&unknown));
}

// -------------------------------------------------------------------- tampers

#[test]
fn deleting_a_gate_recorded_event_is_t020() {
    let trace = events(run_of("research_writer"));
    let trace: Vec<Value> = trace.into_iter().filter(|e| e["kind"] != "gate_recorded").collect();
    let result = tampered("research_writer", "delete_gate", renumber(trace));
    assert_code(&result, "T020");
    let d = result.1["deviations"].as_array().unwrap().iter().find(|d| d["code"] == "T020").unwrap().clone();
    assert_eq!(d["gate"], "evidence_gate");
    assert_eq!(d["node"], "outline");
}

#[test]
fn reordering_two_events_is_t011() {
    let mut trace = events(run_of("research_writer"));
    let start = position(&trace, "node_started", |p| p["node"] == "outline");
    assert_eq!(trace[start - 1]["kind"], "edge_taken");
    trace.swap(start - 1, start);
    let result = tampered("research_writer", "reorder", renumber(trace));
    assert_code(&result, "T011");
}

#[test]
fn a_forged_gate_trigger_is_t021() {
    let mut trace = events(run_of("short_video"));
    let gate = position(&trace, "gate_recorded", |_| true);
    let forged = trace[gate]["payload"]["trigger"].as_str().unwrap().replace("agent.video_generator", "agent.intruder");
    trace[gate]["payload"]["trigger"] = json!(forged);
    let result = tampered("short_video", "trigger", trace);
    assert_code(&result, "T021");
    assert_eq!(codes(&result.1), BTreeSet::from(["T021".to_string()]));
}

#[test]
fn a_forged_decider_is_t022() {
    let mut trace = events(run_of("agent_proxy"));
    let applied = position(&trace, "decision_applied", |p| p["subject"] == "pm_approval");
    trace[applied]["payload"]["by"] = json!("intern");
    let result = tampered("agent_proxy", "decider", trace);
    assert_code(&result, "T022");
}

#[test]
fn a_settled_amount_over_the_budget_is_t040() {
    let mut trace = events(run_of("research_writer"));
    // research_writer's run budget allows 200k tokens.
    let settled = position(&trace, "budget_settled", |p| p["used"]["tokens"].as_u64().unwrap() > 0);
    trace[settled]["payload"]["used"]["tokens"] = json!(250_000);
    let result = tampered("research_writer", "budget", trace);
    assert_code(&result, "T040");
    // The settlement's `remaining` no longer matches the use: T041 too.
    assert_eq!(codes(&result.1), BTreeSet::from(["T040".to_string(), "T041".to_string()]));
}

#[test]
fn dropping_a_context_field_is_t030() {
    let mut trace = events(run_of("research_writer"));
    let handoff = position(&trace, "handoff", |_| true);
    assert_eq!(trace[handoff]["payload"]["context_fields"], json!(["claims"]));
    trace[handoff]["payload"]["context_fields"] = json!([]);
    let result = tampered("research_writer", "context_fields", trace);
    assert_code(&result, "T030");
    assert_eq!(codes(&result.1), BTreeSet::from(["T030".to_string()]));
}

#[test]
fn a_termination_no_policy_allows_is_t050() {
    let mut trace = events(run_of("research_writer"));
    let last = trace.len() - 1;
    // `review_terminates` allows published, search_evidence_gate, … only.
    trace[last]["payload"]["reason"] = json!("abandoned");
    let result = tampered("research_writer", "policy", trace);
    assert_code(&result, "T050");
    let policy = result.1["policies"].as_array().unwrap().iter().find(|p| p["name"] == "review_terminates").unwrap().clone();
    assert_eq!(policy["verdict"], "violated");
    assert!(policy["owed"].as_str().unwrap().contains("terminated(published)"), "{policy}");
    // The reason does not follow from the end node either.
    assert!(codes(&result.1).contains("T060"));
}

#[test]
fn a_malformed_line_is_t001() {
    let mut trace = events(run_of("research_writer"));
    let lease = position(&trace, "lease_granted", |_| true);
    let line = trace[lease].to_string().replace("\"lease_granted\"", "\"lease_grunted\"");
    trace[lease] = json!(line);
    let result = tampered("research_writer", "schema", trace);
    assert_code(&result, "T001");
    assert_eq!(codes(&result.1), BTreeSet::from(["T001".to_string()]), "its seq still counts");
    assert_eq!(result.1["deviations"][0]["line"], lease + 1);
}

#[test]
fn a_missing_event_is_a_seq_gap_t002() {
    let mut trace = events(run_of("research_writer"));
    let lease = position(&trace, "lease_granted", |_| true);
    let seq = trace[lease]["seq"].as_u64().unwrap();
    trace.remove(lease);
    let result = tampered("research_writer", "gap", trace);
    assert_code(&result, "T002");
    assert_eq!(codes(&result.1), BTreeSet::from(["T002".to_string()]));
    assert!(result.1["deviations"][0]["message"].as_str().unwrap().contains(&format!("{seq} missing")));
}

// ------------------------------------------------------------------- coverage

/// The ids a trace covers, computed from its events here (independently
/// of the runtime's code).
fn covered_ids(trace: &[Value], agent_of_node: &dyn Fn(&str) -> Option<String>) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    for e in trace {
        let p = &e["payload"];
        let s = |k: &str| p[k].as_str().unwrap_or_default().to_string();
        match e["kind"].as_str().unwrap() {
            "agent_turn" => {
                ids.insert(format!("agent:{}", s("agent")));
            }
            "node_started" => {
                if let Some(agent) = agent_of_node(&s("node")) {
                    ids.insert(format!("agent:{agent}"));
                }
            }
            "tool_call_started" if p["agent"].is_string() => {
                ids.insert(format!("tool_edge:{}->{}", s("agent"), s("tool")));
            }
            "tool_call_refused" if p["agent"].is_string() => {
                ids.insert(format!("restricted_tool_edge:{}->{}", s("agent"), s("tool")));
            }
            "delegation" => {
                ids.insert(format!("delegation_edge:{}->{}", s("from"), s("to")));
            }
            "gate_recorded" => {
                ids.insert(format!("gate_outlet:{}:{}", s("gate"), s("outcome")));
            }
            "decision_applied" => {
                ids.insert(format!("gate_outlet:{}:{}", s("subject"), s("decision")));
            }
            _ => {}
        }
    }
    ids
}

fn program_of(file: &Path) -> flow_check::ir::Program {
    let mut db = SourceDb::new();
    let root = db.add(flow_pipeline::normalize(file), std::fs::read_to_string(file).unwrap());
    flow_check::check_program(&mut db, root, &flow_pipeline::FsLoader).program
}

fn coverage(traces: &[&Path], plan: &Path, format: &str) -> Output {
    let mut args: Vec<&str> = vec!["coverage"];
    args.extend(traces.iter().map(|t| t.to_str().unwrap()));
    args.extend(["--plan", plan.to_str().unwrap(), "--format", format]);
    flow(&args, &repo())
}

#[test]
fn coverage_of_each_example_run_matches_its_trace() {
    for (name, run) in runs() {
        let program = program_of(&example(name));
        let obligations = flow_verify::obligations::obligations(&program);
        let wf = events(run)[0]["payload"]["workflow"].as_str().unwrap().to_string();
        let nodes = &program.workflows[&wf].nodes;
        let agent_of = |n: &str| nodes.get(n).filter(|n| n.kind() == NodeKind::Agent).and_then(|n| n.target.first().cloned());
        let seen = covered_ids(&events(run), &agent_of);
        let out = coverage(&[run], &example(name), "json");
        assert!(out.status.success(), "{name}: {}", text(&out));
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        for kind in ["agent", "tool_edge", "restricted_tool_edge", "delegation_edge", "gate_outlet"] {
            let of_kind: Vec<_> = obligations.iter().filter(|o| o.kind == kind).collect();
            let covered = of_kind.iter().filter(|o| o.workflow == wf && seen.contains(&o.id)).count();
            let reported = doc["kinds"].as_array().unwrap().iter().find(|k| k["kind"] == kind).unwrap();
            assert_eq!(reported["total"], of_kind.len(), "{name} {kind}");
            assert_eq!(reported["covered"], covered, "{name} {kind}: {reported}");
            let percent = (!of_kind.is_empty()).then(|| (covered as f64 * 1000.0 / of_kind.len() as f64).round() / 10.0);
            assert_eq!(reported["percent"].as_f64(), percent, "{name} {kind}");
        }
        let uncovered: BTreeSet<String> =
            obligations.iter().filter(|o| !(o.workflow == wf && seen.contains(&o.id))).map(|o| o.id.clone()).collect();
        let reported: BTreeSet<String> = doc["uncovered"].as_array().unwrap().iter().map(|u| u.as_str().unwrap().to_string()).collect();
        assert_eq!(reported, uncovered, "{name}");
        // Every example run exercises its agents and its gates' PASS.
        let agents = doc["kinds"].as_array().unwrap().iter().find(|k| k["kind"] == "agent").unwrap();
        assert!(agents["covered"].as_u64().unwrap() > 0, "{name}: {agents}");
    }
}

#[test]
fn coverage_over_several_traces_adds_up_and_prints_per_kind() {
    // research_writer twice: the published run and one whose evidence gate
    // blocks (the fixtures' input and cassette).
    let fixtures = repo().join("interpreter/flow/tests/fixtures");
    let blocked = scratch().join("blocked");
    let _ = std::fs::remove_dir_all(&blocked);
    let out = flow(
        &[
            "run",
            example("research_writer").to_str().unwrap(),
            "--run-dir",
            blocked.to_str().unwrap(),
            "-q",
            "--input",
            fixtures.join("research_blocked.input.json").to_str().unwrap(),
            "--replay",
            fixtures.join("research_blocked.cassette.yaml").to_str().unwrap(),
        ],
        &repo(),
    );
    assert_eq!(out.status.code(), Some(1), "the gate blocks: {}", text(&out));
    let (status, doc) = check(&blocked, &example("research_writer"));
    assert_eq!(status, 0, "a blocked run is conformant too: {doc:#}");

    let published = run_of("research_writer");
    let gate_outlets = |traces: &[&Path]| -> (u64, u64, Vec<String>) {
        let out = coverage(traces, &example("research_writer"), "json");
        assert!(out.status.success(), "{}", text(&out));
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["traces"].as_array().unwrap().len(), traces.len());
        let k = doc["kinds"].as_array().unwrap().iter().find(|k| k["kind"] == "gate_outlet").unwrap().clone();
        let uncovered = doc["uncovered"].as_array().unwrap().iter().map(|u| u.as_str().unwrap().to_string()).collect();
        (k["covered"].as_u64().unwrap(), k["total"].as_u64().unwrap(), uncovered)
    };
    let (alone, total, uncovered_alone) = gate_outlets(&[published]);
    let (both, total_both, uncovered_both) = gate_outlets(&[published, &blocked]);
    assert_eq!(total, total_both);
    // What the traces show: the published run passes the gate, the blocked one blocks it.
    let outcomes = |run: &Path| -> BTreeSet<String> {
        events(run)
            .iter()
            .filter(|e| e["kind"] == "gate_recorded")
            .map(|e| format!("{}:{}", e["payload"]["gate"].as_str().unwrap(), e["payload"]["outcome"].as_str().unwrap()))
            .collect()
    };
    let mut all = outcomes(published);
    all.extend(outcomes(&blocked));
    assert_eq!(alone as usize, outcomes(published).len());
    assert_eq!(both as usize, all.len());
    assert!(both > alone, "the blocked run covers BLOCK");
    assert!(uncovered_alone.contains(&"gate_outlet:evidence_gate:BLOCK".to_string()));
    assert!(!uncovered_both.contains(&"gate_outlet:evidence_gate:BLOCK".to_string()));

    let human = coverage(&[published, &blocked], &example("research_writer"), "human");
    let stdout = String::from_utf8_lossy(&human.stdout).to_string();
    assert!(stdout.contains("coverage of 2 trace(s)"), "{stdout}");
    let pct = |c: u64, t: u64| format!("{:.1}%", (c as f64 * 1000.0 / t as f64).round() / 10.0);
    let line = stdout.lines().find(|l| l.trim_start().starts_with("gate_outlet")).unwrap();
    assert!(line.contains(&format!("{both}/{total}")) && line.contains(&pct(both, total)), "{line}");
    for kind in ["agent", "tool_edge", "restricted_tool_edge", "delegation_edge", "total"] {
        assert!(stdout.lines().any(|l| l.trim_start().starts_with(kind)), "{kind} missing: {stdout}");
    }
    if !uncovered_both.is_empty() {
        assert!(stdout.contains(&format!("uncovered ({}):", uncovered_both.len())), "{stdout}");
        assert!(stdout.contains(&uncovered_both[0]), "{stdout}");
    }
}

#[test]
fn a_delegation_recorded_with_another_reason_is_t030() {
    let mut trace = events(run_of("delegation"));
    let delegation = position(&trace, "delegation", |p| p["reason"].is_string());
    trace[delegation]["payload"]["reason"] = json!("no reason at all");
    let result = tampered("delegation", "delegation_reason", trace);
    assert_code(&result, "T030");
    assert_eq!(codes(&result.1), BTreeSet::from(["T030".to_string()]));
}
