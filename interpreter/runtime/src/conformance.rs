//! `flow trace check`: holds a recorded trace against its plan.
//!
//! The engine writes a trace as it runs; this module reads one back and
//! says where it departs from what the plan allows — the expected
//! structure against the actual trajectory. It is pure: the trace comes in
//! as text or events, artifacts (for payload types) through an
//! [`ArtifactStore`], and the answer is a [`Report`] of [`Deviation`]s, each
//! with a stable code ([`codes`], explained in [`CODES`] and
//! `docs/trace-check.md`), plus a verdict per policy.
//!
//! One pass over the events feeds every check: the envelope (schema, `seq`,
//! ids), the run and node state machines, edges and node order against the
//! plan's graph (with the engine's implicit edges: fan-out, join, loop
//! rounds, map items and handler jumps), gates (crossings, triggers,
//! deciders), handoffs and delegations (context slice, payload), budgets,
//! policies (the `flow-policy` monitors: the one implementation of their
//! semantics) and the termination reason.

use crate::budget::{add_usage, sub_usage, Limits};
use crate::journal::ArtifactStore;
use crate::validate::Validator;
use flow_check::index::{guard_via, PlanIndex};
use flow_check::ir::ActionKind;
use flow_check::ir::TransferKind;
use flow_check::ir::{Node, NodeKind, Program, Workflow};
use flow_check::semantics;
use flow_check::spec::Kind;
use flow_policy::{Automaton, Monitor, Verdict};
use flow_trace::{ArtifactRef, Body, ContextMode, Event, NodeStatus, Outcome, TerminationStatus, Usage, Via};
use serde::Serialize;
use std::io::Read;
// Keys are the trace's own names and ids: a fast hash, no DoS concern.
type HashMap<K, V> = std::collections::HashMap<K, V, rustc_hash::FxBuildHasher>;
type HashSet<K> = std::collections::HashSet<K, rustc_hash::FxBuildHasher>;

/// The stable deviation codes. Never reuse one; add new ones at the end
/// of their group and explain them in [`CODES`] and `docs/trace-check.md`.
pub mod codes {
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
}

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
        code: codes::MALFORMED,
        title: "malformed event",
        explanation: "A line of the trace is not a trace event: not JSON, an unknown `kind`, a payload that misses a field or has one of the wrong type, or a word outside the closed vocabulary (an edge's `via`, a gate's `outcome`, a run's `status`) (the schema is stdlib/schemas/trace-event.schema.json). The line is skipped; its `seq`, when it has one, still counts for T002.",
    },
    CodeInfo {
        code: codes::SEQ,
        title: "seq not continuous",
        explanation: "Only the control plane assigns `seq`, and it assigns 1, 2, 3 … in order. A gap means events were removed, a repeat or a step back means events were duplicated or reordered.",
    },
    CodeInfo {
        code: codes::ENVELOPE,
        title: "inconsistent envelope",
        explanation: "Every event of a run carries the run's `run_id`, the `event_id` `{run_id}/{seq}`, and, when it has one, a `parent_event_id` naming an earlier event of the same run. An event that names another run, another id, or a parent that comes later (or never) was not written by this run's control plane in this order.",
    },
    CodeInfo {
        code: codes::RUN_LIFECYCLE,
        title: "run lifecycle",
        explanation: "A trace begins with `run_started` (once), names a workflow of the plan, and ends with `run_terminated` after which nothing follows; after `run_paused` only `run_resumed` may come.",
    },
    CodeInfo {
        code: codes::NODE_LIFECYCLE,
        title: "node lifecycle",
        explanation: "A node's visit is `node_started` (kind and visit number as in the plan, not while the previous visit runs), then `node_completed` or `node_failed`. A completion or failure without a start, or a second one for the same visit, departs from it. A node completed as `skipped` or `degraded` after it failed is a handler's doing and is allowed.",
    },
    CodeInfo {
        code: codes::ATTEMPT_LIFECYCLE,
        title: "attempt lifecycle",
        explanation: "Attempts run inside a node's running visit, numbered 1, 2, … per visit; agent turns, tool calls and refusals belong to an open attempt (and a turn to the node's own agent); a tool call completes only after it started; an attempt ends once (`attempt_completed`, `attempt_failed` or `lease_expired`).",
    },
    CodeInfo {
        code: codes::EDGE_NOT_IN_PLAN,
        title: "edge not in the plan",
        explanation: "Every `edge_taken` must be an edge of the plan with the guard it names (`always`, `when …`, `else`), the gated boundary it names (`gate NAME`), or one of the engine's implicit edges: a parallel node's fan-out to its branches, a branch into the join that lists it, a loop's round into its first node, a map's item into its node, or a handler's `goto`/`activate`/`revise`/`replan` to a target the plan's actions name.",
    },
    CodeInfo {
        code: codes::NODE_ORDER,
        title: "node order",
        explanation: "Apart from the start node at the beginning, a node starts only after an edge into it was taken; an edge of the graph (or a gated crossing, or into a join) leaves a node only after that node completed, and a fan-out, loop round or map item only while its node runs.",
    },
    CodeInfo {
        code: codes::GATE_NOT_PASSED,
        title: "gate not passed",
        explanation: "Nothing crosses a gate's boundary `from -> to` unless the gate let it: an `edge_taken` from→to needs a `gate_recorded` PASS for the gate, or a `decision_applied` approve on it (or on the escalation its handler asked for: `on BLOCK -> escalate(P)`, then approve on `escalation.P`), since the last crossing. Also reported: a `gate_recorded` for a gate the workflow does not declare on that boundary.",
    },
    CodeInfo {
        code: codes::GATE_TRIGGER,
        title: "unauthorised gate trigger",
        explanation: "A gate is triggered by whoever ran its `from` node (`agent.NAME`, or `control` for a node that is not an agent). The recorded trigger must be that agent, and when the gate declares `trigger: { by: [...] }` an outcome other than BLOCK needs a trigger by one of them (roles expand to their members).",
    },
    CodeInfo {
        code: codes::DECIDER,
        title: "unauthorised decider",
        explanation: "A decision is applied by a principal the plan authorises: a gate's `decided_by` (else the workflow's `escalate_to`), a human node's principals, the principal of an escalation, the workflow's `escalate_to` for reconciliations and confirmations (plus the tool's audit readers); it must also be one of the deciders the request named. Roles expand to their members.",
    },
    CodeInfo {
        code: codes::DECISION_UNREQUESTED,
        title: "decision not requested",
        explanation: "A `decision_applied` answers a pending `decision_requested` on the same subject with one of the decisions offered; a decision nobody asked for, a second answer to one request, or a decision on a gate that neither recorded REQUIRES_DECISION nor took its `decide` handler departs from the plan.",
    },
    CodeInfo {
        code: codes::TOOL_NOT_PERMITTED,
        title: "tool call not permitted",
        explanation: "A tool call by an agent needs the tool in the agent's `tools` and the agent in the tool's `allowed_agents` (when it names any); otherwise the control plane must refuse it (`tool_call_refused`). A tool node calls its own tool only.",
    },
    CodeInfo {
        code: codes::DECISION_ACTION,
        title: "decision applied as another action",
        explanation: "A `decision_applied` on a gate or a human node records the action the decision takes, and the plan fixes it: the gate's (or node's) handler for the decision, else the default — at a gate `approve` continues, `revise` re-runs the gate's `from` node, `replan` re-runs the replan scope, `reject` terminates; at a human node the node completes (`continue`). Any other action departs from the plan.",
    },
    CodeInfo {
        code: codes::TRANSFER,
        title: "handoff or delegation not as planned",
        explanation: "A handoff carries the context slice its declaration names — `context` (default isolated) and `context_fields` exactly — and a delegation names its declared contract and grants the contract's budget. A handoff or delegation the plan does not declare, one not on an edge being taken, or a declared one missing before the receiving node starts, departs from the plan.",
    },
    CodeInfo {
        code: codes::PAYLOAD,
        title: "payload not as contracted",
        explanation: "A handoff's payload is what its producer made (the artifact of `from`'s last completion) and, when the handoff declares `payload: Type`, a value of that type (a refused handoff excepted); a delegation's inputs are of the contract's `inputs` type. Types are checked on the artifacts of the run directory; without an artifact store the report says they were not checked. A referenced artifact missing from the store is a deviation.",
    },
    CodeInfo {
        code: codes::BUDGET_EXCEEDED,
        title: "budget exceeded",
        explanation: "The use a trace records — steps (one per attempt), tokens, tool calls and cost from `budget_settled` — summed per scope (run, agent, node visit, delegation) must stay within the plan's limits for that scope.",
    },
    CodeInfo {
        code: codes::BUDGET_ACCOUNTING,
        title: "budget accounting",
        explanation: "Every `budget_reserved` is settled by a `budget_settled` of the same attempt before the attempt completes or fails (a lost attempt, a cancellation or an exhaustion excepted), a settlement follows a reservation, and both name scopes the plan declares.",
    },
    CodeInfo {
        code: codes::POLICY,
        title: "policy violated",
        explanation: "A policy of the plan (top-level, or the workflow's) does not hold of the trace, judged by the same monitors `flow run` and the model checker use (reference §8.3): a safety violation at an event, or an obligation still open when the run terminated. A trace that has not terminated is judged on its safety part only.",
    },
    CodeInfo {
        code: codes::TERMINATION,
        title: "termination inconsistent",
        explanation: "`run_terminated` says why the run ended, and the event it follows from must agree: an end node's target and status (a `success` end may fail under a `success` condition or an `output` type), a `terminate(reason)`, `fallback(reason)`, `halt` or `return_partial` action, a node's failure (`NODE_failed`), a budget exhaustion, a rejected escalation (a run monitor's halt on the way may make the status failure). The status is one of success, failure, partial, escalated, cancelled.",
    },
];

/// The explanation of a code.
pub fn explain(code: &str) -> Option<&'static CodeInfo> {
    CODES.iter().find(|c| c.code.eq_ignore_ascii_case(code))
}

/// One departure of the trace from the plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Deviation {
    /// A stable code from [`codes`].
    pub code: &'static str,
    /// The event where it shows (for a malformed line, its `seq` if it has one).
    pub seq: Option<u64>,
    /// The line of the trace, for a malformed line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    pub message: String,
    /// What the plan expects here.
    pub expected: Option<String>,
    /// What the trace has.
    pub actual: Option<String>,
    pub node: Option<String>,
    pub attempt: Option<String>,
    pub gate: Option<String>,
    /// The reason code involved (a termination or gate reason).
    pub reason_code: Option<String>,
}

impl Deviation {
    fn new(code: &'static str, seq: Option<u64>, message: impl Into<String>) -> Deviation {
        Deviation {
            code,
            seq,
            line: None,
            message: message.into(),
            expected: None,
            actual: None,
            node: None,
            attempt: None,
            gate: None,
            reason_code: None,
        }
    }

    fn expected(mut self, text: impl Into<String>) -> Deviation {
        self.expected = Some(text.into());
        self
    }

    fn actual(mut self, text: impl Into<String>) -> Deviation {
        self.actual = Some(text.into());
        self
    }

    fn node(mut self, node: &str) -> Deviation {
        self.node = Some(node.to_string());
        self
    }

    fn attempt(mut self, attempt: &str) -> Deviation {
        self.attempt = Some(attempt.to_string());
        self
    }

    fn gate(mut self, gate: &str) -> Deviation {
        self.gate = Some(gate.to_string());
        self
    }

    fn reason(mut self, reason: &str) -> Deviation {
        self.reason_code = Some(reason.to_string());
        self
    }
}

