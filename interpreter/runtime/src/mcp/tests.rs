use super::*;
use std::path::Path;

/// A fake MCP server (Python), over stdio or HTTP: tools for every case below.
const FAKE_SERVER: &str = include_str!("../../tests/fixtures/mcp_fake_server.py");

fn fake() -> (tempfile::TempDir, McpPool, ServerSpec) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("fake_server.py"), FAKE_SERVER).unwrap();
    let pool = McpPool::new(dir.path().to_path_buf());
    (dir, pool, ServerSpec::stdio(vec!["python3".into(), "fake_server.py".into()]))
}

#[tokio::test]
async fn handshakes_and_lists_every_page_of_tools() {
    let (_dir, pool, server) = fake();
    let tools = pool.tools(&server).await.unwrap();
    let names: Vec<&str> = tools.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names[..5], ["handshake", "structured", "json_text", "plain_text", "multi"]);
    assert!(names.contains(&"pid"), "the second page is listed: {names:?}");
    assert_eq!(tools[0].1["properties"]["n"]["type"], "integer");
    let seen = pool.call(&server, "handshake", json!({}), Some(5000), "handshake").await.unwrap();
    assert_eq!(
        seen,
        json!({ "protocolVersion": PROTOCOL_VERSION, "client": "flow", "initialized": true, "capabilities": { "roots": { "listChanged": false } } })
    );
    assert!(format!("{pool:?}").contains("fake_server.py"));
}

#[tokio::test]
async fn a_server_speaking_an_older_version_is_used_and_an_unknown_one_refused() {
    let (dir, pool, _) = fake();
    // The server's environment picks its answer (`env` runs it).
    let speaking = |version: &str| {
        ServerSpec::stdio(vec!["env".into(), format!("FAKE_MCP_VERSION={version}"), "python3".into(), "fake_server.py".into()])
    };
    let older = speaking("2025-06-18");
    assert!(pool.tools(&older).await.is_ok(), "an older version flow speaks");
    let unknown = speaking("1999-01-01");
    let refused = pool.tools(&unknown).await.expect_err("a version flow does not speak");
    assert!(refused.contains("speaks protocol version `1999-01-01`, which flow does not"), "{refused}");
    assert!(refused.contains("2025-11-25"), "{refused}");
    drop(dir);
}

#[tokio::test]
async fn outputs_follow_the_contents() {
    let (_dir, pool, server) = fake();
    // structuredContent wins over the text.
    assert_eq!(pool.call(&server, "structured", json!({"a": 2, "b": 3}), None, "structured").await.unwrap(), json!({"sum": 5}));
    // A text that is JSON is parsed.
    assert_eq!(pool.call(&server, "json_text", json!({"q": "x"}), None, "json_text").await.unwrap(), json!({"echo": {"q": "x"}}));
    // A text that is not stays a string.
    assert_eq!(pool.call(&server, "plain_text", json!({"who": "you"}), None, "plain_text").await.unwrap(), json!("hello you"));
    // Several contents: an array of them.
    let multi = pool.call(&server, "multi", json!({}), None, "multi").await.unwrap();
    assert_eq!(multi, json!([1, "two", {"type": "image", "data": "AA==", "mimeType": "image/png"}]));
}

#[tokio::test]
async fn errors_are_errors() {
    let (_dir, pool, server) = fake();
    let err = pool.call(&server, "fail", json!({}), None, "fail").await.unwrap_err();
    assert!(err.contains("`fail`") && err.contains("no such customer"), "{err}");
    let err = pool.call(&server, "nope", json!({}), None, "nope").await.unwrap_err();
    assert!(err.contains("error -32602") && err.contains("Unknown tool: nope"), "{err}");
    // The server is still up.
    assert_eq!(pool.call(&server, "structured", json!({"a": 1, "b": 1}), None, "structured").await.unwrap(), json!({"sum": 2}));
}

