//! Step rules of the language that the engine (`flow run`), the model
//! checker (`flowc verify`) and trace check (`flow trace check`) share.
//!
//! Each rule is written once, here, over the resolved IR, so the three
//! readers of a plan cannot drift apart: what a decision does when no
//! handler says, which action a decision applies.

use crate::index::PlanIndex;
use crate::ir::NodeKind;
use crate::ir::{Action, ActionKind, Gate, Handler, HandlerEvent, JoinRule, Node, Program, Value, Workflow};
use crate::view::OnFailure;
use flow_trace::{Decision, TerminationStatus};

/// The builtin functions that compute in memory from their input alone:
/// the data plane answers their calls at once, and a crash never loses one
/// (recovery issues the call again instead of expiring its attempt: it had
/// no effect and costs nothing to ask again).
pub const PURE_BUILTINS: &[&str] = &["noop", "identity", "word_count"];

/// Whether `decl` is a builtin tool of a [`PURE_BUILTINS`] function.
pub fn is_pure_builtin(decl: &crate::ir::Decl) -> bool {
    decl.variant.as_deref() == Some("builtin") && PURE_BUILTINS.contains(&decl.function())
}

/// The handler of `handlers` for the event named `event` (as a trace or a
/// decision names it), if one is declared.
pub fn handler_for<'h>(handlers: &'h [Handler], event: &str) -> Option<&'h Action> {
    handlers.iter().find(|h| h.events.iter().any(|e| e.as_str() == event)).map(|h| &h.action)
}

/// The handler of `handlers` for `event`, if one is declared.
pub fn handler_on(handlers: &[Handler], event: HandlerEvent) -> Option<&Action> {
    handlers.iter().find(|h| h.events.contains(&event)).map(|h| &h.action)
}

/// The action a decision at a gate applies: the gate's handler for the
/// decision, else the default — `approve` continues through the gate,
/// `revise` re-runs the gate's `from` node, `replan` re-runs the replan
/// scope, `reject` and a `timeout` terminate (under the gate's
/// `reason`, else the decision's name).
pub fn gate_decision_action(gate: &Gate, decision: Decision) -> Action {
    if let Some(action) = handler_on(&gate.handlers, decision.event()) {
        return action.clone();
    }
    let (name, args) = match decision {
        Decision::Approve => (ActionKind::Continue, vec![]),
        Decision::Revise => (ActionKind::Revise, vec![gate.from.clone()]),
        Decision::Replan => (ActionKind::Replan, vec![]),
        Decision::Reject | Decision::Timeout => (ActionKind::Terminate, vec![]),
    };
    Action { name, args }
}

/// The action a decision at a human node applies: the node's handler for
/// the decision, else `continue` (the node completes with the decision as
/// its output).
pub fn human_decision_action(node: &Node, decision: Decision) -> Action {
    handler_on(&node.handlers, decision.event()).cloned().unwrap_or_else(|| Action::bare(ActionKind::Continue))
}

/// Whether going past a hop limit stops a ping-pong: the workflow's
/// `max_hops` handler ends the run, jumps or asks a human (or there is
/// none, and the run ends). A handler that goes on (`continue`, `skip`,
/// `degrade`, `warn`, `retry`) lets the pair start counting again and cross
/// on, so the limit bounds nothing (E0403 does not count it).
pub fn hops_stop_the_cycle(workflow: &Workflow) -> bool {
    let goes_on = [ActionKind::Continue, ActionKind::Skip, ActionKind::Degrade, ActionKind::Warn, ActionKind::Retry];
    handler_on(&workflow.handlers, HandlerEvent::MaxHops).is_none_or(|a| !goes_on.contains(&a.name))
}

/// How long a decision on `subject` may take: the gate's `timeout`, else
/// the human node's (`None`: the decision never times out).
pub fn decision_timeout_ms(workflow: &Workflow, subject: &str) -> Option<u64> {
    match (workflow.gates.get(subject), workflow.nodes.get(subject)) {
        (Some(gate), _) => gate.timeout_ms(),
        (None, Some(node)) if node.kind() == NodeKind::Human => node.timeout_ms(),
        _ => None,
    }
}

