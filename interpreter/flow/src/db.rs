//! The commands on runs shared through PostgreSQL (`--db URL`, or
//! `FLOW_DB`): `flow db migrate`, `flow submit`, `flow worker`, `flow
//! runs`, `flow approve|resume --db`, and every command that reads a run
//! (`status`, `show`, `report`, `replay`, `trace check`, `export`), which
//! read the run exported from the database into a scratch run directory.

use crate::{fail, prepare, Decision, Format, Prepared, Sources};
use flow_runtime::clock::{Clock, FakeClock, SystemClock};
use flow_runtime::db::{self, queue, worker, PgConn, PgJournal};
use flow_runtime::driver::{self, exit, Options, RunError, RunMeta};
use flow_runtime::exec::{Executors, ReplayMode};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The database URL: `--db`, else `FLOW_DB`.
pub fn url(db: Option<String>) -> Result<String, RunError> {
    db.filter(|u| !u.is_empty())
        .ok_or_else(|| RunError::Usage("no database: pass --db URL (e.g. postgres://flow@127.0.0.1:5432/flow) or set FLOW_DB".into()))
}

fn connect(url: &str) -> Result<PgConn, RunError> {
    Ok(PgConn::connect(url)?)
}

/// `flow db migrate`.
pub fn migrate(url: &str) -> u8 {
    let applied = connect(url).and_then(|conn| Ok(db::migrate(&conn)?));
    match applied {
        Ok(applied) if applied.is_empty() => {
            eprintln!("flow: {} is up to date (schema version {})", db::redact_url(url), latest());
            exit::SUCCESS
        }
        Ok(applied) => {
            for (version, name) in applied {
                eprintln!("flow: applied migration {version}: {name}");
            }
            exit::SUCCESS
        }
        Err(e) => fail(e),
    }
}

fn latest() -> i32 {
    db::MIGRATIONS.last().map(|(v, _, _)| *v).unwrap_or(0)
}

/// `flow submit`: the run recorded, queued for a worker; its id is the
/// last line of the standard output.
pub fn submit(url: &str, file: &Path, run_id: Option<String>, workflow: Option<String>, sources: &Sources, quiet: bool) -> u8 {
    if let Some(id) = run_id.as_deref().filter(|id| !driver::valid_run_id(id)) {
        return fail(RunError::Usage(format!("`{id}` is not a run id: letters, digits, `.`, `_` and `-` only, not starting with `.`")));
    }
    let Prepared { plan, base, input, input_path, replay } = match prepare(file, sources) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let result = (|| -> Result<String, RunError> {
        let name = match workflow {
            Some(name) if plan.program.workflows.contains_key(&name) => name,
            Some(name) => return Err(RunError::Usage(format!("no workflow named `{name}` in the plan"))),
            None => plan.program.workflows.keys().next().cloned().ok_or_else(|| RunError::Usage("the plan declares no workflow".into()))?,
        };
        // Paths as absolute as the submitter sees them: a worker on this
        // machine finds the flow's files wherever it was started.
        let absolute = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        let base = absolute(&base);
        // An API key in the input is taken out before it is recorded.
        let exec = Executors::new(plan.program.clone(), base.clone()).with_secrets(driver::secrets_of(&plan.program)?);
        let (input, redacted) = exec.redact_input(input);
        if redacted {
            eprintln!("flow: warning: the run's input held an API key: it was redacted before it was recorded");
        }
        let run_id = run_id.unwrap_or_else(crate::fresh_run_id);
        let meta = RunMeta {
            run_id: run_id.clone(),
            workflow: Some(name.clone()),
            base_dir: base,
            input,
            started_ms: SystemClock.now_ms(),
            executions: 0,
            replay: replay.map(|(path, mode)| (absolute(&path), mode == ReplayMode::Strict)),
            paths_from_run_dir: false,
        };
        let plan_json = serde_json::to_string(&plan).map_err(|e| RunError::Storage(e.to_string()))?;
        let meta_json = serde_json::to_string(&meta).map_err(|e| RunError::Storage(e.to_string()))?;
        let conn = connect(url)?;
        queue::submit(&conn, &run_id, Some(&name), &plan_json, &meta_json)?;
        Ok(run_id)
    })();
    match result {
        Ok(run_id) => {
            if !quiet {
                eprintln!("flow: submitted {run_id} ({}) to {}", file.display(), db::redact_url(url));
                if let Some(path) = &input_path {
                    eprintln!("flow: input {}", path.display());
                }
            }
            println!("{run_id}");
            exit::SUCCESS
        }
        Err(e) => fail(e),
    }
}

