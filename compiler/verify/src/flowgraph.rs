//! The control-flow graph of one workflow, built from the IR.
//!
//! Nodes are the workflow's nodes. Edges are the written edges plus the
//! implicit ones the node kinds imply:
//!
//! - `parallel [a, b]` fans out to each branch;
//! - `join [a, b]` is entered from each listed branch;
//! - `loop [b1, …, bn]` enters its round at `b1`; a body node with no edge
//!   to another body node ends the round and returns to the loop node;
//! - `map x` runs `x` per item and returns to the map node;
//! - handler actions that name a node (`goto`, `activate`, `revise`,
//!   `replan(n)`) lead from the handler's owner (a gate's `from` node) to it.

use flow_check::ir::{Guard, Loc, Node, Workflow};
use flow_diagnostics::{FileId, Span, Witness, WitnessStep};
use indexmap::{IndexMap, IndexSet};
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;
use petgraph::Direction;
use std::collections::VecDeque;

/// A fast hasher for maps keyed by our own indices and names.
pub type FastHash = std::hash::BuildHasherDefault<rustc_hash::FxHasher>;

/// Each reached node and the node it was reached from (`None` for a root).
pub type Parents = IndexMap<NodeIndex, Option<NodeIndex>, FastHash>;

/// Why an edge of the control-flow graph exists.
#[derive(Debug, Clone, PartialEq)]
pub enum EdgeKind {
    /// A written edge; the index is into `Workflow::edges`.
    Written(usize),
    Fanout,
    Join,
    LoopEnter,
    LoopBack,
    MapEnter,
    MapReturn,
    /// A handler action naming a node; `gate` is set for gate handlers.
    Handler {
        action: String,
        gate: Option<String>,
    },
}

impl EdgeKind {
    /// Edges that close a bounded iteration (a loop's or a map's).
    pub fn is_bounded_back_edge(&self) -> bool {
        matches!(self, EdgeKind::LoopBack | EdgeKind::MapReturn)
    }
}

/// Node indices by node name, without copying the names: a node's index is
/// its position in `workflow.nodes`.
#[derive(Debug)]
pub struct NodeNames<'w> {
    /// Built once per graph with a fast hash: the checks look names up
    /// many times per node.
    ids: std::collections::HashMap<&'w str, NodeIndex, FastHash>,
}

impl NodeNames<'_> {
    pub fn get<Q: AsRef<str> + ?Sized>(&self, name: &Q) -> Option<&NodeIndex> {
        self.ids.get(name.as_ref())
    }
}

impl<Q: AsRef<str> + ?Sized> std::ops::Index<&Q> for NodeNames<'_> {
    type Output = NodeIndex;

    fn index(&self, name: &Q) -> &NodeIndex {
        self.get(name).expect("a node of this workflow")
    }
}

#[derive(Debug)]
pub struct FlowGraph<'w> {
    pub workflow: &'w Workflow,
    /// Node weights are unit: a node's index is its position in
    /// `workflow.nodes`, where its name and data live.
    pub graph: DiGraph<(), EdgeKind>,
    /// Node indices by name, looked up in the workflow's own node map.
    pub index: NodeNames<'w>,
    pub start: Option<NodeIndex>,
    /// Nodes a workflow-level handler may jump to from anywhere.
    pub handler_roots: Vec<NodeIndex>,
}

pub fn loc_span(loc: Loc) -> (FileId, Span) {
    (FileId(loc.file), Span { start: loc.start, end: loc.end })
}

