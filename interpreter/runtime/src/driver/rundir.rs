//! The run directory: the journal, its metadata (the plan, the run's
//! options), proposals, the artifacts and the trace file.

use super::*;

/// What a run directory records about its run, besides events.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunMeta {
    pub run_id: String,
    pub workflow: Option<String>,
    pub base_dir: PathBuf,
    pub input: Value,
    pub started_ms: u64,
    pub executions: u32,
    #[serde(default)]
    pub replay: Option<(PathBuf, bool)>,
    /// Whether `base_dir` and the cassette are relative to the run
    /// directory (so `flow resume` and `flow replay` work from any working
    /// directory); false in runs recorded before, whose paths are relative
    /// to the directory they were started from.
    #[serde(default)]
    pub paths_from_run_dir: bool,
}

impl RunMeta {
    /// The metadata as recorded in `run_dir`: the source directory and the
    /// cassette relative to it (lexically, from absolute paths).
    pub fn with_paths_from(mut self, run_dir: &Path) -> RunMeta {
        let Ok(run_dir) = std::path::absolute(run_dir) else { return self };
        let relative = |path: &Path| -> Option<PathBuf> {
            let path = std::path::absolute(path).ok()?;
            Some(PathBuf::from(flow_check::plan::relative_dir(&normalized(&run_dir), &normalized(&path))))
        };
        let Some(base_dir) = relative(&self.base_dir) else { return self };
        let replay = match &self.replay {
            Some((path, strict)) => match relative(path) {
                Some(path) => Some((path, *strict)),
                None => return self,
            },
            None => None,
        };
        self.base_dir = base_dir;
        self.replay = replay;
        self.paths_from_run_dir = true;
        self
    }

    /// The run's source directory, for a run in `run_dir`.
    pub fn base_dir_in(&self, run_dir: &Path) -> PathBuf {
        if self.paths_from_run_dir {
            normalized(&run_dir.join(&self.base_dir))
        } else {
            self.base_dir.clone()
        }
    }

    /// The run's cassette and whether its replay is strict, for a run in `run_dir`.
    pub fn replay_in(&self, run_dir: &Path) -> Option<(PathBuf, bool)> {
        let (path, strict) = self.replay.as_ref()?;
        let path = if self.paths_from_run_dir { normalized(&run_dir.join(path)) } else { path.clone() };
        Some((path, *strict))
    }
}

/// `a/./b/../c` → `a/c`, lexically (`..` past the start is kept).
fn normalized(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir if matches!(out.components().next_back(), Some(Component::Normal(_))) => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    if out.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        out
    }
}

/// A recorded data-plane response.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Proposal {
    pub key: String,
    pub response: Response,
}

pub(super) const META: &str = "run";

pub(super) const PLAN: &str = "plan";

pub(super) fn proposal_key(n: u64) -> String {
    format!("proposal/{n:08}")
}

/// Reads every recorded proposal of a run, in order.
pub fn proposals(journal: &dyn Journal, run_id: &str) -> Result<Vec<Proposal>, RunError> {
    let mut out = Vec::new();
    while let Some(text) = journal.meta(run_id, &proposal_key(out.len() as u64 + 1))? {
        out.push(serde_json::from_str(&text).map_err(|e| RunError::Storage(format!("corrupt proposal: {e}")))?);
    }
    Ok(out)
}

/// Appends a proposal; refuses a second one for the same key.
pub fn append_proposal(journal: &mut dyn Journal, run_id: &str, proposal: &Proposal) -> Result<u64, RunError> {
    let existing = proposals(journal, run_id)?;
    if existing.iter().any(|p| p.key == proposal.key) {
        return Err(RunError::Usage(format!("`{}` is already answered; a decision is recorded once", proposal.key)));
    }
    let n = existing.len() as u64 + 1;
    let text = serde_json::to_string(proposal).map_err(|e| RunError::Storage(e.to_string()))?;
    journal.set_meta(run_id, &proposal_key(n), &text)?;
    Ok(n)
}

/// Opens a run directory's journal.
pub fn open_journal(run_dir: &Path, durable: bool) -> Result<SqliteJournal, RunError> {
    let path = run_dir.join("journal.sqlite");
    if !path.exists() {
        return Err(RunError::Usage(format!("{} is not a run directory (no journal.sqlite)", run_dir.display())));
    }
    Ok(SqliteJournal::open(&path, durable)?)
}

/// The run id recorded in a run directory.
pub fn run_id_of(journal: &dyn Journal) -> Result<String, RunError> {
    journal.runs()?.into_iter().next().ok_or_else(|| RunError::Usage("the journal records no run".into()))
}

/// The run metadata and plan recorded in a journal.
pub fn load_meta(journal: &dyn Journal, run_id: &str) -> Result<(RunMeta, Plan), RunError> {
    let meta = journal.meta(run_id, META)?.ok_or_else(|| RunError::Storage("the journal has no run metadata".into()))?;
    let meta: RunMeta = serde_json::from_str(&meta).map_err(|e| RunError::Storage(format!("corrupt run metadata: {e}")))?;
    let plan = journal.meta(run_id, PLAN)?.ok_or_else(|| RunError::Storage("the journal has no plan".into()))?;
    let plan = Plan::from_json(&plan).map_err(|e| RunError::Storage(format!("corrupt plan in the journal: {e}")))?;
    Ok((meta, plan))
}

