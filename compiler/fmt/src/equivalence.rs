//! Syntax-tree equivalence up to layout: two files are equivalent when their
//! ASTs are equal once every span is erased.
//!
//! The formatter's contract is that it changes layout only; [`crate::format()`]
//! checks its own output against the input with [`equivalent`] before
//! returning it.

use flow_diagnostics::Span;
use flow_syntax::ast::*;

/// Whether `a` and `b` are the same tree, ignoring every span.
pub fn equivalent(a: &SourceFile, b: &SourceFile) -> bool {
    erase_spans(a) == erase_spans(b)
}

/// A copy of `file` with every span set to the empty span at offset 0.
pub fn erase_spans(file: &SourceFile) -> SourceFile {
    let mut file = file.clone();
    for item in &mut file.items {
        item_(item);
    }
    file
}

fn zero(span: &mut Span) {
    *span = Span::default();
}

fn ident(ident: &mut Ident) {
    zero(&mut ident.span);
}

fn item_(item: &mut Item) {
    match item {
        Item::Import(import) => {
            zero(&mut import.span);
            match &mut import.target {
                ImportTarget::Module(path) => path.iter_mut().for_each(ident),
                ImportTarget::Path(lit) => zero(&mut lit.span),
            }
        }
        Item::Type(decl) => {
            zero(&mut decl.span);
            ident(&mut decl.name);
            expr(&mut decl.value);
        }
        Item::Decl(decl) => {
            zero(&mut decl.span);
            ident(&mut decl.name);
            if let Some(variant) = &mut decl.variant {
                ident(variant);
            }
            if let Some(body) = &mut decl.body {
                block(body);
            }
        }
        Item::Policy(p) => policy(p),
    }
}

fn policy(policy: &mut Policy) {
    zero(&mut policy.span);
    ident(&mut policy.name);
    formula(&mut policy.formula);
    if let Some(body) = &mut policy.body {
        block(body);
    }
}

fn block(block: &mut Block) {
    zero(&mut block.span);
    for entry in &mut block.entries {
        match entry {
            Entry::Property(p) => {
                zero(&mut p.span);
                ident(&mut p.key);
                expr(&mut p.value);
            }
            Entry::Handler(h) => {
                zero(&mut h.span);
                h.events.iter_mut().for_each(ident);
                expr(&mut h.action);
            }
            Entry::Node(n) => {
                zero(&mut n.span);
                ident(&mut n.name);
                ident(&mut n.kind);
                match &mut n.target {
                    NodeTarget::Name(name) => ident(name),
                    NodeTarget::List(names, span) => {
                        names.iter_mut().for_each(ident);
                        zero(span);
                    }
                    NodeTarget::None => {}
                }
                if let Some(body) = &mut n.body {
                    self::block(body);
                }
            }
            Entry::Gate(g) => {
                zero(&mut g.span);
                ident(&mut g.name);
                ident(&mut g.from);
                ident(&mut g.to);
                self::block(&mut g.body);
            }
            Entry::Transfer(t) => {
                zero(&mut t.span);
                ident(&mut t.from);
                ident(&mut t.to);
                if let Some(body) = &mut t.body {
                    self::block(body);
                }
            }
            Entry::Policy(p) => policy(p),
            Entry::Record(r) => {
                zero(&mut r.span);
                ident(&mut r.name);
                self::block(&mut r.body);
            }
            Entry::Edge(e) => {
                zero(&mut e.span);
                e.path.iter_mut().for_each(ident);
                match &mut e.guard {
                    Some(EdgeGuard::When(condition)) => expr(condition),
                    Some(EdgeGuard::Else(span)) => zero(span),
                    None => {}
                }
            }
        }
    }
}

fn expr(e: &mut Expr) {
    zero(&mut e.span);
    match &mut e.kind {
        ExprKind::Number { .. }
        | ExprKind::Money(_)
        | ExprKind::String(_)
        | ExprKind::Bool(_)
        | ExprKind::Null
        | ExprKind::Name(_)
        | ExprKind::QuantifierWord(_)
        | ExprKind::Error => {}
        ExprKind::List(items) => items.iter_mut().for_each(expr),
        ExprKind::Object(fields) => {
            for field in fields {
                zero(&mut field.span);
                ident(&mut field.name);
                expr(&mut field.value);
            }
        }
        ExprKind::Field { base, name } => {
            expr(base);
            ident(name);
        }
        ExprKind::Call { callee, args } => {
            expr(callee);
            for arg in args {
                zero(&mut arg.span);
                if let Some(name) = &mut arg.name {
                    ident(name);
                }
                expr(&mut arg.value);
            }
        }
        ExprKind::Index { base, index } => {
            expr(base);
            expr(index);
        }
        ExprKind::Nullable(inner) => expr(inner),
        ExprKind::Unary { operand, .. } => expr(operand),
        ExprKind::Binary { lhs, rhs, .. } => {
            expr(lhs);
            expr(rhs);
        }
        ExprKind::Quantified { var, list, predicate, .. } => {
            ident(var);
            expr(list);
            expr(predicate);
        }
        ExprKind::Binder { var, list, body } => {
            ident(var);
            expr(list);
            expr(body);
        }
    }
}

fn formula(f: &mut Formula) {
    zero(&mut f.span);
    match &mut f.kind {
        FormulaKind::Bool(_) | FormulaKind::Error => {}
        FormulaKind::Atom(atom) => {
            zero(&mut atom.span);
            ident(&mut atom.name);
            for arg in &mut atom.args {
                zero(&mut arg.span);
                if let Some(name) = &mut arg.name {
                    ident(name);
                }
            }
        }
        FormulaKind::Not(body) | FormulaKind::Always(body) | FormulaKind::Eventually(body) => formula(body),
        FormulaKind::Never { body, before } => {
            formula(body);
            if let Some(before) = before {
                formula(before);
            }
        }
        FormulaKind::Within { steps_span, body, .. } => {
            zero(steps_span);
            formula(body);
        }
        FormulaKind::Until(a, b) | FormulaKind::And(a, b) | FormulaKind::Or(a, b) | FormulaKind::Implies(a, b) => {
            formula(a);
            formula(b);
        }
    }
}
