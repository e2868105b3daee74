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
    /// It goes back in the layout (a loop's round, a revision).
    pub back: bool,
    /// Drawn as an arc beneath though it goes forward (a handler's jump
    /// across layers, or any edge across more than a few).
    pub arc: bool,
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
                EdgeKind::Written(i) => (GEdgeKind::Written, written_label(workflow, *i)),
                EdgeKind::Handler { action, .. } => (GEdgeKind::Handler, action.to_string()),
                EdgeKind::LoopBack => (GEdgeKind::Round, "round".to_string()),
                // A written edge out of the loop's body: it ends the round.
                EdgeKind::RoundExit(i) => {
                    (GEdgeKind::Round, format!("{} (ends the round)", written_label(workflow, *i)).trim_start().to_string())
                }
                EdgeKind::MapReturn => (GEdgeKind::Round, "item".to_string()),
                EdgeKind::Fanout | EdgeKind::Join | EdgeKind::LoopEnter | EdgeKind::MapEnter => (GEdgeKind::Structural, String::new()),
            };
            // A gate sits on a written edge: the one drawn, or the one a
            // round exit stands for.
            let written_to = match edge.weight() {
                EdgeKind::Written(_) => Some(to),
                EdgeKind::RoundExit(i) => Some(workflow.edges[*i].to.as_str()),
                _ => None,
            };
            let gate = written_to.and_then(|to| workflow.gates.values().find(|g| g.from == from && g.to == to)).map(|g| g.name.clone());
            edges.push(GEdge { from: f, to: t, kind, label, gate, back: false, arc: false, via: Vec::new() });
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
    /// depth-first walk from the start marks the rest as back edges), a
    /// place in each layer an edge crosses, then rows ordered by the mean
    /// row of each place's neighbours, a few sweeps. Linear in the edges
    /// per sweep: a workflow of thousands of nodes lays out at once.
    fn lay_out(&mut self) {
        self.mark_back_edges();
        let mut layer = self.longest_paths();
        // A handler's jump across layers, and any edge across many, is an
        // arc beneath rather than a chain of places (a goto from every node
        // of a long chain would otherwise need a place per pair).
        for e in self.edges.iter_mut().filter(|e| !e.back) {
            let span = layer[e.to].saturating_sub(layer[e.from]);
            e.arc = span > MAX_SPAN || (span > 1 && e.kind == GEdgeKind::Handler);
        }
        // A forward edge across several layers passes through a place in
        // each layer between: the links between consecutive places are
        // what the ordering sees.
        let mut links: Vec<(usize, usize)> = Vec::new();
        for e in self.edges.iter_mut().filter(|e| !e.back && !e.arc && e.from != e.to) {
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
        let rows = order_rows(&layer, &links);
        self.place = vec![(0, 0); layer.len()];
        for (l, row) in rows.iter().enumerate() {
            for (r, v) in row.iter().enumerate() {
                self.place[*v] = (l, r);
            }
        }
    }

    /// Each node's layer: the longest path to it over the forward edges,
    /// taken in a topological order.
    fn longest_paths(&self) -> Vec<usize> {
        let n = self.nodes.len();
        let mut indegree = vec![0usize; n];
        let mut out: Vec<Vec<usize>> = vec![Vec::new(); n];
        for e in self.edges.iter().filter(|e| !e.back && e.from != e.to) {
            indegree[e.to] += 1;
            out[e.from].push(e.to);
        }
        let mut layer = vec![0usize; n];
        let mut ready: std::collections::VecDeque<usize> = (0..n).filter(|&v| indegree[v] == 0).collect();
        while let Some(v) = ready.pop_front() {
            for &t in &out[v] {
                layer[t] = layer[t].max(layer[v] + 1);
                indegree[t] -= 1;
                if indegree[t] == 0 {
                    ready.push_back(t);
                }
            }
        }
        layer
    }

    /// Marks the edges a depth-first walk (from the start, then from every
    /// node not yet reached, in declared order) finds going back to a node
    /// on its stack; a self-loop is one.
    fn mark_back_edges(&mut self) {
        let n = self.nodes.len();
        let mut out: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, e) in self.edges.iter().enumerate() {
            out[e.from].push(i);
        }
        // 0: not seen, 1: on the stack, 2: done.
        let mut state = vec![0u8; n];
        let roots: Vec<usize> = self.start.into_iter().chain(0..n).collect();
        for root in roots {
            if state[root] != 0 {
                continue;
            }
            // An explicit stack of (node, next of its edges to look at).
            let mut stack = vec![(root, 0usize)];
            state[root] = 1;
            while let Some(&mut (v, ref mut next)) = stack.last_mut() {
                let edge = out[v].get(*next).copied();
                *next += 1;
                match edge {
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

/// The widest span an edge crosses through places; past it, an arc.
const MAX_SPAN: usize = 6;

/// The rows of each layer, ordered: sweeps down (by the mean row of each
/// place's predecessors) and up (of its successors); a place with no
/// neighbour keeps its row. Stable, so ties keep the declared order.
fn order_rows(layer: &[usize], links: &[(usize, usize)]) -> Vec<Vec<usize>> {
    let mut rows: Vec<Vec<usize>> = vec![Vec::new(); layer.iter().max().map_or(0, |m| m + 1)];
    for (v, l) in layer.iter().enumerate() {
        rows[*l].push(v);
    }
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); layer.len()];
    let mut succs: Vec<Vec<usize>> = vec![Vec::new(); layer.len()];
    for &(a, b) in links {
        succs[a].push(b);
        preds[b].push(a);
    }
    let mut pos = vec![0usize; layer.len()];
    let mark = |row: &[usize], pos: &mut [usize]| row.iter().enumerate().for_each(|(i, &v)| pos[v] = i);
    rows.iter().for_each(|row| mark(row, &mut pos));
    for _ in 0..4 {
        for row in rows.iter_mut().skip(1) {
            sort_row(row, &preds, &pos);
            mark(row, &mut pos);
        }
        for row in rows.iter_mut().rev().skip(1) {
            sort_row(row, &succs, &pos);
            mark(row, &mut pos);
        }
    }
    rows
}

fn sort_row(row: &mut [usize], neighbours: &[Vec<usize>], pos: &[usize]) {
    let mut keyed: Vec<(f64, usize)> = row
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let around = &neighbours[v];
            let key = if around.is_empty() { i as f64 } else { around.iter().map(|&u| pos[u] as f64).sum::<f64>() / around.len() as f64 };
            (key, v)
        })
        .collect();
    keyed.sort_by(|a, b| a.0.total_cmp(&b.0));
    for (slot, (_, v)) in row.iter_mut().zip(keyed) {
        *slot = v;
    }
}

/// A written edge's label: `when GUARD`, `else`, or nothing.
fn written_label(workflow: &Workflow, edge: usize) -> String {
    match &workflow.edges[edge].guard {
        Guard::When(_) => format!("when {}", guard_text(workflow, edge)),
        Guard::Else => "else".to_string(),
        Guard::Always => String::new(),
    }
}

/// A guard's source text, as the engine records it on the edge it takes.
fn guard_text(workflow: &Workflow, edge: usize) -> String {
    match &workflow.edges[edge].guard {
        Guard::When(expr) => flow_check::render::render(expr),
        _ => String::new(),
    }
}
