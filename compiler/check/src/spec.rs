//! What each declaration, node kind and block accepts: the property tables.
//!
//! The grammar gives every declaration the same block syntax; these tables
//! say which properties (and which other entries) a given block takes, and
//! what form each value must have. The checker reads them, and so does the
//! reference test that keeps docs/reference.md complete.

use flow_trace::{ActionKind, Decision, Zone};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The kinds of top-level declaration, sharing one namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Type,
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
    Policy,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Type => "type",
            Kind::Principal => "principal",
            Kind::Provider => "provider",
            Kind::Agent => "agent",
            Kind::Tool => "tool",
            Kind::Evaluator => "evaluator",
            Kind::Budget => "budget",
            Kind::Contract => "contract",
            Kind::Blackboard => "blackboard",
            Kind::Compute => "compute",
            Kind::Projection => "projection",
            Kind::Machine => "machine",
            Kind::Workflow => "workflow",
            Kind::Policy => "policy",
        }
    }

    /// "an agent", "a tool".
    pub fn article(self) -> String {
        let word = self.as_str();
        if word.starts_with(['a', 'e', 'i', 'o', 'u']) {
            format!("an {word}")
        } else {
            format!("a {word}")
        }
    }
}

/// The variables an expression may mention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Env {
    /// The nodes of the enclosing workflow (each is its output) and `input`.
    Nodes,
    /// As `Nodes`, plus `payload` (a handoff's payload).
    Payload,
    /// `output` (a contract's expected output).
    Output,
    /// `input` (an evaluator's input).
    Input,
    /// `task`: `{ kind: string, labels: [string], risk: string }` (agent routing).
    Task,
}

/// The form a property value must have.
#[derive(Debug, Clone, Copy)]
pub enum V {
    Str,
    Bool,
    /// A non-negative integer; `k` and `M` suffixes allowed (`400k`).
    Int,
    /// A number in 0..=1 or a percentage.
    Fraction,
    Duration,
    Money,
    Percent,
    /// `N / duration`, e.g. `10 / 1m`.
    Rate,
    /// A type expression.
    Type,
    /// A top-level declaration of one of these kinds.
    Ref(&'static [Kind]),
    /// A node of the enclosing workflow.
    Node,
    /// `Machine.STATE`.
    State,
    /// A state name of the machine being declared.
    StateName,
    List(&'static V),
    /// One of these bare words.
    Word(&'static [&'static str]),
    /// An object with exactly these keys.
    Record(&'static [P]),
    /// An object with any keys, each value of this form.
    Map(&'static V),
    /// A boolean expression.
    Pred(Env),
    /// An action: `continue`, `terminate(reason)`, `goto(node)`, ….
    Action,
    /// One action or a list of actions, taken in order.
    Actions,
    /// An expression of any type.
    Expr(Env),
    /// An expression of list type (what a `map` node ranges over).
    ListExpr(Env),
    /// A gate evaluator: a declared evaluator applied to arguments, or
    /// `predicate(expr)`, `schema_valid(expr, Type)`, `exists(expr)`.
    Evaluator,
    /// Named values `{ name: expr, … }` over the nodes, each in scope for
    /// the ones after it and for the rest of the block (a `compute` node's
    /// `let`).
    Lets,
    /// A join rule: `all`, `any`, `majority`, `first`,
    /// `weighted({ node: weight })`, `custom(evaluator)`.
    JoinRule,
    /// A budget: a declared budget's name or an inline budget object.
    Budget,
    /// A tool node's arguments: an object typed against the tool's input.
    Args,
    /// A list of strings, or of expressions producing artifacts.
    Artifacts,
    OneOf(&'static [V]),
}

/// One property a block accepts.
#[derive(Debug, Clone, Copy)]
pub struct P {
    pub name: &'static str,
    pub required: bool,
    pub value: V,
    pub doc: &'static str,
    /// The value an absent property has: declared here, once, and filled
    /// in at lowering, so no reader of the plan applies a default of its own.
    pub default: Option<PropDefault>,
    /// Whether the runtime gives the property its meaning yet (reference
    /// §13): a property it does not is warned about (W0117) or refused
    /// (E0116) where it is written — never accepted in silence.
    pub support: Support,
}

/// How far the runtime honours a property.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// It acts at run time, or only before the run (types, scopes).
    Runs,
    /// Accepted, but nothing at run time acts on it yet: W0117, with why.
    NotEnforced(&'static str),
    /// Refused: E0116 ("not supported yet"), with why.
    Refused(&'static str),
}

impl P {
    /// The property is accepted with a W0117 warning: nothing at run time
    /// acts on it yet (`why`).
    const fn not_enforced(self, why: &'static str) -> P {
        P { support: Support::NotEnforced(why), ..self }
    }
}

/// A property's declared default.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PropDefault {
    Word(&'static str),
    Int(i64),
    Bool(bool),
    /// A list of words.
    Words(&'static [&'static str]),
}

impl PropDefault {
    /// The default as a checked value.
    pub fn value(self) -> crate::ir::Value {
        match self {
            PropDefault::Word(w) => crate::ir::Value::Word(w.to_string()),
            PropDefault::Int(i) => crate::ir::Value::Int(i),
            PropDefault::Bool(b) => crate::ir::Value::Bool(b),
            PropDefault::Words(ws) => crate::ir::Value::List(ws.iter().map(|w| crate::ir::Value::Word(w.to_string())).collect()),
        }
    }
}

const fn opt(name: &'static str, value: V, doc: &'static str) -> P {
    P { name, required: false, value, doc, default: None, support: Support::Runs }
}

/// An optional property with a declared default.
const fn def(name: &'static str, value: V, default: PropDefault, doc: &'static str) -> P {
    P { name, required: false, value, doc, default: Some(default), support: Support::Runs }
}

const fn req(name: &'static str, value: V, doc: &'static str) -> P {
    P { name, required: true, value, doc, default: None, support: Support::Runs }
}

impl BlockSpec<'_> {
    /// The declared default of a word property (the one place it is written).
    pub fn default_word(&self, name: &str) -> Option<&'static str> {
        match self.props.iter().find(|p| p.name == name)?.default? {
            PropDefault::Word(w) => Some(w),
            _ => None,
        }
    }
}

/// The non-property entries a block may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    Handler,
    Node,
    Gate,
    Transfer,
    Policy,
    Edge,
    Record,
}

/// What a block accepts.
#[derive(Debug, Clone, Copy)]
pub struct BlockSpec<'a> {
    pub props: &'a [P],
    pub entries: &'a [EntryKind],
    /// The handler event names accepted (when `Handler` is allowed).
    pub events: &'a [&'static str],
}

