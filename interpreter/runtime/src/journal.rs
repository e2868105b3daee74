//! The append-only event journal and the content-addressed artifact store.
//!
//! The journal is the source of truth of a run: events are appended with the
//! primary key `(run_id, seq)`, and run state is a projection of them. An
//! append is accepted only when its `seq` is the next one (the version check
//! that turns away stale writers); re-appending an identical event is a
//! harmless duplicate, so a writer may retry after an unknown outcome.
//!
//! * [`SqliteJournal`] — SQLite in WAL mode, one file per run directory.
//! * [`MemoryJournal`] — the same semantics in memory, for tests and
//!   benchmarks.
//! * [`DirArtifacts`] / [`MemoryArtifacts`] — artifacts stored under the
//!   sha256 of their canonical JSON (see [`artifact_ref`]).

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
/// than `last_seq + 1` is [`JournalError::Stale`]. A Postgres implementation
/// for many workers comes later, behind this trait.
pub trait Journal: Send {
    /// Appends one event.
    fn append(&mut self, event: &Event) -> Result<Appended, JournalError>;
    /// Appends events atomically (one transaction), with the rules of
    /// [`Journal::append`] for each: either all are recorded (or were
    /// already, identically) or none is.
    fn append_batch(&mut self, events: &[Event]) -> Result<(), JournalError>;
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

/// The journal in a SQLite database (WAL mode).
#[derive(Debug)]
pub struct SqliteJournal {
    conn: Connection,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS events (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    event_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    json TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (
    run_id TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (run_id, key)
) WITHOUT ROWID;
";

impl SqliteJournal {
    /// Opens (creating) the journal at `path`, in WAL mode. `durable = true`
    /// sets `synchronous=FULL` (commits survive power loss); `false` sets
    /// `synchronous=NORMAL` (commits survive process crashes such as
    /// `kill -9`: committed transactions are in the WAL).
    pub fn open(path: &Path, durable: bool) -> Result<SqliteJournal, JournalError> {
        if let Some(parent) = path.parent() {
            if !parent.as_os_str().is_empty() {
                fs::create_dir_all(parent).map_err(|e| JournalError::Storage(format!("cannot create {}: {e}", parent.display())))?;
            }
        }
        let conn = Connection::open(path).map_err(|e| JournalError::Storage(format!("cannot open {}: {e}", path.display())))?;
        conn.busy_timeout(Duration::from_secs(10)).map_err(storage)?;
        let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |row| row.get(0)).map_err(storage)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(JournalError::Storage(format!("cannot enable WAL mode on {} (got `{mode}`)", path.display())));
        }
        conn.pragma_update(None, "synchronous", if durable { "FULL" } else { "NORMAL" }).map_err(storage)?;
        conn.execute_batch(SCHEMA).map_err(storage)?;
        conn.set_prepared_statement_cache_capacity(32);
        Ok(SqliteJournal { conn })
    }

    /// Applies the append rules to one event inside an open transaction.
    /// `lasts` caches the last seq of the runs this transaction has seen.
    fn append_in(conn: &Connection, event: &Event, lasts: &mut Vec<(String, u64)>) -> Result<Appended, JournalError> {
        let json = event_json(event)?;
        let seq = seq_to_sql(event.seq)?;
        let cached = lasts.iter().position(|(run, _)| **run == *event.run_id);
        let last = match cached {
            Some(i) => lasts[i].1,
            None => Self::last_seq_in(conn, &event.run_id)?,
        };
        if event.seq == last + 1 {
            conn.prepare_cached("INSERT INTO events (run_id, seq, event_id, kind, json) VALUES (?1, ?2, ?3, ?4, ?5)")
                .and_then(|mut stmt| stmt.execute(params![event.run_id, seq, event.event_id, event.kind(), json]))
                .map_err(storage)?;
            match cached {
                Some(i) => lasts[i].1 = event.seq,
                None => lasts.push((event.run_id.to_string(), event.seq)),
            }
            return Ok(Appended::New);
        }
        if event.seq == 0 || event.seq > last {
            return Err(JournalError::Stale { run_id: event.run_id.to_string(), expected: last + 1, got: event.seq });
        }
        // 1 <= seq <= last: the seq is taken (seqs have no gaps).
        let existing: Option<String> = conn
            .prepare_cached("SELECT json FROM events WHERE run_id = ?1 AND seq = ?2")
            .and_then(|mut stmt| stmt.query_row(params![event.run_id, seq], |row| row.get(0)).optional())
            .map_err(storage)?;
        match existing {
            Some(existing) if existing == json => Ok(Appended::Duplicate),
            Some(_) => Err(JournalError::Conflict { run_id: event.run_id.to_string(), seq: event.seq }),
            None => Err(JournalError::Corrupt(format!("run `{}` has a gap at seq {}", event.run_id, event.seq))),
        }
    }

