//! Typing expressions: predicates over artifacts, arguments, conditions.

use crate::check::{Checker, Scope};
use crate::ir::{TExpr, TExprKind, Value};
use crate::types::{FieldTy, Ty};
use flow_diagnostics::{closest_name, codes, Diagnostic, DiagnosticMut, Label};
use flow_syntax::ast::{BinaryOp, Expr, ExprKind, Quantifier, UnaryOp};
use indexmap::IndexMap;

fn texpr(kind: TExprKind, ty: Ty) -> TExpr {
    TExpr { kind, ty }
}

impl Checker<'_> {
    pub fn type_expr(&mut self, expr: &Expr, scope: &Scope) -> TExpr {
        flow_syntax::stack::guarded(|| self.type_expr_level(expr, scope))
    }

    fn type_expr_level(&mut self, expr: &Expr, scope: &Scope) -> TExpr {
        match &expr.kind {
            ExprKind::Error => TExpr::invalid(),
            ExprKind::Number { value, unit } => {
                let (ty, value) = match unit.as_str() {
                    "" if value.fract() == 0.0 => (Ty::Int, Value::Int(*value as i64)),
                    "" => (Ty::Float, Value::Float(*value)),
                    "k" | "M" => {
                        let scale = if unit == "k" { 1e3 } else { 1e6 };
                        (Ty::Int, Value::Int((value * scale) as i64))
                    }
                    "%" => (Ty::Percent, Value::Fraction(value / 100.0)),
                    "ms" | "s" | "m" | "h" | "d" => {
                        let factor = match unit.as_str() {
                            "ms" => 1.0,
                            "s" => 1e3,
                            "m" => 60e3,
                            "h" => 3600e3,
                            _ => 86_400e3,
                        };
                        (Ty::Duration, Value::Duration((value * factor) as u64))
                    }
                    _ => {
                        self.error(codes::UNKNOWN_UNIT, expr.span, format!("unknown unit `{unit}`"))
                            .with_note("units: ms, s, m, h, d (durations); k, M (counts); % (percentages)")
                            .labels[0]
                            .message = "unknown unit".into();
                        return TExpr::invalid();
                    }
                };
                texpr(TExprKind::Literal { value: Box::new(value) }, ty)
            }
            ExprKind::Money(m) => texpr(TExprKind::Literal { value: Box::new(Value::Money(*m)) }, Ty::Money),
            ExprKind::String(s) => texpr(TExprKind::Literal { value: Box::new(Value::Str(s.clone())) }, Ty::String),
            ExprKind::Bool(b) => texpr(TExprKind::Literal { value: Box::new(Value::Bool(*b)) }, Ty::Bool),
            ExprKind::Null => texpr(TExprKind::Literal { value: Box::new(Value::Str(String::new())) }, Ty::Null),
            ExprKind::Name(name) => match self.lookup(scope, name) {
                Some(ty) => {
                    let node_key = self
                        .workflow
                        .as_ref()
                        .filter(|w| self.index_symbols && w.nodes.contains_key(name))
                        .map(|w| format!("{}::{name}", w.name));
                    if let Some(key) = node_key {
                        self.reference(key, expr.span);
                    }
                    texpr(TExprKind::Var { name: name.clone() }, ty)
                }
                None => {
                    let (local, nodes_in_scope) = self.scope_names(scope);
                    let mut diagnostic =
                        Diagnostic::new(codes::UNDEFINED_NAME, self.file, expr.span, format!("undefined name `{name}` in this expression"))
                            .with_primary_message("not in scope");
                    let near_local = closest_name(name, local.iter().map(String::as_str)).map(str::to_string);
                    let near_node = if nodes_in_scope { self.closest_node(name) } else { None };
                    let node_names = || self.workflow.iter().flat_map(|w| w.nodes.keys()).filter(|_| nodes_in_scope);
                    if let Some(s) = flow_diagnostics::nearer(name, near_local.as_deref(), near_node.as_deref()) {
                        diagnostic = diagnostic.with_suggestion(s);
                    } else if let Some(global) = self.globals.get(name) {
                        diagnostic = diagnostic
                            .with_label(Label::secondary(global.file, global.name_span, format!("`{name}` is {}", global.kind.article())))
                            .with_note("expressions refer to values: nodes (their outputs), `input`, `payload`, `output` or a quantifier's variable");
                    } else if !local.is_empty() || node_names().next().is_some() {
                        let in_scope = flow_diagnostics::short_list(local.iter().chain(node_names()));
                        diagnostic = diagnostic.with_note(format!("in scope: {in_scope}"));
                    }
                    self.diagnostics.push(diagnostic);
                    TExpr::invalid()
                }
            },
            ExprKind::Field { base, name } => {
                let base = self.type_expr(base, scope);
                if matches!(base.kind, TExprKind::Invalid) {
                    return TExpr::invalid();
                }
                // Borrow the (possibly named) record rather than copying it:
                // field access is the hottest path of the checker.
                let (nullable, field) = {
                    let outer = self.expand_ref(&base.ty);
                    let nullable = matches!(outer, Ty::Nullable { .. });
                    let inner = self.expand_ref(outer.non_null());
                    match inner {
                        Ty::Record { fields } => (nullable, fields.get(&name.text).cloned()),
                        _ => (nullable, None),
                    }
                };
                if let Some(FieldTy { ty, optional }) = field {
                    let ty = if optional || nullable { Ty::nullable(ty) } else { ty };
                    return texpr(TExprKind::Field { base: Box::new(base), name: name.text.clone() }, ty);
                }
                let expanded = self.expand(&base.ty);
                let inner = self.expand(expanded.non_null());
                let ty = match &inner {
                    Ty::Any => Ty::Any,
                    Ty::Record { fields } => match fields.get(&name.text) {
                        Some(FieldTy { ty, optional }) => {
                            if *optional || nullable {
                                Ty::nullable(ty.clone())
                            } else {
                                ty.clone()
                            }
                        }
                        None => {
                            let names: Vec<&str> = fields.keys().map(String::as_str).collect();
                            let mut d = Diagnostic::new(
                                codes::UNKNOWN_FIELD,
                                self.file,
                                name.span,
                                format!("{} has no field `{}`", base.ty, name.text),
                            )
                            .with_primary_message("unknown field");
                            d = match closest_name(&name.text, names.iter().copied()) {
                                Some(s) => d.with_suggestion(s),
                                None => d.with_note(format!("fields: {}", flow_diagnostics::short_list(&names))),
                            };
                            self.diagnostics.push(d);
                            return TExpr::invalid();
                        }
                    },
                    Ty::List { .. } => {
                        self.error(
                            codes::TYPE_MISMATCH,
                            name.span,
                            format!("`{}` is a list ({}); it has no fields", describe_texpr(&base), base.ty),
                        )
                        .with_help(format!("use a quantifier: `all(x in …: x.{})`", name.text));
                        return TExpr::invalid();
                    }
                    other => {
                        self.error(codes::TYPE_MISMATCH, name.span, format!("{other} has no fields"));
                        return TExpr::invalid();
                    }
                };
                texpr(TExprKind::Field { base: Box::new(base), name: name.text.clone() }, ty)
            }
            ExprKind::Index { base, index } => {
                let base = self.type_expr(base, scope);
                let index = self.type_expr(index, scope);
                let ty = match self.expand(base.ty.non_null()) {
                    Ty::List { item } => {
                        if !matches!(index.ty, Ty::Int | Ty::Any) {
                            self.error(codes::TYPE_MISMATCH, expr.span, format!("a list index must be an int, not {}", index.ty));
                        }
                        Ty::nullable(*item)
                    }
                    Ty::Any => Ty::Any,
                    other => {
                        self.error(codes::TYPE_MISMATCH, expr.span, format!("{other} cannot be indexed"));
                        return TExpr::invalid();
                    }
                };
                texpr(TExprKind::Index { base: Box::new(base), index: Box::new(index) }, ty)
            }
            ExprKind::Call { callee, args } => self.type_call(expr, callee, args, scope),
            ExprKind::Unary { op, operand } => {
                let operand = self.type_expr(operand, scope);
                match op {
                    UnaryOp::Not => {
                        self.expect_bool(&operand, expr, "`not`");
                        texpr(TExprKind::Not { operand: Box::new(operand) }, Ty::Bool)
                    }
                    UnaryOp::Neg => {
                        let ty = operand.ty.clone();
                        if !ty.same_quantity(&Ty::Int) && !ty.same_quantity(&Ty::Duration) && !ty.same_quantity(&Ty::Money) {
                            self.error(codes::TYPE_MISMATCH, expr.span, format!("`-` needs a number, but this is {ty}"));
                        }
                        texpr(TExprKind::Neg { operand: Box::new(operand) }, ty)
                    }
                }
            }
            ExprKind::Binary { op, lhs, rhs } => self.type_binary(expr, *op, lhs, rhs, scope),
            ExprKind::List(items) => {
                let items: Vec<TExpr> = items.iter().map(|i| self.type_expr(i, scope)).collect();
                let item = items.iter().map(|i| i.ty.clone()).find(|t| *t != Ty::Any).unwrap_or(Ty::Any);
                texpr(TExprKind::List { items }, Ty::list(item))
            }
            ExprKind::Object(fields) => {
                let mut typed = IndexMap::new();
                let mut tys = IndexMap::new();
                for field in fields {
                    let t = self.type_expr(&field.value, scope);
                    tys.insert(field.name.text.clone(), FieldTy { ty: t.ty.clone(), optional: false });
                    typed.insert(field.name.text.clone(), t);
                }
                texpr(TExprKind::Record { fields: typed }, Ty::Record { fields: tys })
            }
            ExprKind::Nullable(_) => {
                self.error(codes::TYPE_MISMATCH, expr.span, "`?` marks a nullable type; it is not an operator on values")
                    .with_help("to test presence, write `exists(x)`");
                TExpr::invalid()
            }
            ExprKind::Quantified { quantifier, var, list, predicate } => {
                let list = self.type_expr(list, scope);
                let item = match self.expand(list.ty.non_null()) {
                    Ty::List { item } => *item,
                    Ty::Any => Ty::Any,
                    other => {
                        self.error(codes::TYPE_MISMATCH, list_span(expr), format!("a quantifier ranges over a list, but this is {other}"));
                        Ty::Any
                    }
                };
                let mut inner = scope.clone();
                inner.vars.push((var.text.clone(), item));
                let predicate = self.type_expr(predicate, &inner);
                self.expect_bool(&predicate, expr, "a quantifier's condition");
                let q = if *quantifier == Quantifier::All { crate::ir::Quantifier::All } else { crate::ir::Quantifier::Any };
                texpr(
                    TExprKind::Quantified { quantifier: q, var: var.text.clone(), list: Box::new(list), predicate: Box::new(predicate) },
                    Ty::Bool,
                )
            }
            ExprKind::Binder { .. } => {
                self.error(codes::WRONG_ARGUMENTS, expr.span, "`x in xs: …` binds a variable only as the argument of a function")
                    .with_note(format!("functions that bind one: {}", crate::functions::BINDING.join(", ")));
                TExpr::invalid()
            }
            ExprKind::QuantifierWord(q) => {
                let word = if *q == Quantifier::All { "all" } else { "any" };
                self.error(codes::TYPE_MISMATCH, expr.span, format!("`{word}` alone is a join rule, not a value"))
                    .with_help(format!("as a quantifier, write `{word}(x in list: condition)`"));
                TExpr::invalid()
            }
        }
    }

    fn expect_bool(&mut self, typed: &TExpr, at: &Expr, what: &str) {
        if !matches!(typed.ty, Ty::Bool | Ty::Any) && !matches!(typed.kind, TExprKind::Invalid) {
            self.error(codes::TYPE_MISMATCH, at.span, format!("{what} needs a bool, but this is {}", typed.ty));
        }
    }

    fn type_binary(&mut self, expr: &Expr, op: BinaryOp, lhs: &Expr, rhs: &Expr, scope: &Scope) -> TExpr {
        let l = self.type_expr(lhs, scope);
        let r = self.type_expr(rhs, scope);
        if matches!(l.kind, TExprKind::Invalid) || matches!(r.kind, TExprKind::Invalid) {
            return TExpr::invalid();
        }
        let (lt, rt) = (self.expand(&l.ty), self.expand(&r.ty));
        let mismatch = |this: &mut Self, message: String| {
            let file = this.file;
            this.error(codes::TYPE_MISMATCH, expr.span, message)
                .with_label(Label::secondary(file, lhs.span, format!("this is {}", l.ty)))
                .with_label(Label::secondary(file, rhs.span, format!("this is {}", r.ty)));
        };
        let ty = match op {
            BinaryOp::Union => {
                self.error(codes::TYPE_MISMATCH, expr.span, "`|` builds enum types; it is not an operator on values")
                    .with_help("for a condition, use `or`");
                return TExpr::invalid();
            }
            BinaryOp::And | BinaryOp::Or => {
                for (t, e) in [(&l, lhs), (&r, rhs)] {
                    if !matches!(t.ty, Ty::Bool | Ty::Any) {
                        self.error(codes::TYPE_MISMATCH, e.span, format!("`{}` needs bools, but this is {}", op.as_str(), t.ty));
                    }
                }
                Ty::Bool
            }
            BinaryOp::Eq | BinaryOp::NotEq => {
                // An enum compared with a string literal: the literal must be a member.
                for (enum_ty, other) in [(&lt, &r), (&rt, &l)] {
                    if let (Ty::Enum { values }, TExprKind::Literal { value }) = (enum_ty.non_null(), &other.kind) {
                        // `null` is lowered as a literal too; it is not a string.
                        if other.ty == Ty::Null {
                            continue;
                        }
                        if let Value::Str(s) = value.as_ref() {
                            if !values.contains(s) {
                                let help = closest_name(s, values.iter().map(String::as_str));
                                let d = Diagnostic::new(
                                    codes::TYPE_MISMATCH,
                                    self.file,
                                    expr.span,
                                    format!("\"{s}\" is not a value of {}", enum_ty),
                                );
                                let d = match help {
                                    Some(h) => d.with_help(format!("did you mean \"{h}\"?")),
                                    None => d,
                                };
                                self.diagnostics.push(d);
                            }
                        }
                    }
                }
                if !self.assignable(&lt, &rt) && !self.assignable(&rt, &lt) && !lt.same_quantity(&rt) {
                    mismatch(self, format!("cannot compare {} with {}", l.ty, r.ty));
                }
                Ty::Bool
            }
            BinaryOp::Lt | BinaryOp::LtEq | BinaryOp::Gt | BinaryOp::GtEq => {
                if !lt.same_quantity(&rt) {
                    mismatch(
                        self,
                        format!(
                            "`{}` compares numbers, durations, money or percentages of one kind; here {} and {}",
                            op.as_str(),
                            l.ty,
                            r.ty
                        ),
                    );
                }
                Ty::Bool
            }
            BinaryOp::In => {
                match rt.non_null() {
                    Ty::List { item } => {
                        if !self.assignable(&lt, item) && !self.assignable(item, &lt) {
                            mismatch(self, format!("{} cannot be an element of {}", l.ty, r.ty));
                        }
                    }
                    Ty::String | Ty::Any => {
                        if !matches!(lt.non_null(), Ty::String | Ty::Enum { .. } | Ty::Any) {
                            mismatch(self, format!("only a string can be `in` a string, not {}", l.ty));
                        }
                    }
                    _ => mismatch(self, format!("`in` needs a list or a string on its right, not {}", r.ty)),
                }
                Ty::Bool
            }
            BinaryOp::Add | BinaryOp::Sub => {
                let text = |t: &Ty| matches!(t.non_null(), Ty::String | Ty::Enum { .. });
                if op == BinaryOp::Add && text(&lt) && text(&rt) {
                    Ty::String
                } else if lt.same_quantity(&rt) {
                    numeric_result(&lt, &rt)
                } else {
                    mismatch(self, format!("cannot apply `{}` to {} and {}", op.as_str(), l.ty, r.ty));
                    Ty::Any
                }
            }
            BinaryOp::Mul | BinaryOp::Div => {
                let (a, b) = (lt.non_null().clone(), rt.non_null().clone());
                if a.is_numeric() && b.is_numeric() {
                    if op == BinaryOp::Div {
                        Ty::Float
                    } else {
                        numeric_result(&a, &b)
                    }
                } else if a == Ty::Any || b == Ty::Any {
                    Ty::Any
                } else if b.is_numeric() && matches!(a, Ty::Duration | Ty::Money | Ty::Percent) {
                    a
                } else if op == BinaryOp::Mul && a.is_numeric() && matches!(b, Ty::Duration | Ty::Money | Ty::Percent) {
                    b
                } else if op == BinaryOp::Div && a == b && matches!(a, Ty::Duration | Ty::Money | Ty::Percent) {
                    Ty::Float
                } else {
                    mismatch(self, format!("cannot apply `{}` to {} and {}", op.as_str(), l.ty, r.ty));
                    Ty::Any
                }
            }
        };
        let Some(op) = crate::ir::BinOp::of(op) else { return TExpr::invalid() };
        texpr(TExprKind::Binary { op, lhs: Box::new(l), rhs: Box::new(r) }, ty)
    }
}

fn numeric_result(a: &Ty, b: &Ty) -> Ty {
    match (a.non_null(), b.non_null()) {
        (Ty::Int, Ty::Int) => Ty::Int,
        (Ty::Any, other) | (other, Ty::Any) => other.clone(),
        (x, y) if x.is_numeric() && y.is_numeric() => Ty::Float,
        (x, _) => x.clone(),
    }
}

fn list_span(expr: &Expr) -> flow_diagnostics::Span {
    match &expr.kind {
        ExprKind::Quantified { list, .. } => list.span,
        _ => expr.span,
    }
}

fn describe_texpr(expr: &TExpr) -> String {
    match &expr.kind {
        TExprKind::Var { name } => name.clone(),
        TExprKind::Field { base, name } => format!("{}.{name}", describe_texpr(base)),
        _ => "this".into(),
    }
}
