//! Graph checks: unreachable nodes, dead ends, livelocks, unbounded
//! cycles, routing gaps and overlaps, fan-out without join.

use crate::flowgraph::{loc_span, EdgeKind, FastHash, FlowGraph, Parents};
use crate::types::Types;
use flow_check::ir::NodeKind;
use flow_check::ir::{BinOp, Guard, Program, TExpr, TExprKind, Value};
use flow_check::types::Ty;
use flow_diagnostics::{codes, Diagnostic, Label};
use indexmap::{IndexMap, IndexSet};
use petgraph::graph::NodeIndex;
use petgraph::visit::EdgeRef;
use petgraph::Direction;
use std::collections::VecDeque;

pub fn check(flow: &FlowGraph<'_>, types: &Types<'_>, out: &mut Vec<Diagnostic>) {
    let reached = flow.reachable();
    unreachable(flow, &reached, out);
    round_exits(flow, out);
    // Per node: whether reaching it ends the run (an end, or a terminating
    // handler).
    let ends: Vec<bool> = flow.graph.node_indices().map(|n| flow.is_terminal(n) || flow.has_terminating_handler(n)).collect();
    let dead_ends = dead_ends(flow, &reached, &ends, out);
    cannot_terminate(flow, &reached, &ends, &dead_ends, out);
    unbounded_cycles(flow, types.program(), &reached, out);
    routers(flow, types, &reached, out);
    fanouts(flow, &reached, out);
}

fn unreachable(flow: &FlowGraph<'_>, reached: &Parents, out: &mut Vec<Diagnostic>) {
    if flow.start.is_none() {
        return;
    }
    for index in flow.graph.node_indices() {
        if !reached.contains_key(&index) {
            let node = flow.node(index);
            let (file, span) = loc_span(node.loc);
            let mut d = Diagnostic::new(codes::UNREACHABLE_NODE, file, span, format!("node `{}` can never run", node.name))
                .with_primary_message("no path from the start reaches this node");
            // A join whose branches arrive at an earlier join.
            if let Some(first) = node.target.iter().filter_map(|b| flow.plan.join_of(b)).find(|j| *j != node.name) {
                d = d.with_note(format!("its branches arrive at `{first}`, the first join that lists them"));
            }
            out.push(d);
        }
    }
}

/// W0102: written edges that leave a loop's round (taking one ends the
/// round; it never reaches its target).
fn round_exits(flow: &FlowGraph<'_>, out: &mut Vec<Diagnostic>) {
    for edge in flow.graph.edge_references() {
        let EdgeKind::RoundExit(i) = edge.weight() else { continue };
        let written = &flow.workflow.edges[*i];
        let lp = flow.name(edge.target());
        let (file, span) = loc_span(written.loc);
        out.push(
            Diagnostic::new(
                codes::ROUND_EXIT,
                file,
                span,
                format!("the edge `{} -> {}` leaves the round of loop `{lp}`", written.from, written.to),
            )
            .with_primary_message("taking this edge ends the round")
            .with_note(format!("`{}` is not in the round: `{lp}` decides what runs next (another round, then its own edges)", written.to))
            .with_help(format!("leave the loop through `{lp}`'s own edges, and end rounds with `until`")),
        );
    }
}

/// The dead ends found, as a per-node flag.
fn dead_ends(flow: &FlowGraph<'_>, reached: &Parents, ends: &[bool], out: &mut Vec<Diagnostic>) -> Vec<bool> {
    let mut found = vec![false; flow.graph.node_count()];
    for index in reached.keys() {
        if ends[index.index()] {
            continue;
        }
        if flow.graph.edges_directed(index, Direction::Outgoing).next().is_none() {
            found[index.index()] = true;
            let node = flow.node(index);
            let (file, span) = loc_span(node.loc);
            let path = flow.path_to(reached, index);
            out.push(
                Diagnostic::new(codes::DEAD_END, file, span, format!("node `{}` is a dead end: nothing follows it", node.name))
                    .with_primary_message("no edge leaves this node")
                    .with_help("add an edge to the next node, or to an `end` node")
                    .with_witness(flow.witness(&path)),
            );
        }
    }
    found
}