/// How `decision_applied.action` writes a decision at a human node: the
/// action [`human_decision_action`] applies, or `fail` for a `timeout`
/// (no decision in time: the node fails with the `timeout` event, which
/// its handler for it, else `on_failure`, answers).
pub fn human_decision_applied(node: &Node, decision: Decision) -> flow_trace::Applied {
    match decision {
        Decision::Timeout => flow_trace::Applied::Fail,
        _ => flow_trace::Applied::Action(human_decision_action(node, decision)),
    }
}

/// A join node's aggregation rule (`all` for a node that is not a join).
pub fn join_rule(node: &Node) -> &JoinRule {
    const ALL: JoinRule = JoinRule::All;
    match &node.body {
        crate::ir::NodeBody::Join(j) => &j.rule,
        _ => &ALL,
    }
}

/// Whether a join with `rule` over `total` branches runs once `arrived`
/// of them have finished (reference §6.2): `any` and `first` on the
/// first, `majority` on more than half, every other rule (`all`,
/// `weighted`, `custom`) on the last. The join starts only then; a branch
/// that finishes after its join ran is absorbed and starts nothing.
pub fn join_ready(rule: &JoinRule, arrived: usize, total: usize) -> bool {
    match rule {
        JoinRule::Any | JoinRule::First => arrived >= 1,
        JoinRule::Majority => arrived * 2 > total,
        JoinRule::All | JoinRule::Weighted { .. } | JoinRule::Custom { .. } | JoinRule::Vote { .. } => arrived >= total,
    }
}

/// The loop whose round ends when `from` takes its edge to `to`
/// (reference §6.1): `from` is a round member of a loop and `to` is not in
/// that loop's body. Leaving the body is not a crossing: the round ends,
/// and the loop's `until`, `max_rounds` and own edges decide what runs
/// next.
pub fn round_exit<'i>(workflow: &Workflow, index: &'i PlanIndex, from: &str, to: &str) -> Option<&'i str> {
    let lp = index.loop_of(from)?;
    let inside = workflow.nodes.get(lp).is_some_and(|l| l.target.iter().any(|m| m == to));
    (!inside).then_some(lp)
}

/// Whether a node with these outgoing edges may take none of them: it
/// has none, or every one is guarded by `when` (no `else`, no plain
/// edge), so all guards may be false. Then the step falls through: a loop
/// member ends its round, a listed branch arrives at its join, any other
/// node is a dead end.
pub fn may_fall_through<'e>(mut edges: impl Iterator<Item = &'e crate::ir::Edge>) -> bool {
    edges.all(|e| matches!(e.guard, crate::ir::Guard::When(_)))
}

/// Whether every evaluator of `gate` can only PASS when the gate runs
/// right after its `from` node completed with an output: the control plane
/// validated that output against the node's type before the gate ran, so
/// `schema_valid(from, T)` with `T` the node's own output type, and
/// `exists(from)` or `exists(from.f)` of a required field that is neither
/// a string (`exists` checks a string as a path on disk), nullable nor
/// `any`, cannot fail. (After a failure the node was skipped or degraded
/// to, its output need not be valid: this says nothing then.)
pub fn passes_on_valid_output(gate: &Gate, from: &Node, program: &crate::ir::Program) -> bool {
    use crate::ir::TExprKind;
    use crate::types::Ty;
    // A declared type, expanded (a few steps: a name can name a name).
    let expand = |ty: &Ty| {
        let mut ty = ty.clone();
        for _ in 0..8 {
            match &ty {
                Ty::Named { name } => match program.types.get(name) {
                    Some(def) => ty = def.ty.clone(),
                    None => break,
                },
                _ => break,
            }
        }
        ty
    };
    let is_from = |e: &crate::ir::TExpr| matches!(&e.kind, TExprKind::Var { name } if *name == from.name);
    let solid = |ty: &Ty| !matches!(expand(ty), Ty::Any | Ty::Null | Ty::Nullable { .. } | Ty::String);
    let Some(Value::List(evaluators)) = gate.props.get("evaluate") else { return false };
    !evaluators.is_empty()
        && evaluators.iter().all(|ev| match ev {
            Value::Evaluator { name, builtin: true, args } => match (name.as_str(), args.as_slice()) {
                ("schema_valid", [subject, ty]) => {
                    is_from(subject)
                        && matches!(&ty.kind, TExprKind::Literal { value } if matches!(value.as_ref(), Value::Type(t) if *t == from.output))
                }
                ("exists", [subject]) if is_from(subject) => solid(&from.output),
                ("exists", [subject]) => match &subject.kind {
                    TExprKind::Field { base, name } if is_from(base) => match expand(&from.output) {
                        Ty::Record { fields } => fields.get(name).is_some_and(|f| !f.optional && solid(&f.ty)),
                        _ => false,
                    },
                    _ => false,
                },
                _ => false,
            },
            _ => false,
        })
}

