//! Closed words of the vocabulary: each an enum whose variants carry the
//! word traces (and sources) write and what it means. The meanings are the
//! registries `flow trace explain` prints and the reference documents.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a node is (reference §6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeKind {
    Agent,
    Tool,
    Human,
    Parallel,
    Map,
    Join,
    Loop,
    Flow,
    End,
    /// A value computed by the control plane from expressions.
    Compute,
    /// A kind the checker rejected (an error has been reported): never in
    /// a plan, since a program with errors has none.
    Invalid,
}

// As a word (so the fast trace reader reads it as a string); `invalid` is
// never read back.
impl Serialize for NodeKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for NodeKind {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<NodeKind, D::Error> {
        let text = std::borrow::Cow::<str>::deserialize(deserializer)?;
        NodeKind::parse(&text).ok_or_else(|| serde::de::Error::custom(format!("unknown node kind `{text}`")))
    }
}

impl schemars::JsonSchema for NodeKind {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "NodeKind".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let words: Vec<&str> = NodeKind::ALL.iter().map(|k| k.as_str()).collect();
        schemars::json_schema!({ "type": "string", "enum": words })
    }
}

impl NodeKind {
    /// Every kind, in the reference's order.
    pub const ALL: [NodeKind; 10] = [
        NodeKind::Agent,
        NodeKind::Tool,
        NodeKind::Human,
        NodeKind::Parallel,
        NodeKind::Map,
        NodeKind::Join,
        NodeKind::Loop,
        NodeKind::Flow,
        NodeKind::End,
        NodeKind::Compute,
    ];

    /// The kind's keyword (`agent`, `tool`, …), as sources and traces write it.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeKind::Agent => "agent",
            NodeKind::Tool => "tool",
            NodeKind::Human => "human",
            NodeKind::Parallel => "parallel",
            NodeKind::Map => "map",
            NodeKind::Join => "join",
            NodeKind::Loop => "loop",
            NodeKind::Flow => "flow",
            NodeKind::End => "end",
            NodeKind::Compute => "compute",
            NodeKind::Invalid => "invalid",
        }
    }

    /// The kind a keyword names.
    pub fn parse(keyword: &str) -> Option<NodeKind> {
        NodeKind::ALL.into_iter().find(|k| k.as_str() == keyword)
    }

    /// Whether a visit of the node runs attempts on the data plane (and
    /// meters them against budgets).
    pub fn has_attempts(self) -> bool {
        matches!(self, NodeKind::Agent | NodeKind::Tool)
    }
}

impl std::fmt::Display for NodeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Declares a closed word: an enum, its words and meanings, `ALL`,
/// `as_str`, `parse`, `meaning`, `Display`, serde as the word and a JSON
/// Schema `enum` of the words.
#[macro_export]
macro_rules! closed_word {
    ($(#[$doc:meta])* $vis:vis $name:ident { $($variant:ident = $word:literal : $meaning:literal),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        $vis enum $name { $(#[doc = $meaning] $variant),* }

        impl $name {
            /// Every word, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),*];

            /// The word as traces and sources write it.
            pub const fn as_str(self) -> &'static str {
                match self { $($name::$variant => $word),* }
            }

            /// What the word means (its registry entry).
            pub const fn meaning(self) -> &'static str {
                match self { $($name::$variant => $meaning),* }
            }

            /// The value a word names.
            pub fn parse(word: &str) -> Option<$name> {
                match word { $($word => Some($name::$variant),)* _ => None }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl $crate::__private::serde::Serialize for $name {
            fn serialize<S: $crate::__private::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> $crate::__private::serde::Deserialize<'de> for $name {
            fn deserialize<D: $crate::__private::serde::Deserializer<'de>>(deserializer: D) -> Result<$name, D::Error> {
                let text = <std::borrow::Cow<'de, str> as $crate::__private::serde::Deserialize>::deserialize(deserializer)?;
                $name::parse(&text).ok_or_else(|| {
                    <D::Error as $crate::__private::serde::de::Error>::custom(format!(
                        concat!("unknown ", stringify!($name), " `{}` (one of: {})"),
                        text,
                        [$($word),*].join(", ")
                    ))
                })
            }
        }

        impl $crate::__private::schemars::JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn json_schema(_: &mut $crate::__private::schemars::SchemaGenerator) -> $crate::__private::schemars::Schema {
                $crate::__private::schemars::json_schema!({ "type": "string", "enum": [$($word),*] })
            }
        }
    };
}