/// Per node: whether an end (or a terminating handler) is reachable from it.
fn can_terminate(flow: &FlowGraph<'_>, ends: &[bool]) -> Vec<bool> {
    let mut done = ends.to_vec();
    let mut queue: Vec<NodeIndex> = flow.graph.node_indices().filter(|n| ends[n.index()]).collect();
    let mut next = 0;
    while let Some(&n) = queue.get(next) {
        next += 1;
        for edge in flow.graph.edges_directed(n, Direction::Incoming) {
            let source = edge.source();
            if !done[source.index()] {
                done[source.index()] = true;
                queue.push(source);
            }
        }
    }
    done
}

fn cannot_terminate(flow: &FlowGraph<'_>, reached: &Parents, ends: &[bool], dead_ends: &[bool], out: &mut Vec<Diagnostic>) {
    let ok = can_terminate(flow, ends);
    // The reached nodes that cannot terminate, in the order reached.
    let stuck: Vec<NodeIndex> = reached.keys().filter(|n| !ok[n.index()]).collect();
    for &index in &stuck {
        // Report where the run enters a stuck region, once; dead ends
        // already have their own error. (A parent is reached: it is stuck
        // when it cannot terminate.)
        let parent_stuck = reached.get(&index).flatten().is_some_and(|p| !ok[p.index()]);
        if parent_stuck || dead_ends[index.index()] || stuck.iter().any(|d| dead_ends[d.index()] && reaches(flow, index, *d)) {
            continue;
        }
        let node = flow.node(index);
        let (file, span) = loc_span(node.loc);
        let path = flow.path_to(reached, index);
        out.push(
            Diagnostic::new(codes::CANNOT_TERMINATE, file, span, format!("from node `{}` no path leads to an end", node.name))
                .with_primary_message("the run can never terminate once here")
                .with_help("add an edge from here (or from the cycle it is in) to an `end` node")
                .with_witness(flow.witness(&path)),
        );
    }
}

fn reaches(flow: &FlowGraph<'_>, from: NodeIndex, to: NodeIndex) -> bool {
    petgraph::algo::has_path_connecting(&flow.graph, from, to, None)
}

/// E0403: cycles outside loop rounds with nothing bounding them.
fn unbounded_cycles(flow: &FlowGraph<'_>, program: &Program, reached: &Parents, out: &mut Vec<Diagnostic>) {
    // A budget bounds every cycle that spends something: a cycle of
    // compute nodes alone spends no step and no time, so only those are
    // left to find.
    let budget_bound = has_budget_limit(flow, program);
    let filtered = flow.without_bounded_back_edges();
    for scc in petgraph::algo::kosaraju_scc(&filtered) {
        let cyclic = scc.len() > 1 || filtered.contains_edge(scc[0], scc[0]);
        if !cyclic || !scc.iter().any(|n| reached.contains_key(n)) {
            continue;
        }
        let spends = scc.iter().any(|&n| flow.node(n).kind() != NodeKind::Compute);
        if (budget_bound && spends) || visits_break_cycles(flow, &filtered, &scc) {
            continue;
        }
        let cycle = find_cycle(&filtered, &scc);
        let entry = cycle[0];
        let prefix = flow.path_to(reached, entry);
        let prefix = &prefix[..prefix.len().saturating_sub(1)];
        let node = flow.node(entry);
        let (file, span) = loc_span(node.loc);
        let names: Vec<&str> = cycle.iter().map(|&n| flow.name(n)).collect();
        out.push(
            Diagnostic::new(codes::UNBOUNDED_CYCLE, file, span, format!("the cycle {} -> {} has no bound", names.join(" -> "), names[0]))
                .with_primary_message("a run may go around this cycle forever")
                .with_help("declare `max_visits` on a node of the cycle, make it a `loop` node's round, bound a back-and-forth pair with `max_hops`, or give the workflow a budget")
                .with_witness(flow.lasso(prefix, &cycle)),
        );
    }
}

