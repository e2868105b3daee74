use super::*;
use flow_diagnostics::SourceDb;
use flow_trace::Event;
use serde_json::{json, Value};

const SOURCE: &str = r#"
provider p: scripted
agent writer { provider: p, budget: { tokens: 1000 } }
agent critic { provider: p }
type Draft = { text: string, done: bool }
budget run_budget {
  steps: 20
  tokens: 5000
  zones: [{ zone: yellow, below: 0.5, action: warn }]
}

workflow w {
  start: rounds
  budget: run_budget
  node rounds: loop [draft, review] { max_rounds: 3, until: review.done }
  node draft: agent writer { output: Draft }
  node review: agent critic { output: Draft }
  node publish: agent critic { output: Draft }
  node done: end ok
  node blocked: end blocked { status: failure }
  draft -> review
  rounds -> publish
  publish -> done
  gate check: rounds -> publish {
    evaluate: [predicate(review.done)]
    on PASS -> continue
    on BLOCK -> goto(blocked)
  }
}

policy review_first: never started(publish) before completed(review)
"#;

fn program() -> Program {
    let mut db = SourceDb::new();
    let root = db.add("w.flow", SOURCE.to_string());
    let checked = flow_check::check_program(&mut db, root, &flow_check::NoFiles);
    let errors: Vec<_> = checked.diagnostics.iter().filter(|d| d.is_error()).map(|d| d.message.clone()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    checked.program
}

/// One event at `ms` milliseconds into the run.
fn ev(seq: u64, ms: u64, kind: &str, mut payload: Value) -> Event {
    payload["schema_version"] = json!(1);
    let event = json!({
        "run_id": "r1", "execution_id": "exec-1", "seq": seq, "event_id": format!("r1/{seq}"),
        "producer": "control", "kind": kind, "payload": payload,
        "time": format!("2026-12-05T10:00:{:02}.{:03}Z", ms / 1000, ms % 1000),
    });
    serde_json::from_value(event).unwrap_or_else(|e| panic!("{kind}: {e}"))
}

const DIGEST: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000001";

/// A visit of an agent node with one attempt and one turn of `tokens`.
fn visit(events: &mut Vec<Event>, node: &str, agent: &str, visit: u32, ms: u64, tokens: u64) {
    let n = events.len() as u64;
    let attempt = format!("{node}#{visit}");
    let out = json!({"digest": DIGEST, "size": 2});
    events.push(ev(n + 1, ms, "node_started", json!({"node": node, "node_kind": "agent", "visit": visit})));
    events.push(ev(n + 2, ms, "attempt_started", json!({"node": node, "attempt_id": attempt, "attempt_no": 1, "trigger_reason": "first"})));
    let usage = json!({"tokens": tokens, "duration_ms": 5});
    events.push(ev(
        n + 3,
        ms + 5,
        "agent_turn",
        json!({"agent": agent, "node": node, "attempt_id": attempt, "provider": "p", "request_key": "k", "usage": usage}),
    ));
    events.push(ev(
        n + 4,
        ms + 5,
        "budget_settled",
        json!({"scope": format!("run,agent.{agent},node.{node}"), "attempt_id": attempt, "used": {"tokens": tokens}, "remaining": {}}),
    ));
    events.push(ev(n + 5, ms + 6, "attempt_completed", json!({"node": node, "attempt_id": attempt, "attempt_no": 1, "output": out})));
    events.push(ev(n + 6, ms + 6, "node_completed", json!({"node": node, "status": "completed", "output": out})));
}

/// Two rounds of the loop, the gate BLOCKs, the run ends at `blocked`.
fn blocked_run() -> Vec<Event> {
    let mut events = vec![ev(1, 0, "run_started", json!({"workflow": "w", "plan_digest": DIGEST}))];
    events.push(ev(2, 0, "node_started", json!({"node": "rounds", "node_kind": "loop", "visit": 1})));
    for round in 1..=2u32 {
        let at = u64::from(round) * 100;
        let n = events.len() as u64;
        events.push(ev(n + 1, at, "edge_taken", json!({"from": "rounds", "to": "draft", "via": "loop_round"})));
        visit(&mut events, "draft", "writer", round, at, 300);
        let n = events.len() as u64;
        events.push(ev(n + 1, at + 10, "edge_taken", json!({"from": "draft", "to": "review", "via": "always"})));
        visit(&mut events, "review", "critic", round, at + 10, 200);
    }
    let n = events.len() as u64;
    events.push(ev(
        n + 1,
        400,
        "node_completed",
        json!({"node": "rounds", "status": "completed", "output": {"digest": DIGEST, "size": 2}}),
    ));
    let evaluators = [json!({"evaluator": "predicate(review.done)", "outcome": "BLOCK", "reason": "review.done is false"})];
    events.push(ev(
        n + 2,
        400,
        "gate_recorded",
        json!({"gate": "check", "from": "rounds", "to": "publish", "outcome": "BLOCK", "evaluators": evaluators, "trigger": "control"}),
    ));
    events.push(ev(n + 3, 401, "edge_taken", json!({"from": "rounds", "to": "blocked", "via": "goto"})));
    events.push(ev(n + 4, 401, "node_started", json!({"node": "blocked", "node_kind": "end", "visit": 1})));
    events.push(ev(n + 5, 401, "node_completed", json!({"node": "blocked", "status": "completed"})));
    events.push(ev(n + 6, 402, "run_terminated", json!({"reason": "blocked", "status": "failure"})));
    events
}

#[test]
fn the_layout_gives_every_node_its_own_place_and_marks_the_loop_back() {
    let program = program();
    let graph = Graph::of(&program, &program.workflows["w"]);
    assert_eq!(graph.nodes.len(), 6);
    let mut places = graph.place.clone();
    places.sort_unstable();
    places.dedup();
    assert_eq!(places.len(), graph.place.len(), "two things in one place: {:?}", graph.place);
    for e in &graph.edges {
        let (from, to) = (graph.place[e.from].0, graph.place[e.to].0);
        if e.back {
            assert!(to <= from, "a back edge goes back: {e:?}");
        } else {
            assert_eq!(to, from + 1 + e.via.len(), "a forward edge crosses one layer per place it passes: {e:?}");
        }
    }
    let review = graph.index("review").unwrap();
    let rounds = graph.index("rounds").unwrap();
    let back = graph.edges.iter().find(|e| e.from == review && e.to == rounds).expect("the round edge");
    assert!(back.back && back.kind == graph::GEdgeKind::Round);
    let gated = graph.edges.iter().find(|e| e.gate.as_deref() == Some("check")).expect("the gate's edge");
    assert_eq!((gated.from, gated.to), (rounds, graph.index("publish").unwrap()));
}

#[test]
fn a_run_is_read_into_states_rounds_gates_and_budget_use() {
    let program = program();
    let agents = [("draft", "writer"), ("review", "critic"), ("publish", "critic")].map(|(n, a)| (n.to_string(), a.to_string())).into();
    let view = RunView::of(&blocked_run(), &agents);
    assert_eq!(view.status.as_deref(), Some("failure"));
    assert_eq!(view.nodes["rounds"].rounds, 2);
    assert_eq!(view.nodes["draft"].visits, 2);
    assert_eq!(view.nodes["review"].round_ends, 2, "each round ended at review");
    assert_eq!(view.nodes["draft"].round_ends, 0, "draft always went on to review");
    assert!(!view.nodes.contains_key("publish"));
    assert_eq!(view.edges[&("draft".to_string(), "review".to_string(), run::EdgeClass::Written)], 2);
    assert_eq!(view.edges[&("rounds".to_string(), "blocked".to_string(), run::EdgeClass::Handler)], 1);
    assert_eq!(view.gates.len(), 1);
    assert_eq!(view.gates[0].evaluators[0], ("predicate(review.done)".into(), "BLOCK".into(), Some("review.done is false".into())));
    assert_eq!(view.tokens, 1000);
    // One step per attempt; tokens as settled.
    let run = view.budgets["run"].last().unwrap();
    assert_eq!((run.used.steps, run.used.tokens), (4, 1000));
    assert_eq!(view.budgets["agent.writer"].last().unwrap().used.tokens, 600);
    assert_eq!(view.budgets["agent.writer"].last().unwrap().used.steps, 2);
    // A node's scope is per visit.
    assert_eq!(view.budgets["node.draft"].last().unwrap().used.tokens, 300);
    let limits = scope_limits(&program, &program.workflows["w"]);
    assert_eq!(limits["run"].limits, vec![("steps", 20.0), ("tokens", 5000.0)]);
    assert_eq!(limits["run"].zones, vec![("yellow".to_string(), 0.5)]);
    assert_eq!(limits["agent.writer"].limits, vec![("tokens", 1000.0)]);
}

#[test]
fn the_run_page_draws_the_path_the_gate_and_the_verdicts() {
    let program = program();
    let page = run_page(&program, &blocked_run()).unwrap();
    assert_eq!(page.matches("<g class=\"node ").count(), 6, "every node of the plan");
    assert!(page.contains(r#"class="node kind-agent st-completed" data-node="draft""#));
    assert!(page.contains(r#"class="node kind-agent st-not_run" data-node="publish""#));
    assert!(page.contains(r#"class="node kind-end st-completed" data-node="blocked""#));
    assert!(page.contains(r#"class="gate outcome-BLOCK" data-gate="check""#));
    assert!(page.contains("loop · round 2/3"));
    assert!(page.contains(r#"<g class="edge round taken" data-from="review" data-to="rounds">"#), "the rounds went back from review");
    assert!(page.contains(r#"<g class="edge written untaken" data-from="publish" data-to="done">"#));
    assert!(page.contains(r#"<td class="verdict-held">held</td>"#), "the policy held: publish never started");
    assert!(page.contains("tokens: 1000 of 5000 (20%)"));
    // Nothing to fetch: no source or link attributes at all.
    assert!(!page.contains(" src=") && !page.contains(" href=") && !page.contains("<link"), "the page refers elsewhere");
}

#[test]
fn what_runs_write_cannot_break_out_of_the_page() {
    let program = program();
    let mut events = blocked_run();
    let n = events.len() as u64;
    let evil = "</script><script>alert(1)</script><img src=x onerror=alert(2)>";
    events.insert(3, ev(n + 1, 1, "warning", json!({ "message": evil })));
    for (i, e) in events.iter_mut().enumerate() {
        e.seq = i as u64 + 1;
    }
    let page = run_page(&program, &events).unwrap();
    assert!(!page.contains("<script>alert"), "a message closed the data script");
    assert!(!page.contains("<img src=x"));
    assert!(page.contains(r"\u003c/script\u003e\u003cscript\u003ealert(1)"), "kept, escaped, in the data");
}

#[test]
fn a_violation_an_open_run_and_a_held_policy_read_apart() {
    let program = program();
    let w = &program.workflows["w"];
    let mut events = blocked_run();
    let end = events.pop().unwrap();
    let open = verdicts(&program, w, &RunView::of(&events, &Default::default()));
    assert_eq!(open[0].verdict, "open");
    let n = events.len() as u64;
    events.push(ev(
        n + 1,
        401,
        "policy_violated",
        json!({"policy": "review_first", "response": "halt", "offending": "node_started", "message": "publish started first"}),
    ));
    events.push(end);
    let violated = verdicts(&program, w, &RunView::of(&events, &Default::default()));
    assert_eq!((violated[0].verdict, violated[0].detail.as_str()), ("violated", "seq 36: publish started first (halt)"));
}

#[test]
fn the_plan_page_draws_every_workflow_without_a_run() {
    let program = program();
    let page = plan_page(&program, "w.flow");
    assert_eq!(page.matches("<g class=\"node ").count(), 6);
    assert_eq!(page.matches(" st-plan\" data-node=").count(), 6);
    assert!(page.contains(r#"class="gate outcome-plan" data-gate="check""#));
    assert!(page.contains("loop · max 3 rounds"));
}

#[test]
fn money_keeps_the_digits_that_matter() {
    assert_eq!(money(0.0), "$0");
    assert_eq!(money(1.5), "$1.5000");
    assert_eq!(money(0.00000042), "$0.000000420");
}

#[test]
fn a_clock_that_goes_back_does_not_run_time_backwards() {
    // A resumed run's fake clock starts again: later events, earlier times.
    let mut events = blocked_run();
    let n = events.len();
    for e in &mut events[n / 2..] {
        e.time = "2026-12-05T10:00:00.000Z".into();
    }
    let view = RunView::of(&events, &Default::default());
    let mut last = 0;
    for row in &view.rows {
        assert!(row.at_ms >= last, "seq {} at {} after {}", row.seq, row.at_ms, last);
        last = row.at_ms;
    }
    let page = run_page(&program(), &events).unwrap();
    assert!(page.contains("class=\"timeline\""));
}

#[test]
fn a_lost_attempt_and_a_run_that_ended_under_a_node_are_drawn_stopped() {
    let mut events = vec![ev(1, 0, "run_started", json!({"workflow": "w", "plan_digest": DIGEST}))];
    events.push(ev(2, 0, "node_started", json!({"node": "draft", "node_kind": "agent", "visit": 1})));
    events.push(ev(3, 1, "attempt_started", json!({"node": "draft", "attempt_id": "a1", "attempt_no": 1, "trigger_reason": "first"})));
    events.push(ev(4, 50, "lease_expired", json!({"attempt_id": "a1", "lease": "l1"})));
    events.push(ev(
        5,
        51,
        "attempt_started",
        json!({"node": "draft", "attempt_id": "a2", "attempt_no": 2, "trigger_reason": "lease_expired"}),
    ));
    // Two calls of one tool at once: each completion goes to the oldest open one.
    for (seq, key) in [(6, "k1"), (7, "k2")] {
        events.push(ev(
            seq,
            52,
            "tool_call_started",
            json!({"tool": "t", "node": "draft", "attempt_id": "a2", "request_key": key, "input": {"digest": DIGEST, "size": 1}}),
        ));
    }
    events.push(ev(8, 60, "tool_call_completed", json!({"tool": "t", "attempt_id": "a2", "ok": true, "duration_ms": 8})));
    events.push(ev(
        9,
        70,
        "tool_call_completed",
        json!({"tool": "t", "attempt_id": "a2", "ok": false, "error": "boom", "duration_ms": 18}),
    ));
    events.push(ev(10, 80, "run_terminated", json!({"reason": "cancelled", "status": "failure"})));
    let view = RunView::of(&events, &Default::default());
    let draft = &view.nodes["draft"];
    assert_eq!(draft.attempts[0].state, run::NodeState::Stopped);
    assert_eq!(draft.attempts[0].end_ms, Some(50));
    assert_eq!(draft.attempts[1].state, run::NodeState::Stopped, "open when the run ended");
    assert_eq!(draft.state, run::NodeState::Stopped);
    let calls: Vec<(u64, bool)> = draft.attempts[1].calls.iter().map(|c| (c.duration_ms, c.ok)).collect();
    assert_eq!(calls, [(8, true), (18, false)]);
}

#[test]
fn a_thousand_node_chain_with_a_jump_from_every_node_lays_out_at_once() {
    let mut source = String::from("provider p: scripted\nagent a { provider: p }\nworkflow big {\n  start: n0\n  node stop: end stopped { status: failure }\n  node done: end ok\n");
    let n = 1000;
    for i in 0..n {
        source.push_str(&format!("  node n{i}: agent a {{ output: string\n    on failure -> goto(stop)\n  }}\n"));
    }
    for i in 0..n - 1 {
        source.push_str(&format!("  n{i} -> n{}\n", i + 1));
    }
    source.push_str(&format!("  n{} -> done\n}}\n", n - 1));
    let mut db = SourceDb::new();
    let root = db.add("big.flow", source);
    let checked = flow_check::check_program(&mut db, root, &flow_check::NoFiles);
    let errors: Vec<_> = checked.diagnostics.iter().filter(|d| d.is_error()).map(|d| d.message.clone()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    let page = plan_page(&checked.program, "big.flow");
    let graph = Graph::of(&checked.program, &checked.program.workflows["big"]);
    assert_eq!(page.matches("<g class=\"node ").count(), n + 2);
    assert!(graph.place.len() < 2 * (n + 2), "the jumps are arcs, not chains of places: {} places", graph.place.len());
    assert!(graph
        .edges
        .iter()
        .filter(|e| e.kind == graph::GEdgeKind::Handler)
        .all(|e| e.arc || graph.place[e.to].0 <= graph.place[e.from].0 + 1));
}
