//! A node's resolved properties, typed per node kind (reference §6.1).
//!
//! The checker checks a node's block against its kind's spec
//! ([`crate::spec::NODE_KINDS`]), fills in every declared default, and
//! lowers the result to a [`NodeBody`] — one variant per node kind, each
//! with exactly the properties that kind accepts — and the [`NodeCommon`]
//! properties every kind accepts. The plan stores these typed values, so a
//! reader matches on the kind and reads a field: no reader looks a
//! property up by name or applies a default.

use crate::ir::{Action, NameMap, NodeKind, TExpr, Value};
use crate::lookup::{int, names, word};
use crate::types::Ty;
use crate::view::{Conflicts, OnFailure};
use flow_trace::{ContextMode, Decision, TerminationStatus};
use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A node's retry policy (`retry: { attempts, backoff, max_backoff }`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Retry {
    /// Total attempts, the first included.
    pub attempts: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_backoff_ms: Option<u64>,
}

/// A task state a node enters on completion (`state: Machine.STATE`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StateRef {
    pub machine: String,
    pub state: String,
}

/// The properties every node kind accepts (`spec::NODE_COMMON`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct NodeCommon {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The declared input type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Ty>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<Retry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_failure: Option<OnFailure>,
    /// The per-attempt timeout, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// The budget for one visit: a declared budget's reference or an inline
    /// record (read by [`crate::view::Budget::of`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<StateRef>,
    /// Data labels of the node's output.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    /// Blackboards the node appends to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writes: Vec<String>,
    /// Blackboards the node reads.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reads: Vec<String>,
    /// What the task is, for agent routing rules (`task` in `routes`): a
    /// record of `kind`, `labels`, `risk`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_visits: Option<u64>,
    /// At most one outgoing guard may hold.
    #[serde(default)]
    pub exclusive: bool,
}

/// What a node does, with the properties of its kind.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum NodeBody {
    Agent(AgentNode),
    Tool(ToolNode),
    Human(HumanNode),
    Parallel(ParallelNode),
    Map(MapNode),
    Join(JoinNode),
    Loop(LoopNode),
    Flow(FlowNode),
    End(EndNode),
    Compute(ComputeNode),
    /// A node of an unknown kind (an error has been reported).
    Invalid,
}

/// An agent turn (or several) producing a typed output.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct AgentNode {
    /// The declared output type (required).
    pub output_type: Ty,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// The node's context override (else its agent's, else isolated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<ContextMode>,
    /// Repair retries for invalid output.
    pub repair: u64,
    /// Turns per attempt, when declared (else the agent's, else
    /// [`crate::ceilings::DEFAULT_MAX_TURNS`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u64>,
}

/// A tool call made by the control plane.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct ToolNode {
    /// The arguments: `{ field: expr }`, each an expression value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<NameMap<Value>>,
    /// The declared output type (else the tool's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_type: Option<Ty>,
    /// The key template for non-idempotent calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

/// A human task or approval.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct HumanNode {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_type: Option<Ty>,
    /// The decisions offered.
    pub decisions: Vec<Decision>,
}

/// Static fan-out: the listed nodes run concurrently.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct ParallelNode {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u64>,
}

/// Dynamic fan-out: the target runs once per item of `over`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct MapNode {
    /// The list mapped over.
    pub over: TExpr,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u64>,
    /// The largest list accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_items: Option<u64>,
}

/// How a join aggregates its branches (reference §6.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "rule", rename_all = "snake_case")]
pub enum JoinRule {
    All,
    Any,
    Majority,
    First,
    Weighted {
        weights: IndexMap<String, f64>,
    },
    Custom {
        evaluator: String,
    },
    /// A vote on the field `key` of the branches' outputs, counted by the
    /// control plane once every branch arrived: the value whose weight
    /// (1 a branch unless `weights` says otherwise) passes half the total
    /// — or, with `quorum`, reaches that many votes — is the result; else
    /// there is none (a tie, a split, missing votes).
    Vote {
        key: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        quorum: Option<u64>,
        #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
        weights: IndexMap<String, f64>,
    },
}

/// Join/merge of the listed branches.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct JoinNode {
    pub rule: JoinRule,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_type: Option<Ty>,
    pub conflicts: Conflicts,
}

/// A bounded loop: the listed nodes form one round.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct LoopNode {
    /// Rounds allowed (required).
    pub max_rounds: u64,
    /// The convergence condition checked after each round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<TExpr>,
    /// What happens when the rounds run out (`None`: continue).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_exhausted: Option<Action>,
}

/// A sub-flow: another workflow run as one node.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct FlowNode {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_type: Option<Ty>,
}