fn has_budget_limit(flow: &FlowGraph<'_>, program: &Program) -> bool {
    flow.workflow.budget(program).is_some()
}

/// Whether removing the nodes that declare `max_visits`, and the edges
/// between two nodes with a hop limit (`max_hops`: the crossings are
/// counted, and past the limit the workflow's handler does not go on),
/// leaves the component acyclic: then every cycle passes a
/// bounded node or crosses a bounded pair.
fn visits_break_cycles(flow: &FlowGraph<'_>, filtered: &petgraph::Graph<(), ()>, scc: &[NodeIndex]) -> bool {
    let members: IndexSet<NodeIndex, FastHash> = scc.iter().copied().filter(|&n| flow.node(n).max_visits().is_none()).collect();
    let hops_bound = flow_check::semantics::hops_stop_the_cycle(flow.workflow);
    let hop_bounded = |a: NodeIndex, b: NodeIndex| hops_bound && flow.plan.hop_limit(flow.name(a), flow.name(b)).is_some();
    let any_hop_bound = members.iter().any(|&n| filtered.edges_directed(n, Direction::Outgoing).any(|e| hop_bounded(n, e.target())));
    if members.len() == scc.len() && !any_hop_bound {
        return false;
    }
    let mut sub = petgraph::Graph::<(), ()>::new();
    let map: IndexMap<NodeIndex, NodeIndex, FastHash> = members.iter().map(|&n| (n, sub.add_node(()))).collect();
    for &n in &members {
        for edge in filtered.edges_directed(n, Direction::Outgoing) {
            if let Some(&t) = map.get(&edge.target()).filter(|_| !hop_bounded(n, edge.target())) {
                sub.add_edge(map[&n], t, ());
            }
        }
    }
    petgraph::algo::toposort(&sub, None).is_ok()
}

/// One simple cycle inside a strongly connected component.
fn find_cycle(graph: &petgraph::Graph<(), ()>, scc: &[NodeIndex]) -> Vec<NodeIndex> {
    let members: IndexSet<NodeIndex, FastHash> = scc.iter().copied().collect();
    let start = *scc.iter().min().expect("non-empty component");
    // BFS inside the component from `start` back to `start`.
    let mut parent: IndexMap<NodeIndex, NodeIndex, FastHash> = IndexMap::default();
    let mut queue = VecDeque::from([start]);
    while let Some(n) = queue.pop_front() {
        let mut next: Vec<NodeIndex> =
            graph.edges_directed(n, Direction::Outgoing).map(|e| e.target()).filter(|t| members.contains(t)).collect();
        next.sort();
        for t in next {
            if t == start {
                let mut cycle = vec![n];
                let mut current = n;
                while current != start {
                    current = parent[&current];
                    cycle.push(current);
                }
                cycle.reverse();
                return cycle;
            }
            if let indexmap::map::Entry::Vacant(slot) = parent.entry(t) {
                slot.insert(n);
                queue.push_back(t);
            }
        }
    }
    vec![start]
}

/// What one guard says about one value: the cases it covers.
#[derive(Debug, Clone, PartialEq)]
enum Cover {
    /// Values of a finite domain (enum strings, or "true"/"false").
    Values(IndexSet<String>),
    /// A union of numeric intervals, each (low, low_inclusive, high, high_inclusive).
    Ranges(Vec<(f64, bool, f64, bool)>),
}

/// A printable key for the value a guard tests: `a.b.c`, `len(a.items)`.
fn key(expr: &TExpr) -> Option<String> {
    match &expr.kind {
        TExprKind::Var { name } => Some(name.clone()),
        TExprKind::Field { base, name } => Some(format!("{}.{name}", key(base)?)),
        TExprKind::Call { function, args } if args.len() == 1 => Some(format!("{function}({})", key(&args[0])?)),
        _ => None,
    }
}

