//! `flowc`: the Flow compiler's command line.
//!
//! This crate is the I/O boundary of the compiler: it reads the files and
//! the environment the pure core may not touch.
#![allow(clippy::disallowed_methods)]

// The compiler allocates many small nodes, strings and maps: mimalloc checks
// large workflows markedly faster than glibc malloc.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{Parser, Subcommand, ValueEnum};
use codespan_reporting::term::termcolor::{BufferedStandardStream, ColorChoice};
use flow_diagnostics::{render, sort_diagnostics, Diagnostic, SourceDb};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(name = "flowc", version, about = "The Flow compiler: checks and verifies .flow workflows before they run.")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Check and verify .flow files: syntax, names, types, properties, then
    /// the static checks (graph, gates, contracts, permissions, budgets,
    /// state machines).
    ///
    /// Exit status: 0 when no errors were found (warnings allowed), 1 when
    /// errors were found, 2 on a usage or I/O problem.
    Verify {
        /// The files to check; each is checked as its own program (`-`: the
        /// standard input, named `<stdin>`).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
        /// Colour in human output: auto (only on a terminal), always, never.
        #[arg(long, value_enum, default_value_t = Color::Auto)]
        color: Color,
        /// Write the coverage obligations (agents, tool edges, restricted
        /// tool edges, delegation edges, gate outlets) to this JSON file.
        #[arg(long, value_name = "FILE.json")]
        obligations: Option<PathBuf>,
        /// Write witness runs as trace JSONL: one file per violated policy
        /// (`WORKFLOW.POLICY.jsonl`) and, under `cover/`, an example run per
        /// coverage obligation that can be covered; `index.json` lists them.
        #[arg(long, value_name = "DIR")]
        witness_dir: Option<PathBuf>,
        /// The model checker's bound on states per policy and workflow;
        /// beyond it a policy is reported as not decided (W1001).
        #[arg(long, value_name = "N", default_value_t = flow_verify::policies::DEFAULT_MAX_STATES)]
        max_states: usize,
        /// Show at most N diagnostics per file (errors first), then "and
        /// M more"; 0 shows all. The summary counts every one.
        #[arg(long, value_name = "N", default_value_t = flow_diagnostics::cap::DEFAULT_MAX_PER_FILE)]
        max_diagnostics: usize,
        /// With `--format sarif`: the directory `%SRCROOT%` stands for
        /// (files under it are named relative to it). Default: the
        /// repository around the working directory (the nearest directory
        /// holding `.git`), else the working directory.
        #[arg(long, value_name = "DIR")]
        sarif_root: Option<PathBuf>,
    },
    /// Build a verified plan: the checked, typed IR with source digests,
    /// the source's directory relative to the plan, and a digest of the
    /// plan's own content (`flow run` refuses a plan edited since).
    /// Refuses (exit 1) when the program has errors.
    Build {
        /// The flow to build (`-`: the standard input).
        file: PathBuf,
        /// Where to write the plan.
        #[arg(short, long, value_name = "PLAN")]
        output: PathBuf,
        /// Plan encoding.
        #[arg(long, value_enum, default_value_t = Emit::Json)]
        emit: Emit,
        /// Show at most N diagnostics per file (errors first), then "and
        /// M more"; 0 shows all. The summary counts every one.
        #[arg(long, value_name = "N", default_value_t = flow_diagnostics::cap::DEFAULT_MAX_PER_FILE)]
        max_diagnostics: usize,
    },
    /// Draw the workflows of a file: gates, guarded edges and loop bounds.
    Graph {
        /// The flow to draw (`-`: the standard input).
        file: PathBuf,
        #[arg(long, value_enum, default_value_t = GraphFormat::Dot)]
        format: GraphFormat,
        /// Show at most N diagnostics per file (errors first), then "and
        /// M more"; 0 shows all. The summary counts every one.
        #[arg(long, value_name = "N", default_value_t = flow_diagnostics::cap::DEFAULT_MAX_PER_FILE)]
        max_diagnostics: usize,
    },
    /// Format .flow files in place in the one canonical layout (comments
    /// kept). With --check, change nothing: list the files that would
    /// change and exit 1 if there are any. `-` formats the standard input
    /// to the standard output (what editors call).
    Fmt {
        /// The files to format (`-`: the standard input).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[arg(long, conflicts_with = "stdout")]
        check: bool,
        /// Print the formatted text instead of writing it back.
        #[arg(long)]
        stdout: bool,
        /// Show at most N diagnostics per file (errors first), then "and
        /// M more"; 0 shows all. The summary counts every one.
        #[arg(long, value_name = "N", default_value_t = flow_diagnostics::cap::DEFAULT_MAX_PER_FILE)]
        max_diagnostics: usize,
    },
    /// Print the JSON Schema of plans (published as stdlib/schemas/plan.schema.json).
    PlanSchema,
    /// Run the language server over stdin/stdout (for editors).
    ///
    /// Editor clients pass their transport: `--stdio` (what this server
    /// speaks) is accepted, as is `--clientProcessId=N`; `--socket`,
    /// `--pipe` and `--node-ipc` are refused with a clear error.
    Lsp {
        /// Serve over stdin/stdout (the default, and the only transport).
        #[arg(long)]
        stdio: bool,
        /// What else the client passes (`--clientProcessId=N`, …).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        client_args: Vec<String>,
    },
    /// Print a completion script for a shell, e.g.
    /// `flowc completions bash > ~/.local/share/bash-completion/completions/flowc`
    /// or `flowc completions zsh > ~/.zfunc/_flowc`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
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
    Sarif,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Emit {
    Json,
    Yaml,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum GraphFormat {
    Dot,
    Mermaid,
    /// Nodes and edges as JSON (the benchmark exchange format).
    Json,
    /// One self-contained HTML page (styles and script inlined, nothing
    /// fetched): every workflow drawn, click a node for its details.
    Html,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Color {
    Auto,
    Always,
    Never,
}

use flow_pipeline::Compiled;

mod fmt;
mod input;

fn main() -> ExitCode {
    flow_diagnostics::cli::quiet_on_closed_stdout();
    let cli = Cli::parse();
    match cli.command {
        Command::Verify { files, format, color, obligations, witness_dir, max_states, max_diagnostics, sarif_root } => {
            let outputs =
                Outputs { obligations: obligations.as_deref(), witness_dir: witness_dir.as_deref(), sarif_root: sarif_root.as_deref() };
            verify(&files, format, color, outputs, max_states, max_diagnostics)
        }
        Command::Build { file, output, emit, max_diagnostics } => build(&file, &output, emit, max_diagnostics),
        Command::Graph { file, format, max_diagnostics } => graph(&file, format, max_diagnostics),
        Command::Fmt { files, check, stdout, max_diagnostics } => {
            let mode = match (check, stdout) {
                (true, _) => fmt::Mode::Check,
                (false, true) => fmt::Mode::Stdout,
                (false, false) => fmt::Mode::InPlace,
            };
            fmt::fmt(&files, mode, max_diagnostics)
        }
        Command::PlanSchema => {
            println!("{}", serde_json::to_string_pretty(&flow_check::plan::plan_schema()).unwrap_or_default());
            ExitCode::SUCCESS
        }
        Command::Explain { code, list } => explain(code.as_deref(), list),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut <Cli as clap::CommandFactory>::command(), "flowc", &mut std::io::stdout());
            ExitCode::SUCCESS
        }
        Command::Lsp { stdio: _, client_args } => {
            match lsp_transport(&client_args).and_then(|()| flow_lsp::run_stdio().map_err(|e| e.to_string())) {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => {
                    eprintln!("flowc lsp: {error}");
                    ExitCode::from(2)
                }
            }
        }
    }
}

