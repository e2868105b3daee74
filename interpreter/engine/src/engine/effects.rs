//! Effects: what a machine asks to happen next. A machine never calls
//! another machine: it records what it decided (through the recorder) and
//! returns the transitions that follow as effects ([`Engine::then`]); the
//! coordinator (`coordinator.rs`) applies them one at a time, depth first
//! and in order, so the events they record come in the order a call would
//! have made them.
//!
//! An action a policy holds for a human (`escalate`) is an effect too: the
//! one that was about to record the violating event, kept with a blank
//! cause and applied, with the approval as its cause, if a human approves.

use super::*;

/// A transition of the run, to be applied by the coordinator.
#[derive(Debug, Clone)]
pub(super) enum Effect {
    /// A node's visit starts.
    StartNode {
        name: String,
        input: Value,
        trigger: TriggerReason,
        cause: Str,
    },
    /// The branch `next` of a fan-out is entered (then the one after it;
    /// after the last, the parallel node completes).
    Fanout {
        node: String,
        input: Value,
        started: Str,
        next: usize,
    },
    /// An end node completes and the run terminates with its reason.
    FinishEnd {
        name: String,
        reason: String,
        status: TerminationStatus,
        cause: Str,
    },
    /// A parallel node completes (its branches are started).
    FinishParallel {
        name: String,
        cause: Str,
    },
    /// A node completes with its output (its reference, when known).
    CompleteNode {
        name: String,
        output: Value,
        status: NodeStatus,
        cause: Str,
        known: Option<Box<ArtifactRef>>,
    },
    /// A completed node's appends, from the `next`-th blackboard it writes;
    /// then its completion goes on.
    Append {
        node: String,
        next: usize,
        cause: Str,
    },
    /// A node's or a gate's declared records, from the `next`-th; then
    /// what follows them (the node's completion goes on, the gate acts).
    WriteRecords {
        owner: RecordOwner,
        next: usize,
        cause: Str,
    },
    /// The edge after a completed node is chosen.
    Follow {
        from: String,
        cause: Str,
    },
    /// An attempt of a node starts: its step is metered first.
    StartAttempt {
        node: NodeRef,
        trigger: TriggerReason,
        cause: Str,
    },
    /// An attempt whose step was metered begins (after the zones it crossed).
    BeginAttempt {
        node: NodeRef,
        trigger: TriggerReason,
        cause: Str,
    },
    AttemptSucceeded {
        attempt: String,
        output: Value,
        cause: Str,
    },
    AttemptFailed {
        attempt: String,
        code: ErrorCode,
        message: String,
        cause: Str,
    },
    /// A node's visit failed: its handler for `event` answers.
    NodeFailed {
        node: String,
        event: HandlerEvent,
        code: ErrorCode,
        message: String,
        cause: Str,
    },
    /// The workflow's handler for `event`, else the run terminates.
    WorkflowEvent {
        event: HandlerEvent,
        node: Option<String>,
        cause: Str,
        default_reason: String,
        message: String,
    },
    /// The next turn of an agent's attempt.
    NextTurn {
        attempt: String,
        delay: u64,
        cause: Str,
    },
    /// A settled turn's reply acted on (after the zones it crossed).
    ActOnReply {
        attempt: String,
        node: String,
        agent: String,
        reply: Box<AgentReply>,
        error: Option<String>,
        turn: Str,
    },
    CallTool {
        call: Box<PendingCall>,
        cause: Str,
    },
    /// A tool call refused before it ran, fed back to the agent.
    ToolRefused {
        attempt: String,
        tool: String,
        message: String,
        cause: Str,
    },
    /// A settled tool result validated and acted on (after its zones).
    AfterTool {
        attempt: String,
        from_agent: bool,
        tool: String,
        result: Box<ToolResult>,
        done: Str,
    },
    /// A boundary crossed: its gate, else its handoffs and the target.
    Cross {
        from: String,
        to: String,
        via: Via,
        cause: Str,
    },
    /// An edge taken and its target entered.
    Enter {
        from: String,
        to: String,
        via: Via,
        cause: Str,
    },
    /// A held handoff resumed: crossed from the start, then the target.
    Transfer {
        from: String,
        to: String,
        input: Box<Value>,
        cause: Str,
    },
    JoinArrival {
        join: String,
        from: String,
        cause: Str,
    },
    TryJoin {
        join: String,
        cause: Str,
    },
    RoundEnd {
        lp: String,
        cause: Str,
    },
    MapNext {
        map: String,
        cause: Str,
    },
    EvaluateGate {
        gate: Box<Gate>,
        cause: Str,
    },
    /// A gate's outcome recorded and its action taken.
    RecordGate {
        name: String,
        body: Box<Body>,
        action: Action,
        ctx: Box<Ctx>,
        cause: Str,
    },
    /// A decision asked of principals.
    Ask {
        decision: Box<Decision>,
        principals: Vec<String>,
        prompt: Option<String>,
        decisions: Vec<flow_trace::Decision>,
        cause: Str,
    },
    /// A human's answer applied to what it decides.
    Decide {
        decision: Box<Decision>,
        request_event: String,
        answer: Box<HumanAnswer>,
    },
    /// A handler's action taken.
    Act {
        action: Action,
        ctx: Box<Ctx>,
        scope: HandlerScope,
        cause: Str,
    },
    /// Budget zones crossed, in order, with their actions.
    Zones {
        changes: Vec<ZoneChange>,
        cause: Str,
    },
    Exhausted {
        ex: Exhausted,
        node: Option<String>,
        cause: Str,
    },
    Terminate {
        reason: String,
        status: TerminationStatus,
        cause: Str,
        message: Option<String>,
    },
    /// A lost command's attempt expires (resume).
    Expire {
        key: String,
        attempt: String,
        unknown_tool: Option<String>,
        cause: Str,
    },
}

