//! `agentfix fix --diagnostics`: compiler and linter output read into our
//! own `diagnostic::Diagnostic`s, each with the file it names.
//!
//! The format is told from the content: text whose first character is `{`
//! is JSON (one document, or one object per line), anything else is plain
//! `path:line[:column]: message` lines. One function per format, each over
//! typed serde structs of that tool's shape:
//!
//! - plain text: gcc/clang, mypy, ruff (concise), eslint's `unix` formatter,
//!   `rustc --error-format=short`; an optional `error:`/`warning:`/`note:`
//!   word, a leading ruff code, a trailing mypy `[code]` or eslint
//!   `[Error/rule]`. Other lines (source excerpts, carets, summaries) are
//!   context and skipped; input where no line is a diagnostic is an error
//!   naming its first line. Columns are taken as characters: nothing on a
//!   line says which tool wrote it, and rustc and ruff count characters,
//!   while clang (bytes), gcc (display columns), eslint (UTF-16 units) and
//!   mypy (bytes) differ from them after a non-ASCII character.
//! - `cargo … --message-format=json` lines (`reason: compiler-message`; other
//!   reasons are skipped) and `rustc --error-format=json` lines: the first
//!   primary span of each diagnostic, to its end; the other labelled spans
//!   and the children with a span (their suggestion said) as related
//!   places, the children without one as notes, the code's link. Columns
//!   1-based, in characters.
//! - `pyright --outputjson`: `generalDiagnostics`, ranges 0-based, columns
//!   in UTF-16 units (LSP's).
//! - `mypy -O json`: one object per line, `line` 1-based, `column` 0-based
//!   in UTF-8 bytes (Python's `ast` `col_offset`, which mypy passes on).
//! - SARIF 2.1.0: `runs[].results[]`, the first physical location of each,
//!   its region's end, its rule's `helpUri`, its `relatedLocations`.
//!   Columns 1-based, in the run's `columnKind`: `unicodeCodePoints`
//!   (characters) or `utf16CodeUnits`, which an absent one (the spec
//!   requires it) or an unknown one is taken as.
//!
//! Columns in another unit than characters become characters of their line
//! in the file's text, which the caller's `texts` gives: asked for once per
//! file and parse, only for paths inside the root, and only when a column
//! needs it. Where it gives none or the line is past the end, the column is
//! kept as given.
//!
//! Paths are resolved against the workspace root, lexically, so a path that
//! leads outside the root is never opened. Such diagnostics are left out and
//! their paths reported. JSON that does not fit its shape is an error naming
//! the line it is on.
//!
//! Its parts:
//! `--diagnostics` input to `diagnostic::Diagnostic`s with their paths:
//! format told from the content, one function per format (plain
//! `path:line:col: message`, cargo/rustc JSON lines, pyright JSON, mypy JSON
//! lines, SARIF 2.1.0) over typed serde structs; paths resolved lexically
//! against the root (`workspace::normalize`), those outside left out and
//! named, never opened; columns turned from each format's unit into
//! characters of the line (`position::char_column`) in the texts the caller
//! gives, each file's asked for once; bad input is an error naming its line

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};

use regex::Regex;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;

use crate::diagnostic::{Diagnostic, Related, Severity};
use crate::position::{ColumnUnit, LineCol, char_column};
use crate::workspace::normalize;

/// The shapes of input understood.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Plain,
    Cargo,
    Rustc,
    Pyright,
    Mypy,
    Sarif,
}

impl Format {
    /// How the user's messages name it.
    pub fn name(self) -> &'static str {
        match self {
            Format::Plain => "plain text",
            Format::Cargo => "cargo JSON",
            Format::Rustc => "rustc JSON",
            Format::Pyright => "pyright JSON",
            Format::Mypy => "mypy JSON",
            Format::Sarif => "SARIF",
        }
    }
}

/// A diagnostic and the file it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// Absolute and lexically normalised, inside the root.
    pub path: PathBuf,
    pub diagnostic: Diagnostic,
}

/// What an input held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failures {
    /// The format of the input (of its first JSON document, for JSON).
    pub format: Format,
    /// In input order, without repeats (cargo reports a diagnostic once per
    /// target that compiles the file).
    pub diagnostics: Vec<Located>,
    /// Paths, as the input wrote them, that lead outside the root (or are
    /// not local files); their diagnostics are left out.
    pub outside: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FailuresError {
    #[error("the diagnostics input is empty: nothing to fix")]
    Empty,
    #[error("the diagnostics input ({0}) reports no problem with a line to fix: nothing to fix")]
    NoDiagnostics(&'static str),
    #[error("line {line} of the diagnostics input: {why}")]
    Line { line: usize, why: String },
}

/// The text of a file a diagnostic is about (absolute, inside the root),
/// or `None` when it cannot be read.
pub type Texts<'a> = &'a dyn Fn(&Path) -> Option<Arc<String>>;

/// Reads `text` (any of the formats above) with paths relative to `root`
/// (absolute, normalised), columns turned into characters in the files'
/// `texts`.
pub fn parse(text: &str, root: &Path, texts: Texts) -> Result<Failures, FailuresError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let first = text.trim_start();
    if first.is_empty() {
        return Err(FailuresError::Empty);
    }
    let mut sink = Sink { root, found: Vec::new(), outside: Vec::new(), texts, files: HashMap::new() };
    let format = if first.starts_with('{') { json(text, &mut sink)? } else { plain(text, &mut sink)? };
    let Sink { found, outside, .. } = sink;
    if found.is_empty() && outside.is_empty() {
        return Err(FailuresError::NoDiagnostics(format.name()));
    }
    let mut diagnostics: Vec<Located> = Vec::with_capacity(found.len());
    for d in found {
        if !diagnostics.contains(&d) {
            diagnostics.push(d);
        }
    }
    Ok(Failures { format, diagnostics, outside })
}

/// Collects diagnostics, resolving their paths and turning their columns
/// into characters.
struct Sink<'a> {
    root: &'a Path,
    found: Vec<Located>,
    outside: Vec<String>,
    texts: Texts<'a>,
    /// Each file asked for, once: its lines, or `None` when it has no text.
    files: HashMap<PathBuf, Option<Lines>>,
}

impl Sink<'_> {
    /// Adds a diagnostic about `path` (relative to the root, or absolute)
    /// whose columns count `unit`s.
    fn add(&mut self, path: &str, mut diagnostic: Diagnostic, unit: ColumnUnit) {
        let Some(path) = self.resolve(path) else { return self.reject(path) };
        if unit != ColumnUnit::Chars {
            diagnostic.at = self.in_chars(&path, diagnostic.at, unit);
            diagnostic.end = diagnostic.end.map(|end| self.in_chars(&path, end, unit));
        }
        self.found.push(Located { path, diagnostic });
    }

    /// `at`'s column (in `unit`) in characters of its line of `path`; as
    /// given when the file has no text or no such line.
    fn in_chars(&mut self, path: &Path, at: LineCol, unit: ColumnUnit) -> LineCol {
        let texts = self.texts;
        let lines = self.files.entry(path.to_path_buf()).or_insert_with(|| texts(path).map(Lines::new));
        match lines.as_ref().and_then(|l| l.line(at.line)) {
            Some(line) => LineCol::new(at.line, char_column(line, at.column, unit)),
            None => {
                tracing::debug!("{}: no line {} to count its column in, kept", path.display(), at.line_number());
                at
            }
        }
    }

    /// `path` (relative to the root, or absolute) lexically normalised;
    /// `None` when it leads outside the root.
    fn resolve(&self, path: &str) -> Option<PathBuf> {
        let given = Path::new(path);
        let joined = if given.is_absolute() { given.to_path_buf() } else { self.root.join(given) };
        let lexical = normalize(&joined);
        (!path.contains('\0') && lexical.starts_with(self.root)).then_some(lexical)
    }

    /// A related place at `path` (as `resolve`), 0-based `line`; one
    /// outside the root is left out, as its diagnostics would be.
    fn related(&self, path: &str, line: u32, message: String) -> Option<Related> {
        Some(Related { path: self.resolve(path)?, line, message })
    }

    fn reject(&mut self, path: &str) {
        if !self.outside.iter().any(|p| p == path) {
            self.outside.push(path.to_string());
        }
    }
}

/// A file's text and where each of its lines starts.
struct Lines {
    text: Arc<String>,
    starts: Vec<usize>,
}

impl Lines {
    fn new(text: Arc<String>) -> Self {
        let starts = std::iter::once(0).chain(text.match_indices('\n').map(|(i, _)| i + 1)).collect();
        Self { text, starts }
    }

