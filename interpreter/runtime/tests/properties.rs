//! Declared means enforced: properties shown to act at run time, one
//! test each (the property ledger, reference §13, names these tests).
//! Each drives the engine in process on a fake clock, answering every
//! request with a scripted closure, and asserts what the property changes.

use flow_check::{check_program, NoFiles};
use flow_diagnostics::SourceDb;
use flow_runtime::clock::FakeClock;
use flow_runtime::engine::{Engine, RunConfig, RunStatus};
use flow_runtime::proto::{AgentReply, AgentRequest, HumanAnswer, HumanRequest, Request, Response, TokenUsage, ToolCall, ToolResult};
use flow_trace::{Body, Decision, Event, TerminationStatus};
use serde_json::{json, Value};
use std::sync::Arc;

fn engine_on(source: &str, clock: Arc<FakeClock>) -> Engine {
    let mut db = SourceDb::new();
    let root = db.add("properties.flow", source.to_string());
    let checked = check_program(&mut db, root, &NoFiles);
    assert!(!checked.has_errors(), "{:#?}", checked.diagnostics);
    let cfg = RunConfig {
        run_id: "run".into(),
        execution_id: "exec-1".into(),
        plan_digest: "sha256:test".into(),
        plan_content_digest: None,
        clock,
        owner: "test".into(),
        lease_ttl_ms: 30_000,
    };
    Engine::new(Arc::new(checked.program), None, cfg).expect("engine")
}

/// What a run did: its events, the requests it sent, how it ended.
struct Ran {
    events: Vec<Event>,
    agents: Vec<AgentRequest>,
    humans: Vec<HumanRequest>,
    status: RunStatus,
}

impl Ran {
    fn ended(&self) -> (String, TerminationStatus) {
        self.events
            .iter()
            .find_map(|e| match &e.body {
                Body::RunTerminated { reason, status, .. } => Some((reason.clone(), *status)),
                _ => None,
            })
            .unwrap_or_else(|| panic!("the run did not terminate: {:?}", self.status))
    }

    fn failed(&self, node: &str) -> Option<(String, String)> {
        self.events.iter().find_map(|e| match &e.body {
            Body::NodeFailed { node: n, error_code, message, .. } if n == node => Some((error_code.to_string(), message.clone())),
            _ => None,
        })
    }
}

/// Runs `source` on `input`: agent turns answered by `reply`, tool calls
/// with `{}`, decisions with approve by the first principal asked.
fn run(source: &str, input: Value, reply: impl Fn(&AgentRequest) -> AgentReply) -> Ran {
    run_timed(source, input, reply, 0)
}

/// As [`run`], each model turn taking `turn_ms` on the run's fake clock.
fn run_timed(source: &str, input: Value, reply: impl Fn(&AgentRequest) -> AgentReply, turn_ms: u64) -> Ran {
    run_with(source, input, reply, turn_ms, |_| Decision::Approve)
}

/// As [`run_timed`], humans answering with `decide`.
fn run_with(
    source: &str,
    input: Value,
    reply: impl Fn(&AgentRequest) -> AgentReply,
    turn_ms: u64,
    decide: impl Fn(&HumanRequest) -> Decision,
) -> Ran {
    let clock = Arc::new(FakeClock::new(FakeClock::DEFAULT_START));
    let mut engine = engine_on(source, clock.clone());
    engine.start(input);
    let (mut agents, mut humans) = (Vec::new(), Vec::new());
    for _ in 0..1_000 {
        let commands = engine.take_commands();
        if commands.is_empty() {
            break;
        }
        for command in commands {
            let response = match &command.request {
                Request::Agent(a) => {
                    agents.push((**a).clone());
                    clock.advance(turn_ms);
                    Response::Agent(reply(a))
                }
                Request::Tool(_) => Response::Tool(ToolResult { ok: true, output: Some(json!({})), ..ToolResult::default() }),
                Request::Human(h) => {
                    humans.push(h.clone());
                    let by = h.principals.first().cloned().unwrap_or_default();
                    Response::Human(HumanAnswer { decision: decide(h), by, comment: Some("as decided".into()), output: None })
                }
                other => panic!("unexpected request {other:?}"),
            };
            engine.on_response(&command.key, response).expect("response");
        }
    }
    let status = engine.status().clone();
    Ran { events: engine.take_events(), agents, humans, status }
}

fn output(value: Value) -> AgentReply {
    AgentReply { output: Some(value), usage: TokenUsage { input_tokens: 10, output_tokens: 10 }, ..AgentReply::default() }
}

const HEAD: &str = "provider p: scripted { max_tokens: 1k }\n";

/// A principal `ops` and a tool `ship` that needs a confirmation per call.
const SHIP: &str =
    "principal ops\ntool ship: builtin { description: \"Ships\", input: any, output: any, function: \"identity\", confirm: true }\n";

#[test]
fn an_agents_instructions_and_model_and_a_nodes_prompt_are_what_the_model_is_sent() {
    let source = format!(
        r#"{HEAD}agent a {{ provider: p, model: "tiny-1", instructions: "Answer in French." }}
workflow w {{
  start: x
  node x: agent a {{ output: string, prompt: "Name the capital." }}
  node done: end ok
  x -> done
}}
"#
    );
    let ran = run(&source, json!({}), |_| output(json!("Paris")));
    let request = &ran.agents[0];
    assert_eq!(request.model.as_deref(), Some("tiny-1"));
    let schema = flow_runtime::prompt::tighten(&request.output_schema);
    let messages = flow_runtime::prompt::messages(request, &schema);
    assert!(messages[0].content.starts_with("Answer in French."), "{}", messages[0].content);
    assert!(messages[1].content.starts_with("Name the capital."), "{}", messages[1].content);
}

#[test]
fn an_agents_context_decides_what_it_sees_and_a_node_may_override_it() {
    let source = format!(
        r#"{HEAD}agent forked {{ provider: p, context: fork }}
agent narrow {{ provider: p, context: filtered, context_fields: ["topic"] }}
workflow w {{
  input: {{ topic: string, secret: string }}
  start: first
  node first: agent narrow {{ output: {{ note: string }} }}
  node second: agent forked {{ output: string }}
  node third: agent forked {{ output: string, context: isolated }}
  node done: end ok
  first -> second -> third -> done
}}
"#
    );
    let reply = |req: &AgentRequest| output(if req.node == "first" { json!({ "note": "n" }) } else { json!("s") });
    let ran = run(&source, json!({ "topic": "tides", "secret": "s3" }), reply);
    let context = |node: &str| ran.agents.iter().find(|r| r.node == node).expect(node).context.clone();
    // filtered: only the listed field, from the run's input.
    assert_eq!(context("first"), json!({ "input": { "topic": "tides" } }));
    // fork: every output so far.
    assert_eq!(context("second")["run"]["first"], json!({ "note": "n" }));
    // the node's `context: isolated` overrides its agent's fork.
    assert!(context("third").get("run").is_none(), "{}", context("third"));
}

