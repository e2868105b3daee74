//! Typed readers of a workflow's parts: the workflow itself, its nodes,
//! gates, transfers and policies (reference §6–§8).

use super::{duration, expr, int, names, record, ty, word, Budget, Conflicts, OnFailure, PolicyResponse, Props};
use crate::ir::{
    Action, AgentNode, Delegation, FlowNode, Gate, Handoff, HumanNode, JoinNode, MapNode, Node, NodeBody, ParallelNode, Policy, Program,
    Retry, TExpr, ToolNode, Transfer, TransferBody, Value, Workflow,
};
use crate::types::Ty;
use flow_trace::{ContextMode, Outcome, TerminationStatus};

/// Who may trigger a gate, and on which boundary events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trigger {
    pub by: Vec<String>,
    pub on: Vec<String>,
}

/// One evaluator a gate applies.
#[derive(Debug, Clone, Copy)]
pub struct EvaluatorRef<'p> {
    /// A declared evaluator's name, or a built-in's (`predicate`, …).
    pub name: &'p str,
    pub builtin: bool,
    pub args: &'p [TExpr],
}

impl Workflow {
    /// The first node.
    pub fn start(&self) -> Option<&str> {
        word(self.prop("start"))
    }

    /// The run's budget, with the workflow's `deadline` as a limit on its
    /// duration ([`Budget::with_deadline`]).
    pub fn budget<'p>(&'p self, program: &'p Program) -> Option<Budget<'p>> {
        Budget::with_deadline(Budget::of(program, self.prop("budget")), self.deadline_ms())
    }

    /// Time allowed for the whole run, in milliseconds.
    pub fn deadline_ms(&self) -> Option<u64> {
        duration(self.prop("deadline"))
    }

    /// Who is asked when the run cannot go on.
    pub fn escalate_to(&self) -> Vec<String> {
        names(self.prop("escalate_to"))
    }

    /// The workflow's input type (`input` in expressions).
    pub fn input_type(&self) -> Option<&Ty> {
        ty(self.prop("input"))
    }

    /// The workflow's result type.
    pub fn output_type(&self) -> Option<&Ty> {
        ty(self.prop("output"))
    }

    /// The success condition checked at termination.
    pub fn success(&self) -> Option<&TExpr> {
        expr(self.prop("success"))
    }

    /// The task state machine the nodes move.
    pub fn machine(&self) -> Option<&str> {
        word(self.prop("machine"))
    }

    /// Parallel branches running at once.
    pub fn concurrency(&self) -> Option<u64> {
        int(self.prop("concurrency"))
    }

    /// Limit on QUERY/RESPONSE ping-pong between two nodes.
    pub fn max_hops(&self) -> Option<u64> {
        int(self.prop("max_hops"))
    }

    /// The payload type the workflow's `messages` declares for `message`.
    pub fn message_schema(&self, message: flow_trace::MessageType) -> Option<&Ty> {
        ty(super::record(self.prop("messages"))?.get(message.as_str()))
    }

    /// What the workflow does.
    pub fn description(&self) -> Option<&str> {
        word(self.prop("description"))
    }
}

impl Node {
    /// What the node does.
    pub fn description(&self) -> Option<&str> {
        self.common.description.as_deref()
    }

    /// The node's budget for one visit (all its attempts).
    pub fn budget<'p>(&'p self, program: &'p Program) -> Option<Budget<'p>> {
        Budget::of(program, self.common.budget.as_ref())
    }

    /// How many times the node may run in one run.
    pub fn max_visits(&self) -> Option<u64> {
        self.common.max_visits
    }

    /// The declared input type.
    pub fn input_type(&self) -> Option<&Ty> {
        self.common.input.as_ref()
    }

    /// The declared output type property (the checked output type is
    /// [`Node::output`]).
    pub fn output_type(&self) -> Option<&Ty> {
        match &self.body {
            NodeBody::Agent(a) => Some(&a.output_type),
            NodeBody::Tool(ToolNode { output_type, .. })
            | NodeBody::Human(HumanNode { output_type, .. })
            | NodeBody::Join(JoinNode { output_type, .. })
            | NodeBody::Flow(FlowNode { output_type }) => output_type.as_ref(),
            _ => None,
        }
    }

    /// The retry policy, when declared.
    pub fn retry(&self) -> Option<Retry> {
        self.common.retry
    }

    /// What happens when attempts are exhausted, when declared.
    pub fn on_failure(&self) -> Option<OnFailure> {
        self.common.on_failure
    }

    /// The per-attempt timeout, in milliseconds.
    pub fn timeout_ms(&self) -> Option<u64> {
        self.common.timeout_ms
    }

    /// The task state (`Machine.STATE`) entered when the node completes.
    pub fn state(&self) -> Option<(&str, &str)> {
        self.common.state.as_ref().map(|s| (s.machine.as_str(), s.state.as_str()))
    }

