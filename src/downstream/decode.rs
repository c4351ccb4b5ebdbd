//! From the LSP results servers send to our own `Symbol`, `Location`,
//! `Diagnostic` (whole: range, code link, related places), `QuickFix` and
//! hover text: every union shape the protocol allows, columns in
//! characters where the text the server counts in is known.
//! Decoding itself (JSON → LSP types) happens in `client.rs`, where a result
//! of the wrong shape becomes a `Malformed` error for its query.

use std::path::Path;

use tower_lsp_server::ls_types as lsp;

use super::uri::uri_to_path;
use super::{FixChange, Location, QuickFix, Symbol};
use crate::diagnostic::{Diagnostic, Related, Severity};
use crate::position::{self, ColumnUnit, LineCol, LineRange, Span};

pub fn symbol_kind(kind: lsp::SymbolKind) -> &'static str {
    use lsp::SymbolKind as K;
    match kind {
        K::FILE => "file",
        K::MODULE => "module",
        K::NAMESPACE => "namespace",
        K::PACKAGE => "package",
        K::CLASS => "class",
        K::METHOD => "method",
        K::PROPERTY => "property",
        K::FIELD => "field",
        K::CONSTRUCTOR => "constructor",
        K::ENUM => "enum",
        K::INTERFACE => "interface",
        K::FUNCTION => "function",
        K::VARIABLE => "variable",
        K::CONSTANT => "constant",
        K::STRING => "string",
        K::NUMBER => "number",
        K::BOOLEAN => "boolean",
        K::ARRAY => "array",
        K::OBJECT => "object",
        K::KEY => "key",
        K::NULL => "null",
        K::ENUM_MEMBER => "enum member",
        K::STRUCT => "struct",
        K::EVENT => "event",
        K::OPERATOR => "operator",
        K::TYPE_PARAMETER => "type parameter",
        _ => "symbol",
    }
}

/// A document outline: hierarchical `DocumentSymbol`s or flat
/// `SymbolInformation`s (`null`: none).
pub fn symbols(response: Option<lsp::DocumentSymbolResponse>) -> Vec<Symbol> {
    match response {
        None => Vec::new(),
        Some(lsp::DocumentSymbolResponse::Nested(items)) => items.into_iter().map(document_symbol).collect(),
        Some(lsp::DocumentSymbolResponse::Flat(items)) => items
            .into_iter()
            .map(|s| Symbol {
                name: s.name,
                kind: symbol_kind(s.kind),
                lines: LineRange::new(s.location.range.start.line, s.location.range.end.line),
                children: Vec::new(),
            })
            .collect(),
    }
}

fn document_symbol(s: lsp::DocumentSymbol) -> Symbol {
    Symbol {
        name: s.name,
        kind: symbol_kind(s.kind),
        lines: LineRange::new(s.range.start.line, s.range.end.line),
        children: s.children.unwrap_or_default().into_iter().map(document_symbol).collect(),
    }
}

/// A place from a URI and a line; `None` for URIs that are not files.
fn place(uri: &lsp::Uri, line: u32, symbol: Option<(String, lsp::SymbolKind)>) -> Option<Location> {
    let (name, kind) = match symbol {
        Some((name, kind)) => (Some(name), Some(symbol_kind(kind))),
        None => (None, None),
    };
    Some(Location { path: uri_to_path(uri.as_str())?, line, name, kind })
}

fn location(l: &lsp::Location) -> Option<Location> {
    place(&l.uri, l.range.start.line, None)
}

/// Definitions: one `Location`, an array of them, or `LocationLink`s (at
/// their selection range).
pub fn definitions(response: Option<lsp::GotoDefinitionResponse>) -> Vec<Location> {
    match response {
        None => Vec::new(),
        Some(lsp::GotoDefinitionResponse::Scalar(l)) => location(&l).into_iter().collect(),
        Some(lsp::GotoDefinitionResponse::Array(ls)) => ls.iter().filter_map(location).collect(),
        Some(lsp::GotoDefinitionResponse::Link(links)) => {
            links.iter().filter_map(|l| place(&l.target_uri, l.target_selection_range.start.line, None)).collect()
        }
    }
}

