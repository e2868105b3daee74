//! Budget accounting: scopes (run, agent, node, delegation), reserve
//! before a call and settle after, reserves held back from ordinary work,
//! zones entered as the remaining share falls.

use flow_check::ir::Action;
use flow_check::view::Budget;
use flow_trace::Usage;
use indexmap::IndexMap;

/// The limits of one scope; `None` is unlimited.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Limits {
    pub steps: Option<u64>,
    pub tokens: Option<u64>,
    pub tool_calls: Option<u64>,
    pub cost: Option<f64>,
    pub duration_ms: Option<u64>,
}

/// A zone of a scope: entered when the remaining share falls below `below`.
#[derive(Debug, Clone, PartialEq)]
pub struct Zone {
    pub name: flow_trace::Zone,
    pub below: f64,
    pub actions: Vec<Action>,
}

/// One budget scope.
#[derive(Debug, Clone)]
pub struct Scope {
    pub name: String,
    pub limits: Limits,
    /// Share of each limit held back from ordinary work (verification,
    /// orchestration and reconciliation reserves together).
    pub reserve_share: f64,
    pub zones: Vec<Zone>,
    pub on_exhausted: Option<Action>,
    pub used: Usage,
    pub reserved: Usage,
    /// The zone the scope is in (`green` at first).
    pub zone: flow_trace::Zone,
}

/// A zone change to record.
#[derive(Debug, Clone, PartialEq)]
pub struct ZoneChange {
    pub scope: String,
    pub from: flow_trace::Zone,
    pub to: flow_trace::Zone,
    pub actions: Vec<Action>,
}

/// Which limit a reservation broke.
#[derive(Debug, Clone, PartialEq)]
pub struct Exhausted {
    pub scope: String,
    pub limit: String,
}

impl Limits {
    /// The limits a budget declares.
    pub fn of(budget: &Budget) -> Limits {
        Limits {
            steps: budget.steps,
            tokens: budget.tokens,
            tool_calls: budget.tool_calls,
            cost: budget.cost,
            duration_ms: budget.duration_ms,
        }
    }
}

impl Scope {
    /// A scope from a budget (§5.6).
    pub fn from_budget(name: &str, budget: &Budget) -> Scope {
        let mut zones: Vec<Zone> = budget
            .zones
            .iter()
            .map(|z| Zone { name: z.zone, below: z.below, actions: z.actions.iter().map(|a| (*a).clone()).collect() })
            .collect();
        // Most severe (lowest threshold) last.
        zones.sort_by(|a, b| b.below.partial_cmp(&a.below).unwrap_or(std::cmp::Ordering::Equal));
        Scope {
            name: name.to_string(),
            limits: Limits::of(budget),
            reserve_share: budget.reserve.total().min(1.0),
            zones,
            on_exhausted: budget.on_exhausted.cloned(),
            used: Usage::default(),
            reserved: Usage::default(),
            zone: flow_trace::Zone::Green,
        }
    }

    /// What ordinary work may use of a limit (the reserves held back);
    /// verification work may use all of it.
    fn capacity(&self, limit: f64, verification: bool) -> f64 {
        if verification {
            limit
        } else {
            limit * (1.0 - self.reserve_share)
        }
    }

