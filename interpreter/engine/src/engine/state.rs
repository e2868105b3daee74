//! The run's state: what the engine holds between steps, shared by the
//! modules that step it.

use super::*;

/// A decision being waited for, and what it decides.
#[derive(Debug, Clone)]
pub(super) enum Decision {
    Gate {
        gate: String,
    },
    HumanNode {
        node: String,
    },
    Escalation {
        principal: String,
        ctx: Ctx,
    },
    Reconcile {
        attempt: String,
    },
    /// A `confirm: true` tool call waiting for a human's go-ahead.
    Confirm(PendingCall),
    /// An escalated policy violation: approve lets the held action happen
    /// (the effect that was about to record the violating event).
    Policy {
        policy: String,
        held: Box<Effect>,
    },
    /// An append of `node`'s output to a blackboard that `requires:
    /// approval` (the `next`-th it writes).
    Append {
        board: String,
        node: String,
        next: usize,
    },
    /// The verdict of a gate's `index`-th evaluator, a `human` one.
    Judge {
        gate: String,
        index: usize,
    },
}

impl Decision {
    /// The subject a decision is asked and recorded under.
    pub(super) fn subject(&self) -> String {
        match self {
            Decision::Gate { gate, .. } => gate.clone(),
            Decision::HumanNode { node } => node.clone(),
            Decision::Escalation { principal, .. } => format!("escalation.{principal}"),
            Decision::Reconcile { attempt } => format!("reconcile.{attempt}"),
            Decision::Confirm(call) => format!("confirm.{}.{}", call.tool, call.attempt),
            Decision::Policy { policy, .. } => format!("policy.{policy}"),
            Decision::Append { board, node, .. } => flow_check::semantics::board_subject(board, node),
            Decision::Judge { gate, index } => flow_check::semantics::judge_subject(gate, *index),
        }
    }
}

/// A tool call about to be made: by an attempt (for its agent, when an
/// agent asked for it), with its input, after `delay` milliseconds.
#[derive(Debug, Clone)]
pub(super) struct PendingCall {
    pub(super) attempt: String,
    pub(super) tool: String,
    pub(super) input: Value,
    /// The node's `idempotency_key` template (tool nodes).
    pub(super) key_template: Option<String>,
    pub(super) agent: Option<String>,
    pub(super) delay: u64,
    /// A human approved this call (its `confirm` decision): a `confirm:
    /// true` tool runs only so.
    pub(super) confirmed: bool,
}

/// What crossing a boundary's handoffs and delegations gave.
#[derive(Debug)]
pub(super) enum Crossing {
    /// Enter the target with this input, after this event.
    Enter(Value, Str),
    /// A handoff refused what crossed (the failure is handled).
    Refused,
    /// A policy holds the handoff: it blocked the run or waits for a human.
    Held,
}

/// Where a handler's action runs.
#[derive(Debug, Clone)]
pub(super) struct Ctx {
    pub(super) node: Option<String>,
    pub(super) gate: Option<String>,
    pub(super) event: ActionEvent,
}

/// The commands issued and not answered, with what each waits for.
/// Removal is O(1) (answers come in any order, and a fan-out has many
/// outstanding); [`Outstanding::entries`] gives them in issue order (for
/// recovery), each with the last `seq` of the step that issued it: the
/// driver dispatches a command only once that step is durable, so a
/// journal that ends before it proves the command never left.
#[derive(Debug, Default)]
pub(super) struct Outstanding {
    /// Key → (issue order, last seq of the issuing step, what it waits for).
    pub(super) by_key: FxHashMap<String, (u64, u64, Waiting)>,
    pub(super) issued: u64,
    /// Keys issued in the step being taken (their seq is set as it ends).
    this_step: Vec<String>,
}

impl Outstanding {
    pub(super) fn insert(&mut self, key: String, waiting: Waiting) {
        self.issued += 1;
        self.this_step.push(key.clone());
        self.by_key.insert(key, (self.issued, u64::MAX, waiting));
    }

    /// The step that issued the newest commands ended at `seq`.
    pub(super) fn end_step(&mut self, seq: u64) {
        for key in self.this_step.drain(..) {
            if let Some(entry) = self.by_key.get_mut(&key) {
                entry.1 = seq;
            }
        }
    }

    pub(super) fn remove(&mut self, key: &str) -> Option<Waiting> {
        self.by_key.remove(key).map(|(_, _, w)| w)
    }

    pub(super) fn contains(&self, key: &str) -> bool {
        self.by_key.contains_key(key)
    }

