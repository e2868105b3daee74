//! Declared records (T016): a node's records follow its completion, a
//! gate's its outcome — all of them, in the order the plan declares them —
//! each with the inputs its fields read as the trace last recorded them,
//! every field either valued or named in `errors`, and (with the run's
//! artifacts) the values made again by the engine's own evaluator.

use super::*;
use flow_check::events::{find_record, RecordOwner};
use flow_check::ir::Record;
use serde_json::Value;
use std::collections::BTreeMap;

/// What a `recorded` event says it read and made.
#[derive(Clone, Copy)]
struct Written<'b> {
    inputs: &'b BTreeMap<String, Option<ArtifactRef>>,
    values: &'b serde_json::Map<String, Value>,
    errors: &'b BTreeMap<String, String>,
}

/// Records the trace owes: those of the owner that just completed (or
/// recorded an outcome), from the `next`-th.
#[derive(Debug)]
pub(super) struct Owed {
    owner: String,
    gate: bool,
    names: Vec<String>,
    next: usize,
}

impl<'a> Checker<'a> {
    /// Before an event's own checks: a record still owed must come now
    /// (only the artifacts its inputs store, and a gate's appends on PASS,
    /// may come first). A policy
    /// report ends the expectation: the record may be held for a decision,
    /// or the run stopped before it.
    pub(super) fn records_owed(&mut self, seq: u64, body: &Body) {
        match body {
            Body::Recorded { .. } | Body::ArtifactRecorded { .. } | Body::BlackboardAppended { .. } => return,
            Body::PolicyViolated { .. } => {
                self.owed_records = None;
                return;
            }
            _ => {}
        }
        if let Some(owed) = self.owed_records.take() {
            let missing = owed.names[owed.next..].join("`, `");
            let what =
                if owed.gate { format!("gate `{}` recorded its outcome", owed.owner) } else { format!("`{}` completed", owed.owner) };
            let d = Deviation::new(codes::RECORD, Some(seq), format!("{what}, but record `{missing}` was not written"))
                .expected(format!("`recorded` {missing}"))
                .actual(format!("`{}`", body.kind()));
            self.push(if owed.gate { d } else { d.node(&owed.owner) });
        }
    }

    /// After a node's completion or a gate's outcome: its records are owed.
    pub(super) fn owe_records(&mut self, owner: &str, gate: bool) {
        let Some(plan) = self.plan.as_ref() else { return };
        let records = if gate { plan.wf.gates.get(owner).map(|g| &g.records) } else { plan.wf.nodes.get(owner).map(|n| &n.records) };
        let names: Vec<String> = records.into_iter().flatten().map(|r| r.name.clone()).collect();
        if !names.is_empty() {
            self.owed_records = Some(Owed { owner: owner.to_string(), gate, names, next: 0 });
        }
    }

    /// A `recorded` event: owed now, by its owner, with the inputs the
    /// plan's fields read and (with the artifacts) the values they make.
    pub(super) fn recorded(&mut self, seq: u64, body: &Body) {
        let Body::Recorded { name, node, gate, inputs, values, errors, .. } = body else { return };
        let Some(plan) = self.plan.as_ref() else { return };
        let Some((record, owner)) = find_record(plan.wf, name) else {
            self.push(Deviation::new(codes::RECORD, Some(seq), format!("record `{name}` is not declared in the workflow")));
            return;
        };
        let (wanted_node, wanted_gate) = match owner {
            RecordOwner::Node(n) => (Some(n), None),
            RecordOwner::Gate(g) => (None, Some(g)),
        };
        if (node.as_deref(), gate.as_deref()) != (wanted_node, wanted_gate) {
            let by = wanted_node.map(|n| format!("node `{n}`")).or(wanted_gate.map(|g| format!("gate `{g}`"))).unwrap_or_default();
            self.push(Deviation::new(codes::RECORD, Some(seq), format!("record `{name}` is written by {by}")));
            return;
        }
        let owed = self.owed_records.as_mut().filter(|o| o.names.get(o.next) == Some(name));
        match owed {
            Some(o) => {
                o.next += 1;
                if o.next == o.names.len() {
                    self.owed_records = None;
                }
            }
            None => {
                let d = Deviation::new(codes::RECORD, Some(seq), format!("record `{name}` written when it is not owed"))
                    .expected("right after its node completes or its gate records an outcome, in declaration order");
                self.push(d);
                return;
            }
        }
        let record = record.clone();
        self.record_inputs(seq, &record, wanted_gate, Written { inputs, values, errors });
    }

    /// The inputs and fields a `recorded` names, against the plan's record.
    fn record_inputs(&mut self, seq: u64, record: &Record, gate: Option<&str>, written: Written<'_>) {
        let Written { inputs, values, errors } = written;
        let name = &record.name;
        let reads = record.reads().into_iter().filter(|r| !(gate.is_some() && r == "outcome")).collect();
        let (recorded, expected) = self.inputs_against(inputs, reads);
        if recorded != expected {
            let d = Deviation::new(codes::RECORD, Some(seq), format!("record `{name}` names other inputs than its fields read"));
            self.push(d.expected(super::compute::describe(&expected)).actual(super::compute::describe(&recorded)));
            return;
        }
        let fields: Vec<&String> = record.fields.keys().collect();
        let given: Vec<&String> = values.keys().chain(errors.keys()).collect();
        if given.len() != fields.len() || !fields.iter().all(|f| values.contains_key(*f) != errors.contains_key(*f)) {
            let d = Deviation::new(codes::RECORD, Some(seq), format!("record `{name}` does not hold each declared field once"));
            let actual = given.iter().map(|f| f.as_str()).collect::<Vec<_>>().join(", ");
            self.push(d.expected(fields.iter().map(|f| f.as_str()).collect::<Vec<_>>().join(", ")).actual(actual));
            return;
        }
        self.remake_record(seq, record, gate, written);
    }

    /// The values made again from the recorded inputs (only with the run's
    /// artifacts) must be the recorded ones, and fail where they failed.
    fn remake_record(&mut self, seq: u64, record: &Record, gate: Option<&str>, written: Written<'_>) {
        let Written { inputs, values, errors } = written;
        let mut env = match self.read_inputs(inputs) {
            None => {
                self.records_unchecked += 1;
                return;
            }
            Some(Ok(env)) => env,
            Some(Err((input, artifact, e))) => {
                let why = format!("input `{input}` of record `{}` cannot be read: {e}", record.name);
                self.push(
                    Deviation::new(codes::RECORD, Some(seq), why).expected(format!("artifact {} in the run's artifacts/", artifact.digest)),
                );
                return;
            }
        };
        if let Some(outcome) = gate.and_then(|g| self.gate_outcomes.get(g)) {
            env.insert("outcome".into(), Value::String(outcome.as_str().to_string()));
        }
        let types = &self.program.types;
        let mut validate = |_: &str, ty: &flow_check::types::Ty, value: &Value| {
            flow_engine::validate::Validator::new(ty, types).and_then(|v| v.validate(value).map_err(|e| e.join("; ")))
        };
        let (made, failed) = flow_engine::engine::make_record(record, &env, &mut validate);
        let same_failures = failed.keys().eq(errors.keys());
        if &made != values || !same_failures {
            let d =
                Deviation::new(codes::RECORD, Some(seq), format!("the values of record `{}` do not follow from its inputs", record.name));
            let made_text = format!("{} (failed: {})", Value::Object(made), failed.keys().cloned().collect::<Vec<_>>().join(", "));
            self.push(d.expected(format!("made again: {made_text}")).actual(Value::Object(values.clone()).to_string()));
        }
    }
}