/// A usage or I/O problem: reported on stderr, exit status 2.
struct UsageError(String);

use input::compile;

fn fail(error: UsageError) -> ExitCode {
    eprintln!("flowc: {}", error.0);
    ExitCode::from(2)
}

fn color_choice(color: Color, terminal: bool) -> ColorChoice {
    match color {
        Color::Always => ColorChoice::Always,
        Color::Never => ColorChoice::Never,
        Color::Auto if terminal && std::env::var_os("NO_COLOR").is_none() => ColorChoice::Auto,
        Color::Auto => ColorChoice::Never,
    }
}

fn write_file(path: &Path, contents: &str) -> Result<(), UsageError> {
    std::fs::write(path, contents).map_err(|e| UsageError(format!("cannot write {}: {e}", path.display())))
}

/// The files `flowc verify` writes besides its report.
struct Outputs<'p> {
    obligations: Option<&'p Path>,
    witness_dir: Option<&'p Path>,
    sarif_root: Option<&'p Path>,
}

/// The reference, as SARIF's `informationUri` and rules' `helpUri` name it.
const REFERENCE_URL: &str = concat!(env!("CARGO_PKG_REPOSITORY"), "/blob/main/docs/reference.md");

/// How this run is described in a SARIF log: the working directory, the
/// source root (`--sarif-root`, else the repository around the working
/// directory, else the working directory) and the reference's address.
fn sarif_run(root: Option<&Path>, errors: Vec<String>) -> Result<flow_diagnostics::sarif::SarifRun, UsageError> {
    let cwd = std::env::current_dir()
        .and_then(|d| d.canonicalize())
        .map_err(|e| UsageError(format!("cannot read the working directory: {e}")))?;
    let root = match root {
        Some(root) => root.canonicalize().map_err(|e| UsageError(format!("--sarif-root {}: {e}", root.display())))?,
        None => cwd.ancestors().find(|dir| dir.join(".git").exists()).unwrap_or(&cwd).to_path_buf(),
    };
    Ok(flow_diagnostics::sarif::SarifRun {
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        cwd: Some(cwd.to_string_lossy().into_owned()),
        root: Some(root.to_string_lossy().into_owned()),
        docs: Some(REFERENCE_URL.to_string()),
        errors,
    })
}

