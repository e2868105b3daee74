//! Evaluating checked expressions over artifacts.
//!
//! Artifacts are JSON values: numbers for `int`, `float`, `money`,
//! `duration` (milliseconds) and `percent` (a fraction, `10%` is 0.1);
//! strings for enums; objects for records; arrays for lists. Evaluation is
//! total: a wrong-shaped artifact gives an [`EvalError`] naming the operation
//! and the offending value's kind, never a panic.

use flow_check::ir::{BinOp, Quantifier, TExpr, TExprKind, Value};
use flow_check::types::Ty;
use serde_json::{Map, Number, Value as Json};
use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt;

mod library;
pub use library::tokens;

/// The variables of an expression: node names (their outputs), `input`,
/// `payload`, `output`, `task`, and quantifier variables.
///
/// A name that is not bound evaluates to `null`: a node that has not run
/// yet has no output, so `exists(review)` is false rather than an error.
pub type Env = indexmap::IndexMap<String, Json, rustc_hash::FxBuildHasher>;

/// Why an expression could not be evaluated.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalError {
    /// What went wrong, naming the operation and the offending value's kind.
    pub message: String,
}

impl EvalError {
    pub fn new(message: impl Into<String>) -> EvalError {
        EvalError { message: message.into() }
    }
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for EvalError {}

type Result<T> = std::result::Result<T, EvalError>;

/// Evaluates `expr` in `env`.
pub fn eval(expr: &TExpr, env: &Env) -> std::result::Result<Json, EvalError> {
    eval_in(expr, &Scope { env, var: None, parent: None }).map(Cow::into_owned)
}

/// Evaluates `expr` in `env` as a condition: the result must be a bool.
pub fn eval_bool(expr: &TExpr, env: &Env) -> std::result::Result<bool, EvalError> {
    match eval_in(expr, &Scope { env, var: None, parent: None })?.as_ref() {
        Json::Bool(b) => Ok(*b),
        other => Err(EvalError::new(format!("a condition must be a bool, got {}", kind(other)))),
    }
}

static NULL: Json = Json::Null;

/// The environment plus the quantifier variables bound around an
/// expression, innermost first. Binding a variable borrows the element
/// rather than copying the environment.
struct Scope<'s> {
    env: &'s Env,
    var: Option<(&'s str, &'s Json)>,
    parent: Option<&'s Scope<'s>>,
}

impl<'s> Scope<'s> {
    fn lookup(&self, name: &str) -> &'s Json {
        match self.var {
            Some((var, value)) if var == name => value,
            _ => match self.parent {
                Some(parent) => parent.lookup(name),
                None => self.env.get(name).unwrap_or(&NULL),
            },
        }
    }
}

/// Evaluates `expr`, borrowing from the scope where it can (variables and
/// paths into them), so guards over large artifacts copy nothing.
fn eval_in<'s>(expr: &TExpr, scope: &Scope<'s>) -> Result<Cow<'s, Json>> {
    flow_syntax::stack::guarded(|| eval_in_level(expr, scope))
}

