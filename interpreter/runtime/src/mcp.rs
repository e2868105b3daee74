//! MCP tools over stdio: a small client of the Model Context Protocol.
//!
//! A server is a program started with its command line (never through a
//! shell) that speaks JSON-RPC 2.0 on its stdin and stdout, one JSON message
//! per line. The client sends `initialize` (protocol version
//! [`PROTOCOL_VERSION`], no client capabilities), refuses a server that
//! answers with a version not in [`SUPPORTED_VERSIONS`], then sends the
//! `notifications/initialized` notification, and afterwards `tools/list`
//! (following `nextCursor`) and `tools/call`.
//!
//! Calls to one server may overlap: a reader task per server matches each
//! response to its request by JSON-RPC id. Notifications from the server
//! (log messages, progress) are ignored, except `tools/list_changed`, which
//! drops the cached tool list; `ping` requests are answered, other
//! server→client requests get "method not found". The server's stderr is
//! drained and its last lines kept for error messages.
//!
//! [`McpPool`] starts each server on first use (in the run's directory, with
//! the runtime's environment), reuses it for the rest of the run, starts it
//! again if it died, and kills every server when dropped. Authorisation,
//! quotas and the tool whitelist are the control plane's: this module only
//! talks to servers.

use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// The protocol version the client asks for: the latest it speaks.
pub const PROTOCOL_VERSION: &str = "2025-11-25";

/// The protocol versions the client speaks (it uses `tools/*`, the same in
/// each). A server answers `initialize` with the version it will speak; any
/// other is refused with an error naming both sides, as the protocol asks.
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

/// Lines of the server's stderr kept for error messages.
const STDERR_LINES: usize = 20;

/// Lines of stderr quoted in an error message.
const STDERR_QUOTED: usize = 5;

/// Pages of `tools/list` followed at most.
const MAX_PAGES: usize = 100;

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

/// Live MCP servers of a run, started on first use and reused, keyed by their command line; killed on drop.
pub struct McpPool {
    cwd: PathBuf,
    servers: Mutex<HashMap<Vec<String>, Slot>>,
}

/// A command line's server: locked while it starts, so that it starts once.
type Slot = Arc<tokio::sync::Mutex<Option<Arc<Server>>>>;

impl std::fmt::Debug for McpPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let servers: Vec<String> = lock(&self.servers).keys().map(|k| label(k)).collect();
        f.debug_struct("McpPool").field("cwd", &self.cwd).field("servers", &servers).finish()
    }
}

impl McpPool {
    /// A pool whose servers start in `cwd`, with this process's environment.
    pub fn new(cwd: PathBuf) -> McpPool {
        McpPool { cwd, servers: Mutex::new(HashMap::new()) }
    }

    /// The live server for a command line: started on first use, started
    /// again when it died.
    async fn server(&self, server: &[String]) -> Result<Arc<Server>, String> {
        if server.is_empty() {
            return Err("an MCP tool needs the command line of its server (`server`), and it is empty".into());
        }
        let slot = lock(&self.servers).entry(server.to_vec()).or_default().clone();
        let mut slot = slot.lock().await;
        if let Some(live) = slot.as_ref().filter(|s| s.alive()) {
            return Ok(live.clone());
        }
        // A dead server is dropped (and killed) before its successor starts.
        *slot = None;
        let started = Arc::new(Server::start(server, &self.cwd).await?);
        *slot = Some(started.clone());
        Ok(started)
    }

    /// The tools a server offers: name → input schema.
    pub async fn tools(&self, server: &[String]) -> Result<Vec<(String, Value)>, String> {
        self.server(server).await?.tools().await
    }

