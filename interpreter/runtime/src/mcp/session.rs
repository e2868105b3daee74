//! One MCP session, whatever carries it: requests matched to responses by
//! id, messages from the server handled, the handshake and the tool list.
//! A transport ([`super::stdio`], [`super::http`]) delivers the outgoing
//! messages the session queues and hands every incoming one to
//! [`Inbound::handle`].

use super::{lock, negotiated, ProgressSink, ToolProgress, PROTOCOL_VERSION, STARTUP_TIMEOUT};
use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// Pages of `tools/list` followed at most.
const MAX_PAGES: usize = 100;

/// Lines of a stdio server's stderr quoted in an error message.
const STDERR_QUOTED: usize = 5;

pub(super) enum Failure {
    Timeout,
    /// The server had ended the session: the request never reached it, and
    /// may be sent again on a new session.
    Ended(String),
    Other(String),
}

/// A request waiting for its response: the method (for messages) and where
/// the response goes.
type Waiter = (String, oneshot::Sender<Result<Value, Failure>>);

#[derive(Default)]
pub(super) struct State {
    waiters: HashMap<u64, Waiter>,
    /// Calls whose progress is reported: progress token → the flow tool.
    progress: HashMap<u64, String>,
    /// Why the session is over, once it is.
    closed: Option<String>,
}

/// What the session and its transport's tasks share.
pub(super) struct Shared {
    pub label: String,
    pub state: Mutex<State>,
    tools_stale: AtomicBool,
    /// The last lines of a stdio server's stderr (empty over HTTP).
    pub stderr: Mutex<VecDeque<String>>,
    /// `roots/list`'s answer.
    roots: Vec<Value>,
    progress: Option<ProgressSink>,
}

impl Shared {
    pub fn new(label: String, roots: Vec<Value>, progress: Option<ProgressSink>) -> Arc<Shared> {
        Arc::new(Shared {
            label,
            state: Mutex::new(State::default()),
            tools_stale: AtomicBool::new(false),
            stderr: Mutex::new(VecDeque::new()),
            roots,
            progress,
        })
    }

    /// Ends the session: every waiting request fails with `why`, and so
    /// does every later one.
    pub fn close(&self, why: String) {
        tracing::debug!(target: "flow::mcp", "{why}");
        let waiters = {
            let mut state = lock(&self.state);
            if state.closed.is_none() {
                state.closed = Some(why.clone());
            }
            std::mem::take(&mut state.waiters)
        };
        for (_, (_, tx)) in waiters {
            let _ = tx.send(Err(Failure::Other(why.clone())));
        }
    }

    /// Fails one request, if it still waits.
    pub fn fail(&self, id: u64, why: impl FnOnce(&str) -> String) {
        let waiter = lock(&self.state).waiters.remove(&id);
        if let Some((method, tx)) = waiter {
            let _ = tx.send(Err(Failure::Other(why(&method))));
        }
    }

    /// Fails one request the server refused for an ended session, and ends it.
    pub fn ended(&self, id: Option<u64>, why: String) {
        let waiter = id.and_then(|id| lock(&self.state).waiters.remove(&id));
        if let Some((_, tx)) = waiter {
            let _ = tx.send(Err(Failure::Ended(why.clone())));
        }
        self.close(why);
    }

    /// The last lines of stderr, for a message: "; stderr: a | b" or "".
    pub fn stderr_tail(&self) -> String {
        let lines = lock(&self.stderr);
        let skip = lines.len().saturating_sub(STDERR_QUOTED);
        let tail: Vec<&str> = lines.iter().skip(skip).map(String::as_str).collect();
        if tail.is_empty() {
            String::new()
        } else {
            format!("; stderr: {}", tail.join(" | "))
        }
    }
}

/// One connected server. Dropping it closes the server: the transport's
/// resources (`link`) go with it, and its outgoing queue closes.
pub(super) struct Session {
    pub shared: Arc<Shared>,
    outbox: mpsc::UnboundedSender<String>,
    next_id: AtomicU64,
    tools: tokio::sync::Mutex<Option<Vec<(String, Value)>>>,
    _link: Box<dyn Send + Sync>,
}

