//! The model checker: each policy's automaton (flow-policy) in product with
//! the workflow's abstract state space (model.rs).
//!
//! Breadth-first search from the initial state finds the shortest
//! counterexample (in transitions): a state where the residual is `false`
//! (a safety violation at that event) or a final state whose residual does
//! not accept the end of the trace (an obligation left open). Residuals
//! that became `true` are not explored further: nothing can violate them.
//! When the workflow's runs need not be finite (no budget, no deadline), a
//! reachable cycle of states whose residual keeps an obligation open at every
//! position is a lasso counterexample. More than `max_states` product states
//! gives "unknown", never "holds". A product state is not explored further
//! once its residual accepts the end and no label that could change it can
//! be emitted any more (the policy's cone of influence, `model/live.rs`).

use crate::model::{Label, Model, NodeId, DECISIONS, OUTCOMES, ZONES};
use flow_check::events;
use flow_check::ir::{NodeKind, TransferKind};
use flow_policy::{Automaton, Mask, Obs};
use flow_trace::{ArtifactRef, Body, ErrorCode, EvaluatorResult, Event, TriggerReason, Via};
use indexmap::IndexSet;
use petgraph::graph::{DiGraph, NodeIndex};
use rustc_hash::{FxBuildHasher, FxHashMap};
use std::collections::VecDeque;

/// A counterexample: the events (labels) of the run, and for a lasso the
/// index of the first label of the repeating cycle.
#[derive(Debug, Clone, PartialEq)]
pub struct Counterexample {
    pub labels: Vec<Label>,
    pub cycle_start: Option<usize>,
    /// What was still owed when it ended (for an open obligation).
    pub owed: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Holds,
    Violated(Counterexample),
    /// The state space exceeds the bound.
    Unknown(usize),
    /// The search was cancelled (`Cancel`): no verdict.
    Cancelled,
}

/// The outcome of checking one policy against one workflow.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub verdict: Verdict,
    /// Product states explored.
    pub states: usize,
}

type Visited = IndexSet<(crate::model::St, u32), FxBuildHasher>;

/// The observation of a label, for atoms.
pub fn obs<'m>(model: &'m Model, label: &Label) -> Option<Obs<'m>> {
    let node = |n: &NodeId| model.node_name(*n);
    Some(match label {
        Label::Started(n) => Obs::Started(node(n)),
        Label::Completed(n) | Label::Settled(n, _) => Obs::Completed(node(n)),
        Label::Failed(n) | Label::FailedUnsent(n) | Label::FailedInvalid(n) => Obs::Failed(node(n)),
        Label::Called(t, a, _) => Obs::Called { tool: &model.tools[*t as usize], by: a.map(|a| model.agents[a as usize].as_str()) },
        Label::Refused(t, a, _) => Obs::Refused { tool: &model.tools[*t as usize], by: a.map(|a| model.agents[a as usize].as_str()) },
        Label::HandedOff(a, b) | Label::DeadLettered(a, b) => Obs::HandedOff { from: node(a), to: node(b) },
        Label::Outcome(g, o) => Obs::Outcome { gate: &model.gate_names[*g as usize], outcome: OUTCOMES[*o as usize] },
        Label::Decided(s, d, p) => {
            Obs::Decided { subject: &model.subjects[*s as usize], decision: DECISIONS[*d as usize].as_str(), by: model.principal_name(*p) }
        }
        Label::Zone(_, z) => Obs::Zone(ZONES[*z as usize].as_str()),
        Label::Terminated(r) => Obs::Terminated(model.reasons.get_index(*r as usize).map(String::as_str).unwrap_or("")),
        Label::Recorded(r) => Obs::Recorded(&model.records[*r as usize].0),
        Label::Edge(..) | Label::Exhausted(_) | Label::Acted(_) => return None,
    })
}

