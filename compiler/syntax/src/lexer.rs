//! The lexer: a logos-generated scanner that is total.
//!
//! Every byte of the input belongs to exactly one token, trivia
//! (whitespace, comments) included, so concatenating the token texts gives
//! back the input. Bytes that start no token become [`TokenKind::Error`]
//! tokens; the parser reports them. Lexing never fails.

use flow_diagnostics::Span;
use logos::Logos;

/// The kinds of token. Keywords are reserved; `steps` is contextual and
/// lexes as an identifier.
#[derive(Logos, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenKind {
    #[regex(r"[ \t\r\n]+")]
    Whitespace,
    #[regex(r"//[^\n]*", allow_greedy = true)]
    LineComment,
    #[regex(r"/\*([^*]|\*+[^*/])*\*+/")]
    BlockComment,

    #[regex(r"[A-Za-z_][A-Za-z0-9_]*")]
    Ident,
    /// Digits with an optional fraction and an optional unit suffix
    /// (`30s`, `400k`, `10%`); the unit is validated by the checker.
    #[regex(r"[0-9][0-9_]*(\.[0-9]+)?[A-Za-z%]*")]
    Number,
    #[regex(r"\$[0-9]+(\.[0-9]+)?")]
    Money,
    #[regex(r#""([^"\\\n]|\\["\\ntr])*""#)]
    String,

    #[token("import")]
    KwImport,
    #[token("type")]
    KwType,
    #[token("principal")]
    KwPrincipal,
    #[token("provider")]
    KwProvider,
    #[token("agent")]
    KwAgent,
    #[token("tool")]
    KwTool,
    #[token("evaluator")]
    KwEvaluator,
    #[token("budget")]
    KwBudget,
    #[token("contract")]
    KwContract,
    #[token("blackboard")]
    KwBlackboard,
    #[token("compute")]
    KwCompute,
    #[token("projection")]
    KwProjection,
    #[token("machine")]
    KwMachine,
    #[token("workflow")]
    KwWorkflow,
    #[token("policy")]
    KwPolicy,
    #[token("node")]
    KwNode,
    #[token("gate")]
    KwGate,
    #[token("handoff")]
    KwHandoff,
    #[token("delegate")]
    KwDelegate,
    #[token("on")]
    KwOn,
    #[token("when")]
    KwWhen,
    #[token("else")]
    KwElse,
    #[token("and")]
    KwAnd,
    #[token("or")]
    KwOr,
    #[token("not")]
    KwNot,
    #[token("in")]
    KwIn,
    #[token("true")]
    KwTrue,
    #[token("false")]
    KwFalse,
    #[token("null")]
    KwNull,
    #[token("any")]
    KwAny,
    #[token("all")]
    KwAll,
    #[token("never")]
    KwNever,
    #[token("always")]
    KwAlways,
    #[token("eventually")]
    KwEventually,
    #[token("until")]
    KwUntil,
    #[token("before")]
    KwBefore,
    #[token("within")]
    KwWithin,

    #[token("{")]
    LBrace,
    #[token("}")]
    RBrace,
    #[token("(")]
    LParen,
    #[token(")")]
    RParen,
    #[token("[")]
    LBracket,
    #[token("]")]
    RBracket,
    #[token(",")]
    Comma,
    #[token(";")]
    Semi,
    #[token(":")]
    Colon,
    #[token(".")]
    Dot,
    #[token("?")]
    Question,
    #[token("|")]
    Pipe,
    #[token("->")]
    Arrow,
    #[token("=>")]
    FatArrow,
    #[token("=")]
    Assign,
    #[token("==")]
    EqEq,
    #[token("!=")]
    NotEq,
    #[token("<=")]
    LtEq,
    #[token(">=")]
    GtEq,
    #[token("<")]
    Lt,
    #[token(">")]
    Gt,
    #[token("+")]
    Plus,
    #[token("-")]
    Minus,
    #[token("*")]
    Star,
    #[token("/")]
    Slash,

    /// A byte sequence that starts no token (an unknown character, an
    /// unterminated string, a stray `!`).
    Error,
}

impl TokenKind {
    pub fn is_trivia(self) -> bool {
        matches!(self, TokenKind::Whitespace | TokenKind::LineComment | TokenKind::BlockComment)
    }

    pub fn is_keyword(self) -> bool {
        KEYWORDS.iter().any(|(_, kind)| *kind == self)
    }

    /// How the token is named in "expected …" messages.
    pub fn describe(self) -> &'static str {
        use TokenKind::*;
        match self {
            Whitespace => "whitespace",
            LineComment | BlockComment => "a comment",
            Ident => "an identifier",
            Number => "a number",
            Money => "an amount of money",
            String => "a string",
            LBrace => "`{`",
            RBrace => "`}`",
            LParen => "`(`",
            RParen => "`)`",
            LBracket => "`[`",
            RBracket => "`]`",
            Comma => "`,`",
            Semi => "`;`",
            Colon => "`:`",
            Dot => "`.`",
            Question => "`?`",
            Pipe => "`|`",
            Arrow => "`->`",
            FatArrow => "`=>`",
            Assign => "`=`",
            EqEq => "`==`",
            NotEq => "`!=`",
            LtEq => "`<=`",
            GtEq => "`>=`",
            Lt => "`<`",
            Gt => "`>`",
            Plus => "`+`",
            Minus => "`-`",
            Star => "`*`",
            Slash => "`/`",
            Error => "an invalid token",
            keyword => KEYWORDS.iter().find(|(_, k)| *k == keyword).map(|(text, _)| *text).unwrap_or("a keyword"),
        }
    }
}

