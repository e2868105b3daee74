//! `flow_bench_pg`: the Flow side of `bench/pg_vs_langgraph.sh` — runs kept
//! in PostgreSQL. A benchmark: it prints numbers and asserts nothing about
//! time; it does check that every run ends in `success`.
//!
//! 1. Per-node cost with one worker: the `chain` (N no-op nodes) and
//!    `fanout` (W branches, joined) workloads of `flow_bench_run`, each run
//!    submitted, claimed and driven in this process over the Postgres
//!    journal (fenced at its epoch, as a worker drives it). Only the drive
//!    is timed.
//! 2. Throughput: `--runs` small runs (a chain of `--small` nodes) drained
//!    by 1, 2, 4 and 8 `flow worker --exit-when-idle` processes (each
//!    `--concurrency` runs at once): runs/s, events/s, and the workers' own
//!    claim latency (p50, p99).
//!
//! Output: one JSON line per measurement on stdout, readable lines on
//! stderr.
//!
//! Usage: `flow_bench_pg --db URL [--chain N] [--fanout W] [--reps R] [--budget-s S]
//!        [--runs N] [--small K] [--workers 1,2,4,8] [--concurrency C] [--flow PATH]`

// A benchmark reads the clock, the environment and starts processes.
#![allow(clippy::disallowed_methods)]

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use flow_check::plan::Plan;
use flow_runtime::clock::{Clock, SystemClock};
use flow_runtime::db::{self, queue, PgConn};
use flow_runtime::driver::{self, Options, ResumeMode, RunMeta};
use flow_runtime::engine::RunStatus;
use flow_runtime::journal::JournalError;
use flow_tests::bench::median;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn die(message: impl std::fmt::Display) -> ! {
    eprintln!("flow_bench_pg: {message}");
    std::process::exit(1);
}

struct Args {
    db: String,
    chain: usize,
    fanout: usize,
    reps: usize,
    budget_s: f64,
    runs: usize,
    small: usize,
    workers: Vec<usize>,
    concurrency: usize,
    flow: PathBuf,
}

fn parse_args() -> Args {
    let exe_dir = std::env::current_exe().ok().and_then(|p| p.parent().map(Path::to_path_buf)).unwrap_or_default();
    let mut args = Args {
        db: String::new(),
        chain: 1000,
        fanout: 100,
        reps: 5,
        budget_s: 5.0,
        runs: 200,
        small: 5,
        workers: vec![1, 2, 4, 8],
        concurrency: 4,
        flow: exe_dir.join("flow"),
    };
    let mut it = std::env::args().skip(1);
    let number = |v: Option<String>| -> usize { v.and_then(|v| v.parse().ok()).unwrap_or_else(|| die("a number is expected")) };
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--db" => args.db = it.next().unwrap_or_else(|| die("--db URL")),
            "--chain" => args.chain = number(it.next()),
            "--fanout" => args.fanout = number(it.next()),
            "--reps" => args.reps = number(it.next()).max(1),
            "--budget-s" => args.budget_s = it.next().and_then(|v| v.parse().ok()).unwrap_or_else(|| die("--budget-s S")),
            "--runs" => args.runs = number(it.next()),
            "--small" => args.small = number(it.next()).max(1),
            "--concurrency" => args.concurrency = number(it.next()).max(1),
            "--flow" => args.flow = PathBuf::from(it.next().unwrap_or_else(|| die("--flow PATH"))),
            "--workers" => {
                let list = it.next().unwrap_or_else(|| die("--workers 1,2,4"));
                args.workers = list.split(',').filter(|w| !w.is_empty()).map(|w| number(Some(w.to_string()))).collect();
            }
            other => die(format!("unknown argument `{other}`")),
        }
    }
    if args.db.is_empty() {
        die("--db URL is required (bench/pg_vs_langgraph.sh starts a server)");
    }
    args
}

fn sql(conn: &PgConn, text: &str) {
    let text = text.to_string();
    conn.call(move |c| c.batch_execute(&text).map_err(|e| JournalError::Storage(format!("{e:?}")))).unwrap_or_else(|e| die(e));
}

