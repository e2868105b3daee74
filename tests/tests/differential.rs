//! The differential test between the normative pest grammar and the
//! production parser: pest accepts a file ⇔ the production parser reports
//! no syntax error. On every `.flow` file in the repository (valid and
//! invalid ones) and on randomly mutated inputs.
// Tests read the repository's files: the pure-core lint does not apply.
#![allow(clippy::disallowed_methods)]

use flow_diagnostics::FileId;
use flow_tests::{corpus, relative};
use proptest::prelude::*;

fn production_accepts(source: &str) -> bool {
    flow_syntax::parse(FileId(0), source).diagnostics.is_empty()
}

fn assert_agree(source: &str, origin: &str) {
    let pest = flow_grammar::check(source);
    let production = flow_syntax::parse(FileId(0), source);
    let production_ok = production.diagnostics.is_empty();
    assert_eq!(
        pest.is_ok(),
        production_ok,
        "pest and the production parser disagree on {origin}:\n--- source ---\n{source}\n--- pest ---\n{:?}\n--- production ---\n{:#?}",
        pest.err(),
        production.diagnostics.iter().map(|d| &d.message).collect::<Vec<_>>()
    );
}

#[test]
fn pest_and_production_parser_agree_on_the_corpus() {
    let files = corpus();
    assert!(files.len() >= 10, "the corpus should hold the examples, stdlib and UI tests; found {}", files.len());
    let mut invalid = 0;
    for path in &files {
        let source = std::fs::read_to_string(path).expect("corpus files are readable");
        assert_agree(&source, &relative(path));
        if !production_accepts(&source) {
            invalid += 1;
        }
    }
    assert!(invalid > 0, "the corpus should include files with syntax errors");
}

/// Fragments that mutations recombine: every construct of the language.
const SNIPPETS: &[&str] = &[
    "import std.evidence\n",
    "import \"shared/types.flow\"\n",
    "type Scene = { id: string, note?: string, tags: [string], has_audio: bool? }\n",
    "type Verdict = \"pass\" | \"fail\"\n",
    "agent writer { provider: local, tools: [search], can_delegate: false, and: 1 }\n",
    "tool search: command { argv: [\"search\", \"{query}\"], timeout: 30s, cost: $0.25, rate: 10 / 1m }\n",
    "principal pm: human\n",
    "machine Task { initial: PENDING; PENDING -> DISPATCHED -> REVIEW }\n",
    "workflow w {\n start: a\n node a: agent writer { output: Scene }\n node f: parallel [a, b,]\n a -> b when len(a.tags) > 0 and all(t in a.tags: t != \"\")\n b -> c else\n gate g: a -> b { evaluate: [predicate(not a.has_audio)]; on BLOCK, REQUIRES_DECISION -> terminate(x) }\n handoff a -> b { payload: Scene }\n delegate a -> b\n on budget_exhausted -> fallback(partial)\n policy inner: never failed(a)\n}\n",
    "policy p: never started(c) before outcome(g, PASS) { response: halt }\n",
    "policy q: called(deploy, by: coder) => within 3 steps decided(g, approve) or (started(a) until completed(b))\n",
    "// comment\n/* block */\n",
];

/// Tokens that mutations insert.
const TOKENS: &[&str] = &[
    "{", "}", "(", ")", "[", "]", ",", ";", ":", ".", "?", "|", "->", "=>", "=", "==", "!=", "<", "<=", ">", ">=", "+", "-", "*", "/",
    "node", "gate", "on", "when", "else", "and", "or", "not", "in", "all", "any", "never", "before", "until", "within", "steps", "x",
    "agent", "1", "30s", "$1", "\"s\"", "\n", " ", "!", "\"", "/*",
];

pub fn mutated() -> impl Strategy<Value = String> {
    let base = proptest::collection::vec(proptest::sample::select(SNIPPETS), 1..4).prop_map(|parts| parts.concat());
    let edits = proptest::collection::vec((0usize..4, any::<prop::sample::Index>(), proptest::sample::select(TOKENS)), 0..4);
    (base, edits).prop_map(|(mut source, edits)| {
        for (kind, at, token) in edits {
            let mut boundaries: Vec<usize> = source.char_indices().map(|(i, _)| i).collect();
            boundaries.push(source.len());
            let position = boundaries[at.index(boundaries.len())];
            match kind {
                0 => source.insert_str(position, token),
                1 => {
                    // Delete a run of up to 6 characters.
                    let end = boundaries.iter().copied().find(|&b| b >= position + 6).unwrap_or(source.len());
                    source.replace_range(position..end, "");
                }
                2 => source.insert_str(position, &format!(" {token} ")),
                _ => {
                    let end = boundaries.iter().copied().find(|&b| b > position).unwrap_or(source.len());
                    source.replace_range(position..end, token);
                }
            }
        }
        source
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn pest_and_production_parser_agree_on_mutated_inputs(source in mutated()) {
        assert_agree(&source, "a mutated input");
    }

    #[test]
    fn pest_and_production_parser_agree_on_token_soup(tokens in proptest::collection::vec(proptest::sample::select(TOKENS), 0..24)) {
        assert_agree(&tokens.join(" "), "a token sequence");
    }
}
