//! Provider-neutral conversation types shared by the agent loop and the
//! model providers: messages, content blocks, tool declarations, stop reasons
//! and token usage. No wire format lives here; each provider converts.
//!
//! Its parts:
//! provider-neutral messages, blocks, tool inputs (`ToolInput`: an object, or
//! `Malformed` text as the model wrote it), tool specs, stop reasons, usage,
//! `ModelError`; `ModelRequest::revisions` (`next_revision`: a message's
//! identity while it is unchanged, so a client sends again what it encoded)

use serde_json::{Map, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
}

/// One content block of a message.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    Text {
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        input: ToolInput,
    },
    ToolResult {
        tool_use_id: String,
        content: String,
        is_error: bool,
    },
    /// A block the loop does not interpret (thinking, server tools, unknown
    /// types). Kept so that the provider can echo it back.
    Other(Value),
}

/// The input of a tool call, as the provider assembled it.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolInput {
    /// A JSON object: what a tool takes.
    Object(Map<String, Value>),
    /// Text that is not a JSON object (a call cut off by `max_tokens`, or
    /// malformed by the model), kept as it came; the loop answers it with an
    /// error result and never calls the tool.
    Malformed {
        /// The input's text as the model wrote it.
        raw: String,
        /// Why it is not an object.
        error: String,
    },
}

impl ToolInput {
    /// The input `{}`.
    pub fn empty() -> Self {
        Self::Object(Map::new())
    }

    /// Parses the text of a tool call's input; empty text is `{}`.
    pub fn parse(raw: String) -> Self {
        if raw.trim().is_empty() {
            return Self::empty();
        }
        match serde_json::from_str::<Value>(&raw) {
            Ok(Value::Object(map)) => Self::Object(map),
            _ => Self::malformed(raw),
        }
    }

    /// `raw`, not taken as the input (even when it parses: a call that
    /// never finished), with why it is not one.
    pub fn malformed(raw: String) -> Self {
        let error = match serde_json::from_str::<Value>(&raw) {
            Err(e) => e.to_string(),
            Ok(Value::Object(_)) => "the tool call ended before its input did".to_string(),
            Ok(other) => format!("{} is not a JSON object", json_kind(&other)),
        };
        Self::Malformed { raw, error }
    }

    /// The object, when the input is one.
    pub fn as_object(&self) -> Option<&Map<String, Value>> {
        match self {
            Self::Object(map) => Some(map),
            Self::Malformed { .. } => None,
        }
    }

    /// The neutral JSON form: the object, or the raw text as a JSON string
    /// (what transcripts record and what an echo without `raw` sends).
    pub fn to_value(&self) -> Value {
        match self {
            Self::Object(map) => Value::Object(map.clone()),
            Self::Malformed { raw, .. } => Value::String(raw.clone()),
        }
    }
}

/// The inverse of [`ToolInput::to_value`]: an object is the input, a string
/// is malformed text, any other value is malformed as its JSON text.
impl From<Value> for ToolInput {
    fn from(v: Value) -> Self {
        match v {
            Value::Object(map) => Self::Object(map),
            Value::String(raw) => Self::malformed(raw),
            other => Self::malformed(other.to_string()),
        }
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A message of the conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub role: Role,
    pub content: Vec<Block>,
    /// For an assistant message: the provider's own encoding of `content`,
    /// echoed back byte for byte on the next request (thinking signatures,
    /// unknown block types). `None` for messages the harness wrote.
    pub raw: Option<Value>,
}

impl Message {
    pub fn user_text(text: impl Into<String>) -> Self {
        Self { role: Role::User, content: vec![Block::Text { text: text.into() }], raw: None }
    }

    /// The tool calls of this message, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = (&str, &str, &ToolInput)> {
        self.content.iter().filter_map(|b| match b {
            Block::ToolUse { id, name, input } => Some((id.as_str(), name.as_str(), input)),
            _ => None,
        })
    }

    /// The concatenated text blocks.
    pub fn text(&self) -> String {
        let parts: Vec<&str> = self
            .content
            .iter()
            .filter_map(|b| match b {
                Block::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        parts.join("\n")
    }
}

/// A tool as declared to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// A JSON Schema object for the tool's input.
    pub input_schema: Value,
}

/// Why the model stopped, normalised across providers. Unknown values are
/// kept, never rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    EndTurn,
    ToolUse,
    MaxTokens,
    StopSequence,
    PauseTurn,
    Refusal { explanation: Option<String> },
    ContextWindowExceeded,
    Other(String),
}

