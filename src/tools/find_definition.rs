//! `find_definition`: go to the definition of a symbol, as the language server resolves it (across files).

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Tool, ToolContext, ToolError, symbol_support};

/// Input of `find_definition`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct FindDefinitionInput {
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

pub struct FindDefinition;

#[async_trait]
impl Tool for FindDefinition {
    type Input = FindDefinitionInput;
    const NAME: &'static str = "find_definition";
    const DESCRIPTION: &'static str = "Go to the definition of a symbol, as the language server resolves it (across files). Name the symbol by its text on a 1-based line; add occurrence when it appears several times on that line.";

    async fn run(&self, input: FindDefinitionInput, ctx: &ToolContext) -> Result<String, ToolError> {
        let (abs, text, shown, line_text) = symbol_support::line_of(ctx, &input.path, input.line)?;
        let (column, note) =
            symbol_support::find_column(&line_text, &input.symbol, input.occurrence, &shown, input.line)?;
        let source = symbol_support::source(ctx)?;
        let found =
            source.definition(&abs, &text, (input.line - 1) as u32, column).await.map_err(ToolError::Respond)?;
        let mut out = format!("Definitions of `{}` ({shown}:{}){note}:\n", input.symbol, input.line);
        out.push_str(&symbol_support::render_locations(ctx, &found, input.page, "definitions"));
        Ok(out)
    }
}