    /// The first limit `amount` would break, on top of use and reservations.
    pub fn check(&self, amount: &Usage, verification: bool) -> Option<&'static str> {
        let l = &self.limits;
        let over_u = |limit: Option<u64>, used: u64, reserved: u64, add: u64| match limit {
            Some(limit) => add > 0 && (used + reserved + add) as f64 > self.capacity(limit as f64, verification) + 1e-9,
            None => false,
        };
        if over_u(l.steps, self.used.steps, self.reserved.steps, amount.steps) {
            return Some("steps");
        }
        if over_u(l.tokens, self.used.tokens, self.reserved.tokens, amount.tokens) {
            return Some("tokens");
        }
        if over_u(l.tool_calls, self.used.tool_calls, self.reserved.tool_calls, amount.tool_calls) {
            return Some("tool_calls");
        }
        if let Some(limit) = l.cost {
            if amount.cost > 0.0 && self.used.cost + self.reserved.cost + amount.cost > self.capacity(limit, verification) + 1e-9 {
                return Some("cost");
            }
        }
        None
    }

    /// Whether the wall-clock limit has passed at `elapsed_ms`.
    pub fn out_of_time(&self, elapsed_ms: u64) -> bool {
        matches!(self.limits.duration_ms, Some(limit) if elapsed_ms > limit)
    }

    /// The remaining share of the tightest limit, 0..=1.
    pub fn remaining_share(&self, elapsed_ms: u64) -> f64 {
        let l = &self.limits;
        let mut share: f64 = 1.0;
        let mut take = |limit: Option<f64>, used: f64| {
            if let Some(limit) = limit {
                if limit > 0.0 {
                    share = share.min(((limit - used) / limit).max(0.0));
                }
            }
        };
        take(l.steps.map(|v| v as f64), self.used.steps as f64);
        take(l.tokens.map(|v| v as f64), self.used.tokens as f64);
        take(l.tool_calls.map(|v| v as f64), self.used.tool_calls as f64);
        take(l.cost, self.used.cost);
        // Zones follow what is spent, not the wall clock (so a replayed
        // run enters the same zones): `duration` is a hard limit only.
        let _ = elapsed_ms;
        share
    }

    /// What is left of each limit (unlimited limits report 0).
    pub fn remaining(&self) -> Usage {
        let l = &self.limits;
        Usage {
            steps: l.steps.map(|v| v.saturating_sub(self.used.steps)).unwrap_or(0),
            tokens: l.tokens.map(|v| v.saturating_sub(self.used.tokens)).unwrap_or(0),
            tool_calls: l.tool_calls.map(|v| v.saturating_sub(self.used.tool_calls)).unwrap_or(0),
            cost: l.cost.map(|v| (v - self.used.cost).max(0.0)).unwrap_or(0.0),
            duration_ms: 0,
        }
    }

    /// Re-evaluates the zone; returns the change when a more severe zone
    /// was entered (zones are never left: budgets only shrink).
    pub fn update_zone(&mut self, elapsed_ms: u64) -> Option<ZoneChange> {
        let share = self.remaining_share(elapsed_ms);
        let current = self.zones.iter().position(|z| z.name == self.zone);
        let entered = self.zones.iter().rposition(|z| share < z.below)?;
        if current.is_some_and(|c| c >= entered) {
            return None;
        }
        let zone = &self.zones[entered];
        let change = ZoneChange { scope: self.name.clone(), from: self.zone, to: zone.name, actions: zone.actions.clone() };
        self.zone = zone.name;
        Some(change)
    }
}

/// `a += b`, every limit.
pub fn add_usage(a: &mut Usage, b: &Usage) {
    a.steps += b.steps;
    a.tokens += b.tokens;
    a.tool_calls += b.tool_calls;
    a.cost += b.cost;
    a.duration_ms += b.duration_ms;
}

/// `a -= b`, every limit, never below zero.
pub fn sub_usage(a: &mut Usage, b: &Usage) {
    a.steps = a.steps.saturating_sub(b.steps);
    a.tokens = a.tokens.saturating_sub(b.tokens);
    a.tool_calls = a.tool_calls.saturating_sub(b.tool_calls);
    a.cost = (a.cost - b.cost).max(0.0);
    a.duration_ms = a.duration_ms.saturating_sub(b.duration_ms);
}

/// Every budget scope of a run.
#[derive(Debug, Clone, Default)]
pub struct Budgets {
    pub scopes: IndexMap<String, Scope>,
}

impl Budgets {
    pub fn add(&mut self, scope: Scope) {
        self.scopes.insert(scope.name.clone(), scope);
    }

    /// Reserves `amount` against every named scope that exists, or reports
    /// the first that cannot take it (then nothing is reserved).
    pub fn reserve(&mut self, scopes: &[String], amount: &Usage, verification: bool) -> Result<Vec<String>, Exhausted> {
        let present: Vec<String> = scopes.iter().filter(|s| self.scopes.contains_key(*s)).cloned().collect();
        for name in &present {
            if let Some(limit) = self.scopes[name].check(amount, verification) {
                return Err(Exhausted { scope: name.clone(), limit: limit.to_string() });
            }
        }
        for name in &present {
            if let Some(scope) = self.scopes.get_mut(name) {
                add_usage(&mut scope.reserved, amount);
            }
        }
        Ok(present)
    }

