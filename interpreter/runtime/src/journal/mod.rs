//! The append-only event journal and the content-addressed artifact store.
//!
//! The journal is the source of truth of a run: events are appended with the
//! primary key `(run_id, seq)`, and run state is a projection of them. An
//! append is accepted only when its `seq` is the next one (the version check
//! that turns away stale writers); re-appending an identical event is a
//! harmless duplicate, so a writer may retry after an unknown outcome.
//!
//! * [`SqliteJournal`] — SQLite in WAL mode, one file per run directory.
//! * [`crate::db::PgJournal`] — PostgreSQL, shared by workers, with fencing.
//! * [`MemoryJournal`] — the same semantics in memory, for tests and
//!   benchmarks.
//! * [`DirArtifacts`] / [`MemoryArtifacts`] — artifacts stored under the
//!   sha256 of their canonical JSON (see [`artifact_ref`]).

mod artifacts;
mod crash;
mod memory;
mod sqlite;

pub(crate) use artifacts::{digest_hex, verify as verify_artifact};
pub use artifacts::{ArtifactStore, DirArtifacts, MemoryArtifacts};
pub use crash::CrashAfter;
pub use memory::MemoryJournal;
pub use sqlite::SqliteJournal;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub use flow_engine::artifact::{artifact_ref, artifact_ref_of};
use flow_trace::{ArtifactRef, Event};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use sha2::{Digest, Sha256};

/// Errors of the journal and the artifact store.
#[derive(Debug)]
pub enum JournalError {
    /// An append whose seq is not `last_seq + 1` (a stale or out-of-order
    /// writer: the version check).
    Stale {
        /// The run appended to.
        run_id: String,
        /// The seq the journal expected (`last_seq + 1`).
        expected: u64,
        /// The seq of the refused event.
        got: u64,
    },
    /// An append of a seq that exists with different content.
    Conflict {
        /// The run appended to.
        run_id: String,
        /// The seq already taken by another event.
        seq: u64,
    },
    /// A write by a worker whose claim on the run was taken over: the
    /// run's epoch is no longer the one it claimed (fencing; see
    /// [`crate::db`]).
    Fenced {
        /// The run written to.
        run_id: String,
        /// The epoch the writer claimed.
        claimed: i64,
        /// The run's epoch now.
        current: i64,
    },
    /// Storage failure (message).
    Storage(String),
    /// Missing artifact or corrupt data (message).
    Corrupt(String),
}

impl fmt::Display for JournalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JournalError::Stale { run_id, expected, got } => {
                write!(f, "stale append to run `{run_id}`: expected seq {expected}, got {got}")
            }
            JournalError::Conflict { run_id, seq } => {
                write!(f, "conflicting append to run `{run_id}`: seq {seq} is already recorded with other content")
            }
            JournalError::Fenced { run_id, claimed, current } => write!(
                f,
                "fenced: this worker's claim on run `{run_id}` (epoch {claimed}) was taken over (epoch {current}); its write is refused"
            ),
            JournalError::Storage(message) => write!(f, "journal storage error: {message}"),
            JournalError::Corrupt(message) => write!(f, "corrupt or missing data: {message}"),
        }
    }
}

impl std::error::Error for JournalError {}

fn storage(error: impl fmt::Display) -> JournalError {
    JournalError::Storage(error.to_string())
}

/// The outcome of a successful append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appended {
    /// The event was recorded.
    New,
    /// The identical event was already there (idempotent append).
    Duplicate,
}

/// The journal: append-only events with primary key `(run_id, seq)`; run
/// state is a projection of it.
///
/// Append rules (every implementation): if an event with the same
/// `(run_id, seq)` exists, an identical event is a [`Appended::Duplicate`]
/// and any other is a [`JournalError::Conflict`]; otherwise a `seq` other
/// than `last_seq + 1` is [`JournalError::Stale`]. The Postgres
/// journal ([`crate::db::PgJournal`]) adds fencing: a worker whose claim
/// was taken over cannot write.
pub trait Journal: Send {
    /// Appends one event.
    fn append(&mut self, event: &Event) -> Result<Appended, JournalError>;
    /// Appends events atomically (one transaction), with the rules of
    /// [`Journal::append`] for each: either all are recorded (or were
    /// already, identically) or none is.
    fn append_batch(&mut self, events: &[Event]) -> Result<(), JournalError>;
    /// [`Journal::append_batch`] of events already encoded: `json[i]` is
    /// `events[i]` as the journal would encode it (`serde_json`), so a
    /// driver that also writes `trace.jsonl` encodes each event once. A
    /// journal that stores no JSON ignores it.
    fn append_batch_encoded(&mut self, events: &[Event], json: &[String]) -> Result<(), JournalError> {
        debug_assert_eq!(events.len(), json.len());
        self.append_batch(events)
    }
    /// Sets metadata entries of `run_id` (proposals, …) and appends
    /// encoded events in one transaction: a group commit (see
    /// ARCHITECTURE.md, "persist before effect"). The default sets each
    /// entry, then appends the batch: right for journals with nothing to
    /// lose (in memory).
    fn commit_group(&mut self, run_id: &str, meta: &[(String, String)], events: &[Event], json: &[String]) -> Result<(), JournalError> {
        for (key, value) in meta {
            self.set_meta(run_id, key, value)?;
        }
        self.append_batch_encoded(events, json)
    }
    /// The events of a run, ordered by seq.
    fn events(&self, run_id: &str) -> Result<Vec<Event>, JournalError>;
    /// The seq of the last event of a run; 0 when it has none.
    fn last_seq(&self, run_id: &str) -> Result<u64, JournalError>;
    /// Sets (inserts or replaces) a metadata entry of a run: the plan JSON,
    /// the options, …
    fn set_meta(&mut self, run_id: &str, key: &str, value: &str) -> Result<(), JournalError>;
    /// A metadata entry of a run, when set.
    fn meta(&self, run_id: &str, key: &str) -> Result<Option<String>, JournalError>;
    /// The runs with events or metadata, sorted.
    fn runs(&self) -> Result<Vec<String>, JournalError>;
    /// Whether this writer may still act for its run: called before a
    /// command is dispatched when nothing was committed just before it (a
    /// commit checks it anyway). Only a journal shared by workers under
    /// leases can say no ([`JournalError::Fenced`]).
    fn check_fence(&mut self) -> Result<(), JournalError> {
        Ok(())
    }
}

/// The JSON stored for an event, compared byte for byte on duplicates.
fn event_json(event: &Event) -> Result<String, JournalError> {
    serde_json::to_string(event).map_err(|e| JournalError::Storage(format!("cannot serialize event {}: {e}", event.event_id)))
}

fn parse_event(json: &str) -> Result<Event, JournalError> {
    serde_json::from_str(json).map_err(|e| JournalError::Corrupt(format!("unreadable journal event: {e}")))
}

fn seq_to_sql(seq: u64) -> Result<i64, JournalError> {
    i64::try_from(seq).map_err(|_| JournalError::Storage(format!("seq {seq} is out of range")))
}

fn seq_from_sql(seq: i64) -> Result<u64, JournalError> {
    u64::try_from(seq).map_err(|_| JournalError::Corrupt(format!("negative seq {seq} in the journal")))
}

/// Distinguishes the temporary files of concurrent writers in one process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

#[cfg(test)]
mod tests;
