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
//! [`provider::Secret`], whose `Debug` never shows it.
//!
//! Its parts: [`settings`] (the wire `Settings`), `layers` (the resolution
//! through the layers), and one module per resolved section, which owns the
//! section's types, its defaults (each a named constant) and its resolution:
//! [`provider`] (→ `providers::from_config`), [`limits`] (→ the agent loop),
//! [`downstream`] (→ `Downstream::from_config`), [`commands`] (→
//! `run_command`), [`verify`] (→ `fix::verify`), [`candidates`] (→ `fix::candidates`), [`delivery`] (→ the LSP front end), [`mcp`], [`prices`], [`tools`], [`transcripts`]. Users
//! name a section by its module (`config::limits::Limits`); nothing is
//! re-exported. Here: `Config`, the sections together with where each
//! setting came from (`Source`), and `ConfigError`.

pub mod candidates;
pub mod commands;
pub mod delivery;
#[cfg(test)]
mod docs;
pub mod downstream;
mod layers;
pub mod limits;
pub mod mcp;
pub mod prices;
pub mod provider;
pub mod settings;
pub mod tools;
pub mod transcripts;
pub mod verify;

use std::path::Path;

use candidates::CandidatesConfig;
use commands::CommandsConfig;
use downstream::DownstreamConfig;
use layers::{Layers, pick};
use limits::{Limits, PartialEdits};
use mcp::McpConfig;
use prices::PricingConfig;
use provider::ProviderConfig;
use settings::Settings;
use tools::ToolsConfig;
use transcripts::TranscriptsConfig;
use verify::VerifyConfig;

/// Whether the repository's instruction files (`AGENTS.md`, …) join the
/// system prompt (`projectInstructions`).
pub const DEFAULT_PROJECT_INSTRUCTIONS: bool = true;
/// The project settings file at the workspace root.
pub const FILE_NAME: &str = "agentfix.toml";

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

/// One setting in force: its value as the settings spell it (`null` when
/// unset) and the layer it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct InForce {
    /// The setting's name, camelCase.
    pub name: &'static str,
    pub source: Source,
    pub value: serde_json::Value,
}

impl InForce {
    /// The value on one line, for `agentfix check`: a scalar as itself, a
    /// list joined with commas, an object by its keys (`key=value` for a
    /// scalar, the key alone otherwise, so the commands' argv and the MCP
    /// servers' `env` are never shown), `none` for nothing.
    pub fn shown(&self) -> String {
        use serde_json::Value;
        let scalar = |v: &Value| match v {
            Value::String(s) => Some(s.clone()),
            Value::Array(_) | Value::Object(_) => None,
            other => Some(other.to_string()),
        };
        let parts: Vec<String> = match &self.value {
            Value::Array(items) => items.iter().map(|v| scalar(v).unwrap_or_else(|| "…".into())).collect(),
            Value::Object(map) => {
                // By key, whatever order the map keeps.
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                entries.sort_by_key(|(k, _)| *k);
                entries.into_iter().map(|(k, v)| scalar(v).map_or_else(|| k.clone(), |v| format!("{k}={v}"))).collect()
            }
            Value::Null => Vec::new(),
            v => return scalar(v).unwrap_or_default(),
        };
        if parts.is_empty() { "none".to_string() } else { parts.join(", ") }
    }
}

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
    /// How a proposal is checked before it is offered.
    pub verify: VerifyConfig,
    /// How many runs of the task a fix makes (the best is proposed).
    pub candidates: CandidatesConfig,
    /// How `agentfix.fix` answers an editor.
    pub delivery: delivery::Delivery,
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
    /// Every setting in force, with where it came from, in the order
    /// the sections are resolved.
    pub in_force: Vec<InForce>,
}

impl Config {
    /// Resolves the layers: `file` (agentfix.toml) < environment (`env`
    /// looks a variable up) < `editor`, one section at a time.
    pub fn resolve(
        file: &Settings,
        editor: &Settings,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let mut l = Layers { file, editor, env, in_force: Vec::new() };
        let provider = l.provider()?;
        let pricing = l.pricing();
        let (limits, partial_edits) = l.limits()?;
        let limits = Limits {
            max_cost: l.max_cost(&provider.model, &pricing)?,
            // Never above the model's window, when it is known.
            context_budget: crate::pricing::context_window(&provider.model)
                .map_or(limits.context_budget, |window| limits.context_budget.min(window)),
            ..limits
        };
        l.adjust("contextBudget", &limits.context_budget);
        let transcripts = l.transcripts();
        let tools = l.tools();
        let downstream = l.downstream()?;
        let mut commands = l.commands()?;
        let verify = l.verify(&commands)?;
        let candidates = l.candidates()?;
        let delivery = l.delivery()?;
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
            verify,
            candidates,
            delivery,
            transcripts,
            pricing,
            tools,
            mcp,
            project_instructions,
            exclude,
            in_force: l.in_force,
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
        self.in_force.iter().find(|s| s.name == name).map_or(Source::Default, |s| s.source)
    }
}

impl Layers<'_> {
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

    /// Protected patterns add up over the layers; none removes a default.
    fn exclude(&mut self) -> Vec<String> {
        let (file, editor) = (&self.file.exclude, &self.editor.exclude);
        let exclude: Vec<String> = file
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
        self.record("exclude", source, &exclude);
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

/// `Config::resolve` over a test's fixed environment.
#[cfg(test)]
fn test_resolve(
    file: &Settings,
    editor: &Settings,
    env: &'static [(&'static str, &'static str)],
) -> Result<Config, ConfigError> {
    Config::resolve(file, editor, &move |k| env.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_value_in_force_shows_on_one_line_without_what_is_nested() {
        let shown = |value: serde_json::Value| InForce { name: "x", source: Source::Default, value }.shown();
        assert_eq!(shown(json!(null)), "none");
        assert_eq!(shown(json!([])), "none");
        assert_eq!(shown(json!("anthropic")), "anthropic");
        assert_eq!(shown(json!(0.25)), "0.25");
        assert_eq!(shown(json!(["NPM_TOKEN", "MY_*"])), "NPM_TOKEN, MY_*");
        assert_eq!(shown(json!({"test": ["cargo", "test"], "network": true})), "network=true, test");
        // An MCP server's `env` (where tokens go) is never shown.
        assert_eq!(shown(json!({"gh": {"command": "npx", "env": {"GITHUB_TOKEN": "ghp_secret"}}})), "gh");
        // Nor an HTTP server's headers.
        assert_eq!(shown(json!({"web": {"url": "https://x/mcp", "headers": {"Authorization": "Bearer t"}}})), "web");
    }

    use super::limits::PartialEdits;
    use super::settings::Settings;
    use super::test_resolve as resolve;
    use super::*;
    use serde_json::json;
    use std::time::Duration;

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
}
