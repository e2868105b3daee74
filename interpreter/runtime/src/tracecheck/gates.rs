//! Gates and decisions: crossings, triggers, deciders, applied actions
//! (T02x/T04x).

use super::*;

impl<'a> Checker<'a> {
    pub(super) fn gate_recorded(&mut self, seq: u64, gate: &str, from: &str, to: &str, outcome: Outcome, trigger: &str) {
        let Some(plan) = &self.plan else { return };
        let Some(g) = plan.wf.gates.get(gate) else {
            self.push(
                Deviation::new(codes::GATE_NOT_PASSED, Some(seq), format!("workflow `{}` declares no gate `{gate}`", plan.wf.name))
                    .actual(format!("gate_recorded {gate} {outcome}"))
                    .gate(gate),
            );
            return;
        };
        let mut found = Vec::new();
        if g.from != from || g.to != to {
            found.push(
                Deviation::new(codes::GATE_NOT_PASSED, Some(seq), format!("gate `{gate}` recorded on another boundary"))
                    .expected(format!("{} -> {}", g.from, g.to))
                    .actual(format!("{from} -> {to}"))
                    .gate(gate),
            );
        }
        // The trigger: whoever ran `from`.
        let who = trigger.split_once(" on ").map(|(w, _)| w).unwrap_or(trigger);
        let who = who.split_once('.').map(|(_, n)| n).unwrap_or(who);
        let runner = plan.agent_of(&g.from).unwrap_or("control");
        if who != runner {
            found.push(
                Deviation::new(
                    codes::GATE_TRIGGER,
                    Some(seq),
                    format!("gate `{gate}` triggered by `{who}`, but `{}` is run by `{runner}`", g.from),
                )
                .expected(if runner == "control" { "control".to_string() } else { format!("agent.{runner}") })
                .actual(trigger.to_string())
                .gate(gate)
                .node(&g.from),
            );
        }
        if let Some(trigger) = g.trigger() {
            let by = trigger.by;
            if !by.is_empty() && outcome != Outcome::Block && !plan.expand_principals(&by).contains(who) {
                found.push(
                    Deviation::new(
                        codes::GATE_TRIGGER,
                        Some(seq),
                        format!("gate `{gate}` recorded {outcome} on a trigger by `{who}`, who may not trigger it"),
                    )
                    .expected(format!("a trigger by one of [{}], or BLOCK", by.join(", ")))
                    .actual(format!("{outcome} triggered by {who}"))
                    .gate(gate),
                );
            }
        }
        self.deviations.append(&mut found);
        let rt = slot(&mut self.gates, gate);
        rt.open = outcome == Outcome::Pass;
        rt.awaiting = outcome == Outcome::RequiresDecision;
    }

    pub(super) fn decision_requested(&mut self, seq: u64, subject: &str, request: &Body) {
        // The request goes where the plan says its deciders are reached.
        if let Body::DecisionRequested { deciders, contacts, .. } = request {
            let planned = flow_check::semantics::contacts(self.program, deciders);
            if &planned != contacts {
                self.push(
                    Deviation::new(
                        codes::DECIDER,
                        Some(seq),
                        format!("the decision on `{subject}` was sent elsewhere than its deciders' contacts"),
                    )
                    .expected(format!("contacts [{}]", planned.join(", ")))
                    .actual(format!("contacts [{}]", contacts.join(", ")))
                    .gate(subject),
                );
            }
        }
        if self.pending_decisions.insert(subject.to_string(), request.clone()).is_some() {
            self.push(
                Deviation::new(
                    codes::DECISION_UNREQUESTED,
                    Some(seq),
                    format!("a second decision was requested on `{subject}` before the first was answered"),
                )
                .gate(subject),
            );
        }
    }

    /// A decision that timed out: recorded by `control`, on a subject that
    /// declares a `timeout`, not before its request's deadline, and
    /// applied as the plan says.
    pub(super) fn decision_timed_out(&mut self, seq: u64, subject: &str, by: &str, action: &flow_trace::Applied, time: &str) {
        let decision = flow_trace::Decision::Timeout;
        let request = self.pending_decisions.remove(subject);
        let mut found = self.applied_as_planned(seq, subject, decision, action);
        let unrequested = |why: String| {
            Deviation::new(codes::DECISION_UNREQUESTED, Some(seq), why)
                .actual(format!("decision_applied {subject} timeout by {by}"))
                .gate(subject)
        };
        match &request {
            Some(Body::DecisionRequested { expires_at: Some(at), .. }) if time < at.as_str() && !time.is_empty() => {
                found.push(unrequested(format!("the decision on `{subject}` timed out at {time}, before its deadline {at}")))
            }
            Some(_) => {}
            None => found.push(unrequested(format!("decision `timeout` on `{subject}` without a pending request"))),
        }
        if let Some(plan) = &self.plan {
            if flow_check::semantics::decision_timeout_ms(plan.wf, subject).is_none() {
                found.push(unrequested(format!("`{subject}` declares no `timeout`, yet its decision timed out")));
            }
        }
        if by != "control" {
            found.push(
                Deviation::new(codes::DECIDER, Some(seq), format!("a timeout on `{subject}` is recorded by `control`, not `{by}`"))
                    .expected("by control".to_string())
                    .actual(format!("by {by}"))
                    .gate(subject),
            );
        }
        if self.plan.as_ref().is_some_and(|p| p.wf.gates.contains_key(subject)) {
            let rt = slot(&mut self.gates, subject);
            rt.awaiting = false;
            rt.open = false;
        }
        self.deviations.append(&mut found);
    }

