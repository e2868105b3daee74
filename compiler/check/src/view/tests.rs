//! The views read what the source declares, typed, with the declared
//! defaults filled in at lowering.

use super::*;
use crate::ir::Program;
use crate::{check_program, NoFiles};
use flow_diagnostics::SourceDb;
use flow_trace::{ContextMode, Outcome, TerminationStatus};

const SOURCE: &str = r#"
type Draft = { text: string, score: int }
principal lead: human {}
provider local: scripted { max_tokens: 1k, max_input_tokens: 2k, price_input: $1, script: "s.yaml" }
budget run_budget {
  steps: 40
  tokens: 20k
  cost: $2
  duration: 10m
  reserve: { verification: 10% }
  zones: [{ zone: yellow, below: 50%, action: warn }, { zone: fuse, below: 5%, action: [compress_context, return_partial] }]
  on_exhausted: fallback(out_of_budget)
}
tool search: builtin {
  description: "search"
  input: { q: string }
  output: { hits: [string] }
  risk: high
  effect: idempotent
  sink: public
  rate_limit: 10 / 1m
  allowed_agents: [writer]
  audit: { level: full, visible_to: [lead] }
}
evaluator long_enough: predicate { input: Draft, check: input.score > 2, fail: REQUIRES_DECISION, reason: "short" }
agent writer {
  provider: local
  tools: [search]
  context: fork
  max_turns: 3
  budget: { tokens: 5k }
}
workflow w {
  start: write
  budget: run_budget
  escalate_to: lead
  deadline: 1h
  node write: agent writer { output: Draft, retry: { attempts: 3, backoff: 1s }, on_failure: skip, max_visits: 2 }
  node review: human lead { prompt: "ok?", decisions: [approve, reject] }
  node done: end ok
  node stop: end halted { status: failure }
  gate check: write -> review { evaluate: [long_enough(write)], replan_scope: [write] }
  handoff write -> review { reason: "ready" }
  review -> done
  review -> stop
  policy ends: eventually terminated(ok) { response: warn }
}
"#;

