//! The control plane: a deterministic state machine over the plan.
//!
//! The engine decides and records. It never performs I/O: it emits trace
//! events (each with its `seq`, assigned here and nowhere else) and
//! [`Command`]s for the data plane, and consumes the [`Response`]s that
//! come back. Given the same plan, input, clock readings and responses in
//! the same order, it emits the same events — which is what makes resume
//! by replaying the journal possible.

use crate::budget::{Budgets, Exhausted, Scope, ZoneChange};
use crate::clock::{rfc3339, Clock};
use crate::eval::{self, Env};
use crate::journal::{artifact_ref, artifact_ref_of};
use crate::keys::CommandKey;
use crate::prompt;
use crate::proto::*;
use crate::template::template;
use crate::validate::{ty_to_schema, Validator};
use flow_check::ceilings::{self, TurnCeiling};
use flow_check::events;
use flow_check::index::PlanIndex;
use flow_check::ir::{Action, ActionKind, Decl, Gate, Guard, HandlerEvent, Node, Program, TExpr, Value as IrValue, Workflow};
use flow_check::ir::{NodeKind, TransferKind};
use flow_check::semantics::{self, FailureStep};
use flow_check::types::Ty;
use flow_check::view::{Budget, Conflicts, Effect, EvaluatorRef, Expect, PolicyResponse};
use flow_policy::{Automaton, Monitor, Obs};
use flow_trace::{
    ActionEvent, ArtifactRef, Body, ContextMode, ErrorCode, EvaluatorResult, Event, HandlerScope, MessageType, NodeStatus, Outcome,
    PauseReason, Str, TerminationStatus, TriggerReason, Usage, Via, SCHEMA_VERSION,
};
use indexmap::{IndexMap, IndexSet};
use rustc_hash::{FxBuildHasher, FxHashMap, FxHashSet};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

const V: u32 = SCHEMA_VERSION;

/// Where a run stands.
#[derive(Debug, Clone, PartialEq)]
pub enum RunStatus {
    Running,
    /// Waiting for a decision or a reconciliation (`flow approve`, then `flow resume`).
    Paused {
        reason: PauseReason,
        waiting_on: String,
    },
    Terminated {
        reason: String,
        status: String,
        budget_exhausted: bool,
    },
}

/// Identity and environment of one execution of a run.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub run_id: String,
    pub execution_id: String,
    /// The plan's source digest (`run_started`'s `plan_digest`).
    pub plan_digest: String,
    /// The plan's content digest, when it has one (`run_started`'s
    /// `plan_content_digest`).
    pub plan_content_digest: Option<String>,
    pub clock: Arc<dyn Clock>,
    /// The lease owner recorded on attempts (host/process).
    pub owner: String,
    /// Lease time-to-live in milliseconds.
    pub lease_ttl_ms: u64,
}

/// A decision being waited for, and what it decides.
#[derive(Debug, Clone)]
enum Decision {
    Gate {
        gate: String,
    },
    HumanNode {
        node: String,
    },
    Escalation {
        principal: String,
        ctx: Ctx,
    },
    Reconcile {
        attempt: String,
    },
    /// A `confirm: true` tool call waiting for a human's go-ahead.
    Confirm {
        attempt: String,
        tool: String,
        input: Value,
        key_template: Option<String>,
        agent: Option<String>,
    },
    /// An escalated policy violation: approve lets the held action happen.
    Policy {
        policy: String,
        held: Box<Held>,
    },
}

impl Decision {
    /// The subject a decision is asked and recorded under.
    fn subject(&self) -> String {
        match self {
            Decision::Gate { gate, .. } => gate.clone(),
            Decision::HumanNode { node } => node.clone(),
            Decision::Escalation { principal, .. } => format!("escalation.{principal}"),
            Decision::Reconcile { attempt } => format!("reconcile.{attempt}"),
            Decision::Confirm { attempt, tool, .. } => format!("confirm.{tool}.{attempt}"),
            Decision::Policy { policy, .. } => format!("policy.{policy}"),
        }
    }
}

/// An action held back before it recorded an event that would violate an
/// `escalate` policy: taken as it would have been if a human approves.
/// Each variant is the call that was about to record the event.
#[derive(Debug, Clone)]
enum Held {
    StartNode { name: String, input: Value, trigger: TriggerReason },
    CallTool { attempt: String, tool: String, input: Value, key_template: Option<String>, agent: Option<String>, delay: u64 },
    Transfer { from: String, to: String, input: Value },
    CompleteNode { name: String, output: Value, status: NodeStatus },
    EndNode { name: String, reason: String, status: TerminationStatus },
    ParallelDone { name: String },
    NodeFailed { node: String, event: HandlerEvent, code: ErrorCode, message: String },
    ToolRefused { attempt: String, tool: String, message: String },
    Gate { name: String, body: Box<Body>, action: Action, ctx: Ctx },
    Decision { decision: Box<Decision>, request_event: String, answer: HumanAnswer },
    Zones { changes: Vec<ZoneChange> },
    Terminate { reason: String, status: TerminationStatus, message: Option<String> },
}

/// Whether a policy's response (reference §8.4) acts before the offending
/// event is recorded: `block` (the event does not happen; the run stops)
/// and `escalate` (a human decides whether it happens). `warn` records it
/// and goes on; `halt` lets it happen and stops the run right after.
fn acts_before(response: PolicyResponse) -> bool {
    matches!(response, PolicyResponse::Block | PolicyResponse::Escalate)
}

/// One policy's online monitor.
#[derive(Debug)]
struct PolicyRt {
    name: String,
    response: PolicyResponse,
    /// Who is asked on escalate: the policy's `escalate_to`, else the workflow's.
    escalate_to: Vec<String>,
    description: Option<String>,
    monitor: Monitor,
    /// A violation is reported once; a reported policy is no longer monitored.
    reported: bool,
}

/// What crossing a boundary's handoffs and delegations gave.
#[derive(Debug)]
enum Crossing {
    /// Enter the target with this input, after this event.
    Enter(Value, Str),
    /// A handoff refused what crossed (the failure is handled).
    Refused,
    /// A policy holds the handoff: it blocked the run or waits for a human.
    Held,
}

/// Where a handler's action runs.
#[derive(Debug, Clone)]
struct Ctx {
    node: Option<String>,
    gate: Option<String>,
    event: ActionEvent,
}

/// The commands issued and not answered, with what each waits for.
/// Removal is O(1) (answers come in any order, and a fan-out has many
/// outstanding); [`Outstanding::entries`] gives them in issue order (for
/// recovery).
#[derive(Debug, Default)]
struct Outstanding {
    by_key: FxHashMap<String, (u64, Waiting)>,
    issued: u64,
}

impl Outstanding {
    fn insert(&mut self, key: String, waiting: Waiting) {
        self.issued += 1;
        self.by_key.insert(key, (self.issued, waiting));
    }

    fn remove(&mut self, key: &str) -> Option<Waiting> {
        self.by_key.remove(key).map(|(_, w)| w)
    }

    fn contains(&self, key: &str) -> bool {
        self.by_key.contains_key(key)
    }

    fn len(&self) -> usize {
        self.by_key.len()
    }

    fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    fn clear(&mut self) {
        self.by_key.clear();
    }

    /// Every outstanding command, in issue order.
    fn entries(&self) -> Vec<(String, Waiting)> {
        let mut all: Vec<(u64, &String, &Waiting)> = self.by_key.iter().map(|(k, (n, w))| (*n, k, w)).collect();
        all.sort_unstable_by_key(|(n, _, _)| *n);
        all.into_iter().map(|(_, k, w)| (k.clone(), w.clone())).collect()
    }
}

#[derive(Debug, Clone)]
enum Waiting {
    /// A model turn, with what was reserved for it (settled on the reply)
    /// and the per-turn ceilings the reservation assumed.
    Turn {
        attempt: String,
        provider: String,
        reserved: Usage,
        scopes: Vec<String>,
        ceiling: TurnLimits,
    },
    Tool {
        attempt: String,
        from_agent: bool,
        scopes: Vec<String>,
        reserved: Usage,
        started: Str,
        tool: String,
    },
    Human {
        decision: Decision,
        request_event: String,
    },
    Probe {
        gate: String,
        index: usize,
        item: usize,
    },
}

#[derive(Debug, Clone)]
struct Attempt {
    id: String,
    node: String,
    attempt_no: u32,
    turn: u32,
    repair_left: u32,
    tool_results: Vec<Value>,
    tool_calls: u32,
    started: Str,
    lease: String,
    repair: Option<String>,
}

#[derive(Debug, Clone, Default)]
struct NodeRt {
    visits: u32,
    attempt_no: u32,
    running: bool,
    started_event: Str,
    input: Value,
    /// The context slice a filtered handoff passed (what the agent sees).
    slice: Option<Value>,
    /// The contract the node works under, when it was delegated to.
    contract: Option<String>,
}

/// A join's branches: those that arrived since it last ran, and those
/// still running when it ran (absorbed when they finish).
#[derive(Debug, Default)]
struct JoinRt {
    arrived: IndexSet<String>,
    late: IndexSet<String>,
}

#[derive(Debug, Clone)]
struct LoopRt {
    round: u32,
}

#[derive(Debug, Clone)]
struct MapRt {
    items: Vec<Value>,
    results: Vec<Value>,
}

/// The per-turn ceilings a turn's reservation assumed: its input (the
/// declared `max_input_tokens`, else the bound of what the request holds)
/// and its completion (`max_tokens`).
#[derive(Debug, Clone, Copy, PartialEq)]
struct TurnLimits {
    input: u64,
    output: u64,
    /// Where the input ceiling comes from, for messages.
    input_from: InputCeiling,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum InputCeiling {
    Agent,
    Provider,
    /// No `max_input_tokens`: the bound of the request ([`prompt::input_token_bound`]).
    Request,
}

/// A gate evaluation waiting for probes.
#[derive(Debug, Clone)]
struct GateRt {
    results: Vec<Option<EvaluatorResult>>,
    /// Per evaluator, per item: outcomes of probes.
    /// Per evaluator, per item: a probe's outcome and whether it errored.
    probes: BTreeMap<(usize, usize), Option<(Outcome, bool)>>,
    cause: String,
    pending: usize,
}

/// The control plane of one run.
#[derive(Debug)]
pub struct Engine {
    program: Arc<Program>,
    /// The workflow run: its index in the program's workflows (see [`Engine::wf`]).
    wf_index: usize,
    cfg: RunConfig,
    seq: u64,
    start_ms: u64,
    events: Vec<Event>,
    commands: Vec<Command>,
    artifacts: Vec<(ArtifactRef, Vec<u8>)>,
    env: Env,
    nodes: IndexMap<String, NodeRt, FxBuildHasher>,
    attempts: FxHashMap<String, Attempt>,
    waiting: Outstanding,
    loops: HashMap<String, LoopRt>,
    maps: HashMap<String, MapRt>,
    joins: HashMap<String, JoinRt>,
    gates: HashMap<String, GateRt>,
    decision_rounds: HashMap<String, u32>,
    task_state: HashMap<String, String>,
    validators: FxHashMap<&'static str, FxHashMap<String, Arc<Validator>>>,
    budgets: Budgets,
    flags: Vec<String>,
    provider_override: Option<String>,
    last_output: Option<(String, ArtifactRef)>,
    /// The run's result when the workflow declares `output`: the latest
    /// output of a node whose output type is that type.
    result_output: Option<(String, ArtifactRef)>,
    status: RunStatus,
    budget_hit: bool,
    hops: HashMap<(String, String), u64>,
    /// Lookups built once: outgoing edges, gates by boundary,
    /// transfers by source, the join each branch reaches.
    /// The plan's structure, computed once (`flow_check::index`): the
    /// same index trace check reads.
    index: Arc<PlanIndex>,
    join_of: FxHashMap<String, String>,
    node_turns: HashMap<String, u32>,
    /// The envelope strings every event shares (see [`Engine::emit_as`]).
    envelope: Envelope,
    /// The instant of the step being taken (see [`Engine::at_one_instant`]).
    step_ms: Option<u64>,
    mcp_calls: HashMap<String, u64>,
    recorded_digests: FxHashSet<String>,
    /// Digests of small values by their bytes (see [`Engine::artifact_of`]).
    small_artifacts: FxHashMap<Vec<u8>, ArtifactRef>,
    pending_slice: HashMap<String, Value>,
    pending_contract: HashMap<String, String>,
    /// Approve decisions applied so far (confirmation of `confirm` tools).
    approvals: u32,
    /// The online monitors of the policies that apply to this workflow.
    policies: Vec<PolicyRt>,
    /// Model turns whose reported use went over their per-turn ceilings
    /// (each recorded as a `warning`): use the static bounds do not cover.
    ceiling_breaches: u64,
    /// Set while a resumed run replays its journal: wall-clock limits are
    /// not re-checked (the journal says what happened).
    pub replaying: bool,
}

/// A node of the run's workflow: a handle on the shared program (cheap to
/// hold across `&mut self` calls; nothing is copied).
#[derive(Debug, Clone)]
struct NodeRef {
    program: Arc<Program>,
    wf: usize,
    index: usize,
}

impl std::ops::Deref for NodeRef {
    type Target = Node;

    fn deref(&self) -> &Node {
        &self.program.workflows[self.wf].nodes[self.index]
    }
}

/// The concatenation of `parts`, allocated once.
fn concat(parts: &[&str]) -> String {
    let mut out = String::with_capacity(parts.iter().map(|p| p.len()).sum());
    for part in parts {
        out.push_str(part);
    }
    out
}

impl Engine {
    /// An engine for `workflow` of `program` (the first workflow when `None`).
    pub fn new(program: Arc<Program>, workflow: Option<&str>, cfg: RunConfig) -> Result<Engine, String> {
        let wf_index = match workflow {
            Some(name) => program.workflows.get_index_of(name).ok_or_else(|| format!("no workflow named `{name}` in the plan"))?,
            None if program.workflows.is_empty() => return Err("the plan declares no workflow".into()),
            None => 0,
        };
        let wf = &program.workflows[wf_index];
        let mut budgets = Budgets::default();
        if let Some(budget) = wf.budget(&program) {
            budgets.add(Scope::from_budget("run", &budget));
        }
        if let Some(ms) = wf.deadline_ms() {
            let scope = budgets.scopes.entry("run".into()).or_insert_with(|| Scope::from_budget("run", &Budget::default()));
            scope.limits.duration_ms = Some(scope.limits.duration_ms.map_or(ms, |d| d.min(ms)));
        }
        for (name, decl) in &program.decls {
            if decl.kind == flow_check::spec::Kind::Agent {
                if let Some(budget) = decl.budget(&program) {
                    budgets.add(Scope::from_budget(&format!("agent.{name}"), &budget));
                }
            }
        }
        let nodes = wf.nodes.keys().map(|n| (n.clone(), NodeRt::default())).collect();
        let index = Arc::new(PlanIndex::new(&program, wf));
        let mut join_of = FxHashMap::default();
        for n in wf.nodes.values().filter(|n| n.kind == NodeKind::Join) {
            for branch in &n.target {
                join_of.entry(branch.clone()).or_insert_with(|| n.name.clone());
            }
        }
        // One monitor per policy: the program's, then the workflow's.
        let mut policies = Vec::new();
        for policy in program.policies.iter().chain(&wf.policies) {
            let automaton = Automaton::new(&policy.formula).map_err(|e| format!("policy `{}`: {e}", policy.name))?;
            let mut escalate_to = policy.escalate_to();
            if escalate_to.is_empty() {
                escalate_to = wf.escalate_to();
            }
            policies.push(PolicyRt {
                name: policy.name.clone(),
                response: policy.response(),
                escalate_to,
                description: policy.description().map(str::to_string),
                monitor: Monitor::new(automaton),
                reported: false,
            });
        }
        let start_ms = cfg.clock.now_ms();
        let envelope = Envelope::new(&cfg.run_id, &cfg.execution_id);
        Ok(Engine {
            cfg,
            seq: 0,
            start_ms,
            events: Vec::new(),
            commands: Vec::new(),
            artifacts: Vec::new(),
            env: Env::new(),
            nodes,
            attempts: FxHashMap::default(),
            waiting: Outstanding::default(),
            loops: HashMap::new(),
            maps: HashMap::new(),
            joins: HashMap::new(),
            gates: HashMap::new(),
            decision_rounds: HashMap::new(),
            task_state: HashMap::new(),
            validators: FxHashMap::default(),
            budgets,
            flags: Vec::new(),
            provider_override: None,
            last_output: None,
            result_output: None,
            status: RunStatus::Running,
            budget_hit: false,
            hops: HashMap::new(),
            index,
            join_of,
            node_turns: HashMap::new(),
            envelope,
            step_ms: None,
            mcp_calls: HashMap::new(),
            recorded_digests: FxHashSet::default(),
            small_artifacts: FxHashMap::default(),
            pending_slice: HashMap::new(),
            pending_contract: HashMap::new(),
            approvals: 0,
            policies,
            ceiling_breaches: 0,
            replaying: false,
            program,
            wf_index,
        })
    }

