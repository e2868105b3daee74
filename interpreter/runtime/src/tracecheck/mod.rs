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

mod boards;
mod budgets;
mod chain;
mod checker;
pub mod codes;
mod compute;
mod consistency;
mod edges;
mod events;
mod facts;
mod gates;
mod lifecycle;
mod plan;
mod reader;
mod records;
mod reruns;
mod state;
mod termination;
mod transfers;

use crate::budget::{add_usage, sub_usage, Limits};
use crate::journal::ArtifactStore;
use crate::validate::Validator;
use flow_check::index::{guard_via, PlanIndex};
use flow_check::ir::TransferKind;
use flow_check::ir::{ActionKind, HandlerEvent};
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
pub use chain::{Integrity, SignatureCheck};
pub use codes::{explain, CodeInfo, CODES};
use plan::*;
pub use reader::check_reader;
use reader::*;
use state::*;

/// One departure of the trace from the plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Deviation {
    /// A stable code from [`codes`].
    pub code: codes::Code,
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
    fn new(code: codes::Code, seq: Option<u64>, message: impl Into<String>) -> Deviation {
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
    /// The hash chain and the signature.
    pub integrity: Integrity,
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
    /// A trace without a hash chain is a deviation (T080), not a note:
    /// what `flow trace check` asks of the traces Flow writes.
    pub require_chain: bool,
    /// Verify the trace's signature (T081).
    pub signature: Option<SignatureCheck<'a>>,
}

impl std::fmt::Debug for Options<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("artifacts", &self.artifacts.is_some())
            .field("plan_digest", &self.plan_digest)
            .field("require_chain", &self.require_chain)
            .field("signature", &self.signature.is_some())
            .finish()
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
    /// The digest of each event's line (`digests[i]` of `events[i]`).
    pub digests: Vec<[u8; 32]>,
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
        parsed.digests.append(&mut batch.digests);
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

/// Checks events already parsed (from [`parse`]).
pub fn check_parsed(program: &Program, parsed: Parsed, options: &Options) -> Report {
    let mut report = run_checks(program, &parsed.events, Some(&parsed.digests), &parsed.malformed_seqs, options);
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
    let mut report = run_checks(program, events, None, &[], options);
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

// ------------------------------------------------------------------ state

/// The workflow and plan digest of the first `run_started`.
fn started_of(events: &[Event]) -> Option<(&str, &str)> {
    events.iter().find_map(|e| match &e.body {
        Body::RunStarted { workflow, plan_digest, .. } => Some((workflow.as_str(), plan_digest.as_str())),
        _ => None,
    })
}

/// `digests`: of each event's line as read. Events given without their
/// lines (made in memory) are encoded again for their digests only when
/// the chain is required; otherwise the chain is not checked.
fn run_checks<'a>(
    program: &'a Program,
    events: &[Event],
    digests: Option<&[[u8; 32]]>,
    malformed: &[u64],
    options: &'a Options<'a>,
) -> Report {
    let mut checker = Checker::new(program, started_of(events), options);
    checker.malformed.extend(malformed.iter().copied());
    let linked = digests.is_some() || options.require_chain;
    checker.chain.skip(!linked);
    for (i, event) in events.iter().enumerate() {
        if linked {
            let digest = match digests.and_then(|d| d.get(i)) {
                Some(d) => *d,
                None => flow_trace::chain::digest(serde_json::to_string(event).unwrap_or_default().as_bytes()),
            };
            checker.link(event, digest);
        }
        checker.event(event);
    }
    checker.finish()
}

#[cfg(test)]
mod tests;
