//! Joins, loops and maps: branches arriving, rounds ending, items in turn.

use super::*;

impl Engine {
    pub(super) fn map_next(&mut self, map: &str, cause: &Str) {
        let Some(rt) = self.maps.get(map) else { return };
        let index = rt.results.len();
        if index < rt.items.len() {
            let item = rt.items[index].clone();
            if let Some(target) = self.wf().nodes.get(map).and_then(|n| n.target.first()).cloned() {
                let edge = self.emit("control", events::edge_taken(map, &target, Via::MapItem(index as u32 + 1)), Some(cause));
                self.then_start(&target, item, TriggerReason::First, &edge);
            }
        } else {
            let results = self.maps.remove(map).map(|m| m.results).unwrap_or_default();
            self.then_complete(map, Value::Array(results), NodeStatus::Completed, cause);
        }
    }

    /// Branch `from` finished into `join` (the edge is recorded): the join
    /// runs once its rule is met (`flow_check::semantics::join_ready`); a
    /// branch that finishes after its join ran is absorbed.
    pub(super) fn join_arrival(&mut self, join: &str, from: &str, cause: &Str) {
        let rt = self.joins.entry(join.to_string()).or_default();
        if rt.late.shift_remove(from) {
            return;
        }
        rt.arrived.insert(from.to_string());
        if self.nodes.get(join).is_some_and(|n| n.running) {
            // Entered by an edge of its own: it waits for its branches.
            self.try_join(join, cause);
            return;
        }
        let Some(node) = self.node(join) else { return };
        let arrived = self.joins.get(join).map_or(0, |rt| rt.arrived.len());
        if flow_check::semantics::join_ready(flow_check::semantics::join_rule(&node), arrived, node.target.len()) {
            self.then_start(join, Value::Null, TriggerReason::First, cause);
        }
    }

    pub(super) fn try_join(&mut self, join: &str, cause: &Str) {
        let Some(node) = self.node(join) else { return };
        // Readiness needs only the count: the set is taken once it is ready.
        let arrived = self.joins.get(join).map_or(0, |rt| rt.arrived.len());
        if !flow_check::semantics::join_ready(flow_check::semantics::join_rule(&node), arrived, node.target.len()) {
            return;
        }
        let rt = self.joins.remove(join).unwrap_or_default();
        // Branches still to finish are absorbed when they do.
        let late: IndexSet<String> = node.target.iter().filter(|b| !rt.arrived.contains(*b)).cloned().collect();
        if !late.is_empty() {
            self.joins.insert(join.to_string(), JoinRt { arrived: IndexSet::new(), late });
        }
        let done = rt.arrived;
        if matches!(flow_check::semantics::join_rule(&node), flow_check::ir::JoinRule::Vote { .. }) {
            self.vote(&node, &done, cause);
            return;
        }
        // The merged output: every result in branch order, the branches by
        // name, and their conflicts kept side by side (never averaged).
        let mut results = Vec::new();
        let mut branches = serde_json::Map::new();
        let mut conflicts: Vec<Value> = Vec::new();
        for branch in &node.target {
            if done.contains(branch) {
                let out = self.env.get(branch).cloned().unwrap_or(Value::Null);
                if let Some(Value::Array(items)) = out.get("conflicts") {
                    for item in items {
                        if !conflicts.contains(item) {
                            conflicts.push(item.clone());
                        }
                    }
                }
                results.push(out.clone());
                branches.insert(branch.clone(), out);
            }
        }
        if node.conflicts() == Conflicts::Fail {
            // Computed from the results, not taken from them: the fields
            // on which the branches disagree (and any conflicts a result
            // reports).
            let disagree = disagreements(&results);
            if !disagree.is_empty() || !conflicts.is_empty() {
                let mut msg = format!("the branches disagree on {} (conflicts: fail)", disagree.join(", "));
                if disagree.is_empty() {
                    msg = format!("{} conflicting results reported (conflicts: fail)", conflicts.len());
                }
                self.node_failed(join, ErrorCode::Conflict, msg, cause);
                return;
            }
        }
        let merged = json!({ "results": results, "conflicts": conflicts, "branches": Value::Object(branches) });
        if node.output_type().is_some() {
            match self.validator("node.output", join, &node.output) {
                Ok(v) => {
                    if let Err(errors) = v.validate(&merged) {
                        let msg = format!("the merged output does not match: {}", errors.join("; "));
                        self.node_failed(join, ErrorCode::InvalidOutput, msg, cause);
                        return;
                    }
                }
                Err(e) => {
                    self.node_failed(join, ErrorCode::InvalidSchema, e, cause);
                    return;
                }
            }
        }
        self.then_complete(join, merged, NodeStatus::Completed, cause);
    }

