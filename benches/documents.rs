//! The document mirror under load: one keystroke (an incremental
//! `didChange`) into a 2,000-line file while 1,000 documents are open, the
//! same keystroke with 10 documents open (side by side: the ratio shows
//! whether the store scales), and a lookup by path as tools and the
//! proposal do it.

use std::path::PathBuf;

use agentfix::documents::{Change, Documents, PositionEncoding};
use agentfix::position::{LineCol, Span};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

fn store(open: usize) -> Documents {
    let docs = Documents::new();
    let text: String = (0..2000).map(|i| format!("    let value_{i} = compute(漢字, {i}); // 😀\n")).collect();
    for n in 0..open {
        let path = PathBuf::from(format!("/w/src/file_{n}.rs"));
        docs.open(&format!("file:///w/src/file_{n}.rs"), Some(path), "rust", 1, &text);
    }
    docs
}

fn bench(c: &mut Criterion) {
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

criterion_group!(benches, bench);
criterion_main!(benches);
