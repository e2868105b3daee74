//! Blackboards at run time (reference §5.8): writers append their output
//! (after an approval or a gate's PASS where the blackboard requires one),
//! readers get every entry so far in their context, and every append and
//! read is an event trace check holds to the plan. Each run is driven in
//! process on a fake clock and checked by `flow trace check` too.

use flow_check::ir::Program;
use flow_check::{check_program, NoFiles};
use flow_diagnostics::SourceDb;
use flow_runtime::clock::FakeClock;
use flow_runtime::engine::{Engine, RunConfig};
use flow_runtime::proto::{AgentReply, AgentRequest, HumanAnswer, HumanRequest, Request, Response, TokenUsage};
use flow_runtime::tracecheck;
use flow_trace::{Applied, Body, Decision, Event};
use serde_json::{json, Value};
use std::sync::Arc;

fn program(source: &str) -> Program {
    let mut db = SourceDb::new();
    let root = db.add("boards.flow", source.to_string());
    let checked = check_program(&mut db, root, &NoFiles);
    assert!(!checked.has_errors(), "{:#?}", checked.diagnostics);
    let verified = flow_verify::verify(&checked.program);
    assert!(verified.iter().all(|d| !d.is_error()), "{verified:#?}");
    checked.program
}

struct Ran {
    events: Vec<Event>,
    agents: Vec<AgentRequest>,
    humans: Vec<HumanRequest>,
}

impl Ran {
    fn appended(&self) -> Vec<(String, String, u32, Option<String>)> {
        self.events
            .iter()
            .filter_map(|e| match &e.body {
                Body::BlackboardAppended { blackboard, node, entries, approved_by, .. } => {
                    Some((blackboard.clone(), node.clone(), *entries, approved_by.clone()))
                }
                _ => None,
            })
            .collect()
    }

    fn context_of(&self, node: &str) -> &Value {
        &self.agents.iter().find(|a| a.node == node).unwrap_or_else(|| panic!("no turn of {node}")).context
    }
}

/// Runs `program`: agent turns answered by `reply`, humans by `decide`;
/// the trace must be conformant.
fn run(program: Program, reply: impl Fn(&AgentRequest) -> Value, decide: impl Fn(&HumanRequest) -> Decision) -> Ran {
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
    engine.start(json!({}));
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
                    let usage = TokenUsage { input_tokens: 10, output_tokens: 10 };
                    Response::Agent(AgentReply { output: Some(reply(a)), usage, ..AgentReply::default() })
                }
                Request::Human(h) => {
                    humans.push(h.clone());
                    let by = h.principals.first().cloned().unwrap_or_default();
                    Response::Human(HumanAnswer { decision: decide(h), by, comment: None })
                }
                other => panic!("unexpected request {other:?}"),
            };
            engine.on_response(&command.key, response).expect("response");
        }
    }
    let events = engine.take_events();
    let report = tracecheck::check(&program, &events, &tracecheck::Options::default());
    assert!(report.conformant, "{:#?}", report.deviations);
    Ran { events, agents, humans }
}

const HEAD: &str = r#"provider p: scripted { max_tokens: 1k }
principal lead
agent scribe { provider: p }
agent planner { provider: p }
"#;

#[test]
fn writers_append_and_readers_read_every_entry_so_far_in_their_context() {
    let source = format!(
        r#"{HEAD}blackboard notes {{ entry: {{ text: string }}, writers: [scribe], readers: [planner] }}
workflow w {{
  start: first
  node first: agent scribe {{ output: {{ text: string }}, writes: [notes] }}
  node look: agent planner {{ output: string, reads: [notes] }}
  node second: agent scribe {{ output: {{ text: string }}, writes: [notes] }}
  node again: agent planner {{ output: string, reads: [notes] }}
  node done: end ok
  first -> look -> second -> again -> done
}}
"#
    );
    let ran = run(
        program(&source),
        |a| match a.node.as_str() {
            "first" => json!({ "text": "one" }),
            "second" => json!({ "text": "two" }),
            _ => json!("seen"),
        },
        |_| Decision::Approve,
    );
    let appended = ran.appended();
    assert_eq!(appended, vec![("notes".into(), "first".into(), 1, None), ("notes".into(), "second".into(), 2, None)]);
    assert_eq!(ran.context_of("look")["blackboards"], json!({ "notes": [{ "text": "one" }] }));
    assert_eq!(ran.context_of("again")["blackboards"], json!({ "notes": [{ "text": "one" }, { "text": "two" }] }));
    // A writer that does not read sees nothing of the blackboard.
    assert!(ran.context_of("second").get("blackboards").is_none());
    let reads: Vec<(String, u32)> = ran
        .events
        .iter()
        .filter_map(|e| match &e.body {
            Body::BlackboardRead { node, entries, .. } => Some((node.clone(), *entries)),
            _ => None,
        })
        .collect();
    assert_eq!(reads, vec![("look".into(), 1), ("again".into(), 2)]);
}

