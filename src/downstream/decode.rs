//! From the LSP results servers send to our own `Symbol`, `Location`,
//! `Diagnostic` and hover text: every union shape the protocol allows.
//! Decoding itself (JSON → LSP types) happens in `client.rs`, where a result
//! of the wrong shape becomes a `Malformed` error for its query.

use std::path::Path;

use tower_lsp_server::ls_types as lsp;

use super::uri::uri_to_path;
use super::{Location, Symbol};
use crate::diagnostic::{Diagnostic, Severity};
use crate::position::{LineCol, LineRange};

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

pub fn diagnostics(items: &[lsp::Diagnostic]) -> Vec<Diagnostic> {
    items
        .iter()
        .map(|d| Diagnostic {
            at: LineCol::new(d.range.start.line, d.range.start.character),
            severity: d.severity.map(severity),
            message: d.message.clone(),
            source: d.source.clone(),
            code: d.code.as_ref().map(|c| match c {
                lsp::NumberOrString::String(s) => s.clone(),
                lsp::NumberOrString::Number(n) => n.to_string(),
            }),
        })
        .collect()
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
        let d = diagnostics(&items);
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
}
