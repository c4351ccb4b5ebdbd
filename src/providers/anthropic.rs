//! The Anthropic Messages API (`POST {base}/v1/messages`), streaming.
//!
//! The SSE stream is parsed by [`http::Sse`]; blocks are accumulated by
//! index (text, `input_json_delta` parsed at `content_block_stop`, thinking
//! and signatures), usage from `message_delta` overwrites, `ping` and unknown
//! events are ignored, and an `error` event discards the partial turn and
//! goes through the retry policy (the rest of the body is never read). The
//! strings of a block are appended to `String`s and put into the block's
//! JSON once, when it stops, so a long answer costs linear time. The
//! assembled message is the JSON the non-streaming API would have returned,
//! decoded by [`decode_response`]. Assistant content is kept verbatim
//! (`Message::raw`) and echoed back.
//!
//! With `countTokens` on, [`ModelClient::count_tokens`] asks
//! `POST {base}/v1/messages/count_tokens` (free, nothing generated) with the
//! Messages body of the same request minus the fields that endpoint refuses
//! ([`encode_count_request`]), so the count covers the same system blocks,
//! tools and `cache_control` markers as the request it measures.
//!
//! With `effort` set and a model that has extended thinking
//! ([`thinking_for`]), every request asks for it
//! (`thinking: {type: "enabled", budget_tokens}`, [`Thinking`]), requests
//! without tools included (`tool_choice: none` is allowed with thinking; only
//! a forced choice is refused), so a conversation stays in one thinking mode
//! and its cached prefix stays valid. The thinking blocks come back with
//! their signatures and are echoed verbatim like any assistant content; a
//! request continuing a turn whose thinking start is gone (compacted away)
//! goes without thinking, which the API would refuse there
//! ([`turn_keeps_its_thinking`]).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::ModelClient;
use super::encoded::{Body, Encoded};
use super::http::{self, Endpoint};
use super::retry::with_retries;
use crate::config::provider::Effort;
use crate::model::{
    Block, Message, ModelError, ModelErrorKind, ModelRequest, ModelResponse, Role, StopReason, StreamUpdate, ToolInput,
    Usage,
};

pub const API_VERSION: &str = "2023-06-01";
const NAME: &str = "Anthropic";

/// The longest wait for a token count (its answer included): it is one
/// small JSON object, and the request it measures is waiting for it.
const COUNT_TIMEOUT: Duration = Duration::from_secs(15);
/// Largest token-count answer read (`{"input_tokens": N}` is a few bytes).
const MAX_COUNT_BODY: usize = 64 * 1024;

pub struct Anthropic {
    http: http::LazyClient,
    /// The messages' texts of the last request, sent again from here.
    encoded: Encoded,
    url: String,
    count_url: String,
    endpoint: Endpoint,
    /// Whether [`ModelClient::count_tokens`] asks the API (`countTokens`).
    count_tokens: bool,
    /// Extended thinking on every request (`effort`, for a model that has it).
    thinking: Option<Thinking>,
}

/// The smallest `budget_tokens` the API accepts.
pub const MIN_THINKING_BUDGET: u32 = 1024;

/// The extended thinking budget of each `effort`, in tokens: `low` a couple
/// of thousand (a lint fix needs little), `medium` as much as the default
/// `maxOutputTokens`, `high` three times that. All at least
/// [`MIN_THINKING_BUDGET`], and far enough under every model's output limit
/// that the answer keeps its room (see [`Thinking::sizes`]).
pub fn thinking_budget(effort: Effort) -> u32 {
    match effort {
        Effort::Low => 2048,
        Effort::Medium => 8192,
        Effort::High => 24_576,
    }
}

/// The models known to have extended thinking, by id prefix (the longest
/// match wins), with the most output tokens, thinking included, one response
/// of theirs may have (the API refuses a larger `max_tokens`).
pub const THINKING_MODELS: &[(&str, u32)] = &[
    ("claude-opus-4-5", 64_000),
    ("claude-opus-4", 32_000),
    ("claude-sonnet-4", 64_000),
    ("claude-3-7-sonnet", 64_000),
    ("claude-haiku-4-5", 64_000),
];

/// Extended thinking as one client asks for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thinking {
    /// `budget_tokens` ([`thinking_budget`]).
    pub budget_tokens: u32,
    /// The model's output limit ([`THINKING_MODELS`]).
    pub max_output: u32,
}

impl Thinking {
    /// `(max_tokens, budget_tokens)` of a request that asks for `requested`
    /// output tokens. Thinking tokens count against `max_tokens`, and the API
    /// wants `budget_tokens < max_tokens`, so `max_tokens` is raised to the
    /// budget plus the requested output: the answer keeps all the room the
    /// caller asked for. Past the model's output limit `max_tokens` stays at
    /// that limit (or at `requested`, when that is more) and the budget takes
    /// its share of it, leaving at least one token. `None` when what is left
    /// is under [`MIN_THINKING_BUDGET`]: the request goes without thinking.
    pub fn sizes(self, requested: u32) -> Option<(u32, u32)> {
        let max_tokens = requested.saturating_add(self.budget_tokens).min(self.max_output.max(requested));
        let budget = self.budget_tokens.min(max_tokens.saturating_sub(1));
        (budget >= MIN_THINKING_BUDGET).then_some((max_tokens, budget))
    }
}

/// Whether `model` is known to have extended thinking: its output limit.
pub fn thinking_model(model: &str) -> Option<u32> {
    THINKING_MODELS.iter().filter(|(prefix, _)| model.starts_with(prefix)).max_by_key(|(p, _)| p.len()).map(|(_, n)| *n)
}

/// The thinking `effort` asks of `model`: `None` when unset, or when the
/// model is not known to think (the API would refuse `thinking`).
pub fn thinking_for(model: &str, effort: Option<Effort>) -> Option<Thinking> {
    let effort = effort?;
    let max_output = thinking_model(model)?;
    Some(Thinking { budget_tokens: thinking_budget(effort), max_output })
}

/// The answer of `POST /v1/messages/count_tokens` (the SDK's
/// `types/message_tokens_count.py`).
#[derive(Debug, Deserialize)]
struct TokenCount {
    input_tokens: u64,
}

impl Anthropic {
    pub fn new(endpoint: Endpoint) -> Self {
        let base = endpoint.base_url.trim_end_matches('/');
        Self {
            http: http::LazyClient::new(endpoint.connect_timeout),
            encoded: Encoded::default(),
            url: format!("{base}/v1/messages"),
            count_url: format!("{base}/v1/messages/count_tokens"),
            endpoint,
            count_tokens: false,
            thinking: None,
        }
    }

    /// With `effort` set, every request asks for extended thinking
    /// ([`thinking_for`]); a model not known to have it is asked for none,
    /// with a warning (`agentfix check` says so too).
    pub fn with_effort(mut self, effort: Option<Effort>) -> Self {
        self.thinking = thinking_for(&self.endpoint.model, effort);
        if let Some(effort) = effort
            && self.thinking.is_none()
        {
            tracing::warn!(
                model = %self.endpoint.model,
                effort = effort.name(),
                "the model is not known to have extended thinking; effort is ignored"
            );
        }
        self
    }

    /// With `on`, [`ModelClient::count_tokens`] asks the API's counting
    /// endpoint; without, it answers `None` and sends nothing.
    pub fn with_token_counting(mut self, on: bool) -> Self {
        self.count_tokens = on;
        self
    }

