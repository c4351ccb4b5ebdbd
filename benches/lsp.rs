//! The LSP side's per-request work, each row beside a baseline where one
//! can run in the same process:
//!
//! - `code_actions/<open>/<kept>/{list,diffing_kept_runs}`: the code-action
//!   list for a cursor on an error in a 2,000-line document, with 10 and
//!   1,000 documents open and 0 or 16 finished runs kept for follow-ups
//!   (each changed one line of that document). `list` is the handler's
//!   code; `diffing_kept_runs` finds the follow-up as the handler did
//!   before, diffing every kept proposal again at each request;
//! - `workspace_edit/<encoding>/{plain,annotated}`: rendering the
//!   `WorkspaceEdit` of a proposal with 100 hunks spread over a 2,000-line
//!   file (CJK and emoji on every line), without and with change
//!   annotations (labels, reasons, problems).
//!
//! Through `agentfix::lsp::bench_api`, hidden, which builds the session and
//! the proposal without a client.

use std::time::Duration;

use agentfix::documents::PositionEncoding;
use agentfix::lsp::bench_api::{CodeActions, Proposal};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

fn bench_code_actions(c: &mut Criterion) {
    let mut group = c.benchmark_group("code_actions");
    group.measurement_time(Duration::from_secs(3));
    for open in [10usize, 1000] {
        for kept in [0usize, 16] {
            let setup = CodeActions::new(open, 2000, kept);
            // The quick fix and the fix-all; a follow-up too when a kept run
            // changed the line.
            let expected = if kept > 0 { 3 } else { 2 };
            assert_eq!(setup.list(), expected);
            assert_eq!(setup.list_diffing_kept_runs(), expected);
            let id = |what: &str| BenchmarkId::new(format!("{open}/{kept}"), what);
            group.bench_function(id("list"), |b| b.iter(|| setup.list()));
            group.bench_function(id("diffing_kept_runs"), |b| b.iter(|| setup.list_diffing_kept_runs()));
        }
    }
    group.finish();
}

fn bench_workspace_edit(c: &mut Criterion) {
    let proposal = Proposal::new(2000, 100);
    assert_eq!(proposal.hunks(), 100);
    let mut group = c.benchmark_group("workspace_edit");
    group.measurement_time(Duration::from_secs(3));
    for (name, encoding) in
        [("utf8", PositionEncoding::Utf8), ("utf16", PositionEncoding::Utf16), ("utf32", PositionEncoding::Utf32)]
    {
        for annotations in [false, true] {
            let what = if annotations { "annotated" } else { "plain" };
            assert_eq!(proposal.render(encoding, annotations), 100);
            group.bench_function(BenchmarkId::new(name, what), |b| b.iter(|| proposal.render(encoding, annotations)));
        }
    }
    group.finish();
}

criterion_group!(benches, bench_code_actions, bench_workspace_edit);
criterion_main!(benches);
