//! The canonical formatter of Flow sources, behind `flowc fmt`.
//!
//! [`format()`] parses a file, refuses it if it has syntax errors, and
//! otherwise prints its syntax tree in the one canonical layout, carrying
//! every comment over from the token stream (the lexer is lossless). The
//! output parses to the same tree (spans aside) with the same comments in
//! the same order, and formatting it again changes nothing; `format` checks
//! the first two on every call and refuses rather than return a file that
//! would differ (see [`FormatError::Internal`]).
//!
//! # The canonical layout
//!
//! * **Indentation**: 2 spaces per block level, no tabs, no trailing
//!   whitespace, LF line ends, exactly one newline at the end of the file
//!   (an empty or whitespace-only file formats to the empty string).
//! * **Top-level items** are separated by one blank line. One-line items the
//!   author grouped without a blank line (a run of `import`s, one-line
//!   `type`s or `agent`s, one-line `policy`s) stay grouped.
//! * **Blocks** (`{ … }` bodies of declarations, nodes, gates, handoffs and
//!   policies) hold one entry per line, with no `,`/`;` separators. A block
//!   the author wrote on one line stays on one line, as
//!   `{ key: value, key: value }`, when it holds no comment and fits in
//!   100 columns. An empty block is `{}`. Inside blocks one blank line is
//!   kept where the author left one or more; never after `{` or before `}`.
//!   (One separator is kept where it is needed: a guard-less edge followed by
//!   a property named `when` or `else` ends with `,`.)
//! * **Lists, objects, call arguments and node target lists** stay on one
//!   line when they fit in 100 columns (`[a, b]`, `{ a: T, b?: U }`,
//!   `f(x, by: y)`) and hold no comment; otherwise they are broken one
//!   element per line, indented, each element followed by a `,` (trailing
//!   comma included). Breaking is decided outermost first: an inner list is
//!   broken only if it still does not fit on its own line.
//! * **Spacing**: `key: value`, `name?: T`, `type T = …`, one space round
//!   binary operators and arrows (`a -> b`, `x == 1`, `a and b`, `A | B`,
//!   `f => g`), none inside `()`/`[]`, one inside non-empty one-line `{ }`,
//!   `, ` between elements, `not x`, `-x`, `T?`, `a.b`, `f(x)`, `xs[0]`.
//! * **Parentheses** the author wrote are kept (once, however many were
//!   nested); parentheses the precedence requires are always present.
//! * **Long chains** of `and`, `or` or `|` that do not fit are broken
//!   before each operator, continuation lines indented 2 more:
//!   `until: a\n      and b\n      and c`. No other expression is broken
//!   across lines, and **policy formulas** always stay on one line.
//! * **Literals** are printed as written (`1_000`, `30s`, `$0.25`, string
//!   escapes).
//! * **Comments** (`//` and `/* */`) are kept, in order. A comment that
//!   started its source line stays on its own line at the indentation of
//!   what follows it (one blank line kept before it as for entries); a
//!   comment that followed code on the same line stays at the end of that
//!   line. A comment inside an expression is written in place (a `//`
//!   comment then ends the line and the expression continues on the next,
//!   indented 2 more). A comment inside a list, object, call or block forces
//!   it onto several lines. Line comments lose trailing whitespace; block
//!   comments are written verbatim.

mod equivalence;
mod printer;

use std::fmt;

use flow_diagnostics::{Diagnostic, FileId};
use flow_syntax::lexer::lex;

pub use equivalence::{equivalent, erase_spans};

/// The widest line the formatter aims for, in characters.
pub const MAX_WIDTH: usize = 100;

/// Spaces per indentation level.
pub const INDENT: usize = 2;

/// Why a source was not formatted.
#[derive(Debug, Clone, PartialEq)]
pub enum FormatError {
    /// The source has syntax errors (the parser's diagnostics, against
    /// the `FileId` given to [`format_file`], or `FileId(0)`). The
    /// formatter never rewrites a file it cannot parse.
    Syntax(Vec<Diagnostic>),
    /// The formatter produced text that does not parse back to the same
    /// tree and comments: a formatter bug. The source is left alone.
    Internal(String),
}

impl FormatError {
    /// The syntax diagnostics, if that is why formatting was refused.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        match self {
            FormatError::Syntax(diagnostics) => diagnostics,
            FormatError::Internal(_) => &[],
        }
    }
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormatError::Syntax(diagnostics) => {
                let n = diagnostics.len();
                write!(f, "not formatted: {n} syntax error{}", if n == 1 { "" } else { "s" })
            }
            FormatError::Internal(message) => write!(f, "not formatted: internal formatter error: {message}"),
        }
    }
}

impl std::error::Error for FormatError {}

/// Formats a Flow source in the canonical layout (see the crate docs).
///
/// Refuses, with the syntax diagnostics, a source that has syntax errors.
/// Never panics.
pub fn format(source: &str) -> Result<String, FormatError> {
    format_file(FileId(0), source)
}

/// [`format()`], with the diagnostics of a refusal reported against `file`
/// (so they render with the caller's `SourceDb`).
pub fn format_file(file: FileId, source: &str) -> Result<String, FormatError> {
    let parsed = flow_syntax::parse(file, source);
    if !parsed.diagnostics.is_empty() {
        return Err(FormatError::Syntax(parsed.diagnostics));
    }
    let output = printer::print(source, &parsed.file).map_err(FormatError::Internal)?;

    // Self-check: the layout changed, nothing else did.
    let reparsed = flow_syntax::parse(file, &output);
    if !reparsed.diagnostics.is_empty() {
        let first = reparsed.diagnostics.first().map(|d| d.message.as_str()).unwrap_or_default();
        return Err(FormatError::Internal(format!("the formatted text does not parse: {first}")));
    }
    if !equivalent(&parsed.file, &reparsed.file) {
        return Err(FormatError::Internal("the formatted text parses to a different tree".to_string()));
    }
    if comment_texts(source) != comment_texts(&output) {
        return Err(FormatError::Internal("the formatted text lost or reordered a comment".to_string()));
    }
    Ok(output)
}

/// Whether `source` is already canonically formatted (`flowc fmt --check`).
/// Refuses, like [`format()`], a source with syntax errors.
pub fn is_formatted(source: &str) -> Result<bool, FormatError> {
    Ok(format(source)? == source)
}

/// The comments of `source` in order, normalised as the formatter prints
/// them.
fn comment_texts(source: &str) -> Vec<String> {
    printer::comments(source, &lex(source)).into_iter().map(|c| c.text).collect()
}
