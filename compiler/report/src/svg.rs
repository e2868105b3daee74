//! The graph as SVG: nodes by status, edges taken, gates with their
//! outcomes, loops with their rounds. Every name goes through [`esc`].

use crate::graph::{GEdgeKind, Graph};
use crate::page::esc;
use crate::run::{EdgeClass, NodeState, RunView};
use std::fmt::Write;

const NODE_W: f64 = 168.0;
const NODE_H: f64 = 54.0;
const MARGIN: f64 = 36.0;
/// Room beside the rows (or beneath the columns) for each back edge's arc.
const ARC_ROOM: f64 = 18.0;

/// Where things go: left to right for shallow graphs, top to bottom past
/// [`Geometry::MAX_COLUMNS`] layers (a long chain stays readable).
struct Geometry {
    vertical: bool,
    /// How many nodes the fullest layer holds.
    widest: usize,
    layers: usize,
    /// How many nodes (and places) each layer holds.
    counts: Vec<usize>,
    /// Lanes beneath (or beside) the graph for arcs: one per arc, up to
    /// [`Geometry::MAX_LANES`]; past that they share.
    backs: usize,
}

impl Geometry {
    const MAX_COLUMNS: usize = 6;
    const MAX_LANES: usize = 12;

    fn of(graph: &Graph) -> Geometry {
        let layers = graph.place.iter().map(|p| p.0).max().map_or(0, |m| m + 1);
        let mut counts = vec![0usize; layers];
        for p in &graph.place {
            counts[p.0] += 1;
        }
        let widest = counts.iter().copied().max().unwrap_or(1);
        let backs = graph.edges.iter().filter(|e| e.back || e.arc).count().min(Geometry::MAX_LANES);
        Geometry { vertical: layers > Geometry::MAX_COLUMNS, widest, layers, counts, backs }
    }

    /// The gap between layers and between the nodes of one layer.
    fn gaps(&self) -> (f64, f64) {
        if self.vertical {
            (58.0, 44.0)
        } else {
            (140.0, 28.0)
        }
    }

    /// A node's box: its top-left corner.
    fn corner(&self, graph: &Graph, i: usize) -> (f64, f64) {
        let (layer, row) = graph.place[i];
        let rows = self.counts[layer];
        let (layer_gap, row_gap) = self.gaps();
        if self.vertical {
            let offset = (self.widest - rows) as f64 * (NODE_W + row_gap) / 2.0;
            (MARGIN + offset + row as f64 * (NODE_W + row_gap), MARGIN + 14.0 + layer as f64 * (NODE_H + layer_gap))
        } else {
            let offset = (self.widest - rows) as f64 * (NODE_H + row_gap) / 2.0;
            (MARGIN + 14.0 + layer as f64 * (NODE_W + layer_gap), MARGIN + offset + row as f64 * (NODE_H + row_gap))
        }
    }

    /// The size of the drawing.
    fn size(&self) -> (f64, f64) {
        let (layer_gap, row_gap) = self.gaps();
        let (width, height) = if self.vertical {
            // Room on the right for the gates' names beside their edges.
            let width = 2.0 * MARGIN + self.widest as f64 * (NODE_W + row_gap) - row_gap + self.backs as f64 * ARC_ROOM + 200.0;
            (width, 2.0 * MARGIN + 14.0 + self.layers as f64 * (NODE_H + layer_gap) - layer_gap)
        } else {
            let height = 2.0 * MARGIN + self.widest as f64 * (NODE_H + row_gap) - row_gap + self.backs as f64 * ARC_ROOM;
            (2.0 * MARGIN + 14.0 + self.layers as f64 * (NODE_W + layer_gap) - layer_gap, height)
        };
        (width.max(200.0), height.max(100.0))
    }

