//! The stable deviation codes of trace check, in the same registry as the
//! diagnostic codes (`flow_diagnostics::code_registry!`). Never reuse one;
//! add new ones at the end of their group and explain them here and in
//! `docs/trace-check.md`. `flow trace check --explain CODE` prints them.

pub use flow_diagnostics::{Code, CodeInfo};

flow_diagnostics::code_registry! {
    MALFORMED = "T001", "malformed event",
r#"A line of the trace is not a trace event: not JSON, an unknown `kind`, a payload that misses a field or has one of the wrong type, or a word outside the closed vocabulary (an edge's `via`, a gate's `outcome`, a run's `status`) (the schema is stdlib/schemas/trace-event.schema.json). The line is skipped; its `seq`, when it has one, still counts for T002."#;

    SEQ = "T002", "seq not continuous",
r#"Only the control plane assigns `seq`, and it assigns 1, 2, 3 … in order. A gap means events were removed, a repeat or a step back means events were duplicated or reordered."#;

    ENVELOPE = "T003", "inconsistent envelope",
r#"Every event of a run carries the run's `run_id`, the `event_id` `{run_id}/{seq}`, and, when it has one, a `parent_event_id` naming an earlier event of the same run. An event that names another run, another id, or a parent that comes later (or never) was not written by this run's control plane in this order."#;

    RUN_LIFECYCLE = "T004", "run lifecycle",
r#"A trace begins with `run_started` (once), names a workflow of the plan, and ends with `run_terminated` after which nothing follows; after `run_paused` only `run_resumed` may come."#;

    NODE_LIFECYCLE = "T005", "node lifecycle",
r#"A node's visit is `node_started` (kind and visit number as in the plan, not while the previous visit runs), then `node_completed` or `node_failed`. A completion or failure without a start, or a second one for the same visit, departs from it. A node completed as `skipped` or `degraded` after it failed is a handler's doing and is allowed."#;

    ATTEMPT_LIFECYCLE = "T006", "attempt lifecycle",
r#"Attempts run inside a node's running visit, numbered 1, 2, … per visit; agent turns, tool calls and refusals belong to an open attempt (and a turn to the node's own agent); a tool call completes only after it started; an attempt ends once (`attempt_completed`, `attempt_failed` or `lease_expired`)."#;

    EDGE_NOT_IN_PLAN = "T010", "edge not in the plan",
r#"Every `edge_taken` must be an edge of the plan with the guard it names (`always`, `when …`, `else`), the gated boundary it names (`gate NAME`), or one of the engine's implicit edges: a parallel node's fan-out to its branches, a branch into the join that lists it, a loop's round into its first node, a map's item into its node, or a handler's `goto`/`activate`/`revise`/`replan` to a target the plan's actions name."#;

    NODE_ORDER = "T011", "node order",
r#"Apart from the start node at the beginning, a node starts only after an edge into it was taken; an edge of the graph (or a gated crossing, or into a join) leaves a node only after that node completed, and a fan-out, loop round or map item only while its node runs."#;

    HOPS = "T012", "hop limit passed",
r#"A pair of nodes with a hop limit (a handoff's `max_hops` on the pair, else the workflow's `max_hops` on a pair with edges both ways) is crossed, either way, at most that many times; past it the engine takes no crossing and raises `max_hops` (its handler's `action_taken`, or `run_terminated` with reason `max_hops`), after which the pair's count starts again. An `edge_taken` that goes past the limit is reported."#;

    RERUN = "T013", "re-run not as planned",
r#"A `rerun` (a `revise` or `replan` taking effect) names a scope the plan's actions can name — one node for a revise; for a replan a gate's `replan_scope`, the start, or a `replan(node)` target — starts at the scope's entry (the node of the scope that leads to the rest) and supersedes exactly the entry and every node that depends on it (reference §6.3). The `edge_taken` via `revise`/`replan` that follows goes to that entry; such an edge with no `rerun` before it departs from the plan."#;

    STATE = "T014", "task state not as planned",
r#"A `state_changed` moves a state machine the plan declares, from the state it is in (its `initial` state at first, then the last one recorded), to the state the completing node declares (`state: MACHINE.STATE`), along a transition of the machine (or staying where it is)."#;

    COMPUTED = "T015", "computed value not as planned",
r#"A compute node's visit (or a join that votes) records one `computed` while it runs, and completes with that value (`node_completed` names the same artifact). Its `inputs` are exactly the names the plan's node reads — for a vote, branches of the join — each the digest of that node's last completed output (the run's input for `input`; null when there was none; `calls` and `facts` as the trace and its artifacts make them, held only with the artifacts). With the run's artifacts the value is made again from the inputs, by the engine's own evaluator, and must have the recorded digest: a value edited in the trace or the artifacts, or one made from other inputs, departs from the plan."#;

    RECORD = "T016", "record not as planned",
r#"A node's declared records (`record NAME { … }`) are written as `recorded` right after its `node_completed`, a gate's right after its `gate_recorded` — all of them, in the order the plan declares them, by their own node or gate (only the artifacts their inputs store may come between; a policy report ends the expectation, since a policy may hold or stop the record). Each names as `inputs` exactly what its fields read, each at the digest of that node's last completed output (the run's input for `input`), and holds every declared field once: in `values`, or in `errors` when it could not be made. With the run's artifacts the values are made again by the engine's own evaluator and must be the recorded ones, failing where they failed."#;

    GATE_NOT_PASSED = "T020", "gate not passed",
r#"Nothing crosses a gate's boundary `from -> to` unless the gate let it: an `edge_taken` from→to needs a `gate_recorded` PASS for the gate, or a `decision_applied` approve on it (or on the escalation its handler asked for: `on BLOCK -> escalate(P)`, then approve on `escalation.P`), since the last crossing. Also reported: a `gate_recorded` for a gate the workflow does not declare on that boundary."#;

    GATE_TRIGGER = "T021", "unauthorised gate trigger",
r#"A gate is triggered by whoever ran its `from` node (`agent.NAME`, or `control` for a node that is not an agent). The recorded trigger must be that agent, and when the gate declares `trigger: { by: [...] }` an outcome other than BLOCK needs a trigger by one of them (roles expand to their members)."#;

    DECIDER = "T022", "unauthorised decider",
r#"A decision is applied by a principal the plan authorises: a gate's `decided_by` (else the workflow's `escalate_to`), a human node's principals, the principal of an escalation, the workflow's `escalate_to` for reconciliations and confirmations (plus the tool's audit readers); it must also be one of the deciders the request named. Roles expand to their members. A `decision_requested` lists the `contact` of each principal it is asked of that declares one (roles expanded, in name order) — where the request went."#;

    DECISION_UNREQUESTED = "T023", "decision not requested",
r#"A `decision_applied` answers a pending `decision_requested` on the same subject with one of the decisions offered; a decision nobody asked for, a second answer to one request, or a decision on a gate that neither recorded REQUIRES_DECISION nor took its `decide` handler departs from the plan. A `timeout` (recorded by `control`) is allowed only on a subject that declares a `timeout`, and not before the deadline its request recorded (`expires_at`)."#;

    TOOL_NOT_PERMITTED = "T024", "tool call not permitted",
r#"A tool call by an agent needs the tool in the agent's `tools` and the agent in the tool's `allowed_agents` (when it names any); otherwise the control plane must refuse it (`tool_call_refused`). A tool node calls its own tool only."#;

    DECISION_ACTION = "T025", "decision applied as another action",
r#"A `decision_applied` on a gate or a human node records the action the decision takes, and the plan fixes it: the gate's (or node's) handler for the decision, else the default — at a gate `approve` continues, `revise` re-runs the gate's `from` node, `replan` re-runs the replan scope, `reject` terminates; at a human node the node completes (`continue`). Any other action departs from the plan."#;

    GATE_EVALUATION = "T026", "gate outcome not as evaluated",
r#"A `gate_recorded` outcome is the most severe of its evaluators' outcomes (BLOCK over REQUIRES_DECISION over PASS), an evaluator that errored is never PASS, and the gate is recorded only after its `from` node completed. The handler an `action_taken` runs for a gate outcome (PASS, BLOCK, REQUIRES_DECISION) is for the outcome the gate last recorded: a BLOCK edited into a PASS while the BLOCK handler still follows is caught here."#;

    PROVIDER = "T027", "undeclared provider",
r#"An `agent_turn` is answered by a provider the plan declares (the agent's, one a zone's `switch_model` or the routing of private data may choose); a turn from any other provider did not come from this plan's data plane."#;

    TRANSFER = "T030", "handoff or delegation not as planned",
r#"A handoff carries the context slice its declaration names — `context` (default isolated) and `context_fields` exactly — and a delegation names its declared contract, grants the contract's budget and records its declared `reason`. A handoff or delegation the plan does not declare, one not on an edge being taken, or a declared one missing before the receiving node starts, departs from the plan. A `dead_letter` follows the refused handoff (`accepted: false`) whose message it puts aside, with the message type that handoff sends."#;

    PAYLOAD = "T031", "payload not as contracted",
r#"A handoff's payload is what its producer made (the artifact of `from`'s last completion) and, when the handoff declares `payload: Type`, a value of that type (a refused handoff excepted); a delegation's inputs are of the contract's `inputs` type. Types are checked on the artifacts of the run directory; without an artifact store the report says they were not checked. A referenced artifact missing from the store is a deviation."#;

    BUDGET_EXCEEDED = "T040", "budget exceeded",
r#"The use a trace records — steps (one per attempt), tokens, tool calls and cost from `budget_settled` — summed per scope (run, agent, node visit, delegation) must stay within the plan's limits for that scope."#;

    BUDGET_ACCOUNTING = "T041", "budget accounting",
r#"Every `budget_reserved` is settled by a `budget_settled` of the same attempt before the attempt completes or fails (a lost attempt, a cancellation or an exhaustion excepted), a settlement follows a reservation, and both name scopes the plan declares. A settlement's `remaining` (tokens, tool calls, cost) is the first scope's limits less all the use settled in it so far."#;

    TURN_USAGE = "T042", "turn usage inconsistent",
r#"An agent turn that records its input and output tokens (`input_tokens`, `output_tokens`) records their sum as its `usage.tokens`: the split the provider reported and the tokens budgets are charged with are one count."#;

    POLICY = "T050", "policy violated",
r#"A policy of the plan (top-level, or the workflow's) does not hold of the trace, judged by the same monitors `flow run` and the model checker use (reference §8.3): a safety violation at an event, or an obligation still open when the run terminated. A trace that has not terminated is judged on its safety part only."#;

    BLACKBOARD = "T070", "blackboard access not as planned",
r#"A `blackboard_appended` appends the output of a node that `writes` that blackboard, once per completion, with the completion's own output as the entry, by a node whose agent (or human node's principals) the blackboard's `writers` list, after what the blackboard `requires` — an approval (`decision_applied` approve on `blackboard.BOARD.NODE`, by whom `approved_by` names) or a PASS of a gate on an edge out of the node — and numbers its entries 1, 2, 3 …; a `blackboard_read` is by a running agent node that `reads` the blackboard, whose agent the `readers` list, and reads every entry appended so far."#;

    TERMINATION = "T060", "termination inconsistent",
r#"`run_terminated` says why the run ended, and the event it follows from must agree: an end node's target and status (a `success` end may fail under a `success` condition or an `output` type), a `terminate(reason)`, `fallback(reason)`, `halt` or `return_partial` action, a node's failure (`NODE_failed`), a budget exhaustion, a rejected escalation (a run monitor's halt on the way may make the status failure). The status is one of success, failure, partial, escalated, cancelled."#;

    CHAIN = "T080", "hash chain broken",
r#"Every event carries in `prev` the digest (`sha256:` and 64 hex digits) of the line before it — its JSON exactly as written — and the first event the genesis of its run (the SHA-256 of `flow-trace-chain/1`, a line break and the run id). A line edited (a payload, an outcome, a time, even a space), an event removed, inserted or moved, or events removed from the start break a link: the first event after the change is reported. A trace in which no event has a `prev` (written before Flow chained its traces, or by something else) is reported once: its integrity cannot be checked. What the chain cannot show alone — the last event edited or events cut from the end (no later line holds their digest), or the whole chain recomputed after an edit — a signature shows (T081)."#;

    SIGNATURE = "T081", "signature does not cover the trace",
r#"With `--verify-key KEY`, the trace's signature (`trace.sig` beside it, written by `flow run --sign`/`flow resume --sign`, or `--signature FILE`) must be an ed25519 signature under that key of this run's id, the `seq` of the trace's last event and the digest of its line (the chain's head). A missing or unreadable signature, one made with another key or edited, one of another run, or one naming another end (events cut from the end or added after it, or the chain recomputed after an edit) is reported."#;
}

/// The explanation of a code.
pub fn explain(code: &str) -> Option<&'static CodeInfo> {
    CODES.iter().find(|c| c.code.0.eq_ignore_ascii_case(code))
}
