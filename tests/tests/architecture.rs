//! Architecture invariants that a type cannot hold: which crates may depend
//! on which (ARCHITECTURE.md).
// Tests read the repository's manifests: the pure-core lint does not apply.
#![allow(clippy::disallowed_methods)]

use flow_tests::repo_root;

/// The names of the workspace crates under `folder` (`compiler`, `interpreter`).
fn crates_under(folder: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(repo_root().join(folder)).expect("folder") {
        let manifest = entry.expect("entry").path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else { continue };
        let name =
            text.lines().find_map(|l| l.strip_prefix("name = \"").and_then(|r| r.strip_suffix('"'))).expect("a package name").to_string();
        out.push((name, text));
    }
    out.sort();
    out
}

#[test]
fn no_compiler_crate_depends_on_an_interpreter_crate() {
    let mut interpreter: Vec<String> = crates_under("interpreter").into_iter().map(|(n, _)| n).collect();
    // The workspace tests crate depends on the runtime: a compiler crate's
    // dev-dependency on it would be one on the interpreter too.
    interpreter.push("flow-tests".into());
    assert!(interpreter.iter().any(|n| n == "flow-runtime"), "{interpreter:?}");
    let compiler = crates_under("compiler");
    assert!(compiler.iter().any(|(n, _)| n == "flow-trace"), "the trace vocabulary sits below both halves");
    for (name, manifest) in compiler {
        for dep in &interpreter {
            let uses =
                manifest.lines().any(|l| l.trim_start().starts_with(&format!("{dep} ")) || l.trim_start().starts_with(&format!("{dep}.")));
            assert!(!uses, "{name} (compiler/) depends on {dep} (interpreter/)");
        }
    }
}
