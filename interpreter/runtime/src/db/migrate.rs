//! The database schema, as numbered migrations applied in order by
//! `flow db migrate` (each in its own transaction, recorded in
//! `flow_schema_migrations`). A migration, once released, is never edited:
//! a change is a new one.

use super::{pg, PgConn};
use crate::journal::JournalError;

/// The migrations: `(version, name, SQL)`, in order.
pub const MIGRATIONS: &[(i32, &str, &str)] = &[(
    1,
    "runs, events, metadata, proposals, artifacts",
    "
CREATE TABLE flow_runs (
    run_id TEXT PRIMARY KEY,
    workflow TEXT,
    -- queued: a worker may claim it; running: claimed (its lease may have
    -- run out); paused: waiting for a decision; finished: terminated;
    -- error: a worker could not drive it (see `error`).
    status TEXT NOT NULL CHECK (status IN ('queued', 'running', 'paused', 'finished', 'error')),
    -- When finished: the run's own status (success, failed, partial, ...) and exit code.
    outcome TEXT,
    exit_code INTEGER,
    error TEXT,
    submitted_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- The lease: who drives the run, until when, under which fencing epoch.
    lease_owner TEXT,
    lease_expires_at TIMESTAMPTZ,
    epoch BIGINT NOT NULL DEFAULT 0,
    last_seq BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX flow_runs_claimable ON flow_runs (submitted_at) WHERE status IN ('queued', 'running');
CREATE INDEX flow_runs_by_status ON flow_runs (status, workflow);
-- Events and proposals name their run without a foreign key (a check per
-- row, a seventh of a commit's time): every write locks the run's row
-- first, so none names a missing run. Deleting a run deletes them too.
CREATE TABLE flow_events (
    run_id TEXT NOT NULL,
    seq BIGINT NOT NULL CHECK (seq > 0),
    event_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    json TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE TABLE flow_meta (
    run_id TEXT NOT NULL REFERENCES flow_runs (run_id) ON DELETE CASCADE,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (run_id, key)
);
-- Data-plane responses and human decisions, in the order they were kept.
CREATE TABLE flow_proposals (
    run_id TEXT NOT NULL,
    n BIGINT NOT NULL CHECK (n > 0),
    json TEXT NOT NULL,
    PRIMARY KEY (run_id, n)
);
-- Content-addressed: shared by every run that made the same value.
CREATE TABLE flow_artifacts (
    digest TEXT PRIMARY KEY,
    size BIGINT NOT NULL,
    bytes BYTEA NOT NULL
);
",
)];

/// Applies the migrations the database lacks; gives the versions applied
/// now. Safe to run from several processes at once (an advisory lock
/// serializes them).
pub fn migrate(conn: &PgConn) -> Result<Vec<(i32, String)>, JournalError> {
    conn.call(|client| {
        let mut tx = client.transaction().map_err(pg)?;
        // One migrator at a time, for this transaction.
        tx.execute("SELECT pg_advisory_xact_lock(7467001)", &[]).map_err(pg)?;
        tx.batch_execute(
            "CREATE TABLE IF NOT EXISTS flow_schema_migrations (
                version INTEGER PRIMARY KEY,
                name TEXT NOT NULL,
                applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
            )",
        )
        .map_err(pg)?;
        let mut applied = Vec::new();
        for (version, name, sql) in MIGRATIONS {
            let done = tx.query_opt("SELECT 1 FROM flow_schema_migrations WHERE version = $1", &[version]).map_err(pg)?;
            if done.is_some() {
                continue;
            }
            tx.batch_execute(sql).map_err(pg)?;
            tx.execute("INSERT INTO flow_schema_migrations (version, name) VALUES ($1, $2)", &[version, name]).map_err(pg)?;
            applied.push((*version, name.to_string()));
        }
        tx.commit().map_err(pg)?;
        Ok(applied)
    })
}

/// The migrations the database lacks (a worker refuses to start on an
/// unmigrated database, with a message that names `flow db migrate`).
pub fn pending_migrations(conn: &PgConn) -> Result<Vec<i32>, JournalError> {
    conn.call(|client| {
        let exists = client.query_one("SELECT to_regclass('flow_schema_migrations') IS NOT NULL", &[]).map_err(pg)?.get::<_, bool>(0);
        let done: Vec<i32> = if exists {
            client.query("SELECT version FROM flow_schema_migrations", &[]).map_err(pg)?.iter().map(|r| r.get(0)).collect()
        } else {
            Vec::new()
        };
        Ok(MIGRATIONS.iter().map(|(v, _, _)| *v).filter(|v| !done.contains(v)).collect())
    })
}
