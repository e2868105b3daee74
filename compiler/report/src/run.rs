//! A run read from its events: what the page draws on the plan. Pure: the
//! events in, a [`RunView`] out; nothing here reads a file.

use flow_trace::{Body, Event, Usage};
use indexmap::IndexMap;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// How a node stands at the end of the events read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum NodeState {
    /// Never started.
    #[default]
    NotRun,
    /// Started and not ended (or waiting for a human).
    Running,
    Completed,
    Failed,
    /// Still open when the run ended (or its lease expired): it never
    /// finished.
    Stopped,
}

impl NodeState {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeState::NotRun => "not_run",
            NodeState::Running => "running",
            NodeState::Completed => "completed",
            NodeState::Failed => "failed",
            NodeState::Stopped => "stopped",
        }
    }
}

/// A model turn or a tool call inside an attempt.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Call {
    /// `turn`, `tool` or `refused`.
    pub kind: &'static str,
    /// The model (or provider) of a turn; the tool of a call.
    pub name: String,
    pub start_ms: u64,
    pub duration_ms: u64,
    pub ok: bool,
    /// Whether its end was recorded (a tool call's completion).
    #[serde(skip)]
    pub done: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One attempt of a node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Attempt {
    pub id: String,
    pub no: u32,
    /// `first`, `retry`, `repair`, …
    pub trigger: String,
    pub start_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_ms: Option<u64>,
    pub state: NodeState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub calls: Vec<Call>,
}

/// What the run did at one node.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct NodeRun {
    pub state: NodeState,
    pub visits: u32,
    /// A loop's rounds begun, in its latest visit.
    pub rounds: u32,
    /// Visits that completed.
    pub completions: u32,
    /// Completed visits the run did not leave by an edge of the node's
    /// own: a loop's round ended there (the engine records no edge for it).
    pub round_ends: u32,
    /// Each visit: when it started and (once it has) ended.
    pub spans: Vec<(u64, Option<u64>)>,
    pub attempts: Vec<Attempt>,
    /// The outputs of its visits (digests), in order.
    pub outputs: Vec<String>,
    /// The artifacts handed to it (handoff payloads, delegation inputs).
    pub inputs: Vec<String>,
    /// The `seq` of every event about it.
    pub events: Vec<u64>,
}

/// One gate evaluation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GateRun {
    pub gate: String,
    pub from: String,
    pub to: String,
    pub outcome: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Each evaluator as written, its outcome and why.
    pub evaluators: Vec<(String, String, Option<String>)>,
    pub seq: u64,
    pub at_ms: u64,
}

/// A wait for a human: asked, then (maybe) decided.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Wait {
    pub subject: String,
    pub asked_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

/// A budget scope's use after one settlement.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BudgetPoint {
    pub at_ms: u64,
    /// Use so far (every settlement's `used` added up).
    pub used: Usage,
}

/// A zone a scope entered.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ZoneEntry {
    pub scope: String,
    pub at_ms: u64,
    pub zone: String,
    pub actions: Vec<String>,
}

/// A policy's violation as the run's monitor recorded it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Violation {
    pub policy: String,
    pub response: String,
    pub message: String,
    pub seq: u64,
}

/// One event, shortly.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub seq: u64,
    pub at_ms: u64,
    pub kind: &'static str,
    pub text: String,
}

/// The run as the page shows it. Times are milliseconds from the first event.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct RunView {
    pub run_id: String,
    pub workflow: String,
    /// `success`, `failure`, … when it ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What a paused run waits on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting_on: Option<String>,
    pub duration_ms: u64,
    pub nodes: IndexMap<String, NodeRun>,
    /// Edges taken, `from -> to` and how, with how often.
    #[serde(skip)]
    pub edges: IndexMap<(String, String, EdgeClass), u32>,
    pub gates: Vec<GateRun>,
    pub waits: Vec<Wait>,
    pub budgets: BTreeMap<String, Vec<BudgetPoint>>,
    pub zones: Vec<ZoneEntry>,
    pub exhausted: Vec<(String, String)>,
    pub violations: Vec<Violation>,
    pub tokens: u64,
    pub cost: f64,
    pub rows: Vec<Row>,
    /// The agent of each agent node.
    #[serde(skip)]
    agents: HashMap<String, String>,
    /// The node that completed last, until an edge leaves it.
    #[serde(skip)]
    just_completed: Option<String>,
    /// Where each attempt is: its node and its index there.
    #[serde(skip)]
    attempts: HashMap<String, (String, usize)>,
}

