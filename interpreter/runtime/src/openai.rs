//! The `openai` provider: a client of OpenAI-compatible Chat Completions
//! endpoints (OpenAI itself, llama.cpp's servers, vLLM, Ollama, …).
//!
//! One agent turn is one `POST {base_url}/chat/completions`:
//!
//! * the system message carries the agent's instructions and the output
//!   schema; the user message the node's prompt, the context slice, the tool
//!   results so far and, on a repair turn, the validation error;
//! * the output schema is requested as structured output (`json_schema`,
//!   `json_object` with a `schema` — what llama.cpp servers constrain
//!   generation by — or `none`); the schema sent is the output schema
//!   tightened (closed objects, every property required), so whatever
//!   satisfies it satisfies the output schema too;
//! * 429, 5xx and connection errors are retried with exponential backoff
//!   (500 ms, 1 s, 2 s, … or the server's `Retry-After`);
//! * the API key is read from the environment at call time, sent only in
//!   the `Authorization` header, and never logged nor put in an error.
//!
//! The reply is a proposal: the control plane validates it.

use crate::prompt::{self, tighten};
use crate::proto::{AgentReply, AgentRequest, TokenUsage, ToolCall};
use flow_check::ir::Decl;
use serde_json::{json, Value};
use std::time::Duration;

/// Settings of one `openai` provider declaration, read from its IR props.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenAiProvider {
    /// The Chat Completions base URL (`…/v1`).
    pub base_url: String,
    pub model: String,
    /// The environment variable holding the API key.
    pub api_key_env: Option<String>,
    /// `json_schema`, `json_object` or `none`.
    pub structured_output: String,
    /// Per-request timeout (default 60 s).
    pub timeout_ms: u64,
    /// Retries on 429, 5xx and connection errors (default 2).
    pub retries: u32,
    /// Price per million input tokens.
    pub price_input: f64,
    /// Price per million output tokens.
    pub price_output: f64,
    /// Largest completion requested when the request names none (default 4096).
    pub max_tokens: u64,
}

/// First delay of the retry backoff.
const BACKOFF_BASE_MS: u64 = 500;
/// Longest `Retry-After` honoured.
const MAX_RETRY_AFTER_S: u64 = 60;

impl OpenAiProvider {
    /// The settings of an `openai` provider declaration.
    pub fn from_decl(decl: &Decl) -> Result<OpenAiProvider, String> {
        if decl.variant.as_deref() != Some("openai") {
            return Err(format!("provider `{}` is not an openai provider", decl.name));
        }
        let base_url = decl.base_url().ok_or_else(|| format!("provider `{}` needs a `base_url`", decl.name))?.to_string();
        let model = decl.model().ok_or_else(|| format!("provider `{}` needs a `model`", decl.name))?.to_string();
        let structured_output = decl.structured_output().unwrap_or("json_object").to_string();
        if !matches!(structured_output.as_str(), "json_schema" | "json_object" | "none") {
            return Err(format!(
                "provider `{}`: structured_output is `{structured_output}`, expected json_schema, json_object or none",
                decl.name
            ));
        }
        Ok(OpenAiProvider {
            base_url,
            model,
            api_key_env: decl.api_key_env().map(str::to_string),
            structured_output,
            timeout_ms: decl.timeout_ms().unwrap_or(60_000),
            retries: decl.retries().map(|n| n.min(u32::MAX as u64) as u32).unwrap_or(2),
            price_input: decl.price_input(),
            price_output: decl.price_output(),
            max_tokens: decl.max_tokens().unwrap_or(flow_check::ceilings::DEFAULT_MAX_TOKENS),
        })
    }

    fn endpoint(&self) -> String {
        format!("{}/chat/completions", self.base_url.trim_end_matches('/'))
    }
}

