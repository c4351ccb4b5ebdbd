//! What `benches/lsp.rs` measures, reached without a client: the code-action
//! list as the `textDocument/codeAction` handler builds it, and a proposal's
//! `WorkspaceEdit` as `lsp::run` renders it. Hidden; not an API (it changes
//! with the benches).
#![doc(hidden)]

use std::path::PathBuf;
use std::sync::Arc;

use tower_lsp_server::ls_types::{
    CodeActionContext, CodeActionParams, Diagnostic, DiagnosticSeverity, PartialResultParams, Position, Range,
    TextDocumentIdentifier, Uri, WorkDoneProgressParams,
};

use super::convert::{EditSupport, FileEdit, workspace_edit};
use super::server::code_actions;
use super::session::{KeptRun, Session};
use crate::documents::PositionEncoding;
use crate::follow_up::{PastRun, ProposedFile};
use crate::workspace::{EditReason, FileChange};

/// A line of source with CJK and an emoji, numbered.
fn line(i: usize) -> String {
    format!("    let value_{i} = compute(\"漢字\", {i}); // 😀 note {i}\n")
}

/// A session with documents open, finished runs kept, and one code action
/// request.
pub struct CodeActions {
    session: Session,
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
    pub fn new(open: usize, lines: usize, kept: usize) -> Self {
        let session = Session::new();
        let path = |n: usize| PathBuf::from(format!("/w/src/file_{n}.rs"));
        let text: String = (0..lines).map(line).collect();
        let small: String = (0..100).map(line).collect();
        for n in 0..open {
            let uri = format!("file:///w/src/file_{n}.rs");
            session.docs.open(&uri, Some(path(n)), "rust", 1, if n == 0 { &text } else { &small });
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
                }),
            };
            session.kept.keep(run.clone());
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
        CodeActions { session, params, kept: runs }
    }

    /// The actions, as the handler builds them; how many.
    pub fn list(&self) -> usize {
        code_actions(&self.session, &self.params, |path, lines| self.session.kept.newest_touching(path, lines)).len()
    }

    /// The same list, with the follow-up found as it was before the kept
    /// runs' lines were kept with them: every kept proposal diffed again at
    /// each request (the baseline).
    pub fn list_diffing_kept_runs(&self) -> usize {
        let kept = |path: &std::path::Path, lines| self.kept.iter().rev().find(|r| r.touched(path, lines)).cloned();
        code_actions(&self.session, &self.params, kept).len()
    }
}

/// A proposal for one file, ready to render.
pub struct Proposal {
    file: FileEdit,
}

impl Proposal {
    /// A file of `lines` lines (CJK and emoji on each) in which the run
    /// changed `hunks` lines spread evenly (one hunk each), with a reason
    /// per edit and a problem at every tenth.
    pub fn new(lines: usize, hunks: usize) -> Self {
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
    pub fn hunks(&self) -> usize {
        self.file.hunks.len()
    }

    /// Renders the `WorkspaceEdit` (versioned document changes, with change
    /// annotations when `annotations`); how many hunks it carries.
    pub fn render(&self, encoding: PositionEncoding, annotations: bool) -> usize {
        let support = EditSupport { document_changes: true, create_files: true, annotations };
        let (edit, count, _) = workspace_edit(std::slice::from_ref(&self.file), encoding, support);
        std::hint::black_box(edit);
        count
    }
}
