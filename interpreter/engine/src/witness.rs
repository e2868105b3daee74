//! Witnesses as runs: a search over data-plane answers, and their order,
//! under which the engine makes exactly a witness's policy steps.
//!
//! The model checker's witness of a violated policy is a trace in the
//! vocabulary of `flow run`. [`execute`] turns it into a run of the engine:
//! it drives the engine in process, on a fake clock, answering each command
//! with one of a few candidate answers ([`candidates`]: outputs built from
//! the declared types with one field varied at a time, failures, tool calls,
//! light and heavy turns, every decision) in any order, depth first, and
//! keeps the first run whose policy steps (the events atoms can describe,
//! [`flow_policy::Obs`]) begin with the witness's; the run stops where the
//! witness stops. Pure: no I/O, deterministic.

use crate::clock::FakeClock;
use crate::engine::{Engine, RunConfig, RunStatus};
use crate::proto::{AgentReply, Command, HumanAnswer, ProbeResult, Request, Response, TokenUsage, ToolCall, ToolResult};
use flow_check::ir::{NameMap, Program, TypeDef, Workflow};
use flow_check::types::Ty;
use flow_trace::{ArtifactRef, Event};
use serde_json::{json, Value};
use std::sync::Arc;

/// The default number of engine runs [`execute`] may try.
pub const DEFAULT_TRIES: usize = 20_000;

/// How many variants of one value are tried, at most.
const MAX_VARIANTS: usize = 32;

/// The policy steps of events, as the model checker names them.
pub fn policy_steps(events: &[Event]) -> Vec<String> {
    events.iter().filter_map(|e| flow_policy::Obs::of(&e.body)).map(|o| o.step_key()).collect()
}

/// The steps a run must make to run a witness: its policy steps and, for
/// a lasso (a witness ending `run_paused` with reason `cycle`, waiting on
/// the `seq` where its cycle starts), the cycle's first step once more —
/// the run shows the cycle closing. Also says whether it is a lasso.
pub fn wanted_steps(events: &[Event]) -> (Vec<String>, bool) {
    let mut steps = policy_steps(events);
    let cycle_start = match events.last().map(|e| &e.body) {
        Some(flow_trace::Body::RunPaused { reason, waiting_on, .. }) if *reason == flow_trace::PauseReason::Cycle => {
            waiting_on.strip_prefix("seq ").and_then(|n| n.parse::<u64>().ok())
        }
        _ => return (steps, false),
    };
    let again =
        cycle_start.and_then(|n| events.iter().filter(|e| e.seq > n).find_map(|e| flow_policy::Obs::of(&e.body)).map(|o| o.step_key()));
    steps.extend(again);
    (steps, true)
}

/// Steps with each run of one repeated step kept once. The model makes a
/// visit's tool call once however many attempts the visit takes; a retry
/// repeats it in the engine. Policies do not count repeats of one step.
fn stutter_free(mut steps: Vec<String>) -> Vec<String> {
    steps.dedup();
    steps
}

/// What [`execute`] found.
#[derive(Debug)]
pub enum Found {
    /// A run of the engine that makes the witness's steps.
    Run(Run),
    /// No answers make them: the witness is not a run of the engine.
    NotARun(Stuck),
    /// The search ran out of tries.
    Undecided(Stuck),
}

/// How far the search got: the longest prefix of the witness's steps some
/// run made, and what runs made instead of the next step.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stuck {
    /// Steps of the witness made (after folding repeats).
    pub matched: usize,
    /// The witness's next step, which no run made there.
    pub wanted: Option<String>,
    /// What runs made there instead (`None`: the run ended or waited).
    pub instead: Vec<Option<String>>,
}

impl Stuck {
    fn saw(&mut self, matched: usize, wanted: &str, got: Option<&String>) {
        if matched > self.matched || self.wanted.is_none() {
            *self = Stuck { matched, wanted: Some(wanted.to_string()), instead: Vec::new() };
        }
        if matched == self.matched && !self.instead.contains(&got.cloned()) {
            self.instead.push(got.cloned());
        }
    }
}

/// A run of the engine made by scripted answers.
#[derive(Debug)]
pub struct Run {
    pub events: Vec<Event>,
    /// The artifacts the run stored, encoded.
    pub artifacts: Vec<(ArtifactRef, Vec<u8>)>,
    /// The answers given, in order: the command's key and the answer.
    pub answers: Vec<(String, Response)>,
    /// Engine runs tried before this one.
    pub tried: usize,
    pub status: RunStatus,
}

