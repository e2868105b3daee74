//! The message loop: documents in, answers and diagnostics out.

use crate::analysis::{uri_path, Analysis, TOKEN_TYPES};
use crate::position::LineIndex;
use crate::requests::handle_request;
use crossbeam_channel::{Receiver, Sender};
use flow_diagnostics::Diagnostic;
use flow_verify::Cancel;
use lsp_server::{Connection, Message, Notification, Request, RequestId, Response};
use lsp_types::notification::{
    DidChangeTextDocument, DidChangeWatchedFiles, DidCloseTextDocument, DidOpenTextDocument, DidSaveTextDocument, Exit, Notification as _,
    Progress, PublishDiagnostics,
};
use lsp_types::request::{RegisterCapability, Request as _, Shutdown, WorkDoneProgressCreate};
use lsp_types::{
    CodeActionKind, CodeActionOptions, CodeActionProviderCapability, CompletionOptions, DidChangeTextDocumentParams,
    DidChangeWatchedFilesParams, DidChangeWatchedFilesRegistrationOptions, DidCloseTextDocumentParams, DidOpenTextDocumentParams,
    DidSaveTextDocumentParams, FileSystemWatcher, FoldingRangeProviderCapability, GlobPattern, HoverProviderCapability, NumberOrString,
    OneOf, ProgressParams, ProgressParamsValue, PublishDiagnosticsParams, Registration, RegistrationParams, RenameOptions,
    SemanticTokensFullOptions, SemanticTokensLegend, SemanticTokensOptions, SemanticTokensServerCapabilities, ServerCapabilities,
    TextDocumentContentChangeEvent, TextDocumentSyncCapability, TextDocumentSyncKind, TextDocumentSyncOptions, TextDocumentSyncSaveOptions,
    Uri, WorkDoneProgress, WorkDoneProgressBegin, WorkDoneProgressCreateParams, WorkDoneProgressEnd,
};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// An open document's latest analysis.
pub(crate) struct Document {
    pub(crate) version: i32,
    pub(crate) analysis: Arc<Analysis>,
    /// What the model checker found, once it has run (empty before).
    pub(crate) policies: Vec<Diagnostic>,
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
        text_document_sync: Some(TextDocumentSyncCapability::Options(TextDocumentSyncOptions {
            open_close: Some(true),
            change: Some(TextDocumentSyncKind::INCREMENTAL),
            save: Some(TextDocumentSyncSaveOptions::Supported(true)),
            ..Default::default()
        })),
        hover_provider: Some(HoverProviderCapability::Simple(true)),
        definition_provider: Some(OneOf::Left(true)),
        references_provider: Some(OneOf::Left(true)),
        document_symbol_provider: Some(OneOf::Left(true)),
        rename_provider: Some(OneOf::Right(RenameOptions { prepare_provider: Some(true), work_done_progress_options: Default::default() })),
        document_formatting_provider: Some(OneOf::Left(true)),
        document_range_formatting_provider: Some(OneOf::Left(true)),
        code_action_provider: Some(CodeActionProviderCapability::Options(CodeActionOptions {
            code_action_kinds: Some(vec![CodeActionKind::QUICKFIX]),
            ..Default::default()
        })),
        document_highlight_provider: Some(OneOf::Left(true)),
        folding_range_provider: Some(FoldingRangeProviderCapability::Simple(true)),
        workspace_symbol_provider: Some(OneOf::Left(true)),
        inlay_hint_provider: Some(OneOf::Left(true)),
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
/// cancelled because a later edit replaced their text (either phase), and
/// analyses answered from the cache.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Served {
    pub analysed: usize,
    pub cancelled: usize,
    pub cached: usize,
}

/// What one phase of the analysis of one version of a document produced.
enum Phase {
    /// The checks and the static verification (`None`: cancelled).
    Structural(Option<Arc<Analysis>>),
    /// The model checker's diagnostics (`None`: cancelled).
    Policies(Option<Vec<Diagnostic>>),
}

/// A phase finished on a worker thread.
struct Done {
    uri: Uri,
    version: i32,
    phase: Phase,
    /// The thread's last message.
    last: bool,
}

