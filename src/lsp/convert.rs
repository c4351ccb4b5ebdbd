//! Conversions between LSP types and ours, in one place: position encoding
//! negotiation, URIs and paths, diagnostics, and proposed file changes into
//! a `WorkspaceEdit`.

use std::collections::HashMap;
use std::path::PathBuf;

use ropey::Rope;
use tower_lsp_server::ls_types::{
    AnnotatedTextEdit, ChangeAnnotation, ClientCapabilities, CreateFile, CreateFileOptions, Diagnostic,
    DiagnosticSeverity, DocumentChangeOperation, DocumentChanges, NumberOrString, OneOf,
    OptionalVersionedTextDocumentIdentifier, Position, PositionEncodingKind, Range, ResourceOp, ResourceOperationKind,
    TextDocumentContentChangeEvent, TextDocumentEdit, TextEdit, Uri, WorkspaceEdit,
};

use crate::diagnostic::{Related, Severity};
use crate::documents::{Change, PositionEncoding, encoding};
use crate::position::{LineCol, LineRange, Span};
use crate::workspace::{Edit, EditReason, FileChange, hunks, runs_code};

/// Picks the position encoding from what the client offers: UTF-8, then
/// UTF-32 (both cheaper to convert), else the mandatory UTF-16.
pub fn negotiate_encoding(caps: &ClientCapabilities) -> PositionEncoding {
    let offered = caps.general.as_ref().and_then(|g| g.position_encodings.as_ref());
    let offers = |k: &PositionEncodingKind| offered.is_some_and(|o| o.contains(k));
    if offers(&PositionEncodingKind::UTF8) {
        PositionEncoding::Utf8
    } else if offers(&PositionEncodingKind::UTF32) {
        PositionEncoding::Utf32
    } else {
        PositionEncoding::Utf16
    }
}

pub fn encoding_kind(e: PositionEncoding) -> PositionEncodingKind {
    match e {
        PositionEncoding::Utf8 => PositionEncodingKind::UTF8,
        PositionEncoding::Utf16 => PositionEncodingKind::UTF16,
        PositionEncoding::Utf32 => PositionEncodingKind::UTF32,
    }
}

/// The local file a `file:` URI names. Anything else is `None`: other
/// schemes (`untitled:`, `git:`), a host (`file://server/x`, a network share
/// we cannot confine), a relative path, and a `%00` that would cut the path
/// short in a system call.
pub fn uri_to_path(uri: &Uri) -> Option<PathBuf> {
    if !uri.scheme().as_str().eq_ignore_ascii_case("file") {
        return None;
    }
    if let Some(a) = uri.authority()
        && !(a.host().is_empty() || a.host().eq_ignore_ascii_case("localhost"))
    {
        return None;
    }
    let path = uri.to_file_path()?.into_owned();
    let ok = path.is_absolute() && !path.as_os_str().as_encoded_bytes().contains(&0);
    ok.then(|| crate::workspace::normalize(&path))
}

pub fn change_from_proto(c: TextDocumentContentChangeEvent) -> Change {
    Change { range: c.range.map(|r| span(&r)), text: c.text }
}

/// Ours of an LSP range (same encoding).
pub fn span(r: &Range) -> Span {
    Span::new(LineCol::new(r.start.line, r.start.character), LineCol::new(r.end.line, r.end.character))
}

/// Whether two ranges share at least one position (ends inclusive, so a
/// cursor at either end of a diagnostic counts).
pub fn overlaps(a: &Range, b: &Range) -> bool {
    let le = |p: &Position, q: &Position| (p.line, p.character) <= (q.line, q.character);
    le(&a.start, &b.end) && le(&b.start, &a.end)
}

/// The lines of a range; an end at column 0 of a later line does not
/// include that line.
pub fn range_lines(r: &Range) -> LineRange {
    let start = r.start.line;
    let mut end = r.end.line;
    if r.end.character == 0 && r.end.line > r.start.line {
        end -= 1;
    }
    LineRange::new(start, end.max(start))
}

