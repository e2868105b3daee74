//! Every example runs offline with no flags: exit 0, a successful
//! termination, and a trace valid against the published schema with `seq`
//! 1..n. (`short_video` runs real ffmpeg and ffprobe.)
#![allow(clippy::disallowed_methods)]

mod common;
use common::*;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

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

/// Copies a directory tree (the example's sources, not its work/ output).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if name == "work" {
            continue;
        }
        let target = to.join(&name);
        if entry.path().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// short_video with a silent scene: the real ffprobe audio probe makes the
/// gate ask the producer; `reject` stops the run before compose, `replan`
/// activates the standby audio agent, which re-renders the scene, and the
/// run publishes.
#[test]
fn short_video_a_silent_scene_needs_a_decision() {
    for (decision, reason, composed) in [("reject", "audio_missing_or_unknown", false), ("replan", "published", true)] {
        let dir = tempfile::tempdir().unwrap();
        let example = dir.path().join("short_video");
        copy_tree(&repo().join("examples/short_video"), &example);
        // A clip with no audio stream, made with real ffmpeg.
        std::fs::create_dir_all(example.join("work")).unwrap();
        let made = Command::new("ffmpeg")
            .args(["-nostdin", "-y", "-loglevel", "error", "-f", "lavfi", "-i", "color=c=blue:s=160x90:d=1", "-c:v", "libx264"])
            .arg(example.join("work/silent_2.mp4"))
            .status()
            .expect("ffmpeg is installed");
        assert!(made.success());
        let script_path = example.join("cassettes/short_video.yaml");
        let script = std::fs::read_to_string(&script_path).unwrap();
        let good = "{ scene_id: s2, path: work/scene_2.mp4, seconds: 1.024 }";
        assert!(script.contains(good));
        let script = script.replace(good, "{ scene_id: s2, path: work/silent_2.mp4, seconds: 1.0 }")
            + "  standby_audio:\n"
            + "  - tool_call:\n"
            + "      tool: render_scene\n"
            + "      input: { scene_id: s2, image_path: assets/still_2.png, audio_path: assets/narration_2.m4a, seconds: 1, out_path: work/scene_2.mp4 }\n"
            + "  - output:\n"
            + "      scenes:\n"
            + "      - { scene_id: s1, path: work/scene_1.mp4, seconds: 1.024 }\n"
            + "      - { scene_id: s2, path: work/scene_2.mp4, seconds: 1.024 }\n"
            + "      - { scene_id: s3, path: work/scene_3.mp4, seconds: 1.024 }\n"
;
        std::fs::write(&script_path, script).unwrap();
        let run_dir = dir.path().join("run");
        let rd = run_dir.to_str().unwrap();
        let out = flow(&["run", "short_video/short_video.flow", "--run-dir", rd, "-q", "--no-prompt"], dir.path());
        assert_eq!(out.status.code(), Some(4), "awaiting the producer: {}", String::from_utf8_lossy(&out.stderr));
        let trace = std::fs::read_to_string(run_dir.join("trace.jsonl")).unwrap();
        let events: Vec<Value> = trace.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let gate = events.iter().find(|e| e["kind"] == "gate_recorded").unwrap();
        assert_eq!(gate["payload"]["outcome"], "REQUIRES_DECISION", "{gate}");
        let audio = gate["payload"]["evaluators"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["evaluator"].as_str().unwrap().starts_with("audio_present"))
            .unwrap();
        assert_eq!(audio["outcome"], "REQUIRES_DECISION");
        let approve = flow(&["approve", rd, "workflow_video_audio_delivery", "--decision", decision], dir.path());
        assert!(approve.status.success(), "{}", String::from_utf8_lossy(&approve.stderr));
        let resumed = flow(&["resume", rd, "-q", "--no-prompt"], dir.path());
        let trace = std::fs::read_to_string(run_dir.join("trace.jsonl")).unwrap();
        let events: Vec<Value> = trace.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let end = events.last().unwrap();
        assert_eq!(end["payload"]["reason"], reason, "{decision}: {}", String::from_utf8_lossy(&resumed.stderr));
        let compose_started = events.iter().any(|e| e["kind"] == "node_started" && e["payload"]["node"] == "compose");
        assert_eq!(compose_started, composed, "{decision}: compose started = {compose_started}");
        if composed {
            assert!(resumed.status.success());
            assert!(events.iter().any(|e| e["kind"] == "node_completed" && e["payload"]["node"] == "standby_audio"));
        }
    }
}
