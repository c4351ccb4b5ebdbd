//! The OpenAI Chat Completions side of the mock (`POST /v1/chat/completions`, wire-protocol
//! sheet, sections B1–B5): Bearer auth, request validation with the OpenAI error envelope
//! (`{"error":{"message","type","param","code"}}`) including the tool-call pairing rules,
//! `chat.completion` builders, their conversion into `chat.completion.chunk` streams, and the
//! compatible-server quirks of scenarios 15–18.
//!
//! By model name, as OpenAI does (B1): a reasoning model (o1, o3, o4-mini, GPT-5 and their
//! variants) refuses `max_tokens` (it wants `max_completion_tokens`) and a `temperature` other
//! than 1; GPT-4 and GPT-3.5 models refuse `reasoning_effort`. Other names (a compatible
//! server's models) take any of them.

use std::collections::HashSet;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};

use super::http::Request;
use super::{API_KEY, Chunk, Reply, next_id, split_chars};

/// Content deltas carry about this many characters.
const CONTENT_DELTA_CHARS: usize = 7;
/// Tool-call `arguments` fragments carry about this many characters.
const ARGUMENTS_DELTA_CHARS: usize = 5;

/// Top-level request fields of Chat Completions; anything else is rejected like OpenAI does.
const KNOWN_FIELDS: &[&str] = &[
    "model",
    "messages",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "stream",
    "stream_options",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "n",
    "stop",
    "seed",
    "user",
    "metadata",
    "store",
    "service_tier",
    "response_format",
    "reasoning_effort",
    "verbosity",
    "frequency_penalty",
    "presence_penalty",
    "logit_bias",
    "logprobs",
    "top_logprobs",
    "modalities",
    "audio",
    "prediction",
    "web_search_options",
    "prompt_cache_key",
    "prompt_cache_retention",
    "safety_identifier",
    "functions",
    "function_call",
];

const ROLES: &[&str] = &["system", "developer", "user", "assistant", "tool"];

/// A rejected request: status and the fields of the OpenAI error envelope.
pub(super) struct Invalid {
    pub(super) status: u16,
    pub(super) error_type: &'static str,
    pub(super) message: String,
    pub(super) param: Option<String>,
    pub(super) code: Option<&'static str>,
}

impl Invalid {
    pub(super) fn body(&self) -> Value {
        error_body(&self.message, self.error_type, self.param.as_deref(), self.code)
    }
}

/// What llama-cpp-python refuses or ignores of a valid request: an assistant `content` that is
/// not a string (its HTTP 500, hybrid-py), and tools without `tool_choice`, which it never shows
/// to the model (probe-py-notc-stream; a refusal here, so that the test sees it).
pub(super) fn llama_cpp_python_refusal(body: &Value) -> Option<Value> {
    let messages = body["messages"].as_array()?;
    if let Some(i) = messages.iter().position(|m| m["role"] == "assistant" && !m["content"].is_string()) {
        let message = format!(
            "1 validation errors:\n  {{'type': 'string_type', 'loc': ('body', 'messages', {i}, 'ChatCompletionRequestAssistantMessage', 'content'), 'msg': 'Input should be a valid string', 'input': None}}"
        );
        return Some(
            json!({"error": {"message": message, "type": "internal_server_error", "param": null, "code": null}}),
        );
    }
    if body["tools"].as_array().is_some_and(|t| !t.is_empty()) && body.get("tool_choice").is_none() {
        let message = "mock: llama-cpp-python shows tools to the model only with tool_choice";
        return Some(
            json!({"error": {"message": message, "type": "internal_server_error", "param": null, "code": null}}),
        );
    }
    None
}

/// A `chat.completion` as llama-cpp-python sends it: no usage, and the first tool call repeated
/// in the legacy `function_call`, its name with a trailing colon (probe-py-auto-json).
pub(super) fn as_llama_cpp_python(mut body: Value) -> Value {
    if let Some(o) = body.as_object_mut() {
        o.remove("usage");
    }
    let message = &mut body["choices"][0]["message"];
    if let Some(first) = message["tool_calls"].get(0).cloned() {
        let name = format!("{}:", first["function"]["name"].as_str().unwrap_or_default());
        message["function_call"] = json!({"name": name, "arguments": first["function"]["arguments"]});
    }
    body
}

/// `{"error":{"message","type","param","code"}}`.
pub(super) fn error_body(message: &str, error_type: &str, param: Option<&str>, code: Option<&str>) -> Value {
    json!({"error": {"message": message, "type": error_type, "param": param, "code": code}})
}

