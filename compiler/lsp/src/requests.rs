//! Answers to requests about a document, from its latest analysis: each
//! request's parameters are read, then one method of [`Analysis`] answers.

use crate::analysis::Analysis;
use crate::server::Document;
use lsp_server::{Request, Response};
use lsp_types::request::{
    CodeActionRequest, Completion, DocumentHighlightRequest, DocumentSymbolRequest, FoldingRangeRequest, Formatting, GotoDefinition,
    HoverRequest, InlayHintRequest, PrepareRenameRequest, RangeFormatting, References, Rename, Request as LspRequest,
    SemanticTokensFullRequest, WorkspaceSymbolRequest,
};
use lsp_types::{
    CodeActionOrCommand, CompletionResponse, DocumentSymbolResponse, GotoDefinitionResponse, Hover, HoverContents, Location, MarkupContent,
    MarkupKind, SemanticTokens, SemanticTokensResult, SymbolInformation, Uri, WorkspaceEdit, WorkspaceSymbolResponse,
};
use serde_json::Value;
use std::collections::HashMap;

/// Why a request got no answer: its parameters, or the request itself.
enum Refused {
    Invalid(String),
    Failed(String),
}

/// Reads `R`'s parameters and answers with `answer` (a JSON value).
fn with<R: LspRequest>(request: Request, answer: impl FnOnce(R::Params) -> Result<Value, Refused>) -> Response {
    let id = request.id.clone();
    let result = serde_json::from_value::<R::Params>(request.params).map_err(|e| Refused::Invalid(e.to_string())).and_then(answer);
    match result {
        Ok(value) => Response::new_ok(id, value),
        Err(Refused::Invalid(message)) => Response::new_err(id, lsp_server::ErrorCode::InvalidParams as i32, message),
        Err(Refused::Failed(message)) => Response::new_err(id, lsp_server::ErrorCode::RequestFailed as i32, message),
    }
}

fn json<T: serde::Serialize>(value: T) -> Result<Value, Refused> {
    serde_json::to_value(value).map_err(|e| Refused::Failed(e.to_string()))
}

/// A workspace edit of one document.
fn edit_of(uri: Uri, edits: Vec<lsp_types::TextEdit>) -> WorkspaceEdit {
    #[allow(clippy::mutable_key_type)] // `Uri` is the protocol's key type.
    let changes: HashMap<Uri, Vec<lsp_types::TextEdit>> = HashMap::from([(uri, edits)]);
    WorkspaceEdit { changes: Some(changes), ..Default::default() }
}

