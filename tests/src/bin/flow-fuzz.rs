//! `flow-fuzz [--seconds N] [--seed N] [--out DIR]`, or `flow-fuzz FILE` to
//! run the passes on one input (`FLOW_FUZZ_TIMES=1` times each): an in-process mutation
//! fuzzer over the compiler and the readers. It mutates the repository's
//! `.flow` files (`flow_tests::mutate`), its JSON and YAML inputs, the
//! examples' plans and the examples' witness traces, and runs each mutant
//! through the parser, checker, static verifier, model checker and policy
//! compiler, diagnostics rendering (human, JSON, SARIF), the formatter, the
//! language server's analysis and requests, the bounded JSON/YAML readers,
//! the plan reader (`Plan::from_json`, its digest check) and trace check
//! (`tracecheck::check_text`, against every example's program). A panic, an input that takes more
//! than 10 s (40 s unoptimised), or a resident size past 2 GiB fails the run (exit 1) and
//! leaves the input in DIR (default `target/fuzz`) to keep as a regression
//! file under `tests/regressions/`. A stack overflow aborts the process:
//! the input is then `DIR/current` (written before each execution). The
//! slowest input so far is kept as `DIR/slowest.*`.
//!
//! Mutants that produce a combination of diagnostic codes not seen before
//! are kept in the pool and mutated further. The run prints executions per
//! second and what it kept. CI runs it for a fixed time from a fixed seed.
// A test harness: it reads files, the clock and the process's memory.
#![allow(clippy::disallowed_methods)]

use flow_tests::generate::Rng;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// An input slower than this is a hang: 10 s in a release build, four
/// times that in an unoptimised one (which CI runs, and which is several
/// times slower).
const HANG: Duration = Duration::from_secs(if cfg!(debug_assertions) { 40 } else { 10 });
const MAX_RSS_KIB: u64 = 2 << 20;
/// Mutants past this size are not kept in the pool (they stay fuzzed once).
const MAX_POOL_INPUT: usize = 256 << 10;
const MAX_POOL: usize = 4_000;

#[derive(Clone)]
enum Input {
    Flow(String),
    Json(String),
    Yaml(String),
    /// A plan as `flowc build` writes it (JSON).
    Plan(String),
    /// A JSONL trace, checked against every example's program.
    Trace(String),
}

impl Input {
    fn text(&self) -> &str {
        match self {
            Input::Flow(t) | Input::Json(t) | Input::Yaml(t) | Input::Plan(t) | Input::Trace(t) => t,
        }
    }

    fn with(&self, text: String) -> Input {
        match self {
            Input::Flow(_) => Input::Flow(text),
            Input::Json(_) => Input::Json(text),
            Input::Yaml(_) => Input::Yaml(text),
            Input::Plan(_) => Input::Plan(text),
            Input::Trace(_) => Input::Trace(text),
        }
    }

    fn extension(&self) -> &'static str {
        match self {
            Input::Flow(_) => "flow",
            Input::Json(_) => "json",
            Input::Yaml(_) => "yaml",
            Input::Plan(_) => "plan",
            Input::Trace(_) => "jsonl",
        }
    }
}

/// Every pass on one input; returns its "signature" (the diagnostic codes
/// it produced), the fuzzer's cheap stand-in for coverage.
fn run_passes(input: &Input) -> String {
    match input {
        Input::Flow(source) => flow_passes(source),
        Input::Json(text) => match flow_check::limits::json_from_str::<serde_json::Value>("input", text) {
            Ok(value) => format!("json ok {}", value.is_object()),
            Err(error) => format!("json err {}", error.len().min(1)),
        },
        Input::Yaml(text) => match flow_check::limits::yaml_from_str::<serde_json::Value>("input", text) {
            Ok(value) => format!("yaml ok {}", value.is_object()),
            Err(_) => "yaml err".to_string(),
        },
        Input::Plan(text) => match flow_check::plan::Plan::from_json(text) {
            Ok(plan) => format!("plan ok, digest {}", plan.check_digest().is_ok()),
            Err(_) => "plan err".to_string(),
        },
        Input::Trace(text) => {
            let options = flow_runtime::tracecheck::Options { artifacts: None, plan_digest: None, require_chain: false, signature: None };
            let mut codes: Vec<String> = Vec::new();
            for program in examples() {
                let report = flow_runtime::tracecheck::check_text(program, text, &options);
                codes.extend(report.deviations.iter().map(|d| d.code.to_string()));
            }
            codes.sort();
            codes.dedup();
            format!("trace {}", codes.join(" "))
        }
    }
}

