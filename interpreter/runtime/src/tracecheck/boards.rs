//! Blackboards (T070): every append is of a completion of a node that
//! writes the blackboard, by a writer, after what the blackboard requires,
//! numbered in order; every read is by a running reader, of every entry so
//! far.

use super::*;
use flow_check::semantics::{board_actors, board_allows, board_of_subject, board_requires, BoardRequires};

impl<'a> Checker<'a> {
    /// What an event means for the blackboards (after its own checks).
    pub(super) fn board_event(&mut self, seq: u64, body: &Body) {
        match body {
            Body::NodeCompleted { node, status, output, .. } => self.board_completion(node, *status, output.as_ref()),
            Body::GateRecorded { from, outcome: Outcome::Pass, .. } => self.board_gate_passed(from),
            Body::DecisionApplied { subject, decision, by, .. } => self.board_decided(subject, *decision, by),
            Body::BlackboardAppended { blackboard, node, entry, entries, approved_by, .. } => {
                self.board_appended(seq, blackboard, node, entry, *entries, approved_by.as_deref())
            }
            Body::BlackboardRead { blackboard, node, entries, .. } => self.board_read(seq, blackboard, node, *entries),
            _ => {}
        }
    }

    /// A node completed: each blackboard it writes may take its output.
    pub(super) fn board_completion(&mut self, node: &str, status: NodeStatus, output: Option<&ArtifactRef>) {
        let Some(plan) = &self.plan else { return };
        let (Some(n), Some(output), NodeStatus::Completed) = (plan.node(node), output, status) else { return };
        for board in &n.common.writes {
            let fresh = Appendable { digest: output.digest.clone(), ..Appendable::default() };
            self.appendable.insert((board.clone(), node.to_string()), fresh);
        }
    }

    /// A gate from `node` passed: its `requires: gate_pass` appends may go.
    pub(super) fn board_gate_passed(&mut self, node: &str) {
        for ((_, n), pending) in self.appendable.iter_mut() {
            if n == node {
                pending.passed = true;
            }
        }
    }

    /// A decision on an append: an approval lets it go.
    pub(super) fn board_decided(&mut self, subject: &str, decision: flow_trace::Decision, by: &str) {
        let Some((board, node)) = board_of_subject(subject) else { return };
        if let Some(pending) = self.appendable.get_mut(&(board.to_string(), node.to_string())) {
            pending.approved_by = (decision == flow_trace::Decision::Approve).then(|| by.to_string());
        }
    }

    pub(super) fn board_appended(&mut self, seq: u64, board: &str, node: &str, entry: &ArtifactRef, entries: u32, by: Option<&str>) {
        let Some(plan) = &self.plan else { return };
        let mut why = Vec::new();
        let decl = plan.program.decls.get(board).filter(|d| d.kind == Kind::Blackboard);
        let n = plan.node(node);
        match (decl, n) {
            (None, _) => why.push(format!("the plan declares no blackboard `{board}`")),
            (_, None) => why.push(format!("`{node}` is not a node of workflow `{}`", plan.wf.name)),
            (Some(decl), Some(n)) => {
                if !n.common.writes.iter().any(|b| b == board) {
                    why.push(format!("`{node}` does not write blackboard `{board}`"));
                } else if !board_allows(plan.program, decl.writers().as_deref(), &board_actors(n)) {
                    why.push(format!("`{node}` is not among the writers of `{board}`"));
                }
                match self.appendable.remove(&(board.to_string(), node.to_string())) {
                    None => why.push(format!("no completion of `{node}` is left to append to `{board}`")),
                    Some(pending) => {
                        if pending.digest != entry.digest {
                            why.push(format!("the entry is not `{node}`'s output ({})", pending.digest));
                        }
                        match board_requires(decl) {
                            BoardRequires::Approval if pending.approved_by.is_none() => {
                                why.push(format!("`{board}` requires an approval, and none approved this append"))
                            }
                            BoardRequires::Approval if pending.approved_by.as_deref() != by => why.push(format!(
                                "approved by `{}`, recorded as approved by `{}`",
                                pending.approved_by.unwrap_or_default(),
                                by.unwrap_or("nobody")
                            )),
                            BoardRequires::GatePass if !pending.passed => {
                                why.push(format!("`{board}` requires a gate's PASS, and no gate from `{node}` passed"))
                            }
                            _ => {}
                        }
                    }
                }
            }
        }
        let count = slot(&mut self.boards, board);
        *count += 1;
        if entries != *count {
            why.push(format!("entry {entries} follows {} entries", *count - 1));
            *count = entries;
        }
        for w in why {
            self.push(Deviation::new(codes::BLACKBOARD, Some(seq), w).actual(format!("blackboard_appended {board} by {node}")).node(node));
        }
    }

    pub(super) fn board_read(&mut self, seq: u64, board: &str, node: &str, entries: u32) {
        let Some(plan) = &self.plan else { return };
        let mut why = Vec::new();
        match (plan.program.decls.get(board).filter(|d| d.kind == Kind::Blackboard), plan.node(node)) {
            (None, _) => why.push(format!("the plan declares no blackboard `{board}`")),
            (_, None) => why.push(format!("`{node}` is not a node of workflow `{}`", plan.wf.name)),
            (Some(decl), Some(n)) => {
                if n.kind() != NodeKind::Agent || !n.common.reads.iter().any(|b| b == board) {
                    why.push(format!("`{node}` does not read blackboard `{board}`"));
                } else if !board_allows(plan.program, decl.readers().as_deref(), &board_actors(n)) {
                    why.push(format!("`{node}` is not among the readers of `{board}`"));
                }
                if self.nodes.get(node).is_none_or(|rt| rt.phase != Phase::Running) {
                    why.push(format!("`{node}` read `{board}` while not running"));
                }
            }
        }
        let have = self.boards.get(board).copied().unwrap_or(0);
        if entries != have {
            why.push(format!("`{node}` read {entries} entries of `{board}`, which holds {have}"));
        }
        for w in why {
            self.push(Deviation::new(codes::BLACKBOARD, Some(seq), w).actual(format!("blackboard_read {board} by {node}")).node(node));
        }
    }
}