    pub(super) fn decision_applied(
        &mut self,
        seq: u64,
        subject: &str,
        decision: flow_trace::Decision,
        by: &str,
        action: &flow_trace::Applied,
    ) {
        let request = self.pending_decisions.remove(subject);
        let mut found = self.applied_as_planned(seq, subject, decision, action);
        let is_gate = self.plan.as_ref().is_some_and(|p| p.wf.gates.contains_key(subject));
        found.extend(self.applied_as_requested(seq, subject, decision, by, request.as_ref()));
        if let Some(plan) = &self.plan {
            let planned = plan.deciders_of(subject);
            if !planned.is_empty() && !plan.expand_principals(&planned).contains(by) {
                found.push(
                    Deviation::new(codes::DECIDER, Some(seq), format!("`{by}` may not decide on `{subject}`"))
                        .expected(format!("one of [{}]", planned.join(", ")))
                        .actual(format!("by {by}"))
                        .gate(subject),
                );
            }
        }
        if is_gate {
            let rt = slot(&mut self.gates, subject);
            if !rt.awaiting {
                found.push(
                    Deviation::new(
                        codes::DECISION_UNREQUESTED,
                        Some(seq),
                        format!("gate `{subject}` got a decision without recording REQUIRES_DECISION"),
                    )
                    .expected(format!("gate_recorded {subject} REQUIRES_DECISION (or its `decide` handler) before a decision"))
                    .gate(subject),
                );
            }
            rt.awaiting = false;
            rt.open = decision == flow_trace::Decision::Approve;
        }
        if let Some(gate) = self.escalations.remove(subject) {
            slot(&mut self.gates, &gate).open = decision == flow_trace::Decision::Approve;
        }
        self.deviations.append(&mut found);
    }

    /// The action a decision was applied as, against the plan's (a gate's
    /// or a human node's mapping of decisions to actions).
    fn applied_as_planned(&self, seq: u64, subject: &str, decision: flow_trace::Decision, action: &flow_trace::Applied) -> Vec<Deviation> {
        let mut found = Vec::new();
        if let Some(plan) = &self.plan {
            let planned = match (plan.wf.gates.get(subject), plan.wf.nodes.get(subject)) {
                (Some(gate), _) => Some(flow_trace::Applied::Action(flow_check::semantics::gate_decision_action(gate, decision))),
                (None, Some(node)) if node.kind() == NodeKind::Human => Some(flow_check::semantics::human_decision_applied(node, decision)),
                _ if flow_check::semantics::judge_decl(self.program, plan.wf, subject).is_some() => {
                    let decl = flow_check::semantics::judge_decl(self.program, plan.wf, subject).expect("a judge");
                    Some(flow_trace::Applied::Judged(flow_check::semantics::judge_verdict(decl, decision)))
                }
                _ if flow_check::semantics::board_of_subject(subject).is_some() => {
                    Some(flow_check::semantics::board_decision_applied(decision))
                }
                _ => None,
            };
            if let Some(planned) = planned.filter(|a| a != action) {
                found.push(
                    Deviation::new(
                        codes::DECISION_ACTION,
                        Some(seq),
                        format!("decision `{decision}` on `{subject}` was applied as `{action}`, but the plan says `{planned}`"),
                    )
                    .expected(planned.to_string())
                    .actual(action.to_string())
                    .gate(subject),
                );
            }
        }
        found
    }

    /// A decision against its request: one of the decisions offered, by
    /// one of the deciders asked.
    fn applied_as_requested(
        &self,
        seq: u64,
        subject: &str,
        decision: flow_trace::Decision,
        by: &str,
        request: Option<&Body>,
    ) -> Vec<Deviation> {
        let mut found = Vec::new();
        match request {
            Some(Body::DecisionRequested { deciders, decisions, .. }) => {
                if !decisions.is_empty() && !decisions.contains(&decision) {
                    found.push(
                        Deviation::new(
                            codes::DECISION_UNREQUESTED,
                            Some(seq),
                            format!("decision `{decision}` on `{subject}` was not one of those offered"),
                        )
                        .expected(format!("one of [{}]", decisions.iter().map(|d| d.as_str()).collect::<Vec<_>>().join(", ")))
                        .actual(decision.to_string())
                        .gate(subject),
                    );
                }
                if !deciders.is_empty() {
                    let allowed = match &self.plan {
                        Some(p) => p.expand_principals(deciders),
                        None => deciders.iter().cloned().collect(),
                    };
                    if !allowed.contains(by) {
                        found.push(
                            Deviation::new(
                                codes::DECIDER,
                                Some(seq),
                                format!("`{by}` decided on `{subject}`, but the request asked [{}]", deciders.join(", ")),
                            )
                            .expected(format!("one of [{}]", deciders.join(", ")))
                            .actual(format!("by {by}"))
                            .gate(subject),
                        );
                    }
                }
            }
            _ => found.push(
                Deviation::new(
                    codes::DECISION_UNREQUESTED,
                    Some(seq),
                    format!("decision `{decision}` on `{subject}` without a pending request"),
                )
                .expected(format!("decision_requested {subject} before decision_applied"))
                .actual(format!("decision_applied {subject} {decision}"))
                .gate(subject),
            ),
        }
        found
    }
}