    fn last_seq_in(conn: &Connection, run_id: &str) -> Result<u64, JournalError> {
        let last: i64 = conn
            .prepare_cached("SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id = ?1")
            .and_then(|mut stmt| stmt.query_row(params![run_id], |row| row.get(0)))
            .map_err(storage)?;
        seq_from_sql(last)
    }
}

impl Journal for SqliteJournal {
    fn append(&mut self, event: &Event) -> Result<Appended, JournalError> {
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(storage)?;
        let appended = Self::append_in(&tx, event, &mut Vec::new())?;
        if appended == Appended::New {
            tx.commit().map_err(storage)?;
        }
        Ok(appended)
    }

    fn append_batch(&mut self, events: &[Event]) -> Result<(), JournalError> {
        if events.is_empty() {
            return Ok(());
        }
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(storage)?;
        let mut lasts = Vec::new();
        for event in events {
            // An error drops `tx`, which rolls the whole batch back.
            Self::append_in(&tx, event, &mut lasts)?;
        }
        tx.commit().map_err(storage)
    }

    fn events(&self, run_id: &str) -> Result<Vec<Event>, JournalError> {
        let mut stmt = self.conn.prepare_cached("SELECT json FROM events WHERE run_id = ?1 ORDER BY seq").map_err(storage)?;
        let rows = stmt.query_map(params![run_id], |row| row.get::<_, String>(0)).map_err(storage)?;
        let mut events = Vec::new();
        for json in rows {
            events.push(parse_event(&json.map_err(storage)?)?);
        }
        Ok(events)
    }

    fn last_seq(&self, run_id: &str) -> Result<u64, JournalError> {
        Self::last_seq_in(&self.conn, run_id)
    }

    fn set_meta(&mut self, run_id: &str, key: &str, value: &str) -> Result<(), JournalError> {
        self.conn
            .prepare_cached(
                "INSERT INTO meta (run_id, key, value) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (run_id, key) DO UPDATE SET value = excluded.value",
            )
            .and_then(|mut stmt| stmt.execute(params![run_id, key, value]))
            .map_err(storage)?;
        Ok(())
    }

    fn meta(&self, run_id: &str, key: &str) -> Result<Option<String>, JournalError> {
        self.conn
            .prepare_cached("SELECT value FROM meta WHERE run_id = ?1 AND key = ?2")
            .and_then(|mut stmt| stmt.query_row(params![run_id, key], |row| row.get(0)).optional())
            .map_err(storage)
    }

    fn runs(&self) -> Result<Vec<String>, JournalError> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT DISTINCT run_id FROM events UNION SELECT DISTINCT run_id FROM meta ORDER BY 1")
            .map_err(storage)?;
        let rows = stmt.query_map([], |row| row.get::<_, String>(0)).map_err(storage)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(storage)
    }
}

/// One run in a [`MemoryJournal`].
#[derive(Debug, Default)]
struct MemoryRun {
    /// `events[i]` has seq `i + 1` (seqs have no gaps).
    events: Vec<Event>,
    /// Events appended but not kept (a sequence-only journal).
    dropped: u64,
    meta: BTreeMap<String, String>,
}