/// Checks one policy automaton against a model.
pub fn check(model: &Model, automaton: &mut Automaton, max_states: usize, cancel: &crate::Cancel) -> Outcome {
    let mut masks: FxHashMap<Label, Option<Mask>> = FxHashMap::default();
    let mut visited: Visited = IndexSet::with_hasher(FxBuildHasher);
    let mut parent: Vec<(u32, Option<Label>)> = Vec::new();
    let mut edges: Vec<(u32, u32, Option<Label>)> = Vec::new();
    let lasso = !model.finite_runs;
    let init = model.initial();
    let q0 = automaton.init();
    if Automaton::is_true(q0) {
        return Outcome { verdict: Verdict::Holds, states: 0 };
    }
    visited.insert((init, q0));
    parent.push((u32::MAX, None));
    let mut succ = Vec::new();
    let mut idx = 0usize;
    // The policy's cone of influence: from a state whose threads can no
    // longer emit a label an atom holds of, every later step leaves a
    // stable residual as it is; when it also accepts the end, nothing
    // after this state can violate the policy.
    let quiet = if model.cone { crate::model::quiet(model, automaton.atoms()) } else { None };
    let mut stable: FxHashMap<u32, bool> = FxHashMap::default();
    while idx < visited.len() {
        if idx.is_multiple_of(4096) && cancel.is_cancelled() {
            return Outcome { verdict: Verdict::Cancelled, states: visited.len() };
        }
        let (st, q) = visited.get_index(idx).cloned().expect("index in range");
        if let Some(quiet) = &quiet {
            if crate::model::places(&st).all(|n| quiet[n as usize])
                && *stable.entry(q).or_insert_with(|| automaton.accepts_end(q) && automaton.step(q, 0) == q)
            {
                idx += 1;
                continue;
            }
        }
        model.steps_from(&st, &mut succ);
        if succ.is_empty() {
            // The run ends here: the residual must accept the end.
            if !automaton.accepts_end(q) {
                let owed = automaton.residual(q);
                let mut cx = path(&parent, idx);
                cx.owed = Some(owed);
                return Outcome { verdict: Verdict::Violated(cx), states: visited.len() };
            }
        }
        for (label, next) in succ.drain(..) {
            let q2 = match label {
                Some(l) => {
                    let mask = *masks.entry(l).or_insert_with(|| obs(model, &l).map(|o| automaton.mask(&o)));
                    match mask {
                        Some(m) => automaton.step(q, m),
                        None => q,
                    }
                }
                None => q,
            };
            if Automaton::is_true(q2) {
                continue;
            }
            let (j, new) = visited.insert_full((next, q2));
            if new {
                parent.push((idx as u32, label));
                if Automaton::is_false(q2) {
                    return Outcome { verdict: Verdict::Violated(path(&parent, j)), states: visited.len() };
                }
                if visited.len() > max_states {
                    return Outcome { verdict: Verdict::Unknown(max_states), states: visited.len() };
                }
            }
            if lasso {
                edges.push((idx as u32, j as u32, label));
            }
        }
        idx += 1;
    }
    if lasso {
        if let Some(cx) = find_lasso(&visited, &parent, &edges, automaton) {
            return Outcome { verdict: Verdict::Violated(cx), states: visited.len() };
        }
    }
    Outcome { verdict: Verdict::Holds, states: visited.len() }
}

pub(crate) fn path(parent: &[(u32, Option<Label>)], mut i: usize) -> Counterexample {
    let mut labels = Vec::new();
    while let Some(&(p, label)) = parent.get(i) {
        if let Some(l) = label {
            labels.push(l);
        }
        if p == u32::MAX {
            break;
        }
        i = p as usize;
    }
    labels.reverse();
    Counterexample { labels, cycle_start: None, owed: None }
}

/// A reachable cycle along which the residual never accepts the end (an
/// obligation stays open at every position), as prefix + cycle.
fn find_lasso(
    visited: &Visited,
    parent: &[(u32, Option<Label>)],
    edges: &[(u32, u32, Option<Label>)],
    automaton: &mut Automaton,
) -> Option<Counterexample> {
    let open: Vec<bool> = visited.iter().map(|(st, q)| !st.is_final() && !automaton.accepts_end(*q)).collect();
    let (mut cx, entry) = lasso_through(&open, parent, edges)?;
    let (_, q) = visited.get_index(entry)?;
    cx.owed = Some(automaton.residual(*q));
    Some(cx)
}

