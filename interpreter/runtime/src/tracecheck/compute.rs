//! Computed values (T015): a compute node's `computed` event names what it
//! read, and its value is made again from those inputs.

use super::*;
use flow_check::node::{ComputeNode, JoinRule};
use std::collections::BTreeMap;

impl<'a> Checker<'a> {
    /// A `computed` event: by a running compute node (or a join that
    /// votes), once per visit, with the inputs the plan's node reads as
    /// the trace last recorded them, and (with the artifacts) the value
    /// they make.
    pub(super) fn computed(&mut self, seq: u64, node: &str, inputs: &BTreeMap<String, Option<ArtifactRef>>, output: &ArtifactRef) {
        let planned = self.plan.as_ref().and_then(|p| p.node(node));
        let Some(made) = planned.and_then(Made::of) else {
            let d = Deviation::new(codes::COMPUTED, Some(seq), format!("`computed` by `{node}`, which neither computes nor votes"));
            self.push(d.node(node));
            return;
        };
        let rt = slot(&mut self.nodes, node);
        let (running, again) = (rt.phase == Phase::Running, rt.computed.is_some());
        rt.computed = Some(output.digest.clone());
        if !running || again {
            let why = if again { "a second `computed` in one visit" } else { "`computed` while the node is not running" };
            self.push(Deviation::new(codes::COMPUTED, Some(seq), format!("node `{node}`: {why}")).node(node));
            return;
        }
        let reads: Vec<String> = match &made {
            Made::Value(compute) => compute.reads(),
            // A vote reads the branches that arrived: each as it completed.
            Made::Vote(_, branches) => inputs.keys().filter(|name| branches.contains(*name)).cloned().collect(),
        };
        let (recorded, expected) = self.inputs_against(inputs, reads);
        if recorded != expected {
            self.push(
                Deviation::new(codes::COMPUTED, Some(seq), format!("node `{node}` records other inputs than it read"))
                    .expected(describe(&expected))
                    .actual(describe(&recorded))
                    .node(node),
            );
            return;
        }
        self.recompute(seq, node, &made, inputs, output);
    }

    /// The value made again from the recorded inputs must have the
    /// recorded digest (only with the run's artifacts).
    fn recompute(&mut self, seq: u64, node: &str, made: &Made, inputs: &BTreeMap<String, Option<ArtifactRef>>, output: &ArtifactRef) {
        let env = match self.read_inputs(inputs) {
            None => {
                self.computed_unchecked += 1;
                return;
            }
            Some(Ok(env)) => env,
            Some(Err((name, artifact, e))) => {
                let d = Deviation::new(codes::COMPUTED, Some(seq), format!("input `{name}` of `{node}` cannot be read: {e}"));
                self.push(d.expected(format!("artifact {} in the run's artifacts/", artifact.digest)).node(node));
                return;
            }
        };
        let made = match made {
            Made::Value(compute) => flow_engine::engine::compute_value(self.program, compute, env),
            Made::Vote(rule, branches) => Ok(flow_engine::engine::tally(rule, branches, &env).unwrap_or_default()),
        };
        let digest = made.as_ref().map(|v| flow_engine::artifact::artifact_ref(v).0.digest);
        if digest.as_ref().ok() != Some(&output.digest) {
            let actual = match &made {
                Ok(value) => format!("{value} ({})", digest.unwrap_or_default()),
                Err(e) => format!("an evaluation error: {}", e.message),
            };
            self.push(
                Deviation::new(codes::COMPUTED, Some(seq), format!("the value of `{node}` does not follow from its inputs"))
                    .expected(format!("the recorded value {}", output.digest))
                    .actual(format!("made again: {actual}"))
                    .node(node),
            );
        }
    }

    /// A compute node completes with the value it recorded.
    pub(super) fn compute_completed(&mut self, seq: u64, node: &str, output: Option<&ArtifactRef>) {
        let computes = self.plan.as_ref().and_then(|p| p.node(node)).and_then(Made::of).is_some();
        if !computes {
            return;
        }
        let computed = self.nodes.get(node).and_then(|n| n.computed.clone());
        if computed.is_none() || computed.as_deref() != output.map(|o| o.digest.as_str()) {
            self.push(
                Deviation::new(codes::COMPUTED, Some(seq), format!("compute node `{node}` completed with a value it did not record"))
                    .expected(computed.map_or("a `computed` event first".to_string(), |d| format!("output {d}")))
                    .actual(output.map_or("no output".to_string(), |o| format!("output {}", o.digest)))
                    .node(node),
            );
        }
    }
}

/// What a node that records `computed` makes: a compute node's value, or
/// a join's vote over its branches.
enum Made<'p> {
    Value(&'p ComputeNode),
    Vote(&'p JoinRule, &'p [String]),
}

impl<'p> Made<'p> {
    fn of(node: &'p flow_check::ir::Node) -> Option<Made<'p>> {
        match &node.body {
            flow_check::ir::NodeBody::Compute(c) => Some(Made::Value(c)),
            flow_check::ir::NodeBody::Join(j) if matches!(j.rule, JoinRule::Vote { .. }) => Some(Made::Vote(&j.rule, &node.target)),
            _ => None,
        }
    }
}

pub(super) fn describe(inputs: &BTreeMap<String, Option<String>>) -> String {
    let items: Vec<String> = inputs.iter().map(|(k, v)| format!("{k}: {}", v.as_deref().unwrap_or("null"))).collect();
    format!("{{{}}}", items.join(", "))
}
