//! Typed settings and where they come from.
//!
//! Precedence, lowest first: built-in defaults < environment variables <
//! editor settings (`initializationOptions`, and the `settings` of
//! `workspace/didChangeConfiguration`). The API key only ever comes from the
//! environment and is wrapped in [`Secret`], whose `Debug` never shows it.

use serde::Deserialize;

/// The default model: a current Claude Sonnet. Override with `model` or
/// `AGENTFIX_MODEL`.
pub const DEFAULT_MODEL: &str = "claude-sonnet-4-5";
pub const DEFAULT_ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
pub const DEFAULT_MAX_TURNS: u32 = 25;
pub const DEFAULT_MAX_TOKENS: u64 = 2_000_000;
pub const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 8192;

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    Anthropic,
}

impl ProviderKind {
    pub const NAMES: &'static [&'static str] = &["anthropic"];

    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "anthropic" => Some(ProviderKind::Anthropic),
            _ => None,
        }
    }

    /// The environment variable that holds this provider's key.
    pub fn key_var(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "ANTHROPIC_API_KEY",
        }
    }

    fn base_url_var(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "ANTHROPIC_BASE_URL",
        }
    }

    fn default_base_url(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => DEFAULT_ANTHROPIC_BASE_URL,
        }
    }
}

/// Editor settings as sent in `initializationOptions` (camelCase). Every
/// field is optional; unknown fields are ignored.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct Settings {
    pub provider: Option<String>,
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub max_turns: Option<u32>,
    pub max_tokens: Option<u64>,
    pub max_output_tokens: Option<u32>,
}

impl Settings {
    /// Reads settings from a JSON value; `{ "agentfix": {…} }` is unwrapped.
    /// A malformed value is an error that names the field.
    pub fn from_json(v: &serde_json::Value) -> Result<Self, ConfigError> {
        if v.is_null() {
            return Ok(Self::default());
        }
        let v = v.get("agentfix").unwrap_or(v);
        serde_json::from_value(v.clone())
            .map_err(|e| ConfigError::Invalid(format!("invalid agentfix settings: {e}")))
    }

    /// `other` wins where it has a value.
    pub fn merged(&self, other: &Settings) -> Settings {
        Settings {
            provider: other.provider.clone().or_else(|| self.provider.clone()),
            model: other.model.clone().or_else(|| self.model.clone()),
            base_url: other.base_url.clone().or_else(|| self.base_url.clone()),
            max_turns: other.max_turns.or(self.max_turns),
            max_tokens: other.max_tokens.or(self.max_tokens),
            max_output_tokens: other.max_output_tokens.or(self.max_output_tokens),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error(
        "{var} is not set: agentfix needs an API key for the {provider} provider. Set {var} in the environment the editor starts agentfix in (or in your shell for `agentfix fix`)."
    )]
    MissingKey {
        var: &'static str,
        provider: &'static str,
    },
    #[error("{0}")]
    Invalid(String),
}

/// The configuration in force for a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub provider: ProviderKind,
    pub model: String,
    pub base_url: String,
    pub api_key: Option<Secret>,
    pub max_turns: u32,
    /// Budget of input + output tokens over a whole run.
    pub max_tokens: u64,
    /// `max_tokens` of each model request.
    pub max_output_tokens: u32,
}