pub(crate) fn handle_request(documents: &HashMap<String, Document>, request: Request) -> Response {
    let doc = |uri: &Uri| documents.get(uri.as_str());
    let analysis = |uri: &Uri| doc(uri).map(|d| &*d.analysis);
    let open = |uri: &Uri| analysis(uri).ok_or_else(|| Refused::Invalid(format!("{} is not open", uri.as_str())));
    match request.method.as_str() {
        HoverRequest::METHOD => with::<HoverRequest>(request, |p| {
            let at = p.text_document_position_params;
            json(analysis(&at.text_document.uri).and_then(|a| a.hover(at.position)).map(|text| Hover {
                contents: HoverContents::Markup(MarkupContent { kind: MarkupKind::Markdown, value: text }),
                range: None,
            }))
        }),
        GotoDefinition::METHOD => with::<GotoDefinition>(request, |p| {
            let at = p.text_document_position_params;
            let uri = at.text_document.uri;
            json(analysis(&uri).and_then(|a| a.definition(&uri, at.position)).map(GotoDefinitionResponse::Scalar))
        }),
        References::METHOD => with::<References>(request, |p| {
            let (at, declaration) = (p.text_document_position, p.context.include_declaration);
            let uri = at.text_document.uri;
            json(analysis(&uri).map(|a| a.references(&uri, at.position, declaration)).unwrap_or_default())
        }),
        DocumentSymbolRequest::METHOD => with::<DocumentSymbolRequest>(request, |p| {
            json(DocumentSymbolResponse::Nested(analysis(&p.text_document.uri).map(Analysis::document_symbols).unwrap_or_default()))
        }),
        WorkspaceSymbolRequest::METHOD => {
            with::<WorkspaceSymbolRequest>(request, |p| json(WorkspaceSymbolResponse::Flat(workspace_symbols(documents, &p.query))))
        }
        Completion::METHOD => with::<Completion>(request, |p| {
            let at = p.text_document_position;
            json(CompletionResponse::Array(analysis(&at.text_document.uri).map(|a| a.completions(at.position)).unwrap_or_default()))
        }),
        PrepareRenameRequest::METHOD => with::<PrepareRenameRequest>(request, |p| {
            open(&p.text_document.uri)?.prepare_rename(p.position).map_err(Refused::Failed).and_then(json)
        }),
        Rename::METHOD => with::<Rename>(request, |p| {
            let at = p.text_document_position;
            let edits = open(&at.text_document.uri)?.rename(at.position, &p.new_name).map_err(Refused::Failed)?;
            json(edit_of(at.text_document.uri, edits))
        }),
        DocumentHighlightRequest::METHOD => with::<DocumentHighlightRequest>(request, |p| {
            let at = p.text_document_position_params;
            json(analysis(&at.text_document.uri).map(|a| a.highlights(at.position)).unwrap_or_default())
        }),
        FoldingRangeRequest::METHOD => {
            with::<FoldingRangeRequest>(request, |p| json(analysis(&p.text_document.uri).map(Analysis::folding_ranges).unwrap_or_default()))
        }
        Formatting::METHOD => with::<Formatting>(request, |p| json(open(&p.text_document.uri)?.formatting(None).map_err(Refused::Failed)?)),
        RangeFormatting::METHOD => {
            with::<RangeFormatting>(request, |p| json(open(&p.text_document.uri)?.formatting(Some(p.range)).map_err(Refused::Failed)?))
        }
        CodeActionRequest::METHOD => with::<CodeActionRequest>(request, |p| {
            let uri = p.text_document.uri;
            let actions = match doc(&uri) {
                Some(d) => d.analysis.code_actions(&uri, p.range, &d.policies),
                None => Vec::new(),
            };
            json(actions.into_iter().map(CodeActionOrCommand::CodeAction).collect::<Vec<_>>())
        }),
        InlayHintRequest::METHOD => {
            with::<InlayHintRequest>(request, |p| json(analysis(&p.text_document.uri).map(|a| a.inlay_hints(p.range)).unwrap_or_default()))
        }
        SemanticTokensFullRequest::METHOD => with::<SemanticTokensFullRequest>(request, |p| {
            let data = analysis(&p.text_document.uri).map(Analysis::semantic_tokens).unwrap_or_default();
            json(SemanticTokensResult::Tokens(SemanticTokens { result_id: None, data }))
        }),
        other => Response::new_err(request.id, lsp_server::ErrorCode::MethodNotFound as i32, format!("unsupported request {other}")),
    }
}

/// The declarations of every open document whose name contains `query`
/// (ignoring case), at most 1,000.
#[allow(deprecated)] // `SymbolInformation::deprecated` must still be written.
fn workspace_symbols(documents: &HashMap<String, Document>, query: &str) -> Vec<SymbolInformation> {
    let query = query.to_lowercase();
    let mut out = Vec::new();
    let mut keys: Vec<&String> = documents.keys().collect();
    keys.sort();
    for key in keys {
        let Ok(uri) = key.parse::<Uri>() else { continue };
        for symbol in documents[key].analysis.document_symbols() {
            let children = symbol.children.clone().unwrap_or_default();
            for (s, container) in
                std::iter::once((symbol.clone(), None)).chain(children.into_iter().map(|c| (c, Some(symbol.name.clone()))))
            {
                if out.len() == 1_000 {
                    return out;
                }
                if s.name.to_lowercase().contains(&query) {
                    out.push(SymbolInformation {
                        name: s.name,
                        kind: s.kind,
                        tags: None,
                        deprecated: None,
                        location: Location { uri: uri.clone(), range: s.selection_range },
                        container_name: container,
                    });
                }
            }
        }
    }
    out
}
