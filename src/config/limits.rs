//! The limits section: what bounds one run (`Limits`, taken whole by the
//! agent loop: turns, tokens, output per request, context budget and
//! `ContextEditing`, time, `CostLimit` at the model's price) and what becomes
//! of the edits of a run a limit stopped (`PartialEdits`).

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::layers::{Layers, pick, pick_lowest};
use super::prices::PricingConfig;
use super::{ConfigError, Source};

pub const DEFAULT_MAX_TURNS: u32 = 40;
pub const DEFAULT_MAX_TOKENS: u64 = 2_000_000;
pub const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 8192;
/// Estimated prompt tokens of one request at most (`contextBudget`).
pub const DEFAULT_CONTEXT_BUDGET: u64 = 100_000;
pub const DEFAULT_TIMEOUT_SECS: u64 = 300;

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

impl Layers<'_> {
    pub(super) fn limits(&mut self) -> Result<(Limits, PartialEdits), ConfigError> {
        let l = self;
        let max_turns = pick_lowest!(
            l,
            "maxTurns",
            max_turns,
            l.num("AGENTFIX_MAX_TURNS")?.map(|n| n.min(u32::MAX as u64) as u32),
            DEFAULT_MAX_TURNS
        );
        if max_turns == 0 {
            return Err(ConfigError::Invalid("maxTurns must be at least 1".into()));
        }
        let max_tokens = pick_lowest!(l, "maxTokens", max_tokens, l.num("AGENTFIX_MAX_TOKENS")?, DEFAULT_MAX_TOKENS);
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
    pub(super) fn max_cost(&mut self, model: &str, pricing: &PricingConfig) -> Result<Option<CostLimit>, ConfigError> {
        let env = match self.env("AGENTFIX_MAX_COST_USD") {
            None => None,
            Some(v) => Some(v.trim().parse::<f64>().map_err(|_| {
                ConfigError::Invalid(format!("AGENTFIX_MAX_COST_USD=`{v}` is not a number of dollars"))
            })?),
        };
        // agentfix.toml may only lower it (no bound counts as the highest).
        let given = self.editor.max_cost_usd.map(|v| (v, Source::Editor)).or(env.map(|v| (v, Source::Env)));
        let (usd, source) = match (given, self.file.max_cost_usd) {
            (Some((v, s)), Some(f)) if f >= v => (v, s),
            (Some((v, s)), None) => (v, s),
            (_, Some(f)) => (f, Source::File),
            (None, None) => {
                self.record("maxCostUsd", Source::Default, &None::<f64>);
                return Ok(None);
            }
        };
        self.record("maxCostUsd", source, &usd);
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
}

#[cfg(test)]
mod tests {
    use super::super::test_resolve as resolve;
    use super::*;
    use crate::config::Source;
    use crate::config::settings::Settings;
    use serde_json::json;

    #[test]
    fn names_are_the_settings_own_spelling() {
        for p in [PartialEdits::Offer, PartialEdits::Discard] {
            assert_eq!(serde_json::to_value(p).unwrap(), json!(p.name()));
        }
        for c in [ContextEditing::Economy, ContextEditing::Budget] {
            assert_eq!(serde_json::to_value(c).unwrap(), json!(c.name()));
        }
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
        // The file may lower the environment's bound, never raise it.
        let c = resolve(&file, &Settings::default(), &[("AGENTFIX_MAX_COST_USD", "1.25")]).unwrap();
        assert_eq!((c.limits.max_cost.unwrap().usd, c.source("maxCostUsd")), (0.5, Source::File));
        let c = resolve(&file, &Settings::default(), &[("AGENTFIX_MAX_COST_USD", "0.25")]).unwrap();
        assert_eq!((c.limits.max_cost.unwrap().usd, c.source("maxCostUsd")), (0.25, Source::Env));
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
}