/// Removes a request that did not complete (timed out, or its caller went
/// away) and cancels it at the server.
struct Pending<'a> {
    session: &'a Session,
    id: u64,
    done: bool,
    cancel: bool,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        let waiting = {
            let mut state = lock(&self.session.shared.state);
            state.progress.remove(&self.id);
            state.waiters.remove(&self.id).is_some()
        };
        if !self.done && waiting && self.cancel {
            let cancelled = json!({
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": { "requestId": self.id, "reason": "timed out or abandoned by the client" },
            });
            let _ = self.session.outbox.send(cancelled.to_string());
        }
    }
}

impl Session {
    /// A session whose outgoing messages go to `outbox`; `link` holds what
    /// the transport must release when the session goes.
    pub fn new(shared: Arc<Shared>, outbox: mpsc::UnboundedSender<String>, link: Box<dyn Send + Sync>) -> Session {
        Session { shared, outbox, next_id: AtomicU64::new(1), tools: tokio::sync::Mutex::new(None), _link: link }
    }

    pub fn label(&self) -> &str {
        &self.shared.label
    }

    pub fn alive(&self) -> bool {
        lock(&self.shared.state).closed.is_none()
    }

    /// `initialize`: the protocol version the server will speak, if flow
    /// speaks it. The caller sends `notifications/initialized` after.
    pub async fn initialize(&self) -> Result<String, String> {
        let params = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": { "roots": { "listChanged": false } },
            "clientInfo": { "name": "flow", "version": env!("CARGO_PKG_VERSION") },
        });
        let init = self.startup_request("initialize", params).await?;
        let protocol = negotiated(self.label(), &init)?;
        let info = init.get("serverInfo").map(Value::to_string).unwrap_or_default();
        tracing::debug!(target: "flow::mcp", server = %self.label(), %protocol, %info, "MCP server initialized");
        Ok(protocol)
    }

    /// A request the server may take as long as it starts up to answer
    /// ([`STARTUP_TIMEOUT`]): its result, or why not as a message.
    async fn startup_request(&self, method: &str, params: Value) -> Result<Value, String> {
        match self.request(method, params, Some(STARTUP_TIMEOUT), None).await {
            Ok(result) => Ok(result),
            Err(Failure::Timeout) => Err(format!(
                "the MCP server `{}` did not answer `{method}` within {} s{}",
                self.label(),
                STARTUP_TIMEOUT.as_secs(),
                self.shared.stderr_tail()
            )),
            Err(Failure::Other(message) | Failure::Ended(message)) => Err(message),
        }
    }

    pub fn notify(&self, method: &str) {
        let _ = self.outbox.send(json!({ "jsonrpc": "2.0", "method": method }).to_string());
    }

    /// Sends a request and waits for its response (or the timeout). With
    /// `progress_for` (a flow tool's name) and a progress sink, the request
    /// carries a progress token and the server's reports reach the sink.
    /// Requests other than `initialize` are cancelled at the server when
    /// they time out or are abandoned.
    pub async fn request(
        &self,
        method: &str,
        mut params: Value,
        timeout: Option<Duration>,
        progress_for: Option<&str>,
    ) -> Result<Value, Failure> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        {
            let mut state = lock(&self.shared.state);
            if let Some(why) = &state.closed {
                return Err(Failure::Other(why.clone()));
            }
            state.waiters.insert(id, (method.to_string(), tx));
            if let (Some(tool), Some(_)) = (progress_for, &self.shared.progress) {
                state.progress.insert(id, tool.to_string());
                params["_meta"] = json!({ "progressToken": id });
            }
        }
        let mut pending = Pending { session: self, id, done: false, cancel: method != "initialize" };
        let message = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        if self.outbox.send(message.to_string()).is_err() {
            pending.done = true;
            return Err(Failure::Other(format!("the MCP server `{}` is no longer connected", self.label())));
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
            Ok(result) => result,
            Err(_) => Err(Failure::Other(
                lock(&self.shared.state).closed.clone().unwrap_or_else(|| format!("the MCP server `{}` went away", self.label())),
            )),
        }
    }

    /// The server's tools, cached until it says they changed.
    pub async fn tools(&self) -> Result<Vec<(String, Value)>, String> {
        let mut cache = self.tools.lock().await;
        if self.shared.tools_stale.swap(false, Ordering::SeqCst) {
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
            let page = self.startup_request("tools/list", params).await?;
            let Some(listed) = page.get("tools").and_then(Value::as_array) else {
                return Err(format!("the MCP server `{}` answered `tools/list` without a `tools` list: {page}", self.label()));
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

/// Handles what the server sends: responses go to their waiters, requests
/// are answered, progress is reported, other notifications are ignored
/// (but `tools/list_changed`).
#[derive(Clone)]
pub(super) struct Inbound {
    pub shared: Arc<Shared>,
    /// Weak, so that dropping the session closes the transport.
    pub outbox: mpsc::WeakUnboundedSender<String>,
}

impl Inbound {
    /// Handles one JSON-RPC message or batch.
    pub fn handle_json(&self, bytes: &[u8]) {
        match serde_json::from_slice::<Value>(bytes) {
            Ok(Value::Array(batch)) => batch.into_iter().for_each(|m| self.handle(m)),
            Ok(message) => self.handle(message),
            Err(_) => {
                tracing::debug!(target: "flow::mcp", server = %self.shared.label, "not JSON-RPC: {}", String::from_utf8_lossy(bytes))
            }
        }
    }

    pub fn handle(&self, message: Value) {
        let id = message.get("id").filter(|i| !i.is_null()).cloned();
        match (message.get("method").and_then(Value::as_str), id) {
            (Some(method), Some(id)) => self.answer(method, id),
            (Some(method), None) => self.notified(method, message.get("params")),
            (None, Some(id)) => self.respond(&message, &id),
            (None, None) => {
                tracing::debug!(target: "flow::mcp", server = %self.shared.label, "an unexpected message: {message}")
            }
        }
    }

    /// A request from the server: `ping` and `roots/list` are served.
    fn answer(&self, method: &str, id: Value) {
        let answer = match method {
            "ping" => json!({ "jsonrpc": "2.0", "id": id, "result": {} }),
            "roots/list" => json!({ "jsonrpc": "2.0", "id": id, "result": { "roots": self.shared.roots } }),
            _ => {
                tracing::debug!(target: "flow::mcp", server = %self.shared.label, "refused the server's request `{method}`");
                json!({ "jsonrpc": "2.0", "id": id, "error": { "code": -32601, "message": format!("method not found: {method}") } })
            }
        };
        if let Some(outbox) = self.outbox.upgrade() {
            let _ = outbox.send(answer.to_string());
        }
    }

    fn notified(&self, method: &str, params: Option<&Value>) {
        match method {
            "notifications/tools/list_changed" => self.shared.tools_stale.store(true, Ordering::SeqCst),
            "notifications/progress" => self.progressed(params.unwrap_or(&Value::Null)),
            _ => {}
        }
        let params = params.map(Value::to_string).unwrap_or_default();
        tracing::trace!(target: "flow::mcp", server = %self.shared.label, "notification `{method}`: {params}");
    }

    /// A progress report on a call that asked for them.
    fn progressed(&self, params: &Value) {
        let Some(sink) = &self.shared.progress else { return };
        let Some(token) = params.get("progressToken").and_then(Value::as_u64) else { return };
        let Some(tool) = lock(&self.shared.state).progress.get(&token).cloned() else { return };
        let Some(progress) = params.get("progress").and_then(Value::as_f64) else { return };
        sink(&ToolProgress {
            tool,
            server: self.shared.label.clone(),
            progress,
            total: params.get("total").and_then(Value::as_f64),
            message: params.get("message").and_then(Value::as_str).map(str::to_string),
        });
    }

    fn respond(&self, message: &Value, id: &Value) {
        let label = &self.shared.label;
        let waiter = id.as_u64().and_then(|id| lock(&self.shared.state).waiters.remove(&id));
        let Some((method, tx)) = waiter else {
            tracing::debug!(target: "flow::mcp", server = %label, "a response to no pending request (id {id})");
            return;
        };
        let reply = match (message.get("result"), message.get("error")) {
            (_, Some(error)) => Err(Failure::Other(format!(
                "the MCP server `{label}` answered `{method}` with error {}: {}",
                error.get("code").map(Value::to_string).unwrap_or_else(|| "?".into()),
                error.get("message").and_then(Value::as_str).unwrap_or("(no message)")
            ))),
            (Some(result), None) => Ok(result.clone()),
            (None, None) => Err(Failure::Other(format!("the MCP server `{label}` answered `{method}` with neither a result nor an error"))),
        };
        let _ = tx.send(reply);
    }
}
