//! Runs the control plane against the data plane.
//!
//! The driver owns the run directory: the journal (`journal.sqlite`), the
//! trace (`trace.jsonl`, rewritten from the journal on resume) and the
//! artifacts (`artifacts/`). Its loop: store the engine's artifacts,
//! collect its events, and at each effect boundary append them to the
//! journal in one transaction (a group commit) and to the trace — before
//! a command that reaches outside the run is dispatched, a human is asked,
//! the loop waits, the run pauses or ends: an event is persisted before
//! its effect is visible. Every external response is persisted (as a
//! proposal) before the engine sees it; the answers of pure builtin calls
//! wait for the next group.
//!
//! Resume replays: the engine runs again from the start and is fed the
//! recorded proposals in their recorded order; the events it regenerates
//! must match the journal (else the run has diverged from its plan). When
//! the journal is exhausted the run goes live: attempts whose executor was
//! lost get their lease expired and run again, non-idempotent tool calls
//! with an unknown outcome go to reconciliation.

mod dispatch;
mod live;
mod lock;
mod replay;
mod rundir;

use dispatch::*;
pub use lock::{move_aside, valid_run_id, RunLock, LOCK_FILE};
use replay::*;
use rundir::*;
pub use rundir::{append_proposal, load_meta, open_journal, pending_decisions, proposals, run_id_of, PendingDecision, Proposal, RunMeta};

use crate::clock::Clock;
use crate::engine::{Engine, RunConfig, RunStatus};
use crate::exec::{Cassette, Executors, Miss, ReplayMode};
use crate::journal::{ArtifactStore, CrashAfter, DirArtifacts, Journal, MemoryArtifacts, MemoryJournal, SqliteJournal};
use crate::proto::*;
use flow_check::ir::Program;
use flow_check::plan::Plan;
use flow_check::view::Rate;
use flow_trace::{Body, Event};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{HashMap, HashSet, VecDeque};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
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
    /// Stopped by SIGTERM or SIGHUP mid-run: `flow resume` continues it.
    pub const STOPPED: u8 = 7;
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
    /// This process's claim on a shared run was taken over by another
    /// worker: it stopped writing (nothing it did after is recorded).
    Fenced(String),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Usage(m) | RunError::Storage(m) | RunError::ReplayMiss(m) => write!(f, "{m}"),
            RunError::Diverged(m) => write!(f, "the journal diverges from the plan: {m}"),
            RunError::Fenced(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for RunError {}

impl From<crate::journal::JournalError> for RunError {
    fn from(e: crate::journal::JournalError) -> Self {
        if matches!(e, crate::journal::JournalError::Fenced { .. }) {
            return RunError::Fenced(e.to_string());
        }
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
    /// Test hook: abort the process right after event `n` is persisted
    /// (the journal is wrapped in [`crate::journal::CrashAfter`]).
    pub crash_after_seq: Option<u64>,
    /// With `crash_after_seq`: the crash fails the run with an error
    /// instead of aborting the process (in-process crash campaigns).
    pub crash_in_process: bool,
    pub asker: Option<Box<dyn Asker>>,
    /// Called for every persisted event (progress display, logs).
    pub observer: Option<Observer>,
    /// Where MCP servers' progress reports on calls go (shown, never journaled).
    pub progress: Option<crate::mcp::ProgressSink>,
    /// Whether to write `trace.jsonl`.
    pub write_trace: bool,
    /// Ctrl-C cancels the run (the CLI); tests and embedders leave it off.
    pub cancel_on_ctrl_c: bool,
    /// Sign the trace's head when this execution stops (`trace.sig`,
    /// [`crate::signing`]).
    pub sign: Option<Arc<ed25519_dalek::SigningKey>>,
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
            crash_in_process: false,
            asker: None,
            observer: None,
            progress: None,
            write_trace: true,
            cancel_on_ctrl_c: false,
            sign: None,
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
    pub outputs: crate::eval::Env,
    /// Model turns that reported more than their per-turn ceilings (each
    /// is a `warning` event): use the static budget bounds do not cover.
    pub ceiling_breaches: u64,
    /// The signal (SIGTERM, SIGHUP) that stopped the process mid-run: the
    /// run is left as a crash would leave it, for `flow resume`.
    pub stopped_by: Option<&'static str>,
    /// The journal transactions (group commits) this execution made.
    pub commits: u64,
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
            RunStatus::Running if self.stopped_by.is_some() => exit::STOPPED,
            RunStatus::Running => exit::FAILED,
        }
    }
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
    /// Rate limits, by the injected clock.
    rates: RateLimiter,
    /// This process's hold on the run directory (none in memory).
    _lock: Option<RunLock>,
    /// The signal that stopped this process mid-run (the run stays
    /// resumable).
    stopped_by: Option<&'static str>,
    /// The head of the trace's hash chain: the digest of the last line
    /// written (none in memory).
    chain: Option<String>,
    /// The signals the live loop answers, listened for from the start.
    signals: Option<live::StopSignals>,
    /// Events collected and not yet durable (the next group commit's).
    unpersisted: Vec<Event>,
    /// Proposals (answers of pure calls) waiting for the next group
    /// commit: `(meta key, JSON)`.
    unpersisted_meta: Vec<(String, String)>,
    /// Journal transactions this execution made.
    commits: u64,
}

