//! Position conversion and incremental sync in each encoding
//! (`documents::Documents`, `documents::Change`, `documents::encoding`).
//!
//! Arbitrary text and arbitrary `didChange` batches, out-of-range positions
//! included. Checks, after every change:
//!
//! - nothing panics;
//! - the document's text equals a reference model: a `String` with LSP's
//!   line breaks (`\n`, `\r\n`, `\r`), written here from the specification
//!   (a line past the end → end of text; a character past the line → end of
//!   the line before its break; inside a code point → its start; a reversed
//!   range is normalised);
//! - the recorded history (`changes_since` the open) replayed over the opened
//!   text gives the current text, every edit on char boundaries;
//! - `char_to_position` / `position_to_char` / `byte_to_position` agree with
//!   the model and round-trip.

#![no_main]

use std::path::PathBuf;

use agentfix::documents::encoding::{byte_to_position, char_to_position, position_to_char};
use agentfix::documents::{Change, Documents, PositionEncoding};
use agentfix::position::{LineCol, Span};
use agentfix::workspace::BufferPin;
use arbitrary::Arbitrary;
use common::Enc;
use libfuzzer_sys::fuzz_target;
use ropey::Rope;

mod common;

/// A coordinate: mostly small, sometimes anything.
#[derive(Debug, Arbitrary, Clone, Copy)]
enum N {
    Small(u8),
    Any(u32),
    Max,
}

impl N {
    fn get(self) -> u32 {
        match self {
            N::Small(n) => (n % 24) as u32,
            N::Any(n) => n,
            N::Max => u32::MAX,
        }
    }
}

/// Text made of the common pieces and a few more that stress the
/// encodings.
#[derive(Debug, Arbitrary)]
enum Piece {
    Common(common::Piece),
    Combining,
    LineSep,
    Nul,
}

fn text_of(pieces: &[Piece]) -> String {
    let mut s = String::new();
    for p in pieces {
        match p {
            Piece::Common(p) => p.push(&mut s, 26),
            Piece::Combining => s.push_str("e\u{301}"),
            Piece::LineSep => s.push('\u{2028}'),
            Piece::Nul => s.push('\0'),
        }
    }
    s
}

#[derive(Debug, Arbitrary)]
struct FuzzChange {
    range: Option<((N, N), (N, N))>,
    text: Vec<Piece>,
}

#[derive(Debug, Arbitrary)]
enum Op {
    /// One `didChange` with these content changes.
    Change { version: i32, changes: Vec<FuzzChange> },
    /// Position conversions on the current text.
    Probe { char_idx: u32, byte: u32, line: N, character: N },
    /// `didClose` then `didOpen` with new text.
    Reopen(Vec<Piece>),
}

#[derive(Debug, Arbitrary)]
struct Input {
    encoding: Enc,
    text: Vec<Piece>,
    ops: Vec<Op>,
}

// ---- the reference model -------------------------------------------------

fn units(c: char, e: PositionEncoding) -> usize {
    match e {
        PositionEncoding::Utf8 => c.len_utf8(),
        PositionEncoding::Utf16 => c.len_utf16(),
        PositionEncoding::Utf32 => 1,
    }
}

/// Byte ranges of each line's content (without its break), LSP style.
fn lines(text: &str) -> Vec<(usize, usize)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\n' => {
                out.push((start, i));
                i += 1;
                start = i;
            }
            b'\r' => {
                out.push((start, i));
                i += if b.get(i + 1) == Some(&b'\n') { 2 } else { 1 };
                start = i;
            }
            _ => i += 1,
        }
    }
    out.push((start, b.len()));
    out
}

/// The byte offset of `(line, character)`, clamped as LSP servers should.
fn model_offset(text: &str, line: u32, character: u32, e: PositionEncoding) -> usize {
    let ls = lines(text);
    let Some(&(start, end)) = ls.get(line as usize) else { return text.len() };
    let mut remaining = character as usize;
    let mut at = start;
    for c in text[start..end].chars() {
        let w = units(c, e);
        if remaining < w {
            break;
        }
        remaining -= w;
        at += c.len_utf8();
    }
    at
}

/// `(line, character)` of a byte offset that is on a char boundary.
fn model_position(text: &str, byte: usize, e: PositionEncoding) -> (u32, u32) {
    let ls = lines(text);
    // The line whose content-or-break holds `byte`.
    let mut line = 0;
    for (i, &(start, _)) in ls.iter().enumerate() {
        if start <= byte {
            line = i;
        }
    }
    let start = ls[line].0;
    let ch: usize = text[start..byte].chars().map(|c| units(c, e)).sum();
    (line as u32, ch as u32)
}