    /// Calls `tool` at `server` with `arguments`. Ok(output) where output is `structuredContent` if present, else the single text content parsed as JSON if it parses, else the text as a JSON string (several contents → array of them). Err(message) on isError, protocol errors, a dead server, or the timeout.
    ///
    /// `timeout_ms` bounds the `tools/call` request; starting the server has
    /// its own limit (60 s). A timed-out call is cancelled at the server
    /// (`notifications/cancelled`) and its message says "timed out after N ms".
    pub async fn call(&self, server: &[String], tool: &str, arguments: Value, timeout_ms: Option<u64>) -> Result<Value, String> {
        let live = self.server(server).await?;
        let mut params = json!({ "name": tool });
        if !arguments.is_null() {
            params["arguments"] = arguments;
        }
        let timeout = timeout_ms.map(Duration::from_millis);
        let result = match live.request("tools/call", params, timeout, true).await {
            Ok(result) => result,
            Err(Failure::Timeout) => {
                return Err(format!("`{tool}` at the MCP server `{}` timed out after {} ms", live.label, timeout_ms.unwrap_or_default()))
            }
            Err(Failure::Other(message)) => return Err(message),
        };
        if result.get("isError").and_then(Value::as_bool) == Some(true) {
            return Err(format!("`{tool}` at the MCP server `{}` failed: {}", live.label, error_text(&result)));
        }
        Ok(output_of(&result))
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

fn content_value(item: &Value) -> Value {
    match (item.get("type").and_then(Value::as_str), item.get("text").and_then(Value::as_str)) {
        (Some("text"), Some(text)) => serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string())),
        _ => item.clone(),
    }
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

enum Failure {
    Timeout,
    Other(String),
}

/// A request waiting for its response: the method (for messages) and where
/// the reader sends the result or the error message.
type Waiter = (String, oneshot::Sender<Result<Value, String>>);

#[derive(Default)]
struct State {
    waiters: HashMap<u64, Waiter>,
    /// Why the server is gone, once it is.
    closed: Option<String>,
}

/// One running server.
struct Server {
    label: String,
    state: Arc<Mutex<State>>,
    /// Lines to write to the server's stdin (the writer task owns it; it
    /// closes stdin when the server is dropped).
    outbox: mpsc::UnboundedSender<String>,
    next_id: AtomicU64,
    tools: tokio::sync::Mutex<Option<Vec<(String, Value)>>>,
    tools_stale: Arc<AtomicBool>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    child: Arc<Mutex<Option<Child>>>,
    /// The server's process group: what it started goes with it.
    group: crate::exec::groups::Group,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = lock(&self.child).take() {
            let _ = child.start_kill();
        }
        self.group.stop();
    }
}

/// Removes a request that did not complete (timed out, or its caller went
/// away) and cancels it at the server.
struct Pending<'a> {
    server: &'a Server,
    id: u64,
    done: bool,
    cancel: bool,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let waiting = lock(&self.server.state).waiters.remove(&self.id).is_some();
        if waiting && self.cancel {
            let cancelled = json!({
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": { "requestId": self.id, "reason": "timed out or abandoned by the client" },
            });
            let _ = self.server.outbox.send(cancelled.to_string());
        }
    }
}

/// The last lines of stderr, for a message: ": a | b" or "".
fn stderr_tail(lines: &Mutex<VecDeque<String>>) -> String {
    let lines = lock(lines);
    let skip = lines.len().saturating_sub(STDERR_QUOTED);
    let tail: Vec<&str> = lines.iter().skip(skip).map(String::as_str).collect();
    if tail.is_empty() {
        String::new()
    } else {
        format!("; stderr: {}", tail.join(" | "))
    }
}

impl Server {
    async fn start(server: &[String], cwd: &Path) -> Result<Server, String> {
        let label = label(server);
        // A relative program path (`./server.py`) is taken from the run's
        // directory; a bare name is looked up on PATH.
        let mut program = PathBuf::from(&server[0]);
        if program.is_relative() && program.components().count() > 1 {
            program = cwd.join(program);
        }
        let mut command = Command::new(&program);
        command
            .args(&server[1..])
            .current_dir(cwd)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = command.spawn().map_err(|e| format!("cannot start the MCP server `{label}` (in {}): {e}", cwd.display()))?;
        let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take()) else {
            let _ = child.start_kill();
            return Err(format!("cannot start the MCP server `{label}`: its pipes are missing"));
        };
        tracing::debug!(target: "flow::mcp", server = %label, pid = ?child.id(), "MCP server started");
        let group = crate::exec::groups::Group::led_by(child.id());

        let state = Arc::new(Mutex::new(State::default()));
        let stderr_lines = Arc::new(Mutex::new(VecDeque::new()));
        let tools_stale = Arc::new(AtomicBool::new(false));
        let child = Arc::new(Mutex::new(Some(child)));
        let (outbox, inbox) = mpsc::unbounded_channel();

