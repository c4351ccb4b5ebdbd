//! A stdio MCP server: the child process, spawned in the workspace root
//! with an environment built from an allow list (`secrets::allowed_env`:
//! the variables that carry no secret, those `envAllow` names, and its own
//! `env`), and the handshake over its stdin and stdout.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::transport::TokioChildProcess;

use super::Client;

/// What starts one stdio server.
pub(super) struct Spawn<'a> {
    pub name: &'a str,
    pub command: &'a str,
    pub args: &'a [String],
    pub env: &'a BTreeMap<String, String>,
    pub cwd: &'a Path,
    /// Variables it gets beyond the allow list (`envAllow`).
    pub env_allow: &'a [String],
}

/// Spawns the server and does the handshake, within `wait`.
pub(super) async fn start(s: Spawn<'_>, wait: Duration) -> Result<Client, String> {
    let mut cmd = tokio::process::Command::new(s.command);
    // Only the variables known to carry no secret, those `envAllow` names,
    // and the server's own `env` (the user wrote it for this server).
    cmd.env_clear().envs(crate::secrets::allowed_env(s.env_allow));
    cmd.args(s.args).envs(s.env).current_dir(s.cwd);
    let (transport, _) = TokioChildProcess::builder(cmd)
        .spawn()
        .map_err(|e| format!("cannot start MCP server `{}` (`{}`): {e}", s.name, s.command))?;
    match tokio::time::timeout(wait, ().serve(transport)).await {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(e)) => Err(format!("MCP server `{}` did not start: {e}", s.name)),
        Err(_) => Err(format!("MCP server `{}` did not start within {} s", s.name, wait.as_secs())),
    }
}
