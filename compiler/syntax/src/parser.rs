//! The production parser: hand-written recursive descent over the logos
//! tokens, mirroring `grammar/flow.pest` rule by rule.
//!
//! Parsing never fails. A syntax error is reported once, as a diagnostic,
//! and the parser recovers: inside a block it skips to the next entry (a
//! `;` or `,`, a line that starts an entry, or the closing `}`), and at the
//! top level it skips to the next item keyword. So one run reports every
//! independent syntax error.
//!
//! Where the PEG grammar would backtrack, this parser looks ahead instead;
//! the comments at those places say why the two agree. A differential test
//! (tests/tests/differential.rs) holds the agreement on the whole corpus and
//! on mutated inputs.

use crate::ast::*;
use crate::chain;
use crate::lexer::{Token, TokenKind, Tokens};
use flow_diagnostics::{codes, Diagnostic, FileId, Label, Span};

/// The result of parsing one file: a tree, always, and the syntax errors.
#[derive(Debug, Clone)]
pub struct Parse {
    pub file: SourceFile,
    pub diagnostics: Vec<Diagnostic>,
}

/// Parses `source` (the text of `file`). Never fails, never panics.
pub fn parse(file: FileId, source: &str) -> Parse {
    let mut diagnostics = Vec::new();
    let mut dropped = 0usize;
    // About one significant token per six bytes of source.
    let mut tokens = Vec::with_capacity(source.len() / 6 + 16);
    // Whether each significant token is the first on its line at column 0;
    // used by recovery to spot the next top-level item.
    let mut at_line_start = Vec::with_capacity(source.len() / 6 + 16);
    let mut line_start = true;
    for token in Tokens::new(source) {
        match token.kind {
            // At column 0 when the whitespace ends with its last newline.
            TokenKind::Whitespace => line_start = source.as_bytes()[token.span.end as usize - 1] == b'\n',
            TokenKind::LineComment | TokenKind::BlockComment => line_start = false,
            TokenKind::Error => {
                let text = &source[token.span.range()];
                let message = if text.starts_with('"') {
                    "unterminated string or invalid escape".to_string()
                } else {
                    format!("invalid character{} `{}`", if text.chars().count() > 1 { "s" } else { "" }, text.escape_debug())
                };
                if diagnostics.len() < MAX_SYNTAX_ERRORS {
                    diagnostics
                        .push(Diagnostic::new(codes::INVALID_TOKEN, file, token.span, message).with_primary_message("not a Flow token"));
                } else {
                    dropped += 1;
                }
                line_start = false;
            }
            _ => {
                tokens.push(token);
                at_line_start.push(line_start);
                line_start = false;
            }
        }
    }
    let mut parser =
        Parser { file, source, tokens, at_line_start, pos: 0, diagnostics: Vec::new(), dropped, depth: 0, height: 0, partial_entry: None };
    let file_ast = parser.source_file();
    let mut dropped = parser.dropped;
    diagnostics.append(&mut parser.diagnostics);
    diagnostics.sort_by_key(|d| d.primary().map(|l| l.span.start).unwrap_or(0));
    if diagnostics.len() > MAX_SYNTAX_ERRORS {
        dropped += diagnostics.len() - MAX_SYNTAX_ERRORS;
        diagnostics.truncate(MAX_SYNTAX_ERRORS);
    }
    // On the first error, which every capped report shows.
    if let Some(first) = diagnostics.first_mut().filter(|_| dropped > 0) {
        first.notes.push(format!("and {dropped} more syntax errors in this file, not kept (at most {MAX_SYNTAX_ERRORS} are)"));
    }
    Parse { file: file_ast, diagnostics }
}

/// The most syntax errors kept per file (the first by position); the rest
/// are only counted, in a note on the first. A file of random text
/// would otherwise hold one diagnostic per few bytes in memory.
pub const MAX_SYNTAX_ERRORS: usize = 1_000;

/// A syntax error has been reported; unwind to the nearest recovery point.
#[derive(Debug)]
struct Fail;

type PResult<T> = Result<T, Fail>;

/// Deeper nesting than this is refused rather than risking the stack.
const MAX_DEPTH: u32 = 100;

/// The tallest expression or formula tree the parser builds. Every later
/// pass (checker, lowering, verifier, model checker, policy compiler,
/// evaluator, formatter, language server) walks these trees recursively;
/// this bound is what keeps each of them within its stack. Chains of the
/// associative operators (`and`, `or`, `|`) are built balanced, so they add
/// only the logarithm of their length; `+ - * /` chains, postfix chains
/// (`a.b.c`, `T??`) and prefix chains add one level per operator.
pub const MAX_TREE_HEIGHT: u32 = 256;

struct Parser<'s> {
    file: FileId,
    source: &'s str,
    /// Significant tokens only (no trivia, no error tokens).
    tokens: Vec<Token>,
    at_line_start: Vec<bool>,
    pos: usize,
    /// The parser's own syntax errors (at most [`MAX_SYNTAX_ERRORS`]).
    diagnostics: Vec<Diagnostic>,
    /// Syntax errors past the limit: counted, not kept.
    dropped: usize,
    depth: u32,
    /// The height of the expression or formula tree the last expression or
    /// formula function returned (a leaf is 1); see [`MAX_TREE_HEIGHT`].
    height: u32,
    /// An entry whose header parsed before an error: kept in the tree
    /// (with an `Error` value) so later phases see it was written.
    partial_entry: Option<Entry>,
}

fn is_item_start(kind: TokenKind) -> bool {
    matches!(
        kind,
        TokenKind::KwImport
            | TokenKind::KwType
            | TokenKind::KwWorkflow
            | TokenKind::KwMachine
            | TokenKind::KwPolicy
            | TokenKind::KwPrincipal
            | TokenKind::KwProvider
            | TokenKind::KwAgent
            | TokenKind::KwTool
            | TokenKind::KwEvaluator
            | TokenKind::KwBudget
            | TokenKind::KwContract
            | TokenKind::KwBlackboard
            | TokenKind::KwCompute
            | TokenKind::KwProjection
    )
}

fn decl_keyword(kind: TokenKind) -> Option<DeclKeyword> {
    Some(match kind {
        TokenKind::KwPrincipal => DeclKeyword::Principal,
        TokenKind::KwProvider => DeclKeyword::Provider,
        TokenKind::KwAgent => DeclKeyword::Agent,
        TokenKind::KwTool => DeclKeyword::Tool,
        TokenKind::KwEvaluator => DeclKeyword::Evaluator,
        TokenKind::KwBudget => DeclKeyword::Budget,
        TokenKind::KwContract => DeclKeyword::Contract,
        TokenKind::KwBlackboard => DeclKeyword::Blackboard,
        TokenKind::KwCompute => DeclKeyword::Compute,
        TokenKind::KwProjection => DeclKeyword::Projection,
        TokenKind::KwMachine => DeclKeyword::Machine,
        TokenKind::KwWorkflow => DeclKeyword::Workflow,
        _ => return None,
    })
}

