//! `flow run --otlp` and `flow export` against a real Arize Phoenix,
//! started by `tests/otel/run.sh` (which sets `FLOW_PHOENIX_URL`); the
//! spans are read back through Phoenix's REST API
//! (`/v1/projects/{project}/spans`). Not part of `cargo test --workspace`.
#![allow(clippy::disallowed_methods)]

mod common;
use common::*;

use serde_json::Value;
use std::time::{Duration, Instant};

fn phoenix() -> String {
    std::env::var("FLOW_PHOENIX_URL")
        .unwrap_or_else(|_| panic!("FLOW_PHOENIX_URL is not set: these tests need a real Phoenix. Run `bash tests/otel/run.sh`."))
}

/// The spans of one trace in a Phoenix project, once `expected` of them arrived.
fn spans_of(project: &str, trace_id: Option<&str>, expected: usize) -> Vec<Value> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let client = reqwest::Client::new();
    let get = |url: String| {
        runtime.block_on(async {
            let response = client.get(&url).send().await.ok().filter(|r| r.status().is_success())?;
            response.json::<Value>().await.ok()
        })
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut url = format!("{}/v1/projects/{project}/spans?limit=1000", phoenix());
        if let Some(trace) = trace_id {
            url.push_str(&format!("&trace_id={trace}"));
        }
        let spans: Vec<Value> = get(url).and_then(|page| page["data"].as_array().cloned()).unwrap_or_default();
        if spans.len() >= expected {
            return spans;
        }
        assert!(Instant::now() < deadline, "Phoenix holds {} spans of {project}, not {expected}", spans.len());
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn named<'a>(spans: &'a [Value], prefix: &str) -> Vec<&'a Value> {
    spans.iter().filter(|s| s["name"].as_str().is_some_and(|n| n.starts_with(prefix))).collect()
}

fn parent<'a>(spans: &'a [Value], span: &Value) -> &'a Value {
    spans
        .iter()
        .find(|s| s["context"]["span_id"] == span["parent_id"])
        .unwrap_or_else(|| panic!("the parent of {} is missing", span["name"]))
}

#[test]
fn a_run_appears_in_phoenix_as_a_tree_of_genai_spans() {
    let dir = tempfile::tempdir().unwrap();
    let flow_file = repo().join("examples/research_writer/research_writer.flow");
    let project = "flow-research-writer";
    // Phoenix takes traces only.
    let env = [("OTEL_RESOURCE_ATTRIBUTES", "openinference.project.name=flow-research-writer"), ("OTEL_METRICS_EXPORTER", "none")];
    let out = flow_env(&["run", flow_file.to_str().unwrap(), "--run-dir", "run", "--otlp", &phoenix()], dir.path(), &env);
    assert!(out.status.success(), "{}", text(&out));
    let exported: usize = text(&out)
        .lines()
        .find_map(|l| l.strip_prefix("flow: exported ")?.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no export line:\n{}", text(&out)));
    let spans = spans_of(project, None, exported);
    assert_eq!(spans.len(), exported);
    // One root: the workflow.
    let roots: Vec<&Value> = spans.iter().filter(|s| s["parent_id"].is_null()).collect();
    assert_eq!(roots.len(), 1, "{:?}", spans.iter().map(|s| &s["name"]).collect::<Vec<_>>());
    assert_eq!(roots[0]["name"], "invoke_workflow research_writer");
    // Agents beneath it, chats beneath the agents, each with its tokens.
    let agents = named(&spans, "invoke_agent ");
    assert!(agents.len() >= 4, "{} agent attempts", agents.len());
    let chats = named(&spans, "chat ");
    assert!(!chats.is_empty());
    for chat in &chats {
        assert!(parent(&spans, chat)["name"].as_str().unwrap().starts_with("invoke_agent "));
        let attributes = &chat["attributes"];
        assert!(attributes["gen_ai.usage.input_tokens"].as_u64().is_some(), "{chat}");
        assert!(attributes["gen_ai.usage.output_tokens"].as_u64().is_some(), "{chat}");
    }
    // Tools beneath the attempts that called them.
    let tools = named(&spans, "execute_tool ");
    assert!(!tools.is_empty(), "no tool calls");
    for tool in &tools {
        let above = parent(&spans, tool)["name"].as_str().unwrap();
        assert!(above.starts_with("flow.attempt ") || above.starts_with("invoke_agent "), "{} under {above}", tool["name"]);
        assert!(tool["attributes"]["gen_ai.tool.name"].is_string());
    }
    // The gates (evidence, claim linkage): each its span, and its outcome
    // as an evaluation on the visit it judged.
    let gates = named(&spans, "flow.gate ");
    let mut names: Vec<&str> = gates.iter().map(|g| g["attributes"]["flow.gate"].as_str().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["evidence_gate", "linkage_gate"]);
    for gate in names {
        let evaluations: Vec<&Value> = spans
            .iter()
            .flat_map(|s| s["events"].as_array().into_iter().flatten())
            .filter(|e| e["name"] == "gen_ai.evaluation.result" && e["attributes"]["gen_ai.evaluation.name"] == gate)
            .collect();
        assert_eq!(evaluations.len(), 1, "the evaluation of {gate}");
        assert_eq!(evaluations[0]["attributes"]["gen_ai.evaluation.score.label"], "pass");
    }

    // Sent again afterwards: the same span ids (Phoenix keeps one of each).
    let trace = roots[0]["context"]["trace_id"].as_str().unwrap().to_string();
    let out = flow_env(&["export", "run", "--otlp", &phoenix()], dir.path(), &env);
    assert!(out.status.success(), "{}", text(&out));
    std::thread::sleep(Duration::from_secs(2));
    let again = spans_of(project, Some(&trace), exported);
    let mut ids: Vec<&str> = again.iter().map(|s| s["context"]["span_id"].as_str().unwrap()).collect();
    ids.sort();
    let mut first: Vec<&str> = spans.iter().map(|s| s["context"]["span_id"].as_str().unwrap()).collect();
    first.sort();
    ids.dedup();
    assert_eq!(ids, first, "a re-export sends the same spans");
}
