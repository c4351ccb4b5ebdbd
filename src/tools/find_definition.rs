//! `find_definition`: go to the definition of a symbol, as the language server resolves it (across files).

use async_trait::async_trait;

use super::symbol_support::{self, LocationQuery, SymbolAt};
use super::{Tool, ToolContext, ToolError};

pub struct FindDefinition;

#[async_trait]
impl Tool for FindDefinition {
    type Input = SymbolAt;
    const NAME: &'static str = "find_definition";
    const DESCRIPTION: &'static str = "Go to the definition of a symbol, as the language server resolves it (across files). Name the symbol by its text on a 1-based line; add occurrence when it appears several times on that line.";

    async fn run(&self, input: SymbolAt, ctx: &ToolContext) -> Result<String, ToolError> {
        symbol_support::locations(ctx, &input, LocationQuery::Definition).await
    }
}
