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
