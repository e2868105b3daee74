//! Runs the control plane against the data plane.
//!
//! The driver owns the run directory: the journal (`journal.sqlite`), the
//! trace (`trace.jsonl`, rewritten from the journal on resume) and the
//! artifacts (`artifacts/`). Its loop: store the engine's artifacts,
//! append its events to the journal (one transaction per step), append them
//! to the trace, and only then dispatch its commands — an event is
//! persisted before its effect is visible. Every data-plane response is
//! persisted (as a proposal) before the engine sees it.
//!
//! Resume replays: the engine runs again from the start and is fed the
//! recorded proposals in their recorded order; the events it regenerates
//! must match the journal (else the run has diverged from its plan). When
//! the journal is exhausted the run goes live: attempts whose executor was
//! lost get their lease expired and run again, non-idempotent tool calls
//! with an unknown outcome go to reconciliation.

use crate::clock::Clock;
use crate::engine::{Engine, RunConfig, RunStatus};
use crate::exec::{Cassette, Executors, Miss, ReplayMode};
use crate::journal::{ArtifactStore, DirArtifacts, Journal, MemoryArtifacts, MemoryJournal, SqliteJournal};
use crate::proto::*;
use flow_check::ir::Program;
use flow_check::plan::Plan;
use flow_check::view::Rate;
use flow_trace::{Body, Event};
use indexmap::IndexMap;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{HashMap, HashSet, VecDeque};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

/// Exit codes of `flow run` / `flow resume`.
pub mod exit {
    pub const SUCCESS: u8 = 0;
    pub const FAILED: u8 = 1;
    pub const USAGE: u8 = 2;
    pub const BUDGET_EXHAUSTED: u8 = 3;
    pub const AWAITING_DECISION: u8 = 4;
    /// A partial result (a declared fallback other than budget exhaustion).
    pub const PARTIAL: u8 = 5;
    /// `flow run PLAN.json` refused the plan: its content does not match its
    /// digest, or it fails the static checks.
    pub const PLAN_REFUSED: u8 = 6;
}

/// Why a run could not proceed (distinct from a run that failed).
#[derive(Debug, Clone)]
pub enum RunError {
    Usage(String),
    Storage(String),
    /// `--replay` met a request not in the cassette.
    ReplayMiss(String),
    /// The journal does not match what the plan produces.
    Diverged(String),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Usage(m) | RunError::Storage(m) | RunError::ReplayMiss(m) => write!(f, "{m}"),
            RunError::Diverged(m) => write!(f, "the journal diverges from the plan: {m}"),
        }
    }
}

impl std::error::Error for RunError {}

impl From<crate::journal::JournalError> for RunError {
    fn from(e: crate::journal::JournalError) -> Self {
        RunError::Storage(e.to_string())
    }
}

/// Answers a human question interactively (a terminal prompt), or `None`
/// when nobody can answer now (the run pauses).
pub trait Asker: Send {
    fn ask(&mut self, request: &HumanRequest) -> Option<HumanAnswer>;
}

/// Sees every event once it is persisted (progress display, logs).
pub type Observer = Box<dyn FnMut(&Event) + Send>;

/// The journal and artifact store of a run.
type Storage = (Box<dyn Journal>, Box<dyn ArtifactStore>);

/// Options of one execution.
pub struct Options {
    pub run_dir: PathBuf,
    pub clock: Arc<dyn Clock>,
    /// `synchronous=FULL` for the journal (survives power loss).
    pub durable: bool,
    /// No durable journal (benchmarks, embedding): events are sequenced and
    /// observed but not retained; artifacts stay in memory; no resume.
    pub in_memory: bool,
    pub record: Option<PathBuf>,
    pub replay: Option<(PathBuf, ReplayMode)>,
    /// Test hook: abort the process right after event `n` is persisted.
    pub crash_after_seq: Option<u64>,
    pub asker: Option<Box<dyn Asker>>,
    /// Called for every persisted event (progress display, logs).
    pub observer: Option<Observer>,
    /// Whether to write `trace.jsonl`.
    pub write_trace: bool,
    /// Ctrl-C cancels the run (the CLI); tests and embedders leave it off.
    pub cancel_on_ctrl_c: bool,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options").field("run_dir", &self.run_dir).field("in_memory", &self.in_memory).finish()
    }
}