fn eval_in_level<'s>(expr: &TExpr, scope: &Scope<'s>) -> Result<Cow<'s, Json>> {
    let owned = match &expr.kind {
        TExprKind::Literal { value } => {
            if expr.ty == Ty::Null {
                Json::Null
            } else {
                value_to_json(value)
            }
        }
        TExprKind::Var { name } => return Ok(Cow::Borrowed(scope.lookup(name))),
        TExprKind::Field { base, name } => {
            return match eval_in(base, scope)? {
                Cow::Borrowed(base) => field(base, name).map(Cow::Borrowed),
                Cow::Owned(base) => field(&base, name).map(|v| Cow::Owned(v.clone())),
            };
        }
        TExprKind::Index { base, index } => {
            let base = eval_in(base, scope)?;
            let index = eval_in(index, scope)?;
            return match base {
                Cow::Borrowed(base) => element(base, &index).map(Cow::Borrowed),
                Cow::Owned(base) => element(&base, &index).map(|v| Cow::Owned(v.clone())),
            };
        }
        TExprKind::Call { function, args } if function == "if_else" && args.len() == 3 => return if_else(args, scope),
        TExprKind::Call { function, args } => {
            let values = args.iter().map(|a| eval_in(a, scope)).collect::<Result<Vec<_>>>()?;
            let values: Vec<&Json> = values.iter().map(Cow::as_ref).collect();
            call(function, &values)?
        }
        TExprKind::Not { operand } => match eval_in(operand, scope)?.as_ref() {
            Json::Bool(b) => Json::Bool(!b),
            other => return Err(EvalError::new(format!("`not` expects a bool, got {}", kind(other)))),
        },
        TExprKind::Neg { operand } => match eval_in(operand, scope)?.as_ref() {
            Json::Number(n) => match n.as_i64().and_then(i64::checked_neg) {
                Some(i) => Json::from(i),
                None => float("`-`", -to_f64(n))?,
            },
            other => return Err(EvalError::new(format!("`-` expects a number, got {}", kind(other)))),
        },
        TExprKind::Binary { op, lhs, rhs } => binary(*op, lhs, rhs, scope)?,
        TExprKind::List { items } => {
            Json::Array(items.iter().map(|i| eval_in(i, scope).map(Cow::into_owned)).collect::<Result<Vec<Json>>>()?)
        }
        TExprKind::Record { fields } => {
            let mut map = Map::new();
            for (name, value) in fields {
                map.insert(name.clone(), eval_in(value, scope)?.into_owned());
            }
            Json::Object(map)
        }
        TExprKind::Quantified { quantifier, var, list, predicate } => {
            let want_all = *quantifier == Quantifier::All;
            let list = eval_in(list, scope)?;
            let Json::Array(items) = list.as_ref() else {
                return Err(EvalError::new(format!("`{quantifier}` ranges over a list, got {}", kind(&list))));
            };
            let mut result = want_all;
            for item in items {
                let inner = Scope { env: scope.env, var: Some((var.as_str(), item)), parent: Some(scope) };
                let holds = match eval_in(predicate, &inner)?.as_ref() {
                    Json::Bool(b) => *b,
                    other => return Err(EvalError::new(format!("the condition of `{quantifier}` must be a bool, got {}", kind(other)))),
                };
                if holds != want_all {
                    // `all` found a counterexample, or `any` found a witness.
                    result = holds;
                    break;
                }
            }
            Json::Bool(result)
        }
        TExprKind::Comprehension { function, var, list, body } => comprehension(function, var, list, body, scope)?,
        TExprKind::Invalid => return Err(EvalError::new("cannot evaluate an expression that failed to type-check")),
    };
    Ok(Cow::Owned(owned))
}

/// `if_else(condition, then, otherwise)`: only the branch taken is evaluated.
fn if_else<'s>(args: &[TExpr], scope: &Scope<'s>) -> Result<Cow<'s, Json>> {
    match eval_in(&args[0], scope)?.as_ref() {
        Json::Bool(true) => eval_in(&args[1], scope),
        Json::Bool(false) => eval_in(&args[2], scope),
        other => Err(EvalError::new(format!("`if_else` needs a condition (a bool), got {}", kind(other)))),
    }
}

/// `function(var in list: body)`: the body evaluated with `var` bound to
/// each element, then the library function over the results.
fn comprehension(function: &str, var: &str, list: &TExpr, body: &TExpr, scope: &Scope<'_>) -> Result<Json> {
    let list = eval_in(list, scope)?;
    let Json::Array(items) = list.as_ref() else {
        return Err(EvalError::new(format!("`{function}` ranges over a list, got {}", kind(&list))));
    };
    let mut values = Vec::with_capacity(items.len());
    for item in items {
        let inner = Scope { env: scope.env, var: Some((var, item)), parent: Some(scope) };
        values.push(eval_in(body, &inner)?.into_owned());
    }
    library::comprehension(function, items, values)
}

/// Converts a checked literal property value to JSON.
///
/// Durations become milliseconds, money and percentages numbers (a
/// percentage as a fraction), words, strings, node and declaration
/// references strings, machine states `"machine.state"`, lists and records
/// recursively. An expression is evaluated with an empty environment
/// (`null` if that fails); every other value is `null`.
pub fn value_to_json(value: &Value) -> Json {
    match value {
        Value::Bool(b) => Json::Bool(*b),
        Value::Int(i) => Json::from(*i),
        Value::Float(f) | Value::Money(f) | Value::Fraction(f) => Number::from_f64(*f).map_or(Json::Null, Json::Number),
        Value::Duration(ms) => Json::from(*ms),
        Value::Str(s) | Value::Word(s) | Value::Node(s) => Json::String(s.clone()),
        Value::Ref { name, .. } => Json::String(name.clone()),
        Value::State { machine, state } => Json::String(format!("{machine}.{state}")),
        Value::List(items) => Json::Array(items.iter().map(value_to_json).collect()),
        Value::Record(fields) => Json::Object(fields.iter().map(|(k, v)| (k.clone(), value_to_json(v))).collect()),
        Value::Expr(e) => eval(e, &Env::default()).unwrap_or(Json::Null),
        Value::Rate { .. } | Value::Type(_) | Value::Action(_) | Value::Evaluator { .. } | Value::JoinRule { .. } | Value::Invalid => {
            Json::Null
        }
    }
}

