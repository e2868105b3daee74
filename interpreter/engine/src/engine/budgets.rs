//! Budgets as the engine meters them: the scopes a call counts against,
//! reservations and settlements (recorded once, here), zones crossed and
//! exhaustion handled.

use super::*;

impl Engine {
    pub(super) fn scopes_for(&self, node: &Node, agent: Option<&str>) -> Vec<String> {
        if self.budgets.scopes.is_empty() {
            return Vec::new();
        }
        let mut scopes = vec!["run".to_string()];
        if let Some(agent) = agent {
            scopes.push(format!("agent.{agent}"));
        }
        scopes.push(format!("node.{}", node.name));
        scopes.push(format!("delegation.{}", node.name));
        scopes
    }

    /// One control-plane step for an attempt of `node`, reserved and settled
    /// at once (no budgets: nothing to do). Gives the zones the step
    /// crossed; `None` when it exhausted a budget (that is handled).
    pub(super) fn take_step(&mut self, node: &Node, cause: &Str) -> Option<Vec<ZoneChange>> {
        let agent = (node.kind() == NodeKind::Agent).then(|| node.target.first().cloned()).flatten();
        // One control-plane step per attempt.
        let scopes = self.scopes_for(node, agent.as_deref());
        let step = Usage { steps: 1, ..Usage::default() };
        // No scopes (no budgets): nothing to reserve or settle.
        match if scopes.is_empty() { Ok(Vec::new()) } else { self.budgets.reserve(&scopes, &step, false) } {
            Ok(present) if present.is_empty() => Some(Vec::new()),
            Ok(present) => Some(self.budgets.settle(&present, &step, &step, self.elapsed())),
            Err(ex) => {
                self.then(Effect::Exhausted { ex, node: Some(node.name.clone()), cause: cause.clone() });
                None
            }
        }
    }

    /// Reserves `amount` against `scopes`: gives the scopes present (empty:
    /// no budget applies). `None` when a scope would be exhausted: that is
    /// handled (the caller stops). Record it with [`Engine::record_reserved`].
    pub(super) fn reserve(&mut self, scopes: &[String], amount: &Usage, node: &str, cause: &Str) -> Option<Vec<String>> {
        match self.budgets.reserve(scopes, amount, false) {
            Ok(present) => Some(present),
            Err(ex) => {
                self.then(Effect::Exhausted { ex, node: Some(node.to_string()), cause: cause.clone() });
                None
            }
        }
    }

    /// Records a reservation as `budget_reserved` under `cause`, and gives
    /// the event what follows hangs on (`cause` when no budget applies and
    /// nothing is recorded).
    pub(super) fn record_reserved(&mut self, present: &[String], amount: &Usage, attempt_id: &str, cause: &Str) -> Str {
        if present.is_empty() {
            return cause.clone();
        }
        let body = Body::BudgetReserved {
            schema_version: V,
            scope: present.join(","),
            attempt_id: attempt_id.to_string(),
            amount: amount.clone(),
        };
        self.emit("control", body, Some(cause))
    }

    /// Settles what `attempt_id` reserved against `scopes` with what it
    /// `used`, recorded as `budget_settled` under `cause`. Gives the zones
    /// the settlement crossed (to be applied by the caller, after anything
    /// it records first).
    pub(super) fn settle(&mut self, scopes: &[String], reserved: &Usage, used: Usage, attempt_id: &str, cause: &Str) -> Vec<ZoneChange> {
        let Some(first) = scopes.first() else { return Vec::new() };
        let changes = self.budgets.settle(scopes, reserved, &used, self.elapsed());
        let remaining = self.budgets.scopes[first].remaining();
        let body = Body::BudgetSettled { schema_version: V, scope: scopes.join(","), attempt_id: attempt_id.to_string(), used, remaining };
        self.emit("control", body, Some(cause));
        changes
    }

    /// Budget zones crossed: the first recorded (if the policies let it)
    /// and its actions taken, then the rest.
    pub(super) fn zone_changes(&mut self, changes: Vec<ZoneChange>, cause: &Str) {
        let mut rest = changes.into_iter();
        let Some(change) = rest.next() else { return };
        let held = || Effect::Zones { changes: std::iter::once(change.clone()).chain(rest.clone()).collect(), cause: held() };
        if !self.admit(Obs::Zone(change.to.as_str()), "budget_zone_changed", cause, held) {
            return;
        }
        let ev = self.emit("control", events::zone_changed(&change.scope, change.from, change.to, &change.actions), Some(cause));
        let ctx = Ctx { node: None, gate: None, event: ActionEvent::Zone(change.to) };
        for action in change.actions {
            self.then(Effect::Act {
                action,
                ctx: Box::new(ctx.clone()),
                scope: HandlerScope::Budget(change.scope.clone()),
                cause: ev.clone(),
            });
        }
        let rest: Vec<ZoneChange> = rest.collect();
        if !rest.is_empty() {
            self.then(Effect::Zones { changes: rest, cause: cause.clone() });
        }
    }

    pub(super) fn exhausted(&mut self, ex: Exhausted, node: Option<&str>, cause: &Str) {
        self.budget_hit = true;
        let ev = self.emit("control", events::budget_exhausted(&ex.scope, &ex.limit), Some(cause));
        // Attempts in flight on that node fail with budget_exhausted.
        let ids: Vec<String> = self.attempts.values().filter(|a| Some(a.node.as_str()) == node).map(|a| a.id.clone()).collect();
        // (A budget_exhausted failure stops the run: it is recorded, nothing follows.)
        for id in ids {
            self.record_attempt_failure(&id, ErrorCode::BudgetExhausted, &format!("{} limit of {} reached", ex.limit, ex.scope), &ev);
        }
        let ctx = Ctx { node: node.map(str::to_string), gate: None, event: HandlerEvent::BudgetExhausted.into() };
        if let Some(action) = self.budgets.scopes.get(&ex.scope).and_then(|s| s.on_exhausted.clone()) {
            self.then(Effect::Act { action, ctx: Box::new(ctx), scope: HandlerScope::Budget(ex.scope.clone()), cause: ev });
            return;
        }
        if let Some(n) = node.and_then(|n| self.node(n)) {
            if let Some(h) = n.handlers.iter().find(|h| h.events.contains(&HandlerEvent::BudgetExhausted)).cloned() {
                self.then(Effect::Act { action: h.action, ctx: Box::new(ctx), scope: HandlerScope::Node(n.name.clone()), cause: ev });
                return;
            }
        }
        self.then(Effect::WorkflowEvent {
            event: HandlerEvent::BudgetExhausted,
            node: node.map(str::to_string),
            cause: ev,
            default_reason: "budget_exhausted".into(),
            message: "budget exhausted".into(),
        });
    }
}
