//! Byte offsets ⇄ LSP positions (lines and UTF-16 code units).

use lsp_types::{Position, Range};

pub fn position(text: &str, offset: u32) -> Position {
    let offset = (offset as usize).min(text.len());
    let mut line = 0u32;
    let mut line_start = 0usize;
    for (i, b) in text.bytes().enumerate().take(offset) {
        if b == b'\n' {
            line += 1;
            line_start = i + 1;
        }
    }
    let mut end = offset;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let character = text[line_start..end].encode_utf16().count() as u32;
    Position { line, character }
}

pub fn range(text: &str, start: u32, end: u32) -> Range {
    Range { start: position(text, start), end: position(text, end) }
}

pub fn offset(text: &str, position: Position) -> u32 {
    let mut line = 0u32;
    let mut line_start = 0usize;
    if position.line > 0 {
        for (i, b) in text.bytes().enumerate() {
            if b == b'\n' {
                line += 1;
                if line == position.line {
                    line_start = i + 1;
                    break;
                }
            }
        }
        if line < position.line {
            return text.len() as u32;
        }
    }
    let mut units = 0u32;
    for (i, c) in text[line_start..].char_indices() {
        if units >= position.character || c == '\n' {
            return (line_start + i) as u32;
        }
        units += c.len_utf16() as u32;
    }
    text.len() as u32
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
}
