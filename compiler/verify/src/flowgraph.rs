//! The control-flow graph of one workflow, built from the plan index
//! ([`PlanIndex`]) and the step rules of [`flow_check::semantics`] — the
//! ones the engine and the model checker take steps by.
//!
//! Nodes are the workflow's nodes. Edges are the written edges plus the
//! implicit ones the node kinds imply:
//!
//! - `parallel [a, b]` fans out to each branch;
//! - `join [a, b]` is entered from each listed branch that arrives there
//!   (a branch arrives at the first join listing it, [`PlanIndex::join_of`]);
//! - `loop [b1, …, bn]` enters its round at `b1`; a round member's step
//!   ends the round and returns to the loop node when it may take no edge
//!   ([`semantics::may_fall_through`]), and a written edge that leaves the
//!   body is such a return, not a crossing ([`semantics::round_exit`]);
//! - `map x` runs `x` per item and returns to the map node;
//! - handler actions that name a node (`goto`, `activate`, `revise`,
//!   `replan(n)`) lead from the handler's owner (a gate's `from` node) to it.

use flow_check::index::PlanIndex;
use flow_check::ir::ActionKind;
use flow_check::ir::NodeKind;
use flow_check::ir::{Guard, Loc, Node, Workflow};
use flow_check::semantics;
use flow_diagnostics::{FileId, Span, Witness, WitnessStep};
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;
use petgraph::Direction;
use std::hash::Hasher;

/// A fast hasher for maps keyed by our own indices and names.
pub type FastHash = std::hash::BuildHasherDefault<rustc_hash::FxHasher>;

/// Each reached node and the node it was reached from (`None` for a
/// root), in the order the nodes were reached. Dense: one slot per graph
/// node, so membership and parent look-ups are array reads.
#[derive(Debug, Clone)]
pub struct Parents {
    /// Per node: `UNREACHED`, `ROOT`, or the parent's index.
    parent: Vec<u32>,
    /// The reached nodes, in the order they were reached.
    order: Vec<NodeIndex>,
}

const UNREACHED: u32 = u32::MAX;
const ROOT: u32 = u32::MAX - 1;

impl Parents {
    /// No node reached yet, over a graph of `nodes` nodes.
    pub fn new(nodes: usize) -> Parents {
        Parents { parent: vec![UNREACHED; nodes], order: Vec::new() }
    }

    /// Records `node` as reached from `parent`, unless it was reached
    /// already; returns whether it is new.
    pub fn insert(&mut self, node: NodeIndex, parent: Option<NodeIndex>) -> bool {
        let slot = &mut self.parent[node.index()];
        if *slot != UNREACHED {
            return false;
        }
        *slot = parent.map_or(ROOT, |p| p.index() as u32);
        self.order.push(node);
        true
    }

    pub fn contains_key(&self, node: &NodeIndex) -> bool {
        self.parent.get(node.index()).is_some_and(|&p| p != UNREACHED)
    }

    /// `None` when `node` was not reached, `Some(None)` for a root.
    pub fn get(&self, node: &NodeIndex) -> Option<Option<NodeIndex>> {
        match self.parent.get(node.index()).copied() {
            None | Some(UNREACHED) => None,
            Some(ROOT) => Some(None),
            Some(p) => Some(Some(NodeIndex::new(p as usize))),
        }
    }

    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The reached nodes, in the order they were reached.
    pub fn keys(&self) -> impl Iterator<Item = NodeIndex> + '_ {
        self.order.iter().copied()
    }
}

/// Why an edge of the control-flow graph exists.
#[derive(Debug, Clone, PartialEq)]
pub enum EdgeKind<'w> {
    /// A written edge; the index is into `Workflow::edges`.
    Written(usize),
    Fanout,
    Join,
    LoopEnter,
    LoopBack,
    /// A written edge (index into `Workflow::edges`) that leaves its loop's
    /// body: taking it ends the round, so it leads back to the loop node.
    RoundExit(usize),
    MapEnter,
    MapReturn,
    /// A handler action naming a node; `gate` is set for gate handlers.
    Handler {
        action: &'w str,
        gate: Option<&'w str>,
    },
}

