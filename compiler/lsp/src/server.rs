//! The message loop: documents in, answers and diagnostics out.

use crate::analysis::{Analysis, TOKEN_TYPES};
use crossbeam_channel::{Receiver, Sender};
use flow_verify::Cancel;
use lsp_server::{Connection, Message, Notification, Request, RequestId, Response};
use lsp_types::notification::{
    DidChangeTextDocument, DidCloseTextDocument, DidOpenTextDocument, Exit, Notification as _, PublishDiagnostics,
};
use lsp_types::request::{
    Completion, DocumentSymbolRequest, GotoDefinition, HoverRequest, References, Rename, Request as _, SemanticTokensFullRequest, Shutdown,
};
use lsp_types::{
    CompletionOptions, CompletionParams, CompletionResponse, DidChangeTextDocumentParams, DidCloseTextDocumentParams,
    DidOpenTextDocumentParams, DocumentSymbolParams, DocumentSymbolResponse, GotoDefinitionParams, GotoDefinitionResponse, Hover,
    HoverContents, HoverParams, HoverProviderCapability, MarkupContent, MarkupKind, OneOf, PublishDiagnosticsParams, ReferenceParams,
    RenameParams, SemanticTokens, SemanticTokensFullOptions, SemanticTokensLegend, SemanticTokensOptions, SemanticTokensParams,
    SemanticTokensResult, SemanticTokensServerCapabilities, ServerCapabilities, TextDocumentSyncCapability, TextDocumentSyncKind, Uri,
    WorkspaceEdit,
};
use std::collections::{HashMap, VecDeque};

struct Document {
    version: i32,
    analysis: Analysis,
}

/// Serves LSP over stdin/stdout until the client shuts the server down.
pub fn run_stdio() -> Result<(), String> {
    let (connection, io_threads) = Connection::stdio();
    serve(&connection)?;
    drop(connection);
    io_threads.join().map_err(|e| e.to_string())
}

