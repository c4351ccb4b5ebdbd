//! One ACP session: a workspace root (the `cwd` of `session/new`), the
//! editor settings with the session's MCP servers, the servers themselves
//! (MCP and language servers, started lazily, stopped with the session),
//! the run a later prompt follows up on, and the "always" approvals.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::schema::McpServer;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::config::mcp::{McpServerKind, McpServerSettings};
use crate::config::settings::Settings;
use crate::downstream::Downstream;
use crate::fix::Target;
use crate::follow_up::PastRun;
use crate::mcp::McpServers;

/// What the last prompt left for the next one of the session.
#[derive(Clone)]
pub(super) struct Past {
    pub run: Arc<PastRun>,
    pub target: Target,
}

pub(super) struct Session {
    /// The workspace root, canonical.
    pub root: PathBuf,
    /// `--settings` with the session's `mcpServers` added.
    pub editor: Settings,
    /// The MCP servers of the session's settings, made at the first prompt.
    mcp: Mutex<Option<Arc<McpServers>>>,
    downstream: Mutex<Option<Arc<Downstream>>>,
    past: Mutex<Option<Past>>,
    /// Names approved "always" in this session.
    always: Mutex<HashSet<String>>,
    /// The prompt running now, to cancel.
    running: Mutex<Option<CancellationToken>>,
}

/// Why `session/new` is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(super) enum NewSessionError {
    #[error("cwd must be an absolute path to a folder: {0}")]
    NotAFolder(String),
}

impl Session {
    /// A session on `cwd` over the `--settings` layer, with the stdio and
    /// HTTP servers of `servers` added to its `mcpServers` (over a server
    /// of the same name there; SSE servers are not offered in the
    /// capabilities, and skipped).
    pub fn new(cwd: PathBuf, editor: &Settings, servers: &[McpServer]) -> Result<Self, NewSessionError> {
        let shown = cwd.display().to_string();
        let root = match std::fs::canonicalize(&cwd) {
            Ok(root) if cwd.is_absolute() && root.is_dir() => root,
            _ => return Err(NewSessionError::NotAFolder(shown)),
        };
        let mut editor = editor.clone();
        let added = client_servers(servers);
        if !added.is_empty() {
            editor.mcp_servers.get_or_insert_with(BTreeMap::new).extend(added);
        }
        Ok(Self {
            root,
            editor,
            mcp: Mutex::default(),
            downstream: Mutex::default(),
            past: Mutex::default(),
            always: Mutex::default(),
            running: Mutex::default(),
        })
    }

    /// The session's MCP servers (made from the first prompt's
    /// configuration, which is where `mcpServers` comes from).
    pub fn mcp(&self, config: &Config) -> Arc<McpServers> {
        lock(&self.mcp).get_or_insert_with(|| Arc::new(McpServers::new(&config.mcp, &self.root))).clone()
    }

    /// The session's language servers.
    pub fn downstream(&self, config: &Config) -> Arc<Downstream> {
        lock(&self.downstream)
            .get_or_insert_with(|| Arc::new(Downstream::from_config(&config.downstream, vec![self.root.clone()])))
            .clone()
    }

    pub fn past(&self) -> Option<Past> {
        lock(&self.past).clone()
    }

    pub fn keep(&self, past: Past) {
        *lock(&self.past) = Some(past);
    }

    pub fn always_allowed(&self, name: &str) -> bool {
        lock(&self.always).contains(name)
    }

    pub fn allow_always(&self, name: &str) {
        lock(&self.always).insert(name.to_string());
    }

    /// Marks a prompt as running; `None` when one already is.
    pub fn begin(self: &Arc<Self>, cancel: CancellationToken) -> Option<Running> {
        let mut running = lock(&self.running);
        if running.is_some() {
            return None;
        }
        *running = Some(cancel);
        Some(Running(self.clone()))
    }

    /// Cancels the prompt running now, if any.
    pub fn cancel(&self) {
        if let Some(c) = lock(&self.running).as_ref() {
            c.cancel();
        }
    }

    /// Stops the session's servers.
    pub async fn stop(&self) {
        self.cancel();
        let mcp = lock(&self.mcp).take();
        let downstream = lock(&self.downstream).take();
        if let Some(m) = mcp {
            m.stop().await;
        }
        if let Some(d) = downstream {
            d.stop_all().await;
        }
    }
}

/// A running prompt; clears the session's mark when dropped.
pub(super) struct Running(Arc<Session>);

