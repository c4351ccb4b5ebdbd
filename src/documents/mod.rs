//! The editor's open buffers: one rope, version and language per document,
//! keyed by URI and also reachable by file path.
//!
//! The store is written only by the LSP layer, strictly in wire order (see
//! `lsp::ordered`); readers take cheap snapshots (cloning a rope is O(1)), so
//! no lock is ever held across an `.await`.
//!
//! Its parts:
//! open buffers (ropey `Rope` + version, and the history of applied changes
//! beside each, never copied by a snapshot), a `didChange` is a `Change` of a
//! `position::Span`; `encoding.rs`: position encodings and clamping, a
//! position to an `Offset` (char and byte) with two rope descents and a scan
//! of its one line up to the column (ASCII runs whole), a span's end on its
//! start's line by going on with the same scan, a byte offset back to a
//! position with three descents

pub mod encoding;

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::RwLock;

use ropey::Rope;

pub use encoding::PositionEncoding;

use crate::position::Span;
use crate::workspace::{BufferPin, BufferSource, BufferText, Edit};

/// One open buffer, as the editor last described it.
#[derive(Debug, Clone)]
pub struct Document {
    pub uri: String,
    /// The file path when the URI is a `file:` URI.
    pub path: Option<PathBuf>,
    pub language_id: String,
    pub version: i32,
    pub rope: Rope,
    /// New at every `didOpen`, unique in the session.
    pub generation: u64,
    /// Changes applied since the open: with `generation`, names one state
    /// of the text where the version number cannot.
    pub seq: u64,
    /// A change from the editor could not be applied (its params did not
    /// parse), so this text may differ from the editor's: no run may target
    /// or propose edits to it until a `didOpen` or a `didSave` with text.
    pub out_of_sync: bool,
}

impl Document {
    /// This state of this document.
    pub fn pin(&self) -> BufferPin {
        BufferPin { generation: self.generation, seq: self.seq }
    }
}

/// One content change of a `didChange`: a replaced range, or the whole text.
#[derive(Debug, Clone)]
pub struct Change {
    /// The replaced range, its columns in the negotiated encoding; `None`
    /// replaces the whole document.
    pub range: Option<Span>,
    pub text: String,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DocumentError {
    #[error("document {0} is not open")]
    NotOpen(String),
    #[error("the changes since version {0} are no longer kept")]
    HistoryGone(i32),
    #[error("document {0} was closed and opened again")]
    Reopened(String),
}

/// Versions of history kept per document (enough for a run's duration of
/// typing; older runs fall back to reporting conflicts).
const HISTORY_VERSIONS: usize = 5000;

/// The changes applied to one document since its text was last set, the
/// newest [`HISTORY_VERSIONS`] of them: every step's edits in one queue (a
/// keystroke allocates nothing here but its text), each step named by the
/// seq before it and how many edits it made.
#[derive(Debug, Default)]
struct History {
    /// (seq before, edits) per step, oldest first.
    steps: VecDeque<(u64, usize)>,
    /// The edits of every step, in order.
    edits: VecDeque<Edit>,
}

impl History {
    /// Records the step from `seq` that made the last `made` edits of `edits`.
    fn push(&mut self, seq: u64, made: usize) {
        self.steps.push_back((seq, made));
        if self.steps.len() > HISTORY_VERSIONS
            && let Some((_, n)) = self.steps.pop_front()
        {
            self.edits.drain(..n);
        }
    }

