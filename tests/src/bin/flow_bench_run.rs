//! `flow_bench_run`: times the Flow runtime on generated workflows of no-op
//! nodes, the Flow side of `bench/run_vs_langgraph.sh`. A benchmark: it
//! prints numbers and asserts nothing about time. It does check that every
//! run terminates with status `success` (a wrong run would time nothing).
//!
//! Workloads (each a generated `.flow` source, checked and verified in
//! process, then run by `flow_runtime::driver::run` from its plan):
//!
//! * `chain`: N builtin `noop` tool nodes in a line, then an `end` node;
//! * `fanout`: a `parallel` node starting W `noop` branches, a `join` over
//!   them, then an `end` node. Its node count is W + 2 (split and join).
//!
//! Modes: `memory` (journal and artifacts in memory, no trace), `sqlite`
//! (the SQLite journal in a fresh directory, `synchronous=NORMAL`, plus
//! `trace.jsonl`: crash-safe) and `sqlite-full` (`synchronous=FULL`:
//! survives power loss). Only `driver::run` is timed: compiling the source
//! and creating or deleting the run directory are not.
//!
//! Output: one JSON line per measurement on stdout, e.g.
//! `{"tool":"flow","workload":"chain","nodes":1000,"mode":"memory","us_per_node":2.1,...}`,
//! and readable lines on stderr. `us_per_node` is the median wall time of
//! the repetitions divided by the node count (the `end` node not counted).
//!
//! Peak memory: `--peak-nodes N` (default 10000) runs an N-node chain in a
//! child process (`flow_bench_run --peak-mem N`) and reports its peak
//! resident set (`VmHWM`, Linux only), compilation included.
//!
//! Each measurement takes at most `--reps` (memory, default 21) or
//! `--durable-reps` (SQLite, default 5) samples after one warm-up run, and
//! starts no new sample once `--budget-s` seconds (default 5) are spent.
//!
//! Usage: `flow_bench_run [--chain N] [--fanout W] [--reps R] [--durable-reps R] [--budget-s S]
//!        [--modes memory,sqlite,sqlite-full] [--peak-nodes N] [--threads T]`

// A benchmark reads the clock, the environment and /proc: the pure-core lints do not apply.
#![allow(clippy::disallowed_methods)]

// The allocator of the `flow` binary, so the figures are those of `flow run`.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use flow_check::plan::Plan;
use flow_runtime::clock::SystemClock;
use flow_runtime::driver::{self, Options};
use flow_runtime::engine::RunStatus;
use flow_tests::bench::median;
use serde_json::{json, Value};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// Checks and verifies `text` like `flow run` does, and builds its plan.
fn compile(name: &str, text: String) -> Plan {
    flow_tests::bench::compile(name, text, "flow_bench_run").unwrap_or_else(|e| {
        eprintln!("flow_bench_run: {e}");
        std::process::exit(1);
    })
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Memory,
    Sqlite,
    SqliteFull,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Memory => "memory",
            Mode::Sqlite => "sqlite",
            Mode::SqliteFull => "sqlite-full",
        }
    }

    fn parse(s: &str) -> Option<Mode> {
        match s {
            "memory" => Some(Mode::Memory),
            "sqlite" => Some(Mode::Sqlite),
            "sqlite-full" => Some(Mode::SqliteFull),
            _ => None,
        }
    }
}

/// One run of `plan`; returns its wall time in seconds and its event count.
fn run_once(rt: &tokio::runtime::Runtime, plan: &Plan, mode: Mode, scratch: &Path, rep: usize) -> (f64, u64) {
    let run_dir = scratch.join(format!("run-{}-{rep}", mode.name()));
    let mut opts = Options::new(run_dir.clone(), Arc::new(SystemClock));
    opts.in_memory = mode == Mode::Memory;
    opts.write_trace = mode != Mode::Memory;
    opts.durable = mode == Mode::SqliteFull;
    let run_id = format!("bench-{rep}");
    let start = Instant::now();
    let outcome = rt.block_on(driver::run(plan, None, Value::Null, scratch, &run_id, opts));
    let elapsed = start.elapsed().as_secs_f64();
    let outcome = outcome.unwrap_or_else(|e| {
        eprintln!("flow_bench_run: the run failed to proceed: {e}");
        std::process::exit(1);
    });
    match &outcome.status {
        RunStatus::Terminated { status, .. } if status == "success" => {}
        other => {
            eprintln!("flow_bench_run: the run did not succeed: {other:?}");
            std::process::exit(1);
        }
    }
    if mode != Mode::Memory {
        let _ = std::fs::remove_dir_all(&run_dir);
    }
    (elapsed, outcome.events)
}

