//! Builtin tools and native evaluators: functions of the runtime itself.

use super::*;

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
/// the driver runs their calls at once instead of awaiting them (one list,
/// shared with the engine's recovery).
pub use flow_check::semantics::PURE_BUILTINS;

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

impl Executors {
    /// A call of a `builtin` tool.
    pub(super) fn builtin(&self, decl: &Decl, request: &ToolRequest) -> ToolResult {
        let started = std::time::Instant::now();
        let function = decl.function();
        let mut result = match builtin_tool(function, &request.input, &self.base_dir) {
            Ok(output) => ToolResult { ok: true, output: Some(output), ..ToolResult::default() },
            Err(e) => ToolResult { ok: false, error: Some(e), ..ToolResult::default() },
        };
        result.duration_ms = started.elapsed().as_millis() as u64;
        result
    }

    pub(super) async fn probe(&self, request: &ProbeRequest) -> ProbeResult {
        if let Some(native) = &request.native {
            let input = request.input.clone().unwrap_or(Value::Null);
            return match native_evaluator(native, &input, &self.base_dir) {
                Ok(pass) => ProbeResult { exit_code: Some(if pass { 0 } else { 1 }), ..ProbeResult::default() },
                Err(e) => ProbeResult { error: Some(e), ..ProbeResult::default() },
            };
        }
        let env: Vec<String> = vec!["PATH".into()];
        match run_command(&request.argv, &env, &self.base_dir, request.timeout_ms).await {
            Ok(exited) => ProbeResult {
                exit_code: exited.code,
                output: serde_json::from_str(&exited.stdout).ok(),
                error: None,
                // How it ended, for the record when it did not exit 0.
                status: (!exited.success()).then(|| exited.describe()),
            },
            Err((_, message)) => ProbeResult { exit_code: None, output: None, error: Some(message), status: None },
        }
    }
}