/// One search: the plan, the workflow, the input and the witness.
pub struct Search<'a> {
    pub program: &'a Arc<Program>,
    pub workflow: Option<&'a str>,
    pub input: &'a Value,
    /// The witness's events: the run must make their policy steps
    /// ([`wanted_steps`]).
    pub witness: &'a [Event],
    /// The configuration of each engine run (its clock is replaced by a
    /// fake one).
    pub config: &'a RunConfig,
    /// Outputs the plan's scripted providers give, by node or agent, in
    /// turn order (the last repeats), and a tool's recorded results (by
    /// `tool:NAME`): a first narrow pass tries them first, so a witness
    /// through a value computed from real-looking outputs (a consensus, a
    /// coverage) can be made; the other passes try them last.
    pub scripted: &'a Scripted,
}

/// Scripted outputs by node or agent name, in turn order; recorded tool
/// results by `tool:NAME` ([`recorded_tool`]).
pub type Scripted = std::collections::BTreeMap<String, Vec<Value>>;

/// The key of a tool's recorded results in [`Scripted`].
pub fn recorded_tool(tool: &str) -> String {
    format!("tool:{tool}")
}

impl std::fmt::Debug for Search<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Search").field("workflow", &self.workflow).field("witness_events", &self.witness.len()).finish_non_exhaustive()
    }
}

/// What one search holds fixed: the steps wanted (repeats folded) and the
/// tool calls the witness has refused (a model may ask for a tool its
/// agent does not hold; the control plane refuses it).
struct Goal<'a> {
    search: &'a Search<'a>,
    want: Vec<String>,
    refused: Vec<(String, String)>,
    /// The first pass tries the scripted providers' replies first; the
    /// others try them last.
    scripted_first: bool,
    /// The policy step of each gate of the workflow passing.
    passes: Vec<String>,
}

/// Searches for data-plane answers under which the engine makes the
/// witness's policy steps (a run going on past them still counts), in at
/// most `tries` engine runs.
pub fn execute(search: &Search, tries: usize) -> Result<Found, String> {
    let refused = search
        .witness
        .iter()
        .filter_map(|e| match &e.body {
            flow_trace::Body::ToolCallRefused { tool, agent: Some(agent), .. } => Some((tool.clone(), agent.clone())),
            _ => None,
        })
        .collect();
    let passes = workflow(search)
        .map(|w| {
            w.gates.keys().map(|g| flow_policy::Obs::Outcome { gate: g, outcome: flow_trace::Outcome::Pass.as_str() }.step_key()).collect()
        })
        .unwrap_or_default();
    let mut goal = Goal { search, want: stutter_free(wanted_steps(search.witness).0), refused, scripted_first: true, passes };
    let mut budget = tries;
    let mut stuck = Stuck::default();
    // First, a narrow pass where every agent gives its scripted reply when
    // it has one (runs like `flow run`'s, which take branches that only
    // real-looking outputs take), then the usual passes.
    if !search.scripted.is_empty() {
        let mut share = budget.min(tries / SCRIPTED_SHARE);
        let before = share;
        let mut choices = Vec::new();
        let found = dfs(&goal, 2, &mut choices, &mut share, &mut stuck)?;
        budget -= before - share;
        if found == Some(true) {
            let mut run = finish(&goal, &choices)?;
            run.tried = tries - budget;
            return Ok(Found::Run(run));
        }
    }
    goal.scripted_first = false;
    // Iterative broadening: first only the first few candidates of each
    // answer (the plainest ones, which combine well: lists of one item in
    // every output), each pass with a share of the tries; then every
    // candidate, which alone can say that no run makes the steps.
    for width in BROADENING {
        let mut share = budget.min(tries / BROADENING_SHARE);
        let before = share;
        let mut choices = Vec::new();
        let found = dfs(&goal, width, &mut choices, &mut share, &mut stuck)?;
        budget -= before - share;
        if found == Some(true) {
            let mut run = finish(&goal, &choices)?;
            run.tried = tries - budget;
            return Ok(Found::Run(run));
        }
    }
    let mut choices = Vec::new();
    match dfs(&goal, usize::MAX, &mut choices, &mut budget, &mut stuck)? {
        Some(true) => {
            let mut run = finish(&goal, &choices)?;
            run.tried = tries - budget;
            Ok(Found::Run(run))
        }
        Some(false) => Ok(Found::NotARun(stuck)),
        None => Ok(Found::Undecided(stuck)),
    }
}

