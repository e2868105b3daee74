//! The span tree of a small run written by hand.

use super::*;

const RUN: &str = "run-1";

/// Events of a run: an agent node whose turn calls a tool, a gate on the
/// edge after it that blocks, a policy violation, the end.
fn events() -> Vec<Event> {
    let lines = [
        r#""kind":"run_started","payload":{"schema_version":1,"workflow":"w","plan_digest":"sha256:p"}"#,
        r#""kind":"node_started","payload":{"schema_version":1,"node":"draft","node_kind":"agent","visit":1}"#,
        r#""kind":"attempt_started","payload":{"schema_version":1,"node":"draft","attempt_id":"draft#1.1","attempt_no":1,"trigger_reason":"first"}"#,
        r#""kind":"tool_call_started","payload":{"schema_version":1,"tool":"search","node":"draft","attempt_id":"draft#1.1","agent":"writer","request_key":"k","input":{"digest":"sha256:i","size":1}}"#,
        r#""kind":"tool_call_completed","payload":{"schema_version":1,"tool":"search","attempt_id":"draft#1.1","ok":false,"error":"down","duration_ms":3}"#,
        r#""kind":"agent_turn","payload":{"schema_version":1,"agent":"writer","node":"draft","attempt_id":"draft#1.1","provider":"local","model":"small","request_key":"k","usage":{"tokens":30,"cost":0.5,"duration_ms":2},"input_tokens":20,"output_tokens":10,"finish_reasons":["stop"]}"#,
        r#""kind":"attempt_completed","payload":{"schema_version":1,"node":"draft","attempt_id":"draft#1.1","attempt_no":1,"output":{"digest":"sha256:a","size":1}}"#,
        r#""kind":"node_completed","payload":{"schema_version":1,"node":"draft","status":"completed"}"#,
        r#""kind":"gate_recorded","payload":{"schema_version":1,"gate":"g","from":"draft","to":"done","outcome":"BLOCK","reason":"empty","evaluators":[{"evaluator":"predicate(draft.ok)","outcome":"BLOCK","reason":"empty"}],"trigger":"node_completed"}"#,
        r#""kind":"policy_violated","payload":{"schema_version":1,"policy":"p","response":"warn","offending":"x","message":"too late"}"#,
        r#""kind":"run_terminated","payload":{"schema_version":1,"reason":"g_blocked","status":"failure"}"#,
    ];
    lines
        .iter()
        .enumerate()
        .map(|(i, body)| {
            let seq = i + 1;
            let line = format!(
                r#"{{"run_id":"{RUN}","execution_id":"exec-1","seq":{seq},"event_id":"{RUN}/{seq}","producer":"control",{body},"time":"2026-01-01T00:00:00.{:03}Z"}}"#,
                seq * 10
            );
            flow_trace::event_from_str(&line).unwrap_or_else(|e| panic!("{line}: {e}"))
        })
        .collect()
}

fn spans() -> Vec<Span> {
    let mut mapper = Mapper::new(RUN, HashMap::from([("draft".to_string(), "writer".to_string())]));
    let mut out = Vec::new();
    for event in events() {
        out.extend(mapper.push(&event));
    }
    out.extend(mapper.finish());
    out
}

fn named<'a>(spans: &'a [Span], name: &str) -> &'a Span {
    spans
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no span `{name}` in {:?}", spans.iter().map(|s| &s.name).collect::<Vec<_>>()))
}

#[test]
fn a_run_is_a_tree_of_genai_spans() {
    let spans = spans();
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    // The visit waits for the gates that judge it.
    assert_eq!(names, ["execute_tool search", "chat small", "invoke_agent writer", "flow.gate g", "flow.node draft", "invoke_workflow w"]);
    let root = named(&spans, "invoke_workflow w");
    let (visit, agent) = (named(&spans, "flow.node draft"), named(&spans, "invoke_agent writer"));
    let (chat, tool, gate) = (named(&spans, "chat small"), named(&spans, "execute_tool search"), named(&spans, "flow.gate g"));
    assert_eq!(root.parent, None);
    assert_eq!(
        (visit.parent, agent.parent, chat.parent, tool.parent, gate.parent),
        (Some(root.id), Some(visit.id), Some(agent.id), Some(agent.id), Some(root.id))
    );
    assert!(spans.iter().all(|s| s.trace_id == trace_id(RUN)));
    assert_eq!(root.id, span_id("run-1/1"));
    assert_eq!((root.start_ms % 1000, root.end_ms % 1000), (10, 110));
    assert_eq!(root.error.as_deref(), Some("failure: g_blocked"));
    // The chat: the provider, the model, the token split; it took its duration.
    assert_eq!(chat.kind, Kind::Client);
    assert_eq!(chat.attr("gen_ai.provider.name"), Some(&Attr::from("local")));
    assert_eq!(chat.attr("gen_ai.request.model"), Some(&Attr::from("small")));
    assert_eq!(
        (chat.attr("gen_ai.usage.input_tokens"), chat.attr("gen_ai.usage.output_tokens")),
        (Some(&Attr::Int(20)), Some(&Attr::Int(10)))
    );
    assert_eq!(chat.end_ms - chat.start_ms, 2);
    assert_eq!(chat.attr("gen_ai.response.finish_reasons"), Some(&Attr::Strs(vec!["stop".into()])));
    assert_eq!(tool.attr("gen_ai.tool.call.id"), Some(&Attr::from("run-1/4")));
    assert_eq!(tool.error.as_deref(), Some("down"));
    // The gate judged the visit of `draft`.
    let evaluation = visit.events.iter().find(|e| e.name == "gen_ai.evaluation.result").expect("the gate's evaluation on the visit");
    let label = evaluation.attributes.iter().find(|(k, _)| *k == "gen_ai.evaluation.score.label").map(|(_, v)| v);
    assert_eq!(label, Some(&Attr::from("fail")));
    assert_eq!(gate.events.len(), 1, "the evaluator's result on the gate");
    // The policy judged the run.
    assert!(root.events.iter().any(|e| e.name == "gen_ai.evaluation.result"));
}

#[test]
fn the_same_events_give_the_same_spans_and_a_cut_run_is_closed_at_its_last_event() {
    assert_eq!(spans(), spans());
    let mut mapper = Mapper::new(RUN, HashMap::new());
    let mut closed = Vec::new();
    for event in events().iter().take(4) {
        closed.extend(mapper.push(event));
    }
    assert!(closed.is_empty(), "nothing has ended yet");
    let rest = mapper.finish();
    let names: Vec<&str> = rest.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["execute_tool search", "flow.attempt draft", "flow.node draft", "invoke_workflow w"]);
    assert!(rest.iter().all(|s| s.end_ms % 1000 == 40), "closed at the last event");
}