    /// The path of an edge and where its label goes.
    /// The path of an edge, where its label goes and where its gate sits.
    fn edge_path(&self, graph: &Graph, edge: &crate::graph::GEdge, back_no: Option<usize>) -> (String, (f64, f64), (f64, f64)) {
        let (from, to, via) = (edge.from, edge.to, &edge.via);
        let (fx, fy) = self.corner(graph, from);
        let (tx, ty) = self.corner(graph, to);
        let (width, height) = self.size();
        match (back_no, self.vertical) {
            (Some(k), false) => {
                let y = height - MARGIN - (self.backs - k % self.backs) as f64 * ARC_ROOM;
                let (sx, sy, ex, ey) = (fx + NODE_W * 0.6, fy + NODE_H, tx + NODE_W * 0.4, ty + NODE_H);
                (
                    format!("M{sx:.1},{sy:.1} C{sx:.1},{y:.1} {ex:.1},{y:.1} {ex:.1},{ey:.1}"),
                    ((sx + ex) / 2.0, y - 4.0),
                    ((sx + ex) / 2.0, y - 4.0),
                )
            }
            (Some(k), true) => {
                let x = width - MARGIN - (self.backs - k % self.backs) as f64 * ARC_ROOM;
                let (sx, sy, ex, ey) = (fx + NODE_W, fy + NODE_H * 0.6, tx + NODE_W, ty + NODE_H * 0.4);
                (
                    format!("M{sx:.1},{sy:.1} C{x:.1},{sy:.1} {x:.1},{ey:.1} {ex:.1},{ey:.1}"),
                    (x - 4.0, (sy + ey) / 2.0),
                    (x - 4.0, (sy + ey) / 2.0),
                )
            }
            (None, vertical) => {
                // Out of the source's side, through each place on the way, into the target's.
                let mut points = vec![if vertical { (fx + NODE_W / 2.0, fy + NODE_H) } else { (fx + NODE_W, fy + NODE_H / 2.0) }];
                for &p in via {
                    let (x, y) = self.corner(graph, p);
                    points.push((x + NODE_W / 2.0, y + NODE_H / 2.0));
                }
                points.push(if vertical { (tx + NODE_W / 2.0, ty) } else { (tx, ty + NODE_H / 2.0) });
                let mut d = format!("M{:.1},{:.1}", points[0].0, points[0].1);
                let (mut label, mut gate) = (points[0], points[0]);
                for (i, pair) in points.windows(2).enumerate() {
                    let ((sx, sy), (ex, ey)) = (pair[0], pair[1]);
                    let curve = if vertical {
                        let c = (ey - sy).abs().max(30.0) / 2.0;
                        [(sx, sy), (sx, sy + c), (ex, ey - c), (ex, ey)]
                    } else {
                        let c = (ex - sx).abs().max(40.0) / 2.0;
                        [(sx, sy), (sx + c, sy), (ex - c, ey), (ex, ey)]
                    };
                    let _ = write!(d, " C{:.1},{:.1} {:.1},{:.1} {ex:.1},{ey:.1}", curve[1].0, curve[1].1, curve[2].0, curve[2].1);
                    // The label sits on the last stretch: above the arrow
                    // going left to right, beside it going down.
                    if i + 2 == points.len() {
                        label = if vertical { at(&curve, 0.6) } else { (ex - 8.0, ey - 3.0) };
                        gate = at(&curve, 0.45);
                    }
                }
                (d, label, gate)
            }
        }
    }
}

/// The point at `t` of a cubic Bézier curve.
fn at(p: &[(f64, f64); 4], t: f64) -> (f64, f64) {
    let u = 1.0 - t;
    let (a, b, c, d) = (u * u * u, 3.0 * u * u * t, 3.0 * u * t * t, t * t * t);
    (a * p[0].0 + b * p[1].0 + c * p[2].0 + d * p[3].0, a * p[0].1 + b * p[1].1 + c * p[2].1 + d * p[3].1)
}

