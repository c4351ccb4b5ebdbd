//! Conversions between LSP-style positions (line, character in a negotiated
//! encoding) and offsets in a rope.
//!
//! Every conversion clamps: a line past the end maps to the end of the text, a
//! character past the end of its line maps to the end of that line (before the
//! line break), and a character that falls inside a multi-unit code point is
//! rounded down to the start of that code point. Nothing here panics on input
//! that came from the wire.
//!
//! A position costs two descents of the rope (`line_to_byte`, then
//! `chunk_at_byte` for the chunk its line starts in) and a scan of that line
//! up to the column, never past it: a run of ASCII is taken whole, other
//! chars one at a time in the units of the encoding. A line longer than its
//! chunk costs one more descent per further chunk the scan enters. The
//! reverse (a byte offset to a position) costs three descents and a count
//! of the line's bytes before the offset in its chunk.

use ropey::Rope;

use crate::position::Span;

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

/// A place in a rope as both of its indices: chars (what ropey edits by)
/// and UTF-8 bytes (what `workspace::Edit` records).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offset {
    pub char: usize,
    pub byte: usize,
}

/// Whether `b` starts a char (is not a UTF-8 continuation byte).
fn starts_char(b: u8) -> bool {
    (b as i8) >= -0x40
}

/// Chars in `bytes` (whole UTF-8): the bytes less the continuation bytes
/// (`0b10xx_xxxx`), counted eight at a time (a line's start can be most of
/// a chunk, about 1 KB, into it).
fn count_chars(bytes: &[u8]) -> usize {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let (words, rest) = bytes.as_chunks::<8>();
    let continuation: usize = words
        .iter()
        .map(|w| {
            let w = u64::from_le_bytes(*w);
            // Bit 7 set and bit 6 (moved up to bit 7) clear.
            (w & !(w << 1) & HIGH).count_ones() as usize
        })
        .sum();
    bytes.len() - continuation - rest.iter().filter(|b| !starts_char(**b)).count()
}

/// Units of `encoding` in `bytes` (whole UTF-8).
fn count_units(bytes: &[u8], encoding: PositionEncoding) -> usize {
    match encoding {
        PositionEncoding::Utf8 => bytes.len(),
        PositionEncoding::Utf32 => count_chars(bytes),
        // A four-byte char is two UTF-16 units: one more per lead byte.
        PositionEncoding::Utf16 => count_chars(bytes) + bytes.iter().filter(|b| **b >= 0xF0).count(),
    }
}

/// Byte length and width in `encoding` of the char whose lead byte is
/// `lead` (not ASCII).
fn wide_char(lead: u8, encoding: PositionEncoding) -> (usize, usize) {
    let len = match lead {
        0xF0.. => 4,
        0xE0.. => 3,
        _ => 2,
    };
    let width = match encoding {
        PositionEncoding::Utf8 => len,
        PositionEncoding::Utf16 => 1 + usize::from(len == 4),
        PositionEncoding::Utf32 => 1,
    };
    (len, width)
}

/// A forward scan of one line, chunk by chunk.
struct Scan<'a> {
    rope: &'a Rope,
    chunk: &'a str,
    /// Byte index of `chunk` in the rope.
    chunk_byte: usize,
    /// Byte index in `chunk`.
    at: usize,
    /// Char index in the rope.
    chars: usize,
}

impl<'a> Scan<'a> {
    /// At the start of `line`, if the rope has that line.
    fn at_line(rope: &'a Rope, line: usize) -> Option<Self> {
        if line >= rope.len_lines() {
            return None;
        }
        let line_byte = rope.line_to_byte(line);
        let (chunk, chunk_byte, chunk_char, _) = rope.chunk_at_byte(line_byte);
        let at = line_byte - chunk_byte;
        Some(Scan { rope, chunk, chunk_byte, at, chars: chunk_char + count_chars(&chunk.as_bytes()[..at]) })
    }

    fn offset(&self) -> Offset {
        Offset { char: self.chars, byte: self.chunk_byte + self.at }
    }