pub fn references(response: Option<Vec<lsp::Location>>) -> Vec<Location> {
    response.unwrap_or_default().iter().filter_map(location).collect()
}

/// Workspace symbols: `SymbolInformation`s or `WorkspaceSymbol`s, whose
/// location may be a bare URI (line 0 then).
pub fn workspace_symbols(response: Option<lsp::WorkspaceSymbolResponse>) -> Vec<Location> {
    match response {
        None => Vec::new(),
        Some(lsp::WorkspaceSymbolResponse::Flat(items)) => items
            .into_iter()
            .filter_map(|s| place(&s.location.uri, s.location.range.start.line, Some((s.name, s.kind))))
            .collect(),
        Some(lsp::WorkspaceSymbolResponse::Nested(items)) => items
            .into_iter()
            .filter_map(|s| match &s.location {
                lsp::OneOf::Left(l) => place(&l.uri, l.range.start.line, Some((s.name, s.kind))),
                lsp::OneOf::Right(w) => place(&w.uri, 0, Some((s.name, s.kind))),
            })
            .collect(),
    }
}

/// Hover text: a string, a language string, an array of them, or markup;
/// `None` when empty.
pub fn hover_text(hover: Option<lsp::Hover>) -> Option<String> {
    fn marked(m: lsp::MarkedString) -> String {
        match m {
            lsp::MarkedString::String(s) => s,
            lsp::MarkedString::LanguageString(l) => l.value,
        }
    }
    let text = match hover?.contents {
        lsp::HoverContents::Scalar(m) => marked(m),
        lsp::HoverContents::Array(items) => items.into_iter().map(marked).collect::<Vec<_>>().join("\n"),
        lsp::HoverContents::Markup(m) => m.value,
    };
    (!text.trim().is_empty()).then_some(text)
}

/// The character column of a server's `character` on 0-based `line` of
/// `text` (UTF-8 bytes, else UTF-16 units), clamped as
/// `position::char_column` is; a line past the end is an empty one.
pub fn char_column(text: &str, line: u32, character: u32, utf8: bool) -> u32 {
    let line_text = text.split('\n').nth(line as usize).unwrap_or("");
    position::char_column(line_text, character, if utf8 { ColumnUnit::Utf8 } else { ColumnUnit::Utf16 })
}

/// Ours of a server's position: its column in characters when the text it
/// counts in is known, else as the server sent it.
fn place_in(text: Option<&str>, p: &lsp::Position, utf8: bool) -> LineCol {
    match text {
        Some(text) => LineCol::new(p.line, char_column(text, p.line, p.character, utf8)),
        None => LineCol::new(p.line, p.character),
    }
}

/// The diagnostics a server published for `text` (its positions in UTF-8
/// bytes when `utf8`, else UTF-16 units), whole: range in characters, code
/// and its link, related places in files (others are left out).
pub fn diagnostics(items: &[lsp::Diagnostic], text: &str, utf8: bool) -> Vec<Diagnostic> {
    items
        .iter()
        .map(|d| Diagnostic {
            at: place_in(Some(text), &d.range.start, utf8),
            end: Some(place_in(Some(text), &d.range.end, utf8)),
            severity: d.severity.map(severity),
            message: d.message.clone(),
            source: d.source.clone(),
            code: d.code.as_ref().map(|c| match c {
                lsp::NumberOrString::String(s) => s.clone(),
                lsp::NumberOrString::Number(n) => n.to_string(),
            }),
            code_link: d.code_description.as_ref().map(|c| c.href.as_str().to_string()),
            related: d
                .related_information
                .iter()
                .flatten()
                .filter_map(|r| {
                    let path = uri_to_path(r.location.uri.as_str())?;
                    Some(Related { path, line: r.location.range.start.line, message: r.message.clone() })
                })
                .collect(),
            notes: Vec::new(),
        })
        .collect()
}

/// Whether a code action of `kind` is a quick fix: `quickfix` or one of its
/// sub-kinds, or no kind at all (servers that ignore `only` still say).
fn is_quick_fix(kind: Option<&lsp::CodeActionKind>) -> bool {
    kind.is_none_or(|k| {
        let k = k.as_str();
        k == "quickfix" || k.starts_with("quickfix.")
    })
}