/// The graph, with `run` drawn on it when there is one.
pub fn draw(graph: &Graph, run: Option<&RunView>) -> String {
    let geo = Geometry::of(graph);
    let (width, height) = geo.size();
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg class="graph" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0} {height:.0}" width="{width:.0}" height="{height:.0}" role="img" aria-label="workflow {}">"#,
        esc(&graph.workflow)
    );
    out.push_str(r#"<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerUnits="userSpaceOnUse" markerWidth="9" markerHeight="9" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="context-stroke"/></marker></defs>"#);
    let mut back_no = 0;
    for edge in &graph.edges {
        let back = (edge.back || edge.arc).then(|| {
            back_no += 1;
            back_no - 1
        });
        let (d, mid, gate_at) = geo.edge_path(graph, edge, back);
        let taken = run.and_then(|r| taken(graph, edge, r));
        edge_svg(&mut out, graph, edge, (&d, mid, gate_at, geo.vertical), taken, run);
    }
    if let Some(start) = graph.start {
        let (x, y) = geo.corner(graph, start);
        let (cx, cy, ex, ey) = if geo.vertical {
            (x + NODE_W / 2.0, y - 22.0, x + NODE_W / 2.0, y)
        } else {
            (x - 22.0, y + NODE_H / 2.0, x, y + NODE_H / 2.0)
        };
        let _ = write!(
            out,
            r#"<g class="start"><circle cx="{cx:.1}" cy="{cy:.1}" r="5"/><path class="edge-line" d="M{cx:.1},{cy:.1} L{ex:.1},{ey:.1}" marker-end="url(#arrow)"/></g>"#
        );
    }
    for i in 0..graph.nodes.len() {
        let corner = geo.corner(graph, i);
        node_svg(&mut out, graph, i, corner, run);
    }
    out.push_str("</svg>");
    out
}

/// How often the run took `edge`: as recorded (`edge_taken`, matched by
/// its ends and by how it was taken — a written edge's guard or gate, a
/// handler's jump, a structural move), or for the edges the engine does
/// not record — back to a loop for its next round, out of the loop's body
/// — how often a visit of their source ended with no edge out of it, when
/// that source has only one such edge (else which one was taken is not
/// known from the events, and none is drawn taken).
fn taken(graph: &Graph, edge: &crate::graph::GEdge, run: &RunView) -> Option<u32> {
    let (from, to) = (&graph.nodes[edge.from].name, &graph.nodes[edge.to].name);
    let class = match edge.kind {
        GEdgeKind::Written => EdgeClass::Written,
        GEdgeKind::Handler => EdgeClass::Handler,
        GEdgeKind::Structural => EdgeClass::Structural,
        GEdgeKind::Round => {
            let alone = graph.edges.iter().filter(|e| e.from == edge.from && e.kind == GEdgeKind::Round).count() == 1;
            let ends = run.nodes.get(from).map_or(0, |n| n.round_ends);
            return (alone && ends > 0).then_some(ends);
        }
    };
    run.edges.get(&(from.clone(), to.clone(), class)).copied()
}

