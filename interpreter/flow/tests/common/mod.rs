//! What the `flow` binary's tests share: the repository, running `flow`,
//! its output, and the events of a run.
// Each test file uses a part of this module.
#![allow(dead_code, clippy::disallowed_methods)]

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A scratch copy of `tests/fixtures/` (runs write ledgers next to them).
pub fn fixtures() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    for entry in std::fs::read_dir(src).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
    }
    dir
}

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("the repository")
}

/// Runs `flow ARGS` in `cwd` (never under the crash test hook).
pub fn flow(args: &[&str], cwd: &Path) -> Output {
    flow_env(args, cwd, &[])
}

/// Runs `flow ARGS` in `cwd` with `env` set (never under the crash test
/// hook unless `env` sets it).
pub fn flow_env(args: &[&str], cwd: &Path, env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_flow"));
    command.args(args).current_dir(cwd).env_remove("FLOW_CRASH_AFTER_SEQ");
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().expect("flow runs")
}

/// What a command printed, stdout then stderr.
pub fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// The events of the trace file `trace`.
pub fn trace_events(trace: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(trace).unwrap_or_else(|e| panic!("{}: {e}", trace.display()));
    text.lines().map(|l| serde_json::from_str(l).expect("a trace line is JSON")).collect()
}

/// The events of the run in `run_dir` (its `trace.jsonl`).
pub fn events(run_dir: &Path) -> Vec<Value> {
    trace_events(&run_dir.join("trace.jsonl"))
}

/// `flow` started in the background (stdout and stderr kept).
pub fn spawn_flow(args: &[&str], cwd: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_flow"))
        .args(args)
        .current_dir(cwd)
        .env_remove("FLOW_CRASH_AFTER_SEQ")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("flow starts")
}

/// Waits (at most 60 s) until `ready` holds.
pub fn wait_until(what: &str, mut ready: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(60);
    while !ready() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sends signal `name` (TERM, INT, …) to `child`.
pub fn signal(child: &Child, name: &str) {
    let ok = Command::new("kill").args([&format!("-{name}"), &child.id().to_string()]).status().expect("kill runs");
    assert!(ok.success());
}

/// Whether process `pid` still runs (a zombie has stopped).
pub fn running(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit(')').next().and_then(|rest| rest.split_whitespace().next()) != Some("Z"),
        Err(_) => false,
    }
}

/// Copies the tree `src` into `dst` (an example's schemas, cassettes and
/// tools come with it), leaving out earlier runs.
pub fn copy_tree(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for entry in std::fs::read_dir(src).unwrap() {
        let entry = entry.unwrap();
        let (from, to) = (entry.path(), dst.join(entry.file_name()));
        if from.is_dir() {
            if entry.file_name() != ".flow" {
                copy_tree(&from, &to);
            }
        } else {
            std::fs::copy(&from, &to).unwrap();
        }
    }
}

/// The examples' names (each `examples/NAME/NAME.flow`), sorted.
pub fn example_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(repo().join("examples"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| repo().join("examples").join(n).join(format!("{n}.flow")).exists())
        .collect();
    names.sort();
    assert!(names.len() >= 6, "examples missing: {names:?}");
    names
}

/// Every example and every run fixture: (its directory, its name), sorted.
pub fn examples_and_fixtures() -> Vec<(PathBuf, String)> {
    let mut flows: Vec<(PathBuf, String)> = example_names().into_iter().map(|n| (repo().join("examples").join(&n), n)).collect();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    for entry in std::fs::read_dir(&fixtures).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "flow") {
            flows.push((fixtures.clone(), path.file_stem().unwrap().to_string_lossy().to_string()));
        }
    }
    flows.sort();
    assert!(flows.len() >= 18, "examples or fixtures missing: {flows:?}");
    flows
}