    /// Model turns so far whose reported use went over the per-turn
    /// ceilings their reservation assumed (reference §12.2).
    pub fn ceiling_breaches(&self) -> u64 {
        self.ceiling_breaches
    }

    pub fn workflow(&self) -> &Workflow {
        self.wf()
    }

    /// The workflow run (held by the shared program, never copied).
    fn wf(&self) -> &Workflow {
        &self.program.workflows[self.wf_index]
    }

    pub fn status(&self) -> &RunStatus {
        &self.status
    }

    /// The next `seq` this engine will assign.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Events emitted since the last call, in `seq` order.
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    /// Hands back a buffer [`Engine::take_events`] gave, emptied, so the
    /// next events reuse its capacity.
    pub fn recycle_events(&mut self, mut buffer: Vec<Event>) {
        buffer.clear();
        if self.events.is_empty() && buffer.capacity() > self.events.capacity() {
            self.events = buffer;
        }
    }

    /// Commands for the data plane issued since the last call.
    pub fn take_commands(&mut self) -> Vec<Command> {
        std::mem::take(&mut self.commands)
    }

    /// Artifacts to store before the events that refer to them.
    pub fn take_artifacts(&mut self) -> Vec<(ArtifactRef, Vec<u8>)> {
        std::mem::take(&mut self.artifacts)
    }

    /// Whether the command `key` is issued and not answered.
    pub fn is_outstanding(&self, key: &str) -> bool {
        self.waiting.contains(key)
    }

    /// How many commands are issued and not answered.
    pub fn outstanding_len(&self) -> usize {
        self.waiting.len()
    }

    /// Sets the execution id of events emitted from now on (after a resume).
    pub fn set_execution(&mut self, execution_id: &str) {
        self.cfg.execution_id = execution_id.to_string();
        self.envelope.execution_id = Str::from(execution_id);
    }

    /// Node outputs so far (the run's state).
    pub fn outputs(&self) -> &Env {
        &self.env
    }

    /// Sets the instant the run started (a resumed run keeps its start).
    pub fn set_start_ms(&mut self, ms: u64) {
        self.start_ms = ms;
    }

    /// The instant the run started.
    pub fn start_ms(&self) -> u64 {
        self.start_ms
    }

    /// The time: the instant of the step being taken (the start, a
    /// response, a recovery, a cancellation: every event a step records has
    /// its instant; see [`Engine::at_one_instant`]), else the clock.
    fn now(&self) -> u64 {
        self.step_ms.unwrap_or_else(|| self.cfg.clock.now_ms())
    }

    fn elapsed(&self) -> u64 {
        self.now().saturating_sub(self.start_ms)
    }

    fn emit(&mut self, producer: &str, body: Body, parent: Option<&str>) -> Str {
        let producer = self.envelope.producer("", producer);
        self.emit_as(producer, body, parent)
    }

    /// [`Engine::emit`] with a producer already built.
    fn emit_as(&mut self, producer: Str, body: Body, parent: Option<&str>) -> Str {
        // Nothing is recorded after the run terminated (what was still
        // unwinding when it did changes nothing).
        if matches!(self.status, RunStatus::Terminated { .. }) {
            return Str::from("");
        }
        self.seq += 1;
        let now = self.now();
        let envelope = &mut self.envelope;
        let event_id = envelope.id(self.seq);
        // Events recorded within the same millisecond share its rendering.
        if envelope.time.0 != now || envelope.time.1.is_empty() {
            envelope.time = (now, Str::from(rfc3339(now)));
        }
        self.events.push(Event {
            run_id: envelope.run_id.clone(),
            execution_id: envelope.execution_id.clone(),
            seq: self.seq,
            event_id: event_id.clone(),
            parent_event_id: parent.map(|p| envelope.parent(p)),
            producer,
            body,
            time: envelope.time.1.clone(),
        });
        if !self.policies.is_empty() {
            self.monitor_last(&event_id);
        }
        event_id
    }

    // -------------------------------------------------------------- policies

    /// Feeds the event just recorded to every policy monitor. A `warn`
    /// policy it violated is reported and the run goes on; any other is
    /// reported and the run stops (`policy_violation`) before anything else
    /// is dispatched. (`block` and `escalate` policies act earlier, in
    /// [`Engine::admit`]; one reaching here is applied as `halt`.)
    fn monitor_last(&mut self, event_id: &str) {
        let Some(event) = self.events.last() else { return };
        let Some(obs) = Obs::of(&event.body) else { return };
        let seq = event.seq;
        let mut violated: Vec<(usize, String)> = Vec::new();
        for (i, p) in self.policies.iter_mut().enumerate() {
            if p.reported {
                continue;
            }
            let before = p.monitor.state();
            if p.monitor.feed(seq, &event.body) {
                p.reported = true;
                violated.push((i, p.monitor.automaton.residual(before)));
            }
        }
        if violated.is_empty() {
            return;
        }
        let offending = event.body.kind();
        let what = obs_text(&obs);
        let mut stop = None;
        for (i, required) in violated {
            let declared = self.policies[i].response;
            let applied = if declared == PolicyResponse::Warn { PolicyResponse::Warn } else { PolicyResponse::Halt };
            let mut message = self.violation_message(i, &what, &required, "");
            if declared != applied {
                message.push_str(&format!(" (declared {}; applied as halt)", declared.as_str()));
            }
            let ev = self.report(i, applied, offending, message, None, event_id);
            if applied != PolicyResponse::Warn {
                stop = Some(ev);
            }
        }
        if let Some(ev) = stop {
            self.terminate("policy_violation", TerminationStatus::Failure, &ev, None);
        }
    }

    /// `block` and `escalate` policies act before the event `obs` is
    /// recorded: returns whether the action about to record it may go on.
    /// A `block` policy it would violate is reported and the run stops
    /// (`policy_blocked`): the event never happens. Otherwise an `escalate`
    /// policy it would violate is reported and its principals are asked;
    /// the action is `held` until they answer (approve: it happens;
    /// reject: the run stops with `policy_violation`).
    fn admit(&mut self, obs: Obs<'_>, offending: &'static str, cause: &str, held: impl FnOnce() -> Held) -> bool {
        if !self.running() {
            return false;
        }
        if self.policies.is_empty() {
            return true;
        }
        let mut blocked: Vec<(usize, String)> = Vec::new();
        let mut escalated: Option<(usize, String)> = None;
        for (i, p) in self.policies.iter_mut().enumerate() {
            if p.reported || !acts_before(p.response) {
                continue;
            }
            let now = p.monitor.state();
            let automaton = &mut p.monitor.automaton;
            let mask = automaton.mask(&obs);
            if !Automaton::is_false(automaton.step(now, mask)) {
                continue;
            }
            let required = automaton.residual(now);
            match p.response {
                PolicyResponse::Block => blocked.push((i, required)),
                _ => {
                    escalated.get_or_insert((i, required));
                }
            }
        }
        if !blocked.is_empty() {
            let what = obs_text(&obs);
            let mut last = Str::from(cause);
            for (i, required) in blocked {
                let message = self.violation_message(i, &what, &required, ": blocked, it did not happen");
                last = self.report(i, PolicyResponse::Block, offending, message, None, cause);
            }
            self.terminate("policy_blocked", TerminationStatus::Failure, &last, None);
            return false;
        }
        if let Some((i, required)) = escalated {
            let message = self.violation_message(i, &obs_text(&obs), &required, ": held for a decision");
            let ev = self.report(i, PolicyResponse::Escalate, offending, message.clone(), None, cause);
            let policy = self.policies[i].name.clone();
            let principals = self.policies[i].escalate_to.clone();
            self.ask(
                Decision::Policy { policy, held: Box::new(held()) },
                principals,
                Some(message),
                vec![flow_trace::Decision::Approve, flow_trace::Decision::Reject],
                &ev,
            );
            return false;
        }
        true
    }

    fn violation_message(&self, i: usize, what: &str, required: &str, tail: &str) -> String {
        let p = &self.policies[i];
        let mut message = format!("{what} violates `{}`, which required {required}{tail}", p.name);
        if let Some(d) = &p.description {
            message.push_str(&format!(" ({d})"));
        }
        message
    }

    /// Records a policy violation (once per policy).
    fn report(&mut self, i: usize, response: PolicyResponse, offending: &str, message: String, owed: Option<String>, parent: &str) -> Str {
        self.policies[i].reported = true;
        let policy = self.policies[i].name.clone();
        self.emit(
            "control",
            Body::PolicyViolated { schema_version: V, policy, response, offending: offending.to_string(), message, owed },
            Some(parent),
        )
    }

    /// Takes an action a policy escalation held, once a human approved it.
    fn resume_held(&mut self, held: Held, cause: &str) {
        match held {
            Held::StartNode { name, input, trigger } => self.start_node(&name, input, trigger, cause),
            Held::CallTool { attempt, tool, input, key_template, agent, delay } => {
                self.call_tool(&attempt, &tool, input, key_template, agent.as_deref(), delay, cause)
            }
            Held::Transfer { from, to, input } => {
                if let Crossing::Enter(input, parent) = self.transfer(&from, &to, input, Str::from(cause)) {
                    self.start_node(&to, input, TriggerReason::First, &parent);
                }
            }
            Held::CompleteNode { name, output, status } => self.complete_node(&name, output, status, cause),
            Held::EndNode { name, reason, status } => self.finish_end(&name, &reason, status, cause),
            Held::ParallelDone { name } => self.finish_parallel(&name, cause),
            Held::NodeFailed { node, event, code, message } => {
                if let Some(n) = self.node(&node) {
                    self.node_event_failed(&n, event, code, &message, cause);
                }
            }
            Held::ToolRefused { attempt, tool, message } => self.feed_tool_error(&attempt, &tool, &message, cause),
            Held::Gate { name, body, action, ctx } => self.record_gate(&name, *body, action, ctx, cause),
            Held::Decision { decision, request_event, answer } => self.on_decision(*decision, &request_event, answer),
            Held::Zones { changes } => self.zone_changes(changes, cause),
            Held::Terminate { reason, status, message } => self.terminate(&reason, status, cause, message.as_deref()),
        }
    }

    fn store(&mut self, value: &Value, produced_by: &str, parent: Option<&str>) -> ArtifactRef {
        self.store_as(value, || produced_by.to_string(), parent)
    }

    /// [`Engine::store`], naming the producer only when the artifact is new.
    fn store_as(&mut self, value: &Value, produced_by: impl FnOnce() -> String, parent: Option<&str>) -> ArtifactRef {
        let (artifact, bytes) = self.artifact_of(value);
        // Content-addressed: recorded once per run, however often it recurs.
        if self.recorded_digests.contains(&artifact.digest) {
            return artifact;
        }
        self.recorded_digests.insert(artifact.digest.clone());
        self.artifacts.push((artifact.clone(), bytes));
        self.emit("control", Body::ArtifactRecorded { schema_version: V, artifact: artifact.clone(), produced_by: produced_by() }, parent);
        artifact
    }

    /// The reference and bytes of `value` ([`artifact_ref`]). Small values
    /// recur (nulls, flags, counts): their digests are remembered by their
    /// bytes, so each is hashed with sha256 once per run.
    fn artifact_of(&mut self, value: &Value) -> (ArtifactRef, Vec<u8>) {
        const SMALL: usize = 64;
        let bytes = serde_json::to_vec(value).unwrap_or_default();
        if bytes.len() > SMALL {
            return (artifact_ref_of(&bytes), bytes);
        }
        if let Some(artifact) = self.small_artifacts.get(&bytes) {
            return (artifact.clone(), bytes);
        }
        let artifact = artifact_ref_of(&bytes);
        self.small_artifacts.insert(bytes.clone(), artifact.clone());
        (artifact, bytes)
    }

    fn running(&self) -> bool {
        self.status == RunStatus::Running
    }

    /// A node of the workflow (shared, cheap to hold across `&mut self` calls).
    fn node(&self, name: &str) -> Option<NodeRef> {
        let index = self.wf().nodes.get_index_of(name)?;
        Some(NodeRef { program: self.program.clone(), wf: self.wf_index, index })
    }

    fn decl(&self, name: &str) -> Option<&Decl> {
        self.program.decls.get(name)
    }

    /// The compiled validator of `what` (e.g. `tool.input`) of `name`,
    /// compiled once per run; looked up without allocating.
    fn validator(&mut self, what: &'static str, name: &str, ty: &Ty) -> Result<Arc<Validator>, String> {
        if let Some(v) = self.validators.get(what).and_then(|m| m.get(name)) {
            return Ok(v.clone());
        }
        let v = Arc::new(Validator::new(ty, &self.program.types)?);
        self.validators.entry(what).or_default().insert(name.to_string(), v.clone());
        Ok(v)
    }

    // ----------------------------------------------------------------- start

    /// Starts the run with its input (at one instant).
    pub fn start(&mut self, input: Value) {
        self.at_one_instant(|engine| engine.start_at(input))
    }

    fn start_at(&mut self, input: Value) {
        let input_ref = if input.is_null() { None } else { Some(artifact_ref(&input).0) };
        let started = self.emit(
            "control",
            events::run_started(self.wf(), &self.cfg.plan_digest, self.cfg.plan_content_digest.clone(), input_ref),
            None,
        );
        if !input.is_null() {
            self.store(&input, "input", Some(&started));
        }
        if let Some(ty) = self.wf().input_type().cloned() {
            if let Ok(v) = self.validator("workflow.input", "", &ty) {
                if let Err(errors) = v.validate(&input) {
                    self.terminate("invalid_input", TerminationStatus::Failure, &started, Some(&errors.join("; ")));
                    return;
                }
            }
        }
        self.env.insert("input".into(), input.clone());
        let Some(start) = self.wf().start().map(str::to_string) else {
            self.terminate("no_start", TerminationStatus::Failure, &started, None);
            return;
        };
        self.start_node(&start, input, TriggerReason::First, &started);
    }

    // ----------------------------------------------------------------- nodes

