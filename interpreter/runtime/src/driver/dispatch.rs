//! Dispatch: timeouts and rate limits (through the injected clock).

use super::*;

pub(super) fn timed_out(request: &Request, ms: u64) -> Response {
    match request {
        Request::Agent(_) => Response::Agent(AgentReply { error: Some(format!("timed out after {ms} ms")), ..AgentReply::default() }),
        Request::Tool(_) => Response::Tool(ToolResult {
            ok: false,
            error: Some(format!("timed out after {ms} ms")),
            error_code: Some(flow_trace::ErrorCode::Timeout),
            duration_ms: ms,
            ..ToolResult::default()
        }),
        Request::Probe(_) => Response::Probe(ProbeResult { error: Some(format!("timed out after {ms} ms")), ..ProbeResult::default() }),
        Request::Human(_) => Response::Human(HumanAnswer { decision: flow_trace::Decision::Timeout, by: "control".into(), comment: None }),
    }
}

pub(super) fn max_concurrency(program: &Program, workflow: Option<&str>) -> usize {
    let wf = match workflow {
        Some(w) => program.workflows.get(w),
        None => program.workflows.values().next(),
    };
    match wf.and_then(|w| w.concurrency()) {
        Some(n) if n > 0 => n as usize,
        _ => 8,
    }
}

impl Driver {
    pub(super) fn timeout_for(&self, command: &Command) -> Option<u64> {
        // A turn's or a call's key starts with its attempt's id.
        self.engine.workflow().nodes.get(flow_trace::attempt_node(&command.key))?.timeout_ms()
    }

    /// How long to hold a call of `decl` (a tool or an agent) back so
    /// that its `rate_limit` holds.
    pub(super) fn rate_delay(&mut self, program: &Program, decl: &str) -> u64 {
        let tool = decl;
        let Some(Rate { count, per_ms }) = program.decls.get(tool).and_then(|d| d.rate_limit()) else {
            return 0;
        };
        if self.opts.clock.is_fake() || count == 0 {
            return 0;
        }
        let now = Instant::now();
        let window = Duration::from_millis(per_ms);
        let calls = self.tool_calls.entry(tool.to_string()).or_default();
        while calls.front().is_some_and(|t| now.duration_since(*t) >= window) {
            calls.pop_front();
        }
        let delay = if calls.len() as u64 >= count {
            calls.front().map(|t| window.saturating_sub(now.duration_since(*t)).as_millis() as u64).unwrap_or(0)
        } else {
            0
        };
        calls.push_back(now + Duration::from_millis(delay));
        delay
    }
}
