//! `flow run FILE --witness W.jsonl`: a witness of the model checker made
//! into a run of the engine, and both held against the plan.

use super::{compile_with, exit, Compiled};
use flow_runtime::engine::RunConfig;
use flow_runtime::journal::{ArtifactStore, DirArtifacts};
use flow_runtime::tracecheck;
use flow_runtime::witness::{self, Found, Search};
use flow_trace::Body;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What `flow run --witness` is given.
pub struct WitnessRun<'a> {
    pub file: &'a Path,
    pub witness: &'a Path,
    pub run_dir: Option<PathBuf>,
    pub run_id: String,
    pub workflow: Option<String>,
    pub input: Option<PathBuf>,
    /// Where NAME.input.json is looked for (default: the flow's directory).
    pub base_dir: Option<PathBuf>,
    pub tries: usize,
    pub quiet: bool,
}

/// Searches for answers that make the engine run the witness, writes the
/// run's `trace.jsonl`, `artifacts/` and `answers.json`, and compares the
/// policy verdicts trace check gives the witness and the run. Exit 0 when
/// the run makes the witness's steps and the verdicts agree, 1 when no run
/// does (or the verdicts differ), 2 on a usage or I/O error.
pub fn run(args: WitnessRun) -> u8 {
    // A witness is of a violated policy: the plan's static verification
    // errors do not stop it (checking errors do).
    let Compiled { plan, base, stem } = match compile_with(args.file, true, false) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let base = args.base_dir.clone().unwrap_or(base);
    let events = match std::fs::read_to_string(args.witness).map_err(|e| e.to_string()).and_then(|t| flow_trace::parse_jsonl(&t)) {
        Ok(events) => events,
        Err(e) => {
            eprintln!("flow: cannot read the witness {}: {e}", args.witness.display());
            return exit::USAGE;
        }
    };
    let workflow = args.workflow.clone().or_else(|| {
        events.iter().find_map(|e| match &e.body {
            Body::RunStarted { workflow, .. } => Some(workflow.clone()),
            _ => None,
        })
    });
    if let Some(name) = &workflow {
        if !plan.program.workflows.contains_key(name) {
            eprintln!("flow: the witness runs workflow `{name}`, which {} does not declare", args.file.display());
            return exit::USAGE;
        }
    }
    let input = match input_for(&args, &plan.program, workflow.as_deref(), &base, &stem) {
        Ok(v) => v,
        Err(code) => return code,
    };
    let (want, lasso) = witness::wanted_steps(&events);
    if !args.quiet {
        eprintln!("flow: searching for answers that make the witness's {} policy steps (at most {} runs)…", want.len(), args.tries);
    }
    let config = RunConfig {
        run_id: args.run_id.clone(),
        execution_id: "witness".into(),
        plan_digest: plan.source.digest.clone(),
        plan_content_digest: Some(plan.content_digest.clone()).filter(|d| !d.is_empty()),
        clock: Arc::new(flow_runtime::clock::FakeClock::new(0)),
        owner: "flow-run-witness".into(),
        lease_ttl_ms: 60_000,
    };
    let program = plan.program.clone();
    let mut scripted = scripted_outputs(&program, &base);
    scripted.extend(recorded_tool_outputs(&base.join(format!("{stem}.cassette.yaml"))));
    let search =
        Search { program: &program, workflow: workflow.as_deref(), input: &input, witness: &events, config: &config, scripted: &scripted };
    let found = match witness::execute(&search, args.tries) {
        Ok(found) => found,
        Err(e) => {
            eprintln!("flow: the engine refused the witness run: {e}");
            return exit::FAILED;
        }
    };
    let made = match found {
        Found::Run(run) => run,
        Found::NotARun(stuck) => {
            eprintln!("flow: no answers make the engine run this witness: it is not a run of the plan");
            explain_stuck(&stuck, want.len());
            return exit::FAILED;
        }
        Found::Undecided(stuck) => {
            eprintln!("flow: no run found in {} tries (raise --tries)", args.tries);
            explain_stuck(&stuck, want.len());
            return exit::FAILED;
        }
    };
    let run_dir = args.run_dir.clone().unwrap_or_else(|| Path::new(".flow/runs").join(&args.run_id));
    let store = match write_run(&run_dir, &made) {
        Ok(store) => store,
        Err(e) => {
            eprintln!("flow: cannot write the run to {}: {e}", run_dir.display());
            return exit::USAGE;
        }
    };
    let of_witness = tracecheck::check(&plan.program, &events, &tracecheck::Options::default());
    let options =
        tracecheck::Options { artifacts: Some(&store as &dyn ArtifactStore), plan_digest: Some(&plan.source.digest), ..Default::default() };
    let of_run = tracecheck::check(&plan.program, &made.events, &options);
    let want_verdicts = verdicts(&of_witness, lasso);
    let got_verdicts = verdicts(&of_run, lasso);
    println!(
        "made the witness's {} policy steps in a run of {} events ({} answers, {} runs tried): {}",
        want.len(),
        made.events.len(),
        made.answers.len(),
        made.tried + 1,
        run_dir.display()
    );
    for (name, verdict) in &got_verdicts {
        let mark = if want_verdicts.get(name) == Some(verdict) { "" } else { "   ≠ the witness" };
        println!("  policy {name}: {verdict}{mark}");
    }
    if lasso {
        println!(
            "  (a lasso witness: its cycle repeats forever; the run goes round it once and stops where it closes, its obligation open)"
        );
    }
    // Deviations besides policy verdicts: the run may show only those the
    // witness shows too (a broken plan's witness crosses a boundary, say).
    let codes = |r: &tracecheck::Report| -> BTreeSet<tracecheck::codes::Code> {
        r.deviations.iter().map(|d| d.code).filter(|c| *c != tracecheck::codes::POLICY).collect()
    };
    let (witness_codes, run_codes) = (codes(&of_witness), codes(&of_run));
    for d in of_run.deviations.iter().filter(|d| d.code != tracecheck::codes::POLICY) {
        let mark = if witness_codes.contains(&d.code) { " (the witness shows it too)" } else { "" };
        println!("  deviation {}: {}{mark}", d.code, d.message);
    }
    if want_verdicts == got_verdicts && run_codes.is_subset(&witness_codes) {
        exit::SUCCESS
    } else {
        eprintln!("flow: trace check judges the run differently from the witness");
        exit::FAILED
    }
}

