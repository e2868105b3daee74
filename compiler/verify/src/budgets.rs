//! Static worst-case bounds of what a run meters, per budget scope and
//! measure, compared with the budgets; the shape of budgets.
//!
//! The bounds count what the control plane meters (reference §12.2):
//!
//! * **steps**: one per attempt of an agent or tool node (humans, gates
//!   and control nodes take none);
//! * **tool calls**: one per call the control plane makes — one per
//!   attempt of a tool node, at most one per turn of an agent;
//! * **tokens**: per model turn, input and output as the provider reports
//!   them, at most `max_input_tokens + max_tokens` (the turn's ceiling,
//!   [`flow_check::ceilings`]: the control plane reserves it and refuses a
//!   turn whose request may hold more input);
//! * **cost**: per turn, the ceiling's tokens at the provider's prices;
//! * **duration**: wall-clock time, which no static bound covers.
//!
//! Per node visit: attempts (`retry.attempts`, at least 2 when a `retry`
//! action can restart the node) × turns (`max_turns`) × the turn's ceiling,
//! the largest over every provider the agent's turns can go to (routes,
//! `switch_model`). A node budget, or the budget of a contract every entry
//! into the node is delegated under, caps a visit; an agent's budget caps
//! all its nodes together. How often a node runs: loop rounds, map items,
//! `max_visits` of rework cycles. Over the graph: the most expensive path,
//! where a `parallel` node pays for all its branches, a `loop` for its
//! round and a `map` for its items; handler actions that jump (also from
//! workflow handlers and budget zones, from anywhere) are edges.
//!
//! Scopes: the run (the workflow's `budget`, over the whole run), an agent
//! (its `budget`, over all its turns), a node (its `budget`, per visit) and
//! a delegation (the contract's `budget`, per delegation). Only the run's
//! budget must provably suffice (E0801, W0801); the others are caps, and
//! their worst cases are reported. A turn without an input ceiling leaves
//! tokens (and priced cost) conditional (W0802) in every scope it counts in.
//!
//! What the bounds assume: providers report no more than a turn's
//! ceilings (a turn that does is recorded by the control plane as a
//! warning), and no attempt is run again after its executor was lost
//! (`lease_expired`, `reconciled`).

use crate::flowgraph::{loc_span, EdgeKind, FastHash, FlowGraph, Parents};
use flow_check::ceilings::{self, TurnBound};
use flow_check::ir::{Decl, Loc, Node, NodeKind, Program, TransferKind, Workflow};
use flow_check::lookup::agent_of;
use flow_check::view::Budget;
use flow_diagnostics::{codes, Diagnostic, Label};
use indexmap::{IndexMap, IndexSet};
use petgraph::graph::NodeIndex;
use petgraph::visit::EdgeRef;
use petgraph::Direction;
use serde::Serialize;

/// The measures a budget limits, in the order reported.
pub const MEASURES: &[&str] = &["steps", "tool_calls", "tokens", "cost", "duration"];

/// What the static worst case says about one limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The worst case is within the limit (after reserves).
    Fits,
    /// The worst case is over the limit.
    Exceeds,
    /// No static bound: enforced at run time only.
    Unbounded,
    /// Within the limit only if the inputs of some turns, which nothing
    /// bounds, are small enough.
    Conditional,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Fits => "fits",
            Status::Exceeds => "exceeds",
            Status::Unbounded => "unbounded",
            Status::Conditional => "conditional",
        }
    }
}

/// The static worst case of one measure of one budget scope.
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetBound {
    pub workflow: String,
    /// `run`, `agent.NAME`, `node.NAME` or `delegation.NAME`, as the
    /// control plane names its scopes.
    pub scope: String,
    /// The budget declaration, when the budget is one (else inline).
    pub budget: Option<String>,
    /// `steps`, `tool_calls`, `tokens`, `cost` or `duration` (milliseconds).
    pub measure: &'static str,
    pub limit: f64,
    /// What ordinary work may use: the limit less the reserves.
    pub available: f64,
    /// The worst case the run can meter in the scope; for a conditional
    /// bound, without the unbounded inputs; `None` when unbounded.
    pub worst_case: Option<f64>,
    /// Turns counted whose input nothing bounds (conditional bounds).
    pub open_turns: f64,
    pub status: Status,
    /// Why a bound is missing or conditional.
    pub note: Option<String>,
    /// Where the budget is written.
    pub loc: Loc,
}

/// Maps keyed by the graph's own node indices: a fast hash, the order kept.
type NodeMap<V> = IndexMap<NodeIndex, V, FastHash>;
type NodeSet = IndexSet<NodeIndex, FastHash>;

/// A bound of one measure: what is counted, and the turns counted whose
/// input nothing bounds (their input is not in `fixed`).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Bound {
    fixed: f64,
    open: f64,
}

const ZERO: Bound = Bound { fixed: 0.0, open: 0.0 };

impl Bound {
    fn is_zero(self) -> bool {
        self.fixed == 0.0 && self.open == 0.0
    }
}

