//! The differential test between the normative pest grammar and the
//! production parser: pest accepts a file ⇔ the production parser reports
//! no syntax error. On every `.flow` file in the repository (valid and
//! invalid ones), on inputs where the two once disagreed, and on randomly
//! mutated inputs.
//!
//! The mutated inputs are drawn from a fixed seed, so every run (CI
//! included) checks the same inputs and a failure reproduces exactly; the
//! failure message names the seed. To explore other inputs, set
//! `PROPTEST_RNG_SEED=<n>` (and `PROPTEST_CASES=<n>` for more of them):
//!
//! ```text
//! for n in $(seq 1 1000); do PROPTEST_RNG_SEED=$n cargo test --release -p flow-tests --test differential || break; done
//! ```
// Tests read the repository's files: the pure-core lint does not apply.
#![allow(clippy::disallowed_methods)]

use std::fmt::Display;
use std::sync::LazyLock;

use flow_diagnostics::FileId;
use flow_tests::{corpus, relative};
use proptest::prelude::*;
use proptest::test_runner::RngSeed;

/// Whether the production parser accepts `source` as grammatical: it found
/// no error, or only E0004, a file past the implementation's nesting limits
/// (valid by the grammar, refused to keep every pass within its stack).
fn grammatical(diagnostics: &[flow_diagnostics::Diagnostic]) -> bool {
    diagnostics.iter().all(|d| d.code == flow_diagnostics::codes::TOO_DEEP)
}

fn production_accepts(source: &str) -> bool {
    flow_syntax::parse(FileId(0), source).diagnostics.is_empty()
}

fn assert_agree(source: &str, origin: impl Display) {
    let pest = flow_grammar::check(source);
    let production = flow_syntax::parse(FileId(0), source);
    let production_ok = grammatical(&production.diagnostics);
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
        assert_agree(&source, relative(path));
        if !production_accepts(&source) {
            invalid += 1;
        }
    }
    assert!(invalid > 0, "the corpus should include files with syntax errors");
}

/// Inputs on which the two parsers once disagreed, with what both must say.
const REGRESSIONS: &[(&str, bool)] = &[
    // The production parser took `when` after an edge as a guard even when
    // `:` followed; the grammar backtracks out of `edge_guard?` there, ends
    // the edge, and reads `when: …` as the next entry, a property (reserved
    // words may be property keys). Found by the mutated-input property.
    (
        "workflow w {\n start: a\n node a: agent writer { output: Scene }\n node f: parallel [a, b,]\n a -> b when: len(a.tags) > 0 and all(t in a.tags: t != \"\")\n b -> c else\n gate g: a -> b { evaluate: [predicate(not a.has_audio)]; on BLOCK, REQUIRES_DECISION -> terminate(x) }\n handoff a -> b { payload: Scene }\n delegate a -> b\n on budget_exhausted -> fallback(partial)\n policy inner: never failed(a)\n}\n",
        true,
    ),
    ("workflow w { a -> b when: 1 }", true),
    ("workflow w {\n a -> b\n when: x > 1\n}", true),
    ("workflow w { a -> b when c when: 1 }", true),
    ("workflow w { a -> b -> c when  :  1 ; d -> e }", true),
    ("workflow w { a -> b when }", false),
    ("workflow w { a -> b when when: 1 }", false),
    // `else` is always the guard: `else:` after an edge is refused by both.
    ("workflow w { a -> b else: 1 }", false),
    // The other keyword operators followed by `:` end the expression or
    // formula the same way.
    ("agent a { x: b and: 1, y: c or: 2, z: d in: 3 }", true),
    ("workflow w { policy p: never failed(a) before: 1 }", true),
    ("workflow w { policy p: started(a) until: 1 }", true),
];

#[test]
fn pest_and_production_parser_agree_on_past_disagreements() {
    for (i, &(source, valid)) in REGRESSIONS.iter().enumerate() {
        assert_agree(source, format_args!("regression case {i}"));
        assert_eq!(
            production_accepts(source),
            valid,
            "regression case {i} should be {}:\n{source}",
            if valid { "accepted" } else { "refused" }
        );
    }
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

/// The seed of the random inputs when `PROPTEST_RNG_SEED` does not set one.
const DEFAULT_SEED: u64 = 20_260_112;
/// Cases per property when `PROPTEST_CASES` does not set the number.
const DEFAULT_CASES: u32 = 30_000;

/// Proptest's configuration from the environment, with a fixed seed and
/// [`DEFAULT_CASES`] unless the environment sets them.
static CONFIG: LazyLock<ProptestConfig> = LazyLock::new(|| {
    let from_env = ProptestConfig::default();
    let cases = if std::env::var_os("PROPTEST_CASES").is_some() { from_env.cases } else { DEFAULT_CASES };
    let rng_seed = match from_env.rng_seed {
        RngSeed::Random => RngSeed::Fixed(DEFAULT_SEED),
        fixed => fixed,
    };
    ProptestConfig { cases, rng_seed, failure_persistence: None, ..from_env }
});

/// Names a random input in failure messages so that it can be reproduced.
fn random(what: &str) -> String {
    format!(
        "{what} (PROPTEST_RNG_SEED={seed}, {cases} cases; reproduce with `PROPTEST_RNG_SEED={seed} PROPTEST_CASES={cases} cargo test --release -p flow-tests --test differential`)",
        seed = CONFIG.rng_seed,
        cases = CONFIG.cases
    )
}

proptest! {
    #![proptest_config(CONFIG.clone())]

    #[test]
    fn pest_and_production_parser_agree_on_mutated_inputs(source in mutated()) {
        assert_agree(&source, LazyDisplay(|| random("a mutated input")));
    }

    #[test]
    fn pest_and_production_parser_agree_on_token_soup(tokens in proptest::collection::vec(proptest::sample::select(TOKENS), 0..24)) {
        assert_agree(&tokens.join(" "), LazyDisplay(|| random("a token sequence")));
    }
}

/// Formats its closure's result only when displayed (failure messages).
struct LazyDisplay<F>(F);

impl<F: Fn() -> String> Display for LazyDisplay<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&(self.0)())
    }
}
