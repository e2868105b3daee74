//! Checking Flow programs: imports, name resolution, property and type
//! checking, and lowering to the typed [`ir`].
//!
//! Architecture invariant: this crate is pure and deterministic. It reads
//! no files, clocks or environment: sources arrive in a [`SourceDb`], and
//! imported modules and JSON Schema files through the [`Loader`] trait.
//! All maps are ordered, so the same input always gives the same
//! diagnostics in the same order and the same IR.

pub mod ceilings;
mod check;
pub mod events;
mod expr;
pub mod facts;
pub mod functions;
pub mod index;
pub mod ir;
pub mod limits;
pub mod lookup;
pub mod node;
pub mod plan;
mod projection;
mod record;
pub mod render;
pub mod rerun;
pub mod schema;
pub mod semantics;
pub mod spec;
pub mod stdlib;
pub mod transfer;
pub mod types;
pub mod view;
mod workflow;

use flow_diagnostics::{Diagnostic, FileId, SourceDb, Span};

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
    /// Where every name is declared and used (for editors): recorded by
    /// [`check_program_indexed`] only, empty otherwise.
    pub symbols: Symbols,
}

/// The declarations and name uses of a program, by stable key: a global's
/// name, or `workflow::node` for nodes and gates.
#[derive(Debug, Clone, Default)]
pub struct Symbols {
    pub defs: Vec<SymbolDef>,
    pub refs: Vec<SymbolRef>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SymbolDef {
    pub key: String,
    pub name: String,
    /// `agent`, `tool`, `type`, `workflow`, `node`, `gate`, ….
    pub kind: String,
    pub file: FileId,
    /// The span of the name where it is declared.
    pub span: Span,
    /// The enclosing workflow, for nodes and gates.
    pub container: Option<String>,
    /// A one-line description: the declaration's first line, a node's type.
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SymbolRef {
    pub key: String,
    pub file: FileId,
    pub span: Span,
}

impl Symbols {
    pub fn def(&self, key: &str) -> Option<&SymbolDef> {
        self.defs.iter().find(|d| d.key == key)
    }

    /// The key of the declaration or use at `offset` in `file`.
    pub fn key_at(&self, file: FileId, offset: u32) -> Option<&str> {
        let inside = |span: Span| span.start <= offset && offset <= span.end;
        self.defs
            .iter()
            .find(|d| d.file == file && inside(d.span))
            .map(|d| d.key.as_str())
            .or_else(|| self.refs.iter().find(|r| r.file == file && inside(r.span)).map(|r| r.key.as_str()))
    }

    /// Every use of `key`, in source order.
    pub fn uses<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a SymbolRef> + 'a {
        self.refs.iter().filter(move |r| r.key == key)
    }
}

impl Checked {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

/// Checks the program rooted at `root` (already in `db`). Imported modules
/// and schema files are added to `db` as they are loaded. The result's
/// [`Checked::symbols`] is empty: see [`check_program_indexed`].
pub fn check_program(db: &mut SourceDb, root: FileId, loader: &dyn Loader) -> Checked {
    check::Checker::new(db, loader).run(root)
}

/// [`check_program`], also recording where every name is declared and used
/// ([`Checked::symbols`], for editors). The diagnostics and the IR are the
/// same.
pub fn check_program_indexed(db: &mut SourceDb, root: FileId, loader: &dyn Loader) -> Checked {
    let mut checker = check::Checker::new(db, loader);
    checker.index_symbols = true;
    checker.run(root)
}
