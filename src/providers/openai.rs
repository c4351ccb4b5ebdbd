//! OpenAI Chat Completions (`POST {base}/chat/completions`), streaming, for
//! the OpenAI API and compatible servers (Ollama, llama.cpp, vLLM, LM
//! Studio).
//!
//! Tool-call fragments are merged by index (id and name set once, arguments
//! appended), with the quirks of compatible servers normalised (section B5
//! and C of the wire reference): arguments as an object, missing or empty
//! ids synthesised, index 0 reused for parallel calls (a new id opens a new
//! call), names repeated in every fragment, `finish_reason: "stop"` with
//! tool calls. A server that ignores `stream` and answers with one JSON body
//! is accepted too (up to [`http::MAX_JSON_BODY`], read within the idle
//! timeout).
//!
//! The OpenAI API gets `max_completion_tokens` (reasoning models refuse
//! `max_tokens`, and it counts their reasoning tokens too) and never a
//! `temperature` (reasoning models refuse any but the default), whatever the
//! model; with `effort` set, a reasoning model ([`is_reasoning_model`]) gets
//! `reasoning_effort`, another none (with a warning). A compatible server gets
//! `max_tokens`, the field they all document, and `reasoning_effort` only
//! when `effort` is set: servers ignore the fields they do not know.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
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

/// Which server family: the real OpenAI API or a compatible server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    OpenAi,
    Compatible,
}

impl Flavor {
    fn name(self) -> &'static str {
        match self {
            Flavor::OpenAi => "OpenAI",
            Flavor::Compatible => "OpenAI-compatible",
        }
    }

    /// The `provider` setting that names it.
    fn provider(self) -> &'static str {
        match self {
            Flavor::OpenAi => "openai",
            Flavor::Compatible => "openai-compatible",
        }
    }
}

pub struct OpenAi {
    http: http::LazyClient,
    /// The messages' texts of the last request, sent again from here.
    encoded: Encoded,
    endpoint: Endpoint,
    flavor: Flavor,
    /// `reasoning_effort` of every request (`effort`, where it is sent).
    reasoning_effort: Option<Effort>,
    /// Set once a stream ended without a single data event (llama-cpp-python
    /// cannot stream with `tool_choice: "auto"`): from then on this client
    /// asks for whole answers.
    unstreamed: AtomicBool,
}

/// How long an unstreamed answer is waited for: the whole generation comes
/// before the first byte (the run's `timeoutSecs` still applies).
const UNSTREAMED_WAIT: Duration = Duration::from_secs(600);

/// Whether `model` is one of OpenAI's reasoning models (o1, o3, o4-mini,
/// GPT-5 and their dated or sized variants), which take `reasoning_effort`
/// and refuse `max_tokens` and `temperature`. GPT-4.1 and GPT-4o are not.
pub fn is_reasoning_model(model: &str) -> bool {
    let mut chars = model.chars();
    let o_series = chars.next() == Some('o') && chars.next().is_some_and(|c| c.is_ascii_digit());
    o_series || model.starts_with("gpt-5")
}

impl OpenAi {
    pub fn new(endpoint: Endpoint, flavor: Flavor) -> Self {
        Self {
            http: http::LazyClient::new(endpoint.connect_timeout),
            encoded: Encoded::default(),
            endpoint,
            flavor,
            reasoning_effort: None,
            unstreamed: AtomicBool::new(false),
        }
    }

    /// With `effort` set: `reasoning_effort` on every request to a reasoning
    /// model of the OpenAI API or to a compatible server (which ignores it if
    /// it does not know it); another OpenAI model would refuse it, so it gets
    /// none, with a warning.
    pub fn with_effort(mut self, effort: Option<Effort>) -> Self {
        self.reasoning_effort = match (effort, self.flavor) {
            (Some(e), Flavor::OpenAi) if !is_reasoning_model(&self.endpoint.model) => {
                tracing::warn!(
                    model = %self.endpoint.model,
                    effort = e.name(),
                    "the model is not a reasoning model; effort is ignored"
                );
                None
            }
            (effort, _) => effort,
        };
        self
    }

    fn url(&self, path: &str) -> String {
        format!("{}/{path}", self.endpoint.base_url.trim_end_matches('/'))
    }

    fn authorize(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.endpoint.api_key {
            Some(key) => request.bearer_auth(key.expose()),
            None => request,
        }
    }

    /// One attempt: streamed, unless this client learnt that its server
    /// cannot stream; a stream that ends without any data event is asked
    /// again unstreamed, and so is every later request.
    async fn attempt(
        &self,
        body: &Body,
        updates: &(dyn Fn(StreamUpdate) + Send + Sync),
    ) -> Result<ModelResponse, ModelError> {
        if !self.unstreamed.load(Ordering::Relaxed) {
            if let Some(r) = self.exchange(body, updates).await? {
                return Ok(r);
            }
            if !self.unstreamed.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    "the {} server ended a stream without sending any data (llama-cpp-python cannot stream \
                     with tools); this client asks for unstreamed answers from now on",
                    self.flavor.name()
                );
            }
        }
        let mut whole = body.clone();
        if let Some(o) = whole.head.as_object_mut() {
            o.insert("stream".into(), Value::Bool(false));
            o.remove("stream_options");
        }
        self.exchange(&whole, updates).await?.ok_or_else(|| {
            ModelError::new(
                ModelErrorKind::Network,
                None,
                format!("the {} stream ended without any data", self.flavor.name()),
            )
        })
    }

    /// One request; `None` when the answer was a stream that ended without
    /// a single data event (nor `[DONE]`).
    async fn exchange(
        &self,
        body: &Body,
        updates: &(dyn Fn(StreamUpdate) + Send + Sync),
    ) -> Result<Option<ModelResponse>, ModelError> {
        let name = self.flavor.name();
        let idle = self.endpoint.idle_timeout;
        let streamed = body.head["stream"] == Value::Bool(true);
        let wait = if streamed { idle } else { idle.max(UNSTREAMED_WAIT) };
        let bytes = body.to_bytes();
        let prompt_bytes = bytes.len() as u64;
        let request = self.authorize(
            self.http
                .client()
                .post(self.url("chat/completions"))
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(bytes),
        );
        let response = match tokio::time::timeout(wait, request.send()).await {
            Err(_) => {
                return Err(ModelError::new(
                    ModelErrorKind::Network,
                    None,
                    format!("the {name} API did not answer within {} s", wait.as_secs_f32()),
                ));
            }
            Ok(r) => r.map_err(|e| http::network_error(name, &e))?,
        };
        let status = response.status().as_u16();
        if !(200..300).contains(&status) {
            let (should, after) = http::retry_hints(response.headers());
            let (text, cut) = http::error_body(response, idle).await;
            let mut e =
                http_error(self.flavor, status, &text, &self.endpoint.key_source, self.endpoint.api_key.is_some());
            e.message.push_str(cut.as_deref().unwrap_or_default());
            if e.retryable {
                e.retryable = should.unwrap_or(true);
            } else if should == Some(true) {
                e.retryable = true;
            }
            e.retry_after = after;
            return Err(e);
        }
        let is_json = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        if is_json {
            return json_answer(response, status, wait, prompt_bytes, name).await.map(Some);
        }
        let mut events = http::sse(response, idle, name);
        let mut acc = Accumulator::default();
        let mut seen = 0u64;
        while let Some(ev) = events.next().await? {
            seen += 1;
            if acc.apply(&ev.data, name, updates)? {
                break;
            }
        }
        if seen == 0 {
            return Ok(None);
        }
        let reported = acc.usage.is_some();
        let mut r = acc.finish(name)?;
        if !reported {
            r.usage = estimated_usage(prompt_bytes, &r.message);
        }
        Ok(Some(r))
    }
}

