//! The message loop: documents in, answers and diagnostics out.

use crate::analysis::{Analysis, TOKEN_TYPES};
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

/// Runs the server on a connection (stdio, or in memory for tests).
pub fn serve(connection: &Connection) -> Result<(), String> {
    let capabilities = serde_json::to_value(capabilities()).map_err(|e| e.to_string())?;
    connection.initialize(capabilities).map_err(|e| e.to_string())?;
    let mut documents: HashMap<String, Document> = HashMap::new();
    // Messages already received but not yet handled: an edit is not
    // analysed when the next one, for the same document, is already here.
    let mut queued: VecDeque<Message> = VecDeque::new();
    loop {
        let Some(message) = next_message(&mut queued, connection) else { return Ok(()) };
        queued.extend(connection.receiver.try_iter());
        if superseded(&message, queued.front()) {
            continue;
        }
        match message {
            Message::Request(request) if request.method == Shutdown::METHOD => {
                let response = Response::new_ok(request.id, ());
                connection.sender.send(Message::Response(response)).map_err(|e| e.to_string())?;
                // Then the exit notification (perhaps already queued).
                while let Some(next) = next_message(&mut queued, connection) {
                    if matches!(&next, Message::Notification(n) if n.method == Exit::METHOD) {
                        break;
                    }
                }
                return Ok(());
            }
            Message::Request(request) => {
                let response = handle_request(&documents, request);
                connection.sender.send(Message::Response(response)).map_err(|e| e.to_string())?;
            }
            Message::Notification(notification) => {
                if let Some(uri) = handle_notification(&mut documents, notification) {
                    publish(connection, &documents, &uri)?;
                }
            }
            Message::Response(_) => {}
        }
    }
}

/// The next message: one already read ahead, else the next to arrive
/// (`None` when the client has gone).
fn next_message(queued: &mut VecDeque<Message>, connection: &Connection) -> Option<Message> {
    queued.pop_front().or_else(|| connection.receiver.recv().ok())
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

/// Applies a document notification; returns the URI whose diagnostics changed.
fn handle_notification(documents: &mut HashMap<String, Document>, notification: Notification) -> Option<Uri> {
    match notification.method.as_str() {
        DidOpenTextDocument::METHOD => {
            let params: DidOpenTextDocumentParams = serde_json::from_value(notification.params).ok()?;
            let doc = params.text_document;
            let analysis = Analysis::new(&doc.uri, &doc.text);
            documents.insert(doc.uri.as_str().to_string(), Document { version: doc.version, analysis });
            Some(doc.uri)
        }
        DidChangeTextDocument::METHOD => {
            let params: DidChangeTextDocumentParams = serde_json::from_value(notification.params).ok()?;
            // Full sync: the last change holds the whole text.
            let text = params.content_changes.into_iter().last()?.text;
            let uri = params.text_document.uri;
            let analysis = Analysis::new(&uri, &text);
            documents.insert(uri.as_str().to_string(), Document { version: params.text_document.version, analysis });
            Some(uri)
        }
        DidCloseTextDocument::METHOD => {
            let params: DidCloseTextDocumentParams = serde_json::from_value(notification.params).ok()?;
            documents.remove(params.text_document.uri.as_str());
            Some(params.text_document.uri)
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

    fn change(version: i32, text: &str) -> Message {
        let params = json!({
            "textDocument": { "uri": "file:///w.flow", "version": version },
            "contentChanges": [{ "text": text }],
        });
        Message::Notification(Notification::new(DidChangeTextDocument::METHOD.into(), params))
    }

    #[test]
    fn edits_superseded_before_they_are_analysed_are_skipped() {
        let (server, client) = Connection::memory();
        let send = |m: Message| client.sender.send(m).expect("the server listens");
        send(Message::Request(Request::new(1.into(), "initialize".into(), json!({ "capabilities": {} }))));
        send(Message::Notification(Notification::new("initialized".into(), json!({}))));
        let open = json!({ "textDocument": { "uri": "file:///w.flow", "languageId": "flow", "version": 1, "text": "agent a {" } });
        send(Message::Notification(Notification::new(DidOpenTextDocument::METHOD.into(), open)));
        // Five edits typed faster than they can be analysed, then a query.
        for version in 2..=6 {
            send(change(version, &format!("agent a{version} {{")));
        }
        send(Message::Request(Request::new(2.into(), Shutdown::METHOD.into(), json!(null))));
        send(Message::Notification(Notification::new(Exit::METHOD.into(), json!(null))));
        // Everything is queued before the server starts.
        serve(&server).expect("the server runs to exit");
        let versions: Vec<i64> = client
            .receiver
            .try_iter()
            .filter_map(|m| match m {
                Message::Notification(n) if n.method == PublishDiagnostics::METHOD => n.params["version"].as_i64(),
                _ => None,
            })
            .collect();
        assert_eq!(versions, [1, 6], "the open and the last edit are analysed, the four edits in between are not");
    }
}
