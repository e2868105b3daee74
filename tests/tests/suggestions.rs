//! "Did you mean" as a quick fix: every suggestion the compiler makes on
//! the repository's files replaces exactly the misspelled name at its
//! diagnostic's primary label, and applying it removes that diagnostic.
// Tests read the repository's files.
#![allow(clippy::disallowed_methods)]

use flow_diagnostics::SourceDb;

fn compile(name: &str, text: &str) -> (SourceDb, Vec<flow_diagnostics::Diagnostic>, flow_diagnostics::FileId) {
    let mut db = SourceDb::new();
    let compiled =
        flow_pipeline::compile_text(&mut db, name, text.to_string(), &flow_pipeline::FsLoader, flow_pipeline::Depth::Static, false);
    (db, compiled.diagnostics, compiled.root)
}

#[test]
fn every_suggestion_replaces_the_misspelled_name_and_fixes_it() {
    let mut suggested = 0;
    for path in flow_tests::corpus() {
        let text = std::fs::read_to_string(&path).expect("a corpus file");
        let name = path.to_string_lossy().into_owned();
        let (db, diagnostics, root) = compile(&name, &text);
        for d in diagnostics.iter().filter(|d| d.suggestion.is_some()) {
            let replacement = d.suggestion.as_deref().expect("a suggestion");
            let label = d.primary().expect("a located diagnostic");
            if label.file != root {
                continue;
            }
            let here = &db.text(root)[label.span.start as usize..label.span.end as usize];
            assert!(
                !here.is_empty() && here.chars().all(|c| c.is_alphanumeric() || c == '_'),
                "{name}: {} suggests `{replacement}` over `{here}`, not a name",
                d.code.0
            );
            assert_eq!(d.help.as_deref(), Some(format!("did you mean `{replacement}`?").as_str()));
            // Applied (at every use the diagnostic labels), the same diagnostic is gone.
            let mut fixed = text.clone();
            let edits = d.suggested_edits(&db);
            assert!(edits.iter().any(|(_, span)| *span == label.span), "{name}: the primary label is edited");
            for (file, span) in edits.iter().rev() {
                assert_eq!(*file, root, "{name}: edits in this file");
                fixed.replace_range(span.start as usize..span.end as usize, replacement);
            }
            let (_, after, _) = compile(&name, &fixed);
            // (A name undefined at several places may be reported at each: one fewer.)
            let same = |e: &&flow_diagnostics::Diagnostic| e.code == d.code && e.message == d.message;
            let (before, now) = (diagnostics.iter().filter(same).count(), after.iter().filter(same).count());
            assert!(now < before, "{name}: applying `{replacement}` for `{here}` leaves {} {}", d.code.0, d.message);
            suggested += 1;
        }
    }
    assert!(suggested >= 10, "only {suggested} suggestions in the corpus");
}

/// Every other fix the compiler offers on the repository's files (a gate's
/// missing handlers, a loop's missing `max_rounds`), applied, removes its
/// diagnostic and brings no new kind of error.
#[test]
fn every_fix_removes_its_diagnostic_and_breaks_nothing() {
    let mut fixed_count = 0;
    let mut codes_fixed = std::collections::BTreeSet::new();
    for path in flow_tests::corpus() {
        let text = std::fs::read_to_string(&path).expect("a corpus file");
        let name = path.to_string_lossy().into_owned();
        let (db, diagnostics, root) = compile(&name, &text);
        let codes_before: std::collections::BTreeSet<&str> = diagnostics.iter().map(|d| d.code.0).collect();
        for d in diagnostics.iter().filter(|d| d.fix.is_some()) {
            let fix = d.fix.as_ref().expect("a fix");
            let mut fixed = text.clone();
            for edit in fix.edits.iter().rev() {
                assert_eq!(edit.file, root, "{name}: edits in this file");
                fixed.replace_range(edit.span.start as usize..edit.span.end as usize, &edit.text);
            }
            // Also what editors and SARIF are given.
            assert!(d.fixes(&db).contains(fix), "{name}: {} lists its fix", d.code.0);
            let (_, after, _) = compile(&name, &fixed);
            let same = |e: &&flow_diagnostics::Diagnostic| e.code == d.code && e.message == d.message;
            assert_eq!(after.iter().filter(same).count(), 0, "{name}: `{}` leaves {} {}\n{fixed}", fix.title, d.code.0, d.message);
            let new: Vec<String> = after
                .iter()
                .filter(|e| e.is_error() && !codes_before.contains(e.code.0))
                .map(|e| format!("{} {}", e.code.0, e.message))
                .collect();
            assert!(new.is_empty(), "{name}: `{}` brings new errors: {new:?}\n{fixed}", fix.title);
            fixed_count += 1;
            codes_fixed.insert(d.code.0);
        }
    }
    assert!(codes_fixed.contains("E0502") && codes_fixed.contains("E0111"), "fixes of {codes_fixed:?} only");
    assert!(fixed_count >= 4, "only {fixed_count} fixes in the corpus");
}