/// A declaration keyword's spec: its variants (`tool t: command`) and the
/// properties common to all variants plus those of each variant.
#[derive(Debug, Clone, Copy)]
pub struct DeclSpec {
    pub kind: Kind,
    pub variants: &'static [(&'static str, &'static [P])],
    /// The variant assumed when none is written, if any.
    pub default_variant: Option<&'static str>,
    pub block: BlockSpec<'static>,
}

pub const RISK: &[&str] = &["low", "medium", "high", "critical"];
pub const EFFECTS: &[&str] = &["none", "idempotent", "non_idempotent"];
pub const CONTEXT: &[&str] = &["isolated", "fork", "filtered"];
/// The message types a handoff may record (`flow_trace::MessageType`; a
/// test holds the two lists equal).
pub const MESSAGE_TYPES: &[&str] = &["TASK_ASSIGN", "TASK_REPORT", "QUERY", "RESPONSE", "VOTE_REQUEST", "VOTE", "APPROVAL_REQUEST"];
pub const DECISIONS: &[&str] =
    &[Decision::Approve.as_str(), Decision::Revise.as_str(), Decision::Replan.as_str(), Decision::Reject.as_str()];
/// The zones a budget declares (`green` is where every scope starts).
pub const ZONES: &[&str] = &[Zone::Yellow.as_str(), Zone::Red.as_str(), Zone::Fuse.as_str()];
pub const OUTCOMES: &[&str] = &["PASS", "REQUIRES_DECISION", "BLOCK"];
pub const ON_FAILURE: &[&str] = &["retry", "degrade", "skip", "terminate"];
pub const SINKS: &[&str] = &["public", "internal", "private"];
pub const RESPONSES: &[&str] = &["warn", "block", "halt", "escalate"];

const RETRY: &[P] = &[
    req("attempts", V::Int, "Total attempts, the first included."),
    opt("backoff", V::Duration, "Delay before the second attempt; doubles after each failure."),
    opt("max_backoff", V::Duration, "Upper bound of the delay."),
];

const RESERVE: &[P] = &[
    opt("verification", V::Fraction, "Share kept for verification steps."),
    opt("orchestration", V::Fraction, "Share kept for the control plane's own calls."),
    opt("reconciliation", V::Fraction, "Share kept for reconciling unknown outcomes."),
];

const ZONE: &[P] = &[
    req("zone", V::Word(ZONES), "The zone entered when the remaining share falls below `below`."),
    req("below", V::Fraction, "Remaining share (of the tightest limit) under which the zone starts."),
    req("action", V::Actions, "What the control plane does on entering the zone: one action or a list, in order."),
];

pub const BUDGET_PROPS: &[P] = &[
    opt("steps", V::Int, "Hard limit on control-plane steps (node attempts)."),
    opt("tokens", V::Int, "Hard limit on model tokens, input and output."),
    opt("duration", V::Duration, "Hard limit on wall-clock time."),
    opt("tool_calls", V::Int, "Hard limit on tool calls."),
    opt("cost", V::Money, "Hard limit on money spent."),
    opt("reserve", V::Record(RESERVE), "Shares held back from ordinary work."),
    opt("zones", V::List(&V::Record(ZONE)), "Budget zones and their actions (green is above every zone)."),
    opt("on_exhausted", V::Action, "The declared fallback when a limit is reached."),
];

const AUDIT: &[P] = &[
    req("level", V::Word(&["none", "summary", "full"]), "What is kept of each call."),
    opt("retention", V::Duration, "How long audit records are kept."),
    opt("visible_to", V::List(&V::Ref(&[Kind::Principal])), "Who may read the audit records."),
];

const ROUTE: &[P] = &[
    req("when", V::Pred(Env::Task), "Condition over `task` (kind, labels, risk)."),
    req("use", V::Ref(&[Kind::Provider]), "Provider to route to."),
    opt("model", V::Str, "Model override at that provider."),
];

/// The boundary events a gate's `trigger.on` may name: the runtime
/// triggers a gate when its `from` node completes (E0116 for others).
pub const GATE_TRIGGER_EVENTS: &[&str] = &["node_completed"];

