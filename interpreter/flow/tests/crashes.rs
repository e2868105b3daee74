//! A crash at every event boundary of every example and every fixture.
//!
//! Each flow runs once uninterrupted (`flow run`); then, for every `k` from
//! 1 to its last event but one, a run of the same plan, input and cassette
//! is crashed right after event `k` is durable (the journal's crash hook,
//! failing in process instead of aborting, so that a thousand crashes cost
//! seconds) and `flow resume`d — a reconciliation it stops on (a
//! non-idempotent call in flight at the crash, which the cassette shows
//! never ran) answered "run it again", and a confirmation asked again for
//! an attempt redone after the crash (the call it confirmed never started:
//! the question is asked anew, not carried over) answered as the
//! uninterrupted run's human answered it. Every resumed run ends as the
//! uninterrupted one (status, reason, each node's output), no node
//! completes more often, and its trace is conformant with an intact chain.
#![allow(clippy::disallowed_methods)]

mod common;
use common::*;

use flow_runtime::clock::FakeClock;
use flow_runtime::driver::{self, Options, Outcome, Proposal, ResumeMode, RunMeta};
use flow_runtime::engine::RunStatus;
use flow_runtime::exec::ReplayMode;
use flow_runtime::journal::{ArtifactStore, DirArtifacts};
use flow_runtime::proto::{HumanAnswer, Response};
use flow_runtime::tracecheck;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How a run ended, comparably: the status and every node's output.
fn ending(outcome: &Outcome) -> (String, BTreeMap<String, String>) {
    let status = match &outcome.status {
        RunStatus::Paused { reason, waiting_on } => format!("paused ({reason:?}) on {waiting_on}"),
        other => format!("{other:?}"),
    };
    (status, outcome.outputs.iter().map(|(k, v)| (k.clone(), v.to_string())).collect())
}

fn options(run_dir: PathBuf, meta: &RunMeta) -> Options {
    let mut opts = Options::new(run_dir, Arc::new(FakeClock::new(FakeClock::DEFAULT_START)));
    // The cassette as the run directory records it (relative to it).
    opts.replay = meta.replay_in(&opts.run_dir).map(|(path, strict)| (path, if strict { ReplayMode::Strict } else { ReplayMode::Lenient }));
    opts
}

/// Resumes `run_dir` to its end, answering a reconciliation "run it
/// again" and a confirmation asked again as the uninterrupted run did.
async fn resume_to_the_end(run_dir: &Path, meta: &RunMeta, clean: &[serde_json::Value], at: &str) -> Outcome {
    for _ in 0..4 {
        let outcome = driver::resume(options(run_dir.to_path_buf(), meta), ResumeMode::Continue)
            .await
            .unwrap_or_else(|e| panic!("{at}: resume failed: {e}"));
        let journal = driver::open_journal(run_dir, false).unwrap();
        let pending = driver::pending_decisions(&journal, &outcome.run_id).unwrap();
        drop(journal);
        let answer = pending.iter().find_map(|p| {
            let decision = answer_as_before(&p.subject, clean)?;
            Some((p, serde_json::from_value::<flow_trace::Decision>(serde_json::Value::from(decision)).ok()?))
        });
        let Some((pending, decision)) = answer else { return outcome };
        let mut journal = driver::open_journal(run_dir, true).unwrap();
        let by = pending.deciders.first().cloned().unwrap_or_else(|| "operator".into());
        let answer = HumanAnswer { decision, by, comment: None, output: None };
        let proposal = Proposal { key: pending.key.clone(), response: Response::Human(answer) };
        driver::append_proposal(&mut journal, &outcome.run_id, &proposal).unwrap();
    }
    panic!("{at}: still waiting after four resumes");
}

/// One flow's uninterrupted run, which every crashed run is held to.
struct Clean {
    name: String,
    dir: PathBuf,
    meta: RunMeta,
    plan: flow_check::plan::Plan,
    ending: (String, BTreeMap<String, String>),
    completions: BTreeMap<String, usize>,
    events: Vec<serde_json::Value>,
}

