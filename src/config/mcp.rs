//! The MCP section: the tool servers of `mcpServers` (`McpServerSettings`
//! on the wire, `McpServerConfig` resolved; never from agentfix.toml),
//! taken whole by `mcp`. A server runs over stdio (`command`) or is reached
//! over streamable HTTP (`url`, with `headers`); `${env:NAME}` in the url
//! and the header values is resolved here, from the environment, into
//! [`Secret`]s, except in the servers an ACP client passes (`literal`),
//! whose values are the client's own. An entry that cannot be used (neither or both of `command`
//! and `url`, a variable not set, the legacy SSE transport) is kept with
//! why ([`McpTransport::Unusable`]), so that server alone fails.

use std::collections::BTreeMap;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::layers::Layers;
use super::provider::Secret;
use super::{ConfigError, Source};

/// One MCP server in `mcpServers`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct McpServerSettings {
    /// How the server is reached: `stdio` or `http` (streamable HTTP); optional, `command` or `url` says it. `sse`, the legacy HTTP+SSE transport, is not supported.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<McpServerKind>,
    /// The program that runs the server over stdio.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Variables added to its environment (after credentials are removed from agentfix's own).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The endpoint of a streamable HTTP server (`http://…` or `https://…`); `${env:NAME}` is replaced by the variable's value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// HTTP headers sent with every request to `url`, such as `{"Authorization": "Bearer ${env:MY_TOKEN}"}`; `${env:NAME}` is replaced by the variable's value, which is never logged.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Tools of this server (their names on the server, not `mcp__…`) that run without asking.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub auto_approve: Vec<String>,
    /// Longest wait in seconds for one tool call (default 60), and for the server to start and list its tools (at least 10).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
    /// Set by agentfix, never by settings (it is not serialized): the url
    /// and the header values are used as they are, with no `${env:…}`
    /// expansion. The servers of an ACP client's `session/new` are: it
    /// sends literal values, which may come from a project's editor
    /// configuration, so they must not reach into agentfix's environment.
    #[serde(skip)]
    #[schemars(skip)]
    pub literal: bool,
}

/// `mcpServers.<name>.type`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum McpServerKind {
    /// A program over stdin and stdout (`command`).
    Stdio,
    /// Streamable HTTP (`url`).
    #[serde(alias = "streamable-http", alias = "streamableHttp")]
    Http,
    /// The legacy HTTP+SSE transport (not supported).
    Sse,
}

/// Default `mcpServers.<name>.timeoutSecs`.
pub const DEFAULT_MCP_TIMEOUT_SECS: u64 = 60;

/// One MCP server, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerConfig {
    pub name: String,
    pub transport: McpTransport,
    /// Its tools that run without asking.
    pub auto_approve: Vec<String>,
    /// For one call, and for the start with the tool list.
    pub timeout: Duration,
}

/// How one server is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpTransport {
    /// A child process over stdio.
    Stdio { command: String, args: Vec<String>, env: BTreeMap<String, String> },
    /// Streamable HTTP.
    Http(HttpServer),
    /// The entry cannot be used, and why (a message naming the server).
    Unusable(String),
}

/// A streamable HTTP server, its variables resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpServer {
    /// The url as the settings write it (`${env:…}` unresolved): the one shown.
    pub shown_url: String,
    /// The url requests go to.
    pub url: Secret,
    /// The headers, by name as written, their values resolved.
    pub headers: Vec<(String, Secret)>,
    /// The values `${env:…}` put in the url and the headers.
    pub env_values: Vec<Secret>,
}

impl HttpServer {
    /// Every resolved value that must not be shown: the header values
    /// and the url, whole, and each value of a variable they name (a
    /// message may quote the url normalized).
    pub fn secrets(&self) -> Vec<String> {
        let mut out: Vec<String> = self.headers.iter().map(|(_, v)| v.expose().to_string()).collect();
        if self.url.expose() != self.shown_url {
            out.push(self.url.expose().to_string());
        }
        out.extend(self.env_values.iter().map(|v| v.expose().to_string()));
        out
    }
}

