//! `flow run` against a real model: the `openai` provider talking to
//! llama.cpp's OpenAI-compatible server (llama-cpp-python) serving
//! SmolLM2-135M-Instruct on this machine's CPU.
//!
//! Not part of `cargo test --workspace` (the target has `test = false`):
//! `bash tests/llm/run.sh` installs and starts the server, then runs this
//! test with `FLOW_LLM_BASE_URL` pointing at it. Without that variable the
//! test fails: it never passes silently without a model.
#![allow(clippy::disallowed_methods)]

mod common;
use common::*;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/llm/local_llm.flow")
}

/// The final state of a run as `flow replay` derives it from the journal
/// (without the first line, which names the run directory).
fn final_state(run_dir: &Path) -> Vec<String> {
    let out = flow(&["replay", run_dir.to_str().expect("utf-8 path")], run_dir.parent().expect("parent"));
    assert!(out.status.success(), "flow replay failed: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).lines().skip(1).map(str::to_string).collect()
}

/// `flow run local_llm.flow` with the provider `local` at `url`.
fn run(dir: &Path, run_dir: &Path, url: &str, cassette: (&str, &Path)) -> Output {
    flow(
        &[
            "run",
            "local_llm.flow",
            "--run-dir",
            run_dir.to_str().expect("utf-8 path"),
            "--run-id",
            "llm",
            "--fake-clock",
            "-q",
            "--no-prompt",
            "--provider-url",
            &format!("local={url}"),
            cassette.0,
            cassette.1.to_str().expect("utf-8 path"),
        ],
        dir,
    )
}

#[test]
fn a_real_model_runs_the_workflow_and_the_recording_replays_offline() {
    let Some(url) = std::env::var("FLOW_LLM_BASE_URL").ok().filter(|u| !u.trim().is_empty()) else {
        panic!(
            "FLOW_LLM_BASE_URL is not set: this test needs a real OpenAI-compatible model server. \
             Run it with `bash tests/llm/run.sh`, which installs llama.cpp's server and SmolLM2-135M, starts it and runs this test."
        );
    };
    let dir = tempfile::tempdir().expect("scratch dir");
    std::fs::copy(fixture(), dir.path().join("local_llm.flow")).expect("copy the fixture");
    let cassette = dir.path().join("cassette.yaml");

    // 1. Live, recording every model turn.
    let live = dir.path().join("live");
    let started = std::time::Instant::now();
    let out = run(dir.path(), &live, &url, ("--record", &cassette));
    println!("live run against {url}: {:.1} s, exit {:?}", started.elapsed().as_secs_f64(), out.status.code());
    assert!(out.status.success(), "the live run failed:\n{}", text(&out));

    let trace = events(&live);
    let end = trace.last().expect("events");
    assert_eq!(end["kind"], "run_terminated", "{end}");
    assert_eq!(end["payload"]["status"], "success", "{end}");
    let turns: Vec<&Value> = trace.iter().filter(|e| e["kind"] == "agent_turn").collect();
    assert!(turns.len() >= 3, "one turn per agent node at least, got {}", turns.len());
    for turn in &turns {
        let payload = &turn["payload"];
        println!("agent_turn {}: model {}, usage {}, error {}", payload["node"], payload["model"], payload["usage"], payload["error"]);
        assert!(payload["usage"]["tokens"].as_u64().unwrap_or(0) > 0, "a turn without token usage: {turn}");
        let (input, output) = (payload["input_tokens"].as_u64().unwrap_or(0), payload["output_tokens"].as_u64().unwrap_or(0));
        assert!(input > 0 && output > 0, "the trace splits input and output tokens: {turn}");
        assert_eq!(input + output, payload["usage"]["tokens"].as_u64().unwrap_or(0), "{turn}");
        assert!(payload["model"].as_str().is_some_and(|m| !m.is_empty()), "a turn without the model that answered: {turn}");
        let reasons = payload["finish_reasons"].as_array().map(Vec::len).unwrap_or(0);
        assert!(reasons > 0, "a turn without the server's finish reason: {turn}");
    }

    // Every recorded model turn carries the server's token counts.
    let recorded: Value = serde_yaml::from_str(&std::fs::read_to_string(&cassette).expect("the cassette was written")).expect("YAML");
    let models: Vec<&Value> = recorded["entries"].as_array().expect("entries").iter().filter(|e| e["kind"] == "model").collect();
    assert_eq!(models.len(), turns.len(), "one cassette entry per agent turn");
    for entry in &models {
        let usage = &entry["response"]["usage"];
        assert!(usage["input_tokens"].as_u64().unwrap_or(0) > 0, "no input tokens: {entry:?}");
        assert!(usage["output_tokens"].as_u64().unwrap_or(0) > 0, "no output tokens: {entry:?}");
    }

    // The outputs made it into the run's state, valid for their types.
    let live_state = final_state(&live);
    println!("final state:\n{}", live_state.join("\n"));
    let field = |node: &str| -> Value {
        let line = live_state
            .iter()
            .find_map(|l| l.trim().strip_prefix(&format!("{node} = ")))
            .unwrap_or_else(|| panic!("no `{node} = ` in the final state:\n{}", live_state.join("\n")));
        serde_json::from_str(line).unwrap_or_else(|e| panic!("`{node}` is not JSON ({e}): {line}"))
    };
    assert!(field("title")["title"].is_string());
    assert!(["happy", "sad", "scary"].contains(&field("mood")["mood"].as_str().unwrap_or_default()));
    assert!(field("keywords")["words"].as_array().is_some_and(|w| w.iter().all(Value::is_string)));
    // The named, nested type: valid at the first reply (`repair: 0`).
    let tagged = field("tagged");
    assert!(["cat", "sky", "wings"].contains(&tagged["tag"]["name"].as_str().unwrap_or_default()), "{tagged}");
    assert!(["low", "high"].contains(&tagged["rating"].as_str().unwrap_or_default()), "{tagged}");
    let tagged_turns = turns.iter().filter(|t| t["payload"]["node"] == "tagged").count();
    assert_eq!(tagged_turns, 1, "one turn, no repair");

    // 2. Replayed from the cassette with no server reachable (port 9,
    //    discard): the same final state.
    let replayed = dir.path().join("replayed");
    let out = run(dir.path(), &replayed, "http://127.0.0.1:9/v1", ("--replay", &cassette));
    assert!(out.status.success(), "the replay failed:\n{}", text(&out));
    assert_eq!(live_state, final_state(&replayed), "the replayed run ends in another state");
}
