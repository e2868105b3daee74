//! `check_program` skips the symbol index; `check_program_indexed` records
//! it. Both give the same diagnostics and the same IR.

use flow_check::{check_program, check_program_indexed, NoFiles};
use flow_diagnostics::SourceDb;

const SOURCE: &str = r#"
type Draft = { text: string, score: int }
provider local: scripted { max_tokens: 1k, script: "s.yaml" }
agent writer { provider: local }
agent unused_agent { provider: local }
workflow w {
  start: write
  node write: agent writer { output: Draft }
  node done: end ok
  write -> done when write.score > 3
  write -> writee
  policy ends: started(write) => eventually terminated(ok)
}
"#;

fn check(indexed: bool) -> flow_check::Checked {
    let mut db = SourceDb::new();
    let root = db.add("w.flow", SOURCE.to_string());
    if indexed {
        check_program_indexed(&mut db, root, &NoFiles)
    } else {
        check_program(&mut db, root, &NoFiles)
    }
}

#[test]
fn the_index_changes_nothing_but_the_symbols() {
    let plain = check(false);
    let indexed = check(true);
    assert!(!plain.diagnostics.is_empty(), "the source has an undefined node and an unused agent");
    assert_eq!(format!("{:?}", plain.diagnostics), format!("{:?}", indexed.diagnostics));
    assert_eq!(format!("{:?}", plain.program), format!("{:?}", indexed.program));
    assert!(plain.symbols.defs.is_empty() && plain.symbols.refs.is_empty());
    // Declarations, node definitions and uses (in a guard, an edge, a policy atom).
    assert!(indexed.symbols.def("writer").is_some());
    let node = indexed.symbols.def("w::write").expect("the node `write` is indexed");
    assert!(node.detail.contains("output Draft"), "{}", node.detail);
    assert!(indexed.symbols.uses("w::write").count() >= 3, "{:?}", indexed.symbols.refs);
    assert!(indexed.symbols.uses("writer").count() >= 1);
}
