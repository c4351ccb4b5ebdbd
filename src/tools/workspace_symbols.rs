//! `workspace_symbols`: find symbols (classes, functions, variables, …) by name across the workspace, from the language server of the file being fixed. Prints kind, name and `path:line: source line`.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Tool, ToolContext, ToolError, symbol_support};

/// Input of `workspace_symbols`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WorkspaceSymbolsInput {
    /// Name or part of a name to look for, e.g. `parse_config`.
    pub query: String,
    /// Page of results, 1-based (50 per page).
    #[serde(default)]
    pub page: Option<u32>,
}

pub struct WorkspaceSymbols;

#[async_trait]
impl Tool for WorkspaceSymbols {
    type Input = WorkspaceSymbolsInput;
    const NAME: &'static str = "workspace_symbols";
    const DESCRIPTION: &'static str = "Find symbols (classes, functions, variables, …) by name across the workspace, from the language server of the file being fixed. Prints kind, name and `path:line: source line`.";
    const MORE: &'static str = "use a more specific query";

    async fn run(&self, input: WorkspaceSymbolsInput, ctx: &ToolContext) -> Result<String, ToolError> {
        let symbols = symbol_support::source(ctx)?
            .workspace_symbols(&ctx.target, &input.query)
            .await
            .map_err(|e| ToolError::Respond(e.to_string()))?;
        Ok(symbol_support::render_locations(ctx, &symbols, input.page, "symbols"))
    }
}