/// The kind of a JSON value, as error messages name it.
fn kind(value: &Json) -> &'static str {
    match value {
        Json::Null => "null",
        Json::Bool(_) => "bool",
        Json::Number(_) => "number",
        Json::String(_) => "string",
        Json::Array(_) => "list",
        Json::Object(_) => "object",
    }
}

fn to_f64(n: &Number) -> f64 {
    n.as_f64().unwrap_or(f64::NAN)
}

/// A float result, or an error when it is not finite (JSON has no NaN).
fn float(op: &str, f: f64) -> Result<Json> {
    Number::from_f64(f).map(Json::Number).ok_or_else(|| EvalError::new(format!("{op} gave a non-finite number ({f})")))
}

/// An exact integer view of a number, when it is one.
fn as_int(n: &Number) -> Option<i128> {
    n.as_i64().map(i128::from).or_else(|| n.as_u64().map(i128::from))
}

/// Compares two numbers numerically (`1` equals `1.0`).
fn num_cmp(a: &Number, b: &Number) -> Option<Ordering> {
    match (as_int(a), as_int(b)) {
        (Some(x), Some(y)) => Some(x.cmp(&y)),
        _ => to_f64(a).partial_cmp(&to_f64(b)),
    }
}

/// Structural equality, with numbers compared numerically.
pub fn json_eq(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => num_cmp(x, y) == Some(Ordering::Equal),
        (Json::Array(xs), Json::Array(ys)) => xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| json_eq(x, y)),
        (Json::Object(xs), Json::Object(ys)) => xs.len() == ys.len() && xs.iter().all(|(k, x)| ys.get(k).is_some_and(|y| json_eq(x, y))),
        _ => a == b,
    }
}

/// `base.name`: a missing field, or any field of null, is null.
fn field<'v>(base: &'v Json, name: &str) -> Result<&'v Json> {
    match base {
        Json::Object(map) => Ok(map.get(name).unwrap_or(&NULL)),
        Json::Null => Ok(&NULL),
        other => Err(EvalError::new(format!("field `.{name}` needs an object, got {}", kind(other)))),
    }
}

/// `base[index]`: a list element (in range) or an object's member.
fn element<'v>(base: &'v Json, index: &Json) -> Result<&'v Json> {
    match (base, index) {
        (Json::Array(items), Json::Number(n)) => {
            let len = items.len();
            match n.as_u64().and_then(|i| usize::try_from(i).ok()) {
                Some(i) if i < len => Ok(&items[i]),
                Some(i) => Err(EvalError::new(format!("index {i} is out of range for a list of length {len}"))),
                None => Err(EvalError::new(format!("a list index must be a non-negative whole number, got {n}"))),
            }
        }
        (Json::Array(_), other) => Err(EvalError::new(format!("a list index must be a number, got {}", kind(other)))),
        (Json::Object(map), Json::String(key)) => Ok(map.get(key).unwrap_or(&NULL)),
        (Json::Object(_), other) => Err(EvalError::new(format!("an object index must be a string, got {}", kind(other)))),
        (other, _) => Err(EvalError::new(format!("indexing `[…]` needs a list or an object, got {}", kind(other)))),
    }
}

fn numbers<'a>(function: &str, value: &'a Json) -> Result<Vec<&'a Number>> {
    let Json::Array(items) = value else {
        return Err(EvalError::new(format!("`{function}` expects a list of numbers, got {}", kind(value))));
    };
    items
        .iter()
        .map(|item| match item {
            Json::Number(n) => Ok(n),
            other => Err(EvalError::new(format!("`{function}` expects a list of numbers, got a list containing {}", kind(other)))),
        })
        .collect()
}

