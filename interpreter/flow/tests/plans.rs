//! `flow run PLAN.json`: a plan is what was verified. A plan built by
//! `flowc build` runs exactly as its source does, from anywhere (its
//! scripts, input and cassette are found beside the source); a plan edited
//! since it was built, or failing the static checks, is refused with exit
//! 6; a run records the digest of the plan it executed.
#![allow(clippy::disallowed_methods)]

mod common;
use common::*;

use flow_check::plan::Plan;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `flow run`'s exit status for a refused plan.
const PLAN_REFUSED: i32 = 6;

/// Every example (`examples/NAME/NAME.flow`; broken twins aside).
fn examples() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo().join("examples"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path().join(format!("{}.flow", e.file_name().to_string_lossy())))
        .filter(|p| p.exists())
        .collect();
    files.sort();
    files
}

/// Builds `source` into `plan_file` as `flowc build` does.
fn build(source: &Path, plan_file: &Path) -> Plan {
    std::fs::create_dir_all(plan_file.parent().unwrap()).unwrap();
    let plan = flow_tests::build_plan(source, plan_file);
    std::fs::write(plan_file, flow_tests::plan_text(&plan)).unwrap();
    plan
}

/// `flow run FILE` with a fixed run id and the fake clock: exit code and events.
fn run(file: &Path, cwd: &Path, run_dir: &Path, extra: &[&str]) -> (Option<i32>, Vec<Value>) {
    let mut args = vec!["run", file.to_str().unwrap(), "--run-dir", run_dir.to_str().unwrap(), "--run-id", "r", "--fake-clock", "-q"];
    args.push("--no-prompt");
    args.extend_from_slice(extra);
    let out = flow(&args, cwd);
    assert!(run_dir.join("trace.jsonl").exists(), "{}: no trace\n{}", file.display(), text(&out));
    (out.status.code(), events(run_dir))
}

/// An event without what may differ between two runs of the same plan:
/// the digests of the plan (its content is another file's), times, the
/// lease owner (a process id) and measured durations.
fn normalised(event: &Value) -> Value {
    let mut event = event.clone();
    event.as_object_mut().unwrap().remove("time");
    // The chain digests the lines, times and plan digests included.
    event.as_object_mut().unwrap().remove("prev");
    if let Some(payload) = event["payload"].as_object_mut() {
        for field in ["plan_content_digest", "owner", "expires_at", "duration_ms"] {
            payload.remove(field);
        }
    }
    event
}

/// What a run did, per attempt (else node, gate, the node an edge or a
/// transfer goes to, else the run): the kinds of its events in order.
/// Parallel branches interleave differently from run to run (which one
/// completes a join, too); within one attempt the order is fixed.
fn fingerprint(events: &[Value]) -> BTreeMap<String, Vec<String>> {
    let mut by: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in events {
        let p = &e["payload"];
        let key = ["attempt_id", "node", "gate", "to", "from"]
            .iter()
            .find_map(|k| p[*k].as_str().map(|v| format!("{k} {v}")))
            .unwrap_or_else(|| "run".to_string());
        by.entry(key).or_default().push(e["kind"].as_str().unwrap().to_string());
    }
    by
}

/// The two runs are the same run: every event alike (but for the fields
/// [`normalised`] drops) or, where parallel branches interleave, the
/// same events per attempt and node, and the same end.
fn assert_same_run(name: &str, source: &[Value], plan: &[Value]) {
    assert_eq!(source.len(), plan.len(), "{name}: the plan's run has another number of events");
    assert_eq!(plan.last().unwrap()["kind"], "run_terminated", "{name}");
    assert_eq!(normalised(source.last().unwrap()), normalised(plan.last().unwrap()), "{name}: another end");
    let (a, b): (Vec<Value>, Vec<Value>) = (source.iter().map(normalised).collect(), plan.iter().map(normalised).collect());
    if a != b {
        assert_eq!(fingerprint(source), fingerprint(plan), "{name}: the plan's run differs from the source's");
    }
}