/// How `flow worker` works (its flags).
#[derive(Debug)]
pub struct WorkerFlags {
    pub concurrency: usize,
    pub exit_when_idle: bool,
    pub lease_ms: u64,
    pub poll_ms: u64,
    pub fake_clock: bool,
    pub name: Option<String>,
    pub quiet: bool,
}

fn worker_config(url: &str, flags: &WorkerFlags) -> worker::WorkerConfig {
    let fake = flags.fake_clock;
    let owner = flags.name.clone().unwrap_or_else(|| format!("{}-{}", host(), std::process::id()));
    worker::WorkerConfig {
        url: url.to_string(),
        concurrency: flags.concurrency,
        exit_when_idle: flags.exit_when_idle,
        lease: Duration::from_millis(flags.lease_ms.max(300)),
        poll: Duration::from_millis(flags.poll_ms.max(10)),
        owner,
        options: Arc::new(move |claim: &queue::Claim| {
            let clock: Arc<dyn Clock> = if fake { Arc::new(FakeClock::new(FakeClock::DEFAULT_START)) } else { Arc::new(SystemClock) };
            // No run directory: the journal is in the database.
            Options::new(PathBuf::from(format!("db:{}", claim.run_id)), clock)
        }),
        log: !flags.quiet,
    }
}

fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".into())
}

/// `flow worker`.
pub async fn work(url: &str, flags: WorkerFlags) -> u8 {
    let cfg = worker_config(url, &flags);
    if !flags.quiet {
        eprintln!("flow worker {}: {} at a time from {}", cfg.owner, cfg.concurrency, db::redact_url(url));
    }
    match worker::work(cfg).await {
        Ok(report) => {
            let ms = |d: Option<Duration>| d.map(|d| format!("{:.1} ms", d.as_secs_f64() * 1000.0)).unwrap_or_else(|| "-".into());
            eprintln!(
                "flow worker: claimed {} ({} taken over), finished {}, paused {}, requeued {}, errors {}, lost {}; {} events; claim latency p50 {} p99 {}",
                report.claimed,
                report.taken_over,
                report.finished,
                report.paused,
                report.requeued,
                report.errors,
                report.fenced,
                report.events,
                ms(report.claim_quantile(0.5)),
                ms(report.claim_quantile(0.99)),
            );
            exit::SUCCESS
        }
        Err(e) => fail(e),
    }
}

/// `flow resume RUN --db`: drives the run in this process under a lease.
pub async fn resume(url: &str, run: &str, fake_clock: bool, quiet: bool) -> u8 {
    let flags = WorkerFlags { concurrency: 1, exit_when_idle: true, lease_ms: 30_000, poll_ms: 1000, fake_clock, name: None, quiet };
    let cfg = worker_config(url, &flags);
    match worker::drive_one(&cfg, run).await {
        Ok(outcome) => {
            if !quiet {
                eprintln!("flow: {} — {}", outcome.run_id, crate::describe(&outcome.status));
            }
            outcome.exit_code()
        }
        Err(e) => fail(e),
    }
}

