//! The document mirror under load, each new row beside a baseline measured
//! in the same run:
//!
//! - `documents/*`: one keystroke (an incremental `didChange`) into a
//!   2,000-line file while 1,000 documents are open, the same keystroke with
//!   10 open (the ratio shows whether the store scales), and a lookup by path
//!   as tools and the proposal do it;
//! - `sync/<encoding>/{store,before}`: 10,000 single-keystroke `didChange`s
//!   (typing runs of 50 at 200 places) into a 20,000-line document of ASCII,
//!   CJK and emoji lines, through `Documents::change` as the server applies
//!   them, and through the store as it was before the one-walk conversion
//!   (kept below in `before`: two lock-and-hash steps, the history keyed by
//!   a fresh `String`, ten rope descents and a char iterator per position);
//! - `position/<line>/<encoding>/...`: one conversion alone on an ASCII, a
//!   CJK and an emoji line of that document, LSP position to offset
//!   (`to_offset`, char and byte, against `before`'s char-by-char walk from
//!   the line start and its `char_to_byte`) and back (`to_position`, against
//!   `before`'s five rope descents).

use std::path::PathBuf;
use std::time::Duration;

use agentfix::documents::encoding::{byte_to_position, position_to_offset};
use agentfix::documents::{Change, Documents, PositionEncoding};
use agentfix::position::{LineCol, Span};
use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use ropey::Rope;

/// The conversions and the store's `didChange` as they were before, kept
/// here as the baseline (the code of `src/documents` at 72b6dba).
mod before {
    use std::collections::{HashMap, VecDeque};
    use std::sync::{Mutex, RwLock};

    use agentfix::documents::{Change, PositionEncoding};
    use agentfix::position::Span;
    use agentfix::workspace::Edit;
    use ropey::Rope;

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

    pub fn byte_to_position(rope: &Rope, byte: usize, encoding: PositionEncoding) -> (u32, u32) {
        let byte = byte.min(rope.len_bytes());
        char_to_position(rope, rope.byte_to_char(byte), encoding)
    }

    fn apply_change(rope: &mut Rope, change: &Change, encoding: PositionEncoding) -> Vec<Edit> {
        let Span { start, end } = change.range.expect("keystrokes only");
        let start = position_to_char(rope, start.line, start.column, encoding);
        let end = position_to_char(rope, end.line, end.column, encoding);
        let (start, end) = (start.min(end), start.max(end));
        let edit = Edit { start: rope.char_to_byte(start), end: rope.char_to_byte(end), text: change.text.clone() };
        rope.remove(start..end);
        rope.insert(start, &change.text);
        vec![edit]
    }

    struct Document {
        version: i32,
        rope: Rope,
        seq: u64,
    }

    /// (seq before, version after, edits) of each change.
    type Steps = VecDeque<(u64, i32, Vec<Edit>)>;

    /// The store's `didChange` path as it was.
    #[derive(Default)]
    pub struct Store {
        docs: RwLock<HashMap<String, Document>>,
        history: Mutex<HashMap<String, Steps>>,
    }

    impl Store {
        pub fn open(&self, uri: &str, text: &str) {
            let doc = Document { version: 1, rope: Rope::from_str(text), seq: 0 };
            self.docs.write().unwrap().insert(uri.to_string(), doc);
        }

        pub fn change(&self, uri: &str, version: i32, changes: &[Change], encoding: PositionEncoding) {
            let mut docs = self.docs.write().unwrap();
            let doc = docs.get_mut(uri).expect("open");
            let mut edits = Vec::new();
            for change in changes {
                edits.extend(apply_change(&mut doc.rope, change, encoding));
            }
            let mut history = self.history.lock().unwrap();
            let h = history.entry(uri.to_string()).or_default();
            h.push_back((doc.seq, version, edits));
            if h.len() > 5000 {
                h.pop_front();
            }
            doc.version = version;
            doc.seq += 1;
        }

        pub fn text_len(&self, uri: &str) -> usize {
            self.docs.read().unwrap()[uri].rope.len_bytes()
        }
    }
}

const ENCODINGS: [(&str, PositionEncoding); 3] =
    [("utf8", PositionEncoding::Utf8), ("utf16", PositionEncoding::Utf16), ("utf32", PositionEncoding::Utf32)];

/// Line `i` of the big document: ASCII, CJK or emoji by `i % 3`.
fn big_line(i: usize) -> String {
    match i % 3 {
        0 => format!("    let value_{i} = compute(alpha, beta, {i}); // plain ascii comment here\n"),
        1 => format!("    let 名前_{i} = 計算(\"漢字かな交じり文\", {i}); // 日本語のコメント\n"),
        _ => format!("    let emoji_{i} = \"😀🎉🚀\"; log(\"✨ {i} 👍\"); // 🙂 done\n"),
    }
}

fn units(s: &str, encoding: PositionEncoding) -> u32 {
    let n: usize = match encoding {
        PositionEncoding::Utf8 => s.len(),
        PositionEncoding::Utf16 => s.encode_utf16().count(),
        PositionEncoding::Utf32 => s.chars().count(),
    };
    n as u32
}

/// The column, in `encoding`, of char `chars` of `line`.
fn column(line: &str, chars: usize, encoding: PositionEncoding) -> u32 {
    let prefix: String = line.chars().take(chars).collect();
    units(&prefix, encoding)
}

const BIG_LINES: usize = 20_000;
const KEYSTROKES: usize = 10_000;
const RUN: usize = 50;

