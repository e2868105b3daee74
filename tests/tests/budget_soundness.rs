//! "Proved means true at run time", for budgets: what `flowc verify`
//! bounds statically (`flow_verify::verify_with_budgets`) covers what a run
//! meters, scope by scope and measure by measure.
//!
//! * A property: generated workflows — agents and tools, retries, repair,
//!   tool calls, loops, fan-outs, a rework cycle, routes, agent caps and
//!   node budgets — run in process with replies whose reported usage stays
//!   within the declared per-turn ceilings; the run's metered totals per
//!   scope (from its `attempt_started` and `budget_settled` events) never
//!   exceed the static worst case of that scope.
//! * The regression: a budget that "fit" (output tokens only counted) and
//!   that one turn with a large input exhausted.

use flow_check::ceilings::TurnCeiling;
use flow_check::ir::Program;
use flow_check::{check_program, NoFiles};
use flow_diagnostics::SourceDb;
use flow_runtime::clock::FakeClock;
use flow_runtime::engine::{Engine, RunConfig, RunStatus};
use flow_runtime::proto::{AgentReply, AgentRequest, Request, Response, TokenUsage, ToolCall, ToolResult};
use flow_trace::{Body, Event, Usage};
use flow_verify::{BudgetBound, BudgetStatus};
use proptest::prelude::*;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

fn compile(source: &str) -> Option<(Program, Vec<flow_diagnostics::Diagnostic>, Vec<BudgetBound>)> {
    let mut db = SourceDb::new();
    let root = db.add("generated.flow", source.to_string());
    let checked = check_program(&mut db, root, &NoFiles);
    if checked.has_errors() {
        let rendered = flow_diagnostics::render::render_human(&db, &checked.diagnostics);
        panic!("the generated program does not check:\n{rendered}\n{source}");
    }
    let (diagnostics, bounds) = flow_verify::verify_with_budgets(&checked.program);
    Some((checked.program, diagnostics, bounds))
}

fn engine(program: &Program) -> Engine {
    let cfg = RunConfig {
        run_id: "run".into(),
        execution_id: "exec-1".into(),
        plan_digest: "sha256:test".into(),
        plan_content_digest: None,
        clock: Arc::new(FakeClock::new(FakeClock::DEFAULT_START)),
        owner: "test".into(),
        lease_ttl_ms: 30_000,
    };
    Engine::new(Arc::new(program.clone()), None, cfg).expect("engine")
}

/// Runs to the end, answering every turn with `reply`; returns the events
/// and the agent requests sent.
fn run(engine: &mut Engine, input: Value, mut reply: impl FnMut(&AgentRequest) -> AgentReply) -> (Vec<Event>, Vec<AgentRequest>) {
    engine.start(input);
    let mut sent = Vec::new();
    let mut events = Vec::new();
    for _ in 0..100_000 {
        events.extend(engine.take_events());
        let commands = engine.take_commands();
        if commands.is_empty() {
            break;
        }
        for command in commands {
            if !matches!(engine.status(), RunStatus::Running) {
                break;
            }
            let response = match &command.request {
                Request::Agent(a) => {
                    sent.push((**a).clone());
                    Response::Agent(reply(a))
                }
                Request::Tool(_) => Response::Tool(ToolResult { ok: true, output: Some(json!({})), ..ToolResult::default() }),
                other => panic!("unexpected request {other:?}"),
            };
            // A run that ended has no outstanding commands left to answer.
            if let Err(e) = engine.on_response(&command.key, response) {
                assert!(!matches!(engine.status(), RunStatus::Running), "{e}");
            }
        }
    }
    events.extend(engine.take_events());
    (events, sent)
}

