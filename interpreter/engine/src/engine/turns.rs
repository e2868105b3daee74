//! Agent turns: the request (context, provider, ceilings), the budget it
//! reserves, and the reply settled, checked and acted on.

use super::*;

impl Engine {
    pub(super) fn agent_of(&self, node: &str) -> Option<(String, Decl)> {
        let agent = self.wf().nodes.get(node)?.target.first()?.clone();
        let decl = self.decl(&agent)?.clone();
        Some((agent, decl))
    }

    /// The context an agent sees, by its context policy.
    pub(super) fn context_for(&self, node: &Node, agent: &Decl) -> Value {
        let mut context = self.context_of_mode(node, agent);
        // The blackboards the node reads and the artifacts handed to it,
        // whatever its context mode.
        let rt = self.nodes.get(&node.name);
        if let Some(map) = context.as_object_mut() {
            if let Some(boards) = rt.and_then(|n| n.boards.clone()) {
                map.insert("blackboards".into(), boards);
            }
            if let Some(artifacts) = rt.and_then(|n| n.artifacts.clone()) {
                map.insert("artifacts".into(), artifacts);
            }
            if let Some(message) = rt.and_then(|n| n.message.clone()) {
                map.insert("message".into(), message);
            }
            if let Some(rerun) = self.rerun_context(&node.name) {
                map.insert("rerun".into(), rerun);
            }
        }
        context
    }

    /// What a node that runs again sees of its earlier work: the visit, its
    /// own latest output (`previous`) and the latest outputs of the nodes
    /// that lead into it (`depends_on`), whatever its context mode. A map's
    /// item node runs once per item: an earlier item is not earlier work.
    fn rerun_context(&self, node: &str) -> Option<Value> {
        let visit = self.nodes.get(node).map_or(0, |n| n.visits);
        if visit < 2 || self.index.map_of(node).is_some() {
            return None;
        }
        let mut depends_on = serde_json::Map::new();
        for from in rerun::depends_on(self.wf(), node) {
            if let Some(output) = self.env.get(&from) {
                depends_on.insert(from, output.clone());
            }
        }
        let previous = self.env.get(node).cloned().unwrap_or(Value::Null);
        Some(json!({ "visit": visit, "previous": previous, "depends_on": depends_on }))
    }

    fn context_of_mode(&self, node: &Node, agent: &Decl) -> Value {
        let rt = self.nodes.get(&node.name);
        // A filtered handoff decides what crosses: the slice it passed.
        let input = rt.and_then(|n| n.slice.clone()).or_else(|| rt.map(|n| n.input.clone())).unwrap_or(Value::Null);
        // A delegate sees what its contract's `context` says, else what its
        // node and agent say.
        let contract = rt.and_then(|n| n.contract.as_deref()).and_then(|c| self.decl(c));
        match contract.and_then(|c| c.context()).unwrap_or_else(|| node.agent_context(agent)) {
            ContextMode::Fork => {
                let mut all = serde_json::Map::new();
                for (k, v) in self.env.iter().filter(|(k, _)| !facts::is_runtime_name(k)) {
                    all.insert(k.clone(), v.clone());
                }
                json!({ "input": input, "run": Value::Object(all) })
            }
            ContextMode::Filtered => {
                // Each named field from the node's input, else from the
                // run's input: the slice, and nothing else.
                let fields = agent.context_fields();
                if fields.is_empty() {
                    return json!({ "input": input });
                }
                let run_input = self.env.get("input");
                let mut slice = serde_json::Map::new();
                for field in &fields {
                    let value = input.get(field).or_else(|| run_input.and_then(|r| r.get(field)));
                    if let Some(value) = value {
                        slice.insert(field.clone(), value.clone());
                    }
                }
                json!({ "input": Value::Object(slice) })
            }
            ContextMode::Isolated => json!({ "input": input }),
        }
    }

    /// The provider and model a turn of `agent` at `node` goes to: a
    /// `switch_model` zone's provider, else the first route whose rule
    /// holds, else the agent's own. A task on data labelled private goes
    /// only to a `local` provider: the first of those that is (`None`:
    /// none is, and the turn is not sent).
    pub(super) fn provider_for(&self, node: &Node, agent: &Decl) -> Option<(String, Option<String>)> {
        let mut candidates = self.provider_candidates(node, agent);
        if !semantics::handles_private_data(node, agent) {
            return candidates.next();
        }
        candidates.find(|(p, _)| self.decl(p).is_some_and(Decl::local))
    }

