//! The function library, checked and evaluated: each function's values on
//! the test environment, its typing rules, and its errors.

use crate::eval::tests::{env, guard, PRELUDE};
use crate::eval::{eval, EvalError};
use flow_check::ir::TExprKind;
use flow_check::types::Ty;
use flow_diagnostics::SourceDb;
use serde_json::{json, Value as Json};

/// The value and type of `expr` in the test environment (it is compiled
/// as the left side of `expr == expr`, a guard).
fn typed(expr: &str) -> (Result<Json, EvalError>, Ty) {
    let guard = guard(&format!("({expr}) == ({expr})"));
    let TExprKind::Binary { lhs, .. } = guard.kind else { panic!("not a comparison: {guard:?}") };
    (eval(&lhs, &env()), lhs.ty)
}

fn value(expr: &str) -> Json {
    typed(expr).0.unwrap_or_else(|e| panic!("`{expr}` failed: {e}"))
}

fn error(expr: &str) -> String {
    match typed(expr).0 {
        Ok(v) => panic!("`{expr}` gave {v} where an error was expected"),
        Err(e) => e.message,
    }
}

/// The checker's error messages for a guard.
fn refused(condition: &str) -> Vec<String> {
    let source = format!(
        "{PRELUDE}
workflow w {{
  input: {{ topic: string, nums: [int] }}
  start: research
  node research: agent researcher {{ output: Pack }}
  node done: end ok
  research -> done when {condition}
}}
"
    );
    let mut db = SourceDb::new();
    let root = db.add("test.flow", source);
    let checked = flow_check::check_program(&mut db, root, &flow_check::NoFiles);
    let errors: Vec<String> = checked.diagnostics.iter().filter(|d| d.is_error()).map(|d| format!("{}: {}", d.code, d.message)).collect();
    assert!(!errors.is_empty(), "`{condition}` was accepted");
    errors
}

#[test]
fn binding_functions_over_a_list() {
    assert_eq!(value("map(i in research.items: i.year)"), json!([2021, 2023]));
    assert_eq!(
        value("filter(i in research.items: i.score > 0.6)"),
        json!([{ "year": 2023, "score": 0.9, "signals": ["vendor_blog", "x"] }])
    );
    assert_eq!(value("count(i in research.items: i.year >= 2021)"), json!(2));
    assert_eq!(value("flat_map(i in research.items: i.signals)"), json!(["peer_reviewed", "vendor_blog", "x"]));
    assert_eq!(value("map(i in sort_by(i in research.items: 0 - i.year): i.year)"), json!([2023, 2021]));
    assert_eq!(value("sum(i in research.items: i.year)"), json!(4044));
    assert_eq!(value("max(i in research.items: i.score)"), json!(0.9));
    assert_eq!(value("min(n in input.nums: n * 2)"), json!(2));
    assert_eq!(value("avg(n in input.nums: n)"), json!(2.0));
    // Groups in order of first appearance, each with its items.
    assert_eq!(
        value("group_by(n in [3, 1, 4, 1, 5]: n > 2)"),
        json!([{ "key": true, "items": [3, 4, 5] }, { "key": false, "items": [1, 1] }])
    );
    // The bound variable shadows a node of the same name inside the body only.
    assert_eq!(value("map(research in [1, 2]: research + 1)"), json!([2, 3]));
    // An empty list: nothing to map, count zero.
    assert_eq!(value("count(n in filter(n in input.nums: n > 9): true)"), json!(0));
}

#[test]
fn sort_by_is_stable_and_orders_strings_or_numbers() {
    assert_eq!(value("sort_by(s in [\"b\", \"a\", \"c\"]: s)"), json!(["a", "b", "c"]));
    // Equal keys keep the list's order.
    assert_eq!(
        value("map(x in sort_by(x in [{ k: 1, v: \"a\" }, { k: 0, v: \"b\" }, { k: 1, v: \"c\" }]: x.k): x.v)"),
        json!(["b", "a", "c"])
    );
    let mut env = env();
    env.insert("research".into(), json!({ "items": [{ "year": 1 }, { "year": "x" }] }));
    let expr = guard("count(i in sort_by(i in research.items: i.year): true) > 0");
    let err = eval(&expr, &env).unwrap_err();
    assert!(err.message.contains("all numbers or all strings"), "{err}");
}

#[test]
fn sets_are_distinct_values_compared_as_equality_does() {
    assert_eq!(value("distinct([1, 2, 1.0, 3, 2])"), json!([1, 2, 3]));
    assert_eq!(value("union([1, 2], [2, 3])"), json!([1, 2, 3]));
    assert_eq!(value("intersection([1, 2, 2, 3], [3, 2])"), json!([2, 3]));
    assert_eq!(value("difference([1, 2, 3, 1], [2])"), json!([1, 3]));
    assert_eq!(value("distinct([{ a: 1, b: 2 }, { b: 2, a: 1 }])"), json!([{ "a": 1, "b": 2 }]));
    assert_eq!(value("zip([1, 2, 3], [\"a\", \"b\"])"), json!([{ "first": 1, "second": "a" }, { "first": 2, "second": "b" }]));
}