fn capabilities() -> ServerCapabilities {
    ServerCapabilities {
        text_document_sync: Some(TextDocumentSyncCapability::Kind(TextDocumentSyncKind::FULL)),
        hover_provider: Some(HoverProviderCapability::Simple(true)),
        definition_provider: Some(OneOf::Left(true)),
        references_provider: Some(OneOf::Left(true)),
        document_symbol_provider: Some(OneOf::Left(true)),
        rename_provider: Some(OneOf::Left(true)),
        completion_provider: Some(CompletionOptions { trigger_characters: Some(vec![".".into(), ":".into()]), ..Default::default() }),
        semantic_tokens_provider: Some(SemanticTokensServerCapabilities::SemanticTokensOptions(SemanticTokensOptions {
            legend: SemanticTokensLegend { token_types: TOKEN_TYPES.iter().map(|t| (*t).into()).collect(), token_modifiers: Vec::new() },
            full: Some(SemanticTokensFullOptions::Bool(true)),
            range: None,
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// What a session did (for tests): analyses that landed and analyses
/// cancelled because a later edit replaced their text.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Served {
    pub analysed: usize,
    pub cancelled: usize,
}

/// A finished (or cancelled: `None`) analysis of one version of a document.
struct Done {
    uri: Uri,
    version: i32,
    analysis: Option<Box<Analysis>>,
}

/// Whatever the loop handles next.
enum Event {
    Message(Message),
    Done(Done),
}

/// The server's state between messages.
struct Server<'c> {
    connection: &'c Connection,
    documents: HashMap<String, Document>,
    /// Analyses running on worker threads: per URI, the version and how to
    /// cancel it. A newer edit cancels the older analysis.
    running: HashMap<String, (i32, Cancel)>,
    /// Requests about a document whose analysis is running: answered when
    /// it lands, against the text they were sent for.
    waiting: Vec<Request>,
    done: (Sender<Done>, Receiver<Done>),
    /// Analysis threads started and not yet heard from.
    in_flight: usize,
    served: Served,
}

/// Runs the server on a connection (stdio, or in memory for tests).
///
/// Documents are analysed on worker threads, as `flowc verify` would (the
/// model checker included); the loop stays free to read the next message.
/// An edit cancels the analysis of the text it replaces, and an edit whose
/// next message is already another edit of the same document is not
/// analysed at all.
pub fn serve(connection: &Connection) -> Result<Served, String> {
    let capabilities = serde_json::to_value(capabilities()).map_err(|e| e.to_string())?;
    connection.initialize(capabilities).map_err(|e| e.to_string())?;
    let mut server = Server {
        connection,
        documents: HashMap::new(),
        running: HashMap::new(),
        waiting: Vec::new(),
        done: crossbeam_channel::unbounded(),
        in_flight: 0,
        served: Served::default(),
    };
    // Messages already received but not yet handled.
    let mut queued: VecDeque<Message> = VecDeque::new();
    loop {
        let message = match server.next_event(&mut queued) {
            None => return Ok(server.served),
            Some(Event::Done(done)) => {
                server.land(done)?;
                continue;
            }
            Some(Event::Message(message)) => message,
        };
        queued.extend(connection.receiver.try_iter());
        if superseded(&message, queued.front()) {
            continue;
        }
        match message {
            Message::Request(request) if request.method == Shutdown::METHOD => {
                server.shut_down(request, &mut queued)?;
                return Ok(server.served);
            }
            Message::Request(request) => server.request(request)?,
            Message::Notification(notification) => server.notification(notification)?,
            Message::Response(_) => {}
        }
    }
}

impl Server<'_> {
    /// The next event: a message already read ahead, else whichever comes
    /// first, a message or a finished analysis (`None` when the client has
    /// gone).
    fn next_event(&self, queued: &mut VecDeque<Message>) -> Option<Event> {
        if let Some(message) = queued.pop_front() {
            return Some(Event::Message(message));
        }
        crossbeam_channel::select! {
            recv(self.connection.receiver) -> message => message.ok().map(Event::Message),
            recv(self.done.1) -> done => done.ok().map(Event::Done),
        }
    }

    /// Starts analysing `text` as `version` of `uri`, cancelling the
    /// analysis of an older version.
    fn analyse(&mut self, uri: Uri, version: i32, text: String) -> Result<(), String> {
        let cancel = Cancel::default();
        if let Some((_, older)) = self.running.insert(uri.as_str().to_string(), (version, cancel.clone())) {
            older.cancel();
        }
        let sender = self.done.0.clone();
        self.in_flight += 1;
        std::thread::Builder::new()
            .name("flow-lsp-analysis".into())
            .stack_size(16 << 20)
            .spawn(move || {
                let analysis = Analysis::until(&uri, &text, &cancel).map(Box::new);
                // The server may have shut down meanwhile: nothing to tell.
                let _ = sender.send(Done { uri, version, analysis });
            })
            .map(drop)
            .map_err(|e| format!("cannot start an analysis thread: {e}"))
    }

    /// A finished analysis: kept and published if it is of the latest
    /// version; then the requests that waited for it are answered.
    fn land(&mut self, done: Done) -> Result<(), String> {
        self.in_flight -= 1;
        let key = done.uri.as_str().to_string();
        let Some(analysis) = done.analysis else {
            self.served.cancelled += 1;
            return Ok(());
        };
        if self.running.get(&key).map(|(v, _)| *v) != Some(done.version) {
            return Ok(()); // a later edit or a close replaced it
        }
        self.running.remove(&key);
        self.served.analysed += 1;
        self.documents.insert(key.clone(), Document { version: done.version, analysis: *analysis });
        publish(self.connection, &self.documents, &done.uri)?;
        self.answer_waiting(&key)
    }

    /// Answers the requests that waited for `key`'s analysis.
    fn answer_waiting(&mut self, key: &str) -> Result<(), String> {
        let (ready, still): (Vec<Request>, Vec<Request>) =
            std::mem::take(&mut self.waiting).into_iter().partition(|r| request_uri(r).as_deref() == Some(key));
        self.waiting = still;
        ready.into_iter().try_for_each(|r| self.answer(r))
    }

    fn request(&mut self, request: Request) -> Result<(), String> {
        match request_uri(&request) {
            Some(uri) if self.running.contains_key(&uri) => {
                self.waiting.push(request);
                Ok(())
            }
            _ => self.answer(request),
        }
    }

    fn answer(&self, request: Request) -> Result<(), String> {
        let response = handle_request(&self.documents, request);
        self.connection.sender.send(Message::Response(response)).map_err(|e| e.to_string())
    }

    fn notification(&mut self, notification: Notification) -> Result<(), String> {
        match handle_notification(notification) {
            Some(Change::Text { uri, version, text }) => self.analyse(uri, version, text),
            Some(Change::Closed(uri)) => {
                let key = uri.as_str().to_string();
                if let Some((_, cancel)) = self.running.remove(&key) {
                    cancel.cancel();
                }
                self.documents.remove(&key);
                publish(self.connection, &self.documents, &uri)?;
                // Requests that waited for it find no document.
                self.answer_waiting(&key)
            }
            None => Ok(()),
        }
    }

    /// Answers `shutdown`: running analyses are cancelled and every
    /// analysis thread is waited for, then the exit notification (perhaps
    /// already queued) ends the loop.
    fn shut_down(&mut self, request: Request, queued: &mut VecDeque<Message>) -> Result<(), String> {
        for (_, (_, cancel)) in self.running.drain() {
            cancel.cancel();
        }
        while self.in_flight > 0 {
            let Ok(done) = self.done.1.recv() else { break };
            self.in_flight -= 1;
            self.served.cancelled += usize::from(done.analysis.is_none());
        }
        for request in std::mem::take(&mut self.waiting) {
            self.answer(request)?;
        }
        let response = Response::new_ok(request.id, ());
        self.connection.sender.send(Message::Response(response)).map_err(|e| e.to_string())?;
        loop {
            match queued.pop_front().or_else(|| self.connection.receiver.recv().ok()) {
                Some(Message::Notification(n)) if n.method == Exit::METHOD => return Ok(()),
                Some(_) => {}
                None => return Ok(()),
            }
        }
    }
}

/// The document a request is about (`params.textDocument.uri`).
fn request_uri(request: &Request) -> Option<String> {
    request.params.get("textDocument")?.get("uri")?.as_str().map(str::to_string)
}

/// Whether `message` is a full-text edit that `next`, another full-text
/// edit of the same document received right after it, replaces: analysing
/// it would only delay the analysis of the text the editor now shows.
fn superseded(message: &Message, next: Option<&Message>) -> bool {
    let edited = |m: &Message| match m {
        Message::Notification(n) if n.method == DidChangeTextDocument::METHOD => {
            n.params.get("textDocument").and_then(|d| d.get("uri")).and_then(|u| u.as_str()).map(str::to_string)
        }
        _ => None,
    };
    match (edited(message), next.and_then(edited)) {
        (Some(uri), Some(next_uri)) => uri == next_uri,
        _ => false,
    }
}

fn publish(connection: &Connection, documents: &HashMap<String, Document>, uri: &Uri) -> Result<(), String> {
    let (diagnostics, version) = match documents.get(uri.as_str()) {
        Some(doc) => (doc.analysis.lsp_diagnostics(uri), Some(doc.version)),
        None => (Vec::new(), None),
    };
    let params = PublishDiagnosticsParams { uri: uri.clone(), diagnostics, version };
    connection.sender.send(Message::Notification(Notification::new(PublishDiagnostics::METHOD.into(), params))).map_err(|e| e.to_string())
}

/// What a document notification changes.
enum Change {
    /// A new text to analyse (opened or edited).
    Text {
        uri: Uri,
        version: i32,
        text: String,
    },
    Closed(Uri),
}

/// Reads a document notification.
fn handle_notification(notification: Notification) -> Option<Change> {
    match notification.method.as_str() {
        DidOpenTextDocument::METHOD => {
            let params: DidOpenTextDocumentParams = serde_json::from_value(notification.params).ok()?;
            let doc = params.text_document;
            Some(Change::Text { uri: doc.uri, version: doc.version, text: doc.text })
        }
        DidChangeTextDocument::METHOD => {
            let params: DidChangeTextDocumentParams = serde_json::from_value(notification.params).ok()?;
            // Full sync: the last change holds the whole text.
            let text = params.content_changes.into_iter().last()?.text;
            Some(Change::Text { uri: params.text_document.uri, version: params.text_document.version, text })
        }
        DidCloseTextDocument::METHOD => {
            let params: DidCloseTextDocumentParams = serde_json::from_value(notification.params).ok()?;
            Some(Change::Closed(params.text_document.uri))
        }
        _ => None,
    }
}

fn ok<T: serde::Serialize>(id: RequestId, value: T) -> Response {
    Response::new_ok(id, value)
}

fn invalid(id: RequestId, message: String) -> Response {
    Response::new_err(id, lsp_server::ErrorCode::InvalidParams as i32, message)
}

fn handle_request(documents: &HashMap<String, Document>, request: Request) -> Response {
    let id = request.id.clone();
    let doc_of = |uri: &Uri| documents.get(uri.as_str()).map(|d| &d.analysis);
    match request.method.as_str() {
        HoverRequest::METHOD => match serde_json::from_value::<HoverParams>(request.params) {
            Ok(params) => {
                let at = params.text_document_position_params;
                let hover = doc_of(&at.text_document.uri).and_then(|a| a.hover(at.position)).map(|text| Hover {
                    contents: HoverContents::Markup(MarkupContent { kind: MarkupKind::Markdown, value: text }),
                    range: None,
                });
                ok(id, hover)
            }
            Err(e) => invalid(id, e.to_string()),
        },
        GotoDefinition::METHOD => match serde_json::from_value::<GotoDefinitionParams>(request.params) {
            Ok(params) => {
                let at = params.text_document_position_params;
                let uri = at.text_document.uri;
                let location = doc_of(&uri).and_then(|a| a.definition(&uri, at.position));
                ok(id, location.map(GotoDefinitionResponse::Scalar))
            }
            Err(e) => invalid(id, e.to_string()),
        },
        References::METHOD => match serde_json::from_value::<ReferenceParams>(request.params) {
            Ok(params) => {
                let at = params.text_document_position;
                let uri = at.text_document.uri;
                let locations =
                    doc_of(&uri).map(|a| a.references(&uri, at.position, params.context.include_declaration)).unwrap_or_default();
                ok(id, locations)
            }
            Err(e) => invalid(id, e.to_string()),
        },
        DocumentSymbolRequest::METHOD => match serde_json::from_value::<DocumentSymbolParams>(request.params) {
            Ok(params) => {
                let symbols = doc_of(&params.text_document.uri).map(|a| a.document_symbols()).unwrap_or_default();
                ok(id, DocumentSymbolResponse::Nested(symbols))
            }
            Err(e) => invalid(id, e.to_string()),
        },
        Completion::METHOD => match serde_json::from_value::<CompletionParams>(request.params) {
            Ok(params) => {
                let at = params.text_document_position;
                let items = doc_of(&at.text_document.uri).map(|a| a.completions(at.position)).unwrap_or_default();
                ok(id, CompletionResponse::Array(items))
            }
            Err(e) => invalid(id, e.to_string()),
        },
        Rename::METHOD => match serde_json::from_value::<RenameParams>(request.params) {
            Ok(params) => {
                let at = params.text_document_position;
                let uri = at.text_document.uri;
                match doc_of(&uri).map(|a| a.rename(at.position, &params.new_name)) {
                    Some(Ok(edits)) => {
                        #[allow(clippy::mutable_key_type)] // `Uri` is the protocol's key type.
                        let changes: HashMap<Uri, Vec<lsp_types::TextEdit>> = HashMap::from([(uri, edits)]);
                        ok(id, WorkspaceEdit { changes: Some(changes), ..Default::default() })
                    }
                    Some(Err(why)) => invalid(id, why),
                    None => invalid(id, "the document is not open".into()),
                }
            }
            Err(e) => invalid(id, e.to_string()),
        },
        SemanticTokensFullRequest::METHOD => match serde_json::from_value::<SemanticTokensParams>(request.params) {
            Ok(params) => {
                let data = doc_of(&params.text_document.uri).map(|a| a.semantic_tokens()).unwrap_or_default();
                ok(id, SemanticTokensResult::Tokens(SemanticTokens { result_id: None, data }))
            }
            Err(e) => invalid(id, e.to_string()),
        },
        other => Response::new_err(id, lsp_server::ErrorCode::MethodNotFound as i32, format!("unsupported request {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const URI: &str = "file:///w.flow";

    fn notify(method: &str, params: serde_json::Value) -> Message {
        Message::Notification(Notification::new(method.into(), params))
    }

    fn open(text: &str) -> Message {
        notify(DidOpenTextDocument::METHOD, json!({ "textDocument": { "uri": URI, "languageId": "flow", "version": 1, "text": text } }))
    }

    fn change(version: i32, text: &str) -> Message {
        notify(
            DidChangeTextDocument::METHOD,
            json!({ "textDocument": { "uri": URI, "version": version }, "contentChanges": [{ "text": text }] }),
        )
    }

    /// A server on an in-memory connection, initialized, with `first`
    /// queued before it starts; returns the client's end and the server.
    fn start(first: Vec<Message>) -> (Connection, std::thread::JoinHandle<Served>) {
        let (server, client) = Connection::memory();
        let send = |m: Message| client.sender.send(m).expect("the server listens");
        send(Message::Request(Request::new(1.into(), "initialize".into(), json!({ "capabilities": {} }))));
        send(notify("initialized", json!({})));
        first.into_iter().for_each(send);
        let handle = std::thread::spawn(move || serve(&server).expect("the server runs to exit"));
        (client, handle)
    }

    /// Waits for the next published diagnostics: (version, codes).
    fn published(client: &Connection) -> (i64, Vec<String>) {
        loop {
            match client.receiver.recv().expect("the server answers") {
                Message::Notification(n) if n.method == PublishDiagnostics::METHOD => {
                    let codes = n.params["diagnostics"].as_array().into_iter().flatten();
                    let codes = codes.filter_map(|d| d["code"].as_str().map(str::to_string)).collect();
                    return (n.params["version"].as_i64().unwrap_or(-1), codes);
                }
                _ => continue,
            }
        }
    }

    fn stop(client: Connection, handle: std::thread::JoinHandle<Served>) -> Served {
        client.sender.send(Message::Request(Request::new(99.into(), Shutdown::METHOD.into(), json!(null)))).expect("sent");
        client.sender.send(notify(Exit::METHOD, json!(null))).expect("sent");
        handle.join().expect("the server thread ends")
    }

    /// A workflow whose model checking takes long: five parallel branches
    /// of five agents under an exhaustible budget (millions of states).
    fn slow() -> String {
        let mut s = String::from("provider local: scripted\nagent a { provider: local }\nbudget b { steps: 1000, duration: 1h }\n");
        s += "workflow w {\n  start: fan\n  budget: b\n  node fan: parallel [b0_0, b1_0, b2_0, b3_0, b4_0]\n";
        s += "  node merge: join [b0_4, b1_4, b2_4, b3_4, b4_4]\n  node done: end finished\n  merge -> done\n";
        for b in 0..5 {
            for d in 0..5 {
                s += &format!("  node b{b}_{d}: agent a {{ output: {{ ok: bool }} }}\n");
                if d < 4 {
                    s += &format!("  b{b}_{d} -> b{b}_{}\n", d + 1);
                }
            }
        }
        s + "  policy p: never terminated(finished) before completed(merge)\n}\n"
    }

    #[test]
    fn an_edit_cancels_the_analysis_of_the_text_it_replaces_and_skips_superseded_ones() {
        // The slow text, then five edits typed faster than they can be
        // analysed, all queued before the server starts.
        let mut first = vec![open(&slow())];
        first.extend((2..=6).map(|v| change(v, &format!("agent a{v} {{"))));
        let (client, handle) = start(first);
        let (version, codes) = published(&client);
        assert_eq!(version, 6, "the last edit is the first text published");
        assert!(codes.iter().any(|c| c.starts_with('E')), "the unfinished text has errors: {codes:?}");
        let served = stop(client, handle);
        // Versions 2 to 5 were never analysed; version 1 was cancelled.
        assert_eq!(served, Served { analysed: 1, cancelled: 1 });
    }

    #[test]
    fn requests_wait_for_the_analysis_of_the_text_they_were_sent_for() {
        let text = "provider p: scripted\nagent writer { provider: p }\n";
        let hover = json!({ "textDocument": { "uri": URI }, "position": { "line": 1, "character": 8 } });
        let (client, handle) = start(vec![open(text), Message::Request(Request::new(2.into(), HoverRequest::METHOD.into(), hover))]);
        let answer = loop {
            match client.receiver.recv().expect("the server answers") {
                Message::Response(r) if r.id == 2.into() => break r,
                _ => continue,
            }
        };
        let value = answer.response_result.expect("a hover");
        assert!(value["contents"]["value"].as_str().is_some_and(|t| t.contains("writer")), "{value}");
        stop(client, handle);
    }

    #[test]
    fn the_editor_shows_what_the_model_checker_finds() {
        let text = "provider p: scripted\nagent a { provider: p }\nworkflow w {\n  start: n\n  node n: agent a { output: string }\n  node done: end ok\n  n -> done\n  policy never_done: never completed(done)\n}\n";
        let (client, handle) = start(vec![open(text)]);
        let (version, codes) = published(&client);
        assert_eq!(version, 1);
        assert_eq!(codes, ["E1001"], "the policy is violated");
        stop(client, handle);
    }
}
