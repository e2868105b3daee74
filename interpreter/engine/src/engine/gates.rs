//! Gates: evaluators run (inline, or as probes the data plane answers),
//! the outcome recorded, and the action it calls for taken.

use super::*;

/// Why a probe, native check or judge given an empty list has the gate's
/// `on_empty` outcome.
const NOTHING_CHECKED: &str = "nothing to probe: the list is empty (the gate's on_empty outcome)";

/// What running one evaluator gave.
enum Evaluated {
    /// Its result, now.
    Done(EvaluatorResult),
    /// Probes (or judges' turns) for the data plane, one per item;
    /// `if_none` is the result when there are no items: inconclusive
    /// (`on_error`), never PASS — probing nothing proves nothing.
    Probes { requests: Vec<Request>, if_none: EvaluatorResult },
    /// A question to the judges of a `human` evaluator.
    Ask { principals: Vec<String>, prompt: String },
}

impl Engine {
    /// Evaluates a gate: each evaluator run inline, or as probes the data
    /// plane answers; the gate is finished once none is pending.
    pub(super) fn evaluate_gate(&mut self, gate: &Gate, cause: &Str) {
        let evaluators = gate.evaluator_items();
        let on_error = gate.on_error();
        let mut rt = GateRt {
            results: vec![None; evaluators.len()],
            probes: BTreeMap::new(),
            reasons: BTreeMap::new(),
            cause: cause.clone(),
            pending: 0,
        };
        let visit = self.nodes.get(&gate.from).map(|n| n.visits).unwrap_or(0);
        let mut probes = Vec::new();
        let mut asks = Vec::new();
        for (i, ev) in evaluators.iter().enumerate() {
            match self.run_evaluator(gate, *ev, on_error) {
                Evaluated::Done(result) => rt.results[i] = Some(result),
                Evaluated::Ask { principals, prompt } => {
                    rt.probes.insert((i, 0), None);
                    rt.pending += 1;
                    asks.push((i, principals, prompt));
                }
                Evaluated::Probes { requests, if_none } => {
                    if requests.is_empty() {
                        rt.results[i] = Some(if_none);
                    }
                    for (j, request) in requests.into_iter().enumerate() {
                        rt.probes.insert((i, j), None);
                        rt.pending += 1;
                        let key = CommandKey::Probe { gate: &gate.name, visit, evaluator: i, item: j }.to_key();
                        probes.push((key, i, j, request));
                    }
                }
            }
        }
        let pending = rt.pending;
        self.gates.insert(gate.name.clone(), rt);
        for (key, i, j, request) in probes {
            let (gate, index, item) = (gate.name.clone(), i, j);
            let waiting = match request {
                Request::Agent(_) => Waiting::Judge { gate, index, item },
                _ => Waiting::Probe { gate, index, item },
            };
            self.waiting.insert(key.clone(), waiting);
            self.commands.push(Command { key, request, delay_ms: 0 });
        }
        for (index, principals, prompt) in asks {
            let decision = Box::new(Decision::Judge { gate: gate.name.clone(), index });
            let decisions = vec![flow_trace::Decision::Approve, flow_trace::Decision::Reject];
            self.then(Effect::Ask { decision, principals, prompt: Some(prompt), decisions, cause: cause.clone() });
        }
        if pending == 0 {
            self.finish_gate(&gate.name);
        }
    }