fn bad(message: impl Into<String>, param: Option<String>, code: Option<&'static str>) -> Invalid {
    Invalid { status: 400, error_type: "invalid_request_error", message: message.into(), param, code }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a decimal",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn invalid_type(param: &str, expected: &str, got: &Value) -> Invalid {
    bad(
        format!("Invalid type for '{param}': expected {expected}, but got {} instead.", type_name(got)),
        Some(param.to_string()),
        Some("invalid_type"),
    )
}

fn missing(param: &str) -> Invalid {
    bad(format!("Missing required parameter: '{param}'."), Some(param.to_string()), Some("missing_required_parameter"))
}

fn empty_array(param: &str) -> Invalid {
    bad(
        format!(
            "Invalid '{param}': empty array. Expected an array with minimum length 1, but got an empty array instead."
        ),
        Some(param.to_string()),
        Some("empty_array"),
    )
}

/// Validates a `POST /v1/chat/completions` (routing is done by the caller). With
/// `auth_optional`, the `Authorization` header is not checked at all (Ollama ignores it).
pub(super) fn validate(request: &Request, body: &Value, auth_optional: bool) -> Result<(), Invalid> {
    if !auth_optional {
        let key = request.header("authorization").and_then(|value| {
            let (scheme, token) = value.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        });
        if key != Some(API_KEY) {
            return Err(Invalid {
                status: 401,
                error_type: "invalid_request_error",
                message: "Incorrect API key provided".into(),
                param: None,
                code: Some("invalid_api_key"),
            });
        }
    }
    if serde_json::from_slice::<Value>(&request.body).is_err() {
        return Err(bad(
            "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)",
            None,
            None,
        ));
    }
    validate_body(body)
}

fn validate_body(body: &Value) -> Result<(), Invalid> {
    let Some(object) = body.as_object() else {
        return Err(invalid_type("body", "an object", body));
    };
    if let Some(unknown) = object.keys().find(|k| !KNOWN_FIELDS.contains(&k.as_str())) {
        return Err(bad(format!("Unrecognized request argument supplied: {unknown}"), None, None));
    }
    match object.get("model") {
        Some(Value::String(model)) if !model.is_empty() => {}
        None | Some(Value::Null | Value::String(_)) => {
            return Err(bad("you must provide a model parameter", None, None));
        }
        Some(other) => return Err(invalid_type("model", "a string", other)),
    }
    let messages = match object.get("messages") {
        None | Some(Value::Null) => return Err(missing("messages")),
        Some(Value::Array(messages)) if messages.is_empty() => {
            return Err(empty_array("messages"));
        }
        Some(Value::Array(messages)) => messages,
        Some(other) => return Err(invalid_type("messages", "an array of objects", other)),
    };
    let stream = match object.get("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(stream)) => *stream,
        Some(other) => return Err(invalid_type("stream", "a boolean", other)),
    };
    match object.get("stream_options") {
        None | Some(Value::Null) => {}
        Some(_) if !stream => {
            return Err(bad(
                "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
                Some("stream_options".into()),
                None,
            ));
        }
        Some(Value::Object(options)) => {
            for flag in ["include_usage", "include_obfuscation"] {
                if let Some(value) = options.get(flag)
                    && !value.is_boolean()
                    && !value.is_null()
                {
                    return Err(invalid_type(&format!("stream_options.{flag}"), "a boolean", value));
                }
            }
        }
        Some(other) => return Err(invalid_type("stream_options", "an object", other)),
    }
    for field in ["max_tokens", "max_completion_tokens"] {
        match object.get(field) {
            None | Some(Value::Null) => {}
            Some(value) if value.as_u64().is_some_and(|n| n >= 1) => {}
            Some(value) if value.is_i64() || value.is_u64() => {
                return Err(bad(
                    format!(
                        "Invalid '{field}': integer below minimum value. Expected a value >= 1, but got {value} instead."
                    ),
                    Some(field.into()),
                    Some("integer_below_min_value"),
                ));
            }
            Some(value) => return Err(invalid_type(field, "an integer", value)),
        }
    }
    validate_reasoning(object)?;
    let has_tools = match object.get("tools") {
        None | Some(Value::Null) => false,
        Some(tools) => {
            validate_tools(tools)?;
            true
        }
    };
    if let Some(choice) = object.get("tool_choice")
        && !choice.is_null()
    {
        validate_tool_choice(choice, has_tools)?;
    }
    validate_messages(messages)
}

/// OpenAI's reasoning models, by name: `o` and a digit, or `gpt-5`.
fn is_reasoning_model(model: &str) -> bool {
    let mut chars = model.chars();
    (chars.next() == Some('o') && chars.next().is_some_and(|c| c.is_ascii_digit())) || model.starts_with("gpt-5")
}