fn call(function: &str, args: &[&Json]) -> Result<Json> {
    let arity = |n: usize| -> Result<()> {
        if args.len() == n {
            Ok(())
        } else {
            Err(EvalError::new(format!("`{function}` takes {n} argument{}, got {}", if n == 1 { "" } else { "s" }, args.len())))
        }
    };
    match function {
        "len" => {
            arity(1)?;
            match args[0] {
                Json::Array(items) => Ok(Json::from(items.len())),
                Json::String(s) => Ok(Json::from(s.chars().count())),
                other => Err(EvalError::new(format!("`len` expects a list or string, got {}", kind(other)))),
            }
        }
        "count" => {
            arity(1)?;
            match args[0] {
                Json::Array(items) => Ok(Json::from(items.len())),
                other => Err(EvalError::new(format!("`count` expects a list, got {}", kind(other)))),
            }
        }
        "exists" => {
            arity(1)?;
            Ok(Json::Bool(!args[0].is_null()))
        }
        "lower" | "upper" => {
            arity(1)?;
            match args[0] {
                Json::String(s) => Ok(Json::String(if function == "lower" { s.to_lowercase() } else { s.to_uppercase() })),
                other => Err(EvalError::new(format!("`{function}` expects a string, got {}", kind(other)))),
            }
        }
        "contains" => {
            arity(2)?;
            member(function, args[1], args[0])
        }
        "starts_with" => {
            arity(2)?;
            match (args[0], args[1]) {
                (Json::String(s), Json::String(prefix)) => Ok(Json::Bool(s.starts_with(prefix.as_str()))),
                (Json::String(_), other) => Err(EvalError::new(format!("`starts_with` expects a string prefix, got {}", kind(other)))),
                (other, _) => Err(EvalError::new(format!("`starts_with` expects a string, got {}", kind(other)))),
            }
        }
        "min" | "max" => {
            let want = if function == "min" { Ordering::Less } else { Ordering::Greater };
            let candidates: Vec<&Number> = match args.len() {
                1 => numbers(function, args[0])?,
                2 => match (args[0], args[1]) {
                    (Json::Number(a), Json::Number(b)) => vec![a, b],
                    (a, b) => {
                        return Err(EvalError::new(format!("`{function}` expects two numbers, got {} and {}", kind(a), kind(b))));
                    }
                },
                n => return Err(EvalError::new(format!("`{function}` takes 1 or 2 arguments, got {n}"))),
            };
            let mut best: Option<&Number> = None;
            for n in candidates {
                if best.is_none_or(|b| num_cmp(n, b) == Some(want)) {
                    best = Some(n);
                }
            }
            best.map(|n| Json::Number(n.clone())).ok_or_else(|| EvalError::new(format!("`{function}` of an empty list")))
        }
        "sum" => {
            arity(1)?;
            let items = numbers(function, args[0])?;
            let exact = items.iter().try_fold(0i64, |acc, n| n.as_i64().and_then(|i| acc.checked_add(i)));
            match exact {
                Some(total) => Ok(Json::from(total)),
                None => float("`sum`", items.iter().map(|n| to_f64(n)).sum()),
            }
        }
        other => library::call(other, args),
    }
}

/// `needle in haystack`, and `contains(haystack, needle)`.
fn member(op: &str, needle: &Json, haystack: &Json) -> Result<Json> {
    match haystack {
        Json::Array(items) => Ok(Json::Bool(items.iter().any(|item| json_eq(item, needle)))),
        Json::String(s) => match needle {
            Json::String(sub) => Ok(Json::Bool(s.contains(sub.as_str()))),
            other => Err(EvalError::new(format!("`{op}` on a string needs a string to look for, got {}", kind(other)))),
        },
        Json::Object(map) => match needle {
            Json::String(key) => Ok(Json::Bool(map.contains_key(key))),
            other => Err(EvalError::new(format!("`{op}` on an object needs a string key, got {}", kind(other)))),
        },
        other => Err(EvalError::new(format!("`{op}` needs a list, string or object to look in, got {}", kind(other)))),
    }
}

fn logic(op: &str, expr: &TExpr, scope: &Scope<'_>) -> Result<bool> {
    match eval_in(expr, scope)?.as_ref() {
        Json::Bool(b) => Ok(*b),
        other => Err(EvalError::new(format!("`{op}` expects bools, got {}", kind(other)))),
    }
}

