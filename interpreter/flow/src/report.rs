//! `flow status` and `flow show`: a run read from its journal, as text for
//! people or as one JSON document (`--format json`) for scripts.

use crate::{fail, load, Format};
use flow_runtime::driver::{self, exit};
use flow_trace::{Body, Event};
use serde_json::{json, Value};

/// The version of the JSON documents of `flow status` and `flow show`.
pub const REPORT_VERSION: u32 = 1;

/// What `flow status` says about a run.
struct Summary {
    workflow: Option<String>,
    plan: Option<String>,
    sources: Option<String>,
    /// `running`, `paused` or `terminated`.
    state: &'static str,
    status: Option<String>,
    reason: Option<String>,
    waiting_on: Option<String>,
    done: Vec<String>,
    failed: Vec<(String, String)>,
    tokens: u64,
    /// The split of `tokens` the providers reported.
    input_tokens: u64,
    output_tokens: u64,
    tool_calls: u64,
    cost: f64,
    code: u8,
}

fn summarize(events: &[Event]) -> Summary {
    let mut s = Summary {
        workflow: None,
        plan: None,
        sources: None,
        state: "running",
        status: None,
        reason: None,
        waiting_on: None,
        done: Vec::new(),
        failed: Vec::new(),
        tokens: 0,
        input_tokens: 0,
        output_tokens: 0,
        tool_calls: 0,
        cost: 0.0,
        code: exit::SUCCESS,
    };
    for event in events {
        match &event.body {
            Body::RunStarted { workflow, plan_digest, plan_content_digest, .. } => {
                s.workflow = Some(workflow.clone());
                s.plan = plan_content_digest.clone();
                s.sources = Some(plan_digest.clone());
            }
            Body::NodeCompleted { node, .. } => s.done.push(node.clone()),
            Body::NodeFailed { node, error_code, .. } => s.failed.push((node.clone(), error_code.to_string())),
            Body::AgentTurn { usage, input_tokens, output_tokens, .. } => {
                s.tokens += usage.tokens;
                s.input_tokens += input_tokens.unwrap_or(0);
                s.output_tokens += output_tokens.unwrap_or(0);
                s.cost += usage.cost;
            }
            Body::ToolCallCompleted { .. } => s.tool_calls += 1,
            Body::RunPaused { reason, waiting_on, .. } => {
                (s.state, s.reason, s.waiting_on) = ("paused", Some(reason.to_string()), Some(waiting_on.to_string()));
                s.code = exit::AWAITING_DECISION;
            }
            Body::RunResumed { .. } => (s.state, s.reason, s.waiting_on) = ("running", None, None),
            Body::RunTerminated { reason, status, .. } => {
                (s.state, s.status, s.reason) = ("terminated", Some(status.to_string()), Some(reason.to_string()));
                s.code = if *status == flow_trace::TerminationStatus::Success { exit::SUCCESS } else { exit::FAILED };
            }
            _ => {}
        }
    }
    s
}

pub use flow_report::money;

