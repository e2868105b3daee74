//! Static worst-case bounds of steps, tool calls, tokens and cost over all
//! paths, compared with the workflow's budget; the shape of budgets.
//!
//! Per node: attempts (retry policy) × per-attempt ceilings (node, agent
//! or provider budgets) × how often the node can run (loop rounds, map
//! items, `max_visits` of rework cycles). Over the graph: the most
//! expensive path, where a `parallel` node pays for all its branches, a
//! `loop` for its round and a `map` for its items, before going on.

use crate::flowgraph::{loc_span, EdgeKind, FastHash, FlowGraph, Parents};
use crate::lookup::{agent_of, budget_record};
use flow_check::ir::{Loc, Node, Program, Value};
use flow_check::ir::{NodeKind, TransferKind};
use flow_diagnostics::{codes, Diagnostic, Label};
use indexmap::{IndexMap, IndexSet};
use petgraph::graph::NodeIndex;
use petgraph::visit::EdgeRef;
use petgraph::Direction;

/// The bounded quantities, in the order reported.
pub const QUANTITIES: &[&str] = &["steps", "tool_calls", "tokens", "cost"];

fn int(v: Option<&Value>) -> Option<f64> {
    match v? {
        Value::Int(i) => Some(*i as f64),
        Value::Money(m) => Some(*m),
        _ => None,
    }
}

/// The budget records delegation contracts give the nodes they delegate
/// to, by node name (computed once per workflow).
/// Maps keyed by the graph's own node indices: a fast hash, the order kept.
type NodeMap<V> = IndexMap<NodeIndex, V, FastHash>;
type NodeSet = IndexSet<NodeIndex, FastHash>;

type Delegated<'p> = IndexMap<&'p str, &'p IndexMap<String, Value>>;

fn delegated<'p>(workflow: &'p flow_check::ir::Workflow, program: &'p Program) -> Delegated<'p> {
    let mut out = IndexMap::new();
    for t in workflow.transfers.iter().filter(|t| t.kind == TransferKind::Delegate) {
        if let Some(Value::Ref { name, .. }) = t.props.get("contract") {
            if let Some(budget) = program.decls.get(name).and_then(|c| budget_record(c.props.get("budget"), program)) {
                out.entry(t.to.as_str()).or_insert(budget);
            }
        }
    }
    out
}

/// The run-wide cap of quantity `q` an agent's own `budget` sets.
fn agent_cap(node: &Node, q: &str, program: &Program) -> Option<f64> {
    let agent = agent_of(node, program)?;
    budget_record(agent.props.get("budget"), program).and_then(|b| int(b.get(q)))
}

/// The ceiling of quantity `q` for one visit of a node (all its attempts);
/// `None` when unknown. A node `budget` (or the budget of the contract it
/// is delegated under) bounds the visit; otherwise attempts × the
/// provider's per-turn ceiling.
fn visit_weight(node: &Node, q: &str, delegated: &Delegated<'_>, program: &Program) -> Option<f64> {
    let declared = budget_record(node.props.get("budget"), program)
        .and_then(|b| int(b.get(q)))
        .into_iter()
        .chain(delegated.get(node.name.as_str()).and_then(|b| int(b.get(q))))
        .reduce(f64::min);
    if declared.is_some() {
        return declared;
    }
    let tries = attempts(node);
    match node.kind {
        NodeKind::Agent => {
            let agent = agent_of(node, program)?;
            let turns = int(node.props.get("max_turns")).or_else(|| int(agent.props.get("max_turns"))).unwrap_or(1.0);
            let repairs = int(node.props.get("repair")).unwrap_or(1.0);
            let provider = match agent.props.get("provider") {
                Some(Value::Ref { name, .. }) => program.decls.get(name),
                _ => None,
            };
            match q {
                "steps" => Some(tries),
                "tool_calls" => {
                    let has_tools = matches!(agent.props.get("tools"), Some(Value::List(l)) if !l.is_empty());
                    if has_tools {
                        None
                    } else {
                        Some(0.0)
                    }
                }
                "tokens" => {
                    let max_tokens = provider.and_then(|p| int(p.props.get("max_tokens")))?;
                    Some(tries * max_tokens * turns * (1.0 + repairs))
                }
                "cost" => {
                    let provider = provider?;
                    if matches!(provider.variant.as_deref(), Some("scripted" | "replay")) {
                        return Some(0.0);
                    }
                    let tokens = visit_weight(node, "tokens", delegated, program)?;
                    let price =
                        int(provider.props.get("price_input")).unwrap_or(0.0).max(int(provider.props.get("price_output")).unwrap_or(0.0));
                    Some(tokens * price / 1e6)
                }
                _ => None,
            }
        }
        NodeKind::Tool => Some(if q == "steps" || q == "tool_calls" { tries } else { 0.0 }),
        NodeKind::Human => Some(if q == "steps" { tries } else { 0.0 }),
        NodeKind::Flow => None,
        _ => Some(0.0),
    }
}

