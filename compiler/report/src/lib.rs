//! Plans and runs drawn as one self-contained HTML page.
//!
//! `flowc graph --format html` draws a plan's workflows ([`plan_page`]);
//! `flow report RUN` draws a run on its plan ([`run_page`]): the graph with
//! the path the run took (nodes by status, edges taken, gates with their
//! outcomes and evaluators, loops with their rounds), a timeline of
//! attempts, calls and waits for humans, each budget scope's use over time
//! with its zones, and the policies' verdicts; clicking a node shows its
//! attempts, the artifacts in and out by digest, and its events.
//!
//! Pure: a program and events in, a string out. The page fetches nothing —
//! styles, script and data are inlined, and its Content-Security-Policy
//! forbids anything else.

mod charts;
pub mod graph;
mod page;
pub mod run;
mod svg;

pub use charts::{human_ms, ScopeLimits};
pub use graph::Graph;
pub use page::esc;
pub use run::RunView;

use flow_check::ir::{Program, Workflow};
use flow_check::view::Budget;
use flow_trace::Event;
use serde_json::json;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Every workflow of `program`, drawn (the plan alone).
pub fn plan_page(program: &Program, title: &str) -> String {
    let mut sections = String::new();
    let _ = write!(
        sections,
        "<header><h1>{}</h1><p class=\"sub\">the plan: every workflow's nodes, edges, gates and loop bounds</p></header>\n<main>",
        esc(title)
    );
    let mut data = serde_json::Map::new();
    for workflow in program.workflows.values() {
        let graph = Graph::of(program, workflow);
        let _ = write!(
            sections,
            "<section class=\"workflow\" data-workflow=\"{}\"><h2>workflow {}</h2><div class=\"graph-box\">{}</div></section>",
            esc(&workflow.name),
            esc(&workflow.name),
            svg::draw(&graph, None)
        );
        data.insert(
            workflow.name.clone(),
            json!({ "nodes": graph.nodes.iter().map(|n| json!({"name": n.name, "kind": n.kind, "target": n.target})).collect::<Vec<_>>() }),
        );
    }
    sections.push_str("<aside id=\"details\" hidden></aside></main>");
    page::page(title, &sections, &json!({ "mode": "plan", "workflows": data }))
}

/// Money to the last digit that matters: `$0.0123`, `$0.00000042`
/// (never `$0.0000` for a small cost).
pub fn money(cost: f64) -> String {
    if cost == 0.0 {
        return "$0".to_string();
    }
    let mut decimals = 4usize;
    while decimals < 12 && (cost.abs() * 10f64.powi(decimals as i32)) < 100.0 {
        decimals += 1;
    }
    format!("${cost:.decimals$}")
}

/// A policy's verdict in a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub policy: String,
    /// `violated`, `held` (the run ended without violating it) or `open`
    /// (no violation yet: the run has not ended).
    pub verdict: &'static str,
    pub detail: String,
}

/// The run of `events` drawn on `program`'s workflow.
pub fn run_page(program: &Program, events: &[Event]) -> Result<String, String> {
    let name = events
        .iter()
        .find_map(|e| match &e.body {
            flow_trace::Body::RunStarted { workflow, .. } => Some(workflow.as_str()),
            _ => None,
        })
        .ok_or("the run has no run_started event")?;
    let workflow = program.workflows.get(name).ok_or_else(|| format!("the plan has no workflow `{name}` (the run's)"))?;
    let agents = workflow
        .nodes
        .values()
        .filter(|n| n.kind() == flow_check::ir::NodeKind::Agent)
        .filter_map(|n| Some((n.name.clone(), n.target.first()?.clone())))
        .collect();
    let view = RunView::of(events, &agents);
    let graph = Graph::of(program, workflow);
    let verdicts = verdicts(program, workflow, &view);
    let limits = scope_limits(program, workflow);
    let mut s = String::new();
    header(&mut s, &view);
    let _ = write!(
        s,
        "<main><section class=\"workflow\" data-workflow=\"{}\"><h2>The path</h2><div class=\"graph-box\">{}</div>",
        esc(&workflow.name),
        svg::draw(&graph, Some(&view))
    );
    s.push_str("<p class=\"legend\"><span class=\"st-completed\">completed</span> <span class=\"st-failed\">failed</span> <span class=\"st-running\">running or waiting</span> <span class=\"st-stopped\">stopped unfinished</span> <span class=\"st-not_run\">not run</span> — click a node for its attempts, artifacts and events</p></section>");
    s.push_str("<aside id=\"details\" hidden></aside>");
    let _ = write!(s, "<section><h2>Timeline</h2><div class=\"scroll\">{}</div></section>", charts::timeline(&view));
    let budgets = charts::budgets(&view, &limits);
    let budgets = match (budgets.is_empty(), limits.values().any(|l| !l.limits.is_empty())) {
        (false, _) => budgets,
        (true, false) => "<p>No budget is declared for this run's scopes.</p>".to_string(),
        (true, true) => "<p>Nothing was metered against the declared budgets.</p>".to_string(),
    };
    let _ = write!(s, "<section><h2>Budgets</h2>{budgets}</section>");
    gates_table(&mut s, &view);
    policies_table(&mut s, &verdicts);
    s.push_str("</main>");
    let data = json!({
        "mode": "run",
        "run_id": view.run_id,
        "nodes": view.nodes,
        "rows": view.rows,
        "gates": view.gates,
        "waits": view.waits,
    });
    Ok(page::page(&format!("{} — {}", view.workflow, view.run_id), &s, &data))
}