    /// The providers (and models) a turn may go to, in order, evaluated
    /// only as far as they are asked for.
    fn provider_candidates<'a>(&'a self, node: &Node, agent: &'a Decl) -> impl Iterator<Item = (String, Option<String>)> + 'a {
        let default = agent.provider().unwrap_or_default().to_string();
        let model = agent.model().map(str::to_string);
        let routes = agent.routes();
        let mut env = Env::default();
        if !routes.is_empty() {
            env.insert("task".into(), node.task().map(eval::value_to_json).unwrap_or_else(|| json!({})));
        }
        let (fallback, fallback_model) = (default.clone(), model.clone());
        let routed = routes.into_iter().filter_map(move |route| {
            let holds = match (route.when, route.always) {
                (Some(e), _) => eval::eval_bool(e, &env).unwrap_or(false),
                (None, Some(b)) => b,
                (None, None) => false,
            };
            holds.then(|| (route.provider.unwrap_or(&fallback).to_string(), route.model.map(str::to_string).or(fallback_model.clone())))
        });
        let overridden = self.provider_override.clone().map(|p| (p, None));
        overridden.into_iter().chain(routed).chain(std::iter::once((default, model)))
    }

    /// The request of the next turn of `attempt` at `node`.
    #[allow(clippy::too_many_arguments)]
    fn agent_request(
        &self,
        attempt: &Attempt,
        node: &Node,
        agent_name: &str,
        agent: &Decl,
        provider: String,
        model: Option<String>,
        max_tokens: u64,
    ) -> AgentRequest {
        // A delegate works under its contract: it is told the objective
        // and what its output is accepted on.
        let contract = self.nodes.get(&node.name).and_then(|n| n.contract.as_deref()).and_then(|c| self.program.decls.get(c));
        AgentRequest {
            agent: agent_name.to_string(),
            node: node.name.clone(),
            provider,
            model,
            instructions: agent.instructions().map(str::to_string),
            prompt: node.prompt().map(str::to_string),
            context: self.context_for(node, agent),
            output_schema: ty_to_schema(&node.output, &self.program.types),
            objective: contract.and_then(|c| c.objective()).map(str::to_string),
            acceptance: contract.map(|c| c.accept().into_iter().map(eval::render).collect()).unwrap_or_default(),
            tools: agent.tools().iter().map(|t| self.tool_spec(t)).collect(),
            visit: self.nodes[&node.name].visits,
            // A redo of an attempt lost with its executor asks what the
            // lost one asked (a script or a cassette answers it alike).
            attempt_no: attempt.attempt_no - self.nodes[&node.name].lost.min(attempt.attempt_no - 1),
            turn: attempt.turn + 1,
            node_turn: self.node_turns.get(&node.name).copied().unwrap_or(0) + 1,
            repair: attempt.repair.clone(),
            tool_results: attempt.tool_results.clone(),
            max_tokens,
            flags: self.flags.clone(),
        }
    }

    /// What the model is shown of `tool`: its name, `description` and the
    /// schema of its declared `input` (an object schema, as function
    /// calling needs: `{"type": "object"}` for an input that is no record).
    fn tool_spec(&self, tool: &str) -> ToolSpec {
        let Some(decl) = self.program.decls.get(tool) else { return ToolSpec::named(tool) };
        let schema = decl.input_type().map(|ty| ty_to_schema(ty, &self.program.types));
        let parameters = match schema {
            Some(s) if s.get("type").and_then(|t| t.as_str()) == Some("object") => s,
            _ => serde_json::json!({ "type": "object" }),
        };
        ToolSpec { name: tool.to_string(), description: decl.description().map(str::to_string), parameters }
    }

