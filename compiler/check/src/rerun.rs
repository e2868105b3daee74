//! What a `revise` or a `replan` re-runs (reference §6.3), read by the
//! engine (which node it restarts, what it records), the model checker
//! (where the jump lands) and trace check (what the record must say).
//!
//! A re-run has a *scope* — `[node]` for `revise(node)` and
//! `replan(node)`, the gate's `replan_scope` for a bare `replan` at a gate
//! (else `[start]`: the whole workflow) — and starts at the scope's
//! *entry*: the first listed node from which every other node of the scope
//! is reached. Everything reached from the entry depends on what it makes,
//! so those are the nodes whose outputs the re-run supersedes: the scope
//! and all that depends on it. Nothing else re-runs, and every other
//! node's output stays as it was. A scope with no entry (two parts of the
//! graph that do not lead to one another) is refused by the checker
//! (E0116).

use crate::ir::{Action, ActionKind, Gate, NameMap, NodeKind, Workflow};
use indexmap::IndexSet;

/// One re-run: the scope it names, the node it starts at, and the nodes
/// whose outputs it supersedes (in the workflow's node order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rerun {
    pub scope: Vec<String>,
    pub entry: String,
    pub nodes: Vec<String>,
}

/// The nodes each node leads to: its edges' targets, a fan-out's branches,
/// a loop's round members, a map's item node, and the join, loop or map a
/// listed branch, member or item node gives its output to.
fn successors(workflow: &Workflow) -> NameMap<Vec<&str>> {
    let mut next: NameMap<Vec<&str>> = NameMap::default();
    for edge in &workflow.edges {
        next.entry(edge.from.clone()).or_default().push(&edge.to);
    }
    for node in workflow.nodes.values() {
        let listed = match node.kind() {
            NodeKind::Parallel | NodeKind::Loop => &node.target[..],
            NodeKind::Map => &node.target[..node.target.len().min(1)],
            NodeKind::Join => {
                for branch in &node.target {
                    next.entry(branch.clone()).or_default().push(&node.name);
                }
                continue;
            }
            _ => continue,
        };
        for target in listed {
            next.entry(node.name.clone()).or_default().push(target);
            if node.kind() != NodeKind::Parallel {
                next.entry(target.clone()).or_default().push(&node.name);
            }
        }
    }
    next
}

/// `from` and every node reached from it.
fn reached<'w>(next: &NameMap<Vec<&'w str>>, from: &'w str) -> IndexSet<&'w str> {
    let mut seen = IndexSet::new();
    let mut stack = vec![from];
    while let Some(n) = stack.pop() {
        if seen.insert(n) {
            stack.extend(next.get(n).into_iter().flatten().copied());
        }
    }
    seen
}

/// The entry of `scope`: the first listed node from which every other is
/// reached (`None`: the scope is empty or has none).
pub fn scope_entry<'s>(workflow: &Workflow, scope: &'s [String]) -> Option<&'s str> {
    let next = successors(workflow);
    scope.iter().map(String::as_str).find(|&entry| {
        let seen = reached(&next, entry);
        scope.iter().all(|n| seen.contains(n.as_str()))
    })
}

/// The nodes a re-run starting at `entry` supersedes: `entry` and every
/// node reached from it, in the workflow's node order.
pub fn superseded(workflow: &Workflow, entry: &str) -> Vec<String> {
    let next = successors(workflow);
    let seen = reached(&next, entry);
    workflow.nodes.keys().filter(|n| seen.contains(n.as_str())).cloned().collect()
}

/// The scope a `revise`/`replan` action names: its argument, else (revise)
/// the node the handler is on, else (replan) the gate's `replan_scope`,
/// else the workflow's start.
pub fn scope_of(workflow: &Workflow, action: &Action, at: Option<&str>, gate: Option<&Gate>) -> Vec<String> {
    if let Some(arg) = action.arg() {
        return vec![arg.to_string()];
    }
    match action.name {
        ActionKind::Revise => at.map(|n| vec![n.to_string()]).unwrap_or_default(),
        ActionKind::Replan => {
            let scope = gate.map(Gate::replan_scope).unwrap_or_default();
            if scope.is_empty() {
                workflow.start().map(|s| vec![s.to_string()]).unwrap_or_default()
            } else {
                scope
            }
        }
        _ => Vec::new(),
    }
}

/// What a `revise` or `replan` action re-runs (`None`: another action,
/// or one with nothing to re-run). A scope the checker refused (no entry)
/// starts at its first node.
pub fn rerun(workflow: &Workflow, action: &Action, at: Option<&str>, gate: Option<&Gate>) -> Option<Rerun> {
    if !matches!(action.name, ActionKind::Revise | ActionKind::Replan) {
        return None;
    }
    let scope = scope_of(workflow, action, at, gate);
    let entry = scope_entry(workflow, &scope).or(scope.first().map(String::as_str))?.to_string();
    let nodes = superseded(workflow, &entry);
    Some(Rerun { scope, entry, nodes })
}

/// The node a bare `replan` at `gate` (or outside any gate) starts at (as
/// [`rerun`] finds it, without listing what it supersedes; a one-node
/// scope is its own entry, found without a search).
pub fn replan_entry(workflow: &Workflow, gate: Option<&Gate>) -> Option<String> {
    let scope = scope_of(workflow, &Action::bare(ActionKind::Replan), None, gate);
    match scope.as_slice() {
        [] => None,
        [only] => Some(only.clone()),
        _ => scope_entry(workflow, &scope).or(scope.first().map(String::as_str)).map(str::to_string),
    }
}