/// How control moved along an edge, as the page draws edges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EdgeClass {
    /// A written edge: always, a guard, `else`, or through its gate.
    Written,
    /// A handler's jump: `goto`, `activate`, `revise`, `replan`.
    Handler,
    /// A parallel's branch, a join's arrival, a loop's round, a map's item.
    Structural,
}

impl EdgeClass {
    fn of(via: &flow_trace::Via) -> EdgeClass {
        use flow_trace::Via;
        match via {
            Via::Always | Via::When(_) | Via::Else | Via::Gate(_) => EdgeClass::Written,
            Via::Goto | Via::Activate | Via::Revise | Via::Replan => EdgeClass::Handler,
            Via::Fanout | Via::Join | Via::LoopRound | Via::MapItem(_) => EdgeClass::Structural,
        }
    }
}

impl RunView {
    /// The view of `events` (in `seq` order); `agents` gives the agent of
    /// each agent node (its steps count against the agent's scope too).
    pub fn of(events: &[Event], agents: &HashMap<String, String>) -> RunView {
        let mut view = RunView { agents: agents.clone(), ..RunView::default() };
        let t0 = events.iter().find_map(|e| flow_trace::time::millis(&e.time)).unwrap_or(0);
        let mut last = 0;
        for event in events {
            // Never earlier than the event before: a resumed run's clock
            // (a fake one starts again) or another machine's may be behind.
            let at = flow_trace::time::millis(&event.time).map_or(last, |t| t.saturating_sub(t0)).max(last);
            last = at;
            if view.run_id.is_empty() {
                view.run_id = event.run_id.to_string();
            }
            view.fold(event, at);
        }
        view.duration_ms = last;
        view
    }

    /// Whether the node that completed last ended a round: the next
    /// coordination act is not an edge out of it.
    fn round_end(&mut self, body: &Body) {
        let Some(last) = self.just_completed.take() else {
            if let Body::NodeCompleted { node, .. } = body {
                self.just_completed = Some(node.clone());
            }
            return;
        };
        match body {
            Body::EdgeTaken { from, via, .. } if *from == last && !matches!(via, flow_trace::Via::LoopRound) => {}
            Body::NodeStarted { .. }
            | Body::NodeCompleted { .. }
            | Body::NodeFailed { .. }
            | Body::EdgeTaken { .. }
            | Body::RunTerminated { .. } => {
                self.node(&last).round_ends += 1;
                if let Body::NodeCompleted { node, .. } = body {
                    self.just_completed = Some(node.clone());
                }
            }
            // Records about the same step (handoffs, gates, messages, …).
            _ => self.just_completed = Some(last),
        }
    }

    /// Adds `used` to `scope`'s use at `at`.
    fn meter(&mut self, scope: &str, used: &Usage, at: u64) {
        let series = self.budgets.entry(scope.to_string()).or_default();
        let mut total = series.last().map(|p| p.used.clone()).unwrap_or_default();
        add(&mut total, used);
        series.push(BudgetPoint { at_ms: at, used: total });
    }

    fn node(&mut self, name: &str) -> &mut NodeRun {
        self.nodes.entry(name.to_string()).or_default()
    }

    fn attempt(&mut self, id: &str) -> Option<&mut Attempt> {
        let (node, i) = self.attempts.get(id)?;
        self.nodes.get_mut(node)?.attempts.get_mut(*i)
    }

    /// The node an attempt belongs to.
    fn node_of(&self, attempt: &str) -> Option<String> {
        self.attempts.get(attempt).map(|(node, _)| node.clone())
    }

    /// The run ended: what was still open never finished.
    fn stop_open(&mut self, at: u64) {
        for node in self.nodes.values_mut() {
            if node.state == NodeState::Running {
                node.state = NodeState::Stopped;
            }
            for span in node.spans.iter_mut().filter(|s| s.1.is_none()) {
                span.1 = Some(at);
            }
            for a in node.attempts.iter_mut().filter(|a| a.state == NodeState::Running) {
                (a.state, a.end_ms) = (NodeState::Stopped, Some(at));
            }
        }
    }