impl Drop for Running {
    fn drop(&mut self) {
        *lock(&self.0.running) = None;
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The servers of `session/new` as `mcpServers` entries: stdio servers
/// with their `env`, HTTP (streamable HTTP) servers with their `headers`,
/// both `literal` (the client's values, no `${env:…}`). An SSE server is
/// skipped with a warning in the log the client shows (never its url or
/// headers, which may carry tokens).
fn client_servers(servers: &[McpServer]) -> BTreeMap<String, McpServerSettings> {
    let mut out = BTreeMap::new();
    for server in servers {
        let (name, entry) = match server {
            McpServer::Stdio(s) => {
                let env = s.env.iter().map(|v| (v.name.clone(), v.value.clone())).collect();
                let command = Some(s.command.display().to_string());
                (&s.name, McpServerSettings { command, args: s.args.clone(), env, ..Default::default() })
            }
            McpServer::Http(s) => {
                let headers = s.headers.iter().map(|h| (h.name.clone(), h.value.clone())).collect();
                let kind = Some(McpServerKind::Http);
                (&s.name, McpServerSettings { kind, url: Some(s.url.clone()), headers, ..Default::default() })
            }
            McpServer::Sse(s) => {
                tracing::warn!(
                    "MCP server `{}` of session/new skipped: agentfix does not support the legacy HTTP+SSE transport (mcpCapabilities.sse is false); pass the server's streamable HTTP endpoint as an `http` server",
                    s.name
                );
                continue;
            }
            _ => {
                tracing::warn!("an MCP server of session/new skipped: agentfix supports stdio and http servers only");
                continue;
            }
        };
        out.insert(name.clone(), McpServerSettings { literal: true, ..entry });
    }
    out
}

#[cfg(test)]
mod tests {
    use agent_client_protocol::v1::schema::{EnvVariable, HttpHeader, McpServerHttp, McpServerSse, McpServerStdio};

    use super::*;
    use crate::config::mcp::McpTransport;

    #[test]
    fn a_session_needs_a_folder_and_adds_its_stdio_servers_to_the_settings() {
        let dir = tempfile::tempdir().unwrap();
        let editor = Settings::default();
        assert!(Session::new("relative".into(), &editor, &[]).is_err());
        assert!(Session::new(dir.path().join("missing"), &editor, &[]).is_err());
        let server =
            McpServerStdio::new("tools", "/usr/bin/srv").args(vec!["--x".into()]).env(vec![EnvVariable::new("A", "1")]);
        let s = Arc::new(Session::new(dir.path().to_path_buf(), &editor, &[McpServer::Stdio(server)]).unwrap());
        assert_eq!(s.root, std::fs::canonicalize(dir.path()).unwrap());
        let entry = &s.editor.mcp_servers.as_ref().unwrap()["tools"];
        assert_eq!(entry.command.as_deref(), Some("/usr/bin/srv"));
        assert_eq!((entry.args.clone(), entry.env["A"].as_str()), (vec!["--x".to_string()], "1"));
        let first = CancellationToken::new();
        let running = s.begin(first.clone()).unwrap();
        assert!(s.begin(CancellationToken::new()).is_none(), "one prompt at a time");
        s.cancel();
        assert!(first.is_cancelled());
        drop(running);
        assert!(s.begin(CancellationToken::new()).is_some());
    }

    #[test]
    fn the_client_s_http_servers_join_the_settings_with_their_headers_as_sent_and_sse_ones_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let settings = |url: &str| McpServerSettings { url: Some(url.into()), ..Default::default() };
        let servers = [("docs", "https://docs.example/mcp"), ("web", "https://old.example/mcp")];
        let editor = Settings {
            mcp_servers: Some(servers.iter().map(|(n, u)| (n.to_string(), settings(u))).collect()),
            ..Settings::default()
        };
        let token = HttpHeader::new("Authorization", "Bearer ${env:MY_TOKEN}");
        let http =
            McpServerHttp::new("web", "https://mcp.example/mcp").headers(vec![token, HttpHeader::new("X-A", "1")]);
        let sse = McpServerSse::new("old", "https://sse.example/sse").headers(vec![HttpHeader::new("X-B", "2")]);
        let sent = [McpServer::Http(http), McpServer::Sse(sse)];
        let s = Session::new(dir.path().to_path_buf(), &editor, &sent).unwrap();
        let entries = s.editor.mcp_servers.as_ref().unwrap();
        assert_eq!(entries.keys().collect::<Vec<_>>(), ["docs", "web"], "the SSE server skipped");
        let web = &entries["web"];
        assert_eq!(
            (web.kind, web.url.as_deref(), web.literal),
            (Some(McpServerKind::Http), Some("https://mcp.example/mcp"), true)
        );
        assert!(!entries["docs"].literal, "the settings' own servers are expanded as before");
        // Resolved as the run resolves it: the client's header as it sent it.
        let env = |k: &str| (k == "MY_TOKEN").then(|| "from-agentfix-env".to_string());
        let config = Config::resolve(&Settings::default(), &s.editor, &env).unwrap();
        let web = config.mcp.servers.iter().find(|c| c.name == "web").unwrap();
        let McpTransport::Http(h) = &web.transport else { panic!("{web:?}") };
        let headers: Vec<(&str, &str)> = h.headers.iter().map(|(k, v)| (k.as_str(), v.expose())).collect();
        assert_eq!(headers, [("Authorization", "Bearer ${env:MY_TOKEN}"), ("X-A", "1")]);
        assert_eq!(h.url.expose(), "https://mcp.example/mcp");
    }
}
