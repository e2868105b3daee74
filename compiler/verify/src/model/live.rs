//! Dead-variable reduction: a counter or an output bit that no thread can
//! read any more is cleared, so states that differ only in what no future
//! step reads are one state.
//!
//! Each clearable *item* of the state (a human node's last decision, a loop's
//! or map's round, a join's arrivals, a node's visit count, a pair's hop
//! count, a node's output bits) is read by a thread at one of its *reader*
//! nodes. A thread at node `n` may later be at any node of `reach(n)`: the
//! closure of [`moves`], an over-approximation of where the model's
//! transitions take a thread or start a new one. An item is live in a state
//! when some thread's node (or the node its phase is headed for) reaches one
//! of its readers; the others are set to zero. No transition reads a
//! cleared item before writing it again, so the reduced state space has the
//! same runs, labels and verdicts (a test holds `moves` to every transition
//! the model takes, another compares verdicts with the reduction off).
//!
//! Budget zones are not cleared (every metered node reads them).

use super::{Kind, Label, Model, NodeId, Phase, St};
use flow_check::ir::ActionKind;
use flow_check::semantics::Refusal;
use flow_policy::Atom;
use petgraph::graph::{DiGraph, NodeIndex};

/// The largest `nodes × slots` (in words) for which the per-node masks are
/// built (16 MiB); past it nothing is cleared.
const MAX_WORDS: usize = 1 << 22;

/// Per node, the words of [`St::vars`] a thread there keeps.
#[derive(Debug, Default)]
pub(super) struct Liveness {
    /// Empty when the reduction is off for this model.
    keep: Vec<Box<[u32]>>,
    /// What a state without threads keeps (no item).
    none: Box<[u32]>,
}

/// A clearable part of the state and the nodes whose threads read it.
struct Item {
    slot: usize,
    mask: u32,
    readers: Vec<NodeId>,
}

impl Liveness {
    pub(super) fn new(m: &Model) -> Liveness {
        let nodes = m.nodes.len();
        let items = items(m);
        let words = items.len().div_ceil(64);
        if nodes == 0 || items.is_empty() || nodes.saturating_mul(m.slots.max(words)) > MAX_WORDS {
            return Liveness::default();
        }
        let live = live_items(&moves(m), &items);
        let mut none = vec![u32::MAX; m.slots].into_boxed_slice();
        for item in &items {
            none[item.slot] &= !item.mask;
        }
        let keep = live
            .iter()
            .map(|bits| {
                let mut k = none.clone();
                for (i, item) in items.iter().enumerate() {
                    if bits[i / 64] & (1 << (i % 64)) != 0 {
                        k[item.slot] |= item.mask;
                    }
                }
                k
            })
            .collect();
        Liveness { keep, none }
    }

    /// Clears in `s` every item no thread of `s` can read.
    pub(super) fn clear_dead(&self, s: &mut St) {
        if self.keep.is_empty() {
            return;
        }
        if s.threads.is_empty() {
            s.vars.iter_mut().zip(self.none.iter()).for_each(|(v, k)| *v &= k);
            return;
        }
        for (w, v) in s.vars.iter_mut().enumerate() {
            let mut k = 0;
            for &(n, phase) in &s.threads {
                k |= self.keep[n as usize][w];
                if let Some(e) = headed_for(phase) {
                    k |= self.keep[e as usize][w];
                }
            }
            *v &= k;
        }
    }
}

/// The node a phase is about to move its thread to, if it names one.
pub(super) fn headed_for(phase: Phase) -> Option<NodeId> {
    match phase {
        Phase::Enter(n) | Phase::Handoff(n) | Phase::Jump(n, _) | Phase::RoundEnd(n) | Phase::JoinArrive(n) => Some(n),
        _ => None,
    }
}

