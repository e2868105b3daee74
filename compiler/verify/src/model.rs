//! The abstract semantics of a workflow, for the model checker.
//!
//! A state is the set of running branches (*threads*: a node and where its
//! visit is), the counters that bound iterations (loop rounds, `max_visits`,
//! map items, hops between a pair of nodes), the last decision of each
//! human node, join arrivals, the budget zone, and whether the run
//! terminated. A transition moves one thread and emits at most one
//! [`Label`] — an abstract trace event. What the data plane decides is a
//! nondeterministic choice: whether an agent or tool node completes,
//! fails (after its retries) or exhausts the budget; which of an agent's
//! allowed tools it calls; which `when` guards hold (except guards on a human
//! node's `decision`, which the state knows); a gate's outcome among those its
//! evaluators and `on_error` can produce; every decision a decider may take;
//! whether a loop converged. Branches of a `parallel` interleave.
//!
//! The abstraction over-approximates the runtime (engine.rs) with these
//! documented exceptions (reference §8.4): an agent calls each of its tools
//! at most once per visit, in declaration order; a handoff is always
//! accepted; deadlines and cancellation from outside are not modelled; a
//! map runs its item node at most `max_items` times (twice when it
//! declares no bound).

use crate::obligations::Obligation;
use flow_check::ir::ActionKind;
use flow_check::ir::{Action, BinOp, Guard, Handler, Program, TExpr, TExprKind, Value, Workflow};
use flow_check::ir::{HandlerEvent, NodeKind, TransferKind};
use flow_check::semantics::Refusal;
use flow_check::view::{Budget, OnFailure};
use flow_trace::{Decision, Outcome, TerminationStatus, Via, Zone};
use indexmap::IndexSet;

mod live;
pub(crate) use live::places;
pub use live::{quiet, unexpected_move};

pub type NodeId = u16;

/// An abstract trace event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Label {
    Started(NodeId),
    Completed(NodeId),
    /// A node completes after a failure or a decision, by a `skip`
    /// (status index 1, `skipped`) or any other going-on action (2,
    /// `degraded`), as the engine records it.
    Settled(NodeId, u8),
    Failed(NodeId),
    /// A node fails as its attempt starts: its first turn's input is over
    /// the declared `max_input_tokens`, so it is never sent (a failure to
    /// policies; `input_too_large` in the witness).
    FailedUnsent(NodeId),
    /// A visit fails with `invalid_output` (a join's merge not of its type).
    FailedInvalid(NodeId),
    /// A tool call (tool index, calling agent index, node).
    Called(u16, Option<u16>, NodeId),
    Refused(u16, Option<u16>, NodeId),
    HandedOff(NodeId, NodeId),
    /// A handoff refused: its message dead-lettered (the same policy step
    /// as [`Label::HandedOff`]).
    DeadLettered(NodeId, NodeId),
    /// A gate outcome (gate index, outcome index into [`OUTCOMES`]).
    Outcome(u16, u8),
    /// A decision (subject index, decision index into [`DECISIONS`], principal index).
    Decided(u16, u8, u16),
    /// A budget zone entered: the zone scope (index into the model's zone
    /// scopes) and the zone (index into [`ZONES`]).
    Zone(u16, u8),
    /// The run terminated (reason index).
    Terminated(u16),
    /// Control moved along an edge (not a policy step): from, to, how
    /// (see [`Model::via`]).
    Edge(NodeId, NodeId, u8),
    /// A budget was exhausted while the node waited (not a policy step).
    Exhausted(NodeId),
    /// A declared handler's action was taken (handler site index; not a
    /// policy step: the engine's `action_taken`).
    Acted(u16),
    /// A declared record written (index into [`Model::records`]).
    Recorded(u16),
}

/// Gate outcomes as handler events name them, in `flow_trace::Outcome`'s order.
pub const OUTCOMES: [&str; 3] = [Outcome::Pass.as_str(), Outcome::RequiresDecision.as_str(), Outcome::Block.as_str()];
pub const DECISIONS: &[Decision] = Decision::ALL;

/// The index of `timeout` in [`DECISIONS`]: no decision came in time.
pub const TIMEOUT: u8 = 4;

/// The principal index of `control`, which records a timed-out decision.
pub const CONTROL: u16 = u16::MAX;
pub const ZONES: &[Zone] = Zone::ALL;
const VIA_GATE: u8 = 200;

/// Where a thread is in its node's visit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Phase {
    Start,
    /// Agent or tool node: its attempt starts (a control step).
    Attempt,
    /// Agent node: considering tool `i` (allowed tools, then restricted probes).
    Tools(u8),
    /// Agent node: tool `i` needs a human confirmation.
    ToolConfirm(u8),
    /// Agent node: tool `i` is called (after a confirmation).
    ToolCall(u8),
    /// Tool node: its tool needs a human confirmation.
    NodeConfirm,
    /// The visit fails now (over `max_visits`, a refused confirmation).
    FailNow,
    /// Human node: no decision came in time; the visit fails with `timeout`.
    TimedOut,
    /// Fails now with `invalid_output` (a join's merged output not of its
    /// declared type).
    FailInvalid,
    /// Tool node: the call.
    NodeCall,
    /// Agent or tool node: completes, fails, exhausts the budget, or changes zone.
    Finish,
    /// A completed node's append to the `i`-th blackboard it writes under
    /// `requires: approval`: a human approves or rejects it, then it goes on.
    Approve(u8),
    /// After a `retry` action: the last attempt.
    Retried,
    Human,
    Complete,
    /// Completes after a failure or a decision (see [`Label::Settled`]).
    Settle(u8),
    /// A handler's action is taken (recorded), then applied.
    Taken(u16),
    Leave,
    /// The judges of the gate's `k`-th `human` evaluator decide, before its
    /// outcome; `floor` is the most severe verdict so far (an OUTCOMES index).
    Judge(u16, u8, u8),
    /// The gate's outcome after its judges: at least `floor`, exactly it
    /// when judges are its only evaluators.
    Judged(u16, u8),
    Gate(u16),
    Decide(u16),
    Enter(NodeId),
    Handoff(NodeId),
    Jump(NodeId, u8),
    Escalate(u16),
    RoundEnd(NodeId),
    MapNext,
    Fanout,
    JoinArrive(NodeId),
    Terminate(u16),
    /// A parallel node completes after its branches started.
    FanDone,
    /// A completed node writes its `i`-th record; `true` when it completed
    /// by settling (then it leaves; else it goes on as a completion does).
    Record(u8, bool),
    /// Gate `g` recorded outcome `o` and writes its `i`-th record; then
    /// the outcome's action.
    GateRecord(u16, u8, u8),
}

/// An abstract state.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct St {
    /// Running threads, sorted (so interleavings that meet are one state).
    pub threads: Vec<(NodeId, Phase)>,
    /// Counters: see `Model::slots`.
    pub vars: Vec<u32>,
    pub done: bool,
}

impl St {
    /// Whether the run ended here (terminated, or nothing left to run).
    pub fn is_final(&self) -> bool {
        self.done || self.threads.is_empty()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Agent,
    Tool,
    Human,
    End,
    Parallel,
    Join,
    Loop,
    Map,
    /// A computed value: made by the control plane, no data-plane call;
    /// what it is, is data the model does not track.
    Compute,
    Other,
}

#[derive(Debug, Clone)]
struct ToolUse {
    tool: u16,
    confirm: bool,
    /// A restricted tool the agent may ask for and be refused.
    probe: bool,
}

/// A handler's action in its context, resolved once.
#[derive(Debug, Clone)]
struct Site {
    action: Action,
    node: Option<NodeId>,
    gate: Option<u16>,
    event: HandlerEvent,
}

#[derive(Debug, Clone)]
struct GateInfo {
    from: NodeId,
    to: NodeId,
    outcomes: Vec<u8>,
    /// Per event (outcomes, decisions, `timeout`): the handler site.
    on: Vec<(String, u16)>,
    deciders: Vec<u16>,
    decisions: Vec<u8>,
    subject: u16,
    reason: Option<String>,
    replan_scope: Option<NodeId>,
    /// The gate declares a `timeout`: a decision on it may time out.
    timeout: bool,
    /// Whether the gate can only PASS on a valid output of `from`
    /// (`flow_check::semantics::passes_on_valid_output`).
    pass_on_valid: bool,
    /// Its `human` evaluators: each decision's subject, its judges, and
    /// the outcome a reject gives (an OUTCOMES index).
    judges: Vec<(u16, Vec<u16>, u8)>,
    /// Whether every evaluator is a `human` one (the judges decide alone).
    only_judges: bool,
    /// Its declared records (indices into [`Model::records`]).
    records: Vec<u16>,
}

/// Which agent and tool nodes a budget scope meters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Covers {
    /// The run's budget: every node.
    All,
    /// An agent's budget: the nodes that run that agent.
    Agent(u16),
    /// A node's own budget, or the budget a delegation grants it: that
    /// node (the scope starts afresh with each visit).
    Node(NodeId),
}

/// A budget scope with zones, as the engine keeps it (`budget.rs`): the
/// zones by falling threshold, each with its actions.
#[derive(Debug, Clone)]
pub struct ZoneScope {
    /// The scope's name in trace events: `run`, `agent.A`, `node.N`, `delegation.N`.
    pub name: String,
    covers: Covers,
    /// The slot holding the scope's zone: 0 green, else 1 + index into `zones`.
    slot: usize,
    /// Zones, least severe first: the zone (index into [`ZONES`]) and its actions.
    zones: Vec<(u8, Vec<Action>)>,
    /// The measures the scope limits (`METERS_*`): its share changes only
    /// when one of them is metered (time, always).
    measures: u8,
}

/// What a step meters, against the measures a budget scope limits.
const METERS_STEPS: u8 = 1;
const METERS_TOKENS: u8 = 2;
const METERS_CALLS: u8 = 4;
const METERS_COST: u8 = 8;
const METERS_TIME: u8 = 16;

impl ZoneScope {
    /// The zone's actions as the engine records them.
    pub fn actions(&self, zone: u8) -> &[Action] {
        self.zones.iter().find(|(z, _)| *z == zone).map(|(_, a)| a.as_slice()).unwrap_or_default()
    }
}

#[derive(Debug, Clone)]
struct NodeInfo {
    name: String,
    kind: Kind,
    targets: Vec<NodeId>,
    agent: Option<u16>,
    tools: Vec<ToolUse>,
    /// Tool node: its tool and whether it needs confirmation.
    tool: Option<(u16, bool)>,
    /// Agent node: a turn may be refused before it is sent (its input over
    /// a declared `max_input_tokens`), failing the attempt at its start.
    input_limited: bool,
    principals: Vec<u16>,
    decisions: Vec<u8>,
    subject: u16,
    end_reason: u16,
    /// Edges in declaration order: target and guard.
    edges: Vec<(NodeId, Guard)>,
    in_loop: Option<NodeId>,
    join_of: Option<NodeId>,
    map_of: Option<NodeId>,
    /// Resolved handlers for node events (`failure`, `timeout`, decisions, `exhausted`).
    on: Vec<(String, u16)>,
    on_failure: Option<OnFailure>,
    max_visits: Option<(usize, u32)>,
    loop_slot: usize,
    loop_max: u32,
    loop_until: bool,
    map_bound: u32,
    join_slot: usize,
    join_rule: flow_check::ir::JoinRule,
    can_timeout: bool,
    /// Join: how its run may fail as it merges — `conflicts: fail` (the
    /// branches disagree) and a declared `output` type the merge misses.
    join_conflicts_fail: bool,
    join_typed: bool,
    /// Human node: the slot of its last decision.
    dec_slot: usize,
    /// Whether every `when` guard can be false at once (no written
    /// default): false when the guards provably cover the tested value.
    guards_can_fail: bool,
    /// Per edge, and for a loop's `until`: the nodes whose outputs the
    /// condition reads (reading one that never completed is an error).
    edge_refs: Vec<Vec<NodeId>>,
    until_refs: Vec<NodeId>,
    /// The appends it makes under `requires: approval`, in `writes`
    /// order: the decision's subject and who may decide.
    approvals: Vec<(u16, Vec<u16>)>,
    /// Its declared records (indices into [`Model::records`]).
    records: Vec<u16>,
}

