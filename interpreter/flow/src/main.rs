//! `flow`: runs compiled Flow plans.
//!
//! This binary is the runtime's I/O boundary: it compiles (or loads) the
//! plan, chooses the run directory, wires the terminal (progress, prompts)
//! and maps outcomes to exit codes. Everything else is `flow-runtime`.
#![allow(clippy::disallowed_methods)]

// Traces are many small strings: mimalloc reads and checks them markedly faster than glibc malloc.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{Parser, Subcommand};
use codespan_reporting::term::termcolor::{BufferedStandardStream, ColorChoice};
use flow_check::plan::Plan;
use flow_diagnostics::{render, sort_diagnostics, SourceDb};
use flow_runtime::clock::{Clock, FakeClock, SystemClock};
use flow_runtime::driver::{self, exit, Asker, Options, Outcome, Proposal, ResumeMode, RunError};
use flow_runtime::engine::RunStatus;
use flow_runtime::exec::ReplayMode;
use flow_runtime::journal::Journal;
use flow_runtime::keys::CommandKey;
use flow_runtime::proto::{HumanAnswer, HumanRequest, Response};
use flow_trace::{Body, Event};
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

mod db;
mod otel;
mod project;
mod report;
mod signing_keys;
mod witness;

#[derive(Parser, Debug)]
#[command(
    name = "flow",
    version,
    about = "Runs Flow workflows: the control plane decides and records, models, tools and humans propose.",
    after_help = "Exit status: 0 success, 1 run failed, 2 usage or I/O error, 3 budget exhausted, \
4 awaiting a human decision (`flow approve`, then `flow resume`), 5 partial result, \
6 plan refused (`flow run PLAN.json`: edited since it was built, or failing the static checks), \
7 stopped by SIGTERM or SIGHUP (every child process stopped; `flow resume` continues the run). \
SIGINT (Ctrl-C) cancels the run."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a .flow file (checked and verified first) or a plan built by `flowc build`.
    ///
    /// The run directory holds the journal, `trace.jsonl` and the
    /// artifacts; its path is printed at start. When a cassette named
    /// `NAME.cassette.yaml` sits next to `NAME.flow`, the requests it
    /// records are replayed from it and the others run live (examples ship
    /// one, so they run offline); `--no-cassette` turns that off.
    ///
    /// A plan runs as its source would: relative paths, `NAME.input.json`
    /// and `NAME.cassette.yaml` are found in the source's directory, which
    /// the plan records relative to itself (`--base-dir` overrides it). A
    /// plan whose content does not match its digest, or which fails the
    /// static checks again, is refused (exit 6).
    Run {
        /// The .flow file, or a plan from `flowc build` (.json, or .yaml with `--emit yaml`).
        file: PathBuf,
        /// The run directory (default: a fresh one under .flow/runs/). A
        /// directory that holds anything is refused.
        #[arg(long)]
        run_dir: Option<PathBuf>,
        /// When `--run-dir` holds a run, move it aside to `DIR.old-RUN_ID`
        /// and start afresh (a run being driven is never moved).
        #[arg(long, requires = "run_dir")]
        force_new: bool,
        /// The run id (default: generated).
        #[arg(long)]
        run_id: Option<String>,
        /// The workflow to run (default: the first one).
        #[arg(long)]
        workflow: Option<String>,
        #[command(flatten)]
        sources: Sources,
        /// Record every model, tool, probe and human result to this cassette.
        #[arg(long, conflicts_with = "replay")]
        record: Option<PathBuf>,
        /// Make a witness of `flowc verify --witness-dir` into a run: search
        /// for model, tool and human answers (and their order) under which
        /// the engine makes the witness's policy steps, write the run's
        /// trace.jsonl, artifacts/ and answers.json to the run directory,
        /// and compare trace check's policy verdicts on the witness and the
        /// run. Exit 0 when they agree, 1 when no run makes the witness.
        #[arg(long, value_name = "W.jsonl", conflicts_with_all = ["record", "replay", "provider_url"])]
        witness: Option<PathBuf>,
        /// With --witness: how many engine runs the search may try.
        #[arg(long, default_value_t = flow_runtime::witness::DEFAULT_TRIES, requires = "witness")]
        tries: usize,
        #[command(flatten)]
        common: Common,
    },
    /// Continue a run that stopped (crash, kill, or a pause for a decision).
    Resume {
        /// A run directory or run id.
        run: String,
        /// A shared PostgreSQL database holding the run (default: `FLOW_DB`).
        #[arg(long, env = "FLOW_DB", value_name = "URL")]
        db: Option<String>,
        #[command(flatten)]
        common: Common,
    },
    /// Record a human decision for a paused run (then `flow resume`).
    Approve {
        /// A run directory or run id.
        run: String,
        /// The gate, node or subject waiting (see `flow status`).
        subject: String,
        /// approve, revise, replan or reject.
        #[arg(long)]
        decision: String,
        /// The principal deciding (default: the first allowed).
        #[arg(long)]
        by: Option<String>,
        #[arg(long)]
        comment: Option<String>,
        /// On a reconciliation (`reconcile.ATTEMPT`) with `--decision
        /// approve`: the call did happen, and this is its output (JSON, or
        /// `@FILE`), held to the tool's output type; the attempt goes on
        /// with it. Without it, `approve` runs the call again and `reject`
        /// records that it did not happen (a failed call).
        #[arg(long, value_name = "JSON")]
        output: Option<String>,
        /// A shared PostgreSQL database holding the run (default:
        /// `FLOW_DB`): the decision is recorded and the run queued for
        /// whichever worker claims it.
        #[arg(long, env = "FLOW_DB", value_name = "URL")]
        db: Option<String>,
    },
    /// Send a run (finished or not) to an OpenTelemetry receiver as
    /// spans, from its trace: the same run sent twice gives the same span
    /// ids. Exit 0 when the receiver accepted every span, 1 otherwise.
    Export {
        /// A run directory or run id.
        run: String,
        /// The OTLP receiver, e.g. `http://127.0.0.1:4318` (`/v1/traces` is
        /// added); default: `OTEL_EXPORTER_OTLP_ENDPOINT`.
        #[arg(long, value_name = "URL")]
        otlp: Option<String>,
        /// A shared PostgreSQL database holding the run (default: `FLOW_DB`).
        #[arg(long, env = "FLOW_DB", value_name = "URL")]
        db: Option<String>,
        /// With `--db`: write the run as a run directory here (journal,
        /// trace.jsonl, artifacts) instead of sending spans.
        #[arg(long, value_name = "DIR", conflicts_with = "otlp")]
        out: Option<PathBuf>,
    },
    /// Draw a run on its plan as one self-contained HTML page: the path it
    /// took (nodes by status, edges taken, gates with their evaluators,
    /// loops with their rounds), a timeline of attempts, calls and waits
    /// for humans, budget use over time with the zones, the policies'
    /// verdicts; click a node for its attempts, artifacts and events.
    Report {
        /// A run directory or run id.
        run: String,
        /// Where to write the page (`-`: the standard output); default:
        /// `report.html` in the run directory.
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
        /// A shared PostgreSQL database holding the run (default: `FLOW_DB`).
        #[arg(long, env = "FLOW_DB", value_name = "URL")]
        db: Option<String>,
    },
    /// Where a run stands: status, nodes, budget, what it waits for.
    Status {
        /// A run directory or run id.
        run: String,
        /// `json`: one document (`version`, `state`, `status`, `reason`,
        /// `nodes_completed`, `used`, `pending_decisions`, …).
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
        /// A shared PostgreSQL database holding the run (default: `FLOW_DB`).
        #[arg(long, env = "FLOW_DB", value_name = "URL")]
        db: Option<String>,
    },
    /// A readable timeline of a run.
    Show {
        /// A run directory or run id.
        run: String,
        /// `json`: every event as the trace records it, each with the line
        /// the timeline shows (`summary`).
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
        /// A shared PostgreSQL database holding the run (default: `FLOW_DB`).
        #[arg(long, env = "FLOW_DB", value_name = "URL")]
        db: Option<String>,
    },
    /// Re-derive a run's state from its journal alone, checking it against the plan.
    Replay {
        /// A run directory or run id.
        run: String,
        /// A shared PostgreSQL database holding the run (default: `FLOW_DB`).
        #[arg(long, env = "FLOW_DB", value_name = "URL")]
        db: Option<String>,
    },
    /// Record a run in a shared PostgreSQL database, queued for `flow
    /// worker`s: the plan, the input and the cassette found as `flow run`
    /// finds them. Prints the run id as the last line of its output.
    Submit {
        /// The .flow file, or a plan from `flowc build`.
        file: PathBuf,
        /// The run id (default: generated).
        #[arg(long)]
        run_id: Option<String>,
        /// The workflow to run (default: the first one).
        #[arg(long)]
        workflow: Option<String>,
        #[command(flatten)]
        sources: Sources,
        /// The database (default: `FLOW_DB`).
        #[arg(long, env = "FLOW_DB", value_name = "URL")]
        db: Option<String>,
        /// Print only the run id.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Claim runnable runs from a shared PostgreSQL database and drive
    /// them: queued runs, runs a decision made runnable again, and runs
    /// whose worker's lease ran out (taken over). Each claim is a lease
    /// with a fencing epoch: a worker that lost its lease cannot write.
    /// SIGINT or SIGTERM ends this worker's leases at once (others take
    /// its runs over) and exits.
    Worker {
        /// The database (default: `FLOW_DB`).
        #[arg(long, env = "FLOW_DB", value_name = "URL")]
        db: Option<String>,
        /// Runs driven at once.
        #[arg(long, default_value_t = 4)]
        concurrency: usize,
        /// Exit once no run is queued or running in the database.
        #[arg(long)]
        exit_when_idle: bool,
        /// How long a claim holds without a heartbeat (heartbeats come
        /// every third of it), in milliseconds.
        #[arg(long, default_value_t = 30_000, value_name = "MS")]
        lease_ms: u64,
        /// How often to look for work when no notification comes, in milliseconds.
        #[arg(long, default_value_t = 1000, value_name = "MS")]
        poll_ms: u64,
        /// This worker's name in leases (default: HOST-PID).
        #[arg(long)]
        name: Option<String>,
        /// A deterministic clock for every run (tests).
        #[arg(long)]
        fake_clock: bool,
        /// No line per claim and release.
        #[arg(long, short)]
        quiet: bool,
    },
    /// List the runs in a shared PostgreSQL database, newest first.
    Runs {
        /// The database (default: `FLOW_DB`).
        #[arg(long, env = "FLOW_DB", value_name = "URL")]
        db: Option<String>,
        /// Only runs in this state: queued, running, paused, finished or error.
        #[arg(long, value_parser = ["queued", "running", "paused", "finished", "error"])]
        status: Option<String>,
        /// Only runs of this workflow.
        #[arg(long)]
        workflow: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: i64,
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
    },
    /// The shared PostgreSQL database: `flow db migrate` creates or
    /// upgrades its schema.
    Db {
        #[command(subcommand)]
        command: DbCommand,
    },
    /// Hold a recorded trace against its plan (`flow trace check`), or explain a deviation code or a trace word.
    Trace {
        #[command(subcommand)]
        command: TraceCommand,
    },
    /// Render a declared projection of a recorded run: its minutes, a
    /// report (Markdown or JSON, as the projection says).
    ///
    /// A projection is a pure function of the run's events and artifacts
    /// (`projection NAME { workflow: W, value: … }`): the same run always
    /// gives the same text. Without NAME, lists the plan's projections.
    /// Exit status: 0, 1 when the value cannot be made from this run, 2 on
    /// a usage or I/O error.
    Project {
        /// A run directory (its trace.jsonl and artifacts/) or a trace file beside its artifacts/.
        run: PathBuf,
        /// The projection to render (omit to list them).
        name: Option<String>,
        /// The plan the run was made from: a .flow file or a plan from `flowc build`.
        #[arg(long)]
        plan: PathBuf,
        /// Write the rendering to this file instead of stdout.
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
        /// A shared PostgreSQL database holding the run (default:
        /// `FLOW_DB`): RUN is then a run id.
        #[arg(long, env = "FLOW_DB", value_name = "URL")]
        db: Option<String>,
    },
    /// Make signing keys for `flow run --sign` and `flow trace check --verify-key`.
    Key {
        #[command(subcommand)]
        command: KeyCommand,
    },
    /// Print a completion script for a shell, e.g.
    /// `flow completions bash > ~/.local/share/bash-completion/completions/flow`
    /// or `flow completions zsh > ~/.zfunc/_flow`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Measure how much of a plan's coverage obligations a set of traces exercises.
    ///
    /// The obligations are the verifier's: every reachable agent, every
    /// allowed tool edge (agent calls tool), every restricted tool edge
    /// (a call probed and refused), every delegation edge and every gate
    /// outlet (outcome or decision). A trace covers the obligations of the
    /// workflow it ran. Prints a percentage per kind and the uncovered
    /// obligations. Exit status: 0, or 2 on a usage or I/O error.
    Coverage {
        /// Traces: `trace.jsonl` files or run directories (one or more).
        #[arg(required = true)]
        traces: Vec<PathBuf>,
        /// The plan: a .flow file (checked and verified) or a plan from `flowc build` (.json or .yaml).
        #[arg(long)]
        plan: PathBuf,
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
    },
}