        let drain = tokio::spawn(drain_stderr(label.clone(), stderr, stderr_lines.clone()));
        tokio::spawn(write_loop(stdin, inbox));
        tokio::spawn(
            Reader {
                label: label.clone(),
                state: state.clone(),
                outbox: outbox.downgrade(),
                tools_stale: tools_stale.clone(),
                stderr: stderr_lines.clone(),
                child: child.clone(),
            }
            .run(stdout, drain),
        );

        let server = Server {
            label,
            state,
            outbox,
            next_id: AtomicU64::new(1),
            tools: tokio::sync::Mutex::new(None),
            tools_stale,
            stderr: stderr_lines,
            child,
            group,
        };
        let params = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": { "name": "flow", "version": env!("CARGO_PKG_VERSION") },
        });
        let init = match server.request("initialize", params, Some(STARTUP_TIMEOUT), false).await {
            Ok(init) => init,
            Err(Failure::Timeout) => {
                return Err(format!(
                    "the MCP server `{}` did not answer `initialize` within {} s{}",
                    server.label,
                    STARTUP_TIMEOUT.as_secs(),
                    stderr_tail(&server.stderr)
                ))
            }
            Err(Failure::Other(message)) => return Err(message),
        };
        let protocol = negotiated(&server.label, &init)?;
        let info = init.get("serverInfo").map(Value::to_string).unwrap_or_default();
        tracing::debug!(target: "flow::mcp", server = %server.label, %protocol, %info, "MCP server initialized");
        server.notify("notifications/initialized");
        Ok(server)
    }

    fn alive(&self) -> bool {
        lock(&self.state).closed.is_none()
    }

    fn notify(&self, method: &str) {
        let _ = self.outbox.send(json!({ "jsonrpc": "2.0", "method": method }).to_string());
    }

    /// Sends a request and waits for its response (or the timeout).
    async fn request(&self, method: &str, params: Value, timeout: Option<Duration>, cancel: bool) -> Result<Value, Failure> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        {
            let mut state = lock(&self.state);
            if let Some(why) = &state.closed {
                return Err(Failure::Other(why.clone()));
            }
            state.waiters.insert(id, (method.to_string(), tx));
        }
        let mut pending = Pending { server: self, id, done: false, cancel };
        let message = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        if self.outbox.send(message.to_string()).is_err() {
            pending.done = true;
            lock(&self.state).waiters.remove(&id);
            return Err(Failure::Other(format!("the MCP server `{}` no longer reads its input", self.label)));
        }
        let reply = match timeout {
            Some(limit) => match tokio::time::timeout(limit, rx).await {
                Ok(reply) => reply,
                // `pending` removes the waiter and cancels the request.
                Err(_) => return Err(Failure::Timeout),
            },
            None => rx.await,
        };
        pending.done = true;
        match reply {
            Ok(result) => result.map_err(Failure::Other),
            Err(_) => Err(Failure::Other(
                lock(&self.state).closed.clone().unwrap_or_else(|| format!("the MCP server `{}` went away", self.label)),
            )),
        }
    }

    /// The server's tools, cached until it says they changed.
    async fn tools(&self) -> Result<Vec<(String, Value)>, String> {
        let mut cache = self.tools.lock().await;
        if self.tools_stale.swap(false, Ordering::SeqCst) {
            *cache = None;
        }
        if let Some(tools) = cache.as_ref() {
            return Ok(tools.clone());
        }
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let params = match &cursor {
                Some(c) => json!({ "cursor": c }),
                None => json!({}),
            };
            let page = match self.request("tools/list", params, Some(STARTUP_TIMEOUT), true).await {
                Ok(page) => page,
                Err(Failure::Timeout) => {
                    return Err(format!(
                        "the MCP server `{}` did not answer `tools/list` within {} s",
                        self.label,
                        STARTUP_TIMEOUT.as_secs()
                    ))
                }
                Err(Failure::Other(message)) => return Err(message),
            };
            let Some(listed) = page.get("tools").and_then(Value::as_array) else {
                return Err(format!("the MCP server `{}` answered `tools/list` without a `tools` list: {page}", self.label));
            };
            for tool in listed {
                let Some(name) = tool.get("name").and_then(Value::as_str) else { continue };
                let schema = tool.get("inputSchema").cloned().unwrap_or_else(|| json!({ "type": "object" }));
                tools.push((name.to_string(), schema));
            }
            match page.get("nextCursor").and_then(Value::as_str) {
                Some(next) if !next.is_empty() => cursor = Some(next.to_string()),
                _ => break,
            }
        }
        *cache = Some(tools.clone());
        Ok(tools)
    }
}

