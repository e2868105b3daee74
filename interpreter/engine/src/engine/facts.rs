//! `calls` and `facts` (reference §4.5): what the control plane recorded of
//! a node, kept in the run's expression scope beside the nodes' outputs.
//! `calls.NODE.TOOL` lists the results the node's calls of TOOL returned in
//! its latest visit (those of the tool's declared output type), each with
//! its attempt; `facts.NODE` is what the runtime measured of its latest
//! completed visit. An agent's output never reaches either: a gate can
//! compare what an agent says with what its tools returned.

use super::*;

impl Engine {
    /// A visit starts: its node's calls so far are forgotten and its
    /// measures start again.
    pub(super) fn facts_visit_started(&mut self, name: &str) {
        if let Some(rt) = self.nodes.get_mut(name) {
            rt.tokens = 0;
            rt.tool_calls = 0;
        }
        if let Some(Value::Object(calls)) = self.env.get_mut("calls") {
            calls.shift_remove(name);
        }
    }

    /// An agent turn of `node` used `tokens`.
    pub(super) fn facts_turn(&mut self, node: &str, tokens: u64) {
        if let Some(rt) = self.nodes.get_mut(node) {
            rt.tokens += tokens;
        }
    }

    /// A tool call of the attempt completed (whatever it returned).
    pub(super) fn facts_call_completed(&mut self, attempt_id: &str) {
        let Some(node) = self.attempts.get(attempt_id).map(|a| a.node.clone()) else { return };
        if let Some(rt) = self.nodes.get_mut(&node) {
            rt.tool_calls += 1;
        }
    }

    /// A call of `tool` in the attempt returned `output`, of the tool's
    /// declared output type: `calls.NODE.TOOL` gets it.
    pub(super) fn facts_call_returned(&mut self, attempt_id: &str, tool: &str, output: &Value) {
        let Some((node, attempt)) = self.attempts.get(attempt_id).map(|a| (a.node.clone(), a.attempt_no)) else { return };
        let calls = self.env.entry("calls".to_string()).or_insert_with(|| json!({}));
        let Some(calls) = calls.as_object_mut() else { return };
        let by_tool = calls.entry(node).or_insert_with(|| json!({}));
        let Some(by_tool) = by_tool.as_object_mut() else { return };
        let list = by_tool.entry(tool.to_string()).or_insert_with(|| json!([]));
        if let Some(list) = list.as_array_mut() {
            list.push(json!({ "attempt": attempt, "output": output }));
        }
    }

    /// A node completed with the output `artifact`: `facts.NODE` of the visit.
    pub(super) fn facts_completed(&mut self, name: &str, artifact: Option<&ArtifactRef>) {
        let Some(rt) = self.nodes.get(name) else { return };
        let facts = node_facts(rt.visits, artifact, rt.tokens, rt.tool_calls);
        let all = self.env.entry("facts".to_string()).or_insert_with(|| json!({}));
        if let Some(all) = all.as_object_mut() {
            all.insert(name.to_string(), facts);
        }
    }
}

/// `facts.NODE` of a visit, as the engine and trace check make it. No
/// wall-clock duration: a resumed run replays its decisions, and a time
/// read again is another time.
pub fn node_facts(visit: u32, output: Option<&ArtifactRef>, tokens: u64, tool_calls: u64) -> Value {
    json!({
        "visit": visit,
        "digest": output.map(|a| a.digest.clone()),
        "bytes": output.map_or(0, |a| a.size),
        "tokens": tokens,
        "tool_calls": tool_calls,
    })
}

/// Whether `name` in the run's scope is one the control plane fills in
/// (`calls`, `facts`) rather than a node's output or the run's input.
pub fn is_runtime_name(name: &str) -> bool {
    matches!(name, "calls" | "facts")
}
