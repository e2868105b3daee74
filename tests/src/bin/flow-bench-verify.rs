//! `flow-bench-verify FILE [RUNS]`: times the compiler on FILE in-process
//! (no process start-up, no file reading in the timed part) and prints one
//! JSON line with medians of RUNS runs (default 5), in milliseconds:
//!
//! * `check_ms`: parse, resolve and type check (`check_program`);
//! * `verify_ms`: every static check on the checked IR (`flow_verify::verify`);
//! * `structural_ms`: the structural checks alone (reachability, dead ends,
//!   livelocks, routing, risky tools behind approval) — the subset other
//!   tools (agentproofx) also run;
//! * `ms`: check and verify together, what `flowc verify` does.

// A benchmark reads its input and the clock: the pure-core lints do not apply.
#![allow(clippy::disallowed_methods)]

// The allocator of `flowc`, so the figures are those of `flowc verify`.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::time::Instant;

fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    times[times.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        eprintln!("usage: flow-bench-verify FILE [RUNS]");
        std::process::exit(2);
    };
    let runs: usize = args.get(1).and_then(|r| r.parse().ok()).unwrap_or(5).max(1);
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| {
        eprintln!("flow-bench-verify: cannot read {path}: {e}");
        std::process::exit(2);
    });
    // Profiling aid: FLOW_BENCH_ONLY=structural|verify repeats one phase.
    if std::env::var_os("FLOW_BENCH_ONLY").is_some_and(|p| p == "check") {
        for _ in 0..runs {
            let mut db = flow_diagnostics::SourceDb::new();
            let root = db.add(path.clone(), text.clone());
            std::hint::black_box(flow_check::check_program(&mut db, root, &flow_check::NoFiles));
        }
        return;
    }
    if let Some(phase) = std::env::var_os("FLOW_BENCH_ONLY") {
        let mut db = flow_diagnostics::SourceDb::new();
        let root = db.add(path.clone(), text.clone());
        let checked = flow_check::check_program(&mut db, root, &flow_check::NoFiles);
        for _ in 0..runs {
            let found = if phase == "structural" {
                flow_verify::verify_structural(&checked.program)
            } else {
                flow_verify::verify(&checked.program)
            };
            std::hint::black_box(found);
        }
        return;
    }
    let (mut check, mut verify, mut structural, mut total) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut findings = 0;
    let mut nodes = 0;
    for _ in 0..runs {
        let start = Instant::now();
        let mut db = flow_diagnostics::SourceDb::new();
        let root = db.add(path.clone(), text.clone());
        let checked = flow_check::check_program(&mut db, root, &flow_check::NoFiles);
        let checked_at = start.elapsed();
        let verified = if checked.has_errors() { Vec::new() } else { flow_verify::verify(&checked.program) };
        let done = start.elapsed();
        let structural_start = Instant::now();
        let structural_findings = flow_verify::verify_structural(&checked.program);
        structural.push(structural_start.elapsed().as_secs_f64() * 1e3);
        check.push(checked_at.as_secs_f64() * 1e3);
        verify.push((done - checked_at).as_secs_f64() * 1e3);
        total.push(done.as_secs_f64() * 1e3);
        findings = checked.diagnostics.len() + verified.len() + structural_findings.len();
        nodes = checked.program.workflows.values().map(|w| w.nodes.len()).sum();
    }
    println!(
        "{{\"tool\":\"flowc\",\"nodes\":{nodes},\"ms\":{:.3},\"check_ms\":{:.3},\"verify_ms\":{:.3},\"structural_ms\":{:.3},\"runs\":{runs},\"findings\":{findings}}}",
        median(total),
        median(check),
        median(verify),
        median(structural)
    );
}