/// Writes queued lines to the server's stdin; ends (closing stdin) when the
/// server is dropped or the pipe breaks.
async fn write_loop(mut stdin: ChildStdin, mut inbox: mpsc::UnboundedReceiver<String>) {
    while let Some(mut line) = inbox.recv().await {
        line.push('\n');
        if stdin.write_all(line.as_bytes()).await.is_err() || stdin.flush().await.is_err() {
            break;
        }
    }
}

/// Keeps the last lines of the server's stderr (and never lets the pipe fill).
async fn drain_stderr(label: String, stderr: ChildStderr, lines: Arc<Mutex<VecDeque<String>>>) {
    let mut reader = BufReader::new(stderr);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let line = String::from_utf8_lossy(&buf).trim_end().to_string();
        if line.is_empty() {
            continue;
        }
        tracing::debug!(target: "flow::mcp", server = %label, "stderr: {line}");
        let mut lines = lock(&lines);
        if lines.len() == STDERR_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }
}

/// Reads the server's stdout: responses go to their waiters, requests are
/// answered, notifications ignored (but `tools/list_changed`).
struct Reader {
    label: String,
    state: Arc<Mutex<State>>,
    /// Weak, so that dropping the server closes its stdin.
    outbox: mpsc::WeakUnboundedSender<String>,
    tools_stale: Arc<AtomicBool>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    child: Arc<Mutex<Option<Child>>>,
}

