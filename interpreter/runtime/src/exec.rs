//! The data plane: executors that turn [`Request`]s into proposals.
//!
//! * agent turns go to a provider: `scripted` (deterministic replies from
//!   a YAML script, or a minimal valid output synthesised from the output
//!   schema), or a cassette;
//! * tools: `command` (argv templated from typed inputs, never a shell,
//!   an environment allow-list, a timeout, stdout parsed as JSON) and
//!   `builtin` (native functions in [`builtin_tool`]);
//! * probes: command evaluators (exit code or JSON on stdout).
//!
//! Executors never decide: the control plane validates every proposal.

use crate::proto::*;
use crate::template::{template, template_with};
use flow_check::ir::{Decl, Program};
use flow_trace::ErrorCode;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One recorded request and its response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// `model`, `tool`, `human` or `probe`.
    pub kind: String,
    /// The request's key (recomputed on load, so hand-written entries may omit it).
    #[serde(default)]
    pub key: String,
    pub request: Request,
    pub response: Response,
}

/// A cassette: every provider, tool, human and probe result of a run,
/// keyed by its request.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Cassette {
    /// Format version (1).
    pub flow_cassette: u32,
    pub entries: Vec<Entry>,
}

impl Cassette {
    pub fn load(path: &Path) -> Result<Cassette, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read cassette {}: {e}", path.display()))?;
        let mut cassette: Cassette = serde_yaml::from_str(&text).map_err(|e| format!("{} is not a valid cassette: {e}", path.display()))?;
        for entry in &mut cassette.entries {
            entry.key = entry.request.key();
            entry.kind = entry.request.kind().to_string();
        }
        Ok(cassette)
    }

    pub fn save(&self, path: &Path) -> Result<(), String> {
        let text = serde_yaml::to_string(self).map_err(|e| format!("cannot encode the cassette: {e}"))?;
        let tmp = path.with_extension("yaml.tmp");
        std::fs::write(&tmp, text).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, path).map_err(|e| format!("cannot write {}: {e}", path.display()))
    }
}

/// How a cassette is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayMode {
    /// Every request must be in the cassette; a miss fails the run.
    /// (Scripted providers, offline and deterministic, still answer
    /// from their scripts what the cassette does not hold.)
    Strict,
    /// Recorded requests are replayed; others run live.
    Lenient,
}

/// A replay miss: the request and its difference from the nearest recorded one.
#[derive(Debug, Clone)]
pub struct Miss(pub String);

struct Replayer {
    by_key: HashMap<String, Vec<Response>>,
    used: HashMap<String, usize>,
    entries: Vec<Entry>,
    mode: ReplayMode,
}

/// Executes requests: the data plane.
pub struct Executors {
    program: Arc<Program>,
    base_dir: PathBuf,
    scripts: Mutex<HashMap<String, Script>>,
    replay: Option<Mutex<Replayer>>,
    recorded: Mutex<Vec<Entry>>,
    recording: bool,
    /// Made on the first HTTP call (most runs make none).
    client: std::sync::OnceLock<reqwest::Client>,
    mcp: crate::mcp::McpPool,
    /// Values that must never be written anywhere (API keys).
    secrets: Vec<String>,
}

impl std::fmt::Debug for Executors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executors").field("base_dir", &self.base_dir).finish()
    }
}

/// A scripted provider's replies: per node (or agent), in turn order; the
/// last reply repeats.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Script {
    #[serde(default)]
    pub replies: HashMap<String, Vec<AgentReply>>,
}

/// A minimal value of a JSON Schema (what the scripted provider answers
/// when its script has nothing for a node): empty strings, zeros, false,
/// empty lists, the first enum value, required fields only.
pub fn synthesize(schema: &Value, defs: &Value) -> Value {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let name = r.rsplit('/').next().unwrap_or_default();
        return match defs.get(name) {
            Some(def) => synthesize(def, defs),
            None => Value::Null,
        };
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return values.first().cloned().unwrap_or(Value::Null);
    }
    if let Some(options) = schema.get("anyOf").and_then(Value::as_array) {
        return options.first().map(|o| synthesize(o, defs)).unwrap_or(Value::Null);
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("string") => json!(""),
        Some("integer") | Some("number") => json!(0),
        Some("boolean") => json!(false),
        Some("array") => json!([]),
        Some("null") => Value::Null,
        Some("object") => {
            let mut out = serde_json::Map::new();
            let required: Vec<&str> =
                schema.get("required").and_then(Value::as_array).map(|r| r.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, v) in props {
                    if required.contains(&k.as_str()) {
                        out.insert(k.clone(), synthesize(v, defs));
                    }
                }
            }
            Value::Object(out)
        }
        _ => Value::Null,
    }
}

