//! The Anthropic Messages side of the mock: request validation (auth, `anthropic-version`, body
//! shape, tool definitions and the `tool_use` / `tool_result` pairing rules of the wire-protocol
//! sheet, section A4) for `POST /v1/messages` and `POST /v1/messages/count_tokens` (section A7:
//! the same body without `max_tokens`, `stream` or the sampling fields), and the conversion of a
//! message into its SSE event sequence (section A5).
//!
//! Extended thinking (A1, A4 rule 4) is refused as the real API refuses it, with its messages:
//! `budget_tokens` under 1024, or not under `max_tokens`; a forced `tool_choice` (`any`, `tool`;
//! `auto` and `none` are allowed); `temperature` other than 1, any `top_k`, `top_p` under 0.95;
//! and an assistant turn continued with tool results whose first message does not start with
//! its `thinking` / `redacted_thinking` block (the block was dropped or the turn rebuilt).

use std::collections::HashSet;

use serde_json::{Value, json};

use super::http::Request;
use super::{API_KEY, Chunk, next_id, split_chars, split_utf8};

/// Top-level request fields the real API knows; anything else is rejected like the real API does.
const KNOWN_FIELDS: &[&str] = &[
    "model",
    "max_tokens",
    "messages",
    "system",
    "tools",
    "tool_choice",
    "stream",
    "temperature",
    "top_k",
    "top_p",
    "stop_sequences",
    "metadata",
    "thinking",
    "cache_control",
    "service_tier",
    "container",
    "output_config",
    "inference_geo",
    "context_management",
    "mcp_servers",
];

/// Top-level fields `POST /v1/messages/count_tokens` knows (the SDK's
/// `types/message_count_tokens_params.py`); `max_tokens`, `stream`, `temperature`,
/// `stop_sequences`, `metadata` and the rest are "Extra inputs are not permitted" there.
const COUNT_FIELDS: &[&str] =
    &["model", "messages", "system", "tools", "tool_choice", "thinking", "cache_control", "output_config"];

/// Which Anthropic endpoint a request is for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Endpoint {
    /// `POST /v1/messages`.
    Messages,
    /// `POST /v1/messages/count_tokens`.
    CountTokens,
}

