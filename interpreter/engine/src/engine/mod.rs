//! The control plane: a deterministic state machine over the plan.
//!
//! The engine decides and records. It never performs I/O: it emits trace
//! events (each with its `seq`, assigned here and nowhere else) and
//! [`Command`]s for the data plane, and consumes the [`Response`]s that
//! come back. Given the same plan, input, clock readings and responses in
//! the same order, it emits the same events — which is what makes resume
//! by replaying the journal possible.

use crate::artifact::{artifact_ref, artifact_ref_of};
use crate::budget::{Budgets, Exhausted, Scope, ZoneChange};
use crate::clock::{rfc3339, Clock};
use crate::eval::{self, Env};
use crate::keys::CommandKey;
use crate::prompt;
use crate::proto::*;
use crate::template::template;
use crate::validate::{ty_to_schema, Validator};
use flow_check::ceilings::{self, TurnCeiling};
use flow_check::events;
use flow_check::index::PlanIndex;
use flow_check::ir::{Action, ActionKind, Decl, Gate, Guard, HandlerEvent, Node, Program, TExpr, Value as IrValue, Workflow};
use flow_check::ir::{NodeBody, NodeKind, ToolNode, TransferKind};
use flow_check::rerun;
use flow_check::semantics::{self, FailureStep};
use flow_check::types::Ty;
use flow_check::view::{self, Conflicts, EvaluatorRef, Expect, PolicyResponse};
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

mod actions;
mod attempts;
mod boards;
mod budgets;
mod compute;
mod coordinator;
mod decisions;
mod declared;
mod effects;
mod facts;
mod fanin;
mod gates;
mod judges;
mod nodes;
mod policies;
mod record;
mod recovery;
mod responses;
mod state;
mod termination;
mod tools;
mod transfers;
mod turns;

pub use compute::{evaluate as compute_value, tally};
pub use declared::make_record;
use declared::RecordOwner;
use effects::{held, Effect};
pub use facts::{is_runtime_name, node_facts};
use policies::PolicyRt;
use record::Envelope;
use state::*;

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
    /// Non-idempotent tool calls whose outcome is unknown after a crash,
    /// by attempt: out of `waiting` (never dispatched again) until a
    /// reconciliation decides them.
    unknown_calls: HashMap<String, Waiting>,
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
    /// Each blackboard's entries, in append order.
    boards: HashMap<String, Vec<Value>>,
    /// The plan's structure, computed once (`flow_check::index`): the
    /// same index trace check and the model checker read.
    index: Arc<PlanIndex>,
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
    /// What transfers handed over to a node not started yet (`artifacts`).
    pending_artifacts: HashMap<String, Value>,
    /// The envelope of the message a handoff delivers to a node not
    /// started yet.
    pending_envelope: HashMap<String, Value>,
    /// The online monitors of the policies that apply to this workflow.
    policies: Vec<PolicyRt>,
    /// Model turns whose reported use went over their per-turn ceilings
    /// (each recorded as a `warning`): use the static bounds do not cover.
    ceiling_breaches: u64,
    /// Set while a resumed run replays its journal: wall-clock limits are
    /// not re-checked (the journal says what happened).
    pub replaying: bool,
    /// Effects to apply, the next on top (see `coordinator.rs`).
    effects: Vec<Effect>,
}

/// The run's budget scopes as declared: the workflow's (with its deadline)
/// and every agent's. Node and delegation scopes are added as visits start.
fn declared_budgets(program: &Program, wf: &Workflow) -> Budgets {
    let mut budgets = Budgets::default();
    if let Some(budget) = wf.budget(program) {
        budgets.add(Scope::from_budget("run", &budget));
    }
    for (name, decl) in &program.decls {
        if decl.kind == flow_check::spec::Kind::Agent {
            if let Some(budget) = decl.budget(program) {
                budgets.add(Scope::from_budget(&format!("agent.{name}"), &budget));
            }
        }
    }
    budgets
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
        let budgets = declared_budgets(&program, wf);
        let nodes = wf.nodes.keys().map(|n| (n.clone(), NodeRt::default())).collect();
        let index = Arc::new(PlanIndex::new(&program, wf));
        let policies = PolicyRt::monitors(&program, wf)?;
        let start_ms = cfg.clock.now_ms();
        let envelope = Envelope::new(&cfg.run_id, &cfg.execution_id);
        Ok(Engine {
            cfg,
            seq: 0,
            start_ms,
            events: Vec::new(),
            commands: Vec::new(),
            artifacts: Vec::new(),
            env: Env::default(),
            nodes,
            attempts: FxHashMap::default(),
            waiting: Outstanding::default(),
            unknown_calls: HashMap::new(),
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
            boards: HashMap::new(),
            index,
            node_turns: HashMap::new(),
            envelope,
            step_ms: None,
            mcp_calls: HashMap::new(),
            recorded_digests: FxHashSet::default(),
            small_artifacts: FxHashMap::default(),
            pending_slice: HashMap::new(),
            pending_contract: HashMap::new(),
            pending_artifacts: HashMap::new(),
            pending_envelope: HashMap::new(),
            policies,
            ceiling_breaches: 0,
            replaying: false,
            effects: Vec::new(),
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

    /// Node outputs so far (the run's state), and the run's input.
    pub fn outputs(&self) -> Env {
        self.env.iter().filter(|(k, _)| !facts::is_runtime_name(k)).map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    /// Sets the instant the run started (a resumed run keeps its start).
    pub fn set_start_ms(&mut self, ms: u64) {
        self.start_ms = ms;
    }

    /// The instant the run started.
    pub fn start_ms(&self) -> u64 {
        self.start_ms
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
}

#[cfg(test)]
mod tests;
