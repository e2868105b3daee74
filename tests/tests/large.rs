//! Very long workflows: the static checks and the model checker stay
//! correct and within the stack at sizes past their compact encodings.

use flow_diagnostics::SourceDb;
use flow_tests::generate::chain_source;

fn program(source: String) -> flow_check::ir::Program {
    let mut db = SourceDb::new();
    let root = db.add("chain.flow", source);
    let checked = flow_check::check_program(&mut db, root, &flow_check::NoFiles);
    assert!(!checked.has_errors(), "{:?}", checked.diagnostics.first());
    checked.program
}

/// The run cannot end before the last node of the chain completes.
fn no_early_end(n: usize) -> String {
    format!("  policy no_early_end: never terminated(ok) before completed(n{n})\n")
}

#[test]
fn a_workflow_past_the_models_numbering_is_unknown_not_violated() {
    let max = flow_verify::policies::DEFAULT_MAX_STATES;
    // The policy holds, and the model checker says so on a short chain.
    let (_, reports) = flow_verify::verify_with_policies(&program(chain_source(50, &no_early_end(50))), "sha256:test", max);
    assert_eq!(reports[0].status, "holds");

    // The model numbers nodes in 16 bits. Past 65,534 nodes the numbers
    // wrapped and the checker "found" a run ending early; now it declines.
    let n = 65_540;
    let (diagnostics, reports) = flow_verify::verify_with_policies(&program(chain_source(n, &no_early_end(n))), "sha256:test", max);
    assert_eq!(reports[0].status, "unknown");
    let codes: Vec<&str> = diagnostics.iter().map(|d| d.code.0).collect();
    assert!(!codes.contains(&"E1001"), "no false violation: {codes:?}");
    let w = diagnostics.iter().find(|d| d.code.0 == "W1001").expect("W1001");
    assert!(w.message.contains("65541 nodes"), "{}", w.message);
}

#[test]
fn a_long_workflow_is_verified_on_a_small_stack() {
    // A cycle through 30,000 nodes, bounded by `max_visits` on one node
    // only, so the cycle checks search the whole component. petgraph's
    // recursive `tarjan_scc` and `is_cyclic_directed` took a stack frame
    // per node and aborted `flowc verify` on a 400,000-node chain; the
    // searches are iterative now.
    let n = 30_000;
    let source = chain_source(n, "")
        .replace("  node n1: tool noop\n", "  node n1: tool noop { max_visits: 3 }\n")
        .replace(&format!("  n{n} -> done\n"), &format!("  n{n} -> n1 when n{n}.output != null\n  n{n} -> done else\n"));
    let program = program(source);
    // 256 KiB: far less than one stack frame per node needs.
    let found = std::thread::scope(|scope| {
        std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn_scoped(scope, || flow_verify::verify(&program))
            .expect("thread")
            .join()
            .expect("verify returns")
    });
    let codes: Vec<&str> = found.iter().map(|d| d.code.0).collect();
    // The cycle is bounded by `max_visits`: no unbounded-cycle finding.
    assert!(!codes.contains(&"E0403"), "{codes:?}");
}