pub fn status(run: &str, format: Format) -> u8 {
    let (dir, run_id, events, journal) = match load(run) {
        Ok(x) => x,
        Err(e) => return fail(e),
    };
    let s = summarize(&events);
    let pending = driver::pending_decisions(journal.as_ref(), &run_id).unwrap_or_default();
    if format == Format::Json {
        let document = json!({
            "version": REPORT_VERSION,
            "run_id": run_id,
            "dir": dir.display().to_string(),
            "workflow": s.workflow,
            "plan": s.plan,
            "sources": s.sources,
            "state": s.state,
            "status": s.status,
            "reason": s.reason,
            "waiting_on": s.waiting_on,
            "events": events.len(),
            "nodes_completed": s.done,
            "nodes_failed": s.failed.iter().map(|(node, code)| json!({ "node": node, "error_code": code })).collect::<Vec<_>>(),
            "used": {
                "tokens": s.tokens,
                "input_tokens": s.input_tokens,
                "output_tokens": s.output_tokens,
                "tool_calls": s.tool_calls,
                "cost": s.cost,
            },
            "pending_decisions": pending.iter().map(|p| json!({
                "subject": p.subject,
                "decisions": p.decisions.iter().map(|d| d.to_string()).collect::<Vec<_>>(),
                "deciders": p.deciders,
                "expires_at": p.expires_at,
                "contacts": p.contacts,
            })).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&document).unwrap_or_default());
        return s.code;
    }
    println!("run {run_id} ({})", dir.display());
    match (&s.workflow, &s.plan, &s.sources) {
        (Some(workflow), Some(plan), Some(sources)) => println!("workflow {workflow} (plan {plan}, sources {sources})"),
        (Some(workflow), None, Some(sources)) => println!("workflow {workflow} (sources {sources})"),
        _ => {}
    }
    let state = match s.state {
        "paused" => format!("paused: {} ({})", s.reason.as_deref().unwrap_or(""), s.waiting_on.as_deref().unwrap_or("")),
        "terminated" => format!("terminated: {} ({})", s.status.as_deref().unwrap_or(""), s.reason.as_deref().unwrap_or("")),
        _ => "running or stopped mid-way (`flow resume` continues it)".to_string(),
    };
    println!("state: {state}");
    println!("events: {}", events.len());
    println!("nodes completed ({}): {}", s.done.len(), s.done.join(", "));
    if !s.failed.is_empty() {
        let failed: Vec<String> = s.failed.iter().map(|(node, code)| format!("{node} ({code})")).collect();
        println!("nodes failed: {}", failed.join(", "));
    }
    println!("used: {} tokens ({} in, {} out), {} tool calls, {}", s.tokens, s.input_tokens, s.output_tokens, s.tool_calls, money(s.cost));
    for p in pending {
        let mut deadline = p.expires_at.as_deref().map(|at| format!("; times out at {at}")).unwrap_or_default();
        if !p.contacts.is_empty() {
            deadline.push_str(&format!("; reach {}", p.contacts.join(", ")));
        }
        println!(
            "waiting for a decision on `{}`: {} (deciders: {}{deadline})",
            p.subject,
            flow_trace::join(&p.decisions, "/"),
            p.deciders.join(", ")
        );
    }
    s.code
}

/// One line of `flow show` for `event`, or `None` for events it skips.
fn line(event: &Event) -> Option<String> {
    Some(match &event.body {
        Body::RunStarted { workflow, .. } => format!("run started: workflow {workflow}"),
        Body::RunResumed { after_seq, .. } => format!("run resumed after event {after_seq} ({})", event.execution_id),
        Body::RunPaused { reason, waiting_on, .. } => format!("run paused: {reason} ({waiting_on})"),
        Body::RunTerminated { reason, status, .. } => format!("run terminated: {status} ({reason})"),
        Body::NodeStarted { node, node_kind, visit, .. } => format!("▶ {node} ({node_kind}, visit {visit})"),
        Body::NodeCompleted { node, status, .. } => format!("✓ {node} {status}"),
        Body::NodeFailed { node, error_code, message, .. } => format!("✗ {node} failed: {error_code}: {message}"),
        Body::AttemptStarted { attempt_id, trigger_reason, .. } => format!("  attempt {attempt_id} ({trigger_reason})"),
        Body::AttemptFailed { attempt_id, error_code, message, .. } => {
            format!("  attempt {attempt_id} failed: {error_code}: {message}")
        }
        Body::AgentTurn { agent, usage, error, .. } => {
            format!("  {agent}: turn, {} tokens{}", usage.tokens, error.as_ref().map(|e| format!(" — {e}")).unwrap_or_default())
        }
        Body::ToolCallStarted { tool, .. } => format!("  call {tool}"),
        Body::ToolCallRefused { tool, reason, .. } => format!("  {tool} refused: {reason}"),
        Body::ToolCallCompleted { tool, ok, error, .. } => {
            format!("  {tool} {}{}", if *ok { "ok" } else { "failed" }, error.as_ref().map(|e| format!(": {e}")).unwrap_or_default())
        }
        Body::GateRecorded { gate, outcome, reason, evaluators, .. } => {
            let mut s = format!("◆ gate {gate}: {outcome}{}", reason.as_ref().map(|r| format!(" ({r})")).unwrap_or_default());
            for e in evaluators {
                s.push_str(&format!("\n      {}: {}", e.evaluator, e.outcome));
            }
            s
        }
        Body::DecisionRequested { subject, decisions, .. } => format!("? decision on {subject}: {}", flow_trace::join(decisions, "/")),
        Body::DecisionApplied { subject, decision, by, action, .. } => format!("! {by} decided {decision} on {subject} → {action}"),
        Body::Handoff { from, to, accepted, .. } => format!("  handoff {from} → {to}{}", if *accepted { "" } else { " REFUSED" }),
        Body::DeadLetter { message_type, from, to, reason, .. } => format!("✉ dead letter {message_type} {from} → {to}: {reason}"),
        Body::EdgeTaken { from, to, via, .. } => format!("  {from} → {to} ({via})"),
        Body::ActionTaken { event, scope, action, .. } => format!("  on {event} in {scope}: {action}"),
        Body::Rerun { trigger, entry, superseded, .. } => format!("↺ {trigger} from {entry}: supersedes {}", superseded.join(", ")),
        Body::BudgetZoneChanged { scope, from, to, .. } => format!("  budget {scope}: {from} → {to}"),
        Body::BudgetExhausted { scope, limit, .. } => format!("  budget {scope}: {limit} exhausted"),
        Body::LeaseExpired { attempt_id, .. } => format!("  lease of {attempt_id} expired"),
        Body::ReconciliationRequired { attempt_id, tool, .. } => format!("  reconciliation: {tool} in {attempt_id}"),
        Body::StateChanged { machine, from, to, .. } => format!("  {machine}: {from} → {to}"),
        Body::Recorded { name, node, gate, values, errors, .. } => {
            let by = node.as_deref().map(|n| format!("node {n}")).or(gate.as_deref().map(|g| format!("gate {g}"))).unwrap_or_default();
            let mut s = format!("≡ record {name} by {by}: {}", Value::Object(values.clone()));
            for (field, why) in errors {
                s.push_str(&format!("\n      {field} not made: {why}"));
            }
            s
        }
        Body::Warning { message, .. } => format!("  warning: {message}"),
        Body::PolicyViolated { policy, response, offending, message, .. } => {
            format!("‼ policy {policy} violated by {offending} ({response}): {message}")
        }
        _ => return None,
    })
}