    fn start_node(&mut self, name: &str, input: Value, trigger: TriggerReason, cause: &str) {
        if !self.running() {
            return;
        }
        let Some(node) = self.node(name) else {
            self.terminate("unknown_node", TerminationStatus::Failure, cause, Some(&format!("no node `{name}`")));
            return;
        };
        let held = || Held::StartNode { name: name.to_string(), input: input.clone(), trigger };
        if !self.admit(Obs::Started(name), "node_started", cause, held) {
            return;
        }
        let slice = if self.pending_slice.is_empty() { None } else { self.pending_slice.remove(name) };
        let contract = if self.pending_contract.is_empty() { None } else { self.pending_contract.remove(name) };
        if !self.nodes.contains_key(name) {
            self.nodes.insert(name.to_string(), NodeRt::default());
        }
        let rt = &mut self.nodes[name];
        rt.visits += 1;
        rt.attempt_no = 0;
        rt.running = true;
        rt.input = input.clone();
        rt.slice = slice;
        rt.contract = contract;
        let visit = rt.visits;
        let started = self.emit("control", events::node_started(&node, visit), Some(cause));
        self.nodes[name].started_event = started.clone();
        if let Some(max) = node.max_visits() {
            if visit as u64 > max {
                self.node_failed(&node, ErrorCode::MaxVisits, &format!("`{name}` ran {max} times already (max_visits)"), &started);
                return;
            }
        }
        // A node budget covers one visit.
        let program = self.program.clone();
        if let Some(budget) = node.budget(&program) {
            self.budgets.add(Scope::from_budget(&format!("node.{name}"), &budget));
        }
        match node.kind {
            NodeKind::Agent | NodeKind::Tool => self.start_attempt(&node, trigger, &started),
            NodeKind::Human => {
                let decisions = node.offered_decisions();
                let prompt = node.prompt().map(str::to_string);
                self.ask(Decision::HumanNode { node: name.to_string() }, node.target.clone(), prompt, decisions, &started);
            }
            NodeKind::End => {
                let reason = node.target.first().cloned().unwrap_or_else(|| name.to_string());
                self.finish_end(name, &reason, node.status(), &started);
            }
            NodeKind::Parallel => {
                let branches = node.target.clone();
                for branch in branches {
                    let edge = self.emit("control", events::edge_taken(name, &branch, Via::Fanout), Some(&started));
                    // A delegation to a branch comes from whoever led to the fan-out.
                    let delegator = self
                        .wf()
                        .transfers
                        .iter()
                        .find(|t| t.to == branch && (t.from == name || self.env.contains_key(&t.from)))
                        .map(|t| t.from.clone());
                    match delegator {
                        Some(from) => match self.transfer(&from, &branch, input.clone(), edge) {
                            Crossing::Enter(input, parent) => self.start_node(&branch, input, TriggerReason::First, &parent),
                            // A held handoff waits; the other branches go on.
                            Crossing::Held => {}
                            Crossing::Refused => return,
                        },
                        None => self.start_node(&branch, input.clone(), TriggerReason::First, &edge),
                    }
                }
                self.finish_parallel(name, &started);
            }
            NodeKind::Join => {
                // Started by its branches once ready, or entered by an edge
                // of its own: then it waits for them.
                self.try_join(name, &started);
            }
            NodeKind::Loop => {
                self.loops.insert(name.to_string(), LoopRt { round: 1 });
                if let Some(first) = node.target.first().cloned() {
                    let edge = self.emit("control", events::edge_taken(name, &first, Via::LoopRound), Some(&started));
                    self.start_node(&first, input, TriggerReason::First, &edge);
                }
            }
            NodeKind::Map => {
                let items = match node.over() {
                    Some(e) => eval::eval(e, &self.env),
                    None => Ok(Value::Array(Vec::new())),
                };
                match items {
                    Ok(Value::Array(items)) => {
                        if let Some(max) = node.max_items() {
                            if items.len() as u64 > max {
                                let msg = format!("{} items exceed max_items {max}", items.len());
                                self.node_failed(&node, ErrorCode::TooManyItems, &msg, &started);
                                return;
                            }
                        }
                        self.maps.insert(name.to_string(), MapRt { items, results: Vec::new() });
                        self.map_next(name, &started);
                    }
                    Ok(other) => {
                        let msg = format!("`over` is not a list: {other}");
                        self.node_failed(&node, ErrorCode::InvalidInput, &msg, &started)
                    }
                    Err(e) => self.node_failed(&node, ErrorCode::EvalError, &e.message, &started),
                }
            }
            other => {
                let msg = format!("node kind `{other}` is not supported by this runtime yet");
                self.node_failed(&node, ErrorCode::Unsupported, &msg, &started);
            }
        }
    }

    /// An end node completes, and the run terminates with its reason.
    fn finish_end(&mut self, name: &str, reason: &str, status: TerminationStatus, cause: &str) {
        let held = || Held::EndNode { name: name.to_string(), reason: reason.to_string(), status };
        if !self.admit(Obs::Completed(name), "node_completed", cause, held) {
            return;
        }
        let done = self.emit("control", events::node_completed(name, NodeStatus::Completed, None), Some(cause));
        self.nodes[name].running = false;
        self.terminate(reason, status, &done, None);
    }

    /// A parallel node completes once its branches are started.
    fn finish_parallel(&mut self, name: &str, cause: &str) {
        if !self.admit(Obs::Completed(name), "node_completed", cause, || Held::ParallelDone { name: name.to_string() }) {
            return;
        }
        self.emit("control", events::node_completed(name, NodeStatus::Completed, None), Some(cause));
        self.nodes[name].running = false;
    }

    fn map_next(&mut self, map: &str, cause: &str) {
        let Some(rt) = self.maps.get(map) else { return };
        let index = rt.results.len();
        if index < rt.items.len() {
            let item = rt.items[index].clone();
            if let Some(target) = self.wf().nodes.get(map).and_then(|n| n.target.first()).cloned() {
                let edge = self.emit("control", events::edge_taken(map, &target, Via::MapItem(index as u32 + 1)), Some(cause));
                self.start_node(&target, item, TriggerReason::First, &edge);
            }
        } else {
            let results = self.maps.remove(map).map(|m| m.results).unwrap_or_default();
            self.complete_node(map, Value::Array(results), NodeStatus::Completed, cause);
        }
    }

    fn scopes_for(&self, node: &Node, agent: Option<&str>) -> Vec<String> {
        if self.budgets.scopes.is_empty() {
            return Vec::new();
        }
        let mut scopes = vec!["run".to_string()];
        if let Some(agent) = agent {
            scopes.push(format!("agent.{agent}"));
        }
        scopes.push(format!("node.{}", node.name));
        scopes.push(format!("delegation.{}", node.name));
        scopes
    }

    fn max_attempts(node: &Node) -> u32 {
        node.attempts() as u32
    }

    /// The delay before attempt `attempt_no`: none before the first,
    /// `backoff` before the second, doubling after each failure.
    fn backoff(node: &Node, attempt_no: u32) -> u64 {
        if attempt_no <= 1 {
            return 0;
        }
        let Some(retry) = node.retry() else { return 0 };
        let Some(base) = retry.backoff_ms else { return 0 };
        let delay = base.saturating_mul(1u64 << (attempt_no.saturating_sub(2)).min(20));
        match retry.max_backoff_ms {
            Some(max) => delay.min(max),
            None => delay,
        }
    }

    fn start_attempt(&mut self, node: &Node, trigger: TriggerReason, cause: &str) {
        if !self.running() {
            return;
        }
        let agent = (node.kind == NodeKind::Agent).then(|| node.target.first().cloned()).flatten();
        // One control-plane step per attempt.
        let scopes = self.scopes_for(node, agent.as_deref());
        let step = Usage { steps: 1, ..Usage::default() };
        // No scopes (no budgets): nothing to reserve or settle.
        match if scopes.is_empty() { Ok(Vec::new()) } else { self.budgets.reserve(&scopes, &step, false) } {
            Ok(present) if present.is_empty() => {}
            Ok(present) => {
                let changes = self.budgets.settle(&present, &step, &step, self.elapsed());
                self.zone_changes(changes, cause);
                if !self.running() {
                    return;
                }
            }
            Err(ex) => {
                self.exhausted(ex, Some(&node.name), cause);
                return;
            }
        }
        let rt = &mut self.nodes[&node.name];
        rt.attempt_no += 1;
        let attempt_no = rt.attempt_no;
        let visit = rt.visits;
        let id = flow_trace::attempt_id(&node.name, visit, attempt_no);
        let started = self.emit("control", events::attempt_started(&node.name, &id, attempt_no, trigger), Some(cause));
        let lease = concat(&["lease:", &id]);
        let expires = rfc3339(self.now() + self.cfg.lease_ttl_ms);
        self.emit(
            "control",
            Body::LeaseGranted {
                schema_version: V,
                attempt_id: id.clone(),
                lease: lease.clone(),
                owner: self.cfg.owner.clone(),
                expires_at: expires,
            },
            Some(&started),
        );
        let repair = node.repair() as u32;
        let attempt = Attempt {
            id: id.clone(),
            node: node.name.clone(),
            attempt_no,
            turn: 0,
            repair_left: repair,
            tool_results: Vec::new(),
            tool_calls: 0,
            started: started.clone(),
            lease,
            repair: None,
        };
        self.attempts.insert(id.clone(), attempt);
        let delay = Self::backoff(node, attempt_no);
        if node.kind == NodeKind::Agent {
            self.next_turn(&id, delay, &started);
        } else {
            self.tool_node_call(node, &id, delay, &started);
        }
    }

    fn tool_node_call(&mut self, node: &Node, attempt: &str, delay: u64, cause: &str) {
        let Some(tool) = node.target.first().cloned() else { return };
        let input = match node.args() {
            Some(args) => {
                let mut out = serde_json::Map::new();
                for (k, v) in args {
                    let value = match v {
                        IrValue::Expr(e) => match eval::eval(e, &self.env) {
                            Ok(v) => v,
                            Err(e) => {
                                self.attempt_failed(attempt, ErrorCode::EvalError, &format!("argument `{k}`: {}", e.message), cause);
                                return;
                            }
                        },
                        other => eval::value_to_json(other),
                    };
                    out.insert(k.clone(), value);
                }
                Value::Object(out)
            }
            _ => self.nodes[&node.name].input.clone(),
        };
        let key_template = node.idempotency_key().map(str::to_string);
        self.call_tool(attempt, &tool, input, key_template, None, delay, cause);
    }

    #[allow(clippy::too_many_arguments)]
    fn call_tool(
        &mut self,
        attempt_id: &str,
        tool: &str,
        input: Value,
        key_template: Option<String>,
        agent: Option<&str>,
        delay: u64,
        cause: &str,
    ) {
        let Some(node) = self.attempts.get(attempt_id).and_then(|a| self.node(&a.node)) else { return };
        // The program is shared: the declaration is borrowed through its own handle.
        let program = self.program.clone();
        let Some(decl) = program.decls.get(tool) else {
            self.attempt_failed(attempt_id, ErrorCode::UnknownTool, &format!("no tool `{tool}`"), cause);
            return;
        };
        // The tool's input is validated before the call.
        if let Some(ty) = decl.input_type() {
            match self.validator("tool.input", tool, ty) {
                Ok(v) => {
                    if let Err(errors) = v.validate(&input) {
                        let msg = format!("input of `{tool}` is invalid: {}", errors.join("; "));
                        if agent.is_some() {
                            self.feed_tool_error(attempt_id, tool, &msg, cause);
                        } else {
                            self.attempt_failed(attempt_id, ErrorCode::InvalidInput, &msg, cause);
                        }
                        return;
                    }
                }
                Err(e) => {
                    self.attempt_failed(attempt_id, ErrorCode::InvalidSchema, &e, cause);
                    return;
                }
            }
        }
        // A tool that needs confirmation runs only after a human approved
        // something in this run (an approval node or a gate decision);
        // otherwise the control plane asks first.
        if decl.confirm() && self.approvals == 0 {
            let mut deciders = self.wf().escalate_to();
            if let Some(audit) = decl.audit() {
                deciders.extend(audit.visible_to);
            }
            self.ask(
                Decision::Confirm {
                    attempt: attempt_id.to_string(),
                    tool: tool.to_string(),
                    input,
                    key_template,
                    agent: agent.map(str::to_string),
                },
                deciders,
                Some(format!("`{tool}` needs a human confirmation before it runs")),
                vec![flow_trace::Decision::Approve, flow_trace::Decision::Reject],
                cause,
            );
            return;
        }
        let held = || Held::CallTool {
            attempt: attempt_id.to_string(),
            tool: tool.to_string(),
            input: input.clone(),
            key_template: key_template.clone(),
            agent: agent.map(str::to_string),
            delay,
        };
        if !self.admit(Obs::Called { tool, by: agent }, "tool_call_started", cause, held) {
            return;
        }
        // An MCP server's quota: calls per run at that server.
        if decl.variant.as_deref() == Some("mcp") {
            if let Some(quota) = decl.quota() {
                let server = decl.server().join(" ");
                let used = self.mcp_calls.entry(server.clone()).or_default();
                if *used >= quota {
                    let msg = format!("the quota of {quota} calls at `{server}` is used up");
                    if agent.is_some() {
                        self.feed_tool_error(attempt_id, tool, &msg, cause);
                    } else {
                        self.attempt_failed(attempt_id, ErrorCode::QuotaExhausted, &msg, cause);
                    }
                    return;
                }
                *used += 1;
            }
        }
        let scopes = self.scopes_for(&node, agent);
        let amount = Usage { tool_calls: 1, ..Usage::default() };
        let present = match self.budgets.reserve(&scopes, &amount, false) {
            Ok(p) => p,
            Err(ex) => {
                self.exhausted(ex, Some(&node.name), cause);
                return;
            }
        };
        let idempotency_key = match key_template {
            Some(t) => Some(template(&t, &input)),
            None if decl.effect() == Effect::NonIdempotent => Some(format!("{}:{attempt_id}", self.cfg.run_id)),
            None => None,
        };
        let request = ToolRequest { tool: tool.to_string(), input: input.clone(), idempotency_key: idempotency_key.clone() };
        let request_key = request.key();
        let input_ref = self.store_as(&input, || format!("{attempt_id}/input"), Some(cause));
        // Reserved against every enclosing scope (none: nothing to record).
        let reserved_ev = if present.is_empty() {
            Str::from(cause)
        } else {
            self.emit(
                "control",
                Body::BudgetReserved {
                    schema_version: V,
                    scope: present.join(","),
                    attempt_id: attempt_id.to_string(),
                    amount: amount.clone(),
                },
                Some(cause),
            )
        };
        let n = {
            let a = self.attempts.get_mut(attempt_id).expect("attempt exists");
            a.tool_calls += 1;
            a.tool_calls
        };
        let producer = self.envelope.producer("tool.", tool);
        let started = self.emit_as(
            producer,
            events::tool_call_started(tool, &node.name, attempt_id, agent.map(str::to_string), request_key, idempotency_key, input_ref),
            Some(&reserved_ev),
        );
        let key = CommandKey::Call { attempt: attempt_id, n }.to_key();
        self.waiting.insert(
            key.clone(),
            Waiting::Tool {
                attempt: attempt_id.to_string(),
                from_agent: agent.is_some(),
                scopes: present,
                reserved: amount,
                started,
                tool: tool.to_string(),
            },
        );
        self.commands.push(Command { key, request: Request::Tool(request), delay_ms: delay });
    }

    fn feed_tool_error(&mut self, attempt_id: &str, tool: &str, message: &str, cause: &str) {
        let node = self.attempts.get(attempt_id).map(|a| a.node.clone()).unwrap_or_default();
        let agent = self.node(&node).and_then(|n| (n.kind == NodeKind::Agent).then(|| n.target.first().cloned()).flatten());
        let held = || Held::ToolRefused { attempt: attempt_id.to_string(), tool: tool.to_string(), message: message.to_string() };
        if !self.admit(Obs::Refused { tool, by: agent.as_deref() }, "tool_call_refused", cause, held) {
            return;
        }
        let warn = self.emit("control", events::tool_call_refused(tool, &node, attempt_id, agent, message), Some(cause));
        if let Some(a) = self.attempts.get_mut(attempt_id) {
            a.tool_results.push(json!({ "tool": tool, "ok": false, "error": message }));
        }
        self.next_turn(attempt_id, 0, &warn);
    }

    fn agent_of(&self, node: &str) -> Option<(String, Decl)> {
        let agent = self.wf().nodes.get(node)?.target.first()?.clone();
        let decl = self.decl(&agent)?.clone();
        Some((agent, decl))
    }

    /// The context an agent sees, by its context policy.
    fn context_for(&self, node: &Node, agent: &Decl) -> Value {
        let rt = self.nodes.get(&node.name);
        // A filtered handoff decides what crosses: the slice it passed.
        let input = rt.and_then(|n| n.slice.clone()).or_else(|| rt.map(|n| n.input.clone())).unwrap_or(Value::Null);
        match node.agent_context(agent) {
            ContextMode::Fork => {
                let mut all = serde_json::Map::new();
                for (k, v) in &self.env {
                    all.insert(k.clone(), v.clone());
                }
                json!({ "input": input, "run": Value::Object(all) })
            }
            ContextMode::Filtered => {
                // Each named field from the node's input, else from the
                // run's input: the slice, and nothing else.
                let fields = agent.context_fields();
                if fields.is_empty() {
                    return json!({ "input": input });
                }
                let run_input = self.env.get("input");
                let mut slice = serde_json::Map::new();
                for field in &fields {
                    let value = input.get(field).or_else(|| run_input.and_then(|r| r.get(field)));
                    if let Some(value) = value {
                        slice.insert(field.clone(), value.clone());
                    }
                }
                json!({ "input": Value::Object(slice) })
            }
            ContextMode::Isolated => json!({ "input": input }),
        }
    }

