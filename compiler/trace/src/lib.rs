//! The trace event vocabulary shared by witness traces (`flowc verify`)
//! and real runs (`flow run`).
//!
//! Every event carries the envelope fields of [`Event`]; `kind` says which
//! [`Body`] variant the `payload` is, and every payload carries
//! `schema_version`. Kinds are `lower_snake_case`. The published schema
//! (`stdlib/schemas/trace-event.schema.json`) is generated from these types
//! by [`event_schema`], so the two never drift.
//!
//! OpenTelemetry: the `flow-otel` crate (interpreter/otel) turns these
//! events into spans following the GenAI conventions and exports them.

pub mod chain;
mod fast;
pub mod time;
mod words;

pub use fast::event_from_str;
pub use words::*;

/// What `closed_word!` expands to names (callers need not depend on serde
/// or schemars themselves).
#[doc(hidden)]
pub mod __private {
    pub use schemars;
    pub use serde;
}
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;

/// A shared string of the event envelope: cloning it is a reference-count
/// increment, so the run id, execution id, producer and time that every
/// event repeats are held once, and a parent id is the event id it names.
pub type Str = std::sync::Arc<str>;

/// The version of every payload this crate writes.
pub const SCHEMA_VERSION: u32 = 1;

// Deserialization is written by hand (module `wire`): the derived form of a
// flattened body buffers every event into an intermediate tree, which made
// reading traces four times slower than needed.
/// One trace event: the envelope and a typed body.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Event {
    /// The run (trace id): one per `flow run`, kept across resumes.
    pub run_id: Str,
    /// One process execution of the run: `exec-1`, then `exec-2` after a
    /// resume, and so on.
    pub execution_id: Str,
    /// Position in the run: 1, 2, 3 … without gaps, assigned by the
    /// control plane only.
    pub seq: u64,
    /// Unique id of this event: `{run_id}/{seq}`.
    pub event_id: Str,
    /// The event this one is a consequence of, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_event_id: Option<Str>,
    /// Who produced it: `control`, `agent.X`, `tool.Y`, `gate.Z`, `human.U`.
    pub producer: Str,
    #[serde(flatten)]
    pub body: Body,
    /// RFC 3339 UTC time at which the control plane recorded it.
    pub time: Str,
    /// The hash chain ([`chain`]): the digest of the line before this one
    /// (`sha256:` and 64 hex digits; the run's genesis for the first
    /// event). Set where the event is written — the run's driver, the
    /// witness writer —, not by the engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prev: Option<Str>,
}

impl Event {
    pub fn kind(&self) -> &'static str {
        self.body.kind()
    }

    /// The event id for `seq` in `run_id`.
    pub fn id_for(run_id: &str, seq: u64) -> String {
        let mut id = String::with_capacity(run_id.len() + 8);
        Event::push_id(&mut id, run_id, seq);
        id
    }

    /// Appends the event id for `seq` in `run_id` to `id`.
    pub fn push_id(id: &mut String, run_id: &str, seq: u64) {
        id.push_str(run_id);
        id.push('/');
        // Digits without the formatting machinery: this runs for every event.
        id.push_str(itoa::Buffer::new().format(seq));
    }
}

/// A reference to a content-addressed artifact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ArtifactRef {
    /// `sha256:` and the hex digest of the artifact's canonical JSON.
    pub digest: String,
    /// Size in bytes of the canonical JSON.
    pub size: u64,
}

/// Resource use of one call, or amounts reserved against a budget.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Usage {
    #[serde(default)]
    pub steps: u64,
    #[serde(default)]
    pub tokens: u64,
    #[serde(default)]
    pub tool_calls: u64,
    /// Money, in the budget's currency units.
    #[serde(default)]
    pub cost: f64,
    /// Milliseconds.
    #[serde(default)]
    pub duration_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EvaluatorResult {
    /// The evaluator as written, e.g. `predicate(len(research.items) > 0)`.
    pub evaluator: String,
    pub outcome: Outcome,
    /// Why it did not pass, or why it errored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Whether the evaluator errored, timed out or was inconclusive (then
    /// `outcome` is the gate's `on_error`, never PASS).
    #[serde(default)]
    pub error: bool,
}