    /// A POST of `body` to `url` with the headers every Messages request
    /// carries: `anthropic-version` and the key.
    fn post(&self, url: &str, body: impl Into<reqwest::Body>) -> reqwest::RequestBuilder {
        let mut request = self
            .http
            .client()
            .post(url)
            .header("anthropic-version", API_VERSION)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        if let Some(key) = &self.endpoint.api_key {
            request = request.header("x-api-key", key.expose());
        }
        request
    }

    /// Sends `request`, waiting at most `within` for the response headers;
    /// a status other than 2xx is the API's error, with its retry hints.
    async fn send(&self, request: reqwest::RequestBuilder, within: Duration) -> Result<reqwest::Response, ModelError> {
        let response = match tokio::time::timeout(within, request.send()).await {
            Err(_) => {
                return Err(ModelError::new(
                    ModelErrorKind::Network,
                    None,
                    format!("the {NAME} API did not answer within {} s", within.as_secs_f32()),
                ));
            }
            Ok(r) => r.map_err(|e| http::network_error(NAME, &e))?,
        };
        let status = response.status().as_u16();
        if !(200..300).contains(&status) {
            let (should, after) = http::retry_hints(response.headers());
            let (text, cut) = http::error_body(response, within).await;
            let mut e = http_error(status, &text, &self.endpoint.key_source);
            e.message.push_str(cut.as_deref().unwrap_or_default());
            e.retryable = should.unwrap_or(http::status_retryable(status));
            e.retry_after = after;
            return Err(e);
        }
        Ok(response)
    }

    async fn attempt(
        &self,
        body: bytes::Bytes,
        updates: &(dyn Fn(StreamUpdate) + Send + Sync),
    ) -> Result<ModelResponse, ModelError> {
        let idle = self.endpoint.idle_timeout;
        let response = self.send(self.post(&self.url, body), idle).await?;
        let mut events = http::sse(response, idle, NAME);
        let mut acc = Accumulator::default();
        while let Some(ev) = events.next().await? {
            if acc.apply(&ev.event, &ev.data, updates)? {
                return acc.finish();
            }
        }
        Err(ModelError::new(ModelErrorKind::Network, None, format!("the {NAME} stream ended before message_stop")))
    }

    /// One `count_tokens` request: its answer within [`COUNT_TIMEOUT`] (or
    /// the idle timeout, when shorter).
    async fn count_attempt(&self, body: &Value) -> Result<u64, ModelError> {
        let within = COUNT_TIMEOUT.min(self.endpoint.idle_timeout);
        let response =
            self.send(self.post(&self.count_url, serde_json::to_vec(body).unwrap_or_default()), within).await?;
        let status = response.status().as_u16();
        let answer = http::read_capped(response, MAX_COUNT_BODY, within).await;
        if let Some(why) = answer.failed {
            return Err(ModelError::new(
                ModelErrorKind::Network,
                None,
                format!("the {NAME} API's token count could not be read: {why}"),
            ));
        }
        let decoded = if answer.cut {
            Err(format!("an answer over {}", http::size(MAX_COUNT_BODY as u64)))
        } else {
            serde_json::from_slice::<TokenCount>(&answer.bytes).map_err(|e| e.to_string())
        };
        decoded.map(|c| c.input_tokens).map_err(|why| {
            let mut e = ModelError::new(
                ModelErrorKind::Decode,
                Some(status),
                format!("unexpected token count from the {NAME} API: {why}"),
            );
            e.retryable = false;
            e
        })
    }
}

#[async_trait]
impl ModelClient for Anthropic {
    async fn complete(
        &self,
        request: ModelRequest<'_>,
        updates: &(dyn Fn(StreamUpdate) + Send + Sync),
    ) -> Result<ModelResponse, ModelError> {
        let mut body = encode_body(&self.endpoint.model, &request, self.thinking, &self.encoded);
        body.head["stream"] = Value::Bool(true);
        let body = bytes::Bytes::from(body.to_bytes());
        with_retries(self.endpoint.max_retries, updates, |_| self.attempt(body.clone(), updates)).await
    }

    async fn count_tokens(&self, request: ModelRequest<'_>) -> Result<Option<u64>, ModelError> {
        if !self.count_tokens {
            return Ok(None);
        }
        let body = encode_count_request(&self.endpoint.model, &request, self.thinking);
        let n = with_retries(self.endpoint.max_retries, &|_| {}, |_| self.count_attempt(&body)).await?;
        tracing::debug!(input_tokens = n, messages = request.messages.len(), "counted the prompt");
        Ok(Some(n))
    }

    /// With thinking, the `max_tokens` the request is sent with.
    fn output_ceiling(&self, requested: u32) -> u32 {
        self.thinking.and_then(|t| t.sizes(requested)).map_or(requested, |(max_tokens, _)| max_tokens)
    }

    async fn check(&self) -> Result<String, ModelError> {
        let url = format!("{}/v1/models/{}", self.endpoint.base_url.trim_end_matches('/'), self.endpoint.model);
        let mut request = self.http.client().get(&url).header("anthropic-version", API_VERSION);
        if let Some(key) = &self.endpoint.api_key {
            request = request.header("x-api-key", key.expose());
        }
        let response = request.send().await.map_err(|e| http::network_error(NAME, &e))?;
        let status = response.status().as_u16();
        if (200..300).contains(&status) {
            Ok(format!("HTTP {status} from GET {url}"))
        } else {
            let (text, cut) = http::error_body(response, self.endpoint.idle_timeout).await;
            let mut e = http_error(status, &text, &self.endpoint.key_source);
            e.message.push_str(cut.as_deref().unwrap_or_default());
            Err(e)
        }
    }
}

/// Assembles a streamed message.
#[derive(Default)]
struct Accumulator {
    message: Value,
    blocks: BTreeMap<u64, Value>,
    /// `partial_json` per tool block index.
    json: HashMap<u64, String>,
    /// The streamed strings (`text`, `thinking`, `signature`) of open
    /// blocks, by block index and key: appended here, put into the block
    /// once ([`Accumulator::flush`]).
    strings: HashMap<(u64, &'static str), String>,
    /// Tool blocks whose input was not a JSON object.
    invalid: HashMap<u64, ToolInput>,
    /// Bytes of block strings copied so far (flushes move them, never
    /// copy): linear in the text received, which a test checks.
    copied: usize,
}

impl Accumulator {
    /// Applies one event; true at `message_stop`.
    fn apply(
        &mut self,
        event: &str,
        data: &str,
        updates: &(dyn Fn(StreamUpdate) + Send + Sync),
    ) -> Result<bool, ModelError> {
        if event == "ping" || data.is_empty() {
            return Ok(false);
        }
        let v: Value = serde_json::from_str(data).map_err(|e| {
            ModelError::new(ModelErrorKind::Network, Some(200), format!("bad {NAME} stream event `{event}`: {e}"))
        })?;
        let index = v["index"].as_u64().unwrap_or(0);
        match v["type"].as_str().unwrap_or(event) {
            "message_start" => self.message_start(&v["message"]),
            "content_block_start" => self.block_start(index, v["content_block"].clone(), updates),
            "content_block_delta" => self.block_delta(index, &v["delta"], updates),
            "content_block_stop" => self.block_stop(index),
            "message_delta" => self.message_delta(&v["delta"], &v["usage"]),
            "message_stop" => return Ok(true),
            "error" => return Err(error_from_body(&v, None, "")),
            other => tracing::debug!(event = other, "ignoring unknown stream event"),
        }
        Ok(false)
    }

