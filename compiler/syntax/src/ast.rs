//! The untyped syntax tree. It belongs to the syntax phase only: the checker
//! lowers it to a typed IR and nothing after the checker reads it.
//!
//! Every node carries its [`Span`]. Where the parser had to recover, the
//! tree holds `Error` placeholders rather than being cut short.

use flow_diagnostics::Span;

/// A name with its location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ident {
    pub text: String,
    pub span: Span,
}

/// One parsed `.flow` file.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SourceFile {
    pub items: Vec<Item>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Import(Import),
    Type(TypeDecl),
    Decl(Decl),
    Policy(Policy),
}

/// `import std.evidence` or `import "shared/types.flow"`.
#[derive(Debug, Clone, PartialEq)]
pub struct Import {
    pub target: ImportTarget,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ImportTarget {
    Module(Vec<Ident>),
    Path(StringLit),
}

/// `type NAME = expr`.
#[derive(Debug, Clone, PartialEq)]
pub struct TypeDecl {
    pub name: Ident,
    pub value: Expr,
    pub span: Span,
}

/// The declaration keywords whose body is a [`Block`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeclKeyword {
    Principal,
    Provider,
    Agent,
    Tool,
    Evaluator,
    Budget,
    Contract,
    Blackboard,
    Compute,
    Projection,
    Machine,
    Workflow,
}

impl DeclKeyword {
    pub fn as_str(self) -> &'static str {
        match self {
            DeclKeyword::Principal => "principal",
            DeclKeyword::Provider => "provider",
            DeclKeyword::Agent => "agent",
            DeclKeyword::Tool => "tool",
            DeclKeyword::Evaluator => "evaluator",
            DeclKeyword::Budget => "budget",
            DeclKeyword::Contract => "contract",
            DeclKeyword::Blackboard => "blackboard",
            DeclKeyword::Compute => "compute",
            DeclKeyword::Projection => "projection",
            DeclKeyword::Machine => "machine",
            DeclKeyword::Workflow => "workflow",
        }
    }
}

/// `agent NAME { … }`, `tool NAME: command { … }`, `workflow NAME { … }`.
#[derive(Debug, Clone, PartialEq)]
pub struct Decl {
    pub keyword: DeclKeyword,
    pub name: Ident,
    /// The optional `: kind` (`tool t: command`).
    pub variant: Option<Ident>,
    pub body: Option<Block>,
    pub span: Span,
}

/// `policy NAME: formula { … }`.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    pub name: Ident,
    pub formula: Formula,
    pub body: Option<Block>,
    pub span: Span,
}

/// `{ entry* }`: the one body syntax of every declaration.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    pub entries: Vec<Entry>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    Property(Property),
    Handler(Handler),
    Node(NodeStmt),
    Gate(GateStmt),
    Transfer(TransferStmt),
    Policy(Policy),
    Edge(EdgeStmt),
    Record(RecordStmt),
}

impl Entry {
    pub fn span(&self) -> Span {
        match self {
            Entry::Property(p) => p.span,
            Entry::Handler(h) => h.span,
            Entry::Node(n) => n.span,
            Entry::Gate(g) => g.span,
            Entry::Transfer(t) => t.span,
            Entry::Policy(p) => p.span,
            Entry::Edge(e) => e.span,
            Entry::Record(r) => r.span,
        }
    }

    /// How the entry is named in messages.
    pub fn describe(&self) -> &'static str {
        match self {
            Entry::Property(_) => "a property",
            Entry::Handler(_) => "a handler",
            Entry::Node(_) => "a node",
            Entry::Gate(_) => "a gate",
            Entry::Transfer(t) => match t.kind {
                TransferKind::Handoff => "a handoff",
                TransferKind::Delegate => "a delegation",
            },
            Entry::Policy(_) => "a policy",
            Entry::Edge(_) => "an edge",
            Entry::Record(_) => "a record",
        }
    }
}

/// `key: expr`. Any identifier or keyword may be a key.
#[derive(Debug, Clone, PartialEq)]
pub struct Property {
    pub key: Ident,
    pub value: Expr,
    pub span: Span,
}

/// `on BLOCK, REQUIRES_DECISION -> action`.
#[derive(Debug, Clone, PartialEq)]
pub struct Handler {
    pub events: Vec<Ident>,
    pub action: Expr,
    pub span: Span,
}

/// `node NAME: KIND target { … }`.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeStmt {
    pub name: Ident,
    pub kind: Ident,
    pub target: NodeTarget,
    pub body: Option<Block>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum NodeTarget {
    Name(Ident),
    List(Vec<Ident>, Span),
    /// No target (`node check: compute { … }`).
    None,
}

impl NodeTarget {
    /// Where the target is (`None` when there is none).
    pub fn span(&self) -> Option<Span> {
        match self {
            NodeTarget::Name(i) => Some(i.span),
            NodeTarget::List(_, span) => Some(*span),
            NodeTarget::None => None,
        }
    }
}

