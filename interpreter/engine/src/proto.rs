//! What passes between the control plane and the data plane: requests the
//! control plane issues ([`Command`]) and the proposals that come back
//! ([`Response`]). Both are plain data, so they can be recorded in the
//! journal, in cassettes, and replayed.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// One unit of data-plane work the control plane asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Command {
    /// Unique within the run: a [`crate::keys::CommandKey`] (an agent
    /// turn, a tool call, a decision or a probe).
    pub key: String,
    pub request: Request,
    /// Delay before the work starts (retry backoff), in milliseconds.
    #[serde(default)]
    pub delay_ms: u64,
}

/// A request to the data plane.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Request {
    Agent(Box<AgentRequest>),
    Tool(ToolRequest),
    Human(HumanRequest),
    Probe(ProbeRequest),
}

impl Request {
    /// The cassette key: sha256 over the request's canonical JSON. A model
    /// turn's tools count by name: their descriptions and schemas are the
    /// plan's, so a cassette recorded before they were sent still answers.
    pub fn key(&self) -> String {
        match self {
            Request::Tool(t) => t.key(),
            _ => {
                let mut value = serde_json::to_value(self).unwrap_or(Value::Null);
                if let Some(Value::Array(tools)) = value.get_mut("tools") {
                    for tool in tools.iter_mut() {
                        *tool = tool.get("name").cloned().unwrap_or(Value::Null);
                    }
                }
                // A tool result counts by what came back: the call's id,
                // input and turn (sent as the assistant's tool calls) were
                // not in the requests cassettes recorded before them.
                if let Some(Value::Array(results)) = value.get_mut("tool_results") {
                    for result in results.iter_mut().filter_map(Value::as_object_mut) {
                        for field in ["id", "input", "turn"] {
                            result.remove(field);
                        }
                    }
                }
                let mut bytes = Vec::with_capacity(256);
                write_canonical(&value, &mut bytes);
                sha256_key(&bytes)
            }
        }
    }

    /// `model`, `tool`, `human` or `probe`.
    pub fn kind(&self) -> &'static str {
        match self {
            Request::Agent(_) => "model",
            Request::Tool(_) => "tool",
            Request::Human(_) => "human",
            Request::Probe(_) => "probe",
        }
    }
}

/// The value with every object's keys sorted: key order never changes a
/// request's identity.
pub fn canonical(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().map(|(k, v)| (k, canonical(v))).collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(canonical).collect()),
        other => other,
    }
}

/// Appends the canonical JSON of `value` to `out`: compact, every
/// object's keys sorted. The same bytes as
/// `serde_json::to_vec(&canonical(value.clone()))`, without the copy.
pub fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_json_str(k, out);
                out.push(b':');
                write_canonical(v, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        leaf => {
            // Writing to a Vec cannot fail.
            let _ = serde_json::to_writer(&mut *out, leaf);
        }
    }
}

/// Appends `s` as a JSON string.
fn write_json_str(s: &str, out: &mut Vec<u8>) {
    let _ = serde_json::to_writer(&mut *out, s);
}

/// `sha256:` and the lower-case hex digest of `bytes`.
fn sha256_key(bytes: &[u8]) -> String {
    let mut key = String::with_capacity(7 + 64);
    key.push_str("sha256:");
    push_hex(&Sha256::digest(bytes), &mut key);
    key
}

impl ToolRequest {
    /// The cassette key of this request as a [`Request::Tool`] (see
    /// [`Request::key`]), written directly: the canonical JSON of
    /// `{"type": "tool", "tool": …, "input": …, "idempotency_key": …}`.
    pub fn key(&self) -> String {
        let mut bytes = Vec::with_capacity(64 + self.tool.len());
        bytes.push(b'{');
        if let Some(k) = &self.idempotency_key {
            bytes.extend_from_slice(b"\"idempotency_key\":");
            write_json_str(k, &mut bytes);
            bytes.push(b',');
        }
        bytes.extend_from_slice(b"\"input\":");
        write_canonical(&self.input, &mut bytes);
        bytes.extend_from_slice(b",\"tool\":");
        write_json_str(&self.tool, &mut bytes);
        bytes.extend_from_slice(b",\"type\":\"tool\"}");
        sha256_key(&bytes)
    }
}

const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Lower-case hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    push_hex(bytes, &mut out);
    out
}

