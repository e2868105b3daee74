//! Decision timeouts are the control plane's: a gate's or human node's
//! `timeout` is a deadline its request records, only the driver's clock
//! says it passed, and an answer that comes after it is too late.
// Tests write their sources to a scratch directory: the pure-core lint does not apply.
#![allow(clippy::disallowed_methods)]

use flow_check::plan::Plan;
use flow_runtime::clock::FakeClock;
use flow_runtime::driver::{self, Asker, Options};
use flow_runtime::engine::{Engine, RunConfig};
use flow_runtime::proto::{AgentReply, HumanAnswer, HumanRequest, Request, Response, TokenUsage};
use flow_trace::{Body, Decision, Event};
use serde_json::json;
use std::path::Path;
use std::sync::{Arc, Mutex};

const SOURCE: &str = r#"provider local: scripted { script: "script.yaml" }
agent writer { provider: local }
principal editor: human
evaluator long_enough: predicate {
  input: { words: int }
  check: input.words >= 100
  fail: REQUIRES_DECISION
  reason: "too_short"
}
workflow timed {
  start: write
  escalate_to: editor
  node write: agent writer { output: { words: int } }
  node done: end published
  node stopped: end rejected { status: failure }
  write -> done
  gate review: write -> done {
    evaluate: [long_enough(write)]
    decided_by: [editor]
    decisions: [approve, reject]
    timeout: 1s
    on PASS, approve -> continue
    on REQUIRES_DECISION -> decide
    on BLOCK, reject -> goto(stopped)
    on timeout -> terminate(review_timed_out)
  }
}
"#;

const SCRIPT: &str = "replies:\n  write:\n  - output: { words: 40 }\n";

fn plan(dir: &Path) -> Plan {
    std::fs::write(dir.join("timed.flow"), SOURCE).unwrap();
    std::fs::write(dir.join("script.yaml"), SCRIPT).unwrap();
    let mut db = flow_diagnostics::SourceDb::new();
    let compiled = flow_pipeline::compile_file(&mut db, &dir.join("timed.flow"), flow_pipeline::Depth::Static).unwrap();
    assert!(!compiled.has_errors(), "{}", flow_diagnostics::render::render_human(&db, &compiled.diagnostics));
    Plan::new(compiled.checked.program.clone(), &compiled.digest, &compiled.sources(&db))
}

/// A decider who takes `wait_ms` (on the run's fake clock) to approve.
struct SlowDecider {
    clock: Arc<FakeClock>,
    wait_ms: u64,
}

impl Asker for SlowDecider {
    fn ask(&mut self, request: &HumanRequest) -> Option<HumanAnswer> {
        self.clock.advance(self.wait_ms);
        Some(HumanAnswer { decision: Decision::Approve, by: request.principals[0].clone(), comment: None, output: None })
    }
}

/// The run's decisions (decision, by) and its termination reason.
fn run_with_decider(wait_ms: u64) -> (Vec<(Decision, String)>, String) {
    let dir = tempfile::tempdir().unwrap();
    let plan = plan(dir.path());
    let clock = Arc::new(FakeClock::new(FakeClock::DEFAULT_START));
    let events: Arc<Mutex<Vec<Event>>> = Arc::default();
    let mut opts = Options::new(dir.path().join("run"), clock.clone());
    opts.in_memory = true;
    opts.write_trace = false;
    opts.asker = Some(Box::new(SlowDecider { clock, wait_ms }));
    let sink = events.clone();
    opts.observer = Some(Box::new(move |e: &Event| sink.lock().unwrap().push(e.clone())));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(driver::run(&plan, None, json!({}), dir.path(), "timed", opts)).unwrap();
    let events = events.lock().unwrap();
    let decisions = events
        .iter()
        .filter_map(|e| match &e.body {
            Body::DecisionApplied { decision, by, .. } => Some((*decision, by.clone())),
            _ => None,
        })
        .collect();
    let reason = events.iter().find_map(|e| match &e.body {
        Body::RunTerminated { reason, .. } => Some(reason.clone()),
        _ => None,
    });
    (decisions, reason.expect("the run terminated"))
}

#[test]
fn an_answer_within_the_timeout_applies() {
    let (decisions, reason) = run_with_decider(10);
    assert_eq!(decisions, [(Decision::Approve, "editor".to_string())]);
    assert_eq!(reason, "published");
}

