//! The checked, typed intermediate representation.
//!
//! The checker lowers the AST to this IR; everything after the checker
//! (static verification, plan building, the interpreter) reads only the
//! IR. Names are resolved, property values are typed [`Value`]s, and
//! expressions are [`TExpr`]s carrying their types. Maps are ordered
//! (source order), so serialising the IR is deterministic.

pub use crate::node::{
    AgentNode, EndNode, FlowNode, HumanNode, JoinNode, JoinRule, LoopNode, MapNode, NodeBody, NodeCommon, ParallelNode, Retry, StateRef,
    ToolNode,
};
use crate::spec::Kind;
pub use crate::transfer::{Delegation, Handoff, TransferBody};
use crate::types::Ty;
pub use flow_trace::{Action, ActionKind, HandlerEvent, NodeKind};
use indexmap::IndexMap;

/// An ordered map keyed by name, as the IR stores declarations, nodes,
/// gates and properties: source order, and a fast hash (keys are names the
/// program declares; the engine looks them up on every step).
pub type NameMap<V> = IndexMap<String, V, rustc_hash::FxBuildHasher>;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where something was declared: file index (into the `SourceDb`) and byte
/// span.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
pub struct Loc {
    pub file: u32,
    pub start: u32,
    pub end: u32,
}

/// One checked program: a root file and everything it imports.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, Default)]
pub struct Program {
    /// Declared types, by name.
    pub types: NameMap<TypeDef>,
    /// Every other top-level declaration except workflows, machines and
    /// policies, by name.
    pub decls: NameMap<Decl>,
    pub machines: NameMap<Machine>,
    pub workflows: NameMap<Workflow>,
    /// Top-level policies (they apply to every workflow).
    pub policies: Vec<Policy>,
}

/// A declared type, or the type of a JSON Schema file (named
/// `schema("path")` after the path as written; its `loc` is the file).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct TypeDef {
    pub name: String,
    /// The structural type: what the checker and verifier reason with.
    pub ty: Ty,
    pub loc: Loc,
    /// For a JSON Schema file's type, the schema as written: values are
    /// validated against it at run time (every keyword, not only the
    /// structural subset in `ty`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<serde_json::Value>,
}

/// A principal, provider, agent, tool, evaluator, budget, contract or
/// blackboard.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Decl {
    pub kind: Kind,
    pub name: String,
    pub variant: Option<String>,
    pub props: NameMap<Value>,
    pub loc: Loc,
    /// Whether it comes from an imported module rather than the root file.
    pub imported: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Machine {
    pub name: String,
    pub initial: String,
    pub terminal: Vec<String>,
    pub states: Vec<String>,
    pub transitions: Vec<(String, String)>,
    pub loc: Loc,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Workflow {
    pub name: String,
    pub props: NameMap<Value>,
    pub nodes: NameMap<Node>,
    pub edges: Vec<Edge>,
    pub gates: NameMap<Gate>,
    pub transfers: Vec<Transfer>,
    pub handlers: Vec<Handler>,
    pub policies: Vec<Policy>,
    pub loc: Loc,
}

impl Workflow {
    /// Every declared record of the workflow: its nodes' (in node order),
    /// then its gates'.
    pub fn records(&self) -> impl Iterator<Item = &Record> {
        self.nodes.values().flat_map(|n| &n.records).chain(self.gates.values().flat_map(|g| &g.records))
    }

    /// The names of [`Workflow::records`].
    pub fn record_names(&self) -> impl Iterator<Item = String> + '_ {
        self.records().map(|r| r.name.clone())
    }
}

/// A transfer between two nodes (reference §6.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TransferKind {
    Handoff,
    Delegate,
}

impl TransferKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TransferKind::Handoff => "handoff",
            TransferKind::Delegate => "delegate",
        }
    }
}