/// One chat turn of `request` at `provider`. Never fails: failures are
/// [`AgentReply::error`]s, whose messages never contain the API key.
pub async fn chat(client: &reqwest::Client, provider: &OpenAiProvider, request: &AgentRequest) -> AgentReply {
    let key = provider.api_key_env.as_deref().and_then(|name| std::env::var(name).ok()).filter(|k| !k.is_empty());
    let mut reply = turn(client, provider, request, key.as_deref()).await;
    if let (Some(error), Some(key)) = (reply.error.as_mut(), key.as_deref()) {
        *error = error.replace(key, "[api key]");
    }
    if let (Some(text), Some(key)) = (reply.text.as_mut(), key.as_deref()) {
        *text = text.replace(key, "[api key]");
    }
    reply
}

async fn turn(client: &reqwest::Client, provider: &OpenAiProvider, request: &AgentRequest, key: Option<&str>) -> AgentReply {
    let model = request.model.clone().unwrap_or_else(|| provider.model.clone());
    let schema = tighten(&request.output_schema);
    let mut mode = provider.structured_output.as_str();
    let mut body = request_body(provider, request, &model, &schema, mode);
    let response = loop {
        match send(client, provider, &body, key, mode == "json_schema").await {
            Err(error) => return failed(provider, &model, error),
            // A server without `json_schema` gets the schema once more as
            // `json_object`.
            Ok(Sent::Status(status, text)) if mode == "json_schema" && refuses_json_schema(status, &text) => {
                tracing::debug!(provider = %provider.base_url, %status, "json_schema refused; retrying with json_object");
                mode = "json_object";
                body = request_body(provider, request, &model, &schema, mode);
            }
            Ok(Sent::Status(status, text)) => {
                return failed(provider, &model, format!("HTTP {status}: {}", excerpt(&text)));
            }
            Ok(Sent::Ok(value)) => break value,
        }
    };
    parse_reply(provider, request, &model, &response)
}

fn failed(provider: &OpenAiProvider, model: &str, error: String) -> AgentReply {
    AgentReply {
        error: Some(format!("openai provider at {}: {error}", provider.base_url)),
        model: Some(model.to_string()),
        ..AgentReply::default()
    }
}

/// What a request came back with, after retries.
enum Sent {
    /// A 2xx answer with a JSON body.
    Ok(Value),
    /// A status that is not retried (or retries ran out on it).
    Status(reqwest::StatusCode, String),
}

/// Whether an error answer refuses the `json_schema` response format:
/// a 400 or 422, or a 5xx that names it (llama-cpp-python's server answers
/// its validation error as a 500).
fn refuses_json_schema(status: reqwest::StatusCode, body: &str) -> bool {
    matches!(status.as_u16(), 400 | 422) || (status.is_server_error() && (body.contains("json_schema") || body.contains("response_format")))
}