#[tokio::test]
async fn concurrent_calls_are_matched_by_id() {
    let (_dir, pool, server) = fake();
    pool.tools(&server).await.unwrap();
    let (a, b) = tokio::join!(
        pool.call(&server, "pair", json!({"tag": "a"}), Some(10_000), "pair"),
        pool.call(&server, "pair", json!({"tag": "b"}), Some(10_000), "pair"),
    );
    assert_eq!(a.unwrap(), json!({"tag": "a"}));
    assert_eq!(b.unwrap(), json!({"tag": "b"}));
}

#[tokio::test]
async fn pings_are_answered() {
    let (_dir, pool, server) = fake();
    assert_eq!(pool.call(&server, "ping_me", json!({}), Some(5000), "ping_me").await.unwrap(), json!({"pong": true}));
}

#[tokio::test]
async fn a_call_times_out_and_the_server_lives_on() {
    let (_dir, pool, server) = fake();
    let err = pool.call(&server, "hang", json!({}), Some(200), "hang").await.unwrap_err();
    assert!(err.contains("`hang`") && err.contains("timed out after 200 ms"), "{err}");
    assert_eq!(pool.call(&server, "structured", json!({"a": 1, "b": 2}), Some(5000), "structured").await.unwrap(), json!({"sum": 3}));
}

#[tokio::test]
async fn a_server_that_exits_fails_its_calls_with_its_stderr_and_starts_again() {
    let (_dir, pool, server) = fake();
    let err = pool.call(&server, "die", json!({}), Some(5000), "die").await.unwrap_err();
    assert!(err.contains("python3 fake_server.py") && err.contains("exited") && err.contains("fatal: disk on fire"), "{err}");
    // The next use starts it again.
    assert_eq!(pool.call(&server, "structured", json!({"a": 4, "b": 4}), Some(5000), "structured").await.unwrap(), json!({"sum": 8}));
}

