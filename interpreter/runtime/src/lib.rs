//! The Flow runtime.
//!
//! * [`engine`] — the control plane: a deterministic state machine over the
//!   plan that decides and records. It is the single writer of run state
//!   and the only place that assigns `seq`.
//! * [`exec`] — the data plane: providers (scripted, record/replay), tools
//!   (command, builtin) and evaluators. Executors only return proposals.
//! * [`journal`] — the append-only event journal (SQLite) and the
//!   content-addressed artifact store.
//! * [`driver`] — runs the engine against executors with tokio, persists
//!   every event before its effect, resumes from the journal.
//! * [`prompt`] — what a model turn sends (messages, structured output,
//!   tools), for every client, and the bound of its input tokens.
//! * [`conformance`] — trace check: a trace held against its plan. The
//!   engine and trace check read the plan through `flow_check::view` and
//!   `flow_check::index`, as the model checker does.
//! * [`witness`] — a model checker's witness made into a run of the engine
//!   (`flow run --witness`).
//! * [`eval`] / [`validate`] — expressions over artifacts, and artifact
//!   validation against their types (via JSON Schema).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

pub mod budget;
pub mod clock;
pub mod conformance;
pub mod coverage;
pub mod driver;
pub mod engine;
pub mod eval;
pub mod exec;
pub mod journal;
pub mod keys;
pub mod mcp;
pub mod openai;
pub mod prompt;
pub mod proto;
pub mod template;
pub mod validate;
pub mod witness;