    pub(super) fn next_turn(&mut self, attempt_id: &str, delay: u64, cause: &Str) {
        if !self.running() {
            return;
        }
        // A call the last reply asked for comes first.
        if let Some(call) = self.attempts.get_mut(attempt_id).and_then(|a| a.queued.pop_front()) {
            let agent = self.attempts.get(attempt_id).and_then(|a| self.node(&a.node)).and_then(|n| n.target.first().cloned());
            self.make_call(attempt_id, agent.unwrap_or_default(), call, cause);
            return;
        }
        let Some(attempt) = self.attempts.get(attempt_id).cloned() else { return };
        let Some(node) = self.node(&attempt.node) else { return };
        let Some((agent_name, agent)) = self.agent_of(&node.name) else {
            self.fail_attempt(attempt_id, ErrorCode::UnknownAgent, "the node's agent is not declared", cause);
            return;
        };
        let max_turns = ceilings::max_turns(&node, &agent).min(u32::MAX as u64) as u32;
        if attempt.turn >= max_turns {
            self.fail_attempt(attempt_id, ErrorCode::MaxTurns, format!("no output after {max_turns} turns"), cause);
            return;
        }
        let Some((provider, model)) = self.provider_for(&node, &agent) else {
            let message = "the task handles data labelled private and no provider it may go to is `local`: the turn was not sent";
            self.fail_attempt(attempt_id, ErrorCode::NotLocal, message, cause);
            return;
        };
        let ceiling = TurnCeiling::of(&agent, self.decl(&provider));
        let max_tokens = ceiling.max_tokens;
        let request = self.agent_request(&attempt, &node, &agent_name, &agent, provider, model, max_tokens);
        // What the request can hold, held against the declared input
        // ceiling before anything is reserved or sent.
        let bound = prompt::input_token_bound(&request);
        let input_from = match (agent.max_input_tokens(), ceiling.max_input_tokens) {
            (Some(_), _) => InputCeiling::Agent,
            (None, Some(_)) => InputCeiling::Provider,
            (None, None) => InputCeiling::Request,
        };
        if let Some(message) = too_large(&request, bound, ceiling.max_input_tokens, input_from) {
            self.fail_attempt(attempt_id, ErrorCode::InputTooLarge, message, cause);
            return;
        }
        // The reservation is the turn's ceiling: the declared input limit
        // (else what the request can hold) and a full completion, at the
        // provider's prices — what the static bound counts per turn.
        let input = ceiling.max_input_tokens.unwrap_or(bound);
        let limits = TurnLimits { input, output: max_tokens, input_from };
        let scopes = self.scopes_for(&node, Some(&agent_name));
        let amount = Usage { tokens: input + max_tokens, cost: ceiling.cost_with_input(input), ..Usage::default() };
        let Some(present) = self.reserve(&scopes, &amount, &node.name, cause) else { return };
        self.record_reserved(&present, &amount, attempt_id, cause);
        self.node_turns.insert(node.name.clone(), request.node_turn);
        let a = self.attempts.get_mut(attempt_id).expect("attempt exists");
        a.turn += 1;
        let key = CommandKey::Turn { attempt: attempt_id, turn: a.turn }.to_key();
        let provider = request.provider.clone();
        self.waiting.insert(
            key.clone(),
            Waiting::Turn { attempt: attempt_id.to_string(), provider, reserved: amount, scopes: present, ceiling: limits },
        );
        self.commands.push(Command { key, request: Request::Agent(Box::new(request)), delay_ms: delay });
    }

