//! The docs stay true: every complete `flow` code block in the language
//! reference, the tutorial and the README verifies clean. A block whose
//! first line is `// fragment …` is an excerpt and is skipped; a block whose
//! first line is `// file: PATH` (or that follows `<!-- file: PATH -->`) is
//! a file the next complete example imports or reads.

// Tests read the repository's files: the pure-core lint does not apply.
#![allow(clippy::disallowed_methods)]

use flow_diagnostics::SourceDb;
use flow_tests::repo_root;
use std::collections::HashMap;

struct MemoryLoader(HashMap<String, String>);

impl flow_check::Loader for MemoryLoader {
    fn load(&self, _from: &str, path: &str) -> Result<(String, String), String> {
        let path = path.trim_start_matches("./");
        self.0.get(path).map(|text| (path.to_string(), text.clone())).ok_or_else(|| format!("no file `{path}` in the document"))
    }
}

/// (language, text, file name if declared, line) of every fenced block.
fn blocks(markdown: &str) -> Vec<(String, String, Option<String>, usize)> {
    let mut out = Vec::new();
    let mut lines = markdown.lines().enumerate().peekable();
    let mut pending_file: Option<String> = None;
    while let Some((number, line)) = lines.next() {
        if let Some(name) = line.trim().strip_prefix("<!-- file:").and_then(|l| l.strip_suffix("-->")) {
            pending_file = Some(name.trim().to_string());
            continue;
        }
        let Some(language) = line.strip_prefix("```") else { continue };
        let mut text = String::new();
        for (_, inner) in lines.by_ref() {
            if inner.starts_with("```") {
                break;
            }
            text.push_str(inner);
            text.push('\n');
        }
        let file =
            pending_file.take().or_else(|| text.lines().next().and_then(|l| l.strip_prefix("// file:")).map(|f| f.trim().to_string()));
        out.push((language.trim().to_string(), text, file, number + 1));
    }
    out
}

fn check_document(relative: &str) -> usize {
    let markdown = std::fs::read_to_string(repo_root().join(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"));
    let mut files: HashMap<String, String> = HashMap::new();
    let mut checked = 0;
    let mut failures = Vec::new();
    for (language, text, file, line) in blocks(&markdown) {
        if let Some(name) = file {
            files.insert(name, text);
            continue;
        }
        if language != "flow" || text.starts_with("// fragment") {
            continue;
        }
        checked += 1;
        let mut db = SourceDb::new();
        let name = format!("{relative}:{line}");
        let root = db.add(name.clone(), text);
        let mut result = flow_check::check_program(&mut db, root, &MemoryLoader(files.clone()));
        if !result.has_errors() {
            result.diagnostics.extend(flow_verify::verify(&result.program));
        }
        // W0117 aside: the reference shows properties the runtime does not
        // act on yet, and says so (§13).
        result.diagnostics.retain(|d| d.code.0 != "W0117");
        if !result.diagnostics.is_empty() {
            failures.push(format!("{name}:\n{}", flow_diagnostics::render::render_human(&db, &result.diagnostics)));
        }
    }
    assert!(failures.is_empty(), "{} example(s) in {relative} do not verify clean:\n\n{}", failures.len(), failures.join("\n"));
    checked
}

#[test]
fn reference_examples_verify_clean() {
    assert!(check_document("docs/reference.md") >= 15);
}

#[test]
fn tutorial_examples_verify_clean() {
    assert!(check_document("docs/tutorial.md") >= 1);
}

#[test]
fn readme_examples_verify_clean() {
    check_document("README.md");
}

#[test]
fn reference_lists_every_function_of_the_library() {
    let reference = std::fs::read_to_string(repo_root().join("docs/reference.md")).unwrap();
    let start = reference.find("### 4.3 Functions").expect("§4.3");
    let section = &reference[start..start + reference[start..].find("### 4.4").expect("§4.4")];
    for (name, _) in flow_check::functions::FUNCTIONS {
        assert!(section.contains(&format!("`{name}(")), "docs/reference.md §4.3 has no row for `{name}`");
    }
    for name in flow_check::functions::BINDING {
        assert!(
            section.contains(&format!("`{name}(x in xs")) || section.contains(&format!("`{name}`")),
            "§4.3 does not say `{name}` binds"
        );
    }
}

#[test]
fn reference_lists_every_code_and_every_property() {
    let reference = std::fs::read_to_string(repo_root().join("docs/reference.md")).unwrap();
    for info in flow_diagnostics::CODES {
        assert!(reference.contains(&format!("| {} | {} |", info.code.0, info.title)), "docs/reference.md lacks a row for {}", info.code.0);
        // SARIF's helpUri points at this anchor.
        let anchor = format!("| {} | {} | <a id=\"{}\"></a>", info.code.0, info.title, info.code.0.to_ascii_lowercase());
        assert!(reference.contains(&anchor), "docs/reference.md's row for {} lacks its anchor", info.code.0);
    }
    let mut specs: Vec<&[flow_check::spec::P]> = Vec::new();
    for decl in flow_check::spec::ALL_DECLS {
        specs.push(decl.block.props);
        specs.extend(decl.variants.iter().map(|(_, props)| *props));
    }
    specs.extend([
        flow_check::spec::GATE_BLOCK.props,
        flow_check::spec::HANDOFF_BLOCK.props,
        flow_check::spec::DELEGATE_BLOCK.props,
        flow_check::spec::POLICY_BLOCK.props,
    ]);
    specs.push(flow_check::spec::NODE_COMMON);
    specs.extend(flow_check::spec::NODE_KINDS.iter().map(|k| k.props));
    for props in specs {
        for p in props {
            assert!(reference.contains(&format!("`{}`", p.name)), "docs/reference.md never mentions property `{}`", p.name);
        }
    }
    for kind in flow_check::spec::NODE_KINDS {
        assert!(reference.contains(&format!("`{}`", kind.kind)), "node kind `{}` undocumented", kind.kind);
    }
    for (action, _, _) in flow_check::spec::ACTIONS {
        assert!(reference.contains(&format!("`{action}")), "action `{action}` undocumented");
    }
    for (atom, _, _) in flow_check::spec::ATOMS {
        assert!(reference.contains(&format!("`{atom}(")), "atom `{atom}` undocumented");
    }
}

#[test]
fn reference_lists_every_word_of_the_trace_vocabulary() {
    let reference = std::fs::read_to_string(repo_root().join("docs/reference.md")).unwrap();
    for registry in flow_trace::registries() {
        for (word, meaning) in &registry.words {
            let row = format!("| `{word}` | {meaning} |");
            assert!(reference.contains(&row), "docs/reference.md lacks the {} row:\n{row}", registry.name);
        }
    }
}
