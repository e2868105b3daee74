//! Runs that survive their endings and their operators: a run resumes and
//! replays after a `null` output and after a cancellation; SIGTERM stops
//! every child process and leaves a run `flow resume` completes; one
//! process at a time writes a run directory.
#![allow(clippy::disallowed_methods)]

mod common;
use common::*;

use std::path::Path;

/// A tool that waits for the file `go` (recording its pid and its
/// grandchild's), then prints `1`; on a second run, when `once` exists, it
/// answers at once.
const WAITING_TOOL: &str = r#"
tool wait_for_go: command {
  description: "Waits for the file go, with a grandchild"
  input: any
  output: any
  argv: ["sh", "-c", "if [ -f once ]; then echo 1; exit 0; fi; touch once; sleep 60 & echo $! > grandchild.pid; while [ ! -f go ]; do sleep 0.05; done; echo 1"]
}
workflow waits {
  start: first
  node first: tool wait_for_go { args: {} }
  node done: end ok
  first -> done
}
"#;

/// A builtin `noop` (its output is `null`) before a human decision.
const NULL_THEN_DECIDE: &str = r#"
principal editor: human
tool nothing: builtin { description: "Does nothing", input: any, output: any, function: "noop" }
workflow null_then_decide {
  start: first
  escalate_to: editor
  node first: tool nothing { args: {} }
  node approve: human editor { decisions: [approve, reject] }
  node second: tool nothing { args: {} }
  node done: end ok
  node stopped: end rejected { status: failure }
  first -> approve
  approve -> second when approve.decision == "approve"
  approve -> stopped else
  second -> done
}
"#;

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

/// The example `name` copied to a scratch directory and run there
/// uninterrupted: the directory, the flow's file name, the run directory
/// and its [`outcome`].
fn clean_run(name: &str) -> (tempfile::TempDir, String, std::path::PathBuf, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    copy_tree(&repo().join("examples").join(name), d);
    let file = format!("{name}.flow");
    let clean = d.join("clean");
    let out = flow(&["run", &file, "--run-dir", clean.to_str().unwrap(), "--fake-clock", "-q", "--no-prompt"], d);
    assert!(out.status.success(), "{name}: {}", text(&out));
    let expected = outcome(&assert_replays_and_conforms(d, &clean, &file));
    (dir, file, clean, expected)
}

/// The ending and every node's output of `flow replay`'s report (in any
/// order: parallel branches may complete in another order after a redo).
fn outcome(replayed: &str) -> Vec<String> {
    let mut lines: Vec<String> = replayed.lines().skip(1).map(str::to_string).collect();
    lines.sort();
    lines
}

/// The run is consistent with its plan when replayed, and its trace holds.
fn assert_replays_and_conforms(dir: &Path, run_dir: &Path, plan: &str) -> String {
    let replay = flow(&["replay", run_dir.to_str().unwrap()], dir);
    assert!(replay.status.success(), "replay failed: {}", text(&replay));
    let check = flow(&["trace", "check", run_dir.to_str().unwrap(), "--plan", plan], dir);
    assert!(check.status.success(), "trace check: {}", text(&check));
    String::from_utf8_lossy(&replay.stdout).into_owned()
}

#[test]
fn a_null_output_leaves_a_run_that_resumes_and_replays_at_every_stop() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "nulls.flow", NULL_THEN_DECIDE);
    let rd = d.join("run");
    let r = rd.to_str().unwrap();
    let out = flow(&["run", "nulls.flow", "--run-dir", r, "--fake-clock", "-q", "--no-prompt"], d);
    assert_eq!(out.status.code(), Some(4), "paused for the editor: {}", text(&out));
    let state = assert_replays_and_conforms(d, &rd, "nulls.flow");
    assert!(state.contains("first = null"), "{state}");
    let approve = flow(&["approve", r, "approve", "--decision", "approve"], d);
    assert!(approve.status.success(), "{}", text(&approve));
    let resumed = flow(&["resume", r, "--fake-clock", "-q", "--no-prompt"], d);
    assert!(resumed.status.success(), "the resume after a null output: {}", text(&resumed));
    let state = assert_replays_and_conforms(d, &rd, "nulls.flow");
    assert!(state.contains("terminated: success (ok)") && state.contains("second = null"), "{state}");
}