/// The quick fixes of a `textDocument/codeAction` answer: commands (no edit
/// to show) and code actions of a quick-fix kind that are not disabled,
/// each with its edit as our `FixChange`s (files in path order, edits in
/// the server's order; edits of non-file URIs left out). `text_of` gives
/// the text the server has of a path, for columns in characters.
pub fn quick_fixes(
    response: Option<lsp::CodeActionResponse>,
    text_of: &dyn Fn(&Path) -> Option<String>,
    utf8: bool,
) -> Vec<QuickFix> {
    let mut out = Vec::new();
    for item in response.unwrap_or_default() {
        match item {
            lsp::CodeActionOrCommand::Command(c) => {
                out.push(QuickFix { title: c.title, preferred: false, changes: Vec::new(), command: true })
            }
            lsp::CodeActionOrCommand::CodeAction(a) => {
                if a.disabled.is_some() || !is_quick_fix(a.kind.as_ref()) {
                    continue;
                }
                let changes = a.edit.map(|e| fix_changes(e, text_of, utf8)).unwrap_or_default();
                out.push(QuickFix {
                    title: a.title,
                    preferred: a.is_preferred.unwrap_or(false),
                    changes,
                    command: a.command.is_some(),
                });
            }
        }
    }
    out
}

/// A `WorkspaceEdit` as our changes: `documentChanges` when given (in
/// order), else `changes` by path.
fn fix_changes(edit: lsp::WorkspaceEdit, text_of: &dyn Fn(&Path) -> Option<String>, utf8: bool) -> Vec<FixChange> {
    let path = |uri: &lsp::Uri| uri_to_path(uri.as_str());
    let edits = |uri: &lsp::Uri, edits: Vec<lsp::TextEdit>, out: &mut Vec<FixChange>| {
        let Some(path) = path(uri) else { return };
        let text = text_of(&path);
        for e in edits {
            let span = Span::new(
                place_in(text.as_deref(), &e.range.start, utf8),
                place_in(text.as_deref(), &e.range.end, utf8),
            );
            out.push(FixChange::Edit { path: path.clone(), span, text: e.new_text });
        }
    };
    let document_edit = |e: lsp::TextDocumentEdit, out: &mut Vec<FixChange>| {
        let plain = e
            .edits
            .into_iter()
            .map(|e| match e {
                lsp::OneOf::Left(e) => e,
                lsp::OneOf::Right(a) => a.text_edit,
            })
            .collect();
        edits(&e.text_document.uri, plain, out);
    };
    let mut out = Vec::new();
    match edit.document_changes {
        Some(lsp::DocumentChanges::Edits(all)) => all.into_iter().for_each(|e| document_edit(e, &mut out)),
        Some(lsp::DocumentChanges::Operations(ops)) => {
            for op in ops {
                match op {
                    lsp::DocumentChangeOperation::Edit(e) => document_edit(e, &mut out),
                    lsp::DocumentChangeOperation::Op(lsp::ResourceOp::Create(c)) => {
                        out.extend(path(&c.uri).map(FixChange::Create))
                    }
                    lsp::DocumentChangeOperation::Op(lsp::ResourceOp::Delete(d)) => {
                        out.extend(path(&d.uri).map(FixChange::Delete))
                    }
                    lsp::DocumentChangeOperation::Op(lsp::ResourceOp::Rename(r)) => {
                        if let (Some(from), Some(to)) = (path(&r.old_uri), path(&r.new_uri)) {
                            out.push(FixChange::Rename { from, to });
                        }
                    }
                }
            }
        }
        None => {
            let mut by_path: Vec<(lsp::Uri, Vec<lsp::TextEdit>)> =
                edit.changes.unwrap_or_default().into_iter().collect();
            by_path.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
            for (uri, e) in by_path {
                edits(&uri, e, &mut out);
            }
        }
    }
    out
}

/// Ours of an LSP severity; a value outside the four counts as a hint.
pub fn severity(s: lsp::DiagnosticSeverity) -> Severity {
    match s {
        lsp::DiagnosticSeverity::ERROR => Severity::Error,
        lsp::DiagnosticSeverity::WARNING => Severity::Warning,
        lsp::DiagnosticSeverity::INFORMATION => Severity::Information,
        _ => Severity::Hint,
    }
}

