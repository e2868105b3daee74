//! Property tests over generated programs: random items, entries,
//! expressions and formulas, with random parentheses, separators, line
//! breaks, blank lines and comments between the tokens. On every generated
//! program that parses, formatting is idempotent and keeps the tree and the
//! comments; on every one that does not, `format` refuses.

mod common;

use common::{assert_preserves, format_checked};
use flow_diagnostics::FileId;
use proptest::prelude::*;

/// A program as a list of tokens, joined later with random trivia.
type Tokens = Vec<String>;

fn toks(parts: &[&str]) -> Tokens {
    parts.iter().map(|s| s.to_string()).collect()
}

fn join(parts: Vec<Tokens>) -> Tokens {
    parts.into_iter().flatten().collect()
}

fn name() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["a", "b", "research", "x_1", "steps", "_t", "Scene", "a_rather_long_identifier_that_forces_lines_to_wrap"])
        .prop_map(str::to_string)
}

/// Property keys and field names: any word, keywords included.
fn key() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "provider",
        "tools",
        "when",
        "else",
        "and",
        "in",
        "until",
        "agent",
        "on",
        "x",
        "another_quite_long_property_key",
    ])
    .prop_map(str::to_string)
}

fn leaf() -> impl Strategy<Value = Tokens> {
    prop_oneof![
        name().prop_map(|n| vec![n]),
        prop::sample::select(vec![
            "1",
            "30s",
            "1_000",
            "2.50",
            "10%",
            "400k",
            "$5",
            "$0.25",
            "\"s\"",
            "\"a\\\"b\\n\"",
            "true",
            "false",
            "null",
            "all",
            "any",
            "\"a string literal long enough to need a line of its own\""
        ])
        .prop_map(|s| vec![s.to_string()]),
    ]
}

fn maybe_parens(inner: Tokens, parens: bool) -> Tokens {
    if parens {
        join(vec![toks(&["("]), inner, toks(&[")"])])
    } else {
        inner
    }
}

/// Comma-separated `items` with an optional trailing comma.
fn comma_list(items: Vec<Tokens>, trailing: bool) -> Tokens {
    let mut out = Vec::new();
    let n = items.len();
    for (i, item) in items.into_iter().enumerate() {
        out.extend(item);
        if i + 1 < n || trailing {
            out.push(",".to_string());
        }
    }
    out
}

fn expr() -> impl Strategy<Value = Tokens> {
    leaf().prop_recursive(4, 40, 4, |inner| {
        let op = prop::sample::select(vec!["|", "or", "and", "==", "!=", "<", "<=", ">", ">=", "in", "+", "-", "*", "/"]);
        prop_oneof![
            (inner.clone(), op, inner.clone(), any::<bool>(), any::<bool>()).prop_map(|(l, op, r, pl, pr)| join(vec![
                maybe_parens(l, pl),
                toks(&[op]),
                maybe_parens(r, pr)
            ])),
            (inner.clone(), any::<bool>()).prop_map(|(e, p)| join(vec![toks(&["not"]), maybe_parens(e, p)])),
            (inner.clone(), any::<bool>()).prop_map(|(e, p)| join(vec![toks(&["-"]), maybe_parens(e, p)])),
            (inner.clone(), key()).prop_map(|(e, k)| join(vec![maybe_parens(e, true), toks(&[".", &k])])),
            (name(), prop::collection::vec((prop::option::of(name()), inner.clone()), 0..3), any::<bool>()).prop_map(|(f, args, t)| {
                let args = args
                    .into_iter()
                    .map(|(n, v)| match n {
                        Some(n) => join(vec![toks(&[&n, ":"]), v]),
                        None => v,
                    })
                    .collect();
                join(vec![toks(&[&f, "("]), comma_list(args, t), toks(&[")"])])
            }),
            (inner.clone(), inner.clone()).prop_map(|(b, i)| join(vec![maybe_parens(b, true), toks(&["["]), i, toks(&["]"])])),
            inner.clone().prop_map(|e| join(vec![maybe_parens(e, true), toks(&["?"])])),
            (prop::collection::vec(inner.clone(), 0..4), any::<bool>()).prop_map(|(items, t)| join(vec![
                toks(&["["]),
                comma_list(items, t),
                toks(&["]"])
            ])),
            (prop::collection::vec((key(), any::<bool>(), inner.clone()), 0..4), any::<bool>()).prop_map(|(fields, t)| {
                let fields = fields
                    .into_iter()
                    .map(|(k, opt, v)| join(vec![toks(&[&k]), if opt { toks(&["?"]) } else { vec![] }, toks(&[":"]), v]))
                    .collect();
                join(vec![toks(&["{"]), comma_list(fields, t), toks(&["}"])])
            }),
            (prop::sample::select(vec!["all", "any"]), name(), inner.clone(), inner.clone()).prop_map(|(q, v, l, p)| join(vec![
                toks(&[q, "(", &v, "in"]),
                l,
                toks(&[":"]),
                p,
                toks(&[")"])
            ])),
            inner.prop_map(|e| maybe_parens(e, true)),
        ]
    })
}

