//! HTTP tools.

use super::*;

/// Percent-encodes a value substituted into a URL.
pub fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl Executors {
    /// An `http` tool: `url` with `{field}`s filled (percent-encoded) from
    /// the input; the input as the JSON body for POST, PUT and PATCH; the
    /// idempotency key as an `Idempotency-Key` header; a 2xx JSON reply is
    /// the output.
    pub(super) async fn http_tool(&self, decl: &Decl, request: &ToolRequest, timeout_ms: Option<u64>) -> ToolResult {
        let fail = |message: String, code: Option<ErrorCode>| ToolResult {
            ok: false,
            error: Some(message),
            error_code: code,
            ..ToolResult::default()
        };
        let Some(url) = decl.url() else { return fail("http tool without a url".into(), None) };
        let url = template_with(url, &request.input, percent_encode);
        let method = decl.method().to_ascii_uppercase();
        let method = match reqwest::Method::from_bytes(method.as_bytes()) {
            Ok(m) => m,
            Err(_) => return fail(format!("unknown HTTP method `{method}`"), None),
        };
        let mut builder = self.client().request(method.clone(), &url);
        for (name, value) in decl.headers() {
            builder = builder.header(name, value);
        }
        if let Some(key) = &request.idempotency_key {
            builder = builder.header("Idempotency-Key", key.as_str());
        }
        if matches!(method, reqwest::Method::POST | reqwest::Method::PUT | reqwest::Method::PATCH) {
            builder = builder.json(&request.input);
        }
        if let Some(ms) = timeout_ms {
            builder = builder.timeout(Duration::from_millis(ms));
        }
        let response = match builder.send().await {
            Ok(r) => r,
            Err(e) if e.is_timeout() => return fail(format!("{method} {url} timed out"), Some(ErrorCode::Timeout)),
            Err(e) => return fail(format!("{method} {url} failed: {e}"), None),
        };
        let status = response.status();
        let body = match response.text().await {
            Ok(b) => b,
            Err(e) => return fail(format!("{method} {url}: cannot read the reply: {e}"), None),
        };
        if !status.is_success() {
            return fail(format!("{method} {url} answered {status}: {}", body.chars().take(200).collect::<String>()), None);
        }
        if body.trim().is_empty() {
            return ToolResult { ok: true, output: Some(Value::Null), ..ToolResult::default() };
        }
        match serde_json::from_str(&body) {
            Ok(v) => ToolResult { ok: true, output: Some(v), ..ToolResult::default() },
            Err(e) => fail(format!("{method} {url}: the reply is not JSON: {e}"), Some(ErrorCode::InvalidOutput)),
        }
    }
}
