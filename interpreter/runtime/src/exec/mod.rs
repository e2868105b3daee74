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

mod builtin;
mod cassette;
mod command;
pub mod groups;
mod http;
mod mcp;
pub mod redaction;
mod scripted;

pub use builtin::{builtin_tool, native_evaluator, BUILTIN_TOOLS, NATIVE_EVALUATORS, PURE_BUILTINS};
use cassette::Replayer;
pub use cassette::{Cassette, Entry, Miss, ReplayMode};
pub use command::{run_command, Exited};
pub use http::percent_encode;
pub use scripted::{synthesize, Script};

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

/// Executes requests: the data plane.
pub struct Executors {
    program: Arc<Program>,
    base_dir: PathBuf,
    scripts: Mutex<HashMap<String, Script>>,
    replay: Option<Mutex<Replayer>>,
    /// `replay` providers' own cassettes, loaded on their first turn.
    tapes: Mutex<HashMap<String, Replayer>>,
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

impl Executors {
    /// Executors for `program`, resolving relative paths (scripts, cwd)
    /// against `base_dir` (the directory of the `.flow` file).
    pub fn new(program: Arc<Program>, base_dir: PathBuf) -> Executors {
        Executors {
            program,
            base_dir: base_dir.clone(),
            scripts: Mutex::new(HashMap::new()),
            replay: None,
            tapes: Mutex::new(HashMap::new()),
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
        if !flow_check::semantics::is_pure_builtin(decl) {
            return None;
        }
        let computed = || self.settle(request, Response::Tool(self.builtin(decl, t)));
        Some(self.replayed_and_recorded(request).map(|replayed| replayed.unwrap_or_else(computed)))
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
                    Ok(Exited { code: Some(0), stdout, .. }) => {
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
                    Ok(exited) => ToolResult {
                        ok: false,
                        error: Some(format!("`{}` {}", argv.first().cloned().unwrap_or_default(), exited.describe())),
                        ..ToolResult::default()
                    },
                    Err((code, message)) => ToolResult { ok: false, error: Some(message), error_code: Some(code), ..ToolResult::default() },
                }
            }
            Some("builtin") => self.builtin(decl, request),
            Some("http") => self.http_tool(decl, request, timeout_ms).await,
            Some("mcp") => self.mcp_tool(decl, request, timeout_ms).await,
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
}

#[cfg(test)]
mod tests;
