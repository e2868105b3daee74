//! Per-turn ceilings at run time (reference §5.2, §12.2): a turn whose
//! request may hold more input than `max_input_tokens` is not sent; a turn
//! reserves its ceiling; reported use over the ceilings is metered as
//! reported, recorded as a warning and counted.

use flow_check::{check_program, NoFiles};
use flow_diagnostics::SourceDb;
use flow_runtime::clock::FakeClock;
use flow_runtime::engine::{Engine, RunConfig, RunStatus};
use flow_runtime::prompt::input_token_bound;
use flow_runtime::proto::{AgentReply, AgentRequest, Request, Response, TokenUsage, ToolResult};
use flow_trace::{Body, Event, Usage};
use serde_json::{json, Value};
use std::sync::Arc;

fn engine(source: &str) -> Engine {
    let mut db = SourceDb::new();
    let root = db.add("turns.flow", source.to_string());
    let checked = check_program(&mut db, root, &NoFiles);
    assert!(!checked.has_errors(), "{:#?}", checked.diagnostics);
    let cfg = RunConfig {
        run_id: "run".into(),
        execution_id: "exec-1".into(),
        plan_digest: "sha256:test".into(),
        plan_content_digest: None,
        clock: Arc::new(FakeClock::new(FakeClock::DEFAULT_START)),
        owner: "test".into(),
        lease_ttl_ms: 30_000,
    };
    Engine::new(Arc::new(checked.program), None, cfg).expect("engine")
}

/// Runs to the end, answering every turn with `reply`; returns the events
/// and every agent request that was sent.
fn run(engine: &mut Engine, input: Value, reply: impl Fn(&AgentRequest) -> AgentReply) -> (Vec<Event>, Vec<AgentRequest>) {
    engine.start(input);
    let mut sent = Vec::new();
    loop {
        let commands = engine.take_commands();
        if commands.is_empty() {
            break;
        }
        for command in commands {
            let response = match &command.request {
                Request::Agent(a) => {
                    sent.push((**a).clone());
                    Response::Agent(reply(a))
                }
                Request::Tool(_) => Response::Tool(ToolResult { ok: true, output: Some(json!({})), ..ToolResult::default() }),
                other => panic!("unexpected request {other:?}"),
            };
            engine.on_response(&command.key, response).expect("response");
        }
    }
    (engine.take_events(), sent)
}

fn ok(input_tokens: u64, output_tokens: u64) -> AgentReply {
    AgentReply { output: Some(json!("done")), usage: TokenUsage { input_tokens, output_tokens }, ..AgentReply::default() }
}

const FLOW: &str = r#"
provider p: scripted { max_tokens: 1k, max_input_tokens: 2k }
agent a { provider: p, max_turns: 1 }
workflow w {
  input: { text: string }
  start: x
  budget: { tokens: 100k }
  node x: agent a { output: string, retry: { attempts: 2 }, on failure -> goto(fallback) }
  node fallback: end too_big { status: partial }
  node done: end ok
  x -> done
}
"#;

#[test]
fn a_turn_whose_request_may_hold_more_input_than_declared_is_not_sent() {
    let mut e = engine(FLOW);
    let (events, sent) = run(&mut e, json!({ "text": "x".repeat(10_000) }), |_| ok(100, 10));
    assert!(sent.is_empty(), "no turn is sent: {sent:?}");
    let failed: Vec<(&str, &str)> = events
        .iter()
        .filter_map(|ev| match &ev.body {
            Body::AttemptFailed { error_code, message, .. } => Some((error_code.as_str(), message.as_str())),
            _ => None,
        })
        .collect();
    // Both attempts refused, then the node's failure handler ran.
    assert_eq!(failed.len(), 2, "{failed:?}");
    for (code, message) in &failed {
        assert_eq!(*code, "input_too_large");
        assert!(message.contains("over the `max_input_tokens` of 2000 of provider `p`"), "{message}");
    }
    assert!(!events.iter().any(|ev| matches!(ev.body, Body::BudgetReserved { .. })), "nothing is reserved for a turn not sent");
    assert!(matches!(e.status(), RunStatus::Terminated { reason, .. } if reason == "too_big"), "{:?}", e.status());
}