/// A value computed by the control plane (reference §6.1). Without a
/// target: the `let` names in order, each over the nodes' outputs, `input`
/// and the names before it, then `value` over all of them. With one (a
/// `compute` declaration, §5.9): its `let` and `value` over `input`, the
/// record the node's `args` make.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ComputeNode {
    /// The output type: the node's `output`, or the computation's.
    pub output_type: Ty,
    /// The declared computation applied, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// Its input, `{ field: expr }` over the nodes.
    #[serde(default, skip_serializing_if = "NameMap::is_empty")]
    pub args: NameMap<TExpr>,
    #[serde(default, skip_serializing_if = "NameMap::is_empty")]
    pub lets: NameMap<TExpr>,
    pub value: TExpr,
}

/// What a computation evaluates: its `let` names in order, then `value`.
#[derive(Debug, Clone)]
pub struct Computation<'p> {
    pub lets: Vec<(&'p str, &'p TExpr)>,
    pub value: &'p TExpr,
}

impl ComputeNode {
    /// What the node reads: the free names of its expressions (its `args`
    /// when it applies a computation) that are not its own `let` names —
    /// nodes and `input` — in first-use order.
    pub fn reads(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let exprs: Vec<&TExpr> =
            if self.function.is_some() { self.args.values().collect() } else { self.lets.values().chain([&self.value]).collect() };
        for expr in exprs {
            for name in expr.free_vars() {
                if !self.lets.contains_key(&name) && !out.contains(&name) {
                    out.push(name);
                }
            }
        }
        out
    }

    /// The `let` names and `value` evaluated: the node's own, or the
    /// declared computation's in `program` (`None` if it has none).
    pub fn computation<'p>(&'p self, program: &'p crate::ir::Program) -> Option<Computation<'p>> {
        let Some(function) = &self.function else {
            return Some(Computation { lets: self.lets.iter().map(|(k, v)| (k.as_str(), v)).collect(), value: &self.value });
        };
        let (lets, value) = program.decls.get(function)?.lets_and_value()?;
        Some(Computation { lets, value })
    }
}

/// Termination with a reason code.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct EndNode {
    pub status: TerminationStatus,
}

impl NodeBody {
    /// The node kind.
    pub fn kind(&self) -> NodeKind {
        match self {
            NodeBody::Agent(_) => NodeKind::Agent,
            NodeBody::Tool(_) => NodeKind::Tool,
            NodeBody::Human(_) => NodeKind::Human,
            NodeBody::Parallel(_) => NodeKind::Parallel,
            NodeBody::Map(_) => NodeKind::Map,
            NodeBody::Join(_) => NodeKind::Join,
            NodeBody::Loop(_) => NodeKind::Loop,
            NodeBody::Flow(_) => NodeKind::Flow,
            NodeBody::End(_) => NodeKind::End,
            NodeBody::Compute(_) => NodeKind::Compute,
            NodeBody::Invalid => NodeKind::Invalid,
        }
    }

    /// Every action the properties hold (a loop's `on_exhausted`).
    pub fn actions(&self) -> Vec<&Action> {
        match self {
            NodeBody::Loop(l) => l.on_exhausted.iter().collect(),
            _ => Vec::new(),
        }
    }
}

/// Lowering: a node's checked properties, typed for `kind`. Every default
/// the spec declares is taken from the spec when the property is absent
/// (the checker has already filled them in; this keeps the conversion
/// total for IR built by hand). A required property that is missing or
/// invalid — an error has been reported — reads as a neutral value.
pub fn lower(kind: NodeKind, props: &NameMap<Value>) -> (NodeCommon, NodeBody) {
    let spec = crate::spec::node_spec(kind.as_str());
    let defaults = spec.into_iter().flat_map(|s| s.props.iter()).filter_map(|p| Some((p.name, p.default?.value())));
    let defaults: Vec<(&str, Value)> = defaults.collect();
    let get = |key: &str| {
        props.get(key).filter(|v| !matches!(v, Value::Invalid)).or_else(|| defaults.iter().find(|(n, _)| *n == key).map(|(_, v)| v))
    };
    (common(props), body(kind, &get))
}

fn common(props: &NameMap<Value>) -> NodeCommon {
    let get = |key: &str| props.get(key).filter(|v| !matches!(v, Value::Invalid));
    NodeCommon {
        description: word(get("description")).map(str::to_string),
        input: ty(get("input")),
        retry: match get("retry") {
            Some(Value::Record(r)) => Some(Retry {
                attempts: int(r.get("attempts")).unwrap_or(1),
                backoff_ms: duration(r.get("backoff")),
                max_backoff_ms: duration(r.get("max_backoff")),
            }),
            _ => None,
        },
        on_failure: word(get("on_failure")).and_then(OnFailure::parse),
        timeout_ms: duration(get("timeout")),
        budget: get("budget").cloned(),
        state: match get("state") {
            Some(Value::State { machine, state }) => Some(StateRef { machine: machine.clone(), state: state.clone() }),
            _ => None,
        },
        labels: names(get("labels")),
        writes: names(get("writes")),
        reads: names(get("reads")),
        task: get("task").cloned(),
        max_visits: int(get("max_visits")),
        exclusive: matches!(get("exclusive"), Some(Value::Bool(true))),
    }
}

