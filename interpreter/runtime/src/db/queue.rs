//! The run queue: runs submitted, claimed by workers under leases,
//! heartbeated, released when they pause or end.
//!
//! A claim takes the oldest runnable run — queued, or running under a
//! lease that has run out (its worker died or stopped) — with `FOR UPDATE
//! SKIP LOCKED` (claimers never wait for each other), and increments its
//! fencing epoch. `NOTIFY flow_runs` wakes idle workers when a run becomes
//! runnable; polling stays the source of truth.

use super::{pg, PgConn};
use crate::journal::JournalError;
use postgres::Row;
use std::time::Duration;

/// The channel `LISTEN`ed on by idle workers.
pub const CHANNEL: &str = "flow_runs";

/// A run's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRow {
    pub run_id: String,
    pub workflow: Option<String>,
    /// queued, running, paused, finished or error.
    pub status: String,
    /// The run's own status when finished (success, failed, partial, …).
    pub outcome: Option<String>,
    pub exit_code: Option<i32>,
    pub error: Option<String>,
    /// Milliseconds since the epoch.
    pub submitted_ms: i64,
    pub updated_ms: i64,
    pub lease_owner: Option<String>,
    pub lease_expires_ms: Option<i64>,
    pub epoch: i64,
    pub last_seq: i64,
}

const ROW: &str = "run_id, workflow, status, outcome, exit_code, error,
    (extract(epoch FROM submitted_at) * 1000)::bigint, (extract(epoch FROM updated_at) * 1000)::bigint,
    lease_owner, (extract(epoch FROM lease_expires_at) * 1000)::bigint, epoch, last_seq";

fn run_row(row: &Row) -> RunRow {
    RunRow {
        run_id: row.get(0),
        workflow: row.get(1),
        status: row.get(2),
        outcome: row.get(3),
        exit_code: row.get(4),
        error: row.get(5),
        submitted_ms: row.get(6),
        updated_ms: row.get(7),
        lease_owner: row.get(8),
        lease_expires_ms: row.get(9),
        epoch: row.get(10),
        last_seq: row.get(11),
    }
}

/// Records a new run: its row (queued), its plan and metadata, in one
/// transaction, and wakes a worker. A run id already taken is refused.
pub fn submit(conn: &PgConn, run_id: &str, workflow: Option<&str>, plan: &str, meta: &str) -> Result<(), JournalError> {
    let (run_id, workflow, plan, meta) = (run_id.to_string(), workflow.map(str::to_string), plan.to_string(), meta.to_string());
    conn.call(move |client| {
        let mut tx = client.transaction().map_err(pg)?;
        let inserted = tx
            .execute(
                "INSERT INTO flow_runs (run_id, workflow, status) VALUES ($1, $2, 'queued') ON CONFLICT (run_id) DO NOTHING",
                &[&run_id, &workflow],
            )
            .map_err(pg)?;
        if inserted == 0 {
            return Err(JournalError::Storage(format!("a run `{run_id}` is already in the database; choose another --run-id")));
        }
        for (key, value) in [("plan", &plan), ("run", &meta)] {
            tx.execute("INSERT INTO flow_meta (run_id, key, value) VALUES ($1, $2, $3)", &[&run_id, &key, value]).map_err(pg)?;
        }
        tx.execute(&format!("NOTIFY {CHANNEL}"), &[]).map_err(pg)?;
        tx.commit().map_err(pg)
    })
}

/// A claim: the run and the fencing epoch its writes carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub run_id: String,
    pub epoch: i64,
    /// Taken over from a worker whose lease ran out (not queued).
    pub takeover: bool,
}

/// Claims the oldest runnable run for `owner` for `lease` (none: nothing
/// is runnable now).
pub fn claim(conn: &PgConn, owner: &str, lease: Duration) -> Result<Option<Claim>, JournalError> {
    let (owner, ms) = (owner.to_string(), lease_ms(lease));
    conn.call(move |client| {
        let row = client
            .query_opt(
                "WITH next AS (
                     SELECT run_id, status AS was FROM flow_runs
                     WHERE status = 'queued' OR (status = 'running' AND lease_expires_at < now())
                     ORDER BY submitted_at, run_id
                     FOR UPDATE SKIP LOCKED
                     LIMIT 1
                 )
                 UPDATE flow_runs r
                 SET status = 'running', lease_owner = $1, lease_expires_at = now() + $2 * interval '1 millisecond',
                     epoch = r.epoch + 1, updated_at = now()
                 FROM next WHERE r.run_id = next.run_id
                 RETURNING r.run_id, r.epoch, next.was",
                &[&owner, &ms],
            )
            .map_err(pg)?;
        Ok(row.map(|r| Claim { run_id: r.get(0), epoch: r.get(1), takeover: r.get::<_, String>(2) == "running" }))
    })
}

