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
        Request::Human(_) => {
            Response::Human(HumanAnswer { decision: flow_trace::Decision::Timeout, by: "control".into(), comment: None, output: None })
        }
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
    /// that its `rate_limit` holds, by the injected clock. A fake clock
    /// simulates delays: nothing is held back.
    pub(super) fn rate_delay(&mut self, program: &Program, decl: &str) -> u64 {
        let Some(rate) = program.decls.get(decl).and_then(|d| d.rate_limit()) else {
            return 0;
        };
        if self.opts.clock.is_fake() {
            return 0;
        }
        let now = self.opts.clock.now_ms();
        self.rates.delay(decl, rate, now)
    }
}

/// The calls of each rate-limited tool or agent in its current window:
/// when each is (or will be) dispatched, in milliseconds.
#[derive(Debug, Default)]
pub(super) struct RateLimiter {
    calls: HashMap<String, VecDeque<u64>>,
}

impl RateLimiter {
    /// How long a call of `name` made at `now` waits so that at most
    /// `count` calls start in any `per_ms` window; the call is counted at
    /// the time it will start.
    pub(super) fn delay(&mut self, name: &str, Rate { count, per_ms }: Rate, now: u64) -> u64 {
        if count == 0 {
            return 0;
        }
        let calls = self.calls.entry(name.to_string()).or_default();
        while calls.front().is_some_and(|t| now.saturating_sub(*t) >= per_ms) {
            calls.pop_front();
        }
        let delay =
            if calls.len() as u64 >= count { calls.front().map(|t| per_ms.saturating_sub(now.saturating_sub(*t))).unwrap_or(0) } else { 0 };
        calls.push_back(now + delay);
        delay
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_limit_holds_calls_back_until_the_window_has_room() {
        let mut rates = RateLimiter::default();
        let two_per_second = Rate { count: 2, per_ms: 1000 };
        assert_eq!(rates.delay("t", two_per_second, 10_000), 0);
        assert_eq!(rates.delay("t", two_per_second, 10_100), 0);
        // The third call in the window waits for the first to leave it.
        assert_eq!(rates.delay("t", two_per_second, 10_200), 800);
        // Other names are limited apart.
        assert_eq!(rates.delay("u", two_per_second, 10_200), 0);
        // Once the window moved on, calls go at once again.
        assert_eq!(rates.delay("t", two_per_second, 12_000), 0);
        assert_eq!(rates.delay("t", Rate { count: 0, per_ms: 1000 }, 12_000), 0);
    }
}
