//! Byte offsets ⇄ LSP positions (lines and UTF-16 code units).
//!
//! A [`LineIndex`] is built once per document: the start of every line,
//! whether the line is ASCII and, for a text that is not all ASCII, marks
//! every [`STRIDE`] bytes that say how many UTF-16 units precede them.
//! Converting an offset is then a binary search (O(log n)) plus, on a line
//! with non-ASCII text, a count of the UTF-16 units since the nearest mark
//! (at most [`STRIDE`] bytes); on an ASCII line the column is the byte
//! distance. Nothing scans from the start of the file or of a long line, so
//! converting every position of a document is linear in its size, in any
//! order.

use lsp_types::{Position, Range};

/// The most bytes between two marks of UTF-16 counts.
pub const STRIDE: u32 = 64;

/// Where the lines of one text start.
#[derive(Debug, Clone)]
pub struct LineIndex {
    /// The byte offset of the first character of every line.
    starts: Vec<u32>,
    /// Whether each line is pure ASCII (byte columns are UTF-16 columns).
    ascii: Vec<bool>,
    /// UTF-16 units before the start of every line (empty for ASCII text).
    line_units: Vec<u32>,
    /// `(byte offset, UTF-16 units before it)` at character boundaries, in
    /// increasing order, at most [`STRIDE`] bytes apart past the first
    /// (empty for ASCII text).
    marks: Vec<(u32, u32)>,
    len: u32,
}

impl LineIndex {
    pub fn new(text: &str) -> LineIndex {
        let mut starts = vec![0u32];
        let mut ascii = Vec::new();
        let mut line_ascii = true;
        for (i, b) in text.bytes().enumerate() {
            line_ascii &= b.is_ascii();
            if b == b'\n' {
                starts.push(i as u32 + 1);
                ascii.push(line_ascii);
                line_ascii = true;
            }
        }
        ascii.push(line_ascii);
        let (line_units, marks) = if text.is_ascii() { (Vec::new(), Vec::new()) } else { utf16_marks(text, starts.len()) };
        LineIndex { starts, ascii, line_units, marks, len: text.len() as u32 }
    }

    /// The line holding byte `offset` (clamped to the text).
    fn line_of(&self, offset: u32) -> usize {
        self.starts.partition_point(|&start| start <= offset) - 1
    }

    /// The nearest known `(offset, UTF-16 units)` at or before `offset` on `line`.
    fn mark_before(&self, line: usize, offset: u32) -> (u32, u32) {
        let start = self.starts[line];
        let k = self.marks.partition_point(|&(at, _)| at <= offset);
        match k.checked_sub(1).map(|k| self.marks[k]) {
            Some(mark) if mark.0 >= start => mark,
            _ => (start, self.line_units[line]),
        }
    }

    /// The position of byte `offset` of `text` (the text this index was built from).
    pub fn position(&self, text: &str, offset: u32) -> Position {
        let offset = offset.min(self.len);
        let line = self.line_of(offset);
        let start = self.starts[line];
        let character = if self.ascii[line] {
            offset - start
        } else {
            let mut end = offset as usize;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            let (at, units) = self.mark_before(line, end as u32);
            units + text[at as usize..end].encode_utf16().count() as u32 - self.line_units[line]
        };
        Position { line: line as u32, character }
    }

    pub fn range(&self, text: &str, start: u32, end: u32) -> Range {
        Range { start: self.position(text, start), end: self.position(text, end) }
    }

    /// The byte offset of `position` in `text` (clamped to the line's end
    /// and to the text's end).
    pub fn offset(&self, text: &str, position: Position) -> u32 {
        let line = position.line as usize;
        let Some(&start) = self.starts.get(line) else {
            return self.len;
        };
        let end = self.starts.get(line + 1).map_or(self.len, |next| next - 1);
        if self.ascii[line] {
            return (start + position.character).min(end);
        }
        let target = self.line_units[line].saturating_add(position.character);
        // The last mark on this line at or before the target.
        let k = self.marks.partition_point(|&(at, units)| at <= end && units <= target);
        let (from, mut units) = match k.checked_sub(1).map(|k| self.marks[k]) {
            Some(mark) if mark.0 >= start => mark,
            _ => (start, self.line_units[line]),
        };
        for (i, c) in text[from as usize..end as usize].char_indices() {
            if units >= target {
                return from + i as u32;
            }
            units += c.len_utf16() as u32;
        }
        end
    }
}