    /// Settles a reservation with the actual use; returns zone changes.
    pub fn settle(&mut self, scopes: &[String], reserved: &Usage, used: &Usage, elapsed_ms: u64) -> Vec<ZoneChange> {
        let mut changes = Vec::new();
        for name in scopes {
            if let Some(scope) = self.scopes.get_mut(name) {
                sub_usage(&mut scope.reserved, reserved);
                add_usage(&mut scope.used, used);
                if let Some(change) = scope.update_zone(elapsed_ms) {
                    changes.push(change);
                }
            }
        }
        changes
    }

    /// Scopes whose wall-clock limit has passed.
    pub fn out_of_time(&self, elapsed_ms: u64) -> Option<Exhausted> {
        self.scopes.values().find(|s| s.out_of_time(elapsed_ms)).map(|s| Exhausted { scope: s.name.clone(), limit: "duration".into() })
    }

    /// Whether a scope has used more than a limit (a settled call that
    /// reported more than it reserved). Use up to a limit is within it: a
    /// run that fits its budget exactly is not exhausted.
    pub fn used_up(&self, name: &str) -> Option<Exhausted> {
        let scope = self.scopes.get(name)?;
        let l = &scope.limits;
        let hit = [
            ("steps", l.steps.is_some_and(|v| scope.used.steps > v)),
            ("tokens", l.tokens.is_some_and(|v| scope.used.tokens > v)),
            ("tool_calls", l.tool_calls.is_some_and(|v| scope.used.tool_calls > v)),
            ("cost", l.cost.is_some_and(|v| scope.used.cost > v + 1e-9)),
        ];
        hit.iter().find(|(_, hit)| *hit).map(|(limit, _)| Exhausted { scope: name.to_string(), limit: limit.to_string() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flow_check::view::{Reserve, ZoneSpec};

    fn warn() -> Action {
        Action { name: flow_check::ir::ActionKind::Warn, args: vec![] }
    }

    fn scope() -> Scope {
        let warn = warn();
        let zone = |zone, below| ZoneSpec { zone, below, actions: vec![&warn] };
        let budget = Budget {
            name: None,
            decl_loc: None,
            steps: Some(10),
            tokens: Some(1000),
            tool_calls: None,
            duration_ms: None,
            cost: None,
            reserve: Reserve { verification: 0.1, ..Reserve::default() },
            // Declared most severe first: the scope keeps it last.
            zones: vec![zone(flow_trace::Zone::Fuse, 0.05), zone(flow_trace::Zone::Yellow, 0.5)],
            on_exhausted: None,
        };
        Scope::from_budget("run", &budget)
    }

    #[test]
    fn reserves_hold_back_a_share_from_ordinary_work() {
        let mut budgets = Budgets::default();
        budgets.add(scope());
        let names = vec!["run".to_string(), "agent.a".to_string()];
        let big = Usage { tokens: 950, ..Usage::default() };
        // 950 > 90% of 1000: ordinary work may not reserve it ...
        assert_eq!(budgets.reserve(&names, &big, false), Err(Exhausted { scope: "run".into(), limit: "tokens".into() }));
        // ... verification may.
        assert_eq!(budgets.reserve(&names, &big, true), Ok(vec!["run".to_string()]));
    }

    #[test]
    fn settle_releases_and_enters_zones_once() {
        let mut budgets = Budgets::default();
        budgets.add(scope());
        let names = vec!["run".to_string()];
        let reserve = Usage { steps: 1, tokens: 600, ..Usage::default() };
        budgets.reserve(&names, &reserve, false).unwrap();
        let changes = budgets.settle(&names, &reserve, &Usage { steps: 1, tokens: 550, ..Usage::default() }, 0);
        assert_eq!(changes.len(), 1);
        assert_eq!((changes[0].from, changes[0].to), (flow_trace::Zone::Green, flow_trace::Zone::Yellow));
        assert_eq!(budgets.scopes["run"].reserved, Usage::default());
        assert_eq!(budgets.scopes["run"].used.tokens, 550);
        // Still yellow: no second change.
        let small = Usage { tokens: 10, ..Usage::default() };
        budgets.reserve(&names, &small, false).unwrap();
        assert!(budgets.settle(&names, &small, &small, 0).is_empty());
    }
}
