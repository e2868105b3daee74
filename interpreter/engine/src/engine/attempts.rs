//! Attempts: leases, retries with backoff, and a failed visit handed to
//! its handler (node, loop, workflow) by `flow_check::semantics`.

use super::*;

impl Engine {
    pub(super) fn max_attempts(node: &Node) -> u32 {
        node.attempts() as u32
    }

    /// The delay before attempt `attempt_no`: none before the first,
    /// `backoff` before the second, doubling after each failure.
    pub(super) fn backoff(node: &Node, attempt_no: u32) -> u64 {
        if attempt_no <= 1 {
            return 0;
        }
        let Some(retry) = node.retry() else { return 0 };
        let Some(base) = retry.backoff_ms else { return 0 };
        let delay = base.saturating_mul(1u64 << (attempt_no.saturating_sub(2)).min(20));
        match retry.max_backoff_ms {
            Some(max) => delay.min(max),
            None => delay,
        }
    }

    /// An attempt of `node` starts: one control-plane step is metered
    /// (its zones crossed first, when it crosses any), then it begins.
    pub(super) fn start_attempt(&mut self, node: NodeRef, trigger: TriggerReason, cause: &Str) {
        if !self.running() {
            return;
        }
        let Some(changes) = self.take_step(&node, cause) else { return };
        if changes.is_empty() {
            self.begin_attempt(&node, trigger, cause);
        } else {
            self.then(Effect::Zones { changes, cause: cause.clone() });
            self.then(Effect::BeginAttempt { node, trigger, cause: cause.clone() });
        }
    }

    /// An attempt begins: recorded with its lease, then its first turn or
    /// its tool call.
    pub(super) fn begin_attempt(&mut self, node: &NodeRef, trigger: TriggerReason, cause: &Str) {
        if !self.running() {
            return;
        }
        let rt = &mut self.nodes[&node.name];
        rt.attempt_no += 1;
        let attempt_no = rt.attempt_no;
        let visit = rt.visits;
        let id = flow_trace::attempt_id(&node.name, visit, attempt_no);
        let started = self.emit("control", events::attempt_started(&node.name, &id, attempt_no, trigger), Some(cause));
        let lease = concat(&["lease:", &id]);
        let expires = rfc3339(self.now() + self.cfg.lease_ttl_ms);
        self.emit(
            "control",
            Body::LeaseGranted {
                schema_version: V,
                attempt_id: id.clone(),
                lease: lease.clone(),
                owner: self.cfg.owner.clone(),
                expires_at: expires,
            },
            Some(&started),
        );
        let repair = node.repair() as u32;
        let attempt = Attempt {
            id: id.clone(),
            node: node.name.clone(),
            attempt_no,
            turn: 0,
            repair_left: repair,
            tool_results: Vec::new(),
            tool_calls: 0,
            started: started.clone(),
            lease,
            repair: None,
            queued: Default::default(),
            calling: None,
        };
        self.attempts.insert(id.clone(), attempt);
        let delay = Self::backoff(node, attempt_no);
        if node.kind() == NodeKind::Agent {
            self.then(Effect::NextTurn { attempt: id, delay, cause: started });
        } else {
            self.tool_node_call(node, &id, delay, &started);
        }
    }

    /// A tool node's call: its arguments evaluated (else the attempt fails).
    pub(super) fn tool_node_call(&mut self, node: &Node, attempt: &str, delay: u64, cause: &Str) {
        let Some(tool) = node.target.first().cloned() else { return };
        let input = match node.args() {
            Some(args) => {
                let mut out = serde_json::Map::new();
                for (k, v) in args {
                    let value = match v {
                        IrValue::Expr(e) => match eval::eval(e, &self.env) {
                            Ok(v) => v,
                            Err(e) => {
                                self.attempt_failed(attempt, ErrorCode::EvalError, &format!("argument `{k}`: {}", e.message), cause);
                                return;
                            }
                        },
                        other => eval::value_to_json(other),
                    };
                    out.insert(k.clone(), value);
                }
                Value::Object(out)
            }
            _ => self.nodes[&node.name].input.clone(),
        };
        let key_template = node.idempotency_key().map(str::to_string);
        let call = PendingCall { attempt: attempt.to_string(), tool, input, key_template, agent: None, delay, confirmed: false };
        self.then(Effect::CallTool { call: Box::new(call), cause: cause.clone() });
    }

    pub(super) fn release(&mut self, attempt_id: &str, cause: &Str) {
        if let Some(a) = self.attempts.remove(attempt_id) {
            self.emit("control", Body::LeaseReleased { schema_version: V, attempt_id: a.id, lease: a.lease }, Some(cause));
        }
    }

