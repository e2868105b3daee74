//! The layout engine: walks the AST and writes canonical text, pulling the
//! comments out of the token stream as it goes.
//!
//! Comments are kept in one sorted list with a cursor. Before any token is
//! written, every comment that starts before it is emitted, so comments
//! come out exactly once and in source order. Where a comment sits between
//! the elements of a sequence (items, block entries, list elements, fields,
//! arguments) it is placed structurally: on its own line when it started a
//! line in the source, at the end of the previous element's line otherwise.
//! Anywhere else it is emitted inline (a `//` comment then ends the line and
//! the expression continues on the next one, indented one level further).

use std::collections::HashMap;

use flow_diagnostics::Span;
use flow_syntax::ast::*;
use flow_syntax::lexer::{lex, Token, TokenKind};

use crate::{INDENT, MAX_WIDTH};

/// Formats an error-free parse of `source`. `Err` only when the tree holds
/// an error placeholder (which a clean parse never does).
pub(crate) fn print(source: &str, file: &SourceFile) -> Result<String, String> {
    let mut printer = Printer::new(source);
    printer.file(file);
    if let Some(error) = printer.error {
        return Err(error);
    }
    let mut out = printer.out;
    let trimmed = out.trim_end().len();
    out.truncate(trimmed);
    if !out.is_empty() {
        out.push('\n');
    }
    Ok(out)
}

/// One comment of the source.
#[derive(Debug, Clone)]
pub(crate) struct Comment {
    pub start: u32,
    pub end: u32,
    /// The text as it is printed: a line comment without trailing
    /// whitespace (so without a CR), a block comment with LF line ends.
    pub text: String,
    pub is_line: bool,
}

/// The comments of `source`, in order, normalised as the formatter prints
/// them.
pub(crate) fn comments(source: &str, tokens: &[Token]) -> Vec<Comment> {
    tokens
        .iter()
        .filter(|t| matches!(t.kind, TokenKind::LineComment | TokenKind::BlockComment))
        .map(|t| {
            let raw = source.get(t.span.range()).unwrap_or("");
            let is_line = t.kind == TokenKind::LineComment;
            let text = if is_line { raw.trim_end().to_string() } else { raw.replace("\r\n", "\n") };
            Comment { start: t.span.start, end: t.span.end, text, is_line }
        })
        .collect()
}

/// Binding strength of expressions, loosest first (grammar: `union`, `or`,
/// `and`, `not`, comparison, sum, product, negation, postfix, primary).
mod prec {
    pub const ANY: u8 = 0;
    pub const UNION: u8 = 1;
    pub const OR: u8 = 2;
    pub const AND: u8 = 3;
    pub const NOT: u8 = 4;
    pub const COMPARE: u8 = 5;
    pub const SUM: u8 = 6;
    pub const PRODUCT: u8 = 7;
    pub const NEG: u8 = 8;
    pub const POSTFIX: u8 = 9;
    pub const PRIMARY: u8 = 10;
}

/// Binding strength of formulas, loosest first (grammar: `implication`,
/// `f_or`, `f_and`, `f_until`, `f_unary`, atoms).
mod fprec {
    pub const ANY: u8 = 0;
    pub const IMPLIES: u8 = 1;
    pub const OR: u8 = 2;
    pub const AND: u8 = 3;
    pub const UNTIL: u8 = 4;
    pub const UNARY: u8 = 5;
    pub const ATOM: u8 = 6;
}

fn expr_prec(e: &Expr) -> u8 {
    match &e.kind {
        ExprKind::Binary { op, .. } => match op {
            BinaryOp::Union => prec::UNION,
            BinaryOp::Or => prec::OR,
            BinaryOp::And => prec::AND,
            BinaryOp::Eq | BinaryOp::NotEq | BinaryOp::Lt | BinaryOp::LtEq | BinaryOp::Gt | BinaryOp::GtEq | BinaryOp::In => prec::COMPARE,
            BinaryOp::Add | BinaryOp::Sub => prec::SUM,
            BinaryOp::Mul | BinaryOp::Div => prec::PRODUCT,
        },
        ExprKind::Unary { op: UnaryOp::Not, .. } => prec::NOT,
        ExprKind::Unary { op: UnaryOp::Neg, .. } => prec::NEG,
        ExprKind::Field { .. } | ExprKind::Call { .. } | ExprKind::Index { .. } | ExprKind::Nullable(_) => prec::POSTFIX,
        _ => prec::PRIMARY,
    }
}

/// The minimum binding strength of a binary operator's operands.
fn operand_precs(op: BinaryOp) -> (u8, u8) {
    match op {
        BinaryOp::Union => (prec::UNION, prec::OR),
        BinaryOp::Or => (prec::OR, prec::AND),
        BinaryOp::And => (prec::AND, prec::NOT),
        // Comparisons do not chain: both sides are sums.
        BinaryOp::Eq | BinaryOp::NotEq | BinaryOp::Lt | BinaryOp::LtEq | BinaryOp::Gt | BinaryOp::GtEq | BinaryOp::In => {
            (prec::SUM, prec::SUM)
        }
        BinaryOp::Add | BinaryOp::Sub => (prec::SUM, prec::PRODUCT),
        BinaryOp::Mul | BinaryOp::Div => (prec::PRODUCT, prec::NEG),
    }
}