impl Reader {
    async fn run(self, stdout: ChildStdout, drain: JoinHandle<()>) {
        let mut reader = BufReader::new(stdout);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let line = buf.trim_ascii();
            if line.is_empty() {
                continue;
            }
            match serde_json::from_slice::<Value>(line) {
                Ok(Value::Array(batch)) => batch.into_iter().for_each(|m| self.handle(m)),
                Ok(message) => self.handle(message),
                Err(_) => {
                    tracing::debug!(target: "flow::mcp", server = %self.label, "not JSON-RPC on stdout: {}", String::from_utf8_lossy(line))
                }
            }
        }
        self.closed(drain).await;
    }

    fn handle(&self, message: Value) {
        let id = message.get("id").filter(|i| !i.is_null()).cloned();
        match (message.get("method").and_then(Value::as_str), id) {
            // A request from the server: only `ping` is served.
            (Some(method), Some(id)) => {
                let answer = if method == "ping" {
                    json!({ "jsonrpc": "2.0", "id": id, "result": {} })
                } else {
                    tracing::debug!(target: "flow::mcp", server = %self.label, "refused the server's request `{method}`");
                    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": -32601, "message": format!("method not found: {method}") } })
                };
                if let Some(outbox) = self.outbox.upgrade() {
                    let _ = outbox.send(answer.to_string());
                }
            }
            (Some(method), None) => {
                if method == "notifications/tools/list_changed" {
                    self.tools_stale.store(true, Ordering::SeqCst);
                }
                let params = message.get("params").map(Value::to_string).unwrap_or_default();
                tracing::trace!(target: "flow::mcp", server = %self.label, "notification `{method}`: {params}");
            }
            (None, Some(id)) => {
                let waiter = id.as_u64().and_then(|id| lock(&self.state).waiters.remove(&id));
                let Some((method, tx)) = waiter else {
                    tracing::debug!(target: "flow::mcp", server = %self.label, "a response to no pending request (id {id})");
                    return;
                };
                let reply = match (message.get("result"), message.get("error")) {
                    (_, Some(error)) => Err(format!(
                        "the MCP server `{}` answered `{method}` with error {}: {}",
                        self.label,
                        error.get("code").map(Value::to_string).unwrap_or_else(|| "?".into()),
                        error.get("message").and_then(Value::as_str).unwrap_or("(no message)")
                    )),
                    (Some(result), None) => Ok(result.clone()),
                    (None, None) => Err(format!("the MCP server `{}` answered `{method}` with neither a result nor an error", self.label)),
                };
                let _ = tx.send(reply);
            }
            (None, None) => {
                tracing::debug!(target: "flow::mcp", server = %self.label, "an unexpected message: {message}")
            }
        }
    }

    /// Stdout closed: the server is gone. Every waiting request fails with
    /// its exit status and the last lines of its stderr.
    async fn closed(self, drain: JoinHandle<()>) {
        let _ = tokio::time::timeout(Duration::from_secs(1), drain).await;
        let mut status = None;
        for _ in 0..50 {
            let polled = match lock(&self.child).as_mut() {
                Some(child) => child.try_wait(),
                None => break,
            };
            match polled {
                Ok(Some(s)) => {
                    status = Some(s);
                    break;
                }
                Ok(None) => tokio::time::sleep(Duration::from_millis(10)).await,
                Err(_) => break,
            }
        }
        let how = match status {
            Some(s) => format!("exited ({s})"),
            None => {
                // Closed its stdout but still runs: it is no use any more.
                if let Some(child) = lock(&self.child).as_mut() {
                    let _ = child.start_kill();
                }
                "closed its output".to_string()
            }
        };
        let tail = stderr_tail(&self.stderr);
        let why =
            format!("the MCP server `{}` {how}{}", self.label, if tail.is_empty() { "; it wrote nothing on stderr".into() } else { tail });
        tracing::debug!(target: "flow::mcp", "{why}");
        let waiters = {
            let mut state = lock(&self.state);
            state.closed = Some(why.clone());
            std::mem::take(&mut state.waiters)
        };
        for (_, (_, tx)) in waiters {
            let _ = tx.send(Err(why.clone()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake MCP server: newline-delimited JSON-RPC on stdio, tools chosen
    /// to exercise the client.
    /// A fake MCP server (Python): tools for every case below.
    const FAKE_SERVER: &str = include_str!("../tests/fixtures/mcp_fake_server.py");

    fn fake() -> (tempfile::TempDir, McpPool, Vec<String>) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("fake_server.py"), FAKE_SERVER).unwrap();
        let pool = McpPool::new(dir.path().to_path_buf());
        (dir, pool, vec!["python3".into(), "fake_server.py".into()])
    }

    #[tokio::test]
    async fn handshakes_and_lists_every_page_of_tools() {
        let (_dir, pool, server) = fake();
        let tools = pool.tools(&server).await.unwrap();
        let names: Vec<&str> = tools.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names[..5], ["handshake", "structured", "json_text", "plain_text", "multi"]);
        assert!(names.contains(&"pid"), "the second page is listed: {names:?}");
        assert_eq!(tools[0].1["properties"]["n"]["type"], "integer");
        let seen = pool.call(&server, "handshake", json!({}), Some(5000)).await.unwrap();
        assert_eq!(seen, json!({ "protocolVersion": PROTOCOL_VERSION, "client": "flow", "initialized": true }));
        assert!(format!("{pool:?}").contains("fake_server.py"));
    }

    #[tokio::test]
    async fn a_server_speaking_an_older_version_is_used_and_an_unknown_one_refused() {
        let (dir, pool, _) = fake();
        // The server's environment picks its answer (`env` runs it).
        let speaking = |version: &str| vec!["env".into(), format!("FAKE_MCP_VERSION={version}"), "python3".into(), "fake_server.py".into()];
        let older = speaking("2025-06-18");
        assert!(pool.tools(&older).await.is_ok(), "an older version flow speaks");
        let unknown = speaking("1999-01-01");
        let refused = pool.tools(&unknown).await.expect_err("a version flow does not speak");
        assert!(refused.contains("speaks protocol version `1999-01-01`, which flow does not"), "{refused}");
        assert!(refused.contains("2025-11-25"), "{refused}");
        drop(dir);
    }

    #[tokio::test]
    async fn outputs_follow_the_contents() {
        let (_dir, pool, server) = fake();
        // structuredContent wins over the text.
        assert_eq!(pool.call(&server, "structured", json!({"a": 2, "b": 3}), None).await.unwrap(), json!({"sum": 5}));
        // A text that is JSON is parsed.
        assert_eq!(pool.call(&server, "json_text", json!({"q": "x"}), None).await.unwrap(), json!({"echo": {"q": "x"}}));
        // A text that is not stays a string.
        assert_eq!(pool.call(&server, "plain_text", json!({"who": "you"}), None).await.unwrap(), json!("hello you"));
        // Several contents: an array of them.
        let multi = pool.call(&server, "multi", json!({}), None).await.unwrap();
        assert_eq!(multi, json!([1, "two", {"type": "image", "data": "AA==", "mimeType": "image/png"}]));
    }

    #[tokio::test]
    async fn errors_are_errors() {
        let (_dir, pool, server) = fake();
        let err = pool.call(&server, "fail", json!({}), None).await.unwrap_err();
        assert!(err.contains("`fail`") && err.contains("no such customer"), "{err}");
        let err = pool.call(&server, "nope", json!({}), None).await.unwrap_err();
        assert!(err.contains("error -32602") && err.contains("Unknown tool: nope"), "{err}");
        // The server is still up.
        assert_eq!(pool.call(&server, "structured", json!({"a": 1, "b": 1}), None).await.unwrap(), json!({"sum": 2}));
    }

    #[tokio::test]
    async fn concurrent_calls_are_matched_by_id() {
        let (_dir, pool, server) = fake();
        pool.tools(&server).await.unwrap();
        let (a, b) = tokio::join!(
            pool.call(&server, "pair", json!({"tag": "a"}), Some(10_000)),
            pool.call(&server, "pair", json!({"tag": "b"}), Some(10_000)),
        );
        assert_eq!(a.unwrap(), json!({"tag": "a"}));
        assert_eq!(b.unwrap(), json!({"tag": "b"}));
    }

    #[tokio::test]
    async fn pings_are_answered() {
        let (_dir, pool, server) = fake();
        assert_eq!(pool.call(&server, "ping_me", json!({}), Some(5000)).await.unwrap(), json!({"pong": true}));
    }

    #[tokio::test]
    async fn a_call_times_out_and_the_server_lives_on() {
        let (_dir, pool, server) = fake();
        let err = pool.call(&server, "hang", json!({}), Some(200)).await.unwrap_err();
        assert!(err.contains("`hang`") && err.contains("timed out after 200 ms"), "{err}");
        assert_eq!(pool.call(&server, "structured", json!({"a": 1, "b": 2}), Some(5000)).await.unwrap(), json!({"sum": 3}));
    }

    #[tokio::test]
    async fn a_server_that_exits_fails_its_calls_with_its_stderr_and_starts_again() {
        let (_dir, pool, server) = fake();
        let err = pool.call(&server, "die", json!({}), Some(5000)).await.unwrap_err();
        assert!(err.contains("python3 fake_server.py") && err.contains("exited") && err.contains("fatal: disk on fire"), "{err}");
        // The next use starts it again.
        assert_eq!(pool.call(&server, "structured", json!({"a": 4, "b": 4}), Some(5000)).await.unwrap(), json!({"sum": 8}));
    }

    #[tokio::test]
    async fn servers_that_cannot_start_are_named() {
        let (_dir, pool, _) = fake();
        let err = pool.tools(&["/nonexistent/mcp-server".into(), "--flag".into()]).await.unwrap_err();
        assert!(err.contains("cannot start the MCP server `/nonexistent/mcp-server --flag`"), "{err}");
        let quits: Vec<String> =
            vec!["python3".into(), "-c".into(), "import sys; sys.stderr.write('missing API key\\n'); sys.exit(2)".into()];
        let err = pool.tools(&quits).await.unwrap_err();
        assert!(err.contains("python3 -c") && err.contains("exited") && err.contains("missing API key"), "{err}");
        let err = pool.tools(&[]).await.unwrap_err();
        assert!(err.contains("empty"), "{err}");
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn dropping_the_pool_kills_its_servers() {
        let (_dir, pool, server) = fake();
        let pid = pool.call(&server, "pid", json!({}), Some(5000)).await.unwrap().as_u64().unwrap();
        let stat = format!("/proc/{pid}/stat");
        assert!(std::path::Path::new(&stat).exists());
        drop(pool);
        let mut gone = false;
        for _ in 0..200 {
            // Gone, or a zombie not reaped yet.
            match std::fs::read_to_string(&stat) {
                Err(_) => gone = true,
                Ok(s) => gone = s.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')),
            }
            if gone {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(gone, "the server (pid {pid}) still runs");
    }

    #[test]
    fn outputs_of_results() {
        assert_eq!(output_of(&json!({"content": []})), Value::Null);
        assert_eq!(output_of(&json!({"content": [{"type": "text", "text": "42"}]})), json!(42));
        assert_eq!(output_of(&json!({"content": [{"type": "text", "text": "a"}], "structuredContent": null})), json!("a"));
        assert_eq!(error_text(&json!({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]})), "a\nb");
        assert_eq!(label(&["a b".into(), "c".into()]), "\"a b\" c");
    }
}