    /// Data labels of the node's output.
    pub fn labels(&self) -> &[String] {
        &self.common.labels
    }

    /// What the task is, for agent routing rules (`task` in `routes`).
    pub fn task(&self) -> Option<&Value> {
        self.common.task.as_ref()
    }

    /// Whether at most one outgoing guard may hold.
    pub fn exclusive(&self) -> bool {
        self.common.exclusive
    }

    /// The task given to the agent (agent) or the question asked (human).
    pub fn prompt(&self) -> Option<&str> {
        match &self.body {
            NodeBody::Agent(AgentNode { prompt, .. }) | NodeBody::Human(HumanNode { prompt, .. }) => prompt.as_deref(),
            _ => None,
        }
    }

    /// The agent node's context override.
    pub fn context(&self) -> Option<ContextMode> {
        match &self.body {
            NodeBody::Agent(a) => a.context,
            _ => None,
        }
    }

    /// Repair retries for invalid output (an agent's; none elsewhere).
    pub fn repair(&self) -> u64 {
        match &self.body {
            NodeBody::Agent(a) => a.repair,
            _ => 0,
        }
    }

    /// Turns per attempt (agent), when declared.
    pub fn max_turns(&self) -> Option<u64> {
        match &self.body {
            NodeBody::Agent(a) => a.max_turns,
            _ => None,
        }
    }

    /// A tool node's arguments: `{ field: expr }`.
    pub fn args(&self) -> Option<&crate::ir::NameMap<Value>> {
        match &self.body {
            NodeBody::Tool(t) => t.args.as_ref(),
            _ => None,
        }
    }

    /// A tool node's key template for non-idempotent calls.
    pub fn idempotency_key(&self) -> Option<&str> {
        match &self.body {
            NodeBody::Tool(t) => t.idempotency_key.as_deref(),
            _ => None,
        }
    }

    /// The list a map node ranges over.
    pub fn over(&self) -> Option<&TExpr> {
        match &self.body {
            NodeBody::Map(m) => Some(&m.over),
            _ => None,
        }
    }

    /// The largest list a map node accepts.
    pub fn max_items(&self) -> Option<u64> {
        match &self.body {
            NodeBody::Map(m) => m.max_items,
            _ => None,
        }
    }

    /// Items (map) or branches (parallel) processed at once.
    pub fn max_concurrency(&self) -> Option<u64> {
        match &self.body {
            NodeBody::Map(MapNode { max_concurrency, .. }) | NodeBody::Parallel(ParallelNode { max_concurrency }) => *max_concurrency,
            _ => None,
        }
    }

    /// What a join does with conflicting results.
    pub fn conflicts(&self) -> Conflicts {
        match &self.body {
            NodeBody::Join(j) => j.conflicts,
            _ => Conflicts::Keep,
        }
    }

    /// Rounds a loop allows.
    pub fn max_rounds(&self) -> Option<u64> {
        match &self.body {
            NodeBody::Loop(l) => Some(l.max_rounds),
            _ => None,
        }
    }

    /// A loop's convergence condition.
    pub fn until(&self) -> Option<&TExpr> {
        match &self.body {
            NodeBody::Loop(l) => l.until.as_ref(),
            _ => None,
        }
    }

    /// What a loop does when its rounds run out (`None`: continue).
    pub fn on_exhausted(&self) -> Option<&Action> {
        match &self.body {
            NodeBody::Loop(l) => l.on_exhausted.as_ref(),
            _ => None,
        }
    }

    /// An end node's run status (`None` for any other node).
    pub fn status(&self) -> Option<TerminationStatus> {
        match &self.body {
            NodeBody::End(e) => Some(e.status),
            _ => None,
        }
    }
}

impl Gate {
    /// The evaluators applied, in order ([`Gate::evaluator_items`] that are
    /// evaluators).
    pub fn evaluators(&self) -> Vec<EvaluatorRef<'_>> {
        self.evaluator_items().into_iter().flatten().collect()
    }

    /// The outcome of an evaluator error, timeout or inconclusive result
    /// (default BLOCK: fail closed).
    pub fn on_error(&self) -> Outcome {
        word(self.prop("on_error")).and_then(Outcome::parse).unwrap_or(Outcome::Block)
    }

    /// The outcome of an evaluator given an empty list to check: the
    /// declared `on_empty`, else `on_error` (nothing checked is no PASS).
    pub fn on_empty(&self) -> Outcome {
        word(self.prop("on_empty")).and_then(Outcome::parse).unwrap_or_else(|| self.on_error())
    }

    /// Who may decide, when declared (`None`: the workflow's `escalate_to`).
    pub fn decided_by(&self) -> Option<Vec<String>> {
        self.prop("decided_by").map(|v| names(Some(v)))
    }

    /// The decisions allowed, when declared (`None`: all four).
    pub fn decisions(&self) -> Option<Vec<flow_trace::Decision>> {
        matches!(self.prop("decisions"), Some(Value::List(_)))
            .then(|| names(self.prop("decisions")).iter().filter_map(|d| flow_trace::Decision::parse(d)).collect())
    }

    /// Who may trigger the gate, and on which events.
    pub fn trigger(&self) -> Option<Trigger> {
        let t = record(self.prop("trigger"))?;
        Some(Trigger { by: names(t.get("by")), on: names(t.get("on")) })
    }

    /// The reason code recorded when the gate does not pass.
    pub fn reason(&self) -> Option<&str> {
        word(self.prop("reason"))
    }

    /// The sub-graph a REPLAN re-runs (empty: the whole workflow).
    pub fn replan_scope(&self) -> Vec<String> {
        names(self.prop("replan_scope"))
    }

    /// What the gate protects.
    pub fn description(&self) -> Option<&str> {
        word(self.prop("description"))
    }

    /// Time allowed for evaluation and decision, in milliseconds.
    pub fn timeout_ms(&self) -> Option<u64> {
        duration(self.prop("timeout"))
    }
}