/// The abstract model of one workflow.
#[derive(Debug)]
pub struct Model<'p> {
    pub program: &'p Program,
    pub workflow: &'p Workflow,
    nodes: Vec<NodeInfo>,
    gates: Vec<GateInfo>,
    pub gate_names: Vec<String>,
    /// The declared records: each one's name and the node where it is
    /// written (its node, or its gate's `from`).
    pub records: Vec<(String, NodeId)>,
    pub tools: IndexSet<String>,
    pub agents: IndexSet<String>,
    pub principals: IndexSet<String>,
    pub subjects: IndexSet<String>,
    pub reasons: IndexSet<String>,
    sites: Vec<Site>,
    start: Option<NodeId>,
    slots: usize,
    /// Whether every run is finite: the workflow has a budget (exhaustion is
    /// possible at every agent or tool step) or a deadline.
    pub finite_runs: bool,
    /// Per node: whether a budget scope that meters it can run out — one
    /// of its measures has no static worst case within its limit (a scope
    /// whose every limit provably fits is never exhausted).
    exhaustible: Vec<bool>,
    exhaust_site: Option<u16>,
    /// Budget scopes with zones.
    pub zone_scopes: Vec<ZoneScope>,
    /// The reasons a `fallback` ends a run with (status partial).
    partial_reasons: IndexSet<String>,
    escalate_to: Vec<u16>,
    handoffs: Vec<(NodeId, NodeId)>,
    /// The boundaries whose handoff, or delegation, may be refused as it
    /// happens (`semantics::refusal`): the sender then fails.
    handoff_refusals: rustc_hash::FxHashMap<(NodeId, NodeId), Refusal>,
    delegation_refusals: rustc_hash::FxHashMap<(NodeId, NodeId), Refusal>,
    /// The gate on each boundary `from -> to` (the plan index's).
    gate_on: rustc_hash::FxHashMap<(NodeId, NodeId), u16>,
    workflow_on: Vec<(String, u16)>,
    /// Per pair of nodes with a hop limit (`PlanIndex::hop_limit`), under
    /// both orders: the slot counting its crossings, and the limit.
    hop_slots: rustc_hash::FxHashMap<(NodeId, NodeId), (usize, u32)>,
    /// The plan index (`flow_check::index`), as the engine reads it.
    pub(crate) index: flow_check::index::PlanIndex,
    /// Per node: its bit in the output bitsets (`done_base`,
    /// `settled_base`), or `u32::MAX`: only the nodes whose output the
    /// model ever reads (a guard, an `until`, a gate that passes on a valid
    /// output, a refusal of an unvalidated sender) have one.
    out_bit: Vec<u32>,
    /// The first slot of the bitset of nodes that have an output.
    done_base: usize,
    /// The first slot of the bitset of nodes whose output is a skipped or
    /// degraded one.
    settled_base: usize,
    /// Whether a branch's control steps run without interleaving, as in
    /// the engine (on by default; off only in tests, for the coarser model
    /// where every step interleaves).
    pub reduce: bool,
    /// Which counters and output bits a thread at each node may still
    /// read (`live.rs`): the rest are cleared, so states that differ only
    /// in what no future step reads are one state.
    live: live::Liveness,
    /// Whether dead counters and bits are cleared (on by default; off only
    /// in tests, to show the reduction changes no verdict).
    pub dead_vars: bool,
    /// Whether the model checker stops exploring a product state from
    /// which the policy can no longer change (its cone of influence; on by
    /// default, off only in tests).
    pub cone: bool,
}

fn intern(list: &mut IndexSet<String>, name: &str) -> u16 {
    match list.get_index_of(name) {
        Some(i) => i as u16,
        None => list.insert_full(name.to_string()).0 as u16,
    }
}

