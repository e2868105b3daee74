//! The model checker benchmark's workload: `K` parallel branches of `D`
//! agents each, joined, under a budget whose duration has no static bound
//! (so any agent step may exhaust it),
//! with three policies (two hold and need the whole state space, one is
//! violated). The same workflow is written as Flow source and as Promela for
//! SPIN, with the policies as LTL over finite traces (an `alive` flag).
//!
//! Usage:
//! ```text
//!   flow_bench_mc flow K D [plain]     # verify in-process; prints one JSON line
//!   flow_bench_mc source K D           # the .flow source
//!   flow_bench_mc promela K D          # the Promela model (ltl a, b, c)
//!   flow_bench_mc gen NODES [plain]    # verify a generated workflow of NODES
//!                                      # nodes (`flow-gen NODES`) in-process,
//!                                      # with `flowc verify`'s bound on states
//! ```
//!
//! `plain` turns off the reductions that clear dead counters and stop at a
//! policy's cone of influence (what the model checker did before them).
#![allow(clippy::disallowed_methods)]

use std::fmt::Write as _;
use std::time::Instant;

// The allocator of `flowc`, so the figures are those of `flowc verify`.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn node(b: usize, d: usize) -> String {
    format!("b{b}_{d}")
}

fn source(k: usize, depth: usize) -> String {
    let mut s = String::from("provider local: scripted\nagent a { provider: local }\nbudget money { steps: 1000, duration: 1h }\nworkflow w {\n  start: fan\n  budget: money\n");
    let firsts: Vec<String> = (0..k).map(|b| node(b, 0)).collect();
    let lasts: Vec<String> = (0..k).map(|b| node(b, depth - 1)).collect();
    let _ = writeln!(s, "  node fan: parallel [{}]", firsts.join(", "));
    let _ = writeln!(s, "  node merge: join [{}]", lasts.join(", "));
    s += "  node done: end finished\n";
    for b in 0..k {
        for d in 0..depth {
            let _ = writeln!(s, "  node {}: agent a {{ output: {{ ok: bool }} }}", node(b, d));
            if d + 1 < depth {
                let _ = writeln!(s, "  {} -> {}", node(b, d), node(b, d + 1));
            }
        }
    }
    s += "  merge -> done\n";
    s += "  policy a: never terminated(finished) before completed(merge)\n";
    let mut ends = vec!["terminated(finished)".to_string(), "terminated(budget_exhausted)".to_string()];
    for b in 0..k {
        for d in 0..depth {
            ends.push(format!("terminated({}_failed)", node(b, d)));
        }
    }
    let _ = writeln!(s, "  policy b: started(b0_0) => eventually ({})", ends.join(" or "));
    s += "  policy c: never terminated(budget_exhausted)\n";
    s += "}\n";
    s
}