fn formula() -> impl Strategy<Value = Tokens> {
    let atom = prop_oneof![
        name().prop_map(|n| toks(&["started", "(", &n, ")"])),
        (name(), name()).prop_map(|(a, b)| toks(&["called", "(", &a, ",", "by", ":", &b, ")"])),
        Just(toks(&["outcome", "(", "g", ",", "\"PASS\"", ",", "3", ",", ")"])),
        prop::sample::select(vec!["true", "false"]).prop_map(|b| vec![b.to_string()]),
    ];
    atom.prop_recursive(4, 24, 2, |inner| {
        prop_oneof![
            (prop::sample::select(vec!["not", "always", "eventually", "never"]), inner.clone(), any::<bool>())
                .prop_map(|(kw, f, p)| join(vec![toks(&[kw]), maybe_parens(f, p)])),
            (inner.clone(), inner.clone(), any::<bool>(), any::<bool>()).prop_map(|(a, b, pa, pb)| join(vec![
                toks(&["never"]),
                maybe_parens(a, pa),
                toks(&["before"]),
                maybe_parens(b, pb)
            ])),
            (inner.clone(), any::<bool>()).prop_map(|(f, p)| join(vec![toks(&["within", "3", "steps"]), maybe_parens(f, p)])),
            (inner.clone(), prop::sample::select(vec!["until", "and", "or", "=>"]), inner.clone(), any::<bool>(), any::<bool>())
                .prop_map(|(a, op, b, pa, pb)| join(vec![maybe_parens(a, pa), toks(&[op]), maybe_parens(b, pb)])),
        ]
    })
}

fn block(entry: BoxedStrategy<Tokens>) -> impl Strategy<Value = Tokens> {
    prop::collection::vec((entry, prop::sample::select(vec!["", ",", ";"])), 0..4).prop_map(|entries| {
        let mut out = toks(&["{"]);
        for (entry, sep) in entries {
            out.extend(entry);
            if !sep.is_empty() {
                out.push(sep.to_string());
            }
        }
        out.push("}".to_string());
        out
    })
}

fn entry() -> BoxedStrategy<Tokens> {
    let simple = prop_oneof![
        (key(), expr()).prop_map(|(k, v)| join(vec![toks(&[&k, ":"]), v])),
        (prop::collection::vec(name(), 1..3), expr()).prop_map(|(events, action)| {
            let mut out = toks(&["on"]);
            for (i, event) in events.into_iter().enumerate() {
                if i > 0 {
                    out.push(",".to_string());
                }
                out.push(event);
            }
            out.push("->".to_string());
            join(vec![out, action])
        }),
        (
            prop::collection::vec(name(), 2..4),
            prop_oneof![Just(None), Just(Some(vec!["else".to_string()])), expr().prop_map(|e| Some(join(vec![toks(&["when"]), e])))]
        )
            .prop_map(|(path, guard)| {
                let mut out = Vec::new();
                for (i, node) in path.into_iter().enumerate() {
                    if i > 0 {
                        out.push("->".to_string());
                    }
                    out.push(node);
                }
                join(vec![out, guard.unwrap_or_default()])
            }),
        (name(), formula()).prop_map(|(n, f)| join(vec![toks(&["policy", &n, ":"]), f])),
        (
            name(),
            prop::sample::select(vec!["agent", "end", "loop"]),
            prop_oneof![
                name().prop_map(|n| vec![n]),
                prop::collection::vec(name(), 0..3).prop_map(|ns| join(vec![
                    toks(&["["]),
                    comma_list(ns.into_iter().map(|n| vec![n]).collect(), false),
                    toks(&["]"])
                ]))
            ]
        )
            .prop_map(|(n, kind, target)| join(vec![toks(&["node", &n, ":", kind]), target])),
    ];
    simple
        .prop_recursive(2, 16, 3, |inner| {
            let inner = inner.boxed();
            prop_oneof![
                (name(), block(inner.clone())).prop_map(|(n, b)| join(vec![toks(&["node", &n, ":", "agent", "x"]), b])),
                (name(), block(inner.clone())).prop_map(|(n, b)| join(vec![toks(&["gate", &n, ":", "a", "->", "b"]), b])),
                (prop::sample::select(vec!["handoff", "delegate"]), block(inner))
                    .prop_map(|(kw, b)| join(vec![toks(&[kw, "a", "->", "b"]), b])),
            ]
        })
        .boxed()
}

