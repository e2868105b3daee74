//! A worker: claims runnable runs from the database, drives each under
//! its lease (heartbeated), and releases it when it pauses or ends.
//!
//! ```text
//!  claim (SKIP LOCKED, epoch+1) ──► drive: driver::drive_stored over a PgJournal
//!        ▲                            fenced at the claimed epoch
//!        │ NOTIFY / poll                     │
//!        └──── release (paused, finished, ◄──┘  heartbeat thread: every lease/3,
//!              queued, error) at the epoch      extends the leases this worker holds
//! ```

use super::queue::{self, Claim, Release};
use super::PgConn;
use crate::driver::{self, Options, Outcome, ResumeMode, RunError};
use crate::engine::RunStatus;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

/// Makes the options a claimed run is driven with.
pub type OptionsFor = Arc<dyn Fn(&Claim) -> Options + Send + Sync>;

/// How a worker works.
pub struct WorkerConfig {
    pub url: String,
    /// Runs driven at once.
    pub concurrency: usize,
    /// Exit once nothing is queued or running anywhere (else wait for work).
    pub exit_when_idle: bool,
    /// How long a claim holds without a heartbeat.
    pub lease: Duration,
    /// How often the queue is polled when no notification comes.
    pub poll: Duration,
    /// This worker's name in leases (unique among live workers).
    pub owner: String,
    pub options: OptionsFor,
    /// One line per claim and release (stderr).
    pub log: bool,
}

impl std::fmt::Debug for WorkerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerConfig").field("owner", &self.owner).field("concurrency", &self.concurrency).finish_non_exhaustive()
    }
}

/// What a worker did.
#[derive(Debug, Default, Clone)]
pub struct WorkerReport {
    pub claimed: u64,
    pub taken_over: u64,
    pub finished: u64,
    pub paused: u64,
    pub requeued: u64,
    pub errors: u64,
    /// Runs this worker lost to another (fenced writes refused).
    pub fenced: u64,
    /// Events the runs it drove recorded in its executions.
    pub events: u64,
    /// How long each successful claim took.
    pub claim_latency: Vec<Duration>,
    /// Stopped by SIGINT or SIGTERM (its leases ended at once).
    pub stopped_by: Option<&'static str>,
}

impl WorkerReport {
    /// The `q`-quantile of claim latency (0 ≤ q ≤ 1).
    pub fn claim_quantile(&self, q: f64) -> Option<Duration> {
        let mut sorted = self.claim_latency.clone();
        sorted.sort();
        let last = sorted.len().checked_sub(1)?;
        sorted.get(((last as f64) * q).round() as usize).copied()
    }
}

/// Works until idle (with `exit_when_idle`) or stopped by a signal.
pub async fn work(cfg: WorkerConfig) -> Result<WorkerReport, RunError> {
    let control = PgConn::connect(&cfg.url)?;
    let pending = super::pending_migrations(&control)?;
    if !pending.is_empty() {
        return Err(RunError::Usage(format!("the database lacks migrations {pending:?}: run `flow db migrate --db URL` first")));
    }
    let wake = Arc::new(tokio::sync::Notify::new());
    let stop = Arc::new(AtomicBool::new(false));
    let listener = listen(&cfg.url, wake.clone(), stop.clone())?;
    let heartbeat = heartbeats(&cfg.url, &cfg.owner, cfg.lease, stop.clone())?;
    let mut control = control;
    let result = work_loop(&cfg, &mut control, &wake).await;
    stop.store(true, Ordering::Relaxed);
    // No heartbeat may extend a lease after it is ended.
    let _ = heartbeat.join();
    if result.as_ref().is_ok_and(|r| r.stopped_by.is_some()) {
        queue::expire_leases(&control, &cfg.owner)?;
    }
    let _ = listener.join();
    result
}

/// Drives one run in this process (`flow resume RUN --db`): claims it,
/// heartbeats its lease, releases it as a worker would.
pub async fn drive_one(cfg: &WorkerConfig, run_id: &str) -> Result<Outcome, RunError> {
    let control = PgConn::connect(&cfg.url)?;
    let claim = queue::claim_run(&control, run_id, &cfg.owner, cfg.lease)?;
    let stop = Arc::new(AtomicBool::new(false));
    let heartbeat = heartbeats(&cfg.url, &cfg.owner, cfg.lease, stop.clone())?;
    let result = drive(&Pool::default(), &cfg.url, &claim, (cfg.options)(&claim)).await;
    stop.store(true, Ordering::Relaxed);
    let _ = heartbeat.join();
    let mut report = WorkerReport::default();
    settle(cfg, &control, &mut report, &claim, &result)?;
    result
}

