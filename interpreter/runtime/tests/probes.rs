//! A probe, a native check or a judge given an empty list checks nothing:
//! the evaluator takes the gate's `on_empty` outcome (by default its
//! `on_error`: inconclusive, never PASS)
//! (issue "Computed, not claimed": a MuseCraft probe over no clips passed).

mod common;

use common::{ending, program, run};
use flow_trace::{Body, Decision, Outcome};
use serde_json::json;

fn source(on_error: &str) -> String {
    format!(
        r#"
import std.evaluators
provider p: scripted
principal boss: human
agent maker {{ provider: p }}
type Clips = {{ clips: [{{ path: string }}] }}
evaluator has_audio: command {{
  input: {{ path: string }}
  argv: ["ffprobe", "{{path}}"]
  expect: exit_zero
  timeout: 5s
}}
workflow w {{
  start: make
  node make: agent maker {{ output: Clips }}
  node use: end used
  node stop: end stopped {{ status: failure }}
  node ask: end asked {{ status: escalated }}
  make -> use
  gate probed: make -> use {{
    evaluate: [has_audio(make.clips), file_exists(make.clips)]
    on_error: {on_error}
    decided_by: [boss]
    decisions: [approve, reject]
    on PASS -> continue
    on BLOCK -> goto(stop)
    on REQUIRES_DECISION -> decide
    on approve -> continue
    on reject -> goto(ask)
  }}
}}
"#
    )
}

#[test]
fn probing_an_empty_list_is_inconclusive_never_pass() {
    for (on_error, outcome, end) in [("BLOCK", Outcome::Block, "stopped"), ("REQUIRES_DECISION", Outcome::RequiresDecision, "asked")] {
        // No probe is ever sent (the harness refuses one): nothing to probe.
        // Asked, the boss rejects.
        let ran = run(program(&source(on_error)), json!({}), |_| json!({ "clips": [] }), |_| Decision::Reject);
        let (recorded, evaluators) = ran
            .events
            .iter()
            .find_map(|e| match &e.body {
                Body::GateRecorded { outcome, evaluators, .. } => Some((*outcome, evaluators.clone())),
                _ => None,
            })
            .expect("the gate ran");
        assert_eq!(recorded, outcome, "on_error {on_error}");
        for ev in &evaluators {
            assert_eq!(ev.outcome, outcome, "{ev:?}");
            assert!(ev.error, "{ev:?}");
            assert!(ev.reason.as_deref().unwrap_or_default().contains("nothing to probe"), "{ev:?}");
        }
        assert_eq!(evaluators.len(), 2);
        assert_eq!(ending(&ran.events), end);
    }
}

#[test]
fn a_declared_on_empty_outcome_is_what_an_empty_list_gives() {
    // `on_empty` decides, not `on_error`: PASS when nothing to check is
    // fine, REQUIRES_DECISION to ask, BLOCK to stop.
    for (on_empty, outcome, end) in
        [("PASS", Outcome::Pass, "used"), ("REQUIRES_DECISION", Outcome::RequiresDecision, "asked"), ("BLOCK", Outcome::Block, "stopped")]
    {
        let source = source("REQUIRES_DECISION")
            .replace("    on_error: REQUIRES_DECISION\n", &format!("    on_error: REQUIRES_DECISION\n    on_empty: {on_empty}\n"));
        let ran = run(program(&source), json!({}), |_| json!({ "clips": [] }), |_| Decision::Reject);
        let evaluators = ran
            .events
            .iter()
            .find_map(|e| match &e.body {
                Body::GateRecorded { outcome: o, evaluators, .. } => {
                    assert_eq!(*o, outcome, "on_empty {on_empty}");
                    Some(evaluators.clone())
                }
                _ => None,
            })
            .expect("the gate ran");
        for ev in &evaluators {
            assert_eq!(ev.outcome, outcome, "{ev:?}");
            // Nothing checked is an error unless declared to pass.
            assert_eq!(ev.error, on_empty != "PASS", "{ev:?}");
        }
        assert_eq!(ending(&ran.events), end, "on_empty {on_empty}");
    }
}