/// Every clearable item with its readers.
fn items(m: &Model) -> Vec<Item> {
    let nodes = m.nodes.len();
    // Who reads a node's output (and a human node's decision): the nodes
    // whose guards name it, the loops whose `until` does.
    let mut readers: Vec<Vec<NodeId>> = vec![Vec::new(); nodes];
    for (i, info) in m.nodes.iter().enumerate() {
        for r in info.edge_refs.iter().flatten() {
            readers[*r as usize].push(i as NodeId);
        }
        for r in &info.until_refs {
            readers[*r as usize].push(i as NodeId);
        }
    }
    let mut out = Vec::new();
    let word = |slot: usize, readers: Vec<NodeId>| Item { slot, mask: u32::MAX, readers };
    for (i, info) in m.nodes.iter().enumerate() {
        let me = i as NodeId;
        match info.kind {
            Kind::Human => out.push(word(info.dec_slot, readers[i].clone())),
            Kind::Loop | Kind::Map => out.push(word(info.loop_slot, vec![me])),
            Kind::Join => {
                out.push(word(info.join_slot, vec![me]));
                out.push(word(info.join_slot + 1, vec![me]));
            }
            _ => {}
        }
        if let Some((slot, _)) = info.max_visits {
            out.push(word(slot, vec![me]));
        }
    }
    let mut hops: Vec<(usize, NodeId, NodeId)> = m.hop_slots.iter().map(|(&(a, b), &(slot, _))| (slot, a.min(b), a.max(b))).collect();
    hops.sort_unstable();
    hops.dedup_by_key(|h| h.0);
    out.extend(hops.into_iter().map(|(slot, a, b)| word(slot, vec![a, b])));
    // A gate that passes on a valid output reads its sender's bits; so
    // does a transfer that refuses only an unvalidated sender.
    for g in m.gates.iter().filter(|g| g.pass_on_valid) {
        readers[g.from as usize].push(g.from);
    }
    for refusals in [&m.handoff_refusals, &m.delegation_refusals] {
        for (&(from, _), _) in refusals.iter().filter(|(_, r)| **r == Refusal::Unvalidated) {
            readers[from as usize].push(from);
        }
    }
    for (n, &bit) in m.out_bit.iter().enumerate() {
        if bit == u32::MAX {
            continue;
        }
        let (w, mask) = (bit as usize / 32, 1 << (bit % 32));
        out.push(Item { slot: m.done_base + w, mask, readers: readers[n].clone() });
        out.push(Item { slot: m.settled_base + w, mask, readers: readers[n].clone() });
    }
    out
}

/// Per node, the nodes a thread there may move to or start next: its
/// edges, branches, loop or map body, the join, loop or map it returns to,
/// its gates' targets (and a gate's replan scope when it may be decided
/// `replan`), and — from every node — the target of every action that
/// jumps (handlers, loop and zone actions; a replan without a target
/// starts over at its gate's scope or the start node).
pub(crate) fn moves(m: &Model) -> Vec<Vec<NodeId>> {
    let node = |name: &str| m.workflow.nodes.get_index_of(name).map(|i| i as NodeId);
    // A jump's target, or where a replan without one starts over.
    let target = |a: &flow_check::ir::Action, gate: Option<u16>| match a.args.first() {
        Some(x) => node(x),
        None if a.name == ActionKind::Replan => gate.and_then(|g| m.gates[g as usize].replan_scope).or(m.start),
        None => None,
    };
    let mut everywhere: Vec<NodeId> = m.sites.iter().filter_map(|s| target(&s.action, s.gate)).collect();
    let values = flow_check::ceilings::value_actions(m.program, m.workflow);
    everywhere.extend(values.into_iter().filter_map(|a| target(a, None)));
    let mut out: Vec<Vec<NodeId>> = m
        .nodes
        .iter()
        .map(|info| {
            let mut to: Vec<NodeId> = info.edges.iter().map(|(t, _)| *t).collect();
            to.extend(&info.targets);
            to.extend(info.join_of.iter().chain(&info.map_of).chain(&info.in_loop));
            to
        })
        .collect();
    for (i, g) in m.gates.iter().enumerate() {
        out[g.from as usize].push(g.to);
        // A `replan` decision without a handler starts over at its scope.
        let decided = g.outcomes.contains(&1) || m.sites.iter().any(|s| s.gate == Some(i as u16) && s.action.name == ActionKind::Decide);
        if decided && g.decisions.contains(&2) {
            out[g.from as usize].extend(g.replan_scope.or(m.start));
        }
    }
    everywhere.sort_unstable();
    everywhere.dedup();
    for to in &mut out {
        to.extend(&everywhere);
        to.sort_unstable();
        to.dedup();
    }
    out
}

