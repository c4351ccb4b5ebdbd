//! Property: incremental document sync gives the text a full sync would,
//! for random edit sequences in each position encoding, out-of-range and
//! mid-code-point positions included. The reference is an independent model
//! of the editor's text (a vector of chars, LSP's line breaks `\n`, `\r\n`
//! and `\r`, and the clamping rules the server documents); the recorded
//! history must replay to the same text.

use agentfix::documents::{Change, Documents, PositionEncoding};
use agentfix::position::{LineCol, Span};
use agentfix::workspace::BufferPin;
use proptest::prelude::*;

/// Units of `c` in `encoding`.
fn units(c: char, encoding: PositionEncoding) -> usize {
    match encoding {
        PositionEncoding::Utf8 => c.len_utf8(),
        PositionEncoding::Utf16 => c.len_utf16(),
        PositionEncoding::Utf32 => 1,
    }
}

/// (content start, content end) of every line, in char indices.
fn lines(text: &[char]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < text.len() {
        match text[i] {
            '\r' if text.get(i + 1) == Some(&'\n') => {
                out.push((start, i));
                i += 2;
                start = i;
            }
            '\r' | '\n' => {
                out.push((start, i));
                i += 1;
                start = i;
            }
            _ => i += 1,
        }
    }
    out.push((start, text.len()));
    out
}

/// The char index of a position: a line past the end is the end of the
/// text, a character past the line its end (before the break), a character
/// inside a code point that code point's start.
fn index(text: &[char], line: u32, character: u32, encoding: PositionEncoding) -> usize {
    let lines = lines(text);
    let Some(&(start, end)) = lines.get(line as usize) else {
        return text.len();
    };
    let mut remaining = character as usize;
    let mut i = start;
    while i < end && remaining >= units(text[i], encoding) {
        remaining -= units(text[i], encoding);
        i += 1;
    }
    i
}

fn piece() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![Just("a"), Just("é"), Just("😀"), Just("漢"), Just("\n"), Just("\r\n"), Just("\r"), Just(" ")],
        0..6,
    )
    .prop_map(|p| p.concat())
}

fn coordinate() -> impl Strategy<Value = u32> {
    prop_oneof![8 => 0u32..10, 1 => Just(u32::MAX), 1 => 10u32..1000]
}

#[derive(Debug, Clone)]
struct Edit {
    range: ((u32, u32), (u32, u32)),
    text: String,
}

impl Edit {
    fn span(&self) -> Span {
        let ((sl, sc), (el, ec)) = self.range;
        Span::new(LineCol::new(sl, sc), LineCol::new(el, ec))
    }
}

fn edit() -> impl Strategy<Value = Edit> {
    ((coordinate(), coordinate()), (coordinate(), coordinate()), piece())
        .prop_map(|(start, end, text)| Edit { range: (start, end), text })
}

fn encoding() -> impl Strategy<Value = PositionEncoding> {
    prop_oneof![Just(PositionEncoding::Utf8), Just(PositionEncoding::Utf16), Just(PositionEncoding::Utf32)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn incremental_sync_equals_full_sync(
        initial in piece(),
        batches in proptest::collection::vec(proptest::collection::vec(edit(), 1..4), 1..12),
        encoding in encoding(),
    ) {
        let incremental = Documents::new();
        let full = Documents::new();
        incremental.open("file:///a", None, "t", 1, &initial);
        full.open("file:///a", None, "t", 1, &initial);
        let mut reference: Vec<char> = initial.chars().collect();
        for (n, batch) in batches.iter().enumerate() {
            let version = n as i32 + 2;
            let changes: Vec<Change> =
                batch.iter().map(|e| Change { range: Some(e.span()), text: e.text.clone() }).collect();
            // The changes of one notification apply one after the other.
            for e in batch {
                let ((sl, sc), (el, ec)) = e.range;
                let a = index(&reference, sl, sc, encoding);
                let b = index(&reference, el, ec, encoding);
                let (a, b) = (a.min(b), a.max(b));
                reference.splice(a..b, e.text.chars());
            }
            let text: String = reference.iter().collect();
            incremental.change("file:///a", version, &changes, encoding).unwrap();
            full.change("file:///a", version, &[Change { range: None, text: text.clone() }], encoding).unwrap();
            prop_assert_eq!(incremental.get("file:///a").unwrap().rope.to_string(), text.clone());
            prop_assert_eq!(full.get("file:///a").unwrap().rope.to_string(), text);
        }
        // Both histories replay from the opened text to the text now.
        let now: String = reference.iter().collect();
        for docs in [&incremental, &full] {
            let generation = docs.get("file:///a").unwrap().generation;
            let (edits, _) = docs.changes_since("file:///a", BufferPin { generation, seq: 0 }).unwrap();
            let mut replayed = initial.clone();
            for e in edits {
                replayed.replace_range(e.start..e.end, &e.text);
            }
            prop_assert_eq!(&replayed, &now);
        }
    }
}
