//! `hover`: what the language server knows about a symbol (type, signature,
//! documentation).

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Tool, ToolContext, ToolError, clip, symbol_support};

/// Input of `hover`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct HoverInput {
    /// Path of the file where the symbol appears, relative to the workspace root.
    pub path: String,
    /// The 1-based line where the symbol appears.
    pub line: u64,
    /// The symbol's text as it appears on that line.
    pub symbol: String,
    /// Which occurrence on the line, 1-based, when the symbol appears several times (default 1).
    #[serde(default)]
    pub occurrence: Option<u32>,
}

pub struct Hover;

#[async_trait]
impl Tool for Hover {
    type Input = HoverInput;
    const NAME: &'static str = "hover";
    const DESCRIPTION: &'static str = "The type, signature and documentation of a symbol, from the language server. Name the symbol by its text on a 1-based line.";

    async fn run(&self, input: HoverInput, ctx: &ToolContext) -> Result<String, ToolError> {
        let (abs, text, shown, line_text) = symbol_support::line_of(ctx, &input.path, input.line)?;
        let (column, note) =
            symbol_support::find_column(&line_text, &input.symbol, input.occurrence, &shown, input.line)?;
        let info = symbol_support::source(ctx)?
            .hover(&abs, &text, (input.line - 1) as u32, column)
            .await
            .map_err(|e| ToolError::Respond(e.to_string()))?;
        Ok(match info {
            Some(t) => format!("`{}` ({shown}:{}){note}:\n{}\n", input.symbol, input.line, clip(t.trim(), 4000)),
            None => {
                format!("The language server has no information about `{}` at {shown}:{}.", input.symbol, input.line)
            }
        })
    }
}