/// Claims run `run_id` for `owner` (`flow resume RUN --db`): a run that is
/// queued, paused, in error, or running under a lease that has run out.
/// A finished run, or one a live worker holds, is refused with the reason.
pub fn claim_run(conn: &PgConn, run_id: &str, owner: &str, lease: Duration) -> Result<Claim, JournalError> {
    let (run_id, owner, ms) = (run_id.to_string(), owner.to_string(), lease_ms(lease));
    conn.call(move |client| {
        let mut tx = client.transaction().map_err(pg)?;
        let status = lock_unleased(&mut tx, &run_id, "")?;
        let epoch: i64 = tx
            .query_one(
                "UPDATE flow_runs SET status = 'running', error = NULL, lease_owner = $2,
                     lease_expires_at = now() + $3 * interval '1 millisecond', epoch = epoch + 1, updated_at = now()
                 WHERE run_id = $1 RETURNING epoch",
                &[&run_id, &owner, &ms],
            )
            .map_err(pg)?
            .get(0);
        tx.commit().map_err(pg)?;
        Ok(Claim { run_id, epoch, takeover: status == "running" })
    })
}

fn lease_ms(lease: Duration) -> f64 {
    lease.as_millis() as f64
}

/// Extends the leases `owner` holds; gives the runs still held (a run
/// taken over is no longer among them).
pub fn heartbeat(conn: &PgConn, owner: &str, lease: Duration) -> Result<Vec<(String, i64)>, JournalError> {
    let (owner, ms) = (owner.to_string(), lease_ms(lease));
    conn.call(move |client| {
        let rows = client
            .query(
                "UPDATE flow_runs SET lease_expires_at = now() + $2 * interval '1 millisecond'
                 WHERE lease_owner = $1 AND status = 'running' RETURNING run_id, epoch",
                &[&owner, &ms],
            )
            .map_err(pg)?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    })
}

/// What a worker leaves a run as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Release {
    /// Terminated: its status and exit code.
    Finished { outcome: String, exit_code: i32 },
    /// Waiting for a decision (`flow approve --db` queues it again).
    Paused,
    /// Stopped mid-way (the worker is shutting down): another may claim it.
    Queued,
    /// The worker could not drive it (a diverged journal, a storage error).
    Error(String),
}

/// Releases a claimed run, if the claim still holds; gives whether it did.
pub fn release(conn: &PgConn, run_id: &str, epoch: i64, how: Release) -> Result<bool, JournalError> {
    let run_id = run_id.to_string();
    conn.call(move |client| {
        let (status, outcome, code, error) = match &how {
            Release::Finished { outcome, exit_code } => ("finished", Some(outcome.clone()), Some(*exit_code), None),
            Release::Paused => ("paused", None, None, None),
            Release::Queued => ("queued", None, None, None),
            Release::Error(message) => ("error", None, None, Some(message.clone())),
        };
        let mut tx = client.transaction().map_err(pg)?;
        let n = tx
            .execute(
                "UPDATE flow_runs SET status = $3, outcome = $4, exit_code = $5, error = $6,
                     lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
                 WHERE run_id = $1 AND epoch = $2",
                &[&run_id, &epoch, &status, &outcome, &code, &error],
            )
            .map_err(pg)?;
        if n > 0 && status == "queued" {
            tx.execute(&format!("NOTIFY {CHANNEL}"), &[]).map_err(pg)?;
        }
        tx.commit().map_err(pg)?;
        Ok(n > 0)
    })
}

/// Ends `owner`'s leases now (a worker shutting down): others may take its
/// runs over at once; what it still writes is fenced off.
pub fn expire_leases(conn: &PgConn, owner: &str) -> Result<u64, JournalError> {
    let owner = owner.to_string();
    conn.call(move |client| {
        let n = client
            .execute("UPDATE flow_runs SET lease_expires_at = now() WHERE lease_owner = $1 AND status = 'running'", &[&owner])
            .map_err(pg)?;
        if n > 0 {
            client.batch_execute(&format!("NOTIFY {CHANNEL}")).map_err(pg)?;
        }
        Ok(n)
    })
}

/// One run's row.
pub fn get(conn: &PgConn, run_id: &str) -> Result<Option<RunRow>, JournalError> {
    let run_id = run_id.to_string();
    conn.call(move |client| {
        let row = client.query_opt(&format!("SELECT {ROW} FROM flow_runs WHERE run_id = $1"), &[&run_id]).map_err(pg)?;
        Ok(row.as_ref().map(run_row))
    })
}

