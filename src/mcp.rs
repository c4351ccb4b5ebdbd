//! agentfix as an MCP *client*: the user's stdio tool servers
//! (`mcpServers`), through the official SDK (`rmcp`), their tools offered to
//! the model as `mcp__<server>__<tool>`.
//!
//! [`McpServers`] lives as long as the session (the LSP server, or one CLI
//! command): each server starts at the first run that needs its tool list
//! (a run's tool specs are sent with its first request, so the list is
//! needed then), and the list is cached, so later runs do not wait. A
//! server that exits is started again at its next use, once; after a second
//! exit its tools answer with an error for the rest of the session. A call
//! waits at most the server's `timeoutSecs`, the start and the tool list
//! that too but at least [`MIN_START_TIMEOUT`]; a call that times out is a
//! tool error and the server is kept (a slow tool is no broken server).
//! Servers get an environment built from an allow list, not agentfix's
//! environment minus a deny list: the variables that carry no secret
//! (`secrets::allowed_env`: `PATH`, `HOME`, the locale, the toolchains'),
//! those the user's `envAllow` names, and their own `env`; a credential
//! under a name nobody listed (`SECRET_KEY`, `DATABASE_URL`) stays behind.
//! They run in the workspace root, and are stopped by [`McpServers::stop`]
//! (LSP shutdown/exit, the end of a CLI command).
//!
//! [`McpServers::tools`] hands out [`ExternalTool`]s: tools whose
//! annotations say read-only (`readOnlyHint`), and those the server's
//! `autoApprove` names, run without asking; any other call asks the
//! [`Approver`] (as `run_command` does).
//!
//! Its parts:
//! agentfix as an MCP *client* over the official SDK (`rmcp`, the only module
//! that knows it): `McpServers` (the user's stdio servers from `mcpServers`,
//! per session: started at the first run that needs the tool list, the list
//! cached, started again once after an exit, every request within the
//! server's `timeoutSecs`, a cleared environment with `secrets::allowed_env`
//! and the server's `env`, `stop`), `list()` for `agentfix check`, `tools()`:
//! each tool as a `tools::ExternalTool` named `mcp__<server>__<tool>`
//! (sanitized, ≤ 64 characters), read-only (`readOnlyHint`) and `autoApprove`
//! tools run, others ask the `Approver`; results rendered as text (other
//! content summarized), `isError` a tool error

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock, ResourceContents};
use rmcp::service::{RunningService, ServiceError};
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;

use crate::config::mcp::{McpConfig, McpServerConfig};
use crate::model::ToolSpec;
use crate::tools::{Approval, Approver, ExternalTool, ToolError};

/// Starts after the first, per server and session.
pub const MAX_RESTARTS: u32 = 1;

/// The shortest wait for a server's start and tool list.
pub const MIN_START_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest tool name model APIs accept.
const MAX_NAME: usize = 64;

type Client = RunningService<RoleClient, ()>;

/// One tool as its server lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerTool {
    /// The name on the server.
    pub name: String,
    pub description: String,
    /// JSON Schema of its input, as the server gives it.
    pub input_schema: Value,
    /// `annotations.readOnlyHint` is true.
    pub read_only: bool,
}

/// The MCP servers of a session.
pub struct McpServers {
    config: McpConfig,
    servers: Vec<Arc<Server>>,
}

struct Server {
    config: McpServerConfig,
    cwd: PathBuf,
    /// Variables the server gets beyond the allow list (`envAllow`).
    env_allow: Vec<String>,
    state: tokio::sync::Mutex<State>,
}

#[derive(Default)]
struct State {
    client: Option<Arc<Client>>,
    /// The tool list, once listed.
    tools: Option<Vec<ServerTool>>,
    starts: u32,
    /// The running client was lost (the server exited).
    lost: bool,
    /// Why the server is unavailable for the rest of the session.
    failed: Option<String>,
}

impl McpServers {
    /// The servers of `config`, none started; they run in `cwd`.
    pub fn new(config: &McpConfig, cwd: &Path) -> Self {
        let servers = config
            .servers
            .iter()
            .map(|c| {
                Arc::new(Server {
                    config: c.clone(),
                    cwd: cwd.to_path_buf(),
                    env_allow: config.env_allow.clone(),
                    state: Default::default(),
                })
            })
            .collect();
        Self { config: config.clone(), servers }
    }

    /// The configuration these servers were made from.
    pub fn config(&self) -> &McpConfig {
        &self.config
    }

    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// Every server's tools (starting the servers not yet started, side by
    /// side), or why it has none.
    pub async fn list(&self) -> Vec<(String, Result<Vec<ServerTool>, String>)> {
        let lists = futures::future::join_all(self.servers.iter().map(|s| s.tools())).await;
        self.servers.iter().map(|s| s.config.name.clone()).zip(lists).collect()
    }

