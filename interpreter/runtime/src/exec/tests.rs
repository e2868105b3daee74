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
    let Exited { code, stdout, .. } = run_command(&["echo".into(), "a;b".into()], &["PATH".into()], &dir, None).await.unwrap();
    assert_eq!((code, stdout.trim()), (Some(0), "a;b"));
    let err = run_command(&["sleep".into(), "5".into()], &["PATH".into()], &dir, Some(50)).await.unwrap_err();
    assert_eq!(err.0, ErrorCode::Timeout);
}

/// Whether process `pid` still runs (a zombie waiting for its parent's
/// reaping has stopped running).
fn running(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit(')').next().and_then(|rest| rest.split_whitespace().next()) != Some("Z"),
        Err(_) => false,
    }
}

/// Polls until `pid` stopped running, for at most the grace period and a
/// margin.
async fn gone(pid: &str) -> bool {
    let until = std::time::Instant::now() + groups::GRACE + Duration::from_secs(2);
    while std::time::Instant::now() < until {
        if !running(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test]
async fn a_command_takes_what_it_started_with_it_when_it_ends_or_times_out() {
    let dir = tempfile::tempdir().unwrap();
    let env = ["PATH".to_string()];
    // Ends, leaving a background grandchild: the grandchild goes too.
    let argv: Vec<String> = ["sh", "-c", "sleep 60 & echo $!"].iter().map(|s| s.to_string()).collect();
    let Exited { code, stdout, .. } = run_command(&argv, &env, dir.path(), Some(20_000)).await.unwrap();
    assert_eq!(code, Some(0));
    let pid = stdout.trim().to_string();
    assert!(!pid.is_empty());
    assert!(gone(&pid).await, "the background grandchild {pid} outlived its command");
    // Times out while its grandchild runs: the whole group is stopped.
    let argv: Vec<String> = ["sh", "-c", "sleep 60 & echo $! > grandchild; wait"].iter().map(|s| s.to_string()).collect();
    let err = run_command(&argv, &env, dir.path(), Some(300)).await.unwrap_err();
    assert_eq!(err.0, ErrorCode::Timeout, "{}", err.1);
    let pid = std::fs::read_to_string(dir.path().join("grandchild")).unwrap().trim().to_string();
    assert!(gone(&pid).await, "the grandchild {pid} outlived its command's timeout");
    // Dropped mid-way (a cancelled call): the group is stopped as well.
    let argv: Vec<String> = ["sh", "-c", "sleep 60 & echo $! > dropped; wait"].iter().map(|s| s.to_string()).collect();
    let call = run_command(&argv, &env, dir.path(), None);
    let _ = tokio::time::timeout(Duration::from_millis(500), call).await;
    let pid = std::fs::read_to_string(dir.path().join("dropped")).unwrap().trim().to_string();
    assert!(gone(&pid).await, "the grandchild {pid} outlived its dropped call");
    groups::stop_all().await;
}

#[test]
fn redaction_takes_keys_out_of_strings_keys_and_numbers_and_withholds_what_it_cannot() {
    let exec = Executors::new(tools(&[]), PathBuf::from(".")).with_secrets(vec!["pa\"ss\\word1".into(), "4242424242".into()]);
    let tool = |output: Value| Response::Tool(ToolResult { ok: true, output: Some(output), ..ToolResult::default() });
    // A key with characters JSON escapes, in a value and in an object key.
    let out = exec.redact(tool(json!({"k": "x pa\"ss\\word1 y", "pa\"ss\\word1": 1})));
    assert_eq!(out, tool(json!({"k": "x [REDACTED] y", "[REDACTED]": 1})));
    // A numeric key written as a JSON number.
    let out = exec.redact(tool(json!({"n": 4242424242u64, "m": [14242424242u64, 7]})));
    assert_eq!(out, tool(json!({"n": "[REDACTED]", "m": ["[REDACTED]", 7]})));
    // In a field that must stay a number: the response is withheld, never
    // passed on as it was.
    let leaky = Response::Tool(ToolResult { ok: true, output: Some(json!(1)), duration_ms: 4242424242, ..ToolResult::default() });
    let Response::Tool(out) = exec.redact(leaky) else { panic!("a tool's response stays a tool's") };
    assert!(!out.ok && out.error.as_deref().unwrap_or_default().contains("withheld"), "{out:?}");
    assert!(!serde_json::to_string(&out).unwrap().contains("4242424242"));
    // Untouched when there is nothing to take out.
    assert_eq!(exec.redact(tool(json!({"n": 42}))), tool(json!({"n": 42})));
    let (input, changed) = exec.redact_input(json!({"note": "use 4242424242"}));
    assert!(changed);
    assert_eq!(input, json!({"note": "use [REDACTED]"}));
}
