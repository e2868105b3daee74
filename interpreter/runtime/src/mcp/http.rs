//! MCP over Streamable HTTP (protocol 2025-03-26 and later).
//!
//! Every outgoing message is POSTed to the server's URL, in order: a POST
//! is sent once the previous one has its response headers. A request's
//! answer comes back as a JSON body or as a stream of server-sent events
//! (which may carry progress and server→client requests before the
//! response); notifications and responses are answered `202 Accepted`. The
//! session id the server gives in `Mcp-Session-Id` is sent on every later
//! request, with `MCP-Protocol-Version` once negotiated. After the
//! handshake a `GET` opens the stream on which the server sends requests
//! unrelated to a call (such as `roots/list`); a server without one
//! answers 405 and that is fine. `404` on a session means the server ended
//! it: the session closes and the pool connects again on next use. Closing
//! the session sends `DELETE`.

use super::lock;
use super::session::{Inbound, Session, Shared};
use reqwest::header::{HeaderMap, ACCEPT, CONTENT_TYPE};
use serde_json::Value;
use std::sync::{Arc, Mutex, OnceLock};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

const SESSION_ID: &str = "mcp-session-id";
const PROTOCOL_HEADER: &str = "mcp-protocol-version";

/// The connection to one server: what every request carries.
struct Link {
    client: reqwest::Client,
    url: String,
    headers: Vec<(String, String)>,
    session_id: Mutex<Option<String>>,
    protocol: OnceLock<String>,
    /// Streams being read (answers, the GET stream): stopped with the session.
    readers: Mutex<Vec<AbortHandle>>,
}

impl Link {
    fn with_headers(&self, mut request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        for (name, value) in &self.headers {
            request = request.header(name.as_str(), value.as_str());
        }
        if let Some(id) = lock(&self.session_id).as_ref() {
            request = request.header(SESSION_ID, id.as_str());
        }
        if let Some(protocol) = self.protocol.get() {
            request = request.header(PROTOCOL_HEADER, protocol.as_str());
        }
        request
    }

    fn remember_session(&self, headers: &HeaderMap) {
        if let Some(id) = headers.get(SESSION_ID).and_then(|v| v.to_str().ok()) {
            let mut known = lock(&self.session_id);
            if known.is_none() {
                *known = Some(id.to_string());
            }
        }
    }

    fn track(&self, handle: AbortHandle) {
        let mut readers = lock(&self.readers);
        readers.retain(|h| !h.is_finished());
        readers.push(handle);
    }
}

/// Released with the session: its streams stop, and the server is told
/// the session ended (`DELETE`, best effort, without waiting).
struct Close(Arc<Link>);

impl Drop for Close {
    fn drop(&mut self) {
        for reader in lock(&self.0.readers).drain(..) {
            reader.abort();
        }
        let Some(id) = lock(&self.0.session_id).clone() else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let link = self.0.clone();
        runtime.spawn(async move {
            let delete = link.client.delete(&link.url).header(SESSION_ID, id);
            let _ = link.with_headers(delete).send().await;
        });
    }
}

/// Connects to the server at `url` and initializes a session with it.
pub(super) async fn start(url: &str, headers: &[(String, String)], shared: Arc<Shared>) -> Result<Session, String> {
    let scheme_ok = url.starts_with("http://") || url.starts_with("https://");
    if !scheme_ok {
        return Err(format!("the MCP server URL `{url}` is not an http:// or https:// URL"));
    }
    let link = Arc::new(Link {
        client: reqwest::Client::new(),
        url: url.to_string(),
        headers: headers.to_vec(),
        session_id: Mutex::new(None),
        protocol: OnceLock::new(),
        readers: Mutex::new(Vec::new()),
    });
    let (outbox, inbox) = mpsc::unbounded_channel();
    let inbound = Inbound { shared: shared.clone(), outbox: outbox.downgrade() };
    tokio::spawn(post_loop(link.clone(), inbound.clone(), inbox));
    let session = Session::new(shared, outbox, Box::new(Close(link.clone())));
    let protocol = session.initialize().await?;
    let _ = link.protocol.set(protocol);
    session.notify("notifications/initialized");
    let listening = tokio::spawn(listen(link.clone(), inbound));
    link.track(listening.abort_handle());
    Ok(session)
}

/// The id of a request the client sends (a message with a method and an id).
fn request_id(message: &str) -> Option<u64> {
    let value: Value = serde_json::from_str(message).ok()?;
    value.get("method")?;
    value.get("id")?.as_u64()
}

/// POSTs queued messages until the session is dropped: in order during
/// the handshake and for notifications and responses (each waits for the
/// previous one's response headers); requests after the handshake at once,
/// so that a slow call does not hold the next one back.
async fn post_loop(link: Arc<Link>, inbound: Inbound, mut inbox: mpsc::UnboundedReceiver<String>) {
    while let Some(message) = inbox.recv().await {
        let id = request_id(&message);
        if id.is_some() && link.protocol.get().is_some() {
            let sending = tokio::spawn(deliver(link.clone(), inbound.clone(), message, id));
            link.track(sending.abort_handle());
        } else {
            deliver(link.clone(), inbound.clone(), message, id).await;
        }
    }
}