/// UTF-16 units before every line start, and marks every [`STRIDE`] bytes.
fn utf16_marks(text: &str, lines: usize) -> (Vec<u32>, Vec<(u32, u32)>) {
    let mut line_units = Vec::with_capacity(lines);
    line_units.push(0);
    let mut marks = vec![(0u32, 0u32)];
    let mut units = 0u32;
    let mut next_mark = STRIDE;
    for (i, c) in text.char_indices() {
        let i = i as u32;
        if i >= next_mark {
            marks.push((i, units));
            next_mark = i + STRIDE;
        }
        units += c.len_utf16() as u32;
        if c == '\n' {
            line_units.push(units);
        }
    }
    (line_units, marks)
}

/// The position of `offset` in `text`, for one-off conversions (builds an index).
#[cfg(test)]
pub fn position(text: &str, offset: u32) -> Position {
    LineIndex::new(text).position(text, offset)
}

/// The range of `start..end` in `text`, for one-off conversions (builds an index).
pub fn range(text: &str, start: u32, end: u32) -> Range {
    LineIndex::new(text).range(text, start, end)
}

/// The offset of `position` in `text`, for one-off conversions (builds an index).
#[cfg(test)]
pub fn offset(text: &str, position: Position) -> u32 {
    LineIndex::new(text).offset(text, position)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_with_utf16() {
        let text = "ab\n\u{1F600}x\ny";
        for offset in [0u32, 1, 3, 7, 8, 9, 10] {
            assert_eq!(super::offset(text, position(text, offset)), offset, "{offset}");
        }
        assert_eq!(position(text, 7), Position { line: 1, character: 2 });
    }

    #[test]
    fn a_long_non_ascii_line_converts_in_any_order() {
        // Marks every STRIDE bytes: positions far into one line, asked out
        // of order, agree with a count from the line's start.
        let line: String = (0..500).map(|i| if i % 3 == 0 { "é\u{1F600}" } else { "ab" }).collect();
        let text = format!("x\n{line}\ny");
        let index = LineIndex::new(&text);
        let offsets: Vec<u32> = (0..=text.len() as u32).rev().filter(|&o| text.is_char_boundary(o as usize)).collect();
        for offset in offsets {
            let before = &text[..offset as usize];
            let line_start = before.rfind('\n').map_or(0, |i| i + 1);
            let expected =
                Position { line: before.matches('\n').count() as u32, character: before[line_start..].encode_utf16().count() as u32 };
            assert_eq!(index.position(&text, offset), expected, "{offset}");
            assert_eq!(index.offset(&text, expected), offset, "{offset}");
        }
    }

    #[test]
    fn positions_past_a_line_clamp_to_its_end() {
        let text = "ab\ncd\n";
        assert_eq!(offset(text, Position { line: 0, character: 9 }), 2);
        assert_eq!(offset(text, Position { line: 1, character: 1 }), 4);
        assert_eq!(offset(text, Position { line: 7, character: 0 }), text.len() as u32);
        assert_eq!(position(text, 99), Position { line: 2, character: 0 });
    }

    #[test]
    fn the_index_agrees_with_a_scan_from_the_start() {
        let text = "x = \"é\u{1F600}\"\n\nabc\r\n\u{1F600}\u{1F600}z\n";
        let index = LineIndex::new(text);
        for offset in 0..=text.len() as u32 {
            if !text.is_char_boundary(offset as usize) {
                continue;
            }
            let before = &text[..offset as usize];
            let line = before.matches('\n').count() as u32;
            let line_start = before.rfind('\n').map_or(0, |i| i + 1);
            let character = before[line_start..].encode_utf16().count() as u32;
            let expected = Position { line, character };
            assert_eq!(index.position(text, offset), expected, "{offset}");
            assert_eq!(index.offset(text, expected), offset, "{offset}");
        }
    }
}
