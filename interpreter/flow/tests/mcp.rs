//! `flow run` against real MCP servers over stdio and Streamable HTTP:
//! `@modelcontextprotocol/server-filesystem` and
//! `@modelcontextprotocol/server-everything` (also started in its
//! `streamableHttp` mode on a free port of 127.0.0.1), installed with npm by
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
    run_with(dir, flow_file, &["-q"])
}

fn run_with(dir: &Path, flow_file: &str, extra: &[&str]) -> (Output, Vec<Value>) {
    let run_dir = dir.join("run");
    let out = Command::new(env!("CARGO_BIN_EXE_flow"))
        .args(["run", flow_file, "--run-dir", run_dir.to_str().unwrap(), "--no-cassette"])
        .args(extra)
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

/// server-everything in its Streamable HTTP mode on a free port: killed
/// (with its process group) when dropped.
struct HttpServer {
    child: std::process::Child,
    url: String,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn everything_over_http() -> HttpServer {
    let entry = node_modules().join("@modelcontextprotocol/server-everything/dist/index.js");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = Command::new("node")
        .arg(&entry)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("node starts server-everything");
    let server = HttpServer { child, url: format!("http://127.0.0.1:{port}/mcp") };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(std::time::Instant::now() < deadline, "server-everything did not listen on port {port} within 30 s");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    server
}

#[test]
fn over_streamable_http_tools_progress_resources_prompts_and_roots_work_with_a_real_server() {
    let dir = fixtures();
    let server = everything_over_http();
    let flow_file = dir.path().join("everything_http.flow");
    let text_of = std::fs::read_to_string(&flow_file).unwrap();
    std::fs::write(&flow_file, text_of.replace("@URL@", &server.url)).unwrap();
    std::fs::create_dir(dir.path().join("workspace")).unwrap();
    // Not quiet: progress reports are shown on stderr.
    let (out, events) = run_with(dir.path(), "everything_http.flow", &[]);
    assert_success(&out, &events);
    assert_eq!(completed(dir.path(), &events, "echo"), vec![(true, Value::String("Echo: hello over HTTP".into()))]);
    let slow = completed(dir.path(), &events, "slow");
    assert!(slow[0].0 && slow[0].1.as_str().unwrap_or_default().contains("Steps: 3"), "{slow:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    for step in 1..=3 {
        assert!(stderr.contains(&format!("flow: tool slow: {step}/3")), "progress {step}/3 was not shown:\n{stderr}");
    }
    let document = completed(dir.path(), &events, "document");
    assert!(
        document[0].0 && document[0].1.as_str().unwrap_or_default().starts_with("Resource 7: This is a plaintext resource"),
        "{document:?}"
    );
    let prompt = completed(dir.path(), &events, "weather_prompt");
    assert_eq!(
        prompt,
        vec![(
            true,
            serde_json::json!({ "description": null, "messages": [{ "role": "user", "content": "What's weather in Oslo, Viken?" }] })
        )]
    );
    let roots = completed(dir.path(), &events, "roots");
    let workspace = format!("file://{}/workspace", dir.path().canonicalize().unwrap().display());
    let listed = roots[0].1.as_str().unwrap_or_default();
    assert!(roots[0].0 && listed.contains("Current MCP Roots (1 total)") && listed.contains(&workspace), "{roots:?}");
}

#[test]
fn over_stdio_the_server_is_told_its_roots() {
    let dir = fixtures();
    let flow_file = dir.path().join("roots.flow");
    std::fs::write(
        &flow_file,
        format!(
            r#"tool roots: mcp {{
  description: "The roots the server was told"
  input: {{}}
  output: string
  server: ["node", "{}"]
  remote_name: "get-roots-list"
  timeout: 30s
  effect: none
}}
workflow w {{
  start: list
  node list: tool roots {{ args: {{}} }}
  node done: end ok
  list -> done
}}
"#,
            node_modules().join("@modelcontextprotocol/server-everything/dist/index.js").display()
        ),
    )
    .unwrap();
    let (out, events) = run(dir.path(), "roots.flow");
    assert_success(&out, &events);
    // No roots declared: the flow file's directory is the one root.
    let roots = completed(dir.path(), &events, "roots");
    let home = format!("file://{}", dir.path().canonicalize().unwrap().display());
    let listed = roots[0].1.as_str().unwrap_or_default();
    assert!(roots[0].0 && listed.contains("Current MCP Roots (1 total)") && listed.contains(&home), "{roots:?}");
}