    /// A join that votes: the control plane counts the arrived branches'
    /// votes ([`super::compute::tally`]), records the count as `computed`
    /// with the branches' outputs it read, and completes with it.
    fn vote(&mut self, node: &Node, arrived: &IndexSet<String>, started: &Str) {
        let mut env = Env::default();
        let mut inputs = BTreeMap::new();
        for branch in node.target.iter().filter(|b| arrived.contains(*b)) {
            let out = self.env.get(branch).cloned().unwrap_or(Value::Null);
            let artifact = (!out.is_null()).then(|| self.store(&out, branch, Some(started)));
            inputs.insert(branch.clone(), artifact);
            env.insert(branch.clone(), out);
        }
        let Some(count) = super::compute::tally(flow_check::semantics::join_rule(node), &node.target, &env) else { return };
        if node.output_type().is_some() {
            let checked =
                self.validator("node.output", &node.name, &node.output).and_then(|v| v.validate(&count).map_err(|e| e.join("; ")));
            if let Err(why) = checked {
                let msg = format!("the vote's count does not match the output type: {why}");
                self.node_failed(&node.name, ErrorCode::InvalidOutput, msg, started);
                return;
            }
        }
        let artifact = self.store(&count, &node.name, Some(started));
        let done = self.emit("control", events::computed(&node.name, inputs, artifact.clone()), Some(started));
        let known = Some(Box::new(artifact));
        self.then(Effect::CompleteNode { name: node.name.clone(), output: count, status: NodeStatus::Completed, cause: done, known });
    }

    pub(super) fn round_end(&mut self, lp: &str, cause: &Str) {
        let Some(node) = self.node(lp) else { return };
        let round = self.loops.get(lp).map(|l| l.round).unwrap_or(1);
        let converged = match node.until() {
            Some(e) => match eval::eval_bool(e, &self.env) {
                Ok(b) => b,
                Err(err) => {
                    self.loops.remove(lp);
                    self.node_failed(lp, ErrorCode::EvalError, format!("`until`: {}", err.message), cause);
                    return;
                }
            },
            None => false,
        };
        let max = node.rounds() as u32;
        if converged || round >= max {
            self.loops.remove(lp);
            let output = json!({ "rounds": round, "converged": converged });
            if !converged {
                // The loop's declared alternative, recorded once as taken.
                let handler = semantics::handler_on(&node.handlers, HandlerEvent::Exhausted).cloned();
                let action = handler.or_else(|| node.on_exhausted().cloned());
                if let Some(action) = action.filter(|a| a.name != ActionKind::Continue) {
                    self.env.insert(lp.to_string(), output);
                    let ctx = Ctx { node: Some(lp.to_string()), gate: None, event: HandlerEvent::Exhausted.into() };
                    self.then_act(action, ctx, HandlerScope::Node(lp.to_string()), cause);
                    return;
                }
                let ex = self.emit(
                    "control",
                    events::action_taken(
                        HandlerEvent::Exhausted.into(),
                        HandlerScope::Node(lp.to_string()),
                        &Action::bare(ActionKind::Continue),
                    ),
                    Some(cause),
                );
                self.then_complete(lp, output, NodeStatus::Completed, &ex);
                return;
            }
            self.then_complete(lp, output, NodeStatus::Completed, cause);
            return;
        }
        if let Some(l) = self.loops.get_mut(lp) {
            l.round += 1;
        }
        if let Some(first) = node.target.first().cloned() {
            let edge = self.emit("control", events::edge_taken(lp, &first, Via::LoopRound), Some(cause));
            let input = self.nodes.get(lp).map(|n| n.input.clone()).unwrap_or(Value::Null);
            self.then_start(&first, input, TriggerReason::First, &edge);
        }
    }
}

/// The fields on which branch results disagree: a field two record results
/// hold with different values (`result` when results that are not records
/// differ as wholes).
fn disagreements(results: &[Value]) -> Vec<String> {
    if results.iter().all(Value::is_object) {
        let mut fields: Vec<String> = Vec::new();
        for (i, a) in results.iter().enumerate() {
            for (key, value) in a.as_object().into_iter().flatten() {
                let differs = results[i + 1..].iter().any(|b| b.get(key).is_some_and(|other| other != value));
                if differs && !fields.contains(key) {
                    fields.push(key.clone());
                }
            }
        }
        return fields;
    }
    let differ = results.windows(2).any(|pair| pair[0] != pair[1]);
    if differ {
        vec!["result".to_string()]
    } else {
        Vec::new()
    }
}