pub fn show(run: &str, format: Format) -> u8 {
    let (dir, run_id, events, _) = match load(run) {
        Ok(x) => x,
        Err(e) => return fail(e),
    };
    if format == Format::Json {
        // Every event, with the line a person would read beside it.
        let listed: Vec<Value> = events
            .iter()
            .map(|event| {
                let mut record = serde_json::to_value(event).unwrap_or(Value::Null);
                if let Value::Object(fields) = &mut record {
                    fields.insert("summary".into(), line(event).map_or(Value::Null, Value::from));
                }
                record
            })
            .collect();
        let document = json!({ "version": REPORT_VERSION, "run_id": run_id, "dir": dir.display().to_string(), "events": listed });
        println!("{}", serde_json::to_string_pretty(&document).unwrap_or_default());
        return exit::SUCCESS;
    }
    println!("run {run_id} ({}): {} events", dir.display(), events.len());
    for event in &events {
        if let Some(detail) = line(event) {
            println!("{:>5} {}  {detail}", event.seq, &event.time.get(11..23).unwrap_or(""));
        }
    }
    exit::SUCCESS
}

/// `flow report`: the run drawn on its plan (from the journal: its events
/// and the plan it ran), written to `output` (`-`: the standard output;
/// default: `report.html` in the run directory).
pub fn html(run: &str, output: Option<&std::path::Path>) -> u8 {
    let (dir, run_id, events, journal) = match load(run) {
        Ok(x) => x,
        Err(e) => return fail(e),
    };
    let plan = match driver::load_meta(journal.as_ref(), &run_id) {
        Ok((_, plan)) => plan,
        Err(e) => return fail(e),
    };
    let page = match flow_report::run_page(&plan.program, &events) {
        Ok(page) => page,
        Err(e) => return fail(driver::RunError::Usage(format!("cannot draw {}: {e}", dir.display()))),
    };
    let target = output.map_or_else(|| dir.join("report.html"), std::path::Path::to_path_buf);
    if target.as_os_str() == "-" {
        print!("{page}");
        return exit::SUCCESS;
    }
    match std::fs::write(&target, page) {
        Ok(()) => {
            eprintln!("flow: wrote {} ({} events of {run_id})", target.display(), events.len());
            exit::SUCCESS
        }
        Err(e) => fail(driver::RunError::Usage(format!("cannot write {}: {e}", target.display()))),
    }
}

#[cfg(test)]
mod tests {
    use super::money;

    #[test]
    fn small_costs_keep_their_digits() {
        assert_eq!(money(0.0), "$0");
        assert_eq!(money(1.5), "$1.5000");
        assert_eq!(money(0.0123), "$0.0123");
        assert_eq!(money(0.000042), "$0.0000420");
        assert_eq!(money(0.00000031), "$0.000000310");
    }
}