const TRIGGER: &[P] = &[
    req("by", V::List(&V::Ref(&[Kind::Agent, Kind::Principal])), "Who may trigger the gate."),
    req("on", V::List(&V::Str), "The boundary events that may trigger it: `\"node_completed\"` (its `from` node completed)."),
];

pub const PRINCIPAL: DeclSpec = DeclSpec {
    kind: Kind::Principal,
    variants: &[
        ("human", &[]),
        ("role", &[opt("members", V::List(&V::Ref(&[Kind::Principal])), "Principals holding the role.")]),
        ("service", &[]),
    ],
    default_variant: Some("human"),
    block: BlockSpec {
        props: &[
            opt("description", V::Str, "What this principal is."),
            opt("roles", V::List(&V::Ref(&[Kind::Principal])), "Roles this principal holds."),
            opt("contact", V::Str, "How to reach the principal: every decision request asked of it names it (`contacts`)."),
        ],
        entries: &[],
        events: &[],
    },
};

pub const PROVIDER: DeclSpec = DeclSpec {
    kind: Kind::Provider,
    variants: &[
        (
            "openai",
            &[
                req("base_url", V::Str, "Chat Completions endpoint base URL."),
                req("model", V::Str, "Model name."),
                opt("api_key_env", V::Str, "Environment variable holding the API key (never stored)."),
                opt("structured_output", V::Word(&["json_schema", "json_object", "none"]), "How the output schema is requested."),
            ],
        ),
        ("scripted", &[opt("script", V::Str, "Path of the script of replies.")]),
        ("replay", &[req("cassette", V::Str, "Path of the cassette to replay.")]),
    ],
    default_variant: None,
    block: BlockSpec {
        props: &[
            opt("description", V::Str, "What this provider is."),
            opt("local", V::Bool, "Whether data stays on this machine: turns on data labelled private go only to local providers."),
            opt("timeout", V::Duration, "Per-request timeout."),
            opt("retries", V::Int, "Retries on 429 and 5xx."),
            opt("price_input", V::Money, "Price per million input tokens."),
            opt("price_output", V::Money, "Price per million output tokens."),
            opt("max_tokens", V::Int, "Largest completion requested (default 4096): the output tokens of one turn."),
            opt(
                "max_input_tokens",
                V::Int,
                "Largest input of one turn, in tokens: a turn whose request may hold more is not sent (`input_too_large`).",
            ),
        ],
        entries: &[],
        events: &[],
    },
};

pub const AGENT: DeclSpec = DeclSpec {
    kind: Kind::Agent,
    variants: &[],
    default_variant: None,
    block: BlockSpec {
        props: &[
            req("provider", V::Ref(&[Kind::Provider]), "Default provider of the agent's turns."),
            opt("model", V::Str, "Model override at the provider."),
            opt("description", V::Str, "What the agent does."),
            opt("instructions", V::Str, "System instructions."),
            opt("tools", V::List(&V::Ref(&[Kind::Tool])), "Tools the agent may call."),
            opt("scope", V::List(&V::Str), "Capability scope (free-form capability names)."),
            opt("can_delegate", V::Bool, "Whether the agent may delegate (default false)."),
            opt("context", V::Word(CONTEXT), "What the agent sees: isolated, fork or filtered."),
            opt("context_fields", V::List(&V::Str), "The fields of a filtered context slice."),
            opt("routes", V::List(&V::Record(ROUTE)), "Model routing rules, first match wins."),
            opt("budget", V::Budget, "The agent's run-wide budget: a cap over all its turns in a run."),
            opt("labels", V::List(&V::Str), "Data labels of what the agent produces (e.g. \"private\")."),
            opt("max_turns", V::Int, "Turns per node attempt (default 8)."),
            opt("max_input_tokens", V::Int, "Largest input of one turn, in tokens (overrides the provider's)."),
            opt("rate_limit", V::Rate, "Model turns per period, e.g. `30 / 1m`."),
        ],
        entries: &[],
        events: &[],
    },
};

