//! The canonical layout, case by case: each input formats to exactly the
//! expected text, which is itself a fixed point and keeps tree and comments.

mod common;

use common::{assert_preserves, format_checked};

#[track_caller]
fn check(input: &str, expected: &str) {
    let formatted = format_checked(input, "input");
    assert_eq!(formatted, expected, "\n--- got ---\n{formatted}\n--- expected ---\n{expected}");
    assert_preserves(input, &formatted, "input");
}

#[test]
fn empty_and_blank_inputs_format_to_nothing() {
    check("", "");
    check("   \n\n\t \r\n", "");
}

#[test]
fn a_file_with_only_comments() {
    check("// one\n\n\n\n// two\n/* three */   \n", "// one\n\n// two\n/* three */\n");
    check("  /* only */", "/* only */\n");
    check("// no newline at the end", "// no newline at the end\n");
}

#[test]
fn crlf_input_becomes_lf() {
    check(
        "// header\r\nagent a {\r\n  provider: local // trailing\r\n\r\n\r\n  tools: [x]\r\n}\r\n",
        "// header\nagent a {\n  provider: local // trailing\n\n  tools: [x]\n}\n",
    );
}

#[test]
fn entries_go_one_per_line_without_separators() {
    check(
        "agent a {provider:local;tools:[x,y],\ncontext:isolated,}",
        "agent a {\n  provider: local\n  tools: [x, y]\n  context: isolated\n}\n",
    );
}

#[test]
fn a_short_block_written_on_one_line_stays_on_one_line() {
    check("agent a {provider: local; tools: [x]}\n", "agent a { provider: local, tools: [x] }\n");
    check("agent a {\n}\nagent b {   }\n", "agent a {}\nagent b {}\n");
    // Too long for one line: one entry per line.
    let long = format!("agent a {{ provider: local, instructions: \"{}\" }}\n", "x".repeat(80));
    check(&long, &format!("agent a {{\n  provider: local\n  instructions: \"{}\"\n}}\n", "x".repeat(80)));
}

#[test]
fn operators_and_arrows_are_spaced() {
    check(
        "workflow w{start:a\nnode a:agent x\nnode b:end done\na->b when x.n==1 and not(y in z)or -n*2<=m-1\nb->a else\non A,B->goto(a)}",
        "workflow w {\n  start: a\n  node a: agent x\n  node b: end done\n  a -> b when x.n == 1 and not (y in z) or -n * 2 <= m - 1\n  b -> a else\n  on A, B -> goto(a)\n}\n",
    );
    check("type T={a:int,b?:string|null,c:[T]?}", "type T = { a: int, b?: string | null, c: [T]? }\n");
}

#[test]
fn policy_formulas_stay_on_one_line() {
    let input = "policy p:\n  never started(a)\n  before (outcome(g, PASS)\n  or decided(g, approve))\n{ response: halt }\n";
    check(input, "policy p: never started(a) before (outcome(g, PASS) or decided(g, approve)) { response: halt }\n");
    check(
        "policy q: started(a)=>within 2 steps (always b() until c(by: x, \"s\", 3))",
        "policy q: started(a) => within 2 steps (always b() until c(by: x, \"s\", 3))\n",
    );
}

#[test]
fn needed_parentheses_are_kept_and_authors_are_not_doubled() {
    check("type T = ((a | b))?", "type T = (a | b)?\n");
    check("type T = -(-x)", "type T = -(-x)\n");
    check("policy p: never (never a()) before b()", "policy p: never (never a()) before b()\n");
    check("type T = (all)(x)", "type T = (all)(x)\n");
    check("type T = not a == b and (not c) in d", "type T = not a == b and (not c) in d\n");
}

#[test]
fn top_level_items_are_separated_but_grouped_one_liners_stay_together() {
    check(
        "import std.evidence\nimport \"x.flow\"\ntype A = int\ntype B = string\nagent a {\n  provider: local\n}\nagent b { provider: local }\nagent c { provider: local }\n\n\n\npolicy p: started(a)\npolicy q: started(b)",
        "import std.evidence\nimport \"x.flow\"\ntype A = int\ntype B = string\n\nagent a {\n  provider: local\n}\n\nagent b { provider: local }\nagent c { provider: local }\n\npolicy p: started(a)\npolicy q: started(b)\n",
    );
}

#[test]
fn blank_lines_between_entries_are_kept_at_most_one() {
    check(
        "workflow w {\n\n\n  start: a\n\n\n\n  // nodes\n  node a: end x\n  node b: end y\n\n}\n",
        "workflow w {\n  start: a\n\n  // nodes\n  node a: end x\n  node b: end y\n}\n",
    );
}

