//! The event builder: the body of every coordination event, built from the
//! plan items it is about. The engine's recorder and the model checker's
//! witness writer both build their events here, so what the plan decides
//! about an event — a node's kind, a handoff's context and reason, a
//! delegation's contract and granted budget, a gate's edge, how an action
//! is written, where a handler is declared, a zone's actions — is written
//! once. (The recorder adds the envelope: `seq`, ids, producer, time.)

use crate::ir::{Action, Gate, Node, NodeKind, Program, Transfer, Workflow};
use crate::view::Budget;
use flow_trace::{
    ActionEvent, Applied, ArtifactRef, Body, Decision, ErrorCode, EvaluatorResult, HandlerScope, NodeStatus, Outcome, PauseReason,
    TerminationStatus, TriggerReason, Usage, Via, Zone, SCHEMA_VERSION as V,
};

/// `run_started` of `workflow`.
pub fn run_started(workflow: &Workflow, plan_digest: &str, plan_content_digest: Option<String>, input: Option<ArtifactRef>) -> Body {
    Body::RunStarted {
        schema_version: V,
        workflow: workflow.name.clone(),
        plan_digest: plan_digest.to_string(),
        plan_content_digest,
        input,
    }
}

/// `run_paused`, waiting on a gate, node or attempt.
pub fn run_paused(reason: PauseReason, waiting_on: String) -> Body {
    Body::RunPaused { schema_version: V, reason, waiting_on }
}

/// `run_terminated` under `reason`.
pub fn run_terminated(reason: &str, status: TerminationStatus, output: Option<ArtifactRef>) -> Body {
    Body::RunTerminated { schema_version: V, reason: reason.to_string(), status, output }
}

/// `node_started`: the node's kind is the plan's.
pub fn node_started(node: &Node, visit: u32) -> Body {
    Body::NodeStarted { schema_version: V, node: node.name.clone(), node_kind: node.kind(), visit }
}

/// `node_completed`.
pub fn node_completed(node: &str, status: NodeStatus, output: Option<ArtifactRef>) -> Body {
    Body::NodeCompleted { schema_version: V, node: node.to_string(), status, output }
}

/// `node_failed`.
pub fn node_failed(node: &str, error_code: ErrorCode, message: &str) -> Body {
    Body::NodeFailed { schema_version: V, node: node.to_string(), error_code, message: message.to_string() }
}

/// `attempt_started`.
pub fn attempt_started(node: &str, attempt_id: &str, attempt_no: u32, trigger_reason: TriggerReason) -> Body {
    Body::AttemptStarted { schema_version: V, node: node.to_string(), attempt_id: attempt_id.to_string(), attempt_no, trigger_reason }
}

/// `attempt_completed`.
pub fn attempt_completed(node: &str, attempt_id: &str, attempt_no: u32, output: ArtifactRef) -> Body {
    Body::AttemptCompleted { schema_version: V, node: node.to_string(), attempt_id: attempt_id.to_string(), attempt_no, output }
}

/// `attempt_failed`.
pub fn attempt_failed(node: &str, attempt_id: &str, attempt_no: u32, error_code: ErrorCode, message: &str) -> Body {
    Body::AttemptFailed {
        schema_version: V,
        node: node.to_string(),
        attempt_id: attempt_id.to_string(),
        attempt_no,
        error_code,
        message: message.to_string(),
    }
}

/// `computed`: a compute node's value, with the artifact of each input it
/// read (`None`: the input had no output).
pub fn computed(node: &str, inputs: std::collections::BTreeMap<String, Option<ArtifactRef>>, output: ArtifactRef) -> Body {
    Body::Computed { schema_version: V, node: node.to_string(), inputs, output }
}

/// `recorded`: a declared record written by its node or gate.
pub fn recorded(
    record: &str,
    owner: RecordOwner<'_>,
    inputs: std::collections::BTreeMap<String, Option<ArtifactRef>>,
    values: serde_json::Map<String, serde_json::Value>,
    errors: std::collections::BTreeMap<String, String>,
) -> Body {
    let (node, gate) = match owner {
        RecordOwner::Node(n) => (Some(n.to_string()), None),
        RecordOwner::Gate(g) => (None, Some(g.to_string())),
    };
    Body::Recorded { schema_version: V, name: record.to_string(), node, gate, inputs, values, errors }
}

/// Who writes a record: a node as it completes, or a gate as it records
/// its outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordOwner<'a> {
    Node(&'a str),
    Gate(&'a str),
}

/// The record named `name` in `workflow`, with its owner.
pub fn find_record<'w>(workflow: &'w crate::ir::Workflow, name: &str) -> Option<(&'w crate::ir::Record, RecordOwner<'w>)> {
    for node in workflow.nodes.values() {
        if let Some(r) = node.records.iter().find(|r| r.name == name) {
            return Some((r, RecordOwner::Node(&node.name)));
        }
    }
    for gate in workflow.gates.values() {
        if let Some(r) = gate.records.iter().find(|r| r.name == name) {
            return Some((r, RecordOwner::Gate(&gate.name)));
        }
    }
    None
}

