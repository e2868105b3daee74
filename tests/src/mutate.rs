//! Grammar-aware mutations of Flow sources, for the fuzzing campaign
//! (`flow-fuzz`): token swaps, deletions and duplications, splices between
//! files, deep nesting, long chains, huge literals and Unicode. Pure: the
//! same seed gives the same mutants.

use crate::generate::Rng;
use flow_syntax::lexer::{lex, Token};

/// Texts of Unicode that stress position conversion and lexing.
const UNICODE: &[&str] = &["é", "\u{1F600}", "\u{202E}", "e\u{301}", "\u{FEFF}", "日本", "\u{10FFFF}", "\u{0}", "\r\n", "\t"];

/// Operators that build chains, with an operand each.
const CHAINS: &[&str] = &[" and a.ok", " or x", " + 1", " - b", " * 2", " / c", " | \"v\"", "?", ".f", "(x)", "[0]", " or started(a)"];

/// One mutant of `source`, drawing material from `donor` too.
pub fn mutate(rng: &mut Rng, source: &str, donor: &str) -> String {
    let tokens: Vec<Token> = lex(source).into_iter().filter(|t| !t.kind.is_trivia()).collect();
    if tokens.is_empty() {
        return format!("{source}{}", splice_piece(rng, donor));
    }
    let at = tokens[rng.below(tokens.len())];
    let text = |t: Token| &source[t.span.range()];
    let (start, end) = (at.span.start as usize, at.span.end as usize);
    match rng.below(9) {
        // Delete a token.
        0 => format!("{}{}", &source[..start], &source[end..]),
        // Duplicate a token.
        1 => format!("{} {}", &source[..end], &source[start..]),
        // Swap two tokens.
        2 => {
            let other = tokens[rng.below(tokens.len())];
            let (a, b) = if other.span.start < at.span.start { (other, at) } else { (at, other) };
            if a.span.end > b.span.start || a == b {
                return source.to_string();
            }
            let (a_range, b_range) = (a.span.range(), b.span.range());
            format!("{}{}{}{}{}", &source[..a_range.start], text(b), &source[a_range.end..b_range.start], text(a), &source[b_range.end..])
        }
        // Replace a token with one from the donor.
        3 => {
            let donor_tokens: Vec<Token> = lex(donor).into_iter().filter(|t| !t.kind.is_trivia()).collect();
            if donor_tokens.is_empty() {
                return source.to_string();
            }
            let pick = donor_tokens[rng.below(donor_tokens.len())];
            format!("{}{}{}", &source[..start], &donor[pick.span.range()], &source[end..])
        }
        // Splice a run of the donor's text in.
        4 => format!("{}{}{}", &source[..start], splice_piece(rng, donor), &source[start..]),
        // Deep nesting around a token.
        5 => {
            let depth = [10, 99, 100, 101, 300, 5_000][rng.below(6)];
            let (open, close) = [("(", ")"), ("[", "]"), ("{ a: ", " }"), ("not ", ""), ("-", ""), ("always ", "")][rng.below(6)];
            format!("{}{}{}{}{}", &source[..start], open.repeat(depth), text(at), close.repeat(depth), &source[end..])
        }
        // A long chain after a token.
        6 => {
            let length = [2, 255, 256, 1_000, 20_000][rng.below(5)];
            format!("{}{}{}", &source[..end], rng.pick(CHAINS).repeat(length), &source[end..])
        }
        // A huge literal.
        7 => {
            let size = [1_000, 100_000][rng.below(2)];
            let literal = match rng.below(4) {
                0 => format!("\"{}\"", "x".repeat(size)),
                1 => "9".repeat(size),
                2 => format!("{}s", "1".repeat(size)),
                _ => "n".repeat(size),
            };
            format!("{}{}{}", &source[..start], literal, &source[end..])
        }
        // Unicode.
        _ => format!("{}{}{}", &source[..start], rng.pick(UNICODE), &source[start..]),
    }
}

fn splice_piece(rng: &mut Rng, donor: &str) -> String {
    if donor.is_empty() {
        return String::new();
    }
    let mut from = rng.below(donor.len());
    while !donor.is_char_boundary(from) {
        from -= 1;
    }
    let mut to = (from + 1 + rng.below(400)).min(donor.len());
    while !donor.is_char_boundary(to) {
        to -= 1;
    }
    donor[from..to].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutants_are_deterministic_and_differ_from_the_source() {
        let source = "workflow w {\n  start: a\n  a -> b when a.ok\n}\n";
        let donor = "agent x { provider: p }";
        let run = |seed| {
            let mut rng = Rng::new(seed);
            (0..50).map(|_| mutate(&mut rng, source, donor)).collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert!(run(7).iter().filter(|m| m.as_str() != source).count() > 40);
    }
}