#[tokio::test]
async fn servers_that_cannot_start_are_named() {
    let (_dir, pool, _) = fake();
    let err = pool.tools(&ServerSpec::stdio(vec!["/nonexistent/mcp-server".into(), "--flag".into()])).await.unwrap_err();
    assert!(err.contains("cannot start the MCP server `/nonexistent/mcp-server --flag`"), "{err}");
    let quits: Vec<String> = vec!["python3".into(), "-c".into(), "import sys; sys.stderr.write('missing API key\\n'); sys.exit(2)".into()];
    let err = pool.tools(&ServerSpec::stdio(quits)).await.unwrap_err();
    assert!(err.contains("python3 -c") && err.contains("exited") && err.contains("missing API key"), "{err}");
    let err = pool.tools(&ServerSpec::stdio(vec![])).await.unwrap_err();
    assert!(err.contains("empty"), "{err}");
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn dropping_the_pool_kills_its_servers() {
    let (_dir, pool, server) = fake();
    let pid = pool.call(&server, "pid", json!({}), Some(5000), "pid").await.unwrap().as_u64().unwrap();
    let stat = format!("/proc/{pid}/stat");
    assert!(std::path::Path::new(&stat).exists());
    drop(pool);
    let mut gone = false;
    for _ in 0..200 {
        // Gone, or a zombie not reaped yet.
        match std::fs::read_to_string(&stat) {
            Err(_) => gone = true,
            Ok(s) => gone = s.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')),
        }
        if gone {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(gone, "the server (pid {pid}) still runs");
}

#[test]
fn outputs_of_results() {
    assert_eq!(output_of(&json!({"content": []})), Value::Null);
    assert_eq!(output_of(&json!({"content": [{"type": "text", "text": "42"}]})), json!(42));
    assert_eq!(output_of(&json!({"content": [{"type": "text", "text": "a"}], "structuredContent": null})), json!("a"));
    assert_eq!(error_text(&json!({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]})), "a\nb");
    assert_eq!(label(&["a b".into(), "c".into()]), "\"a b\" c");
}

/// A progress sink that keeps what it is sent.
fn collector() -> (Arc<Mutex<Vec<ToolProgress>>>, ProgressSink) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let keep = seen.clone();
    (seen, Arc::new(move |p: &ToolProgress| lock(&keep).push(p.clone())))
}

/// Progress, roots, resources and prompts, on any transport.
async fn serves_the_whole_client(dir: &Path, server: ServerSpec) {
    let (seen, sink) = collector();
    let mut pool = McpPool::new(dir.to_path_buf());
    pool.set_progress(sink);
    let server = ServerSpec { roots: vec![dir.join("data dir")], ..server };
    assert_eq!(pool.call(&server, "progress", json!({}), Some(5000), "slow_tool").await.unwrap(), json!("done"));
    let seen = lock(&seen).clone();
    assert_eq!(seen.iter().map(|p| (p.progress, p.total)).collect::<Vec<_>>(), [(1.0, Some(3.0)), (2.0, Some(3.0)), (3.0, Some(3.0))]);
    assert_eq!(seen[0].tool, "slow_tool");
    assert_eq!(seen[2].to_string(), "tool slow_tool: 3/3 (step 3)");

    let roots = pool.call(&server, "roots", json!({}), Some(5000), "roots").await.unwrap();
    let uri = format!("file://{}/data%20dir", dir.display());
    assert_eq!(roots, json!({ "roots": [{ "uri": uri, "name": "data dir" }] }));
    assert_eq!(pool.call(&server, "ping_me", json!({}), Some(5000), "ping_me").await.unwrap(), json!({"pong": true}));

    assert_eq!(pool.read_resource(&server, "fake://doc/7", Some(5000)).await.unwrap(), json!("document 7"));
    assert_eq!(pool.read_resource(&server, "fake://json", None).await.unwrap(), json!({"n": 1}));
    assert_eq!(pool.read_resource(&server, "fake://two", None).await.unwrap(), json!(["a", "b"]));
    assert_eq!(pool.read_resource(&server, "fake://blob", None).await.unwrap()["blob"], "AA==");
    let missing = pool.read_resource(&server, "fake://none", None).await.unwrap_err();
    assert!(missing.contains("`resources/read`") && missing.contains("Resource not found: fake://none"), "{missing}");

    let prompt = pool.get_prompt(&server, "greet", json!({"who": "Ann"}), None).await.unwrap();
    assert_eq!(prompt["description"], "a greeting");
    assert_eq!(prompt["messages"][0], json!({ "role": "user", "content": "Greet Ann (str)" }));
    assert_eq!(prompt["messages"][1]["content"]["type"], "image");
    let unknown = pool.get_prompt(&server, "nope", json!({}), None).await.unwrap_err();
    assert!(unknown.contains("Unknown prompt: nope"), "{unknown}");
}

#[tokio::test]
async fn progress_roots_resources_and_prompts_over_stdio() {
    let (dir, _, server) = fake();
    serves_the_whole_client(dir.path(), server).await;
}

/// The fake server over HTTP: killed when dropped.
pub(crate) struct HttpFake {
    child: std::process::Child,
    pub url: String,
    _dir: tempfile::TempDir,
}

impl Drop for HttpFake {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn http_fake(env: &[(&str, &str)]) -> HttpFake {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("fake_server.py"), FAKE_SERVER).unwrap();
    let mut child = std::process::Command::new("python3")
        .args(["fake_server.py", "--http"])
        .envs(env.iter().copied())
        .current_dir(dir.path())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs the fake server");
    let mut port = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut port).unwrap();
    let url = format!("http://127.0.0.1:{}/mcp", port.trim());
    HttpFake { child, url, _dir: dir }
}

/// What the HTTP fake saw: initializations, GETs and DELETEs.
async fn http_log(url: &str) -> Vec<String> {
    let pool = McpPool::new(std::env::temp_dir());
    let log = pool.call(&ServerSpec::http(url), "log", json!({}), Some(5000), "log").await.unwrap();
    serde_json::from_value(log["log"].clone()).unwrap()
}