impl Options {
    pub fn new(run_dir: PathBuf, clock: Arc<dyn Clock>) -> Options {
        Options {
            run_dir,
            clock,
            durable: false,
            in_memory: false,
            record: None,
            replay: None,
            crash_after_seq: None,
            asker: None,
            observer: None,
            write_trace: true,
            cancel_on_ctrl_c: false,
        }
    }
}

/// How a run ended (for now).
#[derive(Debug, Clone)]
pub struct Outcome {
    pub run_id: String,
    pub run_dir: PathBuf,
    pub status: RunStatus,
    pub events: u64,
    pub outputs: IndexMap<String, Value>,
    /// Model turns that reported more than their per-turn ceilings (each
    /// is a `warning` event): use the static budget bounds do not cover.
    pub ceiling_breaches: u64,
}

impl Outcome {
    /// The process exit code for this outcome.
    pub fn exit_code(&self) -> u8 {
        match &self.status {
            RunStatus::Terminated { status, budget_exhausted, .. } => match status.as_str() {
                "success" => exit::SUCCESS,
                _ if *budget_exhausted => exit::BUDGET_EXHAUSTED,
                "partial" => exit::PARTIAL,
                _ => exit::FAILED,
            },
            RunStatus::Paused { .. } => exit::AWAITING_DECISION,
            RunStatus::Running => exit::FAILED,
        }
    }
}

/// What a run directory records about its run, besides events.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunMeta {
    pub run_id: String,
    pub workflow: Option<String>,
    pub base_dir: PathBuf,
    pub input: Value,
    pub started_ms: u64,
    pub executions: u32,
    #[serde(default)]
    pub replay: Option<(PathBuf, bool)>,
}

/// A recorded data-plane response.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Proposal {
    pub key: String,
    pub response: Response,
}

const META: &str = "run";
const PLAN: &str = "plan";

fn proposal_key(n: u64) -> String {
    format!("proposal/{n:08}")
}

/// Reads every recorded proposal of a run, in order.
pub fn proposals(journal: &dyn Journal, run_id: &str) -> Result<Vec<Proposal>, RunError> {
    let mut out = Vec::new();
    while let Some(text) = journal.meta(run_id, &proposal_key(out.len() as u64 + 1))? {
        out.push(serde_json::from_str(&text).map_err(|e| RunError::Storage(format!("corrupt proposal: {e}")))?);
    }
    Ok(out)
}

/// Appends a proposal; refuses a second one for the same key.
pub fn append_proposal(journal: &mut dyn Journal, run_id: &str, proposal: &Proposal) -> Result<u64, RunError> {
    let existing = proposals(journal, run_id)?;
    if existing.iter().any(|p| p.key == proposal.key) {
        return Err(RunError::Usage(format!("`{}` is already answered; a decision is recorded once", proposal.key)));
    }
    let n = existing.len() as u64 + 1;
    let text = serde_json::to_string(proposal).map_err(|e| RunError::Storage(e.to_string()))?;
    journal.set_meta(run_id, &proposal_key(n), &text)?;
    Ok(n)
}

/// Opens a run directory's journal.
pub fn open_journal(run_dir: &Path, durable: bool) -> Result<SqliteJournal, RunError> {
    let path = run_dir.join("journal.sqlite");
    if !path.exists() {
        return Err(RunError::Usage(format!("{} is not a run directory (no journal.sqlite)", run_dir.display())));
    }
    Ok(SqliteJournal::open(&path, durable)?)
}

/// The run id recorded in a run directory.
pub fn run_id_of(journal: &dyn Journal) -> Result<String, RunError> {
    journal.runs()?.into_iter().next().ok_or_else(|| RunError::Usage("the journal records no run".into()))
}