fn edge_svg(
    out: &mut String,
    graph: &Graph,
    edge: &crate::graph::GEdge,
    (d, mid, gate_at, vertical): (&str, (f64, f64), (f64, f64), bool),
    taken: Option<u32>,
    run: Option<&RunView>,
) {
    let kind = match edge.kind {
        GEdgeKind::Written => "written",
        GEdgeKind::Structural => "structural",
        GEdgeKind::Round => "round",
        GEdgeKind::Handler => "handler",
    };
    let state = match (run, taken) {
        (None, _) => "plan",
        (Some(_), Some(_)) => "taken",
        (Some(_), None) => "untaken",
    };
    let (from, to) = (&graph.nodes[edge.from].name, &graph.nodes[edge.to].name);
    let _ = write!(out, r#"<g class="edge {kind} {state}" data-from="{}" data-to="{}">"#, esc(from), esc(to));
    let _ = write!(out, r#"<path class="edge-line" d="{d}" marker-end="url(#arrow)"/>"#);
    let mut label = shorten_head(&edge.label, 26);
    if let Some(n) = taken.filter(|n| *n > 1) {
        label = if label.is_empty() { format!("×{n}") } else { format!("{label} ×{n}") };
    }
    if !label.is_empty() {
        let anchor = if edge.back || edge.arc || vertical { "middle" } else { "end" };
        let _ = write!(
            out,
            r#"<text class="edge-label" text-anchor="{anchor}" x="{:.1}" y="{:.1}">{}</text>"#,
            mid.0,
            mid.1 - 5.0,
            esc(&label)
        );
        let _ = write!(out, "<title>{}</title>", esc(&edge.label));
    }
    if let Some(gate) = &edge.gate {
        gate_svg(out, gate, gate_at, run);
    }
    out.push_str("</g>");
}

fn gate_svg(out: &mut String, gate: &str, (x, y): (f64, f64), run: Option<&RunView>) {
    let runs: Vec<&crate::run::GateRun> = run.map(|r| r.gates.iter().filter(|g| g.gate == gate).collect()).unwrap_or_default();
    let outcome = runs.last().map_or(if run.is_some() { "not_evaluated" } else { "plan" }, |g| g.outcome.as_str());
    let _ = write!(out, r#"<g class="gate outcome-{}" data-gate="{}" tabindex="0">"#, esc(outcome), esc(gate));
    let _ = write!(out, r#"<path d="M{x:.1},{:.1} L{:.1},{y:.1} L{x:.1},{:.1} L{:.1},{y:.1} z"/>"#, y - 9.0, x + 9.0, y + 9.0, x - 9.0);
    let _ = write!(out, r#"<text class="gate-label" x="{:.1}" y="{:.1}">{}</text>"#, x + 14.0, y + 4.0, esc(&gate_label(gate, &runs)));
    let mut title = format!("gate {gate}");
    for g in &runs {
        let _ = write!(title, "\n{}: {}", g.outcome, g.reason.as_deref().unwrap_or(""));
        for (evaluator, outcome, why) in &g.evaluators {
            let _ = write!(title, "\n  {evaluator}: {outcome}{}", why.as_deref().map(|w| format!(" ({w})")).unwrap_or_default());
        }
    }
    let _ = write!(out, "<title>{}</title></g>", esc(&title));
}

fn gate_label(gate: &str, runs: &[&crate::run::GateRun]) -> String {
    match runs {
        [] => gate.to_string(),
        [one] => format!("{gate}: {}", one.outcome),
        many => format!("{gate}: {} (×{})", many[many.len() - 1].outcome, many.len()),
    }
}

fn node_svg(out: &mut String, graph: &Graph, i: usize, (x, y): (f64, f64), run: Option<&RunView>) {
    let node = &graph.nodes[i];
    let seen = run.and_then(|r| r.nodes.get(&node.name));
    let state = match (run, seen) {
        (None, _) => "plan",
        (Some(_), None) => NodeState::NotRun.as_str(),
        (Some(_), Some(n)) => n.state.as_str(),
    };
    let _ = write!(out, r#"<g class="node kind-{} st-{state}" data-node="{}" tabindex="0">"#, esc(&node.kind), esc(&node.name));
    let rx = if node.kind == "end" { NODE_H / 2.0 } else { 8.0 };
    let _ = write!(out, r#"<rect x="{x:.1}" y="{y:.1}" width="{NODE_W}" height="{NODE_H}" rx="{rx}"/>"#);
    let _ =
        write!(out, r#"<text class="node-name" x="{:.1}" y="{:.1}">{}</text>"#, x + NODE_W / 2.0, y + 22.0, esc(&shorten(&node.name, 22)));
    let mut sub = format!("{} {}", node.kind, node.target);
    if node.kind == "loop" {
        let rounds = seen.map_or(0, |n| n.rounds);
        sub = match (run, node.max_rounds) {
            (Some(_), Some(max)) => format!("loop · round {rounds}/{max}"),
            (Some(_), None) => format!("loop · {rounds} rounds"),
            (None, Some(max)) => format!("loop · max {max} rounds"),
            (None, None) => "loop".to_string(),
        };
    }
    let _ =
        write!(out, r#"<text class="node-sub" x="{:.1}" y="{:.1}">{}</text>"#, x + NODE_W / 2.0, y + 40.0, esc(&shorten(sub.trim(), 26)));
    if let Some(n) = seen.filter(|n| n.visits > 1) {
        let _ = write!(
            out,
            r#"<g class="badge"><circle cx="{:.1}" cy="{y:.1}" r="11"/><text x="{:.1}" y="{:.1}">×{}</text></g>"#,
            x + NODE_W - 4.0,
            x + NODE_W - 4.0,
            y + 4.0,
            n.visits
        );
    }
    let _ = write!(out, "<title>{} ({}, {state})</title></g>", esc(&node.name), esc(&node.kind));
}

/// `text` cut to its last `max` chars after an ellipsis (a guard's
/// distinguishing part is its end: `…== "market_specialist"`).
fn shorten_head(text: &str, max: usize) -> String {
    let count = text.chars().count();
    if count <= max {
        text.to_string()
    } else {
        std::iter::once('…').chain(text.chars().skip(count - (max - 1))).collect()
    }
}

/// `text` cut to `max` chars with an ellipsis.
pub fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let mut cut: String = text.chars().take(max - 1).collect();
        cut.push('…');
        cut
    }
}