#[test]
fn max_turns_bounds_an_attempts_turns_for_the_agent_and_the_node() {
    let source = |node_turns: &str| {
        format!(
            r#"{HEAD}tool echo: builtin {{ description: "Echoes", input: any, output: any, function: "identity" }}
agent a {{ provider: p, tools: [echo], max_turns: 3 }}
workflow w {{
  start: x
  node x: agent a {{ output: string{node_turns} }}
  node done: end ok
  x -> done
}}
"#
        )
    };
    // An agent that only ever calls a tool.
    let looping = |_: &AgentRequest| AgentReply {
        tool_calls: vec![ToolCall { tool: "echo".into(), input: json!({}), id: None }],
        ..output(json!(null))
    };
    let ran = run(&source(""), json!({}), looping);
    assert_eq!(ran.agents.len(), 3, "the agent's max_turns");
    assert_eq!(ran.failed("x").map(|f| f.0), Some("max_turns".to_string()));
    let ran = run(&source(", max_turns: 2"), json!({}), looping);
    assert_eq!(ran.agents.len(), 2, "the node's max_turns overrides the agent's");
}

#[test]
fn max_visits_bounds_how_often_a_node_runs() {
    let source = format!(
        r#"{HEAD}agent a {{ provider: p }}
workflow w {{
  start: x
  node x: agent a {{ output: {{ again: bool }}, max_visits: 2 }}
  node done: end ok
  x -> x when x.again
  x -> done else
}}
"#
    );
    let ran = run(&source, json!({}), |_| output(json!({ "again": true })));
    assert_eq!(ran.agents.len(), 2, "two visits, no third");
    assert_eq!(ran.failed("x").map(|f| f.0), Some("max_visits".to_string()));
}

#[test]
fn a_handoffs_acceptance_checks_refuse_a_payload_that_fails_them() {
    let source = format!(
        r#"{HEAD}agent a {{ provider: p }}
type Out = {{ n: int }}
workflow w {{
  start: x
  node x: agent a {{ output: Out }}
  node y: agent a {{ output: Out }}
  node done: end ok
  x -> y -> done
  handoff x -> y {{ payload: Out, accept: [payload.n > 0] }}
}}
"#
    );
    let accepted = |n: i64| {
        let ran = run(&source, json!({}), move |_| output(json!({ "n": n })));
        ran.events.iter().find_map(|e| match &e.body {
            Body::Handoff { accepted, .. } => Some(*accepted),
            _ => None,
        })
    };
    assert_eq!(accepted(3), Some(true));
    assert_eq!(accepted(-1), Some(false), "`payload.n > 0` fails: the handoff is refused");
}

#[test]
fn a_workflows_success_condition_decides_whether_a_success_end_succeeds() {
    let source = format!(
        r#"{HEAD}agent a {{ provider: p }}
workflow w {{
  start: x
  success: x.ok
  node x: agent a {{ output: {{ ok: bool }} }}
  node done: end ok
  x -> done
}}
"#
    );
    assert_eq!(run(&source, json!({}), |_| output(json!({ "ok": true }))).ended().1, TerminationStatus::Success);
    assert_eq!(run(&source, json!({}), |_| output(json!({ "ok": false }))).ended().1, TerminationStatus::Failure);
}

#[test]
fn a_maps_max_items_refuses_a_longer_list() {
    let source = format!(
        r#"{HEAD}agent a {{ provider: p }}
workflow w {{
  start: list
  node list: agent a {{ output: {{ items: [int] }} }}
  node each: map item {{ over: list.items, max_items: 2 }}
  node item: agent a {{ output: int }}
  node done: end ok
  list -> each -> done
}}
"#
    );
    let items = |n: usize| move |req: &AgentRequest| output(if req.node == "list" { json!({ "items": vec![1; n] }) } else { json!(1) });
    let ran = run(&source, json!({}), items(2));
    assert_eq!(ran.agents.iter().filter(|r| r.node == "item").count(), 2);
    let ran = run(&source, json!({}), items(3));
    assert!(ran.failed("each").is_some(), "a list of 3 is over `max_items: 2`");
    assert_eq!(ran.agents.iter().filter(|r| r.node == "item").count(), 0);
}

#[test]
fn a_human_node_asks_its_principals_its_prompt_with_its_decisions() {
    let source = format!(
        r#"{HEAD}principal editor
workflow w {{
  start: review
  node review: human editor {{ prompt: "Publish this?", decisions: [approve, revise, reject] }}
  node done: end ok
  review -> done
}}
"#
    );
    let ran = run(&source, json!({}), |_| output(json!(null)));
    let asked = &ran.humans[0];
    assert_eq!(asked.principals, ["editor"]);
    assert_eq!(asked.prompt.as_deref(), Some("Publish this?"));
    assert_eq!(asked.decisions, [Decision::Approve, Decision::Revise, Decision::Reject]);
    assert_eq!(ran.ended().0, "ok");
}

#[test]
fn an_agents_routes_send_a_task_to_the_provider_and_model_its_rule_names() {
    let source = format!(
        r#"{HEAD}provider q: scripted {{ max_tokens: 1k }}
agent a {{ provider: p, routes: [{{ when: task.kind == "summary", use: q, model: "small" }}] }}
workflow w {{
  start: x
  node x: agent a {{ output: string, task: {{ kind: "summary" }} }}
  node y: agent a {{ output: string, task: {{ kind: "analysis" }} }}
  node done: end ok
  x -> y -> done
}}
"#
    );
    let ran = run(&source, json!({}), |_| output(json!("s")));
    let sent = |node: &str| ran.agents.iter().find(|r| r.node == node).map(|r| (r.provider.clone(), r.model.clone())).expect(node);
    assert_eq!(sent("x"), ("q".to_string(), Some("small".to_string())), "the summary task matches the rule");
    assert_eq!(sent("y"), ("p".to_string(), None), "no rule matches: the agent's own provider");
}