/// The first reachable cycle (by the index of its first state) among the
/// `open` states, shortest through that state, as prefix + cycle, and the
/// index of the state where the cycle starts.
pub(crate) fn lasso_through(
    open: &[bool],
    parent: &[(u32, Option<Label>)],
    edges: &[(u32, u32, Option<Label>)],
) -> Option<(Counterexample, usize)> {
    let mut graph: DiGraph<(), Option<Label>> = DiGraph::with_capacity(open.len(), edges.len());
    for _ in 0..open.len() {
        graph.add_node(());
    }
    for &(a, b, label) in edges {
        if open[a as usize] && open[b as usize] {
            graph.add_edge(NodeIndex::new(a as usize), NodeIndex::new(b as usize), label);
        }
    }
    let sccs = petgraph::algo::kosaraju_scc(&graph);
    let cyclic = sccs
        .into_iter()
        .filter(|c| c.len() > 1 || graph.find_edge(c[0], c[0]).is_some())
        .min_by_key(|c| c.iter().map(|n| n.index()).min().unwrap_or(usize::MAX))?;
    let entry = *cyclic.iter().min_by_key(|n| n.index())?;
    let members: rustc_hash::FxHashSet<NodeIndex> = cyclic.iter().copied().collect();
    // Shortest cycle through the entry, inside the component.
    let mut back: FxHashMap<NodeIndex, (NodeIndex, Option<Label>)> = FxHashMap::default();
    let mut queue = VecDeque::from([entry]);
    let mut closing = None;
    'search: while let Some(n) = queue.pop_front() {
        for e in graph.edges(n) {
            use petgraph::visit::EdgeRef;
            let t = e.target();
            if !members.contains(&t) {
                continue;
            }
            if t == entry {
                closing = Some((n, *e.weight()));
                break 'search;
            }
            if let std::collections::hash_map::Entry::Vacant(v) = back.entry(t) {
                v.insert((n, *e.weight()));
                queue.push_back(t);
            }
        }
    }
    let (last, last_label) = closing?;
    let mut cycle = Vec::new();
    if let Some(l) = last_label {
        cycle.push(l);
    }
    let mut cur = last;
    while cur != entry {
        let (p, l) = back[&cur];
        if let Some(l) = l {
            cycle.push(l);
        }
        cur = p;
    }
    cycle.reverse();
    let mut cx = path(parent, entry.index());
    let start = cx.labels.len();
    cx.labels.extend(cycle);
    cx.cycle_start = Some(start);
    Some((cx, entry.index()))
}

/// What a step costs a positive witness: the search prefers the run a
/// data plane makes most easily — no failures, no budget zones or
/// exhaustion, no refused calls, gates that pass — and among those the
/// shortest. (Any run would witness the obligation; this one is also the
/// one `flow run --witness` finds answers for most often.)
fn cover_cost(label: Option<&Label>) -> u64 {
    match label {
        Some(
            Label::Failed(_)
            | Label::FailedUnsent(_)
            | Label::FailedInvalid(_)
            | Label::Zone(..)
            | Label::Exhausted(_)
            | Label::Refused(..),
        ) => 1_000,
        Some(Label::Outcome(_, o)) if *o != 0 => 100,
        Some(Label::Decided(_, d, _)) if *d != 0 => 100,
        _ => 1,
    }
}

