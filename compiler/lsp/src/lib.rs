//! The Flow language server (`flowc lsp`).
//!
//! Architecture invariant: only this crate knows LSP. It turns editor
//! requests into calls on the compiler (`flow-check`, `flow-verify`) and
//! the compiler's answers (diagnostics, the symbol index) into protocol
//! messages. Diagnostics are the very ones `flowc verify` prints, with the
//! same codes and messages; witness paths become related locations.
//!
//! Like `flowc`, this crate is an I/O boundary: it compiles through the one
//! pipeline (`flow-pipeline`), which reads imported modules and schema files
//! from disk.
#![allow(clippy::disallowed_methods)]

pub mod analysis;
mod complete;
mod edits;
mod hints;
mod position;
mod requests;
mod server;

pub use analysis::Analysis;
pub use server::run_stdio;