fn model_apply(text: &mut String, change: &FuzzChange, e: PositionEncoding) {
    let new = text_of(&change.text);
    match change.range {
        None => *text = new,
        Some(((sl, sc), (el, ec))) => {
            let a = model_offset(text, sl.get(), sc.get(), e);
            let b = model_offset(text, el.get(), ec.get(), e);
            let (a, b) = (a.min(b), a.max(b));
            text.replace_range(a..b, &new);
        }
    }
}

// ---- checks ----------------------------------------------------------------

fn check_history(docs: &Documents, uri: &str, opened: &str, generation: u64, current: &str) {
    let (edits, doc) = docs
        .changes_since(uri, BufferPin { generation, seq: 0 })
        .expect("the history since the open is kept (fewer than 5000 changes)");
    let mut text = opened.to_string();
    for (i, e) in edits.iter().enumerate() {
        assert!(
            e.start <= e.end && e.end <= text.len(),
            "edit {i} {}..{} outside the text ({} bytes)",
            e.start,
            e.end,
            text.len()
        );
        assert!(
            text.is_char_boundary(e.start) && text.is_char_boundary(e.end),
            "edit {i} {}..{} not on char boundaries",
            e.start,
            e.end
        );
        text.replace_range(e.start..e.end, &e.text);
    }
    assert_eq!(text, current, "replaying the history does not give the current text");
    assert_eq!(doc.rope.to_string(), current);
}

fn probe(text: &str, e: PositionEncoding, char_idx: u32, byte: u32, line: N, character: N) {
    let rope = Rope::from_str(text);
    let nchars = rope.len_chars();
    // position_to_char agrees with the model.
    let c = position_to_char(&rope, line.get(), character.get(), e);
    assert!(c <= nchars);
    assert_eq!(rope.char_to_byte(c), model_offset(text, line.get(), character.get(), e), "position_to_char");
    // char_to_position agrees with the model and round-trips.
    let ci = (char_idx as usize) % (nchars + 2);
    let (l, ch) = char_to_position(&rope, ci, e);
    let clamped = ci.min(nchars);
    let b = rope.char_to_byte(clamped);
    assert_eq!((l, ch), model_position(text, b, e), "char_to_position of char {ci}");
    let (ls, le) = lines(text)[l as usize];
    if b >= ls && b <= le {
        // Not inside a line break: the position leads back to the char.
        assert_eq!(position_to_char(&rope, l, ch, e), clamped, "round trip of char {clamped}");
    }
    // byte_to_position rounds down to the char's start.
    let bi = (byte as usize) % (text.len() + 2);
    let p = byte_to_position(&rope, bi, e);
    let floor = text.floor_char_boundary(bi.min(text.len()));
    assert_eq!(p, model_position(text, floor, e), "byte_to_position of byte {bi}");
}

fuzz_target!(|input: Input| {
    let e = input.encoding.get();
    let docs = Documents::new();
    let uri = "file:///fuzz/a.txt";
    let mut opened = text_of(&input.text);
    docs.open(uri, Some(PathBuf::from("/fuzz/a.txt")), "plaintext", 1, &opened);
    let mut generation = docs.get(uri).unwrap().generation;
    let mut model = opened.clone();
    let mut steps = 0;
    for op in input.ops.iter().take(64) {
        match op {
            Op::Change { version, changes } => {
                let changes: Vec<Change> = changes
                    .iter()
                    .map(|c| Change {
                        range: c.range.map(|((a, b), (x, y))| {
                            Span::new(LineCol::new(a.get(), b.get()), LineCol::new(x.get(), y.get()))
                        }),
                        text: text_of(&c.text),
                    })
                    .collect();
                docs.change(uri, *version, &changes, e).expect("the document is open");
                for fc in op_changes(op) {
                    model_apply(&mut model, fc, e);
                }
                steps += 1;
                let doc = docs.get(uri).unwrap();
                assert_eq!(doc.rope.to_string(), model, "incremental sync differs from the model");
                assert_eq!(doc.version, *version);
                assert_eq!(doc.seq, steps);
                check_history(&docs, uri, &opened, generation, &model);
            }
            Op::Probe { char_idx, byte, line, character } => probe(&model, e, *char_idx, *byte, *line, *character),
            Op::Reopen(pieces) => {
                docs.close(uri).unwrap();
                assert!(docs.get(uri).is_none());
                opened = text_of(pieces);
                docs.open(uri, Some(PathBuf::from("/fuzz/a.txt")), "plaintext", 1, &opened);
                let doc = docs.get(uri).unwrap();
                assert!(doc.generation > generation, "a new generation at every open");
                generation = doc.generation;
                model = opened.clone();
                steps = 0;
            }
        }
    }
});

fn op_changes(op: &Op) -> &[FuzzChange] {
    match op {
        Op::Change { changes, .. } => changes,
        _ => &[],
    }
}
