//! One event: its envelope checked (schema, `seq`, ids), then handed to
//! the checks of its kind.

use super::*;

impl<'a> Checker<'a> {
    /// Checks the next event of the trace. Nothing of the event is kept
    /// beyond what the checks still need, so a trace can be checked as it
    /// is read.
    pub(super) fn event(&mut self, e: &Event) {
        let seq = e.seq;
        let position = self.count;
        self.count += 1;
        self.previous = self.last.map(|(s, _)| s);
        self.last = Some((seq, matches!(&e.body, Body::RunPaused { reason: flow_trace::PauseReason::Cycle, .. })));
        self.envelope(e);
        self.run_lifecycle(e);
        // The policy path: no allocation per event (the automaton caches steps).
        for policy in &mut self.policies {
            if let Some(m) = &mut policy.monitor {
                m.feed(seq, &e.body);
            }
        }
        self.remember_cause(position, e);
        self.before_event(seq, &e.body);
        match &e.body {
            Body::RunStarted { workflow, input, .. } if self.workflow_started.is_none() => self.first_start(workflow, input.as_ref()),
            Body::Computed { node, inputs, output, .. } => self.computed(seq, node, inputs, output),
            Body::Recorded { .. } => self.recorded(seq, &e.body),
            Body::RunTerminated { reason, status, .. } => {
                self.terminated = Some((reason.clone(), status.to_string()));
                self.termination(position, e, reason, status.as_str());
            }
            Body::NodeStarted { node, node_kind, visit, .. } => self.node_started(seq, node, *node_kind, *visit),
            Body::NodeCompleted { node, status, output, .. } => self.node_completed(seq, node, *status, output.as_ref()),
            Body::NodeFailed { node, error_code, .. } => self.node_failed(seq, node, *error_code),
            Body::AttemptStarted { node, attempt_id, attempt_no, .. } => self.attempt_started(seq, node, attempt_id, *attempt_no),
            Body::AttemptCompleted { node, attempt_id, .. } => self.attempt_ended(seq, node, attempt_id, None),
            Body::AttemptFailed { node, attempt_id, error_code, .. } => self.attempt_ended(seq, node, attempt_id, Some(*error_code)),
            Body::LeaseExpired { attempt_id, .. } => self.lease_expired(seq, attempt_id),
            Body::AgentTurn { agent, node, attempt_id, .. } => self.agent_turn(seq, agent, node, attempt_id),
            Body::ToolCallStarted { tool, node, attempt_id, agent, .. } => {
                self.in_attempt(seq, attempt_id, "a tool call");
                if let Some(a) = self.attempts.get_mut(attempt_id.as_str()) {
                    a.calls += 1;
                }
                self.tool_permitted(seq, tool, node, attempt_id, agent.as_deref());
            }
            Body::ToolCallCompleted { tool, attempt_id, .. } => self.tool_call_completed(seq, tool, attempt_id),
            Body::ToolCallRefused { attempt_id, .. } => self.in_attempt(seq, attempt_id, "a tool call refusal"),
            Body::EdgeTaken { from, to, via, .. } => self.edge_taken(seq, from, to, via),
            Body::DeadLetter { message_type, from, to, .. } => self.dead_letter(seq, *message_type, from, to),
            Body::Rerun { trigger, scope, entry, superseded, .. } => self.rerun_recorded(seq, *trigger, scope, entry, superseded),
            Body::Handoff { from, to, context, context_fields, payload, accepted, .. } => {
                self.handoff(seq, from, to, *context, context_fields, payload, *accepted)
            }
            Body::Delegation { from, to, contract, inputs, budget, reason, .. } => {
                self.delegation(seq, from, to, contract, inputs, budget, reason.as_deref())
            }
            Body::GateRecorded { gate, from, to, outcome, trigger, .. } => self.gate_recorded(seq, gate, from, to, *outcome, trigger),
            Body::DecisionRequested { subject, .. } => self.decision_requested(seq, subject, &e.body),
            Body::DecisionApplied { subject, decision, by, action, .. } if *decision == flow_trace::Decision::Timeout => {
                self.decision_timed_out(seq, subject, by, action, &e.time)
            }
            Body::DecisionApplied { subject, decision, by, action, .. } => self.decision_applied(seq, subject, *decision, by, action),
            // A gate's `decide` handler asks for a decision as REQUIRES_DECISION does.
            Body::ActionTaken { scope, action, .. } if action.name == ActionKind::Decide => {
                if let Some(gate) = scope.gate() {
                    slot(&mut self.gates, gate).awaiting = true;
                }
            }
            // A gate's `escalate(P)` handler asks P whether to go on: an
            // approve lets the boundary cross, as the engine crosses it.
            Body::ActionTaken { scope, action, .. } if action.name == ActionKind::Escalate => {
                if let (Some(gate), Some(p)) = (scope.gate(), action.arg()) {
                    self.escalations.insert(format!("escalation.{p}"), gate.to_string());
                }
            }
            Body::BudgetReserved { scope, attempt_id, amount, .. } => self.budget_reserved(seq, scope, attempt_id, amount),
            Body::BudgetSettled { scope, attempt_id, used, .. } => self.budget_settled(seq, scope, attempt_id, used),
            Body::BudgetExhausted { scope, .. } => self.budget_exhausted(scope),
            _ => {}
        }
        self.after_event(seq, &e.body);
    }

