//! Helpers shared by the workspace-level tests: finding the corpus of
//! `.flow` files and the repository root.
// Tests read the repository's files: the pure-core lint does not apply.
#![allow(clippy::disallowed_methods)]

pub mod generate;
pub mod refine;

use std::path::{Path, PathBuf};

/// The repository root (the parent of this crate's folder).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ has a parent").to_path_buf()
}

/// Every `.flow` file in the repository (examples, stdlib, tests, docs),
/// sorted, skipping build output and hidden folders.
pub fn corpus() -> Vec<PathBuf> {
    let mut files = Vec::new();
    collect(&repo_root(), &mut files);
    files.sort();
    files
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || name == "target" || name == "node_modules" {
            continue;
        }
        if path.is_dir() {
            collect(&path, out);
        } else if name.ends_with(".flow") {
            out.push(path);
        }
    }
}

/// The path of `path` relative to the repository root, with `/` separators.
pub fn relative(path: &Path) -> String {
    path.strip_prefix(repo_root()).unwrap_or(path).to_string_lossy().replace('\\', "/")
}

/// Loads imports and schema files relative to the importing file, with
/// file names relative to the repository root (as the UI tests show them).
#[derive(Debug, Clone, Copy, Default)]
pub struct RepoLoader;

impl flow_check::Loader for RepoLoader {
    fn load(&self, from: &str, path: &str) -> Result<(String, String), String> {
        let relative_dir = Path::new(from).parent().unwrap_or(Path::new(""));
        let name = normalize(&relative_dir.join(path));
        let text = std::fs::read_to_string(repo_root().join(&name)).map_err(|e| e.to_string())?;
        Ok((name, text))
    }
}

pub use flow_lsp::fs::normalize;

/// Checks and verifies one file of the repository and renders its
/// diagnostics as plain text, the way UI snapshots record them.
pub fn check_and_render(path: &Path) -> (flow_check::Checked, String) {
    let text = std::fs::read_to_string(path).expect("readable test file");
    let mut db = flow_diagnostics::SourceDb::new();
    let root = db.add(relative(path), text);
    let mut checked = flow_check::check_program(&mut db, root, &RepoLoader);
    // As `flowc verify`: static verification when checking found no errors.
    if !checked.has_errors() {
        let (found, _) = flow_verify::verify_with_policies(&checked.program, "sha256:ui", flow_verify::policies::DEFAULT_MAX_STATES);
        checked.diagnostics.extend(found);
        flow_diagnostics::sort_diagnostics(&mut checked.diagnostics);
    }
    let rendered = flow_diagnostics::render::render_human(&db, &checked.diagnostics);
    (checked, rendered)
}