/// The widths of the narrow passes: how many candidates of each answer
/// they try.
const BROADENING: [usize; 3] = [2, 3, 5];

/// The scripted pass may use at most this fraction (1/n) of the tries.
const SCRIPTED_SHARE: usize = 64;

/// Each narrow pass may use at most this fraction (1/n) of the tries.
const BROADENING_SHARE: usize = 8;

/// A fresh engine on a fake clock, and the clock.
fn engine(search: &Search) -> Result<(Engine, Arc<FakeClock>), String> {
    let mut cfg = search.config.clone();
    let clock = Arc::new(FakeClock::new(1_700_000_000_000));
    cfg.clock = clock.clone();
    Ok((Engine::new(search.program.clone(), search.workflow, cfg)?, clock))
}

/// How long a decision on `subject` may take, if it has a deadline
/// ([`flow_check::semantics::decision_timeout_ms`]).
pub fn decision_timeout(workflow: Option<&Workflow>, subject: &str) -> Option<u64> {
    flow_check::semantics::decision_timeout_ms(workflow?, subject)
}

fn workflow<'p>(search: &'p Search) -> Option<&'p Workflow> {
    match search.workflow {
        Some(name) => search.program.workflows.get(name),
        None => search.program.workflows.first().map(|(_, w)| w),
    }
}

/// The engine driven by `choices`: which pending command is answered next
/// (its index) and with which candidate (its index).
struct Replayed {
    engine: Engine,
    events: Vec<Event>,
    pending: Vec<Command>,
    answers: Vec<(String, Response)>,
}

fn replay(goal: &Goal, choices: &[(usize, usize)]) -> Result<Replayed, String> {
    let search = goal.search;
    let (mut engine, clock) = engine(search)?;
    engine.start(search.input.clone());
    let mut events = engine.take_events();
    let mut pending = engine.take_commands();
    let mut answers = Vec::new();
    for &(c, a) in choices {
        let command = pending.remove(c);
        let answer = goal.candidates(&command.request).swap_remove(a);
        // A timeout comes once the deadline has passed.
        if let (Request::Human(h), Response::Human(HumanAnswer { decision: flow_trace::Decision::Timeout, .. })) =
            (&command.request, &answer)
        {
            clock.advance(decision_timeout(workflow(search), &h.subject).unwrap_or(0) + 1);
        }
        engine.on_response(&command.key, answer.clone())?;
        answers.push((command.key, answer));
        events.extend(engine.take_events());
        pending.extend(engine.take_commands());
    }
    Ok(Replayed { engine, events, pending, answers })
}

/// Depth-first search over which pending command is answered next and
/// with which of its first `width` candidates.
fn dfs(goal: &Goal, width: usize, choices: &mut Vec<(usize, usize)>, tries: &mut usize, stuck: &mut Stuck) -> Result<Option<bool>, String> {
    if *tries == 0 {
        return Ok(None);
    }
    *tries -= 1;
    let replayed = replay(goal, choices)?;
    let got = stutter_free(policy_steps(&replayed.events));
    let want = &goal.want[..];
    let n = got.len().min(want.len());
    if let Some(i) = (0..n).find(|&i| got[i] != want[i]) {
        stuck.saw(i, &want[i], Some(&got[i]));
        return Ok(Some(false));
    }
    if got.len() >= want.len() {
        return Ok(Some(true));
    }
    if !matches!(replayed.engine.status(), RunStatus::Running) || replayed.pending.is_empty() {
        stuck.saw(n, &want[n], None);
        return Ok(Some(false));
    }
    let mut undecided = false;
    // A gate's probes are answered in the order they were asked: the gate
    // combines them whatever the order (BLOCK wins), so trying every order
    // of several pending probes would only repeat the same runs.
    // And when the next step wanted is a gate passing, only a probe's
    // passing answer (its first) can make it.
    let first_probe = replayed.pending.iter().position(|c| matches!(c.request, Request::Probe(_)));
    let pass_wanted = goal.passes.contains(&want[n]);
    for (c, command) in replayed.pending.iter().enumerate() {
        if first_probe.is_some_and(|p| p != c) {
            continue;
        }
        let here = if first_probe.is_some() && pass_wanted { 1 } else { width };
        for a in 0..goal.candidates(&command.request).len().min(here) {
            choices.push((c, a));
            match dfs(goal, width, choices, tries, stuck)? {
                // The path found stays in `choices`.
                Some(true) => return Ok(Some(true)),
                Some(false) => {}
                None => undecided = true,
            }
            choices.pop();
        }
    }
    Ok(if undecided { None } else { Some(false) })
}

