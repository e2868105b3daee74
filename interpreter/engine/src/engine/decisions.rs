//! Human decisions: asked (one command per round), and applied by what they
//! decide (a gate, a human node, an escalation, a confirmation, a held
//! policy action, a reconciliation).

use super::*;
use flow_trace::Applied;

impl Engine {
    pub(super) fn ask(
        &mut self,
        decision: Decision,
        principals: Vec<String>,
        prompt: Option<String>,
        decisions: Vec<flow_trace::Decision>,
        cause: &Str,
    ) {
        let subject = decision.subject();
        let round = {
            let r = self.decision_rounds.entry(subject.clone()).or_default();
            *r += 1;
            *r
        };
        let expires_at = self.decision_timeout(&decision).map(|ms| crate::clock::rfc3339(self.now().saturating_add(ms)));
        let body = events::decision_requested(&self.program, &subject, principals.clone(), decisions.clone(), expires_at.clone());
        let requested = self.emit("control", body, Some(cause));
        for p in &principals {
            self.emit(
                "control",
                Body::Message {
                    schema_version: V,
                    message_type: MessageType::ApprovalRequest,
                    from: "control".into(),
                    to: p.clone(),
                    artifact: None,
                },
                Some(&requested),
            );
        }
        let key = CommandKey::Decision { subject: &subject, round }.to_key();
        self.waiting.insert(key.clone(), Waiting::Human { decision, request_event: requested.to_string(), expires_at });
        self.commands.push(Command {
            key,
            request: Request::Human(HumanRequest { subject, principals, prompt, decisions, round }),
            delay_ms: 0,
        });
    }

    /// How long a decision may take: its gate's or human node's `timeout`.
    fn decision_timeout(&self, decision: &Decision) -> Option<u64> {
        match decision {
            Decision::Gate { gate } => self.wf().gates.get(gate).and_then(|g| g.timeout_ms()),
            Decision::HumanNode { node } => self.node(node).and_then(|n| n.timeout_ms()),
            _ => None,
        }
    }

    /// When the decision `key` waits on times out (RFC 3339), if its
    /// subject has a `timeout`.
    pub fn decision_expires_at(&self, key: &str) -> Option<&str> {
        match self.waiting.by_key.get(key) {
            Some((_, _, Waiting::Human { expires_at, .. })) => expires_at.as_deref(),
            _ => None,
        }
    }

    /// Sets when the decision `key` times out: a resumed run keeps the
    /// instant its request recorded (the replay runs at a later time).
    pub fn restore_decision_expiry(&mut self, key: &str, at: &str) {
        if let Some((_, _, Waiting::Human { expires_at: Some(e), .. })) = self.waiting.by_key.get_mut(key) {
            *e = at.to_string();
        }
    }

    pub(super) fn on_decision(&mut self, decision: Decision, request_event: &str, answer: HumanAnswer) {
        let subject = decision.subject();
        let obs = Obs::Decided { subject: &subject, decision: answer.decision.as_str(), by: &answer.by };
        let held = || Effect::Decide {
            decision: Box::new(decision.clone()),
            request_event: request_event.to_string(),
            answer: Box::new(answer.clone()),
        };
        if !self.admit(obs, "decision_applied", &Str::from(request_event), held) {
            return;
        }
        match decision {
            Decision::Gate { gate } => self.decide_gate(&gate, &subject, answer, request_event),
            Decision::HumanNode { node } => self.decide_human_node(&node, &subject, answer, request_event),
            Decision::Escalation { ctx, .. } => {
                let action = if answer.decision == flow_trace::Decision::Approve {
                    Action { name: ActionKind::Continue, args: vec![] }
                } else {
                    Action { name: ActionKind::Terminate, args: vec![format!("escalation_{}", answer.decision)] }
                };
                let applied = self.record_applied(&subject, &answer, events::applied(&action), request_event);
                if answer.decision == flow_trace::Decision::Approve {
                    self.then_act(action, ctx, HandlerScope::Escalation, &applied);
                } else {
                    self.end_run(&format!("escalation_{}", answer.decision), TerminationStatus::Escalated, &applied, None);
                }
            }
            Decision::Confirm(call) => {
                let approved = answer.decision == flow_trace::Decision::Approve;
                let applied = self.record_applied(&subject, &answer, if approved { Applied::Call } else { Applied::Refuse }, request_event);
                let refused = "a human refused the call";
                if approved {
                    self.then(Effect::CallTool { call: Box::new(PendingCall { delay: 0, confirmed: true, ..call }), cause: applied });
                } else if call.agent.is_some() {
                    self.then(Effect::ToolRefused { attempt: call.attempt, tool: call.tool, message: refused.into(), cause: applied });
                } else {
                    self.fail_attempt(&call.attempt, ErrorCode::ConfirmationRefused, refused, &applied);
                }
            }
            Decision::Policy { held, .. } => {
                let approved = answer.decision == flow_trace::Decision::Approve;
                let applied = self.record_applied(
                    &subject,
                    &answer,
                    Applied::Action(if approved {
                        Action::bare(ActionKind::Continue)
                    } else {
                        Action { name: ActionKind::Terminate, args: vec!["policy_violation".into()] }
                    }),
                    request_event,
                );
                if approved {
                    // The held action happens, caused by the approval.
                    self.then(held.with_cause(&applied));
                } else {
                    self.end_run("policy_violation", TerminationStatus::Failure, &applied, None);
                }
            }
            Decision::Reconcile { attempt } => self.decide_reconcile(&attempt, &subject, answer, request_event),
            Decision::Append { board, node, next } => self.decide_append(&board, &node, next, answer, request_event),
            Decision::Judge { gate, index } => self.decide_judge(&gate, index, answer, request_event),
        }
    }