impl EdgeKind<'_> {
    /// Edges that close a bounded iteration (a loop's or a map's).
    pub fn is_bounded_back_edge(&self) -> bool {
        matches!(self, EdgeKind::LoopBack | EdgeKind::RoundExit(_) | EdgeKind::MapReturn)
    }
}

/// Node indices by node name, without copying the names: a node's index is
/// its position in `workflow.nodes`.
///
/// Built once per graph (the checks look names up many times per node) as
/// an open-addressing table of node indices with a fast hash; a slot's name
/// is the workflow's own key at that index.
#[derive(Debug)]
pub struct NodeNames<'w> {
    nodes: &'w flow_check::ir::NameMap<Node>,
    /// Linear probing; `NodeIndex::end()` marks an empty slot. At most
    /// half full.
    slots: Vec<NodeIndex>,
    /// Per slot, the high half of its name's hash: most probes that miss
    /// are told apart without comparing names.
    tags: Vec<u32>,
}

impl<'w> NodeNames<'w> {
    fn new(nodes: &'w flow_check::ir::NameMap<Node>) -> NodeNames<'w> {
        let size = (nodes.len() * 2).next_power_of_two().max(8);
        let mut names = NodeNames { nodes, slots: vec![NodeIndex::end(); size], tags: vec![0; size] };
        let mask = size - 1;
        // Keys of an index map are distinct: no need to compare names.
        for (i, name) in nodes.keys().enumerate() {
            let (mut at, tag) = names.home(name);
            while names.slots[at] != NodeIndex::end() {
                at = (at + 1) & mask;
            }
            names.slots[at] = NodeIndex::new(i);
            names.tags[at] = tag;
        }
        names
    }

    /// A name's first slot and its tag.
    fn home(&self, name: &str) -> (usize, u32) {
        let mut hasher = rustc_hash::FxHasher::default();
        hasher.write(name.as_bytes());
        let hash = hasher.finish();
        ((hash as usize) & (self.slots.len() - 1), (hash >> 32) as u32)
    }

    pub fn get<Q: AsRef<str> + ?Sized>(&self, name: &Q) -> Option<&NodeIndex> {
        let name = name.as_ref();
        let mask = self.slots.len() - 1;
        let (mut at, tag) = self.home(name);
        loop {
            let slot = &self.slots[at];
            if *slot == NodeIndex::end() {
                return None;
            }
            if self.tags[at] == tag && self.nodes.get_index(slot.index()).is_some_and(|(key, _)| key == name) {
                return Some(slot);
            }
            at = (at + 1) & mask;
        }
    }
}

impl<Q: AsRef<str> + ?Sized> std::ops::Index<&Q> for NodeNames<'_> {
    type Output = NodeIndex;

    fn index(&self, name: &Q) -> &NodeIndex {
        self.get(name).expect("a node of this workflow")
    }
}

/// A written edge's source and target nodes, when they name nodes of the
/// workflow.
pub type EdgeEnds = (Option<NodeIndex>, Option<NodeIndex>);

#[derive(Debug)]
pub struct FlowGraph<'w> {
    pub workflow: &'w Workflow,
    /// Node weights are unit: a node's index is its position in
    /// `workflow.nodes`, where its name and data live.
    pub graph: DiGraph<(), EdgeKind<'w>>,
    /// Node indices by name, looked up in the workflow's own node map.
    pub index: NodeNames<'w>,
    pub start: Option<NodeIndex>,
    /// Nodes a workflow-level handler may jump to from anywhere.
    pub handler_roots: Vec<NodeIndex>,
    /// Per written edge (`Workflow::edges` order): its source and target
    /// nodes, when they name nodes of this workflow.
    pub edge_ends: Vec<EdgeEnds>,
    /// The plan's structure, as the engine and the model checker read it.
    pub plan: PlanIndex,
}

pub fn loc_span(loc: Loc) -> (FileId, Span) {
    (FileId(loc.file), Span { start: loc.start, end: loc.end })
}

