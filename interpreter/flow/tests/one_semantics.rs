//! One semantics: what `flowc verify` says of a flow is what `flow run`
//! does and what `flow trace check` accepts. Each case is a one-node (or
//! one-fan-out) workflow from the issue that found the three disagreeing:
//! the model checker's verdict, the witness it writes (held against the
//! plan by trace check), and a real run of the engine (held against the
//! plan too) must tell the same story.
// Tests read and write files: the pure-core lint does not apply.
#![allow(clippy::disallowed_methods)]

mod common;
use common::*;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use tempfile::TempDir;

/// A scratch folder holding `case.flow` (and its script, if any).
struct Case {
    dir: TempDir,
}

impl Case {
    fn new(source: &str, script: Option<&str>) -> Case {
        let dir = tempfile::tempdir().expect("scratch dir");
        std::fs::write(dir.path().join("case.flow"), source).expect("write flow");
        if let Some(script) = script {
            std::fs::write(dir.path().join("case.script.yaml"), script).expect("write script");
        }
        Case { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn program(&self) -> flow_check::ir::Program {
        let path = self.path("case.flow");
        let text = std::fs::read_to_string(&path).expect("flow source");
        let mut db = flow_diagnostics::SourceDb::new();
        let root = db.add(flow_pipeline::normalize(&path), text);
        let checked = flow_check::check_program(&mut db, root, &flow_pipeline::FsLoader);
        assert!(!checked.has_errors(), "the case checks: {:?}", checked.diagnostics);
        checked.program
    }

    /// The model checker's verdict on `policy`, and its witness as JSONL.
    fn verify(&self, policy: &str) -> (&'static str, Option<PathBuf>) {
        let program = self.program();
        let reports = flow_verify::policies::check_policies(&program, "sha256:test", flow_verify::policies::DEFAULT_MAX_STATES);
        let report = reports.iter().find(|r| r.name == policy).unwrap_or_else(|| panic!("policy {policy} is checked"));
        if report.events.is_empty() {
            return (report.status, None);
        }
        let file = self.path(&format!("{policy}.jsonl"));
        // Chained, as `flowc verify --witness-dir` writes it.
        let text = flow_trace::chain::to_jsonl(&report.events).expect("event JSON");
        std::fs::write(&file, text).expect("write witness");
        (report.status, Some(file))
    }

    /// Runs the flow (its policies are dropped: `flow run` refuses a flow
    /// with a violated policy) and returns the run directory.
    fn run(&self) -> PathBuf {
        let source = std::fs::read_to_string(self.path("case.flow")).unwrap();
        let runnable: String = source.lines().filter(|l| !l.starts_with("policy ")).map(|l| format!("{l}\n")).collect();
        std::fs::write(self.path("run.flow"), runnable).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_flow"))
            .args(["run", "run.flow", "--run-dir", "r", "-q"])
            .current_dir(self.dir.path())
            .output()
            .expect("flow runs");
        assert!(self.path("r/trace.jsonl").exists(), "the run wrote a trace: {}", String::from_utf8_lossy(&out.stderr));
        self.path("r")
    }
}

fn trace_check(trace: &Path, plan: &Path) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_flow"))
        .args(["trace", "check"])
        .arg(trace)
        .arg("--plan")
        .arg(plan)
        .args(["--format", "json"])
        .output()
        .expect("flow runs");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
}

/// The deviation codes of a trace-check report.
fn codes(doc: &Value) -> Vec<String> {
    doc["deviations"].as_array().unwrap().iter().map(|d| d["code"].as_str().unwrap().to_string()).collect()
}

fn kinds(events: &[Value], kind: &str) -> Vec<Value> {
    events.iter().filter(|e| e["kind"] == kind).map(|e| e["payload"].clone()).collect()
}

/// A witness of a violated policy is, to trace check, a trace that
/// violates exactly that policy and nothing else (T050 only).
fn assert_only_the_policy_breaks(case: &Case, witness: &Path) {
    let doc = trace_check(witness, &case.path("case.flow"));
    assert_eq!(codes(&doc), ["T050"], "{doc}");
}

fn terminated(trace: &Path) -> (String, String) {
    let all = trace_events(trace);
    let end = kinds(&all, "run_terminated").pop().expect("the run terminated");
    (end["reason"].as_str().unwrap().to_string(), end["status"].as_str().unwrap().to_string())
}

const AGENT: &str = "provider local: scripted { script: \"case.script.yaml\" }\nagent w { provider: local }\n";

#[test]
fn a_handoff_without_context_is_isolated_for_the_verifier_the_engine_and_trace_check() {
    let source = format!(
        "{AGENT}workflow one {{\n  start: a\n  node a: agent w {{ output: {{ ok: bool }} }}\n  node b: agent w {{ output: {{ ok: bool }} }}\n  node done: end done\n  a -> b -> done\n  handoff a -> b {{ payload: {{ ok: bool }} }}\n}}\npolicy p: never handed_off(a, b)\n"
    );
    let case = Case::new(&source, Some("replies: {}\n"));
    let (status, witness) = case.verify("p");
    assert_eq!(status, "violated");
    let witness = witness.unwrap();
    assert_only_the_policy_breaks(&case, &witness);
    let handoff = kinds(&trace_events(&witness), "handoff").pop().expect("the witness hands off");
    assert_eq!(handoff["context"], "isolated");
    let run = case.run();
    let handoff = kinds(&trace_events(&run.join("trace.jsonl")), "handoff").pop().expect("the run hands off");
    assert_eq!(handoff["context"], "isolated");
    assert_eq!(codes(&trace_check(&run, &case.path("run.flow"))), Vec::<String>::new());
}

#[test]
fn a_loop_that_falls_back_ends_under_the_fallbacks_reason() {
    let source = format!(
        "{AGENT}workflow one {{\n  start: lp\n  node lp: loop [a] {{ max_rounds: 2, until: a.ok, on_exhausted: fallback(gave_up) }}\n  node a: agent w {{ output: {{ ok: bool }} }}\n  node done: end done\n  lp -> done\n}}\npolicy p: never terminated(gave_up)\n"
    );
    let case = Case::new(&source, Some("replies:\n  w:\n  - output: { ok: false }\n"));
    let (status, witness) = case.verify("p");
    assert_eq!(status, "violated", "the loop's fallback ends runs with `gave_up`");
    assert_only_the_policy_breaks(&case, &witness.unwrap());
    let run = case.run();
    assert_eq!(terminated(&run.join("trace.jsonl")), ("gave_up".into(), "partial".into()));
    let actions = kinds(&trace_events(&run.join("trace.jsonl")), "action_taken");
    assert_eq!(actions.len(), 1, "the exhausted loop's action is recorded once: {actions:?}");
    assert_eq!(codes(&trace_check(&run, &case.path("run.flow"))), Vec::<String>::new());
}

fn zone_flow(action: &str, policies: &str) -> String {
    format!(
        "provider local: scripted {{ script: \"case.script.yaml\", max_tokens: 100 }}\nagent w {{ provider: local }}\nbudget b {{\n  tokens: 10k\n  zones: [ {{ zone: fuse, below: 5%, action: {action} }} ]\n}}\nworkflow one {{\n  start: a\n  budget: b\n  node a: agent w {{ output: {{ ok: bool }} }}\n  node done: end done\n  a -> done\n}}\n{policies}"
    )
}

const BIG_TURN: &str = "replies:\n  w:\n  - output: { ok: true }\n    usage: { input_tokens: 9600, output_tokens: 10 }\n";

#[test]
fn a_zone_fallback_ends_under_its_own_reason_with_its_actions_recorded() {
    let case = Case::new(
        &zone_flow("fallback(low_budget)", "policy p: never terminated(low_budget)\npolicy q: never terminated(partial_result)\n"),
        Some(BIG_TURN),
    );
    let (status, witness) = case.verify("p");
    assert_eq!(status, "violated");
    let witness = witness.unwrap();
    assert_only_the_policy_breaks(&case, &witness);
    let zone = kinds(&trace_events(&witness), "budget_zone_changed").pop().expect("the witness enters a zone");
    assert_eq!(zone["actions"], serde_json::json!(["fallback(low_budget)"]), "{zone}");
    assert_eq!(case.verify("q").0, "holds", "fallback(R) ends under R, not partial_result");
    let run = case.run();
    assert_eq!(terminated(&run.join("trace.jsonl")), ("low_budget".into(), "partial".into()));
    assert_eq!(codes(&trace_check(&run, &case.path("run.flow"))), Vec::<String>::new());
}

#[test]
fn zones_are_modelled_whether_or_not_a_policy_names_one() {
    // No policy names a zone: the zone's return_partial still ends runs.
    let case = Case::new(&zone_flow("return_partial", "policy q: never terminated(partial_result)\n"), Some(BIG_TURN));
    let (status, witness) = case.verify("q");
    assert_eq!(status, "violated");
    assert_only_the_policy_breaks(&case, &witness.unwrap());
    let with_zone_policy =
        Case::new(&zone_flow("return_partial", "policy q: never terminated(partial_result)\npolicy z: never zone(fuse)\n"), Some(BIG_TURN));
    assert_eq!(with_zone_policy.verify("q").0, "violated", "the same verdict with an unrelated zone policy");
    let run = case.run();
    assert_eq!(terminated(&run.join("trace.jsonl")), ("partial_result".into(), "partial".into()));
}

#[test]
fn a_zone_action_the_runtime_cannot_take_is_refused() {
    let case = Case::new(&zone_flow("retry", ""), None);
    let path = case.path("case.flow");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut db = flow_diagnostics::SourceDb::new();
    let root = db.add(flow_pipeline::normalize(&path), text);
    let checked = flow_check::check_program(&mut db, root, &flow_pipeline::FsLoader);
    let codes: Vec<&str> = checked.diagnostics.iter().map(|d| d.code.0).collect();
    assert_eq!(codes, ["E0116"], "{:?}", checked.diagnostics);
}

#[test]
fn a_decision_is_recorded_as_the_action_its_handler_takes() {
    let source = "provider local: scripted\nprincipal editor\nagent w { provider: local }\nworkflow one {\n  start: a\n  escalate_to: editor\n  node a: agent w { output: { ok: bool } }\n  node b: agent w { output: { ok: bool } }\n  node redo: agent w { output: { ok: bool } }\n  node done: end done\n  a -> b -> done\n  redo -> done\n  gate g: a -> b {\n    evaluate: [predicate(a.ok)]\n    on PASS -> continue\n    on BLOCK -> decide\n    on reject -> goto(redo)\n  }\n}\npolicy p: never started(redo)\n";
    let case = Case::new(source, None);
    let (status, witness) = case.verify("p");
    assert_eq!(status, "violated");
    let witness = witness.unwrap();
    let applied = kinds(&trace_events(&witness), "decision_applied").pop().expect("the witness decides");
    assert_eq!((applied["decision"].as_str(), applied["action"].as_str()), (Some("reject"), Some("goto(redo)")));
    assert_only_the_policy_breaks(&case, &witness);
    // A planted disagreement is what trace check now reports.
    let text = std::fs::read_to_string(&witness).unwrap().replace("\"action\":\"goto(redo)\"", "\"action\":\"continue\"");
    std::fs::write(&witness, text).unwrap();
    let doc = trace_check(&witness, &case.path("case.flow"));
    assert!(codes(&doc).contains(&"T025".to_string()), "{doc}");
}

fn join_flow(explicit_edges: bool, policy: &str) -> String {
    let edges = if explicit_edges { "  a0 -> j\n  b0 -> j\n" } else { "" };
    format!(
        "{AGENT}workflow one {{\n  start: p\n  node p: parallel [a0, b0]\n  node a0: agent w {{ output: {{ ok: bool }} }}\n  node b0: agent w {{ output: {{ ok: bool }} }}\n  node j: join [a0, b0]\n  node done: end done\n{edges}  j -> done\n}}\n{policy}"
    )
}

#[test]
fn an_all_join_runs_when_every_branch_has_finished() {
    for explicit_edges in [false, true] {
        let case = Case::new(
            &join_flow(
                explicit_edges,
                "policy q: never terminated(done) before completed(a0)\npolicy r: never started(j) before completed(b0)\n",
            ),
            Some("replies: {}\n"),
        );
        assert_eq!(case.verify("q").0, "holds", "explicit edges: {explicit_edges}");
        assert_eq!(case.verify("r").0, "holds", "explicit edges: {explicit_edges}");
        let run = case.run();
        let trace = trace_events(&run.join("trace.jsonl"));
        let at = |kind: &str, node: &str| trace.iter().position(|e| e["kind"] == kind && e["payload"]["node"] == node).unwrap();
        let join_started = at("node_started", "j");
        assert!(join_started > at("node_completed", "a0") && join_started > at("node_completed", "b0"), "explicit edges: {explicit_edges}");
        assert_eq!(kinds(&trace, "node_started").iter().filter(|n| n["node"] == "j").count(), 1, "the join runs once");
        assert_eq!(terminated(&run.join("trace.jsonl")), ("done".into(), "success".into()));
        assert_eq!(codes(&trace_check(&run, &case.path("run.flow"))), Vec::<String>::new());
    }
}

#[test]
fn a_skipped_failure_is_a_completion_trace_check_accepts() {
    let source = format!(
        "{AGENT}workflow one {{\n  start: a\n  node a: agent w {{ output: {{ ok: bool }}, on_failure: skip }}\n  node done: end done\n  a -> done\n}}\npolicy p: failed(a) => eventually terminated(never_this)\n"
    );
    let case = Case::new(&source, Some("replies:\n  w:\n  - error: \"boom\"\n"));
    let (status, witness) = case.verify("p");
    assert_eq!(status, "violated");
    let witness = witness.unwrap();
    assert_only_the_policy_breaks(&case, &witness);
    let completed = kinds(&trace_events(&witness), "node_completed");
    assert_eq!(completed[0]["status"], "skipped", "{completed:?}");
    let run = case.run();
    let completed = kinds(&trace_events(&run.join("trace.jsonl")), "node_completed");
    assert_eq!(completed[0]["status"], "skipped");
    assert_eq!(codes(&trace_check(&run, &case.path("run.flow"))), Vec::<String>::new());
}

#[test]
fn a_single_principal_is_a_list_of_one_for_every_reader() {
    // `escalate_to: editor` names one decider. The engine asks them to
    // confirm the risky call and to decide the gate; the model checker
    // must read the same one principal (it used to read nobody, so it
    // called the confirmation impossible and the decision unreachable).
    let source = "provider local: scripted\nprincipal editor\ntool ship: builtin { description: \"Ships\", input: any, output: any, function: \"noop\", confirm: true }\nagent w { provider: local }\nworkflow one {\n  start: a\n  escalate_to: editor\n  node a: agent w { output: { ok: bool } }\n  node s: tool ship { args: { ok: a.ok } }\n  node done: end done\n  a -> s -> done\n}\npolicy confirmed_first: never called(ship) before approved(editor)\npolicy editor_asked: never approved(editor)\n";
    let case = Case::new(source, None);
    assert_eq!(case.verify("confirmed_first").0, "holds");
    let (status, witness) = case.verify("editor_asked");
    assert_eq!(status, "violated", "the editor is asked to confirm the call");
    let applied = kinds(&trace_events(&witness.unwrap()), "decision_applied").pop().expect("a decision");
    assert_eq!(applied["by"], "editor");
}

#[test]
fn a_join_that_may_fail_as_it_merges_is_modelled_as_failing() {
    // The engine fails a join whose branches disagree under `conflicts:
    // fail` (and one whose merge is not of its `output` type); the model
    // checker used to let every join complete, so `never failed(merge)`
    // "held" while runs broke it.
    let source = |extra: &str| {
        format!(
            "provider local: scripted {{ script: \"case.script.yaml\" }}\nagent w {{ provider: local }}\ntype V = {{ ok: bool }}\nworkflow one {{\n  start: fan\n  node fan: parallel [a, b]\n  node a: agent w {{ output: V }}\n  node b: agent w {{ output: V }}\n  node merge: join [a, b] {{ rule: all{extra} }}\n  node done: end done\n  merge -> done\n}}\npolicy merge_never_fails: never failed(merge)\n"
        )
    };
    let script = "replies:\n  a:\n  - output: { ok: true }\n  b:\n  - output: { ok: false }\n";
    let case = Case::new(&source(", conflicts: fail"), Some(script));
    let (status, witness) = case.verify("merge_never_fails");
    assert_eq!(status, "violated", "a disagreeing merge fails");
    assert_only_the_policy_breaks(&case, &witness.expect("a witness"));
    // The run does what the model said it may.
    let run = case.run();
    assert_eq!(terminated(&run.join("trace.jsonl")).1, "failure");
    let failed = kinds(&trace_events(&run.join("trace.jsonl")), "node_failed");
    assert!(failed.iter().any(|f| f["node"] == "merge" && f["error_code"] == "conflict"), "{failed:?}");
    // A typed merge may fail with invalid_output; an untyped, keeping one never fails.
    assert_eq!(Case::new(&source(", output: V"), Some(script)).verify("merge_never_fails").0, "violated");
    assert_eq!(Case::new(&source(""), Some(script)).verify("merge_never_fails").0, "holds");
}

/// A QUERY/RESPONSE ping-pong between `a` and `b` (edges both ways) under
/// the workflow's `max_hops: 3`, whose handler goes to `stuck`.
fn ping_pong(handler: &str) -> String {
    format!(
        "{AGENT}workflow one {{\n  start: a\n  max_hops: 3\n  node a: agent w {{ output: {{ more: bool }} }}\n  node b: agent w {{ output: {{ more: bool }} }}\n  node stuck: end stuck {{ status: failure }}\n  node done: end done\n  a -> b when a.more\n  a -> done else\n  b -> a\n{handler}}}\npolicy p: never terminated(stuck)\npolicy q: never terminated(max_hops)\n"
    )
}

#[test]
fn max_hops_bounds_a_ping_pong_for_the_verifier_the_engine_and_trace_check() {
    // The agents never stop asking: the fourth crossing between a and b
    // is not taken; the handler goes to `stuck`.
    let case = Case::new(&ping_pong("  on max_hops -> goto(stuck)\n"), Some("replies:\n  w:\n  - output: { more: true }\n"));
    let (status, witness) = case.verify("p");
    assert_eq!(status, "violated", "runs end in `stuck` once the hops run out");
    assert_only_the_policy_breaks(&case, &witness.unwrap());
    let run = case.run();
    let trace = run.join("trace.jsonl");
    assert_eq!(terminated(&trace), ("stuck".into(), "failure".into()));
    let events = trace_events(&trace);
    let crossings = kinds(&events, "edge_taken").iter().filter(|e| e["from"] != "b" || e["to"] != "stuck").count();
    assert_eq!(crossings, 3, "three hops between a and b, then none");
    let acted = kinds(&events, "action_taken").pop().expect("the max_hops handler acted");
    assert_eq!((acted["event"].as_str(), acted["scope"].as_str()), (Some("max_hops"), Some("workflow")), "{acted}");
    assert_eq!(codes(&trace_check(&run, &case.path("run.flow"))), Vec::<String>::new());

    // No handler: the run ends with `max_hops`, for the verifier as for the engine.
    let case = Case::new(&ping_pong(""), Some("replies:\n  w:\n  - output: { more: true }\n"));
    let (status, witness) = case.verify("q");
    assert_eq!(status, "violated");
    assert_only_the_policy_breaks(&case, &witness.unwrap());
    assert_eq!(case.verify("p").0, "holds");
    let run = case.run();
    assert_eq!(terminated(&run.join("trace.jsonl")), ("max_hops".into(), "failure".into()));
    assert_eq!(codes(&trace_check(&run, &case.path("run.flow"))), Vec::<String>::new());
}

#[test]
fn a_workflow_handler_that_escalates_asks_for_the_node_that_raised_it() {
    // `a` fails; the workflow's `on failure -> escalate(lead)` asks the
    // lead, whose reject ends the run: the model must have that run too.
    let source = format!(
        "{AGENT}principal lead\nworkflow one {{\n  start: a\n  node a: agent w {{ output: {{ ok: bool }} }}\n  node done: end done\n  a -> done\n  on failure -> escalate(lead)\n}}\npolicy p: never terminated(escalation_reject)\n"
    );
    let case = Case::new(&source, Some("replies:\n  w:\n  - error: boom\n"));
    let (status, witness) = case.verify("p");
    assert_eq!(status, "violated", "a rejected escalation ends the run");
    let witness = witness.unwrap();
    assert_only_the_policy_breaks(&case, &witness);
    let asked = kinds(&trace_events(&witness), "decision_requested").pop().expect("the witness asks the lead");
    assert_eq!(asked["subject"], "escalation.lead");
    // The engine asks the lead too (the run pauses for the decision).
    let run = case.run();
    let asked = kinds(&trace_events(&run.join("trace.jsonl")), "decision_requested").pop().expect("the run asks the lead");
    assert_eq!(asked["subject"], "escalation.lead");
    assert_eq!(codes(&trace_check(&run, &case.path("run.flow"))), Vec::<String>::new());
}

#[test]
fn a_max_hops_handler_that_goes_on_bounds_nothing_and_the_count_starts_again() {
    let warn = ping_pong("  on max_hops -> warn\n");
    // The limit bounds nothing when its handler goes on: E0403.
    let case = Case::new(&warn, None);
    let found: Vec<&str> = flow_verify::verify(&case.program()).iter().map(|d| d.code.0).collect();
    assert!(found.contains(&"E0403"), "{found:?}");
    // Bounded by `max_visits` instead, the run crosses on past the limit:
    // the pair counts again after each `max_hops` (trace check too).
    let bounded = warn.replace("node a: agent w {", "node a: agent w { max_visits: 5,");
    let case = Case::new(&bounded, Some("replies:\n  w:\n  - output: { more: true }\n"));
    let run = case.run();
    let events = trace_events(&run.join("trace.jsonl"));
    let raised = kinds(&events, "action_taken").iter().filter(|a| a["event"] == "max_hops").count();
    assert!(raised >= 2, "max_hops raised more than once: {raised}");
    let pair = kinds(&events, "edge_taken").iter().filter(|e| e["to"] == "a" || e["to"] == "b").count();
    assert!(pair > 3, "more crossings than the limit in all: {pair}");
    assert_eq!(codes(&trace_check(&run, &case.path("run.flow"))), Vec::<String>::new());
}

#[test]
fn a_deadline_is_a_budget_the_model_knows_can_run_out() {
    // A workflow's deadline (no budget declared) and a contract's: the
    // engine ends work past them (properties.rs::a_workflows_deadline_and_a_contracts_deadline_end_work_that_takes_longer);
    // the model has those runs.
    let case = Case::new(
        &format!("{AGENT}workflow one {{\n  start: a\n  deadline: 10m\n  node a: agent w {{ output: {{ ok: bool }} }}\n  node done: end done\n  a -> done\n  on budget_exhausted -> fallback(out_of_time)\n}}\npolicy p: never terminated(out_of_time)\n"),
        None,
    );
    let (status, witness) = case.verify("p");
    assert_eq!(status, "violated", "a run past its deadline ends out_of_time");
    assert_only_the_policy_breaks(&case, &witness.unwrap());
    let case = Case::new(
        &format!("{AGENT}agent lead {{ provider: local, can_delegate: true }}\ncontract job {{ objective: \"Work\", output: {{ ok: bool }}, deadline: 5m }}\nworkflow one {{\n  start: a\n  node a: agent lead {{ output: {{ ok: bool }} }}\n  node b: agent w {{ output: {{ ok: bool }} }}\n  node done: end done\n  a -> b -> done\n  delegate a -> b {{ contract: job }}\n  on budget_exhausted -> fallback(late)\n}}\npolicy p: never terminated(late)\n"),
        None,
    );
    assert_eq!(case.verify("p").0, "violated", "a delegation past its contract's deadline ends late");
}

#[test]
fn a_refused_transfer_fails_its_sender_for_the_model_too() {
    // The engine refuses a handoff whose acceptance checks fail, and a
    // delegation whose inputs are not of the contract's `inputs` type:
    // the sender fails after it completed. The model checker used to let
    // every transfer through, so "a completed sender never fails" held
    // while runs broke it.
    let handoff = |accept: &str| {
        format!(
            "{AGENT}workflow one {{\n  start: a\n  node a: agent w {{ output: {{ ok: bool }} }}\n  node b: agent w {{ output: {{ ok: bool }} }}\n  node done: end done\n  a -> b -> done\n  handoff a -> b {{ payload: {{ ok: bool }}{accept} }}\n}}\npolicy p: always (completed(a) => always (not failed(a)))\n"
        )
    };
    let script = "replies:\n  a:\n  - output: { ok: false }\n";
    let case = Case::new(&handoff(", accept: [payload.ok]"), Some(script));
    let (status, witness) = case.verify("p");
    assert_eq!(status, "violated", "a refused handoff fails its sender");
    assert_only_the_policy_breaks(&case, &witness.expect("a witness"));
    let run = case.run();
    let failed = kinds(&trace_events(&run.join("trace.jsonl")), "node_failed");
    assert!(failed.iter().any(|f| f["node"] == "a" && f["error_code"] == "handoff_refused"), "{failed:?}");
    assert_eq!(codes(&trace_check(&run, &case.path("run.flow"))), Vec::<String>::new());
    // A payload of the sender's own output type is refused only when that
    // output was not validated (the sender skipped or degraded to).
    let program = Case::new(&handoff(""), Some(script)).program();
    let wf = &program.workflows["one"];
    let refusal = flow_check::semantics::refusal(&program, wf, &wf.transfers[0]);
    assert_eq!(refusal, flow_check::semantics::Refusal::Unvalidated);
    assert_eq!(Case::new(&handoff(""), Some(script)).verify("p").0, "holds");
    // A delegation whose inputs may not be of the contract's type.
    let delegation = format!(
        "{AGENT}agent lead {{ provider: local, can_delegate: true }}\ncontract job {{ objective: \"Work\", inputs: {{ n: int }}, output: {{ ok: bool }} }}\nworkflow one {{\n  start: a\n  node a: agent lead {{ output: {{ ok: bool }} }}\n  node b: agent w {{ output: {{ ok: bool }} }}\n  node done: end done\n  a -> b -> done\n  delegate a -> b {{ contract: job, inputs: {{ n: a.ok }} }}\n}}\npolicy p: always (completed(a) => always (not failed(a)))\n"
    );
    let case = Case::new(&delegation, Some(script));
    let (status, witness) = case.verify("p");
    assert_eq!(status, "violated", "a refused delegation fails its delegator");
    assert_only_the_policy_breaks(&case, &witness.expect("a witness"));
}
