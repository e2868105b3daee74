//! Helpers shared by the formatter's integration tests. The tree comparison
//! here is independent of the crate's own (`flow_fmt::equivalent`): it
//! compares debug renderings of the trees with every span cut out.
#![allow(dead_code)]

use flow_diagnostics::FileId;
use flow_syntax::lexer::{lex, TokenKind};

/// The debug rendering of `source`'s syntax tree with every
/// `Span { start: …, end: … }` replaced by `Span`.
pub fn tree_without_spans(source: &str) -> String {
    let parsed = flow_syntax::parse(FileId(0), source);
    assert!(parsed.diagnostics.is_empty(), "expected a clean parse of:\n{source}");
    strip_spans(&format!("{:?}", parsed.file))
}

pub fn strip_spans(debug: &str) -> String {
    const OPEN: &str = "Span { start: ";
    let mut out = String::with_capacity(debug.len());
    let mut rest = debug;
    while let Some(i) = rest.find(OPEN) {
        out.push_str(&rest[..i]);
        out.push_str("Span");
        let after = &rest[i..];
        let close = after.find('}').expect("a span's closing brace");
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    out
}

/// The comments of `source`, in order, as the formatter normalises them
/// (line comments without trailing whitespace, block comments with LF).
pub fn comments(source: &str) -> Vec<String> {
    lex(source)
        .into_iter()
        .filter_map(|t| {
            let text = &source[t.span.range()];
            match t.kind {
                TokenKind::LineComment => Some(text.trim_end().to_string()),
                TokenKind::BlockComment => Some(text.replace("\r\n", "\n")),
                _ => None,
            }
        })
        .collect()
}

/// Formats `source`, which must parse, and checks the result is a fixed
/// point of the formatter.
pub fn format_checked(source: &str, name: &str) -> String {
    let once = flow_fmt::format(source).unwrap_or_else(|e| panic!("{name}: format failed: {e:?}\n--- source ---\n{source}"));
    let twice = flow_fmt::format(&once).unwrap_or_else(|e| panic!("{name}: formatting the output failed: {e:?}\n--- output ---\n{once}"));
    assert_eq!(once, twice, "{name}: formatting is not idempotent\n--- source ---\n{source}\n--- once ---\n{once}\n--- twice ---\n{twice}");
    once
}

/// The formatted text has the same tree (spans aside) and the same
/// comments in the same order as the source, and is laid out cleanly.
pub fn assert_preserves(source: &str, formatted: &str, name: &str) {
    assert_eq!(
        tree_without_spans(source),
        tree_without_spans(formatted),
        "{name}: the formatted text has a different tree\n--- source ---\n{source}\n--- formatted ---\n{formatted}"
    );
    assert_eq!(comments(source), comments(formatted), "{name}: comments lost or reordered\n--- formatted ---\n{formatted}");
    for (i, line) in formatted.lines().enumerate() {
        assert!(!line.ends_with([' ', '\t']), "{name}: trailing whitespace on line {}:\n{formatted}", i + 1);
        assert!(
            !line.contains('\t') || line.contains("/*") || line.contains("//") || line.contains('"'),
            "{name}: a tab on line {}",
            i + 1
        );
    }
    assert!(!formatted.contains('\r'), "{name}: CR in the output");
    assert!(
        formatted.is_empty() || formatted.ends_with('\n') && !formatted.ends_with("\n\n"),
        "{name}: the file must end with one newline"
    );
    assert!(!formatted.contains("\n\n\n"), "{name}: more than one blank line in a row:\n{formatted}");
}
