//! Policies as online monitors: `warn`/`halt` after an event is recorded,
//! `block`/`escalate` before it (a held action waits for a human).

use super::*;

/// Whether a policy's response (reference §8.4) acts before the offending
/// event is recorded: `block` (the event does not happen; the run stops)
/// and `escalate` (a human decides whether it happens). `warn` records it
/// and goes on; `halt` lets it happen and stops the run right after.
pub(super) fn acts_before(response: PolicyResponse) -> bool {
    matches!(response, PolicyResponse::Block | PolicyResponse::Escalate)
}

/// One policy's online monitor.
#[derive(Debug)]
pub(super) struct PolicyRt {
    pub(super) name: String,
    pub(super) response: PolicyResponse,
    /// Who is asked on escalate: the policy's `escalate_to`, else the workflow's.
    pub(super) escalate_to: Vec<String>,
    pub(super) description: Option<String>,
    pub(super) monitor: Monitor,
    /// A violation is reported once; a reported policy is no longer monitored.
    pub(super) reported: bool,
}

impl Engine {
    /// Feeds the event just recorded to every policy monitor. A `warn`
    /// policy it violated is reported and the run goes on; any other is
    /// reported and the run stops (`policy_violation`) before anything else
    /// is dispatched. (`block` and `escalate` policies act earlier, in
    /// [`Engine::admit`]; one reaching here is applied as `halt`.)
    pub(super) fn monitor_last(&mut self, event_id: &str) {
        let Some(event) = self.events.last() else { return };
        let Some(obs) = Obs::of(&event.body) else { return };
        let seq = event.seq;
        let mut violated: Vec<(usize, String)> = Vec::new();
        for (i, p) in self.policies.iter_mut().enumerate() {
            if p.reported {
                continue;
            }
            let before = p.monitor.state();
            if p.monitor.feed(seq, &event.body) {
                p.reported = true;
                violated.push((i, p.monitor.automaton.residual(before)));
            }
        }
        if violated.is_empty() {
            return;
        }
        let offending = event.body.kind();
        let what = obs_text(&obs);
        let mut stop = None;
        for (i, required) in violated {
            let declared = self.policies[i].response;
            let applied = if declared == PolicyResponse::Warn { PolicyResponse::Warn } else { PolicyResponse::Halt };
            let mut message = self.violation_message(i, &what, &required, "");
            if declared != applied {
                message.push_str(&format!(" (declared {}; applied as halt)", declared.as_str()));
            }
            let ev = self.report(i, applied, offending, message, None, event_id);
            if applied != PolicyResponse::Warn {
                stop = Some(ev);
            }
        }
        // At once: the run stops at the event that violated the policy, before
        // the step that recorded it records anything more.
        if let Some(ev) = stop {
            self.terminate("policy_violation", TerminationStatus::Failure, &ev, None);
        }
    }

    /// `block` and `escalate` policies act before the event `obs` is
    /// recorded: returns whether the action about to record it may go on.
    /// A `block` policy it would violate is reported and the run stops
    /// (`policy_blocked`): the event never happens. Otherwise an `escalate`
    /// policy it would violate is reported and its principals are asked;
    /// the action is `held` until they answer (approve: it happens;
    /// reject: the run stops with `policy_violation`).
    pub(super) fn admit(&mut self, obs: Obs<'_>, offending: &'static str, cause: &Str, held: impl FnOnce() -> Effect) -> bool {
        if !self.running() {
            return false;
        }
        if self.policies.is_empty() {
            return true;
        }
        let mut blocked: Vec<(usize, String)> = Vec::new();
        let mut escalated: Option<(usize, String)> = None;
        for (i, p) in self.policies.iter_mut().enumerate() {
            if p.reported || !acts_before(p.response) {
                continue;
            }
            let now = p.monitor.state();
            let automaton = &mut p.monitor.automaton;
            let mask = automaton.mask(&obs);
            if !Automaton::is_false(automaton.step(now, mask)) {
                continue;
            }
            let required = automaton.residual(now);
            match p.response {
                PolicyResponse::Block => blocked.push((i, required)),
                _ => {
                    escalated.get_or_insert((i, required));
                }
            }
        }
        if !blocked.is_empty() {
            let what = obs_text(&obs);
            let mut last = cause.clone();
            for (i, required) in blocked {
                let message = self.violation_message(i, &what, &required, ": blocked, it did not happen");
                last = self.report(i, PolicyResponse::Block, offending, message, None, cause);
            }
            self.end_run("policy_blocked", TerminationStatus::Failure, &last, None);
            return false;
        }
        if let Some((i, required)) = escalated {
            let message = self.violation_message(i, &obs_text(&obs), &required, ": held for a decision");
            let ev = self.report(i, PolicyResponse::Escalate, offending, message.clone(), None, cause);
            let policy = self.policies[i].name.clone();
            let principals = self.policies[i].escalate_to.clone();
            self.then(Effect::Ask {
                decision: Box::new(Decision::Policy { policy, held: Box::new(held()) }),
                principals,
                prompt: Some(message),
                decisions: vec![flow_trace::Decision::Approve, flow_trace::Decision::Reject],
                cause: ev,
            });
            return false;
        }
        true
    }

