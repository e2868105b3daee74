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

    pub(super) fn start_attempt(&mut self, node: &Node, trigger: TriggerReason, cause: &str) {
        if !self.running() {
            return;
        }
        if !self.take_step(node, cause) {
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
        };
        self.attempts.insert(id.clone(), attempt);
        let delay = Self::backoff(node, attempt_no);
        if node.kind == NodeKind::Agent {
            self.next_turn(&id, delay, &started);
        } else {
            self.tool_node_call(node, &id, delay, &started);
        }
    }

    pub(super) fn repair_or_fail(&mut self, attempt_id: &str, error: String, cause: &str) {
        let Some(a) = self.attempts.get_mut(attempt_id) else { return };
        if a.repair_left > 0 {
            a.repair_left -= 1;
            a.repair = Some(error);
            self.next_turn(attempt_id, 0, cause);
        } else {
            self.attempt_failed(attempt_id, ErrorCode::InvalidOutput, &error, cause);
        }
    }

    pub(super) fn release(&mut self, attempt_id: &str, cause: &str) {
        if let Some(a) = self.attempts.remove(attempt_id) {
            self.emit("control", Body::LeaseReleased { schema_version: V, attempt_id: a.id, lease: a.lease }, Some(cause));
        }
    }

    pub(super) fn attempt_succeeded(&mut self, attempt_id: &str, output: Value, cause: &str) {
        let Some(a) = self.attempts.get(attempt_id) else { return };
        let (node, id, attempt_no) = (a.node.clone(), a.id.clone(), a.attempt_no);
        let artifact = self.store(&output, &node, Some(cause));
        let done = self.emit("control", events::attempt_completed(&node, &id, attempt_no, artifact.clone()), Some(cause));
        self.release(attempt_id, &done);
        self.complete_node_as(&node, output, NodeStatus::Completed, &done, Some(artifact));
    }

    pub(super) fn attempt_failed(&mut self, attempt_id: &str, code: ErrorCode, message: &str, cause: &str) {
        let Some(a) = self.attempts.get(attempt_id).cloned() else { return };
        let failed = self.emit("control", events::attempt_failed(&a.node, &a.id, a.attempt_no, code, message), Some(cause));
        self.release(attempt_id, &failed);
        let Some(node) = self.node(&a.node) else { return };
        if code.stops_the_run() {
            return;
        }
        if a.attempt_no < Self::max_attempts(&node) {
            self.start_attempt(&node, TriggerReason::Retry, &failed);
            return;
        }
        self.node_event_failed(&node, code.event(), code, message, &failed);
    }

    pub(super) fn node_failed(&mut self, node: &Node, code: ErrorCode, message: &str, cause: &str) {
        self.node_event_failed(node, HandlerEvent::Failure, code, message, cause)
    }

    /// A node's visit failed: its handler for `event`, else `on_failure`,
    /// else the workflow's handler, else the run fails.
    pub(super) fn node_event_failed(&mut self, node: &Node, event: HandlerEvent, code: ErrorCode, message: &str, cause: &str) {
        let held = || Held::NodeFailed { node: node.name.clone(), event, code, message: message.to_string() };
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
        match semantics::failure_step(wf, &index, node, event) {
            FailureStep::Handler { event: on } => {
                if let Some(action) = semantics::handler_on(&node.handlers, on).cloned() {
                    self.act(&action, &ctx, HandlerScope::Node(node.name.clone()), &failed);
                }
                return;
            }
            FailureStep::OnFailure(on_failure) => {
                self.act(&Action::bare(on_failure.action()), &ctx, HandlerScope::Node(node.name.clone()), &failed);
                return;
            }
            // A loop body's failure is the loop's.
            FailureStep::LoopHandler { loop_node } => {
                if let Some(action) = wf.nodes.get(loop_node).and_then(|l| semantics::handler_on(&l.handlers, HandlerEvent::Failure)) {
                    let ctx = Ctx { node: Some(loop_node.to_string()), gate: None, event: HandlerEvent::Failure.into() };
                    self.loops.remove(loop_node);
                    self.act(action, &ctx, HandlerScope::Node(loop_node.to_string()), &failed);
                }
                return;
            }
            FailureStep::WorkflowHandler | FailureStep::Fail => {}
        }
        self.workflow_event(HandlerEvent::Failure, Some(&node.name), &failed, &format!("{}_failed", node.name), message);
    }

    pub(super) fn workflow_event(&mut self, event: HandlerEvent, node: Option<&str>, cause: &str, default_reason: &str, message: &str) {
        let handler = semantics::handler_on(&self.wf().handlers, event).cloned();
        match handler {
            Some(action) => {
                let ctx = Ctx { node: node.map(str::to_string), gate: None, event: event.into() };
                self.act(&action, &ctx, HandlerScope::Workflow, cause)
            }
            None => self.terminate(default_reason, TerminationStatus::Failure, cause, Some(message)),
        }
    }
}