/// A JSON (unstreamed) answer: read within `wait`, at most
/// [`http::MAX_JSON_BODY`] of it, and decoded.
async fn json_answer(
    response: reqwest::Response,
    status: u16,
    wait: std::time::Duration,
    prompt_bytes: u64,
    name: &str,
) -> Result<ModelResponse, ModelError> {
    // Within the idle timeout, and at most MAX_JSON_BODY of it.
    let body = http::read_capped(response, http::MAX_JSON_BODY, wait).await;
    if body.cut {
        let mut e = ModelError::new(
            ModelErrorKind::Decode,
            Some(status),
            format!(
                "the {name} API sent an answer over {}; a response that large is not accepted",
                http::size(http::MAX_JSON_BODY as u64)
            ),
        );
        e.retryable = false;
        return Err(e);
    }
    if let Some(why) = body.failed {
        return Err(ModelError::new(
            ModelErrorKind::Network,
            None,
            format!("the {name} API's answer could not be read: {why}"),
        ));
    }
    let v: Value = serde_json::from_slice(&body.bytes).map_err(|e| {
        ModelError::new(ModelErrorKind::Decode, Some(status), format!("the {name} API answered with invalid JSON: {e}"))
    })?;
    let mut r = decode_completion(&v, name)?;
    if !v["usage"].is_object() {
        r.usage = estimated_usage(prompt_bytes, &r.message);
    }
    Ok(r)
}

#[async_trait]
impl ModelClient for OpenAi {
    async fn complete(
        &self,
        request: ModelRequest<'_>,
        updates: &(dyn Fn(StreamUpdate) + Send + Sync),
    ) -> Result<ModelResponse, ModelError> {
        let body = encode_body(&self.endpoint.model, &request, self.flavor, self.reasoning_effort, &self.encoded);
        with_retries(self.endpoint.max_retries, updates, |_| self.attempt(&body, updates)).await
    }

    /// `GET {base}/models/{id}`; where that is 404 (llama-server and
    /// llama-cpp-python have no such route), `GET {base}/models` and the id
    /// in its list, any id when one model is served (those servers answer
    /// with it whatever the request names).
    async fn check(&self) -> Result<String, ModelError> {
        let url = self.url(&format!("models/{}", self.endpoint.model));
        let (status, text) = self.get(&url).await?;
        if (200..300).contains(&status) {
            return Ok(format!("HTTP {status} from GET {url}"));
        }
        let failed = |status: u16, text: &str| {
            http_error(self.flavor, status, text, &self.endpoint.key_source, self.endpoint.api_key.is_some())
        };
        if status != 404 {
            return Err(failed(status, &text));
        }
        let list = self.url("models");
        let (listed, body) = self.get(&list).await?;
        if !(200..300).contains(&listed) {
            return Err(failed(status, &text));
        }
        let v: Value = serde_json::from_str(&body).unwrap_or_default();
        let ids: Vec<&str> = v["data"].as_array().into_iter().flatten().filter_map(|m| m["id"].as_str()).collect();
        let model = &self.endpoint.model;
        match ids.as_slice() {
            _ if ids.contains(&model.as_str()) => {
                Ok(format!("HTTP {listed} from GET {list}, which lists {model} (GET {url} was 404)"))
            }
            [only] => Ok(format!(
                "HTTP {listed} from GET {list}: the server has one model, {only}, and answers with it whatever \
                 model is named (GET {url} was 404)"
            )),
            _ => {
                let mut e = ModelError::new(
                    ModelErrorKind::InvalidRequest,
                    Some(404),
                    format!(
                        "{} API: the model {model} is not served; GET {list} lists {}",
                        self.flavor.name(),
                        if ids.is_empty() { "none".to_string() } else { ids.join(", ") }
                    ),
                );
                e.retryable = false;
                Err(e)
            }
        }
    }
}

impl OpenAi {
    /// A `GET`: its status and (capped) body.
    async fn get(&self, url: &str) -> Result<(u16, String), ModelError> {
        let name = self.flavor.name();
        let response =
            self.authorize(self.http.client().get(url)).send().await.map_err(|e| http::network_error(name, &e))?;
        let status = response.status().as_u16();
        let (text, _) = http::error_body(response, self.endpoint.idle_timeout).await;
        Ok((status, text))
    }
}