/// Appends the lower-case hex of bytes to `out`.
pub fn push_hex(bytes: &[u8], out: &mut String) {
    // In chunks through a buffer on the stack (a digest is one chunk).
    let mut digits = [0u8; 64];
    for chunk in bytes.chunks(32) {
        for (i, b) in chunk.iter().enumerate() {
            digits[2 * i] = HEX_DIGITS[(b >> 4) as usize];
            digits[2 * i + 1] = HEX_DIGITS[(b & 15) as usize];
        }
        // Hex digits are ASCII.
        out.push_str(std::str::from_utf8(&digits[..2 * chunk.len()]).unwrap_or_default());
    }
}

/// One tool an agent may call: what a model is shown of it. Read also
/// from a bare name, as requests recorded before tools carried their
/// description (cassettes) wrote it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "ToolSpecWire")]
pub struct ToolSpec {
    pub name: String,
    /// The tool's `description`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema of the tool's declared `input` (an object schema:
    /// `{"type": "object"}` when the input is not a record).
    pub parameters: Value,
}

/// How a [`ToolSpec`] may be written: in full, or by name only.
#[derive(Deserialize)]
#[serde(untagged)]
enum ToolSpecWire {
    Name(String),
    Full {
        name: String,
        #[serde(default)]
        description: Option<String>,
        #[serde(default = "object_schema")]
        parameters: Value,
    },
}

fn object_schema() -> Value {
    serde_json::json!({ "type": "object" })
}

impl From<ToolSpecWire> for ToolSpec {
    fn from(wire: ToolSpecWire) -> ToolSpec {
        match wire {
            ToolSpecWire::Name(name) => ToolSpec::named(&name),
            ToolSpecWire::Full { name, description, parameters } => ToolSpec { name, description, parameters },
        }
    }
}

impl ToolSpec {
    /// A tool offered by name only (`{"type": "object"}` parameters).
    pub fn named(name: &str) -> ToolSpec {
        ToolSpec { name: name.to_string(), description: None, parameters: object_schema() }
    }
}

impl AgentRequest {
    /// Whether the agent may ask for `tool`.
    pub fn offers(&self, tool: &str) -> bool {
        self.tools.iter().any(|t| t.name == tool)
    }
}

/// One model turn of an agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentRequest {
    pub agent: String,
    pub node: String,
    pub provider: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// What the agent sees: the context slice its policy allows.
    pub context: Value,
    /// The JSON Schema the reply's `output` must satisfy.
    pub output_schema: Value,
    /// A delegate's task under its delegation contract: the contract's
    /// `objective`, and its acceptance checks over `output` as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objective: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub acceptance: Vec<String>,
    /// The tools the agent may ask for, as the model is shown them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSpec>,
    /// 1-based visit of the node, attempt, and turn within the attempt.
    pub visit: u32,
    pub attempt_no: u32,
    pub turn: u32,
    /// The n-th turn of this node in the run (1-based), across visits,
    /// attempts and repairs: what a scripted provider's replies follow.
    pub node_turn: u32,
    /// The validation error of the previous reply, for a repair turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repair: Option<String>,
    /// Results of the tool calls made so far in this attempt.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_results: Vec<Value>,
    /// Largest completion requested.
    pub max_tokens: u64,
    /// Zone actions in force: `compress_context`, `skip_reasoning`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
}

/// A tool call made by the control plane.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolRequest {
    pub tool: String,
    pub input: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

/// A question to a human: a gate decision, an approval node, an escalation
/// or a reconciliation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HumanRequest {
    /// The gate, node or attempt decided on.
    pub subject: String,
    pub principals: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    pub decisions: Vec<flow_trace::Decision>,
    /// The n-th decision asked on this subject in the run (1-based).
    pub round: u32,
}

/// A command probe of a gate evaluator (e.g. ffprobe on a file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeRequest {
    pub evaluator: String,
    pub argv: Vec<String>,
    /// A native evaluator (`builtin` variant) instead of a command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native: Option<String>,
    /// The native evaluator's input.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// Token use of a model turn.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TokenUsage {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
}

/// A proposal from the data plane.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Response {
    Agent(AgentReply),
    Tool(ToolResult),
    Human(HumanAnswer),
    Probe(ProbeResult),
}

/// A model's reply: a final output, a tool call, or an error.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentReply {
    /// The proposed output (validated by the control plane).
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// The tools the agent asks the control plane to call, in the order
    /// asked: every one is handled before the next turn (a recorded
    /// `tool_call: {…}` reads as one).
    #[serde(default, alias = "tool_call", deserialize_with = "one_or_many", skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// A reply that was not JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default)]
    pub usage: TokenUsage,
    /// Money spent on the turn.
    #[serde(default)]
    pub cost: f64,
    /// The provider failed (network, 5xx, refusal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The model that answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Why the model stopped, per choice, as the provider said (`stop`,
    /// `length`, `tool_calls`, …); empty when it did not say.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub finish_reasons: Vec<String>,
}

