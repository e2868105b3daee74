//! Node visits: starting a node by its kind, completing it (task states,
//! the run's result), and choosing the edge that follows.

use super::*;

impl Engine {
    /// Starts the run with its input (at one instant).
    pub fn start(&mut self, input: Value) {
        self.at_one_instant(|engine| engine.start_at(input))
    }

    pub(super) fn start_at(&mut self, input: Value) {
        let input_ref = if input.is_null() { None } else { Some(artifact_ref(&input).0) };
        let started = self.emit(
            "control",
            events::run_started(self.wf(), &self.cfg.plan_digest, self.cfg.plan_content_digest.clone(), input_ref),
            None,
        );
        if !input.is_null() {
            self.store(&input, "input", Some(&started));
        }
        if let Some(ty) = self.wf().input_type().cloned() {
            if let Ok(v) = self.validator("workflow.input", "", &ty) {
                if let Err(errors) = v.validate(&input) {
                    self.end_run("invalid_input", TerminationStatus::Failure, &started, Some(errors.join("; ")));
                    return;
                }
            }
        }
        self.env.insert("input".into(), input.clone());
        // What the control plane records of the nodes (reference §4.5).
        self.env.insert("calls".into(), json!({}));
        self.env.insert("facts".into(), json!({}));
        let Some(start) = self.wf().start().map(str::to_string) else {
            self.end_run("no_start", TerminationStatus::Failure, &started, None);
            return;
        };
        self.then(Effect::StartNode { name: start, input, trigger: TriggerReason::First, cause: started });
    }

    pub(super) fn start_node(&mut self, name: &str, input: Value, trigger: TriggerReason, cause: &Str) {
        if !self.running() {
            return;
        }
        let Some(node) = self.node(name) else {
            self.end_run("unknown_node", TerminationStatus::Failure, cause, Some(format!("no node `{name}`")));
            return;
        };
        let held = || Effect::StartNode { name: name.to_string(), input: input.clone(), trigger, cause: held() };
        if !self.admit(Obs::Started(name), "node_started", cause, held) {
            return;
        }
        let slice = if self.pending_slice.is_empty() { None } else { self.pending_slice.remove(name) };
        let contract = if self.pending_contract.is_empty() { None } else { self.pending_contract.remove(name) };
        let artifacts = if self.pending_artifacts.is_empty() { None } else { self.pending_artifacts.remove(name) };
        let message = if self.pending_envelope.is_empty() { None } else { self.pending_envelope.remove(name) };
        if !self.nodes.contains_key(name) {
            self.nodes.insert(name.to_string(), NodeRt::default());
        }
        let rt = &mut self.nodes[name];
        rt.visits += 1;
        rt.attempt_no = 0;
        rt.lost = 0;
        rt.running = true;
        rt.input = input.clone();
        rt.slice = slice;
        rt.contract = contract;
        rt.artifacts = artifacts;
        rt.message = message;
        let visit = rt.visits;
        let started = self.emit("control", events::node_started(&node, visit), Some(cause));
        self.nodes[name].started_event = started.clone();
        self.facts_visit_started(name);
        if let Some(max) = node.max_visits() {
            if visit as u64 > max {
                self.node_failed(name, ErrorCode::MaxVisits, format!("`{name}` ran {max} times already (max_visits)"), &started);
                return;
            }
        }
        let boards = self.read_boards(&node, &started);
        self.nodes[name].boards = boards;
        // A node budget covers one visit.
        let program = self.program.clone();
        if let Some(budget) = node.budget(&program) {
            self.budgets.add(Scope::from_budget(&format!("node.{name}"), &budget));
        }
        match &node.body {
            NodeBody::Agent(_) | NodeBody::Tool(_) => self.then(Effect::StartAttempt { node: node.clone(), trigger, cause: started }),
            NodeBody::Human(human) => {
                let (decisions, prompt) = (human.decisions.clone(), human.prompt.clone());
                let decision = Box::new(Decision::HumanNode { node: name.to_string() });
                self.then(Effect::Ask { decision, principals: node.target.clone(), prompt, decisions, cause: started });
            }
            NodeBody::End(end) => {
                let reason = node.target.first().cloned().unwrap_or_else(|| name.to_string());
                self.finish_end(name, &reason, end.status, &started);
            }
            NodeBody::Parallel(_) => self.fanout(name, input, &started, 0),
            // Started by its branches once ready, or entered by an edge of
            // its own: then it waits for them.
            NodeBody::Join(_) => self.then(Effect::TryJoin { join: name.to_string(), cause: started }),
            NodeBody::Loop(_) => {
                self.loops.insert(name.to_string(), LoopRt { round: 1 });
                if let Some(first) = node.target.first().cloned() {
                    let edge = self.emit("control", events::edge_taken(name, &first, Via::LoopRound), Some(&started));
                    self.then(Effect::StartNode { name: first, input, trigger: TriggerReason::First, cause: edge });
                }
            }
            NodeBody::Map(_) => self.start_map(&node, &started),
            NodeBody::Compute(_) => self.compute_node(&node, &started),
            other => {
                let msg = format!("node kind `{}` is not supported by this runtime yet", other.kind());
                self.node_failed(name, ErrorCode::Unsupported, msg, &started);
            }
        }
    }

