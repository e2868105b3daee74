//! Flow's syntax: the lexer, the AST and the parser.
//!
//! Architecture invariant: parsing never fails. [`parse`] takes any string
//! and returns an AST together with every syntax error found in one pass;
//! the parser recovers at item and entry boundaries. The grammar it
//! implements is `grammar/flow.pest`, and a differential test holds that the
//! two accept exactly the same files.

pub mod ast;
mod chain;
pub mod lexer;
mod parser;
pub mod stack;

pub use parser::{parse, Parse, MAX_SYNTAX_ERRORS, MAX_TREE_HEIGHT};
