//! Flow's one diagnostic type, its stable codes, and the one renderer.
//!
//! Every phase of the compiler (lexer, parser, resolver, type checker, and
//! the verification passes that come later) reports problems as
//! [`Diagnostic`] values. They are plain data: a stable [`Code`], a
//! [`Severity`], a message, ordered [`Label`]s pointing into source files,
//! notes and help. Rendering happens in exactly one place —
//! [`render::render_human`] (codespan-reporting) and [`render::to_json`] — so
//! the command line, the JSON output and (later) the language server all show
//! the same text.
//!
//! Architecture invariant: this crate does no I/O; sources are handed in
//! through [`SourceDb`].

pub mod cap;
pub mod cli;
pub mod codes;
pub mod render;
pub mod sarif;
mod source;
pub mod suggest;
mod window;

pub use codes::{lookup, Code, CodeInfo, CODES};
pub use source::{FileId, LineCol, SourceDb, Span};

use serde::Serialize;

/// How serious a diagnostic is. Errors make `flowc verify` exit 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

/// A source location with a message. The first primary label of a
/// diagnostic is where it is reported; secondary labels give context
/// (the earlier declaration, the steps of a path) in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    pub file: FileId,
    pub span: Span,
    pub message: String,
    pub primary: bool,
}

impl Label {
    pub fn primary(file: FileId, span: Span, message: impl Into<String>) -> Label {
        Label { file, span, message: message.into(), primary: true }
    }

    pub fn secondary(file: FileId, span: Span, message: impl Into<String>) -> Label {
        Label { file, span, message: message.into(), primary: false }
    }
}

/// One problem found in Flow sources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub code: Code,
    pub severity: Severity,
    pub message: String,
    /// The first label is the primary location.
    pub labels: Vec<Label>,
    pub notes: Vec<String>,
    pub help: Option<String>,
    /// A concrete path or run showing why the finding holds, when it is
    /// about a path.
    pub witness: Option<Witness>,
    /// A replacement for the text at the primary label that fixes it (a
    /// "did you mean"): editors offer it as a quick fix.
    pub suggestion: Option<String>,
    /// Edits that fix it otherwise (a missing handler or property
    /// inserted): editors offer it as a quick fix, SARIF as a `fix`.
    pub fix: Option<Fix>,
}

/// Edits that fix a diagnostic, and what they do in a few words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fix {
    /// "Add `max_rounds: 3`", "Replace `wirter` with `writer`".
    pub title: String,
    /// Replacements in source order; an insertion has an empty span.
    pub edits: Vec<Edit>,
}

/// The text of `span` in `file` replaced by `text`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    pub file: FileId,
    pub span: Span,
    pub text: String,
}

/// A witness: the ordered steps of a path through a workflow (from its
/// start), optionally ending in a cycle (a lasso), and optionally the same
/// run as trace events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Witness {
    pub steps: Vec<WitnessStep>,
    /// For a lasso: the index of the first step of the repeating cycle.
    pub cycle_start: Option<usize>,
    /// The run as trace events (JSON), when the witness is a run.
    pub trace: Option<String>,
}

/// One step of a witness path: a named place in the source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WitnessStep {
    /// The node (or state, or gate) the step is at.
    pub name: String,
    pub file: FileId,
    pub span: Span,
    /// What happens at this step.
    pub message: String,
}

impl Witness {
    pub fn path(steps: Vec<WitnessStep>) -> Witness {
        Witness { steps, cycle_start: None, trace: None }
    }

    /// The compact text form: `a -> b -> c`, or `a -> (b -> c)+` for a lasso.
    pub fn compact(&self) -> String {
        let mut names: Vec<&str> = self.steps.iter().map(|s| s.name.as_str()).collect();
        // A lasso's last step returns to the cycle's first: shown by `+`.
        if let Some(start) = self.cycle_start {
            if names.len() > start + 1 && names.last() == names.get(start) {
                names.pop();
            }
        }
        match self.cycle_start {
            Some(start) if start < names.len() => {
                let prefix = &names[..start];
                let cycle = names[start..].join(" -> ");
                if prefix.is_empty() {
                    format!("({cycle})+")
                } else {
                    format!("{} -> ({cycle})+", prefix.join(" -> "))
                }
            }
            _ => names.join(" -> "),
        }
    }
}

impl Diagnostic {
    /// A diagnostic with the severity implied by its code (`E…` errors,
    /// `W…` warnings), reported at `span` in `file`.
    pub fn new(code: Code, file: FileId, span: Span, message: impl Into<String>) -> Diagnostic {
        let severity = if code.0.starts_with('W') { Severity::Warning } else { Severity::Error };
        Diagnostic {
            code,
            severity,
            message: message.into(),
            labels: vec![Label::primary(file, span, "")],
            notes: Vec::new(),
            help: None,
            suggestion: None,
            fix: None,
            witness: None,
        }
    }