fn binary(op: BinOp, lhs: &TExpr, rhs: &TExpr, scope: &Scope<'_>) -> Result<Json> {
    match op {
        BinOp::And => return Ok(Json::Bool(logic(op.as_str(), lhs, scope)? && logic(op.as_str(), rhs, scope)?)),
        BinOp::Or => return Ok(Json::Bool(logic(op.as_str(), lhs, scope)? || logic(op.as_str(), rhs, scope)?)),
        _ => {}
    }
    let l = eval_in(lhs, scope)?;
    let r = eval_in(rhs, scope)?;
    let (l, r) = (l.as_ref(), r.as_ref());
    match op {
        BinOp::Eq => Ok(Json::Bool(json_eq(l, r))),
        BinOp::NotEq => Ok(Json::Bool(!json_eq(l, r))),
        BinOp::Lt | BinOp::LtEq | BinOp::Gt | BinOp::GtEq => {
            let ordering = match (l, r) {
                (Json::Number(a), Json::Number(b)) => num_cmp(a, b),
                (Json::String(a), Json::String(b)) => Some(a.cmp(b)),
                _ => {
                    return Err(EvalError::new(format!("`{op}` compares two numbers or two strings, got {} and {}", kind(l), kind(r))));
                }
            };
            let Some(ordering) = ordering else {
                return Err(EvalError::new(format!("`{op}` cannot order these numbers")));
            };
            Ok(Json::Bool(match op {
                BinOp::Lt => ordering == Ordering::Less,
                BinOp::LtEq => ordering != Ordering::Greater,
                BinOp::Gt => ordering == Ordering::Greater,
                _ => ordering != Ordering::Less,
            }))
        }
        BinOp::In => member("in", l, r),
        // `+`, `-`, `*`, `/` (`and` and `or` returned above).
        _ => arithmetic(op, l, r),
    }
}

fn arithmetic(op: BinOp, l: &Json, r: &Json) -> Result<Json> {
    let (a, b) = match (l, r) {
        (Json::Number(a), Json::Number(b)) => (a, b),
        (Json::String(a), Json::String(b)) if op == BinOp::Add => return Ok(Json::String(format!("{a}{b}"))),
        _ => {
            let what = if op == BinOp::Add { "two numbers or two strings" } else { "two numbers" };
            return Err(EvalError::new(format!("`{op}` expects {what}, got {} and {}", kind(l), kind(r))));
        }
    };
    if op == BinOp::Div {
        let divisor = to_f64(b);
        if divisor == 0.0 {
            return Err(EvalError::new("`/` divides by zero"));
        }
        return float("`/`", to_f64(a) / divisor);
    }
    if let (Some(x), Some(y)) = (a.as_i64(), b.as_i64()) {
        let exact = match op {
            BinOp::Add => x.checked_add(y),
            BinOp::Sub => x.checked_sub(y),
            _ => x.checked_mul(y),
        };
        if let Some(v) = exact {
            return Ok(Json::from(v));
        }
    }
    let (x, y) = (to_f64(a), to_f64(b));
    let result = match op {
        BinOp::Add => x + y,
        BinOp::Sub => x - y,
        _ => x * y,
    };
    float(&format!("`{op}`"), result)
}

/// A short source-like rendering of an expression, such as
/// `len(research.items) > 0`, for trace labels (shared with the model
/// checker's witnesses, so both write the same `via` texts).
pub use flow_check::render::render;

#[cfg(test)]
mod tests {
    use super::*;
    use flow_check::ir::Guard;
    use flow_diagnostics::SourceDb;
    use serde_json::json;

    pub(super) const PRELUDE: &str = r#"
type Item = { year: int, score: float, signals: [string] }
type Pack = { items: [Item], note?: string, meta?: { source?: { name: string } }, verdict: "accept" | "revise", tags: { string_key: int }? }
provider local: scripted
agent researcher { provider: local }
"#;