/// The kind and payload of an event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", content = "payload", rename_all = "snake_case")]
pub enum Body {
    /// The run began (or, with `resumed`, a new execution of it).
    RunStarted {
        schema_version: u32,
        workflow: String,
        /// The plan's source digest: what was verified.
        plan_digest: String,
        /// The digest of the plan's content (its `content_digest`): exactly
        /// the plan that ran.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        plan_content_digest: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        input: Option<ArtifactRef>,
    },
    /// A new execution took over a run after a stop or a crash.
    RunResumed {
        schema_version: u32,
        /// The last event recorded before the resume.
        after_seq: u64,
    },
    /// The run stopped without terminating: it waits for a decision or a
    /// reconciliation. `flow resume` continues it.
    RunPaused {
        schema_version: u32,
        reason: PauseReason,
        /// The gate, node or attempt waited on.
        waiting_on: String,
    },
    /// The run ended.
    RunTerminated {
        schema_version: u32,
        /// The reason code (an end node's target, or an action's argument).
        reason: String,
        status: TerminationStatus,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<ArtifactRef>,
    },
    /// A node began a visit.
    NodeStarted {
        schema_version: u32,
        node: String,
        node_kind: NodeKind,
        /// 1 for the first visit of the node in the run.
        visit: u32,
    },
    /// A node's visit ended with an output.
    NodeCompleted {
        schema_version: u32,
        node: String,
        status: NodeStatus,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<ArtifactRef>,
    },
    /// A node's visit failed after its attempts.
    NodeFailed {
        schema_version: u32,
        node: String,
        error_code: ErrorCode,
        message: String,
    },
    /// An attempt of a node began, holding a lease.
    AttemptStarted {
        schema_version: u32,
        node: String,
        attempt_id: String,
        attempt_no: u32,
        /// `first`, `retry`, `repair`, `revise`, `replan`, `lease_expired`, `reconciled`.
        trigger_reason: TriggerReason,
    },
    /// An attempt produced a valid result.
    AttemptCompleted {
        schema_version: u32,
        node: String,
        attempt_id: String,
        attempt_no: u32,
        output: ArtifactRef,
    },
    /// An attempt failed.
    AttemptFailed {
        schema_version: u32,
        node: String,
        attempt_id: String,
        attempt_no: u32,
        error_code: ErrorCode,
        message: String,
    },
    /// One model turn of an agent.
    AgentTurn {
        schema_version: u32,
        agent: String,
        node: String,
        attempt_id: String,
        provider: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        /// The key of the request (sha256 of its canonical JSON), as in cassettes.
        request_key: String,
        usage: Usage,
        /// The tokens of the request and of the reply, as the provider
        /// counted them (`usage.tokens` is their sum); absent in traces
        /// recorded before they were split.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        input_tokens: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output_tokens: Option<u64>,
        /// Why the model stopped, per choice, as the provider said (`stop`,
        /// `length`, `tool_calls`, …); absent when it did not say.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        finish_reasons: Vec<String>,
        /// The reply, when it parsed as JSON.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reply: Option<ArtifactRef>,
        /// Why the reply was refused (then a repair turn may follow).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// A protocol message between participants.
    Message {
        schema_version: u32,
        message_type: MessageType,
        from: String,
        to: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        artifact: Option<ArtifactRef>,
    },
    /// A handoff's message was refused — its payload not of the handoff's
    /// `payload` type or of its message type's (the workflow's
    /// `messages`), an acceptance check false, an artifact that could not
    /// be handed over — and put aside with the reason, never delivered.
    DeadLetter {
        schema_version: u32,
        message_type: MessageType,
        from: String,
        to: String,
        /// Why the message was refused.
        reason: String,
        /// What was sent.
        payload: ArtifactRef,
    },
    /// Control and a payload moved between nodes.
    Handoff {
        schema_version: u32,
        from: String,
        to: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        context: ContextMode,
        /// The context slice actually passed (the fields kept).
        context_fields: Vec<String>,
        payload: ArtifactRef,
        /// Whether the acceptance checks passed (a refused handoff stops).
        accepted: bool,
        /// The artifacts handed over with it (its `artifacts`, evaluated).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        artifacts: Vec<ArtifactRef>,
    },
    /// A delegation under a contract.
    Delegation {
        schema_version: u32,
        from: String,
        to: String,
        contract: String,
        inputs: ArtifactRef,
        /// The budget the delegate receives (after attenuation).
        budget: Usage,
        /// Why the work is delegated (the delegation's `reason`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// The artifacts handed over with it (its `artifacts`, evaluated).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        artifacts: Vec<ArtifactRef>,
    },
    /// A tool call was issued (persisted before the call is made).
    ToolCallStarted {
        schema_version: u32,
        tool: String,
        node: String,
        attempt_id: String,
        /// The calling agent, when an agent asked for the call.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent: Option<String>,
        request_key: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        idempotency_key: Option<String>,
        input: ArtifactRef,
    },
    /// A tool call returned.
    ToolCallCompleted {
        schema_version: u32,
        tool: String,
        attempt_id: String,
        ok: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<ArtifactRef>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        duration_ms: u64,
    },
    /// A tool call an agent asked for and the control plane refused (not
    /// allowed for the agent, invalid input, a human said no): a probe of a
    /// restricted edge. Nothing was called.
    ToolCallRefused {
        schema_version: u32,
        tool: String,
        node: String,
        attempt_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent: Option<String>,
        reason: String,
    },
    /// A gate's outcome, with each evaluator's verdict.
    GateRecorded {
        schema_version: u32,
        gate: String,
        from: String,
        to: String,
        /// The most severe verdict of its evaluators.
        outcome: Outcome,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        evaluators: Vec<EvaluatorResult>,
        /// Who triggered the gate, on which event.
        trigger: String,
    },
    /// A decision was asked for (a gate's REQUIRES_DECISION or a human node).
    DecisionRequested {
        schema_version: u32,
        /// The gate or human node.
        subject: String,
        deciders: Vec<String>,
        decisions: Vec<Decision>,
        /// When the subject's `timeout` runs out (RFC 3339): no decision
        /// by then, and `control` records `timeout`. Absent: no timeout.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expires_at: Option<String>,
        /// Where the request goes: the `contact` of each principal it is
        /// asked of (roles expanded) that declares one, in name order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        contacts: Vec<String>,
    },
    /// A decision was recorded and applied (recorded once; resume reuses it).
    DecisionApplied {
        schema_version: u32,
        subject: String,
        decision: Decision,
        by: String,
        /// What followed: an action as `action_taken` writes it (e.g.
        /// `continue`, `revise(write)`), or `call`, `refuse`, `fail`.
        #[schemars(with = "String")]
        action: Applied,
    },
    /// The control plane took an edge.
    EdgeTaken {
        schema_version: u32,
        from: String,
        to: String,
        /// How control moved: the edge's guard, a gate, an implicit edge
        /// of the engine, or the action that jumped.
        via: Via,
    },
    /// A handler's action ran.
    ActionTaken {
        schema_version: u32,
        /// The event that fired it: `failure`, `BLOCK`, `zone_red`, …
        event: ActionEvent,
        /// Where the handler is declared: a node, gate, budget or the workflow.
        scope: HandlerScope,
        /// Written `name` or `name(arg, …)` (e.g. `revise(write)`).
        #[serde(with = "crate::rendered_action")]
        #[schemars(with = "String")]
        action: Action,
    },
    /// A `revise` or `replan` re-runs its scope: from `entry` (the node of
    /// the scope that leads to the rest), superseding the outputs of
    /// `superseded` — the scope and every node that depends on it. Every
    /// other node keeps its output; a node that runs again sees its
    /// earlier output in its context.
    Rerun {
        schema_version: u32,
        /// `revise` or `replan`.
        trigger: TriggerReason,
        /// The scope the action names: `[node]` for `revise(node)` and
        /// `replan(node)`, the gate's `replan_scope`, else `[start]`.
        scope: Vec<String>,
        entry: String,
        superseded: Vec<String>,
    },
    /// An entry was appended to a blackboard: the output of the node that
    /// writes it, after the approval or gate PASS the blackboard requires.
    BlackboardAppended {
        schema_version: u32,
        blackboard: String,
        /// The node whose output the entry is.
        node: String,
        /// The entry (the node's output artifact).
        entry: ArtifactRef,
        /// How many entries the blackboard holds with this one.
        entries: u32,
        /// Who approved the append, when the blackboard `requires: approval`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        approved_by: Option<String>,
    },
    /// A node read a blackboard as it started: its entries so far go into
    /// the node's context.
    BlackboardRead {
        schema_version: u32,
        blackboard: String,
        node: String,
        /// How many entries it read (every entry appended so far).
        entries: u32,
    },
    /// A task moved between machine states.
    StateChanged {
        schema_version: u32,
        node: String,
        machine: String,
        from: String,
        to: String,
    },
    LeaseGranted {
        schema_version: u32,
        attempt_id: String,
        lease: String,
        owner: String,
        expires_at: String,
    },
    LeaseHeartbeat {
        schema_version: u32,
        attempt_id: String,
        lease: String,
        expires_at: String,
    },
    LeaseReleased {
        schema_version: u32,
        attempt_id: String,
        lease: String,
    },
    /// A lease ran out (its holder crashed or stalled): the one recovery path.
    LeaseExpired {
        schema_version: u32,
        attempt_id: String,
        lease: String,
    },
    /// Amounts held against a budget scope before a call.
    BudgetReserved {
        schema_version: u32,
        scope: String,
        attempt_id: String,
        amount: Usage,
    },
    /// Actual use charged after a call; the rest of the reservation is released.
    BudgetSettled {
        schema_version: u32,
        scope: String,
        attempt_id: String,
        used: Usage,
        remaining: Usage,
    },
    /// The remaining share of a scope fell into another zone.
    BudgetZoneChanged {
        schema_version: u32,
        scope: String,
        from: Zone,
        to: Zone,
        /// The zone's actions, each written `name` or `name(arg, …)`.
        #[serde(with = "crate::rendered_actions")]
        #[schemars(with = "Vec<String>")]
        actions: Vec<Action>,
    },
    /// A budget limit was reached.
    BudgetExhausted {
        schema_version: u32,
        scope: String,
        limit: String,
    },
    /// A computed node's value (reference §6.1, `compute`): made by the
    /// control plane from what it read, with no data-plane call. `inputs`
    /// names each node output (or the run's `input`) the expressions read,
    /// by its artifact (`null`: it had none); `output` is the value's
    /// artifact. Trace check makes the value again from them.
    Computed {
        schema_version: u32,
        node: String,
        inputs: std::collections::BTreeMap<String, Option<ArtifactRef>>,
        output: ArtifactRef,
    },
    /// A declared event (reference §6.8, `record NAME { … }`), written by
    /// `node` as it completes or by `gate` as it records an outcome (one of
    /// the two is set). `values` holds each field's value; a field that
    /// could not be made (an expression with no value, or a value not of
    /// its type) is left out and its reason is in `errors`. `inputs` names
    /// each node output (or `input`) the fields read, by its artifact
    /// (`null`: it had none), so trace check can make the values again.
    Recorded {
        schema_version: u32,
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        gate: Option<String>,
        inputs: std::collections::BTreeMap<String, Option<ArtifactRef>>,
        values: serde_json::Map<String, Value>,
        #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
        errors: std::collections::BTreeMap<String, String>,
    },
    /// An artifact was stored (content-addressed).
    ArtifactRecorded {
        schema_version: u32,
        artifact: ArtifactRef,
        /// The node or call that produced it.
        produced_by: String,
    },
    /// A non-idempotent call's outcome is unknown after a crash.
    ReconciliationRequired {
        schema_version: u32,
        attempt_id: String,
        tool: String,
        idempotency_key: String,
    },
    /// A policy was violated: recorded by the run's monitor (reference
    /// §8.4) before the offending action takes effect, or in a witness.
    PolicyViolated {
        schema_version: u32,
        /// The policy's name.
        policy: String,
        response: PolicyResponse,
        /// The event kind that violated, or `end` for an obligation open
        /// at termination.
        offending: String,
        /// What happened and what the policy required.
        message: String,
        /// What was still owed when the run ended (the residual formula),
        /// for an obligation open at termination.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        owed: Option<String>,
    },
    /// Something worth knowing that changed nothing.
    Warning {
        schema_version: u32,
        message: String,
    },
}

impl Body {
    /// The `kind` string of this body.
    pub fn kind(&self) -> &'static str {
        match self {
            Body::RunStarted { .. } => "run_started",
            Body::RunResumed { .. } => "run_resumed",
            Body::RunPaused { .. } => "run_paused",
            Body::RunTerminated { .. } => "run_terminated",
            Body::NodeStarted { .. } => "node_started",
            Body::NodeCompleted { .. } => "node_completed",
            Body::NodeFailed { .. } => "node_failed",
            Body::AttemptStarted { .. } => "attempt_started",
            Body::AttemptCompleted { .. } => "attempt_completed",
            Body::AttemptFailed { .. } => "attempt_failed",
            Body::AgentTurn { .. } => "agent_turn",
            Body::Message { .. } => "message",
            Body::Handoff { .. } => "handoff",
            Body::DeadLetter { .. } => "dead_letter",
            Body::Delegation { .. } => "delegation",
            Body::ToolCallStarted { .. } => "tool_call_started",
            Body::ToolCallCompleted { .. } => "tool_call_completed",
            Body::ToolCallRefused { .. } => "tool_call_refused",
            Body::GateRecorded { .. } => "gate_recorded",
            Body::DecisionRequested { .. } => "decision_requested",
            Body::DecisionApplied { .. } => "decision_applied",
            Body::EdgeTaken { .. } => "edge_taken",
            Body::ActionTaken { .. } => "action_taken",
            Body::BlackboardAppended { .. } => "blackboard_appended",
            Body::BlackboardRead { .. } => "blackboard_read",
            Body::Rerun { .. } => "rerun",
            Body::StateChanged { .. } => "state_changed",
            Body::LeaseGranted { .. } => "lease_granted",
            Body::LeaseHeartbeat { .. } => "lease_heartbeat",
            Body::LeaseReleased { .. } => "lease_released",
            Body::LeaseExpired { .. } => "lease_expired",
            Body::BudgetReserved { .. } => "budget_reserved",
            Body::BudgetSettled { .. } => "budget_settled",
            Body::BudgetZoneChanged { .. } => "budget_zone_changed",
            Body::BudgetExhausted { .. } => "budget_exhausted",
            Body::Computed { .. } => "computed",
            Body::Recorded { .. } => "recorded",
            Body::ArtifactRecorded { .. } => "artifact_recorded",
            Body::ReconciliationRequired { .. } => "reconciliation_required",
            Body::PolicyViolated { .. } => "policy_violated",
            Body::Warning { .. } => "warning",
        }
    }
}