    fn fold(&mut self, event: &Event, at: u64) {
        self.round_end(&event.body);
        let (text, about) = match self.lifecycle(&event.body, at) {
            Some(found) => found,
            None => match self.calls(&event.body, at) {
                Some(found) => found,
                None => self.transfers(&event.body, event.seq, at),
            },
        };
        let kind = event.kind();
        if let Some(node) = &about {
            self.node(node).events.push(event.seq);
        }
        self.rows.push(Row { seq: event.seq, at_ms: at, kind, text });
    }

    /// Runs, nodes and attempts: their text and the node they are about.
    fn lifecycle(&mut self, body: &Body, at: u64) -> Option<(String, Option<String>)> {
        let mut about: Option<String> = None;
        let text = match body {
            Body::RunStarted { workflow, .. } => {
                self.workflow = workflow.clone();
                format!("workflow {workflow}")
            }
            Body::RunResumed { after_seq, .. } => {
                self.waiting_on = None;
                format!("after seq {after_seq}")
            }
            Body::RunPaused { reason, waiting_on, .. } => {
                self.waiting_on = Some(waiting_on.clone());
                format!("{reason}: waiting on {waiting_on}")
            }
            Body::RunTerminated { reason, status, .. } => {
                self.status = Some(status.to_string());
                self.reason = Some(reason.clone());
                self.waiting_on = None;
                self.stop_open(at);
                format!("{status} ({reason})")
            }
            Body::NodeStarted { node, visit, .. } => {
                let n = self.node(node);
                n.visits = n.visits.max(*visit);
                n.state = NodeState::Running;
                n.rounds = 0;
                n.spans.push((at, None));
                // A node's scope is per visit: its use starts again.
                if let Some(series) = self.budgets.get_mut(&format!("node.{node}")) {
                    series.push(BudgetPoint { at_ms: at, used: Usage::default() });
                }
                about = Some(node.clone());
                format!("{node}, visit {visit}")
            }
            Body::NodeCompleted { node, status, output, .. } => {
                let n = self.node(node);
                n.state = NodeState::Completed;
                n.completions += 1;
                if let Some(span) = n.spans.last_mut() {
                    span.1 = Some(at);
                }
                n.outputs.extend(output.as_ref().map(|o| o.digest.clone()));
                about = Some(node.clone());
                format!("{node}: {status}")
            }
            Body::NodeFailed { node, error_code, message, .. } => {
                let n = self.node(node);
                n.state = NodeState::Failed;
                if let Some(span) = n.spans.last_mut() {
                    span.1 = Some(at);
                }
                about = Some(node.clone());
                format!("{node}: {error_code}: {message}")
            }
            Body::AttemptStarted { node, attempt_id, attempt_no, trigger_reason, .. } => {
                let attempt = Attempt {
                    id: attempt_id.clone(),
                    no: *attempt_no,
                    trigger: trigger_reason.to_string(),
                    start_ms: at,
                    end_ms: None,
                    state: NodeState::Running,
                    output: None,
                    error: None,
                    calls: Vec::new(),
                };
                let attempts = &mut self.node(node).attempts;
                attempts.push(attempt);
                let index = attempts.len() - 1;
                self.attempts.insert(attempt_id.clone(), (node.clone(), index));
                // One control-plane step per attempt, in every scope it counts against.
                let step = Usage { steps: 1, ..Usage::default() };
                let agent = self.agents.get(node).map(|a| format!("agent.{a}"));
                for scope in ["run".to_string(), format!("node.{node}")].into_iter().chain(agent) {
                    self.meter(&scope, &step, at);
                }
                about = Some(node.clone());
                format!("{node} #{attempt_no} ({trigger_reason})")
            }
            Body::AttemptCompleted { node, attempt_id, attempt_no, output, .. } => {
                if let Some(a) = self.attempt(attempt_id) {
                    (a.end_ms, a.state, a.output) = (Some(at), NodeState::Completed, Some(output.digest.clone()));
                }
                about = Some(node.clone());
                format!("{node} #{attempt_no}")
            }
            Body::AttemptFailed { node, attempt_id, attempt_no, error_code, message, .. } => {
                if let Some(a) = self.attempt(attempt_id) {
                    (a.end_ms, a.state, a.error) = (Some(at), NodeState::Failed, Some(format!("{error_code}: {message}")));
                }
                about = Some(node.clone());
                format!("{node} #{attempt_no}: {error_code}")
            }
            _ => return None,
        };
        Some((text, about))
    }

