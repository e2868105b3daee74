//! MuseCraft's media checks act on what is joined and published (issue
//! "Computed, not claimed"; seed 000): compose joins exactly the clips the
//! audio gate probed (no agent names another list), a standby repair is
//! probed again, and the final cut is probed before quality — with real
//! ffmpeg and ffprobe.
#![allow(clippy::disallowed_methods)]

mod common;
use common::*;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A copy of short_video (without its work/ output) and a silent clip
/// `work/NAME`, made with real ffmpeg.
fn example_with_silent(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let example = dir.path().join("short_video");
    copy_tree(&repo().join("examples/short_video"), &example);
    let _ = std::fs::remove_dir_all(example.join("work"));
    std::fs::create_dir_all(example.join("work")).unwrap();
    let made = Command::new("ffmpeg")
        .args(["-nostdin", "-y", "-loglevel", "error", "-f", "lavfi", "-i", "color=c=blue:s=160x90:d=1", "-c:v", "libx264"])
        .arg(example.join("work").join(name))
        .status()
        .expect("ffmpeg is installed");
    assert!(made.success());
    (dir, example)
}

/// Edits the scripted replies.
fn edit_script(example: &Path, edit: impl Fn(String) -> String) {
    let path = example.join("cassettes/short_video.yaml");
    let script = std::fs::read_to_string(&path).unwrap();
    let edited = edit(script.clone());
    assert_ne!(edited, script, "the edit changed nothing");
    std::fs::write(path, edited).unwrap();
}

/// Runs the example (exit `code`) and checks its trace; the events.
fn run_it(dir: &Path, code: i32) -> (PathBuf, Vec<Value>) {
    let run = dir.join("run");
    let out = flow(&["run", "short_video/short_video.flow", "--run-dir", run.to_str().unwrap(), "-q", "--no-prompt"], dir);
    assert_eq!(out.status.code(), Some(code), "{}", text(&out));
    let check = flow(&["trace", "check", run.to_str().unwrap(), "--plan", "short_video/short_video.flow"], dir);
    assert!(check.status.success(), "trace check: {}", text(&check));
    let events = events(&run);
    (run, events)
}

/// The producer rejects at `gate`; the resumed run fails (exit 1) and its
/// trace checks; its events.
fn reject_at(dir: &Path, run: &Path, gate: &str) -> Vec<Value> {
    let rd = run.to_str().unwrap();
    let reject = flow(&["approve", rd, gate, "--decision", "reject"], dir);
    assert!(reject.status.success(), "{}", text(&reject));
    let resumed = flow(&["resume", rd, "-q", "--no-prompt"], dir);
    assert_eq!(resumed.status.code(), Some(1), "{}", text(&resumed));
    let check = flow(&["trace", "check", rd, "--plan", "short_video/short_video.flow"], dir);
    assert!(check.status.success(), "trace check: {}", text(&check));
    events(run)
}

fn artifact(run: &Path, reference: &Value) -> Value {
    let hex = reference["digest"].as_str().unwrap().trim_start_matches("sha256:").to_string();
    serde_json::from_str(&std::fs::read_to_string(run.join("artifacts").join(&hex[..2]).join(format!("{hex}.json"))).unwrap()).unwrap()
}

fn started(events: &[Value], node: &str) -> bool {
    events.iter().any(|e| e["kind"] == "node_started" && e["payload"]["node"] == node)
}

fn gate<'e>(events: &'e [Value], name: &str) -> &'e Value {
    events.iter().find(|e| e["kind"] == "gate_recorded" && e["payload"]["gate"] == name).unwrap_or_else(|| panic!("gate {name} ran"))
}

fn has_audio(file: &Path) -> bool {
    let out = Command::new("ffprobe")
        .args(["-v", "error", "-select_streams", "a", "-show_entries", "stream=codec_type", "-of", "csv=p=0"])
        .arg(file)
        .output()
        .expect("ffprobe is installed");
    String::from_utf8_lossy(&out.stdout).contains("audio")
}