impl std::fmt::Display for TransferKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A node: its kind with that kind's properties ([`NodeBody`], written
/// flat: `"kind": "loop", "max_rounds": 3, …`), the properties every kind
/// accepts, and its handlers — all resolved at lowering.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Node {
    pub name: String,
    #[serde(flatten)]
    pub body: NodeBody,
    /// The target's names: the agent, tool, principal, workflow, the
    /// listed nodes, or the termination reason.
    pub target: Vec<String>,
    pub common: NodeCommon,
    pub handlers: Vec<Handler>,
    /// The node's declared events, written when it completes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub records: Vec<Record>,
    /// The node's output type (what its name means in expressions).
    pub output: Ty,
    pub loc: Loc,
}

impl Node {
    /// A node lowered from its checked properties (see
    /// [`crate::node::lower`]).
    pub fn new(name: &str, kind: NodeKind, target: Vec<String>, props: &NameMap<Value>, output: Ty, loc: Loc) -> Node {
        let (common, mut body) = crate::node::lower(kind, props);
        if let NodeBody::Compute(compute) = &mut body {
            // A node that applies a declared computation: its output type is
            // the computation's (the node's `output`).
            compute.function = target.first().cloned();
            if compute.function.is_some() {
                compute.output_type = output.clone();
            }
        }
        Node { name: name.to_string(), body, target, common, handlers: Vec::new(), records: Vec::new(), output, loc }
    }