    fn provider_for(&self, node: &Node, agent: &Decl) -> (String, Option<String>) {
        if let Some(p) = &self.provider_override {
            return (p.clone(), None);
        }
        let default = agent.provider().unwrap_or_default().to_string();
        let model = agent.model().map(str::to_string);
        let routes = agent.routes();
        if !routes.is_empty() {
            let task = match node.task() {
                Some(v) => eval::value_to_json(v),
                None => json!({}),
            };
            let mut env = Env::new();
            env.insert("task".into(), task);
            for route in routes {
                let holds = match (route.when, route.always) {
                    (Some(e), _) => eval::eval_bool(e, &env).unwrap_or(false),
                    (None, Some(b)) => b,
                    (None, None) => false,
                };
                if holds {
                    let provider = route.provider.unwrap_or(&default).to_string();
                    return (provider, route.model.map(str::to_string).or(model));
                }
            }
        }
        (default, model)
    }

    fn next_turn(&mut self, attempt_id: &str, delay: u64, cause: &str) {
        if !self.running() {
            return;
        }
        let Some(attempt) = self.attempts.get(attempt_id).cloned() else { return };
        let Some(node) = self.node(&attempt.node) else { return };
        let Some((agent_name, agent)) = self.agent_of(&node.name) else {
            self.attempt_failed(attempt_id, ErrorCode::UnknownAgent, "the node's agent is not declared", cause);
            return;
        };
        let max_turns = ceilings::max_turns(&node, &agent).min(u32::MAX as u64) as u32;
        if attempt.turn >= max_turns {
            self.attempt_failed(attempt_id, ErrorCode::MaxTurns, &format!("no output after {max_turns} turns"), cause);
            return;
        }
        let (provider, model) = self.provider_for(&node, &agent);
        let ceiling = TurnCeiling::of(&agent, self.decl(&provider));
        let max_tokens = ceiling.max_tokens;
        let output_ty = node.output.clone();
        let node_turn = self.node_turns.get(&node.name).copied().unwrap_or(0) + 1;
        let request = AgentRequest {
            agent: agent_name.clone(),
            node: node.name.clone(),
            provider,
            model,
            instructions: agent.instructions().map(str::to_string),
            prompt: node.prompt().map(str::to_string),
            context: self.context_for(&node, &agent),
            output_schema: ty_to_schema(&output_ty, &self.program.types),
            tools: agent.tools(),
            visit: self.nodes[&node.name].visits,
            attempt_no: attempt.attempt_no,
            turn: attempt.turn + 1,
            node_turn,
            repair: attempt.repair.clone(),
            tool_results: attempt.tool_results.clone(),
            max_tokens,
            flags: self.flags.clone(),
        };
        // What the request can hold, held against the declared input
        // ceiling before anything is reserved or sent.
        let bound = prompt::input_token_bound(&request);
        let input_from = match (agent.max_input_tokens(), ceiling.max_input_tokens) {
            (Some(_), _) => InputCeiling::Agent,
            (None, Some(_)) => InputCeiling::Provider,
            (None, None) => InputCeiling::Request,
        };
        if let Some(limit) = ceiling.max_input_tokens {
            if bound > limit {
                let whose = match input_from {
                    InputCeiling::Agent => format!("agent `{agent_name}`"),
                    _ => format!("provider `{}`", request.provider),
                };
                let msg = format!(
                    "turn {} was not sent: its request may hold up to {bound} input tokens, over the `max_input_tokens` of {limit} of {whose}",
                    attempt.turn + 1
                );
                self.attempt_failed(attempt_id, ErrorCode::InputTooLarge, &msg, cause);
                return;
            }
        }
        // The reservation is the turn's ceiling: the declared input limit
        // (else what the request can hold) and a full completion, at the
        // provider's prices — what the static bound counts per turn.
        let input = ceiling.max_input_tokens.unwrap_or(bound);
        let limits = TurnLimits { input, output: max_tokens, input_from };
        let scopes = self.scopes_for(&node, Some(&agent_name));
        let amount = Usage { tokens: input + max_tokens, cost: ceiling.cost_with_input(input), ..Usage::default() };
        let present = match self.budgets.reserve(&scopes, &amount, false) {
            Ok(p) => p,
            Err(ex) => {
                self.exhausted(ex, Some(&node.name), cause);
                return;
            }
        };
        if !present.is_empty() {
            self.emit(
                "control",
                Body::BudgetReserved {
                    schema_version: V,
                    scope: present.join(","),
                    attempt_id: attempt_id.to_string(),
                    amount: amount.clone(),
                },
                Some(cause),
            );
        }
        self.node_turns.insert(node.name.clone(), node_turn);
        let a = self.attempts.get_mut(attempt_id).expect("attempt exists");
        a.turn += 1;
        let key = CommandKey::Turn { attempt: attempt_id, turn: a.turn }.to_key();
        let provider = request.provider.clone();
        self.waiting.insert(
            key.clone(),
            Waiting::Turn { attempt: attempt_id.to_string(), provider, reserved: amount, scopes: present, ceiling: limits },
        );
        self.commands.push(Command { key, request: Request::Agent(Box::new(request)), delay_ms: delay });
    }

    // ------------------------------------------------------------- responses

    /// Feeds a data-plane response to the command `key`. The clock is read
    /// once: what the response leads to happens at that instant.
    pub fn on_response(&mut self, key: &str, response: Response) -> Result<(), String> {
        self.at_one_instant(|engine| engine.handle_response(key, response))
    }

    /// Runs `step` with the clock read once: every event it records has
    /// the same time (see [`Engine::now`]).
    fn at_one_instant<R>(&mut self, step: impl FnOnce(&mut Engine) -> R) -> R {
        let outer = self.step_ms.is_none();
        if outer {
            self.step_ms = Some(self.cfg.clock.now_ms());
        }
        let result = step(self);
        if outer {
            self.step_ms = None;
        }
        result
    }

    fn handle_response(&mut self, key: &str, response: Response) -> Result<(), String> {
        let Some(waiting) = self.waiting.remove(key) else {
            return Err(format!("no outstanding command `{key}`"));
        };
        if !self.running() {
            return Ok(());
        }
        if let Some(ex) = self.budgets.out_of_time(self.elapsed()).filter(|_| !self.replaying) {
            let cause = self.events.last().map(|e| e.event_id.clone()).unwrap_or_default();
            self.exhausted(ex, None, &cause);
            return Ok(());
        }
        match (waiting, response) {
            (Waiting::Turn { attempt, provider, reserved, scopes, ceiling }, Response::Agent(reply)) => {
                self.on_turn(&attempt, &provider, &reserved, &scopes, ceiling, reply)
            }
            (Waiting::Tool { attempt, from_agent, scopes, reserved, started, tool }, Response::Tool(result)) => {
                self.on_tool(&attempt, from_agent, &scopes, &reserved, &started, &tool, result)
            }
            (Waiting::Human { decision, request_event }, Response::Human(answer)) => self.on_decision(decision, &request_event, answer),
            (Waiting::Probe { gate, index, item }, Response::Probe(result)) => self.on_probe(&gate, index, item, result),
            (w, r) => return Err(format!("response {r:?} does not answer {w:?}")),
        }
        Ok(())
    }

    fn on_turn(&mut self, attempt_id: &str, provider: &str, reserved: &Usage, scopes: &[String], ceiling: TurnLimits, reply: AgentReply) {
        let Some(attempt) = self.attempts.get(attempt_id).cloned() else { return };
        let Some(node) = self.node(&attempt.node) else { return };
        let agent = node.target.first().cloned().unwrap_or_default();
        let provider = provider.to_string();
        let used = Usage { tokens: reply.usage.input_tokens + reply.usage.output_tokens, cost: reply.cost, ..Usage::default() };
        let reply_value =
            reply.output.clone().or_else(|| reply.tool_call.as_ref().map(|c| json!({ "tool_call": c.tool, "input": c.input })));
        let reply_ref = reply_value.as_ref().map(|v| self.store(v, &format!("{attempt_id}/turn{}", attempt.turn), Some(&attempt.started)));
        let request_key = CommandKey::Turn { attempt: attempt_id, turn: attempt.turn }.to_key();
        let error = reply.error.clone().or_else(|| {
            (reply.output.is_none() && reply.tool_call.is_none()).then(|| match &reply.text {
                Some(t) => format!("the reply is not JSON: {}", t.chars().take(120).collect::<String>()),
                None => "empty reply".to_string(),
            })
        });
        let turn = self.emit(
            &format!("agent.{agent}"),
            Body::AgentTurn {
                schema_version: V,
                agent: agent.clone(),
                node: node.name.clone(),
                attempt_id: attempt_id.to_string(),
                provider,
                model: reply.model.clone(),
                request_key,
                usage: used.clone(),
                reply: reply_ref,
                error: error.clone(),
            },
            Some(&attempt.started),
        );
        let changes = self.budgets.settle(scopes, reserved, &used, self.elapsed());
        if !scopes.is_empty() {
            let remaining = self.budgets.scopes[&scopes[0]].remaining();
            self.emit(
                "control",
                Body::BudgetSettled { schema_version: V, scope: scopes.join(","), attempt_id: attempt_id.to_string(), used, remaining },
                Some(&turn),
            );
        }
        self.check_ceilings(attempt_id, attempt.turn, &agent, ceiling, reserved, &reply, &turn);
        // A turn that used more than its scope had left exhausts it: that
        // is recorded and handled before any zone the overrun crossed.
        for scope in scopes {
            if let Some(ex) = self.budgets.used_up(scope) {
                self.exhausted(ex, Some(&node.name), &turn);
                return;
            }
        }
        self.zone_changes(changes, &turn);
        if !self.running() {
            return;
        }
        if let Some(err) = reply.error {
            self.attempt_failed(attempt_id, ErrorCode::ProviderError, &err, &turn);
            return;
        }
        if let Some(call) = reply.tool_call {
            let allowed_by_agent = self.decl(&agent).map(|d| d.holds_tool(&call.tool)).unwrap_or(false);
            let allowed_by_tool = self.decl(&call.tool).map(|d| d.allows_agent(&agent)).unwrap_or(false);
            if !(allowed_by_agent && allowed_by_tool) {
                let msg = format!("agent `{agent}` may not call `{}`", call.tool);
                self.feed_tool_error(attempt_id, &call.tool, &msg, &turn);
                return;
            }
            self.call_tool(attempt_id, &call.tool, call.input, None, Some(&agent), 0, &turn);
            return;
        }
        let Some(output) = reply.output else {
            self.repair_or_fail(attempt_id, error.unwrap_or_default(), &turn);
            return;
        };
        match self.validator("node.output", &node.name, &node.output) {
            Ok(v) => match v.validate(&output) {
                Ok(()) => self.attempt_succeeded(attempt_id, output, &turn),
                Err(errors) => self.repair_or_fail(attempt_id, format!("invalid output: {}", errors.join("; ")), &turn),
            },
            Err(e) => self.attempt_failed(attempt_id, ErrorCode::InvalidSchema, &e, &turn),
        }
    }

    /// A turn that reports more than the ceilings its reservation assumed
    /// (input above `max_input_tokens` or what the request can hold, output
    /// above `max_tokens`, money above both at the provider's prices) is
    /// metered as reported, and recorded as a warning and counted: the
    /// static budget bounds assume the ceilings hold.
    #[allow(clippy::too_many_arguments)]
    fn check_ceilings(
        &mut self,
        attempt_id: &str,
        turn: u32,
        agent: &str,
        ceiling: TurnLimits,
        reserved: &Usage,
        reply: &AgentReply,
        cause: &str,
    ) {
        let mut over = Vec::new();
        if reply.usage.input_tokens > ceiling.input {
            let what = match ceiling.input_from {
                InputCeiling::Agent => format!("the agent's `max_input_tokens` of {}", ceiling.input),
                InputCeiling::Provider => format!("the provider's `max_input_tokens` of {}", ceiling.input),
                InputCeiling::Request => format!("the {} its request can hold", ceiling.input),
            };
            over.push(format!("{} input tokens, over {what}", reply.usage.input_tokens));
        }
        if reply.usage.output_tokens > ceiling.output {
            over.push(format!("{} output tokens, over `max_tokens` of {}", reply.usage.output_tokens, ceiling.output));
        }
        if reply.cost > reserved.cost + 1e-9 {
            over.push(format!("a cost of ${:.4}, over the ${:.4} the turn's ceilings cost", reply.cost, reserved.cost));
        }
        if over.is_empty() {
            return;
        }
        self.ceiling_breaches += 1;
        let message = format!(
            "turn {turn} of `{attempt_id}` (agent `{agent}`) reported {}: metered as reported; the static budget bounds do not cover it",
            over.join(", ")
        );
        self.emit("control", events::warning(message), Some(cause));
    }

