//! Runs shared through PostgreSQL: the journal and artifact store behind
//! the same traits as SQLite's ([`PgJournal`], [`PgArtifacts`]), versioned
//! migrations ([`migrate`]), and the run queue that workers claim runs
//! from under leases with fencing epochs ([`queue`]).
//!
//! One event schema for both stores: an event is stored as the JSON line
//! the trace holds (hash chain included), compared byte for byte on a
//! duplicate append, exactly as [`crate::journal::SqliteJournal`] does.
//!
//! Fencing: a worker that claims a run increments the run's `epoch`; every
//! write it makes (a group commit, a proposal, a release) runs in a
//! transaction that locks the run's row and checks that the epoch is still
//! the one it claimed. A worker that lost its lease (stopped, partitioned,
//! too slow to heartbeat) and was taken over finds a newer epoch: its
//! write is refused ([`JournalError::Fenced`]) and rolled back whole.

mod conn;
pub mod export;
mod journal;
mod migrate;
pub mod queue;
pub mod worker;

pub use conn::PgConn;
pub use journal::{fenced_storage, PgArtifacts, PgJournal};
pub use migrate::{migrate, pending_migrations, MIGRATIONS};

use crate::journal::JournalError;

/// A PostgreSQL error as a journal error (the server's message, with its
/// SQLSTATE when it has one).
pub(crate) fn pg(error: postgres::Error) -> JournalError {
    match error.as_db_error() {
        Some(db) => JournalError::Storage(format!("PostgreSQL: {} ({})", db.message(), db.code().code())),
        None => JournalError::Storage(format!("PostgreSQL: {error}")),
    }
}

/// The URL (or `key=value` connection string) with its password replaced
/// by `***`, for messages: in the user info, a `password=` parameter or
/// key.
pub fn redact_url(url: &str) -> String {
    let mut out = match url.split_once("://") {
        Some((scheme, rest)) => match rest.split_once('@') {
            Some((userinfo, host)) if !userinfo.contains('/') => match userinfo.split_once(':') {
                Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
                None => url.to_string(),
            },
            _ => url.to_string(),
        },
        None => url.to_string(),
    };
    let mut from = 0;
    while let Some(at) = out[from..].find("password=").map(|i| from + i + "password=".len()) {
        let end = out[at..].find(|c: char| c == '&' || c.is_whitespace()).map_or(out.len(), |i| at + i);
        out.replace_range(at..end, "***");
        from = at + 3;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_never_reaches_a_message() {
        assert_eq!(redact_url("postgres://flow:s3cret@127.0.0.1:5433/flow"), "postgres://flow:***@127.0.0.1:5433/flow");
        assert_eq!(redact_url("postgres://flow@127.0.0.1/flow"), "postgres://flow@127.0.0.1/flow");
        assert_eq!(redact_url("host=127.0.0.1 user=flow"), "host=127.0.0.1 user=flow");
        assert_eq!(redact_url("host=127.0.0.1 password=s3cret user=flow"), "host=127.0.0.1 password=*** user=flow");
        assert_eq!(redact_url("postgres://h/db?user=flow&password=s3cret&x=1"), "postgres://h/db?user=flow&password=***&x=1");
        assert_eq!(redact_url("postgres://u:p@h/db?password=q"), "postgres://u:***@h/db?password=***");
    }
}