/// The JSON Schema of one trace event, as published in
/// `stdlib/schemas/trace-event.schema.json`.
pub fn event_schema() -> Value {
    let schema = schemars::schema_for!(Event);
    serde_json::to_value(schema).unwrap_or(Value::Null)
}

/// Parses a JSONL trace. Errors name the line.
pub fn parse_jsonl(text: &str) -> Result<Vec<Event>, String> {
    let mut events = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let event = event_from_str(line).map_err(|e| format!("line {}: {e}", i + 1))?;
        events.push(event);
    }
    Ok(events)
}

/// How control moved along an edge (`edge_taken.via`): a closed set,
/// written as the strings below in traces.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Via {
    /// An unguarded edge: `always`.
    Always,
    /// A `when` edge: `when GUARD`, with the guard's source text.
    When(String),
    /// The `else` edge: `else`.
    Else,
    /// Through a gate the boundary has: `gate NAME`.
    Gate(String),
    /// A parallel node to one of its branches: `fanout`.
    Fanout,
    /// A branch into the join that lists it: `join`.
    Join,
    /// A loop into the first node of a round: `loop_round`.
    LoopRound,
    /// A map into its node for item N (1-based): `map_item_N`.
    MapItem(u32),
    /// A handler's jump: `goto`, `activate`, `revise`, `replan`.
    Goto,
    Activate,
    Revise,
    Replan,
}