fn item() -> impl Strategy<Value = Tokens> {
    prop_oneof![
        Just(toks(&["import", "std", ".", "evidence"])),
        Just(toks(&["import", "\"shared/types.flow\""])),
        (name(), expr()).prop_map(|(n, e)| join(vec![toks(&["type", &n, "="]), e])),
        (prop::sample::select(vec!["agent", "workflow", "budget"]), name(), block(entry()))
            .prop_map(|(kw, n, b)| join(vec![toks(&[kw, &n]), b])),
        (name(), name()).prop_map(|(n, v)| toks(&["tool", &n, ":", &v])),
        (name(), formula(), prop::option::of(block(entry()))).prop_map(|(n, f, b)| join(vec![
            toks(&["policy", &n, ":"]),
            f,
            b.unwrap_or_default()
        ])),
    ]
}

/// What goes between two tokens: never nothing, sometimes a comment.
fn trivia() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        " ",
        " ",
        " ",
        " ",
        " ",
        " ",
        "\n",
        "\n  ",
        "\n\n\n",
        "\r\n",
        "\t",
        " /* c */ ",
        "/*m\n  l*/",
        " // c\n",
        "\n// own\n",
    ])
}

fn program() -> impl Strategy<Value = String> {
    prop::collection::vec(item(), 0..4)
        .prop_map(join)
        .prop_flat_map(|tokens| {
            let n = tokens.len() + 1;
            (Just(tokens), prop::collection::vec(trivia(), n))
        })
        .prop_map(|(tokens, trivia)| {
            let mut out = String::from(trivia[0].trim_start_matches(' '));
            for (token, trivia) in tokens.iter().zip(&trivia[1..]) {
                out.push_str(token);
                out.push_str(trivia);
            }
            out
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]

    #[test]
    fn formatting_generated_programs_is_idempotent_and_preserves_them(source in program()) {
        let parsed = flow_syntax::parse(FileId(0), &source);
        if parsed.diagnostics.is_empty() {
            let formatted = format_checked(&source, "generated");
            assert_preserves(&source, &formatted, "generated");
        } else {
            prop_assert!(matches!(flow_fmt::format(&source), Err(flow_fmt::FormatError::Syntax(_))));
        }
    }

    /// Arbitrary bytes: never a panic, and any output is a fixed point.
    #[test]
    fn format_never_panics(source in "[ -~\n]{0,200}") {
        if let Ok(formatted) = flow_fmt::format(&source) {
            prop_assert_eq!(flow_fmt::format(&formatted), Ok(formatted.clone()));
        }
    }
}

/// The generator must mostly produce programs that parse, or the property
/// above would test little.
#[test]
fn most_generated_programs_parse() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = program();
    let (mut clean, total) = (0, 300);
    for _ in 0..total {
        let source = strategy.new_tree(&mut runner).expect("a program").current();
        if flow_syntax::parse(FileId(0), &source).diagnostics.is_empty() {
            clean += 1;
        }
    }
    assert!(clean * 3 >= total, "only {clean} of {total} generated programs parse");
}
