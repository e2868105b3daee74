//! The automaton against a direct reading of the semantics table of
//! reference §8.3, on random formulas and random finite traces.

use super::*;
use flow_check::ir::Loc;

fn atom(name: &str, arg: &str) -> Formula {
    Formula::Atom { name: name.into(), args: vec![arg.into()], by: None, loc: Loc::default() }
}

fn b(f: Formula) -> Box<Formula> {
    Box::new(f)
}

/// `w, i ⊨ f` exactly as the reference's table says (positions 0-based).
fn sat(f: &Formula, w: &[Obs], i: usize) -> bool {
    let n = w.len();
    match f {
        Formula::Bool { value } => *value,
        Formula::Atom { name, args, by, .. } => i < n && Atom::compile(name, args, by.as_deref()).map(|a| a.holds(&w[i])).unwrap_or(false),
        Formula::Not { body } => !sat(body, w, i),
        Formula::And { lhs, rhs } => sat(lhs, w, i) && sat(rhs, w, i),
        Formula::Or { lhs, rhs } => sat(lhs, w, i) || sat(rhs, w, i),
        Formula::Implies { lhs, rhs } => !sat(lhs, w, i) || sat(rhs, w, i),
        Formula::Always { body } => (i..n).all(|j| sat(body, w, j)),
        Formula::Eventually { body } => (i..n).any(|j| sat(body, w, j)),
        Formula::Never { body, before: None } => !(i..n).any(|j| sat(body, w, j)),
        Formula::Never { body, before: Some(q) } => (i..n).all(|j| !sat(body, w, j) || (i..=j).any(|k| sat(q, w, k))),
        Formula::Within { steps, body } => (i..n.min(i + *steps as usize + 1)).any(|j| sat(body, w, j)),
        Formula::Until { lhs, rhs } => (i..n).any(|j| sat(rhs, w, j) && (i..j).all(|k| sat(lhs, w, k))),
    }
}

fn holds_top(f: &Formula, w: &[Obs]) -> bool {
    match f {
        Formula::Implies { .. } => (0..w.len()).all(|i| sat(f, w, i)),
        _ => sat(f, w, 0),
    }
}

fn run(f: &Formula, w: &[Obs]) -> bool {
    let mut a = Automaton::new(f).expect("compiles");
    let mut s = a.init();
    for obs in w {
        let m = a.mask(obs);
        s = a.step(s, m);
    }
    a.accepts_end(s)
}

const NODES: [&str; 3] = ["a", "b", "c"];

fn word(seed: &mut u64, len: usize) -> Vec<Obs<'static>> {
    (0..len)
        .map(|_| {
            let r = next(seed);
            let node = NODES[(r >> 8) as usize % 3];
            match r % 4 {
                0 => Obs::Started(node),
                1 => Obs::Completed(node),
                2 => Obs::Failed(node),
                _ => Obs::Terminated(node),
            }
        })
        .collect()
}

fn next(seed: &mut u64) -> u64 {
    // xorshift64*: deterministic, no dependency.
    *seed ^= *seed >> 12;
    *seed ^= *seed << 25;
    *seed ^= *seed >> 27;
    seed.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 16
}

fn formula(seed: &mut u64, depth: u32) -> Formula {
    let r = next(seed);
    if depth == 0 || r.is_multiple_of(5) {
        let node = NODES[(r >> 8) as usize % 3];
        return match (r >> 4) % 4 {
            0 => atom("started", node),
            1 => atom("completed", node),
            2 => atom("failed", node),
            _ => atom("terminated", node),
        };
    }
    let d = depth - 1;
    match (r >> 4) % 11 {
        0 => Formula::Not { body: b(formula(seed, d)) },
        1 => Formula::And { lhs: b(formula(seed, d)), rhs: b(formula(seed, d)) },
        2 => Formula::Or { lhs: b(formula(seed, d)), rhs: b(formula(seed, d)) },
        3 => Formula::Implies { lhs: b(formula(seed, d)), rhs: b(formula(seed, d)) },
        4 => Formula::Always { body: b(formula(seed, d)) },
        5 => Formula::Eventually { body: b(formula(seed, d)) },
        6 => Formula::Never { body: b(formula(seed, d)), before: None },
        7 => Formula::Never { body: b(formula(seed, d)), before: Some(b(formula(seed, d))) },
        8 => Formula::Within { steps: (r >> 12) % 4, body: b(formula(seed, d)) },
        9 => Formula::Until { lhs: b(formula(seed, d)), rhs: b(formula(seed, d)) },
        _ => Formula::Bool { value: r.is_multiple_of(2) },
    }
}

#[test]
fn progression_agrees_with_the_semantics_table_on_random_formulas_and_traces() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut checked = 0;
    let mut held = 0;
    for _ in 0..3000 {
        let f = formula(&mut seed, 4);
        for len in [0usize, 1, 2, 3, 5, 8] {
            let w = word(&mut seed, len);
            let expected = holds_top(&f, &w);
            assert_eq!(run(&f, &w), expected, "formula {f:?} on {w:?}");
            checked += 1;
            held += usize::from(expected);
        }
    }
    // Both verdicts occur often: the comparison is not vacuous.
    assert!(held > checked / 10 && held < checked * 9 / 10, "{held} of {checked} held");
}

