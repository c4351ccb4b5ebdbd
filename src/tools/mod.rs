//! The tools the model can call. Each tool is one file: a typed input that
//! derives `JsonSchema` (its doc comments are what the model reads), a
//! `run` that computes the result over the run's [`ToolContext`], and text
//! rendering for the model.
//!
//! [`Toolbox`] is the [`ToolSet`] the agent loop sees: it validates input
//! against the tool's type and turns every failure into a tool error the
//! model can read.
//!
//! Here: the types every tool shares ([`ToolContext`], [`ToolError`],
//! [`ToolOutput`], [`ToolSet`]) and the text helpers. `registry.rs`: the
//! [`Tool`] trait and [`Toolbox`]; `feedback.rs`: diagnostics after edits;
//! `diagnostic_text.rs`: a diagnostic as the model reads it (the tool, the
//! feedback, and the first message's problems in `fix::prompt`);
//! `walk.rs`: the file walk and globs; `test_support.rs`: test contexts.
//!
//! Its parts:
//! `mod.rs` (`ToolContext`, `ToolError`, `ToolOutput`, `ToolSet`),
//! `registry.rs` (`Tool` trait: typed input + `JsonSchema`; `Toolbox`
//! implementing `ToolSet`), one file per tool; symbol tools through
//! `downstream::SymbolSource`; `feedback.rs` (diagnostics after edits),
//! `diagnostic_text.rs` (a diagnostic whole for the model: range, link,
//! related places with their lines, notes, bounded),
//! `walk.rs` (file walk, globs); `ExternalTool` (a tool known only at run
//! time, its JSON input unchecked here: the MCP tools); `process.rs`
//! (`run_command`'s children: spawn, process group or session, capped output,
//! timeout, kill and reap; here rather than in `sandbox` because it runs in a
//! `workspace::Scratch`, which `sandbox` may not use)

mod diagnostic_text;
mod diagnostics;
mod document_symbols;
mod edit_file;
mod feedback;
mod find_definition;
mod find_references;
mod grep;
mod hover;
mod list_files;
mod process;
mod read_file;
mod registry;
mod run_command;
mod symbol_support;
#[cfg(test)]
pub(crate) mod test_support;
mod walk;
mod workspace_symbols;
mod write_file;

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use crate::downstream::SymbolSource;
use crate::model::ToolSpec;
use crate::workspace::{Overlay, OverlayError};

pub use diagnostics::Diagnostics;
pub use document_symbols::DocumentSymbols;
pub use edit_file::EditFile;
pub use find_definition::FindDefinition;
pub use find_references::FindReferences;
pub use grep::Grep;
pub use hover::Hover;
pub use list_files::ListFiles;
pub use read_file::ReadFile;
pub use registry::{ExternalTool, Tool, Toolbox, input_schema};
pub use run_command::{Approval, Approver, CommandRun, CommandSpec, RunCommand, RunCommandInput};
pub use workspace_symbols::WorkspaceSymbols;
pub use write_file::WriteFile;

#[cfg(test)]
pub(crate) use diagnostic_text::cut_marker;
pub(crate) use diagnostic_text::{cap, details, shown_path, span_text, tags};
pub(crate) use feedback::diagnostics_feedback;
pub(crate) use walk::{files_under, glob};

/// What a tool call sees: the run's overlay over buffers and disk, and the
/// language servers when the session has them.
#[derive(Clone)]
pub struct ToolContext {
    pub overlay: Arc<Overlay>,
    /// Symbol knowledge from downstream language servers.
    pub symbols: Option<Arc<dyn SymbolSource>>,
    /// The file being fixed.
    pub target: PathBuf,
    /// The diagnostics the editor sent with the code action (target file).
    pub editor_diagnostics: Vec<crate::diagnostic::Diagnostic>,
}

impl ToolContext {
    /// A context without language servers.
    pub fn plain(overlay: Arc<Overlay>, target: PathBuf) -> Self {
        Self { overlay, symbols: None, target, editor_diagnostics: Vec::new() }
    }
}

/// A failed tool call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// Sent back to the model as a tool result with `is_error: true`.
    #[error("{0}")]
    Respond(String),
    /// Ends the run: something the model cannot fix by trying again.
    #[error("{0}")]
    Fatal(String),
}

impl From<OverlayError> for ToolError {
    fn from(e: OverlayError) -> Self {
        ToolError::Respond(e.to_string())
    }
}

/// The result of one tool call, as the agent loop sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    pub content: String,
    pub is_error: bool,
    /// The run must stop after this call.
    pub fatal: bool,
}

/// The set of tools offered to the model in one run.
#[async_trait]
pub trait ToolSet: Send + Sync {
    fn specs(&self) -> Vec<ToolSpec>;
    async fn call(&self, name: &str, input: &Value) -> ToolOutput;

    /// What the tools hold that the model must not lose when the loop
    /// compacts its context: the files the run changed so far, for the
    /// model to read. `None` when there is nothing.
    fn state(&self) -> Option<String> {
        None
    }

    /// Whether the loop stops before running calls of these tools (the run
    /// then ends `Forked`, the calls not run): best of N forks a run at its
    /// first edit. Never, by default.
    fn stops_before(&self, _names: &[&str]) -> bool {
        false
    }
}

/// Numbers lines for the model: `   12\ttext`.
pub(crate) fn numbered(line_no: usize, text: &str) -> String {
    format!("{line_no:>6}\t{text}")
}

/// The first `max` chars of `s`, with `…` after them when it is longer
/// (a quote in a message; [`clip`] marks a tool's line instead).
pub(crate) fn shortened(s: &str, max: usize) -> String {
    let mut out: String = s.chars().take(max).collect();
    if s.chars().nth(max).is_some() {
        out.push('…');
    }
    out
}

/// Shortens `s` to at most `max` chars, marking the cut.
pub(crate) fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let cut: String = s.chars().take(max).collect();
        format!("{cut}… [line truncated]")
    }
}