    /// Moves forward by at most `units`, stopping at a line break or before
    /// a char that does not fit; returns the units left over.
    fn forward(&mut self, mut units: usize, encoding: PositionEncoding) -> usize {
        loop {
            let bytes = self.chunk.as_bytes();
            // ASCII fast path: one unit per byte in every encoding.
            let rest = &bytes[self.at..];
            let n = units.min(rest.len());
            let run = rest[..n].iter().position(|&b| b >= 0x80 || b == b'\n' || b == b'\r').unwrap_or(n);
            self.at += run;
            self.chars += run;
            units -= run;
            if units == 0 {
                return 0;
            }
            match bytes.get(self.at) {
                Some(b'\n' | b'\r') => return units,
                Some(&lead) => {
                    let (len, width) = wide_char(lead, encoding);
                    if units < width {
                        return units;
                    }
                    units -= width;
                    self.at += len;
                    self.chars += 1;
                }
                None => {
                    // The line goes on in the next chunk, if there is one.
                    let next = self.chunk_byte + self.chunk.len();
                    if next >= self.rope.len_bytes() {
                        return units;
                    }
                    let (chunk, chunk_byte, _, _) = self.rope.chunk_at_byte(next);
                    if chunk_byte != next {
                        return units;
                    }
                    (self.chunk, self.chunk_byte, self.at) = (chunk, chunk_byte, 0);
                }
            }
        }
    }
}

/// Converts `(line, character)` to an [`Offset`] in `rope`, clamping as the
/// module documentation describes.
pub fn position_to_offset(rope: &Rope, line: u32, character: u32, encoding: PositionEncoding) -> Offset {
    match Scan::at_line(rope, line as usize) {
        Some(mut scan) => {
            scan.forward(character as usize, encoding);
            scan.offset()
        }
        None => Offset { char: rope.len_chars(), byte: rope.len_bytes() },
    }
}

/// Converts both ends of `span` (columns in `encoding`) to offsets, each as
/// [`position_to_offset`] would; an end on the start's line, at or after
/// it, continues the start's scan instead of descending the rope again.
pub fn span_to_offsets(rope: &Rope, span: Span, encoding: PositionEncoding) -> (Offset, Offset) {
    let Span { start, end } = span;
    if start.line == end.line
        && start.column <= end.column
        && let Some(mut scan) = Scan::at_line(rope, start.line as usize)
    {
        let left = scan.forward(start.column as usize, encoding);
        let a = scan.offset();
        // The end is `end.column` units from the line start, of which the
        // scan has gone `start.column - left`.
        scan.forward((end.column - start.column) as usize + left, encoding);
        return (a, scan.offset());
    }
    (
        position_to_offset(rope, start.line, start.column, encoding),
        position_to_offset(rope, end.line, end.column, encoding),
    )
}

/// Converts `(line, character)` to a char index in `rope`, clamping as the
/// module documentation describes.
pub fn position_to_char(rope: &Rope, line: u32, character: u32, encoding: PositionEncoding) -> usize {
    position_to_offset(rope, line, character, encoding).char
}

/// Converts a UTF-8 byte offset in `rope` to `(line, character)` in
/// `encoding`; an offset inside a code point is rounded down to its start,
/// one past the end is clamped to the end.
pub fn byte_to_position(rope: &Rope, byte: usize, encoding: PositionEncoding) -> (u32, u32) {
    let byte = byte.min(rope.len_bytes());
    let (chunk, chunk_byte, chunk_char, _) = rope.chunk_at_byte(byte);
    let mut at = byte - chunk_byte;
    while !chunk.is_char_boundary(at) {
        at -= 1;
    }
    let line = rope.byte_to_line(chunk_byte + at);
    let line_byte = rope.line_to_byte(line);
    let character = if line_byte >= chunk_byte {
        count_units(&chunk.as_bytes()[line_byte - chunk_byte..at], encoding)
    } else {
        // The line starts in an earlier chunk: what lies before this one
        // comes from the rope's own counts.
        let before = match encoding {
            PositionEncoding::Utf8 => chunk_byte - line_byte,
            PositionEncoding::Utf32 => chunk_char - rope.byte_to_char(line_byte),
            PositionEncoding::Utf16 => {
                rope.char_to_utf16_cu(chunk_char) - rope.char_to_utf16_cu(rope.byte_to_char(line_byte))
            }
        };
        before + count_units(&chunk.as_bytes()[..at], encoding)
    };
    (line as u32, character as u32)
}

