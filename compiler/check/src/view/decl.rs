//! Typed readers of declarations: agents, tools, providers, evaluators,
//! contracts and principals (reference §5). Each reader names the kinds it
//! applies to; on a declaration of another kind it reads nothing.

use super::{duration, expr, exprs, flag, int, money, names, record, ty, word, Budget, Effect, Expect, Props, Risk, Sink};
use crate::ir::{Decl, Program, TExpr, Value};
use crate::types::Ty;
use flow_trace::{ContextMode, Outcome};

/// A rate limit: `count` per `per_ms` milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub count: u64,
    pub per_ms: u64,
}

/// A tool's audit policy.
#[derive(Debug, Clone, PartialEq)]
pub struct Audit {
    /// `none`, `summary` or `full`.
    pub level: String,
    pub retention_ms: Option<u64>,
    /// Who may read the audit records.
    pub visible_to: Vec<String>,
}

/// One model routing rule of an agent: the first whose `when` holds wins.
#[derive(Debug, Clone)]
pub struct Route<'p> {
    /// The condition over `task`; `None` for a literal `true`/`false` (see `always`).
    pub when: Option<&'p TExpr>,
    /// A literal condition.
    pub always: Option<bool>,
    pub provider: Option<&'p str>,
    pub model: Option<&'p str>,
}

impl Decl {
    // ---- shared by several kinds

    /// What the declaration says it is (every kind).
    pub fn description(&self) -> Option<&str> {
        word(self.prop("description"))
    }

    /// The budget (agent: its run-wide cap; contract: the delegation
    /// subtree's, with the contract's `deadline` as a limit on its duration:
    /// [`Budget::with_deadline`]).
    pub fn budget<'p>(&'p self, program: &'p Program) -> Option<Budget<'p>> {
        let deadline = if self.kind == crate::spec::Kind::Contract { self.deadline_ms() } else { None };
        Budget::with_deadline(Budget::of(program, self.prop("budget")), deadline)
    }

    /// The tools held (agent) or granted (contract).
    pub fn tools(&self) -> Vec<String> {
        names(self.prop("tools"))
    }

    /// Whether `tool` is among [`Decl::tools`].
    pub fn holds_tool(&self, tool: &str) -> bool {
        self.tools().iter().any(|t| t == tool)
    }

    /// Whether the tools property is declared and lists at least one tool.
    pub fn has_tools(&self) -> bool {
        !self.tools().is_empty()
    }

    /// The capability scope (agent, contract).
    pub fn scope(&self) -> Vec<String> {
        names(self.prop("scope"))
    }

    /// Data labels of what it produces (agent, tool).
    pub fn labels(&self) -> Vec<String> {
        names(self.prop("labels"))
    }

    /// The input type (tool, evaluator).
    pub fn input_type(&self) -> Option<&Ty> {
        ty(self.prop("input"))
    }

    /// The output type (tool, contract, command evaluator).
    pub fn output_type(&self) -> Option<&Ty> {
        ty(self.prop("output"))
    }

    /// The per-call / per-request / evaluation timeout (tool, provider,
    /// evaluator), in milliseconds.
    pub fn timeout_ms(&self) -> Option<u64> {
        duration(self.prop("timeout"))
    }

    /// The rate limit (tool: calls; agent: model turns).
    pub fn rate_limit(&self) -> Option<Rate> {
        match self.prop("rate_limit")? {
            Value::Rate { count, per_ms } => Some(Rate { count: *count, per_ms: *per_ms }),
            _ => None,
        }
    }

    /// The native function (builtin tool, builtin evaluator); default: the
    /// declaration's own name.
    pub fn function(&self) -> &str {
        word(self.prop("function")).unwrap_or(&self.name)
    }

    /// A command's argv (command tool, command evaluator).
    pub fn argv(&self) -> Vec<String> {
        names(self.prop("argv"))
    }

    /// Whether the agent (agent) or the delegate (contract) may delegate.
    pub fn can_delegate(&self) -> bool {
        flag(self.prop("can_delegate")).unwrap_or(false)
    }

    /// The context mode declared (agent, contract); `None` when undeclared.
    pub fn context(&self) -> Option<ContextMode> {
        word(self.prop("context")).and_then(ContextMode::parse)
    }

    /// The fields of a filtered context slice (agent).
    pub fn context_fields(&self) -> Vec<String> {
        names(self.prop("context_fields"))
    }

    /// A model override (agent, openai provider).
    pub fn model(&self) -> Option<&str> {
        word(self.prop("model"))
    }

    /// Largest input of one turn, in tokens (agent, provider).
    pub fn max_input_tokens(&self) -> Option<u64> {
        int(self.prop("max_input_tokens"))
    }

    /// Turns per node attempt (agent), when declared.
    pub fn max_turns(&self) -> Option<u64> {
        int(self.prop("max_turns"))
    }

    // ---- agent