#[test]
fn a_tasks_risk_and_labels_choose_its_route() {
    let source = format!(
        r#"{HEAD}provider careful: scripted {{ max_tokens: 1k }}
provider counsel: scripted {{ max_tokens: 1k }}
agent a {{ provider: p, routes: [
  {{ when: task.risk == "critical" or task.risk == "high", use: careful, model: "large" }},
  {{ when: "legal" in task.labels, use: counsel }},
] }}
workflow w {{
  start: risky
  node risky: agent a {{ output: string, task: {{ kind: "review", risk: high }} }}
  node legal: agent a {{ output: string, task: {{ kind: "review", risk: low, labels: ["legal", "draft"] }} }}
  node plain: agent a {{ output: string, task: {{ kind: "review", risk: low, labels: ["draft"] }} }}
  node done: end ok
  risky -> legal -> plain -> done
}}
"#
    );
    let ran = run(&source, json!({}), |_| output(json!("s")));
    let sent = |node: &str| ran.agents.iter().find(|r| r.node == node).map(|r| (r.provider.clone(), r.model.clone())).expect(node);
    assert_eq!(sent("risky"), ("careful".to_string(), Some("large".to_string())), "a high risk takes the careful route");
    assert_eq!(sent("legal"), ("counsel".to_string(), None), "a `legal` label takes counsel's route");
    assert_eq!(sent("plain"), ("p".to_string(), None), "neither: the agent's own provider");
}

#[test]
fn a_task_on_private_data_goes_only_to_a_local_provider_or_is_not_sent() {
    let source = format!(
        r#"{HEAD}provider cloud: scripted {{ max_tokens: 1k }}
provider onsite: scripted {{ max_tokens: 1k, local: true }}
agent a {{
  provider: p
  routes: [
    {{ when: task.kind == "summary", use: cloud }},
    {{ when: "private" in task.labels, use: onsite }},
  ]
}}
workflow w {{
  start: open_summary
  node open_summary: agent a {{ output: string, task: {{ kind: "summary" }} }}
  node private_summary: agent a {{ output: string, task: {{ kind: "summary", labels: ["private"] }} }}
  node private_note: agent a {{ output: string, labels: ["private"], task: {{ kind: "note" }} }}
  node done: end ok
  open_summary -> private_summary -> private_note -> done
}}
"#
    );
    let ran = run(&source, json!({}), |_| output(json!("s")));
    let sent = |node: &str| ran.agents.iter().find(|r| r.node == node).map(|r| r.provider.clone());
    assert_eq!(sent("open_summary").as_deref(), Some("cloud"), "the first rule that holds");
    // The first rule holds too, but its provider is not local: skipped.
    assert_eq!(sent("private_summary").as_deref(), Some("onsite"));
    // Labelled private, no local rule holds, the agent's own is remote.
    assert_eq!(sent("private_note"), None, "a turn on private data went to a remote provider");
    let (code, message) = ran.failed("private_note").expect("the node fails");
    assert_eq!(code, "not_local", "{message}");
}

#[test]
fn an_llm_evaluator_asks_its_judge_for_a_verdict_and_fails_closed_when_it_gives_none() {
    let source = |judge_says: &str| {
        format!(
            r#"{HEAD}agent critic {{ provider: p, instructions: "Be strict." }}
agent writer {{ provider: p }}
evaluator fair: llm {{ judge: critic, rubric: "Both sides are quoted.", fail: REQUIRES_DECISION }}
workflow w {{
  start: draft
  escalate_to: lead
  node draft: agent writer {{ output: {{ text: string }} }}
  node done: end ok
  node stopped: end {judge_says} {{ status: failure }}
  draft -> done
  gate review: draft -> done {{
    evaluate: [fair(draft)]
    decided_by: [lead]
    on PASS -> continue
    on REQUIRES_DECISION -> goto(stopped)
    on BLOCK -> terminate(judge_failed)
  }}
}}
principal lead
"#
        )
    };
    let draft = json!({ "text": "One side only." });
    let judged = |judge_says: &str, verdict: Option<Value>| {
        let reply = move |a: &AgentRequest| match a.agent.as_str() {
            "writer" => output(json!({ "text": "One side only." })),
            _ => match &verdict {
                Some(v) => output(v.clone()),
                None => AgentReply { error: Some("the judge's server is down".into()), ..AgentReply::default() },
            },
        };
        run(&source(judge_says), json!({}), reply)
    };
    let gate_result = |ran: &Ran| {
        ran.events
            .iter()
            .find_map(|e| match &e.body {
                Body::GateRecorded { outcome, evaluators, .. } => {
                    Some((outcome.to_string(), evaluators[0].reason.clone(), evaluators[0].error))
                }
                _ => None,
            })
            .expect("the gate was recorded")
    };
    // A pass: the gate passes; the judge was asked what the rubric says,
    // about the draft, with no tools, for a typed verdict.
    let ran = judged("unfair", Some(json!({ "pass": true, "reason": "balanced" })));
    assert_eq!(ran.ended().0, "ok");
    let asked = ran.agents.iter().find(|a| a.agent == "critic").expect("the judge was asked");
    assert_eq!(asked.node, "review");
    assert_eq!(asked.instructions.as_deref(), Some("Be strict."));
    assert!(asked.prompt.as_deref().unwrap_or_default().contains("Both sides are quoted."), "{:?}", asked.prompt);
    assert_eq!(asked.context["input"], draft);
    assert!(asked.tools.is_empty());
    assert_eq!(asked.output_schema["required"], json!(["pass", "reason"]));
    assert_eq!(gate_result(&ran).0, "PASS");
    // A fail: the evaluator's `fail` outcome, with the judge's reason.
    let ran = judged("unfair", Some(json!({ "pass": false, "reason": "only one side is quoted" })));
    assert_eq!(gate_result(&ran), ("REQUIRES_DECISION".into(), Some("only one side is quoted".into()), false));
    assert_eq!(ran.ended().0, "unfair");
    // No verdict (the judge failed, or answered something else): the
    // gate's `on_error` (BLOCK by default), never a PASS.
    let ran = judged("unfair", None);
    let (outcome, reason, error) = gate_result(&ran);
    assert_eq!((outcome.as_str(), error), ("BLOCK", true), "{reason:?}");
    assert!(reason.unwrap_or_default().contains("server is down"));
    let ran = judged("unfair", Some(json!({ "verdict": "fine" })));
    assert_eq!(gate_result(&ran).0, "BLOCK");
    assert_eq!(ran.ended().0, "judge_failed");
}