/// The MCP servers (`mcpServers`, never from agentfix.toml).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct McpConfig {
    pub servers: Vec<McpServerConfig>,
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
        let servers = entries
            .into_iter()
            .map(|(name, s)| McpServerConfig {
                transport: self.transport(&name, &s),
                name,
                auto_approve: s.auto_approve,
                timeout: Duration::from_secs(s.timeout_secs.unwrap_or(DEFAULT_MCP_TIMEOUT_SECS).max(1)),
            })
            .collect();
        Ok(McpConfig { servers, env_allow: Vec::new() })
    }

    /// How the server `name` of the settings `s` is reached, or why it cannot be.
    fn transport(&self, name: &str, s: &McpServerSettings) -> McpTransport {
        let command = s.command.clone().filter(|c| !c.trim().is_empty());
        let url = s.url.clone().filter(|u| !u.trim().is_empty());
        let unusable = |why: &str| McpTransport::Unusable(format!("MCP server `{name}` {why}"));
        match (s.kind, command, url) {
            (Some(McpServerKind::Sse), ..) => unusable(
                "uses the legacy HTTP+SSE transport (`\"type\": \"sse\"`), which agentfix does not support; use the server's streamable HTTP endpoint (`\"type\": \"http\"`)",
            ),
            (_, Some(_), Some(_)) => {
                unusable("has both `command` and `url`: give one (`command` for stdio, `url` for HTTP)")
            }
            (None | Some(McpServerKind::Stdio), Some(command), None) => {
                McpTransport::Stdio { command, args: s.args.clone(), env: s.env.clone() }
            }
            (None | Some(McpServerKind::Http), None, Some(url)) => match self.http(name, &url, &s.headers, s.literal) {
                Ok(http) => McpTransport::Http(http),
                Err(why) => McpTransport::Unusable(why),
            },
            (Some(McpServerKind::Stdio), None, _) => unusable("is of `\"type\": \"stdio\"` but has no `command`"),
            (Some(McpServerKind::Http), _, None) => unusable("is of `\"type\": \"http\"` but has no `url`"),
            (None, None, None) => unusable("has neither `command` (a stdio server) nor `url` (an HTTP server)"),
        }
    }

    /// The HTTP server at `url` with `headers`, their `${env:…}` resolved
    /// unless `literal`.
    fn http(
        &self,
        name: &str,
        url: &str,
        headers: &BTreeMap<String, String>,
        literal: bool,
    ) -> Result<HttpServer, String> {
        let mut used = Vec::new();
        let mut lookup = |var: &str| {
            let value = self.env(var);
            used.extend(value.clone().map(Secret::new));
            value
        };
        let mut expand = |text: &str| {
            if literal { Ok(text.to_string()) } else { expand_env(text, &mut lookup) }
        };
        let resolved = expand(url).map_err(|e| format!("MCP server `{name}`: `url` {e}"))?;
        if !(resolved.starts_with("http://") || resolved.starts_with("https://")) {
            return Err(format!("MCP server `{name}`: `url` must start with `http://` or `https://`"));
        }
        let headers = headers
            .iter()
            .map(|(k, v)| {
                expand(v)
                    .map(|v| (k.clone(), Secret::new(v)))
                    .map_err(|e| format!("MCP server `{name}`: header `{k}` {e}"))
            })
            .collect::<Result<_, _>>()?;
        Ok(HttpServer { shown_url: url.to_string(), url: Secret::new(resolved), headers, env_values: used })
    }
}

