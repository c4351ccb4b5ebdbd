//! The Anthropic Messages API (`POST {base}/v1/messages`), non-streaming.
//!
//! Assistant content is kept verbatim (`Message::raw`) and echoed back as it
//! came, so thinking signatures and unknown block types survive the loop.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::ModelClient;
use crate::config::Secret;
use crate::model::{
    Block, Message, ModelError, ModelErrorKind, ModelRequest, ModelResponse, Role, StopReason,
    Usage,
};

pub const API_VERSION: &str = "2023-06-01";

pub struct Anthropic {
    http: reqwest::Client,
    url: String,
    key: Secret,
    model: String,
}

impl Anthropic {
    pub fn new(base_url: &str, key: Secret, model: &str) -> Self {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(600))
            .user_agent(concat!("agentfix/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default();
        Self {
            http,
            url: format!("{}/v1/messages", base_url.trim_end_matches('/')),
            key,
            model: model.to_string(),
        }
    }
}

#[async_trait]
impl ModelClient for Anthropic {
    async fn complete(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        let body = encode_request(&self.model, &request);
        let response = self
            .http
            .post(&self.url)
            .header("x-api-key", self.key.expose())
            .header("anthropic-version", API_VERSION)
            .json(&body)
            .send()
            .await
            .map_err(network_error)?;
        let status = response.status().as_u16();
        let text = response.text().await.map_err(network_error)?;
        if !(200..300).contains(&status) {
            return Err(http_error(status, &text));
        }
        let value: Value = serde_json::from_str(&text).map_err(|e| ModelError {
            kind: ModelErrorKind::Decode,
            status: Some(status),
            message: format!("the model API answered with invalid JSON: {e}"),
        })?;
        decode_response(value)
    }
}

fn network_error(e: reqwest::Error) -> ModelError {
    // reqwest's Display never includes headers, so the key cannot leak here.
    let what = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else {
        "failed"
    };
    ModelError {
        kind: ModelErrorKind::Network,
        status: None,
        message: format!("request to the Anthropic API {what}: {}", error_chain(&e)),
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    s
}

/// Maps an HTTP error to a message that says what to do.
fn http_error(status: u16, body: &str) -> ModelError {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let api_message = parsed
        .as_ref()
        .and_then(|v| v["error"]["message"].as_str())
        .map(str::to_string)
        .unwrap_or_else(|| body.chars().take(500).collect());
    let (kind, hint) = match status {
        401 => (
            ModelErrorKind::Auth,
            "the API key was rejected; check ANTHROPIC_API_KEY",
        ),
        403 => (
            ModelErrorKind::Auth,
            "the API key is not allowed to use this model or feature",
        ),
        429 => (ModelErrorKind::RateLimited, "rate limited; try again later"),
        400 | 404 | 413 | 422 => (
            ModelErrorKind::InvalidRequest,
            "the API refused the request",
        ),
        _ => (ModelErrorKind::Server, "the API failed"),
    };
    ModelError {
        kind,
        status: Some(status),
        message: format!("Anthropic API {status}: {hint}: {api_message}"),
    }
}

/// The request body of the Messages API.
pub fn encode_request(model: &str, req: &ModelRequest<'_>) -> Value {
    let tools: Vec<Value> = req
        .tools
        .iter()
        .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}))
        .collect();
    let messages: Vec<Value> = req.messages.iter().map(encode_message).collect();
    let mut body = json!({
        "model": model,
        "max_tokens": req.max_output_tokens,
        "system": req.system,
        "messages": messages,
    });
    if !tools.is_empty() {
        body["tools"] = Value::Array(tools);
    }
    body
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
            json!({"type": "tool_use", "id": id, "name": name, "input": input})
        }
        Block::ToolResult {
            tool_use_id,
            content,
            is_error,
        } => {
            let mut v =
                json!({"type": "tool_result", "tool_use_id": tool_use_id, "content": content});
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
    let decode_err = |what: &str| ModelError {
        kind: ModelErrorKind::Decode,
        status: Some(200),
        message: format!("unexpected response from the Anthropic API: {what}"),
    };
    let raw = v
        .get("content")
        .filter(|c| c.is_array())
        .cloned()
        .ok_or_else(|| decode_err("no content array"))?;
    let content: Vec<Block> = raw
        .as_array()
        .into_iter()
        .flatten()
        .map(decode_block)
        .collect();
    let stop_reason = match v["stop_reason"].as_str() {
        Some("end_turn") => StopReason::EndTurn,
        Some("tool_use") => StopReason::ToolUse,
        Some("max_tokens") => StopReason::MaxTokens,
        Some("stop_sequence") => StopReason::StopSequence,
        Some("pause_turn") => StopReason::PauseTurn,
        Some("refusal") => StopReason::Refusal {
            explanation: v["stop_details"]["explanation"]
                .as_str()
                .map(str::to_string),
        },
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
        input_tokens: n("input_tokens")
            + n("cache_creation_input_tokens")
            + n("cache_read_input_tokens"),
        output_tokens: n("output_tokens"),
    };
    Ok(ModelResponse {
        message: Message {
            role: Role::Assistant,
            content,
            raw: Some(raw),
        },
        stop_reason,
        usage,
    })
}

