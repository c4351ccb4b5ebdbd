//! One MCP tool in a run (`McpTool`, an `ExternalTool` named
//! `mcp__<server>__<tool>`): approved as its annotations and the server's
//! `autoApprove` say, called within the server's timeout, its result
//! rendered as text ([`render`]) and `isError` made a tool error.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock};
use serde_json::Value;

use super::{Server, ServerTool};
use crate::model::ToolSpec;
use crate::tools::{Approval, Approver, ExternalTool, ToolError};

/// One MCP tool in a run.
pub(super) struct McpTool {
    pub server: Arc<Server>,
    pub tool: ServerTool,
    /// `mcp__<server>__<tool>`.
    pub name: String,
    pub approver: Option<Arc<dyn Approver>>,
    /// Approved with "Always" in this run.
    pub always: Mutex<bool>,
}

impl McpTool {
    /// Whether the call may go ahead, asking when it must.
    async fn allowed(&self, input: &Value) -> Result<(), ToolError> {
        let auto = self.server.config.auto_approve.contains(&self.tool.name);
        if self.tool.read_only || auto || *self.always.lock().unwrap_or_else(|e| e.into_inner()) {
            return Ok(());
        }
        let Some(approver) = &self.approver else {
            return Err(ToolError::Respond(format!(
                "`{}` needs the user's approval, and no one can give it here",
                self.name
            )));
        };
        match approver.approve_tool(&self.name, &input.to_string()).await {
            Approval::Once => Ok(()),
            Approval::Always => {
                *self.always.lock().unwrap_or_else(|e| e.into_inner()) = true;
                Ok(())
            }
            Approval::Deny => Err(ToolError::Respond(format!("the user denied calling `{}`", self.name))),
        }
    }
}

#[async_trait]
impl ExternalTool for McpTool {
    fn spec(&self) -> ToolSpec {
        let what = if self.tool.description.is_empty() { "(no description)" } else { &self.tool.description };
        ToolSpec {
            name: self.name.clone(),
            description: format!("[MCP server `{}`, tool `{}`] {what}", self.server.name(), self.tool.name),
            input_schema: self.tool.input_schema.clone(),
        }
    }

    async fn call(&self, input: &Value) -> Result<String, ToolError> {
        self.allowed(input).await?;
        let mut params = CallToolRequestParams::new(self.tool.name.clone());
        if let Value::Object(args) = input {
            params = params.with_arguments(args.clone());
        }
        let what = format!("the call of `{}`", self.tool.name);
        let result = self
            .server
            .request(&what, move |client| async move { client.call_tool(params).await })
            .await
            .map_err(ToolError::Respond)?;
        let text = self.server.scrub(render(&result));
        if result.is_error == Some(true) { Err(ToolError::Respond(text)) } else { Ok(text) }
    }
}

/// A tool result as text: text content as is, other content summarized,
/// structured content as JSON when there is nothing else.
pub fn render(result: &CallToolResult) -> String {
    let mut parts: Vec<String> = result
        .content
        .iter()
        .map(|block| match block {
            ContentBlock::Text(t) => t.text.clone(),
            ContentBlock::Image(i) => {
                format!("[image content ({}), {} bytes of base64, not shown]", i.mime_type, i.data.len())
            }
            ContentBlock::Audio(a) => {
                format!("[audio content ({}), {} bytes of base64, not shown]", a.mime_type, a.data.len())
            }
            ContentBlock::Resource(r) => super::resources::render_contents(&r.resource),
            ContentBlock::ResourceLink(l) => format!("[resource link: {} ({})]", l.uri, l.name),
            _ => "[content of an unknown kind, not shown]".to_string(),
        })
        .collect();
    if parts.is_empty()
        && let Some(s) = &result.structured_content
    {
        parts.push(s.to_string());
    }
    if parts.is_empty() { "(the tool returned nothing)".to_string() } else { parts.join("\n") }
}