/// What a run metered per budget scope: totals for the run and agent
/// scopes, the largest visit for node scopes, the largest delegation for
/// delegation scopes (each delegation starts its scope afresh).
#[derive(Debug, Default)]
struct Metered {
    totals: HashMap<(String, &'static str), f64>,
}

impl Metered {
    fn of(program: &Program, events: &[Event]) -> Metered {
        let workflow = &program.workflows[0];
        let mut per_visit: HashMap<(String, &'static str), f64> = HashMap::new();
        let mut totals: HashMap<(String, &'static str), f64> = HashMap::new();
        let mut delegations: HashMap<String, usize> = HashMap::new();
        let mut charge = |scope: &str, visit: &str, measure: &'static str, amount: f64, delegations: &HashMap<String, usize>| {
            if let Some(node) = scope.strip_prefix("node.") {
                *per_visit.entry((format!("node.{node}#{visit}"), measure)).or_default() += amount;
            } else if scope.starts_with("delegation.") {
                let episode = delegations.get(scope).copied().unwrap_or(0);
                *per_visit.entry((format!("{scope}#{episode}"), measure)).or_default() += amount;
            } else {
                *totals.entry((scope.to_string(), measure)).or_default() += amount;
            }
        };
        // `node#visit.attempt` → the visit.
        let visit_of =
            |attempt: &str| attempt.rsplit_once('#').and_then(|(_, v)| v.split_once('.')).map(|(v, _)| v.to_string()).unwrap_or_default();
        for event in events {
            match &event.body {
                Body::Delegation { to, budget, .. } if budget != &Usage::default() => {
                    *delegations.entry(format!("delegation.{to}")).or_default() += 1;
                }
                // One step per attempt, charged to the scopes that exist.
                Body::AttemptStarted { node, attempt_id, .. } => {
                    let n = &workflow.nodes[node];
                    let visit = visit_of(attempt_id);
                    if workflow.props.contains_key("budget") {
                        charge("run", &visit, "steps", 1.0, &delegations);
                    }
                    if n.kind() == flow_check::ir::NodeKind::Agent
                        && program.decls.get(&n.target[0]).is_some_and(|a| a.props.contains_key("budget"))
                    {
                        charge(&format!("agent.{}", n.target[0]), &visit, "steps", 1.0, &delegations);
                    }
                    if n.common.budget.is_some() {
                        charge(&format!("node.{node}"), &visit, "steps", 1.0, &delegations);
                    }
                    let delegation = format!("delegation.{node}");
                    if delegations.contains_key(&delegation) {
                        charge(&delegation, &visit, "steps", 1.0, &delegations);
                    }
                }
                Body::BudgetSettled { scope, attempt_id, used, .. } => {
                    let visit = visit_of(attempt_id);
                    for name in scope.split(',') {
                        charge(name, &visit, "tokens", used.tokens as f64, &delegations);
                        charge(name, &visit, "tool_calls", used.tool_calls as f64, &delegations);
                        charge(name, &visit, "cost", used.cost, &delegations);
                    }
                }
                _ => {}
            }
        }
        for ((key, measure), amount) in per_visit {
            let scope = key.split_once('#').map(|(n, _)| n).unwrap_or(&key);
            let slot = totals.entry((scope.to_string(), measure)).or_default();
            *slot = slot.max(amount);
        }
        Metered { totals }
    }

    fn get(&self, scope: &str, measure: &str) -> f64 {
        self.totals.iter().find(|((s, m), _)| s == scope && *m == measure).map(|(_, v)| *v).unwrap_or(0.0)
    }
}

/// A tiny deterministic PRNG for the replies (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            (self.next() >> 11) % n
        }
    }
}

// ------------------------------------------------------------ generation

#[derive(Debug, Clone)]
struct ProviderSpec {
    max_tokens: Option<u32>,
    max_input: Option<u32>,
    price_input: u8,
    price_output: u8,
}

#[derive(Debug, Clone)]
struct AgentSpec {
    provider: usize,
    turns: Option<u8>,
    tools: bool,
    input: Option<u32>,
    /// An own budget: tokens and tool calls caps.
    cap: Option<(u32, u8)>,
    /// Routes every turn to the other provider.
    route: bool,
}

#[derive(Debug, Clone)]
enum Work {
    Agent { agent: usize, attempts: u8, turns: Option<u8>, repair: u8, budget: Option<u32> },
    Tool { attempts: u8 },
    Loop { agent: usize, rounds: u8 },
    Parallel { a: usize, b: usize },
}