/// Token counts of one response, or summed over a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// All prompt tokens, cached or not.
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Of `input_tokens`, those read from the prompt cache (Anthropic
    /// `cache_read_input_tokens`, OpenAI `prompt_tokens_details.cached_tokens`).
    pub cache_read_tokens: u64,
    /// Of `input_tokens`, those written to the prompt cache (Anthropic
    /// `cache_creation_input_tokens`).
    pub cache_write_tokens: u64,
    /// The server reported no usage: the figures are estimated from the
    /// bytes sent and received (of one response, or of any in a run).
    pub estimated: bool,
}

impl Usage {
    pub fn total(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }

    pub fn add(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.estimated |= other.estimated;
    }

    /// Prompt tokens neither read from nor written to the cache.
    pub fn uncached_input(&self) -> u64 {
        self.input_tokens.saturating_sub(self.cache_read_tokens + self.cache_write_tokens)
    }

    /// The tokens by how they are billed.
    pub fn tokens(&self) -> crate::pricing::TokenCounts {
        crate::pricing::TokenCounts {
            input: self.uncached_input(),
            output: self.output_tokens,
            cache_read: self.cache_read_tokens,
            cache_write: self.cache_write_tokens,
        }
    }

    /// Billed-equivalent tokens (cache reads at 0.1, writes at 1.25): what
    /// `maxTokens` counts.
    pub fn billed(&self) -> u64 {
        self.tokens().billed()
    }
}

/// What a provider reports while a response streams in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamUpdate {
    /// A piece of the model's text.
    Text(String),
    /// The model started writing a call to this tool.
    ToolStart(String),
    /// The request failed and is sent again after a pause.
    Retrying { attempt: u32, delay_ms: u64, reason: String },
}

/// One request to a model.
#[derive(Debug, Clone, Copy)]
pub struct ModelRequest<'a> {
    pub system: &'a str,
    pub messages: &'a [Message],
    pub tools: &'a [ToolSpec],
    pub max_output_tokens: u32,
    /// When false the model may not call tools (the tools are still
    /// declared, as the APIs require when the history holds tool calls).
    pub allow_tools: bool,
    /// A revision per message (from [`next_revision`]), or empty: two
    /// messages with the same revision are the same message, unchanged, so
    /// a client may send again what it encoded of it before (a long run's
    /// history is then not encoded again every turn). Whoever changes a
    /// message gives it a new revision.
    pub revisions: &'a [u64],
}

/// A revision no message had before (see [`ModelRequest::revisions`]).
pub fn next_revision() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// One complete model response.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelResponse {
    /// The assistant message.
    pub message: Message,
    pub stop_reason: StopReason,
    pub usage: Usage,
}

/// What went wrong talking to the model, in terms a user can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ModelError {
    pub kind: ModelErrorKind,
    /// HTTP status when there was one.
    pub status: Option<u16>,
    pub message: String,
    /// Whether sending the same request again may succeed.
    pub retryable: bool,
    /// How long the server asked us to wait before retrying.
    pub retry_after: Option<std::time::Duration>,
}

impl ModelError {
    pub fn new(kind: ModelErrorKind, status: Option<u16>, message: impl Into<String>) -> Self {
        let retryable = matches!(kind, ModelErrorKind::Server | ModelErrorKind::Network | ModelErrorKind::RateLimited);
        Self { kind, status, message: message.into(), retryable, retry_after: None }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelErrorKind {
    /// The key was rejected (401/403).
    Auth,
    /// The request was refused as malformed (400, 404, 413, 422).
    InvalidRequest,
    /// The prompt does not fit the model's context window (Anthropic 400
    /// "prompt is too long", OpenAI `context_length_exceeded`): the same
    /// request will fail again, a smaller one may not.
    ContextTooLong,
    /// Rate limited or out of quota (429).
    RateLimited,
    /// The service failed or is overloaded (5xx, 529).
    Server,
    /// Connection refused, reset, timed out.
    Network,
    /// The response could not be understood.
    Decode,
}