    /// Runs one evaluator of a gate on what it is given: a result now, or
    /// the probes (one per item) whose outcomes make it.
    fn run_evaluator(&mut self, gate: &Gate, ev: Option<EvaluatorRef<'_>>, on_error: Outcome) -> Evaluated {
        let Some(EvaluatorRef { name, builtin, args }) = ev else {
            let invalid =
                EvaluatorResult { evaluator: "?".into(), outcome: on_error, reason: Some("invalid evaluator".into()), error: true };
            return Evaluated::Done(invalid);
        };
        let label = format!("{name}({})", args.iter().map(eval::render).collect::<Vec<_>>().join(", "));
        let result =
            |outcome: Outcome, reason: Option<String>, error: bool| EvaluatorResult { evaluator: label.clone(), outcome, reason, error };
        if builtin {
            return Evaluated::Done(self.builtin_evaluator(name, args, on_error, &result));
        }
        let Some(decl) = self.decl(name).cloned() else {
            return Evaluated::Done(result(on_error, Some(format!("no evaluator `{name}`")), true));
        };
        let input = match args.first() {
            Some(e) => match eval::eval(e, &self.env) {
                Ok(v) => v,
                Err(err) => return Evaluated::Done(result(on_error, Some(err.message), true)),
            },
            None => Value::Null,
        };
        // A list argument whose items fit the input type: once per item.
        let items: Vec<Value> = match (input, decl.input_type()) {
            (Value::Array(items), Some(ty)) if !matches!(ty, Ty::List { .. }) => items,
            (input, _) => vec![input],
        };
        match decl.variant.as_deref() {
            Some("predicate") => Evaluated::Done(self.predicate_evaluator(&decl, &items, on_error, &result)),
            Some("schema") => Evaluated::Done(self.schema_evaluator(name, &decl, &items, on_error, &result)),
            Some("builtin") => {
                let function = decl.function().to_string();
                let requests = items
                    .into_iter()
                    .map(|item| {
                        Request::Probe(ProbeRequest {
                            evaluator: name.to_string(),
                            argv: Vec::new(),
                            native: Some(function.clone()),
                            input: Some(item),
                            timeout_ms: None,
                        })
                    })
                    .collect();
                Evaluated::Probes {
                    requests,
                    if_none: result(gate.on_empty(), Some(NOTHING_CHECKED.into()), gate.on_empty() != Outcome::Pass),
                }
            }
            Some("command") => {
                let argv = decl.argv();
                let timeout_ms = decl.timeout_ms();
                let requests = items
                    .iter()
                    .map(|item| {
                        let argv: Vec<String> = argv.iter().map(|a| template(a, item)).collect();
                        Request::Probe(ProbeRequest { evaluator: name.to_string(), argv, native: None, input: None, timeout_ms })
                    })
                    .collect();
                Evaluated::Probes {
                    requests,
                    if_none: result(gate.on_empty(), Some(NOTHING_CHECKED.into()), gate.on_empty() != Outcome::Pass),
                }
            }
            Some("human") => Evaluated::Ask { principals: decl.judged_by(), prompt: judge_prompt(gate, name, &decl, &items) },
            Some("llm") => match self.judge_requests(gate, name, &decl, items) {
                Ok(requests) => Evaluated::Probes {
                    requests,
                    if_none: result(gate.on_empty(), Some(NOTHING_CHECKED.into()), gate.on_empty() != Outcome::Pass),
                },
                Err(why) => Evaluated::Done(result(on_error, Some(why), true)),
            },
            other => {
                // A kind the checker refuses (E0116): inconclusive, never PASS.
                let msg = format!("`{}` evaluators are not run by this runtime; inconclusive", other.unwrap_or("?"));
                Evaluated::Done(result(on_error, Some(msg), true))
            }
        }
    }

    /// A `predicate` evaluator: its check, on each item.
    fn predicate_evaluator(
        &self,
        decl: &Decl,
        items: &[Value],
        on_error: Outcome,
        result: &dyn Fn(Outcome, Option<String>, bool) -> EvaluatorResult,
    ) -> EvaluatorResult {
        let fail = decl.fail();
        let mut outcome = Outcome::Pass;
        let mut why = None;
        let mut error = false;
        for item in items {
            let mut env = self.env.clone();
            env.insert("input".into(), item.clone());
            match decl.check() {
                Some(e) => match eval::eval_bool(e, &env) {
                    Ok(true) => {}
                    Ok(false) => {
                        outcome = outcome.max(fail);
                        why = decl.reason().map(str::to_string).or_else(|| Some(format!("{} is false", eval::render(e))));
                    }
                    Err(err) => {
                        outcome = outcome.max(on_error);
                        why = Some(err.message);
                        error = true;
                    }
                },
                None => {
                    outcome = outcome.max(on_error);
                    error = true;
                }
            }
        }
        result(outcome, why, error)
    }

