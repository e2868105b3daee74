//! Helpers shared by the workspace-level tests: finding the corpus of
//! `.flow` files and the repository root.

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