    /// Compiles a workflow whose `research -> done` edge has `when GUARD`,
    /// and returns the guard's typed expression.
    pub(super) fn guard(condition: &str) -> TExpr {
        let source = format!(
            "{PRELUDE}
workflow w {{
  input: {{ topic: string, min_items: int, ratio: float, limit: duration, share: percent, cost: money, nums: [int] }}
  start: research
  node research: agent researcher {{ output: Pack }}
  node done: end ok
  node other: end ok
  research -> done when {condition}
  research -> other else
}}
"
        );
        let mut db = SourceDb::new();
        let root = db.add("test.flow", source);
        let checked = flow_check::check_program(&mut db, root, &flow_check::NoFiles);
        let errors: Vec<_> = checked.diagnostics.iter().filter(|d| d.is_error()).collect();
        assert!(errors.is_empty(), "{}", flow_diagnostics::render::render_human(&db, &checked.diagnostics));
        let workflow = &checked.program.workflows["w"];
        workflow
            .edges
            .iter()
            .find_map(|e| match &e.guard {
                Guard::When(expr) => Some(expr.clone()),
                _ => None,
            })
            .expect("a guarded edge")
    }

    pub(super) fn env() -> Env {
        let mut env = Env::default();
        env.insert(
            "input".into(),
            json!({ "topic": "rust", "min_items": 2, "ratio": 2.0, "limit": 30000, "share": 0.1, "cost": 0.25, "nums": [3, 1, 2] }),
        );
        env.insert(
            "research".into(),
            json!({
                "items": [
                    { "year": 2021, "score": 0.5, "signals": ["peer_reviewed"] },
                    { "year": 2023, "score": 0.9, "signals": ["vendor_blog", "x"] },
                ],
                "verdict": "accept",
                "tags": null,
            }),
        );
        env
    }

    fn run(condition: &str) -> Result<Json> {
        eval(&guard(condition), &env())
    }

    fn holds(condition: &str) -> bool {
        match eval_bool(&guard(condition), &env()) {
            Ok(b) => b,
            Err(e) => panic!("`{condition}` failed: {e}"),
        }
    }

    #[test]
    fn field_paths_and_missing_fields() {
        assert!(holds("research.verdict == \"accept\""));
        assert!(holds("research.items[1].year == 2023"));
        assert!(!holds("exists(research.note)"));
        // A missing intermediate record gives null, not an error.
        assert!(!holds("exists(research.meta.source.name)"));
        assert!(holds("not exists(research.tags)"));
        assert!(holds("exists(input.topic)"));
        // A node that has not run is null.
        let expr = guard("exists(research)");
        assert!(!eval_bool(&expr, &Env::default()).unwrap());
    }

    #[test]
    fn field_of_non_object_is_an_error() {
        let mut env = env();
        env.insert("research".into(), json!({ "items": [], "verdict": "accept", "meta": 3 }));
        let err = eval(&guard("exists(research.meta.source)"), &env).unwrap_err();
        assert!(err.message.contains("`.source`") && err.message.contains("number"), "{err}");
    }

    #[test]
    fn index_out_of_range_is_an_error() {
        let err = run("research.items[5].year > 0").unwrap_err();
        assert!(err.message.contains("out of range") && err.message.contains("length 2"), "{err}");
    }

    #[test]
    fn comparisons_across_int_and_float() {
        assert!(holds("input.ratio == 2"));
        assert!(holds("input.min_items < input.ratio + 0.5"));
        assert!(holds("input.min_items <= 2.0"));
        assert!(holds("input.min_items >= 2"));
        assert!(!holds("input.min_items > 2"));
        assert!(holds("input.min_items != 3"));
        assert!(holds("input.limit == 30s and input.limit < 1m"));
        assert!(holds("input.share == 10%"));
        assert!(holds("input.cost < $1"));
        // Lists compare structurally, numbers numerically.
        let mut env = env();
        env.insert("research".into(), json!({ "items": [], "verdict": "accept", "note": "x" }));
        assert_eq!(eval(&guard("[1, 2] == [1.0, 2.0]"), &env).unwrap(), json!(true));
    }

    fn literal(value: Value, ty: Ty) -> TExpr {
        TExpr { kind: TExprKind::Literal { value: Box::new(value) }, ty }
    }

    fn binary_expr(op: BinOp, lhs: TExpr, rhs: TExpr) -> TExpr {
        TExpr { kind: TExprKind::Binary { op, lhs: Box::new(lhs), rhs: Box::new(rhs) }, ty: Ty::Bool }
    }

