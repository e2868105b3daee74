//! Termination and the end of the trace: the reason against what caused
//! it, policies' verdicts, the report.

use super::*;

impl<'a> Checker<'a> {
    /// Keeps what a later `run_terminated` may follow from: the events
    /// whose kind implies a termination reason (an `end` node's completion,
    /// a handler's action, a failure, an exhausted budget, an escalation's
    /// decision), and where the last halting policy violation was.
    pub(super) fn remember_cause(&mut self, position: usize, e: &Event) {
        let keep = match &e.body {
            Body::NodeCompleted { node, .. } => self.plan.as_ref().and_then(|p| p.node(node)).is_some_and(|n| n.kind() == NodeKind::End),
            Body::ActionTaken { .. } | Body::NodeFailed { .. } | Body::BudgetExhausted { .. } => true,
            Body::DecisionApplied { subject, .. } => subject.starts_with("escalation."),
            Body::PolicyViolated { response, .. } => {
                if *response != flow_trace::PolicyResponse::Warn {
                    self.last_policy_stop = Some(position);
                }
                false
            }
            _ => false,
        };
        if keep {
            self.causes.insert(e.seq, (position, e.body.clone()));
        } else if !self.causes.is_empty() {
            // The latest event with a seq is the one a parent names.
            self.causes.remove(&e.seq);
        }
    }

    pub(super) fn termination(&mut self, i: usize, e: &Event, reason: &str, status: &str) {
        let seq = e.seq;
        // (A status that is not one of the five does not parse: T001.)
        let Some(plan) = &self.plan else { return };
        // What it follows from: its parent, else the event before it.
        let parent_seq =
            e.parent_event_id.as_deref().and_then(|p| p.rsplit_once('/')).and_then(|(_, n)| n.parse::<u64>().ok()).filter(|&p| p < seq);
        // Only causes that imply a reason were kept: any other cause
        // implies nothing to check.
        let cause_seq = match parent_seq {
            Some(p) => p,
            None => match self.previous {
                Some(previous) => previous,
                None => return,
            },
        };
        let Some((cause_at, cause)) = self.causes.get(&cause_seq).filter(|(at, _)| *at < i).map(|(at, b)| (*at, b.clone())) else {
            return;
        };
        let cause_kind = cause.kind();
        let cause = &cause;
        // A run monitor's halt (or block, or escalation) on the way fails
        // a run that would have ended as its cause says.
        let policy_stop = self.last_policy_stop.is_some_and(|at| at >= cause_at && at < i);
        // (reason, statuses) the cause implies; `None`: anything goes.
        let expected = implied_ending(plan, cause, reason);
        if let Some((want, statuses)) = expected {
            let cause_text = format!("{cause_kind} at seq {cause_seq}");
            if want != reason {
                self.push(
                    Deviation::new(
                        codes::TERMINATION,
                        Some(seq),
                        format!("the run terminated with reason `{reason}`, but it follows from {cause_text}"),
                    )
                    .expected(format!("reason {want}"))
                    .actual(format!("reason {reason}"))
                    .reason(reason),
                );
            } else if !(statuses.contains(&status) || (policy_stop && status == "failure")) {
                self.push(
                    Deviation::new(
                        codes::TERMINATION,
                        Some(seq),
                        format!("the run terminated with status `{status}`, but it follows from {cause_text}"),
                    )
                    .expected(format!("status {}", statuses.join(" or ")))
                    .actual(format!("status {status}"))
                    .reason(reason),
                );
            }
        }
    }