#[derive(Debug, Clone)]
struct Spec {
    providers: Vec<ProviderSpec>,
    agents: Vec<AgentSpec>,
    work: Vec<Work>,
    /// A rework edge from the last agent node back to the first, with
    /// `max_visits` on the first.
    rework: Option<u8>,
    /// Run limits: steps, tokens, tool calls, cost (cents).
    limits: (u32, u32, u32, u32),
    /// A zone that switches every agent to the second provider.
    switch: bool,
    /// A delegation from the first work node to the second, under a
    /// contract with this budget (tokens, tool calls, steps).
    delegate: Option<(u32, u8, u8)>,
    /// A workflow handler: any failure goes to a recovery agent node.
    recover: bool,
}

fn provider_spec() -> impl Strategy<Value = ProviderSpec> {
    let input = prop_oneof![4 => 2_000u32..12_000, 1 => 64u32..2_000];
    (prop::option::of(64u32..4000), prop::option::weighted(0.8, input), 0u8..4, 0u8..8)
        .prop_map(|(max_tokens, max_input, price_input, price_output)| ProviderSpec { max_tokens, max_input, price_input, price_output })
}

fn agent_spec() -> impl Strategy<Value = AgentSpec> {
    (
        0usize..2,
        prop::option::of(1u8..5),
        any::<bool>(),
        prop::option::weighted(0.3, 200u32..5000),
        prop::option::weighted(0.3, (500u32..30_000, 0u8..6)),
        prop::bool::weighted(0.2),
    )
        .prop_map(|(provider, turns, tools, input, cap, route)| AgentSpec { provider, turns, tools, input, cap, route })
}

fn work(agents: usize) -> impl Strategy<Value = Work> {
    prop_oneof![
        4 => (0..agents, 1u8..4, prop::option::of(1u8..4), 0u8..3, prop::option::weighted(0.3, 500u32..20_000))
            .prop_map(|(agent, attempts, turns, repair, budget)| Work::Agent { agent, attempts, turns, repair, budget }),
        1 => (1u8..3).prop_map(|attempts| Work::Tool { attempts }),
        1 => (0..agents, 1u8..4).prop_map(|(agent, rounds)| Work::Loop { agent, rounds }),
        1 => (0..agents, 0..agents).prop_map(|(a, b)| Work::Parallel { a, b }),
    ]
}

fn spec() -> impl Strategy<Value = Spec> {
    (prop::collection::vec(provider_spec(), 2), prop::collection::vec(agent_spec(), 1..4)).prop_flat_map(|(providers, agents)| {
        let n = agents.len();
        (
            Just(providers),
            Just(agents),
            prop::collection::vec(work(n), 1..6),
            prop::option::weighted(0.4, 1u8..4),
            (
                5u32..200,
                prop_oneof![1 => 2_000u32..40_000, 3 => 40_000u32..2_000_000],
                1u32..60,
                prop_oneof![1 => 1u32..100, 3 => 100u32..5_000],
            ),
            prop::bool::weighted(0.3),
            prop::option::weighted(0.4, (500u32..40_000, 0u8..6, 1u8..6)),
            prop::bool::weighted(0.3),
        )
            .prop_map(|(providers, agents, work, rework, limits, switch, delegate, recover)| Spec {
                providers,
                agents,
                work,
                rework,
                limits,
                switch,
                delegate,
                recover,
            })
    })
}

impl Spec {
    /// Every agent's turns need an input ceiling (the property is about
    /// proven bounds): an agent whose providers may lack one declares its own.
    fn agent_input(&self, a: &AgentSpec) -> Option<u32> {
        a.input.or_else(|| self.providers.iter().any(|p| p.max_input.is_none()).then_some(3000))
    }