    /// The edits since the state `seq`, if it is still kept.
    fn since(&self, seq: u64) -> Option<Vec<Edit>> {
        let mut skip = 0;
        for &(before, n) in &self.steps {
            if before == seq {
                return Some(self.edits.iter().skip(skip).cloned().collect());
            }
            skip += n;
        }
        None
    }
}

/// An open document and its history, kept apart so a snapshot of the
/// document never copies the history.
#[derive(Debug)]
struct Entry {
    doc: Document,
    history: History,
}

/// The set of open documents.
#[derive(Debug, Default)]
pub struct Documents {
    docs: RwLock<HashMap<String, Entry>>,
    /// URI of the document open at each path, written under the `docs` write lock.
    paths: RwLock<HashMap<PathBuf, String>>,
    /// The last generation handed out.
    generations: std::sync::atomic::AtomicU64,
}

impl Documents {
    pub fn new() -> Self {
        Self::default()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Entry>> {
        // A poisoned lock only means another thread panicked mid-update of a
        // map of plain values; the data is still usable.
        self.docs.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, Entry>> {
        self.docs.write().unwrap_or_else(|e| e.into_inner())
    }

    /// `didOpen`: (re)places the document.
    pub fn open(&self, uri: &str, path: Option<PathBuf>, language_id: &str, version: i32, text: &str) {
        let doc = Document {
            uri: uri.to_string(),
            path,
            language_id: language_id.to_string(),
            version,
            rope: Rope::from_str(text),
            generation: self.next_generation(),
            seq: 0,
            out_of_sync: false,
        };
        let mut docs = self.write();
        if let Some(p) = &doc.path {
            self.paths.write().unwrap_or_else(|e| e.into_inner()).insert(p.clone(), uri.to_string());
        }
        docs.insert(uri.to_string(), Entry { doc, history: History::default() });
    }

    fn next_generation(&self) -> u64 {
        self.generations.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1
    }

    /// A change to the document at `uri` was lost (it could not be parsed):
    /// marks it out of sync, with the version the editor gave it when that
    /// is known. The history is dropped and the state counted as changed, so
    /// no base pinned before trusts it. `None` if the document is not open,
    /// else whether it was in sync until now (the user is told once).
    pub fn mark_out_of_sync(&self, uri: &str, version: Option<i32>) -> Option<bool> {
        let mut docs = self.write();
        let Entry { doc, history } = docs.get_mut(uri)?;
        *history = History::default();
        if let Some(v) = version {
            doc.version = v;
        }
        doc.seq += 1;
        let newly = !doc.out_of_sync;
        doc.out_of_sync = true;
        Some(newly)
    }

    /// `didSave` with the saved text: the editor's text as of now. When it
    /// differs from this copy, or the copy was out of sync, the copy becomes
    /// that text (as a new generation: no recorded history leads to it) and
    /// is in sync again. `None` if the document is not open, else whether
    /// the text was replaced.
    pub fn resync(&self, uri: &str, text: &str) -> Option<bool> {
        let mut docs = self.write();
        let Entry { doc, history } = docs.get_mut(uri)?;
        if !doc.out_of_sync && doc.rope == text {
            return Some(false);
        }
        if !doc.out_of_sync {
            tracing::warn!(uri, "the saved text differs from the buffer as synced; taking the saved text");
        }
        *history = History::default();
        doc.rope = Rope::from_str(text);
        doc.generation = self.next_generation();
        doc.seq = 0;
        doc.out_of_sync = false;
        Some(true)
    }

    /// `didChange`: applies `changes` in order and sets the new version.
    pub fn change(
        &self,
        uri: &str,
        version: i32,
        changes: &[Change],
        encoding: PositionEncoding,
    ) -> Result<(), DocumentError> {
        let mut docs = self.write();
        let Entry { doc, history } = docs.get_mut(uri).ok_or_else(|| DocumentError::NotOpen(uri.to_string()))?;
        if version <= doc.version {
            tracing::warn!(uri, old = doc.version, new = version, "document version did not increase");
        }
        let before = history.edits.len();
        for change in changes {
            apply_change(&mut doc.rope, change, encoding, &mut history.edits);
        }
        history.push(doc.seq, history.edits.len() - before);
        doc.version = version;
        doc.seq += 1;
        Ok(())
    }

    /// The edits applied since the state `pin` of the document at `uri`, in
    /// order, and the document now. Versions play no part: they may repeat.
    pub fn changes_since(&self, uri: &str, pin: BufferPin) -> Result<(Vec<Edit>, Document), DocumentError> {
        let docs = self.read();
        let Entry { doc, history } = docs.get(uri).ok_or_else(|| DocumentError::NotOpen(uri.to_string()))?;
        if doc.generation != pin.generation {
            return Err(DocumentError::Reopened(uri.to_string()));
        }
        if doc.seq == pin.seq {
            return Ok((Vec::new(), doc.clone()));
        }
        let edits = history.since(pin.seq).ok_or(DocumentError::HistoryGone(doc.version))?;
        Ok((edits, doc.clone()))
    }

    /// `didClose`.
    pub fn close(&self, uri: &str) -> Result<(), DocumentError> {
        let mut docs = self.write();
        let Entry { doc, .. } = docs.remove(uri).ok_or_else(|| DocumentError::NotOpen(uri.to_string()))?;
        if let Some(p) = &doc.path {
            let mut paths = self.paths.write().unwrap_or_else(|e| e.into_inner());
            if paths.get(p).is_some_and(|u| u == uri) {
                paths.remove(p);
            }
        }
        Ok(())
    }

    /// A snapshot of one document by URI.
    pub fn get(&self, uri: &str) -> Option<Document> {
        self.read().get(uri).map(|e| e.doc.clone())
    }

    /// The version of the document at `uri`, without a snapshot.
    pub fn version(&self, uri: &str) -> Option<i32> {
        self.read().get(uri).map(|e| e.doc.version)
    }

    /// A snapshot of the document open at `path`, if any.
    pub fn get_by_path(&self, path: &Path) -> Option<Document> {
        let docs = self.read();
        let uri = self.paths.read().unwrap_or_else(|e| e.into_inner()).get(path).cloned()?;
        docs.get(&uri).map(|e| e.doc.clone())
    }

    pub fn len(&self) -> usize {
        self.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Applies one change to `rope`, clamping out-of-range positions, and
/// appends it to `edits` as byte edits (a whole-text replacement becomes the
/// line hunks between the two texts, last first, so that each applies to the
/// text left by the previous one).
fn apply_change(rope: &mut Rope, change: &Change, encoding: PositionEncoding, edits: &mut VecDeque<Edit>) {
    match change.range {
        None => {
            let old = rope.to_string();
            edits.extend(crate::workspace::sequential_hunks(&old, &change.text));
            *rope = Rope::from_str(&change.text);
        }
        Some(span) => {
            let (a, b) = encoding::span_to_offsets(rope, span, encoding);
            // A reversed range is treated as its normalised form.
            let (start, end) = if a.char <= b.char { (a, b) } else { (b, a) };
            if start.char < end.char {
                rope.remove(start.char..end.char);
            }
            if !change.text.is_empty() {
                rope.insert(start.char, &change.text);
            }
            edits.push_back(Edit { start: start.byte, end: end.byte, text: change.text.clone() });
        }
    }
}

/// The text of `rope` in one allocation of its exact size (`to_string`
/// grows a `String` by doubling: up to twice the text, copied on the way).
pub fn text_of(rope: &Rope) -> String {
    let mut text = String::with_capacity(rope.len_bytes());
    for chunk in rope.chunks() {
        text.push_str(chunk);
    }
    text
}

impl BufferSource for Documents {
    fn buffer(&self, path: &Path) -> Option<BufferText> {
        self.get_by_path(path).map(|d| BufferText { text: text_of(&d.rope), version: d.version, pin: d.pin() })
    }

    fn open_paths(&self) -> Vec<PathBuf> {
        self.read().values().filter_map(|e| e.doc.path.clone()).collect()
    }

    fn out_of_sync(&self, path: &Path) -> bool {
        self.get_by_path(path).is_some_and(|d| d.out_of_sync)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::position::LineCol;

    /// A change of `((start_line, start_column), (end_line, end_column))`.
    fn change(((sl, sc), (el, ec)): ((u32, u32), (u32, u32)), text: &str) -> Change {
        Change { range: Some(Span::new(LineCol::new(sl, sc), LineCol::new(el, ec))), text: text.to_string() }
    }

    #[test]
    fn incremental_changes_with_cjk_emoji_and_crlf() {
        let docs = Documents::new();
        docs.open("file:///a", Some("/a".into()), "python", 1, "x = '漢😀'\r\ny = 2\r\n");
        // Replace "2" (utf16 col 4 on line 1) with "3".
        docs.change("file:///a", 2, &[change(((1, 4), (1, 5)), "3")], PositionEncoding::Utf16).unwrap();
        // Insert after the emoji: x = '漢😀' -> utf16: x,space,=,space,',漢(1),😀(2) => col 8.
        docs.change("file:///a", 3, &[change(((0, 8), (0, 8)), "!")], PositionEncoding::Utf16).unwrap();
        let d = docs.get("file:///a").unwrap();
        assert_eq!(d.rope.to_string(), "x = '漢😀!'\r\ny = 3\r\n");
        assert_eq!(d.version, 3);
    }

    #[test]
    fn utf8_and_utf32_encodings_address_the_same_char() {
        for (enc, col) in [(PositionEncoding::Utf8, 7), (PositionEncoding::Utf32, 2)] {
            let docs = Documents::new();
            docs.open("u", None, "t", 1, "😀漢z");
            docs.change("u", 2, &[change(((0, col), (0, col + 1)), "Z")], enc).unwrap();
            assert_eq!(docs.get("u").unwrap().rope.to_string(), "😀漢Z");
        }
    }

    #[test]
    fn several_changes_in_one_notification_apply_in_order() {
        let docs = Documents::new();
        docs.open("u", None, "t", 1, "abc");
        docs.change(
            "u",
            2,
            &[
                change(((0, 0), (0, 1)), "X"),
                change(((0, 1), (0, 1)), "Y"),
                Change { range: None, text: "full".into() },
                change(((0, 4), (0, 4)), "!"),
            ],
            PositionEncoding::Utf16,
        )
        .unwrap();
        assert_eq!(docs.get("u").unwrap().rope.to_string(), "full!");
    }

    #[test]
    fn out_of_range_changes_clamp_instead_of_panicking() {
        let docs = Documents::new();
        docs.open("u", None, "t", 1, "ab\ncd");
        docs.change("u", 2, &[change(((9, 9), (12, 0)), "!")], PositionEncoding::Utf16).unwrap();
        docs.change("u", 3, &[change(((0, 50), (0, 1)), "-")], PositionEncoding::Utf16).unwrap();
        assert_eq!(docs.get("u").unwrap().rope.to_string(), "a-\ncd!");
    }

    #[test]
    fn history_replays_to_the_current_text() {
        let docs = Documents::new();
        docs.open("u", None, "t", 1, "one\n漢字\nthree\n");
        docs.change("u", 2, &[change(((1, 1), (1, 2)), "X")], PositionEncoding::Utf16).unwrap();
        docs.change(
            "u",
            3,
            &[Change { range: None, text: "zero\none\n漢X\nthree\nfour\n".into() }],
            PositionEncoding::Utf16,
        )
        .unwrap();
        docs.change("u", 4, &[change(((0, 0), (0, 0)), "😀"), change(((4, 4), (4, 4)), "!")], PositionEncoding::Utf16)
            .unwrap();
        let pin = |seq| BufferPin { generation: 1, seq };
        let (edits, doc) = docs.changes_since("u", pin(0)).unwrap();
        let mut text = "one\n漢字\nthree\n".to_string();
        for e in &edits {
            text.replace_range(e.start..e.end, &e.text);
        }
        assert_eq!(text, doc.rope.to_string());
        assert_eq!(doc.version, 4);
        assert_eq!(docs.changes_since("u", pin(3)).unwrap().0, vec![]);
        assert_eq!(docs.changes_since("u", pin(2)).unwrap().0.len(), 2);
        assert_eq!(docs.changes_since("u", pin(9)).unwrap_err(), DocumentError::HistoryGone(4));
        // A reopened document is another document, whatever its version.
        docs.close("u").unwrap();
        docs.open("u", None, "t", 1, "one\n");
        assert_eq!(docs.changes_since("u", pin(0)).unwrap_err(), DocumentError::Reopened("u".into()));
        assert_eq!(docs.get("u").unwrap().pin(), BufferPin { generation: 2, seq: 0 });
    }

    #[test]
    fn a_lost_change_marks_the_document_until_a_save_brings_the_text() {
        let docs = Documents::new();
        docs.open("u", None, "t", 1, "abc");
        assert_eq!(docs.mark_out_of_sync("nope", Some(2)), None);
        assert_eq!(docs.mark_out_of_sync("u", Some(2)), Some(true));
        assert_eq!(docs.mark_out_of_sync("u", None), Some(false), "told once");
        let d = docs.get("u").unwrap();
        assert!(d.out_of_sync);
        assert_eq!((d.version, d.seq), (2, 2));
        assert_eq!(
            docs.changes_since("u", BufferPin { generation: 1, seq: 0 }).unwrap_err(),
            DocumentError::HistoryGone(2)
        );
        // Later changes still apply (the version stays right), the flag stays.
        docs.change("u", 3, &[change(((0, 0), (0, 0)), "x")], PositionEncoding::Utf16).unwrap();
        assert!(docs.get("u").unwrap().out_of_sync);
        assert_eq!(docs.resync("u", "editor text"), Some(true));
        let d = docs.get("u").unwrap();
        assert_eq!((d.rope.to_string().as_str(), d.version, d.out_of_sync), ("editor text", 3, false));
        assert_ne!(d.generation, 1);
        // A save of the same text changes nothing; a reopen clears the flag too.
        let pin = d.pin();
        assert_eq!(docs.resync("u", "editor text"), Some(false));
        assert_eq!(docs.get("u").unwrap().pin(), pin);
        docs.mark_out_of_sync("u", None);
        docs.open("u", None, "t", 1, "new");
        assert!(!docs.get("u").unwrap().out_of_sync);
        assert_eq!(docs.resync("nope", "x"), None);
    }

    #[test]
    fn change_to_unknown_document_is_an_error() {
        let docs = Documents::new();
        assert_eq!(docs.change("nope", 1, &[], PositionEncoding::Utf16), Err(DocumentError::NotOpen("nope".into())));
    }

    #[test]
    fn buffers_are_found_by_path() {
        let docs = Documents::new();
        docs.open("file:///w/a.py", Some("/w/a.py".into()), "python", 7, "unsaved");
        let b = docs.buffer(Path::new("/w/a.py")).unwrap();
        assert_eq!((b.text.as_str(), b.version), ("unsaved", 7));
        assert!(docs.buffer(Path::new("/w/b.py")).is_none());
        docs.close("file:///w/a.py").unwrap();
        assert!(docs.buffer(Path::new("/w/a.py")).is_none());
    }
}