/// The verdict of one policy over the trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PolicyResult {
    pub name: String,
    /// `program` for a top-level policy, else the workflow's name.
    pub scope: String,
    /// The declared response (`halt` by default).
    pub response: String,
    /// `holds`, `violated`, `open` (an obligation open in a trace that has
    /// not terminated) or `error` (the formula did not compile).
    pub verdict: &'static str,
    /// Where it was violated (the last event for an obligation open at the end).
    pub seq: Option<u64>,
    /// What was still owed, for an obligation left open.
    pub owed: Option<String>,
}

/// What the trace is.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TraceSummary {
    pub run_id: Option<String>,
    pub workflow: Option<String>,
    /// The plan digest the run recorded.
    pub plan_digest: Option<String>,
    /// Non-empty lines read.
    pub lines: usize,
    /// Events that parsed.
    pub events: usize,
    /// `terminated`, `paused` or `unfinished`.
    pub state: &'static str,
    pub reason: Option<String>,
    pub status: Option<String>,
}

/// The answer of a check.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// No deviations.
    pub conformant: bool,
    pub trace: TraceSummary,
    pub deviations: Vec<Deviation>,
    pub policies: Vec<PolicyResult>,
    /// What was not checked, and why.
    pub notes: Vec<String>,
}

/// What a check may use besides the plan and the events.
#[derive(Default)]
pub struct Options<'a> {
    /// The run's artifacts, to check payload types; `None` skips those
    /// checks (the report says so).
    pub artifacts: Option<&'a dyn ArtifactStore>,
    /// The digest of the plan checked against, to compare with the one the
    /// run recorded.
    pub plan_digest: Option<&'a str>,
}

impl std::fmt::Debug for Options<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options").field("artifacts", &self.artifacts.is_some()).field("plan_digest", &self.plan_digest).finish()
    }
}

/// The events of a JSONL trace, and a deviation per line that is not one.
#[derive(Debug, Clone, Default)]
pub struct Parsed {
    pub events: Vec<Event>,
    pub deviations: Vec<Deviation>,
    /// Non-empty lines read.
    pub lines: usize,
    /// The `seq` of lines that did not parse but name one.
    pub malformed_seqs: Vec<u64>,
}

/// Parses a JSONL trace, one event per line; a line that does not parse is
/// a [`codes::MALFORMED`] deviation.
pub fn parse(text: &str) -> Parsed {
    // Lines are independent: long traces are parsed on every core, in
    // blocks of whole lines, and put back in order (the same result).
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).min(8);
    let size = if text.len() >= (1 << 20) { text.len().div_ceil(threads) } else { text.len() };
    let mut blocks = Vec::new();
    let mut rest = text.as_bytes();
    while !rest.is_empty() {
        let end = match rest.get(size..).and_then(|tail| tail.iter().position(|&b| b == b'\n')) {
            Some(i) => size + i + 1,
            None => rest.len(),
        };
        let (block, tail) = rest.split_at(end);
        blocks.push(block);
        rest = tail;
    }
    let batches: Vec<Batch> = std::thread::scope(|scope| {
        let handles: Vec<_> = blocks.iter().map(|&block| (block, scope.spawn(move || parse_block(block)))).collect();
        handles.into_iter().map(|(block, handle)| handle.join().unwrap_or_else(|_| parse_block(block))).collect()
    });
    let mut parsed = Parsed::default();
    let mut line_breaks = 0;
    for mut batch in batches {
        parsed.lines += batch.lines;
        parsed.events.append(&mut batch.events);
        for (i, seq, err, text) in batch.malformed {
            parsed.malformed_seqs.extend(seq);
            parsed.deviations.push(malformed_line(line_breaks + i + 1, seq, &err, text));
        }
        line_breaks += batch.breaks;
    }
    parsed
}

/// Parses and checks a JSONL trace.
pub fn check_text(program: &Program, text: &str, options: &Options) -> Report {
    match check_reader(program, text.as_bytes(), options) {
        Ok(report) => report,
        // Reading a byte slice cannot fail; parse it whole if it did.
        Err(_) => check_parsed(program, parse(text), options),
    }
}

/// How much of a trace is read and parsed at a time by [`check_reader`].
const BLOCK: usize = 1 << 20;

/// The events of one block of lines, and its lines that are not events.
struct Batch {
    events: Vec<Event>,
    /// Lines that are not events: (0-based line in the block, seq, why, text).
    malformed: Vec<(usize, Option<u64>, String, String)>,
    /// Non-blank lines.
    lines: usize,
    /// Line breaks in the block.
    breaks: usize,
}

/// Parses the lines of a block (split at `\n`; the last may be empty).
fn parse_block(block: &[u8]) -> Batch {
    parse_block_into(block, Vec::with_capacity(block.len() / 256))
}

/// [`parse_block`], appending to `events` (empty; its capacity is reused).
fn parse_block_into(block: &[u8], events: Vec<Event>) -> Batch {
    let mut batch = Batch { events, malformed: Vec::new(), lines: 0, breaks: 0 };
    let mut count = 0;
    // One UTF-8 check for the whole block (and a fast search for line
    // breaks); a block that is not UTF-8 is read line by line.
    match std::str::from_utf8(block) {
        Ok(text) => {
            for (i, line) in text.split('\n').enumerate() {
                count += 1;
                parse_line(&mut batch, Ok(line), i);
            }
        }
        Err(_) => {
            for (i, line) in block.split(|&b| b == b'\n').enumerate() {
                count += 1;
                parse_line(&mut batch, std::str::from_utf8(line).map_err(|_| line), i);
            }
        }
    }
    batch.breaks = count.max(1) - 1;
    batch
}

/// One line (`i`: 0-based in its block), or its bytes when they are not UTF-8.
fn parse_line(batch: &mut Batch, line: Result<&str, &[u8]>, i: usize) {
    let (parsed, text) = match line {
        Ok(line) => {
            let line = line.strip_suffix('\r').unwrap_or(line);
            if line.trim().is_empty() {
                return;
            }
            (flow_trace::event_from_str(line).map_err(|e| e.to_string()), std::borrow::Cow::Borrowed(line))
        }
        Err(bytes) => (Err("the line is not UTF-8".to_string()), String::from_utf8_lossy(bytes)),
    };
    batch.lines += 1;
    match parsed {
        Ok(event) => batch.events.push(event),
        Err(err) => {
            let seq = serde_json::from_str::<serde_json::Value>(&text).ok().and_then(|v| v.get("seq").and_then(|s| s.as_u64()));
            batch.malformed.push((i, seq, err, shorten(&text, 120)));
        }
    }
}

/// The deviation of a line that is not an event (`line`: 1-based).
fn malformed_line(line: usize, seq: Option<u64>, err: &str, text: String) -> Deviation {
    let mut d = Deviation::new(codes::MALFORMED, seq, format!("line {line} is not a trace event: {err}"))
        .expected("an event valid against trace-event.schema.json")
        .actual(text);
    d.line = Some(line);
    d
}

/// Reads `reader` in blocks of about `block` bytes of whole lines and
/// hands them out in turn to the parsers. Buffers the parsers are done
/// with come back on `spare` and are filled again: fresh ones would cost
/// the kernel a page fault and a page of zeroes every 4 KiB.
fn read_blocks(
    mut reader: impl Read,
    block: usize,
    parsers: &[std::sync::mpsc::SyncSender<std::io::Result<Vec<u8>>>],
    spare: &std::sync::mpsc::Receiver<Vec<u8>>,
) {
    let mut carry: Vec<u8> = Vec::new();
    // Whose turn it is: blocks go to the parsers strictly in turn.
    let mut turn = 0;
    loop {
        let mut buffer = spare.try_recv().unwrap_or_default();
        let start = carry.len();
        let full = start + block;
        // A reused buffer's bytes are overwritten, not zeroed again.
        if buffer.len() < full {
            buffer.resize(full, 0);
        }
        buffer[..start].copy_from_slice(&carry);
        carry.clear();
        let mut filled = start;
        let eof = loop {
            match reader.read(&mut buffer[filled..full]) {
                Ok(0) => break true,
                Ok(n) => {
                    filled += n;
                    if filled == full {
                        break false;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let _ = parsers[turn % parsers.len()].send(Err(e));
                    return;
                }
            }
        };
        buffer.truncate(filled);
        // Whole lines only; the rest waits for more (or is the last line).
        let end = if eof { buffer.len() } else { buffer.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1) };
        carry.extend_from_slice(&buffer[end..]);
        buffer.truncate(end);
        if end > 0 || eof {
            if parsers[turn % parsers.len()].send(Ok(buffer)).is_err() {
                return;
            }
            turn += 1;
        }
        if eof {
            return;
        }
    }
}

/// Checks a JSONL trace as it is read, with bounded memory whatever its
/// length: a thread reads blocks of lines, two parse them in turn, and this
/// one checks the events in order. The report is that of [`check_text`] on
/// the whole text, except that a line that is not an event excuses a gap in
/// `seq` only from its own block on.
pub fn check_reader(program: &Program, reader: impl Read + Send, options: &Options) -> std::io::Result<Report> {
    check_blocks(program, reader, options, BLOCK)
}

/// [`check_reader`], reading `block` bytes at a time.
fn check_blocks(program: &Program, reader: impl Read + Send, options: &Options, block: usize) -> std::io::Result<Report> {
    use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};
    const PARSERS: usize = 2;
    std::thread::scope(|scope| {
        let mut to_parsers: Vec<SyncSender<std::io::Result<Vec<u8>>>> = Vec::new();
        let mut parsed: Vec<Receiver<std::io::Result<Batch>>> = Vec::new();
        let mut give_back: Vec<Sender<Batch>> = Vec::new();
        let (spare_block, spare_blocks) = channel::<Vec<u8>>();
        for _ in 0..PARSERS {
            let (send_block, blocks) = sync_channel::<std::io::Result<Vec<u8>>>(1);
            let (send_batch, batches) = sync_channel::<std::io::Result<Batch>>(2);
            let (back, used) = channel::<Batch>();
            let spare_block = spare_block.clone();
            scope.spawn(move || {
                let mut spare_events: Vec<Event> = Vec::new();
                for block in blocks {
                    // Checked batches are freed here, by the thread that
                    // made them: freed across threads, the allocator would
                    // take fresh pages from the system. Their event vector
                    // is filled again.
                    while let Ok(mut done) = used.try_recv() {
                        done.events.clear();
                        if done.events.capacity() > spare_events.capacity() {
                            spare_events = done.events;
                        }
                    }
                    let batch = block.map(|b| {
                        let batch = parse_block_into(&b, std::mem::take(&mut spare_events));
                        let _ = spare_block.send(b);
                        batch
                    });
                    if send_batch.send(batch).is_err() {
                        return;
                    }
                }
            });
            to_parsers.push(send_block);
            parsed.push(batches);
            give_back.push(back);
        }
        drop(spare_block);
        scope.spawn(move || read_blocks(reader, block, &to_parsers, &spare_blocks));
        let mut lines = 0;
        let mut line_breaks = 0;
        let mut parse_deviations = Vec::new();
        let mut checker: Option<Checker<'_>> = None;
        // Blocks held back until the first `run_started` (it chooses the
        // workflow), or the end.
        let mut waiting: Vec<(usize, Batch)> = Vec::new();
        let mut feed = |checker: &mut Checker<'_>, turn: usize, mut batch: Batch, parse_deviations: &mut Vec<Deviation>| {
            lines += batch.lines;
            for (i, seq, err, text) in batch.malformed.drain(..) {
                checker.malformed.extend(seq);
                parse_deviations.push(malformed_line(line_breaks + i + 1, seq, &err, text));
            }
            line_breaks += batch.breaks;
            for event in &batch.events {
                checker.event(event);
            }
            let _ = give_back[turn % PARSERS].send(batch);
        };
        // Blocks went to the parsers in turn: take them back in turn.
        for turn in 0.. {
            let Ok(batch) = parsed[turn % PARSERS].recv() else { break };
            let batch = batch?;
            match &mut checker {
                Some(c) => feed(c, turn, batch, &mut parse_deviations),
                None => {
                    let started = started_of(&batch.events).map(|(w, d)| (w.to_string(), d.to_string()));
                    waiting.push((turn, batch));
                    if let Some((workflow, digest)) = started {
                        let mut c = Checker::new(program, Some((&workflow, &digest)), options);
                        for (turn, batch) in waiting.drain(..) {
                            feed(&mut c, turn, batch, &mut parse_deviations);
                        }
                        checker = Some(c);
                    }
                }
            }
        }
        let c = match checker {
            Some(c) => c,
            None => {
                let mut c = Checker::new(program, None, options);
                for (turn, batch) in waiting.drain(..) {
                    feed(&mut c, turn, batch, &mut parse_deviations);
                }
                c
            }
        };
        let mut report = c.finish();
        report.trace.lines = lines;
        parse_deviations.append(&mut report.deviations);
        sort(&mut parse_deviations);
        report.conformant = parse_deviations.is_empty();
        report.deviations = parse_deviations;
        Ok(report)
    })
}

