//! What a model turn sends, rendered once for every client: the system and
//! user messages, the output schema as structured output, the tools
//! offered — and a conservative bound of the input tokens all that holds,
//! which the control plane holds against `max_input_tokens` before the
//! turn is sent (reference §12.2).
//!
//! **The bound.** For byte-level BPE tokenizers (GPT-2 and tiktoken
//! encodings, Llama 3, Qwen, Mistral's Tekken, and SentencePiece models
//! with byte fallback) every token of the text covers at least one byte of
//! it, so a text of `n` UTF-8 bytes is at most `n` tokens. What the chat
//! template adds around the text — role markers, separators, the reply's
//! priming, a tool-use preamble — are special tokens without bytes in the
//! text; they are counted as a fixed overhead per message
//! ([`TEMPLATE_TOKENS_PER_MESSAGE`]), per request
//! ([`TEMPLATE_TOKENS_PER_REQUEST`]) and for the tools
//! ([`TEMPLATE_TOKENS_FOR_TOOLS`]). The bound is the sum: the bytes of
//! every message's role and content, of the structured-output schema and of
//! the tool definitions, plus those overheads. A provider whose template
//! adds more (or that reports more for another reason) is seen when the
//! turn settles: the control plane records a warning (reference §12.2).

use crate::proto::AgentRequest;
use serde_json::{json, Map, Value};

/// Tokens a chat template may add around one message.
pub const TEMPLATE_TOKENS_PER_MESSAGE: u64 = 8;
/// Tokens a chat template may add to one request (begin of text, the
/// assistant's priming).
pub const TEMPLATE_TOKENS_PER_REQUEST: u64 = 16;
/// Tokens a chat template may add to describe the tools offered.
pub const TEMPLATE_TOKENS_FOR_TOOLS: u64 = 256;

/// One message of a turn, as every client sends it.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: &'static str,
    pub content: String,
    /// An assistant message's tool calls, as function calls.
    pub tool_calls: Option<Value>,
    /// A tool message: the call it answers.
    pub tool_call_id: Option<String>,
}

impl Message {
    fn text(role: &'static str, content: String) -> Message {
        Message { role, content, tool_calls: None, tool_call_id: None }
    }

    /// The bytes the message puts on the wire besides the template's own:
    /// its role, content, tool calls and call id.
    pub fn bytes(&self) -> usize {
        self.role.len()
            + self.content.len()
            + self.tool_calls.as_ref().map_or(0, |c| c.to_string().len())
            + self.tool_call_id.as_ref().map_or(0, String::len)
    }
}

/// The messages of a turn.
///
/// * system: the agent's instructions and the output schema (and the tools
///   offered, by name);
/// * user: the node's prompt, the context slice and, on a repair turn, the
///   validation error;
/// * then, for each earlier turn of the attempt that asked for tools, the
///   assistant's tool calls and one tool message per call with its result
///   (ok and output, or the error).
pub fn messages(request: &AgentRequest, schema: &Value) -> Vec<Message> {
    let mut system = String::new();
    if let Some(instructions) = request.instructions.as_deref().filter(|i| !i.trim().is_empty()) {
        system.push_str(instructions.trim());
        system.push_str("\n\n");
    }
    if request.flags.iter().any(|f| f == "skip_reasoning") {
        // The `skip_reasoning` zone action: the budget is low.
        system.push_str("Answer directly: no reasoning and no explanation, only the reply.\n\n");
    }
    system.push_str("Reply with JSON only that satisfies this JSON Schema: ");
    system.push_str(&schema.to_string());
    if !request.tools.is_empty() {
        system.push_str("\nOr call one of the tools: ");
        system.push_str(&request.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>().join(", "));
        system.push('.');
    }

    let mut user = Vec::new();
    if let Some(prompt) = request.prompt.as_deref().filter(|p| !p.trim().is_empty()) {
        user.push(prompt.trim().to_string());
    }
    if let Some(objective) = request.objective.as_deref().filter(|o| !o.trim().is_empty()) {
        user.push(format!("Objective (your delegation contract): {}", objective.trim()));
    }
    if !request.acceptance.is_empty() {
        user.push(format!("Your output is accepted only if: {}", request.acceptance.join("; ")));
    }
    let empty = match &request.context {
        Value::Null => true,
        Value::Object(map) => map.is_empty(),
        Value::Array(items) => items.is_empty(),
        _ => false,
    };
    if !empty {
        if request.flags.iter().any(|f| f == "compress_context") {
            user.push(format!("Context (JSON, compressed): {}", compress(&request.context)));
        } else {
            user.push(format!("Context (JSON): {}", request.context));
        }
    }
    if let Some(error) = &request.repair {
        user.push(format!("Your previous reply was rejected: {error}\nReply again with JSON that satisfies the schema."));
    }
    if user.is_empty() {
        user.push("Reply now.".to_string());
    }
    let mut out = vec![Message::text("system", system), Message::text("user", user.join("\n\n"))];
    out.extend(tool_messages(&request.tool_results));
    out
}