fn literal(expr: &TExpr) -> Option<Value> {
    match &expr.kind {
        TExprKind::Literal { value } => Some((**value).clone()),
        TExprKind::Neg { operand } => match literal(operand)? {
            Value::Int(i) => Some(Value::Int(-i)),
            Value::Float(f) => Some(Value::Float(-f)),
            _ => None,
        },
        _ => None,
    }
}

fn number(value: &Value) -> Option<f64> {
    match value {
        Value::Int(i) => Some(*i as f64),
        Value::Float(f) | Value::Money(f) | Value::Fraction(f) => Some(*f),
        Value::Duration(ms) => Some(*ms as f64),
        _ => None,
    }
}

/// The finite domain of a type, if it has one.
fn domain(types: &Types<'_>, ty: &Ty) -> Option<IndexSet<String>> {
    match types.expand(ty.non_null()) {
        Ty::Enum { values } => Some(values.into_iter().collect()),
        Ty::Bool => Some(["true".to_string(), "false".to_string()].into_iter().collect()),
        _ => None,
    }
}

/// Analyses a guard into (key, cover), when it tests one value.
fn cover(types: &Types<'_>, guard: &TExpr) -> Option<(String, Ty, Cover)> {
    flow_syntax::stack::guarded(|| cover_level(types, guard))
}

fn cover_level(types: &Types<'_>, guard: &TExpr) -> Option<(String, Ty, Cover)> {
    match &guard.kind {
        TExprKind::Binary { op: BinOp::Or, lhs, rhs } => {
            let (k1, t1, c1) = cover(types, lhs)?;
            let (k2, _, c2) = cover(types, rhs)?;
            if k1 != k2 {
                return None;
            }
            Some((k1, t1, union(c1, c2)?))
        }
        TExprKind::Binary { op: BinOp::In, lhs, rhs } => {
            let k = key(lhs)?;
            let TExprKind::List { items } = &rhs.kind else { return None };
            let mut values = IndexSet::new();
            for item in items {
                match literal(item)? {
                    Value::Str(s) => values.insert(s),
                    _ => return None,
                };
            }
            Some((k, lhs.ty.clone(), Cover::Values(values)))
        }
        TExprKind::Binary { op, lhs, rhs } => {
            let (subject, value, flipped) = match (key(lhs), literal(rhs), key(rhs), literal(lhs)) {
                (Some(k), Some(v), _, _) => ((k, lhs.ty.clone()), v, false),
                (_, _, Some(k), Some(v)) => ((k, rhs.ty.clone()), v, true),
                _ => return None,
            };
            let op = if flipped { op.flipped() } else { *op };
            match (&value, op) {
                (Value::Str(s), BinOp::Eq) => Some((subject.0, subject.1, Cover::Values([s.clone()].into_iter().collect()))),
                (Value::Str(s), BinOp::NotEq) => {
                    let mut all = domain(types, &subject.1)?;
                    all.shift_remove(s);
                    Some((subject.0, subject.1, Cover::Values(all)))
                }
                (Value::Bool(b), BinOp::Eq) => Some((subject.0, subject.1, Cover::Values([b.to_string()].into_iter().collect()))),
                (Value::Bool(b), BinOp::NotEq) => Some((subject.0, subject.1, Cover::Values([(!b).to_string()].into_iter().collect()))),
                (v, op) => {
                    let c = number(v)?;
                    let inf = f64::INFINITY;
                    let ranges = match op {
                        BinOp::Eq => vec![(c, true, c, true)],
                        BinOp::NotEq => vec![(-inf, false, c, false), (c, false, inf, false)],
                        BinOp::Lt => vec![(-inf, false, c, false)],
                        BinOp::LtEq => vec![(-inf, false, c, true)],
                        BinOp::Gt => vec![(c, false, inf, false)],
                        BinOp::GtEq => vec![(c, true, inf, false)],
                        _ => return None,
                    };
                    Some((subject.0, subject.1, Cover::Ranges(ranges)))
                }
            }
        }
        TExprKind::Not { operand } => {
            let k = key(operand)?;
            matches!(types.expand(operand.ty.non_null()), Ty::Bool)
                .then(|| (k, operand.ty.clone(), Cover::Values(["false".to_string()].into_iter().collect())))
        }
        _ => {
            let k = key(guard)?;
            matches!(types.expand(guard.ty.non_null()), Ty::Bool)
                .then(|| (k, guard.ty.clone(), Cover::Values(["true".to_string()].into_iter().collect())))
        }
    }
}

