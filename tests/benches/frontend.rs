//! Benchmarks of the compiler front end on generated workflows
//! (`flow_tests::generate::workflow`):
//!
//! * `lex`: the logos lexer alone, in bytes per second;
//! * `lex+parse`: `flow_syntax::parse` (it lexes too), in bytes per second
//!   (freeing the tree is not timed; the summary reports it apart);
//! * `check`: parse, resolve and type check (`flow_check::check_program`
//!   with a fresh `SourceDb` each iteration) of 1,000- and 10,000-node
//!   workflows.
//!
//! After the criterion groups, a plain summary compares a median of five
//! timed runs with the targets (≥ 50 MB/s lex+parse; < 100 ms to check
//! 10,000 nodes). The summary reports; it never fails the run.
//!
//! So that the whole bench stays within a couple of minutes even when the
//! checker is slow, each check size is first timed once: a size whose one
//! run takes longer than [`CHECK_BUDGET`] is left out of the criterion
//! group, and the summary reports that single run instead of a median.
//!
//! Run with `cargo bench -p flow-tests --bench frontend`.

// A benchmark measures time: the pure-core clock lint does not apply.
#![allow(clippy::disallowed_methods)]

// The allocator of `flowc`, so the figures are those of `flowc verify`.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use criterion::{BatchSize, BenchmarkId, Criterion, SamplingMode, Throughput};
use flow_check::{check_program, NoFiles};
use flow_diagnostics::{FileId, SourceDb};
use flow_tests::generate::workflow;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Size of the source lexed and parsed: the smallest generated workflow
/// (a multiple of 1,000 nodes) at least this long.
const TEXT_BYTES: usize = 2_500_000;
const SEED: u64 = 2024;
/// Workflow sizes checked end to end.
const CHECK_NODES: &[usize] = &[1_000, 10_000];
/// A check size whose single run takes longer than this is timed once
/// only, not sampled by criterion (ten samples would take minutes).
const CHECK_BUDGET: Duration = Duration::from_secs(2);

fn mb(bytes: usize) -> f64 {
    bytes as f64 / 1e6
}

fn bench_lex(c: &mut Criterion, source: &str) {
    let mut group = c.benchmark_group("lex");
    group.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
    group.throughput(Throughput::Bytes(source.len() as u64));
    group.bench_with_input(BenchmarkId::new("tokens", format!("{:.1}MB", mb(source.len()))), source, |b, source| {
        b.iter_with_large_drop(|| flow_syntax::lexer::lex(black_box(source)))
    });
    group.finish();
}

fn bench_parse(c: &mut Criterion, source: &str) {
    let mut group = c.benchmark_group("lex+parse");
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(4));
    group.throughput(Throughput::Bytes(source.len() as u64));
    group.bench_with_input(BenchmarkId::new("parse", format!("{:.1}MB", mb(source.len()))), source, |b, source| {
        b.iter_with_large_drop(|| flow_syntax::parse(FileId(0), black_box(source)))
    });
    group.finish();
}