/// The run metadata and plan recorded in a journal.
pub fn load_meta(journal: &dyn Journal, run_id: &str) -> Result<(RunMeta, Plan), RunError> {
    let meta = journal.meta(run_id, META)?.ok_or_else(|| RunError::Storage("the journal has no run metadata".into()))?;
    let meta: RunMeta = serde_json::from_str(&meta).map_err(|e| RunError::Storage(format!("corrupt run metadata: {e}")))?;
    let plan = journal.meta(run_id, PLAN)?.ok_or_else(|| RunError::Storage("the journal has no plan".into()))?;
    let plan: Plan = serde_json::from_str(&plan).map_err(|e| RunError::Storage(format!("corrupt plan in the journal: {e}")))?;
    Ok((meta, plan))
}

/// Strips what may legitimately differ between a recorded event and its
/// replay: the execution, the time, lease owners and expiry instants.
fn comparable(event: &Event) -> Value {
    let mut v = serde_json::to_value(event).unwrap_or(Value::Null);
    if let Some(o) = v.as_object_mut() {
        o.remove("execution_id");
        o.remove("time");
        if let Some(p) = o.get_mut("payload").and_then(Value::as_object_mut) {
            p.remove("owner");
            p.remove("expires_at");
            p.remove("duration_ms");
        }
    }
    v
}

struct Driver {
    engine: Engine,
    journal: Box<dyn Journal>,
    artifacts: Box<dyn ArtifactStore>,
    trace: Option<std::io::BufWriter<std::fs::File>>,
    exec: Arc<Executors>,
    run_id: String,
    /// Commands issued and not answered, by key.
    known: FxHashMap<String, Arc<Command>>,
    /// Keys of commands not dispatched yet, in issue order.
    queue: VecDeque<String>,
    /// Journal events to match while replaying.
    recorded: Vec<Event>,
    proposals_written: u64,
    opts: Options,
    tool_calls: HashMap<String, VecDeque<Instant>>,
}

impl Driver {
    /// Persists what the engine produced; returns once it is durable.
    fn flush(&mut self) -> Result<(), RunError> {
        for (artifact, bytes) in self.engine.take_artifacts() {
            self.artifacts.put_encoded(&artifact, &bytes)?;
        }
        let mut fresh = self.engine.take_events();
        // Events the journal already holds (a replay) come first: they are
        // checked against it, not appended again. The rest stay in place.
        let replayed = fresh.iter().take_while(|e| (e.seq as usize) <= self.recorded.len()).count();
        for event in &fresh[..replayed] {
            let index = event.seq as usize - 1;
            if let Some(recorded) = self.recorded.get(index) {
                if comparable(recorded) != comparable(event) {
                    return Err(RunError::Diverged(format!(
                        "event {} was `{}` {} but replaying gives `{}` {}",
                        event.seq,
                        recorded.kind(),
                        serde_json::to_string(&recorded.body).unwrap_or_default(),
                        event.kind(),
                        serde_json::to_string(&event.body).unwrap_or_default()
                    )));
                }
            }
        }
        fresh.drain(..replayed);
        if !fresh.is_empty() {
            tracing::debug!(first = fresh[0].seq, count = fresh.len(), "persisting events");
            match self.opts.crash_after_seq {
                Some(n) if fresh.iter().any(|e| e.seq >= n) => {
                    let before: Vec<Event> = fresh.iter().filter(|e| e.seq <= n).cloned().collect();
                    self.journal.append_batch(&before)?;
                    // Simulates kill -9 at this event boundary.
                    std::process::abort();
                }
                _ => self.journal.append_batch(&fresh)?,
            }
            if let Some(trace) = &mut self.trace {
                for event in &fresh {
                    let line = serde_json::to_string(event).map_err(|e| RunError::Storage(e.to_string()))?;
                    writeln!(trace, "{line}").map_err(|e| RunError::Storage(format!("cannot write trace.jsonl: {e}")))?;
                }
                trace.flush().map_err(|e| RunError::Storage(format!("cannot write trace.jsonl: {e}")))?;
            }
            if let Some(observer) = &mut self.opts.observer {
                for event in &fresh {
                    observer(event);
                }
            }
        }
        self.engine.recycle_events(fresh);
        for command in self.engine.take_commands() {
            self.queue.push_back(command.key.clone());
            self.known.insert(command.key.clone(), Arc::new(command));
        }
        // Commands leave the engine's outstanding set only when answered
        // (removed here as they are fed) or dropped at once (termination,
        // recovery): equal sizes mean equal sets.
        if self.known.len() != self.engine.outstanding_len() {
            let engine = &self.engine;
            self.known.retain(|k, _| engine.is_outstanding(k));
        }
        Ok(())
    }

