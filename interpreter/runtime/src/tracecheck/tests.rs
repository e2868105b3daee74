//! Targeted cases for the checks the example runs do not reach: each builds
//! a small trace by hand against a small program and expects one code.

use super::*;
use crate::journal::{ArtifactStore, MemoryArtifacts};
use flow_diagnostics::SourceDb;
use serde_json::{json, Value};

const SOURCE: &str = r#"
provider local: scripted
principal alice
principal bob
principal reviewers: role { members: [alice] }
tool search: builtin { description: "Searches", input: { q: string }, output: { hits: [string] }, allowed_agents: [writer] }
agent writer { provider: local, tools: [search] }
agent checker { provider: local }
budget small { tokens: 100, cost: $1.00 }
workflow w {
  start: draft
  budget: small
  escalate_to: reviewers
  node draft: agent writer { output: { text: string } }
  node review: agent checker { output: { ok: bool } }
  node done: end shipped
  node stop: end stopped { status: failure }
  draft -> review -> done
  gate g: draft -> review {
    evaluate: [predicate(draft.text != "")]
    on_error: REQUIRES_DECISION
    decided_by: [reviewers]
    trigger: { by: [writer], on: ["node_completed"] }
    on PASS, approve -> continue
    on BLOCK, reject -> goto(stop)
    on REQUIRES_DECISION -> decide
    on revise -> revise(draft)
    on replan -> replan
  }
  handoff draft -> review { context: filtered, context_fields: ["text"], payload: { text: string } }
  on budget_exhausted -> fallback(out_of_budget)
}
policy reviewed_after_gate: never started(review) before (outcome(g, PASS) or decided(g, approve))
policy ends: started(draft) => eventually terminated(shipped)
"#;

fn program() -> Program {
    program_of(SOURCE)
}

fn program_of(source: &str) -> Program {
    let mut db = SourceDb::new();
    let root = db.add("t.flow", source.to_string());
    let checked = flow_check::check_program(&mut db, root, &flow_check::NoFiles);
    let errors: Vec<_> = checked.diagnostics.iter().filter(|d| d.is_error()).collect();
    assert!(errors.is_empty(), "{}", flow_diagnostics::render::render_human(&db, &checked.diagnostics));
    checked.program
}

const A: &str = "sha256:aaaa";
const B: &str = "sha256:bbbb";

fn art(digest: &str) -> Value {
    json!({ "digest": digest, "size": 10 })
}

fn usage(tokens: u64, cost: f64) -> Value {
    json!({ "steps": 0, "tokens": tokens, "tool_calls": 0, "cost": cost, "duration_ms": 0 })
}

fn turn(agent: &str, node: &str, attempt: &str) -> (&'static str, Value) {
    (
        "agent_turn",
        json!({ "agent": agent, "node": node, "attempt_id": attempt, "provider": "local", "request_key": "k", "usage": usage(10, 0.0) }),
    )
}