    pub(super) fn finish(mut self) -> Report {
        let terminated = self.run == RunPhase::Terminated;
        let last_seq = self.last.map(|(seq, _)| seq).unwrap_or(0);
        // A lasso witness (`flowc verify --witness-dir`): the run repeats its
        // last events forever, so an obligation still open is never met.
        let cycle = self.last.is_some_and(|(_, cycle)| cycle);
        let mut scopes: Vec<String> = self.budgets.keys().cloned().collect();
        scopes.sort();
        for scope in scopes {
            self.flush_overruns(&scope, "the trace ends without a budget_exhausted");
        }
        if self.count == 0 {
            self.push(Deviation::new(codes::RUN_LIFECYCLE, None, "the trace holds no events").expected("run_started …"));
        }
        let mut policies = Vec::new();
        for p in &mut self.policies {
            let (verdict, seq, owed) = match &mut p.monitor {
                None => ("error", None, None),
                Some(m) => match m.verdict() {
                    Verdict::Holds => ("holds", None, None),
                    Verdict::Violated { seq, at_end: false, .. } => ("violated", Some(seq), None),
                    Verdict::Violated { owed, at_end: true, .. } if terminated || cycle => ("violated", Some(last_seq), Some(owed)),
                    Verdict::Violated { owed, .. } => ("open", None, Some(owed)),
                },
            };
            policies.push(PolicyResult { name: p.name.clone(), scope: p.scope.clone(), response: p.response.clone(), verdict, seq, owed });
        }
        for p in &policies {
            if p.verdict != "violated" {
                continue;
            }
            let message = match &p.owed {
                Some(owed) if cycle => format!("policy `{}` is violated: the run cycles forever owing `{owed}`", p.name),
                Some(owed) => format!("policy `{}` is violated: the run terminated owing `{owed}`", p.name),
                None => format!("policy `{}` is violated at this event", p.name),
            };
            self.deviations.push(
                Deviation::new(codes::POLICY, p.seq, message).expected(format!("policy {} holds ({} scope)", p.name, p.scope)).actual(
                    match &p.owed {
                        Some(owed) => format!("open at the end: {owed}"),
                        None => "violated".to_string(),
                    },
                ),
            );
        }
        if policies.iter().any(|p| p.verdict == "open") {
            self.notes.push("the trace has not terminated: open policy obligations are not judged".into());
        }
        self.unchecked_notes();
        let integrity = self.seal();
        let state = match self.run {
            RunPhase::Terminated => "terminated",
            RunPhase::Paused => "paused",
            _ => "unfinished",
        };
        let workflow = self.workflow_started.take();
        let trace = TraceSummary {
            run_id: self.run_id.take(),
            workflow,
            plan_digest: self.started_digest.take(),
            lines: 0,
            events: self.count,
            state,
            reason: self.terminated.as_ref().map(|(r, _)| r.clone()),
            status: self.terminated.take().map(|(_, s)| s),
            integrity,
        };
        Report { conformant: self.deviations.is_empty(), trace, deviations: self.deviations, policies, notes: self.notes }
    }

    /// Notes on what could not be checked.
    fn unchecked_notes(&mut self) {
        if self.payloads_unchecked > 0 {
            self.notes.push(format!(
                "{} payload type(s) not checked: no artifact store (check a run directory to read its artifacts/)",
                self.payloads_unchecked
            ));
        }
        if self.computed_unchecked > 0 {
            self.notes.push(format!(
                "{} computed value(s) not made again: no artifact store (check a run directory to read its artifacts/)",
                self.computed_unchecked
            ));
        }
        if self.records_unchecked > 0 {
            self.notes.push(format!(
                "{} declared record(s) not made again: no artifact store (check a run directory to read its artifacts/)",
                self.records_unchecked
            ));
        }
        if self.plan.is_none() {
            self.notes.push("the trace names no workflow of the plan: only the envelope and the run's lifecycle were checked".into());
        }
    }
}

/// The termination reason and statuses a `cause` implies (`None`: anything
/// goes): an end node's, a handler action's ending, a node's failure, an
/// exhausted budget, a rejected escalation.
fn implied_ending(plan: &PlanView, cause: &Body, reason: &str) -> Option<(String, &'static [&'static str])> {
    match cause {
        Body::NodeCompleted { node, .. } => match plan.node(node).and_then(|n| Some((n, n.status()?))) {
            Some((n, status)) => {
                let want = n.target.first().cloned().unwrap_or_else(|| n.name.clone());
                // A success end under a false `success` condition, or
                // with a result not of the declared `output` type, fails.
                let statuses: &[&str] = match status {
                    TerminationStatus::Success if plan.wf.success().is_some() || plan.wf.output_type().is_some() => &["success", "failure"],
                    TerminationStatus::Success => &["success"],
                    TerminationStatus::Failure => &["failure"],
                    TerminationStatus::Partial => &["partial"],
                    TerminationStatus::Escalated => &["escalated"],
                    TerminationStatus::Cancelled => &["cancelled"],
                };
                Some((want, statuses))
            }
            None => None,
        },
        Body::ActionTaken { event, scope, action, .. } => {
            let gate_reason = scope.gate().and_then(|g| plan.wf.gates.get(g)).and_then(|g| g.reason());
            let ending = semantics::ending(action.name, action.arg(), gate_reason, event.as_str());
            ending.map(|(want, status)| (want, if status == TerminationStatus::Partial { &["partial"][..] } else { &["failure"][..] }))
        }
        Body::NodeFailed { node, .. } if reason.ends_with("_failed") => Some((format!("{node}_failed"), &["failure"][..])),
        Body::BudgetExhausted { .. } if reason == "budget_exhausted" => Some((reason.to_string(), &["failure"][..])),
        Body::DecisionApplied { subject, decision, .. } if subject.starts_with("escalation.") => {
            Some((format!("escalation_{decision}"), &["escalated"][..]))
        }
        _ => None,
    }
}
