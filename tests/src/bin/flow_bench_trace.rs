//! `flow_bench_trace`: how fast traces are held against plans (a benchmark:
//! it prints figures and asserts nothing about time).
//!
//! * `flow_bench_trace source N` prints a chain of N no-op tool nodes with
//!   four policies that the model checker proves (two `never … before`, an
//!   implication with `eventually`, and `within`; `flow run` refuses a flow
//!   whose policy is refuted); `flow run` of it writes a real trace of
//!   about 12 events per node.
//! * `flow_bench_trace source-loop ROUNDS` prints a loop of four no-op tool
//!   nodes with four policies, run ROUNDS times (36 events a round): a small
//!   plan with a long trace, for timing the whole `flow trace check` command.
//! * `flow_bench_trace check TRACE.jsonl PLAN.flow [REPS]` times, on that
//!   trace: what `flow trace check` does after compiling the plan (read,
//!   parse and check, streamed: `tracecheck::check_reader`); apart, reading
//!   and parsing the whole JSONL, and every check over the parsed events;
//!   and the policy
//!   monitors alone over the parsed events (`flow-policy`: observe each event,
//!   one cached automaton step per policy), on one core. Prints events per
//!   second for each, and the targets (monitoring ≥ 10 million events/s;
//!   `flow trace check` of a million events in under a second; Agentproof
//!   reports about 247,000 events/s for its runtime monitors).
// A benchmark reads files and the clock: the pure-core lints do not apply.
#![allow(clippy::disallowed_methods)]

use flow_policy::{Automaton, Monitor, MonitorSet};

// The allocator of the `flow` binary, so the figures are those of `flow trace check`.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
use std::time::Instant;

fn source(n: usize) -> String {
    let policies = format!("  policy no_early_end: never terminated(ok) before completed(n{n})\n")
        + "  policy first_settles: started(n1) => eventually (completed(n1) or failed(n1))\n"
        + "  policy in_order: never started(n2) before completed(n1)\n"
        + "  policy prompt: completed(n1) => within 3 steps started(n2)\n";
    flow_tests::generate::chain_source(n, &policies)
}

/// A loop of four no-op tool nodes run `rounds` times, with four policies:
/// a small plan whose trace is long (36 events a round).
fn loop_source(rounds: usize) -> String {
    format!(
        "{}\nworkflow spin {{\n  start: l\n  node a: tool noop\n  node b: tool noop\n  node c: tool noop\n  node d: tool noop\n  \
         node l: loop [a, b, c, d] {{ max_rounds: {rounds} }}\n  a -> b\n  b -> c\n  c -> d\n  l -> done\n  node done: end completed\n  \
         policy in_order: never started(b) before completed(a)\n  \
         policy first_settles: started(a) => eventually (completed(a) or failed(a))\n  \
         policy prompt: completed(a) => within 3 steps started(b)\n  \
         policy no_early_end: never terminated(completed) before completed(d)\n}}\n",
        flow_tests::generate::NOOP_TOOL
    )
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    xs[xs.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("source") => {
            let n = args.get(2).and_then(|v| v.parse().ok()).unwrap_or(1000);
            print!("{}", source(n));
        }
        Some("source-loop") => {
            let rounds = args.get(2).and_then(|v| v.parse().ok()).unwrap_or(100);
            print!("{}", loop_source(rounds));
        }
        Some("check") => {
            let (Some(trace), Some(plan)) = (args.get(2), args.get(3)) else {
                eprintln!("usage: flow_bench_trace check TRACE.jsonl PLAN.flow [REPS]");
                std::process::exit(2);
            };
            let reps: usize = args.get(4).and_then(|v| v.parse().ok()).unwrap_or(5);
            let text = std::fs::read_to_string(plan).expect("plan source");
            let mut db = flow_diagnostics::SourceDb::new();
            let root = db.add(plan.as_str(), text);
            let checked = flow_check::check_program(&mut db, root, &flow_tests::RepoLoader);
            assert!(!checked.has_errors(), "the plan checks");
            let program = checked.program;

            // What `flow trace check` does: read, parse and check, streamed.
            let mut streamed_s = Vec::new();
            for _ in 0..reps {
                let start = Instant::now();
                let file = std::fs::File::open(trace).expect("trace");
                let report =
                    flow_runtime::tracecheck::check_reader(&program, file, &flow_runtime::tracecheck::Options::default()).expect("read");
                streamed_s.push(start.elapsed().as_secs_f64());
                assert!(report.conformant, "the benchmark's trace conforms");
            }
            let mut parse_s = Vec::new();
            let mut check_s = Vec::new();
            let mut events = Vec::new();
            let mut conformant = false;
            for _ in 0..reps {
                let start = Instant::now();
                let jsonl = std::fs::read_to_string(trace).expect("trace");
                let parsed = flow_runtime::tracecheck::parse(&jsonl);
                parse_s.push(start.elapsed().as_secs_f64());
                let start = Instant::now();
                let report = flow_runtime::tracecheck::check(&program, &parsed.events, &flow_runtime::tracecheck::Options::default());
                check_s.push(start.elapsed().as_secs_f64());
                conformant = report.conformant;
                events = parsed.events;
            }
            let n = events.len() as f64;

            // Monitors alone: every policy of the plan over the parsed events.
            let policies: Vec<&flow_check::ir::Policy> =
                program.policies.iter().chain(program.workflows.values().flat_map(|w| w.policies.iter())).collect();
            let automata: Vec<Automaton> = policies.iter().map(|p| Automaton::new(&p.formula).expect("policy compiles")).collect();
            let mut monitor_s = Vec::new();
            let mut verdicts = Vec::new();
            for _ in 0..reps.max(5) {
                let mut set = MonitorSet::new(automata.iter().cloned().map(Monitor::new).collect());
                let mut violated = Vec::new();
                let start = Instant::now();
                for e in &events {
                    set.feed(e.seq, &e.body, &mut violated);
                }
                monitor_s.push(start.elapsed().as_secs_f64());
                verdicts = set.verdicts();
            }
            let held = verdicts.iter().filter(|v| **v == flow_policy::Verdict::Holds).count();
            let (p, c, m, t) = (median(parse_s), median(check_s), median(monitor_s), median(streamed_s));
            println!("trace: {} events, {} policies ({held} hold), conformant: {conformant}", events.len(), policies.len());
            println!(
                "flow trace check (read, parse, all checks; streamed): {:>8.3} s  {:>12.0} events/s  (target: < 1 s for 1,000,000 events: {:.3} s scaled)",
                t,
                n / t,
                t * 1e6 / n
            );
            println!("  apart: read + parse JSONL whole (2 threads):     {:>8.3} s  {:>12.0} events/s", p, n / p);
            println!("  apart: all checks over parsed events (1 thread): {:>8.3} s  {:>12.0} events/s", c, n / c);
            println!(
                "policy monitors alone:         {:>8.3} s  {:>12.0} events/s ({:.0} policy steps/s; target ≥ 10,000,000 events/s)",
                m,
                n / m,
                n * policies.len() as f64 / m
            );
            println!("ratio to Agentproof's reported runtime monitors (247,000 events/s): {:.0}x", n / m / 247_000.0);
        }
        _ => {
            eprintln!("usage: flow_bench_trace source N | source-loop ROUNDS | check TRACE.jsonl PLAN.flow [REPS]");
            std::process::exit(2);
        }
    }
}