impl Via {
    /// The via a jumping action takes (`goto`, `activate`, `revise`, `replan`).
    pub fn of_action(name: &str) -> Option<Via> {
        Some(match name {
            "goto" => Via::Goto,
            "activate" => Via::Activate,
            "revise" => Via::Revise,
            "replan" => Via::Replan,
            _ => return None,
        })
    }

    /// Reads a via as traces write it.
    pub fn parse(text: &str) -> Option<Via> {
        Some(match text {
            "always" => Via::Always,
            "else" => Via::Else,
            "fanout" => Via::Fanout,
            "join" => Via::Join,
            "loop_round" => Via::LoopRound,
            other => {
                if let Some(guard) = other.strip_prefix("when ") {
                    Via::When(guard.to_string())
                } else if let Some(gate) = other.strip_prefix("gate ") {
                    Via::Gate(gate.to_string())
                } else if let Some(n) = other.strip_prefix("map_item_") {
                    Via::MapItem(n.parse().ok()?)
                } else {
                    Via::of_action(other)?
                }
            }
        })
    }

    /// Whether it is an edge the workflow's graph draws (a guard's, a gate's
    /// or into a join), as against one of a node's own (fan-out, rounds,
    /// items) or a handler's jump.
    pub fn is_graph_edge(&self) -> bool {
        matches!(self, Via::Always | Via::When(_) | Via::Else | Via::Gate(_) | Via::Join)
    }
}

