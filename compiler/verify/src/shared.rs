//! One exploration for all of a workflow's policies: the workflow's states
//! in product with every policy's automaton at once, so the states the
//! policies share are built, hashed and stored once.
//!
//! A policy leaves the product (its component becomes `RETIRED`, so states
//! that differ only in it merge) once it is decided: violated, or true
//! whatever follows, or stable and quiet for the rest of the run (its cone
//! of influence, as in `mc::check`). Breadth-first order is kept, so each
//! violation found is a shortest one, as alone. A policy's `states` are
//! those the shared exploration had built when it was decided (all of them
//! for one that holds). Past `max_states` the
//! policies not yet decided are `Unknown`, and the caller checks each of
//! them alone (within the same bound), so sharing never decides less.

use crate::mc::{lasso_through, obs, path, Outcome, Verdict};
use crate::model::{places, Label, Model, St};
use crate::Cancel;
use flow_policy::{Automaton, Mask};
use indexmap::IndexSet;
use rustc_hash::{FxBuildHasher, FxHashMap};

/// A component whose policy no longer needs the product.
const RETIRED: u32 = u32::MAX;

/// The most policies one exploration carries: their residuals are stored
/// inline in each product state (no allocation per state).
const GROUP: usize = 8;

/// The residuals of a group's policies in one product state.
type Qs = [u32; GROUP];

/// Checks every automaton against the model, in one exploration per
/// group of [`GROUP`].
pub fn check_all(model: &Model, automata: &mut [Automaton], max_states: usize, cancel: &Cancel) -> Vec<Outcome> {
    let mut out = Vec::with_capacity(automata.len());
    for group in automata.chunks_mut(GROUP) {
        out.extend(check_group(model, group, max_states, cancel));
    }
    out
}

/// Checks at most [`GROUP`] automata against the model in one exploration.
fn check_group(model: &Model, automata: &mut [Automaton], max_states: usize, cancel: &Cancel) -> Vec<Outcome> {
    let n = automata.len();
    let mut verdicts: Vec<Option<Verdict>> = vec![None; n];
    // How many states had been explored when each policy was decided.
    let mut decided_at: Vec<Option<usize>> = vec![None; n];
    let quiet: Vec<Option<Vec<bool>>> =
        automata.iter().map(|a| if model.cone { crate::model::quiet(model, a.atoms()) } else { None }).collect();
    let mut stable: Vec<FxHashMap<u32, bool>> = vec![FxHashMap::default(); n];
    let mut masks: FxHashMap<Label, Box<[Option<Mask>]>> = FxHashMap::default();
    let mut visited: IndexSet<(St, Qs), FxBuildHasher> = IndexSet::with_hasher(FxBuildHasher);
    let mut parent: Vec<(u32, Option<Label>)> = Vec::new();
    let mut edges: Vec<(u32, u32, Option<Label>)> = Vec::new();
    let lasso = !model.finite_runs;
    let mut q0: Qs = [RETIRED; GROUP];
    for (q, a) in q0.iter_mut().zip(automata.iter()) {
        *q = if Automaton::is_true(a.init()) { RETIRED } else { a.init() };
    }
    visited.insert((model.initial(), q0));
    parent.push((u32::MAX, None));
    let mut succ = Vec::new();
    let mut idx = 0usize;
    while idx < visited.len() {
        if idx.is_multiple_of(4096) && cancel.is_cancelled() {
            return vec![Outcome { verdict: Verdict::Cancelled, states: visited.len() }; n];
        }
        let (st, mut qs) = visited.get_index(idx).cloned().expect("index in range");
        for i in 0..n {
            if qs[i] == RETIRED {
                continue;
            }
            let quiet_here = quiet[i].as_ref().is_some_and(|quiet| places(&st).all(|p| quiet[p as usize]));
            let a = &mut automata[i];
            let q = qs[i];
            if verdicts[i].is_some() || (quiet_here && *stable[i].entry(q).or_insert_with(|| a.accepts_end(q) && a.step(q, 0) == q)) {
                qs[i] = RETIRED;
            }
        }
        if qs.iter().all(|&q| q == RETIRED) {
            idx += 1;
            continue;
        }
        model.steps_from(&st, &mut succ);
        if succ.is_empty() {
            // The run ends here: each residual must accept the end.
            for (i, a) in automata.iter_mut().enumerate() {
                if qs[i] != RETIRED && verdicts[i].is_none() && !a.accepts_end(qs[i]) {
                    let mut cx = path(&parent, idx);
                    cx.owed = Some(a.residual(qs[i]));
                    verdicts[i] = Some(Verdict::Violated(cx));
                    decided_at[i] = Some(visited.len());
                }
            }
        }
        for (label, next) in succ.drain(..) {
            let stepped: Option<&[Option<Mask>]> =
                label.map(|l| &**masks.entry(l).or_insert_with(|| automata.iter().map(|a| obs(model, &l).map(|o| a.mask(&o))).collect()));
            let mut q2 = qs;
            for i in 0..n {
                if q2[i] == RETIRED {
                    continue;
                }
                if let Some(Some(mask)) = stepped.map(|m| m[i]) {
                    q2[i] = automata[i].step(q2[i], mask);
                }
                if Automaton::is_false(q2[i]) && verdicts[i].is_none() {
                    let mut cx = path(&parent, idx);
                    cx.labels.extend(label);
                    verdicts[i] = Some(Verdict::Violated(cx));
                    decided_at[i] = Some(visited.len());
                }
                if verdicts[i].is_some() || Automaton::is_true(q2[i]) || Automaton::is_false(q2[i]) {
                    q2[i] = RETIRED;
                }
            }
            if q2.iter().all(|&q| q == RETIRED) {
                continue;
            }
            let (j, new) = visited.insert_full((next, q2));
            if new {
                parent.push((idx as u32, label));
                if visited.len() > max_states {
                    let states = visited.len();
                    let outcomes = verdicts.into_iter().zip(decided_at);
                    return outcomes
                        .map(|(v, at)| Outcome { verdict: v.unwrap_or(Verdict::Unknown(max_states)), states: at.unwrap_or(states) })
                        .collect();
                }
            }
            if lasso {
                edges.push((idx as u32, j as u32, label));
            }
        }
        idx += 1;
    }
    let states = visited.len();
    let mut out = Vec::with_capacity(n);
    for (i, verdict) in verdicts.into_iter().enumerate() {
        let verdict = match verdict {
            Some(v) => v,
            None if lasso => {
                let a = &mut automata[i];
                let open: Vec<bool> = visited.iter().map(|(st, qs)| !st.is_final() && qs[i] != RETIRED && !a.accepts_end(qs[i])).collect();
                match lasso_through(&open, &parent, &edges) {
                    Some((mut cx, entry)) => {
                        cx.owed = visited.get_index(entry).map(|(_, qs)| a.residual(qs[i]));
                        Verdict::Violated(cx)
                    }
                    None => Verdict::Holds,
                }
            }
            None => Verdict::Holds,
        };
        out.push(Outcome { verdict, states: decided_at[i].unwrap_or(states) });
    }
    out
}