/// The conformant run: draft, the gate passes, a filtered handoff, review, done.
fn good() -> Vec<(&'static str, Value)> {
    vec![
        ("run_started", json!({ "workflow": "w", "plan_digest": "sha256:p" })),
        ("node_started", json!({ "node": "draft", "node_kind": "agent", "visit": 1 })),
        ("attempt_started", json!({ "node": "draft", "attempt_id": "draft#1.1", "attempt_no": 1, "trigger_reason": "first" })),
        ("budget_reserved", json!({ "scope": "run", "attempt_id": "draft#1.1", "amount": usage(50, 0.0) })),
        turn("writer", "draft", "draft#1.1"),
        ("budget_settled", json!({ "scope": "run", "attempt_id": "draft#1.1", "used": usage(20, 0.1), "remaining": usage(80, 0.9) })),
        ("attempt_completed", json!({ "node": "draft", "attempt_id": "draft#1.1", "attempt_no": 1, "output": art(A) })),
        ("node_completed", json!({ "node": "draft", "status": "completed", "output": art(A) })),
        (
            "gate_recorded",
            json!({ "gate": "g", "from": "draft", "to": "review", "outcome": "PASS", "trigger": "agent.writer on node_completed",
                    "evaluators": [{ "evaluator": "predicate(draft.text != \"\")", "outcome": "PASS" }] }),
        ),
        ("action_taken", json!({ "event": "PASS", "scope": "gate.g", "action": "continue" })),
        ("edge_taken", json!({ "from": "draft", "to": "review", "via": "gate g" })),
        (
            "handoff",
            json!({ "from": "draft", "to": "review", "context": "filtered", "context_fields": ["text"], "payload": art(A), "accepted": true }),
        ),
        ("node_started", json!({ "node": "review", "node_kind": "agent", "visit": 1 })),
        ("attempt_started", json!({ "node": "review", "attempt_id": "review#1.1", "attempt_no": 1, "trigger_reason": "first" })),
        turn("checker", "review", "review#1.1"),
        ("attempt_completed", json!({ "node": "review", "attempt_id": "review#1.1", "attempt_no": 1, "output": art(B) })),
        ("node_completed", json!({ "node": "review", "status": "completed", "output": art(B) })),
        ("edge_taken", json!({ "from": "review", "to": "done", "via": "always" })),
        ("node_started", json!({ "node": "done", "node_kind": "end", "visit": 1 })),
        ("node_completed", json!({ "node": "done", "status": "completed" })),
        ("run_terminated", json!({ "reason": "shipped", "status": "success" })),
    ]
}

/// Events from (kind, payload) pairs: seq 1…n, each the previous one's child.
fn events(spec: &[(&str, Value)]) -> Vec<Event> {
    spec.iter()
        .enumerate()
        .map(|(i, (kind, payload))| {
            let seq = i as u64 + 1;
            let mut payload = payload.clone();
            payload["schema_version"] = json!(1);
            let mut event = json!({
                "run_id": "r", "execution_id": "exec-1", "seq": seq, "event_id": format!("r/{seq}"),
                "producer": "control", "kind": kind, "payload": payload, "time": "2026-01-01T00:00:00Z"
            });
            if seq > 1 {
                event["parent_event_id"] = json!(format!("r/{}", seq - 1));
            }
            serde_json::from_value(event).unwrap_or_else(|e| panic!("event {seq} ({kind}): {e}"))
        })
        .collect()
}

fn codes_of(report: &Report) -> Vec<&'static str> {
    let mut codes: Vec<&str> = report.deviations.iter().map(|d| d.code.0).collect();
    codes.dedup();
    codes
}

fn run(spec: &[(&str, Value)]) -> Report {
    check(&program(), &events(spec), &Options::default())
}

