//! What the fuzz targets share: text made of pieces that stress line breaks
//! and multi-unit characters, the negotiated position encoding, and the
//! tokio runtime of the targets that need one. Each target has `mod common;`
//! and uses what it needs.
//!
//! `Piece`'s variants and their order are those the `workspace_edit`
//! regression input was found with: `arbitrary` decodes an enum by its
//! number of variants, so adding one here would turn that input into
//! another. A target that wants more pieces wraps this one (as `documents`
//! does).
#![allow(dead_code)]

use std::sync::OnceLock;

use agentfix::documents::PositionEncoding;
use arbitrary::Arbitrary;

/// A piece of text.
#[derive(Debug, Arbitrary)]
pub enum Piece {
    Lf,
    CrLf,
    Cr,
    /// One of the first `letters` lowercase ASCII letters (see [`text_of`]).
    Ascii(u8),
    Cjk,
    Emoji,
    Any(String),
}

impl Piece {
    /// Appends the piece to `s`; `Ascii` is one of the first `letters`
    /// letters (few letters: more repeated lines for the diffs).
    pub fn push(&self, s: &mut String, letters: u8) {
        match self {
            Piece::Lf => s.push('\n'),
            Piece::CrLf => s.push_str("\r\n"),
            Piece::Cr => s.push('\r'),
            Piece::Ascii(b) => s.push((b'a' + b % letters) as char),
            Piece::Cjk => s.push('漢'),
            Piece::Emoji => s.push('😀'),
            Piece::Any(t) => s.push_str(t),
        }
    }
}

/// The text of `pieces` (see [`Piece::push`]).
pub fn text_of(pieces: &[Piece], letters: u8) -> String {
    let mut s = String::new();
    for p in pieces {
        p.push(&mut s, letters);
    }
    s
}

/// The position encoding a client negotiated.
#[derive(Debug, Arbitrary, Clone, Copy)]
pub enum Enc {
    Utf8,
    Utf16,
    Utf32,
}

impl Enc {
    pub fn get(self) -> PositionEncoding {
        match self {
            Enc::Utf8 => PositionEncoding::Utf8,
            Enc::Utf16 => PositionEncoding::Utf16,
            Enc::Utf32 => PositionEncoding::Utf32,
        }
    }
}

/// One runtime for the whole fuzzing process, with one worker thread (the
/// transport's reader thread spawns onto it while the target waits).
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap())
}