    /// A `schema` evaluator: each item validated against its schema.
    fn schema_evaluator(
        &mut self,
        name: &str,
        decl: &Decl,
        items: &[Value],
        on_error: Outcome,
        result: &dyn Fn(Outcome, Option<String>, bool) -> EvaluatorResult,
    ) -> EvaluatorResult {
        let ty = decl.schema().cloned().unwrap_or(Ty::Any);
        let validator = match self.validator("evaluator", name, &ty) {
            Ok(v) => v,
            Err(e) => return result(on_error, Some(e), true),
        };
        let mut outcome = Outcome::Pass;
        let mut why = None;
        for item in items {
            if let Err(errors) = validator.validate(item) {
                outcome = outcome.max(decl.fail());
                why = decl.reason().map(str::to_string).or_else(|| Some(errors.join("; ")));
            }
        }
        result(outcome, why, false)
    }

    pub(super) fn builtin_evaluator(
        &mut self,
        name: &str,
        args: &[TExpr],
        on_error: Outcome,
        result: &dyn Fn(Outcome, Option<String>, bool) -> EvaluatorResult,
    ) -> EvaluatorResult {
        let Some(arg) = args.first() else { return result(on_error, Some("no argument".into()), true) };
        match name {
            "predicate" => match eval::eval_bool(arg, &self.env) {
                Ok(true) => result(Outcome::Pass, None, false),
                Ok(false) => result(Outcome::Block, Some(format!("{} is false", eval::render(arg))), false),
                Err(e) => result(on_error, Some(e.message), true),
            },
            "exists" => match eval::eval(arg, &self.env) {
                Ok(Value::Null) => result(Outcome::Block, Some(format!("{} is absent", eval::render(arg))), false),
                Ok(_) => result(Outcome::Pass, None, false),
                Err(e) => result(on_error, Some(e.message), true),
            },
            "schema_valid" => {
                let ty = match args.get(1).map(|a| &a.kind) {
                    Some(flow_check::ir::TExprKind::Literal { value }) => match value.as_ref() {
                        IrValue::Type(ty) => ty.clone(),
                        _ => Ty::Any,
                    },
                    _ => Ty::Any,
                };
                // Compiled once per run and type.
                let key = serde_json::to_string(&ty).unwrap_or_default();
                match eval::eval(arg, &self.env) {
                    Ok(value) => match self.validator("schema_valid", &key, &ty) {
                        Ok(v) => match v.validate(&value) {
                            Ok(()) => result(Outcome::Pass, None, false),
                            Err(errors) => result(Outcome::Block, Some(errors.join("; ")), false),
                        },
                        Err(e) => result(on_error, Some(e), true),
                    },
                    Err(e) => result(on_error, Some(e.message), true),
                }
            }
            _ => result(on_error, Some(format!("unknown evaluator `{name}`")), true),
        }
    }

    pub(super) fn on_probe(&mut self, gate: &str, index: usize, item: usize, res: ProbeResult) {
        let Some(g) = self.wf().gates.get(gate).cloned() else { return };
        let on_error = g.on_error();
        let Some(Some(evaluator)) = g.evaluator_items().get(index).copied() else { return };
        let decl = self.decl(evaluator.name).cloned();
        let fail = decl.as_ref().map_or(Outcome::Block, Decl::fail);
        let expect = decl.as_ref().map_or(Expect::ExitZero, Decl::expect);
        let (outcome, error, why) = probe_outcome(&res, expect, decl.as_ref().and_then(Decl::check), fail, on_error, &self.env);
        let Some(rt) = self.gates.get_mut(gate) else { return };
        if let Some(why) = why {
            rt.reasons.entry((index, item)).or_insert(why);
        }
        rt.probes.insert((index, item), Some((outcome, error)));
        rt.pending = rt.pending.saturating_sub(1);
        if rt.pending == 0 {
            self.finish_gate(gate);
        }
    }

