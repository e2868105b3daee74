//! Differential testing of the model checker against SPIN.
//!
//! A deterministic generator writes small random workflows (sequential DAGs
//! of agents with `when`/`else` pairs, a human decision, end nodes, with or
//! without a budget; and parallel fan-outs of agent chains joined at the
//! end) and random policies, as Flow source and as Promela. In Promela every
//! transition is one event of the policy trace (`ev`), the first event
//! happens in the initial state, and after the termination event `alive`
//! drops and the run stutters; policies are translated to LTL over finite
//! traces with `alive`. Flow's verdict (`flowc verify`'s model checker) and
//! SPIN's (`spin -a`, `gcc`, `pan -a -N p`) must be identical on every case,
//! and for a violated safety policy Flow's witness must have no more policy
//! events than the system steps of SPIN's shortest counterexample
//! (`pan -i`, compiled with `-DREACH`).
//!
//! The Promela mirrors the abstract semantics of `compiler/verify/src/model.rs`
//! for this fragment: an agent is entered (started), then completes, fails
//! (then the run terminates with `NODE_failed`) or, under a token budget
//! (whose bound is conditional on the inputs, so a run can use it up),
//! exhausts it (`budget_exhausted`: while it waits, or already as its
//! attempt starts, in the control step that started it); the parallel node
//! completes after its branches started; a completed node takes an edge at once
//! (the next node's start); a human decides (a `decision_applied`), then
//! completes; an end node completes and terminates; branches interleave only
//! while waiting for an answer, and a join runs — starts, then completes —
//! when its last branch arrives (reference §6.2). `within` is not covered: this SPIN has no `X`.
//!
//! Needs `spin` and `gcc` (installed by tests/run-all.sh); fails without them.
// Tests write and read scratch files: the pure-core lint does not apply.
#![allow(clippy::disallowed_methods)]