    /// Model turns and tool calls, filed under their attempt.
    fn calls(&mut self, body: &Body, at: u64) -> Option<(String, Option<String>)> {
        let about: Option<String>;
        let text = match body {
            Body::AgentTurn { agent, node, attempt_id, provider, model, usage, reply, error, .. } => {
                self.tokens += usage.tokens;
                self.cost += usage.cost;
                let call = Call {
                    kind: "turn",
                    name: model.clone().unwrap_or_else(|| provider.clone()),
                    start_ms: at.saturating_sub(usage.duration_ms),
                    duration_ms: usage.duration_ms,
                    ok: error.is_none(),
                    done: true,
                    tokens: Some(usage.tokens),
                    input: None,
                    output: reply.as_ref().map(|r| r.digest.clone()),
                    error: error.clone(),
                };
                if let Some(a) = self.attempt(attempt_id) {
                    a.calls.push(call);
                }
                about = Some(node.clone());
                format!("{agent} on {node}: {} tokens", usage.tokens)
            }
            Body::ToolCallStarted { tool, node, attempt_id, input, .. } => {
                let call = Call {
                    kind: "tool",
                    name: tool.clone(),
                    start_ms: at,
                    duration_ms: 0,
                    ok: true,
                    done: false,
                    tokens: None,
                    input: Some(input.digest.clone()),
                    output: None,
                    error: None,
                };
                if let Some(a) = self.attempt(attempt_id) {
                    a.calls.push(call);
                }
                about = Some(node.clone());
                format!("{tool} from {node}")
            }
            Body::ToolCallCompleted { tool, attempt_id, ok, output, error, duration_ms, .. } => {
                let node = self.node_of(attempt_id);
                // The oldest call of the tool still open in the attempt.
                if let Some(call) =
                    self.attempt(attempt_id).and_then(|a| a.calls.iter_mut().find(|c| c.kind == "tool" && c.name == *tool && !c.done))
                {
                    call.done = true;
                    call.ok = *ok;
                    call.duration_ms = *duration_ms;
                    call.output = output.as_ref().map(|o| o.digest.clone());
                    call.error = error.clone();
                }
                about = node;
                format!("{tool}: {}", if *ok { "ok" } else { "failed" })
            }
            Body::ToolCallRefused { tool, node, attempt_id, reason, .. } => {
                let call = Call {
                    kind: "refused",
                    name: tool.clone(),
                    start_ms: at,
                    duration_ms: 0,
                    ok: false,
                    done: true,
                    tokens: None,
                    input: None,
                    output: None,
                    error: Some(reason.clone()),
                };
                if let Some(a) = self.attempt(attempt_id) {
                    a.calls.push(call);
                }
                about = Some(node.clone());
                format!("{tool} refused: {reason}")
            }
            _ => return None,
        };
        Some((text, about))
    }
}

