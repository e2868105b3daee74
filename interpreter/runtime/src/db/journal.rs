//! The PostgreSQL journal and artifact store, with the append rules of
//! [`crate::journal::Journal`] and the fencing of a claimed epoch.

use super::{pg, PgConn};
use crate::journal::{artifact_ref, Appended, ArtifactStore, Journal, JournalError};
use flow_trace::{ArtifactRef, Event};
use postgres::Transaction;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Artifacts made since the last commit, written with it: `digest → (size, bytes)`.
type PendingMap = HashMap<String, (i64, Vec<u8>)>;
type Pending = Arc<Mutex<PendingMap>>;

/// The journal in PostgreSQL. Runs must exist in `flow_runs` (`flow
/// submit` inserts them); with a fence, every write to the fenced run
/// checks that the run's epoch is still the claimed one.
#[derive(Debug, Clone)]
pub struct PgJournal {
    conn: PgConn,
    fence: Option<(String, i64)>,
    /// The artifacts of [`fenced_storage`]'s store, written with the next
    /// commit.
    pending: Option<Pending>,
}

/// The journal and artifact store a worker drives a claimed run with:
/// writes fenced at `epoch`, and the artifacts a step makes written in the
/// transaction that commits its events (one fsync, not one per artifact;
/// still durable before any effect, as the events are).
pub fn fenced_storage(conn: PgConn, run_id: &str, epoch: i64) -> (PgJournal, PgArtifacts) {
    let pending: Pending = Arc::default();
    let journal = PgJournal { conn: conn.clone(), fence: Some((run_id.to_string(), epoch)), pending: Some(pending.clone()) };
    (journal, PgArtifacts { conn, pending: Some(pending) })
}

/// The metadata keys that are proposals (`proposal/00000001`, …): kept in
/// their own table, in order.
const PROPOSAL: &str = "proposal/";

impl PgJournal {
    /// A journal on `conn`, writing without a fence (a command that holds
    /// no lease, e.g. `flow approve`, whose transaction checks the run's
    /// status itself).
    pub fn new(conn: PgConn) -> PgJournal {
        PgJournal { conn, fence: None, pending: None }
    }

    /// A journal whose writes to `run_id` hold only while the run's epoch
    /// is `epoch` (the worker's claim).
    pub fn fenced(conn: PgConn, run_id: &str, epoch: i64) -> PgJournal {
        PgJournal { conn, fence: Some((run_id.to_string(), epoch)), pending: None }
    }

    /// The connection.
    pub fn conn(&self) -> &PgConn {
        &self.conn
    }

    /// Writes groups — metadata entries of a run, then its events — in one
    /// transaction under the fence, with the artifacts made since the last.
    fn write(&self, groups: Vec<Group>) -> Result<(), JournalError> {
        let fence = self.fence.clone();
        let artifacts: Vec<(String, (i64, Vec<u8>))> = match &self.pending {
            Some(pending) => lock(pending)?.drain().collect(),
            None => Vec::new(),
        };
        let result = self.conn.call(move |client| {
            let attempt = (|| -> Result<(), JournalError> {
                let mut tx = client.transaction().map_err(pg)?;
                insert_artifacts(&mut tx, &artifacts)?;
                for (run_id, meta, events) in &groups {
                    let last = lock_run(&mut tx, run_id, fence.as_ref())?;
                    set_meta_in(&mut tx, run_id, meta)?;
                    let last = append_in(&mut tx, run_id, last, events)?;
                    tx.execute("UPDATE flow_runs SET last_seq = $2, updated_at = now() WHERE run_id = $1", &[run_id, &seq_sql(last)?])
                        .map_err(pg)?;
                }
                tx.commit().map_err(pg)
            })();
            Ok(attempt.map_err(|e| (e, artifacts)))
        })?;
        // A failed commit keeps its artifacts for the next one.
        match result {
            Ok(()) => Ok(()),
            Err((e, artifacts)) => {
                if let Some(pending) = &self.pending {
                    lock(pending)?.extend(artifacts);
                }
                Err(e)
            }
        }
    }
}