fn union(a: Cover, b: Cover) -> Option<Cover> {
    match (a, b) {
        (Cover::Values(mut x), Cover::Values(y)) => {
            x.extend(y);
            Some(Cover::Values(x))
        }
        (Cover::Ranges(mut x), Cover::Ranges(y)) => {
            x.extend(y);
            Some(Cover::Ranges(x))
        }
        _ => None,
    }
}

/// Whether numeric ranges cover the whole line; if not, a value they miss.
fn ranges_gap(mut ranges: Vec<(f64, bool, f64, bool)>) -> Option<f64> {
    ranges.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap_or(std::cmp::Ordering::Equal).then(b.1.cmp(&a.1)));
    let mut reach = f64::NEG_INFINITY;
    let mut reach_inclusive = false;
    let mut started = false;
    for (low, low_inc, high, high_inc) in ranges {
        let connected = if !started { low == f64::NEG_INFINITY } else { low < reach || (low == reach && (low_inc || reach_inclusive)) };
        if !connected {
            return Some(if started {
                if reach_inclusive {
                    (reach + low) / 2.0
                } else {
                    reach
                }
            } else {
                low - 1.0
            });
        }
        started = true;
        if high > reach || (high == reach && high_inc) {
            reach = high;
            reach_inclusive = high_inc;
        }
    }
    if !started {
        return Some(0.0);
    }
    (reach != f64::INFINITY).then_some(if reach_inclusive { reach + 1.0 } else { reach })
}

fn overlap(a: &Cover, b: &Cover) -> bool {
    match (a, b) {
        (Cover::Values(x), Cover::Values(y)) => x.iter().any(|v| y.contains(v)),
        (Cover::Ranges(x), Cover::Ranges(y)) => x.iter().any(|&(l1, li1, h1, hi1)| {
            y.iter().any(|&(l2, li2, h2, hi2)| {
                let low = if l1 > l2 {
                    (l1, li1)
                } else if l2 > l1 {
                    (l2, li2)
                } else {
                    (l1, li1 && li2)
                };
                let high = if h1 < h2 {
                    (h1, hi1)
                } else if h2 < h1 {
                    (h2, hi2)
                } else {
                    (h1, hi1 && hi2)
                };
                low.0 < high.0 || (low.0 == high.0 && low.1 && high.1)
            })
        }),
        _ => true,
    }
}

