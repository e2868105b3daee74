//! Every example has a broken twin (`NAME.broken.flow`) that reproduces the
//! failure its seed describes. Verification rejects each twin with the
//! codes named in its `// expect:` header, each with a witness path.

// Tests read the repository's files: the pure-core lint does not apply.
#![allow(clippy::disallowed_methods)]

use flow_tests::{check_and_render, repo_root};

#[test]
fn every_example_has_a_broken_twin_rejected_with_its_code_and_a_witness() {
    let mut examples = 0;
    for entry in std::fs::read_dir(repo_root().join("examples")).expect("examples/").flatten() {
        let dir = entry.path();
        if !dir.is_dir() {
            continue;
        }
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let twin = dir.join(format!("{name}.broken.flow"));
        assert!(twin.exists(), "examples/{name} has no broken twin {name}.broken.flow");
        examples += 1;
        let source = std::fs::read_to_string(&twin).expect("readable twin");
        let expected: Vec<&str> = source
            .lines()
            .find_map(|l| l.strip_prefix("// expect:"))
            .unwrap_or_else(|| panic!("{name}.broken.flow lacks a `// expect: CODE` header"))
            .split_whitespace()
            .collect();
        assert!(!expected.is_empty());
        let (checked, rendered) = check_and_render(&twin);
        assert!(checked.has_errors() || checked.diagnostics.iter().any(|d| d.is_error()), "{name}.broken.flow verifies clean:\n{rendered}");
        for code in expected {
            let found = checked.diagnostics.iter().filter(|d| d.code.0 == code).collect::<Vec<_>>();
            assert!(!found.is_empty(), "{name}.broken.flow should fail with {code}:\n{rendered}");
            assert!(
                found.iter().any(|d| d.witness.as_ref().is_some_and(|w| !w.steps.is_empty())),
                "{name}.broken.flow: {code} has no witness:\n{rendered}"
            );
        }
        // The twin differs from the example only by the bug: the example
        // itself verifies clean (tests/tests/corpus.rs holds that too), but
        // for W0117 (declared properties the runtime does not act on yet).
        let (clean, rendered) = check_and_render(&dir.join(format!("{name}.flow")));
        assert!(clean.diagnostics.iter().all(|d| d.code.0 == "W0117"), "{name}.flow should verify clean:\n{rendered}");
    }
    assert!(examples >= 6, "expected the six seed examples, found {examples}");
}

/// The editor sees what `flowc verify` prints: for every example and its
/// broken twin, the language server's analysis has the same diagnostic
/// codes, the model checker's (E1001, W1001) included.
#[test]
fn the_language_server_reports_what_verify_reports_on_every_example_and_twin() {
    use std::str::FromStr;
    let mut compared = 0;
    for entry in std::fs::read_dir(repo_root().join("examples")).expect("examples/").flatten() {
        let dir = entry.path();
        let Some(name) = dir.file_name().map(|n| n.to_string_lossy().into_owned()).filter(|_| dir.is_dir()) else { continue };
        for file in [format!("{name}.flow"), format!("{name}.broken.flow")] {
            let path = dir.join(&file);
            let (checked, _) = check_and_render(&path);
            let mut cli: Vec<&str> = checked.diagnostics.iter().map(|d| d.code.0).collect();
            let text = std::fs::read_to_string(&path).expect("readable");
            let uri = lsp_types::Uri::from_str(&format!("file://{}", path.display())).expect("a file URI");
            let analysis = flow_lsp::Analysis::new(&uri, &text);
            let mut editor: Vec<&str> = analysis.diagnostics.iter().map(|d| d.code.0).collect();
            cli.sort_unstable();
            editor.sort_unstable();
            assert_eq!(editor, cli, "examples/{name}/{file}: the editor and flowc verify disagree");
            compared += 1;
        }
    }
    assert!(compared >= 12);
}