#[test]
fn the_agent_overrides_the_providers_input_ceiling() {
    let source = FLOW.replace("agent a { provider: p, max_turns: 1 }", "agent a { provider: p, max_turns: 1, max_input_tokens: 20 }");
    let mut e = engine(&source);
    let (events, sent) = run(&mut e, json!({ "text": "short" }), |_| ok(10, 10));
    assert!(sent.is_empty());
    let message = events
        .iter()
        .find_map(|ev| match &ev.body {
            Body::AttemptFailed { message, .. } => Some(message.clone()),
            _ => None,
        })
        .expect("refused");
    assert!(message.contains("of 20 of agent `a`"), "{message}");
}

#[test]
fn a_turn_reserves_its_ceiling_and_settles_what_was_reported() {
    let mut e = engine(FLOW);
    let (events, sent) = run(&mut e, json!({ "text": "short" }), |_| ok(300, 20));
    assert_eq!(sent.len(), 1);
    let reserved: Vec<&Usage> = events
        .iter()
        .filter_map(|ev| match &ev.body {
            Body::BudgetReserved { amount, .. } if amount.tokens > 0 => Some(amount),
            _ => None,
        })
        .collect();
    assert_eq!(reserved.len(), 1);
    assert_eq!(reserved[0].tokens, 2000 + 1000, "max_input_tokens + max_tokens");
    let used = events.iter().find_map(|ev| match &ev.body {
        Body::BudgetSettled { used, .. } if used.tokens > 0 => Some(used.tokens),
        _ => None,
    });
    assert_eq!(used, Some(320));
    assert_eq!(e.ceiling_breaches(), 0);
    assert!(!events.iter().any(|ev| matches!(ev.body, Body::Warning { .. })));
}

#[test]
fn without_an_input_ceiling_a_turn_reserves_what_its_request_can_hold() {
    let source = FLOW.replace("max_tokens: 1k, max_input_tokens: 2k", "max_tokens: 1k");
    let mut e = engine(&source);
    let (events, sent) = run(&mut e, json!({ "text": "x".repeat(10_000) }), |_| ok(300, 20));
    assert_eq!(sent.len(), 1, "nothing refuses it");
    let reserved = events
        .iter()
        .find_map(|ev| match &ev.body {
            Body::BudgetReserved { amount, .. } if amount.tokens > 0 => Some(amount.tokens),
            _ => None,
        })
        .expect("reserved");
    let bound = input_token_bound(&sent[0]);
    assert!(bound > 10_000, "the bound covers the input's bytes: {bound}");
    assert_eq!(reserved, bound + 1000);
}