    fn source(&self) -> String {
        let mut s = String::new();
        s.push_str("tool noop: builtin { description: \"Does nothing\", input: any, output: any, function: \"noop\" }\n");
        for (i, p) in self.providers.iter().enumerate() {
            let mut props = Vec::new();
            if let Some(m) = p.max_tokens {
                props.push(format!("max_tokens: {m}"));
            }
            if let Some(m) = p.max_input {
                props.push(format!("max_input_tokens: {m}"));
            }
            props.push(format!("price_input: ${}.00, price_output: ${}.00", p.price_input, p.price_output));
            let _ = writeln!(s, "provider p{i}: scripted {{ {} }}", props.join(", "));
        }
        for (i, a) in self.agents.iter().enumerate() {
            let mut props = vec![format!("provider: p{}", a.provider), "can_delegate: true".to_string()];
            if let Some(t) = a.turns {
                props.push(format!("max_turns: {t}"));
            }
            if a.tools {
                props.push("tools: [noop]".into());
            }
            if let Some(m) = self.agent_input(a) {
                props.push(format!("max_input_tokens: {m}"));
            }
            if let Some((tokens, calls)) = a.cap {
                props.push(format!("budget: {{ tokens: {tokens}, tool_calls: {calls}, steps: 6 }}"));
            }
            if a.route {
                props.push(format!("routes: [{{ when: true, use: p{} }}]", 1 - a.provider));
            }
            let _ = writeln!(s, "agent a{i} {{ {} }}", props.join(", "));
        }
        if let Some((tokens, calls, steps)) = self.delegate {
            let _ = writeln!(
                s,
                "contract c {{ objective: \"sub-task\", output: {{ ok: bool }}, tools: [noop], budget: {{ tokens: {tokens}, tool_calls: {calls}, steps: {steps} }} }}"
            );
        }
        let (steps, tokens, calls, cents) = self.limits;
        let zones = if self.switch { ", zones: [{ zone: red, below: 60%, action: switch_model(p1) }]" } else { "" };
        let _ = writeln!(
            s,
            "budget run_budget {{ steps: {steps}, tokens: {tokens}, tool_calls: {calls}, cost: ${}.{:02}{zones} }}",
            cents / 100,
            cents % 100
        );
        s.push_str("workflow w {\n  input: { text: string }\n  start: n0\n  budget: run_budget\n");
        let out = "output: { ok: bool }";
        let mut entries: Vec<String> = Vec::new();
        let mut exits: Vec<String> = Vec::new();
        for (i, w) in self.work.iter().enumerate() {
            let name = format!("n{i}");
            match w {
                Work::Agent { agent, attempts, turns, repair, budget } => {
                    let mut props = vec![out.to_string(), format!("retry: {{ attempts: {attempts} }}"), format!("repair: {repair}")];
                    if let Some(t) = turns {
                        props.push(format!("max_turns: {t}"));
                    }
                    if let Some(b) = budget {
                        props.push(format!("budget: {{ tokens: {b}, tool_calls: 3 }}"));
                    }
                    if i == 0 {
                        if let Some(v) = self.rework {
                            props.push(format!("max_visits: {v}"));
                        }
                    }
                    let _ = writeln!(s, "  node {name}: agent a{agent} {{ {} }}", props.join(", "));
                    entries.push(name.clone());
                    exits.push(name);
                }
                Work::Tool { attempts } => {
                    let visits = if i == 0 { self.rework.map(|v| format!(", max_visits: {v}")).unwrap_or_default() } else { String::new() };
                    let _ = writeln!(s, "  node {name}: tool noop {{ retry: {{ attempts: {attempts} }}{visits} }}");
                    entries.push(name.clone());
                    exits.push(name);
                }
                Work::Loop { agent, rounds } => {
                    let visits = if i == 0 { self.rework.map(|v| format!(", max_visits: {v}")).unwrap_or_default() } else { String::new() };
                    let _ = writeln!(s, "  node {name}: loop [{name}_body] {{ max_rounds: {rounds}{visits} }}");
                    let _ = writeln!(s, "  node {name}_body: agent a{agent} {{ {out} }}");
                    entries.push(name.clone());
                    exits.push(name);
                }
                Work::Parallel { a, b } => {
                    let visits = if i == 0 { self.rework.map(|v| format!(", max_visits: {v}")).unwrap_or_default() } else { String::new() };
                    let _ = writeln!(
                        s,
                        "  node {name}: parallel [{name}_a, {name}_b]{}",
                        if visits.is_empty() { String::new() } else { format!(" {{ {} }}", &visits[2..]) }
                    );
                    let _ = writeln!(s, "  node {name}_a: agent a{a} {{ {out} }}");
                    let _ = writeln!(s, "  node {name}_b: agent a{b} {{ {out} }}");
                    let _ = writeln!(s, "  node {name}_j: join [{name}_a, {name}_b]");
                    entries.push(name.clone());
                    exits.push(format!("{name}_j"));
                }
            }
        }
        s.push_str("  node done: end ok\n");
        if self.recover {
            s.push_str("  node recover: agent a0 { output: { ok: bool }, on failure -> goto(gave_up) }\n");
            s.push_str("  node gave_up: end gave_up { status: failure }\n");
            s.push_str("  recover -> done\n");
            s.push_str("  on failure -> goto(recover)\n");
        }
        if let (Some(_), Some(Work::Agent { .. }), Some(Work::Agent { .. })) = (self.delegate, self.work.first(), self.work.get(1)) {
            s.push_str("  delegate n0 -> n1 { contract: c }\n");
        }
        for (i, (from, w)) in exits.iter().zip(&self.work).enumerate() {
            let next = entries.get(i + 1).cloned().unwrap_or_else(|| "done".into());
            let last = i + 1 == self.work.len();
            // The rework edge: from the last node, when it is an agent, back to the first.
            if last && self.rework.is_some() && matches!(w, Work::Agent { .. }) {
                let _ = writeln!(s, "  {from} -> n0 when {from}.ok == false");
                let _ = writeln!(s, "  {from} -> {next} else");
            } else {
                let _ = writeln!(s, "  {from} -> {next}");
            }
        }
        s.push_str("}\n");
        s
    }
}