#[derive(Subcommand, Debug)]
enum TraceCommand {
    /// Check a trace against a plan: schema, seq, node order, edges, gates,
    /// deciders, handoffs, budgets, policies and the termination reason.
    ///
    /// Every deviation has a stable code (T001…; `flow trace explain`
    /// lists them). Given a run directory, handoff payloads and delegation
    /// inputs are also checked against their types from the run's
    /// artifacts/. Exit status: 0 conformant, 1 deviations found, 2 usage
    /// or I/O error.
    Check {
        /// A `trace.jsonl` file or a run directory (then its trace.jsonl and artifacts/).
        trace: PathBuf,
        /// The plan: a .flow file (checked and verified) or a plan from `flowc build` (.json or .yaml).
        #[arg(long)]
        plan: PathBuf,
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
        /// Verify the trace's signature with this ed25519 public key (PEM):
        /// it must cover the trace's last event and the head of its hash
        /// chain (T081). Without it the chain is still checked (T080), but
        /// events cut from the end, or a chain recomputed after an edit,
        /// cannot be told.
        #[arg(long, value_name = "KEY.pub")]
        verify_key: Option<PathBuf>,
        /// The signature file (default: `trace.sig` beside the trace).
        #[arg(long, value_name = "FILE", requires = "verify_key")]
        signature: Option<PathBuf>,
        /// A shared PostgreSQL database holding the run (default:
        /// `FLOW_DB`): TRACE is then a run id.
        #[arg(long, env = "FLOW_DB", value_name = "URL")]
        db: Option<String>,
    },
    /// Explain a deviation code of `flow trace check`, or a word of the
    /// trace vocabulary (an error code, an engine termination reason, a
    /// decision, a handler event, a zone, …); every registry without one.
    Explain {
        /// A code such as T020, or a word such as `invalid_output`.
        code: Option<String>,
    },
}

