//! Record and replay: cassettes of requests and their responses, replayed
//! strictly or as a fallback, with the nearest request shown on a miss.

use super::*;

/// One recorded request and its response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// `model`, `tool`, `human` or `probe`.
    pub kind: String,
    /// The request's key (recomputed on load, so hand-written entries may omit it).
    #[serde(default)]
    pub key: String,
    pub request: Request,
    pub response: Response,
}

/// A cassette: every provider, tool, human and probe result of a run,
/// keyed by its request.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Cassette {
    /// Format version (1).
    pub flow_cassette: u32,
    pub entries: Vec<Entry>,
}

impl Cassette {
    pub fn load(path: &Path) -> Result<Cassette, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read cassette {}: {e}", path.display()))?;
        let mut cassette: Cassette = flow_check::limits::yaml_from_str(&format!("the cassette {}", path.display()), &text)?;
        for entry in &mut cassette.entries {
            entry.key = entry.request.key();
            entry.kind = entry.request.kind().to_string();
        }
        Ok(cassette)
    }

    pub fn save(&self, path: &Path) -> Result<(), String> {
        let text = serde_yaml::to_string(self).map_err(|e| format!("cannot encode the cassette: {e}"))?;
        let tmp = path.with_extension("yaml.tmp");
        std::fs::write(&tmp, text).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, path).map_err(|e| format!("cannot write {}: {e}", path.display()))
    }
}

/// How a cassette is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayMode {
    /// Every request must be in the cassette; a miss fails the run.
    /// (Scripted providers, offline and deterministic, still answer
    /// from their scripts what the cassette does not hold.)
    Strict,
    /// Recorded requests are replayed; others run live.
    Lenient,
}

/// A replay miss: the request and its difference from the nearest recorded one.
#[derive(Debug, Clone)]
pub struct Miss(pub String);

pub(super) struct Replayer {
    pub(super) by_key: HashMap<String, Vec<Response>>,
    pub(super) used: HashMap<String, usize>,
    pub(super) entries: Vec<Entry>,
    pub(super) mode: ReplayMode,
}

impl Replayer {
    pub(super) fn of(cassette: Cassette, mode: ReplayMode) -> Replayer {
        let mut by_key: HashMap<String, Vec<Response>> = HashMap::new();
        for entry in &cassette.entries {
            by_key.entry(entry.key.clone()).or_default().push(entry.response.clone());
        }
        Replayer { by_key, used: HashMap::new(), entries: cassette.entries, mode }
    }

    /// The next recorded answer to the request keyed `key`: the n-th
    /// recording the n-th time it is asked (the last repeats).
    pub(super) fn next(&mut self, key: &str) -> Option<Response> {
        let responses = self.by_key.get(key)?;
        let used = self.used.entry(key.to_string()).or_default();
        let response = responses[(*used).min(responses.len() - 1)].clone();
        *used += 1;
        Some(response)
    }
}

/// Counts differing leaves between two JSON values.
pub(super) fn diff_count(a: &Value, b: &Value) -> usize {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut n = 0;
            for (k, v) in x {
                n += y.get(k).map(|w| diff_count(v, w)).unwrap_or(1);
            }
            n + y.keys().filter(|k| !x.contains_key(*k)).count()
        }
        (Value::Array(x), Value::Array(y)) => x.iter().zip(y).map(|(v, w)| diff_count(v, w)).sum::<usize>() + x.len().abs_diff(y.len()),
        _ => usize::from(a != b),
    }
}

/// Lines describing how `a` (wanted) differs from `b` (recorded).
pub(super) fn diff_lines(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    if out.len() >= 20 {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in x {
                match y.get(k) {
                    Some(w) => diff_lines(&format!("{path}/{k}"), v, w, out),
                    None => out.push(format!("  {path}/{k}: requested {v}, not in the recording")),
                }
            }
            for (k, w) in y {
                if !x.contains_key(k) {
                    out.push(format!("  {path}/{k}: recorded {w}, not in the request"));
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (v, w)) in x.iter().zip(y).enumerate() {
                diff_lines(&format!("{path}/{i}"), v, w, out);
            }
        }
        _ if a != b => {
            let short = |v: &Value| {
                let s = v.to_string();
                if s.len() > 80 {
                    format!("{}…", &s[..s.char_indices().nth(80).map(|(i, _)| i).unwrap_or(s.len())])
                } else {
                    s
                }
            };
            out.push(format!("  {path}: requested {}, recorded {}", short(a), short(b)));
        }
        _ => {}
    }
}

impl Executors {
    /// Replays from a cassette.
    pub fn with_cassette(mut self, cassette: Cassette, mode: ReplayMode) -> Executors {
        self.replay = Some(Mutex::new(Replayer::of(cassette, mode)));
        self
    }

    /// Keeps every request and response for [`Executors::recorded`].
    pub fn recording(mut self) -> Executors {
        self.recording = true;
        self
    }

    /// Everything executed so far, for `--record`.
    pub fn recorded(&self) -> Cassette {
        Cassette { flow_cassette: 1, entries: self.recorded.lock().map(|r| r.clone()).unwrap_or_default() }
    }

