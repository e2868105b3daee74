//! A run's trace events as spans, following the OpenTelemetry GenAI
//! semantic conventions (Development status; the operation names
//! `invoke_workflow`, `invoke_agent`, `chat`, `execute_tool`, the
//! `gen_ai.*` attributes below and the `gen_ai.evaluation.result` event).
//!
//! The tree: `invoke_workflow {workflow}` for the run; under it a
//! `flow.node {node}` span per node visit (under the loop, parallel, map or
//! sub-flow node that contains it while that one is open); under a visit
//! its attempts — `invoke_agent {agent}` on agent nodes, `flow.attempt
//! {node}` on others; under an attempt a `chat {model}` span per model turn
//! (with the provider, the model and the input and output tokens) and an
//! `execute_tool {tool}` span per tool call. Gates are `flow.gate {gate}`
//! spans under the run, and their outcome is a `gen_ai.evaluation.result`
//! event (label `pass` or `fail`) on the visit of the node they judge (the
//! gate's `from`); policy violations are evaluation results on the run's
//! span; handoffs, decisions and budget zones are span events. Flow's own
//! detail is under `flow.*`.
//!
//! Ids come from the events, so exporting a run twice sends the same spans:
//! the trace id is the first 16 bytes of sha256(run id), a span's id the
//! first 8 bytes of sha256(the id of the event that opened it).
//!
//! [`Mapper`] is fed events in order ([`Mapper::push`]) and returns the
//! spans each one closes, so a live run exports as it goes; a node's visit
//! is held until the run moves on (an edge, the next node, the end), since
//! the gates that judge it are recorded after it completes.

use flow_trace::time::millis;
use flow_trace::{Body, Event, NodeKind, Outcome, TerminationStatus};
use sha2::{Digest, Sha256};
use std::collections::{HashMap, VecDeque};

pub type TraceId = [u8; 16];
pub type SpanId = [u8; 8];

/// An attribute value.
#[derive(Debug, Clone, PartialEq)]
pub enum Attr {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    Strs(Vec<String>),
}

impl From<&str> for Attr {
    fn from(s: &str) -> Attr {
        Attr::Str(s.to_string())
    }
}

impl From<String> for Attr {
    fn from(s: String) -> Attr {
        Attr::Str(s)
    }
}

impl From<u64> for Attr {
    fn from(n: u64) -> Attr {
        Attr::Int(i64::try_from(n).unwrap_or(i64::MAX))
    }
}

impl From<u32> for Attr {
    fn from(n: u32) -> Attr {
        Attr::Int(n.into())
    }
}

impl From<f64> for Attr {
    fn from(n: f64) -> Attr {
        Attr::Float(n)
    }
}

impl From<bool> for Attr {
    fn from(b: bool) -> Attr {
        Attr::Bool(b)
    }
}

pub type Attrs = Vec<(&'static str, Attr)>;

/// A point in a span's life.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanEvent {
    pub name: &'static str,
    pub time_ms: u64,
    pub attributes: Attrs,
}

/// The GenAI span kinds: model turns are calls to a client, the rest runs here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Internal,
    Client,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    pub trace_id: TraceId,
    pub id: SpanId,
    pub parent: Option<SpanId>,
    pub name: String,
    pub kind: Kind,
    pub start_ms: u64,
    pub end_ms: u64,
    pub attributes: Attrs,
    pub events: Vec<SpanEvent>,
    /// Why it failed, when it did.
    pub error: Option<String>,
}

impl Span {
    pub fn attr(&self, key: &str) -> Option<&Attr> {
        self.attributes.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }
}