impl Config {
    /// Resolves settings over the environment (`env` looks a variable up).
    pub fn resolve(
        settings: &Settings,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let env = |k: &str| env(k).filter(|v| !v.trim().is_empty());
        let provider_name = settings
            .provider
            .clone()
            .or_else(|| env("AGENTFIX_PROVIDER"))
            .unwrap_or_else(|| "anthropic".into());
        let provider = ProviderKind::parse(&provider_name).ok_or_else(|| {
            ConfigError::Invalid(format!(
                "unknown provider `{provider_name}` (known: {})",
                ProviderKind::NAMES.join(", ")
            ))
        })?;
        let num = |var: &str| -> Result<Option<u64>, ConfigError> {
            env(var)
                .map(|v| {
                    v.trim()
                        .parse::<u64>()
                        .map_err(|_| ConfigError::Invalid(format!("{var}=`{v}` is not a number")))
                })
                .transpose()
        };
        let max_turns = match settings.max_turns {
            Some(n) => n,
            None => num("AGENTFIX_MAX_TURNS")?
                .map_or(DEFAULT_MAX_TURNS, |n| n.min(u32::MAX as u64) as u32),
        };
        let max_tokens = match settings.max_tokens {
            Some(n) => n,
            None => num("AGENTFIX_MAX_TOKENS")?.unwrap_or(DEFAULT_MAX_TOKENS),
        };
        if max_turns == 0 {
            return Err(ConfigError::Invalid("maxTurns must be at least 1".into()));
        }
        let max_output_tokens = settings
            .max_output_tokens
            .unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS)
            .max(1);
        Ok(Config {
            provider,
            model: settings
                .model
                .clone()
                .or_else(|| env("AGENTFIX_MODEL"))
                .unwrap_or_else(|| DEFAULT_MODEL.into()),
            base_url: settings
                .base_url
                .clone()
                .or_else(|| env(provider.base_url_var()))
                .unwrap_or_else(|| provider.default_base_url().into()),
            api_key: env(provider.key_var()).map(Secret::new),
            max_turns,
            max_tokens,
            max_output_tokens,
        })
    }

    /// Resolves from the process environment.
    pub fn from_process_env(settings: &Settings) -> Result<Config, ConfigError> {
        Self::resolve(settings, &|k| std::env::var(k).ok())
    }

    /// The API key, or the error that tells the user how to set it.
    pub fn require_api_key(&self) -> Result<Secret, ConfigError> {
        self.api_key.clone().ok_or(ConfigError::MissingKey {
            var: self.provider.key_var(),
            provider: ProviderKind::NAMES[self.provider as usize],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn defaults_apply_without_settings_or_env() {
        let c = Config::resolve(&Settings::default(), &env_of(&[])).unwrap();
        assert_eq!(c.provider, ProviderKind::Anthropic);
        assert_eq!(c.model, DEFAULT_MODEL);
        assert_eq!(c.base_url, "https://api.anthropic.com");
        assert_eq!(c.max_turns, 25);
        assert_eq!(c.api_key, None);
        assert_eq!(
            c.require_api_key().unwrap_err().to_string(),
            "ANTHROPIC_API_KEY is not set: agentfix needs an API key for the anthropic provider. Set ANTHROPIC_API_KEY in the environment the editor starts agentfix in (or in your shell for `agentfix fix`)."
        );
    }

    #[test]
    fn editor_settings_override_environment() {
        let env = env_of(&[
            ("AGENTFIX_MODEL", "env-model"),
            ("ANTHROPIC_BASE_URL", "http://env"),
            ("AGENTFIX_MAX_TURNS", "7"),
            ("ANTHROPIC_API_KEY", "sk-secret"),
        ]);
        let c = Config::resolve(&Settings::default(), &env).unwrap();
        assert_eq!(
            (c.model.as_str(), c.base_url.as_str(), c.max_turns),
            ("env-model", "http://env", 7)
        );
        let s = Settings::from_json(&json!({"model": "editor-model", "baseUrl": "http://editor", "maxTurns": 3, "maxTokens": 99})).unwrap();
        let c = Config::resolve(&s, &env).unwrap();
        assert_eq!(
            (
                c.model.as_str(),
                c.base_url.as_str(),
                c.max_turns,
                c.max_tokens
            ),
            ("editor-model", "http://editor", 3, 99)
        );
        assert_eq!(c.require_api_key().unwrap().expose(), "sk-secret");
    }

    #[test]
    fn the_key_never_shows_in_debug_output() {
        let c = Config::resolve(
            &Settings::default(),
            &env_of(&[("ANTHROPIC_API_KEY", "sk-very-secret")]),
        )
        .unwrap();
        let dbg = format!("{c:?}");
        assert!(!dbg.contains("sk-very-secret"), "{dbg}");
        assert!(dbg.contains("<redacted>"));
    }

    #[test]
    fn bad_values_are_clear_errors() {
        let e = Config::resolve(
            &Settings {
                provider: Some("gpt".into()),
                ..Default::default()
            },
            &env_of(&[]),
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "unknown provider `gpt` (known: anthropic)");
        let e = Config::resolve(
            &Settings::default(),
            &env_of(&[("AGENTFIX_MAX_TURNS", "many")]),
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "AGENTFIX_MAX_TURNS=`many` is not a number");
        let e = Settings::from_json(&json!({"maxTurns": "x"})).unwrap_err();
        assert!(
            e.to_string().starts_with("invalid agentfix settings:"),
            "{e}"
        );
        assert_eq!(
            Settings::from_json(&json!({"agentfix": {"model": "m"}}))
                .unwrap()
                .model
                .as_deref(),
            Some("m")
        );
    }

    #[test]
    fn merged_settings_prefer_the_newer_source() {
        let a = Settings {
            model: Some("a".into()),
            max_turns: Some(1),
            ..Default::default()
        };
        let b = Settings {
            model: Some("b".into()),
            ..Default::default()
        };
        let m = a.merged(&b);
        assert_eq!((m.model.as_deref(), m.max_turns), (Some("b"), Some(1)));
    }
}
