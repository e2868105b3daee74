//! Policy verification: every policy of a program checked by the model
//! checker against every workflow it applies to, with witnesses in the
//! trace event vocabulary; and positive witnesses for coverage obligations.

use crate::flowgraph::loc_span;
use crate::mc::{self, Verdict};
use crate::model::{Label, Model, DECISIONS, OUTCOMES, ZONES};
use crate::obligations::Obligation;
use crate::Cancel;
use flow_check::ir::TransferKind;
use flow_check::ir::{Loc, Policy, Program, Workflow};
use flow_diagnostics::{codes, Diagnostic, Witness, WitnessStep};
use flow_policy::Automaton;
use flow_trace::Event;

/// The default bound on product states per policy and workflow.
pub const DEFAULT_MAX_STATES: usize = 2_000_000;

/// One policy checked against one workflow.
#[derive(Debug, Clone)]
pub struct PolicyReport {
    pub name: String,
    pub workflow: String,
    pub loc: Loc,
    /// `holds`, `violated` or `unknown`.
    pub status: &'static str,
    /// Product states explored.
    pub states: usize,
    /// The counterexample as trace events (violated only).
    pub events: Vec<Event>,
    /// The counterexample as source steps (violated only).
    pub witness: Option<Witness>,
    /// E1001 for a violation, W1001 for unknown.
    pub diagnostic: Option<Diagnostic>,
}

/// The policies that apply to a workflow: the program's, then its own.
pub fn applicable<'p>(program: &'p Program, workflow: &'p Workflow) -> impl Iterator<Item = &'p Policy> {
    program.policies.iter().chain(workflow.policies.iter())
}

fn model_for<'p>(program: &'p Program, workflow: &'p Workflow, obligations: &[Obligation]) -> Model<'p> {
    Model::new(program, workflow, obligations)
}

/// Checks every policy against every workflow it applies to.
pub fn check_policies(program: &Program, plan_digest: &str, max_states: usize) -> Vec<PolicyReport> {
    check_policies_with(program, plan_digest, max_states, Reductions::default())
}

/// The model checker's reductions; each is on by default and turned off
/// only to test that it changes no verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reductions {
    /// A branch's control steps run without interleaving (`Model::reduce`).
    pub atomic_control: bool,
    /// Counters and output bits no thread can read are cleared (`Model::dead_vars`).
    pub dead_vars: bool,
    /// A state the policy can no longer be changed from is not explored
    /// further (`Model::cone`).
    pub cone: bool,
    /// A workflow's policies are checked in one exploration (`shared.rs`).
    pub shared: bool,
}

impl Default for Reductions {
    fn default() -> Reductions {
        Reductions { atomic_control: true, dead_vars: true, cone: true, shared: true }
    }
}

impl Reductions {
    /// Every reduction off.
    pub const NONE: Reductions = Reductions { atomic_control: false, dead_vars: false, cone: false, shared: false };
}

/// [`check_policies`], with chosen reductions.
pub fn check_policies_with(program: &Program, plan_digest: &str, max_states: usize, reductions: Reductions) -> Vec<PolicyReport> {
    check_policies_until(program, plan_digest, max_states, reductions, &Cancel::default()).expect("never cancelled")
}

/// [`check_policies_with`], or `None` once `cancel` is set.
pub fn check_policies_until(
    program: &Program,
    plan_digest: &str,
    max_states: usize,
    reductions: Reductions,
    cancel: &Cancel,
) -> Option<Vec<PolicyReport>> {
    let obligations = crate::obligations::obligations(program);
    let mut out = Vec::new();
    for workflow in program.workflows.values() {
        let mut model = model_for(program, workflow, &obligations);
        model.reduce = reductions.atomic_control;
        model.dead_vars = reductions.dead_vars;
        model.cone = reductions.cone;
        let policies: Vec<&Policy> = applicable(program, workflow).collect();
        let mut shared: Vec<Option<mc::Outcome>> = vec![None; policies.len()];
        if reductions.shared && policies.len() > 1 && model.too_large().is_none() {
            // The policies whose automata compile, in one exploration.
            let compiled: Vec<(usize, Automaton)> =
                policies.iter().enumerate().filter_map(|(i, p)| Automaton::new(&p.formula).ok().map(|a| (i, a))).collect();
            let (which, mut automata): (Vec<usize>, Vec<Automaton>) = compiled.into_iter().unzip();
            for (i, outcome) in which.into_iter().zip(crate::shared::check_all(&model, &mut automata, max_states, cancel)) {
                shared[i] = Some(outcome);
            }
        }
        for (policy, outcome) in policies.into_iter().zip(shared) {
            out.push(check_one(&model, policy, plan_digest, max_states, cancel, outcome)?);
        }
    }
    Some(out)
}