/// Maps an error response (`{"error":{message,type,code}}`, or FastAPI's
/// `{"detail": …}`). `key_sent` says whether a key went with the request,
/// so a 401 can tell a rejected key from a missing one.
fn http_error(flavor: Flavor, status: u16, body: &str, key_source: &str, key_sent: bool) -> ModelError {
    let name = flavor.name();
    let v: Value = serde_json::from_str(body).unwrap_or_default();
    let err = &v["error"];
    let api_message = err["message"]
        .as_str()
        .or(v["detail"].as_str())
        .map(str::to_string)
        .unwrap_or_else(|| body.chars().take(300).collect());
    let code = err["code"].as_str().or(err["type"].as_str()).unwrap_or("");
    let key = if key_source.is_empty() { "the API key".to_string() } else { format!("the key from {key_source}") };
    let too_long = code == "context_length_exceeded"
        || err["type"] == "exceed_context_size_error"
        || err["type"] == "context_length_exceeded";
    let setting = server_setting(&api_message);
    let (kind, hint, retryable) = match status {
        401 if key_sent => (ModelErrorKind::Auth, format!("{key} was rejected; check it"), false),
        401 => (
            ModelErrorKind::Auth,
            match key_source {
                "" => "the server wants an API key and none was sent".to_string(),
                var => format!(
                    "the server wants an API key and none was sent: the {} provider reads {var}; set it to the server's key",
                    flavor.provider()
                ),
            },
            false,
        ),
        403 => (ModelErrorKind::Auth, format!("{key} may not use this model, or the region is not supported"), false),
        429 if code == "insufficient_quota" || err["type"] == "insufficient_quota" => {
            (ModelErrorKind::RateLimited, "the account is out of quota; check the plan and billing".to_string(), false)
        }
        429 => (ModelErrorKind::RateLimited, "rate limited; try again later".to_string(), true),
        404 => (ModelErrorKind::InvalidRequest, "not found (check the model id and baseUrl)".to_string(), false),
        _ if too_long => (
            ModelErrorKind::ContextTooLong,
            "the conversation no longer fits the model's context window".to_string(),
            false,
        ),
        // Deterministic whatever the status: the same request fails the same way.
        _ if setting.is_some() => (ModelErrorKind::InvalidRequest, setting.unwrap_or_default(), false),
        _ if api_message.contains("validation error") => (
            ModelErrorKind::InvalidRequest,
            "the server refused the request's shape (a validation error; retrying would not help)".to_string(),
            false,
        ),
        400 | 413 | 422 => (ModelErrorKind::InvalidRequest, "the API refused the request".to_string(), false),
        s if http::status_retryable(s) => (ModelErrorKind::Server, "the API failed".to_string(), true),
        _ => (ModelErrorKind::InvalidRequest, "the API refused the request".to_string(), false),
    };
    let mut message = format!("{name} API {status}: {hint}: {api_message}");
    // llama-server names the sizes apart; at the end, where the loop's
    // context budget reads "N tokens > M".
    if let (Some(prompt), Some(window)) = (err["n_prompt_tokens"].as_u64(), err["n_ctx"].as_u64()) {
        message.push_str(&format!(" (n_prompt_tokens {prompt} tokens > n_ctx {window} tokens)"));
    }
    let mut e = ModelError::new(kind, Some(status), message);
    e.retryable = retryable;
    e
}

/// What to change when an error names a server setting (`tools param
/// requires --jinja flag`): the flag to start the server with.
fn server_setting(message: &str) -> Option<String> {
    if !(message.contains("requires") || message.contains("flag") || message.contains("enable")) {
        return None;
    }
    let flag =
        message.split(|c: char| c.is_whitespace() || matches!(c, '`' | '\'' | '"' | ',' | '(' | ')')).find(|w| {
            w.len() > 2
                && w.starts_with("--")
                && w[2..].chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        })?;
    Some(match flag {
        "--jinja" => {
            "a server setting is missing: start llama-server with --jinja (and a chat template that supports tools)"
                .to_string()
        }
        flag => format!("a server setting is missing: start the server with {flag}"),
    })
}

/// The request body; `reasoning_effort` is sent as it is given (the caller
/// decides whether the model takes it). Without it, the body is what it
/// always was.
pub fn encode_request(model: &str, req: &ModelRequest<'_>, flavor: Flavor, reasoning_effort: Option<Effort>) -> Value {
    encode_body(model, req, flavor, reasoning_effort, &Encoded::default()).to_value()
}

/// [`encode_request`] as the client sends it: the messages' texts from
/// `encoded` where they were sent before.
pub fn encode_body(
    model: &str,
    req: &ModelRequest<'_>,
    flavor: Flavor,
    reasoning_effort: Option<Effort>,
    encoded: &Encoded,
) -> Body {
    let encode = |m: &Message| {
        let mut out = Vec::new();
        encode_message(m, flavor, &mut out);
        out.iter().map(Value::to_string).collect::<Vec<_>>().join(",")
    };
    let mut texts = vec![std::sync::Arc::from(json!({"role": "system", "content": req.system}).to_string())];
    texts.extend(encoded.texts(req.messages, req.revisions, |_| None, encode));
    let mut body = json!({
        "model": model,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    let limit_key = match flavor {
        Flavor::OpenAi => "max_completion_tokens",
        Flavor::Compatible => "max_tokens",
    };
    body[limit_key] = json!(req.max_output_tokens);
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.input_schema}}))
            .collect();
        body["tools"] = Value::Array(tools);
        // "auto" is OpenAI's default, but llama-cpp-python shows the tools
        // to the model only when `tool_choice` is given.
        body["tool_choice"] = json!(if req.allow_tools { "auto" } else { "none" });
    }
    if let Some(effort) = reasoning_effort {
        body["reasoning_effort"] = json!(effort.name());
    }
    Body::new(body, "messages", texts)
}