/// Posts `body`, retrying 429, 5xx and connection errors (not a refusal of
/// `json_schema` when `schema_mode`: the caller falls back instead).
async fn send(
    client: &reqwest::Client,
    provider: &OpenAiProvider,
    body: &Value,
    key: Option<&str>,
    schema_mode: bool,
) -> Result<Sent, String> {
    let mut attempt: u32 = 0;
    loop {
        let mut post = client.post(provider.endpoint()).timeout(Duration::from_millis(provider.timeout_ms.max(1))).json(body);
        if let Some(key) = key {
            post = post.bearer_auth(key);
        }
        let (retryable, retry_after, outcome) = match post.send().await {
            Err(e) => {
                let what = if e.is_timeout() {
                    format!("no answer within {} ms", provider.timeout_ms)
                } else if e.is_connect() {
                    "cannot connect".to_string()
                } else {
                    "request failed".to_string()
                };
                // reqwest's message names the URL, never the headers.
                (true, None, Err(format!("{what} ({})", error_chain(&e))))
            }
            Ok(response) => {
                let status = response.status();
                let retry_after = response
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok());
                match response.text().await {
                    Err(e) => (true, None, Err(format!("HTTP {status}: the body could not be read ({})", error_chain(&e)))),
                    Ok(text) if status.is_success() => match serde_json::from_str::<Value>(&text) {
                        Ok(value) => return Ok(Sent::Ok(value)),
                        Err(e) => return Err(format!("HTTP {status}: the answer is not JSON ({e}): {}", excerpt(&text))),
                    },
                    Ok(text) => {
                        let retryable =
                            (status.as_u16() == 429 || status.is_server_error()) && !(schema_mode && refuses_json_schema(status, &text));
                        (retryable, retry_after, Ok(Sent::Status(status, text)))
                    }
                }
            }
        };
        if !retryable || attempt >= provider.retries {
            return match outcome {
                Err(e) if attempt > 0 => Err(format!("{e}; gave up after {} attempts", attempt + 1)),
                Ok(Sent::Status(status, text)) if attempt > 0 => {
                    Ok(Sent::Status(status, format!("{} (gave up after {} attempts)", excerpt(&text), attempt + 1)))
                }
                other => other,
            };
        }
        let delay = match retry_after {
            Some(seconds) => Duration::from_secs(seconds.min(MAX_RETRY_AFTER_S)),
            None => Duration::from_millis(BACKOFF_BASE_MS.saturating_mul(1u64 << attempt.min(16))),
        };
        tracing::debug!(provider = %provider.base_url, attempt, ?delay, "retrying the chat request");
        tokio::time::sleep(delay).await;
        attempt += 1;
    }
}

/// An error and its sources, on one line.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = s.source();
    }
    text
}

/// The first 300 characters of a body, on one line.
fn excerpt(text: &str) -> String {
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() > 300 {
        format!("{}…", one_line.chars().take(300).collect::<String>())
    } else {
        one_line
    }
}

/// The Chat Completions request body of one turn (messages, response
/// format and tools as [`crate::prompt`] renders them for every client).
fn request_body(provider: &OpenAiProvider, request: &AgentRequest, model: &str, schema: &Value, mode: &str) -> Value {
    let mut body = json!({
        "model": model,
        "messages": messages(request, schema),
        "max_tokens": if request.max_tokens > 0 { request.max_tokens } else { provider.max_tokens },
    });
    if let Some(format) = prompt::response_format(schema, mode) {
        body["response_format"] = format;
    }
    if !request.tools.is_empty() {
        body["tools"] = prompt::tool_definitions(request);
    }
    body
}

/// The messages of a turn, as Chat Completions messages: the assistant's
/// earlier tool calls as `tool_calls`, their results as `tool` messages.
fn messages(request: &AgentRequest, schema: &Value) -> Value {
    let wire = |m: prompt::Message| {
        let mut message = json!({ "role": m.role, "content": m.content });
        if let Some(calls) = m.tool_calls {
            message["content"] = Value::Null;
            message["tool_calls"] = calls;
        }
        if let Some(id) = m.tool_call_id {
            message["tool_call_id"] = json!(id);
        }
        message
    };
    Value::Array(prompt::messages(request, schema).into_iter().map(wire).collect())
}

/// One `tool_calls` entry of a reply.
fn tool_call(call: &Value) -> Option<ToolCall> {
    let function = call.get("function")?;
    let tool = function.get("name").and_then(Value::as_str)?.to_string();
    let input = match function.get("arguments") {
        Some(Value::String(text)) if text.trim().is_empty() => json!({}),
        Some(Value::String(text)) => serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.clone())),
        Some(Value::Null) | None => json!({}),
        Some(other) => other.clone(),
    };
    let id = call.get("id").and_then(Value::as_str).map(str::to_string);
    Some(ToolCall { tool, input, id })
}

