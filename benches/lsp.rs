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
//! Through the library's public `lsp::code_actions` (with `documents::Documents`
//! and `lsp::KeptRuns`, what the handler reads from its session) and
//! `lsp::workspace_edit`: the same functions the server calls, no client.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agentfix::documents::{Documents, PositionEncoding};
use agentfix::follow_up::{PastRun, ProposedFile};
use agentfix::lsp::{EditSupport, FileEdit, KeptRun, KeptRuns, code_actions, workspace_edit};
use agentfix::workspace::{EditReason, FileChange};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use tower_lsp_server::ls_types::{
    CodeActionContext, CodeActionParams, Diagnostic, DiagnosticSeverity, PartialResultParams, Position, Range,
    TextDocumentIdentifier, Uri, WorkDoneProgressParams,
};

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

/// A line of source with CJK and an emoji, numbered.
fn line(i: usize) -> String {
    format!("    let value_{i} = compute(\"漢字\", {i}); // 😀 note {i}\n")
}

/// Documents open, finished runs kept, and one code action request: what
/// the handler reads from its session.
struct CodeActions {
    docs: Documents,
    kept_runs: KeptRuns,
    params: CodeActionParams,
    /// The kept runs, for the baseline.
    kept: Vec<KeptRun>,
}

impl CodeActions {
    /// `open` documents open (the first has `lines` lines, the others 100),
    /// `kept` finished runs that each changed one line of the first (the
    /// first run the line of the request), and a request for the actions at
    /// a cursor on an error on that line, with a warning elsewhere in the
    /// context (so a fix-all is offered too).
    fn new(open: usize, lines: usize, kept: usize) -> Self {
        let docs = Documents::new();
        let kept_runs = KeptRuns::default();
        let path = |n: usize| PathBuf::from(format!("/w/src/file_{n}.rs"));
        let text: String = (0..lines).map(line).collect();
        let small: String = (0..100).map(line).collect();
        for n in 0..open {
            let uri = format!("file:///w/src/file_{n}.rs");
            docs.open(&uri, Some(path(n)), "rust", 1, if n == 0 { &text } else { &small });
        }
        let target = lines / 2;
        let mut runs = Vec::new();
        for k in 0..kept {
            let changed = (target + 7 * k) % lines.max(1);
            let proposed: String =
                (0..lines).map(|i| if i == changed { format!("    fixed_{i}();\n") } else { line(i) }).collect();
            let run = KeptRun {
                id: format!("run-{k}"),
                past: Arc::new(PastRun {
                    messages: Vec::new(),
                    proposed: vec![ProposedFile {
                        path: path(0),
                        display: "src/file_0.rs".into(),
                        original: Some(text.clone()),
                        proposed,
                    }],
                    ..PastRun::default()
                }),
                alternatives: Arc::new([]),
            };
            kept_runs.keep(run.clone());
            runs.push(run);
        }
        let at = |line: u32, character: u32| Position { line, character };
        let diagnostic = |line: u32, severity, message: &str| Diagnostic {
            range: Range { start: at(line, 8), end: at(line, 20) },
            severity: Some(severity),
            message: message.into(),
            source: Some("rustc".into()),
            ..Default::default()
        };
        let uri: Uri = "file:///w/src/file_0.rs".parse().expect("a file URI");
        let params = CodeActionParams {
            text_document: TextDocumentIdentifier { uri },
            range: Range { start: at(target as u32, 10), end: at(target as u32, 10) },
            context: CodeActionContext {
                diagnostics: vec![
                    diagnostic(target as u32, DiagnosticSeverity::ERROR, "mismatched types: expected `u32`"),
                    diagnostic(3, DiagnosticSeverity::WARNING, "unused variable: `value_3`"),
                ],
                only: None,
                trigger_kind: None,
            },
            work_done_progress_params: WorkDoneProgressParams::default(),
            partial_result_params: PartialResultParams::default(),
        };
        CodeActions { docs, kept_runs, params, kept: runs }
    }

    /// The actions, as the handler builds them; how many.
    fn list(&self) -> usize {
        code_actions(&self.docs, false, &self.params, |path, lines| self.kept_runs.newest_touching(path, lines)).len()
    }

    /// The same list, with the follow-up found as it was before the kept
    /// runs' lines were kept with them: every kept proposal diffed again at
    /// each request (the baseline).
    fn list_diffing_kept_runs(&self) -> usize {
        let kept = |path: &std::path::Path, lines| self.kept.iter().rev().find(|r| r.touched(path, lines)).cloned();
        code_actions(&self.docs, false, &self.params, kept).len()
    }
}

/// A proposal for one file, ready to render.
struct Proposal {
    file: FileEdit,
}

impl Proposal {
    /// A file of `lines` lines (CJK and emoji on each) in which the run
    /// changed `hunks` lines spread evenly (one hunk each), with a reason
    /// per edit and a problem at every tenth.
    fn new(lines: usize, hunks: usize) -> Self {
        let every = (lines / hunks.max(1)).max(1);
        let original: String = (0..lines).map(line).collect();
        let changed = |i: usize| i % every == every / 2 && i / every < hunks;
        let new_text: String = (0..lines)
            .map(|i| if changed(i) { format!("    let value_{i} = 😀漢({i});\n") } else { line(i) })
            .collect();
        let reasons = (0..lines)
            .filter(|i| changed(*i))
            .map(|i| EditReason {
                reason: format!("call 漢 for {i}"), inserted: format!("let value_{i} = 😀漢({i});")
            })
            .collect();
        let change = FileChange {
            path: "/w/src/big.rs".into(),
            display: "src/big.rs".into(),
            version: Some(7),
            pin: None,
            original: Some(original),
            new_text,
            reasons,
        };
        let mut file = FileEdit::from_change(&change);
        file.problems = (0..lines)
            .filter(|i| changed(*i) && (i / every).is_multiple_of(10))
            .map(|i| (i as u32, format!("mismatched types on line {}", i + 1)))
            .collect();
        Proposal { file }
    }

    /// How many hunks the proposal has.
    fn hunks(&self) -> usize {
        self.file.hunks.len()
    }

    /// Renders the `WorkspaceEdit` (versioned document changes, with change
    /// annotations when `annotations`); how many hunks it carries.
    fn render(&self, encoding: PositionEncoding, annotations: bool) -> usize {
        let support = EditSupport { document_changes: true, create_files: true, annotations };
        let (edit, count, _) = workspace_edit(std::slice::from_ref(&self.file), encoding, support);
        std::hint::black_box(edit);
        count
    }
}

criterion_group!(benches, bench_code_actions, bench_workspace_edit);
criterion_main!(benches);
