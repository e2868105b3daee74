//! Task state machines: well-formed machines, legal transitions along the
//! workflow's paths.

use crate::flowgraph::{loc_span, FlowGraph};
use flow_check::ir::{Machine, Program};
use flow_diagnostics::{codes, Diagnostic, Label};
use indexmap::{IndexMap, IndexSet};
use petgraph::graph::NodeIndex;
use petgraph::visit::EdgeRef;
use petgraph::Direction;
use std::collections::VecDeque;

/// E0901 and E0902.
pub fn check_machine(machine: &Machine, out: &mut Vec<Diagnostic>) {
    let (file, span) = loc_span(machine.loc);
    let mut reached: IndexSet<&str> = IndexSet::from([machine.initial.as_str()]);
    let mut queue = VecDeque::from([machine.initial.as_str()]);
    while let Some(s) = queue.pop_front() {
        for (a, b) in &machine.transitions {
            if a == s && reached.insert(b) {
                queue.push_back(b);
            }
        }
    }
    for state in &machine.states {
        if !reached.contains(state.as_str()) {
            out.push(
                Diagnostic::new(
                    codes::UNREACHABLE_STATE,
                    file,
                    span,
                    format!("state `{state}` of machine `{}` cannot be reached from `{}`", machine.name, machine.initial),
                )
                .with_primary_message("machine declared here"),
            );
        }
    }
    if machine.terminal.is_empty() {
        out.push(
            Diagnostic::new(codes::STUCK_STATE, file, span, format!("machine `{}` declares no terminal state", machine.name))
                .with_help("add `terminal: [STATE, …]`"),
        );
        return;
    }
    for state in &machine.states {
        let exits = machine.transitions.iter().any(|(a, _)| a == state);
        let terminal = machine.terminal.contains(state);
        if terminal && exits {
            out.push(Diagnostic::new(
                codes::STUCK_STATE,
                file,
                span,
                format!("terminal state `{state}` of machine `{}` has transitions out of it", machine.name),
            ));
        } else if !terminal && !exits {
            out.push(
                Diagnostic::new(
                    codes::STUCK_STATE,
                    file,
                    span,
                    format!("state `{state}` of machine `{}` is not terminal but has no transition out", machine.name),
                )
                .with_help(format!("add a transition from `{state}`, or list it in `terminal`")),
            );
        }
    }
}

fn node_state(flow: &FlowGraph<'_>, n: NodeIndex) -> Option<(String, String)> {
    flow.node(n).state().map(|(machine, state)| (machine.to_string(), state.to_string()))
}

/// E0903 and E0904: states set along paths follow the machine.
pub fn check_workflow(flow: &FlowGraph<'_>, program: &Program, out: &mut Vec<Diagnostic>) {
    let workflow = flow.workflow;
    let declared = workflow.machine().map(str::to_string);
    let mut any_state = false;
    for n in flow.graph.node_indices() {
        let Some((machine, _)) = node_state(flow, n) else { continue };
        any_state = true;
        if declared.as_deref() != Some(machine.as_str()) {
            let (file, span) = loc_span(flow.node(n).loc);
            out.push(
                Diagnostic::new(
                    codes::MACHINE_MISMATCH,
                    file,
                    span,
                    match &declared {
                        Some(d) => format!("`{}` sets a state of `{machine}`, but workflow `{}` tracks `{d}`", flow.name(n), workflow.name),
                        None => format!(
                            "`{}` sets a state of `{machine}`, but workflow `{}` declares no `machine`",
                            flow.name(n),
                            workflow.name
                        ),
                    },
                )
                .with_help(format!("add `machine: {machine}` to the workflow")),
            );
        }
    }
    let Some(machine) = declared.and_then(|d| program.machines.get(&d)) else { return };
    if !any_state {
        return;
    }
    // Search (node, current state) pairs from the start in the initial state.
    let Some(start) = flow.start else { return };
    type Key = (NodeIndex, String);
    let mut parent: IndexMap<Key, Option<Key>> = IndexMap::new();
    let mut queue = VecDeque::new();
    let first = (start, machine.initial.clone());
    parent.insert(first.clone(), None);
    queue.push_back(first);
    let legal = |a: &str, b: &str| a == b || machine.transitions.iter().any(|(x, y)| x == a && y == b);
    let mut reported: IndexSet<(String, String)> = IndexSet::new();
    while let Some((n, current)) = queue.pop_front() {
        let mut state = current.clone();
        if let Some((m, s)) = node_state(flow, n) {
            if m == machine.name {
                if !legal(&current, &s) {
                    if reported.insert((current.clone(), s.clone())) {
                        let mut path = vec![n];
                        let mut key = parent[&(n, current.clone())].clone();
                        while let Some(k) = key {
                            path.push(k.0);
                            key = parent[&k].clone();
                        }
                        path.reverse();
                        let node = flow.node(n);
                        let (file, span) = loc_span(node.loc);
                        let (mf, ms) = loc_span(machine.loc);
                        out.push(
                            Diagnostic::new(
                                codes::ILLEGAL_TRANSITION,
                                file,
                                span,
                                format!(
                                    "`{}` moves the task from `{current}` to `{s}`, which machine `{}` does not allow",
                                    node.name, machine.name
                                ),
                            )
                            .with_primary_message(format!("{current} -> {s}"))
                            .with_label(Label::secondary(mf, ms, "the machine's transitions"))
                            .with_witness(flow.witness(&path)),
                        );
                    }
                    continue;
                }
                state = s;
            }
        }
        for edge in flow.graph.edges_directed(n, Direction::Outgoing) {
            let key = (edge.target(), state.clone());
            if !parent.contains_key(&key) {
                parent.insert(key.clone(), Some((n, current.clone())));
                queue.push_back(key);
            }
        }
    }
}