fn lock(pending: &Pending) -> Result<std::sync::MutexGuard<'_, PendingMap>, JournalError> {
    pending.lock().map_err(|_| JournalError::Storage("the pending artifacts' lock is poisoned".into()))
}

/// Inserts artifacts (already digested) in one statement; one stored
/// already is left as it is.
fn insert_artifacts(tx: &mut Transaction<'_>, artifacts: &[(String, (i64, Vec<u8>))]) -> Result<(), JournalError> {
    if artifacts.is_empty() {
        return Ok(());
    }
    let digests: Vec<&str> = artifacts.iter().map(|(d, _)| d.as_str()).collect();
    let sizes: Vec<i64> = artifacts.iter().map(|(_, (size, _))| *size).collect();
    let bytes: Vec<&[u8]> = artifacts.iter().map(|(_, (_, b))| b.as_slice()).collect();
    tx.execute(
        "INSERT INTO flow_artifacts (digest, size, bytes)
         SELECT d, s, b FROM unnest($1::text[], $2::bigint[], $3::bytea[]) AS t (d, s, b)
         ON CONFLICT (digest) DO NOTHING",
        &[&digests, &sizes, &bytes],
    )
    .map_err(pg)?;
    Ok(())
}

/// An event as a row: `(seq, event_id, kind, json)`.
type EventRow = (u64, String, String, String);

/// What one run's part of a commit writes: `(run_id, metadata, events)`.
type Group = (String, Vec<(String, String)>, Vec<EventRow>);

fn seq_sql(seq: u64) -> Result<i64, JournalError> {
    i64::try_from(seq).map_err(|_| JournalError::Storage(format!("seq {seq} is out of range")))
}

/// Locks the run's row for the transaction; checks the fence. Gives the
/// run's last seq.
fn lock_run(tx: &mut Transaction<'_>, run_id: &str, fence: Option<&(String, i64)>) -> Result<u64, JournalError> {
    let row = tx.query_opt("SELECT last_seq, epoch FROM flow_runs WHERE run_id = $1 FOR UPDATE", &[&run_id]).map_err(pg)?;
    let Some(row) = row else {
        return Err(JournalError::Storage(format!("no run `{run_id}` in the database (`flow submit` records runs)")));
    };
    let (last, epoch): (i64, i64) = (row.get(0), row.get(1));
    if let Some((fenced, claimed)) = fence {
        if fenced != run_id {
            return Err(JournalError::Storage(format!("a journal claimed for run `{fenced}` cannot write run `{run_id}`")));
        }
        if epoch != *claimed {
            return Err(JournalError::Fenced { run_id: run_id.to_string(), claimed: *claimed, current: epoch });
        }
    }
    u64::try_from(last).map_err(|_| JournalError::Corrupt(format!("negative last seq of run `{run_id}`")))
}

