//! Handler actions: continue, retry, decide, terminate, goto, revise,
//! replan, escalate, and the flags a budget zone sets.

use super::*;

impl Engine {
    pub(super) fn act(&mut self, action: &Action, ctx: &Ctx, scope: HandlerScope, cause: &Str) {
        if !self.running() {
            return;
        }
        let taken = self.emit("control", events::action_taken(ctx.event, scope.clone(), action), Some(cause));
        let arg = action.args.first().cloned();
        let gate = ctx.gate.as_ref().and_then(|g| self.wf().gates.get(g)).cloned();
        match action.name {
            ActionKind::Continue | ActionKind::Skip | ActionKind::Degrade | ActionKind::Warn => {
                self.go_on(action.name, ctx, &scope, gate, &taken)
            }
            ActionKind::Retry => {
                if let Some(node) = ctx.node.as_ref().and_then(|n| self.node(n)) {
                    let attempts = self.nodes.get(&node.name).map(|n| n.attempt_no).unwrap_or(0);
                    if attempts < Self::max_attempts(&node).max(2) {
                        self.then(Effect::StartAttempt { node, trigger: TriggerReason::Retry, cause: taken });
                    } else {
                        let reason = format!("{}_failed", node.name);
                        self.end_run(&reason, TerminationStatus::Failure, &taken, Some("retries exhausted".into()));
                    }
                }
            }
            ActionKind::Decide => {
                if let Some(g) = gate {
                    let deciders = g.decided_by().unwrap_or_else(|| self.wf().escalate_to());
                    let decisions = g.allowed_decisions();
                    let prompt = g.description().map(str::to_string);
                    let decision = Box::new(Decision::Gate { gate: g.name.clone() });
                    self.then(Effect::Ask { decision, principals: deciders, prompt, decisions, cause: taken });
                }
            }
            ActionKind::Terminate | ActionKind::Halt | ActionKind::Fallback | ActionKind::ReturnPartial => {
                let gate_reason = gate.as_ref().and_then(|g| g.reason());
                if let Some((reason, status)) = semantics::ending(action.name, arg.as_deref(), gate_reason, ctx.event.as_str()) {
                    self.end_run(&reason, status, &taken, None);
                }
            }
            ActionKind::Goto | ActionKind::Activate | ActionKind::Revise | ActionKind::Replan => self.jump(action, ctx, gate, arg, &taken),
            ActionKind::Escalate => {
                let principal = arg.unwrap_or_default();
                self.then(Effect::Ask {
                    decision: Box::new(Decision::Escalation { principal: principal.clone(), ctx: ctx.clone() }),
                    principals: vec![principal],
                    prompt: Some(format!("{} in {scope}", ctx.event)),
                    decisions: vec![flow_trace::Decision::Approve, flow_trace::Decision::Reject],
                    cause: taken,
                });
            }
            ActionKind::CompressContext | ActionKind::SkipReasoning => {
                if !self.flags.iter().any(|f| f == action.name.as_str()) {
                    self.flags.push(action.name.to_string());
                }
            }
            ActionKind::SwitchModel => self.provider_override = arg,
        }
    }

    /// `continue`, `skip`, `degrade` or `warn`: through the gate the handler
    /// is on; else the node it is on completes (as skipped or degraded) if
    /// it was running or failed, or its run goes on from it.
    fn go_on(&mut self, kind: ActionKind, ctx: &Ctx, scope: &HandlerScope, gate: Option<Gate>, taken: &Str) {
        if kind == ActionKind::Warn {
            self.emit("control", events::warning(format!("{} in {scope}", ctx.event)), Some(taken));
        }
        if let Some(g) = gate {
            self.then(Effect::Enter { from: g.from.clone(), to: g.to.clone(), via: Via::Gate(g.name.clone()), cause: taken.clone() });
        } else if let Some(node) = &ctx.node {
            let running = self.nodes.get(node).is_some_and(|n| n.running) || !self.env.contains_key(node);
            let failed = [HandlerEvent::Failure, HandlerEvent::Timeout, HandlerEvent::InvalidOutput].map(ActionEvent::Handler);
            if running || failed.contains(&ctx.event) {
                let status = if kind == ActionKind::Skip { NodeStatus::Skipped } else { NodeStatus::Degraded };
                let output = self.env.get(node).cloned().unwrap_or(Value::Null);
                self.then_complete(node, output, status, taken);
            } else {
                self.then(Effect::Follow { from: node.clone(), cause: taken.clone() });
            }
        }
    }

    /// `goto`/`activate` a node with the output of the node the handler is
    /// on; `revise`/`replan` re-run a scope from its entry with the input
    /// the entry had (`flow_check::rerun`), recorded as `rerun` with the
    /// outputs it supersedes.
    fn jump(&mut self, action: &Action, ctx: &Ctx, gate: Option<Gate>, arg: Option<String>, taken: &Str) {
        let from = ctx.node.clone().unwrap_or_else(|| "control".into());
        let via = Via::of_action(action.name.as_str()).unwrap_or(Via::Goto);
        if matches!(action.name, ActionKind::Goto | ActionKind::Activate) {
            if let Some(to) = arg {
                let edge = self.emit("control", events::edge_taken(&from, &to, via), Some(taken));
                let input = ctx.node.as_ref().and_then(|n| self.env.get(n)).cloned().unwrap_or(Value::Null);
                self.then_start(&to, input, TriggerReason::First, &edge);
            }
            return;
        }
        let Some(rerun) = rerun::rerun(self.wf(), action, ctx.node.as_deref(), gate.as_ref()) else { return };
        let trigger = if action.name == ActionKind::Revise { TriggerReason::Revise } else { TriggerReason::Replan };
        let recorded = self.emit("control", events::rerun(trigger, &rerun), Some(taken));
        let edge = self.emit("control", events::edge_taken(&from, &rerun.entry, via), Some(&recorded));
        let input = self.nodes.get(&rerun.entry).map(|n| n.input.clone()).unwrap_or(Value::Null);
        self.then_start(&rerun.entry, input, trigger, &edge);
    }
}