/// Checks events already parsed (from [`parse`]).
pub fn check_parsed(program: &Program, parsed: Parsed, options: &Options) -> Report {
    let mut report = run_checks(program, &parsed.events, &parsed.malformed_seqs, options);
    report.trace.lines = parsed.lines;
    let mut deviations = parsed.deviations;
    deviations.append(&mut report.deviations);
    sort(&mut deviations);
    report.conformant = deviations.is_empty();
    report.deviations = deviations;
    report
}

/// Checks a trace given as events.
pub fn check(program: &Program, events: &[Event], options: &Options) -> Report {
    let mut report = run_checks(program, events, &[], options);
    report.trace.lines = events.len();
    sort(&mut report.deviations);
    report.conformant = report.deviations.is_empty();
    report
}

fn sort(deviations: &mut [Deviation]) {
    // Stable: within one event, in the order the checks found them.
    deviations.sort_by_key(|d| d.seq.unwrap_or(0));
}

fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() > max {
        format!("{}…", text.chars().take(max).collect::<String>())
    } else {
        text.to_string()
    }
}

// ------------------------------------------------------------ plan lookups

/// Every action a value holds (handlers' actions are added separately).
/// `name(args…)` split into its name and first argument.
fn split_action(text: &str) -> (&str, Option<&str>) {
    match text.split_once('(') {
        Some((name, rest)) => {
            let arg = rest.trim_end_matches(')').split(',').next().map(str::trim).filter(|a| !a.is_empty());
            (name.trim(), arg)
        }
        None => (text.trim(), None),
    }
}

/// The lookups the checks share, built once from the workflow.
struct PlanView<'a> {
    program: &'a Program,
    wf: &'a Workflow,
    start: Option<&'a str>,
    /// The plan's structure (`flow_check::index`): edges, gates, transfers
    /// and jump targets on each boundary, as the engine reads them.
    index: PlanIndex,
}

impl<'a> PlanView<'a> {
    fn new(program: &'a Program, wf: &'a Workflow) -> PlanView<'a> {
        PlanView { program, wf, start: wf.start(), index: PlanIndex::new(program, wf) }
    }

    fn node(&self, name: &str) -> Option<&'a Node> {
        self.wf.nodes.get(name)
    }

    /// The agent a node runs, if it is an agent node.
    fn agent_of(&self, node: &str) -> Option<&'a str> {
        self.node(node).filter(|n| n.kind == NodeKind::Agent).and_then(|n| n.target.first()).map(String::as_str)
    }

    /// `names` with roles expanded to their members (and principals that
    /// hold a listed role added), transitively.
    fn expand_principals(&self, listed: &[String]) -> HashSet<String> {
        let mut out: HashSet<String> = listed.iter().cloned().collect();
        loop {
            let before = out.len();
            for decl in self.program.decls.values().filter(|d| d.kind == Kind::Principal) {
                if out.contains(&decl.name) {
                    for member in decl.members() {
                        out.insert(member);
                    }
                }
                if decl.roles().iter().any(|r| out.contains(r)) {
                    out.insert(decl.name.clone());
                }
            }
            if out.len() == before {
                return out;
            }
        }
    }

    /// Who may decide on `subject` (empty: the plan names nobody).
    fn deciders_of(&self, subject: &str) -> Vec<String> {
        let escalate_to = || self.wf.escalate_to();
        if let Some(gate) = self.wf.gates.get(subject) {
            return gate.decided_by().unwrap_or_else(escalate_to);
        }
        if let Some(node) = self.node(subject).filter(|n| n.kind == NodeKind::Human) {
            return node.target.clone();
        }
        if let Some(p) = subject.strip_prefix("escalation.") {
            return vec![p.to_string()];
        }
        if subject.starts_with("reconcile.") {
            return escalate_to();
        }
        if let Some(rest) = subject.strip_prefix("confirm.") {
            let mut out = escalate_to();
            let tool = rest.split('.').next().unwrap_or_default();
            if let Some(audit) = self.program.decls.get(tool).and_then(|d| d.audit()) {
                out.extend(audit.visible_to);
            }
            return out;
        }
        Vec::new()
    }

    /// Why `edge_taken from -> to via` is not an edge of the plan.
    fn edge_problem(&self, from: &str, to: &str, via: &Via) -> Option<String> {
        if self.node(to).is_none() {
            return Some(format!("`{to}` is not a node of workflow `{}`", self.wf.name));
        }
        let plan_edge = |want: &Via| -> Option<String> {
            let vias: Vec<Via> = self.index.out_of_name(self.wf, from).filter(|e| e.to == to).map(|e| guard_via(&e.guard)).collect();
            if vias.is_empty() {
                return Some(format!("the plan has no edge {from} -> {to}"));
            }
            let listed = vias.iter().map(Via::to_string).collect::<Vec<_>>().join("`, `");
            (!vias.contains(want)).then(|| format!("the plan's edge {from} -> {to} is `{listed}`"))
        };
        let node_kind = |name: &str, kind: NodeKind| self.node(name).filter(|n| n.kind == kind);
        match via {
            Via::Always | Via::Else | Via::When(_) => plan_edge(via),
            Via::Gate(gate) => match self.wf.gates.get(gate.as_str()) {
                Some(g) if g.from == from && g.to == to => None,
                Some(g) => Some(format!("gate `{gate}` guards {} -> {}", g.from, g.to)),
                None => Some(format!("the workflow declares no gate `{gate}`")),
            },
            Via::Fanout => match node_kind(from, NodeKind::Parallel) {
                Some(n) if n.target.iter().any(|b| b == to) => None,
                Some(_) => Some(format!("`{to}` is not a branch of parallel node `{from}`")),
                None => Some(format!("`{from}` is not a parallel node")),
            },
            Via::Join => match node_kind(to, NodeKind::Join) {
                Some(n) if n.target.iter().any(|b| b == from) => None,
                Some(_) => Some(format!("join `{to}` does not list `{from}`")),
                None => Some(format!("`{to}` is not a join node")),
            },
            Via::LoopRound => match node_kind(from, NodeKind::Loop) {
                Some(n) if n.target.first().is_some_and(|f| f == to) => None,
                Some(_) => Some(format!("a round of loop `{from}` starts at its first node, not `{to}`")),
                None => Some(format!("`{from}` is not a loop node")),
            },
            Via::MapItem(_) => match node_kind(from, NodeKind::Map) {
                Some(n) if n.target.first().is_some_and(|f| f == to) => None,
                Some(n) => Some(format!("map `{from}` runs `{}`, not `{to}`", n_target(n))),
                None => Some(format!("`{from}` is not a map node")),
            },
            Via::Goto | Via::Activate => {
                (!self.index.is_jump_target(to)).then(|| format!("no `goto({to})` or `activate({to})` action in the plan"))
            }
            Via::Revise => (from != to && !self.index.is_revise_target(to)).then(|| format!("no `revise({to})` action in the plan")),
            Via::Replan => (!self.index.is_replan_target(to))
                .then(|| format!("`{to}` is neither the start, a gate's replan scope, nor a `replan({to})` target")),
        }
    }
}

fn n_target(n: &Node) -> &str {
    n.target.first().map(String::as_str).unwrap_or("")
}

// ------------------------------------------------------------------ state

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Phase {
    #[default]
    Idle,
    Running,
    Completed,
    Failed,
}

#[derive(Debug, Default)]
struct NodeRt {
    visits: u32,
    phase: Phase,
    attempt_no: u32,
    completed_once: bool,
    /// The digest of the last completion's output.
    output: Option<String>,
}

#[derive(Debug)]
struct AttemptRt {
    node: String,
    open: bool,
    calls: u32,
    /// Reservations not yet settled: their scopes and amounts.
    reservations: Vec<(String, Usage)>,
}

/// An edge taken into a node that has not started yet.
#[derive(Debug)]
struct Entry {
    from: String,
    via: Via,
    /// Transfers seen on the way: (is a handoff, from).
    transfers: Vec<(bool, String)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RunPhase {
    NotStarted,
    Running,
    Paused,
    Terminated,
}

#[derive(Debug, Default)]
struct GateRt {
    /// A PASS or an approve not yet used by a crossing.
    open: bool,
    /// A REQUIRES_DECISION waiting for a decision.
    awaiting: bool,
}

#[derive(Debug)]
struct ScopeAcc {
    limits: Limits,
    used: Usage,
    reserved: Usage,
    /// Which limits were already reported exceeded: steps, tokens, tool calls, cost.
    reported: [bool; 4],
    /// Use over a limit that the control plane has not answered (yet) with
    /// `budget_exhausted`.
    pending: Vec<Overrun>,
}

/// A limit found exceeded after a settlement.
#[derive(Debug, Clone)]
struct Overrun {
    seq: u64,
    limit: &'static str,
    max: String,
    used: String,
    attempt: Option<String>,
}

impl ScopeAcc {
    fn new(limits: Limits) -> ScopeAcc {
        ScopeAcc { limits, used: Usage::default(), reserved: Usage::default(), reported: [false; 4], pending: Vec::new() }
    }
}

/// The limits `u` is over: (index, limit, maximum, amount).
fn overs(l: &Limits, u: &Usage) -> [Option<(usize, &'static str, String, String)>; 4] {
    [
        l.steps.filter(|&m| u.steps > m).map(|m| (0, "steps", m.to_string(), u.steps.to_string())),
        l.tokens.filter(|&m| u.tokens > m).map(|m| (1, "tokens", m.to_string(), u.tokens.to_string())),
        l.tool_calls.filter(|&m| u.tool_calls > m).map(|m| (2, "tool_calls", m.to_string(), u.tool_calls.to_string())),
        l.cost.filter(|&m| u.cost > m + 1e-9).map(|m| (3, "cost", format!("{m}"), format!("{}", (u.cost * 1e6).round() / 1e6))),
    ]
}

struct PolicyRt {
    name: String,
    scope: String,
    response: String,
    monitor: Option<Monitor>,
}

struct Checker<'a> {
    program: &'a Program,
    plan: Option<PlanView<'a>>,
    options: &'a Options<'a>,
    deviations: Vec<Deviation>,
    notes: Vec<String>,
    run_id: Option<String>,
    run: RunPhase,
    after_end_reported: bool,
    any_node_started: bool,
    next_seq: u64,
    malformed: HashSet<u64>,
    nodes: HashMap<String, NodeRt>,
    attempts: HashMap<String, AttemptRt>,
    entries: HashMap<String, Vec<Entry>>,
    gates: HashMap<String, GateRt>,
    /// Escalations asked by a gate's handler: the subject (`escalation.P`) and the gate.
    escalations: HashMap<String, String>,
    pending_decisions: HashMap<String, Body>,
    budgets: HashMap<String, ScopeAcc>,
    delegated: HashSet<String>,
    validators: HashMap<String, Option<Validator>>,
    policies: Vec<PolicyRt>,
    payloads_unchecked: usize,
    terminated: Option<(String, String)>,
    /// The plan digest the first `run_started` recorded.
    started_digest: Option<String>,
    /// Events seen so far, and the last one's seq and whether it paused
    /// the run on a cycle.
    count: usize,
    last: Option<(u64, bool)>,
    /// The seq of the event before the one being checked.
    previous: Option<u64>,
    /// The first `run_started`'s workflow.
    workflow_started: Option<String>,
    /// Events a termination can follow from (by seq: position, body): only
    /// the kinds that imply a reason, so nothing else is kept.
    causes: HashMap<u64, (usize, Body)>,
    /// Position of the last policy violation that was not a warning.
    last_policy_stop: Option<usize>,
}

/// The workflow and plan digest of the first `run_started`.
fn started_of(events: &[Event]) -> Option<(&str, &str)> {
    events.iter().find_map(|e| match &e.body {
        Body::RunStarted { workflow, plan_digest, .. } => Some((workflow.as_str(), plan_digest.as_str())),
        _ => None,
    })
}

fn run_checks<'a>(program: &'a Program, events: &[Event], malformed: &[u64], options: &'a Options<'a>) -> Report {
    let mut checker = Checker::new(program, started_of(events), options);
    checker.malformed.extend(malformed.iter().copied());
    for event in events {
        checker.event(event);
    }
    checker.finish()
}

