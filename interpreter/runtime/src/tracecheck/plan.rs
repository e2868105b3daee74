//! The plan as trace check reads it: the shared plan index
//! (`flow_check::index::PlanIndex`, as the engine reads it) and lookups on
//! top of it (agents, principals, deciders, what an edge may be).

use super::*;

/// The lookups the checks share, built once from the workflow.
pub(super) struct PlanView<'a> {
    pub(super) program: &'a Program,
    pub(super) wf: &'a Workflow,
    pub(super) start: Option<&'a str>,
    /// The plan's structure (`flow_check::index`): edges, gates, transfers
    /// and jump targets on each boundary, as the engine reads them.
    pub(super) index: PlanIndex,
}

impl<'a> PlanView<'a> {
    pub(super) fn new(program: &'a Program, wf: &'a Workflow) -> PlanView<'a> {
        PlanView { program, wf, start: wf.start(), index: PlanIndex::new(program, wf) }
    }

    pub(super) fn node(&self, name: &str) -> Option<&'a Node> {
        self.wf.nodes.get(name)
    }

    /// The agent a node runs, if it is an agent node.
    pub(super) fn agent_of(&self, node: &str) -> Option<&'a str> {
        self.node(node).filter(|n| n.kind() == NodeKind::Agent).and_then(|n| n.target.first()).map(String::as_str)
    }

    /// `names` with roles expanded to their members (and principals that
    /// hold a listed role added), transitively.
    pub(super) fn expand_principals(&self, listed: &[String]) -> std::collections::BTreeSet<String> {
        flow_check::semantics::expand_principals(self.program, listed)
    }

    /// Who may decide on `subject` (empty: the plan names nobody).
    pub(super) fn deciders_of(&self, subject: &str) -> Vec<String> {
        let escalate_to = || self.wf.escalate_to();
        if let Some(gate) = self.wf.gates.get(subject) {
            return gate.decided_by().unwrap_or_else(escalate_to);
        }
        if let Some(node) = self.node(subject).filter(|n| n.kind() == NodeKind::Human) {
            return node.target.clone();
        }
        if let Some(p) = subject.strip_prefix("escalation.") {
            return vec![p.to_string()];
        }
        if subject.starts_with("reconcile.") {
            return escalate_to();
        }
        if let Some(judge) = semantics::judge_decl(self.program, self.wf, subject) {
            return judge.judged_by();
        }
        if let Some(board) = semantics::board_of_subject(subject).and_then(|(b, _)| self.program.decls.get(b)) {
            return semantics::board_deciders(self.program, self.wf, board);
        }
        if let Some(rest) = subject.strip_prefix("confirm.") {
            let mut out = escalate_to();
            let tool = rest.split('.').next().unwrap_or_default();
            if let Some(audit) = self.program.decls.get(tool).and_then(|d| d.audit()) {
                out.extend(audit.visible_to);
            }
            return out;
        }
        Vec::new()
    }

    /// Why `edge_taken from -> to via` is not an edge of the plan.
    pub(super) fn edge_problem(&self, from: &str, to: &str, via: &Via) -> Option<String> {
        if self.node(to).is_none() {
            return Some(format!("`{to}` is not a node of workflow `{}`", self.wf.name));
        }
        let plan_edge = |want: &Via| -> Option<String> {
            let vias: Vec<Via> = self.index.out_of_name(self.wf, from).filter(|e| e.to == to).map(|e| guard_via(&e.guard)).collect();
            if vias.is_empty() {
                return Some(format!("the plan has no edge {from} -> {to}"));
            }
            let listed = vias.iter().map(Via::to_string).collect::<Vec<_>>().join("`, `");
            (!vias.contains(want)).then(|| format!("the plan's edge {from} -> {to} is `{listed}`"))
        };
        let node_kind = |name: &str, kind: NodeKind| self.node(name).filter(|n| n.kind() == kind);
        match via {
            Via::Always | Via::Else | Via::When(_) => plan_edge(via),
            Via::Gate(gate) => match self.wf.gates.get(gate.as_str()) {
                Some(g) if g.from == from && g.to == to => None,
                Some(g) => Some(format!("gate `{gate}` guards {} -> {}", g.from, g.to)),
                None => Some(format!("the workflow declares no gate `{gate}`")),
            },
            Via::Fanout => match node_kind(from, NodeKind::Parallel) {
                Some(n) if n.target.iter().any(|b| b == to) => None,
                Some(_) => Some(format!("`{to}` is not a branch of parallel node `{from}`")),
                None => Some(format!("`{from}` is not a parallel node")),
            },
            Via::Join => match (node_kind(to, NodeKind::Join), self.index.join_of(from)) {
                (Some(_), Some(join)) if join == to => None,
                (Some(_), Some(join)) => Some(format!("`{from}` arrives at `{join}`, the first join that lists it, not at `{to}`")),
                (Some(_), None) => Some(format!("join `{to}` does not list `{from}`")),
                (None, _) => Some(format!("`{to}` is not a join node")),
            },
            Via::LoopRound => match node_kind(from, NodeKind::Loop) {
                Some(n) if n.target.first().is_some_and(|f| f == to) => None,
                Some(_) => Some(format!("a round of loop `{from}` starts at its first node, not `{to}`")),
                None => Some(format!("`{from}` is not a loop node")),
            },
            Via::MapItem(_) => match node_kind(from, NodeKind::Map) {
                Some(n) if n.target.first().is_some_and(|f| f == to) => None,
                Some(n) => Some(format!("map `{from}` runs `{}`, not `{to}`", n_target(n))),
                None => Some(format!("`{from}` is not a map node")),
            },
            Via::Goto | Via::Activate => {
                (!self.index.is_jump_target(to)).then(|| format!("no `goto({to})` or `activate({to})` action in the plan"))
            }
            Via::Revise => (from != to && !self.index.is_revise_target(to)).then(|| format!("no `revise({to})` action in the plan")),
            Via::Replan => (!self.index.is_replan_target(to))
                .then(|| format!("`{to}` is neither the start, a gate's replan scope, nor a `replan({to})` target")),
        }
    }
}

pub(super) fn n_target(n: &Node) -> &str {
    n.target.first().map(String::as_str).unwrap_or("")
}
