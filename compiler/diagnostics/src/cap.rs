//! A bound on how many diagnostics a command shows per file, so that no
//! input makes a command print megabytes: past the bound a file's
//! diagnostics are counted, not shown ("and N more"), and the JSON summary
//! says how many were left out. Errors are kept before warnings.

use crate::{Diagnostic, FileId, SourceDb};
use std::collections::HashMap;

/// The most diagnostics shown per file unless `--max-diagnostics` says
/// otherwise.
pub const DEFAULT_MAX_PER_FILE: usize = 200;

/// Diagnostics after the cap: the ones shown (in their original order) and
/// how many were left out of each file.
#[derive(Debug)]
pub struct Capped<'d> {
    pub shown: Vec<&'d Diagnostic>,
    /// `(file, left out)`, in file order; `None` for diagnostics with no
    /// location.
    pub omitted: Vec<(Option<FileId>, usize)>,
}

impl Capped<'_> {
    /// How many diagnostics were left out in all.
    pub fn omitted_total(&self) -> usize {
        self.omitted.iter().map(|(_, n)| n).sum()
    }

    /// The "and N more" lines, one per file that had diagnostics left out.
    pub fn notes(&self, db: &SourceDb, max: usize) -> Vec<String> {
        self.omitted
            .iter()
            .map(|(file, n)| {
                let place = match file {
                    Some(file) if (file.0 as usize) < db.len() => format!(" in {}", db.name(*file)),
                    _ => String::new(),
                };
                let what = if *n == 1 { "diagnostic" } else { "diagnostics" };
                format!(
                    "note: and {n} more {what}{place} (at most {max} per file are shown; --max-diagnostics N changes that, 0 shows all)"
                )
            })
            .collect()
    }
}

/// Keeps at most `max` diagnostics per file (all when `max` is 0): a file's
/// errors first, then its warnings, each in their order.
pub fn cap_per_file(diagnostics: &[Diagnostic], max: usize) -> Capped<'_> {
    if max == 0 {
        return Capped { shown: diagnostics.iter().collect(), omitted: Vec::new() };
    }
    let file_of = |d: &Diagnostic| d.primary().map(|l| l.file);
    let mut kept: HashMap<Option<FileId>, usize> = HashMap::new();
    let mut keep = vec![false; diagnostics.len()];
    for errors in [true, false] {
        for (i, d) in diagnostics.iter().enumerate() {
            if d.is_error() == errors {
                let count = kept.entry(file_of(d)).or_default();
                if *count < max {
                    *count += 1;
                    keep[i] = true;
                }
            }
        }
    }
    let mut omitted: Vec<(Option<FileId>, usize)> = Vec::new();
    for (d, kept) in diagnostics.iter().zip(&keep) {
        if !kept {
            let file = file_of(d);
            match omitted.iter_mut().find(|(f, _)| *f == file) {
                Some((_, n)) => *n += 1,
                None => omitted.push((file, 1)),
            }
        }
    }
    omitted.sort_by_key(|(file, _)| file.map_or(u32::MAX, |f| f.0));
    let shown = diagnostics.iter().zip(&keep).filter(|(_, k)| **k).map(|(d, _)| d).collect();
    Capped { shown, omitted }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{codes, Severity, Span};

    fn at(file: u32, start: u32, severity: Severity) -> Diagnostic {
        let mut d = Diagnostic::new(codes::UNEXPECTED_TOKEN, FileId(file), Span::new(start as usize, start as usize + 1), "x");
        d.severity = severity;
        d
    }

    #[test]
    fn each_file_keeps_its_errors_first_up_to_the_bound() {
        let mut all = Vec::new();
        for i in 0..5 {
            all.push(at(0, i, Severity::Warning));
            all.push(at(0, 100 + i, Severity::Error));
            all.push(at(1, i, Severity::Error));
        }
        let capped = cap_per_file(&all, 3);
        assert_eq!(capped.shown.len(), 6);
        assert!(capped.shown.iter().filter(|d| d.primary().unwrap().file == FileId(0)).all(|d| d.is_error()));
        assert_eq!(capped.omitted, vec![(Some(FileId(0)), 7), (Some(FileId(1)), 2)]);
        assert_eq!(capped.omitted_total(), 9);
        assert_eq!(cap_per_file(&all, 0).shown.len(), 15);
    }
}