/// How an action ends a run (reference §6.3): the termination reason and
/// status. `terminate` ends under its argument, else the gate's `reason`,
/// else the event's name (lowercased), with status failure; `halt` under
/// `halted` (failure); `fallback` under its argument, else `fallback`, and
/// `return_partial` under `partial_result`, both with status partial. Every
/// other action does not end the run.
pub fn ending(kind: ActionKind, arg: Option<&str>, gate_reason: Option<&str>, event: &str) -> Option<(String, TerminationStatus)> {
    Some(match kind {
        ActionKind::Terminate => {
            let reason = arg.or(gate_reason).map(str::to_string).unwrap_or_else(|| event.to_lowercase());
            (reason, TerminationStatus::Failure)
        }
        ActionKind::Halt => ("halted".to_string(), TerminationStatus::Failure),
        ActionKind::Fallback => (arg.unwrap_or("fallback").to_string(), TerminationStatus::Partial),
        ActionKind::ReturnPartial => ("partial_result".to_string(), TerminationStatus::Partial),
        _ => return None,
    })
}

/// Who answers a node's failed visit (reference §6.3), first match wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureStep<'w> {
    /// The node's own handler for `event` — the event itself, or else its
    /// `failure` handler: the handler's event is named.
    Handler { event: HandlerEvent },
    /// The node's `on_failure`, when it is not `retry` (a retry policy's
    /// attempts are spent already).
    OnFailure(OnFailure),
    /// The `failure` handler of the loop whose round the node is in.
    LoopHandler { loop_node: &'w str },
    /// The workflow's `failure` handler.
    WorkflowHandler,
    /// Nobody: the run fails under `NODE_failed`.
    Fail,
}

/// Who answers the failed visit of `node` (the failure's `event`:
/// `failure`, `timeout` or `invalid_output`), as the engine acts and the
/// model checker branches.
pub fn failure_step<'w>(workflow: &'w Workflow, index: &'w PlanIndex, node: &'w Node, event: HandlerEvent) -> FailureStep<'w> {
    let own = |e: HandlerEvent| node.handlers.iter().flat_map(|h| h.events.iter()).find(|x| **x == e);
    if let Some(e) = own(event).or_else(|| own(HandlerEvent::Failure)) {
        return FailureStep::Handler { event: *e };
    }
    if let Some(f) = node.on_failure().filter(|f| *f != OnFailure::Retry) {
        return FailureStep::OnFailure(f);
    }
    if let Some(lp) = index.loop_of(&node.name) {
        if workflow.nodes.get(lp).is_some_and(|l| handler_on(&l.handlers, HandlerEvent::Failure).is_some()) {
            return FailureStep::LoopHandler { loop_node: lp };
        }
    }
    if handler_on(&workflow.handlers, HandlerEvent::Failure).is_some() {
        return FailureStep::WorkflowHandler;
    }
    FailureStep::Fail
}

