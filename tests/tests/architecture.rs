//! Architecture invariants that a type cannot hold: which crates may depend
//! on which (ARCHITECTURE.md).
// Tests read the repository's manifests: the pure-core lint does not apply.
#![allow(clippy::disallowed_methods)]

use flow_tests::repo_root;

/// The names of the workspace crates under `folder` (`compiler`, `interpreter`).
fn crates_under(folder: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(repo_root().join(folder)).expect("folder") {
        let manifest = entry.expect("entry").path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else { continue };
        let name =
            text.lines().find_map(|l| l.strip_prefix("name = \"").and_then(|r| r.strip_suffix('"'))).expect("a package name").to_string();
        out.push((name, text));
    }
    out.sort();
    out
}

#[test]
fn no_compiler_crate_depends_on_an_interpreter_crate() {
    let mut interpreter: Vec<String> = crates_under("interpreter").into_iter().map(|(n, _)| n).collect();
    // The workspace tests crate depends on the runtime: a compiler crate's
    // dev-dependency on it would be one on the interpreter too.
    interpreter.push("flow-tests".into());
    assert!(interpreter.iter().any(|n| n == "flow-runtime"), "{interpreter:?}");
    let compiler = crates_under("compiler");
    assert!(compiler.iter().any(|(n, _)| n == "flow-trace"), "the trace vocabulary sits below both halves");
    for (name, manifest) in compiler {
        for dep in &interpreter {
            let uses =
                manifest.lines().any(|l| l.trim_start().starts_with(&format!("{dep} ")) || l.trim_start().starts_with(&format!("{dep}.")));
            assert!(!uses, "{name} (compiler/) depends on {dep} (interpreter/)");
        }
    }
}

