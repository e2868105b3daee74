//! `flow coverage`: how much of a plan's coverage obligations a set of
//! traces exercises.
//!
//! The obligations are the verifier's (`flow_verify::obligations`): every
//! reachable agent, every allowed tool edge, every restricted tool edge
//! (probed and refused), every delegation edge, every gate outlet. The
//! command line hands them in as [`Goal`]s, so the runtime reads only the
//! plan and the traces. An obligation of workflow `W` is covered by a trace
//! of `W` (its `run_started` names the workflow) in which:
//!
//! | kind | covered by |
//! |---|---|
//! | `agent` A | an `agent_turn` by A, or a `node_started` of a node running A |
//! | `tool_edge` A→T | a `tool_call_started` of T with `agent` A |
//! | `restricted_tool_edge` A→T | a `tool_call_refused` of T with `agent` A |
//! | `delegation_edge` F→T | a `delegation` from F to T |
//! | `gate_outlet` G:O | a `gate_recorded` of G with outcome O, or a `decision_applied` on G with decision O |

use flow_check::ir::NodeKind;
use flow_check::ir::Program;
use flow_trace::{Body, Event};
use serde::Serialize;
use std::collections::HashSet;

/// The obligation kinds, in report order.
pub const KINDS: &[&str] = &["agent", "tool_edge", "restricted_tool_edge", "delegation_edge", "gate_outlet"];

/// One coverage obligation (the verifier's, as data).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Goal {
    pub kind: String,
    /// A stable identifier, e.g. `tool_edge:researcher->search`.
    pub id: String,
    pub workflow: String,
    /// The parts: agent and tool, delegator and delegate, gate and outlet.
    pub subject: Vec<String>,
    pub description: String,
}

/// A trace to measure: a name for the report and its events.
#[derive(Debug, Clone, Copy)]
pub struct Trace<'a> {
    pub name: &'a str,
    pub events: &'a [Event],
}

/// The coverage of one kind.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KindCoverage {
    pub kind: &'static str,
    pub covered: usize,
    pub total: usize,
    /// `covered / total` as a percentage; `None` when there is nothing to cover.
    pub percent: Option<f64>,
}

/// One obligation's status.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GoalStatus {
    pub id: String,
    pub kind: String,
    pub workflow: String,
    pub description: String,
    pub covered: bool,
    /// The traces that cover it.
    pub covered_by: Vec<String>,
}

