//! Per-rule tests of the normative grammar: what each rule accepts and what
//! it refuses.

use flow_grammar::{accepts, matches_rule, Rule};

fn yes(rule: Rule, inputs: &[&str]) {
    for input in inputs {
        assert!(matches_rule(rule, input), "{rule:?} should accept {input:?}");
    }
}

fn no(rule: Rule, inputs: &[&str]) {
    for input in inputs {
        assert!(!matches_rule(rule, input), "{rule:?} should refuse {input:?}");
    }
}

#[test]
fn identifiers_exclude_keywords_but_keys_do_not() {
    yes(Rule::ident, &["a", "_x", "node1", "nodes", "steps", "agent_"]);
    no(Rule::ident, &["node", "agent", "and", "1a", ""]);
    yes(Rule::key, &["node", "agent", "budget", "x"]);
}

#[test]
fn numbers_money_strings() {
    yes(Rule::number, &["1", "1_000", "2.5", "30s", "250ms", "400k", "10%", "1M"]);
    no(Rule::number, &["1.", ".5", "_1"]);
    yes(Rule::money, &["$5", "$0.25"]);
    no(Rule::money, &["$", "$.5", "5$"]);
    yes(Rule::string, &[r#""""#, r#""a b""#, r#""q\"\n""#]);
    no(Rule::string, &[r#""unterminated"#, "\"a\nb\"", r#""\q""#]);
}

#[test]
fn expressions() {
    yes(
        Rule::expr,
        &[
            "a.b.c",
            "len(xs) > 0 and not done",
            "all(s in scenes: s.has_audio)",
            "x in [\"a\", \"b\"]",
            "\"ok\" | \"fail\"",
            "{ id: string, note?: string }",
            "[Scene]?",
            "f(a, by: b,)",
            "-1 * (2 + 3) / 4",
            "all",
            "filter(c in claims: c.support > 0)",
            "map(c in sort_by(c in cs: c.score): { text: c.text })",
            "count(x in xs)",
            "f(x in xs, y)",
        ],
    );
    no(Rule::expr, &["a <", "all(x)", "f(,)", "{ a }", "a = b", "f(x in: y)", "f(x in xs:)", "f(x.y in xs: 1)"]);
}

#[test]
fn block_entries() {
    yes(Rule::property, &["timeout: 30s", "budget: { steps: 10 }", "and: 1"]);
    yes(Rule::handler, &["on BLOCK -> terminate(x)", "on approve, revise -> continue"]);
    no(Rule::handler, &["on -> x", "on a, -> x"]);
    yes(Rule::node_stmt, &["node a: agent writer", "node f: parallel [a, b]", "node j: join [a, b,] { rule: all }"]);
    no(Rule::node_stmt, &["node a: agent", "node agent: agent x"]);
    yes(Rule::gate_stmt, &["gate g: a -> b { on PASS -> continue }"]);
    no(Rule::gate_stmt, &["gate g: a -> b"]);
    yes(Rule::transfer_stmt, &["handoff a -> b", "delegate m -> w { contract: c }"]);
    yes(Rule::edge_stmt, &["a -> b", "a -> b -> c", "a -> b when x > 1", "a -> b else"]);
    no(Rule::edge_stmt, &["a", "a ->", "a -> b when"]);
    // `when:` after an edge is no guard: the edge ends and a property keyed
    // `when` follows (the production parser must agree; see differential.rs).
    no(Rule::edge_stmt, &["a -> b when: 1"]);
    // `record` starts a record only before a name; `record:` is a property
    // and `record -> b` an edge from a node named `record`.
    yes(Rule::record_stmt, &["record check { score: c.score }", "record r { }"]);
    no(Rule::record_stmt, &["record { a: 1 }", "record r", "recordx r { }"]);
    yes(Rule::block, &["{ record: 1 }", "{ record -> b }", "{ record r { a: 1 } }"]);
    yes(Rule::block, &["{ a -> b when: 1 }", "{ a -> b\n when: x > 1 }", "{ a -> b when c when: 1 }"]);
}

#[test]
fn formulas() {
    yes(
        Rule::formula,
        &[
            "never started(a)",
            "never started(compose) before outcome(g, PASS)",
            "called(deploy) => eventually decided(g, approve)",
            "started(a) until completed(b)",
            "completed(a) => within 3 steps started(b)",
            "always (started(a) => eventually completed(a)) and never failed(b)",
            "called(search, by: researcher)",
        ],
    );
    no(Rule::formula, &["never", "within steps a()", "within 3 a()", "started"]);
}

#[test]
fn files() {
    assert!(accepts(""));
    assert!(accepts("// only a comment\n"));
    assert!(accepts("import std.evidence\nimport \"x.flow\"\ntype T = string\n"));
    assert!(accepts("agent a { provider: p }\nprincipal pm: human\nworkflow w { start: a }"));
    assert!(!accepts("workflow w"));
    assert!(!accepts("agent { }"));
    assert!(!accepts("x: 1"));
}