    fn feed(&mut self, key: &str, response: Response, persist: bool) -> Result<(), RunError> {
        tracing::debug!(key, persist, "response");
        // An in-memory run retains nothing to resume from: its proposals
        // would never be read.
        if persist && !self.opts.in_memory {
            // This driver is the run's only writer: it knows the next
            // position without reading the others back.
            let proposal = Proposal { key: key.to_string(), response: response.clone() };
            let text = serde_json::to_string(&proposal).map_err(|e| RunError::Storage(e.to_string()))?;
            self.proposals_written += 1;
            self.journal.set_meta(&self.run_id, &proposal_key(self.proposals_written), &text)?;
        }
        self.known.remove(key);
        self.engine.on_response(key, response).map_err(RunError::Diverged)?;
        self.flush()
    }

    /// Replays recorded proposals until the journal is exhausted. Returns
    /// the proposals not yet consumed (answers recorded after the journal
    /// ended: decisions given with `flow approve`, or responses persisted
    /// just before a crash).
    fn replay(&mut self, proposals: Vec<Proposal>) -> Result<Vec<Proposal>, RunError> {
        self.engine.replaying = true;
        let mut queue: VecDeque<Proposal> = proposals.into();
        loop {
            self.flush()?;
            let seq = self.engine.seq();
            if seq as usize >= self.recorded.len() {
                break;
            }
            let next = &self.recorded[seq as usize];
            match &next.body {
                Body::RunPaused { waiting_on, .. } => {
                    let waiting_on = waiting_on.clone();
                    self.engine.pause(&waiting_on);
                    self.flush()?;
                    self.engine.unpause();
                    continue;
                }
                Body::RunResumed { after_seq, .. } => {
                    let after = *after_seq;
                    let answered: Vec<String> = queue.iter().map(|p| p.key.clone()).collect();
                    self.engine.recover(after, &answered);
                    continue;
                }
                Body::LeaseHeartbeat { .. } => {
                    self.engine.heartbeat();
                    continue;
                }
                _ => {}
            }
            let Some(proposal) = queue.front() else {
                return Err(RunError::Diverged(format!("event {} (`{}`) has no recorded cause", seq + 1, next.kind())));
            };
            if !self.engine.is_outstanding(&proposal.key) {
                return Err(RunError::Diverged(format!("the recorded answer `{}` answers no outstanding request", proposal.key)));
            }
            let proposal = queue.pop_front().expect("front exists");
            self.feed(&proposal.key, proposal.response, false)?;
        }
        self.engine.replaying = false;
        Ok(queue.into())
    }

    fn timeout_for(&self, command: &Command) -> Option<u64> {
        // A turn's or a call's key starts with its attempt's id.
        self.engine.workflow().nodes.get(flow_trace::attempt_node(&command.key))?.timeout_ms()
    }

    /// How long to hold a call of `decl` (a tool or an agent) back so
    /// that its `rate_limit` holds.
    fn rate_delay(&mut self, program: &Program, decl: &str) -> u64 {
        let tool = decl;
        let Some(Rate { count, per_ms }) = program.decls.get(tool).and_then(|d| d.rate_limit()) else {
            return 0;
        };
        if self.opts.clock.is_fake() || count == 0 {
            return 0;
        }
        let now = Instant::now();
        let window = Duration::from_millis(per_ms);
        let calls = self.tool_calls.entry(tool.to_string()).or_default();
        while calls.front().is_some_and(|t| now.duration_since(*t) >= window) {
            calls.pop_front();
        }
        let delay = if calls.len() as u64 >= count {
            calls.front().map(|t| window.saturating_sub(now.duration_since(*t)).as_millis() as u64).unwrap_or(0)
        } else {
            0
        };
        calls.push_back(now + Duration::from_millis(delay));
        delay
    }