impl<'w> FlowGraph<'w> {
    pub fn new(workflow: &'w Workflow, program: &'w flow_check::ir::Program) -> FlowGraph<'w> {
        let mut graph = DiGraph::with_capacity(workflow.nodes.len(), workflow.edges.len() + workflow.nodes.len() / 4);
        for _ in 0..workflow.nodes.len() {
            graph.add_node(());
        }
        let index = NodeNames::new(&workflow.nodes);
        let mut flow = FlowGraph {
            workflow,
            graph,
            index,
            start: None,
            handler_roots: Vec::new(),
            edge_ends: Vec::with_capacity(workflow.edges.len()),
            plan: PlanIndex::new(program, workflow),
        };
        if let Some(start) = workflow.start() {
            flow.start = flow.index.get(start).copied();
        }
        // Edges are usually written grouped by source or as chains
        // (`a -> b`, `b -> c`): try the previous edge's ends before hashing.
        let mut previous: Option<(&str, &str, EdgeEnds)> = None;
        for (i, edge) in workflow.edges.iter().enumerate() {
            let from = match previous {
                Some((from, _, (a, _))) if from == edge.from => a,
                Some((_, to, (_, b))) if to == edge.from => b,
                _ => flow.index.get(&edge.from).copied(),
            };
            let ends = (from, flow.index.get(&edge.to).copied());
            previous = Some((&edge.from, &edge.to, ends));
            if let (Some(a), Some(b)) = ends {
                match semantics::round_exit(workflow, &flow.plan, &edge.from, &edge.to).and_then(|lp| flow.index.get(lp).copied()) {
                    Some(lp) => flow.graph.add_edge(a, lp, EdgeKind::RoundExit(i)),
                    None => flow.graph.add_edge(a, b, EdgeKind::Written(i)),
                };
            }
            flow.edge_ends.push(ends);
        }
        // Graph nodes are added in the workflow's node order.
        for (i, node) in workflow.nodes.values().enumerate() {
            flow.add_implicit(NodeIndex::new(i), node);
        }
        for gate in workflow.gates.values() {
            for handler in &gate.handlers {
                if let Some(target) = node_target(&handler.action) {
                    flow.add(&gate.from, target, EdgeKind::Handler { action: handler.action.name.as_str(), gate: Some(&gate.name) });
                }
            }
            // A decision with no handler of its own takes the default
            // action (flow_check::semantics): `revise` re-runs `from`,
            // `replan` the replan scope or the whole workflow.
            if may_ask(gate, program) {
                for decision in gate.allowed_decisions() {
                    if flow_check::semantics::handler_for(&gate.handlers, decision.as_str()).is_some() {
                        continue;
                    }
                    let action = flow_check::semantics::gate_decision_action(gate, decision);
                    let target = match action.name {
                        ActionKind::Revise => flow.index.get(&gate.from).copied(),
                        ActionKind::Replan => {
                            flow_check::rerun::replan_entry(workflow, Some(gate)).and_then(|n| flow.index.get(n.as_str()).copied())
                        }
                        _ => None,
                    };
                    let (Some(from), Some(to)) = (flow.index.get(&gate.from).copied(), target) else { continue };
                    let name: &'static str = if action.name == flow_check::ir::ActionKind::Revise { "revise" } else { "replan" };
                    flow.graph.add_edge(from, to, EdgeKind::Handler { action: name, gate: Some(&gate.name) });
                }
            }
        }
        for handler in &workflow.handlers {
            if let Some(target) = node_target(&handler.action) {
                if let Some(&t) = flow.index.get(target) {
                    flow.handler_roots.push(t);
                }
            }
        }
        flow
    }

    fn add(&mut self, from: &str, to: &str, kind: EdgeKind<'w>) {
        if let (Some(&a), Some(&b)) = (self.index.get(from), self.index.get(to)) {
            self.graph.add_edge(a, b, kind);
        }
    }

    fn has_written_edge(&self, a: NodeIndex, b: NodeIndex) -> bool {
        self.graph.edges_connecting(a, b).any(|e| matches!(e.weight(), EdgeKind::Written(_)))
    }

    /// The implicit edges of `node`, the graph node `me`.
    fn add_implicit(&mut self, me: NodeIndex, node: &'w Node) {
        match node.kind() {
            NodeKind::Parallel => {
                for branch in &node.target {
                    if let Some(&b) = self.index.get(branch) {
                        if !self.has_written_edge(me, b) {
                            self.graph.add_edge(me, b, EdgeKind::Fanout);
                        }
                    }
                }
            }
            NodeKind::Join => {
                for branch in node.target.iter().filter(|b| self.plan.join_of(b) == Some(node.name.as_str())) {
                    if let Some(&b) = self.index.get(branch) {
                        if !self.has_written_edge(b, me) {
                            self.graph.add_edge(b, me, EdgeKind::Join);
                        }
                    }
                }
            }
            NodeKind::Loop => {
                if let Some(&first) = node.target.first().and_then(|m| self.index.get(m)) {
                    self.graph.add_edge(me, first, EdgeKind::LoopEnter);
                }
                // A member that may take none of its edges ends the round
                // (an edge leaving the body is a `RoundExit`, drawn above).
                for member in node.target.iter().filter(|m| self.plan.loop_of(m) == Some(node.name.as_str())) {
                    let Some(&m) = self.index.get(member) else { continue };
                    if semantics::may_fall_through(self.plan.out_of(self.workflow, m.index())) {
                        self.graph.add_edge(m, me, EdgeKind::LoopBack);
                    }
                }
            }
            NodeKind::Map => {
                if let Some(item) = node.target.first() {
                    if let Some(&x) = self.index.get(item) {
                        self.graph.add_edge(me, x, EdgeKind::MapEnter);
                        self.graph.add_edge(x, me, EdgeKind::MapReturn);
                    }
                }
            }
            _ => {}
        }
        for handler in &node.handlers {
            if let Some(target) = node_target(&handler.action) {
                if let Some(&t) = self.index.get(target) {
                    self.graph.add_edge(me, t, EdgeKind::Handler { action: handler.action.name.as_str(), gate: None });
                }
            }
        }
    }

    /// The node at a graph index. Graph nodes are added in the workflow's
    /// node order, so the index is the position in `workflow.nodes`.
    pub fn node(&self, index: NodeIndex) -> &'w Node {
        self.workflow.nodes.get_index(index.index()).map(|(_, node)| node).expect("graph nodes mirror the workflow's nodes")
    }

    pub fn name(&self, index: NodeIndex) -> &str {
        self.workflow.nodes.get_index(index.index()).map(|(name, _)| name.as_str()).unwrap_or_default()
    }

    /// The bare graph (same node indices) without the edges that close a
    /// loop round or a map item: what cycle analyses look at.
    pub fn without_bounded_back_edges(&self) -> petgraph::Graph<(), ()> {
        let mut bare = petgraph::Graph::<(), ()>::with_capacity(self.graph.node_count(), self.graph.edge_count());
        for _ in self.graph.node_indices() {
            bare.add_node(());
        }
        for edge in self.graph.edge_references() {
            if !edge.weight().is_bounded_back_edge() {
                bare.add_edge(edge.source(), edge.target(), ());
            }
        }
        bare
    }

    /// Whether a node ends the run when reached.
    pub fn is_terminal(&self, index: NodeIndex) -> bool {
        self.node(index).kind() == NodeKind::End
    }

    /// Whether the node has a handler that ends the run (terminate,
    /// fallback, return_partial, halt, escalate).
    pub fn has_terminating_handler(&self, index: NodeIndex) -> bool {
        self.node(index).handlers.iter().any(|h| is_terminating(h.action.name.as_str()))
    }

    /// Breadth-first search from the start (and workflow-level handler
    /// targets), skipping edges `skip` rejects. Returns each reached node's
    /// parent, for shortest witness paths.
    pub fn bfs(&self, skip: impl Fn(&EdgeKind<'w>, NodeIndex, NodeIndex) -> bool) -> Parents {
        let mut parent = Parents::new(self.graph.node_count());
        parent.order.reserve(self.graph.node_count());
        if let Some(start) = self.start {
            parent.insert(start, None);
        }
        for &root in &self.handler_roots {
            parent.insert(root, None);
        }
        // The queue is the reached order itself: nodes are reached in the
        // order they are dequeued.
        let mut next = 0;
        while let Some(&n) = parent.order.get(next) {
            next += 1;
            for edge in self.graph.edges_directed(n, Direction::Outgoing) {
                let target = edge.target();
                if parent.contains_key(&target) || skip(edge.weight(), n, target) {
                    continue;
                }
                parent.insert(target, Some(n));
            }
        }
        parent
    }

    /// The reached nodes and their parents, over every edge.
    pub fn reachable(&self) -> Parents {
        self.bfs(|_, _, _| false)
    }

    /// The path from the search root to `target` in a BFS parent map.
    pub fn path_to(&self, parents: &Parents, target: NodeIndex) -> Vec<NodeIndex> {
        let mut path = vec![target];
        let mut current = target;
        // A parent map is a tree, but guard against a malformed one anyway.
        while let Some(Some(p)) = parents.get(&current) {
            if path.len() > parents.len() {
                break;
            }
            path.push(p);
            current = p;
        }
        path.reverse();
        path
    }

    /// A witness over a node path, one step per node.
    pub fn witness(&self, path: &[NodeIndex]) -> Witness {
        let steps = path
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let node = self.node(n);
                let (file, span) = loc_span(node.loc);
                let message = if i == 0 {
                    format!("the run starts at `{}`", node.name)
                } else {
                    let previous = self.name(path[i - 1]);
                    format!("`{}` runs after `{previous}`{}", node.name, self.edge_note(path[i - 1], n))
                };
                WitnessStep { name: node.name.clone(), file, span, message }
            })
            .collect();
        Witness::path(steps)
    }

    /// A lasso witness: the prefix up to the cycle, then the cycle.
    pub fn lasso(&self, prefix: &[NodeIndex], cycle: &[NodeIndex]) -> Witness {
        let mut path: Vec<NodeIndex> = prefix.to_vec();
        let cycle_start = path.len();
        path.extend_from_slice(cycle);
        let mut witness = self.witness(&path);
        if let (Some(first), Some(last)) = (cycle.first(), cycle.last()) {
            let (file, span) = loc_span(self.node(*first).loc);
            let note = self.edge_note(*last, *first);
            witness.steps.push(WitnessStep {
                name: self.name(*first).to_string(),
                file,
                span,
                message: format!("back to `{}`{note}, and again", self.name(*first)),
            });
        }
        witness.cycle_start = Some(cycle_start);
        witness
    }

    fn edge_note(&self, from: NodeIndex, to: NodeIndex) -> String {
        let Some(edge) = self.graph.edges_connecting(from, to).next() else { return String::new() };
        match edge.weight() {
            EdgeKind::Written(i) => match &self.workflow.edges[*i].guard {
                Guard::Always => String::new(),
                Guard::Else => " (else)".into(),
                Guard::When(_) => " (when its guard holds)".into(),
            },
            EdgeKind::Fanout => " (fan-out)".into(),
            EdgeKind::Join => " (join)".into(),
            EdgeKind::LoopEnter => " (a round starts)".into(),
            EdgeKind::LoopBack => " (the round ends)".into(),
            EdgeKind::RoundExit(i) => format!(" (the edge to `{}` ends the round)", self.workflow.edges[*i].to),
            EdgeKind::MapEnter => " (per item)".into(),
            EdgeKind::MapReturn => " (item done)".into(),
            EdgeKind::Handler { action, gate: Some(gate) } => format!(" (gate `{gate}`: {action})"),
            EdgeKind::Handler { action, gate: None } => format!(" (handler: {action})"),
        }
    }
}

/// Whether a gate can ask for a decision: a `decide` handler, or an
/// outcome REQUIRES_DECISION its evaluators or `on_error` can give.
fn may_ask(gate: &flow_check::ir::Gate, program: &flow_check::ir::Program) -> bool {
    gate.handlers.iter().any(|h| h.action.name == flow_check::ir::ActionKind::Decide)
        || crate::gates::possible_exits(gate, program).iter().any(|e| e == "REQUIRES_DECISION")
}

/// The node an action leads to, if it names one.
pub fn node_target(action: &flow_check::ir::Action) -> Option<&str> {
    match action.name {
        ActionKind::Goto | ActionKind::Activate | ActionKind::Revise | ActionKind::Replan => action.args.first().map(String::as_str),
        _ => None,
    }
}

pub fn is_terminating(action: &str) -> bool {
    matches!(action, "terminate" | "fallback" | "return_partial" | "halt" | "escalate")
}