    /// The tools to offer the model in one run, named `mcp__<server>__<tool>`
    /// and never clashing with `taken` (the built-in tools); a server that
    /// cannot start is left out (and logged). Calls that need approval ask
    /// `approver`, or are refused without one.
    pub async fn tools(&self, taken: &[String], approver: Option<Arc<dyn Approver>>) -> Vec<Arc<dyn ExternalTool>> {
        let mut names: BTreeSet<String> = taken.iter().cloned().collect();
        let mut out: Vec<Arc<dyn ExternalTool>> = Vec::new();
        for (server, (name, listed)) in self.servers.iter().zip(self.list().await) {
            let tools = match listed {
                Ok(tools) => tools,
                Err(e) => {
                    tracing::warn!(server = %name, "MCP server left out of the run: {e}");
                    continue;
                }
            };
            for tool in tools {
                let full = tool_name(&name, &tool.name);
                if !names.insert(full.clone()) {
                    tracing::warn!(server = %name, tool = %tool.name, "MCP tool left out: `{full}` is taken");
                    continue;
                }
                out.push(Arc::new(McpTool {
                    server: server.clone(),
                    tool,
                    name: full,
                    approver: approver.clone(),
                    always: Mutex::new(false),
                }));
            }
        }
        out
    }

    /// Stops every running server (closes its stdin, then kills it).
    pub async fn stop(&self) {
        futures::future::join_all(self.servers.iter().map(|s| s.stop())).await;
    }
}

/// `mcp__<server>__<tool>`, with every character outside `[a-zA-Z0-9_-]`
/// replaced by `_`; a name past 64 characters is cut and ends with a hash
/// of the whole, so two long names stay apart.
pub fn tool_name(server: &str, tool: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect()
    };
    let name = format!("mcp__{}__{}", clean(server), clean(tool));
    if name.len() <= MAX_NAME {
        return name;
    }
    // FNV-1a over the original names: stable across runs and builds.
    let hash = format!("{server}\0{tool}")
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    format!("{}_{:08x}", &name[..MAX_NAME - 9], hash as u32)
}

impl Server {
    fn name(&self) -> &str {
        &self.config.name
    }

    /// The wait for the start, and for the tool list: the server's timeout,
    /// but never under [`MIN_START_TIMEOUT`] (a cold `npx` start is slow).
    fn start_timeout(&self) -> Duration {
        self.config.timeout.max(MIN_START_TIMEOUT)
    }

    /// The running client, started (or restarted once after an exit) as needed.
    async fn client(&self) -> Result<Arc<Client>, String> {
        let mut state = self.state.lock().await;
        if let Some(why) = &state.failed {
            return Err(why.clone());
        }
        if let Some(c) = &state.client {
            if !c.is_closed() {
                return Ok(c.clone());
            }
            state.client = None;
            state.lost = true;
        }
        if state.lost && state.starts > MAX_RESTARTS {
            let why = format!("MCP server `{}` exited again after a restart; it is not started again", self.name());
            state.failed = Some(why.clone());
            return Err(why);
        }
        if state.lost {
            tracing::warn!(server = self.name(), "MCP server exited; restarting it");
        }
        state.starts += 1;
        state.lost = false;
        match self.start().await {
            Ok(c) => {
                let c = Arc::new(c);
                state.client = Some(c.clone());
                Ok(c)
            }
            Err(why) => {
                state.failed = Some(why.clone());
                Err(why)
            }
        }
    }

    /// Spawns the server with the allowed environment and does the handshake.
    async fn start(&self) -> Result<Client, String> {
        let c = &self.config;
        let mut cmd = tokio::process::Command::new(&c.command);
        // Only the variables known to carry no secret, those `envAllow`
        // names, and the server's own `env` (the user wrote it for this server).
        cmd.env_clear().envs(crate::secrets::allowed_env(&self.env_allow));
        cmd.args(&c.args).envs(&c.env).current_dir(&self.cwd);
        let (transport, _) = TokioChildProcess::builder(cmd)
            .spawn()
            .map_err(|e| format!("cannot start MCP server `{}` (`{}`): {e}", c.name, c.command))?;
        let wait = self.start_timeout();
        match tokio::time::timeout(wait, ().serve(transport)).await {
            Ok(Ok(client)) => {
                tracing::info!(server = %c.name, "MCP server started");
                Ok(client)
            }
            Ok(Err(e)) => Err(format!("MCP server `{}` did not start: {e}", c.name)),
            Err(_) => Err(format!("MCP server `{}` did not start within {} s", c.name, wait.as_secs())),
        }
    }

