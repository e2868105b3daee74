//! `http` tools against a real local HTTP server (a Python stub on
//! 127.0.0.1): URL templating with percent-encoding, methods, headers,
//! JSON bodies, idempotency keys, failures.
#![allow(clippy::disallowed_methods)]

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// The stub server, killed on drop.
#[derive(Debug)]
pub struct Stub {
    child: Child,
    pub port: u16,
}

impl Drop for Stub {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn start_stub(log: &Path) -> Stub {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/stubs/http_stub.py");
    let mut child = Command::new("python3").arg(script).arg(log).stdout(Stdio::piped()).spawn().expect("python3 runs the stub server");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let port = line.trim().parse().expect("the stub prints its port");
    Stub { child, port }
}

#[test]
fn http_tools_call_a_real_server() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.jsonl");
    let stub = start_stub(&log);
    let source = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/stubs/http.flow")).unwrap();
    std::fs::write(dir.path().join("http.flow"), source.replace("@PORT@", &stub.port.to_string())).unwrap();
    let run_dir = dir.path().join("run");
    let out = Command::new(env!("CARGO_BIN_EXE_flow"))
        .args(["run", "http.flow", "--run-dir", run_dir.to_str().unwrap(), "--fake-clock", "-q"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "the failing call ends the run: {}", String::from_utf8_lossy(&out.stderr));
    let requests: Vec<Value> = std::fs::read_to_string(&log).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(requests.len(), 3, "{requests:?}");
    // The id went into the path percent-encoded, by GET, without a body.
    assert_eq!(requests[0]["method"], "GET");
    assert_eq!(requests[0]["path"], "/items/a%20b%2Fc");
    assert_eq!(requests[0]["body"], Value::Null);
    // The POST carried the typed input as JSON and the idempotency key.
    assert_eq!(requests[1]["method"], "POST");
    assert_eq!(requests[1]["body"], serde_json::json!({ "item": "a%20b%2Fc", "qty": 2 }));
    assert_eq!(requests[1]["idempotency_key"], "order-a%20b%2Fc");
    // The tool's declared headers went with it, and only with it.
    assert_eq!(requests[1]["x_flow"], "test");
    assert_eq!(requests[0]["x_flow"], Value::Null);
    let trace = std::fs::read_to_string(run_dir.join("trace.jsonl")).unwrap();
    let events: Vec<Value> = trace.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let completed: Vec<&Value> = events.iter().filter(|e| e["kind"] == "tool_call_completed").collect();
    assert_eq!(completed.len(), 3);
    assert_eq!(completed[0]["payload"]["ok"], true);
    assert_eq!(completed[2]["payload"]["ok"], false);
    assert!(completed[2]["payload"]["error"].as_str().unwrap().contains("500"), "{}", completed[2]);
    assert_eq!(events.last().unwrap()["payload"]["reason"], "failed");
}

#[test]
fn a_planted_api_key_appears_in_no_output_file() {
    let key = "sk-planted-0123456789abcdef";
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.jsonl");
    let stub = start_stub(&log);
    let source = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/stubs/secret.flow")).unwrap();
    std::fs::write(dir.path().join("secret.flow"), source.replace("@PORT@", &stub.port.to_string())).unwrap();
    let run_dir = dir.path().join("run");
    let cassette = dir.path().join("recorded.yaml");
    // The key pasted into the run's input too: taken out before it is recorded.
    std::fs::write(dir.path().join("secret.input.json"), format!("{{\"note\": \"use {key} for this\"}}")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_flow"))
        .args(["run", "secret.flow", "--run-dir", run_dir.to_str().unwrap(), "--record", cassette.to_str().unwrap()])
        .current_dir(dir.path())
        .env("FLOW_TEST_API_KEY", key)
        .env("FLOW_LOG", "trace")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stderr}");
    // The model really saw the key (it echoed it back) …
    let requests = std::fs::read_to_string(&log).unwrap();
    assert!(requests.contains("chat/completions"), "{requests}");
    // … and the echo was redacted before anything was written.
    let trace = std::fs::read_to_string(run_dir.join("trace.jsonl")).unwrap();
    let mut files = vec![cassette.clone()];
    let mut stack = vec![run_dir.clone()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                files.push(path);
            }
        }
    }
    let mut redacted = false;
    let mut input_redacted = false;
    for file in &files {
        let bytes = std::fs::read(file).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains(key), "the key leaked into {}", file.display());
        redacted |= text.contains("echo Bearer [REDACTED]");
        input_redacted |= text.contains("use [REDACTED] for this");
    }
    assert!(redacted, "the echoed key should be stored redacted; trace: {trace}");
    assert!(input_redacted, "the input's key should be stored redacted");
    assert!(!stderr.contains(key), "the key leaked into the logs");
    assert!(files.iter().any(|f| f.ends_with("journal.sqlite")));
}

#[test]
fn a_key_too_short_to_redact_stops_the_run_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let source = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/stubs/secret.flow")).unwrap();
    // Nothing listens there: the run must not get as far as a request.
    std::fs::write(dir.path().join("secret.flow"), source.replace("@PORT@", "9")).unwrap();
    let run_dir = dir.path().join("run");
    let out = Command::new(env!("CARGO_BIN_EXE_flow"))
        .args(["run", "secret.flow", "--run-dir", run_dir.to_str().unwrap()])
        .current_dir(dir.path())
        .env("FLOW_TEST_API_KEY", "k3y")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("FLOW_TEST_API_KEY") && stderr.contains("does not start"), "{stderr}");
    assert!(!stderr.contains("k3y"), "the key itself was printed: {stderr}");
    assert!(!run_dir.exists(), "a run directory was written");
}