/// Who `listed` names (reference §5.1): each principal listed, the members
/// of each role listed, and every principal that holds a listed role —
/// followed until nothing is added. Who may decide, trigger or approve is
/// this set, for `flow approve` as for trace check.
pub fn expand_principals(program: &crate::ir::Program, listed: &[String]) -> std::collections::BTreeSet<String> {
    let mut out: std::collections::BTreeSet<String> = listed.iter().cloned().collect();
    loop {
        let before = out.len();
        for decl in program.decls.values().filter(|d| d.kind == crate::spec::Kind::Principal) {
            if out.contains(&decl.name) {
                out.extend(decl.members());
            }
            if decl.roles().iter().any(|r| out.contains(r)) {
                out.insert(decl.name.clone());
            }
        }
        if out.len() == before {
            return out;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_action_ends_a_run_under_one_reason() {
        let end = |k, arg, gate, event| ending(k, arg, gate, event);
        assert_eq!(end(ActionKind::Terminate, Some("bad"), Some("gate_reason"), "BLOCK"), Some(("bad".into(), TerminationStatus::Failure)));
        assert_eq!(
            end(ActionKind::Terminate, None, Some("gate_reason"), "BLOCK"),
            Some(("gate_reason".into(), TerminationStatus::Failure))
        );
        assert_eq!(end(ActionKind::Terminate, None, None, "BLOCK"), Some(("block".into(), TerminationStatus::Failure)));
        assert_eq!(end(ActionKind::Halt, None, None, "failure"), Some(("halted".into(), TerminationStatus::Failure)));
        assert_eq!(end(ActionKind::Fallback, Some("low_budget"), None, "x"), Some(("low_budget".into(), TerminationStatus::Partial)));
        assert_eq!(end(ActionKind::Fallback, None, None, "x"), Some(("fallback".into(), TerminationStatus::Partial)));
        assert_eq!(end(ActionKind::ReturnPartial, None, None, "x"), Some(("partial_result".into(), TerminationStatus::Partial)));
        for &k in ActionKind::ALL {
            let ends = matches!(k, ActionKind::Terminate | ActionKind::Halt | ActionKind::Fallback | ActionKind::ReturnPartial);
            assert_eq!(end(k, None, None, "e").is_some(), ends, "{k}");
        }
    }
}

/// Where a request asked of `principals` goes: the `contact` of each of
/// them (roles expanded to their members) that declares one, in name order.
pub fn contacts(program: &Program, principals: &[String]) -> Vec<String> {
    let contact = |p: &String| match program.decls.get(p)?.props.get("contact")? {
        Value::Str(c) => Some(c.clone()),
        _ => None,
    };
    expand_principals(program, principals).iter().filter_map(contact).collect()
}

/// What a blackboard requires before an append (reference §5.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoardRequires {
    /// Nothing: the entry is appended as its writer completes.
    Nothing,
    /// A human approval of each append, asked as the writer completes.
    Approval,
    /// A PASS of the gate on the edge the writer's completion takes.
    GatePass,
}

/// What `board` requires before an append.
pub fn board_requires(board: &crate::ir::Decl) -> BoardRequires {
    match board.requires() {
        Some("approval") => BoardRequires::Approval,
        Some("gate_pass") => BoardRequires::GatePass,
        _ => BoardRequires::Nothing,
    }
}

/// The subject of the decision on `node`'s append to `board`.
pub fn board_subject(board: &str, node: &str) -> String {
    format!("blackboard.{board}.{node}")
}

/// The board and node of a blackboard append's decision subject.
pub fn board_of_subject(subject: &str) -> Option<(&str, &str)> {
    subject.strip_prefix("blackboard.")?.split_once('.')
}

/// Who approves an append to `board` under `requires: approval`: the
/// principals among its `writers`, else the workflow's `escalate_to`
/// (empty: nobody can, which the verifier reports as E0710).
pub fn board_deciders(program: &Program, workflow: &Workflow, board: &crate::ir::Decl) -> Vec<String> {
    let principals: Vec<String> = board
        .writers()
        .unwrap_or_default()
        .into_iter()
        .filter(|w| program.decls.get(w).is_some_and(|d| d.kind == crate::spec::Kind::Principal))
        .collect();
    if principals.is_empty() {
        workflow.escalate_to()
    } else {
        principals
    }
}

/// Who acts for `node` on a blackboard: its agent, or a human node's
/// principals (other kinds have nobody).
pub fn board_actors(node: &Node) -> Vec<String> {
    match node.kind() {
        NodeKind::Agent | NodeKind::Human => node.target.clone(),
        _ => Vec::new(),
    }
}

/// Whether `actors` may act where `allowed` (a blackboard's `readers` or
/// `writers`) is declared: every actor is listed (roles expanded), and a
/// node with no actor only where nothing is declared.
pub fn board_allows(program: &Program, allowed: Option<&[String]>, actors: &[String]) -> bool {
    let Some(allowed) = allowed else { return true };
    let expanded = expand_principals(program, allowed);
    !actors.is_empty() && actors.iter().all(|a| expanded.contains(a))
}

/// The decision applied to an append: `append` for `approve`, else `refuse`.
pub fn board_decision_applied(decision: Decision) -> flow_trace::Applied {
    if decision == Decision::Approve {
        flow_trace::Applied::Append
    } else {
        flow_trace::Applied::Refuse
    }
}

/// Whether an agent node's turns carry data labelled private: the node's
/// `labels`, its `task.labels` or its agent's `labels` say "private". Such
/// a turn goes only to a provider declared `local: true` (reference §5.2).
pub fn handles_private_data(node: &Node, agent: &crate::ir::Decl) -> bool {
    let private = |labels: &[String]| labels.iter().any(|l| l == "private");
    let task_labels = match node.task() {
        Some(Value::Record(task)) => crate::lookup::names(task.get("labels")),
        _ => Vec::new(),
    };
    private(node.labels()) || private(&task_labels) || private(&agent.labels())
}

/// The subject of the decision of the `index`-th evaluator of `gate`, a
/// `human` evaluator (its judges' verdict).
pub fn judge_subject(gate: &str, index: usize) -> String {
    format!("judge.{gate}.{index}")
}

/// The gate and evaluator index of a `human` evaluator's subject.
pub fn judge_of_subject(subject: &str) -> Option<(&str, usize)> {
    let (gate, index) = subject.strip_prefix("judge.")?.rsplit_once('.')?;
    Some((gate, index.parse().ok()?))
}

/// The `human` evaluator a judge subject names, with its declaration.
pub fn judge_decl<'p>(program: &'p Program, workflow: &'p Workflow, subject: &str) -> Option<&'p crate::ir::Decl> {
    let (gate, index) = judge_of_subject(subject)?;
    let evaluator = workflow.gates.get(gate)?.evaluator_items().get(index).copied().flatten()?;
    program.decls.get(evaluator.name).filter(|d| !evaluator.builtin && d.variant.as_deref() == Some("human"))
}

/// What a `human` evaluator's decision gives its gate: PASS for approve,
/// else the evaluator's `fail` outcome.
pub fn judge_verdict(evaluator: &crate::ir::Decl, decision: Decision) -> flow_trace::Outcome {
    if decision == Decision::Approve {
        flow_trace::Outcome::Pass
    } else {
        evaluator.fail()
    }
}

/// Whether a transfer may be refused as it happens — its sender then
/// fails (`handoff_refused`, `delegation_refused`; reference §6.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Refusal {
    /// Never: nothing is checked that could fail.
    Never,
    /// Only when the sender's output was not validated (it was skipped or
    /// degraded to): the payload type is the sender's own output type.
    Unvalidated,
    /// Whenever it happens: acceptance checks, artifacts to evaluate, a
    /// payload type or message type (`messages`) other than the sender's
    /// output type, or a contract's `inputs` type.
    Possible,
}

/// When `transfer` may be refused (see [`Refusal`]).
pub fn refusal(program: &Program, workflow: &Workflow, transfer: &crate::ir::Transfer) -> Refusal {
    use crate::ir::TransferKind;
    if !transfer.artifacts().is_empty() {
        return Refusal::Possible;
    }
    match transfer.kind() {
        TransferKind::Delegate => {
            let contract = transfer.contract().and_then(|c| program.decls.get(c));
            if contract.and_then(|c| c.inputs_type()).is_some() {
                Refusal::Possible
            } else {
                Refusal::Never
            }
        }
        TransferKind::Handoff => {
            if !transfer.accept().is_empty() {
                return Refusal::Possible;
            }
            let sent = workflow.nodes.get(&transfer.from).map(|n| &n.output);
            let of = |ty: &crate::types::Ty| if Some(ty) == sent { Refusal::Unvalidated } else { Refusal::Possible };
            let types = [transfer.payload_type(), workflow.message_schema(transfer.message_type())];
            types.into_iter().flatten().map(of).max().unwrap_or(Refusal::Never)
        }
    }
}
