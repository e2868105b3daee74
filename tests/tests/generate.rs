//! The workflow generator writes valid programs: every generated program
//! checks and verifies with no diagnostics at all (errors or warnings), at every size,
//! and the same seed always gives the same text.

use flow_check::{check_program, NoFiles};
use flow_diagnostics::{render, SourceDb};
use flow_tests::generate::workflow;

fn assert_clean(nodes: usize, seed: u64) {
    let source = workflow(nodes, seed);
    let mut db = SourceDb::new();
    let root = db.add(format!("generated_{nodes}_{seed}.flow"), source.clone());
    let mut checked = check_program(&mut db, root, &NoFiles);
    if !checked.has_errors() {
        checked.diagnostics.extend(flow_verify::verify(&checked.program));
    }
    if !checked.diagnostics.is_empty() {
        let rendered = render::render_human(&db, &checked.diagnostics[..checked.diagnostics.len().min(20)]);
        let excerpt: String = source.chars().take(6000).collect();
        panic!("workflow({nodes}, {seed}) has {} diagnostics:\n{rendered}\n--- source (start) ---\n{excerpt}", checked.diagnostics.len());
    }
    let program = &checked.program;
    let generated = &program.workflows["generated"];
    assert_eq!(generated.nodes.len(), nodes, "workflow({nodes}, {seed}) should have {nodes} nodes");
}

#[test]
fn ten_nodes_check_clean() {
    for seed in 0..20 {
        assert_clean(10, seed);
    }
}

#[test]
fn hundred_nodes_check_clean() {
    for seed in 0..5 {
        assert_clean(100, seed);
    }
}

#[test]
fn two_thousand_nodes_check_clean() {
    assert_clean(2_000, 42);
}

#[test]
fn tiny_workflows_check_clean() {
    for nodes in 3..10 {
        assert_clean(nodes, 1);
    }
}

#[test]
fn same_seed_same_text() {
    for (nodes, seed) in [(10, 0), (100, 7), (2_000, 42)] {
        assert_eq!(workflow(nodes, seed), workflow(nodes, seed));
    }
    assert_ne!(workflow(100, 1), workflow(100, 2), "different seeds should give different programs");
}

#[test]
fn generated_programs_use_the_advertised_constructs() {
    let text = workflow(500, 3);
    for construct in [
        " when ",
        "all(",
        "len(",
        " and ",
        " or ",
        "predicate(",
        "confident(",
        ": loop [",
        "handoff ",
        "gate ",
        "policy ",
        " else\n",
        ": tool ",
        ": agent ",
    ] {
        assert!(text.contains(construct), "workflow(500, 3) should contain `{construct}`");
    }
}