/// Connections of runs that ended, kept for the next: a connection is a
/// server process, and starting one costs more than a small run's steps.
#[derive(Debug, Clone, Default)]
struct Pool {
    idle: Arc<std::sync::Mutex<Vec<PgConn>>>,
}

impl Pool {
    /// A kept connection that still answers (one round trip: a server that
    /// dropped it is seen only by using it), else a new one.
    fn take(&self, url: &str) -> Result<PgConn, RunError> {
        let kept = self.idle.lock().ok().and_then(|mut idle| idle.pop());
        match kept {
            Some(conn) if conn.call(|c| Ok(c.batch_execute("").is_ok())).unwrap_or(false) => Ok(conn),
            _ => Ok(PgConn::connect(url)?),
        }
    }

    fn give_back(&self, conn: PgConn) {
        if let Ok(mut idle) = self.idle.lock() {
            idle.push(conn);
        }
    }
}

async fn work_loop(cfg: &WorkerConfig, control: &mut PgConn, wake: &tokio::sync::Notify) -> Result<WorkerReport, RunError> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut report = WorkerReport::default();
    let mut tasks: JoinSet<Result<Outcome, RunError>> = JoinSet::new();
    // Which claim each task drives (a task that panics names no claim).
    let mut claims: std::collections::HashMap<tokio::task::Id, Claim> = std::collections::HashMap::new();
    let pool = Pool::default();
    let mut interrupt = signal(SignalKind::interrupt()).map_err(|e| RunError::Storage(format!("cannot listen for SIGINT: {e}")))?;
    let mut terminate = signal(SignalKind::terminate()).map_err(|e| RunError::Storage(format!("cannot listen for SIGTERM: {e}")))?;
    loop {
        match claim_up_to(cfg, control, &mut report, &mut tasks, &mut claims, &pool) {
            Ok(()) => {}
            // The database went away: its runs' leases run out, and this
            // worker tries again (with a new connection) after a poll.
            Err(e) => {
                tracing::warn!("claiming runs: {e}");
                tokio::time::sleep(cfg.poll).await;
                if let Ok(conn) = PgConn::connect(&cfg.url) {
                    *control = conn;
                }
                continue;
            }
        }
        if tasks.is_empty() && cfg.exit_when_idle && idle(control)? {
            return Ok(report);
        }
        tokio::select! {
            Some(joined) = tasks.join_next_with_id() => {
                let (id, result) = match joined {
                    Ok((id, result)) => (id, result),
                    Err(e) => (e.id(), Err(RunError::Storage(format!("the run's driver panicked: {e}")))),
                };
                let Some(claim) = claims.remove(&id) else { continue };
                match settle(cfg, control, &mut report, &claim, &result) {
                    Ok(_) | Err(RunError::Fenced(_)) => {}
                    Err(e) => tracing::warn!("releasing {}: {e}", claim.run_id),
                }
            }
            _ = wake.notified() => {}
            _ = tokio::time::sleep(cfg.poll) => {}
            _ = interrupt.recv() => { report.stopped_by = Some("SIGINT"); return Ok(report); }
            _ = terminate.recv() => { report.stopped_by = Some("SIGTERM"); return Ok(report); }
        }
    }
}

/// Claims runs until `concurrency` are driven, each in a task of its own.
fn claim_up_to(
    cfg: &WorkerConfig,
    control: &PgConn,
    report: &mut WorkerReport,
    tasks: &mut JoinSet<Result<Outcome, RunError>>,
    claims: &mut std::collections::HashMap<tokio::task::Id, Claim>,
    pool: &Pool,
) -> Result<(), RunError> {
    while tasks.len() < cfg.concurrency.max(1) {
        let asked = Instant::now();
        let Some(claim) = queue::claim(control, &cfg.owner, cfg.lease)? else { break };
        report.claim_latency.push(asked.elapsed());
        report.claimed += 1;
        report.taken_over += u64::from(claim.takeover);
        if cfg.log {
            let how = if claim.takeover { "took over" } else { "claimed" };
            eprintln!("flow worker {}: {how} {} (epoch {})", cfg.owner, claim.run_id, claim.epoch);
        }
        let (url, options, pool, driven) = (cfg.url.clone(), cfg.options.clone(), pool.clone(), claim.clone());
        let handle = tasks.spawn(async move { drive(&pool, &url, &driven, options(&driven)).await });
        claims.insert(handle.id(), claim);
    }
    Ok(())
}

/// Nothing queued or running anywhere: no work can come to this worker
/// but from a new submission or a decision.
fn idle(control: &PgConn) -> Result<bool, RunError> {
    Ok(control.call(|client| {
        let row = client.query_one("SELECT count(*) FROM flow_runs WHERE status IN ('queued', 'running')", &[]).map_err(super::pg)?;
        Ok(row.get::<_, i64>(0) == 0)
    })?)
}

