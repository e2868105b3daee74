//! The stable deviation codes. Never reuse one; add new ones at the end
//! of their group and explain them in [`CODES`] and `docs/trace-check.md`.

use serde::Serialize;

/// A line is not a trace event.
pub const MALFORMED: &str = "T001";
/// `seq` is not 1, 2, 3 … without gaps or repeats.
pub const SEQ: &str = "T002";
/// Envelope ids disagree: run id, event id, parent.
pub const ENVELOPE: &str = "T003";
/// The run's own lifecycle: start, pause, resume, termination.
pub const RUN_LIFECYCLE: &str = "T004";
/// A node's visit does not follow started → completed/failed.
pub const NODE_LIFECYCLE: &str = "T005";
/// An attempt, agent turn or tool call outside an open attempt.
pub const ATTEMPT_LIFECYCLE: &str = "T006";
/// An edge the plan does not have, not even implicitly.
pub const EDGE_NOT_IN_PLAN: &str = "T010";
/// A node started without an edge into it, or an edge left a node
/// that had not completed.
pub const NODE_ORDER: &str = "T011";
/// A gated boundary crossed without a PASS or an approve.
pub const GATE_NOT_PASSED: &str = "T020";
/// A gate triggered by someone other than the plan allows.
pub const GATE_TRIGGER: &str = "T021";
/// A decision made by a principal the plan does not authorise.
pub const DECIDER: &str = "T022";
/// A decision nobody asked for, or not one of those offered.
pub const DECISION_UNREQUESTED: &str = "T023";
/// A tool call the plan does not permit.
pub const TOOL_NOT_PERMITTED: &str = "T024";
/// A decision applied as an action other than the plan's for it.
pub const DECISION_ACTION: &str = "T025";
/// A handoff or delegation that is not the plan's: missing, extra,
/// another context slice, contract or budget.
pub const TRANSFER: &str = "T030";
/// A handoff payload or delegation input that is not what the
/// contract says: not the producer's output, or not of its type.
pub const PAYLOAD: &str = "T031";
/// A budget scope used more than its limit.
pub const BUDGET_EXCEEDED: &str = "T040";
/// Reservations and settlements that do not pair up.
pub const BUDGET_ACCOUNTING: &str = "T041";
/// A policy of the plan is violated by the trace.
pub const POLICY: &str = "T050";
/// The termination reason or status does not follow from the events.
pub const TERMINATION: &str = "T060";

/// A deviation code, its title and its explanation.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct CodeInfo {
    pub code: &'static str,
    pub title: &'static str,
    pub explanation: &'static str,
}

