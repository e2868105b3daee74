//! The one compile pipeline: a root source and the files it imports are
//! read, checked, digested and verified the same way by `flowc`, `flow` and
//! the language server.
//!
//! This crate is an I/O boundary (it reads sources from disk through
//! [`fs::FsLoader`]); the compiler core it calls is pure.
#![allow(clippy::disallowed_methods)]

mod fixes;
pub mod fs;

pub use fs::{normalize, FsLoader};

use flow_check::{Checked, Loader};
use flow_diagnostics::{Diagnostic, FileId, SourceDb};
use std::path::Path;

/// How far a compile goes after checking (which always runs; verification
/// needs a whole IR, so it runs only when checking found no errors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    /// The static checks of `flow-verify` alone.
    Static,
    /// The static checks, then the model checker on every policy of every
    /// workflow (`flowc verify`, `flow run`, the language server), within
    /// `max_states`.
    Full { max_states: usize },
}

/// A compiled program: what checking and verification found.
#[derive(Debug)]
pub struct Compiled {
    pub root: FileId,
    pub checked: Checked,
    /// Checking's and verification's diagnostics, sorted.
    pub diagnostics: Vec<Diagnostic>,
    /// Every policy's report (with [`Depth::Full`] on a program without
    /// checking errors).
    pub policies: Vec<flow_verify::policies::PolicyReport>,
    /// The static worst case of every budget scope and measure.
    pub budgets: Vec<flow_verify::BudgetBound>,
    /// The digest of the program's sources (as in its plan).
    pub digest: String,
    /// The first and one past the last file of this program in the `SourceDb`.
    pub files: (u32, u32),
}

impl Compiled {
    /// Whether any diagnostic is an error.
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(|d| d.is_error())
    }

    /// The program's files (name, text), as plans and digests take them.
    pub fn sources<'d>(&self, db: &'d SourceDb) -> Vec<(&'d str, &'d str)> {
        (self.files.0..self.files.1).map(FileId).map(|id| (db.name(id), db.text(id))).collect()
    }
}

/// A source file's text: an error names the file when it cannot be read or
/// is not UTF-8.
pub fn read_source(path: &Path) -> Result<String, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    String::from_utf8(bytes).map_err(|_| format!("{} is not UTF-8 text", path.display()))
}

/// Compiles the file at `path` (its imports and schemas from disk).
pub fn compile_file(db: &mut SourceDb, path: &Path, depth: Depth) -> Result<Compiled, String> {
    let text = read_source(path)?;
    Ok(compile_text(db, &normalize(path), text, &FsLoader, depth, false))
}

/// Compiles `text` as the file `name` (imports and schemas through
/// `loader`); `indexed` also records every name's declaration and uses
/// (for editors; the diagnostics and the IR are the same).
pub fn compile_text(db: &mut SourceDb, name: &str, text: String, loader: &dyn Loader, depth: Depth, indexed: bool) -> Compiled {
    let never = flow_verify::Cancel::default();
    compile_text_until(db, name, text, loader, depth, indexed, &never).expect("never cancelled")
}

/// [`compile_text`], or `None` once `cancel` is set (checked between the
/// passes and, in the model checker, every few thousand states): the
/// language server cancels the analysis of a text the next edit replaced.
pub fn compile_text_until(
    db: &mut SourceDb,
    name: &str,
    text: String,
    loader: &dyn Loader,
    depth: Depth,
    indexed: bool,
    cancel: &flow_verify::Cancel,
) -> Option<Compiled> {
    let first = db.len() as u32;
    let root = db.add(name.to_string(), text);
    let checked = if indexed { flow_check::check_program_indexed(db, root, loader) } else { flow_check::check_program(db, root, loader) };
    let last = db.len() as u32;
    let files: Vec<(&str, &str)> = (first..last).map(FileId).map(|id| (db.name(id), db.text(id))).collect();
    let (digest, _) = flow_check::plan::source_digest(&files);
    let mut diagnostics = checked.diagnostics.clone();
    let (mut policies, mut budgets) = (Vec::new(), Vec::new());
    if cancel.is_cancelled() {
        return None;
    }
    if !checked.has_errors() {
        match depth {
            Depth::Static => {
                let (found, bounds) = flow_verify::verify_with_budgets(&checked.program);
                diagnostics.extend(found);
                budgets = bounds;
            }
            Depth::Full { max_states } => {
                let verified = flow_verify::verify_all_until(&checked.program, &digest, max_states, cancel)?;
                diagnostics.extend(verified.diagnostics);
                policies = verified.policies;
                budgets = verified.budgets;
            }
        }
    }
    flow_diagnostics::sort_diagnostics(&mut diagnostics);
    fixes::attach(db, &checked.program, &mut diagnostics);
    Some(Compiled { root, checked, diagnostics, policies, budgets, digest, files: (first, last) })
}