/// `VmHWM` and `VmRSS` of this process in MiB (Linux), else `None`.
fn rss_mib() -> (Option<f64>, Option<f64>) {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else { return (None, None) };
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map(|kib| kib / 1024.0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

fn runtime(threads: usize) -> tokio::runtime::Runtime {
    let rt = if threads == 0 {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    } else {
        tokio::runtime::Builder::new_multi_thread().worker_threads(threads).enable_all().build()
    };
    rt.unwrap_or_else(|e| {
        eprintln!("flow_bench_run: cannot start tokio: {e}");
        std::process::exit(1);
    })
}

fn scratch_dir() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("flow-bench-run").tempdir().unwrap_or_else(|e| {
        eprintln!("flow_bench_run: cannot create a scratch directory: {e}");
        std::process::exit(1);
    })
}

/// The child process of `--peak-mem N`: one N-node chain, then `VmHWM`.
fn peak_mem(nodes: usize, mode: Mode, threads: usize) {
    let rt = runtime(threads);
    let scratch = scratch_dir();
    let (_, before_compile) = rss_mib();
    let plan = compile("peak.flow", flow_tests::generate::chain_source(nodes, ""));
    let (hwm_compiled, _) = rss_mib();
    let (secs, events) = run_once(&rt, &plan, mode, scratch.path(), 0);
    let (hwm, rss) = rss_mib();
    let line = json!({
        "tool": "flow",
        "workload": "chain",
        "nodes": nodes,
        "mode": mode.name(),
        "metric": "peak_rss",
        "peak_rss_mib": hwm,
        "peak_rss_after_compile_mib": hwm_compiled,
        "rss_at_start_mib": before_compile,
        "rss_at_end_mib": rss,
        "ms": secs * 1e3,
        "us_per_node": secs * 1e6 / nodes as f64,
        "events": events,
    });
    println!("{line}");
}

struct Args {
    chain: usize,
    fanout: usize,
    reps: usize,
    durable_reps: usize,
    modes: Vec<Mode>,
    budget_s: f64,
    peak_nodes: usize,
    peak_mem: Option<usize>,
    peak_mode: Mode,
    threads: usize,
}

fn usage() -> ! {
    eprintln!(
        "usage: flow_bench_run [--chain N] [--fanout W] [--reps R] [--durable-reps R] [--budget-s S]\n\
         \x20                     [--modes memory,sqlite,sqlite-full] [--peak-nodes N] [--threads T]\n\
         \x20      flow_bench_run --peak-mem N [--peak-mode memory|sqlite] [--threads T]"
    );
    std::process::exit(2);
}

fn parse_args() -> Args {
    let mut args = Args {
        chain: 1000,
        fanout: 100,
        reps: 21,
        durable_reps: 5,
        modes: vec![Mode::Memory, Mode::Sqlite, Mode::SqliteFull],
        budget_s: 5.0,
        peak_nodes: 10_000,
        peak_mem: None,
        peak_mode: Mode::Memory,
        threads: 0,
    };
    let mut it = std::env::args().skip(1);
    let number = |v: Option<String>| v.and_then(|v| v.parse::<usize>().ok()).unwrap_or_else(|| usage());
    let mode = |v: Option<String>| v.as_deref().and_then(Mode::parse).unwrap_or_else(|| usage());
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--chain" => args.chain = number(it.next()),
            "--fanout" => args.fanout = number(it.next()),
            "--reps" => args.reps = number(it.next()).max(1),
            "--durable-reps" => args.durable_reps = number(it.next()).max(1),
            "--peak-nodes" => args.peak_nodes = number(it.next()),
            "--peak-mem" => args.peak_mem = Some(number(it.next()).max(1)),
            "--threads" => args.threads = number(it.next()),
            "--budget-s" => args.budget_s = it.next().and_then(|v| v.parse::<f64>().ok()).unwrap_or_else(|| usage()),
            "--peak-mode" => args.peak_mode = mode(it.next()),
            "--modes" => {
                let list = it.next().unwrap_or_else(|| usage());
                args.modes = list.split(',').filter(|m| !m.is_empty()).map(|m| mode(Some(m.to_string()))).collect();
            }
            _ => usage(),
        }
    }
    args
}

