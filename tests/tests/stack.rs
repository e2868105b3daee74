//! Stack safety: no input makes a pass over expressions, formulas or types
//! exhaust its stack. Chains of 10⁵ and 10⁶ operators go through every
//! pass — parser, checker and lowering, the static checks, the model
//! checker and the policy compiler, diagnostics rendering, the plan's JSON
//! both ways, the engine's evaluator, the formatter and the language
//! server's analysis — on a thread with a small stack. Chains of `and`,
//! `or` and `|` are accepted (the parser builds them balanced); chains that
//! grow a tree one level per operator are refused past
//! `flow_syntax::MAX_TREE_HEIGHT` with E0004, and the tallest tree accepted
//! goes through every pass too.
//!
//! `STACK_CASE=and` runs one case; `STACK_TIMES=1` prints how long each
//! pass took (run with `--nocapture`).
// A test harness: it reads those variables and a clock, which the
// pure-core lint forbids in the compiler itself.
#![allow(clippy::disallowed_methods)]

use flow_diagnostics::SourceDb;
use std::str::FromStr;

/// 2 MiB: a quarter of a main thread's stack, a tokio worker's default,
/// and far less than one stack frame per operator needs. (Unoptimised
/// builds, which the tests run, use several times the stack of release
/// builds: the parser alone needs over 1 MiB for 100 nested parentheses.)
const SMALL_STACK: usize = 2 << 20;

const HEAD: &str = "provider p: scripted\nagent x { provider: p }\n";

fn workflow(output: &str, edges: &str, policy: &str) -> String {
    format!(
        "{HEAD}workflow w {{\n  start: a\n  node a: agent x {{ output: {output} }}\n  node b: end ok\n  node c: end r0\n{edges}{policy}}}\n"
    )
}

const RECORD: &str = "{ ok: bool, n: int, s: string }";

fn guard(condition: &str) -> String {
    workflow(RECORD, &format!("  a -> b when {condition}\n  a -> c else\n"), "")
}

fn repeat(item: &str, sep: &str, n: usize) -> String {
    let mut out = String::with_capacity((item.len() + sep.len()) * n);
    for i in 0..n {
        if i > 0 {
            out.push_str(sep);
        }
        out.push_str(item);
    }
    out
}

/// The cases at `n` operators: (name, source, accepted).
fn cases(n: usize) -> Vec<(&'static str, String, bool)> {
    vec![
        ("and", guard(&repeat("a.ok", " and ", n + 1)), true),
        ("or", guard(&repeat("a.n > 0", " or ", n + 1)), true),
        ("mixed and/or", guard(&repeat("a.ok and a.n > 1", " or ", n / 2 + 1)), true),
        ("union", workflow(&format!("{{ v: {} }}", repeat("\"x\"", " | ", n + 1)), "  a -> b\n", ""), true),
        (
            "policy or",
            workflow(RECORD, "  a -> b\n", &format!("  policy p1: eventually ({})\n", repeat("started(a)", " or ", n + 1))),
            true,
        ),
        (
            "policy and",
            workflow(RECORD, "  a -> b\n", &format!("  policy p1: always ({})\n", repeat("not started(c)", " and ", n + 1))),
            true,
        ),
        ("sum", guard(&format!("{} > 0", repeat("1", " + ", n + 1))), false),
        ("difference", guard(&format!("{} > 0", repeat("a.n", " - ", n + 1))), false),
        ("product", guard(&format!("{} > 0", repeat("2", " * ", n + 1))), false),
        ("nullable", workflow(&format!("{{ v: string{} }}", "?".repeat(n)), "  a -> b\n", ""), false),
        ("fields", guard(&format!("a{} == 1", ".n".repeat(n))), false),
        ("calls", guard(&format!("len{} > 0", "(a.s)".repeat(n))), false),
        ("negation", guard(&format!("{}a.n > 0", "-".repeat(n))), false),
        ("not", guard(&format!("{}a.ok", "not ".repeat(n))), false),
        ("parentheses", guard(&format!("{}a.ok{}", "(".repeat(n), ")".repeat(n))), false),
        ("lists", guard(&format!("len({}1{}) > 0", "[".repeat(n), "]".repeat(n))), false),
        ("formula not", workflow(RECORD, "  a -> b\n", &format!("  policy p1: always ({}started(c))\n", "not ".repeat(n))), false),
        ("implies", workflow(RECORD, "  a -> b\n", &format!("  policy p1: always ({}started(a))\n", "started(a) => ".repeat(n))), false),
    ]
}

/// The engine's evaluator and the guards' rendering, on every guard of `program`.
fn evaluate_guards(program: &flow_check::ir::Program, env: &flow_engine::eval::Env) {
    for workflow in program.workflows.values() {
        for edge in &workflow.edges {
            if let flow_check::ir::Guard::When(condition) = &edge.guard {
                let _ = flow_engine::eval::eval_bool(condition, env);
                let _ = flow_check::render::render(condition);
            }
        }
    }
}