/// The journal in memory, with the semantics of [`SqliteJournal`]; for
/// tests and benchmarks.
#[derive(Debug, Default)]
pub struct MemoryJournal {
    runs: BTreeMap<String, MemoryRun>,
    /// Check the sequence but keep no events (benchmarks, embedders that
    /// only observe).
    sequence_only: bool,
}

impl MemoryJournal {
    /// An empty journal.
    pub fn new() -> MemoryJournal {
        MemoryJournal::default()
    }

    /// A journal that enforces the version check (each append must be the
    /// next `seq`) but retains no events: for runs that need no resume.
    pub fn sequence_only() -> MemoryJournal {
        MemoryJournal { sequence_only: true, ..MemoryJournal::default() }
    }

    fn recorded(&self, run_id: &str, seq: u64) -> Option<&Event> {
        let run = self.runs.get(run_id)?;
        let index = usize::try_from(seq.checked_sub(1)?).ok()?;
        run.events.get(index)
    }

    fn last(&self, run_id: &str) -> u64 {
        self.runs.get(run_id).map_or(0, |run| run.events.len() as u64 + run.dropped)
    }

    fn keep(&mut self, event: &Event) {
        // The run exists after its first event: no key allocation per event.
        let run = match self.runs.get_mut(&*event.run_id) {
            Some(run) => run,
            None => self.runs.entry(event.run_id.to_string()).or_default(),
        };
        if self.sequence_only {
            run.dropped += 1;
        } else {
            run.events.push(event.clone());
        }
    }
}

impl Journal for MemoryJournal {
    fn append(&mut self, event: &Event) -> Result<Appended, JournalError> {
        // In memory, events compare structurally: no encoding on the hot path.
        if let Some(existing) = self.recorded(&event.run_id, event.seq) {
            return if existing == event {
                Ok(Appended::Duplicate)
            } else {
                Err(JournalError::Conflict { run_id: event.run_id.to_string(), seq: event.seq })
            };
        }
        let last = self.last(&event.run_id);
        if event.seq != last + 1 {
            return Err(JournalError::Stale { run_id: event.run_id.to_string(), expected: last + 1, got: event.seq });
        }
        self.keep(event);
        Ok(Appended::New)
    }

    fn append_batch(&mut self, events: &[Event]) -> Result<(), JournalError> {
        // Check the whole batch against the journal plus its own earlier
        // events, then apply: all or nothing. A run's pending events have
        // consecutive seqs, so an earlier one is found by its offset (no
        // scan of the batch per event).
        struct Pending<'e> {
            run_id: &'e str,
            last: u64,
            /// The first pending seq, and the pending events from there on.
            first: u64,
            events: Vec<&'e Event>,
        }
        let mut runs: Vec<Pending> = Vec::new();
        let mut order: Vec<(usize, usize)> = Vec::with_capacity(events.len());
        for event in events {
            let slot = match runs.iter().position(|p| *p.run_id == *event.run_id) {
                Some(i) => i,
                None => {
                    let last = self.last(&event.run_id);
                    runs.push(Pending { run_id: &event.run_id, last, first: last + 1, events: Vec::new() });
                    runs.len() - 1
                }
            };
            let pending = &runs[slot];
            let existing = self.recorded(&event.run_id, event.seq).or_else(|| {
                let offset = event.seq.checked_sub(pending.first)?;
                pending.events.get(usize::try_from(offset).ok()?).copied()
            });
            if let Some(existing) = existing {
                if existing == event {
                    continue;
                }
                return Err(JournalError::Conflict { run_id: event.run_id.to_string(), seq: event.seq });
            }
            if event.seq != pending.last + 1 {
                return Err(JournalError::Stale { run_id: event.run_id.to_string(), expected: pending.last + 1, got: event.seq });
            }
            let pending = &mut runs[slot];
            pending.last = event.seq;
            order.push((slot, pending.events.len()));
            pending.events.push(event);
        }
        for (slot, index) in order {
            self.keep(runs[slot].events[index]);
        }
        Ok(())
    }

    fn events(&self, run_id: &str) -> Result<Vec<Event>, JournalError> {
        Ok(self.runs.get(run_id).map(|run| run.events.clone()).unwrap_or_default())
    }

    fn last_seq(&self, run_id: &str) -> Result<u64, JournalError> {
        Ok(self.last(run_id))
    }

    fn set_meta(&mut self, run_id: &str, key: &str, value: &str) -> Result<(), JournalError> {
        self.runs.entry(run_id.to_string()).or_default().meta.insert(key.to_string(), value.to_string());
        Ok(())
    }

    fn meta(&self, run_id: &str, key: &str) -> Result<Option<String>, JournalError> {
        Ok(self.runs.get(run_id).and_then(|run| run.meta.get(key).cloned()))
    }

    fn runs(&self) -> Result<Vec<String>, JournalError> {
        Ok(self.runs.keys().cloned().collect())
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    crate::proto::hex(&Sha256::digest(bytes))
}

