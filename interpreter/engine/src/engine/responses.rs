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
        if let Response::Human(answer) = &response {
            // Refused before the command is taken: it stays outstanding.
            self.admissible_timeout(key, answer)?;
        }
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
            (Waiting::Human { decision, request_event, .. }, Response::Human(answer)) => self.on_decision(decision, &request_event, answer),
            (Waiting::Probe { gate, index, item }, Response::Probe(result)) => self.on_probe(&gate, index, item, result),
            (Waiting::Judge { gate, index, item }, Response::Agent(reply)) => self.on_judge(&gate, index, item, reply),
            (w, r) => return Err(format!("response {r:?} does not answer {w:?}")),
        }
        Ok(())
    }

    /// Only the control plane's clock says a decision timed out: a
    /// `timeout` answer needs a subject with a `timeout` whose deadline has
    /// passed (a replay re-applies a recorded one).
    fn admissible_timeout(&self, key: &str, answer: &HumanAnswer) -> Result<(), String> {
        let Some((_, _, Waiting::Human { decision, expires_at, .. })) = self.waiting.by_key.get(key) else { return Ok(()) };
        if answer.decision != flow_trace::Decision::Timeout || self.replaying {
            return Ok(());
        }
        let now = crate::clock::rfc3339(self.now());
        match expires_at {
            None => Err(format!("`{}` has no timeout: a decision on it cannot time out", decision.subject())),
            Some(at) if now.as_str() < at.as_str() => {
                Err(format!("the decision on `{}` is not due to time out before {at} (it is {now})", decision.subject()))
            }
            Some(_) => Ok(()),
        }
    }
}
