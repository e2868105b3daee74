//! Commands: tools and probes run as processes, without a shell, with a
//! timeout.

use super::*;

/// The last three lines of `text`, at most 500 characters (the end kept).
pub(super) fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().rev().filter(|l| !l.trim().is_empty()).take(3).collect();
    let joined = lines.into_iter().rev().collect::<Vec<_>>().join(" | ");
    let chars = joined.chars().count();
    if chars <= 500 {
        joined
    } else {
        format!("…{}", joined.chars().skip(chars - 500).collect::<String>())
    }
}

/// Runs a program directly (never a shell) with an environment allow-list,
/// in its own process group: when the program exits, times out or the call
/// is dropped (cancelled), the group is torn down (SIGTERM, then SIGKILL
/// after [`groups::GRACE`]), so nothing it started outlives the call.
/// Ok(how it exited, with its output) or Err((error_code, message)).
pub async fn run_command(argv: &[String], env: &[String], cwd: &Path, timeout_ms: Option<u64>) -> Result<Exited, (ErrorCode, String)> {
    let Some((program, args)) = argv.split_first() else { return Err((ErrorCode::ToolError, "empty argv".into())) };
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .kill_on_drop(true)
        .process_group(0)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for name in env {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    let mut child = command.spawn().map_err(|e| (ErrorCode::ToolError, format!("cannot run `{program}`: {e}")))?;
    let mut group = groups::Group::led_by(child.id());
    let stdout = tokio::spawn(read_all(child.stdout.take()));
    let stderr = tokio::spawn(read_all(child.stderr.take()));
    let status = match timeout_ms {
        Some(ms) => match tokio::time::timeout(Duration::from_millis(ms), child.wait()).await {
            Ok(status) => status,
            Err(_) => {
                group.stop();
                // The leader had its grace with the rest of the group.
                let _ = tokio::time::timeout(groups::GRACE + Duration::from_millis(200), child.wait()).await;
                return Err((ErrorCode::Timeout, format!("`{program}` timed out after {ms} ms (its process group was stopped)")));
            }
        },
        None => child.wait().await,
    };
    // What the program left running (a background `&`) goes with it: its
    // pipes then close and the output is whole.
    group.stop();
    let status = status.map_err(|e| (ErrorCode::ToolError, format!("cannot wait for `{program}`: {e}")))?;
    let stdout = stdout.await.unwrap_or_default();
    let stderr = stderr.await.unwrap_or_default();
    use std::os::unix::process::ExitStatusExt;
    Ok(Exited {
        code: status.code(),
        signal: status.signal(),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    })
}

/// How a program ended, and what it wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exited {
    /// Its exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    /// The signal that ended it.
    pub signal: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Exited {
    /// Whether it exited with 0.
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// `exited with N` or `was killed by signal N`, then the last lines of
    /// its stderr (bounded).
    pub fn describe(&self) -> String {
        let how = match (self.code, self.signal) {
            (Some(code), _) => format!("exited with {code}"),
            (None, Some(signal)) => format!("was killed by signal {signal}"),
            (None, None) => "ended without an exit status".to_string(),
        };
        let tail = tail(&self.stderr);
        if tail.is_empty() {
            format!("{how} (nothing on stderr)")
        } else {
            format!("{how}; stderr: {tail}")
        }
    }
}

/// Everything a pipe gives until it closes.
async fn read_all(pipe: Option<impl tokio::io::AsyncRead + Unpin>) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let mut bytes = Vec::new();
    if let Some(mut pipe) = pipe {
        let _ = pipe.read_to_end(&mut bytes).await;
    }
    bytes
}