    /// Whether a human request can be answered from the cassette.
    pub fn replayed(&self, request: &Request) -> Result<Option<Response>, Miss> {
        let Some(replay) = &self.replay else { return Ok(None) };
        let Ok(mut r) = replay.lock() else { return Ok(None) };
        if let Some(response) = r.next(&request.key()) {
            return Ok(Some(response));
        }
        // A scripted provider's turn is no outside call: deterministic and
        // offline, it answers from its script even when replaying strictly.
        if r.mode == ReplayMode::Lenient || self.is_scripted(request) {
            return Ok(None);
        }
        Err(Miss(Self::miss_message(request, &r.entries)))
    }

    /// Whether `request` is a turn of an agent whose provider answers
    /// offline and deterministically: scripted, or a `replay` provider's
    /// own cassette.
    pub(super) fn is_scripted(&self, request: &Request) -> bool {
        let Request::Agent(a) = request else { return false };
        self.program.decls.get(&a.provider).is_some_and(|p| matches!(p.variant.as_deref(), Some("scripted" | "replay")))
    }

    /// A turn of an agent whose provider is `replay`: answered from the
    /// provider's own `cassette` (relative to the flow's directory), the
    /// n-th time a request recurs by its n-th recording (the last repeats);
    /// a request it does not hold fails the turn with the nearest recorded
    /// request's difference.
    pub(super) fn tape_turn(&self, provider: &Decl, request: &AgentRequest) -> AgentReply {
        let fail = |error: String| AgentReply { error: Some(error), ..AgentReply::default() };
        let Some(path) = provider.cassette() else { return fail(format!("provider `{}` names no cassette", provider.name)) };
        let Ok(mut tapes) = self.tapes.lock() else { return fail("cassette cache poisoned".into()) };
        if !tapes.contains_key(&provider.name) {
            let cassette = match Cassette::load(&self.base_dir.join(path)) {
                Ok(c) => c,
                Err(e) => return fail(e),
            };
            tapes.insert(provider.name.clone(), Replayer::of(cassette, ReplayMode::Strict));
        }
        let tape = tapes.get_mut(&provider.name).expect("just loaded");
        let wanted = Request::Agent(Box::new(request.clone()));
        match tape.next(&wanted.key()) {
            Some(Response::Agent(reply)) => reply,
            Some(_) => fail(format!("the cassette of provider `{}` answers this turn with no model reply", provider.name)),
            None => fail(Self::miss_message(&wanted, &tape.entries)),
        }
    }

    pub(super) fn miss_message(request: &Request, entries: &[Entry]) -> String {
        let wanted = serde_json::to_value(request).unwrap_or(Value::Null);
        let nearest = entries
            .iter()
            .filter(|e| e.kind == request.kind())
            .map(|e| (serde_json::to_value(&e.request).unwrap_or(Value::Null), e))
            .min_by_key(|(v, _)| diff_count(&wanted, v));
        let what = match request {
            Request::Agent(a) => format!("model turn of agent `{}` in node `{}`", a.agent, a.node),
            Request::Tool(t) => format!("call of tool `{}`", t.tool),
            Request::Human(h) => format!("decision on `{}`", h.subject),
            Request::Probe(p) => format!("probe `{}`", p.evaluator),
        };
        match nearest {
            Some((recorded, _)) => {
                let mut lines = Vec::new();
                diff_lines("", &wanted, &recorded, &mut lines);
                format!("replay miss: the {what} is not in the cassette; nearest recorded request differs at:\n{}", lines.join("\n"))
            }
            None => format!("replay miss: the {what} is not in the cassette, which records no {} requests", request.kind()),
        }
    }

    pub(super) fn record(&self, request: &Request, response: &Response) {
        if !self.recording {
            return;
        }
        if let Ok(mut r) = self.recorded.lock() {
            r.push(Entry { kind: request.kind().into(), key: request.key(), request: request.clone(), response: response.clone() });
        }
    }

    /// Records a human answer obtained outside the executors.
    pub fn record_human(&self, request: &Request, response: &Response) {
        self.record(request, response);
    }

    /// The replayed answer to `request`, if a cassette has one, recorded.
    pub(super) fn replayed_and_recorded(&self, request: &Request) -> Result<Option<Response>, Miss> {
        let response = self.replayed(request)?;
        if let Some(response) = &response {
            self.record(request, response);
        }
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::Cassette;

    #[test]
    fn a_cassette_nested_past_the_limit_is_refused_before_parsing() {
        // 100,000 levels in 200 KB: serde_yaml took 40 s to reject it.
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("deep.cassette.yaml");
        let deep = format!("entries: {}1{}\n", "[".repeat(100_000), "]".repeat(100_000));
        std::fs::write(&path, deep).expect("written");
        let error = Cassette::load(&path).expect_err("refused");
        assert!(error.contains("nests 100001 levels deep; Flow reads at most 1088"), "{error}");
        // Within the limit the document is parsed (and found not to be a cassette).
        std::fs::write(&path, "entries: [[[1]]]\n").expect("written");
        let error = Cassette::load(&path).expect_err("not a cassette");
        assert!(!error.contains("levels deep"), "{error}");
    }
}