    /// The live loop: dispatch, await, feed, until the run terminates or
    /// pauses.
    async fn live(&mut self, program: Arc<Program>, max_concurrency: usize) -> Result<(), RunError> {
        let mut inflight: JoinSet<(String, Result<Response, Miss>)> = JoinSet::new();
        let mut parked: Vec<String> = Vec::new();
        let heartbeat = Duration::from_millis(10_000);
        loop {
            self.flush()?;
            if !matches!(self.engine.status(), RunStatus::Running) {
                inflight.abort_all();
                break;
            }
            let mut answered = None;
            // Answers computed at once (pure builtin tools), in issue order.
            let mut ready: Vec<(String, Result<Response, Miss>)> = Vec::new();
            // Commands in issue order; a question nobody can answer now is
            // parked (the run pauses on it when nothing else is running).
            while let Some(key) = self.queue.front().cloned() {
                let Some(command) = self.known.get(&key).cloned() else {
                    self.queue.pop_front();
                    continue;
                };
                if let Request::Human(h) = &command.request {
                    self.queue.pop_front();
                    match self.exec.replayed(&command.request) {
                        Ok(Some(answer)) => {
                            self.exec.record_human(&command.request, &answer);
                            answered = Some((key, answer));
                            break;
                        }
                        Ok(None) => {}
                        Err(Miss(m)) if self.opts.replay.as_ref().is_some_and(|(_, mode)| *mode == ReplayMode::Strict) => {
                            return Err(RunError::ReplayMiss(m))
                        }
                        Err(_) => {}
                    }
                    match self.opts.asker.as_mut().and_then(|a| a.ask(h)) {
                        Some(answer) => {
                            let response = Response::Human(answer);
                            self.exec.record_human(&command.request, &response);
                            answered = Some((key, response));
                            break;
                        }
                        None => parked.push(key),
                    }
                    continue;
                }
                if inflight.len() >= max_concurrency {
                    break;
                }
                self.queue.pop_front();
                let mut delay = command.delay_ms;
                match &command.request {
                    Request::Tool(t) => delay += self.rate_delay(&program, &t.tool),
                    Request::Agent(a) => delay += self.rate_delay(&program, &a.agent),
                    _ => {}
                }
                if self.opts.clock.is_fake() {
                    delay = 0;
                }
                // A call that needs no waiting is answered here, without a task.
                if delay == 0 {
                    if let Some(result) = self.exec.execute_now(&command.request) {
                        tracing::debug!(key = %command.key, kind = command.request.kind(), "answered at once");
                        ready.push((key, result));
                        continue;
                    }
                }
                let timeout = self.timeout_for(&command);
                tracing::debug!(key = %command.key, kind = command.request.kind(), delay, "dispatching");
                let exec = self.exec.clone();
                inflight.spawn(async move {
                    if delay > 0 {
                        tokio::time::sleep(Duration::from_millis(delay)).await;
                    }
                    let result = match timeout {
                        Some(ms) => match tokio::time::timeout(Duration::from_millis(ms), exec.execute(&command.request, Some(ms))).await {
                            Ok(r) => r,
                            Err(_) => Ok(timed_out(&command.request, ms)),
                        },
                        None => exec.execute(&command.request, None).await,
                    };
                    (command.key.clone(), result)
                });
            }
            parked.retain(|k| self.known.contains_key(k));
            let waiting_on_human = parked.first().cloned();
            if !ready.is_empty() || answered.is_some() {
                for (key, result) in ready.into_iter().chain(answered.map(|(key, response)| (key, Ok(response)))) {
                    // What the run does after it stopped changes nothing.
                    if !matches!(self.engine.status(), RunStatus::Running) {
                        break;
                    }
                    match result {
                        Ok(response) => self.feed(&key, response, true)?,
                        Err(Miss(m)) => {
                            inflight.abort_all();
                            return Err(RunError::ReplayMiss(m));
                        }
                    }
                }
                continue;
            }
            if inflight.is_empty() {
                match waiting_on_human {
                    Some(key) => {
                        self.engine.pause(&key);
                        self.flush()?;
                    }
                    None => {
                        return Err(RunError::Diverged("the control plane is waiting for nothing (a runtime bug)".into()));
                    }
                }
                break;
            }
            tokio::select! {
                joined = inflight.join_next() => {
                    let Some(joined) = joined else { continue };
                    let (key, result) = joined.map_err(|e| RunError::Storage(format!("an executor panicked: {e}")))?;
                    match result {
                        Ok(response) => self.feed(&key, response, true)?,
                        Err(Miss(m)) => {
                            inflight.abort_all();
                            return Err(RunError::ReplayMiss(m));
                        }
                    }
                }
                _ = tokio::time::sleep(heartbeat), if !self.opts.clock.is_fake() => {
                    self.engine.heartbeat();
                }
                _ = tokio::signal::ctrl_c(), if self.opts.cancel_on_ctrl_c => {
                    tracing::info!("cancelled by SIGINT");
                    inflight.abort_all();
                    self.engine.cancel();
                }
            }
        }
        Ok(())
    }