    /// 0-based `line` without its `\n` (the empty line after a final one
    /// is a line); `None` past the end.
    fn line(&self, line: u32) -> Option<&str> {
        let start = *self.starts.get(line as usize)?;
        let end = self.starts.get(line as usize + 1).map_or(self.text.len(), |next| next - 1);
        self.text.get(start..end)
    }
}

/// A 1-based number as a 0-based `u32` (0 counts as 1; past `u32` clamps).
fn zero_based(n: u64) -> u32 {
    u32::try_from(n.saturating_sub(1)).unwrap_or(u32::MAX)
}

/// A 0-based number as a `u32` (negative, "unknown" for mypy, counts as 0).
fn clamp(n: i64) -> u32 {
    u32::try_from(n.max(0)).unwrap_or(u32::MAX)
}

fn diagnostic(
    line: u32,
    column: u32,
    severity: Option<Severity>,
    message: String,
    source: Option<&str>,
    code: Option<String>,
) -> Diagnostic {
    Diagnostic {
        at: LineCol::new(line, column),
        severity,
        message,
        source: source.map(str::to_string),
        code: code.filter(|c| !c.is_empty()),
        ..Default::default()
    }
}

// ---------------------------------------------------------------------------
// Plain text

static PLAIN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?P<path>(?:[A-Za-z]:)?[^:\s][^:]*?):(?P<line>\d+):(?:(?P<col>\d+):)?\s*(?P<rest>.*?)\s*$")
        .expect("valid regex")
});
/// `error:`, `fatal error:`, `warning:`, `note:` … and rustc's short `error[E0308]:`.
static SEVERITY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(?P<sev>fatal error|error|warning|note|info|information|remark|hint|help)(?:\[(?P<code>[^\]]+)\])?\s*:\s*")
        .expect("valid regex")
});
/// ruff's `F401 [*] message`.
static RUFF_CODE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(?P<code>[A-Z]{1,4}[0-9]{1,5})\s+(?:\[\*\]\s+)?").expect("valid regex"));
/// eslint's unix formatter: `message [Error/no-unused-vars]`.
static ESLINT_TAIL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\s+\[(?P<sev>Error|Warning)(?:/(?P<rule>[^\]]+))?\]$").expect("valid regex"));
/// mypy's `message  [assignment]` (two spaces, so `list[int]` stays).
static MYPY_TAIL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\s\s\[(?P<code>[a-z0-9][a-z0-9-]*)\]$").expect("valid regex"));

fn severity_word(word: &str) -> Severity {
    match word.to_ascii_lowercase().as_str() {
        "error" | "fatal error" => Severity::Error,
        "warning" => Severity::Warning,
        "hint" | "help" => Severity::Hint,
        _ => Severity::Information,
    }
}

/// `path:line[:column]: [severity:] message` lines; others are context.
fn plain(text: &str, sink: &mut Sink) -> Result<Format, FailuresError> {
    let mut any = false;
    for line in text.lines() {
        if let Some((path, d)) = plain_line(line) {
            sink.add(path, d, ColumnUnit::Chars);
            any = true;
        }
    }
    if any {
        return Ok(Format::Plain);
    }
    let (n, line) = text.lines().enumerate().find(|(_, l)| !l.trim().is_empty()).unwrap_or((0, ""));
    let mut shown: String = line.trim().chars().take(120).collect();
    if shown.len() < line.trim().len() {
        shown.push('…');
    }
    Err(FailuresError::Line {
        line: n + 1,
        why: format!(
            "`{shown}` is not a diagnostic, and no line is: expected `path:line[:column]: message` lines, \
             or JSON from cargo/rustc, `pyright --outputjson`, `mypy -O json` or SARIF 2.1.0"
        ),
    })
}

fn plain_line(line: &str) -> Option<(&str, Diagnostic)> {
    let caps = PLAIN.captures(line)?;
    let path = caps.name("path")?.as_str();
    let number: u64 = caps["line"].parse().unwrap_or(u64::MAX);
    let column: u64 = caps.name("col").map_or(1, |c| c.as_str().parse().unwrap_or(u64::MAX));
    let mut rest = caps.name("rest")?.as_str();
    let (mut severity, mut code) = (None, None);
    if let Some(s) = SEVERITY.captures(rest) {
        severity = Some(severity_word(&s["sev"]));
        code = s.name("code").map(|c| c.as_str().to_string());
        rest = &rest[s.get(0)?.end()..];
    } else if let Some(c) = RUFF_CODE.captures(rest) {
        code = Some(c["code"].to_string());
        rest = &rest[c.get(0)?.end()..];
    }
    if let Some(t) = ESLINT_TAIL.captures(rest) {
        severity = severity.or(Some(if &t["sev"] == "Error" { Severity::Error } else { Severity::Warning }));
        code = code.or_else(|| t.name("rule").map(|r| r.as_str().to_string()));
        rest = &rest[..t.get(0)?.start()];
    } else if code.is_none()
        && let Some(t) = MYPY_TAIL.captures(rest)
    {
        code = Some(t["code"].to_string());
        rest = &rest[..t.get(0)?.start()];
    }
    let message = rest.trim();
    // `In file included from a.c:3:` and the like name a place, not a problem.
    if message.is_empty() {
        return None;
    }
    Some((path, diagnostic(zero_based(number), zero_based(column), severity, message.to_string(), None, code)))
}

// ---------------------------------------------------------------------------
// JSON

/// Which tool wrote a JSON object: the keys that tell them apart.
#[derive(Deserialize)]
struct Shape {
    reason: Option<String>,
    #[serde(rename = "generalDiagnostics")]
    general_diagnostics: Option<IgnoredAny>,
    runs: Option<IgnoredAny>,
    spans: Option<IgnoredAny>,
    file: Option<IgnoredAny>,
}

/// Every JSON value of `text` in turn (one document, or one per line).
fn json(text: &str, sink: &mut Sink) -> Result<Format, FailuresError> {
    let line_at = |offset: usize| text[..offset].bytes().filter(|&b| b == b'\n').count() + 1;
    let mut format = None;
    for item in serde_json::Deserializer::from_str(text).into_iter::<&RawValue>() {
        let raw = item.map_err(|e| FailuresError::Line { line: e.line(), why: format!("not JSON: {}", bare(&e)) })?;
        let start = line_at(raw.get().as_ptr() as usize - text.as_ptr() as usize);
        // An error inside the value: its line from the value's first one.
        let at = |e: serde_json::Error| FailuresError::Line { line: start + e.line().max(1) - 1, why: bare(&e) };
        let unknown = || FailuresError::Line {
            line: start,
            why: "a JSON value of no known shape: expected cargo or rustc JSON lines, `mypy -O json` lines, \
                  a `pyright --outputjson` report or a SARIF 2.1.0 log"
                .into(),
        };
        let shape: Shape = serde_json::from_str(raw.get()).map_err(|_| unknown())?;
        let this = if let Some(reason) = &shape.reason {
            if reason == "compiler-message" {
                let m: CargoMessage = serde_json::from_str(raw.get()).map_err(at)?;
                rustc(m.message, sink);
            }
            Format::Cargo
        } else if shape.general_diagnostics.is_some() {
            pyright(serde_json::from_str(raw.get()).map_err(at)?, sink);
            Format::Pyright
        } else if shape.runs.is_some() {
            sarif(serde_json::from_str(raw.get()).map_err(at)?, sink)
                .map_err(|why| FailuresError::Line { line: start, why })?;
            Format::Sarif
        } else if shape.spans.is_some() {
            rustc(serde_json::from_str(raw.get()).map_err(at)?, sink);
            Format::Rustc
        } else if shape.file.is_some() {
            mypy(serde_json::from_str(raw.get()).map_err(at)?, sink);
            Format::Mypy
        } else {
            return Err(unknown());
        };
        format.get_or_insert(this);
    }
    Ok(format.unwrap_or(Format::Plain))
}

/// serde_json's message without its ` at line L column C` (the caller
/// names the line of the input instead).
fn bare(e: &serde_json::Error) -> String {
    let s = e.to_string();
    match s.rfind(" at line ") {
        Some(i) => format!("{} (column {})", &s[..i], e.column()),
        None => s,
    }
}

// rustc and cargo ------------------------------------------------------------

/// A line of `cargo … --message-format=json` with `reason: compiler-message`.
#[derive(Deserialize)]
struct CargoMessage {
    message: RustcDiagnostic,
}

