//! Refinement: the engine, the model checker and trace check read one
//! semantics.
//!
//! For thousands of generated workflows (`flow_tests::refine`: every node
//! kind the runtime runs, gates with every built-in evaluator kind,
//! decisions, handoffs with and without a declared context, loops, joins,
//! budgets and zones) and randomly scripted data-plane answers (outputs,
//! invalid outputs, failures, tool calls, token use, human decisions,
//! answered in random order), each run of the engine, driven in process
//! with a fake clock:
//!
//! * ends (terminates) once every command is answered;
//! * is conformant under trace check — no deviation at all, except T050
//!   for a policy `flowc verify` found violated (a policy it proved is
//!   never violated by a run);
//! * is, in its policy steps, a path of the model checker's abstract
//!   model (`flow_verify::mc::explains`);
//!
//! and every witness the model checker writes for a violated policy is,
//! to trace check, a trace of the plan that violates exactly that policy.
//!
//! `FLOW_REFINEMENT_CASES` (default 2,000) and `FLOW_REFINEMENT_SEED`
//! change the workflows; a failure prints the seed and the source.

use flow_check::ir::Program;
use flow_policy::Obs;
use flow_runtime::clock::FakeClock;
use flow_runtime::conformance;
use flow_runtime::engine::{Engine, RunConfig, RunStatus};
use flow_runtime::journal::{ArtifactStore, MemoryArtifacts};
use flow_runtime::proto::{AgentReply, HumanAnswer, Request, Response, TokenUsage, ToolCall, ToolResult};
use flow_tests::refine::{self, Rng};
use flow_tests::RepoLoader;
use flow_trace::Event;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;

