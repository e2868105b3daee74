//! Refinement: the engine, the model checker and trace check read one
//! semantics.
//!
//! For thousands of generated workflows (`flow_tests::refine`: every node
//! kind the runtime runs — agent, tool, human, parallel, join, loop, map,
//! end — gates with every built-in evaluator kind,
//! decisions, handoffs with and without a declared context (some refused by
//! their acceptance checks), loops, joins,
//! budgets and zones, declared records on nodes and gates, blackboards appended to at once, after an approval or
//! on a gate's PASS, and read, revise and replan (a scope listed out of
//! order) on a BLOCK or as a decision) and randomly scripted data-plane answers (outputs,
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
//! `every_witness_is_a_run_of_the_engine` turns witnesses into runs with
//! `flow_runtime::witness` (what `flow run FILE --witness W.jsonl` does): a
//! search over data-plane answers (outputs built from the declared types,
//! failures, tool calls, light and heavy turns, decisions) and their order
//! finds one under which the engine makes exactly the witness's policy
//! steps. Two abstractions of the model
//! are not made by answers and are counted apart (printed): a turn refused
//! for its input size (the search's outputs are small), and budget amounts
//! (a witness exhausting a budget or entering a zone where the engine's
//! amounts cannot). Every other witness must be a run.
//!
//! `FLOW_REFINEMENT_CASES` (default 2,000) and `FLOW_REFINEMENT_SEED`
//! change the workflows; a failure prints the seed and the source.

use flow_check::ir::Program;
use flow_policy::Obs;
use flow_runtime::clock::FakeClock;
use flow_runtime::engine::{Engine, RunConfig, RunStatus};
use flow_runtime::journal::{ArtifactStore, MemoryArtifacts};
use flow_runtime::proto::{AgentReply, HumanAnswer, Request, Response, TokenUsage, ToolCall, ToolResult};
use flow_runtime::tracecheck;
use flow_runtime::witness;
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