/// POSTs one message; its answer, if any, is read by a task of its own.
async fn deliver(link: Arc<Link>, inbound: Inbound, message: String, id: Option<u64>) {
    let shared = &inbound.shared;
    let label = &shared.label;
    let post = link
        .client
        .post(&link.url)
        .header(CONTENT_TYPE, "application/json")
        .header(ACCEPT, "application/json, text/event-stream")
        .body(message);
    let response = match link.with_headers(post).send().await {
        Ok(response) => response,
        Err(e) => return shared.close(format!("cannot reach the MCP server `{label}`: {e}")),
    };
    link.remember_session(response.headers());
    let status = response.status();
    if status == reqwest::StatusCode::NOT_FOUND && lock(&link.session_id).is_some() {
        return shared.ended(id, format!("the MCP server `{label}` ended the session (HTTP 404)"));
    }
    if !status.is_success() {
        let body = response.text().await.unwrap_or_default();
        let body: String = body.chars().take(200).collect();
        match id {
            Some(id) => shared.fail(id, |method| format!("the MCP server `{label}` answered `{method}` with HTTP {status}: {body}")),
            None => tracing::debug!(target: "flow::mcp", server = %label, "a message was refused with HTTP {status}: {body}"),
        }
        return;
    }
    if status == reqwest::StatusCode::ACCEPTED || status == reqwest::StatusCode::NO_CONTENT {
        return;
    }
    let streamed = is_event_stream(response.headers());
    let reader = tokio::spawn(read_answer(response, streamed, inbound.clone(), id));
    link.track(reader.abort_handle());
}

fn is_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.trim_start().to_ascii_lowercase().starts_with("text/event-stream"))
}

/// Reads one POST's answer: a JSON body, or events until the stream ends.
/// A request whose answer ended without its response fails.
async fn read_answer(mut response: reqwest::Response, streamed: bool, inbound: Inbound, id: Option<u64>) {
    let label = inbound.shared.label.clone();
    if streamed {
        read_events(&mut response, &inbound).await;
    } else {
        match response.bytes().await {
            Ok(body) if !body.trim_ascii().is_empty() => inbound.handle_json(&body),
            Ok(_) => {}
            Err(e) => tracing::debug!(target: "flow::mcp", server = %label, "cannot read an answer: {e}"),
        }
    }
    if let Some(id) = id {
        inbound.shared.fail(id, |method| format!("the MCP server `{label}` ended its answer to `{method}` without a response"));
    }
}

/// The stream of server-initiated messages, while the server keeps it open.
async fn listen(link: Arc<Link>, inbound: Inbound) {
    let get = link.client.get(&link.url).header(ACCEPT, "text/event-stream");
    let Ok(mut response) = link.with_headers(get).send().await else { return };
    if !response.status().is_success() || !is_event_stream(response.headers()) {
        tracing::debug!(target: "flow::mcp", server = %inbound.shared.label, "no stream of server messages (HTTP {})", response.status());
        return;
    }
    read_events(&mut response, &inbound).await;
}

async fn read_events(response: &mut reqwest::Response, inbound: &Inbound) {
    let mut events = Events::default();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => events.feed(&chunk).iter().for_each(|data| inbound.handle_json(data.as_bytes())),
            Ok(None) => break,
            Err(e) => {
                tracing::debug!(target: "flow::mcp", server = %inbound.shared.label, "the event stream broke: {e}");
                break;
            }
        }
    }
    if let Some(data) = events.finish() {
        inbound.handle_json(data.as_bytes());
    }
}

/// A server-sent events parser: the `data` of each event (other fields are
/// not needed: the client does not resume streams).
#[derive(Default)]
struct Events {
    pending: Vec<u8>,
    data: Option<String>,
}

impl Events {
    /// The events completed by `chunk`.
    fn feed(&mut self, chunk: &[u8]) -> Vec<String> {
        self.pending.extend_from_slice(chunk);
        let mut done = Vec::new();
        while let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                done.extend(self.data.take());
            } else if let Some(value) = line.strip_prefix("data:") {
                let value = value.strip_prefix(' ').unwrap_or(value);
                match &mut self.data {
                    Some(data) => {
                        data.push('\n');
                        data.push_str(value);
                    }
                    None => self.data = Some(value.to_string()),
                }
            }
        }
        done
    }

    /// An event the stream ended in the middle of (its last line unended).
    fn finish(&mut self) -> Option<String> {
        let mut done = self.feed(b"\n\n");
        done.pop()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_split_across_chunks_and_lines() {
        let mut events = Events::default();
        assert!(events.feed(b"event: message\r\nid: 1\r\ndata: {\"a\"").is_empty());
        assert_eq!(events.feed(b": 1}\r\n\r\ndata:x\ndata: y\n\n: comment\n\ndata: z"), ["{\"a\": 1}", "x\ny"]);
        assert_eq!(events.finish().as_deref(), Some("z"));
        assert_eq!(events.finish(), None);
    }

    #[test]
    fn only_requests_of_the_client_have_ids_to_fail() {
        assert_eq!(request_id(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call"}"#), Some(7));
        assert_eq!(request_id(r#"{"jsonrpc":"2.0","id":7,"result":{}}"#), None);
        assert_eq!(request_id(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#), None);
    }
}