/// The hex digest of a reference, checked to be 64 lowercase hex digits (so
/// it is safe as a file name).
fn digest_hex(artifact: &ArtifactRef) -> Result<&str, JournalError> {
    let hex = artifact
        .digest
        .strip_prefix("sha256:")
        .ok_or_else(|| JournalError::Corrupt(format!("artifact digest `{}` is not sha256", artifact.digest)))?;
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return Err(JournalError::Corrupt(format!("malformed artifact digest `{}`", artifact.digest)));
    }
    Ok(hex)
}

/// Checks stored bytes against their reference and parses them.
fn verify(artifact: &ArtifactRef, hex: &str, bytes: &[u8]) -> Result<serde_json::Value, JournalError> {
    if bytes.len() as u64 != artifact.size || sha256_hex(bytes) != hex {
        return Err(JournalError::Corrupt(format!("artifact {} does not match its digest", artifact.digest)));
    }
    serde_json::from_slice(bytes).map_err(|e| JournalError::Corrupt(format!("artifact {} is not JSON: {e}", artifact.digest)))
}

/// Content-addressed artifact store: the key of an artifact is the sha256 of
/// its canonical JSON (see [`artifact_ref`]).
pub trait ArtifactStore: Send {
    /// Stores a value and returns its reference; storing it again is a no-op.
    fn put(&mut self, value: &serde_json::Value) -> Result<ArtifactRef, JournalError>;
    /// Reads a value back, verifying its digest ([`JournalError::Corrupt`] on
    /// a mismatch or a missing artifact).
    fn get(&self, artifact: &ArtifactRef) -> Result<serde_json::Value, JournalError>;
    /// Stores bytes already encoded and digested by [`artifact_ref`] (the
    /// control plane's hot path: no second encoding or hashing).
    fn put_encoded(&mut self, artifact: &ArtifactRef, bytes: &[u8]) -> Result<(), JournalError>;
}

/// Artifacts as files `DIR/<hex[0..2]>/<hex>.json`, each written to a
/// temporary file and renamed into place (atomic).
#[derive(Debug)]
pub struct DirArtifacts {
    dir: PathBuf,
    fsync: bool,
}

/// Distinguishes the temporary files of concurrent writers in one process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl DirArtifacts {
    /// Opens (creating) the store in `dir`, without fsync (see
    /// [`DirArtifacts::with_fsync`]).
    pub fn open(dir: &Path) -> Result<DirArtifacts, JournalError> {
        fs::create_dir_all(dir).map_err(|e| JournalError::Storage(format!("cannot create {}: {e}", dir.display())))?;
        Ok(DirArtifacts { dir: dir.to_path_buf(), fsync: false })
    }

    /// Whether each artifact file (and its directory) is fsynced before
    /// `put` returns, so it survives power loss.
    pub fn with_fsync(mut self, fsync: bool) -> DirArtifacts {
        self.fsync = fsync;
        self
    }

    /// The directory of the store.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file an artifact is stored in (whether or not it exists).
    pub fn path_of(&self, artifact: &ArtifactRef) -> Result<PathBuf, JournalError> {
        let hex = digest_hex(artifact)?;
        Ok(self.dir.join(&hex[..2]).join(format!("{hex}.json")))
    }

    fn write_atomically(&self, shard: &Path, path: &Path, hex: &str, bytes: &[u8]) -> io::Result<()> {
        fs::create_dir_all(shard)?;
        let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let temp = shard.join(format!(".{hex}.{}.{n}.tmp", std::process::id()));
        let written = (|| {
            let mut file = fs::File::create(&temp)?;
            file.write_all(bytes)?;
            if self.fsync {
                file.sync_all()?;
            }
            fs::rename(&temp, path)
        })();
        if written.is_err() {
            let _ = fs::remove_file(&temp);
        }
        written?;
        if self.fsync {
            // Persist the rename itself (directories open read-only on Unix).
            #[cfg(unix)]
            fs::File::open(shard)?.sync_all()?;
        }
        Ok(())
    }
}