fn decode_block(b: &Value) -> Block {
    match b["type"].as_str() {
        Some("text") => Block::Text {
            text: b["text"].as_str().unwrap_or_default().to_string(),
        },
        Some("tool_use") => Block::ToolUse {
            id: b["id"].as_str().unwrap_or_default().to_string(),
            name: b["name"].as_str().unwrap_or_default().to_string(),
            input: match &b["input"] {
                Value::Null => json!({}),
                other => other.clone(),
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
            "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 3}
        });
        let resp = decode_response(raw.clone()).unwrap();
        assert_eq!(resp.stop_reason, StopReason::ToolUse);
        assert_eq!(
            resp.usage,
            Usage {
                input_tokens: 13,
                output_tokens: 5
            }
        );
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
        };
        let body = encode_request("m", &req);
        assert_eq!(body["messages"][1]["content"], raw["content"]);
        assert_eq!(
            body["messages"][0]["content"],
            json!([{"type": "text", "text": "hi"}])
        );
        assert_eq!(body["tools"][0]["input_schema"], json!({"type": "object"}));
        assert_eq!(body["max_tokens"], 100);
    }

    #[test]
    fn stop_reasons_map_and_unknown_ones_are_kept() {
        for (wire, want) in [
            ("end_turn", StopReason::EndTurn),
            ("max_tokens", StopReason::MaxTokens),
            ("pause_turn", StopReason::PauseTurn),
            (
                "model_context_window_exceeded",
                StopReason::ContextWindowExceeded,
            ),
            ("compaction", StopReason::Other("compaction".into())),
        ] {
            let r =
                decode_response(json!({"content": [], "stop_reason": wire, "usage": {}})).unwrap();
            assert_eq!(r.stop_reason, want);
        }
        let r = decode_response(json!({"content": [], "stop_reason": "refusal",
            "stop_details": {"type": "refusal", "category": "cyber", "explanation": "no"}}))
        .unwrap();
        assert_eq!(
            r.stop_reason,
            StopReason::Refusal {
                explanation: Some("no".into())
            }
        );
        assert!(decode_response(json!({"type": "message"})).is_err());
    }

    #[test]
    fn tool_results_encode_errors_only_when_set() {
        let m = Message {
            role: Role::User,
            content: vec![
                Block::ToolResult {
                    tool_use_id: "a".into(),
                    content: "ok".into(),
                    is_error: false,
                },
                Block::ToolResult {
                    tool_use_id: "b".into(),
                    content: "bad".into(),
                    is_error: true,
                },
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
        );
        assert_eq!(e.kind, ModelErrorKind::Auth);
        assert_eq!(
            e.message,
            "Anthropic API 401: the API key was rejected; check ANTHROPIC_API_KEY: invalid x-api-key"
        );
        assert_eq!(http_error(529, "overloaded").kind, ModelErrorKind::Server);
        assert_eq!(http_error(400, "{}").kind, ModelErrorKind::InvalidRequest);
    }
}
