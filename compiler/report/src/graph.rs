//! A workflow's graph as the page draws it — nodes with their kind and
//! target, edges with what they mean (a guard, a loop's round, a handler's
//! jump, a gate) — and its layered layout: left to right, back edges
//! (loops, revisions) drawn as arcs beneath.

use flow_check::ir::{Guard, Program, Workflow};
use flow_verify::{EdgeKind, FlowGraph};
use petgraph::visit::EdgeRef;

/// A node of the drawing.
#[derive(Debug, Clone, PartialEq)]
pub struct GNode {
    pub name: String,
    /// `agent`, `tool`, `loop`, … (the node kind).
    pub kind: String,
    /// What it runs: the agent, tool or principal; the nodes of a loop.
    pub target: String,
    /// The declared bound of a loop's rounds.
    pub max_rounds: Option<u64>,
}

/// What an edge of the drawing is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GEdgeKind {
    /// Written in the file (with or without a guard).
    Written,
    /// A parallel's fan-out, a branch into its join, a loop or map entering its body.
    Structural,
    /// A loop's next round, a map's next item.
    Round,
    /// A handler's jump (`goto`, `revise`, …).
    Handler,
}

/// An edge of the drawing.
#[derive(Debug, Clone, PartialEq)]
pub struct GEdge {
    pub from: usize,
    pub to: usize,
    pub kind: GEdgeKind,
    /// `when …`, `else`, `round`, the handler's action.
    pub label: String,
    /// The gate on this boundary.
    pub gate: Option<String>,
    /// Drawn as an arc beneath (it goes back in the layout).
    pub back: bool,
    /// The places it passes through on its way across layers (indices
    /// into [`Graph::place`] past the nodes), in order.
    pub via: Vec<usize>,
}

/// A workflow's drawing: nodes in declared order, edges, positions.
#[derive(Debug, Clone, PartialEq)]
pub struct Graph {
    pub workflow: String,
    pub start: Option<usize>,
    pub nodes: Vec<GNode>,
    pub edges: Vec<GEdge>,
    /// Each node's (layer, row), then the places edges pass through when
    /// they cross more than one layer (so no edge runs through a node).
    pub place: Vec<(usize, usize)>,
}

impl Graph {
    /// The graph of `workflow`, laid out.
    pub fn of(program: &Program, workflow: &Workflow) -> Graph {
        let flow = FlowGraph::new(workflow, program);
        let index = |name: &str| workflow.nodes.get_index_of(name);
        let nodes: Vec<GNode> = workflow
            .nodes
            .values()
            .map(|n| GNode { name: n.name.clone(), kind: n.kind().to_string(), target: n.target.join(", "), max_rounds: n.max_rounds() })
            .collect();
        let mut edges = Vec::new();
        for edge in flow.graph.edge_references() {
            let (from, to) = (flow.name(edge.source()), flow.name(edge.target()));
            let (Some(f), Some(t)) = (index(from), index(to)) else { continue };
            let (kind, label) = match edge.weight() {
                EdgeKind::Written(i) => match &workflow.edges[*i].guard {
                    Guard::When(_) => (GEdgeKind::Written, format!("when {}", guard_text(workflow, *i))),
                    Guard::Else => (GEdgeKind::Written, "else".to_string()),
                    Guard::Always => (GEdgeKind::Written, String::new()),
                },
                EdgeKind::Handler { action, .. } => (GEdgeKind::Handler, action.to_string()),
                EdgeKind::LoopBack | EdgeKind::RoundExit(_) => (GEdgeKind::Round, "round".to_string()),
                EdgeKind::MapReturn => (GEdgeKind::Round, "item".to_string()),
                EdgeKind::Fanout | EdgeKind::Join | EdgeKind::LoopEnter | EdgeKind::MapEnter => (GEdgeKind::Structural, String::new()),
            };
            let gate = matches!(kind, GEdgeKind::Written)
                .then(|| workflow.gates.values().find(|g| g.from == from && g.to == to).map(|g| g.name.clone()))
                .flatten();
            edges.push(GEdge { from: f, to: t, kind, label, gate, back: false, via: Vec::new() });
        }
        let start = flow.start.and_then(|s| index(flow.name(s)));
        let mut graph = Graph { workflow: workflow.name.clone(), start, nodes, edges, place: Vec::new() };
        graph.lay_out();
        graph
    }

    /// The index of the node named `name`.
    pub fn index(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }

    /// Layers by the longest path over the edges that go forward (a
    /// depth-first walk from the start marks the rest as back edges), then
    /// rows ordered by the mean row of each node's predecessors, a few
    /// sweeps.
    fn lay_out(&mut self) {
        let n = self.nodes.len();
        self.mark_back_edges();
        let mut layer = vec![0usize; n];
        // Longest path: relax forward edges until nothing moves (n rounds
        // at most: the forward edges are acyclic).
        for _ in 0..n {
            let mut moved = false;
            for e in self.edges.iter().filter(|e| !e.back && e.from != e.to) {
                if layer[e.to] < layer[e.from] + 1 {
                    layer[e.to] = layer[e.from] + 1;
                    moved = true;
                }
            }
            if !moved {
                break;
            }
        }
        // A forward edge across several layers passes through a place in
        // each layer between: the links between consecutive places are
        // what the ordering sees.
        let mut links: Vec<(usize, usize)> = Vec::new();
        for e in self.edges.iter_mut().filter(|e| !e.back) {
            let mut prev = e.from;
            for l in layer[e.from] + 1..layer[e.to] {
                let place = layer.len();
                layer.push(l);
                e.via.push(place);
                links.push((prev, place));
                prev = place;
            }
            links.push((prev, e.to));
        }
        let layers = layer.iter().max().map_or(0, |m| m + 1);
        let mut rows: Vec<Vec<usize>> = vec![Vec::new(); layers];
        for (i, l) in layer.iter().enumerate() {
            rows[*l].push(i);
        }
        for _ in 0..4 {
            for l in 1..layers {
                let prev = rows[l - 1].clone();
                order_by_mean(&mut rows[l], |v| links.iter().filter(move |k| k.1 == v).map(|k| k.0), &prev);
            }
            for l in (0..layers.saturating_sub(1)).rev() {
                let next = rows[l + 1].clone();
                order_by_mean(&mut rows[l], |v| links.iter().filter(move |k| k.0 == v).map(|k| k.1), &next);
            }
        }
        self.place = vec![(0, 0); layer.len()];
        for (l, row) in rows.iter().enumerate() {
            for (r, v) in row.iter().enumerate() {
                self.place[*v] = (l, r);
            }
        }
    }

    /// Marks the edges a depth-first walk (from the start, then from every
    /// node not yet reached, in declared order) finds going back to a node
    /// on its stack.
    fn mark_back_edges(&mut self) {
        let n = self.nodes.len();
        // 0: not seen, 1: on the stack, 2: done.
        let mut state = vec![0u8; n];
        let roots: Vec<usize> = self.start.into_iter().chain(0..n).collect();
        for root in roots {
            if state[root] != 0 {
                continue;
            }
            // An explicit stack of (node, next edge to look at).
            let mut stack = vec![(root, 0usize)];
            state[root] = 1;
            while let Some(&mut (v, ref mut next)) = stack.last_mut() {
                let out = self.edges.iter().enumerate().filter(|(_, e)| e.from == v).map(|(i, _)| i).nth(*next);
                *next += 1;
                match out {
                    Some(i) => {
                        let to = self.edges[i].to;
                        match state[to] {
                            0 => {
                                state[to] = 1;
                                stack.push((to, 0));
                            }
                            1 => self.edges[i].back = true,
                            _ => {}
                        }
                    }
                    None => {
                        state[v] = 2;
                        stack.pop();
                    }
                }
            }
        }
    }
}

/// Sorts `row` by the mean position in `other` of each node's neighbours
/// (`neighbours`); a node with none keeps its place. Stable, so ties keep
/// the declared order.
fn order_by_mean<I: Iterator<Item = usize>>(row: &mut [usize], neighbours: impl Fn(usize) -> I, other: &[usize]) {
    let keys: Vec<(usize, f64)> = row
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let at: Vec<f64> = neighbours(v).filter_map(|u| other.iter().position(|&o| o == u)).map(|p| p as f64).collect();
            (v, if at.is_empty() { i as f64 } else { at.iter().sum::<f64>() / at.len() as f64 })
        })
        .collect();
    let mut sorted = keys;
    sorted.sort_by(|a, b| a.1.partial_cmp(&b.1).unwrap_or(std::cmp::Ordering::Equal));
    for (slot, (v, _)) in row.iter_mut().zip(sorted) {
        *slot = v;
    }
}

/// A guard's source text, as the engine records it on the edge it takes.
fn guard_text(workflow: &Workflow, edge: usize) -> String {
    match &workflow.edges[edge].guard {
        Guard::When(expr) => flow_check::render::render(expr),
        _ => String::new(),
    }
}
