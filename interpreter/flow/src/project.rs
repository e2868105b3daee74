//! `flow project RUN NAME`: a declared projection of a recorded run
//! (reference §5.10), rendered as Markdown or JSON.

use super::{exit, open_artifacts, plan_for, read_trace};
use flow_runtime::journal::ArtifactStore;
use flow_trace::Body;
use std::path::Path;

/// Renders the projection `name` of the run at `run` (a run directory or
/// a trace file beside its artifacts/) against `plan`, to stdout or
/// `output`; without a name, lists the plan's projections.
pub fn project(run: &Path, name: Option<&str>, plan_file: &Path, output: Option<&Path>) -> u8 {
    let plan = match plan_for(plan_file) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let Some(name) = name else {
        let all = flow_runtime::project::projections(&plan.program);
        if all.is_empty() {
            println!("{} declares no projection", plan_file.display());
        }
        for (name, workflow, description) in all {
            println!("{name:<20} of {workflow}{}", description.map(|d| format!(" — {d}")).unwrap_or_default());
        }
        return exit::SUCCESS;
    };
    let all = flow_runtime::project::projections(&plan.program);
    if !all.iter().any(|(n, _, _)| *n == name) {
        let known: Vec<&str> = all.iter().map(|(n, _, _)| *n).collect();
        eprintln!("flow: {} declares no projection `{name}`", plan_file.display());
        if let Some(close) = flow_diagnostics::closest_name(name, known.iter().copied()) {
            eprintln!("  = help: did you mean `{close}`?");
        }
        if !known.is_empty() {
            eprintln!("  = note: its projections: {}", known.join(", "));
        }
        return exit::USAGE;
    }
    let (file, text, artifacts) = match read_trace(run) {
        Ok(t) => t,
        Err(code) => return code,
    };
    let parsed = flow_runtime::tracecheck::parse(&text);
    if let Some(bad) = parsed.deviations.first() {
        eprintln!("flow: {} is not a trace Flow wrote: {}", file.display(), bad.message);
        return exit::USAGE;
    }
    let recorded = parsed.events.iter().find_map(|e| match &e.body {
        Body::RunStarted { plan_digest, .. } => Some(plan_digest.clone()),
        _ => None,
    });
    match recorded {
        None => {
            eprintln!("flow: {} holds no run_started event: there is no run to project", file.display());
            return exit::USAGE;
        }
        Some(digest) if digest != plan.source.digest => {
            eprintln!("flow: the run was made from another plan ({digest}) than {} ({})", plan_file.display(), plan.source.digest);
            eprintln!("  = help: give the plan the run was made from: its outputs may have other types");
            return exit::USAGE;
        }
        Some(_) => {}
    }
    let store = match open_artifacts(artifacts.as_deref()) {
        Ok(store) => store,
        Err(code) => return code,
    };
    let read = |artifact: &flow_trace::ArtifactRef| match &store {
        // Not stored (the control plane's own values): absent, not an error.
        Some(store) => match store.path_of(artifact) {
            Ok(path) if path.exists() => store.get(artifact).map(Some).map_err(|e| e.to_string()),
            _ => Ok(None),
        },
        None => Err("no artifacts/ beside the trace (give the run directory)".to_string()),
    };
    let projected = match flow_runtime::project::project(&plan.program, name, &parsed.events, &read) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("flow: {e}");
            return exit::FAILED;
        }
    };
    if !projected.absent.is_empty() {
        eprintln!("flow: note: not stored in artifacts/, so null where read: {}", projected.absent.join(", "));
    }
    match output {
        None => {
            print!("{}", projected.text);
            exit::SUCCESS
        }
        Some(path) => match std::fs::write(path, &projected.text) {
            Ok(()) => exit::SUCCESS,
            Err(e) => {
                eprintln!("flow: cannot write {}: {e}", path.display());
                exit::USAGE
            }
        },
    }
}