fn find(spec: &[(&'static str, Value)], kind: &str, nth: usize) -> usize {
    spec.iter().enumerate().filter(|(_, (k, _))| *k == kind).nth(nth).map(|(i, _)| i).unwrap_or_else(|| panic!("no {kind} #{nth}"))
}

#[test]
fn the_good_trace_is_conformant_and_its_policies_hold() {
    let report = run(&good());
    assert!(report.conformant, "{:#?}", report.deviations);
    assert_eq!(report.trace.state, "terminated");
    assert!(report.policies.iter().all(|p| p.verdict == "holds"), "{:?}", report.policies);
    assert!(report.notes.iter().any(|n| n.contains("not checked: no artifact store")), "{:?}", report.notes);
}

#[test]
fn an_approve_by_a_role_member_opens_the_gate() {
    let mut spec = good();
    let gate = find(&spec, "gate_recorded", 0);
    spec[gate].1["outcome"] = json!("REQUIRES_DECISION");
    spec[gate].1["evaluators"][0]["outcome"] = json!("REQUIRES_DECISION");
    spec[gate + 1] = ("action_taken", json!({ "event": "REQUIRES_DECISION", "scope": "gate.g", "action": "decide" }));
    spec.insert(gate + 2, ("decision_requested", json!({ "subject": "g", "deciders": ["reviewers"], "decisions": ["approve", "reject"] })));
    spec.insert(gate + 3, ("decision_applied", json!({ "subject": "g", "decision": "approve", "by": "alice", "action": "continue" })));
    spec.insert(gate + 4, ("action_taken", json!({ "event": "approve", "scope": "gate.g", "action": "continue" })));
    let report = run(&spec);
    assert!(report.conformant, "{:#?}", report.deviations);
    // bob holds no role that may decide.
    let applied = find(&spec, "decision_applied", 0);
    spec[applied].1["by"] = json!("bob");
    assert_eq!(codes_of(&run(&spec)), ["T022"]);
    // A decision nobody asked for.
    spec.remove(applied - 1);
    spec[applied - 1].1["by"] = json!("alice");
    assert_eq!(codes_of(&run(&spec)), ["T023"]);
}

#[test]
fn a_block_crossed_anyway_is_a_gate_deviation() {
    let mut spec = good();
    let gate = find(&spec, "gate_recorded", 0);
    spec[gate].1["outcome"] = json!("BLOCK");
    let report = run(&spec);
    let codes = codes_of(&report);
    assert!(codes.contains(&"T020"), "{codes:?}");
    assert!(codes.contains(&"T050"), "reviewed_after_gate: {codes:?}");
}

#[test]
fn triggers_must_be_the_from_agent_and_allowed() {
    let mut spec = good();
    let gate = find(&spec, "gate_recorded", 0);
    spec[gate].1["trigger"] = json!("agent.checker on node_completed");
    let report = run(&spec);
    assert_eq!(codes_of(&report), ["T021"]);
    assert_eq!(report.deviations.len(), 2, "not the from agent, and not in trigger.by: {:#?}", report.deviations);
}

#[test]
fn edges_outside_the_plan_and_starts_without_edges() {
    let mut spec = good();
    let edge = find(&spec, "edge_taken", 1);
    spec[edge].1["to"] = json!("stop");
    let report = run(&spec);
    assert!(codes_of(&report).contains(&"T010"), "{:#?}", report.deviations);
    // A goto(stop) is an implicit edge: the gate's BLOCK handler names it.
    let mut spec = good();
    spec[edge] = ("edge_taken", json!({ "from": "review", "to": "stop", "via": "goto" }));
    let start = find(&spec, "node_started", 2);
    spec[start].1["node"] = json!("stop");
    spec[start + 1].1["node"] = json!("stop");
    let last = spec.len() - 1;
    spec[last].1 = json!({ "reason": "stopped", "status": "failure" });
    let report = run(&spec);
    assert_eq!(codes_of(&report), ["T050"], "only `ends` is violated: {:#?}", report.deviations);
    // No edge at all.
    let mut spec = good();
    spec.remove(find(&spec, "edge_taken", 1));
    assert_eq!(codes_of(&run(&spec)), ["T011"]);
}

#[test]
fn node_and_attempt_lifecycles() {
    let mut spec = good();
    let done = find(&spec, "attempt_completed", 1);
    spec.insert(done, turn("checker", "review", "review#9.9"));
    assert_eq!(codes_of(&run(&spec)), ["T006"]);
    let mut spec = good();
    let started = find(&spec, "node_started", 1);
    spec[started].1["visit"] = json!(2);
    assert_eq!(codes_of(&run(&spec)), ["T005"]);
    let mut spec = good();
    spec.push(("warning", json!({ "message": "late" })));
    assert_eq!(codes_of(&run(&spec)), ["T004"]);
}

#[test]
fn tool_calls_follow_the_permission_matrix() {
    let mut spec = good();
    let turn_at = find(&spec, "agent_turn", 1);
    let call =
        json!({ "tool": "search", "node": "review", "attempt_id": "review#1.1", "agent": "checker", "request_key": "k", "input": art(B) });
    spec.insert(turn_at + 1, ("tool_call_started", call));
    spec.insert(
        turn_at + 2,
        ("tool_call_completed", json!({ "tool": "search", "attempt_id": "review#1.1", "ok": true, "duration_ms": 1 })),
    );
    assert_eq!(codes_of(&run(&spec)), ["T024"]);
}

#[test]
fn handoffs_carry_the_declared_slice_and_payload() {
    let mut spec = good();
    let handoff = find(&spec, "handoff", 0);
    spec[handoff].1["context"] = json!("fork");
    assert_eq!(codes_of(&run(&spec)), ["T030"]);
    let mut spec = good();
    spec[handoff].1["payload"] = art(B);
    assert_eq!(codes_of(&run(&spec)), ["T031"], "not what draft produced");
    let mut spec = good();
    spec.remove(handoff);
    assert_eq!(codes_of(&run(&spec)), ["T030"], "the declared handoff is missing");
    // With the artifacts: the payload's type.
    let mut store = MemoryArtifacts::new();
    let wrong = store.put(&json!({ "text": 42 })).unwrap();
    let mut spec = good();
    for i in [find(&spec, "attempt_completed", 0), find(&spec, "node_completed", 0), handoff] {
        let key = if spec[i].0 == "handoff" { "payload" } else { "output" };
        spec[i].1[key] = serde_json::to_value(&wrong).unwrap();
    }
    let options = Options { artifacts: Some(&store), plan_digest: None, ..Default::default() };
    let report = check(&program(), &events(&spec), &options);
    assert_eq!(codes_of(&report), ["T031"], "{:#?}", report.deviations);
    assert!(report.deviations[0].actual.as_deref().unwrap_or("").contains("/text"), "{:?}", report.deviations[0]);
}

#[test]
fn budgets_reservations_and_declared_exhaustion() {
    // Over the token limit with nothing done about it.
    let mut spec = good();
    let settled = find(&spec, "budget_settled", 0);
    spec[settled].1["used"] = usage(150, 0.1);
    spec[settled].1["remaining"] = usage(0, 0.9);
    assert_eq!(codes_of(&run(&spec)), ["T040"]);
    // The same overrun answered by budget_exhausted and the declared fallback: conformant.
    let mut spec: Vec<(&str, Value)> = good()[..=settled].to_vec();
    spec[settled].1["used"] = usage(150, 0.1);
    spec[settled].1["remaining"] = usage(0, 0.9);
    spec.push(("budget_exhausted", json!({ "scope": "run", "limit": "tokens" })));
    let failed = json!({ "node": "draft", "attempt_id": "draft#1.1", "attempt_no": 1, "error_code": "budget_exhausted", "message": "m" });
    spec.push(("attempt_failed", failed));
    spec.push(("action_taken", json!({ "event": "budget_exhausted", "scope": "workflow", "action": "fallback(out_of_budget)" })));
    spec.push(("run_terminated", json!({ "reason": "out_of_budget", "status": "partial" })));
    let report = run(&spec);
    assert_eq!(codes_of(&report), ["T050"], "only `ends` owes: {:#?}", report.deviations);
    assert!(report.notes.iter().any(|n| n.contains("budget_exhausted")), "{:?}", report.notes);
    // A reservation that cannot fit, and one never settled.
    let mut spec = good();
    let reserved = find(&spec, "budget_reserved", 0);
    spec[reserved].1["amount"] = usage(500, 0.0);
    assert_eq!(codes_of(&run(&spec)), ["T040"]);
    let mut spec = good();
    spec.remove(settled);
    assert_eq!(codes_of(&run(&spec)), ["T041"]);
    // A remaining that is not the limits less the use.
    let mut spec = good();
    spec[settled].1["remaining"] = usage(95, 0.9);
    assert_eq!(codes_of(&run(&spec)), ["T041"]);
}

#[test]
fn a_gate_outcome_is_what_its_evaluators_give_and_its_handler_follows_it() {
    let gate = find(&good(), "gate_recorded", 0);
    // A BLOCK edited into a PASS: the evaluator still says BLOCK.
    let mut spec = good();
    spec[gate].1["evaluators"][0]["outcome"] = json!("BLOCK");
    assert_eq!(codes_of(&run(&spec)), ["T026"]);
    // An evaluator that errored never PASSes.
    let mut spec = good();
    spec[gate].1["evaluators"][0]["error"] = json!(true);
    assert_eq!(codes_of(&run(&spec)), ["T026"]);
    // The outcome edited, the BLOCK handler left in place.
    let mut spec = good();
    spec[gate + 1].1 = json!({ "event": "BLOCK", "scope": "gate.g", "action": "goto(stop)" });
    assert!(codes_of(&run(&spec)).contains(&"T026"), "{:#?}", run(&spec).deviations);
    // Recorded before its `from` node completed.
    let mut spec = good();
    let completed = find(&spec, "node_completed", 0);
    let event = spec.remove(completed);
    spec.insert(gate, event);
    assert!(codes_of(&run(&spec)).contains(&"T026"), "{:#?}", run(&spec).deviations);
}

#[test]
fn task_states_and_providers_are_the_plans() {
    let source = SOURCE
        .replace("workflow w {", "machine Task { initial: open; terminal: [done]; open -> drafted; drafted -> done }\nworkflow w {")
        .replace(
            "node draft: agent writer { output: { text: string } }",
            "node draft: agent writer { output: { text: string }, state: Task.drafted }",
        );
    let program = program_of(&source);
    let mut spec = good();
    let completed = find(&spec, "node_completed", 0);
    let moved = json!({ "node": "draft", "machine": "Task", "from": "open", "to": "drafted" });
    spec.insert(completed + 1, ("state_changed", moved));
    let report = check(&program, &events(&spec), &Options::default());
    assert!(report.conformant, "{:#?}", report.deviations);
    for (field, value) in [("machine", "Ticket"), ("from", "drafted"), ("to", "done")] {
        let mut forged = spec.clone();
        forged[completed + 1].1[field] = json!(value);
        let report = check(&program, &events(&forged), &Options::default());
        assert_eq!(codes_of(&report), ["T014"], "{field}: {:#?}", report.deviations);
    }
    // A turn from a provider the plan does not declare.
    let mut spec = good();
    let turn = find(&spec, "agent_turn", 0);
    spec[turn].1["provider"] = json!("elsewhere");
    assert_eq!(codes_of(&run(&spec)), ["T027"]);
    // A turn's token split that is not its tokens (10).
    let mut spec = good();
    spec[turn].1["input_tokens"] = json!(4);
    spec[turn].1["output_tokens"] = json!(6);
    assert!(codes_of(&run(&spec)).is_empty(), "4 + 6 is 10");
    spec[turn].1["output_tokens"] = json!(7);
    assert_eq!(codes_of(&run(&spec)), ["T042"]);
}

#[test]
fn termination_reason_follows_from_its_cause() {
    let mut spec = good();
    let last = spec.len() - 1;
    spec[last].1["status"] = json!("failure");
    assert_eq!(codes_of(&run(&spec)), ["T060"]);
}

#[test]
fn envelope_seq_and_malformed_lines() {
    let events = events(&good());
    let mut lines: Vec<String> = events.iter().map(|e| serde_json::to_string(e).unwrap()).collect();
    // A line nothing else depends on (the action the gate's PASS ran).
    lines[9] = lines[9].replace("\"action_taken\"", "\"action_token\"");
    let report = check_text(&program(), &lines.join("\n"), &Options::default());
    assert_eq!(codes_of(&report), ["T001"], "the line's seq still counts: {:#?}", report.deviations);
    assert_eq!(report.deviations[0].line, Some(10));
    let mut events = events;
    events.remove(5);
    let report = check(&program(), &events, &Options::default());
    assert!(codes_of(&report).contains(&"T002"), "{:#?}", report.deviations);
    let mut e = self::events(&good());
    e[4].event_id = "r/40".into();
    assert_eq!(codes_of(&check(&program(), &e, &Options::default())), ["T003"]);
}

/// The report as `flow trace check` gives it (streamed in blocks of
/// `block` bytes), and as the whole text parsed at once gives it.
fn streamed_and_whole(text: &str, block: usize) -> (Report, Report) {
    let streamed = check_blocks(&program(), text.as_bytes(), &Options::default(), block).unwrap();
    let whole = check_parsed(&program(), parse(text), &Options::default());
    (streamed, whole)
}

#[test]
fn a_trace_read_in_blocks_is_checked_as_a_whole() {
    let events = events(&good());
    let mut lines: Vec<String> = events.iter().map(|e| serde_json::to_string(e).unwrap()).collect();
    // A line nothing else depends on (the action the gate's PASS ran).
    lines[9] = lines[9].replace("\"action_taken\"", "\"action_token\"");
    lines[7] = format!("{}\r", lines[7]);
    lines.insert(5, "   ".into());
    let text = lines.join("\n") + "\n";
    // Blocks smaller than a line, of a few lines, and larger than the trace.
    for block in [7, 100, 700, 1 << 20] {
        let (streamed, whole) = streamed_and_whole(&text, block);
        assert_eq!(codes_of(&streamed), ["T001"], "block {block}: {:#?}", streamed.deviations);
        assert_eq!(streamed.deviations[0].line, Some(11), "block {block}: after the blank line");
        assert_eq!(format!("{:?}", streamed.deviations), format!("{:?}", whole.deviations), "block {block}");
        assert_eq!(format!("{:?}", streamed.trace), format!("{:?}", whole.trace), "block {block}");
        assert_eq!(streamed.trace.lines, lines.len() - 1, "blank lines are not counted");
        assert_eq!(format!("{:?}", streamed.policies), format!("{:?}", whole.policies));
    }
    // Over a mebibyte, `parse` splits the text across threads too: the
    // same report still.
    let big = text.repeat((1 << 20) / text.len() + 2);
    let (streamed, whole) = streamed_and_whole(&big, 1 << 16);
    assert_eq!(streamed.trace.lines, whole.trace.lines);
    assert_eq!(format!("{:?}", streamed.deviations), format!("{:?}", whole.deviations));
    // A line that is not UTF-8 is one malformed line; the rest is checked.
    let mut bytes = text.clone().into_bytes();
    let at = text.find("action_token").unwrap();
    bytes[at] = 0xff;
    let report = check_blocks(&program(), bytes.as_slice(), &Options::default(), 64).unwrap();
    assert_eq!(codes_of(&report), ["T001"], "{:#?}", report.deviations);
    assert_eq!(report.deviations[0].line, Some(11));
    assert!(report.deviations[0].message.contains("not UTF-8"), "{:#?}", report.deviations);
    // An empty trace, and one whose last line has no line break.
    let (streamed, whole) = streamed_and_whole("", 16);
    assert!(streamed.deviations[0].message.contains("no events"), "{:#?}", streamed.deviations);
    assert_eq!(format!("{:?}", streamed.deviations), format!("{:?}", whole.deviations));
    let (streamed, whole) = streamed_and_whole(text.trim_end(), 50);
    assert_eq!(format!("{:?}", streamed.deviations), format!("{:?}", whole.deviations));
}

#[test]
fn a_failure_ends_the_run_with_its_reason_even_far_back() {
    // A node fails; the run terminates, with the parent naming the failure.
    let mut spec = good();
    let completed = find(&spec, "node_completed", 0);
    spec.truncate(completed);
    spec.push(("node_failed", json!({ "schema_version": 1, "node": "draft", "error_code": "tool_error", "message": "it broke" })));
    spec.push(("run_terminated", json!({ "schema_version": 1, "reason": "draft_failed", "status": "failure" })));
    let report = run(&spec);
    assert!(!codes_of(&report).contains(&"T060"), "{:#?}", report.deviations);
    let last = spec.len() - 1;
    spec[last].1["reason"] = json!("review_failed");
    assert_eq!(codes_of(&run(&spec)).iter().filter(|c| **c == "T060").count(), 1, "the reason does not follow from node_failed");
    spec[last].1["reason"] = json!("draft_failed");
    spec[last].1["status"] = json!("success");
    assert!(codes_of(&run(&spec)).contains(&"T060"), "the status does not follow from node_failed");
}

#[test]
fn an_unfinished_trace_leaves_obligations_open() {
    let spec = good();
    let report = run(&spec[..5]);
    assert!(report.conformant, "{:#?}", report.deviations);
    let ends = report.policies.iter().find(|p| p.name == "ends").unwrap();
    assert_eq!(ends.verdict, "open");
    assert_eq!(report.trace.state, "unfinished");
}

#[test]
fn docs_explain_every_code() {
    let docs = include_str!("../../../../docs/trace-check.md");
    for info in CODES {
        let heading = format!("### {} {}", info.code, info.title);
        assert!(docs.contains(&heading), "docs/trace-check.md lacks `{heading}`");
    }
}

#[test]
fn every_code_is_explained_once() {
    let mut seen = HashSet::default();
    for info in CODES {
        assert!(seen.insert(info.code), "{} twice", info.code);
        assert!(info.explanation.len() > 40, "{} needs an explanation", info.code);
    }
    assert_eq!(explain("t020").map(|c| c.code), Some(codes::GATE_NOT_PASSED));
}

#[test]
fn a_crossing_past_the_pairs_hop_limit_is_t012() {
    let limited = |max: u32| {
        let source = SOURCE.replace("payload: { text: string } }", &format!("payload: {{ text: string }}, max_hops: {max} }}"));
        assert_ne!(source, SOURCE);
        program_of(&source)
    };
    // One crossing of draft -> review: within a limit of one, past a limit of none.
    let report = check(&limited(1), &events(&good()), &Options::default());
    assert!(report.conformant, "{:#?}", report.deviations);
    let report = check(&limited(0), &events(&good()), &Options::default());
    assert_eq!(codes_of(&report), ["T012"], "{:#?}", report.deviations);
}

#[test]
fn the_hash_chain_is_checked_the_same_from_lines_and_from_events() {
    let mut chained = events(&good());
    let (lines, head) = flow_trace::chain::link_events(&mut chained, flow_trace::chain::genesis("r")).unwrap();
    let text = lines.join("\n") + "\n";
    let required = Options { require_chain: true, ..Default::default() };
    for report in [check(&program(), &chained, &required), check_text(&program(), &text, &required)] {
        assert!(report.conformant, "{:#?}", report.deviations);
        assert_eq!(report.trace.integrity, Integrity { chain: "intact", head: Some(head.clone()), signature: "not checked" });
    }
    // An edit inside line 5 breaks the link at seq 6, whichever way the
    // trace comes in; nothing else is wrong with it.
    let mut edited = lines.clone();
    edited[4] = edited[4].replace("\"time\":\"2026-01-01T00:00:00Z\"", "\"time\":\"2026-01-01T00:00:01Z\"");
    assert_ne!(edited[4], lines[4]);
    let text = edited.join("\n") + "\n";
    let parsed: Vec<Event> = edited.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    for report in
        [check(&program(), &parsed, &required), check_text(&program(), &text, &required), check_parsed(&program(), parse(&text), &required)]
    {
        assert_eq!(codes_of(&report), ["T080"], "{:#?}", report.deviations);
        assert_eq!(report.deviations[0].seq, Some(6));
        assert_eq!(report.trace.integrity.chain, "broken");
    }
    // Events removed from the start: the first no longer names the genesis.
    let report = check_text(&program(), &(lines[1..].join("\n") + "\n"), &required);
    assert!(
        report.deviations.iter().any(|d| d.code == codes::CHAIN && d.seq == Some(2) && d.message.contains("genesis")),
        "{:#?}",
        report.deviations
    );
    // A `prev` dropped from one line of a chained trace.
    let mut bare = chained.clone();
    bare[3].prev = None;
    let report = check(&program(), &bare, &required);
    assert!(
        report.deviations.iter().any(|d| d.code == codes::CHAIN && d.seq == Some(4) && d.message.contains("no `prev`")),
        "{:#?}",
        report.deviations
    );
    // No chain at all: a deviation when required, else a note.
    let plain = events(&good());
    let report = check(&program(), &plain, &required);
    assert_eq!(codes_of(&report), ["T080"], "{:#?}", report.deviations);
    assert_eq!(report.trace.integrity.chain, "absent");
    let text = plain.iter().map(|e| serde_json::to_string(e).unwrap() + "\n").collect::<String>();
    let report = check_text(&program(), &text, &Options::default());
    assert!(report.conformant);
    assert!(report.notes.iter().any(|n| n.contains("no hash chain")), "{:?}", report.notes);
    // Events without their lines, the chain not required: not checked.
    let report = check(&program(), &bare, &Options::default());
    assert!(report.conformant, "{:#?}", report.deviations);
    assert_eq!(report.trace.integrity.chain, "not checked");
    // Past twenty broken links, one deviation counts the rest.
    let shuffled: Vec<String> = lines.iter().rev().cloned().collect();
    let report = check_text(&program(), &(shuffled.join("\n") + "\n"), &required);
    let chain: Vec<&Deviation> = report.deviations.iter().filter(|d| d.code == codes::CHAIN).collect();
    assert_eq!(chain.len(), 21.min(lines.len()), "{chain:#?}");
}

#[test]
fn a_signature_must_verify_and_cover_the_last_line() {
    let mut chained = events(&good());
    let (lines, head) = flow_trace::chain::link_events(&mut chained, flow_trace::chain::genesis("r")).unwrap();
    let (private, public) = crate::signing::generate().unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("k"), private).unwrap();
    std::fs::write(dir.path().join("k.pub"), public).unwrap();
    let key = crate::signing::load_signing_key(&dir.path().join("k")).unwrap();
    let public = crate::signing::load_verifying_key(&dir.path().join("k.pub")).unwrap();
    let last = chained.len() as u64;
    let checked = |record: Result<&crate::signing::TraceSignature, &str>, lines: &[String]| {
        let options = Options { require_chain: true, signature: Some(SignatureCheck { key: &public, record }), ..Default::default() };
        check_text(&program(), &(lines.join("\n") + "\n"), &options)
    };
    let good = crate::signing::sign(&key, "r", last, &head);
    let report = checked(Ok(&good), &lines);
    assert!(report.conformant, "{:#?}", report.deviations);
    assert_eq!(report.trace.integrity.signature, "verified");
    let cut = checked(Ok(&good), &lines[..lines.len() - 1]);
    assert!(codes_of(&cut).contains(&"T081"), "{:#?}", cut.deviations);
    assert_eq!(cut.trace.integrity.signature, "failed");
    for (record, says) in [
        (crate::signing::sign(&key, "other", last, &head), "another run"),
        (crate::signing::TraceSignature { seq: last - 1, ..good.clone() }, "edited"),
        (crate::signing::sign(&key, "r", last - 1, &head), "does not cover"),
    ] {
        let report = checked(Ok(&record), &lines);
        assert_eq!(codes_of(&report), ["T081"], "{says}: {:#?}", report.deviations);
        assert!(report.deviations[0].message.contains(says), "{says}: {:#?}", report.deviations);
    }
    let missing = checked(Err("no trace.sig"), &lines);
    assert!(missing.deviations[0].message.contains("no trace.sig"), "{:#?}", missing.deviations);
}

#[test]
fn a_seq_jump_of_any_size_is_one_deviation_naming_its_ends() {
    // A forged seq far ahead: the gap is named by its ends, never listed
    // (a list of 10^12 seqs would not fit in memory).
    let mut trace = events(&good());
    trace[2].seq = 1_000_000_000_000;
    let report = check(&program(), &trace, &Options::default());
    let jumps: Vec<&str> = report.deviations.iter().filter(|d| d.message.starts_with("seq jumps")).map(|d| d.message.as_str()).collect();
    assert_eq!(jumps, ["seq jumps from 2 to 1000000000000: 3..999999999999 missing"]);
}