/// The 10,000 keystrokes: a run of 50 `x` typed at each of 200 places spread
/// over the document, past the CJK or emoji of its line.
fn keystrokes(encoding: PositionEncoding) -> Vec<Change> {
    (0..KEYSTROKES / RUN)
        .flat_map(|place| {
            let line = (place * 7919) % BIG_LINES;
            let start = column(&big_line(line), 40, encoding);
            (0..RUN as u32).map(move |k| {
                let at = LineCol::new(line as u32, start + k);
                Change { range: Some(Span::new(at, at)), text: "x".into() }
            })
        })
        .collect()
}

fn store(open: usize) -> Documents {
    let docs = Documents::new();
    let text: String = (0..2000).map(|i| format!("    let value_{i} = compute(漢字, {i}); // 😀\n")).collect();
    for n in 0..open {
        let path = PathBuf::from(format!("/w/src/file_{n}.rs"));
        docs.open(&format!("file:///w/src/file_{n}.rs"), Some(path), "rust", 1, &text);
    }
    docs
}

fn bench_store(c: &mut Criterion) {
    let mut group = c.benchmark_group("documents");
    for open in [10usize, 1000] {
        let docs = store(open);
        let uri = "file:///w/src/file_5.rs";
        let mut version = 1;
        group.bench_with_input(BenchmarkId::new("keystroke", open), &open, |b, _| {
            b.iter(|| {
                version += 1;
                let at = LineCol::new(1000, 10);
                let change = Change { range: Some(Span::new(at, at)), text: "x".into() };
                docs.change(uri, version, std::slice::from_ref(&change), PositionEncoding::Utf16).unwrap();
            })
        });
        let path = PathBuf::from(format!("/w/src/file_{}.rs", open - 1));
        group.bench_with_input(BenchmarkId::new("lookup_by_path", open), &open, |b, _| {
            b.iter(|| std::hint::black_box(docs.get_by_path(&path).is_some()))
        });
    }
    group.finish();
}

fn bench_sync(c: &mut Criterion) {
    let text: String = (0..BIG_LINES).map(big_line).collect();
    let uri = "file:///w/src/big.rs";
    let mut group = c.benchmark_group("sync");
    group.sample_size(10).measurement_time(Duration::from_secs(8));
    for (name, encoding) in ENCODINGS {
        let changes = keystrokes(encoding);
        group.bench_function(BenchmarkId::new(name, "store"), |b| {
            b.iter_batched(
                || {
                    let docs = Documents::new();
                    docs.open(uri, Some(PathBuf::from("/w/src/big.rs")), "rust", 1, &text);
                    docs
                },
                |docs| {
                    for (n, change) in changes.iter().enumerate() {
                        docs.change(uri, n as i32 + 2, std::slice::from_ref(change), encoding).unwrap();
                    }
                    docs
                },
                BatchSize::PerIteration,
            )
        });
        group.bench_function(BenchmarkId::new(name, "before"), |b| {
            b.iter_batched(
                || {
                    let store = before::Store::default();
                    store.open(uri, &text);
                    store
                },
                |store| {
                    for (n, change) in changes.iter().enumerate() {
                        store.change(uri, n as i32 + 2, std::slice::from_ref(change), encoding);
                    }
                    store
                },
                BatchSize::PerIteration,
            )
        });
        // Both typed the same text.
        let (docs, store) = (Documents::new(), before::Store::default());
        docs.open(uri, None, "rust", 1, &text);
        store.open(uri, &text);
        for (n, change) in changes.iter().enumerate() {
            docs.change(uri, n as i32 + 2, std::slice::from_ref(change), encoding).unwrap();
            store.change(uri, n as i32 + 2, std::slice::from_ref(change), encoding);
        }
        assert_eq!(docs.get(uri).unwrap().rope.len_bytes(), store.text_len(uri));
        assert_eq!(docs.get(uri).unwrap().rope.len_bytes(), text.len() + KEYSTROKES);
    }
    group.finish();
}

fn bench_positions(c: &mut Criterion) {
    let text: String = (0..BIG_LINES).map(big_line).collect();
    let rope = Rope::from_str(&text);
    let mut group = c.benchmark_group("position");
    group.measurement_time(Duration::from_secs(2)).warm_up_time(Duration::from_millis(500));
    for (kind, line) in [("ascii", 12_000u32), ("cjk", 12_001), ("emoji", 12_002)] {
        let content = big_line(line as usize);
        // Near the end of the line: the scan crosses all its CJK or emoji.
        let chars = content.chars().count() - 4;
        for (name, encoding) in ENCODINGS {
            let col = column(&content, chars, encoding);
            let offset = position_to_offset(&rope, line, col, encoding);
            assert_eq!(offset.char, before::position_to_char(&rope, line, col, encoding));
            assert_eq!(offset.byte, rope.char_to_byte(offset.char));
            assert_eq!(byte_to_position(&rope, offset.byte, encoding), (line, col));
            assert_eq!(before::byte_to_position(&rope, offset.byte, encoding), (line, col));
            let id = |what: &str| BenchmarkId::new(format!("{kind}/{name}"), what);
            group.bench_function(id("to_offset"), |b| {
                b.iter(|| position_to_offset(&rope, std::hint::black_box(line), std::hint::black_box(col), encoding))
            });
            group.bench_function(id("to_offset_before"), |b| {
                b.iter(|| {
                    let c = before::position_to_char(
                        &rope,
                        std::hint::black_box(line),
                        std::hint::black_box(col),
                        encoding,
                    );
                    (c, rope.char_to_byte(c))
                })
            });
            group.bench_function(id("to_position"), |b| {
                b.iter(|| byte_to_position(&rope, std::hint::black_box(offset.byte), encoding))
            });
            group.bench_function(id("to_position_before"), |b| {
                b.iter(|| before::byte_to_position(&rope, std::hint::black_box(offset.byte), encoding))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench_store, bench_sync, bench_positions);
criterion_main!(benches);
