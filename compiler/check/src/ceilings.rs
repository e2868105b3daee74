//! What one model turn may use, read from the plan in one place: the
//! static verifier (`flow-verify`, worst-case budgets) and the control
//! plane (`flow-runtime`, reservations before a turn) both call these, so
//! the proof and the run count the same thing with the same defaults.
//!
//! A turn's ceiling is its input tokens (`max_input_tokens` of the agent,
//! else of the provider; no default: without it a turn's input is
//! unbounded), its completion (`max_tokens` of the provider, default
//! [`DEFAULT_MAX_TOKENS`]) and the money those cost at the provider's
//! prices per million tokens.

use crate::ir::{Action, Decl, Node, Program, Value, Workflow};

/// The completion requested when a provider declares no `max_tokens`.
pub const DEFAULT_MAX_TOKENS: u64 = 4096;
/// Turns per attempt when neither the node nor its agent declares `max_turns`.
pub const DEFAULT_MAX_TURNS: u64 = 8;
use crate::lookup::int;

fn money(v: Option<&Value>) -> f64 {
    match v {
        Some(Value::Money(m)) | Some(Value::Float(m)) => *m,
        Some(Value::Int(i)) => *i as f64,
        _ => 0.0,
    }
}

/// The most one turn of an agent at one provider may use.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TurnCeiling {
    /// Input tokens per turn: the agent's `max_input_tokens`, else the
    /// provider's; `None` when neither declares one (unbounded).
    pub max_input_tokens: Option<u64>,
    /// Completion tokens per turn: the provider's `max_tokens`.
    pub max_tokens: u64,
    /// Prices per million input and output tokens (0 when undeclared).
    pub price_input: f64,
    pub price_output: f64,
}

impl TurnCeiling {
    /// The ceiling of a turn of `agent` at `provider` (`None`: an unknown
    /// provider, which has the defaults and no prices).
    pub fn of(agent: &Decl, provider: Option<&Decl>) -> TurnCeiling {
        let prop = |key: &str| provider.and_then(|p| p.props.get(key));
        TurnCeiling {
            max_input_tokens: int(agent.props.get("max_input_tokens")).or_else(|| int(prop("max_input_tokens"))),
            max_tokens: int(prop("max_tokens")).unwrap_or(DEFAULT_MAX_TOKENS),
            price_input: money(prop("price_input")),
            price_output: money(prop("price_output")),
        }
    }

    /// Money for a turn of `input` input tokens and a full completion.
    pub fn cost_with_input(&self, input: u64) -> f64 {
        (self.price_input * input as f64 + self.price_output * self.max_tokens as f64) / 1e6
    }

    /// Tokens of a turn, input and output; `None` when the input is unbounded.
    pub fn tokens(&self) -> Option<u64> {
        Some(self.max_input_tokens? + self.max_tokens)
    }

    /// Money of a turn; `None` when input is priced and unbounded.
    pub fn cost(&self) -> Option<f64> {
        match self.max_input_tokens {
            Some(input) => Some(self.cost_with_input(input)),
            None if self.price_input == 0.0 => Some(self.cost_with_input(0)),
            None => None,
        }
    }
}

/// Turns per attempt of an agent node: the node's `max_turns`, else the
/// agent's, else [`DEFAULT_MAX_TURNS`]. Every turn counts, repair turns
/// and the turns after tool results included.
pub fn max_turns(node: &Node, agent: &Decl) -> u64 {
    node.max_turns().or_else(|| agent.max_turns()).unwrap_or(DEFAULT_MAX_TURNS)
}

/// Repair turns per attempt of an agent node.
pub fn repair(node: &Node) -> u64 {
    node.repair()
}

/// Every action written in a value (lists and records searched).
fn actions_in<'p>(value: &'p Value, out: &mut Vec<&'p Action>) {
    match value {
        Value::Action(a) => out.push(a),
        Value::List(items) => items.iter().for_each(|v| actions_in(v, out)),
        Value::Record(fields) => fields.values().for_each(|v| actions_in(v, out)),
        _ => {}
    }
}

/// Every action a run of `workflow` can take: its handlers (workflow,
/// nodes, gates) and the actions in property values ([`value_actions`]).
pub fn actions<'p>(program: &'p Program, workflow: &'p Workflow) -> Vec<&'p Action> {
    let mut out: Vec<&Action> = workflow.handlers.iter().map(|h| &h.action).collect();
    for node in workflow.nodes.values() {
        out.extend(node.handlers.iter().map(|h| &h.action));
    }
    for gate in workflow.gates.values() {
        out.extend(gate.handlers.iter().map(|h| &h.action));
    }
    out.extend(value_actions(program, workflow));
    out
}

