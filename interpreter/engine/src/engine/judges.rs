//! Judges. A `human` evaluator asks its principals (`by`) once per
//! evaluation, under `judge.GATE.INDEX`: approve is PASS, reject the
//! evaluator's `fail` outcome. An `llm` evaluator: a judging agent's model
//! turn per item, whose typed
//! verdict (`{ pass, reason }`) is the evaluator's outcome — PASS, else the
//! evaluator's `fail` outcome; an error, a reply that is not a verdict or a
//! request over the input ceiling gives the gate's `on_error` outcome
//! (fail-closed). The judge is offered no tools. Its turns are not metered
//! against budgets, so the verifier refuses an `llm` evaluator where a
//! token or cost budget would have to count them (E0116).

use super::*;

impl Engine {
    /// One judge turn per item, as requests for the data plane.
    pub(super) fn judge_requests(&mut self, gate: &Gate, evaluator: &str, decl: &Decl, items: Vec<Value>) -> Result<Vec<Request>, String> {
        let judge = decl.judge().ok_or_else(|| format!("evaluator `{evaluator}` names no judge"))?.to_string();
        let agent = self.decl(&judge).cloned().ok_or_else(|| format!("no agent `{judge}`"))?;
        let provider = agent.provider().unwrap_or_default().to_string();
        let ceiling = TurnCeiling::of(&agent, self.decl(&provider));
        let visit = self.nodes.get(&gate.from).map(|n| n.visits).unwrap_or(0);
        let mut prompt = format!(
            "You are the judge `{evaluator}` of gate `{}` ({} -> {}). Judge the input: answer `pass` (true when it passes) and `reason`.",
            gate.name, gate.from, gate.to
        );
        if let Some(rubric) = decl.rubric() {
            prompt.push_str(&format!("\n\nRubric: {rubric}"));
        }
        let mut requests = Vec::new();
        for item in items {
            let turns = self.node_turns.entry(format!("judge:{}", gate.name)).or_default();
            *turns += 1;
            let request = AgentRequest {
                agent: judge.clone(),
                node: gate.name.clone(),
                provider: provider.clone(),
                model: agent.model().map(str::to_string),
                instructions: agent.instructions().map(str::to_string),
                prompt: Some(prompt.clone()),
                context: json!({ "input": item }),
                output_schema: verdict_schema(),
                objective: None,
                acceptance: Vec::new(),
                tools: Vec::new(),
                visit,
                attempt_no: 1,
                turn: 1,
                node_turn: *turns,
                repair: None,
                tool_results: Vec::new(),
                max_tokens: ceiling.max_tokens,
                flags: Vec::new(),
            };
            let bound = prompt::input_token_bound(&request);
            if let Some(limit) = ceiling.max_input_tokens.filter(|limit| bound > *limit) {
                return Err(format!("the judge's request may hold {bound} input tokens, over the `max_input_tokens` of {limit}"));
            }
            requests.push(Request::Agent(Box::new(request)));
        }
        Ok(requests)
    }

    /// The judges of a `human` evaluator decided: approve passes, anything
    /// else is the evaluator's `fail` outcome; then the gate finishes once
    /// nothing is pending.
    pub(super) fn decide_judge(&mut self, gate: &str, index: usize, answer: HumanAnswer, request_event: &str) {
        let subject = semantics::judge_subject(gate, index);
        let program = self.program.clone();
        let outcome = match semantics::judge_decl(&program, self.wf(), &subject) {
            Some(decl) => semantics::judge_verdict(decl, answer.decision),
            None => Outcome::Block,
        };
        self.record_applied(&subject, &answer, flow_trace::Applied::Judged(outcome), request_event);
        let Some(rt) = self.gates.get_mut(gate) else { return };
        rt.probes.insert((index, 0), Some((outcome, false)));
        if outcome != Outcome::Pass {
            let why = answer.comment.clone().unwrap_or_else(|| format!("`{}` decided {}", answer.by, answer.decision));
            rt.reasons.insert((index, 0), why);
        }
        rt.pending = rt.pending.saturating_sub(1);
        if rt.pending == 0 {
            self.finish_gate(gate);
        }
    }

    /// A judge's reply: its verdict on the item, then the gate finishes
    /// once nothing is pending.
    pub(super) fn on_judge(&mut self, gate: &str, index: usize, item: usize, reply: AgentReply) {
        let Some(g) = self.wf().gates.get(gate).cloned() else { return };
        let on_error = g.on_error();
        let Some(Some(evaluator)) = g.evaluator_items().get(index).copied() else { return };
        let fail = self.decl(evaluator.name).map_or(Outcome::Block, Decl::fail);
        let verdict = match (&reply.error, &reply.output) {
            (Some(e), _) => Err(format!("the judge failed: {e}")),
            (None, Some(Value::Object(o))) => match (o.get("pass").and_then(Value::as_bool), o.get("reason").and_then(Value::as_str)) {
                (Some(pass), reason) => Ok((pass, reason.unwrap_or_default().to_string())),
                (None, _) => Err("the judge's reply has no boolean `pass`".to_string()),
            },
            _ => Err("the judge gave no verdict".to_string()),
        };
        let (outcome, error, why) = match verdict {
            Ok((true, reason)) => (Outcome::Pass, false, reason),
            Ok((false, reason)) => (fail, false, reason),
            Err(why) => (on_error, true, why),
        };
        let Some(rt) = self.gates.get_mut(gate) else { return };
        rt.probes.insert((index, item), Some((outcome, error)));
        if outcome != Outcome::Pass && !why.is_empty() {
            rt.reasons.insert((index, item), why);
        }
        rt.pending = rt.pending.saturating_sub(1);
        if rt.pending == 0 {
            self.finish_gate(gate);
        }
    }
}

/// What a judge answers: its verdict and why.
fn verdict_schema() -> Value {
    json!({
        "type": "object",
        "properties": { "pass": { "type": "boolean" }, "reason": { "type": "string" } },
        "required": ["pass", "reason"],
        "additionalProperties": false
    })
}
