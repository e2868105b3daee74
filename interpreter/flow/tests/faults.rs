//! The fault campaign at the data plane and the signals mid-fan-out: a run
//! meets a command that never answers in time, one that prints what is not
//! JSON, one that prints JSON of the wrong type, a connection refused, an
//! MCP server that dies in the middle of a call and a model provider nobody
//! listens for. Each fault is recorded with its error code, the run goes on
//! as its handlers say, no process it started outlives it, and its trace is
//! conformant (chain included) and replays. SIGTERM and SIGINT in the middle
//! of a fan-out of slow commands leave no process behind; SIGTERM leaves a
//! run `flow resume` completes, SIGINT a cancelled one.
#![allow(clippy::disallowed_methods)]

mod common;
use common::*;

use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

const FAULTS: &str = r#"
tool hangs: command {
  description: "Never answers in time (and leaves a grandchild)"
  input: any
  output: any
  argv: ["sh", "-c", "sleep 60 & echo $! >> pids; wait"]
  timeout: 1s
  effect: idempotent
}
tool garbage: command {
  description: "Prints what is not JSON"
  input: any
  output: { ok: bool }
  argv: ["sh", "-c", "echo 'not json {'"]
  effect: idempotent
}
tool wrong: command {
  description: "Prints JSON of another type"
  input: any
  output: { ok: bool }
  argv: ["sh", "-c", "echo '{\"ok\": 3}'"]
  effect: idempotent
}
tool refused: http {
  description: "A port nobody listens on"
  input: any
  output: any
  url: "http://127.0.0.1:@PORT@/x"
  timeout: 5s
}
tool dying: mcp {
  description: "A server that dies in the middle of a call"
  input: any
  output: any
  server: ["python3", "dying_mcp.py"]
  remote_name: "work"
  timeout: 10s
  effect: idempotent
}
provider remote: openai {
  description: "Nobody listens"
  base_url: "http://127.0.0.1:@PORT@/v1"
  model: "m"
  timeout: 5s
}
agent asker { provider: remote }
workflow faults {
  start: t1
  node t1: tool hangs { args: {}, retry: { attempts: 2 }, on_failure: skip }
  node t2: tool garbage { args: {}, on_failure: skip }
  node t3: tool wrong { args: {}, on_failure: skip }
  node t4: tool refused { args: {}, on_failure: skip }
  node t5: tool dying { args: {}, on_failure: skip }
  node t6: agent asker { output: { a: string }, on_failure: skip }
  node done: end ok
  t1 -> t2 -> t3 -> t4 -> t5 -> t6 -> done
}
"#;

/// An MCP server that answers `initialize` and `tools/list`, then dies
/// (exit 3, a line on stderr) when a tool is called.
const DYING_MCP: &str = r#"
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    method, id = msg.get("method"), msg.get("id")
    if method == "initialize":
        out = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}}, "serverInfo": {"name": "dying", "version": "1"}}
    elif method == "tools/list":
        out = {"tools": [{"name": "work", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        sys.stderr.write("dying: out of luck\n")
        sys.stderr.flush()
        sys.exit(3)
    else:
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": id, "result": out}), flush=True)
"#;

/// A port nothing listens on (bound, then released).
fn refused_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

fn pids(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("pids")).unwrap_or_default().split_whitespace().map(str::to_string).collect()
}

/// `flow trace check` with the chain required, and `flow replay`.
fn assert_conformant_and_replays(dir: &Path, run: &Path, plan: &str) {
    let out = flow(&["trace", "check", run.to_str().unwrap(), "--plan", plan, "--format", "json"], dir);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
    assert_eq!(doc["conformant"], true, "{doc:#}");
    assert_eq!(doc["trace"]["integrity"]["chain"], "intact", "{doc:#}");
    let replay = flow(&["replay", run.to_str().unwrap()], dir);
    assert!(replay.status.success(), "replay: {}", text(&replay));
}

#[test]
fn every_fault_of_the_data_plane_is_recorded_handled_and_conformant() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("faults.flow"), FAULTS.replace("@PORT@", &refused_port().to_string())).unwrap();
    std::fs::write(d.join("dying_mcp.py"), DYING_MCP).unwrap();
    let run = d.join("run");
    let started = Instant::now();
    let out = flow(&["run", "faults.flow", "--run-dir", run.to_str().unwrap(), "-q", "--no-prompt"], d);
    assert!(out.status.success(), "every fault is skipped, the run ends ok: {}", text(&out));
    assert!(started.elapsed() < Duration::from_secs(50), "a timeout took the sleep's whole minute: {:?}", started.elapsed());
    let events = events(&run);
    let failed: Vec<(String, String)> = events
        .iter()
        .filter(|e| e["kind"] == "attempt_failed")
        .map(|e| (e["payload"]["node"].as_str().unwrap().to_string(), e["payload"]["error_code"].as_str().unwrap().to_string()))
        .collect();
    let code_of = |node: &str| failed.iter().filter(|(n, _)| n == node).map(|(_, c)| c.as_str()).collect::<Vec<_>>();
    assert_eq!(code_of("t1"), ["timeout", "timeout"], "two attempts, both timed out: {failed:?}");
    assert_eq!(code_of("t2"), ["invalid_output"], "{failed:?}");
    assert_eq!(code_of("t3"), ["invalid_output"], "{failed:?}");
    assert_eq!(code_of("t4"), ["tool_error"], "{failed:?}");
    assert_eq!(code_of("t5"), ["tool_error"], "{failed:?}");
    assert_eq!(code_of("t6"), ["provider_error"], "{failed:?}");
    // What each failure says is enough to act on.
    let message = |node: &str| {
        events
            .iter()
            .find(|e| e["kind"] == "attempt_failed" && e["payload"]["node"] == node)
            .map(|e| e["payload"].to_string())
            .unwrap_or_default()
    };
    assert!(message("t5").contains("exited") || message("t5").contains("out of luck"), "{}", message("t5"));
    let skipped: Vec<&Value> = events.iter().filter(|e| e["kind"] == "node_completed" && e["payload"]["status"] == "skipped").collect();
    assert_eq!(skipped.len(), 6, "each faulty node skipped");
    // The timed-out command's grandchildren went with it.
    let started = pids(d);
    assert_eq!(started.len(), 2, "one grandchild per attempt: {started:?}");
    for pid in &started {
        assert!(!running(pid), "the grandchild {pid} of a timed-out command outlived it");
    }
    assert_conformant_and_replays(d, &run, "faults.flow");
}