/// The run made by `choices`: it stops where the witness stops.
fn finish(goal: &Goal, choices: &[(usize, usize)]) -> Result<Run, String> {
    let Replayed { mut engine, events, answers, .. } = replay(goal, choices)?;
    let artifacts = engine.take_artifacts();
    Ok(Run { events, artifacts, answers, tried: 0, status: engine.status().clone() })
}

impl Goal<'_> {
    /// [`candidates`], and on an agent's first turn a call of each tool the
    /// witness shows refused to that agent (first: the witness needs it).
    fn candidates(&self, request: &Request) -> Vec<Response> {
        let mut out = candidates(self.search.program, workflow(self.search), request);
        if let Request::Tool(req) = request {
            // What the tool answered in a recorded run: first in the
            // scripted pass, after the plainest answer in the others (a
            // tool has few candidates; the recorded one is what lets a
            // computed check over its result go either way).
            let recorded = self.search.scripted.get(&recorded_tool(&req.tool)).into_iter().flatten();
            let answers: Vec<Response> = recorded.map(|v| ok_tool(Some(v.clone()))).collect();
            let at = if self.scripted_first { 0 } else { 1.min(out.len()) };
            out.splice(at..at, answers);
        }
        if let Request::Agent(req) = request {
            // What the scripted provider answers this turn: first in the
            // scripted pass, last in the others.
            let scripted = self.search.scripted.get(&req.node).or_else(|| self.search.scripted.get(&req.agent));
            if let Some(list) = scripted.filter(|l| !l.is_empty()) {
                let output = list[(req.node_turn.max(1) as usize - 1).min(list.len() - 1)].clone();
                let usage = TokenUsage { input_tokens: 10, output_tokens: 10 };
                let answer = Response::Agent(AgentReply { output: Some(output), usage, ..AgentReply::default() });
                if self.scripted_first {
                    out.insert(0, answer);
                } else {
                    out.push(answer);
                }
            }
            if req.attempt_no == 1 && req.turn == 1 {
                for (tool, _) in self.refused.iter().filter(|(t, a)| *a == req.agent && !req.offers(t)) {
                    let input = self.search.program.decls.get(tool).and_then(|d| d.input_type());
                    let input = input.map(|t| base(t, &self.search.program.types, 0)).unwrap_or(json!({}));
                    let call = ToolCall { tool: tool.clone(), input, id: None };
                    let usage = TokenUsage { input_tokens: 10, output_tokens: 10 };
                    // First: the witness shows this call refused on this turn.
                    out.insert(0, Response::Agent(AgentReply { tool_calls: vec![call], usage, ..AgentReply::default() }));
                }
            }
            // A gate's predicate often compares an output's string with a
            // value the run was given (`x.currency == input.currency`):
            // last, the plainest output with its strings set to each string
            // of the run's input.
            let output = workflow(self.search).and_then(|w| w.nodes.get(&req.node)).map(|n| &n.output);
            if let (Some(ty), Some(input)) = (output, self.search.input.as_object()) {
                let types = &self.search.program.types;
                let plain = base(ty, types, 0);
                for string in input.values().filter_map(Value::as_str) {
                    let value = base_with(ty, types, 0, string);
                    if value != plain {
                        let usage = TokenUsage { input_tokens: 10, output_tokens: 10 };
                        out.push(Response::Agent(AgentReply { output: Some(value), usage, ..AgentReply::default() }));
                    }
                }
            }
        }
        out
    }
}