/// The examples' programs (each example's main file), compiled once.
fn examples() -> &'static [flow_check::ir::Program] {
    static PROGRAMS: std::sync::OnceLock<Vec<flow_check::ir::Program>> = std::sync::OnceLock::new();
    PROGRAMS.get_or_init(|| example_builds().into_iter().map(|(program, _)| program).collect())
}

/// Each example's main file (`examples/NAME/NAME.flow`), checked, with its
/// plan's source files.
fn example_builds() -> Vec<(flow_check::ir::Program, String)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(flow_tests::repo_root().join("examples")) else { return out };
    let mut dirs: Vec<PathBuf> = entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect();
    dirs.sort();
    for dir in dirs {
        let name = dir.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
        let path = dir.join(format!("{name}.flow"));
        let mut db = flow_diagnostics::SourceDb::new();
        let Ok(compiled) = flow_pipeline::compile_file(&mut db, &path, flow_pipeline::Depth::Static) else { continue };
        if compiled.has_errors() {
            continue;
        }
        let files = compiled.sources(&db);
        let plan = flow_check::plan::Plan::new(compiled.checked.program.clone(), "flow-fuzz", &files).located(None);
        out.push((compiled.checked.program, serde_json::to_string_pretty(&plan).unwrap_or_default()));
    }
    out
}

/// Plans and witness traces of the examples: a plan each, and up to eight
/// positive witnesses each as JSONL.
fn plan_and_trace_seeds() -> Vec<Input> {
    let mut out = Vec::new();
    for (program, plan) in example_builds() {
        out.push(Input::Plan(plan));
        let witnesses = flow_verify::policies::positive_witnesses(&program, "sha256:fuzz", 100_000);
        for events in witnesses.into_iter().filter_map(|(_, events)| events).take(8) {
            let lines: Vec<String> = events.iter().filter_map(|e| serde_json::to_string(e).ok()).collect();
            out.push(Input::Trace(lines.join("\n") + "\n"));
        }
    }
    out
}

fn flow_passes(source: &str) -> String {
    let clock = Instant::now();
    let lap = |what: &str| {
        if std::env::var_os("FLOW_FUZZ_TIMES").is_some() {
            eprintln!("  {what}: {:.2?}", clock.elapsed());
        }
    };
    let mut db = flow_diagnostics::SourceDb::new();
    let depth = flow_pipeline::Depth::Full { max_states: 2_000 };
    let compiled = flow_pipeline::compile_text(&mut db, "fuzz.flow", source.to_string(), &flow_check::NoFiles, depth, false);
    let max = flow_diagnostics::cap::DEFAULT_MAX_PER_FILE;
    let mut out = codespan_buffer();
    let _ = flow_diagnostics::render::emit_capped(&mut out, &db, &compiled.diagnostics, max);
    let _ = flow_diagnostics::render::to_json_capped(&db, &compiled.diagnostics, Vec::new(), Vec::new(), max);
    let _ = flow_diagnostics::sarif::to_sarif(&db, &compiled.diagnostics, "fuzz");
    lap("compile and render");
    if let Ok(text) = flow_fmt::format(source) {
        // What the formatter prints, it must read back unchanged.
        assert_eq!(flow_fmt::format(&text).ok().as_deref(), Some(text.as_str()), "the formatter is not idempotent");
    }
    lap("fmt");
    let uri = lsp_types::Uri::from_str("file:///fuzz.flow").expect("a URI");
    // The same small bound as the compiler pass above: a mutant with a vast
    // state space would otherwise take seconds here.
    let never = flow_verify::Cancel::default();
    let analysis = flow_lsp::Analysis::bounded(&uri, source, 2_000, &never).expect("never cancelled");
    lap("lsp new");
    let _ = analysis.lsp_diagnostics(&uri);
    lap("lsp diagnostics");
    let _ = analysis.semantic_tokens();
    lap("lsp tokens");
    let _ = analysis.document_symbols();
    lap("lsp analysis");
    let lines = source.lines().count() as u32;
    for line in [0, lines / 3, lines / 2, lines.saturating_sub(2)] {
        for character in [0, 4, 12, 30] {
            let position = lsp_types::Position { line, character };
            let _ = analysis.hover(position);
            let _ = analysis.definition(&uri, position);
            let _ = analysis.references(&uri, position, true);
            let _ = analysis.completions(position);
            let _ = analysis.rename(position, "renamed");
        }
    }
    lap("lsp requests");
    let mut codes: Vec<&str> = compiled.diagnostics.iter().map(|d| d.code.0).collect();
    codes.sort_unstable();
    codes.dedup();
    codes.join(" ")
}