/// The `.rs` files under `folder`, recursively.
fn rust_files(folder: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(folder).expect("folder").flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn only_the_plan_views_read_properties_by_name() {
    // The verifier, the model checker, the engine and trace check read a
    // plan through `flow_check::view`: a property looked up by its name
    // anywhere else is a second reading of the language (and a second
    // default) waiting to drift.
    let mut files = Vec::new();
    for folder in ["compiler/verify", "interpreter"] {
        rust_files(&repo_root().join(folder), &mut files);
    }
    assert!(files.len() > 20, "found only {} files", files.len());
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("source");
        for (i, line) in text.lines().enumerate() {
            if line.contains("props.get(") || line.contains("props.contains_key(") {
                found.push(format!("{}:{}: {}", file.display(), i + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "properties read by name outside compiler/check/src/view:\n{}", found.join("\n"));
}

#[test]
fn the_model_checker_and_trace_check_read_boundaries_from_the_plan_index() {
    // Which edges leave a node (in which order), the gate on a boundary and
    // the transfers on it are the plan index's (`flow_check::index`), as the
    // engine reads them. A reader that scans the workflow's lists itself is a
    // second step rule waiting to drift (a different first gate, another
    // edge order).
    let scans = [
        "workflow.edges.iter()",
        "wf.edges.iter()",
        "&workflow.edges",
        "&wf.edges",
        "gates.iter().position(",
        "transfers.iter().find(|t| t.kind",
    ];
    let mut files = vec![repo_root().join("compiler/verify/src/model.rs"), repo_root().join("compiler/verify/src/mc.rs")];
    rust_files(&repo_root().join("interpreter/runtime/src/tracecheck"), &mut files);
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("source");
        for (i, line) in text.lines().enumerate() {
            if scans.iter().any(|s| line.contains(s)) {
                found.push(format!("{}:{}: {}", file.display(), i + 1, line.trim()));
            }
        }
    }
    assert!(files.len() > 5, "found only {} files", files.len());
    assert!(found.is_empty(), "boundaries read around the plan index:\n{}", found.join("\n"));
}

/// The quoted words that follow `marker` in `text` (`terminate("dead_end"` → `dead_end`).
fn quoted_after<'t>(text: &'t str, marker: &str) -> Vec<&'t str> {
    text.match_indices(marker).filter_map(|(i, _)| text[i + marker.len()..].split('"').next()).collect()
}

#[test]
fn every_termination_reason_the_engine_chooses_is_in_the_registry() {
    let engine = engine_source();
    let semantics = std::fs::read_to_string(repo_root().join("compiler/check/src/semantics.rs")).expect("semantics.rs");
    let mut reasons = quoted_after(&engine, "self.terminate(\"");
    reasons.extend(quoted_after(&engine, "self.end_run(\""));
    // Effect::Terminate { reason: "…".into(), … } and WorkflowEvent's default_reason.
    reasons.extend(quoted_after(&engine, "reason: \"").into_iter().filter(|r| !r.contains(' ')));
    // workflow_event(EVENT, node, cause, "default reason", message)
    for line in engine.lines().filter(|l| l.contains("self.workflow_event(")) {
        if let Some(reason) = line.split('"').nth(1).filter(|r| !r.contains('{')) {
            reasons.push(reason);
        }
    }
    for line in semantics.lines().filter(|l| l.contains(".to_string(), TerminationStatus::")) {
        reasons.extend(line.split('"').skip(1).step_by(2).filter(|r| !r.contains(' ')));
    }
    assert!(reasons.len() >= 10, "the scan found too few reasons: {reasons:?}");
    let documented: Vec<&str> = flow_trace::ENGINE_REASONS.iter().map(|(r, _)| *r).collect();
    for reason in reasons {
        assert!(documented.contains(&reason), "the engine ends runs with `{reason}`, which flow_trace::ENGINE_REASONS does not document");
    }
}

/// The engine's source: every file of `interpreter/engine/src/engine/`.
fn engine_source() -> String {
    let mut files = Vec::new();
    rust_files(&repo_root().join("interpreter/engine/src/engine"), &mut files);
    files.sort();
    assert!(files.len() > 10, "the engine is {} files", files.len());
    files.iter().map(|f| std::fs::read_to_string(f).expect("source")).collect::<Vec<_>>().join("\n")
}

/// The event kinds `text` constructs itself (`Body::Kind { schema_version … }`)
/// rather than through the event builder (`flow_check::events`).
fn bodies_built_in(text: &str) -> Vec<String> {
    let mut kinds = Vec::new();
    for (i, _) in text.match_indices("Body::") {
        let rest = &text[i + "Body::".len()..];
        let kind: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
        let body = rest[kind.len()..].split('}').next().unwrap_or_default();
        if body.contains("schema_version") {
            kinds.push(kind);
        }
    }
    kinds.sort();
    kinds.dedup();
    kinds
}

#[test]
fn witnesses_and_runs_build_their_events_in_one_builder() {
    // The witness writer builds every event through the builder ...
    let mc = std::fs::read_to_string(repo_root().join("compiler/verify/src/mc.rs")).expect("mc.rs");
    assert_eq!(bodies_built_in(&mc), Vec::<String>::new());
    // ... and so does the engine, except for the kinds only a real run has.
    let engine_only = [
        "AgentTurn",
        "ArtifactRecorded",
        "BudgetReserved",
        "BudgetSettled",
        "LeaseExpired",
        "LeaseGranted",
        "LeaseHeartbeat",
        "LeaseReleased",
        "Message",
        "PolicyViolated",
        "ReconciliationRequired",
        "RunResumed",
        "StateChanged",
    ];
    for kind in bodies_built_in(&engine_source()) {
        assert!(
            engine_only.contains(&kind.as_str()),
            "the engine builds `{kind}` itself: build it with flow_check::events, as witnesses do"
        );
    }
}

#[test]
fn one_compile_pipeline_and_the_runtime_needs_no_language_server() {
    let crates: Vec<(String, String)> = crates_under("compiler").into_iter().chain(crates_under("interpreter")).collect();
    let manifest = |name: &str| crates.iter().find(|(n, _)| n == name).map(|(_, m)| m.clone()).unwrap_or_else(|| panic!("crate {name}"));
    assert!(!manifest("flow-cli").contains("flow-lsp"), "flow-cli depends on the language server");
    for shell in ["flow-cli", "flowc", "flow-lsp"] {
        assert!(manifest(shell).contains("flow-pipeline.workspace"), "{shell} does not compile through flow-pipeline");
    }
    // Nobody but the pipeline checks a program from a file.
    for relative in ["compiler/flowc/src/main.rs", "interpreter/flow/src/main.rs", "compiler/lsp/src/analysis.rs"] {
        let text = std::fs::read_to_string(repo_root().join(relative)).expect("source");
        assert!(!text.contains("check_program"), "{relative} checks a program itself instead of through flow-pipeline");
    }
}

#[test]
fn the_data_plane_does_not_import_the_control_plane() {
    let mut files = Vec::new();
    rust_files(&repo_root().join("interpreter/runtime/src/exec"), &mut files);
    assert!(files.len() > 5, "the executors are {} files", files.len());
    files.push(repo_root().join("interpreter/runtime/src/openai.rs"));
    rust_files(&repo_root().join("interpreter/runtime/src/mcp"), &mut files);
    for file in files {
        let text = std::fs::read_to_string(&file).expect("source");
        assert!(!text.contains("crate::engine"), "the data plane's {} imports the control plane (crate::engine)", file.display());
    }
}

#[test]
fn the_engine_crate_does_no_io() {
    let (_, manifest) = crates_under("interpreter").into_iter().find(|(n, _)| n == "flow-engine").expect("the flow-engine crate");
    let dependencies = manifest.split("[dependencies]").nth(1).and_then(|r| r.split("\n[").next()).expect("[dependencies]");
    for banned in ["tokio", "rusqlite", "reqwest", "tempfile", "flow-runtime", "indicatif", "mimalloc", "tracing-subscriber"] {
        let uses = dependencies
            .lines()
            .any(|l| l.trim_start().starts_with(&format!("{banned} ")) || l.trim_start().starts_with(&format!("{banned}.")));
        assert!(!uses, "the engine crate depends on {banned}: I/O belongs to the runtime (flow-runtime)");
    }
    let mut files = Vec::new();
    rust_files(&repo_root().join("interpreter/engine/src"), &mut files);
    assert!(files.len() > 20, "found only {} files", files.len());
    for file in files {
        let text = std::fs::read_to_string(&file).expect("source");
        // The lint (clippy.toml's disallowed methods) holds the engine only
        // if nothing in it turns the lint off.
        for banned in ["allow(clippy::disallowed", "std::fs", "std::net", "std::process", "std::env", "SystemTime", "Instant::now", "tokio"]
        {
            assert!(!text.contains(banned), "{} contains `{banned}`: the engine does no I/O", file.display());
        }
    }
}

#[test]
fn only_the_recorder_assigns_seq_and_builds_events() {
    let mut files = Vec::new();
    rust_files(&repo_root().join("interpreter/engine/src/engine"), &mut files);
    let recorder = files.iter().find(|f| f.ends_with("record.rs")).expect("engine/record.rs").clone();
    let text = std::fs::read_to_string(&recorder).expect("source");
    assert!(text.contains("self.seq += 1") && text.contains("self.events.push(Event {"), "the recorder no longer assigns seq");
    for file in files.iter().filter(|f| **f != recorder) {
        let text = std::fs::read_to_string(file).expect("source");
        for banned in ["self.seq +=", "self.seq = ", "events.push(", " Event {", "(Event {"] {
            assert!(
                !text.contains(banned),
                "{} contains `{banned}`: only the recorder (engine/record.rs) assigns seq and builds events",
                file.display()
            );
        }
    }
}
/// The `.rs` files of the engine and the runtime crates.
fn engine_and_runtime_files() -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for folder in ["interpreter/engine/src", "interpreter/runtime/src"] {
        rust_files(&repo_root().join(folder), &mut files);
    }
    files.sort();
    files
}