/// What OpenAI refuses by model: `max_tokens` and `temperature` on reasoning models,
/// `reasoning_effort` on the others it has (GPT-4, GPT-3.5).
fn validate_reasoning(object: &Map<String, Value>) -> Result<(), Invalid> {
    let model = object.get("model").and_then(Value::as_str).unwrap_or_default();
    let set = |field: &str| object.get(field).filter(|v| !v.is_null());
    let unsupported = |field: &str, message: String, code| bad(message, Some(field.into()), Some(code));
    if is_reasoning_model(model) {
        if set("max_tokens").is_some() {
            return Err(unsupported(
                "max_tokens",
                "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.".into(),
                "unsupported_parameter",
            ));
        }
        if let Some(t) = set("temperature")
            && t.as_f64() != Some(1.0)
        {
            return Err(unsupported(
                "temperature",
                format!(
                    "Unsupported value: 'temperature' does not support {t} with this model. Only the default (1) value is supported."
                ),
                "unsupported_value",
            ));
        }
    }
    match set("reasoning_effort") {
        None => Ok(()),
        Some(Value::String(effort)) if matches!(effort.as_str(), "minimal" | "low" | "medium" | "high") => {
            if model.starts_with("gpt-4") || model.starts_with("gpt-3.5") {
                return Err(unsupported(
                    "reasoning_effort",
                    "Unsupported parameter: 'reasoning_effort' is not supported with this model.".into(),
                    "unsupported_parameter",
                ));
            }
            Ok(())
        }
        Some(Value::String(effort)) => Err(bad(
            format!("Invalid value: '{effort}'. Supported values are: 'minimal', 'low', 'medium', and 'high'."),
            Some("reasoning_effort".into()),
            Some("invalid_value"),
        )),
        Some(other) => Err(invalid_type("reasoning_effort", "a string", other)),
    }
}