/// A cheapest run (by `cover_cost`; a step the obligation wants is
/// cheap) that emits a label `wanted` accepts and then ends: a positive
/// witness for a coverage obligation, if the model has one within
/// `max_states`.
pub fn cover(model: &Model, wanted: impl Fn(&Label) -> bool, max_states: usize) -> Option<Vec<Label>> {
    use std::cmp::Reverse;
    // Dijkstra over (state, covered?); stop at the first final state settled covered.
    let mut visited: IndexSet<(crate::model::St, bool), FxBuildHasher> = IndexSet::with_hasher(FxBuildHasher);
    let mut parent: Vec<(u32, Option<Label>)> = Vec::new();
    let mut cost: Vec<u64> = Vec::new();
    let mut queue = std::collections::BinaryHeap::new();
    visited.insert((model.initial(), false));
    parent.push((u32::MAX, None));
    cost.push(0);
    queue.push(Reverse((0u64, 0usize)));
    let mut succ = Vec::new();
    while let Some(Reverse((c, idx))) = queue.pop() {
        if c > cost[idx] {
            continue;
        }
        if visited.len() > max_states {
            return None;
        }
        let (st, covered) = visited.get_index(idx).cloned()?;
        if st.is_final() {
            if covered {
                return Some(path(&parent, idx).labels);
            }
            continue;
        }
        model.successors(&st, &mut succ);
        if succ.is_empty() && covered {
            return Some(path(&parent, idx).labels);
        }
        for (label, next) in succ.drain(..) {
            let hit = label.as_ref().is_some_and(&wanted);
            let step = if hit { 1 } else { cover_cost(label.as_ref()) };
            let (j, new) = visited.insert_full((next, covered || hit));
            let through = c + step;
            if new {
                parent.push((idx as u32, label));
                cost.push(through);
            } else if through < cost[j] {
                parent[j] = (idx as u32, label);
                cost[j] = through;
            } else {
                continue;
            }
            queue.push(Reverse((through, j)));
        }
    }
    None
}

/// The error code of a witness's failed visit: one whose handler event is
/// `failure` (the event the model fails a visit with), as the node's kind
/// would report it.
fn failure_code(kind: NodeKind) -> ErrorCode {
    match kind {
        NodeKind::Agent => ErrorCode::ProviderError,
        NodeKind::Tool => ErrorCode::ToolError,
        NodeKind::Join => ErrorCode::Conflict,
        _ => ErrorCode::EvalError,
    }
}

/// The witness run as trace events, in the vocabulary of `flow run`.
pub fn events(model: &Model, labels: &[Label], run_id: &str, plan_digest: &str) -> Vec<Event> {
    events_with_cycle(model, labels, None, run_id, plan_digest)
}