fn codespan_buffer() -> codespan_reporting::term::termcolor::Buffer {
    codespan_reporting::term::termcolor::Buffer::no_color()
}

fn resident_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)).and_then(|n| n.parse().ok()).unwrap_or(0)
}

struct Args {
    seconds: u64,
    seed: u64,
    out: PathBuf,
}

fn args() -> Args {
    let mut parsed = Args { seconds: 60, seed: 1, out: flow_tests::repo_root().join("target/fuzz") };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next();
        match (arg.as_str(), value) {
            ("--seconds", Some(v)) if v.parse::<u64>().is_ok() => parsed.seconds = v.parse().unwrap_or(60),
            ("--seed", Some(v)) if v.parse::<u64>().is_ok() => parsed.seed = v.parse().unwrap_or(1),
            ("--out", Some(v)) => parsed.out = PathBuf::from(v),
            _ => {
                eprintln!("usage: flow-fuzz [--seconds N] [--seed N] [--out DIR]");
                std::process::exit(2);
            }
        }
    }
    parsed
}

fn seeds() -> Vec<Input> {
    let mut inputs: Vec<Input> = flow_tests::corpus()
        .iter()
        .filter_map(|path| std::fs::read_to_string(path).ok())
        .filter(|text| text.len() <= MAX_POOL_INPUT)
        .map(Input::Flow)
        .collect();
    let mut data = Vec::new();
    collect_data(&flow_tests::repo_root().join("examples"), &mut data);
    for path in data {
        if let Ok(text) = std::fs::read_to_string(&path) {
            let yaml = path.extension().is_some_and(|e| e == "yaml");
            inputs.push(if yaml { Input::Yaml(text) } else { Input::Json(text) });
        }
    }
    inputs.extend(plan_and_trace_seeds());
    inputs
}

fn collect_data(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_data(&path, out);
        } else if path.extension().is_some_and(|e| e == "json" || e == "yaml") {
            out.push(path);
        }
    }
}

fn fail(out: &Path, input: &Input, why: &str) -> ! {
    let file = out.join(format!("failure.{}", input.extension()));
    let _ = std::fs::write(&file, input.text());
    eprintln!("flow-fuzz: FAILED: {why}; the input is {}", file.display());
    std::process::exit(1);
}