#[test]
fn the_reference_example_reads_as_documented() {
    // never started(outline) before outcome(evidence_gate, PASS)
    let f = Formula::Never {
        body: b(atom("started", "outline")),
        before: Some(b(Formula::Atom {
            name: "outcome".into(),
            args: vec!["evidence_gate".into(), "PASS".into()],
            by: None,
            loc: Loc::default(),
        })),
    };
    let blocked = [Obs::Started("research"), Obs::Completed("research"), Obs::Outcome { gate: "evidence_gate", outcome: "BLOCK" }];
    assert!(run(&f, &blocked));
    let passed = [Obs::Outcome { gate: "evidence_gate", outcome: "PASS" }, Obs::Started("outline")];
    assert!(run(&f, &passed));
    let early = [Obs::Started("outline"), Obs::Outcome { gate: "evidence_gate", outcome: "PASS" }];
    assert!(!run(&f, &early));
}

#[test]
fn approved_and_decided_read_the_same_decision_event() {
    let approved = Atom::Approved("editor".into());
    let decided = Atom::Decided { gate: "checks".into(), decision: "approve".into() };
    let obs = Obs::Decided { subject: "checks", decision: "approve", by: "editor" };
    assert!(approved.holds(&obs) && decided.holds(&obs));
    let rejected = Obs::Decided { subject: "checks", decision: "reject", by: "editor" };
    assert!(!approved.holds(&rejected) && !decided.holds(&rejected));
    let by_coder = Atom::Called { tool: "deploy".into(), by: Some("coder".into()) };
    assert!(by_coder.holds(&Obs::Called { tool: "deploy", by: Some("coder") }));
    assert!(!by_coder.holds(&Obs::Called { tool: "deploy", by: None }));
    assert!(Atom::Called { tool: "deploy".into(), by: None }.holds(&Obs::Called { tool: "deploy", by: Some("coder") }));
}

#[test]
fn a_monitor_reports_the_violating_event_or_the_open_obligation() {
    let f = Formula::Never { body: b(atom("started", "ship")), before: None };
    let mut m = Monitor::new(Automaton::new(&f).unwrap());
    let started = Body::NodeStarted { schema_version: 1, node: "ship".into(), node_kind: flow_trace::NodeKind::Tool, visit: 1 };
    assert!(!Automaton::is_false(m.state()));
    assert!(Automaton::is_false(m.peek(&started)), "peek sees the violation before it happens");
    assert!(m.feed(7, &started));
    assert_eq!(m.verdict(), Verdict::Violated { seq: 7, at_end: false, owed: String::new() });

    let f = Formula::Eventually { body: b(atom("terminated", "done")) };
    let mut m = Monitor::new(Automaton::new(&f).unwrap());
    assert!(!m.feed(1, &started));
    match m.verdict() {
        Verdict::Violated { at_end: true, owed, .. } => assert_eq!(owed, "eventually terminated(done)"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_monitor_set_gives_each_policy_the_verdict_of_its_own_monitor() {
    let mut seed = 0x1234_5678_9abc_def1u64;
    let nodes = ["a", "b", "c"];
    for _ in 0..200 {
        let formulas: Vec<Formula> = (0..4).map(|_| formula(&mut seed, 3)).collect();
        let events: Vec<Body> = (0..12)
            .map(|i| {
                let r = next(&mut seed);
                let node = nodes[(r >> 8) as usize % 3].to_string();
                match r % 5 {
                    0 => Body::NodeStarted { schema_version: 1, node, node_kind: flow_trace::NodeKind::Agent, visit: 1 },
                    1 => Body::NodeCompleted { schema_version: 1, node, status: flow_trace::NodeStatus::Completed, output: None },
                    2 => Body::NodeFailed { schema_version: 1, node, error_code: flow_trace::ErrorCode::ToolError, message: String::new() },
                    3 => Body::Warning { schema_version: 1, message: format!("not a policy step {i}") },
                    _ => Body::RunTerminated {
                        schema_version: 1,
                        reason: node,
                        status: flow_trace::TerminationStatus::Success,
                        output: None,
                    },
                }
            })
            .collect();
        let mut set = MonitorSet::new(formulas.iter().map(|f| Monitor::new(Automaton::new(f).unwrap())).collect());
        let mut alone: Vec<Monitor> = formulas.iter().map(|f| Monitor::new(Automaton::new(f).unwrap())).collect();
        let mut violated = Vec::new();
        for (i, e) in events.iter().enumerate() {
            violated.clear();
            set.feed(i as u64 + 1, e, &mut violated);
            for (k, m) in alone.iter_mut().enumerate() {
                assert_eq!(m.feed(i as u64 + 1, e), violated.contains(&k));
            }
        }
        let verdicts: Vec<Verdict> = alone.iter_mut().map(|m| m.verdict()).collect();
        assert_eq!(set.verdicts(), verdicts);
    }
}
