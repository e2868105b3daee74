//! The model checker on parallel workflows: control steps run to
//! completion as in the engine (fewer states than interleaving every step,
//! and never a violation the coarser model does not also find), and
//! interleavings of waiting branches are really explored (a violation that
//! needs one branch to overtake another is found).

use flow_tests::RepoLoader;

fn check(source: &str) -> flow_check::ir::Program {
    let mut db = flow_diagnostics::SourceDb::new();
    let root = db.add("tests/inline/parallel.flow", source.to_string());
    let checked = flow_check::check_program(&mut db, root, &RepoLoader);
    let errors: Vec<String> = checked.diagnostics.iter().filter(|d| d.is_error()).map(|d| d.message.clone()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    checked.program
}

fn parallel_source(branches: usize, depth: usize) -> String {
    let mut s = String::from(
        "provider local: scripted\nagent a { provider: local }\nbudget b { steps: 100 }\nworkflow w {\n  start: fan\n  budget: b\n",
    );
    let firsts: Vec<String> = (0..branches).map(|i| format!("b{i}_0")).collect();
    let lasts: Vec<String> = (0..branches).map(|i| format!("b{i}_{}", depth - 1)).collect();
    s += &format!("  node fan: parallel [{}]\n", firsts.join(", "));
    s += &format!("  node merge: join [{}]\n", lasts.join(", "));
    s += "  node done: end finished\n";
    for i in 0..branches {
        for d in 0..depth {
            s += &format!("  node b{i}_{d}: agent a {{ output: {{ ok: bool }} }}\n");
            if d + 1 < depth {
                s += &format!("  b{i}_{d} -> b{i}_{}\n", d + 1);
            }
        }
    }
    s += "  merge -> done\n";
    // Violated only by an interleaving: the last branch overtakes the first.
    s += &format!("  policy ordered: never started(b{}_0) before completed(b0_0)\n", branches - 1);
    // Holds: every start of a branch is followed by the end of the run or a failure.
    s += "  policy ends: started(b0_0) => eventually (terminated(finished) or terminated(budget_exhausted)";
    for i in 0..branches {
        for d in 0..depth {
            s += &format!(" or terminated(b{i}_{d}_failed)");
        }
    }
    s += " or terminated(dead_end))\n";
    s += &format!("  policy join_last: never completed(merge) before completed(b{}_{})\n", branches - 1, depth - 1);
    s += "}\n";
    s
}

fn policy_events(report: &flow_verify::policies::PolicyReport) -> usize {
    report.events.iter().filter(|e| flow_policy::Obs::of(&e.body).is_some()).count()
}

#[test]
fn atomic_control_steps_explore_fewer_states_and_refine_the_coarse_model() {
    for (branches, depth) in [(2, 2), (3, 2), (3, 3)] {
        let program = check(&parallel_source(branches, depth));
        use flow_verify::policies::Reductions;
        let reduced = flow_verify::policies::check_policies_with(&program, "sha256:t", 5_000_000, Reductions::default());
        let coarse = Reductions { atomic_control: false, ..Reductions::default() };
        let full = flow_verify::policies::check_policies_with(&program, "sha256:t", 5_000_000, coarse);
        assert_eq!(reduced.len(), full.len());
        let mut fewer = false;
        for (r, f) in reduced.iter().zip(&full) {
            assert_eq!(r.name, f.name);
            assert_ne!(r.status, "unknown");
            // Every run of the precise model is a run of the coarse one.
            if r.status == "violated" {
                assert_eq!(f.status, "violated", "{branches}x{depth} {}", r.name);
                assert!(policy_events(f) <= policy_events(r), "{branches}x{depth} {}: the coarse witness is no longer", r.name);
            }
            fewer |= r.states < f.states;
            assert!(r.states <= f.states, "{branches}x{depth} {}: {} > {}", r.name, r.states, f.states);
        }
        assert!(fewer, "{branches}x{depth}: atomic control steps saved states");
        let total = |rs: &[flow_verify::policies::PolicyReport]| rs.iter().map(|r| r.states).sum::<usize>();
        println!("{branches}x{depth}: {} states reduced, {} full", total(&reduced), total(&full));
        let status = |name: &str| reduced.iter().find(|r| r.name == name).map(|r| r.status).unwrap_or("missing");
        assert_eq!(status("ordered"), "violated", "an interleaving breaks it");
        assert_eq!(status("ends"), "holds");
        assert_eq!(status("join_last"), "holds", "the join waits for every branch");
    }
}