/// `(status, error.type, error.message)` of a rejected request.
pub(super) type Invalid = (u16, &'static str, String);

fn invalid(message: impl Into<String>) -> Invalid {
    (400, "invalid_request_error", message.into())
}

/// Validates a request to `endpoint` the way the real API does (routing is done by the caller):
/// both check the key and the headers alike; their bodies differ only in the top-level fields.
pub(super) fn validate(request: &Request, body: &Value, endpoint: Endpoint) -> Result<(), Invalid> {
    if request.header("x-api-key") != Some(API_KEY) {
        return Err((401, "authentication_error", "invalid x-api-key".into()));
    }
    match request.header("anthropic-version") {
        None => return Err(invalid("anthropic-version: header is required")),
        Some("2023-06-01" | "2023-01-01") => {}
        Some(other) => {
            return Err(invalid(format!("anthropic-version: invalid version {other:?}")));
        }
    }
    if request.body.is_empty() {
        return Err(invalid("mock: request body is empty (expected JSON)"));
    }
    if let Err(err) = serde_json::from_slice::<Value>(&request.body) {
        return Err(invalid(format!("There was an error parsing the body of your request: {err}")));
    }
    validate_body(body, endpoint).map_err(invalid)
}

/// The real error envelope, with a fresh `request_id`.
pub(super) fn error_envelope(error_type: &str, message: &str) -> Value {
    json!({
        "type": "error",
        "error": {"type": error_type, "message": message},
        "request_id": format!("req_mock{:020}", next_id())
    })
}

/// Fills `model` (when missing or null) with the requested model and a null
/// `usage.input_tokens` with the given estimate.
pub(super) fn fill_message(mut body: Value, model: &str, input_tokens: u64) -> Value {
    if let Some(object) = body.as_object_mut() {
        if object.get("model").is_none_or(Value::is_null) {
            object.insert("model".into(), json!(model));
        }
        if let Some(usage) = object.get_mut("usage").and_then(Value::as_object_mut)
            && usage.get("input_tokens").is_none_or(Value::is_null)
        {
            usage.insert("input_tokens".into(), json!(input_tokens));
        }
    }
    body
}

/// Sets the three input fields of `usage` to what the cached usage model computed.
pub(super) fn apply_usage(mut body: Value, usage: &super::usage::PromptUsage) -> Value {
    if let Some(fields) = body.get_mut("usage").and_then(Value::as_object_mut) {
        fields.insert("input_tokens".into(), json!(usage.input));
        fields.insert("cache_creation_input_tokens".into(), json!(usage.cache_write));
        fields.insert("cache_read_input_tokens".into(), json!(usage.cache_read));
    }
    body
}

fn validate_body(body: &Value, endpoint: Endpoint) -> Result<(), String> {
    let Some(object) = body.as_object() else {
        return Err("body: Input should be a valid dictionary".into());
    };
    match object.get("model") {
        None | Some(Value::Null) => return Err("model: Field required".into()),
        Some(Value::String(s)) if !s.is_empty() => {}
        Some(Value::String(_)) => {
            return Err("model: String should have at least 1 character".into());
        }
        Some(_) => return Err("model: Input should be a valid string".into()),
    }
    match (endpoint, object.get("max_tokens")) {
        // Refused below as an extra input.
        (Endpoint::CountTokens, _) => {}
        (Endpoint::Messages, None | Some(Value::Null)) => return Err("max_tokens: Field required".into()),
        (Endpoint::Messages, Some(v)) if v.as_u64().is_some_and(|n| n >= 1) => {}
        (Endpoint::Messages, Some(v)) if v.is_i64() || v.is_u64() => {
            return Err("max_tokens: Input should be greater than or equal to 1".into());
        }
        (Endpoint::Messages, Some(_)) => return Err("max_tokens: Input should be a valid integer".into()),
    }
    let messages = match object.get("messages") {
        None | Some(Value::Null) => return Err("messages: Field required".into()),
        Some(Value::Array(messages)) if !messages.is_empty() => messages,
        Some(Value::Array(_)) => {
            return Err("messages: List should have at least 1 item after validation, not 0".into());
        }
        Some(_) => return Err("messages: Input should be a valid list".into()),
    };
    let known = match endpoint {
        Endpoint::Messages => KNOWN_FIELDS,
        Endpoint::CountTokens => COUNT_FIELDS,
    };
    if let Some(unknown) = object.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(format!("{unknown}: Extra inputs are not permitted"));
    }
    if let Some(stream) = object.get("stream")
        && !stream.is_boolean()
    {
        return Err("stream: Input should be a valid boolean".into());
    }
    if let Some(system) = object.get("system") {
        validate_system(system)?;
    }
    let tool_names = match object.get("tools") {
        None => None,
        Some(tools) => Some(validate_tools(tools)?),
    };
    if let Some(choice) = object.get("tool_choice") {
        validate_tool_choice(choice, tool_names.as_ref())?;
    }
    let thinking = validate_thinking(object, endpoint)?;
    validate_messages(messages, tool_names.as_ref().is_some_and(|n| !n.is_empty()))?;
    if thinking {
        check_thinking_kept(messages)?;
    }
    super::usage::check_breakpoints(body)
}

/// Where the real API's thinking errors send the reader.
const THINKING_DOCS: &str = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking";