/// Whether `path` can be named by a `file:` URI servers accept.
pub fn uri_of(path: &Path) -> Option<lsp::Uri> {
    super::uri::path_to_uri(path).parse().ok()
}

#[cfg(test)]
mod tests {
    use serde::de::DeserializeOwned;
    use serde_json::{Value, json};

    use super::*;

    fn range(line: u32) -> Value {
        json!({"start": {"line": line, "character": 2}, "end": {"line": line + 1, "character": 0}})
    }

    fn decode<T: DeserializeOwned>(v: Value) -> T {
        serde_json::from_value(v).unwrap()
    }

    fn places(locs: &[Location]) -> Vec<(&str, u32)> {
        locs.iter().map(|l| (l.path.to_str().unwrap(), l.line)).collect()
    }

    #[test]
    fn document_symbols_nested_and_flat() {
        let nested = decode(json!([{"name": "C", "kind": 5, "range": range(0), "selectionRange": range(0),
            "children": [{"name": "m", "kind": 6, "range": {"start": {"line": 1, "character": 4}, "end": {"line": 2, "character": 0}}, "selectionRange": range(1)}]}]));
        let syms = symbols(nested);
        assert_eq!(
            (syms[0].name.as_str(), syms[0].kind, syms[0].lines.first, syms[0].lines.last),
            ("C", "class", 0, 1)
        );
        assert_eq!(
            syms[0].children[0],
            Symbol { name: "m".into(), kind: "method", lines: LineRange::new(1, 2), children: vec![] }
        );
        let flat = decode(json!([{"name": "f", "kind": 12, "location": {"uri": "file:///w/a.py", "range": range(4)}},
            {"name": "T", "kind": 26, "location": {"uri": "file:///w/a.py", "range": range(7)}},
            {"name": "odd", "kind": 99, "location": {"uri": "file:///w/a.py", "range": range(9)}}]));
        let syms = symbols(flat);
        assert_eq!(
            syms.iter().map(|s| (s.name.as_str(), s.kind, s.lines.first)).collect::<Vec<_>>(),
            [("f", "function", 4), ("T", "type parameter", 7), ("odd", "symbol", 9)]
        );
        assert!(symbols(decode(json!(null))).is_empty());
        assert!(symbols(decode(json!([]))).is_empty());
    }

    #[test]
    fn definitions_scalar_array_links_and_null() {
        let scalar = decode(json!({"uri": "file:///w/a.py", "range": range(3)}));
        assert_eq!(places(&definitions(scalar)), [("/w/a.py", 3)]);
        let array =
            decode(json!([{"uri": "file:///w/a.py", "range": range(3)}, {"uri": "untitled:1", "range": range(1)},
            {"uri": "file:///w/b%20c.py", "range": range(5)}]));
        assert_eq!(places(&definitions(array)), [("/w/a.py", 3), ("/w/b c.py", 5)], "non-file URIs are left out");
        let links = decode(
            json!([{"targetUri": "file:///w/b%20c.py", "targetRange": range(8), "targetSelectionRange": range(9)}]),
        );
        assert_eq!(places(&definitions(links)), [("/w/b c.py", 9)]);
        assert!(definitions(decode(json!(null))).is_empty());
        assert!(definitions(decode(json!([]))).is_empty());
        let refs = decode(json!([{"uri": "file:///w/a.py", "range": range(1)}]));
        assert_eq!(places(&references(refs)), [("/w/a.py", 1)]);
        assert!(references(decode(json!(null))).is_empty());
    }

    #[test]
    fn workspace_symbols_flat_and_nested() {
        let flat =
            decode(json!([{"name": "Foo", "kind": 5, "location": {"uri": "file:///w/c.py", "range": range(1)}}]));
        let locs = workspace_symbols(flat);
        assert_eq!(places(&locs), [("/w/c.py", 1)]);
        assert_eq!((locs[0].name.as_deref(), locs[0].kind), (Some("Foo"), Some("class")));
        let nested =
            decode(json!([{"name": "bar", "kind": 12, "location": {"uri": "file:///w/d.py", "range": range(6)}},
            {"name": "Baz", "kind": 23, "location": {"uri": "file:///w/e.py"}}]));
        let locs = workspace_symbols(nested);
        assert_eq!(places(&locs), [("/w/d.py", 6), ("/w/e.py", 0)]);
        assert_eq!(locs[1].kind, Some("struct"));
        assert!(workspace_symbols(decode(json!(null))).is_empty());
    }

