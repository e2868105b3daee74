//! Long workflows do not overflow the stack: the graph searches (strongly
//! connected components, cycle tests) are iterative, so their depth is not
//! bounded by the thread's stack. (petgraph's `tarjan_scc` recursed once
//! per node of a chain and aborted `flowc verify` on 400,000 nodes.)

use flow_diagnostics::SourceDb;
use std::fmt::Write as _;

/// A chain of `n` tool nodes with a loop back from the last to the first,
/// bounded by `max_visits` on one node only, so the cycle checks look into
/// the component.
fn long_cycle(n: usize) -> String {
    let mut s = String::from("tool noop: builtin { description: \"Does nothing\", input: any, output: any, function: \"noop\" }\n");
    s.push_str("workflow chain {\n  start: n1\n");
    let _ = writeln!(s, "  node n1: tool noop {{ max_visits: 3 }}");
    for i in 2..=n {
        let _ = writeln!(s, "  node n{i}: tool noop");
    }
    s.push_str("  node done: end ok\n");
    for i in 1..n {
        let _ = writeln!(s, "  n{i} -> n{}", i + 1);
    }
    let _ = writeln!(s, "  n{n} -> n1 when n{n}.output != null");
    let _ = writeln!(s, "  n{n} -> done else");
    s.push_str("}\n");
    s
}

#[test]
fn a_long_workflow_is_verified_on_a_small_stack() {
    let n = 30_000;
    let mut db = SourceDb::new();
    let root = db.add("chain.flow", long_cycle(n));
    let checked = flow_check::check_program(&mut db, root, &flow_check::NoFiles);
    assert!(!checked.has_errors(), "{:?}", checked.diagnostics.first());
    let program = checked.program;
    // 256 KiB: far less than one stack frame per node of the chain needs.
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