impl RunView {
    /// Edges, gates, humans, budgets, policies and the rest.
    fn transfers(&mut self, body: &Body, seq: u64, at: u64) -> (String, Option<String>) {
        let mut about = None;
        let text = match body {
            Body::EdgeTaken { from, to, via, .. } => {
                *self.edges.entry((from.clone(), to.clone(), EdgeClass::of(via))).or_default() += 1;
                if matches!(via, flow_trace::Via::LoopRound) {
                    self.node(from).rounds += 1;
                }
                format!("{from} → {to} ({via})")
            }
            Body::GateRecorded { gate, from, to, outcome, reason, evaluators, .. } => {
                self.gates.push(GateRun {
                    gate: gate.clone(),
                    from: from.clone(),
                    to: to.clone(),
                    outcome: outcome.to_string(),
                    reason: reason.clone(),
                    evaluators: evaluators.iter().map(|e| (e.evaluator.clone(), e.outcome.to_string(), e.reason.clone())).collect(),
                    seq,
                    at_ms: at,
                });
                about = Some(from.clone());
                format!("{gate} ({from} → {to}): {outcome}")
            }
            Body::DecisionRequested { subject, deciders, .. } => {
                self.waits.push(Wait { subject: subject.clone(), asked_ms: at, decided_ms: None, decision: None, by: None });
                about = self.nodes.contains_key(subject).then(|| subject.clone());
                format!("{subject}: asked of {}", deciders.join(", "))
            }
            Body::DecisionApplied { subject, decision, by, action, .. } => {
                if let Some(w) = self.waits.iter_mut().rev().find(|w| w.subject == *subject && w.decided_ms.is_none()) {
                    (w.decided_ms, w.decision, w.by) = (Some(at), Some(decision.to_string()), Some(by.clone()));
                }
                about = self.nodes.contains_key(subject).then(|| subject.clone());
                format!("{subject}: {decision} by {by} → {action}")
            }
            Body::Handoff { from, to, payload, accepted, .. } => {
                self.node(to).inputs.push(payload.digest.clone());
                about = Some(to.clone());
                format!("{from} → {to}{}", if *accepted { "" } else { " (refused)" })
            }
            Body::Delegation { from, to, contract, inputs, .. } => {
                self.node(to).inputs.push(inputs.digest.clone());
                about = Some(to.clone());
                format!("{from} → {to} under {contract}")
            }
            Body::BudgetSettled { scope, used, .. } => {
                for name in scope.split(',') {
                    self.meter(name, used, at);
                }
                format!("{scope}: {} tokens, {} steps", used.tokens, used.steps)
            }
            Body::BudgetZoneChanged { scope, from, to, actions, .. } => {
                let actions: Vec<String> = actions.iter().map(ToString::to_string).collect();
                self.zones.push(ZoneEntry { scope: scope.clone(), at_ms: at, zone: to.to_string(), actions });
                format!("{scope}: {from} → {to}")
            }
            Body::BudgetExhausted { scope, limit, .. } => {
                self.exhausted.push((scope.clone(), limit.clone()));
                format!("{scope}: {limit} exhausted")
            }
            Body::LeaseExpired { attempt_id, .. } => {
                about = self.node_of(attempt_id);
                if let Some(a) = self.attempt(attempt_id) {
                    (a.state, a.end_ms, a.error) = (NodeState::Stopped, Some(at), Some("lease expired: its executor was lost".into()));
                }
                format!("{attempt_id}: lease expired")
            }
            Body::PolicyViolated { policy, response, message, .. } => {
                self.violations.push(Violation { policy: policy.clone(), response: response.to_string(), message: message.clone(), seq });
                format!("{policy}: {message}")
            }
            other => describe(other),
        };
        (text, about)
    }
}

/// The rest, shortly.
fn describe(body: &Body) -> String {
    match body {
        Body::Message { message_type, from, to, .. } => format!("{message_type} {from} → {to}"),
        Body::DeadLetter { from, to, reason, .. } => format!("{from} → {to}: {reason}"),
        Body::ActionTaken { event, scope, action, .. } => format!("on {event} at {scope}: {action}"),
        Body::Rerun { trigger, entry, .. } => format!("{trigger} from {entry}"),
        Body::StateChanged { node, from, to, .. } => format!("{node}: {from} → {to}"),
        Body::BudgetReserved { scope, .. } => scope.clone(),
        Body::ArtifactRecorded { artifact, produced_by, .. } => format!("{} by {produced_by}", short_digest(&artifact.digest)),
        Body::Warning { message, .. } => message.clone(),
        Body::BlackboardAppended { blackboard, node, .. } => format!("{blackboard} ← {node}"),
        Body::BlackboardRead { blackboard, node, .. } => format!("{node} read {blackboard}"),
        Body::ReconciliationRequired { tool, .. } => format!("{tool}: outcome unknown"),
        _ => String::new(),
    }
}

/// `sha256:` and the first 12 hex digits.
pub fn short_digest(digest: &str) -> String {
    digest.chars().take(19).collect()
}

fn add(total: &mut Usage, used: &Usage) {
    total.steps += used.steps;
    total.tokens += used.tokens;
    total.tool_calls += used.tool_calls;
    total.cost += used.cost;
    total.duration_ms += used.duration_ms;
}