/// A word usable as a property key or field name: an identifier or any
/// keyword (grammar rule `key`).
fn is_word(kind: TokenKind) -> bool {
    kind == TokenKind::Ident || kind.is_keyword()
}

impl<'s> Parser<'s> {
    // ------------------------------------------------------------ cursor

    fn peek(&self) -> Option<TokenKind> {
        self.tokens.get(self.pos).map(|t| t.kind)
    }

    fn peek_at(&self, offset: usize) -> Option<TokenKind> {
        self.tokens.get(self.pos + offset).map(|t| t.kind)
    }

    fn at(&self, kind: TokenKind) -> bool {
        self.peek() == Some(kind)
    }

    /// A binary keyword operator (`and`, `or`, `in`, `until`, `before`), or
    /// an edge's `when` guard, is one only when no `:` follows: `and:` starts
    /// a property, and the PEG grammar backtracks out of the operator there.
    fn at_operator_keyword(&self, kind: TokenKind) -> bool {
        self.at(kind) && self.peek_at(1) != Some(TokenKind::Colon)
    }

    fn current_span(&self) -> Span {
        match self.tokens.get(self.pos) {
            Some(token) => token.span,
            None => Span::new(self.source.len(), self.source.len()),
        }
    }

    fn previous_end(&self) -> u32 {
        if self.pos == 0 {
            0
        } else {
            self.tokens[self.pos - 1].span.end
        }
    }

    fn span_from(&self, start: u32) -> Span {
        Span { start, end: self.previous_end().max(start) }
    }

    fn bump(&mut self) -> Token {
        let token = self.tokens[self.pos];
        self.pos += 1;
        token
    }

    fn eat(&mut self, kind: TokenKind) -> Option<Token> {
        if self.at(kind) {
            Some(self.bump())
        } else {
            None
        }
    }