/// The answers the search tries for a data-plane request, the plainest
/// first.
pub fn candidates(program: &Program, workflow: Option<&Workflow>, request: &Request) -> Vec<Response> {
    let types = &program.types;
    match request {
        Request::Agent(req) => {
            // A light turn, and one that uses its whole ceiling (budget zones).
            let light = TokenUsage { input_tokens: 10, output_tokens: 10 };
            let heavy = TokenUsage { input_tokens: 4_000, output_tokens: 100 };
            let mut out = Vec::new();
            // Each tool at most once per visit (the model's abstraction):
            // on the first turn of the first attempt.
            if req.attempt_no == 1 && req.turn == 1 {
                for tool in req.tools.iter().map(|t| &t.name) {
                    let input = program.decls.get(tool).and_then(|d| d.input_type()).map(|t| base(t, types, 0)).unwrap_or(json!({}));
                    let call = ToolCall { tool: tool.clone(), input, id: None };
                    out.push(AgentReply { tool_calls: vec![call], usage: light.clone(), ..AgentReply::default() });
                }
            }
            let output = workflow.and_then(|w| w.nodes.get(&req.node)).map(|n| &n.output);
            // A judge (an `llm` evaluator's turn, named after its gate)
            // gives either verdict.
            let judge = output.is_none() && req.output_schema["properties"].get("pass").is_some();
            let mut values = match output {
                Some(t) => instances(t, types),
                None if judge => vec![json!({ "pass": true, "reason": "passes" }), json!({ "pass": false, "reason": "fails" })],
                None => vec![json!({})],
            };
            // Second, the output with every list holding one item: a
            // predicate often compares two outputs' lists (`len(a.items) ==
            // len(b.items)`), and a per-item evaluator runs only on a
            // non-empty list. Early, so the narrow passes try it.
            if let Some(filled) = output.and_then(|t| filled_instance(t, types)) {
                values.retain(|v| *v != filled);
                values.insert(1.min(values.len()), filled);
            }
            for usage in [&light, &heavy] {
                for value in &values {
                    out.push(AgentReply { output: Some(value.clone()), usage: usage.clone(), ..AgentReply::default() });
                }
            }
            out.push(AgentReply { error: Some("scripted provider failure".into()), usage: light, ..AgentReply::default() });
            out.into_iter().map(Response::Agent).collect()
        }
        Request::Tool(req) => {
            let output = program.decls.get(&req.tool).and_then(|d| d.output_type());
            let mut out: Vec<Response> = match output {
                Some(t) => instances(t, types).into_iter().take(3).map(|v| ok_tool(Some(v))).collect(),
                None => vec![ok_tool(Some(req.input.clone()))],
            };
            out.push(Response::Tool(ToolResult { ok: false, error: Some("scripted tool failure".into()), ..ToolResult::default() }));
            out
        }
        Request::Human(req) => {
            let by = req.principals.first().cloned().unwrap_or_else(|| "operator".into());
            let mut out: Vec<Response> = req
                .decisions
                .iter()
                .map(|d| Response::Human(HumanAnswer { decision: *d, by: by.clone(), comment: None, output: None }))
                .collect();
            // No answer in time, when the subject has a timeout: the
            // driver answers `timeout` for `control`.
            if decision_timeout(workflow, &req.subject).is_some() {
                let decision = flow_trace::Decision::Timeout;
                out.push(Response::Human(HumanAnswer { decision, by: "control".into(), comment: None, output: None }));
            }
            out
        }
        Request::Probe(req) => vec![
            // A probe that passes: its declared output with every list
            // holding one item (`len(output.streams) > 0` holds), else `{}`.
            Response::Probe(ProbeResult {
                exit_code: Some(0),
                output: Some(probe_output(program, &req.evaluator)),
                ..ProbeResult::default()
            }),
            Response::Probe(ProbeResult { exit_code: Some(1), ..ProbeResult::default() }),
            Response::Probe(ProbeResult { error: Some("scripted probe failure".into()), ..ProbeResult::default() }),
        ],
    }
}

/// The output a passing probe of `evaluator` gives: its declared output
/// type with its lists filled, else `{}`.
fn probe_output(program: &Program, evaluator: &str) -> Value {
    let types = &program.types;
    program
        .decls
        .get(evaluator)
        .and_then(|d| d.output_type())
        .map(|t| filled_instance(t, types).unwrap_or_else(|| base(t, types, 0)))
        .unwrap_or(json!({}))
}