pub const TOOL: DeclSpec = DeclSpec {
    kind: Kind::Tool,
    variants: &[
        (
            "command",
            &[
                req("argv", V::List(&V::Str), "Program and arguments; `{field}` is replaced by an input field. Never run through a shell."),
                opt("env", V::List(&V::Str), "Environment variables passed through (allow-list)."),
                opt("cwd", V::Str, "Working directory."),
            ],
        ),
        (
            "http",
            &[
                req("url", V::Str, "URL; `{field}` is replaced by an input field."),
                opt("method", V::Word(&["GET", "POST", "PUT", "PATCH", "DELETE"]), "HTTP method (default POST)."),
                opt("headers", V::Map(&V::Str), "Request headers."),
            ],
        ),
        (
            "mcp",
            &[
                opt("server", V::List(&V::Str), "Command line of the MCP server, spoken to over stdio (this or `url`)."),
                opt("url", V::Str, "URL of the MCP server, spoken to over Streamable HTTP (this or `server`)."),
                opt("headers", V::Map(&V::Str), "Request headers sent to a `url` server."),
                opt("remote_name", V::Str, "The tool's name at the server (default: this name)."),
                opt("resource", V::Str, "Read this resource instead of calling a tool; `{field}` is replaced by an input field."),
                opt("prompt", V::Str, "Get this prompt instead of calling a tool; the input's fields are its arguments."),
                opt("roots", V::List(&V::Str), "Directories the server is told as its roots, relative to the flow file (default: its directory)."),
                opt("quota", V::Int, "Calls allowed per run at this server."),
            ],
        ),
        ("builtin", &[opt("function", V::Str, "The native function (default: this name).")]),
    ],
    default_variant: None,
    block: BlockSpec {
        props: &[
            req("description", V::Str, "What the tool does (shown to models)."),
            req("input", V::Type, "Input type."),
            req("output", V::Type, "Output type."),
            opt("allowed_agents", V::List(&V::Ref(&[Kind::Agent])), "Agents allowed to call it (RBAC)."),
            opt("timeout", V::Duration, "Per-call timeout."),
            opt("rate_limit", V::Rate, "Calls per period, e.g. `10 / 1m`."),
            opt("risk", V::Word(RISK), "Risk level."),
            opt("confirm", V::Bool, "Whether each call needs a human confirmation."),
            opt("audit", V::OneOf(&[V::Word(&["none", "summary", "full"]), V::Record(AUDIT)]), "Audit policy.").not_enforced(
                "an audit `level` and `retention` are not applied yet: every call is kept in full, for as long as the run directory (only `visible_to` acts: they may confirm calls)",
            ),
            opt("effect", V::Word(EFFECTS), "Side effects: none, idempotent or non_idempotent."),
            opt("sink", V::Word(SINKS), "Where data sent to the tool ends up (information flow)."),
            opt("labels", V::List(&V::Str), "Data labels of the tool's output."),
        ],
        entries: &[],
        events: &[],
    },
};

pub const EVALUATOR: DeclSpec = DeclSpec {
    kind: Kind::Evaluator,
    variants: &[
        ("predicate", &[req("check", V::Pred(Env::Input), "The condition over `input`.")]),
        ("schema", &[req("schema", V::Type, "The type `input` must satisfy.")]),
        (
            "command",
            &[
                req("argv", V::List(&V::Str), "Probe command; `{field}` is replaced by an input field. Never run through a shell."),
                opt(
                    "expect",
                    V::Word(&["exit_zero", "json"]),
                    "exit_zero: PASS when the probe exits 0; json: stdout is parsed as JSON (`output`) and `check` decides.",
                ),
                opt("output", V::Type, "Type of the probe's JSON output (`output` in `check`)."),
                opt("check", V::Pred(Env::Input), "Condition over `input` and the probe's `output` (with `expect: json`)."),
            ],
        ),
        (
            "llm",
            &[
                req("judge", V::Ref(&[Kind::Agent]), "The judging agent: one model turn per item answers `{ pass, reason }`."),
                opt("rubric", V::Str, "Judging rubric (sent to the judge with the input)."),
            ],
        ),
        (
            "human",
            &[req(
                "by",
                V::List(&V::Ref(&[Kind::Principal])),
                "Who judges: they are asked to approve (PASS) or reject (the `fail` outcome).",
            )],
        ),
        ("builtin", &[opt("function", V::Str, "The native evaluator (default: this name).")]),
    ],
    default_variant: None,
    block: BlockSpec {
        props: &[
            opt("description", V::Str, "What is checked."),
            opt("input", V::Type, "The evaluator's input type."),
            opt("timeout", V::Duration, "Timeout of a `command` probe (a timeout is never PASS); refused on other kinds."),
            opt("fail", V::Word(&["BLOCK", "REQUIRES_DECISION"]), "The outcome when the check fails (default BLOCK)."),
            opt("reason", V::Str, "Reason code recorded when the check does not pass."),
        ],
        entries: &[],
        events: &[],
    },
};

pub const BUDGET: DeclSpec = DeclSpec {
    kind: Kind::Budget,
    variants: &[],
    default_variant: None,
    block: BlockSpec { props: BUDGET_PROPS, entries: &[], events: &[] },
};

pub const CONTRACT: DeclSpec = DeclSpec {
    kind: Kind::Contract,
    variants: &[],
    default_variant: None,
    block: BlockSpec {
        props: &[
            req("objective", V::Str, "What the delegate must achieve."),
            opt("inputs", V::Type, "The inputs handed over (a fixed snapshot)."),
            req("output", V::Type, "The expected output type."),
            opt("accept", V::List(&V::Pred(Env::Output)), "Acceptance checks over `output`."),
            opt("tools", V::List(&V::Ref(&[Kind::Tool])), "Tools granted to the delegate."),
            opt("scope", V::List(&V::Str), "Capability scope granted."),
            opt("budget", V::Budget, "The delegation subtree's budget."),
            opt("deadline", V::Duration, "Time allowed from dispatch: a limit on the delegation budget's duration."),
            opt("can_delegate", V::Bool, "Whether the delegate may delegate further (default false)."),
            opt("max_depth", V::Int, "How deep delegation may go below the delegate."),
            opt("max_fanout", V::Int, "Delegates the delegate may start in turn."),
            opt("context", V::Word(CONTEXT), "What the delegate sees: isolated, fork or filtered (over its agent's own context)."),
            opt("reporting_interval", V::Duration, "How often the delegate reports progress.")
                .not_enforced("a contract's `reporting_interval` is not enforced yet: delegates report no progress events"),
        ],
        entries: &[],
        events: &[],
    },
};