closed_word!(
    /// What a handler answers (reference §6.3): a node's, a gate's or the
    /// workflow's events (`spec::NODE_EVENTS`, `GATE_EVENTS`,
    /// `WORKFLOW_EVENTS` and the human and loop node events), written as the
    /// source writes them; `action_taken.event` names it.
    pub HandlerEvent {
        Failure = "failure": "A node's visit failed (any error code).",
        Timeout = "timeout": "A node's attempt ran out of time.",
        BudgetExhausted = "budget_exhausted": "A budget limit was reached.",
        InvalidOutput = "invalid_output": "A node's output failed its type or schema.",
        Exhausted = "exhausted": "A loop's rounds ran out.",
        Approve = "approve": "A decision approved.",
        Revise = "revise": "A decision asked for a revision.",
        Replan = "replan": "A decision asked for a new plan.",
        Reject = "reject": "A decision rejected.",
        Pass = "PASS": "A gate passed.",
        RequiresDecision = "REQUIRES_DECISION": "A gate needs a decision.",
        Block = "BLOCK": "A gate blocked.",
        MaxHops = "max_hops": "The run took more handoffs than `max_hops`.",
        Cancelled = "cancelled": "The run was cancelled.",
        PolicyViolation = "policy_violation": "A policy was violated (its response is `escalate` or the handler's).",
        DeadLetter = "dead_letter": "A handoff's message was refused (its payload or message type, its acceptance checks) and dead-lettered.",
    }
);

closed_word!(
    /// What a receiver of a handoff sees (`handoff.context`, reference §6.5).
    pub ContextMode {
        Isolated = "isolated": "The agent sees its input: the predecessor's output or the handoff payload (the default).",
        Fork = "fork": "The agent sees every output so far.",
        Filtered = "filtered": "The agent sees only the `context_fields`, each from its input, else from the run's input.",
    }
);

closed_word!(
    /// Why an attempt started (`attempt_started.trigger_reason`).
    pub TriggerReason {
        First = "first": "The first attempt of a visit (a `goto` or an `activate` starts a visit as `first`).",
        Retry = "retry": "Another attempt after a failure (a retry policy or a `retry` action).",
        Repair = "repair": "A repair turn for invalid output.",
        Revise = "revise": "The visit re-runs a node for a `revise`.",
        Replan = "replan": "The visit re-runs a node for a `replan`.",
        LeaseExpired = "lease_expired": "The previous attempt's lease ran out (a resumed run).",
        Reconciled = "reconciled": "An unknown outcome was reconciled as to be run again (`approve` without an output), so the attempt is redone.",
    }
);

closed_word!(
    /// How a node's visit ended with an output (`node_completed.status`):
    /// on its own, or after a failure by a `skip` or another going-on action.
    pub NodeStatus {
        Completed = "completed": "The visit produced its output.",
        Skipped = "skipped": "The visit failed and a `skip` went on without its output.",
        Degraded = "degraded": "The visit failed and a `degrade` went on with a partial result.",
    }
);

closed_word!(
    /// How a run ended (`run_terminated.status`, reference §6.7).
    pub TerminationStatus {
        Success = "success": "The run reached a success end and met its `success` condition and `output` type.",
        Failure = "failure": "The run failed.",
        Partial = "partial": "The run ended with a partial result (`fallback`, `return_partial`).",
        Escalated = "escalated": "A human rejected an escalation.",
        Cancelled = "cancelled": "The run was cancelled.",
    }
);

closed_word!(
    /// A gate's (or an evaluator's) outcome. Ordered by severity: when
    /// evaluators disagree, the most severe wins (BLOCK > REQUIRES_DECISION >
    /// PASS, reference §6.4).
    pub Outcome {
        Pass = "PASS": "The gate lets the crossing happen.",
        RequiresDecision = "REQUIRES_DECISION": "A human (or an agent) must decide before the crossing.",
        Block = "BLOCK": "The crossing does not happen; the gate's `BLOCK` handler answers.",
    }
);

impl From<Outcome> for HandlerEvent {
    /// A gate outcome's handler event.
    fn from(outcome: Outcome) -> HandlerEvent {
        match outcome {
            Outcome::Pass => HandlerEvent::Pass,
            Outcome::RequiresDecision => HandlerEvent::RequiresDecision,
            Outcome::Block => HandlerEvent::Block,
        }
    }
}

/// The event that fired an action (`action_taken.event`): a handler's
/// event, or a budget scope entering a zone (`zone_yellow`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ActionEvent {
    Handler(HandlerEvent),
    Zone(Zone),
}

