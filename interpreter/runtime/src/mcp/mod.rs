//! MCP tools: a small client of the Model Context Protocol, over stdio and
//! Streamable HTTP.
//!
//! A server is reached one of two ways ([`Endpoint`]):
//! - **stdio** (`stdio.rs`): a program started with its command line (never
//!   through a shell) that speaks JSON-RPC 2.0 on its stdin and stdout, one
//!   JSON message per line;
//! - **Streamable HTTP** (`http.rs`): every message is POSTed to the
//!   server's URL; the answer comes back as a JSON body or as a stream of
//!   server-sent events, and the session the server names in
//!   `Mcp-Session-Id` is carried on every later request.
//!
//! Either way the client sends `initialize` (protocol version
//! [`PROTOCOL_VERSION`]; the one capability it declares is `roots`),
//! refuses a server that answers with a version not in
//! [`SUPPORTED_VERSIONS`], then sends `notifications/initialized`, and
//! afterwards `tools/list` (following `nextCursor`), `tools/call`,
//! `resources/read` and `prompts/get` (`session.rs`).
//!
//! Calls to one server may overlap: responses are matched to requests by
//! JSON-RPC id. From the server, `notifications/progress` for a call
//! reaches the run's progress sink ([`ToolProgress`]), `tools/list_changed`
//! drops the cached tool list, other notifications are ignored; `ping` and
//! `roots/list` requests are answered (the roots are the tool's declared
//! `roots`, by default the flow file's directory), other server→client
//! requests (sampling, elicitation) get "method not found".
//!
//! [`McpPool`] connects to each server on first use (a stdio server starts
//! in the run's directory, with the runtime's environment), reuses it for
//! the rest of the run, connects again if it died or ended the session,
//! and closes every server when dropped (a stdio server's process group is
//! killed; an HTTP session is ended with `DELETE`). Authorisation, quotas
//! and the tool whitelist are the control plane's: this module only talks
//! to servers.
//!
//! Why not the official `rmcp` crate: its current releases need Rust 1.88,
//! above this workspace's minimum (1.85), and the client here is a few
//! hundred lines over tokio and reqwest, which the runtime already has.

mod http;
mod session;
mod stdio;

use serde_json::{json, Value};
use session::{Failure, Session};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// The protocol version the client asks for: the latest it speaks.
pub const PROTOCOL_VERSION: &str = "2025-11-25";

/// The protocol versions the client speaks (it uses `tools/*`,
/// `resources/read`, `prompts/get` and `roots/list`, the same in each). A
/// server answers `initialize` with the version it will speak; any other is
/// refused with an error naming both sides, as the protocol asks.
pub const SUPPORTED_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The version a server answered `initialize` with, if the client speaks it.
fn negotiated(label: &str, init: &Value) -> Result<String, String> {
    let protocol = init.get("protocolVersion").and_then(Value::as_str).unwrap_or("(none)");
    if !SUPPORTED_VERSIONS.contains(&protocol) {
        let spoken = SUPPORTED_VERSIONS.join(", ");
        return Err(format!("the MCP server `{label}` speaks protocol version `{protocol}`, which flow does not: it speaks {spoken}"));
    }
    Ok(protocol.to_string())
}

/// How long a server may take to start and answer `initialize` (and
/// `tools/list`): `npx` may download the server first.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A server's command line, for messages: words joined by spaces, quoted
/// when they hold a space or are empty.
fn label(server: &[String]) -> String {
    server
        .iter()
        .map(|w| if w.is_empty() || w.contains(char::is_whitespace) { format!("{w:?}") } else { w.clone() })
        .collect::<Vec<_>>()
        .join(" ")
}

/// How a server is reached.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// A program started with this command line, speaking on stdio.
    Stdio(Vec<String>),
    /// A server at this URL, over Streamable HTTP, with these request
    /// headers (never shown in messages: they may hold credentials).
    Http { url: String, headers: Vec<(String, String)> },
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Stdio(command) => f.debug_tuple("Stdio").field(command).finish(),
            Endpoint::Http { url, headers } => {
                let names: Vec<&str> = headers.iter().map(|(name, _)| name.as_str()).collect();
                f.debug_struct("Http").field("url", url).field("header_names", &names).finish()
            }
        }
    }
}

/// A server as a tool declares it: where it is, and the roots it is told.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ServerSpec {
    pub endpoint: Endpoint,
    /// Directories answered to `roots/list` (absolute paths).
    pub roots: Vec<PathBuf>,
}

impl ServerSpec {
    /// A stdio server with no roots.
    pub fn stdio(command: Vec<String>) -> ServerSpec {
        ServerSpec { endpoint: Endpoint::Stdio(command), roots: Vec::new() }
    }

    /// An HTTP server with no headers and no roots.
    pub fn http(url: &str) -> ServerSpec {
        ServerSpec { endpoint: Endpoint::Http { url: url.to_string(), headers: Vec::new() }, roots: Vec::new() }
    }