/// Per node, the items (a bitset over `items`) read at some node it reaches.
fn live_items(moves: &[Vec<NodeId>], items: &[Item]) -> Vec<Vec<u64>> {
    let nodes = moves.len();
    let words = items.len().div_ceil(64);
    let mut graph: DiGraph<(), ()> = DiGraph::with_capacity(nodes, 0);
    for _ in 0..nodes {
        graph.add_node(());
    }
    for (a, to) in moves.iter().enumerate() {
        for &b in to {
            graph.add_edge(NodeIndex::new(a), NodeIndex::new(b as usize), ());
        }
    }
    let mut direct = vec![vec![0u64; words]; nodes];
    for (i, item) in items.iter().enumerate() {
        for &r in &item.readers {
            direct[r as usize][i / 64] |= 1 << (i % 64);
        }
    }
    // Components come sinks first: every successor's set is known.
    let sccs = petgraph::algo::tarjan_scc(&graph);
    let mut component = vec![0usize; nodes];
    for (c, scc) in sccs.iter().enumerate() {
        for n in scc {
            component[n.index()] = c;
        }
    }
    let mut sets: Vec<Vec<u64>> = Vec::with_capacity(sccs.len());
    for (c, scc) in sccs.iter().enumerate() {
        let mut set = vec![0u64; words];
        for n in scc {
            or_into(&mut set, &direct[n.index()]);
            for &b in &moves[n.index()] {
                let d = component[b as usize];
                if d != c {
                    or_into(&mut set, &sets[d]);
                }
            }
        }
        sets.push(set);
    }
    (0..nodes).map(|n| sets[component[n]].clone()).collect()
}

fn or_into(set: &mut [u64], other: &[u64]) {
    set.iter_mut().zip(other).for_each(|(a, b)| *a |= b);
}

/// Checks `moves`, `label_node` and the cone of `atoms` against the
/// model: explores up to `max_states` states and returns the first
/// transition that puts a thread on a node, or emits a label at a node, not
/// reachable (by `moves`) from the threads before it, or emits a label an
/// atom holds of outside the nodes [`quiet`] watches, if any.
pub fn unexpected_move(m: &Model, atoms: &[Atom], max_states: usize) -> Option<String> {
    let moves = moves(m);
    let marked = marked(m, atoms);
    let reach = |from: &[NodeId]| {
        let mut seen = vec![false; moves.len()];
        let mut stack: Vec<NodeId> = from.to_vec();
        while let Some(n) = stack.pop() {
            if !std::mem::replace(&mut seen[n as usize], true) {
                stack.extend(&moves[n as usize]);
            }
        }
        seen
    };
    let mut visited: indexmap::IndexSet<St, rustc_hash::FxBuildHasher> = indexmap::IndexSet::default();
    visited.insert(m.initial());
    let mut succ = Vec::new();
    let mut i = 0;
    while i < visited.len() && visited.len() < max_states {
        let st = visited.get_index(i).cloned().expect("index in range");
        m.successors(&st, &mut succ);
        let seen = reach(&places(&st).collect::<Vec<_>>());
        for (label, next) in succ.drain(..) {
            if let Some(n) = places(&next).find(|&n| !seen[n as usize]) {
                return Some(format!("{:?} -> {:?}: `{}` is not reachable by `moves`", st.threads, next.threads, m.node_name(n)));
            }
            if let Some(n) = label.as_ref().and_then(|l| label_node(m, l)).filter(|&n| !seen[n as usize]) {
                return Some(format!("{:?} -> {label:?}: emitted at `{}`, not reachable by `moves`", st.threads, m.node_name(n)));
            }
            // Every label an atom holds of is emitted at a marked node.
            let obs = label.as_ref().and_then(|l| crate::mc::obs(m, l));
            if let (Some(marked), Some(obs)) = (&marked, obs) {
                let at = label.as_ref().and_then(|l| label_node(m, l));
                if atoms.iter().any(|a| a.holds(&obs)) && !at.is_some_and(|n| marked.contains(&n)) {
                    return Some(format!("{label:?} makes an atom hold outside the policy's cone"));
                }
            }
            visited.insert(next);
        }
        i += 1;
    }
    None
}