#[test]
fn a_cancelled_run_replays_and_stays_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "waits.flow", WAITING_TOOL);
    let rd = d.join("run");
    let r = rd.to_str().unwrap();
    let child = spawn_flow(&["run", "waits.flow", "--run-dir", r, "-q"], d);
    wait_until("the tool to start", || d.join("grandchild.pid").exists());
    signal(&child, "INT");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let grandchild = std::fs::read_to_string(d.join("grandchild.pid")).unwrap().trim().to_string();
    wait_until("the cancelled tool's grandchild to stop", || !running(&grandchild));
    let state = assert_replays_and_conforms(d, &rd, "waits.flow");
    assert!(state.contains("terminated: cancelled"), "{state}");
    let before = events(&rd).len();
    let resumed = flow(&["resume", r, "-q"], d);
    assert_eq!(resumed.status.code(), Some(1), "a cancelled run stays cancelled: {}", text(&resumed));
    assert_eq!(events(&rd).len(), before, "resuming a cancelled run recorded something");
}

#[test]
fn sigterm_stops_every_child_and_leaves_a_run_that_resume_completes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "waits.flow", WAITING_TOOL);
    let rd = d.join("run");
    let r = rd.to_str().unwrap();
    let child = spawn_flow(&["run", "waits.flow", "--run-dir", r], d);
    wait_until("the tool to start", || d.join("grandchild.pid").exists());
    let grandchild = std::fs::read_to_string(d.join("grandchild.pid")).unwrap().trim().to_string();
    signal(&child, "TERM");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(7), "stopped by SIGTERM: {}", text(&out));
    assert!(text(&out).contains("stopped by SIGTERM"), "{}", text(&out));
    // `flow` waits for its children before it exits.
    assert!(!running(&grandchild), "the tool's grandchild {grandchild} outlived flow");
    let status = text(&flow(&["status", r], d));
    assert!(status.contains("stopped mid-way"), "{status}");
    let resumed = flow(&["resume", r, "-q"], d);
    assert!(resumed.status.success(), "resume after SIGTERM: {}", text(&resumed));
    let state = assert_replays_and_conforms(d, &rd, "waits.flow");
    assert!(state.contains("terminated: success (ok)"), "{state}");
}

#[test]
fn one_process_writes_a_run_directory_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "waits.flow", WAITING_TOOL);
    write(d, "nulls.flow", NULL_THEN_DECIDE);
    let rd = d.join("run");
    let r = rd.to_str().unwrap();
    let child = spawn_flow(&["run", "waits.flow", "--run-dir", r, "-q"], d);
    wait_until("the tool to start", || d.join("grandchild.pid").exists());
    // While it is driven: no second driver, no decision written, no
    // second run in its directory, nothing moved aside.
    for args in [
        vec!["resume", r, "-q"],
        vec!["replay", r],
        vec!["approve", r, "first", "--decision", "approve"],
        vec!["run", "nulls.flow", "--run-dir", r, "-q", "--force-new"],
    ] {
        let out = flow(&args, d);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(text(&out).contains("is being driven by pid"), "{args:?}: {}", text(&out));
    }
    write(d, "go", "");
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let first_run = events(&rd)[0]["run_id"].as_str().unwrap().to_string();
    // A directory that holds a run is not written by a second `flow run`.
    let again = flow(&["run", "nulls.flow", "--run-dir", r, "-q", "--no-prompt"], d);
    assert_eq!(again.status.code(), Some(2), "{}", text(&again));
    assert!(text(&again).contains(&format!("already holds run {first_run}")), "{}", text(&again));
    assert_eq!(events(&rd)[0]["run_id"], first_run.as_str());
    // Unless it is moved aside first; the old run stays whole.
    let fresh = flow(&["run", "nulls.flow", "--run-dir", r, "-q", "--no-prompt", "--force-new"], d);
    assert_eq!(fresh.status.code(), Some(4), "{}", text(&fresh));
    let aside = d.join(format!("run.old-{first_run}"));
    assert!(text(&fresh).contains("aside"), "{}", text(&fresh));
    assert_eq!(events(&aside)[0]["run_id"], first_run.as_str());
    assert_replays_and_conforms(d, &aside, "waits.flow");
    assert_ne!(events(&rd)[0]["run_id"], first_run.as_str());
    // A non-empty directory that holds no run is refused too.
    let other = d.join("other");
    std::fs::create_dir(&other).unwrap();
    write(&other, "notes.txt", "mine");
    let out = flow(&["run", "nulls.flow", "--run-dir", other.to_str().unwrap(), "-q"], d);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert_eq!(std::fs::read_dir(&other).unwrap().count(), 1, "the directory was written");
    // A run id never names a path.
    let out = flow(&["run", "nulls.flow", "--run-id", "../../escape", "-q"], d);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(!d.join("../escape").exists() && !d.join(".flow").exists());
}