/// One policy's report; `shared` is its outcome in the workflow's shared
/// exploration, if it had one (an `Unknown` there is checked again alone).
fn check_one(
    model: &Model,
    policy: &Policy,
    plan_digest: &str,
    max_states: usize,
    cancel: &Cancel,
    shared: Option<mc::Outcome>,
) -> Option<PolicyReport> {
    let workflow = model.workflow.name.clone();
    let mut report = PolicyReport {
        name: policy.name.clone(),
        workflow: workflow.clone(),
        loc: policy.loc,
        status: "unknown",
        states: 0,
        events: Vec::new(),
        witness: None,
        diagnostic: None,
    };
    let (file, span) = loc_span(policy.loc);
    let mut automaton = match Automaton::new(&policy.formula) {
        Ok(a) => a,
        Err(why) => {
            report.diagnostic = Some(
                Diagnostic::new(codes::POLICY_UNKNOWN, file, span, format!("policy `{}` cannot be checked: {why}", policy.name))
                    .with_primary_message("not checked"),
            );
            return Some(report);
        }
    };
    // W1001: neither proven nor refuted, with why and what to do.
    let undecided = |why: &str, help: &str| {
        Diagnostic::new(
            codes::POLICY_UNKNOWN,
            file,
            span,
            format!("policy `{}` is not decided in workflow `{workflow}`: {why}", policy.name),
        )
        .with_primary_message("unknown")
        .with_help(help)
    };
    if let Some(why) = model.too_large() {
        report.diagnostic = Some(undecided(&why, "split the workflow into sub-flows; the run monitors still check the policy at run time"));
        return Some(report);
    }
    let outcome = match shared {
        Some(outcome) if !matches!(outcome.verdict, Verdict::Unknown(_)) => outcome,
        _ => mc::check(model, &mut automaton, max_states, cancel),
    };
    report.states = outcome.states;
    match outcome.verdict {
        Verdict::Cancelled => return None,
        Verdict::Holds => report.status = "holds",
        Verdict::Unknown(bound) => {
            report.diagnostic = Some(undecided(
                &format!("the state space exceeds {bound} states"),
                "simplify the workflow (fewer parallel branches, smaller loop bounds) or raise `--max-states`",
            ));
        }
        Verdict::Violated(cx) => {
            report.status = "violated";
            let run_id = format!("witness-{workflow}-{}", policy.name);
            let events = mc::events_with_cycle(model, &cx.labels, cx.cycle_start, &run_id, plan_digest);
            let mut witness = steps(model, &cx.labels, policy.loc);
            witness.cycle_start = cx.cycle_start.map(|c| cx.labels[..c].iter().filter(|l| !matches!(l, Label::Edge(..))).count());
            witness.trace = serde_json::to_string(&events).ok();
            let how = match (&cx.cycle_start, &cx.owed) {
                (Some(_), Some(owed)) => format!("a run can cycle forever while `{owed}` is still owed"),
                (None, Some(owed)) => format!("a run can end while `{owed}` is still owed"),
                _ => "a run reaches an event the policy forbids".to_string(),
            };
            let mut d = Diagnostic::new(
                codes::POLICY_VIOLATED,
                file,
                span,
                format!("policy `{}` is violated in workflow `{workflow}`", policy.name),
            )
            .with_primary_message(how)
            .with_witness(witness.clone());
            d = d.with_note(format!("the witness run has {} events; `flowc verify --witness-dir DIR` writes it as JSONL", events.len()));
            report.diagnostic = Some(d);
            report.events = events;
            report.witness = Some(witness);
        }
    }
    Some(report)
}