/// One of the editor's diagnostics, whole: its range, code and the code's
/// link, and its related places (a `file:` URI's path and line; others are
/// left out). `text` is the document's text, when the editor has it open:
/// the range's columns, in `encoding`, become characters of its lines (as
/// the model counts them); without it they are kept as they came.
pub fn diagnostic_from_proto(
    d: &Diagnostic,
    text: Option<&Rope>,
    encoding: PositionEncoding,
) -> crate::diagnostic::Diagnostic {
    let place = |p: &Position| match text {
        Some(rope) => {
            let at = encoding::position_to_char(rope, p.line, p.character, encoding);
            let (line, column) = encoding::char_to_position(rope, at, PositionEncoding::Utf32);
            LineCol::new(line, column)
        }
        None => LineCol::new(p.line, p.character),
    };
    crate::diagnostic::Diagnostic {
        at: place(&d.range.start),
        end: Some(place(&d.range.end)),
        severity: d.severity.map(|s| match s {
            DiagnosticSeverity::ERROR => Severity::Error,
            DiagnosticSeverity::WARNING => Severity::Warning,
            DiagnosticSeverity::INFORMATION => Severity::Information,
            _ => Severity::Hint,
        }),
        source: d.source.clone(),
        code: d.code.as_ref().map(|c| match c {
            NumberOrString::Number(n) => n.to_string(),
            NumberOrString::String(s) => s.clone(),
        }),
        code_link: d.code_description.as_ref().map(|c| c.href.as_str().to_string()),
        message: d.message.clone(),
        related: d
            .related_information
            .iter()
            .flatten()
            .filter_map(|r| {
                let path = uri_to_path(&r.location.uri)?;
                Some(Related { path, line: r.location.range.start.line, message: r.message.clone() })
            })
            .collect(),
        notes: Vec::new(),
    }
}

/// What the client can take in a `WorkspaceEdit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EditSupport {
    pub document_changes: bool,
    pub create_files: bool,
    /// `changeAnnotationSupport`: every hunk gets an annotation that needs
    /// confirmation (VS Code then opens its Refactor Preview).
    pub annotations: bool,
}

impl EditSupport {
    pub fn of(caps: &ClientCapabilities) -> Self {
        let we = caps.workspace.as_ref().and_then(|w| w.workspace_edit.as_ref());
        let document_changes = we.and_then(|w| w.document_changes).unwrap_or(false);
        let create_files = document_changes
            && we
                .and_then(|w| w.resource_operations.as_ref())
                .is_some_and(|ops| ops.contains(&ResourceOperationKind::Create));
        let annotations = document_changes && we.and_then(|w| w.change_annotation_support.as_ref()).is_some();
        Self { document_changes, create_files, annotations }
    }
}

/// The edit of one file, ready to send: hunks on `text`, the text of the
/// document at `version` (after any rebase).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEdit {
    pub path: PathBuf,
    pub display: String,
    /// `None` for a file not open in the editor (or a new file).
    pub version: Option<i32>,
    /// The text the hunks apply to (empty for a new file).
    pub text: String,
    pub hunks: Vec<Edit>,
    /// A new file: `CreateFile`, then the hunk inserts its text.
    pub create: bool,
    pub reasons: Vec<EditReason>,
    /// The problems the run was asked to fix in this file (0-based line,
    /// message): a hunk on or next to one is annotated with it, and the
    /// hunks of one problem share one annotation (accepted together).
    pub problems: Vec<(u32, String)>,
}

impl FileEdit {
    /// The edit of a change that needs no rebase.
    pub fn from_change(c: &FileChange) -> Self {
        let text = c.original.clone().unwrap_or_default();
        FileEdit {
            path: c.path.clone(),
            display: c.display.clone(),
            version: c.version,
            hunks: hunks(&text, &c.new_text),
            text,
            create: c.original.is_none(),
            reasons: c.reasons.clone(),
            problems: Vec::new(),
        }
    }

    /// The 1-based first and last line of `h` in `text`, whose newlines
    /// are `newlines`.
    fn hunk_lines(&self, h: &Edit, newlines: &Newlines) -> (usize, usize) {
        // Bytes, not a str slice: a hunk edge may sit inside a multi-byte
        // character (the end of a last line without a newline, minus one).
        (newlines.line_of(h.start), newlines.line_of(h.end.saturating_sub(1).max(h.start)))
    }

    /// The index in `problems` of the problem `h` addresses: the nearest
    /// one on its lines or within one line of them.
    fn problem_of(&self, h: &Edit, newlines: &Newlines) -> Option<usize> {
        let (first, last) = self.hunk_lines(h, newlines);
        let (first, last) = (first as i64 - 1, last as i64 - 1);
        self.problems
            .iter()
            .enumerate()
            .map(|(i, (line, _))| (i, (i64::from(*line) - first.max(i64::from(*line)).min(last)).abs()))
            .filter(|(_, distance)| *distance <= 1)
            .min_by_key(|(_, distance)| *distance)
            .map(|(i, _)| i)
    }
}