/// Crashes a run of `clean`'s flow after event `k`, resumes it and holds
/// it to the uninterrupted run.
async fn crash_at(clean: Arc<Clean>, k: u64, total: u64) {
    let (name, d, meta, plan) = (&clean.name, clean.dir.as_path(), &clean.meta, &clean.plan);
    let at = format!("{name}, crash after event {k} of {total}");
    let run_dir = d.join(format!("crash-{k}"));
    let mut opts = options(run_dir.clone(), meta);
    opts.crash_after_seq = Some(k);
    opts.crash_in_process = true;
    // The clean run records its source directory relative to its own directory.
    let base = meta.base_dir_in(&d.join("clean"));
    let crashed = driver::run(plan, meta.workflow.as_deref(), meta.input.clone(), &base, &format!("crash-{k}"), opts).await;
    match crashed {
        Err(e) if e.to_string().contains("crashed after event") => {}
        other => panic!("{at}: did not crash: {other:?}"),
    }
    let resumed = resume_to_the_end(&run_dir, meta, &clean.events, &at).await;
    assert_eq!(ending(&resumed), clean.ending, "{at}: another ending");
    assert_eq!(completions(&run_dir), clean.completions, "{at}: nodes completed another number of times");
    let text = std::fs::read_to_string(run_dir.join("trace.jsonl")).unwrap();
    let store = DirArtifacts::open(&run_dir.join("artifacts")).unwrap();
    let check = tracecheck::Options {
        artifacts: Some(&store as &dyn ArtifactStore),
        plan_digest: Some(&plan.source.digest),
        require_chain: true,
        signature: None,
    };
    let report = tracecheck::check_text(&plan.program, &text, &check);
    assert!(report.conformant, "{at}: the resumed trace departs from the plan: {:#?}", report.deviations);
    assert_eq!(report.trace.integrity.chain, "intact", "{at}");
    // Done with it: the campaign's directories stay small.
    let _ = std::fs::remove_dir_all(&run_dir);
}

/// Runs `name` uninterrupted, then crashes it at every event boundary in
/// turn (one at a time: a flow's tools may write into its directory).
/// Gives the number of crashes.
async fn campaign(src: PathBuf, name: String) -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    copy_tree(&src, d);
    let clean_dir = d.join("clean");
    let out = flow(&["run", &format!("{name}.flow"), "--run-dir", clean_dir.to_str().unwrap(), "--fake-clock", "-q", "--no-prompt"], d);
    assert!(matches!(out.status.code(), Some(0 | 1 | 3 | 4 | 5)), "{name}: {}", text(&out));
    let journal = driver::open_journal(&clean_dir, false).unwrap();
    let run_id = driver::run_id_of(&journal).unwrap();
    let (meta, plan) = driver::load_meta(&journal, &run_id).unwrap();
    drop(journal);
    let ending = ending(&driver::resume(options(clean_dir.clone(), &meta), ResumeMode::DeriveOnly).await.unwrap());
    let events = events(&clean_dir);
    let total = events.len() as u64;
    let clean = Arc::new(Clean { name, dir: d.to_path_buf(), meta, plan, ending, completions: completions(&clean_dir), events });
    for k in 1..total {
        crash_at(clean.clone(), k, total).await;
    }
    total - 1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_every_event_boundary_of_every_example_and_fixture_resumes_to_the_same_ending() {
    let mut crashes = 0;
    // Two flows at a time (the machines have two cores), each in its own
    // directory.
    let mut running = tokio::task::JoinSet::new();
    let mut collect = |done: Result<u64, tokio::task::JoinError>| match done {
        Ok(n) => crashes += n,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    };
    for (src, name) in examples_and_fixtures() {
        if running.len() == 2 {
            if let Some(done) = running.join_next().await {
                collect(done);
            }
        }
        running.spawn(campaign(src, name));
    }
    while let Some(done) = running.join_next().await {
        collect(done);
    }
    eprintln!("{crashes} crashes, each resumed to the uninterrupted ending");
    assert!(crashes > 500, "too few boundaries to be a campaign: {crashes}");
}