fn encode_message(m: &Message, flavor: Flavor, out: &mut Vec<Value>) {
    match m.role {
        Role::Assistant => {
            let text = m.text();
            let calls: Vec<Value> = m
                .content
                .iter()
                .filter_map(|b| match b {
                    Block::ToolUse { id, name, input } => {
                        // Always a string on the wire; a malformed input is echoed as it came.
                        let arguments = match input {
                            ToolInput::Object(map) => Value::Object(map.clone()).to_string(),
                            ToolInput::Malformed { raw, .. } => raw.clone(),
                        };
                        Some(json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}))
                    }
                    _ => None,
                })
                .collect();
            // OpenAI takes null beside tool calls; llama-cpp-python refuses
            // anything but a string (HTTP 500), and "" means the same.
            let content = match (text.is_empty(), flavor) {
                (true, Flavor::OpenAi) => Value::Null,
                _ => Value::String(text),
            };
            let mut msg = json!({"role": "assistant", "content": content});
            if !calls.is_empty() {
                msg["tool_calls"] = Value::Array(calls);
            }
            out.push(msg);
        }
        Role::User => {
            // Tool results first, each its own message, then any text.
            for b in &m.content {
                if let Block::ToolResult { tool_use_id, content, is_error } = b {
                    let content = if *is_error { format!("Error: {content}") } else { content.clone() };
                    out.push(json!({"role": "tool", "tool_call_id": tool_use_id, "content": content}));
                }
            }
            let text = m.text();
            if !text.is_empty() {
                out.push(json!({"role": "user", "content": text}));
            }
        }
    }
}

/// One tool call being assembled.
#[derive(Debug, Default, Clone)]
struct Slot {
    index: Option<u64>,
    id: String,
    name: String,
    arguments: String,
}

#[derive(Default)]
struct Accumulator {
    text: String,
    refusal: String,
    slots: Vec<Slot>,
    finish: Option<String>,
    usage: Option<Usage>,
    done: bool,
}

impl Accumulator {
    /// Applies one `data:` payload; true at `[DONE]`.
    fn apply(
        &mut self,
        data: &str,
        name: &str,
        updates: &(dyn Fn(StreamUpdate) + Send + Sync),
    ) -> Result<bool, ModelError> {
        let data = data.trim();
        if data.starts_with("[DONE]") {
            self.done = true;
            return Ok(true);
        }
        if data.is_empty() {
            return Ok(false);
        }
        let v: Value = serde_json::from_str(data).map_err(|e| {
            ModelError::new(ModelErrorKind::Network, Some(200), format!("bad {name} stream chunk: {e}"))
        })?;
        if v["error"].is_object() {
            let msg = v["error"]["message"].as_str().unwrap_or("unknown error");
            return Err(ModelError::new(ModelErrorKind::Server, Some(200), format!("{name} API stream error: {msg}")));
        }
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(usage_of(u));
        }
        for choice in v["choices"].as_array().into_iter().flatten() {
            if choice["index"].as_u64().unwrap_or(0) != 0 {
                continue;
            }
            let delta = &choice["delta"];
            if let Some(t) = delta["content"].as_str()
                && !t.is_empty()
            {
                self.text.push_str(t);
                updates(StreamUpdate::Text(t.to_string()));
            }
            if let Some(r) = delta["refusal"].as_str() {
                self.refusal.push_str(r);
            }
            let calls = delta["tool_calls"].as_array().filter(|c| !c.is_empty());
            for call in calls.into_iter().flatten() {
                self.merge(call, updates);
            }
            // llama-cpp-python repeats every fragment in the legacy field:
            // it is a call of its own only without `tool_calls`.
            if calls.is_none() && delta["function_call"].is_object() {
                // Legacy single function call: no id, no index.
                let fc = &delta["function_call"];
                self.merge(&json!({"index": u64::MAX, "function": fc}), updates);
            }
            if let Some(f) = choice["finish_reason"].as_str() {
                self.finish = Some(f.to_string());
            }
        }
        Ok(false)
    }

    fn merge(&mut self, call: &Value, updates: &(dyn Fn(StreamUpdate) + Send + Sync)) {
        let index = call["index"].as_u64();
        let id = match &call["id"] {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            _ => String::new(),
        };
        // Which slot: same index, unless a different non-empty id arrives
        // (a server reusing index 0 for parallel calls).
        let existing = match index {
            Some(i) => self.slots.iter().rposition(|s| s.index == Some(i)),
            None if id.is_empty() => self.slots.len().checked_sub(1),
            None => None,
        };
        let slot = match existing {
            Some(pos) if id.is_empty() || self.slots[pos].id.is_empty() || self.slots[pos].id == id => pos,
            _ => {
                self.slots.push(Slot { index, ..Default::default() });
                self.slots.len() - 1
            }
        };
        let s = &mut self.slots[slot];
        if s.id.is_empty() {
            s.id = id;
        }
        let f = &call["function"];
        if let Some(n) = f["name"].as_str()
            && s.name.is_empty()
            && !n.is_empty()
        {
            s.name = n.to_string();
            updates(StreamUpdate::ToolStart(s.name.clone()));
        }
        match &f["arguments"] {
            Value::String(piece) => s.arguments.push_str(piece),
            Value::Null => {}
            whole => s.arguments = whole.to_string(),
        }
    }

    fn finish(self, name: &str) -> Result<ModelResponse, ModelError> {
        if !self.done && self.finish.is_none() {
            return Err(ModelError::new(
                ModelErrorKind::Network,
                None,
                format!("the {name} stream ended before [DONE]"),
            ));
        }
        let calls = self.slots.into_iter().map(|s| (s.id, s.name, Value::String(s.arguments))).collect();
        Ok(build(self.text, self.refusal, calls, self.finish.as_deref(), self.usage.unwrap_or_default()))
    }
}

/// Decodes a non-streaming `chat.completion`.
pub fn decode_completion(v: &Value, name: &str) -> Result<ModelResponse, ModelError> {
    let choice = v["choices"].get(0).ok_or_else(|| {
        ModelError::new(
            ModelErrorKind::Decode,
            Some(200),
            format!("unexpected response from the {name} API: no choices"),
        )
    })?;
    let m = &choice["message"];
    let mut calls: Vec<(String, String, Value)> = m["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let id = match &c["id"] {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                _ => String::new(),
            };
            (id, c["function"]["name"].as_str().unwrap_or_default().to_string(), c["function"]["arguments"].clone())
        })
        .collect();
    if calls.is_empty() && m["function_call"].is_object() {
        let fc = &m["function_call"];
        calls.push((String::new(), fc["name"].as_str().unwrap_or_default().to_string(), fc["arguments"].clone()));
    }
    let usage = usage_of(&v["usage"]);
    Ok(build(
        m["content"].as_str().unwrap_or_default().to_string(),
        m["refusal"].as_str().unwrap_or_default().to_string(),
        calls,
        choice["finish_reason"].as_str(),
        usage,
    ))
}

