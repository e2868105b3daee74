//! Blackboards (reference §5.8): an append-only store per blackboard, kept
//! in the journal as `blackboard_appended` events (a resumed run rebuilds
//! it by replaying them). A node that `writes` a blackboard appends its
//! output as it completes — at once, after a human approves the append
//! (`requires: approval`), or when the gate on the edge it takes records
//! PASS (`requires: gate_pass`). An agent node that `reads` one gets every
//! entry so far in its context, recorded as `blackboard_read` as it
//! starts. Who may write and read is the verifier's (E0707, E0708), and
//! trace check holds every append and read to the plan.

use super::*;
use flow_check::semantics::{board_deciders, board_requires, board_subject, BoardRequires};

impl Engine {
    /// The blackboards an agent node reads, each with its entries so far,
    /// recorded as it starts; `None` when it reads none.
    pub(super) fn read_boards(&mut self, node: &Node, cause: &Str) -> Option<Value> {
        if node.common.reads.is_empty() || node.kind() != NodeKind::Agent {
            return None;
        }
        let mut view = serde_json::Map::new();
        for board in &node.common.reads {
            let entries = self.boards.get(board).cloned().unwrap_or_default();
            self.emit("control", events::blackboard_read(board, &node.name, entries.len() as u32), Some(cause));
            view.insert(board.clone(), Value::Array(entries));
        }
        Some(Value::Object(view))
    }

    /// The appends of a completed node from its `next` blackboard on; after
    /// the last, the node's completion goes on (its map, else its edge).
    pub(super) fn append_next(&mut self, node: &str, next: usize, cause: &Str) {
        if !self.running() {
            return;
        }
        let program = self.program.clone();
        let writes = self.node(node).map(|n| n.common.writes.clone()).unwrap_or_default();
        let Some(board) = writes.get(next) else {
            self.proceed(node, cause);
            return;
        };
        let Some(decl) = program.decls.get(board) else {
            self.then(Effect::Append { node: node.to_string(), next: next + 1, cause: cause.clone() });
            return;
        };
        match board_requires(decl) {
            BoardRequires::Nothing => {
                self.append_entry(board, node, None, cause);
                self.then(Effect::Append { node: node.to_string(), next: next + 1, cause: cause.clone() });
            }
            BoardRequires::Approval => {
                let principals = board_deciders(&program, self.wf(), decl);
                let decision = Box::new(Decision::Append { board: board.clone(), node: node.to_string(), next });
                let prompt = Some(format!("Append the output of `{node}` to blackboard `{board}`?"));
                let decisions = vec![flow_trace::Decision::Approve, flow_trace::Decision::Reject];
                self.then(Effect::Ask { decision, principals, prompt, decisions, cause: cause.clone() });
            }
            // Appended when a gate on the edge the node takes passes.
            BoardRequires::GatePass => self.then(Effect::Append { node: node.to_string(), next: next + 1, cause: cause.clone() }),
        }
    }

    /// A decision on an append: `approve` appends the entry, anything else
    /// leaves it out; the node's other appends and its completion go on.
    pub(super) fn decide_append(&mut self, board: &str, node: &str, next: usize, answer: HumanAnswer, request_event: &str) {
        let subject = board_subject(board, node);
        let applied_as = flow_check::semantics::board_decision_applied(answer.decision);
        let applied = self.record_applied(&subject, &answer, applied_as, request_event);
        if answer.decision == flow_trace::Decision::Approve {
            self.append_entry(board, node, Some(answer.by.clone()), &applied);
        }
        self.then(Effect::Append { node: node.to_string(), next: next + 1, cause: applied });
    }

    /// A gate from `node` recorded PASS: the node's output goes to the
    /// blackboards it writes under `requires: gate_pass`.
    pub(super) fn append_on_pass(&mut self, node: &str, cause: &Str) {
        let program = self.program.clone();
        let Some(n) = self.node(node) else { return };
        for board in &n.common.writes {
            if program.decls.get(board).is_some_and(|d| board_requires(d) == BoardRequires::GatePass) {
                self.append_entry(board, node, None, cause);
            }
        }
    }

    /// Appends `node`'s output to `board`, once it is checked against the
    /// blackboard's `entry` type (an output that is not an entry is not
    /// appended, and a warning says why).
    fn append_entry(&mut self, board: &str, node: &str, approved_by: Option<String>, cause: &Str) {
        let Some(output) = self.env.get(node).cloned() else { return };
        let program = self.program.clone();
        if let Some(ty) = program.decls.get(board).and_then(|d| d.entry_type()) {
            let problem = match self.validator("blackboard.entry", board, ty) {
                Ok(v) => v.validate(&output).err().map(|errors| errors.join("; ")),
                Err(e) => Some(e),
            };
            if let Some(problem) = problem {
                let message = format!("`{node}`'s output was not appended to blackboard `{board}`: not an entry ({problem})");
                self.emit("control", events::warning(message), Some(cause));
                return;
            }
        }
        let entry = self.artifact_of(&output).0;
        let entries = {
            let list = self.boards.entry(board.to_string()).or_default();
            list.push(output);
            list.len() as u32
        };
        self.emit("control", events::blackboard_appended(board, node, entry, entries, approved_by), Some(cause));
    }
}