impl ArtifactStore for DirArtifacts {
    fn put(&mut self, value: &serde_json::Value) -> Result<ArtifactRef, JournalError> {
        let (artifact, bytes) = artifact_ref(value);
        let hex = digest_hex(&artifact)?;
        let shard = self.dir.join(&hex[..2]);
        let path = shard.join(format!("{hex}.json"));
        // Already stored with the right size: content addressing makes the
        // write idempotent. A damaged file of another size is rewritten.
        if fs::metadata(&path).map(|m| m.len() == artifact.size).unwrap_or(false) {
            return Ok(artifact);
        }
        self.write_atomically(&shard, &path, hex, &bytes)
            .map_err(|e| JournalError::Storage(format!("cannot write artifact {}: {e}", path.display())))?;
        Ok(artifact)
    }

    fn put_encoded(&mut self, artifact: &ArtifactRef, bytes: &[u8]) -> Result<(), JournalError> {
        let hex = digest_hex(artifact)?;
        let shard = self.dir.join(&hex[..2]);
        let path = shard.join(format!("{hex}.json"));
        if fs::metadata(&path).map(|m| m.len() == artifact.size).unwrap_or(false) {
            return Ok(());
        }
        self.write_atomically(&shard, &path, hex, bytes)
            .map_err(|e| JournalError::Storage(format!("cannot write artifact {}: {e}", path.display())))
    }

    fn get(&self, artifact: &ArtifactRef) -> Result<serde_json::Value, JournalError> {
        let hex = digest_hex(artifact)?;
        let path = self.dir.join(&hex[..2]).join(format!("{hex}.json"));
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(JournalError::Corrupt(format!("missing artifact {} ({})", artifact.digest, path.display())));
            }
            Err(e) => return Err(JournalError::Storage(format!("cannot read artifact {}: {e}", path.display()))),
        };
        verify(artifact, hex, &bytes)
    }
}

/// Artifacts in memory, verified like [`DirArtifacts`]; for tests and
/// benchmarks.
#[derive(Debug, Default)]
pub struct MemoryArtifacts {
    by_digest: HashMap<String, Vec<u8>>,
}

impl MemoryArtifacts {
    /// An empty store.
    pub fn new() -> MemoryArtifacts {
        MemoryArtifacts::default()
    }

    /// How many distinct artifacts are stored.
    pub fn len(&self) -> usize {
        self.by_digest.len()
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.by_digest.is_empty()
    }
}

impl ArtifactStore for MemoryArtifacts {
    fn put(&mut self, value: &serde_json::Value) -> Result<ArtifactRef, JournalError> {
        let (artifact, bytes) = artifact_ref(value);
        self.by_digest.entry(artifact.digest.clone()).or_insert(bytes);
        Ok(artifact)
    }

    fn put_encoded(&mut self, artifact: &ArtifactRef, bytes: &[u8]) -> Result<(), JournalError> {
        if !self.by_digest.contains_key(&artifact.digest) {
            self.by_digest.insert(artifact.digest.clone(), bytes.to_vec());
        }
        Ok(())
    }