/// The agent reply of a 2xx answer.
fn parse_reply(provider: &OpenAiProvider, request: &AgentRequest, model: &str, response: &Value) -> AgentReply {
    let usage = TokenUsage {
        input_tokens: response.pointer("/usage/prompt_tokens").and_then(Value::as_u64).unwrap_or(0),
        output_tokens: response.pointer("/usage/completion_tokens").and_then(Value::as_u64).unwrap_or(0),
    };
    let cost = (provider.price_input * usage.input_tokens as f64 + provider.price_output * usage.output_tokens as f64) / 1e6;
    let mut reply = AgentReply {
        usage,
        cost,
        model: Some(response.get("model").and_then(Value::as_str).filter(|m| !m.is_empty()).unwrap_or(model).to_string()),
        finish_reasons: response
            .get("choices")
            .and_then(Value::as_array)
            .map(|choices| choices.iter().filter_map(|c| c.get("finish_reason")?.as_str().map(str::to_string)).collect())
            .unwrap_or_default(),
        ..AgentReply::default()
    };
    if let Some(error) = response.get("error").filter(|e| !e.is_null()) {
        let message = error.get("message").and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| error.to_string());
        reply.error = Some(format!("openai provider at {}: {}", provider.base_url, excerpt(&message)));
        return reply;
    }
    let Some(message) = response.pointer("/choices/0/message") else {
        reply.error = Some(format!("openai provider at {}: the answer has no choices[0].message", provider.base_url));
        return reply;
    };
    if !request.tools.is_empty() {
        // Every call of the reply, in order, with the id a tool message
        // will answer it by.
        let calls = message.get("tool_calls").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        reply.tool_calls = calls.iter().filter_map(tool_call).collect();
        if !reply.tool_calls.is_empty() {
            return reply;
        }
    }
    if let Some(refusal) = message.get("refusal").and_then(Value::as_str).filter(|r| !r.is_empty()) {
        reply.error = Some(format!("openai provider at {}: the model refused: {}", provider.base_url, excerpt(refusal)));
        return reply;
    }
    let content = message.get("content").and_then(Value::as_str).unwrap_or_default();
    match serde_json::from_str::<Value>(strip_fences(content)) {
        Ok(value) => reply.output = Some(value),
        Err(_) => reply.text = Some(content.to_string()),
    }
    reply
}