/// The witness as source steps: one per policy event.
fn steps(model: &Model, labels: &[Label], policy_loc: Loc) -> Witness {
    let node_step = |n: u16, message: String| {
        let (file, span) = loc_span(model.node_loc(n));
        WitnessStep { name: model.node_name(n).to_string(), file, span, message }
    };
    let mut out = Vec::new();
    for label in labels {
        let step = match label {
            Label::Started(n) => node_step(*n, format!("`{}` starts", model.node_name(*n))),
            Label::Completed(n) | Label::Settled(n, _) => node_step(*n, format!("`{}` completes", model.node_name(*n))),
            Label::Failed(n) | Label::FailedUnsent(n) | Label::FailedInvalid(n) => {
                node_step(*n, format!("`{}` fails", model.node_name(*n)))
            }
            Label::Called(t, a, n) => {
                let who =
                    a.map(|a| format!("agent `{}`", model.agents[a as usize])).unwrap_or_else(|| format!("`{}`", model.node_name(*n)));
                node_step(*n, format!("{who} calls tool `{}`", model.tools[*t as usize]))
            }
            Label::Refused(t, a, n) => {
                let who = a.map(|a| format!("agent `{}`", model.agents[a as usize])).unwrap_or_default();
                node_step(*n, format!("{who} asks for tool `{}` and is refused", model.tools[*t as usize]))
            }
            Label::HandedOff(a, b) => node_step(*b, format!("`{}` hands off to `{}`", model.node_name(*a), model.node_name(*b))),
            Label::DeadLettered(a, b) => node_step(
                *a,
                format!("`{}`'s handoff to `{}` is refused, its message dead-lettered", model.node_name(*a), model.node_name(*b)),
            ),
            Label::Recorded(r) => {
                let (record, at) = &model.records[*r as usize];
                node_step(*at, format!("record `{record}` is written"))
            }
            Label::Outcome(g, o) => {
                let (file, span) = loc_span(model.gate_loc(*g));
                let gate = &model.gate_names[*g as usize];
                WitnessStep { name: gate.clone(), file, span, message: format!("gate `{gate}` records {}", OUTCOMES[*o as usize]) }
            }
            Label::Decided(s, d, p) => {
                let subject = &model.subjects[*s as usize];
                let loc = match model.workflow.gates.get_index_of(subject) {
                    Some(g) => model.gate_loc(g as u16),
                    None => match model.workflow.nodes.get_index_of(subject) {
                        Some(n) => model.node_loc(n as u16),
                        None => policy_loc,
                    },
                };
                let (file, span) = loc_span(loc);
                let message = match *p {
                    crate::model::CONTROL => format!("no decision on `{subject}` comes within its timeout"),
                    _ => {
                        let by = model.principals.get_index(*p as usize).map(String::as_str).unwrap_or("a human");
                        format!("`{by}` decides {} on `{subject}`", DECISIONS[*d as usize])
                    }
                };
                WitnessStep { name: subject.clone(), file, span, message }
            }
            Label::Zone(_, z) => {
                let (file, span) = loc_span(policy_loc);
                WitnessStep {
                    name: format!("zone {}", ZONES[*z as usize]),
                    file,
                    span,
                    message: format!("the budget enters zone {}", ZONES[*z as usize]),
                }
            }
            Label::Exhausted(_) => {
                let (file, span) = loc_span(policy_loc);
                WitnessStep { name: "budget".into(), file, span, message: "the budget is exhausted".into() }
            }
            Label::Terminated(r) => {
                let reason = model.reasons.get_index(*r as usize).cloned().unwrap_or_default();
                let (file, span) = loc_span(policy_loc);
                WitnessStep { name: format!("terminated({reason})"), file, span, message: format!("the run terminates with `{reason}`") }
            }
            Label::Edge(..) | Label::Acted(_) => continue,
        };
        out.push(step);
    }
    Witness::path(out)
}

/// A positive witness per coverage obligation: an example run (trace
/// events) that covers it, or `None` when the model has no such run.
pub fn positive_witnesses(program: &Program, plan_digest: &str, max_states: usize) -> Vec<(Obligation, Option<Vec<Event>>)> {
    let obligations = crate::obligations::obligations(program);
    let mut out = Vec::new();
    for workflow in program.workflows.values() {
        let model = model_for(program, workflow, &obligations);
        let too_large = model.too_large().is_some();
        for o in obligations.iter().filter(|o| o.workflow == workflow.name) {
            if too_large {
                out.push((o.clone(), None));
                continue;
            }
            let subject = |i: usize| o.subject.get(i).map(String::as_str).unwrap_or("");
            let wanted = |l: &Label| -> bool {
                match (o.kind.as_str(), l) {
                    ("agent", Label::Started(n)) => model.node_agent(*n) == Some(subject(0)),
                    ("tool_edge", Label::Called(t, Some(a), _)) => {
                        model.agents[*a as usize] == subject(0) && model.tools[*t as usize] == subject(1)
                    }
                    ("restricted_tool_edge", Label::Refused(t, Some(a), _)) => {
                        model.agents[*a as usize] == subject(0) && model.tools[*t as usize] == subject(1)
                    }
                    ("delegation_edge", Label::Edge(a, b, _)) => {
                        model.node_name(*a) == subject(0) && model.node_name(*b) == subject(1)
                            || model.workflow.transfers.iter().any(|t| {
                                t.kind() == TransferKind::Delegate
                                    && t.from == subject(0)
                                    && t.to == subject(1)
                                    && model.node_name(*b) == t.to
                            })
                    }
                    ("gate_outlet", Label::Outcome(g, oc)) => {
                        model.gate_names[*g as usize] == subject(0) && OUTCOMES[*oc as usize] == subject(1)
                    }
                    ("gate_outlet", Label::Decided(s, d, _)) => {
                        model.subjects[*s as usize] == subject(0) && DECISIONS[*d as usize].as_str() == subject(1)
                    }
                    _ => false,
                }
            };
            let run = mc::cover(&model, wanted, max_states).map(|labels| {
                let run_id = format!("cover-{}", o.id.replace([':', '>', '/'], "_"));
                mc::events(&model, &labels, &run_id, plan_digest)
            });
            out.push((o.clone(), run));
        }
    }
    out
}
