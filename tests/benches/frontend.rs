//! Benchmarks of the compiler front end on generated workflows
//! (`flow_tests::generate::workflow`):
//!
//! * `lex`: the logos lexer alone, in bytes per second;
//! * `lex+parse`: `flow_syntax::parse` (it lexes too), in bytes per second;
//! * `check`: parse, resolve and type check (`flow_check::check_program`
//!   with a fresh `SourceDb` each iteration) of 1,000- and 10,000-node
//!   workflows.
//!
//! After the criterion groups, a plain summary compares a median of five
//! timed runs with the targets (≥ 50 MB/s lex+parse; < 100 ms to check
//! 10,000 nodes). The summary reports; it never fails the run.
//!
//! Run with `cargo bench -p flow-tests --bench frontend`.

use criterion::{BatchSize, BenchmarkId, Criterion, SamplingMode, Throughput};
use flow_check::{check_program, NoFiles};
use flow_diagnostics::{FileId, SourceDb};
use flow_tests::generate::workflow;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Nodes of the workflow lexed and parsed: about 3 MB of source.
const TEXT_NODES: usize = 10_000;
const SEED: u64 = 2024;
/// Workflow sizes checked end to end.
const CHECK_NODES: &[usize] = &[1_000, 10_000];

fn mb(bytes: usize) -> f64 {
    bytes as f64 / 1e6
}

fn bench_lex(c: &mut Criterion, source: &str) {
    let mut group = c.benchmark_group("lex");
    group.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
    group.throughput(Throughput::Bytes(source.len() as u64));
    group.bench_with_input(BenchmarkId::new("tokens", format!("{:.1}MB", mb(source.len()))), source, |b, source| {
        b.iter(|| flow_syntax::lexer::lex(black_box(source)))
    });
    group.finish();
}

fn bench_parse(c: &mut Criterion, source: &str) {
    let mut group = c.benchmark_group("lex+parse");
    group.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(4));
    group.throughput(Throughput::Bytes(source.len() as u64));
    group.bench_with_input(BenchmarkId::new("parse", format!("{:.1}MB", mb(source.len()))), source, |b, source| {
        b.iter(|| flow_syntax::parse(FileId(0), black_box(source)))
    });
    group.finish();
}

fn bench_check(c: &mut Criterion, sources: &[(usize, String)]) {
    let mut group = c.benchmark_group("check");
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(5));
    for (nodes, source) in sources {
        group.throughput(Throughput::Bytes(source.len() as u64));
        group.bench_with_input(BenchmarkId::new("nodes", nodes), source, |b, source| {
            b.iter_batched(
                || {
                    let mut db = SourceDb::new();
                    let root = db.add("generated.flow", source.clone());
                    (db, root)
                },
                |(mut db, root)| {
                    let checked = check_program(&mut db, root, &NoFiles);
                    (checked, db)
                },
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

/// The median of five timed runs of `f`, after one untimed run.
fn median_of_5(mut f: impl FnMut()) -> Duration {
    f();
    let mut times: Vec<Duration> = (0..5)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    times.sort();
    times[2]
}

fn summary(source: &str, sources: &[(usize, String)]) {
    println!();
    println!("front-end summary (median of 5 runs; reports, not assertions)");
    let lex = median_of_5(|| {
        black_box(flow_syntax::lexer::lex(black_box(source)));
    });
    println!("lex: {:.1} MB/s ({:.1} MB in {:.1} ms)", mb(source.len()) / lex.as_secs_f64(), mb(source.len()), lex.as_secs_f64() * 1e3);
    let parse = median_of_5(|| {
        black_box(flow_syntax::parse(FileId(0), black_box(source)));
    });
    let rate = mb(source.len()) / parse.as_secs_f64();
    println!(
        "lex+parse: {rate:.1} MB/s (target >= 50 MB/s) [{}] ({:.1} MB in {:.1} ms)",
        if rate >= 50.0 { "met" } else { "MISSED" },
        mb(source.len()),
        parse.as_secs_f64() * 1e3
    );
    for (nodes, source) in sources {
        let mut diagnostics = 0;
        let check = median_of_5(|| {
            let mut db = SourceDb::new();
            let root = db.add("generated.flow", source.clone());
            let checked = check_program(&mut db, root, &NoFiles);
            diagnostics = checked.diagnostics.len();
            black_box(checked);
        });
        let ms = check.as_secs_f64() * 1e3;
        let target =
            if *nodes == 10_000 { format!(" (target < 100 ms) [{}]", if ms < 100.0 { "met" } else { "MISSED" }) } else { String::new() };
        println!(
            "check {nodes} nodes: {ms:.1} ms{target} ({:.1} MB, {:.1} MB/s, {diagnostics} diagnostics)",
            mb(source.len()),
            mb(source.len()) / check.as_secs_f64()
        );
    }
}

fn main() {
    let source = workflow(TEXT_NODES, SEED);
    let sources: Vec<(usize, String)> = CHECK_NODES.iter().map(|&n| (n, workflow(n, SEED))).collect();
    let mut criterion = Criterion::default().configure_from_args();
    bench_lex(&mut criterion, &source);
    bench_parse(&mut criterion, &source);
    bench_check(&mut criterion, &sources);
    criterion.final_summary();
    // `cargo test --benches` runs this binary in test mode: skip the timings.
    if !std::env::args().any(|a| a == "--test" || a == "--list") {
        summary(&source, &sources);
    }
}
