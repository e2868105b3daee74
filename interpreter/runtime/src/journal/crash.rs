//! A test decorator: a journal that aborts the process right after event
//! `n` is durable — `kill -9` at that event boundary. The driver installs
//! it only for the `FLOW_CRASH_AFTER_SEQ` test hook; the production path
//! has no branch for it.

use super::*;

/// A [`Journal`] that persists events up to seq `after` and then aborts
/// (or, [`CrashAfter::in_process`], fails every append from there on: the
/// driver gives up with an error and its state is dropped, as a crash
/// would drop it, without ending the test's process).
pub struct CrashAfter {
    inner: Box<dyn Journal>,
    after: u64,
    in_process: bool,
}

impl std::fmt::Debug for CrashAfter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CrashAfter").field("after", &self.after).finish_non_exhaustive()
    }
}

impl CrashAfter {
    /// Wraps `inner`: the process aborts once event `after` is appended.
    pub fn new(inner: Box<dyn Journal>, after: u64) -> CrashAfter {
        CrashAfter { inner, after, in_process: false }
    }

    /// Fails instead of aborting the process.
    pub fn in_process(mut self, yes: bool) -> CrashAfter {
        self.in_process = yes;
        self
    }

    fn crash_if_reached(&self, last: u64) -> Result<(), JournalError> {
        if last < self.after {
            return Ok(());
        }
        if self.in_process {
            return Err(JournalError::Storage(format!("crashed after event {} (test hook)", self.after)));
        }
        // Simulates kill -9 at this event boundary.
        std::process::abort();
    }
}

impl Journal for CrashAfter {
    fn append(&mut self, event: &Event) -> Result<Appended, JournalError> {
        if event.seq > self.after {
            self.crash_if_reached(event.seq)?;
        }
        let appended = self.inner.append(event)?;
        self.crash_if_reached(event.seq)?;
        Ok(appended)
    }

    fn append_batch(&mut self, events: &[Event]) -> Result<(), JournalError> {
        let kept = events.iter().take_while(|e| e.seq <= self.after).count();
        self.inner.append_batch(&events[..kept])?;
        match events.last() {
            Some(last) => self.crash_if_reached(last.seq),
            None => Ok(()),
        }
    }

    fn append_batch_encoded(&mut self, events: &[Event], json: &[String]) -> Result<(), JournalError> {
        let kept = events.iter().take_while(|e| e.seq <= self.after).count();
        self.inner.append_batch_encoded(&events[..kept], &json[..kept.min(json.len())])?;
        match events.last() {
            Some(last) => self.crash_if_reached(last.seq),
            None => Ok(()),
        }
    }

    /// The entries, and the events up to the crash point (a crash inside
    /// a group: as if it had been cut there, which an atomic group never
    /// is — a harder case for resume than a real crash).
    fn commit_group(&mut self, run_id: &str, meta: &[(String, String)], events: &[Event], json: &[String]) -> Result<(), JournalError> {
        let kept = events.iter().take_while(|e| e.seq <= self.after).count();
        self.inner.commit_group(run_id, meta, &events[..kept], &json[..kept.min(json.len())])?;
        match events.last() {
            Some(last) => self.crash_if_reached(last.seq),
            None => Ok(()),
        }
    }

    fn events(&self, run_id: &str) -> Result<Vec<Event>, JournalError> {
        self.inner.events(run_id)
    }

    fn last_seq(&self, run_id: &str) -> Result<u64, JournalError> {
        self.inner.last_seq(run_id)
    }

    fn set_meta(&mut self, run_id: &str, key: &str, value: &str) -> Result<(), JournalError> {
        self.inner.set_meta(run_id, key, value)
    }

    fn meta(&self, run_id: &str, key: &str) -> Result<Option<String>, JournalError> {
        self.inner.meta(run_id, key)
    }

    fn runs(&self) -> Result<Vec<String>, JournalError> {
        self.inner.runs()
    }

    fn check_fence(&mut self) -> Result<(), JournalError> {
        self.inner.check_fence()
    }
}
