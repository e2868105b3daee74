//! Checking Flow programs: imports, name resolution, property and type
//! checking, and lowering to the typed [`ir`].
//!
//! Architecture invariant: this crate is pure and deterministic. It reads
//! no files, clocks or environment: sources arrive in a [`SourceDb`], and
//! imported modules and JSON Schema files through the [`Loader`] trait.
//! All maps are ordered, so the same input always gives the same
//! diagnostics in the same order and the same IR.

mod check;
mod expr;
pub mod ir;
pub mod plan;
pub mod schema;
pub mod spec;
pub mod stdlib;
pub mod types;
mod workflow;

use flow_diagnostics::{Diagnostic, FileId, SourceDb};

/// Supplies files the compiler refers to: modules named by `import "…"`
/// and JSON Schema files named by `schema("…")`. The compiler core does no
/// I/O of its own.
pub trait Loader {
    /// Loads `path` as written in the file named `from`. Returns the name
    /// to show for the loaded file and its text, or a message saying why it
    /// could not be read.
    fn load(&self, from: &str, path: &str) -> Result<(String, String), String>;
}

/// A loader that loads nothing: for sources that import only the stdlib.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoFiles;

impl Loader for NoFiles {
    fn load(&self, _from: &str, path: &str) -> Result<(String, String), String> {
        Err(format!("no file loader is available to read `{path}`"))
    }
}

/// The result of checking one program.
#[derive(Debug)]
pub struct Checked {
    pub program: ir::Program,
    /// Every diagnostic, syntax included, in the one deterministic order.
    pub diagnostics: Vec<Diagnostic>,
}

impl Checked {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

/// Checks the program rooted at `root` (already in `db`). Imported modules
/// and schema files are added to `db` as they are loaded.
pub fn check_program(db: &mut SourceDb, root: FileId, loader: &dyn Loader) -> Checked {
    check::Checker::new(db, loader).run(root)
}