    fn outcome(&self, run_dir: &Path) -> Outcome {
        Outcome {
            run_id: self.run_id.clone(),
            run_dir: run_dir.to_path_buf(),
            status: self.engine.status().clone(),
            events: self.engine.seq(),
            outputs: self.engine.outputs().clone(),
            ceiling_breaches: self.engine.ceiling_breaches(),
        }
    }

    fn finish(&mut self) -> Result<(), RunError> {
        if let Some(path) = &self.opts.record {
            self.exec.recorded().save(path).map_err(RunError::Storage)?;
        }
        Ok(())
    }
}

fn timed_out(request: &Request, ms: u64) -> Response {
    match request {
        Request::Agent(_) => Response::Agent(AgentReply { error: Some(format!("timed out after {ms} ms")), ..AgentReply::default() }),
        Request::Tool(_) => Response::Tool(ToolResult {
            ok: false,
            error: Some(format!("timed out after {ms} ms")),
            error_code: Some(flow_trace::ErrorCode::Timeout),
            duration_ms: ms,
            ..ToolResult::default()
        }),
        Request::Probe(_) => Response::Probe(ProbeResult { error: Some(format!("timed out after {ms} ms")), ..ProbeResult::default() }),
        Request::Human(_) => Response::Human(HumanAnswer { decision: flow_trace::Decision::Timeout, by: "control".into(), comment: None }),
    }
}

fn owner() -> String {
    format!("pid-{}", std::process::id())
}

fn executors(program: Arc<Program>, base_dir: &Path, replay: &Option<(PathBuf, ReplayMode)>, record: bool) -> Result<Executors, RunError> {
    let secrets = secrets_of(&program);
    let exec = Executors::new(program, base_dir.to_path_buf()).with_secrets(secrets);
    let exec = if record { exec.recording() } else { exec };
    Ok(match replay {
        Some((path, mode)) => exec.with_cassette(Cassette::load(path).map_err(RunError::Usage)?, *mode),
        None => exec,
    })
}

/// The values of the environment variables that hold API keys
/// (providers' `api_key_env`): redacted from everything the run writes.
pub fn secrets_of(program: &Program) -> Vec<String> {
    let mut secrets = Vec::new();
    for decl in program.decls.values() {
        if let Some(name) = decl.api_key_env() {
            if let Ok(value) = std::env::var(name) {
                if !value.is_empty() && !secrets.contains(&value) {
                    secrets.push(value);
                }
            }
        }
    }
    secrets
}

fn max_concurrency(program: &Program, workflow: Option<&str>) -> usize {
    let wf = match workflow {
        Some(w) => program.workflows.get(w),
        None => program.workflows.values().next(),
    };
    match wf.and_then(|w| w.concurrency()) {
        Some(n) if n > 0 => n as usize,
        _ => 8,
    }
}

fn storage(opts: &Options) -> Result<Storage, RunError> {
    if opts.in_memory {
        return Ok((Box::new(MemoryJournal::sequence_only()), Box::new(MemoryArtifacts::default())));
    }
    std::fs::create_dir_all(&opts.run_dir).map_err(|e| RunError::Usage(format!("cannot create {}: {e}", opts.run_dir.display())))?;
    let journal = SqliteJournal::open(&opts.run_dir.join("journal.sqlite"), opts.durable)?;
    let artifacts = DirArtifacts::open(&opts.run_dir.join("artifacts"))?;
    Ok((Box::new(journal), Box::new(artifacts)))
}

