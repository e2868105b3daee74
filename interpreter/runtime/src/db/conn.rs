//! One PostgreSQL connection on a thread of its own.
//!
//! The synchronous `postgres` client runs its own small tokio runtime, so
//! it cannot be called from the driver's async tasks directly; and the
//! [`crate::journal::Journal`] trait is synchronous (as SQLite is). A
//! [`PgConn`] owns its connection on a dedicated thread and runs jobs on
//! it in order: a call blocks its caller for one round trip, as a SQLite
//! commit does.

use super::pg;
use crate::journal::JournalError;
use postgres::{Client, NoTls};
use std::sync::mpsc;

type Job = Box<dyn FnOnce(&mut Client) + Send>;

/// A connection to PostgreSQL, cheap to clone (clones share it: their jobs
/// run one after another).
#[derive(Clone)]
pub struct PgConn {
    jobs: mpsc::Sender<Job>,
}

impl std::fmt::Debug for PgConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgConn").finish_non_exhaustive()
    }
}

impl PgConn {
    /// Connects (no TLS: the server is on this machine or a private
    /// network; see docs/scaling.md). A session left idle inside a
    /// transaction — a stopped process — is ended by the server after 10 s,
    /// so it never holds a run's row lock for long.
    pub fn connect(url: &str) -> Result<PgConn, JournalError> {
        let (jobs, inbox) = mpsc::channel::<Job>();
        let (ready, connected) = mpsc::sync_channel::<Result<(), JournalError>>(1);
        let (url, shown) = (url.to_string(), url.to_string());
        std::thread::Builder::new()
            .name("flow-postgres".into())
            .spawn(move || {
                let mut client = match Client::connect(&url, NoTls)
                    .and_then(|mut c| c.batch_execute("SET idle_in_transaction_session_timeout = '10s'").map(|_| c))
                {
                    Ok(client) => client,
                    Err(e) => {
                        let _ = ready.send(Err(pg(e)));
                        return;
                    }
                };
                let _ = ready.send(Ok(()));
                // Ends when every clone is dropped.
                while let Ok(job) = inbox.recv() {
                    job(&mut client);
                }
            })
            .map_err(|e| JournalError::Storage(format!("cannot start the PostgreSQL connection's thread: {e}")))?;
        match connected.recv() {
            Ok(Ok(())) => Ok(PgConn { jobs }),
            Ok(Err(e)) => Err(JournalError::Storage(format!("cannot connect to {}: {e}", super::redact_url(&shown)))),
            Err(_) => Err(closed()),
        }
    }

    /// Runs `job` on the connection and waits for its result.
    pub fn call<R: Send + 'static>(
        &self,
        job: impl FnOnce(&mut Client) -> Result<R, JournalError> + Send + 'static,
    ) -> Result<R, JournalError> {
        let (answer, result) = mpsc::sync_channel(1);
        self.jobs
            .send(Box::new(move |client: &mut Client| {
                let _ = answer.send(job(client));
            }))
            .map_err(|_| closed())?;
        result.recv().map_err(|_| closed())?
    }
}

fn closed() -> JournalError {
    JournalError::Storage("the PostgreSQL connection is closed".into())
}