fn attempts(node: &Node) -> f64 {
    match node.props.get("retry") {
        Some(Value::Record(r)) => int(r.get("attempts")).unwrap_or(1.0).max(1.0),
        _ => 1.0,
    }
}

/// How often each node can run: loop rounds, map items, rework bounds.
fn multipliers(flow: &FlowGraph<'_>) -> NodeMap<Option<f64>> {
    let workflow = flow.workflow;
    let mut mult: NodeMap<Option<f64>> = flow.graph.node_indices().map(|n| (n, Some(1.0))).collect();
    // Loops and maps, nested ones multiplying (a few passes settle nesting).
    for _ in 0..4 {
        for node in workflow.nodes.values() {
            let factor = match node.kind {
                NodeKind::Loop => int(node.props.get("max_rounds")),
                NodeKind::Map => int(node.props.get("max_items")),
                _ => continue,
            };
            let outer = mult[&flow.index[&node.name]];
            for member in &node.target {
                let m = flow.index[member];
                mult[&m] = match (outer, factor) {
                    (Some(o), Some(f)) => Some(o * f),
                    _ => None,
                };
            }
        }
    }
    // Rework cycles outside loops.
    let filtered = flow.without_bounded_back_edges();
    for scc in petgraph::algo::kosaraju_scc(&filtered) {
        let cyclic = scc.len() > 1 || filtered.contains_edge(scc[0], scc[0]);
        if !cyclic {
            continue;
        }
        let visits: f64 = scc.iter().filter_map(|&n| int(flow.node(n).props.get("max_visits"))).sum();
        let unannotated: NodeSet = scc.iter().copied().filter(|&n| !flow.node(n).props.contains_key("max_visits")).collect();
        let breaks = unannotated.len() < scc.len() && {
            let mut sub = petgraph::Graph::<(), ()>::new();
            let map: NodeMap<NodeIndex> = unannotated.iter().map(|&n| (n, sub.add_node(()))).collect();
            for &n in &unannotated {
                for e in filtered.edges_directed(n, Direction::Outgoing) {
                    if let Some(&t) = map.get(&e.target()) {
                        sub.add_edge(map[&n], t, ());
                    }
                }
            }
            petgraph::algo::toposort(&sub, None).is_ok()
        };
        for &n in &scc {
            let own = int(flow.node(n).props.get("max_visits"));
            let bound = if !breaks { None } else { Some(own.unwrap_or(1.0 + visits)) };
            mult[&n] = match (mult[&n], bound) {
                (Some(a), Some(b)) => Some(a * b),
                _ => None,
            };
        }
    }
    mult
}

/// The worst case of one quantity and the path that attains it.
struct Worst {
    total: Option<f64>,
    path: Vec<NodeIndex>,
}

struct Dp<'a, 'w> {
    flow: &'a FlowGraph<'w>,
    weight: NodeMap<Option<f64>>,
}

fn add(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    Some(a? + b?)
}

fn better(a: Option<f64>, b: Option<f64>) -> bool {
    match (a, b) {
        (None, Some(_)) => true,
        (Some(_), None) => false,
        (Some(x), Some(y)) => x > y,
        (None, None) => false,
    }
}

/// The best continuation from a node: its cost and the successor taken
/// (paths are rebuilt from these choices, so nothing is copied per node).
type Best = (Option<f64>, Option<NodeIndex>);

