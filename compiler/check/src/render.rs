//! A short source-like rendering of checked expressions, such as
//! `len(research.items) > 0`: the text of a guard in trace events
//! (`edge_taken`'s `via: "when …"`), written the same way by the runtime
//! and by the model checker's witnesses. Pure.

use crate::ir::{TExpr, TExprKind, Value};
use crate::types::Ty;

/// The rendering of an expression.
pub fn render(expr: &TExpr) -> String {
    let mut out = String::new();
    write_expr(&mut out, expr, 0);
    out
}

/// Binding strength, loosest first (the reference's §4.1 levels).
fn precedence(expr: &TExpr) -> u8 {
    match &expr.kind {
        TExprKind::Binary { op, .. } => op.precedence(),
        TExprKind::Not { .. } => 4,
        TExprKind::Neg { .. } => 8,
        TExprKind::Literal { value } if literal_is_negative(value) => 8,
        _ => 10,
    }
}

fn literal_is_negative(value: &Value) -> bool {
    match value {
        Value::Int(i) => *i < 0,
        Value::Float(f) | Value::Money(f) | Value::Fraction(f) => *f < 0.0,
        _ => false,
    }
}

/// `name(var in list: body)`: a quantifier or a function that binds a
/// variable, as written.
fn write_binding(out: &mut String, name: &str, var: &str, list: &TExpr, body: &TExpr) {
    out.push_str(name);
    out.push('(');
    out.push_str(var);
    out.push_str(" in ");
    write_expr(out, list, 0);
    out.push_str(": ");
    write_expr(out, body, 0);
    out.push(')');
}

fn write_expr(out: &mut String, expr: &TExpr, min: u8) {
    flow_syntax::stack::guarded(|| write_expr_level(out, expr, min))
}

fn write_expr_level(out: &mut String, expr: &TExpr, min: u8) {
    let parens = precedence(expr) < min;
    if parens {
        out.push('(');
    }
    match &expr.kind {
        TExprKind::Literal { value } => {
            if expr.ty == Ty::Null {
                out.push_str("null");
            } else {
                write_literal(out, value);
            }
        }
        TExprKind::Var { name } => out.push_str(name),
        TExprKind::Field { base, name } => {
            write_expr(out, base, 9);
            out.push('.');
            out.push_str(name);
        }
        TExprKind::Index { base, index } => {
            write_expr(out, base, 9);
            out.push('[');
            write_expr(out, index, 0);
            out.push(']');
        }
        TExprKind::Call { function, args } => {
            out.push_str(function);
            out.push('(');
            write_list(out, args);
            out.push(')');
        }
        TExprKind::Not { operand } => {
            out.push_str("not ");
            // Parenthesise comparisons for readability: `not (a in b)`.
            write_expr(out, operand, 6);
        }
        TExprKind::Neg { operand } => {
            out.push('-');
            write_expr(out, operand, 9);
        }
        TExprKind::Binary { op, lhs, rhs } => {
            let p = op.precedence();
            // Left-associative, except comparisons, which do not chain.
            let left_min = if p == 5 { 6 } else { p };
            write_expr(out, lhs, left_min);
            out.push(' ');
            out.push_str(op.as_str());
            out.push(' ');
            write_expr(out, rhs, p + 1);
        }
        TExprKind::List { items } => {
            out.push('[');
            write_list(out, items);
            out.push(']');
        }
        TExprKind::Record { fields } => {
            if fields.is_empty() {
                out.push_str("{}");
            } else {
                out.push_str("{ ");
                for (i, (name, value)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(name);
                    out.push_str(": ");
                    write_expr(out, value, 0);
                }
                out.push_str(" }");
            }
        }
        TExprKind::Quantified { quantifier, var, list, predicate } => write_binding(out, quantifier.as_str(), var, list, predicate),
        TExprKind::Comprehension { function, var, list, body } => write_binding(out, function, var, list, body),
        TExprKind::Invalid => out.push_str("<invalid>"),
    }
    if parens {
        out.push(')');
    }
}

fn write_list(out: &mut String, items: &[TExpr]) {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write_expr(out, item, 0);
    }
}

/// Formats a float without spurious digits (`0.1 * 100` is `10`).
fn short_float(f: f64) -> String {
    let rounded = (f * 1e9).round() / 1e9;
    format!("{rounded}")
}

fn write_literal(out: &mut String, value: &Value) {
    match value {
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) => out.push_str(&i.to_string()),
        Value::Float(f) => {
            let s = short_float(*f);
            out.push_str(&s);
            if !s.contains(['.', 'e', 'N', 'i']) {
                out.push_str(".0");
            }
        }
        Value::Str(s) => out.push_str(&serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}"))),
        Value::Duration(ms) => {
            let units: [(u64, &str); 4] = [(86_400_000, "d"), (3_600_000, "h"), (60_000, "m"), (1000, "s")];
            let (factor, unit) = units.into_iter().find(|(f, _)| *ms != 0 && ms % f == 0).unwrap_or((1, "ms"));
            out.push_str(&format!("{}{unit}", ms / factor));
        }
        Value::Money(m) => {
            if *m < 0.0 {
                out.push_str(&format!("-${}", short_float(-m)));
            } else {
                out.push_str(&format!("${}", short_float(*m)));
            }
        }
        Value::Fraction(f) => out.push_str(&format!("{}%", short_float(f * 100.0))),
        Value::Word(w) | Value::Node(w) => out.push_str(w),
        Value::Ref { name, .. } => out.push_str(name),
        Value::State { machine, state } => out.push_str(&format!("{machine}.{state}")),
        Value::List(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_literal(out, item);
            }
            out.push(']');
        }
        Value::Record(fields) if fields.is_empty() => out.push_str("{}"),
        Value::Record(fields) => {
            out.push_str("{ ");
            for (i, (name, item)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(name);
                out.push_str(": ");
                write_literal(out, item);
            }
            out.push_str(" }");
        }
        Value::Expr(e) => write_expr(out, e, 0),
        Value::Type(ty) => out.push_str(&ty.to_string()),
        Value::Rate { .. } | Value::Action(_) | Value::Evaluator { .. } | Value::JoinRule { .. } | Value::Invalid => {
            out.push_str("<value>")
        }
    }
}
