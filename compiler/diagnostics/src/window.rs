//! Long lines in rendered diagnostics: a label on a line longer than
//! [`MAX_SHOWN_LINE`] bytes is shown with a window of that line around it,
//! not the whole line, so 200 diagnostics on one 200 KB line print a few
//! kilobytes each instead of 200 KB each. Columns in the header stay the
//! true ones.

use crate::{FileId, SourceDb};
use codespan_reporting::diagnostic as cs;
use codespan_reporting::files::{Error as FilesError, Files};
use std::ops::Range;

/// The longest line shown whole.
pub const MAX_SHOWN_LINE: usize = 240;

/// How much of a long line is shown before the label.
const BEFORE: usize = 60;

/// The files as one diagnostic shows them: long lines cut to a window.
pub(crate) struct Windowed<'d> {
    db: &'d SourceDb,
    /// `(file, line, window)` for the long lines a label is on.
    windows: Vec<(FileId, usize, Range<usize>)>,
}

fn floor_boundary(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

impl<'d> Windowed<'d> {
    /// Windows for the long lines `labels` are on; the labels are narrowed
    /// to fit in them.
    pub(crate) fn new(db: &'d SourceDb, labels: &mut [cs::Label<FileId>]) -> Windowed<'d> {
        let mut windowed = Windowed { db, windows: Vec::new() };
        for label in labels.iter_mut() {
            let Ok(line) = db.line_index(label.file_id, label.range.start) else { continue };
            let Ok(full) = db.line_range(label.file_id, line) else { continue };
            if full.len() <= MAX_SHOWN_LINE {
                continue;
            }
            let text = db.text(label.file_id);
            let window = match windowed.window(label.file_id, line) {
                Some(window) => window,
                None => {
                    let start = floor_boundary(text, label.range.start.saturating_sub(BEFORE).max(full.start));
                    let end = floor_boundary(text, (start + MAX_SHOWN_LINE).min(full.end));
                    windowed.windows.push((label.file_id, line, start..end));
                    start..end
                }
            };
            let start = label.range.start.clamp(window.start, window.end);
            label.range = start..label.range.end.clamp(start, window.end);
        }
        windowed
    }

    fn window(&self, file: FileId, line: usize) -> Option<Range<usize>> {
        self.windows.iter().find(|(f, l, _)| *f == file && *l == line).map(|(_, _, w)| w.clone())
    }

    /// Whether any line was cut.
    pub(crate) fn cut(&self) -> bool {
        !self.windows.is_empty()
    }
}

impl<'a> Files<'a> for Windowed<'_> {
    type FileId = FileId;
    type Name = &'a str;
    type Source = &'a str;

    fn name(&'a self, id: FileId) -> Result<&'a str, FilesError> {
        Files::name(self.db, id)
    }

    fn source(&'a self, id: FileId) -> Result<&'a str, FilesError> {
        Files::source(self.db, id)
    }

    fn line_index(&'a self, id: FileId, byte_index: usize) -> Result<usize, FilesError> {
        self.db.line_index(id, byte_index)
    }

    fn column_number(&'a self, id: FileId, line_index: usize, byte_index: usize) -> Result<usize, FilesError> {
        self.db.column_number(id, line_index, byte_index)
    }

    fn line_range(&'a self, id: FileId, line_index: usize) -> Result<Range<usize>, FilesError> {
        let full = self.db.line_range(id, line_index)?;
        if full.len() <= MAX_SHOWN_LINE {
            return Ok(full);
        }
        Ok(match self.window(id, line_index) {
            Some(window) => window,
            // A long line shown for context only: its start.
            None => full.start..floor_boundary(self.db.text(id), full.start + MAX_SHOWN_LINE),
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::{codes, render::render_human, Diagnostic, FileId, SourceDb, Span};

    #[test]
    fn a_label_on_a_long_line_shows_a_window_with_the_true_column() {
        let mut db = SourceDb::new();
        let line = format!("{}target{}", "a + ".repeat(5_000), " + b".repeat(5_000));
        let file = db.add("long.flow", format!("first\n{line}\nlast\n"));
        let start = 6 + 4 * 5_000;
        let d = Diagnostic::new(codes::UNEXPECTED_TOKEN, file, Span::new(start, start + 6), "here");
        let text = render_human(&db, &[d]);
        assert!(text.len() < 2_000, "{} bytes", text.len());
        assert!(text.contains(&format!("long.flow:2:{}", 4 * 5_000 + 1)), "{text}");
        assert!(text.contains("target") && text.contains("^^^^^^"), "{text}");
        assert!(text.contains("shown in part"), "{text}");
        // A short line is shown whole, with no note.
        let short = Diagnostic::new(codes::UNEXPECTED_TOKEN, FileId(0), Span::new(0, 5), "here");
        assert!(!render_human(&db, &[short]).contains("shown in part"));
    }
}