fn main() {
    // `flow-fuzz FILE`: run the passes on one input (a failure to reproduce).
    if let Some(file) = std::env::args().nth(1).filter(|a| !a.starts_with("--")) {
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("cannot read {file}: {e}"));
        let input = match Path::new(&file).extension().and_then(|e| e.to_str()) {
            Some("json") => Input::Json(text),
            Some("yaml") => Input::Yaml(text),
            Some("plan") => Input::Plan(text),
            Some("jsonl") => Input::Trace(text),
            _ => Input::Flow(text),
        };
        println!("{}", run_passes(&input));
        return;
    }
    let args = args();
    let _ = std::fs::create_dir_all(&args.out);
    let current = args.out.join("current");
    let slowest_file = args.out.join("slowest.flow");
    let mut pool = seeds();
    let seeded = pool.len();
    let mut seen: HashSet<String> = HashSet::new();
    let mut rng = Rng::new(args.seed);
    // One worker (8 MiB of stack, like a main thread) runs the passes; this
    // thread watches the clock.
    let (send_input, inputs) = mpsc::channel::<Input>();
    let (send_result, results) = mpsc::channel::<Result<String, String>>();
    std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(move || {
            for input in inputs {
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_passes(&input)));
                let outcome = outcome.map_err(|panic| {
                    panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default()
                });
                if send_result.send(outcome).is_err() {
                    return;
                }
            }
        })
        .expect("the worker starts");
    let mut slowest = Duration::ZERO;
    // Runs one input on the worker, failing the run on a panic, a hang or
    // a memory blow-up; returns its signature.
    let mut execute = |input: &Input| -> String {
        let _ = std::fs::write(&current, input.text());
        let clock = Instant::now();
        send_input.send(input.clone()).expect("the worker lives");
        let outcome = match results.recv_timeout(HANG) {
            Ok(outcome) => outcome,
            Err(_) => fail(&args.out, input, &format!("an input took more than {} s", HANG.as_secs())),
        };
        if clock.elapsed() > slowest {
            slowest = clock.elapsed();
            let _ = std::fs::write(slowest_file.with_extension(input.extension()), input.text());
        }
        let signature = match outcome {
            Ok(signature) => signature,
            Err(panic) => fail(&args.out, input, &format!("a pass panicked: {panic}")),
        };
        let rss = resident_kib();
        if rss > MAX_RSS_KIB {
            fail(&args.out, input, &format!("resident memory reached {} MiB", rss >> 10));
        }
        signature
    };
    // First the inputs found before, kept under tests/regressions/.
    let regressions = flow_tests::corpus().into_iter().filter(|p| p.starts_with(flow_tests::repo_root().join("tests/regressions")));
    let mut replayed = 0;
    for path in regressions {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        execute(&Input::Flow(text));
        replayed += 1;
    }
    eprintln!("flow-fuzz: {replayed} regression files pass; seed {}, {} s, {} seed inputs", args.seed, args.seconds, seeded);
    let started = Instant::now();
    let (mut executions, mut kept) = (0u64, 0usize);
    let mut by_kind: std::collections::BTreeMap<&'static str, u64> = Default::default();
    while started.elapsed() < Duration::from_secs(args.seconds) {
        let base = pool[rng.below(pool.len())].clone();
        let donor = pool[rng.below(pool.len())].text().to_string();
        let mut text = base.text().to_string();
        for _ in 0..1 + rng.below(3) {
            text = flow_tests::mutate::mutate(&mut rng, &text, &donor);
        }
        let input = base.with(text);
        let signature = execute(&input);
        executions += 1;
        *by_kind.entry(input.extension()).or_default() += 1;
        if input.text().len() <= MAX_POOL_INPUT && seen.insert(format!("{} {signature}", input.extension())) {
            kept += 1;
            if pool.len() < MAX_POOL {
                pool.push(input);
            }
        }
        if executions % 500 == 0 {
            eprintln!("flow-fuzz: {executions} executions, {kept} kept, {:.0}/s", executions as f64 / started.elapsed().as_secs_f64());
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(&current);
    let kinds: Vec<String> = by_kind.iter().map(|(kind, n)| format!("{kind} {n}")).collect();
    eprintln!("flow-fuzz: executions by kind: {}", kinds.join(", "));
    println!(
        "flow-fuzz: {executions} executions in {seconds:.0} s ({:.1}/s), {kept} inputs kept (new diagnostic signatures), pool {}, slowest {:.2?}, no failures",
        executions as f64 / seconds,
        pool.len(),
        slowest
    );
}