    /// The node kind.
    pub fn kind(&self) -> NodeKind {
        self.body.kind()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Edge {
    pub from: String,
    pub to: String,
    pub guard: Guard,
    pub loc: Loc,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", content = "condition", rename_all = "snake_case")]
pub enum Guard {
    Always,
    When(TExpr),
    Else,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Gate {
    pub name: String,
    pub from: String,
    pub to: String,
    pub props: NameMap<Value>,
    pub handlers: Vec<Handler>,
    /// The gate's declared events, written when it records an outcome.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub records: Vec<Record>,
    pub loc: Loc,
}

/// A declared event (`record NAME { field: expr, … }`, reference §6.8):
/// written into the trace as `recorded` when its node completes or its
/// gate records an outcome, with each field's value evaluated then.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Record {
    pub name: String,
    pub fields: NameMap<TExpr>,
    pub loc: Loc,
}

impl Record {
    /// The type of the event's `values`: a record of the fields' types.
    pub fn ty(&self) -> Ty {
        let fields =
            self.fields.iter().map(|(name, e)| (name.clone(), crate::types::FieldTy { ty: e.ty.clone(), optional: false })).collect();
        Ty::Record { fields }
    }

    /// The names the fields read (nodes, `input`; a gate's `outcome`), in
    /// order of first use.
    pub fn reads(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for name in self.fields.values().flat_map(TExpr::free_vars) {
            if !out.contains(&name) {
                out.push(name);
            }
        }
        out
    }
}

/// A handoff or a delegation between two nodes: its kind with that kind's
/// properties ([`TransferBody`], written flat: `"kind": "handoff",
/// "context": "isolated", …`), resolved at lowering.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Transfer {
    #[serde(flatten)]
    pub body: TransferBody,
    pub from: String,
    pub to: String,
    pub loc: Loc,
}

impl Transfer {
    /// A transfer lowered from its checked properties (see
    /// [`crate::transfer::lower`]).
    pub fn new(kind: TransferKind, from: &str, to: &str, props: &NameMap<Value>, loc: Loc) -> Transfer {
        Transfer { body: crate::transfer::lower(kind, props), from: from.to_string(), to: to.to_string(), loc }
    }

    /// The transfer kind.
    pub fn kind(&self) -> TransferKind {
        self.body.kind()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Handler {
    pub events: Vec<HandlerEvent>,
    pub action: Action,
    pub loc: Loc,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Policy {
    pub name: String,
    pub formula: Formula,
    pub props: NameMap<Value>,
    pub loc: Loc,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Formula {
    Bool { value: bool },
    Atom { name: String, args: Vec<String>, by: Option<String>, loc: Loc },
    Not { body: Box<Formula> },
    Never { body: Box<Formula>, before: Option<Box<Formula>> },
    Always { body: Box<Formula> },
    Eventually { body: Box<Formula> },
    Within { steps: u64, body: Box<Formula> },
    Until { lhs: Box<Formula>, rhs: Box<Formula> },
    And { lhs: Box<Formula>, rhs: Box<Formula> },
    Or { lhs: Box<Formula>, rhs: Box<Formula> },
    Implies { lhs: Box<Formula>, rhs: Box<Formula> },
}

/// A checked property value.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Value {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    /// Milliseconds.
    Duration(u64),
    Money(f64),
    /// A fraction in 0..=1 (`10%` is 0.1).
    Fraction(f64),
    Rate {
        count: u64,
        per_ms: u64,
    },
    /// A bare word from a fixed set.
    Word(String),
    Ref {
        kind: Kind,
        name: String,
    },
    Node(String),
    State {
        machine: String,
        state: String,
    },
    List(Vec<Value>),
    Record(NameMap<Value>),
    Type(Ty),
    Expr(TExpr),
    Action(Action),
    Evaluator {
        name: String,
        builtin: bool,
        args: Vec<TExpr>,
    },
    JoinRule {
        rule: String,
        weights: IndexMap<String, f64>,
        evaluator: Option<String>,
        /// The field of the branches' outputs a vote counts
        /// (`majority(key)`, `quorum(n, key)`, `weighted(key, {…})`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        key: Option<String>,
        /// `quorum(n, key)`: the votes a value needs.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        quorum: Option<u64>,
    },
    /// A value the checker rejected (an error has been reported).
    Invalid,
}

/// A typed expression.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct TExpr {
    #[serde(flatten)]
    pub kind: TExprKind,
    pub ty: Ty,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "expr", rename_all = "snake_case")]
pub enum TExprKind {
    Literal {
        value: Box<Value>,
    },
    /// A variable: a node (its output), `input`, `payload`, `output`,
    /// `task`, or a quantifier's bound variable.
    Var {
        name: String,
    },
    Field {
        base: Box<TExpr>,
        name: String,
    },
    Index {
        base: Box<TExpr>,
        index: Box<TExpr>,
    },
    Call {
        function: String,
        args: Vec<TExpr>,
    },
    Not {
        operand: Box<TExpr>,
    },
    Neg {
        operand: Box<TExpr>,
    },
    Binary {
        op: BinOp,
        lhs: Box<TExpr>,
        rhs: Box<TExpr>,
    },
    List {
        items: Vec<TExpr>,
    },
    Record {
        fields: IndexMap<String, TExpr>,
    },
    Quantified {
        quantifier: Quantifier,
        var: String,
        list: Box<TExpr>,
        predicate: Box<TExpr>,
    },
    /// `function(var in list: body)`: a library function that binds a
    /// variable over a list (`filter`, `map`, `count`, …; see
    /// [`crate::functions::BINDING`]).
    Comprehension {
        function: String,
        var: String,
        list: Box<TExpr>,
        body: Box<TExpr>,
    },
    /// Where checking failed (an error has been reported).
    Invalid,
}

impl TExpr {
    pub fn invalid() -> TExpr {
        TExpr { kind: TExprKind::Invalid, ty: Ty::Any }
    }

    /// The variables the expression reads that no quantifier or binding
    /// function inside it binds, in first-use order.
    pub fn free_vars(&self) -> Vec<String> {
        fn walk(e: &TExpr, bound: &mut Vec<String>, out: &mut Vec<String>) {
            flow_syntax::stack::guarded(|| match &e.kind {
                TExprKind::Var { name } => {
                    if !bound.contains(name) && !out.contains(name) {
                        out.push(name.clone());
                    }
                }
                TExprKind::Field { base, .. } => walk(base, bound, out),
                TExprKind::Index { base, index } => {
                    walk(base, bound, out);
                    walk(index, bound, out);
                }
                TExprKind::Call { args, .. } => args.iter().for_each(|a| walk(a, bound, out)),
                TExprKind::Not { operand } | TExprKind::Neg { operand } => walk(operand, bound, out),
                TExprKind::Binary { lhs, rhs, .. } => {
                    walk(lhs, bound, out);
                    walk(rhs, bound, out);
                }
                TExprKind::List { items } => items.iter().for_each(|a| walk(a, bound, out)),
                TExprKind::Record { fields } => fields.values().for_each(|a| walk(a, bound, out)),
                TExprKind::Quantified { var, list, predicate: body, .. } | TExprKind::Comprehension { var, list, body, .. } => {
                    walk(list, bound, out);
                    bound.push(var.clone());
                    walk(body, bound, out);
                    bound.pop();
                }
                TExprKind::Literal { .. } | TExprKind::Invalid => {}
            })
        }
        let mut out = Vec::new();
        walk(self, &mut Vec::new(), &mut out);
        out
    }
}

flow_trace::closed_word!(
    /// A binary operator of a checked expression (reference §4.1), as
    /// sources write it.
    pub BinOp {
        Or = "or": "Either is true (the right side is evaluated only when the left is false).",
        And = "and": "Both are true (the right side is evaluated only when the left is true).",
        Eq = "==": "Equal (numbers by value: `1 == 1.0`).",
        NotEq = "!=": "Not equal.",
        Lt = "<": "Less than (two numbers or two strings).",
        LtEq = "<=": "Less than or equal.",
        Gt = ">": "Greater than.",
        GtEq = ">=": "Greater than or equal.",
        In = "in": "Membership in a list, or a substring of a string.",
        Add = "+": "Sum, or two strings joined.",
        Sub = "-": "Difference.",
        Mul = "*": "Product.",
        Div = "/": "Quotient (never by zero).",
    }
);

impl BinOp {
    /// Binding strength, loosest first (reference §4.1).
    pub const fn precedence(self) -> u8 {
        match self {
            BinOp::Or => 2,
            BinOp::And => 3,
            BinOp::Eq | BinOp::NotEq | BinOp::Lt | BinOp::LtEq | BinOp::Gt | BinOp::GtEq | BinOp::In => 5,
            BinOp::Add | BinOp::Sub => 6,
            BinOp::Mul | BinOp::Div => 7,
        }
    }

    /// The comparison with its sides swapped (`a < b` is `b > a`).
    pub const fn flipped(self) -> BinOp {
        match self {
            BinOp::Lt => BinOp::Gt,
            BinOp::LtEq => BinOp::GtEq,
            BinOp::Gt => BinOp::Lt,
            BinOp::GtEq => BinOp::LtEq,
            other => other,
        }
    }

    /// The checked operator of a source operator (`|` is a type union, never
    /// in a checked expression).
    pub fn of(op: flow_syntax::ast::BinaryOp) -> Option<BinOp> {
        use flow_syntax::ast::BinaryOp as Src;
        Some(match op {
            Src::Union => return None,
            Src::Or => BinOp::Or,
            Src::And => BinOp::And,
            Src::Eq => BinOp::Eq,
            Src::NotEq => BinOp::NotEq,
            Src::Lt => BinOp::Lt,
            Src::LtEq => BinOp::LtEq,
            Src::Gt => BinOp::Gt,
            Src::GtEq => BinOp::GtEq,
            Src::In => BinOp::In,
            Src::Add => BinOp::Add,
            Src::Sub => BinOp::Sub,
            Src::Mul => BinOp::Mul,
            Src::Div => BinOp::Div,
        })
    }
}

flow_trace::closed_word!(
    /// A quantifier over a list (reference §4.1).
    pub Quantifier {
        All = "all": "The condition holds for every item (true for an empty list).",
        Any = "any": "The condition holds for some item (false for an empty list).",
    }
);
