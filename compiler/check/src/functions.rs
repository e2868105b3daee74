//! The function library of expressions: what each function takes and
//! gives, checked here and evaluated by the engine (`flow_engine::eval`).
//!
//! Every function is total on well-typed values: it terminates (no
//! recursion, one pass or a sort over its lists) and its result depends
//! only on its arguments, so a computed value recomputes from the recorded
//! inputs and the verifier can treat a call like any other data read.

use crate::check::{Checker, Scope};
use crate::ir::{TExpr, TExprKind};
use crate::types::{FieldTy, Ty};
use flow_diagnostics::{closest_name, codes, Diagnostic, DiagnosticMut, Span};
use flow_syntax::ast::{Argument, Expr, ExprKind, Ident};
use indexmap::IndexMap;

/// Functions usable in expressions, with their signatures.
pub const FUNCTIONS: &[(&str, &str)] = &[
    ("len", "len(list or string) -> int"),
    ("exists", "exists(value) -> bool: the value is present (not null)"),
    ("lower", "lower(string) -> string"),
    ("upper", "upper(string) -> string"),
    ("contains", "contains(list or string, value) -> bool"),
    ("starts_with", "starts_with(string, prefix) -> bool"),
    ("matches", "matches(string, regex) -> bool: the regular expression matches somewhere in the string"),
    ("split", "split(string, separator) -> [string]"),
    ("tokens", "tokens(string) -> [string]: lowercased runs of letters and digits"),
    ("join", "join([string], separator) -> string: the strings with the separator between them"),
    ("text", "text(value) -> string: a string as it is, anything else as compact JSON (1, 0.75, true, null, [1,2])"),
    ("min", "min(list of numbers) or min(a, b) or min(x in xs: number) -> number"),
    ("max", "max(list of numbers) or max(a, b) or max(x in xs: number) -> number"),
    ("sum", "sum(list of numbers) or sum(x in xs: number) -> number"),
    ("avg", "avg(list of numbers) or avg(x in xs: number) -> float"),
    ("count", "count(list) or count(x in xs: condition) -> int"),
    ("filter", "filter(x in xs: condition) -> the elements for which it holds"),
    ("map", "map(x in xs: value) -> [value]"),
    ("flat_map", "flat_map(x in xs: list) -> the lists concatenated"),
    ("sort_by", "sort_by(x in xs: key) -> xs ordered by the key (number or string), stable"),
    ("group_by", "group_by(x in xs: key) -> [{ key, items }], groups in order of first appearance"),
    ("distinct", "distinct(list) -> the list without repeats (first kept)"),
    ("zip", "zip(list, list) -> [{ first, second }], as long as the shorter"),
    ("union", "union(list, list) -> elements of either, without repeats"),
    ("intersection", "intersection(list, list) -> elements of both, without repeats"),
    ("difference", "difference(list, list) -> elements of the first not in the second, without repeats"),
    ("jaccard", "jaccard(list, list) -> float: |A ∩ B| / |A ∪ B| of their distinct elements (1.0 when both are empty)"),
    ("round", "round(number) -> int, or round(number, digits) -> float"),
    ("clamp", "clamp(x, low, high) -> x kept within [low, high]"),
    ("if_else", "if_else(condition, then, otherwise) -> then when the condition holds, else otherwise (only that one is evaluated)"),
    ("keys", "keys(record) -> [string]"),
    ("values", "values(record) -> [value]"),
    ("get", "get(record or list, key) or get(record or list, key, default) -> the value there (else null or the default)"),
];

/// The functions whose only argument binds a variable: `f(x in xs: body)`.
pub const BINDING: &[&str] = &["filter", "map", "flat_map", "sort_by", "group_by", "count", "sum", "min", "max", "avg"];

fn texpr(kind: TExprKind, ty: Ty) -> TExpr {
    TExpr { kind, ty }
}

/// How many arguments a plain (non-binding) call takes.
fn arities(name: &str) -> &'static [usize] {
    match name {
        "contains" | "starts_with" | "matches" | "split" | "join" | "zip" | "union" | "intersection" | "difference" | "jaccard" => &[2],
        "min" | "max" | "round" => &[1, 2],
        "get" => &[2, 3],
        "clamp" | "if_else" => &[3],
        _ => &[1],
    }
}

