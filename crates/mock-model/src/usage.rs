//! Usage that follows the request (opt-in per mock, [`MockModel::set_usage_model`]): prompt
//! tokens counted from the request in a canonical order, Anthropic prompt caching at the
//! request's `cache_control` breakpoints, OpenAI's automatic prefix caching, and the counters
//! the economy tests and `benches/economy.rs` read ([`UsageStats`]). Also the `cache_control`
//! placement rules the real Anthropic API enforces (at most 4 breakpoints, none on thinking).
//!
//! Tokens are bytes / 4 of the canonical prompt: tools, then system, then messages. Each tool,
//! system block and message content block is one *unit*, serialised without its
//! `cache_control` (moving a breakpoint does not change the bytes before it) and, for message
//! blocks, prefixed with the role. The cache remembers the prefixes (model + bytes, hashed)
//! that earlier requests wrote; nothing expires.
//!
//! [`MockModel::set_usage_model`]: super::MockModel::set_usage_model

use std::collections::HashSet;
use std::collections::hash_map::DefaultHasher;
use std::hash::Hasher;

use serde_json::Value;

/// The smallest prefix the mock caches, in tokens (Sonnet 4.x and Opus 4/4.1 on Anthropic;
/// OpenAI's automatic caching starts there too).
pub const DEFAULT_MIN_CACHE_TOKENS: u64 = 1024;
/// The most `cache_control` breakpoints one Anthropic request may carry.
pub const MAX_BREAKPOINTS: usize = 4;
/// How many units before a breakpoint the Anthropic cache looks for an earlier write (the
/// real API's lookback of about 20 blocks): what lets a rolling breakpoint hit the prefix the
/// previous request wrote at its own, earlier, breakpoint.
pub const LOOKBACK_UNITS: usize = 20;
/// OpenAI caches prefixes in steps of this many tokens past the minimum.
pub const OPENAI_CACHE_STEP: u64 = 128;

/// How the mock reports prompt usage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UsageModel {
    /// The default: `input_tokens` / `prompt_tokens` = request body length / 4 when the
    /// scripted reply leaves them null, cache fields as scripted.
    #[default]
    Naive,
    /// Tokens from the canonical prompt, with prompt caching: Anthropic at the `cache_control`
    /// breakpoints, OpenAI automatically by prefix. Prefixes shorter than
    /// `min_cache_tokens` are silently not cached.
    Cached { min_cache_tokens: u64 },
}

impl UsageModel {
    /// [`UsageModel::Cached`] with the default minimum of 1024 tokens.
    pub fn cached() -> UsageModel {
        UsageModel::Cached { min_cache_tokens: DEFAULT_MIN_CACHE_TOKENS }
    }
}

/// Counters over the requests the mock answered (valid, within the context limit, with a
/// scripted reply left), for either usage model; [`UsageStats::too_long`] counts the requests
/// refused for the context limit, and [`UsageStats::largest_request`] includes them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UsageStats {
    pub requests: u64,
    /// Sum of the full prompts (what a client without caching pays for).
    pub naive_input: u64,
    /// Sum of the plain (uncached) input.
    pub input: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    /// Requests that read less from the cache than the previous request left in it, and
    /// wrote: the cached prefix was invalidated (by a context edit) and rewritten. The first
    /// write is not a rebuild.
    pub rebuilds: u64,
    /// The largest prompt of any valid request, in tokens, refused ones included.
    pub largest_request: u64,
    /// Requests refused with "prompt is too long" / `context_length_exceeded`.
    pub too_long: u64,
}

impl UsageStats {
    /// Billed-equivalent input: plain input + 1.25 × cache writes + 0.1 × cache reads.
    pub fn billed_input(&self) -> f64 {
        self.input as f64 + 1.25 * self.cache_write as f64 + 0.1 * self.cache_read as f64
    }
}