#[test]
fn an_append_that_requires_approval_waits_for_it_and_a_rejected_one_is_left_out() {
    let source = format!(
        r#"{HEAD}blackboard decisions {{ entry: string, writers: [scribe], readers: [planner], requires: approval }}
workflow w {{
  start: first
  escalate_to: lead
  node first: agent scribe {{ output: string, writes: [decisions] }}
  node second: agent scribe {{ output: string, writes: [decisions] }}
  node look: agent planner {{ output: string, reads: [decisions] }}
  node done: end ok
  first -> second -> look -> done
}}
"#
    );
    // The lead approves the first append and rejects the second.
    let ran = run(
        program(&source),
        |a| json!(a.node.clone()),
        |h| if h.subject.ends_with(".first") { Decision::Approve } else { Decision::Reject },
    );
    let subjects: Vec<&str> = ran.humans.iter().map(|h| h.subject.as_str()).collect();
    assert_eq!(subjects, ["blackboard.decisions.first", "blackboard.decisions.second"]);
    assert_eq!(ran.humans[0].principals, ["lead"]);
    assert_eq!(ran.appended(), vec![("decisions".into(), "first".into(), 1, Some("lead".into()))]);
    assert_eq!(ran.context_of("look")["blackboards"], json!({ "decisions": ["first"] }));
    let applied: Vec<Applied> = ran
        .events
        .iter()
        .filter_map(|e| match &e.body {
            Body::DecisionApplied { action, .. } => Some(action.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(applied, [Applied::Append, Applied::Refuse]);
    // Nothing follows the writer before its append is decided.
    let position = |pred: &dyn Fn(&Body) -> bool| ran.events.iter().position(|e| pred(&e.body)).expect("event");
    let decided = position(&|b| matches!(b, Body::DecisionApplied { subject, .. } if subject == "blackboard.decisions.first"));
    let second = position(&|b| matches!(b, Body::NodeStarted { node, .. } if node == "second"));
    assert!(decided < second, "`second` started before the append of `first` was decided");
}

#[test]
fn an_append_that_requires_a_gate_pass_happens_only_when_the_gate_passes() {
    let source = format!(
        r#"{HEAD}blackboard checked {{ entry: string, writers: [scribe], readers: [planner], requires: gate_pass }}
workflow w {{
  start: draft
  node draft: agent scribe {{ output: string, writes: [checked], max_visits: 2 }}
  node look: agent planner {{ output: string, reads: [checked] }}
  node done: end ok
  draft -> look -> done
  gate long_enough: draft -> look {{
    evaluate: [predicate(len(draft) > 3)]
    on PASS -> continue
    on BLOCK -> revise(draft)
  }}
}}
"#
    );
    // The first draft is too short (BLOCK: not appended), the second passes.
    let drafts = std::sync::Mutex::new(vec!["long enough", "no"]);
    let ran = run(
        program(&source),
        |a| match a.node.as_str() {
            "draft" => json!(drafts.lock().expect("drafts").pop().expect("a draft")),
            _ => json!("seen"),
        },
        |_| Decision::Approve,
    );
    assert_eq!(ran.appended(), vec![("checked".into(), "draft".into(), 1, None)]);
    assert_eq!(ran.context_of("look")["blackboards"], json!({ "checked": ["long enough"] }));
}

#[test]
fn trace_check_holds_appends_and_reads_to_the_plan() {
    let source = format!(
        r#"{HEAD}blackboard decisions {{ entry: string, writers: [scribe], readers: [planner], requires: approval }}
workflow w {{
  start: first
  escalate_to: lead
  node first: agent scribe {{ output: string, writes: [decisions] }}
  node look: agent planner {{ output: string, reads: [decisions] }}
  node done: end ok
  first -> look -> done
}}
"#
    );
    let plan = program(&source);
    let ran = run(plan.clone(), |a| json!(a.node.clone()), |_| Decision::Approve);
    let deviations = |events: &[Event]| -> Vec<String> {
        tracecheck::check(&plan, events, &tracecheck::Options::default())
            .deviations
            .into_iter()
            .filter(|d| d.code == tracecheck::codes::BLACKBOARD)
            .map(|d| d.message)
            .collect()
    };
    assert_eq!(deviations(&ran.events), Vec::<String>::new());
    // An append without its approval: the decision removed (and the seqs
    // renumbered so only the blackboard check can object).
    let without_approval: Vec<Event> = ran
        .events
        .iter()
        .filter(|e| !matches!(&e.body, Body::DecisionApplied { .. } | Body::DecisionRequested { .. } | Body::Message { .. }))
        .cloned()
        .collect();
    let found = deviations(&renumber(without_approval));
    assert!(found.iter().any(|m| m.contains("requires an approval")), "{found:?}");
    // A read that claims fewer entries than were appended.
    let mut short_read = ran.events.clone();
    for e in &mut short_read {
        if let Body::BlackboardRead { entries, .. } = &mut e.body {
            *entries = 0;
        }
    }
    let found = deviations(&short_read);
    assert!(found.iter().any(|m| m.contains("read 0 entries")), "{found:?}");
    // An append by a node that does not write the blackboard.
    let mut forged = ran.events.clone();
    for e in &mut forged {
        if let Body::BlackboardAppended { node, .. } = &mut e.body {
            *node = "look".into();
        }
    }
    let found = deviations(&forged);
    assert!(found.iter().any(|m| m.contains("`look` does not write blackboard `decisions`")), "{found:?}");
}

/// The events with `seq`, ids and parents renumbered after some were removed.
fn renumber(events: Vec<Event>) -> Vec<Event> {
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