impl Dp<'_, '_> {
    /// The nodes whose values a node's value depends on: its successors
    /// (loop and map back edges excluded), a parallel node's branches and
    /// its join, a loop's or map's first body node.
    fn deps(&self, n: NodeIndex) -> Vec<NodeIndex> {
        let flow = self.flow;
        let node = flow.node(n);
        let mut out: Vec<NodeIndex> = flow
            .graph
            .edges_directed(n, Direction::Outgoing)
            .filter(|e| !matches!(e.weight(), EdgeKind::LoopBack | EdgeKind::MapReturn))
            .map(|e| e.target())
            .collect();
        if node.kind == NodeKind::Parallel {
            for branch in &node.target {
                if let Some(j) = flow.workflow.nodes.values().find(|j| j.kind == NodeKind::Join && j.target.contains(branch)) {
                    out.push(flow.index[&j.name]);
                }
            }
        }
        out
    }

    /// The nodes a node's cost includes besides itself and its chosen
    /// successor: a parallel node's branches (each to its join), a loop's
    /// or map's round; and where the path goes on afterwards.
    fn parts(&self, n: NodeIndex, mode: bool) -> (Vec<(NodeIndex, bool)>, Vec<NodeIndex>) {
        let flow = self.flow;
        let node = flow.node(n);
        let mut inner = Vec::new();
        let mut successors = Vec::new();
        match node.kind {
            NodeKind::Parallel => {
                let mut join = None;
                for branch in &node.target {
                    inner.push((flow.index[branch], true));
                    if join.is_none() {
                        join = flow
                            .workflow
                            .nodes
                            .values()
                            .find(|j| j.kind == NodeKind::Join && j.target.contains(branch))
                            .map(|j| flow.index[&j.name]);
                    }
                }
                successors.extend(join);
                return (inner, successors);
            }
            NodeKind::Loop | NodeKind::Map => {
                if let Some(first) = node.target.first() {
                    inner.push((flow.index[first], false));
                }
            }
            _ => {}
        }
        for edge in flow.graph.edges_directed(n, Direction::Outgoing) {
            let skip = match edge.weight() {
                EdgeKind::LoopBack | EdgeKind::MapReturn | EdgeKind::LoopEnter | EdgeKind::MapEnter | EdgeKind::Fanout => true,
                _ => mode && flow.node(edge.target()).kind == NodeKind::Join,
            };
            if !skip {
                successors.push(edge.target());
            }
        }
        (inner, successors)
    }

    /// Longest paths from every node reachable from `start`, in both modes
    /// (`true`: a parallel branch's share, stopping before join nodes).
    /// Iterative (post-order), so long workflows cannot exhaust the stack;
    /// edges closing a cycle are ignored (cycles are priced by multipliers).
    fn solve(&self, start: NodeIndex) -> IndexMap<(NodeIndex, bool), Best, FastHash> {
        let mut order: Vec<NodeIndex> = Vec::new();
        let mut seen: NodeSet = NodeSet::default();
        let mut stack: Vec<(NodeIndex, Vec<NodeIndex>)> = vec![(start, self.deps(start))];
        seen.insert(start);
        while let Some((n, deps)) = stack.last_mut() {
            let n = *n;
            match deps.pop() {
                Some(d) => {
                    if seen.insert(d) {
                        let next = self.deps(d);
                        stack.push((d, next));
                    }
                }
                None => {
                    order.push(n);
                    stack.pop();
                }
            }
        }
        let mut memo: IndexMap<(NodeIndex, bool), Best, FastHash> = IndexMap::default();
        // A node not yet computed is on a cycle through this one: free.
        let total_of = |memo: &IndexMap<(NodeIndex, bool), Best, FastHash>, n: NodeIndex, mode: bool| {
            memo.get(&(n, mode)).map(|b| b.0).unwrap_or(Some(0.0))
        };
        for &n in &order {
            for mode in [false, true] {
                let (inner, successors) = self.parts(n, mode);
                let mut total = self.weight[&n];
                for (part, part_mode) in inner {
                    total = add(total, total_of(&memo, part, part_mode));
                }
                let mut best: Option<(Option<f64>, NodeIndex)> = None;
                for s in successors {
                    let candidate = total_of(&memo, s, mode);
                    if best.as_ref().is_none_or(|(b, _)| better(candidate, *b)) {
                        best = Some((candidate, s));
                    }
                }
                if let Some((cost, _)) = best {
                    total = add(total, cost);
                }
                memo.insert((n, mode), (total, best.map(|(_, s)| s)));
            }
        }
        memo
    }

