//! Resume, cancellation, heartbeats and pauses.

use super::*;

impl Engine {
    /// Called when a resumed run has replayed its journal: commands that
    /// were issued but never answered lost their executor. Their leases
    /// expire and they are issued again, except non-idempotent tool calls,
    /// whose outcome is unknown: those go to reconciliation.
    pub fn recover(&mut self, after_seq: u64, answered: &[String]) {
        self.at_one_instant(|engine| engine.recover_at(after_seq, answered))
    }

    pub(super) fn recover_at(&mut self, after_seq: u64, answered: &[String]) {
        if !self.running() {
            return;
        }
        let resumed = self.emit("control", Body::RunResumed { schema_version: V, after_seq }, None);
        let lost = self.waiting.entries();
        for (key, issued_at, waiting) in lost {
            // Answered already, or issued by a step the journal did not
            // hold whole (so never dispatched): it goes out now. (A command
            // issued outside a step has no seq: it may have gone out.)
            if answered.contains(&key) || (issued_at != u64::MAX && issued_at > after_seq) {
                continue;
            }
            match waiting {
                // Questions and probes are not lost: the driver issues them
                // again under the same key.
                Waiting::Human { .. } | Waiting::Probe { .. } | Waiting::Judge { .. } => {}
                Waiting::Turn { attempt, .. } => {
                    self.then(Effect::Expire { key, attempt, unknown_tool: None, cause: resumed.clone() });
                }
                // A pure builtin's call had no effect: it is asked again.
                Waiting::Tool { tool, .. } if self.decl(&tool).is_some_and(flow_check::semantics::is_pure_builtin) => {}
                Waiting::Tool { attempt, tool, .. } => {
                    let non_idempotent = self.decl(&tool).is_some_and(|d| d.effect() == view::Effect::NonIdempotent);
                    let unknown_tool = non_idempotent.then_some(tool);
                    self.then(Effect::Expire { key, attempt, unknown_tool, cause: resumed.clone() });
                }
            }
        }
    }

    /// A lost command's attempt expires and is issued again; a
    /// non-idempotent tool call whose outcome is unknown is put aside and
    /// reconciled by a human instead.
    pub(super) fn expire(&mut self, key: &str, attempt_id: &str, cause: &Str, unknown_tool: Option<String>) {
        let waiting = self.waiting.remove(key);
        if let (Some(tool), Some(waiting)) = (unknown_tool, waiting) {
            self.reconcile(attempt_id, tool, waiting, cause);
            return;
        }
        if let Some((node, expired)) = self.lose_attempt(attempt_id, cause) {
            self.then(Effect::StartAttempt { node, trigger: TriggerReason::LeaseExpired, cause: expired });
        }
    }

    /// The attempt's lease expires (recorded) and it is redone from its
    /// start: its turns do not count (the redo's are the node's same
    /// turns), and to the data plane the redo is the attempt that was lost.
    /// Gives its node and the `lease_expired` event.
    pub(super) fn lose_attempt(&mut self, attempt_id: &str, cause: &Str) -> Option<(NodeRef, Str)> {
        let a = self.attempts.remove(attempt_id)?;
        let expired = self.emit("control", Body::LeaseExpired { schema_version: V, attempt_id: a.id.clone(), lease: a.lease }, Some(cause));
        if let Some(turns) = self.node_turns.get_mut(&a.node) {
            *turns = turns.saturating_sub(a.turn);
        }
        if let Some(rt) = self.nodes.get_mut(&a.node) {
            rt.lost += 1;
        }
        Some((self.node(&a.node)?, expired))
    }

    /// A non-idempotent call that may or may not have happened: put aside
    /// (its attempt stays open) and asked of the workflow's `escalate_to`.
    fn reconcile(&mut self, attempt_id: &str, tool: String, waiting: Waiting, cause: &Str) {
        let key = format!("{}:{}", self.cfg.run_id, attempt_id);
        let body = Body::ReconciliationRequired { schema_version: V, attempt_id: attempt_id.to_string(), tool, idempotency_key: key };
        let rec = self.emit("control", body, Some(cause));
        self.unknown_calls.insert(attempt_id.to_string(), waiting);
        let deciders = self.wf().escalate_to();
        self.then(Effect::Ask {
            decision: Box::new(Decision::Reconcile { attempt: attempt_id.to_string() }),
            principals: deciders,
            prompt: Some(
                "The call may or may not have happened: approve to run it again, approve with its output if it happened, reject if it did not (a failed call)".into(),
            ),
            decisions: vec![flow_trace::Decision::Approve, flow_trace::Decision::Reject],
            cause: rec,
        });
    }

    /// Cancels the run: the workflow's `cancelled` handler, else the run
    /// terminates as `cancelled`. Nothing more is dispatched either way.
    pub fn cancel(&mut self) {
        self.at_one_instant(Engine::cancel_at)
    }

    pub(super) fn cancel_at(&mut self) {
        if !self.running() {
            return;
        }
        let ev = self.emit("control", events::warning(events::CANCELLED.into()), None);
        let ids: Vec<String> = self.attempts.keys().cloned().collect();
        // (A cancelled attempt stops the run: its failure is recorded, nothing follows.)
        for id in ids {
            self.record_attempt_failure(&id, ErrorCode::Cancelled, "the run was cancelled", &ev);
        }
        self.waiting.clear();
        self.commands.clear();
        let handler = semantics::handler_on(&self.wf().handlers, HandlerEvent::Cancelled).cloned();
        match handler {
            Some(action)
                if !matches!(
                    action.name,
                    ActionKind::Continue
                        | ActionKind::Retry
                        | ActionKind::Goto
                        | ActionKind::Activate
                        | ActionKind::Revise
                        | ActionKind::Replan
                ) =>
            {
                let ctx = Ctx { node: None, gate: None, event: HandlerEvent::Cancelled.into() };
                self.then_act(action, ctx, HandlerScope::Workflow, &ev);
            }
            _ => {}
        }
        self.end_run("cancelled", TerminationStatus::Cancelled, &ev, None);
    }

    /// Renews the lease of every attempt still running.
    pub fn heartbeat(&mut self) {
        if !self.running() {
            return;
        }
        let mut ids: Vec<(String, String, Str)> =
            self.attempts.values().map(|a| (a.id.clone(), a.lease.clone(), a.started.clone())).collect();
        ids.sort();
        let expires = rfc3339(self.now() + self.cfg.lease_ttl_ms);
        for (id, lease, started) in ids {
            self.emit(
                "control",
                Body::LeaseHeartbeat { schema_version: V, attempt_id: id, lease, expires_at: expires.clone() },
                Some(&started),
            );
        }
    }

    /// Pauses the run: every outstanding command is a question for a human
    /// and nobody can answer now.
    pub fn pause(&mut self, waiting_on: &str) {
        if !self.running() {
            return;
        }
        let reason = if CommandKey::parse(waiting_on).and_then(|k| k.subject()).is_some_and(|s| s.starts_with("reconcile.")) {
            PauseReason::ReconciliationRequired
        } else {
            PauseReason::AwaitingDecision
        };
        self.emit("control", events::run_paused(reason, waiting_on.to_string()), None);
        self.status = RunStatus::Paused { reason, waiting_on: waiting_on.to_string() };
    }

    /// Undoes a pause when a resumed run replays it (the pause was only
    /// this execution's stop).
    pub fn unpause(&mut self) {
        if matches!(self.status, RunStatus::Paused { .. }) {
            self.status = RunStatus::Running;
        }
    }
}