/// A named computation: a pure function of `input` that compute nodes
/// apply (`node check: compute NAME { args: { … } }`), so a strategy can
/// live in a module and be swapped for another of the same types.
pub const COMPUTE: DeclSpec = DeclSpec {
    kind: Kind::Compute,
    variants: &[],
    default_variant: None,
    block: BlockSpec {
        props: &[
            opt("description", V::Str, "What it computes."),
            req("input", V::Type, "Its input (`input` in the expressions): what a compute node's `args` give."),
            req("output", V::Type, "Output type; the value is checked against it."),
            opt(
                "let",
                V::Lets,
                "Named intermediate values `{ name: expr, … }` over `input`, each in scope for the ones after it and for `value`.",
            ),
            req("value", V::Expr(Env::Input), "The value: an expression over `input` and the `let` names."),
        ],
        entries: &[],
        events: &[],
    },
};

/// A projection: a pure function of a finished (or paused) run's recorded
/// events, rendered by `flow project RUN NAME` as Markdown or JSON (a
/// meeting's minutes, an evidence report).
pub const PROJECTION: DeclSpec = DeclSpec {
    kind: Kind::Projection,
    variants: &[],
    default_variant: None,
    block: BlockSpec {
        props: &[
            opt("description", V::Str, "What it shows."),
            req("workflow", V::Ref(&[Kind::Workflow]), "The workflow whose runs it projects: its nodes and `input` are in scope."),
            def("format", V::Word(PROJECTION_FORMATS), PropDefault::Word("markdown"), "markdown (the value is a string) or json."),
            opt(
                "let",
                V::Lets,
                "Named intermediate values `{ name: expr, … }` over the run, each in scope for the ones after it and for `value`.",
            ),
            req(
                "value",
                V::Expr(Env::Nodes),
                "The value: an expression over the run — each node's last output, `input`, `visits`, `steps`, `gates`, `run`.",
            ),
        ],
        entries: &[],
        events: &[],
    },
};

/// What a projection renders.
pub const PROJECTION_FORMATS: &[&str] = &["markdown", "json"];

pub const BLACKBOARD: DeclSpec = DeclSpec {
    kind: Kind::Blackboard,
    variants: &[],
    default_variant: None,
    block: BlockSpec {
        props: &[
            req("entry", V::Type, "Type of each entry."),
            opt("description", V::Str, "What is kept here."),
            opt("readers", V::List(&V::Ref(&[Kind::Agent, Kind::Principal])), "Who may read."),
            opt("writers", V::List(&V::Ref(&[Kind::Agent, Kind::Principal])), "Who may append."),
            opt("append_only", V::Bool, "Entries are never changed (default true; `false` is refused: no node changes an entry)."),
            opt("requires", V::Word(&["approval", "gate_pass"]), "What must pass before an append: a human approval or a gate's PASS."),
        ],
        entries: &[],
        events: &[],
    },
};

pub const MACHINE: DeclSpec = DeclSpec {
    kind: Kind::Machine,
    variants: &[],
    default_variant: None,
    block: BlockSpec {
        props: &[
            req("initial", V::StateName, "The initial state."),
            opt("terminal", V::List(&V::StateName), "Terminal states."),
            opt("description", V::Str, "What the machine tracks."),
        ],
        entries: &[EntryKind::Edge],
        events: &[],
    },
};

pub const WORKFLOW_EVENTS: &[&str] =
    &["budget_exhausted", "failure", "timeout", "max_hops", "cancelled", "policy_violation", "dead_letter"];

/// The actions a workflow's `dead_letter` handler may take: each ends the
/// run or moves control away from the sender (whose message was refused;
/// it completed). Others are refused (E0116).
pub const DEAD_LETTER_ACTIONS: &[&str] = &["terminate", "halt", "fallback", "return_partial", "goto", "activate", "revise", "replan"];

/// The payload type of each message type (`flow_trace::MessageType`).
const MESSAGES: &[P] = &[
    opt("TASK_ASSIGN", V::Type, "The payload of a TASK_ASSIGN message."),
    opt("TASK_REPORT", V::Type, "The payload of a TASK_REPORT message."),
    opt("QUERY", V::Type, "The payload of a QUERY message."),
    opt("RESPONSE", V::Type, "The payload of a RESPONSE message."),
    opt("VOTE_REQUEST", V::Type, "The payload of a VOTE_REQUEST message."),
    opt("VOTE", V::Type, "The payload of a VOTE message."),
    opt("APPROVAL_REQUEST", V::Type, "The payload of an APPROVAL_REQUEST message."),
];

pub const WORKFLOW: DeclSpec = DeclSpec {
    kind: Kind::Workflow,
    variants: &[],
    default_variant: None,
    block: BlockSpec {
        props: &[
            req("start", V::Node, "The first node."),
            opt("description", V::Str, "What the workflow does."),
            opt("input", V::Type, "The workflow's input (`input` in expressions)."),
            opt("output", V::Type, "The workflow's result."),
            opt("budget", V::Budget, "The run's budget."),
            opt("machine", V::Ref(&[Kind::Machine]), "The task state machine the nodes move."),
            opt("max_hops", V::Int, "Limit on QUERY/RESPONSE ping-pong between two nodes."),
            opt(
                "messages",
                V::Record(MESSAGES),
                "The payload type of each message type a handoff sends: a payload not of it is dead-lettered.",
            ),
            opt("concurrency", V::Int, "Parallel branches running at once."),
            opt("deadline", V::Duration, "Time allowed for the whole run."),
            opt("success", V::Pred(Env::Nodes), "Success condition checked at termination."),
            opt("escalate_to", V::Ref(&[Kind::Principal]), "Who is asked when the run cannot go on."),
        ],
        entries: &[EntryKind::Handler, EntryKind::Node, EntryKind::Gate, EntryKind::Transfer, EntryKind::Policy, EntryKind::Edge],
        events: WORKFLOW_EVENTS,
    },
};

