//! Every example runs offline with no flags: exit 0, a successful
//! termination, and a trace valid against the published schema with `seq`
//! 1..n. (`short_video` runs real ffmpeg and ffprobe.)
#![allow(clippy::disallowed_methods)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

fn examples() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo().join("examples"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            e.path().join(format!("{name}.flow"))
        })
        .filter(|p| p.exists())
        .collect();
    files.sort();
    files
}

#[test]
fn every_example_runs_offline_with_no_flags() {
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(repo().join("stdlib/schemas/trace-event.schema.json")).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let files = examples();
    assert!(files.len() >= 6, "examples missing: {files:?}");
    let mut failures = Vec::new();
    for file in &files {
        let cwd = tempfile::tempdir().unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_flow")).arg("run").arg(file).current_dir(cwd.path()).output().unwrap();
        let name = file.file_stem().unwrap().to_string_lossy().to_string();
        if !out.status.success() {
            failures.push(format!("{name}: exit {:?}\n{}", out.status.code(), String::from_utf8_lossy(&out.stderr)));
            continue;
        }
        let runs: Vec<_> = std::fs::read_dir(cwd.path().join(".flow/runs")).unwrap().filter_map(|e| e.ok()).collect();
        assert_eq!(runs.len(), 1, "{name}: one run directory");
        let trace = std::fs::read_to_string(runs[0].path().join("trace.jsonl")).unwrap();
        let events: Vec<Value> = trace.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        for (i, event) in events.iter().enumerate() {
            assert_eq!(event["seq"], (i + 1) as u64, "{name}: seq gap at line {}", i + 1);
            let errors: Vec<String> = validator.iter_errors(event).map(|e| e.to_string()).collect();
            assert!(errors.is_empty(), "{name}: event {} invalid: {errors:?}", i + 1);
        }
        let end = events.last().unwrap();
        assert_eq!(end["kind"], "run_terminated", "{name}");
        assert_eq!(end["payload"]["status"], "success", "{name}: {end}");
    }
    assert!(failures.is_empty(), "examples that did not run:\n{}", failures.join("\n"));
}
