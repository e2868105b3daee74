//! Re-runs (T013): a `rerun` names a scope the plan's actions can name,
//! starts at that scope's entry and supersedes exactly the nodes that
//! depend on it (`flow_check::rerun`, as the engine and the model checker
//! read it); the `revise`/`replan` edge that follows it goes to the entry,
//! and no such edge is taken without one.

use super::*;
use flow_check::rerun;
use flow_trace::TriggerReason;

impl<'a> Checker<'a> {
    pub(super) fn rerun_recorded(&mut self, seq: u64, trigger: TriggerReason, scope: &[String], entry: &str, superseded: &[String]) {
        self.pending_rerun = Some(entry.to_string());
        let Some(plan) = &self.plan else { return };
        let problem = if !matches!(trigger, TriggerReason::Revise | TriggerReason::Replan) {
            Some(format!("a re-run is a `revise` or a `replan`, not `{trigger}`"))
        } else if let Some(why) = plan.scope_problem(trigger, scope) {
            Some(why)
        } else if rerun::scope_entry(plan.wf, scope).or(scope.first().map(String::as_str)) != Some(entry) {
            Some(format!(
                "the scope [{}] starts at `{}`, not `{entry}`",
                scope.join(", "),
                rerun::scope_entry(plan.wf, scope).unwrap_or("?")
            ))
        } else {
            let expected = rerun::superseded(plan.wf, entry);
            (expected != superseded).then(|| format!("a re-run from `{entry}` supersedes [{}]", expected.join(", ")))
        };
        if let Some(problem) = problem {
            let actual = format!("rerun {trigger} [{}] from {entry} superseding [{}]", scope.join(", "), superseded.join(", "));
            self.push(
                Deviation::new(codes::RERUN, Some(seq), format!("re-run not as planned: {problem}"))
                    .expected("a scope the plan's actions name, from its entry, superseding what depends on it")
                    .actual(actual)
                    .node(entry),
            );
        }
    }

    /// A `revise`/`replan` edge goes to the entry of the `rerun` recorded
    /// just before it.
    pub(super) fn rerun_edge(&mut self, seq: u64, to: &str, via: &Via) {
        let pending = self.pending_rerun.take();
        if !matches!(via, Via::Revise | Via::Replan) || pending.as_deref() == Some(to) {
            return;
        }
        let message = match pending {
            Some(entry) => format!("the {via} edge goes to `{to}`, the re-run starts at `{entry}`"),
            None => format!("a {via} edge to `{to}` with no `rerun` recorded before it"),
        };
        self.push(
            Deviation::new(codes::RERUN, Some(seq), message)
                .expected("rerun, then the edge to its entry")
                .actual(format!("edge_taken -> {to} via {via}"))
                .node(to),
        );
    }
}

impl PlanView<'_> {
    /// Why `scope` is not one the plan's `revise`/`replan` actions can name.
    fn scope_problem(&self, trigger: TriggerReason, scope: &[String]) -> Option<String> {
        let listed = || format!("[{}]", scope.join(", "));
        if let Some(n) = scope.iter().find(|n| !self.wf.nodes.contains_key(n.as_str())) {
            return Some(format!("`{n}` is not a node of the plan"));
        }
        match (trigger, scope) {
            (TriggerReason::Revise, [_]) => None,
            (TriggerReason::Revise, _) => Some(format!("a revise re-runs one node, not {}", listed())),
            (_, [n]) if self.start == Some(n.as_str()) || self.index.is_replan_target(n) => None,
            _ if self.wf.gates.values().any(|g| g.replan_scope() == scope) => None,
            _ => Some(format!("no gate's replan scope, `replan(node)` or the start is {}", listed())),
        }
    }
}