pub const ALL_DECLS: &[DeclSpec] =
    &[PRINCIPAL, PROVIDER, AGENT, TOOL, EVALUATOR, BUDGET, CONTRACT, BLACKBOARD, COMPUTE, PROJECTION, MACHINE, WORKFLOW];

pub const POLICY_BLOCK: BlockSpec<'static> = BlockSpec {
    props: &[
        opt("description", V::Str, "What the policy protects."),
        def("response", V::Word(RESPONSES), PropDefault::Word("halt"), "What a run monitor does on violation (default halt)."),
        opt("escalate_to", V::Ref(&[Kind::Principal]), "Who is asked when the response is escalate."),
    ],
    entries: &[],
    events: &[],
};

pub const GATE_EVENTS: &[&str] = &["PASS", "REQUIRES_DECISION", "BLOCK", "approve", "revise", "replan", "reject", "timeout"];

pub const GATE_BLOCK: BlockSpec<'static> = BlockSpec {
    props: &[
        req("evaluate", V::List(&V::Evaluator), "Evaluators; BLOCK > REQUIRES_DECISION > PASS across them."),
        opt("trigger", V::Record(TRIGGER), "Who may trigger the gate, and on which events."),
        opt("decided_by", V::List(&V::Ref(&[Kind::Principal])), "Who may decide when the outcome is REQUIRES_DECISION."),
        def("decisions", V::List(&V::Word(DECISIONS)), PropDefault::Words(DECISIONS), "Decisions allowed (default all four)."),
        opt("timeout", V::Duration, "Time allowed for evaluation and decision."),
        def(
            "on_error",
            V::Word(&["BLOCK", "REQUIRES_DECISION"]),
            PropDefault::Word("BLOCK"),
            "Outcome of an evaluator error, timeout or inconclusive result (default BLOCK).",
        ),
        opt(
            "on_empty",
            V::Word(&["PASS", "BLOCK", "REQUIRES_DECISION"]),
            "Outcome of a probe, native check or judge given an empty list to check (default: the gate's `on_error`, BLOCK unless declared).",
        ),
        opt("reason", V::Str, "Reason code recorded when the gate does not pass."),
        opt(
            "replan_scope",
            V::List(&V::Node),
            "The sub-graph a REPLAN re-runs, from its entry, with what depends on it (default: the whole workflow; §6.3).",
        ),
        opt("description", V::Str, "What the gate protects."),
    ],
    entries: &[EntryKind::Handler, EntryKind::Record],
    events: GATE_EVENTS,
};

pub const HANDOFF_BLOCK: BlockSpec<'static> = BlockSpec {
    props: &[
        opt("reason", V::Str, "Why control moves."),
        opt("payload", V::Type, "Type of what is handed over (`payload`)."),
        def("context", V::Word(CONTEXT), PropDefault::Word("isolated"), "Context passed: isolated (the default), fork or filtered."),
        opt("context_fields", V::List(&V::Str), "The fields of a filtered context slice."),
        opt("artifacts", V::Artifacts, "Artifacts handed over: expressions over the nodes, evaluated as it happens and put in the receiver's context."),
        opt("accept", V::List(&V::Pred(Env::Payload)), "Acceptance checks over `payload`."),
        opt("max_hops", V::Int, "Back-and-forth handoffs allowed on this pair."),
        def(
            "message",
            V::Word(MESSAGE_TYPES),
            PropDefault::Word("TASK_ASSIGN"),
            "The message type the handoff sends: TASK_ASSIGN (the default), QUERY, RESPONSE, TASK_REPORT, VOTE_REQUEST, VOTE or APPROVAL_REQUEST.",
        ),
        opt("labels", V::List(&V::Str), "Data labels of the payload."),
    ],
    entries: &[],
    events: &[],
};

pub const DELEGATE_BLOCK: BlockSpec<'static> = BlockSpec {
    props: &[
        req("contract", V::Ref(&[Kind::Contract]), "The delegation contract."),
        opt("inputs", V::Map(&V::Expr(Env::Nodes)), "The inputs handed over, as a fixed snapshot: `{ name: expr }`."),
        opt("reason", V::Str, "Why the work is delegated."),
        opt("context_fields", V::List(&V::Str), "The fields of the inputs the delegate sees (the whole snapshot is still checked)."),
        opt(
            "artifacts",
            V::Artifacts,
            "Artifacts handed over: expressions over the nodes, evaluated as it happens and put in the receiver's context.",
        ),
    ],
    entries: &[],
    events: &[],
};

/// What a node kind's target must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A declaration of this kind.
    Decl(Kind),
    /// A list of nodes of the same workflow.
    Nodes,
    /// One node of the same workflow.
    Node,
    /// A termination reason (any name).
    Reason,
    /// No target: the block says everything (`node check: compute { … }`).
    None,
    /// A declaration of this kind, or no target.
    DeclOrNone(Kind),
}

#[derive(Debug, Clone, Copy)]
pub struct NodeSpec {
    pub kind: &'static str,
    pub target: Target,
    pub doc: &'static str,
    pub props: &'static [P],
    pub events: &'static [&'static str],
}

