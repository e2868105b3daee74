//! The Flow control plane, pure and deterministic.
//!
//! This crate does no I/O: it reads no files, clock or environment (the
//! workspace's disallowed methods hold it, and it allows none of them) and
//! depends on no async runtime, database or HTTP client. The runtime
//! (`flow-runtime`) is the shell that drives it.
//!
//! * [`engine`] — a deterministic state machine over the plan that decides
//!   and records. It is the single writer of run state and the only place
//!   that assigns `seq`.
//! * [`proto`] — what the engine asks of the data plane ([`proto::Command`])
//!   and what comes back ([`proto::Response`]); [`keys`] names commands.
//! * [`budget`] — budget scopes: reservation, settlement, zones.
//! * [`eval`] / [`validate`] — expressions over artifacts, and artifact
//!   validation against their types (via JSON Schema).
//! * [`clock`] — the clock the engine reads, and a fake one.
//! * [`artifact`] — artifacts named by the digest of their bytes.
//! * [`prompt`] — what a model turn sends (messages, structured output,
//!   tools), for every client, and the bound of its input tokens.
//! * [`template`] — `{{…}}` templates (tool arguments, idempotency keys).
//! * [`witness`] — a model checker's witness made into a run of the engine
//!   (`flow run --witness`).
//! * [`coverage`] — which plan elements a set of traces exercised.

pub mod artifact;
pub mod budget;
pub mod clock;
pub mod coverage;
pub mod engine;
pub mod eval;
pub mod keys;
pub mod project;
pub mod prompt;
pub mod proto;
pub mod template;
pub mod validate;
pub mod witness;