    /// `message_start`: the message without its content. One that is not an
    /// object (found by fuzzing) becomes an empty message instead, since the
    /// fields set on it later would panic on anything else.
    fn message_start(&mut self, message: &Value) {
        self.message = Some(message).filter(|m| m.is_object()).cloned().unwrap_or_else(|| json!({}));
    }

    /// `content_block_start`: a new block at `index`; a tool call starts
    /// collecting its input's text.
    fn block_start(&mut self, index: u64, block: Value, updates: &(dyn Fn(StreamUpdate) + Send + Sync)) {
        if block["type"] == "tool_use" {
            updates(StreamUpdate::ToolStart(block["name"].as_str().unwrap_or_default().to_string()));
            self.json.insert(index, String::new());
        }
        self.strings.retain(|(i, _), _| *i != index);
        self.blocks.insert(index, block);
    }

    /// `content_block_delta`: a piece of text, tool input, thinking,
    /// signature or a citation for block `index`.
    fn block_delta(&mut self, index: u64, delta: &Value, updates: &(dyn Fn(StreamUpdate) + Send + Sync)) {
        let block = self.blocks.entry(index).or_insert_with(|| json!({"type": "text", "text": ""}));
        let piece = |key: &str| delta[key].as_str().unwrap_or_default();
        match delta["type"].as_str() {
            Some("text_delta") => {
                let t = piece("text");
                self.append(index, "text", t);
                updates(StreamUpdate::Text(t.to_string()));
            }
            Some("input_json_delta") => self.json.entry(index).or_default().push_str(piece("partial_json")),
            Some("thinking_delta") => self.append(index, "thinking", piece("thinking")),
            Some("signature_delta") => self.append(index, "signature", piece("signature")),
            Some("citations_delta") => {
                if !block["citations"].is_array() {
                    block["citations"] = json!([]);
                }
                if let Some(c) = block["citations"].as_array_mut() {
                    c.push(delta["citation"].clone());
                }
            }
            other => tracing::debug!(?other, "ignoring unknown delta type"),
        }
    }

    /// `content_block_stop`: block `index`'s strings go into its JSON, and
    /// a tool call's input text is parsed. Input that is not an object is
    /// kept aside (the block's JSON, echoed, gets `{}`).
    fn block_stop(&mut self, index: u64) {
        self.flush(Some(index));
        if let Some(raw) = self.json.remove(&index)
            && let Some(block) = self.blocks.get_mut(&index)
        {
            block["input"] = match ToolInput::parse(raw) {
                ToolInput::Object(map) => Value::Object(map),
                malformed => {
                    self.invalid.insert(index, malformed);
                    json!({})
                }
            };
        }
    }

    /// `message_delta`: the stop reason and its details; usage overwrites,
    /// key by key.
    fn message_delta(&mut self, delta: &Value, usage: &Value) {
        for key in ["stop_reason", "stop_sequence", "stop_details"] {
            if let Some(x) = delta.get(key) {
                self.message[key] = x.clone();
            }
        }
        if let Some(usage) = usage.as_object() {
            if !self.message["usage"].is_object() {
                self.message["usage"] = json!({});
            }
            for (k, x) in usage {
                if !x.is_null() {
                    self.message["usage"][k] = x.clone();
                }
            }
        }
    }

    /// Appends a streamed piece to a block's string.
    fn append(&mut self, index: u64, key: &'static str, piece: &str) {
        let s = match self.strings.entry((index, key)) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                // The value the block started with (normally "").
                let start = self.blocks.get(&index).and_then(|b| b[key].as_str()).unwrap_or_default();
                self.copied += start.len();
                e.insert(start.to_string())
            }
        };
        self.copied += piece.len();
        s.push_str(piece);
    }

    /// Moves the strings of block `index` (all blocks: `None`) into their
    /// JSON, without copying them.
    fn flush(&mut self, index: Option<u64>) {
        let keys: Vec<(u64, &'static str)> =
            self.strings.keys().filter(|(i, _)| index.is_none_or(|want| *i == want)).copied().collect();
        for key in keys {
            if let (Some(s), Some(block)) = (self.strings.remove(&key), self.blocks.get_mut(&key.0))
                && let Some(obj) = block.as_object_mut()
            {
                obj.insert(key.1.to_string(), Value::String(s));
            }
        }
    }

    fn finish(mut self) -> Result<ModelResponse, ModelError> {
        self.flush(None);
        // A tool block left open (stream cut at max_tokens) keeps its raw text.
        for (index, raw) in std::mem::take(&mut self.json) {
            if let Some(block) = self.blocks.get_mut(&index) {
                block["input"] = json!({});
            }
            self.invalid.insert(index, ToolInput::malformed(raw));
        }
        let order: Vec<u64> = self.blocks.keys().copied().collect();
        self.message["content"] = Value::Array(self.blocks.into_values().collect());
        let mut response = decode_response(self.message)?;
        for (pos, index) in order.iter().enumerate() {
            if let Some(malformed) = self.invalid.remove(index)
                && let Some(Block::ToolUse { input, .. }) = response.message.content.get_mut(pos)
            {
                *input = malformed;
            }
        }
        Ok(response)
    }
}

/// Maps an Anthropic error body (`{"type":"error","error":{type,message}}`)
/// to a [`ModelError`] that says what to do.
fn error_from_body(v: &Value, status: Option<u16>, key_source: &str) -> ModelError {
    let kind_name = v["error"]["type"].as_str().unwrap_or("");
    let api_message = v["error"]["message"].as_str().unwrap_or("").to_string();
    let key = if key_source.is_empty() { "the API key".to_string() } else { format!("the key from {key_source}") };
    let (kind, hint, retryable) = match (kind_name, status) {
        ("authentication_error", _) | (_, Some(401)) => {
            (ModelErrorKind::Auth, format!("{key} was rejected; check it"), false)
        }
        ("permission_error", _) | (_, Some(403)) => {
            (ModelErrorKind::Auth, format!("{key} may not use this model or feature"), false)
        }
        ("billing_error", _) | (_, Some(402)) => {
            (ModelErrorKind::Auth, "the account has a billing problem".into(), false)
        }
        ("rate_limit_error", _) | (_, Some(429)) => {
            (ModelErrorKind::RateLimited, "rate limited; try again later".into(), true)
        }
        ("overloaded_error", _) | (_, Some(529)) => {
            (ModelErrorKind::Server, "the API is overloaded; try again later".into(), true)
        }
        ("not_found_error", _) | (_, Some(404)) => {
            (ModelErrorKind::InvalidRequest, "not found (check the model id and baseUrl)".into(), false)
        }
        ("invalid_request_error", _) | (_, Some(400)) if is_prompt_too_long(&api_message) => {
            (ModelErrorKind::ContextTooLong, "the conversation no longer fits the model's context window".into(), false)
        }
        ("request_too_large", _) | (_, Some(413)) => {
            (ModelErrorKind::InvalidRequest, "the request is too large".into(), false)
        }
        ("invalid_request_error", _) | (_, Some(400 | 422)) => {
            (ModelErrorKind::InvalidRequest, "the API refused the request".into(), false)
        }
        ("api_error" | "timeout_error", _) | (_, Some(500..)) => {
            (ModelErrorKind::Server, "the API failed".into(), true)
        }
        _ => (ModelErrorKind::Server, format!("error `{kind_name}`"), true),
    };
    let prefix = match status {
        Some(s) => format!("{NAME} API {s}"),
        None => format!("{NAME} API stream error"),
    };
    let mut e = ModelError::new(kind, status, format!("{prefix}: {hint}: {api_message}"));
    e.retryable = retryable;
    e
}

