//! What the `flow` binary's tests share: the repository, running `flow`,
//! its output, and the events of a run.
// Each test file uses a part of this module.
#![allow(dead_code, clippy::disallowed_methods)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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