impl fmt::Display for Via {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Via::Always => f.write_str("always"),
            Via::When(guard) => write!(f, "when {guard}"),
            Via::Else => f.write_str("else"),
            Via::Gate(gate) => write!(f, "gate {gate}"),
            Via::Fanout => f.write_str("fanout"),
            Via::Join => f.write_str("join"),
            Via::LoopRound => f.write_str("loop_round"),
            Via::MapItem(n) => write!(f, "map_item_{n}"),
            Via::Goto => f.write_str("goto"),
            Via::Activate => f.write_str("activate"),
            Via::Revise => f.write_str("revise"),
            Via::Replan => f.write_str("replan"),
        }
    }
}

impl Serialize for Via {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Via {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Via, D::Error> {
        let text = std::borrow::Cow::<str>::deserialize(deserializer)?;
        Via::parse(&text).ok_or_else(|| serde::de::Error::custom(format!("unknown via `{text}`")))
    }
}

impl JsonSchema for Via {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Via".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "How control moved: `always`, `when GUARD`, `else`, `gate NAME`, `fanout`, `join`, `loop_round`, `map_item_N`, `goto`, `activate`, `revise` or `replan`.",
            "type": "string",
            "pattern": "^(always|else|fanout|join|loop_round|goto|activate|revise|replan|when .+|gate .+|map_item_[0-9]+)$"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first event of run `r`, from the control plane, with `body`.
    fn event(body: Body) -> Event {
        Event {
            run_id: "r".into(),
            execution_id: "exec-1".into(),
            seq: 1,
            event_id: Event::id_for("r", 1).into(),
            parent_event_id: None,
            producer: "control".into(),
            body,
            time: "2026-01-01T00:00:00Z".into(),
            prev: None,
        }
    }