fn signature(name: &str) -> &'static str {
    FUNCTIONS.iter().find(|(n, _)| *n == name).map(|(_, s)| *s).unwrap_or_default()
}

/// A number, or a quantity that averages, sums and orders like one.
fn is_quantity(ty: &Ty) -> bool {
    [Ty::Int, Ty::Duration, Ty::Money, Ty::Percent].iter().any(|q| ty.same_quantity(q))
}

impl Checker<'_> {
    pub(crate) fn type_call(&mut self, expr: &Expr, callee: &Expr, args: &[Argument], scope: &Scope) -> TExpr {
        let ExprKind::Name(name) = &callee.kind else {
            self.error(codes::UNKNOWN_FUNCTION, callee.span, "only named functions can be called");
            return TExpr::invalid();
        };
        if !FUNCTIONS.iter().any(|(n, _)| n == name) {
            self.unknown_function(name, callee.span);
            return TExpr::invalid();
        }
        if let Some(named) = args.iter().find_map(|a| a.name.as_ref()) {
            self.error(codes::WRONG_ARGUMENTS, named.span, format!("`{name}` takes no named arguments"));
            return TExpr::invalid();
        }
        if let [Argument { value: Expr { kind: ExprKind::Binder { var, list, body }, .. }, .. }] = args {
            return self.type_binding_call(expr, name, var, list, body, scope);
        }
        if let Some(binder) = args.iter().find(|a| matches!(a.value.kind, ExprKind::Binder { .. })) {
            let message = if BINDING.contains(&name.as_str()) {
                format!("`{name}(x in xs: …)` takes that one argument only")
            } else {
                format!("`{name}` binds no variable")
            };
            self.error(codes::WRONG_ARGUMENTS, binder.value.span, message)
                .with_note(format!("functions that bind one: {}", BINDING.join(", ")));
            return TExpr::invalid();
        }
        if matches!(name.as_str(), "filter" | "map" | "flat_map" | "sort_by" | "group_by") {
            self.error(codes::WRONG_ARGUMENTS, expr.span, format!("`{name}` takes a binding `x in xs: …`"))
                .with_note(signature(name).to_string());
            return TExpr::invalid();
        }
        let typed: Vec<TExpr> = args.iter().map(|a| self.type_expr(&a.value, scope)).collect();
        if typed.iter().any(|t| matches!(t.kind, TExprKind::Invalid)) {
            return TExpr::invalid();
        }
        let allowed = arities(name);
        if !allowed.contains(&typed.len()) {
            let counts: Vec<String> = allowed.iter().map(usize::to_string).collect();
            let plural = if allowed == [1] { "" } else { "s" };
            self.error(
                codes::WRONG_ARGUMENTS,
                expr.span,
                format!("`{name}` takes {} argument{plural}, {} given", counts.join(" or "), typed.len()),
            )
            .with_note(signature(name).to_string());
            return TExpr::invalid();
        }
        let tys: Vec<Ty> = typed.iter().map(|t| self.expand(t.ty.non_null())).collect();
        let ty = self.plain_result(name, args, &typed, &tys);
        texpr(TExprKind::Call { function: name.clone(), args: typed }, ty)
    }

    fn unknown_function(&mut self, name: &str, span: Span) {
        let names: Vec<&str> = FUNCTIONS.iter().map(|(n, _)| *n).collect();
        let mut d = Diagnostic::new(codes::UNKNOWN_FUNCTION, self.file, span, format!("unknown function `{name}`"))
            .with_primary_message("not a function")
            .with_note(format!("functions: {}", names.join(", ")));
        if let Some(s) = closest_name(name, names.iter().copied()) {
            d = d.with_suggestion(s);
        }
        self.diagnostics.push(d);
    }

    /// Complains that argument `i` of `name` is not `what`.
    fn bad_argument(&mut self, name: &str, args: &[Argument], tys: &[Ty], i: usize, what: &str) {
        self.error(codes::WRONG_ARGUMENTS, args[i].value.span, format!("`{name}` needs {what}, but this is {}", tys[i]))
            .with_note(signature(name).to_string());
    }

    /// The item type of a list argument (as declared: a named type stays
    /// named), complaining when it is no list.
    fn list_item(&mut self, name: &str, args: &[Argument], tys: &[Ty], i: usize) -> Ty {
        match &tys[i] {
            Ty::List { item } => (**item).clone(),
            Ty::Any => Ty::Any,
            _ => {
                self.bad_argument(name, args, tys, i, "a list");
                Ty::Any
            }
        }
    }

    fn plain_result(&mut self, name: &str, args: &[Argument], typed: &[TExpr], tys: &[Ty]) -> Ty {
        let stringy = |t: &Ty| matches!(t, Ty::String | Ty::Enum { .. } | Ty::Any);
        match name {
            "len" | "contains" => {
                if !matches!(tys[0], Ty::List { .. } | Ty::String | Ty::Any) {
                    self.bad_argument(name, args, tys, 0, "a list or a string");
                }
                if name == "len" {
                    Ty::Int
                } else {
                    Ty::Bool
                }
            }
            "count" => {
                self.list_item(name, args, tys, 0);
                Ty::Int
            }
            "exists" => Ty::Bool,
            "text" => Ty::String,
            "join" => {
                let item = self.list_item(name, args, tys, 0);
                if !stringy(&self.expand(&item)) {
                    self.bad_argument(name, args, tys, 0, "a list of strings");
                }
                if !stringy(&tys[1]) {
                    self.bad_argument(name, args, tys, 1, "a string");
                }
                Ty::String
            }
            "lower" | "upper" | "tokens" | "starts_with" | "split" | "matches" => {
                for i in 0..tys.len() {
                    if !stringy(&tys[i]) {
                        self.bad_argument(name, args, tys, i, "a string");
                    }
                }
                if name == "matches" {
                    self.check_pattern(&args[1], &typed[1]);
                }
                match name {
                    "lower" | "upper" => Ty::String,
                    "tokens" | "split" => Ty::list(Ty::String),
                    _ => Ty::Bool,
                }
            }
            "min" | "max" | "sum" | "avg" if tys.len() == 1 => {
                let item = self.list_item(name, args, tys, 0);
                let item = self.expand(&item);
                if !is_quantity(&item) && item != Ty::Any {
                    self.bad_argument(name, args, tys, 0, "a list of numbers");
                }
                aggregate(name, item)
            }
            "min" | "max" => {
                if !tys[0].same_quantity(&tys[1]) {
                    self.bad_argument(name, args, tys, 1, &format!("a value of the same kind as {}", tys[0]));
                }
                tys[0].clone()
            }
            "distinct" => Ty::list(self.list_item(name, args, tys, 0)),
            "union" | "intersection" | "difference" | "jaccard" => {
                let first = self.list_item(name, args, tys, 0);
                let second = self.list_item(name, args, tys, 1);
                match name {
                    "jaccard" => Ty::Float,
                    "union" if first != second => Ty::list(Ty::Any),
                    _ => Ty::list(first),
                }
            }
            "zip" => {
                let first = self.list_item(name, args, tys, 0);
                let second = self.list_item(name, args, tys, 1);
                Ty::list(record(&[("first", first), ("second", second)]))
            }
            "round" => {
                if !is_quantity(&tys[0]) && tys[0] != Ty::Any {
                    self.bad_argument(name, args, tys, 0, "a number");
                }
                if tys.len() == 2 && !matches!(tys[1], Ty::Int | Ty::Any) {
                    self.bad_argument(name, args, tys, 1, "a whole number of digits");
                }
                match (&tys[0], tys.len()) {
                    (Ty::Int | Ty::Float, 1) => Ty::Int,
                    (Ty::Int | Ty::Float, _) => Ty::Float,
                    (other, _) => other.clone(),
                }
            }
            "clamp" => {
                for i in 1..3 {
                    if !tys[0].same_quantity(&tys[i]) || !(is_quantity(&tys[i]) || tys[i] == Ty::Any) {
                        self.bad_argument(name, args, tys, i, &format!("a bound of the same kind as {}", tys[0]));
                    }
                }
                tys[0].clone()
            }
            "keys" | "values" => self.record_parts(name, args, tys),
            "if_else" => self.if_else_result(args, tys),
            _ => self.get_result(args, typed, tys),
        }
    }

    /// `if_else(condition, then, otherwise)`: a bool, then two values of
    /// one type (an int and a float make a float; strings and enums a
    /// string).
    fn if_else_result(&mut self, args: &[Argument], tys: &[Ty]) -> Ty {
        if !matches!(tys[0], Ty::Bool | Ty::Any) {
            self.bad_argument("if_else", args, tys, 0, "a condition (a bool)");
        }
        let stringy = |t: &Ty| matches!(t, Ty::String | Ty::Enum { .. });
        match (&tys[1], &tys[2]) {
            (Ty::Any, other) | (other, Ty::Any) => other.clone(),
            (a, b) if a == b => a.clone(),
            (Ty::Int, Ty::Float) | (Ty::Float, Ty::Int) => Ty::Float,
            (a, b) if stringy(a) && stringy(b) => Ty::String,
            (a, b) if self.assignable(a, b) => b.clone(),
            (a, b) if self.assignable(b, a) => a.clone(),
            _ => {
                self.bad_argument("if_else", args, tys, 2, &format!("a value of the same type as the other branch ({})", tys[1]));
                Ty::Any
            }
        }
    }

    /// `keys` and `values` of a record (or of `any`).
    fn record_parts(&mut self, name: &str, args: &[Argument], tys: &[Ty]) -> Ty {
        let fields = match &tys[0] {
            Ty::Record { fields } => Some(fields.clone()),
            Ty::Any => None,
            _ => {
                self.bad_argument(name, args, tys, 0, "a record");
                None
            }
        };
        if name == "keys" {
            return Ty::list(Ty::String);
        }
        let mut field_tys =
            fields.iter().flat_map(|f| f.values()).map(|f| if f.optional { Ty::nullable(f.ty.clone()) } else { f.ty.clone() });
        match field_tys.next() {
            Some(first) if field_tys.all(|t| t == first) => Ty::list(first),
            _ => Ty::list(Ty::Any),
        }
    }

    /// `get(x, key[, default])`: the field's type when `x` is a record and
    /// the key a literal naming one of its fields; a list's element type for
    /// an `int` index; else `any`.
    fn get_result(&mut self, args: &[Argument], typed: &[TExpr], tys: &[Ty]) -> Ty {
        let found = match (&tys[0], &tys[1], &typed[1].kind) {
            (Ty::Record { fields }, _, TExprKind::Literal { value }) => match value.as_ref() {
                crate::ir::Value::Str(key) => match fields.get(key) {
                    Some(field) => Some(if field.optional { Ty::nullable(field.ty.clone()) } else { field.ty.clone() }),
                    None => {
                        let names = fields.keys().map(String::as_str).collect::<Vec<_>>().join(", ");
                        self.error(codes::WRONG_ARGUMENTS, args[1].value.span, format!("the record has no field `{key}`"))
                            .with_note(format!("its fields: {names}"));
                        Some(Ty::Any)
                    }
                },
                _ => None,
            },
            (Ty::Record { .. } | Ty::Any, Ty::String | Ty::Enum { .. } | Ty::Any, _) => None,
            (Ty::List { item }, Ty::Int | Ty::Any, _) => Some(Ty::nullable((**item).clone())),
            (Ty::Record { .. }, _, _) => {
                self.bad_argument("get", args, tys, 1, "a string key");
                None
            }
            (Ty::List { .. }, _, _) => {
                self.bad_argument("get", args, tys, 1, "an int index");
                None
            }
            _ => {
                self.bad_argument("get", args, tys, 0, "a record or a list");
                None
            }
        };
        match (found, tys.get(2)) {
            (Some(ty), Some(_)) => ty.non_null().clone(),
            (Some(ty), None) => ty,
            (None, Some(default)) => default.clone(),
            (None, None) => Ty::Any,
        }
    }

    /// A literal pattern of `matches` must compile (a pattern computed at
    /// run time is checked when it is evaluated).
    fn check_pattern(&mut self, arg: &Argument, typed: &TExpr) {
        if let TExprKind::Literal { value } = &typed.kind {
            if let crate::ir::Value::Str(pattern) = value.as_ref() {
                if let Err(e) = compile_pattern(pattern) {
                    self.error(codes::WRONG_ARGUMENTS, arg.value.span, "not a regular expression `matches` can use").with_note(e);
                }
            }
        }
    }

    /// `f(x in xs: body)`.
    fn type_binding_call(&mut self, expr: &Expr, name: &str, var: &Ident, list: &Expr, body: &Expr, scope: &Scope) -> TExpr {
        if !BINDING.contains(&name) {
            self.error(codes::WRONG_ARGUMENTS, expr.span, format!("`{name}` binds no variable")).with_note(format!(
                "{}; functions that bind one: {}",
                signature(name),
                BINDING.join(", ")
            ));
            return TExpr::invalid();
        }
        let list = self.type_expr(list, scope);
        let item = match self.expand(list.ty.non_null()) {
            Ty::List { item } => *item,
            Ty::Any => Ty::Any,
            other => {
                if !matches!(list.kind, TExprKind::Invalid) {
                    self.error(codes::WRONG_ARGUMENTS, expr.span, format!("`{name}` ranges over a list, but this is {other}"));
                }
                Ty::Any
            }
        };
        let mut inner = scope.clone();
        inner.vars.push((var.text.clone(), item.clone()));
        let typed_body = self.type_expr(body, &inner);
        if matches!(list.kind, TExprKind::Invalid) || matches!(typed_body.kind, TExprKind::Invalid) {
            return TExpr::invalid();
        }
        let body_ty = self.expand(typed_body.ty.non_null());
        let wrong = |this: &mut Self, what: &str| {
            this.error(codes::WRONG_ARGUMENTS, body.span, format!("the body of `{name}` must be {what}, but this is {}", typed_body.ty))
                .with_note(signature(name).to_string());
        };
        let ty = match name {
            "filter" | "count" => {
                if !matches!(body_ty, Ty::Bool | Ty::Any) {
                    wrong(self, "a bool");
                }
                if name == "count" {
                    Ty::Int
                } else {
                    Ty::list(item)
                }
            }
            "map" => Ty::list(typed_body.ty.clone()),
            "flat_map" => match body_ty {
                Ty::List { item } => Ty::List { item },
                Ty::Any => Ty::list(Ty::Any),
                _ => {
                    wrong(self, "a list");
                    Ty::list(Ty::Any)
                }
            },
            "sort_by" => {
                if !(is_quantity(&body_ty) || matches!(body_ty, Ty::String | Ty::Enum { .. } | Ty::Any)) {
                    wrong(self, "a number or a string");
                }
                Ty::list(item)
            }
            "group_by" => Ty::list(record(&[("key", typed_body.ty.clone()), ("items", Ty::list(item))])),
            _ => {
                // sum, min, max, avg over the body's values.
                if !(is_quantity(&body_ty) || body_ty == Ty::Any) {
                    wrong(self, "a number");
                }
                aggregate(name, body_ty)
            }
        };
        texpr(
            TExprKind::Comprehension {
                function: name.to_string(),
                var: var.text.clone(),
                list: Box::new(list),
                body: Box::new(typed_body),
            },
            ty,
        )
    }
}

/// The type of `sum`, `min`, `max` or `avg` over values of type `item`.
fn aggregate(name: &str, item: Ty) -> Ty {
    match (name, item) {
        ("avg", Ty::Int | Ty::Float) => Ty::Float,
        (_, item) => item,
    }
}

fn record(fields: &[(&str, Ty)]) -> Ty {
    let fields: IndexMap<String, FieldTy> =
        fields.iter().map(|(name, ty)| (name.to_string(), FieldTy { ty: ty.clone(), optional: false })).collect();
    Ty::Record { fields }
}

/// The largest compiled program a `matches` pattern may make (bytes): a
/// pattern is data a flow file or an artifact supplies, so its size is
/// bounded like any other input.
pub const PATTERN_SIZE_LIMIT: usize = 1 << 20;

/// A compiled `matches` pattern.
pub type Pattern = regex::Regex;

/// Compiles a `matches` pattern (Rust `regex` syntax: no backreferences or
/// lookaround, matching in time linear in the text).
pub fn compile_pattern(pattern: &str) -> Result<Pattern, String> {
    regex::RegexBuilder::new(pattern).size_limit(PATTERN_SIZE_LIMIT).build().map_err(|e| e.to_string())
}
