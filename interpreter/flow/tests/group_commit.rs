//! Group commit: the driver persists at effect boundaries. Steps that
//! dispatch nothing external (pure builtin calls, answered at once) are
//! committed with the next boundary; a model turn, a tool that waits, a
//! human, a pause or the end flushes first. (A crash at every event
//! boundary still resumes to the same ending: tests/crashes.rs.)
#![allow(clippy::disallowed_methods)]

mod common;

use flow_runtime::clock::FakeClock;
use flow_runtime::driver::{self, Options};
use flow_runtime::engine::RunStatus;
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;

fn run(source: &str, dir: &Path, name: &str) -> driver::Outcome {
    let file = dir.join(format!("{name}.flow"));
    std::fs::write(&file, source).unwrap();
    let plan = flow_tests::build_plan(&file, &dir.join(format!("{name}.plan.json")));
    let run_dir = dir.join(format!("run-{name}"));
    let opts = Options::new(run_dir.clone(), Arc::new(FakeClock::new(FakeClock::DEFAULT_START)));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let outcome = runtime.block_on(driver::run(&plan, None, Value::Null, dir, name, opts)).unwrap();
    assert!(matches!(&outcome.status, RunStatus::Terminated { status, .. } if status == "success"), "{:?}", outcome.status);
    // Every event is in the journal and the trace, in order.
    let journal = driver::open_journal(&run_dir, false).unwrap();
    let recorded = flow_runtime::journal::Journal::events(&journal, name).unwrap();
    assert_eq!(recorded.len() as u64, outcome.events);
    assert!(recorded.iter().enumerate().all(|(i, e)| e.seq == i as u64 + 1));
    let trace = std::fs::read_to_string(run_dir.join("trace.jsonl")).unwrap();
    assert_eq!(trace.lines().count() as u64, outcome.events);
    outcome
}

#[test]
fn a_chain_of_pure_calls_commits_as_a_group() {
    let dir = tempfile::tempdir().unwrap();
    let outcome = run(&flow_tests::generate::chain_source(200, ""), dir.path(), "pure");
    // Before group commit: two transactions per node (the answer, then
    // its events). Now: the start and the end.
    assert!(outcome.events > 1000, "{} events", outcome.events);
    assert!(outcome.commits <= 3, "{} transactions for a chain of 200 pure calls", outcome.commits);
}

#[test]
fn every_model_turn_is_a_boundary() {
    let dir = tempfile::tempdir().unwrap();
    let mut source = String::from("provider p: scripted\nagent a { provider: p }\nworkflow turns {\n  start: n1\n");
    for i in 1..=20 {
        source.push_str(&format!("  node n{i}: agent a {{ output: string }}\n"));
    }
    source.push_str("  node done: end ok\n");
    for i in 1..20 {
        source.push_str(&format!("  n{i} -> n{}\n", i + 1));
    }
    source.push_str("  n20 -> done\n}\n");
    let outcome = run(&source, dir.path(), "turns");
    // Each turn is dispatched after what led to it is durable, and its
    // answer is durable before anything follows from it.
    assert!(outcome.commits >= 40, "{} transactions for 20 model turns", outcome.commits);
}