/// The `thinking` field and what it rules out; true when it turns thinking on (`enabled` or
/// `adaptive`).
fn validate_thinking(object: &serde_json::Map<String, Value>, endpoint: Endpoint) -> Result<bool, String> {
    let Some(thinking) = object.get("thinking") else {
        return Ok(false);
    };
    let Some(fields) = thinking.as_object() else {
        return Err("thinking: Input should be a valid dictionary".into());
    };
    match fields.get("type").and_then(Value::as_str) {
        Some("disabled") => return Ok(false),
        Some("adaptive") => {}
        Some("enabled") => {
            let budget = match fields.get("budget_tokens") {
                None | Some(Value::Null) => return Err("thinking.enabled.budget_tokens: Field required".into()),
                Some(v) if v.is_u64() || v.is_i64() => v.as_u64().unwrap_or(0),
                Some(_) => return Err("thinking.enabled.budget_tokens: Input should be a valid integer".into()),
            };
            if budget < 1024 {
                return Err("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024".into());
            }
            if endpoint == Endpoint::Messages
                && object.get("max_tokens").and_then(Value::as_u64).is_some_and(|m| m <= budget)
            {
                return Err(format!(
                    "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at {THINKING_DOCS}#max-tokens-and-context-window-size"
                ));
            }
        }
        other => {
            return Err(format!(
                "thinking: Input tag '{}' found using 'type' does not match any of the expected tags: 'enabled', 'disabled', 'adaptive'",
                other.unwrap_or_default()
            ));
        }
    }
    if let Some(display) = fields.get("display")
        && !matches!(display.as_str(), Some("summarized" | "omitted"))
    {
        return Err("thinking.display: Input should be 'summarized' or 'omitted'".into());
    }
    if matches!(object.get("tool_choice").and_then(|c| c["type"].as_str()), Some("any" | "tool")) {
        return Err("Thinking may not be enabled when tool_choice forces tool use.".into());
    }
    let considerations = format!("{THINKING_DOCS}#important-considerations-when-using-extended-thinking");
    if let Some(t) = object.get("temperature").filter(|t| !t.is_null())
        && t.as_f64() != Some(1.0)
    {
        return Err(format!(
            "`temperature` may only be set to 1 when thinking is enabled. Please consult our documentation at {considerations}"
        ));
    }
    if object.get("top_k").is_some_and(|k| !k.is_null()) {
        return Err(format!(
            "`top_k` must be unset when thinking is enabled. Please consult our documentation at {considerations}"
        ));
    }
    if object.get("top_p").and_then(Value::as_f64).is_some_and(|p| p < 0.95) {
        return Err(format!(
            "`top_p` must be greater than or equal to 0.95 or unset when thinking is enabled. Please consult our documentation at {considerations}"
        ));
    }
    Ok(true)
}

/// With thinking on, a request that continues an assistant turn (it ends with tool results) must
/// send that turn's first message starting with the thinking block it was generated with (A4 rule
/// 4): a turn rebuilt or filtered loses it. The turn starts after the last user message without
/// tool results; Claude thinks at its start only, so the later assistant messages of the turn
/// need no thinking block.
fn check_thinking_kept(messages: &[Value]) -> Result<(), String> {
    let results = |m: &Value| blocks_of(&m["content"]).iter().any(|b| block_type(b) == "tool_result");
    let continues = messages.last().is_some_and(|m| m["role"] == "user" && results(m));
    let n = messages.iter().rposition(|m| m["role"] == "user" && !results(m)).map_or(0, |i| i + 1);
    let Some(start) = messages.get(n).filter(|m| continues && m["role"] == "assistant") else {
        return Ok(());
    };
    let blocks = blocks_of(&start["content"]);
    let first = blocks.first().map_or("", block_type);
    if matches!(first, "thinking" | "redacted_thinking") {
        return Ok(());
    }
    Err(format!(
        "messages.{n}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{first}`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. Please consult our documentation at {THINKING_DOCS}"
    ))
}

fn validate_system(system: &Value) -> Result<(), String> {
    match system {
        Value::String(_) => Ok(()),
        Value::Array(blocks) => {
            for (k, block) in blocks.iter().enumerate() {
                if block.get("type").and_then(Value::as_str) != Some("text") {
                    return Err(format!("system.{k}.type: Input should be 'text'"));
                }
                if !block.get("text").is_some_and(Value::is_string) {
                    return Err(format!("system.{k}.text: Input should be a valid string"));
                }
            }
            Ok(())
        }
        _ => Err("system: Input should be a valid string or list".into()),
    }
}

