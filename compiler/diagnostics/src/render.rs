//! The one renderer: human text through codespan-reporting, and the JSON
//! shape of the command-line contract.

use crate::{Diagnostic, FileId, Severity, SourceDb};
use codespan_reporting::diagnostic as cs;
use codespan_reporting::files::{Error as FilesError, Files};
use codespan_reporting::term;
use codespan_reporting::term::termcolor::{Buffer, WriteColor};
use serde_json::{json, Value};

impl<'a> Files<'a> for SourceDb {
    type FileId = FileId;
    type Name = &'a str;
    type Source = &'a str;

    fn name(&'a self, id: FileId) -> Result<&'a str, FilesError> {
        if (id.0 as usize) < self.len() {
            Ok(SourceDb::name(self, id))
        } else {
            Err(FilesError::FileMissing)
        }
    }

    fn source(&'a self, id: FileId) -> Result<&'a str, FilesError> {
        if (id.0 as usize) < self.len() {
            Ok(self.text(id))
        } else {
            Err(FilesError::FileMissing)
        }
    }

    fn line_index(&'a self, id: FileId, byte_index: usize) -> Result<usize, FilesError> {
        Ok(self.line_starts(id).partition_point(|&start| start <= byte_index).saturating_sub(1))
    }

    fn line_range(&'a self, id: FileId, line_index: usize) -> Result<std::ops::Range<usize>, FilesError> {
        let starts = self.line_starts(id);
        let len = self.text(id).len();
        let start = *starts.get(line_index).ok_or(FilesError::LineTooLarge { given: line_index, max: starts.len() - 1 })?;
        let end = starts.get(line_index + 1).copied().unwrap_or(len);
        Ok(start..end)
    }
}

fn to_codespan(diagnostic: &Diagnostic, db: &SourceDb) -> cs::Diagnostic<FileId> {
    let severity = match diagnostic.severity {
        Severity::Error => cs::Severity::Error,
        Severity::Warning => cs::Severity::Warning,
    };
    let labels: Vec<cs::Label<FileId>> = diagnostic
        .labels
        .iter()
        .map(|label| {
            let style = if label.primary { cs::LabelStyle::Primary } else { cs::LabelStyle::Secondary };
            // Clamp to the file so a stale span can never make rendering fail.
            let len = db.text(label.file).len();
            let start = (label.span.start as usize).min(len);
            let end = (label.span.end as usize).clamp(start, len);
            cs::Label::new(style, label.file, start..end).with_message(clip(&label.message))
        })
        .collect();
    let mut labels: Vec<cs::Label<FileId>> = labels;
    let mut notes: Vec<String> = diagnostic.notes.iter().map(|n| clip(n)).collect();
    if let Some(witness) = &diagnostic.witness {
        // Steps as numbered secondary labels, the path as a compact note.
        for (i, step) in witness.steps.iter().enumerate() {
            let len = db.text(step.file).len();
            let start = (step.span.start as usize).min(len);
            let end = (step.span.end as usize).clamp(start, len);
            let cycle = if witness.cycle_start == Some(i) { " (the cycle starts here)" } else { "" };
            labels.push(cs::Label::new(cs::LabelStyle::Secondary, step.file, start..end).with_message(format!(
                "step {}: {}{cycle}",
                i + 1,
                clip(&step.message)
            )));
        }
        notes.push(clip(&format!("witness: {}", witness.compact())));
    }
    if let Some(help) = &diagnostic.help {
        notes.push(clip(&format!("help: {help}")));
    }
    cs::Diagnostic::new(severity).with_code(diagnostic.code.0).with_message(clip(&diagnostic.message)).with_labels(labels).with_notes(notes)
}

/// The most bytes of one message, label or note a terminal report shows
/// (a message quoting a megabyte-long name would otherwise print it whole;
/// JSON and SARIF keep every message whole).
pub const MAX_SHOWN_MESSAGE: usize = 1_000;

/// `text`, cut after [`MAX_SHOWN_MESSAGE`] bytes with a count of the rest.
fn clip(text: &str) -> String {
    if text.len() <= MAX_SHOWN_MESSAGE {
        return text.to_string();
    }
    let mut end = MAX_SHOWN_MESSAGE;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} more bytes)", &text[..end], text.len() - end)
}

/// Writes diagnostics to a colour-capable writer (a terminal).
pub fn emit(writer: &mut dyn WriteColor, db: &SourceDb, diagnostics: &[Diagnostic]) -> std::io::Result<()> {
    for diagnostic in diagnostics {
        emit_one(writer, db, diagnostic)?;
    }
    Ok(())
}

/// One diagnostic, long lines cut to a window around its labels.
fn emit_one(writer: &mut dyn WriteColor, db: &SourceDb, diagnostic: &Diagnostic) -> std::io::Result<()> {
    let config = term::Config::default();
    let mut rendered = to_codespan(diagnostic, db);
    let files = crate::window::Windowed::new(db, &mut rendered.labels);
    if files.cut() {
        rendered.notes.push(format!("(a line longer than {} bytes is shown in part)", crate::window::MAX_SHOWN_LINE));
    }
    term::emit_to_write_style(writer, &config, &files, &rendered).map_err(|error| match error {
        // Keep the kind (a closed pipe is not an error worth reporting).
        FilesError::Io(io) => io,
        other => std::io::Error::other(other),
    })
}

/// Writes at most `max` diagnostics per file (all when 0), each file's
/// errors first, then an "and N more" note for each file with more.
pub fn emit_capped(writer: &mut dyn WriteColor, db: &SourceDb, diagnostics: &[Diagnostic], max: usize) -> std::io::Result<()> {
    let capped = crate::cap::cap_per_file(diagnostics, max);
    for diagnostic in &capped.shown {
        emit_one(writer, db, diagnostic)?;
    }
    for note in capped.notes(db, max) {
        writeln!(writer, "{note}")?;
    }
    Ok(())
}

