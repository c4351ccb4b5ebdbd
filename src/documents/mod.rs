//! The editor's open buffers: one rope, version and language per document,
//! keyed by URI and also reachable by file path.
//!
//! The store is written only by the LSP layer, strictly in wire order (see
//! `lsp::ordered`); readers take cheap snapshots (cloning a rope is O(1)), so
//! no lock is ever held across an `.await`.

pub mod encoding;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::RwLock;

use ropey::Rope;

pub use encoding::PositionEncoding;

use crate::workspace::{BufferSource, BufferText};

/// One open buffer, as the editor last described it.
#[derive(Debug, Clone)]
pub struct Document {
    pub uri: String,
    /// The file path when the URI is a `file:` URI.
    pub path: Option<PathBuf>,
    pub language_id: String,
    pub version: i32,
    pub rope: Rope,
}

/// One content change of a `didChange`: a replaced range, or the whole text.
#[derive(Debug, Clone)]
pub struct Change {
    /// `((start_line, start_char), (end_line, end_char))` in the negotiated
    /// encoding; `None` replaces the whole document.
    pub range: Option<((u32, u32), (u32, u32))>,
    pub text: String,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DocumentError {
    #[error("document {0} is not open")]
    NotOpen(String),
}

/// The set of open documents.
#[derive(Debug, Default)]
pub struct Documents {
    docs: RwLock<HashMap<String, Document>>,
}

impl Documents {
    pub fn new() -> Self {
        Self::default()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Document>> {
        // A poisoned lock only means another thread panicked mid-update of a
        // map of plain values; the data is still usable.
        self.docs.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, Document>> {
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
        };
        self.write().insert(uri.to_string(), doc);
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
        let doc = docs.get_mut(uri).ok_or_else(|| DocumentError::NotOpen(uri.to_string()))?;
        if version <= doc.version {
            tracing::warn!(uri, old = doc.version, new = version, "document version did not increase");
        }
        for change in changes {
            apply_change(&mut doc.rope, change, encoding);
        }
        doc.version = version;
        Ok(())
    }

    /// `didClose`.
    pub fn close(&self, uri: &str) -> Result<(), DocumentError> {
        self.write().remove(uri).map(|_| ()).ok_or_else(|| DocumentError::NotOpen(uri.to_string()))
    }

    /// A snapshot of one document by URI.
    pub fn get(&self, uri: &str) -> Option<Document> {
        self.read().get(uri).cloned()
    }

    /// A snapshot of the document open at `path`, if any.
    pub fn get_by_path(&self, path: &Path) -> Option<Document> {
        self.read().values().find(|d| d.path.as_deref() == Some(path)).cloned()
    }

    pub fn len(&self) -> usize {
        self.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Applies one change to `rope`, clamping out-of-range positions.
fn apply_change(rope: &mut Rope, change: &Change, encoding: PositionEncoding) {
    match change.range {
        None => *rope = Rope::from_str(&change.text),
        Some(((sl, sc), (el, ec))) => {
            let start = encoding::position_to_char(rope, sl, sc, encoding);
            let end = encoding::position_to_char(rope, el, ec, encoding);
            // A reversed range is treated as its normalised form.
            let (start, end) = (start.min(end), start.max(end));
            rope.remove(start..end);
            rope.insert(start, &change.text);
        }
    }
}

impl BufferSource for Documents {
    fn buffer(&self, path: &Path) -> Option<BufferText> {
        self.get_by_path(path).map(|d| BufferText { text: d.rope.to_string(), version: d.version })
    }

    fn open_paths(&self) -> Vec<PathBuf> {
        self.read().values().filter_map(|d| d.path.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(range: ((u32, u32), (u32, u32)), text: &str) -> Change {
        Change { range: Some(range), text: text.to_string() }
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
