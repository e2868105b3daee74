//! The native evaluator registry: every `builtin` evaluator the stdlib
//! declares has an implementation, and every implementation a declaration.
#![allow(clippy::disallowed_methods)]

use flow_check::spec::Kind;
use flow_check::{check_program, NoFiles};
use flow_diagnostics::SourceDb;
use flow_runtime::exec::NATIVE_EVALUATORS;
use std::collections::BTreeSet;

#[test]
fn stdlib_natives_and_runtime_natives_are_the_same_set() {
    let mut declared = BTreeSet::new();
    for (module, _) in flow_check::stdlib::MODULES {
        let mut db = SourceDb::new();
        let root = db.add("probe.flow", format!("import {module}\n"));
        let checked = check_program(&mut db, root, &NoFiles);
        let errors: Vec<_> = checked.diagnostics.iter().filter(|d| d.is_error()).collect();
        assert!(errors.is_empty(), "{module} does not check clean: {errors:?}");
        for decl in checked.program.decls.values() {
            if decl.kind == Kind::Evaluator && decl.variant.as_deref() == Some("builtin") {
                declared.insert(decl.function().to_string());
            }
        }
    }
    let implemented: BTreeSet<String> = NATIVE_EVALUATORS.iter().map(|(n, _)| n.to_string()).collect();
    assert!(!declared.is_empty(), "the stdlib declares no native evaluator");
    let undeclared: Vec<_> = implemented.difference(&declared).collect();
    let unimplemented: Vec<_> = declared.difference(&implemented).collect();
    assert!(unimplemented.is_empty(), "declared in the stdlib but not implemented: {unimplemented:?}");
    assert!(undeclared.is_empty(), "implemented but declared nowhere in the stdlib: {undeclared:?}");
}

#[test]
fn natives_pass_fail_and_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ok.json"), "{\"a\": 1}").unwrap();
    std::fs::write(dir.path().join("bad.json"), "{").unwrap();
    std::fs::write(dir.path().join("empty.txt"), "").unwrap();
    let run = |f: &str, p: &str| flow_runtime::exec::native_evaluator(f, &serde_json::json!({ "path": p }), dir.path());
    assert_eq!(run("file_exists", "ok.json"), Ok(true));
    assert_eq!(run("file_exists", "missing"), Ok(false));
    assert_eq!(run("non_empty_file", "empty.txt"), Ok(false));
    assert_eq!(run("non_empty_file", "ok.json"), Ok(true));
    assert_eq!(run("json_file", "ok.json"), Ok(true));
    assert_eq!(run("json_file", "bad.json"), Ok(false));
    assert!(run("nope", "ok.json").unwrap_err().contains("no native evaluator `nope`"));
    assert!(flow_runtime::exec::native_evaluator("file_exists", &serde_json::json!({}), dir.path()).is_err());
}