/// Where the search got stuck.
fn explain_stuck(stuck: &witness::Stuck, steps: usize) {
    let Some(wanted) = &stuck.wanted else { return };
    eprintln!(
        "flow: runs make {} of the witness's {steps} steps (repeats folded); none makes step {}: {wanted}",
        stuck.matched,
        stuck.matched + 1
    );
    for got in &stuck.instead {
        match got {
            Some(step) => eprintln!("  a run makes {step} there"),
            None => eprintln!("  a run ends or waits there"),
        }
    }
}

/// The run's input: `--input`, NAME.input.json, or the plainest value of
/// the workflow's input type.
fn input_for(
    args: &WitnessRun,
    program: &flow_check::ir::Program,
    workflow: Option<&str>,
    base: &Path,
    stem: &str,
) -> Result<serde_json::Value, u8> {
    let path = args.input.clone().or_else(|| Some(base.join(format!("{stem}.input.json"))).filter(|p| p.exists()));
    if let Some(path) = path {
        return std::fs::read_to_string(&path)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
            .map_err(|e| {
                eprintln!("flow: cannot read the input {}: {e}", path.display());
                exit::USAGE
            });
    }
    let wf = match workflow {
        Some(name) => program.workflows.get(name),
        None => program.workflows.first().map(|(_, w)| w),
    };
    Ok(wf
        .and_then(|w| w.input_type())
        .and_then(|t| witness::instances(t, &program.types).into_iter().next())
        .unwrap_or(serde_json::json!({})))
}

/// Each policy's verdict; for a lasso witness an obligation left open is
/// its violation (the run cannot show a cycle repeating forever).
fn verdicts(report: &tracecheck::Report, lasso: bool) -> BTreeMap<String, &'static str> {
    report
        .policies
        .iter()
        .map(|p| {
            let verdict = if lasso && p.verdict == "open" { "violated" } else { p.verdict };
            (p.name.clone(), verdict)
        })
        .collect()
}

fn write_run(dir: &Path, run: &witness::Run) -> Result<DirArtifacts, String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    // Chained like every trace Flow writes.
    let trace = flow_trace::chain::to_jsonl(&run.events).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("trace.jsonl"), trace).map_err(|e| e.to_string())?;
    let answers: Vec<serde_json::Value> =
        run.answers.iter().map(|(key, answer)| serde_json::json!({ "command": key, "answer": answer })).collect();
    let text = serde_json::to_string_pretty(&answers).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("answers.json"), text + "\n").map_err(|e| e.to_string())?;
    let mut store = DirArtifacts::open(&dir.join("artifacts")).map_err(|e| e.to_string())?;
    for (artifact, bytes) in &run.artifacts {
        store.put_encoded(artifact, bytes).map_err(|e| e.to_string())?;
    }
    Ok(store)
}

/// The successful tool results of the cassette `NAME.cassette.yaml` beside
/// the flow (as `flow run` finds it), by tool: the search tries them as
/// answers. No cassette, none; one that cannot be read is left out, with a
/// note.
fn recorded_tool_outputs(path: &Path) -> witness::Scripted {
    let mut out = witness::Scripted::new();
    if !path.exists() {
        return out;
    }
    let cassette = match flow_runtime::exec::Cassette::load(path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("flow: note: the cassette is not tried as answers: {e}");
            return out;
        }
    };
    for entry in cassette.entries.iter().filter(|e| e.kind == "tool") {
        let (Ok(request), Ok(response)) = (serde_json::to_value(&entry.request), serde_json::to_value(&entry.response)) else { continue };
        let (Some(tool), Some(output)) = (request["tool"].as_str(), response.get("output")) else { continue };
        if response["ok"] == true {
            out.entry(witness::recorded_tool(tool)).or_default().push(output.clone());
        }
    }
    out
}

/// The outputs the plan's scripted providers give (their `script:` files,
/// read from the source's directory), by node or agent: the search tries
/// them as answers. A script that cannot be read is left out, with a note.
fn scripted_outputs(program: &flow_check::ir::Program, base: &Path) -> witness::Scripted {
    let mut out = witness::Scripted::new();
    for decl in program.decls.values().filter(|d| d.variant.as_deref() == Some("scripted")) {
        let Some(path) = decl.script() else { continue };
        let script = std::fs::read_to_string(base.join(path))
            .map_err(|e| e.to_string())
            .and_then(|text| flow_check::limits::yaml_from_str::<flow_runtime::exec::Script>(path, &text));
        match script {
            Ok(script) => {
                for (name, replies) in script.replies {
                    // The first provider's replies for a name (as a run reads them).
                    out.entry(name).or_insert_with(|| replies.into_iter().filter_map(|r| r.output).collect());
                }
            }
            Err(e) => eprintln!("flow: note: the script {path} is not tried as answers: {e}"),
        }
    }
    out
}