/// `text` with every `${env:NAME}` replaced by the variable's value
/// (`lookup`); the error (after the name of what is expanded) names the
/// variable, never a value. The provider keys are refused: they go to the
/// model API alone.
pub fn expand_env(text: &str, lookup: &mut dyn FnMut(&str) -> Option<String>) -> Result<String, String> {
    const OPEN: &str = "${env:";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(OPEN) {
        out.push_str(&rest[..at]);
        let after = &rest[at + OPEN.len()..];
        let Some(end) = after.find('}') else {
            return Err(format!("has a `{OPEN}` without its closing `}}`"));
        };
        let var = &after[..end];
        let valid = var.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(format!("names `{var}`, which is not an environment variable name"));
        }
        if crate::secrets::PROVIDER_KEY_VARS.contains(&var) {
            return Err(format!("names `{var}`, the model provider's key, which no MCP server gets"));
        }
        match lookup(var) {
            Some(value) => out.push_str(&value),
            None => return Err(format!("names the environment variable `{var}`, which is not set")),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::test_resolve as resolve;
    use super::*;
    use crate::config::Source;
    use crate::config::settings::Settings;
    use serde_json::json;

    fn unusable(c: &McpConfig, name: &str) -> String {
        match &c.servers.iter().find(|s| s.name == name).unwrap().transport {
            McpTransport::Unusable(why) => why.clone(),
            other => panic!("{name} is usable: {other:?}"),
        }
    }

    #[test]
    fn mcp_servers_come_from_the_editor_or_the_environment_never_agentfix_toml() {
        let e = Settings::from_toml("[mcpServers.evil]\ncommand = \"sh\"\n").unwrap_err();
        assert!(e.to_string().contains("may not set `mcpServers`"), "{e}");
        // An HTTP server neither: the repository would choose where requests go.
        let e = Settings::from_toml("[mcpServers.web]\nurl = \"https://evil.example/mcp\"\n").unwrap_err();
        assert!(e.to_string().contains("may not set `mcpServers`"), "{e}");
        let editor = Settings::from_json(&json!({"mcpServers": {
            "gh": {"command": "npx", "args": ["-y", "gh-mcp"], "env": {"A": "1"}, "autoApprove": ["search"], "timeoutSecs": 5},
        }}))
        .unwrap();
        let c = resolve(&Settings::default(), &editor, &[]).unwrap();
        assert_eq!(
            c.mcp.servers,
            [McpServerConfig {
                name: "gh".into(),
                transport: McpTransport::Stdio {
                    command: "npx".into(),
                    args: vec!["-y".into(), "gh-mcp".into()],
                    env: [("A".to_string(), "1".to_string())].into(),
                },
                auto_approve: vec!["search".into()],
                timeout: Duration::from_secs(5),
            }]
        );
        assert_eq!(c.source("mcpServers"), Source::Editor);
        let c = resolve(&Settings::default(), &Settings::default(), &[]).unwrap();
        assert!(c.mcp.servers.is_empty());
        let c = resolve(
            &Settings::default(),
            &Settings::default(),
            &[("AGENTFIX_MCP_SERVERS", r#"{"e": {"command": "srv"}}"#)],
        )
        .unwrap();
        assert!(matches!(&c.mcp.servers[0].transport, McpTransport::Stdio { command, .. } if command == "srv"));
        assert_eq!(c.source("mcpServers"), Source::Env);
        let e = resolve(&Settings::default(), &Settings::default(), &[("AGENTFIX_MCP_SERVERS", "[")]).unwrap_err();
        assert!(e.to_string().contains("AGENTFIX_MCP_SERVERS"), "{e}");
    }

    #[test]
    fn http_servers_resolve_env_variables_in_the_url_and_headers_and_never_show_them() {
        let editor = Settings::from_json(&json!({"mcpServers": {
            "web": {"url": "https://mcp.example/${env:MCP_PATH}", "type": "streamable-http",
                    "headers": {"Authorization": "Bearer ${env:MY_TOKEN}", "X-Team": "core"}},
            "missing": {"url": "https://mcp.example/mcp", "headers": {"Authorization": "Bearer ${env:NOT_SET}"}},
        }}))
        .unwrap();
        let c =
            resolve(&Settings::default(), &editor, &[("MY_TOKEN", "s3cr3t-t0ken"), ("MCP_PATH", "v1/mcp")]).unwrap();
        let web = c.mcp.servers.iter().find(|s| s.name == "web").unwrap();
        let McpTransport::Http(http) = &web.transport else { panic!("{web:?}") };
        assert_eq!(
            (http.url.expose(), http.shown_url.as_str()),
            ("https://mcp.example/v1/mcp", "https://mcp.example/${env:MCP_PATH}")
        );
        let headers: Vec<(&str, &str)> = http.headers.iter().map(|(k, v)| (k.as_str(), v.expose())).collect();
        assert_eq!(headers, [("Authorization", "Bearer s3cr3t-t0ken"), ("X-Team", "core")]);
        assert_eq!(
            http.secrets(),
            ["Bearer s3cr3t-t0ken", "core", "https://mcp.example/v1/mcp", "v1/mcp", "s3cr3t-t0ken"]
        );
        // Neither Debug nor the settings in force show a value.
        let shown = format!("{:?} {:?}", c.mcp, c.in_force);
        assert!(!shown.contains("s3cr3t") && !shown.contains("v1/mcp"), "{shown}");
        // A variable not set: that server alone is unusable, saying which variable.
        assert_eq!(
            unusable(&c.mcp, "missing"),
            "MCP server `missing`: header `Authorization` names the environment variable `NOT_SET`, which is not set"
        );
    }

    #[test]
    fn a_literal_server_s_url_and_headers_are_used_as_they_are_and_settings_cannot_ask_for_it() {
        let web = McpServerSettings {
            url: Some("https://mcp.example/${env:MCP_PATH}".into()),
            headers: [("Authorization".to_string(), "Bearer ${env:MY_TOKEN}".to_string())].into(),
            literal: true,
            ..Default::default()
        };
        let editor = Settings { mcp_servers: Some([("web".to_string(), web)].into()), ..Default::default() };
        let c = resolve(&Settings::default(), &editor, &[("MY_TOKEN", "s3cr3t"), ("MCP_PATH", "v1")]).unwrap();
        let McpTransport::Http(http) = &c.mcp.servers[0].transport else { panic!("{:?}", c.mcp) };
        assert_eq!(http.url.expose(), "https://mcp.example/${env:MCP_PATH}");
        let headers: Vec<(&str, &str)> = http.headers.iter().map(|(k, v)| (k.as_str(), v.expose())).collect();
        assert_eq!(headers, [("Authorization", "Bearer ${env:MY_TOKEN}")]);
        assert_eq!(http.secrets(), ["Bearer ${env:MY_TOKEN}"], "the header values stay secret");
        // Not even a provider key's name is refused: nothing is looked up.
        let literal = |url: &str| McpServerSettings { url: Some(url.into()), literal: true, ..Default::default() };
        let editor = Settings {
            mcp_servers: Some(
                [
                    ("key".to_string(), literal("https://x/${env:ANTHROPIC_API_KEY}")),
                    ("ftp".into(), literal("ftp://x")),
                ]
                .into(),
            ),
            ..Default::default()
        };
        let c = resolve(&Settings::default(), &editor, &[("ANTHROPIC_API_KEY", "sk-ant-x")]).unwrap();
        let key = c.mcp.servers.iter().find(|s| s.name == "key").unwrap();
        assert!(
            matches!(&key.transport, McpTransport::Http(h) if h.url.expose() == "https://x/${env:ANTHROPIC_API_KEY}")
        );
        assert!(unusable(&c.mcp, "ftp").contains("must start with `http://` or `https://`"));
        // The flag is agentfix's alone: settings that write it are expanded.
        let parsed: McpServerSettings =
            serde_json::from_value(json!({"url": "https://x/mcp", "literal": true})).unwrap();
        assert!(!parsed.literal);
    }

    #[test]
    fn an_entry_that_cannot_be_used_says_why_and_the_others_stay() {
        let editor = Settings::from_json(&json!({"mcpServers": {
            "both": {"command": "srv", "url": "https://x.example/mcp"},
            "neither": {"args": ["x"]},
            "sse": {"type": "sse", "url": "https://x.example/sse"},
            "ftp": {"url": "ftp://x.example/mcp"},
            "open": {"url": "https://x.example/${env:UNCLOSED"},
            "typed": {"type": "http", "command": "srv"},
            "ok": {"type": "stdio", "command": "srv"},
        }}))
        .unwrap();
        let c = resolve(&Settings::default(), &editor, &[]).unwrap();
        assert!(unusable(&c.mcp, "both").contains("has both `command` and `url`"));
        assert!(unusable(&c.mcp, "neither").contains("has neither `command` (a stdio server) nor `url`"));
        assert!(unusable(&c.mcp, "sse").contains("legacy HTTP+SSE transport"));
        assert!(unusable(&c.mcp, "ftp").contains("must start with `http://` or `https://`"));
        assert!(unusable(&c.mcp, "open").contains("without its closing `}`"));
        assert!(unusable(&c.mcp, "typed").contains("is of `\"type\": \"http\"` but has no `url`"));
        assert!(matches!(c.mcp.servers.iter().find(|s| s.name == "ok").unwrap().transport, McpTransport::Stdio { .. }));
    }

    #[test]
    fn env_references_expand_in_place() {
        let mut env = |v: &str| (v == "A").then(|| "1".to_string());
        assert_eq!(expand_env("x${env:A}y${env:A}", &mut env).unwrap(), "x1y1");
        assert_eq!(expand_env("no refs, ${other} and $env:A", &mut env).unwrap(), "no refs, ${other} and $env:A");
        assert!(expand_env("${env:B}", &mut env).unwrap_err().contains("`B`, which is not set"));
        assert!(expand_env("${env:A-B}", &mut env).unwrap_err().contains("not an environment variable name"));
        assert!(expand_env("${env:}", &mut env).is_err());
        let e = expand_env("Bearer ${env:ANTHROPIC_API_KEY}", &mut |_| Some("sk-ant-x".into())).unwrap_err();
        assert!(e.contains("the model provider's key"), "{e}");
    }
}
