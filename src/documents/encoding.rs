//! Conversions between LSP-style positions (line, character in a negotiated
//! encoding) and offsets in a rope.
//!
//! Every conversion clamps: a line past the end maps to the end of the text, a
//! character past the end of its line maps to the end of that line (before the
//! line break), and a character that falls inside a multi-unit code point is
//! rounded down to the start of that code point. Nothing here panics on input
//! that came from the wire.

use ropey::Rope;

/// The unit in which `character` offsets are counted, negotiated once at
/// `initialize` and passed explicitly to every conversion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PositionEncoding {
    /// Bytes of UTF-8.
    Utf8,
    /// UTF-16 code units: the LSP default.
    #[default]
    Utf16,
    /// Unicode scalar values.
    Utf32,
}

/// Width of `c` in the units of `encoding`.
fn units(c: char, encoding: PositionEncoding) -> usize {
    match encoding {
        PositionEncoding::Utf8 => c.len_utf8(),
        PositionEncoding::Utf16 => c.len_utf16(),
        PositionEncoding::Utf32 => 1,
    }
}

/// The char index just past the last non-line-break char of `line`.
fn line_content_end(rope: &Rope, line: usize) -> usize {
    let start = rope.line_to_char(line);
    let slice = rope.line(line);
    let mut len = slice.len_chars();
    // Strip the line break: "\n", "\r\n" or a lone "\r" (cr_lines).
    if len > 0 && slice.char(len - 1) == '\n' {
        len -= 1;
    }
    if len > 0 && slice.char(len - 1) == '\r' {
        len -= 1;
    }
    start + len
}

/// Converts `(line, character)` to a char index in `rope`, clamping as the
/// module documentation describes.
pub fn position_to_char(rope: &Rope, line: u32, character: u32, encoding: PositionEncoding) -> usize {
    let line = line as usize;
    if line >= rope.len_lines() {
        return rope.len_chars();
    }
    let start = rope.line_to_char(line);
    let end = line_content_end(rope, line);
    let mut remaining = character as usize;
    let mut idx = start;
    for c in rope.slice(start..end).chars() {
        let w = units(c, encoding);
        if remaining < w {
            break;
        }
        remaining -= w;
        idx += 1;
    }
    idx
}

/// Converts a char index in `rope` to `(line, character)` in `encoding`.
/// An index past the end is clamped to the end.
pub fn char_to_position(rope: &Rope, char_idx: usize, encoding: PositionEncoding) -> (u32, u32) {
    let char_idx = char_idx.min(rope.len_chars());
    let line = rope.char_to_line(char_idx);
    let start = rope.line_to_char(line);
    let character: usize = match encoding {
        PositionEncoding::Utf32 => char_idx - start,
        PositionEncoding::Utf8 => rope.char_to_byte(char_idx) - rope.char_to_byte(start),
        PositionEncoding::Utf16 => rope.char_to_utf16_cu(char_idx) - rope.char_to_utf16_cu(start),
    };
    (line as u32, character as u32)
}

/// Converts a UTF-8 byte offset in `rope` to `(line, character)`; an offset
/// inside a code point is rounded down to its start.
pub fn byte_to_position(rope: &Rope, byte: usize, encoding: PositionEncoding) -> (u32, u32) {
    let byte = byte.min(rope.len_bytes());
    char_to_position(rope, rope.byte_to_char(byte), encoding)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENCODINGS: [PositionEncoding; 3] = [PositionEncoding::Utf8, PositionEncoding::Utf16, PositionEncoding::Utf32];

    #[test]
    fn cjk_and_emoji_columns_per_encoding() {
        // "a漢😀b": a=1 unit everywhere; 漢 = 3 bytes / 1 utf16 / 1 char;
        // 😀 = 4 bytes / 2 utf16 (surrogate pair) / 1 char.
        let rope = Rope::from_str("a漢😀b\n");
        let b_char = 3;
        assert_eq!(char_to_position(&rope, b_char, PositionEncoding::Utf8), (0, 8));
        assert_eq!(char_to_position(&rope, b_char, PositionEncoding::Utf16), (0, 4));
        assert_eq!(char_to_position(&rope, b_char, PositionEncoding::Utf32), (0, 3));
        assert_eq!(position_to_char(&rope, 0, 8, PositionEncoding::Utf8), b_char);
        assert_eq!(position_to_char(&rope, 0, 4, PositionEncoding::Utf16), b_char);
        assert_eq!(position_to_char(&rope, 0, 3, PositionEncoding::Utf32), b_char);
    }

    #[test]
    fn inside_a_surrogate_pair_rounds_down() {
        let rope = Rope::from_str("😀x");
        // utf16 column 1 is between the two halves of the emoji.
        assert_eq!(position_to_char(&rope, 0, 1, PositionEncoding::Utf16), 0);
        // utf8 columns 1..3 are inside the emoji's four bytes.
        assert_eq!(position_to_char(&rope, 0, 3, PositionEncoding::Utf8), 0);
        assert_eq!(position_to_char(&rope, 0, 4, PositionEncoding::Utf8), 1);
    }

    #[test]
    fn crlf_lines_clamp_before_the_break() {
        let rope = Rope::from_str("ab\r\ncd\r\n");
        assert_eq!(rope.len_lines(), 3);
        for enc in ENCODINGS {
            // Column 99 on line 0 clamps to just after "ab", before "\r\n".
            assert_eq!(position_to_char(&rope, 0, 99, enc), 2);
            assert_eq!(position_to_char(&rope, 1, 1, enc), 5);
            assert_eq!(char_to_position(&rope, 5, enc), (1, 1));
        }
    }

    #[test]
    fn lone_cr_is_a_line_break() {
        let rope = Rope::from_str("ab\rcd");
        assert_eq!(position_to_char(&rope, 1, 1, PositionEncoding::Utf16), 4);
    }

    #[test]
    fn out_of_range_positions_clamp_to_the_end() {
        let rope = Rope::from_str("one\ntwo");
        for enc in ENCODINGS {
            assert_eq!(position_to_char(&rope, 7, 0, enc), rope.len_chars());
            assert_eq!(position_to_char(&rope, u32::MAX, u32::MAX, enc), rope.len_chars());
            assert_eq!(char_to_position(&rope, 1000, enc), (1, 3));
        }
        let empty = Rope::new();
        assert_eq!(position_to_char(&empty, 3, 3, PositionEncoding::Utf16), 0);
    }

    #[test]
    fn unicode_line_separators_are_not_line_breaks() {
        // LSP counts only \n, \r\n and \r; U+2028 is an ordinary char.
        let rope = Rope::from_str("a\u{2028}b\nc");
        assert_eq!(rope.len_lines(), 2);
        assert_eq!(position_to_char(&rope, 1, 0, PositionEncoding::Utf16), 4);
    }

    #[test]
    fn byte_offsets_convert_per_encoding() {
        let rope = Rope::from_str("x\n漢字=1\n");
        // "=" starts at byte 2 + 6.
        assert_eq!(byte_to_position(&rope, 8, PositionEncoding::Utf16), (1, 2));
        assert_eq!(byte_to_position(&rope, 8, PositionEncoding::Utf8), (1, 6));
    }
}
