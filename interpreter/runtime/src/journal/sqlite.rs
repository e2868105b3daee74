//! The SQLite journal: WAL mode, one file per run directory, appends in
//! transactions that check the next `seq`.

use super::*;

/// The journal in a SQLite database (WAL mode).
#[derive(Debug)]
pub struct SqliteJournal {
    pub(super) conn: Connection,
}

pub(super) const SCHEMA: &str = "
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
    /// `json` is the event's encoding ([`event_json`]).
    pub(super) fn append_in(
        conn: &Connection,
        event: &Event,
        json: &str,
        lasts: &mut Vec<(String, u64)>,
    ) -> Result<Appended, JournalError> {
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

    pub(super) fn last_seq_in(conn: &Connection, run_id: &str) -> Result<u64, JournalError> {
        let last: i64 = conn
            .prepare_cached("SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id = ?1")
            .and_then(|mut stmt| stmt.query_row(params![run_id], |row| row.get(0)))
            .map_err(storage)?;
        seq_from_sql(last)
    }
}

/// Inserts or replaces a metadata entry.
const SET_META: &str =
    "INSERT INTO meta (run_id, key, value) VALUES (?1, ?2, ?3) ON CONFLICT (run_id, key) DO UPDATE SET value = excluded.value";

impl Journal for SqliteJournal {
    fn append(&mut self, event: &Event) -> Result<Appended, JournalError> {
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(storage)?;
        let appended = Self::append_in(&tx, event, &event_json(event)?, &mut Vec::new())?;
        if appended == Appended::New {
            tx.commit().map_err(storage)?;
        }
        Ok(appended)
    }

    fn append_batch(&mut self, events: &[Event]) -> Result<(), JournalError> {
        let json = events.iter().map(event_json).collect::<Result<Vec<_>, _>>()?;
        self.append_batch_encoded(events, &json)
    }

    fn append_batch_encoded(&mut self, events: &[Event], json: &[String]) -> Result<(), JournalError> {
        if events.is_empty() {
            return Ok(());
        }
        if events.len() != json.len() {
            return Err(JournalError::Storage(format!("{} events but {} encodings", events.len(), json.len())));
        }
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(storage)?;
        let mut lasts = Vec::new();
        for (event, json) in events.iter().zip(json) {
            // An error drops `tx`, which rolls the whole batch back.
            Self::append_in(&tx, event, json, &mut lasts)?;
        }
        tx.commit().map_err(storage)
    }

    fn commit_group(&mut self, run_id: &str, meta: &[(String, String)], events: &[Event], json: &[String]) -> Result<(), JournalError> {
        if events.len() != json.len() {
            return Err(JournalError::Storage(format!("{} events but {} encodings", events.len(), json.len())));
        }
        if meta.is_empty() && events.is_empty() {
            return Ok(());
        }
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(storage)?;
        for (key, value) in meta {
            tx.prepare_cached(SET_META).and_then(|mut stmt| stmt.execute(params![run_id, key, value])).map_err(storage)?;
        }
        let mut lasts = Vec::new();
        for (event, json) in events.iter().zip(json) {
            // An error drops `tx`, which rolls the whole group back.
            Self::append_in(&tx, event, json, &mut lasts)?;
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
        self.conn.prepare_cached(SET_META).and_then(|mut stmt| stmt.execute(params![run_id, key, value])).map_err(storage)?;
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