/// The re-run a `revise` (`replan: false`) or `replan` edge from `from`
/// to `entry` makes, as a witness writes it: a replan's scope is the
/// replan scope of a gate on `from` that starts at `entry`, else `[entry]`
/// (the start, or a `replan(entry)` target).
pub fn rerun_into(workflow: &Workflow, replan: bool, from: &str, entry: &str) -> Rerun {
    let gated = || {
        workflow.gates.values().find_map(|g| {
            let scope = g.replan_scope();
            (g.from == from && !scope.is_empty() && replan_entry(workflow, Some(g)).as_deref() == Some(entry)).then_some(scope)
        })
    };
    let scope = if replan { gated() } else { None }.unwrap_or_else(|| vec![entry.to_string()]);
    Rerun { scope, entry: entry.to_string(), nodes: superseded(workflow, entry) }
}

/// The nodes a node's earlier outputs come from when it runs again: those
/// with an edge into it, the fan-out that lists it, and the loop or map
/// it is a member or item node of (in the workflow's node order).
pub fn depends_on(workflow: &Workflow, node: &str) -> Vec<String> {
    let next = successors(workflow);
    workflow.nodes.keys().filter(|n| n.as_str() != node && next.get(n.as_str()).is_some_and(|to| to.contains(&node))).cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{check_program, NoFiles};
    use flow_diagnostics::SourceDb;

    /// research -> outline -> write -> review, review back to write or
    /// research, and a side branch `notes` off research that nothing after
    /// it reads.
    const SOURCE: &str = r#"
provider local: scripted { script: "s.yaml" }
agent a { provider: local }
workflow w {
  start: research
  node research: agent a { output: string }
  node notes: agent a { output: string }
  node outline: agent a { output: string }
  node write: agent a { output: string }
  node review: agent a { output: string }
  node done: end ok
  research -> outline
  research -> notes
  outline -> write
  write -> review
  review -> done when review == "ok"
  review -> write else
  gate g: review -> done { evaluate: [predicate(true)], replan_scope: [write, outline] }
  gate h: write -> review { evaluate: [predicate(true)] }
}
"#;

    fn workflow() -> crate::ir::Workflow {
        let mut db = SourceDb::new();
        let root = db.add("w.flow", SOURCE.to_string());
        let checked = check_program(&mut db, root, &NoFiles);
        let errors: Vec<_> = checked.diagnostics.iter().filter(|d| d.is_error()).map(|d| d.message.clone()).collect();
        assert!(errors.is_empty(), "{errors:?}");
        checked.program.workflows["w"].clone()
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_scope_starts_at_the_node_that_leads_to_the_rest_whatever_the_order() {
        let wf = workflow();
        assert_eq!(scope_entry(&wf, &names(&["write", "outline"])), Some("outline"));
        assert_eq!(scope_entry(&wf, &names(&["outline", "write"])), Some("outline"));
        // write and review reach each other: the first listed.
        assert_eq!(scope_entry(&wf, &names(&["review", "write"])), Some("review"));
        // Two parts that do not lead to one another have no entry.
        assert_eq!(scope_entry(&wf, &names(&["notes", "outline"])), None);
        assert_eq!(scope_entry(&wf, &[]), None);
    }

    #[test]
    fn a_rerun_supersedes_its_scope_and_what_depends_on_it_only() {
        let wf = workflow();
        let replan = rerun(&wf, &Action::bare(ActionKind::Replan), Some("review"), wf.gates.get("g")).unwrap();
        assert_eq!(replan.scope, names(&["write", "outline"]));
        assert_eq!(replan.entry, "outline");
        // research and notes keep their outputs.
        assert_eq!(replan.nodes, names(&["outline", "write", "review", "done"]));
        // A bare replan outside a gate with a scope: the whole workflow.
        let whole = rerun(&wf, &Action::bare(ActionKind::Replan), Some("review"), wf.gates.get("h")).unwrap();
        assert_eq!((whole.scope, whole.entry.as_str()), (names(&["research"]), "research"));
        assert_eq!(whole.nodes.len(), wf.nodes.len());
        // revise: the node it is on, else its argument.
        let revise = rerun(&wf, &Action::bare(ActionKind::Revise), Some("write"), None).unwrap();
        assert_eq!((revise.entry.as_str(), revise.nodes), ("write", names(&["write", "review", "done"])));
        let named = Action { name: ActionKind::Replan, args: vec!["notes".into()] };
        assert_eq!(rerun(&wf, &named, Some("review"), None).unwrap().nodes, names(&["notes"]));
        assert_eq!(rerun(&wf, &Action::bare(ActionKind::Goto), Some("review"), None), None);
        assert_eq!(replan_entry(&wf, wf.gates.get("g")).as_deref(), Some("outline"));
    }

    #[test]
    fn a_node_depends_on_the_nodes_that_lead_into_it() {
        let wf = workflow();
        assert_eq!(depends_on(&wf, "write"), names(&["outline", "review"]));
        assert_eq!(depends_on(&wf, "research"), Vec::<String>::new());
    }
}
