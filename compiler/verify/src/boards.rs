//! Blackboards (reference §5.8): who appends and who reads, whether what
//! is appended is an entry, and whether an append's requirement can be
//! met. Each finding about a node carries a path to it.

use crate::flowgraph::{loc_span, FlowGraph};
use crate::types::Types;
use flow_check::ir::{Decl, Node, Program};
use flow_check::semantics::{board_actors, board_allows, board_deciders, board_requires, BoardRequires};
use flow_diagnostics::{codes, Diagnostic, Label};

/// E0707, E0708, E0709 and E0710 over one workflow.
pub fn check(flow: &FlowGraph<'_>, types: &Types<'_>, out: &mut Vec<Diagnostic>) {
    let program = types.program();
    if !flow.workflow.nodes.values().any(|n| !n.common.writes.is_empty() || !n.common.reads.is_empty()) {
        return;
    }
    let parents = flow.bfs(|_, _, _| false);
    let witness =
        |node: &Node| flow.index.get(&node.name).filter(|i| parents.contains_key(i)).map(|&i| flow.witness(&flow.path_to(&parents, i)));
    for node in flow.workflow.nodes.values() {
        let actors = board_actors(node);
        for board in boards(program, &node.common.writes) {
            let mut found = Vec::new();
            if !board_allows(program, board.writers().as_deref(), &actors) {
                found.push(not_permitted(node, board, &actors, "writers", codes::BOARD_WRITE));
            }
            if let Some(d) = entry_mismatch(node, board, types) {
                found.push(d);
            }
            if let Some(d) = unappendable(flow, program, node, board) {
                found.push(d);
            }
            for d in found {
                out.push(match witness(node) {
                    Some(w) => d.with_witness(w),
                    None => d,
                });
            }
        }
        for board in boards(program, &node.common.reads) {
            if !board_allows(program, board.readers().as_deref(), &actors) {
                let d = not_permitted(node, board, &actors, "readers", codes::BOARD_READ);
                out.push(match witness(node) {
                    Some(w) => d.with_witness(w),
                    None => d,
                });
            }
        }
    }
}

fn boards<'p>(program: &'p Program, names: &'p [String]) -> impl Iterator<Item = &'p Decl> + 'p {
    names.iter().filter_map(|b| program.decls.get(b))
}

fn not_permitted(node: &Node, board: &Decl, actors: &[String], list: &str, code: flow_diagnostics::Code) -> Diagnostic {
    let (file, span) = loc_span(node.loc);
    let (bf, bs) = loc_span(board.loc);
    let verb = if list == "writers" { "append to" } else { "read" };
    let who = match actors {
        [] => format!("`{}` has nobody acting for it (a {} node)", node.name, node.kind()),
        _ => format!("`{}` acts as {}", node.name, actors.iter().map(|a| format!("`{a}`")).collect::<Vec<_>>().join(", ")),
    };
    Diagnostic::new(code, file, span, format!("`{}` may not {verb} blackboard `{}`", node.name, board.name))
        .with_primary_message(format!("not among its {list}"))
        .with_label(Label::secondary(bf, bs, format!("declares its {list}")))
        .with_note(who)
        .with_help(format!("add who acts for `{}` to `{list}` of `{}`", node.name, board.name))
}

fn entry_mismatch(node: &Node, board: &Decl, types: &Types<'_>) -> Option<Diagnostic> {
    let entry = board.entry_type()?;
    let mismatch = types.mismatch(&node.output, entry, "$", 0)?;
    let (file, span) = loc_span(node.loc);
    let (bf, bs) = loc_span(board.loc);
    Some(
        Diagnostic::new(
            codes::BOARD_ENTRY,
            file,
            span,
            format!("`{}`'s output is not an entry of blackboard `{}`: {}", node.name, board.name, mismatch.describe()),
        )
        .with_primary_message(format!("output {}", node.output))
        .with_label(Label::secondary(bf, bs, format!("entry {entry}"))),
    )
}

fn unappendable(flow: &FlowGraph<'_>, program: &Program, node: &Node, board: &Decl) -> Option<Diagnostic> {
    let (file, span) = loc_span(node.loc);
    let (bf, bs) = loc_span(board.loc);
    let base = |why: String| {
        Diagnostic::new(codes::BOARD_UNAPPENDABLE, file, span, format!("`{}` can never append to blackboard `{}`", node.name, board.name))
            .with_primary_message(why)
            .with_label(Label::secondary(bf, bs, "declares what an append requires"))
    };
    match board_requires(board) {
        BoardRequires::Approval if board_deciders(program, flow.workflow, board).is_empty() => Some(
            base("nobody can approve the append".into())
                .with_help("list a principal among the blackboard's `writers`, or set the workflow's `escalate_to`"),
        ),
        BoardRequires::GatePass if !flow.workflow.gates.values().any(|g| g.from == node.name) => Some(
            base("no gate on an edge out of it".into())
                .with_note("under `requires: gate_pass` an entry is appended when the gate on the edge its writer takes records PASS")
                .with_help(format!("declare a gate on an edge `{} -> …`", node.name)),
        ),
        _ => None,
    }
}
