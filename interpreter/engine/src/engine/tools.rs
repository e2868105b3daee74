//! Tool calls: input validation, confirmation, quotas, budget, the call
//! issued, and its result validated and fed back.

use super::*;

impl Engine {
    /// Makes a tool call: the tool known, its input valid, confirmed by a
    /// human when it must be, allowed by the policies, within its server's
    /// quota and the budgets — then issued.
    pub(super) fn call_tool(&mut self, call: PendingCall, cause: &Str) {
        let Some(node) = self.attempts.get(&call.attempt).and_then(|a| self.node(&a.node)) else { return };
        // The program is shared: the declaration is borrowed through its own handle.
        let program = self.program.clone();
        let Some(decl) = program.decls.get(&call.tool) else {
            self.fail_attempt(&call.attempt, ErrorCode::UnknownTool, format!("no tool `{}`", call.tool), cause);
            return;
        };
        if !self.tool_input_valid(&call, decl, cause) {
            return;
        }
        // A tool that needs confirmation runs only after a human approved
        // this very call (a `confirm.TOOL.ATTEMPT` decision); an approval
        // of anything else in the run does not count.
        if decl.confirm() && !call.confirmed {
            let mut deciders = self.wf().escalate_to();
            if let Some(audit) = decl.audit() {
                for p in audit.visible_to {
                    if !deciders.contains(&p) {
                        deciders.push(p);
                    }
                }
            }
            let prompt = format!("`{}` needs a human confirmation before it runs", call.tool);
            let choices = vec![flow_trace::Decision::Approve, flow_trace::Decision::Reject];
            let decision = Box::new(Decision::Confirm(call));
            self.then(Effect::Ask { decision, principals: deciders, prompt: Some(prompt), decisions: choices, cause: cause.clone() });
            return;
        }
        let obs = Obs::Called { tool: &call.tool, by: call.agent.as_deref() };
        if !self.admit(obs, "tool_call_started", cause, || Effect::CallTool { call: Box::new(call.clone()), cause: held() }) {
            return;
        }
        if !self.within_quota(&call, decl, cause) {
            return;
        }
        self.issue_tool_call(call, &node, decl, cause);
    }

    /// A call refused before it ran: fed back to the agent that asked for
    /// it (which may try something else), else the attempt fails with `code`.
    pub(super) fn refuse_call(&mut self, call: &PendingCall, code: ErrorCode, message: &str, cause: &Str) {
        if call.agent.is_some() {
            self.feed_tool_error(&call.attempt, &call.tool, message, cause);
        } else {
            self.fail_attempt(&call.attempt, code, message, cause);
        }
    }

    /// Whether the call's input is of the tool's input type (else it is refused).
    fn tool_input_valid(&mut self, call: &PendingCall, decl: &Decl, cause: &Str) -> bool {
        let Some(ty) = decl.input_type() else { return true };
        match self.validator("tool.input", &call.tool, ty) {
            Ok(v) => match v.validate(&call.input) {
                Ok(()) => true,
                Err(errors) => {
                    let msg = format!("input of `{}` is invalid: {}", call.tool, errors.join("; "));
                    self.refuse_call(call, ErrorCode::InvalidInput, &msg, cause);
                    false
                }
            },
            Err(e) => {
                self.fail_attempt(&call.attempt, ErrorCode::InvalidSchema, e, cause);
                false
            }
        }
    }

    /// An MCP server's quota: calls per run at that server. Counts the call
    /// when it fits; refuses it when the quota is used up.
    fn within_quota(&mut self, call: &PendingCall, decl: &Decl, cause: &Str) -> bool {
        if decl.variant.as_deref() != Some("mcp") {
            return true;
        }
        let Some(quota) = decl.quota() else { return true };
        let server = decl.server().join(" ");
        let used = self.mcp_calls.entry(server.clone()).or_default();
        if *used < quota {
            *used += 1;
            return true;
        }
        let msg = format!("the quota of {quota} calls at `{server}` is used up");
        self.refuse_call(call, ErrorCode::QuotaExhausted, &msg, cause);
        false
    }

    /// The call reserved against the budgets, recorded (`tool_call_started`)
    /// and issued to the data plane.
    fn issue_tool_call(&mut self, call: PendingCall, node: &Node, decl: &Decl, cause: &Str) {
        let PendingCall { attempt, tool, input, key_template, agent, delay, .. } = call;
        let scopes = self.scopes_for(node, agent.as_deref());
        let amount = Usage { tool_calls: 1, ..Usage::default() };
        let Some(present) = self.reserve(&scopes, &amount, &node.name, cause) else { return };
        let idempotency_key = match key_template {
            Some(t) => Some(template(&t, &input)),
            None if decl.effect() == view::Effect::NonIdempotent => Some(format!("{}:{attempt}", self.cfg.run_id)),
            None => None,
        };
        let input_ref = self.store_as(&input, || format!("{attempt}/input"), Some(cause));
        // Reserved against every enclosing scope (none: nothing to record).
        let reserved_ev = self.record_reserved(&present, &amount, &attempt, cause);
        let request = ToolRequest { tool: tool.clone(), input, idempotency_key: idempotency_key.clone() };
        let request_key = request.key();
        let n = {
            let a = self.attempts.get_mut(&attempt).expect("attempt exists");
            a.tool_calls += 1;
            a.tool_calls
        };
        let producer = self.envelope.producer("tool.", &tool);
        let from_agent = agent.is_some();
        let body = events::tool_call_started(&tool, &node.name, &attempt, agent, request_key, idempotency_key, input_ref);
        let started = self.emit_as(producer, body, Some(&reserved_ev));
        let key = CommandKey::Call { attempt: &attempt, n }.to_key();
        self.waiting.insert(key.clone(), Waiting::Tool { attempt, from_agent, scopes: present, reserved: amount, started, tool });
        self.commands.push(Command { key, request: Request::Tool(request), delay_ms: delay });
    }