/// Where a run's files are found and whether a plan is checked again
/// (`flow run`, `flow submit`).
#[derive(clap::Args, Debug)]
struct Sources {
    /// The input as a JSON file (default: NAME.input.json next to NAME.flow, if present).
    #[arg(long)]
    input: Option<PathBuf>,
    /// Where the flow's relative paths resolve (scripts, tool `cwd`,
    /// files) and NAME.input.json and NAME.cassette.yaml are looked
    /// for (default: the .flow file's directory; for a plan, its
    /// source's directory as the plan records it).
    #[arg(long, value_name = "DIR")]
    base_dir: Option<PathBuf>,
    /// Take a plan without running the static checks on it again (its
    /// digest is still checked): to watch the online policy monitors
    /// on a program the model checker refutes. A .flow file is always
    /// verified.
    #[arg(long)]
    unverified: bool,
    /// Replay every result from this cassette; a request not in it fails the run.
    #[arg(long)]
    replay: Option<PathBuf>,
    /// Do not use NAME.cassette.yaml next to the flow.
    #[arg(long)]
    no_cassette: bool,
    /// Point a provider at another endpoint: NAME=BASE_URL (repeatable),
    /// e.g. `--provider-url local=http://127.0.0.1:8080/v1`.
    #[arg(long, value_name = "NAME=URL")]
    provider_url: Vec<String>,
}

#[derive(Subcommand, Debug)]
enum DbCommand {
    /// Apply the schema migrations the database lacks (safe to run again,
    /// and from several processes at once).
    Migrate {
        /// The database (default: `FLOW_DB`).
        #[arg(long, env = "FLOW_DB", value_name = "URL")]
        db: Option<String>,
    },
}

#[derive(Subcommand, Debug)]
enum KeyCommand {
    /// Generate an ed25519 key pair: the private key (PEM, PKCS#8,
    /// readable by its owner only) and `OUT.pub` (PEM public key).
    Generate {
        /// Where to write the private key.
        #[arg(long, value_name = "KEY.pem")]
        out: PathBuf,
        /// Overwrite existing files.
        #[arg(long)]
        force: bool,
    },
}

/// Output format of `flow trace check`, `flow coverage`, `flow status` and `flow show`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    /// Readable text.
    Human,
    /// One stable JSON document.
    Json,
}

#[derive(clap::Args, Debug)]
struct Common {
    /// A deterministic clock (tests): fixed start, 1 ms per reading, no sleeping.
    #[arg(long)]
    fake_clock: bool,
    /// Journal writes survive power loss (synchronous=FULL), not only crashes.
    #[arg(long)]
    durable: bool,
    /// No progress display or logs.
    #[arg(long, short)]
    quiet: bool,
    /// Never prompt on a terminal: pause for decisions instead.
    #[arg(long)]
    no_prompt: bool,
    /// Sign the trace's head with this ed25519 private key (PEM, as
    /// `flow key generate` or `openssl genpkey -algorithm ed25519` writes)
    /// whenever this process stops driving the run: `trace.sig` in the run
    /// directory, checked by `flow trace check --verify-key`. A signed run
    /// is resumed with `--sign` too.
    #[arg(long, value_name = "KEY.pem")]
    sign: Option<PathBuf>,
    /// Export the run as OpenTelemetry spans (OTLP over HTTP/protobuf) to
    /// this receiver as it goes, e.g. `http://127.0.0.1:4318` (`/v1/traces`
    /// is added). Without it, `OTEL_EXPORTER_OTLP_ENDPOINT` (or
    /// `…_TRACES_ENDPOINT`) turns the export on; `OTEL_SDK_DISABLED=true`
    /// turns it off. A receiver that is down is a warning, never a failure.
    #[arg(long, value_name = "URL")]
    otlp: Option<String>,
}

fn main() -> ExitCode {
    flow_diagnostics::cli::quiet_on_closed_stdout();
    if std::env::var_os("FLOW_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_env("FLOW_LOG"))
            .with_writer(std::io::stderr)
            .try_init();
    }
    // An empty FLOW_DB names no database (clap would pass it on as one).
    if std::env::var_os("FLOW_DB").is_some_and(|v| v.is_empty()) {
        std::env::remove_var("FLOW_DB");
    }
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(r) => r,
        Err(e) => return usage(format!("cannot start the runtime: {e}")),
    };
    let code = runtime.block_on(async {
        let code = dispatch(cli).await;
        // What was started (MCP servers, commands torn down) is gone before
        // `flow` is.
        flow_runtime::exec::groups::stop_all().await;
        code
    });
    ExitCode::from(code)
}

fn usage(message: String) -> ExitCode {
    eprintln!("flow: {message}");
    ExitCode::from(exit::USAGE)
}

fn fail(error: RunError) -> u8 {
    eprintln!("flow: {error}");
    match error {
        RunError::Usage(_) | RunError::Storage(_) => exit::USAGE,
        RunError::ReplayMiss(_) | RunError::Diverged(_) | RunError::Fenced(_) => exit::FAILED,
    }
}

