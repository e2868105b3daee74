//! Data-driven engine runs (`tests/runs/<case>/`): each case's workflow runs
//! in-process with the fake clock, an in-memory journal and its scripted
//! provider, and the events it records are held to `expected.timeline`,
//! one event per line. `FLOW_BLESS=1` writes the timelines (review the diff).
// Tests read their cases from the repository: the pure-core lint does not apply.
#![allow(clippy::disallowed_methods)]

use flow_check::plan::Plan;
use flow_runtime::clock::FakeClock;
use flow_runtime::driver::{self, Options};
use flow_tests::repo_root;
use flow_trace::Event;
use serde_json::Value;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// One line of a timeline: `seq ← parent producer kind payload`, with the
/// lease owner (host and process) and the plan's digests (they cover the
/// sources' paths) left out.
fn line(event: &Event) -> String {
    let mut json = serde_json::to_value(event).expect("an event serialises");
    let mut payload = json.get_mut("payload").map(Value::take).unwrap_or(Value::Null);
    if let Some(p) = payload.as_object_mut() {
        p.shift_remove("schema_version");
        for (key, blank) in [("owner", "OWNER"), ("plan_digest", "PLAN"), ("plan_content_digest", "PLAN")] {
            if p.contains_key(key) {
                p.insert(key.into(), Value::String(blank.into()));
            }
        }
    }
    let parent = event.parent_event_id.as_deref().and_then(|p| p.rsplit_once('/')).map_or("-", |(_, seq)| seq);
    format!("{:>3} ← {parent:<3} {} {} {payload}", event.seq, event.producer, event.kind())
}

/// Runs the case in `dir`: its timeline, or why it did not run.
fn run_case(dir: &Path) -> Result<String, String> {
    let mut db = flow_diagnostics::SourceDb::new();
    let compiled = flow_pipeline::compile_file(&mut db, &dir.join("case.flow"), flow_pipeline::Depth::Static)?;
    if compiled.has_errors() {
        return Err(flow_diagnostics::render::render_human(&db, &compiled.diagnostics));
    }
    let plan = Plan::new(compiled.checked.program.clone(), &compiled.digest, &compiled.sources(&db));
    let input = match std::fs::read_to_string(dir.join("input.json")) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| format!("input.json: {e}"))?,
        Err(_) => Value::Null,
    };
    let lines = Arc::new(Mutex::new(Vec::new()));
    let mut opts = Options::new(dir.join("run"), Arc::new(FakeClock::new(FakeClock::DEFAULT_START)));
    opts.in_memory = true;
    opts.write_trace = false;
    let sink = lines.clone();
    opts.observer = Some(Box::new(move |event: &Event| sink.lock().expect("timeline").push(line(event))));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    runtime.block_on(driver::run(&plan, None, input, dir, "case", opts)).map_err(|e| e.to_string())?;
    let lines = lines.lock().expect("timeline").join("\n");
    Ok(lines + "\n")
}

#[test]
fn engine_runs_match_their_timelines() {
    let bless = std::env::var_os("FLOW_BLESS").is_some();
    let root = repo_root().join("tests/runs");
    let mut cases: Vec<_> = std::fs::read_dir(&root).expect("tests/runs").flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect();
    cases.sort();
    assert!(cases.len() >= 8, "only {} cases under tests/runs", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy().to_string();
        let timeline = match run_case(case) {
            Ok(t) => t,
            Err(e) => {
                failures.push(format!("{name}: did not run: {e}"));
                continue;
            }
        };
        let expected_path = case.join("expected.timeline");
        if bless {
            std::fs::write(&expected_path, &timeline).expect("write expected.timeline");
            continue;
        }
        match std::fs::read_to_string(&expected_path) {
            Ok(expected) if expected == timeline => {}
            Ok(expected) => {
                failures.push(format!("{name}: the run differs from expected.timeline\n--- expected\n{expected}--- actual\n{timeline}"))
            }
            Err(_) => failures.push(format!("{name}: no expected.timeline (run with FLOW_BLESS=1)")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn a_timeline_line_names_seq_parent_producer_kind_and_payload() {
    let event = flow_trace::event_from_str(
        r#"{"run_id":"r","execution_id":"e","seq":2,"event_id":"r/2","parent_event_id":"r/1","producer":"control","kind":"lease_granted","payload":{"schema_version":1,"attempt_id":"a#1.1","lease":"lease:a#1.1","owner":"host-9","expires_at":"2026-01-01T00:00:30.000Z"},"time":"2026-01-01T00:00:00.000Z"}"#,
    )
    .expect("the event parses");
    assert_eq!(
        line(&event),
        r#"  2 ← 1   control lease_granted {"attempt_id":"a#1.1","lease":"lease:a#1.1","owner":"OWNER","expires_at":"2026-01-01T00:00:30.000Z"}"#
    );
}