const FANOUT: &str = r#"
tool slow: command {
  description: "Sleeps with a grandchild, unless told to hurry"
  input: { n: int }
  output: int
  argv: ["sh", "-c", "if [ -f hurry ]; then echo {n}; exit 0; fi; sleep 60 & echo $! >> pids; touch started.{n}; wait; echo {n}"]
  effect: idempotent
  timeout: 120s
}
workflow fan {
  start: split
  node split: parallel [a, b, c]
  node a: tool slow { args: { n: 1 } }
  node b: tool slow { args: { n: 2 } }
  node c: tool slow { args: { n: 3 } }
  node merge: join [a, b, c]
  node done: end ok
  split -> merge -> done
}
"#;

/// Runs the fan-out, signals `flow` once all three commands run, and
/// returns the exit code, the output and the directory.
fn interrupted(signal_name: &str) -> (tempfile::TempDir, Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("fan.flow"), FANOUT).unwrap();
    let child = spawn_flow(&["run", "fan.flow", "--run-dir", "run", "--no-prompt"], d);
    wait_until("the three commands to start", || (1..=3).all(|n| d.join(format!("started.{n}")).exists()));
    signal(&child, signal_name);
    let out = child.wait_with_output().unwrap();
    let grandchildren = pids(d);
    assert_eq!(grandchildren.len(), 3, "{grandchildren:?}");
    for pid in &grandchildren {
        assert!(!running(pid), "SIG{signal_name}: the grandchild {pid} outlived flow");
    }
    (dir, out.status.code(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn sigterm_mid_fan_out_stops_every_branch_and_resume_completes_the_run() {
    let (dir, code, output) = interrupted("TERM");
    let d = dir.path();
    assert_eq!(code, Some(7), "stopped by SIGTERM: {output}");
    std::fs::write(d.join("hurry"), "").unwrap();
    let resumed = flow(&["resume", "run", "-q", "--no-prompt"], d);
    assert!(resumed.status.success(), "resume after SIGTERM: {}", text(&resumed));
    let events = events(&d.join("run"));
    let end = events.iter().rev().find(|e| e["kind"] == "run_terminated").expect("the run ended");
    assert_eq!(end["payload"]["status"], "success", "{end}");
    assert_conformant_and_replays(d, &d.join("run"), "fan.flow");
}

#[test]
fn sigint_mid_fan_out_cancels_every_branch_and_the_run() {
    let (dir, code, output) = interrupted("INT");
    let d = dir.path();
    assert_ne!(code, Some(0), "{output}");
    let events = events(&d.join("run"));
    let end = events.iter().rev().find(|e| e["kind"] == "run_terminated").expect("the run was cancelled");
    assert_eq!(end["payload"]["status"], "cancelled", "{end}");
    let cancelled = events.iter().filter(|e| e["kind"] == "attempt_failed" && e["payload"]["error_code"] == "cancelled").count();
    assert_eq!(cancelled, 3, "each branch's attempt cancelled");
    assert_conformant_and_replays(d, &d.join("run"), "fan.flow");
}