/// Every deviation code, in order, with its explanation (what `flow trace
/// check` prints for `--explain`, and what `docs/trace-check.md` says).
pub const CODES: &[CodeInfo] = &[
    CodeInfo {
        code: MALFORMED,
        title: "malformed event",
        explanation: "A line of the trace is not a trace event: not JSON, an unknown `kind`, a payload that misses a field or has one of the wrong type, or a word outside the closed vocabulary (an edge's `via`, a gate's `outcome`, a run's `status`) (the schema is stdlib/schemas/trace-event.schema.json). The line is skipped; its `seq`, when it has one, still counts for T002.",
    },
    CodeInfo {
        code: SEQ,
        title: "seq not continuous",
        explanation: "Only the control plane assigns `seq`, and it assigns 1, 2, 3 … in order. A gap means events were removed, a repeat or a step back means events were duplicated or reordered.",
    },
    CodeInfo {
        code: ENVELOPE,
        title: "inconsistent envelope",
        explanation: "Every event of a run carries the run's `run_id`, the `event_id` `{run_id}/{seq}`, and, when it has one, a `parent_event_id` naming an earlier event of the same run. An event that names another run, another id, or a parent that comes later (or never) was not written by this run's control plane in this order.",
    },
    CodeInfo {
        code: RUN_LIFECYCLE,
        title: "run lifecycle",
        explanation: "A trace begins with `run_started` (once), names a workflow of the plan, and ends with `run_terminated` after which nothing follows; after `run_paused` only `run_resumed` may come.",
    },
    CodeInfo {
        code: NODE_LIFECYCLE,
        title: "node lifecycle",
        explanation: "A node's visit is `node_started` (kind and visit number as in the plan, not while the previous visit runs), then `node_completed` or `node_failed`. A completion or failure without a start, or a second one for the same visit, departs from it. A node completed as `skipped` or `degraded` after it failed is a handler's doing and is allowed.",
    },
    CodeInfo {
        code: ATTEMPT_LIFECYCLE,
        title: "attempt lifecycle",
        explanation: "Attempts run inside a node's running visit, numbered 1, 2, … per visit; agent turns, tool calls and refusals belong to an open attempt (and a turn to the node's own agent); a tool call completes only after it started; an attempt ends once (`attempt_completed`, `attempt_failed` or `lease_expired`).",
    },
    CodeInfo {
        code: EDGE_NOT_IN_PLAN,
        title: "edge not in the plan",
        explanation: "Every `edge_taken` must be an edge of the plan with the guard it names (`always`, `when …`, `else`), the gated boundary it names (`gate NAME`), or one of the engine's implicit edges: a parallel node's fan-out to its branches, a branch into the join that lists it, a loop's round into its first node, a map's item into its node, or a handler's `goto`/`activate`/`revise`/`replan` to a target the plan's actions name.",
    },
    CodeInfo {
        code: NODE_ORDER,
        title: "node order",
        explanation: "Apart from the start node at the beginning, a node starts only after an edge into it was taken; an edge of the graph (or a gated crossing, or into a join) leaves a node only after that node completed, and a fan-out, loop round or map item only while its node runs.",
    },
    CodeInfo {
        code: GATE_NOT_PASSED,
        title: "gate not passed",
        explanation: "Nothing crosses a gate's boundary `from -> to` unless the gate let it: an `edge_taken` from→to needs a `gate_recorded` PASS for the gate, or a `decision_applied` approve on it (or on the escalation its handler asked for: `on BLOCK -> escalate(P)`, then approve on `escalation.P`), since the last crossing. Also reported: a `gate_recorded` for a gate the workflow does not declare on that boundary.",
    },
    CodeInfo {
        code: GATE_TRIGGER,
        title: "unauthorised gate trigger",
        explanation: "A gate is triggered by whoever ran its `from` node (`agent.NAME`, or `control` for a node that is not an agent). The recorded trigger must be that agent, and when the gate declares `trigger: { by: [...] }` an outcome other than BLOCK needs a trigger by one of them (roles expand to their members).",
    },
    CodeInfo {
        code: DECIDER,
        title: "unauthorised decider",
        explanation: "A decision is applied by a principal the plan authorises: a gate's `decided_by` (else the workflow's `escalate_to`), a human node's principals, the principal of an escalation, the workflow's `escalate_to` for reconciliations and confirmations (plus the tool's audit readers); it must also be one of the deciders the request named. Roles expand to their members.",
    },
    CodeInfo {
        code: DECISION_UNREQUESTED,
        title: "decision not requested",
        explanation: "A `decision_applied` answers a pending `decision_requested` on the same subject with one of the decisions offered; a decision nobody asked for, a second answer to one request, or a decision on a gate that neither recorded REQUIRES_DECISION nor took its `decide` handler departs from the plan.",
    },
    CodeInfo {
        code: TOOL_NOT_PERMITTED,
        title: "tool call not permitted",
        explanation: "A tool call by an agent needs the tool in the agent's `tools` and the agent in the tool's `allowed_agents` (when it names any); otherwise the control plane must refuse it (`tool_call_refused`). A tool node calls its own tool only.",
    },
    CodeInfo {
        code: DECISION_ACTION,
        title: "decision applied as another action",
        explanation: "A `decision_applied` on a gate or a human node records the action the decision takes, and the plan fixes it: the gate's (or node's) handler for the decision, else the default — at a gate `approve` continues, `revise` re-runs the gate's `from` node, `replan` re-runs the replan scope, `reject` terminates; at a human node the node completes (`continue`). Any other action departs from the plan.",
    },
    CodeInfo {
        code: TRANSFER,
        title: "handoff or delegation not as planned",
        explanation: "A handoff carries the context slice its declaration names — `context` (default isolated) and `context_fields` exactly — and a delegation names its declared contract and grants the contract's budget. A handoff or delegation the plan does not declare, one not on an edge being taken, or a declared one missing before the receiving node starts, departs from the plan.",
    },
    CodeInfo {
        code: PAYLOAD,
        title: "payload not as contracted",
        explanation: "A handoff's payload is what its producer made (the artifact of `from`'s last completion) and, when the handoff declares `payload: Type`, a value of that type (a refused handoff excepted); a delegation's inputs are of the contract's `inputs` type. Types are checked on the artifacts of the run directory; without an artifact store the report says they were not checked. A referenced artifact missing from the store is a deviation.",
    },
    CodeInfo {
        code: BUDGET_EXCEEDED,
        title: "budget exceeded",
        explanation: "The use a trace records — steps (one per attempt), tokens, tool calls and cost from `budget_settled` — summed per scope (run, agent, node visit, delegation) must stay within the plan's limits for that scope.",
    },
    CodeInfo {
        code: BUDGET_ACCOUNTING,
        title: "budget accounting",
        explanation: "Every `budget_reserved` is settled by a `budget_settled` of the same attempt before the attempt completes or fails (a lost attempt, a cancellation or an exhaustion excepted), a settlement follows a reservation, and both name scopes the plan declares.",
    },
    CodeInfo {
        code: POLICY,
        title: "policy violated",
        explanation: "A policy of the plan (top-level, or the workflow's) does not hold of the trace, judged by the same monitors `flow run` and the model checker use (reference §8.3): a safety violation at an event, or an obligation still open when the run terminated. A trace that has not terminated is judged on its safety part only.",
    },
    CodeInfo {
        code: TERMINATION,
        title: "termination inconsistent",
        explanation: "`run_terminated` says why the run ended, and the event it follows from must agree: an end node's target and status (a `success` end may fail under a `success` condition or an `output` type), a `terminate(reason)`, `fallback(reason)`, `halt` or `return_partial` action, a node's failure (`NODE_failed`), a budget exhaustion, a rejected escalation (a run monitor's halt on the way may make the status failure). The status is one of success, failure, partial, escalated, cancelled.",
    },
];

/// The explanation of a code.
pub fn explain(code: &str) -> Option<&'static CodeInfo> {
    CODES.iter().find(|c| c.code.eq_ignore_ascii_case(code))
}