/// `gate NAME: from -> to { … }`.
#[derive(Debug, Clone, PartialEq)]
pub struct GateStmt {
    pub name: Ident,
    pub from: Ident,
    pub to: Ident,
    pub body: Block,
    pub span: Span,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransferKind {
    Handoff,
    Delegate,
}

/// `handoff from -> to { … }` or `delegate from -> to { … }`.
#[derive(Debug, Clone, PartialEq)]
pub struct TransferStmt {
    pub kind: TransferKind,
    pub from: Ident,
    pub to: Ident,
    pub body: Option<Block>,
    pub span: Span,
}

/// `record NAME { field: expr, … }`: a declared event a node or a gate
/// writes into the trace (`record` is a keyword only here, before a name).
#[derive(Debug, Clone, PartialEq)]
pub struct RecordStmt {
    pub name: Ident,
    pub body: Block,
    pub span: Span,
}

/// `a -> b -> c when cond` / `a -> b else`.
#[derive(Debug, Clone, PartialEq)]
pub struct EdgeStmt {
    pub path: Vec<Ident>,
    pub guard: Option<EdgeGuard>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum EdgeGuard {
    When(Expr),
    Else(Span),
}

#[derive(Debug, Clone, PartialEq)]
pub struct StringLit {
    /// The value, escapes resolved.
    pub value: String,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    Union,
    Or,
    And,
    Eq,
    NotEq,
    Lt,
    LtEq,
    Gt,
    GtEq,
    In,
    Add,
    Sub,
    Mul,
    Div,
}

impl BinaryOp {
    pub fn as_str(self) -> &'static str {
        match self {
            BinaryOp::Union => "|",
            BinaryOp::Or => "or",
            BinaryOp::And => "and",
            BinaryOp::Eq => "==",
            BinaryOp::NotEq => "!=",
            BinaryOp::Lt => "<",
            BinaryOp::LtEq => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::GtEq => ">=",
            BinaryOp::In => "in",
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnaryOp {
    Not,
    Neg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantifier {
    Any,
    All,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ExprKind {
    /// A number and its unit suffix as written (`30s` → 30, "s").
    Number {
        value: f64,
        unit: String,
    },
    /// `$5.25`, in the currency's minor precision as written.
    Money(f64),
    String(String),
    Bool(bool),
    Null,
    Name(String),
    List(Vec<Expr>),
    Object(Vec<Field>),
    Field {
        base: Box<Expr>,
        name: Ident,
    },
    Call {
        callee: Box<Expr>,
        args: Vec<Argument>,
    },
    Index {
        base: Box<Expr>,
        index: Box<Expr>,
    },
    /// `T?`: a nullable type.
    Nullable(Box<Expr>),
    Unary {
        op: UnaryOp,
        operand: Box<Expr>,
    },
    Binary {
        op: BinaryOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    /// `all(x in xs: pred)`.
    Quantified {
        quantifier: Quantifier,
        var: Ident,
        list: Box<Expr>,
        predicate: Box<Expr>,
    },
    /// The bare word `all` or `any` (a join rule).
    QuantifierWord(Quantifier),
    /// `x in xs: body`, a call's only argument: the functions that bind a
    /// variable over a list (`filter(c in claims: c.support > 0)`).
    Binder {
        var: Ident,
        list: Box<Expr>,
        body: Box<Expr>,
    },
    /// Placeholder where the parser recovered from an error.
    Error,
}

/// `name?: expr` inside an object literal or record type.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub name: Ident,
    pub optional: bool,
    pub value: Expr,
    pub span: Span,
}

/// `name: expr` or `expr` inside a call.
#[derive(Debug, Clone, PartialEq)]
pub struct Argument {
    pub name: Option<Ident>,
    pub value: Expr,
    pub span: Span,
}

/// A temporal policy formula.
#[derive(Debug, Clone, PartialEq)]
pub struct Formula {
    pub kind: FormulaKind,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum FormulaKind {
    Bool(bool),
    Atom(Atom),
    Not(Box<Formula>),
    /// `never a` or, with `before`, `never a before b` (precedence).
    Never {
        body: Box<Formula>,
        before: Option<Box<Formula>>,
    },
    Always(Box<Formula>),
    Eventually(Box<Formula>),
    /// `within N steps f`; `steps` is `None` when N is not a plain integer.
    Within {
        steps: Option<u64>,
        steps_span: Span,
        body: Box<Formula>,
    },
    Until(Box<Formula>, Box<Formula>),
    And(Box<Formula>, Box<Formula>),
    Or(Box<Formula>, Box<Formula>),
    Implies(Box<Formula>, Box<Formula>),
    Error,
}

/// `started(compose)`, `called(deploy, by: coder)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Atom {
    pub name: Ident,
    pub args: Vec<AtomArg>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AtomArg {
    pub name: Option<Ident>,
    pub value: AtomValue,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum AtomValue {
    Name(String),
    String(String),
    Number(String),
}