impl<'p> Model<'p> {
    /// The model of `workflow`. `obligations` lists the restricted tool
    /// edges an agent may probe.
    pub fn new(program: &'p Program, workflow: &'p Workflow, obligations: &[Obligation]) -> Model<'p> {
        let node_index = |name: &str| workflow.nodes.get_index_of(name).map(|i| i as NodeId);
        let mut m = Model {
            program,
            workflow,
            index: flow_check::index::PlanIndex::new(program, workflow),
            nodes: Vec::new(),
            gates: Vec::new(),
            gate_names: Vec::new(),
            records: Vec::new(),
            tools: IndexSet::new(),
            agents: IndexSet::new(),
            principals: IndexSet::new(),
            subjects: IndexSet::new(),
            reasons: IndexSet::new(),
            sites: Vec::new(),
            start: None,
            slots: 0,
            finite_runs: false,
            exhaustible: Vec::new(),
            exhaust_site: None,
            zone_scopes: Vec::new(),
            partial_reasons: IndexSet::new(),
            escalate_to: Vec::new(),
            handoffs: Vec::new(),
            handoff_refusals: Default::default(),
            delegation_refusals: Default::default(),
            gate_on: Default::default(),
            workflow_on: Vec::new(),
            hop_slots: Default::default(),
            out_bit: Vec::new(),
            done_base: 0,
            settled_base: 0,
            reduce: true,
            live: live::Liveness::default(),
            dead_vars: true,
            cone: true,
        };
        m.start = workflow.start().and_then(node_index);
        let budget = workflow.budget(program);
        // Every run is finite when something bounds its steps or its time;
        // a limit on tokens, tool calls or cost alone does not (a loop of
        // tool nodes spends no tokens).
        let limits_steps = budget.as_ref().is_some_and(|b| b.steps.is_some() || b.duration_ms.is_some());
        m.finite_runs = limits_steps || workflow.deadline_ms().is_some();
        for p in workflow.escalate_to() {
            let i = intern(&mut m.principals, &p);
            m.escalate_to.push(i);
        }
        // Every node, before anything refers to them by index.
        for (name, node) in &workflow.nodes {
            let kind = match node.kind() {
                NodeKind::Agent => Kind::Agent,
                NodeKind::Tool => Kind::Tool,
                NodeKind::Human => Kind::Human,
                NodeKind::End => Kind::End,
                NodeKind::Parallel => Kind::Parallel,
                NodeKind::Join => Kind::Join,
                NodeKind::Loop => Kind::Loop,
                NodeKind::Map => Kind::Map,
                NodeKind::Compute => Kind::Compute,
                _ => Kind::Other,
            };
            let subject = intern(&mut m.subjects, name);
            m.nodes.push(NodeInfo {
                name: name.clone(),
                kind,
                targets: Vec::new(),
                agent: None,
                tools: Vec::new(),
                tool: None,
                input_limited: false,
                principals: Vec::new(),
                decisions: Vec::new(),
                subject,
                end_reason: 0,
                edges: Vec::new(),
                in_loop: None,
                join_of: None,
                map_of: None,
                on: Vec::new(),
                on_failure: None,
                max_visits: None,
                loop_slot: 0,
                loop_max: 1,
                loop_until: false,
                map_bound: 2,
                join_slot: 0,
                join_rule: flow_check::ir::JoinRule::All,
                can_timeout: false,
                join_conflicts_fail: false,
                join_typed: false,
                dec_slot: 0,
                guards_can_fail: true,
                edge_refs: Vec::new(),
                until_refs: Vec::new(),
                approvals: Vec::new(),
                records: Vec::new(),
            });
        }
        let confirm_of = |tool: &str| program.decls.get(tool).is_some_and(|d| d.confirm());
        let switches = flow_check::ceilings::switch_models(program, workflow);
        for (i, (name, node)) in workflow.nodes.iter().enumerate() {
            let targets: Vec<NodeId> = node.target.iter().filter_map(|t| node_index(t)).collect();
            let mut info = m.nodes[i].clone();
            info.targets = targets.clone();
            match info.kind {
                Kind::Agent => {
                    if let Some(agent) = node.target.first() {
                        let a = intern(&mut m.agents, agent);
                        info.agent = Some(a);
                        if let Some(decl) = program.decls.get(agent) {
                            info.input_limited = flow_check::ceilings::turn_providers_given(decl, &switches)
                                .iter()
                                .any(|p| flow_check::ceilings::TurnCeiling::of(decl, program.decls.get(*p)).max_input_tokens.is_some());
                            // A turn on private data whose own provider is
                            // not local may find no local route: not sent.
                            let own_local = decl.provider().and_then(|p| program.decls.get(p)).is_some_and(|p| p.local());
                            info.input_limited |= flow_check::semantics::handles_private_data(node, decl) && !own_local;
                        }
                        let allowed = program.decls.get(agent).map(|d| d.tools()).unwrap_or_default();
                        for tool in &allowed {
                            let t = intern(&mut m.tools, tool);
                            info.tools.push(ToolUse { tool: t, confirm: confirm_of(tool), probe: false });
                            intern(&mut m.subjects, &format!("confirm.{tool}"));
                        }
                        for o in obligations.iter().filter(|o| o.kind == "restricted_tool_edge" && o.workflow == workflow.name) {
                            if o.subject.first() == Some(agent) {
                                if let Some(tool) = o.subject.get(1) {
                                    let t = intern(&mut m.tools, tool);
                                    if !info.tools.iter().any(|u| u.tool == t) {
                                        info.tools.push(ToolUse { tool: t, confirm: false, probe: true });
                                    }
                                }
                            }
                        }
                    }
                }
                Kind::Tool => {
                    if let Some(tool) = node.target.first() {
                        let t = intern(&mut m.tools, tool);
                        info.tool = Some((t, confirm_of(tool)));
                        intern(&mut m.subjects, &format!("confirm.{tool}"));
                    }
                }
                Kind::Human => {
                    for p in &node.target {
                        let pi = intern(&mut m.principals, p);
                        info.principals.push(pi);
                    }
                    let ds = node.offered_decisions();
                    info.decisions = ds.iter().filter_map(|d| DECISIONS.iter().position(|x| x == d).map(|x| x as u8)).collect();
                    info.can_timeout = node.timeout_ms().is_some();
                    info.dec_slot = m.slots;
                    m.slots += 1;
                }
                Kind::End => {
                    let reason = node.target.first().cloned().unwrap_or_else(|| name.clone());
                    info.end_reason = m.reasons.insert_full(reason).0 as u16;
                }
                Kind::Loop => {
                    info.loop_slot = m.slots;
                    m.slots += 1;
                    info.loop_max = node.max_rounds().unwrap_or(1).max(1) as u32;
                    info.loop_until = node.until().is_some();
                }
                Kind::Map => {
                    info.loop_slot = m.slots;
                    m.slots += 1;
                    info.map_bound = node.max_items().unwrap_or(2) as u32;
                }
                Kind::Join => {
                    // Two slots: the branches arrived since the join last
                    // ran, and those it absorbs (still running when it ran).
                    info.join_slot = m.slots;
                    m.slots += 2;
                    info.join_rule = flow_check::semantics::join_rule(node).clone();
                    info.join_conflicts_fail = join_may_conflict(program, workflow, node);
                    info.join_typed = node.output_type().is_some();
                }
                _ => {}
            }
            if let Some(max) = node.max_visits() {
                info.max_visits = Some((m.slots, max as u32));
                m.slots += 1;
            }
            info.on_failure = node.on_failure();
            // Appends a human approves (agent, tool and human nodes write).
            if matches!(info.kind, Kind::Agent | Kind::Tool | Kind::Human) {
                for board in node.common.writes.iter().filter_map(|b| program.decls.get(b)) {
                    if flow_check::semantics::board_requires(board) == flow_check::semantics::BoardRequires::Approval {
                        let subject = intern(&mut m.subjects, &flow_check::semantics::board_subject(&board.name, name));
                        let deciders = flow_check::semantics::board_deciders(program, workflow, board);
                        info.approvals.push((subject, deciders.iter().map(|p| intern(&mut m.principals, p)).collect()));
                    }
                }
            }
            m.nodes[i] = info;
        }
        // Which scopes can run out: those with a measure whose worst case
        // is not proved to fit (crate::budgets, the same bounds as E0801).
        let mut bounds = Vec::new();
        crate::budgets::bounds_of(workflow, program, &mut Vec::new(), &mut bounds);
        let can_run_out: IndexSet<&str> =
            bounds.iter().filter(|b| b.status != crate::budgets::Status::Fits).map(|b| b.scope.as_str()).collect();
        m.exhaustible = workflow
            .nodes
            .values()
            .map(|node| {
                node.kind().has_attempts()
                    && (can_run_out.contains("run")
                        || node
                            .target
                            .first()
                            .is_some_and(|a| node.kind() == NodeKind::Agent && can_run_out.contains(format!("agent.{a}").as_str()))
                        || can_run_out.contains(format!("node.{}", node.name).as_str())
                        || can_run_out.contains(format!("delegation.{}", node.name).as_str()))
            })
            .collect();
        // Membership: loops, joins, maps (the plan index's, as the engine
        // reads it).
        let index = &m.index;
        for (i, name) in workflow.nodes.keys().enumerate() {
            m.nodes[i].in_loop = index.loop_of(name).and_then(node_index);
            m.nodes[i].join_of = index.join_of(name).and_then(node_index);
            m.nodes[i].map_of = index.map_of(name).and_then(node_index);
        }
        // Each node's edges in the order the step rule tries them (the plan
        // index's, as the engine and trace check read them).
        for a in 0..workflow.nodes.len() {
            for edge in index.out_of(workflow, a) {
                let Some(b) = node_index(&edge.to) else { continue };
                let refs = match &edge.guard {
                    Guard::When(e) => refs_of(e, &node_index),
                    _ => Vec::new(),
                };
                m.nodes[a].edges.push((b, edge.guard.clone()));
                m.nodes[a].edge_refs.push(refs);
            }
        }
        let types = crate::types::Types::new(program);
        for (i, node) in workflow.nodes.values().enumerate() {
            let guards: Vec<&TExpr> = m.nodes[i]
                .edges
                .iter()
                .filter_map(|(_, g)| match g {
                    Guard::When(e) => Some(e),
                    _ => None,
                })
                .collect();
            if !guards.is_empty() {
                m.nodes[i].guards_can_fail = crate::graph_checks::guards_can_all_fail(&types, &guards);
            }
            if let Some(e) = node.until() {
                m.nodes[i].until_refs = refs_of(e, &node_index);
            }
        }
        // The boundaries a handoff crosses, as the plan index finds them.
        for t in &workflow.transfers {
            if let (Some(a), Some(b)) = (node_index(&t.from), node_index(&t.to)) {
                if m.index.handoff_on(workflow, &t.from, &t.to).is_some() && !m.handoffs.contains(&(a, b)) {
                    m.handoffs.push((a, b));
                }
                let refusals = match t.kind() {
                    TransferKind::Handoff => &mut m.handoff_refusals,
                    TransferKind::Delegate => &mut m.delegation_refusals,
                };
                let r = flow_check::semantics::refusal(program, workflow, t);
                let at = refusals.entry((a, b)).or_insert(Refusal::Never);
                *at = (*at).max(r);
            }
        }
        // Handlers and records.
        for (i, node) in workflow.nodes.values().enumerate() {
            let on = m.sites_for(&node.handlers, Some(i as NodeId), None);
            m.nodes[i].on = on;
            for record in &node.records {
                m.nodes[i].records.push(m.records.len() as u16);
                m.records.push((record.name.clone(), i as NodeId));
            }
        }
        m.workflow_on = m.sites_for(&workflow.handlers, None, None);
        m.hop_limits(workflow);
        for (gi, (name, gate)) in workflow.gates.iter().enumerate() {
            m.gate_names.push(name.clone());
            let subject = intern(&mut m.subjects, name);
            let on = m.sites_for(&gate.handlers, node_index(&gate.from), Some(gi as u16));
            let exits = crate::gates::possible_exits(gate, program);
            let outcomes: Vec<u8> = (0..3u8).filter(|o| exits.iter().any(|e| e == OUTCOMES[*o as usize])).collect();
            let deciders = gate.decided_by().unwrap_or_else(|| workflow.escalate_to());
            let deciders = deciders.iter().map(|p| intern(&mut m.principals, p)).collect();
            let decisions = gate.allowed_decisions();
            // The gate a crossing of `from -> to` meets is the plan index's.
            if m.index.gate_name_on(&gate.from, &gate.to) == Some(name.as_str()) {
                if let (Some(a), Some(b)) = (node_index(&gate.from), node_index(&gate.to)) {
                    m.gate_on.insert((a, b), gi as u16);
                }
            }
            let mut judges = Vec::new();
            for (i, evaluator) in gate.evaluator_items().iter().enumerate() {
                let subject = flow_check::semantics::judge_subject(name, i);
                if let Some(decl) = evaluator.and(flow_check::semantics::judge_decl(program, workflow, &subject)) {
                    let s = intern(&mut m.subjects, &subject);
                    let fail = OUTCOMES.iter().position(|o| *o == decl.fail().as_str()).unwrap_or(2) as u8;
                    judges.push((s, decl.judged_by().iter().map(|p| intern(&mut m.principals, p)).collect(), fail));
                }
            }
            let from = node_index(&gate.from).unwrap_or(0);
            let records = (m.records.len()..m.records.len() + gate.records.len()).map(|r| r as u16).collect();
            m.records.extend(gate.records.iter().map(|r| (r.name.clone(), from)));
            m.gates.push(GateInfo {
                records,
                only_judges: !judges.is_empty() && judges.len() == gate.evaluator_items().len(),
                judges,
                from: node_index(&gate.from).unwrap_or(0),
                to: node_index(&gate.to).unwrap_or(0),
                outcomes,
                on,
                deciders,
                decisions: decisions.iter().filter_map(|d| DECISIONS.iter().position(|x| x == d).map(|x| x as u8)).collect(),
                subject,
                reason: gate.reason().map(str::to_string),
                replan_scope: flow_check::rerun::replan_entry(workflow, Some(gate)).and_then(|n| node_index(&n)),
                timeout: gate.timeout_ms().is_some(),
                pass_on_valid: workflow
                    .nodes
                    .get(&gate.from)
                    .is_some_and(|from| flow_check::semantics::passes_on_valid_output(gate, from, program)),
            });
        }
        if let Some(a) = budget.as_ref().and_then(|b| b.on_exhausted) {
            m.exhaust_site = Some(m.site(a.clone(), None, None, HandlerEvent::BudgetExhausted));
        }
        m.zone_scopes_from(budget, &node_index);
        // Termination reasons known up front.
        for reason in [
            "dead_end",
            "halted",
            "partial_result",
            "fallback",
            "budget_exhausted",
            "escalation_reject",
            "failure",
            "timeout",
            "invalid_output",
            "block",
            "requires_decision",
            "reject",
            "exhausted",
            "max_hops",
            "unmodelled_reason",
        ] {
            m.reasons.insert(reason.to_string());
        }
        for gate in &m.gates {
            if let Some(r) = &gate.reason {
                m.reasons.insert(r.clone());
            }
        }
        for site in &m.sites {
            if let Some(arg) = site.action.args.first() {
                m.reasons.insert(arg.clone());
            }
        }
        // Every reason an action anywhere can end the run with (handlers are
        // sites; loops, budgets and zones hold actions in properties).
        let mut every: Vec<Action> = flow_check::ceilings::value_actions(program, workflow).into_iter().cloned().collect();
        every.extend(m.sites.iter().map(|s| s.action.clone()));
        for a in every.iter().filter(|a| matches!(a.name, ActionKind::Terminate | ActionKind::Fallback)) {
            let reason = a.args.first().cloned().unwrap_or_else(|| a.name.to_string());
            if a.name == flow_check::ir::ActionKind::Fallback {
                m.partial_reasons.insert(reason.clone());
            }
            m.reasons.insert(reason);
        }
        for i in 0..m.nodes.len() {
            let r = format!("{}_failed", m.nodes[i].name);
            m.reasons.insert(r);
        }
        for s in 0..m.sites.len() {
            let reason = m.site_reason(s);
            m.reasons.insert(reason);
        }
        m.output_bits();
        m.live = live::Liveness::new(&m);
        m
    }

    /// The nodes whose output the model reads, each given a bit in the
    /// bitset of nodes that have an output and in the bitset of those whose
    /// latest output is a skipped or degraded one (not validated).
    fn output_bits(&mut self) {
        self.out_bit = vec![u32::MAX; self.nodes.len()];
        let mut count = 0;
        for n in self.read_outputs() {
            if self.out_bit[n as usize] == u32::MAX {
                self.out_bit[n as usize] = count;
                count += 1;
            }
        }
        let words = (count as usize).div_ceil(32);
        self.done_base = self.slots;
        self.settled_base = self.slots + words;
        self.slots += 2 * words;
    }

    /// Every node whose output bits some step reads, with repeats.
    fn read_outputs(&self) -> Vec<NodeId> {
        let mut read: Vec<NodeId> = Vec::new();
        for info in &self.nodes {
            read.extend(info.edge_refs.iter().flatten());
            read.extend(&info.until_refs);
        }
        read.extend(self.gates.iter().filter(|g| g.pass_on_valid).map(|g| g.from));
        for refusals in [&self.handoff_refusals, &self.delegation_refusals] {
            read.extend(refusals.iter().filter(|(_, r)| **r == Refusal::Unvalidated).map(|((from, _), _)| *from));
        }
        read
    }

    /// The budget scopes with zones, as the engine creates them: the run's
    /// budget, each agent's, each node's and each delegation contract's.
    /// The pairs of nodes with a hop limit (the plan index's, as the
    /// engine counts them): a counter each.
    fn hop_limits(&mut self, workflow: &Workflow) {
        for a in 0..self.nodes.len() {
            for k in 0..self.nodes[a].edges.len() {
                let b = self.nodes[a].edges[k].0;
                let names = (workflow.nodes.get_index(a), workflow.nodes.get_index(b as usize));
                let (Some((from, _)), Some((to, _))) = names else { continue };
                let Some(limit) = self.index.hop_limit(from, to) else { continue };
                let a = a as NodeId;
                if !self.hop_slots.contains_key(&(a, b)) {
                    let slot = (self.slots, limit.min(u32::MAX as u64) as u32);
                    self.hop_slots.insert((a, b), slot);
                    self.hop_slots.insert((b, a), slot);
                    self.slots += 1;
                }
            }
        }
    }

    fn zone_scopes_from(&mut self, run: Option<Budget<'p>>, node_index: &impl Fn(&str) -> Option<NodeId>) {
        let program = self.program;
        let workflow = self.workflow;
        let mut scopes: Vec<(String, Covers, Budget<'p>)> = Vec::new();
        if let Some(b) = run {
            scopes.push(("run".into(), Covers::All, b));
        }
        for (name, decl) in &program.decls {
            if decl.kind == flow_check::spec::Kind::Agent {
                if let Some(b) = decl.budget(program) {
                    let a = intern(&mut self.agents, name);
                    scopes.push((format!("agent.{name}"), Covers::Agent(a), b));
                }
            }
        }
        for (i, node) in workflow.nodes.values().enumerate() {
            if let Some(b) = node.budget(program) {
                scopes.push((format!("node.{}", node.name), Covers::Node(i as NodeId), b));
            }
        }
        for t in workflow.transfers.iter().filter(|t| t.kind() == TransferKind::Delegate) {
            if let (Some(b), Some(to)) = (t.contract_decl(program).and_then(|c| c.budget(program)), node_index(&t.to)) {
                scopes.push((format!("delegation.{}", t.to), Covers::Node(to), b));
            }
        }
        for (name, covers, budget) in scopes {
            let mut zones: Vec<(f64, u8, Vec<Action>)> = Vec::new();
            for zone in &budget.zones {
                let z = ZONES.iter().position(|x| *x == zone.zone).unwrap_or(0) as u8;
                zones.push((zone.below, z, zone.actions.iter().map(|a| (*a).clone()).collect()));
            }
            if zones.is_empty() || self.zone_scopes.iter().any(|s| s.name == name) {
                continue;
            }
            // As the engine orders them: the most severe (lowest threshold) last.
            zones.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap_or(std::cmp::Ordering::Equal));
            let slot = self.slots;
            self.slots += 1;
            let zones = zones.into_iter().map(|(_, z, a)| (z, a)).collect();
            let mut measures = 0;
            for (key, bit) in [
                ("steps", METERS_STEPS),
                ("tokens", METERS_TOKENS),
                ("tool_calls", METERS_CALLS),
                ("cost", METERS_COST),
                ("duration", METERS_TIME),
            ] {
                if budget.limit(key).is_some() {
                    measures |= bit;
                }
            }
            if name == "run" && workflow.deadline_ms().is_some() {
                measures |= METERS_TIME;
            }
            self.zone_scopes.push(ZoneScope { name, covers, slot, zones, measures });
        }
    }

    /// Whether zone scope `s` meters node `n`.
    fn covers(&self, s: &ZoneScope, n: NodeId) -> bool {
        match s.covers {
            Covers::All => true,
            Covers::Agent(a) => self.nodes[n as usize].agent == Some(a),
            Covers::Node(m) => m == n,
        }
    }

    /// Zone changes the engine may record while node `n` waits on the data
    /// plane (at an attempt's start, after a turn, after a tool call): any
    /// scope metering `n` may enter any more severe zone, which runs its
    /// actions in order. A terminating action ends the run under its
    /// reason; the others (context, model, reasoning, warnings) leave the
    /// control flow as it is. The thread stays at `stay` otherwise.
    fn zone_moves(&self, st: &St, t: usize, n: NodeId, stay: Phase, metered: u8, out: &mut Vec<(Option<Label>, St)>) {
        for (si, scope) in self.zone_scopes.iter().enumerate() {
            if !self.covers(scope, n) || scope.measures & (metered | METERS_TIME) == 0 {
                continue;
            }
            let current = st.vars[scope.slot] as usize;
            for (zi, (z, actions)) in scope.zones.iter().enumerate().skip(current) {
                let mut s = st.clone();
                s.vars[scope.slot] = zi as u32 + 1;
                let end = actions.iter().find_map(|a| self.terminating_reason(a, "zone"));
                s.threads[t] = match end {
                    Some(r) => (n, Phase::Terminate(r)),
                    None => (n, stay),
                };
                s.threads.sort_unstable();
                self.push(out, Some(Label::Zone(si as u16, *z)), s);
            }
        }
    }

    /// The reason a terminating action ends the run with, outside a gate.
    fn terminating_reason(&self, action: &Action, event: &str) -> Option<u16> {
        let (reason, _) = flow_check::semantics::ending(action.name, action.arg(), None, event)?;
        Some(self.reason_or_add(&reason))
    }

    fn site(&mut self, action: Action, node: Option<NodeId>, gate: Option<u16>, event: HandlerEvent) -> u16 {
        if action.name == flow_check::ir::ActionKind::Escalate {
            let p = action.args.first().cloned().unwrap_or_default();
            intern(&mut self.principals, &p);
            intern(&mut self.subjects, &format!("escalation.{p}"));
        }
        self.sites.push(Site { action, node, gate, event });
        (self.sites.len() - 1) as u16
    }

    fn sites_for(&mut self, handlers: &[Handler], node: Option<NodeId>, gate: Option<u16>) -> Vec<(String, u16)> {
        let mut out = Vec::new();
        for h in handlers {
            for e in &h.events {
                let s = self.site(h.action.clone(), node, gate, *e);
                out.push((e.as_str().to_string(), s));
            }
        }
        out
    }

    /// The termination reason a site's action would give (for
    /// terminating actions; others give an unused name).
    fn site_reason(&self, s: usize) -> String {
        let site = &self.sites[s];
        let gate_reason = site.gate.and_then(|g| self.gates.get(g as usize)).and_then(|g| g.reason.as_deref());
        match flow_check::semantics::ending(site.action.name, site.action.arg(), gate_reason, site.event.as_str()) {
            Some((reason, _)) => reason,
            None => "dead_end".into(),
        }
    }

    fn reason(&self, name: &str) -> u16 {
        self.reason_or_add(name)
    }

    fn has_output(&self, st: &St, n: NodeId) -> bool {
        self.output_bit(st, self.done_base, n)
    }

    /// Whether `n`'s latest output came from a skip or a degrade.
    fn settled(&self, st: &St, n: NodeId) -> bool {
        self.output_bit(st, self.settled_base, n)
    }

    fn output_bit(&self, st: &St, base: usize, n: NodeId) -> bool {
        let bit = self.out_bit[n as usize];
        debug_assert!(bit != u32::MAX, "the output of `{}` is read but has no bit", self.nodes[n as usize].name);
        bit != u32::MAX && st.vars.get(base + bit as usize / 32).is_some_and(|w| w & (1 << (bit % 32)) != 0)
    }

    /// Why this workflow is too large for the model's compact indices
    /// (nodes, gates, tools, agents and the rest are numbered in 16 bits),
    /// if it is. A model past that size would confuse two nodes, so its
    /// verdicts are not given: the policies are reported unknown instead.
    pub fn too_large(&self) -> Option<String> {
        // u16::MAX itself is a sentinel (`Terminate(u16::MAX)`).
        let limit = u16::MAX as usize;
        let counts = [
            (self.workflow.nodes.len(), "nodes"),
            (self.gates.len(), "gates"),
            (self.tools.len(), "tools"),
            (self.agents.len(), "agents"),
            (self.principals.len(), "principals"),
            (self.subjects.len(), "decision subjects"),
            (self.reasons.len(), "termination reasons"),
            (self.sites.len(), "handler sites"),
        ];
        let wide = self.nodes.iter().find(|n| n.kind == Kind::Join && n.targets.len() > 32);
        if let Some(join) = wide {
            return Some(format!("join `{}` lists {} branches, and the model checker handles at most 32", join.name, join.targets.len()));
        }
        counts
            .iter()
            .find(|(n, _)| *n >= limit)
            .map(|(n, what)| format!("the workflow has {n} {what}, and the model checker handles at most {}", limit - 1))
    }

    pub fn node_name(&self, n: NodeId) -> &str {
        &self.nodes[n as usize].name
    }

    pub fn node_loc(&self, n: NodeId) -> flow_check::ir::Loc {
        self.workflow.nodes.get_index(n as usize).map(|(_, node)| node.loc).unwrap_or_default()
    }

    pub fn gate_loc(&self, g: u16) -> flow_check::ir::Loc {
        self.workflow.gates.get_index(g as usize).map(|(_, gate)| gate.loc).unwrap_or_default()
    }

    pub fn gate_nodes(&self, g: u16) -> (NodeId, NodeId) {
        (self.gates[g as usize].from, self.gates[g as usize].to)
    }

    pub fn node_kind(&self, n: NodeId) -> NodeKind {
        self.workflow.nodes.get_index(n as usize).map(|(_, node)| node.kind()).unwrap_or(NodeKind::Invalid)
    }

    pub fn node_agent(&self, n: NodeId) -> Option<&str> {
        self.nodes[n as usize].agent.map(|a| self.agents[a as usize].as_str())
    }

    /// The run's status when it terminates with reason `r`, as the engine
    /// gives it: an end node's `status`, partial after
    /// `fallback` or `return_partial`, escalated after a rejected
    /// escalation, failure otherwise.
    pub fn termination_status(&self, r: u16) -> TerminationStatus {
        let reason = self.reasons.get_index(r as usize).map(String::as_str).unwrap_or("");
        for (i, info) in self.nodes.iter().enumerate() {
            if info.kind == Kind::End && info.end_reason == r {
                let node = self.workflow.nodes.get_index(i).map(|(_, n)| n);
                if let Some(status) = node.and_then(|n| n.status()) {
                    return status;
                }
            }
        }
        if reason == "partial_result" || self.partial_reasons.contains(reason) {
            return TerminationStatus::Partial;
        }
        if reason.starts_with("escalation_") {
            return TerminationStatus::Escalated;
        }
        TerminationStatus::Failure
    }

    /// The action a decision on `subject` applies, as the engine records
    /// it in `decision_applied` (the shared rule of `flow_check::semantics`).
    /// A principal's name: [`CONTROL`] is `control`.
    pub fn principal_name(&self, p: u16) -> &str {
        match p {
            CONTROL => "control",
            _ => self.principals.get_index(p as usize).map(String::as_str).unwrap_or(""),
        }
    }

    pub fn applied_action(&self, subject: &str, decision: Decision) -> flow_trace::Applied {
        use flow_trace::Applied;
        let approve = decision == Decision::Approve;
        if let Some(gate) = self.workflow.gates.get(subject) {
            return Applied::Action(flow_check::semantics::gate_decision_action(gate, decision));
        }
        if let Some(node) = self.workflow.nodes.get(subject).filter(|n| n.kind() == NodeKind::Human) {
            return flow_check::semantics::human_decision_applied(node, decision);
        }
        if subject.starts_with("confirm.") {
            return if approve { Applied::Call } else { Applied::Refuse };
        }
        if subject.starts_with("blackboard.") {
            return flow_check::semantics::board_decision_applied(decision);
        }
        if let Some(judge) = flow_check::semantics::judge_decl(self.program, self.workflow, subject) {
            return Applied::Judged(flow_check::semantics::judge_verdict(judge, decision));
        }
        Applied::Action(if approve {
            Action::bare(flow_check::ir::ActionKind::Continue)
        } else {
            Action { name: flow_check::ir::ActionKind::Terminate, args: vec![format!("escalation_{decision}")] }
        })
    }

    /// A handler site's action as the engine records it in
    /// `action_taken`: (event, scope, action).
    pub fn site_action(&self, site: u16) -> (flow_trace::ActionEvent, flow_trace::HandlerScope, &Action) {
        use flow_trace::HandlerScope;
        let s = &self.sites[site as usize];
        let scope = match (s.gate, s.node) {
            (Some(g), _) => HandlerScope::Gate(self.gate_names[g as usize].clone()),
            (None, Some(n)) => HandlerScope::Node(self.nodes[n as usize].name.clone()),
            (None, None) => HandlerScope::Workflow,
        };
        (s.event.into(), scope, &s.action)
    }

    /// The via text of an edge label.
    /// `item` numbers a map's item (1-based); `guard` is a `when` edge's text.
    pub fn via(&self, via: u8, guard: impl FnOnce() -> String, item: u32) -> Via {
        if via >= VIA_GATE {
            return Via::Gate(self.gate_names.get((via - VIA_GATE) as usize).cloned().unwrap_or_default());
        }
        match via {
            1 => Via::When(guard()),
            2 => Via::Else,
            3 => Via::Goto,
            4 => Via::Activate,
            5 => Via::Revise,
            6 => Via::Replan,
            7 => Via::Fanout,
            8 => Via::LoopRound,
            9 => Via::Join,
            10 => Via::MapItem(item),
            _ => Via::Always,
        }
    }

    /// The initial state.
    pub fn initial(&self) -> St {
        let threads = match self.start {
            Some(s) => vec![(s, Phase::Start)],
            None => Vec::new(),
        };
        St { threads, vars: vec![0; self.slots], done: false }
    }

    /// The transitions a search follows from `st`: none from a final state
    /// (the run has ended), else every one of [`Model::successors`]. An
    /// empty `out` means the run ends at `st`.
    pub fn steps_from(&self, st: &St, out: &mut Vec<(Option<Label>, St)>) {
        if st.is_final() {
            out.clear();
        } else {
            self.successors(st, out);
        }
    }

    /// Every transition from `st`: the label it emits (if any) and the
    /// next state.
    pub fn successors(&self, st: &St, out: &mut Vec<(Option<Label>, St)>) {
        out.clear();
        if st.done {
            return;
        }
        // The control plane handles one data-plane answer at a time and
        // runs its consequences to completion before the next: a branch in
        // a control step (entering a node, taking an edge, a join, a
        // termination…) moves alone. Only the order in which waiting
        // branches get their answers interleaves. (With `reduce` off every
        // step interleaves: a coarser model, for tests.)
        if self.reduce && st.threads.len() > 1 {
            // Among control steps: a branch being started goes on until it
            // waits before the next branch's fan-out edge, and a parallel
            // node completes after all its branches started (engine order).
            let tier = |p: Phase| match p {
                Phase::Jump(_, 7) => 1,
                Phase::FanDone => 2,
                _ => 0,
            };
            let pick = (0..3).find_map(|level| {
                (0..st.threads.len()).find(|&t| {
                    let p = st.threads[t].1;
                    is_control(p) && p != Phase::Terminate(u16::MAX) && tier(p) == level
                })
            });
            if let Some(t) = pick {
                self.thread_moves(st, t, out);
                self.mark_outputs(out);
                return;
            }
        }
        for t in 0..st.threads.len() {
            // Threads at the same place move alike: one is enough.
            if t > 0 && st.threads[t] == st.threads[t - 1] {
                continue;
            }
            self.thread_moves(st, t, out);
        }
        self.mark_outputs(out);
    }

    /// Records which nodes now have an output, then clears what no thread
    /// can read any more.
    fn mark_outputs(&self, out: &mut [(Option<Label>, St)]) {
        for (label, s) in out.iter_mut() {
            if let Some(Label::Completed(n) | Label::Settled(n, _)) = *label {
                let bit = self.out_bit[n as usize];
                if bit != u32::MAX {
                    let (word, mask) = (bit as usize / 32, 1 << (bit % 32));
                    s.vars[self.done_base + word] |= mask;
                    if matches!(label, Some(Label::Settled(..))) {
                        s.vars[self.settled_base + word] |= mask;
                    } else {
                        s.vars[self.settled_base + word] &= !mask;
                    }
                }
            }
            if self.dead_vars {
                self.live.clear_dead(s);
            }
        }
    }

    fn set(&self, st: &St, t: usize, next: Option<(NodeId, Phase)>) -> St {
        let mut s = st.clone();
        match next {
            Some(p) => s.threads[t] = p,
            None => {
                s.threads.remove(t);
            }
        }
        s.threads.sort_unstable();
        s
    }

    fn push(&self, out: &mut Vec<(Option<Label>, St)>, label: Option<Label>, s: St) {
        out.push((label, s));
    }

    fn thread_moves(&self, st: &St, t: usize, out: &mut Vec<(Option<Label>, St)>) {
        let (n, phase) = st.threads[t];
        let info = &self.nodes[n as usize];
        match phase {
            Phase::Start => {
                let mut s = st.clone();
                // A node's own budget (and a delegation's) starts afresh with each visit.
                for scope in &self.zone_scopes {
                    if scope.covers == Covers::Node(n) {
                        s.vars[scope.slot] = 0;
                    }
                }
                if let Some((slot, max)) = info.max_visits {
                    s.vars[slot] = (s.vars[slot] + 1).min(max + 1);
                    if s.vars[slot] > max {
                        // The visit starts and fails at once (max_visits).
                        s.threads[t] = (n, Phase::FailNow);
                        s.threads.sort_unstable();
                        self.push(out, Some(Label::Started(n)), s);
                        return;
                    }
                }
                let next = match info.kind {
                    Kind::Agent | Kind::Tool => Phase::Attempt,
                    Kind::Human => Phase::Human,
                    Kind::End => Phase::Complete,
                    Kind::Parallel => Phase::Fanout,
                    Kind::Loop => {
                        s.vars[info.loop_slot] = 1;
                        match info.targets.first() {
                            Some(&first) => Phase::Jump(first, 8),
                            None => Phase::Complete,
                        }
                    }
                    Kind::Map => {
                        s.vars[info.loop_slot] = 0;
                        Phase::MapNext
                    }
                    Kind::Join => Phase::Complete,
                    // Completes, or fails (an expression that cannot be
                    // evaluated, a value not of the output type).
                    Kind::Compute | Kind::Other => Phase::Finish,
                };
                if info.kind == Kind::Map {
                    // A map whose list cannot be read, or is longer than its
                    // `max_items`, fails as it starts.
                    let mut failing = s.clone();
                    failing.threads[t] = (n, Phase::FailNow);
                    failing.threads.sort_unstable();
                    self.push(out, Some(Label::Started(n)), failing);
                }
                // A join fails as it merges when its branches disagree under
                // `conflicts: fail`, or the merge is not of its `output` type.
                for (may, phase) in [(info.join_conflicts_fail, Phase::FailNow), (info.join_typed, Phase::FailInvalid)] {
                    if info.kind == Kind::Join && may {
                        let mut failing = s.clone();
                        failing.threads[t] = (n, phase);
                        failing.threads.sort_unstable();
                        self.push(out, Some(Label::Started(n)), failing);
                    }
                }
                s.threads[t] = (n, next);
                s.threads.sort_unstable();
                self.push(out, Some(Label::Started(n)), s);
            }
            Phase::Attempt => {
                // The attempt's start reserves its step, in the control
                // step that started the node: a zone may change, or the
                // budget be found used up, before anything else moves.
                let go = match info.kind {
                    Kind::Tool => match info.tool {
                        Some((_, true)) if !self.escalate_to.is_empty() => Phase::NodeConfirm,
                        _ => Phase::NodeCall,
                    },
                    _ => Phase::Tools(0),
                };
                self.push(out, None, self.set(st, t, Some((n, go))));
                if info.input_limited {
                    // The first turn is refused before it is sent.
                    let next = self.fail(n, HandlerEvent::Failure);
                    self.push(out, Some(Label::FailedUnsent(n)), self.set(st, t, next));
                }
                self.zone_moves(st, t, n, phase, METERS_STEPS, out);
                if self.exhaustible[n as usize] {
                    let next = self.exhaust(n);
                    self.push(out, Some(Label::Exhausted(n)), self.set(st, t, next));
                }
            }
            Phase::Tools(i) => {
                let Some(tool) = info.tools.get(i as usize) else {
                    self.push(out, None, self.set(st, t, Some((n, Phase::Finish))));
                    return;
                };
                // Budget zones can change before each call (after a turn or
                // a call).
                self.zone_moves(st, t, n, phase, METERS_TOKENS | METERS_COST | METERS_CALLS, out);
                // Skip this tool.
                self.push(out, None, self.set(st, t, Some((n, Phase::Tools(i + 1)))));
                if tool.probe {
                    self.push(out, Some(Label::Refused(tool.tool, info.agent, n)), self.set(st, t, Some((n, Phase::Tools(i + 1)))));
                } else if tool.confirm && !self.escalate_to.is_empty() {
                    self.push(out, None, self.set(st, t, Some((n, Phase::ToolConfirm(i)))));
                } else {
                    self.push(out, Some(Label::Called(tool.tool, info.agent, n)), self.set(st, t, Some((n, Phase::Tools(i + 1)))));
                }
            }
            Phase::ToolConfirm(i) => {
                let tool = &info.tools[i as usize];
                let subject = self.confirm_subject(tool.tool);
                for &p in &self.escalate_to {
                    let s = self.set(st, t, Some((n, Phase::ToolCall(i))));
                    self.push(out, Some(Label::Decided(subject, 0, p)), s);
                    // Refused: the agent is told and goes on without the call.
                    self.push(out, Some(Label::Decided(subject, 3, p)), self.set(st, t, Some((n, Phase::Tools(i + 1)))));
                }
            }
            Phase::ToolCall(i) => {
                let tool = info.tools[i as usize].tool;
                self.push(out, Some(Label::Called(tool, info.agent, n)), self.set(st, t, Some((n, Phase::Tools(i + 1)))));
            }
            Phase::NodeConfirm => {
                let (tool, _) = info.tool.unwrap_or((0, false));
                let subject = self.confirm_subject(tool);
                for &p in &self.escalate_to {
                    let s = self.set(st, t, Some((n, Phase::NodeCall)));
                    self.push(out, Some(Label::Decided(subject, 0, p)), s);
                    // Refused: the attempt fails, and so does the visit.
                    self.push(out, Some(Label::Decided(subject, 3, p)), self.set(st, t, Some((n, Phase::FailNow))));
                }
            }
            Phase::FailNow => {
                let next = self.fail(n, HandlerEvent::Failure);
                self.push(out, Some(Label::Failed(n)), self.set(st, t, next));
            }
            Phase::TimedOut => {
                let next = self.fail(n, HandlerEvent::Timeout);
                self.push(out, Some(Label::Failed(n)), self.set(st, t, next));
            }
            Phase::FailInvalid => {
                let next = self.fail(n, HandlerEvent::InvalidOutput);
                self.push(out, Some(Label::FailedInvalid(n)), self.set(st, t, next));
            }
            Phase::NodeCall => {
                let (tool, _) = info.tool.unwrap_or((0, false));
                self.push(out, Some(Label::Called(tool, None, n)), self.set(st, t, Some((n, Phase::Finish))));
                // The call's reservation may find the budget used up.
                if self.exhaustible[n as usize] {
                    let next = self.exhaust(n);
                    self.push(out, Some(Label::Exhausted(n)), self.set(st, t, next));
                }
            }
            Phase::Finish | Phase::Retried => {
                if info.kind != Kind::Other {
                    self.push(out, Some(Label::Completed(n)), self.set(st, t, Some((n, Self::completed(info, false)))));
                }
                // Failure (after the attempts).
                let next = if phase == Phase::Retried {
                    Some((n, Phase::Terminate(self.reason(&format!("{}_failed", info.name)))))
                } else {
                    self.fail(n, HandlerEvent::Failure)
                };
                self.push(out, Some(Label::Failed(n)), self.set(st, t, next));
                if info.kind == Kind::Compute {
                    let next = self.fail(n, HandlerEvent::InvalidOutput);
                    self.push(out, Some(Label::FailedInvalid(n)), self.set(st, t, next));
                }
                if phase == Phase::Finish && self.exhaustible[n as usize] {
                    let next = self.exhaust(n);
                    self.push(out, Some(Label::Exhausted(n)), self.set(st, t, next));
                }
                if matches!(info.kind, Kind::Agent | Kind::Tool) {
                    // A turn's or call's settlement (and a retry's start) may change a zone.
                    let metered = match (phase, info.kind) {
                        (Phase::Retried, _) => METERS_STEPS | METERS_TOKENS | METERS_COST | METERS_CALLS,
                        (_, Kind::Tool) => METERS_CALLS,
                        _ => METERS_TOKENS | METERS_COST | METERS_CALLS,
                    };
                    self.zone_moves(st, t, n, phase, metered, out);
                }
            }
            Phase::Human => {
                for &d in &info.decisions {
                    for &p in &info.principals {
                        let mut s = st.clone();
                        let next = match info.on.iter().find(|(e, _)| e == DECISIONS[d as usize].as_str()) {
                            Some(&(_, site)) => self.act(site),
                            None => Some((n, Phase::Complete)),
                        };
                        s.threads[t] = next_or_dead(next, n);
                        s.threads.sort_unstable();
                        // Remember the decision for guards on `n.decision`.
                        s.vars[info.dec_slot] = d as u32 + 1;
                        self.push(out, Some(Label::Decided(info.subject, d, p)), s);
                    }
                }
                // No decision within the node's `timeout`: `control` records
                // `timeout` and the visit fails with it.
                if info.can_timeout {
                    self.push(out, Some(Label::Decided(info.subject, TIMEOUT, CONTROL)), self.set(st, t, Some((n, Phase::TimedOut))));
                }
            }
            Phase::Complete => {
                let next = match info.kind {
                    Kind::End => Some((n, Phase::Terminate(info.end_reason))),
                    _ => Some((n, Self::completed(info, false))),
                };
                let s = self.set(st, t, next);
                self.push(out, Some(Label::Completed(n)), s);
            }
            Phase::Taken(site) => {
                let next = self.act_now(site, n);
                self.push(out, Some(Label::Acted(site)), self.set(st, t, Some(next_or_dead(next, n))));
            }
            Phase::Settle(status) => {
                self.push(out, Some(Label::Settled(n, status)), self.set(st, t, Some((n, Self::completed(info, true)))));
            }
            Phase::Record(i, settled) => {
                let next = if (i as usize) + 1 < info.records.len() {
                    Phase::Record(i + 1, settled)
                } else if settled {
                    Phase::Leave
                } else {
                    Self::after_completion(info)
                };
                self.push(out, Some(Label::Recorded(info.records[i as usize])), self.set(st, t, Some((n, next))));
            }
            Phase::GateRecord(g, o, i) => {
                let records = &self.gates[g as usize].records;
                let next =
                    if (i as usize) + 1 < records.len() { Some((n, Phase::GateRecord(g, o, i + 1))) } else { self.gate_next(g, o, n) };
                self.push(out, Some(Label::Recorded(records[i as usize])), self.set(st, t, next));
            }
            Phase::Approve(i) => {
                let (subject, deciders) = &info.approvals[i as usize];
                let next = if (i as usize) + 1 < info.approvals.len() { Phase::Approve(i + 1) } else { Phase::Leave };
                for &p in deciders {
                    // Approved (appended) or rejected (left out): it goes on.
                    self.push(out, Some(Label::Decided(*subject, 0, p)), self.set(st, t, Some((n, next))));
                    self.push(out, Some(Label::Decided(*subject, 3, p)), self.set(st, t, Some((n, next))));
                }
            }
            Phase::Leave => self.leave(st, t, n, out),
            Phase::Judge(g, k, floor) => {
                let judges = &self.gates[g as usize].judges;
                let (subject, deciders, fail) = &judges[k as usize];
                let next =
                    |floor: u8| if (k as usize) + 1 < judges.len() { Phase::Judge(g, k + 1, floor) } else { Phase::Judged(g, floor) };
                for &p in deciders {
                    // Approve passes; reject gives the evaluator's `fail` outcome.
                    self.push(out, Some(Label::Decided(*subject, 0, p)), self.set(st, t, Some((n, next(floor)))));
                    self.push(out, Some(Label::Decided(*subject, 3, p)), self.set(st, t, Some((n, next(floor.max(*fail))))));
                }
            }
            Phase::Gate(_) | Phase::Judged(..) => {
                let (g, floor, exact) = match phase {
                    Phase::Judged(g, floor) => (g, floor, self.gates[g as usize].only_judges),
                    Phase::Gate(g) => (g, 0, false),
                    _ => return,
                };
                let gate = &self.gates[g as usize];
                // Over a validated output such a gate can only pass.
                let pass_only = gate.pass_on_valid && !self.settled(st, gate.from) && self.has_output(st, gate.from);
                // The outcome is the most severe verdict of its evaluators.
                let allowed = |o: u8| if exact { o == floor } else { o >= floor };
                for &o in gate.outcomes.iter().filter(|&&o| (!pass_only || o == 0) && allowed(o)) {
                    // Its records come between its outcome and its action.
                    let next = if gate.records.is_empty() { self.gate_next(g, o, n) } else { Some((n, Phase::GateRecord(g, o, 0))) };
                    self.push(out, Some(Label::Outcome(g, o)), self.set(st, t, next));
                }
            }
            Phase::Decide(g) => {
                let gate = &self.gates[g as usize];
                for &d in &gate.decisions {
                    for &p in &gate.deciders {
                        let mut s = st.clone();
                        let next = match gate.on.iter().find(|(e, _)| e == DECISIONS[d as usize].as_str()) {
                            Some(&(_, site)) => self.act(site),
                            None => match d {
                                0 => Some((gate.from, Phase::Enter(gate.to))),
                                1 => Some((gate.from, Phase::Jump(gate.from, 5))),
                                2 => self.start.map(|st| (gate.from, Phase::Jump(gate.replan_scope.unwrap_or(st), 6))),
                                _ => Some((n, Phase::Terminate(self.reason(&gate.reason.clone().unwrap_or_else(|| "reject".into()))))),
                            },
                        };
                        s.threads[t] = next_or_dead(next, n);
                        s.threads.sort_unstable();
                        self.push(out, Some(Label::Decided(gate.subject, d, p)), s);
                    }
                }
                // No decision within the gate's `timeout`: `control` records
                // `timeout`, and its handler (else a termination) follows.
                if gate.timeout {
                    let next = match gate.on.iter().find(|(e, _)| e == "timeout") {
                        Some(&(_, site)) => self.act(site),
                        None => Some((n, Phase::Terminate(self.reason(&gate.reason.clone().unwrap_or_else(|| "timeout".into()))))),
                    };
                    self.push(out, Some(Label::Decided(gate.subject, TIMEOUT, CONTROL)), self.set(st, t, next));
                }
            }
            Phase::Enter(to) => {
                let via = self.enter_via(n, to);
                self.cross(st, t, n, to, via, out);
            }
            Phase::Handoff(to) => {
                self.push(out, Some(Label::HandedOff(n, to)), self.set(st, t, Some(self.entry(n, to))));
                // The handoff is refused, its message dead-lettered: the
                // workflow's `dead_letter` handler acts for the sender, else
                // the sender fails.
                if self.may_refuse(&self.handoff_refusals, st, n, to) {
                    let next = match self.workflow_on.iter().find(|(e, _)| e == HandlerEvent::DeadLetter.as_str()) {
                        Some(&(_, site)) => (n, Phase::Taken(site)),
                        None => (n, Phase::FailNow),
                    };
                    self.push(out, Some(Label::DeadLettered(n, to)), self.set(st, t, Some(next)));
                }
            }
            Phase::Jump(to, via) => {
                self.push(out, Some(Label::Edge(n, to, via)), self.set(st, t, Some((to, Phase::Start))));
            }
            Phase::Escalate(site) => {
                let principal = self.sites[site as usize].action.args.first().map(|p| self.principals.get_index_of(p.as_str()));
                let p = principal.flatten().unwrap_or(0) as u16;
                let subject = self.escalation_subject(site);
                let ctx = &self.sites[site as usize];
                let cont = self.continue_in(self.context(site, n), ctx.gate, ctx.event.as_str(), false);
                let s = self.set(st, t, cont);
                self.push(out, Some(Label::Decided(subject, 0, p)), s);
                let r = self.set(st, t, Some((n, Phase::Terminate(self.reason("escalation_reject")))));
                self.push(out, Some(Label::Decided(subject, 3, p)), r);
            }
            Phase::RoundEnd(lp) => {
                let l = &self.nodes[lp as usize];
                let round = st.vars[l.loop_slot];
                if l.until_refs.iter().any(|&r| !self.has_output(st, r)) {
                    // `until` reads an output that does not exist: the loop fails.
                    let next = self.fail(lp, HandlerEvent::Failure);
                    self.push(out, Some(Label::Failed(lp)), self.set(st, t, next));
                    return;
                }
                if l.loop_until {
                    // Converged.
                    self.push(out, None, self.set(st, t, Some((lp, Phase::Complete))));
                }
                if round >= l.loop_max {
                    let next = match l.on.iter().find(|(e, _)| e == "exhausted") {
                        Some(&(_, site)) if self.sites[site as usize].action.name != flow_check::ir::ActionKind::Continue => self.act(site),
                        _ => match self.workflow.nodes.get_index(lp as usize).and_then(|(_, node)| node.on_exhausted()) {
                            Some(a) if a.name != flow_check::ir::ActionKind::Continue => self.act_direct(a, Some(lp), None, "exhausted"),
                            _ => Some((lp, Phase::Complete)),
                        },
                    };
                    self.push(out, None, self.set(st, t, next));
                } else if let Some(&first) = l.targets.first() {
                    let mut s = self.set(st, t, Some((lp, Phase::Jump(first, 8))));
                    s.vars[l.loop_slot] = round + 1;
                    self.push(out, None, s);
                }
            }
            Phase::MapNext => {
                let count = st.vars[info.loop_slot];
                if count < info.map_bound {
                    if let Some(&item) = info.targets.first() {
                        let mut s = self.set(st, t, Some((n, Phase::Jump(item, 10))));
                        s.vars[info.loop_slot] = count + 1;
                        self.push(out, None, s);
                    }
                }
                self.push(out, None, self.set(st, t, Some((n, Phase::Complete))));
            }
            Phase::Fanout => {
                // Each branch is entered by a fan-out edge and started, in
                // order; then the parallel node completes.
                let mut s = st.clone();
                s.threads[t] = (n, Phase::FanDone);
                for &b in &info.targets {
                    s.threads.push((n, Phase::Jump(b, 7)));
                }
                s.threads.sort_unstable();
                self.push(out, None, s);
            }
            Phase::FanDone => {
                self.push(out, Some(Label::Completed(n)), self.set(st, t, None));
            }
            Phase::JoinArrive(j) => {
                // The join runs (starts, then completes) once its rule is met;
                // a branch finishing after it ran is absorbed.
                let ji = &self.nodes[j as usize];
                let bit = 1u32 << ji.targets.iter().position(|&b| b == n).unwrap_or(0);
                let (arrived_slot, late_slot) = (ji.join_slot, ji.join_slot + 1);
                let mut s = st.clone();
                s.threads.remove(t);
                if s.vars[late_slot] & bit != 0 {
                    s.vars[late_slot] &= !bit;
                } else {
                    s.vars[arrived_slot] |= bit;
                    let arrived = s.vars[arrived_slot].count_ones() as usize;
                    let total = ji.targets.len();
                    if flow_check::semantics::join_ready(&ji.join_rule, arrived, total) {
                        let all = if total >= 32 { u32::MAX } else { (1u32 << total) - 1 };
                        s.vars[late_slot] = all & !s.vars[arrived_slot];
                        s.vars[arrived_slot] = 0;
                        s.threads.push((j, Phase::Start));
                    }
                }
                s.threads.sort_unstable();
                self.push(out, None, s);
            }
            Phase::Terminate(r) => {
                if r == u16::MAX {
                    return;
                }
                let mut s = st.clone();
                s.threads.clear();
                s.done = true;
                self.push(out, Some(Label::Terminated(r)), s);
            }
        }
    }

    /// Where a completed node goes: its approvals, else its edge.
    /// What follows gate `g`'s outcome `o` (at node `n`): its handler's
    /// action, else the outcome's default.
    fn gate_next(&self, g: u16, o: u8, n: NodeId) -> Option<(NodeId, Phase)> {
        let gate = &self.gates[g as usize];
        match gate.on.iter().find(|(e, _)| e == OUTCOMES[o as usize]) {
            Some(&(_, site)) => self.act(site),
            None => match o {
                0 => Some((gate.from, Phase::Enter(gate.to))),
                1 => Some((n, Phase::Decide(g))),
                _ => Some((n, Phase::Terminate(self.reason(&gate.reason.clone().unwrap_or_else(|| "block".into()))))),
            },
        }
    }

    /// What follows a node's completion (`settled`: by settling): its
    /// records first, if it declares any.
    fn completed(info: &NodeInfo, settled: bool) -> Phase {
        match (info.records.is_empty(), settled) {
            (false, _) => Phase::Record(0, settled),
            (true, true) => Phase::Leave,
            (true, false) => Self::after_completion(info),
        }
    }

    fn after_completion(info: &NodeInfo) -> Phase {
        if info.approvals.is_empty() {
            Phase::Leave
        } else {
            Phase::Approve(0)
        }
    }

    fn confirm_subject(&self, tool: u16) -> u16 {
        let name = format!("confirm.{}", self.tools[tool as usize]);
        self.subjects.get_index_of(name.as_str()).unwrap_or(0) as u16
    }

    fn escalation_subject(&self, site: u16) -> u16 {
        let p = self.sites[site as usize].action.args.first().cloned().unwrap_or_default();
        let name = format!("escalation.{p}");
        self.subjects.get_index_of(name.as_str()).unwrap_or(0) as u16
    }

    fn decision_of(&self, s: &St, n: NodeId) -> Option<&'static str> {
        let info = &self.nodes[n as usize];
        match s.vars.get(info.dec_slot) {
            Some(&d) if d > 0 && info.kind == Kind::Human => Some(DECISIONS[(d - 1) as usize].as_str()),
            _ => None,
        }
    }

    fn enter_via(&self, from: NodeId, to: NodeId) -> u8 {
        self.gate_on.get(&(from, to)).map_or(0, |&g| VIA_GATE + g as u8)
    }

    /// Where taking the edge `from -> to` leads: a listed branch arrives
    /// at its join; anything else starts `to`.
    fn entry(&self, from: NodeId, to: NodeId) -> (NodeId, Phase) {
        if self.nodes[from as usize].join_of == Some(to) {
            (from, Phase::JoinArrive(to))
        } else {
            (to, Phase::Start)
        }
    }

    /// Where a node's failure (`event`) leads, as the engine resolves it
    /// (`semantics::failure_step`).
    fn fail(&self, n: NodeId, event: HandlerEvent) -> Option<(NodeId, Phase)> {
        use flow_check::semantics::{failure_step, FailureStep};
        let info = &self.nodes[n as usize];
        let (_, node) = self.workflow.nodes.get_index(n as usize)?;
        let site_on = |on: &[(String, u16)], e: &str| on.iter().find(|(x, _)| x == e).map(|&(_, s)| s);
        match failure_step(self.workflow, &self.index, node, event) {
            FailureStep::Handler { event: on } => {
                let site = site_on(&info.on, on.as_str())?;
                if self.sites[site as usize].action.name == flow_check::ir::ActionKind::Retry {
                    return Some((n, Phase::Retried));
                }
                self.act(site)
            }
            FailureStep::OnFailure(f) => self.act_direct(&Action::bare(f.action()), Some(n), None, event.as_str()),
            FailureStep::LoopHandler { loop_node } => {
                let lp = self.workflow.nodes.get_index_of(loop_node)?;
                self.act(site_on(&self.nodes[lp].on, "failure")?)
            }
            FailureStep::WorkflowHandler => {
                let site = site_on(&self.workflow_on, "failure")?;
                self.act_direct(&self.sites[site as usize].action.clone(), Some(n), None, "failure")
            }
            FailureStep::Fail => Some((n, Phase::Terminate(self.reason(&format!("{}_failed", info.name))))),
        }
    }

    fn exhaust(&self, n: NodeId) -> Option<(NodeId, Phase)> {
        if let Some(site) = self.exhaust_site {
            let a = self.sites[site as usize].action.clone();
            return self.act_direct(&a, Some(n), None, "budget_exhausted");
        }
        if let Some(&(_, site)) = self.nodes[n as usize].on.iter().find(|(e, _)| e == "budget_exhausted") {
            return self.act(site);
        }
        if let Some(&(_, site)) = self.workflow_on.iter().find(|(e, _)| e == "budget_exhausted") {
            let a = self.sites[site as usize].action.clone();
            return self.act_direct(&a, Some(n), None, "budget_exhausted");
        }
        Some((n, Phase::Terminate(self.reason("budget_exhausted"))))
    }

    /// A handler site's action: recorded as taken, then applied.
    fn act(&self, site: u16) -> Option<(NodeId, Phase)> {
        let s = &self.sites[site as usize];
        let owner = s.node.or(s.gate.map(|g| self.gates[g as usize].from)).unwrap_or(0);
        Some((owner, Phase::Taken(site)))
    }

    /// The node a site's action acts for, taken by the thread at `n`: the
    /// handler's node, else (a workflow handler, raised by `n`) `n` — as
    /// the engine's handler context names the node that raised the event.
    fn context(&self, site: u16, n: NodeId) -> Option<NodeId> {
        let s = &self.sites[site as usize];
        if s.gate.is_some() {
            return s.node;
        }
        s.node.or(Some(n))
    }

    /// A recorded site's action, applied by the thread at `n`.
    fn act_now(&self, site: u16, n: NodeId) -> Option<(NodeId, Phase)> {
        let s = &self.sites[site as usize];
        let node = self.context(site, n);
        if s.action.name == flow_check::ir::ActionKind::Escalate {
            let owner = node.or(s.gate.map(|g| self.gates[g as usize].from)).unwrap_or(n);
            return Some((owner, Phase::Escalate(site)));
        }
        self.act_direct(&s.action.clone(), node, s.gate, s.event.as_str())
    }

    /// The next place of the acting thread after `action` in a context.
    fn act_direct(&self, action: &Action, node: Option<NodeId>, gate: Option<u16>, event: &str) -> Option<(NodeId, Phase)> {
        let owner = node.or(gate.map(|g| self.gates[g as usize].from)).unwrap_or(0);
        let arg = action.args.first();
        let target = |name: &str| self.workflow.nodes.get_index_of(name).map(|i| i as NodeId);
        match action.name {
            ActionKind::Continue | ActionKind::Skip | ActionKind::Degrade | ActionKind::Warn => {
                self.continue_in(node, gate, event, action.name == flow_check::ir::ActionKind::Skip)
            }
            ActionKind::Retry => Some((owner, Phase::Retried)),
            ActionKind::Decide => gate.map(|g| (owner, Phase::Decide(g))),
            ActionKind::Terminate => {
                let reason = arg
                    .cloned()
                    .or_else(|| gate.and_then(|g| self.gates[g as usize].reason.clone()))
                    .unwrap_or_else(|| event.to_lowercase());
                Some((owner, Phase::Terminate(self.reason_or_add(&reason))))
            }
            ActionKind::Halt => Some((owner, Phase::Terminate(self.reason("halted")))),
            ActionKind::Fallback => Some((owner, Phase::Terminate(self.reason_or_add(arg.map(String::as_str).unwrap_or("fallback"))))),
            ActionKind::ReturnPartial => Some((owner, Phase::Terminate(self.reason("partial_result")))),
            ActionKind::Goto | ActionKind::Activate => {
                let via = if action.name == flow_check::ir::ActionKind::Goto { 3 } else { 4 };
                arg.and_then(|a| target(a)).map(|to| (owner, Phase::Jump(to, via)))
            }
            ActionKind::Revise | ActionKind::Replan => {
                let to = match arg {
                    Some(a) => target(a),
                    None if action.name == flow_check::ir::ActionKind::Replan => {
                        gate.and_then(|g| self.gates[g as usize].replan_scope).or(self.start)
                    }
                    None => node,
                };
                let via = if action.name == flow_check::ir::ActionKind::Revise { 5 } else { 6 };
                to.map(|to| (owner, Phase::Jump(to, via)))
            }
            ActionKind::Escalate => {
                // An escalation outside a handler site: find the site — the
                // context's own, else the workflow's (which acts for `node`).
                let at = |ctx: Option<NodeId>| {
                    self.sites.iter().position(|s| s.action == *action && s.node == ctx && s.gate == gate && s.event.as_str() == event)
                };
                let site = at(node).or_else(|| at(None));
                site.map(|s| (owner, Phase::Escalate(s as u16)))
            }
            _ => None,
        }
    }

    fn reason_or_add(&self, reason: &str) -> u16 {
        self.reasons.get_index_of(reason).or_else(|| self.reasons.get_index_of("unmodelled_reason")).unwrap_or(0) as u16
    }

    /// `continue` in a context: through the gate, or completing the node
    /// (after a failure or a human decision), or on from a completed node.
    fn continue_in(&self, node: Option<NodeId>, gate: Option<u16>, event: &str, skip: bool) -> Option<(NodeId, Phase)> {
        if let Some(g) = gate {
            let gate = &self.gates[g as usize];
            return Some((gate.from, Phase::Enter(gate.to)));
        }
        let n = node?;
        let kind = self.nodes[n as usize].kind;
        if matches!(event, "failure" | "timeout" | "invalid_output") || kind == Kind::Human {
            return Some((n, Phase::Settle(if skip { 1 } else { 2 })));
        }
        Some((n, Phase::Leave))
    }

    /// Takes the edge `n -> to` (the engine's `enter`): counted against
    /// the pair's hop limit — past it the crossing is not taken, the count
    /// starts again and `max_hops` is raised — then its handoff, then `to`.
    fn cross(&self, st: &St, t: usize, n: NodeId, to: NodeId, via: u8, out: &mut Vec<(Option<Label>, St)>) {
        let hops = self.hop_slots.get(&(n, to)).copied();
        if let Some((slot, _)) = hops.filter(|&(slot, limit)| st.vars[slot] >= limit) {
            // The workflow's handler acts for `n`, the node the crossing left.
            let next = match self.workflow_on.iter().find(|(e, _)| e == HandlerEvent::MaxHops.as_str()) {
                Some(&(_, site)) => Some((n, Phase::Taken(site))),
                None => Some((n, Phase::Terminate(self.reason("max_hops")))),
            };
            let mut s = self.set(st, t, next);
            s.vars[slot] = 0;
            self.push(out, None, s);
            return;
        }
        let next = if self.handoffs.contains(&(n, to)) { (n, Phase::Handoff(to)) } else { self.entry(n, to) };
        let count = |mut s: St| {
            if let Some((slot, _)) = hops {
                s.vars[slot] += 1;
            }
            s
        };
        self.push(out, Some(Label::Edge(n, to, via)), count(self.set(st, t, Some(next))));
        // The delegation is refused: the delegator fails.
        if self.may_refuse(&self.delegation_refusals, st, n, to) {
            self.push(out, Some(Label::Edge(n, to, via)), count(self.set(st, t, Some((n, Phase::FailNow)))));
        }
    }

    /// Whether a transfer across `n -> to` may be refused in `st`: always
    /// when it checks what may fail, when it checks only the sender's own
    /// output type, only if that output was not validated (settled).
    fn may_refuse(&self, refusals: &rustc_hash::FxHashMap<(NodeId, NodeId), Refusal>, st: &St, n: NodeId, to: NodeId) -> bool {
        match refusals.get(&(n, to)).copied().unwrap_or(Refusal::Never) {
            Refusal::Never => false,
            Refusal::Possible => true,
            Refusal::Unvalidated => self.settled(st, n) || !self.has_output(st, n),
        }
    }

    /// After a node completed: the engine's `follow`.
    fn leave(&self, st: &St, t: usize, n: NodeId, out: &mut Vec<(Option<Label>, St)>) {
        let info = &self.nodes[n as usize];
        if info.kind == Kind::Parallel {
            self.push(out, None, self.set(st, t, None));
            return;
        }
        if let Some(map) = info.map_of {
            self.push(out, None, self.set(st, t, Some((map, Phase::MapNext))));
            return;
        }
        let mut choices: Vec<(NodeId, u8)> = Vec::new();
        let mut all_false_possible = true;
        let mut else_edge = None;
        for (k, (to, guard)) in info.edges.iter().enumerate() {
            if matches!(guard, Guard::When(_)) && all_false_possible && info.edge_refs[k].iter().any(|&r| !self.has_output(st, r)) {
                // The guard reads an output that does not exist yet: its
                // evaluation fails, and so does the node.
                let next = self.fail(n, HandlerEvent::Failure);
                self.push(out, Some(Label::Failed(n)), self.set(st, t, next));
                all_false_possible = false;
                break;
            }
            match guard {
                Guard::Always => {
                    if all_false_possible {
                        choices.push((*to, 0));
                    }
                    all_false_possible = false;
                    break;
                }
                Guard::When(cond) => {
                    if !all_false_possible {
                        break;
                    }
                    match self.guard(cond, st) {
                        Some(true) => {
                            choices.push((*to, 1));
                            all_false_possible = false;
                        }
                        Some(false) => {}
                        None => choices.push((*to, 1)),
                    }
                }
                Guard::Else => else_edge = Some(*to),
            }
        }
        if all_false_possible && else_edge.is_none() && !info.guards_can_fail && choices.len() == info.edges.len() {
            // The guards provably cover every value: one of them holds.
            all_false_possible = false;
        }
        if all_false_possible {
            if let Some(to) = else_edge {
                choices.push((to, 2));
                all_false_possible = false;
            }
        }
        for (to, via) in choices {
            if let Some(lp) = info.in_loop {
                if !self.nodes[lp as usize].targets.contains(&to) {
                    self.push(out, None, self.set(st, t, Some((n, Phase::RoundEnd(lp)))));
                    continue;
                }
            }
            let next = match self.gate_on.get(&(n, to)) {
                Some(&g) if !self.gates[g as usize].judges.is_empty() => (n, Phase::Judge(g, 0, 0)),
                Some(&g) => (n, Phase::Gate(g)),
                None => {
                    // Enter directly: the edge's via is the guard's.
                    self.cross(st, t, n, to, via, out);
                    continue;
                }
            };
            self.push(out, None, self.set(st, t, Some(next)));
        }
        if all_false_possible {
            if let Some(lp) = info.in_loop {
                self.push(out, None, self.set(st, t, Some((n, Phase::RoundEnd(lp)))));
            } else if let Some(j) = info.join_of {
                self.push(out, Some(Label::Edge(n, j, 9)), self.set(st, t, Some((n, Phase::JoinArrive(j)))));
            } else if st.threads.len() > 1 {
                self.push(out, None, self.set(st, t, None));
            } else {
                self.push(out, None, self.set(st, t, Some((n, Phase::Terminate(self.reason("dead_end"))))));
            }
        }
    }

    /// A guard's value when the state knows it: comparisons of a human
    /// node's `decision` with a string, and `and`/`or`/`not` of those.
    fn guard(&self, e: &TExpr, st: &St) -> Option<bool> {
        flow_syntax::stack::guarded(|| self.guard_level(e, st))
    }

    fn guard_level(&self, e: &TExpr, st: &St) -> Option<bool> {
        match &e.kind {
            TExprKind::Not { operand } => self.guard(operand, st).map(|b| !b),
            TExprKind::Binary { op, lhs, rhs } => match op {
                BinOp::And => match (self.guard(lhs, st), self.guard(rhs, st)) {
                    (Some(false), _) | (_, Some(false)) => Some(false),
                    (Some(true), Some(true)) => Some(true),
                    _ => None,
                },
                BinOp::Or => match (self.guard(lhs, st), self.guard(rhs, st)) {
                    (Some(true), _) | (_, Some(true)) => Some(true),
                    (Some(false), Some(false)) => Some(false),
                    _ => None,
                },
                BinOp::Eq | BinOp::NotEq => {
                    let (node, lit) = match (decision_field(lhs), literal(rhs)) {
                        (Some(n), Some(l)) => (n, l),
                        _ => match (decision_field(rhs), literal(lhs)) {
                            (Some(n), Some(l)) => (n, l),
                            _ => return None,
                        },
                    };
                    let n = self.workflow.nodes.get_index_of(node)? as NodeId;
                    let d = self.decision_of(st, n)?;
                    Some((d == lit) == (*op == BinOp::Eq))
                }
                _ => None,
            },
            _ => None,
        }
    }
}

