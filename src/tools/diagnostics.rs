//! `diagnostics`: the current errors and warnings of the run's view of the
//! files, from the language servers, merged with those the editor sent with
//! the code action.

use std::collections::BTreeSet;
use std::path::PathBuf;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Tool, ToolContext, ToolError, clip};
use crate::diagnostic::Diagnostic;

/// Diagnostics shown at most.
const MAX_DIAGNOSTICS: usize = 200;

/// Input of `diagnostics`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct DiagnosticsInput {
    /// A file, relative to the workspace root (default: the file being fixed and every file you changed).
    #[serde(default)]
    pub path: Option<String>,
}

pub struct Diagnostics;

/// `path:line:col: severity: message [source code]`.
pub fn render(shown: &str, d: &Diagnostic) -> String {
    let tag: Vec<&str> = [d.source.as_deref(), d.code.as_deref()].into_iter().flatten().collect();
    let tag = if tag.is_empty() { String::new() } else { format!(" [{}]", tag.join(" ")) };
    format!(
        "{shown}:{}:{}: {}: {}{tag}",
        d.at.line_number(),
        d.at.column_number(),
        d.shown_severity(),
        clip(&d.message.replace('\n', " "), 400)
    )
}

#[async_trait]
impl Tool for Diagnostics {
    type Input = DiagnosticsInput;
    const NAME: &'static str = "diagnostics";
    const DESCRIPTION: &'static str = "Current errors and warnings from the language servers for your view of the files (your edits included), plus those the editor reported. Use it to check your changes.";

    async fn run(&self, input: DiagnosticsInput, ctx: &ToolContext) -> Result<String, ToolError> {
        let files: Vec<PathBuf> = match &input.path {
            Some(p) => vec![ctx.overlay.resolve(p)?],
            None => {
                let mut set: BTreeSet<PathBuf> = ctx.overlay.changes().into_iter().map(|c| c.path).collect();
                set.insert(ctx.target.clone());
                set.into_iter().collect()
            }
        };
        let ws = ctx.overlay.workspace();
        let mut lines = Vec::new();
        let mut notes = Vec::new();
        for file in files {
            let shown = ws.display(&file);
            let text = ctx.overlay.read(&file)?;
            let mut found: Vec<Diagnostic> = Vec::new();
            match &ctx.symbols {
                Some(s) => match s.diagnostics(&file, &text).await {
                    Ok(d) => found.extend(d),
                    Err(e) => notes.push(format!("{shown}: {e}")),
                },
                None => notes.push(format!("{shown}: no language server in this session")),
            }
            // The editor's own diagnostics, for the file being fixed, as of the code action.
            if file == ctx.target {
                for p in &ctx.editor_diagnostics {
                    if !found.iter().any(|d| d.at.line == p.at.line && d.message == p.message) {
                        found.push(p.clone());
                    }
                }
            }
            found.sort_by_key(|d| d.at);
            lines.extend(found.iter().map(|d| render(&shown, d)));
        }
        let mut out = if lines.is_empty() { "No diagnostics.\n".to_string() } else { String::new() };
        let total = lines.len();
        for l in lines.into_iter().take(MAX_DIAGNOSTICS) {
            out.push_str(&l);
            out.push('\n');
        }
        if total > MAX_DIAGNOSTICS {
            out.push_str(&format!("[{MAX_DIAGNOSTICS} of {total} diagnostics shown]\n"));
        }
        for n in notes {
            out.push_str(&format!("({n})\n"));
        }
        Ok(out)
    }
}
