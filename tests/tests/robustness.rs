//! Bad input never panics or hangs: any byte sequence gets diagnostics.
//! Also the lexer round trip: tokens concatenate back to the input.
// Tests read the repository's files: the pure-core lint does not apply.
#![allow(clippy::disallowed_methods)]

use flow_diagnostics::{FileId, SourceDb};
use flow_tests::{corpus, relative};
use proptest::prelude::*;

fn check_source(source: &str) {
    let mut db = SourceDb::new();
    let root = db.add("input.flow", source.to_string());
    let checked = flow_check::check_program(&mut db, root, &flow_check::NoFiles);
    // Rendering must not fail either, whatever the spans.
    let _ = flow_diagnostics::render::render_human(&db, &checked.diagnostics);
    let _ = flow_diagnostics::render::to_json(&db, &checked.diagnostics, Vec::new(), Vec::new());
}

fn round_trips(source: &str) -> bool {
    let tokens = flow_syntax::lexer::lex(source);
    let text: String = tokens.iter().map(|t| &source[t.span.range()]).collect();
    let contiguous = tokens.windows(2).all(|w| w[0].span.end == w[1].span.start);
    text == source && contiguous
}

#[test]
fn lexer_round_trips_every_corpus_file() {
    for path in corpus() {
        let source = std::fs::read_to_string(&path).expect("readable");
        assert!(round_trips(&source), "lexer round trip fails on {}", relative(&path));
    }
}

#[test]
fn every_corpus_file_checks_without_panicking() {
    for path in corpus() {
        let source = std::fs::read_to_string(&path).expect("readable");
        check_source(&source);
    }
}

/// Inputs made of Flow-ish fragments, so that random cases reach deep into
/// the parser and the checker rather than failing at the first byte.
fn flowish() -> impl Strategy<Value = String> {
    let fragments = prop::sample::select(vec![
        "agent ",
        "tool ",
        "workflow ",
        "node ",
        "gate ",
        "policy ",
        "type ",
        "import ",
        "machine ",
        "budget ",
        "contract ",
        "a",
        "b",
        "x",
        "std.evidence",
        ": ",
        "{",
        "}",
        "(",
        ")",
        "[",
        "]",
        ",",
        ";",
        "->",
        "=>",
        "=",
        "==",
        "<",
        ">",
        "?",
        "|",
        ".",
        "+",
        "-",
        "*",
        "/",
        "when ",
        "else ",
        "on ",
        "and ",
        "or ",
        "not ",
        "in ",
        "all(",
        "any(",
        "never ",
        "before ",
        "within 3 steps ",
        "until ",
        "30s ",
        "400k ",
        "10% ",
        "$5 ",
        "\"s\" ",
        "\"",
        "\n",
        " ",
        "//c\n",
        "/*",
        "*/",
        "é",
        "\u{0}",
        "output: ",
        "provider: ",
        "start: ",
        "evaluate: [predicate(",
        "started(",
        "schema(\"x.json\")",
        "len(",
        "args: {",
    ]);
    prop::collection::vec(fragments, 0..60).prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let source = String::from_utf8_lossy(&bytes).into_owned();
        prop_assert!(round_trips(&source));
        check_source(&source);
    }

    #[test]
    fn flowish_inputs_never_panic(source in flowish()) {
        prop_assert!(round_trips(&source));
        check_source(&source);
    }

    #[test]
    fn truncated_examples_never_panic(cut in 0usize..100_000, which in 0usize..1000) {
        let files = corpus();
        let path = &files[which % files.len()];
        let source = std::fs::read_to_string(path).expect("readable");
        let mut end = cut % (source.len() + 1);
        while !source.is_char_boundary(end) {
            end -= 1;
        }
        check_source(&source[..end]);
        let parsed = flow_syntax::parse(FileId(0), &source[..end]);
        // A prefix of a valid file either parses or reports where it stops.
        let _ = parsed.diagnostics.len();
    }
}