async fn dispatch(cli: Cli) -> u8 {
    match cli.command {
        Command::Run {
            file,
            run_dir,
            run_id,
            workflow,
            sources: Sources { input, base_dir, .. },
            witness: Some(witness_file),
            tries,
            common,
            ..
        } => witness::run(witness::WitnessRun {
            file: &file,
            witness: &witness_file,
            run_dir,
            run_id: run_id.unwrap_or_else(fresh_run_id),
            workflow,
            input,
            base_dir,
            tries,
            quiet: common.quiet,
        }),
        Command::Run { file, run_dir, run_id, workflow, sources, record, witness: None, force_new, common, .. } => {
            run(file, RunTarget { run_dir, run_id, workflow, record, force_new }, &sources, common).await
        }
        Command::Resume { run, common, db: Some(url) } => db::resume(&url, &run, common.fake_clock, common.quiet).await,
        Command::Resume { run, common, db: None } => {
            let dir = match run_dir_of(&run) {
                Ok(d) => d,
                Err(e) => return fail(e),
            };
            eprintln!("flow: resuming {}", dir.display());
            let mut opts = match options(dir, &common, None) {
                Ok(opts) => opts,
                Err(e) => return fail(e),
            };
            let exporter = match otel::attach(&mut opts, common.otlp.as_deref(), Default::default(), common.quiet) {
                Ok(exporter) => exporter,
                Err(e) => return fail(RunError::Usage(e)),
            };
            let result = driver::resume(opts, ResumeMode::Continue).await;
            otel::finish(exporter, common.quiet).await;
            report(result, common.quiet)
        }
        Command::Approve { run, subject, decision, by, comment, output, db: Some(url) } => {
            db::approve(&url, &run, Decision { subject: &subject, decision: &decision, by, comment, output })
        }
        Command::Approve { run, subject, decision, by, comment, output, db: None } => {
            approve(&run, &subject, &decision, by, comment, output)
        }
        Command::Export { run, db: Some(url), out: Some(out), .. } => db::export_dir(&url, &run, &out),
        Command::Export { out: Some(_), db: None, .. } => {
            fail(RunError::Usage("--out writes a run kept in a database: give --db URL (or FLOW_DB)".into()))
        }
        Command::Export { run, otlp, db, out: None } => {
            let (_scratch, run) = match in_scratch(db, run) {
                Ok(x) => x,
                Err(e) => return fail(e),
            };
            let dir = match run_dir_of(&run) {
                Ok(d) => d,
                Err(e) => return fail(e),
            };
            match otel::export(&dir, otlp.as_deref()).await {
                Ok(report) if report.error.is_none() && report.dropped == 0 => {
                    eprintln!("flow: exported {} spans", report.exported);
                    exit::SUCCESS
                }
                Ok(report) => {
                    let why = report.error.unwrap_or_else(|| "spans were dropped".into());
                    eprintln!("flow: exported {} spans, {} not: {why}", report.exported, report.dropped);
                    exit::FAILED
                }
                Err(e) => fail(RunError::Usage(e)),
            }
        }
        Command::Report { run, output, db } => {
            // From a database, the page goes to RUN.report.html here by default.
            let output = output.or_else(|| db.as_ref().map(|_| PathBuf::from(format!("{run}.report.html"))));
            match in_scratch(db, run) {
                Ok((_scratch, run)) => report::html(&run, output.as_deref()),
                Err(e) => fail(e),
            }
        }
        Command::Status { run, format, db } => match in_scratch(db, run) {
            Ok((_scratch, run)) => report::status(&run, format),
            Err(e) => fail(e),
        },
        Command::Show { run, format, db } => match in_scratch(db, run) {
            Ok((_scratch, run)) => report::show(&run, format),
            Err(e) => fail(e),
        },
        Command::Trace { command: TraceCommand::Check { trace, plan, format, verify_key, signature, db } } => {
            match in_scratch(db, trace.display().to_string()) {
                Ok((_scratch, run)) => trace_check(Path::new(&run), &plan, format, verify_key.as_deref(), signature.as_deref()),
                Err(e) => fail(e),
            }
        }
        Command::Project { run, name, plan, output, db } => match in_scratch(db, run.display().to_string()) {
            Ok((_scratch, run)) => project::project(Path::new(&run), name.as_deref(), &plan, output.as_deref()),
            Err(e) => fail(e),
        },
        Command::Submit { file, run_id, workflow, sources, db, quiet } => match db::url(db) {
            Ok(url) => db::submit(&url, &file, run_id, workflow, &sources, quiet),
            Err(e) => fail(e),
        },
        Command::Worker { db, concurrency, exit_when_idle, lease_ms, poll_ms, name, fake_clock, quiet } => match db::url(db) {
            Ok(url) => {
                let flags = db::WorkerFlags { concurrency, exit_when_idle, lease_ms, poll_ms, fake_clock, name, quiet };
                db::work(&url, flags).await
            }
            Err(e) => fail(e),
        },
        Command::Runs { db, status, workflow, limit, format } => match db::url(db) {
            Ok(url) => db::runs(&url, status.as_deref(), workflow.as_deref(), limit, format),
            Err(e) => fail(e),
        },
        Command::Db { command: DbCommand::Migrate { db } } => match db::url(db) {
            Ok(url) => db::migrate(&url),
            Err(e) => fail(e),
        },
        Command::Trace { command: TraceCommand::Explain { code } } => trace_explain(code.as_deref()),
        Command::Key { command: KeyCommand::Generate { out, force } } => signing_keys::generate(&out, force),
        Command::Coverage { traces, plan, format } => coverage(&traces, &plan, format),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut <Cli as clap::CommandFactory>::command(), "flow", &mut std::io::stdout());
            exit::SUCCESS
        }
        Command::Replay { run, db } => {
            let (_scratch, run) = match in_scratch(db, run) {
                Ok(x) => x,
                Err(e) => return fail(e),
            };
            let dir = match run_dir_of(&run) {
                Ok(d) => d,
                Err(e) => return fail(e),
            };
            let common = Common { fake_clock: true, durable: false, quiet: true, no_prompt: true, sign: None, otlp: None };
            let opts = match options(dir, &common, None) {
                Ok(opts) => opts,
                Err(e) => return fail(e),
            };
            match driver::resume(opts, ResumeMode::DeriveOnly).await {
                Ok(outcome) => {
                    println!("replayed {} events: the journal is consistent with the plan", outcome.events);
                    println!("state: {}", describe(&outcome.status));
                    for (node, output) in &outcome.outputs {
                        println!("  {node} = {}", short(output, 160));
                    }
                    exit::SUCCESS
                }
                Err(e) => fail(e),
            }
        }
    }
}

/// A run to read: as given, or — with a database — exported into a
/// scratch run directory (removed when the guard drops) and named by its path.
fn in_scratch(db: Option<String>, run: String) -> Result<(Option<tempfile::TempDir>, String), RunError> {
    match db {
        None => Ok((None, run)),
        Some(url) => {
            let scratch = db::scratch(&url, &run)?;
            let path = scratch.path().join(&run).display().to_string();
            Ok((Some(scratch), path))
        }
    }
}

fn short(value: &serde_json::Value, max: usize) -> String {
    let text = value.to_string();
    if text.chars().count() > max {
        format!("{}…", text.chars().take(max).collect::<String>())
    } else {
        text
    }
}

fn describe(status: &RunStatus) -> String {
    match status {
        RunStatus::Running => "running (stopped mid-way: `flow resume` continues it)".into(),
        RunStatus::Paused { reason, waiting_on } => format!("paused, {reason}: {waiting_on}"),
        RunStatus::Terminated { reason, status, .. } => format!("terminated: {status} ({reason})"),
    }
}

/// A run directory, or a run id under .flow/runs/.
fn run_dir_of(run: &str) -> Result<PathBuf, RunError> {
    let path = PathBuf::from(run);
    if path.join("journal.sqlite").exists() {
        return Ok(path);
    }
    let under = Path::new(".flow/runs").join(run);
    if under.join("journal.sqlite").exists() {
        return Ok(under);
    }
    Err(RunError::Usage(format!("no run `{run}` (neither a run directory nor a run id under .flow/runs/)")))
}

fn fresh_run_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let ms = SystemClock.now_ms();
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(ms);
    h.write_u32(std::process::id());
    let stamp = flow_runtime::clock::rfc3339(ms).replace([':', '-'], "").replace('T', "-");
    format!("run-{}-{:06x}", &stamp[..15], h.finish() & 0xff_ffff)
}

struct TerminalAsker;

impl Asker for TerminalAsker {
    fn ask(&mut self, request: &HumanRequest) -> Option<HumanAnswer> {
        let mut err = std::io::stderr();
        let _ = writeln!(err, "\n── decision needed: {}", request.subject);
        if let Some(prompt) = &request.prompt {
            let _ = writeln!(err, "   {prompt}");
        }
        if !request.principals.is_empty() {
            let _ = writeln!(err, "   deciders: {}", request.principals.join(", "));
        }
        let stdin = std::io::stdin();
        loop {
            let _ = write!(err, "   decision [{}] (empty: pause the run): ", flow_trace::join(&request.decisions, "/"));
            let _ = err.flush();
            let mut line = String::new();
            if stdin.lock().read_line(&mut line).ok()? == 0 {
                return None;
            }
            let answer = line.trim();
            if answer.is_empty() {
                return None;
            }
            if let Some(decision) = request.decisions.iter().find(|d| d.as_str() == answer) {
                let by = request.principals.first().cloned().unwrap_or_else(|| "operator".into());
                return Some(HumanAnswer { decision: *decision, by, comment: None, output: None });
            }
            let _ = writeln!(err, "   `{answer}` is not one of: {}", flow_trace::join(&request.decisions, ", "));
        }
    }
}

