//! Commands: tools and probes run as processes, without a shell, with a
//! timeout.

use super::*;

pub(super) fn tail(text: &str) -> String {
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
