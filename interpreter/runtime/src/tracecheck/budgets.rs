//! Budgets: scopes, reservations that must fit, settlements, overruns that
//! must end in `budget_exhausted` (T06x).

use super::*;

impl<'a> Checker<'a> {
    pub(super) fn known_scopes(&mut self, seq: u64, scopes: &str, attempt: &str) {
        for name in scopes.split(',') {
            let known = self.budgets.contains_key(name) || (name.starts_with("delegation.") && self.plan.is_none());
            if !known {
                self.push(
                    Deviation::new(
                        codes::BUDGET_ACCOUNTING,
                        Some(seq),
                        format!("budget scope `{name}` is not one the plan declares for this run"),
                    )
                    .actual(format!("scope {scopes}"))
                    .attempt(attempt),
                );
            }
        }
    }

    /// Gives back what reservations held.
    pub(super) fn release(&mut self, held: &[(String, Usage)]) {
        for (scopes, amount) in held {
            for name in scopes.split(',') {
                if let Some(acc) = self.budgets.get_mut(name) {
                    sub_usage(&mut acc.reserved, amount);
                }
            }
        }
    }

    /// A call whose reservation does not fit is not made.
    pub(super) fn reservation_fits(&mut self, seq: u64, scopes: &str, attempt: &str, amount: &Usage) {
        let mut found = Vec::new();
        for name in scopes.split(',') {
            let Some(acc) = self.budgets.get_mut(name) else { continue };
            let mut total = acc.used.clone();
            add_usage(&mut total, &acc.reserved);
            add_usage(&mut total, amount);
            for (i, limit, max, held) in overs(&acc.limits, &total).into_iter().flatten() {
                if i == 0 || acc.reported[i] {
                    continue;
                }
                acc.reported[i] = true;
                found.push(
                    Deviation::new(
                        codes::BUDGET_EXCEEDED,
                        Some(seq),
                        format!("a reservation against budget scope `{name}` does not fit under its {limit} limit of {max}"),
                    )
                    .expected(format!("used + reserved {limit} <= {max}, else budget_exhausted instead of the call"))
                    .actual(format!("{limit} used and reserved = {held}"))
                    .attempt(attempt),
                );
            }
        }
        self.deviations.append(&mut found);
    }

    /// Limits exceeded after a settlement wait for the control plane's
    /// `budget_exhausted`.
    pub(super) fn settled(&mut self, seq: u64, scopes: &str, attempt: &str) {
        for name in scopes.split(',') {
            let Some(acc) = self.budgets.get_mut(name) else { continue };
            for (i, limit, max, used) in overs(&acc.limits, &acc.used).into_iter().flatten() {
                if acc.reported[i] || acc.pending.iter().any(|o| o.limit == limit) {
                    continue;
                }
                acc.pending.push(Overrun { seq, limit, max, used, attempt: Some(attempt.to_string()) });
            }
        }
    }

    /// Overruns the control plane did not answer with `budget_exhausted`.
    pub(super) fn flush_overruns(&mut self, scopes: &str, why: &str) {
        let mut found = Vec::new();
        for name in scopes.split(',') {
            let Some(acc) = self.budgets.get_mut(name) else { continue };
            for o in std::mem::take(&mut acc.pending) {
                let i = ["steps", "tokens", "tool_calls", "cost"].iter().position(|l| *l == o.limit).unwrap_or(0);
                acc.reported[i] = true;
                let mut d = Deviation::new(
                    codes::BUDGET_EXCEEDED,
                    Some(o.seq),
                    format!("budget scope `{name}` used {} {}, over its limit of {}, and {why}", o.used, o.limit, o.max),
                )
                .expected(format!("{} <= {} (or budget_exhausted at once)", o.limit, o.max))
                .actual(format!("{} = {}", o.limit, o.used));
                if let Some(a) = &o.attempt {
                    d = d.attempt(a);
                }
                if let Some(node) = name.strip_prefix("node.").or_else(|| name.strip_prefix("delegation.")) {
                    d = d.node(node);
                }
                found.push(d);
            }
        }
        self.deviations.append(&mut found);
    }

    /// A reservation: in known scopes, after any overrun was handled, fitting, by an attempt that started.
    pub(super) fn budget_reserved(&mut self, seq: u64, scope: &str, attempt_id: &str, amount: &Usage) {
        self.known_scopes(seq, scope, attempt_id);
        self.flush_overruns(scope, "work went on in the scope without a budget_exhausted");
        self.reservation_fits(seq, scope, attempt_id, amount);
        match self.attempts.get_mut(attempt_id) {
            Some(a) => a.reservations.push((scope.to_string(), amount.clone())),
            None => self.push(
                Deviation::new(
                    codes::BUDGET_ACCOUNTING,
                    Some(seq),
                    format!("a reservation for attempt `{attempt_id}`, which never started"),
                )
                .attempt(attempt_id),
            ),
        }
    }

    /// A settlement: of a reservation the attempt holds; the use is counted.
    pub(super) fn budget_settled(&mut self, seq: u64, scope: &str, attempt_id: &str, used: &Usage) {
        self.known_scopes(seq, scope, attempt_id);
        let held = self.attempts.get_mut(attempt_id).and_then(|a| (!a.reservations.is_empty()).then(|| a.reservations.remove(0)));
        match held {
            Some(reservation) => self.release(&[reservation]),
            None => self.push(
                Deviation::new(codes::BUDGET_ACCOUNTING, Some(seq), format!("attempt `{attempt_id}` settled a budget it had not reserved"))
                    .expected("budget_reserved before budget_settled")
                    .attempt(attempt_id),
            ),
        }
        for name in scope.split(',') {
            if let Some(acc) = self.budgets.get_mut(name) {
                add_usage(&mut acc.used, used);
            }
        }
        self.settled(seq, scope, attempt_id);
    }

    /// The control plane noticed: the overrun took the declared path.
    pub(super) fn budget_exhausted(&mut self, scope: &str) {
        // The control plane noticed: the overrun took the declared path.
        if let Some(acc) = self.budgets.get_mut(scope) {
            for o in std::mem::take(&mut acc.pending) {
                self.notes.push(format!(
                    "budget scope `{scope}` used {} {} at seq {}, over its limit of {}; the control plane recorded budget_exhausted (the call could not be bounded in advance)",
                    o.used, o.limit, o.seq, o.max
                ));
            }
        }
    }
}
