//! The downstream section: the language servers (`languageServers`, never
//! from agentfix.toml; `ServerConfig` per language), whether the defaults on
//! PATH are used, and the waits on them (`DiagnosticsWait`).
//! `DownstreamConfig` goes whole to `Downstream::from_config`.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::ConfigError;
use super::Source;
use super::layers::{Layers, pick};

/// Default `languageServerTimeoutMs`: the longest wait for one answer of a
/// language server.
pub const DEFAULT_LANGUAGE_SERVER_TIMEOUT_MS: u64 = 20_000;
/// Default `diagnosticsSettleMs`: quiet time after the last publication.
pub const DEFAULT_DIAGNOSTICS_SETTLE_MS: u64 = 300;
/// Default `diagnosticsTimeoutMs`: the longest wait for diagnostics.
pub const DEFAULT_DIAGNOSTICS_TIMEOUT_MS: u64 = 5000;

/// One entry of the `languageServers` setting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerConfig {
    /// The command and its arguments, e.g. `["pyright-langserver", "--stdio"]`; `[]` turns the language off.
    pub command: Vec<String>,
    /// `initializationOptions` sent to the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization_options: Option<Value>,
    /// The answer to the server's `workspace/configuration` requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<Value>,
    /// Files or directories that mark a project root, e.g. `["pyproject.toml"]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub root_markers: Vec<String>,
}

/// The downstream language servers.
#[derive(Debug, Clone, PartialEq)]
pub struct DownstreamConfig {
    /// Configured servers by language id.
    pub servers: std::collections::HashMap<String, ServerConfig>,
    /// Whether defaults on PATH are used for other languages.
    pub defaults: bool,
    pub wait: DiagnosticsWait,
    /// Credential variables the servers may inherit (`envAllow`).
    pub env_allow: Vec<String>,
}

/// Timing of the waits on language servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiagnosticsWait {
    /// Quiet time after the last publication of diagnostics.
    pub settle: Duration,
    /// The longest wait for diagnostics.
    pub max: Duration,
    /// The longest wait for the answer to one query.
    pub query: Duration,
}

impl Default for DiagnosticsWait {
    fn default() -> Self {
        Self {
            settle: Duration::from_millis(DEFAULT_DIAGNOSTICS_SETTLE_MS),
            max: Duration::from_millis(DEFAULT_DIAGNOSTICS_TIMEOUT_MS),
            query: Duration::from_millis(DEFAULT_LANGUAGE_SERVER_TIMEOUT_MS),
        }
    }
}

impl Layers<'_> {
    /// The language servers and their waits (`env_allow` is filled in by
    /// the caller, shared with the commands).
    pub(super) fn downstream(&mut self) -> Result<DownstreamConfig, ConfigError> {
        let env_servers = match self.env("AGENTFIX_LANGUAGE_SERVERS") {
            None => None,
            Some(json) => {
                Some(serde_json::from_str::<std::collections::BTreeMap<String, ServerConfig>>(&json).map_err(|e| {
                    ConfigError::Invalid(format!(
                        "AGENTFIX_LANGUAGE_SERVERS is not a JSON object of language servers: {e}"
                    ))
                })?)
            }
        };
        let l = self;
        let servers =
            pick!(l, "languageServers", language_servers, env_servers, Default::default()).into_iter().collect();
        let defaults = pick!(
            l,
            "defaultLanguageServers",
            default_language_servers,
            l.flag("AGENTFIX_DEFAULT_LANGUAGE_SERVERS"),
            true
        );
        let query = pick!(
            l,
            "languageServerTimeoutMs",
            language_server_timeout_ms,
            l.num("AGENTFIX_LANGUAGE_SERVER_TIMEOUT_MS")?,
            DEFAULT_LANGUAGE_SERVER_TIMEOUT_MS
        )
        .max(1);
        let settle = pick!(l, "diagnosticsSettleMs", diagnostics_settle_ms, None::<u64>, DEFAULT_DIAGNOSTICS_SETTLE_MS);
        let max = pick!(l, "diagnosticsTimeoutMs", diagnostics_timeout_ms, None::<u64>, DEFAULT_DIAGNOSTICS_TIMEOUT_MS);
        let wait = DiagnosticsWait {
            settle: Duration::from_millis(settle),
            max: Duration::from_millis(max.max(settle)),
            query: Duration::from_millis(query),
        };
        Ok(DownstreamConfig { servers, defaults, wait, env_allow: Vec::new() })
    }
}