    /// The server for messages: its command line or its URL.
    pub fn label(&self) -> String {
        match &self.endpoint {
            Endpoint::Stdio(command) => label(command),
            Endpoint::Http { url, .. } => url.clone(),
        }
    }

    /// The roots as `roots/list` answers them.
    fn root_entries(&self) -> Vec<Value> {
        self.roots
            .iter()
            .map(|dir| {
                let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| dir.display().to_string());
                json!({ "uri": file_uri(dir), "name": name })
            })
            .collect()
    }
}

/// `file://` and the path, percent-encoded but for `/` and unreserved bytes.
fn file_uri(path: &Path) -> String {
    let mut uri = String::from("file://");
    for b in path.to_string_lossy().bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'/' | b'-' | b'_' | b'.' | b'~') {
            uri.push(b as char);
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri
}

/// A server's report on a call in progress (`notifications/progress`).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolProgress {
    /// The flow tool whose call this is.
    pub tool: String,
    /// The server, as [`ServerSpec::label`] names it.
    pub server: String,
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

impl std::fmt::Display for ToolProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "tool {}: {}", self.tool, self.progress)?;
        if let Some(total) = self.total {
            write!(f, "/{total}")?;
        }
        if let Some(message) = &self.message {
            write!(f, " ({message})")?;
        }
        Ok(())
    }
}

/// Where progress reports go (the run's display). Progress is not a
/// coordination act: it is shown, never journaled.
pub type ProgressSink = Arc<dyn Fn(&ToolProgress) + Send + Sync>;

/// Live MCP servers of a run, connected on first use and reused; closed on drop.
pub struct McpPool {
    cwd: PathBuf,
    servers: Mutex<HashMap<ServerSpec, Slot>>,
    progress: Option<ProgressSink>,
}

/// A server's session: locked while it connects, so that it connects once.
type Slot = Arc<tokio::sync::Mutex<Option<Arc<Session>>>>;

impl std::fmt::Debug for McpPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let servers: Vec<String> = lock(&self.servers).keys().map(ServerSpec::label).collect();
        f.debug_struct("McpPool").field("cwd", &self.cwd).field("servers", &servers).finish()
    }
}

impl McpPool {
    /// A pool whose stdio servers start in `cwd`, with this process's environment.
    pub fn new(cwd: PathBuf) -> McpPool {
        McpPool { cwd, servers: Mutex::new(HashMap::new()), progress: None }
    }

    /// Sends servers' progress reports on calls to `sink`.
    pub fn set_progress(&mut self, sink: ProgressSink) {
        self.progress = Some(sink);
    }

    /// The live session with a server: connected on first use, connected
    /// again when it died.
    async fn session(&self, at: &ServerSpec) -> Result<Arc<Session>, String> {
        let slot = lock(&self.servers).entry(at.clone()).or_default().clone();
        let mut slot = slot.lock().await;
        if let Some(live) = slot.as_ref().filter(|s| s.alive()) {
            return Ok(live.clone());
        }
        // A dead session is dropped (and its server closed) before its successor starts.
        *slot = None;
        let shared = session::Shared::new(at.label(), at.root_entries(), self.progress.clone());
        let started = Arc::new(match &at.endpoint {
            Endpoint::Stdio(command) => stdio::start(command, &self.cwd, shared).await?,
            Endpoint::Http { url, headers } => http::start(url, headers, shared).await?,
        });
        *slot = Some(started.clone());
        Ok(started)
    }

    /// The tools a server offers: name → input schema.
    pub async fn tools(&self, at: &ServerSpec) -> Result<Vec<(String, Value)>, String> {
        self.session(at).await?.tools().await
    }

    /// Calls `tool` at a server with `arguments` for the flow tool `caller`
    /// (whose name progress reports carry). Ok(output) where output is
    /// `structuredContent` if present, else the single text content parsed
    /// as JSON if it parses, else the text as a JSON string (several
    /// contents → array of them). Err(message) on isError, protocol errors,
    /// a dead server, or the timeout.
    ///
    /// `timeout_ms` bounds the `tools/call` request; connecting has its own
    /// limit (60 s). A timed-out call is cancelled at the server
    /// (`notifications/cancelled`) and its message says "timed out after N ms".
    pub async fn call(
        &self,
        at: &ServerSpec,
        tool: &str,
        arguments: Value,
        timeout_ms: Option<u64>,
        caller: &str,
    ) -> Result<Value, String> {
        let mut params = json!({ "name": tool });
        if !arguments.is_null() {
            params["arguments"] = arguments;
        }
        let (label, result) = self.request(at, "tools/call", params, timeout_ms, Some(caller), &format!("`{tool}`")).await?;
        if result.get("isError").and_then(Value::as_bool) == Some(true) {
            return Err(format!("`{tool}` at the MCP server `{label}` failed: {}", error_text(&result)));
        }
        Ok(output_of(&result))
    }

