//! The `flowc` command line: exit codes, the JSON shape of the contract,
//! `explain`.
// Tests read the repository's files: the pure-core lint does not apply.
#![allow(clippy::disallowed_methods)]

use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::Command;

/// The plan `flowc build SOURCE -o PLAN` writes, built in process as
/// `flow_tests::build_plan` builds it for flow's tests.
fn build_plan(source: &std::path::Path, plan_file: &std::path::Path) -> String {
    let mut db = flow_diagnostics::SourceDb::new();
    let text = std::fs::read_to_string(source).expect("the source is readable");
    let root = db.add(flow_pipeline::normalize(source), text);
    let checked = flow_check::check_program(&mut db, root, &flow_pipeline::FsLoader);
    assert!(!checked.has_errors(), "{} has errors", source.display());
    let files: Vec<(&str, &str)> = (0..db.len() as u32).map(flow_diagnostics::FileId).map(|id| (db.name(id), db.text(id))).collect();
    let dir_of = |p: &std::path::Path| {
        let dir = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
        std::fs::canonicalize(dir).expect("the directory exists")
    };
    let dir = flow_check::plan::relative_dir(&dir_of(plan_file), &dir_of(source));
    let plan = flow_check::plan::Plan::new(checked.program, &format!("flowc {}", env!("CARGO_PKG_VERSION")), &files).located(Some(dir));
    serde_json::to_string_pretty(&plan).expect("a plan serialises") + "\n"
}

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
        // Clean, but for W0117: declared properties the runtime does not
        // act on yet are said, never accepted in silence.
        let warnings = stdout.lines().filter(|l| l.starts_with("warning[")).collect::<Vec<_>>();
        assert!(stdout.contains("0 errors,"), "{file} should verify clean:\n{stdout}");
        assert!(warnings.iter().all(|w| w.starts_with("warning[W0117]")), "{file} should verify clean (W0117 aside):\n{stdout}");
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
fn every_budget_bound_is_reported_in_json_and_in_notes() {
    let (code, stdout, _) = flowc(&["verify", "--format", "json", "tests/ui/budgets/conditional.flow", "tests/ui/ok/input_limits.flow"]);
    assert_eq!(code, 0, "{stdout}");
    let document: Value = serde_json::from_str(&stdout).expect("valid JSON");
    let budgets = document["budgets"].as_array().expect("budgets array");
    let find = |file: &str, workflow: &str, scope: &str, measure: &str| {
        budgets
            .iter()
            .find(|b| b["file"] == file && b["workflow"] == workflow && b["scope"] == scope && b["measure"] == measure)
            .unwrap_or_else(|| panic!("no {workflow}/{scope}/{measure} in {file}: {stdout}"))
    };
    for b in budgets {
        for key in [
            "workflow",
            "scope",
            "budget",
            "measure",
            "limit",
            "available",
            "worst_case",
            "input_unbounded_turns",
            "status",
            "note",
            "file",
            "line",
        ] {
            assert!(b.get(key).is_some(), "budget entry lacks `{key}`: {b}");
        }
        assert!(["fits", "exceeds", "unbounded", "conditional"].contains(&b["status"].as_str().unwrap()), "{b}");
    }
    // Without an input ceiling: conditional, the output tokens counted.
    let conditional = find("tests/ui/budgets/conditional.flow", "w", "run", "tokens");
    assert_eq!(conditional["status"], "conditional");
    assert_eq!(conditional["budget"], "run");
    assert_eq!((conditional["limit"].as_i64(), conditional["worst_case"].as_i64()), (Some(16_000), Some(8_000)));
    assert_eq!(conditional["input_unbounded_turns"], 4);
    assert!(conditional["note"].as_str().unwrap().contains("max_input_tokens"));
    // An agent's own cap is a scope too.
    assert_eq!(find("tests/ui/budgets/conditional.flow", "priced_run", "agent.b", "tokens")["status"], "conditional");
    // With one: fits, the worst case reported even so.
    let fits = find("tests/ui/ok/input_limits.flow", "w", "run", "tokens");
    assert_eq!((fits["status"].as_str(), fits["worst_case"].as_i64(), fits["line"].as_u64()), (Some("fits"), Some(16_000), Some(8)));
    assert_eq!(find("tests/ui/ok/input_limits.flow", "priced_run", "run", "cost")["worst_case"], 0.012);
    // Human output: one note per bound, before the summary.
    let (_, stdout, _) = flowc(&["verify", "tests/ui/ok/input_limits.flow"]);
    assert!(
        stdout.contains("note: budget `run` of `w`: tokens: worst case 16000 tokens, limit 16000 tokens: fits (assuming providers report no more than a turn's max_input_tokens and max_tokens; more is recorded as a warning)\n"),
        "{stdout}"
    );
    assert!(stdout.ends_with("1 file: 0 errors, 0 warnings\n"), "{stdout}");
    let (_, stdout, _) = flowc(&["verify", "tests/ui/budgets/unbounded.flow"]);
    assert!(stdout.contains("duration: no static bound, limit 10m: unbounded"), "{stdout}");
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

/// A fresh directory, removed when the test ends (pass or fail).
fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("flowc-test-{name}-")).tempdir().expect("temp dir")
}

