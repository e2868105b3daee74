//! A transfer's resolved properties, typed per transfer kind (reference
//! §6.5): a handoff's or a delegation's, each with exactly the properties
//! its block accepts ([`crate::spec::HANDOFF_BLOCK`],
//! [`crate::spec::DELEGATE_BLOCK`]), defaults filled in at lowering.

use crate::ir::{NameMap, TExpr, TransferKind, Value};
use crate::lookup::{int, names, word};
use crate::types::Ty;
use flow_trace::{ContextMode, MessageType};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a transfer hands over, with the properties of its kind.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TransferBody {
    Handoff(Handoff),
    Delegate(Delegation),
}

/// A handoff: control moves from one agent node to another.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Handoff {
    /// Why control moves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The type of what is handed over (`payload`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Ty>,
    /// What the receiver sees.
    pub context: ContextMode,
    /// The fields of a filtered context slice.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub context_fields: Vec<String>,
    /// Artifact references handed over, as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifacts: Option<Value>,
    /// Acceptance checks over `payload`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accept: Vec<TExpr>,
    /// Back-and-forth handoffs allowed on this pair.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_hops: Option<u64>,
    /// The message type the handoff sends (`message`; declared default
    /// TASK_ASSIGN).
    #[serde(default = "task_assign")]
    pub message: MessageType,
    /// Data labels of the payload.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
}

fn task_assign() -> MessageType {
    MessageType::TaskAssign
}

/// A delegation: work handed to another node under a contract.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Delegation {
    /// The delegation contract (required).
    pub contract: String,
    /// The inputs handed over, as a fixed snapshot: `{ name: expr }`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<NameMap<Value>>,
    /// Why the work is delegated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The fields of a filtered context slice.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub context_fields: Vec<String>,
    /// Artifact references handed over, as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifacts: Option<Value>,
}

impl TransferBody {
    /// The transfer kind.
    pub fn kind(&self) -> TransferKind {
        match self {
            TransferBody::Handoff(_) => TransferKind::Handoff,
            TransferBody::Delegate(_) => TransferKind::Delegate,
        }
    }
}

/// Lowering: a transfer's checked properties, typed for `kind`; an absent
/// property with a declared default takes the spec's (the checker has
/// already filled it in), and a missing required one — an error has been
/// reported — reads as empty.
pub fn lower(kind: TransferKind, props: &NameMap<Value>) -> TransferBody {
    let spec = match kind {
        TransferKind::Handoff => &crate::spec::HANDOFF_BLOCK,
        TransferKind::Delegate => &crate::spec::DELEGATE_BLOCK,
    };
    let defaults: Vec<(&str, Value)> = spec.props.iter().filter_map(|p| Some((p.name, p.default?.value()))).collect();
    let get = |key: &str| {
        props.get(key).filter(|v| !matches!(v, Value::Invalid)).or_else(|| defaults.iter().find(|(n, _)| *n == key).map(|(_, v)| v))
    };
    let text = |key: &str| word(get(key)).map(str::to_string);
    match kind {
        TransferKind::Handoff => TransferBody::Handoff(Handoff {
            reason: text("reason"),
            payload: match get("payload") {
                Some(Value::Type(t)) => Some(t.clone()),
                _ => None,
            },
            context: word(get("context")).and_then(ContextMode::parse).unwrap_or(ContextMode::Isolated),
            context_fields: names(get("context_fields")),
            artifacts: get("artifacts").cloned(),
            accept: match get("accept") {
                Some(Value::List(items)) => {
                    items.iter().filter_map(|v| if let Value::Expr(e) = v { Some(e.clone()) } else { None }).collect()
                }
                Some(Value::Expr(e)) => vec![e.clone()],
                _ => Vec::new(),
            },
            max_hops: int(get("max_hops")),
            message: word(get("message")).and_then(MessageType::parse).unwrap_or(MessageType::TaskAssign),
            labels: names(get("labels")),
        }),
        TransferKind::Delegate => TransferBody::Delegate(Delegation {
            contract: text("contract").unwrap_or_default(),
            inputs: match get("inputs") {
                Some(Value::Record(r)) => Some(r.clone()),
                _ => None,
            },
            reason: text("reason"),
            context_fields: names(get("context_fields")),
            artifacts: get("artifacts").cloned(),
        }),
    }
}
