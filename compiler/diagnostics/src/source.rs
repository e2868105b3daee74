//! Source files as handed to the compiler, and byte spans into them.

use serde::Serialize;

/// Index of a file in a [`SourceDb`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct FileId(pub u32);

/// A half-open byte range `start..end` in one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Span {
        Span { start: start as u32, end: end as u32 }
    }

    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span { start: self.start.min(other.start), end: self.end.max(other.end) }
    }

    pub fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }
}

/// A 1-based line and column (columns count characters, not bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LineCol {
    pub line: u32,
    pub column: u32,
}

#[derive(Debug, Clone)]
struct SourceFile {
    name: String,
    text: String,
    line_starts: Vec<usize>,
}

/// Every source the compiler has seen in one run: `.flow` files, stdlib
/// modules and JSON Schema files. The compiler core never reads files
/// itself; the caller adds them here.
#[derive(Debug, Clone, Default)]
pub struct SourceDb {
    files: Vec<SourceFile>,
}

impl SourceDb {
    pub fn new() -> SourceDb {
        SourceDb::default()
    }

    pub fn add(&mut self, name: impl Into<String>, text: impl Into<String>) -> FileId {
        let text = text.into();
        let line_starts = std::iter::once(0).chain(text.match_indices('\n').map(|(i, _)| i + 1)).collect();
        self.files.push(SourceFile { name: name.into(), text, line_starts });
        FileId((self.files.len() - 1) as u32)
    }

    /// The file with this name, if already added.
    pub fn find(&self, name: &str) -> Option<FileId> {
        self.files.iter().position(|f| f.name == name).map(|i| FileId(i as u32))
    }

    pub fn name(&self, file: FileId) -> &str {
        &self.files[file.0 as usize].name
    }

    pub fn text(&self, file: FileId) -> &str {
        &self.files[file.0 as usize].text
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    pub(crate) fn line_starts(&self, file: FileId) -> &[usize] {
        &self.files[file.0 as usize].line_starts
    }

    /// Line and column of a byte offset (clamped to the file and to a
    /// character boundary).
    pub fn line_col(&self, file: FileId, offset: u32) -> LineCol {
        let f = &self.files[file.0 as usize];
        let mut offset = (offset as usize).min(f.text.len());
        while !f.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = f.line_starts.partition_point(|&start| start <= offset) - 1;
        let column = f.text[f.line_starts[line]..offset].chars().count();
        LineCol { line: line as u32 + 1, column: column as u32 + 1 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_characters() {
        let mut db = SourceDb::new();
        let f = db.add("a.flow", "ab\n\u{e9}x\n");
        assert_eq!(db.line_col(f, 0), LineCol { line: 1, column: 1 });
        assert_eq!(db.line_col(f, 3), LineCol { line: 2, column: 1 });
        assert_eq!(db.line_col(f, 5), LineCol { line: 2, column: 2 });
        assert_eq!(db.line_col(f, 100), LineCol { line: 3, column: 1 });
    }
}