/// Drives one claimed run on a connection of its own (from the pool, and
/// back to it after).
async fn drive(pool: &Pool, url: &str, claim: &Claim, opts: Options) -> Result<Outcome, RunError> {
    let conn = pool.take(url)?;
    let (journal, artifacts) = super::fenced_storage(conn.clone(), &claim.run_id, claim.epoch);
    let result = driver::drive_stored(Box::new(journal), Box::new(artifacts), &claim.run_id, opts, ResumeMode::Continue).await;
    pool.give_back(conn);
    result
}

/// Releases a run its driver returned.
fn settle(
    cfg: &WorkerConfig,
    control: &PgConn,
    report: &mut WorkerReport,
    claim: &Claim,
    result: &Result<Outcome, RunError>,
) -> Result<Release, RunError> {
    let how = match result {
        Ok(outcome) => {
            report.events += outcome.events;
            match &outcome.status {
                RunStatus::Terminated { status, .. } => {
                    report.finished += 1;
                    Release::Finished { outcome: status.clone(), exit_code: i32::from(outcome.exit_code()) }
                }
                RunStatus::Paused { .. } => {
                    report.paused += 1;
                    Release::Paused
                }
                RunStatus::Running => {
                    report.requeued += 1;
                    Release::Queued
                }
            }
        }
        Err(RunError::Fenced(message)) => {
            report.fenced += 1;
            if cfg.log {
                eprintln!("flow worker {}: lost {}: {message}", cfg.owner, claim.run_id);
            }
            return Err(RunError::Fenced(message.clone()));
        }
        // Storage may come back (a dropped connection, a restarted
        // server): the run is queued again, resumable as after a crash.
        Err(RunError::Storage(message)) => {
            report.requeued += 1;
            if cfg.log {
                eprintln!("flow worker {}: {}: {message}", cfg.owner, claim.run_id);
            }
            Release::Queued
        }
        // A diverged journal, a replay miss, an unusable plan: no worker
        // would do better; it waits for a person (`flow runs --status error`).
        Err(e) => {
            report.errors += 1;
            Release::Error(e.to_string())
        }
    };
    let released = queue::release(control, &claim.run_id, claim.epoch, how.clone())?;
    if cfg.log {
        let note = if released { "" } else { " (taken over meanwhile: not released)" };
        eprintln!("flow worker {}: {} {}{note}", cfg.owner, claim.run_id, describe(&how));
    }
    if !released {
        report.fenced += 1;
    }
    Ok(how)
}

fn describe(how: &Release) -> String {
    match how {
        Release::Finished { outcome, exit_code } => format!("finished: {outcome} (exit {exit_code})"),
        Release::Paused => "paused: waiting for a decision (`flow approve --db`)".into(),
        Release::Queued => "stopped: queued again".into(),
        Release::Error(message) => format!("error: {message}"),
    }
}

/// A thread that wakes the loop on each `NOTIFY flow_runs`.
fn listen(url: &str, wake: Arc<tokio::sync::Notify>, stop: Arc<AtomicBool>) -> Result<std::thread::JoinHandle<()>, RunError> {
    let listener = queue::Listener::connect(url)?;
    std::thread::Builder::new()
        .name("flow-worker-listen".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match listener.wait(Duration::from_millis(250)) {
                    Ok(true) => wake.notify_one(),
                    Ok(false) => {}
                    // Polling stays the source of truth.
                    Err(e) => {
                        tracing::warn!("listening for runs: {e}");
                        std::thread::sleep(Duration::from_millis(250));
                    }
                }
            }
        })
        .map_err(|e| RunError::Storage(format!("cannot start the listening thread: {e}")))
}

/// A thread that extends this worker's leases every third of a lease.
fn heartbeats(url: &str, owner: &str, lease: Duration, stop: Arc<AtomicBool>) -> Result<std::thread::JoinHandle<()>, RunError> {
    let mut conn = PgConn::connect(url)?;
    let (owner, url) = (owner.to_string(), url.to_string());
    std::thread::Builder::new()
        .name("flow-worker-heartbeat".into())
        .spawn(move || {
            let every = lease / 3;
            let mut last = Instant::now();
            loop {
                std::thread::sleep(Duration::from_millis(50).min(every));
                // Checked right before each heartbeat: none follows a stop.
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                if last.elapsed() < every {
                    continue;
                }
                last = Instant::now();
                if let Err(e) = queue::heartbeat(&conn, &owner, lease) {
                    tracing::warn!("heartbeat: {e}; connecting again");
                    if let Ok(again) = PgConn::connect(&url) {
                        conn = again;
                    }
                }
            }
        })
        .map_err(|e| RunError::Storage(format!("cannot start the heartbeat thread: {e}")))
}
