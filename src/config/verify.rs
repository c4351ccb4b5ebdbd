//! The verify section: how agentfix checks a proposal before it offers it
//! (`verify`: the verify commands, the rounds, the diagnostics check, and
//! whether an unverified proposal is offered), used by `fix::verify`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ConfigError;
use super::Source;
use super::commands::CommandsConfig;
use super::layers::{Layers, pick};

/// The most rounds a run takes by default: the loop to its end and a check,
/// then one round of feedback.
pub const DEFAULT_VERIFY_ROUNDS: u32 = 2;

/// `verify`, as the settings spell it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct VerifySettings {
    /// Names of configured `commands` that check a proposal (e.g. `["test"]`), run in the scratch copy with the proposal applied, after the same approval as `run_command`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commands: Option<Vec<String>>,
    /// Rounds a run may take at most, a round being the loop to its end plus one check (2: one round of feedback).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub rounds: Option<u32>,
    /// Compare the diagnostics of the changed files before and after the proposal (off for projects without a language server).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<bool>,
    /// Offer a proposal that did not verify (marked `not verified: …`) rather than drop it and show the findings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offer_unverified: Option<bool>,
}

/// How a proposal is checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyConfig {
    /// Names of `commands`, in order.
    pub commands: Vec<String>,
    /// At least 1.
    pub rounds: u32,
    pub diagnostics: bool,
    pub offer_unverified: bool,
}

impl Default for VerifyConfig {
    fn default() -> Self {
        Self { commands: Vec::new(), rounds: DEFAULT_VERIFY_ROUNDS, diagnostics: true, offer_unverified: true }
    }
}

impl Layers<'_> {
    /// `verify`, whole from the highest layer that sets it; its commands
    /// must be configured ones.
    pub(super) fn verify(&mut self, commands: &CommandsConfig) -> Result<VerifyConfig, ConfigError> {
        let l = self;
        let given = pick!(l, "verify", verify, None::<VerifySettings>, VerifySettings::default());
        let d = VerifyConfig::default();
        let names = given.commands.unwrap_or_default();
        if let Some(unknown) = names.iter().find(|n| !commands.entries.contains_key(n.as_str())) {
            let known: Vec<&str> = commands.entries.keys().map(String::as_str).collect();
            let known = if known.is_empty() { "none are configured".to_string() } else { known.join(", ") };
            return Err(ConfigError::Invalid(format!(
                "verify.commands: `{unknown}` is not one of the configured `commands` ({known})"
            )));
        }
        if given.rounds == Some(0) {
            return Err(ConfigError::Invalid("verify.rounds must be at least 1".into()));
        }
        Ok(VerifyConfig {
            commands: names,
            rounds: given.rounds.unwrap_or(d.rounds),
            diagnostics: given.diagnostics.unwrap_or(d.diagnostics),
            offer_unverified: given.offer_unverified.unwrap_or(d.offer_unverified),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::config::settings::Settings;

    /// Settings with `verify`, and a command `test`.
    fn with_verify(v: serde_json::Value) -> Settings {
        Settings::from_json(&serde_json::json!({ "verify": v, "commands": {"test": ["true"]} })).unwrap()
    }

    fn resolve(editor: &Settings) -> Result<Config, ConfigError> {
        Config::resolve(&Settings::default(), editor, &|_| None)
    }

    #[test]
    fn verify_defaults_to_two_rounds_with_diagnostics_and_offers_unverified_proposals() {
        let c = resolve(&Settings::default()).unwrap();
        assert_eq!(c.verify, VerifyConfig::default());
        assert_eq!((c.verify.rounds, c.verify.diagnostics, c.verify.offer_unverified), (2, true, true));
        assert!(c.verify.commands.is_empty());
        let c = resolve(&with_verify(serde_json::json!({"commands": ["test"], "rounds": 3, "offerUnverified": false})))
            .unwrap();
        assert_eq!(c.verify.commands, ["test"]);
        assert_eq!((c.verify.rounds, c.verify.diagnostics, c.verify.offer_unverified), (3, true, false));
        assert_eq!(c.source("verify"), Source::Editor);
    }

    #[test]
    fn verify_names_only_configured_commands_and_at_least_one_round() {
        let e = resolve(&with_verify(serde_json::json!({"commands": ["tests"]}))).unwrap_err().to_string();
        assert_eq!(e, "verify.commands: `tests` is not one of the configured `commands` (test)");
        let e = resolve(&with_verify(serde_json::json!({"rounds": 0}))).unwrap_err().to_string();
        assert_eq!(e, "verify.rounds must be at least 1");
        let e = Settings::from_json(&serde_json::json!({"verify": {"round": 2}})).unwrap_err().to_string();
        assert!(e.contains("round"), "a misspelt key of verify is refused: {e}");
    }
}