    #[test]
    fn strings_order_lexicographically() {
        let s = |v: &str| literal(Value::Str(v.into()), Ty::String);
        let env = Env::default();
        assert_eq!(eval(&binary_expr(BinOp::Lt, s("apple"), s("banana")), &env), Ok(json!(true)));
        assert_eq!(eval(&binary_expr(BinOp::GtEq, s("apple"), s("banana")), &env), Ok(json!(false)));
        assert_eq!(eval(&binary_expr(BinOp::LtEq, s("b"), s("b")), &env), Ok(json!(true)));
        let err = eval(&binary_expr(BinOp::Lt, s("a"), literal(Value::Int(1), Ty::Int)), &env).unwrap_err();
        assert_eq!(err.message, "`<` compares two numbers or two strings, got string and number");
        // `in` on an object tests its keys.
        let mut env = Env::default();
        env.insert("o".into(), json!({ "k": 1 }));
        let o = TExpr { kind: TExprKind::Var { name: "o".into() }, ty: Ty::Any };
        assert_eq!(eval(&binary_expr(BinOp::In, s("k"), o.clone()), &env), Ok(json!(true)));
        assert_eq!(eval(&binary_expr(BinOp::In, s("z"), o), &env), Ok(json!(false)));
    }

    #[test]
    fn and_or_short_circuit() {
        // The right-hand sides would fail: `len` of a number, index out of range.
        let mut env = env();
        env.insert("research".into(), json!({ "items": 7, "verdict": "accept" }));
        let and = guard("research.verdict == \"revise\" and len(research.items) > 0");
        assert_eq!(eval(&and, &env).unwrap(), json!(false));
        let or = guard("research.verdict == \"accept\" or len(research.items) > 0");
        assert_eq!(eval(&or, &env).unwrap(), json!(true));
        // Without the short-circuit, the error surfaces.
        let err = eval(&guard("research.verdict == \"accept\" and len(research.items) > 0"), &env).unwrap_err();
        assert_eq!(err.message, "`len` expects a list or string, got number");
    }

    #[test]
    fn membership_and_functions() {
        assert!(holds("\"vendor_blog\" in research.items[1].signals"));
        assert!(!holds("\"vendor_blog\" in research.items[0].signals"));
        assert!(holds("\"us\" in input.topic"));
        assert!(holds("contains(research.items[0].signals, \"peer_reviewed\")"));
        assert!(holds("contains(input.topic, \"ru\")"));
        assert!(holds("starts_with(input.topic, \"ru\")"));
        assert!(holds("upper(input.topic) == \"RUST\" and lower(\"AbC\") == \"abc\""));
        assert!(holds("len(research.items) == 2 and len(input.topic) == 4 and count(research.items) == 2"));
        assert!(holds("len(research.items) >= input.min_items"));
        assert_eq!(run("sum([1, 2, 3]) == 6").unwrap(), json!(true));
        assert!(holds("sum([1, 2.5]) == 3.5"));
        assert!(holds("min([3, 1, 2]) == 1 and max([3, 1, 2]) == 3"));
        assert!(holds("min(input.min_items, 1) == 1 and max(1s, input.limit) == 30s"));
        assert!(holds("input.topic + \"!\" == \"rust!\""));
        assert!(holds("input.min_items * 3 - 1 == 5 and input.min_items / 4 == 0.5"));
        assert!(holds("-input.min_items == 0 - 2"));
    }

    #[test]
    fn quantifiers() {
        assert!(holds("all(i in research.items: i.year >= 2020)"));
        assert!(!holds("all(i in research.items: i.year >= 2022)"));
        assert!(holds("any(i in research.items: i.year >= 2022)"));
        assert!(!holds("any(i in research.items: \"nope\" in i.signals)"));
        assert!(holds("any(i in research.items: contains(i.signals, \"peer_reviewed\")) and all(i in research.items: i.score > 0)"));
        // Nested quantifiers, and a variable that shadows a node name.
        assert!(holds("all(i in research.items: any(s in i.signals: len(s) > 1 and i.year > 2000))"));
        assert!(holds("all(research in research.items: research.year > 2000) and research.verdict == \"accept\""));
        assert!(holds("all(i in [[1], [2, 3]]: any(i in i: i > 1) or len(i) == 1)"));
        // Vacuous truth, and `any` of nothing.
        let mut env = env();
        env.insert("research".into(), json!({ "items": [], "verdict": "accept" }));
        assert!(eval_bool(&guard("all(i in research.items: i.year > 3000)"), &env).unwrap());
        assert!(!eval_bool(&guard("any(i in research.items: i.year > 0)"), &env).unwrap());
        // `any` stops at the first witness: the second element would fail.
        env.insert("research".into(), json!({ "items": [{ "year": 2030 }, { "year": "bad" }], "verdict": "accept" }));
        assert!(eval_bool(&guard("any(i in research.items: i.year > 2000)"), &env).unwrap());
        let err = eval_bool(&guard("all(i in research.items: i.year > 2000)"), &env).unwrap_err();
        assert!(err.message.contains("`>`") && err.message.contains("string"), "{err}");
    }