fn body<'v>(kind: NodeKind, get: &dyn Fn(&str) -> Option<&'v Value>) -> NodeBody {
    let text = |key: &str| word(get(key)).map(str::to_string);
    match kind {
        NodeKind::Agent => NodeBody::Agent(AgentNode {
            output_type: ty(get("output")).unwrap_or(Ty::Any),
            prompt: text("prompt"),
            context: word(get("context")).and_then(ContextMode::parse),
            repair: int(get("repair")).unwrap_or(0),
            max_turns: int(get("max_turns")),
        }),
        NodeKind::Tool => NodeBody::Tool(ToolNode {
            args: match get("args") {
                Some(Value::Record(r)) => Some(r.clone()),
                _ => None,
            },
            output_type: ty(get("output")),
            idempotency_key: text("idempotency_key"),
        }),
        NodeKind::Human => NodeBody::Human(HumanNode {
            prompt: text("prompt"),
            output_type: ty(get("output")),
            decisions: names(get("decisions")).iter().filter_map(|d| Decision::parse(d)).collect(),
        }),
        NodeKind::Parallel => NodeBody::Parallel(ParallelNode { max_concurrency: int(get("max_concurrency")) }),
        NodeKind::Map => NodeBody::Map(MapNode {
            over: expr(get("over")).unwrap_or_else(TExpr::invalid),
            max_concurrency: int(get("max_concurrency")),
            max_items: int(get("max_items")),
        }),
        NodeKind::Join => NodeBody::Join(JoinNode {
            rule: join_rule(get("rule")),
            output_type: ty(get("output")),
            conflicts: word(get("conflicts")).and_then(Conflicts::parse).unwrap_or(Conflicts::Keep),
        }),
        NodeKind::Loop => NodeBody::Loop(LoopNode {
            max_rounds: int(get("max_rounds")).unwrap_or(1),
            until: expr(get("until")),
            on_exhausted: match get("on_exhausted") {
                Some(Value::Action(a)) => Some(a.clone()),
                _ => None,
            },
        }),
        NodeKind::Flow => NodeBody::Flow(FlowNode { output_type: ty(get("output")) }),
        NodeKind::End => {
            NodeBody::End(EndNode { status: word(get("status")).and_then(TerminationStatus::parse).unwrap_or(TerminationStatus::Failure) })
        }
        NodeKind::Compute => NodeBody::Compute(ComputeNode {
            output_type: ty(get("output")).unwrap_or(Ty::Any),
            function: None,
            args: match get("args") {
                Some(Value::Record(r)) => r.iter().filter_map(|(k, v)| Some((k.clone(), expr(Some(v))?))).collect(),
                _ => NameMap::default(),
            },
            lets: match get("let") {
                Some(Value::Record(r)) => r.iter().filter_map(|(k, v)| Some((k.clone(), expr(Some(v))?))).collect(),
                _ => NameMap::default(),
            },
            value: expr(get("value")).unwrap_or_else(TExpr::invalid),
        }),
        NodeKind::Invalid => NodeBody::Invalid,
    }
}

fn join_rule(value: Option<&Value>) -> JoinRule {
    let (rule, weights, evaluator) = match value {
        Some(Value::JoinRule { key: Some(key), quorum, weights, .. }) => {
            return JoinRule::Vote { key: key.clone(), quorum: *quorum, weights: weights.clone() };
        }
        Some(Value::JoinRule { rule, weights, evaluator, .. }) => (rule.as_str(), weights.clone(), evaluator.clone()),
        other => (word(other).unwrap_or("all"), IndexMap::new(), None),
    };
    match (rule, evaluator) {
        ("any", _) => JoinRule::Any,
        ("majority", _) => JoinRule::Majority,
        ("first", _) => JoinRule::First,
        ("weighted", _) => JoinRule::Weighted { weights },
        ("custom", Some(evaluator)) => JoinRule::Custom { evaluator },
        _ => JoinRule::All,
    }
}

fn ty(value: Option<&Value>) -> Option<Ty> {
    match value? {
        Value::Type(t) => Some(t.clone()),
        _ => None,
    }
}

fn expr(value: Option<&Value>) -> Option<TExpr> {
    match value? {
        Value::Expr(e) => Some(e.clone()),
        _ => None,
    }
}

fn duration(value: Option<&Value>) -> Option<u64> {
    match value? {
        Value::Duration(ms) => Some(*ms),
        _ => None,
    }
}