    /// The run's first `run_started`: its workflow and input.
    fn first_start(&mut self, workflow: &str, input: Option<&ArtifactRef>) {
        self.workflow_started = Some(workflow.to_string());
        self.run_input = input.map(|a| a.digest.clone());
    }

    /// What an event's kind's checks build on: a record it leaves owed,
    /// `calls` and `facts` as it changes them, a hop limit it raises.
    fn before_event(&mut self, seq: u64, body: &Body) {
        self.records_owed(seq, body);
        self.runtime_event(body);
        if let Body::ActionTaken { event, .. } = body {
            if event.as_str() == HandlerEvent::MaxHops.as_str() {
                self.hops_raised();
            }
        }
    }

    /// The checks that look at an event after its kind's own; the records
    /// a completion or a gate outcome owes.
    fn after_event(&mut self, seq: u64, body: &Body) {
        self.board_event(seq, body);
        self.consistency(seq, body);
        match body {
            Body::NodeCompleted { node, .. } => self.owe_records(node, false),
            Body::GateRecorded { gate, .. } => self.owe_records(gate, true),
            _ => {}
        }
    }

    pub(super) fn envelope(&mut self, e: &Event) {
        let seq = e.seq;
        // seq: 1, 2, 3 … in file order.
        if seq == self.next_seq {
            self.next_seq += 1;
        } else if seq > self.next_seq {
            // The first and last seq missing (malformed lines excepted),
            // found from each end: a jump to seq 10^9 costs no more than
            // one to seq 3.
            let first = (self.next_seq..seq).find(|s| !self.malformed.contains(s));
            let last = (self.next_seq..seq).rev().find(|s| !self.malformed.contains(s));
            if let (Some(first), Some(last)) = (first, last) {
                let range = if first == last { format!("{first}") } else { format!("{first}..{last}") };
                self.push(
                    Deviation::new(codes::SEQ, Some(seq), format!("seq jumps from {} to {seq}: {range} missing", self.next_seq - 1))
                        .expected(format!("seq {}", self.next_seq))
                        .actual(format!("seq {seq}")),
                );
            }
            self.next_seq = seq + 1;
        } else {
            self.push(
                Deviation::new(codes::SEQ, Some(seq), format!("seq {seq} comes after seq {}: repeated or out of order", self.next_seq - 1))
                    .expected(format!("seq {}", self.next_seq))
                    .actual(format!("seq {seq}")),
            );
        }
        let run_id = self.run_id.get_or_insert_with(|| e.run_id.to_string()).as_str();
        let other_run = *e.run_id != *run_id;
        // The parent is named under the run's first id.
        let parent_seq = e
            .parent_event_id
            .as_deref()
            .map(|parent| parent.strip_prefix(run_id).and_then(|r| r.strip_prefix('/')).and_then(|n| n.parse::<u64>().ok()));
        let run_id = if other_run || matches!(parent_seq, Some(None)) || parent_seq.flatten().is_some_and(|p| p < 1 || p >= seq) {
            run_id.to_string()
        } else {
            String::new()
        };
        if other_run {
            self.push(
                Deviation::new(codes::ENVELOPE, Some(seq), "the event belongs to another run")
                    .expected(format!("run_id {run_id}"))
                    .actual(format!("run_id {}", e.run_id)),
            );
        }
        let id_ok = e.event_id.strip_prefix(&*e.run_id).and_then(|r| r.strip_prefix('/')).and_then(|n| n.parse::<u64>().ok()) == Some(seq);
        if !id_ok {
            self.push(
                Deviation::new(codes::ENVELOPE, Some(seq), "event_id is not {run_id}/{seq}")
                    .expected(Event::id_for(&e.run_id, seq))
                    .actual(e.event_id.to_string()),
            );
        }
        if let (Some(parent), Some(parent_seq)) = (&e.parent_event_id, parent_seq) {
            match parent_seq {
                Some(p) if p >= 1 && p < seq => {}
                _ => self.push(
                    Deviation::new(codes::ENVELOPE, Some(seq), "parent_event_id does not name an earlier event of this run")
                        .expected(format!("{run_id}/N with N < {seq}"))
                        .actual(parent.to_string()),
                ),
            }
        }
    }
}