fn digest(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

/// The trace id of a run.
pub fn trace_id(run_id: &str) -> TraceId {
    let mut id = [0u8; 16];
    id.copy_from_slice(&digest(run_id)[..16]);
    id[0] |= 1; // never all zeros (invalid)
    id
}

/// The id of the span an event opens.
pub fn span_id(event_id: &str) -> SpanId {
    let mut id = [0u8; 8];
    id.copy_from_slice(&digest(event_id)[..8]);
    id[0] |= 1;
    id
}

/// Node kinds whose visits contain other nodes' visits.
fn contains_others(kind: NodeKind) -> bool {
    matches!(kind, NodeKind::Loop | NodeKind::Parallel | NodeKind::Map | NodeKind::Flow)
}

/// Reads an artifact's JSON text (a reply, for message contents).
pub type Contents = Box<dyn Fn(&flow_trace::ArtifactRef) -> Option<String> + Send>;

/// Turns a run's events into spans, in order.
pub struct Mapper {
    trace: TraceId,
    /// node → the agent that runs it (from the plan; completed by turns).
    agents: HashMap<String, String>,
    kinds: HashMap<String, NodeKind>,
    root: Option<Span>,
    /// Open node visits, in the order they started.
    nodes: Vec<(String, Span)>,
    attempts: HashMap<String, Span>,
    /// Open tool calls by (attempt, tool), oldest first.
    calls: HashMap<(String, String), VecDeque<Span>>,
    /// Completed visits a gate may still judge.
    held: Vec<(String, Span)>,
    last_ms: u64,
    /// With it, a chat span carries the reply (`gen_ai.output.messages`).
    contents: Option<Contents>,
}

impl std::fmt::Debug for Mapper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mapper").field("open_nodes", &self.nodes.len()).field("contents", &self.contents.is_some()).finish()
    }
}

impl Mapper {
    /// A mapper for run `run_id` whose nodes run the agents `agents` (node → agent).
    pub fn new(run_id: &str, agents: HashMap<String, String>) -> Mapper {
        Mapper {
            trace: trace_id(run_id),
            agents,
            kinds: HashMap::new(),
            root: None,
            nodes: Vec::new(),
            attempts: HashMap::new(),
            calls: HashMap::new(),
            held: Vec::new(),
            last_ms: 0,
            contents: None,
        }
    }

    /// Chat spans carry their reply, read with `contents`: only when the
    /// user asked for message contents (they are redacted like the run's
    /// artifacts, but still the model's words).
    pub fn with_contents(mut self, contents: Contents) -> Mapper {
        self.contents = Some(contents);
        self
    }

    fn span(&self, event: &Event, name: String, parent: Option<SpanId>, at: u64, attributes: Attrs) -> Span {
        let mut attributes = attributes;
        attributes.push(("flow.run_id", event.run_id.to_string().into()));
        attributes.push(("flow.seq", event.seq.into()));
        Span {
            trace_id: self.trace,
            id: span_id(&event.event_id),
            parent,
            name,
            kind: Kind::Internal,
            start_ms: at,
            end_ms: at,
            attributes,
            events: Vec::new(),
            error: None,
        }
    }

    fn root_id(&self) -> Option<SpanId> {
        self.root.as_ref().map(|r| r.id)
    }

    /// The innermost open visit that contains others, else the run.
    fn container(&self) -> Option<SpanId> {
        let inner = self.nodes.iter().rev().find(|(node, _)| self.kinds.get(node).is_some_and(|k| contains_others(*k)));
        inner.map(|(_, s)| s.id).or(self.root_id())
    }

    fn visit_of(&self, node: &str) -> Option<SpanId> {
        self.nodes.iter().rev().find(|(n, _)| n == node).map(|(_, s)| s.id)
    }

    fn root_event(&mut self, name: &'static str, at: u64, attributes: Attrs) {
        if let Some(root) = &mut self.root {
            root.events.push(SpanEvent { name, time_ms: at, attributes });
        }
    }