    /// Reads the resource `uri` (`resources/read`): one content's text
    /// (parsed as JSON when it parses) or the content itself (a blob),
    /// several as an array.
    pub async fn read_resource(&self, at: &ServerSpec, uri: &str, timeout_ms: Option<u64>) -> Result<Value, String> {
        let what = format!("the resource `{uri}`");
        let (label, result) = self.request(at, "resources/read", json!({ "uri": uri }), timeout_ms, None, &what).await?;
        let Some(contents) = result.get("contents").and_then(Value::as_array) else {
            return Err(format!("the MCP server `{label}` answered `resources/read` of `{uri}` without `contents`"));
        };
        let mut items: Vec<Value> = contents.iter().map(resource_value).collect();
        Ok(match items.len() {
            0 => Value::Null,
            1 => items.remove(0),
            _ => Value::Array(items),
        })
    }

    /// Gets the prompt `name` with `arguments` (`prompts/get`):
    /// `{ description, messages: [{ role, content }] }` (description null
    /// when the server gives none), a text content as its text.
    pub async fn get_prompt(&self, at: &ServerSpec, name: &str, arguments: Value, timeout_ms: Option<u64>) -> Result<Value, String> {
        let mut params = json!({ "name": name });
        if arguments.as_object().is_some_and(|a| !a.is_empty()) {
            params["arguments"] = arguments;
        }
        let (_, result) = self.request(at, "prompts/get", params, timeout_ms, None, &format!("the prompt `{name}`")).await?;
        Ok(prompt_output(&result))
    }

    /// One request on the server's session: (the server's label, the
    /// result). A request refused because the server had ended the session
    /// never reached it: it is sent once more, on a new session.
    async fn request(
        &self,
        at: &ServerSpec,
        method: &str,
        params: Value,
        timeout_ms: Option<u64>,
        progress_for: Option<&str>,
        what: &str,
    ) -> Result<(String, Value), String> {
        let mut retried = false;
        loop {
            let live = self.session(at).await?;
            let label = live.label().to_string();
            match live.request(method, params.clone(), timeout_ms.map(Duration::from_millis), progress_for).await {
                Ok(result) => return Ok((label, result)),
                Err(Failure::Ended(why)) if !retried => {
                    tracing::debug!(target: "flow::mcp", "{why}: sending `{method}` again on a new session");
                    retried = true;
                }
                Err(Failure::Timeout) => {
                    return Err(format!("{what} at the MCP server `{label}` timed out after {} ms", timeout_ms.unwrap_or_default()))
                }
                Err(Failure::Ended(message) | Failure::Other(message)) => return Err(message),
            }
        }
    }
}

/// What a call's result becomes: `structuredContent` if present, else the
/// contents (a text parsed as JSON when it parses, else kept as a string;
/// other contents as they are): one content alone, several as an array,
/// none as null.
fn output_of(result: &Value) -> Value {
    if let Some(structured) = result.get("structuredContent").filter(|s| !s.is_null()) {
        return structured.clone();
    }
    let mut items: Vec<Value> =
        result.get("content").and_then(Value::as_array).map(|c| c.iter().map(content_value).collect()).unwrap_or_default();
    match items.len() {
        0 => Value::Null,
        1 => items.remove(0),
        _ => Value::Array(items),
    }
}

/// A text, parsed as JSON when it parses.
fn text_value(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

fn content_value(item: &Value) -> Value {
    match (item.get("type").and_then(Value::as_str), item.get("text").and_then(Value::as_str)) {
        (Some("text"), Some(text)) => text_value(text),
        _ => item.clone(),
    }
}

/// A resource's content: its text (parsed when JSON), else the content.
fn resource_value(item: &Value) -> Value {
    match item.get("text").and_then(Value::as_str) {
        Some(text) => text_value(text),
        None => item.clone(),
    }
}

/// A prompt as a tool's output: its description and messages, each text
/// content as its text (kept a string: prompts are text for models).
fn prompt_output(result: &Value) -> Value {
    let messages: Vec<Value> = result
        .get("messages")
        .and_then(Value::as_array)
        .map(|messages| {
            messages
                .iter()
                .map(|m| {
                    let content = m.get("content").cloned().unwrap_or(Value::Null);
                    let content = match (content.get("type").and_then(Value::as_str), content.get("text").and_then(Value::as_str)) {
                        (Some("text"), Some(text)) => Value::String(text.to_string()),
                        _ => content,
                    };
                    json!({ "role": m.get("role").cloned().unwrap_or(Value::Null), "content": content })
                })
                .collect()
        })
        .unwrap_or_default();
    json!({ "description": result.get("description").cloned().unwrap_or(Value::Null), "messages": messages })
}

/// The message of a result with `isError`: its texts, else its JSON.
fn error_text(result: &Value) -> String {
    let texts: Vec<&str> = result
        .get("content")
        .and_then(Value::as_array)
        .map(|c| c.iter().filter_map(|i| i.get("text").and_then(Value::as_str)).collect())
        .unwrap_or_default();
    if texts.is_empty() {
        result.get("content").map(Value::to_string).unwrap_or_else(|| "no details".into())
    } else {
        texts.join("\n")
    }
}

#[cfg(test)]
pub(crate) mod tests;
