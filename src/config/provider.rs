//! The provider section: which model API (`ProviderKind`), which model, where
//! (`baseUrl`, never from agentfix.toml), with which key (`Secret`, only ever
//! from the environment, never shown by `Debug`), how patiently, with what
//! `Effort`. `ProviderConfig` goes whole to `providers::from_config`.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::layers::{Layers, pick};
use super::{ConfigError, Source};

/// The default model: a current Claude Sonnet. Override with `model` or
/// `AGENTFIX_MODEL`.
pub const DEFAULT_MODEL: &str = "claude-sonnet-4-5";
pub const DEFAULT_OPENAI_MODEL: &str = "gpt-4.1";
pub const DEFAULT_ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
pub const DEFAULT_OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
pub const DEFAULT_MAX_RETRIES: u32 = 2;
pub const DEFAULT_CONNECT_TIMEOUT_SECS: u64 = 10;
pub const DEFAULT_IDLE_TIMEOUT_SECS: u64 = 90;
/// Whether the provider's token-counting endpoint is asked (`countTokens`).
pub const DEFAULT_COUNT_TOKENS: bool = false;

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

impl Layers<'_> {
    pub(super) fn provider(&mut self) -> Result<ProviderConfig, ConfigError> {
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
            (Some(e), _, _) => (Some(e), Source::Editor),
            (None, Some(e), _) => (Some(e), Source::Env),
            (None, None, Some(e)) => (Some(e), Source::File),
            (None, None, None) => (None, Source::Default),
        };
        self.record("effort", source, &effort);
        Ok(effort)
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
        self.record("baseUrl", source, &url);
        Ok(url)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_resolve as resolve;
    use super::*;
    use crate::config::Source;
    use crate::config::limits::PartialEdits;
    use crate::config::settings::Settings;
    use serde_json::json;

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
    fn the_key_never_shows_in_debug_output() {
        let c =
            resolve(&Settings::default(), &Settings::default(), &[("ANTHROPIC_API_KEY", "sk-very-secret")]).unwrap();
        let dbg = format!("{c:?}");
        assert!(!dbg.contains("sk-very-secret"), "{dbg}");
        assert!(dbg.contains("<redacted>"));
    }
}