fn estimate_tokens(value: &Value) -> u64 {
    (value.to_string().len() as u64).div_ceil(4)
}

/// Counts differing leaves between two JSON values.
fn diff_count(a: &Value, b: &Value) -> usize {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut n = 0;
            for (k, v) in x {
                n += y.get(k).map(|w| diff_count(v, w)).unwrap_or(1);
            }
            n + y.keys().filter(|k| !x.contains_key(*k)).count()
        }
        (Value::Array(x), Value::Array(y)) => x.iter().zip(y).map(|(v, w)| diff_count(v, w)).sum::<usize>() + x.len().abs_diff(y.len()),
        _ => usize::from(a != b),
    }
}

/// Lines describing how `a` (wanted) differs from `b` (recorded).
fn diff_lines(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    if out.len() >= 20 {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in x {
                match y.get(k) {
                    Some(w) => diff_lines(&format!("{path}/{k}"), v, w, out),
                    None => out.push(format!("  {path}/{k}: requested {v}, not in the recording")),
                }
            }
            for (k, w) in y {
                if !x.contains_key(k) {
                    out.push(format!("  {path}/{k}: recorded {w}, not in the request"));
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (v, w)) in x.iter().zip(y).enumerate() {
                diff_lines(&format!("{path}/{i}"), v, w, out);
            }
        }
        _ if a != b => {
            let short = |v: &Value| {
                let s = v.to_string();
                if s.len() > 80 {
                    format!("{}…", &s[..s.char_indices().nth(80).map(|(i, _)| i).unwrap_or(s.len())])
                } else {
                    s
                }
            };
            out.push(format!("  {path}: requested {}, recorded {}", short(a), short(b)));
        }
        _ => {}
    }
}

impl Executors {
    /// Executors for `program`, resolving relative paths (scripts, cwd)
    /// against `base_dir` (the directory of the `.flow` file).
    pub fn new(program: Arc<Program>, base_dir: PathBuf) -> Executors {
        Executors {
            program,
            base_dir: base_dir.clone(),
            scripts: Mutex::new(HashMap::new()),
            replay: None,
            recorded: Mutex::new(Vec::new()),
            recording: false,
            client: std::sync::OnceLock::new(),
            mcp: crate::mcp::McpPool::new(base_dir.clone()),
            secrets: Vec::new(),
        }
    }

    fn client(&self) -> &reqwest::Client {
        self.client.get_or_init(reqwest::Client::new)
    }

    /// Replays from a cassette.
    pub fn with_cassette(mut self, cassette: Cassette, mode: ReplayMode) -> Executors {
        let mut by_key: HashMap<String, Vec<Response>> = HashMap::new();
        for entry in &cassette.entries {
            by_key.entry(entry.key.clone()).or_default().push(entry.response.clone());
        }
        self.replay = Some(Mutex::new(Replayer { by_key, used: HashMap::new(), entries: cassette.entries, mode }));
        self
    }

    /// Values to redact from every response before anyone sees it.
    pub fn with_secrets(mut self, secrets: Vec<String>) -> Executors {
        self.secrets = secrets.into_iter().filter(|s| s.len() >= 4).collect();
        self
    }

    /// Replaces every secret in a response with `[REDACTED]`.
    pub fn redact(&self, response: Response) -> Response {
        if self.secrets.is_empty() {
            return response;
        }
        let Ok(mut text) = serde_json::to_string(&response) else { return response };
        let mut changed = false;
        for secret in &self.secrets {
            // As it appears inside a JSON string.
            let escaped = serde_json::to_string(secret).unwrap_or_default();
            let escaped = escaped.trim_matches('"');
            if !escaped.is_empty() && text.contains(escaped) {
                text = text.replace(escaped, "[REDACTED]");
                changed = true;
            }
        }
        if !changed {
            return response;
        }
        serde_json::from_str(&text).unwrap_or(response)
    }