pub(super) fn storage(opts: &Options) -> Result<Storage, RunError> {
    if opts.in_memory {
        return Ok((Box::new(MemoryJournal::sequence_only()), Box::new(MemoryArtifacts::default())));
    }
    std::fs::create_dir_all(&opts.run_dir).map_err(|e| RunError::Usage(format!("cannot create {}: {e}", opts.run_dir.display())))?;
    let journal: Box<dyn Journal> = Box::new(SqliteJournal::open(&opts.run_dir.join("journal.sqlite"), opts.durable)?);
    // The crash test hook decorates the journal; nothing else knows of it.
    let journal = match opts.crash_after_seq {
        Some(n) => Box::new(CrashAfter::new(journal, n).in_process(opts.crash_in_process)),
        None => journal,
    };
    let artifacts = DirArtifacts::open(&opts.run_dir.join("artifacts"))?;
    Ok((journal, Box::new(artifacts)))
}

pub(super) fn trace_file(opts: &Options, truncate: bool) -> Result<Option<std::io::BufWriter<std::fs::File>>, RunError> {
    if opts.in_memory || !opts.write_trace {
        return Ok(None);
    }
    let path = opts.run_dir.join("trace.jsonl");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(!truncate)
        .write(true)
        .truncate(truncate)
        .open(&path)
        .map_err(|e| RunError::Storage(format!("cannot open {}: {e}", path.display())))?;
    Ok(Some(std::io::BufWriter::new(file)))
}

/// The decision a paused run waits for: (key, request event payload).
#[derive(Debug, Clone)]
pub struct PendingDecision {
    pub key: String,
    pub subject: String,
    pub deciders: Vec<String>,
    pub decisions: Vec<flow_trace::Decision>,
    /// When the subject's timeout runs out (RFC 3339), if it has one.
    pub expires_at: Option<String>,
    /// Where the request went: the deciders' `contact`s.
    pub contacts: Vec<String>,
}

/// Every decision requested in `events`, with its command key, in order.
pub(super) fn requested_decisions(events: &[Event]) -> Vec<PendingDecision> {
    let mut rounds: HashMap<String, u32> = HashMap::new();
    let mut out = Vec::new();
    for event in events {
        if let Body::DecisionRequested { subject, deciders, decisions, expires_at, contacts, .. } = &event.body {
            let round = rounds.entry(subject.clone()).or_default();
            *round += 1;
            let key = crate::keys::CommandKey::Decision { subject, round: *round }.to_key();
            let (deciders, decisions, expires_at) = (deciders.clone(), decisions.clone(), expires_at.clone());
            let contacts = contacts.clone();
            out.push(PendingDecision { key, subject: subject.clone(), deciders, decisions, expires_at, contacts });
        }
    }
    out
}

/// Decisions requested in the journal and not yet answered.
pub fn pending_decisions(journal: &dyn Journal, run_id: &str) -> Result<Vec<PendingDecision>, RunError> {
    let events = journal.events(run_id)?;
    let answered: HashSet<String> = proposals(journal, run_id)?.into_iter().map(|p| p.key).collect();
    let mut out: Vec<PendingDecision> = requested_decisions(&events).into_iter().filter(|p| !answered.contains(&p.key)).collect();
    if matches!(events.last().map(|e| &e.body), Some(Body::RunTerminated { .. })) {
        out.clear();
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(base_dir: &str, cassette: Option<&str>) -> RunMeta {
        RunMeta {
            run_id: "r".into(),
            workflow: None,
            base_dir: PathBuf::from(base_dir),
            input: Value::Null,
            started_ms: 0,
            executions: 1,
            replay: cassette.map(|c| (PathBuf::from(c), false)),
            paths_from_run_dir: false,
        }
    }

    #[test]
    fn paths_are_recorded_relative_to_the_run_directory_and_read_back_from_it() {
        let recorded = meta("/p/flows", Some("/p/flows/a.cassette.yaml")).with_paths_from(Path::new("/p/.flow/runs/r1"));
        assert!(recorded.paths_from_run_dir);
        assert_eq!(recorded.base_dir, PathBuf::from("../../../flows"));
        assert_eq!(recorded.replay, Some((PathBuf::from("../../../flows/a.cassette.yaml"), false)));
        // Read back from wherever the run directory now is.
        assert_eq!(recorded.base_dir_in(Path::new("/q/.flow/runs/r1")), PathBuf::from("/q/flows"));
        assert_eq!(recorded.replay_in(Path::new("/q/.flow/runs/r1")), Some((PathBuf::from("/q/flows/a.cassette.yaml"), false)));
    }

    #[test]
    fn metadata_recorded_before_keeps_its_paths() {
        let old: RunMeta = serde_json::from_str(
            r#"{"run_id":"r","workflow":null,"base_dir":"examples/x","input":null,"started_ms":0,"executions":1,"replay":["examples/x/x.cassette.yaml",true]}"#,
        )
        .expect("an old record");
        assert!(!old.paths_from_run_dir);
        assert_eq!(old.base_dir_in(Path::new("/anywhere/run")), PathBuf::from("examples/x"));
        assert_eq!(old.replay_in(Path::new("/anywhere/run")), Some((PathBuf::from("examples/x/x.cassette.yaml"), true)));
    }
}