/// A tool call an agent asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub tool: String,
    #[serde(default)]
    pub input: Value,
    /// The provider's id of the call (a tool message answers it by this
    /// id); the control plane names one when the provider gives none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// One tool call or a list of them (`tool_call: {…}` as recorded before
/// replies could ask for several; `null` is none).
fn one_or_many<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Vec<ToolCall>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        Many(Vec<ToolCall>),
        One(ToolCall),
    }
    Ok(match Option::<OneOrMany>::deserialize(deserializer)? {
        None => Vec::new(),
        Some(OneOrMany::One(call)) => vec![call],
        Some(OneOrMany::Many(calls)) => calls,
    })
}

/// A value that is there, `null` included: `Some(Value::Null)` for a
/// written `null` (a tool or model that answered `null` answered), `None`
/// only when the field is absent (`#[serde(default)]`). Without it a
/// recorded `null` output reads back as no output, and the replay diverges.
fn present<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

/// A tool's result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    pub ok: bool,
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Why the call failed (`timeout` when it ran out of time; a tool
    /// adapter may name any code of the registry, `tool_error` when none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<flow_trace::ErrorCode>,
    #[serde(default)]
    pub duration_ms: u64,
}

/// A human's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HumanAnswer {
    pub decision: flow_trace::Decision,
    pub by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// A reconciliation's `approve` with the output of the call that did
    /// happen (`flow approve … --output JSON`).
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
}

/// A probe's result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbeResult {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Standard output parsed as JSON, when it was.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// The probe could not run or timed out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How a command probe that did not exit 0 ended: its exit code or
    /// signal and the tail of its stderr (recorded as the evaluator's
    /// reason).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The key as first defined: sha256 over `canonical(to_value(request))`.
    fn reference_key(request: &Request) -> String {
        let value = canonical(serde_json::to_value(request).unwrap());
        format!("sha256:{}", hex(&Sha256::digest(serde_json::to_vec(&value).unwrap())))
    }

    #[test]
    fn keys_are_sha256_of_the_canonical_request() {
        let inputs = [
            Value::Null,
            json!({"z": 1, "a": {"y": [3, {"k": "v", "b": 2.5}], "x": "q\"uote\n"}, "m": [true, null]}),
            json!("héllo \u{1} ✓"),
            json!([{"b": 1, "a": 2}, -7, 1e300]),
        ];
        for input in inputs {
            for idempotency_key in [None, Some("run/n#1.1".to_string())] {
                let request = Request::Tool(ToolRequest { tool: "noop".into(), input: input.clone(), idempotency_key });
                assert_eq!(request.key(), reference_key(&request));
            }
        }
        let human = Request::Human(HumanRequest {
            subject: "gate".into(),
            principals: vec!["ops".into()],
            prompt: None,
            decisions: vec![flow_trace::Decision::Approve, flow_trace::Decision::Reject],
            round: 1,
        });
        assert_eq!(human.key(), reference_key(&human));
        let mut bytes = Vec::new();
        write_canonical(&json!({"b": {"d": 1, "c": 2}, "a": []}), &mut bytes);
        assert_eq!(bytes, br#"{"a":[],"b":{"c":2,"d":1}}"#);
        assert_eq!(hex(&[0x00, 0xab, 0x7f]), "00ab7f");
        let long: Vec<u8> = (0..=255).collect();
        assert_eq!(hex(&long), long.iter().map(|b| format!("{b:02x}")).collect::<String>());
    }

    #[test]
    fn a_null_output_reads_back_as_null_and_a_missing_one_as_none() {
        let responses = [
            Response::Tool(ToolResult { ok: true, output: Some(Value::Null), ..ToolResult::default() }),
            Response::Tool(ToolResult { ok: true, output: None, ..ToolResult::default() }),
            Response::Agent(AgentReply { output: Some(Value::Null), ..AgentReply::default() }),
            Response::Probe(ProbeResult { exit_code: Some(0), output: Some(Value::Null), ..ProbeResult::default() }),
        ];
        for response in responses {
            let text = serde_json::to_string(&response).unwrap();
            assert_eq!(serde_json::from_str::<Response>(&text).unwrap(), response, "{text}");
        }
        let request = Request::Probe(ProbeRequest {
            evaluator: "e".into(),
            argv: vec![],
            native: Some("n".into()),
            input: Some(Value::Null),
            timeout_ms: None,
        });
        let text = serde_json::to_string(&request).unwrap();
        assert_eq!(serde_json::from_str::<Request>(&text).unwrap(), request);
    }
}
