//! The plan index: a workflow's structure computed once — outgoing edges
//! in order, the gate on each boundary, the handoff and delegation on each
//! boundary, loop, map and join membership, and the nodes actions can jump
//! to — for every reader of a plan (the engine, the model checker, trace
//! check). Two readers that each build "the gate on `a -> b`" are two
//! places for the meaning of a boundary to drift.

use crate::ir::NameMap;
use crate::ir::{ActionKind, Edge, Gate, Guard, NodeKind, Program, Transfer, TransferKind, Workflow};
use flow_trace::Via;
use indexmap::IndexSet;

/// A set of names, with the IR's fast hash.
type NameSet = IndexSet<String, rustc_hash::FxBuildHasher>;

/// A workflow's structure, by node name and by node index (the order of
/// `workflow.nodes`).
#[derive(Debug, Clone, Default)]
pub struct PlanIndex {
    /// The edges leaving each node (by node index), in declared order:
    /// indices into `workflow.edges`.
    out: Vec<Vec<usize>>,
    /// The gate on each boundary `from -> to`.
    gate_on: Boundaries<String>,
    /// The handoff (and the delegation) on each boundary: indices into
    /// `workflow.transfers`.
    handoff_on: Boundaries<usize>,
    delegation_on: Boundaries<usize>,
    /// Every transfer on each boundary, in declared order.
    transfers_on: Boundaries<Vec<usize>>,
    /// The loop a node is a round member of, the map it is the item node
    /// of, and the join it arrives at.
    loop_of: NameMap<String>,
    map_of: NameMap<String>,
    join_of: NameMap<String>,
    /// Nodes an action may jump to: `goto`/`activate` targets, `revise`
    /// targets, and where a REPLAN may start (the start node, each gate's
    /// replan scope, `replan(node)` arguments).
    jump_targets: NameSet,
    revise_targets: NameSet,
    replan_targets: NameSet,
    /// The hop limit on each pair of nodes, under both orders (see
    /// [`PlanIndex::hop_limit`]).
    hop_limit: Boundaries<u64>,
}

/// A value per boundary `from -> to`, looked up without allocating.
type Boundaries<V> = NameMap<NameMap<V>>;

fn on<'b, V>(map: &'b Boundaries<V>, from: &str, to: &str) -> Option<&'b V> {
    map.get(from)?.get(to)
}

impl PlanIndex {
    /// The index of `workflow` (of `program`).
    pub fn new(program: &Program, workflow: &Workflow) -> PlanIndex {
        let mut out = vec![Vec::new(); workflow.nodes.len()];
        for (i, edge) in workflow.edges.iter().enumerate() {
            if let Some(n) = workflow.nodes.get_index_of(&edge.from) {
                out[n].push(i);
            }
        }
        let mut gate_on: Boundaries<String> = NameMap::default();
        for g in workflow.gates.values() {
            gate_on.entry(g.from.clone()).or_default().entry(g.to.clone()).or_insert_with(|| g.name.clone());
        }
        let mut handoff_on: Boundaries<usize> = NameMap::default();
        let mut delegation_on: Boundaries<usize> = NameMap::default();
        for (i, t) in workflow.transfers.iter().enumerate() {
            let by = match t.kind() {
                TransferKind::Handoff => &mut handoff_on,
                TransferKind::Delegate => &mut delegation_on,
            };
            by.entry(t.from.clone()).or_default().entry(t.to.clone()).or_insert(i);
        }
        let mut transfers_on: Boundaries<Vec<usize>> = NameMap::default();
        for (i, t) in workflow.transfers.iter().enumerate() {
            transfers_on.entry(t.from.clone()).or_default().entry(t.to.clone()).or_default().push(i);
        }
        let mut index = PlanIndex { out, gate_on, handoff_on, delegation_on, transfers_on, ..PlanIndex::default() };
        for node in workflow.nodes.values() {
            match node.kind() {
                NodeKind::Loop => node.target.iter().for_each(|m| {
                    index.loop_of.insert(m.clone(), node.name.clone());
                }),
                NodeKind::Map => {
                    if let Some(item) = node.target.first() {
                        index.map_of.insert(item.clone(), node.name.clone());
                    }
                }
                NodeKind::Join => node.target.iter().for_each(|b| {
                    index.join_of.entry(b.clone()).or_insert_with(|| node.name.clone());
                }),
                _ => {}
            }
        }
        index.collect_targets(program, workflow);
        index.collect_hop_limits(workflow);
        index
    }

    /// A handoff's `max_hops` bounds its pair, both ways (the least, if
    /// two handoffs join the pair); the workflow's `max_hops` bounds every
    /// other pair of distinct nodes with edges both ways (a QUERY/RESPONSE
    /// ping-pong).
    fn collect_hop_limits(&mut self, workflow: &Workflow) {
        for t in &workflow.transfers {
            let Some(max) = t.max_hops() else { continue };
            for (a, b) in [(&t.from, &t.to), (&t.to, &t.from)] {
                let limit = self.hop_limit.entry(a.clone()).or_default().entry(b.clone()).or_insert(max);
                *limit = (*limit).min(max);
            }
        }
        let Some(max) = workflow.max_hops() else { return };
        for edge in &workflow.edges {
            let back = self.out_of_name(workflow, &edge.to).any(|e| e.to == edge.from);
            if edge.from != edge.to && back {
                for (a, b) in [(&edge.from, &edge.to), (&edge.to, &edge.from)] {
                    self.hop_limit.entry(a.clone()).or_default().entry(b.clone()).or_insert(max);
                }
            }
        }
    }