    pub(super) fn len(&self) -> usize {
        self.by_key.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    pub(super) fn clear(&mut self) {
        self.by_key.clear();
        self.this_step.clear();
    }

    /// Every outstanding command, in issue order, with the last seq of the
    /// step that issued it.
    pub(super) fn entries(&self) -> Vec<(String, u64, Waiting)> {
        let mut all: Vec<(u64, &String, u64, &Waiting)> = self.by_key.iter().map(|(k, (n, seq, w))| (*n, k, *seq, w)).collect();
        all.sort_unstable_by_key(|(n, _, _, _)| *n);
        all.into_iter().map(|(_, k, seq, w)| (k.clone(), seq, w.clone())).collect()
    }
}

#[derive(Debug, Clone)]
pub(super) enum Waiting {
    /// A model turn, with what was reserved for it (settled on the reply)
    /// and the per-turn ceilings the reservation assumed.
    Turn {
        attempt: String,
        provider: String,
        reserved: Usage,
        scopes: Vec<String>,
        ceiling: TurnLimits,
    },
    Tool {
        attempt: String,
        from_agent: bool,
        scopes: Vec<String>,
        reserved: Usage,
        started: Str,
        tool: String,
    },
    Human {
        decision: Decision,
        request_event: String,
        /// When the subject's `timeout` runs out (RFC 3339), if it has one.
        expires_at: Option<String>,
    },
    Probe {
        gate: String,
        index: usize,
        item: usize,
    },
    /// An `llm` evaluator's judge turn on one item.
    Judge {
        gate: String,
        index: usize,
        item: usize,
    },
}

#[derive(Debug, Clone)]
pub(super) struct Attempt {
    pub(super) id: String,
    pub(super) node: String,
    pub(super) attempt_no: u32,
    pub(super) turn: u32,
    pub(super) repair_left: u32,
    pub(super) tool_results: Vec<Value>,
    pub(super) tool_calls: u32,
    pub(super) started: Str,
    pub(super) lease: String,
    pub(super) repair: Option<String>,
    /// The calls the last reply asked for that are not made yet, in order:
    /// each is made before the next turn.
    pub(super) queued: std::collections::VecDeque<ToolCall>,
    /// The call being made: its id, input and turn, kept with its result
    /// (a model is answered by a tool message naming the call).
    pub(super) calling: Option<(String, Value, u32)>,
}

impl Attempt {
    /// Keeps the result of the call being made: `entry` with the call's
    /// id, input and turn.
    pub(super) fn keep_result(&mut self, mut entry: Value) {
        if let (Some((id, input, turn)), Some(map)) = (self.calling.take(), entry.as_object_mut()) {
            map.insert("id".into(), Value::String(id));
            map.insert("input".into(), input);
            map.insert("turn".into(), Value::from(turn));
        }
        self.tool_results.push(entry);
    }
}

#[derive(Debug, Clone, Default)]
pub(super) struct NodeRt {
    pub(super) visits: u32,
    pub(super) attempt_no: u32,
    /// Attempts of this visit lost with their executor (a crash): their
    /// redo is, to the data plane, the attempt that was lost.
    pub(super) lost: u32,
    pub(super) running: bool,
    pub(super) started_event: Str,
    pub(super) input: Value,
    /// The context slice a filtered handoff passed (what the agent sees).
    pub(super) slice: Option<Value>,
    /// The contract the node works under, when it was delegated to.
    pub(super) contract: Option<String>,
    /// The blackboards the visit read as it started, with their entries.
    pub(super) boards: Option<Value>,
    /// The artifacts transfers handed over to the visit, by expression.
    pub(super) artifacts: Option<Value>,
    /// The envelope of the message the visit was handed (a handoff's).
    pub(super) message: Option<Value>,
    /// What the visit measured so far (`facts.NODE`): tokens its turns
    /// used and tool calls that completed.
    pub(super) tokens: u64,
    pub(super) tool_calls: u64,
}

/// A join's branches: those that arrived since it last ran, and those
/// still running when it ran (absorbed when they finish).
#[derive(Debug, Default)]
pub(super) struct JoinRt {
    pub(super) arrived: IndexSet<String>,
    pub(super) late: IndexSet<String>,
}

#[derive(Debug, Clone)]
pub(super) struct LoopRt {
    pub(super) round: u32,
}

#[derive(Debug, Clone)]
pub(super) struct MapRt {
    pub(super) items: Vec<Value>,
    pub(super) results: Vec<Value>,
}

/// The per-turn ceilings a turn's reservation assumed: its input (the
/// declared `max_input_tokens`, else the bound of what the request holds)
/// and its completion (`max_tokens`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct TurnLimits {
    pub(super) input: u64,
    pub(super) output: u64,
    /// Where the input ceiling comes from, for messages.
    pub(super) input_from: InputCeiling,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum InputCeiling {
    Agent,
    Provider,
    /// No `max_input_tokens`: the bound of the request ([`prompt::input_token_bound`]).
    Request,
}

/// A gate evaluation waiting for probes.
#[derive(Debug, Clone)]
pub(super) struct GateRt {
    pub(super) results: Vec<Option<EvaluatorResult>>,
    /// Per evaluator, per item: outcomes of probes.
    /// Per evaluator, per item: a probe's outcome and whether it errored.
    pub(super) probes: BTreeMap<(usize, usize), Option<(Outcome, bool)>>,
    /// Per evaluator, per item: why a judge gave its verdict.
    pub(super) reasons: BTreeMap<(usize, usize), String>,
    pub(super) cause: Str,
    pub(super) pending: usize,
}
