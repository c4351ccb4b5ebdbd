//! The one diagnostic type: what the editor sent with the code action
//! (`lsp::convert`) and what downstream language servers report
//! (`downstream`) are both a `Diagnostic`, with a 0-based `LineCol` and a
//! `Severity`. It lives below both, and below `tools` and `fix`, so that the
//! loop's side never needs LSP types to hold one. Its texts (`Severity::name`,
//! 1-based numbers) are made where the model reads them, by
//! `tools::diagnostic_text`: for `fix::task_prompt`, the `diagnostics` tool
//! and the feedback after edits.
//!
//! Its parts:
//! the one diagnostic type: `Diagnostic` (start and end `LineCol` in
//! characters, `Option<Severity>`, message, source, code and its
//! documentation link, the `Related` places and the notes without a place;
//! `span`, its range when it has a sound one)
//! and `Severity { Error, Warning, Information, Hint }` with its names
//! (`error`, `warning`, `info`, `hint`).
//! Below `downstream` (which decodes servers' diagnostics into it) and
//! `tools`/`fix` (which render it 1-based for the model: the first message,
//! the `diagnostics` tool, the feedback after edits), so the loop's side
//! never sees LSP types; `lsp::convert` makes the editor's diagnostics into
//! it, `cli::failures` those of `--diagnostics` input.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use crate::position::{LineCol, Span};

/// How bad a diagnostic is (LSP's `DiagnosticSeverity`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Severity {
    Error,
    Warning,
    Information,
    Hint,
}

impl Severity {
    /// The word the model and the transcript read: `error`, `warning`,
    /// `info`, `hint`.
    pub fn name(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Information => "info",
            Severity::Hint => "hint",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A word that is not one of `Severity::name`'s.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown severity `{0}`")]
pub struct UnknownSeverity(pub String);

impl FromStr for Severity {
    type Err = UnknownSeverity;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "error" => Ok(Severity::Error),
            "warning" => Ok(Severity::Warning),
            "info" => Ok(Severity::Information),
            "hint" => Ok(Severity::Hint),
            _ => Err(UnknownSeverity(s.to_string())),
        }
    }
}

/// A problem in a file: where it starts and ends (0-based lines, columns in
/// characters of the line, as the model counts them: each producer turns its
/// own unit into characters where it knows the text), what it says, and
/// what comes with it. Build one with `..Default::default()` for the parts
/// a producer does not have.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Diagnostic {
    pub at: LineCol,
    /// Where it ends (exclusive, as an LSP range); `None` when the producer
    /// gave only a start (plain `path:line:col` text, mypy).
    pub end: Option<LineCol>,
    /// `None` when the sender left it out (LSP leaves its meaning to the client).
    pub severity: Option<Severity>,
    pub message: String,
    pub source: Option<String>,
    pub code: Option<String>,
    /// The documentation of the code (LSP's `codeDescription.href`, a SARIF
    /// rule's `helpUri`, rustc's error index).
    pub code_link: Option<String>,
    /// Other places that bear on it: where the conflicting definition is,
    /// the other side of a mismatch (LSP's `relatedInformation`, rustc's
    /// secondary spans and children with a span, SARIF's `relatedLocations`).
    pub related: Vec<Related>,
    /// What comes with it without a place (rustc's `help:` and `note:`
    /// children without a span), each with its word: `help: consider …`.
    pub notes: Vec<String>,
}

/// A place related to a diagnostic, and what it says there.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Related {
    /// Absolute, as its producer named it (not yet confined: the first
    /// message reads it through the run's view, which refuses what is
    /// outside the workspace or protected).
    pub path: PathBuf,
    /// 0-based.
    pub line: u32,
    pub message: String,
}

impl Diagnostic {
    /// The severity as the tools show it: one left out counts as an error.
    pub fn shown_severity(&self) -> Severity {
        self.severity.unwrap_or(Severity::Error)
    }

    /// Where it is, start to end; `None` without an end, or with one
    /// before the start (it came from the wire).
    pub fn span(&self) -> Option<Span> {
        self.end.filter(|end| *end >= self.at).map(|end| Span::new(self.at, end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn severity_names_round_trip() {
        for s in [Severity::Error, Severity::Warning, Severity::Information, Severity::Hint] {
            assert_eq!(s.name().parse::<Severity>(), Ok(s));
            assert_eq!(s.to_string(), s.name());
        }
        assert_eq!("information".parse::<Severity>(), Err(UnknownSeverity("information".into())));
        let d = Diagnostic { message: "m".into(), ..Default::default() };
        assert_eq!(d.shown_severity(), Severity::Error);
    }

    #[test]
    fn a_span_needs_an_end_at_or_after_the_start() {
        let at = LineCol::new(2, 4);
        let d = |end| Diagnostic { at, end, ..Default::default() };
        assert_eq!(d(None).span(), None);
        assert_eq!(d(Some(LineCol::new(2, 3))).span(), None);
        assert_eq!(d(Some(at)).span(), Some(Span::new(at, at)));
        assert_eq!(d(Some(LineCol::new(3, 0))).span(), Some(Span::new(at, LineCol::new(3, 0))));
    }
}
