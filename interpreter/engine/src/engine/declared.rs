//! Declared events (reference §6.8, `record NAME { … }`): a node writes
//! its records as it completes, a gate as it records its outcome — each a
//! `recorded` event, a step of the policy trace (`recorded(NAME)`), with
//! the value of every field and the artifact of every input the fields
//! read, so trace check can make the values again.
//!
//! A field that cannot be made — its expression has no value (a division
//! by zero, a missing node output) or its value is not of the field's
//! type — is left out of `values` and named in `errors`: the event is
//! written all the same, so `recorded(NAME)` holds exactly where the
//! verifier says it does.

use super::*;
use flow_check::ir::Record;

/// What wrote records, and what follows the last one.
#[derive(Debug, Clone)]
pub(super) enum RecordOwner {
    /// A node that completed with `status`; its completion goes on.
    Node { name: String, status: NodeStatus },
    /// A gate that recorded `outcome`; its action is taken.
    Gate { name: String, outcome: Outcome, action: Action, ctx: Box<Ctx> },
}

impl RecordOwner {
    fn records<'p>(&self, wf: &'p Workflow) -> &'p [Record] {
        match self {
            RecordOwner::Node { name, .. } => wf.nodes.get(name).map(|n| n.records.as_slice()).unwrap_or_default(),
            RecordOwner::Gate { name, .. } => wf.gates.get(name).map(|g| g.records.as_slice()).unwrap_or_default(),
        }
    }
}

impl Engine {
    /// The owner's records from the `next`-th on, each admitted by the
    /// policies first (a `block` policy stops the run, an `escalate` one
    /// holds the record for a decision); after the last, what follows.
    pub(super) fn write_records(&mut self, owner: RecordOwner, next: usize, cause: &Str) {
        if !self.running() {
            return;
        }
        let Some(record) = owner.records(self.wf()).get(next).cloned() else {
            return self.after_records(owner, cause);
        };
        let held = || Effect::WriteRecords { owner: owner.clone(), next, cause: held() };
        if !self.admit(Obs::Recorded(&record.name), "recorded", cause, held) {
            return;
        }
        let mut env = Env::default();
        let mut inputs = BTreeMap::new();
        for name in record.reads() {
            let value = match (&owner, name.as_str()) {
                (RecordOwner::Gate { outcome, .. }, "outcome") => Some(Value::String(outcome.as_str().to_string())),
                _ => self.env.get(&name).filter(|v| !v.is_null()).cloned(),
            };
            if name != "outcome" || matches!(owner, RecordOwner::Node { .. }) {
                inputs.insert(name.clone(), value.as_ref().map(|v| self.store(v, &name, Some(cause))));
            }
            if let Some(value) = value {
                env.insert(name, value);
            }
        }
        let mut validate = |field: &str, ty: &Ty, value: &Value| {
            let key = format!("{}.{field}", record.name);
            self.validator("record.field", &key, ty).and_then(|v| v.validate(value).map_err(|e| e.join("; ")))
        };
        let (values, errors) = make_record(&record, &env, &mut validate);
        let by = match &owner {
            RecordOwner::Node { name, .. } => events::RecordOwner::Node(name),
            RecordOwner::Gate { name, .. } => events::RecordOwner::Gate(name),
        };
        let body = events::recorded(&record.name, by, inputs, values, errors);
        let written = self.emit("control", body, Some(cause));
        self.then(Effect::WriteRecords { owner, next: next + 1, cause: written });
    }

    fn after_records(&mut self, owner: RecordOwner, cause: &Str) {
        match owner {
            RecordOwner::Node { name, status } => self.after_completion(&name, status, cause),
            RecordOwner::Gate { name, action, ctx, .. } => {
                self.then(Effect::Act { action, ctx, scope: HandlerScope::Gate(name), cause: cause.clone() })
            }
        }
    }
}

/// A record's values over `env` (the values of what it reads; a gate's
/// `outcome` among them): each field evaluated and held to its type by
/// `validate`. A field that cannot be made is left out of the values and
/// its reason is in the errors. Pure; trace check makes the values again
/// with it.
pub fn make_record(
    record: &Record,
    env: &Env,
    validate: &mut dyn FnMut(&str, &Ty, &Value) -> Result<(), String>,
) -> (serde_json::Map<String, Value>, BTreeMap<String, String>) {
    let mut values = serde_json::Map::new();
    let mut errors = BTreeMap::new();
    for (field, expr) in &record.fields {
        match eval::eval(expr, env) {
            Ok(value) => match validate(field, &expr.ty, &value) {
                Ok(()) => {
                    values.insert(field.clone(), value);
                }
                Err(why) => {
                    errors.insert(field.clone(), format!("not of its type {}: {why}", expr.ty));
                }
            },
            Err(e) => {
                errors.insert(field.clone(), e.message);
            }
        }
    }
    (values, errors)
}
