//! The model checker's reductions (model/live.rs): dead counters and output
//! bits are cleared, and a policy's exploration stops where the policy can
//! no longer change. Both rest on an over-approximation of where a thread
//! can go (`moves`) and where labels are emitted; these tests hold that
//! approximation to every transition the model takes, and the reductions to
//! the verdicts of the unreduced model, over the repository's `.flow` files
//! and generated workflows.
#![allow(clippy::disallowed_methods)]

use flow_check::ir::Program;
use flow_tests::RepoLoader;
use flow_verify::policies::{check_policies_with, PolicyReport, Reductions};

fn check(name: &str, source: String) -> Option<Program> {
    let mut db = flow_diagnostics::SourceDb::new();
    let root = db.add(name, source);
    let checked = flow_check::check_program(&mut db, root, &RepoLoader);
    (!checked.has_errors()).then_some(checked.program)
}

/// The repository's files that check without errors, refinement-test
/// workflows (handoffs, hop limits, loops, gates, judges, fan-outs) and
/// generated workflows with routers, loops and gates.
fn programs() -> Vec<(String, Program)> {
    let mut out = Vec::new();
    for path in flow_tests::corpus() {
        let name = flow_tests::relative(&path);
        let text = std::fs::read_to_string(&path).expect("readable");
        if let Some(p) = check(&name, text) {
            out.push((name, p));
        }
    }
    for seed in 0..150 {
        let name = format!("refine seed {seed}");
        if let Some(p) = check(&name, flow_tests::refine::workflow(seed, 1 << 40)) {
            out.push((name, p));
        }
    }
    for (nodes, seed) in [(12, 1), (20, 2), (30, 3), (40, 4)] {
        let name = format!("generated {nodes} nodes, seed {seed}");
        out.push((name.clone(), check(&name, flow_tests::generate::workflow(nodes, seed)).expect("generated workflows check")));
    }
    assert!(out.len() > 200, "only {} programs", out.len());
    out
}

#[test]
fn every_transition_stays_within_moves_and_every_policy_step_within_its_cone() {
    let mut checked = 0;
    for (name, program) in programs() {
        let obligations = flow_verify::obligations::obligations(&program);
        for workflow in program.workflows.values() {
            let model = flow_verify::model::Model::new(&program, workflow, &obligations);
            let mut atom_sets: Vec<Vec<flow_policy::Atom>> = vec![Vec::new()];
            for policy in flow_verify::policies::applicable(&program, workflow) {
                if let Ok(a) = flow_policy::Automaton::new(&policy.formula) {
                    atom_sets.push(a.atoms().to_vec());
                }
            }
            for atoms in &atom_sets {
                if let Some(why) = flow_verify::model::unexpected_move(&model, atoms, 20_000) {
                    panic!("{name}, workflow `{}`: {why}", workflow.name);
                }
                checked += 1;
            }
        }
    }
    println!("{checked} workflow and policy pairs checked");
}

fn summary(r: &PolicyReport) -> (String, String, &'static str, usize) {
    let steps = r.witness.as_ref().map_or(0, |w| w.steps.len());
    (r.workflow.clone(), r.name.clone(), r.status, steps)
}

#[test]
fn one_exploration_for_all_policies_changes_no_verdict() {
    let mut compared = 0;
    for (name, program) in programs() {
        let shared = check_policies_with(&program, "sha256:t", 200_000, Reductions::default());
        let alone = check_policies_with(&program, "sha256:t", 200_000, Reductions { shared: false, ..Reductions::default() });
        assert_eq!(shared.len(), alone.len(), "{name}");
        for (s, a) in shared.iter().zip(&alone) {
            if s.status != "unknown" && a.status != "unknown" {
                assert_eq!(summary(s), summary(a), "{name}");
                compared += 1;
            }
        }
    }
    println!("{compared} verdicts compared");
}