/// `edge_taken`.
pub fn edge_taken(from: &str, to: &str, via: Via) -> Body {
    Body::EdgeTaken { schema_version: V, from: from.to_string(), to: to.to_string(), via }
}

/// `handoff` across `transfer`: its context mode (the plan's resolved one),
/// the fields the context keeps and its reason are the plan's.
pub fn handoff(transfer: &Transfer, payload: ArtifactRef, accepted: bool, artifacts: Vec<ArtifactRef>) -> Body {
    Body::Handoff {
        schema_version: V,
        from: transfer.from.clone(),
        to: transfer.to.clone(),
        reason: transfer.reason().map(str::to_string),
        context: transfer.handoff_context(),
        context_fields: transfer.context_fields().to_vec(),
        payload,
        accepted,
        artifacts,
    }
}

/// `dead_letter`: the message `transfer` sent with `payload` was refused
/// for `reason`.
pub fn dead_letter(transfer: &Transfer, payload: ArtifactRef, reason: &str) -> Body {
    Body::DeadLetter {
        schema_version: V,
        message_type: transfer.message_type(),
        from: transfer.from.clone(),
        to: transfer.to.clone(),
        reason: reason.to_string(),
        payload,
    }
}

/// `delegation` across `transfer`: the contract and the budget the delegate
/// receives are the plan's.
pub fn delegation(program: &Program, transfer: &Transfer, inputs: ArtifactRef, artifacts: Vec<ArtifactRef>) -> Body {
    Body::Delegation {
        schema_version: V,
        from: transfer.from.clone(),
        to: transfer.to.clone(),
        contract: transfer.contract().unwrap_or_default().to_string(),
        inputs,
        budget: delegated_budget(program, transfer),
        reason: transfer.reason().map(str::to_string),
        artifacts,
    }
}

/// The budget a delegation grants its delegate: its contract's limits
/// (nothing limited is 0).
pub fn delegated_budget(program: &Program, transfer: &Transfer) -> Usage {
    transfer.contract_decl(program).and_then(|c| c.budget(program)).map(|b| granted(&b)).unwrap_or_default()
}

/// A budget's limits as amounts (an unlimited measure is 0).
pub fn granted(budget: &Budget<'_>) -> Usage {
    Usage {
        steps: budget.steps.unwrap_or(0),
        tokens: budget.tokens.unwrap_or(0),
        tool_calls: budget.tool_calls.unwrap_or(0),
        cost: budget.cost.unwrap_or(0.0),
        duration_ms: budget.duration_ms.unwrap_or(0),
    }
}

/// The agent whose node a gate's edge leaves, when that node is an agent
/// node: the gate's trigger (else the control plane triggers it).
pub fn gate_agent<'w>(workflow: &'w Workflow, gate: &Gate) -> Option<&'w str> {
    workflow.nodes.get(&gate.from).filter(|n| n.kind() == NodeKind::Agent).and_then(|n| n.target.first()).map(String::as_str)
}

/// `gate_recorded` of `gate`: its edge and its trigger (who completed the
/// node the edge leaves) are the plan's.
pub fn gate_recorded(workflow: &Workflow, gate: &Gate, outcome: Outcome, reason: Option<String>, evaluators: Vec<EvaluatorResult>) -> Body {
    let trigger = match gate_agent(workflow, gate) {
        Some(agent) => format!("agent.{agent} on node_completed"),
        None => "control on node_completed".to_string(),
    };
    Body::GateRecorded {
        schema_version: V,
        gate: gate.name.clone(),
        from: gate.from.clone(),
        to: gate.to.clone(),
        outcome,
        reason,
        evaluators,
        trigger,
    }
}

/// `decision_requested` on `subject`.
/// `expires_at`: when the subject's `timeout` runs out, if it has one.
/// The request goes to the `contact` of each principal it is asked of.
pub fn decision_requested(
    program: &crate::ir::Program,
    subject: &str,
    deciders: Vec<String>,
    decisions: Vec<Decision>,
    expires_at: Option<String>,
) -> Body {
    let contacts = crate::semantics::contacts(program, &deciders);
    Body::DecisionRequested { schema_version: V, subject: subject.to_string(), deciders, decisions, expires_at, contacts }
}

/// `decision_applied`: `action` is what the decision applied (an action,
/// or `call`/`refuse` for a confirmation, `fail` for a failed subject).
pub fn decision_applied(subject: &str, decision: Decision, by: &str, action: Applied) -> Body {
    Body::DecisionApplied { schema_version: V, subject: subject.to_string(), decision, by: by.to_string(), action }
}

/// An action as `decision_applied.action` holds it.
pub fn applied(action: &Action) -> Applied {
    Applied::Action(action.clone())
}

/// `action_taken`: a handler's (or a zone's, a default's) action ran.
pub fn action_taken(event: ActionEvent, scope: HandlerScope, action: &Action) -> Body {
    Body::ActionTaken { schema_version: V, event, scope, action: action.clone() }
}