    fn repair_or_fail(&mut self, attempt_id: &str, error: String, cause: &str) {
        let Some(a) = self.attempts.get_mut(attempt_id) else { return };
        if a.repair_left > 0 {
            a.repair_left -= 1;
            a.repair = Some(error);
            self.next_turn(attempt_id, 0, cause);
        } else {
            self.attempt_failed(attempt_id, ErrorCode::InvalidOutput, &error, cause);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn on_tool(
        &mut self,
        attempt_id: &str,
        from_agent: bool,
        scopes: &[String],
        reserved: &Usage,
        started: &str,
        tool: &str,
        result: ToolResult,
    ) {
        let output_ref = result.output.as_ref().map(|v| self.store_as(v, || format!("{attempt_id}/{tool}"), Some(started)));
        let producer = self.envelope.producer("tool.", tool);
        let done = self.emit_as(
            producer,
            events::tool_call_completed(tool, attempt_id, result.ok, output_ref, result.error.clone(), result.duration_ms),
            Some(started),
        );
        let used = Usage { tool_calls: 1, ..Usage::default() };
        let changes = if scopes.is_empty() { Vec::new() } else { self.budgets.settle(scopes, reserved, &used, self.elapsed()) };
        if let Some(first) = scopes.first() {
            let remaining = self.budgets.scopes[first].remaining();
            self.emit(
                "control",
                Body::BudgetSettled { schema_version: V, scope: scopes.join(","), attempt_id: attempt_id.to_string(), used, remaining },
                Some(&done),
            );
        }
        self.zone_changes(changes, &done);
        if !self.running() {
            return;
        }
        // Output validation against the tool's output type.
        let mut result = result;
        if result.ok {
            let program = self.program.clone();
            if let Some(ty) = program.decls.get(tool).and_then(|d| d.output_type()) {
                match self.validator("tool.output", tool, ty) {
                    Ok(v) => {
                        if let Err(errors) = v.validate(result.output.as_ref().unwrap_or(&Value::Null)) {
                            result.ok = false;
                            result.error = Some(format!("output of `{tool}` is invalid: {}", errors.join("; ")));
                            result.error_code = Some(ErrorCode::InvalidOutput);
                        }
                    }
                    Err(e) => {
                        result.ok = false;
                        result.error = Some(e);
                    }
                }
            }
        }
        if from_agent {
            if let Some(a) = self.attempts.get_mut(attempt_id) {
                a.tool_results.push(json!({ "tool": tool, "ok": result.ok, "output": result.output, "error": result.error }));
            }
            self.next_turn(attempt_id, 0, &done);
            return;
        }
        if result.ok {
            let output = result.output.unwrap_or(Value::Null);
            self.attempt_succeeded(attempt_id, output, &done);
        } else {
            let code = result.error_code.unwrap_or(ErrorCode::ToolError);
            self.attempt_failed(attempt_id, code, result.error.as_deref().unwrap_or("the tool failed"), &done);
        }
    }

    fn release(&mut self, attempt_id: &str, cause: &str) {
        if let Some(a) = self.attempts.remove(attempt_id) {
            self.emit("control", Body::LeaseReleased { schema_version: V, attempt_id: a.id, lease: a.lease }, Some(cause));
        }
    }

    fn attempt_succeeded(&mut self, attempt_id: &str, output: Value, cause: &str) {
        let Some(a) = self.attempts.get(attempt_id) else { return };
        let (node, id, attempt_no) = (a.node.clone(), a.id.clone(), a.attempt_no);
        let artifact = self.store(&output, &node, Some(cause));
        let done = self.emit("control", events::attempt_completed(&node, &id, attempt_no, artifact.clone()), Some(cause));
        self.release(attempt_id, &done);
        self.complete_node_as(&node, output, NodeStatus::Completed, &done, Some(artifact));
    }

    fn attempt_failed(&mut self, attempt_id: &str, code: ErrorCode, message: &str, cause: &str) {
        let Some(a) = self.attempts.get(attempt_id).cloned() else { return };
        let failed = self.emit("control", events::attempt_failed(&a.node, &a.id, a.attempt_no, code, message), Some(cause));
        self.release(attempt_id, &failed);
        let Some(node) = self.node(&a.node) else { return };
        if code.stops_the_run() {
            return;
        }
        if a.attempt_no < Self::max_attempts(&node) {
            self.start_attempt(&node, TriggerReason::Retry, &failed);
            return;
        }
        self.node_event_failed(&node, code.event(), code, message, &failed);
    }

    fn node_failed(&mut self, node: &Node, code: ErrorCode, message: &str, cause: &str) {
        self.node_event_failed(node, HandlerEvent::Failure, code, message, cause)
    }

    /// A node's visit failed: its handler for `event`, else `on_failure`,
    /// else the workflow's handler, else the run fails.
    fn node_event_failed(&mut self, node: &Node, event: HandlerEvent, code: ErrorCode, message: &str, cause: &str) {
        let held = || Held::NodeFailed { node: node.name.clone(), event, code, message: message.to_string() };
        if !self.admit(Obs::Failed(&node.name), "node_failed", cause, held) {
            return;
        }
        let failed = self.emit("control", events::node_failed(&node.name, code, message), Some(cause));
        if let Some(rt) = self.nodes.get_mut(&node.name) {
            rt.running = false;
        }
        let ctx = Ctx { node: Some(node.name.clone()), gate: None, event: event.into() };
        let program = self.program.clone();
        let index = self.index.clone();
        let wf = &program.workflows[self.wf_index];
        match semantics::failure_step(wf, &index, node, event) {
            FailureStep::Handler { event: on } => {
                if let Some(action) = semantics::handler_on(&node.handlers, on).cloned() {
                    self.act(&action, &ctx, HandlerScope::Node(node.name.clone()), &failed);
                }
                return;
            }
            FailureStep::OnFailure(on_failure) => {
                self.act(&Action::bare(on_failure.action()), &ctx, HandlerScope::Node(node.name.clone()), &failed);
                return;
            }
            // A loop body's failure is the loop's.
            FailureStep::LoopHandler { loop_node } => {
                if let Some(action) = wf.nodes.get(loop_node).and_then(|l| semantics::handler_on(&l.handlers, HandlerEvent::Failure)) {
                    let ctx = Ctx { node: Some(loop_node.to_string()), gate: None, event: HandlerEvent::Failure.into() };
                    self.loops.remove(loop_node);
                    self.act(action, &ctx, HandlerScope::Node(loop_node.to_string()), &failed);
                }
                return;
            }
            FailureStep::WorkflowHandler | FailureStep::Fail => {}
        }
        self.workflow_event(HandlerEvent::Failure, Some(&node.name), &failed, &format!("{}_failed", node.name), message);
    }

    fn workflow_event(&mut self, event: HandlerEvent, node: Option<&str>, cause: &str, default_reason: &str, message: &str) {
        let handler = semantics::handler_on(&self.wf().handlers, event).cloned();
        match handler {
            Some(action) => {
                let ctx = Ctx { node: node.map(str::to_string), gate: None, event: event.into() };
                self.act(&action, &ctx, HandlerScope::Workflow, cause)
            }
            None => self.terminate(default_reason, TerminationStatus::Failure, cause, Some(message)),
        }
    }

    fn complete_node(&mut self, name: &str, output: Value, status: NodeStatus, cause: &str) {
        self.complete_node_as(name, output, status, cause, None)
    }

    /// [`Engine::complete_node`], with the output's reference when it is
    /// already known (not digested again).
    fn complete_node_as(&mut self, name: &str, output: Value, status: NodeStatus, cause: &str, known: Option<ArtifactRef>) {
        if !self.running() {
            return;
        }
        // A delegate's result must satisfy its contract.
        let contract = self.nodes.get(name).and_then(|n| n.contract.clone());
        if let (Some(contract), NodeStatus::Completed) = (contract, status) {
            if let Some(why) = self.contract_violation(&contract, &output) {
                if let Some(node) = self.node(name) {
                    self.node_failed(&node, ErrorCode::ContractRejected, &format!("contract `{contract}`: {why}"), cause);
                }
                return;
            }
        }
        let held = || Held::CompleteNode { name: name.to_string(), output: output.clone(), status };
        if !self.admit(Obs::Completed(name), "node_completed", cause, held) {
            return;
        }
        let artifact = if output.is_null() { None } else { Some(known.unwrap_or_else(|| self.artifact_of(&output).0)) };
        let done = self.emit("control", events::node_completed(name, status, artifact.clone()), Some(cause));
        if let Some(a) = artifact {
            let of_result_type = match self.wf().output_type() {
                Some(ty) => self.node(name).is_some_and(|n| &n.output == ty),
                None => false,
            };
            if of_result_type {
                self.result_output = Some((name.to_string(), a.clone()));
            }
            self.last_output = Some((name.to_string(), a));
        }
        self.env.insert(name.to_string(), output.clone());
        if let Some(rt) = self.nodes.get_mut(name) {
            rt.running = false;
        }
        if !self.budgets.scopes.is_empty() {
            self.budgets.scopes.shift_remove(&format!("node.{name}"));
        }
        // Task state machine.
        if let Some((machine, state)) = self.wf().nodes.get(name).and_then(|n| n.state()).map(|(m, s)| (m.to_string(), s.to_string())) {
            if let Some(m) = self.program.machines.get(&machine).cloned() {
                let from = self.task_state.get(&machine).cloned().unwrap_or_else(|| m.initial.clone());
                let legal = from == state || m.transitions.iter().any(|(a, b)| *a == from && *b == state);
                if !legal {
                    if let Some(node) = self.node(name) {
                        let msg = format!("illegal transition {machine}.{from} -> {machine}.{state}");
                        self.node_failed(&node, ErrorCode::IllegalTransition, &msg, &done);
                    }
                    return;
                }
                self.task_state.insert(machine.clone(), state.clone());
                self.emit(
                    "control",
                    Body::StateChanged { schema_version: V, node: name.to_string(), machine, from, to: state },
                    Some(&done),
                );
            }
        }
        // A map item returns to its map.
        if let Some(map) = self.index.map_of(name).map(str::to_string) {
            if let Some(rt) = self.maps.get_mut(&map) {
                rt.results.push(output);
                self.map_next(&map, &done);
                return;
            }
        }
        self.follow(name, &done);
    }

    /// Chooses the next node after `from` completed.
    fn follow(&mut self, from: &str, cause: &str) {
        if !self.running() {
            return;
        }
        let node = self.node(from);
        if node.as_ref().is_some_and(|n| n.kind == NodeKind::Parallel) {
            return;
        }
        let mut chosen: Option<(String, Via)> = None;
        let mut else_edge = None;
        let program = self.program.clone();
        let wf = &program.workflows[self.wf_index];
        let index = self.index.clone();
        for edge in index.out_of_name(wf, from) {
            match &edge.guard {
                Guard::Always => {
                    chosen = Some((edge.to.clone(), Via::Always));
                    break;
                }
                Guard::When(cond) => match eval::eval_bool(cond, &self.env) {
                    Ok(true) => {
                        chosen = Some((edge.to.clone(), Via::When(eval::render(cond))));
                        break;
                    }
                    Ok(false) => {}
                    Err(e) => {
                        if let Some(node) = node.clone() {
                            self.node_failed(&node, ErrorCode::EvalError, &format!("guard of {from} -> {}: {}", edge.to, e.message), cause);
                        }
                        return;
                    }
                },
                Guard::Else => else_edge = Some(edge.to.clone()),
            }
        }
        let chosen = chosen.or_else(|| else_edge.map(|to| (to, Via::Else)));
        let in_loop = self.index.loop_of(from).map(str::to_string);
        if let Some((to, via)) = chosen {
            // Leaving a loop body for a node outside the loop ends the round.
            if let Some(lp) = &in_loop {
                let inside = self.wf().nodes.get(lp).is_some_and(|l| l.target.contains(&to));
                if !inside {
                    self.round_end(lp, cause);
                    return;
                }
            }
            self.cross(from, &to, via, cause);
            return;
        }
        if let Some(lp) = in_loop {
            self.round_end(&lp, cause);
            return;
        }
        // A branch with no edge of its own goes to the join that lists it.
        let join = self.join_of.get(from).cloned();
        if let Some(join) = join {
            let edge = self.emit("control", events::edge_taken(from, &join, Via::Join), Some(cause));
            self.join_arrival(&join, from, &edge);
            return;
        }
        if self.waiting.is_empty() && self.attempts.is_empty() {
            self.terminate("dead_end", TerminationStatus::Failure, cause, Some(&format!("no edge leaves `{from}`")));
        }
    }

    /// Why `output` does not satisfy `contract`, if it does not.
    fn contract_violation(&mut self, contract: &str, output: &Value) -> Option<String> {
        let decl = self.decl(contract)?.clone();
        if let Some(ty) = decl.output_type() {
            match self.validator("contract.output", contract, ty) {
                Ok(v) => {
                    if let Err(errors) = v.validate(output) {
                        return Some(format!("output does not match: {}", errors.join("; ")));
                    }
                }
                Err(e) => return Some(e),
            }
        }
        let checks = decl.accept();
        if !checks.is_empty() {
            let mut env = self.env.clone();
            env.insert("output".into(), output.clone());
            for e in checks {
                match eval::eval_bool(e, &env) {
                    Ok(true) => {}
                    Ok(false) => return Some(format!("acceptance check failed: {}", eval::render(e))),
                    Err(err) => return Some(format!("acceptance check errored: {}", err.message)),
                }
            }
        }
        None
    }

    /// Branch `from` finished into `join` (the edge is recorded): the join
    /// runs once its rule is met (`flow_check::semantics::join_ready`); a
    /// branch that finishes after its join ran is absorbed.
    fn join_arrival(&mut self, join: &str, from: &str, cause: &str) {
        let rt = self.joins.entry(join.to_string()).or_default();
        if rt.late.shift_remove(from) {
            return;
        }
        rt.arrived.insert(from.to_string());
        if self.nodes.get(join).is_some_and(|n| n.running) {
            // Entered by an edge of its own: it waits for its branches.
            self.try_join(join, cause);
            return;
        }
        let Some(node) = self.node(join) else { return };
        let arrived = self.joins.get(join).map_or(0, |rt| rt.arrived.len());
        if flow_check::semantics::join_ready(flow_check::semantics::join_rule(&node), arrived, node.target.len()) {
            self.start_node(join, Value::Null, TriggerReason::First, cause);
        }
    }

    fn try_join(&mut self, join: &str, cause: &str) {
        let Some(node) = self.node(join) else { return };
        // Readiness needs only the count: the set is taken once it is ready.
        let arrived = self.joins.get(join).map_or(0, |rt| rt.arrived.len());
        if !flow_check::semantics::join_ready(flow_check::semantics::join_rule(&node), arrived, node.target.len()) {
            return;
        }
        let rt = self.joins.remove(join).unwrap_or_default();
        // Branches still to finish are absorbed when they do.
        let late: IndexSet<String> = node.target.iter().filter(|b| !rt.arrived.contains(*b)).cloned().collect();
        if !late.is_empty() {
            self.joins.insert(join.to_string(), JoinRt { arrived: IndexSet::new(), late });
        }
        let done = rt.arrived;
        // The merged output: every result in branch order, the branches by
        // name, and their conflicts kept side by side (never averaged).
        let mut results = Vec::new();
        let mut branches = serde_json::Map::new();
        let mut conflicts: Vec<Value> = Vec::new();
        for branch in &node.target {
            if done.contains(branch) {
                let out = self.env.get(branch).cloned().unwrap_or(Value::Null);
                if let Some(Value::Array(items)) = out.get("conflicts") {
                    for item in items {
                        if !conflicts.contains(item) {
                            conflicts.push(item.clone());
                        }
                    }
                }
                results.push(out.clone());
                branches.insert(branch.clone(), out);
            }
        }
        if node.conflicts() == Conflicts::Fail && !conflicts.is_empty() {
            let msg = format!("{} conflicting results (conflicts: fail)", conflicts.len());
            self.node_failed(&node, ErrorCode::Conflict, &msg, cause);
            return;
        }
        let merged = json!({ "results": results, "conflicts": conflicts, "branches": Value::Object(branches) });
        if node.output_type().is_some() {
            match self.validator("node.output", join, &node.output) {
                Ok(v) => {
                    if let Err(errors) = v.validate(&merged) {
                        let msg = format!("the merged output does not match: {}", errors.join("; "));
                        self.node_failed(&node, ErrorCode::InvalidOutput, &msg, cause);
                        return;
                    }
                }
                Err(e) => {
                    self.node_failed(&node, ErrorCode::InvalidSchema, &e, cause);
                    return;
                }
            }
        }
        self.complete_node(join, merged, NodeStatus::Completed, cause);
    }

    fn round_end(&mut self, lp: &str, cause: &str) {
        let Some(node) = self.node(lp) else { return };
        let round = self.loops.get(lp).map(|l| l.round).unwrap_or(1);
        let converged = match node.until() {
            Some(e) => match eval::eval_bool(e, &self.env) {
                Ok(b) => b,
                Err(err) => {
                    self.loops.remove(lp);
                    self.node_failed(&node, ErrorCode::EvalError, &format!("`until`: {}", err.message), cause);
                    return;
                }
            },
            None => false,
        };
        let max = node.rounds() as u32;
        if converged || round >= max {
            self.loops.remove(lp);
            let output = json!({ "rounds": round, "converged": converged });
            if !converged {
                // The loop's declared alternative, recorded once as taken.
                let handler = semantics::handler_on(&node.handlers, HandlerEvent::Exhausted).cloned();
                let action = handler.or_else(|| node.on_exhausted().cloned());
                if let Some(action) = action.filter(|a| a.name != ActionKind::Continue) {
                    self.env.insert(lp.to_string(), output);
                    let ctx = Ctx { node: Some(lp.to_string()), gate: None, event: HandlerEvent::Exhausted.into() };
                    self.act(&action, &ctx, HandlerScope::Node(lp.to_string()), cause);
                    return;
                }
                let ex = self.emit(
                    "control",
                    events::action_taken(
                        HandlerEvent::Exhausted.into(),
                        HandlerScope::Node(lp.to_string()),
                        &Action::bare(ActionKind::Continue),
                    ),
                    Some(cause),
                );
                self.complete_node(lp, output, NodeStatus::Completed, &ex);
                return;
            }
            self.complete_node(lp, output, NodeStatus::Completed, cause);
            return;
        }
        if let Some(l) = self.loops.get_mut(lp) {
            l.round += 1;
        }
        if let Some(first) = node.target.first().cloned() {
            let edge = self.emit("control", events::edge_taken(lp, &first, Via::LoopRound), Some(cause));
            let input = self.nodes.get(lp).map(|n| n.input.clone()).unwrap_or(Value::Null);
            self.start_node(&first, input, TriggerReason::First, &edge);
        }
    }

    /// Crosses the boundary `from -> to`: its gate, its handoff, then `to`.
    fn cross(&mut self, from: &str, to: &str, via: Via, cause: &str) {
        let gate = self.index.gate_on(self.wf(), from, to).cloned();
        if let Some(gate) = gate {
            self.evaluate_gate(&gate, cause);
            return;
        }
        self.enter(from, to, via, cause);
    }

    /// Takes the edge and starts `to`, applying handoffs and delegations.
    fn enter(&mut self, from: &str, to: &str, via: Via, cause: &str) {
        if !self.running() {
            return;
        }
        let edge = self.emit("control", events::edge_taken(from, to, via), Some(cause));
        let input = self.env.get(from).cloned().unwrap_or(Value::Null);
        if let Crossing::Enter(input, parent) = self.transfer(from, to, input, edge) {
            // A listed branch's edge into its join is an arrival, not a start.
            if self.join_of.get(from).is_some_and(|j| j == to) {
                self.join_arrival(to, from, &parent);
                return;
            }
            self.start_node(to, input, TriggerReason::First, &parent);
        }
    }

    /// Applies the handoffs and delegations of `from -> to` to what crosses.
    fn transfer(&mut self, from: &str, to: &str, input: Value, edge: Str) -> Crossing {
        let transfers: Vec<_> = self.index.transfers_on(self.wf(), from, to).cloned().collect();
        // What crossed, kept for a handoff a policy holds (only when policies apply).
        let original = (!self.policies.is_empty()).then(|| input.clone());
        let mut input = input;
        let mut parent = edge;
        for transfer in transfers {
            if transfer.kind == TransferKind::Handoff {
                let hops = self.hops.entry((from.to_string(), to.to_string())).or_default();
                *hops += 1;
                let hops = *hops;
                if let Some(max) = transfer.max_hops() {
                    if hops > max {
                        let ex =
                            self.emit("control", events::warning(format!("handoff {from} -> {to} exceeded max_hops {max}")), Some(&parent));
                        self.workflow_event(HandlerEvent::MaxHops, Some(from), &ex, "max_hops", "too many handoffs");
                        return Crossing::Refused;
                    }
                }
                // Policies may hold the handoff before it happens; if a human
                // lets it happen, the crossing is taken again from the start.
                let held = || Held::Transfer { from: from.to_string(), to: to.to_string(), input: original.clone().unwrap_or_default() };
                if !self.admit(Obs::HandedOff { from, to }, "handoff", &parent, held) {
                    if let Some(h) = self.hops.get_mut(&(from.to_string(), to.to_string())) {
                        *h -= 1;
                    }
                    return Crossing::Held;
                }
                // The plan carries the resolved mode (the default filled in at lowering).
                let context = transfer.handoff_context();
                let fields = transfer.context_fields();
                // `payload` is what `from` produced (the declared payload
                // type); the context slice is what the receiver sees.
                let payload = input.clone();
                let slice = match (&input, context) {
                    (Value::Object(map), ContextMode::Filtered) if !fields.is_empty() => {
                        Some(Value::Object(map.iter().filter(|(k, _)| fields.contains(k)).map(|(k, v)| (k.clone(), v.clone())).collect()))
                    }
                    _ => None,
                };
                let mut env = self.env.clone();
                env.insert("payload".into(), payload.clone());
                let mut accepted = true;
                let mut why = String::new();
                // The payload is of its declared type, or the handoff is refused.
                if let Some(ty) = transfer.payload_type() {
                    let problem = match self.validator("handoff.payload", &format!("{from} -> {to}"), ty) {
                        Ok(v) => v.validate(&payload).err().map(|errors| format!("the payload is not a `{ty}`: {}", errors.join("; "))),
                        Err(e) => Some(e),
                    };
                    if let Some(problem) = problem {
                        accepted = false;
                        why = problem;
                    }
                }
                if accepted {
                    for e in transfer.accept() {
                        match eval::eval_bool(e, &env) {
                            Ok(true) => {}
                            Ok(false) => {
                                accepted = false;
                                why = format!("acceptance check failed: {}", eval::render(e));
                                break;
                            }
                            Err(err) => {
                                accepted = false;
                                why = format!("acceptance check errored: {}", err.message);
                                break;
                            }
                        }
                    }
                }
                let payload_ref = self.store(&payload, &format!("handoff {from} -> {to}"), Some(&parent));
                let handoff = self.emit(&format!("node.{from}"), events::handoff(&transfer, payload_ref.clone(), accepted), Some(&parent));
                if !accepted {
                    if let Some(node) = self.node(from) {
                        self.node_failed(&node, ErrorCode::HandoffRefused, &why, &handoff);
                    }
                    return Crossing::Refused;
                }
                self.emit(
                    "control",
                    Body::Message {
                        schema_version: V,
                        message_type: MessageType::TaskAssign,
                        from: from.to_string(),
                        to: to.to_string(),
                        artifact: Some(payload_ref),
                    },
                    Some(&handoff),
                );
                if let Some(slice) = slice {
                    self.pending_slice.insert(to.to_string(), slice);
                }
                input = payload;
                parent = handoff;
            } else if transfer.kind == TransferKind::Delegate {
                let mut inputs = serde_json::Map::new();
                if let Some(r) = transfer.inputs() {
                    for (k, v) in r {
                        let value = match v {
                            IrValue::Expr(e) => eval::eval(e, &self.env).unwrap_or(Value::Null),
                            other => eval::value_to_json(other),
                        };
                        inputs.insert(k.clone(), value);
                    }
                }
                let inputs = Value::Object(inputs);
                let contract = transfer.contract().unwrap_or_default().to_string();
                let contract_name = contract.clone();
                // The inputs are of the contract's `inputs` type, or the
                // delegation is refused: the delegator fails.
                if let Some(ty) = self.decl(&contract).and_then(|c| c.inputs_type()).cloned() {
                    let problem = match self.validator("contract.inputs", &contract, &ty) {
                        Ok(v) => v.validate(&inputs).err().map(|errors| format!("the inputs are not a `{ty}`: {}", errors.join("; "))),
                        Err(e) => Some(e),
                    };
                    if let Some(problem) = problem {
                        let why = format!("delegation {from} -> {to} refused (contract `{contract}`): {problem}");
                        if let Some(node) = self.node(from) {
                            self.node_failed(&node, ErrorCode::DelegationRefused, &why, &parent);
                        }
                        return Crossing::Refused;
                    }
                }
                let program = self.program.clone();
                let budget = program.decls.get(&contract).and_then(|c| c.budget(&program));
                if let Some(budget) = budget {
                    self.budgets.add(Scope::from_budget(&format!("delegation.{to}"), &budget));
                }
                let inputs_ref = self.store(&inputs, &format!("delegation {from} -> {to}"), Some(&parent));
                parent = self.emit(&format!("node.{from}"), events::delegation(&program, &transfer, inputs_ref), Some(&parent));
                self.pending_contract.insert(to.to_string(), contract_name);
                input = inputs;
            }
        }
        Crossing::Enter(input, parent)
    }

    // ----------------------------------------------------------------- gates

    fn evaluate_gate(&mut self, gate: &Gate, cause: &str) {
        let evaluators = gate.evaluator_items();
        let on_error = gate.on_error();
        let mut rt = GateRt { results: vec![None; evaluators.len()], probes: BTreeMap::new(), cause: cause.to_string(), pending: 0 };
        let visit = self.nodes.get(&gate.from).map(|n| n.visits).unwrap_or(0);
        let mut probes = Vec::new();
        for (i, ev) in evaluators.iter().enumerate() {
            let Some(EvaluatorRef { name, builtin, args }) = *ev else {
                rt.results[i] = Some(EvaluatorResult {
                    evaluator: "?".into(),
                    outcome: on_error,
                    reason: Some("invalid evaluator".into()),
                    error: true,
                });
                continue;
            };
            let label = format!("{name}({})", args.iter().map(eval::render).collect::<Vec<_>>().join(", "));
            let result = |outcome: Outcome, reason: Option<String>, error: bool| EvaluatorResult {
                evaluator: label.clone(),
                outcome,
                reason,
                error,
            };
            if builtin {
                rt.results[i] = Some(self.builtin_evaluator(name, args, on_error, &result));
                continue;
            }
            let Some(decl) = self.decl(name).cloned() else {
                rt.results[i] = Some(result(on_error, Some(format!("no evaluator `{name}`")), true));
                continue;
            };
            let fail = decl.fail();
            let reason = decl.reason().map(str::to_string);
            let input = match args.first() {
                Some(e) => match eval::eval(e, &self.env) {
                    Ok(v) => v,
                    Err(err) => {
                        rt.results[i] = Some(result(on_error, Some(err.message), true));
                        continue;
                    }
                },
                None => Value::Null,
            };
            // A list argument whose items fit the input type: once per item.
            let items: Vec<Value> = match (&input, decl.input_type()) {
                (Value::Array(items), Some(ty)) if !matches!(ty, Ty::List { .. }) => items.clone(),
                _ => vec![input.clone()],
            };
            match decl.variant.as_deref() {
                Some("predicate") => {
                    let mut outcome = Outcome::Pass;
                    let mut why = None;
                    let mut error = false;
                    for item in &items {
                        let mut env = self.env.clone();
                        env.insert("input".into(), item.clone());
                        match decl.check() {
                            Some(e) => match eval::eval_bool(e, &env) {
                                Ok(true) => {}
                                Ok(false) => {
                                    outcome = outcome.max(fail);
                                    why = reason.clone().or_else(|| Some(format!("{} is false", eval::render(e))));
                                }
                                Err(err) => {
                                    outcome = outcome.max(on_error);
                                    why = Some(err.message);
                                    error = true;
                                }
                            },
                            None => {
                                outcome = outcome.max(on_error);
                                error = true;
                            }
                        }
                    }
                    rt.results[i] = Some(result(outcome, why, error));
                }
                Some("schema") => {
                    let ty = decl.schema().cloned().unwrap_or(Ty::Any);
                    let mut outcome = Outcome::Pass;
                    let mut why = None;
                    match self.validator("evaluator", name, &ty) {
                        Ok(v) => {
                            for item in &items {
                                if let Err(errors) = v.validate(item) {
                                    outcome = outcome.max(fail);
                                    why = reason.clone().or_else(|| Some(errors.join("; ")));
                                }
                            }
                            rt.results[i] = Some(result(outcome, why, false));
                        }
                        Err(e) => rt.results[i] = Some(result(on_error, Some(e), true)),
                    }
                }
                Some("builtin") => {
                    let function = decl.function().to_string();
                    for (j, item) in items.iter().enumerate() {
                        rt.probes.insert((i, j), None);
                        rt.pending += 1;
                        let key = CommandKey::Probe { gate: &gate.name, visit, evaluator: i, item: j }.to_key();
                        let request = ProbeRequest {
                            evaluator: name.to_string(),
                            argv: Vec::new(),
                            native: Some(function.clone()),
                            input: Some(item.clone()),
                            timeout_ms: None,
                        };
                        probes.push((key, i, j, request));
                    }
                    if items.is_empty() {
                        rt.results[i] = Some(result(Outcome::Pass, Some("no items to check".into()), false));
                    }
                }
                Some("command") => {
                    let argv = decl.argv();
                    let timeout_ms = decl.timeout_ms();
                    for (j, item) in items.iter().enumerate() {
                        let argv: Vec<String> = argv.iter().map(|a| template(a, item)).collect();
                        rt.probes.insert((i, j), None);
                        rt.pending += 1;
                        let key = CommandKey::Probe { gate: &gate.name, visit, evaluator: i, item: j }.to_key();
                        probes.push((key, i, j, ProbeRequest { evaluator: name.to_string(), argv, native: None, input: None, timeout_ms }));
                    }
                    if items.is_empty() {
                        rt.results[i] = Some(result(Outcome::Pass, Some("no items to probe".into()), false));
                    }
                }
                other => {
                    // llm and human evaluators need a judge this runtime
                    // does not run yet: inconclusive, so never PASS.
                    let msg = format!("`{}` evaluators are not run by this runtime; inconclusive", other.unwrap_or("?"));
                    rt.results[i] = Some(result(on_error, Some(msg), true));
                }
            }
        }
        let pending = rt.pending;
        self.gates.insert(gate.name.clone(), rt);
        for (key, i, j, request) in probes {
            self.waiting.insert(key.clone(), Waiting::Probe { gate: gate.name.clone(), index: i, item: j });
            self.commands.push(Command { key, request: Request::Probe(request), delay_ms: 0 });
        }
        if pending == 0 {
            self.finish_gate(&gate.name);
        }
    }

    fn builtin_evaluator(
        &mut self,
        name: &str,
        args: &[TExpr],
        on_error: Outcome,
        result: &dyn Fn(Outcome, Option<String>, bool) -> EvaluatorResult,
    ) -> EvaluatorResult {
        let Some(arg) = args.first() else { return result(on_error, Some("no argument".into()), true) };
        match name {
            "predicate" => match eval::eval_bool(arg, &self.env) {
                Ok(true) => result(Outcome::Pass, None, false),
                Ok(false) => result(Outcome::Block, Some(format!("{} is false", eval::render(arg))), false),
                Err(e) => result(on_error, Some(e.message), true),
            },
            "exists" => match eval::eval(arg, &self.env) {
                Ok(Value::Null) => result(Outcome::Block, Some(format!("{} is absent", eval::render(arg))), false),
                Ok(_) => result(Outcome::Pass, None, false),
                Err(e) => result(on_error, Some(e.message), true),
            },
            "schema_valid" => {
                let ty = match args.get(1).map(|a| &a.kind) {
                    Some(flow_check::ir::TExprKind::Literal { value }) => match value.as_ref() {
                        IrValue::Type(ty) => ty.clone(),
                        _ => Ty::Any,
                    },
                    _ => Ty::Any,
                };
                // Compiled once per run and type.
                let key = serde_json::to_string(&ty).unwrap_or_default();
                match eval::eval(arg, &self.env) {
                    Ok(value) => match self.validator("schema_valid", &key, &ty) {
                        Ok(v) => match v.validate(&value) {
                            Ok(()) => result(Outcome::Pass, None, false),
                            Err(errors) => result(Outcome::Block, Some(errors.join("; ")), false),
                        },
                        Err(e) => result(on_error, Some(e), true),
                    },
                    Err(e) => result(on_error, Some(e.message), true),
                }
            }
            _ => result(on_error, Some(format!("unknown evaluator `{name}`")), true),
        }
    }

    fn on_probe(&mut self, gate: &str, index: usize, item: usize, res: ProbeResult) {
        let Some(g) = self.wf().gates.get(gate).cloned() else { return };
        let on_error = g.on_error();
        let Some(Some(evaluator)) = g.evaluator_items().get(index).copied() else { return };
        let decl = self.decl(evaluator.name).cloned();
        let fail = decl.as_ref().map_or(Outcome::Block, Decl::fail);
        let expect = decl.as_ref().map_or(Expect::ExitZero, Decl::expect);
        let outcome = if res.error.is_some() {
            on_error
        } else if expect == Expect::Json {
            match (&res.output, decl.as_ref().and_then(Decl::check)) {
                (Some(output), Some(check)) => {
                    let mut env = self.env.clone();
                    env.insert("output".into(), output.clone());
                    match eval::eval_bool(check, &env) {
                        Ok(true) => Outcome::Pass,
                        Ok(false) => fail,
                        Err(_) => on_error,
                    }
                }
                (Some(_), _) if res.exit_code == Some(0) => Outcome::Pass,
                _ => on_error,
            }
        } else {
            match res.exit_code {
                Some(0) => Outcome::Pass,
                Some(_) => fail,
                None => on_error,
            }
        };
        let Some(rt) = self.gates.get_mut(gate) else { return };
        rt.probes.insert((index, item), Some((outcome, res.error.is_some())));
        rt.pending = rt.pending.saturating_sub(1);
        if rt.pending == 0 {
            self.finish_gate(gate);
        }
    }

    fn finish_gate(&mut self, name: &str) {
        let Some(gate) = self.wf().gates.get(name).cloned() else { return };
        let Some(mut rt) = self.gates.remove(name) else { return };
        let reason_prop = gate.reason().map(str::to_string);
        let labels: Vec<String> = gate
            .evaluator_items()
            .iter()
            .map(|e| match e {
                Some(EvaluatorRef { name, args, .. }) => {
                    format!("{name}({})", args.iter().map(eval::render).collect::<Vec<_>>().join(", "))
                }
                None => "?".into(),
            })
            .collect();
        for ((i, _), probe) in &rt.probes {
            // A probe that never answered counts as a BLOCK.
            let (outcome, error) = probe.unwrap_or((Outcome::Block, false));
            let entry = rt.results[*i].get_or_insert_with(|| EvaluatorResult {
                evaluator: labels.get(*i).cloned().unwrap_or_default(),
                outcome: Outcome::Pass,
                reason: None,
                error: false,
            });
            let w = entry.outcome.max(outcome);
            if w != entry.outcome || error {
                entry.reason = Some(if error { "probe errored or timed out".into() } else { "probe failed".into() });
            }
            entry.outcome = w;
            entry.error |= error;
        }
        let results: Vec<EvaluatorResult> = rt.results.into_iter().flatten().collect();
        let mut outcome = Outcome::Pass;
        for r in &results {
            outcome = outcome.max(r.outcome);
        }
        // Trigger authorisation: only declared agents may trigger.
        let from_agent = events::gate_agent(self.wf(), &gate).map(str::to_string);
        let mut results = results;
        if let Some(trigger) = gate.trigger() {
            let by = trigger.by;
            let who = from_agent.clone().unwrap_or_default();
            if !by.is_empty() && !by.contains(&who) {
                outcome = Outcome::Block;
                results.push(EvaluatorResult {
                    evaluator: "trigger".into(),
                    outcome: Outcome::Block,
                    reason: Some(format!("`{who}` may not trigger this gate")),
                    error: false,
                });
            }
        }
        let reason = if outcome == Outcome::Pass {
            None
        } else {
            reason_prop.or_else(|| results.iter().find(|r| r.outcome != Outcome::Pass).and_then(|r| r.reason.clone()))
        };
        let body = events::gate_recorded(self.wf(), &gate, outcome, reason, results);
        let event = HandlerEvent::from(outcome);
        let ctx = Ctx { node: Some(gate.from.clone()), gate: Some(name.to_string()), event: event.into() };
        let handler = semantics::handler_on(&gate.handlers, event).cloned();
        let action = handler.unwrap_or_else(|| Action {
            name: match outcome {
                Outcome::Pass => ActionKind::Continue,
                Outcome::RequiresDecision => ActionKind::Decide,
                Outcome::Block => ActionKind::Terminate,
            },
            args: Vec::new(),
        });
        self.record_gate(name, body, action, ctx, &rt.cause);
    }

    /// Records a gate's outcome (`body`) and takes the action it calls for.
    fn record_gate(&mut self, name: &str, body: Body, action: Action, ctx: Ctx, cause: &str) {
        if let Body::GateRecorded { outcome, .. } = &body {
            let held = || Held::Gate { name: name.to_string(), body: Box::new(body.clone()), action: action.clone(), ctx: ctx.clone() };
            if !self.admit(Obs::Outcome { gate: name, outcome: outcome.as_str() }, "gate_recorded", cause, held) {
                return;
            }
        }
        let recorded = self.emit(&format!("gate.{name}"), body, Some(cause));
        self.act(&action, &ctx, HandlerScope::Gate(name.to_string()), &recorded);
    }

    // ------------------------------------------------------------- decisions

    fn ask(
        &mut self,
        decision: Decision,
        principals: Vec<String>,
        prompt: Option<String>,
        decisions: Vec<flow_trace::Decision>,
        cause: &str,
    ) {
        let subject = decision.subject();
        let round = {
            let r = self.decision_rounds.entry(subject.clone()).or_default();
            *r += 1;
            *r
        };
        let requested = self.emit("control", events::decision_requested(&subject, principals.clone(), decisions.clone()), Some(cause));
        for p in &principals {
            self.emit(
                "control",
                Body::Message {
                    schema_version: V,
                    message_type: MessageType::ApprovalRequest,
                    from: "control".into(),
                    to: p.clone(),
                    artifact: None,
                },
                Some(&requested),
            );
        }
        let key = CommandKey::Decision { subject: &subject, round }.to_key();
        self.waiting.insert(key.clone(), Waiting::Human { decision, request_event: requested.to_string() });
        self.commands.push(Command {
            key,
            request: Request::Human(HumanRequest { subject, principals, prompt, decisions, round }),
            delay_ms: 0,
        });
    }

    fn on_decision(&mut self, decision: Decision, request_event: &str, answer: HumanAnswer) {
        let subject = decision.subject();
        let obs = Obs::Decided { subject: &subject, decision: answer.decision.as_str(), by: &answer.by };
        let held =
            || Held::Decision { decision: Box::new(decision.clone()), request_event: request_event.to_string(), answer: answer.clone() };
        if !self.admit(obs, "decision_applied", request_event, held) {
            return;
        }
        if answer.decision == flow_trace::Decision::Approve
            && matches!(decision, Decision::Gate { .. } | Decision::HumanNode { .. } | Decision::Confirm { .. })
        {
            self.approvals += 1;
        }
        match decision {
            Decision::Gate { gate, .. } => {
                let Some(g) = self.wf().gates.get(&gate).cloned() else { return };
                let action = flow_check::semantics::gate_decision_action(&g, answer.decision);
                let applied = self.record_applied(&subject, &answer, events::applied(&action), request_event);
                let ctx = Ctx { node: Some(g.from.clone()), gate: Some(gate.clone()), event: answer.decision.event().into() };
                self.act(&action, &ctx, HandlerScope::Gate(gate.clone()), &applied);
            }
            Decision::HumanNode { node } => {
                let Some(n) = self.node(&node) else { return };
                let action = flow_check::semantics::human_decision_action(&n, answer.decision);
                let applied = self.record_applied(&subject, &answer, events::applied(&action), request_event);
                if flow_check::semantics::handler_on(&n.handlers, answer.decision.event()).is_some() {
                    self.env.insert(node.clone(), json!({ "decision": answer.decision, "comment": answer.comment }));
                    let ctx = Ctx { node: Some(node.clone()), gate: None, event: answer.decision.event().into() };
                    self.act(&action, &ctx, HandlerScope::Node(node.clone()), &applied);
                    return;
                }
                let mut output = json!({ "decision": answer.decision });
                if let Some(c) = answer.comment {
                    output["comment"] = Value::String(c);
                }
                self.complete_node(&node, output, NodeStatus::Completed, &applied);
            }
            Decision::Escalation { ctx, .. } => {
                let action = if answer.decision == flow_trace::Decision::Approve {
                    Action { name: ActionKind::Continue, args: vec![] }
                } else {
                    Action { name: ActionKind::Terminate, args: vec![format!("escalation_{}", answer.decision)] }
                };
                let applied = self.record_applied(&subject, &answer, events::applied(&action), request_event);
                if answer.decision == flow_trace::Decision::Approve {
                    self.act(&action, &ctx, HandlerScope::Escalation, &applied);
                } else {
                    self.terminate(&format!("escalation_{}", answer.decision), TerminationStatus::Escalated, &applied, None);
                }
            }
            Decision::Confirm { attempt, tool, input, key_template, agent } => {
                let approved = answer.decision == flow_trace::Decision::Approve;
                let applied = self.record_applied(&subject, &answer, if approved { "call".into() } else { "refuse".into() }, request_event);
                if approved {
                    self.call_tool(&attempt, &tool, input, key_template, agent.as_deref(), 0, &applied);
                } else if agent.is_some() {
                    self.feed_tool_error(&attempt, &tool, "a human refused the call", &applied);
                } else {
                    self.attempt_failed(&attempt, ErrorCode::ConfirmationRefused, "a human refused the call", &applied);
                }
            }
            Decision::Policy { held, .. } => {
                let approved = answer.decision == flow_trace::Decision::Approve;
                let applied = self.record_applied(
                    &subject,
                    &answer,
                    if approved { "continue".into() } else { "terminate(policy_violation)".into() },
                    request_event,
                );
                if approved {
                    self.resume_held(*held, &applied);
                } else {
                    self.terminate("policy_violation", TerminationStatus::Failure, &applied, None);
                }
            }
            Decision::Reconcile { attempt } => {
                let applied = self.record_applied(
                    &subject,
                    &answer,
                    if answer.decision == flow_trace::Decision::Approve { "retry".into() } else { "fail".into() },
                    request_event,
                );
                let node = flow_trace::attempt_node(&attempt).to_string();
                let Some(n) = self.node(&node) else { return };
                if answer.decision == flow_trace::Decision::Approve {
                    self.start_attempt(&n, TriggerReason::Reconciled, &applied);
                } else {
                    self.node_failed(&n, ErrorCode::UnknownOutcome, "the call's outcome is unknown and was not retried", &applied);
                }
            }
        }
    }

    /// Records that a human's `answer` on `subject` was applied as `action`.
    fn record_applied(&mut self, subject: &str, answer: &HumanAnswer, action: String, request_event: &str) -> Str {
        let producer = self.envelope.producer("human.", &answer.by);
        let body = events::decision_applied(subject, answer.decision, &answer.by, action);
        self.emit_as(producer, body, Some(request_event))
    }

    // --------------------------------------------------------------- actions

    fn act(&mut self, action: &Action, ctx: &Ctx, scope: HandlerScope, cause: &str) {
        if !self.running() {
            return;
        }
        let taken = self.emit("control", events::action_taken(ctx.event, scope.clone(), action), Some(cause));
        let arg = action.args.first().cloned();
        let gate = ctx.gate.as_ref().and_then(|g| self.wf().gates.get(g)).cloned();
        match action.name {
            ActionKind::Continue | ActionKind::Skip | ActionKind::Degrade | ActionKind::Warn => {
                if action.name == ActionKind::Warn {
                    self.emit("control", events::warning(format!("{} in {scope}", ctx.event)), Some(&taken));
                }
                if let Some(g) = gate {
                    self.enter(&g.from, &g.to, Via::Gate(g.name.clone()), &taken);
                } else if let Some(node) = &ctx.node {
                    let running = self.nodes.get(node).is_some_and(|n| n.running) || !self.env.contains_key(node);
                    let failed = [HandlerEvent::Failure, HandlerEvent::Timeout, HandlerEvent::InvalidOutput].map(ActionEvent::Handler);
                    if running || failed.contains(&ctx.event) {
                        let status = if action.name == ActionKind::Skip { NodeStatus::Skipped } else { NodeStatus::Degraded };
                        let output = self.env.get(node).cloned().unwrap_or(Value::Null);
                        self.complete_node(node, output, status, &taken);
                    } else {
                        self.follow(node, &taken);
                    }
                }
            }
            ActionKind::Retry => {
                if let Some(node) = ctx.node.as_ref().and_then(|n| self.node(n)) {
                    let attempts = self.nodes.get(&node.name).map(|n| n.attempt_no).unwrap_or(0);
                    if attempts < Self::max_attempts(&node).max(2) {
                        self.start_attempt(&node, TriggerReason::Retry, &taken);
                    } else {
                        self.terminate(&format!("{}_failed", node.name), TerminationStatus::Failure, &taken, Some("retries exhausted"));
                    }
                }
            }
            ActionKind::Decide => {
                if let Some(g) = gate {
                    let deciders = g.decided_by().unwrap_or_else(|| self.wf().escalate_to());
                    let decisions = g.allowed_decisions();
                    let prompt = g.description().map(str::to_string);
                    self.ask(Decision::Gate { gate: g.name.clone() }, deciders, prompt, decisions, &taken);
                }
            }
            ActionKind::Terminate | ActionKind::Halt | ActionKind::Fallback | ActionKind::ReturnPartial => {
                let gate_reason = gate.as_ref().and_then(|g| g.reason());
                if let Some((reason, status)) = semantics::ending(action.name, arg.as_deref(), gate_reason, ctx.event.as_str()) {
                    self.terminate(&reason, status, &taken, None);
                }
            }
            ActionKind::Goto | ActionKind::Activate => {
                if let Some(to) = arg {
                    let from = ctx.node.clone().unwrap_or_else(|| "control".into());
                    let edge = self.emit(
                        "control",
                        events::edge_taken(&from, &to, Via::of_action(action.name.as_str()).unwrap_or(Via::Goto)),
                        Some(&taken),
                    );
                    let input = ctx.node.as_ref().and_then(|n| self.env.get(n)).cloned().unwrap_or(Value::Null);
                    self.start_node(&to, input, TriggerReason::First, &edge);
                }
            }
            ActionKind::Revise | ActionKind::Replan => {
                let target = arg.or_else(|| {
                    if action.name == ActionKind::Replan {
                        let scope = gate.as_ref().map(|g| g.replan_scope()).unwrap_or_default();
                        scope.first().cloned().or_else(|| self.wf().start().map(str::to_string))
                    } else {
                        ctx.node.clone()
                    }
                });
                if let Some(to) = target {
                    let from = ctx.node.clone().unwrap_or_else(|| "control".into());
                    let edge = self.emit(
                        "control",
                        events::edge_taken(&from, &to, Via::of_action(action.name.as_str()).unwrap_or(Via::Goto)),
                        Some(&taken),
                    );
                    let input = self.nodes.get(&to).map(|n| n.input.clone()).unwrap_or(Value::Null);
                    let trigger = if action.name == ActionKind::Revise { TriggerReason::Revise } else { TriggerReason::Replan };
                    self.start_node(&to, input, trigger, &edge);
                }
            }
            ActionKind::Escalate => {
                let principal = arg.unwrap_or_default();
                self.ask(
                    Decision::Escalation { principal: principal.clone(), ctx: ctx.clone() },
                    vec![principal],
                    Some(format!("{} in {scope}", ctx.event)),
                    vec![flow_trace::Decision::Approve, flow_trace::Decision::Reject],
                    &taken,
                );
            }
            ActionKind::CompressContext | ActionKind::SkipReasoning => {
                if !self.flags.iter().any(|f| f == action.name.as_str()) {
                    self.flags.push(action.name.to_string());
                }
            }
            ActionKind::SwitchModel => self.provider_override = arg,
        }
    }

    fn zone_changes(&mut self, changes: Vec<ZoneChange>, cause: &str) {
        let mut rest = changes.into_iter();
        while let Some(change) = rest.next() {
            let held = || Held::Zones { changes: std::iter::once(change.clone()).chain(rest.clone()).collect() };
            if !self.admit(Obs::Zone(change.to.as_str()), "budget_zone_changed", cause, held) {
                return;
            }
            let ev = self.emit("control", events::zone_changed(&change.scope, change.from, change.to, &change.actions), Some(cause));
            let ctx = Ctx { node: None, gate: None, event: ActionEvent::Zone(change.to) };
            for action in &change.actions {
                self.act(action, &ctx, HandlerScope::Budget(change.scope.clone()), &ev);
            }
        }
    }

    fn exhausted(&mut self, ex: Exhausted, node: Option<&str>, cause: &str) {
        self.budget_hit = true;
        let ev = self.emit("control", events::budget_exhausted(&ex.scope, &ex.limit), Some(cause));
        // Attempts in flight on that node fail with budget_exhausted.
        let ids: Vec<String> = self.attempts.values().filter(|a| Some(a.node.as_str()) == node).map(|a| a.id.clone()).collect();
        for id in ids {
            self.attempt_failed(&id, ErrorCode::BudgetExhausted, &format!("{} limit of {} reached", ex.limit, ex.scope), &ev);
        }
        let ctx = Ctx { node: node.map(str::to_string), gate: None, event: HandlerEvent::BudgetExhausted.into() };
        if let Some(action) = self.budgets.scopes.get(&ex.scope).and_then(|s| s.on_exhausted.clone()) {
            self.act(&action, &ctx, HandlerScope::Budget(ex.scope.clone()), &ev);
            return;
        }
        if let Some(n) = node.and_then(|n| self.node(n)) {
            if let Some(h) = n.handlers.iter().find(|h| h.events.contains(&HandlerEvent::BudgetExhausted)).cloned() {
                self.act(&h.action, &ctx, HandlerScope::Node(n.name.clone()), &ev);
                return;
            }
        }
        self.workflow_event(HandlerEvent::BudgetExhausted, node, &ev, "budget_exhausted", "budget exhausted");
        if let RunStatus::Terminated { status, .. } = &self.status {
            let _ = status;
        }
    }

    /// The run's result: with a declared `output`, the latest output of a
    /// node of that type (else the latest output); without, the latest.
    fn result(&self) -> Option<&(String, ArtifactRef)> {
        self.result_output.as_ref().or(self.last_output.as_ref())
    }

    fn terminate(&mut self, reason: &str, status: TerminationStatus, cause: &str, message: Option<&str>) {
        if !self.running() {
            return;
        }
        let held = || Held::Terminate { reason: reason.to_string(), status, message: message.map(str::to_string) };
        if !self.admit(Obs::Terminated(reason), "run_terminated", cause, held) {
            return;
        }
        let mut status = status;
        if status == TerminationStatus::Success {
            if let Some(cond) = self.wf().success().cloned() {
                if !eval::eval_bool(&cond, &self.env).unwrap_or(false) {
                    status = TerminationStatus::Failure;
                    self.emit("control", events::warning(format!("success condition {} is false", eval::render(&cond))), Some(cause));
                }
            }
        }
        // A run that succeeds returns a value of the workflow's `output` type.
        if status == TerminationStatus::Success {
            if let Some(ty) = self.wf().output_type().cloned() {
                let (from, value) = match self.result().cloned() {
                    Some((node, _)) => (format!("`{node}`'s output"), self.env.get(&node).cloned().unwrap_or(Value::Null)),
                    None => ("no output".to_string(), Value::Null),
                };
                let problem = match self.validator("workflow.output", "", &ty) {
                    Ok(v) => v.validate(&value).err().map(|errors| errors.join("; ")),
                    Err(e) => Some(e),
                };
                if let Some(problem) = problem {
                    status = TerminationStatus::Failure;
                    let message = format!("invalid output: the run's result ({from}) is not the workflow's `output` type {ty}: {problem}");
                    self.emit("control", events::warning(message), Some(cause));
                }
            }
        }
        if let Some(m) = message {
            self.emit("control", events::warning(m.to_string()), Some(cause));
        }
        // Cancel what is still running: leases released, no further dispatch.
        let ids: Vec<String> = self.attempts.keys().cloned().collect();
        for id in ids {
            self.release(&id, cause);
        }
        self.waiting.clear();
        self.commands.clear();
        // Policies violated by the termination itself, or owing an
        // obligation it leaves open, are reported now: the run ends anyway,
        // and a run that would have succeeded (or returned a partial
        // result) fails unless they only warn.
        for i in 0..self.policies.len() {
            let p = &mut self.policies[i];
            if p.reported {
                continue;
            }
            let now = p.monitor.state();
            let automaton = &mut p.monitor.automaton;
            let mask = automaton.mask(&Obs::Terminated(reason));
            let next = automaton.step(now, mask);
            let (offending, owed, message) = if Automaton::is_false(next) {
                let required = automaton.residual(now);
                ("run_terminated", None, self.violation_message(i, &format!("terminated({reason})"), &required, ""))
            } else if !automaton.accepts_end(next) {
                let owed = automaton.residual(next);
                let mut message = format!("the run ended with `{}` still owing {owed}", p.name);
                if let Some(d) = &p.description {
                    message.push_str(&format!(" ({d})"));
                }
                ("end", Some(owed), message)
            } else {
                continue;
            };
            let response = self.policies[i].response;
            if response != PolicyResponse::Warn && matches!(status, TerminationStatus::Success | TerminationStatus::Partial) {
                status = TerminationStatus::Failure;
            }
            self.report(i, response, offending, message, owed, cause);
        }
        let output = self.result().map(|(_, a)| a.clone());
        self.emit("control", events::run_terminated(reason, status, output), Some(cause));
        self.status = RunStatus::Terminated { reason: reason.to_string(), status: status.to_string(), budget_exhausted: self.budget_hit };
    }

    // ---------------------------------------------------------------- resume

    /// Called when a resumed run has replayed its journal: commands that
    /// were issued but never answered lost their executor. Their leases
    /// expire and they are issued again, except non-idempotent tool calls,
    /// whose outcome is unknown: those go to reconciliation.
    pub fn recover(&mut self, after_seq: u64, answered: &[String]) {
        self.at_one_instant(|engine| engine.recover_at(after_seq, answered))
    }

    fn recover_at(&mut self, after_seq: u64, answered: &[String]) {
        if !self.running() {
            return;
        }
        let resumed = self.emit("control", Body::RunResumed { schema_version: V, after_seq }, None);
        let lost = self.waiting.entries();
        for (key, waiting) in lost {
            if answered.contains(&key) {
                continue;
            }
            match waiting {
                // Questions and probes are not lost: the driver issues them
                // again under the same key.
                Waiting::Human { .. } | Waiting::Probe { .. } => {}
                Waiting::Turn { attempt, .. } => {
                    self.waiting.remove(&key);
                    self.expire(&attempt, &resumed, None);
                }
                Waiting::Tool { attempt, tool, .. } => {
                    self.waiting.remove(&key);
                    let non_idempotent = self.decl(&tool).is_some_and(|d| d.effect() == Effect::NonIdempotent);
                    self.expire(&attempt, &resumed, non_idempotent.then_some(tool));
                }
            }
        }
    }

    fn expire(&mut self, attempt_id: &str, cause: &str, unknown_tool: Option<String>) {
        let Some(a) = self.attempts.get(attempt_id).cloned() else { return };
        let expired =
            self.emit("control", Body::LeaseExpired { schema_version: V, attempt_id: a.id.clone(), lease: a.lease.clone() }, Some(cause));
        self.attempts.remove(attempt_id);
        let Some(node) = self.node(&a.node) else { return };
        if let Some(tool) = unknown_tool {
            let key = format!("{}:{}", self.cfg.run_id, a.id);
            let rec = self.emit(
                "control",
                Body::ReconciliationRequired { schema_version: V, attempt_id: a.id.clone(), tool, idempotency_key: key },
                Some(&expired),
            );
            let deciders = self.wf().escalate_to();
            self.ask(
                Decision::Reconcile { attempt: a.id.clone() },
                deciders,
                Some("The call may or may not have happened: approve to retry it, reject to fail the node".into()),
                vec![flow_trace::Decision::Approve, flow_trace::Decision::Reject],
                &rec,
            );
            return;
        }
        self.start_attempt(&node, TriggerReason::LeaseExpired, &expired);
    }

    /// Cancels the run: the workflow's `cancelled` handler, else the run
    /// terminates as `cancelled`. Nothing more is dispatched either way.
    pub fn cancel(&mut self) {
        self.at_one_instant(Engine::cancel_at)
    }

    fn cancel_at(&mut self) {
        if !self.running() {
            return;
        }
        let ev = self.emit("control", events::warning("cancelled by the operator".into()), None);
        let ids: Vec<String> = self.attempts.keys().cloned().collect();
        for id in ids {
            self.attempt_failed(&id, ErrorCode::Cancelled, "the run was cancelled", &ev);
        }
        self.waiting.clear();
        self.commands.clear();
        let handler = semantics::handler_on(&self.wf().handlers, HandlerEvent::Cancelled).cloned();
        match handler {
            Some(action)
                if !matches!(
                    action.name,
                    ActionKind::Continue
                        | ActionKind::Retry
                        | ActionKind::Goto
                        | ActionKind::Activate
                        | ActionKind::Revise
                        | ActionKind::Replan
                ) =>
            {
                let ctx = Ctx { node: None, gate: None, event: HandlerEvent::Cancelled.into() };
                self.act(&action, &ctx, HandlerScope::Workflow, &ev);
            }
            _ => {}
        }
        self.terminate("cancelled", TerminationStatus::Cancelled, &ev, None);
    }

    /// Renews the lease of every attempt still running.
    pub fn heartbeat(&mut self) {
        if !self.running() {
            return;
        }
        let mut ids: Vec<(String, String, Str)> =
            self.attempts.values().map(|a| (a.id.clone(), a.lease.clone(), a.started.clone())).collect();
        ids.sort();
        let expires = rfc3339(self.now() + self.cfg.lease_ttl_ms);
        for (id, lease, started) in ids {
            self.emit(
                "control",
                Body::LeaseHeartbeat { schema_version: V, attempt_id: id, lease, expires_at: expires.clone() },
                Some(&started),
            );
        }
    }

    /// Pauses the run: every outstanding command is a question for a human
    /// and nobody can answer now.
    pub fn pause(&mut self, waiting_on: &str) {
        if !self.running() {
            return;
        }
        let reason = if CommandKey::parse(waiting_on).and_then(|k| k.subject()).is_some_and(|s| s.starts_with("reconcile.")) {
            PauseReason::ReconciliationRequired
        } else {
            PauseReason::AwaitingDecision
        };
        self.emit("control", events::run_paused(reason, waiting_on.to_string()), None);
        self.status = RunStatus::Paused { reason, waiting_on: waiting_on.to_string() };
    }

    /// Undoes a pause when a resumed run replays it (the pause was only
    /// this execution's stop).
    pub fn unpause(&mut self) {
        if matches!(self.status, RunStatus::Paused { .. }) {
            self.status = RunStatus::Running;
        }
    }
}

/// A gate or evaluator outcome property (`on_error`, `fail`): BLOCK when
/// undeclared (fail-closed).
/// What an event says, written as the atom that would describe it.
fn obs_text(obs: &Obs) -> String {
    match obs {
        Obs::Started(n) => format!("started({n})"),
        Obs::Completed(n) => format!("completed({n})"),
        Obs::Failed(n) => format!("failed({n})"),
        Obs::Called { tool, by: None } => format!("called({tool})"),
        Obs::Called { tool, by: Some(a) } => format!("called({tool}, by: {a})"),
        Obs::Refused { tool, by: None } => format!("refused({tool})"),
        Obs::Refused { tool, by: Some(a) } => format!("refused({tool}, by: {a})"),
        Obs::HandedOff { from, to } => format!("handed_off({from}, {to})"),
        Obs::Outcome { gate, outcome } => format!("outcome({gate}, {outcome})"),
        Obs::Decided { subject, decision, by } => format!("decided({subject}, {decision}) by {by}"),
        Obs::Zone(z) => format!("zone({z})"),
        Obs::Terminated(r) => format!("terminated({r})"),
    }
}

/// `name(args…)` or `name`.
/// The strings of the event envelope, shared between events: the run and
/// execution ids, the time of the current millisecond, producers, and the
/// ids of recent events (which later events name as parent).
#[derive(Debug)]
struct Envelope {
    run_id: Str,
    execution_id: Str,
    time: (u64, Str),
    producers: FxHashSet<Str>,
    control: Str,
    /// Recent event ids, each at its `seq` modulo [`RECENT_IDS`].
    recent: Vec<(u64, Str)>,
    scratch: String,
}

/// How many recent event ids [`Envelope`] keeps for parents to share.
const RECENT_IDS: u64 = 32;
/// How many producers [`Envelope`] keeps (control, agents, tools, gates,
/// humans, and the nodes that hand off or delegate).
const PRODUCERS: usize = 16_384;

impl Envelope {
    fn new(run_id: &str, execution_id: &str) -> Envelope {
        Envelope {
            run_id: Str::from(run_id),
            execution_id: Str::from(execution_id),
            time: (0, Str::from("")),
            producers: FxHashSet::default(),
            control: Str::from("control"),
            recent: vec![(0, Str::from("")); RECENT_IDS as usize],
            scratch: String::new(),
        }
    }

    /// The id of event `seq`, remembered as recent.
    fn id(&mut self, seq: u64) -> Str {
        self.scratch.clear();
        Event::push_id(&mut self.scratch, &self.run_id, seq);
        let id = Str::from(self.scratch.as_str());
        self.recent[(seq % RECENT_IDS) as usize] = (seq, id.clone());
        id
    }

    /// `parent` as a shared string: the recent event id it is, if any (an
    /// id ends with its `seq`, which says where it would be kept).
    fn parent(&self, parent: &str) -> Str {
        let seq = parent.rsplit_once('/').and_then(|(_, n)| n.parse::<u64>().ok());
        if let Some(seq) = seq {
            let (kept, id) = &self.recent[(seq % RECENT_IDS) as usize];
            if *kept == seq && &**id == parent {
                return id.clone();
            }
        }
        Str::from(parent)
    }

    /// The producer `prefix` + `name`, shared.
    fn producer(&mut self, prefix: &str, name: &str) -> Str {
        // Most events are the control plane's own.
        if prefix.is_empty() && name == "control" {
            return self.control.clone();
        }
        self.scratch.clear();
        self.scratch.push_str(prefix);
        self.scratch.push_str(name);
        if let Some(p) = self.producers.get(self.scratch.as_str()) {
            return p.clone();
        }
        let p = Str::from(self.scratch.as_str());
        if self.producers.len() < PRODUCERS {
            self.producers.insert(p.clone());
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flow_check::types::Ty;

    fn node_with_retry(backoff: u64, max: Option<u64>) -> Node {
        let mut retry = IndexMap::new();
        retry.insert("attempts".to_string(), IrValue::Int(5));
        retry.insert("backoff".to_string(), IrValue::Duration(backoff));
        if let Some(max) = max {
            retry.insert("max_backoff".to_string(), IrValue::Duration(max));
        }
        let mut props = IndexMap::new();
        props.insert("retry".to_string(), IrValue::Record(retry));
        Node {
            name: "n".into(),
            kind: NodeKind::Tool,
            target: vec!["t".into()],
            props,
            handlers: Vec::new(),
            output: Ty::Any,
            loc: Default::default(),
        }
    }

    #[test]
    fn backoff_waits_only_before_retries_and_doubles_up_to_the_cap() {
        let node = node_with_retry(1000, Some(3000));
        let delays: Vec<u64> = (1..=5).map(|a| Engine::backoff(&node, a)).collect();
        assert_eq!(delays, [0, 1000, 2000, 3000, 3000]);
        assert_eq!(Engine::max_attempts(&node), 5);
    }

    #[test]
    fn the_envelope_shares_ids_parents_and_producers() {
        let mut envelope = Envelope::new("run-1", "exec-1");
        let first = envelope.id(1);
        assert_eq!(&*first, "run-1/1");
        assert!(Arc::ptr_eq(&envelope.parent("run-1/1"), &first));
        // A parent that is not recent is still the id it names.
        assert_eq!(&*envelope.parent("run-0/7"), "run-0/7");
        assert_eq!(&*envelope.parent("run-0/1"), "run-0/1");
        assert_eq!(&*envelope.parent("odd"), "odd");
        let ids: Vec<Str> = (2..=(RECENT_IDS + 1)).map(|seq| envelope.id(seq)).collect();
        assert!(!Arc::ptr_eq(&envelope.parent("run-1/1"), &first));
        assert_eq!(&*envelope.parent("run-1/1"), "run-1/1");
        // The last RECENT_IDS ids are shared, the oldest of them too.
        assert!(Arc::ptr_eq(&envelope.parent("run-1/2"), &ids[0]));
        assert!(Arc::ptr_eq(&envelope.parent(&format!("run-1/{}", RECENT_IDS + 1)), ids.last().unwrap()));
        let tool = envelope.producer("tool.", "noop");
        assert_eq!(&*tool, "tool.noop");
        assert!(Arc::ptr_eq(&envelope.producer("tool.", "noop"), &tool));
        assert!(Arc::ptr_eq(&envelope.producer("", "tool.noop"), &tool));
        assert_eq!(&*envelope.producer("tool.", "noo"), "tool.noo");
        assert_eq!(&*envelope.producer("agent.", "noop"), "agent.noop");
        let control = envelope.producer("", "control");
        assert_eq!(&*control, "control");
        assert!(Arc::ptr_eq(&envelope.producer("", "control"), &control));
        assert_eq!(&*envelope.producer("tool.", "control"), "tool.control");
    }

    #[test]
    fn outstanding_commands_leave_in_any_order_and_list_in_issue_order() {
        let probe = |index| Waiting::Probe { gate: "g".into(), index, item: 0 };
        let mut out = Outstanding::default();
        for (i, key) in ["c", "a", "d", "b", "e"].iter().enumerate() {
            out.insert(key.to_string(), probe(i));
        }
        assert!(matches!(out.remove("a"), Some(Waiting::Probe { index: 1, .. })));
        assert!(out.remove("a").is_none());
        assert!(!out.contains("a") && out.contains("c"));
        assert!(out.remove("e").is_some());
        out.insert("a".into(), probe(9));
        let keys: Vec<String> = out.entries().into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["c", "d", "b", "a"]);
        assert_eq!(out.len(), 4);
        out.clear();
        assert!(out.is_empty());
    }

    #[test]
    fn outcomes_combine_by_severity() {
        // Outcomes are ordered by severity: the most severe one wins.
        assert_eq!(Outcome::Pass.max(Outcome::RequiresDecision), Outcome::RequiresDecision);
        assert_eq!(Outcome::Block.max(Outcome::RequiresDecision), Outcome::Block);
        assert_eq!(Outcome::RequiresDecision.max(Outcome::Pass), Outcome::RequiresDecision);
        let gate = Gate {
            name: "g".into(),
            from: "a".into(),
            to: "b".into(),
            props: IndexMap::new(),
            handlers: Vec::new(),
            loc: Default::default(),
        };
        assert_eq!(gate.on_error(), Outcome::Block, "undeclared: fail-closed");
    }
}