/// Writes diagnostics to standard error through one buffer (at most `max`
/// per file, then "and N more").
fn report_to_stderr(db: &SourceDb, diagnostics: &[Diagnostic], max: usize) {
    let mut err = BufferedStandardStream::stderr(color_choice(Color::Auto, std::io::stderr().is_terminal()));
    let _ = render::emit_capped(&mut err, db, diagnostics, max).and_then(|_| err.flush());
}

fn verify(files: &[PathBuf], format: Format, color: Color, outputs: Outputs, max_states: usize, max_diagnostics: usize) -> ExitCode {
    let Outputs { obligations, witness_dir, sarif_root } = outputs;
    // With SARIF, a file that cannot be read becomes a notification in the
    // log (and exit 2), not an empty output.
    let mut unread: Vec<String> = Vec::new();
    if let Err(error) = input::at_most_one_stdin(files) {
        return fail(error);
    }
    if sarif_root.is_some() && format != Format::Sarif {
        return fail(UsageError("--sarif-root applies to --format sarif only".into()));
    }
    let mut db = SourceDb::new();
    let mut diagnostics: Vec<Diagnostic> = Vec::new();
    let mut policies = Vec::new();
    let mut budgets: Vec<(String, serde_json::Value)> = Vec::new();
    let mut all_obligations = Vec::new();
    for path in files {
        let compiled = match compile(&mut db, path, max_states) {
            Ok(compiled) => compiled,
            Err(error) if format == Format::Sarif => {
                eprintln!("flowc: {}", error.0);
                unread.push(error.0);
                continue;
            }
            Err(error) => return fail(error),
        };
        policies.extend(policy_statuses(&db, &compiled));
        budgets.extend(compiled.budgets.iter().map(|b| (flow_verify::budgets::describe(b), budget_json(&db, b))));
        if let Some(dir) = witness_dir {
            if let Err(error) = write_witnesses(dir, &compiled, max_states) {
                return fail(error);
            }
        }
        if !compiled.checked.has_errors() {
            all_obligations.extend(flow_verify::obligations::obligations(&compiled.checked.program));
        }
        diagnostics.extend(compiled.diagnostics);
    }
    sort_diagnostics(&mut diagnostics);
    if let Some(target) = obligations {
        let document = serde_json::json!({ "obligations": all_obligations });
        let text = serde_json::to_string_pretty(&document).unwrap_or_default() + "\n";
        if let Err(error) = write_file(target, &text) {
            return fail(error);
        }
    }
    let incomplete = !unread.is_empty();
    let errors = diagnostics.iter().filter(|d| d.is_error()).count();
    let stdout = std::io::stdout();
    let written = match format {
        Format::Json | Format::Sarif => {
            let document = if format == Format::Json {
                let budgets = budgets.into_iter().map(|(_, json)| json).collect();
                render::to_json_capped(&db, &diagnostics, policies, budgets, max_diagnostics)
            } else {
                let capped = flow_diagnostics::cap::cap_per_file(&diagnostics, max_diagnostics);
                let shown: Vec<Diagnostic> = capped.shown.into_iter().cloned().collect();
                match sarif_run(sarif_root, std::mem::take(&mut unread)) {
                    Ok(run) => flow_diagnostics::sarif::to_sarif_run(&db, &shown, &run),
                    Err(error) => return fail(error),
                }
            };
            let mut out = std::io::BufWriter::new(stdout.lock());
            serde_json::to_writer_pretty(&mut out, &document)
                .map_err(std::io::Error::other)
                .and_then(|_| writeln!(out))
                .and_then(|_| out.flush())
        }
        Format::Human => {
            let mut out = BufferedStandardStream::stdout(color_choice(color, stdout.is_terminal()));
            render::emit_capped(&mut out, &db, &diagnostics, max_diagnostics).and_then(|_| {
                for (line, _) in &budgets {
                    writeln!(out, "note: {line}")?;
                }
                let files = if files.len() == 1 { "1 file".to_string() } else { format!("{} files", files.len()) };
                writeln!(out, "{}: {}", files, render::summary_line(&diagnostics))?;
                out.flush()
            })
        }
    };
    if let Err(error) = written {
        if error.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("flowc: cannot write output: {error}");
            return ExitCode::from(2);
        }
    }
    if incomplete {
        return ExitCode::from(2);
    }
    if errors > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn build(path: &Path, output: &Path, emit: Emit, max_diagnostics: usize) -> ExitCode {
    let mut db = SourceDb::new();
    let compiled = match compile(&mut db, path, flow_verify::policies::DEFAULT_MAX_STATES) {
        Ok(compiled) => compiled,
        Err(error) => return fail(error),
    };
    let errors = compiled.diagnostics.iter().filter(|d| d.is_error()).count();
    if errors > 0 {
        report_to_stderr(&db, &compiled.diagnostics, max_diagnostics);
        eprintln!("flowc: not building {}: {}", path.display(), render::summary_line(&compiled.diagnostics));
        return ExitCode::from(1);
    }
    // Every file the program came from, root first.
    let files = compiled.sources(&db);
    // The plan records where its source is, relative to itself: `flow run
    // PLAN` finds the flow's relative paths (scripts, tool `cwd`, files),
    // its input and its cassette there, wherever it is run from.
    let plan = flow_check::plan::Plan::new(compiled.checked.program, &format!("flowc {}", env!("CARGO_PKG_VERSION")), &files)
        .located(source_dir_from(path, output));
    let text = match emit {
        Emit::Json => serde_json::to_string_pretty(&plan).map(|t| t + "\n").map_err(|e| e.to_string()),
        Emit::Yaml => serde_yaml::to_string(&plan).map_err(|e| e.to_string()),
    };
    let text = match text {
        Ok(text) => text,
        Err(error) => return fail(UsageError(format!("cannot encode the plan: {error}"))),
    };
    if let Err(error) = write_file(output, &text) {
        return fail(error);
    }
    let warnings = compiled.diagnostics.len();
    eprintln!(
        "flowc: wrote {} (plan {}, sources {}{})",
        output.display(),
        plan.content_digest,
        plan.source.digest,
        if warnings > 0 { format!(", {warnings} warnings") } else { String::new() }
    );
    ExitCode::SUCCESS
}

