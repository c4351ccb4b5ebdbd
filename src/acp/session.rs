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
use crate::config::mcp::McpServerSettings;
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
    /// A session on `cwd` over the `--settings` layer, with the stdio
    /// servers of `servers` added to its `mcpServers` (HTTP and SSE servers
    /// are not offered in the capabilities, and skipped).
    pub fn new(cwd: PathBuf, editor: &Settings, servers: &[McpServer]) -> Result<Self, NewSessionError> {
        let shown = cwd.display().to_string();
        let root = match std::fs::canonicalize(&cwd) {
            Ok(root) if cwd.is_absolute() && root.is_dir() => root,
            _ => return Err(NewSessionError::NotAFolder(shown)),
        };
        let mut editor = editor.clone();
        let added = stdio_servers(servers);
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

/// The stdio servers of `session/new` as `mcpServers` entries.
fn stdio_servers(servers: &[McpServer]) -> BTreeMap<String, McpServerSettings> {
    let mut out = BTreeMap::new();
    for server in servers {
        match server {
            McpServer::Stdio(s) => {
                let env = s.env.iter().map(|v| (v.name.clone(), v.value.clone())).collect();
                let args = s.args.clone();
                let command = Some(s.command.display().to_string());
                out.insert(s.name.clone(), McpServerSettings { command, args, env, ..Default::default() });
            }
            other => tracing::warn!("MCP server skipped: only stdio servers are supported, not {other:?}"),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use agent_client_protocol::v1::schema::{EnvVariable, McpServerStdio};

    use super::*;

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
}