fn decision_field(e: &TExpr) -> Option<&str> {
    match &e.kind {
        TExprKind::Field { base, name } if name == "decision" => match &base.kind {
            TExprKind::Var { name } => Some(name),
            _ => None,
        },
        _ => None,
    }
}

fn literal(e: &TExpr) -> Option<&str> {
    match &e.kind {
        TExprKind::Literal { value } => match value.as_ref() {
            Value::Str(s) | Value::Word(s) => Some(s),
            _ => None,
        },
        _ => None,
    }
}

/// The nodes whose outputs an expression reads.
fn refs_of(e: &TExpr, node_index: &impl Fn(&str) -> Option<NodeId>) -> Vec<NodeId> {
    fn walk(e: &TExpr, node_index: &impl Fn(&str) -> Option<NodeId>, out: &mut Vec<NodeId>, bound: &mut Vec<String>) {
        flow_syntax::stack::guarded(|| walk_level(e, node_index, out, bound))
    }

    fn walk_level(e: &TExpr, node_index: &impl Fn(&str) -> Option<NodeId>, out: &mut Vec<NodeId>, bound: &mut Vec<String>) {
        match &e.kind {
            TExprKind::Var { name } => {
                if !bound.contains(name) {
                    if let Some(n) = node_index(name) {
                        if !out.contains(&n) {
                            out.push(n);
                        }
                    }
                }
            }
            TExprKind::Field { base, .. } => walk(base, node_index, out, bound),
            TExprKind::Index { base, index } => {
                walk(base, node_index, out, bound);
                walk(index, node_index, out, bound);
            }
            TExprKind::Call { args, .. } => args.iter().for_each(|a| walk(a, node_index, out, bound)),
            TExprKind::Not { operand } | TExprKind::Neg { operand } => walk(operand, node_index, out, bound),
            TExprKind::Binary { lhs, rhs, .. } => {
                walk(lhs, node_index, out, bound);
                walk(rhs, node_index, out, bound);
            }
            TExprKind::List { items } => items.iter().for_each(|a| walk(a, node_index, out, bound)),
            TExprKind::Record { fields } => fields.values().for_each(|a| walk(a, node_index, out, bound)),
            TExprKind::Quantified { var, list, predicate: body, .. } | TExprKind::Comprehension { var, list, body, .. } => {
                walk(list, node_index, out, bound);
                bound.push(var.clone());
                walk(body, node_index, out, bound);
                bound.pop();
            }
            TExprKind::Literal { .. } | TExprKind::Invalid => {}
        }
    }
    let mut out = Vec::new();
    walk(e, node_index, &mut out, &mut Vec::new());
    out
}