    /// The worst path from `start`, rebuilt from the choices.
    fn path(&self, memo: &IndexMap<(NodeIndex, bool), Best, FastHash>, start: NodeIndex) -> Vec<NodeIndex> {
        let mut path = Vec::new();
        let mut work: Vec<(NodeIndex, bool)> = vec![(start, false)];
        let limit = memo.len() + 1;
        while let Some((n, mode)) = work.pop() {
            if path.len() > limit {
                break;
            }
            path.push(n);
            let (inner, _) = self.parts(n, mode);
            // Continue with the chosen successor after the inner parts.
            if let Some(&(_, Some(next))) = memo.get(&(n, mode)) {
                work.push((next, mode));
            }
            for part in inner.into_iter().rev() {
                work.push(part);
            }
        }
        path
    }
}

fn worst(
    flow: &FlowGraph<'_>,
    program: &Program,
    q: &str,
    mult: &NodeMap<Option<f64>>,
    reached: &Parents,
    delegated: &Delegated<'_>,
) -> Worst {
    // Agents with a run-wide cap contribute at most their cap, once; their
    // nodes weigh nothing on the path (a sound over-approximation).
    let mut capped: IndexMap<String, f64> = IndexMap::new();
    let weight = flow
        .graph
        .node_indices()
        .map(|n| {
            let node = flow.node(n);
            if let Some(cap) = agent_cap(node, q, program) {
                if reached.contains_key(&n) {
                    capped.insert(node.target[0].clone(), cap);
                }
                return (n, Some(0.0));
            }
            let w = match (visit_weight(node, q, delegated, program), mult[&n]) {
                (Some(0.0), _) => Some(0.0),
                (Some(a), Some(b)) => Some(a * b),
                _ => None,
            };
            (n, w)
        })
        .collect();
    let dp = Dp { flow, weight };
    let caps: f64 = capped.values().sum();
    match flow.start {
        Some(start) => {
            let memo = dp.solve(start);
            let total = memo.get(&(start, false)).map(|b| b.0).unwrap_or(Some(0.0));
            let path = dp.path(&memo, start);
            Worst { total: total.map(|t| t + caps), path }
        }
        None => Worst { total: Some(caps), path: Vec::new() },
    }
}

/// Why a quantity has no bound: the first node on the path without one.
fn unbounded_reason(
    flow: &FlowGraph<'_>,
    program: &Program,
    q: &str,
    path: &[NodeIndex],
    mult: &NodeMap<Option<f64>>,
    delegated: &Delegated<'_>,
) -> String {
    for &n in path {
        let node = flow.node(n);
        if agent_cap(node, q, program).is_some() {
            continue;
        }
        if mult[&n].is_none() {
            return match node.kind {
                _ if flow
                    .workflow
                    .nodes
                    .values()
                    .any(|m| m.kind == NodeKind::Map && m.target.contains(&node.name) && !m.props.contains_key("max_items")) =>
                {
                    format!("`{}` runs once per item of a `map` without `max_items`", node.name)
                }
                _ => format!("`{}` is on a cycle that only the budget bounds (declare `max_visits`)", node.name),
            };
        }
        if agent_cap(node, q, program).is_none() && visit_weight(node, q, delegated, program).is_none() {
            return format!("`{}` has no {q} ceiling (give it or its agent a `budget: {{ {q}: … }}`)", node.name);
        }
    }
    "a node on the path has no ceiling".into()
}