    pub(super) fn on_turn(
        &mut self,
        attempt_id: &str,
        provider: &str,
        reserved: &Usage,
        scopes: &[String],
        ceiling: TurnLimits,
        reply: AgentReply,
    ) {
        let Some(attempt) = self.attempts.get(attempt_id).cloned() else { return };
        let Some(node) = self.node(&attempt.node) else { return };
        let agent = node.target.first().cloned().unwrap_or_default();
        let provider = provider.to_string();
        let used = Usage { tokens: reply.usage.input_tokens + reply.usage.output_tokens, cost: reply.cost, ..Usage::default() };
        let reply_value = reply.output.clone().or_else(|| match reply.tool_calls.as_slice() {
            [] => None,
            [c] => Some(json!({ "tool_call": c.tool, "input": c.input })),
            calls => Some(json!({ "tool_calls": calls.iter().map(|c| json!({ "tool": c.tool, "input": c.input })).collect::<Vec<_>>() })),
        });
        let reply_ref = reply_value.as_ref().map(|v| self.store(v, &format!("{attempt_id}/turn{}", attempt.turn), Some(&attempt.started)));
        let request_key = CommandKey::Turn { attempt: attempt_id, turn: attempt.turn }.to_key();
        let error = reply_error(&reply);
        let turn = self.emit(
            &format!("agent.{agent}"),
            Body::AgentTurn {
                schema_version: V,
                agent: agent.clone(),
                node: node.name.clone(),
                attempt_id: attempt_id.to_string(),
                provider,
                model: reply.model.clone(),
                request_key,
                usage: used.clone(),
                input_tokens: Some(reply.usage.input_tokens),
                output_tokens: Some(reply.usage.output_tokens),
                finish_reasons: reply.finish_reasons.clone(),
                reply: reply_ref,
                error: error.clone(),
            },
            Some(&attempt.started),
        );
        self.facts_turn(&node.name, used.tokens);
        let changes = self.settle(scopes, reserved, used, attempt_id, &turn);
        self.check_ceilings(attempt_id, attempt.turn, &agent, ceiling, reserved, &reply, &turn);
        // A turn that used more than its scope had left exhausts it: that
        // is recorded and handled before any zone the overrun crossed.
        for scope in scopes {
            if let Some(ex) = self.budgets.used_up(scope) {
                self.then(Effect::Exhausted { ex, node: Some(node.name.clone()), cause: turn });
                return;
            }
        }
        if changes.is_empty() {
            self.act_on_reply(attempt_id, &node.name, agent, reply, error, &turn);
        } else {
            self.then(Effect::Zones { changes, cause: turn.clone() });
            let (attempt, node, reply) = (attempt_id.to_string(), node.name.clone(), Box::new(reply));
            self.then(Effect::ActOnReply { attempt, node, agent, reply, error, turn });
        }
    }

    /// Makes one call a reply asked for, if the agent and the tool allow
    /// it (else it is refused and the agent told): named by the provider's
    /// id, else by its place among the attempt's calls.
    fn make_call(&mut self, attempt_id: &str, agent: String, call: ToolCall, cause: &Str) {
        let Some(a) = self.attempts.get_mut(attempt_id) else { return };
        let id = call.id.clone().unwrap_or_else(|| format!("call_{}", a.tool_results.len() + 1));
        a.calling = Some((id, call.input.clone(), a.turn));
        let allowed_by_agent = self.decl(&agent).map(|d| d.holds_tool(&call.tool)).unwrap_or(false);
        let allowed_by_tool = self.decl(&call.tool).map(|d| d.allows_agent(&agent)).unwrap_or(false);
        if !(allowed_by_agent && allowed_by_tool) {
            let message = format!("agent `{agent}` may not call `{}`", call.tool);
            self.then(Effect::ToolRefused { attempt: attempt_id.to_string(), tool: call.tool, message, cause: cause.clone() });
            return;
        }
        let call = PendingCall {
            attempt: attempt_id.to_string(),
            tool: call.tool,
            input: call.input,
            key_template: None,
            agent: Some(agent),
            delay: 0,
            confirmed: false,
        };
        self.then(Effect::CallTool { call: Box::new(call), cause: cause.clone() });
    }

    /// What a settled turn's reply leads to: a provider error fails the
    /// attempt; a tool call is made if the agent and the tool allow it; an
    /// output is validated (repaired while repairs are left) and completes
    /// the attempt.
    pub(super) fn act_on_reply(
        &mut self,
        attempt_id: &str,
        node: &str,
        agent: String,
        reply: AgentReply,
        error: Option<String>,
        turn: &Str,
    ) {
        if !self.running() {
            return;
        }
        let Some(node) = self.node(node) else { return };
        if let Some(err) = reply.error {
            self.fail_attempt(attempt_id, ErrorCode::ProviderError, err, turn);
            return;
        }
        let mut calls = reply.tool_calls.into_iter();
        if let Some(first) = calls.next() {
            // Every call the reply asks for is made, in order, before the
            // next turn: the rest wait in the attempt.
            if let Some(a) = self.attempts.get_mut(attempt_id) {
                a.queued = calls.collect();
            }
            self.make_call(attempt_id, agent, first, turn);
            return;
        }
        let Some(output) = reply.output else {
            self.repair_or_fail(attempt_id, error.unwrap_or_default(), turn);
            return;
        };
        match self.validator("node.output", &node.name, &node.output) {
            Ok(v) => match v.validate(&output) {
                Ok(()) => self.then(Effect::AttemptSucceeded { attempt: attempt_id.to_string(), output, cause: turn.clone() }),
                Err(errors) => self.repair_or_fail(attempt_id, format!("invalid output: {}", errors.join("; ")), turn),
            },
            Err(e) => self.fail_attempt(attempt_id, ErrorCode::InvalidSchema, e, turn),
        }
    }