/// Whatever the loop handles next.
enum Event {
    Message(Message),
    Done(Done),
}

/// The analysis of one version of a document, under way.
struct Running {
    version: i32,
    cancel: Cancel,
    /// The first phase has landed: requests are answered, the model
    /// checker runs.
    structural: bool,
    /// The progress token shown while the model checker runs, if the client
    /// takes progress.
    progress: Option<String>,
}

/// The server's state between messages.
struct Server<'c> {
    connection: &'c Connection,
    documents: HashMap<String, Document>,
    /// The text of every open document, edits applied.
    texts: HashMap<String, String>,
    /// Analyses running on worker threads, per URI. A newer edit cancels
    /// the older analysis.
    running: HashMap<String, Running>,
    /// Requests about a document whose first phase is running: answered
    /// when it lands, against the text they were sent for.
    waiting: Vec<Request>,
    done: (Sender<Done>, Receiver<Done>),
    /// Analysis threads started and not yet finished.
    in_flight: usize,
    /// Finished analyses by the hash of their document's URI and text.
    cache: Cache,
    /// Whether the client shows `$/progress` (`window.workDoneProgress`).
    progress: bool,
    /// Progress tokens handed out.
    tokens: u64,
    served: Served,
}

/// The most finished analyses kept for texts seen again (an undo, a
/// reopened file).
const CACHED: usize = 16;

/// Finished analyses (both phases) by content hash, oldest first out.
#[derive(Default)]
struct Cache {
    entries: VecDeque<(u64, Arc<Analysis>, Vec<Diagnostic>)>,
}

impl Cache {
    fn key(uri: &Uri, text: &str) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (uri.as_str(), text).hash(&mut hasher);
        hasher.finish()
    }

    fn get(&self, key: u64) -> Option<(Arc<Analysis>, Vec<Diagnostic>)> {
        self.entries.iter().find(|(k, _, _)| *k == key).map(|(_, a, p)| (a.clone(), p.clone()))
    }

    fn put(&mut self, key: u64, analysis: Arc<Analysis>, policies: Vec<Diagnostic>) {
        self.entries.retain(|(k, _, _)| *k != key);
        if self.entries.len() == CACHED {
            self.entries.pop_front();
        }
        self.entries.push_back((key, analysis, policies));
    }
}

/// Runs the server on a connection (stdio, or in memory for tests).
///
/// Documents are analysed on worker threads in two phases: the checks and
/// the static verification first (published at once), then the model
/// checker (published when it lands, with a progress notification if the
/// client takes them); the loop stays free to read the next message. An
/// edit cancels the analysis of the text it replaces, and an edit whose
/// next message is already another edit of the same document is not
/// analysed at all. A text analysed before is answered from a cache.
pub fn serve(connection: &Connection) -> Result<Served, String> {
    let capabilities = serde_json::to_value(capabilities()).map_err(|e| e.to_string())?;
    let client = connection.initialize(capabilities).map_err(|e| e.to_string())?;
    let progress = client.pointer("/capabilities/window/workDoneProgress").and_then(|v| v.as_bool()).unwrap_or(false);
    let watches = client.pointer("/capabilities/workspace/didChangeWatchedFiles/dynamicRegistration").and_then(|v| v.as_bool());
    if watches == Some(true) {
        watch_sources(connection)?;
    }
    let mut server = Server {
        connection,
        documents: HashMap::new(),
        texts: HashMap::new(),
        running: HashMap::new(),
        waiting: Vec::new(),
        done: crossbeam_channel::unbounded(),
        in_flight: 0,
        cache: Cache::default(),
        progress,
        tokens: 0,
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
        // An edit followed at once by another of the same document is
        // applied but not analysed.
        let skip = superseded(&message, queued.front());
        match message {
            Message::Request(request) if request.method == Shutdown::METHOD => {
                server.shut_down(request, &mut queued)?;
                return Ok(server.served);
            }
            Message::Request(request) => server.request(request)?,
            Message::Notification(notification) => server.notification(notification, skip)?,
            Message::Response(_) => {}
        }
    }
}