    #[test]
    fn hover_contents_every_variant() {
        let text = |v: Value| hover_text(decode(v));
        assert_eq!(text(json!({"contents": {"kind": "markdown", "value": "def f()"}})).as_deref(), Some("def f()"));
        assert_eq!(text(json!({"contents": "plain"})).as_deref(), Some("plain"));
        assert_eq!(text(json!({"contents": {"language": "py", "value": "x: int"}})).as_deref(), Some("x: int"));
        assert_eq!(text(json!({"contents": ["a", {"language": "py", "value": "b"}]})).as_deref(), Some("a\nb"));
        assert_eq!(text(json!({"contents": ""})), None);
        assert_eq!(text(json!({"contents": []})), None);
        assert_eq!(text(json!(null)), None);
    }

    #[test]
    fn diagnostics_severity_and_codes() {
        let items: Vec<lsp::Diagnostic> = decode(json!([
            {"range": range(2), "message": "no severity", "code": 42},
            {"range": range(3), "severity": 2, "message": "w", "source": "s", "code": "E1"},
            {"range": range(4), "severity": 3, "message": "i"},
            {"range": range(5), "severity": 4, "message": "h"}
        ]));
        let text = "0\n1\n  two\n  three\n  four\n  five\n";
        let d = diagnostics(&items, text, false);
        assert_eq!(
            d.iter().map(|d| d.shown_severity().name()).collect::<Vec<_>>(),
            ["error", "warning", "info", "hint"]
        );
        assert_eq!((d[0].at.line, d[0].at.column, d[0].code.as_deref()), (2, 2, Some("42")));
        assert_eq!((d[1].source.as_deref(), d[1].code.as_deref()), (Some("s"), Some("E1")));
    }

    #[test]
    fn malformed_results_do_not_decode() {
        // Each of these must be an error for its query, never a panic.
        let bad = [
            json!({"uri": 5}),
            json!([{"uri": "file:///w/a.py"}]),
            json!("a string"),
            json!([{"uri": "file:///w/a.py", "range": range(1)}, {"targetUri": "file:///w/b.py"}]),
        ];
        for v in bad {
            assert!(serde_json::from_value::<Option<lsp::GotoDefinitionResponse>>(v.clone()).is_err(), "{v}");
        }
        assert!(serde_json::from_value::<Option<lsp::DocumentSymbolResponse>>(json!([{"name": 1}])).is_err());
        assert!(serde_json::from_value::<Option<lsp::Hover>>(json!({"contents": 7})).is_err());
        assert!(serde_json::from_value::<Option<lsp::WorkspaceSymbolResponse>>(json!({})).is_err());
        assert!(serde_json::from_value::<Option<Vec<lsp::Location>>>(json!([{"uri": "not a uri at all"}])).is_err());
    }

    #[test]
    fn diagnostics_come_whole_with_columns_in_characters() {
        // Line 1: CJK and an emoji before `bad`, CRLF ends.
        let text = "ok\r\nx = \"漢😀\" + bad\r\n";
        // In UTF-16 `bad` is at 12..15 (the emoji is two units); in UTF-8 at 16..19.
        let at = |a: u32, b: u32| json!({"start": {"line": 1, "character": a}, "end": {"line": 1, "character": b}});
        let item = |at: Value| {
            json!({"range": at, "message": "undefined", "code": "E1",
                "codeDescription": {"href": "https://example.com/E1"},
                "relatedInformation": [
                    {"location": {"uri": "file:///w/lib.py", "range": range(6)}, "message": "defined here"},
                    {"location": {"uri": "untitled:1", "range": range(1)}, "message": "not a file"}]})
        };
        for (utf8, range) in [(false, at(12, 15)), (true, at(16, 19))] {
            let items: Vec<lsp::Diagnostic> = decode(json!([item(range)]));
            let d = &diagnostics(&items, text, utf8)[0];
            assert_eq!((d.at, d.end), (LineCol::new(1, 11), Some(LineCol::new(1, 14))), "utf8: {utf8}");
            assert_eq!(d.code_link.as_deref(), Some("https://example.com/E1"));
            assert_eq!(d.related, [Related { path: "/w/lib.py".into(), line: 6, message: "defined here".into() }]);
        }
        // Inside the emoji: its start; past the line's end: the end, before the `\r`.
        assert_eq!(char_column(text, 1, 7, false), 6);
        assert_eq!(char_column(text, 1, 99, false), 14);
        assert_eq!(char_column(text, 0, 99, true), 2);
        assert_eq!(char_column(text, 9, 3, false), 0);
    }