    pub(super) fn feed_tool_error(&mut self, attempt_id: &str, tool: &str, message: &str, cause: &Str) {
        let node = self.attempts.get(attempt_id).map(|a| a.node.clone()).unwrap_or_default();
        let agent = self.node(&node).and_then(|n| (n.kind() == NodeKind::Agent).then(|| n.target.first().cloned()).flatten());
        let held =
            || Effect::ToolRefused { attempt: attempt_id.to_string(), tool: tool.to_string(), message: message.to_string(), cause: held() };
        if !self.admit(Obs::Refused { tool, by: agent.as_deref() }, "tool_call_refused", cause, held) {
            return;
        }
        let warn = self.emit("control", events::tool_call_refused(tool, &node, attempt_id, agent, message), Some(cause));
        if let Some(a) = self.attempts.get_mut(attempt_id) {
            a.keep_result(json!({ "tool": tool, "ok": false, "error": message }));
        }
        self.then(Effect::NextTurn { attempt: attempt_id.to_string(), delay: 0, cause: warn });
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_tool(
        &mut self,
        attempt_id: &str,
        from_agent: bool,
        scopes: &[String],
        reserved: &Usage,
        started: &Str,
        tool: &str,
        result: ToolResult,
    ) {
        let output_ref = result.output.as_ref().map(|v| self.store_as(v, || format!("{attempt_id}/{tool}"), Some(started)));
        let producer = self.envelope.producer("tool.", tool);
        let done = self.emit_as(
            producer,
            events::tool_call_completed(tool, attempt_id, result.ok, output_ref, result.error.clone(), result.duration_ms),
            Some(started),
        );
        self.facts_call_completed(attempt_id);
        let used = Usage { tool_calls: 1, ..Usage::default() };
        let changes = self.settle(scopes, reserved, used, attempt_id, &done);
        if changes.is_empty() {
            self.after_tool(attempt_id, from_agent, tool, result, &done);
        } else {
            self.then(Effect::Zones { changes, cause: done.clone() });
            let (attempt, tool, result) = (attempt_id.to_string(), tool.to_string(), Box::new(result));
            self.then(Effect::AfterTool { attempt, from_agent, tool, result, done });
        }
    }

    /// A settled tool result (after the zones it crossed): validated against
    /// the tool's output type, then fed back to the agent that called it, or
    /// the tool node's attempt succeeds or fails.
    pub(super) fn after_tool(&mut self, attempt_id: &str, from_agent: bool, tool: &str, result: ToolResult, done: &Str) {
        if !self.running() {
            return;
        }
        // Output validation against the tool's output type.
        let mut result = result;
        if result.ok {
            let program = self.program.clone();
            if let Some(ty) = program.decls.get(tool).and_then(|d| d.output_type()) {
                match self.validator("tool.output", tool, ty) {
                    Ok(v) => {
                        if let Err(errors) = v.validate(result.output.as_ref().unwrap_or(&Value::Null)) {
                            result.ok = false;
                            result.error = Some(format!("output of `{tool}` is invalid: {}", errors.join("; ")));
                            result.error_code = Some(ErrorCode::InvalidOutput);
                        }
                    }
                    Err(e) => {
                        result.ok = false;
                        result.error = Some(e);
                    }
                }
            }
        }
        if let (true, Some(output)) = (result.ok, &result.output) {
            self.facts_call_returned(attempt_id, tool, output);
        }
        if from_agent {
            if let Some(a) = self.attempts.get_mut(attempt_id) {
                a.keep_result(json!({ "tool": tool, "ok": result.ok, "output": result.output, "error": result.error }));
            }
            self.then(Effect::NextTurn { attempt: attempt_id.to_string(), delay: 0, cause: done.clone() });
            return;
        }
        // A tool node's declared `output` holds too (it may be narrower
        // than the tool's).
        if let (true, Some(problem)) = (result.ok, self.tool_node_output_problem(attempt_id, result.output.as_ref())) {
            result.ok = false;
            result.error = Some(problem);
            result.error_code = Some(ErrorCode::InvalidOutput);
        }
        if result.ok {
            let output = result.output.unwrap_or(Value::Null);
            self.then(Effect::AttemptSucceeded { attempt: attempt_id.to_string(), output, cause: done.clone() });
        } else {
            let code = result.error_code.unwrap_or(ErrorCode::ToolError);
            self.fail_attempt(attempt_id, code, result.error.unwrap_or_else(|| "the tool failed".into()), done);
        }
    }

    /// Why a tool node's result is not of the node's declared `output`
    /// type, if it is not.
    fn tool_node_output_problem(&mut self, attempt_id: &str, output: Option<&Value>) -> Option<String> {
        let node = self.attempts.get(attempt_id).and_then(|a| self.node(&a.node))?;
        let NodeBody::Tool(ToolNode { output_type: Some(ty), .. }) = &node.body else { return None };
        let errors = match self.validator("node.output", &node.name, ty) {
            Ok(v) => v.validate(output.unwrap_or(&Value::Null)).err()?,
            Err(e) => vec![e],
        };
        Some(format!("output of tool node `{}` is not its declared `{ty}`: {}", node.name, errors.join("; ")))
    }
}