/// The prompt usage of one request, and the cache entries it writes if it is answered.
#[derive(Debug, Clone, Default)]
pub(super) struct PromptUsage {
    pub(super) total: u64,
    pub(super) input: u64,
    pub(super) cache_read: u64,
    pub(super) cache_write: u64,
    writes: Vec<u64>,
}

/// The prefixes earlier requests wrote, as hashes of (API, model, bytes).
#[derive(Default)]
pub(super) struct PromptCache {
    entries: HashSet<u64>,
}

impl PromptCache {
    pub(super) fn commit(&mut self, usage: &PromptUsage) {
        self.entries.extend(usage.writes.iter().copied());
    }
}

fn tokens(bytes: usize) -> u64 {
    (bytes / 4) as u64
}

fn hasher_for(api: &str, model: &str) -> DefaultHasher {
    let mut hasher = DefaultHasher::new();
    hasher.write(api.as_bytes());
    hasher.write_u8(0);
    hasher.write(model.as_bytes());
    hasher.write_u8(0);
    hasher
}

/// One unit of the canonical Anthropic prompt.
struct Unit {
    bytes: Vec<u8>,
    breakpoint: bool,
}

fn without_cache_control(value: &Value) -> (String, bool) {
    match value {
        Value::Object(object) if object.contains_key("cache_control") => {
            let mut object = object.clone();
            let marked = !object.remove("cache_control").is_some_and(|c| c.is_null());
            (Value::Object(object).to_string(), marked)
        }
        other => (other.to_string(), false),
    }
}

fn anthropic_units(body: &Value) -> Vec<Unit> {
    let mut units = Vec::new();
    let mut push = |prefix: &str, value: &Value| {
        let (text, breakpoint) = without_cache_control(value);
        units.push(Unit { bytes: format!("{prefix}{text}").into_bytes(), breakpoint });
    };
    for tool in body["tools"].as_array().into_iter().flatten() {
        push("tool:", tool);
    }
    match &body["system"] {
        Value::Array(blocks) => blocks.iter().for_each(|block| push("system:", block)),
        Value::Null => {}
        other => push("system:", other),
    }
    for message in body["messages"].as_array().into_iter().flatten() {
        let role = format!("{}:", message["role"].as_str().unwrap_or_default());
        match &message["content"] {
            Value::Array(blocks) => blocks.iter().for_each(|block| push(&role, block)),
            other => push(&role, other),
        }
    }
    if body.get("cache_control").is_some_and(|c| !c.is_null())
        && let Some(last) = units.last_mut()
    {
        last.breakpoint = true;
    }
    units
}

/// The `cache_control` rules of the real API: not on thinking blocks, at most
/// [`MAX_BREAKPOINTS`] in all (a top-level `cache_control` counts as one).
pub(super) fn check_breakpoints(body: &Value) -> Result<(), String> {
    let marked = |v: &Value| v.get("cache_control").is_some_and(|c| !c.is_null());
    let mut found = usize::from(marked(body));
    found += body["tools"].as_array().into_iter().flatten().filter(|t| marked(t)).count();
    found += body["system"].as_array().into_iter().flatten().filter(|b| marked(b)).count();
    for (n, message) in body["messages"].as_array().into_iter().flatten().enumerate() {
        for (k, block) in message["content"].as_array().into_iter().flatten().enumerate() {
            if !marked(block) {
                continue;
            }
            let kind = block["type"].as_str().unwrap_or_default();
            if matches!(kind, "thinking" | "redacted_thinking") {
                return Err(format!("messages.{n}.content.{k}.{kind}.cache_control: Extra inputs are not permitted"));
            }
            found += 1;
        }
    }
    if found > MAX_BREAKPOINTS {
        return Err(format!(
            "A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {found}."
        ));
    }
    Ok(())
}

/// Plain prompt tokens of an Anthropic request, without caching (the canonical count).
fn anthropic_total(units: &[Unit]) -> u64 {
    tokens(units.iter().map(|u| u.bytes.len()).sum()).max(1)
}