/// Converts a char index in `rope` to `(line, character)` in `encoding`.
/// An index past the end is clamped to the end.
pub fn char_to_position(rope: &Rope, char_idx: usize, encoding: PositionEncoding) -> (u32, u32) {
    byte_to_position(rope, rope.char_to_byte(char_idx.min(rope.len_chars())), encoding)
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
    /// The conversions as they were before the one-walk scan (a char
    /// iterator from the line start, ropey's counts for the reverse): the
    /// property tests below hold the new ones to exactly these results.
    mod before {
        use super::*;

        fn units(c: char, encoding: PositionEncoding) -> usize {
            match encoding {
                PositionEncoding::Utf8 => c.len_utf8(),
                PositionEncoding::Utf16 => c.len_utf16(),
                PositionEncoding::Utf32 => 1,
            }
        }

        fn line_content_end(rope: &Rope, line: usize) -> usize {
            let start = rope.line_to_char(line);
            let slice = rope.line(line);
            let mut len = slice.len_chars();
            if len > 0 && slice.char(len - 1) == '\n' {
                len -= 1;
            }
            if len > 0 && slice.char(len - 1) == '\r' {
                len -= 1;
            }
            start + len
        }

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

        pub fn byte_to_position(rope: &Rope, byte: usize, encoding: PositionEncoding) -> (u32, u32) {
            let char_idx = rope.byte_to_char(byte.min(rope.len_bytes()));
            let line = rope.char_to_line(char_idx);
            let start = rope.line_to_char(line);
            let character: usize = match encoding {
                PositionEncoding::Utf32 => char_idx - start,
                PositionEncoding::Utf8 => rope.char_to_byte(char_idx) - rope.char_to_byte(start),
                PositionEncoding::Utf16 => rope.char_to_utf16_cu(char_idx) - rope.char_to_utf16_cu(start),
            };
            (line as u32, character as u32)
        }
    }

    /// A model of the text independent of ropey: its chars, and for each
    /// line (LSP's breaks: `\n`, `\r\n`, `\r`) the char range of its content.
    struct Model {
        chars: Vec<char>,
        lines: Vec<(usize, usize)>,
    }

    impl Model {
        fn new(text: &str) -> Self {
            let chars: Vec<char> = text.chars().collect();
            let mut lines = Vec::new();
            let (mut start, mut i) = (0, 0);
            while i < chars.len() {
                let width = match chars[i] {
                    '\r' if chars.get(i + 1) == Some(&'\n') => 2,
                    '\r' | '\n' => 1,
                    _ => 0,
                };
                if width > 0 {
                    lines.push((start, i));
                    start = i + width;
                    i += width;
                } else {
                    i += 1;
                }
            }
            lines.push((start, chars.len()));
            Model { chars, lines }
        }

        fn width(c: char, encoding: PositionEncoding) -> usize {
            match encoding {
                PositionEncoding::Utf8 => c.len_utf8(),
                PositionEncoding::Utf16 => c.len_utf16(),
                PositionEncoding::Utf32 => 1,
            }
        }

        /// The char index of a position, clamped as the module says.
        fn index(&self, line: u32, character: u32, encoding: PositionEncoding) -> usize {
            let Some(&(start, end)) = self.lines.get(line as usize) else {
                return self.chars.len();
            };
            let (mut remaining, mut i) = (character as usize, start);
            while i < end && remaining >= Self::width(self.chars[i], encoding) {
                remaining -= Self::width(self.chars[i], encoding);
                i += 1;
            }
            i
        }

        /// The byte index of every char index (and the end).
        fn bytes(&self) -> Vec<usize> {
            let mut out = vec![0];
            for c in &self.chars {
                out.push(out[out.len() - 1] + c.len_utf8());
            }
            out
        }

        /// The position of every char index (and the end): the line whose
        /// start is the last at or before it, the column every char between.
        fn positions(&self, encoding: PositionEncoding) -> Vec<(u32, u32)> {
            let mut out: Vec<(u32, u32)> = Vec::with_capacity(self.chars.len() + 1);
            let mut line = 0;
            for i in 0..=self.chars.len() {
                while line + 1 < self.lines.len() && self.lines[line + 1].0 <= i {
                    line += 1;
                }
                let column = if i == self.lines[line].0 {
                    0
                } else {
                    out[i - 1].1 as usize + Self::width(self.chars[i - 1], encoding)
                };
                out.push((line as u32, column as u32));
            }
            out
        }
    }

    /// Text of CJK, emoji, accents, ASCII, every line break, with and
    /// without a final newline, and lines long enough to span ropey's
    /// chunks (about 1 KB).
    fn text() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let piece = prop_oneof![
            4 => Just("a"),
            2 => Just("é"),
            2 => Just("漢"),
            2 => Just("😀"),
            2 => Just("\n"),
            1 => Just("\r\n"),
            1 => Just("\r"),
            1 => Just(" = "),
            1 => Just("\u{2028}"),
            1 => Just("long_ascii_identifier_that_goes_on_and_on_for_a_while_0123456789 "),
            1 => Just("漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字"),
            1 => Just("😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀"),
        ];
        (proptest::collection::vec(piece, 0..120), any::<bool>()).prop_map(|(p, newline)| {
            let mut text = p.concat();
            if newline {
                text.push('\n');
            }
            text
        })
    }

    /// The same text as `Rope::from_str` chunks it and as typing does (a
    /// piece at a time, so chunk edges fall elsewhere).
    fn ropes(text: &str) -> [Rope; 2] {
        let mut typed = Rope::new();
        let mut rest = text;
        while !rest.is_empty() {
            let mut cut = rest.len().min(7);
            while !rest.is_char_boundary(cut) {
                cut += 1;
            }
            typed.insert(typed.len_chars(), &rest[..cut]);
            rest = &rest[cut..];
        }
        [Rope::from_str(text), typed]
    }

    fn coordinate(max: u32) -> impl proptest::strategy::Strategy<Value = u32> {
        use proptest::prelude::*;
        prop_oneof![6 => 0..max, 1 => max..max + 4, 1 => Just(u32::MAX), 1 => 0..u32::MAX]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(40))]

        #[test]
        fn positions_convert_as_the_reference_does(
            text in text(),
            positions in proptest::collection::vec((coordinate(40), coordinate(3000)), 1..40),
        ) {
            let model = Model::new(&text);
            let bytes = model.bytes();
            for rope in ropes(&text) {
                let lines = rope.len_lines() as u32;
                // Every line, at columns in and around every char, and the
                // random positions (out of range ones included).
                let mut all: Vec<(u32, u32)> = positions.clone();
                for line in 0..lines + 2 {
                    // Columns from the start, and around the line's end in
                    // each encoding (at most four units per char).
                    let len = model.lines.get(line as usize).map_or(0, |(s, e)| e - s) as u32;
                    all.extend((0..(len * 4 + 3).min(24)).map(|c| (line, c)));
                    all.extend((len.saturating_sub(2)..len + 3).map(|c| (line, c)));
                    all.extend((len * 2..len * 2 + 3).map(|c| (line, c)));
                    all.extend(((len * 4).saturating_sub(4)..len * 4 + 3).map(|c| (line, c)));
                    all.push((line, u32::MAX));
                }
                for (line, column) in all {
                    for encoding in ENCODINGS {
                        let got = position_to_offset(&rope, line, column, encoding);
                        let want = model.index(line, column, encoding);
                        proptest::prop_assert_eq!(got.char, want, "{:?} at {}:{} in {:?}", encoding, line, column, text);
                        proptest::prop_assert_eq!(got.byte, bytes[want]);
                        proptest::prop_assert_eq!(got.char, before::position_to_char(&rope, line, column, encoding));
                    }
                }
            }
        }

        #[test]
        fn spans_convert_as_their_two_ends_do(
            text in text(),
            spans in proptest::collection::vec(((coordinate(20), coordinate(200)), coordinate(200)), 1..40),
        ) {
            for rope in ropes(&text) {
                for &((line, a), b) in &spans {
                    // Same-line spans (the scan goes on from the start),
                    // reversed ones and spans across lines.
                    for (start, end) in [((line, a), (line, b)), ((line, a), (line.saturating_add(1), b))] {
                        let span = Span::new(
                            crate::position::LineCol::new(start.0, start.1),
                            crate::position::LineCol::new(end.0, end.1),
                        );
                        for encoding in ENCODINGS {
                            let (s, e) = span_to_offsets(&rope, span, encoding);
                            proptest::prop_assert_eq!(s, position_to_offset(&rope, start.0, start.1, encoding));
                            proptest::prop_assert_eq!(e, position_to_offset(&rope, end.0, end.1, encoding));
                        }
                    }
                }
            }
        }

        #[test]
        fn byte_offsets_convert_back_as_the_reference_does(text in text(), extra in 0usize..8) {
            let model = Model::new(&text);
            let positions = ENCODINGS.map(|e| model.positions(e));
            for rope in ropes(&text) {
                // Every byte offset (of the first and last 600 in a longer
                // text), inside multi-byte chars and between `\r` and `\n`
                // included, and past the end.
                let bytes = (0..=text.len().min(600)).chain(text.len().saturating_sub(600)..=text.len() + extra);
                for byte in bytes {
                    let mut start = byte.min(text.len());
                    while !text.is_char_boundary(start) {
                        start -= 1;
                    }
                    let char_idx = text[..start].chars().count();
                    for (encoding, positions) in ENCODINGS.into_iter().zip(&positions) {
                        let got = byte_to_position(&rope, byte, encoding);
                        proptest::prop_assert_eq!(got, before::byte_to_position(&rope, byte, encoding));
                        proptest::prop_assert_eq!(got, positions[char_idx], "{:?} at byte {} of {:?}", encoding, byte, text);
                        proptest::prop_assert_eq!(char_to_position(&rope, char_idx, encoding), got);
                    }
                }
            }
        }
    }
}