/// The functions of `text` longer than `max` lines: `(name, lines)`. A
/// function runs from its `fn` line to the next line holding only `}` at
/// the same indentation.
fn long_functions(text: &str, max: usize) -> Vec<(String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut long = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let signature = ["fn ", "pub fn ", "pub(crate) fn ", "pub(super) fn ", "async fn ", "pub async fn ", "pub(crate) async fn "]
            .iter()
            .find_map(|p| trimmed.strip_prefix(p));
        let Some(signature) = signature else { continue };
        if line.ends_with(';') {
            continue;
        }
        let close = format!("{}}}", " ".repeat(indent));
        let Some(end) = lines[i..].iter().position(|l| *l == close) else { continue };
        if end + 1 > max {
            let name: String = signature.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            long.push((name, end + 1));
        }
    }
    long
}

#[test]
fn engine_and_runtime_files_and_functions_are_small() {
    const MAX_FILE: usize = 800;
    const MAX_FN: usize = 80;
    let mut problems = Vec::new();
    for file in engine_and_runtime_files() {
        let text = std::fs::read_to_string(&file).expect("source");
        let shown = file.strip_prefix(repo_root()).unwrap_or(&file).display().to_string();
        let count = text.lines().count();
        if count > MAX_FILE {
            problems.push(format!("{shown}: {count} lines (at most {MAX_FILE})"));
        }
        for (name, lines) in long_functions(&text, MAX_FN) {
            problems.push(format!("{shown}: fn {name} is {lines} lines (at most {MAX_FN})"));
        }
    }
    assert!(problems.is_empty(), "files and functions of the engine and the runtime over their size:\n{}", problems.join("\n"));
}