/// Sets metadata entries — proposals into their table, the rest into
/// `flow_meta` — in one statement each, however many there are.
fn set_meta_in(tx: &mut Transaction<'_>, run_id: &str, meta: &[(String, String)]) -> Result<(), JournalError> {
    let (mut ns, mut proposals, mut keys, mut values) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // One statement cannot set a row twice: the last value of a key wins.
    let mut seen = std::collections::HashSet::new();
    let last: Vec<&(String, String)> = meta.iter().rev().filter(|(key, _)| seen.insert(key.as_str())).collect();
    for (key, value) in last.into_iter().rev() {
        match key.strip_prefix(PROPOSAL).and_then(|n| n.parse::<i64>().ok()) {
            Some(n) => {
                ns.push(n);
                proposals.push(value.as_str());
            }
            None => {
                keys.push(key.as_str());
                values.push(value.as_str());
            }
        }
    }
    if !ns.is_empty() {
        // A proposal is recorded once: the same again is a no-op, another
        // in its place a conflict (never an overwrite of a decision).
        tx.execute(
            "INSERT INTO flow_proposals (run_id, n, json) SELECT $1, n, j FROM unnest($2::bigint[], $3::text[]) AS t (n, j)
             ON CONFLICT (run_id, n) DO NOTHING",
            &[&run_id, &ns, &proposals],
        )
        .map_err(pg)?;
        let clash = tx
            .query_opt(
                "SELECT p.n FROM flow_proposals p JOIN unnest($2::bigint[], $3::text[]) AS t (n, j) ON p.n = t.n
                 WHERE p.run_id = $1 AND p.json <> t.j LIMIT 1",
                &[&run_id, &ns, &proposals],
            )
            .map_err(pg)?;
        if let Some(row) = clash {
            let n: i64 = row.get(0);
            return Err(JournalError::Storage(format!("proposal {n} of run `{run_id}` is already recorded with other content")));
        }
    }
    if !keys.is_empty() {
        tx.execute(
            "INSERT INTO flow_meta (run_id, key, value) SELECT $1, k, v FROM unnest($2::text[], $3::text[]) AS t (k, v)
             ON CONFLICT (run_id, key) DO UPDATE SET value = excluded.value",
            &[&run_id, &keys, &values],
        )
        .map_err(pg)?;
    }
    Ok(())
}

/// Appends `(seq, event_id, kind, json)` rows after `last` with the append
/// rules: the next seqs are inserted (in one statement), a seq already
/// taken is a duplicate when its JSON is identical and a conflict
/// otherwise, a gap is stale. Gives the new last seq.
fn append_in(tx: &mut Transaction<'_>, run_id: &str, mut last: u64, events: &[EventRow]) -> Result<u64, JournalError> {
    let (mut seqs, mut ids, mut kinds, mut jsons) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (seq, event_id, kind, json) in events {
        if *seq == last + 1 {
            last = *seq;
            seqs.push(seq_sql(*seq)?);
            ids.push(event_id.as_str());
            kinds.push(kind.as_str());
            jsons.push(json.as_str());
            continue;
        }
        if *seq == 0 || *seq > last {
            return Err(JournalError::Stale { run_id: run_id.to_string(), expected: last + 1, got: *seq });
        }
        // Taken earlier in this batch: compared with the batch's own.
        if let Some(i) = seqs.iter().position(|s| *s == seq_sql(*seq).unwrap_or(-1)) {
            if jsons[i] == json.as_str() {
                continue;
            }
            return Err(JournalError::Conflict { run_id: run_id.to_string(), seq: *seq });
        }
        let existing =
            tx.query_opt("SELECT json FROM flow_events WHERE run_id = $1 AND seq = $2", &[&run_id, &seq_sql(*seq)?]).map_err(pg)?;
        match existing.map(|row| row.get::<_, String>(0)) {
            Some(existing) if existing == *json => {}
            Some(_) => return Err(JournalError::Conflict { run_id: run_id.to_string(), seq: *seq }),
            None => return Err(JournalError::Corrupt(format!("run `{run_id}` has a gap at seq {seq}"))),
        }
    }
    if !seqs.is_empty() {
        tx.execute(
            "INSERT INTO flow_events (run_id, seq, event_id, kind, json)
             SELECT $1, s, i, k, j FROM unnest($2::bigint[], $3::text[], $4::text[], $5::text[]) AS t (s, i, k, j)",
            &[&run_id, &seqs, &ids, &kinds, &jsons],
        )
        .map_err(pg)?;
    }
    Ok(last)
}

/// Events as rows, grouped by run in order of first appearance.
fn rows_by_run(events: &[Event], json: &[String]) -> Vec<(String, Vec<EventRow>)> {
    let mut out: Vec<(String, Vec<EventRow>)> = Vec::new();
    for (event, json) in events.iter().zip(json) {
        let row = (event.seq, event.event_id.to_string(), event.kind().to_string(), json.clone());
        match out.iter_mut().find(|(run, _)| **run == *event.run_id) {
            Some((_, rows)) => rows.push(row),
            None => out.push((event.run_id.to_string(), vec![row])),
        }
    }
    out
}