/// E0404 routing gaps and E0405 overlapping exclusive guards.
fn routers(flow: &FlowGraph<'_>, types: &Types<'_>, reached: &Parents, out: &mut Vec<Diagnostic>) {
    let workflow = flow.workflow;
    // Only nodes with a guarded edge can have a gap or an overlap: group
    // the edges of those nodes alone, by source node, in the order the
    // sources first appear. (An edge from no node of the workflow has no
    // node to report on.)
    let sources = || workflow.edges.iter().zip(&flow.edge_ends).filter_map(|(e, &(from, _))| Some((e, from?)));
    let mut guarded: Vec<bool> = Vec::new();
    for (_, from) in sources().filter(|(e, _)| matches!(e.guard, Guard::When(_))) {
        if guarded.is_empty() {
            guarded = vec![false; flow.graph.node_count()];
        }
        guarded[from.index()] = true;
    }
    if guarded.is_empty() {
        return;
    }
    // Per node, its position in `by_source` (or `u32::MAX`).
    let mut slot = vec![u32::MAX; flow.graph.node_count()];
    let mut by_source: Vec<(NodeIndex, Vec<&flow_check::ir::Edge>)> = Vec::new();
    for (edge, from) in sources().filter(|&(_, from)| guarded[from.index()]) {
        let at = &mut slot[from.index()];
        if *at == u32::MAX {
            *at = by_source.len() as u32;
            by_source.push((from, Vec::new()));
        }
        by_source[*at as usize].1.push(edge);
    }
    for (index, edges) in by_source {
        let (name, node) = (flow.name(index), flow.node(index));
        let has_default = edges.iter().any(|e| !matches!(e.guard, Guard::When(_)));
        let exclusive = node.exclusive();
        // With a default way on, only exclusivity is left to check.
        if has_default && !exclusive {
            continue;
        }
        let guards: Vec<&TExpr> = edges
            .iter()
            .filter_map(|e| match &e.guard {
                Guard::When(expr) => Some(expr),
                _ => None,
            })
            .collect();
        if guards.is_empty() {
            continue;
        }
        let witness = || reached.contains_key(&index).then(|| flow.witness(&flow.path_to(reached, index)));
        let (file, span) = loc_span(node.loc);
        // Something depends on the guards now: analyse them.
        let covers: Vec<Option<(String, Ty, Cover)>> = guards.iter().map(|g| cover(types, g)).collect();
        // Implicit ways on (loop rounds, map items, fan-out) also count.
        let implicit = flow
            .graph
            .edges_directed(index, Direction::Outgoing)
            .any(|e| !matches!(e.weight(), EdgeKind::Written(_) | EdgeKind::Handler { .. }));
        if !has_default && !implicit {
            let gap = exhaustive_gap(types, &covers);
            if let Some(example) = gap {
                let mut d = Diagnostic::new(
                    codes::ROUTER_GAP,
                    file,
                    span,
                    format!("when no guard of `{name}`'s edges holds, the run has nowhere to go"),
                )
                .with_primary_message("every edge from here is guarded")
                .with_note(example)
                .with_help(format!("add `{name} -> NODE else`, or guards for the missing cases"));
                for e in &edges {
                    let (f, s) = loc_span(e.loc);
                    d = d.with_label(Label::secondary(f, s, "guarded edge"));
                }
                if let Some(w) = witness() {
                    d = d.with_witness(w);
                }
                out.push(d);
            }
        }
        if exclusive {
            'pairs: for i in 0..guards.len() {
                for j in i + 1..guards.len() {
                    let disjoint = match (&covers[i], &covers[j]) {
                        (Some((k1, _, c1)), Some((k2, _, c2))) if k1 == k2 => !overlap(c1, c2),
                        _ => false,
                    };
                    if !disjoint {
                        let guarded: Vec<&&flow_check::ir::Edge> = edges.iter().filter(|e| matches!(e.guard, Guard::When(_))).collect();
                        let (f1, s1) = loc_span(guarded[i].loc);
                        let (f2, s2) = loc_span(guarded[j].loc);
                        out.push(
                            Diagnostic::new(
                                codes::OVERLAPPING_GUARDS,
                                f2,
                                s2,
                                format!("guards of the exclusive node `{name}` can hold together"),
                            )
                            .with_primary_message("this guard")
                            .with_label(Label::secondary(f1, s1, "can hold together with this one")),
                        );
                        break 'pairs;
                    }
                }
            }
        }
    }
}

/// Whether some value of the tested output makes every guard false (for
/// the model checker: whether "no guard holds" is a possible outcome).
pub(crate) fn guards_can_all_fail(types: &Types<'_>, guards: &[&TExpr]) -> bool {
    let covers: Vec<Option<(String, Ty, Cover)>> = guards.iter().map(|g| cover(types, g)).collect();
    exhaustive_gap(types, &covers).is_some()
}