/// Where the `\n`s of a text are, so that the line of each hunk is a
/// binary search rather than a count from the start of the text.
struct Newlines(Vec<usize>);

impl Newlines {
    fn of(text: &str) -> Self {
        Newlines(text.bytes().enumerate().filter(|(_, b)| *b == b'\n').map(|(i, _)| i).collect())
    }

    /// The 1-based line of the byte at `byte` (`\n`s before it, plus one).
    fn line_of(&self, byte: usize) -> usize {
        self.0.partition_point(|&p| p < byte) + 1
    }
}

/// The model's reason for a hunk: the reason of the edit whose inserted
/// text the hunk carries, else every reason given for the file.
fn reason_for(hunk: &Edit, reasons: &[EditReason]) -> Option<String> {
    let matching: Vec<&str> = reasons
        .iter()
        .filter(|r| {
            let first = r.inserted.lines().map(str::trim).find(|l| !l.is_empty());
            first.is_some_and(|l| hunk.text.contains(l))
        })
        .map(|r| r.reason.as_str())
        .collect();
    let chosen: Vec<&str> =
        if matching.is_empty() { reasons.iter().map(|r| r.reason.as_str()).collect() } else { matching };
    let mut unique: Vec<&str> = Vec::new();
    for r in chosen {
        if !unique.contains(&r) {
            unique.push(r);
        }
    }
    (!unique.is_empty()).then(|| unique.join("; "))
}

/// `calc.py: lines 3-4`, `calc.py: after line 7`, `calc.py: new file`.
fn hunk_label(file: &FileEdit, h: &Edit, newlines: &Newlines) -> String {
    if file.create {
        return format!("{}: new file", file.display);
    }
    let (first, last) = file.hunk_lines(h, newlines);
    if h.start == h.end {
        return format!("{}: insert before line {first}", file.display);
    }
    if first == last {
        format!("{}: line {first}", file.display)
    } else {
        format!("{}: lines {first}-{last}", file.display)
    }
}

/// The change annotation id of hunk `hi` of the `fi`th file of an edit:
/// the hunks of one problem share `agentfix-{fi}-problem-{pi}`, any other
/// hunk is `agentfix-{fi}-{hi}` (a new file's `CreateFile` shares its
/// hunk's, `agentfix-{fi}-0`). What `agentfix.reviewed` reports by.
fn annotation_id(fi: usize, hi: usize, problem: Option<usize>) -> String {
    match problem {
        Some(pi) => format!("agentfix-{fi}-problem-{pi}"),
        None => format!("agentfix-{fi}-{hi}"),
    }
}

/// The annotation id of each hunk of each of `files`, as
/// [`workspace_edit`] gives them (whether or not the client takes
/// annotations): what a review reports per hunk is matched by them.
pub fn annotation_ids(files: &[FileEdit]) -> Vec<Vec<String>> {
    files
        .iter()
        .enumerate()
        .map(|(fi, file)| {
            let newlines = Newlines::of(&file.text);
            file.hunks.iter().enumerate().map(|(hi, h)| annotation_id(fi, hi, file.problem_of(h, &newlines))).collect()
        })
        .collect()
}