    pub(super) fn finish_gate(&mut self, name: &str) {
        let Some(gate) = self.wf().gates.get(name).cloned() else { return };
        let Some(mut rt) = self.gates.remove(name) else { return };
        let reason_prop = gate.reason().map(str::to_string);
        let labels: Vec<String> = gate
            .evaluator_items()
            .iter()
            .map(|e| match e {
                Some(EvaluatorRef { name, args, .. }) => {
                    format!("{name}({})", args.iter().map(eval::render).collect::<Vec<_>>().join(", "))
                }
                None => "?".into(),
            })
            .collect();
        for ((i, _), probe) in &rt.probes {
            // A probe that never answered counts as a BLOCK.
            let (outcome, error) = probe.unwrap_or((Outcome::Block, false));
            let entry = rt.results[*i].get_or_insert_with(|| EvaluatorResult {
                evaluator: labels.get(*i).cloned().unwrap_or_default(),
                outcome: Outcome::Pass,
                reason: None,
                error: false,
            });
            let w = entry.outcome.max(outcome);
            if w != entry.outcome || error {
                entry.reason = Some(match rt.reasons.range((*i, 0)..(*i + 1, 0)).next().map(|(_, r)| r) {
                    Some(why) => why.clone(),
                    None if error => "probe errored or timed out".into(),
                    None => "probe failed".into(),
                });
            }
            entry.outcome = w;
            entry.error |= error;
        }
        let results: Vec<EvaluatorResult> = rt.results.into_iter().flatten().collect();
        let mut outcome = Outcome::Pass;
        for r in &results {
            outcome = outcome.max(r.outcome);
        }
        // Trigger authorisation: only declared agents may trigger.
        let from_agent = events::gate_agent(self.wf(), &gate).map(str::to_string);
        let mut results = results;
        if let Some(trigger) = gate.trigger() {
            let by = trigger.by;
            let who = from_agent.clone().unwrap_or_default();
            if !by.is_empty() && !by.contains(&who) {
                outcome = Outcome::Block;
                results.push(EvaluatorResult {
                    evaluator: "trigger".into(),
                    outcome: Outcome::Block,
                    reason: Some(format!("`{who}` may not trigger this gate")),
                    error: false,
                });
            }
        }
        let reason = if outcome == Outcome::Pass {
            None
        } else {
            reason_prop.or_else(|| results.iter().find(|r| r.outcome != Outcome::Pass).and_then(|r| r.reason.clone()))
        };
        let body = events::gate_recorded(self.wf(), &gate, outcome, reason, results);
        let event = HandlerEvent::from(outcome);
        let ctx = Ctx { node: Some(gate.from.clone()), gate: Some(name.to_string()), event: event.into() };
        let handler = semantics::handler_on(&gate.handlers, event).cloned();
        let action = handler.unwrap_or_else(|| Action {
            name: match outcome {
                Outcome::Pass => ActionKind::Continue,
                Outcome::RequiresDecision => ActionKind::Decide,
                Outcome::Block => ActionKind::Terminate,
            },
            args: Vec::new(),
        });
        self.record_gate(name, body, action, ctx, &rt.cause);
    }

