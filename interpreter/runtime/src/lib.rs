//! The Flow runtime: the I/O shell around the pure engine (`flow-engine`).
//!
//! * [`driver`] — runs the engine against executors with tokio, persists
//!   every event before its effect, resumes from the journal.
//! * [`exec`] — the data plane: providers (scripted, record/replay,
//!   OpenAI-compatible in [`openai`]), tools (command, builtin, HTTP, MCP in
//!   [`mcp`]) and evaluators. Executors only return proposals.
//! * [`journal`] — the append-only event journal (SQLite) and the
//!   content-addressed artifact store.
//! * [`clock`] — the system clock (the engine's clock trait and fake clock
//!   re-exported).
//! * [`signing`] — ed25519 signatures over a trace's chain head
//!   (`flow run --sign`, `flow trace check --verify-key`).
//! * [`tracecheck`] — trace check: a trace held against its plan. The
//!   engine and trace check read the plan through `flow_check::view` and
//!   `flow_check::index`, as the model checker does.
//!
//! The engine's modules are re-exported under their names
//! (`flow_runtime::engine`, `flow_runtime::proto`, …).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

pub use flow_engine::{artifact, budget, coverage, engine, eval, keys, project, prompt, proto, template, validate, witness};

pub mod clock;
pub mod db;
pub mod driver;
pub mod exec;
pub mod journal;
pub mod mcp;
pub mod openai;
pub mod signing;
pub mod tracecheck;