    /// How many times control may cross between `from` and `to` (either
    /// way, counted together over the run) before the next crossing
    /// raises `max_hops` instead: a handoff's `max_hops` on the pair, else
    /// the workflow's when the pair has edges both ways.
    pub fn hop_limit(&self, from: &str, to: &str) -> Option<u64> {
        on(&self.hop_limit, from, to).copied()
    }

    fn collect_targets(&mut self, program: &Program, workflow: &Workflow) {
        let mut actions = Vec::new();
        let handlers = workflow
            .handlers
            .iter()
            .chain(workflow.nodes.values().flat_map(|n| n.handlers.iter()))
            .chain(workflow.gates.values().flat_map(|g| g.handlers.iter()));
        actions.extend(handlers.map(|h| &h.action));
        actions.extend(crate::ceilings::value_actions(program, workflow));
        for action in actions {
            let Some(arg) = action.arg() else { continue };
            let set = match action.name {
                ActionKind::Goto | ActionKind::Activate => &mut self.jump_targets,
                ActionKind::Revise => &mut self.revise_targets,
                ActionKind::Replan => &mut self.replan_targets,
                _ => continue,
            };
            set.insert(arg.to_string());
        }
        if let Some(start) = workflow.start() {
            self.replan_targets.insert(start.to_string());
        }
        for gate in workflow.gates.values() {
            if let Some(entry) = crate::rerun::replan_entry(workflow, Some(gate)) {
                self.replan_targets.insert(entry);
            }
        }
    }

    /// The edges leaving the node at `node` (its index in
    /// `workflow.nodes`), in declared order.
    pub fn out_of<'w>(&self, workflow: &'w Workflow, node: usize) -> impl Iterator<Item = &'w Edge> + use<'_, 'w> {
        self.out.get(node).into_iter().flatten().map(move |&i| &workflow.edges[i])
    }

    /// The edges leaving the node named `node`, in declared order.
    pub fn out_of_name<'w>(&self, workflow: &'w Workflow, node: &str) -> impl Iterator<Item = &'w Edge> + use<'_, 'w> {
        let i = workflow.nodes.get_index_of(node).unwrap_or(usize::MAX);
        self.out_of(workflow, i)
    }

    /// The gate on the boundary `from -> to`.
    pub fn gate_on<'w>(&self, workflow: &'w Workflow, from: &str, to: &str) -> Option<&'w Gate> {
        on(&self.gate_on, from, to).and_then(|g| workflow.gates.get(g))
    }

    /// The name of the gate on the boundary `from -> to`.
    pub fn gate_name_on(&self, from: &str, to: &str) -> Option<&str> {
        on(&self.gate_on, from, to).map(String::as_str)
    }

    /// The handoff on the boundary `from -> to`.
    pub fn handoff_on<'w>(&self, workflow: &'w Workflow, from: &str, to: &str) -> Option<&'w Transfer> {
        on(&self.handoff_on, from, to).map(|&i| &workflow.transfers[i])
    }

    /// The delegation on the boundary `from -> to`.
    pub fn delegation_on<'w>(&self, workflow: &'w Workflow, from: &str, to: &str) -> Option<&'w Transfer> {
        on(&self.delegation_on, from, to).map(|&i| &workflow.transfers[i])
    }

    /// Every handoff and delegation on the boundary `from -> to`, in
    /// declared order.
    pub fn transfers_on<'w>(&self, workflow: &'w Workflow, from: &str, to: &str) -> impl Iterator<Item = &'w Transfer> + use<'_, 'w> {
        on(&self.transfers_on, from, to).into_iter().flatten().map(move |&i| &workflow.transfers[i])
    }

    /// The transfer a fan-out's `branch` is entered through (the step rule
    /// of reference §6.5 for a delegation to a branch): the first declared
    /// transfer into the branch from the fan-out node itself or from a node
    /// that has `completed`, if any.
    pub fn fanout_transfer<'w>(
        &self,
        workflow: &'w Workflow,
        fanout: &str,
        branch: &str,
        completed: impl Fn(&str) -> bool,
    ) -> Option<&'w Transfer> {
        workflow.transfers.iter().find(|t| t.to == branch && (t.from == fanout || completed(&t.from)))
    }

    /// The loop whose round `node` belongs to.
    pub fn loop_of(&self, node: &str) -> Option<&str> {
        self.loop_of.get(node).map(String::as_str)
    }

    /// The map whose item node `node` is.
    pub fn map_of(&self, node: &str) -> Option<&str> {
        self.map_of.get(node).map(String::as_str)
    }

    /// The join `node` arrives at as a branch: the first join that lists
    /// it (a later join listing it too never hears from it; W0108 says
    /// so). A listed branch's edge into its join, or its finishing with no
    /// edge taken, is an arrival there.
    pub fn join_of(&self, node: &str) -> Option<&str> {
        self.join_of.get(node).map(String::as_str)
    }

    /// Whether some `goto` or `activate` may jump to `node`.
    pub fn is_jump_target(&self, node: &str) -> bool {
        self.jump_targets.contains(node)
    }

    /// Whether some `revise` may re-run `node`.
    pub fn is_revise_target(&self, node: &str) -> bool {
        self.revise_targets.contains(node)
    }

    /// Whether a REPLAN may start at `node`.
    pub fn is_replan_target(&self, node: &str) -> bool {
        self.replan_targets.contains(node)
    }
}

/// The `via` an edge's guard gives the step that takes it (the guard
/// rendered as the source writes it).
pub fn guard_via(guard: &Guard) -> Via {
    match guard {
        Guard::Always => Via::Always,
        Guard::Else => Via::Else,
        Guard::When(cond) => Via::When(crate::render::render(cond)),
    }
}
