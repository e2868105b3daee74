//! Consistency an edit of a trace breaks: a gate's outcome is the most
//! severe of its evaluators' and is recorded after its `from` node
//! completed, and the handler that follows is the one for that outcome
//! (T026); task states move along their machine (T014); turns come from a
//! declared provider (T027); a settlement's `remaining` is what the limits
//! leave of the use so far (T041); a turn's input and output tokens sum to
//! its usage (T042).

use super::*;

impl<'a> Checker<'a> {
    /// The checks of this module that `event` is subject to.
    pub(super) fn consistency(&mut self, seq: u64, body: &Body) {
        match body {
            Body::GateRecorded { gate, from, outcome, evaluators, .. } => self.gate_evaluated(seq, gate, from, *outcome, evaluators),
            Body::ActionTaken { event, scope, .. } => {
                if let Some(gate) = scope.gate() {
                    self.gate_handled(seq, gate, event.as_str());
                }
            }
            Body::StateChanged { node, machine, from, to, .. } => self.state_changed(seq, node, machine, from, to),
            Body::AgentTurn { provider, attempt_id, usage, input_tokens, output_tokens, .. } => {
                self.turn_provider(seq, provider, attempt_id);
                self.turn_usage(seq, attempt_id, usage.tokens, *input_tokens, *output_tokens);
            }
            Body::BudgetSettled { scope, attempt_id, remaining, .. } => self.remaining_settled(seq, scope, attempt_id, remaining),
            _ => {}
        }
    }

    fn gate_evaluated(&mut self, seq: u64, gate: &str, from: &str, outcome: Outcome, evaluators: &[flow_trace::EvaluatorResult]) {
        let evaluated = evaluators.iter().map(|e| e.outcome).fold(Outcome::Pass, Outcome::max);
        if evaluated != outcome {
            let results: Vec<String> = evaluators.iter().map(|e| format!("{}: {}", e.evaluator, e.outcome)).collect();
            self.push(
                Deviation::new(
                    codes::GATE_EVALUATION,
                    Some(seq),
                    format!("gate `{gate}` recorded {outcome}, but its evaluators give {evaluated}"),
                )
                .expected(format!("{evaluated} (the most severe of [{}])", results.join(", ")))
                .actual(outcome.to_string())
                .gate(gate),
            );
        }
        if let Some(e) = evaluators.iter().find(|e| e.error && e.outcome == Outcome::Pass) {
            self.push(
                Deviation::new(
                    codes::GATE_EVALUATION,
                    Some(seq),
                    format!("evaluator `{}` of gate `{gate}` errored, yet PASSed", e.evaluator),
                )
                .expected("the gate's on_error, never PASS")
                .gate(gate),
            );
        }
        if !self.nodes.get(from).is_some_and(|n| n.completed_once) {
            self.push(
                Deviation::new(codes::GATE_EVALUATION, Some(seq), format!("gate `{gate}` was recorded before `{from}` ever completed"))
                    .expected(format!("node_completed {from} first"))
                    .gate(gate)
                    .node(from),
            );
        }
        self.gate_outcomes.insert(gate.to_string(), outcome);
    }

    /// A gate's handler for an outcome follows that outcome.
    fn gate_handled(&mut self, seq: u64, gate: &str, event: &str) {
        let Some(handled) = Outcome::ALL.iter().copied().find(|o| o.as_str() == event) else { return };
        let recorded = self.gate_outcomes.get(gate).copied();
        if recorded != Some(handled) {
            let actual = recorded.map_or("no outcome".to_string(), |o| o.to_string());
            self.push(
                Deviation::new(
                    codes::GATE_EVALUATION,
                    Some(seq),
                    format!("gate `{gate}`'s handler for {handled} ran, but the gate recorded {actual}"),
                )
                .expected(format!("the handler for {actual}"))
                .actual(format!("on {handled}"))
                .gate(gate),
            );
        }
    }

