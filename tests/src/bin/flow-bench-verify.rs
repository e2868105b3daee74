//! `flow-bench-verify FILE [RUNS]`: times parse + check + all static
//! verification of FILE in-process (no process start-up, no file reading
//! in the timed part) and prints one JSON line: the median and minimum of
//! RUNS runs (default 5), in milliseconds.

// A benchmark reads its input and the clock: the pure-core lints do not apply.
#![allow(clippy::disallowed_methods)]

use std::time::Instant;

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
    let mut times = Vec::with_capacity(runs);
    let mut findings = 0;
    let mut nodes = 0;
    for _ in 0..runs {
        let start = Instant::now();
        let mut db = flow_diagnostics::SourceDb::new();
        let root = db.add(path.clone(), text.clone());
        let checked = flow_check::check_program(&mut db, root, &flow_check::NoFiles);
        if std::env::var_os("FLOW_BENCH_SPLIT").is_some() {
            eprintln!("check: {:.1} ms", start.elapsed().as_secs_f64() * 1e3);
        }
        let verified = if checked.has_errors() { Vec::new() } else { flow_verify::verify(&checked.program) };
        times.push(start.elapsed().as_secs_f64() * 1e3);
        findings = checked.diagnostics.len() + verified.len();
        nodes = checked.program.workflows.values().map(|w| w.nodes.len()).sum();
    }
    times.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    println!(
        "{{\"tool\":\"flowc\",\"nodes\":{nodes},\"ms\":{:.3},\"ms_min\":{:.3},\"runs\":{runs},\"findings\":{findings}}}",
        times[times.len() / 2],
        times[0]
    );
}
