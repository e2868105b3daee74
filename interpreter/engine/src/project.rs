//! Projections (reference §5.10): a pure function of a run's recorded
//! events, rendered as Markdown or JSON (`flow project RUN NAME`). The
//! same events and artifacts always give the same text.

use crate::eval::{self, Env};
use flow_check::ir::Program;
use flow_trace::{ArtifactRef, Body, Event};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// A projection's rendering.
#[derive(Debug, Clone, PartialEq)]
pub struct Projected {
    /// `markdown` or `json`.
    pub format: String,
    /// The Markdown text, or the JSON value pretty-printed.
    pub text: String,
    /// What was recorded by reference only and read as null: the outputs
    /// the control plane makes itself (a loop's record, a join's count)
    /// are referenced in the trace but not stored as artifacts.
    pub absent: Vec<String>,
}

/// Reads a recorded value back: `Ok(None)` when the run did not store it,
/// an error when what is stored is not what the trace references.
pub type Reader<'a> = &'a dyn Fn(&ArtifactRef) -> Result<Option<Value>, String>;

/// The projections of `program`: name, workflow, description.
pub fn projections(program: &Program) -> Vec<(&str, &str, Option<&str>)> {
    program
        .decls
        .values()
        .filter(|d| d.kind == flow_check::spec::Kind::Projection)
        .map(|d| (d.name.as_str(), d.projected_workflow().unwrap_or_default(), d.description()))
        .collect()
}

/// Renders the projection `name` of `program` over a run's `events`;
/// `artifact` reads a recorded value back (outputs and the input are
/// stored by reference). An error says what is missing or why the value
/// could not be made.
pub fn project(program: &Program, name: &str, events: &[Event], artifact: Reader) -> Result<Projected, String> {
    let decl = program.decls.get(name).filter(|d| d.kind == flow_check::spec::Kind::Projection);
    let Some(decl) = decl else {
        let known: Vec<&str> = projections(program).into_iter().map(|(n, _, _)| n).collect();
        let known = if known.is_empty() { "the plan declares none".to_string() } else { format!("the plan declares {}", known.join(", ")) };
        return Err(format!("no projection `{name}`: {known}"));
    };
    let workflow = decl.projected_workflow().unwrap_or_default();
    let nodes: Vec<&str> = program.workflows.get(workflow).map(|w| w.nodes.keys().map(String::as_str).collect()).unwrap_or_default();
    let (mut env, absent) = scope(events, &nodes, artifact)?;
    let ran = env.get("run").and_then(|r| r.get("workflow")).and_then(Value::as_str).unwrap_or_default().to_string();
    if ran != workflow {
        return Err(format!("projection `{name}` is of workflow `{workflow}`, but this is a run of `{ran}`"));
    }
    let Some((lets, value)) = decl.lets_and_value() else { return Err(format!("projection `{name}` has no value")) };
    for (let_name, expr) in lets {
        let v = eval::eval(expr, &env).map_err(|e| format!("projection `{name}`, `{let_name}`: {}", e.message))?;
        env.insert(let_name.to_string(), v);
    }
    let value = eval::eval(value, &env).map_err(|e| format!("projection `{name}`: {}", e.message))?;
    let format = decl.projection_format().to_string();
    let text = match (&*format, value) {
        ("json", value) => serde_json::to_string_pretty(&value).unwrap_or_default() + "\n",
        (_, Value::String(text)) if text.ends_with('\n') => text,
        (_, Value::String(text)) => text + "\n",
        (_, other) => return Err(format!("projection `{name}` is Markdown, but its value is not a string: {other}")),
    };
    Ok(Projected { format, text, absent })
}

/// What a projection's expressions see of the run: each node's last
/// output, `input`, `visits`, `steps`, `gates` and `run`.
/// Every node of `nodes` is in scope: one that never completed is null,
/// with no visits.
fn scope(events: &[Event], nodes: &[&str], artifact: Reader) -> Result<(Env, Vec<String>), String> {
    let absent = std::cell::RefCell::new(Vec::new());
    let read = |what: &str, r: &Option<ArtifactRef>| -> Result<Value, String> {
        let Some(r) = r else { return Ok(Value::Null) };
        match artifact(r).map_err(|e| format!("{what} ({}) cannot be read: {e}", r.digest))? {
            Some(value) => Ok(value),
            None => {
                absent.borrow_mut().push(what.to_string());
                Ok(Value::Null)
            }
        }
    };
    let mut env = Env::default();
    let run_state = json!({ "workflow": "", "state": "running", "status": null, "reason": null });
    let (mut run, mut visit) = (run_state, BTreeMap::<String, u32>::new());
    let (mut visits, mut steps, mut gates) = (BTreeMap::<String, Vec<Value>>::new(), Vec::new(), Vec::new());
    for event in events {
        match &event.body {
            Body::RunStarted { workflow, input, .. } => {
                run["workflow"] = json!(workflow);
                env.insert("input".into(), read("the run's input", input)?);
            }
            Body::RunPaused { .. } => run["state"] = json!("paused"),
            Body::RunResumed { .. } => run["state"] = json!("running"),
            Body::RunTerminated { reason, status, .. } => {
                run["state"] = json!("terminated");
                run["status"] = json!(status.as_str());
                run["reason"] = json!(reason);
            }
            Body::NodeStarted { node, visit: n, .. } => {
                visit.insert(node.clone(), *n);
            }
            Body::NodeCompleted { node, status, output, .. } => {
                let value = read(&format!("the output of `{node}`"), output)?;
                if output.is_some() {
                    visits.entry(node.clone()).or_insert_with(Vec::new).push(value.clone());
                    env.insert(node.clone(), value.clone());
                }
                let n = visit.get(node).copied().unwrap_or(1);
                steps.push(json!({ "seq": event.seq, "node": node, "visit": n, "status": status.as_str(), "output": value }));
            }
            Body::GateRecorded { gate, outcome, reason, .. } => {
                gates.push(json!({ "seq": event.seq, "gate": gate, "outcome": outcome.as_str(), "reason": reason }));
            }
            _ => {}
        }
    }
    run["id"] = json!(events.first().map(|e| &*e.run_id).unwrap_or_default());
    run["events"] = json!(events.len());
    for node in nodes {
        visits.entry(node.to_string()).or_default();
        env.entry(node.to_string()).or_insert(Value::Null);
    }
    env.insert("visits".into(), Value::Object(visits.into_iter().map(|(k, v)| (k, Value::Array(v))).collect()));
    env.insert("steps".into(), Value::Array(steps));
    env.insert("gates".into(), Value::Array(gates));
    env.insert("run".into(), run);
    let mut absent = absent.into_inner();
    absent.dedup();
    Ok((env, absent))
}
