//! Runs exported as OpenTelemetry spans: live, as `flow run` and `flow
//! resume` go (`--otlp URL` or the standard `OTEL_*` variables), or
//! afterwards from a run directory (`flow export RUN --otlp URL`). An
//! export never blocks or fails a run: a receiver that is down is a
//! warning, and its spans are dropped.

use flow_otel::{Exporter, Mapper, OtlpConfig, Report};
use flow_runtime::driver::Options;
use flow_trace::Event;
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long `flow` waits for the last spans to be sent before it exits.
const FLUSH: Duration = Duration::from_secs(15);

fn warn(quiet: bool) -> flow_otel::export::Warn {
    Arc::new(move |message: &str| {
        if !quiet {
            eprintln!("flow: warning: {message}");
        }
    })
}

/// The events already in a run directory's trace (none for a new run).
fn recorded(run_dir: &Path) -> Result<Vec<Event>, String> {
    let path = run_dir.join("trace.jsonl");
    match std::fs::read_to_string(&path) {
        Ok(text) => flow_trace::parse_jsonl(&text).map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// A mapper for run `run_id`: with the replies read from the run
/// directory's artifacts when message contents are asked for.
fn mapper(config: &OtlpConfig, run_dir: &Path, run_id: &str, agents: HashMap<String, String>) -> Mapper {
    let mapper = Mapper::new(run_id, agents);
    if !config.capture_content {
        return mapper;
    }
    let artifacts = run_dir.join("artifacts");
    mapper.with_contents(Box::new(move |reference| {
        let hex = reference.digest.strip_prefix("sha256:")?;
        if hex.len() < 3 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        std::fs::read_to_string(artifacts.join(&hex[..2]).join(format!("{hex}.json"))).ok()
    }))
}

/// The nodes' agents (node → agent) of every workflow of a program.
pub fn agents_of(program: &flow_check::ir::Program) -> HashMap<String, String> {
    program
        .workflows
        .values()
        .flat_map(|w| w.nodes.values())
        .filter(|n| n.kind() == flow_trace::NodeKind::Agent)
        .filter_map(|n| Some((n.name.clone(), n.target.first()?.clone())))
        .collect()
}

/// Exports the events `opts` observes from now on, when an export is
/// configured: the run's observer is wrapped, and the returned exporter is
/// finished with [`finish`] once the run stops. A resumed run's earlier
/// events are read first, so that the spans they opened close as one.
pub fn attach(
    opts: &mut Options,
    url: Option<&str>,
    agents: HashMap<String, String>,
    quiet: bool,
) -> Result<Option<Arc<Exporter>>, String> {
    let Some(config) = OtlpConfig::from_env(url)? else { return Ok(None) };
    let exporter = Arc::new(Exporter::start(&config, warn(quiet))?);
    if !quiet {
        eprintln!("flow: exporting spans to {}", config.endpoint);
    }
    let mut mapper: Option<Mapper> = None;
    let run_dir = opts.run_dir.clone();
    let make = move |run_id: &str| self::mapper(&config, &run_dir, run_id, agents.clone());
    for event in recorded(&opts.run_dir)? {
        mapper.get_or_insert_with(|| make(&event.run_id)).push(&event);
    }
    let mapper = Mutex::new(mapper);
    let mut display = opts.observer.take();
    let sending = exporter.clone();
    opts.observer = Some(Box::new(move |event: &Event| {
        if let Some(display) = &mut display {
            display(event);
        }
        let mut mapper = mapper.lock().unwrap_or_else(|p| p.into_inner());
        let spans = mapper.get_or_insert_with(|| make(&event.run_id)).push(event);
        sending.send(spans);
        sending.record(event);
    }));
    Ok(Some(exporter))
}

/// Sends the last spans (waiting a little) and says what was exported.
pub async fn finish(exporter: Option<Arc<Exporter>>, quiet: bool) {
    let Some(exporter) = exporter else { return };
    let Ok(exporter) = Arc::try_unwrap(exporter) else { return };
    let report = exporter.finish(FLUSH).await;
    say(&report, quiet);
}

fn say(report: &Report, quiet: bool) {
    if quiet {
        return;
    }
    match (&report.error, report.dropped) {
        (None, 0) => eprintln!("flow: exported {} spans", report.exported),
        (None, dropped) => eprintln!("flow: warning: exported {} spans, dropped {dropped} (the queue was full)", report.exported),
        (Some(_), dropped) => eprintln!("flow: warning: exported {} spans, dropped {dropped}", report.exported),
    }
}

/// `flow export RUN --otlp URL`: the run's spans from its trace, its open
/// spans closed at its last event. Exit 0 when every span was accepted.
pub async fn export(run_dir: &Path, url: Option<&str>) -> Result<Report, String> {
    let Some(config) = OtlpConfig::from_env(url)? else {
        return Err("no OTLP endpoint: give --otlp URL or set OTEL_EXPORTER_OTLP_ENDPOINT".into());
    };
    let events = recorded(run_dir)?;
    let Some(first) = events.first() else {
        return Err(format!("{} holds no trace (trace.jsonl)", run_dir.display()));
    };
    let mut mapper = mapper(&config, run_dir, &first.run_id, HashMap::new());
    let exporter = Exporter::start(&config, warn(true))?;
    for event in &events {
        exporter.send_waiting(mapper.push(event)).await;
        exporter.record(event);
    }
    exporter.send_waiting(mapper.finish()).await;
    let report = exporter.finish(FLUSH).await;
    eprintln!("flow: {} events of {} to {}", events.len(), first.run_id, config.endpoint);
    Ok(report)
}
