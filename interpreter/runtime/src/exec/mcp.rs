//! MCP tools: a tool of the server, one of its resources, or one of its
//! prompts ([`crate::mcp`] talks to the server).

use super::http::percent_encode;
use super::*;
use crate::mcp::{Endpoint, ProgressSink, ServerSpec};

impl Executors {
    /// Sends the MCP servers' progress reports on calls to `sink`.
    pub fn with_progress(mut self, sink: ProgressSink) -> Executors {
        self.mcp.set_progress(sink);
        self
    }

    /// An `mcp` tool: `resources/read` of its `resource` (`{field}`s filled,
    /// percent-encoded, from the input), `prompts/get` of its `prompt` (the
    /// input's fields as the arguments), or else `tools/call` of its remote
    /// name, which the server must list.
    pub(super) async fn mcp_tool(&self, decl: &Decl, request: &ToolRequest, timeout_ms: Option<u64>) -> ToolResult {
        let at = self.mcp_server(decl);
        let result = if let Some(uri) = decl.resource() {
            let uri = template_with(uri, &request.input, percent_encode);
            self.mcp.read_resource(&at, &uri, timeout_ms).await
        } else if let Some(prompt) = decl.prompt() {
            self.mcp.get_prompt(&at, prompt, prompt_arguments(&request.input), timeout_ms).await
        } else {
            self.mcp_call(&at, decl, request, timeout_ms).await
        };
        match result {
            Ok(output) => ToolResult { ok: true, output: Some(output), ..ToolResult::default() },
            Err(e) => ToolResult { ok: false, error: Some(e), ..ToolResult::default() },
        }
    }

    /// Only what the server offers under the declared name is called.
    async fn mcp_call(&self, at: &ServerSpec, decl: &Decl, request: &ToolRequest, timeout_ms: Option<u64>) -> Result<Value, String> {
        let remote = decl.remote_name();
        let offered = self.mcp.tools(at).await?;
        if !offered.iter().any(|(name, _)| name == remote) {
            return Err(format!("the MCP server `{}` offers no tool `{remote}`", at.label()));
        }
        self.mcp.call(at, remote, request.input.clone(), timeout_ms, &request.tool).await
    }

    /// The server a tool declares: its `url` (with its `headers`) or its
    /// `server` command line; its `roots` resolved against the flow file's
    /// directory, which is the one root when none is declared.
    fn mcp_server(&self, decl: &Decl) -> ServerSpec {
        let endpoint = match decl.url() {
            Some(url) => Endpoint::Http {
                url: url.to_string(),
                headers: decl.headers().into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            },
            None => Endpoint::Stdio(decl.server()),
        };
        let declared = decl.roots();
        let roots =
            if declared.is_empty() { vec![self.base_dir.clone()] } else { declared.iter().map(|r| self.base_dir.join(r)).collect() };
        ServerSpec { endpoint, roots }
    }
}

/// A prompt's arguments are strings: a string field as it is, any other
/// value as its JSON text.
fn prompt_arguments(input: &Value) -> Value {
    let Some(fields) = input.as_object() else { return json!({}) };
    let strings: serde_json::Map<String, Value> =
        fields.iter().map(|(k, v)| (k.clone(), Value::String(v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string())))).collect();
    Value::Object(strings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::tests::http_fake;

    /// The executors of a checked flow, run from `dir`.
    fn executors(source: &str, dir: &Path) -> Executors {
        let mut db = flow_diagnostics::SourceDb::new();
        let root = db.add("test.flow", source.to_string());
        let checked = flow_check::check_program(&mut db, root, &flow_check::NoFiles);
        assert!(!checked.has_errors(), "{:#?}", checked.diagnostics);
        Executors::new(Arc::new(checked.program), dir.to_path_buf())
    }

    async fn run(exec: &Executors, tool: &str, input: Value) -> Result<Value, String> {
        match exec.tool(&ToolRequest { tool: tool.into(), input, idempotency_key: None }, Some(5000)).await {
            ToolResult { ok: true, output, .. } => Ok(output.unwrap_or(Value::Null)),
            ToolResult { error, .. } => Err(error.unwrap_or_default()),
        }
    }

    /// A tool, a resource and a prompt of one server at a `url` that wants
    /// the declared `headers`; the declared `roots`, from the flow file's directory.
    #[tokio::test]
    async fn declared_urls_headers_resources_prompts_and_roots_reach_the_server() {
        let fake = http_fake(&[("FAKE_MCP_TOKEN", "s3cret-token")]);
        let dir = tempfile::tempdir().unwrap();
        let source = r#"
tool sum: mcp { description: "x", input: { a: int, b: int }, output: { sum: int }, url: "@URL@",
  headers: { Authorization: "Bearer s3cret-token" }, remote_name: "structured" }
tool anonymous: mcp { description: "x", input: { a: int, b: int }, output: { sum: int }, url: "@URL@", remote_name: "structured" }
tool doc: mcp { description: "x", input: { name: string }, output: string, url: "@URL@",
  headers: { Authorization: "Bearer s3cret-token" }, resource: "fake://doc/{name}" }
type Message = { role: string, content: any }
tool greet: mcp { description: "x", input: { who: int }, output: { description: string?, messages: [Message] }, url: "@URL@",
  headers: { Authorization: "Bearer s3cret-token" }, prompt: "greet" }
tool roots: mcp { description: "x", input: {}, output: any, url: "@URL@",
  headers: { Authorization: "Bearer s3cret-token" }, roots: ["data", "/srv/shared"] }
workflow w {
  start: a
  node a: tool sum { args: { a: 1, b: 2 } }
  node b: tool anonymous { args: { a: 1, b: 2 } }
  node c: tool doc { args: { name: "x" } }
  node d: tool greet { args: { who: 1 } }
  node e: tool roots { args: {} }
  node f: end done
  a -> b -> c -> d -> e -> f
}
"#;
        let exec = executors(&source.replace("@URL@", &fake.url), dir.path());
        assert_eq!(run(&exec, "sum", json!({"a": 1, "b": 2})).await, Ok(json!({"sum": 3})));
        let refused = run(&exec, "anonymous", json!({"a": 1, "b": 2})).await.unwrap_err();
        assert!(refused.contains("HTTP 401"), "{refused}");
        // `{name}` is filled, percent-encoded.
        assert_eq!(run(&exec, "doc", json!({"name": "a b/c"})).await, Ok(json!("document a%20b%2Fc")));
        let greeting = run(&exec, "greet", json!({"who": 7})).await.unwrap();
        assert_eq!(greeting["messages"][0]["content"], "Greet 7 (str)", "a prompt's arguments are strings");
        let roots = run(&exec, "roots", json!({})).await.unwrap();
        let uris: Vec<&str> = roots["roots"].as_array().unwrap().iter().map(|r| r["uri"].as_str().unwrap()).collect();
        assert_eq!(uris, [format!("file://{}/data", dir.path().display()), "file:///srv/shared".to_string()]);
    }

    #[test]
    fn prompt_arguments_are_strings() {
        assert_eq!(prompt_arguments(&json!({"city": "Oslo", "days": 3, "x": null})), json!({"city": "Oslo", "days": "3", "x": "null"}));
        assert_eq!(prompt_arguments(&Value::Null), json!({}));
    }
}