#[test]
fn a_human_evaluator_asks_its_judges_and_their_verdict_is_the_gates_outcome() {
    let source = format!(
        r#"{HEAD}principal lead
principal outsider
agent writer {{ provider: p }}
evaluator panel: human {{ by: [lead], description: "Is it publishable?", fail: REQUIRES_DECISION }}
workflow w {{
  start: draft
  escalate_to: outsider
  node draft: agent writer {{ output: string }}
  node done: end published
  draft -> done
  gate review: draft -> done {{
    evaluate: [panel(draft)]
    on PASS -> continue
    on REQUIRES_DECISION -> terminate(held)
    on BLOCK -> terminate(blocked)
  }}
}}
"#
    );
    let judged = |decision: Decision| run_with(&source, json!({}), |_| output(json!("A draft.")), 0, move |_| decision);
    let ran = judged(Decision::Approve);
    assert_eq!(ran.humans.len(), 1);
    let asked = &ran.humans[0];
    assert_eq!((asked.subject.as_str(), asked.principals.as_slice()), ("judge.review.0", ["lead".to_string()].as_slice()));
    let prompt = asked.prompt.as_deref().unwrap_or_default();
    assert!(prompt.contains("Is it publishable?") && prompt.contains("A draft."), "{prompt}");
    assert_eq!(ran.ended().0, "published");
    // A reject is the evaluator's `fail` outcome, with the judge's comment.
    let ran = judged(Decision::Reject);
    let recorded = ran
        .events
        .iter()
        .find_map(|e| match &e.body {
            Body::GateRecorded { outcome, evaluators, .. } => Some((outcome.to_string(), evaluators[0].reason.clone())),
            _ => None,
        })
        .expect("the gate was recorded");
    assert_eq!(recorded, ("REQUIRES_DECISION".into(), Some("as decided".into())));
    assert_eq!(ran.ended().0, "held");
    let applied = ran.events.iter().find_map(|e| match &e.body {
        Body::DecisionApplied { subject, action, .. } => Some((subject.clone(), action.to_string())),
        _ => None,
    });
    assert_eq!(applied, Some(("judge.review.0".into(), "REQUIRES_DECISION".into())));
}

#[test]
fn a_confirm_tool_runs_only_after_a_human_confirms_the_call() {
    let source = format!(
        r#"{HEAD}{SHIP}workflow w {{
  start: s
  escalate_to: ops
  node s: tool ship {{ args: {{ n: 1 }} }}
  node done: end ok
  s -> done
}}
"#
    );
    let ran = run(&source, json!({}), |_| output(json!(null)));
    assert!(ran.humans.first().is_some_and(|h| h.subject.starts_with("confirm.ship") && h.principals == ["ops"]), "{:?}", ran.humans);
    let at = |kind: &str| ran.events.iter().position(|e| e.kind() == kind).unwrap_or_else(|| panic!("no {kind}"));
    assert!(at("decision_applied") < at("tool_call_started"), "the call waits for the confirmation");
}

#[test]
fn a_confirm_tool_asks_for_each_call_and_an_earlier_approval_elsewhere_does_not_count() {
    // A human node approves first; then the same confirm tool is called
    // by two tool nodes. Each call is asked for, by its own subject.
    let source = format!(
        r#"{HEAD}{SHIP}workflow w {{
  start: ok
  escalate_to: ops
  node ok: human ops {{ decisions: [approve, reject] }}
  node s1: tool ship {{ args: {{ n: 1 }} }}
  node s2: tool ship {{ args: {{ n: 2 }} }}
  node done: end ok
  ok -> s1 -> s2 -> done
}}
"#
    );
    let ran = run(&source, json!({}), |_| output(json!(null)));
    let subjects: Vec<&str> = ran.humans.iter().map(|h| h.subject.as_str()).collect();
    assert_eq!(subjects.len(), 3, "{subjects:?}");
    assert_eq!(subjects[0], "ok");
    assert!(subjects[1].starts_with("confirm.ship.") && subjects[2].starts_with("confirm.ship."), "{subjects:?}");
    assert_ne!(subjects[1], subjects[2], "each call is confirmed under its own subject");
    let calls = ran.events.iter().filter(|e| e.kind() == "tool_call_started").count();
    assert_eq!(calls, 2);
    // Every call started after the decision that named it.
    let mut confirmed = 0;
    for e in &ran.events {
        match &e.body {
            Body::DecisionApplied { subject, .. } if subject.starts_with("confirm.") => confirmed += 1,
            _ if e.kind() == "tool_call_started" => {
                assert!(confirmed > 0, "a call started before its confirmation");
                confirmed -= 1;
            }
            _ => {}
        }
    }
    assert_eq!(ran.ended().0, "ok");
}

#[test]
fn a_gate_whose_evaluator_errs_takes_its_on_error_outcome() {
    let source = |on_error: &str| {
        format!(
            r#"{HEAD}principal editor
agent a {{ provider: p }}
workflow w {{
  start: x
  escalate_to: editor
  node x: agent a {{ output: {{ items: [int] }} }}
  node done: end ok
  node stopped: end stopped {{ status: failure }}
  x -> done
  gate g: x -> done {{
    evaluate: [predicate(x.items[5] > 0)]
    {on_error}
    on PASS, approve -> continue
    on REQUIRES_DECISION -> decide
    on BLOCK, reject -> goto(stopped)
  }}
}}
"#
        )
    };
    let outcome = |on_error: &str| {
        let ran = run(&source(on_error), json!({}), |_| output(json!({ "items": [1] })));
        let outcome = ran.events.iter().find_map(|e| match &e.body {
            Body::GateRecorded { outcome, .. } => Some(outcome.as_str()),
            _ => None,
        });
        (outcome, ran.ended().0)
    };
    // `items[5]` of a one-item list is an evaluation error: fail closed.
    assert_eq!(outcome(""), (Some("BLOCK"), "stopped".to_string()));
    assert_eq!(outcome("on_error: REQUIRES_DECISION"), (Some("REQUIRES_DECISION"), "ok".to_string()), "asked, and approved");
}