    /// The spans `event` closes (none for most events).
    pub fn push(&mut self, event: &Event) -> Vec<Span> {
        let at = millis(&event.time).unwrap_or(self.last_ms);
        self.last_ms = self.last_ms.max(at);
        let mut done = Vec::new();
        match &event.body {
            Body::RunStarted { workflow, plan_digest, .. } => {
                let attrs = vec![
                    ("gen_ai.operation.name", "invoke_workflow".into()),
                    ("flow.workflow", workflow.as_str().into()),
                    ("flow.plan_digest", plan_digest.as_str().into()),
                ];
                self.root = Some(self.span(event, format!("invoke_workflow {workflow}"), None, at, attrs));
            }
            Body::RunResumed { after_seq, .. } => self.root_event("flow.run_resumed", at, vec![("flow.after_seq", (*after_seq).into())]),
            Body::RunPaused { reason, waiting_on, .. } => {
                done.append(&mut self.release());
                let attrs = vec![("flow.pause_reason", reason.to_string().into()), ("flow.waiting_on", waiting_on.as_str().into())];
                self.root_event("flow.run_paused", at, attrs);
            }
            Body::RunTerminated { reason, status, .. } => {
                if let Some(root) = &mut self.root {
                    root.attributes.push(("flow.status", status.to_string().into()));
                    root.attributes.push(("flow.reason", reason.as_str().into()));
                    if *status != TerminationStatus::Success {
                        root.error = Some(format!("{status}: {reason}"));
                    }
                }
                done.append(&mut self.finish());
            }
            Body::NodeStarted { node, node_kind, visit, .. } => {
                done.append(&mut self.release());
                self.node_started(event, node, *node_kind, *visit, at);
            }
            Body::NodeCompleted { node, status, .. } => self.node_ended(node, at, ("flow.node_status", status.to_string()), None),
            Body::NodeFailed { node, error_code, message, .. } => {
                self.node_ended(node, at, ("flow.error_code", error_code.to_string()), Some(message.clone()))
            }
            Body::EdgeTaken { .. } => done.append(&mut self.release()),
            Body::AttemptStarted { node, attempt_id, attempt_no, trigger_reason, .. } => {
                self.attempt_started(event, node, attempt_id, *attempt_no, &trigger_reason.to_string(), at)
            }
            Body::AttemptCompleted { attempt_id, .. } => done.extend(self.attempt_ended(attempt_id, at, None)),
            Body::AttemptFailed { attempt_id, error_code, message, .. } => {
                done.extend(self.attempt_ended(attempt_id, at, Some(format!("{error_code}: {message}"))))
            }
            Body::AgentTurn { .. } => done.push(self.chat(event, at)),
            Body::ToolCallStarted { tool, attempt_id, agent, .. } => self.call_started(event, tool, attempt_id, agent.as_deref(), at),
            Body::ToolCallCompleted { tool, attempt_id, ok, error, .. } => {
                let failed = if *ok { None } else { Some(error.clone().unwrap_or_else(|| "failed".into())) };
                done.extend(self.call_ended(tool, attempt_id, at, failed));
            }
            Body::ToolCallRefused { tool, attempt_id, reason, .. } => {
                let mut refused = self.tool_span(event, tool, attempt_id, None, at);
                refused.error = Some(format!("refused: {reason}"));
                done.push(refused);
            }
            Body::GateRecorded { .. } => done.push(self.gate(event, at)),
            _ => self.annotate(event, at),
        }
        done
    }

    fn node_started(&mut self, event: &Event, node: &str, kind: NodeKind, visit: u32, at: u64) {
        self.kinds.insert(node.to_string(), kind);
        let parent = self.container();
        let name = if kind == NodeKind::Human { format!("flow.human {node}") } else { format!("flow.node {node}") };
        let attrs = vec![("flow.node", node.into()), ("flow.node_kind", kind.as_str().into()), ("flow.visit", visit.into())];
        let span = self.span(event, name, parent, at, attrs);
        self.nodes.push((node.to_string(), span));
    }