/// `flow approve RUN SUBJECT --db`: the decision recorded and the run
/// queued for whichever worker claims it.
pub fn approve(url: &str, run: &str, asked: Decision<'_>) -> u8 {
    let subject = asked.subject.to_string();
    let result = (|| -> Result<String, RunError> {
        let conn = connect(url)?;
        let journal = PgJournal::new(conn.clone());
        let resume = format!("flow resume {run} --db URL");
        let proposal = crate::decision_for(&journal, run, &resume, asked)?;
        let json = serde_json::to_string(&proposal).map_err(|e| RunError::Storage(e.to_string()))?;
        queue::record_decision(&conn, run, &proposal.key, &json)?;
        let flow_runtime::proto::Response::Human(answer) = &proposal.response else { unreachable!("a decision is a human answer") };
        Ok(format!("flow: recorded `{}` on `{subject}` by {}; run {run} is queued for a worker", answer.decision, answer.by))
    })();
    match result {
        Ok(message) => {
            eprintln!("{message}");
            exit::SUCCESS
        }
        Err(e) => fail(e),
    }
}

/// `flow runs`.
pub fn runs(url: &str, status: Option<&str>, workflow: Option<&str>, limit: i64, format: Format) -> u8 {
    let rows = match connect(url).and_then(|conn| Ok(queue::list(&conn, status, workflow, limit)?)) {
        Ok(rows) => rows,
        Err(e) => return fail(e),
    };
    match format {
        Format::Json => {
            let runs: Vec<serde_json::Value> = rows
                .iter()
                .map(|r| {
                    serde_json::json!({
                        "run_id": r.run_id, "workflow": r.workflow, "status": r.status, "outcome": r.outcome,
                        "exit_code": r.exit_code, "error": r.error,
                        "submitted_at": flow_runtime::clock::rfc3339(r.submitted_ms.max(0) as u64),
                        "updated_at": flow_runtime::clock::rfc3339(r.updated_ms.max(0) as u64),
                        "lease_owner": r.lease_owner, "epoch": r.epoch, "events": r.last_seq,
                    })
                })
                .collect();
            println!("{}", serde_json::to_string_pretty(&serde_json::json!({ "version": 1, "runs": runs })).unwrap_or_default());
        }
        Format::Human => {
            if rows.is_empty() {
                eprintln!("flow: no runs");
            }
            for r in &rows {
                let state = match (&r.status[..], &r.outcome, &r.error) {
                    ("finished", Some(outcome), _) => format!("finished: {outcome}"),
                    ("error", _, Some(error)) => format!("error: {error}"),
                    ("running", _, _) => format!("running on {}", r.lease_owner.as_deref().unwrap_or("?")),
                    (status, _, _) => status.to_string(),
                };
                let workflow = r.workflow.as_deref().unwrap_or("-");
                println!("{}  {workflow:<20} {:>6} events  {state}", r.run_id, r.last_seq);
            }
        }
    }
    exit::SUCCESS
}

/// The run exported into a scratch directory, for the commands that read
/// run directories.
pub fn scratch(url: &str, run: &str) -> Result<tempfile::TempDir, RunError> {
    let conn = connect(url)?;
    let dir = tempfile::Builder::new()
        .prefix("flow-run-")
        .tempdir()
        .map_err(|e| RunError::Storage(format!("cannot make a scratch directory: {e}")))?;
    db::export::export(&conn, run, &dir.path().join(run))?;
    Ok(dir)
}

/// `flow export RUN --db URL --out DIR`: the run as a run directory.
pub fn export_dir(url: &str, run: &str, out: &Path) -> u8 {
    match connect(url).and_then(|conn| Ok(db::export::export(&conn, run, out)?)) {
        Ok(done) => {
            eprintln!(
                "flow: exported {run} to {} ({} events, {} proposals, {} artifacts)",
                out.display(),
                done.events,
                done.proposals,
                done.artifacts
            );
            exit::SUCCESS
        }
        Err(e) => fail(e),
    }
}