/// Progress on a terminal; one log line per notable event otherwise. MCP
/// servers' reports on calls in progress are shown the same way.
fn observer(quiet: bool) -> (Option<driver::Observer>, Option<flow_runtime::mcp::ProgressSink>) {
    if quiet {
        return (None, None);
    }
    if std::io::stderr().is_terminal() {
        let bar = indicatif::ProgressBar::new_spinner();
        bar.enable_steady_tick(std::time::Duration::from_millis(120));
        let shown = bar.clone();
        let progress: flow_runtime::mcp::ProgressSink = std::sync::Arc::new(move |p| shown.set_message(p.to_string()));
        let mut done = 0u32;
        let mut running: Vec<String> = Vec::new();
        let mut tokens = 0u64;
        let observe: driver::Observer = Box::new(move |event: &Event| {
            match &event.body {
                Body::NodeStarted { node, .. } => running.push(node.clone()),
                Body::NodeCompleted { node, .. } | Body::NodeFailed { node, .. } => {
                    running.retain(|n| n != node);
                    done += 1;
                }
                Body::AgentTurn { usage, .. } => tokens += usage.tokens,
                Body::GateRecorded { gate, outcome, .. } => bar.println(format!("  gate {gate}: {outcome}")),
                Body::PolicyViolated { policy, response, .. } => bar.println(format!("  policy {policy} violated ({response})")),
                Body::RunTerminated { .. } | Body::RunPaused { .. } => bar.finish_and_clear(),
                _ => {}
            }
            bar.set_message(format!("{done} nodes done · running: {} · {tokens} tokens · event {}", running.join(", "), event.seq));
        });
        return (Some(observe), Some(progress));
    }
    let progress: flow_runtime::mcp::ProgressSink = std::sync::Arc::new(|p| eprintln!("flow: {p}"));
    let observe: driver::Observer = Box::new(|event: &Event| {
        let line = match &event.body {
            Body::NodeCompleted { node, status, .. } => format!("node {node} {status}"),
            Body::NodeFailed { node, error_code, message, .. } => format!("node {node} failed ({error_code}): {message}"),
            Body::GateRecorded { gate, outcome, reason, .. } => {
                format!("gate {gate}: {outcome}{}", reason.as_ref().map(|r| format!(" ({r})")).unwrap_or_default())
            }
            Body::DecisionRequested { subject, decisions, contacts, .. } => {
                let reach = if contacts.is_empty() { String::new() } else { format!(" (reach {})", contacts.join(", ")) };
                format!("decision needed on {subject}: {}{reach}", flow_trace::join(decisions, "/"))
            }
            Body::DecisionApplied { subject, decision, by, .. } => format!("decision on {subject}: {decision} by {by}"),
            Body::BudgetZoneChanged { scope, to, .. } => format!("budget {scope}: entered zone {to}"),
            Body::BudgetExhausted { scope, limit, .. } => format!("budget {scope}: {limit} exhausted"),
            Body::ReconciliationRequired { attempt_id, tool, .. } => format!("reconciliation needed: {tool} in {attempt_id}"),
            Body::PolicyViolated { policy, response, message, .. } => format!("policy {policy} violated ({response}): {message}"),
            _ => return,
        };
        eprintln!("flow: [{}] {line}", event.seq);
    });
    (Some(observe), Some(progress))
}

fn options(run_dir: PathBuf, common: &Common, replay: Option<(PathBuf, ReplayMode)>) -> Result<Options, RunError> {
    let clock: Arc<dyn Clock> = if common.fake_clock { Arc::new(FakeClock::new(FakeClock::DEFAULT_START)) } else { Arc::new(SystemClock) };
    let mut opts = Options::new(run_dir, clock);
    opts.durable = common.durable;
    opts.replay = replay;
    opts.crash_after_seq = std::env::var("FLOW_CRASH_AFTER_SEQ").ok().and_then(|v| v.parse().ok());
    (opts.observer, opts.progress) = observer(common.quiet);
    opts.cancel_on_ctrl_c = true;
    if !common.no_prompt && std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
        opts.asker = Some(Box::new(TerminalAsker));
    }
    if let Some(path) = &common.sign {
        opts.sign = Some(Arc::new(flow_runtime::signing::load_signing_key(path).map_err(RunError::Usage)?));
    }
    Ok(opts)
}

fn report(result: Result<Outcome, RunError>, quiet: bool) -> u8 {
    match result {
        Ok(outcome) => {
            if !quiet {
                match outcome.stopped_by {
                    Some(signal) => eprintln!(
                        "flow: {} — stopped by {signal}; `flow resume {}` continues it",
                        outcome.run_id,
                        outcome.run_dir.display()
                    ),
                    None => eprintln!("flow: {} — {}", outcome.run_id, describe(&outcome.status)),
                }
                if let RunStatus::Paused { waiting_on, .. } = &outcome.status {
                    let subject = CommandKey::parse(waiting_on).and_then(|k| k.subject()).unwrap_or(waiting_on);
                    eprintln!(
                        "flow: decide with `flow approve {} {subject} --decision …`, then `flow resume {}`",
                        outcome.run_dir.display(),
                        outcome.run_dir.display()
                    );
                }
                eprintln!("flow: trace: {}", outcome.run_dir.join("trace.jsonl").display());
            }
            // Quiet or not: use the static bounds do not cover is never silent.
            if outcome.ceiling_breaches > 0 {
                let turns = if outcome.ceiling_breaches == 1 {
                    "1 model turn".to_string()
                } else {
                    format!("{} model turns", outcome.ceiling_breaches)
                };
                eprintln!(
                    "flow: warning: {turns} reported more than the per-turn ceilings their reservation assumed (`max_input_tokens`, `max_tokens`, their cost; see the `warning` events): the static budget bounds do not cover this run"
                );
            }
            outcome.exit_code()
        }
        Err(e) => fail(e),
    }
}

/// A plan to run, and where its source lives: the directory relative
/// paths resolve against and NAME of `NAME.input.json`, `NAME.cassette.yaml`.
struct Compiled {
    plan: Plan,
    base: PathBuf,
    stem: String,
}

fn compile(file: &Path, unverified: bool) -> Result<Compiled, u8> {
    compile_with(file, false, unverified)
}

/// Compiles a `.flow` file (or reads a plan). Checking errors always
/// refuse; static verification errors refuse unless `for_checking` (holding
/// a trace against a plan whose static checks failed — a broken twin, a
/// witness of its violation — is legitimate: the IR is whole). A plan is
/// refused (exit 6) when its content does not match its digest and, unless
/// `for_checking` or `unverified`, when the static checks find errors in it.
fn compile_with(file: &Path, for_checking: bool, unverified: bool) -> Result<Compiled, u8> {
    let base = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("flow").trim_end_matches(".plan").to_string();
    let text = match flow_pipeline::read_source(file) {
        Ok(text) => text,
        Err(why) => {
            eprintln!("flow: {why}");
            return Err(exit::USAGE);
        }
    };
    let extension = file.extension().and_then(|e| e.to_str()).unwrap_or_default();
    if matches!(extension, "json" | "yaml" | "yml") {
        // `flowc build` writes plans as JSON, or YAML with `--emit yaml`.
        let parsed = match extension {
            "json" => Plan::from_json(&text),
            _ => Plan::from_yaml(&text),
        };
        let plan = match parsed {
            Ok(plan) if plan.flow_plan_version == flow_check::plan::PLAN_VERSION => plan,
            Ok(plan) => {
                eprintln!(
                    "flow: {} is plan version {}, this runtime reads {}",
                    file.display(),
                    plan.flow_plan_version,
                    flow_check::plan::PLAN_VERSION
                );
                return Err(exit::USAGE);
            }
            Err(e) => {
                eprintln!("flow: {} is not a plan: {e}", file.display());
                return Err(exit::USAGE);
            }
        };
        return accept_plan(file, plan, base, for_checking || unverified);
    }
    // As `flowc verify` (the one pipeline): the static checks, then the
    // model checker — a flow whose policy a run can break does not start.
    // Holding a trace against it needs the static checks only.
    let mut db = SourceDb::new();
    let depth = if for_checking {
        flow_pipeline::Depth::Static
    } else {
        flow_pipeline::Depth::Full { max_states: flow_verify::policies::DEFAULT_MAX_STATES }
    };
    let compiled = flow_pipeline::compile_text(&mut db, &flow_pipeline::normalize(file), text, &flow_pipeline::FsLoader, depth, false);
    let diagnostics = &compiled.diagnostics;
    let refuse = if for_checking { compiled.checked.has_errors() } else { compiled.has_errors() };
    if !refuse && diagnostics.iter().any(|d| d.is_error()) {
        eprintln!(
            "flow: note: {} has static verification errors ({}); checking against it anyway",
            file.display(),
            render::summary_line(diagnostics)
        );
    }
    if refuse {
        let mut err = BufferedStandardStream::stderr(if std::io::stderr().is_terminal() { ColorChoice::Auto } else { ColorChoice::Never });
        let max = flow_diagnostics::cap::DEFAULT_MAX_PER_FILE;
        let _ = render::emit_capped(&mut err, &db, diagnostics, max).and_then(|_| std::io::Write::flush(&mut err));
        eprintln!("flow: not running {}: {}", file.display(), render::summary_line(diagnostics));
        return Err(exit::FAILED);
    }
    let files = compiled.sources(&db);
    let plan = Plan::new(compiled.checked.program, &format!("flow {}", env!("CARGO_PKG_VERSION")), &files);
    Ok(Compiled { plan, base, stem })
}