/// `None`: no static bound.
type B = Option<Bound>;

fn add(a: B, b: B) -> B {
    let (a, b) = (a?, b?);
    Some(Bound { fixed: a.fixed + b.fixed, open: a.open + b.open })
}

/// `b` times `m` (how often); nothing times anything is nothing.
fn times(b: B, m: Option<f64>) -> B {
    match (b, m) {
        (Some(b), _) if b.is_zero() => Some(ZERO),
        (Some(b), Some(m)) => Some(Bound { fixed: b.fixed * m, open: b.open * m }),
        _ => None,
    }
}

/// `b` under a cap the control plane enforces (reserve before, refuse
/// what does not fit): at most the cap, whatever the inputs.
fn capped(b: B, cap: Option<f64>) -> B {
    match (b, cap) {
        (b, None) => b,
        (Some(b), Some(c)) if b.open == 0.0 => Some(Bound { fixed: b.fixed.min(c), open: 0.0 }),
        (_, Some(c)) => Some(Bound { fixed: c, open: 0.0 }),
    }
}

fn min_cap(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A jump from any node: its target (`None`: the node itself), the action,
/// and the events that take it (`None`: any).
type Jump<'w> = (Option<NodeIndex>, &'w str, Option<&'w [flow_check::ir::HandlerEvent]>);

/// The graph the bounds walk: the workflow's, plus the jumps the graph
/// does not draw — workflow handlers and actions in property values
/// (budget zones, `on_exhausted`) from every node that can raise them,
/// and `revise`/`replan` without a node argument.
fn budget_graph<'w>(workflow: &'w Workflow, program: &'w Program) -> FlowGraph<'w> {
    let mut flow = FlowGraph::new(workflow, program);
    let start = flow.start;
    let index = |flow: &FlowGraph<'w>, name: &str| flow.index.get(name).copied();
    let mut local: Vec<(NodeIndex, NodeIndex, &'w str)> = Vec::new();
    for (i, node) in workflow.nodes.values().enumerate() {
        let me = NodeIndex::new(i);
        for h in &node.handlers {
            match (h.action.name.as_str(), h.action.args.is_empty()) {
                ("revise", true) => local.push((me, me, h.action.name.as_str())),
                ("replan", true) => local.extend(start.map(|s| (me, s, h.action.name.as_str()))),
                _ => {}
            }
        }
    }
    for gate in workflow.gates.values() {
        let Some(from) = index(&flow, &gate.from) else { continue };
        for h in &gate.handlers {
            match (h.action.name.as_str(), h.action.args.is_empty()) {
                ("revise", true) => local.push((from, from, h.action.name.as_str())),
                ("replan", true) => {
                    let entry = flow_check::rerun::replan_entry(workflow, Some(gate)).and_then(|n| index(&flow, &n));
                    local.extend(entry.map(|s| (from, s, h.action.name.as_str())));
                }
                _ => {}
            }
        }
    }
    // Jumps from anywhere: (target, or `None` for "the node itself"), and
    // the events that take them (`None`: any).
    let mut anywhere: Vec<Jump<'w>> = Vec::new();
    let mut jump = |action: &'w flow_check::ir::Action, events: Option<&'w [flow_check::ir::HandlerEvent]>, flow: &FlowGraph<'w>| match (
        action.name.as_str(),
        action.args.first(),
    ) {
        ("goto" | "activate" | "revise" | "replan", Some(to)) => {
            if let Some(t) = index(flow, to) {
                anywhere.push((Some(t), action.name.as_str(), events));
            }
        }
        ("revise", None) => anywhere.push((None, action.name.as_str(), events)),
        ("replan", None) => anywhere.extend(start.map(|s| (Some(s), action.name.as_str(), events))),
        _ => {}
    };
    for handler in &workflow.handlers {
        jump(&handler.action, Some(&handler.events), &flow);
    }
    for action in ceilings::value_actions(program, workflow) {
        jump(action, None, &flow);
    }
    for (from, to, action) in local {
        flow.graph.add_edge(from, to, EdgeKind::Handler { action, gate: None });
    }
    if !anywhere.is_empty() {
        let index = flow_check::index::PlanIndex::new(program, workflow);
        for (i, node) in workflow.nodes.values().enumerate() {
            if node.kind() == NodeKind::End {
                continue;
            }
            let me = NodeIndex::new(i);
            for &(to, action, events) in &anywhere {
                // A node that handles the events itself never reaches the
                // workflow's handler.
                if events.is_some_and(|events| events.iter().all(|e| handles(workflow, &index, node, e.as_str()))) {
                    continue;
                }
                flow.graph.add_edge(me, to.unwrap_or(me), EdgeKind::Handler { action, gate: None });
            }
        }
    }
    flow
}

/// Whether a node's own handlers take event `event` (as the control
/// plane looks them up, `semantics::failure_step` for a failure: the
/// node's handler for it or its `failure` handler, or an `on_failure`
/// other than `retry`).
fn handles(workflow: &Workflow, index: &flow_check::index::PlanIndex, node: &Node, event: &str) -> bool {
    use flow_check::ir::HandlerEvent;
    use flow_check::semantics::{failure_step, handler_for, FailureStep};
    if let Some(e @ (HandlerEvent::Failure | HandlerEvent::Timeout | HandlerEvent::InvalidOutput)) = HandlerEvent::parse(event) {
        matches!(failure_step(workflow, index, node, e), FailureStep::Handler { .. } | FailureStep::OnFailure(_))
    } else {
        handler_for(&node.handlers, event).is_some()
    }
}

/// Everything the bounds of one workflow share.
struct Bounds<'a, 'p> {
    flow: &'a FlowGraph<'p>,
    program: &'p Program,
    mult: NodeMap<Option<f64>>,
    reached: Parents,
    /// Contract budgets of the nodes every entry into which is delegated.
    delegated: IndexMap<&'p str, Budget<'p>>,
    /// Whether a `retry` action can restart a node (then every visit may
    /// take at least two attempts).
    retry_action: bool,
    /// The providers the workflow's `switch_model` actions name.
    switches: Vec<&'p str>,
}

impl<'a, 'p> Bounds<'a, 'p> {
    fn new(flow: &'a FlowGraph<'p>, program: &'p Program) -> Bounds<'a, 'p> {
        let workflow = flow.workflow;
        let retry_action = ceilings::actions(program, workflow).iter().any(|a| a.name == flow_check::ir::ActionKind::Retry);
        let mut delegated = IndexMap::new();
        for t in workflow.transfers.iter().filter(|t| t.kind() == TransferKind::Delegate) {
            if let Some(budget) = t.contract_decl(program).and_then(|c| c.budget(program)) {
                if every_entry_delegated(flow, &t.to) {
                    delegated.entry(t.to.as_str()).or_insert(budget);
                }
            }
        }
        let switches = ceilings::switch_models(program, workflow);
        Bounds { flow, program, mult: multipliers(flow), reached: flow.reachable(), delegated, retry_action, switches }
    }

    fn attempts(&self, node: &Node) -> f64 {
        let declared = node.retry().map_or(1.0, |r| (r.attempts as f64).max(1.0));
        if self.retry_action {
            declared.max(2.0)
        } else {
            declared
        }
    }

    /// The bound of a turn of `agent` in this workflow.
    fn turn(&self, agent: &Decl) -> TurnBound {
        ceilings::turn_bound_given(self.program, agent, &self.switches)
    }

    /// One visit of a node (all its attempts), before any cap.
    fn intrinsic(&self, node: &Node, q: &str) -> B {
        let tries = self.attempts(node);
        let count = |n: f64| Some(Bound { fixed: n, open: 0.0 });
        match node.kind() {
            NodeKind::Agent => {
                let agent = agent_of(node, self.program)?;
                let turns = tries * ceilings::max_turns(node, agent) as f64;
                let turn = self.turn(agent);
                match q {
                    "steps" => count(tries),
                    // At most one tool call per turn.
                    "tool_calls" => count(if agent.has_tools() { turns } else { 0.0 }),
                    "tokens" => Some(match turn.tokens {
                        Some(tokens) => Bound { fixed: turns * tokens as f64, open: 0.0 },
                        None => Bound { fixed: turns * turn.output_tokens as f64, open: turns },
                    }),
                    "cost" => Some(match turn.cost {
                        Some(cost) => Bound { fixed: turns * cost, open: 0.0 },
                        None => Bound { fixed: turns * turn.output_cost, open: turns },
                    }),
                    _ => None,
                }
            }
            NodeKind::Tool => count(if q == "steps" || q == "tool_calls" { tries } else { 0.0 }),
            // A `flow` node runs another workflow, which this bound does not follow.
            NodeKind::Flow => None,
            // Humans, gates and control nodes take no steps and call nothing.
            _ => Some(ZERO),
        }
    }

    /// The per-visit caps of a node: its own budget, and the contract's
    /// when every entry is delegated.
    fn visit_cap(&self, node: &Node, q: &str) -> Option<f64> {
        let own = node.budget(self.program).and_then(|b| b.limit(q));
        min_cap(own, self.delegated.get(node.name.as_str()).and_then(|b| b.limit(q)))
    }

    /// One visit of a node, capped.
    fn visit(&self, node: &Node, q: &str) -> B {
        capped(self.intrinsic(node, q), self.visit_cap(node, q))
    }

    /// The run-wide cap an agent's own budget sets on its nodes.
    fn agent_cap(&self, node: &Node, q: &str) -> Option<f64> {
        let agent = agent_of(node, self.program)?;
        agent.budget(self.program).and_then(|b| b.limit(q))
    }

    /// The worst path from the start with `weight` per node (one run).
    fn worst(&self, weight: impl Fn(NodeIndex) -> B) -> (B, Vec<NodeIndex>) {
        let Some(start) = self.flow.start else { return (Some(ZERO), Vec::new()) };
        let weights: Vec<B> = self.flow.graph.node_indices().map(&weight).collect();
        let fixed = Dp { flow: self.flow, weight: weights.iter().map(|w| w.map(|b| b.fixed)).collect() };
        let memo = fixed.solve(start);
        let total = memo.get(&(start, false)).map(|b| b.0).unwrap_or(Some(0.0));
        let path = fixed.path(&memo, start);
        let open = Dp { flow: self.flow, weight: weights.iter().map(|w| w.map(|b| b.open)).collect() };
        let open_memo = open.solve(start);
        let open_total = open_memo.get(&(start, false)).map(|b| b.0).unwrap_or(Some(0.0));
        let bound = match (total, open_total) {
            (Some(fixed), Some(open)) => Some(Bound { fixed, open }),
            _ => None,
        };
        (bound, path)
    }

    /// The agent scope's worst case: every visit of its nodes in a run.
    fn agent_worst(&self, agent: &str, q: &str) -> (B, Vec<NodeIndex>) {
        self.worst(|n| {
            let node = self.flow.node(n);
            if node.kind() == NodeKind::Agent && node.target.first().is_some_and(|a| a == agent) {
                times(self.visit(node, q), self.mult[&n])
            } else {
                Some(ZERO)
            }
        })
    }

    /// The run scope's worst case: nodes of agents with their own cap
    /// count that cap (or less) once, the others on the worst path.
    fn run_worst(&self, q: &str) -> (B, Vec<NodeIndex>) {
        let (mut total, path) = self.worst(|n| {
            let node = self.flow.node(n);
            if self.agent_cap(node, q).is_some() {
                Some(ZERO)
            } else {
                times(self.visit(node, q), self.mult[&n])
            }
        });
        let mut capped_agents: IndexMap<&str, f64> = IndexMap::new();
        for n in self.reached.keys() {
            let node = self.flow.node(n);
            if let (Some(cap), Some(agent)) = (self.agent_cap(node, q), node.target.first()) {
                capped_agents.entry(agent.as_str()).or_insert(cap);
            }
        }
        for (agent, cap) in capped_agents {
            total = add(total, capped(self.agent_worst(agent, q).0, Some(cap)));
        }
        (total, path)
    }

    /// The node scope's worst case: one visit.
    fn node_worst(&self, node: &Node, q: &str) -> B {
        let delegated = self.delegated.get(node.name.as_str()).and_then(|b| b.limit(q));
        capped(self.intrinsic(node, q), min_cap(delegated, self.agent_cap(node, q)))
    }

    /// The delegation scope's worst case: one visit when every entry is
    /// delegated (the scope starts afresh at each); otherwise every visit
    /// of the run (the scope lasts until the next delegation).
    fn delegation_worst(&self, n: NodeIndex, q: &str) -> B {
        let node = self.flow.node(n);
        let own = node.budget(self.program).and_then(|b| b.limit(q));
        let visit = capped(self.intrinsic(node, q), own);
        let total = if self.delegated.contains_key(node.name.as_str()) { visit } else { times(visit, self.mult[&n]) };
        capped(total, self.agent_cap(node, q))
    }

    /// The agents whose turns count unbounded input in a scope.
    fn open_agents(&self, q: &str, counts: impl Fn(&Node) -> bool) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for n in self.reached.keys() {
            let node = self.flow.node(n);
            if !counts(node) || !self.intrinsic(node, q).is_some_and(|b| b.open > 0.0) {
                continue;
            }
            if let Some(agent) = node.target.first() {
                if !out.contains(agent) {
                    out.push(agent.clone());
                }
            }
        }
        out
    }

    /// Why a measure has no bound: the first node on the path without one.
    fn unbounded_reason(&self, q: &str, path: &[NodeIndex], counts: impl Fn(&Node) -> bool) -> String {
        let candidates = path.iter().copied().chain(self.reached.keys());
        for n in candidates {
            let node = self.flow.node(n);
            if !counts(node) {
                continue;
            }
            let visit = self.visit(node, q);
            if visit.is_some_and(|b| b.is_zero()) {
                continue;
            }
            if self.mult[&n].is_none() {
                let in_map = self
                    .flow
                    .workflow
                    .nodes
                    .values()
                    .any(|m| m.kind() == NodeKind::Map && m.target.contains(&node.name) && m.max_items().is_none());
                return if in_map {
                    format!("`{}` runs once per item of a `map` without `max_items`", node.name)
                } else {
                    format!("`{}` is on a cycle that only the budget bounds (declare `max_visits`)", node.name)
                };
            }
            if visit.is_none() {
                return match node.kind() {
                    NodeKind::Flow => format!("`{}` runs another workflow, whose {q} this bound does not follow", node.name),
                    _ => format!("`{}` has no {q} ceiling (give it or its agent a `budget: {{ {q}: … }}`)", node.name),
                };
            }
        }
        "a node on the path has no ceiling".into()
    }
}

