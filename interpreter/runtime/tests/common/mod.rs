//! Runs of the engine in process, shared by the integration tests: a
//! checked and verified plan, driven on a fake clock with every request
//! answered by the test, its trace held to the plan by trace check.

#![allow(dead_code)] // each test file uses its own part

use flow_check::ir::Program;
use flow_check::{check_program, NoFiles};
use flow_diagnostics::SourceDb;
use flow_runtime::clock::FakeClock;
use flow_runtime::engine::{Engine, RunConfig};
use flow_runtime::journal::ArtifactStore;
use flow_runtime::proto::{AgentReply, AgentRequest, HumanAnswer, HumanRequest, Request, Response, TokenUsage, ToolResult};
use flow_runtime::tracecheck;
use flow_trace::{Body, Decision, Event};
use serde_json::{json, Value};
use std::sync::Arc;

/// `source`, checked and verified: neither finds an error.
pub fn program(source: &str) -> Program {
    let mut db = SourceDb::new();
    let root = db.add("test.flow", source.to_string());
    let checked = check_program(&mut db, root, &NoFiles);
    assert!(!checked.has_errors(), "{:#?}", checked.diagnostics);
    let verified = flow_verify::verify(&checked.program);
    assert!(verified.iter().all(|d| !d.is_error()), "{verified:#?}");
    checked.program
}

/// What a run did: its events and the requests it sent.
pub struct Ran {
    pub events: Vec<Event>,
    pub agents: Vec<AgentRequest>,
    pub humans: Vec<HumanRequest>,
    /// Every tool call's request (answered with `{}`).
    pub tools: Vec<flow_runtime::proto::ToolRequest>,
    /// The run's artifacts.
    pub store: flow_runtime::journal::MemoryArtifacts,
}

impl Ran {
    /// The context of `node`'s first turn.
    pub fn context_of(&self, node: &str) -> &Value {
        &self.agents.iter().find(|a| a.node == node).unwrap_or_else(|| panic!("no turn of {node}")).context
    }

    /// The context of every turn of `node`, in order.
    pub fn contexts_of(&self, node: &str) -> Vec<&Value> {
        self.agents.iter().filter(|a| a.node == node).map(|a| &a.context).collect()
    }

    /// The value `node` last completed with, from the run's artifacts.
    pub fn output_of(&self, node: &str) -> Value {
        let artifact = self.events.iter().rev().find_map(|e| match &e.body {
            Body::NodeCompleted { node: n, output: Some(o), .. } if n == node => Some(o.clone()),
            _ => None,
        });
        self.store.get(&artifact.unwrap_or_else(|| panic!("{node} completed with no output"))).expect("a stored artifact")
    }

    /// The error code and message of `node`'s first failed visit.
    pub fn failure_of(&self, node: &str) -> Option<(flow_trace::ErrorCode, String)> {
        self.events.iter().find_map(|e| match &e.body {
            Body::NodeFailed { node: n, error_code, message, .. } if n == node => Some((*error_code, message.clone())),
            _ => None,
        })
    }

    /// The nodes started, in order.
    pub fn started(&self) -> Vec<String> {
        self.events
            .iter()
            .filter_map(|e| match &e.body {
                Body::NodeStarted { node, .. } => Some(node.clone()),
                _ => None,
            })
            .collect()
    }
}

/// Runs `program` on `input`: agent turns answered with `reply`'s output,
/// tool calls with `{}`, humans with `decide`; the trace must be
/// conformant.
pub fn run(program: Program, input: Value, reply: impl Fn(&AgentRequest) -> Value, decide: impl Fn(&HumanRequest) -> Decision) -> Ran {
    let usage = TokenUsage { input_tokens: 10, output_tokens: 10 };
    let agent = |a: &AgentRequest| AgentReply { output: Some(reply(a)), usage: usage.clone(), ..AgentReply::default() };
    let tool = |_: &flow_runtime::proto::ToolRequest| ToolResult { ok: true, output: Some(json!({})), ..ToolResult::default() };
    run_with(program, input, agent, tool, decide)
}