fn ok_tool(output: Option<Value>) -> Response {
    Response::Tool(ToolResult { ok: true, output, ..ToolResult::default() })
}

/// Values of `ty`: the plainest first, then each with one position varied
/// (a boolean false, another enum value, 0 or 10, an empty string, a list
/// of one to three items, null, an optional field present).
pub fn instances(ty: &Ty, types: &NameMap<TypeDef>) -> Vec<Value> {
    let mut out = vec![base(ty, types, 0)];
    out.extend(variants(ty, types, 0));
    out.truncate(MAX_VARIANTS);
    out
}

/// Named types are followed this deep (they may refer to themselves).
const MAX_DEPTH: usize = 6;

fn named<'t>(name: &str, types: &'t NameMap<TypeDef>) -> Option<&'t Ty> {
    types.get(name).map(|d| &d.ty)
}

/// The plainest value of `ty`.
fn base(ty: &Ty, types: &NameMap<TypeDef>, depth: usize) -> Value {
    base_with(ty, types, depth, "x")
}

/// [`base`] with every string (not an enum's word) set to `string`.
fn base_with(ty: &Ty, types: &NameMap<TypeDef>, depth: usize, string: &str) -> Value {
    let base = |ty: &Ty, depth: usize| base_with(ty, types, depth, string);
    match ty {
        Ty::Any | Ty::Null => Value::Null,
        Ty::Bool => json!(true),
        Ty::Int => json!(1),
        Ty::Float | Ty::Duration | Ty::Money => json!(1.0),
        Ty::Percent => json!(0.5),
        Ty::String => json!(string),
        Ty::List { .. } => json!([]),
        Ty::Record { fields } => {
            Value::Object(fields.iter().filter(|(_, f)| !f.optional).map(|(k, f)| (k.clone(), base(&f.ty, depth))).collect())
        }
        Ty::Enum { values } => values.first().map(|v| json!(v)).unwrap_or(Value::Null),
        Ty::Nullable { inner } => base(inner, depth),
        Ty::Named { name } if depth < MAX_DEPTH => named(name, types).map(|t| base(t, depth + 1)).unwrap_or(Value::Null),
        Ty::Named { .. } => Value::Null,
    }
}

/// Values of `ty` other than [`base`], each different in one position.
fn variants(ty: &Ty, types: &NameMap<TypeDef>, depth: usize) -> Vec<Value> {
    match ty {
        Ty::Bool => vec![json!(false)],
        Ty::Int => vec![json!(0), json!(10)],
        Ty::Float | Ty::Duration | Ty::Money => vec![json!(0.0), json!(10.0)],
        Ty::Percent => vec![json!(0.0), json!(1.0)],
        Ty::String => vec![json!("")],
        Ty::Enum { values } => values.iter().skip(1).map(|v| json!(v)).collect(),
        Ty::Nullable { inner } => {
            let mut out = variants(inner, types, depth);
            out.push(Value::Null);
            out
        }
        Ty::List { item } => (1..=3).map(|k| Value::Array(vec![base(item, types, depth); k])).collect(),
        Ty::Record { fields } => {
            let plain = base(ty, types, depth);
            let filled = filled(fields, &plain, types, depth);
            let mut out = Vec::new();
            for (name, field) in fields {
                let mut alternatives = variants(&field.ty, types, depth);
                if field.optional {
                    alternatives.insert(0, base(&field.ty, types, depth));
                }
                for alt in alternatives {
                    let mut v = plain.clone();
                    if let Some(map) = v.as_object_mut() {
                        map.insert(name.clone(), alt);
                    }
                    out.push(v);
                }
            }
            // A record that routes on an enum field is often accepted only
            // with its lists non-empty (a handoff's `accept`): each other
            // value of each enum field is also tried with every list
            // holding one item.
            if filled != plain {
                for (name, field) in fields.iter().filter(|(_, f)| !f.optional) {
                    if let Ty::Enum { values } = &field.ty {
                        for value in values.iter().skip(1) {
                            let mut v = filled.clone();
                            v[name.as_str()] = json!(value);
                            out.push(v);
                        }
                    }
                }
            }
            out
        }
        Ty::Named { name } if depth < MAX_DEPTH => named(name, types).map(|t| variants(t, types, depth + 1)).unwrap_or_default(),
        Ty::Any | Ty::Null | Ty::Named { .. } => Vec::new(),
    }
}