#[test]
fn the_published_plan_schema_is_up_to_date() {
    let (code, stdout, _) = flowc(&["plan-schema"]);
    assert_eq!(code, 0);
    let generated: Value = serde_json::from_str(&stdout).expect("schema JSON");
    let published: Value =
        serde_json::from_str(&std::fs::read_to_string(repo_root().join("stdlib/schemas/plan.schema.json")).expect("published schema"))
            .expect("JSON");
    assert_eq!(generated, published, "stdlib/schemas/plan.schema.json is stale: run `flowc plan-schema > stdlib/schemas/plan.schema.json`");
}

#[test]
fn every_example_builds_a_plan_valid_against_the_published_schema() {
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(repo_root().join("stdlib/schemas/plan.schema.json")).expect("schema")).expect("JSON");
    let validator = jsonschema::validator_for(&schema).expect("the plan schema is a valid JSON Schema");
    let tmp = temp_dir("plans");
    let dir = tmp.path();
    for example in examples() {
        let out = dir.join("plan.json");
        let (code, _, stderr) = flowc(&["build", &example, "-o", out.to_str().unwrap()]);
        assert_eq!(code, 0, "{example}: {stderr}");
        let plan: Value = serde_json::from_str(&std::fs::read_to_string(&out).expect("plan written")).expect("plan JSON");
        let errors: Vec<String> = validator.iter_errors(&plan).map(|e| format!("{} at {}", e, e.instance_path())).take(5).collect();
        assert!(errors.is_empty(), "{example}: plan does not validate:\n{}", errors.join("\n"));
        assert_eq!(plan["flow_plan_version"], flow_check::plan::PLAN_VERSION);
        assert!(plan["source"]["digest"].as_str().unwrap().starts_with("sha256:"));
        assert_eq!(plan["source"]["root"], example.as_str());
        assert!(plan["program"]["workflows"].as_object().is_some_and(|w| !w.is_empty()));
        // YAML too, with the same digest.
        let yaml = dir.join("plan.yaml");
        let (code, _, _) = flowc(&["build", &example, "-o", yaml.to_str().unwrap(), "--emit", "yaml"]);
        assert_eq!(code, 0);
        let text = std::fs::read_to_string(&yaml).expect("yaml written");
        assert!(text.contains(plan["source"]["digest"].as_str().unwrap()));
    }
}