fn promela(k: usize, depth: usize) -> String {
    // Event codes: one per event of the policy trace.
    let mut codes: Vec<String> = vec!["S_fan".into(), "C_fan".into(), "S_merge".into(), "C_merge".into(), "S_done".into(), "C_done".into()];
    codes.extend(["T_finished".into(), "T_budget".into()]);
    for b in 0..k {
        for d in 0..depth {
            let n = node(b, d);
            codes.extend([format!("S_{n}"), format!("C_{n}"), format!("F_{n}"), format!("T_{n}")]);
        }
    }
    let mut p = String::new();
    for (i, c) in codes.iter().enumerate() {
        let _ = writeln!(p, "#define {c} {}", i + 1);
    }
    // The first event happens in the initial state: position 1 of the trace.
    p += "byte ev = S_fan;\nbool alive = true;\nbool done = false;\nbool busy = false;\nbyte arrived = 0;\n\n";
    // Terminating: the termination event, then the run is over (stutter).
    p += "inline terminate(code) { atomic { ev = code; done = true; busy = true } ; atomic { alive = false; ev = 0 } }\n\n";
    for b in 0..k {
        let _ = writeln!(p, "proctype branch{b}() {{\n  byte mine = 0;");
        for d in 0..depth {
            let n = node(b, d);
            let last = d + 1 == depth;
            // Waiting for the agent's answer: complete, fail, or exhaust the budget.
            p += "  if\n";
            if last {
                let _ = writeln!(
                    p,
                    "  :: atomic {{ !done && !busy -> ev = C_{n}; arrived++; mine = arrived; busy = (mine == 1 || mine == {k}) }};\n     if\n     :: mine == {k} -> {first}atomic {{ ev = C_merge }}; atomic {{ ev = S_done }}; atomic {{ ev = C_done }}; terminate(T_finished)\n     :: else -> if :: mine == 1 -> atomic {{ ev = S_merge; busy = false }} :: else -> skip fi\n     fi",
                    first = if k == 1 { "atomic { ev = S_merge }; ".to_string() } else { "if :: mine == 1 -> atomic { ev = S_merge } :: else -> skip fi; ".to_string() }
                );
            } else {
                let next = node(b, d + 1);
                let _ =
                    writeln!(p, "  :: atomic {{ !done && !busy -> ev = C_{n}; busy = true }}; atomic {{ ev = S_{next}; busy = false }}");
            }
            let _ = writeln!(p, "  :: atomic {{ !done && !busy -> ev = F_{n}; busy = true }}; terminate(T_{n})");
            let _ = writeln!(p, "  :: atomic {{ !done && !busy -> busy = true }}; terminate(T_budget)");
            p += "  fi;\n";
        }
        p += "}\n\n";
    }
    p += "init {\n  atomic { ev = C_fan };\n";
    for b in 0..k {
        if b + 1 < k {
            let _ = writeln!(p, "  atomic {{ ev = S_{} }};", node(b, 0));
        } else {
            let runs: String = (0..k).map(|i| format!(" run branch{i}();")).collect();
            let _ = writeln!(p, "  atomic {{ ev = S_{};{runs} }}", node(b, 0));
        }
    }
    p += "}\n\n";
    let at = |c: &str| format!("(alive && ev == {c})");
    let _ = writeln!(p, "ltl a {{ (((alive -> !(ev == T_finished)) U {}) || [](alive -> !(ev == T_finished))) }}", at("C_merge"));
    let mut ends = vec!["ev == T_finished".to_string(), "ev == T_budget".to_string()];
    for b in 0..k {
        for d in 0..depth {
            ends.push(format!("ev == T_{}", node(b, d)));
        }
    }
    let _ = writeln!(p, "ltl b {{ [](alive -> (!(ev == S_b0_0) || <>(alive && ({})))) }}", ends.join(" || "));
    p += "ltl c { [](alive -> !(ev == T_budget)) }\n";
    p
}

/// Checks `text` and model-checks every policy; prints one JSON line.
fn verify(text: String, plain: bool, max_states: usize) {
    use flow_verify::policies::Reductions;
    let started = Instant::now();
    let mut db = flow_diagnostics::SourceDb::new();
    let root = db.add("bench.flow", text);
    let checked = flow_check::check_program(&mut db, root, &flow_tests::RepoLoader);
    if checked.has_errors() {
        eprintln!("{}", flow_diagnostics::render::render_human(&db, &checked.diagnostics));
        std::process::exit(1);
    }
    let reductions =
        if plain { Reductions { dead_vars: false, cone: false, shared: false, ..Reductions::default() } } else { Reductions::default() };
    let reports = flow_verify::policies::check_policies_with(&checked.program, "sha256:bench", max_states, reductions);
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    let verdicts: Vec<String> = reports.iter().map(|r| format!("\"{}\": \"{}\"", r.name, r.status)).collect();
    let states: Vec<String> = reports.iter().map(|r| format!("\"{}\": {}", r.name, r.states)).collect();
    // States built: one shared exploration builds the most any policy
    // reports; separate explorations build their sum.
    let explored: usize =
        if reductions.shared { reports.iter().map(|r| r.states).max().unwrap_or(0) } else { reports.iter().map(|r| r.states).sum() };
    println!(
        "{{\"ms\": {ms:.3}, \"explored\": {explored}, \"verdicts\": {{{}}}, \"states\": {{{}}}}}",
        verdicts.join(", "),
        states.join(", ")
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: flow_bench_mc flow|source|promela K D [plain] | flow_bench_mc gen NODES [plain]";
    let number = |i: usize| args.get(i).and_then(|v| v.parse::<usize>().ok());
    if args.get(1).map(String::as_str) == Some("gen") {
        let Some(nodes) = number(2) else {
            eprintln!("{usage}");
            std::process::exit(2);
        };
        let plain = args.get(3).map(String::as_str) == Some("plain");
        verify(flow_tests::generate::workflow(nodes, 2024), plain, flow_verify::policies::DEFAULT_MAX_STATES);
        return;
    }
    let (Some(mode), Some(k), Some(d)) = (args.get(1), number(2), number(3)) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    if k == 0 || d == 0 || k * d > 60 {
        eprintln!("K and D must be positive, K*D at most 60");
        std::process::exit(2);
    }
    match mode.as_str() {
        "source" => print!("{}", source(k, d)),
        "promela" => print!("{}", promela(k, d)),
        "flow" => verify(source(k, d), args.get(4).map(String::as_str) == Some("plain"), 50_000_000),
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    }
}