impl ActionEvent {
    pub const fn as_str(self) -> &'static str {
        match self {
            ActionEvent::Handler(e) => e.as_str(),
            ActionEvent::Zone(Zone::Green) => "zone_green",
            ActionEvent::Zone(Zone::Yellow) => "zone_yellow",
            ActionEvent::Zone(Zone::Red) => "zone_red",
            ActionEvent::Zone(Zone::Fuse) => "zone_fuse",
        }
    }

    /// The event a word names.
    pub fn parse(word: &str) -> Option<ActionEvent> {
        match word.strip_prefix("zone_") {
            Some(zone) => Zone::parse(zone).map(ActionEvent::Zone),
            None => HandlerEvent::parse(word).map(ActionEvent::Handler),
        }
    }

    /// Every word, handler events first.
    pub fn all() -> impl Iterator<Item = ActionEvent> {
        HandlerEvent::ALL.iter().map(|e| ActionEvent::Handler(*e)).chain(Zone::ALL.iter().map(|z| ActionEvent::Zone(*z)))
    }
}

impl From<HandlerEvent> for ActionEvent {
    fn from(event: HandlerEvent) -> ActionEvent {
        ActionEvent::Handler(event)
    }
}

impl std::fmt::Display for ActionEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for ActionEvent {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for ActionEvent {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<ActionEvent, D::Error> {
        let text = std::borrow::Cow::<str>::deserialize(deserializer)?;
        ActionEvent::parse(&text).ok_or_else(|| serde::de::Error::custom(format!("unknown ActionEvent `{text}`")))
    }
}

impl schemars::JsonSchema for ActionEvent {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ActionEvent".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let words: Vec<&str> = ActionEvent::all().map(ActionEvent::as_str).collect();
        schemars::json_schema!({ "type": "string", "enum": words })
    }
}

closed_word!(
    /// Why an attempt or a node's visit failed (`attempt_failed.error_code`,
    /// `node_failed.error_code`): a closed registry, so handlers, trace check
    /// and witnesses name failures the same way.
    pub ErrorCode {
        InvalidOutput = "invalid_output": "The output did not match the declared type or schema (after any repair turns).",
        InvalidInput = "invalid_input": "The input did not match the declared type or schema of the tool, agent or node.",
        InvalidSchema = "invalid_schema": "A declared JSON Schema could not be compiled, so nothing can be validated against it.",
        ToolError = "tool_error": "The tool ran and reported a failure (non-zero exit, an error reply, a refused call).",
        Timeout = "timeout": "The attempt or call ran longer than its `timeout`.",
        ProviderError = "provider_error": "The model provider failed (unreachable, an HTTP error, a reply that is not a chat completion).",
        BudgetExhausted = "budget_exhausted": "A budget limit was reached before or during the attempt.",
        Cancelled = "cancelled": "The run was cancelled while the attempt was open.",
        EvalError = "eval_error": "An expression (an argument, a guard, `until`, a map's `over`) could not be evaluated on the run's values.",
        UnknownTool = "unknown_tool": "The tool is not declared in the plan.",
        UnknownAgent = "unknown_agent": "The node's agent is not declared in the plan.",
        QuotaExhausted = "quota_exhausted": "An MCP server's `quota` of calls per run was used up.",
        MaxTurns = "max_turns": "An agent used its `max_turns` model turns without producing an output.",
        InputTooLarge = "input_too_large": "A model turn's input would exceed `max_input_tokens`: it was not sent.",
        NotLocal = "not_local": "A model turn on data labelled private had no `local` provider to go to: it was not sent.",
        ConfirmationRefused = "confirmation_refused": "A human refused a call that needed confirmation.",
        MaxVisits = "max_visits": "The node was entered more often than its `max_visits`.",
        TooManyItems = "too_many_items": "A map's list is longer than its `max_items`.",
        Unsupported = "unsupported": "The node's kind is not supported by this runtime yet.",
        ContractRejected = "contract_rejected": "A delegate's result broke its contract: its `output` type or its `accept` checks.",
        IllegalTransition = "illegal_transition": "The node's output would move its task along a transition its state machine does not have.",
        Conflict = "conflict": "A join with `conflicts: fail` received different results for the same field.",
        HandoffRefused = "handoff_refused": "A handoff's acceptance checks (its `accept`, or the payload's declared type) refused the payload.",
        DelegationRefused = "delegation_refused": "A delegation's inputs did not match its contract's `inputs` type.",
        UnknownOutcome = "unknown_outcome": "A non-idempotent call's outcome is unknown after a crash and was not retried.",
    }
);

impl ErrorCode {
    /// The handler event a node's failed visit raises (reference §6.3):
    /// `timeout` and `invalid_output` their own, every other code
    /// `failure` (whose handler also answers the two).
    pub const fn event(self) -> HandlerEvent {
        match self {
            ErrorCode::Timeout => HandlerEvent::Timeout,
            ErrorCode::InvalidOutput => HandlerEvent::InvalidOutput,
            _ => HandlerEvent::Failure,
        }
    }

