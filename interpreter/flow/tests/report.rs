//! `flow report`: a run drawn on its plan as one HTML page, read from the
//! run's journal. (The page in a real browser: tests/browser.rs.)
#![allow(clippy::disallowed_methods)]

mod common;
use common::*;

#[test]
fn a_report_is_written_beside_the_run_or_where_asked() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let rd = run_dir.to_str().unwrap();
    let source = repo().join("examples/short_video/short_video.flow");
    let out = flow(&["run", source.to_str().unwrap(), "--run-dir", rd, "--quiet"], dir.path());
    assert!(out.status.success(), "{}", text(&out));
    // Default: report.html in the run directory.
    let out = flow(&["report", rd], dir.path());
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("report.html"), "{}", text(&out));
    let page = std::fs::read_to_string(run_dir.join("report.html")).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert_eq!(page.matches("<g class=\"node ").count(), 12, "every node of short_video's plan");
    assert!(page.contains(r#"class="gate outcome-PASS" data-gate="workflow_video_audio_delivery""#));
    assert!(page.contains(r#"data-node="rejected""#) && page.contains("st-not_run"), "the branch not taken is drawn as such");
    assert!(page.contains("<td class=\"verdict-held\">held</td>"));
    assert!(page.contains("<figure class=\"budget\" data-scope=\"run\">"), "the run's budget over time");
    // `-o -`: the standard output; `-o FILE`: that file.
    let out = flow(&["report", rd, "-o", "-"], dir.path());
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), page, "the same page, whatever the target");
    let elsewhere = dir.path().join("r.html");
    let out = flow(&["report", rd, "-o", elsewhere.to_str().unwrap()], dir.path());
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), page);
}

#[test]
fn a_paused_run_is_drawn_waiting_for_its_human() {
    let dir = fixtures();
    let run_dir = dir.path().join("run");
    let rd = run_dir.to_str().unwrap();
    let out = flow_env(&["run", "decide.flow", "--run-dir", rd, "--fake-clock", "--no-prompt"], dir.path(), &[]);
    assert_eq!(out.status.code(), Some(4), "awaiting decision: {}", text(&out));
    let out = flow(&["report", rd, "-o", "-"], dir.path());
    assert!(out.status.success(), "{}", text(&out));
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(page.contains("status-paused"), "the header says paused");
    assert!(page.contains("waiting on decision/review"), "and what it waits on");
    assert!(page.contains("class=\"wait\""), "the wait is on the timeline");
    assert!(page.contains("still waiting"));
    assert!(
        page.contains("class=\"verdict-open\"") || !page.contains("<table class=\"policies\">"),
        "no policy is called held before the run ends"
    );
}

#[test]
fn a_report_of_nothing_or_to_nowhere_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = flow(&["report", dir.path().join("no-such-run").to_str().unwrap()], dir.path());
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("no-such-run"), "{}", text(&out));
    let run_dir = dir.path().join("run");
    let rd = run_dir.to_str().unwrap();
    let source = repo().join("examples/research_writer/research_writer.flow");
    assert!(flow(&["run", source.to_str().unwrap(), "--run-dir", rd, "--quiet"], dir.path()).status.success());
    let out = flow(&["report", rd, "-o", dir.path().join("missing/dir/r.html").to_str().unwrap()], dir.path());
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("cannot write"), "{}", text(&out));
}