/// Whether an error message is the API's "prompt is too long" (the 400 of a
/// prompt over the context window: `prompt is too long: N tokens > M maximum`).
fn is_prompt_too_long(message: &str) -> bool {
    message.trim_start().to_ascii_lowercase().starts_with("prompt is too long")
}

/// Maps an HTTP error response.
fn http_error(status: u16, body: &str, key_source: &str) -> ModelError {
    match serde_json::from_str::<Value>(body) {
        Ok(v) if v["error"].is_object() => error_from_body(&v, Some(status), key_source),
        _ => {
            let snippet: String = body.chars().take(300).collect();
            error_from_body(&json!({"error": {"type": "", "message": snippet}}), Some(status), key_source)
        }
    }
}

/// The request body of the Messages API; with `thinking`, extended thinking
/// is asked for and `max_tokens` raised to make room for it
/// ([`Thinking::sizes`]). Without, the body is what it always was.
pub fn encode_request(model: &str, req: &ModelRequest<'_>, thinking: Option<Thinking>) -> Value {
    encode_body(model, req, thinking, &Encoded::default()).to_value()
}

/// [`encode_request`] as the client sends it: the messages' texts from
/// `encoded` where they were sent before, but for the two newest user
/// messages, which carry the rolling cache breakpoints.
pub fn encode_body(model: &str, req: &ModelRequest<'_>, thinking: Option<Thinking>, encoded: &Encoded) -> Body {
    let marked: Vec<usize> = req
        .messages
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, m)| m.role == Role::User)
        .take(ROLLING_BREAKPOINTS)
        .map(|(i, _)| i)
        .collect();
    let placed = |i: usize| {
        marked.contains(&i).then(|| {
            let mut m = encode_message(&req.messages[i]);
            mark_breakpoint(&mut m);
            m.to_string()
        })
    };
    let texts = encoded.texts(req.messages, req.revisions, placed, |m| encode_message(m).to_string());
    let thinking = thinking.filter(|_| turn_keeps_its_thinking(req.messages));
    let tools: Vec<Value> = req
        .tools
        .iter()
        .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}))
        .collect();
    let mut head = json!({
        "model": model,
        "max_tokens": req.max_output_tokens,
        // The stable prefix (tools, then the system prompt) ends at the
        // first breakpoint.
        "system": [{"type": "text", "text": req.system, "cache_control": ephemeral()}],
    });
    if !tools.is_empty() {
        head["tools"] = Value::Array(tools);
        if !req.allow_tools {
            // Allowed with thinking: only a forced choice (`any`, `tool`) is refused.
            head["tool_choice"] = json!({"type": "none"});
        }
    }
    if let Some((max_tokens, budget_tokens)) = thinking.and_then(|t| t.sizes(req.max_output_tokens)) {
        head["max_tokens"] = json!(max_tokens);
        head["thinking"] = json!({"type": "enabled", "budget_tokens": budget_tokens});
    }
    Body::new(head, "messages", texts)
}

/// Whether the assistant turn a request continues starts with its thinking
/// block, as the API requires with thinking on. A turn runs from the first
/// assistant message after the last user message without tool results,
/// through every tool result since; Claude thinks at the start of a turn
/// only, so its later messages have no thinking block. A turn whose start was
/// edited away (compaction keeps only the newest exchanges of a long turn)
/// cannot carry thinking any more: its requests go without, as the API's
/// error advises, and thinking is back with the next user turn.
fn turn_keeps_its_thinking(messages: &[Message]) -> bool {
    let results = |m: &Message| m.content.iter().any(|b| matches!(b, Block::ToolResult { .. }));
    let continues = messages.last().is_some_and(|m| m.role == Role::User && results(m));
    let start = messages.iter().rposition(|m| m.role == Role::User && !results(m)).map_or(0, |i| i + 1);
    match messages.get(start) {
        Some(m) if continues && m.role == Role::Assistant => {
            // The first block as it is sent (`encode_message`).
            let first = match (&m.raw, m.content.first()) {
                (Some(raw), _) => raw[0]["type"].as_str().map(str::to_string),
                (None, Some(Block::Other(v))) => v["type"].as_str().map(str::to_string),
                _ => None,
            };
            matches!(first.as_deref(), Some("thinking" | "redacted_thinking"))
        }
        _ => true,
    }
}

/// The top-level fields `POST /v1/messages/count_tokens` accepts (the SDK's
/// `types/message_count_tokens_params.py`); it refuses the others a
/// Messages body may have (`max_tokens`, `stream`, `temperature`,
/// `stop_sequences`, `metadata`, …) as "Extra inputs are not permitted".
pub const COUNT_FIELDS: &[&str] =
    &["model", "messages", "system", "tools", "tool_choice", "thinking", "cache_control", "output_config"];

/// The body of a token count for `req`: the Messages body [`encode_request`]
/// builds, so the count covers exactly what that request sends (system
/// blocks, tools, `tool_choice`, cache markers), without the fields the
/// counting endpoint refuses.
pub fn encode_count_request(model: &str, req: &ModelRequest<'_>, thinking: Option<Thinking>) -> Value {
    let mut body = encode_request(model, req, thinking);
    if let Some(fields) = body.as_object_mut() {
        fields.retain(|k, _| COUNT_FIELDS.contains(&k.as_str()));
    }
    body
}

/// A rolling prompt-cache breakpoint on a user message: on its last
/// block, which is the last block of the newest user message (written by
/// this request) or of the one before it (written by the previous request,
/// so this one reads it). With the system prompt's, three of the four the
/// API allows. Never on thinking blocks, which cannot carry one; assistant
/// messages are echoed verbatim and left alone.
fn mark_breakpoint(m: &mut Value) {
    let Some(last) = m["content"].as_array_mut().and_then(|c| c.last_mut()) else { return };
    let cacheable = last.is_object() && !matches!(last["type"].as_str(), Some("thinking" | "redacted_thinking"));
    let empty_text = last["type"] == "text" && last["text"].as_str().is_some_and(str::is_empty);
    if cacheable && !empty_text {
        last["cache_control"] = ephemeral();
    }
}

/// Rolling breakpoints on the newest user messages.
const ROLLING_BREAKPOINTS: usize = 2;

/// A prompt-cache breakpoint.
fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

fn encode_message(m: &Message) -> Value {
    let role = match m.role {
        Role::User => "user",
        Role::Assistant => "assistant",
    };
    let content = match (&m.raw, m.role) {
        (Some(raw), Role::Assistant) => raw.clone(),
        _ => Value::Array(m.content.iter().map(encode_block).collect()),
    };
    json!({"role": role, "content": content})
}

fn encode_block(b: &Block) -> Value {
    match b {
        Block::Text { text } => json!({"type": "text", "text": text}),
        Block::ToolUse { id, name, input } => {
            json!({"type": "tool_use", "id": id, "name": name, "input": input.to_value()})
        }
        Block::ToolResult { tool_use_id, content, is_error } => {
            let mut v = json!({"type": "tool_result", "tool_use_id": tool_use_id, "content": content});
            if *is_error {
                v["is_error"] = Value::Bool(true);
            }
            v
        }
        Block::Other(raw) => raw.clone(),
    }
}