/// [`events()`] for a lasso: the labels from `cycle_start` on repeat forever.
/// The trace ends with `run_paused` (reason `cycle`, `waiting_on` the seq
/// the cycle starts at), which `flow trace check` reads as "the last events
/// repeat forever": an obligation still open is violated.
pub fn events_with_cycle(model: &Model, labels: &[Label], cycle_start: Option<usize>, run_id: &str, plan_digest: &str) -> Vec<Event> {
    let mut cycle_seq = None;
    let mut out: Vec<Event> = Vec::new();
    let mut visits: FxHashMap<NodeId, u32> = FxHashMap::default();
    // The items each map node has started in its current visit.
    let mut map_items: FxHashMap<NodeId, u32> = FxHashMap::default();
    // The zone of each zone scope so far.
    let mut zones: FxHashMap<u16, usize> = FxHashMap::default();
    let mut calls = 0u32;
    let mut open: FxHashMap<NodeId, String> = FxHashMap::default();
    // The output digest of each node's last completion (what a compute
    // node records it read).
    let mut outputs: FxHashMap<String, Option<ArtifactRef>> = FxHashMap::default();
    let payload = ArtifactRef { digest: format!("sha256:{}", "0".repeat(64)), size: 0 };
    let push = |out: &mut Vec<Event>, producer: &str, body: Body| {
        let seq = out.len() as u64 + 1;
        out.push(Event {
            run_id: run_id.into(),
            execution_id: "exec-1".into(),
            seq,
            event_id: Event::id_for(run_id, seq).into(),
            parent_event_id: None,
            producer: producer.into(),
            body,
            time: "1970-01-01T00:00:00Z".into(),
            prev: None,
        });
    };
    push(&mut out, "control", events::run_started(model.workflow, plan_digest, None, None));
    let name = |n: &NodeId| model.node_name(*n).to_string();
    let node = |n: &NodeId| &model.workflow.nodes[*n as usize];
    for (i, label) in labels.iter().enumerate() {
        if Some(i) == cycle_start {
            cycle_seq = Some(out.len() as u64 + 1);
        }
        match label {
            Label::Started(n) => {
                map_items.remove(n);
                let v = visits.entry(*n).or_default();
                *v += 1;
                let visit = *v;
                push(&mut out, "control", events::node_started(node(n), visit));
                if model.node_kind(*n).has_attempts() {
                    // One attempt per visit (retries are not policy steps).
                    let attempt_id = flow_trace::attempt_id(&name(n), visit, 1);
                    push(&mut out, "control", events::attempt_started(&name(n), &attempt_id, 1, flow_trace::TriggerReason::First));
                    open.insert(*n, attempt_id);
                }
            }
            Label::Acted(site) => {
                let (event, scope, action) = model.site_action(*site);
                push(&mut out, "control", events::action_taken(event, scope, action));
            }
            Label::Settled(n, status) => {
                let status = if *status == 1 { flow_trace::NodeStatus::Skipped } else { flow_trace::NodeStatus::Degraded };
                push(&mut out, "control", events::node_completed(&name(n), status, Some(payload.clone())));
                outputs.insert(name(n), Some(payload.clone()));
            }
            Label::Completed(n) => {
                // Outputs are abstract: one placeholder artifact (the handoffs carry the same).
                let output = matches!(
                    model.node_kind(*n),
                    NodeKind::Agent
                        | NodeKind::Tool
                        | NodeKind::Human
                        | NodeKind::Join
                        | NodeKind::Loop
                        | NodeKind::Map
                        | NodeKind::Compute
                )
                .then(|| payload.clone());
                // A computed value or a vote: what it read is the outputs so
                // far (placeholders: the values are data the model does not
                // track).
                let reads = match &node(n).body {
                    flow_check::ir::NodeBody::Compute(compute) => Some(compute.reads()),
                    flow_check::ir::NodeBody::Join(j) if matches!(j.rule, flow_check::ir::JoinRule::Vote { .. }) => {
                        Some(node(n).target.iter().filter(|b| outputs.get(*b).is_some_and(Option::is_some)).cloned().collect())
                    }
                    _ => None,
                };
                if let Some(reads) = reads {
                    let inputs = reads.into_iter().map(|r| (r.clone(), outputs.get(&r).cloned().flatten())).collect();
                    push(&mut out, "control", events::computed(&name(n), inputs, payload.clone()));
                }
                outputs.insert(name(n), output.clone());
                if let Some(attempt_id) = open.remove(n) {
                    push(&mut out, "control", events::attempt_completed(&name(n), &attempt_id, 1, payload.clone()));
                }
                push(&mut out, "control", events::node_completed(&name(n), flow_trace::NodeStatus::Completed, output));
            }
            Label::Failed(n) | Label::FailedUnsent(n) | Label::FailedInvalid(n) => {
                let code = match label {
                    Label::FailedUnsent(_) => ErrorCode::InputTooLarge,
                    Label::FailedInvalid(_) => ErrorCode::InvalidOutput,
                    _ => failure_code(model.node_kind(*n)),
                };
                if let Some(attempt_id) = open.remove(n) {
                    let why = "the attempt failed (a choice of the model)";
                    push(&mut out, "control", events::attempt_failed(&name(n), &attempt_id, 1, code, why));
                }
                push(&mut out, "control", events::node_failed(&name(n), code, "the visit failed (a choice of the model)"));
            }
            Label::Called(t, a, n) => {
                calls += 1;
                let tool = model.tools[*t as usize].clone();
                let attempt_id = flow_trace::attempt_id(&name(n), visits.get(n).copied().unwrap_or(1), 1);
                let agent = a.map(|a| model.agents[a as usize].clone());
                let key = format!("witness-call-{calls}");
                let body = events::tool_call_started(&tool, &name(n), &attempt_id, agent, key, None, payload.clone());
                push(&mut out, &format!("tool.{tool}"), body);
                push(&mut out, &format!("tool.{tool}"), events::tool_call_completed(&tool, &attempt_id, true, None, None, 0));
            }
            Label::Refused(t, a, n) => {
                let attempt_id = flow_trace::attempt_id(&name(n), visits.get(n).copied().unwrap_or(1), 1);
                let agent = a.map(|a| model.agents[a as usize].clone());
                let body = events::tool_call_refused(&model.tools[*t as usize], &name(n), &attempt_id, agent, "not allowed for this agent");
                push(&mut out, "control", body);
            }
            Label::HandedOff(a, b) | Label::DeadLettered(a, b) => {
                let accepted = matches!(label, Label::HandedOff(..));
                let transfer = model.index.handoff_on(model.workflow, &name(a), &name(b));
                if let Some(transfer) = transfer {
                    push(&mut out, &format!("node.{}", name(a)), events::handoff(transfer, payload.clone(), accepted, Vec::new()));
                    if !accepted {
                        let why = "the message was refused (a choice of the model)";
                        push(&mut out, "control", events::dead_letter(transfer, payload.clone(), why));
                    }
                }
            }
            Label::Recorded(r) => {
                // What the fields read is the outputs so far (placeholders);
                // their values are data the model does not track.
                let record = &model.records[*r as usize].0;
                if let Some((decl, owner)) = events::find_record(model.workflow, record) {
                    let gate = matches!(owner, events::RecordOwner::Gate(_));
                    let reads = decl.reads().into_iter().filter(|r| !(gate && r == "outcome"));
                    let inputs = reads.map(|r| (r.clone(), outputs.get(&r).cloned().flatten())).collect();
                    let why = "a value the model checker does not track";
                    let errors = decl.fields.keys().map(|f| (f.clone(), why.to_string())).collect();
                    push(&mut out, "control", events::recorded(record, owner, inputs, Default::default(), errors));
                }
            }
            Label::Outcome(g, o) => {
                let outcome = flow_trace::Outcome::ALL[*o as usize];
                let name = &model.gate_names[*g as usize];
                if let Some(gate) = model.workflow.gates.get(name) {
                    let evaluators = vec![EvaluatorResult { evaluator: "model".into(), outcome, reason: None, error: false }];
                    push(&mut out, &format!("gate.{name}"), events::gate_recorded(model.workflow, gate, outcome, None, evaluators));
                }
            }
            Label::Decided(s, d, p) => {
                let subject = model.subjects[*s as usize].clone();
                let by = model.principal_name(*p).to_string();
                let decision = DECISIONS[*d as usize];
                let action = model.applied_action(&subject, decision);
                if decision == flow_trace::Decision::Timeout {
                    // Asked of the subject's deciders; `control` records
                    // that no answer came in time.
                    push(&mut out, "control", events::decision_requested(model.program, &subject, Vec::new(), Vec::new(), None));
                    push(&mut out, "control", events::decision_applied(&subject, decision, &by, action));
                } else {
                    push(&mut out, "control", events::decision_requested(model.program, &subject, vec![by.clone()], vec![decision], None));
                    push(&mut out, &format!("human.{by}"), events::decision_applied(&subject, decision, &by, action));
                }
            }
            Label::Zone(scope, z) => {
                let zone_scope = &model.zone_scopes[*scope as usize];
                let from = zones.insert(*scope, *z as usize).unwrap_or(0);
                let actions = zone_scope.actions(*z);
                let (from, to) = (ZONES[from], ZONES[*z as usize]);
                push(&mut out, "control", events::zone_changed(&zone_scope.name, from, to, actions));
                // The zone's actions, as the engine records them.
                let event = flow_trace::ActionEvent::Zone(to);
                let scope = flow_trace::HandlerScope::Budget(zone_scope.name.clone());
                for action in actions {
                    push(&mut out, "control", events::action_taken(event, scope.clone(), action));
                    if action.name == flow_check::ir::ActionKind::Warn {
                        push(&mut out, "control", events::warning(format!("{event} in {scope}")));
                    }
                }
            }
            Label::Terminated(r) => {
                let reason = model.reasons.get_index(*r as usize).cloned().unwrap_or_default();
                push(&mut out, "control", events::run_terminated(&reason, model.termination_status(*r), None));
            }
            Label::Edge(a, b, via) => {
                // A `when` edge: the engine writes the guard's text.
                let guard = || {
                    let cond = model.index.out_of(model.workflow, *a as usize).find_map(|e| match &e.guard {
                        flow_check::ir::Guard::When(cond) if e.to == name(b) => Some(cond),
                        _ => None,
                    });
                    cond.map(flow_check::render::render).unwrap_or_default()
                };
                // A map's items are numbered from 1 in each of its visits.
                let item = if *via == 10 {
                    let n = map_items.entry(*a).or_default();
                    *n += 1;
                    *n
                } else {
                    0
                };
                let via = model.via(*via, guard, item);
                // A revise or replan first records what it re-runs.
                if matches!(via, Via::Revise | Via::Replan) {
                    let replan = via == Via::Replan;
                    let trigger = if replan { TriggerReason::Replan } else { TriggerReason::Revise };
                    let rerun = flow_check::rerun::rerun_into(model.workflow, replan, &name(a), &name(b));
                    push(&mut out, "control", events::rerun(trigger, &rerun));
                }
                push(&mut out, "control", events::edge_taken(&name(a), &name(b), via));
                // A delegation into `b` is recorded with the crossing.
                for t in model.workflow.transfers.iter().filter(|t| t.kind() == TransferKind::Delegate && t.to == name(b)) {
                    push(&mut out, &format!("node.{}", t.from), events::delegation(model.program, t, payload.clone(), Vec::new()));
                }
            }
            Label::Exhausted(n) => {
                push(&mut out, "control", events::budget_exhausted("run", "budget"));
                if let Some(attempt_id) = open.remove(n) {
                    let why = "the budget was exhausted (a choice of the model)";
                    push(&mut out, "control", events::attempt_failed(&name(n), &attempt_id, 1, ErrorCode::BudgetExhausted, why));
                }
            }
        }
    }
    if let Some(seq) = cycle_seq {
        push(&mut out, "control", events::run_paused(flow_trace::PauseReason::Cycle, format!("seq {seq}")));
    }
    out
}