    /// Keeps every request and response for [`Executors::recorded`].
    pub fn recording(mut self) -> Executors {
        self.recording = true;
        self
    }

    /// Everything executed so far, for `--record`.
    pub fn recorded(&self) -> Cassette {
        Cassette { flow_cassette: 1, entries: self.recorded.lock().map(|r| r.clone()).unwrap_or_default() }
    }

    /// Whether a human request can be answered from the cassette.
    pub fn replayed(&self, request: &Request) -> Result<Option<Response>, Miss> {
        let Some(replay) = &self.replay else { return Ok(None) };
        let Ok(mut r) = replay.lock() else { return Ok(None) };
        let key = request.key();
        if let Some(responses) = r.by_key.get(&key).cloned() {
            let used = r.used.entry(key).or_default();
            let response = responses[(*used).min(responses.len() - 1)].clone();
            *used += 1;
            return Ok(Some(response));
        }
        // A scripted provider's turn is no outside call: deterministic and
        // offline, it answers from its script even when replaying strictly.
        if r.mode == ReplayMode::Lenient || self.is_scripted(request) {
            return Ok(None);
        }
        Err(Miss(Self::miss_message(request, &r.entries)))
    }

    /// Whether `request` is a turn of an agent whose provider is scripted.
    fn is_scripted(&self, request: &Request) -> bool {
        let Request::Agent(a) = request else { return false };
        self.program.decls.get(&a.provider).is_some_and(|p| p.variant.as_deref() == Some("scripted"))
    }

    fn miss_message(request: &Request, entries: &[Entry]) -> String {
        let wanted = serde_json::to_value(request).unwrap_or(Value::Null);
        let nearest = entries
            .iter()
            .filter(|e| e.kind == request.kind())
            .map(|e| (serde_json::to_value(&e.request).unwrap_or(Value::Null), e))
            .min_by_key(|(v, _)| diff_count(&wanted, v));
        let what = match request {
            Request::Agent(a) => format!("model turn of agent `{}` in node `{}`", a.agent, a.node),
            Request::Tool(t) => format!("call of tool `{}`", t.tool),
            Request::Human(h) => format!("decision on `{}`", h.subject),
            Request::Probe(p) => format!("probe `{}`", p.evaluator),
        };
        match nearest {
            Some((recorded, _)) => {
                let mut lines = Vec::new();
                diff_lines("", &wanted, &recorded, &mut lines);
                format!("replay miss: the {what} is not in the cassette; nearest recorded request differs at:\n{}", lines.join("\n"))
            }
            None => format!("replay miss: the {what} is not in the cassette, which records no {} requests", request.kind()),
        }
    }

    fn record(&self, request: &Request, response: &Response) {
        if !self.recording {
            return;
        }
        if let Ok(mut r) = self.recorded.lock() {
            r.push(Entry { kind: request.kind().into(), key: request.key(), request: request.clone(), response: response.clone() });
        }
    }

    /// Records a human answer obtained outside the executors.
    pub fn record_human(&self, request: &Request, response: &Response) {
        self.record(request, response);
    }

    /// Executes one request (not humans: the driver asks them).
    pub async fn execute(&self, request: &Request, timeout_ms: Option<u64>) -> Result<Response, Miss> {
        if let Some(response) = self.replayed_and_recorded(request)? {
            return Ok(response);
        }
        let response = match request {
            Request::Agent(a) => Response::Agent(self.agent_turn(a).await),
            Request::Tool(t) => Response::Tool(self.tool(t, timeout_ms).await),
            Request::Probe(p) => Response::Probe(self.probe(p).await),
            Request::Human(h) => {
                return Err(Miss(format!("no answer for the decision on `{}` (humans are asked by the driver)", h.subject)))
            }
        };
        Ok(self.settle(request, response))
    }

    /// A computed response as it leaves the data plane: redacted (secrets
    /// never get past the data plane: not into the journal, the trace, the
    /// artifacts or a cassette) and recorded.
    fn settle(&self, request: &Request, response: Response) -> Response {
        let response = self.redact(response);
        self.record(request, &response);
        response
    }

