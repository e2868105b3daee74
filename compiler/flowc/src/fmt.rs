//! `flowc fmt`: files formatted in place, checked (`--check`), or printed
//! (`--stdout`, and always for `-`, the standard input: what editors call).

use crate::{fail, input, report_to_stderr, write_file};
use flow_diagnostics::SourceDb;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// What `flowc fmt` does with a file's formatted text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Write it back (the default).
    InPlace,
    /// Change nothing: list the files that would change.
    Check,
    /// Print it on standard output.
    Stdout,
}

pub fn fmt(files: &[PathBuf], mode: Mode, max_diagnostics: usize) -> ExitCode {
    if let Err(error) = input::at_most_one_stdin(files) {
        return fail(error);
    }
    let mut db = SourceDb::new();
    let mut failed = false;
    let mut unformatted = 0;
    for path in files {
        let (name, source) = match input::read(path) {
            Ok(read) => read,
            Err(error) => return fail(error),
        };
        // The standard input has nowhere to be written back to.
        let mode = if input::is_stdin(path) && mode == Mode::InPlace { Mode::Stdout } else { mode };
        let file = db.add(name.clone(), source.clone());
        match flow_fmt::format_file(file, &source) {
            Ok(text) if mode == Mode::Stdout => {
                let mut out = std::io::stdout().lock();
                if let Err(error) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
                    if error.kind() != std::io::ErrorKind::BrokenPipe {
                        return fail(crate::UsageError(format!("cannot write the formatted {name}: {error}")));
                    }
                }
            }
            Ok(text) if text == source => {}
            Ok(_) if mode == Mode::Check => {
                unformatted += 1;
                println!("would reformat {name}");
            }
            Ok(text) => {
                if let Err(error) = write_file(path, &text) {
                    return fail(error);
                }
                println!("formatted {name}");
            }
            Err(flow_fmt::FormatError::Syntax(diagnostics)) => {
                failed = true;
                report_to_stderr(&db, &diagnostics, max_diagnostics);
                eprintln!("flowc: not formatting {name}: it has syntax errors");
            }
            Err(flow_fmt::FormatError::Internal(message)) => {
                failed = true;
                eprintln!("flowc: not formatting {name}: the formatter would change its meaning ({message}); please report this");
            }
        }
    }
    if mode == Mode::Check && unformatted > 0 {
        eprintln!("flowc: {unformatted} of {} files would be reformatted", files.len());
    }
    if failed || unformatted > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
