//! The in-memory journal: the same semantics as SQLite's, for tests and
//! benchmarks (and a sequence-only one that keeps nothing).

use super::*;

/// One run in a [`MemoryJournal`].
#[derive(Debug, Default)]
pub(super) struct MemoryRun {
    /// `events[i]` has seq `i + 1` (seqs have no gaps).
    pub(super) events: Vec<Event>,
    /// Events appended but not kept (a sequence-only journal).
    pub(super) dropped: u64,
    pub(super) meta: BTreeMap<String, String>,
}

/// The journal in memory, with the semantics of [`SqliteJournal`]; for
/// tests and benchmarks.
#[derive(Debug, Default)]
pub struct MemoryJournal {
    pub(super) runs: BTreeMap<String, MemoryRun>,
    /// Check the sequence but keep no events (benchmarks, embedders that
    /// only observe).
    pub(super) sequence_only: bool,
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

    pub(super) fn recorded(&self, run_id: &str, seq: u64) -> Option<&Event> {
        let run = self.runs.get(run_id)?;
        let index = usize::try_from(seq.checked_sub(1)?).ok()?;
        run.events.get(index)
    }

    pub(super) fn last(&self, run_id: &str) -> u64 {
        self.runs.get(run_id).map_or(0, |run| run.events.len() as u64 + run.dropped)
    }

    pub(super) fn keep(&mut self, event: &Event) {
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