#[test]
fn a_built_plan_runs_like_its_source_from_anywhere() {
    let files = examples();
    assert!(files.len() >= 6, "examples missing: {files:?}");
    let scratch = tempfile::tempdir().unwrap();
    for (i, file) in files.iter().enumerate() {
        let name = file.file_stem().unwrap().to_string_lossy().to_string();
        let plan_file = scratch.path().join("deploy").join(format!("{name}.json"));
        let plan = build(file, &plan_file);
        let elsewhere = tempfile::tempdir().unwrap();
        let (code, source_run) = run(file, elsewhere.path(), &scratch.path().join(format!("{name}.source")), &[]);
        assert_eq!(code, Some(0), "{name}: the source's run");
        // From another directory, or from the example's own.
        let cwd = if i % 2 == 0 { elsewhere.path().to_path_buf() } else { file.parent().unwrap().to_path_buf() };
        let (code, plan_run) = run(&plan_file, &cwd, &scratch.path().join(format!("{name}.plan")), &[]);
        assert_eq!(code, Some(0), "{name}: the plan's run, from {}", cwd.display());
        assert_same_run(&name, &source_run, &plan_run);
        // The run records the plan it executed, and the sources verified.
        let started = &plan_run[0]["payload"];
        assert_eq!(started["plan_content_digest"], plan.content_digest.as_str(), "{name}");
        assert_eq!(started["plan_digest"], plan.source.digest.as_str(), "{name}");
        assert_eq!(source_run[0]["payload"]["plan_digest"], plan.source.digest.as_str(), "{name}: another source digest");
        // Replaying the example's cassette only: no miss, the same run.
        let cassette = file.with_extension("cassette.yaml");
        if cassette.exists() {
            let replay = ["--replay", cassette.to_str().unwrap()];
            let (code, source_replayed) = run(file, elsewhere.path(), &scratch.path().join(format!("{name}.source-replay")), &replay);
            assert_eq!(code, Some(0), "{name}: --replay of its own cassette");
            let (code, plan_replayed) = run(&plan_file, &cwd, &scratch.path().join(format!("{name}.plan-replay")), &replay);
            assert_eq!(code, Some(0), "{name}: the plan with --replay of the example's cassette");
            assert_same_run(&name, &source_run, &source_replayed);
            assert_same_run(&name, &source_run, &plan_replayed);
        }
    }
}

#[test]
fn a_plan_built_as_yaml_runs_like_its_json_twin() {
    let scratch = tempfile::tempdir().unwrap();
    let source = repo().join("examples/research_writer/research_writer.flow");
    let plan = build(&source, &scratch.path().join("deploy/research_writer.json"));
    // What `flowc build --emit yaml` writes.
    let yaml_file = scratch.path().join("deploy/research_writer.yaml");
    std::fs::write(&yaml_file, serde_yaml::to_string(&plan).unwrap()).unwrap();
    let (code, json_run) = run(&scratch.path().join("deploy/research_writer.json"), scratch.path(), &scratch.path().join("json"), &[]);
    assert_eq!(code, Some(0));
    let (code, yaml_run) = run(&yaml_file, scratch.path(), &scratch.path().join("yaml"), &[]);
    assert_eq!(code, Some(0), "the YAML plan's run");
    assert_same_run("research_writer", &json_run, &yaml_run);
    assert_eq!(yaml_run[0]["payload"]["plan_content_digest"], plan.content_digest.as_str());
}

/// The research_writer example built into a scratch directory.
fn research_writer_plan(dir: &Path) -> (PathBuf, Plan, Value) {
    let plan_file = dir.join("plans/research_writer.json");
    let plan = build(&repo().join("examples/research_writer/research_writer.flow"), &plan_file);
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&plan_file).unwrap()).unwrap();
    (plan_file, plan, json)
}

#[test]
fn a_plan_edited_after_it_was_built_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (plan_file, plan, mut json) = research_writer_plan(dir.path());
    // Drop the evidence gate, keep the digest.
    let gates = json["program"]["workflows"]["research_writer"]["gates"].as_object_mut().unwrap();
    assert!(gates.remove("evidence_gate").is_some());
    let tampered = dir.path().join("plans/tampered.json");
    std::fs::write(&tampered, serde_json::to_string_pretty(&json).unwrap()).unwrap();
    let run_dir = dir.path().join("run");
    let out = flow(&["run", tampered.to_str().unwrap(), "--run-dir", run_dir.to_str().unwrap(), "-q"], dir.path());
    assert_eq!(out.status.code(), Some(PLAN_REFUSED), "{}", text(&out));
    let message = text(&out);
    assert!(message.contains("its content does not match its digest"), "{message}");
    assert!(message.contains(&plan.content_digest), "{message}");
    assert!(!run_dir.exists(), "a refused plan started a run");
    // Nor is it a plan to check traces against.
    let source_run = dir.path().join("source-run");
    let file = repo().join("examples/research_writer/research_writer.flow");
    run(&file, dir.path(), &source_run, &[]);
    let check = flow(&["trace", "check", source_run.to_str().unwrap(), "--plan", tampered.to_str().unwrap()], dir.path());
    assert_eq!(check.status.code(), Some(2), "{}", text(&check));
    // A plan without a digest is refused too.
    json.as_object_mut().unwrap().remove("content_digest");
    let unsealed = dir.path().join("plans/unsealed.json");
    std::fs::write(&unsealed, serde_json::to_string(&json).unwrap()).unwrap();
    let out = flow(&["run", unsealed.to_str().unwrap(), "-q"], dir.path());
    assert_eq!(out.status.code(), Some(PLAN_REFUSED), "{}", text(&out));
    assert!(text(&out).contains("records no content digest"), "{}", text(&out));
    // The plan as built, even re-indented, runs.
    let plan_json: Value = serde_json::from_str(&std::fs::read_to_string(&plan_file).unwrap()).unwrap();
    let compact = dir.path().join("plans/compact.json");
    std::fs::write(&compact, serde_json::to_string(&plan_json).unwrap()).unwrap();
    let (code, _) = run(&compact, dir.path(), &dir.path().join("compact-run"), &[]);
    assert_eq!(code, Some(0));
}