    /// The server's tools, listed once per session.
    async fn tools(&self) -> Result<Vec<ServerTool>, String> {
        if let Some(tools) = &self.state.lock().await.tools {
            return Ok(tools.clone());
        }
        let client = self.client().await?;
        let listed = match tokio::time::timeout(self.start_timeout(), client.list_all_tools()).await {
            Ok(Ok(tools)) => tools,
            Ok(Err(e)) => return Err(format!("MCP server `{}` did not list its tools: {e}", self.name())),
            Err(_) => {
                return Err(format!(
                    "MCP server `{}` did not list its tools within {} s",
                    self.name(),
                    self.start_timeout().as_secs()
                ));
            }
        };
        let tools: Vec<ServerTool> = listed
            .into_iter()
            .map(|t| {
                let mut schema = Value::Object((*t.input_schema).clone());
                if schema.get("type").is_none() {
                    schema["type"] = "object".into();
                }
                ServerTool {
                    name: t.name.to_string(),
                    description: t.description.as_deref().or(t.title.as_deref()).unwrap_or_default().to_string(),
                    input_schema: schema,
                    read_only: t.annotations.as_ref().and_then(|a| a.read_only_hint) == Some(true),
                }
            })
            .collect();
        self.state.lock().await.tools = Some(tools.clone());
        Ok(tools)
    }

    /// Calls `tool` once, within the server's timeout.
    async fn call(&self, tool: &str, input: &Value) -> Result<CallToolResult, String> {
        let client = self.client().await?;
        let mut params = CallToolRequestParams::new(tool.to_string());
        if let Value::Object(args) = input {
            params = params.with_arguments(args.clone());
        }
        match tokio::time::timeout(self.config.timeout, client.call_tool(params)).await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(ServiceError::McpError(e))) => Err(format!("MCP server `{}` refused the call: {e}", self.name())),
            Ok(Err(e)) => {
                self.lose(&client).await;
                Err(format!(
                    "MCP server `{}` failed during the call ({e}); it is started again at its next use, once",
                    self.name()
                ))
            }
            Err(_) => Err(format!(
                "the MCP tool `{tool}` did not answer within {} s (the server's timeoutSecs); the call was abandoned",
                self.config.timeout.as_secs()
            )),
        }
    }

    /// Forgets `client` (its server exited or its transport broke).
    async fn lose(&self, client: &Arc<Client>) {
        let mut state = self.state.lock().await;
        if state.client.as_ref().is_some_and(|c| Arc::ptr_eq(c, client)) {
            state.client = None;
            state.lost = true;
        }
        client.cancellation_token().cancel();
    }

    async fn stop(&self) {
        let Some(client) = self.state.lock().await.client.take() else { return };
        // Cancelling ends the service, which drops the transport: the
        // server's stdin closes and the child is killed.
        client.cancellation_token().cancel();
        for _ in 0..50 {
            if client.is_closed() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // Lets the transport's kill task run before the runtime ends.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One MCP tool in a run.
struct McpTool {
    server: Arc<Server>,
    tool: ServerTool,
    /// `mcp__<server>__<tool>`.
    name: String,
    approver: Option<Arc<dyn Approver>>,
    /// Approved with "Always" in this run.
    always: Mutex<bool>,
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
        let result = self.server.call(&self.tool.name, input).await.map_err(ToolError::Respond)?;
        let text = render(&result);
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
            ContentBlock::Resource(r) => match &r.resource {
                ResourceContents::TextResourceContents { uri, text, .. } => format!("[resource {uri}]\n{text}"),
                ResourceContents::BlobResourceContents { uri, blob, .. } => {
                    format!("[binary resource {uri}, {} bytes of base64, not shown]", blob.len())
                }
                _ => "[resource of an unknown kind, not shown]".to_string(),
            },
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_namespaced_sanitized_and_at_most_64_characters() {
        assert_eq!(tool_name("github", "search_issues"), "mcp__github__search_issues");
        assert_eq!(tool_name("my server", "get.thing/ü"), "mcp__my_server__get_thing__");
        let long = tool_name("s", &"x".repeat(100));
        let other = tool_name("s", &format!("{}y", "x".repeat(99)));
        assert_eq!(long.len(), 64);
        assert_ne!(long, other);
        let re = regex::Regex::new("^[a-zA-Z0-9_-]{1,64}$").unwrap();
        assert!(re.is_match(&long) && re.is_match(&tool_name("a b", "c\u{0}d")));
    }
}
