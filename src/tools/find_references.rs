//! `find_references`: find every reference to a symbol across the workspace, as the language server resolves it.

use async_trait::async_trait;

use super::symbol_support::{self, LocationQuery, SymbolAt};
use super::{Tool, ToolContext, ToolError};

pub struct FindReferences;

#[async_trait]
impl Tool for FindReferences {
    type Input = SymbolAt;
    const NAME: &'static str = "find_references";
    const DESCRIPTION: &'static str = "Find every reference to a symbol across the workspace, as the language server resolves it. Name the symbol by its text on a 1-based line; add occurrence when it appears several times on that line. 50 results per page.";
    const MORE: &'static str = "narrow it to one file with grep";

    async fn run(&self, input: SymbolAt, ctx: &ToolContext) -> Result<String, ToolError> {
        symbol_support::locations(ctx, &input, LocationQuery::References).await
    }
}