impl Server<'_> {
    /// The next event: a message already read ahead, else whichever comes
    /// first, a message or a finished phase (`None` when the client has
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
    /// analysis of an older version (or answers from the cache).
    fn analyse(&mut self, uri: Uri, version: i32, text: String) -> Result<(), String> {
        let key = uri.as_str().to_string();
        if let Some(older) = self.running.remove(&key) {
            older.cancel.cancel();
            self.end_progress(older.progress)?;
        }
        let hash = Cache::key(&uri, &text);
        if let Some((analysis, policies)) = self.cache.get(hash) {
            self.served.cached += 1;
            self.documents.insert(key.clone(), Document { version, analysis, policies });
            publish(self.connection, &self.documents, &uri)?;
            return self.answer_waiting(&key);
        }
        let cancel = Cancel::default();
        self.running.insert(key, Running { version, cancel: cancel.clone(), structural: false, progress: None });
        let sender = self.done.0.clone();
        self.in_flight += 1;
        std::thread::Builder::new()
            .name("flow-lsp-analysis".into())
            .stack_size(16 << 20)
            .spawn(move || analyse_in_two_phases(uri, version, &text, &cancel, &sender))
            .map(drop)
            .map_err(|e| format!("cannot start an analysis thread: {e}"))
    }

    /// A finished phase: kept and published if it is of the latest
    /// version; then the requests that waited for it are answered.
    fn land(&mut self, done: Done) -> Result<(), String> {
        if done.last {
            self.in_flight -= 1;
        }
        let key = done.uri.as_str().to_string();
        let current = self.running.get(&key).is_some_and(|r| r.version == done.version);
        match done.phase {
            Phase::Structural(None) | Phase::Policies(None) => {
                self.served.cancelled += 1;
                Ok(())
            }
            // A later edit or a close replaced it.
            _ if !current => Ok(()),
            Phase::Structural(Some(analysis)) => {
                self.served.analysed += 1;
                let more = analysis.has_policies_to_check();
                if more {
                    let token = self.begin_progress()?;
                    if let Some(running) = self.running.get_mut(&key) {
                        running.structural = true;
                        running.progress = token;
                    }
                } else {
                    self.running.remove(&key);
                    self.cache.put(Cache::key(&done.uri, analysis.source()), analysis.clone(), Vec::new());
                }
                self.documents.insert(key.clone(), Document { version: done.version, analysis, policies: Vec::new() });
                publish(self.connection, &self.documents, &done.uri)?;
                self.answer_waiting(&key)
            }
            Phase::Policies(Some(found)) => {
                let running = self.running.remove(&key);
                self.end_progress(running.and_then(|r| r.progress))?;
                if let Some(doc) = self.documents.get_mut(&key) {
                    doc.policies = found;
                    self.cache.put(Cache::key(&done.uri, doc.analysis.source()), doc.analysis.clone(), doc.policies.clone());
                }
                publish(self.connection, &self.documents, &done.uri)
            }
        }
    }

    /// Shows "checking policies" in a client that takes progress: asks for
    /// a token, then begins the report.
    fn begin_progress(&mut self) -> Result<Option<String>, String> {
        if !self.progress {
            return Ok(None);
        }
        self.tokens += 1;
        let token = format!("flow-policies-{}", self.tokens);
        let create = Request::new(
            RequestId::from(format!("create-{token}")),
            WorkDoneProgressCreate::METHOD.into(),
            WorkDoneProgressCreateParams { token: NumberOrString::String(token.clone()) },
        );
        self.connection.sender.send(Message::Request(create)).map_err(|e| e.to_string())?;
        let begin = WorkDoneProgress::Begin(WorkDoneProgressBegin {
            title: "Flow: model checking the policies".into(),
            cancellable: Some(false),
            message: None,
            percentage: None,
        });
        self.send_progress(&token, begin)?;
        Ok(Some(token))
    }

    fn end_progress(&mut self, token: Option<String>) -> Result<(), String> {
        match token {
            Some(token) => self.send_progress(&token, WorkDoneProgress::End(WorkDoneProgressEnd { message: None })),
            None => Ok(()),
        }
    }

    fn send_progress(&self, token: &str, value: WorkDoneProgress) -> Result<(), String> {
        let params = ProgressParams { token: NumberOrString::String(token.to_string()), value: ProgressParamsValue::WorkDone(value) };
        let notification = Notification::new(Progress::METHOD.into(), params);
        self.connection.sender.send(Message::Notification(notification)).map_err(|e| e.to_string())
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
            Some(uri) if self.running.get(&uri).is_some_and(|r| !r.structural) => {
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

    fn notification(&mut self, notification: Notification, skip: bool) -> Result<(), String> {
        match handle_notification(notification) {
            Some(Change::Opened { uri, version, text }) => {
                self.texts.insert(uri.as_str().to_string(), text.clone());
                self.analyse(uri, version, text)
            }
            Some(Change::Edited { uri, version, changes }) => {
                let Some(text) = self.texts.get_mut(uri.as_str()) else { return Ok(()) };
                for change in changes {
                    apply_change(text, change);
                }
                if skip {
                    return Ok(());
                }
                let text = text.clone();
                self.analyse(uri, version, text)
            }
            Some(Change::Files(paths)) => self.files_changed(&paths),
            Some(Change::Closed(uri)) => {
                let key = uri.as_str().to_string();
                self.texts.remove(&key);
                if let Some(running) = self.running.remove(&key) {
                    running.cancel.cancel();
                    self.end_progress(running.progress)?;
                }
                self.documents.remove(&key);
                publish(self.connection, &self.documents, &uri)?;
                // Requests that waited for it find no document.
                self.answer_waiting(&key)
            }
            None => Ok(()),
        }
    }

    /// Files changed on disk (or saved): every open document that reads one
    /// of them is analysed again, its cached analyses forgotten.
    fn files_changed(&mut self, paths: &[String]) -> Result<(), String> {
        self.cache.entries.clear();
        let mut stale: Vec<(String, i32)> = self
            .documents
            .iter()
            .filter(|(_, doc)| paths.iter().any(|p| doc.analysis.reads(p)))
            .map(|(key, doc)| (key.clone(), doc.version))
            .collect();
        stale.sort();
        for (key, version) in stale {
            let (Some(text), Ok(uri)) = (self.texts.get(&key).cloned(), key.parse::<Uri>()) else { continue };
            self.analyse(uri, version, text)?;
        }
        Ok(())
    }

    /// Answers `shutdown`: running analyses are cancelled and every
    /// analysis thread is waited for, then the exit notification (perhaps
    /// already queued) ends the loop.
    fn shut_down(&mut self, request: Request, queued: &mut VecDeque<Message>) -> Result<(), String> {
        for (_, running) in self.running.drain() {
            running.cancel.cancel();
        }
        while self.in_flight > 0 {
            let Ok(done) = self.done.1.recv() else { break };
            self.in_flight -= usize::from(done.last);
            self.served.cancelled += usize::from(matches!(done.phase, Phase::Structural(None) | Phase::Policies(None)));
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

/// Asks the client to report changes to Flow sources and JSON files (the
/// imports and schemas an open document may read).
fn watch_sources(connection: &Connection) -> Result<(), String> {
    let watchers =
        ["**/*.flow", "**/*.json"].map(|glob| FileSystemWatcher { glob_pattern: GlobPattern::String(glob.into()), kind: None }).to_vec();
    let options = serde_json::to_value(DidChangeWatchedFilesRegistrationOptions { watchers }).map_err(|e| e.to_string())?;
    let registration =
        Registration { id: "flow-sources".into(), method: DidChangeWatchedFiles::METHOD.into(), register_options: Some(options) };
    let request = Request::new(
        RequestId::from("register-flow-sources".to_string()),
        RegisterCapability::METHOD.into(),
        RegistrationParams { registrations: vec![registration] },
    );
    connection.sender.send(Message::Request(request)).map_err(|e| e.to_string())
}

/// A worker thread's work: the first phase, sent at once, then the model
/// checker's (only for a program with policies and no errors).
fn analyse_in_two_phases(uri: Uri, version: i32, text: &str, cancel: &Cancel, sender: &Sender<Done>) {
    // The server may have shut down meanwhile: nothing to tell, hence the
    // ignored send results.
    let Some(analysis) = Analysis::structural(&uri, text, cancel).map(Arc::new) else {
        let _ = sender.send(Done { uri, version, phase: Phase::Structural(None), last: true });
        return;
    };
    let more = analysis.has_policies_to_check();
    let _ = sender.send(Done { uri: uri.clone(), version, phase: Phase::Structural(Some(analysis.clone())), last: !more });
    if more {
        let found = analysis.policy_diagnostics(flow_verify::policies::DEFAULT_MAX_STATES, cancel);
        drop(analysis);
        let _ = sender.send(Done { uri, version, phase: Phase::Policies(found), last: true });
    }
}

/// The document a request is about (`params.textDocument.uri`).
fn request_uri(request: &Request) -> Option<String> {
    request.params.get("textDocument")?.get("uri")?.as_str().map(str::to_string)
}

/// Whether `message` is an edit that `next`, another edit of the same
/// document received right after it, follows: analysing its text would only
/// delay the analysis of the text the editor now shows.
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
        Some(doc) => (doc.analysis.lsp_diagnostics_with(uri, &doc.policies), Some(doc.version)),
        None => (Vec::new(), None),
    };
    let params = PublishDiagnosticsParams { uri: uri.clone(), diagnostics, version };
    connection.sender.send(Message::Notification(Notification::new(PublishDiagnostics::METHOD.into(), params))).map_err(|e| e.to_string())
}

/// What a document notification changes.
enum Change {
    Opened {
        uri: Uri,
        version: i32,
        text: String,
    },
    /// Edits, in order (a range each, or the whole text).
    Edited {
        uri: Uri,
        version: i32,
        changes: Vec<TextDocumentContentChangeEvent>,
    },
    Closed(Uri),
    /// Files changed on disk, by path (watched, or a document saved).
    Files(Vec<String>),
}

/// Reads a document notification.
fn handle_notification(notification: Notification) -> Option<Change> {
    match notification.method.as_str() {
        DidOpenTextDocument::METHOD => {
            let params: DidOpenTextDocumentParams = serde_json::from_value(notification.params).ok()?;
            let doc = params.text_document;
            Some(Change::Opened { uri: doc.uri, version: doc.version, text: doc.text })
        }
        DidChangeTextDocument::METHOD => {
            let params: DidChangeTextDocumentParams = serde_json::from_value(notification.params).ok()?;
            Some(Change::Edited { uri: params.text_document.uri, version: params.text_document.version, changes: params.content_changes })
        }
        DidCloseTextDocument::METHOD => {
            let params: DidCloseTextDocumentParams = serde_json::from_value(notification.params).ok()?;
            Some(Change::Closed(params.text_document.uri))
        }
        DidChangeWatchedFiles::METHOD => {
            let params: DidChangeWatchedFilesParams = serde_json::from_value(notification.params).ok()?;
            Some(Change::Files(params.changes.iter().filter_map(|c| uri_path(&c.uri)).collect()))
        }
        DidSaveTextDocument::METHOD => {
            let params: DidSaveTextDocumentParams = serde_json::from_value(notification.params).ok()?;
            Some(Change::Files(uri_path(&params.text_document.uri).into_iter().collect()))
        }
        _ => None,
    }
}

/// Applies one change to `text`: its range replaced (positions in UTF-16,
/// clamped to the text), or the whole text without one.
fn apply_change(text: &mut String, change: TextDocumentContentChangeEvent) {
    match change.range {
        None => *text = change.text,
        Some(range) => {
            let lines = LineIndex::new(text);
            let start = lines.offset(text, range.start) as usize;
            let end = (lines.offset(text, range.end) as usize).max(start);
            text.replace_range(start..end, &change.text);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lsp_types::request::HoverRequest;
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
        start_with(json!({}), first)
    }

    /// [`start`] for a client with `capabilities`.
    fn start_with(capabilities: serde_json::Value, first: Vec<Message>) -> (Connection, std::thread::JoinHandle<Served>) {
        let (server, client) = Connection::memory();
        let send = |m: Message| client.sender.send(m).expect("the server listens");
        send(Message::Request(Request::new(1.into(), "initialize".into(), json!({ "capabilities": capabilities }))));
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
        assert_eq!(served, Served { analysed: 1, cancelled: 1, cached: 0 });
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

    const VIOLATED: &str = "provider p: scripted\nagent a { provider: p }\nworkflow w {\n  start: n\n  node n: agent a { output: string }\n  node done: end ok\n  n -> done\n  policy never_done: never completed(done)\n}\n";

    #[test]
    fn the_editor_shows_the_structural_diagnostics_then_what_the_model_checker_finds() {
        let (client, handle) = start(vec![open(VIOLATED)]);
        assert_eq!(published(&client), (1, vec![]), "the checks first: nothing wrong");
        assert_eq!(published(&client), (1, vec!["E1001".to_string()]), "then the model checker: the policy is violated");
        stop(client, handle);
    }

    #[test]
    fn an_edit_during_model_checking_cancels_it() {
        let (client, handle) = start(vec![open(&slow())]);
        let (version, _) = published(&client);
        assert_eq!(version, 1, "the checks of version 1");
        // The model checker now runs on version 1 (seconds); an edit replaces it.
        client.sender.send(change(2, &format!("{}// edited\n", slow()))).expect("sent");
        assert_eq!(published(&client).0, 2, "version 1's policies are never published");
        let served = stop(client, handle);
        // Version 1's model checking by the edit, version 2's by the shutdown.
        assert_eq!(served, Served { analysed: 2, cancelled: 2, cached: 0 });
    }

    /// An incremental edit: `text` at the range from `(l1, c1)` to `(l2, c2)`.
    fn edit(version: i32, (l1, c1): (u32, u32), (l2, c2): (u32, u32), text: &str) -> serde_json::Value {
        let range = json!({ "start": { "line": l1, "character": c1 }, "end": { "line": l2, "character": c2 } });
        json!({ "textDocument": { "uri": URI, "version": version }, "contentChanges": [{ "range": range, "text": text }] })
    }

    #[test]
    fn incremental_edits_are_applied_in_order_even_when_not_analysed() {
        // `reseacher` misspelt after a non-ASCII comment: columns count UTF-16 units.
        let text = "// é😀\nprovider p: scripted\nagent researcher { provider: p }\nworkflow w {\n  start: r\n  node r: agent reseacher { output: string }\n  node done: end ok\n  r -> done\n}\n";
        // Two edits queued together: the first is applied, not analysed;
        // the second edits the text the first produced. `reseacher` is at
        // line 5, columns 16 to 25: the missing `r` goes at column 21.
        let first = notify(DidChangeTextDocument::METHOD, edit(2, (5, 21), (5, 21), "r"));
        let second = notify(DidChangeTextDocument::METHOD, edit(3, (0, 3), (0, 6), "x"));
        let (client, handle) = start(vec![open(text), first, second]);
        let (version, codes) = published(&client);
        assert_eq!((version, codes), (3, vec![]), "`researcher` now, and the comment edited past its emoji");
        // A whole-text change still replaces everything.
        client.sender.send(change(4, "agent a {")).expect("sent");
        assert!(published(&client).1.iter().any(|c| c.starts_with('E')));
        let served = stop(client, handle);
        // Version 1 was cancelled, or finished first and was dropped.
        assert_eq!(served.analysed, 2, "versions 3 and 4: {served:?}");
    }

    #[test]
    fn a_change_to_an_imported_file_on_disk_refreshes_the_diagnostics() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let lib = dir.path().join("lib.flow");
        std::fs::write(&lib, "provider p: scripted\nagent writer { provider: p }\n").expect("written");
        let main = dir.path().join("main.flow");
        let uri = format!("file://{}", main.display());
        let lib_uri = format!("file://{}", lib.display());
        let text = "import \"lib.flow\"\nworkflow w {\n  start: n\n  node n: agent writer { output: string }\n  node done: end ok\n  n -> done\n}\n";
        let open = notify(
            DidOpenTextDocument::METHOD,
            json!({ "textDocument": { "uri": uri, "languageId": "flow", "version": 1, "text": text } }),
        );
        let capabilities = json!({ "workspace": { "didChangeWatchedFiles": { "dynamicRegistration": true } } });
        let (client, handle) = start_with(capabilities, vec![open]);
        // The server asks to watch Flow and JSON files.
        let registration = loop {
            match client.receiver.recv().expect("the server speaks") {
                Message::Request(r) if r.method == RegisterCapability::METHOD => break r,
                _ => continue,
            }
        };
        let watchers = &registration.params["registrations"][0]["registerOptions"]["watchers"];
        assert_eq!(watchers[0]["globPattern"], "**/*.flow");
        client.sender.send(Message::Response(Response::new_ok(registration.id, ()))).expect("sent");
        assert_eq!(published(&client), (1, vec![]));
        // The agent is renamed in the imported file: the document now refers to nothing.
        std::fs::write(&lib, "provider p: scripted\nagent author { provider: p }\n").expect("written");
        let changed = json!({ "changes": [{ "uri": lib_uri, "type": 2 }] });
        client.sender.send(notify(DidChangeWatchedFiles::METHOD, changed)).expect("sent");
        assert_eq!(published(&client), (1, vec!["E0101".to_string()]));
        // A file the document does not read changes nothing; saving the import refreshes again.
        std::fs::write(&lib, "provider p: scripted\nagent writer { provider: p }\n").expect("written");
        let other = json!({ "changes": [{ "uri": format!("file://{}", dir.path().join("other.flow").display()), "type": 1 }] });
        client.sender.send(notify(DidChangeWatchedFiles::METHOD, other)).expect("sent");
        client.sender.send(notify(DidSaveTextDocument::METHOD, json!({ "textDocument": { "uri": lib_uri } }))).expect("sent");
        assert_eq!(published(&client), (1, vec![]), "the next publication is the save's");
        let served = stop(client, handle);
        assert_eq!(served.analysed, 3, "{served:?}");
    }

    #[test]
    fn a_text_seen_before_is_answered_from_the_cache() {
        let fixed = VIOLATED.replace("never completed(done)", "never completed(n) before started(n)");
        let (client, handle) = start(vec![open(VIOLATED)]);
        assert_eq!(published(&client), (1, vec![]));
        assert_eq!(published(&client), (1, vec!["E1001".to_string()]));
        client.sender.send(change(2, &fixed)).expect("sent");
        assert_eq!(published(&client), (2, vec![]));
        assert_eq!(published(&client), (2, vec![]), "the fixed policy holds");
        // Undo: the first text again, both phases at once from the cache.
        client.sender.send(change(3, VIOLATED)).expect("sent");
        assert_eq!(published(&client), (3, vec!["E1001".to_string()]));
        let served = stop(client, handle);
        assert_eq!(served, Served { analysed: 2, cancelled: 0, cached: 1 });
    }

    #[test]
    fn model_checking_is_reported_as_progress_to_a_client_that_takes_it() {
        let capabilities = json!({ "window": { "workDoneProgress": true } });
        let (client, handle) = start_with(capabilities, vec![open(VIOLATED)]);
        let mut seen: Vec<String> = Vec::new();
        let mut token = None;
        while !seen.iter().any(|s| s == "diagnostics E1001") {
            match client.receiver.recv().expect("the server answers") {
                Message::Request(r) if r.method == WorkDoneProgressCreate::METHOD => {
                    token = r.params["token"].as_str().map(str::to_string);
                    seen.push("create".into());
                    client.sender.send(Message::Response(Response::new_ok(r.id, ()))).expect("sent");
                }
                Message::Notification(n) if n.method == Progress::METHOD => {
                    assert_eq!(n.params["token"].as_str(), token.as_deref(), "the token asked for");
                    seen.push(format!("progress {}", n.params["value"]["kind"].as_str().unwrap_or("?")));
                }
                Message::Notification(n) if n.method == PublishDiagnostics::METHOD => {
                    let codes: Vec<&str> =
                        n.params["diagnostics"].as_array().into_iter().flatten().filter_map(|d| d["code"].as_str()).collect();
                    seen.push(format!("diagnostics {}", codes.join(" ")).trim().to_string());
                }
                _ => {}
            }
        }
        assert_eq!(seen, ["create", "progress begin", "diagnostics", "progress end", "diagnostics E1001"]);
        stop(client, handle);
    }
}
