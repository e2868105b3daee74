//! Byte offsets ⇄ LSP positions (lines and UTF-16 code units).
//!
//! A [`LineIndex`] is built once per document: the start of every line and
//! whether the line is ASCII. Converting an offset is then a binary search
//! (O(log lines)) plus, on a line with non-ASCII text, a count of the UTF-16
//! units before it on that line; on an ASCII line the column is the byte
//! distance. Nothing scans from the start of the file.

use lsp_types::{Position, Range};

/// Where the lines of one text start.
#[derive(Debug, Clone)]
pub struct LineIndex {
    /// The byte offset of the first character of every line.
    starts: Vec<u32>,
    /// Whether each line is pure ASCII (byte columns are UTF-16 columns).
    ascii: Vec<bool>,
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
        LineIndex { starts, ascii, len: text.len() as u32 }
    }

    /// The position of byte `offset` of `text` (the text this index was built from).
    pub fn position(&self, text: &str, offset: u32) -> Position {
        let offset = offset.min(self.len);
        let line = self.starts.partition_point(|&start| start <= offset) - 1;
        let start = self.starts[line];
        let character = if self.ascii[line] {
            offset - start
        } else {
            let mut end = offset as usize;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text[start as usize..end].encode_utf16().count() as u32
        };
        Position { line: line as u32, character }
    }

    pub fn range(&self, text: &str, start: u32, end: u32) -> Range {
        Range { start: self.position(text, start), end: self.position(text, end) }
    }

    /// The byte offset of `position` in `text` (clamped to the line's end
    /// and to the text's end).
    pub fn offset(&self, text: &str, position: Position) -> u32 {
        let Some(&start) = self.starts.get(position.line as usize) else {
            return self.len;
        };
        let end = self.starts.get(position.line as usize + 1).map_or(self.len, |next| next - 1);
        if self.ascii[position.line as usize] {
            return (start + position.character).min(end);
        }
        let mut units = 0u32;
        for (i, c) in text[start as usize..end as usize].char_indices() {
            if units >= position.character {
                return start + i as u32;
            }
            units += c.len_utf16() as u32;
        }
        end
    }
}

/// Positions of increasing offsets, each found from the previous one:
/// converting every token of a line costs one pass over the line, even
/// when the line is long and not ASCII.
#[derive(Debug)]
pub struct Cursor<'i> {
    index: &'i LineIndex,
    line: usize,
    offset: u32,
    character: u32,
}

impl<'i> Cursor<'i> {
    pub fn new(index: &'i LineIndex) -> Cursor<'i> {
        Cursor { index, line: 0, offset: 0, character: 0 }
    }

    /// The position of `offset`, which must not be before the last one asked.
    pub fn position(&mut self, text: &str, offset: u32) -> Position {
        let offset = offset.min(self.index.len);
        let line = self.index.starts.partition_point(|&start| start <= offset) - 1;
        if line != self.line || offset < self.offset {
            self.line = line;
            self.offset = self.index.starts[line];
            self.character = 0;
        }
        if self.index.ascii[line] {
            self.character += offset - self.offset;
        } else {
            let mut end = offset as usize;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            self.character += text[self.offset as usize..end].encode_utf16().count() as u32;
            self.offset = end as u32;
            return Position { line: line as u32, character: self.character };
        }
        self.offset = offset;
        Position { line: line as u32, character: self.character }
    }
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
    fn a_cursor_agrees_with_the_index() {
        let text = "a\u{1F600}b é c\nxyz \u{1F600}\n\u{1F600}\u{1F600}q";
        let index = LineIndex::new(text);
        let mut cursor = Cursor::new(&index);
        for offset in 0..=text.len() as u32 {
            if text.is_char_boundary(offset as usize) {
                assert_eq!(cursor.position(text, offset), index.position(text, offset), "{offset}");
            }
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