fn bench_check(c: &mut Criterion, sources: &[&(usize, String)]) {
    if sources.is_empty() {
        return;
    }
    let mut group = c.benchmark_group("check");
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(5));
    for (nodes, source) in sources.iter().copied() {
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

/// A generated workflow of at least `bytes` bytes (the node count scaled
/// from a 1,000-node sample, then grown until long enough).
fn text_of_size(bytes: usize) -> String {
    let per_node = workflow(1_000, SEED).len() as f64 / 1_000.0;
    let mut nodes = ((bytes as f64 / per_node) / 1_000.0).ceil().max(1.0) as usize * 1_000;
    loop {
        let source = workflow(nodes, SEED);
        if source.len() >= bytes {
            return source;
        }
        nodes += 1_000;
    }
}

/// The median of five timed runs of `f`, after one untimed run. What `f`
/// returns is dropped outside the timed region.
fn median_of_5<T>(mut f: impl FnMut() -> T) -> Duration {
    drop(black_box(f()));
    let mut times: Vec<Duration> = (0..5)
        .map(|_| {
            let start = Instant::now();
            let value = f();
            let elapsed = start.elapsed();
            drop(black_box(value));
            elapsed
        })
        .collect();
    times.sort();
    times[2]
}

/// Checks `source` once with a fresh `SourceDb`: the time (the result's
/// drop excluded) and the number of diagnostics.
fn check_once(source: &str) -> (Duration, usize) {
    let mut db = SourceDb::new();
    let root = db.add("generated.flow", source.to_string());
    let start = Instant::now();
    let checked = check_program(&mut db, root, &NoFiles);
    let elapsed = start.elapsed();
    let diagnostics = checked.diagnostics.len();
    drop(black_box(checked));
    (elapsed, diagnostics)
}

/// The median of five `check_once` times.
fn check_median(source: &str) -> Duration {
    let mut times: Vec<Duration> = (0..5).map(|_| check_once(source).0).collect();
    times.sort();
    times[2]
}

fn summary(source: &str, sources: &[(usize, String)], probes: &[(Duration, usize)]) {
    println!();
    println!("front-end summary (median of 5 runs; reports, not assertions)");
    let lex = median_of_5(|| flow_syntax::lexer::lex(black_box(source)));
    println!("lex: {:.1} MB/s ({:.2} MB in {:.1} ms)", mb(source.len()) / lex.as_secs_f64(), mb(source.len()), lex.as_secs_f64() * 1e3);
    let parse = median_of_5(|| flow_syntax::parse(FileId(0), black_box(source)));
    let with_drop = median_of_5(|| drop(flow_syntax::parse(FileId(0), black_box(source))));
    let rate = mb(source.len()) / parse.as_secs_f64();
    println!(
        "lex+parse: {rate:.1} MB/s (target >= 50 MB/s) [{}] ({:.2} MB in {:.1} ms; {:.1} MB/s counting the drop of the tree)",
        if rate >= 50.0 { "met" } else { "MISSED" },
        mb(source.len()),
        parse.as_secs_f64() * 1e3,
        mb(source.len()) / with_drop.as_secs_f64()
    );
    let mut times = Vec::new();
    for ((nodes, source), &(probe, diagnostics)) in sources.iter().zip(probes) {
        let (time, how) = if probe > CHECK_BUDGET {
            (probe, "1 run: over the per-run budget, not sampled")
        } else {
            (check_median(source), "median of 5")
        };
        let ms = time.as_secs_f64() * 1e3;
        let target =
            if *nodes == 10_000 { format!(" (target < 100 ms) [{}]", if ms < 100.0 { "met" } else { "MISSED" }) } else { String::new() };
        println!(
            "check {nodes} nodes: {ms:.1} ms{target} ({how}; {:.2} MB, {:.2} MB/s, {diagnostics} diagnostics)",
            mb(source.len()),
            mb(source.len()) / time.as_secs_f64()
        );
        times.push((*nodes, time));
    }
    if let [(n0, t0), .., (n1, t1)] = times.as_slice() {
        let ratio = t1.as_secs_f64() / t0.as_secs_f64();
        let size = *n1 as f64 / *n0 as f64;
        println!("check scaling {n0} -> {n1} nodes: x{ratio:.1} the time for x{size:.0} the nodes (about n^{:.2})", ratio.ln() / size.ln());
    }
}

fn main() {
    let source = text_of_size(TEXT_BYTES);
    let sources: Vec<(usize, String)> = CHECK_NODES.iter().map(|&n| (n, workflow(n, SEED))).collect();
    // `cargo test --benches` runs this binary in test mode: no timings then.
    let test_mode = std::env::args().any(|a| a == "--test" || a == "--list");
    let probes: Vec<(Duration, usize)> =
        if test_mode { Vec::new() } else { sources.iter().map(|(_, source)| check_once(source)).collect() };
    let mut sampled: Vec<&(usize, String)> = Vec::new();
    for (i, entry) in sources.iter().enumerate() {
        match probes.get(i) {
            Some(&(probe, _)) if probe > CHECK_BUDGET => eprintln!(
                "check/nodes/{}: one run took {:.1} s (over the {:.0} s budget); timed once, not sampled",
                entry.0,
                probe.as_secs_f64(),
                CHECK_BUDGET.as_secs_f64()
            ),
            _ => sampled.push(entry),
        }
    }
    let mut criterion = Criterion::default().configure_from_args();
    bench_lex(&mut criterion, &source);
    bench_parse(&mut criterion, &source);
    bench_check(&mut criterion, &sampled);
    criterion.final_summary();
    if !test_mode {
        summary(&source, &sources, &probes);
    }
}