/// Whether the guards cover every case; if not, a sentence naming a case
/// they miss.
fn exhaustive_gap(types: &Types<'_>, covers: &[Option<(String, Ty, Cover)>]) -> Option<String> {
    let Some(Some((first_key, first_ty, _))) = covers.first() else {
        return Some("the guards are not provably exhaustive (they are not simple tests of one value)".into());
    };
    if covers.iter().any(|c| c.as_ref().is_none_or(|(k, _, _)| k != first_key)) {
        return Some("the guards are not provably exhaustive (they test different values or complex conditions)".into());
    }
    let all: Vec<&Cover> = covers.iter().flatten().map(|(_, _, c)| c).collect();
    match all[0] {
        Cover::Values(_) => {
            let Some(domain) = domain(types, first_ty) else {
                return Some(format!("`{first_key}` is {first_ty}: the tested values cannot cover it"));
            };
            let covered: IndexSet<&String> =
                all.iter().flat_map(|c| if let Cover::Values(v) = c { v.iter().collect::<Vec<_>>() } else { Vec::new() }).collect();
            let nullable = matches!(types.expand(first_ty), Ty::Nullable { .. });
            match domain.iter().find(|v| !covered.contains(v)) {
                Some(missing) => Some(format!(
                    "no guard holds when `{first_key}` is {}",
                    if first_ty.non_null() == &Ty::Bool { missing.clone() } else { format!("\"{missing}\"") }
                )),
                None if nullable => Some(format!("no guard holds when `{first_key}` is null")),
                None => None,
            }
        }
        Cover::Ranges(_) => {
            let ranges: Vec<(f64, bool, f64, bool)> =
                all.iter().flat_map(|c| if let Cover::Ranges(r) = c { r.clone() } else { Vec::new() }).collect();
            ranges_gap(ranges).map(|v| format!("no guard holds when `{first_key}` is {v}"))
        }
    }
}

/// E0406: every parallel branch must reach a join that lists it or a node
/// of the branch (a listed node arrives at its join when it finishes).
fn fanouts(flow: &FlowGraph<'_>, reached: &Parents, out: &mut Vec<Diagnostic>) {
    // Graph nodes are in the workflow's node order.
    for (i, (name, node)) in flow.workflow.nodes.iter().enumerate().filter(|(_, (_, n))| n.kind() == NodeKind::Parallel) {
        let index = NodeIndex::new(i);
        if !reached.contains_key(&index) {
            continue;
        }
        for branch in &node.target {
            let b = flow.index[branch];
            let joined = flow
                .workflow
                .nodes
                .values()
                .filter(|j| j.kind() == NodeKind::Join)
                .any(|j| j.target.iter().any(|x| flow.index.get(x.as_str()).is_some_and(|&x| reaches(flow, b, x))));
            if !joined {
                let (file, span) = loc_span(node.loc);
                let mut path = flow.path_to(reached, index);
                path.push(b);
                out.push(
                    Diagnostic::new(codes::FANOUT_WITHOUT_JOIN, file, span, format!("branch `{branch}` of `{name}` never reaches a join"))
                        .with_primary_message("fan-out here")
                        .with_help(format!("list `{branch}` (or the node that ends its branch) in a `join` node"))
                        .with_witness(flow.witness(&path)),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_ranges_cover_the_line_or_name_a_gap() {
        let inf = f64::INFINITY;
        assert_eq!(ranges_gap(vec![(-inf, false, 3.0, true), (3.0, false, inf, false)]), None);
        assert_eq!(ranges_gap(vec![(-inf, false, 3.0, false), (3.0, false, inf, false)]), Some(3.0));
        assert!(ranges_gap(vec![(0.0, true, inf, false)]).is_some());
    }
}