/// The node where a label is emitted: the thread that emits it is at that
/// node or headed for it (a loop's failure is emitted on the way back to the
/// loop). `None` for labels that may be emitted anywhere (decisions, zones,
/// terminations) or are not policy steps.
pub(crate) fn label_node(m: &Model, label: &Label) -> Option<NodeId> {
    match *label {
        Label::Started(n)
        | Label::Completed(n)
        | Label::Settled(n, _)
        | Label::Failed(n)
        | Label::FailedUnsent(n)
        | Label::FailedInvalid(n)
        | Label::Called(_, _, n)
        | Label::Refused(_, _, n)
        | Label::HandedOff(n, _)
        | Label::DeadLettered(n, _) => Some(n),
        Label::Outcome(g, _) => m.gates.get(g as usize).map(|g| g.from),
        Label::Recorded(r) => m.records.get(r as usize).map(|r| r.1),
        _ => None,
    }
}

/// Per node: whether a thread there can still reach a node of `marked`.
pub(crate) fn reaches(m: &Model, marked: &[NodeId]) -> Vec<bool> {
    let item = Item { slot: 0, mask: 0, readers: marked.to_vec() };
    live_items(&moves(m), std::slice::from_ref(&item)).into_iter().map(|bits| bits[0] & 1 != 0).collect()
}

/// The nodes of a state's threads, and the nodes their phases head for.
pub(crate) fn places(st: &St) -> impl Iterator<Item = NodeId> + '_ {
    st.threads.iter().flat_map(|&(n, p)| std::iter::once(n).chain(headed_for(p)))
}

/// A policy's cone of influence: per node, whether no thread there can
/// still emit a label one of `atoms` holds of. `None` when an atom may hold
/// anywhere (decisions, approvals, zones and terminations are not tied to
/// a node).
pub fn quiet(m: &Model, atoms: &[Atom]) -> Option<Vec<bool>> {
    Some(reaches(m, &marked(m, atoms)?).into_iter().map(|r| !r).collect())
}

/// The nodes where a label some atom holds of may be emitted (see
/// [`label_node`]), or `None` when such a label is not tied to a node.
fn marked(m: &Model, atoms: &[Atom]) -> Option<Vec<NodeId>> {
    let node = |x: &str| m.workflow.nodes.get_index_of(x).map(|i| i as NodeId);
    let mut marked = Vec::new();
    for atom in atoms {
        match atom {
            Atom::Started(x) | Atom::Completed(x) | Atom::Failed(x) | Atom::HandedOff { from: x, .. } => marked.extend(node(x)),
            Atom::Outcome { gate, .. } => {
                let from = m.gate_names.iter().zip(&m.gates).filter(|(name, _)| *name == gate).map(|(_, g)| g.from);
                marked.extend(from);
            }
            Atom::Called { tool, .. } | Atom::Refused { tool, .. } => {
                let Some(t) = m.tools.get_index_of(tool.as_str()) else { continue };
                let calls = |info: &super::NodeInfo| {
                    info.tools.iter().any(|u| u.tool as usize == t) || info.tool.is_some_and(|(u, _)| u as usize == t)
                };
                marked.extend((0..m.nodes.len()).filter(|&i| calls(&m.nodes[i])).map(|i| i as NodeId));
            }
            Atom::Recorded(record) => marked.extend(m.records.iter().filter(|(name, _)| name == record).map(|(_, at)| *at)),
            Atom::Decided { .. } | Atom::Approved(_) | Atom::Zone(_) | Atom::Terminated(_) => return None,
        }
    }
    Some(marked)
}