#[test]
fn an_answer_after_the_timeout_is_too_late_and_the_timeout_handler_runs() {
    let (decisions, reason) = run_with_decider(2_000);
    assert_eq!(decisions, [(Decision::Timeout, "control".to_string())]);
    assert_eq!(reason, "review_timed_out");
}

/// An engine over `source` that has asked for the gate's decision, its
/// clock, the decision's command and the events so far.
fn asked(source: &str) -> (Engine, Arc<FakeClock>, flow_runtime::proto::Command, Vec<Event>) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("timed.flow"), source).unwrap();
    std::fs::write(dir.path().join("script.yaml"), SCRIPT).unwrap();
    let mut db = flow_diagnostics::SourceDb::new();
    let compiled = flow_pipeline::compile_file(&mut db, &dir.path().join("timed.flow"), flow_pipeline::Depth::Static).unwrap();
    assert!(!compiled.has_errors(), "{}", flow_diagnostics::render::render_human(&db, &compiled.diagnostics));
    let clock = Arc::new(FakeClock::new(FakeClock::DEFAULT_START));
    let cfg = RunConfig {
        run_id: "run".into(),
        execution_id: "exec-1".into(),
        plan_digest: "sha256:test".into(),
        plan_content_digest: None,
        clock: clock.clone(),
        owner: "test".into(),
        lease_ttl_ms: 30_000,
    };
    let mut engine = Engine::new(Arc::new(compiled.checked.program), None, cfg).unwrap();
    engine.start(json!({}));
    let turn = engine.take_commands().pop().expect("the writer's turn");
    let reply = AgentReply { output: Some(json!({ "words": 40 })), usage: TokenUsage::default(), ..AgentReply::default() };
    engine.on_response(&turn.key, Response::Agent(reply)).unwrap();
    let ask = engine.take_commands().pop().expect("a decision is asked");
    let events = engine.take_events();
    (engine, clock, ask, events)
}

fn timeout() -> Response {
    Response::Human(HumanAnswer { decision: Decision::Timeout, by: "control".into(), comment: None, output: None })
}

#[test]
fn the_engine_refuses_a_timeout_on_a_subject_without_one() {
    let untimed = SOURCE.replace("    timeout: 1s\n", "");
    assert_ne!(untimed, SOURCE);
    let (mut engine, clock, ask, events) = asked(&untimed);
    assert!(events.iter().any(|e| matches!(&e.body, Body::DecisionRequested { expires_at: None, .. })));
    clock.advance(3_600_000);
    let refused = engine.on_response(&ask.key, timeout()).unwrap_err();
    assert!(refused.contains("has no timeout"), "{refused}");
    assert!(engine.is_outstanding(&ask.key), "a refused answer leaves the decision outstanding");
}

#[test]
fn the_engine_refuses_a_timeout_before_the_deadline() {
    let (mut engine, clock, ask, events) = asked(SOURCE);
    assert!(matches!(ask.request, Request::Human(_)));
    let requested = events.into_iter().find_map(|e| match e.body {
        Body::DecisionRequested { expires_at, .. } => Some((e.time, expires_at)),
        _ => None,
    });
    let (asked_at, expires_at) = requested.expect("decision_requested");
    let expires_at = expires_at.expect("the request records its deadline");
    assert!(*expires_at > *asked_at, "{asked_at} → {expires_at}");
    // Too early: the deadline has not passed on the control plane's clock.
    let early = engine.on_response(&ask.key, timeout()).unwrap_err();
    assert!(early.contains("not due to time out"), "{early}");
    // The refused answer changed nothing; past the deadline it applies.
    clock.advance(1_001);
    engine.on_response(&ask.key, timeout()).unwrap();
    let applied: Vec<Body> = engine.take_events().into_iter().map(|e| e.body).collect();
    assert!(
        applied.iter().any(|b| matches!(b, Body::DecisionApplied { decision: Decision::Timeout, by, .. } if by == "control")),
        "{applied:?}"
    );
    assert!(applied.iter().any(|b| matches!(b, Body::RunTerminated { reason, .. } if reason == "review_timed_out")), "{applied:?}");
}