#[test]
fn the_reductions_change_no_verdict_and_never_add_states() {
    let (mut fewer, mut compared) = (0, 0);
    for (name, program) in programs() {
        let reduced = check_policies_with(&program, "sha256:t", 200_000, Reductions { shared: false, ..Reductions::default() });
        let plain = check_policies_with(
            &program,
            "sha256:t",
            200_000,
            Reductions { dead_vars: false, cone: false, shared: false, ..Reductions::default() },
        );
        assert_eq!(reduced.len(), plain.len(), "{name}");
        for (r, p) in reduced.iter().zip(&plain) {
            assert!(r.states <= p.states, "{name} `{}`: {} states reduced, {} not", r.name, r.states, p.states);
            if p.status == "unknown" {
                continue;
            }
            // Same verdict, and a counterexample just as short (both are
            // shortest runs of the same model).
            assert_eq!(summary(r), summary(p), "{name}");
            compared += 1;
            fewer += usize::from(r.states < p.states);
        }
    }
    println!("{compared} verdicts compared, {fewer} with fewer states");
    assert!(fewer > 20, "the reductions saved states on only {fewer} policies");
}

#[test]
fn a_generated_workflow_with_routers_is_decided_only_with_the_reductions() {
    // Each router's skipped node, hop and loop counters multiply the states
    // of the unreduced model; `completes_cleanly` only watches `n0`.
    let program = check("generated", flow_tests::generate::workflow(300, 2024)).expect("checks");
    let status = |reductions| {
        let reports = check_policies_with(&program, "sha256:t", 300_000, reductions);
        let r = reports.iter().find(|r| r.name == "completes_cleanly").expect("the policy is checked").clone();
        (r.status, r.states)
    };
    let (plain, plain_states) = status(Reductions { dead_vars: false, cone: false, shared: false, ..Reductions::default() });
    assert_eq!(plain, "unknown", "{plain_states} states");
    let (dead, dead_states) = status(Reductions { cone: false, ..Reductions::default() });
    assert_eq!(dead, "holds");
    let (both, both_states) = status(Reductions::default());
    assert_eq!(both, "holds");
    assert!(both_states < dead_states, "{both_states} >= {dead_states}");
    println!("completes_cleanly on 300 nodes: unknown past {plain_states} states, holds in {dead_states} (dead variables), {both_states} (and cone)");
}

#[test]
fn one_exploration_builds_the_states_policies_share_once() {
    // Three branches of three agents under an exhaustible budget, three
    // policies over terminations (no cone): each alone explores it all.
    let mut s = String::from("provider local: scripted\nagent a { provider: local }\nbudget b { steps: 1000, duration: 1h }\n");
    s += "workflow w {\n  start: fan\n  budget: b\n  node fan: parallel [b0_0, b1_0, b2_0]\n  node merge: join [b0_2, b1_2, b2_2]\n";
    s += "  node done: end finished\n  merge -> done\n";
    for b in 0..3 {
        for d in 0..3 {
            s += &format!("  node b{b}_{d}: agent a {{ output: {{ ok: bool }} }}\n");
            if d < 2 {
                s += &format!("  b{b}_{d} -> b{b}_{}\n", d + 1);
            }
        }
    }
    s += "  policy p1: never terminated(finished) before completed(merge)\n";
    s += "  policy p2: never terminated(finished) before completed(b0_2)\n";
    s += "  policy p3: always (terminated(finished) => not terminated(budget_exhausted))\n}\n";
    let program = check("shared", s).expect("checks");
    let shared = check_policies_with(&program, "sha256:t", 1_000_000, Reductions::default());
    let alone = check_policies_with(&program, "sha256:t", 1_000_000, Reductions { shared: false, ..Reductions::default() });
    assert!(shared.iter().chain(&alone).all(|r| r.status == "holds"), "{:?}", shared.iter().map(|r| r.status).collect::<Vec<_>>());
    let built = shared.iter().map(|r| r.states).max().unwrap_or(0);
    let separately: usize = alone.iter().map(|r| r.states).sum();
    assert!(built * 2 < separately, "one exploration built {built} states, three built {separately}");
    println!("three policies: {built} states in one exploration, {separately} in three");
}