use flow_tests::RepoLoader;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// One event of the policy trace, as atoms see it.
#[derive(Clone, Debug, PartialEq)]
enum Ev {
    Started(String),
    Completed(String),
    Failed(String),
    Terminated(String),
    Decided(String, &'static str),
}

/// A generated case: the Flow source, the Promela model (without its `ltl`
/// blocks), the policies in Flow syntax and in LTL, and the number of
/// Promela processes (the never claim's pid).
struct Case {
    flow: String,
    promela: String,
    policies: Vec<(String, String, bool)>,
    claim_pid: usize,
}

/// The event codes of a model.
#[derive(Default)]
struct Codes(Vec<Ev>);

impl Codes {
    fn code(&mut self, ev: Ev) -> usize {
        match self.0.iter().position(|e| *e == ev) {
            Some(i) => i + 1,
            None => {
                self.0.push(ev);
                self.0.len()
            }
        }
    }
}

/// A random atom over the events a workflow can produce, in Flow and LTL.
fn atom(rng: &mut Rng, codes: &mut Codes, agents: &[String], nodes: &[String], reasons: &[String], human: bool) -> (String, String) {
    let (flow, ev) = match rng.below(if human { 5 } else { 4 }) {
        0 => {
            let n = rng.pick(nodes).clone();
            (format!("started({n})"), Ev::Started(n))
        }
        1 => {
            let n = rng.pick(nodes).clone();
            (format!("completed({n})"), Ev::Completed(n))
        }
        2 => {
            let n = rng.pick(agents).clone();
            (format!("failed({n})"), Ev::Failed(n))
        }
        3 => {
            let r = rng.pick(reasons).clone();
            (format!("terminated({r})"), Ev::Terminated(r))
        }
        _ => ("approved(editor)".to_string(), Ev::Decided("h".into(), "approve")),
    };
    let code = codes.code(ev);
    (flow, format!("(alive && ev == {code})"))
}

/// A random policy from templates: (Flow text, LTL, is safety).
fn policy(
    rng: &mut Rng,
    codes: &mut Codes,
    agents: &[String],
    nodes: &[String],
    reasons: &[String],
    human: bool,
) -> (String, String, bool) {
    let mut a = || atom(rng, codes, agents, nodes, reasons, human);
    let (p, lp) = a();
    let (q, lq) = a();
    let (r, lr) = a();
    let never_before = |p: &str, lp: &str, q: &str, lq: &str| {
        (format!("never {p} before {q}"), format!("((((!alive) || !{lp}) U {lq}) || []((!alive) || !{lp}))"))
    };
    let template = rng.below(10);
    let (flow, ltl, safety) = match template {
        0 => (format!("never {p}"), format!("[]((!alive) || !{lp})"), true),
        1 => {
            let (f, l) = never_before(&p, &lp, &q, &lq);
            (f, l, true)
        }
        2 => (format!("eventually {p}"), format!("<>{lp}"), false),
        3 => (format!("{p} => eventually {q}"), format!("[]((!alive) || !{lp} || <>{lq})"), false),
        4 => (format!("always ({p} => not {q})"), format!("[]((!alive) || !{lp} || !{lq})"), true),
        5 => (format!("{p} until {q}"), format!("({lp} U {lq})"), false),
        6 => (format!("not {p} until {q}"), format!("(!{lp} U {lq})"), false),
        7 => (format!("(never {p}) or (eventually {q})"), format!("([]((!alive) || !{lp}) || <>{lq})"), false),
        8 => {
            let (f, l) = never_before(&p, &lp, &q, &lq);
            (format!("({f}) and (eventually {r})"), format!("({l} && <>{lr})"), false)
        }
        _ => {
            let (f, l) = never_before(&q, &lq, &r, &lr);
            (format!("{p} => ({f})"), format!("[]((!alive) || !{lp} || {l})"), false)
        }
    };
    (flow, ltl, safety)
}

/// A sequential DAG: agents n0…, a human `h` (sometimes), ends e0…e2.
fn sequential(rng: &mut Rng, index: usize) -> Case {
    let count = 2 + rng.below(5);
    let agents: Vec<String> = (0..count).map(|i| format!("n{i}")).collect();
    let ends: Vec<String> = (0..3).map(|i| format!("e{i}")).collect();
    let human = rng.below(2) == 0;
    let budget = rng.below(2) == 0;
    // Order: agents, with the human after a random agent; ends last.
    let mut order: Vec<String> = agents.clone();
    if human {
        let at = 1 + rng.below(count);
        order.insert(at, "h".into());
    }
    let mut flow = String::from("provider local: scripted\nprincipal editor\nagent a { provider: local }\n");
    if budget {
        flow += "budget money { tokens: 100000 }\n";
    }
    let _ = writeln!(flow, "workflow w{index} {{\n  start: {}", order[0]);
    if budget {
        flow += "  budget: money\n";
    }
    for n in &order {
        if n == "h" {
            flow += "  node h: human editor { decisions: [approve, reject] }\n";
        } else {
            let _ = writeln!(flow, "  node {n}: agent a {{ output: {{ ok: bool }} }}");
        }
    }
    for (i, e) in ends.iter().enumerate() {
        let _ = writeln!(flow, "  node {e}: end r{i}");
    }
    let mut codes = Codes::default();
    let reasons: Vec<String> = {
        let mut r: Vec<String> = (0..3).map(|i| format!("r{i}")).collect();
        r.extend(agents.iter().map(|a| format!("{a}_failed")));
        if budget {
            r.push("budget_exhausted".into());
        }
        r
    };
    let mut all_nodes = order.clone();
    all_nodes.extend(ends.iter().cloned());
    // Promela: pc per place; every d_step is one event.
    let mut body = String::new();
    let mut pcs: Vec<String> = Vec::new();
    let pc = |name: String, pcs: &mut Vec<String>| -> usize {
        match pcs.iter().position(|p| *p == name) {
            Some(i) => i + 1,
            None => {
                pcs.push(name);
                pcs.len()
            }
        }
    };
    // Where entering a node leads (its waiting place).
    let entry = |n: &str| {
        if n.starts_with('e') {
            format!("end1_{n}")
        } else if n == "h" {
            "human".into()
        } else {
            format!("wait_{n}")
        }
    };
    let end_pc = pc("end".into(), &mut pcs);
    for (i, n) in order.iter().enumerate() {
        let later: Vec<String> = order[i + 1..].iter().chain(ends.iter()).cloned().collect();
        let x = rng.pick(&later).clone();
        let guarded = rng.below(2) == 0 || n == "h";
        let y = if guarded { Some(rng.pick(&later).clone()) } else { None };
        let leave = pc(format!("leave_{n}"), &mut pcs);
        match &y {
            Some(y) => {
                if n == "h" {
                    let _ = writeln!(flow, "  h -> {x} when h.decision == \"approve\"\n  h -> {y} else");
                    let sx = codes.code(Ev::Started(x.clone()));
                    let sy = codes.code(Ev::Started(y.clone()));
                    let px = pc(entry(&x), &mut pcs);
                    let py = pc(entry(y), &mut pcs);
                    let _ = writeln!(body, "  :: d_step {{ pc == {leave} && dec == 1 -> ev = {sx}; pc = {px} }}");
                    let _ = writeln!(body, "  :: d_step {{ pc == {leave} && dec != 1 -> ev = {sy}; pc = {py} }}");
                } else {
                    let _ = writeln!(flow, "  {n} -> {x} when {n}.ok\n  {n} -> {y} else");
                    for t in [&x, y] {
                        let s = codes.code(Ev::Started(t.clone()));
                        let p = pc(entry(t), &mut pcs);
                        let _ = writeln!(body, "  :: d_step {{ pc == {leave} -> ev = {s}; pc = {p} }}");
                    }
                }
            }
            None => {
                let _ = writeln!(flow, "  {n} -> {x}");
                let s = codes.code(Ev::Started(x.clone()));
                let p = pc(entry(&x), &mut pcs);
                let _ = writeln!(body, "  :: d_step {{ pc == {leave} -> ev = {s}; pc = {p} }}");
            }
        }
        if n == "h" {
            let human_pc = pc("human".into(), &mut pcs);
            let done_pc = pc("human_done".into(), &mut pcs);
            for (d, name) in [(1, "approve"), (2, "reject")] {
                let c = codes.code(Ev::Decided("h".into(), name));
                let _ = writeln!(body, "  :: d_step {{ pc == {human_pc} -> ev = {c}; dec = {d}; pc = {done_pc} }}");
            }
            let c = codes.code(Ev::Completed("h".into()));
            let _ = writeln!(body, "  :: d_step {{ pc == {done_pc} -> ev = {c}; pc = {leave} }}");
        } else {
            let wait = pc(format!("wait_{n}"), &mut pcs);
            let failed = pc(format!("failed_{n}"), &mut pcs);
            let c = codes.code(Ev::Completed(n.clone()));
            let f = codes.code(Ev::Failed(n.clone()));
            let t = codes.code(Ev::Terminated(format!("{n}_failed")));
            let _ = writeln!(body, "  :: d_step {{ pc == {wait} -> ev = {c}; pc = {leave} }}");
            let _ = writeln!(body, "  :: d_step {{ pc == {wait} -> ev = {f}; pc = {failed} }}");
            let _ = writeln!(body, "  :: d_step {{ pc == {failed} -> ev = {t}; pc = {end_pc} }}");
            if budget {
                let tb = codes.code(Ev::Terminated("budget_exhausted".into()));
                let _ = writeln!(body, "  :: d_step {{ pc == {wait} -> ev = {tb}; pc = {end_pc} }}");
            }
        }
    }
    for (i, e) in ends.iter().enumerate() {
        let first = pc(format!("end1_{e}"), &mut pcs);
        let second = pc(format!("end2_{e}"), &mut pcs);
        let c = codes.code(Ev::Completed(e.clone()));
        let t = codes.code(Ev::Terminated(format!("r{i}")));
        let _ = writeln!(body, "  :: d_step {{ pc == {first} -> ev = {c}; pc = {second} }}");
        let _ = writeln!(body, "  :: d_step {{ pc == {second} -> ev = {t}; pc = {end_pc} }}");
    }
    let stop = pc("stop".into(), &mut pcs);
    let _ = writeln!(body, "  :: d_step {{ pc == {end_pc} -> alive = false; ev = 0; pc = {stop} }}");
    let _ = writeln!(body, "  :: pc == {stop} -> break");
    let first_event = codes.code(Ev::Started(order[0].clone()));
    let first_pc = pc(entry(&order[0]), &mut pcs);
    let mut policies = Vec::new();
    for k in 0..5 {
        let (f, l, safety) = policy(rng, &mut codes, &agents, &all_nodes, &reasons, human);
        let _ = writeln!(flow, "  policy p{k}: {f}");
        policies.push((format!("p{k}"), l, safety));
    }
    flow += "}\n";
    let promela = format!(
        "byte ev = {first_event};\nbool alive = true;\nbyte pc = {first_pc};\nbyte dec = 0;\n\nactive proctype main() {{\n  do\n{body}  od\n}}\n"
    );
    Case { flow, promela, policies, claim_pid: 1 }
}

/// Parallel branches of agent chains, joined, then an end node.
fn parallel(rng: &mut Rng, index: usize) -> Case {
    let k = 2 + rng.below(2);
    let depth = 1 + rng.below(2);
    let budget = rng.below(2) == 0;
    let node = |b: usize, d: usize| format!("b{b}_{d}");
    let mut flow = String::from("provider local: scripted\nagent a { provider: local }\n");
    if budget {
        flow += "budget money { tokens: 100000 }\n";
    }
    let _ = writeln!(flow, "workflow w{index} {{\n  start: fan");
    if budget {
        flow += "  budget: money\n";
    }
    let firsts: Vec<String> = (0..k).map(|b| node(b, 0)).collect();
    let lasts: Vec<String> = (0..k).map(|b| node(b, depth - 1)).collect();
    let _ = writeln!(
        flow,
        "  node fan: parallel [{}]\n  node merge: join [{}]\n  node done: end finished",
        firsts.join(", "),
        lasts.join(", ")
    );
    let mut agents = Vec::new();
    for b in 0..k {
        for d in 0..depth {
            agents.push(node(b, d));
            let _ = writeln!(flow, "  node {}: agent a {{ output: {{ ok: bool }} }}", node(b, d));
            if d + 1 < depth {
                let _ = writeln!(flow, "  {} -> {}", node(b, d), node(b, d + 1));
            }
        }
    }
    flow += "  merge -> done\n";
    let mut nodes = agents.clone();
    nodes.extend(["fan", "merge", "done"].map(String::from));
    let mut reasons: Vec<String> = agents.iter().map(|a| format!("{a}_failed")).collect();
    reasons.push("finished".into());
    if budget {
        reasons.push("budget_exhausted".into());
    }
    let mut codes = Codes::default();
    let mut c = |e: Ev| codes.code(e);
    let s_fan = c(Ev::Started("fan".into()));
    let c_fan = c(Ev::Completed("fan".into()));
    let s_merge = c(Ev::Started("merge".into()));
    let c_merge = c(Ev::Completed("merge".into()));
    let s_done = c(Ev::Started("done".into()));
    let c_done = c(Ev::Completed("done".into()));
    let t_fin = c(Ev::Terminated("finished".into()));
    let t_bud = c(Ev::Terminated("budget_exhausted".into()));
    let mut p = String::new();
    let _ = writeln!(p, "byte ev = {s_fan};\nbool alive = true;\nbool done = false;\nbool busy = false;\nbyte arrived = 0;\n");
    p += "inline terminate(code) { atomic { ev = code; done = true; busy = true }; atomic { alive = false; ev = 0 } }\n\n";
    for b in 0..k {
        let _ = writeln!(p, "proctype branch{b}() {{\n  byte mine = 0;");
        for d in 0..depth {
            let n = node(b, d);
            let (cn, fnn, tn) = (c(Ev::Completed(n.clone())), c(Ev::Failed(n.clone())), c(Ev::Terminated(format!("{n}_failed"))));
            p += "  if\n";
            if d + 1 == depth {
                // The join runs (starts, then completes) on the last arrival.
                let _ = writeln!(
                    p,
                    "  :: atomic {{ !done && !busy -> ev = {cn}; arrived++; mine = arrived; busy = (mine == {k}) }};\n     if\n     :: mine == {k} -> atomic {{ ev = {s_merge} }}; atomic {{ ev = {c_merge} }}; atomic {{ ev = {s_done} }}; atomic {{ ev = {c_done} }}; terminate({t_fin})\n     :: else -> skip\n     fi"
                );
            } else {
                let sn = c(Ev::Started(node(b, d + 1)));
                // Under a budget the next node's attempt start may find it
                // used up, in the same control step.
                let start = if budget {
                    format!("if :: atomic {{ ev = {sn}; busy = false }} :: atomic {{ ev = {sn} }}; terminate({t_bud}) fi")
                } else {
                    format!("atomic {{ ev = {sn}; busy = false }}")
                };
                let _ = writeln!(p, "  :: atomic {{ !done && !busy -> ev = {cn}; busy = true }}; {start}");
            }
            let _ = writeln!(p, "  :: atomic {{ !done && !busy -> ev = {fnn}; busy = true }}; terminate({tn})");
            if budget {
                let _ = writeln!(p, "  :: atomic {{ !done && !busy -> busy = true }}; terminate({t_bud})");
            }
            p += "  fi;\n";
        }
        p += "}\n\n";
    }
    // The engine starts every branch, then completes the parallel node.
    p += "init {\n";
    for b in 0..k {
        let s = c(Ev::Started(node(b, 0)));
        // Under a budget a branch's attempt start may find it used up.
        let exhaust = if budget { format!(" :: atomic {{ ev = {s} }}; terminate({t_bud})") } else { String::new() };
        let _ = writeln!(p, "  if :: atomic {{ ev = {s} }}{exhaust} fi;");
    }
    let runs: String = (0..k).map(|i| format!(" run branch{i}();")).collect();
    let _ = writeln!(p, "  atomic {{ ev = {c_fan};{runs} }}");
    p += "}\n";
    let mut policies = Vec::new();
    for i in 0..5 {
        let (f, l, safety) = policy(rng, &mut codes, &agents, &nodes, &reasons, false);
        let _ = writeln!(flow, "  policy p{i}: {f}");
        policies.push((format!("p{i}"), l, safety));
    }
    flow += "}\n";
    Case { flow, promela: p, policies, claim_pid: k + 1 }
}

fn flow_verdicts(case: &Case) -> Vec<(String, &'static str, usize)> {
    let mut db = flow_diagnostics::SourceDb::new();
    let root = db.add("tests/inline/spin_case.flow", case.flow.clone());
    let checked = flow_check::check_program(&mut db, root, &RepoLoader);
    assert!(!checked.has_errors(), "{}\n{}", case.flow, flow_diagnostics::render::render_human(&db, &checked.diagnostics));
    flow_verify::policies::check_policies(&checked.program, "sha256:spin", 1_000_000)
        .into_iter()
        .map(|r| {
            let events = r.events.iter().filter(|e| flow_policy::Obs::of(&e.body).is_some()).count();
            (r.name, r.status, events)
        })
        .collect()
}

fn run(dir: &Path, program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program} (is it installed? tests/run-all.sh installs spin and gcc): {e}"));
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() || program == "./pan", "{program} {args:?} failed:\n{text}");
    text
}