    /// Records a gate's outcome (`body`) and takes the action it calls for.
    pub(super) fn record_gate(&mut self, name: &str, body: Body, action: Action, ctx: Ctx, cause: &Str) {
        if let Body::GateRecorded { outcome, .. } = &body {
            let held = || Effect::RecordGate {
                name: name.to_string(),
                body: Box::new(body.clone()),
                action: action.clone(),
                ctx: Box::new(ctx.clone()),
                cause: held(),
            };
            if !self.admit(Obs::Outcome { gate: name, outcome: outcome.as_str() }, "gate_recorded", cause, held) {
                return;
            }
        }
        let passed_from = match &body {
            Body::GateRecorded { outcome: Outcome::Pass, from, .. } => Some(from.clone()),
            _ => None,
        };
        let outcome = match &body {
            Body::GateRecorded { outcome, .. } => Some(*outcome),
            _ => None,
        };
        let recorded = self.emit(&format!("gate.{name}"), body, Some(cause));
        if let Some(from) = passed_from {
            self.append_on_pass(&from, &recorded);
        }
        // Its declared records come between its outcome and its action.
        if let Some(outcome) = outcome.filter(|_| self.wf().gates.get(name).is_some_and(|g| !g.records.is_empty())) {
            let owner = RecordOwner::Gate { name: name.to_string(), outcome, action, ctx: Box::new(ctx) };
            self.then(Effect::WriteRecords { owner, next: 0, cause: recorded });
            return;
        }
        self.then(Effect::Act { action, ctx: Box::new(ctx), scope: HandlerScope::Gate(name.to_string()), cause: recorded });
    }
}

/// What the judges of a `human` evaluator are asked: the gate, what the
/// evaluator checks, and what it is given.
fn judge_prompt(gate: &Gate, evaluator: &str, decl: &Decl, items: &[Value]) -> String {
    let what = decl.description().map(|d| format!(" ({d})")).unwrap_or_default();
    let input = match items {
        [one] => one.to_string(),
        many => Value::Array(many.to_vec()).to_string(),
    };
    let input: String = input.chars().take(2_000).collect();
    format!(
        "Judge `{evaluator}`{what} at gate `{}` ({} -> {}): approve to pass, reject to fail. Input: {input}",
        gate.name, gate.from, gate.to
    )
}

/// A command probe's outcome, and why when it did not pass. Its exit status
/// decides first: a probe that could not run, timed out, was killed or —
/// when it answers in JSON — exited non-zero is an error (`on_error`, never
/// PASS, whatever it printed); an exit-code probe's non-zero exit is its
/// `fail`; a JSON probe's `check` decides over what it printed.
fn probe_outcome(
    res: &ProbeResult,
    expect: Expect,
    check: Option<&TExpr>,
    fail: Outcome,
    on_error: Outcome,
    env: &eval::Env,
) -> (Outcome, bool, Option<String>) {
    if let Some(error) = &res.error {
        return (on_error, true, Some(format!("the probe errored: {error}")));
    }
    let status = || res.status.clone().unwrap_or_else(|| "did not exit 0".into());
    match (expect, res.exit_code) {
        (_, None) => (on_error, true, Some(format!("the probe {}", status()))),
        (Expect::ExitZero, Some(0)) => (Outcome::Pass, false, None),
        (Expect::ExitZero, Some(_)) => (fail, false, Some(format!("the probe {}", status()))),
        (Expect::Json, Some(0)) => match (&res.output, check) {
            (None, _) => (on_error, true, Some("the probe printed no JSON".into())),
            (Some(_), None) => (Outcome::Pass, false, None),
            (Some(output), Some(check)) => {
                let mut env = env.clone();
                env.insert("output".into(), output.clone());
                match eval::eval_bool(check, &env) {
                    Ok(true) => (Outcome::Pass, false, None),
                    Ok(false) => (fail, false, Some("the probe's output fails its check".into())),
                    Err(e) => (on_error, true, Some(format!("the probe's check cannot be evaluated: {}", e.message))),
                }
            }
        },
        (Expect::Json, Some(_)) => (on_error, true, Some(format!("the probe {} (its output is not trusted)", status()))),
    }
}