/// A plan read from `file`, taken only if it is what was verified: its
/// content matches its digest, and (unless `skip_checks`) the static
/// checks, run again on its IR, find no errors. Its source's directory is
/// where the plan records it, relative to `file`'s directory (`plan_dir`).
fn accept_plan(file: &Path, plan: Plan, plan_dir: PathBuf, skip_checks: bool) -> Result<Compiled, u8> {
    if let Err(why) = plan.check_digest() {
        eprintln!(
            "flow: refusing the plan {}: {why}; it is not the plan that was built and verified (rebuild it with `flowc build`)",
            file.display()
        );
        return Err(exit::PLAN_REFUSED);
    }
    let root = Path::new(&plan.source.root);
    let stem = root.file_stem().and_then(|s| s.to_str()).map(str::to_string).unwrap_or_else(|| "flow".into());
    let base = match &plan.source.dir {
        Some(dir) => plan_dir.join(dir),
        None => plan_dir,
    };
    if !skip_checks {
        // As `flow run FILE.flow`: the static checks and the model checker.
        let (mut found, _) =
            flow_verify::verify_with_policies(&plan.program, &plan.source.digest, flow_verify::policies::DEFAULT_MAX_STATES);
        sort_diagnostics(&mut found);
        if found.iter().any(|d| d.is_error()) {
            for d in found.iter().filter(|d| d.is_error()) {
                let at = d
                    .labels
                    .first()
                    .and_then(|l| plan.source.files.get(l.file.0 as usize))
                    .map(|f| format!(" (in {})", f.name))
                    .unwrap_or_default();
                eprintln!("error[{}]: {}{at}", d.code.0, d.message);
                if let Some(help) = &d.help {
                    eprintln!("  = help: {help}");
                }
            }
            eprintln!(
                "flow: not running {}: the plan fails the static checks ({}); it is not a plan `flowc build` would write",
                file.display(),
                render::summary_line(&found)
            );
            return Err(exit::PLAN_REFUSED);
        }
    }
    Ok(Compiled { plan, base, stem })
}

/// Where `flow run` runs: the run directory and id, the workflow, a
/// cassette to record to.
struct RunTarget {
    run_dir: Option<PathBuf>,
    run_id: Option<String>,
    workflow: Option<String>,
    record: Option<PathBuf>,
    force_new: bool,
}

/// A run ready to start: its plan (provider URLs applied), source
/// directory, input and cassette, found as `flow run` finds them.
struct Prepared {
    plan: Plan,
    base: PathBuf,
    input: serde_json::Value,
    input_path: Option<PathBuf>,
    replay: Option<(PathBuf, ReplayMode)>,
}

/// Compiles (or loads) `file` and finds the run's input and cassette;
/// `Err` is the exit code, after the message.
fn prepare(file: &Path, sources: &Sources) -> Result<Prepared, u8> {
    let Sources { input, base_dir, unverified, replay, no_cassette, provider_url: provider_urls } = sources;
    if *unverified && file.extension().is_some_and(|e| e == "json") {
        eprintln!("flow: warning: --unverified: the static checks are not run on {}", file.display());
    }
    let Compiled { mut plan, base, stem } = compile(file, *unverified)?;
    let base = base_dir.clone().unwrap_or(base);
    if !base.is_dir() {
        eprintln!("flow: the flow's directory {} is not a directory (--base-dir sets it)", base.display());
        return Err(exit::USAGE);
    }
    for spec in provider_urls {
        let Some((name, url)) = spec.split_once('=') else {
            eprintln!("flow: --provider-url takes NAME=URL, not `{spec}`");
            return Err(exit::USAGE);
        };
        match std::sync::Arc::make_mut(&mut plan.program).decls.get_mut(name) {
            Some(decl) if decl.kind == flow_check::spec::Kind::Provider => {
                decl.props.insert("base_url".into(), flow_check::ir::Value::Str(url.to_string()));
            }
            _ => {
                eprintln!("flow: --provider-url: no provider named `{name}`");
                return Err(exit::USAGE);
            }
        }
    }
    let input_path = input.clone().or_else(|| Some(base.join(format!("{stem}.input.json"))).filter(|p| p.exists()));
    let input = match &input_path {
        Some(path) => {
            match std::fs::read_to_string(path).map_err(|e| e.to_string()).and_then(|t| flow_check::limits::json_from_str("it", &t)) {
                Ok(v) => v,
                Err(e) => {
                    eprintln!("flow: cannot read the input {}: {e}", path.display());
                    return Err(exit::USAGE);
                }
            }
        }
        None => serde_json::Value::Null,
    };
    let replay = match replay {
        Some(path) => Some((path.clone(), ReplayMode::Strict)),
        None if !no_cassette => Some(base.join(format!("{stem}.cassette.yaml"))).filter(|p| p.exists()).map(|p| (p, ReplayMode::Lenient)),
        None => None,
    };
    Ok(Prepared { plan, base, input, input_path, replay })
}

async fn run(file: PathBuf, target: RunTarget, sources: &Sources, common: Common) -> u8 {
    let RunTarget { run_dir, run_id, workflow, record, force_new } = target;
    if let Some(id) = run_id.as_deref().filter(|id| !driver::valid_run_id(id)) {
        eprintln!("flow: `{id}` is not a run id: letters, digits, `.`, `_` and `-` only, not starting with `.`");
        return exit::USAGE;
    }
    let Prepared { plan, base, input, input_path, replay } = match prepare(&file, sources) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let run_id = run_id.unwrap_or_else(fresh_run_id);
    let run_dir = run_dir.unwrap_or_else(|| Path::new(".flow/runs").join(&run_id));
    let mut opts = match options(run_dir.clone(), &common, replay) {
        Ok(opts) => opts,
        Err(e) => return fail(e),
    };
    if force_new {
        match driver::move_aside(&run_dir) {
            Ok(Some(to)) => eprintln!("flow: moved the run in {} aside to {}", run_dir.display(), to.display()),
            Ok(None) => {}
            Err(e) => return fail(e),
        }
    }
    if !common.quiet {
        eprintln!("flow: run {run_id} in {}", run_dir.display());
        if let Some(path) = &input_path {
            eprintln!("flow: input {}", path.display());
        }
        if let Some((path, mode)) = &opts.replay {
            let how = if *mode == ReplayMode::Strict { "replaying only from" } else { "replaying what it records from" };
            eprintln!("flow: {how} {}", path.display());
        }
    }
    opts.record = record;
    let exporter = match otel::attach(&mut opts, common.otlp.as_deref(), otel::agents_of(&plan.program), common.quiet) {
        Ok(exporter) => exporter,
        Err(e) => return fail(RunError::Usage(e)),
    };
    let base = std::fs::canonicalize(&base).unwrap_or(base);
    let result = driver::run(&plan, workflow.as_deref(), input, &base, &run_id, opts).await;
    otel::finish(exporter, common.quiet).await;
    report(result, common.quiet)
}

fn approve(run: &str, subject: &str, decision: &str, by: Option<String>, comment: Option<String>, output: Option<String>) -> u8 {
    let result = (|| -> Result<String, RunError> {
        let dir = run_dir_of(run)?;
        // One writer at a time: not while a driver runs it.
        let _lock = driver::RunLock::acquire(&dir)?;
        let mut journal = driver::open_journal(&dir, true)?;
        let run_id = driver::run_id_of(&journal)?;
        let resume = format!("flow resume {}", dir.display());
        let asked = Decision { subject, decision, by, comment, output };
        let proposal = decision_for(&journal, &run_id, &resume, asked)?;
        driver::append_proposal(&mut journal, &run_id, &proposal)?;
        let Response::Human(answer) = &proposal.response else { unreachable!("a decision is a human answer") };
        Ok(format!("flow: recorded `{}` on `{subject}` by {}; continue with `{resume}`", answer.decision, answer.by))
    })();
    match result {
        Ok(message) => {
            eprintln!("{message}");
            exit::SUCCESS
        }
        Err(e) => fail(e),
    }
}