/// Parses a Messages API response.
pub fn decode_response(v: Value) -> Result<ModelResponse, ModelError> {
    let decode_err = |what: &str| {
        ModelError::new(
            ModelErrorKind::Decode,
            Some(200),
            format!("unexpected response from the Anthropic API: {what}"),
        )
    };
    let raw = v.get("content").filter(|c| c.is_array()).cloned().ok_or_else(|| decode_err("no content array"))?;
    let content: Vec<Block> = raw.as_array().into_iter().flatten().map(decode_block).collect();
    let stop_reason = match v["stop_reason"].as_str() {
        Some("end_turn") => StopReason::EndTurn,
        Some("tool_use") => StopReason::ToolUse,
        Some("max_tokens") => StopReason::MaxTokens,
        Some("stop_sequence") => StopReason::StopSequence,
        Some("pause_turn") => StopReason::PauseTurn,
        Some("refusal") => {
            StopReason::Refusal { explanation: v["stop_details"]["explanation"].as_str().map(str::to_string) }
        }
        Some("model_context_window_exceeded") => StopReason::ContextWindowExceeded,
        Some(other) => {
            tracing::warn!(stop_reason = other, "unknown stop_reason");
            StopReason::Other(other.to_string())
        }
        None => StopReason::Other("null".to_string()),
    };
    let u = &v["usage"];
    let n = |k: &str| u[k].as_u64().unwrap_or(0);
    let usage = Usage {
        input_tokens: n("input_tokens") + n("cache_creation_input_tokens") + n("cache_read_input_tokens"),
        output_tokens: n("output_tokens"),
        cache_read_tokens: n("cache_read_input_tokens"),
        cache_write_tokens: n("cache_creation_input_tokens"),
        estimated: false,
    };
    Ok(ModelResponse { message: Message { role: Role::Assistant, content, raw: Some(raw) }, stop_reason, usage })
}