/// The longest string, and the most items of a list, a compressed context
/// keeps (the `compress_context` zone action).
pub const COMPRESSED_STRING_CHARS: usize = 200;
pub const COMPRESSED_LIST_ITEMS: usize = 10;

/// `value` compressed for a turn under `compress_context`: every string
/// cut to [`COMPRESSED_STRING_CHARS`] characters and every list to
/// [`COMPRESSED_LIST_ITEMS`] items, each cut marked with what was left out.
/// Deterministic: the same context compresses the same way.
pub fn compress(value: &Value) -> Value {
    match value {
        Value::String(s) if s.chars().count() > COMPRESSED_STRING_CHARS => {
            let kept: String = s.chars().take(COMPRESSED_STRING_CHARS).collect();
            Value::String(format!("{kept}… [{} more characters]", s.chars().count() - COMPRESSED_STRING_CHARS))
        }
        Value::Array(items) => {
            let mut kept: Vec<Value> = items.iter().take(COMPRESSED_LIST_ITEMS).map(compress).collect();
            if items.len() > COMPRESSED_LIST_ITEMS {
                kept.push(Value::String(format!("… [{} more items]", items.len() - COMPRESSED_LIST_ITEMS)));
            }
            Value::Array(kept)
        }
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), compress(v))).collect()),
        other => other.clone(),
    }
}

/// The tool calls the attempt made and their results, as the assistant's
/// calls (one message per turn that asked) and one tool message per call.
/// A result kept without its call's id or turn (recorded before they were)
/// is named by its place and stands as a turn of its own.
fn tool_messages(results: &[Value]) -> Vec<Message> {
    let mut out = Vec::new();
    let mut calls: Vec<Value> = Vec::new();
    let mut answers: Vec<Message> = Vec::new();
    let mut last_turn = None;
    for (i, result) in results.iter().enumerate() {
        let id = result.get("id").and_then(Value::as_str).map_or_else(|| format!("call_{}", i + 1), str::to_string);
        let turn = result.get("turn").and_then(Value::as_u64);
        if !calls.is_empty() && (turn.is_none() || turn != last_turn) {
            out.push(Message { tool_calls: Some(Value::Array(std::mem::take(&mut calls))), ..Message::text("assistant", String::new()) });
            out.append(&mut answers);
        }
        last_turn = turn;
        let tool = result.get("tool").and_then(Value::as_str).unwrap_or_default();
        let input = result.get("input").cloned().unwrap_or_else(|| json!({}));
        calls.push(json!({ "id": id, "type": "function", "function": { "name": tool, "arguments": input.to_string() } }));
        let content = match result.get("ok").and_then(Value::as_bool) {
            Some(true) => json!({ "ok": true, "output": result.get("output").cloned().unwrap_or(Value::Null) }),
            _ => json!({ "ok": false, "error": result.get("error").cloned().unwrap_or(Value::Null) }),
        };
        answers.push(Message { tool_call_id: Some(id), ..Message::text("tool", content.to_string()) });
    }
    if !calls.is_empty() {
        out.push(Message { tool_calls: Some(Value::Array(calls)), ..Message::text("assistant", String::new()) });
        out.append(&mut answers);
    }
    out
}