fn main() {
    let args = parse_args();
    if let Some(nodes) = args.peak_mem {
        peak_mem(nodes, args.peak_mode, args.threads);
        return;
    }
    let rt = runtime(args.threads);
    let scratch = scratch_dir();
    let runtime_name = if args.threads == 0 { "current_thread".to_string() } else { format!("multi_thread({})", args.threads) };
    eprintln!("flow_bench_run: tokio {runtime_name}, scratch {}", scratch.path().display());
    let mut workloads = Vec::new();
    if args.chain > 0 {
        workloads.push(("chain", args.chain, compile("chain.flow", flow_tests::generate::chain_source(args.chain, ""))));
    }
    if args.fanout > 0 {
        workloads.push(("fanout", args.fanout + 2, compile("fanout.flow", flow_tests::bench::fanout_source(args.fanout))));
    }
    for (workload, nodes, plan) in &workloads {
        for &mode in &args.modes {
            let reps = if mode == Mode::Memory { args.reps } else { args.durable_reps };
            // One warm-up run (page cache, allocator, lazy statics). A warm-up
            // longer than a second is kept as a sample: first-run effects are
            // negligible there, and the time budget matters more.
            let (warm, mut events) = run_once(&rt, plan, mode, scratch.path(), 0);
            let mut times = Vec::with_capacity(reps);
            if warm > 1.0 {
                times.push(warm);
            }
            // At most `reps` samples, and no new one once `--budget-s` is spent.
            let mut rep = 0;
            while times.len() < reps && (times.is_empty() || times.iter().sum::<f64>() < args.budget_s) {
                rep += 1;
                let (secs, n) = run_once(&rt, plan, mode, scratch.path(), rep);
                times.push(secs);
                events = n;
            }
            let reps = times.len();
            let min = times.iter().copied().fold(f64::INFINITY, f64::min);
            let med = median(times);
            let us_per_node = med * 1e6 / *nodes as f64;
            let line = json!({
                "tool": "flow",
                "workload": workload,
                "nodes": nodes,
                "mode": mode.name(),
                "reps": reps,
                "ms": med * 1e3,
                "ms_min": min * 1e3,
                "us_per_node": us_per_node,
                "events": events,
                "runtime": runtime_name,
            });
            println!("{line}");
            eprintln!(
                "flow  {workload:<7} {nodes:>6} nodes  {:<12} median {:>9.3} ms  min {:>9.3} ms  {us_per_node:>8.2} µs/node  ({events} events, {reps} reps)",
                mode.name(),
                med * 1e3,
                min * 1e3
            );
        }
    }
    if args.peak_nodes > 0 {
        let exe = std::env::current_exe().unwrap_or_else(|e| {
            eprintln!("flow_bench_run: cannot find this executable: {e}");
            std::process::exit(1);
        });
        let out = std::process::Command::new(exe)
            .args(["--peak-mem", &args.peak_nodes.to_string(), "--threads", &args.threads.to_string()])
            .stderr(std::process::Stdio::inherit())
            .output()
            .unwrap_or_else(|e| {
                eprintln!("flow_bench_run: cannot start the peak-memory child: {e}");
                std::process::exit(1);
            });
        if !out.status.success() {
            eprintln!("flow_bench_run: the peak-memory child failed ({})", out.status);
            std::process::exit(1);
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text.lines().last().unwrap_or_default();
        print!("{text}");
        let v: Value = serde_json::from_str(line).unwrap_or(Value::Null);
        let mib = |k: &str| v.get(k).and_then(Value::as_f64).map_or("n/a".to_string(), |m| format!("{m:.1} MiB"));
        eprintln!(
            "flow  chain   {:>6} nodes  memory       peak RSS {} (after compiling: {}), run {:.1} ms",
            args.peak_nodes,
            mib("peak_rss_mib"),
            mib("peak_rss_after_compile_mib"),
            v.get("ms").and_then(Value::as_f64).unwrap_or(f64::NAN)
        );
    }
}