impl Driver {
    /// Persists what the engine produced; returns once it is durable.
    fn flush(&mut self) -> Result<(), RunError> {
        self.collect()?;
        self.persist().map(|_| ())
    }

    /// Takes what the engine produced: artifacts stored (by digest, so
    /// idempotent), events checked against the journal while replaying and
    /// kept for the next [`Driver::persist`], commands queued.
    fn collect(&mut self) -> Result<(), RunError> {
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
        if self.unpersisted.is_empty() {
            // The common case: hand the engine's buffer over whole.
            fresh.drain(..replayed);
            std::mem::swap(&mut self.unpersisted, &mut fresh);
        } else {
            self.unpersisted.extend(fresh.drain(replayed..));
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

    /// Makes the events collected so far, and the proposals waiting with
    /// them, durable in one journal transaction (a group commit), then
    /// appends them to `trace.jsonl`. Called before anything external is
    /// dispatched, a human is asked, the run pauses or ends. Gives whether
    /// it committed anything.
    fn persist(&mut self) -> Result<bool, RunError> {
        if self.unpersisted.is_empty() && self.unpersisted_meta.is_empty() {
            return Ok(false);
        }
        let mut fresh = std::mem::take(&mut self.unpersisted);
        let meta = std::mem::take(&mut self.unpersisted_meta);
        self.commits += 1;
        if !fresh.is_empty() {
            tracing::debug!(first = fresh[0].seq, count = fresh.len(), "persisting events");
        }
        match &mut self.chain {
            // Each event is linked to the line before it and encoded
            // once, for the journal and the trace.
            Some(head) => {
                let (lines, next) = flow_trace::chain::link_events(&mut fresh, std::mem::take(head))
                    .map_err(|e| RunError::Storage(format!("cannot encode an event: {e}")))?;
                *head = next;
                self.journal.commit_group(&self.run_id, &meta, &fresh, &lines)?;
                if let Some(trace) = &mut self.trace {
                    for line in &lines {
                        writeln!(trace, "{line}").map_err(|e| RunError::Storage(format!("cannot write trace.jsonl: {e}")))?;
                    }
                    trace.flush().map_err(|e| RunError::Storage(format!("cannot write trace.jsonl: {e}")))?;
                }
            }
            // In memory: nothing is kept to be tampered with.
            None => self.journal.append_batch(&fresh)?,
        }
        if let Some(observer) = &mut self.opts.observer {
            for event in &fresh {
                observer(event);
            }
        }
        // The buffer goes back for the next group.
        fresh.clear();
        self.unpersisted = fresh;
        Ok(true)
    }

    /// Runs live to a pause, the end or a stop, then finishes this execution.
    async fn live_to_end(mut self, program: Arc<Program>, concurrency: usize) -> Result<Outcome, RunError> {
        self.live(program, concurrency).await?;
        self.finish()?;
        Ok(self.outcome_here())
    }

    /// How the run stands, in its own run directory.
    fn outcome_here(&self) -> Outcome {
        self.outcome(&self.opts.run_dir)
    }

    fn outcome(&self, run_dir: &Path) -> Outcome {
        Outcome {
            run_id: self.run_id.clone(),
            run_dir: run_dir.to_path_buf(),
            status: self.engine.status().clone(),
            events: self.engine.seq(),
            outputs: self.engine.outputs().clone(),
            ceiling_breaches: self.engine.ceiling_breaches(),
            stopped_by: self.stopped_by,
            commits: self.commits,
        }
    }

    fn finish(&mut self) -> Result<(), RunError> {
        if let Some(path) = &self.opts.record {
            self.exec.recorded().save(path).map_err(RunError::Storage)?;
        }
        self.sign()
    }

    /// Signs the head of the trace as this execution leaves it.
    fn sign(&self) -> Result<(), RunError> {
        if let (Some(key), Some(head)) = (&self.opts.sign, &self.chain) {
            let record = crate::signing::sign(key, &self.run_id, self.engine.seq(), head);
            crate::signing::write(&self.opts.run_dir, &record).map_err(RunError::Storage)?;
        }
        Ok(())
    }
}

/// The engine's configuration for execution number `execution` of a run.
fn run_config(run_id: &str, execution: u32, plan: &Plan, opts: &Options) -> RunConfig {
    RunConfig {
        run_id: run_id.to_string(),
        execution_id: format!("exec-{execution}"),
        plan_digest: plan.source.digest.clone(),
        plan_content_digest: Some(plan.content_digest.clone()).filter(|d| !d.is_empty()),
        clock: opts.clock.clone(),
        owner: owner(),
        lease_ttl_ms: 30_000,
    }
}

fn owner() -> String {
    format!("pid-{}", std::process::id())
}

fn executors(program: Arc<Program>, base_dir: &Path, opts: &Options) -> Result<Executors, RunError> {
    let secrets = secrets_of(&program)?;
    let exec = Executors::new(program, base_dir.to_path_buf()).with_secrets(secrets);
    let exec = if opts.record.is_some() { exec.recording() } else { exec };
    let exec = match &opts.progress {
        Some(sink) => exec.with_progress(sink.clone()),
        None => exec,
    };
    let replay = &opts.replay;
    Ok(match replay {
        Some((path, mode)) => exec.with_cassette(Cassette::load(path).map_err(RunError::Usage)?, *mode),
        None => exec,
    })
}

/// The values of the environment variables that hold API keys
/// (providers' `api_key_env`): redacted from everything the run writes. A
/// key shorter than [`MIN_SECRET_LEN`](crate::exec::redaction::MIN_SECRET_LEN)
/// cannot be redacted reliably: the run does not start.
pub fn secrets_of(program: &Program) -> Result<Vec<String>, RunError> {
    use crate::exec::redaction::MIN_SECRET_LEN;
    let mut secrets = Vec::new();
    for decl in program.decls.values() {
        if let Some(name) = decl.api_key_env() {
            if let Ok(value) = std::env::var(name) {
                if value.is_empty() || secrets.contains(&value) {
                    continue;
                }
                if value.chars().count() < MIN_SECRET_LEN {
                    return Err(RunError::Usage(format!(
                        "the API key in `{name}` is {} characters long: under {MIN_SECRET_LEN}, it cannot be told from other text to be redacted, so the run does not start",
                        value.chars().count()
                    )));
                }
                secrets.push(value);
            }
        }
    }
    Ok(secrets)
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
    // Before the run directory exists: a signal from then on is the run's.
    let signals = live::StopSignals::new(opts.cancel_on_ctrl_c);
    let program = plan.program.clone();
    if !valid_run_id(run_id) {
        return Err(RunError::Usage(format!("`{run_id}` is not a run id: letters, digits, `.`, `_` and `-` only, not starting with `.`")));
    }
    let cfg = run_config(run_id, 1, plan, &opts);
    let engine = Engine::new(program.clone(), workflow, cfg).map_err(RunError::Usage)?;
    // Before anything is written: a key too short to redact stops here, and
    // a key in the input is taken out of it.
    let exec = Arc::new(executors(program.clone(), base_dir, &opts)?);
    let (input, redacted) = exec.redact_input(input);
    if redacted {
        tracing::warn!("the run's input held an API key: it was redacted before it was recorded");
    }
    let meta = RunMeta {
        run_id: run_id.to_string(),
        workflow: Some(engine.workflow().name.clone()),
        base_dir: base_dir.to_path_buf(),
        input: input.clone(),
        started_ms: engine.start_ms(),
        executions: 1,
        replay: opts.replay.as_ref().map(|(p, m)| (p.clone(), *m == ReplayMode::Strict)),
        paths_from_run_dir: false,
    }
    .with_paths_from(&opts.run_dir);
    // The directory appears whole (plan and metadata in it) and locked.
    let lock = match opts.in_memory {
        true => None,
        false => {
            let plan = serde_json::to_string(plan).map_err(|e| RunError::Storage(e.to_string()))?;
            let meta = serde_json::to_string(&meta).map_err(|e| RunError::Storage(e.to_string()))?;
            Some(lock::create_run_dir(&opts, run_id, &plan, &meta)?)
        }
    };
    let (journal, artifacts) = storage(&opts)?;
    let trace = trace_file(&opts, true)?;
    let concurrency = max_concurrency(&program, workflow);
    let opts_in_memory = opts.in_memory;
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
        rates: RateLimiter::default(),
        _lock: lock,
        stopped_by: None,
        chain: (!opts_in_memory).then(|| flow_trace::chain::genesis(run_id)),
        signals: Some(signals),
        unpersisted: Vec::new(),
        unpersisted_meta: Vec::new(),
        commits: 0,
    };
    driver.engine.start(input);
    driver.live_to_end(program, concurrency).await
}

/// The journal is the truth: the trace file is rewritten from it (and kept
/// open for what the resumed run appends).
fn rewrite_trace(opts: &Options, recorded: &[Event]) -> Result<Option<std::io::BufWriter<std::fs::File>>, RunError> {
    let mut trace = trace_file(opts, true)?;
    if let Some(t) = &mut trace {
        for event in recorded {
            let line = serde_json::to_string(event).map_err(|e| RunError::Storage(e.to_string()))?;
            writeln!(t, "{line}").map_err(|e| RunError::Storage(format!("cannot write trace.jsonl: {e}")))?;
        }
    }
    Ok(trace)
}

/// A signed run is not resumed unsigned: what it adds would not be.
fn refuse_unsigned(opts: &Options, run_id: &str) -> Result<(), RunError> {
    if opts.sign.is_none() && opts.run_dir.join(crate::signing::SIGNATURE_FILE).exists() {
        return Err(RunError::Usage(format!(
            "run {run_id}'s trace is signed ({}): resume it with --sign KEY, so that what it adds is signed too",
            crate::signing::SIGNATURE_FILE
        )));
    }
    Ok(())
}

/// Where the chain goes on from: the digest of the last line the journal
/// holds (its encoding is the line that was written: the journal compares
/// them byte for byte), or the run's genesis.
fn chain_head(recorded: &[Event], run_id: &str) -> Result<String, RunError> {
    Ok(match recorded.last() {
        Some(last) => flow_trace::chain::link(&serde_json::to_string(last).map_err(|e| RunError::Storage(e.to_string()))?),
        None => flow_trace::chain::genesis(run_id),
    })
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
pub async fn resume(opts: Options, mode: ResumeMode) -> Result<Outcome, RunError> {
    let signals = live::StopSignals::new(opts.cancel_on_ctrl_c && mode == ResumeMode::Continue);
    let journal = open_journal(&opts.run_dir, opts.durable)?;
    let lock = RunLock::acquire(&opts.run_dir)?;
    let run_id = run_id_of(&journal)?;
    if mode == ResumeMode::Continue {
        refuse_unsigned(&opts, &run_id)?;
    }
    let artifacts = DirArtifacts::open(&opts.run_dir.join("artifacts"))?;
    let stored = Stored { journal: Box::new(journal), artifacts: Box::new(artifacts), lock: Some(lock), run_id };
    resume_from(stored, signals, opts, mode).await
}

/// Drives a run kept in a shared store (PostgreSQL: [`crate::db`]) — its
/// first execution when it has never run (`flow submit` recorded only its
/// plan and input), else a resume as [`resume`]'s. There is no run
/// directory and no `trace.jsonl`: the journal holds the trace's lines.
/// The store's own claim (a lease, with its fencing epoch in the
/// journal) stands for the run directory's lock.
pub async fn drive_stored(
    journal: Box<dyn Journal>,
    artifacts: Box<dyn ArtifactStore>,
    run_id: &str,
    mut opts: Options,
    mode: ResumeMode,
) -> Result<Outcome, RunError> {
    let signals = live::StopSignals::new(opts.cancel_on_ctrl_c && mode == ResumeMode::Continue);
    opts.write_trace = false;
    let stored = Stored { journal, artifacts, lock: None, run_id: run_id.to_string() };
    resume_from(stored, signals, opts, mode).await
}

/// A run's storage as a resume finds it.
struct Stored {
    journal: Box<dyn Journal>,
    artifacts: Box<dyn ArtifactStore>,
    lock: Option<RunLock>,
    run_id: String,
}

async fn resume_from(stored: Stored, signals: live::StopSignals, mut opts: Options, mode: ResumeMode) -> Result<Outcome, RunError> {
    let Stored { journal, artifacts, lock, run_id } = stored;
    let (mut meta, plan) = load_meta(journal.as_ref(), &run_id)?;
    let recorded = journal.events(&run_id)?;
    let proposals = proposals(journal.as_ref(), &run_id)?;
    let program = plan.program.clone();
    if opts.replay.is_none() {
        opts.replay = meta.replay_in(&opts.run_dir).map(|(p, strict)| (p, if strict { ReplayMode::Strict } else { ReplayMode::Lenient }));
    }
    let execution = meta.executions + 1;
    let cfg = run_config(&run_id, execution, &plan, &opts);
    let mut engine = Engine::new(program.clone(), meta.workflow.as_deref(), cfg).map_err(RunError::Usage)?;
    // Submitted and never started: its first execution is a start, as
    // `flow run`'s (no resume, nothing to replay), and the run starts now,
    // not when it was queued (time in the queue is not the run's).
    let first = meta.executions == 0 && recorded.is_empty() && proposals.is_empty();
    if first {
        meta.started_ms = engine.start_ms();
    } else {
        engine.set_start_ms(meta.started_ms);
    }
    let trace = if mode == ResumeMode::Continue { rewrite_trace(&opts, &recorded)? } else { None };
    let exec = Arc::new(executors(program.clone(), &meta.base_dir_in(&opts.run_dir), &opts)?);
    let last_seq = recorded.len() as u64;
    let concurrency = max_concurrency(&program, meta.workflow.as_deref());
    let chain = chain_head(&recorded, &run_id)?;
    let mut driver = Driver {
        engine,
        journal,
        artifacts,
        trace,
        exec,
        run_id: run_id.clone(),
        known: FxHashMap::default(),
        queue: VecDeque::new(),
        recorded,
        proposals_written: proposals.len() as u64,
        opts,
        rates: RateLimiter::default(),
        _lock: lock,
        stopped_by: None,
        chain: Some(chain),
        signals: Some(signals),
        unpersisted: Vec::new(),
        unpersisted_meta: Vec::new(),
        commits: 0,
    };
    driver.engine.start(meta.input.clone());
    if first && mode == ResumeMode::Continue {
        meta.executions = 1;
        driver.unpersisted_meta.push((META.to_string(), serde_json::to_string(&meta).map_err(|e| RunError::Storage(e.to_string()))?));
        return driver.live_to_end(program, concurrency).await;
    }
    let rest = driver.replay(proposals)?;
    driver.restore_decision_expiries();
    if mode == ResumeMode::DeriveOnly {
        return Ok(driver.outcome_here());
    }
    if matches!(driver.engine.status(), RunStatus::Terminated { .. }) && rest.is_empty() {
        // Nothing to add; a head a crash left unsigned is signed now.
        driver.sign()?;
        return Ok(driver.outcome_here());
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
            driver.feed(&proposal.key, proposal.response, replay::Keep::No)?;
        }
    }
    driver.live_to_end(program, concurrency).await
}
