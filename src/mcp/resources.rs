//! A server's resources as two read-only tools, for a server whose
//! capabilities include `resources`: `mcp__<server>__list_resources` (one
//! page of `resources/list`, with the cursor of the next) and
//! `mcp__<server>__read_resource` (`resources/read` of one uri: text as
//! is, binary blobs described, never dumped). Reading is what resources
//! are for, so they run without asking, as tools marked read-only do; the
//! registry caps their output like every tool's.

use std::sync::Arc;

use async_trait::async_trait;
use rmcp::model::{PaginatedRequestParams, ReadResourceRequestParams, ResourceContents};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::Server;
use crate::model::ToolSpec;
use crate::tools::{ExternalTool, ToolError};

/// The input of `list_resources`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(default)]
pub struct ListInput {
    /// The cursor a previous listing ended with, for the next page; omit it for the first.
    pub cursor: Option<String>,
}

/// The input of `read_resource`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReadInput {
    /// The resource's URI, as the listing gives it.
    pub uri: String,
}

/// `mcp__<server>__list_resources`.
pub(super) struct ListResources {
    pub server: Arc<Server>,
    pub name: String,
    /// The name of the server's `read_resource` tool, for the listing's note.
    pub read: String,
}

/// `mcp__<server>__read_resource`.
pub(super) struct ReadResource {
    pub server: Arc<Server>,
    pub name: String,
}

fn schema<T: JsonSchema>() -> Value {
    crate::tools::input_schema::<T>()
}

fn input<T: for<'de> Deserialize<'de>>(tool: &str, input: &Value) -> Result<T, ToolError> {
    serde_json::from_value(input.clone()).map_err(|e| ToolError::Respond(format!("invalid input for `{tool}`: {e}")))
}

#[async_trait]
impl ExternalTool for ListResources {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.clone(),
            description: format!(
                "[MCP server `{}`] Lists the resources the server offers (data it can give, read with `{}`): each one's URI, name, MIME type and description, one page at a time.",
                self.server.name(),
                self.read
            ),
            input_schema: schema::<ListInput>(),
        }
    }

    async fn call(&self, input_: &Value) -> Result<String, ToolError> {
        let ListInput { cursor } = input(&self.name, input_)?;
        let params = PaginatedRequestParams::default().with_cursor(cursor);
        let page = self
            .server
            .request("the listing of its resources", move |c| async move { c.list_resources(Some(params)).await })
            .await
            .map_err(ToolError::Respond)?;
        let server = self.server.name();
        if page.resources.is_empty() && page.next_cursor.is_none() {
            return Ok(format!("MCP server `{server}` lists no resources."));
        }
        let mut out = vec![format!("Resources of MCP server `{server}` (read one with `{}`):", self.read)];
        for r in &page.resources {
            let mut line = format!("- {} — {}", r.uri, r.title.as_deref().unwrap_or(&r.name));
            if let Some(mime) = &r.mime_type {
                line.push_str(&format!(" ({mime})"));
            }
            if let Some(d) = r.description.as_deref().filter(|d| !d.is_empty()) {
                line.push_str(&format!(": {d}"));
            }
            out.push(line);
        }
        if let Some(next) = &page.next_cursor {
            out.push(format!("More: call `{}` with {{\"cursor\": {}}}.", self.name, Value::String(next.clone())));
        }
        Ok(self.server.scrub(out.join("\n")))
    }
}

#[async_trait]
impl ExternalTool for ReadResource {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.clone(),
            description: format!(
                "[MCP server `{}`] Reads one resource of the server by its URI: its text (binary content is described, not shown).",
                self.server.name()
            ),
            input_schema: schema::<ReadInput>(),
        }
    }

    async fn call(&self, input_: &Value) -> Result<String, ToolError> {
        let ReadInput { uri } = input(&self.name, input_)?;
        let what = format!("the read of `{uri}`");
        let params = ReadResourceRequestParams::new(uri.clone());
        let read = self
            .server
            .request(&what, move |c| async move { c.read_resource(params).await })
            .await
            .map_err(ToolError::Respond)?;
        if read.contents.is_empty() {
            return Ok(format!("[resource {uri}: empty]"));
        }
        let parts: Vec<String> = read.contents.iter().map(render_contents).collect();
        Ok(self.server.scrub(parts.join("\n")))
    }
}

/// One resource's contents as text: the text under a line naming it,
/// binary content described by its type and size.
pub(super) fn render_contents(contents: &ResourceContents) -> String {
    match contents {
        ResourceContents::TextResourceContents { uri, mime_type, text, .. } => {
            format!("[resource {uri}{}]\n{text}", mime(mime_type))
        }
        ResourceContents::BlobResourceContents { uri, mime_type, blob, .. } => {
            let padding = blob.bytes().rev().take_while(|b| *b == b'=').count();
            let bytes = (blob.len() / 4 * 3).saturating_sub(padding);
            format!("[binary resource {uri}{}, {bytes} bytes, not shown]", mime(mime_type))
        }
        _ => "[resource of an unknown kind, not shown]".to_string(),
    }
}

fn mime(mime_type: &Option<String>) -> String {
    mime_type.as_deref().map(|m| format!(" ({m})")).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_shown_under_its_uri_and_blobs_are_described() {
        let text = ResourceContents::TextResourceContents {
            uri: "test://a".into(),
            mime_type: Some("text/plain".into()),
            text: "hello".into(),
            meta: None,
        };
        assert_eq!(render_contents(&text), "[resource test://a (text/plain)]\nhello");
        let blob = ResourceContents::BlobResourceContents {
            uri: "test://b".into(),
            mime_type: None,
            blob: "aGVsbG8=".into(),
            meta: None,
        };
        assert_eq!(render_contents(&blob), "[binary resource test://b, 5 bytes, not shown]");
    }
}