/// SPIN's verdict for each policy, and for violated safety policies the
/// system steps of its shortest counterexample.
fn spin_verdicts(case: &Case, dir: &Path) -> Vec<(bool, Option<usize>)> {
    let mut model = case.promela.clone();
    for (name, ltl, _) in &case.policies {
        let _ = writeln!(model, "ltl {name} {{ {ltl} }}");
    }
    std::fs::write(dir.join("m.pml"), &model).expect("write model");
    run(dir, "spin", &["-a", "m.pml"]);
    run(dir, "gcc", &["-O0", "-DREACH", "-DVECTORSZ=4096", "-w", "-o", "pan", "pan.c"]);
    let mut out = Vec::new();
    for (name, _, safety) in &case.policies {
        let text = run(dir, "./pan", &["-a", "-m100000", "-N", name]);
        let errors: usize = text
            .split("errors: ")
            .nth(1)
            .and_then(|t| t.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no verdict from pan:\n{text}\n{model}"));
        let mut steps = None;
        if errors > 0 && *safety {
            let _ = std::fs::remove_file(dir.join("m.pml.trail"));
            run(dir, "./pan", &["-a", "-i", "-m100000", "-N", name]);
            let trail = std::fs::read_to_string(dir.join("m.pml.trail")).expect("pan -i writes a trail");
            // Lines are depth:pid:transition; count the system's steps (not the claim's).
            let count = trail
                .lines()
                .filter_map(|l| {
                    let mut parts = l.split(':');
                    let depth: i64 = parts.next()?.parse().ok()?;
                    let pid: i64 = parts.next()?.parse().ok()?;
                    (depth >= 0 && pid >= 0 && pid as usize != case.claim_pid).then_some(())
                })
                .count();
            steps = Some(count);
        }
        out.push((errors > 0, steps));
    }
    out
}

#[test]
fn the_model_checker_agrees_with_spin_on_500_generated_cases() {
    for tool in ["spin", "gcc"] {
        let found = Command::new("sh").args(["-c", &format!("command -v {tool}")]).output().map(|o| o.status.success()).unwrap_or(false);
        assert!(found, "`{tool}` is not installed: tests/run-all.sh installs it (apt-get install spin gcc)");
    }
    let cases: Vec<usize> = (0..100).collect();
    let workers = 2;
    let results: Vec<(usize, usize, usize, usize)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                let mine: Vec<usize> = cases.iter().copied().filter(|i| i % workers == w).collect();
                scope.spawn(move || {
                    let dir = std::env::temp_dir().join(format!("flow-spin-{}-{w}", std::process::id()));
                    std::fs::create_dir_all(&dir).expect("scratch dir");
                    let (mut agree, mut violated, mut witnesses, mut total) = (0, 0, 0, 0);
                    for i in mine {
                        let mut rng = Rng(0x5eed_0000_0000_0001 ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
                        let case = if i % 5 < 3 { sequential(&mut rng, i) } else { parallel(&mut rng, i) };
                        let flow = flow_verdicts(&case);
                        let spin = spin_verdicts(&case, &dir);
                        assert_eq!(flow.len(), spin.len());
                        for ((name, status, events), (spin_violated, spin_steps)) in flow.iter().zip(&spin) {
                            total += 1;
                            assert_ne!(*status, "unknown", "case {i} {name}");
                            let flow_violated = *status == "violated";
                            assert_eq!(
                                flow_violated,
                                *spin_violated,
                                "case {i} policy {name}: Flow says {status}, SPIN says {}\n--- flow\n{}\n--- promela\n{}",
                                if *spin_violated { "violated" } else { "holds" },
                                case.flow,
                                case.promela
                            );
                            agree += 1;
                            violated += usize::from(flow_violated);
                            if let Some(steps) = spin_steps {
                                witnesses += 1;
                                assert!(
                                    *events <= *steps,
                                    "case {i} {name}: Flow's witness has {events} policy events, SPIN's shortest {steps} steps\n{}",
                                    case.flow
                                );
                            }
                        }
                    }
                    let _ = std::fs::remove_dir_all(&dir);
                    (agree, violated, witnesses, total)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("worker")).collect()
    });
    let agree: usize = results.iter().map(|r| r.0).sum();
    let violated: usize = results.iter().map(|r| r.1).sum();
    let witnesses: usize = results.iter().map(|r| r.2).sum();
    let total: usize = results.iter().map(|r| r.3).sum();
    println!("{agree} of {total} verdicts agree ({violated} violated, {witnesses} safety witnesses compared with pan -i)");
    assert!(total >= 500 && agree == total);
    // Both verdicts are well represented: the comparison is not vacuous.
    assert!(violated > total / 10 && violated < total * 9 / 10, "{violated} of {total} violated");
    assert!(witnesses >= 50, "{witnesses} witnesses compared");
}