    /// Whether an attempt failing with this code is not retried: the run
    /// is stopping (its budget is spent, or it was cancelled).
    pub const fn stops_the_run(self) -> bool {
        matches!(self, ErrorCode::BudgetExhausted | ErrorCode::Cancelled)
    }
}

closed_word!(
    /// A decision on a gate's REQUIRES_DECISION or a human node
    /// (`decision_applied.decision`, reference §6.4).
    pub Decision {
        Approve = "approve": "Go on as if the gate passed.",
        Revise = "revise": "Run the producing node again with the decider's notes.",
        Replan = "replan": "Run the planning node again.",
        Reject = "reject": "Take the subject's reject handler (by default: terminate).",
        Timeout = "timeout": "No decision came within the subject's `timeout`: recorded by `control`, the `timeout` handler runs.",
    }
);

impl Decision {
    /// The handler event the decision raises (a handler for it overrides
    /// the default action).
    pub const fn event(self) -> HandlerEvent {
        match self {
            Decision::Approve => HandlerEvent::Approve,
            Decision::Revise => HandlerEvent::Revise,
            Decision::Replan => HandlerEvent::Replan,
            Decision::Reject => HandlerEvent::Reject,
            Decision::Timeout => HandlerEvent::Timeout,
        }
    }

    /// The decisions a principal may choose (every word but `timeout`),
    /// in the reference's order: a gate's default `decisions`.
    pub const CHOICES: &'static [Decision] = &[Decision::Approve, Decision::Revise, Decision::Replan, Decision::Reject];
}

closed_word!(
    /// Why a run stopped without terminating (`run_paused.reason`).
    pub PauseReason {
        AwaitingDecision = "awaiting_decision": "A gate or human node waits for a decision (`flow approve`, then `flow resume`).",
        ReconciliationRequired = "reconciliation_required": "A non-idempotent call's outcome is unknown after a crash (`flow approve RUN reconcile.ATTEMPT`, then `flow resume`).",
        Cycle = "cycle": "Witness traces only: the run repeats from the event `waiting_on` names (a lasso).",
    }
);

closed_word!(
    /// A budget zone: the share of a scope's limit that remains
    /// (`budget_zone_changed.from`/`to`, reference §7.2).
    pub Zone {
        Green = "green": "Plenty left: nothing happens.",
        Yellow = "yellow": "Running low: the zone's actions run (e.g. `warn`).",
        Red = "red": "Nearly exhausted: the zone's actions run (e.g. `degrade`).",
        Fuse = "fuse": "Almost nothing left: the zone's actions run (e.g. `return_partial`).",
    }
);

closed_word!(
    /// What a run monitor does when a policy is violated
    /// (`policy_violated.response`, reference §8).
    pub PolicyResponse {
        Warn = "warn": "Record the violation; the run continues.",
        Block = "block": "The offending event does not happen and the run stops.",
        Halt = "halt": "The run stops after the offending event.",
        Escalate = "escalate": "A human decides whether the offending event happens.",
    }
);

closed_word!(
    /// A protocol message between participants (`message.message_type`).
    pub MessageType {
        TaskAssign = "TASK_ASSIGN": "A delegator assigned a task to a delegate.",
        TaskReport = "TASK_REPORT": "A delegate reported a task's result.",
        Query = "QUERY": "A participant asked another.",
        Response = "RESPONSE": "The answer to a query.",
        VoteRequest = "VOTE_REQUEST": "A vote was asked for.",
        Vote = "VOTE": "A vote was cast.",
        ApprovalRequest = "APPROVAL_REQUEST": "A call waits for a human's confirmation.",
    }
);