#[test]
fn a_gates_description_is_what_its_deciders_are_asked() {
    let source = |description: &str| {
        format!(
            r#"{HEAD}principal editor
agent a {{ provider: p }}
workflow w {{
  start: x
  escalate_to: editor
  node x: agent a {{ output: {{ score: int }} }}
  node done: end ok
  x -> done
  gate g: x -> done {{
    {description}
    evaluate: [predicate(x.score > 5)]
    on PASS, approve -> continue
    on BLOCK -> decide
    on reject -> terminate(rejected)
  }}
}}
"#
        )
    };
    let asked = |description: &str| {
        let ran = run(&source(description), json!({}), |_| output(json!({ "score": 1 })));
        assert_eq!(ran.ended().0, "ok", "asked and approved");
        ran.humans.first().expect("a decision was asked").prompt.clone()
    };
    assert_eq!(
        asked(r#"description: "Is a score of 5 or less good enough to publish?""#).as_deref(),
        Some("Is a score of 5 or less good enough to publish?")
    );
    assert_eq!(asked(""), None, "no description, no prompt");
}

#[test]
fn a_joins_declared_output_holds_its_merged_result() {
    let source = format!(
        r#"{HEAD}agent a {{ provider: p }}
workflow w {{
  start: split
  node split: parallel [x, y]
  node x: agent a {{ output: any }}
  node y: agent a {{ output: any }}
  node merge: join [x, y] {{ output: {{ results: [{{ n: int }}], conflicts: [any], branches: any }} }}
  node done: end ok
  node broken: end broken {{ status: failure }}
  split -> merge -> done
  on failure -> goto(broken)
}}
"#
    );
    let ran = |y: Value| run(&source, json!({}), move |r| output(if r.node == "x" { json!({ "n": 1 }) } else { y.clone() }));
    let fits = ran(json!({ "n": 2 }));
    assert_eq!(fits.ended().0, "ok");
    assert_eq!(fits.failed("merge"), None);
    let mistyped = ran(json!({ "n": "two" }));
    let (code, message) = mistyped.failed("merge").expect("the merged result does not fit the join's output");
    assert_eq!(code, "invalid_output", "{message}");
    assert!(message.contains("merged output"), "{message}");
    assert_eq!(mistyped.ended().0, "broken");
}

#[test]
fn only_who_a_gates_trigger_names_may_trigger_it() {
    let source = |by: &str| {
        format!(
            r#"{HEAD}principal lead
agent a {{ provider: p }}
workflow w {{
  start: x
  escalate_to: lead
  node x: agent a {{ output: string }}
  node done: end ok
  node refused: end refused {{ status: failure }}
  x -> done
  gate g: x -> done {{
    evaluate: [predicate(true)]
    trigger: {{ by: [{by}], on: ["node_completed"] }}
    on PASS -> continue
    on BLOCK -> goto(refused)
  }}
}}
"#
        )
    };
    let gate = |by: &str| {
        let ran = run(&source(by), json!({}), |_| output(json!("s")));
        let recorded = ran.events.iter().find_map(|e| match &e.body {
            Body::GateRecorded { outcome, reason, .. } => Some((outcome.as_str().to_string(), reason.clone())),
            _ => None,
        });
        (recorded.expect("the gate was recorded"), ran.ended().0)
    };
    assert_eq!(gate("a"), (("PASS".to_string(), None), "ok".to_string()), "the agent that runs `x` may trigger");
    let ((outcome, reason), ended) = gate("lead");
    assert_eq!((outcome.as_str(), ended.as_str()), ("BLOCK", "refused"), "only `lead` may trigger, and `a` ran `x`");
    assert!(reason.is_some_and(|r| r.contains("`a` may not trigger")), "the reason names who tried");
}

#[test]
fn an_mcp_servers_quota_refuses_the_calls_past_it() {
    // Two tools of one server share its quota of two calls per run.
    let source = format!(
        r#"{HEAD}tool lookup: mcp {{ description: "Looks up", input: any, output: any, server: ["python3", "server.py"], remote_name: "lookup", quota: 2, effect: idempotent }}
tool fetch: mcp {{ description: "Fetches", input: any, output: any, server: ["python3", "server.py"], remote_name: "fetch", quota: 2, effect: idempotent }}
workflow w {{
  start: one
  node one: tool lookup {{ args: {{ q: 1 }} }}
  node two: tool fetch {{ args: {{ q: 2 }} }}
  node three: tool lookup {{ args: {{ q: 3 }}, on_failure: skip }}
  node done: end ok
  one -> two -> three -> done
}}
"#
    );
    let ran = run(&source, json!({}), |_| output(json!("s")));
    let started = ran.events.iter().filter(|e| matches!(e.body, Body::ToolCallStarted { .. })).count();
    assert_eq!(started, 2, "the third call is never made");
    let (code, message) = ran.failed("three").expect("the call past the quota fails its node");
    assert_eq!(code, "quota_exhausted", "{message}");
    assert!(message.contains("quota of 2 calls"), "{message}");
    assert_eq!(ran.ended().0, "ok", "and its handler (skip) goes on");
}

#[test]
fn a_handoff_records_its_reason() {
    let source = format!(
        r#"{HEAD}agent a {{ provider: p }}
workflow w {{
  start: x
  node x: agent a {{ output: string }}
  node y: agent a {{ output: string }}
  node done: end ok
  x -> y -> done
  handoff x -> y {{ reason: "needs a second pair of eyes" }}
}}
"#
    );
    let ran = run(&source, json!({}), |_| output(json!("s")));
    let reason = ran.events.iter().find_map(|e| match &e.body {
        Body::Handoff { reason, .. } => Some(reason.clone()),
        _ => None,
    });
    assert_eq!(reason, Some(Some("needs a second pair of eyes".to_string())));
}

#[test]
fn the_artifacts_a_handoff_and_a_delegation_hand_over_reach_the_receivers_context() {
    let source = format!(
        r#"{HEAD}agent a {{ provider: p, can_delegate: true, context: isolated }}
contract study {{ objective: "Study a section", output: string }}
workflow w {{
  start: plan
  node plan: agent a {{ output: {{ sections: [string], title: string }} }}
  node write: agent a {{ output: {{ draft: string }} }}
  node check: agent a {{ output: string }}
  node done: end ok
  plan -> write -> check -> done
  handoff plan -> write {{ payload: {{ sections: [string], title: string }}, artifacts: [plan.sections] }}
  delegate write -> check {{ contract: study, artifacts: [plan.title, write.draft] }}
}}
"#
    );
    let ran = run(&source, json!({}), |a| match a.node.as_str() {
        "plan" => output(json!({ "sections": ["intro", "method"], "title": "On gates" })),
        "write" => output(json!({ "draft": "Gates hold." })),
        _ => output(json!("fine")),
    });
    let context = |node: &str| ran.agents.iter().find(|a| a.node == node).map(|a| a.context.clone()).expect(node);
    assert_eq!(context("write")["artifacts"], json!({ "plan.sections": ["intro", "method"] }));
    assert_eq!(context("check")["artifacts"], json!({ "plan.title": "On gates", "write.draft": "Gates hold." }));
    assert!(context("plan").get("artifacts").is_none());
    // Each transfer records what it handed over, by reference.
    let handed: Vec<usize> = ran
        .events
        .iter()
        .filter_map(|e| match &e.body {
            Body::Handoff { artifacts, .. } | Body::Delegation { artifacts, .. } => Some(artifacts.len()),
            _ => None,
        })
        .collect();
    assert_eq!(handed, [1, 2]);
    let digest = flow_runtime::artifact::artifact_ref(&json!(["intro", "method"])).0.digest;
    let recorded = ran.events.iter().find_map(|e| match &e.body {
        Body::Handoff { artifacts, .. } => artifacts.first().map(|a| a.digest.clone()),
        _ => None,
    });
    assert_eq!(recorded, Some(digest));
}

#[test]
fn a_handoff_sends_the_message_type_it_declares() {
    let source = format!(
        r#"{HEAD}agent a {{ provider: p }}
workflow w {{
  start: x
  node x: agent a {{ output: string }}
  node y: agent a {{ output: string }}
  node z: agent a {{ output: string }}
  node done: end ok
  x -> y -> z -> done
  handoff x -> y {{ reason: "assign" }}
  handoff y -> z {{ message: QUERY }}
}}
"#
    );
    let ran = run(&source, json!({}), |_| output(json!("s")));
    let messages: Vec<(String, &str)> = ran
        .events
        .iter()
        .filter_map(|e| match &e.body {
            Body::Message { message_type, from, .. } => Some((from.clone(), message_type.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(messages, [("x".to_string(), "TASK_ASSIGN"), ("y".to_string(), "QUERY")]);
}

#[test]
fn a_run_whose_input_is_not_of_the_workflows_input_type_does_not_start() {
    let source = format!(
        r#"{HEAD}agent a {{ provider: p }}
workflow w {{
  input: {{ topic: string }}
  start: x
  node x: agent a {{ output: string }}
  node done: end ok
  x -> done
}}
"#
    );
    let ran = run(&source, json!({ "topic": 5 }), |_| output(json!("s")));
    assert_eq!(ran.ended(), ("invalid_input".to_string(), TerminationStatus::Failure));
    assert!(ran.agents.is_empty(), "no node ran");
    assert_eq!(run(&source, json!({ "topic": "tides" }), |_| output(json!("s"))).ended().0, "ok");
}

#[test]
fn an_evaluators_reason_and_fail_outcome_are_what_the_gate_records() {
    let source = format!(
        r#"{HEAD}principal editor
agent a {{ provider: p }}
evaluator long_enough: predicate {{ input: {{ words: int }}, check: input.words >= 100, fail: REQUIRES_DECISION, reason: "too_short" }}
workflow w {{
  start: x
  escalate_to: editor
  node x: agent a {{ output: {{ words: int }} }}
  node done: end ok
  x -> done
  gate g: x -> done {{
    evaluate: [long_enough(x)]
    on PASS, approve -> continue
    on REQUIRES_DECISION -> decide
    on reject -> terminate(rejected)
  }}
}}
"#
    );
    let ran = run(&source, json!({}), |_| output(json!({ "words": 40 })));
    let recorded = ran.events.iter().find_map(|e| match &e.body {
        Body::GateRecorded { outcome, reason, .. } => Some((outcome.as_str(), reason.clone())),
        _ => None,
    });
    assert_eq!(recorded, Some(("REQUIRES_DECISION", Some("too_short".to_string()))));
}

#[test]
fn a_budgets_step_limit_ends_the_run_by_its_on_exhausted() {
    let source = format!(
        r#"{HEAD}agent a {{ provider: p }}
workflow w {{
  start: x
  budget: {{ steps: 1, on_exhausted: fallback(out_of_steps) }}
  node x: agent a {{ output: string }}
  node y: agent a {{ output: string }}
  node done: end ok
  x -> y -> done
}}
"#
    );
    let ran = run(&source, json!({}), |_| output(json!("s")));
    assert_eq!(ran.agents.len(), 1, "one step: the second attempt never starts");
    assert_eq!(ran.ended(), ("out_of_steps".to_string(), TerminationStatus::Partial));
}

#[test]
fn a_node_moves_the_task_from_the_machines_initial_state_on_completion() {
    let source = format!(
        r#"{HEAD}machine Task {{
  initial: PENDING
  terminal: [DONE]
  PENDING -> ACTIVE -> DONE
}}
agent a {{ provider: p }}
workflow w {{
  machine: Task
  start: x
  node x: agent a {{ output: string, state: Task.ACTIVE }}
  node y: agent a {{ output: string, state: Task.DONE }}
  node done: end ok
  x -> y -> done
}}
"#
    );
    let ran = run(&source, json!({}), |_| output(json!("s")));
    let moves: Vec<(String, String, String)> = ran
        .events
        .iter()
        .filter_map(|e| match &e.body {
            Body::StateChanged { node, from, to, .. } => Some((node.clone(), from.clone(), to.clone())),
            _ => None,
        })
        .collect();
    let expected = [("x", "PENDING", "ACTIVE"), ("y", "ACTIVE", "DONE")].map(|(n, f, t)| (n.to_string(), f.to_string(), t.to_string()));
    assert_eq!(moves, expected);
}

#[test]
fn a_schema_evaluator_blocks_what_its_type_does_not_admit() {
    let source = format!(
        r#"{HEAD}agent a {{ provider: p }}
type Pack = {{ items: [string] }}
evaluator packed: schema {{ input: any, schema: Pack }}
workflow w {{
  start: x
  node x: agent a {{ output: any }}
  node done: end ok
  x -> done
  gate g: x -> done {{
    evaluate: [packed(x)]
    on PASS -> continue
    on BLOCK -> terminate(unpacked)
  }}
}}
"#
    );
    assert_eq!(run(&source, json!({}), |_| output(json!({ "items": ["a"] }))).ended().0, "ok");
    assert_eq!(run(&source, json!({}), |_| output(json!({ "items": [1] }))).ended().0, "unpacked");
}

#[test]
fn a_join_with_conflicts_fail_fails_when_branches_disagree() {
    let source = |conflicts: &str| {
        format!(
            r#"{HEAD}agent a {{ provider: p }}
type Verdict = {{ ok: bool }}
workflow w {{
  start: fan
  node fan: parallel [left, right]
  node left: agent a {{ output: Verdict }}
  node right: agent a {{ output: Verdict }}
  node merge: join [left, right] {{ conflicts: {conflicts} }}
  node done: end ok
  merge -> done
}}
"#
        )
    };
    let disagree = |req: &AgentRequest| output(json!({ "ok": req.node == "left" }));
    let ran = run(&source("fail"), json!({}), disagree);
    assert!(ran.failed("merge").is_some(), "left says true, right false: the join fails");
    assert_eq!(run(&source("keep"), json!({}), disagree).ended().0, "ok", "kept, not averaged");
    assert_eq!(run(&source("fail"), json!({}), |_| output(json!({ "ok": true }))).ended().0, "ok", "agreeing branches join");
}

#[test]
fn max_hops_escalates_the_ping_pong_to_a_human_and_an_approval_lets_it_go_on() {
    // `test` keeps asking `answer` (edges both ways): past the workflow's
    // `max_hops: 2` the crossing is not taken and the product manager is
    // asked; the approval lets the run go on, with the count started again.
    let source = format!(
        r#"{HEAD}principal pm
agent a {{ provider: p }}
workflow w {{
  start: test
  max_hops: 2
  node test: agent a {{ output: {{ query: bool }} }}
  node answer: agent a {{ output: {{ text: string }} }}
  node done: end ok
  test -> answer when test.query
  test -> done else
  answer -> test
  on max_hops -> escalate(pm)
}}
"#
    );
    let turns = std::cell::Cell::new(0);
    let ran = run(&source, json!({}), |req| {
        if req.node == "answer" {
            return output(json!({ "text": "yes" }));
        }
        turns.set(turns.get() + 1);
        output(json!({ "query": turns.get() <= 2 }))
    });
    let asked: Vec<&str> = ran.humans.iter().map(|h| h.subject.as_str()).collect();
    assert_eq!(asked, ["escalation.pm"], "asked once, when the third hop was due");
    let crossings: Vec<(String, String)> = ran
        .events
        .iter()
        .filter_map(|e| match &e.body {
            Body::EdgeTaken { from, to, .. } => Some((from.clone(), to.clone())),
            _ => None,
        })
        .collect();
    // test->answer, answer->test; the second query is past the limit (pm
    // approves, the count starts again): test->answer, answer->test; the
    // third turn asks nothing more.
    let pair = crossings.iter().filter(|(f, t)| (f == "test" && t == "answer") || (f == "answer" && t == "test")).count();
    assert_eq!(pair, 4, "{crossings:?}");
    let acted = ran.events.iter().find_map(|e| match &e.body {
        Body::ActionTaken { event, .. } => Some(event.as_str().to_string()),
        _ => None,
    });
    assert_eq!(acted.as_deref(), Some("max_hops"));
    assert_eq!(ran.ended().0, "ok");
}

#[test]
fn a_handoffs_max_hops_bounds_its_pair_both_ways() {
    // `x` and `y` hand back and forth; the handoff allows one crossing of
    // the pair, and nothing handles `max_hops`: the second crossing (y -> x)
    // ends the run.
    let source = format!(
        r#"{HEAD}agent a {{ provider: p }}
workflow w {{
  start: x
  node x: agent a {{ output: {{ again: bool }} }}
  node y: agent a {{ output: {{ again: bool }} }}
  node done: end ok
  x -> y
  y -> x when y.again
  y -> done else
  handoff x -> y {{ max_hops: 1 }}
}}
"#
    );
    let ran = run(&source, json!({}), |_| output(json!({ "again": true })));
    let edges = ran.events.iter().filter(|e| e.kind() == "edge_taken").count();
    assert_eq!(edges, 1, "x -> y once, then y -> x is past the pair's limit");
    assert_eq!(ran.ended(), ("max_hops".to_string(), TerminationStatus::Failure));
}

#[test]
fn a_contracts_context_and_a_delegations_context_fields_decide_what_the_delegate_sees() {
    // The worker's agent forks (it would see the whole run); its contract
    // says isolated, and the delegation lets it see only `files`.
    let source = format!(
        r#"{HEAD}agent lead {{ provider: p, can_delegate: true }}
agent worker {{ provider: p, context: fork }}
contract job {{
  objective: "Patch the files"
  inputs: {{ files: [string], secret: string }}
  output: string
  context: {{mode}}
}}
workflow w {{
  start: plan
  node plan: agent lead {{ output: {{ files: [string] }} }}
  node work: agent worker {{ output: string }}
  node done: end ok
  plan -> work -> done
  delegate plan -> work {{ contract: job, inputs: {{ files: plan.files, secret: "s3" }}{{fields}} }}
}}
"#
    );
    let context = |mode: &str, fields: &str| {
        let source = source.replace("{mode}", mode).replace("{fields}", fields);
        let reply = |req: &AgentRequest| output(if req.node == "plan" { json!({ "files": ["a.rs"] }) } else { json!("ok") });
        let ran = run(&source, json!({}), reply);
        ran.agents.iter().find(|r| r.node == "work").expect("the delegate ran").context.clone()
    };
    // isolated: the inputs only, though the agent forks.
    assert_eq!(context("isolated", ""), json!({ "input": { "files": ["a.rs"], "secret": "s3" } }));
    // fork: the run's outputs too.
    assert_eq!(context("fork", "")["run"]["plan"], json!({ "files": ["a.rs"] }));
    // the delegation's context_fields: only those inputs.
    assert_eq!(context("isolated", r#", context_fields: ["files"]"#), json!({ "input": { "files": ["a.rs"] } }));
}

#[test]
fn a_workflows_deadline_and_a_contracts_deadline_end_work_that_takes_longer() {
    // Each model turn takes 10 minutes on the run's clock.
    const TEN_MINUTES: u64 = 600_000;
    let reply = |_: &AgentRequest| output(json!("s"));
    // The workflow's deadline: the run's duration limit.
    let workflow = format!(
        r#"{HEAD}agent a {{ provider: p }}
workflow w {{
  start: x
  deadline: 15m
  node x: agent a {{ output: string }}
  node y: agent a {{ output: string }}
  node done: end ok
  x -> y -> done
  on budget_exhausted -> fallback(out_of_time)
}}
"#
    );
    let ran = run_timed(&workflow, json!({}), reply, TEN_MINUTES);
    assert_eq!(ran.ended().0, "out_of_time", "the second turn ends past the deadline");
    let quick = run_timed(&workflow, json!({}), reply, 60_000);
    assert_eq!(quick.ended().0, "ok");
    // A contract's deadline: the delegation's duration limit (its scope
    // `delegation.y` runs out), with no budget of its own declared.
    let contract = format!(
        r#"{HEAD}agent lead {{ provider: p, can_delegate: true }}
agent worker {{ provider: p, max_turns: 1 }}
contract job {{ objective: "Work", output: string, deadline: 5m }}
workflow w {{
  start: x
  node x: agent lead {{ output: string }}
  node y: agent worker {{ output: string }}
  node done: end ok
  x -> y -> done
  delegate x -> y {{ contract: job }}
  on budget_exhausted -> fallback(late)
}}
"#
    );
    let ran = run_timed(&contract, json!({}), reply, TEN_MINUTES);
    let exhausted = ran.events.iter().find_map(|e| match &e.body {
        Body::BudgetExhausted { scope, .. } => Some(scope.clone()),
        _ => None,
    });
    assert_eq!(exhausted.as_deref(), Some("delegation.y"));
    assert_eq!(ran.ended().0, "late");
    assert_eq!(run_timed(&contract, json!({}), reply, 60_000).ended().0, "ok");
}

#[test]
fn the_budgets_of_a_node_an_agent_and_a_contract_end_work_that_takes_longer() {
    // Each model turn takes 10 minutes on the run's clock; each budget
    // below allows 15 (`budget` `duration`), so the second turn in its
    // scope runs it out, and a quick run does not.
    const TEN_MINUTES: u64 = 600_000;
    let reply = |_: &AgentRequest| output(json!("s"));
    let exhausted = |ran: &Ran| {
        ran.events.iter().find_map(|e| match &e.body {
            Body::BudgetExhausted { scope, .. } => Some(scope.clone()),
            _ => None,
        })
    };
    let case = |agent: &str, node: &str, contract: &str, delegate: bool| {
        format!(
            r#"{HEAD}budget quarter {{ duration: 15m }}
agent lead {{ provider: p, can_delegate: true{agent} }}
agent worker {{ provider: p, max_turns: 1 }}
contract job {{ objective: "Work", output: string{contract} }}
workflow w {{
  start: x
  node x: agent lead {{ output: string{node} }}
  node y: agent lead {{ output: string }}
  node z: agent worker {{ output: string }}
  node done: end ok
  x -> y -> z -> done
  {}
  on budget_exhausted -> fallback(late)
}}
"#,
            if delegate { "delegate y -> z { contract: job }" } else { "" }
        )
    };
    // A node's budget counts that node's visit: a declared one by name
    // (15 minutes: x's one turn fits), an inline one (5: it does not).
    let node = case("", ", budget: quarter", "", false);
    assert_eq!(exhausted(&run_timed(&node, json!({}), reply, TEN_MINUTES)), None, "one turn of x fits its budget");
    let slow_node = case("", ", budget: { duration: 5m }", "", false);
    let ran = run_timed(&slow_node, json!({}), reply, TEN_MINUTES);
    assert_eq!((exhausted(&ran).as_deref(), ran.ended().0.as_str()), (Some("node.x"), "late"));
    // An agent's budget counts every node it runs: x and y together.
    let agent = case(", budget: quarter", "", "", false);
    let ran = run_timed(&agent, json!({}), reply, TEN_MINUTES);
    assert_eq!((exhausted(&ran).as_deref(), ran.ended().0.as_str()), (Some("agent.lead"), "late"));
    assert_eq!(run_timed(&agent, json!({}), reply, 60_000).ended().0, "ok");
    // A contract's budget counts the delegated work.
    let contract = case("", "", ", budget: { duration: 5m }", true);
    let ran = run_timed(&contract, json!({}), reply, TEN_MINUTES);
    assert_eq!((exhausted(&ran).as_deref(), ran.ended().0.as_str()), (Some("delegation.z"), "late"));
    assert_eq!(run_timed(&contract, json!({}), reply, 60_000).ended().0, "ok");
}

#[test]
fn every_tool_call_of_a_reply_is_made_before_the_next_turn() {
    let source = format!(
        r#"{HEAD}tool echo: builtin {{ description: "Echoes", input: any, output: any, function: "identity" }}
agent a {{ provider: p, tools: [echo], max_turns: 3 }}
workflow w {{
  start: x
  node x: agent a {{ output: string }}
  node done: end ok
  x -> done
}}
"#
    );
    let call = |q: &str, id: Option<&str>| ToolCall { tool: "echo".into(), input: json!({ "q": q }), id: id.map(str::to_string) };
    let ran = run(&source, json!({}), |req| {
        if req.tool_results.is_empty() {
            AgentReply { tool_calls: vec![call("one", Some("p1")), call("two", None)], ..output(json!(null)) }
        } else {
            output(json!("done"))
        }
    });
    let calls = ran.events.iter().filter(|e| e.kind() == "tool_call_started").count();
    assert_eq!(calls, 2, "both calls of the first reply are made");
    assert_eq!(ran.agents.len(), 2, "then one more turn");
    let results = &ran.agents[1].tool_results;
    let ids: Vec<&str> = results.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["p1", "call_2"], "the provider's id, else one by place");
    assert_eq!((results[0]["turn"].clone(), results[1]["input"].clone()), (json!(1), json!({ "q": "two" })));
    assert_eq!(ran.ended().0, "ok");
}

#[test]
fn a_zones_compress_context_and_skip_reasoning_change_what_the_next_turn_sends() {
    let source = format!(
        r#"{HEAD}agent a {{ provider: p }}
budget b {{
  tokens: 10k
  zones: [ {{ zone: yellow, below: 90%, action: [compress_context, skip_reasoning] }} ]
}}
workflow w {{
  start: x
  budget: b
  node x: agent a {{ output: {{ text: string }} }}
  node y: agent a {{ output: string }}
  node done: end ok
  x -> y -> done
}}
"#
    );
    let long = "y".repeat(1_000);
    let ran = run(&source, json!({}), |req| {
        let mut reply = output(if req.node == "x" { json!({ "text": long }) } else { json!("s") });
        reply.usage = TokenUsage { input_tokens: 1_500, output_tokens: 10 };
        reply
    });
    let y = ran.agents.iter().find(|r| r.node == "y").expect("y ran");
    assert_eq!(y.flags, ["compress_context", "skip_reasoning"]);
    let schema = flow_runtime::prompt::tighten(&y.output_schema);
    let sent = flow_runtime::prompt::messages(y, &schema);
    assert!(sent[0].content.starts_with("Answer directly: no reasoning"), "{}", sent[0].content);
    assert!(sent[1].content.contains("[800 more characters]"), "{}", sent[1].content);
}

#[test]
fn a_decision_request_names_the_contacts_of_its_deciders() {
    // A human node asked of a role: its members' contacts (in name order);
    // one without a contact adds none.
    let source = format!(
        "{HEAD}principal zoe {{ contact: \"zoe@example.com\" }}\nprincipal al {{ contact: \"al@example.com\" }}\nprincipal bo\nprincipal leads: role {{ members: [zoe, al, bo] }}\nworkflow w {{\n  start: ok\n  node ok: human leads {{ decisions: [approve, reject] }}\n  node done: end fine\n  ok -> done\n}}\n"
    );
    let ran = run(&source, json!({}), |_| output(json!("x")));
    let contacts = ran.events.iter().find_map(|e| match &e.body {
        Body::DecisionRequested { contacts, .. } => Some(contacts.clone()),
        _ => None,
    });
    assert_eq!(contacts, Some(vec!["al@example.com".to_string(), "zoe@example.com".to_string()]));
    assert_eq!(ran.ended().0, "fine");
}