/// The structured-output request for `mode` (`json_schema`, `json_object`
/// or `none`).
pub fn response_format(schema: &Value, mode: &str) -> Option<Value> {
    match mode {
        "json_schema" => Some(json!({ "type": "json_schema", "json_schema": { "name": "output", "schema": schema, "strict": true } })),
        "json_object" => Some(json!({ "type": "json_object", "schema": schema })),
        _ => None,
    }
}

/// The tools offered, as function definitions.
pub fn tool_definitions(request: &AgentRequest) -> Value {
    Value::Array(
        request
            .tools
            .iter()
            .map(|tool| {
                let mut function = json!({ "name": tool.name, "parameters": tool.parameters });
                if let Some(description) = &tool.description {
                    function["description"] = json!(description);
                }
                json!({ "type": "function", "function": function })
            })
            .collect(),
    )
}

/// An upper bound of the input tokens of `request` (see the module
/// documentation): what any client of this runtime sends for it, in UTF-8
/// bytes, plus the template overheads. The structured output is counted in
/// its largest form (`json_schema`), whatever the provider uses.
pub fn input_token_bound(request: &AgentRequest) -> u64 {
    let schema = tighten(&request.output_schema);
    let mut bound = TEMPLATE_TOKENS_PER_REQUEST;
    for message in messages(request, &schema) {
        bound += message.bytes() as u64 + TEMPLATE_TOKENS_PER_MESSAGE;
    }
    if let Some(format) = response_format(&schema, "json_schema") {
        bound += format.to_string().len() as u64;
    }
    if !request.tools.is_empty() {
        bound += tool_definitions(request).to_string().len() as u64 + TEMPLATE_TOKENS_FOR_TOOLS;
    }
    bound
}

/// The schema sent to the model: `schema` self-contained (its `$ref`s to
/// `$defs` inlined, see [`inline_refs`]), with every object closed
/// (`additionalProperties: false`) and every property required, and no
/// `$schema`. What satisfies it satisfies `schema`, and it is what strict
/// structured output needs.
pub fn tighten(schema: &Value) -> Value {
    close(&inline_refs(schema))
}

/// The most bytes an inlined schema may have: past it (types reused many
/// times over) the `$ref`s are kept.
pub const MAX_INLINED_SCHEMA: usize = 64 * 1024;

/// `schema` with every `{"$ref": "#/$defs/Name"}` replaced by the
/// definition, so that servers whose grammar ignores `$ref` (llama.cpp's
/// did) still constrain the whole output. A type that refers to itself
/// keeps its `$ref` (and `$defs` keeps what is still referred to); so does
/// a schema that would grow past [`MAX_INLINED_SCHEMA`].
pub fn inline_refs(schema: &Value) -> Value {
    let Some(Value::Object(defs)) = schema.get("$defs") else { return schema.clone() };
    let mut kept: std::collections::BTreeSet<String> = Default::default();
    let mut body = schema.clone();
    if let Value::Object(map) = &mut body {
        map.remove("$defs");
    }
    let inlined = inline_within(&body, defs, &mut Vec::new(), &mut kept);
    if inlined.to_string().len() > MAX_INLINED_SCHEMA {
        return schema.clone();
    }
    let mut out = inlined;
    if !kept.is_empty() {
        // The definitions still referred to, themselves inlined but for the cycles.
        let mut still: Map<String, Value> = Map::new();
        let mut queue: Vec<String> = kept.iter().cloned().collect();
        while let Some(name) = queue.pop() {
            if still.contains_key(&name) {
                continue;
            }
            let Some(def) = defs.get(&name) else { continue };
            let mut more = Default::default();
            still.insert(name.clone(), inline_within(def, defs, &mut vec![name.clone()], &mut more));
            queue.extend(more);
        }
        if let Value::Object(map) = &mut out {
            map.insert("$defs".into(), Value::Object(still));
        }
    }
    out
}