    /// Executes `request` at once when it needs no waiting: a tool whose
    /// function is a pure in-memory builtin ([`PURE_BUILTINS`]). Replayed
    /// answers, redaction and recording are those of [`Executors::execute`].
    /// `None`: the request must be awaited with `execute`.
    pub fn execute_now(&self, request: &Request) -> Option<Result<Response, Miss>> {
        let Request::Tool(t) = request else { return None };
        let decl = self.program.decls.get(&t.tool)?;
        if decl.variant.as_deref() != Some("builtin") || !PURE_BUILTINS.contains(&decl.function()) {
            return None;
        }
        let computed = || self.settle(request, Response::Tool(self.builtin(decl, t)));
        Some(self.replayed_and_recorded(request).map(|replayed| replayed.unwrap_or_else(computed)))
    }

    /// The replayed answer to `request`, if a cassette has one, recorded.
    fn replayed_and_recorded(&self, request: &Request) -> Result<Option<Response>, Miss> {
        let response = self.replayed(request)?;
        if let Some(response) = &response {
            self.record(request, response);
        }
        Ok(response)
    }

    /// A call of a `builtin` tool.
    fn builtin(&self, decl: &Decl, request: &ToolRequest) -> ToolResult {
        let started = std::time::Instant::now();
        let function = decl.function();
        let mut result = match builtin_tool(function, &request.input, &self.base_dir) {
            Ok(output) => ToolResult { ok: true, output: Some(output), ..ToolResult::default() },
            Err(e) => ToolResult { ok: false, error: Some(e), ..ToolResult::default() },
        };
        result.duration_ms = started.elapsed().as_millis() as u64;
        result
    }

    fn script(&self, provider: &Decl) -> Result<Script, String> {
        let Some(path) = provider.script() else { return Ok(Script::default()) };
        let mut scripts = self.scripts.lock().map_err(|_| "script cache poisoned".to_string())?;
        if let Some(s) = scripts.get(path) {
            return Ok(s.clone());
        }
        let full = self.base_dir.join(path);
        let text = std::fs::read_to_string(&full).map_err(|e| format!("cannot read the script {}: {e}", full.display()))?;
        let script: Script = serde_yaml::from_str(&text).map_err(|e| format!("{} is not a valid script: {e}", full.display()))?;
        scripts.insert(path.to_string(), script.clone());
        Ok(script)
    }

    async fn agent_turn(&self, request: &AgentRequest) -> AgentReply {
        let Some(provider) = self.program.decls.get(&request.provider) else {
            return AgentReply { error: Some(format!("no provider `{}`", request.provider)), ..AgentReply::default() };
        };
        match provider.variant.as_deref() {
            Some("scripted") => {}
            Some("openai") => {
                return match crate::openai::OpenAiProvider::from_decl(provider) {
                    Ok(p) => crate::openai::chat(self.client(), &p, request).await,
                    Err(e) => AgentReply { error: Some(e), ..AgentReply::default() },
                };
            }
            Some(other) => {
                return AgentReply {
                    error: Some(format!(
                        "provider `{}` ({other}) has no live client in this runtime; record a cassette for it or use a scripted provider",
                        request.provider
                    )),
                    ..AgentReply::default()
                }
            }
            None => return AgentReply { error: Some("provider without a variant".into()), ..AgentReply::default() },
        }
        let script = match self.script(provider) {
            Ok(s) => s,
            Err(e) => return AgentReply { error: Some(e), ..AgentReply::default() },
        };
        let replies = script.replies.get(&request.node).or_else(|| script.replies.get(&request.agent));
        let mut reply = match replies {
            // The node's n-th turn gets the n-th reply: a function of the
            // request, so a resumed run gets the same replies.
            Some(list) if !list.is_empty() => list[(request.node_turn.max(1) as usize - 1).min(list.len() - 1)].clone(),
            _ => {
                let defs = request.output_schema.get("$defs").cloned().unwrap_or(Value::Null);
                AgentReply { output: Some(synthesize(&request.output_schema, &defs)), ..AgentReply::default() }
            }
        };
        if reply.usage == TokenUsage::default() && reply.error.is_none() {
            let produced = reply.output.clone().or_else(|| reply.tool_call.as_ref().map(|c| c.input.clone())).unwrap_or(Value::Null);
            reply.usage = TokenUsage { input_tokens: estimate_tokens(&request.context) + 16, output_tokens: estimate_tokens(&produced) };
        }
        if reply.cost == 0.0 {
            reply.cost = (provider.price_input() * reply.usage.input_tokens as f64
                + provider.price_output() * reply.usage.output_tokens as f64)
                / 1e6;
        }
        reply
    }

