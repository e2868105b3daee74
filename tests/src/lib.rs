//! Helpers shared by the workspace-level tests: finding the corpus of
//! `.flow` files and the repository root, building plans as `flowc build`
//! does.
// Tests read the repository's files: the pure-core lint does not apply.
#![allow(clippy::disallowed_methods)]

pub mod bench;
pub mod generate;
pub mod mutate;
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

pub use flow_pipeline::normalize;

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

/// The plan `flowc build SOURCE -o PLAN_FILE` writes (`flowc`'s tests hold
/// the two byte for byte equal), for tests that run plans without the
/// `flowc` binary. Panics when the program has checking errors.
pub fn build_plan(source: &Path, plan_file: &Path) -> flow_check::plan::Plan {
    let mut db = flow_diagnostics::SourceDb::new();
    let text = std::fs::read_to_string(source).expect("the source is readable");
    let root = db.add(flow_pipeline::normalize(source), text);
    let checked = flow_check::check_program(&mut db, root, &flow_pipeline::FsLoader);
    assert!(!checked.has_errors(), "{} has errors: {:?}", source.display(), checked.diagnostics);
    let files: Vec<(&str, &str)> = (0..db.len() as u32).map(flow_diagnostics::FileId).map(|id| (db.name(id), db.text(id))).collect();
    let dir_of = |p: &Path| {
        let dir = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        std::fs::canonicalize(dir).expect("the directory exists")
    };
    let dir = flow_check::plan::relative_dir(&dir_of(plan_file), &dir_of(source));
    flow_check::plan::Plan::new(checked.program, &format!("flowc {}", env!("CARGO_PKG_VERSION")), &files).located(Some(dir))
}

/// A plan as `flowc build` writes it: pretty JSON and a newline.
pub fn plan_text(plan: &flow_check::plan::Plan) -> String {
    serde_json::to_string_pretty(plan).expect("a plan serialises") + "\n"
}