/// Renders diagnostics as plain text (no colour): the form used by UI test
/// snapshots and by non-terminal output.
pub fn render_human(db: &SourceDb, diagnostics: &[Diagnostic]) -> String {
    let mut buffer = Buffer::no_color();
    // Writing into an in-memory buffer cannot fail.
    let _ = emit(&mut buffer, db, diagnostics);
    String::from_utf8_lossy(buffer.as_slice()).into_owned()
}

/// A one-line summary: "2 errors, 1 warning".
pub fn summary_line(diagnostics: &[Diagnostic]) -> String {
    let errors = diagnostics.iter().filter(|d| d.is_error()).count();
    let warnings = diagnostics.len() - errors;
    let plural = |n: usize, word: &str| if n == 1 { format!("{n} {word}") } else { format!("{n} {word}s") };
    format!("{}, {}", plural(errors, "error"), plural(warnings, "warning"))
}

/// One diagnostic in the JSON shape of the command-line contract:
/// `{code, severity, message, file, line, column, span, labels, witness}`
/// plus `notes` and `help`.
pub fn diagnostic_json(db: &SourceDb, diagnostic: &Diagnostic) -> Value {
    let location = |file: FileId, span: crate::Span| {
        let at = db.line_col(file, span.start);
        (db.name(file).to_string(), at.line, at.column)
    };
    let (file, line, column, span) = match diagnostic.primary() {
        Some(label) => {
            let (file, line, column) = location(label.file, label.span);
            (Value::from(file), Value::from(line), Value::from(column), json!({"start": label.span.start, "end": label.span.end}))
        }
        None => (Value::Null, Value::Null, Value::Null, Value::Null),
    };
    let labels: Vec<Value> = diagnostic
        .labels
        .iter()
        .map(|label| {
            let (file, line, column) = location(label.file, label.span);
            json!({
                "file": file,
                "line": line,
                "column": column,
                "span": {"start": label.span.start, "end": label.span.end},
                "message": label.message,
                "primary": label.primary,
            })
        })
        .collect();
    json!({
        "code": diagnostic.code.0,
        "severity": diagnostic.severity,
        "message": diagnostic.message,
        "file": file,
        "line": line,
        "column": column,
        "span": span,
        "labels": labels,
        "witness": diagnostic.witness.as_ref().map(|w| witness_json(db, w)).unwrap_or(Value::Null),
        "notes": diagnostic.notes,
        "help": diagnostic.help,
    })
}

/// A witness in JSON: the compact path, the ordered steps with locations,
/// the cycle start of a lasso, and the trace events of a run.
pub fn witness_json(db: &SourceDb, witness: &crate::Witness) -> Value {
    let steps: Vec<Value> = witness
        .steps
        .iter()
        .map(|step| {
            let at = db.line_col(step.file, step.span.start);
            json!({
                "name": step.name,
                "message": step.message,
                "file": db.name(step.file),
                "line": at.line,
                "column": at.column,
                "span": {"start": step.span.start, "end": step.span.end},
            })
        })
        .collect();
    let trace = witness.trace.as_deref().map(|t| serde_json::from_str::<Value>(t).unwrap_or(Value::Null)).unwrap_or(Value::Null);
    json!({
        "path": witness.steps.iter().map(|s| s.name.clone()).collect::<Vec<_>>(),
        "compact": witness.compact(),
        "steps": steps,
        "cycle_start": witness.cycle_start,
        "trace": trace,
    })
}

/// The version of the `flowc verify --format json` report, whose JSON
/// Schema is `stdlib/schemas/verify-report.schema.json`: raised when a
/// field is removed or changes type (new fields may appear within one).
pub const JSON_REPORT_VERSION: u32 = 1;

/// The whole `flowc verify --format json` document, every diagnostic shown.
pub fn to_json(db: &SourceDb, diagnostics: &[Diagnostic], policies: Vec<Value>, budgets: Vec<Value>) -> Value {
    to_json_capped(db, diagnostics, policies, budgets, 0)
}

/// The whole `flowc verify --format json` document with at most `max`
/// diagnostics per file (all when 0). The summary counts every diagnostic
/// found; `omitted` says how many are not in the list.
pub fn to_json_capped(db: &SourceDb, diagnostics: &[Diagnostic], policies: Vec<Value>, budgets: Vec<Value>, max: usize) -> Value {
    let errors = diagnostics.iter().filter(|d| d.is_error()).count();
    let capped = crate::cap::cap_per_file(diagnostics, max);
    json!({
        "version": JSON_REPORT_VERSION,
        "diagnostics": capped.shown.iter().map(|d| diagnostic_json(db, d)).collect::<Vec<_>>(),
        "policies": policies,
        "budgets": budgets,
        "summary": {"errors": errors, "warnings": diagnostics.len() - errors, "omitted": capped.omitted_total()},
    })
}

#[cfg(test)]
mod tests {
    use super::{clip, MAX_SHOWN_MESSAGE};

    #[test]
    fn long_messages_are_cut_on_a_character_boundary_with_a_count() {
        assert_eq!(clip("short"), "short");
        let long = format!("undefined agent `{}`", "é".repeat(MAX_SHOWN_MESSAGE));
        let shown = clip(&long);
        assert!(shown.len() < MAX_SHOWN_MESSAGE + 40, "{}", shown.len());
        let kept = shown.split("… (").next().expect("the kept part");
        assert!(long.starts_with(kept));
        assert!(shown.ends_with(&format!("({} more bytes)", long.len() - kept.len())), "{shown}");
    }
}