/// The generated workflow of `seed`, its token budget set to its static
/// worst case: it fits (so `flowc verify` accepts it and no run exhausts
/// it) and the zones are entered by runs whose turns use a share of it.
fn source(seed: u64) -> String {
    let draft = refine::workflow(seed, 1 << 40);
    let Ok(program) = compile(&draft) else { return draft };
    let (_, bounds) = flow_verify::verify_with_budgets(&program);
    // A conditional bound leaves the inputs of some turns out: give each
    // of those room for a typical request.
    let bound = bounds.iter().find(|b| b.scope == "run" && b.measure == "tokens");
    match bound.and_then(|b| b.worst_case.map(|w| w + b.open_turns * 2_000.0)) {
        Some(w) => refine::workflow(seed, (w.ceil() as u64).max(1)),
        None => draft,
    }
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

/// Whether an agent's output type is the generator's `Batch` (a list of items).
fn wants_items(req: &flow_runtime::proto::AgentRequest) -> bool {
    req.output_schema.to_string().contains("\"items\"")
}

/// How long a decision on `subject` may take, if it has a deadline.
fn timeout_of(program: &Program, subject: &str) -> Option<u64> {
    witness::decision_timeout(program.workflows.first().map(|(_, w)| w), subject)
}

/// One answer of the data plane to `request`, drawn from `rng`.
fn answer(rng: &mut Rng, program: &Program, request: &Request) -> Response {
    match request {
        Request::Agent(req) => {
            let usage = TokenUsage {
                input_tokens: if rng.chance(10) { 1_000 + rng.below(3_000) as u64 } else { rng.below(60) as u64 },
                output_tokens: rng.below(100) as u64,
            };
            // Each tool at most once per visit (the model's documented
            // abstraction): only on the first turn of the first attempt.
            if !req.tools.is_empty() && req.attempt_no == 1 && req.turn == 1 && rng.chance(50) {
                let call = ToolCall { tool: req.tools[0].name.clone(), input: json!({ "ok": true, "n": 1 }), id: None };
                return Response::Agent(AgentReply { tool_calls: vec![call], usage, ..AgentReply::default() });
            }
            // A judge's verdict (sometimes none: the gate fails closed).
            if req.output_schema["properties"].get("pass").is_some() {
                let verdict = match rng.below(5) {
                    0 => json!({ "verdict": "fine" }),
                    _ => json!({ "pass": rng.chance(60), "reason": "judged" }),
                };
                return Response::Agent(AgentReply { output: Some(verdict), usage, ..AgentReply::default() });
            }
            let out = |rng: &mut Rng| json!({ "ok": rng.chance(60), "n": rng.below(3) });
            let reply = match rng.below(20) {
                0 | 1 => AgentReply { error: Some("scripted provider failure".into()), usage, ..AgentReply::default() },
                2 => AgentReply { output: Some(json!({ "ok": "not a bool" })), usage, ..AgentReply::default() },
                // A `Batch`: up to three items (a map takes at most two).
                _ if wants_items(req) => {
                    let items: Vec<serde_json::Value> = (0..rng.below(4)).map(|_| out(rng)).collect();
                    AgentReply { output: Some(json!({ "items": items })), usage, ..AgentReply::default() }
                }
                _ => AgentReply { output: Some(out(rng)), usage, ..AgentReply::default() },
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
            // Sometimes no answer comes before the subject's deadline: the
            // driver answers `timeout` for `control`.
            if timeout_of(program, &req.subject).is_some() && rng.chance(25) {
                let decision = flow_trace::Decision::Timeout;
                return Response::Human(HumanAnswer { decision, by: "control".into(), comment: None, output: None });
            }
            let decision = *rng.pick(&req.decisions);
            let by = req.principals.first().cloned().unwrap_or_else(|| "editor".into());
            Response::Human(HumanAnswer { decision, by, comment: None, output: None })
        }
        Request::Probe(_) => {
            Response::Probe(flow_runtime::proto::ProbeResult { error: Some("no probes here".into()), ..Default::default() })
        }
    }
}

/// The configuration of an in-process run, on a fake clock.
fn config(name: &str) -> RunConfig {
    RunConfig {
        run_id: format!("run-{name}"),
        execution_id: "exec-1".into(),
        plan_digest: "sha256:test".into(),
        plan_content_digest: None,
        clock: Arc::new(FakeClock::new(1_700_000_000_000)),
        owner: name.into(),
        lease_ttl_ms: 60_000,
    }
}

/// A run of the engine with answers from `rng`, in random order.
fn run(program: &Arc<Program>, rng: &mut Rng) -> Result<(Vec<Event>, MemoryArtifacts, RunStatus), String> {
    let clock = Arc::new(FakeClock::new(1_700_000_000_000));
    let mut cfg = config("refinement");
    cfg.clock = clock.clone();
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
        let response = answer(rng, program, &command.request);
        // A timeout comes once the deadline has passed.
        if let (Request::Human(h), Response::Human(HumanAnswer { decision: flow_trace::Decision::Timeout, .. })) =
            (&command.request, &response)
        {
            clock.advance(timeout_of(program, &h.subject).unwrap_or(0) + 1);
        }
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
        let source = source(seed);
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
            let doc = tracecheck::check(&program, &report.events, &tracecheck::Options::default());
            let others: Vec<String> = doc
                .deviations
                .iter()
                .filter(|d| !(d.code == tracecheck::codes::POLICY && violated.iter().any(|p| d.message.contains(&format!("`{p}`")))))
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
                if matches!(&e.body, flow_trace::Body::EdgeTaken { via: flow_trace::Via::MapItem(_), .. }) {
                    *seen_kinds.entry("map item".into()).or_default() += 1;
                }
                if matches!(&e.body, flow_trace::Body::Recorded { gate: Some(_), .. }) {
                    *seen_kinds.entry("recorded by a gate".into()).or_default() += 1;
                }
                if matches!(&e.body, flow_trace::Body::Recorded { errors, .. } if !errors.is_empty()) {
                    *seen_kinds.entry("recorded with a field not made".into()).or_default() += 1;
                }
                if matches!(&e.body, flow_trace::Body::Handoff { accepted: false, .. }) {
                    *seen_kinds.entry("handoff refused".into()).or_default() += 1;
                }
                // A replan scope listed out of order starts at its entry.
                if matches!(&e.body, flow_trace::Body::Rerun { scope, entry, .. } if scope.first() != Some(entry)) {
                    *seen_kinds.entry("rerun from a later-listed entry".into()).or_default() += 1;
                }
            }
            let ended = matches!(status, RunStatus::Terminated { .. });
            if !ended {
                failures.push(format!("seed {seed} run {r}: every command answered, the run is {status:?}\n{source}"));
                continue;
            }
            let report = tracecheck::check(
                &program,
                &events,
                &tracecheck::Options { artifacts: Some(&artifacts), plan_digest: None, ..Default::default() },
            );
            let deviations: Vec<String> = report
                .deviations
                .iter()
                .filter(|d| !(d.code == tracecheck::codes::POLICY && violated.iter().any(|p| d.message.contains(&format!("`{p}`")))))
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
    for kind in [
        "handoff",
        "gate_recorded",
        "decision_applied",
        "budget_zone_changed",
        "tool_call_started",
        "policy_violated",
        "map item",
        "blackboard_appended",
        "blackboard_read",
        "rerun",
        "rerun from a later-listed entry",
        "handoff refused",
        "dead_letter",
        "recorded",
        "recorded by a gate",
        "recorded with a field not made",
    ] {
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

#[test]
fn every_witness_is_a_run_of_the_engine() {
    let cases = env_u64("FLOW_REFINEMENT_WITNESS_CASES", 400);
    let base = env_u64("FLOW_REFINEMENT_SEED", 0x5EED);
    let (mut executed, mut undecided, mut too_large, mut budget_amounts) = (0u64, 0u64, 0u64, 0u64);
    let mut failures = Vec::new();
    for case in 0..cases {
        let seed = base.wrapping_add(case);
        let source = source(seed);
        let program = Arc::new(compile(&source).unwrap_or_else(|e| panic!("seed {seed}: {e}")));
        let (_, reports) = flow_verify::verify_with_policies(&program, "sha256:test", 200_000);
        for report in reports.iter().filter(|r| r.status == "violated") {
            // A turn refused for its size needs a context over the input
            // limit, which this search's answers (small records) never
            // make: counted, and reported below.
            let unsent = report
                .events
                .iter()
                .any(|e| matches!(&e.body, flow_trace::Body::NodeFailed { error_code, .. } if *error_code == flow_trace::ErrorCode::InputTooLarge));
            if unsent {
                too_large += 1;
                continue;
            }
            // The model does not count budget amounts: it lets a budget run
            // out, or enter a zone, at any step that meters what it limits
            // (unless its bound provably fits). A witness that exhausts a
            // budget or changes a zone may need amounts no answer makes
            // (the first reservation of a run always fits): tried, and
            // counted apart when no run makes it.
            let exhausts = report
                .events
                .iter()
                .any(|e| matches!(&e.body, flow_trace::Body::BudgetExhausted { .. } | flow_trace::Body::BudgetZoneChanged { .. }));
            let want = witness::wanted_steps(&report.events).0;
            let search = witness::Search {
                program: &program,
                workflow: None,
                input: &json!({}),
                witness: &report.events,
                config: &config("witness"),
                scripted: &Default::default(),
            };
            match witness::execute(&search, witness::DEFAULT_TRIES).unwrap_or_else(|e| panic!("seed {seed}: {e}")) {
                witness::Found::Run(_) => executed += 1,
                witness::Found::NotARun(_) if exhausts => budget_amounts += 1,
                witness::Found::NotARun(_) => {
                    failures.push(format!("seed {seed}: no run of the engine makes the witness of `{}`:\n{want:#?}\n{source}", report.name))
                }
                witness::Found::Undecided(_) => undecided += 1,
            }
        }
    }
    eprintln!(
        "witnesses: {executed} executed, {} not runs of the engine, {undecided} undecided; not made: {too_large} need a turn over its input limit, {budget_amounts} need budget amounts",
        failures.len()
    );
    assert!(executed >= cases, "only {executed} witnesses executed over {cases} workflows: the search reaches too little");
    assert!(
        failures.is_empty(),
        "{} witness(es) no run makes; the first:\n{}",
        failures.len(),
        failures.iter().take(6).cloned().collect::<Vec<_>>().join("\n")
    );
}
