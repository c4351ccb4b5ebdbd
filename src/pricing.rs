//! What a fix costs: a price table per model (list prices of the current
//! Anthropic and OpenAI models, overridable in the settings), applied to the
//! four kinds of tokens a model API bills, and the billed-equivalent weight
//! the run budget counts in; and the context windows of those models.
//!
//! Prices are US dollars per million tokens. A model is matched by the
//! longest entry that is a prefix of its id (`claude-sonnet-4-5` matches
//! `claude-sonnet-4-5-20250929`), the user's entries before the built-in
//! ones. An unknown model has no price: tokens are shown, not dollars.
//!
//! Its parts:
//! list prices per model (prefix match, the user's `prices` first),
//! `TokenCounts` (input, output, cache read, cache write) with their cost and
//! billed-equivalent weight, `$`/token formatting (`format_tokens`: `41,250
//! tokens`, the one format of every progress line, label and CLI line,
//! through `fix::Spend::describe`)

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The tokens of a request or a run, by how they are billed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenCounts {
    /// Input not read from nor written to the cache.
    pub input: u64,
    pub output: u64,
    /// Input read from the prompt cache.
    pub cache_read: u64,
    /// Input written to the prompt cache.
    pub cache_write: u64,
}

/// What cache reads and writes weigh against plain input in the run budget
/// (Anthropic's list prices: reads at a tenth, 5-minute writes at 1.25).
pub const CACHE_READ_WEIGHT: f64 = 0.1;
pub const CACHE_WRITE_WEIGHT: f64 = 1.25;

impl TokenCounts {
    /// Every input token, cached or not: what the request carried.
    pub fn prompt(&self) -> u64 {
        self.input + self.cache_read + self.cache_write
    }

    /// Billed-equivalent tokens: plain input and output at 1, cache reads at
    /// [`CACHE_READ_WEIGHT`], cache writes at [`CACHE_WRITE_WEIGHT`] (rounded up).
    pub fn billed(&self) -> u64 {
        let cached = self.cache_read as f64 * CACHE_READ_WEIGHT + self.cache_write as f64 * CACHE_WRITE_WEIGHT;
        self.input + self.output + cached.ceil() as u64
    }
}

impl std::ops::AddAssign for TokenCounts {
    fn add_assign(&mut self, o: Self) {
        self.input += o.input;
        self.output += o.output;
        self.cache_read += o.cache_read;
        self.cache_write += o.cache_write;
    }
}

/// A model's list prices, in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Price {
    /// Plain input.
    pub input: f64,
    pub output: f64,
    /// Input read from the cache (default: a tenth of `input`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read: Option<f64>,
    /// Input written to the cache (default: 1.25 × `input`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<f64>,
}

impl Price {
    const fn new(input: f64, output: f64, cache_read: f64, cache_write: f64) -> Self {
        Self { input, output, cache_read: Some(cache_read), cache_write: Some(cache_write) }
    }

    /// The price of cache reads, given or derived from `input`.
    pub fn cache_read_price(&self) -> f64 {
        self.cache_read.unwrap_or(self.input * CACHE_READ_WEIGHT)
    }

    /// The price of cache writes, given or derived from `input`.
    pub fn cache_write_price(&self) -> f64 {
        self.cache_write.unwrap_or(self.input * CACHE_WRITE_WEIGHT)
    }

    /// What `tokens` cost at these prices.
    pub fn cost(&self, tokens: &TokenCounts) -> f64 {
        let (read, write) = (self.cache_read_price(), self.cache_write_price());
        (tokens.input as f64 * self.input
            + tokens.output as f64 * self.output
            + tokens.cache_read as f64 * read
            + tokens.cache_write as f64 * write)
            / 1_000_000.0
    }
}

/// List prices of current models (model id prefix → price), as published by
/// Anthropic and OpenAI; `prices` in the settings overrides or adds entries.
/// OpenAI caches by prefix on its own and bills no cache writes beyond input.
pub const DEFAULT_PRICES: &[(&str, Price)] = &[
    ("claude-opus-4-5", Price::new(5.0, 25.0, 0.5, 6.25)),
    ("claude-opus-4-1", Price::new(15.0, 75.0, 1.5, 18.75)),
    ("claude-opus-4", Price::new(15.0, 75.0, 1.5, 18.75)),
    ("claude-sonnet-4", Price::new(3.0, 15.0, 0.3, 3.75)),
    ("claude-3-7-sonnet", Price::new(3.0, 15.0, 0.3, 3.75)),
    ("claude-haiku-4-5", Price::new(1.0, 5.0, 0.1, 1.25)),
    ("claude-3-5-haiku", Price::new(0.8, 4.0, 0.08, 1.0)),
    ("gpt-5-mini", Price::new(0.25, 2.0, 0.025, 0.25)),
    ("gpt-5-nano", Price::new(0.05, 0.4, 0.005, 0.05)),
    ("gpt-5", Price::new(1.25, 10.0, 0.125, 1.25)),
    ("gpt-4.1-mini", Price::new(0.4, 1.6, 0.1, 0.4)),
    ("gpt-4.1-nano", Price::new(0.1, 0.4, 0.025, 0.1)),
    ("gpt-4.1", Price::new(2.0, 8.0, 0.5, 2.0)),
    ("gpt-4o-mini", Price::new(0.15, 0.6, 0.075, 0.15)),
    ("gpt-4o", Price::new(2.5, 10.0, 1.25, 2.5)),
    ("o4-mini", Price::new(1.1, 4.4, 0.275, 1.1)),
    ("o3", Price::new(2.0, 8.0, 0.5, 2.0)),
];