#[test]
fn build_records_where_the_source_is_and_seals_the_plan() {
    let tmp = temp_dir("located");
    let plans = tmp.path().join("deploy/plans");
    std::fs::create_dir_all(&plans).unwrap();
    for example in examples() {
        let source = repo_root().join(&example).canonicalize().unwrap();
        let out = plans.join(format!("{}.json", source.file_stem().unwrap().to_string_lossy()));
        let (code, _, stderr) = flowc(&["build", source.to_str().unwrap(), "-o", out.to_str().unwrap()]);
        assert_eq!(code, 0, "{example}: {stderr}");
        assert!(stderr.contains("(plan sha256:"), "{stderr}");
        let text = std::fs::read_to_string(&out).unwrap();
        let plan: flow_check::plan::Plan = serde_json::from_str(&text).unwrap();
        // Sealed: its content matches its digest, read back from the file.
        assert_eq!(plan.check_digest(), Ok(()), "{example}");
        assert!(stderr.contains(&plan.content_digest), "{stderr}");
        // The source's directory, relative to the plan's.
        let dir = plan.source.dir.clone().expect("the plan records its source's directory");
        assert!(dir.starts_with("../"), "{example}: {dir}");
        assert_eq!(plans.join(&dir).canonicalize().unwrap(), source.parent().unwrap(), "{example}: {dir}");
        // Byte for byte what flow's tests build without this binary
        // (`flow_tests::build_plan`, which this mirrors: a compiler crate's
        // tests do not depend on the interpreter's).
        assert_eq!(build_plan(&source, &out), text, "{example}");
    }
}

#[test]
fn build_refuses_programs_with_errors() {
    let tmp = temp_dir("refuse");
    let dir = tmp.path();
    let out = dir.join("plan.json");
    let (code, _, stderr) = flowc(&["build", "examples/agent_proxy/agent_proxy.broken.flow", "-o", out.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(stderr.contains("E0903"), "{stderr}");
    assert!(!out.exists(), "no plan is written for a program with errors");
}

#[test]
fn plan_digest_changes_with_the_source() {
    let tmp = temp_dir("digest");
    let dir = tmp.path();
    let source = std::fs::read_to_string(repo_root().join("examples/research_writer/research_writer.flow")).unwrap();
    let schema_dir = dir.join("schemas");
    std::fs::create_dir_all(&schema_dir).unwrap();
    std::fs::copy(repo_root().join("examples/research_writer/schemas/draft.json"), schema_dir.join("draft.json")).unwrap();
    let digest = |text: &str| {
        let file = dir.join("rw.flow");
        std::fs::write(&file, text).unwrap();
        let out = dir.join("plan.json");
        let (code, _, stderr) = flowc(&["build", file.to_str().unwrap(), "-o", out.to_str().unwrap()]);
        assert_eq!(code, 0, "{stderr}");
        let plan: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        plan["source"]["digest"].as_str().unwrap().to_string()
    };
    let a = digest(&source);
    assert_eq!(a, digest(&source), "the digest is deterministic");
    assert_ne!(a, digest(&format!("{source}\n// a comment changes the source\n")));
}

fn sarif_schema() -> Value {
    let path = std::env::var_os("SARIF_SCHEMA")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/flow-ci/sarif/sarif-schema-2.1.0.json")))
        .expect("HOME or SARIF_SCHEMA is set");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!("the SARIF 2.1.0 schema is missing at {} ({e}); run `bash .ci/install-sarif-schema.sh`", path.display())
    });
    serde_json::from_str(&text).expect("schema JSON")
}