    pub(super) fn repair_or_fail(&mut self, attempt_id: &str, error: String, cause: &Str) {
        let Some(a) = self.attempts.get_mut(attempt_id) else { return };
        if a.repair_left > 0 {
            a.repair_left -= 1;
            a.repair = Some(error);
            self.then(Effect::NextTurn { attempt: attempt_id.to_string(), delay: 0, cause: cause.clone() });
        } else {
            self.fail_attempt(attempt_id, ErrorCode::InvalidOutput, error, cause);
        }
    }

    /// A turn that reports more than the ceilings its reservation assumed
    /// (input above `max_input_tokens` or what the request can hold, output
    /// above `max_tokens`, money above both at the provider's prices) is
    /// metered as reported, and recorded as a warning and counted: the
    /// static budget bounds assume the ceilings hold.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn check_ceilings(
        &mut self,
        attempt_id: &str,
        turn: u32,
        agent: &str,
        ceiling: TurnLimits,
        reserved: &Usage,
        reply: &AgentReply,
        cause: &Str,
    ) {
        let mut over = Vec::new();
        if reply.usage.input_tokens > ceiling.input {
            let what = match ceiling.input_from {
                InputCeiling::Agent => format!("the agent's `max_input_tokens` of {}", ceiling.input),
                InputCeiling::Provider => format!("the provider's `max_input_tokens` of {}", ceiling.input),
                InputCeiling::Request => format!("the {} its request can hold", ceiling.input),
            };
            over.push(format!("{} input tokens, over {what}", reply.usage.input_tokens));
        }
        if reply.usage.output_tokens > ceiling.output {
            over.push(format!("{} output tokens, over `max_tokens` of {}", reply.usage.output_tokens, ceiling.output));
        }
        if reply.cost > reserved.cost + 1e-9 {
            over.push(format!("a cost of ${:.4}, over the ${:.4} the turn's ceilings cost", reply.cost, reserved.cost));
        }
        if over.is_empty() {
            return;
        }
        self.ceiling_breaches += 1;
        let message = format!(
            "turn {turn} of `{attempt_id}` (agent `{agent}`) reported {}: metered as reported; the static budget bounds do not cover it",
            over.join(", ")
        );
        self.emit("control", events::warning(message), Some(cause));
    }
}

/// Why a turn is not sent, if it is not: the bound of what its request can
/// hold is over the declared `max_input_tokens`.
fn too_large(request: &AgentRequest, bound: u64, limit: Option<u64>, from: InputCeiling) -> Option<String> {
    let limit = limit.filter(|limit| bound > *limit)?;
    let whose = match from {
        InputCeiling::Agent => format!("agent `{}`", request.agent),
        _ => format!("provider `{}`", request.provider),
    };
    Some(format!(
        "turn {} was not sent: its request may hold up to {bound} input tokens, over the `max_input_tokens` of {limit} of {whose}",
        request.turn
    ))
}

/// What is wrong with a reply, if anything: the provider's error, or a
/// reply that is neither an output nor a tool call.
fn reply_error(reply: &AgentReply) -> Option<String> {
    reply.error.clone().or_else(|| {
        (reply.output.is_none() && reply.tool_calls.is_empty()).then(|| match &reply.text {
            Some(t) => format!("the reply is not JSON: {}", t.chars().take(120).collect::<String>()),
            None => "empty reply".to_string(),
        })
    })
}