fn env_u64(name: &str, default: u64) -> u64 {
    // Test knobs: the pure-core lint does not apply here.
    #[allow(clippy::disallowed_methods)]
    let value = std::env::var(name).ok();
    value.and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn compile(source: &str) -> Result<Program, String> {
    let mut db = flow_diagnostics::SourceDb::new();
    let root = db.add("tests/inline/refinement.flow", source.to_string());
    let checked = flow_check::check_program(&mut db, root, &RepoLoader);
    if checked.has_errors() {
        return Err(flow_diagnostics::render::render_human(&db, &checked.diagnostics));
    }
    Ok(checked.program)
}

/// One answer of the data plane to `request`, drawn from `rng`.
fn answer(rng: &mut Rng, request: &Request) -> Response {
    match request {
        Request::Agent(req) => {
            let usage = TokenUsage {
                input_tokens: if rng.chance(10) { 200 + rng.below(200) as u64 } else { rng.below(60) as u64 },
                output_tokens: rng.below(100) as u64,
            };
            // Each tool at most once per visit (the model's documented
            // abstraction): only on the first turn of the first attempt.
            if !req.tools.is_empty() && req.attempt_no == 1 && req.turn == 1 && rng.chance(50) {
                let call = ToolCall { tool: req.tools[0].clone(), input: json!({ "ok": true, "n": 1 }) };
                return Response::Agent(AgentReply { tool_call: Some(call), usage, ..AgentReply::default() });
            }
            let reply = match rng.below(20) {
                0 | 1 => AgentReply { error: Some("scripted provider failure".into()), usage, ..AgentReply::default() },
                2 => AgentReply { output: Some(json!({ "ok": "not a bool" })), usage, ..AgentReply::default() },
                _ => AgentReply { output: Some(json!({ "ok": rng.chance(60), "n": rng.below(3) })), usage, ..AgentReply::default() },
            };
            Response::Agent(reply)
        }
        Request::Tool(req) => {
            if rng.chance(10) {
                Response::Tool(ToolResult { ok: false, error: Some("scripted tool failure".into()), ..ToolResult::default() })
            } else {
                Response::Tool(ToolResult { ok: true, output: Some(req.input.clone()), ..ToolResult::default() })
            }
        }
        Request::Human(req) => {
            let decision = rng.pick(&req.decisions).clone();
            let by = req.principals.first().cloned().unwrap_or_else(|| "editor".into());
            Response::Human(HumanAnswer { decision, by, comment: None })
        }
        Request::Probe(_) => {
            Response::Probe(flow_runtime::proto::ProbeResult { error: Some("no probes here".into()), ..Default::default() })
        }
    }
}

/// A run of the engine with answers from `rng`, in random order.
fn run(program: &Arc<Program>, rng: &mut Rng) -> Result<(Vec<Event>, MemoryArtifacts, RunStatus), String> {
    let cfg = RunConfig {
        run_id: "run-refinement".into(),
        execution_id: "exec-1".into(),
        plan_digest: "sha256:test".into(),
        plan_content_digest: None,
        clock: Arc::new(FakeClock::new(1_700_000_000_000)),
        owner: "refinement".into(),
        lease_ttl_ms: 60_000,
    };
    let mut engine = Engine::new(program.clone(), None, cfg)?;
    let mut artifacts = MemoryArtifacts::default();
    let mut events = Vec::new();
    engine.start(json!({}));
    let mut pending = Vec::new();
    for step in 0.. {
        for (_, bytes) in engine.take_artifacts() {
            let value: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
            artifacts.put(&value).map_err(|e| e.to_string())?;
        }
        events.extend(engine.take_events());
        pending.extend(engine.take_commands());
        if !matches!(engine.status(), RunStatus::Running) || pending.is_empty() {
            break;
        }
        if step > 2_000 {
            return Err("more than 2,000 data-plane answers".into());
        }
        let command = pending.swap_remove(rng.below(pending.len()));
        let response = answer(rng, &command.request);
        engine.on_response(&command.key, response)?;
    }
    Ok((events, artifacts, engine.status().clone()))
}

#[test]
fn runs_conform_to_the_plan_and_are_paths_of_the_model() {
    let cases = env_u64("FLOW_REFINEMENT_CASES", 2_000);
    let base = env_u64("FLOW_REFINEMENT_SEED", 0x5EED);
    let mut runs = 0u64;
    let mut witnesses = 0u64;
    let mut failures: Vec<String> = Vec::new();
    let mut seen_kinds: BTreeMap<String, u64> = BTreeMap::new();
    for case in 0..cases {
        let seed = base.wrapping_add(case);
        let source = refine::workflow(seed);
        let program = match compile(&source) {
            Ok(p) => p,
            Err(e) => {
                failures.push(format!("seed {seed}: the generated workflow does not check:\n{e}\n{source}"));
                continue;
            }
        };
        let (diagnostics, reports) = flow_verify::verify_with_policies(&program, "sha256:test", 200_000);
        let errors: Vec<String> =
            diagnostics.iter().filter(|d| d.is_error() && d.code.0 != "E1001").map(|d| format!("{}: {}", d.code.0, d.message)).collect();
        if !errors.is_empty() {
            failures.push(format!("seed {seed}: the generated workflow does not verify: {errors:?}\n{source}"));
            continue;
        }
        let violated: Vec<&str> = reports.iter().filter(|r| r.status != "holds").map(|r| r.name.as_str()).collect();
        // Every witness is, to trace check, a trace of this plan that breaks
        // the policy it witnesses (T050), and only policies the verifier
        // found violated.
        for report in reports.iter().filter(|r| r.status == "violated") {
            witnesses += 1;
            let doc = conformance::check(&program, &report.events, &conformance::Options::default());
            let others: Vec<String> = doc
                .deviations
                .iter()
                .filter(|d| !(d.code == conformance::codes::POLICY && violated.iter().any(|p| d.message.contains(&format!("`{p}`")))))
                .map(|d| format!("{} seq {:?}: {}", d.code, d.seq, d.message))
                .collect();
            let verdict = doc.policies.iter().find(|p| p.name == report.name).map(|p| p.verdict);
            if !others.is_empty() || verdict != Some("violated") {
                failures.push(format!(
                    "seed {seed}: the witness of `{}` (verdict {verdict:?}) deviates: {others:#?}\n{source}\n{}",
                    report.name,
                    timeline(&report.events)
                ));
            }
        }
        let program = Arc::new(program);
        let workflow = &program.workflows[0];
        let obligations = flow_verify::obligations::obligations(&program);
        let model = flow_verify::model::Model::new(&program, workflow, &obligations);
        let mut rng = Rng::new(seed ^ 0xA11CE);
        for r in 0..3 {
            runs += 1;
            let (events, artifacts, status) = match run(&program, &mut rng) {
                Ok(x) => x,
                Err(e) => {
                    failures.push(format!("seed {seed} run {r}: the engine failed: {e}\n{source}"));
                    continue;
                }
            };
            for e in &events {
                *seen_kinds.entry(e.kind().to_string()).or_default() += 1;
            }
            let ended = matches!(status, RunStatus::Terminated { .. });
            if !ended {
                failures.push(format!("seed {seed} run {r}: every command answered, the run is {status:?}\n{source}"));
                continue;
            }
            let report = conformance::check(&program, &events, &conformance::Options { artifacts: Some(&artifacts), plan_digest: None });
            let deviations: Vec<String> = report
                .deviations
                .iter()
                .filter(|d| !(d.code == conformance::codes::POLICY && violated.iter().any(|p| d.message.contains(&format!("`{p}`")))))
                .map(|d| format!("{} seq {:?}: {}", d.code, d.seq, d.message))
                .collect();
            if !deviations.is_empty() {
                failures.push(format!("seed {seed} run {r}: trace check: {deviations:#?}\n{source}\n{}", timeline(&events)));
                continue;
            }
            let steps: Vec<Obs> = events.iter().filter_map(|e| Obs::of(&e.body)).collect();
            if let Err(i) = flow_verify::mc::explains(&model, &steps, true, 500_000) {
                let at = steps.get(i).map(|s| format!("{s:?}")).unwrap_or_else(|| "the end of the run".into());
                failures
                    .push(format!("seed {seed} run {r}: policy step {i} ({at}) is no path of the model\n{source}\n{}", timeline(&events)));
            }
        }
        if failures.len() >= 5 {
            break;
        }
    }
    assert!(
        failures.is_empty(),
        "{} disagreement(s); the first:\n{}",
        failures.len(),
        failures.iter().take(3).cloned().collect::<Vec<_>>().join("\n\n")
    );
    // The generator reaches what it claims to (a test of the test).
    for kind in ["handoff", "gate_recorded", "decision_applied", "budget_zone_changed", "tool_call_started", "policy_violated"] {
        assert!(seen_kinds.get(kind).copied().unwrap_or(0) > 0, "no run recorded `{kind}`: {seen_kinds:?}");
    }
    assert!(witnesses > cases / 4, "only {witnesses} witnesses were checked");
    eprintln!("refinement: {cases} workflows, {runs} runs and {witnesses} witnesses, all conformant; every run explained by the model");
}

fn timeline(events: &[Event]) -> String {
    events
        .iter()
        .map(|e| format!("  {:>3} {} {}", e.seq, e.kind(), serde_json::to_string(&e.body).unwrap_or_default()))
        .collect::<Vec<_>>()
        .join("\n")
}