    /// Every fix of this diagnostic: its suggestion applied
    /// ([`Diagnostic::suggested_edits`]), then its [`Diagnostic::fix`].
    pub fn fixes(&self, db: &SourceDb) -> Vec<Fix> {
        let mut fixes = Vec::new();
        let edits = self.suggested_edits(db);
        if let (Some(replacement), Some(primary), false) = (&self.suggestion, self.primary(), edits.is_empty()) {
            let wrong = db.text(primary.file).get(primary.span.start as usize..primary.span.end as usize).unwrap_or("");
            fixes.push(Fix {
                title: format!("Replace `{wrong}` with `{replacement}`"),
                edits: edits.into_iter().map(|(file, span)| Edit { file, span, text: replacement.clone() }).collect(),
            });
        }
        fixes.extend(self.fix.clone());
        fixes
    }

    pub fn with_witness(mut self, witness: Witness) -> Diagnostic {
        self.witness = Some(witness);
        self
    }

    /// Sets the message of the primary label.
    pub fn with_primary_message(mut self, message: impl Into<String>) -> Diagnostic {
        if let Some(first) = self.labels.first_mut() {
            first.message = message.into();
        }
        self
    }

    pub fn with_label(mut self, label: Label) -> Diagnostic {
        self.labels.push(label);
        self
    }