/// The termination reasons the control plane chooses itself (every other
/// reason is an `end` node's target or an action's argument, written by
/// the flow's author): `flow trace explain` and the reference list them.
/// `NODE_failed` stands for any node's name followed by `_failed`,
/// `escalation_DECISION` for `escalation_` and a decision.
pub const ENGINE_REASONS: &[(&str, &str)] = &[
    ("NODE_failed", "The node's visit failed and no handler, `on_failure` or workflow `failure` handler answered it."),
    ("budget_exhausted", "A budget limit was reached and nothing handled `budget_exhausted`."),
    ("max_hops", "The run took more handoffs than the workflow's `max_hops` and nothing handled `max_hops`."),
    ("partial_result", "A `return_partial` action (a budget zone's, say) ended the run with what it had (status partial)."),
    ("fallback", "A `fallback` action without a reason ended the run (status partial)."),
    ("halted", "A `halt` action stopped the run."),
    ("policy_violation", "A policy's monitor halted the run after the offending event (response `halt`, or an escalation that was rejected)."),
    ("policy_blocked", "A policy's monitor stopped the run before the offending event (response `block`)."),
    ("escalation_DECISION", "A human answered an `escalate` action with something other than `approve` (status escalated), e.g. `escalation_reject`."),
    ("cancelled", "The run was cancelled (status cancelled)."),
    ("invalid_input", "The run's input did not match the workflow's declared `input` type."),
    ("no_start", "The workflow has no node to start from."),
    ("unknown_node", "Control moved to a node the plan does not have."),
    ("dead_end", "A node completed and no edge leaving it could be taken."),
    ("EVENT", "A `terminate` action without a reason, outside a gate with a `reason`: the handled event in lower case (`block`, `reject`, `exhausted`, …)."),
];

/// Words written one after another with `sep` between them (`approve/reject`).
pub fn join<W: std::fmt::Display>(words: &[W], sep: &str) -> String {
    words.iter().map(|w| w.to_string()).collect::<Vec<_>>().join(sep)
}

/// One documented set of words: where traces write them and what each
/// means (`flow trace explain` prints them; the reference lists them).
#[derive(Debug, Clone, PartialEq)]
pub struct Registry {
    /// What the words are, e.g. `error code`.
    pub name: &'static str,
    /// The event fields that hold them.
    pub fields: &'static str,
    /// Each word and its meaning.
    pub words: Vec<(&'static str, &'static str)>,
}

fn entries<W: Copy>(all: &[W], word: fn(W) -> &'static str, meaning: fn(W) -> &'static str) -> Vec<(&'static str, &'static str)> {
    all.iter().map(|w| (word(*w), meaning(*w))).collect()
}

/// Every registry of closed words (and the engine's own termination
/// reasons), in the order `flow trace explain` lists them.
pub fn registries() -> Vec<Registry> {
    vec![
        Registry {
            name: "error code",
            fields: "attempt_failed.error_code, node_failed.error_code",
            words: entries(ErrorCode::ALL, ErrorCode::as_str, ErrorCode::meaning),
        },
        Registry { name: "termination reason (chosen by the engine)", fields: "run_terminated.reason", words: ENGINE_REASONS.to_vec() },
        Registry {
            name: "handler event",
            fields: "action_taken.event (and `zone_<zone>`)",
            words: entries(HandlerEvent::ALL, HandlerEvent::as_str, HandlerEvent::meaning),
        },
        Registry {
            name: "decision",
            fields: "decision_requested.decisions, decision_applied.decision",
            words: entries(Decision::ALL, Decision::as_str, Decision::meaning),
        },
        Registry {
            name: "pause reason",
            fields: "run_paused.reason",
            words: entries(PauseReason::ALL, PauseReason::as_str, PauseReason::meaning),
        },
        Registry {
            name: "budget zone",
            fields: "budget_zone_changed.from, budget_zone_changed.to",
            words: entries(Zone::ALL, Zone::as_str, Zone::meaning),
        },
        Registry {
            name: "policy response",
            fields: "policy_violated.response",
            words: entries(PolicyResponse::ALL, PolicyResponse::as_str, PolicyResponse::meaning),
        },
        Registry {
            name: "action",
            fields: "action_taken.action, budget_zone_changed.actions (written `name` or `name(arg, …)`)",
            words: entries(ActionKind::ALL, ActionKind::as_str, ActionKind::meaning),
        },
        Registry {
            name: "gate outcome",
            fields: "gate_recorded.outcome, gate_recorded.evaluators[].outcome",
            words: entries(Outcome::ALL, Outcome::as_str, Outcome::meaning),
        },
        Registry {
            name: "context mode",
            fields: "handoff.context",
            words: entries(ContextMode::ALL, ContextMode::as_str, ContextMode::meaning),
        },
        Registry {
            name: "trigger reason",
            fields: "attempt_started.trigger_reason",
            words: entries(TriggerReason::ALL, TriggerReason::as_str, TriggerReason::meaning),
        },
        Registry {
            name: "node status",
            fields: "node_completed.status",
            words: entries(NodeStatus::ALL, NodeStatus::as_str, NodeStatus::meaning),
        },
        Registry {
            name: "run status",
            fields: "run_terminated.status",
            words: entries(TerminationStatus::ALL, TerminationStatus::as_str, TerminationStatus::meaning),
        },
        Registry {
            name: "message type",
            fields: "message.message_type",
            words: entries(MessageType::ALL, MessageType::as_str, MessageType::meaning),
        },
    ]
}