/// The policy step of an observation, as the model names it: a
/// confirmation is asked per attempt at run time (`confirm.TOOL.ATTEMPT`)
/// and per tool in the model (`confirm.TOOL`).
pub fn step_key(obs: &Obs) -> String {
    obs.step_key()
}

/// Refinement: whether a run's policy steps (the observations of its
/// events, in order) are a path of the model — some run of the abstract
/// model makes exactly these policy steps, with any number of silent steps
/// between them. `Err(i)` names the first step no path of the model can
/// make; `finished` also requires the model to be able to end there (a
/// terminated run). At most `max_states` states are held per step; past
/// that the answer is `Ok` for what was followed (reported as `Err` only
/// on a real mismatch).
pub fn explains(model: &Model, steps: &[Obs], finished: bool, max_states: usize) -> Result<(), usize> {
    let mut out = Vec::new();
    let close = |frontier: Vec<crate::model::St>, out: &mut Vec<(Option<Label>, crate::model::St)>| {
        let mut seen: IndexSet<crate::model::St, FxBuildHasher> = IndexSet::with_hasher(FxBuildHasher);
        let mut queue: VecDeque<crate::model::St> = frontier.into();
        while let Some(s) = queue.pop_front() {
            if !seen.insert(s.clone()) || seen.len() > max_states {
                continue;
            }
            model.successors(&s, out);
            for (label, next) in out.drain(..) {
                if label.as_ref().and_then(|l| obs(model, l)).is_none() {
                    queue.push_back(next);
                }
            }
        }
        seen
    };
    let mut frontier = close(vec![model.initial()], &mut out);
    for (i, step) in steps.iter().enumerate() {
        let want = step_key(step);
        let mut next = Vec::new();
        for s in &frontier {
            model.successors(s, &mut out);
            for (label, to) in out.drain(..) {
                if label.as_ref().and_then(|l| obs(model, l)).is_some_and(|o| step_key(&o) == want) {
                    next.push(to);
                }
            }
        }
        if next.is_empty() {
            return Err(i);
        }
        frontier = close(next, &mut out);
    }
    if finished && !frontier.iter().any(|s| s.is_final()) {
        return Err(steps.len());
    }
    Ok(())
}