/// Records a run of `plan` (queued) as `run_id`.
fn submit(conn: &PgConn, plan: &Plan, plan_json: &str, run_id: &str, base: &Path) {
    let workflow = plan.program.workflows.keys().next().cloned();
    let meta = RunMeta {
        run_id: run_id.to_string(),
        workflow: workflow.clone(),
        base_dir: base.to_path_buf(),
        input: Value::Null,
        started_ms: SystemClock.now_ms(),
        executions: 0,
        replay: None,
        paths_from_run_dir: false,
    };
    let meta = serde_json::to_string(&meta).unwrap_or_else(|e| die(e));
    queue::submit(conn, run_id, workflow.as_deref(), plan_json, &meta).unwrap_or_else(|e| die(e));
}

/// Part 1: one run submitted, claimed and driven here; the drive's time.
fn drive_once(rt: &tokio::runtime::Runtime, conn: &PgConn, plan: &Plan, plan_json: &str, run_id: &str, base: &Path) -> (f64, u64, u64) {
    submit(conn, plan, plan_json, run_id, base);
    let claim = queue::claim_run(conn, run_id, "flow_bench_pg", Duration::from_secs(600)).unwrap_or_else(|e| die(e));
    let (journal, artifacts) = db::fenced_storage(conn.clone(), run_id, claim.epoch);
    let opts = Options::new(PathBuf::from(format!("db:{run_id}")), Arc::new(SystemClock));
    let start = Instant::now();
    let outcome = rt
        .block_on(driver::drive_stored(Box::new(journal), Box::new(artifacts), run_id, opts, ResumeMode::Continue))
        .unwrap_or_else(|e| die(format!("the run failed to proceed: {e}")));
    let elapsed = start.elapsed().as_secs_f64();
    match &outcome.status {
        RunStatus::Terminated { status, .. } if status == "success" => {}
        other => die(format!("the run did not succeed: {other:?}")),
    }
    let done = queue::Release::Finished { outcome: "success".into(), exit_code: 0 };
    queue::release(conn, run_id, claim.epoch, done).unwrap_or_else(|e| die(e));
    (elapsed, outcome.events, outcome.commits)
}

fn per_node(args: &Args, conn: &PgConn, base: &Path) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap_or_else(|e| die(e));
    let mut workloads = Vec::new();
    if args.chain > 0 {
        let plan = flow_tests::bench::compile("chain.flow", flow_tests::generate::chain_source(args.chain, ""), "flow_bench_pg");
        workloads.push(("chain", args.chain, plan.unwrap_or_else(|e| die(e))));
    }
    if args.fanout > 0 {
        let plan = flow_tests::bench::compile("fanout.flow", flow_tests::bench::fanout_source(args.fanout), "flow_bench_pg");
        workloads.push(("fanout", args.fanout + 2, plan.unwrap_or_else(|e| die(e))));
    }
    for (workload, nodes, plan) in &workloads {
        let plan_json = serde_json::to_string(plan).unwrap_or_else(|e| die(e));
        let (warm, mut events, mut commits) = drive_once(&rt, conn, plan, &plan_json, &format!("{workload}-warm"), base);
        let mut times = if warm > 1.0 { vec![warm] } else { Vec::new() };
        let mut rep = 0;
        while times.len() < args.reps && (times.is_empty() || times.iter().sum::<f64>() < args.budget_s) {
            rep += 1;
            let (secs, n, c) = drive_once(&rt, conn, plan, &plan_json, &format!("{workload}-{rep}"), base);
            times.push(secs);
            (events, commits) = (n, c);
        }
        let reps = times.len();
        let min = times.iter().copied().fold(f64::INFINITY, f64::min);
        let med = median(times);
        let us_per_node = med * 1e6 / *nodes as f64;
        let line = json!({
            "tool": "flow", "workload": workload, "nodes": nodes, "mode": "postgres", "reps": reps,
            "ms": med * 1e3, "ms_min": min * 1e3, "us_per_node": us_per_node, "events": events, "commits": commits,
        });
        println!("{line}");
        eprintln!(
            "flow  {workload:<7} {nodes:>6} nodes  postgres     median {:>9.3} ms  min {:>9.3} ms  {us_per_node:>8.2} µs/node  ({events} events, {commits} commits, {reps} reps)",
            med * 1e3,
            min * 1e3
        );
    }
}

