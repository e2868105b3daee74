//! Tool calls: input validation, confirmation, quotas, budget, the call
//! issued, and its result validated and fed back.

use super::*;

impl Engine {
    pub(super) fn tool_node_call(&mut self, node: &Node, attempt: &str, delay: u64, cause: &str) {
        let Some(tool) = node.target.first().cloned() else { return };
        let input = match node.args() {
            Some(args) => {
                let mut out = serde_json::Map::new();
                for (k, v) in args {
                    let value = match v {
                        IrValue::Expr(e) => match eval::eval(e, &self.env) {
                            Ok(v) => v,
                            Err(e) => {
                                self.attempt_failed(attempt, ErrorCode::EvalError, &format!("argument `{k}`: {}", e.message), cause);
                                return;
                            }
                        },
                        other => eval::value_to_json(other),
                    };
                    out.insert(k.clone(), value);
                }
                Value::Object(out)
            }
            _ => self.nodes[&node.name].input.clone(),
        };
        let key_template = node.idempotency_key().map(str::to_string);
        self.call_tool(attempt, &tool, input, key_template, None, delay, cause);
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn call_tool(
        &mut self,
        attempt_id: &str,
        tool: &str,
        input: Value,
        key_template: Option<String>,
        agent: Option<&str>,
        delay: u64,
        cause: &str,
    ) {
        let Some(node) = self.attempts.get(attempt_id).and_then(|a| self.node(&a.node)) else { return };
        // The program is shared: the declaration is borrowed through its own handle.
        let program = self.program.clone();
        let Some(decl) = program.decls.get(tool) else {
            self.attempt_failed(attempt_id, ErrorCode::UnknownTool, &format!("no tool `{tool}`"), cause);
            return;
        };
        // The tool's input is validated before the call.
        if let Some(ty) = decl.input_type() {
            match self.validator("tool.input", tool, ty) {
                Ok(v) => {
                    if let Err(errors) = v.validate(&input) {
                        let msg = format!("input of `{tool}` is invalid: {}", errors.join("; "));
                        if agent.is_some() {
                            self.feed_tool_error(attempt_id, tool, &msg, cause);
                        } else {
                            self.attempt_failed(attempt_id, ErrorCode::InvalidInput, &msg, cause);
                        }
                        return;
                    }
                }
                Err(e) => {
                    self.attempt_failed(attempt_id, ErrorCode::InvalidSchema, &e, cause);
                    return;
                }
            }
        }
        // A tool that needs confirmation runs only after a human approved
        // something in this run (an approval node or a gate decision);
        // otherwise the control plane asks first.
        if decl.confirm() && self.approvals == 0 {
            let mut deciders = self.wf().escalate_to();
            if let Some(audit) = decl.audit() {
                deciders.extend(audit.visible_to);
            }
            self.ask(
                Decision::Confirm {
                    attempt: attempt_id.to_string(),
                    tool: tool.to_string(),
                    input,
                    key_template,
                    agent: agent.map(str::to_string),
                },
                deciders,
                Some(format!("`{tool}` needs a human confirmation before it runs")),
                vec![flow_trace::Decision::Approve, flow_trace::Decision::Reject],
                cause,
            );
            return;
        }
        let held = || Held::CallTool {
            attempt: attempt_id.to_string(),
            tool: tool.to_string(),
            input: input.clone(),
            key_template: key_template.clone(),
            agent: agent.map(str::to_string),
            delay,
        };
        if !self.admit(Obs::Called { tool, by: agent }, "tool_call_started", cause, held) {
            return;
        }
        // An MCP server's quota: calls per run at that server.
        if decl.variant.as_deref() == Some("mcp") {
            if let Some(quota) = decl.quota() {
                let server = decl.server().join(" ");
                let used = self.mcp_calls.entry(server.clone()).or_default();
                if *used >= quota {
                    let msg = format!("the quota of {quota} calls at `{server}` is used up");
                    if agent.is_some() {
                        self.feed_tool_error(attempt_id, tool, &msg, cause);
                    } else {
                        self.attempt_failed(attempt_id, ErrorCode::QuotaExhausted, &msg, cause);
                    }
                    return;
                }
                *used += 1;
            }
        }
        let scopes = self.scopes_for(&node, agent);
        let amount = Usage { tool_calls: 1, ..Usage::default() };
        let present = match self.budgets.reserve(&scopes, &amount, false) {
            Ok(p) => p,
            Err(ex) => {
                self.exhausted(ex, Some(&node.name), cause);
                return;
            }
        };
        let idempotency_key = match key_template {
            Some(t) => Some(template(&t, &input)),
            None if decl.effect() == Effect::NonIdempotent => Some(format!("{}:{attempt_id}", self.cfg.run_id)),
            None => None,
        };
        let request = ToolRequest { tool: tool.to_string(), input: input.clone(), idempotency_key: idempotency_key.clone() };
        let request_key = request.key();
        let input_ref = self.store_as(&input, || format!("{attempt_id}/input"), Some(cause));
        // Reserved against every enclosing scope (none: nothing to record).
        let reserved_ev = if present.is_empty() {
            Str::from(cause)
        } else {
            self.emit(
                "control",
                Body::BudgetReserved {
                    schema_version: V,
                    scope: present.join(","),
                    attempt_id: attempt_id.to_string(),
                    amount: amount.clone(),
                },
                Some(cause),
            )
        };
        let n = {
            let a = self.attempts.get_mut(attempt_id).expect("attempt exists");
            a.tool_calls += 1;
            a.tool_calls
        };
        let producer = self.envelope.producer("tool.", tool);
        let started = self.emit_as(
            producer,
            events::tool_call_started(tool, &node.name, attempt_id, agent.map(str::to_string), request_key, idempotency_key, input_ref),
            Some(&reserved_ev),
        );
        let key = CommandKey::Call { attempt: attempt_id, n }.to_key();
        self.waiting.insert(
            key.clone(),
            Waiting::Tool {
                attempt: attempt_id.to_string(),
                from_agent: agent.is_some(),
                scopes: present,
                reserved: amount,
                started,
                tool: tool.to_string(),
            },
        );
        self.commands.push(Command { key, request: Request::Tool(request), delay_ms: delay });
    }

    pub(super) fn feed_tool_error(&mut self, attempt_id: &str, tool: &str, message: &str, cause: &str) {
        let node = self.attempts.get(attempt_id).map(|a| a.node.clone()).unwrap_or_default();
        let agent = self.node(&node).and_then(|n| (n.kind == NodeKind::Agent).then(|| n.target.first().cloned()).flatten());
        let held = || Held::ToolRefused { attempt: attempt_id.to_string(), tool: tool.to_string(), message: message.to_string() };
        if !self.admit(Obs::Refused { tool, by: agent.as_deref() }, "tool_call_refused", cause, held) {
            return;
        }
        let warn = self.emit("control", events::tool_call_refused(tool, &node, attempt_id, agent, message), Some(cause));
        if let Some(a) = self.attempts.get_mut(attempt_id) {
            a.tool_results.push(json!({ "tool": tool, "ok": false, "error": message }));
        }
        self.next_turn(attempt_id, 0, &warn);
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_tool(
        &mut self,
        attempt_id: &str,
        from_agent: bool,
        scopes: &[String],
        reserved: &Usage,
        started: &str,
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
        let used = Usage { tool_calls: 1, ..Usage::default() };
        let changes = if scopes.is_empty() { Vec::new() } else { self.budgets.settle(scopes, reserved, &used, self.elapsed()) };
        if let Some(first) = scopes.first() {
            let remaining = self.budgets.scopes[first].remaining();
            self.emit(
                "control",
                Body::BudgetSettled { schema_version: V, scope: scopes.join(","), attempt_id: attempt_id.to_string(), used, remaining },
                Some(&done),
            );
        }
        self.zone_changes(changes, &done);
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
        if from_agent {
            if let Some(a) = self.attempts.get_mut(attempt_id) {
                a.tool_results.push(json!({ "tool": tool, "ok": result.ok, "output": result.output, "error": result.error }));
            }
            self.next_turn(attempt_id, 0, &done);
            return;
        }
        if result.ok {
            let output = result.output.unwrap_or(Value::Null);
            self.attempt_succeeded(attempt_id, output, &done);
        } else {
            let code = result.error_code.unwrap_or(ErrorCode::ToolError);
            self.attempt_failed(attempt_id, code, result.error.as_deref().unwrap_or("the tool failed"), &done);
        }
    }
}
