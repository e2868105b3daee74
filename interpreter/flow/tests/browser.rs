//! `flow report` and the plan page (`flowc graph --format html`) loaded in
//! a real headless Chromium, started by `tests/report/run.sh` (which
//! installs the Debian `chromium` package and sets `FLOW_CHROMIUM`): each
//! page loads with no console message and no script error, its graph has
//! the plan's node count (read from the DOM), a link to a node opens its
//! details, and a screenshot is kept under `target/report-screenshots/`.
//! Not part of `cargo test --workspace`.
#![allow(clippy::disallowed_methods)]

mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::process::Command;

fn chromium() -> String {
    std::env::var("FLOW_CHROMIUM")
        .unwrap_or_else(|_| panic!("FLOW_CHROMIUM is not set: these tests need a real Chromium. Run `bash tests/report/run.sh`."))
}

/// Chromium's headless flags (a fresh profile per call, so calls do not
/// share a lock).
fn headless(profile: &Path) -> Vec<String> {
    ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars", "--enable-logging=stderr", "--v=0"]
        .iter()
        .map(|s| s.to_string())
        .chain([format!("--user-data-dir={}", profile.display())])
        .collect()
}

/// The DOM after load and what Chromium logged on the way.
fn load(url: &str, profile: &Path) -> (String, String) {
    let out = Command::new(chromium())
        .args(headless(profile))
        .args(["--virtual-time-budget=5000", "--dump-dom", url])
        .output()
        .expect("chromium starts");
    assert!(out.status.success(), "chromium failed on {url}: {}", String::from_utf8_lossy(&out.stderr));
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Console messages (errors, Content-Security-Policy refusals, logs): the
/// pages write none, so any is a fault.
fn console(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.contains(":CONSOLE")).collect()
}

fn attr<'d>(dom: &'d str, name: &str) -> Option<&'d str> {
    let body = &dom[dom.find("<body")?..];
    let body = &body[..body.find('>')?];
    let start = body.find(&format!("{name}=\""))? + name.len() + 2;
    Some(&body[start..start + body[start..].find('"')?])
}

/// Width and height of a PNG, from its IHDR chunk.
fn png_size(png: &[u8]) -> (u32, u32) {
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    let be = |at: usize| u32::from_be_bytes([png[at], png[at + 1], png[at + 2], png[at + 3]]);
    (be(16), be(20))
}

fn screenshot(page: &Path, name: &str, profile: &Path) -> PathBuf {
    let dir = repo().join("target/report-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    let png = dir.join(format!("{name}.png"));
    let _ = std::fs::remove_file(&png);
    let out = Command::new(chromium())
        .args(headless(profile))
        .args(["--window-size=1400,1800", &format!("--screenshot={}", png.display()), &format!("file://{}", page.display())])
        .output()
        .expect("chromium starts");
    assert!(out.status.success(), "chromium could not take {name}: {}", String::from_utf8_lossy(&out.stderr));
    let bytes = std::fs::read(&png).unwrap_or_else(|e| panic!("no screenshot {}: {e}", png.display()));
    assert_eq!(png_size(&bytes), (1400, 1800));
    // A blank page compresses to a few kilobytes; a drawn one does not.
    assert!(bytes.len() > 40_000, "{name}: the screenshot is nearly empty ({} bytes)", bytes.len());
    eprintln!("screenshot: {}", png.display());
    png
}

fn flowc() -> String {
    std::env::var("FLOW_FLOWC").unwrap_or_else(|_| panic!("FLOW_FLOWC is not set: run `bash tests/report/run.sh`"))
}

/// How many nodes `flowc graph --format json` finds in a one-workflow file.
fn plan_nodes(source: &Path) -> usize {
    let out = Command::new(flowc()).args(["graph", source.to_str().unwrap(), "--format", "json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let graph: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    graph["nodes"].as_array().expect("one workflow's nodes").len()
}

/// Runs an example, draws its report, and holds the page to the browser.
fn report_in_chromium(example: &str, nodes: usize, expect: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let flow_file = repo().join(format!("examples/{example}/{example}.flow"));
    assert_eq!(plan_nodes(&flow_file), nodes, "{example}'s plan");
    let out = flow(&["run", flow_file.to_str().unwrap(), "--run-dir", run_dir.to_str().unwrap(), "--quiet"], dir.path());
    assert!(out.status.success(), "{}", text(&out));
    let page = dir.path().join("report.html");
    let out = flow(&["report", run_dir.to_str().unwrap(), "-o", page.to_str().unwrap()], dir.path());
    assert!(out.status.success(), "{}", text(&out));
    let profile = dir.path().join("profile");
    let (dom, log) = load(&format!("file://{}", page.display()), &profile);
    assert_eq!(console(&log), Vec::<&str>::new(), "console messages on {example}'s report");
    assert_eq!(attr(&dom, "data-ready"), Some("1"), "the page's script did not finish");
    assert_eq!(attr(&dom, "data-errors"), Some(""), "script errors");
    assert_eq!(attr(&dom, "data-nodes"), Some(nodes.to_string().as_str()), "the graph's nodes, counted in the DOM");
    for needle in expect {
        assert!(dom.contains(needle), "{example}'s report lacks {needle}");
    }
    // A link to a node opens its details: attempts, artifacts, events.
    let (dom, log) = load(&format!("file://{}#node=synthesis", page.display()), &profile);
    assert!(console(&log).is_empty(), "{:?}", console(&log));
    if example == "decision_meeting" {
        let details = &dom[dom.find("id=\"details\"").expect("the details panel")..];
        assert!(!details.starts_with("id=\"details\" hidden"), "the details stayed hidden");
        assert!(
            details.contains("<h3>synthesis</h3>") && details.contains("Attempts") && details.contains("agent_turn"),
            "{}",
            &details[..details.len().min(2000)]
        );
    }
    screenshot(&page, example, &profile);
}

#[test]
fn the_decision_meetings_report_renders_with_its_path_rounds_and_policies() {
    // 14 nodes (the consensus check and the synthesis_decision end
    // included); three rounds; every policy held.
    report_in_chromium("decision_meeting", 14, &["loop · round 3/4", "round ×3", "class=\"verdict-held\"", "st-not_run"]);
}

#[test]
fn the_short_videos_report_renders_with_its_gate_and_budgets() {
    report_in_chromium("short_video", 12, &["workflow_video_audio_delivery: PASS", "audio_present(video.scenes)", "data-scope=\"run\""]);
}

#[test]
fn the_plan_page_renders_every_workflow() {
    let dir = tempfile::tempdir().unwrap();
    let source = repo().join("examples/research_writer/research_writer.flow");
    let out = Command::new(flowc()).args(["graph", source.to_str().unwrap(), "--format", "html"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let page = dir.path().join("plan.html");
    std::fs::write(&page, &out.stdout).unwrap();
    let (dom, log) = load(&format!("file://{}", page.display()), &dir.path().join("profile"));
    assert!(console(&log).is_empty(), "{:?}", console(&log));
    assert_eq!(attr(&dom, "data-ready"), Some("1"));
    assert_eq!(attr(&dom, "data-errors"), Some(""));
    let expected = plan_nodes(&source);
    assert_eq!(attr(&dom, "data-nodes"), Some(expected.to_string().as_str()));
    screenshot(&page, "research_writer.plan", &dir.path().join("profile"));
}