#[test]
fn sarif_output_validates_against_the_sarif_schema() {
    let schema = sarif_schema();
    let validator = jsonschema::options().should_validate_formats(true).build(&schema).expect("SARIF schema compiles");
    for file in ["tests/ui/gates/gate_checks.flow", "examples/harness/harness.broken.flow", "tests/ui/syntax/three_errors.flow"] {
        let (code, stdout, _) = flowc(&["verify", "--format", "sarif", file]);
        assert_eq!(code, 1, "{file}");
        let log: Value = serde_json::from_str(&stdout).expect("SARIF is JSON");
        let errors: Vec<String> = validator.iter_errors(&log).map(|e| format!("{e} at {}", e.instance_path())).take(5).collect();
        assert!(errors.is_empty(), "{file}: SARIF does not validate:\n{}", errors.join("\n"));
        let results = log["runs"][0]["results"].as_array().expect("results");
        assert!(!results.is_empty());
    }
    // A "did you mean" becomes a fix, valid against the schema, at each use.
    let (_, stdout, _) = flowc(&["verify", "--format", "sarif", "tests/ui/resolve/undefined_once.flow"]);
    let log: Value = serde_json::from_str(&stdout).unwrap();
    let errors: Vec<String> = validator.iter_errors(&log).map(|e| format!("{e} at {}", e.instance_path())).take(5).collect();
    assert!(errors.is_empty(), "fixes do not validate:\n{}", errors.join("\n"));
    let results = log["runs"][0]["results"].as_array().expect("results");
    let fixed =
        results.iter().find(|r| r["message"]["text"].as_str().is_some_and(|m| m.starts_with("undefined node `gone`"))).expect("E0101");
    let fix = &fixed["fixes"][0];
    assert_eq!(fix["description"]["text"], "Replace `gone` with `done`");
    let replacement = &fix["artifactChanges"][0]["replacements"][0];
    assert_eq!(replacement["insertedContent"]["text"], "done");
    assert_eq!(replacement["deletedRegion"]["startColumn"], 8);
    assert_eq!(replacement["deletedRegion"]["endColumn"], 12);
    // A missing handler becomes a fix too: an insertion into the gate.
    let (_, stdout, _) = flowc(&["verify", "--format", "sarif", "tests/ui/gates/gate_checks.flow"]);
    let log: Value = serde_json::from_str(&stdout).unwrap();
    let unhandled = log["runs"][0]["results"].as_array().unwrap().iter().find(|r| r["ruleId"] == "E0502").expect("E0502");
    assert_eq!(unhandled["fixes"][0]["description"]["text"], "Add `on BLOCK -> terminate(unhandled_blocked)`");
    let inserted = &unhandled["fixes"][0]["artifactChanges"][0]["replacements"][0];
    assert_eq!(inserted["insertedContent"]["text"], "\n    on BLOCK -> terminate(unhandled_blocked)");
    assert_eq!(inserted["deletedRegion"]["startLine"], 27);
    assert_eq!(inserted["deletedRegion"]["startColumn"], inserted["deletedRegion"]["endColumn"], "{inserted}");
    // Witnesses become code flows.
    let (_, stdout, _) = flowc(&["verify", "--format", "sarif", "examples/harness/harness.broken.flow"]);
    let log: Value = serde_json::from_str(&stdout).unwrap();
    let with_flow = log["runs"][0]["results"].as_array().unwrap().iter().find(|r| r["ruleId"] == "E0705").expect("E0705");
    let steps = with_flow["codeFlows"][0]["threadFlows"][0]["locations"].as_array().expect("code flow");
    assert_eq!(steps.len(), 5);
}