    /// A gate's decision: the action the gate maps it to, on the gate.
    /// A reconciliation's decision on a call whose outcome is unknown:
    /// `approve` with the call's output — it happened: the output is its
    /// result, and the attempt goes on; `approve` alone — run it again: the
    /// attempt is redone; `reject` — it did not happen: a failed call (the
    /// node's retries and failure handlers act).
    fn decide_reconcile(&mut self, attempt: &str, subject: &str, answer: HumanAnswer, request_event: &str) {
        let parked = self.unknown_calls.remove(attempt);
        let approve = answer.decision == flow_trace::Decision::Approve;
        let applied_as = match (approve, answer.output.is_some()) {
            (true, true) => Applied::Action(Action::bare(ActionKind::Continue)),
            (true, false) => Applied::Action(Action::bare(ActionKind::Retry)),
            (false, _) => Applied::Fail,
        };
        let applied = self.record_applied(subject, &answer, applied_as, request_event);
        let result = match (approve, answer.output) {
            (true, None) => {
                if let Some((node, expired)) = self.lose_attempt(attempt, &applied) {
                    self.then(Effect::StartAttempt { node, trigger: TriggerReason::Reconciled, cause: expired });
                }
                return;
            }
            (true, Some(output)) => ToolResult { ok: true, output: Some(output), ..ToolResult::default() },
            (false, _) => ToolResult {
                ok: false,
                error: Some("reconciled: the call did not happen".into()),
                error_code: Some(ErrorCode::UnknownOutcome),
                ..ToolResult::default()
            },
        };
        if let Some(Waiting::Tool { attempt, from_agent, scopes, reserved, started, tool }) = parked {
            self.on_tool(&attempt, from_agent, &scopes, &reserved, &started, &tool, result);
        }
    }

    fn decide_gate(&mut self, gate: &str, subject: &str, answer: HumanAnswer, request_event: &str) {
        let Some(g) = self.wf().gates.get(gate).cloned() else { return };
        let action = flow_check::semantics::gate_decision_action(&g, answer.decision);
        let applied = self.record_applied(subject, &answer, events::applied(&action), request_event);
        let ctx = Ctx { node: Some(g.from.clone()), gate: Some(gate.to_string()), event: answer.decision.event().into() };
        self.then_act(action, ctx, HandlerScope::Gate(gate.to_string()), &applied);
    }

    /// A human node's decision: its handler for it, if it has one (the
    /// decision is its output); else the node completes with the decision.
    fn decide_human_node(&mut self, node: &str, subject: &str, answer: HumanAnswer, request_event: &str) {
        let Some(n) = self.node(node) else { return };
        if answer.decision == flow_trace::Decision::Timeout {
            // No decision in time: the node fails with `timeout` (its
            // handler for it, else `on_failure`, …).
            let applied =
                self.record_applied(subject, &answer, flow_check::semantics::human_decision_applied(&n, answer.decision), request_event);
            let message = "no decision came within the node's timeout".to_string();
            let (code, event) = (ErrorCode::Timeout, HandlerEvent::Timeout);
            self.then(Effect::NodeFailed { node: node.to_string(), event, code, message, cause: applied });
            return;
        }
        let action = flow_check::semantics::human_decision_action(&n, answer.decision);
        let applied =
            self.record_applied(subject, &answer, flow_check::semantics::human_decision_applied(&n, answer.decision), request_event);
        if flow_check::semantics::handler_on(&n.handlers, answer.decision.event()).is_some() {
            self.env.insert(node.to_string(), json!({ "decision": answer.decision, "comment": answer.comment }));
            let ctx = Ctx { node: Some(node.to_string()), gate: None, event: answer.decision.event().into() };
            self.then_act(action, ctx, HandlerScope::Node(node.to_string()), &applied);
            return;
        }
        let mut output = json!({ "decision": answer.decision });
        if let Some(c) = answer.comment {
            output["comment"] = Value::String(c);
        }
        self.then_complete(node, output, NodeStatus::Completed, &applied);
    }
}