/// Every registry entry for `word` (a word may be in several: `timeout`
/// is an error code, a handler event and a decision). A reason ending in
/// `_failed` is the `NODE_failed` entry.
pub fn explain_word(word: &str) -> Vec<(&'static str, &'static str, &'static str)> {
    let mut found = Vec::new();
    for registry in registries() {
        let key = match registry.fields {
            "run_terminated.reason" if word.ends_with("_failed") && word != "_failed" => "NODE_failed",
            "run_terminated.reason" if word.starts_with("escalation_") => "escalation_DECISION",
            _ => word,
        };
        if let Some((_, meaning)) = registry.words.iter().find(|(w, _)| *w == key) {
            found.push((registry.name, registry.fields, *meaning));
        }
    }
    found
}

/// Where a handler (or an action's source) is declared
/// (`action_taken.scope`): written `node.NAME`, `gate.NAME`, `budget.SCOPE`,
/// `workflow` or `escalation`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HandlerScope {
    Node(String),
    Gate(String),
    /// A budget scope's zone actions or its `on_exhausted` (`run`, `agent.A`, …).
    Budget(String),
    Workflow,
    /// The action an approved escalation lets happen.
    Escalation,
}

impl HandlerScope {
    /// The scope as traces write it.
    pub fn to_word(&self) -> String {
        match self {
            HandlerScope::Node(n) => format!("node.{n}"),
            HandlerScope::Gate(g) => format!("gate.{g}"),
            HandlerScope::Budget(b) => format!("budget.{b}"),
            HandlerScope::Workflow => "workflow".into(),
            HandlerScope::Escalation => "escalation".into(),
        }
    }

    /// The scope a word names.
    pub fn parse(word: &str) -> Option<HandlerScope> {
        let named = |prefix: &str| word.strip_prefix(prefix).filter(|n| !n.is_empty()).map(str::to_string);
        match word {
            "workflow" => Some(HandlerScope::Workflow),
            "escalation" => Some(HandlerScope::Escalation),
            _ => named("node.")
                .map(HandlerScope::Node)
                .or_else(|| named("gate.").map(HandlerScope::Gate))
                .or_else(|| named("budget.").map(HandlerScope::Budget)),
        }
    }

    /// The gate, when the scope is one.
    pub fn gate(&self) -> Option<&str> {
        match self {
            HandlerScope::Gate(g) => Some(g),
            _ => None,
        }
    }
}

impl std::fmt::Display for HandlerScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_word())
    }
}

impl serde::Serialize for HandlerScope {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_word())
    }
}

impl<'de> serde::Deserialize<'de> for HandlerScope {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<HandlerScope, D::Error> {
        let text = std::borrow::Cow::<str>::deserialize(deserializer)?;
        HandlerScope::parse(&text).ok_or_else(|| {
            serde::de::Error::custom(format!("unknown handler scope `{text}` (node.NAME, gate.NAME, budget.SCOPE, workflow or escalation)"))
        })
    }
}

impl schemars::JsonSchema for HandlerScope {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "HandlerScope".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string", "pattern": "^(workflow|escalation|(node|gate|budget)\\..+)$" })
    }
}

/// An attempt's id (`attempt_started.attempt_id`): `{node}#{visit}.{attempt_no}`.
pub fn attempt_id(node: &str, visit: u32, attempt_no: u32) -> String {
    let mut id = String::with_capacity(node.len() + 8);
    id.push_str(node);
    id.push('#');
    id.push_str(&visit.to_string());
    id.push('.');
    id.push_str(&attempt_no.to_string());
    id
}

