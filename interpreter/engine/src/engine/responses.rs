//! Responses from the data plane, each fed at one instant to what waits
//! for it.

use super::*;

impl Engine {
    /// Feeds a data-plane response to the command `key`. The clock is read
    /// once: what the response leads to happens at that instant.
    pub fn on_response(&mut self, key: &str, response: Response) -> Result<(), String> {
        self.at_one_instant(|engine| engine.handle_response(key, response))
    }

    pub(super) fn handle_response(&mut self, key: &str, response: Response) -> Result<(), String> {
        let Some(waiting) = self.waiting.remove(key) else {
            return Err(format!("no outstanding command `{key}`"));
        };
        if !self.running() {
            return Ok(());
        }
        if let Some(ex) = self.budgets.out_of_time(self.elapsed()).filter(|_| !self.replaying) {
            let cause = self.events.last().map(|e| e.event_id.clone()).unwrap_or_default();
            self.then(Effect::Exhausted { ex, node: None, cause });
            return Ok(());
        }
        match (waiting, response) {
            (Waiting::Turn { attempt, provider, reserved, scopes, ceiling }, Response::Agent(reply)) => {
                self.on_turn(&attempt, &provider, &reserved, &scopes, ceiling, reply)
            }
            (Waiting::Tool { attempt, from_agent, scopes, reserved, started, tool }, Response::Tool(result)) => {
                self.on_tool(&attempt, from_agent, &scopes, &reserved, &started, &tool, result)
            }
            (Waiting::Human { decision, request_event, expires_at }, Response::Human(answer)) => {
                // Only the control plane's clock says a decision timed out.
                if answer.decision == flow_trace::Decision::Timeout {
                    let now = crate::clock::rfc3339(self.now());
                    match &expires_at {
                        None => return Err(format!("`{}` has no timeout: a decision on it cannot time out", decision.subject())),
                        Some(at) if now.as_str() < at.as_str() && !self.replaying => {
                            return Err(format!(
                                "the decision on `{}` is not due to time out before {at} (it is {now})",
                                decision.subject()
                            ))
                        }
                        Some(_) => {}
                    }
                }
                self.on_decision(decision, &request_event, answer)
            }
            (Waiting::Probe { gate, index, item }, Response::Probe(result)) => self.on_probe(&gate, index, item, result),
            (w, r) => return Err(format!("response {r:?} does not answer {w:?}")),
        }
        Ok(())
    }
}
