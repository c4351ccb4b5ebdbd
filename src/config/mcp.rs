//! The MCP section: the stdio tool servers of `mcpServers` (`McpServerSettings`
//! on the wire, `McpServerConfig` resolved; never from agentfix.toml),
//! taken whole by `mcp`.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::layers::Layers;
use super::{ConfigError, Source};

/// One MCP server in `mcpServers`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct McpServerSettings {
    /// The program that runs the server over stdio.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Variables added to its environment (after credentials are removed from agentfix's own).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub env: std::collections::BTreeMap<String, String>,
    /// Tools of this server (their names on the server, not `mcp__…`) that run without asking.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub auto_approve: Vec<String>,
    /// Longest wait in seconds for one tool call (default 60), and for the server to start and list its tools (at least 10).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
}

/// Default `mcpServers.<name>.timeoutSecs`.
pub const DEFAULT_MCP_TIMEOUT_SECS: u64 = 60;

/// One stdio MCP server, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerConfig {
    pub name: String,
    pub command: String,
    pub args: Vec<String>,
    pub env: std::collections::BTreeMap<String, String>,
    /// Its tools that run without asking.
    pub auto_approve: Vec<String>,
    /// For one call, and for the start with the tool list.
    pub timeout: Duration,
}

/// The MCP servers (`mcpServers`, never from agentfix.toml).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct McpConfig {
    pub servers: Vec<McpServerConfig>,
    /// Entries without a `command` (not stdio servers), skipped.
    pub skipped: Vec<String>,
    /// Variables the servers get beyond the allow list (`envAllow`).
    pub env_allow: Vec<String>,
}

impl Layers<'_> {
    /// `mcpServers`: the editor settings, else `AGENTFIX_MCP_SERVERS` (JSON);
    /// never agentfix.toml (which refuses it).
    pub(super) fn mcp(&mut self) -> Result<McpConfig, ConfigError> {
        let (entries, source) = if let Some(e) = self.editor.mcp_servers.clone() {
            (e, Source::Editor)
        } else if let Some(v) = self.env("AGENTFIX_MCP_SERVERS") {
            let e = serde_json::from_str(&v)
                .map_err(|e| ConfigError::Invalid(format!("AGENTFIX_MCP_SERVERS is not valid mcpServers JSON: {e}")))?;
            (e, Source::Env)
        } else {
            (Default::default(), Source::Default)
        };
        self.record("mcpServers", source, &entries);
        let mut mcp = McpConfig::default();
        for (name, s) in entries {
            match s.command.filter(|c| !c.trim().is_empty()) {
                Some(command) => mcp.servers.push(McpServerConfig {
                    name,
                    command,
                    args: s.args,
                    env: s.env,
                    auto_approve: s.auto_approve,
                    timeout: Duration::from_secs(s.timeout_secs.unwrap_or(DEFAULT_MCP_TIMEOUT_SECS).max(1)),
                }),
                None => mcp.skipped.push(name),
            }
        }
        Ok(mcp)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_resolve as resolve;
    use super::*;
    use crate::config::Source;
    use crate::config::settings::Settings;
    use serde_json::json;

    #[test]
    fn mcp_servers_come_from_the_editor_only_and_skip_entries_without_a_command() {
        let e = Settings::from_toml("[mcpServers.evil]\ncommand = \"sh\"\n").unwrap_err();
        assert!(e.to_string().contains("may not set `mcpServers`"), "{e}");
        let editor = Settings::from_json(&json!({"mcpServers": {
            "gh": {"command": "npx", "args": ["-y", "gh-mcp"], "env": {"A": "1"}, "autoApprove": ["search"], "timeoutSecs": 5},
            "web": {"url": "https://example.com/mcp", "type": "http"}
        }}))
        .unwrap();
        let c = resolve(&Settings::default(), &editor, &[]).unwrap();
        assert_eq!(
            c.mcp.servers,
            [McpServerConfig {
                name: "gh".into(),
                command: "npx".into(),
                args: vec!["-y".into(), "gh-mcp".into()],
                env: [("A".to_string(), "1".to_string())].into(),
                auto_approve: vec!["search".into()],
                timeout: Duration::from_secs(5),
            }]
        );
        assert_eq!(c.mcp.skipped, ["web"]);
        assert_eq!(c.source("mcpServers"), Source::Editor);
        let c = resolve(&Settings::default(), &Settings::default(), &[]).unwrap();
        assert!(c.mcp.servers.is_empty());
        let c = resolve(
            &Settings::default(),
            &Settings::default(),
            &[("AGENTFIX_MCP_SERVERS", r#"{"e": {"command": "srv"}}"#)],
        )
        .unwrap();
        assert_eq!((c.mcp.servers[0].command.as_str(), c.source("mcpServers")), ("srv", Source::Env));
        let e = resolve(&Settings::default(), &Settings::default(), &[("AGENTFIX_MCP_SERVERS", "[")]).unwrap_err();
        assert!(e.to_string().contains("AGENTFIX_MCP_SERVERS"), "{e}");
    }
}