/// [`inline_refs`] below one schema: `path` holds the definitions being
/// inlined (a `$ref` to one of them is a cycle, kept and noted in `kept`).
fn inline_within(
    schema: &Value,
    defs: &Map<String, Value>,
    path: &mut Vec<String>,
    kept: &mut std::collections::BTreeSet<String>,
) -> Value {
    match schema {
        Value::Object(map) => {
            if let Some(name) = map.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix("#/$defs/")) {
                if let (Some(def), false) = (defs.get(name), path.iter().any(|p| p == name)) {
                    path.push(name.to_string());
                    let inlined = inline_within(def, defs, path, kept);
                    path.pop();
                    return inlined;
                }
                kept.insert(name.to_string());
                return schema.clone();
            }
            Value::Object(map.iter().map(|(k, v)| (k.clone(), inline_within(v, defs, path, kept))).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| inline_within(v, defs, path, kept)).collect()),
        other => other.clone(),
    }
}

/// [`tighten`] without the inlining: objects closed, properties required.
fn close(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => {
            let mut out: Map<String, Value> =
                map.iter().filter(|(k, _)| k.as_str() != "$schema").map(|(k, v)| (k.clone(), tighten_within(k, v))).collect();
            let is_object = match map.get("type") {
                Some(Value::String(t)) => t == "object",
                Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
                _ => false,
            };
            if is_object {
                if let Some(Value::Object(props)) = map.get("properties") {
                    out.insert("required".into(), Value::Array(props.keys().map(|k| Value::String(k.clone())).collect()));
                    out.insert("additionalProperties".into(), Value::Bool(false));
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(close).collect()),
        other => other.clone(),
    }
}

/// Tightens the schemas inside keyword `key`: maps of schemas
/// (`properties`, `$defs`) by value, everything else as a schema.
fn tighten_within(key: &str, value: &Value) -> Value {
    match (key, value) {
        ("properties" | "$defs" | "definitions" | "patternProperties", Value::Object(map)) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), close(v))).collect())
        }
        ("enum" | "const" | "required" | "default" | "examples", _) => value.clone(),
        _ => close(value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_types_are_inlined_and_a_recursive_one_keeps_its_ref() {
        let schema = json!({
            "$ref": "#/$defs/Report",
            "$defs": {
                "Report": { "type": "object", "properties": { "title": { "type": "string" }, "findings": { "type": "array", "items": { "$ref": "#/$defs/Finding" } } } },
                "Finding": { "type": "object", "properties": { "claim": { "type": "string" }, "citation": { "$ref": "#/$defs/Citation" } } },
                "Citation": { "type": "object", "properties": { "id": { "type": "string" } } },
                "Unused": { "type": "string" }
            }
        });
        let inlined = inline_refs(&schema);
        assert!(!inlined.to_string().contains("$ref") && inlined.get("$defs").is_none(), "{inlined}");
        assert_eq!(inlined["properties"]["findings"]["items"]["properties"]["citation"]["properties"]["id"], json!({ "type": "string" }));
        // Sent closed all the way down.
        let tight = tighten(&schema);
        assert_eq!(tight["properties"]["findings"]["items"]["properties"]["citation"]["additionalProperties"], json!(false));
        // A tree refers to itself: the cycle stays a `$ref`, its definition kept.
        let tree = json!({
            "$ref": "#/$defs/Tree",
            "$defs": { "Tree": { "type": "object", "properties": { "label": { "type": "string" }, "children": { "type": "array", "items": { "$ref": "#/$defs/Tree" } } } } }
        });
        let inlined = inline_refs(&tree);
        assert_eq!(inlined["properties"]["children"]["items"], json!({ "$ref": "#/$defs/Tree" }));
        assert_eq!(inlined["$defs"]["Tree"]["properties"]["children"]["items"], json!({ "$ref": "#/$defs/Tree" }));
        // Without definitions: as it was.
        let plain = json!({ "type": "string" });
        assert_eq!(inline_refs(&plain), plain);
    }
    use crate::proto::ToolSpec;

    fn request() -> AgentRequest {
        AgentRequest {
            agent: "a".into(),
            node: "n".into(),
            provider: "p".into(),
            model: None,
            instructions: Some("Be brief.".into()),
            prompt: Some("Summarise.".into()),
            context: json!({ "input": { "text": "héllo wörld ✓" } }),
            output_schema: json!({ "type": "object", "properties": { "summary": { "type": "string" } } }),
            objective: None,
            acceptance: vec![],
            tools: vec![ToolSpec {
                name: "search".into(),
                description: Some("Searches the web".into()),
                parameters: json!({ "type": "object", "properties": { "q": { "type": "string" } } }),
            }],
            visit: 1,
            attempt_no: 1,
            turn: 1,
            node_turn: 1,
            repair: Some("missing `summary`".into()),
            tool_results: vec![json!({ "tool": "search", "ok": true, "output": [1, 2, 3] })],
            max_tokens: 64,
            flags: vec![],
        }
    }

    #[test]
    fn the_bound_covers_every_byte_sent_and_the_template() {
        let request = request();
        let schema = tighten(&request.output_schema);
        let sent = messages(&request, &schema);
        let text: usize = sent.iter().map(Message::bytes).sum();
        let extra = response_format(&schema, "json_schema").unwrap().to_string().len() + tool_definitions(&request).to_string().len();
        // system, user, the assistant's call and the tool's answer.
        assert_eq!(sent.len(), 4);
        let overhead = TEMPLATE_TOKENS_PER_REQUEST + 4 * TEMPLATE_TOKENS_PER_MESSAGE + TEMPLATE_TOKENS_FOR_TOOLS;
        assert_eq!(input_token_bound(&request), (text + extra) as u64 + overhead);
        // Bytes, not characters: the multi-byte characters count 2 and 3.
        assert!(sent[1].content.contains("héllo wörld ✓"));
    }

    #[test]
    fn tool_results_go_back_as_the_assistants_calls_and_tool_messages() {
        let mut request = request();
        request.tool_results = vec![
            json!({ "tool": "search", "ok": true, "output": [1], "id": "a", "input": { "q": "x" }, "turn": 1 }),
            json!({ "tool": "search", "ok": false, "error": "boom", "id": "b", "input": { "q": "y" }, "turn": 1 }),
            json!({ "tool": "search", "ok": true, "output": [2], "id": "c", "input": { "q": "z" }, "turn": 2 }),
        ];
        let sent = messages(&request, &request.output_schema);
        let roles: Vec<&str> = sent.iter().map(|m| m.role).collect();
        assert_eq!(roles, ["system", "user", "assistant", "tool", "tool", "assistant", "tool"]);
        assert!(!sent[1].content.contains("Tool results"), "results are not in the user message");
        let calls = sent[2].tool_calls.as_ref().unwrap();
        assert_eq!(calls[1], json!({ "id": "b", "type": "function", "function": { "name": "search", "arguments": "{\"q\":\"y\"}" } }));
        assert_eq!((sent[4].tool_call_id.as_deref(), sent[4].content.as_str()), (Some("b"), r#"{"ok":false,"error":"boom"}"#));
        assert_eq!(sent[6].tool_call_id.as_deref(), Some("c"));
    }

    #[test]
    fn zone_actions_change_what_is_sent() {
        let mut request = request();
        request.context = json!({ "input": { "text": "x".repeat(5_000), "items": (0..50).collect::<Vec<_>>() } });
        let plain = input_token_bound(&request);
        request.flags = vec!["compress_context".into()];
        let sent = messages(&request, &request.output_schema);
        assert!(sent[1].content.contains("[4800 more characters]") && sent[1].content.contains("[40 more items]"), "{}", sent[1].content);
        assert!(input_token_bound(&request) + 4_000 < plain, "a compressed context sends less");
        assert!(!sent[0].content.contains("no reasoning"));
        request.flags.push("skip_reasoning".into());
        assert!(messages(&request, &request.output_schema)[0].content.contains("Answer directly: no reasoning"));
    }

    #[test]
    fn the_bound_grows_with_what_is_sent() {
        let small = request();
        let mut big = request();
        big.context = json!({ "input": { "text": "x".repeat(10_000) } });
        assert!(input_token_bound(&big) >= input_token_bound(&small) + 9_900);
        let mut no_tools = request();
        no_tools.tools.clear();
        assert!(input_token_bound(&no_tools) + TEMPLATE_TOKENS_FOR_TOOLS < input_token_bound(&small));
    }
}