/// Whether every way into node `to` is a crossing that delegates to it
/// (so its delegation scope starts afresh at each visit).
fn every_entry_delegated(flow: &FlowGraph<'_>, to: &str) -> bool {
    let Some(&n) = flow.index.get(to) else { return false };
    if flow.start == Some(n) || flow.handler_roots.contains(&n) {
        return false;
    }
    let transfers = &flow.workflow.transfers;
    let delegates = |from: &str| transfers.iter().any(|t| t.kind() == TransferKind::Delegate && t.from == from && t.to == to);
    let mut any = false;
    for edge in flow.graph.edges_directed(n, Direction::Incoming) {
        any = true;
        let from = flow.name(edge.source());
        let ok = match edge.weight() {
            EdgeKind::Written(_) => delegates(from),
            // A fan-out delegates from the first transfer to the branch.
            EdgeKind::Fanout => delegates(from) && transfers.iter().filter(|t| t.to == to).all(|t| t.from == from),
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    any
}

/// How often each node can run in one run: its rework cycles' bounds,
/// times the rounds of every enclosing `loop` and the items of every
/// enclosing `map` (and as often as the loop or map itself runs), and
/// never more than its own `max_visits` (a visit past it fails at once,
/// and is metered nothing).
fn multipliers(flow: &FlowGraph<'_>) -> NodeMap<Option<f64>> {
    let workflow = flow.workflow;
    // Rework cycles outside loops.
    let mut own: NodeMap<Option<f64>> = flow.graph.node_indices().map(|n| (n, Some(1.0))).collect();
    let filtered = flow.without_bounded_back_edges();
    for scc in petgraph::algo::kosaraju_scc(&filtered) {
        let cyclic = scc.len() > 1 || filtered.contains_edge(scc[0], scc[0]);
        if !cyclic {
            continue;
        }
        let visits: f64 = scc.iter().filter_map(|&n| flow.node(n).max_visits().map(|v| v as f64)).sum();
        let unannotated: NodeSet = scc.iter().copied().filter(|&n| flow.node(n).max_visits().is_none()).collect();
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
            let own_visits = flow.node(n).max_visits().map(|v| v as f64);
            let bound = if !breaks { None } else { Some(own_visits.unwrap_or(1.0 + visits)) };
            own[&n] = match (own[&n], bound) {
                (Some(a), Some(b)) => Some(a * b),
                _ => None,
            };
        }
    }
    // Loops and maps, nested ones multiplying: passes until nothing
    // changes (one per level of nesting).
    let mut mult = own.clone();
    let enclosing: Vec<(&Node, Option<f64>)> = workflow
        .nodes
        .values()
        .filter_map(|node| match node.kind() {
            NodeKind::Loop => Some((node, node.max_rounds().map(|v| v as f64))),
            NodeKind::Map => Some((node, node.max_items().map(|v| v as f64))),
            _ => None,
        })
        .collect();
    for _ in 0..=enclosing.len() {
        let mut changed = false;
        for &(node, factor) in &enclosing {
            let outer = mult[&flow.index[&node.name]];
            for member in &node.target {
                let m = flow.index[member];
                let value = match (own[&m], outer, factor) {
                    (Some(a), Some(o), Some(f)) => Some(a * o * f),
                    _ => None,
                };
                if mult[&m] != value {
                    mult[&m] = value;
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    for (n, m) in mult.iter_mut() {
        if let Some(cap) = flow.node(*n).max_visits().map(|v| v as f64) {
            *m = Some(m.map_or(cap, |v| v.min(cap)));
        }
    }
    mult
}

struct Dp<'a, 'w> {
    flow: &'a FlowGraph<'w>,
    /// Per node, by graph index.
    weight: Vec<Option<f64>>,
}

fn add1(a: Option<f64>, b: Option<f64>) -> Option<f64> {
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
        if node.kind() == NodeKind::Parallel {
            for branch in &node.target {
                if let Some(j) = flow.workflow.nodes.values().find(|j| j.kind() == NodeKind::Join && j.target.contains(branch)) {
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
        match node.kind() {
            NodeKind::Parallel => {
                let mut join = None;
                for branch in &node.target {
                    inner.push((flow.index[branch], true));
                    if join.is_none() {
                        join = flow
                            .workflow
                            .nodes
                            .values()
                            .find(|j| j.kind() == NodeKind::Join && j.target.contains(branch))
                            .map(|j| flow.index[&j.name]);
                    }
                }
                successors.extend(join);
                // Jumps out of the fan-out (handlers) go on from here too.
                for edge in flow.graph.edges_directed(n, Direction::Outgoing) {
                    if matches!(edge.weight(), EdgeKind::Handler { .. }) {
                        successors.push(edge.target());
                    }
                }
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
                _ => mode && flow.node(edge.target()).kind() == NodeKind::Join,
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
                let mut total = self.weight[n.index()];
                for (part, part_mode) in inner {
                    total = add1(total, total_of(&memo, part, part_mode));
                }
                let mut best: Option<(Option<f64>, NodeIndex)> = None;
                for s in successors {
                    let candidate = total_of(&memo, s, mode);
                    if best.as_ref().is_none_or(|(b, _)| better(candidate, *b)) {
                        best = Some((candidate, s));
                    }
                }
                if let Some((cost, _)) = best {
                    total = add1(total, cost);
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

/// Where a budget is written (its declaration, or `inline` where it is
/// written inline) and the name of its declaration.
fn budget_site(budget: &Budget<'_>, inline: Loc) -> (Option<String>, Loc) {
    (budget.name.map(str::to_string), budget.decl_loc.unwrap_or(inline))
}

/// One scope to report: its name, budget and where it is written.
struct ScopeSite<'p> {
    scope: String,
    budget: Budget<'p>,
    name: Option<String>,
    loc: Loc,
    /// Where a diagnostic about it is reported.
    at: Loc,
}

/// A scope's worst case of one measure, with the path that attains it.
struct Worst {
    bound: B,
    path: Vec<NodeIndex>,
    /// The agents whose turns count unbounded input here.
    open_agents: Vec<String>,
}

/// The bounds of every budget scope of one workflow, and their findings.
fn workflow_bounds(flow: &FlowGraph<'_>, program: &Program, out: &mut Vec<Diagnostic>, report: &mut Vec<BudgetBound>) {
    let workflow = flow.workflow;
    let mut sites: Vec<ScopeSite<'_>> = Vec::new();
    if let Some(budget) = workflow.budget(program) {
        let (name, loc) = budget_site(&budget, workflow.loc);
        sites.push(ScopeSite { scope: "run".into(), budget, name, loc, at: workflow.loc });
    }
    let bounds = Bounds::new(flow, program);
    let mut agents: IndexSet<&str> = IndexSet::new();
    for n in bounds.reached.keys() {
        let node = flow.node(n);
        if node.kind() == NodeKind::Agent {
            if let Some(agent) = node.target.first() {
                agents.insert(agent);
            }
        }
    }
    for agent in &agents {
        let Some(decl) = program.decls.get(*agent) else { continue };
        if let Some(budget) = decl.budget(program) {
            let (name, loc) = budget_site(&budget, decl.loc);
            sites.push(ScopeSite { scope: format!("agent.{agent}"), budget, name, loc, at: decl.loc });
        }
    }
    for n in bounds.reached.keys() {
        let node = flow.node(n);
        if let Some(budget) = node.budget(program) {
            let (name, loc) = budget_site(&budget, node.loc);
            sites.push(ScopeSite { scope: format!("node.{}", node.name), budget, name, loc, at: node.loc });
        }
    }
    let mut delegations: IndexSet<(&str, &str)> = IndexSet::new();
    for t in workflow.transfers.iter().filter(|t| t.kind() == TransferKind::Delegate) {
        let Some(contract) = t.contract() else { continue };
        let Some(decl) = program.decls.get(contract) else { continue };
        let reached = flow.index.get(&t.to).is_some_and(|n| bounds.reached.contains_key(n));
        if !reached || !delegations.insert((t.to.as_str(), contract)) {
            continue;
        }
        if let Some(budget) = decl.budget(program) {
            let (_, loc) = budget_site(&budget, decl.loc);
            sites.push(ScopeSite { scope: format!("delegation.{}", t.to), budget, name: Some(contract.to_string()), loc, at: t.loc });
        }
    }
    for site in &sites {
        let reserve = site.budget.reserve.total();
        for &q in MEASURES {
            let Some(limit) = site.budget.limit(q) else { continue };
            let available = limit * (1.0 - reserve).max(0.0);
            if q == "duration" {
                report.push(BudgetBound {
                    workflow: workflow.name.clone(),
                    scope: site.scope.clone(),
                    budget: site.name.clone(),
                    measure: q,
                    limit,
                    available: limit,
                    worst_case: None,
                    open_turns: 0.0,
                    status: Status::Unbounded,
                    note: Some(
                        "the wall-clock time of model calls, tool calls and human decisions has no static bound; enforced at run time"
                            .into(),
                    ),
                    loc: site.loc,
                });
                continue;
            }
            let worst = scope_worst(&bounds, &site.scope, q);
            let status = match worst.bound {
                None => Status::Unbounded,
                Some(b) if b.fixed > available + 1e-9 => Status::Exceeds,
                Some(b) if b.open > 0.0 => Status::Conditional,
                Some(_) => Status::Fits,
            };
            let note = match status {
                Status::Unbounded => Some(bounds.unbounded_reason(q, &worst.path, |n| scope_counts(&bounds, &site.scope, n, q))),
                Status::Conditional => Some(open_note(&worst)),
                _ => None,
            };
            findings(flow, site, q, limit, available, reserve, &worst, status, note.as_deref(), out);
            report.push(BudgetBound {
                workflow: workflow.name.clone(),
                scope: site.scope.clone(),
                budget: site.name.clone(),
                measure: q,
                limit,
                available,
                worst_case: worst.bound.map(|b| b.fixed),
                open_turns: worst.bound.map(|b| b.open).unwrap_or(0.0),
                status,
                note,
                loc: site.loc,
            });
        }
    }
}

/// Whether the use of `node` counts in `scope` directly (not through an
/// agent's cap).
fn scope_counts(bounds: &Bounds<'_, '_>, scope: &str, node: &Node, q: &str) -> bool {
    if scope == "run" {
        bounds.agent_cap(node, q).is_none()
    } else if let Some(agent) = scope.strip_prefix("agent.") {
        node.kind() == NodeKind::Agent && node.target.first().is_some_and(|a| a == agent)
    } else {
        scope.split_once('.').is_some_and(|(_, n)| n == node.name)
    }
}

fn scope_worst(bounds: &Bounds<'_, '_>, scope: &str, q: &str) -> Worst {
    let flow = bounds.flow;
    let node_named = |name: &str| flow.index.get(name).copied();
    let (bound, path, open_agents) = if scope == "run" {
        let (bound, path) = bounds.run_worst(q);
        let open = bounds.open_agents(q, |n| bounds.agent_cap(n, q).is_none() && bounds.visit_cap(n, q).is_none());
        (bound, path, open)
    } else if let Some(agent) = scope.strip_prefix("agent.") {
        let (bound, path) = bounds.agent_worst(agent, q);
        let open = bounds.open_agents(q, |n| n.target.first().is_some_and(|a| a == agent) && bounds.visit_cap(n, q).is_none());
        (bound, path, open)
    } else if let Some(n) = scope.strip_prefix("node.").and_then(node_named) {
        let node = flow.node(n);
        (bounds.node_worst(node, q), vec![n], node.target.first().cloned().into_iter().collect())
    } else if let Some(n) = scope.strip_prefix("delegation.").and_then(node_named) {
        let node = flow.node(n);
        (bounds.delegation_worst(n, q), vec![n], node.target.first().cloned().into_iter().collect())
    } else {
        (None, Vec::new(), Vec::new())
    };
    Worst { bound, path, open_agents }
}

/// What a conditional bound leaves out.
fn open_note(worst: &Worst) -> String {
    let agents: Vec<String> = worst.open_agents.iter().map(|a| format!("`{a}`")).collect();
    let who = match agents.len() {
        0 => "some agents or their providers".to_string(),
        1 => format!("agent {} or its providers", agents[0]),
        _ => format!("agents {} or their providers", agents.join(", ")),
    };
    format!("input tokens per turn are unbounded: no `max_input_tokens` for {who}")
}

#[allow(clippy::too_many_arguments)]
fn findings(
    flow: &FlowGraph<'_>,
    site: &ScopeSite<'_>,
    q: &str,
    limit: f64,
    available: f64,
    reserve: f64,
    worst: &Worst,
    status: Status,
    note: Option<&str>,
    out: &mut Vec<Diagnostic>,
) {
    let workflow = flow.workflow;
    let run = site.scope == "run";
    let (bf, bs) = loc_span(site.loc);
    let (af, at) = loc_span(site.at);
    let subject = if run { format!("in `{}`", workflow.name) } else { format!("of scope `{}` in `{}`", site.scope, workflow.name) };
    match (status, worst.bound) {
        (Status::Exceeds, Some(b)) if run => {
            let reserve_note = if reserve > 0.0 { format!(" ({limit} less {:.0}% reserves)", reserve * 100.0) } else { String::new() };
            let mut d = Diagnostic::new(
                codes::BUDGET_EXCEEDED,
                af,
                at,
                format!("the worst case of {q} {subject} is {}, over the budget's {}{reserve_note}", show(q, b.fixed), show(q, available)),
            )
            .with_primary_message(format!("worst case {}", show(q, b.fixed)))
            .with_label(Label::secondary(bf, bs, format!("budget allows {}", show(q, available))))
            .with_witness(flow.witness(&worst.path));
            if b.open > 0.0 {
                d = d.with_note(format!("and more: the input of up to {:.0} model turns, which nothing bounds, is not counted", b.open));
            }
            out.push(d);
        }
        (Status::Unbounded, _) if run => {
            out.push(
                Diagnostic::new(codes::NO_STATIC_BOUND, af, at, format!("no static bound on {q} {subject}: {}", note.unwrap_or_default()))
                    .with_primary_message("enforced only at run time")
                    .with_label(Label::secondary(bf, bs, format!("the budget limits {q}"))),
            );
        }
        (Status::Conditional, Some(b)) => {
            out.push(
                Diagnostic::new(
                    codes::BUDGET_CONDITIONAL,
                    af,
                    at,
                    format!(
                        "the worst case of {q} {subject} is {} plus the input of up to {:.0} model turns, which nothing bounds",
                        show(q, b.fixed),
                        b.open
                    ),
                )
                .with_primary_message("bound is conditional")
                .with_label(Label::secondary(bf, bs, format!("budget allows {}", show(q, available))))
                .with_note(note.unwrap_or_default().to_string())
                .with_help("declare `max_input_tokens` on the provider (or the agent): a turn whose request may hold more is not sent"),
            );
        }
        _ => {}
    }
}

/// The worst cases of every budget scope of `workflow`, and the findings.
pub fn bounds_of(workflow: &Workflow, program: &Program, out: &mut Vec<Diagnostic>, report: &mut Vec<BudgetBound>) {
    if !has_budgets(workflow, program) {
        return;
    }
    let flow = budget_graph(workflow, program);
    workflow_bounds(&flow, program, out, report);
}

/// Whether a run of `workflow` has any budget scope.
fn has_budgets(workflow: &Workflow, program: &Program) -> bool {
    workflow.budget(program).is_some()
        || workflow.nodes.values().any(|n| n.budget(program).is_some() || agent_of(n, program).is_some_and(|a| a.budget(program).is_some()))
        || workflow.transfers.iter().any(|t| t.kind() == TransferKind::Delegate)
}

/// What a bound that fits rests on, when the data plane reports the
/// amounts (tokens, cost): the model checker takes a scope that fits as one
/// that never runs out.
pub fn assumption(b: &BudgetBound) -> Option<&'static str> {
    (b.status == Status::Fits && matches!(b.measure, "tokens" | "cost"))
        .then_some("providers report no more than a turn's max_input_tokens and max_tokens; more is recorded as a warning")
}

/// One bound for people, as `flowc verify` notes it: the scope, the
/// measure, the worst case against the limit, and the status.
pub fn describe(b: &BudgetBound) -> String {
    let named = b.budget.as_ref().map(|n| format!(" `{n}`")).unwrap_or_default();
    let whose = match b.scope.split_once('.') {
        Some(("agent", a)) => format!("budget{named} of agent `{a}` in `{}`", b.workflow),
        Some(("node", n)) => format!("budget{named} of node `{n}` (per visit) in `{}`", b.workflow),
        Some(("delegation", n)) => {
            format!("budget of contract `{}` (per delegation to `{n}`) in `{}`", b.budget.as_deref().unwrap_or("?"), b.workflow)
        }
        _ => format!("budget{named} of `{}`", b.workflow),
    };
    let limit = if b.available < b.limit - 1e-9 {
        format!("limit {}, {} after reserves", show(b.measure, b.limit), show(b.measure, b.available))
    } else {
        format!("limit {}", show(b.measure, b.limit))
    };
    let worst = match b.worst_case {
        None => "no static bound".to_string(),
        Some(w) if b.open_turns > 0.0 => {
            format!("worst case {} plus the input of up to {:.0} model turns", show(b.measure, w), b.open_turns)
        }
        Some(w) => format!("worst case {}", show(b.measure, w)),
    };
    let why = match (b.status, &b.note) {
        (Status::Unbounded | Status::Conditional, Some(note)) => format!(" — {note}"),
        _ => assumption(b).map(|a| format!(" (assuming {a})")).unwrap_or_default(),
    };
    format!("{whose}: {}: {worst}, {limit}: {}{why}", b.measure, b.status.as_str())
}

/// A quantity for people: `$1.50`, `21 steps`, `12 tool calls`, `10m`.
pub fn show(q: &str, v: f64) -> String {
    match q {
        "duration" => {
            let ms = v.max(0.0) as u64;
            match ms {
                0 => "0s".into(),
                _ if ms.is_multiple_of(3_600_000) => format!("{}h", ms / 3_600_000),
                _ if ms.is_multiple_of(60_000) => format!("{}m", ms / 60_000),
                _ if ms.is_multiple_of(1000) => format!("{}s", ms / 1000),
                _ => format!("{ms}ms"),
            }
        }
        // Cents, or more digits for amounts below a cent.
        "cost" if v != 0.0 && v.abs() < 0.01 => format!("${v:.4}"),
        "cost" => format!("${v:.2}"),
        _ => format!("{v:.0} {}", q.replace('_', " ")),
    }
}

/// E0802: reserves that do not fit, zones out of order.
pub fn check_budget_shape(budget: &Budget<'_>, loc: Loc, out: &mut Vec<Diagnostic>) {
    let (file, span) = loc_span(loc);
    let total = budget.reserve.total();
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
    let mut last: Option<(usize, f64)> = None;
    let mut seen = IndexSet::new();
    for zone in &budget.zones {
        let (name, below) = (zone.zone, zone.below);
        let rank = name as usize;
        if !seen.insert(name) {
            out.push(Diagnostic::new(codes::INVALID_BUDGET, file, span, format!("zone `{name}` is declared twice")));
        }
        if let Some((prev_rank, prev_below)) = last {
            if rank <= prev_rank || below >= prev_below {
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
        last = Some((rank, below));
    }
}