#[test]
fn compose_joins_exactly_the_clips_the_audio_gate_probed() {
    let (dir, example) = example_with_silent("unused.mp4");
    let (run, events) = run_it(dir.path(), 0);
    assert_eq!(events.last().unwrap()["payload"]["reason"], "published");
    let video = events.iter().find(|e| e["kind"] == "node_completed" && e["payload"]["node"] == "video").unwrap();
    let probed: Vec<Value> =
        artifact(&run, &video["payload"]["output"])["scenes"].as_array().unwrap().iter().map(|s| s["path"].clone()).collect();
    assert_eq!(gate(&events, "workflow_video_audio_delivery")["payload"]["outcome"], "PASS");
    let call = events.iter().find(|e| e["kind"] == "tool_call_started" && e["payload"]["tool"] == "concat_scenes").expect("compose called");
    let input = artifact(&run, &call["payload"]["input"]);
    assert_eq!(input["clips"].as_array().unwrap(), &probed, "compose joins what the gate probed");
    // The final cut was probed, and it has sound.
    assert_eq!(gate(&events, "final_cut_delivery")["payload"]["outcome"], "PASS");
    assert!(has_audio(&example.join("work/cut.mp4")));
}

#[test]
fn a_standby_repair_that_is_still_silent_never_reaches_compose() {
    let (dir, example) = example_with_silent("silent_2.mp4");
    let good = "{ scene_id: s2, path: work/scene_2.mp4, seconds: 1.024 }";
    let silent = "{ scene_id: s2, path: work/silent_2.mp4, seconds: 1.0 }";
    edit_script(&example, |script| {
        // The video agent delivers a silent scene 2; the standby "repair"
        // hands the same silent clip back.
        script.replace(good, silent)
            + "  standby_audio:\n"
            + "  - output:\n"
            + "      scenes:\n"
            + "      - { scene_id: s1, path: work/scene_1.mp4, seconds: 1.024 }\n"
            + "      - { scene_id: s2, path: work/silent_2.mp4, seconds: 1.0 }\n"
            + "      - { scene_id: s3, path: work/scene_3.mp4, seconds: 1.024 }\n"
    });
    let run = dir.path().join("run");
    let rd = run.to_str().unwrap();
    let out = flow(&["run", "short_video/short_video.flow", "--run-dir", rd, "-q", "--no-prompt"], dir.path());
    assert_eq!(out.status.code(), Some(4), "awaiting the producer: {}", text(&out));
    let approve = flow(&["approve", rd, "workflow_video_audio_delivery", "--decision", "replan"], dir.path());
    assert!(approve.status.success(), "{}", text(&approve));
    // The repair is probed again: still silent, so the producer is asked
    // again, and rejects.
    let resumed = flow(&["resume", rd, "-q", "--no-prompt"], dir.path());
    assert_eq!(resumed.status.code(), Some(4), "{}", text(&resumed));
    let standby = gate(&events(&run), "standby_audio_delivery").clone();
    assert_eq!(standby["payload"]["outcome"], "REQUIRES_DECISION", "{standby}");
    let audio = standby["payload"]["evaluators"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["evaluator"] == "audio_present(standby_audio.scenes)")
        .cloned();
    assert_eq!(audio.unwrap()["outcome"], "REQUIRES_DECISION");
    let events = reject_at(dir.path(), &run, "standby_audio_delivery");
    assert_eq!(events.last().unwrap()["payload"]["reason"], "audio_missing_or_unknown");
    assert!(started(&events, "standby_audio"));
    assert!(!started(&events, "compose"), "the silent repair never reaches compose");
}

#[test]
fn a_silent_final_cut_is_not_published() {
    // The sound mixer reports a cut with no audio stream: the probe, not
    // the agent, finds it; the producer is asked and rejects; quality never
    // runs.
    let (dir, example) = example_with_silent("silent_cut.mp4");
    edit_script(&example, |script| script.replacen("      path: work/cut.mp4\n", "      path: work/silent_cut.mp4\n", 1));
    let (run, _) = run_it(dir.path(), 4);
    let events = reject_at(dir.path(), &run, "final_cut_delivery");
    let last = &events.last().unwrap()["payload"];
    assert_eq!((last["reason"].as_str(), last["status"].as_str()), (Some("final_cut_failed"), Some("failure")));
    let final_cut = gate(&events, "final_cut_delivery");
    assert_eq!(final_cut["payload"]["outcome"], "REQUIRES_DECISION", "{final_cut}");
    let audio = final_cut["payload"]["evaluators"].as_array().unwrap().iter().find(|e| e["evaluator"] == "audio_present(audio)").unwrap();
    assert_eq!(audio["outcome"], "REQUIRES_DECISION");
    assert!(!started(&events, "quality"));
}