/// Normalises arguments: a string is parsed (empty means `{}`), an object
/// is used as is, null means `{}`; anything else is
/// [`ToolInput::Malformed`] with its text, which the loop answers with a
/// tool error.
fn arguments(v: Value) -> ToolInput {
    match v {
        Value::Null => ToolInput::empty(),
        Value::String(s) => ToolInput::parse(s),
        Value::Object(map) => ToolInput::Object(map),
        other => ToolInput::malformed(other.to_string()),
    }
}

fn build(
    text: String,
    refusal: String,
    calls: Vec<(String, String, Value)>,
    finish: Option<&str>,
    usage: Usage,
) -> ModelResponse {
    let mut content = Vec::new();
    if !text.is_empty() {
        content.push(Block::Text { text });
    }
    let mut used: HashSet<String> = calls.iter().map(|c| c.0.clone()).filter(|id| !id.is_empty()).collect();
    let mut n = 0;
    for (id, name, args) in calls {
        let id = if id.is_empty() {
            loop {
                n += 1;
                let candidate = format!("call_{n}");
                if used.insert(candidate.clone()) {
                    break candidate;
                }
            }
        } else {
            id
        };
        content.push(Block::ToolUse { id, name, input: arguments(args) });
    }
    let has_calls = content.iter().any(|b| matches!(b, Block::ToolUse { .. }));
    let stop_reason = match finish {
        _ if has_calls => StopReason::ToolUse,
        _ if !refusal.is_empty() => StopReason::Refusal { explanation: Some(refusal) },
        Some("length") => StopReason::MaxTokens,
        Some("content_filter") => StopReason::Refusal { explanation: None },
        Some("stop") | None => StopReason::EndTurn,
        Some(other) => {
            tracing::debug!(finish_reason = other, "treating an unusual finish_reason without tool calls as stop");
            StopReason::EndTurn
        }
    };
    ModelResponse { message: Message { role: Role::Assistant, content, raw: None }, stop_reason, usage }
}

/// The usage of an answer without any (llama-cpp-python ignores
/// `stream_options`): four bytes a token of the request and of the answer,
/// marked as an estimate, so that the run's bounds still count something.
fn estimated_usage(prompt_bytes: u64, answer: &Message) -> Usage {
    let output_bytes: usize = answer
        .content
        .iter()
        .map(|b| match b {
            Block::Text { text } => text.len(),
            Block::ToolUse { name, input, .. } => name.len() + input.to_value().to_string().len(),
            _ => 0,
        })
        .sum();
    Usage {
        input_tokens: prompt_bytes.div_ceil(4),
        output_tokens: (output_bytes as u64).div_ceil(4),
        estimated: true,
        ..Default::default()
    }
}