fn program() -> Program {
    let mut db = SourceDb::new();
    let root = db.add("w.flow", SOURCE.to_string());
    let checked = check_program(&mut db, root, &NoFiles);
    let errors: Vec<_> = checked.diagnostics.iter().filter(|d| d.is_error()).map(|d| d.message.clone()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    checked.program
}

#[test]
fn budgets_read_limits_reserves_zones_and_fallback() {
    let p = program();
    let wf = &p.workflows["w"];
    let b = wf.budget(&p).expect("the run's budget");
    assert_eq!(b.name, Some("run_budget"));
    assert_eq!((b.steps, b.tokens, b.tool_calls, b.duration_ms, b.cost), (Some(40), Some(20_000), None, Some(600_000), Some(2.0)));
    assert!((b.reserve.total() - 0.1).abs() < 1e-9);
    assert_eq!(b.zones.iter().map(|z| z.zone).collect::<Vec<_>>(), [flow_trace::Zone::Yellow, flow_trace::Zone::Fuse]);
    assert_eq!(b.zones[1].actions.iter().map(|a| a.render()).collect::<Vec<_>>(), ["compress_context", "return_partial"]);
    assert_eq!(b.on_exhausted.map(|a| a.render()), Some("fallback(out_of_budget)".into()));
    assert_eq!(b.limit("cost"), Some(2.0));
    let agent = p.decls["writer"].budget(&p).expect("the agent's inline budget");
    assert_eq!((agent.name, agent.tokens, agent.steps), (None, Some(5_000), None));
}

#[test]
fn declarations_read_typed() {
    let p = program();
    let tool = &p.decls["search"];
    assert_eq!((tool.risk(), tool.effect(), tool.sink()), (Some(Risk::High), Effect::Idempotent, Some(Sink::Public)));
    assert!(tool.is_risky() && !tool.confirm());
    assert_eq!(tool.rate_limit(), Some(Rate { count: 10, per_ms: 60_000 }));
    assert!(tool.allows_agent("writer") && !tool.allows_agent("other"));
    assert_eq!(tool.audit().map(|a| (a.level, a.visible_to)), Some(("full".to_string(), vec!["lead".to_string()])));
    assert_eq!(tool.function(), "search");
    let agent = &p.decls["writer"];
    assert_eq!((agent.provider(), agent.context(), agent.max_turns()), (Some("local"), Some(ContextMode::Fork), Some(3)));
    assert!(agent.holds_tool("search") && !agent.holds_tool("other"));
    let provider = &p.decls["local"];
    assert_eq!(
        (provider.max_tokens(), provider.max_input_tokens(), provider.price_input(), provider.price_output()),
        (Some(1_000), Some(2_000), 1.0, 0.0)
    );
    let eval = &p.decls["long_enough"];
    assert_eq!((eval.fail(), eval.reason(), eval.check().is_some()), (Outcome::RequiresDecision, Some("short"), true));
}

#[test]
fn workflow_parts_read_typed_with_defaults_filled() {
    let p = program();
    let wf = &p.workflows["w"];
    assert_eq!((wf.start(), wf.escalate_to(), wf.deadline_ms()), (Some("write"), vec!["lead".to_string()], Some(3_600_000)));
    let write = &wf.nodes["write"];
    assert_eq!(write.retry(), Some(Retry { attempts: 3, backoff_ms: Some(1_000), max_backoff_ms: None }));
    assert_eq!((write.on_failure(), write.max_visits(), write.repair()), (Some(OnFailure::Skip), Some(2), 1));
    assert_eq!(wf.nodes["review"].offered_decisions(), vec![flow_trace::Decision::Approve, flow_trace::Decision::Reject]);
    assert_eq!(wf.nodes["done"].status(), Some(TerminationStatus::Success));
    assert_eq!(wf.nodes["stop"].status(), Some(TerminationStatus::Failure));
    assert_eq!(write.status(), None, "only an end node has a status");
    let gate = &wf.gates["check"];
    assert_eq!(gate.evaluators().iter().map(|e| (e.name, e.builtin)).collect::<Vec<_>>(), [("long_enough", false)]);
    assert_eq!((gate.on_error(), gate.decided_by(), gate.replan_scope()), (Outcome::Block, None, vec!["write".to_string()]));
    let handoff = &wf.transfers[0];
    assert_eq!((handoff.context(), handoff.reason()), (Some(ContextMode::Isolated), Some("ready")));
    assert_eq!(wf.policies[0].response(), PolicyResponse::Warn);
}

#[test]
fn closed_words_round_trip() {
    for e in Effect::ALL {
        assert_eq!(Effect::parse(e.as_str()), Some(*e));
    }
    for r in PolicyResponse::ALL {
        assert_eq!(PolicyResponse::parse(r.as_str()), Some(*r));
    }
    assert_eq!(OnFailure::parse("explode"), None);
    // The action enum is the spec's action table, in its order.
    let table: Vec<&str> = crate::spec::ACTIONS.iter().map(|(name, _, _)| *name).collect();
    let kinds: Vec<&str> = crate::ir::ActionKind::ALL.iter().map(|k| k.as_str()).collect();
    assert_eq!(kinds, table);
    for &k in crate::ir::ActionKind::ALL {
        assert_eq!(crate::ir::ActionKind::parse(k.as_str()), Some(k));
    }
    // Every event a handler may name is a `HandlerEvent`, written as the spec writes it.
    let spec_events =
        crate::spec::NODE_KINDS.iter().flat_map(|k| k.events.iter()).chain(crate::spec::GATE_EVENTS).chain(crate::spec::WORKFLOW_EVENTS);
    for word in spec_events {
        assert_eq!(crate::ir::HandlerEvent::parse(word).map(|e| e.as_str()), Some(*word), "{word}");
    }
    for e in crate::ir::HandlerEvent::ALL {
        assert_eq!(serde_json::to_value(e).unwrap(), serde_json::json!(e.as_str()), "the plan writes `{e}` as the source does");
    }
    for f in OnFailure::ALL {
        assert_eq!(f.action().as_str(), f.as_str(), "an on_failure word names its action");
    }
}