    fn text(&self, token: Token) -> &'s str {
        &self.source[token.span.range()]
    }

    fn found(&self) -> String {
        match self.tokens.get(self.pos) {
            Some(token) if token.kind == TokenKind::Ident => format!("identifier `{}`", self.text(*token)),
            Some(token) if token.kind.is_keyword() => format!("keyword `{}`", self.text(*token)),
            Some(token) => token.kind.describe().to_string(),
            None => "end of file".to_string(),
        }
    }

    /// Keeps a syntax error, or only counts it past [`MAX_SYNTAX_ERRORS`].
    fn report(&mut self, diagnostic: Diagnostic) {
        if self.diagnostics.len() < MAX_SYNTAX_ERRORS {
            self.diagnostics.push(diagnostic);
        } else {
            self.dropped += 1;
        }
    }

    fn error_expected(&mut self, expected: &str) -> Fail {
        let message = format!("expected {expected}, found {}", self.found());
        let diagnostic = Diagnostic::new(codes::UNEXPECTED_TOKEN, self.file, self.current_span(), message)
            .with_primary_message(format!("expected {expected}"));
        self.report(diagnostic);
        Fail
    }

    fn expect(&mut self, kind: TokenKind, expected: &str) -> PResult<Token> {
        match self.eat(kind) {
            Some(token) => Ok(token),
            None => Err(self.error_expected(expected)),
        }
    }

    fn ident(&mut self, what: &str) -> PResult<Ident> {
        if self.at(TokenKind::Ident) {
            let token = self.bump();
            Ok(Ident { text: self.text(token).to_string(), span: token.span })
        } else if self.peek().is_some_and(|k| k.is_keyword()) {
            let token = self.tokens[self.pos];
            let word = self.text(token);
            let diagnostic =
                Diagnostic::new(codes::UNEXPECTED_TOKEN, self.file, token.span, format!("expected {what}, found keyword `{word}`"))
                    .with_primary_message("reserved word")
                    .with_help(format!("`{word}` is reserved; choose another name such as `{word}_`"));
            self.report(diagnostic);
            Err(Fail)
        } else {
            Err(self.error_expected(what))
        }
    }

    /// Grammar rule `key`: any identifier or keyword.
    fn word(&mut self, what: &str) -> PResult<Ident> {
        if self.peek().is_some_and(is_word) {
            let token = self.bump();
            Ok(Ident { text: self.text(token).to_string(), span: token.span })
        } else {
            Err(self.error_expected(what))
        }
    }

    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            let diagnostic =
                Diagnostic::new(codes::TOO_DEEP, self.file, self.current_span(), format!("nesting deeper than {MAX_DEPTH} levels"))
                    .with_primary_message("too deep")
                    .with_note("Flow limits nesting so that no input can exhaust the parser's stack");
            self.report(diagnostic);
            self.depth -= 1;
            return Err(Fail);
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    // ------------------------------------------------------------ recovery

    /// Skips one token, or a whole balanced group if it opens one. Stops at
    /// end of file if the group is never closed.
    fn skip_balanced(&mut self) {
        let mut depth = 0usize;
        while let Some(kind) = self.peek() {
            self.pos += 1;
            match kind {
                TokenKind::LBrace | TokenKind::LParen | TokenKind::LBracket => depth += 1,
                TokenKind::RBrace | TokenKind::RParen | TokenKind::RBracket => depth = depth.saturating_sub(1),
                _ => {}
            }
            if depth == 0 {
                return;
            }
        }
    }

    /// Whether the current token plausibly starts a new top-level item: an
    /// item keyword at the very start of a line, followed by a name.
    fn at_new_item(&self) -> bool {
        self.peek().is_some_and(is_item_start)
            && self.at_line_start.get(self.pos).copied().unwrap_or(false)
            && self.peek_at(1).is_some_and(|k| k == TokenKind::Ident || k == TokenKind::String)
    }

    /// Whether the current token starts a block entry with certainty.
    fn at_entry_start(&self) -> bool {
        match self.peek() {
            Some(
                TokenKind::KwNode
                | TokenKind::KwGate
                | TokenKind::KwHandoff
                | TokenKind::KwDelegate
                | TokenKind::KwOn
                | TokenKind::KwPolicy,
            ) => self.peek_at(1) == Some(TokenKind::Ident),
            Some(kind) if is_word(kind) => {
                matches!(self.peek_at(1), Some(TokenKind::Colon)) || (kind == TokenKind::Ident && self.peek_at(1) == Some(TokenKind::Arrow))
            }
            _ => false,
        }
    }

    /// After an error inside a block entry that started at token `entry_start`:
    /// rewind to the entry's start and skip it, tracking brackets, up to a
    /// separator, the start of the next entry on a new line, the block's
    /// `}`, or a new top-level item.
    fn recover_in_block(&mut self, entry_start: usize) {
        self.pos = entry_start + 1;
        let mut depth = 0usize;
        while let Some(kind) = self.peek() {
            if self.at_new_item() {
                return;
            }
            match kind {
                TokenKind::LBrace | TokenKind::LParen | TokenKind::LBracket => depth += 1,
                TokenKind::RBrace | TokenKind::RParen | TokenKind::RBracket if depth > 0 => depth -= 1,
                TokenKind::RBrace => return,
                TokenKind::Semi | TokenKind::Comma if depth == 0 => {
                    self.pos += 1;
                    return;
                }
                _ if depth == 0 && self.at_line_start_any() && self.at_entry_start() => return,
                _ => {}
            }
            self.pos += 1;
        }
    }

    /// Whether the current token is the first significant token on its line.
    fn at_line_start_any(&self) -> bool {
        if self.pos == 0 {
            return true;
        }
        let previous_end = self.tokens[self.pos - 1].span.end as usize;
        let start = self.tokens[self.pos].span.start as usize;
        self.source[previous_end..start].contains('\n')
    }

    fn recover_to_item(&mut self) {
        while self.peek().is_some() {
            if self.peek().is_some_and(is_item_start) && self.at_line_start_any() {
                return;
            }
            self.skip_balanced();
        }
    }

    // ------------------------------------------------------------ items

    fn source_file(&mut self) -> SourceFile {
        let mut items = Vec::new();
        while let Some(kind) = self.peek() {
            let start = self.pos;
            let result = if is_item_start(kind) {
                self.item()
            } else {
                Err(self.error_expected("an item (import, type, agent, tool, workflow, policy, …)"))
            };
            match result {
                Ok(item) => items.push(item),
                Err(Fail) => {
                    if self.pos == start {
                        self.skip_balanced();
                    }
                    self.recover_to_item();
                }
            }
        }
        SourceFile { items }
    }

    fn item(&mut self) -> PResult<Item> {
        let start = self.current_span().start;
        let keyword = self.bump();
        match keyword.kind {
            TokenKind::KwImport => {
                let target = if self.at(TokenKind::String) {
                    ImportTarget::Path(self.string_lit())
                } else {
                    let mut path = vec![self.ident("a module name or a quoted path")?];
                    while self.eat(TokenKind::Dot).is_some() {
                        path.push(self.ident("a module name")?);
                    }
                    ImportTarget::Module(path)
                };
                Ok(Item::Import(Import { target, span: self.span_from(start) }))
            }
            TokenKind::KwType => {
                let name = self.ident("a type name")?;
                self.expect(TokenKind::Assign, "`=`")?;
                let value = self.expr()?;
                Ok(Item::Type(TypeDecl { name, value, span: self.span_from(start) }))
            }
            TokenKind::KwPolicy => Ok(Item::Policy(self.policy_rest(start)?)),
            kind => {
                let keyword = decl_keyword(kind).expect("item() is only called at an item keyword");
                let article = if keyword.as_str().starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" };
                let name = self.ident(&format!("{article} {} name", keyword.as_str()))?;
                let variant = if matches!(keyword, DeclKeyword::Workflow | DeclKeyword::Machine) {
                    None
                } else if self.eat(TokenKind::Colon).is_some() {
                    Some(self.ident("a kind after `:`")?)
                } else {
                    None
                };
                let body = if matches!(keyword, DeclKeyword::Workflow | DeclKeyword::Machine) || self.at(TokenKind::LBrace) {
                    Some(self.block()?)
                } else {
                    None
                };
                Ok(Item::Decl(Decl { keyword, name, variant, body, span: self.span_from(start) }))
            }
        }
    }

    /// `policy` already consumed: `NAME : formula block?`.
    fn policy_rest(&mut self, start: u32) -> PResult<Policy> {
        let name = self.ident("a policy name")?;
        self.expect(TokenKind::Colon, "`:` after the policy name")?;
        let formula = self.formula()?;
        let body = if self.at(TokenKind::LBrace) { Some(self.block()?) } else { None };
        Ok(Policy { name, formula, body, span: self.span_from(start) })
    }

    // ------------------------------------------------------------ blocks

    fn block(&mut self) -> PResult<Block> {
        let open = self.expect(TokenKind::LBrace, "`{`")?;
        self.enter()?;
        let mut entries = Vec::new();
        let result = loop {
            match self.peek() {
                Some(TokenKind::RBrace) => {
                    self.bump();
                    break Ok(());
                }
                None => break Err(self.unclosed(open, "`}`")),
                Some(_) if self.at_new_item() && !self.at_entry_start() => break Err(self.unclosed(open, "`}`")),
                Some(_) => {
                    let before = self.pos;
                    match self.entry() {
                        Ok(entry) => {
                            entries.push(entry);
                            if self.eat(TokenKind::Semi).is_none() {
                                self.eat(TokenKind::Comma);
                            }
                        }
                        Err(Fail) => {
                            entries.extend(self.partial_entry.take());
                            self.recover_in_block(before);
                        }
                    }
                }
            }
        };
        self.leave();
        // An unclosed block has been reported; keep what it holds.
        let _ = result;
        Ok(Block { entries, span: self.span_from(open.span.start) })
    }

    fn unclosed(&mut self, open: Token, closing: &str) -> Fail {
        let at = self.current_span();
        let diagnostic = Diagnostic::new(codes::UNCLOSED_DELIMITER, self.file, open.span, format!("unclosed `{}`", self.text(open)))
            .with_primary_message(format!("this is never closed with {closing}"))
            .with_label(Label::secondary(self.file, at, format!("expected {closing} before this")));
        self.report(diagnostic);
        Fail
    }

    fn entry(&mut self) -> PResult<Entry> {
        let start = self.current_span().start;
        let kind = self.peek().expect("entry() is called with a token ahead");
        // Grammar: `entry = property | handler | node_stmt | ...`. A word
        // followed by `:` can only be a property, whatever the word.
        if is_word(kind) && self.peek_at(1) == Some(TokenKind::Colon) {
            let key = self.word("a property name")?;
            self.bump();
            let value = match self.expr() {
                Ok(value) => value,
                Err(Fail) => {
                    let span = self.span_from(start);
                    let value = Expr { kind: ExprKind::Error, span };
                    self.partial_entry = Some(Entry::Property(Property { key, value, span }));
                    return Err(Fail);
                }
            };
            return Ok(Entry::Property(Property { key, value, span: self.span_from(start) }));
        }
        match kind {
            TokenKind::KwOn => {
                self.bump();
                let mut events = vec![self.ident("an outcome or decision name after `on`")?];
                // `("," ~ ident)*`: a comma not followed by an identifier ends
                // the list (and then `->` is missing, as in the grammar).
                while self.at(TokenKind::Comma) && self.peek_at(1) == Some(TokenKind::Ident) {
                    self.bump();
                    events.push(self.ident("a name")?);
                }
                self.expect(TokenKind::Arrow, "`->` and an action")?;
                let action = self.expr()?;
                Ok(Entry::Handler(Handler { events, action, span: self.span_from(start) }))
            }
            TokenKind::KwNode => {
                self.bump();
                let name = self.ident("a node name")?;
                self.expect(TokenKind::Colon, "`:` and a node kind")?;
                let kind = self.word("a node kind (agent, tool, human, parallel, map, join, loop, flow, end, compute)")?;
                let target = if self.at(TokenKind::LBracket) {
                    let (names, span) = self.ident_list()?;
                    NodeTarget::List(names, span)
                } else if self.at(TokenKind::LBrace) {
                    NodeTarget::None
                } else {
                    NodeTarget::Name(self.ident("the node's target (a name or a list of names), or its block")?)
                };
                let body = if self.at(TokenKind::LBrace) { Some(self.block()?) } else { None };
                Ok(Entry::Node(NodeStmt { name, kind, target, body, span: self.span_from(start) }))
            }
            TokenKind::KwGate => {
                self.bump();
                let name = self.ident("a gate name")?;
                self.expect(TokenKind::Colon, "`:` and the guarded boundary `from -> to`")?;
                let from = self.ident("the node before the gate")?;
                self.expect(TokenKind::Arrow, "`->`")?;
                let to = self.ident("the node after the gate")?;
                let body = self.block()?;
                Ok(Entry::Gate(GateStmt { name, from, to, body, span: self.span_from(start) }))
            }
            TokenKind::KwHandoff | TokenKind::KwDelegate => {
                let transfer_kind = if kind == TokenKind::KwHandoff { TransferKind::Handoff } else { TransferKind::Delegate };
                self.bump();
                let from = self.ident("the sending node")?;
                self.expect(TokenKind::Arrow, "`->`")?;
                let to = self.ident("the receiving node")?;
                let body = if self.at(TokenKind::LBrace) { Some(self.block()?) } else { None };
                Ok(Entry::Transfer(TransferStmt { kind: transfer_kind, from, to, body, span: self.span_from(start) }))
            }
            TokenKind::KwPolicy => {
                self.bump();
                Ok(Entry::Policy(self.policy_rest(start)?))
            }
            // `record NAME { … }`: `record` is a word, not a reserved one.
            TokenKind::Ident
                if self.tokens.get(self.pos).map(|t| self.text(*t)) == Some("record") && self.peek_at(1) == Some(TokenKind::Ident) =>
            {
                self.bump();
                let name = self.ident("a record name")?;
                let body = self.block()?;
                Ok(Entry::Record(RecordStmt { name, body, span: self.span_from(start) }))
            }
            TokenKind::Ident => {
                let mut path = vec![self.ident("a node name")?];
                self.expect(TokenKind::Arrow, "`->` (an edge) or `:` (a property)")?;
                path.push(self.ident("a node name after `->`")?);
                while self.eat(TokenKind::Arrow).is_some() {
                    path.push(self.ident("a node name after `->`")?);
                }
                // Grammar: `edge_guard?` with `edge_guard = kw_when ~ expr | kw_else`.
                // `when:` is not a guard but the next entry, a property keyed
                // `when` (the PEG grammar backtracks out of the optional guard
                // there, since no expression starts with `:`).
                let guard = if self.at_operator_keyword(TokenKind::KwWhen) {
                    self.bump();
                    Some(EdgeGuard::When(self.expr()?))
                } else {
                    self.eat(TokenKind::KwElse).map(|token| EdgeGuard::Else(token.span))
                };
                Ok(Entry::Edge(EdgeStmt { path, guard, span: self.span_from(start) }))
            }
            _ => Err(self.error_expected("a property, node, edge, gate, handoff, handler, record or `}`")),
        }
    }

    fn ident_list(&mut self) -> PResult<(Vec<Ident>, Span)> {
        let open = self.expect(TokenKind::LBracket, "`[`")?;
        let mut names = Vec::new();
        if !self.at(TokenKind::RBracket) {
            names.push(self.ident("a name")?);
            while self.eat(TokenKind::Comma).is_some() {
                if self.at(TokenKind::RBracket) {
                    break;
                }
                names.push(self.ident("a name")?);
            }
        }
        if self.peek().is_none() {
            return Err(self.unclosed(open, "`]`"));
        }
        self.expect(TokenKind::RBracket, "`,` or `]`")?;
        Ok((names, self.span_from(open.span.start)))
    }

    fn string_lit(&mut self) -> StringLit {
        let token = self.bump();
        StringLit { value: unescape(self.text(token)), span: token.span }
    }

    // ------------------------------------------------------------ expressions

    fn expr(&mut self) -> PResult<Expr> {
        self.enter()?;
        let result = self.union();
        self.leave();
        result
    }

    fn binary(&self, op: BinaryOp, lhs: Expr, rhs: Expr) -> Expr {
        let span = lhs.span.to(rhs.span);
        Expr { kind: ExprKind::Binary { op, lhs: Box::new(lhs), rhs: Box::new(rhs) }, span }
    }

    /// Records that the tree just built is `height` tall, refusing it if it
    /// is taller than [`MAX_TREE_HEIGHT`].
    fn grown(&mut self, height: u32, span: Span) -> PResult<()> {
        if height > MAX_TREE_HEIGHT {
            // Point where the limit was passed: the last token of the tree
            // that grew too tall (not the whole, possibly huge, tree).
            let span = self.pos.checked_sub(1).map_or(span, |last| self.tokens[last].span);
            let diagnostic =
                Diagnostic::new(codes::TOO_DEEP, self.file, span, format!("expression nested deeper than {MAX_TREE_HEIGHT} levels"))
                    .with_primary_message("too deep")
                    .with_note(
                        "chains of `and`, `or` and `|` may be as long as you like, but each `+ - * /`, \
                 `not`, `.field`, call, index and `?` adds a level; split the expression or name its parts",
                    );
            self.report(diagnostic);
            return Err(Fail);
        }
        self.height = height;
        Ok(())
    }

    /// A chain of one associative operator, built as a balanced tree so its
    /// height grows with the logarithm of its length, not its length.
    fn assoc_chain(&mut self, op: BinaryOp, operand: fn(&mut Self) -> PResult<Expr>) -> PResult<Expr> {
        let first = operand(self)?;
        let mut operands = vec![(first, self.height)];
        while self.at_chain_operator(op) {
            self.bump();
            let next = operand(self)?;
            operands.push((next, self.height));
        }
        let span = operands[0].0.span.to(operands[operands.len() - 1].0.span);
        let (tree, height) = chain::balanced(operands, &mut |lhs: Expr, rhs: Expr| self.binary(op, lhs, rhs));
        self.grown(height, span)?;
        Ok(tree)
    }

    fn at_chain_operator(&self, op: BinaryOp) -> bool {
        match op {
            BinaryOp::Union => self.at(TokenKind::Pipe),
            BinaryOp::Or => self.at_operator_keyword(TokenKind::KwOr),
            _ => self.at_operator_keyword(TokenKind::KwAnd),
        }
    }

    fn union(&mut self) -> PResult<Expr> {
        self.assoc_chain(BinaryOp::Union, Self::or_expr)
    }

    fn or_expr(&mut self) -> PResult<Expr> {
        self.assoc_chain(BinaryOp::Or, Self::and_expr)
    }

    fn and_expr(&mut self) -> PResult<Expr> {
        self.assoc_chain(BinaryOp::And, Self::not_expr)
    }

    fn not_expr(&mut self) -> PResult<Expr> {
        if let Some(not) = self.eat(TokenKind::KwNot) {
            self.enter()?;
            let operand = self.not_expr();
            self.leave();
            let operand = operand?;
            let span = not.span.to(operand.span);
            self.grown(self.height + 1, span)?;
            return Ok(Expr { kind: ExprKind::Unary { op: UnaryOp::Not, operand: Box::new(operand) }, span });
        }
        self.comparison()
    }

    fn comparison(&mut self) -> PResult<Expr> {
        let lhs = self.sum()?;
        let op = match self.peek() {
            Some(TokenKind::EqEq) => BinaryOp::Eq,
            Some(TokenKind::NotEq) => BinaryOp::NotEq,
            Some(TokenKind::LtEq) => BinaryOp::LtEq,
            Some(TokenKind::GtEq) => BinaryOp::GtEq,
            Some(TokenKind::Lt) => BinaryOp::Lt,
            Some(TokenKind::Gt) => BinaryOp::Gt,
            Some(TokenKind::KwIn) if self.at_operator_keyword(TokenKind::KwIn) => BinaryOp::In,
            _ => return Ok(lhs),
        };
        let lhs_height = self.height;
        self.bump();
        let rhs = self.sum()?;
        let node = self.binary(op, lhs, rhs);
        self.grown(lhs_height.max(self.height) + 1, node.span)?;
        Ok(node)
    }

    fn sum(&mut self) -> PResult<Expr> {
        let mut lhs = self.product()?;
        loop {
            let op = match self.peek() {
                Some(TokenKind::Plus) => BinaryOp::Add,
                Some(TokenKind::Minus) => BinaryOp::Sub,
                _ => return Ok(lhs),
            };
            let lhs_height = self.height;
            self.bump();
            let rhs = self.product()?;
            lhs = self.binary(op, lhs, rhs);
            self.grown(lhs_height.max(self.height) + 1, lhs.span)?;
        }
    }

    fn product(&mut self) -> PResult<Expr> {
        let mut lhs = self.negation()?;
        loop {
            let op = match self.peek() {
                Some(TokenKind::Star) => BinaryOp::Mul,
                Some(TokenKind::Slash) => BinaryOp::Div,
                _ => return Ok(lhs),
            };
            let lhs_height = self.height;
            self.bump();
            let rhs = self.negation()?;
            lhs = self.binary(op, lhs, rhs);
            self.grown(lhs_height.max(self.height) + 1, lhs.span)?;
        }
    }

    fn negation(&mut self) -> PResult<Expr> {
        if let Some(minus) = self.eat(TokenKind::Minus) {
            self.enter()?;
            let operand = self.negation();
            self.leave();
            let operand = operand?;
            let span = minus.span.to(operand.span);
            self.grown(self.height + 1, span)?;
            return Ok(Expr { kind: ExprKind::Unary { op: UnaryOp::Neg, operand: Box::new(operand) }, span });
        }
        self.postfix()
    }

    fn postfix(&mut self) -> PResult<Expr> {
        let mut expr = self.primary()?;
        loop {
            match self.peek() {
                Some(TokenKind::Dot) => {
                    self.bump();
                    let name = self.word("a field name after `.`")?;
                    let span = expr.span.to(name.span);
                    self.grown(self.height + 1, span)?;
                    expr = Expr { kind: ExprKind::Field { base: Box::new(expr), name }, span };
                }
                Some(TokenKind::LParen) => {
                    let open = self.bump();
                    let mut height = self.height;
                    let mut args = Vec::new();
                    if !self.at(TokenKind::RParen) {
                        args.push(self.argument()?);
                        height = height.max(self.height);
                        while self.eat(TokenKind::Comma).is_some() {
                            if self.at(TokenKind::RParen) {
                                break;
                            }
                            args.push(self.argument()?);
                            height = height.max(self.height);
                        }
                    }
                    if self.peek().is_none() {
                        return Err(self.unclosed(open, "`)`"));
                    }
                    self.expect(TokenKind::RParen, "`,` or `)`")?;
                    let span = self.span_from(expr.span.start);
                    self.grown(height + 1, span)?;
                    expr = Expr { kind: ExprKind::Call { callee: Box::new(expr), args }, span };
                }
                Some(TokenKind::LBracket) => {
                    let base_height = self.height;
                    self.bump();
                    let index = self.expr()?;
                    self.expect(TokenKind::RBracket, "`]`")?;
                    let span = self.span_from(expr.span.start);
                    self.grown(base_height.max(self.height) + 1, span)?;
                    expr = Expr { kind: ExprKind::Index { base: Box::new(expr), index: Box::new(index) }, span };
                }
                Some(TokenKind::Question) => {
                    let question = self.bump();
                    let span = expr.span.to(question.span);
                    self.grown(self.height + 1, span)?;
                    expr = Expr { kind: ExprKind::Nullable(Box::new(expr)), span };
                }
                _ => return Ok(expr),
            }
        }
    }

    fn argument(&mut self) -> PResult<Argument> {
        let start = self.current_span().start;
        if self.at(TokenKind::Ident) && self.peek_at(1) == Some(TokenKind::KwIn) && self.binder_ahead() {
            let value = self.binder()?;
            return Ok(Argument { name: None, value, span: self.span_from(start) });
        }
        let name = if self.at(TokenKind::Ident) && self.peek_at(1) == Some(TokenKind::Colon) {
            let name = self.ident("an argument name")?;
            self.bump();
            Some(name)
        } else {
            None
        };
        let value = self.expr()?;
        Ok(Argument { name, value, span: self.span_from(start) })
    }

    /// Whether the argument starting here is a binder `x in xs: body`: a
    /// `:` outside brackets before the argument ends (an `x in xs` without
    /// one is a membership test).
    fn binder_ahead(&self) -> bool {
        let mut depth = 0usize;
        for token in &self.tokens[self.pos..] {
            match token.kind {
                TokenKind::LParen | TokenKind::LBracket | TokenKind::LBrace => depth += 1,
                TokenKind::RParen | TokenKind::RBracket | TokenKind::RBrace if depth == 0 => return false,
                TokenKind::RParen | TokenKind::RBracket | TokenKind::RBrace => depth -= 1,
                TokenKind::Comma if depth == 0 => return false,
                TokenKind::Colon if depth == 0 => return true,
                _ => {}
            }
        }
        false
    }

    /// `x in xs: body` (see [`ExprKind::Binder`]).
    fn binder(&mut self) -> PResult<Expr> {
        let start = self.current_span().start;
        let var = self.ident("a variable name")?;
        self.expect(TokenKind::KwIn, "`in`")?;
        let list = self.expr()?;
        let list_height = self.height;
        self.expect(TokenKind::Colon, "`:` and an expression")?;
        let body = self.expr()?;
        let span = self.span_from(start);
        self.grown(list_height.max(self.height) + 1, span)?;
        Ok(Expr { kind: ExprKind::Binder { var, list: Box::new(list), body: Box::new(body) }, span })
    }

    fn primary(&mut self) -> PResult<Expr> {
        let Some(kind) = self.peek() else {
            return Err(self.error_expected("an expression"));
        };
        let token = self.tokens[self.pos];
        // Leaves are one level tall; the composite arms below say otherwise.
        self.height = 1;
        let simple = |kind: ExprKind| Ok(Expr { kind, span: token.span });
        match kind {
            TokenKind::Number => {
                self.bump();
                let (value, unit) = split_number(self.text(token));
                simple(ExprKind::Number { value, unit })
            }
            TokenKind::Money => {
                self.bump();
                let value = self.text(token)[1..].parse().unwrap_or(0.0);
                simple(ExprKind::Money(value))
            }
            TokenKind::String => {
                self.bump();
                simple(ExprKind::String(unescape(self.text(token))))
            }
            TokenKind::KwTrue => {
                self.bump();
                simple(ExprKind::Bool(true))
            }
            TokenKind::KwFalse => {
                self.bump();
                simple(ExprKind::Bool(false))
            }
            TokenKind::KwNull => {
                self.bump();
                simple(ExprKind::Null)
            }
            TokenKind::KwAny | TokenKind::KwAll => {
                let quantifier = if kind == TokenKind::KwAny { Quantifier::Any } else { Quantifier::All };
                self.bump();
                // Grammar: `quantifier | bare_quantifier`, where the bare word
                // may not be followed by `(`; so `(` decides.
                if !self.at(TokenKind::LParen) {
                    return simple(ExprKind::QuantifierWord(quantifier));
                }
                let open = self.bump();
                let var = self.ident("a variable name")?;
                self.expect(TokenKind::KwIn, "`in`")?;
                let list = self.expr()?;
                let list_height = self.height;
                self.expect(TokenKind::Colon, "`:` and a condition")?;
                let predicate = self.expr()?;
                if self.peek().is_none() {
                    return Err(self.unclosed(open, "`)`"));
                }
                self.expect(TokenKind::RParen, "`)`")?;
                let span = self.span_from(token.span.start);
                self.grown(list_height.max(self.height) + 1, span)?;
                Ok(Expr { kind: ExprKind::Quantified { quantifier, var, list: Box::new(list), predicate: Box::new(predicate) }, span })
            }
            TokenKind::Ident => {
                self.bump();
                simple(ExprKind::Name(self.text(token).to_string()))
            }
            TokenKind::LBracket => {
                let open = self.bump();
                self.enter()?;
                let items = self.list_items(open);
                self.leave();
                let (items, height) = items?;
                let span = self.span_from(open.span.start);
                self.grown(height + 1, span)?;
                Ok(Expr { kind: ExprKind::List(items), span })
            }
            TokenKind::LBrace => {
                let open = self.bump();
                self.enter()?;
                let fields = self.object_fields(open);
                self.leave();
                let (fields, height) = fields?;
                let span = self.span_from(open.span.start);
                self.grown(height + 1, span)?;
                Ok(Expr { kind: ExprKind::Object(fields), span })
            }
            TokenKind::LParen => {
                let open = self.bump();
                let mut inner = self.expr()?;
                if self.peek().is_none() {
                    return Err(self.unclosed(open, "`)`"));
                }
                self.expect(TokenKind::RParen, "`)`")?;
                inner.span = self.span_from(open.span.start);
                Ok(inner)
            }
            _ => Err(self.error_expected("an expression")),
        }
    }

    /// The items and the height of the tallest.
    fn list_items(&mut self, open: Token) -> PResult<(Vec<Expr>, u32)> {
        let mut items = Vec::new();
        let mut height = 0;
        if !self.at(TokenKind::RBracket) {
            items.push(self.expr()?);
            height = self.height;
            while self.eat(TokenKind::Comma).is_some() {
                if self.at(TokenKind::RBracket) {
                    break;
                }
                items.push(self.expr()?);
                height = height.max(self.height);
            }
        }
        if self.peek().is_none() {
            return Err(self.unclosed(open, "`]`"));
        }
        self.expect(TokenKind::RBracket, "`,` or `]`")?;
        Ok((items, height))
    }

    /// The fields and the height of the tallest value.
    fn object_fields(&mut self, open: Token) -> PResult<(Vec<Field>, u32)> {
        let mut fields = Vec::new();
        let mut height = 0;
        if !self.at(TokenKind::RBrace) {
            fields.push(self.field()?);
            height = self.height;
            while self.eat(TokenKind::Comma).is_some() {
                if self.at(TokenKind::RBrace) {
                    break;
                }
                fields.push(self.field()?);
                height = height.max(self.height);
            }
        }
        if self.peek().is_none() {
            return Err(self.unclosed(open, "`}`"));
        }
        self.expect(TokenKind::RBrace, "`,` or `}`")?;
        Ok((fields, height))
    }

    fn field(&mut self) -> PResult<Field> {
        let start = self.current_span().start;
        let name = if self.at(TokenKind::String) {
            let lit = self.string_lit();
            Ident { text: lit.value, span: lit.span }
        } else {
            self.word("a field name")?
        };
        let optional = self.eat(TokenKind::Question).is_some();
        self.expect(TokenKind::Colon, "`:` after the field name")?;
        let value = self.expr()?;
        Ok(Field { name, optional, value, span: self.span_from(start) })
    }

    // ------------------------------------------------------------ formulas

    fn formula(&mut self) -> PResult<Formula> {
        self.enter()?;
        let result = self.implication();
        self.leave();
        result
    }

    fn formula_node(&self, kind: FormulaKind, start: u32) -> Formula {
        Formula { kind, span: self.span_from(start) }
    }

    /// A formula node `height` tall (refused past [`MAX_TREE_HEIGHT`]).
    fn f_node(&mut self, kind: FormulaKind, start: u32, height: u32) -> PResult<Formula> {
        let node = self.formula_node(kind, start);
        self.grown(height, node.span)?;
        Ok(node)
    }

    fn implication(&mut self) -> PResult<Formula> {
        let start = self.current_span().start;
        let lhs = self.f_or()?;
        if self.eat(TokenKind::FatArrow).is_some() {
            let lhs_height = self.height;
            self.enter()?;
            let rhs = self.implication();
            self.leave();
            let rhs = rhs?;
            let node = self.formula_node(FormulaKind::Implies(Box::new(lhs), Box::new(rhs)), start);
            self.grown(lhs_height.max(self.height) + 1, node.span)?;
            return Ok(node);
        }
        Ok(lhs)
    }

    /// A chain of `or` or `and`, built balanced (see [`Parser::assoc_chain`]).
    fn f_chain(&mut self, keyword: TokenKind, operand: fn(&mut Self) -> PResult<Formula>) -> PResult<Formula> {
        let first = operand(self)?;
        let mut operands = vec![(first, self.height)];
        while self.at_operator_keyword(keyword) {
            self.bump();
            let next = operand(self)?;
            operands.push((next, self.height));
        }
        let span = operands[0].0.span.to(operands[operands.len() - 1].0.span);
        let (tree, height) = chain::balanced(operands, &mut |lhs: Formula, rhs: Formula| {
            let span = lhs.span.to(rhs.span);
            let kind = if keyword == TokenKind::KwOr {
                FormulaKind::Or(Box::new(lhs), Box::new(rhs))
            } else {
                FormulaKind::And(Box::new(lhs), Box::new(rhs))
            };
            Formula { kind, span }
        });
        self.grown(height, span)?;
        Ok(tree)
    }

    fn f_or(&mut self) -> PResult<Formula> {
        self.f_chain(TokenKind::KwOr, Self::f_and)
    }

    fn f_and(&mut self) -> PResult<Formula> {
        self.f_chain(TokenKind::KwAnd, Self::f_until)
    }

    fn f_until(&mut self) -> PResult<Formula> {
        let start = self.current_span().start;
        let lhs = self.f_unary()?;
        if self.at_operator_keyword(TokenKind::KwUntil) {
            let lhs_height = self.height;
            self.bump();
            let rhs = self.f_unary()?;
            let node = self.formula_node(FormulaKind::Until(Box::new(lhs), Box::new(rhs)), start);
            self.grown(lhs_height.max(self.height) + 1, node.span)?;
            return Ok(node);
        }
        Ok(lhs)
    }

    fn f_unary(&mut self) -> PResult<Formula> {
        self.enter()?;
        let result = self.f_unary_inner();
        self.leave();
        result
    }

    fn f_unary_inner(&mut self) -> PResult<Formula> {
        let start = self.current_span().start;
        let Some(kind) = self.peek() else {
            return Err(self.error_expected("a policy formula"));
        };
        match kind {
            TokenKind::KwNot => {
                self.bump();
                let body = self.f_unary()?;
                self.f_node(FormulaKind::Not(Box::new(body)), start, self.height + 1)
            }
            TokenKind::KwNever => {
                self.bump();
                let body = self.f_unary()?;
                let mut height = self.height;
                let before = if self.at_operator_keyword(TokenKind::KwBefore) {
                    self.bump();
                    let before = self.f_unary()?;
                    height = height.max(self.height);
                    Some(Box::new(before))
                } else {
                    None
                };
                self.f_node(FormulaKind::Never { body: Box::new(body), before }, start, height + 1)
            }
            TokenKind::KwAlways => {
                self.bump();
                let body = self.f_unary()?;
                self.f_node(FormulaKind::Always(Box::new(body)), start, self.height + 1)
            }
            TokenKind::KwEventually => {
                self.bump();
                let body = self.f_unary()?;
                self.f_node(FormulaKind::Eventually(Box::new(body)), start, self.height + 1)
            }
            TokenKind::KwWithin => {
                self.bump();
                let number = self.expect(TokenKind::Number, "a number of steps")?;
                let steps_token = self.tokens.get(self.pos).copied();
                match steps_token {
                    Some(token) if token.kind == TokenKind::Ident && self.text(token) == "steps" => {
                        self.bump();
                    }
                    _ => return Err(self.error_expected("`steps`")),
                }
                let text = self.text(number).replace('_', "");
                let steps = text.parse::<u64>().ok();
                let body = self.f_unary()?;
                self.f_node(FormulaKind::Within { steps, steps_span: number.span, body: Box::new(body) }, start, self.height + 1)
            }
            TokenKind::LParen => {
                let open = self.bump();
                let inner = self.formula()?;
                if self.peek().is_none() {
                    return Err(self.unclosed(open, "`)`"));
                }
                self.expect(TokenKind::RParen, "`)`")?;
                Ok(Formula { kind: inner.kind, span: self.span_from(start) })
            }
            TokenKind::KwTrue | TokenKind::KwFalse => {
                self.bump();
                self.f_node(FormulaKind::Bool(kind == TokenKind::KwTrue), start, 1)
            }
            TokenKind::Ident => {
                let name = self.ident("an atom")?;
                let open = self.expect(TokenKind::LParen, "`(` and the atom's arguments")?;
                let mut args = Vec::new();
                if !self.at(TokenKind::RParen) {
                    args.push(self.atom_arg()?);
                    while self.eat(TokenKind::Comma).is_some() {
                        if self.at(TokenKind::RParen) {
                            break;
                        }
                        args.push(self.atom_arg()?);
                    }
                }
                if self.peek().is_none() {
                    return Err(self.unclosed(open, "`)`"));
                }
                self.expect(TokenKind::RParen, "`,` or `)`")?;
                let span = self.span_from(start);
                self.height = 1;
                Ok(Formula { kind: FormulaKind::Atom(Atom { name, args, span }), span })
            }
            _ => {
                Err(self.error_expected("a policy formula (never, always, eventually, within, not, `(`, or an atom such as started(node))"))
            }
        }
    }

    fn atom_arg(&mut self) -> PResult<AtomArg> {
        let start = self.current_span().start;
        let name = if self.at(TokenKind::Ident) && self.peek_at(1) == Some(TokenKind::Colon) {
            let name = self.ident("an argument name")?;
            self.bump();
            Some(name)
        } else {
            None
        };
        let value = match self.peek() {
            Some(TokenKind::Ident) => {
                let token = self.bump();
                AtomValue::Name(self.text(token).to_string())
            }
            Some(TokenKind::String) => {
                let token = self.bump();
                AtomValue::String(unescape(self.text(token)))
            }
            Some(TokenKind::Number) => {
                let token = self.bump();
                AtomValue::Number(self.text(token).to_string())
            }
            _ => return Err(self.error_expected("a name, string or number")),
        };
        Ok(AtomArg { name, value, span: self.span_from(start) })
    }
}

