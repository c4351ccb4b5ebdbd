//! `document_symbols`: the outline of a file from its language server: each symbol's kind, name and line range, nested as in the code.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Tool, ToolContext, ToolError, symbol_support};
use crate::downstream::Symbol;

/// Input of `document_symbols`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct DocumentSymbolsInput {
    /// Path of the file, relative to the workspace root.
    pub path: String,
}

pub struct DocumentSymbols;

#[async_trait]
impl Tool for DocumentSymbols {
    type Input = DocumentSymbolsInput;
    const NAME: &'static str = "document_symbols";
    const DESCRIPTION: &'static str = "The outline of a file from its language server: each symbol's kind, name and line range, nested as in the code.";
    const MORE: &'static str = "use workspace_symbols with a query, or read_file a range";

    async fn run(&self, input: DocumentSymbolsInput, ctx: &ToolContext) -> Result<String, ToolError> {
        let abs = ctx.overlay.resolve(&input.path)?;
        let text = ctx.overlay.read(&abs)?;
        let shown = ctx.overlay.workspace().display(&abs);
        let symbols = symbol_support::source(ctx)?
            .document_symbols(&abs, &text)
            .await
            .map_err(|e| ToolError::Respond(e.to_string()))?;
        if symbols.is_empty() {
            return Ok(format!("{shown} has no symbols."));
        }
        let mut out = format!("Outline of {shown}:\n");
        let mut count = 0;
        render(&symbols, 0, &mut out, &mut count);
        if count > MAX_SYMBOLS {
            out.push_str(&format!("[outline cut after {MAX_SYMBOLS} of {count} symbols]\n"));
        }
        Ok(out)
    }
}

/// Symbols shown at most.
const MAX_SYMBOLS: usize = 500;

fn render(symbols: &[Symbol], depth: usize, out: &mut String, count: &mut usize) {
    for s in symbols {
        *count += 1;
        if *count <= MAX_SYMBOLS {
            let (first, last) = s.lines.numbers();
            out.push_str(&format!("{}{} {} (lines {first}-{last})\n", "  ".repeat(depth), s.kind, s.name));
        }
        render(&s.children, depth + 1, out, count);
    }
}