#[test]
fn jaccard_of_token_sets() {
    assert_eq!(value("tokens(\"Ship it, NOW! (v2)\")"), json!(["ship", "it", "now", "v2"]));
    assert_eq!(value("jaccard(tokens(\"the cat sat\"), tokens(\"The cat ran\"))"), json!(0.5));
    assert_eq!(value("jaccard([\"a\", \"a\"], [\"a\"])"), json!(1.0));
    assert_eq!(value("jaccard([], [])"), json!(1.0));
    assert_eq!(value("jaccard([\"a\"], [\"b\"])"), json!(0.0));
}

#[test]
fn strings_split_and_match() {
    assert_eq!(value("split(\"a,b,,c\", \",\")"), json!(["a", "b", "", "c"]));
    assert_eq!(value("matches(input.topic, \"^ru\")"), json!(true));
    assert_eq!(value("matches(\"v1.2.3\", \"^v[0-9]+\\\\.[0-9]+\")"), json!(true));
    assert_eq!(value("matches(\"abc\", \"^b\")"), json!(false));
    assert!(error("split(\"abc\", \"\")").contains("non-empty separator"));
}

#[test]
fn text_renders_values_and_join_joins_strings() {
    assert_eq!(value("join(split(\"a,b,c\", \",\"), \" / \")"), json!("a / b / c"));
    assert_eq!(value("join([], \", \")"), json!(""));
    assert_eq!(
        value("text(\"as is\") + text(1) + \" \" + text(0.75) + \" \" + text(true) + \" \" + text(null)"),
        json!("as is1 0.75 true null")
    );
    assert_eq!(value("text(map(i in research.items: i.year))"), json!("[2021,2023]"));
    assert_eq!(value("join(map(i in research.items: text(i.year)), \"+\")"), json!("2021+2023"));
}

#[test]
fn numbers_round_and_clamp() {
    assert_eq!(value("round(2.5)"), json!(3));
    assert_eq!(value("round(-2.5)"), json!(-3));
    assert_eq!(value("round(0.12345, 2)"), json!(0.12));
    assert_eq!(value("round(7)"), json!(7));
    assert_eq!(value("clamp(input.ratio, 0, 1)"), json!(1));
    assert_eq!(value("clamp(0.5, 0, 1)"), json!(0.5));
    assert_eq!(value("clamp(-3, 0, 1)"), json!(0));
    assert!(error("clamp(1, 2, 0)").contains("low <= high"));
    assert!(error("round(1.5, 40)").contains("0 to 15 digits"));
    assert!(error("avg(filter(n in input.nums: n > 9))").contains("empty list"));
}

#[test]
fn records_keys_values_and_get() {
    assert_eq!(value("keys(research.items[0])"), json!(["year", "score", "signals"]));
    assert_eq!(value("values({ a: 1, b: 2 })"), json!([1, 2]));
    assert_eq!(value("get(research.items[0], \"year\")"), json!(2021));
    assert_eq!(value("get(input.nums, 7, 0)"), json!(0));
    assert_eq!(value("get(input.nums, 1)"), json!(1));
    assert_eq!(value("get(research.meta, \"source\", \"none\")"), json!("none"));
}

#[test]
fn results_have_the_types_the_reference_gives() {
    let ty = |e: &str| typed(e).1.to_string();
    assert_eq!(ty("map(i in research.items: i.year)"), "[int]");
    assert_eq!(ty("filter(i in research.items: i.year > 0)"), ty("research.items"));
    assert_eq!(ty("flat_map(i in research.items: i.signals)"), "[string]");
    assert_eq!(ty("count(i in research.items: true)"), "int");
    assert_eq!(ty("avg(input.nums)"), "float");
    assert_eq!(ty("jaccard([\"a\"], [\"b\"])"), "float");
    assert_eq!(ty("tokens(input.topic)"), "[string]");
    assert_eq!(ty("round(input.ratio)"), "int");
    assert_eq!(ty("round(input.ratio, 2)"), "float");
    assert_eq!(ty("get(research.items[0], \"signals\")"), "[string]");
    assert!(ty("group_by(i in research.items: i.year)").contains("key: int"), "{}", ty("group_by(i in research.items: i.year)"));
    assert!(ty("zip(input.nums, research.items)").starts_with("[{ first: int"), "{}", ty("zip(input.nums, research.items)"));
}

#[test]
fn the_checker_refuses_misuse() {
    let has = |condition: &str, needle: &str| {
        let errors = refused(condition);
        assert!(errors.iter().any(|e| e.contains(needle)), "`{condition}`: no error with `{needle}` in {errors:?}");
    };
    has("count(filter(i in research.items: i.year)) > 0", "must be a bool");
    has("len(map(i in input.topic: i)) > 0", "ranges over a list");
    has("len(flat_map(i in research.items: i.year)) > 0", "must be a list");
    has("len(filter(research.items)) > 0", "takes a binding");
    has("len(distinct(i in research.items: i)) > 0", "binds no variable");
    has("i in input.nums: i", "E0");
    has("matches(input.topic, \"(unclosed\")", "not a regular expression");
    has("get(research.items[0], \"yeer\") == 1", "no field `yeer`");
    has("jaccard(input.topic, input.nums) > 0", "needs a list");
    has("len(zip(input.nums)) > 0", "takes 2 arguments");
    has("clamp(input.topic, 0, 1) == 1", "bound of the same kind");
    has("len(sort_by(i in research.items: i.signals)) > 0", "a number or a string");
    has("fliter(i in research.items: true) == []", "unknown function");
    has("join(input.nums, \",\") == \"\"", "a list of strings");
    has("join(input.topic, \",\") == \"\"", "needs a list");
}