    pub fn with_note(mut self, note: impl Into<String>) -> Diagnostic {
        self.notes.push(note.into());
        self
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Diagnostic {
        self.help = Some(help.into());
        self
    }

    /// "did you mean `name`?", with `name` as the replacement of the text
    /// at the primary label (a quick fix in editors).
    pub fn with_suggestion(mut self, name: &str) -> Diagnostic {
        self.help = Some(format!("did you mean `{name}`?"));
        self.suggestion = Some(name.to_string());
        self
    }

    /// The edits that apply [`Diagnostic::suggestion`]: the text at the
    /// primary label, and at every other label holding the same text (the
    /// other uses of a name reported once), replaced by the suggestion.
    pub fn suggested_edits(&self, db: &SourceDb) -> Vec<(FileId, Span)> {
        let (Some(_), Some(primary)) = (&self.suggestion, self.primary()) else { return Vec::new() };
        let text_of = |label: &Label| {
            let text = db.text(label.file);
            text.get(label.span.start as usize..label.span.end as usize).map(str::to_string)
        };
        let Some(wrong) = text_of(primary) else { return Vec::new() };
        let mut edits: Vec<(FileId, Span)> =
            self.labels.iter().filter(|l| text_of(l).as_deref() == Some(wrong.as_str())).map(|l| (l.file, l.span)).collect();
        edits.sort_by_key(|(file, span)| (file.0, span.start));
        edits.dedup();
        edits
    }

    /// The primary location: file and span of the first label.
    pub fn primary(&self) -> Option<&Label> {
        self.labels.iter().find(|label| label.primary).or(self.labels.first())
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// Sorts diagnostics into the one deterministic order used by every output:
/// by file, then position, then code, then message.
pub fn sort_diagnostics(diagnostics: &mut [Diagnostic]) {
    diagnostics.sort_by(|a, b| {
        let key = |d: &Diagnostic| d.primary().map(|l| (l.file.0, l.span.start, l.span.end)).unwrap_or((u32::MAX, 0, 0));
        key(a).cmp(&key(b)).then_with(|| a.code.0.cmp(b.code.0)).then_with(|| a.message.cmp(&b.message))
    });
}

/// The most names a note lists before "and N more".
pub const MAX_LISTED: usize = 20;

/// `a, b, c` — or, past [`MAX_LISTED`] names, the first ones and "and N
/// more": a note that lists what is in scope stays short however much is.
pub fn short_list<S: AsRef<str>>(names: impl IntoIterator<Item = S>) -> String {
    let mut out = String::new();
    let mut count = 0usize;
    for name in names {
        if count < MAX_LISTED {
            if count > 0 {
                out.push_str(", ");
            }
            out.push_str(name.as_ref());
        }
        count += 1;
    }
    if count > MAX_LISTED {
        out.push_str(&format!(" and {} more", count - MAX_LISTED));
    }
    out
}

/// Names longer than this get no "did you mean" (comparing two names costs
/// the product of their lengths).
pub const MAX_SUGGESTED_LENGTH: usize = 64;

/// "Did you mean": the candidate closest to `name`, if it is close enough
/// to be a plausible typo.
pub fn closest_name<'a, I>(name: &str, candidates: I) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    let length = name.chars().count();
    // A typo of a very long name is not worth a quadratic comparison.
    if length > MAX_SUGGESTED_LENGTH {
        return None;
    }
    let lower = name.to_lowercase();
    let mut best: Option<(usize, &'a str)> = None;
    for candidate in candidates {
        if candidate == name || candidate.len() > 4 * MAX_SUGGESTED_LENGTH {
            continue;
        }
        let Some(limit) = suggestion_limit(length, candidate.chars().count()) else { continue };
        keep_nearer(&mut best, edit_distance(&lower, &candidate.to_lowercase()), limit, candidate);
    }
    best.map(|(_, candidate)| candidate)
}

/// The farthest a candidate of `candidate_length` characters may be from a
/// name of `length` to be suggested: a third of the longer length (at least
/// one edit). `None` when the difference in length alone rules it out (the
/// distance is at least that difference), so no comparison is needed.
pub(crate) fn suggestion_limit(length: usize, candidate_length: usize) -> Option<usize> {
    let limit = (length.max(candidate_length) / 3).max(1);
    (length.abs_diff(candidate_length) <= limit).then_some(limit)
}

/// The nearer to `name` of two suggestions (each from [`closest_name`] or
/// a [`suggest::NameIndex`] over part of the candidates), by the rule
/// [`closest_name`] applies to the whole: the smaller distance, then the
/// first name in order. Suggestions over parts combine to the suggestion
/// over their union.
pub fn nearer<'a>(name: &str, a: Option<&'a str>, b: Option<&'a str>) -> Option<&'a str> {
    let mut best = None;
    for candidate in [a, b].into_iter().flatten() {
        keep_nearer(&mut best, edit_distance(name, candidate), usize::MAX, candidate);
    }
    best.map(|(_, c)| c)
}

/// Keeps `candidate` in `best` if it is within `limit` and nearer (ties go
/// to the first in order).
pub(crate) fn keep_nearer<'a>(best: &mut Option<(usize, &'a str)>, distance: usize, limit: usize, candidate: &'a str) {
    if distance <= limit && best.is_none_or(|(d, c)| distance < d || (distance == d && candidate < c)) {
        *best = Some((distance, candidate));
    }
}

/// Edit distance where a transposition of two neighbours counts as one
/// edit (optimal string alignment), so `itmes` is one edit from `items`.
fn edit_distance(a: &str, b: &str) -> usize {
    strsim::osa_distance(a, b)
}

/// The builder methods of [`Diagnostic`] for a diagnostic already pushed
/// to a list (`checker.error(…).with_help(…)`).
pub trait DiagnosticMut {
    fn with_help(self, help: impl Into<String>) -> Self;
    /// See [`Diagnostic::with_suggestion`].
    fn with_suggestion(self, name: &str) -> Self;
    fn with_note(self, note: impl Into<String>) -> Self;
    fn with_label(self, label: Label) -> Self;
    fn with_primary_message(self, message: impl Into<String>) -> Self;
}

impl DiagnosticMut for &mut Diagnostic {
    fn with_help(self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    fn with_suggestion(self, name: &str) -> Self {
        self.help = Some(format!("did you mean `{name}`?"));
        self.suggestion = Some(name.to_string());
        self
    }

    fn with_note(self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }

    fn with_label(self, label: Label) -> Self {
        self.labels.push(label);
        self
    }

    fn with_primary_message(self, message: impl Into<String>) -> Self {
        if let Some(first) = self.labels.first_mut() {
            first.message = message.into();
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_lists_stop_at_the_limit() {
        assert_eq!(short_list(["a", "b"]), "a, b");
        let many: Vec<String> = (0..25).map(|i| format!("n{i}")).collect();
        let listed = short_list(&many);
        assert!(listed.starts_with("n0, n1, ") && listed.ends_with("n19 and 5 more"), "{listed}");
    }

    #[test]
    fn closest_name_finds_typos_and_rejects_far_names() {
        let names = ["researcher", "writer", "reviewer"];
        assert_eq!(closest_name("reseacher", names), Some("researcher"));
        assert_eq!(closest_name("writter", names), Some("writer"));
        assert_eq!(closest_name("zzz", names), None);
        assert_eq!(closest_name("dnoe", ["done"]), Some("done"));
    }

    #[test]
    fn suggestions_over_parts_combine_to_the_suggestion_over_the_whole() {
        let names = ["draft", "drafts", "raft", "review", "reviews", "revise", "input", "item", "items", "payload", "n1", "n2", "n10"];
        let queries = ["draf", "drat", "reviw", "revie", "inpt", "itme", "paylod", "n3", "n11", "zzzz", "rafts", "x"];
        for split in 0..=names.len() {
            let (a, b) = names.split_at(split);
            for query in queries {
                let parts = nearer(query, closest_name(query, a.iter().copied()), closest_name(query, b.iter().copied()));
                assert_eq!(parts, closest_name(query, names), "`{query}` split at {split}");
            }
        }
    }
}