/// What a set of traces covers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CoverageReport {
    /// The traces measured, by name, with the workflow each ran.
    pub traces: Vec<TraceInfo>,
    pub kinds: Vec<KindCoverage>,
    pub total: KindTotal,
    pub obligations: Vec<GoalStatus>,
    /// The ids of the obligations no trace covers.
    pub uncovered: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceInfo {
    pub name: String,
    pub workflow: Option<String>,
    pub events: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KindTotal {
    pub covered: usize,
    pub total: usize,
    pub percent: Option<f64>,
}

/// What one trace exercised, as obligation ids of its workflow.
fn exercised(program: &Program, events: &[Event]) -> (Option<String>, HashSet<String>) {
    let workflow = events.iter().find_map(|e| match &e.body {
        Body::RunStarted { workflow, .. } => Some(workflow.clone()),
        _ => None,
    });
    let wf = workflow.as_deref().and_then(|w| program.workflows.get(w));
    let mut ids = HashSet::new();
    for e in events {
        match &e.body {
            Body::AgentTurn { agent, .. } => {
                ids.insert(format!("agent:{agent}"));
            }
            Body::NodeStarted { node, .. } => {
                if let Some(agent) =
                    wf.and_then(|w| w.nodes.get(node)).filter(|n| n.kind() == NodeKind::Agent).and_then(|n| n.target.first())
                {
                    ids.insert(format!("agent:{agent}"));
                }
            }
            Body::ToolCallStarted { tool, agent: Some(agent), .. } => {
                ids.insert(format!("tool_edge:{agent}->{tool}"));
            }
            Body::ToolCallRefused { tool, agent: Some(agent), .. } => {
                ids.insert(format!("restricted_tool_edge:{agent}->{tool}"));
            }
            Body::Delegation { from, to, .. } => {
                ids.insert(format!("delegation_edge:{from}->{to}"));
            }
            Body::GateRecorded { gate, outcome, .. } => {
                ids.insert(format!("gate_outlet:{gate}:{outcome}"));
            }
            Body::DecisionApplied { subject, decision, .. } => {
                ids.insert(format!("gate_outlet:{subject}:{decision}"));
            }
            _ => {}
        }
    }
    (workflow, ids)
}

fn percent(covered: usize, total: usize) -> Option<f64> {
    // One decimal, so reports are stable text.
    (total > 0).then(|| (covered as f64 * 1000.0 / total as f64).round() / 10.0)
}

/// Measures `goals` over `traces`.
pub fn coverage(program: &Program, goals: &[Goal], traces: &[Trace]) -> CoverageReport {
    let seen: Vec<(Option<String>, HashSet<String>)> = traces.iter().map(|t| exercised(program, t.events)).collect();
    let mut obligations = Vec::with_capacity(goals.len());
    for goal in goals {
        let covered_by: Vec<String> = traces
            .iter()
            .zip(&seen)
            .filter(|(_, (wf, ids))| wf.as_deref() == Some(goal.workflow.as_str()) && ids.contains(&goal.id))
            .map(|(t, _)| t.name.to_string())
            .collect();
        obligations.push(GoalStatus {
            id: goal.id.clone(),
            kind: goal.kind.clone(),
            workflow: goal.workflow.clone(),
            description: goal.description.clone(),
            covered: !covered_by.is_empty(),
            covered_by,
        });
    }
    let kinds = KINDS
        .iter()
        .map(|&kind| {
            let of_kind = obligations.iter().filter(|o| o.kind == kind);
            let total = of_kind.clone().count();
            let covered = of_kind.filter(|o| o.covered).count();
            KindCoverage { kind, covered, total, percent: percent(covered, total) }
        })
        .collect();
    let covered = obligations.iter().filter(|o| o.covered).count();
    let total = KindTotal { covered, total: obligations.len(), percent: percent(covered, obligations.len()) };
    let uncovered = obligations.iter().filter(|o| !o.covered).map(|o| o.id.clone()).collect();
    let traces = traces
        .iter()
        .zip(&seen)
        .map(|(t, (wf, _))| TraceInfo { name: t.name.to_string(), workflow: wf.clone(), events: t.events.len() })
        .collect();
    CoverageReport { traces, kinds, total, obligations, uncovered }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flow_trace::{ArtifactRef, Usage, SCHEMA_VERSION};

    fn event(seq: u64, body: Body) -> Event {
        Event {
            run_id: "r".into(),
            execution_id: "exec-1".into(),
            seq,
            event_id: Event::id_for("r", seq).into(),
            parent_event_id: None,
            producer: "control".into(),
            body,
            time: "2026-01-01T00:00:00Z".into(),
            prev: None,
        }
    }

    fn goal(kind: &str, id: &str, workflow: &str) -> Goal {
        Goal { kind: kind.into(), id: id.into(), workflow: workflow.into(), subject: Vec::new(), description: String::new() }
    }

    #[test]
    fn traces_cover_the_obligations_of_their_own_workflow() {
        let mut program = Program::default();
        let wf: flow_check::ir::Workflow = serde_json::from_value(serde_json::json!({
            "name": "w", "props": {}, "nodes": {}, "edges": [], "gates": {}, "transfers": [], "handlers": [], "policies": [],
            "loc": { "file": 0, "start": 0, "end": 0 }
        }))
        .unwrap();
        program.workflows.insert("w".into(), wf);
        let v = SCHEMA_VERSION;
        let digest = ArtifactRef { digest: "sha256:0".into(), size: 1 };
        let events = vec![
            event(1, flow_check::events::run_started(&program.workflows["w"], "d", None, None)),
            event(
                2,
                Body::ToolCallStarted {
                    schema_version: v,
                    tool: "search".into(),
                    node: "n".into(),
                    attempt_id: "n#1.1".into(),
                    agent: Some("a".into()),
                    request_key: "k".into(),
                    idempotency_key: None,
                    input: digest.clone(),
                },
            ),
            event(
                3,
                Body::Delegation {
                    schema_version: v,
                    from: "lead".into(),
                    to: "scout".into(),
                    contract: "c".into(),
                    inputs: digest,
                    budget: Usage::default(),
                    reason: None,
                    artifacts: Vec::new(),
                },
            ),
            event(
                4,
                Body::GateRecorded {
                    schema_version: v,
                    gate: "g".into(),
                    from: "x".into(),
                    to: "y".into(),
                    outcome: flow_trace::Outcome::Pass,
                    reason: None,
                    evaluators: Vec::new(),
                    trigger: "control on node_completed".into(),
                },
            ),
        ];
        let goals = vec![
            goal("tool_edge", "tool_edge:a->search", "w"),
            goal("tool_edge", "tool_edge:a->other", "w"),
            goal("delegation_edge", "delegation_edge:lead->scout", "w"),
            goal("gate_outlet", "gate_outlet:g:PASS", "w"),
            goal("gate_outlet", "gate_outlet:g:BLOCK", "w"),
            // Same id, another workflow: not covered by a trace of `w`.
            goal("tool_edge", "tool_edge:a->search", "other"),
        ];
        let report = coverage(&program, &goals, &[Trace { name: "t1", events: &events }]);
        let by_kind = |k: &str| report.kinds.iter().find(|c| c.kind == k).unwrap().clone();
        assert_eq!((by_kind("tool_edge").covered, by_kind("tool_edge").total), (1, 3));
        assert_eq!(by_kind("tool_edge").percent, Some(33.3));
        assert_eq!(by_kind("delegation_edge").percent, Some(100.0));
        assert_eq!(by_kind("gate_outlet").percent, Some(50.0));
        assert_eq!(by_kind("agent").percent, None);
        assert_eq!(report.total.covered, 3);
        assert_eq!(report.uncovered, vec!["tool_edge:a->other", "gate_outlet:g:BLOCK", "tool_edge:a->search"]);
        assert_eq!(report.obligations[0].covered_by, vec!["t1"]);
    }
}
