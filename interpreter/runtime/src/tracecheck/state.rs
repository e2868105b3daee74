//! What the checker holds while it reads a trace: the run, node, attempt,
//! gate, budget and policy state it replays, and the checker itself.

use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum Phase {
    #[default]
    Idle,
    Running,
    Completed,
    Failed,
}

#[derive(Debug, Default)]
pub(super) struct NodeRt {
    pub(super) visits: u32,
    pub(super) phase: Phase,
    pub(super) attempt_no: u32,
    pub(super) completed_once: bool,
    /// The digest of the last completion's output.
    pub(super) output: Option<String>,
    /// The value a compute node's running visit recorded (`computed`).
    pub(super) computed: Option<String>,
}

#[derive(Debug)]
pub(super) struct AttemptRt {
    pub(super) node: String,
    pub(super) open: bool,
    pub(super) calls: u32,
    /// Reservations not yet settled: their scopes and amounts.
    pub(super) reservations: Vec<(String, Usage)>,
}

/// An edge taken into a node that has not started yet.
#[derive(Debug)]
pub(super) struct Entry {
    pub(super) from: String,
    pub(super) via: Via,
    /// Transfers seen on the way: (is a handoff, from).
    pub(super) transfers: Vec<(bool, String)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RunPhase {
    NotStarted,
    Running,
    Paused,
    Terminated,
}

#[derive(Debug, Default)]
pub(super) struct GateRt {
    /// A PASS or an approve not yet used by a crossing.
    pub(super) open: bool,
    /// A REQUIRES_DECISION waiting for a decision.
    pub(super) awaiting: bool,
}

#[derive(Debug)]
pub(super) struct ScopeAcc {
    pub(super) limits: Limits,
    pub(super) used: Usage,
    pub(super) reserved: Usage,
    /// Which limits were already reported exceeded: steps, tokens, tool calls, cost.
    pub(super) reported: [bool; 4],
    /// Use over a limit that the control plane has not answered (yet) with
    /// `budget_exhausted`.
    pub(super) pending: Vec<Overrun>,
}

/// A limit found exceeded after a settlement.
#[derive(Debug, Clone)]
pub(super) struct Overrun {
    pub(super) seq: u64,
    pub(super) limit: &'static str,
    pub(super) max: String,
    pub(super) used: String,
    pub(super) attempt: Option<String>,
}

impl ScopeAcc {
    pub(super) fn new(limits: Limits) -> ScopeAcc {
        ScopeAcc { limits, used: Usage::default(), reserved: Usage::default(), reported: [false; 4], pending: Vec::new() }
    }
}

/// The limits `u` is over: (index, limit, maximum, amount).
pub(super) fn overs(l: &Limits, u: &Usage) -> [Option<(usize, &'static str, String, String)>; 4] {
    [
        l.steps.filter(|&m| u.steps > m).map(|m| (0, "steps", m.to_string(), u.steps.to_string())),
        l.tokens.filter(|&m| u.tokens > m).map(|m| (1, "tokens", m.to_string(), u.tokens.to_string())),
        l.tool_calls.filter(|&m| u.tool_calls > m).map(|m| (2, "tool_calls", m.to_string(), u.tool_calls.to_string())),
        l.cost.filter(|&m| u.cost > m + 1e-9).map(|m| (3, "cost", format!("{m}"), format!("{}", (u.cost * 1e6).round() / 1e6))),
    ]
}

pub(super) struct PolicyRt {
    pub(super) name: String,
    pub(super) scope: String,
    pub(super) response: String,
    pub(super) monitor: Option<Monitor>,
}

pub(super) struct Checker<'a> {
    pub(super) program: &'a Program,
    /// The hash chain as far as read.
    pub(super) chain: super::chain::ChainCheck,
    pub(super) plan: Option<PlanView<'a>>,
    pub(super) options: &'a Options<'a>,
    pub(super) deviations: Vec<Deviation>,
    pub(super) notes: Vec<String>,
    pub(super) run_id: Option<String>,
    pub(super) run: RunPhase,
    pub(super) after_end_reported: bool,
    pub(super) any_node_started: bool,
    pub(super) next_seq: u64,
    pub(super) malformed: HashSet<u64>,
    pub(super) nodes: HashMap<String, NodeRt>,
    pub(super) attempts: HashMap<String, AttemptRt>,
    pub(super) entries: HashMap<String, Vec<Entry>>,
    pub(super) gates: HashMap<String, GateRt>,
    /// Escalations asked by a gate's handler: the subject (`escalation.P`) and the gate.
    pub(super) escalations: HashMap<String, String>,
    pub(super) pending_decisions: HashMap<String, Body>,
    pub(super) budgets: HashMap<String, ScopeAcc>,
    pub(super) delegated: HashSet<String>,
    pub(super) validators: HashMap<String, Option<Validator>>,
    pub(super) policies: Vec<PolicyRt>,
    pub(super) payloads_unchecked: usize,
    /// Computed values not made again (no artifact store).
    pub(super) computed_unchecked: usize,
    /// Declared records whose values were not made again (no artifact store).
    pub(super) records_unchecked: usize,
    /// `calls` and `facts` as the trace so far makes them.
    pub(super) runtime: super::facts::Runtime,
    /// The records a completion or a gate outcome still owes.
    pub(super) owed_records: Option<super::records::Owed>,
    pub(super) terminated: Option<(String, String)>,
    /// The plan digest the first `run_started` recorded.
    pub(super) started_digest: Option<String>,
    /// Events seen so far, and the last one's seq and whether it paused
    /// the run on a cycle.
    pub(super) count: usize,
    pub(super) last: Option<(u64, bool)>,
    /// The seq of the event before the one being checked.
    pub(super) previous: Option<u64>,
    /// The first `run_started`'s workflow.
    pub(super) workflow_started: Option<String>,
    /// Events a termination can follow from (by seq: position, body): only
    /// the kinds that imply a reason, so nothing else is kept.
    pub(super) causes: HashMap<u64, (usize, Body)>,
    /// Position of the last policy violation that was not a warning.
    pub(super) last_policy_stop: Option<usize>,
    /// Crossings of each pair of nodes with a hop limit since its count
    /// last started, and the limit (by the pair's names in order).
    pub(super) hops: HashMap<(String, String), (u64, u64)>,
    /// Entries appended to each blackboard so far.
    pub(super) boards: HashMap<String, u32>,
    /// Completions a blackboard may still take as an entry, by (board,
    /// node): the output's digest, who approved, whether a gate passed.
    pub(super) appendable: HashMap<(String, String), Appendable>,
    /// The pair of the handoff just refused, until its `dead_letter`.
    pub(super) refused_handoff: Option<(String, String)>,
    /// The entry of the `rerun` just recorded, until its edge is taken.
    pub(super) pending_rerun: Option<String>,
    /// Each gate's last recorded outcome.
    pub(super) gate_outcomes: HashMap<String, Outcome>,
    /// Each state machine's state, as `state_changed` moved it.
    pub(super) task_states: HashMap<String, String>,
    /// The digest of the run's input, as `run_started` recorded it.
    pub(super) run_input: Option<String>,
}

/// A node's completion not yet appended to a blackboard it writes.
#[derive(Debug, Default)]
pub(super) struct Appendable {
    pub(super) digest: String,
    pub(super) approved_by: Option<String>,
    pub(super) passed: bool,
}

/// The entry of `key`, made on first use (the key is copied only then).
pub(super) fn slot<'m, V: Default>(map: &'m mut HashMap<String, V>, key: &str) -> &'m mut V {
    if !map.contains_key(key) {
        map.insert(key.to_string(), V::default());
    }
    map.get_mut(key).expect("just inserted")
}

pub(super) fn phase_name(phase: Phase) -> &'static str {
    match phase {
        Phase::Idle => "not started",
        Phase::Running => "running",
        Phase::Completed => "completed",
        Phase::Failed => "failed",
    }
}

pub(super) fn usage_text(u: &Usage) -> String {
    format!("steps {}, tokens {}, tool_calls {}, cost {}, duration {} ms", u.steps, u.tokens, u.tool_calls, u.cost, u.duration_ms)
}