    pub(super) fn violation_message(&self, i: usize, what: &str, required: &str, tail: &str) -> String {
        let p = &self.policies[i];
        let mut message = format!("{what} violates `{}`, which required {required}{tail}", p.name);
        if let Some(d) = &p.description {
            message.push_str(&format!(" ({d})"));
        }
        message
    }

    /// Records a policy violation (once per policy).
    pub(super) fn report(
        &mut self,
        i: usize,
        response: PolicyResponse,
        offending: &str,
        message: String,
        owed: Option<String>,
        parent: &str,
    ) -> Str {
        self.policies[i].reported = true;
        let policy = self.policies[i].name.clone();
        let parent = self.envelope.parent(parent);
        self.emit(
            "control",
            Body::PolicyViolated { schema_version: V, policy, response, offending: offending.to_string(), message, owed },
            Some(&parent),
        )
    }

    /// Policies violated by the termination `reason` itself, or owing an
    /// obligation it leaves open, reported as the run ends: a run that
    /// would have succeeded (or returned a partial result) fails unless they
    /// only warn. Gives the status the run ends with.
    pub(super) fn report_at_end(&mut self, reason: &str, status: TerminationStatus, cause: &Str) -> TerminationStatus {
        let mut status = status;
        for i in 0..self.policies.len() {
            let p = &mut self.policies[i];
            if p.reported {
                continue;
            }
            let now = p.monitor.state();
            let automaton = &mut p.monitor.automaton;
            let mask = automaton.mask(&Obs::Terminated(reason));
            let next = automaton.step(now, mask);
            let (offending, owed, message) = if Automaton::is_false(next) {
                let required = automaton.residual(now);
                ("run_terminated", None, self.violation_message(i, &format!("terminated({reason})"), &required, ""))
            } else if !automaton.accepts_end(next) {
                let owed = automaton.residual(next);
                let mut message = format!("the run ended with `{}` still owing {owed}", p.name);
                if let Some(d) = &p.description {
                    message.push_str(&format!(" ({d})"));
                }
                ("end", Some(owed), message)
            } else {
                continue;
            };
            let response = self.policies[i].response;
            if response != PolicyResponse::Warn && matches!(status, TerminationStatus::Success | TerminationStatus::Partial) {
                status = TerminationStatus::Failure;
            }
            self.report(i, response, offending, message, owed, cause);
        }
        status
    }
}

impl PolicyRt {
    /// One monitor per policy that applies to `wf`: the program's, then the
    /// workflow's.
    pub(super) fn monitors(program: &Program, wf: &Workflow) -> Result<Vec<PolicyRt>, String> {
        let mut policies = Vec::new();
        for policy in program.policies.iter().chain(&wf.policies) {
            let automaton = Automaton::new(&policy.formula).map_err(|e| format!("policy `{}`: {e}", policy.name))?;
            let mut escalate_to = policy.escalate_to();
            if escalate_to.is_empty() {
                escalate_to = wf.escalate_to();
            }
            policies.push(PolicyRt {
                name: policy.name.clone(),
                response: policy.response(),
                escalate_to,
                description: policy.description().map(str::to_string),
                monitor: Monitor::new(automaton),
                reported: false,
            });
        }
        Ok(policies)
    }
}

/// What an event says, written as the atom that would describe it.
pub(super) fn obs_text(obs: &Obs) -> String {
    match obs {
        Obs::Started(n) => format!("started({n})"),
        Obs::Completed(n) => format!("completed({n})"),
        Obs::Failed(n) => format!("failed({n})"),
        Obs::Called { tool, by: None } => format!("called({tool})"),
        Obs::Called { tool, by: Some(a) } => format!("called({tool}, by: {a})"),
        Obs::Refused { tool, by: None } => format!("refused({tool})"),
        Obs::Refused { tool, by: Some(a) } => format!("refused({tool}, by: {a})"),
        Obs::HandedOff { from, to } => format!("handed_off({from}, {to})"),
        Obs::Outcome { gate, outcome } => format!("outcome({gate}, {outcome})"),
        Obs::Decided { subject, decision, by } => format!("decided({subject}, {decision}) by {by}"),
        Obs::Zone(z) => format!("zone({z})"),
        Obs::Terminated(r) => format!("terminated({r})"),
        Obs::Recorded(r) => format!("recorded({r})"),
    }
}