/// Every pass, on `source`; returns the error codes found.
fn every_pass(source: &str, with_plan: bool) -> Vec<String> {
    let clock = std::time::Instant::now();
    let lap = |what: &str| {
        if std::env::var_os("STACK_TIMES").is_some() {
            eprintln!("  {what}: {:.2?}", clock.elapsed());
        }
    };
    let mut db = SourceDb::new();
    let depth = flow_pipeline::Depth::Full { max_states: 10_000 };
    let compiled = flow_pipeline::compile_text(&mut db, "deep.flow", source.to_string(), &flow_check::NoFiles, depth, true);
    lap("compile");
    let _ = flow_diagnostics::render::render_human(&db, &compiled.diagnostics);
    lap("render");
    let _ = flow_diagnostics::render::to_json(&db, &compiled.diagnostics, Vec::new(), Vec::new());
    let codes: Vec<String> = compiled.diagnostics.iter().filter(|d| d.is_error()).map(|d| d.code.0.to_string()).collect();
    if codes.is_empty() {
        let program = &compiled.checked.program;
        let env: flow_engine::eval::Env = [("a".to_string(), serde_json::json!({ "ok": true, "n": 3, "s": "x" }))].into_iter().collect();
        evaluate_guards(program, &env);
        lap("eval");
        if with_plan {
            let plan = flow_check::plan::Plan::new(program.clone(), "test", &compiled.sources(&db));
            let json = serde_json::to_string(&plan).expect("a plan serialises");
            let back = flow_check::plan::Plan::from_json(&json).expect("a plan reads back");
            evaluate_guards(&back.program, &env);
            lap("plan both ways");
        }
    }
    lap("plan and eval");
    let _ = flow_fmt::format(source);
    lap("fmt");
    let uri = lsp_types::Uri::from_str("file:///deep.flow").expect("a URI");
    let analysis = flow_lsp::Analysis::new(&uri, source);
    lap("lsp analysis");
    let _ = analysis.lsp_diagnostics(&uri);
    let _ = analysis.semantic_tokens();
    lap("lsp tokens");
    let _ = analysis.document_symbols();
    for line in [5, 7, 8] {
        for character in [12, 20, 40] {
            let position = lsp_types::Position { line, character };
            let _ = analysis.hover(position);
            let _ = analysis.definition(&uri, position);
            let _ = analysis.completions(position);
        }
    }
    lap("lsp requests");
    codes
}

/// Every pass on a small stack; `with_plan` also writes the plan as JSON
/// and reads it back (a plan of a million-operator guard is hundreds of
/// megabytes, so the largest chains skip it).
fn on_a_small_stack(source: String, with_plan: bool) -> Vec<String> {
    std::thread::Builder::new()
        .stack_size(SMALL_STACK)
        .spawn(move || every_pass(&source, with_plan))
        .expect("a thread")
        .join()
        .expect("every pass returns")
}

fn run_cases(n: usize) {
    let only = std::env::var("STACK_CASE").ok();
    for (name, source, accepted) in cases(n) {
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        let started = std::time::Instant::now();
        let codes = on_a_small_stack(source, false);
        eprintln!("{name} × {n}: {codes:?} in {:.2?}", started.elapsed());
        if accepted {
            assert!(codes.is_empty(), "{name} × {n} is a valid program: {codes:?}");
        } else {
            assert_eq!(codes, ["E0004"], "{name} × {n} is refused as too deep, and only that");
        }
    }
}

#[test]
fn chains_of_a_hundred_thousand_operators_pass_every_pass_on_a_small_stack() {
    run_cases(100_000);
}

#[test]
fn chains_of_a_million_operators_pass_every_pass_on_a_small_stack() {
    run_cases(1_000_000);
}

#[test]
fn the_tallest_tree_accepted_passes_every_pass_on_a_small_stack() {
    let limit = flow_syntax::MAX_TREE_HEIGHT as usize;
    // `a.n + a.n + …` with k terms, under `> 0`, is k + 2 levels tall (each
    // `a.n` is two). Prefix chains hit the nesting limit (100) first.
    let tallest = [
        ("sum", guard(&format!("{} > 0", repeat("a.n", " + ", limit - 2)))),
        ("difference", guard(&format!("{} > 0", repeat("a.n", " - ", limit - 2)))),
        ("product", guard(&format!("{} > 0", repeat("a.n", " * ", limit - 2)))),
    ];
    for (name, source) in tallest {
        if std::env::var("STACK_CASE").is_ok_and(|only| only != name) {
            continue;
        }
        eprintln!("{name}");
        let codes = on_a_small_stack(source.clone(), true);
        assert!(codes.is_empty(), "{name} at the limit is accepted: {codes:?}");
        let one_more = source.replacen("a.n", "a.n + a.n", 1);
        assert_eq!(on_a_small_stack(one_more, true), ["E0004"], "{name} one past the limit is refused");
    }
}
