//! agentfix as an MCP *client* over the official SDK (`rmcp`, the only
//! module that knows it): the user's servers (`mcpServers`), their tools
//! offered to the model as `mcp__<server>__<tool>`, and their resources as
//! two read-only tools, `mcp__<server>__list_resources` and
//! `mcp__<server>__read_resource`.
//!
//! [`McpServers`] lives as long as the session (the LSP server, an ACP
//! session, or one CLI command): each server starts (a stdio server) or is
//! connected to (an HTTP server) at the first run that needs its tool list
//! (a run's tool specs are sent with its first request, so the list is
//! needed then), and the list is cached, so later runs do not wait. A
//! server that exits (or whose connection closes) is started again at its
//! next use, once; after a second exit its tools answer with an error for
//! the rest of the session. A request waits at most the server's
//! `timeoutSecs`, the start and the tool list that too but at least
//! [`MIN_START_TIMEOUT`]; a request that times out is a tool error and the
//! server is kept (a slow tool is no broken server). A server that cannot
//! start (an unusable entry, a variable not set, credentials refused) is
//! left out of the run with a warning; the others serve.
//!
//! Its parts, one file per concern: `stdio.rs` (the child process, its
//! environment by allow list), `http.rs` (streamable HTTP, the `headers`),
//! `tool.rs` (`McpTool`: approval, the call, the result as text),
//! `resources.rs` (the two resource tools). Here: the servers, their
//! state, the listing, the names.
//!
//! Approval: tools whose annotations say read-only (`readOnlyHint`), those
//! the server's `autoApprove` names, and the resource tools run without
//! asking; any other call asks the [`Approver`] (as `run_command` does).
//!
//! Secrets: what an HTTP server's settings resolve from `${env:…}` (the
//! url, the header values) is never in a message, a log line or a tool
//! result: every text that comes from the server or the HTTP stack goes
//! through [`Server::scrub`], and messages show the url as written.

mod http;
mod resources;
mod stdio;
mod tool;

use std::collections::BTreeSet;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::service::{RunningService, ServiceError};
use serde_json::Value;

use crate::config::mcp::{McpConfig, McpServerConfig, McpTransport};
use crate::secrets::Redactor;
use crate::tools::{Approver, ExternalTool};
pub use tool::render;

/// Starts after the first, per server and session.
pub const MAX_RESTARTS: u32 = 1;

/// The shortest wait for a server's start and tool list.
pub const MIN_START_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest tool name model APIs accept.
const MAX_NAME: usize = 64;

/// The names of the resource tools on a server (before `mcp__<server>__`).
pub const RESOURCE_TOOLS: [&str; 2] = ["list_resources", "read_resource"];

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

/// What one server offers, listed once per session.
#[derive(Debug, Clone, PartialEq)]
pub struct Listing {
    pub tools: Vec<ServerTool>,
    /// Its capabilities include `resources` (so it gets the resource tools).
    pub resources: bool,
}

impl Listing {
    /// Every tool the model gets from the server `server`, as
    /// `(mcp__… name, read-only)`: its own tools, then the resource tools.
    pub fn offered(&self, server: &str) -> Vec<(String, bool)> {
        let own = self.tools.iter().map(|t| (tool_name(server, &t.name), t.read_only));
        let resources = RESOURCE_TOOLS.iter().filter(|_| self.resources).map(|t| (tool_name(server, t), true));
        own.chain(resources).collect()
    }
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
    /// The values its settings resolved (an HTTP server's url and headers).
    secrets: Redactor,
    state: tokio::sync::Mutex<State>,
}

