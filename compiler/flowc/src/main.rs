//! `flowc`: the Flow compiler's command line.
//!
//! This crate is the I/O boundary of the compiler: it reads the files and
//! the environment the pure core may not touch.
#![allow(clippy::disallowed_methods)]

use clap::{Parser, Subcommand, ValueEnum};
use codespan_reporting::term::termcolor::{ColorChoice, StandardStream};
use flow_check::{check_program, Loader};
use flow_diagnostics::{render, sort_diagnostics, Diagnostic, SourceDb};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(name = "flowc", version, about = "The Flow compiler: checks .flow workflows before they run.")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Check .flow files: syntax, names, types, properties.
    ///
    /// Exit status: 0 when no errors were found (warnings allowed), 1 when
    /// errors were found, 2 on a usage or I/O problem.
    Verify {
        /// The files to check; each is checked as its own program.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
        /// Colour in human output: auto (only on a terminal), always, never.
        #[arg(long, value_enum, default_value_t = Color::Auto)]
        color: Color,
    },
    /// Explain a diagnostic code, with a minimal example that triggers it.
    Explain {
        /// The code, e.g. E0101.
        #[arg(required_unless_present = "list")]
        code: Option<String>,
        /// List every code and its title, one per line.
        #[arg(long, conflicts_with = "code")]
        list: bool,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Human,
    Json,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Color {
    Auto,
    Always,
    Never,
}

/// Loads imported modules and schema files relative to the importing file.
struct FsLoader;

impl Loader for FsLoader {
    fn load(&self, from: &str, path: &str) -> Result<(String, String), String> {
        let base = Path::new(from).parent().unwrap_or(Path::new(""));
        let full = base.join(path);
        let text = std::fs::read_to_string(&full).map_err(|e| e.to_string())?;
        Ok((normalize(&full), text))
    }
}

/// A path as shown in diagnostics: `/` separators, no `./` segments.
fn normalize(path: &Path) -> String {
    let mut parts: Vec<String> = Vec::new();
    for component in path.components() {
        match component {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir if parts.last().is_some_and(|p| p != "..") => {
                parts.pop();
            }
            // The root becomes an empty first segment: `/` + `tmp` → `/tmp`.
            std::path::Component::RootDir => parts.push(String::new()),
            other => parts.push(other.as_os_str().to_string_lossy().into_owned()),
        }
    }
    parts.join("/")
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Verify { files, format, color } => verify(&files, format, color),
        Command::Explain { code, list } => explain(code.as_deref(), list),
    }
}

fn verify(files: &[PathBuf], format: Format, color: Color) -> ExitCode {
    let mut db = SourceDb::new();
    let mut diagnostics: Vec<Diagnostic> = Vec::new();
    let mut policies = Vec::new();
    for path in files {
        let text = match std::fs::read(path) {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(text) => text,
                Err(_) => {
                    eprintln!("flowc: {} is not UTF-8 text", path.display());
                    return ExitCode::from(2);
                }
            },
            Err(error) => {
                eprintln!("flowc: cannot read {}: {error}", path.display());
                return ExitCode::from(2);
            }
        };
        let root = db.add(normalize(path), text);
        let checked = check_program(&mut db, root, &FsLoader);
        policies.extend(policy_statuses(&checked.program));
        // Static verification reads the IR, which is whole only when
        // checking found no errors.
        if !checked.has_errors() {
            diagnostics.extend(flow_verify::verify(&checked.program));
        }
        diagnostics.extend(checked.diagnostics);
    }
    sort_diagnostics(&mut diagnostics);
    let errors = diagnostics.iter().filter(|d| d.is_error()).count();
    let stdout = std::io::stdout();
    let written = match format {
        Format::Json => {
            let document = render::to_json(&db, &diagnostics, policies);
            let mut out = stdout.lock();
            serde_json::to_writer_pretty(&mut out, &document).map_err(std::io::Error::other).and_then(|_| writeln!(out))
        }
        Format::Human => {
            let choice = match color {
                Color::Always => ColorChoice::Always,
                Color::Never => ColorChoice::Never,
                Color::Auto if stdout.is_terminal() && std::env::var_os("NO_COLOR").is_none() => ColorChoice::Auto,
                Color::Auto => ColorChoice::Never,
            };
            let mut out = StandardStream::stdout(choice);
            render::emit(&mut out, &db, &diagnostics).and_then(|_| {
                let files = if files.len() == 1 { "1 file".to_string() } else { format!("{} files", files.len()) };
                writeln!(out, "{}: {}", files, render::summary_line(&diagnostics))
            })
        }
    };
    if let Err(error) = written {
        if error.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("flowc: cannot write output: {error}");
            return ExitCode::from(2);
        }
    }
    if errors > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// Every policy of a checked program with its verification status. The
/// model checker is not implemented yet, so every status is `unknown`:
/// the policy is well-formed, and neither proven nor refuted.
fn policy_statuses(program: &flow_check::ir::Program) -> Vec<serde_json::Value> {
    let top = program.policies.iter().map(|p| (None, p));
    let nested = program.workflows.values().flat_map(|w| w.policies.iter().map(move |p| (Some(w.name.as_str()), p)));
    top.chain(nested)
        .map(|(workflow, policy)| {
            serde_json::json!({
                "name": policy.name,
                "workflow": workflow,
                "status": "unknown",
                "witness": null,
            })
        })
        .collect()
}

fn explain(code: Option<&str>, list: bool) -> ExitCode {
    if list {
        for info in flow_diagnostics::CODES {
            println!("{} {}", info.code.0, info.title);
        }
        return ExitCode::SUCCESS;
    }
    let code = code.unwrap_or_default();
    match flow_diagnostics::lookup(code) {
        Some(info) => {
            println!("{}: {}\n\n{}", info.code.0, info.title, info.explanation);
            ExitCode::SUCCESS
        }
        None => {
            eprintln!("flowc: unknown diagnostic code `{code}`; `flowc explain --list` lists them");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_removes_dot_segments() {
        assert_eq!(normalize(Path::new("./examples/a/../b/x.flow")), "examples/b/x.flow");
        assert_eq!(normalize(Path::new("/tmp/./x.flow")), "/tmp/x.flow");
    }
}
