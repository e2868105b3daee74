//! MCP over stdio: the server is a child process in its own process group;
//! one JSON message per line on its stdin and stdout; its stderr is drained
//! and its last lines kept for error messages.

use super::lock;
use super::session::{Inbound, Session, Shared};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Lines of the server's stderr kept for error messages.
const STDERR_LINES: usize = 20;

/// The server process: killed, with its process group, when the session goes.
struct Process {
    child: Arc<Mutex<Option<Child>>>,
    group: crate::exec::groups::Group,
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Some(mut child) = lock(&self.child).take() {
            let _ = child.start_kill();
        }
        self.group.stop();
    }
}

/// Starts the server `command` in `cwd` and initializes a session with it.
pub(super) async fn start(command: &[String], cwd: &Path, shared: Arc<Shared>) -> Result<Session, String> {
    if command.is_empty() {
        return Err("an MCP tool needs the command line of its server (`server`), and it is empty".into());
    }
    let label = shared.label.clone();
    // A relative program path (`./server.py`) is taken from the run's
    // directory; a bare name is looked up on PATH.
    let mut program = PathBuf::from(&command[0]);
    if program.is_relative() && program.components().count() > 1 {
        program = cwd.join(program);
    }
    let mut spawn = Command::new(&program);
    spawn
        .args(&command[1..])
        .current_dir(cwd)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = spawn.spawn().map_err(|e| format!("cannot start the MCP server `{label}` (in {}): {e}", cwd.display()))?;
    let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take()) else {
        let _ = child.start_kill();
        return Err(format!("cannot start the MCP server `{label}`: its pipes are missing"));
    };
    tracing::debug!(target: "flow::mcp", server = %label, pid = ?child.id(), "MCP server started");
    let group = crate::exec::groups::Group::led_by(child.id());
    let child = Arc::new(Mutex::new(Some(child)));
    let (outbox, inbox) = mpsc::unbounded_channel();

    let drain = tokio::spawn(drain_stderr(shared.clone(), stderr));
    tokio::spawn(write_loop(stdin, inbox));
    let inbound = Inbound { shared: shared.clone(), outbox: outbox.downgrade() };
    tokio::spawn(read_loop(inbound, stdout, drain, child.clone()));

    let session = Session::new(shared, outbox, Box::new(Process { child, group }));
    session.initialize().await?;
    session.notify("notifications/initialized");
    Ok(session)
}

/// Writes queued lines to the server's stdin; ends (closing stdin) when the
/// session is dropped or the pipe breaks.
async fn write_loop(mut stdin: ChildStdin, mut inbox: mpsc::UnboundedReceiver<String>) {
    while let Some(mut line) = inbox.recv().await {
        line.push('\n');
        if stdin.write_all(line.as_bytes()).await.is_err() || stdin.flush().await.is_err() {
            break;
        }
    }
}

/// Calls `each` with every line `input` gives (its end of line kept) until it closes.
async fn each_line(input: impl tokio::io::AsyncRead + Unpin, mut each: impl FnMut(&[u8])) {
    let mut reader = BufReader::new(input);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => each(&buf),
        }
    }
}

/// Keeps the last lines of the server's stderr (and never lets the pipe fill).
async fn drain_stderr(shared: Arc<Shared>, stderr: ChildStderr) {
    each_line(stderr, |bytes| {
        let line = String::from_utf8_lossy(bytes).trim_end().to_string();
        if line.is_empty() {
            return;
        }
        tracing::debug!(target: "flow::mcp", server = %shared.label, "stderr: {line}");
        let mut lines = lock(&shared.stderr);
        if lines.len() == STDERR_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    })
    .await;
}

/// Reads the server's stdout, one message per line, until it closes.
async fn read_loop(inbound: Inbound, stdout: ChildStdout, drain: JoinHandle<()>, child: Arc<Mutex<Option<Child>>>) {
    each_line(stdout, |bytes| {
        let line = bytes.trim_ascii();
        if !line.is_empty() {
            inbound.handle_json(line);
        }
    })
    .await;
    closed(&inbound.shared, drain, &child).await;
}

/// Stdout closed: the server is gone. Every waiting request fails with its
/// exit status and the last lines of its stderr.
async fn closed(shared: &Shared, drain: JoinHandle<()>, child: &Mutex<Option<Child>>) {
    let _ = tokio::time::timeout(Duration::from_secs(1), drain).await;
    let mut status = None;
    for _ in 0..50 {
        let polled = match lock(child).as_mut() {
            Some(child) => child.try_wait(),
            None => break,
        };
        match polled {
            Ok(Some(s)) => {
                status = Some(s);
                break;
            }
            Ok(None) => tokio::time::sleep(Duration::from_millis(10)).await,
            Err(_) => break,
        }
    }
    let how = match status {
        Some(s) => format!("exited ({s})"),
        None => {
            // Closed its stdout but still runs: it is no use any more.
            if let Some(child) = lock(child).as_mut() {
                let _ = child.start_kill();
            }
            "closed its output".to_string()
        }
    };
    let tail = shared.stderr_tail();
    let tail = if tail.is_empty() { "; it wrote nothing on stderr".into() } else { tail };
    shared.close(format!("the MCP server `{}` {how}{tail}", shared.label));
}