impl<'a> Checker<'a> {
    /// A checker for a run whose first `run_started` names `started`
    /// (workflow, plan digest).
    fn new(program: &'a Program, started: Option<(&str, &str)>, options: &'a Options<'a>) -> Checker<'a> {
        let mut notes = Vec::new();
        let wf = match started {
            Some((name, _)) => program.workflows.get(name),
            None if program.workflows.len() == 1 => program.workflows.values().next(),
            None => None,
        };
        if let (Some((_, recorded)), Some(given)) = (started, options.plan_digest) {
            if recorded != given {
                notes.push(format!(
                    "the run recorded plan {recorded}; the plan given is {given} (other sources, or the same under other paths)"
                ));
            }
        }
        let mut checker = Checker {
            program,
            plan: wf.map(|wf| PlanView::new(program, wf)),
            options,
            deviations: Vec::new(),
            notes,
            run_id: None,
            run: RunPhase::NotStarted,
            after_end_reported: false,
            any_node_started: false,
            next_seq: 1,
            malformed: HashSet::default(),
            nodes: HashMap::default(),
            attempts: HashMap::default(),
            entries: HashMap::default(),
            gates: HashMap::default(),
            escalations: HashMap::default(),
            pending_decisions: HashMap::default(),
            budgets: HashMap::default(),
            delegated: HashSet::default(),
            validators: HashMap::default(),
            policies: Vec::new(),
            payloads_unchecked: 0,
            terminated: None,
            started_digest: started.map(|(_, d)| d.to_string()),
            count: 0,
            last: None,
            previous: None,
            workflow_started: None,
            causes: HashMap::default(),
            last_policy_stop: None,
        };
        checker.init_budgets();
        checker.init_policies(wf);
        checker
    }

    fn push(&mut self, d: Deviation) {
        self.deviations.push(d);
    }

    fn init_budgets(&mut self) {
        let Some(plan) = &self.plan else { return };
        let program = self.program;
        let wf = plan.wf;
        if let Some(budget) = wf.budget(program) {
            self.budgets.insert("run".into(), ScopeAcc::new(Limits::of(&budget)));
        }
        for (name, decl) in &program.decls {
            if decl.kind == Kind::Agent {
                if let Some(budget) = decl.budget(program) {
                    self.budgets.insert(format!("agent.{name}"), ScopeAcc::new(Limits::of(&budget)));
                }
            }
        }
        for node in wf.nodes.values() {
            if let Some(budget) = node.budget(program) {
                self.budgets.insert(format!("node.{}", node.name), ScopeAcc::new(Limits::of(&budget)));
            }
        }
    }

    fn init_policies(&mut self, wf: Option<&'a Workflow>) {
        let top = self.program.policies.iter().map(|p| (p, "program".to_string()));
        let own = wf.into_iter().flat_map(|w| w.policies.iter().map(move |p| (p, w.name.clone())));
        for (policy, scope) in top.chain(own) {
            let response = policy.response().as_str().to_string();
            let monitor = match Automaton::new(&policy.formula) {
                Ok(a) => Some(Monitor::new(a)),
                Err(e) => {
                    self.notes.push(format!("policy `{}` was not checked: {e}", policy.name));
                    None
                }
            };
            self.policies.push(PolicyRt { name: policy.name.clone(), scope, response, monitor });
        }
    }

    // ------------------------------------------------------------ per event

    /// Checks the next event of the trace. Nothing of the event is kept
    /// beyond what the checks still need, so a trace can be checked as it
    /// is read.
    fn event(&mut self, e: &Event) {
        let seq = e.seq;
        let position = self.count;
        self.count += 1;
        self.previous = self.last.map(|(s, _)| s);
        self.last = Some((seq, matches!(&e.body, Body::RunPaused { reason: flow_trace::PauseReason::Cycle, .. })));
        self.envelope(e);
        self.run_lifecycle(e);
        // The policy path: no allocation per event (the automaton caches steps).
        for policy in &mut self.policies {
            if let Some(m) = &mut policy.monitor {
                m.feed(seq, &e.body);
            }
        }
        self.remember_cause(position, e);
        match &e.body {
            Body::RunStarted { workflow, .. } if self.workflow_started.is_none() => self.workflow_started = Some(workflow.clone()),
            Body::RunTerminated { reason, status, .. } => {
                self.terminated = Some((reason.clone(), status.to_string()));
                self.termination(position, e, reason, status.as_str());
            }
            Body::NodeStarted { node, node_kind, visit, .. } => self.node_started(seq, node, *node_kind, *visit),
            Body::NodeCompleted { node, status, output, .. } => self.node_completed(seq, node, *status, output.as_ref()),
            Body::NodeFailed { node, error_code, .. } => self.node_failed(seq, node, *error_code),
            Body::AttemptStarted { node, attempt_id, attempt_no, .. } => self.attempt_started(seq, node, attempt_id, *attempt_no),
            Body::AttemptCompleted { node, attempt_id, .. } => self.attempt_ended(seq, node, attempt_id, None),
            Body::AttemptFailed { node, attempt_id, error_code, .. } => self.attempt_ended(seq, node, attempt_id, Some(*error_code)),
            Body::LeaseExpired { attempt_id, .. } => {
                // The executor was lost: the attempt ends, its calls and
                // reservations with it.
                if let Some(a) = self.attempts.get_mut(attempt_id.as_str()) {
                    a.open = false;
                    a.calls = 0;
                    let held = std::mem::take(&mut a.reservations);
                    self.release(&held);
                } else {
                    self.push(
                        Deviation::new(
                            codes::ATTEMPT_LIFECYCLE,
                            Some(seq),
                            format!("the lease of attempt `{attempt_id}` expired, but it never started"),
                        )
                        .attempt(attempt_id),
                    );
                }
            }
            Body::AgentTurn { agent, node, attempt_id, .. } => {
                self.in_attempt(seq, attempt_id, "an agent turn");
                if let Some(plan) = &self.plan {
                    if let Some(expected) = plan.agent_of(node) {
                        if expected != agent {
                            self.push(
                                Deviation::new(
                                    codes::ATTEMPT_LIFECYCLE,
                                    Some(seq),
                                    format!("a turn of agent `{agent}` in node `{node}`, which runs `{expected}`"),
                                )
                                .expected(format!("agent {expected}"))
                                .actual(format!("agent {agent}"))
                                .node(node)
                                .attempt(attempt_id),
                            );
                        }
                    }
                }
            }
            Body::ToolCallStarted { tool, node, attempt_id, agent, .. } => {
                self.in_attempt(seq, attempt_id, "a tool call");
                if let Some(a) = self.attempts.get_mut(attempt_id.as_str()) {
                    a.calls += 1;
                }
                self.tool_permitted(seq, tool, node, attempt_id, agent.as_deref());
            }
            Body::ToolCallCompleted { tool, attempt_id, .. } => {
                let outstanding = self.attempts.get_mut(attempt_id.as_str()).filter(|a| a.calls > 0);
                match outstanding {
                    Some(a) => a.calls -= 1,
                    None => self.push(
                        Deviation::new(codes::ATTEMPT_LIFECYCLE, Some(seq), format!("tool `{tool}` completed without a call in flight"))
                            .expected("tool_call_started before tool_call_completed")
                            .attempt(attempt_id),
                    ),
                }
            }
            Body::ToolCallRefused { attempt_id, .. } => self.in_attempt(seq, attempt_id, "a tool call refusal"),
            Body::EdgeTaken { from, to, via, .. } => self.edge_taken(seq, from, to, via),
            Body::Handoff { from, to, context, context_fields, payload, accepted, .. } => {
                self.handoff(seq, from, to, *context, context_fields, payload, *accepted)
            }
            Body::Delegation { from, to, contract, inputs, budget, .. } => self.delegation(seq, from, to, contract, inputs, budget),
            Body::GateRecorded { gate, from, to, outcome, trigger, .. } => self.gate_recorded(seq, gate, from, to, *outcome, trigger),
            Body::DecisionRequested { subject, .. } => self.decision_requested(seq, subject, &e.body),
            Body::DecisionApplied { subject, decision, by, action, .. } => self.decision_applied(seq, subject, *decision, by, action),
            // A gate's `decide` handler asks for a decision as REQUIRES_DECISION does.
            Body::ActionTaken { scope, action, .. } if action == "decide" => {
                if let Some(gate) = scope.gate() {
                    slot(&mut self.gates, gate).awaiting = true;
                }
            }
            // A gate's `escalate(P)` handler asks P whether to go on: an
            // approve lets the boundary cross, as the engine crosses it.
            Body::ActionTaken { scope, action, .. } if action.starts_with("escalate(") => {
                if let (Some(gate), Some(p)) = (scope.gate(), action.strip_prefix("escalate(").and_then(|a| a.strip_suffix(')'))) {
                    self.escalations.insert(format!("escalation.{p}"), gate.to_string());
                }
            }
            Body::BudgetReserved { scope, attempt_id, amount, .. } => {
                self.known_scopes(seq, scope, attempt_id);
                self.flush_overruns(scope, "work went on in the scope without a budget_exhausted");
                self.reservation_fits(seq, scope, attempt_id, amount);
                match self.attempts.get_mut(attempt_id.as_str()) {
                    Some(a) => a.reservations.push((scope.clone(), amount.clone())),
                    None => self.push(
                        Deviation::new(
                            codes::BUDGET_ACCOUNTING,
                            Some(seq),
                            format!("a reservation for attempt `{attempt_id}`, which never started"),
                        )
                        .attempt(attempt_id),
                    ),
                }
            }
            Body::BudgetSettled { scope, attempt_id, used, .. } => {
                self.known_scopes(seq, scope, attempt_id);
                let held =
                    self.attempts.get_mut(attempt_id.as_str()).and_then(|a| (!a.reservations.is_empty()).then(|| a.reservations.remove(0)));
                match held {
                    Some(reservation) => self.release(&[reservation]),
                    None => self.push(
                        Deviation::new(
                            codes::BUDGET_ACCOUNTING,
                            Some(seq),
                            format!("attempt `{attempt_id}` settled a budget it had not reserved"),
                        )
                        .expected("budget_reserved before budget_settled")
                        .attempt(attempt_id),
                    ),
                }
                for name in scope.split(',') {
                    if let Some(acc) = self.budgets.get_mut(name) {
                        add_usage(&mut acc.used, used);
                    }
                }
                self.settled(seq, scope, attempt_id);
            }
            Body::BudgetExhausted { scope, .. } => {
                // The control plane noticed: the overrun took the declared path.
                if let Some(acc) = self.budgets.get_mut(scope.as_str()) {
                    for o in std::mem::take(&mut acc.pending) {
                        self.notes.push(format!(
                            "budget scope `{scope}` used {} {} at seq {}, over its limit of {}; the control plane recorded budget_exhausted (the call could not be bounded in advance)",
                            o.used, o.limit, o.seq, o.max
                        ));
                    }
                }
            }
            _ => {}
        }
    }

    fn envelope(&mut self, e: &Event) {
        let seq = e.seq;
        // seq: 1, 2, 3 … in file order.
        if seq == self.next_seq {
            self.next_seq += 1;
        } else if seq > self.next_seq {
            let missing: Vec<u64> = (self.next_seq..seq).filter(|s| !self.malformed.contains(s)).collect();
            if !missing.is_empty() {
                let range =
                    if missing.len() == 1 { format!("{}", missing[0]) } else { format!("{}..{}", missing[0], missing[missing.len() - 1]) };
                self.push(
                    Deviation::new(codes::SEQ, Some(seq), format!("seq jumps from {} to {seq}: {range} missing", self.next_seq - 1))
                        .expected(format!("seq {}", self.next_seq))
                        .actual(format!("seq {seq}")),
                );
            }
            self.next_seq = seq + 1;
        } else {
            self.push(
                Deviation::new(codes::SEQ, Some(seq), format!("seq {seq} comes after seq {}: repeated or out of order", self.next_seq - 1))
                    .expected(format!("seq {}", self.next_seq))
                    .actual(format!("seq {seq}")),
            );
        }
        let run_id = self.run_id.get_or_insert_with(|| e.run_id.to_string()).as_str();
        let other_run = *e.run_id != *run_id;
        // The parent is named under the run's first id.
        let parent_seq = e
            .parent_event_id
            .as_deref()
            .map(|parent| parent.strip_prefix(run_id).and_then(|r| r.strip_prefix('/')).and_then(|n| n.parse::<u64>().ok()));
        let run_id = if other_run || matches!(parent_seq, Some(None)) || parent_seq.flatten().is_some_and(|p| p < 1 || p >= seq) {
            run_id.to_string()
        } else {
            String::new()
        };
        if other_run {
            self.push(
                Deviation::new(codes::ENVELOPE, Some(seq), "the event belongs to another run")
                    .expected(format!("run_id {run_id}"))
                    .actual(format!("run_id {}", e.run_id)),
            );
        }
        let id_ok = e.event_id.strip_prefix(&*e.run_id).and_then(|r| r.strip_prefix('/')).and_then(|n| n.parse::<u64>().ok()) == Some(seq);
        if !id_ok {
            self.push(
                Deviation::new(codes::ENVELOPE, Some(seq), "event_id is not {run_id}/{seq}")
                    .expected(Event::id_for(&e.run_id, seq))
                    .actual(e.event_id.to_string()),
            );
        }
        if let (Some(parent), Some(parent_seq)) = (&e.parent_event_id, parent_seq) {
            match parent_seq {
                Some(p) if p >= 1 && p < seq => {}
                _ => self.push(
                    Deviation::new(codes::ENVELOPE, Some(seq), "parent_event_id does not name an earlier event of this run")
                        .expected(format!("{run_id}/N with N < {seq}"))
                        .actual(parent.to_string()),
                ),
            }
        }
    }

    fn run_lifecycle(&mut self, e: &Event) {
        let seq = e.seq;
        let kind = e.kind();
        match self.run {
            RunPhase::NotStarted => {
                if let Body::RunStarted { workflow, .. } = &e.body {
                    self.run = RunPhase::Running;
                    if !self.program.workflows.contains_key(workflow) {
                        let known: Vec<&str> = self.program.workflows.keys().map(String::as_str).collect();
                        self.push(
                            Deviation::new(codes::RUN_LIFECYCLE, Some(seq), format!("the run's workflow `{workflow}` is not in the plan"))
                                .expected(format!("one of: {}", known.join(", ")))
                                .actual(workflow.clone()),
                        );
                    }
                } else {
                    self.run = RunPhase::Running;
                    self.push(
                        Deviation::new(codes::RUN_LIFECYCLE, Some(seq), "the trace does not begin with run_started")
                            .expected("run_started")
                            .actual(kind),
                    );
                }
            }
            RunPhase::Terminated => {
                if !self.after_end_reported {
                    self.after_end_reported = true;
                    self.push(
                        Deviation::new(codes::RUN_LIFECYCLE, Some(seq), "an event after run_terminated")
                            .expected("nothing after run_terminated")
                            .actual(kind),
                    );
                }
            }
            RunPhase::Paused => {
                if matches!(e.body, Body::RunResumed { .. }) {
                    self.run = RunPhase::Running;
                } else {
                    self.push(
                        Deviation::new(codes::RUN_LIFECYCLE, Some(seq), "an event after run_paused before run_resumed")
                            .expected("run_resumed")
                            .actual(kind),
                    );
                    self.run = RunPhase::Running;
                }
                return;
            }
            RunPhase::Running => {
                if matches!(e.body, Body::RunStarted { .. }) {
                    self.push(
                        Deviation::new(codes::RUN_LIFECYCLE, Some(seq), "a second run_started")
                            .expected("run_resumed for a new execution")
                            .actual("run_started"),
                    );
                }
            }
        }
        match e.body {
            Body::RunPaused { .. } if self.run == RunPhase::Running => self.run = RunPhase::Paused,
            Body::RunTerminated { .. } => self.run = RunPhase::Terminated,
            _ => {}
        }
    }

    // --------------------------------------------------------------- nodes

    fn node_started(&mut self, seq: u64, node: &str, kind: NodeKind, visit: u32) {
        let first = !self.any_node_started;
        self.any_node_started = true;
        let Some(plan) = &self.plan else { return };
        let Some(planned) = plan.node(node) else {
            let wf = plan.wf.name.clone();
            self.push(Deviation::new(codes::NODE_LIFECYCLE, Some(seq), format!("node `{node}` is not in workflow `{wf}`")).node(node));
            return;
        };
        let is_start = plan.start == Some(node);
        let mut found = Vec::new();
        if planned.kind != kind {
            found.push(
                Deviation::new(codes::NODE_LIFECYCLE, Some(seq), format!("node `{node}` started as a `{kind}` node"))
                    .expected(format!("node_kind {}", planned.kind))
                    .actual(format!("node_kind {kind}"))
                    .node(node),
            );
        }
        let rt = slot(&mut self.nodes, node);
        if rt.phase == Phase::Running {
            found.push(
                Deviation::new(codes::NODE_LIFECYCLE, Some(seq), format!("node `{node}` started again while visit {} runs", rt.visits))
                    .expected(format!("node_completed or node_failed of {node} first"))
                    .actual("node_started")
                    .node(node),
            );
        }
        if visit != rt.visits + 1 {
            found.push(
                Deviation::new(
                    codes::NODE_LIFECYCLE,
                    Some(seq),
                    format!("node `{node}` started visit {visit} after {} visit(s)", rt.visits),
                )
                .expected(format!("visit {}", rt.visits + 1))
                .actual(format!("visit {visit}"))
                .node(node),
            );
        }
        rt.visits = visit.max(rt.visits + 1);
        rt.phase = Phase::Running;
        rt.attempt_no = 0;
        // A node budget covers one visit.
        let scope = format!("node.{node}");
        if self.budgets.contains_key(&scope) {
            self.flush_overruns(&scope, "the node's visit ended without a budget_exhausted");
            if let Some(acc) = self.budgets.get_mut(&scope) {
                *acc = ScopeAcc::new(acc.limits.clone());
            }
        }
        self.deviations.append(&mut found);
        // Order: an edge into it, unless it is the start node at the start.
        let entry = self.entries.get_mut(node).and_then(|list| (!list.is_empty()).then(|| list.remove(0)));
        match entry {
            Some(entry) => self.transfers_present(seq, node, &entry),
            None if first && is_start => {}
            None => {
                let d = Deviation::new(codes::NODE_ORDER, Some(seq), format!("node `{node}` started without an edge into it"))
                    .expected(format!("edge_taken into {node} before node_started"))
                    .actual(format!("node_started {node}"))
                    .node(node);
                self.push(d);
            }
        }
    }

    fn node_completed(&mut self, seq: u64, node: &str, status: NodeStatus, output: Option<&ArtifactRef>) {
        let rt = slot(&mut self.nodes, node);
        let ok = match rt.phase {
            Phase::Running => true,
            // A handler's continue/skip/degrade after a failure.
            Phase::Failed => status != NodeStatus::Completed,
            Phase::Idle | Phase::Completed => false,
        };
        let phase = rt.phase;
        if ok {
            rt.phase = Phase::Completed;
            rt.completed_once = true;
            rt.output = output.map(|a| a.digest.clone());
        }
        if !ok {
            let why = match phase {
                Phase::Idle => format!("node `{node}` completed without a start"),
                Phase::Completed => format!("node `{node}` completed twice in one visit"),
                _ => format!("node `{node}` completed as `{status}` after it failed"),
            };
            self.push(
                Deviation::new(codes::NODE_LIFECYCLE, Some(seq), why)
                    .expected(format!("node_started {node} before node_completed"))
                    .actual(format!("node_completed {node} ({status})"))
                    .node(node),
            );
        }
    }

    fn node_failed(&mut self, seq: u64, node: &str, error_code: flow_trace::ErrorCode) {
        let rt = slot(&mut self.nodes, node);
        match rt.phase {
            // A guard or a state transition can fail a node that completed.
            Phase::Running | Phase::Completed => rt.phase = Phase::Failed,
            Phase::Idle | Phase::Failed => {
                let why = if rt.phase == Phase::Idle {
                    format!("node `{node}` failed without a start")
                } else {
                    format!("node `{node}` failed twice")
                };
                self.push(
                    Deviation::new(codes::NODE_LIFECYCLE, Some(seq), why)
                        .expected(format!("node_started {node} before node_failed"))
                        .actual(format!("node_failed {node} ({error_code})"))
                        .node(node)
                        .reason(error_code.as_str()),
                );
            }
        }
    }

    fn attempt_started(&mut self, seq: u64, node: &str, attempt: &str, attempt_no: u32) {
        let rt = slot(&mut self.nodes, node);
        let mut found = Vec::new();
        if rt.phase != Phase::Running {
            found.push(
                Deviation::new(codes::ATTEMPT_LIFECYCLE, Some(seq), format!("attempt `{attempt}` of node `{node}`, which is not running"))
                    .expected(format!("node_started {node} before its attempts"))
                    .node(node)
                    .attempt(attempt),
            );
        }
        if attempt_no != rt.attempt_no + 1 {
            found.push(
                Deviation::new(
                    codes::ATTEMPT_LIFECYCLE,
                    Some(seq),
                    format!("attempt {attempt_no} of node `{node}` after {} attempt(s)", rt.attempt_no),
                )
                .expected(format!("attempt_no {}", rt.attempt_no + 1))
                .actual(format!("attempt_no {attempt_no}"))
                .node(node)
                .attempt(attempt),
            );
        }
        rt.attempt_no = attempt_no.max(rt.attempt_no + 1);
        if self.attempts.get(attempt).is_some_and(|a| a.open) {
            found.push(
                Deviation::new(codes::ATTEMPT_LIFECYCLE, Some(seq), format!("attempt `{attempt}` started twice"))
                    .node(node)
                    .attempt(attempt),
            );
        }
        self.attempts.insert(attempt.to_string(), AttemptRt { node: node.to_string(), open: true, calls: 0, reservations: Vec::new() });
        self.deviations.append(&mut found);
        // One step per attempt, against every scope that covers it.
        let agent = self.plan.as_ref().and_then(|p| p.agent_of(node));
        let mut scopes: Vec<String> = vec!["run".into()];
        if let Some(a) = agent {
            scopes.push(format!("agent.{a}"));
        }
        scopes.push(format!("node.{node}"));
        if self.delegated.contains(node) {
            scopes.push(format!("delegation.{node}"));
        }
        let mut found = Vec::new();
        for s in scopes {
            let Some(acc) = self.budgets.get_mut(s.as_str()) else { continue };
            acc.used.steps += 1;
            // A step that does not fit is refused before the attempt starts.
            if let Some(max) = acc.limits.steps.filter(|&m| acc.used.steps > m) {
                if !acc.reported[0] {
                    acc.reported[0] = true;
                    found.push(
                        Deviation::new(
                            codes::BUDGET_EXCEEDED,
                            Some(seq),
                            format!("budget scope `{s}` took step {} over its limit of {max}", acc.used.steps),
                        )
                        .expected(format!("steps <= {max}, else budget_exhausted instead of the attempt"))
                        .actual(format!("steps = {}", acc.used.steps))
                        .node(node)
                        .attempt(attempt),
                    );
                }
            }
        }
        self.deviations.append(&mut found);
    }

    fn attempt_ended(&mut self, seq: u64, node: &str, attempt: &str, failure: Option<flow_trace::ErrorCode>) {
        let what = if failure.is_some() { "failed" } else { "completed" };
        match self.attempts.get_mut(attempt) {
            Some(a) if a.open => {
                a.open = false;
                let owner = std::mem::take(&mut a.node);
                let held = std::mem::take(&mut a.reservations);
                let unsettled = held.len();
                self.release(&held);
                if owner != node {
                    self.push(
                        Deviation::new(
                            codes::ATTEMPT_LIFECYCLE,
                            Some(seq),
                            format!("attempt `{attempt}` of node `{owner}` {what} as node `{node}`'s"),
                        )
                        .node(node)
                        .attempt(attempt),
                    );
                }
                let excused = failure.is_some_and(|code| code.stops_the_run());
                if unsettled > 0 && !excused {
                    self.push(
                        Deviation::new(
                            codes::BUDGET_ACCOUNTING,
                            Some(seq),
                            format!("attempt `{attempt}` {what} with {unsettled} reservation(s) never settled"),
                        )
                        .expected("budget_settled for every budget_reserved of the attempt")
                        .actual(format!("attempt_{what}"))
                        .node(node)
                        .attempt(attempt),
                    );
                }
            }
            Some(_) => self.push(
                Deviation::new(codes::ATTEMPT_LIFECYCLE, Some(seq), format!("attempt `{attempt}` {what} after it had ended"))
                    .node(node)
                    .attempt(attempt),
            ),
            None => self.push(
                Deviation::new(codes::ATTEMPT_LIFECYCLE, Some(seq), format!("attempt `{attempt}` {what} without a start"))
                    .expected(format!("attempt_started {attempt}"))
                    .node(node)
                    .attempt(attempt),
            ),
        }
    }

    fn in_attempt(&mut self, seq: u64, attempt: &str, what: &str) {
        if !self.attempts.get(attempt).is_some_and(|a| a.open) {
            self.push(
                Deviation::new(codes::ATTEMPT_LIFECYCLE, Some(seq), format!("{what} in attempt `{attempt}`, which is not running"))
                    .expected(format!("attempt_started {attempt} before, and no attempt end in between"))
                    .attempt(attempt),
            );
        }
    }

    fn tool_permitted(&mut self, seq: u64, tool: &str, node: &str, attempt: &str, agent: Option<&str>) {
        let Some(plan) = &self.plan else { return };
        let program = self.program;
        let problem = match agent {
            Some(agent) => {
                let allowed_by_agent = program.decls.get(agent).map(|d| d.holds_tool(tool)).unwrap_or(false);
                let allowed_by_tool = program.decls.get(tool).map(|d| d.allows_agent(agent)).unwrap_or(false);
                match (allowed_by_agent, allowed_by_tool) {
                    (true, true) => None,
                    (false, _) => Some((format!("agent `{agent}` called `{tool}`, which is not among its tools"), "a tool_call_refused")),
                    (_, false) => {
                        Some((format!("agent `{agent}` called `{tool}`, whose allowed_agents exclude it"), "a tool_call_refused"))
                    }
                }
            }
            None => match plan.node(node) {
                Some(n) if n.kind == NodeKind::Tool && n.target.first().is_some_and(|t| t == tool) => None,
                Some(n) if n.kind == NodeKind::Tool => Some((format!("tool node `{node}` called `{tool}`"), "its own tool")),
                _ => Some((format!("`{tool}` was called in node `{node}` with no calling agent"), "calls by the node's agent")),
            },
        };
        if let Some((message, expected)) = problem {
            self.push(
                Deviation::new(codes::TOOL_NOT_PERMITTED, Some(seq), message)
                    .expected(expected)
                    .actual(format!("tool_call_started {tool}"))
                    .node(node)
                    .attempt(attempt),
            );
        }
    }

    // --------------------------------------------------------------- edges

    fn edge_taken(&mut self, seq: u64, from: &str, to: &str, via: &Via) {
        let Some(plan) = &self.plan else { return };
        let mut found = Vec::new();
        if let Some(problem) = plan.edge_problem(from, to, via) {
            found.push(
                Deviation::new(codes::EDGE_NOT_IN_PLAN, Some(seq), format!("edge {from} -> {to} ({via}) is not in the plan: {problem}"))
                    .expected("an edge of the plan, or an implicit one")
                    .actual(format!("edge_taken {from} -> {to} via {via}"))
                    .node(to),
            );
        }
        // The state `from` must be in.
        let graph_edge = via.is_graph_edge();
        let inside = matches!(via, Via::Fanout | Via::LoopRound | Via::MapItem(_));
        let phase = self.nodes.get(from).map(|n| n.phase).unwrap_or_default();
        if graph_edge && phase != Phase::Completed {
            found.push(
                Deviation::new(codes::NODE_ORDER, Some(seq), format!("edge {from} -> {to} taken before `{from}` completed"))
                    .expected(format!("node_completed {from} before the edge"))
                    .actual(format!("{from} is {}", phase_name(phase)))
                    .node(from),
            );
        }
        if inside && phase != Phase::Running {
            found.push(
                Deviation::new(codes::NODE_ORDER, Some(seq), format!("edge {from} -> {to} ({via}) taken while `{from}` is not running"))
                    .expected(format!("{from} running"))
                    .actual(format!("{from} is {}", phase_name(phase)))
                    .node(from),
            );
        }
        // A gated boundary opens only by a PASS or an approve.
        if let Some(gate) = plan.index.gate_name_on(from, to) {
            let rt = slot(&mut self.gates, gate);
            if !rt.open {
                found.push(
                    Deviation::new(
                        codes::GATE_NOT_PASSED,
                        Some(seq),
                        format!("boundary {from} -> {to} crossed without gate `{gate}` letting it"),
                    )
                    .expected(format!("gate_recorded {gate} PASS, or decision_applied approve on {gate}, before the crossing"))
                    .actual(format!("edge_taken {from} -> {to} via {via}"))
                    .node(to)
                    .gate(gate),
                );
            }
            rt.open = false;
            rt.awaiting = false;
        }
        self.deviations.append(&mut found);
        slot(&mut self.entries, to).push(Entry { from: from.to_string(), via: via.clone(), transfers: Vec::new() });
    }

    /// The declared transfers of the edge that led to `node` happened.
    fn transfers_present(&mut self, seq: u64, node: &str, entry: &Entry) {
        let Some(plan) = &self.plan else { return };
        let graph_edge = matches!(entry.via, Via::Always | Via::Else | Via::When(_) | Via::Gate(_));
        let source = if graph_edge {
            Some(entry.from.as_str())
        } else if entry.via == Via::Fanout {
            // The engine's rule: the first transfer into the branch from
            // the fan-out node or from a node that completed earlier.
            plan.wf
                .transfers
                .iter()
                .find(|t| t.to == node && (t.from == entry.from || self.nodes.get(t.from.as_str()).is_some_and(|n| n.completed_once)))
                .map(|t| t.from.as_str())
        } else {
            None
        };
        let Some(source) = source else { return };
        let mut found = Vec::new();
        for t in plan.wf.transfers.iter().filter(|t| t.from == source && t.to == node) {
            let handoff = t.kind == TransferKind::Handoff;
            if !entry.transfers.iter().any(|(h, f)| *h == handoff && *f == source) {
                found.push(
                    Deviation::new(
                        codes::TRANSFER,
                        Some(seq),
                        format!("node `{node}` started without the declared {} {source} -> {node}", t.kind),
                    )
                    .expected(format!("{} {source} -> {node} before node_started", if handoff { "handoff" } else { "delegation" }))
                    .actual(format!("node_started {node}"))
                    .node(node),
                );
            }
        }
        self.deviations.append(&mut found);
    }

    fn note_transfer(&mut self, handoff: bool, from: &str, to: &str) -> bool {
        match self.entries.get_mut(to).and_then(|list| list.last_mut()) {
            Some(entry) => {
                entry.transfers.push((handoff, from.to_string()));
                true
            }
            None => false,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn handoff(&mut self, seq: u64, from: &str, to: &str, context: ContextMode, fields: &[String], payload: &ArtifactRef, accepted: bool) {
        let on_edge = self.note_transfer(true, from, to);
        let Some(plan) = &self.plan else { return };
        let mut found = Vec::new();
        if !on_edge {
            found.push(
                Deviation::new(codes::TRANSFER, Some(seq), format!("handoff {from} -> {to} without an edge into `{to}` being taken"))
                    .expected(format!("edge_taken into {to} before the handoff"))
                    .node(to),
            );
        }
        let Some(t) = plan.index.handoff_on(plan.wf, from, to) else {
            found.push(
                Deviation::new(codes::TRANSFER, Some(seq), format!("the plan declares no handoff {from} -> {to}"))
                    .actual(format!("handoff {from} -> {to}"))
                    .node(to),
            );
            self.deviations.append(&mut found);
            return;
        };
        let want_context = t.context();
        let want_fields = t.context_fields();
        if Some(context) != want_context || fields != want_fields.as_slice() {
            found.push(
                Deviation::new(codes::TRANSFER, Some(seq), format!("handoff {from} -> {to} passed another context slice than declared"))
                    .expected(format!(
                        "context {}, context_fields [{}]",
                        want_context.map_or("?", ContextMode::as_str),
                        want_fields.join(", ")
                    ))
                    .actual(format!("context {context}, context_fields [{}]", fields.join(", ")))
                    .node(to),
            );
        }
        // The payload is what `from` produced.
        if let Some(made) = self.nodes.get(from).and_then(|n| n.output.as_deref()) {
            if made != payload.digest {
                found.push(
                    Deviation::new(
                        codes::PAYLOAD,
                        Some(seq),
                        format!("handoff {from} -> {to} carried something other than `{from}`'s output"),
                    )
                    .expected(made.to_string())
                    .actual(payload.digest.clone())
                    .node(to),
                );
            }
        }
        self.deviations.append(&mut found);
        // A refused handoff may carry a payload of another type: the
        // runtime refuses exactly those.
        if let (true, Some(ty)) = (accepted, t.payload_type()) {
            let key = format!("handoff {from} -> {to}");
            self.typed(seq, &key, ty, payload, to);
        }
    }

    fn delegation(&mut self, seq: u64, from: &str, to: &str, contract: &str, inputs: &ArtifactRef, granted: &Usage) {
        let on_edge = self.note_transfer(false, from, to);
        self.delegated.insert(to.to_string());
        let Some(plan) = &self.plan else { return };
        let program = self.program;
        let mut found = Vec::new();
        if !on_edge {
            found.push(
                Deviation::new(codes::TRANSFER, Some(seq), format!("delegation {from} -> {to} without an edge into `{to}` being taken"))
                    .expected(format!("edge_taken into {to} before the delegation"))
                    .node(to),
            );
        }
        let Some(t) = plan.index.delegation_on(plan.wf, from, to) else {
            found.push(
                Deviation::new(codes::TRANSFER, Some(seq), format!("the plan declares no delegation {from} -> {to}"))
                    .actual(format!("delegation {from} -> {to} under {contract}"))
                    .node(to),
            );
            self.deviations.append(&mut found);
            return;
        };
        let want = t.contract().unwrap_or_default();
        if want != contract {
            found.push(
                Deviation::new(codes::TRANSFER, Some(seq), format!("delegation {from} -> {to} under another contract than declared"))
                    .expected(format!("contract {want}"))
                    .actual(format!("contract {contract}"))
                    .node(to),
            );
        }
        let decl = program.decls.get(want);
        let limits = decl.and_then(|c| c.budget(program)).map(|b| Limits::of(&b));
        let expected = limits.as_ref().map(|l| Usage {
            steps: l.steps.unwrap_or(0),
            tokens: l.tokens.unwrap_or(0),
            tool_calls: l.tool_calls.unwrap_or(0),
            cost: l.cost.unwrap_or(0.0),
            duration_ms: l.duration_ms.unwrap_or(0),
        });
        let same = |a: &Usage, b: &Usage| {
            a.steps == b.steps
                && a.tokens == b.tokens
                && a.tool_calls == b.tool_calls
                && a.duration_ms == b.duration_ms
                && (a.cost - b.cost).abs() <= 1e-9
        };
        let expected = expected.unwrap_or_default();
        if !same(&expected, granted) {
            found.push(
                Deviation::new(
                    codes::TRANSFER,
                    Some(seq),
                    format!("delegation {from} -> {to} granted another budget than contract `{want}`'s"),
                )
                .expected(usage_text(&expected))
                .actual(usage_text(granted))
                .node(to),
            );
        }
        self.deviations.append(&mut found);
        // The delegation subtree's budget starts afresh.
        let scope = format!("delegation.{to}");
        self.flush_overruns(&scope, "the delegation ended without a budget_exhausted");
        match limits {
            Some(limits) => {
                self.budgets.insert(scope, ScopeAcc::new(limits));
            }
            None => {
                self.budgets.remove(&scope);
            }
        }
        // The runtime refuses a delegation whose inputs are not of the
        // contract's `inputs` type: one that happened has such inputs.
        if let Some(ty) = decl.and_then(|d| d.inputs_type()) {
            let key = format!("contract {want} inputs");
            self.typed(seq, &key, ty, inputs, to);
        }
    }

    /// Checks an artifact against a type, when the artifacts are at hand.
    fn typed(&mut self, seq: u64, key: &str, ty: &flow_check::types::Ty, artifact: &ArtifactRef, node: &str) {
        if let Some(errors) = self.type_problem(seq, key, ty, artifact, node) {
            self.push(
                Deviation::new(codes::PAYLOAD, Some(seq), format!("the payload of {key} is not a `{ty}`"))
                    .expected(format!("a value of type {ty}"))
                    .actual(errors)
                    .node(node),
            );
        }
    }

    /// Why an artifact is not of a type (`None` when it is, or when it
    /// cannot be told: no store, or a type that does not compile). A
    /// missing artifact is reported here.
    fn type_problem(&mut self, seq: u64, key: &str, ty: &flow_check::types::Ty, artifact: &ArtifactRef, node: &str) -> Option<String> {
        let Some(store) = self.options.artifacts else {
            self.payloads_unchecked += 1;
            return None;
        };
        let value = match store.get(artifact) {
            Ok(v) => v,
            Err(e) => {
                self.push(
                    Deviation::new(codes::PAYLOAD, Some(seq), format!("the payload of {key} cannot be read: {e}"))
                        .expected(format!("artifact {} in the run's artifacts/", artifact.digest))
                        .node(node),
                );
                return None;
            }
        };
        let types = &self.program.types;
        let validator = self.validators.entry(key.to_string()).or_insert_with(|| Validator::new(ty, types).ok());
        validator.as_ref()?.validate(&value).err().map(|errors| errors.join("; "))
    }

    // --------------------------------------------------------------- gates

    fn gate_recorded(&mut self, seq: u64, gate: &str, from: &str, to: &str, outcome: Outcome, trigger: &str) {
        let Some(plan) = &self.plan else { return };
        let Some(g) = plan.wf.gates.get(gate) else {
            self.push(
                Deviation::new(codes::GATE_NOT_PASSED, Some(seq), format!("workflow `{}` declares no gate `{gate}`", plan.wf.name))
                    .actual(format!("gate_recorded {gate} {outcome}"))
                    .gate(gate),
            );
            return;
        };
        let mut found = Vec::new();
        if g.from != from || g.to != to {
            found.push(
                Deviation::new(codes::GATE_NOT_PASSED, Some(seq), format!("gate `{gate}` recorded on another boundary"))
                    .expected(format!("{} -> {}", g.from, g.to))
                    .actual(format!("{from} -> {to}"))
                    .gate(gate),
            );
        }
        // The trigger: whoever ran `from`.
        let who = trigger.split_once(" on ").map(|(w, _)| w).unwrap_or(trigger);
        let who = who.split_once('.').map(|(_, n)| n).unwrap_or(who);
        let runner = plan.agent_of(&g.from).unwrap_or("control");
        if who != runner {
            found.push(
                Deviation::new(
                    codes::GATE_TRIGGER,
                    Some(seq),
                    format!("gate `{gate}` triggered by `{who}`, but `{}` is run by `{runner}`", g.from),
                )
                .expected(if runner == "control" { "control".to_string() } else { format!("agent.{runner}") })
                .actual(trigger.to_string())
                .gate(gate)
                .node(&g.from),
            );
        }
        if let Some(trigger) = g.trigger() {
            let by = trigger.by;
            if !by.is_empty() && outcome != Outcome::Block && !plan.expand_principals(&by).contains(who) {
                found.push(
                    Deviation::new(
                        codes::GATE_TRIGGER,
                        Some(seq),
                        format!("gate `{gate}` recorded {outcome} on a trigger by `{who}`, who may not trigger it"),
                    )
                    .expected(format!("a trigger by one of [{}], or BLOCK", by.join(", ")))
                    .actual(format!("{outcome} triggered by {who}"))
                    .gate(gate),
                );
            }
        }
        self.deviations.append(&mut found);
        let rt = slot(&mut self.gates, gate);
        rt.open = outcome == Outcome::Pass;
        rt.awaiting = outcome == Outcome::RequiresDecision;
    }

    fn decision_requested(&mut self, seq: u64, subject: &str, request: &Body) {
        if self.pending_decisions.insert(subject.to_string(), request.clone()).is_some() {
            self.push(
                Deviation::new(
                    codes::DECISION_UNREQUESTED,
                    Some(seq),
                    format!("a second decision was requested on `{subject}` before the first was answered"),
                )
                .gate(subject),
            );
        }
    }

    fn decision_applied(&mut self, seq: u64, subject: &str, decision: flow_trace::Decision, by: &str, action: &str) {
        let request = self.pending_decisions.remove(subject);
        let mut found = Vec::new();
        if let Some(plan) = &self.plan {
            let planned = match (plan.wf.gates.get(subject), plan.wf.nodes.get(subject)) {
                (Some(gate), _) => Some(flow_check::semantics::gate_decision_action(gate, decision)),
                (None, Some(node)) if node.kind == NodeKind::Human => Some(flow_check::semantics::human_decision_action(node, decision)),
                _ => None,
            };
            if let Some(planned) = planned.map(|a| a.render()).filter(|a| a != action) {
                found.push(
                    Deviation::new(
                        codes::DECISION_ACTION,
                        Some(seq),
                        format!("decision `{decision}` on `{subject}` was applied as `{action}`, but the plan says `{planned}`"),
                    )
                    .expected(planned)
                    .actual(action.to_string())
                    .gate(subject),
                );
            }
        }
        let is_gate = self.plan.as_ref().is_some_and(|p| p.wf.gates.contains_key(subject));
        match &request {
            Some(Body::DecisionRequested { deciders, decisions, .. }) => {
                if !decisions.is_empty() && !decisions.contains(&decision) {
                    found.push(
                        Deviation::new(
                            codes::DECISION_UNREQUESTED,
                            Some(seq),
                            format!("decision `{decision}` on `{subject}` was not one of those offered"),
                        )
                        .expected(format!("one of [{}]", decisions.iter().map(|d| d.as_str()).collect::<Vec<_>>().join(", ")))
                        .actual(decision.to_string())
                        .gate(subject),
                    );
                }
                if !deciders.is_empty() {
                    let allowed = match &self.plan {
                        Some(p) => p.expand_principals(deciders),
                        None => deciders.iter().cloned().collect(),
                    };
                    if !allowed.contains(by) {
                        found.push(
                            Deviation::new(
                                codes::DECIDER,
                                Some(seq),
                                format!("`{by}` decided on `{subject}`, but the request asked [{}]", deciders.join(", ")),
                            )
                            .expected(format!("one of [{}]", deciders.join(", ")))
                            .actual(format!("by {by}"))
                            .gate(subject),
                        );
                    }
                }
            }
            _ => found.push(
                Deviation::new(
                    codes::DECISION_UNREQUESTED,
                    Some(seq),
                    format!("decision `{decision}` on `{subject}` without a pending request"),
                )
                .expected(format!("decision_requested {subject} before decision_applied"))
                .actual(format!("decision_applied {subject} {decision}"))
                .gate(subject),
            ),
        }
        if let Some(plan) = &self.plan {
            let planned = plan.deciders_of(subject);
            if !planned.is_empty() && !plan.expand_principals(&planned).contains(by) {
                found.push(
                    Deviation::new(codes::DECIDER, Some(seq), format!("`{by}` may not decide on `{subject}`"))
                        .expected(format!("one of [{}]", planned.join(", ")))
                        .actual(format!("by {by}"))
                        .gate(subject),
                );
            }
        }
        if is_gate {
            let rt = slot(&mut self.gates, subject);
            if !rt.awaiting {
                found.push(
                    Deviation::new(
                        codes::DECISION_UNREQUESTED,
                        Some(seq),
                        format!("gate `{subject}` got a decision without recording REQUIRES_DECISION"),
                    )
                    .expected(format!("gate_recorded {subject} REQUIRES_DECISION (or its `decide` handler) before a decision"))
                    .gate(subject),
                );
            }
            rt.awaiting = false;
            rt.open = decision == flow_trace::Decision::Approve;
        }
        if let Some(gate) = self.escalations.remove(subject) {
            slot(&mut self.gates, &gate).open = decision == flow_trace::Decision::Approve;
        }
        self.deviations.append(&mut found);
    }

    // ------------------------------------------------------------- budgets

    fn known_scopes(&mut self, seq: u64, scopes: &str, attempt: &str) {
        for name in scopes.split(',') {
            let known = self.budgets.contains_key(name) || (name.starts_with("delegation.") && self.plan.is_none());
            if !known {
                self.push(
                    Deviation::new(
                        codes::BUDGET_ACCOUNTING,
                        Some(seq),
                        format!("budget scope `{name}` is not one the plan declares for this run"),
                    )
                    .actual(format!("scope {scopes}"))
                    .attempt(attempt),
                );
            }
        }
    }

    /// Gives back what reservations held.
    fn release(&mut self, held: &[(String, Usage)]) {
        for (scopes, amount) in held {
            for name in scopes.split(',') {
                if let Some(acc) = self.budgets.get_mut(name) {
                    sub_usage(&mut acc.reserved, amount);
                }
            }
        }
    }

    /// A call whose reservation does not fit is not made.
    fn reservation_fits(&mut self, seq: u64, scopes: &str, attempt: &str, amount: &Usage) {
        let mut found = Vec::new();
        for name in scopes.split(',') {
            let Some(acc) = self.budgets.get_mut(name) else { continue };
            let mut total = acc.used.clone();
            add_usage(&mut total, &acc.reserved);
            add_usage(&mut total, amount);
            for (i, limit, max, held) in overs(&acc.limits, &total).into_iter().flatten() {
                if i == 0 || acc.reported[i] {
                    continue;
                }
                acc.reported[i] = true;
                found.push(
                    Deviation::new(
                        codes::BUDGET_EXCEEDED,
                        Some(seq),
                        format!("a reservation against budget scope `{name}` does not fit under its {limit} limit of {max}"),
                    )
                    .expected(format!("used + reserved {limit} <= {max}, else budget_exhausted instead of the call"))
                    .actual(format!("{limit} used and reserved = {held}"))
                    .attempt(attempt),
                );
            }
        }
        self.deviations.append(&mut found);
    }

    /// Limits exceeded after a settlement wait for the control plane's
    /// `budget_exhausted`.
    fn settled(&mut self, seq: u64, scopes: &str, attempt: &str) {
        for name in scopes.split(',') {
            let Some(acc) = self.budgets.get_mut(name) else { continue };
            for (i, limit, max, used) in overs(&acc.limits, &acc.used).into_iter().flatten() {
                if acc.reported[i] || acc.pending.iter().any(|o| o.limit == limit) {
                    continue;
                }
                acc.pending.push(Overrun { seq, limit, max, used, attempt: Some(attempt.to_string()) });
            }
        }
    }

    /// Overruns the control plane did not answer with `budget_exhausted`.
    fn flush_overruns(&mut self, scopes: &str, why: &str) {
        let mut found = Vec::new();
        for name in scopes.split(',') {
            let Some(acc) = self.budgets.get_mut(name) else { continue };
            for o in std::mem::take(&mut acc.pending) {
                let i = ["steps", "tokens", "tool_calls", "cost"].iter().position(|l| *l == o.limit).unwrap_or(0);
                acc.reported[i] = true;
                let mut d = Deviation::new(
                    codes::BUDGET_EXCEEDED,
                    Some(o.seq),
                    format!("budget scope `{name}` used {} {}, over its limit of {}, and {why}", o.used, o.limit, o.max),
                )
                .expected(format!("{} <= {} (or budget_exhausted at once)", o.limit, o.max))
                .actual(format!("{} = {}", o.limit, o.used));
                if let Some(a) = &o.attempt {
                    d = d.attempt(a);
                }
                if let Some(node) = name.strip_prefix("node.").or_else(|| name.strip_prefix("delegation.")) {
                    d = d.node(node);
                }
                found.push(d);
            }
        }
        self.deviations.append(&mut found);
    }

    // --------------------------------------------------------- termination

    /// Keeps what a later `run_terminated` may follow from: the events
    /// whose kind implies a termination reason (an `end` node's completion,
    /// a handler's action, a failure, an exhausted budget, an escalation's
    /// decision), and where the last halting policy violation was.
    fn remember_cause(&mut self, position: usize, e: &Event) {
        let keep = match &e.body {
            Body::NodeCompleted { node, .. } => self.plan.as_ref().and_then(|p| p.node(node)).is_some_and(|n| n.kind == NodeKind::End),
            Body::ActionTaken { .. } | Body::NodeFailed { .. } | Body::BudgetExhausted { .. } => true,
            Body::DecisionApplied { subject, .. } => subject.starts_with("escalation."),
            Body::PolicyViolated { response, .. } => {
                if *response != flow_trace::PolicyResponse::Warn {
                    self.last_policy_stop = Some(position);
                }
                false
            }
            _ => false,
        };
        if keep {
            self.causes.insert(e.seq, (position, e.body.clone()));
        } else if !self.causes.is_empty() {
            // The latest event with a seq is the one a parent names.
            self.causes.remove(&e.seq);
        }
    }

    fn termination(&mut self, i: usize, e: &Event, reason: &str, status: &str) {
        let seq = e.seq;
        // (A status that is not one of the five does not parse: T001.)
        let Some(plan) = &self.plan else { return };
        // What it follows from: its parent, else the event before it.
        let parent_seq =
            e.parent_event_id.as_deref().and_then(|p| p.rsplit_once('/')).and_then(|(_, n)| n.parse::<u64>().ok()).filter(|&p| p < seq);
        // Only causes that imply a reason were kept: any other cause
        // implies nothing to check.
        let cause_seq = match parent_seq {
            Some(p) => p,
            None => match self.previous {
                Some(previous) => previous,
                None => return,
            },
        };
        let Some((cause_at, cause)) = self.causes.get(&cause_seq).filter(|(at, _)| *at < i).map(|(at, b)| (*at, b.clone())) else {
            return;
        };
        let cause_kind = cause.kind();
        let cause = &cause;
        // A run monitor's halt (or block, or escalation) on the way fails
        // a run that would have ended as its cause says.
        let policy_stop = self.last_policy_stop.is_some_and(|at| at >= cause_at && at < i);
        // (reason, statuses) the cause implies; `None`: anything goes.
        let expected: Option<(String, &[&str])> = match cause {
            Body::NodeCompleted { node, .. } => match plan.node(node).filter(|n| n.kind == NodeKind::End) {
                Some(n) => {
                    let want = n.target.first().cloned().unwrap_or_else(|| n.name.clone());
                    // A success end under a false `success` condition, or
                    // with a result not of the declared `output` type, fails.
                    let statuses: &[&str] = match n.status() {
                        TerminationStatus::Success if plan.wf.success().is_some() || plan.wf.output_type().is_some() => {
                            &["success", "failure"]
                        }
                        TerminationStatus::Success => &["success"],
                        TerminationStatus::Failure => &["failure"],
                        TerminationStatus::Partial => &["partial"],
                        TerminationStatus::Escalated => &["escalated"],
                        TerminationStatus::Cancelled => &["cancelled"],
                    };
                    Some((want, statuses))
                }
                None => None,
            },
            Body::ActionTaken { event, scope, action, .. } => {
                let (name, arg) = split_action(action);
                let gate_reason = scope.gate().and_then(|g| plan.wf.gates.get(g)).and_then(|g| g.reason());
                let ending = ActionKind::parse(name).and_then(|kind| semantics::ending(kind, arg, gate_reason, event.as_str()));
                ending.map(|(want, status)| (want, if status == TerminationStatus::Partial { &["partial"][..] } else { &["failure"][..] }))
            }
            Body::NodeFailed { node, .. } if reason.ends_with("_failed") => Some((format!("{node}_failed"), &["failure"][..])),
            Body::BudgetExhausted { .. } if reason == "budget_exhausted" => Some((reason.to_string(), &["failure"][..])),
            Body::DecisionApplied { subject, decision, .. } if subject.starts_with("escalation.") => {
                Some((format!("escalation_{decision}"), &["escalated"][..]))
            }
            _ => None,
        };
        if let Some((want, statuses)) = expected {
            let cause_text = format!("{cause_kind} at seq {cause_seq}");
            if want != reason {
                self.push(
                    Deviation::new(
                        codes::TERMINATION,
                        Some(seq),
                        format!("the run terminated with reason `{reason}`, but it follows from {cause_text}"),
                    )
                    .expected(format!("reason {want}"))
                    .actual(format!("reason {reason}"))
                    .reason(reason),
                );
            } else if !(statuses.contains(&status) || (policy_stop && status == "failure")) {
                self.push(
                    Deviation::new(
                        codes::TERMINATION,
                        Some(seq),
                        format!("the run terminated with status `{status}`, but it follows from {cause_text}"),
                    )
                    .expected(format!("status {}", statuses.join(" or ")))
                    .actual(format!("status {status}"))
                    .reason(reason),
                );
            }
        }
    }

    // --------------------------------------------------------------- end

    fn finish(mut self) -> Report {
        let terminated = self.run == RunPhase::Terminated;
        let last_seq = self.last.map(|(seq, _)| seq).unwrap_or(0);
        // A lasso witness (`flowc verify --witness-dir`): the run repeats its
        // last events forever, so an obligation still open is never met.
        let cycle = self.last.is_some_and(|(_, cycle)| cycle);
        let mut scopes: Vec<String> = self.budgets.keys().cloned().collect();
        scopes.sort();
        for scope in scopes {
            self.flush_overruns(&scope, "the trace ends without a budget_exhausted");
        }
        if self.count == 0 {
            self.push(Deviation::new(codes::RUN_LIFECYCLE, None, "the trace holds no events").expected("run_started …"));
        }
        let mut policies = Vec::new();
        for p in &mut self.policies {
            let (verdict, seq, owed) = match &mut p.monitor {
                None => ("error", None, None),
                Some(m) => match m.verdict() {
                    Verdict::Holds => ("holds", None, None),
                    Verdict::Violated { seq, at_end: false, .. } => ("violated", Some(seq), None),
                    Verdict::Violated { owed, at_end: true, .. } if terminated || cycle => ("violated", Some(last_seq), Some(owed)),
                    Verdict::Violated { owed, .. } => ("open", None, Some(owed)),
                },
            };
            policies.push(PolicyResult { name: p.name.clone(), scope: p.scope.clone(), response: p.response.clone(), verdict, seq, owed });
        }
        for p in &policies {
            if p.verdict != "violated" {
                continue;
            }
            let message = match &p.owed {
                Some(owed) if cycle => format!("policy `{}` is violated: the run cycles forever owing `{owed}`", p.name),
                Some(owed) => format!("policy `{}` is violated: the run terminated owing `{owed}`", p.name),
                None => format!("policy `{}` is violated at this event", p.name),
            };
            self.deviations.push(
                Deviation::new(codes::POLICY, p.seq, message).expected(format!("policy {} holds ({} scope)", p.name, p.scope)).actual(
                    match &p.owed {
                        Some(owed) => format!("open at the end: {owed}"),
                        None => "violated".to_string(),
                    },
                ),
            );
        }
        if policies.iter().any(|p| p.verdict == "open") {
            self.notes.push("the trace has not terminated: open policy obligations are not judged".into());
        }
        if self.payloads_unchecked > 0 {
            self.notes.push(format!(
                "{} payload type(s) not checked: no artifact store (check a run directory to read its artifacts/)",
                self.payloads_unchecked
            ));
        }
        if self.plan.is_none() {
            self.notes.push("the trace names no workflow of the plan: only the envelope and the run's lifecycle were checked".into());
        }
        let state = match self.run {
            RunPhase::Terminated => "terminated",
            RunPhase::Paused => "paused",
            _ => "unfinished",
        };
        let workflow = self.workflow_started.take();
        let trace = TraceSummary {
            run_id: self.run_id.take(),
            workflow,
            plan_digest: self.started_digest.take(),
            lines: 0,
            events: self.count,
            state,
            reason: self.terminated.as_ref().map(|(r, _)| r.clone()),
            status: self.terminated.take().map(|(_, s)| s),
        };
        Report { conformant: self.deviations.is_empty(), trace, deviations: self.deviations, policies, notes: self.notes }
    }
}

/// The entry of `key`, made on first use (the key is copied only then).
fn slot<'m, V: Default>(map: &'m mut HashMap<String, V>, key: &str) -> &'m mut V {
    if !map.contains_key(key) {
        map.insert(key.to_string(), V::default());
    }
    map.get_mut(key).expect("just inserted")
}

fn phase_name(phase: Phase) -> &'static str {
    match phase {
        Phase::Idle => "not started",
        Phase::Running => "running",
        Phase::Completed => "completed",
        Phase::Failed => "failed",
    }
}

fn usage_text(u: &Usage) -> String {
    format!("steps {}, tokens {}, tool_calls {}, cost {}, duration {} ms", u.steps, u.tokens, u.tool_calls, u.cost, u.duration_ms)
}

#[cfg(test)]
mod tests;