impl<'w> FlowGraph<'w> {
    pub fn new(workflow: &'w Workflow) -> FlowGraph<'w> {
        let mut graph = DiGraph::with_capacity(workflow.nodes.len(), workflow.edges.len() + workflow.nodes.len() / 4);
        let ids = workflow.nodes.keys().map(|name| (name.as_str(), graph.add_node(()))).collect();
        let index = NodeNames { ids };
        let mut flow = FlowGraph { workflow, graph, index, start: None, handler_roots: Vec::new() };
        if let Some(flow_check::ir::Value::Node(start)) = workflow.props.get("start") {
            flow.start = flow.index.get(start).copied();
        }
        for (i, edge) in workflow.edges.iter().enumerate() {
            flow.add(&edge.from, &edge.to, EdgeKind::Written(i));
        }
        for node in workflow.nodes.values() {
            flow.add_implicit(node);
        }
        for gate in workflow.gates.values() {
            for handler in &gate.handlers {
                if let Some(target) = node_target(&handler.action) {
                    flow.add(&gate.from, target, EdgeKind::Handler { action: handler.action.name.clone(), gate: Some(gate.name.clone()) });
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

    fn add(&mut self, from: &str, to: &str, kind: EdgeKind) {
        if let (Some(&a), Some(&b)) = (self.index.get(from), self.index.get(to)) {
            self.graph.add_edge(a, b, kind);
        }
    }

    fn has_written_edge(&self, from: &str, to: &str) -> bool {
        match (self.index.get(from), self.index.get(to)) {
            (Some(&a), Some(&b)) => self.graph.edges_connecting(a, b).any(|e| matches!(e.weight(), EdgeKind::Written(_))),
            _ => false,
        }
    }

    fn add_implicit(&mut self, node: &Node) {
        match node.kind.as_str() {
            "parallel" => {
                for branch in &node.target {
                    if !self.has_written_edge(&node.name, branch) {
                        self.add(&node.name, branch, EdgeKind::Fanout);
                    }
                }
            }
            "join" => {
                for branch in &node.target {
                    if !self.has_written_edge(branch, &node.name) {
                        self.add(branch, &node.name, EdgeKind::Join);
                    }
                }
            }
            "loop" => {
                if let Some(first) = node.target.first() {
                    self.add(&node.name, first, EdgeKind::LoopEnter);
                }
                let body: IndexSet<NodeIndex> = node.target.iter().filter_map(|m| self.index.get(m).copied()).collect();
                for member in &node.target {
                    let Some(&m) = self.index.get(member) else { continue };
                    let stays_inside = self
                        .graph
                        .edges_directed(m, Direction::Outgoing)
                        .any(|e| matches!(e.weight(), EdgeKind::Written(_)) && body.contains(&e.target()));
                    if !stays_inside {
                        self.add(member, &node.name, EdgeKind::LoopBack);
                    }
                }
            }
            "map" => {
                if let Some(item) = node.target.first() {
                    self.add(&node.name, item, EdgeKind::MapEnter);
                    self.add(item, &node.name, EdgeKind::MapReturn);
                }
            }
            _ => {}
        }
        for handler in &node.handlers {
            if let Some(target) = node_target(&handler.action) {
                self.add(&node.name, target, EdgeKind::Handler { action: handler.action.name.clone(), gate: None });
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
        self.node(index).kind == "end"
    }

    /// Whether the node has a handler that ends the run (terminate,
    /// fallback, return_partial, halt, escalate).
    pub fn has_terminating_handler(&self, index: NodeIndex) -> bool {
        self.node(index).handlers.iter().any(|h| is_terminating(&h.action.name))
    }

    /// Breadth-first search from the start (and workflow-level handler
    /// targets), skipping edges `skip` rejects. Returns each reached node's
    /// parent, for shortest witness paths.
    pub fn bfs(&self, skip: impl Fn(&EdgeKind, NodeIndex, NodeIndex) -> bool) -> Parents {
        let mut parent: Parents = Parents::default();
        let mut queue = VecDeque::new();
        if let Some(start) = self.start {
            parent.insert(start, None);
            queue.push_back(start);
        }
        for &root in &self.handler_roots {
            if !parent.contains_key(&root) {
                parent.insert(root, None);
                queue.push_back(root);
            }
        }
        while let Some(n) = queue.pop_front() {
            for edge in self.graph.edges_directed(n, Direction::Outgoing) {
                let target = edge.target();
                if skip(edge.weight(), n, target) || parent.contains_key(&target) {
                    continue;
                }
                parent.insert(target, Some(n));
                queue.push_back(target);
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
            path.push(*p);
            current = *p;
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
            EdgeKind::MapEnter => " (per item)".into(),
            EdgeKind::MapReturn => " (item done)".into(),
            EdgeKind::Handler { action, gate: Some(gate) } => format!(" (gate `{gate}`: {action})"),
            EdgeKind::Handler { action, gate: None } => format!(" (handler: {action})"),
        }
    }
}

/// The node an action leads to, if it names one.
pub fn node_target(action: &flow_check::ir::Action) -> Option<&str> {
    match action.name.as_str() {
        "goto" | "activate" | "revise" | "replan" => action.args.first().map(String::as_str),
        _ => None,
    }
}

pub fn is_terminating(action: &str) -> bool {
    matches!(action, "terminate" | "fallback" | "return_partial" | "halt" | "escalate")
}
