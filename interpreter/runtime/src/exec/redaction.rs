//! Redaction: secrets never get past the data plane.

use super::*;

impl Executors {
    /// Values to redact from every response before anyone sees it.
    pub fn with_secrets(mut self, secrets: Vec<String>) -> Executors {
        self.secrets = secrets.into_iter().filter(|s| s.len() >= 4).collect();
        self
    }

    /// Replaces every secret in a response with `[REDACTED]`.
    pub fn redact(&self, response: Response) -> Response {
        if self.secrets.is_empty() {
            return response;
        }
        let Ok(mut text) = serde_json::to_string(&response) else { return response };
        let mut changed = false;
        for secret in &self.secrets {
            // As it appears inside a JSON string.
            let escaped = serde_json::to_string(secret).unwrap_or_default();
            let escaped = escaped.trim_matches('"');
            if !escaped.is_empty() && text.contains(escaped) {
                text = text.replace(escaped, "[REDACTED]");
                changed = true;
            }
        }
        if !changed {
            return response;
        }
        serde_json::from_str(&text).unwrap_or(response)
    }
}