    /// A fan-out's branch `next` entered (through the delegation that leads
    /// to it, if any), then the next one; after the last, the parallel node
    /// completes. A refused delegation stops the fan-out.
    pub(super) fn fanout(&mut self, name: &str, input: Value, started: &Str, next: usize) {
        let Some(node) = self.node(name) else { return };
        let Some(branch) = node.target.get(next).cloned() else {
            self.finish_parallel(name, started);
            return;
        };
        let edge = self.emit("control", events::edge_taken(name, &branch, Via::Fanout), Some(started));
        // A delegation to a branch comes from whoever led to the fan-out.
        let delegator = self.index.fanout_transfer(self.wf(), name, &branch, |n| self.env.contains_key(n)).map(|t| t.from.clone());
        let rest = Effect::Fanout { node: name.to_string(), input: input.clone(), started: started.clone(), next: next + 1 };
        match delegator {
            Some(from) => match self.transfer(&from, &branch, input, edge) {
                Crossing::Enter(input, parent) => {
                    self.then(Effect::StartNode { name: branch, input, trigger: TriggerReason::First, cause: parent });
                    self.then(rest);
                }
                // A held handoff waits; the other branches go on.
                Crossing::Held => self.then(rest),
                Crossing::Refused => {}
            },
            None => {
                self.then(Effect::StartNode { name: branch, input, trigger: TriggerReason::First, cause: edge });
                self.then(rest);
            }
        }
    }

    /// A map: its `over` list evaluated and checked, then its items in turn.
    pub(super) fn start_map(&mut self, node: &Node, started: &Str) {
        let items = match node.over() {
            Some(e) => eval::eval(e, &self.env),
            None => Ok(Value::Array(Vec::new())),
        };
        match items {
            Ok(Value::Array(items)) => {
                if let Some(max) = node.max_items() {
                    if items.len() as u64 > max {
                        let msg = format!("{} items exceed max_items {max}", items.len());
                        self.node_failed(&node.name, ErrorCode::TooManyItems, msg, started);
                        return;
                    }
                }
                self.maps.insert(node.name.clone(), MapRt { items, results: Vec::new() });
                self.then(Effect::MapNext { map: node.name.clone(), cause: started.clone() });
            }
            Ok(other) => {
                let msg = format!("`over` is not a list: {other}");
                self.node_failed(&node.name, ErrorCode::InvalidInput, msg, started)
            }
            Err(e) => self.node_failed(&node.name, ErrorCode::EvalError, e.message, started),
        }
    }