/// The directory of `source` relative to the directory `plan` is written
/// to (both resolved), `None` when either cannot be resolved (the write
/// then fails and says why).
fn source_dir_from(source: &Path, plan: &Path) -> Option<String> {
    let dir_of = |p: &Path| match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let source_dir = std::fs::canonicalize(dir_of(source)).ok()?;
    let plan_dir = std::fs::canonicalize(dir_of(plan)).ok()?;
    Some(flow_check::plan::relative_dir(&plan_dir, &source_dir))
}

fn graph(path: &Path, format: GraphFormat, max_diagnostics: usize) -> ExitCode {
    let mut db = SourceDb::new();
    let compiled = match compile(&mut db, path, flow_verify::policies::DEFAULT_MAX_STATES) {
        Ok(compiled) => compiled,
        Err(error) => return fail(error),
    };
    if compiled.checked.has_errors() {
        report_to_stderr(&db, &compiled.checked.diagnostics, max_diagnostics);
        eprintln!("flowc: cannot draw {}: it has errors", path.display());
        return ExitCode::from(1);
    }
    let text = match format {
        GraphFormat::Dot => flow_verify::render::dot(&compiled.checked.program),
        GraphFormat::Mermaid => flow_verify::render::mermaid(&compiled.checked.program),
        GraphFormat::Json => serde_json::to_string_pretty(&flow_verify::render::json(&compiled.checked.program)).unwrap_or_default() + "\n",
        GraphFormat::Html => flow_report::plan_page(&compiled.checked.program, &path.display().to_string()),
    };
    print!("{text}");
    ExitCode::SUCCESS
}

