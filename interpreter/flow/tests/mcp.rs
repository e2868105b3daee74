//! `flow run` against real MCP servers over stdio:
//! `@modelcontextprotocol/server-filesystem` and
//! `@modelcontextprotocol/server-everything`, installed with npm by
//! `tests/mcp/run.sh`, which runs this test with `FLOW_MCP_NODE_MODULES`
//! set to their `node_modules` directory. Not part of `cargo test
//! --workspace` (`test = false` in Cargo.toml): run `bash tests/mcp/run.sh`.
//!
//! The fixture flows under `tests/mcp/` name the servers as
//! `@MCP@/@modelcontextprotocol/…`; each test copies them into a scratch
//! directory with `@MCP@` replaced by the real path, and runs there.
#![allow(clippy::disallowed_methods)]

mod common;
use common::*;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const NOTES: &str = "MCP notes, line one\nline two\n";

/// The `node_modules` holding the servers; fails loudly without it.
fn node_modules() -> PathBuf {
    let Some(dir) = std::env::var_os("FLOW_MCP_NODE_MODULES") else {
        panic!(
            "FLOW_MCP_NODE_MODULES is not set: these tests need real MCP servers installed with npm. \
             Run `bash tests/mcp/run.sh` from the repository root."
        )
    };
    let dir = PathBuf::from(dir);
    for server in ["server-filesystem", "server-everything"] {
        let entry = dir.join("@modelcontextprotocol").join(server).join("dist/index.js");
        assert!(entry.is_file(), "{} is missing: run `bash tests/mcp/run.sh` from the repository root", entry.display());
    }
    dir.canonicalize().unwrap()
}

/// A scratch copy of the fixtures with `@MCP@` replaced, and `notes.txt`.
fn fixtures() -> tempfile::TempDir {
    let modules = node_modules();
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp");
    for entry in std::fs::read_dir(src).unwrap() {
        let entry = entry.unwrap();
        let text = std::fs::read_to_string(entry.path()).unwrap();
        std::fs::write(dir.path().join(entry.file_name()), text.replace("@MCP@", modules.to_str().unwrap())).unwrap();
    }
    std::fs::write(dir.path().join("notes.txt"), NOTES).unwrap();
    dir
}

/// Runs a fixture flow in the scratch directory; returns the output and
/// the trace.
fn run(dir: &Path, flow_file: &str) -> (Output, Vec<Value>) {
    let run_dir = dir.join("run");
    let out = Command::new(env!("CARGO_BIN_EXE_flow"))
        .args(["run", flow_file, "--run-dir", run_dir.to_str().unwrap(), "--no-cassette", "-q"])
        .current_dir(dir)
        .env_remove("FLOW_CRASH_AFTER_SEQ")
        .output()
        .expect("flow runs");
    let trace = std::fs::read_to_string(run_dir.join("trace.jsonl")).unwrap_or_default();
    (out, trace.lines().map(|l| serde_json::from_str(l).unwrap()).collect())
}

fn kinds(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["kind"].as_str().unwrap_or("?")).collect()
}

/// An artifact of the run, by its reference (`{digest, size}`).
fn artifact(dir: &Path, reference: &Value) -> Value {
    let digest = reference["digest"].as_str().expect("an artifact reference");
    let hex = digest.trim_start_matches("sha256:");
    let path = dir.join("run/artifacts").join(&hex[..2]).join(format!("{hex}.json"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

/// Every completed call of `tool`, as (ok, output or error).
fn completed(dir: &Path, events: &[Value], tool: &str) -> Vec<(bool, Value)> {
    events
        .iter()
        .filter(|e| e["kind"] == "tool_call_completed" && e["payload"]["tool"] == tool)
        .map(|e| {
            let p = &e["payload"];
            let ok = p["ok"].as_bool().unwrap_or(false);
            let value = if ok { artifact(dir, &p["output"]) } else { p["error"].clone() };
            (ok, value)
        })
        .collect()
}

fn assert_success(out: &Output, events: &[Value]) {
    assert!(out.status.success(), "the run failed:\n{}\nevents: {:?}", text(out), kinds(events));
    let end = events.last().expect("a trace");
    assert_eq!(end["kind"], "run_terminated", "{end}");
    assert_eq!(end["payload"]["status"], "success", "{end}");
}

#[test]
fn filesystem_tools_are_called_by_a_node_and_by_an_agent() {
    let dir = fixtures();
    let (out, events) = run(dir.path(), "filesystem.flow");
    assert_success(&out, &events);
    // The tool node, then the agent: both read the file through the server.
    let reads = completed(dir.path(), &events, "read_notes");
    assert_eq!(reads.len(), 2, "{reads:?}");
    for (ok, output) in &reads {
        assert!(ok, "{output}");
        assert_eq!(output, &serde_json::json!({ "content": NOTES }));
    }
    // The default remote name: `list_directory` at the server.
    let listed = completed(dir.path(), &events, "list_directory");
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(listed[0].0, "{:?}", listed[0].1);
    let listing = listed[0].1["content"].as_str().unwrap_or_default();
    assert!(listing.contains("[FILE] notes.txt") && listing.contains("[FILE] filesystem.flow"), "{listing}");
    // The agent was started by the agent node, and its calls name it.
    let by_agent = events.iter().filter(|e| e["kind"] == "tool_call_started" && e["payload"]["agent"] == "reader").count();
    assert_eq!(by_agent, 2);
}

#[test]
fn everything_echoes_and_adds() {
    let dir = fixtures();
    let (out, events) = run(dir.path(), "everything.flow");
    assert_success(&out, &events);
    assert_eq!(completed(dir.path(), &events, "echo"), vec![(true, Value::String("Echo: hello from flow".into()))]);
    assert_eq!(completed(dir.path(), &events, "add"), vec![(true, Value::String("The sum of 2 and 40 is 42.".into()))]);
}

#[test]
fn tools_an_agent_may_not_use_are_refused_and_recorded() {
    let dir = fixtures();
    let (out, events) = run(dir.path(), "refused.flow");
    assert_success(&out, &events);
    // A refusal is a `tool_call_refused` event (or, in older runtimes, a
    // `warning` saying so).
    let refusals: Vec<(String, String)> = events
        .iter()
        .filter_map(|e| match e["kind"].as_str() {
            Some("tool_call_refused") => Some((e["payload"]["tool"].as_str()?.to_string(), e["payload"]["reason"].to_string())),
            Some("warning") if e["payload"]["message"].as_str()?.contains("refused") => {
                let message = e["payload"]["message"].as_str()?.to_string();
                let tool = ["write_notes", "write_file"].into_iter().find(|t| message.contains(&format!("`{t}`")))?;
                Some((tool.to_string(), message))
            }
            _ => None,
        })
        .collect();
    let refused: Vec<&str> = refusals.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(refused, ["write_notes", "write_file"], "{refusals:?}");
    // Neither reached the server: no call started, the file was not written.
    let started: Vec<&Value> = events.iter().filter(|e| e["kind"] == "tool_call_started").map(|e| &e["payload"]["tool"]).collect();
    assert_eq!(started, ["read_notes"]);
    assert!(!dir.path().join("pwned.txt").exists(), "a refused call wrote the file");
    // The allowed call went through.
    assert_eq!(completed(dir.path(), &events, "read_notes"), vec![(true, serde_json::json!({ "content": NOTES }))]);
}