pub fn check(flow: &FlowGraph<'_>, program: &Program, out: &mut Vec<Diagnostic>) {
    let workflow = flow.workflow;
    let Some(budget) = budget_record(workflow.props.get("budget"), program) else { return };
    let budget_loc = match workflow.props.get("budget") {
        Some(Value::Ref { name, .. }) => program.decls.get(name).map(|d| d.loc).unwrap_or(workflow.loc),
        _ => workflow.loc,
    };
    let reserve: f64 = match budget.get("reserve") {
        Some(Value::Record(r)) => r.values().filter_map(|v| if let Value::Fraction(f) = v { Some(*f) } else { None }).sum(),
        _ => 0.0,
    };
    let mult = multipliers(flow);
    let reached = flow.reachable();
    let delegated = delegated(workflow, program);
    for q in QUANTITIES {
        let Some(limit) = int(budget.get(*q)) else { continue };
        let available = limit * (1.0 - reserve).max(0.0);
        let worst = worst(flow, program, q, &mult, &reached, &delegated);
        let (bf, bs) = loc_span(budget_loc);
        match worst.total {
            Some(total) if total > available + 1e-9 => {
                let (wf, ws) = loc_span(workflow.loc);
                let reserve_note = if reserve > 0.0 { format!(" ({limit} less {:.0}% reserves)", reserve * 100.0) } else { String::new() };
                out.push(
                    Diagnostic::new(
                        codes::BUDGET_EXCEEDED,
                        wf,
                        ws,
                        format!(
                            "the worst case of {q} in `{}` is {}, over the budget's {}{reserve_note}",
                            workflow.name,
                            show(q, total),
                            show(q, available)
                        ),
                    )
                    .with_primary_message(format!("worst case {}", show(q, total)))
                    .with_label(Label::secondary(bf, bs, format!("budget allows {}", show(q, available))))
                    .with_witness(flow.witness(&worst.path)),
                );
            }
            Some(_) => {}
            None => {
                let (wf, ws) = loc_span(workflow.loc);
                out.push(
                    Diagnostic::new(
                        codes::NO_STATIC_BOUND,
                        wf,
                        ws,
                        format!(
                            "no static bound on {q} in `{}`: {}",
                            workflow.name,
                            unbounded_reason(flow, program, q, &worst.path, &mult, &delegated)
                        ),
                    )
                    .with_primary_message("enforced only at run time")
                    .with_label(Label::secondary(bf, bs, format!("the budget limits {q}"))),
                );
            }
        }
    }
}

fn show(q: &str, v: f64) -> String {
    match q {
        "cost" => format!("${v:.2}"),
        _ => format!("{v:.0} {}", q.replace('_', " ")),
    }
}

/// E0802: reserves that do not fit, zones out of order.
pub fn check_budget_shape(props: &IndexMap<String, Value>, loc: Loc, out: &mut Vec<Diagnostic>) {
    let (file, span) = loc_span(loc);
    if let Some(Value::Record(reserve)) = props.get("reserve") {
        let total: f64 = reserve.values().filter_map(|v| if let Value::Fraction(f) = v { Some(*f) } else { None }).sum();
        if total >= 1.0 {
            out.push(
                Diagnostic::new(
                    codes::INVALID_BUDGET,
                    file,
                    span,
                    format!("the reserves add up to {:.0}%, leaving nothing for the work", total * 100.0),
                )
                .with_primary_message("reserves do not fit"),
            );
        }
    }
    if let Some(Value::List(zones)) = props.get("zones") {
        let order = ["yellow", "red", "fuse"];
        let mut last: Option<(usize, f64)> = None;
        let mut seen = IndexSet::new();
        for zone in zones {
            let Value::Record(z) = zone else { continue };
            let (Some(Value::Word(name)), Some(Value::Fraction(below))) = (z.get("zone"), z.get("below")) else { continue };
            let rank = order.iter().position(|o| o == name).unwrap_or(0);
            if !seen.insert(name.clone()) {
                out.push(Diagnostic::new(codes::INVALID_BUDGET, file, span, format!("zone `{name}` is declared twice")));
            }
            if let Some((prev_rank, prev_below)) = last {
                if rank <= prev_rank || *below >= prev_below {
                    out.push(
                        Diagnostic::new(
                            codes::INVALID_BUDGET,
                            file,
                            span,
                            format!("zone `{name}` (below {:.0}%) is out of order", below * 100.0),
                        )
                        .with_note("zones go yellow, red, fuse, each below the previous one"),
                    );
                }
            }
            last = Some((rank, *below));
        }
    }
}