/// Runs, newest first, filtered by status and workflow.
pub fn list(conn: &PgConn, status: Option<&str>, workflow: Option<&str>, limit: i64) -> Result<Vec<RunRow>, JournalError> {
    let (status, workflow) = (status.map(str::to_string), workflow.map(str::to_string));
    conn.call(move |client| {
        let rows = client
            .query(
                &format!(
                    "SELECT {ROW} FROM flow_runs
                     WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR workflow = $2)
                     ORDER BY submitted_at DESC, run_id DESC LIMIT $3"
                ),
                &[&status, &workflow, &limit],
            )
            .map_err(pg)?;
        Ok(rows.iter().map(run_row).collect())
    })
}

/// Locks run `run_id`'s row for the transaction, refusing a finished run
/// and one a live worker holds (`hint` ends that message); gives its status.
fn lock_unleased(tx: &mut postgres::Transaction<'_>, run_id: &str, hint: &str) -> Result<String, JournalError> {
    let row = tx
        .query_opt("SELECT status, lease_owner, lease_expires_at > now() FROM flow_runs WHERE run_id = $1 FOR UPDATE", &[&run_id])
        .map_err(pg)?;
    let Some(row) = row else { return Err(JournalError::Storage(format!("no run `{run_id}` in the database"))) };
    let (status, holder, live): (String, Option<String>, Option<bool>) = (row.get(0), row.get(1), row.get(2));
    if status == "finished" {
        return Err(JournalError::Storage(format!("run `{run_id}` has finished")));
    }
    if status == "running" && live == Some(true) {
        let holder = holder.unwrap_or_default();
        return Err(JournalError::Storage(format!("run `{run_id}` is being driven by worker {holder}{hint}")));
    }
    Ok(status)
}

/// Records a decision (a proposal) for a paused run and queues it again,
/// in one transaction that holds the run's row: refused while a worker
/// drives the run, and for a key already answered.
pub fn record_decision(conn: &PgConn, run_id: &str, key: &str, proposal: &str) -> Result<u64, JournalError> {
    let (run_id, key, proposal) = (run_id.to_string(), key.to_string(), proposal.to_string());
    conn.call(move |client| {
        let mut tx = client.transaction().map_err(pg)?;
        lock_unleased(&mut tx, &run_id, "; decide when it pauses (`flow status --db`)")?;
        let existing = tx.query("SELECT json FROM flow_proposals WHERE run_id = $1", &[&run_id]).map_err(pg)?;
        let answered = existing.iter().any(|r| {
            serde_json::from_str::<serde_json::Value>(&r.get::<_, String>(0))
                .is_ok_and(|v| v.get("key").and_then(|k| k.as_str()) == Some(key.as_str()))
        });
        if answered {
            return Err(JournalError::Storage(format!("`{key}` is already answered; a decision is recorded once")));
        }
        let n: i64 = tx.query_one("SELECT COALESCE(MAX(n), 0) + 1 FROM flow_proposals WHERE run_id = $1", &[&run_id]).map_err(pg)?.get(0);
        tx.execute("INSERT INTO flow_proposals (run_id, n, json) VALUES ($1, $2, $3)", &[&run_id, &n, &proposal]).map_err(pg)?;
        // A worker whose lease ran out may still be alive: the new epoch
        // fences it off, so it can neither overwrite this decision nor
        // release the run over it.
        tx.execute(
            "UPDATE flow_runs SET status = 'queued', epoch = epoch + 1, lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
             WHERE run_id = $1",
            &[&run_id],
        )
        .map_err(pg)?;
        tx.execute(&format!("NOTIFY {CHANNEL}"), &[]).map_err(pg)?;
        tx.commit().map_err(pg)?;
        Ok(n as u64)
    })
}

/// A connection that listens for runnable runs.
#[derive(Debug)]
pub struct Listener {
    conn: PgConn,
}

impl Listener {
    /// Connects and `LISTEN`s.
    pub fn connect(url: &str) -> Result<Listener, JournalError> {
        let conn = PgConn::connect(url)?;
        conn.call(|client| client.batch_execute(&format!("LISTEN {CHANNEL}")).map_err(pg))?;
        Ok(Listener { conn })
    }

    /// Waits until a notification arrives or `timeout` passes; gives
    /// whether one arrived (pending ones are all taken).
    pub fn wait(&self, timeout: Duration) -> Result<bool, JournalError> {
        use postgres::fallible_iterator::FallibleIterator;
        self.conn.call(move |client| {
            let mut notifications = client.notifications();
            let mut woken = false;
            while notifications.iter().next().map_err(pg)?.is_some() {
                woken = true;
            }
            if woken {
                return Ok(true);
            }
            let arrived = notifications.timeout_iter(timeout).next().map_err(pg)?.is_some();
            Ok(arrived)
        })
    }
}