    fn get(&self, artifact: &ArtifactRef) -> Result<serde_json::Value, JournalError> {
        let hex = digest_hex(artifact)?;
        let bytes =
            self.by_digest.get(&artifact.digest).ok_or_else(|| JournalError::Corrupt(format!("missing artifact {}", artifact.digest)))?;
        verify(artifact, hex, bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flow_trace::{Body, SCHEMA_VERSION};
    use serde_json::json;

    fn ev(run: &str, seq: u64, message: &str) -> Event {
        Event {
            run_id: run.into(),
            execution_id: "exec-1".into(),
            seq,
            event_id: Event::id_for(run, seq).into(),
            parent_event_id: None,
            producer: "control".into(),
            body: Body::Warning { schema_version: SCHEMA_VERSION, message: message.into() },
            time: "2026-01-01T00:00:00Z".into(),
        }
    }

    /// Runs a test body over a fresh journal of each implementation.
    fn both(body: impl Fn(&mut dyn Journal)) {
        let mut memory = MemoryJournal::new();
        body(&mut memory);
        let dir = tempfile::tempdir().unwrap();
        let mut sqlite = SqliteJournal::open(&dir.path().join("journal.db"), false).unwrap();
        body(&mut sqlite);
    }

    #[test]
    fn appends_read_back_in_order() {
        both(|j| {
            assert_eq!(j.last_seq("r").unwrap(), 0);
            assert!(j.events("r").unwrap().is_empty());
            let events: Vec<Event> = (1..=20).map(|seq| ev("r", seq, &format!("m{seq}"))).collect();
            for event in &events {
                assert_eq!(j.append(event).unwrap(), Appended::New);
            }
            assert_eq!(j.events("r").unwrap(), events);
            assert_eq!(j.last_seq("r").unwrap(), 20);
            assert_eq!(j.last_seq("other").unwrap(), 0);
        });
    }

    #[test]
    fn identical_append_is_a_duplicate() {
        both(|j| {
            j.append(&ev("r", 1, "a")).unwrap();
            j.append(&ev("r", 2, "b")).unwrap();
            assert_eq!(j.append(&ev("r", 1, "a")).unwrap(), Appended::Duplicate);
            assert_eq!(j.append(&ev("r", 2, "b")).unwrap(), Appended::Duplicate);
            assert_eq!(j.events("r").unwrap().len(), 2);
            // A batch that repeats recorded events and adds new ones.
            j.append_batch(&[ev("r", 2, "b"), ev("r", 3, "c")]).unwrap();
            assert_eq!(j.last_seq("r").unwrap(), 3);
            // The same new event twice in one batch.
            j.append_batch(&[ev("r", 4, "d"), ev("r", 4, "d")]).unwrap();
            assert_eq!(j.events("r").unwrap().len(), 4);
        });
    }

    #[test]
    fn different_content_at_a_recorded_seq_conflicts() {
        both(|j| {
            j.append(&ev("r", 1, "a")).unwrap();
            let err = j.append(&ev("r", 1, "other")).unwrap_err();
            assert!(matches!(err, JournalError::Conflict { ref run_id, seq: 1 } if run_id == "r"), "{err}");
            assert_eq!(j.events("r").unwrap(), vec![ev("r", 1, "a")]);
        });
    }

    #[test]
    fn gaps_and_old_seqs_are_stale() {
        both(|j| {
            let err = j.append(&ev("r", 2, "gap")).unwrap_err();
            assert!(matches!(err, JournalError::Stale { expected: 1, got: 2, .. }), "{err}");
            j.append(&ev("r", 1, "a")).unwrap();
            j.append(&ev("r", 2, "b")).unwrap();
            let err = j.append(&ev("r", 4, "gap")).unwrap_err();
            assert!(matches!(err, JournalError::Stale { expected: 3, got: 4, .. }), "{err}");
            let err = j.append(&ev("r", 0, "old")).unwrap_err();
            assert!(matches!(err, JournalError::Stale { expected: 3, got: 0, .. }), "{err}");
            assert_eq!(j.last_seq("r").unwrap(), 2);
        });
    }

    #[test]
    fn batches_are_all_or_nothing() {
        both(|j| {
            j.append(&ev("r", 1, "a")).unwrap();
            // A gap in the middle.
            let err = j.append_batch(&[ev("r", 2, "b"), ev("r", 4, "d"), ev("r", 5, "e")]).unwrap_err();
            assert!(matches!(err, JournalError::Stale { expected: 3, got: 4, .. }), "{err}");
            assert_eq!(j.last_seq("r").unwrap(), 1);
            // A conflict in the middle.
            let err = j.append_batch(&[ev("r", 2, "b"), ev("r", 1, "changed"), ev("r", 3, "c")]).unwrap_err();
            assert!(matches!(err, JournalError::Conflict { seq: 1, .. }), "{err}");
            // A conflict within the batch itself.
            let err = j.append_batch(&[ev("r", 2, "b"), ev("r", 2, "b2")]).unwrap_err();
            assert!(matches!(err, JournalError::Conflict { seq: 2, .. }), "{err}");
            assert_eq!(j.events("r").unwrap(), vec![ev("r", 1, "a")]);
            // A good batch, across two runs.
            j.append_batch(&[ev("r", 2, "b"), ev("s", 1, "x"), ev("r", 3, "c"), ev("s", 2, "y")]).unwrap();
            assert_eq!(j.last_seq("r").unwrap(), 3);
            assert_eq!(j.last_seq("s").unwrap(), 2);
            j.append_batch(&[]).unwrap();
        });
    }

    #[test]
    fn meta_is_upserted() {
        both(|j| {
            assert_eq!(j.meta("r", "plan").unwrap(), None);
            j.set_meta("r", "plan", "{}").unwrap();
            j.set_meta("r", "options", "o").unwrap();
            j.set_meta("r", "plan", "{\"v\":2}").unwrap();
            assert_eq!(j.meta("r", "plan").unwrap().as_deref(), Some("{\"v\":2}"));
            assert_eq!(j.meta("r", "options").unwrap().as_deref(), Some("o"));
            assert_eq!(j.meta("s", "plan").unwrap(), None);
        });
    }

    #[test]
    fn runs_are_listed_once_sorted() {
        both(|j| {
            assert!(j.runs().unwrap().is_empty());
            j.append(&ev("run-b", 1, "a")).unwrap();
            j.append(&ev("run-b", 2, "b")).unwrap();
            j.append(&ev("run-a", 1, "a")).unwrap();
            j.set_meta("run-c", "plan", "{}").unwrap();
            j.set_meta("run-a", "plan", "{}").unwrap();
            assert_eq!(j.runs().unwrap(), vec!["run-a", "run-b", "run-c"]);
        });
    }

    #[test]
    fn sqlite_journal_persists_across_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested").join("journal.db");
        let events: Vec<Event> = (1..=5).map(|seq| ev("r", seq, "m")).collect();
        {
            let mut j = SqliteJournal::open(&path, true).unwrap();
            j.append_batch(&events[..3]).unwrap();
            j.append(&events[3]).unwrap();
            j.append(&events[4]).unwrap();
            j.set_meta("r", "plan", "{}").unwrap();
        }
        let mut j = SqliteJournal::open(&path, false).unwrap();
        assert_eq!(j.events("r").unwrap(), events);
        assert_eq!(j.last_seq("r").unwrap(), 5);
        assert_eq!(j.meta("r", "plan").unwrap().as_deref(), Some("{}"));
        assert_eq!(j.runs().unwrap(), vec!["r"]);
        assert!(matches!(j.append(&ev("r", 3, "stale writer")).unwrap_err(), JournalError::Conflict { seq: 3, .. }));
        assert_eq!(j.append(&ev("r", 6, "m")).unwrap(), Appended::New);
    }

    #[test]
    fn artifact_ref_is_sha256_of_canonical_json() {
        let (artifact, bytes) = artifact_ref(&json!({"b": 1, "a": [true, null]}));
        assert_eq!(bytes, br#"{"b":1,"a":[true,null]}"#);
        assert_eq!(artifact.size, bytes.len() as u64);
        assert_eq!(artifact.digest, format!("sha256:{}", sha256_hex(&bytes)));
        assert_eq!(artifact.digest.len(), 7 + 64);
        let (empty, _) = artifact_ref(&json!(""));
        // sha256 of `""` (two quote characters).
        assert_eq!(empty.digest, "sha256:12ae32cb1ec02d01eda3581b127c1fee3b0dc53572ed6baf239721a03d82e126");
    }

    /// Runs an artifact test body over a fresh store of each implementation.
    fn both_stores(body: impl Fn(&mut dyn ArtifactStore)) {
        body(&mut MemoryArtifacts::new());
        let dir = tempfile::tempdir().unwrap();
        body(&mut DirArtifacts::open(&dir.path().join("artifacts")).unwrap().with_fsync(true));
    }

    #[test]
    fn artifacts_round_trip_and_put_is_idempotent() {
        both_stores(|store| {
            let value = json!({"title": "x", "items": [1, 2, {"k": "v"}]});
            let first = store.put(&value).unwrap();
            let second = store.put(&value).unwrap();
            assert_eq!(first, second);
            assert_eq!(store.get(&first).unwrap(), value);
            let other = store.put(&json!([1])).unwrap();
            assert_ne!(other, first);
            assert_eq!(store.get(&other).unwrap(), json!([1]));
        });
    }

    #[test]
    fn missing_or_malformed_artifacts_are_corrupt() {
        both_stores(|store| {
            let (absent, _) = artifact_ref(&json!("never stored"));
            assert!(matches!(store.get(&absent).unwrap_err(), JournalError::Corrupt(_)));
            let traversal = ArtifactRef { digest: "sha256:../../etc/passwd".into(), size: 1 };
            assert!(matches!(store.get(&traversal).unwrap_err(), JournalError::Corrupt(_)));
            let md5 = ArtifactRef { digest: "md5:abc".into(), size: 1 };
            assert!(matches!(store.get(&md5).unwrap_err(), JournalError::Corrupt(_)));
        });
    }

    #[test]
    fn tampered_artifact_files_are_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = DirArtifacts::open(dir.path()).unwrap();
        let artifact = store.put(&json!({"verdict": "PASS"})).unwrap();
        let path = store.path_of(&artifact).unwrap();
        let hex = artifact.digest.trim_start_matches("sha256:");
        assert_eq!(path, dir.path().join(&hex[..2]).join(format!("{hex}.json")));
        assert_eq!(fs::read(&path).unwrap(), br#"{"verdict":"PASS"}"#);
        // Same size, different content.
        fs::write(&path, br#"{"verdict":"FAIL"}"#).unwrap();
        let err = store.get(&artifact).unwrap_err();
        assert!(matches!(err, JournalError::Corrupt(_)), "{err}");
        // Truncated.
        fs::write(&path, b"{").unwrap();
        assert!(matches!(store.get(&artifact).unwrap_err(), JournalError::Corrupt(_)));
        // A put of the value repairs a file of the wrong size.
        store.put(&json!({"verdict": "PASS"})).unwrap();
        assert_eq!(store.get(&artifact).unwrap(), json!({"verdict": "PASS"}));
        // No temporary files are left behind.
        let leftovers: Vec<_> = fs::read_dir(path.parent().unwrap())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty());
    }

    #[test]
    fn sequence_only_journals_check_order_but_keep_nothing() {
        let mut j = MemoryJournal::sequence_only();
        j.append(&ev("r", 1, "a")).unwrap();
        j.append_batch(&[ev("r", 2, "b"), ev("r", 3, "c")]).unwrap();
        assert_eq!(j.last_seq("r").unwrap(), 3);
        assert!(j.events("r").unwrap().is_empty());
        assert!(matches!(j.append(&ev("r", 5, "e")), Err(JournalError::Stale { expected: 4, got: 5, .. })));
    }

    #[test]
    fn errors_display() {
        let stale = JournalError::Stale { run_id: "r".into(), expected: 3, got: 5 };
        assert_eq!(stale.to_string(), "stale append to run `r`: expected seq 3, got 5");
        let boxed: Box<dyn std::error::Error> = Box::new(JournalError::Corrupt("x".into()));
        assert!(boxed.to_string().contains('x'));
    }
}