/// A `usage` object: `prompt_tokens` are all prompt tokens, of which
/// `prompt_tokens_details.cached_tokens` came from the server's own prefix
/// cache (OpenAI bills no cache writes).
fn usage_of(u: &Value) -> Usage {
    Usage {
        input_tokens: u["prompt_tokens"].as_u64().unwrap_or(0),
        output_tokens: u["completion_tokens"].as_u64().unwrap_or(0),
        cache_read_tokens: u["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap_or(0),
        cache_write_tokens: 0,
        estimated: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ToolSpec;

    fn feed(chunks: &[Value]) -> Result<ModelResponse, ModelError> {
        let mut acc = Accumulator::default();
        for c in chunks {
            if acc.apply(&c.to_string(), "OpenAI", &|_| {})? {
                break;
            }
        }
        acc.apply("[DONE]", "OpenAI", &|_| {})?;
        acc.finish("OpenAI")
    }

    fn chunk(delta: Value, finish: Option<&str>) -> Value {
        json!({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    }

    #[test]
    fn cached_prompt_tokens_are_read_from_json_and_from_the_last_streamed_chunk() {
        let usage =
            json!({"prompt_tokens": 5000, "completion_tokens": 40, "prompt_tokens_details": {"cached_tokens": 4096}});
        let want = Usage { input_tokens: 5000, output_tokens: 40, cache_read_tokens: 4096, ..Default::default() };
        let completion = json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}], "usage": usage});
        assert_eq!(decode_completion(&completion, "OpenAI").unwrap().usage, want);
        let streamed = feed(&[
            chunk(json!({"role": "assistant", "content": "ok"}), Some("stop")),
            json!({"choices": [], "usage": usage}),
        ])
        .unwrap();
        assert_eq!(streamed.usage, want);
        assert_eq!(streamed.usage.uncached_input(), 904);
    }

    #[test]
    fn fragments_merge_by_index_with_id_and_name_set_once() {
        let r = feed(&[
            chunk(json!({"role": "assistant", "content": "Look"}), None),
            chunk(json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "read_file", "arguments": ""}}]}), None),
            chunk(json!({"tool_calls": [{"index": 1, "id": "call_b", "type": "function", "function": {"name": "grep", "arguments": "{\"pat"}}]}), None),
            chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"path\":"}}]}), None),
            chunk(json!({"tool_calls": [{"index": 0, "id": "call_a", "function": {"name": "read_file", "arguments": "\"漢.py\"}"}}]}), None),
            chunk(json!({"tool_calls": [{"index": 1, "function": {"arguments": "tern\":\"x\"}"}}]}), None),
            chunk(json!({}), Some("tool_calls")),
            json!({"choices": [], "usage": {"prompt_tokens": 50, "completion_tokens": 12}}),
        ])
        .unwrap();
        assert_eq!(r.stop_reason, StopReason::ToolUse);
        assert_eq!(r.usage, Usage { input_tokens: 50, output_tokens: 12, ..Default::default() });
        let calls: Vec<_> =
            r.message.tool_calls().map(|(i, n, v)| (i.to_string(), n.to_string(), v.to_value())).collect();
        assert_eq!(
            calls,
            vec![
                ("call_a".to_string(), "read_file".to_string(), json!({"path": "漢.py"})),
                ("call_b".to_string(), "grep".to_string(), json!({"pattern": "x"})),
            ]
        );
        assert_eq!(r.message.text(), "Look");
    }

    #[test]
    fn ollama_index_zero_reuse_opens_new_calls_and_empty_ids_are_synthesised() {
        let r = feed(&[
            chunk(json!({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "read_file", "arguments": "{\"path\":\"a\"}"}}]}), None),
            chunk(json!({"tool_calls": [{"index": 0, "id": "c2", "function": {"name": "read_file", "arguments": "{\"path\":\"b\"}"}}]}), None),
            chunk(json!({"tool_calls": [{"index": 1, "id": "", "function": {"name": "list_files", "arguments": ""}}]}), None),
            chunk(json!({}), Some("stop")),
        ])
        .unwrap();
        let calls: Vec<_> = r.message.tool_calls().map(|(i, _, v)| (i.to_string(), v.to_value())).collect();
        assert_eq!(
            calls,
            vec![
                ("c1".into(), json!({"path": "a"})),
                ("c2".into(), json!({"path": "b"})),
                ("call_1".into(), json!({}))
            ]
        );
        assert_eq!(r.stop_reason, StopReason::ToolUse, "finish_reason stop with tool calls is a tool turn");
    }

    #[test]
    fn non_streaming_quirks_normalise() {
        let v = json!({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": 7, "type": "function", "function": {"name": "read_file", "arguments": {"path": "a"}}},
                           {"id": "", "type": "function", "function": {"name": "grep", "arguments": "{not json"}}]}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 4}});
        let r = decode_completion(&v, "x").unwrap();
        let calls: Vec<_> = r.message.tool_calls().map(|(i, _, v)| (i.to_string(), v.to_value())).collect();
        assert_eq!(
            calls,
            vec![("7".into(), json!({"path": "a"})), ("call_1".into(), Value::String("{not json".into()))]
        );
        let r =
            decode_completion(&json!({"choices": [{"message": {"content": "cut"}, "finish_reason": "length"}]}), "x")
                .unwrap();
        assert_eq!(r.stop_reason, StopReason::MaxTokens);
        let r = decode_completion(
            &json!({"choices": [{"message": {"content": null, "refusal": "no"}, "finish_reason": "stop"}]}),
            "x",
        )
        .unwrap();
        assert_eq!(r.stop_reason, StopReason::Refusal { explanation: Some("no".into()) });
    }

    #[test]
    fn streamed_arguments_that_are_not_an_object_are_malformed_and_echoed_as_they_came() {
        let r = feed(&[
            chunk(json!({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "grep", "arguments": "{\"pattern\": "}}]}), None),
            chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "oops}"}}]}), None),
            chunk(json!({"tool_calls": [{"index": 1, "id": "c2", "function": {"name": "grep", "arguments": "\"x\""}}]}), None),
            chunk(json!({}), Some("tool_calls")),
        ])
        .unwrap();
        let inputs: Vec<&ToolInput> = r.message.tool_calls().map(|(_, _, input)| input).collect();
        assert!(
            matches!(inputs[0], ToolInput::Malformed { raw, error } if raw == "{\"pattern\": oops}" && error.contains("expected value")),
            "{inputs:?}"
        );
        assert_eq!(
            inputs[1],
            &ToolInput::Malformed { raw: "\"x\"".into(), error: "a string is not a JSON object".into() }
        );
        let msgs = vec![Message::user_text("fix"), r.message];
        let req = ModelRequest {
            system: "s",
            messages: &msgs,
            tools: &[],
            max_output_tokens: 9,
            allow_tools: true,
            revisions: &[],
        };
        let body = encode_request("m", &req, Flavor::OpenAi, None);
        let echoed = &body["messages"][2]["tool_calls"];
        assert_eq!(
            (&echoed[0]["function"]["arguments"], &echoed[1]["function"]["arguments"]),
            (&json!("{\"pattern\": oops}"), &json!("\"x\""))
        );
    }

    #[test]
    fn stream_errors_and_truncation_are_errors() {
        let mut acc = Accumulator::default();
        let e = acc.apply(r#"{"error":{"message":"boom","type":"server_error"}}"#, "OpenAI", &|_| {}).unwrap_err();
        assert!(e.retryable && e.message.contains("boom"));
        let mut acc = Accumulator::default();
        acc.apply(&chunk(json!({"content": "half"}), None).to_string(), "OpenAI", &|_| {}).unwrap();
        assert!(acc.finish("OpenAI").unwrap_err().message.contains("ended before [DONE]"));
    }

    #[test]
    fn requests_use_tool_messages_and_string_arguments() {
        let msgs = vec![
            Message::user_text("fix"),
            Message {
                role: Role::Assistant,
                content: vec![
                    Block::Text { text: "ok".into() },
                    Block::ToolUse { id: "c1".into(), name: "read_file".into(), input: json!({"path": "a"}).into() },
                ],
                raw: None,
            },
            Message {
                role: Role::User,
                content: vec![
                    Block::ToolResult { tool_use_id: "c1".into(), content: "nope".into(), is_error: true },
                    Block::Text { text: "stop now".into() },
                ],
                raw: None,
            },
        ];
        let tools = vec![ToolSpec {
            name: "read_file".into(),
            description: "d".into(),
            input_schema: json!({"type": "object"}),
        }];
        let req = ModelRequest {
            system: "sys",
            messages: &msgs,
            tools: &tools,
            max_output_tokens: 99,
            allow_tools: false,
            revisions: &[],
        };
        let body = encode_request("m", &req, Flavor::OpenAi, None);
        assert_eq!(body["max_completion_tokens"], 99);
        assert_eq!(body["tool_choice"], "none");
        assert_eq!(body["stream_options"], json!({"include_usage": true}));
        assert_eq!(
            body["messages"],
            json!([
                {"role": "system", "content": "sys"},
                {"role": "user", "content": "fix"},
                {"role": "assistant", "content": "ok", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a\"}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "Error: nope"},
                {"role": "user", "content": "stop now"}
            ])
        );
        assert_eq!(
            body["tools"][0],
            json!({"type": "function", "function": {"name": "read_file", "description": "d", "parameters": {"type": "object"}}})
        );
        assert_eq!(encode_request("m", &req, Flavor::Compatible, None)["max_tokens"], 99);
    }

    fn client(model: &str, flavor: Flavor, effort: Option<Effort>) -> OpenAi {
        let endpoint = Endpoint {
            base_url: "http://127.0.0.1:9/v1".into(),
            api_key: None,
            key_source: String::new(),
            model: model.into(),
            max_retries: 0,
            connect_timeout: std::time::Duration::from_secs(1),
            idle_timeout: std::time::Duration::from_secs(1),
        };
        OpenAi::new(endpoint, flavor).with_effort(effort)
    }

    #[test]
    fn reasoning_models_are_the_o_series_and_gpt_5() {
        for model in ["o1", "o3", "o3-mini", "o4-mini", "o4-mini-2025-04-16", "gpt-5", "gpt-5-mini", "gpt-5.1-codex"] {
            assert!(is_reasoning_model(model), "{model}");
        }
        for model in ["gpt-4.1", "gpt-4.1-mini", "gpt-4o", "gpt-4o-mini", "omni", "ollama", "qwen3", ""] {
            assert!(!is_reasoning_model(model), "{model}");
        }
    }

    #[test]
    fn effort_is_reasoning_effort_where_the_model_takes_it_and_nothing_else_changes() {
        let msgs = vec![Message::user_text("fix")];
        let tools = vec![ToolSpec {
            name: "read_file".into(),
            description: "d".into(),
            input_schema: json!({"type": "object"}),
        }];
        let req = ModelRequest {
            system: "sys",
            messages: &msgs,
            tools: &tools,
            max_output_tokens: 99,
            allow_tools: true,
            revisions: &[],
        };
        let body = |c: &OpenAi| encode_request(&c.endpoint.model, &req, c.flavor, c.reasoning_effort);
        // The body of a request before `effort` existed, byte for byte.
        let before = r#"{"max_completion_tokens":99,"messages":[{"content":"sys","role":"system"},{"content":"fix","role":"user"}],"model":"o3","stream":true,"stream_options":{"include_usage":true},"tool_choice":"auto","tools":[{"function":{"description":"d","name":"read_file","parameters":{"type":"object"}},"type":"function"}]}"#;
        // Compared as JSON: the keys' order is serde_json's maps' (sorted, or
        // as inserted with `preserve_order`).
        let before: Value = serde_json::from_str(before).unwrap();
        assert_eq!(body(&client("o3", Flavor::OpenAi, None)), before);

        for effort in [Effort::Low, Effort::Medium, Effort::High] {
            let mut sent = body(&client("o3", Flavor::OpenAi, Some(effort)));
            assert_eq!(sent["reasoning_effort"], effort.name());
            sent.as_object_mut().unwrap().remove("reasoning_effort");
            assert_eq!(sent, before, "max_completion_tokens, no max_tokens, no temperature");
        }
        let gpt5 = body(&client("gpt-5-mini", Flavor::OpenAi, Some(Effort::High)));
        assert_eq!((&gpt5["reasoning_effort"], &gpt5["max_completion_tokens"]), (&json!("high"), &json!(99)));
        // Models that would refuse it get none.
        for model in ["gpt-4.1", "gpt-4o"] {
            let c = client(model, Flavor::OpenAi, Some(Effort::High));
            assert_eq!(c.reasoning_effort, None, "{model}");
            assert!(body(&c).get("reasoning_effort").is_none(), "{model}");
        }
        // A compatible server: nothing new unless asked; then sent, whatever the model.
        let unset = body(&client("qwen3", Flavor::Compatible, None));
        assert!(unset.get("reasoning_effort").is_none() && unset["max_tokens"] == 99, "{unset}");
        let asked = body(&client("gpt-4.1", Flavor::Compatible, Some(Effort::Low)));
        assert_eq!((&asked["reasoning_effort"], &asked["max_tokens"]), (&json!("low"), &json!(99)));
        // Reasoning tokens count within max_completion_tokens: no room is added.
        assert_eq!(client("o3", Flavor::OpenAi, Some(Effort::High)).output_ceiling(99), 99);
    }

    #[test]
    fn errors_say_what_to_do_and_quota_is_not_retried() {
        let e = http_error(
            Flavor::OpenAi,
            429,
            r#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}"#,
            "OPENAI_API_KEY",
            true,
        );
        assert!(!e.retryable);
        assert!(e.message.contains("out of quota"));
        let slow = r#"{"error":{"message":"slow down","type":"requests"}}"#;
        assert!(http_error(Flavor::OpenAi, 429, slow, "", true).retryable);
        let e = http_error(
            Flavor::OpenAi,
            401,
            r#"{"error":{"message":"Incorrect API key provided"}}"#,
            "OPENAI_API_KEY",
            true,
        );
        assert_eq!(
            e.message,
            "OpenAI API 401: the key from OPENAI_API_KEY was rejected; check it: Incorrect API key provided"
        );
    }

    #[test]
    fn a_401_without_a_key_names_the_variable_the_provider_reads() {
        // py-key-openai-var: llama-cpp-python started with --api_key, only OPENAI_API_KEY set.
        let e = http_error(Flavor::Compatible, 401, r#"{"detail":"Invalid API key"}"#, "AGENTFIX_API_KEY", false);
        assert_eq!(
            e.message,
            "OpenAI-compatible API 401: the server wants an API key and none was sent: the openai-compatible \
             provider reads AGENTFIX_API_KEY; set it to the server's key: Invalid API key"
        );
        assert_eq!((e.kind, e.retryable), (ModelErrorKind::Auth, false));
        let sent = http_error(Flavor::Compatible, 401, r#"{"detail":"Invalid API key"}"#, "AGENTFIX_API_KEY", true);
        assert!(sent.message.contains("the key from AGENTFIX_API_KEY was rejected"), "{}", sent.message);
    }

    #[test]
    fn deterministic_server_errors_are_not_retried_and_say_what_to_change() {
        // cpp-nojinja: llama-server without --jinja, HTTP 500 to every request with tools.
        let body = r#"{"error":{"code":500,"message":"tools param requires --jinja flag","type":"server_error"}}"#;
        let e = http_error(Flavor::Compatible, 500, body, "AGENTFIX_API_KEY", false);
        assert_eq!((e.kind, e.retryable), (ModelErrorKind::InvalidRequest, false));
        assert!(e.message.contains("start llama-server with --jinja"), "{}", e.message);
        assert!(e.message.ends_with("tools param requires --jinja flag"), "{}", e.message);
        // hybrid-py: llama-cpp-python's pydantic refusal, HTTP 500.
        let body = r#"{"error":{"message":"7 validation errors:\n  {'type': 'string_type', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestAssistantMessage', 'content'), 'msg': 'Input should be a valid string', 'input': None}","type":"internal_server_error"}}"#;
        let e = http_error(Flavor::Compatible, 500, body, "", false);
        assert_eq!((e.kind, e.retryable), (ModelErrorKind::InvalidRequest, false));
        assert!(e.message.contains("a validation error; retrying would not help"), "{}", e.message);
        // Any other 500 is retried as before.
        let e = http_error(Flavor::Compatible, 500, r#"{"error":{"message":"boom"}}"#, "", false);
        assert!(e.retryable && e.kind == ModelErrorKind::Server);
    }

    #[test]
    fn context_length_exceeded_is_its_own_kind() {
        let body = r#"{"error":{"message":"This model's maximum context length is 60000 tokens. However, your messages resulted in 61000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
        let e = http_error(Flavor::OpenAi, 400, body, "", true);
        assert_eq!((e.kind, e.retryable), (ModelErrorKind::ContextTooLong, false));
        assert!(e.message.contains("maximum context length is 60000 tokens"), "{}", e.message);
        let other = r#"{"error":{"message":"bad","type":"invalid_request_error","code":"invalid_value"}}"#;
        assert_eq!(http_error(Flavor::OpenAi, 400, other, "", true).kind, ModelErrorKind::InvalidRequest);
        // cpp-ctx-2048: llama-server's own envelope, a numeric code and the sizes apart.
        let body = r#"{"error":{"code":400,"message":"request (2813 tokens) exceeds the available context size (2048 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":2813,"n_ctx":2048}}"#;
        let e = http_error(Flavor::Compatible, 400, body, "", false);
        assert_eq!((e.kind, e.retryable), (ModelErrorKind::ContextTooLong, false));
        assert!(e.message.ends_with("(n_prompt_tokens 2813 tokens > n_ctx 2048 tokens)"), "{}", e.message);
    }

    #[test]
    fn tools_are_offered_with_tool_choice_auto_and_empty_content_goes_to_compatible_servers_as_a_string() {
        let msgs = vec![
            Message::user_text("fix"),
            Message {
                role: Role::Assistant,
                content: vec![Block::ToolUse {
                    id: "c1".into(),
                    name: "read_file".into(),
                    input: json!({"path": "a"}).into(),
                }],
                raw: None,
            },
        ];
        let tools = vec![ToolSpec {
            name: "read_file".into(),
            description: "d".into(),
            input_schema: json!({"type": "object"}),
        }];
        let req = ModelRequest {
            system: "s",
            messages: &msgs,
            tools: &tools,
            max_output_tokens: 9,
            allow_tools: true,
            revisions: &[],
        };
        let openai = encode_request("m", &req, Flavor::OpenAi, None);
        let compatible = encode_request("m", &req, Flavor::Compatible, None);
        assert_eq!((&openai["tool_choice"], &compatible["tool_choice"]), (&json!("auto"), &json!("auto")));
        assert_eq!(openai["messages"][2]["content"], Value::Null);
        assert_eq!(compatible["messages"][2]["content"], "");
        let none = ModelRequest { allow_tools: false, ..req };
        assert_eq!(encode_request("m", &none, Flavor::Compatible, None)["tool_choice"], "none");
        let bare = ModelRequest { tools: &[], ..req };
        assert!(encode_request("m", &bare, Flavor::Compatible, None).get("tool_choice").is_none());
    }

    #[test]
    fn a_function_call_beside_tool_calls_is_the_same_call_twice() {
        // probe-py-forced-stream: every fragment in both fields.
        let frag = |args: &str| {
            chunk(
                json!({"content": null, "function_call": {"name": "read_file", "arguments": args},
                       "tool_calls": [{"index": 0, "id": "call__0", "type": "function", "function": {"name": "read_file", "arguments": args}}]}),
                None,
            )
        };
        let r = feed(&[frag("{\"path\""), frag(": \"calc.py\"}"), chunk(json!({}), Some("tool_calls"))]).unwrap();
        let calls: Vec<_> =
            r.message.tool_calls().map(|(i, n, v)| (i.to_string(), n.to_string(), v.to_value())).collect();
        assert_eq!(calls, vec![("call__0".into(), "read_file".into(), json!({"path": "calc.py"}))]);
        // probe-py-auto-json: unstreamed, the duplicate's name has a trailing colon.
        let v: Value = serde_json::from_str(r#"{"id":"chatcmpl-6905735e","object":"chat.completion","created":1796112381,"model":"smollm2","choices":[{"index":0,"message":{"content":null,"tool_calls":[{"id":"call__0_read_file","type":"function","function":{"name":"read_file","arguments":"{\"path\": \"math_test.py\"}"}}],"role":"assistant","function_call":{"name":"read_file:","arguments":"{\"path\": \"math_test.py\"}"}},"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":211,"completion_tokens":10,"total_tokens":221}}"#).unwrap();
        let r = decode_completion(&v, "x").unwrap();
        let names: Vec<&str> = r.message.tool_calls().map(|(_, n, _)| n).collect();
        assert_eq!(names, ["read_file"]);
        // The legacy field alone is still a call.
        let r = feed(&[chunk(json!({"function_call": {"name": "grep", "arguments": "{}"}}), Some("function_call"))])
            .unwrap();
        assert_eq!(r.message.tool_calls().count(), 1);
    }

    #[test]
    fn missing_usage_is_estimated_from_the_bytes_and_marked() {
        let answer = Message { role: Role::Assistant, content: vec![Block::Text { text: "x".repeat(40) }], raw: None };
        let u = estimated_usage(4000, &answer);
        assert_eq!((u.input_tokens, u.output_tokens, u.estimated), (1000, 10, true));
        let mut run = Usage { input_tokens: 5, ..Default::default() };
        run.add(u);
        assert!(run.estimated, "a run with one estimated response is estimated");
    }
}