/// The plainest value of `ty` with each required list of its record
/// holding one item (`None`: not a record, or it has no such list).
fn filled_instance(ty: &Ty, types: &NameMap<TypeDef>) -> Option<Value> {
    let mut ty = ty;
    for _ in 0..MAX_DEPTH {
        match ty {
            Ty::Named { name } => ty = named(name, types)?,
            _ => break,
        }
    }
    let Ty::Record { fields } = ty else { return None };
    let plain = base(ty, types, 0);
    Some(filled(fields, &plain, types, 0)).filter(|f| *f != plain)
}

/// `plain` (a record's [`base`]) with each required list holding one item,
/// itself filled when it is a record (an outline's one section with one
/// claim), to [`MAX_DEPTH`].
fn filled(fields: &indexmap::IndexMap<String, flow_check::types::FieldTy>, plain: &Value, types: &NameMap<TypeDef>, depth: usize) -> Value {
    let mut filled_value = plain.clone();
    for (name, field) in fields.iter().filter(|(_, f)| !f.optional) {
        if let Ty::List { item } = &field.ty {
            let one = base(item, types, depth);
            let one = match record_fields(item, types) {
                Some(inner) if depth < MAX_DEPTH => filled(inner, &one, types, depth + 1),
                _ => one,
            };
            filled_value[name.as_str()] = Value::Array(vec![one]);
        }
    }
    filled_value
}

/// The fields of `ty` when it is (or names) a record.
fn record_fields<'t>(mut ty: &'t Ty, types: &'t NameMap<TypeDef>) -> Option<&'t indexmap::IndexMap<String, flow_check::types::FieldTy>> {
    for _ in 0..MAX_DEPTH {
        match ty {
            Ty::Named { name } => ty = named(name, types)?,
            Ty::Record { fields } => return Some(fields),
            _ => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use flow_check::types::FieldTy;

    fn record(fields: &[(&str, Ty, bool)]) -> Ty {
        Ty::Record { fields: fields.iter().map(|(n, t, o)| (n.to_string(), FieldTy { ty: t.clone(), optional: *o })).collect() }
    }

    #[test]
    fn instances_start_plain_and_vary_one_position_at_a_time() {
        let ty = record(&[("ok", Ty::Bool, false), ("n", Ty::Int, false), ("note", Ty::String, true)]);
        let got = instances(&ty, &NameMap::default());
        assert_eq!(got[0], json!({ "ok": true, "n": 1 }));
        assert!(got.contains(&json!({ "ok": false, "n": 1 })));
        assert!(got.contains(&json!({ "ok": true, "n": 10 })));
        assert!(got.contains(&json!({ "ok": true, "n": 1, "note": "x" })));
        assert!(got.len() <= MAX_VARIANTS);
    }

    #[test]
    fn a_routing_enum_is_also_tried_with_its_lists_filled() {
        let route = Ty::Enum { values: vec!["a".into(), "b".into()] };
        let ty = record(&[("next", route, false), ("points", Ty::List { item: Box::new(Ty::String) }, false)]);
        let got = instances(&ty, &NameMap::default());
        assert_eq!(got[0], json!({ "next": "a", "points": [] }));
        // One field at a time, and the other route with the list filled.
        assert!(got.contains(&json!({ "next": "b", "points": [] })));
        assert!(got.contains(&json!({ "next": "a", "points": ["x"] })));
        assert!(got.contains(&json!({ "next": "b", "points": ["x"] })));
    }

    #[test]
    fn lists_enums_and_recursive_types_are_bounded() {
        let list = Ty::List { item: Box::new(Ty::Enum { values: vec!["a".into(), "b".into()] }) };
        assert_eq!(instances(&list, &NameMap::default()), [json!([]), json!(["a"]), json!(["a", "a"]), json!(["a", "a", "a"])]);
        let mut types = NameMap::default();
        let tree = record(&[("next", Ty::Named { name: "T".into() }, false)]);
        types.insert("T".into(), TypeDef { name: "T".into(), ty: tree, loc: Default::default(), schema: None });
        let v = base(&Ty::Named { name: "T".into() }, &types, 0);
        assert!(v.to_string().len() < 200, "{v}");
    }
}