#[test]
fn the_size_scanner_finds_long_functions() {
    let body = "    x();\n".repeat(90);
    let text = format!("fn short() {{\n}}\n\nimpl A {{\n    pub(super) fn long(&self) {{\n{body}    }}\n}}\n");
    assert_eq!(long_functions(&text, 80), vec![("long".to_string(), 92)]);
}

#[test]
fn engine_machines_never_call_each_other() {
    // A machine's entry points are the functions the coordinator applies
    // effects through (`Effect::X { .. } => self.entry(..)`). Outside the
    // coordinator (and the response dispatch), an entry point is called
    // only from its own module: another machine asks for it with an effect.
    let dir = repo_root().join("interpreter/engine/src/engine");
    let coordinator = std::fs::read_to_string(dir.join("coordinator.rs")).expect("coordinator.rs");
    let entries: Vec<String> = coordinator
        .lines()
        .filter(|l| l.trim_start().starts_with("Effect::"))
        .filter_map(|l| l.split("=> self.").nth(1))
        .map(|rest| rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect())
        .collect();
    assert!(entries.len() >= 25, "the coordinator applies only {} effects: {entries:?}", entries.len());
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    let sources: Vec<(String, String)> =
        files.iter().map(|f| (f.file_name().unwrap().to_string_lossy().to_string(), std::fs::read_to_string(f).expect("source"))).collect();
    // The one call that must not wait for the coordinator: a halting policy
    // stops the run at the event that violated it, inside the recorder.
    let allowed = [("policies.rs", "terminate")];
    let mut calls = Vec::new();
    for entry in &entries {
        let home = sources.iter().find(|(_, text)| text.contains(&format!("fn {entry}("))).map(|(name, _)| name.clone());
        let home = home.unwrap_or_else(|| panic!("no module defines the entry point `{entry}`"));
        for (name, text) in &sources {
            if *name == home || name == "coordinator.rs" || name == "responses.rs" || name == "tests.rs" {
                continue;
            }
            if text.contains(&format!("self.{entry}(")) && !allowed.contains(&(name.as_str(), entry.as_str())) {
                calls.push(format!("{name} calls `{entry}` of {home}"));
            }
        }
    }
    assert!(calls.is_empty(), "machines call each other instead of returning effects:\n{}", calls.join("\n"));
}
