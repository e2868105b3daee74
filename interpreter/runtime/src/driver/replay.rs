//! Replay: a resumed run feeds the journal's proposals to a fresh engine,
//! which must make the same events (else the run is refused as diverged).

use super::*;

/// Strips what may legitimately differ between a recorded event and its
/// replay: the execution, the time, lease owners and expiry instants.
pub(super) fn comparable(event: &Event) -> Value {
    let mut v = serde_json::to_value(event).unwrap_or(Value::Null);
    if let Some(o) = v.as_object_mut() {
        o.remove("execution_id");
        o.remove("time");
        // Set as the event is written; replayed events have none yet.
        o.remove("prev");
        if let Some(p) = o.get_mut("payload").and_then(Value::as_object_mut) {
            p.remove("owner");
            p.remove("expires_at");
            p.remove("duration_ms");
        }
    }
    v
}

/// Whether (and when) an answer is kept as a proposal in the journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Keep {
    /// Not kept: it was read from the journal (a replay).
    No,
    /// Kept now, with what was collected before it: the answer of a
    /// model, a tool that waits, a human — something outside the run.
    Now,
    /// Kept with the next group commit: the answer of a pure builtin
    /// call, which a resume computes again the same if it is lost.
    Grouped,
}

impl Driver {
    /// A decision's deadline is the one its request recorded, not the
    /// replay's clock plus the timeout.
    pub(super) fn restore_decision_expiries(&mut self) {
        for requested in requested_decisions(&self.recorded) {
            if let Some(at) = &requested.expires_at {
                self.engine.restore_decision_expiry(&requested.key, at);
            }
        }
    }

    pub(super) fn feed(&mut self, key: &str, response: Response, keep: Keep) -> Result<(), RunError> {
        tracing::debug!(key, ?keep, "response");
        // An in-memory run retains nothing to resume from: its proposals
        // would never be read.
        if keep != Keep::No && !self.opts.in_memory {
            // This driver is the run's only writer: it knows the next
            // position without reading the others back.
            let proposal = Proposal { key: key.to_string(), response: response.clone() };
            let text = serde_json::to_string(&proposal).map_err(|e| RunError::Storage(e.to_string()))?;
            self.proposals_written += 1;
            self.unpersisted_meta.push((proposal_key(self.proposals_written), text));
            // The answer of something external is durable before anything
            // follows from it (with what was collected before it).
            if keep == Keep::Now {
                self.persist()?;
            }
        }
        self.known.remove(key);
        self.engine.on_response(key, response).map_err(RunError::Diverged)?;
        match keep {
            Keep::Grouped => self.collect(),
            _ => self.flush(),
        }
    }

    /// Replays recorded proposals until the journal is exhausted. Returns
    /// the proposals not yet consumed (answers recorded after the journal
    /// ended: decisions given with `flow approve`, or responses persisted
    /// just before a crash).
    pub(super) fn replay(&mut self, proposals: Vec<Proposal>) -> Result<Vec<Proposal>, RunError> {
        self.engine.replaying = true;
        let mut queue: VecDeque<Proposal> = proposals.into();
        loop {
            self.flush()?;
            let seq = self.engine.seq();
            if seq as usize >= self.recorded.len() {
                break;
            }
            let next = &self.recorded[seq as usize];
            match &next.body {
                Body::RunPaused { waiting_on, .. } => {
                    let waiting_on = waiting_on.clone();
                    self.engine.pause(&waiting_on);
                    self.flush()?;
                    // The journal's last word stays: a run that ended paused
                    // replays to paused (`flow resume` unpauses it).
                    if (seq as usize) + 1 < self.recorded.len() {
                        self.engine.unpause();
                    }
                    continue;
                }
                Body::RunResumed { after_seq, .. } => {
                    let after = *after_seq;
                    let answered: Vec<String> = queue.iter().map(|p| p.key.clone()).collect();
                    self.engine.recover(after, &answered);
                    continue;
                }
                Body::LeaseHeartbeat { .. } => {
                    self.engine.heartbeat();
                    continue;
                }
                // The operator cancelled here (SIGINT): nothing recorded
                // caused it, so the replay cancels where the run did.
                Body::Warning { message, .. } if next.parent_event_id.is_none() && message == flow_check::events::CANCELLED => {
                    self.engine.cancel();
                    continue;
                }
                _ => {}
            }
            let Some(proposal) = queue.front() else {
                return Err(RunError::Diverged(format!("event {} (`{}`) has no recorded cause", seq + 1, next.kind())));
            };
            if !self.engine.is_outstanding(&proposal.key) {
                return Err(RunError::Diverged(format!("the recorded answer `{}` answers no outstanding request", proposal.key)));
            }
            let proposal = queue.pop_front().expect("front exists");
            self.feed(&proposal.key, proposal.response, Keep::No)?;
        }
        self.engine.replaying = false;
        Ok(queue.into())
    }
}