/// `text` without a surrounding Markdown code fence (```json … ```).
fn strip_fences(text: &str) -> &str {
    let trimmed = text.trim();
    if let Some(inner) = trimmed.strip_prefix("```").and_then(|t| t.strip_suffix("```")) {
        // Drop the info string (`json`) on the opening line.
        return inner.split_once('\n').map(|(_, body)| body).unwrap_or(inner).trim();
    }
    trimmed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::ToolSpec;
    use flow_check::ir::Value as IrValue;
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::sync::{Arc, Mutex};

    /// A tiny HTTP/1.1 server: answers each connection with the next canned
    /// response (status line, extra headers, body), keeps the requests.
    struct Canned {
        url: String,
        requests: Arc<Mutex<Vec<String>>>,
    }

    fn serve(responses: Vec<(u16, &str, String)>) -> Canned {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        let responses: Vec<(u16, String, String)> = responses.into_iter().map(|(s, h, b)| (s, h.to_string(), b)).collect();
        std::thread::spawn(move || {
            for (status, headers, body) in responses {
                let Ok((mut stream, _)) = listener.accept() else { return };
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                // Read the head, then Content-Length bytes of body.
                loop {
                    let n = stream.read(&mut chunk).unwrap_or(0);
                    if n == 0 {
                        break;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).to_string();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length = text[..end]
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap_or(0))
                            })
                            .unwrap_or(0);
                        if buf.len() >= end + 4 + length {
                            break;
                        }
                    }
                }
                seen.lock().expect("lock").push(String::from_utf8_lossy(&buf).to_string());
                let reason = match status {
                    200 => "OK",
                    400 => "Bad Request",
                    429 => "Too Many Requests",
                    _ => "Internal Server Error",
                };
                let answer = format!(
                    "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n{headers}\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes());
            }
        });
        Canned { url, requests }
    }

    fn completion(content: &str) -> String {
        json!({
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "tiny-model-q4",
            "choices": [{ "index": 0, "message": { "role": "assistant", "content": content }, "finish_reason": "stop" }],
            "usage": { "prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150 }
        })
        .to_string()
    }

    fn provider(url: &str) -> OpenAiProvider {
        OpenAiProvider {
            base_url: url.to_string(),
            model: "tiny".into(),
            api_key_env: None,
            structured_output: "json_object".into(),
            timeout_ms: 5_000,
            retries: 2,
            price_input: 1.0,
            price_output: 4.0,
            max_tokens: 256,
        }
    }

    fn request() -> AgentRequest {
        AgentRequest {
            agent: "writer".into(),
            node: "title".into(),
            provider: "local".into(),
            model: None,
            instructions: Some("You name things.".into()),
            prompt: Some("Name a cat.".into()),
            context: json!({ "topic": "cats" }),
            output_schema: json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "properties": { "title": { "type": "string" }, "note": { "type": "string" } },
                "required": ["title"],
                "additionalProperties": true
            }),
            objective: None,
            acceptance: vec![],
            tools: vec![],
            visit: 1,
            attempt_no: 1,
            turn: 1,
            node_turn: 1,
            repair: None,
            tool_results: vec![],
            max_tokens: 64,
            flags: vec![],
        }
    }

    fn body_of(raw: &str) -> Value {
        let body = raw.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
        serde_json::from_str(body).expect("the request body is JSON")
    }

    #[tokio::test]
    async fn a_reply_gives_output_usage_cost_and_model() {
        let server = serve(vec![(200, "", completion(r#"{"title": "Whiskers"}"#))]);
        let reply = chat(&reqwest::Client::new(), &provider(&server.url), &request()).await;
        assert_eq!(reply.error, None);
        assert_eq!(reply.output, Some(json!({ "title": "Whiskers" })));
        assert_eq!(reply.usage, TokenUsage { input_tokens: 120, output_tokens: 30 });
        assert!((reply.cost - (120.0 * 1.0 + 30.0 * 4.0) / 1e6).abs() < 1e-12, "cost {}", reply.cost);
        assert_eq!(reply.model.as_deref(), Some("tiny-model-q4"));
        assert_eq!(reply.finish_reasons, ["stop"]);

        let raw = server.requests.lock().expect("lock")[0].clone();
        assert!(raw.starts_with("POST /v1/chat/completions HTTP/1.1"), "{raw}");
        assert!(!raw.to_ascii_lowercase().contains("authorization:"), "no key, no Authorization header: {raw}");
        let body = body_of(&raw);
        assert_eq!(body["model"], "tiny");
        assert_eq!(body["max_tokens"], 64);
        assert_eq!(body["response_format"]["type"], "json_object");
        let schema = &body["response_format"]["schema"];
        assert_eq!(schema["properties"]["title"], json!({ "type": "string" }));
        assert_eq!(schema["required"], json!(["title", "note"]), "every property required");
        assert_eq!(schema["additionalProperties"], json!(false), "objects closed");
        assert!(schema.get("$schema").is_none());
        let system = body["messages"][0]["content"].as_str().expect("system");
        assert!(system.starts_with("You name things.") && system.contains("JSON Schema") && system.contains("\"title\""), "{system}");
        let user = body["messages"][1]["content"].as_str().expect("user");
        assert!(user.contains("Name a cat.") && user.contains(r#"{"topic":"cats"}"#), "{user}");
    }

    #[tokio::test]
    async fn json_schema_mode_and_its_fallback_to_json_object() {
        let server =
            serve(vec![(400, "", r#"{"error":{"message":"unknown response_format"}}"#.into()), (200, "", completion(r#"{"title":"x"}"#))]);
        let p = OpenAiProvider { structured_output: "json_schema".into(), ..provider(&server.url) };
        let reply = chat(&reqwest::Client::new(), &p, &request()).await;
        assert_eq!(reply.output, Some(json!({ "title": "x" })), "{reply:?}");
        let requests = server.requests.lock().expect("lock").clone();
        assert_eq!(requests.len(), 2);
        let first = body_of(&requests[0]);
        assert_eq!(first["response_format"]["type"], "json_schema");
        assert_eq!(first["response_format"]["json_schema"]["name"], "output");
        assert_eq!(first["response_format"]["json_schema"]["strict"], true);
        assert_eq!(first["response_format"]["json_schema"]["schema"]["properties"]["title"]["type"], "string");
        let second = body_of(&requests[1]);
        assert_eq!(second["response_format"]["type"], "json_object");
        assert_eq!(second["response_format"]["schema"]["properties"]["title"]["type"], "string");

        // llama-cpp-python's server refuses `json_schema` with a 500 that
        // names it: no retry, the fallback at once.
        let refusal =
            r#"{"error":{"message":"1 validation error: ('body', 'response_format', 'type') Input should be 'text' or 'json_object'"}}"#;
        let server = serve(vec![(500, "", refusal.into()), (200, "", completion(r#"{"title":"w"}"#))]);
        let p = OpenAiProvider { structured_output: "json_schema".into(), ..provider(&server.url) };
        let reply = chat(&reqwest::Client::new(), &p, &request()).await;
        assert_eq!(reply.output, Some(json!({ "title": "w" })), "{reply:?}");
        let requests = server.requests.lock().expect("lock").clone();
        assert_eq!(requests.len(), 2);
        assert_eq!(body_of(&requests[1])["response_format"]["type"], "json_object");

        let server = serve(vec![(200, "", completion("{}"))]);
        let p = OpenAiProvider { structured_output: "none".into(), ..provider(&server.url) };
        chat(&reqwest::Client::new(), &p, &request()).await;
        assert!(body_of(&server.requests.lock().expect("lock")[0]).get("response_format").is_none());
    }

    #[tokio::test]
    async fn a_429_is_retried_after_a_backoff() {
        let server = serve(vec![(429, "", r#"{"error":{"message":"slow down"}}"#.into()), (200, "", completion(r#"{"title":"y"}"#))]);
        let started = std::time::Instant::now();
        let reply = chat(&reqwest::Client::new(), &provider(&server.url), &request()).await;
        assert_eq!(reply.output, Some(json!({ "title": "y" })), "{reply:?}");
        assert_eq!(server.requests.lock().expect("lock").len(), 2);
        assert!(started.elapsed() >= Duration::from_millis(BACKOFF_BASE_MS), "waited {:?}", started.elapsed());
    }

    #[tokio::test]
    async fn server_errors_exhaust_the_retries() {
        let busy = || (500, "Retry-After: 0\r\n", r#"{"error":{"message":"model crashed"}}"#.to_string());
        let server = serve(vec![busy(), busy(), busy(), (200, "", completion("{}"))]);
        let reply = chat(&reqwest::Client::new(), &provider(&server.url), &request()).await;
        let error = reply.error.expect("an error");
        assert!(error.contains("500") && error.contains("model crashed") && error.contains("3 attempts"), "{error}");
        assert_eq!(reply.output, None);
        assert_eq!(server.requests.lock().expect("lock").len(), 3, "1 try + 2 retries");

        // Nothing listens: a connection error, retried, then reported.
        let port = TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
        let p = OpenAiProvider { retries: 1, ..provider(&format!("http://127.0.0.1:{port}/v1")) };
        let error = chat(&reqwest::Client::new(), &p, &request()).await.error.expect("an error");
        assert!(error.contains("cannot connect") && error.contains("2 attempts"), "{error}");
    }

    #[tokio::test]
    async fn content_that_is_not_json_is_text() {
        let server =
            serve(vec![(200, "", completion("Sure! The title is Whiskers.")), (200, "", completion("```json\n{\"title\":\"z\"}\n```"))]);
        let client = reqwest::Client::new();
        let reply = chat(&client, &provider(&server.url), &request()).await;
        assert_eq!(reply.output, None);
        assert_eq!(reply.text.as_deref(), Some("Sure! The title is Whiskers."));
        assert_eq!(reply.error, None);
        assert_eq!(reply.usage.output_tokens, 30);
        let fenced = chat(&client, &provider(&server.url), &request()).await;
        assert_eq!(fenced.output, Some(json!({ "title": "z" })));
    }

    #[tokio::test]
    async fn the_api_key_is_sent_but_never_in_an_error() {
        let secret = "sk-test-0123456789abcdef";
        let var = "FLOW_OPENAI_RS_TEST_KEY";
        std::env::set_var(var, secret);
        // A server that echoes the key back in its error body.
        let echo = format!(r#"{{"error":{{"message":"invalid key {secret}"}}}}"#);
        let server = serve(vec![(401, "", echo.clone()), (500, "Retry-After: 0\r\n", echo)]);
        let p = OpenAiProvider { api_key_env: Some(var.into()), retries: 0, ..provider(&server.url) };
        let client = reqwest::Client::new();
        let unauthorised = chat(&client, &p, &request()).await;
        let crashed = chat(&client, &p, &request()).await;
        let raw = server.requests.lock().expect("lock")[0].clone();
        assert!(raw.to_ascii_lowercase().contains(&format!("authorization: bearer {secret}").to_ascii_lowercase()), "{raw}");
        for reply in [unauthorised, crashed] {
            let error = reply.error.expect("an error");
            assert!(!error.contains(secret), "the key leaked: {error}");
            assert!(error.contains("[api key]"), "{error}");
        }
        // A connection error (reqwest's message) carries no key either.
        let p = OpenAiProvider { retries: 0, ..p };
        let p = OpenAiProvider { base_url: "http://127.0.0.1:9/v1".into(), ..p };
        let error = chat(&client, &p, &request()).await.error.expect("an error");
        assert!(!error.contains(secret), "{error}");
        std::env::remove_var(var);
    }

    #[tokio::test]
    async fn tool_calls_are_offered_and_read() {
        let answer = json!({
            "model": "m",
            "choices": [{ "message": { "role": "assistant", "content": null, "tool_calls": [
                { "id": "c1", "type": "function", "function": { "name": "search", "arguments": "{\"q\":\"cats\"}" } },
                { "id": "c2", "type": "function", "function": { "name": "search", "arguments": "{\"q\":\"dogs\"}" } }
            ] } }],
            "usage": { "prompt_tokens": 10, "completion_tokens": 5 }
        });
        let server = serve(vec![(200, "", answer.to_string())]);
        let mut req = request();
        let parameters = json!({ "type": "object", "properties": { "q": { "type": "string" } }, "required": ["q"] });
        req.tools = vec![ToolSpec { name: "search".into(), description: Some("Searches the web".into()), parameters: parameters.clone() }];
        req.tool_results = vec![json!({ "tool": "search", "ok": true, "output": ["a"], "id": "c0", "input": { "q": "owls" }, "turn": 1 })];
        req.repair = Some("title: expected a string".into());
        let reply = chat(&reqwest::Client::new(), &provider(&server.url), &req).await;
        // Every call of the reply is read, with its id.
        let call = |q: &str, id: &str| ToolCall { tool: "search".into(), input: json!({ "q": q }), id: Some(id.into()) };
        assert_eq!(reply.tool_calls, [call("cats", "c1"), call("dogs", "c2")]);
        let body = body_of(&server.requests.lock().expect("lock")[0]);
        let function = json!({ "name": "search", "description": "Searches the web", "parameters": parameters });
        assert_eq!(
            body["tools"][0],
            json!({ "type": "function", "function": function }),
            "the model sees the tool's description and input schema"
        );
        let user = body["messages"][1]["content"].as_str().expect("user");
        assert!(user.contains("title: expected a string") && !user.contains("owls"), "{user}");
        // The earlier call goes back as the assistant's tool call, its result as a tool message.
        assert_eq!(body["messages"][2]["role"], "assistant");
        assert_eq!(body["messages"][2]["tool_calls"][0]["id"], "c0");
        assert_eq!(body["messages"][2]["tool_calls"][0]["function"]["arguments"], "{\"q\":\"owls\"}");
        assert_eq!(body["messages"][3], json!({ "role": "tool", "tool_call_id": "c0", "content": "{\"ok\":true,\"output\":[\"a\"]}" }));
    }

    #[test]
    fn settings_come_from_the_declaration() {
        use flow_check::ir::Loc;
        use flow_check::spec::Kind;
        let mut decl = Decl {
            kind: Kind::Provider,
            name: "local".into(),
            variant: Some("openai".into()),
            props: Default::default(),
            loc: Loc::default(),
            imported: false,
        };
        assert!(OpenAiProvider::from_decl(&decl).expect_err("no base_url").contains("base_url"));
        decl.props.insert("base_url".into(), IrValue::Str("http://127.0.0.1:8080/v1".into()));
        decl.props.insert("model".into(), IrValue::Str("smollm2".into()));
        let defaults = OpenAiProvider::from_decl(&decl).expect("valid");
        assert_eq!((defaults.structured_output.as_str(), defaults.timeout_ms, defaults.retries), ("json_object", 60_000, 2));
        decl.props.insert("api_key_env".into(), IrValue::Str("KEY".into()));
        decl.props.insert("structured_output".into(), IrValue::Word("json_schema".into()));
        decl.props.insert("timeout".into(), IrValue::Duration(5_000));
        decl.props.insert("retries".into(), IrValue::Int(4));
        decl.props.insert("price_input".into(), IrValue::Money(0.1));
        decl.props.insert("price_output".into(), IrValue::Money(0.4));
        decl.props.insert("max_tokens".into(), IrValue::Int(128));
        let p = OpenAiProvider::from_decl(&decl).expect("valid");
        assert_eq!(
            p,
            OpenAiProvider {
                base_url: "http://127.0.0.1:8080/v1".into(),
                model: "smollm2".into(),
                api_key_env: Some("KEY".into()),
                structured_output: "json_schema".into(),
                timeout_ms: 5_000,
                retries: 4,
                price_input: 0.1,
                price_output: 0.4,
                max_tokens: 128,
            }
        );
        decl.variant = Some("scripted".into());
        assert!(OpenAiProvider::from_decl(&decl).is_err());
    }

    #[test]
    fn tightening_closes_objects_through_refs_and_lists() {
        let schema = json!({
            "$schema": "x",
            "type": "object",
            "properties": { "items": { "type": "array", "items": { "$ref": "#/$defs/Item" } }, "kind": { "enum": ["a", "b"] } },
            "required": [],
            "additionalProperties": true,
            "$defs": { "Item": { "type": ["object", "null"], "properties": { "properties": { "type": "string" } } } }
        });
        let tight = tighten(&schema);
        assert_eq!(tight["required"], json!(["items", "kind"]));
        assert_eq!(tight["additionalProperties"], json!(false));
        assert_eq!(tight["properties"]["kind"], json!({ "enum": ["a", "b"] }));
        // The definition is inlined (llama.cpp's grammar ignored `$ref`), then closed.
        let item = &tight["properties"]["items"]["items"];
        assert_eq!(item["required"], json!(["properties"]), "a field named `properties` is a field");
        assert_eq!(item["additionalProperties"], json!(false));
        assert!(tight.get("$defs").is_none(), "nothing left to refer to");
        assert!(tight.get("$schema").is_none());
    }
}