#[test]
fn sarif_names_files_from_the_source_root_whatever_the_working_directory() {
    // A repository (a directory holding `.git`) with a broken flow in
    // `flows/`, checked from a sibling folder by relative and by absolute
    // path: both name it `flows/broken.flow` under %SRCROOT%, with the same
    // fingerprints; `--sarif-root` moves the root.
    let schema = sarif_schema();
    let validator = jsonschema::options().should_validate_formats(true).build(&schema).expect("SARIF schema compiles");
    let tmp = temp_dir("sarif-root");
    let repo = tmp.path().canonicalize().expect("a path");
    std::fs::create_dir_all(repo.join(".git")).expect(".git");
    std::fs::create_dir_all(repo.join("flows")).expect("flows");
    std::fs::create_dir_all(repo.join("ci/sub")).expect("ci/sub");
    let broken = std::fs::read_to_string(repo_root().join("examples/harness/harness.broken.flow")).expect("the example");
    std::fs::write(repo.join("flows/broken.flow"), broken).expect("written");
    let run = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_flowc")).args(args).current_dir(repo.join("ci/sub")).output().expect("flowc runs");
        let log: Value = serde_json::from_slice(&output.stdout).expect("SARIF is JSON");
        let errors: Vec<String> = validator.iter_errors(&log).map(|e| format!("{e} at {}", e.instance_path())).take(5).collect();
        assert!(errors.is_empty(), "{args:?}: SARIF does not validate:\n{}", errors.join("\n"));
        (output.status.code(), log)
    };
    let absolute = repo.join("flows/broken.flow");
    let (code, relative_log) = run(&["verify", "--format", "sarif", "../../flows/broken.flow"]);
    assert_eq!(code, Some(1));
    let (_, absolute_log) = run(&["verify", "--format", "sarif", absolute.to_str().expect("UTF-8")]);
    for log in [&relative_log, &absolute_log] {
        let run = &log["runs"][0];
        assert_eq!(run["artifacts"][0]["location"], json!({ "uri": "flows/broken.flow", "uriBaseId": "%SRCROOT%" }));
        assert!(run["originalUriBaseIds"]["%SRCROOT%"]["description"]["text"].is_string());
        assert_eq!(run["invocations"][0]["executionSuccessful"], true);
        let rules = run["tool"]["driver"]["rules"].as_array().expect("rules");
        assert!(rules.iter().all(|r| r["helpUri"]
            .as_str()
            .is_some_and(|u| u.ends_with(&format!("docs/reference.md#{}", r["id"].as_str().unwrap_or("").to_lowercase())))));
        assert!(run["tool"]["driver"]["informationUri"].as_str().is_some_and(|u| u.starts_with("https://")));
    }
    let fingerprints = |log: &Value| -> Vec<Value> {
        log["runs"][0]["results"].as_array().expect("results").iter().map(|r| r["partialFingerprints"].clone()).collect()
    };
    assert_eq!(fingerprints(&relative_log), fingerprints(&absolute_log));
    let flows = repo.join("flows");
    let (_, rooted) = run(&["verify", "--format", "sarif", "--sarif-root", flows.to_str().expect("UTF-8"), "../../flows/broken.flow"]);
    assert_eq!(rooted["runs"][0]["artifacts"][0]["location"]["uri"], "broken.flow");
    // A file that cannot be read: a log that says so, and exit 2.
    let (code, log) = run(&["verify", "--format", "sarif", "../../flows/broken.flow", "missing.flow"]);
    assert_eq!(code, Some(2));
    let invocation = &log["runs"][0]["invocations"][0];
    assert_eq!(invocation["executionSuccessful"], false);
    let text = invocation["toolExecutionNotifications"][0]["message"]["text"].as_str().expect("a notification").to_string();
    assert!(text.contains("cannot read missing.flow"), "{text}");
    assert!(!log["runs"][0]["results"].as_array().expect("results").is_empty(), "the readable file is still checked");
    // The flag belongs to SARIF.
    let (code, _, stderr) = flowc(&["verify", "--sarif-root", ".", "examples/harness/harness.flow"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("--sarif-root applies to --format sarif only"), "{stderr}");
}

#[test]
fn json_output_carries_witnesses() {
    let (code, stdout, _) = flowc(&["verify", "--format", "json", "examples/decision_meeting/decision_meeting.broken.flow"]);
    assert_eq!(code, 1);
    let document: Value = serde_json::from_str(&stdout).unwrap();
    let cycle = document["diagnostics"].as_array().unwrap().iter().find(|d| d["code"] == "E0403").expect("E0403");
    let witness = &cycle["witness"];
    assert_eq!(witness["path"][0], "host");
    assert!(witness["cycle_start"].is_u64());
    assert!(witness["steps"].as_array().unwrap().iter().all(|s| s["line"].is_u64() && s["file"].is_string()));
}

#[test]
fn obligations_list_every_kind() {
    let tmp = temp_dir("obligations");
    let dir = tmp.path();
    let out = dir.join("obligations.json");
    let (code, _, _) = flowc(&["verify", "examples/delegation/delegation.flow", "--obligations", out.to_str().unwrap()]);
    assert_eq!(code, 0);
    let document: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let obligations = document["obligations"].as_array().expect("obligations");
    for kind in ["agent", "tool_edge", "restricted_tool_edge", "delegation_edge", "gate_outlet"] {
        assert!(obligations.iter().any(|o| o["kind"] == kind), "no `{kind}` obligation");
    }
    let ids: Vec<&str> = obligations.iter().map(|o| o["id"].as_str().unwrap()).collect();
    let mut unique = ids.clone();
    unique.dedup();
    assert_eq!(ids.len(), unique.len(), "obligation ids are unique");
    assert!(ids.contains(&"delegation_edge:manager->api_change"));
}