/// The replies: tool calls, invalid outputs, provider errors and outputs,
/// each reporting usage within the turn's ceilings (and the cost the
/// scripted provider would compute from it).
fn replies(program: &Program, seed: u64) -> impl FnMut(&AgentRequest) -> AgentReply + '_ {
    let mut rng = Rng(seed | 1);
    move |request| {
        let agent = &program.decls[&request.agent];
        let provider = program.decls.get(&request.provider);
        let ceiling = TurnCeiling::of(agent, provider);
        // Often at the ceilings, where a bound that does not hold breaks.
        let mut upto = |max: u64| if rng.below(2) == 0 { max } else { rng.below(max + 1) };
        let input = upto(ceiling.max_input_tokens.expect("every turn has an input ceiling"));
        let output = upto(ceiling.max_tokens);
        let usage = TokenUsage { input_tokens: input, output_tokens: output };
        let cost = (ceiling.price_input * input as f64 + ceiling.price_output * output as f64) / 1e6;
        let base = AgentReply { usage, cost, ..AgentReply::default() };
        match rng.below(20) {
            0..=7 if !request.tools.is_empty() => {
                AgentReply { tool_calls: vec![ToolCall { tool: "noop".into(), input: json!({}), id: None }], ..base }
            }
            8 | 9 => AgentReply { output: Some(json!("not a record")), ..base },
            10 => AgentReply { error: Some("HTTP 500".into()), ..base },
            _ => AgentReply { output: Some(json!({ "ok": rng.below(3) != 0 })), ..base },
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn no_run_meters_more_than_its_proven_bound(spec in spec(), seed in any::<u64>(), text_len in 0usize..1500) {
        let source = spec.source();
        let Some((program, _, bounds)) = compile(&source) else { return Ok(()) };
        let mut e = engine(&program);
        let (events, _) = run(&mut e, json!({ "text": "x".repeat(text_len) }), replies(&program, seed));
        prop_assert_eq!(e.ceiling_breaches(), 0, "the replies stay within the ceilings");
        prop_assert!(!matches!(e.status(), RunStatus::Running), "the run ends");
        let metered = Metered::of(&program, &events);
        let mut checked = 0;
        for b in &bounds {
            prop_assert!(b.status != BudgetStatus::Conditional, "every turn has an input ceiling: {:?}", b);
            let Some(worst) = b.worst_case else { continue };
            if b.measure == "duration" {
                continue;
            }
            let used = metered.get(&b.scope, b.measure);
            prop_assert!(
                used <= worst + 1e-6,
                "scope {} metered {} {} in a run, over its proven worst case {}\n{}\nbounds: {:#?}",
                b.scope, used, b.measure, worst, source, bounds
            );
            checked += 1;
        }
        prop_assert!(checked > 0, "the run budget's bounds are checked");
    }
}

// ------------------------------------------------------------ regression

/// Four one-turn nodes under a 16k budget. Output tokens alone fit
/// (4 × 2k); before input tokens were bounded, the verifier counted
/// `max_tokens × max_turns × (1 + repair)` = 4 × 4,000 = 16,000 and said
/// the budget fit — and one turn that sent a large input used 15,600.
const SIXTEEN_K: &str = r#"
provider p: scripted { max_tokens: 2k }
agent a { provider: p, max_turns: 1 }
budget b { tokens: 16k }
workflow w {
  input: { text: string }
  start: n1
  budget: b
  node n1: agent a { output: string }
  node n2: agent a { output: string }
  node n3: agent a { output: string }
  node n4: agent a { output: string }
  node done: end ok
  n1 -> n2 -> n3 -> n4 -> done
}
"#;

fn tokens_bound(bounds: &[BudgetBound]) -> &BudgetBound {
    bounds.iter().find(|b| b.scope == "run" && b.measure == "tokens").expect("the run's token bound")
}

#[test]
fn without_an_input_ceiling_the_budget_is_not_proven_to_fit() {
    let (program, diagnostics, bounds) = compile(SIXTEEN_K).unwrap();
    let bound = tokens_bound(&bounds);
    assert_eq!(bound.status, BudgetStatus::Conditional, "{bound:?}");
    assert_eq!(bound.worst_case, Some(8_000.0), "the output tokens");
    assert_eq!(bound.open_turns, 4.0, "and the input of four turns");
    assert!(diagnostics.iter().any(|d| d.code.0 == "W0802"), "{diagnostics:#?}");
    // The run of the report: one turn sends a large input and uses 15,600
    // tokens; the provider's report is over what its request can hold, so
    // the control plane records it, and the budget runs out.
    let mut e = engine(&program);
    let (events, sent) = run(&mut e, json!({ "text": "short" }), |_| AgentReply {
        output: Some(json!("ok")),
        usage: TokenUsage { input_tokens: 15_000, output_tokens: 600 },
        ..AgentReply::default()
    });
    assert_eq!(sent.len(), 1);
    assert_eq!(e.ceiling_breaches(), 1);
    assert!(events.iter().any(|ev| matches!(&ev.body, Body::Warning { message, .. } if message.contains("15000 input tokens"))));
    assert!(matches!(e.status(), RunStatus::Terminated { budget_exhausted: true, .. }), "{:?}", e.status());
}

#[test]
fn with_an_input_ceiling_the_budget_fits_and_an_oversized_turn_is_never_sent() {
    let source = SIXTEEN_K.replace("max_tokens: 2k }", "max_tokens: 2k, max_input_tokens: 2k }");
    let (program, diagnostics, bounds) = compile(&source).unwrap();
    let bound = tokens_bound(&bounds);
    assert_eq!((bound.status, bound.worst_case), (BudgetStatus::Fits, Some(16_000.0)), "{bound:?}");
    assert!(diagnostics.is_empty(), "{diagnostics:#?}");
    // A large input: the first turn's request may hold more than 2k tokens,
    // so it is refused before it is sent, and the budget is untouched.
    let mut e = engine(&program);
    let (events, sent) = run(&mut e, json!({ "text": "word ".repeat(3_000) }), |_| unreachable!("no turn is sent"));
    assert!(sent.is_empty());
    assert!(events
        .iter()
        .any(|ev| matches!(&ev.body, Body::AttemptFailed { error_code, .. } if *error_code == flow_trace::ErrorCode::InputTooLarge)));
    assert!(!events.iter().any(|ev| matches!(ev.body, Body::BudgetExhausted { .. })));
    assert!(matches!(e.status(), RunStatus::Terminated { budget_exhausted: false, .. }), "{:?}", e.status());
    // A small input runs to the end within the proven 16,000.
    let mut e = engine(&program);
    let (events, sent) = run(&mut e, json!({ "text": "short" }), |_| AgentReply {
        output: Some(json!("ok")),
        usage: TokenUsage { input_tokens: 2_000, output_tokens: 2_000 },
        ..AgentReply::default()
    });
    assert_eq!(sent.len(), 4);
    assert!(matches!(e.status(), RunStatus::Terminated { status, .. } if status == "success"), "{:?}", e.status());
    assert!(Metered::of(&program, &events).get("run", "tokens") <= 16_000.0);
}