/// The actions written in property values a run of `workflow` reads:
/// budget zones and `on_exhausted` (inline, or in budget declarations) of
/// the workflow, its nodes and gates, and every declaration.
pub fn value_actions<'p>(program: &'p Program, workflow: &'p Workflow) -> Vec<&'p Action> {
    let mut out = Vec::new();
    workflow.props.values().for_each(|v| actions_in(v, &mut out));
    for node in workflow.nodes.values() {
        node.common.budget.iter().for_each(|v| actions_in(v, &mut out));
        out.extend(node.body.actions());
    }
    for gate in workflow.gates.values() {
        gate.props.values().for_each(|v| actions_in(v, &mut out));
    }
    for decl in program.decls.values() {
        decl.props.values().for_each(|v| actions_in(v, &mut out));
    }
    out
}

/// The providers a turn of `agent` can go to in a run of `workflow`: its
/// `provider`, the providers its `routes` use, and every provider a
/// `switch_model` action the run can take names (the action sends every
/// agent's further turns there).
pub fn turn_providers<'p>(program: &'p Program, workflow: &'p Workflow, agent: &'p Decl) -> Vec<&'p str> {
    turn_providers_given(agent, &switch_models(program, workflow))
}

/// The providers the `switch_model` actions a run of `workflow` can take
/// name (computed once per workflow by callers that ask per agent).
pub fn switch_models<'p>(program: &'p Program, workflow: &'p Workflow) -> Vec<&'p str> {
    let mut out: Vec<&str> = Vec::new();
    for action in actions(program, workflow) {
        if action.name == crate::ir::ActionKind::SwitchModel {
            if let Some(name) = action.args.first() {
                if !out.contains(&name.as_str()) {
                    out.push(name);
                }
            }
        }
    }
    out
}

/// [`turn_providers`], given the workflow's [`switch_models`].
pub fn turn_providers_given<'p>(agent: &'p Decl, switches: &[&'p str]) -> Vec<&'p str> {
    let mut out: Vec<&str> = Vec::new();
    let mut push = |name: &'p str| {
        if !out.contains(&name) {
            out.push(name);
        }
    };
    if let Some(Value::Ref { name, .. }) = agent.props.get("provider") {
        push(name);
    }
    if let Some(Value::List(routes)) = agent.props.get("routes") {
        for route in routes {
            if let Value::Record(r) = route {
                if let Some(Value::Ref { name, .. }) = r.get("use") {
                    push(name);
                }
            }
        }
    }
    switches.iter().for_each(|name| push(name));
    out
}

/// The most one turn of an agent can use in a run, whichever provider it
/// goes to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TurnBound {
    /// Tokens, input and output; `None` when some provider the turn can go
    /// to leaves its input unbounded.
    pub tokens: Option<u64>,
    /// Output tokens (what is counted of an input-unbounded turn).
    pub output_tokens: u64,
    /// Money; `None` when some provider prices an unbounded input.
    pub cost: Option<f64>,
    /// Money of the output alone.
    pub output_cost: f64,
}

/// The bound of a turn of `agent` in a run of `workflow`: the largest over
/// every provider the turn can go to ([`turn_providers`]).
pub fn turn_bound(program: &Program, workflow: &Workflow, agent: &Decl) -> TurnBound {
    turn_bound_given(program, agent, &switch_models(program, workflow))
}

/// [`turn_bound`], given the workflow's [`switch_models`].
pub fn turn_bound_given(program: &Program, agent: &Decl, switches: &[&str]) -> TurnBound {
    let providers = turn_providers_given(agent, switches);
    let mut ceilings: Vec<TurnCeiling> = providers.iter().map(|p| TurnCeiling::of(agent, program.decls.get(*p))).collect();
    if ceilings.is_empty() {
        ceilings.push(TurnCeiling::of(agent, None));
    }
    let max_opt = |values: Vec<Option<f64>>| values.into_iter().try_fold(0.0f64, |acc, v| Some(acc.max(v?)));
    TurnBound {
        tokens: max_opt(ceilings.iter().map(|c| c.tokens().map(|t| t as f64)).collect()).map(|t| t as u64),
        output_tokens: ceilings.iter().map(|c| c.max_tokens).max().unwrap_or(DEFAULT_MAX_TOKENS),
        cost: max_opt(ceilings.iter().map(TurnCeiling::cost).collect()),
        output_cost: ceilings.iter().map(|c| c.cost_with_input(0)).fold(0.0, f64::max),
    }
}