#[test]
fn comments_stay_where_they_were() {
    let input = "\
// header

/* block
   header */
agent a { // after the brace
  // before provider
  provider: local // trailing
  tools: [x] /* trailing block */

  // before the closing brace
}
// between items
type T = int // after an item
// at the end
";
    let expected = "\
// header

/* block
   header */
agent a { // after the brace
  // before provider
  provider: local // trailing
  tools: [x] /* trailing block */

  // before the closing brace
}

// between items
type T = int // after an item
// at the end
";
    check(input, expected);
}

#[test]
fn comments_inside_expressions_are_kept_in_order() {
    check("type T = a /* x */ | b", "type T = a | /* x */ b\n");
    // After the opening bracket, on its line: stays on the opener's line.
    check("type T = f(/* x */ a)", "type T = f( /* x */\n  a,\n)\n");
    check("type T = a | // why\n  b", "type T = a | // why\n  b\n");
    check("policy p: started(/* x */ a) // y", "policy p: started(/* x */ a) // y\n");
}

#[test]
fn a_comment_inside_a_list_breaks_it() {
    check("agent a { tools: [x, // first\n y] }", "agent a {\n  tools: [\n    x, // first\n    y,\n  ]\n}\n");
    check(
        "type T = {\n  // leading\n  a: int,\n\n  b: int, // trailing\n  // last\n}",
        "type T = {\n  // leading\n  a: int,\n\n  b: int, // trailing\n  // last\n}\n",
    );
}

#[test]
fn short_lists_and_objects_stay_inline_and_long_ones_break() {
    check("type T = {\n  a: int,\n  b: [\n    string,\n  ],\n}", "type T = { a: int, b: [string] }\n");
    let items: Vec<String> = (0..12).map(|i| format!("\"item_number_{i}\"")).collect();
    let input = format!("agent a {{\n  names: [{}]\n}}\n", items.join(", "));
    let expected = format!("agent a {{\n  names: [\n{}  ]\n}}\n", items.iter().map(|i| format!("    {i},\n")).collect::<String>());
    check(&input, &expected);
}

#[test]
fn nested_lists_break_outermost_first() {
    let inner = |n: usize| format!("{{ zone: zone_{n}, below: {n}0%, action: compress_context_now }}");
    let input = format!("budget b {{\n  zones: [{}, {}, {}]\n}}\n", inner(1), inner(2), inner(3));
    let expected = format!("budget b {{\n  zones: [\n    {},\n    {},\n    {},\n  ]\n}}\n", inner(1), inner(2), inner(3));
    check(&input, &expected);
}

#[test]
fn long_calls_break_their_arguments() {
    let arg = "a".repeat(50);
    check(
        &format!("agent x {{ check: predicate(len({arg}) > 0, other({arg})) }}"),
        &format!("agent x {{\n  check: predicate(\n    len({arg}) > 0,\n    other({arg}),\n  )\n}}\n"),
    );
}

#[test]
fn long_boolean_chains_break_before_each_operator() {
    let cond = |n: usize| format!("synthesis.consensus.value_{n} >= 0.75");
    let input = format!("workflow w {{\n  node m: loop [a] {{\n    until: {} and {} and {}\n  }}\n}}\n", cond(1), cond(2), cond(3));
    let expected =
        format!("workflow w {{\n  node m: loop [a] {{\n    until: {}\n      and {}\n      and {}\n  }}\n}}\n", cond(1), cond(2), cond(3));
    check(&input, &expected);
}

#[test]
fn literals_are_printed_as_written() {
    check(
        "budget b { tokens: 1_000k, cost: $0.25, s: \"a\\\"b\\n\", f: 2.50, p: 10% }",
        "budget b { tokens: 1_000k, cost: $0.25, s: \"a\\\"b\\n\", f: 2.50, p: 10% }\n",
    );
    check("type T = { \"quoted key\": int }", "type T = { \"quoted key\": int }\n");
}

#[test]
fn an_edge_before_a_when_property_keeps_its_separator() {
    check("workflow w {\n  a -> b;\n  when: 1\n}", "workflow w {\n  a -> b,\n  when: 1\n}\n");
}

#[test]
fn syntax_errors_are_refused_with_their_diagnostics() {
    for source in ["agent a {", "agent a { provider: }", "type = 1", "\"unterminated", "agent a { x: § }"] {
        match flow_fmt::format(source) {
            Err(flow_fmt::FormatError::Syntax(diagnostics)) => assert!(!diagnostics.is_empty(), "{source}"),
            other => panic!("{source:?} should be refused, got {other:?}"),
        }
    }
    assert!(flow_fmt::is_formatted("agent a {\n").is_err());
}

#[test]
fn is_formatted_reports_canonical_text() {
    assert_eq!(flow_fmt::is_formatted("agent a { provider: local }\n"), Ok(true));
    assert_eq!(flow_fmt::is_formatted("agent a {provider: local}"), Ok(false));
}