    #[test]
    fn code_actions_become_quick_fixes_with_their_edits() {
        let r = |a: u32, b: u32| json!({"start": {"line": 0, "character": a}, "end": {"line": 0, "character": b}});
        let response = decode(json!([
            {"title": "Run a command", "command": "fake.fix", "arguments": []},
            {"title": "Replace", "kind": "quickfix", "isPreferred": true,
             "edit": {"changes": {"file:///w/b.py": [{"range": r(0, 0), "newText": "import os\n"}],
                                  "file:///w/a.py": [{"range": r(6, 8), "newText": "0"}]}}},
            {"title": "Ops", "kind": "quickfix.sub", "command": {"title": "c", "command": "x"},
             "edit": {"documentChanges": [
                {"kind": "create", "uri": "file:///w/new.py"},
                {"textDocument": {"uri": "file:///w/a.py", "version": 3}, "edits": [
                    {"range": r(0, 1), "newText": "y", "annotationId": "a"}]},
                {"kind": "rename", "oldUri": "file:///w/a.py", "newUri": "file:///w/c.py"},
                {"kind": "delete", "uri": "file:///w/old.py"},
                {"textDocument": {"uri": "untitled:1", "version": null}, "edits": [{"range": r(0, 0), "newText": "z"}]}]}},
            {"title": "Extract", "kind": "refactor.extract", "edit": {"changes": {}}},
            {"title": "Off", "kind": "quickfix", "disabled": {"reason": "no"}},
            {"title": "Bare"}
        ]));
        // The server's text of a.py, where `漢` is one UTF-16 unit and three UTF-8 bytes.
        let text_of = |p: &Path| (p == Path::new("/w/a.py")).then(|| "x = 漢 + ab\n".to_string());
        let fixes = quick_fixes(response, &text_of, false);
        let span = |a: u32, b: u32| Span::new(LineCol::new(0, a), LineCol::new(0, b));
        assert_eq!(
            fixes,
            [
                QuickFix { title: "Run a command".into(), preferred: false, changes: vec![], command: true },
                QuickFix {
                    title: "Replace".into(),
                    preferred: true,
                    changes: vec![
                        FixChange::Edit { path: "/w/a.py".into(), span: span(6, 8), text: "0".into() },
                        FixChange::Edit { path: "/w/b.py".into(), span: span(0, 0), text: "import os\n".into() },
                    ],
                    command: false,
                },
                QuickFix {
                    title: "Ops".into(),
                    preferred: false,
                    changes: vec![
                        FixChange::Create("/w/new.py".into()),
                        FixChange::Edit { path: "/w/a.py".into(), span: span(0, 1), text: "y".into() },
                        FixChange::Rename { from: "/w/a.py".into(), to: "/w/c.py".into() },
                        FixChange::Delete("/w/old.py".into()),
                    ],
                    command: true,
                },
                QuickFix { title: "Bare".into(), preferred: false, changes: vec![], command: false },
            ]
        );
        // In UTF-8, byte 5 is inside `漢` (its start, character 4), byte 10 is `a`.
        let fixes = quick_fixes(
            decode(
                json!([{"title": "t", "edit": {"changes": {"file:///w/a.py": [{"range": r(5, 10), "newText": ""}]}}}]),
            ),
            &text_of,
            true,
        );
        assert_eq!(
            fixes[0].changes,
            [FixChange::Edit { path: "/w/a.py".into(), span: span(4, 8), text: String::new() }]
        );
        assert!(quick_fixes(None, &text_of, false).is_empty());
    }
}