fn is_valid_function_name(name: &str) -> bool {
    name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn validate_tools(tools: &Value) -> Result<(), Invalid> {
    let Some(tools) = tools.as_array() else {
        return Err(invalid_type("tools", "an array of objects", tools));
    };
    if tools.is_empty() {
        return Err(empty_array("tools"));
    }
    for (i, tool) in tools.iter().enumerate() {
        let at = format!("tools[{i}]");
        let Some(tool) = tool.as_object() else {
            return Err(invalid_type(&at, "an object", tool));
        };
        match tool.get("type") {
            None => return Err(missing(&format!("{at}.type"))),
            Some(Value::String(t)) if t == "function" => {}
            Some(Value::String(t)) if t == "custom" => continue,
            Some(other) => {
                return Err(bad(
                    format!(
                        "Invalid value: '{}'. Supported values are: 'function' and 'custom'.",
                        other.as_str().unwrap_or_default()
                    ),
                    Some(format!("{at}.type")),
                    Some("invalid_value"),
                ));
            }
        }
        let function = match tool.get("function") {
            None => return Err(missing(&format!("{at}.function"))),
            Some(Value::Object(function)) => function,
            Some(other) => return Err(invalid_type(&format!("{at}.function"), "an object", other)),
        };
        let name_at = format!("{at}.function.name");
        match function.get("name") {
            None => return Err(missing(&name_at)),
            Some(Value::String(name)) if name.len() > 64 => {
                return Err(bad(
                    format!(
                        "Invalid '{name_at}': string too long. Expected a string with maximum length 64, but got a string with length {} instead.",
                        name.len()
                    ),
                    Some(name_at),
                    Some("string_above_max_length"),
                ));
            }
            Some(Value::String(name)) if name.is_empty() || !is_valid_function_name(name) => {
                return Err(bad(
                    format!(
                        "Invalid '{name_at}': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]{{1,64}}$'."
                    ),
                    Some(name_at),
                    Some("invalid_value"),
                ));
            }
            Some(Value::String(_)) => {}
            Some(other) => return Err(invalid_type(&name_at, "a string", other)),
        }
        if let Some(description) = function.get("description")
            && !description.is_string()
        {
            return Err(invalid_type(&format!("{at}.function.description"), "a string", description));
        }
        if let Some(parameters) = function.get("parameters")
            && !parameters.is_object()
        {
            return Err(invalid_type(&format!("{at}.function.parameters"), "an object", parameters));
        }
        if let Some(strict) = function.get("strict")
            && !strict.is_boolean()
            && !strict.is_null()
        {
            return Err(invalid_type(&format!("{at}.function.strict"), "a boolean", strict));
        }
    }
    Ok(())
}

fn validate_tool_choice(choice: &Value, has_tools: bool) -> Result<(), Invalid> {
    let none = match choice {
        Value::String(mode) if matches!(mode.as_str(), "none" | "auto" | "required") => mode == "none",
        Value::String(mode) => {
            return Err(bad(
                format!("Invalid value: '{mode}'. Supported values are: 'none', 'auto', and 'required'."),
                Some("tool_choice".into()),
                Some("invalid_value"),
            ));
        }
        Value::Object(object) => match object.get("type").and_then(Value::as_str) {
            Some("function") => {
                if !object.get("function").and_then(|f| f.get("name")).is_some_and(Value::is_string) {
                    return Err(missing("tool_choice.function.name"));
                }
                false
            }
            Some("allowed_tools" | "custom") => false,
            _ => return Err(missing("tool_choice.type")),
        },
        other => return Err(invalid_type("tool_choice", "a string or object", other)),
    };
    if !none && !has_tools {
        return Err(bad(
            "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.",
            Some("tool_choice".into()),
            None,
        ));
    }
    Ok(())
}

/// `content` of a message: a string or an array of part objects (with a `type`).
fn validate_content(at: &str, content: Option<&Value>, required: bool) -> Result<(), Invalid> {
    let param = format!("{at}.content");
    match content {
        None | Some(Value::Null) if required => Err(missing(&param)),
        None | Some(Value::Null | Value::String(_)) => Ok(()),
        Some(Value::Array(parts)) => {
            for (k, part) in parts.iter().enumerate() {
                let part_at = format!("{param}[{k}]");
                let Some(part) = part.as_object() else {
                    return Err(invalid_type(&part_at, "an object", part));
                };
                match part.get("type") {
                    None => return Err(missing(&format!("{part_at}.type"))),
                    Some(Value::String(t)) if t == "text" => {
                        if !part.get("text").is_some_and(Value::is_string) {
                            return Err(missing(&format!("{part_at}.text")));
                        }
                    }
                    Some(Value::String(_)) => {}
                    Some(other) => {
                        return Err(invalid_type(&format!("{part_at}.type"), "a string", other));
                    }
                }
            }
            Ok(())
        }
        Some(other) => Err(invalid_type(&param, "one of a string or array of objects", other)),
    }
}

/// Checks one assistant `tool_calls` array; returns its ids.
fn validate_tool_calls(at: &str, calls: &Value) -> Result<Vec<String>, Invalid> {
    let param = format!("{at}.tool_calls");
    let Some(calls) = calls.as_array() else {
        return Err(invalid_type(&param, "an array of objects", calls));
    };
    if calls.is_empty() {
        return Err(empty_array(&param));
    }
    let mut ids = Vec::with_capacity(calls.len());
    for (k, call) in calls.iter().enumerate() {
        let call_at = format!("{param}[{k}]");
        let Some(call) = call.as_object() else {
            return Err(invalid_type(&call_at, "an object", call));
        };
        match call.get("id") {
            None | Some(Value::Null) => return Err(missing(&format!("{call_at}.id"))),
            Some(Value::String(id)) if id.is_empty() => {
                return Err(bad(
                    format!(
                        "Invalid '{call_at}.id': empty string. Expected a string with minimum length 1, but got an empty string instead."
                    ),
                    Some(format!("{call_at}.id")),
                    Some("empty_string"),
                ));
            }
            Some(Value::String(id)) => ids.push(id.clone()),
            Some(other) => return Err(invalid_type(&format!("{call_at}.id"), "a string", other)),
        }
        match call.get("type") {
            None | Some(Value::Null) => return Err(missing(&format!("{call_at}.type"))),
            Some(Value::String(t)) if t == "function" => {}
            Some(other) => {
                return Err(bad(
                    format!(
                        "Invalid value: '{}'. Supported values are: 'function'.",
                        other.as_str().map_or_else(|| other.to_string(), str::to_string)
                    ),
                    Some(format!("{call_at}.type")),
                    Some("invalid_value"),
                ));
            }
        }
        let function = match call.get("function") {
            None | Some(Value::Null) => return Err(missing(&format!("{call_at}.function"))),
            Some(Value::Object(function)) => function,
            Some(other) => {
                return Err(invalid_type(&format!("{call_at}.function"), "an object", other));
            }
        };
        for field in ["name", "arguments"] {
            let field_at = format!("{call_at}.function.{field}");
            match function.get(field) {
                None | Some(Value::Null) => return Err(missing(&field_at)),
                Some(Value::String(_)) => {}
                Some(other) => return Err(invalid_type(&field_at, "a string", other)),
            }
        }
    }
    Ok(ids)
}

fn validate_messages(messages: &[Value]) -> Result<(), Invalid> {
    let (roles, call_ids) = message_shapes(messages)?;
    validate_pairing(messages, &roles, &call_ids)
}

/// Pass 1: each message's shape; its role and the ids of its tool calls.
fn message_shapes(messages: &[Value]) -> Result<(Vec<&str>, Vec<Vec<String>>), Invalid> {
    let mut roles = Vec::with_capacity(messages.len());
    let mut call_ids: Vec<Vec<String>> = Vec::with_capacity(messages.len());
    let mut seen_ids = HashSet::new();
    for (n, message) in messages.iter().enumerate() {
        let at = format!("messages[{n}]");
        let Some(object) = message.as_object() else {
            return Err(invalid_type(&at, "an object", message));
        };
        let role = match object.get("role") {
            None | Some(Value::Null) => return Err(missing(&format!("{at}.role"))),
            Some(Value::String(role)) if ROLES.contains(&role.as_str()) => role.as_str(),
            Some(other) => {
                return Err(bad(
                    format!(
                        "Invalid value: '{}'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.",
                        other.as_str().map_or_else(|| other.to_string(), str::to_string)
                    ),
                    Some(format!("{at}.role")),
                    Some("invalid_value"),
                ));
            }
        };
        let mut ids = Vec::new();
        match role {
            "assistant" => {
                let calls = object.get("tool_calls").filter(|c| !c.is_null());
                if let Some(calls) = calls {
                    ids = validate_tool_calls(&at, calls)?;
                    for id in &ids {
                        if !seen_ids.insert(id.clone()) {
                            return Err(bad(
                                format!("Invalid parameter: duplicate tool_call id '{id}'."),
                                Some(format!("{at}.tool_calls")),
                                None,
                            ));
                        }
                    }
                }
                let has_refusal = object.get("refusal").is_some_and(Value::is_string);
                let has_legacy_call = object.get("function_call").is_some_and(Value::is_object);
                if calls.is_none()
                    && !has_refusal
                    && !has_legacy_call
                    && object.get("content").is_none_or(Value::is_null)
                {
                    return Err(bad(
                        "Invalid value for 'content': expected a string, got null.",
                        Some(format!("messages.[{n}].content")),
                        None,
                    ));
                }
                validate_content(&at, object.get("content"), false)?;
            }
            "tool" => {
                match object.get("tool_call_id") {
                    None | Some(Value::Null) => {
                        return Err(missing(&format!("{at}.tool_call_id")));
                    }
                    Some(Value::String(_)) => {}
                    Some(other) => {
                        return Err(invalid_type(&format!("{at}.tool_call_id"), "a string", other));
                    }
                }
                validate_content(&at, object.get("content"), true)?;
            }
            _ => validate_content(&at, object.get("content"), true)?,
        }
        roles.push(role);
        call_ids.push(ids);
    }
    Ok((roles, call_ids))
}

/// Pass 2: every tool call is answered by the tool messages right after
/// its assistant message, and every tool message answers one of those calls.
fn validate_pairing(messages: &[Value], roles: &[&str], call_ids: &[Vec<String>]) -> Result<(), Invalid> {
    let orphan = |n: usize| {
        bad(
            "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
            Some(format!("messages.[{n}].role")),
            None,
        )
    };
    let mut n = 0;
    while n < messages.len() {
        if roles[n] == "tool" {
            return Err(orphan(n));
        }
        let ids = &call_ids[n];
        n += 1;
        if ids.is_empty() {
            continue;
        }
        let mut pending: Vec<&str> = ids.iter().map(String::as_str).collect();
        while n < messages.len() && roles[n] == "tool" {
            let id = messages[n]["tool_call_id"].as_str().unwrap_or_default();
            let Some(i) = pending.iter().position(|p| *p == id) else {
                return Err(orphan(n));
            };
            pending.remove(i);
            n += 1;
        }
        if !pending.is_empty() {
            return Err(bad(
                format!(
                    "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
                    pending.join(", ")
                ),
                Some(format!("messages.[{n}].role")),
                None,
            ));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Replies
// ---------------------------------------------------------------------------------------------

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// A general `chat.completion` reply: `message` is the assistant message (`role` is added when
/// missing), `finish_reason` is put as-is. `model` and `usage.prompt_tokens` / `total_tokens`
/// are null here and filled in at send time; `completion_tokens` is 10 per content / tool call.
pub fn openai_message(message: Value, finish_reason: &str) -> Reply {
    let mut message = message;
    if let Some(object) = message.as_object_mut() {
        object.entry("role").or_insert_with(|| json!("assistant"));
    }
    let has_text = message["content"].as_str().is_some_and(|c| !c.is_empty());
    let calls = message["tool_calls"].as_array().map_or(0, Vec::len);
    let parts = (usize::from(has_text) + calls).max(1) as u64;
    Reply::Message(json!({
        "id": format!("chatcmpl-mock{:020}", next_id()),
        "object": "chat.completion",
        "created": unix_now(),
        "model": null,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": null}],
        "usage": {"prompt_tokens": null, "completion_tokens": 10 * parts, "total_tokens": null}
    }))
}

/// An assistant text answer, `finish_reason: "stop"`.
pub fn openai_text(text: &str) -> Reply {
    openai_message(json!({"role": "assistant", "content": text, "refusal": null}), "stop")
}

fn tool_call_objects(calls: &[(&str, &str, Value)]) -> Vec<Value> {
    calls
        .iter()
        .map(|(id, name, input)| {
            json!({"id": id, "type": "function", "function": {"name": name, "arguments": input.to_string()}})
        })
        .collect()
}

fn tools_message(calls: Vec<Value>) -> Value {
    json!({"role": "assistant", "content": null, "refusal": null, "tool_calls": calls})
}

/// One `tool_calls` entry per `(id, name, input)` (arguments serialised to a string), content
/// null, `finish_reason: "tool_calls"`.
pub fn openai_tools(calls: &[(&str, &str, Value)]) -> Reply {
    openai_message(tools_message(tool_call_objects(calls)), "tool_calls")
}

/// Fills `model` (when null or missing) and a null `usage.prompt_tokens` / `total_tokens`.
pub(super) fn fill_completion(mut body: Value, model: &str, prompt_tokens: u64) -> Value {
    if let Some(object) = body.as_object_mut() {
        if object.get("model").is_none_or(Value::is_null) {
            object.insert("model".into(), json!(model));
        }
        if let Some(usage) = object.get_mut("usage").and_then(Value::as_object_mut) {
            if usage.get("prompt_tokens").is_none_or(Value::is_null) {
                usage.insert("prompt_tokens".into(), json!(prompt_tokens));
            }
            if usage.get("total_tokens").is_none_or(Value::is_null) {
                let prompt = usage["prompt_tokens"].as_u64().unwrap_or(0);
                let completion = usage.get("completion_tokens").and_then(Value::as_u64).unwrap_or(0);
                usage.insert("total_tokens".into(), json!(prompt + completion));
            }
        }
    }
    body
}

/// Sets `usage.prompt_tokens`, `prompt_tokens_details.cached_tokens` and `total_tokens` to
/// what the cached usage model computed.
pub(super) fn apply_usage(mut body: Value, usage: &super::usage::PromptUsage) -> Value {
    if let Some(fields) = body.get_mut("usage").and_then(Value::as_object_mut) {
        let completion = fields.get("completion_tokens").and_then(Value::as_u64).unwrap_or(0);
        fields.insert("prompt_tokens".into(), json!(usage.total));
        let details = fields.entry("prompt_tokens_details").or_insert_with(|| json!({}));
        if !details.is_object() {
            *details = json!({});
        }
        details["cached_tokens"] = json!(usage.cache_read);
        fields.insert("total_tokens".into(), json!(usage.total + completion));
    }
    body
}

/// `data: JSON\n\n`.
fn data_chunk(data: &Value) -> Chunk {
    Chunk::Raw(format!("data: {data}\n\n"))
}

fn done_chunk() -> Chunk {
    Chunk::Raw("data: [DONE]\n\n".into())
}

/// Builds `chat.completion.chunk` events sharing one id / created / model.
struct ChunkMaker {
    head: Map<String, Value>,
    include_usage: bool,
}

impl ChunkMaker {
    fn new(id: &Value, created: &Value, model: &Value, include_usage: bool) -> ChunkMaker {
        let mut head = Map::new();
        head.insert("id".into(), id.clone());
        head.insert("object".into(), json!("chat.completion.chunk"));
        head.insert("created".into(), created.clone());
        head.insert("model".into(), model.clone());
        ChunkMaker { head, include_usage }
    }

    fn fresh(include_usage: bool) -> ChunkMaker {
        let id = json!(format!("chatcmpl-mock{:020}", next_id()));
        ChunkMaker::new(&id, &json!(unix_now()), &Value::Null, include_usage)
    }

    fn chunk(&self, choices: Value, usage: Option<&Value>) -> Chunk {
        let mut object = self.head.clone();
        object.insert("choices".into(), choices);
        if self.include_usage {
            object.insert("usage".into(), usage.cloned().unwrap_or(Value::Null));
        }
        data_chunk(&Value::Object(object))
    }

    fn delta(&self, index: &Value, delta: Value) -> Chunk {
        self.chunk(json!([{"index": index, "delta": delta, "finish_reason": null, "logprobs": null}]), None)
    }

    fn finish(&self, index: &Value, finish_reason: &Value) -> Chunk {
        self.chunk(json!([{"index": index, "delta": {}, "finish_reason": finish_reason, "logprobs": null}]), None)
    }
}

fn arguments_text(function: &Value) -> String {
    match &function["arguments"] {
        Value::String(arguments) => arguments.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The stream OpenAI sends for `completion` (a `chat.completion` object), one [`Chunk::Raw`] per
/// `data:` line. Per choice: a first chunk with `delta: {role: "assistant", content: ""}`
/// (`content: null` when the message's content is null), the content in ~7-character deltas
/// (and a `refusal` the same way), each tool call as a first fragment `{index, id, type,
/// function: {name, arguments: ""}}` followed by `{index, function: {arguments}}` fragments of
/// ~5 characters, then a chunk with `delta: {}` and the `finish_reason`. With `include_usage`,
/// every chunk has `usage: null` and a last chunk with `choices: []` carries the usage. Then
/// `data: [DONE]`.
pub fn openai_sse_chunks(completion: &Value, include_usage: bool) -> Vec<Chunk> {
    let maker = ChunkMaker::new(&completion["id"], &completion["created"], &completion["model"], include_usage);
    let mut maker = maker;
    if let Some(fingerprint) = completion.get("system_fingerprint") {
        maker.head.insert("system_fingerprint".into(), fingerprint.clone());
    }
    let mut chunks = Vec::new();
    let choices = completion["choices"].as_array().cloned().unwrap_or_default();
    for (position, choice) in choices.iter().enumerate() {
        let index = choice.get("index").cloned().unwrap_or(json!(position));
        let message = &choice["message"];
        let content = &message["content"];
        let first_content = if content.is_null() { Value::Null } else { json!("") };
        chunks.push(maker.delta(&index, json!({"role": "assistant", "content": first_content})));
        if let Some(text) = content.as_str().filter(|t| !t.is_empty()) {
            for piece in split_chars(text, CONTENT_DELTA_CHARS) {
                chunks.push(maker.delta(&index, json!({"content": piece})));
            }
        }
        if let Some(refusal) = message["refusal"].as_str() {
            for piece in split_chars(refusal, CONTENT_DELTA_CHARS) {
                chunks.push(maker.delta(&index, json!({"refusal": piece})));
            }
        }
        let calls = message["tool_calls"].as_array().cloned().unwrap_or_default();
        for (k, call) in calls.iter().enumerate() {
            let kind = match &call["type"] {
                Value::Null => json!("function"),
                kind => kind.clone(),
            };
            chunks.push(maker.delta(
                &index,
                json!({"tool_calls": [{"index": k, "id": call["id"], "type": kind,
                    "function": {"name": call["function"]["name"], "arguments": ""}}]}),
            ));
            let arguments = arguments_text(&call["function"]);
            if !arguments.is_empty() {
                for piece in split_chars(&arguments, ARGUMENTS_DELTA_CHARS) {
                    chunks.push(
                        maker.delta(&index, json!({"tool_calls": [{"index": k, "function": {"arguments": piece}}]})),
                    );
                }
            }
        }
        chunks.push(maker.finish(&index, &choice["finish_reason"]));
    }
    if include_usage {
        chunks.push(maker.chunk(json!([]), Some(&completion["usage"])));
    }
    chunks.push(done_chunk());
    chunks
}

/// Send-time filling of a scripted `chat.completion.chunk`: a null `model` becomes the
/// requested model. Other chunks are unchanged.
pub(super) fn fill_chunk(chunk: Chunk, model: &str) -> Chunk {
    let Chunk::Raw(text) = &chunk else {
        return chunk;
    };
    let Some(data) = text
        .strip_prefix("data: ")
        .and_then(|rest| rest.strip_suffix("\n\n"))
        .filter(|data| data.starts_with('{') && !data.contains('\n'))
    else {
        return chunk;
    };
    let Ok(mut data) = serde_json::from_str::<Value>(data) else {
        return chunk;
    };
    if data["object"] != "chat.completion.chunk" || !data["model"].is_null() {
        return chunk;
    }
    data["model"] = json!(model);
    data_chunk(&data)
}

// ---------------------------------------------------------------------------------------------
// Quirks of compatible servers (scenarios 15–18) and faults
// ---------------------------------------------------------------------------------------------

/// Scenario 15: tool calls present but `finish_reason: "stop"` (old Ollama, vLLM, OpenAI with a
/// named `tool_choice`). Works streamed and non-streamed.
pub fn openai_quirk_stop_with_tool_calls(calls: &[(&str, &str, Value)]) -> Reply {
    openai_message(tools_message(tool_call_objects(calls)), "stop")
}

/// Scenario 16 (streaming only): every call uses `index: 0` with its own id, each whole call
/// (id, name, complete arguments) in one delta, as recent Ollama builds do.
pub fn openai_quirk_ollama_index0(calls: &[(&str, &str, Value)]) -> Reply {
    let maker = ChunkMaker::fresh(false);
    let index = json!(0);
    let mut chunks = vec![maker.delta(&index, json!({"role": "assistant", "content": ""}))];
    for (id, name, input) in calls {
        chunks.push(maker.delta(
            &index,
            json!({"tool_calls": [{"index": 0, "id": id, "type": "function",
                "function": {"name": name, "arguments": input.to_string()}}]}),
        ));
    }
    chunks.push(maker.finish(&index, &json!("tool_calls")));
    chunks.push(done_chunk());
    Reply::Sse(chunks)
}

/// Scenario 17 (non-streaming): `arguments` is a JSON object instead of a string (llama.cpp).
pub fn openai_quirk_arguments_object(calls: &[(&str, &str, Value)]) -> Reply {
    let objects = calls
        .iter()
        .map(|(id, name, input)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": input}}))
        .collect();
    openai_message(tools_message(objects), "tool_calls")
}

/// Scenario 18: every tool call has `id: ""` (Gemini's compat endpoint); the `(id, …)` of
/// `calls` is ignored. Works streamed and non-streamed.
pub fn openai_quirk_empty_id(calls: &[(&str, &str, Value)]) -> Reply {
    let mut objects = tool_call_objects(calls);
    for call in &mut objects {
        call["id"] = json!("");
    }
    openai_message(tools_message(objects), "tool_calls")
}

/// Streaming only: `id`, `type` and `function.name` repeated in every fragment of a call, the
/// arguments in ~5-character pieces after a first `""` (MiniMax via NIM). A client that appends
/// ids or names instead of assigning them ends up with duplicated values.
pub fn openai_quirk_name_repeated(calls: &[(&str, &str, Value)]) -> Reply {
    let maker = ChunkMaker::fresh(false);
    let index = json!(0);
    let mut chunks = vec![maker.delta(&index, json!({"role": "assistant", "content": null}))];
    for (k, (id, name, input)) in calls.iter().enumerate() {
        let mut pieces = vec![String::new()];
        pieces.extend(split_chars(&input.to_string(), ARGUMENTS_DELTA_CHARS).into_iter().filter(|p| !p.is_empty()));
        for piece in pieces {
            chunks.push(maker.delta(
                &index,
                json!({"tool_calls": [{"index": k, "id": id, "type": "function",
                    "function": {"name": name, "arguments": piece}}]}),
            ));
        }
    }
    chunks.push(maker.finish(&index, &json!("tool_calls")));
    chunks.push(done_chunk());
    Reply::Sse(chunks)
}

/// One normal chunk (`role: "assistant"`, `content: ""`), then a mid-stream error
/// `data: {"error":{"message":…,"type":"server_error"}}`; the stream ends there (no `[DONE]`).
pub fn openai_stream_error(message: &str) -> Vec<Chunk> {
    let maker = ChunkMaker::fresh(false);
    vec![
        maker.delta(&json!(0), json!({"role": "assistant", "content": ""})),
        data_chunk(&json!({"error": {"message": message, "type": "server_error"}})),
    ]
}

/// 429 with OpenAI's permanent `insufficient_quota` error (must not be retried).
pub fn openai_insufficient_quota() -> Reply {
    Reply::Status {
        status: 429,
        headers: Vec::new(),
        body: error_body(
            "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
            "insufficient_quota",
            None,
            Some("insufficient_quota"),
        ),
    }
}

/// An Anthropic error envelope (`{"type":"error","error":{"type","message"}}`) as the OpenAI
/// envelope, for scripted errors sent to `/v1/chat/completions`; other bodies are unchanged.
pub(super) fn translate_error(body: Value) -> Value {
    if body["type"] != "error" || !body["error"].is_object() {
        return body;
    }
    let error_type = body["error"]["type"].as_str().unwrap_or("server_error");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    let code = (error_type == "rate_limit_error").then_some("rate_limit_exceeded");
    error_body(message, error_type, None, code)
}