fn encode(events: &[Event]) -> Result<Vec<String>, JournalError> {
    events
        .iter()
        .map(|e| serde_json::to_string(e).map_err(|err| JournalError::Storage(format!("cannot serialize event {}: {err}", e.event_id))))
        .collect()
}

impl Journal for PgJournal {
    fn append(&mut self, event: &Event) -> Result<Appended, JournalError> {
        let json = encode(std::slice::from_ref(event))?;
        let before = self.last_seq(&event.run_id)?;
        self.append_batch_encoded(std::slice::from_ref(event), &json)?;
        Ok(if event.seq <= before { Appended::Duplicate } else { Appended::New })
    }

    fn append_batch(&mut self, events: &[Event]) -> Result<(), JournalError> {
        let json = encode(events)?;
        self.append_batch_encoded(events, &json)
    }

    fn append_batch_encoded(&mut self, events: &[Event], json: &[String]) -> Result<(), JournalError> {
        if events.len() != json.len() {
            return Err(JournalError::Storage(format!("{} events but {} encodings", events.len(), json.len())));
        }
        // All or nothing, whatever runs the batch holds.
        let groups = rows_by_run(events, json).into_iter().map(|(run_id, rows)| (run_id, Vec::new(), rows)).collect();
        self.write(groups)
    }

    fn commit_group(&mut self, run_id: &str, meta: &[(String, String)], events: &[Event], json: &[String]) -> Result<(), JournalError> {
        if events.len() != json.len() {
            return Err(JournalError::Storage(format!("{} events but {} encodings", events.len(), json.len())));
        }
        if meta.is_empty() && events.is_empty() {
            return Ok(());
        }
        if let Some(other) = events.iter().find(|e| *e.run_id != *run_id) {
            return Err(JournalError::Storage(format!("a group of run `{run_id}` holds an event of run `{}`", other.run_id)));
        }
        let rows = rows_by_run(events, json).into_iter().next().map(|(_, rows)| rows).unwrap_or_default();
        self.write(vec![(run_id.to_string(), meta.to_vec(), rows)])
    }

    fn events(&self, run_id: &str) -> Result<Vec<Event>, JournalError> {
        let run_id = run_id.to_string();
        let lines = self.conn.call(move |client| {
            let rows = client.query("SELECT json FROM flow_events WHERE run_id = $1 ORDER BY seq", &[&run_id]).map_err(pg)?;
            Ok(rows.iter().map(|r| r.get::<_, String>(0)).collect::<Vec<_>>())
        })?;
        lines
            .iter()
            .map(|line| serde_json::from_str(line).map_err(|e| JournalError::Corrupt(format!("unreadable journal event: {e}"))))
            .collect()
    }

    fn last_seq(&self, run_id: &str) -> Result<u64, JournalError> {
        let run_id = run_id.to_string();
        let last = self.conn.call(move |client| {
            let row = client.query_opt("SELECT last_seq FROM flow_runs WHERE run_id = $1", &[&run_id]).map_err(pg)?;
            Ok(row.map(|r| r.get::<_, i64>(0)).unwrap_or(0))
        })?;
        u64::try_from(last).map_err(|_| JournalError::Corrupt(format!("negative last seq {last}")))
    }

    fn set_meta(&mut self, run_id: &str, key: &str, value: &str) -> Result<(), JournalError> {
        self.write(vec![(run_id.to_string(), vec![(key.to_string(), value.to_string())], Vec::new())])
    }

    fn meta(&self, run_id: &str, key: &str) -> Result<Option<String>, JournalError> {
        let (run_id, key) = (run_id.to_string(), key.to_string());
        self.conn.call(move |client| {
            let row = match key.strip_prefix(PROPOSAL).and_then(|n| n.parse::<i64>().ok()) {
                Some(n) => client.query_opt("SELECT json FROM flow_proposals WHERE run_id = $1 AND n = $2", &[&run_id, &n]),
                None => client.query_opt("SELECT value FROM flow_meta WHERE run_id = $1 AND key = $2", &[&run_id, &key]),
            }
            .map_err(pg)?;
            Ok(row.map(|r| r.get::<_, String>(0)))
        })
    }