/// Whether a thread's next step is the control plane's own (it runs
/// without waiting for the data plane: models, tools, humans).
fn is_control(phase: Phase) -> bool {
    !matches!(
        phase,
        Phase::Tools(_)
            | Phase::ToolConfirm(_)
            | Phase::NodeConfirm
            | Phase::Finish
            | Phase::Retried
            | Phase::Human
            | Phase::Gate(_)
            | Phase::Decide(_)
            | Phase::Escalate(_)
            | Phase::Approve(_)
            | Phase::Judge(..)
            | Phase::Judged(..)
    )
}

fn next_or_dead(next: Option<(NodeId, Phase)>, n: NodeId) -> (NodeId, Phase) {
    next.unwrap_or((n, Phase::Terminate(u16::MAX)))
}

/// Whether a join can fail for conflicting results as it merges, as the
/// engine decides it: under `conflicts: fail`, when it runs with two
/// results or more (its rule waits for at least two branches), or when a
/// branch's result may report conflicts of its own (a `conflicts` field).
fn join_may_conflict(program: &Program, workflow: &Workflow, join: &flow_check::ir::Node) -> bool {
    use flow_check::ir::JoinRule;
    use flow_check::types::Ty;
    if join.conflicts() != flow_check::view::Conflicts::Fail {
        return false;
    }
    let total = join.target.len();
    let at_least = match flow_check::semantics::join_rule(join) {
        JoinRule::Any | JoinRule::First => 1,
        JoinRule::Majority => total / 2 + 1,
        _ => total,
    };
    let reports = |ty: &Ty| {
        let mut ty = ty.clone();
        for _ in 0..8 {
            match ty {
                Ty::Named { ref name } => match program.types.get(name) {
                    Some(def) => ty = def.ty.clone(),
                    None => return true,
                },
                Ty::Record { ref fields } => return fields.contains_key("conflicts"),
                Ty::Any => return true,
                _ => return false,
            }
        }
        true
    };
    at_least >= 2 || join.target.iter().filter_map(|b| workflow.nodes.get(b)).any(|b| reports(&b.output))
}