#[test]
fn a_sealed_plan_that_fails_the_static_checks_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (_, mut plan, _) = research_writer_plan(dir.path());
    // Drop the evidence gate and seal the plan again: its digest holds, but
    // the planner can now run on evidence no gate passed (the policy
    // `outline_after_evidence` is violated): not a plan flowc would write.
    let program = Arc::make_mut(&mut plan.program);
    assert!(program.workflows.get_mut("research_writer").unwrap().gates.shift_remove("evidence_gate").is_some());
    plan.seal();
    assert_eq!(plan.check_digest(), Ok(()));
    let resealed = dir.path().join("plans/resealed.json");
    std::fs::write(&resealed, flow_tests::plan_text(&plan)).unwrap();
    let run_dir = dir.path().join("run");
    let out = flow(&["run", resealed.to_str().unwrap(), "--run-dir", run_dir.to_str().unwrap(), "-q"], dir.path());
    assert_eq!(out.status.code(), Some(PLAN_REFUSED), "{}", text(&out));
    let message = text(&out);
    assert!(message.contains("the plan fails the static checks"), "{message}");
    assert!(message.contains("error[E1001]") && message.contains("outline_after_evidence"), "{message}");
    assert!(!run_dir.exists(), "a refused plan started a run");
    // `--unverified` runs it (the online monitor then watches the policy)…
    let out = flow(&["run", resealed.to_str().unwrap(), "--run-dir", run_dir.to_str().unwrap(), "-q", "--unverified"], dir.path());
    assert_ne!(out.status.code(), Some(PLAN_REFUSED), "{}", text(&out));
    assert!(run_dir.join("trace.jsonl").exists(), "{}", text(&out));
    // … but never a plan whose content does not match its digest.
    let mut tampered: Value = serde_json::from_str(&std::fs::read_to_string(&resealed).unwrap()).unwrap();
    tampered["program"]["workflows"]["research_writer"]["edges"].as_array_mut().unwrap().pop();
    let tampered_file = dir.path().join("plans/tampered.json");
    std::fs::write(&tampered_file, tampered.to_string()).unwrap();
    let out = flow(&["run", tampered_file.to_str().unwrap(), "-q", "--unverified"], dir.path());
    assert_eq!(out.status.code(), Some(PLAN_REFUSED), "{}", text(&out));
}

#[test]
fn a_run_records_the_digest_of_the_plan_it_executed() {
    let dir = tempfile::tempdir().unwrap();
    let (plan_file, plan, _) = research_writer_plan(dir.path());
    let run_dir = dir.path().join("run");
    let (code, started) = run(&plan_file, dir.path(), &run_dir, &[]);
    assert_eq!(code, Some(0));
    assert_eq!(started[0]["kind"], "run_started");
    assert_eq!(started[0]["payload"]["plan_content_digest"], plan.content_digest.as_str());
    let status = text(&flow(&["status", run_dir.to_str().unwrap()], dir.path()));
    assert!(status.contains(&format!("(plan {}, sources {})", plan.content_digest, plan.source.digest)), "{status}");
    // Resumed, the run still names the same plan (the journal keeps it).
    let resumed = flow(&["resume", run_dir.to_str().unwrap(), "-q", "--fake-clock"], dir.path());
    assert_eq!(resumed.status.code(), Some(0), "{}", text(&resumed));
    assert_eq!(events(&run_dir)[0]["payload"]["plan_content_digest"], plan.content_digest.as_str());
}