/// Renumbers `seq` and `event_id` 1…n and points every parent at the same
/// event's new number (a parent that was removed is dropped): the forger
/// who covers their tracks.
pub fn renumber(mut events: Vec<Value>) -> Vec<Value> {
    let run = events[0]["run_id"].as_str().unwrap().to_string();
    let old: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    for (i, e) in events.iter_mut().enumerate() {
        e["seq"] = json!(i + 1);
        e["event_id"] = json!(format!("{run}/{}", i + 1));
        if let Some(parent) = e.get("parent_event_id").and_then(|p| p.as_str()).map(str::to_string) {
            let p: u64 = parent.rsplit('/').next().unwrap().parse().unwrap();
            match old.iter().position(|&s| s == p) {
                Some(j) => e["parent_event_id"] = json!(format!("{run}/{}", j + 1)),
                None => {
                    e.as_object_mut().unwrap().remove("parent_event_id");
                }
            }
        }
    }
    events
}

/// How many times each node completed in the run in `run_dir`.
pub fn completions(run_dir: &Path) -> std::collections::BTreeMap<String, usize> {
    let mut counts = std::collections::BTreeMap::new();
    for e in events(run_dir).iter().filter(|e| e["kind"] == "node_completed") {
        *counts.entry(e["payload"]["node"].as_str().unwrap().to_string()).or_default() += 1;
    }
    counts
}

/// How a question a crash or a stop left open is answered to reach the
/// uninterrupted run's ending (`clean`: its events): a reconciliation (a
/// non-idempotent call in flight; the cassette shows it never ran) "run it
/// again"; a confirmation asked again for an attempt redone after the stop
/// (`confirm.TOOL.NODE#V.A`) as the uninterrupted run answered the same
/// call's confirmation in its attempt. `None` for any other question.
pub fn answer_as_before(subject: &str, clean: &[Value]) -> Option<String> {
    let stem = subject.rsplit_once('.').map(|(stem, _)| stem)?;
    match subject.split('.').next() {
        Some("reconcile") => Some("approve".to_string()),
        Some("confirm") => clean
            .iter()
            .filter(|e| e["kind"] == "decision_applied")
            .find(|e| e["payload"]["subject"].as_str().and_then(|s| s.rsplit_once('.')).is_some_and(|(st, _)| st == stem))
            .and_then(|e| e["payload"]["decision"].as_str())
            .map(str::to_string),
        _ => None,
    }
}

/// The values the control plane computed for `node` in the run in
/// `run_dir`, in order (each `computed` event's output, read from the run's
/// artifacts).
pub fn computed(run_dir: &Path, node: &str) -> Vec<Value> {
    events(run_dir)
        .iter()
        .filter(|e| e["kind"] == "computed" && e["payload"]["node"] == node)
        .map(|e| {
            let digest = e["payload"]["output"]["digest"].as_str().unwrap().trim_start_matches("sha256:").to_string();
            let path = run_dir.join("artifacts").join(&digest[..2]).join(format!("{digest}.json"));
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
        })
        .collect()
}

/// A file of a copied example and how a test edits it.
pub type Edit<'a> = (&'a str, &'a dyn Fn(String) -> String);

/// `examples/NAME` copied to a scratch directory, its files edited (each
/// edit must change its file), run offline on the fake clock (exit `code`)
/// and trace-checked against its plan; the scratch directory and the run
/// directory.
pub fn run_example(name: &str, edits: &[Edit], code: i32) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    copy_tree(&repo().join("examples").join(name), d);
    for (file, edit) in edits {
        let path = d.join(file);
        let original = std::fs::read_to_string(&path).unwrap();
        let edited = edit(original.clone());
        assert_ne!(edited, original, "the edit of {file} changed nothing");
        std::fs::write(&path, edited).unwrap();
    }
    let run = d.join("run");
    let plan = format!("{name}.flow");
    let out = flow(&["run", &plan, "--run-dir", run.to_str().unwrap(), "--fake-clock", "-q", "--no-prompt"], d);
    assert_eq!(out.status.code(), Some(code), "{}", text(&out));
    let check = flow(&["trace", "check", run.to_str().unwrap(), "--plan", &plan], d);
    assert!(check.status.success(), "trace check: {}", text(&check));
    (dir, run)
}
