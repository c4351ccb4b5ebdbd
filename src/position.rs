//! Places in a text, 0-based as LSP counts them: `LineCol` (a line and a
//! column), `Span` (from one to another) and `LineRange` (whole lines,
//! inclusive). Every position inside agentfix is one of these; they become
//! 1-based numbers only where text is made for a person or the model
//! (`LineCol::line_number`, `LineRange::numbers`), as `u64` so that the last
//! `u32` line still gets its number.
//!
//! Its parts:
//! places in a text, 0-based as LSP counts them: `LineCol` (line, column in
//! its producer's unit), `Span`, `LineRange` (whole lines, inclusive);
//! 1-based numbers (`u64`) only for text a person or the model reads;
//! `char_column`: a column counted in a `ColumnUnit` (UTF-8 bytes, UTF-16
//! units, characters) as characters of its line, clamped

/// A 0-based line and 0-based column. The column's unit is that of whoever
/// produced it, as an LSP `character` is: the negotiated encoding for the
/// editor's positions, the server's for a downstream server's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct LineCol {
    pub line: u32,
    pub column: u32,
}

impl LineCol {
    pub const fn new(line: u32, column: u32) -> Self {
        Self { line, column }
    }

    /// The line as people number it (1-based).
    pub fn line_number(self) -> u64 {
        u64::from(self.line) + 1
    }

    /// The column as people number it (1-based).
    pub fn column_number(self) -> u64 {
        u64::from(self.column) + 1
    }
}

/// From `start` to `end` (0-based, end exclusive, as an LSP `Range`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Span {
    pub start: LineCol,
    pub end: LineCol,
}

impl Span {
    pub const fn new(start: LineCol, end: LineCol) -> Self {
        Self { start, end }
    }
}

/// Whole lines, 0-based, `first` to `last` inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct LineRange {
    pub first: u32,
    pub last: u32,
}

impl LineRange {
    pub const fn new(first: u32, last: u32) -> Self {
        Self { first, last }
    }

    /// The one 0-based line `line`.
    pub const fn line(line: u32) -> Self {
        Self { first: line, last: line }
    }

    /// The lines numbered `first..=last` (1-based, as people and the
    /// transcript count them); 0 counts as line 1.
    pub fn from_numbers(first: u32, last: u32) -> Self {
        Self { first: first.saturating_sub(1), last: last.saturating_sub(1) }
    }

    /// The first and last line as people number them (1-based).
    pub fn numbers(self) -> (u64, u64) {
        (u64::from(self.first) + 1, u64::from(self.last) + 1)
    }

    /// Whether 0-based `line` is one of these lines.
    pub fn contains(self, line: u32) -> bool {
        self.first <= line && line <= self.last
    }
}

/// What a producer counts a line's columns in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnUnit {
    /// Bytes of UTF-8.
    Utf8,
    /// UTF-16 code units (a character past U+FFFF is two).
    Utf16,
    /// Characters (Unicode scalar values): what a `LineCol` of ours counts.
    Chars,
}

/// The 0-based character column of 0-based `column`, counted in `unit`, on
/// `line` (its text without the `\n`), clamped as the documents'
/// conversions are: past the line's end is its end (before a `\r`), inside
/// a character is that character's start.
pub fn char_column(line: &str, column: u32, unit: ColumnUnit) -> u32 {
    let line = line.strip_suffix('\r').unwrap_or(line);
    let (mut units, mut chars) = (0usize, 0u32);
    for c in line.chars() {
        units += match unit {
            ColumnUnit::Utf8 => c.len_utf8(),
            ColumnUnit::Utf16 => c.len_utf16(),
            ColumnUnit::Chars => 1,
        };
        if units > column as usize {
            break;
        }
        chars += 1;
    }
    chars
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_one_based_and_the_last_line_has_one() {
        assert_eq!((LineCol::new(0, 4).line_number(), LineCol::new(0, 4).column_number()), (1, 5));
        assert_eq!(LineCol::new(u32::MAX, 0).line_number(), 4_294_967_296);
        assert_eq!(LineRange::new(2, 3).numbers(), (3, 4));
        assert_eq!(LineRange::from_numbers(3, 4), LineRange::new(2, 3));
        assert_eq!(LineRange::from_numbers(0, 1), LineRange::line(0));
        assert!(LineRange::new(2, 3).contains(3) && !LineRange::new(2, 3).contains(4));
        assert!(LineCol::new(1, 9) < LineCol::new(2, 0));
    }

    #[test]
    fn columns_in_each_unit_become_characters_clamped() {
        // `漢` is 3 bytes and 1 UTF-16 unit, `😀` 4 bytes and 2 units: `b`
        // is at byte 8, unit 4, character 3.
        let line = "a漢😀b\r";
        assert_eq!(char_column(line, 8, ColumnUnit::Utf8), 3);
        assert_eq!(char_column(line, 4, ColumnUnit::Utf16), 3);
        assert_eq!(char_column(line, 3, ColumnUnit::Chars), 3);
        // Inside a character: its start.
        assert_eq!(char_column(line, 2, ColumnUnit::Utf8), 1);
        assert_eq!(char_column(line, 3, ColumnUnit::Utf16), 2);
        // Past the end: the end, the `\r` not counted.
        assert_eq!(char_column(line, 99, ColumnUnit::Utf16), 4);
        assert_eq!(char_column(line, 99, ColumnUnit::Chars), 4);
        assert_eq!(char_column("", 5, ColumnUnit::Utf8), 0);
    }
}