    #[test]
    fn errors_name_operation_and_kind() {
        let mut env = env();
        env.insert("research".into(), json!({ "items": "oops", "verdict": "accept" }));
        let err = eval(&guard("all(i in research.items: i.year > 0)"), &env).unwrap_err();
        assert_eq!(err.message, "`all` ranges over a list, got string");
        env.insert("input".into(), json!({ "nums": [1, "2"] }));
        let err = eval(&guard("sum(input.nums) > 0"), &env).unwrap_err();
        assert!(err.message.starts_with("`sum` expects a list of numbers"), "{err}");
        let err = run("input.min_items / 0 > 1").unwrap_err();
        assert!(err.message.contains("divides by zero"), "{err}");
        let err = run("min([0]) > max([]) ").unwrap_err();
        assert!(err.message.contains("empty list"), "{err}");
        env.insert("input".into(), json!({ "min_items": "two" }));
        let err = eval(&guard("input.min_items > 1"), &env).unwrap_err();
        assert_eq!(err.message, "`>` compares two numbers or two strings, got string and number");
        // A non-bool condition.
        let err = eval_bool(&guard("exists(input)"), &Env::default()).map(|_| ()).err();
        assert!(err.is_none());
        let expr = TExpr { kind: TExprKind::Var { name: "input".into() }, ty: Ty::Any };
        let err = eval_bool(&expr, &env).unwrap_err();
        assert_eq!(err.message, "a condition must be a bool, got object");
        let invalid = TExpr::invalid();
        assert!(eval(&invalid, &env).is_err());
    }

    #[test]
    fn null_literal_and_value_to_json() {
        assert!(holds("research.tags == null"));
        assert!(holds("research.note == null and not (research.meta != null)"));
        // `null` is lowered as an empty string literal typed `null`.
        let null = TExpr { kind: TExprKind::Literal { value: Box::new(Value::Str(String::new())) }, ty: Ty::Null };
        assert_eq!(eval(&null, &Env::default()).unwrap(), Json::Null);
        assert_eq!(render(&null), "null");
        assert_eq!(value_to_json(&Value::Duration(1500)), json!(1500));
        assert_eq!(value_to_json(&Value::Fraction(0.1)), json!(0.1));
        assert_eq!(value_to_json(&Value::Money(0.25)), json!(0.25));
        assert_eq!(value_to_json(&Value::State { machine: "m".into(), state: "s".into() }), json!("m.s"));
        assert_eq!(value_to_json(&Value::List(vec![Value::Word("a".into()), Value::Node("n".into())])), json!(["a", "n"]));
        assert_eq!(value_to_json(&Value::Invalid), Json::Null);
        let literal = guard("[1, 2] == [1, 2]");
        assert_eq!(value_to_json(&Value::Expr(literal)), json!(true));
        // An expression over variables is null with no environment.
        assert_eq!(value_to_json(&Value::Expr(guard("len(research.items) > 0"))), Json::Null);
    }

    #[test]
    fn render_is_source_like() {
        assert_eq!(render(&guard("len(research.items) > 0")), "len(research.items) > 0");
        assert_eq!(
            render(&guard("all(i in research.items: i.year >= 2020 and not (\"x\" in i.signals)) or research.items[0].score < 0.5")),
            "all(i in research.items: i.year >= 2020 and not (\"x\" in i.signals)) or research.items[0].score < 0.5"
        );
        assert_eq!(render(&guard("(input.min_items + 1) * 2 == 6 - (1 - 1)")), "(input.min_items + 1) * 2 == 6 - (1 - 1)");
        assert_eq!(
            render(&guard("input.limit < 30s and input.share > 10% and input.cost <= $0.25")),
            "input.limit < 30s and input.share > 10% and input.cost <= $0.25"
        );
        assert_eq!(
            render(&guard("(research.verdict == \"accept\" or exists(research.note)) and research.tags == null")),
            "(research.verdict == \"accept\" or exists(research.note)) and research.tags == null"
        );
    }
}