#[tokio::test]
async fn over_http_the_handshake_calls_and_everything_else_work() {
    let dir = tempfile::tempdir().unwrap();
    let (_, pool, _) = fake();
    let fake = http_fake(&[]);
    let server = ServerSpec::http(&fake.url);
    let seen = pool.call(&server, "handshake", json!({}), Some(5000), "handshake").await.unwrap();
    assert_eq!(seen["initialized"], true, "the notification arrived, with the negotiated version: {seen}");
    assert_eq!(pool.tools(&server).await.unwrap().len(), 15, "both pages");
    // Answered as events (a call) and as a JSON body (the rest).
    assert_eq!(pool.call(&server, "structured", json!({"a": 2, "b": 3}), None, "structured").await.unwrap(), json!({"sum": 5}));
    let err = pool.call(&server, "fail", json!({}), None, "fail").await.unwrap_err();
    assert!(err.contains("no such customer") && err.contains(&fake.url), "{err}");
    serves_the_whole_client(dir.path(), server.clone()).await;
    // Two calls are in flight at once: each answers only when both arrived.
    let (a, b) = tokio::join!(
        pool.call(&server, "pair", json!({"tag": "a"}), Some(5000), "pair"),
        pool.call(&server, "pair", json!({"tag": "b"}), Some(5000), "pair"),
    );
    assert_eq!((a.unwrap(), b.unwrap()), (json!({"tag": "a"}), json!({"tag": "b"})));
    let err = pool.call(&server, "hang", json!({}), Some(300), "hang").await.unwrap_err();
    assert!(err.contains("`hang`") && err.contains("timed out after 300 ms"), "{err}");
    assert_eq!(pool.call(&server, "structured", json!({"a": 1, "b": 2}), Some(5000), "structured").await.unwrap(), json!({"sum": 3}));
    assert!(http_log(&fake.url).await.contains(&"GET".to_string()), "the stream of server messages was asked for");
}

#[tokio::test]
async fn over_http_an_ended_session_is_started_again_and_a_dropped_pool_ends_its_own() {
    let (_dir, pool, _) = fake();
    let fake = http_fake(&[]);
    let server = ServerSpec::http(&fake.url);
    assert_eq!(pool.call(&server, "expire", json!({}), Some(5000), "expire").await.unwrap(), json!("expired"));
    // The server forgot the session: 404, a new session, the call sent again.
    assert_eq!(pool.call(&server, "structured", json!({"a": 1, "b": 1}), Some(5000), "structured").await.unwrap(), json!({"sum": 2}));
    drop(pool);
    let mut log = Vec::new();
    for _ in 0..100 {
        log = http_log(&fake.url).await;
        if log.iter().any(|l| l == "DELETE") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(log.iter().filter(|l| *l == "initialize").count(), 3, "two sessions of the pool, one of the log: {log:?}");
    assert!(log.contains(&"DELETE".to_string()), "dropping the pool ended its session: {log:?}");
}

#[tokio::test]
async fn over_http_unknown_versions_and_unreachable_servers_are_refused_by_name() {
    let old = http_fake(&[("FAKE_MCP_VERSION", "1999-01-01")]);
    let (_dir, pool, _) = fake();
    let refused = pool.tools(&ServerSpec::http(&old.url)).await.unwrap_err();
    assert!(refused.contains("speaks protocol version `1999-01-01`, which flow does not"), "{refused}");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let gone = format!("http://127.0.0.1:{port}/mcp");
    let err = pool.tools(&ServerSpec::http(&gone)).await.unwrap_err();
    assert!(err.contains(&format!("cannot reach the MCP server `{gone}`")), "{err}");
    let err = pool.tools(&ServerSpec::http("ftp://127.0.0.1/mcp")).await.unwrap_err();
    assert!(err.contains("not an http:// or https:// URL"), "{err}");
}

#[test]
fn prompts_and_file_uris() {
    let out = prompt_output(&json!({"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}]}));
    assert_eq!(out, json!({"description": null, "messages": [{"role": "user", "content": "hi"}]}));
    assert_eq!(file_uri(Path::new("/a b/ü")), "file:///a%20b/%C3%BC");
}