fn trace_file(opts: &Options, truncate: bool) -> Result<Option<std::io::BufWriter<std::fs::File>>, RunError> {
    if opts.in_memory || !opts.write_trace {
        return Ok(None);
    }
    let path = opts.run_dir.join("trace.jsonl");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(!truncate)
        .write(true)
        .truncate(truncate)
        .open(&path)
        .map_err(|e| RunError::Storage(format!("cannot open {}: {e}", path.display())))?;
    Ok(Some(std::io::BufWriter::new(file)))
}

/// Starts a new run of `plan` in `opts.run_dir`.
pub async fn run(
    plan: &Plan,
    workflow: Option<&str>,
    input: Value,
    base_dir: &Path,
    run_id: &str,
    opts: Options,
) -> Result<Outcome, RunError> {
    let program = plan.program.clone();
    let (mut journal, artifacts) = storage(&opts)?;
    if journal.last_seq(run_id)? > 0 {
        return Err(RunError::Usage(format!("{} already holds run {run_id}; use `flow resume`", opts.run_dir.display())));
    }
    let cfg = RunConfig {
        run_id: run_id.to_string(),
        execution_id: "exec-1".into(),
        plan_digest: plan.source.digest.clone(),
        plan_content_digest: Some(plan.content_digest.clone()).filter(|d| !d.is_empty()),
        clock: opts.clock.clone(),
        owner: owner(),
        lease_ttl_ms: 30_000,
    };
    let engine = Engine::new(program.clone(), workflow, cfg).map_err(RunError::Usage)?;
    let meta = RunMeta {
        run_id: run_id.to_string(),
        workflow: Some(engine.workflow().name.clone()),
        base_dir: base_dir.to_path_buf(),
        input: input.clone(),
        started_ms: engine.start_ms(),
        executions: 1,
        replay: opts.replay.as_ref().map(|(p, m)| (p.clone(), *m == ReplayMode::Strict)),
    };
    if !opts.in_memory {
        journal.set_meta(run_id, PLAN, &serde_json::to_string(plan).map_err(|e| RunError::Storage(e.to_string()))?)?;
        journal.set_meta(run_id, META, &serde_json::to_string(&meta).map_err(|e| RunError::Storage(e.to_string()))?)?;
    }
    let exec = Arc::new(executors(program.clone(), base_dir, &opts.replay, opts.record.is_some())?);
    let trace = trace_file(&opts, true)?;
    let concurrency = max_concurrency(&program, workflow);
    let mut driver = Driver {
        engine,
        journal,
        artifacts,
        trace,
        exec,
        run_id: run_id.to_string(),
        known: FxHashMap::default(),
        queue: VecDeque::new(),
        recorded: Vec::new(),
        proposals_written: 0,
        opts,
        tool_calls: HashMap::new(),
    };
    driver.engine.start(input);
    driver.live(program, concurrency).await?;
    driver.finish()?;
    let run_dir = driver.opts.run_dir.clone();
    Ok(driver.outcome(&run_dir))
}

/// How far to take a resumed run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResumeMode {
    /// Continue the run live.
    Continue,
    /// Only re-derive the state from the journal (`flow replay`).
    DeriveOnly,
}