impl Effect {
    /// The effect with its cause replaced: a held action resumed under the
    /// approval that released it.
    pub(super) fn with_cause(mut self, new: &str) -> Effect {
        let new = Str::from(new);
        match &mut self {
            Effect::StartNode { cause, .. }
            | Effect::FinishEnd { cause, .. }
            | Effect::FinishParallel { cause, .. }
            | Effect::CompleteNode { cause, .. }
            | Effect::Follow { cause, .. }
            | Effect::Append { cause, .. }
            | Effect::WriteRecords { cause, .. }
            | Effect::StartAttempt { cause, .. }
            | Effect::BeginAttempt { cause, .. }
            | Effect::AttemptSucceeded { cause, .. }
            | Effect::AttemptFailed { cause, .. }
            | Effect::NodeFailed { cause, .. }
            | Effect::WorkflowEvent { cause, .. }
            | Effect::NextTurn { cause, .. }
            | Effect::CallTool { cause, .. }
            | Effect::ToolRefused { cause, .. }
            | Effect::Cross { cause, .. }
            | Effect::Enter { cause, .. }
            | Effect::Transfer { cause, .. }
            | Effect::JoinArrival { cause, .. }
            | Effect::TryJoin { cause, .. }
            | Effect::RoundEnd { cause, .. }
            | Effect::MapNext { cause, .. }
            | Effect::EvaluateGate { cause, .. }
            | Effect::RecordGate { cause, .. }
            | Effect::Ask { cause, .. }
            | Effect::Act { cause, .. }
            | Effect::Zones { cause, .. }
            | Effect::Exhausted { cause, .. }
            | Effect::Terminate { cause, .. }
            | Effect::Expire { cause, .. } => *cause = new,
            Effect::Fanout { started, .. } => *started = new,
            Effect::ActOnReply { turn, .. } => *turn = new,
            Effect::AfterTool { done, .. } => *done = new,
            // A decision's cause is its request.
            Effect::Decide { .. } => {}
        }
        self
    }
}

/// Effects asked for often, by name.
impl Engine {
    /// A node's visit failed with `code` (the `failure` handler answers).
    pub(super) fn node_failed(&mut self, node: &str, code: ErrorCode, message: String, cause: &Str) {
        self.then(Effect::NodeFailed { node: node.to_string(), event: HandlerEvent::Failure, code, message, cause: cause.clone() });
    }

    /// An attempt failed with `code`.
    pub(super) fn fail_attempt(&mut self, attempt: &str, code: ErrorCode, message: impl Into<String>, cause: &Str) {
        self.then(Effect::AttemptFailed { attempt: attempt.to_string(), code, message: message.into(), cause: cause.clone() });
    }

    /// A node's visit starts.
    pub(super) fn then_start(&mut self, name: &str, input: Value, trigger: TriggerReason, cause: &Str) {
        self.then(Effect::StartNode { name: name.to_string(), input, trigger, cause: cause.clone() });
    }

    /// A node completes with `output`.
    pub(super) fn then_complete(&mut self, name: &str, output: Value, status: NodeStatus, cause: &Str) {
        self.then(Effect::CompleteNode { name: name.to_string(), output, status, cause: cause.clone(), known: None });
    }

    /// A handler's action is taken.
    pub(super) fn then_act(&mut self, action: Action, ctx: Ctx, scope: HandlerScope, cause: &Str) {
        self.then(Effect::Act { action, ctx: Box::new(ctx), scope, cause: cause.clone() });
    }

    /// The run terminates (once the effects before it are applied).
    pub(super) fn end_run(&mut self, reason: &str, status: TerminationStatus, cause: &Str, message: Option<String>) {
        self.then(Effect::Terminate { reason: reason.to_string(), status, cause: cause.clone(), message });
    }
}

/// The blank cause of a held action (see [`Effect::with_cause`]).
pub(super) fn held() -> Str {
    Str::from("")
}