/// The node an attempt id (or a key that starts with one) belongs to.
pub fn attempt_node(id: &str) -> &str {
    id.split('#').next().unwrap_or(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_reads_back_as_itself_and_others_are_refused_by_name() {
        for registry in registries() {
            assert!(!registry.words.is_empty(), "{}", registry.name);
            for (word, meaning) in &registry.words {
                assert!(!meaning.is_empty(), "{word}");
            }
        }
        for code in ErrorCode::ALL {
            let text = serde_json::to_string(code).unwrap();
            assert_eq!(text, format!("\"{}\"", code.as_str()));
            assert_eq!(serde_json::from_str::<ErrorCode>(&text).unwrap(), *code);
        }
        let err = serde_json::from_str::<ErrorCode>("\"oops\"").unwrap_err().to_string();
        assert!(err.contains("unknown ErrorCode `oops`") && err.contains("invalid_output"), "{err}");
        for event in ActionEvent::all() {
            assert_eq!(ActionEvent::parse(event.as_str()), Some(event));
        }
        assert_eq!(ActionEvent::parse("zone_red"), Some(ActionEvent::Zone(Zone::Red)));
        assert_eq!(ActionEvent::parse("zone_purple"), None);
        for kind in NodeKind::ALL {
            assert_eq!(serde_json::from_str::<NodeKind>(&serde_json::to_string(&kind).unwrap()).unwrap(), kind);
        }
        assert!(serde_json::from_str::<NodeKind>("\"invalid\"").is_err());
    }

    #[test]
    fn a_word_in_several_registries_is_explained_in_each() {
        let timeout: Vec<&str> = explain_word("timeout").iter().map(|(name, _, _)| *name).collect();
        assert_eq!(timeout, ["error code", "handler event", "decision"]);
        let failed = explain_word("write_failed");
        assert_eq!(failed.len(), 1);
        assert!(failed[0].2.contains("failed and no handler"), "{failed:?}");
        assert!(explain_word("no_such_word").is_empty());
    }

    #[test]
    fn the_failure_rule_of_an_error_code() {
        assert_eq!(ErrorCode::Timeout.event(), HandlerEvent::Timeout);
        assert_eq!(ErrorCode::InvalidOutput.event(), HandlerEvent::InvalidOutput);
        assert_eq!(ErrorCode::ToolError.event(), HandlerEvent::Failure);
        assert!(ErrorCode::BudgetExhausted.stops_the_run() && ErrorCode::Cancelled.stops_the_run());
        assert!(!ErrorCode::Timeout.stops_the_run());
        assert_eq!(Decision::CHOICES.len(), 4);
        assert!(!Decision::CHOICES.contains(&Decision::Timeout));
    }

    #[test]
    fn attempt_ids_name_their_node() {
        let id = attempt_id("write", 2, 3);
        assert_eq!(id, "write#2.3");
        assert_eq!(attempt_node(&id), "write");
        assert_eq!(attempt_node("write#2.3/t1"), "write");
    }

    #[test]
    fn handler_scopes_are_words_with_names() {
        for scope in [
            HandlerScope::Node("write".into()),
            HandlerScope::Gate("g".into()),
            HandlerScope::Budget("agent.a".into()),
            HandlerScope::Workflow,
            HandlerScope::Escalation,
        ] {
            assert_eq!(HandlerScope::parse(&scope.to_word()), Some(scope));
        }
        assert_eq!(HandlerScope::parse("node."), None);
        assert_eq!(HandlerScope::parse("edge.x"), None);
    }
}

closed_word!(
    /// What an action does (reference §6.3; `spec::ACTIONS` gives each its
    /// arguments): the word of a handler's, a zone's or a default's action.
    pub ActionKind {
        Continue = "continue": "Go on along the guarded edge.",
        Retry = "retry": "Run the node again (bounded by its retry policy).",
        Skip = "skip": "Mark the node skipped and go on.",
        Degrade = "degrade": "Go on with a degraded (partial) result.",
        Decide = "decide": "Ask the gate's deciders for a decision.",
        Terminate = "terminate": "End the run with this reason code.",
        Goto = "goto": "Continue at a node.",
        Activate = "activate": "Start a standby node, then continue.",
        Revise = "revise": "Re-run a node and what depends on it (§6.3, re-runs).",
        Replan = "replan": "Re-run the gate's declared replan scope from its entry, and what depends on it (the whole workflow when none); `replan(node)` re-runs from that node (§6.3, re-runs).",
        Escalate = "escalate": "Ask a human; the run waits.",
        Fallback = "fallback": "End with a partial result under this reason code.",
        ReturnPartial = "return_partial": "End with the partial result so far.",
        CompressContext = "compress_context": "Compress the agents' context.",
        SwitchModel = "switch_model": "Route further turns to another provider.",
        SkipReasoning = "skip_reasoning": "Ask for answers without reasoning steps.",
        Warn = "warn": "Record a warning and go on.",
        Halt = "halt": "Stop the run at once.",
    }
);

/// An action and its arguments (a reason, a node, a principal or a
/// provider). A plan stores it as `{name, args}`; a trace writes it as
/// `name` or `name(arg, …)` and reads it back typed: `Action::parse` is the
/// one place that text is split.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct Action {
    pub name: ActionKind,
    /// The arguments: a reason, a node, a principal or a provider
    /// (`spec::ACTIONS` says which).
    pub args: Vec<String>,
}

impl Action {
    /// An action without arguments.
    pub fn bare(name: ActionKind) -> Action {
        Action { name, args: Vec::new() }
    }