impl Transfer {
    /// The handoff's properties (`None` for a delegation).
    pub fn handoff(&self) -> Option<&Handoff> {
        match &self.body {
            TransferBody::Handoff(h) => Some(h),
            TransferBody::Delegate(_) => None,
        }
    }

    /// The delegation's properties (`None` for a handoff).
    pub fn delegation(&self) -> Option<&Delegation> {
        match &self.body {
            TransferBody::Delegate(d) => Some(d),
            TransferBody::Handoff(_) => None,
        }
    }

    /// A delegation's contract.
    pub fn contract(&self) -> Option<&str> {
        self.delegation().map(|d| d.contract.as_str())
    }

    /// The contract declaration a delegation names.
    pub fn contract_decl<'p>(&self, program: &'p Program) -> Option<&'p crate::ir::Decl> {
        program.decls.get(self.contract()?)
    }

    /// A handoff's context mode; `None` for a delegation, whose context
    /// its contract sets.
    pub fn context(&self) -> Option<ContextMode> {
        self.handoff().map(|h| h.context)
    }

    /// The fields of a filtered context slice.
    pub fn context_fields(&self) -> &[String] {
        match &self.body {
            TransferBody::Handoff(Handoff { context_fields, .. }) | TransferBody::Delegate(Delegation { context_fields, .. }) => {
                context_fields
            }
        }
    }

    /// The artifacts handed over with the transfer: expressions over the
    /// nodes, each evaluated as it happens.
    pub fn artifacts(&self) -> Vec<&TExpr> {
        let written = match &self.body {
            TransferBody::Handoff(Handoff { artifacts, .. }) | TransferBody::Delegate(Delegation { artifacts, .. }) => artifacts,
        };
        match written {
            Some(Value::List(items)) => items.iter().filter_map(|i| if let Value::Expr(e) = i { Some(e) } else { None }).collect(),
            _ => Vec::new(),
        }
    }

    /// The type of what a handoff hands over (`payload`).
    pub fn payload_type(&self) -> Option<&Ty> {
        self.handoff()?.payload.as_ref()
    }

    /// A handoff's acceptance checks over `payload`.
    pub fn accept(&self) -> &[TExpr] {
        self.handoff().map_or(&[], |h| h.accept.as_slice())
    }

    /// Back-and-forth handoffs allowed on this pair.
    pub fn max_hops(&self) -> Option<u64> {
        self.handoff()?.max_hops
    }

    /// The message type a handoff sends (TASK_ASSIGN unless declared).
    pub fn message_type(&self) -> flow_trace::MessageType {
        self.handoff().map_or(flow_trace::MessageType::TaskAssign, |h| h.message)
    }

    /// Why control moves.
    pub fn reason(&self) -> Option<&str> {
        match &self.body {
            TransferBody::Handoff(Handoff { reason, .. }) | TransferBody::Delegate(Delegation { reason, .. }) => reason.as_deref(),
        }
    }

    /// A delegation's inputs: `{ name: expr }`.
    pub fn inputs(&self) -> Option<&crate::ir::NameMap<Value>> {
        self.delegation()?.inputs.as_ref()
    }

    /// Data labels of the payload.
    pub fn labels(&self) -> &[String] {
        self.handoff().map_or(&[], |h| h.labels.as_slice())
    }
}

impl Policy {
    /// What a run monitor does on violation (default halt).
    pub fn response(&self) -> PolicyResponse {
        word(self.prop("response")).and_then(PolicyResponse::parse).unwrap_or(PolicyResponse::Halt)
    }

    /// Who is asked when the response is escalate.
    pub fn escalate_to(&self) -> Vec<String> {
        names(self.prop("escalate_to"))
    }

    /// What the policy protects.
    pub fn description(&self) -> Option<&str> {
        word(self.prop("description"))
    }
}