    fn node_ended(&mut self, node: &str, at: u64, (key, value): (&'static str, String), error: Option<String>) {
        let Some(i) = self.nodes.iter().rposition(|(n, _)| n == node) else { return };
        let (node, mut span) = self.nodes.remove(i);
        span.end_ms = at;
        span.attributes.push((key, value.into()));
        span.error = error;
        self.held.push((node, span));
    }

    /// The completed visits no gate can judge any more.
    fn release(&mut self) -> Vec<Span> {
        self.held.drain(..).map(|(_, s)| s).collect()
    }

    fn attempt_started(&mut self, event: &Event, node: &str, attempt_id: &str, attempt_no: u32, trigger: &str, at: u64) {
        let parent = self.visit_of(node).or(self.root_id());
        let mut attrs: Attrs = vec![
            ("flow.node", node.into()),
            ("flow.attempt_id", attempt_id.into()),
            ("flow.attempt_no", attempt_no.into()),
            ("flow.trigger_reason", trigger.into()),
        ];
        let name = match (self.kinds.get(node), self.agents.get(node)) {
            (Some(NodeKind::Agent) | None, Some(agent)) => {
                attrs.push(("gen_ai.operation.name", "invoke_agent".into()));
                attrs.push(("gen_ai.agent.name", agent.as_str().into()));
                format!("invoke_agent {agent}")
            }
            _ => format!("flow.attempt {node}"),
        };
        let span = self.span(event, name, parent, at, attrs);
        self.attempts.insert(attempt_id.to_string(), span);
    }

    fn attempt_ended(&mut self, attempt_id: &str, at: u64, error: Option<String>) -> Option<Span> {
        let mut span = self.attempts.remove(attempt_id)?;
        span.end_ms = at;
        span.error = error;
        Some(span)
    }

    /// A model turn: it ended when it was recorded and took its usage's duration.
    fn chat(&mut self, event: &Event, at: u64) -> Span {
        let Body::AgentTurn {
            agent,
            node,
            attempt_id,
            provider,
            model,
            usage,
            input_tokens,
            output_tokens,
            finish_reasons,
            reply,
            error,
            ..
        } = &event.body
        else {
            unreachable!("chat spans are made of agent turns")
        };
        self.agents.entry(node.clone()).or_insert_with(|| agent.clone());
        if let Some(attempt) = self.attempts.get_mut(attempt_id).filter(|a| a.name.starts_with("flow.attempt ")) {
            // The plan did not say which agent runs the node: the turn does.
            attempt.name = format!("invoke_agent {agent}");
            attempt.attributes.push(("gen_ai.operation.name", "invoke_agent".into()));
            attempt.attributes.push(("gen_ai.agent.name", agent.as_str().into()));
        }
        let parent = self.attempts.get(attempt_id).map(|a| a.id).or(self.visit_of(node)).or(self.root_id());
        let model_name = model.clone().unwrap_or_else(|| provider.clone());
        let mut attrs: Attrs = vec![
            ("gen_ai.operation.name", "chat".into()),
            ("gen_ai.provider.name", provider.as_str().into()),
            ("gen_ai.request.model", model_name.as_str().into()),
            ("gen_ai.agent.name", agent.as_str().into()),
            ("flow.node", node.as_str().into()),
            ("flow.attempt_id", attempt_id.as_str().into()),
            ("flow.tokens", usage.tokens.into()),
            ("flow.cost", usage.cost.into()),
        ];
        if let (Some(read), Some(reply)) = (&self.contents, reply) {
            if let Some(text) = read(reply) {
                let messages = serde_json::json!([{ "role": "assistant", "parts": [{ "type": "text", "content": text }] }]);
                attrs.push(("gen_ai.output.messages", messages.to_string().into()));
            }
        }
        if !finish_reasons.is_empty() {
            attrs.push(("gen_ai.response.finish_reasons", Attr::Strs(finish_reasons.clone())));
        }
        if let (Some(input), Some(output)) = (input_tokens, output_tokens) {
            attrs.push(("gen_ai.usage.input_tokens", (*input).into()));
            attrs.push(("gen_ai.usage.output_tokens", (*output).into()));
        }
        let mut span = self.span(event, format!("chat {model_name}"), parent, at.saturating_sub(usage.duration_ms), attrs);
        span.kind = Kind::Client;
        span.end_ms = at;
        span.error = error.clone();
        span
    }

    fn tool_span(&self, event: &Event, tool: &str, attempt_id: &str, agent: Option<&str>, at: u64) -> Span {
        let parent = self.attempts.get(attempt_id).map(|a| a.id).or(self.root_id());
        let mut attrs: Attrs = vec![
            ("gen_ai.operation.name", "execute_tool".into()),
            ("gen_ai.tool.name", tool.into()),
            ("gen_ai.tool.call.id", event.event_id.to_string().into()),
            ("flow.attempt_id", attempt_id.into()),
        ];
        if let Some(agent) = agent {
            attrs.push(("gen_ai.agent.name", agent.into()));
        }
        self.span(event, format!("execute_tool {tool}"), parent, at, attrs)
    }

    fn call_started(&mut self, event: &Event, tool: &str, attempt_id: &str, agent: Option<&str>, at: u64) {
        let span = self.tool_span(event, tool, attempt_id, agent, at);
        self.calls.entry((attempt_id.to_string(), tool.to_string())).or_default().push_back(span);
    }

    fn call_ended(&mut self, tool: &str, attempt_id: &str, at: u64, error: Option<String>) -> Option<Span> {
        let mut span = self.calls.get_mut(&(attempt_id.to_string(), tool.to_string()))?.pop_front()?;
        span.end_ms = at;
        span.error = error;
        Some(span)
    }

    /// A gate: its own span, and its outcome as an evaluation of the visit it judges.
    fn gate(&mut self, event: &Event, at: u64) -> Span {
        let Body::GateRecorded { gate, from, to, outcome, reason, evaluators, .. } = &event.body else {
            unreachable!("gate spans are made of gate records")
        };
        let attrs = vec![
            ("flow.gate", gate.as_str().into()),
            ("flow.gate.from", from.as_str().into()),
            ("flow.gate.to", to.as_str().into()),
            ("flow.gate.outcome", outcome.to_string().into()),
        ];
        let mut span = self.span(event, format!("flow.gate {gate}"), self.root_id(), at, attrs);
        for e in evaluators {
            let mut attrs: Attrs = vec![("flow.evaluator", e.evaluator.as_str().into()), ("flow.outcome", e.outcome.to_string().into())];
            if let Some(reason) = &e.reason {
                attrs.push(("flow.reason", reason.as_str().into()));
            }
            span.events.push(SpanEvent { name: "flow.evaluator", time_ms: at, attributes: attrs });
        }
        let mut evaluation: Attrs = vec![
            ("gen_ai.evaluation.name", gate.as_str().into()),
            ("gen_ai.evaluation.score.label", if *outcome == Outcome::Pass { "pass" } else { "fail" }.into()),
            ("flow.gate.outcome", outcome.to_string().into()),
        ];
        if let Some(reason) = reason {
            evaluation.push(("gen_ai.evaluation.explanation", reason.as_str().into()));
        }
        let judged = SpanEvent { name: "gen_ai.evaluation.result", time_ms: at, attributes: evaluation };
        match self.held.iter_mut().rev().find(|(node, _)| node == from) {
            Some((_, visit)) => visit.events.push(judged),
            None => span.events.push(judged),
        }
        span
    }

    /// Events that are points in the run's life: on the run's span.
    fn annotate(&mut self, event: &Event, at: u64) {
        match &event.body {
            Body::Handoff { from, to, accepted, .. } => {
                let agent = |node: &str| self.agents.get(node).cloned().unwrap_or_default();
                let attrs = vec![
                    ("flow.handoff.from", from.as_str().into()),
                    ("flow.handoff.to", to.as_str().into()),
                    ("flow.handoff.from_agent", agent(from).into()),
                    ("flow.handoff.to_agent", agent(to).into()),
                    ("flow.handoff.accepted", (*accepted).into()),
                ];
                self.root_event("flow.handoff", at, attrs);
            }
            Body::DecisionApplied { subject, decision, by, .. } => {
                let attrs = vec![
                    ("flow.subject", subject.as_str().into()),
                    ("flow.decision", decision.to_string().into()),
                    ("flow.by", by.as_str().into()),
                ];
                self.root_event("flow.decision", at, attrs);
            }
            Body::BudgetZoneChanged { scope, to, .. } => {
                let attrs = vec![("flow.budget.scope", scope.as_str().into()), ("flow.budget.zone", to.to_string().into())];
                self.root_event("flow.budget.zone_changed", at, attrs);
            }
            Body::BudgetExhausted { scope, limit, .. } => {
                let attrs = vec![("flow.budget.scope", scope.as_str().into()), ("flow.budget.limit", limit.as_str().into())];
                self.root_event("flow.budget.exhausted", at, attrs);
            }
            Body::PolicyViolated { policy, response, message, .. } => {
                let attrs = vec![
                    ("gen_ai.evaluation.name", policy.as_str().into()),
                    ("gen_ai.evaluation.score.label", "fail".into()),
                    ("gen_ai.evaluation.explanation", message.as_str().into()),
                    ("flow.policy.response", response.to_string().into()),
                ];
                self.root_event("gen_ai.evaluation.result", at, attrs);
            }
            _ => {}
        }
    }

    /// Closes what is still open (a run that paused or stopped before its
    /// end, or the end itself): at the last event's time, the run last.
    pub fn finish(&mut self) -> Vec<Span> {
        let end = self.last_ms;
        let mut done = self.release();
        let mut open: Vec<Span> = self.calls.drain().flat_map(|(_, q)| q).collect();
        open.extend(self.attempts.drain().map(|(_, s)| s));
        open.extend(self.nodes.drain(..).rev().map(|(_, s)| s));
        open.sort_by_key(|s| std::cmp::Reverse(s.start_ms));
        for mut span in open {
            span.end_ms = end;
            done.push(span);
        }
        if let Some(mut root) = self.root.take() {
            root.end_ms = end;
            done.push(root);
        }
        done
    }
}

#[cfg(test)]
mod tests;
