//! UI tests: every `tests/ui/<phase>/NAME.flow` is checked and its rendered
//! diagnostics (no colour, paths relative to the repository root) compared
//! with `NAME.out` beside it. Files under `tests/ui/ok/` must produce no
//! diagnostic at all. Adding a test is adding a file; run with
//! `FLOW_BLESS=1` to write the `.out` files, then review the diff.
// Tests read the repository's files: the pure-core lint does not apply.
#![allow(clippy::disallowed_methods)]

use flow_diagnostics::CODES;
use flow_tests::{check_and_render, repo_root};
use std::path::{Path, PathBuf};

fn ui_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![repo_root().join("tests/ui")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("tests/ui exists").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "flow") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

fn expected_path(flow: &Path) -> PathBuf {
    flow.with_extension("out")
}

#[test]
fn ui_snapshots() {
    let bless = std::env::var_os("FLOW_BLESS").is_some();
    let files = ui_files();
    assert!(files.len() > 20, "expected the UI corpus, found {} files", files.len());
    let mut failures = Vec::new();
    for flow in &files {
        let (_, rendered) = check_and_render(flow);
        let is_ok_case = flow.parent().and_then(|p| p.file_name()).is_some_and(|n| n == "ok");
        if is_ok_case {
            if !rendered.is_empty() {
                failures.push(format!("{} should produce no diagnostics, got:\n{rendered}", flow.display()));
            }
            continue;
        }
        if rendered.is_empty() {
            failures.push(format!("{} produced no diagnostics; UI tests outside ok/ must trigger something", flow.display()));
            continue;
        }
        let out = expected_path(flow);
        if bless {
            std::fs::write(&out, &rendered).expect("write .out");
            continue;
        }
        match std::fs::read_to_string(&out) {
            Ok(expected) if expected == rendered => {}
            Ok(expected) => failures.push(format!(
                "{} differs from {}:\n--- expected\n{expected}\n--- actual\n{rendered}",
                flow.display(),
                out.display()
            )),
            Err(_) => failures.push(format!("{} has no {} (run with FLOW_BLESS=1)", flow.display(), out.display())),
        }
    }
    assert!(failures.is_empty(), "{} UI test(s) failed:\n\n{}", failures.len(), failures.join("\n\n"));
}

#[test]
fn every_code_is_triggered_by_a_ui_test() {
    let mut all_output = String::new();
    for flow in ui_files() {
        all_output.push_str(&check_and_render(&flow).1);
    }
    let missing: Vec<&str> = CODES.iter().map(|c| c.code.0).filter(|code| !all_output.contains(&format!("[{code}]"))).collect();
    assert!(missing.is_empty(), "codes never triggered by a UI test: {missing:?}");
}

#[test]
fn every_code_has_an_explanation_with_an_example() {
    for info in CODES {
        assert!(!info.title.is_empty());
        assert!(info.explanation.contains("Example"), "{} lacks an example", info.code.0);
        assert!(info.explanation.len() > 80, "{} explanation is too short", info.code.0);
    }
}

#[test]
fn three_independent_syntax_errors_are_reported_in_one_run() {
    let (checked, _) = check_and_render(&repo_root().join("tests/ui/syntax/three_errors.flow"));
    let syntax: Vec<_> = checked.diagnostics.iter().filter(|d| d.code.0 == "E0002").collect();
    assert_eq!(syntax.len(), 3, "{:#?}", checked.diagnostics);
    let lines: Vec<u32> = syntax.iter().map(|d| d.primary().unwrap().span.start).collect();
    assert!(lines.windows(2).all(|w| w[0] < w[1]), "errors are at distinct, ordered places");
}

#[test]
fn undefined_agent_has_location_and_did_you_mean() {
    let (checked, rendered) = check_and_render(&repo_root().join("tests/ui/resolve/undefined_agent.flow"));
    let diagnostic = checked.diagnostics.iter().find(|d| d.code.0 == "E0101").expect("E0101 reported");
    assert_eq!(diagnostic.help.as_deref(), Some("did you mean `researcher`?"));
    assert!(rendered.contains("undefined_agent.flow:6:"), "{rendered}");
}
