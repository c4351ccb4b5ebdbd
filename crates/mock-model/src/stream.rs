//! Builders that reshape a scripted stream ([`Chunk`] lists): stalls, truncation, and re-chunking
//! of the raw bytes (so that a multi-byte UTF-8 character arrives in two TCP reads), plus the
//! text-splitting helpers the SSE conversions share.

use std::time::Duration;

use super::Chunk;

/// Size of the pieces [`split_bytes`] cuts the byte stream into.
const SPLIT_BYTES: usize = 3;
/// Pause [`split_bytes`] puts after every piece.
const SPLIT_PAUSE: Duration = Duration::from_millis(1);

/// `chunks` with a [`Chunk::Sleep`] of `stall` inserted after the first `after` chunks (at the
/// end if there are fewer).
pub fn stalled(chunks: Vec<Chunk>, after: usize, stall: Duration) -> Vec<Chunk> {
    let mut chunks = chunks;
    let at = after.min(chunks.len());
    chunks.insert(at, Chunk::Sleep(stall));
    chunks
}

/// The first `keep` chunks, then [`Chunk::Close`]: the stream ends before its last event
/// (`message_stop` / `data: [DONE]`), scenario 19.
pub fn truncated(chunks: Vec<Chunk>, keep: usize) -> Vec<Chunk> {
    let mut chunks = chunks;
    chunks.truncate(keep);
    chunks.push(Chunk::Close);
    chunks
}

/// Re-chunks the byte stream of consecutive [`Chunk::Raw`] / [`Chunk::Bytes`] chunks into
/// [`Chunk::Bytes`] pieces of 3 bytes, each followed by a 1 ms [`Chunk::Sleep`], so that event
/// boundaries and multi-byte UTF-8 characters are split across TCP reads. `Sleep` and `Close`
/// chunks keep their place. The pieces are sent verbatim: the mock's send-time filling of a null
/// `model` / `input_tokens` applies only to whole `Raw` events, so fill those fields in the
/// message before converting it if the client needs them.
pub fn split_bytes(chunks: Vec<Chunk>) -> Vec<Chunk> {
    fn flush(pending: &mut Vec<u8>, out: &mut Vec<Chunk>) {
        for piece in pending.chunks(SPLIT_BYTES) {
            out.push(Chunk::Bytes(piece.to_vec()));
            out.push(Chunk::Sleep(SPLIT_PAUSE));
        }
        pending.clear();
    }
    let mut out = Vec::new();
    let mut pending = Vec::new();
    for chunk in chunks {
        match chunk {
            Chunk::Raw(text) => pending.extend_from_slice(text.as_bytes()),
            Chunk::Bytes(bytes) => pending.extend_from_slice(&bytes),
            other => {
                flush(&mut pending, &mut out);
                out.push(other);
            }
        }
    }
    flush(&mut pending, &mut out);
    out
}

/// `text` in pieces of `n` characters; `[""]` for an empty text (a delta is never omitted).
pub(super) fn split_chars(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return vec![String::new()];
    }
    chars.chunks(n).map(|piece| piece.iter().collect()).collect()
}

/// `text` in pieces of about `n` bytes: each piece is extended to the next character boundary.
/// Empty for an empty text.
pub(super) fn split_utf8(text: &str, n: usize) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut start = 0;
    while start < text.len() {
        let mut end = (start + n).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        pieces.push(text[start..end].to_string());
        start = end;
    }
    pieces
}
