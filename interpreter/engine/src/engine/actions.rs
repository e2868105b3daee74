//! Handler actions (continue, retry, goto, escalate …), budget zones and
//! exhaustion.

use super::*;

impl Engine {
    pub(super) fn act(&mut self, action: &Action, ctx: &Ctx, scope: HandlerScope, cause: &str) {
        if !self.running() {
            return;
        }
        let taken = self.emit("control", events::action_taken(ctx.event, scope.clone(), action), Some(cause));
        let arg = action.args.first().cloned();
        let gate = ctx.gate.as_ref().and_then(|g| self.wf().gates.get(g)).cloned();
        match action.name {
            ActionKind::Continue | ActionKind::Skip | ActionKind::Degrade | ActionKind::Warn => {
                if action.name == ActionKind::Warn {
                    self.emit("control", events::warning(format!("{} in {scope}", ctx.event)), Some(&taken));
                }
                if let Some(g) = gate {
                    self.enter(&g.from, &g.to, Via::Gate(g.name.clone()), &taken);
                } else if let Some(node) = &ctx.node {
                    let running = self.nodes.get(node).is_some_and(|n| n.running) || !self.env.contains_key(node);
                    let failed = [HandlerEvent::Failure, HandlerEvent::Timeout, HandlerEvent::InvalidOutput].map(ActionEvent::Handler);
                    if running || failed.contains(&ctx.event) {
                        let status = if action.name == ActionKind::Skip { NodeStatus::Skipped } else { NodeStatus::Degraded };
                        let output = self.env.get(node).cloned().unwrap_or(Value::Null);
                        self.complete_node(node, output, status, &taken);
                    } else {
                        self.follow(node, &taken);
                    }
                }
            }
            ActionKind::Retry => {
                if let Some(node) = ctx.node.as_ref().and_then(|n| self.node(n)) {
                    let attempts = self.nodes.get(&node.name).map(|n| n.attempt_no).unwrap_or(0);
                    if attempts < Self::max_attempts(&node).max(2) {
                        self.start_attempt(&node, TriggerReason::Retry, &taken);
                    } else {
                        self.terminate(&format!("{}_failed", node.name), TerminationStatus::Failure, &taken, Some("retries exhausted"));
                    }
                }
            }
            ActionKind::Decide => {
                if let Some(g) = gate {
                    let deciders = g.decided_by().unwrap_or_else(|| self.wf().escalate_to());
                    let decisions = g.allowed_decisions();
                    let prompt = g.description().map(str::to_string);
                    self.ask(Decision::Gate { gate: g.name.clone() }, deciders, prompt, decisions, &taken);
                }
            }
            ActionKind::Terminate | ActionKind::Halt | ActionKind::Fallback | ActionKind::ReturnPartial => {
                let gate_reason = gate.as_ref().and_then(|g| g.reason());
                if let Some((reason, status)) = semantics::ending(action.name, arg.as_deref(), gate_reason, ctx.event.as_str()) {
                    self.terminate(&reason, status, &taken, None);
                }
            }
            ActionKind::Goto | ActionKind::Activate => {
                if let Some(to) = arg {
                    let from = ctx.node.clone().unwrap_or_else(|| "control".into());
                    let edge = self.emit(
                        "control",
                        events::edge_taken(&from, &to, Via::of_action(action.name.as_str()).unwrap_or(Via::Goto)),
                        Some(&taken),
                    );
                    let input = ctx.node.as_ref().and_then(|n| self.env.get(n)).cloned().unwrap_or(Value::Null);
                    self.start_node(&to, input, TriggerReason::First, &edge);
                }
            }
            ActionKind::Revise | ActionKind::Replan => {
                let target = arg.or_else(|| {
                    if action.name == ActionKind::Replan {
                        let scope = gate.as_ref().map(|g| g.replan_scope()).unwrap_or_default();
                        scope.first().cloned().or_else(|| self.wf().start().map(str::to_string))
                    } else {
                        ctx.node.clone()
                    }
                });
                if let Some(to) = target {
                    let from = ctx.node.clone().unwrap_or_else(|| "control".into());
                    let edge = self.emit(
                        "control",
                        events::edge_taken(&from, &to, Via::of_action(action.name.as_str()).unwrap_or(Via::Goto)),
                        Some(&taken),
                    );
                    let input = self.nodes.get(&to).map(|n| n.input.clone()).unwrap_or(Value::Null);
                    let trigger = if action.name == ActionKind::Revise { TriggerReason::Revise } else { TriggerReason::Replan };
                    self.start_node(&to, input, trigger, &edge);
                }
            }
            ActionKind::Escalate => {
                let principal = arg.unwrap_or_default();
                self.ask(
                    Decision::Escalation { principal: principal.clone(), ctx: ctx.clone() },
                    vec![principal],
                    Some(format!("{} in {scope}", ctx.event)),
                    vec![flow_trace::Decision::Approve, flow_trace::Decision::Reject],
                    &taken,
                );
            }
            ActionKind::CompressContext | ActionKind::SkipReasoning => {
                if !self.flags.iter().any(|f| f == action.name.as_str()) {
                    self.flags.push(action.name.to_string());
                }
            }
            ActionKind::SwitchModel => self.provider_override = arg,
        }
    }

    pub(super) fn zone_changes(&mut self, changes: Vec<ZoneChange>, cause: &str) {
        let mut rest = changes.into_iter();
        while let Some(change) = rest.next() {
            let held = || Held::Zones { changes: std::iter::once(change.clone()).chain(rest.clone()).collect() };
            if !self.admit(Obs::Zone(change.to.as_str()), "budget_zone_changed", cause, held) {
                return;
            }
            let ev = self.emit("control", events::zone_changed(&change.scope, change.from, change.to, &change.actions), Some(cause));
            let ctx = Ctx { node: None, gate: None, event: ActionEvent::Zone(change.to) };
            for action in &change.actions {
                self.act(action, &ctx, HandlerScope::Budget(change.scope.clone()), &ev);
            }
        }
    }

    pub(super) fn exhausted(&mut self, ex: Exhausted, node: Option<&str>, cause: &str) {
        self.budget_hit = true;
        let ev = self.emit("control", events::budget_exhausted(&ex.scope, &ex.limit), Some(cause));
        // Attempts in flight on that node fail with budget_exhausted.
        let ids: Vec<String> = self.attempts.values().filter(|a| Some(a.node.as_str()) == node).map(|a| a.id.clone()).collect();
        for id in ids {
            self.attempt_failed(&id, ErrorCode::BudgetExhausted, &format!("{} limit of {} reached", ex.limit, ex.scope), &ev);
        }
        let ctx = Ctx { node: node.map(str::to_string), gate: None, event: HandlerEvent::BudgetExhausted.into() };
        if let Some(action) = self.budgets.scopes.get(&ex.scope).and_then(|s| s.on_exhausted.clone()) {
            self.act(&action, &ctx, HandlerScope::Budget(ex.scope.clone()), &ev);
            return;
        }
        if let Some(n) = node.and_then(|n| self.node(n)) {
            if let Some(h) = n.handlers.iter().find(|h| h.events.contains(&HandlerEvent::BudgetExhausted)).cloned() {
                self.act(&h.action, &ctx, HandlerScope::Node(n.name.clone()), &ev);
                return;
            }
        }
        self.workflow_event(HandlerEvent::BudgetExhausted, node, &ev, "budget_exhausted", "budget exhausted");
        if let RunStatus::Terminated { status, .. } = &self.status {
            let _ = status;
        }
    }
}