/// The prompt tokens of an Anthropic request as the cached usage model counts them, cached or
/// not: what `usage` reports in all (input + cache writes + cache reads), and what
/// `count_tokens` answers for the same prompt.
pub(super) fn anthropic_prompt_tokens(body: &Value) -> u64 {
    anthropic_total(&anthropic_units(body))
}

/// The usage of an Anthropic request against `cache`: the longest prefix ending at most
/// [`LOOKBACK_UNITS`] before a breakpoint that an earlier request wrote is read; the part up
/// to the last breakpoint past it is written; the rest is plain input.
pub(super) fn anthropic_usage(body: &Value, cache: &PromptCache, min_cache_tokens: u64) -> PromptUsage {
    let units = anthropic_units(body);
    let total = anthropic_total(&units);
    let mut hasher = hasher_for("anthropic", body["model"].as_str().unwrap_or_default());
    let mut bytes = 0;
    let mut prefix_hash = Vec::with_capacity(units.len());
    let mut prefix_tokens = Vec::with_capacity(units.len());
    for unit in &units {
        hasher.write(&unit.bytes);
        bytes += unit.bytes.len();
        prefix_hash.push(hasher.finish());
        prefix_tokens.push(tokens(bytes));
    }
    let cacheable = |i: usize| prefix_tokens[i] >= min_cache_tokens;
    let breakpoints: Vec<usize> = (0..units.len()).filter(|&i| units[i].breakpoint && cacheable(i)).collect();
    let Some(&last) = breakpoints.last() else {
        return PromptUsage { total, input: total, ..PromptUsage::default() };
    };
    let hit = breakpoints
        .iter()
        .filter_map(|&b| {
            (b.saturating_sub(LOOKBACK_UNITS)..=b)
                .rev()
                .find(|&p| cacheable(p) && cache.entries.contains(&prefix_hash[p]))
        })
        .max();
    let cache_read = hit.map_or(0, |p| prefix_tokens[p]);
    let cache_write = prefix_tokens[last] - cache_read;
    let writes = breakpoints.iter().filter(|&&b| hit.is_none_or(|p| b > p)).map(|&b| prefix_hash[b]).collect();
    PromptUsage { total, input: total - cache_read - cache_write, cache_read, cache_write, writes }
}

/// The canonical OpenAI prompt: the tools, then every message, serialised.
fn openai_bytes(body: &Value) -> Vec<u8> {
    let mut bytes = Vec::new();
    if let Some(tools) = body.get("tools") {
        bytes.extend_from_slice(format!("tools:{tools}").as_bytes());
    }
    for message in body["messages"].as_array().into_iter().flatten() {
        bytes.extend_from_slice(message.to_string().as_bytes());
    }
    bytes
}

/// The usage of an OpenAI request against `cache`: the longest prefix that an earlier request
/// had, of `min_cache_tokens` plus a multiple of [`OPENAI_CACHE_STEP`] tokens, is cached.
/// Every such prefix of this request is remembered; nothing counts as a cache write.
pub(super) fn openai_usage(body: &Value, cache: &PromptCache, min_cache_tokens: u64) -> PromptUsage {
    let bytes = openai_bytes(body);
    let total = tokens(bytes.len()).max(1);
    let mut hasher = hasher_for("openai", body["model"].as_str().unwrap_or_default());
    let mut fed = 0;
    let mut cached = 0;
    let mut writes = Vec::new();
    let mut length = min_cache_tokens.max(1);
    while length <= total {
        let end = (length * 4) as usize;
        hasher.write(&bytes[fed..end]);
        fed = end;
        let hash = hasher.finish();
        if cache.entries.contains(&hash) {
            cached = length;
        }
        writes.push(hash);
        length += OPENAI_CACHE_STEP;
    }
    PromptUsage { total, input: total - cached, cache_read: cached, cache_write: 0, writes }
}