/// Every policy of a program with its verdict per workflow: `holds`,
/// `violated` (with the witness) or `unknown` (state bound exceeded). A
/// program with errors is not model checked: its policies are `unknown`.
fn policy_statuses(db: &SourceDb, compiled: &Compiled) -> Vec<serde_json::Value> {
    if compiled.checked.has_errors() {
        let program = &compiled.checked.program;
        let top = program.policies.iter().map(|p| (None, p));
        let nested = program.workflows.values().flat_map(|w| w.policies.iter().map(move |p| (Some(w.name.as_str()), p)));
        return top
            .chain(nested)
            .map(|(workflow, policy)| serde_json::json!({ "name": policy.name, "workflow": workflow, "status": "unknown", "states": 0, "witness": null }))
            .collect();
    }
    compiled
        .policies
        .iter()
        .map(|p| {
            serde_json::json!({
                "name": p.name,
                "workflow": p.workflow,
                "status": p.status,
                "states": p.states,
                "witness": p.witness.as_ref().map(|w| render::witness_json(db, w)),
            })
        })
        .collect()
}

/// One budget bound in the JSON shape of `flowc verify --format json`:
/// `{workflow, scope, budget, measure, limit, available, worst_case,
/// input_unbounded_turns, status, note, file, line}`.
fn budget_json(db: &SourceDb, b: &flow_verify::BudgetBound) -> serde_json::Value {
    let file = flow_diagnostics::FileId(b.loc.file);
    let (name, line) = if (b.loc.file as usize) < db.len() {
        (Some(db.name(file).to_string()), Some(db.line_col(file, b.loc.start).line))
    } else {
        (None, None)
    };
    // Whole numbers as integers (steps, tokens, milliseconds), money as is.
    let number = |v: f64| if v.fract() == 0.0 && v.abs() < 9e15 { serde_json::json!(v as i64) } else { serde_json::json!(v) };
    serde_json::json!({
        "workflow": b.workflow,
        "scope": b.scope,
        "budget": b.budget,
        "measure": b.measure,
        "limit": number(b.limit),
        "available": number(b.available),
        "worst_case": b.worst_case.map(number),
        "input_unbounded_turns": number(b.open_turns),
        "status": b.status,
        "note": b.note,
        "assumes": flow_verify::budgets::assumption(b),
        "file": name,
        "line": line,
    })
}