pub const NODE_EVENTS: &[&str] = &["failure", "timeout", "budget_exhausted", "invalid_output"];

/// Properties every node accepts.
pub const NODE_COMMON: &[P] = &[
    opt("description", V::Str, "What the node does."),
    opt("input", V::Type, "Input type."),
    opt("retry", V::Record(RETRY), "Retry policy (the orchestrator's)."),
    opt("on_failure", V::Word(ON_FAILURE), "What happens when attempts are exhausted."),
    opt("timeout", V::Duration, "Per-attempt timeout."),
    opt("budget", V::Budget, "The node's budget for one visit (all its attempts)."),
    opt("state", V::State, "The task state (`Machine.STATE`) entered when the node completes."),
    opt("labels", V::List(&V::Str), "Data labels of the node's output."),
    opt("writes", V::List(&V::Ref(&[Kind::Blackboard])), "Blackboards the node appends its output to."),
    opt("reads", V::List(&V::Ref(&[Kind::Blackboard])), "Blackboards the node reads (their entries go into its context)."),
    opt("task", V::Record(TASK), "What the task is, for agent routing rules (`task` in `routes`)."),
    opt("max_visits", V::Int, "How many times the node may run in one run (bounds rework cycles)."),
    def("exclusive", V::Bool, PropDefault::Bool(false), "At most one outgoing guard may hold; overlapping guards are an error."),
];

const TASK: &[P] = &[
    opt("kind", V::Str, "Task kind, e.g. \"classification\" or \"final_synthesis\"."),
    opt("labels", V::List(&V::Str), "Labels such as \"private\"."),
    opt("risk", V::Word(RISK), "Risk level."),
];

pub const NODE_KINDS: &[NodeSpec] = &[
    NodeSpec {
        kind: "agent",
        target: Target::Decl(Kind::Agent),
        doc: "An agent turn (or several) producing a typed output.",
        props: &[
            req("output", V::Type, "Output type; the agent's reply is validated against it."),
            opt("prompt", V::Str, "The task given to the agent."),
            opt("context", V::Word(CONTEXT), "Context override."),
            def("repair", V::Int, PropDefault::Int(1), "Repair retries for invalid output (default 1)."),
            opt("max_turns", V::Int, "Turns per attempt."),
        ],
        events: NODE_EVENTS,
    },
    NodeSpec {
        kind: "tool",
        target: Target::Decl(Kind::Tool),
        doc: "A tool call made by the control plane.",
        props: &[
            opt("args", V::Args, "Arguments, checked against the tool's input type."),
            opt("output", V::Type, "Output type (default: the tool's)."),
            opt("idempotency_key", V::Str, "Key template for non-idempotent calls."),
        ],
        events: NODE_EVENTS,
    },
    NodeSpec {
        kind: "human",
        target: Target::Decl(Kind::Principal),
        doc: "A human task or approval.",
        props: &[
            opt("prompt", V::Str, "What the human is asked."),
            opt("output", V::Type, "Output type of the human's answer."),
            def(
                "decisions",
                V::List(&V::Word(DECISIONS)),
                PropDefault::Words(&["approve", "reject"]),
                "Decisions offered (default approve and reject).",
            ),
        ],
        events: &["failure", "timeout", "approve", "revise", "replan", "reject"],
    },
    NodeSpec {
        kind: "parallel",
        target: Target::Nodes,
        doc: "Static fan-out: the listed nodes run concurrently.",
        props: &[opt("max_concurrency", V::Int, "Branches running at once.")],
        events: NODE_EVENTS,
    },
    NodeSpec {
        kind: "map",
        target: Target::Node,
        doc: "Dynamic fan-out: the target node runs once per item of `over`.",
        props: &[
            req("over", V::ListExpr(Env::Nodes), "The list to map over (an expression of list type)."),
            opt("max_concurrency", V::Int, "Items processed at once."),
            opt("max_items", V::Int, "Largest list accepted."),
        ],
        events: NODE_EVENTS,
    },
    NodeSpec {
        kind: "join",
        target: Target::Nodes,
        doc: "Join/merge of the listed branches with an aggregation rule.",
        props: &[
            def(
                "rule",
                V::JoinRule,
                PropDefault::Word("all"),
                "all (default), any, majority, first; or a vote on a field of the outputs: majority(key), quorum(n, key), weighted(key, {...}).",
            ),
            opt("output", V::Type, "The merged output type."),
            def(
                "conflicts",
                V::Word(&["keep", "fail"]),
                PropDefault::Word("keep"),
                "Conflicting results are kept (never averaged, the default) or fail the join.",
            ),
        ],
        events: NODE_EVENTS,
    },
    NodeSpec {
        kind: "loop",
        target: Target::Nodes,
        doc: "A bounded loop: the listed nodes form one round.",
        props: &[
            req("max_rounds", V::Int, "Rounds allowed."),
            opt("until", V::Pred(Env::Nodes), "Convergence condition checked after each round."),
            opt("on_exhausted", V::Action, "What happens when the rounds run out (default: continue)."),
        ],
        events: &["failure", "timeout", "budget_exhausted", "exhausted"],
    },
    NodeSpec {
        kind: "flow",
        target: Target::Decl(Kind::Workflow),
        doc: "A sub-flow: another workflow run as one node.",
        props: &[opt("output", V::Type, "Output type (default: the sub-flow's).")],
        events: NODE_EVENTS,
    },
    NodeSpec {
        kind: "compute",
        target: Target::DeclOrNone(Kind::Compute),
        doc: "A value computed by the control plane from the run's recorded data: no model, tool or human is asked.",
        props: &[
            opt("output", V::Type, "Output type (required without a target); the computed value is checked against it."),
            opt("let", V::Lets, "Named intermediate values `{ name: expr, … }`, each in scope for the ones after it and for `value`."),
            opt(
                "value",
                V::Expr(Env::Nodes),
                "The value (required without a target): an expression over the nodes' outputs, `input` and the `let` names.",
            ),
            opt("args", V::Args, "With a target (a `compute` declaration): its `input`, `{ field: expr }` over the nodes."),
        ],
        events: &["failure", "invalid_output"],
    },
    NodeSpec {
        kind: "end",
        target: Target::Reason,
        doc: "Termination with a reason code.",
        props: &[def(
            "status",
            V::Word(&["success", "failure", "partial", "escalated", "cancelled"]),
            PropDefault::Word("success"),
            "Run status (default success).",
        )],
        events: &[],
    },
];