/// A line of `rustc --error-format=json` (and the `message` of a cargo
/// line, and each of its children).
#[derive(Deserialize)]
struct RustcDiagnostic {
    message: String,
    #[serde(default)]
    code: Option<RustcCode>,
    level: String,
    #[serde(default)]
    spans: Vec<RustcSpan>,
    /// `help:` and `note:` lines, some with a span and a suggestion.
    #[serde(default)]
    children: Vec<RustcDiagnostic>,
}

#[derive(Deserialize)]
struct RustcCode {
    code: String,
}

#[derive(Deserialize)]
struct RustcSpan {
    file_name: String,
    /// 1-based.
    line_start: u64,
    /// 1-based, in characters.
    column_start: u64,
    /// 1-based (absent: the span ends where it starts).
    #[serde(default)]
    line_end: u64,
    /// 1-based, in characters, exclusive.
    #[serde(default)]
    column_end: u64,
    is_primary: bool,
    label: Option<String>,
    /// What a suggestion puts over the span.
    #[serde(default)]
    suggested_replacement: Option<String>,
}

impl RustcSpan {
    fn start(&self) -> LineCol {
        LineCol::new(zero_based(self.line_start), zero_based(self.column_start))
    }

    fn end(&self) -> LineCol {
        LineCol::new(zero_based(self.line_end), zero_based(self.column_end)).max(self.start())
    }
}

/// Where rustc and clippy document a code: the error index, the lint list.
fn rustc_code_link(code: &str) -> Option<String> {
    if let Some(lint) = code.strip_prefix("clippy::") {
        return Some(format!("https://rust-lang.github.io/rust-clippy/master/index.html#{lint}"));
    }
    let is_error_code = code.len() == 5 && code.starts_with('E') && code[1..].bytes().all(|b| b.is_ascii_digit());
    is_error_code.then(|| format!("https://doc.rust-lang.org/error_codes/{code}.html"))
}

/// A rustc diagnostic at its first primary span, to its end; its other
/// labelled spans and its children with a span (a suggestion's
/// replacement said) are related places, its children without one notes.
/// One without a span (`aborting due to 1 previous error`) names no place
/// and is skipped.
fn rustc(d: RustcDiagnostic, sink: &mut Sink) {
    let Some(span) = d.spans.iter().find(|s| s.is_primary) else { return };
    let severity = match d.level.as_str() {
        "warning" => Severity::Warning,
        "note" | "failure-note" => Severity::Information,
        "help" => Severity::Hint,
        _ => Severity::Error,
    };
    let code = d.code.map(|c| c.code);
    let source = if code.as_deref().is_some_and(|c| c.starts_with("clippy::")) { "clippy" } else { "rustc" };
    let message = match span.label.as_deref().filter(|l| !l.is_empty()) {
        Some(label) => format!("{}: {label}", d.message),
        None => d.message,
    };
    let mut found = diagnostic(span.start().line, span.start().column, Some(severity), message, Some(source), code);
    found.end = Some(span.end());
    found.code_link = found.code.as_deref().and_then(rustc_code_link);
    let others = d.spans.iter().filter(|s| !std::ptr::eq(*s, span));
    for s in others {
        if let Some(label) = s.label.as_deref().filter(|l| !l.is_empty()) {
            found.related.extend(sink.related(&s.file_name, s.start().line, label.to_string()));
        }
    }
    for child in &d.children {
        let said = format!("{}: {}", child.level, child.message);
        let spans: Vec<&RustcSpan> = child.spans.iter().filter(|s| s.is_primary).collect();
        if spans.is_empty() {
            found.notes.push(said);
            continue;
        }
        for s in spans {
            let mut message = said.clone();
            if let Some(label) = s.label.as_deref().filter(|l| !l.is_empty()) {
                message.push_str(&format!(": {label}"));
            }
            if let Some(r) = &s.suggested_replacement {
                let (a, b) = (s.start(), s.end());
                let r = r.replace('\n', "\\n");
                message.push_str(&if a == b {
                    format!(" (insert `{r}` at {}:{})", a.line_number(), a.column_number())
                } else {
                    let (a, b) = ((a.line_number(), a.column_number()), (b.line_number(), b.column_number()));
                    format!(" (replace {}:{}-{}:{} with `{r}`)", a.0, a.1, b.0, b.1)
                });
            }
            found.related.extend(sink.related(&s.file_name, s.start().line, message));
        }
    }
    sink.add(&span.file_name, found, ColumnUnit::Chars);
}

// pyright ----------------------------------------------------------------------

/// `pyright --outputjson`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PyrightReport {
    general_diagnostics: Vec<PyrightDiagnostic>,
}

