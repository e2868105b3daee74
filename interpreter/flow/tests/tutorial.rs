//! docs/tutorial.md, as written: its flow, replies and input are taken from
//! the document, run (pause, approve, resume, success), checked against the
//! plan, and the shortcut of step 4 gives the witness the tutorial shows.
// Tests read and write files: the pure-core lint does not apply.
#![allow(clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The fenced blocks of the tutorial, by language, in order.
fn blocks(language: &str) -> Vec<String> {
    let text = std::fs::read_to_string(repo_root().join("docs/tutorial.md")).expect("docs/tutorial.md");
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim() == format!("```{language}") {
            let body: Vec<&str> = lines.by_ref().take_while(|l| !l.starts_with("```")).collect();
            out.push(body.join("\n") + "\n");
        }
    }
    out
}

fn flow(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flow")).args(args).current_dir(dir).env_remove("FLOW_CRASH_AFTER_SEQ").output().expect("flow runs")
}

fn all(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[test]
fn the_tutorial_runs_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let flows = blocks("flow");
    let hello = &flows[0];
    std::fs::write(d.join("hello.flow"), hello).unwrap();
    std::fs::write(d.join("hello.replies.yaml"), &blocks("yaml")[0]).unwrap();
    std::fs::write(d.join("hello.input.json"), &blocks("json")[0]).unwrap();

    // Step 3: pause at the editor, approve, resume, success.
    let run = flow(d, &["run", "hello.flow", "--run-dir", "run1", "--no-prompt"]);
    assert_eq!(run.status.code(), Some(4), "{}", all(&run));
    assert!(all(&run).contains("gate quality: PASS"), "{}", all(&run));
    let approve = flow(d, &["approve", "run1", "approve", "--decision", "approve", "--by", "editor"]);
    assert_eq!(approve.status.code(), Some(0), "{}", all(&approve));
    // `confirm: true`: the publish call itself is confirmed too.
    let resume = flow(d, &["resume", "run1"]);
    assert_eq!(resume.status.code(), Some(4), "{}", all(&resume));
    assert!(all(&resume).contains("decision needed on confirm.publish_post.publish#1.1"), "{}", all(&resume));
    let confirm = flow(d, &["approve", "run1", "confirm.publish_post.publish#1.1", "--decision", "approve", "--by", "editor"]);
    assert_eq!(confirm.status.code(), Some(0), "{}", all(&confirm));
    let resume = flow(d, &["resume", "run1"]);
    assert_eq!(resume.status.code(), Some(0), "{}", all(&resume));
    assert!(all(&resume).contains("terminated: success (published)"), "{}", all(&resume));
    let check = flow(d, &["trace", "check", "run1", "--plan", "hello.flow"]);
    assert_eq!(check.status.code(), Some(0), "{}", all(&check));
    assert!(all(&check).contains("holds     approved_first"), "{}", all(&check));

    // Step 4: the shortcut, placed as the tutorial says; its witness.
    let shortcut = flows[1].lines().filter(|l| !l.starts_with("// fragment")).collect::<Vec<_>>().join("\n") + "\n";
    let broken = hello.replacen("  draft -> review -> approve\n", &format!("{shortcut}  draft -> review -> approve\n"), 1);
    assert_ne!(&broken, hello, "the shortcut goes before `draft -> review -> approve`");
    std::fs::write(d.join("hello.flow"), &broken).unwrap();
    let program = {
        let mut db = flow_diagnostics::SourceDb::new();
        let root = db.add("hello.flow", broken.clone());
        let checked = flow_check::check_program(&mut db, root, &flow_pipeline::FsLoader);
        assert!(!checked.has_errors());
        checked.program
    };
    let reports = flow_verify::policies::check_policies(&program, "sha256:t", flow_verify::policies::DEFAULT_MAX_STATES);
    let report = reports.iter().find(|r| r.name == "approved_first").unwrap();
    assert_eq!(report.status, "violated");
    let steps: Vec<&str> = report.witness.as_ref().unwrap().steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(steps, ["draft", "draft", "review", "review", "publish"], "the witness the tutorial shows");
    // As `flowc verify --witness-dir` writes it: chained.
    std::fs::write(d.join("witness.jsonl"), flow_trace::chain::to_jsonl(&report.events).unwrap()).unwrap();
    let check = flow(d, &["trace", "check", "witness.jsonl", "--plan", "hello.flow"]);
    assert_eq!(check.status.code(), Some(1));
    assert!(all(&check).contains("T050 seq 12: policy `approved_first` is violated at this event"), "{}", all(&check));
}