    fn runs(&self) -> Result<Vec<String>, JournalError> {
        self.conn.call(|client| {
            let rows = client.query("SELECT run_id FROM flow_runs ORDER BY run_id", &[]).map_err(pg)?;
            Ok(rows.iter().map(|r| r.get::<_, String>(0)).collect())
        })
    }

    fn check_fence(&mut self) -> Result<(), JournalError> {
        let Some((run_id, claimed)) = self.fence.clone() else { return Ok(()) };
        let current = self.conn.call(move |client| {
            let row = client.query_opt("SELECT epoch FROM flow_runs WHERE run_id = $1", &[&run_id]).map_err(pg)?;
            Ok(row.map(|r| r.get::<_, i64>(0)))
        })?;
        match current {
            Some(current) if current == claimed => Ok(()),
            Some(current) => Err(JournalError::Fenced { run_id: self.fence_run(), claimed, current }),
            None => Err(JournalError::Storage(format!("no run `{}` in the database", self.fence_run()))),
        }
    }
}

impl PgJournal {
    fn fence_run(&self) -> String {
        self.fence.as_ref().map(|(run, _)| run.clone()).unwrap_or_default()
    }
}

/// Artifacts in `flow_artifacts`, by digest (bytea), shared by every run.
#[derive(Debug, Clone)]
pub struct PgArtifacts {
    conn: PgConn,
    /// Shared with the run's journal ([`fenced_storage`]): written with
    /// its next commit. None: each artifact is written at once.
    pending: Option<Pending>,
}

impl PgArtifacts {
    /// The store on `conn`, writing each artifact at once.
    pub fn new(conn: PgConn) -> PgArtifacts {
        PgArtifacts { conn, pending: None }
    }
}

impl ArtifactStore for PgArtifacts {
    fn put(&mut self, value: &serde_json::Value) -> Result<ArtifactRef, JournalError> {
        let (artifact, bytes) = artifact_ref(value);
        self.put_encoded(&artifact, &bytes)?;
        Ok(artifact)
    }

    fn put_encoded(&mut self, artifact: &ArtifactRef, bytes: &[u8]) -> Result<(), JournalError> {
        if let Some(pending) = &self.pending {
            let size = seq_sql(artifact.size)?;
            lock(pending)?.entry(artifact.digest.clone()).or_insert_with(|| (size, bytes.to_vec()));
            return Ok(());
        }
        let (digest, size, bytes) = (artifact.digest.clone(), seq_sql(artifact.size)?, bytes.to_vec());
        self.conn.call(move |client| {
            client
                .execute(
                    "INSERT INTO flow_artifacts (digest, size, bytes) VALUES ($1, $2, $3) ON CONFLICT (digest) DO NOTHING",
                    &[&digest, &size, &bytes],
                )
                .map_err(pg)?;
            Ok(())
        })
    }

    fn get(&self, artifact: &ArtifactRef) -> Result<serde_json::Value, JournalError> {
        let hex = crate::journal::digest_hex(artifact)?.to_string();
        if let Some(pending) = &self.pending {
            if let Some((_, bytes)) = lock(pending)?.get(&artifact.digest) {
                return crate::journal::verify_artifact(artifact, &hex, bytes);
            }
        }
        let digest = artifact.digest.clone();
        let bytes = self.conn.call(move |client| {
            let row = client.query_opt("SELECT bytes FROM flow_artifacts WHERE digest = $1", &[&digest]).map_err(pg)?;
            Ok(row.map(|r| r.get::<_, Vec<u8>>(0)))
        })?;
        let bytes = bytes.ok_or_else(|| JournalError::Corrupt(format!("missing artifact {}", artifact.digest)))?;
        crate::journal::verify_artifact(artifact, &hex, &bytes)
    }
}
