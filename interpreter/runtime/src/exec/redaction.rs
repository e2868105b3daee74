//! Redaction: secrets never get past the data plane. It fails closed: a
//! response whose secrets cannot be taken out is withheld (replaced by an
//! error), never passed on as it was.

use super::*;

/// The shortest secret the runtime accepts: a shorter one would match by
/// chance and could not be redacted reliably, so a run with one does not
/// start (see `driver::secrets_of`).
pub const MIN_SECRET_LEN: usize = 8;

/// What a secret is replaced with.
pub const REDACTED: &str = "[REDACTED]";

impl Executors {
    /// Values to redact from every response before anyone sees it (each at
    /// least [`MIN_SECRET_LEN`] long: the driver refuses shorter ones).
    pub fn with_secrets(mut self, secrets: Vec<String>) -> Executors {
        self.secrets = secrets.into_iter().filter(|s| !s.is_empty()).collect();
        self
    }

    /// Takes every secret out of a response: out of every string (object
    /// keys included, as decoded — however the bytes escaped it) and every
    /// number whose digits hold one. A response that no longer reads as a
    /// response once redacted (a secret in a numeric field) is withheld.
    pub fn redact(&self, response: Response) -> Response {
        if self.secrets.is_empty() {
            return response;
        }
        let Ok(value) = serde_json::to_value(&response) else { return withheld(&response) };
        let mut changed = false;
        let value = redact_value(value, &self.secrets, &mut changed);
        if !changed {
            return response;
        }
        serde_json::from_value::<Response>(value).unwrap_or_else(|_| withheld(&response))
    }
}

impl Executors {
    /// The run's input with every secret taken out (before it is recorded
    /// or given to anyone); whether one was.
    pub fn redact_input(&self, input: Value) -> (Value, bool) {
        let mut changed = false;
        let input = redact_value(input, &self.secrets, &mut changed);
        (input, changed)
    }
}

/// `value` with every secret replaced; `changed` set when one was.
pub fn redact_value(value: Value, secrets: &[String], changed: &mut bool) -> Value {
    match value {
        Value::String(text) => Value::String(redact_text(text, secrets, changed)),
        Value::Number(n) => {
            let digits = n.to_string();
            if secrets.iter().any(|s| digits.contains(s.as_str())) {
                *changed = true;
                Value::String(REDACTED.into())
            } else {
                Value::Number(n)
            }
        }
        Value::Array(items) => Value::Array(items.into_iter().map(|v| redact_value(v, secrets, changed)).collect()),
        Value::Object(map) => {
            Value::Object(map.into_iter().map(|(k, v)| (redact_text(k, secrets, changed), redact_value(v, secrets, changed))).collect())
        }
        other => other,
    }
}

fn redact_text(mut text: String, secrets: &[String], changed: &mut bool) -> String {
    for secret in secrets {
        if text.contains(secret.as_str()) {
            text = text.replace(secret.as_str(), REDACTED);
            *changed = true;
        }
    }
    text
}

/// The response in place of one that held a secret and could not be
/// redacted: an error of its kind, with nothing of what it said.
fn withheld(response: &Response) -> Response {
    const WHY: &str = "the response held a secret that could not be redacted: withheld";
    match response {
        Response::Tool(_) => Response::Tool(ToolResult {
            ok: false,
            error: Some(WHY.into()),
            error_code: Some(ErrorCode::ToolError),
            ..ToolResult::default()
        }),
        // What the turn used is still metered.
        Response::Agent(reply) => {
            Response::Agent(AgentReply { error: Some(WHY.into()), usage: reply.usage.clone(), cost: reply.cost, ..AgentReply::default() })
        }
        Response::Probe(_) => Response::Probe(ProbeResult { error: Some(WHY.into()), ..ProbeResult::default() }),
        Response::Human(answer) => {
            Response::Human(HumanAnswer { decision: answer.decision, by: REDACTED.into(), comment: Some(WHY.into()), output: None })
        }
    }
}