#[test]
fn graph_renders_valid_dot_and_mermaid() {
    let (code, dot, _) = flowc(&["graph", "examples/short_video/short_video.flow", "--format", "dot"]);
    assert_eq!(code, 0);
    assert!(dot.contains("gate workflow_video_audio_delivery"), "the gated edge is labelled");
    assert!(dot.contains("color=red"), "gated edges stand out");
    // Graphviz parses it (installed by CI; required).
    let mut child = Command::new("dot")
        .args(["-Tsvg"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("graphviz `dot` is installed (apt-get install graphviz)");
    use std::io::Write;
    child.stdin.take().unwrap().write_all(dot.as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "dot rejects the graph: {}", String::from_utf8_lossy(&output.stderr));
    assert!(String::from_utf8_lossy(&output.stdout).contains("<svg"));
    let (code, mermaid, _) = flowc(&["graph", "examples/decision_meeting/decision_meeting.flow", "--format", "mermaid"]);
    assert_eq!(code, 0);
    assert!(mermaid.starts_with("flowchart LR"));
    assert!(mermaid.contains("max_rounds 4"), "loop bounds are visible");
}

#[test]
fn graph_draws_a_self_contained_html_page() {
    let (code, page, stderr) = flowc(&["graph", "examples/decision_meeting/decision_meeting.flow", "--format", "html"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(page.starts_with("<!DOCTYPE html>"));
    let (_, json, _) = flowc(&["graph", "examples/decision_meeting/decision_meeting.flow", "--format", "json"]);
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    let nodes = json["nodes"].as_array().unwrap().len();
    assert_eq!(page.matches("<g class=\"node ").count(), nodes, "one drawn node per node of the plan");
    assert!(page.contains("loop · max 4 rounds"), "loop bounds are visible");
    // Nothing to fetch: styles and script are inline.
    assert!(!page.contains(" src=") && !page.contains(" href=") && !page.contains("<link"));
    assert!(page.contains("Content-Security-Policy"));
}

#[test]
fn fmt_check_passes_on_every_example_and_rewrites_in_place() {
    let mut files = examples();
    files.extend(["stdlib/evidence.flow".to_string(), "stdlib/delegation.flow".to_string()]);
    let mut args = vec!["fmt", "--check"];
    args.extend(files.iter().map(String::as_str));
    let (code, stdout, stderr) = flowc(&args);
    assert_eq!(code, 0, "examples are not canonically formatted:\n{stdout}{stderr}");
    // A messy file is rewritten, then checks clean; comments survive.
    let tmp = temp_dir("fmt");
    let dir = tmp.path();
    let file = dir.join("messy.flow");
    std::fs::write(&file, "provider local:scripted\n// the writer\nagent writer{provider:local;}\n").unwrap();
    let (code, stdout, _) = flowc(&["fmt", "--check", file.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(stdout.contains("would reformat"));
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "provider local:scripted\n// the writer\nagent writer{provider:local;}\n",
        "--check changes nothing"
    );
    let (code, _, _) = flowc(&["fmt", file.to_str().unwrap()]);
    assert_eq!(code, 0);
    let formatted = std::fs::read_to_string(&file).unwrap();
    assert!(formatted.contains("// the writer"));
    assert!(formatted.contains("agent writer { provider: local }"), "{formatted}");
    let (code, _, _) = flowc(&["fmt", "--check", file.to_str().unwrap()]);
    assert_eq!(code, 0);
    // Syntax errors: refused, file untouched.
    std::fs::write(&file, "agent {").unwrap();
    let (code, _, stderr) = flowc(&["fmt", file.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(stderr.contains("syntax errors"));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "agent {");
}

/// The LSP session an editor opens, framed: initialize, initialized,
/// shutdown, exit.
fn lsp_session() -> Vec<u8> {
    let messages = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"processId":null,"rootUri":null,"capabilities":{}}}"#,
        r#"{"jsonrpc":"2.0","method":"initialized","params":{}}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"shutdown","params":null}"#,
        r#"{"jsonrpc":"2.0","method":"exit","params":null}"#,
    ];
    messages.iter().flat_map(|m| format!("Content-Length: {}\r\n\r\n{m}", m.len()).into_bytes()).collect()
}

/// vscode-languageclient starts a stdio server as `flowc lsp --stdio`
/// (and may add `--clientProcessId=N`): the server must start and answer.
#[test]
fn lsp_accepts_the_transport_flags_editor_clients_pass() {
    use std::io::Write;
    for args in
        [&["lsp"][..], &["lsp", "--stdio"], &["lsp", "--stdio", "--clientProcessId=4242"], &["lsp", "--clientProcessId", "7", "--stdio"]]
    {
        let mut child = Command::new(env!("CARGO_BIN_EXE_flowc"))
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(&lsp_session()).unwrap();
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{args:?}: {} {}", stdout, String::from_utf8_lossy(&out.stderr));
        assert!(stdout.contains(r#""id":1"#) && stdout.contains("capabilities"), "{args:?}: no answer to initialize: {stdout}");
    }
    // Transports this server does not speak are refused, clearly.
    let (code, _, stderr) = flowc(&["lsp", "--socket=5000"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("stdin/stdout only"), "{stderr}");
    let (code, _, stderr) = flowc(&["lsp", "--bogus"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("unexpected argument `--bogus`"), "{stderr}");
}

/// Runs flowc in the repository with `input` on its standard input.
fn flowc_with_stdin(args: &[&str], input: &str) -> (i32, String, String) {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_flowc"))
        .args(args)
        .current_dir(repo_root())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("flowc runs");
    child.stdin.take().expect("stdin").write_all(input.as_bytes()).expect("written");
    let output = child.wait_with_output().expect("flowc finishes");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn a_dash_reads_the_flow_from_the_standard_input() {
    let broken = std::fs::read_to_string(repo_root().join("examples/harness/harness.broken.flow")).expect("the example");
    let (code, stdout, _) = flowc_with_stdin(&["verify", "--color", "never", "-"], &broken);
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("┌─ <stdin>:"), "{stdout}");
    let (_, file_out, _) = flowc(&["verify", "--color", "never", "examples/harness/harness.broken.flow"]);
    assert_eq!(stdout.replace("<stdin>", "examples/harness/harness.broken.flow"), file_out, "the same report as for the file");
    // Imports resolve from the working directory.
    let (code, stdout, stderr) = flowc_with_stdin(&["verify", "--format", "json", "-"], "import \"examples/harness/harness.flow\"\n");
    assert!(code == 0 || code == 1, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).expect("JSON");
    assert!(report["diagnostics"].as_array().expect("a list").iter().all(|d| d["code"] != "E0004"), "{stdout}");
    // A plan from the standard input.
    let tmp = temp_dir("stdin-plan");
    let plan = tmp.path().join("plan.json");
    let ok = std::fs::read_to_string(repo_root().join("examples/harness/harness.flow")).expect("the example");
    let (code, _, stderr) = flowc_with_stdin(&["build", "-", "-o", plan.to_str().expect("UTF-8")], &ok);
    assert_eq!(code, 0, "{stderr}");
    let plan: Value = serde_json::from_str(&std::fs::read_to_string(&plan).expect("the plan")).expect("JSON");
    assert!(plan["content_digest"].as_str().is_some_and(|d| d.starts_with("sha256:")));
    // Only once.
    let (code, _, stderr) = flowc_with_stdin(&["verify", "-", "-"], "");
    assert_eq!(code, 2);
    assert!(stderr.contains("can be given once"), "{stderr}");
}

#[test]
fn fmt_prints_to_standard_output_for_a_dash_or_with_stdout() {
    let (code, stdout, stderr) = flowc_with_stdin(&["fmt", "-"], "agent   x {provider: p}\n");
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "agent x { provider: p }\n");
    // Already formatted: printed all the same (an editor replaces its buffer with it).
    let (_, again, _) = flowc_with_stdin(&["fmt", "-"], &stdout);
    assert_eq!(again, stdout);
    let (code, stdout, _) = flowc_with_stdin(&["fmt", "--check", "-"], "agent   x {provider: p}\n");
    assert_eq!(code, 1);
    assert_eq!(stdout, "would reformat <stdin>\n");
    let (code, _, stderr) = flowc_with_stdin(&["fmt", "-"], "agent x {\n");
    assert_eq!(code, 1);
    assert!(stderr.contains("not formatting <stdin>: it has syntax errors"), "{stderr}");
    // --stdout leaves the file as it was.
    let tmp = temp_dir("fmt-stdout");
    let file = tmp.path().join("x.flow");
    std::fs::write(&file, "agent   x {provider: p}\n").expect("written");
    let (code, stdout, _) = flowc(&["fmt", "--stdout", file.to_str().expect("UTF-8")]);
    assert_eq!(code, 0);
    assert_eq!(stdout, "agent x { provider: p }\n");
    assert_eq!(std::fs::read_to_string(&file).expect("read"), "agent   x {provider: p}\n");
}

#[test]
fn completion_scripts_complete_in_a_real_bash() {
    let (code, script, _) = flowc(&["completions", "bash"]);
    assert_eq!(code, 0);
    let tmp = temp_dir("completions");
    let path = tmp.path().join("flowc.bash");
    std::fs::write(&path, script).expect("written");
    // Ask bash's completion function (called as bash calls it: command,
    // word, previous word) what completes `flowc ver` and `flowc verify --for`.
    let probe = format!(
        "source {}; COMP_WORDS=(flowc ver); COMP_CWORD=1; _flowc flowc ver flowc; echo \"${{COMPREPLY[@]}}\"; COMP_WORDS=(flowc verify --for); COMP_CWORD=2; _flowc flowc --for verify; echo \"${{COMPREPLY[@]}}\"",
        path.display()
    );
    let output = Command::new("bash").args(["-c", &probe]).output().expect("bash runs");
    let text = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.first().copied(), Some("verify"), "{text}\n{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(lines.get(1).copied(), Some("--format"), "{text}");
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let (code, script, _) = flowc(&["completions", shell]);
        assert_eq!(code, 0, "{shell}");
        assert!(script.contains("verify") && script.contains("max-diagnostics"), "{shell}");
    }
}

#[test]
fn the_json_report_has_a_version_and_matches_its_published_schema() {
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("stdlib/schemas/verify-report.schema.json")).expect("the published schema"),
    )
    .expect("schema JSON");
    let validator = jsonschema::options().should_validate_formats(true).build(&schema).expect("the schema compiles");
    // Every example and every UI case: clean files, errors, witnesses, budgets, policies.
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in ["examples", "tests/ui"] {
        let mut stack = vec![repo_root().join(dir)];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).expect("a directory").flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "flow") {
                    files.push(path);
                }
            }
        }
    }
    files.sort();
    assert!(files.len() > 80, "{} files", files.len());
    let (mut with_witness, mut with_budgets, mut with_policies) = (0, 0, 0);
    for file in &files {
        let (code, stdout, stderr) = flowc(&["verify", "--format", "json", file.to_str().expect("UTF-8")]);
        assert!(code == 0 || code == 1, "{}: exit {code}: {stderr}", file.display());
        let report: Value = serde_json::from_str(&stdout).expect("JSON");
        let errors: Vec<String> = validator.iter_errors(&report).map(|e| format!("{e} at {}", e.instance_path())).take(5).collect();
        assert!(errors.is_empty(), "{}: the report does not match its schema:\n{}", file.display(), errors.join("\n"));
        assert_eq!(report["version"], 1);
        with_witness += usize::from(report["diagnostics"].as_array().expect("a list").iter().any(|d| !d["witness"].is_null()));
        with_budgets += usize::from(!report["budgets"].as_array().expect("a list").is_empty());
        with_policies += usize::from(!report["policies"].as_array().expect("a list").is_empty());
    }
    assert!(with_witness > 0 && with_budgets > 0 && with_policies > 0, "{with_witness} {with_budgets} {with_policies}");
}