fn header(s: &mut String, view: &RunView) {
    let status = view.status.as_deref().unwrap_or(if view.waiting_on.is_some() { "paused" } else { "running" });
    let _ = write!(s, "<header><h1>{} <span class=\"status status-{}\">{}</span></h1>", esc(&view.workflow), esc(status), esc(status));
    let mut facts = vec![format!("run {}", esc(&view.run_id))];
    facts.extend(view.reason.as_ref().map(|r| format!("reason {}", esc(r))));
    facts.extend(view.waiting_on.as_ref().map(|w| format!("waiting on {}", esc(w))));
    facts.push(human_ms(view.duration_ms));
    facts.push(format!("{} tokens", view.tokens));
    if view.cost > 0.0 {
        facts.push(money(view.cost));
    }
    facts.push(format!("{} events", view.rows.len()));
    let _ = write!(s, "<p class=\"sub\">{}</p></header>", facts.join(" · "));
}

fn gates_table(s: &mut String, view: &RunView) {
    s.push_str("<section><h2>Gates</h2>");
    if view.gates.is_empty() {
        s.push_str("<p>No gate was evaluated.</p></section>");
        return;
    }
    s.push_str("<table><tr><th>seq</th><th>gate</th><th>boundary</th><th>outcome</th><th>evaluators</th></tr>");
    for g in &view.gates {
        let evaluators: Vec<String> = g
            .evaluators
            .iter()
            .map(|(e, o, why)| {
                format!(
                    "<code>{}</code>: <span class=\"outcome-{o}\">{o}</span>{}",
                    esc(e),
                    why.as_deref().map(|w| format!(" — {}", esc(w))).unwrap_or_default()
                )
            })
            .collect();
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{} → {}</td><td class=\"outcome-{o}\">{o}</td><td>{}</td></tr>",
            g.seq,
            esc(&g.gate),
            esc(&g.from),
            esc(&g.to),
            evaluators.join("<br>"),
            o = esc(&g.outcome)
        );
    }
    s.push_str("</table></section>");
}

fn policies_table(s: &mut String, verdicts: &[Verdict]) {
    s.push_str("<section><h2>Policies</h2>");
    if verdicts.is_empty() {
        s.push_str("<p>The plan declares no policy.</p></section>");
        return;
    }
    s.push_str("<table class=\"policies\"><tr><th>policy</th><th>verdict in this run</th><th></th></tr>");
    for v in verdicts {
        let _ =
            write!(s, "<tr><td>{}</td><td class=\"verdict-{v}\">{v}</td><td>{}</td></tr>", esc(&v.policy), esc(&v.detail), v = v.verdict);
    }
    s.push_str("</table></section>");
}

/// Every policy that applies to `workflow`, with what the run's monitor
/// recorded of it.
pub fn verdicts(program: &Program, workflow: &Workflow, view: &RunView) -> Vec<Verdict> {
    program
        .policies
        .iter()
        .chain(&workflow.policies)
        .map(|p| {
            let violations: Vec<&run::Violation> = view.violations.iter().filter(|v| v.policy == p.name).collect();
            match (violations.first(), &view.status) {
                (Some(v), _) => Verdict {
                    policy: p.name.clone(),
                    verdict: "violated",
                    detail: format!("seq {}: {} ({})", v.seq, v.message, v.response),
                },
                (None, Some(_)) => Verdict { policy: p.name.clone(), verdict: "held", detail: "the run ended without violating it".into() },
                (None, None) => {
                    Verdict { policy: p.name.clone(), verdict: "open", detail: "no violation so far; the run has not ended".into() }
                }
            }
        })
        .collect()
}

/// The declared limits and zones of the scopes a run of `workflow` meters:
/// `run` (the workflow's budget), `agent.NAME`, `node.NAME`.
pub fn scope_limits(program: &Program, workflow: &Workflow) -> BTreeMap<String, ScopeLimits> {
    let mut out = BTreeMap::new();
    let mut add = |scope: String, budget: Option<Budget<'_>>| {
        if let Some(b) = budget {
            let limits = flow_check::view::MEASURES.iter().filter_map(|m| b.limit(m).map(|l| (*m, l))).filter(|(_, l)| *l > 0.0).collect();
            let zones = b.zones.iter().map(|z| (z.zone.to_string(), z.below)).collect();
            out.insert(scope, ScopeLimits { limits, zones });
        }
    };
    add("run".into(), workflow.budget(program));
    for (name, decl) in &program.decls {
        if decl.kind == flow_check::spec::Kind::Agent {
            add(format!("agent.{name}"), decl.budget(program));
        }
    }
    for node in workflow.nodes.values() {
        add(format!("node.{}", node.name), node.budget(program));
    }
    out
}

#[cfg(test)]
mod tests;
