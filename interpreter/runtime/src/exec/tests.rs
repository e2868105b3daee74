//! The executors: builtins, replay, redaction, misses, commands.

use super::*;
use flow_check::ir::Value as IrValue;

/// A program of tools: (name, variant, function).
fn tools(list: &[(&str, &str, Option<&str>)]) -> Arc<Program> {
    let mut program = Program::default();
    for (name, variant, function) in list {
        let mut props = flow_check::ir::NameMap::default();
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
    let exec = Executors::new(tools(&[("echo", "builtin", Some("identity"))]), PathBuf::from(".")).with_secrets(vec!["hunter22".into()]);
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