    /// The agent's default provider.
    pub fn provider(&self) -> Option<&str> {
        word(self.prop("provider"))
    }

    /// The agent's system instructions.
    pub fn instructions(&self) -> Option<&str> {
        word(self.prop("instructions"))
    }

    /// The agent's model routing rules, in order.
    pub fn routes(&self) -> Vec<Route<'_>> {
        let Some(Value::List(items)) = self.prop("routes") else { return Vec::new() };
        items
            .iter()
            .filter_map(|r| record(Some(r)))
            .map(|r| Route {
                when: expr(r.get("when")),
                always: flag(r.get("when")),
                provider: word(r.get("use")),
                model: word(r.get("model")),
            })
            .collect()
    }

    // ---- tool

    /// Whether the tool's calls need a human confirmation.
    pub fn confirm(&self) -> bool {
        flag(self.prop("confirm")).unwrap_or(false)
    }

    /// The tool's risk level, when declared.
    pub fn risk(&self) -> Option<Risk> {
        word(self.prop("risk")).and_then(Risk::parse)
    }

    /// Whether a tool needs a human before it is called: `risk: high` or
    /// `critical`, or `confirm: true`.
    pub fn is_risky(&self) -> bool {
        self.confirm() || matches!(self.risk(), Some(Risk::High | Risk::Critical))
    }

    /// The tool's side effects (default `none`).
    pub fn effect(&self) -> Effect {
        word(self.prop("effect")).and_then(Effect::parse).unwrap_or(Effect::None)
    }

    /// Where data sent to the tool ends up, when declared.
    pub fn sink(&self) -> Option<Sink> {
        word(self.prop("sink")).and_then(Sink::parse)
    }

    /// The tool's audit policy: a level word or a full record.
    pub fn audit(&self) -> Option<Audit> {
        match self.prop("audit")? {
            Value::Word(level) => Some(Audit { level: level.clone(), retention_ms: None, visible_to: Vec::new() }),
            Value::Record(r) => Some(Audit {
                level: word(r.get("level")).unwrap_or("none").to_string(),
                retention_ms: duration(r.get("retention")),
                visible_to: names(r.get("visible_to")),
            }),
            _ => None,
        }
    }

    /// The command line of an MCP tool's server.
    pub fn server(&self) -> Vec<String> {
        names(self.prop("server"))
    }

    /// The resource an MCP tool reads (a URI template), when it reads one.
    pub fn resource(&self) -> Option<&str> {
        word(self.prop("resource"))
    }

    /// The prompt an MCP tool gets, when it gets one.
    pub fn prompt(&self) -> Option<&str> {
        word(self.prop("prompt"))
    }

    /// The roots an MCP tool's server is told, as declared (relative to the flow file).
    pub fn roots(&self) -> Vec<String> {
        names(self.prop("roots"))
    }

    /// Calls allowed per run at an MCP tool's server.
    pub fn quota(&self) -> Option<u64> {
        int(self.prop("quota"))
    }

    /// The tool's name at its MCP server (default: its own name).
    pub fn remote_name(&self) -> &str {
        word(self.prop("remote_name")).unwrap_or(&self.name)
    }

    /// An HTTP tool's URL template, or an MCP tool's server URL.
    pub fn url(&self) -> Option<&str> {
        word(self.prop("url"))
    }

    /// An HTTP tool's method (default POST).
    pub fn method(&self) -> &str {
        word(self.prop("method")).unwrap_or("POST")
    }

    /// An HTTP tool's request headers, in declared order.
    pub fn headers(&self) -> Vec<(&str, &str)> {
        record(self.prop("headers"))
            .map(|r| r.iter().filter_map(|(k, v)| word(Some(v)).map(|v| (k.as_str(), v))).collect())
            .unwrap_or_default()
    }

    /// Environment variables passed through to a command tool.
    pub fn env_allow(&self) -> Vec<String> {
        names(self.prop("env"))
    }

    /// A command tool's working directory.
    pub fn cwd(&self) -> Option<&str> {
        word(self.prop("cwd"))
    }

    // ---- provider

    /// A string-valued provider setting (`base_url`, `model`, `api_key_env`,
    /// `structured_output`, `script`, `cassette`).
    pub fn base_url(&self) -> Option<&str> {
        word(self.prop("base_url"))
    }

    /// The environment variable holding the provider's API key.
    pub fn api_key_env(&self) -> Option<&str> {
        word(self.prop("api_key_env"))
    }

    /// How the output schema is requested from an openai provider.
    pub fn structured_output(&self) -> Option<&str> {
        word(self.prop("structured_output"))
    }

    /// The workflow a projection projects.
    pub fn projected_workflow(&self) -> Option<&str> {
        word(self.prop("workflow"))
    }

    /// What a projection renders: `markdown` (the default) or `json`.
    pub fn projection_format(&self) -> &str {
        word(self.prop("format")).unwrap_or("markdown")
    }

    /// A computation's or projection's `let` names in order, and its
    /// `value` (`None` without a value).
    pub fn lets_and_value(&self) -> Option<(Vec<(&str, &TExpr)>, &TExpr)> {
        let value = expr(self.prop("value"))?;
        let lets = record(self.prop("let")).map(|r| r.iter().filter_map(|(k, v)| expr(Some(v)).map(|e| (k.as_str(), e))).collect());
        Some((lets.unwrap_or_default(), value))
    }

    /// A scripted provider's script path.
    pub fn script(&self) -> Option<&str> {
        word(self.prop("script"))
    }

    /// A replay provider's cassette path.
    pub fn cassette(&self) -> Option<&str> {
        word(self.prop("cassette"))
    }

    /// Retries on 429 and 5xx.
    pub fn retries(&self) -> Option<u64> {
        int(self.prop("retries"))
    }

    /// Price per million input tokens (dollars; 0 when undeclared).
    pub fn price_input(&self) -> f64 {
        money(self.prop("price_input")).unwrap_or(0.0)
    }

    /// Price per million output tokens (dollars; 0 when undeclared).
    pub fn price_output(&self) -> f64 {
        money(self.prop("price_output")).unwrap_or(0.0)
    }

    /// The largest completion requested, when declared.
    pub fn max_tokens(&self) -> Option<u64> {
        int(self.prop("max_tokens"))
    }

    /// Whether data sent to the provider stays on this machine.
    pub fn local(&self) -> bool {
        flag(self.prop("local")).unwrap_or(false)
    }

    // ---- evaluator

    /// The outcome when the evaluator's check fails (default BLOCK).
    pub fn fail(&self) -> Outcome {
        word(self.prop("fail")).and_then(Outcome::parse).unwrap_or(Outcome::Block)
    }

    /// The reason code recorded when the check does not pass.
    pub fn reason(&self) -> Option<&str> {
        word(self.prop("reason"))
    }

    /// A predicate evaluator's condition, or a command evaluator's check.
    pub fn check(&self) -> Option<&TExpr> {
        expr(self.prop("check"))
    }

    /// A schema evaluator's type.
    pub fn schema(&self) -> Option<&Ty> {
        ty(self.prop("schema"))
    }

    /// How a command evaluator's probe is read (default `exit_zero`).
    pub fn expect(&self) -> Expect {
        word(self.prop("expect")).and_then(Expect::parse).unwrap_or(Expect::ExitZero)
    }

    /// An llm evaluator's judging agent.
    pub fn judge(&self) -> Option<&str> {
        word(self.prop("judge"))
    }

    /// The judging rubric (llm evaluator).
    pub fn rubric(&self) -> Option<&str> {
        word(self.prop("rubric"))
    }

    /// Who judges (human evaluator).
    pub fn judged_by(&self) -> Vec<String> {
        names(self.prop("by"))
    }

    // ---- contract

    /// The contract's fixed input snapshot type.
    pub fn inputs_type(&self) -> Option<&Ty> {
        ty(self.prop("inputs"))
    }

    /// What the delegate must achieve (contract).
    pub fn objective(&self) -> Option<&str> {
        word(self.prop("objective"))
    }

    /// The contract's acceptance checks over `output`.
    pub fn accept(&self) -> Vec<&TExpr> {
        exprs(self.prop("accept"))
    }

    /// Time allowed from dispatch (contract), in milliseconds.
    pub fn deadline_ms(&self) -> Option<u64> {
        duration(self.prop("deadline"))
    }

    /// How deep delegation may go below the delegate.
    pub fn max_depth(&self) -> Option<u64> {
        int(self.prop("max_depth"))
    }

    /// Delegates the delegate may start in turn.
    pub fn max_fanout(&self) -> Option<u64> {
        int(self.prop("max_fanout"))
    }

    // ---- principal

    /// The principals holding a role.
    pub fn members(&self) -> Vec<String> {
        names(self.prop("members"))
    }

    /// The roles a principal holds.
    pub fn roles(&self) -> Vec<String> {
        names(self.prop("roles"))
    }

    // ---- blackboard

    /// The type of each entry (blackboard).
    pub fn entry_type(&self) -> Option<&Ty> {
        ty(self.prop("entry"))
    }

    /// Who may read (blackboard; `None`: not declared, anyone may).
    pub fn readers(&self) -> Option<Vec<String>> {
        self.prop("readers").map(|v| names(Some(v)))
    }

    /// Who may append (blackboard; `None`: not declared, anyone may).
    pub fn writers(&self) -> Option<Vec<String>> {
        self.prop("writers").map(|v| names(Some(v)))
    }

    /// Whether entries are never changed (blackboard; default true).
    pub fn append_only(&self) -> bool {
        flag(self.prop("append_only")).unwrap_or(true)
    }

    /// What must pass before an append (blackboard): `approval` or `gate_pass`.
    pub fn requires(&self) -> Option<&str> {
        word(self.prop("requires"))
    }
}