/// Every example and every run fixture taken to the ending its script
/// leads to (success, failure, budget exhausted, a pause for a decision,
/// a partial result …): `flow replay` re-derives that ending from the
/// journal, trace check holds the trace, and `flow resume` then changes
/// nothing it should not.
#[test]
fn every_example_and_fixture_replays_and_resumes_after_its_ending() {
    let flows = examples_and_fixtures();
    let mut endings = std::collections::BTreeSet::new();
    for (src, name) in flows {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        copy_tree(&src, d);
        let file = format!("{name}.flow");
        let rd = d.join("run");
        let r = rd.to_str().unwrap();
        let out = flow(&["run", &file, "--run-dir", r, "--fake-clock", "-q", "--no-prompt"], d);
        let code = out.status.code();
        assert!(matches!(code, Some(0 | 1 | 3 | 4 | 5)), "{name}: {}", text(&out));
        let state = assert_replays_and_conforms(d, &rd, &file);
        let ending = state.lines().find(|l| l.starts_with("state: ")).unwrap_or_default().to_string();
        endings.insert(format!("{ending}  [{name}]"));
        let before = events(&rd).len();
        let resumed = flow(&["resume", r, "--fake-clock", "-q", "--no-prompt"], d);
        assert_eq!(resumed.status.code(), code, "{name}: resume after `{ending}`: {}", text(&resumed));
        let after = events(&rd).len();
        if code == Some(4) {
            // Still waiting: the resume records that it resumed and paused again.
            assert!(after >= before, "{name}: resume lost events");
        } else {
            assert_eq!(after, before, "{name}: resuming a finished run recorded something");
        }
        let again = assert_replays_and_conforms(d, &rd, &file);
        let again_ending = again.lines().find(|l| l.starts_with("state: ")).unwrap_or_default();
        assert_eq!(again_ending, ending, "{name}: replay after resume");
    }
    // The runs reach several kinds of ending.
    for kind in ["state: terminated: success", "state: terminated: failure", "state: terminated: partial", "state: paused"] {
        assert!(endings.iter().any(|e| e.starts_with(kind)), "no `{kind}` among {endings:#?}");
    }
}

/// The examples' runs killed (kill -9, by the crash hook) at event
/// boundaries spread over each run, then resumed: each ends as its
/// uninterrupted run did, with a conformant trace, and no node completes
/// more often than it did uninterrupted (no effect is duplicated).
#[test]
fn every_example_killed_at_any_moment_resumes_to_the_same_ending() {
    for name in example_names() {
        let (dir, file, clean, expected) = clean_run(&name);
        let d = dir.path();
        let clean_events = events(&clean);
        let run = |rd: &Path, env: &[(&str, &str)]| {
            flow_env(&["run", &file, "--run-dir", rd.to_str().unwrap(), "--fake-clock", "-q", "--no-prompt"], d, env)
        };
        let clean_completions = completions(&clean);
        let total = events(&clean).len();
        for j in 1..=6 {
            let k = (total * j / 7 + j * 7 % 5).clamp(1, total - 1);
            let rd = d.join(format!("crash-{k}"));
            let crashed = run(&rd, &[("FLOW_CRASH_AFTER_SEQ", &k.to_string())]);
            assert!(!crashed.status.success(), "{name}: crash point {k} did not crash");
            resume_answering_as(d, &rd, &clean_events, &format!("{name}: crash point {k}"));
            let state = outcome(&assert_replays_and_conforms(d, &rd, &file));
            assert_eq!(state, expected, "{name}: crash point {k}: another ending");
            assert_eq!(completions(&rd), clean_completions, "{name}: crash point {k}: nodes completed another number of times");
        }
    }
}

