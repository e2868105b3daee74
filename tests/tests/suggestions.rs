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