    async fn tool(&self, request: &ToolRequest, timeout_ms: Option<u64>) -> ToolResult {
        let started = std::time::Instant::now();
        let Some(decl) = self.program.decls.get(&request.tool) else {
            return ToolResult { ok: false, error: Some(format!("no tool `{}`", request.tool)), ..ToolResult::default() };
        };
        let timeout_ms = decl.timeout_ms().or(timeout_ms);
        let mut result = match decl.variant.as_deref() {
            Some("command") => {
                let argv: Vec<String> = decl.argv().iter().map(|a| template(a, &request.input)).collect();
                let env = decl.env_allow();
                let cwd = decl.cwd().map(|c| self.base_dir.join(c)).unwrap_or_else(|| self.base_dir.clone());
                let out = run_command(&argv, &env, &cwd, timeout_ms).await;
                match out {
                    Ok((0, stdout, _)) => {
                        let wants_string = matches!(decl.output_type(), Some(flow_check::types::Ty::String));
                        let output = if wants_string {
                            Value::String(stdout.trim_end().to_string())
                        } else if stdout.trim().is_empty() {
                            Value::Null
                        } else {
                            match serde_json::from_str(&stdout) {
                                Ok(v) => v,
                                Err(e) => {
                                    return ToolResult {
                                        ok: false,
                                        error: Some(format!("stdout of `{}` is not JSON: {e}", argv.join(" "))),
                                        error_code: Some(ErrorCode::InvalidOutput),
                                        duration_ms: started.elapsed().as_millis() as u64,
                                        ..ToolResult::default()
                                    }
                                }
                            }
                        };
                        ToolResult { ok: true, output: Some(output), ..ToolResult::default() }
                    }
                    Ok((code, _, stderr)) => ToolResult {
                        ok: false,
                        error: Some(format!("`{}` exited with {code}: {}", argv.first().cloned().unwrap_or_default(), tail(&stderr))),
                        ..ToolResult::default()
                    },
                    Err((code, message)) => ToolResult { ok: false, error: Some(message), error_code: Some(code), ..ToolResult::default() },
                }
            }
            Some("builtin") => self.builtin(decl, request),
            Some("http") => self.http_tool(decl, request, timeout_ms).await,
            Some("mcp") => {
                let server = decl.server();
                let remote = decl.remote_name().to_string();
                // Only what the server offers under the declared name.
                match self.mcp.tools(&server).await {
                    Ok(offered) if offered.iter().any(|(name, _)| *name == remote) => {
                        match self.mcp.call(&server, &remote, request.input.clone(), timeout_ms).await {
                            Ok(output) => ToolResult { ok: true, output: Some(output), ..ToolResult::default() },
                            Err(e) => ToolResult { ok: false, error: Some(e), ..ToolResult::default() },
                        }
                    }
                    Ok(_) => ToolResult {
                        ok: false,
                        error: Some(format!("the MCP server `{}` offers no tool `{remote}`", server.join(" "))),
                        ..ToolResult::default()
                    },
                    Err(e) => ToolResult { ok: false, error: Some(e), ..ToolResult::default() },
                }
            }
            Some(other) => ToolResult {
                ok: false,
                error: Some(format!(
                    "`{other}` tools have no live client in this runtime; record a cassette for `{}` or replay one",
                    request.tool
                )),
                ..ToolResult::default()
            },
            None => ToolResult { ok: false, error: Some("tool without a variant".into()), ..ToolResult::default() },
        };
        result.duration_ms = started.elapsed().as_millis() as u64;
        result
    }