fn formula_prec(f: &Formula) -> u8 {
    match &f.kind {
        FormulaKind::Implies(..) => fprec::IMPLIES,
        FormulaKind::Or(..) => fprec::OR,
        FormulaKind::And(..) => fprec::AND,
        FormulaKind::Until(..) => fprec::UNTIL,
        FormulaKind::Not(_)
        | FormulaKind::Never { .. }
        | FormulaKind::Always(_)
        | FormulaKind::Eventually(_)
        | FormulaKind::Within { .. } => fprec::UNARY,
        FormulaKind::Bool(_) | FormulaKind::Atom(_) | FormulaKind::Error => fprec::ATOM,
    }
}

/// One element of a bracketed or braced sequence.
#[derive(Clone, Copy)]
enum Elem<'a> {
    Expr(&'a Expr),
    Field(&'a Field),
    Arg(&'a Argument),
    Name(&'a Ident),
    Entry(&'a Entry),
}

impl Elem<'_> {
    fn span(self) -> Span {
        match self {
            Elem::Expr(e) => e.span,
            Elem::Field(f) => f.span,
            Elem::Arg(a) => a.span,
            Elem::Name(n) => n.span,
            Elem::Entry(e) => e.span(),
        }
    }
}

/// How the elements of a sequence are written on one line.
#[derive(Clone, Copy)]
struct Delims {
    open: &'static str,
    close: &'static str,
    /// `{ a }` rather than `{a}` when flat.
    padded: bool,
    /// Expanded elements end with `,` (lists, objects, arguments); block
    /// entries need no separator.
    commas: bool,
}

const LIST: Delims = Delims { open: "[", close: "]", padded: false, commas: true };
const ARGS: Delims = Delims { open: "(", close: ")", padded: false, commas: true };
const OBJECT: Delims = Delims { open: "{", close: "}", padded: true, commas: true };
const BLOCK: Delims = Delims { open: "{", close: "}", padded: true, commas: false };

struct Printer<'s> {
    src: &'s str,
    /// Significant tokens (no trivia), in order.
    tokens: Vec<Token>,
    comments: Vec<Comment>,
    /// The next comment not yet written.
    next: usize,
    /// Start of each `(` → end of its matching `)`.
    parens: HashMap<u32, u32>,

    out: String,
    indent: usize,
    col: usize,
    at_line_start: bool,
    /// The indentation of the next line, when it is not `indent` (after a
    /// `//` comment that interrupted an expression).
    next_line_indent: Option<usize>,
    /// A space is owed before the next token (after an inline block comment).
    pending_space: bool,
    /// Measuring mode: everything on one line, comments untouched.
    flat: bool,
    error: Option<String>,
}

impl<'s> Printer<'s> {
    fn new(src: &'s str) -> Printer<'s> {
        let all = lex(src);
        let comments = comments(src, &all);
        let tokens: Vec<Token> = all.into_iter().filter(|t| !t.kind.is_trivia()).collect();
        let mut parens = HashMap::new();
        let mut stack = Vec::new();
        for token in &tokens {
            match token.kind {
                TokenKind::LParen => stack.push(token.span.start),
                TokenKind::RParen => {
                    if let Some(open) = stack.pop() {
                        parens.insert(open, token.span.end);
                    }
                }
                _ => {}
            }
        }
        Printer {
            src,
            tokens,
            comments,
            next: 0,
            parens,
            out: String::new(),
            indent: 0,
            col: 0,
            at_line_start: true,
            next_line_indent: None,
            pending_space: false,
            flat: false,
            error: None,
        }
    }

    // ------------------------------------------------------------ writing

    fn write(&mut self, s: &str) {
        // Spaces that separate a token from the previous one are dropped
        // at the start of a line (after a `//` comment ended the last).
        let s = if self.at_line_start { s.trim_start_matches(' ') } else { s };
        if s.is_empty() {
            return;
        }
        if self.at_line_start {
            let indent = self.next_line_indent.take().unwrap_or(self.indent);
            self.out.extend(std::iter::repeat_n(' ', indent));
            self.col = indent;
            self.at_line_start = false;
            self.pending_space = false;
        } else if self.pending_space {
            self.pending_space = false;
            if !s.starts_with([' ', ',', ')', ']']) {
                self.out.push(' ');
                self.col += 1;
            }
        }
        self.out.push_str(s);
        match s.rfind('\n') {
            Some(i) => self.col = s[i + 1..].chars().count(),
            None => self.col += s.chars().count(),
        }
    }

    fn newline(&mut self) {
        if self.at_line_start {
            return;
        }
        let trimmed = self.out.trim_end_matches(' ').len();
        self.out.truncate(trimmed);
        self.out.push('\n');
        self.at_line_start = true;
        self.pending_space = false;
        self.col = 0;
    }

    /// Ends the line and leaves one empty line (never more, never at the
    /// start of the output).
    fn blank_line(&mut self) {
        self.newline();
        if !self.out.is_empty() && !self.out.ends_with("\n\n") {
            self.out.push('\n');
        }
    }

    fn column(&self) -> usize {
        if self.at_line_start {
            self.next_line_indent.unwrap_or(self.indent)
        } else {
            self.col + usize::from(self.pending_space)
        }
    }

    /// The width of what `f` writes, laid out flat on one line.
    fn measure(&mut self, f: impl FnOnce(&mut Self)) -> usize {
        let out = std::mem::take(&mut self.out);
        let saved = (self.col, self.at_line_start, self.next_line_indent, self.pending_space, self.flat);
        self.col = 0;
        self.at_line_start = false;
        self.next_line_indent = None;
        self.pending_space = false;
        self.flat = true;
        f(self);
        let width = self.out.chars().count();
        self.out = out;
        (self.col, self.at_line_start, self.next_line_indent, self.pending_space, self.flat) = saved;
        width
    }

    fn fail(&mut self, message: &str) {
        self.error.get_or_insert_with(|| message.to_string());
    }

    // ------------------------------------------------------------ source

    fn text(&self, span: Span) -> &'s str {
        self.src.get(span.range()).unwrap_or("")
    }

    fn newlines(&self, from: u32, to: u32) -> usize {
        if from >= to {
            return 0;
        }
        self.text(Span { start: from, end: to }).matches('\n').count()
    }

    /// Index of the first significant token starting at or after `pos`.
    fn token_index(&self, pos: u32) -> usize {
        self.tokens.partition_point(|t| t.span.start < pos)
    }

    /// The first token of `span` that is not a parenthesis: the literal of
    /// a leaf expression, however many parentheses the author put round it.
    fn leaf(&self, span: Span) -> &'s str {
        self.tokens[self.token_index(span.start)..]
            .iter()
            .take_while(|t| t.span.end <= span.end)
            .find(|t| !matches!(t.kind, TokenKind::LParen | TokenKind::RParen))
            .map(|t| self.text(t.span))
            .unwrap_or("")
    }

    /// The last token of `span` (the value of an atom argument).
    fn last_token(&self, span: Span) -> &'s str {
        let end = self.tokens.partition_point(|t| t.span.end <= span.end);
        match end.checked_sub(1).and_then(|i| self.tokens.get(i)) {
            Some(token) if token.span.start >= span.start => self.text(token.span),
            _ => "",
        }
    }

    /// The first significant token at or after `pos` (an opening bracket).
    fn token_at_or_after(&self, pos: u32) -> Option<Token> {
        self.tokens.get(self.token_index(pos)).copied()
    }

    /// Whether the author wrote parentheses round exactly this span (the
    /// parser drops them from the tree but keeps them in the span).
    fn parenthesized(&self, span: Span) -> bool {
        self.parens.get(&span.start) == Some(&span.end)
    }

    // ------------------------------------------------------------ comments

    fn has_comment(&self, from: u32, to: u32) -> bool {
        let i = self.comments.partition_point(|c| c.start < from);
        self.comments.get(i).is_some_and(|c| c.start < to)
    }

    fn pending_comment(&self, before: u32) -> Option<&Comment> {
        self.comments.get(self.next).filter(|c| c.start < before)
    }

    /// Writes, inline, every comment that starts before `pos`.
    fn flush(&mut self, pos: u32) {
        if self.flat {
            return;
        }
        while let Some(comment) = self.pending_comment(pos).cloned() {
            self.next += 1;
            if !self.at_line_start && !self.pending_space && !self.out.ends_with([' ', '(', '[']) {
                self.write(" ");
            }
            self.write(&comment.text);
            if comment.is_line {
                self.newline();
                self.next_line_indent = Some(self.indent + INDENT);
            } else {
                self.pending_space = true;
            }
        }
    }

    /// Writes, at the end of the current line, the comments after `after`
    /// that start on the same source line (and before `limit`). Returns the
    /// end of the last one written, or `after`.
    fn trailing_comments(&mut self, after: u32, limit: u32) -> u32 {
        let mut end = after;
        if self.flat {
            return end;
        }
        while let Some(comment) = self.pending_comment(limit).cloned() {
            if self.newlines(after, comment.start) > 0 {
                break;
            }
            self.next += 1;
            self.pending_space = false;
            self.write(" ");
            self.write(&comment.text);
            end = comment.end;
            if comment.is_line {
                break;
            }
        }
        end
    }

    /// Writes every comment before `pos` on a line of its own, keeping one
    /// blank line where the author left at least one (except before the
    /// first line of a sequence, `first`).
    fn own_line_comments(&mut self, prev_end: &mut u32, first: &mut bool, pos: u32) {
        while let Some(comment) = self.pending_comment(pos).cloned() {
            self.next += 1;
            if !*first && self.newlines(*prev_end, comment.start) >= 2 {
                self.blank_line();
            }
            self.newline();
            self.write(&comment.text);
            self.newline();
            *prev_end = comment.end;
            *first = false;
        }
    }

    // ------------------------------------------------------------ items

    fn file(&mut self, file: &SourceFile) {
        let mut prev_end = 0u32;
        let mut prev_one_line: Option<bool> = None;
        for (i, item) in file.items.iter().enumerate() {
            let span = item_span(item);
            // The comments before the item, and whether a blank line
            // precedes each of them and the item itself.
            let mut leading = Vec::new();
            let mut gap_from = prev_end;
            while let Some(comment) = self.pending_comment(span.start).cloned() {
                self.next += 1;
                leading.push((comment.text, self.newlines(gap_from, comment.start) >= 2));
                gap_from = comment.end;
            }
            let item_blank = self.newlines(gap_from, span.start) >= 2;

            // The item itself, with its trailing comments, into a buffer:
            // whether it fits on one line decides the separation.
            let saved = std::mem::take(&mut self.out);
            self.at_line_start = true;
            self.indent = 0;
            self.item(item);
            let limit = file.items.get(i + 1).map(|next| item_span(next).start).unwrap_or(self.src.len() as u32);
            let end = self.trailing_comments(span.end, limit).max(span.end);
            let text = std::mem::replace(&mut self.out, saved);
            let one_line = !text.contains('\n');

            // Items are separated by a blank line, except that one-line
            // items the author grouped (no blank line) stay together.
            let forced = prev_one_line.is_some_and(|prev| !(prev && one_line));
            self.at_line_start = true;
            for (k, (comment, blank)) in leading.iter().enumerate() {
                if *blank || (k == 0 && forced) {
                    self.blank_line();
                }
                self.write(comment);
                self.newline();
            }
            if item_blank || (leading.is_empty() && forced) {
                self.blank_line();
            }
            self.write(&text);
            self.newline();
            prev_end = end;
            prev_one_line = Some(one_line);
        }
        // Comments after the last item.
        while let Some(comment) = self.comments.get(self.next).cloned() {
            self.next += 1;
            if self.newlines(prev_end, comment.start) >= 2 {
                self.blank_line();
            }
            self.write(&comment.text);
            self.newline();
            prev_end = comment.end;
        }
    }

    fn item(&mut self, item: &Item) {
        match item {
            Item::Import(import) => {
                self.write("import ");
                match &import.target {
                    ImportTarget::Module(path) => {
                        for (i, part) in path.iter().enumerate() {
                            if i > 0 {
                                self.flush(part.span.start);
                                self.write(".");
                            }
                            self.name(part);
                        }
                    }
                    ImportTarget::Path(lit) => {
                        self.flush(lit.span.start);
                        let text = self.leaf(lit.span);
                        self.write(text);
                    }
                }
            }
            Item::Type(decl) => {
                self.write("type ");
                self.name(&decl.name);
                self.write(" = ");
                self.expr(&decl.value, prec::ANY, 0);
            }
            Item::Decl(decl) => {
                self.write(decl.keyword.as_str());
                self.write(" ");
                self.name(&decl.name);
                if let Some(variant) = &decl.variant {
                    self.write(": ");
                    self.name(variant);
                }
                if let Some(body) = &decl.body {
                    self.write(" ");
                    self.block(body);
                }
            }
            Item::Policy(policy) => self.policy(policy),
        }
    }

    fn name(&mut self, ident: &Ident) {
        self.flush(ident.span.start);
        self.write(&ident.text);
    }

    fn policy(&mut self, policy: &Policy) {
        self.write("policy ");
        self.name(&policy.name);
        self.write(": ");
        self.formula(&policy.formula, fprec::ANY);
        if let Some(body) = &policy.body {
            self.write(" ");
            self.block(body);
        }
    }

    // ------------------------------------------------------------ sequences

    /// A bracketed sequence: on one line when it holds no comment and fits
    /// (with `trail` more columns after it), else one element per line.
    fn sequence(&mut self, delims: Delims, open: u32, close: u32, elems: &[Elem], trail: usize) {
        self.flush(open);
        let flat = self.flat
            || (!self.has_comment(open, close)
                && (elems.is_empty() || {
                    let width = self.measure(|p| p.flat_sequence(delims, elems));
                    self.column() + width + trail <= MAX_WIDTH
                }));
        if flat {
            self.flat_sequence(delims, elems);
        } else {
            self.expanded_sequence(delims, open, close, elems);
        }
    }

    fn flat_sequence(&mut self, delims: Delims, elems: &[Elem]) {
        self.write(delims.open);
        if delims.padded && !elems.is_empty() {
            self.write(" ");
        }
        for (i, elem) in elems.iter().enumerate() {
            if i > 0 {
                self.write(", ");
            }
            self.elem(*elem, 0);
        }
        if delims.padded && !elems.is_empty() {
            self.write(" ");
        }
        self.write(delims.close);
    }

    /// One element per line, indented; comments between elements on their
    /// own lines or at the end of the element's line, as the author had
    /// them. `open` is the opening bracket's offset, `close` the closing's.
    fn expanded_sequence(&mut self, delims: Delims, open: u32, close: u32, elems: &[Elem]) {
        self.write(delims.open);
        self.indent += INDENT;
        let first_limit = elems.first().map(|e| e.span().start).unwrap_or(close);
        let mut prev_end = self.trailing_comments(open + 1, first_limit).max(open + 1);
        self.newline();
        let mut first = true;
        for (i, elem) in elems.iter().enumerate() {
            let span = elem.span();
            self.own_line_comments(&mut prev_end, &mut first, span.start);
            if !first && self.newlines(prev_end, span.start) >= 2 {
                self.blank_line();
            }
            first = false;
            self.elem(*elem, usize::from(delims.commas));
            let next = elems.get(i + 1).copied();
            if delims.commas || needs_separator(*elem, next) {
                self.write(",");
            }
            let limit = next.map(|n| n.span().start).unwrap_or(close);
            prev_end = self.trailing_comments(span.end, limit).max(span.end);
            self.newline();
        }
        self.own_line_comments(&mut prev_end, &mut first, close);
        self.indent -= INDENT;
        self.newline();
        self.write(delims.close);
    }

    fn elem(&mut self, elem: Elem, trail: usize) {
        match elem {
            Elem::Expr(e) => self.expr(e, prec::ANY, trail),
            Elem::Field(field) => {
                // A string key's span is its token: printed as written.
                self.flush(field.name.span.start);
                let key = self.text(field.name.span);
                self.write(key);
                if field.optional {
                    self.write("?");
                }
                self.write(": ");
                self.expr(&field.value, prec::ANY, trail);
            }
            Elem::Arg(arg) => {
                if let Some(name) = &arg.name {
                    self.name(name);
                    self.write(": ");
                }
                self.expr(&arg.value, prec::ANY, trail);
            }
            Elem::Name(name) => self.name(name),
            Elem::Entry(entry) => self.entry(entry),
        }
    }

    // ------------------------------------------------------------ blocks

    /// A block: on one line (`{ a: 1, b: 2 }`) when the author wrote it on
    /// one line, it holds no comment and it fits; else one entry per line.
    fn block(&mut self, block: &Block) {
        let elems: Vec<Elem> = block.entries.iter().map(Elem::Entry).collect();
        let (open, close) = (block.span.start, block.span.end.saturating_sub(1));
        self.flush(open);
        let inline = self.flat
            || (!self.has_comment(open, close)
                && (elems.is_empty()
                    || (!self.text(block.span).contains('\n') && {
                        let width = self.measure(|p| p.flat_sequence(BLOCK, &elems));
                        self.column() + width <= MAX_WIDTH
                    })));
        if inline {
            self.flat_sequence(BLOCK, &elems);
        } else {
            self.expanded_sequence(BLOCK, open, close, &elems);
        }
    }

    fn entry(&mut self, entry: &Entry) {
        match entry {
            Entry::Property(property) => {
                self.flush(property.key.span.start);
                self.write(&property.key.text);
                self.write(": ");
                self.expr(&property.value, prec::ANY, 0);
            }
            Entry::Handler(handler) => {
                self.write("on ");
                for (i, event) in handler.events.iter().enumerate() {
                    if i > 0 {
                        self.write(", ");
                    }
                    self.name(event);
                }
                self.write(" -> ");
                self.expr(&handler.action, prec::ANY, 0);
            }
            Entry::Node(node) => {
                self.write("node ");
                self.name(&node.name);
                self.write(": ");
                self.name(&node.kind);
                match &node.target {
                    NodeTarget::Name(name) => {
                        self.write(" ");
                        self.name(name)
                    }
                    NodeTarget::List(names, span) => {
                        self.write(" ");
                        let elems: Vec<Elem> = names.iter().map(Elem::Name).collect();
                        let trail = if node.body.is_some() { 2 } else { 0 };
                        self.sequence(LIST, span.start, span.end.saturating_sub(1), &elems, trail);
                    }
                    NodeTarget::None => {}
                }
                if let Some(body) = &node.body {
                    self.write(" ");
                    self.block(body);
                }
            }
            Entry::Gate(gate) => {
                self.write("gate ");
                self.name(&gate.name);
                self.write(": ");
                self.name(&gate.from);
                self.write(" -> ");
                self.name(&gate.to);
                self.write(" ");
                self.block(&gate.body);
            }
            Entry::Transfer(transfer) => {
                self.write(match transfer.kind {
                    TransferKind::Handoff => "handoff ",
                    TransferKind::Delegate => "delegate ",
                });
                self.name(&transfer.from);
                self.write(" -> ");
                self.name(&transfer.to);
                if let Some(body) = &transfer.body {
                    self.write(" ");
                    self.block(body);
                }
            }
            Entry::Policy(policy) => self.policy(policy),
            Entry::Record(record) => {
                self.write("record ");
                self.name(&record.name);
                self.write(" ");
                self.block(&record.body);
            }
            Entry::Edge(edge) => {
                for (i, node) in edge.path.iter().enumerate() {
                    if i > 0 {
                        self.write(" -> ");
                    }
                    self.name(node);
                }
                match &edge.guard {
                    Some(EdgeGuard::When(condition)) => {
                        self.write(" when ");
                        self.expr(condition, prec::ANY, 0);
                    }
                    Some(EdgeGuard::Else(span)) => {
                        self.flush(span.start);
                        self.write(" else");
                    }
                    None => {}
                }
            }
        }
    }

    // ------------------------------------------------------------ expressions

    /// Writes `e`, in parentheses when the author put them there or when
    /// its context binds tighter than `min`. `trail` is the width that
    /// follows it on the line (for the fits-on-one-line decisions).
    fn expr(&mut self, e: &Expr, min: u8, trail: usize) {
        flow_syntax::stack::guarded(|| self.expr_level(e, min, trail))
    }

    fn expr_level(&mut self, e: &Expr, min: u8, trail: usize) {
        self.flush(e.span.start);
        let parens = self.parenthesized(e.span) || expr_prec(e) < min;
        if parens {
            self.write("(");
            self.expr_bare(e, trail + 1);
            self.flush(e.span.end);
            self.write(")");
        } else {
            self.expr_bare(e, trail);
        }
    }

    fn expr_bare(&mut self, e: &Expr, trail: usize) {
        match &e.kind {
            ExprKind::Number { .. } | ExprKind::Money(_) | ExprKind::String(_) => {
                let text = self.leaf(e.span);
                self.write(text);
            }
            ExprKind::Bool(value) => self.write(if *value { "true" } else { "false" }),
            ExprKind::Null => self.write("null"),
            ExprKind::Name(name) => self.write(name),
            ExprKind::QuantifierWord(q) => self.write(quantifier(*q)),
            ExprKind::List(items) => {
                let elems: Vec<Elem> = items.iter().map(Elem::Expr).collect();
                let (open, close) = self.inner_brackets(e.span);
                self.sequence(LIST, open, close, &elems, trail);
            }
            ExprKind::Object(fields) => {
                let elems: Vec<Elem> = fields.iter().map(Elem::Field).collect();
                let (open, close) = self.inner_brackets(e.span);
                self.sequence(OBJECT, open, close, &elems, trail);
            }
            ExprKind::Field { base, name } => {
                let width = name.text.chars().count() + 1;
                self.expr(base, prec::POSTFIX, trail + width);
                self.flush(name.span.start);
                self.write(".");
                self.write(&name.text);
            }
            ExprKind::Call { callee, args } => {
                // A bare `any`/`all` followed by `(` would read as a quantifier.
                let callee_min = if matches!(callee.kind, ExprKind::QuantifierWord(_)) { prec::PRIMARY + 1 } else { prec::POSTFIX };
                self.expr(callee, callee_min, 1);
                let open = self.token_at_or_after(callee.span.end).map(|t| t.span.start).unwrap_or(callee.span.end);
                let elems: Vec<Elem> = args.iter().map(Elem::Arg).collect();
                self.sequence(ARGS, open, e.span.end.saturating_sub(1), &elems, trail);
            }
            ExprKind::Index { base, index } => {
                self.expr(base, prec::POSTFIX, 1);
                self.write("[");
                self.expr(index, prec::ANY, trail + 1);
                self.flush(e.span.end);
                self.write("]");
            }
            ExprKind::Nullable(inner) => {
                self.expr(inner, prec::POSTFIX, trail + 1);
                self.flush(e.span.end);
                self.write("?");
            }
            ExprKind::Unary { op, operand } => match op {
                UnaryOp::Not => {
                    self.write("not ");
                    self.expr(operand, prec::NOT, trail);
                }
                UnaryOp::Neg => {
                    self.write("-");
                    self.expr(operand, prec::NEG, trail);
                }
            },
            ExprKind::Binary { op, lhs, rhs } => {
                if matches!(op, BinaryOp::Union | BinaryOp::Or | BinaryOp::And) {
                    let operands = self.chain_operands(e, *op);
                    if !self.flat {
                        let width = self.measure(|p| p.expr_bare(e, 0));
                        if self.column() + width + trail > MAX_WIDTH {
                            self.broken_chain(&operands, *op, trail);
                            return;
                        }
                    }
                    self.inline_chain(&operands, *op, trail);
                    return;
                }
                let (lhs_min, rhs_min) = operand_precs(*op);
                let rest = if self.flat { 0 } else { self.measure(|p| p.expr(rhs, rhs_min, 0)) + op.as_str().len() + 2 };
                self.expr(lhs, lhs_min, rest + trail);
                self.write(" ");
                self.write(op.as_str());
                self.write(" ");
                self.expr(rhs, rhs_min, trail);
            }
            ExprKind::Quantified { quantifier: q, var, list, predicate } => {
                self.write(quantifier(*q));
                self.write("(");
                self.name(var);
                self.write(" in ");
                self.expr(list, prec::ANY, 2);
                self.write(": ");
                self.expr(predicate, prec::ANY, trail + 1);
                self.flush(e.span.end);
                self.write(")");
            }
            ExprKind::Binder { var, list, body } => {
                self.name(var);
                self.write(" in ");
                self.expr(list, prec::ANY, 2);
                self.write(": ");
                self.expr(body, prec::ANY, trail);
            }
            ExprKind::Error => self.fail("the syntax tree holds an error placeholder"),
        }
    }

    /// The operands of the chain of `op` rooted at `e`, in order. The parser
    /// builds these chains balanced; the author's parentheses, if any, end
    /// the chain (they are printed as written).
    fn chain_operands<'e>(&self, e: &'e Expr, op: BinaryOp) -> Vec<&'e Expr> {
        let mut operands = Vec::new();
        let mut pending = vec![e];
        while let Some(node) = pending.pop() {
            match &node.kind {
                ExprKind::Binary { op: inner, lhs, rhs } if *inner == op && (std::ptr::eq(node, e) || !self.parenthesized(node.span)) => {
                    pending.push(rhs);
                    pending.push(lhs);
                }
                _ => operands.push(node),
            }
        }
        operands
    }

    /// A chain `a and b and c` that fits on its line.
    fn inline_chain(&mut self, operands: &[&Expr], op: BinaryOp, trail: usize) {
        let (_, min) = operand_precs(op);
        // What follows each operand on the line: the later operands and
        // their operators (measured once each, so a long chain stays linear).
        let mut rests = vec![trail; operands.len()];
        if !self.flat {
            for i in (0..operands.len().saturating_sub(1)).rev() {
                rests[i] = rests[i + 1] + self.measure(|p| p.expr(operands[i + 1], min, 0)) + op.as_str().len() + 2;
            }
        }
        for (i, operand) in operands.iter().enumerate() {
            if i > 0 {
                self.write(" ");
                self.write(op.as_str());
                self.write(" ");
            }
            self.expr(operand, min, rests[i]);
        }
    }

    /// A chain `a and b and c` (or `or`, `|`) too long for its line: one
    /// operand per line, each continuation line starting with the operator
    /// and indented one level more.
    fn broken_chain(&mut self, operands: &[&Expr], op: BinaryOp, trail: usize) {
        let (_, min) = operand_precs(op);
        let last = operands.len() - 1;
        for (i, operand) in operands.iter().enumerate() {
            if i == 0 {
                self.expr(operand, min, 0);
                continue;
            }
            // Comments before the operator end the previous line.
            let previous_end = operands[i - 1].span.end;
            let op_start = self.token_at_or_after(previous_end).map(|t| t.span.start).unwrap_or(previous_end);
            self.flush(op_start);
            self.newline();
            self.next_line_indent = Some(self.indent + INDENT);
            self.write(op.as_str());
            self.write(" ");
            self.expr(operand, min, if i == last { trail } else { 0 });
        }
    }

    /// The offsets of the opening and closing bracket of a list or object
    /// whose span may include the author's parentheses.
    fn inner_brackets(&self, span: Span) -> (u32, u32) {
        let start = self.tokens[self.token_index(span.start)..]
            .iter()
            .take_while(|t| t.span.end <= span.end)
            .find(|t| t.kind != TokenKind::LParen)
            .map(|t| t.span.start)
            .unwrap_or(span.start);
        let end = self.tokens[..self.tokens.partition_point(|t| t.span.end <= span.end)]
            .iter()
            .rev()
            .take_while(|t| t.span.start >= span.start)
            .find(|t| t.kind != TokenKind::RParen)
            .map(|t| t.span.start)
            .unwrap_or(span.end.saturating_sub(1));
        (start, end)
    }

    // ------------------------------------------------------------ formulas

    fn formula(&mut self, f: &Formula, min: u8) {
        self.formula_in(f, min, false);
    }

    /// A chain of `and` or `or` (built balanced by the parser), printed flat
    /// in order; the author's parentheses end the chain.
    fn formula_chain(&mut self, f: &Formula, op: &str, min: u8) {
        let same = |a: &FormulaKind, b: &FormulaKind| std::mem::discriminant(a) == std::mem::discriminant(b);
        let mut operands = Vec::new();
        let mut pending = vec![f];
        while let Some(node) = pending.pop() {
            match &node.kind {
                FormulaKind::And(a, b) | FormulaKind::Or(a, b)
                    if same(&node.kind, &f.kind) && (std::ptr::eq(node, f) || !self.parenthesized(node.span)) =>
                {
                    pending.push(b);
                    pending.push(a);
                }
                _ => operands.push(node),
            }
        }
        for (i, operand) in operands.into_iter().enumerate() {
            if i > 0 {
                self.write(op);
            }
            self.formula(operand, min);
        }
    }

    /// `guard_before`: the formula is the body of a `never … before …`, so
    /// an unparenthesised `never` at its right edge would take the `before`.
    fn formula_in(&mut self, f: &Formula, min: u8, guard_before: bool) {
        flow_syntax::stack::guarded(|| self.formula_in_level(f, min, guard_before))
    }

    fn formula_in_level(&mut self, f: &Formula, min: u8, guard_before: bool) {
        self.flush(f.span.start);
        let parens = self.parenthesized(f.span) || formula_prec(f) < min || (guard_before && self.open_never(f));
        if parens {
            self.write("(");
            self.formula_bare(f);
            self.flush(f.span.end);
            self.write(")");
        } else {
            self.formula_bare(f);
        }
    }

    /// Whether `f`, printed without parentheses, ends in a `never` with no
    /// `before` (which would capture a following `before`).
    fn open_never(&self, f: &Formula) -> bool {
        if self.parenthesized(f.span) {
            return false;
        }
        match &f.kind {
            FormulaKind::Never { before: None, .. } => true,
            FormulaKind::Never { before: Some(before), .. } => self.open_never(before),
            FormulaKind::Not(body) | FormulaKind::Always(body) | FormulaKind::Eventually(body) | FormulaKind::Within { body, .. } => {
                self.open_never(body)
            }
            _ => false,
        }
    }

    fn formula_bare(&mut self, f: &Formula) {
        match &f.kind {
            FormulaKind::Bool(value) => self.write(if *value { "true" } else { "false" }),
            FormulaKind::Atom(atom) => {
                self.name(&atom.name);
                self.write("(");
                for (i, arg) in atom.args.iter().enumerate() {
                    if i > 0 {
                        self.write(", ");
                    }
                    self.flush(arg.span.start);
                    if let Some(name) = &arg.name {
                        self.write(&name.text);
                        self.write(": ");
                    }
                    let value = self.last_token(arg.span);
                    self.flush(arg.span.end.saturating_sub(value.len() as u32));
                    self.write(value);
                }
                self.flush(atom.span.end);
                self.write(")");
            }
            FormulaKind::Not(body) => {
                self.write("not ");
                self.formula(body, fprec::UNARY);
            }
            FormulaKind::Never { body, before } => {
                self.write("never ");
                self.formula_in(body, fprec::UNARY, before.is_some());
                if let Some(before) = before {
                    self.write(" before ");
                    self.formula(before, fprec::UNARY);
                }
            }
            FormulaKind::Always(body) => {
                self.write("always ");
                self.formula(body, fprec::UNARY);
            }
            FormulaKind::Eventually(body) => {
                self.write("eventually ");
                self.formula(body, fprec::UNARY);
            }
            FormulaKind::Within { steps_span, body, .. } => {
                self.write("within ");
                self.flush(steps_span.start);
                let steps = self.text(*steps_span);
                self.write(steps);
                self.write(" steps ");
                self.formula(body, fprec::UNARY);
            }
            FormulaKind::Until(a, b) => {
                self.formula(a, fprec::UNARY);
                self.write(" until ");
                self.formula(b, fprec::UNARY);
            }
            FormulaKind::And(..) => self.formula_chain(f, " and ", fprec::UNTIL),
            FormulaKind::Or(..) => self.formula_chain(f, " or ", fprec::AND),
            FormulaKind::Implies(a, b) => {
                self.formula(a, fprec::OR);
                self.write(" => ");
                self.formula(b, fprec::IMPLIES);
            }
            FormulaKind::Error => self.fail("the syntax tree holds an error placeholder"),
        }
    }
}

fn quantifier(q: Quantifier) -> &'static str {
    match q {
        Quantifier::Any => "any",
        Quantifier::All => "all",
    }
}

fn item_span(item: &Item) -> Span {
    match item {
        Item::Import(i) => i.span,
        Item::Type(t) => t.span,
        Item::Decl(d) => d.span,
        Item::Policy(p) => p.span,
    }
}

/// Block entries need no separator, except that an edge without a guard
/// followed by a property named `when` or `else` would read the key as the
/// edge's guard.
fn needs_separator(elem: Elem, next: Option<Elem>) -> bool {
    match (elem, next) {
        (Elem::Entry(Entry::Edge(edge)), Some(Elem::Entry(Entry::Property(property)))) => {
            edge.guard.is_none() && matches!(property.key.text.as_str(), "when" | "else")
        }
        _ => false,
    }
}