/// Every reserved word and its token kind.
pub const KEYWORDS: &[(&str, TokenKind)] = &[
    ("import", TokenKind::KwImport),
    ("type", TokenKind::KwType),
    ("principal", TokenKind::KwPrincipal),
    ("provider", TokenKind::KwProvider),
    ("agent", TokenKind::KwAgent),
    ("tool", TokenKind::KwTool),
    ("evaluator", TokenKind::KwEvaluator),
    ("budget", TokenKind::KwBudget),
    ("contract", TokenKind::KwContract),
    ("blackboard", TokenKind::KwBlackboard),
    ("compute", TokenKind::KwCompute),
    ("projection", TokenKind::KwProjection),
    ("machine", TokenKind::KwMachine),
    ("workflow", TokenKind::KwWorkflow),
    ("policy", TokenKind::KwPolicy),
    ("node", TokenKind::KwNode),
    ("gate", TokenKind::KwGate),
    ("handoff", TokenKind::KwHandoff),
    ("delegate", TokenKind::KwDelegate),
    ("on", TokenKind::KwOn),
    ("when", TokenKind::KwWhen),
    ("else", TokenKind::KwElse),
    ("and", TokenKind::KwAnd),
    ("or", TokenKind::KwOr),
    ("not", TokenKind::KwNot),
    ("in", TokenKind::KwIn),
    ("true", TokenKind::KwTrue),
    ("false", TokenKind::KwFalse),
    ("null", TokenKind::KwNull),
    ("any", TokenKind::KwAny),
    ("all", TokenKind::KwAll),
    ("never", TokenKind::KwNever),
    ("always", TokenKind::KwAlways),
    ("eventually", TokenKind::KwEventually),
    ("until", TokenKind::KwUntil),
    ("before", TokenKind::KwBefore),
    ("within", TokenKind::KwWithin),
];

/// One token: its kind and where it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token {
    pub kind: TokenKind,
    pub span: Span,
}

/// Splits `source` into tokens, trivia included. Total: never fails.
pub fn lex(source: &str) -> Vec<Token> {
    let mut tokens = Vec::with_capacity(source.len() / 3);
    tokens.extend(Tokens::new(source));
    tokens
}

/// The tokens of a source, trivia included, as [`lex`] returns them but
/// without collecting them (the parser filters trivia as it goes).
pub struct Tokens<'s> {
    lexer: logos::Lexer<'s, TokenKind>,
    /// An error token that may still grow with the next adjacent error
    /// bytes, or the token that ended one (returned next).
    pending: Option<Token>,
}

impl std::fmt::Debug for Tokens<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens").field("at", &self.lexer.span().end).field("pending", &self.pending).finish()
    }
}

impl<'s> Tokens<'s> {
    pub fn new(source: &'s str) -> Self {
        Tokens { lexer: TokenKind::lexer(source), pending: None }
    }
}

impl Iterator for Tokens<'_> {
    type Item = Token;

    fn next(&mut self) -> Option<Token> {
        // A token held back behind an error token goes out first.
        if matches!(self.pending, Some(t) if t.kind != TokenKind::Error) {
            return self.pending.take();
        }
        loop {
            let Some(result) = self.lexer.next() else { return self.pending.take() };
            let range = self.lexer.span();
            let kind = result.unwrap_or(TokenKind::Error);
            let token = Token { kind, span: Span::new(range.start, range.end) };
            match &mut self.pending {
                // Merge adjacent error bytes into one token so one bad
                // character sequence gives one diagnostic.
                Some(last) if kind == TokenKind::Error && last.span.end as usize == range.start => last.span.end = range.end as u32,
                Some(_) => return self.pending.replace(token),
                None if kind == TokenKind::Error => self.pending = Some(token),
                None => return Some(token),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(source: &str) -> Vec<TokenKind> {
        lex(source).into_iter().filter(|t| !t.kind.is_trivia()).map(|t| t.kind).collect()
    }

    #[test]
    fn keywords_identifiers_and_units() {
        use TokenKind::*;
        assert_eq!(kinds("node nodes 30s 400k $5.00 10%"), vec![KwNode, Ident, Number, Number, Money, Number]);
        assert_eq!(kinds("a->b => = == -x"), vec![Ident, Arrow, Ident, FatArrow, Assign, EqEq, Minus, Ident]);
    }

    #[test]
    fn error_runs_merge_and_every_byte_is_covered() {
        for source in ["§", "a§", "§a", "a §§ b §", "§§\n§ x", "\"open", "x \"open §"] {
            let tokens = lex(source);
            let text: String = tokens.iter().map(|t| &source[t.span.range()]).collect();
            assert_eq!(text, source, "tokens cover {source:?}");
            for pair in tokens.windows(2) {
                assert_eq!(pair[0].span.end, pair[1].span.start, "{source:?}");
                assert!(!(pair[0].kind == TokenKind::Error && pair[1].kind == TokenKind::Error), "adjacent errors in {source:?}");
            }
        }
        let errors = |s: &str| lex(s).iter().filter(|t| t.kind == TokenKind::Error).count();
        assert_eq!(errors("a §§ b §"), 2);
        assert_eq!(errors("§§§"), 1);
    }

    #[test]
    fn unknown_bytes_become_one_error_token() {
        let tokens = lex("a §§ b");
        assert_eq!(tokens.iter().filter(|t| t.kind == TokenKind::Error).count(), 1);
    }

    #[test]
    fn tokens_concatenate_back_to_the_input() {
        let source = "agent a { tools: [x] } // c\n/* d */ \"s\\n\" ! \"unterminated\n";
        let text: String = lex(source).iter().map(|t| &source[t.span.range()]).collect();
        assert_eq!(text, source);
    }
}
