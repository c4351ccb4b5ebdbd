//! The data path of the `WorkspaceEdit` builder.
//!
//! `lsp::convert::workspace_edit` is private to `lsp`, so this target fuzzes
//! what it is made of, through the public API: line hunks
//! (`workspace::hunks`), their byte offsets turned into LSP positions in the
//! negotiated encoding (`documents::encoding::byte_to_position`, exactly as
//! `workspace_edit` does), and those edits applied the way an editor applies
//! a `WorkspaceEdit` (every range on the original text; here one `didChange`
//! per edit, last first, through `documents::Documents`).
//!
//! Two sources of hunks, as in `lsp::proposal`:
//!
//! - `FromChange`: `hunks(original, new)` (a run's change, no rebase);
//! - `Rebased`: hunks of a proposal carried over the user's changes by
//!   `workspace::rebase`, on the user's current text.
//!
//! Checks: `apply_hunks(old, hunks(old, new)) == new`, hunks sorted, on char
//! boundaries and whole lines (LSP's line breaks); `unified_diff` does not panic; and the edit,
//! converted to positions and applied by position, gives the same text as
//! applying the hunks by bytes.

#![no_main]

use agentfix::documents::encoding::byte_to_position;
use agentfix::documents::{Change, Documents, PositionEncoding};
use agentfix::position::{LineCol, Span};
use agentfix::workspace::{Edit, apply_hunks, hunks, rebase, unified_diff};
use arbitrary::Arbitrary;
use common::{Enc, Piece};
use libfuzzer_sys::fuzz_target;
use ropey::Rope;

mod common;

/// Few letters: more repeated lines for the diffs.
fn text_of(pieces: &[Piece]) -> String {
    common::text_of(pieces, 4)
}

#[derive(Debug, Arbitrary)]
struct UserChange {
    start: u16,
    end: u16,
    text: Vec<Piece>,
}

#[derive(Debug, Arbitrary)]
enum Mode {
    FromChange,
    Rebased(Vec<UserChange>),
}

#[derive(Debug, Arbitrary)]
struct Input {
    old: Vec<Piece>,
    new: Vec<Piece>,
    encoding: Enc,
    mode: Mode,
}

fn check_line_hunks(old: &str, new: &str, hs: &[Edit]) {
    assert_eq!(apply_hunks(old, hs), new, "hunks do not reproduce the new text: {hs:?}");
    let mut prev = 0;
    for h in hs {
        assert!(h.start <= h.end && h.end <= old.len());
        assert!(h.start >= prev, "hunks unsorted or overlapping: {hs:?}");
        assert!(old.is_char_boundary(h.start) && old.is_char_boundary(h.end));
        // After `\n`, or after a lone `\r` (similar splits lines there too,
        // like LSP); never between the `\r` and `\n` of one line break.
        let b = old.as_bytes();
        let line_start = |i: usize| i == 0 || b[i - 1] == b'\n' || (b[i - 1] == b'\r' && b.get(i) != Some(&b'\n'));
        assert!(line_start(h.start), "hunk does not start at a line: {h:?}");
        assert!(h.end == old.len() || line_start(h.end), "hunk does not end at a line: {h:?}");
        prev = h.end;
    }
}

/// Applies `hs` (on `text`) as LSP edits in `encoding`, the way a client
/// applies a `WorkspaceEdit`, and returns the result.
fn apply_as_lsp(text: &str, hs: &[Edit], encoding: PositionEncoding) -> String {
    let rope = Rope::from_str(text);
    let edits: Vec<((u32, u32), (u32, u32), &str)> = hs
        .iter()
        .map(|h| {
            (byte_to_position(&rope, h.start, encoding), byte_to_position(&rope, h.end, encoding), h.text.as_str())
        })
        .collect();
    let docs = Documents::new();
    docs.open("file:///w/f", None, "plaintext", 1, text);
    // All ranges refer to the original text: applied last first, each keeps
    // the ranges before it valid.
    for (i, (start, end, new_text)) in edits.iter().enumerate().rev() {
        docs.change(
            "file:///w/f",
            2 + i as i32,
            &[Change {
                range: Some(Span::new(LineCol::new(start.0, start.1), LineCol::new(end.0, end.1))),
                text: new_text.to_string(),
            }],
            encoding,
        )
        .unwrap();
    }
    docs.get("file:///w/f").unwrap().rope.to_string()
}

fuzz_target!(|input: Input| {
    let old = text_of(&input.old);
    let new = text_of(&input.new);
    let encoding = input.encoding.get();
    let hs = hunks(&old, &new);
    check_line_hunks(&old, &new, &hs);
    let _ = unified_diff("f.txt", Some(&old), &new);
    let _ = unified_diff("f.txt", None, &new);

    match &input.mode {
        Mode::FromChange => {
            let got = apply_as_lsp(&old, &hs, encoding);
            assert_eq!(got, new, "the edit applied by LSP positions differs from the proposal: hunks {hs:?}");
        }
        Mode::Rebased(changes) => {
            // The user's changes, on char boundaries of the text before each.
            let mut current = old.clone();
            let mut tcs = Vec::new();
            for c in changes.iter().take(16) {
                let len = current.len();
                let a = current.floor_char_boundary(c.start as usize % (len + 1));
                let b = current.floor_char_boundary(c.end as usize % (len + 1));
                let (a, b) = (a.min(b), a.max(b));
                let text = text_of(&c.text);
                current.replace_range(a..b, &text);
                tcs.push(Edit { start: a, end: b, text });
            }
            let r = rebase(&old, &hs, &tcs);
            let expected = apply_hunks(&current, &r.hunks);
            let got = apply_as_lsp(&current, &r.hunks, encoding);
            assert_eq!(
                got, expected,
                "the rebased edit applied by LSP positions differs from the rebased hunks: hunks {:?} on {current:?}",
                r.hunks
            );
        }
    }
});
