//! The recorder: the one place that assigns `seq` and builds the event
//! envelope, stores artifacts by digest, and holds the instant of a step.

use super::*;

impl Engine {
    /// The time: the instant of the step being taken (the start, a
    /// response, a recovery, a cancellation: every event a step records has
    /// its instant; see [`Engine::at_one_instant`]), else the clock.
    pub(super) fn now(&self) -> u64 {
        self.step_ms.unwrap_or_else(|| self.cfg.clock.now_ms())
    }

    pub(super) fn elapsed(&self) -> u64 {
        self.now().saturating_sub(self.start_ms)
    }

    pub(super) fn emit(&mut self, producer: &str, body: Body, parent: Option<&Str>) -> Str {
        let producer = self.envelope.producer("", producer);
        self.emit_as(producer, body, parent)
    }

    /// [`Engine::emit`] with a producer already built.
    pub(super) fn emit_as(&mut self, producer: Str, body: Body, parent: Option<&Str>) -> Str {
        // Nothing is recorded after the run terminated (what was still
        // unwinding when it did changes nothing).
        if matches!(self.status, RunStatus::Terminated { .. }) {
            return Str::from("");
        }
        self.seq += 1;
        let now = self.now();
        let envelope = &mut self.envelope;
        let event_id = envelope.id(self.seq);
        // Events recorded within the same millisecond share its rendering.
        if envelope.time.0 != now || envelope.time.1.is_empty() {
            envelope.time = (now, Str::from(rfc3339(now)));
        }
        self.events.push(Event {
            run_id: envelope.run_id.clone(),
            execution_id: envelope.execution_id.clone(),
            seq: self.seq,
            event_id: event_id.clone(),
            parent_event_id: parent.cloned(),
            producer,
            body,
            time: envelope.time.1.clone(),
            prev: None,
        });
        if !self.policies.is_empty() {
            self.monitor_last(&event_id);
        }
        event_id
    }

    pub(super) fn store(&mut self, value: &Value, produced_by: &str, parent: Option<&Str>) -> ArtifactRef {
        self.store_as(value, || produced_by.to_string(), parent)
    }

    /// [`Engine::store`], naming the producer only when the artifact is new.
    pub(super) fn store_as(&mut self, value: &Value, produced_by: impl FnOnce() -> String, parent: Option<&Str>) -> ArtifactRef {
        let (artifact, bytes) = self.artifact_of(value);
        // Content-addressed: recorded once per run, however often it recurs.
        if self.recorded_digests.contains(&artifact.digest) {
            return artifact;
        }
        self.recorded_digests.insert(artifact.digest.clone());
        self.artifacts.push((artifact.clone(), bytes));
        self.emit("control", Body::ArtifactRecorded { schema_version: V, artifact: artifact.clone(), produced_by: produced_by() }, parent);
        artifact
    }

    /// The reference and bytes of `value` ([`artifact_ref`]). Small values
    /// recur (nulls, flags, counts): their digests are remembered by their
    /// bytes, so each is hashed with sha256 once per run.
    pub(super) fn artifact_of(&mut self, value: &Value) -> (ArtifactRef, Vec<u8>) {
        const SMALL: usize = 64;
        let bytes = serde_json::to_vec(value).unwrap_or_default();
        if bytes.len() > SMALL {
            return (artifact_ref_of(&bytes), bytes);
        }
        if let Some(artifact) = self.small_artifacts.get(&bytes) {
            return (artifact.clone(), bytes);
        }
        let artifact = artifact_ref_of(&bytes);
        self.small_artifacts.insert(bytes.clone(), artifact.clone());
        (artifact, bytes)
    }

    /// Runs `step`, and every effect it leads to, with the clock read
    /// once: every event they record has the same time (see
    /// [`Engine::now`]).
    pub(super) fn at_one_instant<R>(&mut self, step: impl FnOnce(&mut Engine) -> R) -> R {
        let outer = self.step_ms.is_none();
        if outer {
            self.step_ms = Some(self.cfg.clock.now_ms());
        }
        let result = step(self);
        if outer {
            self.drive();
            self.step_ms = None;
            self.waiting.end_step(self.seq);
        }
        result
    }

    /// Records that a human's `answer` on `subject` was applied as `action`.
    pub(super) fn record_applied(&mut self, subject: &str, answer: &HumanAnswer, action: flow_trace::Applied, request_event: &str) -> Str {
        // A timeout is recorded by the control plane, not a human.
        let producer = match answer.decision {
            flow_trace::Decision::Timeout => self.envelope.producer("", "control"),
            _ => self.envelope.producer("human.", &answer.by),
        };
        let body = events::decision_applied(subject, answer.decision, &answer.by, action);
        let parent = self.envelope.parent(request_event);
        self.emit_as(producer, body, Some(&parent))
    }
}

/// The strings of the event envelope, shared between events: the run and
/// execution ids, the time of the current millisecond, producers, and the
/// ids of recent events (which later events name as parent).
#[derive(Debug)]
pub(super) struct Envelope {
    pub(super) run_id: Str,
    pub(super) execution_id: Str,
    pub(super) time: (u64, Str),
    pub(super) producers: FxHashSet<Str>,
    pub(super) control: Str,
    /// Recent event ids, each at its `seq` modulo [`RECENT_IDS`].
    pub(super) recent: Vec<(u64, Str)>,
    pub(super) scratch: String,
}

/// How many recent event ids [`Envelope`] keeps for parents to share.
pub(super) const RECENT_IDS: u64 = 32;
/// How many producers [`Envelope`] keeps (control, agents, tools, gates,
/// humans, and the nodes that hand off or delegate).
pub(super) const PRODUCERS: usize = 16_384;

impl Envelope {
    pub(super) fn new(run_id: &str, execution_id: &str) -> Envelope {
        Envelope {
            run_id: Str::from(run_id),
            execution_id: Str::from(execution_id),
            time: (0, Str::from("")),
            producers: FxHashSet::default(),
            control: Str::from("control"),
            recent: vec![(0, Str::from("")); RECENT_IDS as usize],
            scratch: String::new(),
        }
    }

    /// The id of event `seq`, remembered as recent.
    pub(super) fn id(&mut self, seq: u64) -> Str {
        self.scratch.clear();
        Event::push_id(&mut self.scratch, &self.run_id, seq);
        let id = Str::from(self.scratch.as_str());
        self.recent[(seq % RECENT_IDS) as usize] = (seq, id.clone());
        id
    }

    /// `parent` as a shared string: the recent event id it is, if any (an
    /// id ends with its `seq`, which says where it would be kept).
    pub(super) fn parent(&self, parent: &str) -> Str {
        let seq = parent.rsplit_once('/').and_then(|(_, n)| n.parse::<u64>().ok());
        if let Some(seq) = seq {
            let (kept, id) = &self.recent[(seq % RECENT_IDS) as usize];
            if *kept == seq && &**id == parent {
                return id.clone();
            }
        }
        Str::from(parent)
    }

    /// The producer `prefix` + `name`, shared.
    pub(super) fn producer(&mut self, prefix: &str, name: &str) -> Str {
        // Most events are the control plane's own.
        if prefix.is_empty() && name == "control" {
            return self.control.clone();
        }
        self.scratch.clear();
        self.scratch.push_str(prefix);
        self.scratch.push_str(name);
        if let Some(p) = self.producers.get(self.scratch.as_str()) {
            return p.clone();
        }
        let p = Str::from(self.scratch.as_str());
        if self.producers.len() < PRODUCERS {
            self.producers.insert(p.clone());
        }
        p
    }
}
