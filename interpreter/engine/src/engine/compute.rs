//! Computed nodes (reference §6.1, `compute`): a value the control plane
//! makes from what the run recorded, with no model, tool or human asked.
//! The value is recorded with the digest of every input it read, so a
//! reader of the trace can make it again (`flow trace check` does).

use super::*;
use flow_check::node::{ComputeNode, JoinRule};

impl Engine {
    /// A compute node's visit: its `let` names and `value` evaluated over
    /// what it reads, checked against its output type, recorded (`computed`,
    /// with its inputs' digests), then the node completes with the value.
    /// An expression that cannot be evaluated fails the visit (`failure`);
    /// a value not of the output type fails it with `invalid_output`.
    pub(super) fn compute_node(&mut self, node: &Node, started: &Str) {
        let NodeBody::Compute(compute) = &node.body else { return };
        let mut env = Env::default();
        let mut inputs = BTreeMap::new();
        for name in compute.reads() {
            let value = self.env.get(&name).filter(|v| !v.is_null()).cloned();
            // Stored (once per run) so the trace's reader can make the
            // value again: a human's answer or a loop's record is not
            // otherwise an artifact.
            inputs.insert(name.clone(), value.as_ref().map(|v| self.store(v, &name, Some(started))));
            if let Some(value) = value {
                env.insert(name, value);
            }
        }
        let program = self.program.clone();
        // A declared computation's input is held to its type first.
        if let Some(function) = &compute.function {
            let input = match input_of(compute, &env) {
                Ok(input) => input,
                Err(e) => return self.node_failed(&node.name, ErrorCode::EvalError, e.message, started),
            };
            let ty = program.decls.get(function).and_then(|d| d.input_type()).cloned().unwrap_or(Ty::Any);
            let checked = self.validator("compute.input", function, &ty).and_then(|v| v.validate(&input).map_err(|e| e.join("; ")));
            if let Err(why) = checked {
                let message = format!("the input of `{function}` is not of its type: {why}");
                return self.node_failed(&node.name, ErrorCode::InvalidInput, message, started);
            }
        }
        let value = match evaluate(&program, compute, env) {
            Ok(value) => value,
            Err(e) => return self.node_failed(&node.name, ErrorCode::EvalError, e.message, started),
        };
        let checked =
            self.validator("compute.output", &node.name, &compute.output_type).and_then(|v| v.validate(&value).map_err(|e| e.join("; ")));
        if let Err(why) = checked {
            let message = format!("the computed value is not of its output type: {why}");
            let cause = started.clone();
            let event = HandlerEvent::InvalidOutput;
            self.then(Effect::NodeFailed { node: node.name.clone(), event, code: ErrorCode::InvalidOutput, message, cause });
            return;
        }
        let artifact = self.store(&value, &node.name, Some(started));
        let done = self.emit("control", events::computed(&node.name, inputs, artifact.clone()), Some(started));
        let (name, known) = (node.name.clone(), Some(Box::new(artifact)));
        self.then(Effect::CompleteNode { name, output: value, status: NodeStatus::Completed, cause: done, known });
    }
}

/// The value of a compute node over `env` (the values of what it reads):
/// its own `let` names in order, then its `value`; or, when it applies a
/// declared computation, its `args` made into `input` and the
/// computation's `let` and `value` over that. Pure; trace check makes the
/// value again with it.
pub fn evaluate(program: &Program, compute: &ComputeNode, env: Env) -> Result<Value, eval::EvalError> {
    let env = match &compute.function {
        None => env,
        Some(_) => {
            let mut inner = Env::default();
            inner.insert("input".into(), input_of(compute, &env)?);
            inner
        }
    };
    apply(program, compute, env)
}

/// The `input` a node that applies a declared computation gives it: its
/// `args` evaluated over what it reads.
fn input_of(compute: &ComputeNode, env: &Env) -> Result<Value, eval::EvalError> {
    let mut input = serde_json::Map::new();
    for (field, expr) in &compute.args {
        let value = eval::eval(expr, env).map_err(|e| eval::EvalError::new(format!("argument `{field}`: {}", e.message)))?;
        input.insert(field.clone(), value);
    }
    Ok(Value::Object(input))
}

/// The computation's `let` names in order, then its `value`, over `env`.
fn apply(program: &Program, compute: &ComputeNode, mut env: Env) -> Result<Value, eval::EvalError> {
    let Some(computation) = compute.computation(program) else {
        return Err(eval::EvalError::new(format!("no computation `{}` in the plan", compute.function.as_deref().unwrap_or_default())));
    };
    for (name, expr) in computation.lets {
        let value = eval::eval(expr, &env).map_err(|e| eval::EvalError::new(format!("`{name}`: {}", e.message)))?;
        env.insert(name.to_string(), value);
    }
    eval::eval(computation.value, &env)
}

/// A join's vote (`majority(key)`, `quorum(n, key)`, `weighted(key, {…})`)
/// over the outputs of the branches that arrived, by name in `env`, in
/// the order `branches` lists them. Every listed branch has a vote of its
/// weight (1 unless declared); a branch that did not arrive, or whose
/// output has no `key`, is `missing` and its weight counts against every
/// value. A value wins with more than half the total weight — or, under
/// `quorum(n, key)`, with at least `n` votes — when no other value does
/// as well; else nothing is decided. `None` for a rule that is no vote.
pub fn tally(rule: &JoinRule, branches: &[String], env: &Env) -> Option<Value> {
    let JoinRule::Vote { key, quorum, weights } = rule else { return None };
    let mut votes: Vec<(Value, f64, Vec<String>)> = Vec::new();
    let mut missing = Vec::new();
    let mut total = 0.0;
    for branch in branches {
        let weight = weights.get(branch).copied().unwrap_or(1.0);
        total += weight;
        match env.get(branch).and_then(|out| out.get(key)).filter(|v| !v.is_null()) {
            Some(value) => match votes.iter_mut().find(|(v, _, _)| eval::json_eq(v, value)) {
                Some(entry) => {
                    entry.1 += weight;
                    entry.2.push(branch.clone());
                }
                None => votes.push((value.clone(), weight, vec![branch.clone()])),
            },
            None => missing.push(Value::String(branch.clone())),
        }
    }
    // Heaviest first; equal weights keep the order of first appearance.
    votes.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap_or(std::cmp::Ordering::Equal));
    let wins = |w: f64| match quorum {
        Some(n) => w >= *n as f64,
        None => w * 2.0 > total,
    };
    let unique_top = votes.get(1).is_none_or(|second| second.1 < votes[0].1);
    let winner = votes.first().filter(|top| wins(top.1) && unique_top).map(|top| top.0.clone());
    let votes: Vec<Value> =
        votes.into_iter().map(|(value, weight, voters)| json!({ "value": value, "weight": weight, "branches": voters })).collect();
    Some(json!({ "decided": winner.is_some(), "result": winner.unwrap_or(Value::Null), "votes": votes, "missing": missing }))
}
