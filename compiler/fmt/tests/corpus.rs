//! The formatter on every `.flow` file of the repository: examples, their
//! broken twins, the stdlib, UI test inputs, docs. On each file that parses
//! cleanly, formatting is idempotent, keeps the syntax tree (spans aside)
//! and keeps every comment in order; each file with syntax errors is
//! refused.
// Tests read the repository's files: the pure-core lint does not apply.
#![allow(clippy::disallowed_methods)]

mod common;

use std::path::{Path, PathBuf};

use common::{assert_preserves, comments, format_checked};
use flow_diagnostics::FileId;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("the repository root")
}

/// Every `.flow` file under `dir`, skipping `target/` and hidden
/// directories.
fn flow_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') {
                flow_files(&path, out);
            }
        } else if name.ends_with(".flow") {
            out.push(path);
        }
    }
}

fn corpus() -> Vec<PathBuf> {
    let mut files = Vec::new();
    flow_files(&repo_root(), &mut files);
    files
}

#[test]
fn formatting_the_corpus_is_idempotent_and_preserves_trees_and_comments() {
    let root = repo_root();
    let files = corpus();
    assert!(files.len() >= 20, "expected the examples, stdlib and UI inputs; found {}", files.len());
    let (mut clean, mut refused) = (0, 0);
    for path in &files {
        let name = path.strip_prefix(&root).unwrap_or(path).display().to_string();
        let source = std::fs::read_to_string(path).expect("readable .flow file");
        let parsed = flow_syntax::parse(FileId(0), &source);
        if parsed.diagnostics.is_empty() {
            let formatted = format_checked(&source, &name);
            assert_preserves(&source, &formatted, &name);
            clean += 1;
        } else {
            match flow_fmt::format(&source) {
                Err(flow_fmt::FormatError::Syntax(diagnostics)) => {
                    assert_eq!(diagnostics, parsed.diagnostics, "{name}: the refusal carries the syntax diagnostics")
                }
                other => panic!("{name} has syntax errors but format returned {other:?}"),
            }
            refused += 1;
        }
    }
    assert!(clean >= 10 && refused >= 1, "clean {clean}, refused {refused}");
}

#[test]
fn examples_and_stdlib_are_formatted() {
    let root = repo_root();
    let mut files = Vec::new();
    flow_files(&root.join("examples"), &mut files);
    flow_files(&root.join("stdlib"), &mut files);
    assert!(files.len() >= 16);
    let unformatted: Vec<String> = files
        .iter()
        .filter(|path| {
            let source = std::fs::read_to_string(path).expect("readable .flow file");
            flow_fmt::format(&source).expect("examples and stdlib parse") != source
        })
        .map(|path| path.strip_prefix(&root).unwrap_or(path).display().to_string())
        .collect();
    assert!(unformatted.is_empty(), "not canonically formatted (run the formatter over them): {unformatted:?}");
}

#[test]
fn comments_helper_sees_both_kinds() {
    assert_eq!(comments("// a\r\nagent x { /* b */ }"), vec!["// a", "/* b */"]);
}
