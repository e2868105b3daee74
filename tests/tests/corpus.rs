//! Corpus tests: every stdlib module checks clean on its own, and every
//! example checks clean.
// Tests read the repository's files: the pure-core lint does not apply.
#![allow(clippy::disallowed_methods)]

use flow_diagnostics::SourceDb;
use flow_tests::{check_and_render, repo_root};

#[test]
fn every_stdlib_module_checks_clean() {
    assert!(flow_check::stdlib::MODULES.len() >= 4);
    for (name, source) in flow_check::stdlib::MODULES {
        let mut db = SourceDb::new();
        let root = db.add(format!("<{name}>"), source.to_string());
        let checked = flow_check::check_program(&mut db, root, &flow_check::NoFiles);
        // Types in a module are meant for importers: only errors count here.
        let errors: Vec<_> = checked.diagnostics.iter().filter(|d| d.is_error()).collect();
        assert!(errors.is_empty(), "{name}:\n{}", flow_diagnostics::render::render_human(&db, &checked.diagnostics));
    }
}

#[test]
fn every_stdlib_file_is_embedded() {
    let mut on_disk: Vec<String> = std::fs::read_dir(repo_root().join("stdlib"))
        .expect("stdlib/")
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.strip_suffix(".flow")).map(|n| format!("std.{n}")))
        .collect();
    on_disk.sort();
    let embedded: Vec<String> = flow_check::stdlib::MODULES.iter().map(|(n, _)| n.to_string()).collect();
    assert_eq!(on_disk, embedded, "stdlib/*.flow and the embedded module list differ");
}

#[test]
fn every_example_checks_clean() {
    let mut count = 0;
    for entry in std::fs::read_dir(repo_root().join("examples")).expect("examples/").flatten() {
        let dir = entry.path();
        if !dir.is_dir() {
            continue;
        }
        for file in std::fs::read_dir(&dir).expect("dir").flatten() {
            let path = file.path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if !name.ends_with(".flow") || name.ends_with(".broken.flow") {
                continue;
            }
            let (_, rendered) = check_and_render(&path);
            // Only W0117 may be said: a declared property the runtime does
            // not act on yet (reference §13), never accepted in silence.
            let headers: Vec<&str> = rendered.lines().filter(|l| l.starts_with("warning[") || l.starts_with("error[")).collect();
            assert!(headers.iter().all(|h| h.starts_with("warning[W0117]")), "{name} should check clean (W0117 aside):\n{rendered}");
            count += 1;
        }
    }
    assert!(count >= 1);
}
