//! Gate checks: on an edge, every outcome and decision handled, no bypass,
//! authorised triggers, fail-closed configuration, someone to decide.

use crate::flowgraph::{loc_span, EdgeKind, FlowGraph};
use flow_check::ir::ActionKind;
use flow_check::ir::NodeKind;
use flow_check::ir::{Gate, Program};
use flow_check::spec::{Kind, OUTCOMES};
use flow_diagnostics::{codes, Diagnostic, Label};
use flow_trace::Outcome;
use indexmap::IndexSet;
use petgraph::visit::EdgeRef;

/// The outcomes and decisions a gate can produce.
pub fn possible_exits(gate: &Gate, program: &Program) -> Vec<String> {
    let mut exits: IndexSet<String> = IndexSet::new();
    exits.insert("PASS".into());
    exits.insert(gate.on_error().as_str().to_string());
    exits.insert(gate.on_empty().as_str().to_string());
    for evaluator in gate.evaluators() {
        let fail = if evaluator.builtin { Outcome::Block } else { program.decls.get(evaluator.name).map_or(Outcome::Block, |d| d.fail()) };
        exits.insert(fail.as_str().to_string());
    }
    let mut ordered: Vec<String> = OUTCOMES.iter().filter(|o| exits.contains(**o)).map(|o| o.to_string()).collect();
    if exits.contains("REQUIRES_DECISION") {
        ordered.extend(gate.allowed_decisions().iter().map(|d| d.as_str().to_string()));
    }
    ordered
}

pub fn check(flow: &FlowGraph<'_>, program: &Program, out: &mut Vec<Diagnostic>) {
    let workflow = flow.workflow;
    for gate in workflow.gates.values() {
        let (file, span) = loc_span(gate.loc);
        let (Some(&from), Some(&to)) = (flow.index.get(&gate.from), flow.index.get(&gate.to)) else { continue };
        let on_edge = workflow.edges.iter().any(|e| e.from == gate.from && e.to == gate.to);
        if !on_edge {
            out.push(
                Diagnostic::new(
                    codes::GATE_NOT_ON_EDGE,
                    file,
                    span,
                    format!("gate `{}` guards `{} -> {}`, which is not an edge", gate.name, gate.from, gate.to),
                )
                .with_primary_message("never evaluated")
                .with_help(format!("add the edge `{} -> {}` or move the gate to an existing edge", gate.from, gate.to)),
            );
            continue;
        }
        // Every possible outcome and decision needs a handler.
        let handled: IndexSet<&str> = gate.handlers.iter().flat_map(|h| h.events.iter().map(|e| e.as_str())).collect();
        let exits = possible_exits(gate, program);
        let missing: Vec<&String> = exits.iter().filter(|e| !handled.contains(e.as_str())).collect();
        if !missing.is_empty() {
            let list = missing.iter().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(", ");
            out.push(
                Diagnostic::new(codes::UNHANDLED_OUTCOME, file, span, format!("gate `{}` has no handler for {list}", gate.name))
                    .with_primary_message("unhandled exits")
                    .with_note(format!("this gate can exit with: {}", exits.join(", ")))
                    .with_help(format!("add `on {} -> ACTION`", missing[0])),
            );
        }
        // Someone must be able to decide.
        if exits.iter().any(|e| e == "REQUIRES_DECISION") && gate.decided_by().is_none() {
            out.push(
                Diagnostic::new(
                    codes::NO_DECIDER,
                    file,
                    span,
                    format!("gate `{}` can require a decision but names no one to decide", gate.name),
                )
                .with_primary_message("no `decided_by`")
                .with_help("add `decided_by: [PRINCIPAL]`"),
            );
        }
        unmetered_judges(flow, gate, program, out);
        fail_open(flow, gate, out);
        // Triggers: only the agent that runs `from`, or principals.
        if let Some(trigger) = gate.trigger() {
            let from_node = flow.node(from);
            let agents = trigger.by.iter().filter(|who| program.decls.get(who.as_str()).is_some_and(|d| d.kind == Kind::Agent));
            for name in agents {
                let runs_from = from_node.kind() == NodeKind::Agent && from_node.target.first() == Some(name);
                if !runs_from {
                    let (nf, ns) = loc_span(from_node.loc);
                    out.push(
                        Diagnostic::new(
                            codes::UNAUTHORISED_TRIGGER,
                            file,
                            span,
                            format!("agent `{name}` may trigger gate `{}` but does not run `{}`", gate.name, gate.from),
                        )
                        .with_primary_message("trigger not authorised")
                        .with_label(Label::secondary(
                            nf,
                            ns,
                            format!(
                                "`{}` is run by {}",
                                from_node.name,
                                from_node.target.first().map(|t| format!("`{t}`")).unwrap_or_else(|| "no agent".into())
                            ),
                        )),
                    );
                }
            }
        }
        // Bypass: `to` reachable from the start without the gated edge (the
        // gate's own handler paths are behind the gate).
        // Only another way into `to` can bypass the gate: with none, there
        // is nothing to search.
        let other_ways_in = flow
            .graph
            .edges_directed(to, petgraph::Direction::Incoming)
            .filter(|e| {
                let kind = e.weight();
                let gated_edge = e.source() == from && matches!(kind, EdgeKind::Written(_));
                let behind_gate = matches!(kind, EdgeKind::Handler { gate: Some(g), .. } if *g == gate.name);
                !gated_edge && !behind_gate
            })
            .count();
        if other_ways_in == 0 {
            continue;
        }
        let parents = flow.bfs(|kind, a, b| {
            (a == from && b == to && matches!(kind, EdgeKind::Written(_)))
                || matches!(kind, EdgeKind::Handler { gate: Some(g), .. } if *g == gate.name)
        });
        if parents.contains_key(&to) {
            let path = flow.path_to(&parents, to);
            let (tf, ts) = loc_span(flow.node(to).loc);
            out.push(
                Diagnostic::new(codes::GATE_BYPASS, tf, ts, format!("`{}` can be reached without passing gate `{}`", gate.to, gate.name))
                    .with_primary_message("reached around the gate")
                    .with_label(Label::secondary(file, span, "the gate guards only this edge"))
                    .with_witness(flow.witness(&path)),
            );
        }
    }
}