fn is_valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn is_valid_id(id: &str) -> bool {
    !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn validate_tools(tools: &Value) -> Result<HashSet<String>, String> {
    let Some(tools) = tools.as_array() else {
        return Err("tools: Input should be a valid list".into());
    };
    let mut names = HashSet::new();
    for (i, tool) in tools.iter().enumerate() {
        let Some(tool) = tool.as_object() else {
            return Err(format!("tools.{i}: Input should be a valid dictionary"));
        };
        let name = match tool.get("name") {
            None => return Err(format!("tools.{i}.name: Field required")),
            Some(Value::String(name)) if is_valid_tool_name(name) => name,
            Some(Value::String(_)) => {
                return Err(format!("tools.{i}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"));
            }
            Some(_) => return Err(format!("tools.{i}.name: Input should be a valid string")),
        };
        // Server tools are declared by `type` (e.g. web_search_20250305) and carry no schema.
        let custom = match tool.get("type") {
            None | Some(Value::Null) => true,
            Some(Value::String(t)) => t == "custom",
            Some(_) => return Err(format!("tools.{i}.type: Input should be a valid string")),
        };
        if custom {
            match tool.get("input_schema") {
                None => return Err(format!("tools.{i}.input_schema: Field required")),
                Some(Value::Object(schema)) => {
                    if schema.get("type").and_then(Value::as_str) != Some("object") {
                        return Err(format!("tools.{i}.input_schema.type: Input should be 'object'"));
                    }
                }
                Some(_) => {
                    return Err(format!("tools.{i}.input_schema: Input should be a valid dictionary"));
                }
            }
            if let Some(description) = tool.get("description")
                && !description.is_string()
            {
                return Err(format!("tools.{i}.description: Input should be a valid string"));
            }
        }
        if !names.insert(name.clone()) {
            return Err("tools: Tool names must be unique.".into());
        }
    }
    Ok(names)
}

fn validate_tool_choice(choice: &Value, tools: Option<&HashSet<String>>) -> Result<(), String> {
    let kind = choice.get("type").and_then(Value::as_str);
    match kind {
        Some("auto" | "any" | "none") => {}
        Some("tool") => match choice.get("name").and_then(Value::as_str) {
            None => return Err("tool_choice.tool.name: Field required".into()),
            Some(name) if !tools.is_some_and(|t| t.contains(name)) => {
                return Err(format!("tool_choice.tool.name: tool `{name}` is not in the provided tools"));
            }
            Some(_) => {}
        },
        _ => {
            return Err(
                "tool_choice: Input tag found using 'type' does not match any of the expected tags: 'auto', 'any', 'tool', 'none'"
                    .into(),
            );
        }
    }
    if let Some(flag) = choice.get("disable_parallel_tool_use")
        && !flag.is_boolean()
    {
        return Err("tool_choice.disable_parallel_tool_use: Input should be a valid boolean".into());
    }
    if kind != Some("none") && tools.is_none_or(HashSet::is_empty) {
        return Err("tool_choice may only be specified while providing tools.".into());
    }
    Ok(())
}

/// The content of a message as blocks; a string is shorthand for one text block.
fn blocks_of(content: &Value) -> Vec<Value> {
    match content {
        Value::String(s) if s.is_empty() => Vec::new(),
        Value::String(s) => vec![json!({"type": "text", "text": s})],
        Value::Array(blocks) => blocks.clone(),
        _ => Vec::new(),
    }
}

fn block_type(block: &Value) -> &str {
    block.get("type").and_then(Value::as_str).unwrap_or("")
}

fn validate_messages(messages: &[Value], has_tools: bool) -> Result<(), String> {
    // Pass 1: shapes (what the real API checks with its schema before anything else).
    let mut roles = Vec::with_capacity(messages.len());
    for (n, message) in messages.iter().enumerate() {
        let Some(object) = message.as_object() else {
            return Err(format!("messages.{n}: Input should be a valid dictionary"));
        };
        let role = match object.get("role") {
            None => return Err(format!("messages.{n}.role: Field required")),
            Some(Value::String(r)) if r == "user" || r == "assistant" => r.as_str(),
            Some(_) => {
                return Err(format!("messages.{n}.role: Input should be 'user' or 'assistant'"));
            }
        };
        roles.push(role);
        match object.get("content") {
            None => return Err(format!("messages.{n}.content: Field required")),
            Some(Value::String(_)) => {}
            Some(Value::Array(blocks)) => {
                for (k, block) in blocks.iter().enumerate() {
                    validate_block_shape(role, n, k, block)?;
                }
            }
            Some(_) => {
                return Err(format!("messages.{n}.content: Input should be a valid string or list"));
            }
        }
        if let Some(extra) = object.keys().find(|k| *k != "role" && *k != "content") {
            return Err(format!("messages.{n}.{extra}: Extra inputs are not permitted"));
        }
    }

    // Pass 2: conversation rules.
    if roles[0] != "user" {
        return Err("messages: first message must use the \"user\" role".into());
    }
    let last = messages.len() - 1;
    let mut seen_tool_use_ids = HashSet::new();
    let mut previous_tool_use_ids: Vec<String> = Vec::new();
    for (n, message) in messages.iter().enumerate() {
        let role = roles[n];
        let blocks = blocks_of(&message["content"]);
        if blocks.is_empty() && !(n == last && role == "assistant") {
            return Err(format!(
                "messages.{n}: all messages must have non-empty content except for the optional final assistant message"
            ));
        }
        for block in &blocks {
            if block_type(block) == "text" && block["text"].as_str() == Some("") {
                return Err("messages: text content blocks must be non-empty".into());
            }
        }
        if !has_tools && let Some(k) = blocks.iter().position(|b| matches!(block_type(b), "tool_use" | "tool_result")) {
            return Err(format!(
                "messages.{n}.content.{k}: Requests which include `tool_use` or `tool_result` blocks must define tools."
            ));
        }
        if role == "user" {
            let mut answered = HashSet::new();
            for (k, block) in blocks.iter().enumerate() {
                if block_type(block) != "tool_result" {
                    continue;
                }
                let id = block["tool_use_id"].as_str().unwrap_or_default();
                if !previous_tool_use_ids.iter().any(|p| p == id) {
                    return Err(format!(
                        "messages.{n}.content.{k}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                    ));
                }
                if !answered.insert(id) {
                    return Err(format!(
                        "messages.{n}.content.{k}: each tool_use must have a single result. Found multiple `tool_result` blocks with id: {id}"
                    ));
                }
            }
            previous_tool_use_ids.clear();
            continue;
        }
        // Assistant message.
        let mut ids = Vec::new();
        for (k, block) in blocks.iter().enumerate() {
            if block_type(block) != "tool_use" {
                continue;
            }
            let id = block["id"].as_str().unwrap_or_default().to_string();
            if !seen_tool_use_ids.insert(id.clone()) {
                return Err(format!("messages.{n}.content.{k}: `tool_use` ids must be unique"));
            }
            ids.push(id);
        }
        if !ids.is_empty() {
            check_tool_results_follow(messages, &roles, n, &ids)?;
        }
        previous_tool_use_ids = ids;
    }
    Ok(())
}

/// The A4 rules for the message after an assistant message at `n` holding tool_use `ids`.
fn check_tool_results_follow(messages: &[Value], roles: &[&str], n: usize, ids: &[String]) -> Result<(), String> {
    let next = if roles.get(n + 1) == Some(&"user") { blocks_of(&messages[n + 1]["content"]) } else { Vec::new() };
    let result_id = |b: &Value| -> Option<String> {
        (block_type(b) == "tool_result").then(|| b["tool_use_id"].as_str().unwrap_or_default().to_string())
    };
    let anywhere: HashSet<String> = next.iter().filter_map(result_id).collect();
    let missing: Vec<&str> = ids.iter().filter(|id| !anywhere.contains(*id)).map(String::as_str).collect();
    if !missing.is_empty() {
        return Err(format!(
            "messages.{n}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
            missing.join(", ")
        ));
    }
    let leading: HashSet<String> = next.iter().map_while(result_id).collect();
    if ids.iter().any(|id| !leading.contains(id)) {
        return Err(format!(
            "messages.{}: Did not find {} tool_result block(s) at the beginning of this message. Messages following tool_use blocks must begin with a matching number of tool_result blocks.",
            n + 1,
            ids.len()
        ));
    }
    Ok(())
}

fn validate_block_shape(role: &str, n: usize, k: usize, block: &Value) -> Result<(), String> {
    let at = format!("messages.{n}.content.{k}");
    let Some(object) = block.as_object() else {
        return Err(format!("{at}: Input should be a valid dictionary"));
    };
    let kind = match object.get("type") {
        None => return Err(format!("{at}.type: Field required")),
        Some(Value::String(kind)) => kind.as_str(),
        Some(_) => return Err(format!("{at}.type: Input should be a valid string")),
    };
    let string_field = |field: &str| -> Result<(), String> {
        match object.get(field) {
            None => Err(format!("{at}.{field}: Field required")),
            Some(Value::String(_)) => Ok(()),
            Some(_) => Err(format!("{at}.{field}: Input should be a valid string")),
        }
    };
    let allowed = if role == "user" {
        matches!(kind, "text" | "tool_result" | "image" | "document")
    } else {
        // Assistant turns are echoed verbatim, unknown (newer) block types included.
        !matches!(kind, "tool_result" | "image" | "document")
    };
    if !allowed {
        return Err(format!("{at}.type: `{kind}` blocks are not allowed in {role} messages"));
    }
    match kind {
        "text" => string_field("text")?,
        "thinking" => {
            string_field("thinking")?;
            string_field("signature")?;
        }
        "redacted_thinking" => string_field("data")?,
        "image" | "document" if !object.get("source").is_some_and(Value::is_object) => {
            return Err(format!("{at}.source: Field required"));
        }
        "tool_use" => {
            match object.get("id") {
                None => return Err(format!("{at}.id: Field required")),
                Some(Value::String(id)) if is_valid_id(id) => {}
                Some(_) => {
                    return Err(format!("{at}.id: String should match pattern '^[a-zA-Z0-9_-]+$'"));
                }
            }
            string_field("name")?;
            match object.get("input") {
                None => return Err(format!("{at}.input: Field required")),
                Some(Value::Object(_)) => {}
                Some(_) => return Err(format!("{at}.input: Input should be a valid dictionary")),
            }
        }
        "tool_result" => validate_tool_result(&at, object)?,
        _ => {}
    }
    Ok(())
}

fn validate_tool_result(at: &str, object: &serde_json::Map<String, Value>) -> Result<(), String> {
    match object.get("tool_use_id") {
        None => return Err(format!("{at}.tool_use_id: Field required")),
        Some(Value::String(id)) if is_valid_id(id) => {}
        Some(_) => {
            return Err(format!("{at}.tool_use_id: String should match pattern '^[a-zA-Z0-9_-]+$'"));
        }
    }
    match object.get("content") {
        None | Some(Value::String(_)) => {}
        Some(Value::Array(parts)) => {
            for (j, part) in parts.iter().enumerate() {
                match block_type(part) {
                    "text" => {
                        if !part.get("text").is_some_and(Value::is_string) {
                            return Err(format!("{at}.content.{j}.text: Input should be a valid string"));
                        }
                    }
                    "image" | "document" | "search_result" => {}
                    other => {
                        return Err(format!(
                            "{at}.content.{j}.type: Input tag '{other}' found using 'type' does not match any of the expected tags: 'text', 'image', 'document', 'search_result'"
                        ));
                    }
                }
            }
        }
        Some(_) => {
            return Err(format!("{at}.content: Input should be a valid string or list"));
        }
    }
    if let Some(flag) = object.get("is_error")
        && !flag.is_boolean()
    {
        return Err(format!("{at}.is_error: Input should be a valid boolean"));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Streaming (wire-protocol sheet, section A5)
// ---------------------------------------------------------------------------------------------

/// Text deltas (`text_delta`, `thinking_delta`) carry about this many characters.
const TEXT_DELTA_CHARS: usize = 7;
/// `input_json_delta` fragments carry about this many bytes of the serialised input.
const JSON_DELTA_BYTES: usize = 5;

/// One SSE event, `event: NAME\ndata: JSON\n\n`. If `data` is an object without a `type`, it gets
/// `"type": NAME` (the real API always repeats the event name there).
pub fn sse_event(name: &str, data: Value) -> Chunk {
    let mut data = data;
    if let Some(object) = data.as_object_mut()
        && !object.contains_key("type")
    {
        object.insert("type".into(), json!(name));
    }
    Chunk::Raw(format!("event: {name}\ndata: {data}\n\n"))
}

/// The event sequence the real API streams for `message` (an assistant message object), one
/// [`Chunk::Raw`] per event:
///
/// - `message_start` with the message minus its content (`content: []`, `stop_reason` /
///   `stop_sequence` (and `stop_details`, when present) null, `usage.output_tokens: 1`);
/// - per block: `content_block_start`, 1..n `content_block_delta`, `content_block_stop`. Text
///   starts as `text: ""` and streams `text_delta`s of ~7 characters (then one `citations_delta`
///   per citation, if it has any); `tool_use` / `server_tool_use` start with `input: {}` and
///   stream the serialised input as `input_json_delta`s of ~5 bytes (cut anywhere, even inside
///   an escape sequence, but on character boundaries), the first fragment always `""` (an empty
///   input is that single `""` fragment, as the real API sends for tools without parameters);
///   thinking starts with `thinking: ""`, `signature: ""` and streams `thinking_delta`s, then
///   one `signature_delta`; any other block type is sent whole in `content_block_start`, with
///   no deltas;
/// - a `ping` right after the first `content_block_start` (after `message_start` if there are
///   no blocks);
/// - `message_delta` with `{stop_reason, stop_sequence}` (plus `stop_details` when the message
///   has a non-null one) and the cumulative `usage: {output_tokens}`; `message_stop`.
///
/// A null `model` or `usage.input_tokens` stays null here; the mock fills them in when it sends
/// the stream (see [`Reply::Sse`](super::Reply::Sse)).
pub fn sse_events(message: &Value) -> Vec<Chunk> {
    let blocks = message.get("content").and_then(Value::as_array).cloned().unwrap_or_default();
    let mut start = message.clone();
    if let Some(object) = start.as_object_mut() {
        object.insert("content".into(), json!([]));
        object.insert("stop_reason".into(), Value::Null);
        object.insert("stop_sequence".into(), Value::Null);
        if object.contains_key("stop_details") {
            object.insert("stop_details".into(), Value::Null);
        }
        let usage = object.entry("usage").or_insert_with(|| json!({}));
        if let Some(usage) = usage.as_object_mut() {
            usage.insert("output_tokens".into(), json!(1));
        }
    }
    let mut chunks = vec![sse_event("message_start", json!({"message": start}))];
    let mut pinged = false;
    for (index, block) in blocks.iter().enumerate() {
        let (first, deltas) = block_stream(block);
        chunks.push(sse_event("content_block_start", json!({"index": index, "content_block": first})));
        if !pinged {
            chunks.push(sse_event("ping", json!({})));
            pinged = true;
        }
        for delta in deltas {
            chunks.push(sse_event("content_block_delta", json!({"index": index, "delta": delta})));
        }
        chunks.push(sse_event("content_block_stop", json!({"index": index})));
    }
    if !pinged {
        chunks.push(sse_event("ping", json!({})));
    }
    let mut delta = json!({
        "stop_reason": message["stop_reason"],
        "stop_sequence": message["stop_sequence"],
    });
    if let Some(details) = message.get("stop_details")
        && !details.is_null()
    {
        delta["stop_details"] = details.clone();
    }
    let output_tokens = match &message["usage"]["output_tokens"] {
        Value::Null => json!(1),
        n => n.clone(),
    };
    chunks.push(sse_event("message_delta", json!({"delta": delta, "usage": {"output_tokens": output_tokens}})));
    chunks.push(sse_event("message_stop", json!({})));
    chunks
}

/// The `content_block_start` block and the deltas of one content block.
fn block_stream(block: &Value) -> (Value, Vec<Value>) {
    let mut first = block.clone();
    let mut deltas = Vec::new();
    match block_type(block) {
        "text" => {
            first["text"] = json!("");
            let text = block["text"].as_str().unwrap_or_default();
            for piece in split_chars(text, TEXT_DELTA_CHARS) {
                deltas.push(json!({"type": "text_delta", "text": piece}));
            }
            if let Some(citations) = block.get("citations").and_then(Value::as_array)
                && !citations.is_empty()
            {
                first["citations"] = json!([]);
                for citation in citations {
                    deltas.push(json!({"type": "citations_delta", "citation": citation}));
                }
            }
        }
        "tool_use" | "server_tool_use" => {
            first["input"] = json!({});
            for fragment in json_fragments(block.get("input").unwrap_or(&Value::Null)) {
                deltas.push(json!({"type": "input_json_delta", "partial_json": fragment}));
            }
        }
        "thinking" => {
            first["thinking"] = json!("");
            first["signature"] = json!("");
            let thinking = block["thinking"].as_str().unwrap_or_default();
            for piece in split_chars(thinking, TEXT_DELTA_CHARS) {
                deltas.push(json!({"type": "thinking_delta", "thinking": piece}));
            }
            let signature = block["signature"].as_str().unwrap_or_default();
            deltas.push(json!({"type": "signature_delta", "signature": signature}));
        }
        _ => {}
    }
    (first, deltas)
}

/// `""`, then the serialised input in ~5-byte pieces. An empty (or missing) input is just `""`.
fn json_fragments(input: &Value) -> Vec<String> {
    let mut fragments = vec![String::new()];
    let empty = match input {
        Value::Null => true,
        Value::Object(object) => object.is_empty(),
        _ => false,
    };
    if !empty {
        fragments.extend(split_utf8(&input.to_string(), JSON_DELTA_BYTES));
    }
    fragments
}

/// `message_start`, then an `error` event `{"type":"error","error":{"type","message"}}`
/// (scenario 10: the HTTP status is already 200 when the error arrives).
pub fn sse_error_after_start(error_type: &str, message: &str) -> Vec<Chunk> {
    vec![
        sse_event(
            "message_start",
            json!({"message": {
                "id": format!("msg_mock{:020}", next_id()),
                "type": "message",
                "role": "assistant",
                "model": null,
                "content": [],
                "stop_reason": null,
                "stop_sequence": null,
                "usage": {"input_tokens": null, "output_tokens": 1}
            }}),
        ),
        sse_event("error", json!({"type": "error", "error": {"type": error_type, "message": message}})),
    ]
}

/// Send-time filling of a scripted `message_start` event: a null `message.model` becomes the
/// requested model, a null `message.usage.input_tokens` the estimate. Other chunks are unchanged.
pub(super) fn fill_chunk(chunk: Chunk, model: &str, input_tokens: u64) -> Chunk {
    let Chunk::Raw(text) = &chunk else {
        return chunk;
    };
    let Some(data) = text
        .strip_prefix("event: message_start\ndata: ")
        .and_then(|rest| rest.strip_suffix("\n\n"))
        .filter(|data| !data.contains('\n'))
    else {
        return chunk;
    };
    let Ok(mut data) = serde_json::from_str::<Value>(data) else {
        return chunk;
    };
    let Some(message) = data.get_mut("message") else {
        return chunk;
    };
    *message = fill_message(message.take(), model, input_tokens);
    Chunk::Raw(format!("event: message_start\ndata: {data}\n\n"))
}