#[test]
fn reported_use_over_the_ceilings_is_metered_warned_about_and_counted() {
    let mut e = engine(FLOW);
    let (events, _) = run(&mut e, json!({ "text": "short" }), |_| ok(15_000, 1_200));
    let used = events.iter().find_map(|ev| match &ev.body {
        Body::BudgetSettled { used, .. } if used.tokens > 0 => Some(used.tokens),
        _ => None,
    });
    assert_eq!(used, Some(16_200), "metered as reported");
    let warnings: Vec<&str> = events
        .iter()
        .filter_map(|ev| match &ev.body {
            Body::Warning { message, .. } => Some(message.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("15000 input tokens, over the provider's `max_input_tokens` of 2000"), "{}", warnings[0]);
    assert!(warnings[0].contains("1200 output tokens, over `max_tokens` of 1000"), "{}", warnings[0]);
    assert_eq!(e.ceiling_breaches(), 1);
}

#[test]
fn a_model_is_shown_each_tools_description_and_input_schema() {
    let source = r#"
provider p: scripted { max_tokens: 1k }
tool search: builtin { description: "Searches the archive by keyword", input: { q: string, limit: int }, output: any, function: "identity" }
tool ping: builtin { description: "Answers pong", input: any, output: any, function: "identity" }
agent a { provider: p, tools: [search, ping], max_turns: 1 }
workflow w {
  start: x
  node x: agent a { output: string }
  node done: end ok
  x -> done
}
"#;
    let (_, sent) = run(&mut engine(source), json!({}), |_| ok(10, 10));
    let tools = &sent.first().expect("a turn was sent").tools;
    let search = tools.iter().find(|t| t.name == "search").expect("search is offered");
    assert_eq!(search.description.as_deref(), Some("Searches the archive by keyword"));
    assert_eq!(search.parameters["type"], "object");
    assert_eq!(search.parameters["properties"]["q"]["type"], "string");
    assert_eq!(search.parameters["properties"]["limit"]["type"], "integer");
    // An input that is no record is still offered as an object.
    let ping = tools.iter().find(|t| t.name == "ping").expect("ping is offered");
    assert_eq!((ping.description.as_deref(), &ping.parameters), (Some("Answers pong"), &json!({ "type": "object" })));
    // What a client sends: the function definitions carry both.
    let definitions = flow_runtime::prompt::tool_definitions(&sent[0]);
    assert_eq!(definitions[0]["function"]["description"], "Searches the archive by keyword");
    assert_eq!(definitions[0]["function"]["parameters"], search.parameters);
}

const TOOLED: &str = r#"
provider p: scripted { max_tokens: 1k }
tool search: builtin { description: "Searches", input: { q: string }, output: { hits: int }, function: "identity" }
agent a { provider: p, tools: [search], max_turns: 3 }
workflow w {
  start: x
  node x: agent a { output: string }
  node done: end ok
  x -> done
}
"#;

fn call(input: Value) -> AgentReply {
    AgentReply { tool_calls: vec![flow_runtime::proto::ToolCall { tool: "search".into(), input, id: None }], ..ok(10, 10) }
}

#[test]
fn a_tool_call_whose_input_is_not_of_the_tools_input_type_is_refused_and_fed_back() {
    let (events, sent) = run(&mut engine(TOOLED), json!({}), |req| if req.turn == 1 { call(json!({ "q": 5 })) } else { ok(10, 10) });
    let refused: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.body {
            Body::ToolCallRefused { tool, reason, .. } if tool == "search" => Some(reason.as_str()),
            _ => None,
        })
        .collect();
    assert!(refused.len() == 1 && refused[0].contains("input of `search` is invalid"), "{refused:?}");
    assert!(!events.iter().any(|e| matches!(e.body, Body::ToolCallStarted { .. })), "an invalid call is never made");
    assert_eq!(sent[1].tool_results[0]["ok"], false, "the agent hears why");
}

#[test]
fn a_tool_result_that_is_not_of_the_tools_output_type_does_not_reach_the_agent_as_valid() {
    // The harness answers every tool call with `{}`: no `hits`.
    let (events, sent) = run(&mut engine(TOOLED), json!({}), |req| if req.turn == 1 { call(json!({ "q": "cats" })) } else { ok(10, 10) });
    assert!(events.iter().any(|e| matches!(e.body, Body::ToolCallStarted { .. })), "a valid call is made");
    // The agent's next turn hears of an error, not of the output.
    let result = &sent[1].tool_results[0];
    assert_eq!(result["ok"], false, "{result}");
    assert!(result["error"].as_str().is_some_and(|e| e.contains("output of `search` is invalid")), "{result}");
}

#[test]
fn a_turns_cassette_key_names_its_tools_whatever_their_definitions() {
    let (_, sent) = run(&mut engine(TOOLED), json!({}), |_| ok(10, 10));
    let full = sent[0].clone();
    assert!(full.tools[0].description.is_some(), "the request carries the definition");
    let mut named = full.clone();
    named.tools = vec![flow_runtime::proto::ToolSpec::named("search")];
    assert_eq!(Request::Agent(Box::new(full.clone())).key(), Request::Agent(Box::new(named)).key());
    // A bare name, as older cassettes wrote it, reads back as a tool.
    let old: flow_runtime::proto::ToolSpec = serde_json::from_value(json!("search")).expect("a name");
    assert_eq!(old, flow_runtime::proto::ToolSpec::named("search"));
    let mut other = full.clone();
    other.prompt = Some("something else".into());
    assert_ne!(Request::Agent(Box::new(full)).key(), Request::Agent(Box::new(other)).key(), "the rest of the request counts");
}

const DELEGATED: &str = r#"
provider p: scripted { max_tokens: 1k }
agent a { provider: p, max_turns: 1, can_delegate: true }
type Job = { n: int }
contract job { objective: "Count the widgets", inputs: Job, output: { count: int, unit: string }, accept: [output.count >= 0] }
workflow w {
  start: boss
  node boss: agent a { output: Job }
  node worker: agent a { output: any }
  node done: end ok
  boss -> worker -> done
  delegate boss -> worker { contract: job, inputs: { n: boss.n }, reason: "the boss counts nothing" }
}
"#;

#[test]
fn a_delegate_is_told_its_contracts_objective_and_acceptance_checks() {
    let source = DELEGATED;
    let reply = |req: &AgentRequest| {
        let output = if req.node == "boss" { json!({ "n": 3 }) } else { json!({ "count": 1, "unit": "crate" }) };
        AgentReply { output: Some(output), ..ok(10, 10) }
    };
    let (events, sent) = run(&mut engine(source), json!({}), reply);
    let reason = events.iter().find_map(|e| match &e.body {
        Body::Delegation { reason, .. } => Some(reason.clone()),
        _ => None,
    });
    assert_eq!(reason, Some(Some("the boss counts nothing".to_string())), "the delegation is recorded with its reason");
    let boss = sent.iter().find(|r| r.node == "boss").expect("boss ran");
    assert_eq!((boss.objective.as_deref(), boss.acceptance.len()), (None, 0), "the delegator works under no contract");
    let worker = sent.iter().find(|r| r.node == "worker").expect("worker ran");
    assert_eq!(worker.objective.as_deref(), Some("Count the widgets"));
    assert_eq!(worker.acceptance, ["output.count >= 0"]);
    let schema = flow_runtime::prompt::tighten(&worker.output_schema);
    let user = &flow_runtime::prompt::messages(worker, &schema)[1].content;
    assert!(user.contains("Objective (your delegation contract): Count the widgets"), "{user}");
    assert!(user.contains("accepted only if: output.count >= 0"), "{user}");
}

#[test]
fn a_delegates_result_must_be_of_the_contracts_output_type_and_pass_its_acceptance_checks() {
    let failure = |worker: Value| {
        let reply = move |req: &AgentRequest| {
            let output = if req.node == "boss" { json!({ "n": 3 }) } else { worker.clone() };
            AgentReply { output: Some(output), ..ok(10, 10) }
        };
        let (events, _) = run(&mut engine(DELEGATED), json!({}), reply);
        events.iter().find_map(|e| match &e.body {
            Body::NodeFailed { node, error_code, message, .. } if node == "worker" => Some((error_code.to_string(), message.clone())),
            _ => None,
        })
    };
    assert_eq!(failure(json!({ "count": 1, "unit": "crate" })), None, "a result that keeps the contract completes");
    let (code, message) = failure(json!({ "count": 1 })).expect("no `unit`: rejected");
    assert!(code == "contract_rejected" && message.contains("output does not match"), "{code}: {message}");
    let (code, message) = failure(json!({ "count": -1, "unit": "crate" })).expect("a negative count: rejected");
    assert!(code == "contract_rejected" && message.contains("output.count >= 0"), "{code}: {message}");
}

#[test]
fn a_tool_nodes_result_must_be_of_the_nodes_declared_output() {
    // The tool returns anything; the node declares what it needs. The
    // harness answers every call with `{}`.
    let source = |output: &str| {
        format!(
            r#"
tool fetch: builtin {{ description: "Fetches", input: any, output: any, function: "identity" }}
workflow w {{
  start: x
  node x: tool fetch {{ args: {{ id: 1 }}{output} }}
  node done: end ok
  x -> done
}}
"#
        )
    };
    let failed = |src: &str| {
        let (events, _) = run(&mut engine(src), json!({}), |_| ok(0, 0));
        events.iter().find_map(|e| match &e.body {
            Body::NodeFailed { node, error_code, message, .. } if node == "x" => Some((error_code.to_string(), message.clone())),
            _ => None,
        })
    };
    assert_eq!(failed(&source("")), None, "without a declared output, the tool's `any` holds");
    let (code, message) = failed(&source(", output: { hits: int }")).expect("`{}` has no `hits`");
    assert_eq!(code, "invalid_output");
    assert!(message.contains("output of tool node `x` is not its declared"), "{message}");
}