/// A non-idempotent call whose outcome a crash left unknown is reconciled
/// three ways: it happened (its output given and held to the tool's type:
/// the call is not made again), run it again, or it did not happen (a
/// failed call) — each recorded, and the run goes on.
#[test]
fn a_call_of_unknown_outcome_is_reconciled_as_happened_run_again_or_not_happened() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let setup = |d: &Path| {
        for f in ["crash.flow", "crash.script.yaml"] {
            std::fs::copy(fixtures.join(f), d.join(f)).unwrap();
        }
    };
    let run = |d: &Path, rd: &Path, env: &[(&str, &str)]| {
        flow_env(&["run", "crash.flow", "--run-dir", rd.to_str().unwrap(), "--fake-clock", "-q", "--no-prompt"], d, env)
    };
    let clean_dir = tempfile::tempdir().unwrap();
    setup(clean_dir.path());
    let clean = clean_dir.path().join("run");
    assert!(run(clean_dir.path(), &clean, &[]).status.success());
    let started = events(&clean).iter().position(|e| e["kind"] == "tool_call_started" && e["payload"]["tool"] == "post").unwrap() + 1;
    let ledger_lines = |d: &Path| std::fs::read_to_string(d.join("ledger.txt")).map(|t| t.lines().count()).unwrap_or(0);
    for (decision, output) in [("approve", Some(r#"{"posted": true}"#)), ("approve", None), ("reject", None)] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        setup(d);
        let rd = d.join("run");
        let r = rd.to_str().unwrap();
        // Killed after the call was recorded as started, before its result.
        let crashed = run(d, &rd, &[("FLOW_CRASH_AFTER_SEQ", &started.to_string())]);
        assert!(!crashed.status.success());
        let paused = flow(&["resume", r, "--fake-clock", "-q", "--no-prompt"], d);
        assert_eq!(paused.status.code(), Some(4), "{}", text(&paused));
        let trace = events(&rd);
        let rec = trace.iter().find(|e| e["kind"] == "reconciliation_required").expect("asked to reconcile");
        let attempt = rec["payload"]["attempt_id"].as_str().unwrap().to_string();
        let subject = format!("reconcile.{attempt}");
        if output.is_some() {
            // An output not of the tool's type, or with another decision: refused.
            for (bad_decision, bad_output) in
                [("approve", r#"{"posted": "yes"}"#), ("reject", r#"{"posted": true}"#), ("approve", "not json")]
            {
                let refused = flow(&["approve", r, &subject, "--decision", bad_decision, "--output", bad_output], d);
                assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
            }
        }
        let mut args = vec!["approve", r, subject.as_str(), "--decision", decision];
        if let Some(output) = output {
            args.extend(["--output", output]);
        }
        let approved = flow(&args, d);
        assert!(approved.status.success(), "{}", text(&approved));
        let resumed = flow(&["resume", r, "--fake-clock", "-q", "--no-prompt"], d);
        assert_ne!(resumed.status.code(), Some(4), "{decision} {output:?}: still waiting: {}", text(&resumed));
        let state = assert_replays_and_conforms(d, &rd, "crash.flow");
        let trace = events(&rd);
        let completed: Vec<&serde_json::Value> =
            trace.iter().filter(|e| e["kind"] == "tool_call_completed" && e["payload"]["tool"] == "post").collect();
        match (decision, output) {
            ("approve", Some(_)) => {
                assert_eq!(ledger_lines(d), 0, "the call that happened was made again");
                assert_eq!(completed.len(), 1);
                assert_eq!(completed[0]["payload"]["attempt_id"], attempt.as_str(), "the reconciled call completes its own attempt");
                assert!(!trace.iter().any(|e| e["kind"] == "lease_expired"), "the attempt went on");
                assert!(state.contains("terminated: success (posted)") && state.contains(r#"publish = {"posted":true}"#), "{state}");
            }
            ("approve", None) => {
                assert_eq!(ledger_lines(d), 1, "run again: exactly once");
                assert!(trace.iter().any(|e| e["kind"] == "lease_expired" && e["payload"]["attempt_id"] == attempt.as_str()));
                assert!(state.contains("terminated: success (posted)"), "{state}");
            }
            _ => {
                assert_eq!(completed[0]["payload"]["ok"], false, "recorded as a failed call");
                assert_eq!(completed[0]["payload"]["attempt_id"], attempt.as_str());
                assert!(state.contains("terminated:"), "the run went on to an end: {state}");
            }
        }
    }
}

/// The acceptance of "runs that survive anything": `flow run` of any
/// example, stopped by SIGTERM at a random moment after its run began, is
/// completed by `flow resume` with the ending of an uninterrupted run, no
/// node completed more often, and a conformant trace. (The moments come
/// from the clock; a failure names the example and the delay.)
#[test]
fn every_example_stopped_by_sigterm_at_a_random_moment_is_completed_by_resume() {
    let mut rng =
        flow_tests::generate::Rng::new(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64);
    let mut stopped = 0;
    for name in example_names() {
        let (dir, file, clean, expected) = clean_run(&name);
        let d = dir.path();
        for j in 0..3 {
            let delay_us = rng.below(20_000) as u64;
            let rd = d.join(format!("term-{j}"));
            let r = rd.to_str().unwrap();
            let child = spawn_flow(&["run", &file, "--run-dir", r, "--fake-clock", "-q", "--no-prompt"], d);
            wait_until("the run to begin", || rd.join("trace.jsonl").exists());
            std::thread::sleep(std::time::Duration::from_micros(delay_us));
            signal(&child, "TERM");
            let out = child.wait_with_output().unwrap();
            let at = format!("{name}, SIGTERM {delay_us} µs after the run began");
            match out.status.code() {
                Some(0) => {}
                Some(7) => {
                    stopped += 1;
                    resume_answering_as(d, &rd, &events(&clean), &at);
                }
                other => panic!("{at}: exit {other:?}: {}", text(&out)),
            }
            assert_eq!(outcome(&assert_replays_and_conforms(d, &rd, &file)), expected, "{at}: another ending");
            assert_eq!(completions(&rd), completions(&clean), "{at}: nodes completed another number of times");
        }
    }
    eprintln!("{stopped} of the runs were stopped mid-way (the others had ended)");
    assert!(stopped > 0, "no run was stopped mid-way: the test tested nothing");
}

/// A run directory is built under a temporary name and renamed into place:
/// a kill while it is being built (here: what such a kill leaves, a
/// staging directory holding a plan but no metadata) leaves nothing
/// `flow status` or `flow resume` would take for a run, and does not stand
/// in the way of the next `flow run`.
#[test]
fn a_run_directory_half_built_by_a_killed_flow_is_never_taken_for_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "nulls.flow", NULL_THEN_DECIDE);
    let staging = d.join(".run.creating-run-1");
    std::fs::create_dir(&staging).unwrap();
    std::fs::write(staging.join("journal.sqlite"), b"").unwrap();
    let status = flow(&["status", "run"], d);
    assert_eq!(status.status.code(), Some(2), "no run there yet: {}", text(&status));
    let resumed = flow(&["resume", "run", "-q"], d);
    assert_eq!(resumed.status.code(), Some(2), "{}", text(&resumed));
    assert!(!d.join("run").exists(), "resume made a run directory out of nothing");
    let out = flow(&["run", "nulls.flow", "--run-dir", "run", "--run-id", "run-1", "-q", "--no-prompt"], d);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    assert!(!staging.exists(), "the leftover staging directory of the same run id was cleared");
    let status = text(&flow(&["status", "run"], d));
    assert!(status.contains("run run-1"), "{status}");
}

/// `flow resume`s the run in `run_dir` to its end. A question the stop
/// left open is answered: a reconciliation (a non-idempotent call in
/// flight when the process stopped; here the cassette shows it never ran)
/// "run it again", a confirmation asked again for an attempt redone after
/// the stop as the uninterrupted run (`clean`) answered it.
fn resume_answering_as(d: &Path, run_dir: &Path, clean: &[serde_json::Value], at: &str) {
    let r = run_dir.to_str().unwrap();
    for _ in 0..4 {
        let resumed = flow(&["resume", r, "--fake-clock", "-q", "--no-prompt"], d);
        if resumed.status.success() {
            return;
        }
        assert_eq!(resumed.status.code(), Some(4), "{at}: {}", text(&resumed));
        let journal = flow_runtime::driver::open_journal(run_dir, false).unwrap();
        let run_id = flow_runtime::driver::run_id_of(&journal).unwrap();
        let pending = flow_runtime::driver::pending_decisions(&journal, &run_id).unwrap();
        drop(journal);
        let answered = pending.iter().find_map(|p| Some((p.subject.clone(), answer_as_before(&p.subject, clean)?)));
        let Some((subject, decision)) = answered else { panic!("{at}: waits on {pending:?}: {}", text(&resumed)) };
        let approve = flow(&["approve", r, &subject, "--decision", &decision], d);
        assert!(approve.status.success(), "{at}: {}", text(&approve));
    }
    panic!("{at}: still waiting after four resumes");
}