pub fn node_spec(kind: &str) -> Option<&'static NodeSpec> {
    NODE_KINDS.iter().find(|spec| spec.kind == kind)
}

/// Actions: what handlers, zones and fallbacks may do. Each with the kinds
/// of its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActionArg {
    /// Any name (a reason code).
    Reason,
    Node,
    Principal,
    Provider,
}

pub const ACTIONS: &[(&str, &[ActionArg], &str)] = &[
    ("continue", &[], ActionKind::Continue.meaning()),
    ("retry", &[], ActionKind::Retry.meaning()),
    ("skip", &[], ActionKind::Skip.meaning()),
    ("degrade", &[], ActionKind::Degrade.meaning()),
    ("decide", &[], ActionKind::Decide.meaning()),
    ("terminate", &[ActionArg::Reason], ActionKind::Terminate.meaning()),
    ("goto", &[ActionArg::Node], ActionKind::Goto.meaning()),
    ("activate", &[ActionArg::Node], ActionKind::Activate.meaning()),
    ("revise", &[ActionArg::Node], ActionKind::Revise.meaning()),
    ("replan", &[], ActionKind::Replan.meaning()),
    ("escalate", &[ActionArg::Principal], ActionKind::Escalate.meaning()),
    ("fallback", &[ActionArg::Reason], ActionKind::Fallback.meaning()),
    ("return_partial", &[], ActionKind::ReturnPartial.meaning()),
    ("compress_context", &[], ActionKind::CompressContext.meaning()),
    ("switch_model", &[ActionArg::Provider], ActionKind::SwitchModel.meaning()),
    ("skip_reasoning", &[], ActionKind::SkipReasoning.meaning()),
    ("warn", &[], ActionKind::Warn.meaning()),
    ("halt", &[], ActionKind::Halt.meaning()),
];

/// The actions a budget zone may take: those that end the run and those
/// that change how later turns are made. Others are E0116 there.
pub const ZONE_ACTIONS: &[&str] =
    &["terminate", "halt", "fallback", "return_partial", "compress_context", "switch_model", "skip_reasoning", "warn"];

/// Built-in gate evaluators and their meaning.
pub const BUILTIN_EVALUATORS: &[(&str, &str)] = &[
    ("predicate", "predicate(expr): PASS when the boolean expression holds."),
    ("schema_valid", "schema_valid(expr, Type): PASS when the value satisfies the type."),
    ("exists", "exists(expr): PASS when the value is present (not null, the file exists)."),
];

/// Policy atoms: name, the kinds of their positional arguments, and the
/// names of their optional named arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomArgKind {
    Node,
    Tool,
    Agent,
    Gate,
    Outcome,
    Decision,
    Zone,
    Reason,
    Principal,
    Record,
}

pub const ATOMS: &[(&str, &[AtomArgKind], &str)] = &[
    ("started", &[AtomArgKind::Node], "A node attempt started."),
    ("completed", &[AtomArgKind::Node], "A node completed."),
    ("failed", &[AtomArgKind::Node], "A node failed (attempts exhausted)."),
    ("called", &[AtomArgKind::Tool], "A tool was called; `by: agent` narrows to one caller."),
    ("refused", &[AtomArgKind::Tool], "A tool call was refused by the registry; `by: agent` narrows."),
    ("handed_off", &[AtomArgKind::Node, AtomArgKind::Node], "A handoff from one node to another."),
    ("outcome", &[AtomArgKind::Gate, AtomArgKind::Outcome], "A gate recorded this outcome."),
    ("decided", &[AtomArgKind::Gate, AtomArgKind::Decision], "A decision was applied at a gate."),
    ("zone", &[AtomArgKind::Zone], "A budget zone was entered."),
    ("terminated", &[AtomArgKind::Reason], "The run terminated with this reason."),
    ("approved", &[AtomArgKind::Principal], "A human approved something."),
    ("recorded", &[AtomArgKind::Record], "A node or gate wrote this declared record (`record NAME { … }`)."),
];

#[cfg(test)]
mod tests {
    #[test]
    fn the_message_words_a_handoff_may_declare_are_the_trace_vocabularys() {
        let words: Vec<&str> = flow_trace::MessageType::ALL.iter().map(|m| m.as_str()).collect();
        assert_eq!(super::MESSAGE_TYPES, words.as_slice());
    }
}