    /// An end node completes, and the run terminates with its reason.
    pub(super) fn finish_end(&mut self, name: &str, reason: &str, status: TerminationStatus, cause: &Str) {
        let held = || Effect::FinishEnd { name: name.to_string(), reason: reason.to_string(), status, cause: held() };
        if !self.admit(Obs::Completed(name), "node_completed", cause, held) {
            return;
        }
        let done = self.emit("control", events::node_completed(name, NodeStatus::Completed, None), Some(cause));
        self.facts_completed(name, None);
        self.nodes[name].running = false;
        self.then(Effect::Terminate { reason: reason.to_string(), status, cause: done, message: None });
    }

    /// A parallel node completes once its branches are started.
    pub(super) fn finish_parallel(&mut self, name: &str, cause: &Str) {
        if !self.admit(Obs::Completed(name), "node_completed", cause, || Effect::FinishParallel { name: name.to_string(), cause: held() }) {
            return;
        }
        self.emit("control", events::node_completed(name, NodeStatus::Completed, None), Some(cause));
        self.facts_completed(name, None);
        self.nodes[name].running = false;
    }

    /// A node completes with `output` (whose reference is `known` when it
    /// is: not digested again): a delegate's contract is held, the output
    /// kept, a task state changed, then a map item returns to its map, else
    /// the next edge is chosen.
    pub(super) fn complete_node(&mut self, name: &str, output: Value, status: NodeStatus, cause: &Str, known: Option<ArtifactRef>) {
        if !self.running() {
            return;
        }
        // A delegate's result must satisfy its contract.
        let contract = self.nodes.get(name).and_then(|n| n.contract.clone());
        if let (Some(contract), NodeStatus::Completed) = (contract, status) {
            if let Some(why) = self.contract_violation(&contract, &output) {
                self.node_failed(name, ErrorCode::ContractRejected, format!("contract `{contract}`: {why}"), cause);
                return;
            }
        }
        let held = || Effect::CompleteNode { name: name.to_string(), output: output.clone(), status, cause: held(), known: None };
        if !self.admit(Obs::Completed(name), "node_completed", cause, held) {
            return;
        }
        let artifact = if output.is_null() { None } else { Some(known.unwrap_or_else(|| self.artifact_of(&output).0)) };
        let done = self.emit("control", events::node_completed(name, status, artifact.clone()), Some(cause));
        if let Some(a) = artifact.clone() {
            let of_result_type = match self.wf().output_type() {
                Some(ty) => self.node(name).is_some_and(|n| &n.output == ty),
                None => false,
            };
            if of_result_type {
                self.result_output = Some((name.to_string(), a.clone()));
            }
            self.last_output = Some((name.to_string(), a));
        }
        self.env.insert(name.to_string(), output.clone());
        self.facts_completed(name, artifact.as_ref());
        if let Some(rt) = self.nodes.get_mut(name) {
            rt.running = false;
        }
        if !self.budgets.scopes.is_empty() {
            self.budgets.scopes.shift_remove(&format!("node.{name}"));
        }
        // Its declared records are written first (reference §6.8).
        if self.node(name).is_some_and(|n| !n.records.is_empty()) {
            let owner = RecordOwner::Node { name: name.to_string(), status };
            self.then(Effect::WriteRecords { owner, next: 0, cause: done });
            return;
        }
        self.after_completion(name, status, &done);
    }