    /// An `http` tool: `url` with `{field}`s filled (percent-encoded) from
    /// the input; the input as the JSON body for POST, PUT and PATCH; the
    /// idempotency key as an `Idempotency-Key` header; a 2xx JSON reply is
    /// the output.
    async fn http_tool(&self, decl: &Decl, request: &ToolRequest, timeout_ms: Option<u64>) -> ToolResult {
        let fail = |message: String, code: Option<ErrorCode>| ToolResult {
            ok: false,
            error: Some(message),
            error_code: code,
            ..ToolResult::default()
        };
        let Some(url) = decl.url() else { return fail("http tool without a url".into(), None) };
        let url = template_with(url, &request.input, percent_encode);
        let method = decl.method().to_ascii_uppercase();
        let method = match reqwest::Method::from_bytes(method.as_bytes()) {
            Ok(m) => m,
            Err(_) => return fail(format!("unknown HTTP method `{method}`"), None),
        };
        let mut builder = self.client().request(method.clone(), &url);
        for (name, value) in decl.headers() {
            builder = builder.header(name, value);
        }
        if let Some(key) = &request.idempotency_key {
            builder = builder.header("Idempotency-Key", key.as_str());
        }
        if matches!(method, reqwest::Method::POST | reqwest::Method::PUT | reqwest::Method::PATCH) {
            builder = builder.json(&request.input);
        }
        if let Some(ms) = timeout_ms {
            builder = builder.timeout(Duration::from_millis(ms));
        }
        let response = match builder.send().await {
            Ok(r) => r,
            Err(e) if e.is_timeout() => return fail(format!("{method} {url} timed out"), Some(ErrorCode::Timeout)),
            Err(e) => return fail(format!("{method} {url} failed: {e}"), None),
        };
        let status = response.status();
        let body = match response.text().await {
            Ok(b) => b,
            Err(e) => return fail(format!("{method} {url}: cannot read the reply: {e}"), None),
        };
        if !status.is_success() {
            return fail(format!("{method} {url} answered {status}: {}", body.chars().take(200).collect::<String>()), None);
        }
        if body.trim().is_empty() {
            return ToolResult { ok: true, output: Some(Value::Null), ..ToolResult::default() };
        }
        match serde_json::from_str(&body) {
            Ok(v) => ToolResult { ok: true, output: Some(v), ..ToolResult::default() },
            Err(e) => fail(format!("{method} {url}: the reply is not JSON: {e}"), Some(ErrorCode::InvalidOutput)),
        }
    }

    async fn probe(&self, request: &ProbeRequest) -> ProbeResult {
        if let Some(native) = &request.native {
            let input = request.input.clone().unwrap_or(Value::Null);
            return match native_evaluator(native, &input, &self.base_dir) {
                Ok(pass) => ProbeResult { exit_code: Some(if pass { 0 } else { 1 }), output: None, error: None },
                Err(e) => ProbeResult { exit_code: None, output: None, error: Some(e) },
            };
        }
        let env: Vec<String> = vec!["PATH".into()];
        match run_command(&request.argv, &env, &self.base_dir, request.timeout_ms).await {
            Ok((code, stdout, _)) => ProbeResult { exit_code: Some(code), output: serde_json::from_str(&stdout).ok(), error: None },
            Err((_, message)) => ProbeResult { exit_code: None, output: None, error: Some(message) },
        }
    }
}

/// Percent-encodes a value substituted into a URL.
pub fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().rev().take(3).collect();
    lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
}