/// Resumes the run in `opts.run_dir` (or only re-derives its state).
pub async fn resume(mut opts: Options, mode: ResumeMode) -> Result<Outcome, RunError> {
    let journal = open_journal(&opts.run_dir, opts.durable)?;
    let run_id = run_id_of(&journal)?;
    let (mut meta, plan) = load_meta(&journal, &run_id)?;
    let recorded = journal.events(&run_id)?;
    let proposals = proposals(&journal, &run_id)?;
    let program = plan.program.clone();
    if opts.replay.is_none() {
        opts.replay = meta.replay.as_ref().map(|(p, strict)| (p.clone(), if *strict { ReplayMode::Strict } else { ReplayMode::Lenient }));
    }
    let execution = meta.executions + 1;
    let cfg = RunConfig {
        run_id: run_id.clone(),
        execution_id: format!("exec-{execution}"),
        plan_digest: plan.source.digest.clone(),
        plan_content_digest: Some(plan.content_digest.clone()).filter(|d| !d.is_empty()),
        clock: opts.clock.clone(),
        owner: owner(),
        lease_ttl_ms: 30_000,
    };
    let mut engine = Engine::new(program.clone(), meta.workflow.as_deref(), cfg).map_err(RunError::Usage)?;
    engine.set_start_ms(meta.started_ms);
    let artifacts = DirArtifacts::open(&opts.run_dir.join("artifacts"))?;
    // The journal is the truth: the trace is rewritten from it.
    let mut trace = None;
    if mode == ResumeMode::Continue {
        trace = trace_file(&opts, true)?;
        if let Some(t) = &mut trace {
            for event in &recorded {
                let line = serde_json::to_string(event).map_err(|e| RunError::Storage(e.to_string()))?;
                writeln!(t, "{line}").map_err(|e| RunError::Storage(format!("cannot write trace.jsonl: {e}")))?;
            }
        }
    }
    let exec = Arc::new(executors(program.clone(), &meta.base_dir, &opts.replay, opts.record.is_some())?);
    let last_seq = recorded.len() as u64;
    let concurrency = max_concurrency(&program, meta.workflow.as_deref());
    let mut driver = Driver {
        engine,
        journal: Box::new(journal),
        artifacts: Box::new(artifacts),
        trace,
        exec,
        run_id: run_id.clone(),
        known: FxHashMap::default(),
        queue: VecDeque::new(),
        recorded,
        proposals_written: proposals.len() as u64,
        opts,
        tool_calls: HashMap::new(),
    };
    driver.engine.start(meta.input.clone());
    let rest = driver.replay(proposals)?;
    if mode == ResumeMode::DeriveOnly {
        let run_dir = driver.opts.run_dir.clone();
        return Ok(driver.outcome(&run_dir));
    }
    if matches!(driver.engine.status(), RunStatus::Terminated { .. }) && rest.is_empty() {
        let run_dir = driver.opts.run_dir.clone();
        return Ok(driver.outcome(&run_dir));
    }
    meta.executions = execution;
    driver.journal.set_meta(&run_id, META, &serde_json::to_string(&meta).map_err(|e| RunError::Storage(e.to_string()))?)?;
    driver.recorded.clear();
    driver.engine.set_execution(&format!("exec-{execution}"));
    driver.engine.unpause();
    let answered: Vec<String> = rest.iter().map(|p| p.key.clone()).collect();
    driver.engine.recover(last_seq, &answered);
    driver.flush()?;
    for proposal in rest {
        if driver.engine.is_outstanding(&proposal.key) {
            driver.feed(&proposal.key, proposal.response, false)?;
        }
    }
    driver.live(program, concurrency).await?;
    driver.finish()?;
    let run_dir = driver.opts.run_dir.clone();
    Ok(driver.outcome(&run_dir))
}

/// The decision a paused run waits for: (key, request event payload).
#[derive(Debug, Clone)]
pub struct PendingDecision {
    pub key: String,
    pub subject: String,
    pub deciders: Vec<String>,
    pub decisions: Vec<flow_trace::Decision>,
}

/// Decisions requested in the journal and not yet answered.
pub fn pending_decisions(journal: &dyn Journal, run_id: &str) -> Result<Vec<PendingDecision>, RunError> {
    let events = journal.events(run_id)?;
    let answered: HashSet<String> = proposals(journal, run_id)?.into_iter().map(|p| p.key).collect();
    let mut rounds: HashMap<String, u32> = HashMap::new();
    let mut out = Vec::new();
    for event in &events {
        if let Body::DecisionRequested { subject, deciders, decisions, .. } = &event.body {
            let round = rounds.entry(subject.clone()).or_default();
            *round += 1;
            let key = crate::keys::CommandKey::Decision { subject, round: *round }.to_key();
            if !answered.contains(&key) {
                out.push(PendingDecision { key, subject: subject.clone(), deciders: deciders.clone(), decisions: decisions.clone() });
            }
        }
    }
    if matches!(events.last().map(|e| &e.body), Some(Body::RunTerminated { .. })) {
        out.clear();
    }
    Ok(out)
}