/// Splits a number token into its value and unit suffix (`30s` → 30, "s").
fn split_number(text: &str) -> (f64, String) {
    let split = text.find(|c: char| c.is_ascii_alphabetic() || c == '%').unwrap_or(text.len());
    let digits: String = text[..split].chars().filter(|&c| c != '_').collect();
    (digits.parse().unwrap_or(f64::MAX), text[split..].to_string())
}

/// Resolves the escapes of a lexed string token (quotes included).
fn unescape(token: &str) -> String {
    let inner = token.strip_prefix('"').and_then(|s| s.strip_suffix('"')).unwrap_or(token);
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('r') => out.push('\r'),
                Some(other) => out.push(other),
                None => {}
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syntax_errors_past_the_limit_are_counted_not_kept() {
        // 3,000 invalid characters and 3,000 stray words: 6,000 errors.
        let source = "@\n".repeat(3_000) + &"agent\n".repeat(3_000);
        let parsed = parse(FileId(0), &source);
        assert_eq!(parsed.diagnostics.len(), MAX_SYNTAX_ERRORS);
        let first = parsed.diagnostics[0].primary().map(|l| l.span.start);
        assert_eq!(first, Some(0), "the first errors by position are kept");
        let notes = &parsed.diagnostics[0].notes;
        let counted: usize = notes.iter().find_map(|n| n.strip_prefix("and ")?.split(' ').next()?.parse().ok()).expect("a count");
        assert!(counted >= 5_000 - MAX_SYNTAX_ERRORS, "{notes:?}");
        // Under the limit nothing is dropped and no note is added.
        let few = parse(FileId(0), &"@\n".repeat(10));
        assert_eq!(few.diagnostics.len(), 10);
        assert!(few.diagnostics.iter().all(|d| d.notes.is_empty()));
    }

    fn errors(source: &str) -> Vec<String> {
        parse(FileId(0), source).diagnostics.iter().map(|d| format!("{} {}", d.code.0, d.message)).collect()
    }

    #[test]
    fn parses_a_small_workflow() {
        let source = r#"
            import std.evidence
            type Pack = { items: [string], note?: string }
            agent researcher { provider: local, tools: [search] }
            workflow w {
              start: research
              node research: agent researcher { output: Pack }
              node done: end success
              research -> done when len(research.items) > 0 and all(i in research.items: i != "")
              gate g: research -> done { evaluate: [predicate(true)]; on BLOCK -> terminate(blocked) }
            }
            policy p: never started(done) before outcome(g, PASS) { response: halt }
        "#;
        let parsed = parse(FileId(0), source);
        assert!(
            parsed.diagnostics.is_empty(),
            "{:#?}",
            parsed.diagnostics.iter().map(|d| (&d.message, d.labels[0].span)).collect::<Vec<_>>()
        );
        assert_eq!(parsed.file.items.len(), 5);
    }

    /// The guard of the only edge of `workflow w { a -> b when GUARD }`.
    fn guard_of(guard: &str) -> Expr {
        let parsed = parse(FileId(0), &format!("workflow w {{\n a -> b when {guard}\n}}\n"));
        assert!(parsed.diagnostics.is_empty(), "{guard}: {:?}", parsed.diagnostics.iter().map(|d| &d.message).collect::<Vec<_>>());
        let Item::Decl(Decl { body: Some(block), .. }) = &parsed.file.items[0] else { panic!("a workflow") };
        block
            .entries
            .iter()
            .find_map(|entry| match entry {
                Entry::Edge(EdgeStmt { guard: Some(EdgeGuard::When(guard)), .. }) => Some(guard.clone()),
                _ => None,
            })
            .expect("a guard")
    }

    #[test]
    fn a_call_argument_binds_a_variable_only_before_a_colon() {
        let ExprKind::Binary { lhs, .. } = guard_of("count(c in claims: c.support > 0) > 0").kind else { panic!("a comparison") };
        let ExprKind::Call { args, .. } = lhs.kind else { panic!("a call") };
        assert!(matches!(&args[0].value.kind, ExprKind::Binder { var, .. } if var.text == "c"), "{:?}", args[0].value.kind);
        // Without a colon, `x in xs` is membership, whatever follows it.
        let ExprKind::Call { args, .. } = guard_of("f(x in xs and y, z)").kind else { panic!("a call") };
        assert!(matches!(&args[0].value.kind, ExprKind::Binary { op: BinaryOp::And, .. }), "{:?}", args[0].value.kind);
        // A colon inside brackets is not the binder's.
        let ExprKind::Call { args, .. } = guard_of("f(x in [{ a: 1 }])").kind else { panic!("a call") };
        assert!(matches!(&args[0].value.kind, ExprKind::Binary { op: BinaryOp::In, .. }), "{:?}", args[0].value.kind);
        assert!(errors("workflow w {\n a -> b when f(x in xs:)\n}\n").iter().any(|e| e.starts_with("E0")));
    }

    #[test]
    fn reports_independent_errors_in_one_pass() {
        let source = "agent a { provider: }\nagent b { tools: [x,, y] }\nworkflow w { a -> -> b }\n";
        let found = errors(source);
        assert_eq!(found.len(), 3, "{found:?}");
    }

    #[test]
    fn keyword_operator_followed_by_colon_starts_a_property() {
        assert!(errors("agent a { x: b\n and: 1 }").is_empty());
        assert!(errors("policy p: started(a)\npolicy q: never failed(a)").is_empty());
        // `when:` after an edge is the next entry (a property), not a guard.
        assert!(errors("workflow w { a -> b\n when: 1 }").is_empty());
        assert!(errors("workflow w { a -> b when: x > 1 }").is_empty());
        assert!(errors("workflow w { a -> b when x > 1\n when: 1 }").is_empty());
        assert!(!errors("workflow w { a -> b when }").is_empty());
    }

    #[test]
    fn unclosed_block_is_reported_at_its_brace() {
        let found = errors("agent a {\n  provider: local\n");
        assert_eq!(found, vec!["E0003 unclosed `{`".to_string()]);
    }

    #[test]
    fn deep_nesting_is_refused_not_overflowed() {
        let source = format!("type T = {}1{}", "(".repeat(10_000), ")".repeat(10_000));
        let found = errors(&source);
        assert!(found.iter().any(|e| e.contains("nesting deeper")), "{found:?}");
    }

    #[test]
    fn numbers_split_into_value_and_unit() {
        assert_eq!(split_number("30s"), (30.0, "s".to_string()));
        assert_eq!(split_number("1_000"), (1000.0, String::new()));
        assert_eq!(split_number("2.5%"), (2.5, "%".to_string()));
    }
}