    #[test]
    fn actions_are_written_as_words_and_read_back_typed() {
        let revise = Action { name: ActionKind::Revise, args: vec!["write".into()] };
        let halt = Action::bare(ActionKind::Halt);
        let taken = event(Body::ActionTaken {
            schema_version: SCHEMA_VERSION,
            event: ActionEvent::Handler(HandlerEvent::Block),
            scope: HandlerScope::Gate("g".into()),
            action: revise.clone(),
        });
        let line = serde_json::to_string(&taken).unwrap();
        assert!(line.contains(r#""action":"revise(write)""#), "{line}");
        assert_eq!(event_from_str(&line).unwrap(), taken);
        assert_eq!(serde_json::from_str::<Event>(&line).unwrap(), taken);
        let zone = event(Body::BudgetZoneChanged {
            schema_version: SCHEMA_VERSION,
            scope: "workflow".into(),
            from: Zone::Green,
            to: Zone::Fuse,
            actions: vec![halt, revise],
        });
        let line = serde_json::to_string(&zone).unwrap();
        assert!(line.contains(r#""actions":["halt","revise(write)"]"#), "{line}");
        assert_eq!(event_from_str(&line).unwrap(), zone);
        // An unknown action is not a trace word.
        let bad = line.replace("\"halt\"", "\"explode\"");
        let err = event_from_str(&bad).unwrap_err().to_string();
        assert!(err.contains("unknown action `explode`"), "{err}");
        assert_eq!(Action::parse("fallback(low_budget)").unwrap().arg(), Some("low_budget"));
        assert!(Action::parse("revise(write").is_err());
    }

    #[test]
    fn a_decisions_applied_action_is_typed_and_written_as_before() {
        for (applied, text) in [
            (Applied::Action(Action { name: ActionKind::Revise, args: vec!["write".into()] }), "revise(write)"),
            (Applied::Action(Action::bare(ActionKind::Continue)), "continue"),
            (Applied::Call, "call"),
            (Applied::Refuse, "refuse"),
            (Applied::Fail, "fail"),
            (Applied::Append, "append"),
            (Applied::Judged(Outcome::RequiresDecision), "REQUIRES_DECISION"),
        ] {
            let applied_event = event(Body::DecisionApplied {
                schema_version: SCHEMA_VERSION,
                subject: "g".into(),
                decision: Decision::Approve,
                by: "ops".into(),
                action: applied.clone(),
            });
            let line = serde_json::to_string(&applied_event).unwrap();
            assert!(line.contains(&format!(r#""action":"{text}""#)), "{line}");
            assert_eq!(event_from_str(&line).unwrap(), applied_event);
            assert_eq!(Applied::parse(text).unwrap(), applied);
        }
        assert!(Applied::parse("explode").unwrap_err().contains("unknown action `explode`"));
        assert_eq!(Applied::OUTCOMES.len(), 5);
    }

    #[test]
    fn events_round_trip_with_kind_and_payload() {
        let event = event(Body::RunStarted {
            schema_version: SCHEMA_VERSION,
            workflow: "w".into(),
            plan_digest: "sha256:x".into(),
            plan_content_digest: None,
            input: None,
        });
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(json["kind"], "run_started");
        assert_eq!(json["payload"]["schema_version"], 1);
        assert_eq!(json["event_id"], "r/1");
        assert_eq!(Event::id_for("run", 0), "run/0");
        assert_eq!(Event::id_for("run", 1234567890), "run/1234567890");
        let back: Event = serde_json::from_value(json).unwrap();
        assert_eq!(back, event);
        assert_eq!(back.kind(), "run_started");
    }

    /// The published schema is the generated one (bless with FLOW_BLESS=1).
    #[test]
    #[allow(clippy::disallowed_methods)]
    fn published_schema_is_up_to_date() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../stdlib/schemas/trace-event.schema.json");
        let generated = serde_json::to_string_pretty(&event_schema()).unwrap() + "\n";
        if std::env::var_os("FLOW_BLESS").is_some() {
            std::fs::write(&path, &generated).unwrap();
        }
        let published = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            published == generated,
            "stdlib/schemas/trace-event.schema.json is stale: regenerate with FLOW_BLESS=1 cargo test -p flow-trace"
        );
    }

    #[test]
    fn the_closed_words_round_trip_and_nothing_else_parses() {
        for via in
            ["always", "when a.ok", "else", "gate g", "fanout", "join", "loop_round", "map_item_3", "goto", "activate", "revise", "replan"]
        {
            assert_eq!(Via::parse(via).map(|v| v.to_string()).as_deref(), Some(via));
        }
        assert_eq!(Via::parse("map_item_x"), None);
        let edge = |via: &str| format!(r#"{{"kind":"edge_taken","payload":{{"schema_version":1,"from":"a","to":"b","via":"{via}"}}}}"#);
        assert!(serde_json::from_str::<Body>(&edge("when a.ok")).is_ok());
        assert!(serde_json::from_str::<Body>(&edge("teleport")).is_err(), "an unknown via is not an event");
        let gate = |o: &str| {
            format!(
                r#"{{"kind":"gate_recorded","payload":{{"schema_version":1,"gate":"g","from":"a","to":"b","outcome":"{o}","evaluators":[],"trigger":"t"}}}}"#
            )
        };
        assert!(serde_json::from_str::<Body>(&gate("REQUIRES_DECISION")).is_ok());
        assert!(serde_json::from_str::<Body>(&gate("MAYBE")).is_err(), "an unknown outcome is not an event");
        let end = |st: &str| format!(r#"{{"kind":"run_terminated","payload":{{"schema_version":1,"reason":"r","status":"{st}"}}}}"#);
        assert!(serde_json::from_str::<Body>(&end("partial")).is_ok());
        assert!(serde_json::from_str::<Body>(&end("sort_of")).is_err(), "an unknown status is not an event");
        assert!(Outcome::Block > Outcome::RequiresDecision && Outcome::RequiresDecision > Outcome::Pass);
        let attempt = |t: &str| {
            format!(
                r#"{{"kind":"attempt_started","payload":{{"schema_version":1,"node":"n","attempt_id":"n#1.1","attempt_no":1,"trigger_reason":"{t}"}}}}"#
            )
        };
        for &t in TriggerReason::ALL {
            assert_eq!(TriggerReason::parse(t.as_str()), Some(t));
            assert!(serde_json::from_str::<Body>(&attempt(t.as_str())).is_ok(), "{t}");
        }
        assert!(serde_json::from_str::<Body>(&attempt("whim")).is_err(), "an unknown trigger is not an event");
    }

    #[test]
    fn policy_violations_round_trip_and_map_to_evaluations() {
        let body = Body::PolicyViolated {
            schema_version: SCHEMA_VERSION,
            policy: "ends".into(),
            response: PolicyResponse::Warn,
            offending: "end".into(),
            message: "an obligation is open at the end".into(),
            owed: Some("eventually terminated(done)".into()),
        };
        let json = serde_json::to_value(&body).unwrap();
        assert_eq!(json["kind"], "policy_violated");
        assert_eq!(json["payload"]["offending"], "end");
        assert_eq!(serde_json::from_value::<Body>(json).unwrap(), body);
        let safety = Body::PolicyViolated {
            schema_version: SCHEMA_VERSION,
            policy: "p".into(),
            response: PolicyResponse::Halt,
            offending: "node_started".into(),
            message: "m".into(),
            owed: None,
        };
        assert!(serde_json::to_value(&safety).unwrap()["payload"].get("owed").is_none());
    }

    #[test]
    fn schema_names_every_kind() {
        let schema = event_schema().to_string();
        for kind in ["run_started", "gate_recorded", "decision_applied", "lease_granted", "budget_zone_changed", "policy_violated"] {
            assert!(schema.contains(&format!("\"{kind}\"")), "{kind} missing from the schema");
        }
    }
}

pub mod wire;