/// Builds the `WorkspaceEdit` for `files`. Returns it, the number of hunks
/// in it, and the display paths of files the client cannot take (new files
/// without `create` support).
pub fn workspace_edit(
    files: &[FileEdit],
    encoding: PositionEncoding,
    support: EditSupport,
) -> (WorkspaceEdit, usize, Vec<String>) {
    let mut skipped = Vec::new();
    let mut ops: Vec<DocumentChangeOperation> = Vec::new();
    let mut plain: HashMap<Uri, Vec<TextEdit>> = HashMap::new();
    let mut annotations: HashMap<String, ChangeAnnotation> = HashMap::new();
    let mut count = 0;
    for (fi, file) in files.iter().enumerate() {
        let Some(uri) = Uri::from_file_path(&file.path) else {
            skipped.push(file.display.clone());
            continue;
        };
        if file.create && !support.create_files {
            skipped.push(file.display.clone());
            continue;
        }
        let rope = Rope::from_str(&file.text);
        let pos = |byte: usize| {
            let (line, character) = encoding::byte_to_position(&rope, byte, encoding);
            Position { line, character }
        };
        // Only the annotations' labels need the lines of the hunks.
        let newlines = if support.annotations { Newlines::of(&file.text) } else { Newlines(Vec::new()) };
        // A file that runs code later (a git hook, the editor's tasks, a
        // build script) says so in every annotation of its hunks.
        let runs = runs_code(std::path::Path::new(&file.display));
        let mut edits: Vec<OneOf<TextEdit, AnnotatedTextEdit>> = Vec::with_capacity(file.hunks.len());
        let mut plain_edits = Vec::new();
        for (hi, h) in file.hunks.iter().enumerate() {
            count += 1;
            let text_edit =
                TextEdit { range: Range { start: pos(h.start), end: pos(h.end) }, new_text: h.text.clone() };
            if support.annotations {
                let mut description = reason_for(h, &file.reasons).unwrap_or_else(|| "proposed by the agent".into());
                let problem = file.problem_of(h, &newlines);
                let id = annotation_id(fi, hi, problem);
                let mut label = match problem {
                    Some(pi) => {
                        let (line, message) = &file.problems[pi];
                        let message = message.lines().next().unwrap_or("").chars().take(80).collect::<String>();
                        format!("{}:{}: {message}", file.display, line + 1)
                    }
                    None => hunk_label(file, h, &newlines),
                };
                if let Some(why) = runs {
                    label.push_str(" (this file runs code)");
                    description = format!("This file runs code ({why}): review it before accepting. {description}");
                }
                annotations.entry(id.clone()).or_insert(ChangeAnnotation {
                    label,
                    needs_confirmation: Some(true),
                    description: Some(description),
                });
                edits.push(OneOf::Right(AnnotatedTextEdit { text_edit, annotation_id: id }));
            } else if support.document_changes {
                edits.push(OneOf::Left(text_edit));
            } else {
                plain_edits.push(text_edit);
            }
        }
        if file.create {
            let id = support.annotations.then(|| annotation_id(fi, 0, None));
            ops.push(DocumentChangeOperation::Op(ResourceOp::Create(CreateFile {
                uri: uri.clone(),
                options: Some(CreateFileOptions { overwrite: Some(false), ignore_if_exists: Some(false) }),
                annotation_id: id,
            })));
        }
        if support.document_changes {
            ops.push(DocumentChangeOperation::Edit(TextDocumentEdit {
                text_document: OptionalVersionedTextDocumentIdentifier { uri, version: file.version },
                edits,
            }));
        } else {
            plain.insert(uri, plain_edits);
        }
    }
    let edit = if support.document_changes {
        WorkspaceEdit {
            document_changes: Some(DocumentChanges::Operations(ops)),
            change_annotations: (!annotations.is_empty()).then_some(annotations),
            ..Default::default()
        }
    } else {
        WorkspaceEdit { changes: Some(plain), ..Default::default() }
    };
    (edit, count, skipped)
}