/// [`run`] with whole agent replies (tool calls among them) and tool
/// results given by the test.
pub fn run_with(
    program: Program,
    input: Value,
    agent: impl Fn(&AgentRequest) -> AgentReply,
    tool: impl Fn(&flow_runtime::proto::ToolRequest) -> ToolResult,
    decide: impl Fn(&HumanRequest) -> Decision,
) -> Ran {
    let program = Arc::new(program);
    let clock = Arc::new(FakeClock::new(FakeClock::DEFAULT_START));
    let cfg = RunConfig {
        run_id: "run".into(),
        execution_id: "exec-1".into(),
        plan_digest: "sha256:test".into(),
        plan_content_digest: None,
        clock,
        owner: "test".into(),
        lease_ttl_ms: 30_000,
    };
    let mut engine = Engine::new(program.clone(), None, cfg).expect("engine");
    engine.start(input);
    let (mut agents, mut humans, mut tools) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..1_000 {
        let commands = engine.take_commands();
        if commands.is_empty() {
            break;
        }
        for command in commands {
            let response = match &command.request {
                Request::Agent(a) => {
                    agents.push((**a).clone());
                    Response::Agent(agent(a))
                }
                Request::Tool(t) => {
                    tools.push(t.clone());
                    Response::Tool(tool(t))
                }
                Request::Human(h) => {
                    humans.push(h.clone());
                    let by = h.principals.first().cloned().unwrap_or_default();
                    Response::Human(HumanAnswer { decision: decide(h), by, comment: None, output: None })
                }
                other => panic!("unexpected request {other:?}"),
            };
            engine.on_response(&command.key, response).expect("response");
        }
    }
    let events = engine.take_events();
    let mut store = flow_runtime::journal::MemoryArtifacts::new();
    for (artifact, bytes) in engine.take_artifacts() {
        store.put_encoded(&artifact, &bytes).expect("artifact");
    }
    let options = tracecheck::Options { artifacts: Some(&store), ..Default::default() };
    let report = tracecheck::check(&program, &events, &options);
    assert!(report.conformant, "{:#?}", report.deviations);
    Ran { events, agents, humans, tools, store }
}

/// The reason the run terminated with.
pub fn ending(events: &[Event]) -> String {
    events
        .iter()
        .rev()
        .find_map(|e| match &e.body {
            Body::RunTerminated { reason, .. } => Some(reason.clone()),
            _ => None,
        })
        .expect("the run ended")
}

/// The run's events with `node`'s computed value replaced by `edit` of it
/// (stored, and named by the `computed` event and the completion), and
/// the artifacts holding it: a forged value for trace check to catch.
pub fn forge_computed(ran: Ran, node: &str, edit: impl FnOnce(&mut Value)) -> (Vec<Event>, flow_runtime::journal::MemoryArtifacts) {
    let mut value = ran.output_of(node);
    edit(&mut value);
    let mut store = ran.store;
    let fake = store.put(&value).expect("stored");
    let mut events = ran.events;
    for e in &mut events {
        match &mut e.body {
            Body::Computed { node: n, output, .. } if n == node => *output = fake.clone(),
            Body::NodeCompleted { node: n, output, .. } if n == node => *output = Some(fake.clone()),
            _ => {}
        }
    }
    (events, store)
}

/// The events with `seq`, ids and parents renumbered after some were
/// removed or edited (a parent removed leaves none).
pub fn renumber(events: Vec<Event>) -> Vec<Event> {
    let mut map = std::collections::HashMap::new();
    events
        .into_iter()
        .enumerate()
        .map(|(i, mut e)| {
            let seq = i as u64 + 1;
            map.insert(e.event_id.to_string(), Event::id_for(&e.run_id, seq));
            e.seq = seq;
            e.event_id = Event::id_for(&e.run_id, seq).into();
            e.parent_event_id = e.parent_event_id.as_deref().and_then(|p| map.get(p)).map(|p| p.clone().into());
            e
        })
        .collect()
}