/// Runs a program directly (never a shell) with an environment allow-list.
/// Ok((exit code, stdout, stderr)) or Err((error_code, message)).
pub async fn run_command(
    argv: &[String],
    env: &[String],
    cwd: &Path,
    timeout_ms: Option<u64>,
) -> Result<(i32, String, String), (ErrorCode, String)> {
    let Some((program, args)) = argv.split_first() else { return Err((ErrorCode::ToolError, "empty argv".into())) };
    let mut command = tokio::process::Command::new(program);
    command.args(args).current_dir(cwd).env_clear().kill_on_drop(true).stdin(std::process::Stdio::null());
    for name in env {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    let output = command.output();
    let output = match timeout_ms {
        Some(ms) => match tokio::time::timeout(Duration::from_millis(ms), output).await {
            Ok(o) => o,
            Err(_) => return Err((ErrorCode::Timeout, format!("`{program}` timed out after {ms} ms"))),
        },
        None => output.await,
    };
    match output {
        Ok(o) => Ok((
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )),
        Err(e) => Err((ErrorCode::ToolError, format!("cannot run `{program}`: {e}"))),
    }
}

/// The native functions behind `builtin` tools.
pub const BUILTIN_TOOLS: &[(&str, &str)] = &[
    ("noop", "Returns null."),
    ("identity", "Returns its input."),
    ("word_count", "{ text } -> the number of words."),
    ("file_exists", "{ path } -> whether the file exists (relative to the flow's directory)."),
    ("read_text", "{ path } -> the file's text."),
    ("read_json", "{ path } -> the file parsed as JSON."),
];

/// The builtin functions that compute in memory from their input alone:
/// the driver runs their calls at once instead of awaiting them.
pub const PURE_BUILTINS: &[&str] = &["noop", "identity", "word_count"];

/// The native evaluators behind `builtin` evaluators (declared in
/// `std.evaluators`): name and what passes.
pub const NATIVE_EVALUATORS: &[(&str, &str)] = &[
    ("file_exists", "{ path } exists (relative to the flow's directory)."),
    ("non_empty_file", "{ path } exists and is not empty."),
    ("json_file", "{ path } holds valid JSON."),
];

/// Runs a native evaluator: Ok(pass) or Err (an error: never PASS).
pub fn native_evaluator(function: &str, input: &Value, base_dir: &Path) -> Result<bool, String> {
    let path = input.get("path").and_then(Value::as_str).ok_or_else(|| format!("`{function}` needs a string `path`"))?;
    let path = base_dir.join(path);
    match function {
        "file_exists" => Ok(path.exists()),
        "non_empty_file" => Ok(std::fs::metadata(&path).map(|m| m.len() > 0).unwrap_or(false)),
        "json_file" => match std::fs::read(&path) {
            Ok(bytes) => Ok(serde_json::from_slice::<Value>(&bytes).is_ok()),
            Err(_) => Ok(false),
        },
        other => Err(format!(
            "no native evaluator `{other}` (natives: {})",
            NATIVE_EVALUATORS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
        )),
    }
}

/// Runs a native function.
pub fn builtin_tool(function: &str, input: &Value, base_dir: &Path) -> Result<Value, String> {
    let field = |name: &str| input.get(name).and_then(Value::as_str).ok_or_else(|| format!("`{function}` needs a string `{name}`"));
    match function {
        "noop" => Ok(Value::Null),
        "identity" => Ok(input.clone()),
        "word_count" => Ok(json!(field("text")?.split_whitespace().count())),
        "file_exists" => Ok(json!(base_dir.join(field("path")?).exists())),
        "read_text" => {
            let path = base_dir.join(field("path")?);
            std::fs::read_to_string(&path).map(Value::String).map_err(|e| format!("cannot read {}: {e}", path.display()))
        }
        "read_json" => {
            let path = base_dir.join(field("path")?);
            let text = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            serde_json::from_str(&text).map_err(|e| format!("{} is not JSON: {e}", path.display()))
        }
        other => {
            Err(format!("no native function `{other}` (natives: {})", BUILTIN_TOOLS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flow_check::ir::Value as IrValue;

    use indexmap::IndexMap;

    /// A program of tools: (name, variant, function).
    fn tools(list: &[(&str, &str, Option<&str>)]) -> Arc<Program> {
        let mut program = Program::default();
        for (name, variant, function) in list {
            let mut props = IndexMap::new();
            if let Some(f) = function {
                props.insert("function".to_string(), IrValue::Word(f.to_string()));
            }
            let decl = Decl {
                kind: flow_check::spec::Kind::Tool,
                name: name.to_string(),
                variant: Some(variant.to_string()),
                props,
                loc: Default::default(),
                imported: false,
            };
            program.decls.insert(name.to_string(), decl);
        }
        Arc::new(program)
    }

    fn call(tool: &str, input: Value) -> Request {
        Request::Tool(ToolRequest { tool: tool.into(), input, idempotency_key: None })
    }

    fn output(result: Option<Result<Response, Miss>>) -> Option<Value> {
        match result {
            Some(Ok(Response::Tool(t))) => Some(t.output.unwrap_or(Value::Null)),
            other => panic!("not a tool answer: {other:?}"),
        }
    }

    #[test]
    fn pure_builtins_are_answered_at_once_and_nothing_else_is() {
        let program = tools(&[
            ("n", "builtin", Some("noop")),
            ("count", "builtin", Some("word_count")),
            ("word_count", "builtin", None),
            ("read", "builtin", Some("read_text")),
            ("sh", "command", None),
        ]);
        let exec = Executors::new(program, PathBuf::from(".")).recording();
        assert_eq!(output(exec.execute_now(&call("n", json!({})))), Some(Value::Null));
        assert_eq!(output(exec.execute_now(&call("count", json!({"text": "a b c"})))), Some(json!(3)));
        // The function defaults to the tool's name.
        assert_eq!(output(exec.execute_now(&call("word_count", json!({"text": "a b"})))), Some(json!(2)));
        // Files, commands, unknown tools and other requests are awaited.
        assert!(exec.execute_now(&call("read", json!({"path": "x"}))).is_none());
        assert!(exec.execute_now(&call("sh", json!({}))).is_none());
        assert!(exec.execute_now(&call("missing", json!({}))).is_none());
        let probe = Request::Probe(ProbeRequest {
            evaluator: "n".into(),
            argv: Vec::new(),
            native: Some("file_exists".into()),
            input: Some(json!({"path": "x"})),
            timeout_ms: None,
        });
        assert!(exec.execute_now(&probe).is_none());
        // What is answered at once is recorded like any answer.
        let recorded = exec.recorded();
        assert_eq!(recorded.entries.len(), 3);
        assert_eq!(recorded.entries[1].key, call("count", json!({"text": "a b c"})).key());
    }

    #[test]
    fn answers_at_once_replay_and_redact_like_awaited_ones() {
        let program = tools(&[("echo", "builtin", Some("identity"))]);
        let recorded = call("echo", json!({"x": 1}));
        let answer = Response::Tool(ToolResult { ok: true, output: Some(json!("from the cassette")), ..ToolResult::default() });
        let cassette = Cassette {
            flow_cassette: 1,
            entries: vec![Entry { kind: "tool".into(), key: recorded.key(), request: recorded.clone(), response: answer }],
        };
        let exec =
            Executors::new(program, PathBuf::from(".")).with_cassette(cassette, ReplayMode::Strict).with_secrets(vec!["hunter22".into()]);
        assert_eq!(output(exec.execute_now(&recorded)), Some(json!("from the cassette")));
        // A strict replay misses loudly, at once too.
        assert!(matches!(exec.execute_now(&call("echo", json!({"x": 2}))), Some(Err(Miss(_)))));
        let exec =
            Executors::new(tools(&[("echo", "builtin", Some("identity"))]), PathBuf::from(".")).with_secrets(vec!["hunter22".into()]);
        assert_eq!(output(exec.execute_now(&call("echo", json!({"key": "hunter22"})))), Some(json!({"key": "[REDACTED]"})));
    }

    #[test]
    fn synthesizes_minimal_values() {
        let schema =
            json!({"type":"object","required":["a","b"],"properties":{"a":{"type":"string"},"b":{"type":"array"},"c":{"type":"integer"}}});
        assert_eq!(synthesize(&schema, &Value::Null), json!({"a":"","b":[]}));
        assert_eq!(synthesize(&json!({"enum":["x","y"]}), &Value::Null), json!("x"));
    }

    #[test]
    fn misses_show_the_nearest_request() {
        let recorded = Request::Tool(ToolRequest { tool: "t".into(), input: json!({"q": "cats", "n": 1}), idempotency_key: None });
        let entries =
            vec![Entry { kind: "tool".into(), key: recorded.key(), request: recorded, response: Response::Tool(ToolResult::default()) }];
        let wanted = Request::Tool(ToolRequest { tool: "t".into(), input: json!({"q": "dogs", "n": 1}), idempotency_key: None });
        let message = Executors::miss_message(&wanted, &entries);
        assert!(message.contains("/input/q: requested \"dogs\", recorded \"cats\""), "{message}");
        assert!(!message.contains("/input/n"), "{message}");
    }

    #[test]
    fn builtins_work_and_unknown_ones_are_named() {
        assert_eq!(builtin_tool("word_count", &json!({"text": "a b  c"}), Path::new(".")).unwrap(), json!(3));
        let err = builtin_tool("nope", &json!({}), Path::new(".")).unwrap_err();
        assert!(err.contains("no native function `nope`"), "{err}");
    }

    #[tokio::test]
    async fn commands_run_without_a_shell_and_time_out() {
        let dir = std::env::temp_dir();
        // `;` is an argument, not a command separator: no shell.
        let (code, stdout, _) = run_command(&["echo".into(), "a;b".into()], &["PATH".into()], &dir, None).await.unwrap();
        assert_eq!((code, stdout.trim()), (0, "a;b"));
        let err = run_command(&["sleep".into(), "5".into()], &["PATH".into()], &dir, Some(50)).await.unwrap_err();
        assert_eq!(err.0, ErrorCode::Timeout);
    }
}