    /// The first argument, if any.
    pub fn arg(&self) -> Option<&str> {
        self.args.first().map(String::as_str)
    }

    /// The action as trace events write it: `name` or `name(arg, …)`.
    pub fn render(&self) -> String {
        if self.args.is_empty() {
            self.name.as_str().to_string()
        } else {
            format!("{}({})", self.name, self.args.join(", "))
        }
    }

    /// An action as [`Action::render`] writes it.
    pub fn parse(text: &str) -> Result<Action, String> {
        let (name, args) = match text.split_once('(') {
            Some((name, rest)) => {
                let Some(inner) = rest.strip_suffix(')') else {
                    return Err(format!("action `{text}` does not end with `)`"));
                };
                (name, inner.split(',').map(str::trim).filter(|a| !a.is_empty()).map(str::to_string).collect())
            }
            None => (text, Vec::new()),
        };
        let name = ActionKind::parse(name.trim()).ok_or_else(|| {
            let words: Vec<&str> = ActionKind::ALL.iter().map(|k| k.as_str()).collect();
            format!("unknown action `{}` (one of: {})", name.trim(), words.join(", "))
        })?;
        Ok(Action { name, args })
    }
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name.as_str())?;
        if !self.args.is_empty() {
            write!(f, "({})", self.args.join(", "))?;
        }
        Ok(())
    }
}

/// What a decision applied (`decision_applied.action`): an action (a
/// handler's, or the decision's default), or one of the three outcomes
/// that are not actions.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Applied {
    /// An action, written as `action_taken` writes it.
    Action(Action),
    /// A confirmation approved: the tool call is made.
    Call,
    /// A confirmation refused: the call is not made.
    Refuse,
    /// The subject fails: a human node whose decision timed out, or a
    /// reconciled call that did not happen (`reject`: a failed call).
    Fail,
    /// A blackboard append approved: the entry is appended.
    Append,
    /// A `human` evaluator's verdict: the outcome it gives its gate
    /// (`PASS` for approve, else the evaluator's `fail` outcome).
    Judged(Outcome),
}

impl Applied {
    /// The words that are not actions, with their meanings.
    pub const OUTCOMES: &'static [(&'static str, &'static str)] = &[
        ("call", "A confirmation was approved: the tool call is made."),
        ("refuse", "A confirmation was refused (the call is not made), or a blackboard append (the entry is not appended)."),
        ("fail", "The subject fails: a human node whose decision timed out, or a reconciled call that did not happen (a failed call)."),
        ("append", "A blackboard append was approved: the entry is appended (`refuse`: it is not)."),
        ("PASS, BLOCK, REQUIRES_DECISION", "A `human` evaluator's verdict: the outcome it gives its gate."),
    ];

    /// As `decision_applied.action` writes it.
    pub fn parse(text: &str) -> Result<Applied, String> {
        Ok(match text {
            "call" => Applied::Call,
            "refuse" => Applied::Refuse,
            "fail" => Applied::Fail,
            "append" => Applied::Append,
            _ if Outcome::parse(text).is_some() => Applied::Judged(Outcome::parse(text).expect("an outcome")),
            _ => Applied::Action(Action::parse(text)?),
        })
    }
}

impl From<Action> for Applied {
    fn from(action: Action) -> Applied {
        Applied::Action(action)
    }
}

impl std::fmt::Display for Applied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Applied::Action(a) => a.fmt(f),
            Applied::Call => f.write_str("call"),
            Applied::Refuse => f.write_str("refuse"),
            Applied::Fail => f.write_str("fail"),
            Applied::Append => f.write_str("append"),
            Applied::Judged(outcome) => f.write_str(outcome.as_str()),
        }
    }
}

impl serde::Serialize for Applied {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Applied {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Applied, D::Error> {
        let text = std::borrow::Cow::<str>::deserialize(deserializer)?;
        Applied::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// Serde for an action written as trace events write it (`revise(write)`),
/// for `#[serde(with = "rendered_action")]`.
pub mod rendered_action {
    use super::Action;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(action: &Action, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(action)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Action, D::Error> {
        let text = std::borrow::Cow::<str>::deserialize(deserializer)?;
        Action::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// [`rendered_action`] for a list of actions.
pub mod rendered_actions {
    use super::Action;
    use serde::ser::SerializeSeq;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(actions: &[Action], serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(actions.len()))?;
        for action in actions {
            seq.serialize_element(&action.to_string())?;
        }
        seq.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<Action>, D::Error> {
        let texts = Vec::<std::borrow::Cow<str>>::deserialize(deserializer)?;
        texts.iter().map(|t| Action::parse(t).map_err(serde::de::Error::custom)).collect()
    }
}