/// Writes the witnesses of one program under `dir`.
fn write_witnesses(dir: &Path, compiled: &Compiled, max_states: usize) -> Result<(), UsageError> {
    if compiled.checked.has_errors() {
        return Ok(());
    }
    let cover_dir = dir.join("cover");
    std::fs::create_dir_all(&cover_dir).map_err(|e| UsageError(format!("cannot create {}: {e}", cover_dir.display())))?;
    // Chained like every trace Flow writes (`flow trace check` holds them to it).
    let jsonl = |events: &[flow_trace::Event]| -> String { flow_trace::chain::to_jsonl(events).unwrap_or_default() };
    let mut index_path = dir.join("index.json");
    let mut index: serde_json::Value = std::fs::read_to_string(&index_path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_else(|| serde_json::json!({ "violations": [], "cover": [], "uncovered": [] }));
    for report in compiled.policies.iter().filter(|p| p.status == "violated") {
        let name = format!("{}.{}.jsonl", report.workflow, report.name);
        write_file(&dir.join(&name), &jsonl(&report.events))?;
        if let Some(list) = index["violations"].as_array_mut() {
            list.push(serde_json::json!({ "policy": report.name, "workflow": report.workflow, "file": name }));
        }
    }
    for (obligation, run) in flow_verify::policies::positive_witnesses(&compiled.checked.program, &compiled.digest, max_states) {
        match run {
            Some(events) => {
                let name = format!("cover/{}.{}.jsonl", obligation.workflow, obligation.id.replace([':', '>', '/'], "_"));
                write_file(&dir.join(&name), &jsonl(&events))?;
                if let Some(list) = index["cover"].as_array_mut() {
                    list.push(serde_json::json!({ "obligation": obligation.id, "workflow": obligation.workflow, "file": name }));
                }
            }
            None => {
                if let Some(list) = index["uncovered"].as_array_mut() {
                    list.push(serde_json::json!({ "obligation": obligation.id, "workflow": obligation.workflow }));
                }
            }
        }
    }
    index_path.set_extension("json");
    write_file(&index_path, &(serde_json::to_string_pretty(&index).unwrap_or_default() + "\n"))
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

/// The transport options an editor client may pass besides `--stdio`:
/// `--clientProcessId` is ignored; another transport is refused.
fn lsp_transport(args: &[String]) -> Result<(), String> {
    for arg in args {
        let name = arg.split('=').next().unwrap_or(arg);
        match name {
            "--stdio" => {}
            "--clientProcessId" => {}
            "--socket" | "--pipe" | "--node-ipc" | "--port" => {
                return Err(format!("`{name}`: this server speaks LSP over stdin/stdout only (`--stdio`)"));
            }
            // A process id after `--clientProcessId` given as its own word.
            _ if arg.chars().all(|c| c.is_ascii_digit()) => {}
            _ => return Err(format!("unexpected argument `{arg}` (`flowc lsp [--stdio]`)")),
        }
    }
    Ok(())
}