/// `p50 X ms p99 Y ms` from a worker's summary line.
fn latencies(summary: &str) -> Option<(f64, f64)> {
    let after = |key: &str| -> Option<f64> { summary.split(key).nth(1)?.split_whitespace().next()?.parse().ok() };
    Some((after("p50 ")?, after("p99 ")?))
}

fn throughput(args: &Args, conn: &PgConn, base: &Path) {
    let plan = flow_tests::bench::compile("small.flow", flow_tests::generate::chain_source(args.small, ""), "flow_bench_pg")
        .unwrap_or_else(|e| die(e));
    let plan_json = serde_json::to_string(&plan).unwrap_or_else(|e| die(e));
    for &workers in &args.workers {
        sql(conn, "TRUNCATE flow_runs, flow_events, flow_meta, flow_proposals");
        for i in 0..args.runs {
            submit(conn, &plan, &plan_json, &format!("small-{workers}-{i}"), base);
        }
        let start = Instant::now();
        let children: Vec<std::process::Child> = (0..workers)
            .map(|w| {
                std::process::Command::new(&args.flow)
                    .args(["worker", "--db", &args.db, "--exit-when-idle", "-q", "--poll-ms", "50"])
                    .args(["--concurrency", &args.concurrency.to_string(), "--name", &format!("bench-{w}")])
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap_or_else(|e| die(format!("cannot start {}: {e}", args.flow.display())))
            })
            .collect();
        let mut p50s = Vec::new();
        let mut p99 = 0.0f64;
        for child in children {
            let out = child.wait_with_output().unwrap_or_else(|e| die(e));
            let text = String::from_utf8_lossy(&out.stderr).to_string();
            if !out.status.success() {
                die(format!("a worker failed: {text}"));
            }
            if let Some((a, b)) = text.lines().rev().find_map(latencies) {
                p50s.push(a);
                p99 = p99.max(b);
            }
        }
        let secs = start.elapsed().as_secs_f64();
        let (finished, events) = conn
            .call(|c| {
                let row = c
                    .query_one("SELECT count(*) FILTER (WHERE outcome = 'success'), COALESCE(sum(last_seq), 0)::bigint FROM flow_runs", &[])
                    .map_err(|e| JournalError::Storage(format!("{e:?}")))?;
                Ok((row.get::<_, i64>(0), row.get::<_, i64>(1)))
            })
            .unwrap_or_else(|e| die(e));
        if finished as usize != args.runs {
            die(format!("{finished} of {} runs succeeded", args.runs));
        }
        let p50 = median(p50s);
        let line = json!({
            "tool": "flow", "metric": "throughput", "workers": workers, "concurrency": args.concurrency,
            "runs": args.runs, "nodes_per_run": args.small, "secs": secs, "runs_per_s": args.runs as f64 / secs,
            "events_per_s": events as f64 / secs, "claim_p50_ms": p50, "claim_p99_ms": p99,
        });
        println!("{line}");
        eprintln!(
            "flow  {workers} worker(s) × {}: {} runs in {secs:.2} s — {:.1} runs/s, {:.0} events/s, claim p50 {p50:.2} ms p99 {p99:.2} ms",
            args.concurrency,
            args.runs,
            args.runs as f64 / secs,
            events as f64 / secs
        );
    }
}

fn main() {
    let args = parse_args();
    let conn = PgConn::connect(&args.db).unwrap_or_else(|e| die(e));
    db::migrate(&conn).unwrap_or_else(|e| die(e));
    sql(&conn, "TRUNCATE flow_runs, flow_events, flow_meta, flow_proposals, flow_artifacts");
    let scratch = tempfile::tempdir().unwrap_or_else(|e| die(e));
    per_node(&args, &conn, scratch.path());
    if args.runs > 0 && !args.workers.is_empty() {
        throughput(&args, &conn, scratch.path());
    }
}