/// `budget_zone_changed` of a budget scope, with the zone's actions.
pub fn zone_changed<'a>(scope: &str, from: Zone, to: Zone, actions: impl IntoIterator<Item = &'a Action>) -> Body {
    Body::BudgetZoneChanged { schema_version: V, scope: scope.to_string(), from, to, actions: actions.into_iter().cloned().collect() }
}

/// `budget_exhausted` of a budget scope.
pub fn budget_exhausted(scope: &str, limit: &str) -> Body {
    Body::BudgetExhausted { schema_version: V, scope: scope.to_string(), limit: limit.to_string() }
}

/// `warning`.
/// The message of the `warning` an operator's cancellation records first
/// (a root event: nothing in the run caused it). A replay meets it where
/// it was recorded and cancels there.
pub const CANCELLED: &str = "cancelled by the operator";

pub fn warning(message: String) -> Body {
    Body::Warning { schema_version: V, message }
}

/// `tool_call_started` (persisted before the call is made).
pub fn tool_call_started(
    tool: &str,
    node: &str,
    attempt_id: &str,
    agent: Option<String>,
    request_key: String,
    idempotency_key: Option<String>,
    input: ArtifactRef,
) -> Body {
    Body::ToolCallStarted {
        schema_version: V,
        tool: tool.to_string(),
        node: node.to_string(),
        attempt_id: attempt_id.to_string(),
        agent,
        request_key,
        idempotency_key,
        input,
    }
}

/// `tool_call_completed`: whether the call succeeded, its output or its error.
pub fn tool_call_completed(
    tool: &str,
    attempt_id: &str,
    ok: bool,
    output: Option<ArtifactRef>,
    error: Option<String>,
    duration_ms: u64,
) -> Body {
    Body::ToolCallCompleted {
        schema_version: V,
        tool: tool.to_string(),
        attempt_id: attempt_id.to_string(),
        ok,
        output,
        error,
        duration_ms,
    }
}

/// `tool_call_refused`: an agent's call the control plane did not make.
pub fn tool_call_refused(tool: &str, node: &str, attempt_id: &str, agent: Option<String>, reason: &str) -> Body {
    Body::ToolCallRefused {
        schema_version: V,
        tool: tool.to_string(),
        node: node.to_string(),
        attempt_id: attempt_id.to_string(),
        agent,
        reason: reason.to_string(),
    }
}

/// `blackboard_appended`: `node`'s output `entry` appended to `blackboard`,
/// which now holds `entries` entries.
pub fn blackboard_appended(blackboard: &str, node: &str, entry: ArtifactRef, entries: u32, approved_by: Option<String>) -> Body {
    Body::BlackboardAppended { schema_version: V, blackboard: blackboard.to_string(), node: node.to_string(), entry, entries, approved_by }
}

/// `rerun`: a `revise` or `replan` re-runs `rerun`'s scope from its entry.
pub fn rerun(trigger: flow_trace::TriggerReason, rerun: &crate::rerun::Rerun) -> Body {
    Body::Rerun { schema_version: V, trigger, scope: rerun.scope.clone(), entry: rerun.entry.clone(), superseded: rerun.nodes.clone() }
}

/// `blackboard_read`: `node` read the `entries` entries of `blackboard`.
pub fn blackboard_read(blackboard: &str, node: &str, entries: u32) -> Body {
    Body::BlackboardRead { schema_version: V, blackboard: blackboard.to_string(), node: node.to_string(), entries }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{TransferKind, Value};
    use flow_trace::ContextMode;

    fn artifact() -> ArtifactRef {
        ArtifactRef { digest: "sha256:0".into(), size: 2 }
    }

    #[test]
    fn a_handoff_without_a_declared_context_is_the_plans_default() {
        let t = Transfer::new(TransferKind::Handoff, "a", "b", &Default::default(), Default::default());
        let Body::Handoff { context, reason, .. } = handoff(&t, artifact(), true, Vec::new()) else { panic!("a handoff") };
        assert_eq!((context, reason), (ContextMode::Isolated, None));
        let mut props = crate::ir::NameMap::default();
        props.insert("context".into(), Value::Word("fork".into()));
        props.insert("reason".into(), Value::Str("needs review".into()));
        let t = Transfer::new(TransferKind::Handoff, "a", "b", &props, Default::default());
        let Body::Handoff { context, reason, .. } = handoff(&t, artifact(), true, Vec::new()) else { panic!("a handoff") };
        assert_eq!((context, reason.as_deref()), (ContextMode::Fork, Some("needs review")));
    }

    #[test]
    fn actions_are_written_with_their_arguments() {
        let revise = Action { name: crate::ir::ActionKind::Revise, args: vec!["write".into()] };
        let event = ActionEvent::Handler(crate::ir::HandlerEvent::Revise);
        let Body::ActionTaken { scope, action, .. } = action_taken(event, HandlerScope::Gate("g".into()), &revise) else {
            panic!("an action")
        };
        assert_eq!((scope.to_word(), action.render()), ("gate.g".to_string(), "revise(write)".to_string()));
    }
}
