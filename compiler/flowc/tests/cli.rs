//! The `flowc` command line: exit codes, the JSON shape of the contract,
//! `explain`.
// Tests read the repository's files: the pure-core lint does not apply.
#![allow(clippy::disallowed_methods)]

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn flowc(args: &[&str]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_flowc")).args(args).current_dir(repo_root()).output().expect("flowc runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn examples() -> Vec<String> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(repo_root().join("examples")).expect("examples/").flatten() {
        let dir = entry.path();
        if !dir.is_dir() {
            continue;
        }
        for file in std::fs::read_dir(&dir).expect("example dir").flatten() {
            let name = file.file_name().to_string_lossy().into_owned();
            if name.ends_with(".flow") && !name.ends_with(".broken.flow") {
                files.push(format!("examples/{}/{name}", dir.file_name().unwrap().to_string_lossy()));
            }
        }
    }
    files.sort();
    files
}

#[test]
fn verify_exits_zero_on_every_example() {
    let files = examples();
    assert!(!files.is_empty());
    for file in files {
        let (code, stdout, stderr) = flowc(&["verify", &file]);
        assert_eq!(code, 0, "{file}:\n{stdout}{stderr}");
        assert!(stdout.contains("0 errors, 0 warnings"), "{file} should verify clean:\n{stdout}");
    }
}

#[test]
fn verify_exits_one_on_errors_and_two_on_io_problems() {
    let (code, stdout, _) = flowc(&["verify", "tests/ui/resolve/undefined_agent.flow"]);
    assert_eq!(code, 1);
    assert!(stdout.contains("error[E0101]: undefined agent `reseacher`"), "{stdout}");
    assert!(stdout.contains("help: did you mean `researcher`?"), "{stdout}");
    let (code, _, stderr) = flowc(&["verify", "no/such/file.flow"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("cannot read no/such/file.flow"), "{stderr}");
    let (code, _, _) = flowc(&["verify", "--format", "xml", "examples/research_writer/research_writer.flow"]);
    assert_eq!(code, 2);
    let (code, _, _) = flowc(&["verify"]);
    assert_eq!(code, 2);
}

#[test]
fn warnings_alone_exit_zero() {
    let (code, stdout, _) = flowc(&["verify", "tests/ui/lints/unused.flow"]);
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("warning[W0001]"));
}

#[test]
fn json_output_has_the_contract_shape() {
    let (code, stdout, _) = flowc(&["verify", "--format", "json", "tests/ui/resolve/undefined_agent.flow"]);
    assert_eq!(code, 1);
    let document: Value = serde_json::from_str(&stdout).expect("valid JSON");
    let diagnostics = document["diagnostics"].as_array().expect("diagnostics array");
    let error = diagnostics.iter().find(|d| d["code"] == "E0101").expect("E0101 in JSON");
    for key in ["code", "severity", "message", "file", "line", "column", "span", "labels", "witness"] {
        assert!(error.get(key).is_some(), "diagnostic lacks `{key}`: {error}");
    }
    assert_eq!(error["severity"], "error");
    assert_eq!(error["file"], "tests/ui/resolve/undefined_agent.flow");
    assert_eq!(error["line"], 6);
    assert_eq!(error["column"], 24);
    let span = &error["span"];
    assert!(span["start"].as_u64().unwrap() < span["end"].as_u64().unwrap());
    assert!(error["labels"].as_array().is_some_and(|l| !l.is_empty()));
    assert!(error["witness"].is_null());
    assert!(document["policies"].is_array());
    assert_eq!(document["summary"]["errors"], 1);
    assert_eq!(document["summary"]["warnings"], 0);
}

#[test]
fn json_lists_policies_with_a_status() {
    let (code, stdout, _) = flowc(&["verify", "--format", "json", "examples/research_writer/research_writer.flow"]);
    assert_eq!(code, 0);
    let document: Value = serde_json::from_str(&stdout).expect("valid JSON");
    let policies = document["policies"].as_array().expect("policies");
    assert!(policies.iter().any(|p| p["name"] == "outline_after_evidence"), "{stdout}");
    for policy in policies {
        assert!(["holds", "violated", "unknown"].contains(&policy["status"].as_str().unwrap()));
        assert!(policy.get("witness").is_some());
    }
}

#[test]
fn explain_prints_codes_and_the_list() {
    let (code, stdout, _) = flowc(&["explain", "E0101"]);
    assert_eq!(code, 0);
    assert!(stdout.starts_with("E0101: undefined name"));
    assert!(stdout.contains("Example"));
    let (code, stdout, _) = flowc(&["explain", "--list"]);
    assert_eq!(code, 0);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), flow_diagnostics::CODES.len());
    assert!(lines.contains(&"W0001 unused declaration"));
    let (code, _, stderr) = flowc(&["explain", "E9999"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("unknown diagnostic code"));
}

#[test]
fn human_output_has_no_colour_when_piped() {
    let (_, stdout, _) = flowc(&["verify", "tests/ui/resolve/undefined_agent.flow"]);
    assert!(!stdout.contains('\u{1b}'), "escape codes in piped output");
    let (_, stdout, _) = flowc(&["verify", "--color", "always", "tests/ui/resolve/undefined_agent.flow"]);
    assert!(stdout.contains('\u{1b}'));
}
