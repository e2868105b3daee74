//! `calls` and `facts` (reference §4.5): what a node's tool calls returned
//! and what the runtime measured of its visit are names in expressions,
//! filled in by the control plane — a gate can hold an agent's claim
//! against what its tool returned, and nothing the agent writes reaches
//! either. A computed value or a record that reads them names them as
//! inputs, and trace check makes them again from the trace.

mod common;

use common::{ending, program, run_with, Ran};
use flow_runtime::proto::{AgentReply, AgentRequest, TokenUsage, ToolCall, ToolRequest, ToolResult};
use flow_runtime::tracecheck;
use flow_trace::{Body, Decision};
use serde_json::{json, Value};

const REFUND: &str = r#"
provider p: scripted
tool orders: builtin {
  description: "A customer's orders"
  input: { customer: string }
  output: { orders: [{ id: string, total: float }] }
  function: "identity"
}
agent analyst { provider: p, tools: [orders] }
type Research = { order_total: float }
type Refund = { order_id: string, amount: float }
workflow refund {
  start: research
  node research: agent analyst { output: Research }
  node resolve: agent analyst { output: Refund }
  node audit: compute {
    output: { looked_up: int, tokens: int, calls: int, digest: string? }
    value: {
      looked_up: len(calls.research.orders),
      tokens: facts.research.tokens,
      calls: facts.research.tool_calls,
      digest: facts.research.digest,
    }
    record audited { looked_up: audit.looked_up, visit: facts.research.visit }
  }
  node paid: end paid
  node declined: end declined { status: failure }
  research -> resolve -> audit -> paid
  // What the agent says (`research.order_total`) against what the tool
  // returned (`calls.research.orders`).
  gate within_order: audit -> paid {
    evaluate: [
      predicate(any(c in calls.research.orders: any(o in c.output.orders: o.id == resolve.order_id and resolve.amount <= o.total))),
    ]
    on PASS -> continue
    on BLOCK -> goto(declined)
  }
}
"#;

/// The refund run: the analyst looks the orders up (the tool returns one
/// order of 40.0), then claims an order total of `claimed`; the refund
/// asked is `amount`.
fn refund(claimed: f64, amount: f64) -> Ran {
    let agent = move |a: &AgentRequest| {
        let usage = TokenUsage { input_tokens: 10, output_tokens: 5 };
        let output = match (a.node.as_str(), a.turn) {
            ("research", 1) => {
                let call = ToolCall { tool: "orders".into(), input: json!({ "customer": "c1" }), id: None };
                return AgentReply { tool_calls: vec![call], usage, ..AgentReply::default() };
            }
            ("research", _) => json!({ "order_total": claimed }),
            _ => json!({ "order_id": "o1", "amount": amount }),
        };
        AgentReply { output: Some(output), usage, ..AgentReply::default() }
    };
    let tool = |t: &ToolRequest| {
        assert_eq!(t.tool, "orders");
        ToolResult { ok: true, output: Some(json!({ "orders": [{ "id": "o1", "total": 40.0 }] })), ..ToolResult::default() }
    };
    run_with(program(REFUND), json!({}), agent, tool, |_| Decision::Approve)
}

#[test]
fn a_gate_holds_the_agents_claim_against_what_its_tool_returned() {
    // Within what the tool returned: paid.
    assert_eq!(ending(&refund(40.0, 30.0).events), "paid");
    // The agent claims 400 for an order the tool says was 40: a rule over
    // its claim would pass 300; the rule over the tool's result blocks.
    let ran = refund(400.0, 300.0);
    assert_eq!(ran.output_of("research")["order_total"], 400.0);
    assert_eq!(ending(&ran.events), "declined");
}

#[test]
fn facts_are_what_the_runtime_measured_and_computed_values_read_them_as_inputs() {
    let ran = refund(40.0, 30.0);
    let audit = ran.output_of("audit");
    assert_eq!(audit["looked_up"], 1);
    // Two turns of 15 tokens; one tool call.
    assert_eq!(audit["tokens"], 30);
    assert_eq!(audit["calls"], 1);
    let research = ran.events.iter().find_map(|e| match &e.body {
        Body::NodeCompleted { node, output, .. } if node == "research" => output.clone(),
        _ => None,
    });
    assert_eq!(audit["digest"], json!(research.unwrap().digest));
    // The computed value and the record name `calls` and `facts` as inputs.
    let inputs = ran.events.iter().find_map(|e| match &e.body {
        Body::Computed { node, inputs, .. } if node == "audit" => Some(inputs.keys().cloned().collect::<Vec<_>>()),
        _ => None,
    });
    assert_eq!(inputs, Some(vec!["calls".to_string(), "facts".to_string()]));
    let recorded = ran.events.iter().find_map(|e| match &e.body {
        Body::Recorded { values, .. } => Some(Value::Object(values.clone())),
        _ => None,
    });
    assert_eq!(recorded, Some(json!({ "looked_up": 1, "visit": 1 })));
}

#[test]
fn trace_check_makes_calls_and_facts_again_and_catches_a_forged_input() {
    let ran = refund(40.0, 30.0);
    // `run_with` held the run to trace check with its artifacts; without
    // them `calls` and `facts` are not made again, and not held.
    let report = tracecheck::check(&program(REFUND), &ran.events, &Default::default());
    assert!(report.conformant, "{:#?}", report.deviations);
    // A `calls` input that is not what the tool returned.
    let mut store = ran.store;
    let forged = flow_runtime::journal::ArtifactStore::put(&mut store, &json!({ "research": { "orders": [] } })).unwrap();
    let mut events = ran.events;
    for e in &mut events {
        if let Body::Computed { inputs, .. } = &mut e.body {
            inputs.insert("calls".into(), Some(forged.clone()));
        }
    }
    let options = tracecheck::Options { artifacts: Some(&store), ..Default::default() };
    let report = tracecheck::check(&program(REFUND), &events, &options);
    let found: Vec<&str> = report.deviations.iter().filter(|d| d.code == tracecheck::codes::COMPUTED).map(|d| d.message.as_str()).collect();
    assert!(found.iter().any(|m| m.contains("other inputs than it read")), "{found:?}");
}