fn decode_block(b: &Value) -> Block {
    match b["type"].as_str() {
        Some("text") => Block::Text { text: b["text"].as_str().unwrap_or_default().to_string() },
        Some("tool_use") => Block::ToolUse {
            id: b["id"].as_str().unwrap_or_default().to_string(),
            name: b["name"].as_str().unwrap_or_default().to_string(),
            input: match &b["input"] {
                Value::Null => ToolInput::empty(),
                other => ToolInput::from(other.clone()),
            },
        },
        _ => Block::Other(b.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ToolSpec;

    #[test]
    fn assistant_content_is_echoed_verbatim() {
        let raw = json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "sig=="},
                {"type": "text", "text": "Reading.", "citations": null},
                {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a"}},
                {"type": "brand_new_block", "x": 1}
            ],
            "stop_reason": "tool_use", "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 3, "cache_creation_input_tokens": 4}
        });
        let resp = decode_response(raw.clone()).unwrap();
        assert_eq!(resp.stop_reason, StopReason::ToolUse);
        // Every prompt token counts as input; the cached ones are kept apart too.
        assert_eq!(
            resp.usage,
            Usage { input_tokens: 17, output_tokens: 5, cache_read_tokens: 3, cache_write_tokens: 4, estimated: false }
        );
        assert_eq!(resp.usage.uncached_input(), 10);
        assert_eq!(resp.message.tool_calls().count(), 1);
        assert!(matches!(&resp.message.content[0], Block::Other(v) if v["signature"] == "sig=="));
        let msgs = vec![Message::user_text("hi"), resp.message];
        let tools = vec![ToolSpec {
            name: "read_file".into(),
            description: "d".into(),
            input_schema: json!({"type": "object"}),
        }];
        let req = ModelRequest {
            system: "sys",
            messages: &msgs,
            tools: &tools,
            max_output_tokens: 100,
            allow_tools: true,
            revisions: &[],
        };
        let body = encode_request("m", &req, None);
        assert_eq!(body["messages"][1]["content"], raw["content"]);
        // The user's text, with the rolling cache breakpoint.
        assert_eq!(
            body["messages"][0]["content"],
            json!([{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}])
        );
        assert_eq!(body["tools"][0]["input_schema"], json!({"type": "object"}));
        assert_eq!(body["max_tokens"], 100);
    }

    #[test]
    fn bodies_written_from_kept_texts_are_the_bodies_encoded_afresh() {
        // A growing conversation sent turn after turn through one client's
        // kept texts: each body is the one a fresh encoding gives, with the
        // breakpoints where they belong (a message marked two turns ago is
        // sent unmarked), and a stubbed message is sent as it is now.
        let encoded = Encoded::default();
        let mut msgs = vec![Message::user_text("fix it")];
        let mut revisions = vec![crate::model::next_revision()];
        for turn in 0..6 {
            let id = format!("t{turn}");
            let call = json!([{"type": "text", "text": "Reading \"a\" 漢字"}, {"type": "tool_use", "id": id, "name": "read_file", "input": {"path": "a"}}]);
            msgs.push(Message { role: Role::Assistant, content: Vec::new(), raw: Some(call) });
            msgs.push(Message {
                role: Role::User,
                content: vec![Block::ToolResult {
                    tool_use_id: id,
                    content: format!("out {turn} 😀\n"),
                    is_error: false,
                }],
                raw: None,
            });
            revisions.extend([crate::model::next_revision(), crate::model::next_revision()]);
            if turn == 4 {
                msgs[2].content =
                    vec![Block::ToolResult { tool_use_id: "t0".into(), content: "[stub]".into(), is_error: false }];
                revisions[2] = crate::model::next_revision();
            }
            let req = ModelRequest {
                system: "sys",
                messages: &msgs,
                tools: &[],
                max_output_tokens: 10,
                allow_tools: true,
                revisions: &revisions,
            };
            let kept = encode_body("m", &req, None, &encoded).to_value();
            assert_eq!(kept, encode_request("m", &ModelRequest { revisions: &[], ..req }, None), "turn {turn}");
            let marked =
                kept["messages"].as_array().unwrap().iter().filter(|m| m.to_string().contains("cache_control")).count();
            assert_eq!(marked, 2, "turn {turn}");
        }
    }

    #[test]
    fn cache_breakpoints_end_the_stable_prefix_and_roll_with_the_newest_messages() {
        let thinking = json!([{"type": "thinking", "thinking": "hm", "signature": "s"}, {"type": "tool_use", "id": "t1", "name": "read_file", "input": {}}]);
        let assistant = |raw: Value| Message { role: Role::Assistant, content: Vec::new(), raw: Some(raw) };
        let result = |id: &str| Message {
            role: Role::User,
            content: vec![Block::ToolResult { tool_use_id: id.into(), content: "x".into(), is_error: false }],
            raw: None,
        };
        let msgs = vec![
            Message::user_text("fix it"),
            assistant(thinking.clone()),
            result("t1"),
            assistant(json!([{"type": "tool_use", "id": "t2", "name": "read_file", "input": {}}])),
            result("t2"),
        ];
        let req = ModelRequest {
            system: "sys",
            messages: &msgs,
            tools: &[],
            max_output_tokens: 10,
            allow_tools: true,
            revisions: &[],
        };
        let body = encode_request("m", &req, None);
        assert_eq!(body["system"], json!([{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}]));
        let marked: Vec<usize> = (0..msgs.len())
            .filter(|&i| {
                body["messages"][i]["content"].as_array().unwrap().iter().any(|b| b.get("cache_control").is_some())
            })
            .collect();
        // The newest user message and the one before it; the first prompt
        // and the assistant's echoed blocks (thinking included) are left alone.
        assert_eq!(marked, vec![2, 4]);
        assert_eq!(body["messages"][1]["content"], thinking);
        let count = body.to_string().matches("cache_control").count();
        assert!(count <= 4, "{count} breakpoints");
        // An empty text block cannot carry one.
        let empty = vec![Message::user_text("")];
        let req = ModelRequest {
            system: "sys",
            messages: &empty,
            tools: &[],
            max_output_tokens: 10,
            allow_tools: true,
            revisions: &[],
        };
        assert!(encode_request("m", &req, None)["messages"][0]["content"][0].get("cache_control").is_none());
    }

    #[test]
    fn a_count_body_is_the_messages_body_without_what_the_endpoint_refuses() {
        let msgs = vec![Message::user_text("fix it")];
        let tools = vec![ToolSpec {
            name: "read_file".into(),
            description: "d".into(),
            input_schema: json!({"type": "object"}),
        }];
        let req = ModelRequest {
            system: "sys",
            messages: &msgs,
            tools: &tools,
            max_output_tokens: 64,
            allow_tools: false,
            revisions: &[],
        };
        let mut full = encode_request("m", &req, None);
        let count = encode_count_request("m", &req, None);
        assert!(count.get("max_tokens").is_none() && count.get("stream").is_none(), "{count}");
        // Everything else is the same, cache markers and tool_choice included.
        full.as_object_mut().unwrap().remove("max_tokens");
        assert_eq!(count, full);
        assert_eq!(count["tool_choice"], json!({"type": "none"}));
        assert_eq!(count["system"][0]["cache_control"], json!({"type": "ephemeral"}));
        assert!(count.as_object().unwrap().keys().all(|k| COUNT_FIELDS.contains(&k.as_str())));
    }

    fn endpoint(model: &str) -> Endpoint {
        Endpoint {
            base_url: "http://127.0.0.1:9".into(),
            api_key: None,
            key_source: String::new(),
            model: model.into(),
            max_retries: 0,
            connect_timeout: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(1),
        }
    }

    #[test]
    fn thinking_models_budgets_and_sizes() {
        assert_eq!(thinking_model("claude-sonnet-4-5-20250929"), Some(64_000));
        assert_eq!(thinking_model("claude-sonnet-4-20250514"), Some(64_000));
        assert_eq!(thinking_model("claude-opus-4-1-20250805"), Some(32_000));
        assert_eq!(thinking_model("claude-opus-4-5"), Some(64_000), "the longest prefix wins");
        assert_eq!(thinking_model("claude-3-7-sonnet-latest"), Some(64_000));
        assert_eq!(thinking_model("claude-haiku-4-5"), Some(64_000));
        for model in ["claude-3-5-haiku-latest", "claude-3-5-sonnet-20241022", "claude-3-opus", "my-proxy-model"] {
            assert_eq!(thinking_model(model), None, "{model}");
            assert_eq!(thinking_for(model, Some(Effort::High)), None, "{model}");
        }
        assert_eq!(thinking_for("claude-sonnet-4-5", None), None);
        let budgets: Vec<u32> = [Effort::Low, Effort::Medium, Effort::High].map(thinking_budget).into();
        assert_eq!(budgets, [2048, 8192, 24_576]);
        assert!(budgets.iter().all(|&b| b >= MIN_THINKING_BUDGET));

        let high = thinking_for("claude-sonnet-4-5", Some(Effort::High)).unwrap();
        // The budget on top of the requested output.
        assert_eq!(high.sizes(8192), Some((32_768, 24_576)));
        assert_eq!(high.sizes(256), Some((24_832, 24_576)));
        // At the model's limit, the budget takes its share of it.
        assert_eq!(high.sizes(64_000), Some((64_000, 24_576)));
        let opus = thinking_for("claude-opus-4-1", Some(Effort::High)).unwrap();
        assert_eq!(opus.sizes(8192), Some((32_000, 24_576)));
        // Never less than asked, and the budget stays under max_tokens.
        assert_eq!(opus.sizes(40_000), Some((40_000, 24_576)));
        let tiny = Thinking { budget_tokens: 2048, max_output: 1500 };
        assert_eq!(tiny.sizes(100), Some((1500, 1499)));
        assert_eq!(Thinking { budget_tokens: 2048, max_output: 1000 }.sizes(100), None, "under 1024 left: no thinking");
        for requested in [1, 2, 1024, 8192, 31_999, 32_000, 64_000, u32::MAX] {
            let (max_tokens, budget) = high.sizes(requested).unwrap();
            assert!(budget >= MIN_THINKING_BUDGET && budget < max_tokens && max_tokens >= requested, "{requested}");
        }
    }

    fn thinking_conversation() -> (Vec<Message>, Vec<ToolSpec>) {
        let msgs = vec![
            Message::user_text("fix it"),
            Message {
                role: Role::Assistant,
                content: Vec::new(),
                raw: Some(json!([
                    {"type": "thinking", "thinking": "hm", "signature": "sig=="},
                    {"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "a"}}
                ])),
            },
            Message {
                role: Role::User,
                content: vec![Block::ToolResult { tool_use_id: "t1".into(), content: "x".into(), is_error: false }],
                raw: None,
            },
        ];
        let tools = vec![ToolSpec {
            name: "read_file".into(),
            description: "d".into(),
            input_schema: json!({"type": "object"}),
        }];
        (msgs, tools)
    }

    #[test]
    fn without_effort_the_body_is_what_it_always_was() {
        let (msgs, tools) = thinking_conversation();
        let req = ModelRequest {
            system: "sys",
            messages: &msgs,
            tools: &tools,
            max_output_tokens: 8192,
            allow_tools: true,
            revisions: &[],
        };
        // The body of a request before `effort` existed, byte for byte.
        let before = r#"{"max_tokens":8192,"messages":[{"content":[{"cache_control":{"type":"ephemeral"},"text":"fix it","type":"text"}],"role":"user"},{"content":[{"signature":"sig==","thinking":"hm","type":"thinking"},{"id":"t1","input":{"path":"a"},"name":"read_file","type":"tool_use"}],"role":"assistant"},{"content":[{"cache_control":{"type":"ephemeral"},"content":"x","tool_use_id":"t1","type":"tool_result"}],"role":"user"}],"model":"claude-sonnet-4-5","system":[{"cache_control":{"type":"ephemeral"},"text":"sys","type":"text"}],"tools":[{"description":"d","input_schema":{"type":"object"},"name":"read_file"}]}"#;
        // Compared as JSON: the keys' order is serde_json's maps' (sorted, or
        // as inserted with `preserve_order`).
        assert_eq!(encode_request("claude-sonnet-4-5", &req, None), serde_json::from_str::<Value>(before).unwrap());
        let unset = Anthropic::new(endpoint("claude-sonnet-4-5")).with_effort(None);
        assert_eq!((unset.thinking, unset.output_ceiling(8192)), (None, 8192));
        // A model without extended thinking ignores the setting.
        let ignored = Anthropic::new(endpoint("claude-3-5-haiku-latest")).with_effort(Some(Effort::High));
        assert_eq!((ignored.thinking, ignored.output_ceiling(8192)), (None, 8192));
    }

    #[test]
    fn effort_asks_for_thinking_with_room_for_it_on_every_request() {
        let (msgs, tools) = thinking_conversation();
        let client = Anthropic::new(endpoint("claude-sonnet-4-5")).with_effort(Some(Effort::Medium));
        assert_eq!(client.thinking, Some(Thinking { budget_tokens: 8192, max_output: 64_000 }));
        assert_eq!(client.output_ceiling(8192), 16_384);
        for allow_tools in [true, false] {
            let req = ModelRequest {
                system: "sys",
                messages: &msgs,
                tools: &tools,
                max_output_tokens: 8192,
                allow_tools,
                revisions: &[],
            };
            let mut body = encode_request("claude-sonnet-4-5", &req, client.thinking);
            assert_eq!(body["thinking"], json!({"type": "enabled", "budget_tokens": 8192}), "{allow_tools}");
            assert_eq!(body["max_tokens"], 16_384);
            // A request without tools keeps thinking: `none` is allowed with it.
            assert_eq!(body.get("tool_choice"), (!allow_tools).then(|| json!({"type": "none"})).as_ref());
            assert!(body.get("temperature").is_none() && body.get("top_k").is_none() && body.get("top_p").is_none());
            // The thinking block goes back as it came, without a cache breakpoint.
            assert_eq!(
                body["messages"][1]["content"][0],
                json!({"type": "thinking", "thinking": "hm", "signature": "sig=="})
            );
            // Nothing else changes.
            let plain = encode_request("claude-sonnet-4-5", &req, None);
            let fields = body.as_object_mut().unwrap();
            fields.remove("thinking");
            fields.insert("max_tokens".into(), json!(8192));
            assert_eq!(body, plain);
        }
        // The count covers the thinking setting too (the endpoint takes it).
        let req = ModelRequest {
            system: "sys",
            messages: &msgs,
            tools: &tools,
            max_output_tokens: 8192,
            allow_tools: true,
            revisions: &[],
        };
        let count = encode_count_request("claude-sonnet-4-5", &req, client.thinking);
        assert_eq!(count["thinking"], json!({"type": "enabled", "budget_tokens": 8192}));
        assert!(count.get("max_tokens").is_none());
    }

    #[test]
    fn a_turn_whose_thinking_start_was_edited_away_goes_without_thinking() {
        let thinking = thinking_for("claude-sonnet-4-5", Some(Effort::Low));
        let assistant = |raw: Value| Message { role: Role::Assistant, content: Vec::new(), raw: Some(raw) };
        let call = |id: &str| json!({"type": "tool_use", "id": id, "name": "read_file", "input": {}});
        let result = |id: &str| Message {
            role: Role::User,
            content: vec![Block::ToolResult { tool_use_id: id.into(), content: "x".into(), is_error: false }],
            raw: None,
        };
        let tools = vec![ToolSpec {
            name: "read_file".into(),
            description: "d".into(),
            input_schema: json!({"type": "object"}),
        }];
        let asks = |msgs: &[Message]| {
            let req = ModelRequest {
                system: "s",
                messages: msgs,
                tools: &tools,
                max_output_tokens: 512,
                allow_tools: true,
                revisions: &[],
            };
            encode_request("claude-sonnet-4-5", &req, thinking).get("thinking").is_some()
        };
        let signed = json!({"type": "thinking", "thinking": "hm", "signature": "s"});
        // The turn's first message thinks; the ones after tool results do not, and need not.
        let turn = vec![
            Message::user_text("fix it"),
            assistant(json!([signed, call("t1")])),
            result("t1"),
            assistant(json!([{"type": "text", "text": "Next."}, call("t2")])),
            result("t2"),
        ];
        assert!(asks(&turn[..1]) && asks(&turn[..3]) && asks(&turn));
        // Compacted: the task, then the newest exchange, which does not start the turn.
        let compacted = vec![Message::user_text("fix it\n\nsummary"), turn[3].clone(), turn[4].clone()];
        assert!(!asks(&compacted));
        // A new user turn (a user message without tool results) may think again.
        let mut next = compacted.clone();
        next.push(assistant(json!([{"type": "text", "text": "Done."}])));
        next.push(Message::user_text("and the other file?"));
        assert!(asks(&next));
        let redacted = vec![
            turn[0].clone(),
            assistant(json!([{"type": "redacted_thinking", "data": "x"}, call("t1")])),
            result("t1"),
        ];
        assert!(asks(&redacted));
    }

    #[tokio::test]
    async fn without_the_setting_nothing_is_counted_or_sent() {
        // Port 9 (discard) on loopback: a request would fail, not hang.
        let endpoint = Endpoint {
            base_url: "http://127.0.0.1:9".into(),
            api_key: None,
            key_source: String::new(),
            model: "m".into(),
            max_retries: 0,
            connect_timeout: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(1),
        };
        let msgs = vec![Message::user_text("hi")];
        let req = ModelRequest {
            system: "s",
            messages: &msgs,
            tools: &[],
            max_output_tokens: 8,
            allow_tools: true,
            revisions: &[],
        };
        assert_eq!(Anthropic::new(endpoint.clone()).count_tokens(req).await, Ok(None));
        let on = Anthropic::new(endpoint).with_token_counting(true).count_tokens(req).await;
        assert_eq!(on.unwrap_err().kind, ModelErrorKind::Network, "with it, the request is sent");
    }

    #[test]
    fn stop_reasons_map_and_unknown_ones_are_kept() {
        for (wire, want) in [
            ("end_turn", StopReason::EndTurn),
            ("max_tokens", StopReason::MaxTokens),
            ("pause_turn", StopReason::PauseTurn),
            ("model_context_window_exceeded", StopReason::ContextWindowExceeded),
            ("compaction", StopReason::Other("compaction".into())),
        ] {
            let r = decode_response(json!({"content": [], "stop_reason": wire, "usage": {}})).unwrap();
            assert_eq!(r.stop_reason, want);
        }
        let r = decode_response(json!({"content": [], "stop_reason": "refusal",
            "stop_details": {"type": "refusal", "category": "cyber", "explanation": "no"}}))
        .unwrap();
        assert_eq!(r.stop_reason, StopReason::Refusal { explanation: Some("no".into()) });
        assert!(decode_response(json!({"type": "message"})).is_err());
    }

    #[test]
    fn tool_results_encode_errors_only_when_set() {
        let m = Message {
            role: Role::User,
            content: vec![
                Block::ToolResult { tool_use_id: "a".into(), content: "ok".into(), is_error: false },
                Block::ToolResult { tool_use_id: "b".into(), content: "bad".into(), is_error: true },
            ],
            raw: None,
        };
        assert_eq!(
            encode_message(&m),
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "a", "content": "ok"},
                {"type": "tool_result", "tool_use_id": "b", "content": "bad", "is_error": true}]})
        );
    }

    #[test]
    fn http_errors_say_what_to_do() {
        let e = http_error(
            401,
            r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
            "ANTHROPIC_API_KEY",
        );
        assert_eq!(e.kind, ModelErrorKind::Auth);
        assert!(!e.retryable);
        assert_eq!(
            e.message,
            "Anthropic API 401: the key from ANTHROPIC_API_KEY was rejected; check it: invalid x-api-key"
        );
        let e = http_error(529, "overloaded", "");
        assert_eq!((e.kind, e.retryable), (ModelErrorKind::Server, true));
        assert_eq!(http_error(400, "{}", "").kind, ModelErrorKind::InvalidRequest);
    }

    #[test]
    fn prompt_is_too_long_is_its_own_kind() {
        let body = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 61000 tokens > 60000 maximum"}}"#;
        let e = http_error(400, body, "");
        assert_eq!((e.kind, e.retryable), (ModelErrorKind::ContextTooLong, false));
        assert!(e.message.ends_with("prompt is too long: 61000 tokens > 60000 maximum"), "{}", e.message);
        let other = r#"{"type":"error","error":{"type":"invalid_request_error","message":"messages.1: bad"}}"#;
        assert_eq!(http_error(400, other, "").kind, ModelErrorKind::InvalidRequest);
    }

    fn feed(events: &[(&str, Value)]) -> Result<ModelResponse, ModelError> {
        let mut acc = Accumulator::default();
        for (name, data) in events {
            if acc.apply(name, &data.to_string(), &|_| {})? {
                return acc.finish();
            }
        }
        acc.finish()
    }

    #[test]
    fn streamed_blocks_are_assembled_by_index() {
        let r = feed(&[
            ("message_start", json!({"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "content": [], "stop_reason": null, "usage": {"input_tokens": 42, "output_tokens": 1}}})),
            ("content_block_start", json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}})),
            ("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hm"}})),
            ("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "SIG"}})),
            ("content_block_stop", json!({"type": "content_block_stop", "index": 0})),
            ("content_block_start", json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}}})),
            ("ping", json!({"type": "ping"})),
            ("content_block_delta", json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": ""}})),
            ("content_block_delta", json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"path\": \"a\\"}})),
            ("content_block_delta", json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "u00e9.py\"}"}})),
            ("brand_new_event", json!({"type": "brand_new_event"})),
            ("content_block_stop", json!({"type": "content_block_stop", "index": 1})),
            ("content_block_start", json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_2", "name": "list_files", "input": {}}})),
            ("content_block_delta", json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": ""}})),
            ("content_block_stop", json!({"type": "content_block_stop", "index": 2})),
            ("message_delta", json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 31}})),
            ("message_stop", json!({"type": "message_stop"})),
        ])
        .unwrap();
        assert_eq!(r.stop_reason, StopReason::ToolUse);
        assert_eq!(r.usage, Usage { input_tokens: 42, output_tokens: 31, ..Default::default() });
        let calls: Vec<_> =
            r.message.tool_calls().map(|(i, n, v)| (i.to_string(), n.to_string(), v.to_value())).collect();
        assert_eq!(calls[0], ("toolu_1".into(), "read_file".into(), json!({"path": "aé.py"})));
        assert_eq!(calls[1].2, json!({}));
        let raw = r.message.raw.unwrap();
        assert_eq!(raw[0], json!({"type": "thinking", "thinking": "hm", "signature": "SIG"}));
    }

    #[test]
    fn long_streamed_blocks_are_assembled_in_linear_work() {
        // 128 KB of text and of thinking in 7-character deltas: every byte is
        // copied into the block's string once, not once per later delta.
        let text: String = (0..16_000).map(|i| format!("w{i:06} ")).collect();
        let pieces: Vec<String> = text.chars().collect::<Vec<_>>().chunks(7).map(|c| c.iter().collect()).collect();
        let mut acc = Accumulator::default();
        let streamed = std::sync::atomic::AtomicUsize::new(0);
        let apply = |acc: &mut Accumulator, name: &str, data: Value| {
            acc.apply(name, &data.to_string(), &|u| {
                if let StreamUpdate::Text(t) = u {
                    streamed.fetch_add(t.len(), std::sync::atomic::Ordering::Relaxed);
                }
            })
            .unwrap()
        };
        apply(&mut acc, "message_start", json!({"type": "message_start", "message": {"content": [], "usage": {}}}));
        apply(
            &mut acc,
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        );
        for p in &pieces {
            apply(
                &mut acc,
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": p}}),
            );
        }
        apply(
            &mut acc,
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "SIG"}}),
        );
        apply(&mut acc, "content_block_stop", json!({"type": "content_block_stop", "index": 0}));
        apply(
            &mut acc,
            "content_block_start",
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
        );
        for p in &pieces {
            apply(
                &mut acc,
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": p}}),
            );
        }
        // No content_block_stop: the open block is flushed at the end.
        apply(
            &mut acc,
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 9}}),
        );
        assert_eq!(acc.copied, 2 * text.len() + 3, "each byte copied once");
        assert!(acc.blocks[&1]["text"] == "", "the block's JSON is built once, at the end");
        let r = acc.finish().unwrap();
        assert_eq!(streamed.into_inner(), text.len());
        assert_eq!(r.message.text(), text);
        let raw = r.message.raw.unwrap();
        assert_eq!(raw[0], json!({"type": "thinking", "thinking": text, "signature": "SIG"}));
        assert_eq!(raw[1], json!({"type": "text", "text": text}));
    }

    #[test]
    fn an_unfinished_tool_input_is_kept_raw_and_an_error_event_fails() {
        let r = feed(&[
            ("message_start", json!({"type": "message_start", "message": {"content": [], "usage": {"input_tokens": 1}}})),
            ("content_block_start", json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t", "name": "edit_file", "input": {}}})),
            ("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"path\": \"a"}})),
            ("message_delta", json!({"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": {"output_tokens": 5}})),
        ])
        .unwrap();
        assert_eq!(r.stop_reason, StopReason::MaxTokens);
        assert!(
            matches!(&r.message.content[0], Block::ToolUse { input: ToolInput::Malformed { raw, .. }, .. } if raw == "{\"path\": \"a")
        );
        assert_eq!(r.message.raw.unwrap()[0]["input"], json!({}));
        let e = feed(&[
            ("message_start", json!({"type": "message_start", "message": {"content": []}})),
            ("error", json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})),
        ])
        .unwrap_err();
        assert!(e.retryable);
        assert_eq!(e.message, "Anthropic API stream error: the API is overloaded; try again later: Overloaded");
    }

    #[test]
    fn a_finished_tool_input_that_is_not_an_object_is_malformed_and_echoed_as_an_empty_object() {
        let start = |i: u64, id: &str| {
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": i, "content_block": {"type": "tool_use", "id": id, "name": "grep", "input": {}}}),
            )
        };
        let delta = |i: u64, json: &str| {
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": json}}),
            )
        };
        let stop = |i: u64| ("content_block_stop", json!({"type": "content_block_stop", "index": i}));
        let r = feed(&[
            ("message_start", json!({"type": "message_start", "message": {"content": [], "usage": {}}})),
            start(0, "t0"),
            delta(0, "{oops"),
            stop(0),
            start(1, "t1"),
            delta(1, "[1, 2]"),
            stop(1),
            ("message_delta", json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}})),
            ("message_stop", json!({"type": "message_stop"})),
        ])
        .unwrap();
        let inputs: Vec<&ToolInput> = r.message.tool_calls().map(|(_, _, input)| input).collect();
        assert!(
            matches!(inputs[0], ToolInput::Malformed { raw, error } if raw == "{oops" && error.contains("key must be a string")),
            "{inputs:?}"
        );
        assert_eq!(
            inputs[1],
            &ToolInput::Malformed { raw: "[1, 2]".into(), error: "an array is not a JSON object".into() }
        );
        let raw = r.message.raw.unwrap();
        assert_eq!((&raw[0]["input"], &raw[1]["input"]), (&json!({}), &json!({})), "the echo is unchanged");
    }

    #[test]
    fn a_message_start_that_is_not_an_object_does_not_panic() {
        // fuzz/regressions/sse/anthropic-message-start-not-object
        let mut acc = Accumulator::default();
        for (name, data) in [
            ("message_start", json!({"type": "message_start", "message": "nope"})),
            (
                "message_delta",
                json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}}),
            ),
            ("message_stop", json!({"type": "message_stop"})),
        ] {
            let _ = acc.apply(name, &data.to_string(), &|_| {});
        }
        let _ = acc.finish();
    }
}