#[derive(Default)]
struct State {
    client: Option<Arc<Client>>,
    /// What it offers, once listed.
    listing: Option<Listing>,
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
                let secrets = match &c.transport {
                    McpTransport::Http(http) => Redactor::new(http.secrets()),
                    _ => Redactor::default(),
                };
                Arc::new(Server {
                    config: c.clone(),
                    cwd: cwd.to_path_buf(),
                    env_allow: config.env_allow.clone(),
                    secrets,
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

    /// Every server's listing (starting the servers not yet started, side
    /// by side), or why it has none.
    pub async fn list(&self) -> Vec<(String, Result<Listing, String>)> {
        let lists = futures::future::join_all(self.servers.iter().map(|s| s.listing())).await;
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
            let listing = match listed {
                Ok(listing) => listing,
                Err(e) => {
                    tracing::warn!(server = %name, "MCP server left out of the run: {e}");
                    continue;
                }
            };
            let mut free = |full: &str, on_server: &str| {
                let free = names.insert(full.to_string());
                if !free {
                    tracing::warn!(server = %name, tool = on_server, "MCP tool left out: `{full}` is taken");
                }
                free
            };
            for tool in listing.tools {
                let full = tool_name(&name, &tool.name);
                if free(&full, &tool.name) {
                    out.push(Arc::new(tool::McpTool {
                        server: server.clone(),
                        tool,
                        name: full,
                        approver: approver.clone(),
                        always: Mutex::new(false),
                    }));
                }
            }
            if listing.resources {
                let [list, read] = RESOURCE_TOOLS.map(|t| tool_name(&name, t));
                if free(&list, RESOURCE_TOOLS[0]) {
                    let read = read.clone();
                    out.push(Arc::new(resources::ListResources { server: server.clone(), name: list, read }));
                }
                if free(&read, RESOURCE_TOOLS[1]) {
                    out.push(Arc::new(resources::ReadResource { server: server.clone(), name: read }));
                }
            }
        }
        out
    }

    /// Why each server that failed is unavailable for the rest of the
    /// session (it could not start, or went away again after a restart).
    pub async fn failures(&self) -> Vec<String> {
        let mut out = Vec::new();
        for server in &self.servers {
            out.extend(server.state.lock().await.failed.clone());
        }
        out
    }

    /// Stops every running server (a stdio server's stdin closed, then it
    /// is killed; an HTTP server's session ended).
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

    /// `text` without the values the server's settings resolved.
    fn scrub(&self, text: String) -> String {
        self.secrets.redact_exact(&text).into_owned()
    }

    /// "started" for a process, "connected to" for an HTTP server.
    fn started(&self) -> &'static str {
        match self.config.transport {
            McpTransport::Http(_) => "connected to",
            _ => "started",
        }
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
            let why = format!(
                "MCP server `{}` went away again after it was {} again; it is not {} again",
                self.name(),
                self.started(),
                self.started()
            );
            state.failed = Some(why.clone());
            return Err(why);
        }
        if state.lost {
            tracing::warn!(server = self.name(), "MCP server went away; it is {} again", self.started());
        }
        state.starts += 1;
        state.lost = false;
        match self.start().await {
            Ok(c) => {
                let how = if self.started() == "started" { "started" } else { "connected" };
                tracing::info!(server = self.name(), "MCP server {how}");
                let c = Arc::new(c);
                state.client = Some(c.clone());
                Ok(c)
            }
            Err(why) => {
                let why = self.scrub(why);
                state.failed = Some(why.clone());
                Err(why)
            }
        }
    }

    /// Starts the server, or connects to it, and does the handshake.
    async fn start(&self) -> Result<Client, String> {
        let wait = self.start_timeout();
        match &self.config.transport {
            McpTransport::Stdio { command, args, env } => {
                let spawn =
                    stdio::Spawn { name: self.name(), command, args, env, cwd: &self.cwd, env_allow: &self.env_allow };
                stdio::start(spawn, wait).await
            }
            McpTransport::Http(server) => http::connect(self.name(), server, wait).await,
            McpTransport::Unusable(why) => Err(why.clone()),
        }
    }

    /// What the server offers, listed once per session.
    async fn listing(&self) -> Result<Listing, String> {
        if let Some(listing) = &self.state.lock().await.listing {
            return Ok(listing.clone());
        }
        let client = self.client().await?;
        let wait = self.start_timeout();
        let listed = match tokio::time::timeout(wait, client.list_all_tools()).await {
            Ok(Ok(tools)) => tools,
            Ok(Err(e)) => {
                return Err(self.scrub(format!(
                    "MCP server `{}` did not list its tools: {}",
                    self.name(),
                    http::service_error(&e)
                )));
            }
            Err(_) => {
                return Err(format!("MCP server `{}` did not list its tools within {} s", self.name(), wait.as_secs()));
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
        let resources = client.peer_info().is_some_and(|info| info.capabilities.resources.is_some());
        let listing = Listing { tools, resources };
        self.state.lock().await.listing = Some(listing.clone());
        Ok(listing)
    }

    /// One request to the server (`what` names it in messages: "the call
    /// of `x`"), within the server's timeout. A JSON-RPC error is the
    /// server's answer; a broken transport loses the client (a stdio
    /// server's always, an HTTP server's when its connection is closed),
    /// to be started again at the next use.
    async fn request<T, F, Fut>(&self, what: &str, send: F) -> Result<T, String>
    where
        F: FnOnce(Arc<Client>) -> Fut,
        Fut: Future<Output = Result<T, ServiceError>>,
    {
        let client = self.client().await?;
        let name = self.name();
        match tokio::time::timeout(self.config.timeout, send(client.clone())).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(ServiceError::McpError(e))) => Err(self.scrub(format!("MCP server `{name}` refused {what}: {e}"))),
            Ok(Err(e)) => {
                let why = http::service_error(&e);
                let http = matches!(self.config.transport, McpTransport::Http(_));
                if http && http::refused_credentials(&why) {
                    return Err(self.scrub(format!(
                        "MCP server `{name}` refused the credentials during {what} ({why}): check its `headers`"
                    )));
                }
                if http && !client.is_closed() {
                    return Err(self.scrub(format!("MCP server `{name}` failed during {what} ({why})")));
                }
                self.lose(&client).await;
                Err(self.scrub(format!(
                    "MCP server `{name}` failed during {what} ({why}); it is {} again at its next use, once",
                    self.started()
                )))
            }
            Err(_) => Err(format!(
                "{what} on MCP server `{name}` did not answer within {} s (the server's timeoutSecs); it was abandoned",
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
        // Cancelling ends the service, which drops the transport: a stdio
        // server's stdin closes and the child is killed; an HTTP session
        // is deleted.
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

    #[test]
    fn a_listing_offers_the_resource_tools_only_for_a_server_with_resources() {
        let tool =
            ServerTool { name: "t".into(), description: String::new(), input_schema: Value::Null, read_only: false };
        let with = Listing { tools: vec![tool.clone()], resources: true };
        assert_eq!(
            with.offered("s"),
            [
                ("mcp__s__t".to_string(), false),
                ("mcp__s__list_resources".to_string(), true),
                ("mcp__s__read_resource".to_string(), true)
            ]
        );
        assert_eq!(Listing { tools: vec![tool], resources: false }.offered("s").len(), 1);
    }
}