/// What `flow approve` was asked to record.
struct Decision<'a> {
    subject: &'a str,
    decision: &'a str,
    by: Option<String>,
    comment: Option<String>,
    output: Option<String>,
}

/// The proposal `flow approve` records, held to what the run waits for:
/// a pending decision on the subject, not timed out, an allowed decision,
/// an allowed decider, and a reconciled output of the tool's type.
/// `resume` is the command that continues the run (for messages).
fn decision_for(journal: &dyn Journal, run_id: &str, resume: &str, asked: Decision<'_>) -> Result<Proposal, RunError> {
    let Decision { subject, decision, by, comment, output } = asked;
    let pending = driver::pending_decisions(journal, run_id)?;
    let Some(p) = pending.iter().find(|p| p.subject == subject) else {
        let waiting: Vec<&str> = pending.iter().map(|p| p.subject.as_str()).collect();
        return Err(RunError::Usage(if waiting.is_empty() {
            format!("run {run_id} waits for no decision")
        } else {
            format!("run {run_id} waits for no decision on `{subject}`; it waits on: {}", waiting.join(", "))
        }));
    };
    if let Some(at) = p.expires_at.as_deref() {
        if flow_runtime::clock::rfc3339(SystemClock.now_ms()).as_str() >= at {
            return Err(RunError::Usage(format!(
                "the decision on `{subject}` timed out at {at} (its `timeout`); `{resume}` applies its timeout handler"
            )));
        }
    }
    let Some(decision) = p.decisions.iter().copied().find(|d| d.as_str() == decision) else {
        return Err(RunError::Usage(format!(
            "`{decision}` is not allowed on `{subject}`; allowed: {}",
            flow_trace::join(&p.decisions, ", ")
        )));
    };
    // A role among the deciders lets its members decide (and a
    // principal holding it), as trace check reads it.
    let (_, plan) = driver::load_meta(journal, run_id)?;
    let allowed = flow_check::semantics::expand_principals(&plan.program, &p.deciders);
    let by = match by {
        Some(b) if p.deciders.is_empty() || allowed.contains(&b) => b,
        Some(b) => {
            let who = allowed.iter().cloned().collect::<Vec<_>>().join(", ");
            return Err(RunError::Usage(format!("`{b}` may not decide on `{subject}`; deciders: {who}")));
        }
        None => p.deciders.first().cloned().unwrap_or_else(|| "operator".into()),
    };
    let output = match output {
        Some(text) => Some(reconciled_output(journal, run_id, &plan.program, subject, decision, &text)?),
        None => None,
    };
    Ok(Proposal { key: p.key.clone(), response: Response::Human(HumanAnswer { decision, by, comment, output }) })
}

/// The output `--output` gives a reconciliation's `approve`: JSON (or
/// `@FILE`), of the reconciled tool's output type.
fn reconciled_output(
    journal: &dyn Journal,
    run_id: &str,
    program: &flow_check::ir::Program,
    subject: &str,
    decision: flow_trace::Decision,
    text: &str,
) -> Result<serde_json::Value, RunError> {
    let Some(attempt) = subject.strip_prefix("reconcile.") else {
        return Err(RunError::Usage(format!("--output answers a reconciliation (`reconcile.ATTEMPT`), not `{subject}`")));
    };
    if decision != flow_trace::Decision::Approve {
        return Err(RunError::Usage("--output goes with `--decision approve`: the call happened, with this output".into()));
    }
    let text = match text.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path).map_err(|e| RunError::Usage(format!("cannot read {path}: {e}")))?,
        None => text.to_string(),
    };
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| RunError::Usage(format!("--output is not JSON: {e}")))?;
    let tool = journal.events(run_id)?.into_iter().find_map(|e| match e.body {
        Body::ReconciliationRequired { attempt_id, tool, .. } if attempt_id == attempt => Some(tool),
        _ => None,
    });
    let ty = tool.as_deref().and_then(|t| program.decls.get(t)).and_then(|d| d.output_type());
    if let (Some(tool), Some(ty)) = (&tool, ty) {
        let validator = flow_runtime::validate::Validator::new(ty, &program.types).map_err(RunError::Usage)?;
        if let Err(errors) = validator.validate(&value) {
            return Err(RunError::Usage(format!("--output is not an output of `{tool}`: {}", errors.join("; "))));
        }
    }
    Ok(value)
}

/// A run directory, its run id, its events and its journal.
type Loaded = (PathBuf, String, Vec<Event>, Box<dyn Journal>);

fn load(run: &str) -> Result<Loaded, RunError> {
    let dir = run_dir_of(run)?;
    let journal = driver::open_journal(&dir, false)?;
    let run_id = driver::run_id_of(&journal)?;
    let events = journal.events(&run_id)?;
    Ok((dir, run_id, events, Box::new(journal)))
}

/// A trace given as a file or a run directory: the trace file and, when
/// the run's artifacts/ sits beside it, the artifact directory.
fn trace_paths(path: &Path) -> (PathBuf, Option<PathBuf>) {
    let (file, dir) = if path.is_dir() {
        (path.join("trace.jsonl"), Some(path.to_path_buf()))
    } else {
        (path.to_path_buf(), path.parent().map(Path::to_path_buf))
    };
    let artifacts = dir.map(|d| d.join("artifacts")).filter(|a| a.is_dir());
    (file, artifacts)
}

fn read_trace(path: &Path) -> Result<(PathBuf, String, Option<PathBuf>), u8> {
    let (file, artifacts) = trace_paths(path);
    match std::fs::read_to_string(&file) {
        Ok(text) => Ok((file, text, artifacts)),
        Err(e) => {
            eprintln!("flow: cannot read the trace {}: {e}", file.display());
            Err(exit::USAGE)
        }
    }
}

/// The artifact store of a run (`None` without one); one that cannot be
/// opened is a usage error, said on stderr.
fn open_artifacts(dir: Option<&Path>) -> Result<Option<flow_runtime::journal::DirArtifacts>, u8> {
    match dir.map(flow_runtime::journal::DirArtifacts::open) {
        Some(Ok(store)) => Ok(Some(store)),
        Some(Err(e)) => {
            eprintln!("flow: cannot open the artifacts: {e}");
            Err(exit::USAGE)
        }
        None => Ok(None),
    }
}

/// The plan for `--plan`: any compile failure is a usage error here.
fn plan_for(path: &Path) -> Result<Plan, u8> {
    compile_with(path, true, false).map(|c| c.plan).map_err(|_| exit::USAGE)
}