/// Line hunks from `original` to `new`, as LSP text edits in `encoding`.
#[cfg(test)]
pub fn text_edits(original: &str, new: &str, encoding: PositionEncoding) -> Vec<TextEdit> {
    let rope = Rope::from_str(original);
    let pos = |byte: usize| {
        let (line, character) = encoding::byte_to_position(&rope, byte, encoding);
        Position { line, character }
    };
    hunks(original, new)
        .into_iter()
        .map(|h| TextEdit { range: Range { start: pos(h.start), end: pos(h.end) }, new_text: h.text })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower_lsp_server::ls_types::GeneralClientCapabilities;

    fn caps_with(encodings: Vec<PositionEncodingKind>) -> ClientCapabilities {
        ClientCapabilities {
            general: Some(GeneralClientCapabilities { position_encodings: Some(encodings), ..Default::default() }),
            ..Default::default()
        }
    }

    #[test]
    fn encoding_negotiation_prefers_utf8_and_defaults_to_utf16() {
        assert_eq!(negotiate_encoding(&ClientCapabilities::default()), PositionEncoding::Utf16);
        assert_eq!(negotiate_encoding(&caps_with(vec![PositionEncodingKind::UTF16])), PositionEncoding::Utf16);
        assert_eq!(
            negotiate_encoding(&caps_with(vec![PositionEncodingKind::UTF16, PositionEncodingKind::UTF8])),
            PositionEncoding::Utf8
        );
        assert_eq!(negotiate_encoding(&caps_with(vec![PositionEncodingKind::UTF32])), PositionEncoding::Utf32);
    }

    #[test]
    fn text_edits_use_the_negotiated_encoding() {
        let old = "a = '😀'\r\nb = 1\r\n";
        let new = "a = '😀'\r\nb = 2\r\n";
        let e16 = text_edits(old, new, PositionEncoding::Utf16);
        assert_eq!(e16.len(), 1);
        assert_eq!(e16[0].range.start, Position { line: 1, character: 0 });
        assert_eq!(e16[0].range.end, Position { line: 2, character: 0 });
        assert_eq!(e16[0].new_text, "b = 2\r\n");
        // A change on the emoji line: utf16 counts the emoji as 2 units.
        let e = text_edits("x😀\n", "x😀y\n", PositionEncoding::Utf16);
        assert_eq!(e[0].range.end, Position { line: 1, character: 0 });
        let e = text_edits("x😀", "x😀y", PositionEncoding::Utf16);
        assert_eq!(e[0].range.end, Position { line: 0, character: 3 });
        let e = text_edits("x😀", "x😀y", PositionEncoding::Utf8);
        assert_eq!(e[0].range.end, Position { line: 0, character: 5 });
    }

    #[test]
    fn ranges_overlap_inclusively_and_map_to_lines() {
        let r = |a: u32, b: u32, c: u32, d: u32| Range { start: Position::new(a, b), end: Position::new(c, d) };
        assert!(overlaps(&r(2, 4, 2, 9), &r(2, 9, 2, 9)));
        assert!(overlaps(&r(2, 4, 2, 9), &r(2, 4, 2, 4)));
        assert!(!overlaps(&r(2, 4, 2, 9), &r(2, 10, 2, 10)));
        assert!(overlaps(&r(1, 0, 5, 0), &r(3, 0, 3, 0)));
        assert_eq!(range_lines(&r(2, 0, 4, 0)).numbers(), (3, 4));
        assert_eq!(range_lines(&r(2, 3, 2, 3)).numbers(), (3, 3));
    }

    #[test]
    fn new_files_need_create_support() {
        let change = FileChange {
            path: "/w/new.py".into(),
            display: "new.py".into(),
            version: None,
            pin: None,
            original: None,
            new_text: "x\n".into(),
            reasons: vec![],
        };
        let file = FileEdit::from_change(&change);
        let full = EditSupport { document_changes: true, create_files: true, annotations: false };
        let (edit, n, skipped) = workspace_edit(std::slice::from_ref(&file), PositionEncoding::Utf16, full);
        assert!(skipped.is_empty());
        assert_eq!(n, 1);
        let v = serde_json::to_value(&edit).unwrap();
        assert_eq!(v["documentChanges"][0]["kind"], "create");
        assert_eq!(v["documentChanges"][1]["textDocument"]["version"], serde_json::Value::Null);
        assert_eq!(v["documentChanges"][1]["edits"][0]["newText"], "x\n");
        let (_, _, skipped) = workspace_edit(&[file], PositionEncoding::Utf16, EditSupport::default());
        assert_eq!(skipped, ["new.py"]);
    }

    #[test]
    fn hunks_carry_annotations_with_the_models_reasons() {
        let change = FileChange {
            path: "/w/calc.py".into(),
            display: "calc.py".into(),
            version: Some(3),
            pin: None,
            original: Some("a = 1\nb = 2\nc = 3\nd = 4\n".into()),
            new_text: "a = 10\nb = 2\nc = 3\nd = 40\n".into(),
            reasons: vec![
                EditReason { reason: "bump a".into(), inserted: "a = 10".into() },
                EditReason { reason: "bump d".into(), inserted: "d = 40\n".into() },
            ],
        };
        let file = FileEdit::from_change(&change);
        let support = EditSupport { document_changes: true, create_files: true, annotations: true };
        let (edit, n, _) = workspace_edit(&[file], PositionEncoding::Utf16, support);
        assert_eq!(n, 2);
        let v = serde_json::to_value(&edit).unwrap();
        let edits = v["documentChanges"][0]["edits"].as_array().unwrap();
        assert_eq!(edits[0]["annotationId"], "agentfix-0-0");
        assert_eq!(
            v["changeAnnotations"]["agentfix-0-0"],
            serde_json::json!({"label": "calc.py: line 1", "needsConfirmation": true, "description": "bump a"})
        );
        assert_eq!(v["changeAnnotations"]["agentfix-0-1"]["label"], "calc.py: line 4");
        assert_eq!(v["changeAnnotations"]["agentfix-0-1"]["description"], "bump d");
    }

    #[test]
    fn annotation_ids_are_those_of_the_edit_whether_or_not_the_client_takes_them() {
        let change = |display: &str| FileChange {
            path: format!("/w/{display}").into(),
            display: display.into(),
            version: Some(1),
            pin: None,
            original: Some("a = 1\nb = 2\nc = 3\nd = 4\ne = 5\n".into()),
            new_text: "a = 10\nb = 2\nc = 30\nd = 4\ne = 50\n".into(),
            reasons: vec![],
        };
        let mut target = FileEdit::from_change(&change("calc.py"));
        // Problems on lines 1 and 3 (0-based 0 and 2): their hunks share them.
        target.problems = vec![(0, "first".into()), (2, "second".into())];
        let files = [target, FileEdit::from_change(&change("other.py"))];
        let ids = annotation_ids(&files);
        assert_eq!(
            ids,
            [
                vec!["agentfix-0-problem-0", "agentfix-0-problem-1", "agentfix-0-2"],
                vec!["agentfix-1-0", "agentfix-1-1", "agentfix-1-2"],
            ]
        );
        let support = EditSupport { document_changes: true, create_files: true, annotations: true };
        let (edit, _, _) = workspace_edit(&files, PositionEncoding::Utf16, support);
        let v = serde_json::to_value(&edit).unwrap();
        for (fi, file_ids) in ids.iter().enumerate() {
            let sent: Vec<&str> = v["documentChanges"][fi]["edits"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["annotationId"].as_str().unwrap())
                .collect();
            assert_eq!(&sent, file_ids);
        }
    }

    #[test]
    fn hunks_of_a_file_that_runs_code_say_so() {
        let change = |display: &str| FileChange {
            path: format!("/w/{display}").into(),
            display: display.into(),
            version: None,
            pin: None,
            original: Some("{}\n".into()),
            new_text: "{\"x\": 1}\n".into(),
            reasons: vec![EditReason { reason: "add x".into(), inserted: "{\"x\": 1}\n".into() }],
        };
        let files = [FileEdit::from_change(&change(".vscode/tasks.json")), FileEdit::from_change(&change("a.json"))];
        let support = EditSupport { document_changes: true, create_files: true, annotations: true };
        let (edit, _, _) = workspace_edit(&files, PositionEncoding::Utf16, support);
        let v = serde_json::to_value(&edit).unwrap();
        assert_eq!(
            v["changeAnnotations"]["agentfix-0-0"],
            serde_json::json!({
                "label": ".vscode/tasks.json: line 1 (this file runs code)",
                "needsConfirmation": true,
                "description": "This file runs code (VS Code runs its tasks, some when the folder opens): review it before accepting. add x"
            })
        );
        assert_eq!(v["changeAnnotations"]["agentfix-1-0"]["label"], "a.json: line 1");
        assert_eq!(v["changeAnnotations"]["agentfix-1-0"]["description"], "add x");
    }

    #[test]
    fn a_last_line_without_newline_ending_in_a_multibyte_char_gets_a_label() {
        for last in ["é", "😀", "漢"] {
            let original = format!("a\nb{last}");
            let change = FileChange {
                path: "/w/u.txt".into(),
                display: "u.txt".into(),
                version: Some(1),
                pin: None,
                original: Some(original.clone()),
                new_text: format!("a\nc{last}"),
                reasons: vec![],
            };
            let file = FileEdit::from_change(&change);
            let support = EditSupport { document_changes: true, create_files: true, annotations: true };
            let (edit, n, _) = workspace_edit(&[file], PositionEncoding::Utf16, support);
            assert_eq!(n, 1);
            let labels: Vec<String> = edit.change_annotations.unwrap().values().map(|a| a.label.clone()).collect();
            assert_eq!(labels, ["u.txt: line 2"]);
        }
    }

    /// Applies LSP edits (all relative to `text`) with the document store,
    /// the server's own reference for positions in each encoding.
    fn apply(text: &str, edits: &[TextEdit], encoding: PositionEncoding) -> String {
        let docs = crate::documents::Documents::new();
        docs.open("u", None, "t", 1, text);
        let mut sorted: Vec<&TextEdit> = edits.iter().collect();
        sorted.sort_by_key(|e| std::cmp::Reverse((e.range.start.line, e.range.start.character)));
        for (v, e) in sorted.into_iter().enumerate() {
            let change = crate::documents::Change { range: Some(span(&e.range)), text: e.new_text.clone() };
            docs.change("u", v as i32 + 2, &[change], encoding).unwrap();
        }
        docs.get("u").unwrap().rope.to_string()
    }

    fn unicode_text() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        proptest::collection::vec(
            prop_oneof![Just("a"), Just("é"), Just("😀"), Just("漢"), Just("\n"), Just("\r\n"), Just(" ")],
            0..40,
        )
        .prop_map(|parts| parts.concat())
    }

    proptest::proptest! {
        #[test]
        fn the_whole_workspace_edit_is_built_without_panics_and_applies_in_every_encoding(
            original in unicode_text(),
            new in unicode_text(),
            reason in "[a-zé😀]{0,8}",
        ) {
            let change = FileChange {
                path: "/w/u.txt".into(),
                display: "u.txt".into(),
                version: Some(3),
                pin: None,
                original: Some(original.clone()),
                new_text: new.clone(),
                reasons: vec![EditReason { reason, inserted: new.clone() }],
            };
            let file = FileEdit::from_change(&change);
            for encoding in [PositionEncoding::Utf8, PositionEncoding::Utf16, PositionEncoding::Utf32] {
                for annotations in [false, true] {
                    let support = EditSupport { document_changes: true, create_files: true, annotations };
                    let (edit, n, skipped) = workspace_edit(std::slice::from_ref(&file), encoding, support);
                    proptest::prop_assert!(skipped.is_empty());
                    proptest::prop_assert_eq!(n, file.hunks.len());
                    let Some(DocumentChanges::Operations(ops)) = edit.document_changes else { panic!("operations") };
                    let edits: Vec<TextEdit> = ops
                        .iter()
                        .filter_map(|op| match op {
                            DocumentChangeOperation::Edit(e) => Some(e),
                            _ => None,
                        })
                        .flat_map(|e| e.edits.iter())
                        .map(|e| match e {
                            OneOf::Left(t) => t.clone(),
                            OneOf::Right(a) => a.text_edit.clone(),
                        })
                        .collect();
                    proptest::prop_assert_eq!(apply(&original, &edits, encoding), new.clone());
                    if annotations && n > 0 {
                        proptest::prop_assert_eq!(edit.change_annotations.map(|a| a.len()), Some(n));
                    }
                }
            }
        }
    }

    #[test]
    fn an_editors_diagnostic_comes_whole_with_columns_in_characters() {
        // `bad` after CJK and an emoji, CRLF ends: UTF-16 12..15, UTF-8 16..19.
        let rope = Rope::from_str("ok\r\nx = \"漢😀\" + bad\r\n");
        let d = |a: u32, b: u32| -> Diagnostic {
            serde_json::from_value(serde_json::json!({
                "range": {"start": {"line": 1, "character": a}, "end": {"line": 1, "character": b}},
                "message": "undefined", "code": 7, "codeDescription": {"href": "https://example.com/7"},
                "relatedInformation": [
                    {"location": {"uri": "file:///w/lib.py", "range": {"start": {"line": 4, "character": 0}, "end": {"line": 4, "character": 3}}}, "message": "here"},
                    {"location": {"uri": "untitled:x", "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}}, "message": "no file"}]
            }))
            .unwrap()
        };
        for (encoding, (a, b)) in [(PositionEncoding::Utf16, (12, 15)), (PositionEncoding::Utf8, (16, 19))] {
            let ours = diagnostic_from_proto(&d(a, b), Some(&rope), encoding);
            assert_eq!((ours.at, ours.end), (LineCol::new(1, 11), Some(LineCol::new(1, 14))), "{encoding:?}");
            assert_eq!((ours.code.as_deref(), ours.code_link.as_deref()), (Some("7"), Some("https://example.com/7")));
            assert_eq!(ours.related, [Related { path: "/w/lib.py".into(), line: 4, message: "here".into() }]);
        }
        // Without the buffer the columns stay as they came.
        let ours = diagnostic_from_proto(&d(12, 15), None, PositionEncoding::Utf16);
        assert_eq!((ours.at, ours.end), (LineCol::new(1, 12), Some(LineCol::new(1, 15))));
    }
}