    fn state_changed(&mut self, seq: u64, node: &str, machine: &str, from: &str, to: &str) {
        let Some(m) = self.program.machines.get(machine) else {
            self.push(Deviation::new(codes::STATE, Some(seq), format!("the plan has no state machine `{machine}`")).node(node));
            return;
        };
        let current = self.task_states.get(machine).cloned().unwrap_or_else(|| m.initial.clone());
        let declared = self.plan.as_ref().and_then(|p| p.wf.nodes.get(node)).and_then(|n| n.state());
        let mut problems = Vec::new();
        if declared != Some((machine, to)) {
            let expected = declared.map_or("no state".to_string(), |(m, s)| format!("{m}.{s}"));
            problems.push((format!("`{node}` moves its task to {machine}.{to}, but declares {expected}"), expected));
        }
        if from != current {
            problems.push((format!("{machine} is in {current}, not {from}"), format!("from {current}")));
        }
        if !m.states.iter().any(|s| s == to) || (from != to && !m.transitions.iter().any(|(a, b)| a == from && b == to)) {
            problems.push((format!("{machine} has no transition {from} -> {to}"), "a transition of the machine".to_string()));
        }
        for (message, expected) in problems {
            self.push(
                Deviation::new(codes::STATE, Some(seq), message).expected(expected).actual(format!("{machine}: {from} -> {to}")).node(node),
            );
        }
        self.task_states.insert(machine.to_string(), to.to_string());
    }

    fn turn_provider(&mut self, seq: u64, provider: &str, attempt_id: &str) {
        let declared = self.program.decls.get(provider).is_some_and(|d| d.kind == Kind::Provider);
        if !declared {
            self.push(
                Deviation::new(codes::PROVIDER, Some(seq), format!("a turn answered by `{provider}`, which the plan does not declare"))
                    .expected("a provider of the plan")
                    .actual(provider.to_string())
                    .attempt(attempt_id),
            );
        }
    }

    /// The input and output tokens of a turn, when split, are its tokens.
    fn turn_usage(&mut self, seq: u64, attempt_id: &str, tokens: u64, input: Option<u64>, output: Option<u64>) {
        let (Some(input), Some(output)) = (input, output) else { return };
        if input.checked_add(output) != Some(tokens) {
            self.push(
                Deviation::new(
                    codes::TURN_USAGE,
                    Some(seq),
                    format!("a turn's {input} input and {output} output tokens are not its {tokens} tokens"),
                )
                .expected(format!("usage.tokens = {input} + {output}"))
                .actual(tokens.to_string())
                .attempt(attempt_id),
            );
        }
    }

    /// The first scope's `remaining` is its limits less its use so far.
    fn remaining_settled(&mut self, seq: u64, scope: &str, attempt_id: &str, remaining: &Usage) {
        let Some(first) = scope.split(',').next() else { return };
        let Some(acc) = self.budgets.get(first) else { return };
        let (limits, used) = (&acc.limits, &acc.used);
        let left = |limit: Option<u64>, used: u64| limit.map_or(0, |l| l.saturating_sub(used));
        let expected = Usage {
            tokens: left(limits.tokens, used.tokens),
            tool_calls: left(limits.tool_calls, used.tool_calls),
            cost: limits.cost.map_or(0.0, |l| (l - used.cost).max(0.0)),
            ..Usage::default()
        };
        let off = expected.tokens != remaining.tokens
            || expected.tool_calls != remaining.tool_calls
            || (expected.cost - remaining.cost).abs() > 1e-6;
        if off {
            let show = |u: &Usage| format!("{} tokens, {} tool calls, ${:.6}", u.tokens, u.tool_calls, u.cost);
            self.push(
                Deviation::new(codes::BUDGET_ACCOUNTING, Some(seq), format!("scope `{first}`'s remaining is not its limits less its use"))
                    .expected(show(&expected))
                    .actual(show(remaining))
                    .attempt(attempt_id),
            );
        }
    }
}