fn trace_check(trace: &Path, plan: &Path, format: Format, verify_key: Option<&Path>, signature: Option<&Path>) -> u8 {
    use flow_runtime::journal::ArtifactStore;
    use flow_runtime::tracecheck::{self, Options};
    let plan_file = plan;
    let plan = match plan_for(plan) {
        Ok(p) => p,
        Err(code) => return code,
    };
    // Read as it is checked: memory stays bounded however long the trace.
    let (file, artifacts) = trace_paths(trace);
    let reader = match std::fs::File::open(&file) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("flow: cannot read the trace {}: {e}", file.display());
            return exit::USAGE;
        }
    };
    let store = match open_artifacts(artifacts.as_deref()) {
        Ok(store) => store,
        Err(code) => return code,
    };
    let key = match verify_key.map(flow_runtime::signing::load_verifying_key).transpose() {
        Ok(key) => key,
        Err(e) => {
            eprintln!("flow: {e}");
            return exit::USAGE;
        }
    };
    let sig_path = signature.map(Path::to_path_buf).unwrap_or_else(|| file.with_file_name(flow_runtime::signing::SIGNATURE_FILE));
    let record = flow_runtime::signing::read(&sig_path);
    let options = Options {
        artifacts: store.as_ref().map(|s| s as &dyn ArtifactStore),
        plan_digest: Some(&plan.source.digest),
        // The traces Flow writes are chained: one without is not vouched for.
        require_chain: true,
        signature: key.as_ref().map(|key| tracecheck::SignatureCheck { key, record: record.as_ref().map_err(String::as_str) }),
    };
    let report = match tracecheck::check_reader(&plan.program, reader, &options) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("flow: cannot read the trace {}: {e}", file.display());
            return exit::USAGE;
        }
    };
    match format {
        Format::Json => {
            let mut doc = serde_json::json!({
                "format_version": 1,
                "trace_file": file.display().to_string(),
                "plan": { "file": plan_file.display().to_string(), "digest": plan.source.digest },
                "artifacts": artifacts.as_ref().map(|a| a.display().to_string()),
            });
            if let (Some(obj), Ok(serde_json::Value::Object(rest))) = (doc.as_object_mut(), serde_json::to_value(&report)) {
                obj.extend(rest);
            }
            println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
        }
        Format::Human => print_check(&file, &report),
    }
    if report.conformant {
        exit::SUCCESS
    } else {
        exit::FAILED
    }
}

fn print_check(file: &Path, report: &flow_runtime::tracecheck::Report) {
    let t = &report.trace;
    let ended = match (t.state, &t.status, &t.reason) {
        ("terminated", Some(status), Some(reason)) => format!("terminated: {status} ({reason})"),
        (state, _, _) => state.to_string(),
    };
    println!(
        "trace {} — run {} (workflow {}), {} events, {ended}",
        file.display(),
        t.run_id.as_deref().unwrap_or("?"),
        t.workflow.as_deref().unwrap_or("?"),
        t.events
    );
    let integrity = &t.integrity;
    let signature = match integrity.signature {
        "not checked" => "signature not checked (--verify-key)".to_string(),
        other => format!("signature {other}"),
    };
    println!("integrity: chain {}, {signature}", integrity.chain);
    for d in &report.deviations {
        let at = match (d.seq, d.line) {
            (_, Some(line)) => format!("line {line}"),
            (Some(seq), None) => format!("seq {seq}"),
            (None, None) => "trace".to_string(),
        };
        println!("{} {at}: {}", d.code, d.message);
        if let Some(e) = &d.expected {
            println!("    expected: {e}");
        }
        if let Some(a) = &d.actual {
            println!("    actual:   {a}");
        }
        let context: Vec<String> = [("node", &d.node), ("attempt", &d.attempt), ("gate", &d.gate), ("reason", &d.reason_code)]
            .iter()
            .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k} {v}")))
            .collect();
        if !context.is_empty() {
            println!("    {}", context.join(" · "));
        }
    }
    if !report.policies.is_empty() {
        println!("policies:");
        for p in &report.policies {
            let at = p.seq.map(|s| format!(" at seq {s}")).unwrap_or_default();
            let owed = p.owed.as_ref().map(|o| format!(" — owes {o}")).unwrap_or_default();
            println!("  {:<9} {} ({}, response {}){at}{owed}", p.verdict, p.name, p.scope, p.response);
        }
    }
    for note in &report.notes {
        println!("note: {note}");
    }
    if report.conformant {
        println!("conformant: no deviations");
    } else {
        let mut counts: Vec<(flow_runtime::tracecheck::codes::Code, usize)> = Vec::new();
        for d in &report.deviations {
            match counts.iter_mut().find(|(c, _)| *c == d.code) {
                Some((_, n)) => *n += 1,
                None => counts.push((d.code, 1)),
            }
        }
        counts.sort();
        let summary: Vec<String> = counts.iter().map(|(c, n)| format!("{c} ×{n}")).collect();
        println!("not conformant: {} deviation(s) ({})", report.deviations.len(), summary.join(", "));
    }
}

fn trace_explain(code: Option<&str>) -> u8 {
    use flow_runtime::tracecheck::{explain, CODES};
    match code {
        Some(code) => {
            if let Some(info) = explain(code) {
                println!("{} {}\n\n{}", info.code, info.title, info.explanation);
                return exit::SUCCESS;
            }
            let entries = flow_trace::explain_word(code);
            if entries.is_empty() {
                eprintln!(
                    "flow: `{code}` is neither a deviation code nor a word of the trace vocabulary (`flow trace explain` lists them)"
                );
                return exit::USAGE;
            }
            for (i, (registry, fields, meaning)) in entries.iter().enumerate() {
                if i > 0 {
                    println!();
                }
                println!("{code}: {registry} ({fields})\n\n{meaning}");
            }
            exit::SUCCESS
        }
        None => {
            println!("deviation codes (flow trace check):");
            for info in CODES {
                println!("  {}  {}", info.code, info.title);
            }
            for registry in flow_trace::registries() {
                println!("\n{} ({}):", registry.name, registry.fields);
                let width = registry.words.iter().map(|(w, _)| w.len()).max().unwrap_or(0);
                for (word, meaning) in &registry.words {
                    println!("  {word:width$}  {meaning}");
                }
            }
            exit::SUCCESS
        }
    }
}

fn coverage(traces: &[PathBuf], plan: &Path, format: Format) -> u8 {
    use flow_runtime::coverage::{self, Goal, Trace};
    let plan_file = plan;
    let plan = match plan_for(plan) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let mut loaded = Vec::new();
    let mut notes = Vec::new();
    for path in traces {
        let (file, text, _) = match read_trace(path) {
            Ok(t) => t,
            Err(code) => return code,
        };
        let parsed = flow_runtime::tracecheck::parse(&text);
        if !parsed.deviations.is_empty() {
            notes.push(format!("{}: {} line(s) are not trace events and were skipped", file.display(), parsed.deviations.len()));
        }
        loaded.push((file.display().to_string(), parsed.events));
    }
    let goals: Vec<Goal> = flow_verify::obligations::obligations(&plan.program)
        .into_iter()
        .map(|o| Goal { kind: o.kind, id: o.id, workflow: o.workflow, subject: o.subject, description: o.description })
        .collect();
    let traces: Vec<Trace> = loaded.iter().map(|(name, events)| Trace { name, events }).collect();
    let report = coverage::coverage(&plan.program, &goals, &traces);
    match format {
        Format::Json => {
            let mut doc = serde_json::json!({
                "format_version": 1,
                "plan": { "file": plan_file.display().to_string(), "digest": plan.source.digest },
                "notes": notes,
            });
            if let (Some(obj), Ok(serde_json::Value::Object(rest))) = (doc.as_object_mut(), serde_json::to_value(&report)) {
                obj.extend(rest);
            }
            println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
        }
        Format::Human => {
            println!("coverage of {} trace(s) against {}", report.traces.len(), plan_file.display());
            let pct = |p: Option<f64>| p.map(|p| format!("{p:.1}%")).unwrap_or_else(|| "n/a".into());
            for k in &report.kinds {
                println!("  {:<22} {:>4}/{:<4} {:>7}", k.kind, k.covered, k.total, pct(k.percent));
            }
            println!("  {:<22} {:>4}/{:<4} {:>7}", "total", report.total.covered, report.total.total, pct(report.total.percent));
            if report.uncovered.is_empty() {
                println!("every obligation is covered");
            } else {
                println!("uncovered ({}):", report.uncovered.len());
                for o in report.obligations.iter().filter(|o| !o.covered) {
                    println!("  {} ({}): {}", o.id, o.workflow, o.description);
                }
            }
            for note in &notes {
                println!("note: {note}");
            }
        }
    }
    exit::SUCCESS
}