    /// A completed node goes on, after its records: the task state it
    /// enters, what it writes to blackboards, then its map or its edge.
    pub(super) fn after_completion(&mut self, name: &str, status: NodeStatus, done: &Str) {
        let done = done.clone();
        // Task state machine.
        if let Some((machine, state)) = self.wf().nodes.get(name).and_then(|n| n.state()).map(|(m, s)| (m.to_string(), s.to_string())) {
            if let Some(m) = self.program.machines.get(&machine).cloned() {
                let from = self.task_state.get(&machine).cloned().unwrap_or_else(|| m.initial.clone());
                let legal = from == state || m.transitions.iter().any(|(a, b)| *a == from && *b == state);
                if !legal {
                    let msg = format!("illegal transition {machine}.{from} -> {machine}.{state}");
                    self.node_failed(name, ErrorCode::IllegalTransition, msg, &done);
                    return;
                }
                self.task_state.insert(machine.clone(), state.clone());
                self.emit(
                    "control",
                    Body::StateChanged { schema_version: V, node: name.to_string(), machine, from, to: state },
                    Some(&done),
                );
            }
        }
        // What it writes is appended before anything follows.
        let has_output = self.env.get(name).is_some_and(|v| !v.is_null());
        let writes = status == NodeStatus::Completed && has_output && self.node(name).is_some_and(|n| !n.common.writes.is_empty());
        if writes {
            self.then(Effect::Append { node: name.to_string(), next: 0, cause: done });
            return;
        }
        self.proceed(name, &done);
    }

    /// A completed node goes on: a map item returns to its map, any other
    /// node takes its edge.
    pub(super) fn proceed(&mut self, name: &str, done: &Str) {
        if let Some(map) = self.index.map_of(name).map(str::to_string) {
            if self.maps.contains_key(&map) {
                let output = self.env.get(name).cloned().unwrap_or(Value::Null);
                if let Some(rt) = self.maps.get_mut(&map) {
                    rt.results.push(output);
                }
                self.then(Effect::MapNext { map, cause: done.clone() });
                return;
            }
        }
        self.follow(name, done);
    }

    /// Chooses the next node after `from` completed.
    pub(super) fn follow(&mut self, from: &str, cause: &Str) {
        if !self.running() {
            return;
        }
        let node = self.node(from);
        if node.as_ref().is_some_and(|n| n.kind() == NodeKind::Parallel) {
            return;
        }
        let mut chosen: Option<(String, Via)> = None;
        let mut else_edge = None;
        let program = self.program.clone();
        let wf = &program.workflows[self.wf_index];
        let index = self.index.clone();
        for edge in index.out_of_name(wf, from) {
            match &edge.guard {
                Guard::Always => {
                    chosen = Some((edge.to.clone(), Via::Always));
                    break;
                }
                Guard::When(cond) => match eval::eval_bool(cond, &self.env) {
                    Ok(true) => {
                        chosen = Some((edge.to.clone(), Via::When(eval::render(cond))));
                        break;
                    }
                    Ok(false) => {}
                    Err(e) => {
                        self.node_failed(from, ErrorCode::EvalError, format!("guard of {from} -> {}: {}", edge.to, e.message), cause);
                        return;
                    }
                },
                Guard::Else => else_edge = Some(edge.to.clone()),
            }
        }
        let chosen = chosen.or_else(|| else_edge.map(|to| (to, Via::Else)));
        if let Some((to, via)) = chosen {
            // Leaving a loop body for a node outside the loop ends the round.
            if let Some(lp) = semantics::round_exit(self.wf(), &self.index, from, &to).map(str::to_string) {
                self.then(Effect::RoundEnd { lp, cause: cause.clone() });
                return;
            }
            self.then(Effect::Cross { from: from.to_string(), to, via, cause: cause.clone() });
            return;
        }
        if let Some(lp) = self.index.loop_of(from).map(str::to_string) {
            self.then(Effect::RoundEnd { lp, cause: cause.clone() });
            return;
        }
        // A branch with no edge of its own goes to the join that lists it.
        let join = self.index.join_of(from).map(str::to_string);
        if let Some(join) = join {
            let edge = self.emit("control", events::edge_taken(from, &join, Via::Join), Some(cause));
            self.then(Effect::JoinArrival { join, from: from.to_string(), cause: edge });
            return;
        }
        if self.waiting.is_empty() && self.attempts.is_empty() {
            let message = Some(format!("no edge leaves `{from}`"));
            self.then(Effect::Terminate { reason: "dead_end".into(), status: TerminationStatus::Failure, cause: cause.clone(), message });
        }
    }
}
