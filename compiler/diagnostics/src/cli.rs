//! What both command lines (`flowc`, `flow`) set up before they run: the
//! one process-level setting they share. No I/O happens here.

/// Makes a closed standard output end the command quietly: `flow show RUN |
/// head` exits with 141 (as a process killed by SIGPIPE does) instead of
/// panicking with "failed printing to stdout". Only standard output is
/// concerned: a closed pipe to a tool or an MCP server is still an error
/// the run records and handles.
pub fn quiet_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message =
            payload.downcast_ref::<String>().map(String::as_str).or_else(|| payload.downcast_ref::<&str>().copied()).unwrap_or("");
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(CLOSED_STDOUT_EXIT);
        }
        default(info)
    }));
}

/// The exit code after standard output closed early: 128 + SIGPIPE (13).
pub const CLOSED_STDOUT_EXIT: i32 = 141;
