//! `calls` and `facts` made again from the trace (reference §4.5), as the
//! engine keeps them: a computed value or a record that read either names
//! it as an input, and the input must be what the trace says it was.
//! Both are held with the run's artifacts (a run directory): `calls` holds
//! the outputs the node's tool calls returned, read from them, and `facts`
//! is held with it (a trace alone, e.g. a model checker's witness, whose
//! events are placeholders, does not hold either).

use super::*;
use serde_json::{json, Map, Value};

/// The runtime names as the trace so far makes them.
#[derive(Debug)]
pub(super) struct Runtime {
    calls: Map<String, Value>,
    /// False once a returned call's output could not be read.
    calls_known: bool,
    facts: Map<String, Value>,
    /// Per node: its visit, and the tokens and tool calls of the visit.
    visits: HashMap<String, (u32, u64, u64)>,
    /// Per attempt: its node and number.
    attempts: HashMap<String, (String, u32)>,
}

impl Default for Runtime {
    fn default() -> Runtime {
        Runtime { calls: Map::new(), calls_known: true, facts: Map::new(), visits: HashMap::default(), attempts: HashMap::default() }
    }
}

/// What a runtime name's input is expected to be.
pub(super) enum Expected {
    /// Not a runtime name: a node's output or the run's input.
    NotRuntime,
    /// The digest it must have.
    Digest(String),
    /// Not known without the run's artifacts.
    Unknown,
}

impl<'a> Checker<'a> {
    /// Follows an event into `calls` and `facts`.
    pub(super) fn runtime_event(&mut self, body: &Body) {
        match body {
            Body::NodeStarted { node, visit, .. } => {
                self.runtime.visits.insert(node.clone(), (*visit, 0, 0));
                self.runtime.calls.shift_remove(node);
            }
            Body::AttemptStarted { node, attempt_id, attempt_no, .. } => {
                self.runtime.attempts.insert(attempt_id.clone(), (node.clone(), *attempt_no));
            }
            Body::AgentTurn { node, usage, .. } => {
                if let Some(v) = self.runtime.visits.get_mut(node) {
                    v.1 += usage.tokens;
                }
            }
            Body::ToolCallCompleted { tool, attempt_id, ok, output, .. } => self.runtime_call(tool, attempt_id, *ok, output.as_ref()),
            Body::NodeCompleted { node, output, .. } => {
                let (visit, tokens, tool_calls) = self.runtime.visits.get(node).copied().unwrap_or_default();
                let facts = flow_engine::engine::node_facts(visit, output.as_ref(), tokens, tool_calls);
                self.runtime.facts.insert(node.clone(), facts);
            }
            _ => {}
        }
    }

    /// A completed tool call: counted in its node's visit, and its output,
    /// when it returned one of the tool's declared type, put in `calls`.
    fn runtime_call(&mut self, tool: &str, attempt_id: &str, ok: bool, output: Option<&ArtifactRef>) {
        let Some((node, attempt)) = self.runtime.attempts.get(attempt_id).cloned() else { return };
        if let Some(v) = self.runtime.visits.get_mut(&node) {
            v.2 += 1;
        }
        let Some(output) = output.filter(|_| ok) else { return };
        let value = match self.options.artifacts.map(|store| store.get(output)) {
            Some(Ok(value)) => value,
            _ => {
                self.runtime.calls_known = false;
                return;
            }
        };
        if let Some(ty) = self.program.decls.get(tool).and_then(|d| d.output_type()) {
            let types = &self.program.types;
            let key = format!("tool.output {tool}");
            let valid = self.validators.entry(key).or_insert_with(|| Validator::new(ty, types).ok());
            if valid.as_ref().is_none_or(|v| v.validate(&value).is_err()) {
                return;
            }
        }
        let by_tool = self.runtime.calls.entry(node).or_insert_with(|| json!({}));
        if let Some(list) = by_tool.as_object_mut().map(|m| m.entry(tool.to_string()).or_insert_with(|| json!([]))) {
            if let Some(list) = list.as_array_mut() {
                list.push(json!({ "attempt": attempt, "output": value }));
            }
        }
    }

    /// The inputs a computed value or a record names (by digest), and
    /// those it should name: each name it reads at the digest the trace
    /// last gave it — a node's last output, the run's input, `calls` and
    /// `facts` as made again. A name whose digest cannot be known (`calls`
    /// without the artifacts) is left out of both.
    pub(super) fn inputs_against(
        &self,
        inputs: &std::collections::BTreeMap<String, Option<ArtifactRef>>,
        reads: Vec<String>,
    ) -> (std::collections::BTreeMap<String, Option<String>>, std::collections::BTreeMap<String, Option<String>>) {
        let mut expected = std::collections::BTreeMap::new();
        let mut unknown = Vec::new();
        for name in reads {
            let digest = match self.runtime_input(&name) {
                Expected::Digest(d) => Some(d),
                Expected::Unknown => {
                    unknown.push(name);
                    continue;
                }
                Expected::NotRuntime if name == "input" => self.run_input.clone(),
                Expected::NotRuntime => self.nodes.get(&name).and_then(|n| n.output.clone()),
            };
            expected.insert(name, digest);
        }
        let recorded =
            inputs.iter().filter(|(k, _)| !unknown.contains(k)).map(|(k, v)| (k.clone(), v.as_ref().map(|a| a.digest.clone()))).collect();
        (recorded, expected)
    }

    /// The values of the inputs a computed value or a record names, read
    /// from the run's artifacts (`None`: there are none); an input that
    /// cannot be read is `Err` with its name, artifact and why.
    pub(super) fn read_inputs(
        &self,
        inputs: &std::collections::BTreeMap<String, Option<ArtifactRef>>,
    ) -> Option<Result<flow_engine::eval::Env, (String, ArtifactRef, String)>> {
        let store = self.options.artifacts?;
        let mut env = flow_engine::eval::Env::default();
        for (name, artifact) in inputs {
            let Some(artifact) = artifact else { continue };
            match store.get(artifact) {
                Ok(value) => {
                    env.insert(name.clone(), value);
                }
                Err(e) => return Some(Err((name.clone(), artifact.clone(), e.to_string()))),
            }
        }
        Some(Ok(env))
    }

    /// What an input named `name` must be, if it is a runtime name.
    pub(super) fn runtime_input(&self, name: &str) -> Expected {
        let value = match name {
            "calls" | "facts" if self.options.artifacts.is_none() => return Expected::Unknown,
            "calls" if !self.runtime.calls_known => return Expected::Unknown,
            "calls" => &self.runtime.calls,
            "facts" => &self.runtime.facts,
            _ => return Expected::NotRuntime,
        };
        Expected::Digest(flow_engine::artifact::artifact_ref(&Value::Object(value.clone())).0.digest)
    }
}