/// E0505: configurations that let a failed or inconclusive check through.
/// The witness is a run through the gate: start, …, `from`, `to`.
fn fail_open(flow: &FlowGraph<'_>, gate: &Gate, out: &mut Vec<Diagnostic>) {
    let (file, span) = loc_span(gate.loc);
    let through = |event: &str| {
        let reached = flow.reachable();
        let (&from, &to) = (flow.index.get(&gate.from)?, flow.index.get(&gate.to)?);
        reached.contains_key(&from).then(|| {
            let mut path = flow.path_to(&reached, from);
            path.push(to);
            let mut w = flow.witness(&path);
            if let Some(last) = w.steps.last_mut() {
                last.message = format!("gate `{}` records {event}, and `{}` runs anyway", gate.name, gate.to);
            }
            w
        })
    };
    if gate.evaluators().is_empty() {
        out.push(
            Diagnostic::new(codes::FAIL_OPEN_GATE, file, span, format!("gate `{}` has no evaluators: it passes everything", gate.name))
                .with_primary_message("fail-open"),
        );
        if let (Some(w), Some(last)) = (through("PASS"), out.last_mut()) {
            last.witness = Some(w);
        }
    }
    for handler in &gate.handlers {
        let lets_through = match handler.action.name {
            ActionKind::Continue | ActionKind::Skip | ActionKind::Degrade | ActionKind::Warn => true,
            ActionKind::Goto | ActionKind::Activate => handler.action.args.first() == Some(&gate.to),
            _ => false,
        };
        for event in &handler.events {
            use flow_check::ir::HandlerEvent;
            let open = match event {
                HandlerEvent::Block | HandlerEvent::Timeout | HandlerEvent::RequiresDecision => lets_through,
                _ => false,
            };
            if open {
                let (hf, hs) = loc_span(handler.loc);
                out.push(
                    Diagnostic::new(
                        codes::FAIL_OPEN_GATE,
                        hf,
                        hs,
                        format!("gate `{}` lets `{event}` through to `{}` ({})", gate.name, gate.to, handler.action.name),
                    )
                    .with_primary_message("fail-open")
                    .with_label(Label::secondary(file, span, "gate declared here"))
                    .with_help(if *event == flow_check::ir::HandlerEvent::RequiresDecision {
                        "use `decide`, so a principal decides"
                    } else {
                        "terminate, replan or activate a repair path instead"
                    }),
                );
                if let (Some(w), Some(last)) = (through(event.as_str()), out.last_mut()) {
                    last.witness = Some(w);
                }
            }
        }
    }
}

/// An `llm` evaluator's judge turns are not metered against budgets: where
/// a token or cost limit would have to count them (the run's budget, or
/// the judging agent's), the evaluator is refused (E0116) rather than let
/// a budget be proved that its turns could pass.
fn unmetered_judges(flow: &FlowGraph<'_>, gate: &Gate, program: &Program, out: &mut Vec<Diagnostic>) {
    let limits_tokens =
        |b: Option<flow_check::view::Budget<'_>>| b.is_some_and(|b| b.limit("tokens").is_some() || b.limit("cost").is_some());
    for evaluator in gate.evaluators().iter().filter(|e| !e.builtin) {
        let Some(decl) = program.decls.get(evaluator.name).filter(|d| d.variant.as_deref() == Some("llm")) else { continue };
        let judge = decl.judge().and_then(|j| program.decls.get(j));
        let whose = if limits_tokens(flow.workflow.budget(program)) {
            format!("workflow `{}`", flow.workflow.name)
        } else if limits_tokens(judge.and_then(|j| j.budget(program))) {
            format!("agent `{}`", decl.judge().unwrap_or_default())
        } else {
            continue;
        };
        let (file, span) = loc_span(gate.loc);
        out.push(
            Diagnostic::new(
                codes::NOT_SUPPORTED,
                file,
                span,
                format!("an `llm` evaluator (`{}`) under a token or cost budget is not supported yet", evaluator.name),
            )
            .with_primary_message("its judge's turns would not be counted")
            .with_note(format!("the budget of {whose} limits tokens or cost; judge turns are not metered against budgets yet"))
            .with_help("judge with a `predicate`, `schema` or `command` evaluator, or drop the token and cost limits"),
        );
    }
}