/// The price of `model`: the longest matching prefix among the user's
/// `overrides`, else among [`DEFAULT_PRICES`]; `None` for an unknown model.
pub fn price_of(model: &str, overrides: &BTreeMap<String, Price>) -> Option<Price> {
    fn longest<'a>(model: &str, entries: impl Iterator<Item = (&'a str, &'a Price)>) -> Option<Price> {
        entries.filter(|(prefix, _)| model.starts_with(prefix)).max_by_key(|(prefix, _)| prefix.len()).map(|(_, p)| *p)
    }
    longest(model, overrides.iter().map(|(k, v)| (k.as_str(), v)))
        .or_else(|| longest(model, DEFAULT_PRICES.iter().map(|(k, v)| (*k, v))))
}

/// The context windows of current models in tokens (model id prefix →
/// window), as published: `contextBudget` is never above the window of its
/// model. Unknown models (local servers) are measured by their first
/// "prompt is too long" refusal instead.
pub const CONTEXT_WINDOWS: &[(&str, u64)] = &[
    ("claude-", 200_000),
    ("gpt-5", 400_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("o4-mini", 200_000),
    ("o3", 200_000),
];

/// The context window of `model` (the longest matching prefix of
/// [`CONTEXT_WINDOWS`]), if known.
pub fn context_window(model: &str) -> Option<u64> {
    CONTEXT_WINDOWS
        .iter()
        .filter(|(prefix, _)| model.starts_with(prefix))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, window)| *window)
}

/// `$0.07`; amounts under a cent as `<$0.01`, large ones with two decimals.
pub fn format_usd(amount: f64) -> String {
    if amount > 0.0 && amount < 0.005 { "<$0.01".to_string() } else { format!("${amount:.2}") }
}

/// `41,250 tokens`, `1 token`: a count of tokens, exact and grouped by
/// thousands. The one format of every label, progress line and summary
/// (the CLI's and the editor's alike).
pub fn format_tokens(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 7);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out.push_str(if n == 1 { " token" } else { " tokens" });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_prefix_wins_and_the_users_entries_first() {
        let none = BTreeMap::new();
        assert_eq!(price_of("claude-sonnet-4-5-20250929", &none).unwrap().input, 3.0);
        assert_eq!(price_of("gpt-4.1-mini-2025-04-14", &none).unwrap().input, 0.4);
        assert_eq!(price_of("gpt-4.1", &none).unwrap().output, 8.0);
        assert_eq!(price_of("gpt-5-mini", &none).unwrap().input, 0.25);
        assert_eq!(price_of("qwen2.5-coder:7b", &none), None);
        let mine = BTreeMap::from([
            ("qwen".to_string(), Price { input: 0.0, output: 0.0, cache_read: None, cache_write: None }),
            ("claude-sonnet-4-5".to_string(), Price { input: 2.0, output: 10.0, cache_read: None, cache_write: None }),
        ]);
        assert_eq!(price_of("qwen2.5-coder:7b", &mine).unwrap().input, 0.0);
        assert_eq!(price_of("claude-sonnet-4-5-20250929", &mine).unwrap().input, 2.0);
        assert_eq!(price_of("claude-sonnet-4-0", &mine).unwrap().input, 3.0, "built-in entries still apply");
    }

    #[test]
    fn costs_weigh_each_kind_of_token() {
        let p = price_of("claude-sonnet-4-5", &BTreeMap::new()).unwrap();
        let t = TokenCounts { input: 1_000_000, output: 100_000, cache_read: 2_000_000, cache_write: 400_000 };
        // 3 + 1.5 + 0.6 + 1.5
        assert!((p.cost(&t) - 6.6).abs() < 1e-9, "{}", p.cost(&t));
        // Without cache prices: a tenth and 1.25 × input.
        let q = Price { input: 2.0, output: 4.0, cache_read: None, cache_write: None };
        let c = TokenCounts { input: 0, output: 0, cache_read: 1_000_000, cache_write: 1_000_000 };
        assert!((q.cost(&c) - 2.7).abs() < 1e-9);
        assert_eq!(t.prompt(), 3_400_000);
        assert_eq!(t.billed(), 1_000_000 + 100_000 + 200_000 + 500_000);
    }

    #[test]
    fn known_models_have_their_window() {
        assert_eq!(context_window("claude-sonnet-4-5-20250929"), Some(200_000));
        assert_eq!(context_window("gpt-4o-mini"), Some(128_000));
        assert_eq!(context_window("gpt-4.1-nano"), Some(1_047_576));
        assert_eq!(context_window("qwen2.5-coder:7b"), None);
    }

    #[test]
    fn amounts_and_counts_read_well() {
        assert_eq!(format_usd(0.0), "$0.00");
        assert_eq!(format_usd(0.001), "<$0.01");
        assert_eq!(format_usd(0.071), "$0.07");
        assert_eq!(format_usd(12.345), "$12.35");
        assert_eq!(format_tokens(0), "0 tokens");
        assert_eq!(format_tokens(1), "1 token");
        assert_eq!(format_tokens(950), "950 tokens");
        assert_eq!(format_tokens(41_250), "41,250 tokens");
        assert_eq!(format_tokens(999_999), "999,999 tokens");
        assert_eq!(format_tokens(2_170_000), "2,170,000 tokens");
    }

    #[test]
    fn user_prices_parse_from_settings_json() {
        let p: Price =
            serde_json::from_value(serde_json::json!({"input": 1.5, "output": 6, "cacheRead": 0.15})).unwrap();
        assert_eq!((p.input, p.output, p.cache_read, p.cache_write), (1.5, 6.0, Some(0.15), None));
        assert!(serde_json::from_value::<Price>(serde_json::json!({"input": 1, "output": 2, "inptu": 3})).is_err());
    }
}