    pub(super) fn attempt_succeeded(&mut self, attempt_id: &str, output: Value, cause: &Str) {
        let Some(a) = self.attempts.get(attempt_id) else { return };
        let (node, id, attempt_no) = (a.node.clone(), a.id.clone(), a.attempt_no);
        let artifact = self.store(&output, &node, Some(cause));
        let done = self.emit("control", events::attempt_completed(&node, &id, attempt_no, artifact.clone()), Some(cause));
        self.release(attempt_id, &done);
        self.then(Effect::CompleteNode { name: node, output, status: NodeStatus::Completed, cause: done, known: Some(Box::new(artifact)) });
    }

    /// An attempt failed: recorded; then retried while attempts are left,
    /// else its node's visit fails.
    pub(super) fn attempt_failed(&mut self, attempt_id: &str, code: ErrorCode, message: &str, cause: &Str) {
        let Some((a, failed)) = self.record_attempt_failure(attempt_id, code, message, cause) else { return };
        let Some(node) = self.node(&a.node) else { return };
        if code.stops_the_run() {
            return;
        }
        if a.attempt_no < Self::max_attempts(&node) {
            self.then(Effect::StartAttempt { node, trigger: TriggerReason::Retry, cause: failed });
            return;
        }
        let event = code.event();
        self.then(Effect::NodeFailed { node: a.node, event, code, message: message.to_string(), cause: failed });
    }

    /// Records an attempt's failure and releases its lease: all that
    /// happens for a code that stops the run (budget exhausted, cancelled).
    pub(super) fn record_attempt_failure(
        &mut self,
        attempt_id: &str,
        code: ErrorCode,
        message: &str,
        cause: &Str,
    ) -> Option<(Attempt, Str)> {
        let a = self.attempts.get(attempt_id).cloned()?;
        let failed = self.emit("control", events::attempt_failed(&a.node, &a.id, a.attempt_no, code, message), Some(cause));
        self.release(attempt_id, &failed);
        Some((a, failed))
    }

    /// A node's visit failed: its handler for `event`, else `on_failure`,
    /// else the workflow's handler, else the run fails.
    pub(super) fn node_event_failed(&mut self, name: &str, event: HandlerEvent, code: ErrorCode, message: &str, cause: &Str) {
        let Some(node) = self.node(name) else { return };
        let held = || Effect::NodeFailed { node: name.to_string(), event, code, message: message.to_string(), cause: held() };
        if !self.admit(Obs::Failed(&node.name), "node_failed", cause, held) {
            return;
        }
        let failed = self.emit("control", events::node_failed(&node.name, code, message), Some(cause));
        if let Some(rt) = self.nodes.get_mut(&node.name) {
            rt.running = false;
        }
        let ctx = Ctx { node: Some(node.name.clone()), gate: None, event: event.into() };
        let program = self.program.clone();
        let index = self.index.clone();
        let wf = &program.workflows[self.wf_index];
        match semantics::failure_step(wf, &index, &node, event) {
            FailureStep::Handler { event: on } => {
                if let Some(action) = semantics::handler_on(&node.handlers, on).cloned() {
                    self.then(Effect::Act { action, ctx: Box::new(ctx), scope: HandlerScope::Node(node.name.clone()), cause: failed });
                }
                return;
            }
            FailureStep::OnFailure(on_failure) => {
                let action = Action::bare(on_failure.action());
                self.then(Effect::Act { action, ctx: Box::new(ctx), scope: HandlerScope::Node(node.name.clone()), cause: failed });
                return;
            }
            // A loop body's failure is the loop's.
            FailureStep::LoopHandler { loop_node } => {
                if let Some(action) = wf.nodes.get(loop_node).and_then(|l| semantics::handler_on(&l.handlers, HandlerEvent::Failure)) {
                    let ctx = Ctx { node: Some(loop_node.to_string()), gate: None, event: HandlerEvent::Failure.into() };
                    self.loops.remove(loop_node);
                    let action = action.clone();
                    self.then(Effect::Act { action, ctx: Box::new(ctx), scope: HandlerScope::Node(loop_node.to_string()), cause: failed });
                }
                return;
            }
            FailureStep::WorkflowHandler | FailureStep::Fail => {}
        }
        self.workflow_event(HandlerEvent::Failure, Some(&node.name), &failed, &format!("{}_failed", node.name), message);
    }

    pub(super) fn workflow_event(&mut self, event: HandlerEvent, node: Option<&str>, cause: &Str, default_reason: &str, message: &str) {
        let handler = semantics::handler_on(&self.wf().handlers, event).cloned();
        match handler {
            Some(action) => {
                let ctx = Ctx { node: node.map(str::to_string), gate: None, event: event.into() };
                self.then(Effect::Act { action, ctx: Box::new(ctx), scope: HandlerScope::Workflow, cause: cause.clone() })
            }
            None => {
                let (reason, message) = (default_reason.to_string(), Some(message.to_string()));
                self.then(Effect::Terminate { reason, status: TerminationStatus::Failure, cause: cause.clone(), message })
            }
        }
    }
}
