//! `find_references`: find every reference to a symbol across the workspace, as the language server resolves it.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Tool, ToolContext, ToolError, symbol_support};

/// Input of `find_references`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct FindReferencesInput {
    /// Path of the file where the symbol appears, relative to the workspace root.
    pub path: String,
    /// The 1-based line where the symbol appears.
    pub line: u64,
    /// The symbol's text as it appears on that line, e.g. `compute_total`.
    pub symbol: String,
    /// Which occurrence on the line, 1-based, when the symbol appears several times (default 1).
    #[serde(default)]
    pub occurrence: Option<u32>,
    /// Page of results, 1-based (50 per page).
    #[serde(default)]
    pub page: Option<u32>,
}

pub struct FindReferences;

#[async_trait]
impl Tool for FindReferences {
    type Input = FindReferencesInput;
    const NAME: &'static str = "find_references";
    const DESCRIPTION: &'static str = "Find every reference to a symbol across the workspace, as the language server resolves it. Name the symbol by its text on a 1-based line; add occurrence when it appears several times on that line. 50 results per page.";

    async fn run(&self, input: FindReferencesInput, ctx: &ToolContext) -> Result<String, ToolError> {
        let (abs, text, shown, line_text) = symbol_support::line_of(ctx, &input.path, input.line)?;
        let (column, note) =
            symbol_support::find_column(&line_text, &input.symbol, input.occurrence, &shown, input.line)?;
        let source = symbol_support::source(ctx)?;
        let found =
            source.references(&abs, &text, (input.line - 1) as u32, column).await.map_err(ToolError::Respond)?;
        let mut out = format!("References of `{}` ({shown}:{}){note}:\n", input.symbol, input.line);
        out.push_str(&symbol_support::render_locations(ctx, &found, input.page, "references"));
        Ok(out)
    }
}