#[derive(Deserialize)]
struct PyrightDiagnostic {
    file: String,
    severity: PyrightSeverity,
    message: String,
    /// Absent for the few diagnostics about a whole file.
    range: Option<PyrightRange>,
    rule: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum PyrightSeverity {
    Error,
    Warning,
    Information,
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct PyrightRange {
    start: PyrightPosition,
    end: Option<PyrightPosition>,
}

/// 0-based, as LSP: `character` in UTF-16 units.
#[derive(Deserialize)]
struct PyrightPosition {
    line: u64,
    character: u64,
}

fn pyright(report: PyrightReport, sink: &mut Sink) {
    for d in report.general_diagnostics {
        let Some(range) = d.range else {
            tracing::info!("pyright diagnostic without a range left out: {}", d.message);
            continue;
        };
        let severity = match d.severity {
            PyrightSeverity::Error => Some(Severity::Error),
            PyrightSeverity::Warning => Some(Severity::Warning),
            PyrightSeverity::Information => Some(Severity::Information),
            PyrightSeverity::Other => None,
        };
        let place = |p: &PyrightPosition| {
            LineCol::new(u32::try_from(p.line).unwrap_or(u32::MAX), u32::try_from(p.character).unwrap_or(u32::MAX))
        };
        let at = place(&range.start);
        let mut found = diagnostic(at.line, at.column, severity, d.message, Some("pyright"), d.rule);
        found.end = range.end.as_ref().map(place);
        sink.add(&d.file, found, ColumnUnit::Utf16);
    }
}

// mypy ---------------------------------------------------------------------------

/// A line of `mypy -O json`.
#[derive(Deserialize)]
struct MypyMessage {
    file: String,
    /// 1-based (-1 when unknown).
    line: i64,
    /// 0-based (-1 when unknown), in UTF-8 bytes.
    column: i64,
    message: String,
    hint: Option<String>,
    code: Option<String>,
    severity: MypySeverity,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum MypySeverity {
    Error,
    Warning,
    Note,
    #[serde(other)]
    Other,
}

fn mypy(m: MypyMessage, sink: &mut Sink) {
    let severity = match m.severity {
        MypySeverity::Error => Some(Severity::Error),
        MypySeverity::Warning => Some(Severity::Warning),
        MypySeverity::Note => Some(Severity::Information),
        MypySeverity::Other => None,
    };
    let message = match m.hint.as_deref().filter(|h| !h.trim().is_empty()) {
        Some(hint) => format!("{}\n{}", m.message, hint.trim_end()),
        None => m.message,
    };
    let line = clamp(m.line.max(1) - 1);
    let found = diagnostic(line, clamp(m.column), severity, message, Some("mypy"), m.code);
    sink.add(&m.file, found, ColumnUnit::Utf8);
}

// SARIF ------------------------------------------------------------------------------

/// A SARIF 2.1.0 log.
#[derive(Deserialize)]
struct SarifLog {
    version: String,
    runs: Vec<SarifRun>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SarifRun {
    tool: Option<SarifTool>,
    #[serde(default)]
    results: Vec<SarifResult>,
    /// What `artifactLocation.index` points into.
    #[serde(default)]
    artifacts: Vec<SarifArtifact>,
    /// What `artifactLocation.uriBaseId` names (`%SRCROOT%` → `file:///w/`).
    #[serde(default)]
    original_uri_base_ids: BTreeMap<String, SarifArtifactLocation>,
    /// What the regions' columns count.
    #[serde(default)]
    column_kind: SarifColumnKind,
}

/// A run's `columnKind`. The spec requires one in a run with results and
/// gives no default; an absent or unknown one is taken as UTF-16 units,
/// what .NET, Java and JavaScript tools count (ESLint's SARIF has none).
#[derive(Deserialize, Default, Clone, Copy)]
#[serde(rename_all = "camelCase")]
enum SarifColumnKind {
    #[default]
    Utf16CodeUnits,
    UnicodeCodePoints,
    #[serde(other)]
    Other,
}

impl SarifColumnKind {
    fn unit(self) -> ColumnUnit {
        match self {
            SarifColumnKind::UnicodeCodePoints => ColumnUnit::Chars,
            SarifColumnKind::Utf16CodeUnits | SarifColumnKind::Other => ColumnUnit::Utf16,
        }
    }
}

#[derive(Deserialize)]
struct SarifTool {
    driver: SarifDriver,
}

#[derive(Deserialize)]
struct SarifDriver {
    name: String,
    /// The rules, for their `helpUri`.
    #[serde(default)]
    rules: Vec<SarifRule>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SarifRule {
    id: Option<String>,
    help_uri: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SarifResult {
    rule_id: Option<String>,
    level: Option<SarifLevel>,
    message: SarifMessage,
    #[serde(default)]
    locations: Vec<SarifLocation>,
    /// Other places that bear on the result, each with its message.
    #[serde(default)]
    related_locations: Vec<SarifLocation>,
    /// Into `tool.driver.rules`, when `ruleId` does not name one.
    rule_index: Option<usize>,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum SarifLevel {
    None,
    Note,
    Warning,
    Error,
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct SarifMessage {
    text: Option<String>,
    /// A message of the rule's `messageStrings`, when there is no text.
    id: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SarifLocation {
    physical_location: Option<SarifPhysicalLocation>,
    /// What a related location says.
    message: Option<SarifMessage>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SarifPhysicalLocation {
    artifact_location: Option<SarifArtifactLocation>,
    region: Option<SarifRegion>,
}

#[derive(Deserialize, Clone)]
#[serde(rename_all = "camelCase")]
struct SarifArtifactLocation {
    uri: Option<String>,
    uri_base_id: Option<String>,
    index: Option<usize>,
}

#[derive(Deserialize)]
struct SarifArtifact {
    location: Option<SarifArtifactLocation>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SarifRegion {
    /// 1-based; absent for regions given by byte offsets only.
    start_line: Option<u64>,
    /// 1-based, default 1, in the run's `columnKind`.
    start_column: Option<u64>,
    /// 1-based, default `startLine`.
    end_line: Option<u64>,
    /// 1-based, exclusive; absent: to the end of the line (left open here:
    /// the line is not read).
    end_column: Option<u64>,
}

fn sarif(log: SarifLog, sink: &mut Sink) -> Result<(), String> {
    if log.version != "2.1.0" {
        return Err(format!("SARIF version {} is not supported (2.1.0 is)", log.version));
    }
    for run in &log.runs {
        let source = run.tool.as_ref().map(|t| t.driver.name.as_str());
        for result in &run.results {
            let Some(physical) = result.locations.iter().find_map(|l| l.physical_location.as_ref()) else { continue };
            let Some(line) = physical.region.as_ref().and_then(|r| r.start_line) else { continue };
            let column = physical.region.as_ref().and_then(|r| r.start_column).unwrap_or(1);
            let Some(location) = physical.artifact_location.as_ref() else { continue };
            let severity = match result.level {
                // SARIF's default level.
                None | Some(SarifLevel::Warning) => Some(Severity::Warning),
                Some(SarifLevel::Error) => Some(Severity::Error),
                Some(SarifLevel::Note) => Some(Severity::Information),
                Some(SarifLevel::None | SarifLevel::Other) => None,
            };
            let message = result
                .message
                .text
                .clone()
                .or_else(|| result.message.id.clone())
                .or_else(|| result.rule_id.clone())
                .unwrap_or_else(|| "(no message)".into());
            let mut d =
                diagnostic(zero_based(line), zero_based(column), severity, message, source, result.rule_id.clone());
            let region = physical.region.as_ref();
            d.end = region
                .and_then(|r| Some(LineCol::new(zero_based(r.end_line.unwrap_or(line)), zero_based(r.end_column?))));
            let rules = run.tool.as_ref().map_or(&[][..], |t| t.driver.rules.as_slice());
            let rule = match &result.rule_id {
                Some(id) => rules.iter().find(|r| r.id.as_ref() == Some(id)),
                None => result.rule_index.and_then(|i| rules.get(i)),
            };
            d.code_link = rule.and_then(|r| r.help_uri.clone());
            for r in &result.related_locations {
                let Some(p) = &r.physical_location else { continue };
                let (Some(location), Some(line)) = (&p.artifact_location, p.region.as_ref().and_then(|r| r.start_line))
                else {
                    continue;
                };
                let said = r.message.as_ref().and_then(|m| m.text.clone()).unwrap_or_default();
                if let Ok(path) = sarif_path(location, run) {
                    d.related.extend(sink.related(&path, zero_based(line), said));
                }
            }
            match sarif_path(location, run) {
                Ok(path) => sink.add(&path, d, run.column_kind.unit()),
                Err(shown) => sink.reject(&shown),
            }
        }
    }
    Ok(())
}

/// The path of an artifact location: a `file:` URI, or a relative reference
/// against its `uriBaseId` (or the workspace root); `Err` with what to show
/// for a URI that is not a local file.
fn sarif_path(location: &SarifArtifactLocation, run: &SarifRun) -> Result<String, String> {
    let indexed = location.index.and_then(|i| run.artifacts.get(i)).and_then(|a| a.location.as_ref());
    let (uri, base) = match (&location.uri, indexed) {
        (Some(uri), _) => (uri.as_str(), location.uri_base_id.as_deref()),
        (None, Some(l)) => {
            (l.uri.as_deref().unwrap_or(""), l.uri_base_id.as_deref().or(location.uri_base_id.as_deref()))
        }
        (None, None) => ("", None),
    };
    if let Some(rest) = uri.strip_prefix("file:") {
        return file_uri_path(rest).ok_or_else(|| uri.to_string());
    }
    if has_scheme(uri) {
        return Err(uri.to_string());
    }
    let relative = percent_decode(uri).ok_or_else(|| uri.to_string())?;
    let base = base
        .and_then(|b| run.original_uri_base_ids.get(b))
        .and_then(|b| b.uri.as_deref())
        .and_then(|b| b.strip_prefix("file:"))
        .and_then(file_uri_path);
    Ok(match base {
        Some(base) => Path::new(&base).join(relative).to_string_lossy().into_owned(),
        None => relative,
    })
}

/// The path of a `file:` URI after its scheme: `///p`, `//localhost/p` or
/// `/p`; another host is not a local file.
fn file_uri_path(rest: &str) -> Option<String> {
    let path = match rest.strip_prefix("//") {
        Some(after) => {
            let slash = after.find('/')?;
            let host = &after[..slash];
            if !host.is_empty() && !host.eq_ignore_ascii_case("localhost") {
                return None;
            }
            &after[slash..]
        }
        None => rest,
    };
    path.starts_with('/').then(|| percent_decode(path)).flatten()
}

fn has_scheme(uri: &str) -> bool {
    let Some((scheme, _)) = uri.split_once(':') else { return false };
    scheme.len() > 1
        && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// `%XX` escapes decoded; `None` when the result is not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ROOT: &str = "/w/проект";

    /// No file has a text: columns are kept as given.
    fn parse(text: &str, root: &Path) -> Result<Failures, FailuresError> {
        super::parse(text, root, &|_| None)
    }

    fn parsed(text: &str) -> Failures {
        parse(text, Path::new(ROOT)).unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    /// CRLF with a final line break: `'a'` is at UTF-16 unit 20, byte 24,
    /// character 19 (`漢` is 1 unit and 3 bytes, `😀` 2 units and 4 bytes);
    /// the line has 22 characters.
    const A_PY: &str = "s = '漢😀'; x: int = 'a'\r\nt = 1\r\n";
    /// LF without one: on line 1 `y` is at unit 6, byte 10, character 5.
    const B_PY: &str = "x = 1\n漢😀 = y";

    /// `text` parsed with `a.py` and `b.py` of the root as above (any
    /// other file has no text), and the paths asked for, in order.
    fn parsed_with_files(text: &str) -> (Failures, Vec<PathBuf>) {
        let asked = std::cell::RefCell::new(Vec::new());
        let texts = |path: &Path| {
            asked.borrow_mut().push(path.to_path_buf());
            let rel = path.strip_prefix(ROOT).ok()?.to_str()?;
            [("a.py", A_PY), ("b.py", B_PY)].iter().find(|(name, _)| *name == rel).map(|(_, t)| Arc::new(t.to_string()))
        };
        let f = super::parse(text, Path::new(ROOT), &texts).unwrap_or_else(|e| panic!("{e}\n{text}"));
        (f, asked.into_inner())
    }

    /// Each diagnostic's start and end.
    fn places(f: &Failures) -> Vec<(LineCol, Option<LineCol>)> {
        f.diagnostics.iter().map(|l| (l.diagnostic.at, l.diagnostic.end)).collect()
    }

    fn files(names: &[&str]) -> Vec<PathBuf> {
        names.iter().map(|n| Path::new(ROOT).join(n)).collect()
    }

    /// `(path relative to the root, 1-based line, 1-based column, severity, message, source, code)`.
    type Row = (String, u64, u64, Option<&'static str>, String, Option<String>, Option<String>);

    fn rows(f: &Failures) -> Vec<Row> {
        f.diagnostics
            .iter()
            .map(|l| {
                let d = &l.diagnostic;
                (
                    l.path.strip_prefix(ROOT).unwrap().to_string_lossy().into_owned(),
                    d.at.line_number(),
                    d.at.column_number(),
                    d.severity.map(Severity::name),
                    d.message.clone(),
                    d.source.clone(),
                    d.code.clone(),
                )
            })
            .collect()
    }

    fn row(
        path: &str,
        line: u64,
        col: u64,
        sev: Option<&'static str>,
        msg: &str,
        source: Option<&str>,
        code: Option<&str>,
    ) -> Row {
        (path.into(), line, col, sev, msg.into(), source.map(Into::into), code.map(Into::into))
    }

    #[test]
    fn gcc_output_with_context_lines_and_crlf() {
        let text = "src/calc.c: In function ‘main’:\r\nsrc/calc.c:2:10: error: ‘y’ undeclared (first use in this function)\r\n    2 |   return y;\r\n      |          ^\r\nsrc/calc.c:2:10: note: each undeclared identifier is reported only once\r\nIn file included from src/calc.c:1:\r\n/usr/include/stdio.h:9:1: warning: something in a system header\r\n";
        let f = parsed(text);
        assert_eq!(f.format, Format::Plain);
        assert_eq!(
            rows(&f),
            vec![
                row("src/calc.c", 2, 10, Some("error"), "‘y’ undeclared (first use in this function)", None, None),
                row("src/calc.c", 2, 10, Some("info"), "each undeclared identifier is reported only once", None, None),
            ]
        );
        assert_eq!(f.outside, vec!["/usr/include/stdio.h".to_string()]);
    }

    #[test]
    fn mypy_ruff_eslint_and_rustc_short_text() {
        let text = "\
app.py:4: error: Incompatible types in assignment (expression has type \"str\", variable has type \"int\")  [assignment]
app.py:7:5: note: Revealed type is \"list[int]\"
Found 1 error in 1 file (checked 1 source file)
lib/ünï.py:1:8: F401 [*] `os` imported but unused
/w/проект/web/app.js:3:7: 'x' is assigned a value but never used. [Error/no-unused-vars]
/w/проект/web/app.js:9:1: Unexpected console statement. [Warning/no-console]
src/main.rs:2:18: error[E0308]: mismatched types
src/main.rs:5: warning: unused variable: `y`

2 problems
";
        let f = parsed(text);
        assert_eq!(
            rows(&f),
            vec![
                row(
                    "app.py",
                    4,
                    1,
                    Some("error"),
                    "Incompatible types in assignment (expression has type \"str\", variable has type \"int\")",
                    None,
                    Some("assignment")
                ),
                row("app.py", 7, 5, Some("info"), "Revealed type is \"list[int]\"", None, None),
                row("lib/ünï.py", 1, 8, None, "`os` imported but unused", None, Some("F401")),
                row(
                    "web/app.js",
                    3,
                    7,
                    Some("error"),
                    "'x' is assigned a value but never used.",
                    None,
                    Some("no-unused-vars")
                ),
                row("web/app.js", 9, 1, Some("warning"), "Unexpected console statement.", None, Some("no-console")),
                row("src/main.rs", 2, 18, Some("error"), "mismatched types", None, Some("E0308")),
                row("src/main.rs", 5, 1, Some("warning"), "unused variable: `y`", None, None),
            ]
        );
    }

    /// `cargo build --message-format=json` (abridged from a real run: the
    /// artifact and build-finished lines are skipped, the same error from
    /// two targets is kept once, a span-less summary is skipped).
    #[test]
    fn cargo_json_lines() {
        let error = r#"{"reason":"compiler-message","package_id":"path+file:///w/demo#0.1.0","manifest_path":"/w/demo/Cargo.toml","target":{"kind":["lib"],"crate_types":["lib"],"name":"demo","src_path":"/w/demo/src/lib.rs","edition":"2021","doc":true,"doctest":true,"test":true},"message":{"rendered":"error[E0308]: mismatched types\n","$message_type":"diagnostic","children":[],"code":{"code":"E0308","explanation":"Expected type did not match the received type.\n"},"level":"error","message":"mismatched types","spans":[{"byte_end":26,"byte_start":23,"column_end":15,"column_start":12,"expansion":null,"file_name":"src/lib.rs","is_primary":false,"label":"expected due to this","line_end":2,"line_start":2,"suggested_replacement":null,"suggestion_applicability":null,"text":[]},{"byte_end":32,"byte_start":29,"column_end":21,"column_start":18,"expansion":null,"file_name":"src/lib.rs","is_primary":true,"label":"expected `u32`, found `&str`","line_end":2,"line_start":2,"suggested_replacement":null,"suggestion_applicability":null,"text":[]}]}}"#;
        let lint = r#"{"reason":"compiler-message","package_id":"demo","manifest_path":"/w/demo/Cargo.toml","target":{"name":"demo"},"message":{"rendered":"","$message_type":"diagnostic","children":[{"children":[],"code":null,"level":"help","message":"remove `return`","rendered":null,"spans":[]}],"code":{"code":"clippy::needless_return","explanation":null},"level":"warning","message":"unneeded `return` statement","spans":[{"byte_end":80,"byte_start":70,"column_end":13,"column_start":5,"expansion":null,"file_name":"src/ü.rs","is_primary":true,"label":null,"line_end":9,"line_start":9,"suggested_replacement":null,"suggestion_applicability":null,"text":[]}]}}"#;
        let summary = r#"{"reason":"compiler-message","package_id":"demo","manifest_path":"/w/demo/Cargo.toml","target":{"name":"demo"},"message":{"rendered":"error: aborting due to 1 previous error\n","$message_type":"diagnostic","children":[],"code":null,"level":"error","message":"aborting due to 1 previous error","spans":[]}}"#;
        let artifact = r#"{"reason":"compiler-artifact","package_id":"dep 1.0.0","manifest_path":"/home/u/.cargo/registry/dep/Cargo.toml","target":{"name":"dep"},"profile":{},"features":[],"filenames":[],"executable":null,"fresh":true}"#;
        let text = format!(
            "{artifact}\r\n{error}\r\n{lint}\r\n{error}\r\n{summary}\r\n{{\"reason\":\"build-finished\",\"success\":false}}\r\n"
        );
        let f = parsed(&text);
        assert_eq!(f.format, Format::Cargo);
        assert_eq!(
            rows(&f),
            vec![
                row(
                    "src/lib.rs",
                    2,
                    18,
                    Some("error"),
                    "mismatched types: expected `u32`, found `&str`",
                    Some("rustc"),
                    Some("E0308")
                ),
                row(
                    "src/ü.rs",
                    9,
                    5,
                    Some("warning"),
                    "unneeded `return` statement",
                    Some("clippy"),
                    Some("clippy::needless_return")
                ),
            ]
        );
    }

    /// `rustc --error-format=json m.rs`, as rustc 1.95 prints it.
    #[test]
    fn rustc_json_lines() {
        let text = r#"{"$message_type":"diagnostic","message":"mismatched types","code":{"code":"E0308","explanation":"Expected type did not match the received type.\n"},"level":"error","spans":[{"file_name":"m.rs","byte_start":29,"byte_end":32,"line_start":2,"line_end":2,"column_start":18,"column_end":21,"is_primary":true,"text":[{"text":"    let x: u32 = \"a\";","highlight_start":18,"highlight_end":21}],"label":"expected `u32`, found `&str`","suggested_replacement":null,"suggestion_applicability":null,"expansion":null}],"children":[],"rendered":"error[E0308]: mismatched types\n"}
{"$message_type":"diagnostic","message":"aborting due to 1 previous error","code":null,"level":"error","spans":[],"children":[],"rendered":"error: aborting due to 1 previous error\n\n"}
{"$message_type":"diagnostic","message":"For more information about this error, try `rustc --explain E0308`.","code":null,"level":"failure-note","spans":[],"children":[],"rendered":"For more information about this error, try `rustc --explain E0308`.\n"}
"#;
        let f = parsed(text);
        assert_eq!(f.format, Format::Rustc);
        assert_eq!(
            rows(&f),
            vec![row(
                "m.rs",
                2,
                18,
                Some("error"),
                "mismatched types: expected `u32`, found `&str`",
                Some("rustc"),
                Some("E0308")
            )]
        );
    }

    /// `pyright --outputjson` (1.1.414), pretty-printed, CRLF, an absolute
    /// non-ASCII path, a warning and a diagnostic without a range.
    #[test]
    fn pyright_report() {
        let text = "{\r\n    \"version\": \"1.1.414\",\r\n    \"time\": \"1796138007218\",\r\n    \"generalDiagnostics\": [\r\n        {\r\n            \"file\": \"/w/проект/app.py\",\r\n            \"severity\": \"error\",\r\n            \"message\": \"Argument of type \\\"Literal['4']\\\" cannot be assigned to parameter \\\"x\\\" of type \\\"int\\\" in function \\\"double\\\"\\n  \\\"Literal['4']\\\" is not assignable to \\\"int\\\"\",\r\n            \"range\": {\r\n                \"start\": {\"line\": 4, \"character\": 13},\r\n                \"end\": {\"line\": 4, \"character\": 16}\r\n            },\r\n            \"rule\": \"reportArgumentType\"\r\n        },\r\n        {\r\n            \"file\": \"/w/проект/app.py\",\r\n            \"severity\": \"warning\",\r\n            \"message\": \"\\\"value\\\" is possibly unbound\",\r\n            \"range\": {\"start\": {\"line\": 1, \"character\": 6}, \"end\": {\"line\": 1, \"character\": 11}},\r\n            \"rule\": \"reportPossiblyUnbound\"\r\n        },\r\n        {\"file\": \"/w/проект/app.py\", \"severity\": \"information\", \"message\": \"whole file\"}\r\n    ],\r\n    \"summary\": {\"filesAnalyzed\": 1, \"errorCount\": 1, \"warningCount\": 1, \"informationCount\": 0, \"timeInSec\": 0.754}\r\n}\r\n";
        let f = parsed(text);
        assert_eq!(f.format, Format::Pyright);
        assert_eq!(
            rows(&f),
            vec![
                row(
                    "app.py",
                    5,
                    14,
                    Some("error"),
                    "Argument of type \"Literal['4']\" cannot be assigned to parameter \"x\" of type \"int\" in function \"double\"\n  \"Literal['4']\" is not assignable to \"int\"",
                    Some("pyright"),
                    Some("reportArgumentType")
                ),
                row(
                    "app.py",
                    2,
                    7,
                    Some("warning"),
                    "\"value\" is possibly unbound",
                    Some("pyright"),
                    Some("reportPossiblyUnbound")
                ),
            ]
        );
        // A clean run: nothing to fix.
        let clean = r#"{"version": "1.1.414", "generalDiagnostics": [], "summary": {"errorCount": 0}}"#;
        assert_eq!(parse(clean, Path::new(ROOT)), Err(FailuresError::NoDiagnostics("pyright JSON")));
    }

    /// `mypy -O json` (1.11+): one object per line, column 0-based, notes.
    #[test]
    fn mypy_json_lines() {
        let text = "{\"file\": \"pkg/mod.py\", \"line\": 4, \"column\": 11, \"message\": \"Incompatible types in assignment (expression has type \\\"str\\\", variable has type \\\"int\\\")\", \"hint\": null, \"code\": \"assignment\", \"severity\": \"error\"}\r\n{\"file\": \"pkg/mod.py\", \"line\": 9, \"column\": -1, \"message\": \"Name \\\"undefined\\\" is not defined\", \"hint\": \"Did you mean \\\"defined\\\"?\", \"code\": \"name-defined\", \"severity\": \"error\"}\r\n{\"file\": \"../elsewhere.py\", \"line\": 1, \"column\": 0, \"message\": \"x\", \"hint\": null, \"code\": null, \"severity\": \"note\"}\r\n";
        let f = parsed(text);
        assert_eq!(f.format, Format::Mypy);
        assert_eq!(
            rows(&f),
            vec![
                row(
                    "pkg/mod.py",
                    4,
                    12,
                    Some("error"),
                    "Incompatible types in assignment (expression has type \"str\", variable has type \"int\")",
                    Some("mypy"),
                    Some("assignment")
                ),
                row(
                    "pkg/mod.py",
                    9,
                    1,
                    Some("error"),
                    "Name \"undefined\" is not defined\nDid you mean \"defined\"?",
                    Some("mypy"),
                    Some("name-defined")
                ),
            ]
        );
        assert_eq!(f.outside, vec!["../elsewhere.py".to_string()]);
    }

    /// SARIF 2.1.0 as ESLint's and Semgrep's formatters write it: a `file:`
    /// URI, a `%SRCROOT%`-relative one, one by artifact index, another host.
    #[test]
    fn sarif_log() {
        let text = r#"{
  "version": "2.1.0",
  "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
  "runs": [{
    "tool": {"driver": {"name": "ESLint", "rules": [{"id": "no-unused-vars"}]}},
    "originalUriBaseIds": {"%SRCROOT%": {"uri": "file:///w/%D0%BF%D1%80%D0%BE%D0%B5%D0%BA%D1%82/"}},
    "artifacts": [{"location": {"uri": "src/b%20c.js", "uriBaseId": "%SRCROOT%"}}],
    "results": [
      {"ruleId": "no-unused-vars", "level": "error", "message": {"text": "'x' is assigned a value but never used."},
       "locations": [{"physicalLocation": {"artifactLocation": {"uri": "file:///w/%D0%BF%D1%80%D0%BE%D0%B5%D0%BA%D1%82/src/a.js", "index": 0}, "region": {"startLine": 3, "startColumn": 7, "endLine": 3, "endColumn": 8}}}]},
      {"ruleId": "eqeqeq", "message": {"text": "Expected '===' and instead saw '=='."},
       "locations": [{"physicalLocation": {"artifactLocation": {"uri": "src/a.js", "uriBaseId": "%SRCROOT%"}, "region": {"startLine": 5}}}]},
      {"ruleId": "no-console", "level": "note", "message": {"text": "Unexpected console statement."},
       "locations": [{"physicalLocation": {"artifactLocation": {"index": 0}, "region": {"startLine": 1, "startColumn": 1}}}]},
      {"ruleId": "r", "level": "error", "message": {"text": "remote"},
       "locations": [{"physicalLocation": {"artifactLocation": {"uri": "file://server/share/a.js"}, "region": {"startLine": 1}}}]},
      {"ruleId": "r", "level": "error", "message": {"text": "no region"},
       "locations": [{"physicalLocation": {"artifactLocation": {"uri": "src/a.js"}}}]}
    ]
  }]
}"#;
        let f = parsed(text);
        assert_eq!(f.format, Format::Sarif);
        assert_eq!(
            rows(&f),
            vec![
                row(
                    "src/a.js",
                    3,
                    7,
                    Some("error"),
                    "'x' is assigned a value but never used.",
                    Some("ESLint"),
                    Some("no-unused-vars")
                ),
                row(
                    "src/a.js",
                    5,
                    1,
                    Some("warning"),
                    "Expected '===' and instead saw '=='.",
                    Some("ESLint"),
                    Some("eqeqeq")
                ),
                row(
                    "src/b c.js",
                    1,
                    1,
                    Some("info"),
                    "Unexpected console statement.",
                    Some("ESLint"),
                    Some("no-console")
                ),
            ]
        );
        assert_eq!(f.outside, vec!["file://server/share/a.js".to_string()]);
        let old = r#"{"version": "2.0.0", "runs": []}"#;
        assert_eq!(
            parse(old, Path::new(ROOT)),
            Err(FailuresError::Line { line: 1, why: "SARIF version 2.0.0 is not supported (2.1.0 is)".into() })
        );
    }

    #[test]
    fn paths_outside_the_root_are_left_out_and_named() {
        let text = "../other/a.py:1: error: up and out\n/etc/passwd:1:1: error: absolute elsewhere\nsub/../../проект/ok.py:2: error: back in\n/w/проектX/a.py:1: error: a sibling with the root as prefix\n";
        let f = parsed(text);
        assert_eq!(rows(&f), vec![row("ok.py", 2, 1, Some("error"), "back in", None, None)]);
        assert_eq!(f.outside, vec!["../other/a.py", "/etc/passwd", "/w/проектX/a.py"]);
        // All of them outside: no diagnostic, but not "nothing in the input".
        let f = parsed("/etc/passwd:1:1: error: x\n");
        assert!(f.diagnostics.is_empty() && f.outside == ["/etc/passwd"]);
    }

    #[test]
    fn bad_input_is_an_error_naming_its_line() {
        let root = Path::new(ROOT);
        assert_eq!(parse("", root), Err(FailuresError::Empty));
        assert_eq!(parse(" \r\n\n\t\n", root), Err(FailuresError::Empty));
        let e = parse("\n\nSuccess: no issues found in 1 source file\n", root).unwrap_err();
        let FailuresError::Line { line: 3, why } = &e else { panic!("{e:?}") };
        assert!(why.starts_with("`Success: no issues found in 1 source file` is not a diagnostic"), "{why}");
        // JSON lines broken by a line of text (cargo's stderr mixed in).
        let good = r#"{"reason":"build-script-executed","package_id":"x"}"#;
        let e = parse(&format!("{good}\n   Compiling demo v0.1.0\n"), root).unwrap_err();
        assert_eq!(e, FailuresError::Line { line: 2, why: "not JSON: expected value (column 4)".into() });
        // A known shape with a field of the wrong type: the line inside the document.
        let e = parse(
            "{\"generalDiagnostics\": [\n  {\"file\": \"a.py\",\n   \"severity\": \"error\",\n   \"message\": 7}\n]}",
            root,
        )
        .unwrap_err();
        let FailuresError::Line { line: 4, why } = &e else { panic!("{e:?}") };
        assert!(why.starts_with("invalid type: integer `7`, expected a string"), "{why}");
        // A missing field.
        let e = parse("{\"file\": \"a.py\", \"line\": 1}\n", root).unwrap_err();
        let FailuresError::Line { line: 1, why } = &e else { panic!("{e:?}") };
        assert!(why.starts_with("missing field `column`"), "{why}");
        // JSON of no known shape, on its line.
        let e = parse("{\"reason\":\"build-finished\",\"success\":true}\n{\"x\": 1}\n", root).unwrap_err();
        let FailuresError::Line { line: 2, why } = &e else { panic!("{e:?}") };
        assert!(why.starts_with("a JSON value of no known shape"), "{why}");
        // A clean cargo build: nothing to fix.
        assert_eq!(
            parse("{\"reason\":\"build-finished\",\"success\":true}\n", root),
            Err(FailuresError::NoDiagnostics("cargo JSON"))
        );
        // Truncated JSON.
        let e = parse("{\"generalDiagnostics\": [", root).unwrap_err();
        assert!(matches!(e, FailuresError::Line { line: 1, .. }), "{e:?}");
    }

    #[test]
    fn uris_and_numbers() {
        assert_eq!(file_uri_path("///a/b%20c").as_deref(), Some("/a/b c"));
        assert_eq!(file_uri_path("//localhost/a").as_deref(), Some("/a"));
        assert_eq!(file_uri_path("/a").as_deref(), Some("/a"));
        assert_eq!(file_uri_path("//host/a"), None);
        assert_eq!(file_uri_path("a"), None);
        assert_eq!(percent_decode("%E6%BC%A2%zz%4").as_deref(), Some("漢%zz%4"));
        assert_eq!(percent_decode("%FF"), None);
        assert!(has_scheme("https://x") && !has_scheme("src/a.js") && !has_scheme("C:/x"));
        assert_eq!((zero_based(0), zero_based(1), zero_based(u64::MAX)), (0, 0, u32::MAX));
        assert_eq!((clamp(-1), clamp(5)), (0, 5));
        // A huge line number clamps instead of failing.
        let f = parsed("a.py:99999999999999999999999: error: far\n");
        assert_eq!(f.diagnostics[0].diagnostic.at.line, u32::MAX);
    }

    /// `rustc --error-format=json m.rs` (rustc 1.95, the explanation cut):
    /// a use after move, its secondary spans, a note with a span and a help
    /// with a machine-applicable suggestion; cargo's `help:` without a span.
    #[test]
    fn rustc_spans_and_children_are_kept() {
        let text = r#"{"$message_type": "diagnostic", "message": "borrow of moved value: `v`", "code": {"code": "E0382", "explanation": "A variable was used after its contents have been moved elsewhere.\n"}, "level": "error", "spans": [{"file_name": "m.rs", "byte_start": 95, "byte_end": 96, "line_start": 7, "line_end": 7, "column_start": 10, "column_end": 11, "is_primary": false, "text": [{"text": "    take(v);", "highlight_start": 10, "highlight_end": 11}], "label": "value moved here", "suggested_replacement": null, "suggestion_applicability": null, "expansion": null}, {"file_name": "m.rs", "byte_start": 118, "byte_end": 119, "line_start": 8, "line_end": 8, "column_start": 20, "column_end": 21, "is_primary": true, "text": [{"text": "    println!(\"{}\", v.len());", "highlight_start": 20, "highlight_end": 21}], "label": "value borrowed here after move", "suggested_replacement": null, "suggestion_applicability": null, "expansion": null}, {"file_name": "m.rs", "byte_start": 67, "byte_end": 68, "line_start": 6, "line_end": 6, "column_start": 9, "column_end": 10, "is_primary": false, "text": [{"text": "    let v = vec![1, 2, 3];", "highlight_start": 9, "highlight_end": 10}], "label": "move occurs because `v` has type `Vec<i32>`, which does not implement the `Copy` trait", "suggested_replacement": null, "suggestion_applicability": null, "expansion": null}], "children": [{"message": "consider changing this parameter type in function `take` to borrow instead if owning the value isn't necessary", "code": null, "level": "note", "spans": [{"file_name": "m.rs", "byte_start": 11, "byte_end": 19, "line_start": 1, "line_end": 1, "column_start": 12, "column_end": 20, "is_primary": true, "text": [{"text": "fn take(v: Vec<i32>) -> usize {", "highlight_start": 12, "highlight_end": 20}], "label": "this parameter takes ownership of the value", "suggested_replacement": null, "suggestion_applicability": null, "expansion": null}, {"file_name": "m.rs", "byte_start": 3, "byte_end": 7, "line_start": 1, "line_end": 1, "column_start": 4, "column_end": 8, "is_primary": false, "text": [{"text": "fn take(v: Vec<i32>) -> usize {", "highlight_start": 4, "highlight_end": 8}], "label": "in this function", "suggested_replacement": null, "suggestion_applicability": null, "expansion": null}], "children": [], "rendered": null}, {"message": "consider cloning the value if the performance cost is acceptable", "code": null, "level": "help", "spans": [{"file_name": "m.rs", "byte_start": 96, "byte_end": 96, "line_start": 7, "line_end": 7, "column_start": 11, "column_end": 11, "is_primary": true, "text": [{"text": "    take(v);", "highlight_start": 11, "highlight_end": 11}], "label": null, "suggested_replacement": ".clone()", "suggestion_applicability": "MachineApplicable", "expansion": null}], "children": [], "rendered": null}, {"message": "the std library is elsewhere", "code": null, "level": "note", "spans": [{"file_name": "/rustc/lib/rustlib/src/rust/library/alloc/src/vec/mod.rs", "byte_start": 1, "byte_end": 2, "line_start": 40, "line_end": 40, "column_start": 1, "column_end": 2, "is_primary": true, "text": [], "label": null, "suggested_replacement": null, "suggestion_applicability": null, "expansion": null}], "children": [], "rendered": null}], "rendered": "error[E0382]: borrow of moved value: `v`\n"}
{"$message_type":"diagnostic","message":"unused variable: `y`","code":{"code":"unused_variables","explanation":null},"level":"warning","spans":[{"file_name":"m.rs","byte_start":1,"byte_end":2,"line_start":2,"line_end":2,"column_start":9,"column_end":10,"is_primary":true,"text":[],"label":null,"suggested_replacement":null,"suggestion_applicability":null,"expansion":null}],"children":[{"message":"`#[warn(unused_variables)]` on by default","code":null,"level":"note","spans":[],"children":[],"rendered":null}],"rendered":""}
"#;
        let f = parsed(text);
        let d = &f.diagnostics[0].diagnostic;
        assert_eq!(d.message, "borrow of moved value: `v`: value borrowed here after move");
        assert_eq!((d.at, d.end), (LineCol::new(7, 19), Some(LineCol::new(7, 20))));
        assert_eq!(d.code_link.as_deref(), Some("https://doc.rust-lang.org/error_codes/E0382.html"));
        let m = Path::new(ROOT).join("m.rs");
        let related = |line, message: &str| Related { path: m.clone(), line, message: message.into() };
        assert_eq!(
            d.related,
            [
                related(6, "value moved here"),
                related(5, "move occurs because `v` has type `Vec<i32>`, which does not implement the `Copy` trait"),
                related(
                    0,
                    "note: consider changing this parameter type in function `take` to borrow instead if owning the value isn't necessary: this parameter takes ownership of the value"
                ),
                related(
                    6,
                    "help: consider cloning the value if the performance cost is acceptable (insert `.clone()` at 7:11)"
                ),
            ],
            "the std library's place, outside the root, is left out"
        );
        assert!(d.notes.is_empty());
        let w = &f.diagnostics[1].diagnostic;
        assert_eq!(w.notes, ["note: `#[warn(unused_variables)]` on by default"]);
        assert_eq!((w.code_link.as_deref(), w.related.len()), (None, 0), "a lint name has no error-index page");
        assert_eq!(
            rustc_code_link("clippy::needless_return").as_deref(),
            Some("https://rust-lang.github.io/rust-clippy/master/index.html#needless_return")
        );
    }

    /// SARIF with a region's end, a rule's `helpUri` and related locations
    /// (one outside the root, left out).
    #[test]
    fn sarif_related_locations_ends_and_rule_links_are_kept() {
        let text = r#"{"version": "2.1.0", "runs": [{
  "tool": {"driver": {"name": "CodeQL", "rules": [{"id": "js/unused", "helpUri": "https://codeql.example/js-unused"}]}},
  "results": [{"ruleId": "js/unused", "level": "warning", "message": {"text": "Unused variable x."},
    "locations": [{"physicalLocation": {"artifactLocation": {"uri": "src/a.js"}, "region": {"startLine": 3, "startColumn": 7, "endColumn": 8}}}],
    "relatedLocations": [
      {"id": 1, "physicalLocation": {"artifactLocation": {"uri": "src/b.js"}, "region": {"startLine": 9, "startColumn": 1}}, "message": {"text": "x is declared again here"}},
      {"id": 2, "physicalLocation": {"artifactLocation": {"uri": "/etc/x.js"}, "region": {"startLine": 1}}, "message": {"text": "outside"}},
      {"id": 3, "physicalLocation": {"artifactLocation": {"uri": "src/c.js"}}}]},
   {"ruleIndex": 0, "message": {"text": "by index"}, "locations": [{"physicalLocation": {"artifactLocation": {"uri": "src/a.js"}, "region": {"startLine": 5, "endLine": 6, "endColumn": 2}}}]}]
}]}"#;
        let f = parsed(text);
        let d = &f.diagnostics[0].diagnostic;
        assert_eq!((d.at, d.end), (LineCol::new(2, 6), Some(LineCol::new(2, 7))));
        assert_eq!(d.code_link.as_deref(), Some("https://codeql.example/js-unused"));
        assert_eq!(
            d.related,
            [Related { path: Path::new(ROOT).join("src/b.js"), line: 8, message: "x is declared again here".into() }]
        );
        let by_index = &f.diagnostics[1].diagnostic;
        assert_eq!(by_index.end, Some(LineCol::new(5, 1)));
        assert_eq!(by_index.code_link.as_deref(), Some("https://codeql.example/js-unused"));
    }

    /// pyright's UTF-16 columns become characters: past an emoji (two
    /// units) and CJK (one), on a CRLF line, on the last line of a file
    /// without a final newline, clamped past the line's end; a line past
    /// the end and a file that cannot be read keep the column as given.
    /// Each file is asked for once.
    #[test]
    fn pyright_columns_are_utf16_units_turned_into_characters() {
        let d = |file: &str, (l0, c0): (u32, u32), (l1, c1): (u32, u32)| {
            json!({"file": format!("{ROOT}/{file}"), "severity": "error", "message": "m",
                   "range": {"start": {"line": l0, "character": c0}, "end": {"line": l1, "character": c1}}})
        };
        let report = json!({"generalDiagnostics": [
            d("a.py", (0, 20), (0, 23)),
            d("b.py", (1, 6), (1, 7)),
            d("a.py", (0, 8), (0, 99)),
            d("a.py", (9, 20), (9, 21)),
            d("gone.py", (0, 20), (0, 23)),
            d("a.py", (1, 4), (1, 5)),
        ]});
        let (f, asked) = parsed_with_files(&report.to_string());
        let at = LineCol::new;
        assert_eq!(
            places(&f),
            [
                (at(0, 19), Some(at(0, 22))),
                (at(1, 5), Some(at(1, 6))),
                (at(0, 7), Some(at(0, 22))),
                (at(9, 20), Some(at(9, 21))),
                (at(0, 20), Some(at(0, 23))),
                (at(1, 4), Some(at(1, 5))),
            ]
        );
        assert_eq!(asked, files(&["a.py", "b.py", "gone.py"]));
    }

    /// SARIF's columns, 1-based, in the run's `columnKind`: UTF-16 units
    /// when it is absent, characters for `unicodeCodePoints`; the same
    /// place written both ways comes out the same.
    #[test]
    fn sarif_columns_follow_the_runs_column_kind() {
        let result = |file: &str, line: u32, from: u32, to: u32| {
            json!({"message": {"text": "m"}, "locations": [{"physicalLocation": {
                "artifactLocation": {"uri": file}, "region": {"startLine": line, "startColumn": from, "endColumn": to}}}]})
        };
        let log = json!({"version": "2.1.0", "runs": [
            {"tool": {"driver": {"name": "utf16"}},
             "results": [result("a.py", 1, 21, 24), result("b.py", 2, 7, 8), result("gone.py", 1, 21, 24)]},
            {"tool": {"driver": {"name": "points"}}, "columnKind": "unicodeCodePoints",
             "results": [result("a.py", 1, 20, 23), result("b.py", 2, 6, 7)]},
            {"tool": {"driver": {"name": "utf16, said"}}, "columnKind": "utf16CodeUnits",
             "results": [result("b.py", 2, 7, 8)]},
        ]});
        let (f, asked) = parsed_with_files(&serde_json::to_string_pretty(&log).unwrap());
        let at = LineCol::new;
        let (a, b) = ((at(0, 19), Some(at(0, 22))), (at(1, 5), Some(at(1, 6))));
        let sources: Vec<_> = f.diagnostics.iter().map(|l| l.diagnostic.source.as_deref().unwrap()).collect();
        assert_eq!(sources, ["utf16", "utf16", "utf16", "points", "points", "utf16, said"]);
        assert_eq!(places(&f), [a, b, (at(0, 20), Some(at(0, 23))), a, b, b]);
        assert_eq!(asked, files(&["a.py", "b.py", "gone.py"]), "a run in characters asks for no text");
    }

    /// mypy's 0-based columns are UTF-8 bytes.
    #[test]
    fn mypy_columns_are_bytes_turned_into_characters() {
        let line = |file: &str, line: i64, column: i64| {
            json!({"file": file, "line": line, "column": column, "message": "m", "hint": null, "code": null,
                   "severity": "error"})
            .to_string()
        };
        let text = [line("a.py", 1, 24), line("b.py", 2, 10), line("b.py", 2, 2), line("gone.py", 1, 24)].join("\n");
        let (f, asked) = parsed_with_files(&text);
        let at = LineCol::new;
        // Byte 2 is inside `漢`: its start.
        assert_eq!(places(&f), [(at(0, 19), None), (at(1, 5), None), (at(1, 0), None), (at(0, 24), None)]);
        assert_eq!(asked, files(&["a.py", "b.py", "gone.py"]));
    }

    /// rustc's columns and plain text's are characters already: kept, and
    /// no file is asked for.
    #[test]
    fn rustc_and_plain_columns_are_characters_and_read_nothing() {
        let (f, asked) = parsed_with_files("a.py:1:20: error: x\r\nb.py:2:6: warning: y\r\n");
        assert_eq!(places(&f), [(LineCol::new(0, 19), None), (LineCol::new(1, 5), None)]);
        let span = json!({"file_name": "b.py", "line_start": 2, "line_end": 2, "column_start": 6, "column_end": 7,
                          "is_primary": true, "label": null});
        let rustc = json!({"message": "m", "level": "error", "spans": [span], "children": []});
        let (g, more) = parsed_with_files(&rustc.to_string());
        assert_eq!(places(&g), [(LineCol::new(1, 5), Some(LineCol::new(1, 6)))]);
        assert!(asked.is_empty() && more.is_empty(), "{asked:?} {more:?}");
    }
}
