//! Self-tests of the test harness: the loopback Anthropic / OpenAI mock
//! (`tests/common/mock_model.rs`) driven by a tiny std::net HTTP client with an SSE parser, plus
//! the URI and text-edit helpers. None of these need the agentfix binary.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use common::mock_model::{
    self, API_KEY, Chunk, MockModel, Reply, error_reply, message, openai_insufficient_quota, openai_message,
    openai_quirk_arguments_object, openai_quirk_empty_id, openai_quirk_name_repeated, openai_quirk_ollama_index0,
    openai_quirk_stop_with_tool_calls, openai_sse_chunks, openai_stream_error, openai_text, openai_tools, overloaded,
    rate_limited, rate_limited_ms, server_error_no_retry, split_bytes, sse_error_after_start, sse_event, sse_events,
    stalled, text_reply, tool_reply, truncated,
};
use serde_json::{Value, json};

const A4_MISSING: &str = "`tool_use` ids were found without `tool_result` blocks immediately after: toolu_A. Each `tool_use` block must have a corresponding `tool_result` block in the next message.";
const A4_NOT_FIRST: &str = "Did not find 1 tool_result block(s) at the beginning of this message. Messages following tool_use blocks must begin with a matching number of tool_result blocks.";

struct HttpResponse {
    status: u16,
    headers: Vec<(String, String)>,
    body: Value,
}

impl HttpResponse {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    fn error_message(&self) -> &str {
        self.body["error"]["message"].as_str().unwrap_or_default()
    }
}

fn connect(mock: &MockModel) -> TcpStream {
    let addr = mock.base_url().trim_start_matches("http://").to_string();
    let stream = TcpStream::connect(addr).expect("connect to mock");
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream
}

/// Reads a status line and headers (names lowercase).
fn read_head(reader: &mut impl BufRead) -> (u16, Vec<(String, String)>) {
    let mut status_line = String::new();
    reader.read_line(&mut status_line).expect("status line");
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).expect("header line");
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').expect("header colon");
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    (status, headers)
}

/// Reads one response (status line, headers, Content-Length body).
fn read_response(reader: &mut impl BufRead) -> HttpResponse {
    let (status, headers) = read_head(reader);
    let length: usize =
        headers.iter().find(|(n, _)| n == "content-length").map(|(_, v)| v.parse().unwrap()).expect("content-length");
    let mut body = vec![0; length];
    reader.read_exact(&mut body).expect("body");
    HttpResponse { status, headers, body: serde_json::from_slice(&body).expect("JSON response body") }
}

fn request_bytes(method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut head = format!("{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// One request on a fresh connection with `Connection: close`.
fn send(mock: &MockModel, raw: &[u8]) -> HttpResponse {
    let mut stream = connect(mock);
    stream.write_all(raw).unwrap();
    let mut reader = BufReader::new(stream);
    let response = read_response(&mut reader);
    let mut rest = Vec::new();
    let _ = reader.read_to_end(&mut rest);
    assert!(rest.is_empty(), "bytes after the response: {rest:?}");
    response
}

fn post_with(mock: &MockModel, path: &str, headers: &[(&str, &str)], body: &Value) -> HttpResponse {
    let mut all = headers.to_vec();
    all.push(("connection", "close"));
    send(mock, &request_bytes("POST", path, &all, body.to_string().as_bytes()))
}

const GOOD_HEADERS: &[(&str, &str)] =
    &[("x-api-key", API_KEY), ("anthropic-version", "2023-06-01"), ("content-type", "application/json")];

fn post(mock: &MockModel, body: &Value) -> HttpResponse {
    post_with(mock, "/v1/messages", GOOD_HEADERS, body)
}

fn body_with(messages: Value) -> Value {
    json!({
        "model": "claude-mock-1",
        "max_tokens": 1024,
        "tools": [{
            "name": "read_file",
            "description": "Read a file",
            "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
        }],
        "messages": messages
    })
}

fn assert_400(mock: &MockModel, body: &Value, expected: &str) {
    let response = post(mock, body);
    assert_eq!(response.status, 400, "body: {}", response.body);
    assert_eq!(response.body["type"], "error");
    assert_eq!(response.body["error"]["type"], "invalid_request_error");
    assert_eq!(response.error_message(), expected);
    assert!(response.body["request_id"].as_str().is_some_and(|id| id.starts_with("req_")));
    assert_eq!(mock.violations().last().map(String::as_str), Some(expected));
}

/// A response read up to the end of the connection (a JSON body or a stream).
struct RawResponse {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl RawResponse {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    fn text(&self) -> &str {
        std::str::from_utf8(&self.body).expect("UTF-8 response body")
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("JSON body ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
}

/// POSTs `body` with `Connection: close` and reads the response until the mock closes the
/// connection (checking the Content-Length when there is one).
fn exchange(mock: &MockModel, path: &str, headers: &[(&str, &str)], body: &Value) -> RawResponse {
    let mut all = headers.to_vec();
    all.push(("connection", "close"));
    let mut stream = connect(mock);
    stream.write_all(&request_bytes("POST", path, &all, body.to_string().as_bytes())).unwrap();
    let mut reader = BufReader::new(stream);
    let (status, headers) = read_head(&mut reader);
    let mut body = Vec::new();
    reader.read_to_end(&mut body).expect("read to the end of the connection");
    let response = RawResponse { status, headers, body };
    if let Some(length) = response.header("content-length") {
        assert_eq!(response.body.len(), length.parse::<usize>().unwrap());
    }
    response
}

/// An Anthropic request body (with tools) asking for a stream.
fn stream_body(messages: Value) -> Value {
    let mut body = body_with(messages);
    body["stream"] = json!(true);
    body
}

/// Server-sent events by the WHATWG rules, as `(event name or "", data)`: comment lines are
/// skipped, one space after the colon is stripped, data lines are joined with `\n`, and an
/// event not terminated by a blank line (cut-off stream) is dropped.
fn parse_sse(text: &str) -> Vec<(String, String)> {
    let mut events = Vec::new();
    let mut event = String::new();
    let mut data: Vec<String> = Vec::new();
    for line in text.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() {
            if !data.is_empty() {
                events.push((std::mem::take(&mut event), data.join("\n")));
            }
            event.clear();
            data.clear();
            continue;
        }
        if line.starts_with(':') {
            continue;
        }
        let (field, value) = line.split_once(':').map_or((line, ""), |(f, v)| (f, v.strip_prefix(' ').unwrap_or(v)));
        match field {
            "event" => event = value.to_string(),
            "data" => data.push(value.to_string()),
            _ => {}
        }
    }
    events
}

fn event_json(event: &(String, String)) -> Value {
    serde_json::from_str(&event.1).unwrap_or_else(|e| panic!("event data is not JSON ({e}): {}", event.1))
}

fn append_str(slot: &mut Value, piece: &str) {
    let mut text = slot.as_str().unwrap_or_default().to_string();
    text.push_str(piece);
    *slot = json!(text);
}

/// Rebuilds the message from an Anthropic event stream by the A5 rules: blocks by `index`,
/// text / thinking / signature appended, `partial_json` concatenated and parsed at
/// `content_block_stop` (empty means `{}`), `message_delta` fields and usage overwritten, `ping`
/// ignored. Panics on an `error` event, a delta before its block starts, or a missing
/// `message_stop`.
fn accumulate_anthropic(events: &[(String, String)]) -> Value {
    let mut message = Value::Null;
    let mut blocks: BTreeMap<u64, Value> = BTreeMap::new();
    let mut buffers: BTreeMap<u64, String> = BTreeMap::new();
    let mut stopped = false;
    for event in events {
        let data = event_json(event);
        assert_eq!(data["type"], event.0.as_str(), "event name and data type differ");
        assert!(!stopped, "event after message_stop: {}", event.1);
        let index = data["index"].as_u64();
        match event.0.as_str() {
            "message_start" => message = data["message"].clone(),
            "content_block_start" => {
                blocks.insert(index.unwrap(), data["content_block"].clone());
            }
            "content_block_delta" => {
                let index = index.unwrap();
                let block = blocks.get_mut(&index).expect("delta before content_block_start");
                let delta = &data["delta"];
                match delta["type"].as_str().unwrap() {
                    "text_delta" => append_str(&mut block["text"], delta["text"].as_str().unwrap()),
                    "thinking_delta" => append_str(&mut block["thinking"], delta["thinking"].as_str().unwrap()),
                    "signature_delta" => append_str(&mut block["signature"], delta["signature"].as_str().unwrap()),
                    "input_json_delta" => {
                        buffers.entry(index).or_default().push_str(delta["partial_json"].as_str().unwrap());
                    }
                    "citations_delta" => block["citations"].as_array_mut().unwrap().push(delta["citation"].clone()),
                    other => panic!("unknown delta type {other}"),
                }
            }
            "content_block_stop" => {
                let index = index.unwrap();
                if let Some(buffer) = buffers.remove(&index) {
                    let input = if buffer.is_empty() { json!({}) } else { serde_json::from_str(&buffer).unwrap() };
                    blocks.get_mut(&index).unwrap()["input"] = input;
                }
            }
            "message_delta" => {
                for (key, value) in data["delta"].as_object().unwrap() {
                    message[key] = value.clone();
                }
                for (key, value) in data["usage"].as_object().unwrap() {
                    message["usage"][key] = value.clone();
                }
            }
            "message_stop" => stopped = true,
            "ping" => {}
            other => panic!("unexpected event {other}: {}", event.1),
        }
    }
    assert!(stopped, "no message_stop");
    message["content"] = Value::Array(blocks.into_values().collect());
    message
}

/// Rebuilds a `chat.completion` (one choice) from an OpenAI chunk stream by the B3 / C4 rules:
/// `id`, `type` and `name` assigned, `arguments` and `content` appended per tool index, usage
/// from the chunk that has one. Returns it and whether `[DONE]` arrived.
fn accumulate_openai(events: &[(String, String)]) -> (Value, bool) {
    let mut done = false;
    let mut head = json!({});
    let mut role = Value::Null;
    let mut content: Option<String> = None;
    let mut calls: BTreeMap<u64, Value> = BTreeMap::new();
    let mut finish_reason = Value::Null;
    let mut usage = Value::Null;
    for (name, data) in events {
        assert_eq!(name, "", "OpenAI streams have no event names");
        assert!(!done, "data after [DONE]: {data}");
        if data == "[DONE]" {
            done = true;
            continue;
        }
        let chunk: Value = serde_json::from_str(data).unwrap();
        assert_eq!(chunk["object"], "chat.completion.chunk", "{chunk}");
        head = json!({"id": chunk["id"], "created": chunk["created"], "model": chunk["model"]});
        if !chunk["usage"].is_null() {
            usage = chunk["usage"].clone();
        }
        for choice in chunk["choices"].as_array().unwrap() {
            let delta = &choice["delta"];
            if let Some(value) = delta.get("role") {
                role = value.clone();
            }
            if let Some(text) = delta["content"].as_str() {
                content.get_or_insert_with(String::new).push_str(text);
            }
            for call in delta["tool_calls"].as_array().into_iter().flatten() {
                let slot = calls
                    .entry(call["index"].as_u64().unwrap())
                    .or_insert_with(|| json!({"function": {"arguments": ""}}));
                if let Some(id) = call.get("id") {
                    slot["id"] = id.clone();
                }
                if let Some(kind) = call.get("type") {
                    slot["type"] = kind.clone();
                }
                if let Some(name) = call["function"].get("name") {
                    slot["function"]["name"] = name.clone();
                }
                if let Some(arguments) = call["function"]["arguments"].as_str() {
                    append_str(&mut slot["function"]["arguments"], arguments);
                }
            }
            if !choice["finish_reason"].is_null() {
                finish_reason = choice["finish_reason"].clone();
            }
        }
    }
    let mut message = json!({"role": role, "content": content, "refusal": null});
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls.into_values().collect());
    }
    let completion = json!({
        "id": head["id"], "object": "chat.completion", "created": head["created"], "model": head["model"],
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": null}],
        "usage": usage
    });
    (completion, done)
}

const OPENAI_PATH: &str = "/v1/chat/completions";

const OPENAI_HEADERS: &[(&str, &str)] =
    &[("authorization", "Bearer test-key-0123"), ("content-type", "application/json")];

fn openai_body(messages: Value) -> Value {
    json!({
        "model": "gpt-mock-1",
        "messages": messages,
        "tools": [{"type": "function", "function": {
            "name": "read_file",
            "description": "Read a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
        }}]
    })
}

fn openai_stream_body(messages: Value) -> Value {
    let mut body = openai_body(messages);
    body["stream"] = json!(true);
    body
}

fn openai_post(mock: &MockModel, body: &Value) -> RawResponse {
    exchange(mock, OPENAI_PATH, OPENAI_HEADERS, body)
}

fn assert_openai_400(mock: &MockModel, body: &Value, expected: &str) {
    let response = openai_post(mock, body);
    assert_eq!(response.status, 400, "body: {}", response.text());
    let error = &response.json()["error"];
    assert_eq!(error["type"], "invalid_request_error");
    assert_eq!(error["message"], expected);
    let fields = error.as_object().unwrap();
    assert!(fields.contains_key("param") && fields.contains_key("code"), "{error}");
    assert_eq!(mock.violations().last().map(String::as_str), Some(expected));
}

/// The deltas of one Anthropic content block, in order.
fn block_deltas(events: &[(String, String)], index: u64) -> Vec<Value> {
    events
        .iter()
        .map(event_json)
        .filter(|e| e["type"] == "content_block_delta" && e["index"] == index)
        .map(|e| e["delta"].clone())
        .collect()
}

/// Every `tool_calls` delta entry of an OpenAI chunk stream, in order.
fn tool_call_deltas(events: &[(String, String)]) -> Vec<Value> {
    events
        .iter()
        .filter(|(_, data)| data != "[DONE]")
        .map(event_json)
        .flat_map(|chunk| {
            chunk["choices"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|choice| choice["delta"]["tool_calls"].as_array().cloned().unwrap_or_default())
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn valid_request_gets_scripted_reply_with_model_echoed() {
    let mock = MockModel::start();
    assert!(mock.base_url().starts_with("http://127.0.0.1:"));
    assert!(!mock.base_url().ends_with('/'));
    mock.push(text_reply("Hello there."));
    let body = json!({
        "model": "claude-mock-1",
        "max_tokens": 64,
        "system": "You are a test.",
        "messages": [{"role": "user", "content": "hi"}]
    });
    let response = post(&mock, &body);
    assert_eq!(response.status, 200, "body: {}", response.body);
    assert!(response.header("request-id").is_some());
    let reply = &response.body;
    assert!(reply["id"].as_str().unwrap().starts_with("msg_"));
    assert_eq!(reply["type"], "message");
    assert_eq!(reply["role"], "assistant");
    assert_eq!(reply["model"], "claude-mock-1");
    assert_eq!(reply["content"], json!([{"type": "text", "text": "Hello there."}]));
    assert_eq!(reply["stop_reason"], "end_turn");
    assert_eq!(reply["stop_sequence"], Value::Null);
    let expected_input = (body.to_string().len() / 4) as u64;
    assert_eq!(reply["usage"]["input_tokens"], expected_input);
    assert_eq!(reply["usage"]["output_tokens"], 10);
    assert_eq!(reply["usage"]["cache_creation_input_tokens"], 0);
    assert_eq!(reply["usage"]["cache_read_input_tokens"], 0);
    assert!(mock.violations().is_empty());
    assert_eq!(mock.remaining(), 0);
}

#[test]
fn replies_are_consumed_in_order_and_tool_reply_has_the_real_shape() {
    let mock = MockModel::start();
    mock.push(tool_reply(&[
        ("toolu_A", "read_file", json!({"path": "a.txt"})),
        ("toolu_B", "read_file", json!({"path": "b.txt"})),
    ]));
    mock.push(text_reply("done"));
    let first = post(&mock, &body_with(json!([{"role": "user", "content": "read a and b"}])));
    assert_eq!(first.status, 200, "body: {}", first.body);
    assert_eq!(first.body["stop_reason"], "tool_use");
    let content = first.body["content"].as_array().unwrap();
    assert_eq!(content.len(), 3);
    assert_eq!(content[0], json!({"type": "text", "text": "Let me look."}));
    assert_eq!(
        content[2],
        json!({"type": "tool_use", "id": "toolu_B", "name": "read_file", "input": {"path": "b.txt"}})
    );
    assert_eq!(first.body["usage"]["output_tokens"], 30);

    // The correct continuation: results first, text after them is allowed.
    let second = post(
        &mock,
        &body_with(json!([
            {"role": "user", "content": "read a and b"},
            {"role": "assistant", "content": first.body["content"]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_B", "content": "bbb"},
                {"type": "tool_result", "tool_use_id": "toolu_A", "content": [{"type": "text", "text": "aaa"}], "is_error": false},
                {"type": "text", "text": "carry on"}
            ]}
        ])),
    );
    assert_eq!(second.status, 200, "body: {}", second.body);
    assert_eq!(second.body["content"][0]["text"], "done");
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
}

#[test]
fn explicit_model_and_status_replies_are_sent_as_scripted() {
    let mock = MockModel::start();
    mock.push(error_reply(529, "overloaded_error", "Overloaded"));
    mock.push(Reply::Status {
        status: 429,
        headers: vec![("retry-after".into(), "1".into())],
        body: json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}),
    });
    let Reply::Message(mut pinned) = message(json!([{"type": "text", "text": "x"}]), "max_tokens") else {
        unreachable!()
    };
    pinned["model"] = json!("pinned-model");
    mock.push(Reply::Message(pinned));
    let body = body_with(json!([{"role": "user", "content": "hi"}]));

    let overloaded = post(&mock, &body);
    assert_eq!(overloaded.status, 529);
    assert_eq!(overloaded.body["error"]["type"], "overloaded_error");
    let limited = post(&mock, &body);
    assert_eq!(limited.status, 429);
    assert_eq!(limited.header("retry-after"), Some("1"));
    let pinned = post(&mock, &body);
    assert_eq!(pinned.body["model"], "pinned-model");
    assert_eq!(pinned.body["stop_reason"], "max_tokens");
    // Scripted errors are not violations.
    assert!(mock.violations().is_empty());
}

#[test]
fn delayed_reply_waits_before_answering() {
    let mock = MockModel::start();
    mock.push(Reply::Delay(Duration::from_millis(300), Box::new(text_reply("late"))));
    let started = Instant::now();
    let response = post(&mock, &body_with(json!([{"role": "user", "content": "hi"}])));
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(response.status, 200);
    assert_eq!(response.body["content"][0]["text"], "late");
}

#[test]
fn wrong_or_missing_api_key_is_401() {
    let mock = MockModel::start();
    // This test sends invalid requests on purpose to check the mock's validation.
    mock.expect_violations();
    mock.push(text_reply("unused"));
    let body = body_with(json!([{"role": "user", "content": "hi"}]));
    let wrong = post_with(&mock, "/v1/messages", &[("x-api-key", "nope"), ("anthropic-version", "2023-06-01")], &body);
    assert_eq!(wrong.status, 401);
    assert_eq!(wrong.body["error"]["type"], "authentication_error");
    assert_eq!(wrong.error_message(), "invalid x-api-key");
    let missing = post_with(&mock, "/v1/messages", &[("anthropic-version", "2023-06-01")], &body);
    assert_eq!(missing.status, 401);
    assert_eq!(mock.remaining(), 1, "rejected requests consume no reply");
    assert_eq!(mock.violations().len(), 2);
}

#[test]
fn missing_anthropic_version_is_400() {
    let mock = MockModel::start();
    // This test sends invalid requests on purpose to check the mock's validation.
    mock.expect_violations();
    let response = post_with(
        &mock,
        "/v1/messages",
        &[("x-api-key", API_KEY)],
        &body_with(json!([{"role": "user", "content": "hi"}])),
    );
    assert_eq!(response.status, 400);
    assert_eq!(response.body["error"]["type"], "invalid_request_error");
    assert_eq!(response.error_message(), "anthropic-version: header is required");
}

#[test]
fn wrong_path_or_method_is_404_and_query_string_is_ignored() {
    let mock = MockModel::start();
    // This test sends invalid requests on purpose to check the mock's validation.
    mock.expect_violations();
    let body = body_with(json!([{"role": "user", "content": "hi"}]));
    let response = post_with(&mock, "/v1/complete", GOOD_HEADERS, &body);
    assert_eq!(response.status, 404);
    assert_eq!(response.body["error"]["type"], "not_found_error");
    let get = send(&mock, &request_bytes("GET", "/v1/messages", &[("connection", "close")], b""));
    assert_eq!(get.status, 404);

    mock.push(text_reply("beta"));
    let beta = post_with(&mock, "/v1/messages?beta=true", GOOD_HEADERS, &body);
    assert_eq!(beta.status, 200, "body: {}", beta.body);
    assert_eq!(mock.requests().last().unwrap().path, "/v1/messages");
}

#[test]
fn invalid_bodies_are_400() {
    let mock = MockModel::start();
    // This test sends invalid requests on purpose to check the mock's validation.
    mock.expect_violations();
    let not_json = send(
        &mock,
        &request_bytes(
            "POST",
            "/v1/messages",
            &[("x-api-key", API_KEY), ("anthropic-version", "2023-06-01"), ("connection", "close")],
            b"{not json",
        ),
    );
    assert_eq!(not_json.status, 400);
    assert_eq!(mock.requests()[0].body, Value::Null);

    let messages = json!([{"role": "user", "content": "hi"}]);
    assert_400(&mock, &json!({"model": "m", "messages": messages}), "max_tokens: Field required");
    assert_400(&mock, &json!({"max_tokens": 5, "messages": messages}), "model: Field required");
    assert_400(
        &mock,
        &json!({"model": "m", "max_tokens": 0, "messages": messages}),
        "max_tokens: Input should be greater than or equal to 1",
    );
    assert_400(
        &mock,
        &json!({"model": "m", "max_tokens": 5, "messages": []}),
        "messages: List should have at least 1 item after validation, not 0",
    );
    assert_400(
        &mock,
        &json!({"model": "m", "max_tokens": 5, "messages": messages, "max_token": 5}),
        "max_token: Extra inputs are not permitted",
    );
    assert_400(
        &mock,
        &json!({"model": "m", "max_tokens": 5, "messages": messages,
                "tools": [{"name": "read file", "input_schema": {"type": "object"}}]}),
        "tools.0.name: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'",
    );
    assert_400(
        &mock,
        &json!({"model": "m", "max_tokens": 5, "messages": messages,
                "tools": [{"name": "ok", "input_schema": {"type": "object"}},
                          {"name": "bad", "input_schema": {"type": "string"}}]}),
        "tools.1.input_schema.type: Input should be 'object'",
    );
    assert_400(
        &mock,
        &body_with(json!([{"role": "assistant", "content": "hi"}])),
        "messages: first message must use the \"user\" role",
    );
    assert_400(
        &mock,
        &body_with(json!([{"role": "system", "content": "hi"}])),
        "messages.0.role: Input should be 'user' or 'assistant'",
    );
}

#[test]
fn empty_content_is_400() {
    let mock = MockModel::start();
    // This test sends invalid requests on purpose to check the mock's validation.
    mock.expect_violations();
    let expected =
        "messages.0: all messages must have non-empty content except for the optional final assistant message";
    assert_400(&mock, &body_with(json!([{"role": "user", "content": ""}])), expected);
    assert_400(&mock, &body_with(json!([{"role": "user", "content": []}])), expected);
    assert_400(
        &mock,
        &body_with(json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": []},
            {"role": "user", "content": "again"}
        ])),
        "messages.1: all messages must have non-empty content except for the optional final assistant message",
    );
    // An empty final assistant message (prefill) is allowed.
    mock.push(text_reply("ok"));
    let prefill = post(
        &mock,
        &body_with(json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": ""}
        ])),
    );
    assert_eq!(prefill.status, 200, "body: {}", prefill.body);
}

#[test]
fn tool_use_without_tool_result_is_400_and_recorded_as_violation() {
    let mock = MockModel::start();
    // This test sends invalid requests on purpose to check the mock's validation.
    mock.expect_violations();
    mock.push(text_reply("never sent"));
    let body = body_with(json!([
        {"role": "user", "content": "read a"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_A", "name": "read_file", "input": {"path": "a.txt"}}
        ]},
        {"role": "user", "content": "what did you find?"}
    ]));
    assert_400(&mock, &body, &format!("messages.1: {A4_MISSING}"));
    assert_eq!(mock.violations(), vec![format!("messages.1: {A4_MISSING}")]);
    assert_eq!(mock.remaining(), 1);

    // Same when the conversation ends with the tool_use, or another assistant turn follows.
    let ends = body_with(json!([
        {"role": "user", "content": "read a"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_A", "name": "read_file", "input": {}}
        ]}
    ]));
    assert_400(&mock, &ends, &format!("messages.1: {A4_MISSING}"));
}

#[test]
fn tool_result_not_first_in_next_message_is_400() {
    let mock = MockModel::start();
    // This test sends invalid requests on purpose to check the mock's validation.
    mock.expect_violations();
    let body = body_with(json!([
        {"role": "user", "content": "read a"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_A", "name": "read_file", "input": {"path": "a.txt"}}
        ]},
        {"role": "user", "content": [
            {"type": "text", "text": "here you go"},
            {"type": "tool_result", "tool_use_id": "toolu_A", "content": "aaa"}
        ]}
    ]));
    assert_400(&mock, &body, &format!("messages.2: {A4_NOT_FIRST}"));
}

#[test]
fn unexpected_duplicate_or_malformed_tool_blocks_are_400() {
    let mock = MockModel::start();
    // This test sends invalid requests on purpose to check the mock's validation.
    mock.expect_violations();
    let tool_use = |id: &str| json!({"type": "tool_use", "id": id, "name": "read_file", "input": {}});
    let result = |id: &str| json!({"type": "tool_result", "tool_use_id": id, "content": "x"});

    assert_400(
        &mock,
        &body_with(json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [tool_use("toolu_A")]},
            {"role": "user", "content": [result("toolu_A"), result("toolu_Z")]}
        ])),
        "messages.2.content.1: unexpected `tool_use_id` found in `tool_result` blocks: toolu_Z. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.",
    );
    assert_400(
        &mock,
        &body_with(json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [tool_use("toolu_A")]},
            {"role": "user", "content": [result("toolu_A")]},
            {"role": "assistant", "content": [tool_use("toolu_A")]},
            {"role": "user", "content": [result("toolu_A")]}
        ])),
        "messages.3.content.0: `tool_use` ids must be unique",
    );
    assert_400(
        &mock,
        &body_with(json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_A", "name": "read_file", "input": "{\"path\":1}"}
            ]},
            {"role": "user", "content": [result("toolu_A")]}
        ])),
        "messages.1.content.0.input: Input should be a valid dictionary",
    );
    assert_400(
        &mock,
        &body_with(json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [tool_use("toolu_A")]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_A", "content": "x", "is_error": "yes"}
            ]}
        ])),
        "messages.2.content.0.is_error: Input should be a valid boolean",
    );
    assert_400(
        &mock,
        &body_with(json!([
            {"role": "user", "content": [{"type": "tool_use", "id": "toolu_A", "name": "x", "input": {}}]}
        ])),
        "messages.0.content.0.type: `tool_use` blocks are not allowed in user messages",
    );
    assert_400(
        &mock,
        &json!({"model": "m", "max_tokens": 5, "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [tool_use("toolu_A")]},
            {"role": "user", "content": [result("toolu_A")]}
        ]}),
        "messages.1.content.0: Requests which include `tool_use` or `tool_result` blocks must define tools.",
    );
}

#[test]
fn no_scripted_reply_is_500_and_not_a_violation() {
    let mock = MockModel::start();
    let response = post(&mock, &body_with(json!([{"role": "user", "content": "hi"}])));
    assert_eq!(response.status, 500);
    assert_eq!(response.body["type"], "error");
    assert_eq!(response.body["error"]["type"], "api_error");
    assert_eq!(response.error_message(), "mock: no scripted reply left");
    assert!(mock.violations().is_empty());
}

#[test]
fn requests_records_everything_valid_or_not() {
    let mock = MockModel::start();
    // This test sends invalid requests on purpose to check the mock's validation.
    mock.expect_violations();
    mock.push(text_reply("one"));
    let body = body_with(json!([{"role": "user", "content": "hi"}]));
    post(&mock, &body);
    post_with(&mock, "/nowhere", GOOD_HEADERS, &body);
    post_with(&mock, "/v1/messages", &[("x-api-key", "bad")], &body);
    post(&mock, &json!({"model": "m"}));
    post(&mock, &body);

    let requests = mock.requests();
    assert_eq!(requests.len(), 5);
    assert!(requests.iter().all(|r| r.method == "POST"));
    assert_eq!(requests[0].path, "/v1/messages");
    assert_eq!(requests[0].body, body);
    assert_eq!(requests[0].header("X-Api-Key"), Some(API_KEY));
    assert_eq!(requests[0].header("anthropic-version"), Some("2023-06-01"));
    assert!(requests[0].headers.iter().all(|(n, _)| *n == n.to_ascii_lowercase()));
    assert_eq!(requests[1].path, "/nowhere");
    assert_eq!(requests[2].header("x-api-key"), Some("bad"));
    assert_eq!(requests[3].body, json!({"model": "m"}));
    assert_eq!(mock.violations().len(), 3);
}

#[test]
fn count_tokens_is_validated_like_messages_and_kept_apart() {
    let mock = MockModel::start();
    // This test sends invalid requests on purpose to check the mock's validation.
    mock.expect_violations();
    mock.push(text_reply("unused"));
    let path = "/v1/messages/count_tokens";
    let mut body = body_with(json!([{"role": "user", "content": "hi"}]));
    body.as_object_mut().unwrap().remove("max_tokens");

    // Naive usage: this body's length / 4.
    let counted = post_with(&mock, path, GOOD_HEADERS, &body);
    assert_eq!(counted.status, 200, "{}", counted.body);
    assert_eq!(counted.body, json!({"input_tokens": body.to_string().len() / 4}));

    // What the endpoint refuses, as the real API refuses it.
    for (field, value) in [("max_tokens", json!(1024)), ("stream", json!(true)), ("temperature", json!(0.5))] {
        let mut extra = body.clone();
        extra[field] = value;
        let refused = post_with(&mock, path, GOOD_HEADERS, &extra);
        assert_eq!((refused.status, refused.body["error"]["type"].as_str()), (400, Some("invalid_request_error")));
        assert_eq!(refused.error_message(), format!("{field}: Extra inputs are not permitted"));
    }
    // The same key and headers as /v1/messages, and the same rules for the rest of the body.
    let wrong = post_with(&mock, path, &[("x-api-key", "nope"), ("anthropic-version", "2023-06-01")], &body);
    assert_eq!((wrong.status, wrong.error_message()), (401, "invalid x-api-key"));
    let unversioned = post_with(&mock, path, &[("x-api-key", API_KEY)], &body);
    assert_eq!((unversioned.status, unversioned.error_message()), (400, "anthropic-version: header is required"));
    let unpaired = json!({"model": "m", "tools": body["tools"], "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_A", "name": "read_file", "input": {}}]}
    ]});
    let refused = post_with(&mock, path, GOOD_HEADERS, &unpaired);
    assert_eq!((refused.status, refused.error_message()), (400, format!("messages.1: {A4_MISSING}").as_str()));

    // Canonical usage: what /v1/messages reports in all for the same prompt.
    mock.set_usage_model(mock_model::UsageModel::cached());
    let counted = post_with(&mock, path, GOOD_HEADERS, &body).body["input_tokens"].as_u64().unwrap();
    let mut sent = body.clone();
    sent["max_tokens"] = json!(1024);
    let usage = post(&mock, &sent).body["usage"].clone();
    let n = |f: &str| usage[f].as_u64().unwrap();
    assert_eq!(counted, n("input_tokens") + n("cache_creation_input_tokens") + n("cache_read_input_tokens"));

    assert_eq!(mock.count_requests().len(), 8);
    assert!(mock.count_requests().iter().all(|r| r.path == path));
    assert_eq!(mock.requests().len(), 1, "only the message request: {:?}", mock.requests());
    assert_eq!((mock.usage_stats().requests, mock.remaining()), (1, 0), "counts take no reply");
    assert_eq!(mock.violations().len(), 6);
}

#[test]
fn keep_alive_and_chunked_request_bodies_work() {
    let mock = MockModel::start();
    mock.push(text_reply("first"));
    mock.push(text_reply("second"));
    let body = body_with(json!([{"role": "user", "content": "grüße"}])).to_string();
    let stream = connect(&mock);
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);

    writer.write_all(&request_bytes("POST", "/v1/messages", GOOD_HEADERS, body.as_bytes())).unwrap();
    let first = read_response(&mut reader);
    assert_eq!(first.status, 200, "body: {}", first.body);
    assert_eq!(first.header("connection"), Some("keep-alive"));
    assert_eq!(first.body["content"][0]["text"], "first");

    // Second request on the same connection, chunked, split mid-way through a UTF-8 character.
    let (a, b) = body.as_bytes().split_at(body.find('ü').unwrap() + 1);
    let mut chunked = String::from(
        "POST /v1/messages HTTP/1.1\r\nHost: x\r\nX-Api-Key: test-key-0123\r\nAnthropic-Version: 2023-06-01\r\nTransfer-Encoding: chunked\r\n\r\n",
    )
    .into_bytes();
    for part in [a, b] {
        chunked.extend_from_slice(format!("{:x};ext=1\r\n", part.len()).as_bytes());
        chunked.extend_from_slice(part);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    writer.write_all(&chunked).unwrap();
    let second = read_response(&mut reader);
    assert_eq!(second.status, 200, "body: {}", second.body);
    assert_eq!(second.body["content"][0]["text"], "second");
    assert_eq!(mock.requests()[1].body.to_string(), body);
    assert!(mock.violations().is_empty());
}

#[test]
fn builders_fill_model_at_send_time() {
    let Reply::Message(template) = mock_model::text_reply("x") else {
        panic!("text_reply builds a Message");
    };
    assert_eq!(template["model"], Value::Null);
    let mock = MockModel::start();
    let reply = Reply::Message(template.clone());
    mock.push(reply.clone());
    mock.push(reply);
    for model in ["model-a", "model-b"] {
        let mut body = body_with(json!([{"role": "user", "content": "hi"}]));
        body["model"] = json!(model);
        assert_eq!(post(&mock, &body).body["model"], model);
    }
}

/// A tool input whose ~5-byte fragments cut an escape sequence in half, with a non-ASCII char.
fn tricky_input() -> Value {
    json!({"path": "src/\"quoted\" dir/ü.rs", "pattern": "ab\\c\td\n"})
}

#[test]
fn anthropic_stream_round_trips_a_scripted_message() {
    let mock = MockModel::start();
    let signature = "EqQBCkYIBxgCKkDsig+/==";
    let scripted = message(
        json!([
            {"type": "thinking", "thinking": "Two files; start with the quoted one.", "signature": signature},
            {"type": "text", "text": "Grüße! Let me look at both files 😀."},
            {"type": "tool_use", "id": "toolu_A", "name": "read_file", "input": tricky_input()},
            {"type": "tool_use", "id": "toolu_B", "name": "list_files", "input": {}},
            {"type": "redacted_thinking", "data": "opaque-encrypted=="}
        ]),
        "tool_use",
    );
    let Reply::Message(expected) = scripted.clone() else { unreachable!() };
    mock.push(scripted);
    let body = stream_body(json!([{"role": "user", "content": "read them"}]));
    let response = exchange(&mock, "/v1/messages", GOOD_HEADERS, &body);
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.header("content-type"), Some("text/event-stream"));
    assert_eq!(response.header("content-length"), None);
    assert_eq!(response.header("connection"), Some("close"));
    assert!(response.header("request-id").is_some());

    let events = parse_sse(response.text());
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names[..3], ["message_start", "content_block_start", "ping"]);
    assert_eq!(names[names.len() - 2..], ["message_delta", "message_stop"]);
    assert_eq!(names.iter().filter(|n| **n == "ping").count(), 1);
    assert_eq!(names.iter().filter(|n| **n == "content_block_start").count(), 5);
    assert_eq!(names.iter().filter(|n| **n == "content_block_stop").count(), 5);
    let start = event_json(&events[0]);
    assert_eq!(start["message"]["content"], json!([]));
    assert_eq!(start["message"]["stop_reason"], Value::Null);
    assert_eq!(start["message"]["model"], "claude-mock-1");
    assert_eq!(start["message"]["usage"]["output_tokens"], 1);

    let starts: Vec<Value> = events
        .iter()
        .map(event_json)
        .filter(|e| e["type"] == "content_block_start")
        .map(|e| e["content_block"].clone())
        .collect();
    assert_eq!(starts[0], json!({"type": "thinking", "thinking": "", "signature": ""}));
    assert_eq!(starts[1], json!({"type": "text", "text": ""}));
    assert_eq!(starts[2], json!({"type": "tool_use", "id": "toolu_A", "name": "read_file", "input": {}}));
    assert_eq!(starts[4], expected["content"][4], "other blocks are sent whole");

    let thinking = block_deltas(&events, 0);
    assert_eq!(thinking.last(), Some(&json!({"type": "signature_delta", "signature": signature})));
    assert!(thinking[..thinking.len() - 1].iter().all(|d| d["type"] == "thinking_delta"));
    let text = block_deltas(&events, 1);
    assert!(text.len() > 1);
    assert!(text.iter().all(|d| d["type"] == "text_delta" && d["text"].as_str().unwrap().chars().count() <= 7));
    let fragments: Vec<String> = block_deltas(&events, 2)
        .iter()
        .map(|d| {
            assert_eq!(d["type"], "input_json_delta");
            d["partial_json"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(fragments[0], "", "the first fragment is empty");
    assert!(fragments.len() > 5);
    assert_eq!(fragments.concat(), tricky_input().to_string());
    assert!(
        fragments.iter().any(|f| (f.len() - f.trim_end_matches('\\').len()) % 2 == 1),
        "no fragment ends inside an escape sequence: {fragments:?}"
    );
    assert!(fragments.iter().any(|f| f.contains('ü')));
    assert_eq!(
        block_deltas(&events, 3),
        vec![json!({"type": "input_json_delta", "partial_json": ""})],
        "a tool without parameters streams a single empty fragment"
    );
    assert!(block_deltas(&events, 4).is_empty());

    let mut filled = expected;
    filled["model"] = json!("claude-mock-1");
    filled["usage"]["input_tokens"] = json!(body.to_string().len() / 4);
    assert_eq!(accumulate_anthropic(&events), filled);
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
    assert_eq!(mock.requests()[0].body["stream"], true);
}

#[test]
fn refusal_stream_carries_stop_details_in_message_delta() {
    let mock = MockModel::start();
    let Reply::Message(mut refusal) = message(json!([{"type": "text", "text": "I can't help with that."}]), "refusal")
    else {
        unreachable!()
    };
    refusal["stop_details"] = json!({"type": "refusal", "category": "cyber", "explanation": "Not allowed."});
    mock.push(Reply::Message(refusal.clone()));
    let body = stream_body(json!([{"role": "user", "content": "do something bad"}]));
    let response = exchange(&mock, "/v1/messages", GOOD_HEADERS, &body);
    let events = parse_sse(response.text());
    assert_eq!(event_json(&events[0])["message"]["stop_details"], Value::Null);
    let delta = event_json(&events[events.len() - 2]);
    assert_eq!(
        delta["delta"],
        json!({"stop_reason": "refusal", "stop_sequence": null, "stop_details": refusal["stop_details"]})
    );
    assert_eq!(delta["usage"], json!({"output_tokens": 10}));
    refusal["model"] = json!("claude-mock-1");
    refusal["usage"]["input_tokens"] = json!(body.to_string().len() / 4);
    assert_eq!(accumulate_anthropic(&events), refusal);
}

#[test]
fn scripted_sse_error_stall_and_split_bytes() {
    let mock = MockModel::start();
    let body = stream_body(json!([{"role": "user", "content": "hi"}]));

    // Scenario 10: an error event after message_start; the null model is filled at send time.
    mock.push(Reply::Sse(sse_error_after_start("overloaded_error", "Overloaded")));
    let response = exchange(&mock, "/v1/messages", GOOD_HEADERS, &body);
    assert_eq!(response.status, 200);
    let events = parse_sse(response.text());
    assert_eq!(events.len(), 2);
    let start = event_json(&events[0]);
    assert_eq!(start["message"]["model"], "claude-mock-1");
    assert_eq!(start["message"]["usage"]["input_tokens"], body.to_string().len() / 4);
    assert_eq!(events[1].0, "error");
    assert_eq!(
        event_json(&events[1]),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    );

    // A stall after the second event.
    let Reply::Message(mut pinned) = text_reply("Grüße aus Köln 😀, and some more text.") else { unreachable!() };
    pinned["model"] = json!("claude-mock-1");
    pinned["usage"]["input_tokens"] = json!(7);
    let chunks = sse_events(&pinned);
    let slow = stalled(chunks.clone(), 2, Duration::from_millis(300));
    assert_eq!(slow[2], Chunk::Sleep(Duration::from_millis(300)));
    assert_eq!(slow.len(), chunks.len() + 1);
    mock.push(Reply::Sse(slow));
    let started = Instant::now();
    let response = exchange(&mock, "/v1/messages", GOOD_HEADERS, &body);
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(accumulate_anthropic(&parse_sse(response.text())), pinned);

    // The same stream re-chunked into 3-byte pieces arrives byte-identical.
    let raw: Vec<u8> = chunks
        .iter()
        .flat_map(|chunk| match chunk {
            Chunk::Raw(text) => text.as_bytes().to_vec(),
            other => panic!("sse_events yields Raw chunks only, got {other:?}"),
        })
        .collect();
    let split = split_bytes(chunks);
    let pieces: Vec<Vec<u8>> = split
        .iter()
        .filter_map(|chunk| match chunk {
            Chunk::Bytes(bytes) => Some(bytes.clone()),
            Chunk::Sleep(pause) => {
                assert_eq!(*pause, Duration::from_millis(1));
                None
            }
            other => panic!("unexpected chunk {other:?}"),
        })
        .collect();
    assert!(pieces.iter().all(|p| !p.is_empty() && p.len() <= 3));
    assert_eq!(pieces.concat(), raw);
    assert!(pieces.iter().any(|p| std::str::from_utf8(p).is_err()), "no piece splits a UTF-8 character");
    mock.push(Reply::Sse(split));
    let response = exchange(&mock, "/v1/messages", GOOD_HEADERS, &body);
    assert_eq!(response.body, raw);

    assert_eq!(sse_event("ping", json!({})), Chunk::Raw("event: ping\ndata: {\"type\":\"ping\"}\n\n".into()));
    assert!(mock.violations().is_empty());
}

#[test]
fn truncated_streams_close_early() {
    let mock = MockModel::start();
    let Reply::Message(template) = text_reply("This answer never finishes.") else { unreachable!() };
    let cut = truncated(sse_events(&template), 3);
    assert_eq!(cut.len(), 4);
    assert_eq!(cut.last(), Some(&Chunk::Close));
    mock.push(Reply::Sse(cut));
    let started = Instant::now();
    let response =
        exchange(&mock, "/v1/messages", GOOD_HEADERS, &stream_body(json!([{"role": "user", "content": "hi"}])));
    assert!(started.elapsed() < Duration::from_secs(5));
    let names: Vec<String> = parse_sse(response.text()).into_iter().map(|(name, _)| name).collect();
    assert_eq!(names, ["message_start", "content_block_start", "ping"]);

    // Nothing after a Close is sent.
    mock.push(Reply::Sse(vec![sse_event("ping", json!({})), Chunk::Close, sse_event("message_stop", json!({}))]));
    let response =
        exchange(&mock, "/v1/messages", GOOD_HEADERS, &stream_body(json!([{"role": "user", "content": "hi"}])));
    assert_eq!(response.text(), "event: ping\ndata: {\"type\":\"ping\"}\n\n");

    // OpenAI: cut before [DONE].
    let Reply::Message(completion) = openai_text("partial answer") else { unreachable!() };
    mock.push(Reply::Sse(truncated(openai_sse_chunks(&completion, false), 2)));
    let response = openai_post(&mock, &openai_stream_body(json!([{"role": "user", "content": "hi"}])));
    let events = parse_sse(response.text());
    assert_eq!(events.len(), 2);
    assert!(events.iter().all(|(_, data)| data != "[DONE]"));
    assert_eq!(event_json(&events[0])["model"], "gpt-mock-1", "null model filled at send time");
    assert!(mock.violations().is_empty());
}

#[test]
fn error_statuses_are_json_even_for_streams_and_sse_needs_a_streaming_request() {
    let mock = MockModel::start();
    // This test sends invalid requests on purpose to check the mock's validation.
    mock.expect_violations();
    mock.push(overloaded());
    mock.push(rate_limited("1"));
    mock.push(rate_limited_ms(1500));
    mock.push(server_error_no_retry());
    mock.push(Reply::Sse(vec![sse_event("ping", json!({}))]));
    let stream = stream_body(json!([{"role": "user", "content": "hi"}]));

    let overloaded = exchange(&mock, "/v1/messages", GOOD_HEADERS, &stream);
    assert_eq!(overloaded.status, 529);
    assert_eq!(overloaded.header("content-type"), Some("application/json"));
    assert_eq!(overloaded.json()["error"], json!({"type": "overloaded_error", "message": "Overloaded"}));
    let limited = exchange(&mock, "/v1/messages", GOOD_HEADERS, &stream);
    assert_eq!(limited.status, 429);
    assert_eq!(limited.header("retry-after"), Some("1"));
    assert_eq!(limited.json()["error"]["type"], "rate_limit_error");
    let limited_ms = exchange(&mock, "/v1/messages", GOOD_HEADERS, &stream);
    assert_eq!(limited_ms.status, 429);
    assert_eq!(limited_ms.header("retry-after-ms"), Some("1500"));
    let no_retry = exchange(&mock, "/v1/messages", GOOD_HEADERS, &stream);
    assert_eq!(no_retry.status, 500);
    assert_eq!(no_retry.header("x-should-retry"), Some("false"));
    assert_eq!(no_retry.json()["error"]["type"], "api_error");
    assert!(mock.violations().is_empty(), "scripted errors are not violations");

    let not_streaming =
        exchange(&mock, "/v1/messages", GOOD_HEADERS, &body_with(json!([{"role": "user", "content": "hi"}])));
    assert_eq!(not_streaming.status, 400);
    let expected = "mock: SSE scripted but request is not streaming";
    assert_eq!(not_streaming.json()["error"]["message"], expected);
    assert_eq!(mock.violations(), vec![expected.to_string()]);

    let times = mock.request_times();
    assert_eq!(times.len(), mock.requests().len());
    assert_eq!(times.len(), 5);
    assert!(times.windows(2).all(|w| w[0] <= w[1]));
}

#[test]
fn openai_replies_have_the_real_shape() {
    let mock = MockModel::start();
    mock.push(openai_text("Hello there."));
    mock.push(openai_tools(&[("call_A", "read_file", json!({"path": "a.txt"}))]));
    mock.push(openai_quirk_stop_with_tool_calls(&[("call_B", "read_file", json!({"path": "b.txt"}))]));
    mock.push(openai_quirk_arguments_object(&[("call_C", "read_file", json!({"path": "c.txt"}))]));
    mock.push(openai_quirk_empty_id(&[("ignored", "read_file", json!({"path": "d.txt"}))]));
    let body = openai_body(json!([
        {"role": "system", "content": "Be brief."},
        {"role": "developer", "content": [{"type": "text", "text": "Really brief."}]},
        {"role": "user", "content": "hi"}
    ]));

    let text = openai_post(&mock, &body);
    assert_eq!(text.status, 200, "{}", text.text());
    assert_eq!(text.header("content-type"), Some("application/json"));
    assert!(text.header("x-request-id").is_some());
    let completion = text.json();
    assert!(completion["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(completion["object"], "chat.completion");
    assert!(completion["created"].as_u64().is_some_and(|t| t > 1_600_000_000));
    assert_eq!(completion["model"], "gpt-mock-1");
    assert_eq!(
        completion["choices"],
        json!([{"index": 0, "message": {"role": "assistant", "content": "Hello there.", "refusal": null},
                "finish_reason": "stop", "logprobs": null}])
    );
    let prompt = body.to_string().len() / 4;
    assert_eq!(
        completion["usage"],
        json!({"prompt_tokens": prompt, "completion_tokens": 10, "total_tokens": prompt + 10})
    );

    let tools = openai_post(&mock, &body).json();
    assert_eq!(tools["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(
        tools["choices"][0]["message"],
        json!({"role": "assistant", "content": null, "refusal": null, "tool_calls": [
            {"id": "call_A", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a.txt\"}"}}
        ]})
    );
    let stop = openai_post(&mock, &body).json();
    assert_eq!(stop["choices"][0]["finish_reason"], "stop");
    assert_eq!(stop["choices"][0]["message"]["tool_calls"][0]["id"], "call_B");
    let object = openai_post(&mock, &body).json();
    assert_eq!(object["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"], json!({"path": "c.txt"}));
    let empty_id = openai_post(&mock, &body).json();
    assert_eq!(empty_id["choices"][0]["message"]["tool_calls"][0]["id"], "");
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
    assert_eq!(mock.remaining(), 0);
}

#[test]
fn openai_stream_round_trips_with_and_without_include_usage() {
    let mock = MockModel::start();
    let scripted = openai_message(
        json!({"role": "assistant", "content": "Grüße! Reading both files 😀 now.", "refusal": null, "tool_calls": [
            {"id": "call_A", "type": "function", "function": {"name": "read_file", "arguments": tricky_input().to_string()}},
            {"id": "call_B", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}
        ]}),
        "tool_calls",
    );
    let Reply::Message(expected) = scripted.clone() else { unreachable!() };
    for include_usage in [true, false] {
        mock.push(scripted.clone());
        let mut body = openai_stream_body(json!([{"role": "user", "content": "read"}]));
        if include_usage {
            body["stream_options"] = json!({"include_usage": true});
        }
        let response = openai_post(&mock, &body);
        assert_eq!(response.status, 200, "{}", response.text());
        assert_eq!(response.header("content-type"), Some("text/event-stream"));
        assert_eq!(response.header("content-length"), None);
        let events = parse_sse(response.text());
        assert_eq!(events.last().unwrap().1, "[DONE]");
        let chunks: Vec<Value> = events[..events.len() - 1].iter().map(event_json).collect();
        assert_eq!(chunks[0]["choices"][0]["delta"], json!({"role": "assistant", "content": ""}));
        assert!(chunks.iter().all(|c| c["id"] == expected["id"] && c["model"] == "gpt-mock-1"));

        let fragments = tool_call_deltas(&events);
        assert_eq!(
            fragments[0],
            json!({"index": 0, "id": "call_A", "type": "function", "function": {"name": "read_file", "arguments": ""}})
        );
        assert!(fragments.iter().filter(|f| f.get("id").is_none()).all(|f| f["function"].get("name").is_none()
            && f["function"]["arguments"].as_str().unwrap().chars().count() <= 5));
        let last_choice = chunks.iter().rev().find(|c| !c["choices"].as_array().unwrap().is_empty()).unwrap();
        assert_eq!(last_choice["choices"][0]["delta"], json!({}));
        assert_eq!(last_choice["choices"][0]["finish_reason"], "tool_calls");
        if include_usage {
            let usage_chunk = chunks.last().unwrap();
            assert_eq!(usage_chunk["choices"], json!([]));
            assert!(
                chunks[..chunks.len() - 1]
                    .iter()
                    .all(|c| c.as_object().unwrap().contains_key("usage") && c["usage"].is_null())
            );
        } else {
            assert!(chunks.iter().all(|c| c.get("usage").is_none()));
            assert!(chunks.iter().all(|c| !c["choices"].as_array().unwrap().is_empty()));
        }

        let (rebuilt, done) = accumulate_openai(&events);
        assert!(done);
        assert_eq!(rebuilt["id"], expected["id"]);
        assert_eq!(rebuilt["model"], "gpt-mock-1");
        assert_eq!(rebuilt["choices"][0]["message"], expected["choices"][0]["message"]);
        assert_eq!(rebuilt["choices"][0]["finish_reason"], "tool_calls");
        let prompt = body.to_string().len() / 4;
        let usage = json!({"prompt_tokens": prompt, "completion_tokens": 30, "total_tokens": prompt + 30});
        assert_eq!(rebuilt["usage"], if include_usage { usage } else { Value::Null });
    }
    // A tool-only message starts with content null, as OpenAI streams it.
    let Reply::Message(tools_only) = openai_tools(&[("call_X", "read_file", json!({}))]) else { unreachable!() };
    let Chunk::Raw(first) = &openai_sse_chunks(&tools_only, false)[0] else { unreachable!() };
    assert_eq!(event_json(&parse_sse(first)[0])["choices"][0]["delta"], json!({"role": "assistant", "content": null}));
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
}

#[test]
fn openai_quirk_streams_and_mid_stream_error() {
    let mock = MockModel::start();
    let calls = [("call_A", "read_file", json!({"path": "a.txt"})), ("call_B", "read_file", json!({"path": "b.txt"}))];
    mock.push(openai_quirk_ollama_index0(&calls));
    mock.push(openai_quirk_name_repeated(&calls));
    mock.push(openai_quirk_stop_with_tool_calls(&calls));
    mock.push(Reply::Sse(openai_stream_error("The server had an error while processing your request.")));
    let body = openai_stream_body(json!([{"role": "user", "content": "read a and b"}]));

    // Scenario 16: index 0 for every call, each whole call in one delta.
    let events = parse_sse(openai_post(&mock, &body).text());
    assert_eq!(events.last().unwrap().1, "[DONE]");
    assert!(events[..events.len() - 1].iter().all(|e| event_json(e)["model"] == "gpt-mock-1"));
    assert_eq!(
        tool_call_deltas(&events),
        vec![
            json!({"index": 0, "id": "call_A", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a.txt\"}"}}),
            json!({"index": 0, "id": "call_B", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"b.txt\"}"}}),
        ]
    );

    // MiniMax: id and name repeated in every fragment.
    let events = parse_sse(openai_post(&mock, &body).text());
    let fragments = tool_call_deltas(&events);
    assert!(fragments.len() > 4);
    for (index, (id, name, input)) in calls.iter().enumerate() {
        let mine: Vec<&Value> = fragments.iter().filter(|f| f["index"] == index).collect();
        assert!(mine.len() > 2);
        assert!(mine.iter().all(|f| f["id"] == *id && f["function"]["name"] == *name));
        let arguments: String = mine.iter().map(|f| f["function"]["arguments"].as_str().unwrap()).collect();
        assert_eq!(arguments, input.to_string());
    }

    // Scenario 15 streamed: finish_reason stop with tool calls.
    let (rebuilt, done) = accumulate_openai(&parse_sse(openai_post(&mock, &body).text()));
    assert!(done);
    assert_eq!(rebuilt["choices"][0]["finish_reason"], "stop");
    assert_eq!(rebuilt["choices"][0]["message"]["tool_calls"].as_array().unwrap().len(), 2);

    // An error object mid-stream, no [DONE].
    let events = parse_sse(openai_post(&mock, &body).text());
    assert_eq!(events.len(), 2);
    assert_eq!(event_json(&events[0])["choices"][0]["delta"], json!({"role": "assistant", "content": ""}));
    assert_eq!(
        event_json(&events[1]),
        json!({"error": {"message": "The server had an error while processing your request.", "type": "server_error"}})
    );
    assert!(mock.violations().is_empty());
}

/// An OpenAI assistant message calling `read_file` once per id.
fn assistant(ids: &[&str]) -> Value {
    let call = |id: &str| json!({"id": id, "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a\"}"}});
    json!({"role": "assistant", "content": null, "tool_calls": ids.iter().map(|id| call(id)).collect::<Vec<_>>()})
}

/// The OpenAI tool message answering call `id`.
fn tool(id: &str) -> Value {
    json!({"role": "tool", "tool_call_id": id, "content": "aaa"})
}

/// An OpenAI user message.
fn user(text: &str) -> Value {
    json!({"role": "user", "content": text})
}

#[test]
fn openai_validation_rejects_like_the_api() {
    let mock = MockModel::start();
    // This test sends invalid requests on purpose to check the mock's validation.
    mock.expect_violations();
    const B2: &str = "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ";
    const ORPHAN: &str =
        "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.";

    assert_openai_400(
        &mock,
        &openai_body(json!([user("go"), assistant(&["call_A", "call_B"]), user("well?")])),
        &format!("{B2}call_A, call_B"),
    );
    assert_openai_400(
        &mock,
        &openai_body(json!([
            user("go"),
            assistant(&["call_A", "call_B"]),
            tool("call_A"),
            user("well?"),
            tool("call_B")
        ])),
        &format!("{B2}call_B"),
    );
    assert_openai_400(&mock, &openai_body(json!([user("go"), assistant(&["call_A"])])), &format!("{B2}call_A"));
    assert_openai_400(&mock, &openai_body(json!([user("go"), tool("call_Z")])), ORPHAN);
    assert_openai_400(
        &mock,
        &openai_body(json!([user("go"), assistant(&["call_A"]), tool("call_A"), tool("call_Z")])),
        ORPHAN,
    );
    let mut object_arguments = assistant(&["call_A"]);
    object_arguments["tool_calls"][0]["function"]["arguments"] = json!({"path": "a"});
    assert_openai_400(
        &mock,
        &openai_body(json!([user("go"), object_arguments, tool("call_A")])),
        "Invalid type for 'messages[1].tool_calls[0].function.arguments': expected a string, but got an object instead.",
    );
    let mut empty_id = assistant(&["call_A"]);
    empty_id["tool_calls"][0]["id"] = json!("");
    assert_openai_400(
        &mock,
        &openai_body(json!([user("go"), empty_id, tool("")])),
        "Invalid 'messages[1].tool_calls[0].id': empty string. Expected a string with minimum length 1, but got an empty string instead.",
    );
    let mut with_options = openai_body(json!([user("go")]));
    with_options["stream_options"] = json!({"include_usage": true});
    let stream_options = "The 'stream_options' parameter is only allowed when 'stream' is enabled.";
    assert_openai_400(&mock, &with_options, stream_options);
    with_options["stream"] = json!(false);
    assert_openai_400(&mock, &with_options, stream_options);
    assert_openai_400(&mock, &json!({"model": "m"}), "Missing required parameter: 'messages'.");
    assert_openai_400(
        &mock,
        &json!({"model": "m", "messages": []}),
        "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.",
    );
    assert_openai_400(&mock, &json!({"messages": [user("go")]}), "you must provide a model parameter");
    assert_openai_400(
        &mock,
        &json!({"model": "m", "messages": [{"role": "robot", "content": "beep"}]}),
        "Invalid value: 'robot'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.",
    );
    let mut bad_name = openai_body(json!([user("go")]));
    bad_name["tools"][0]["function"]["name"] = json!("read file");
    assert_openai_400(
        &mock,
        &bad_name,
        "Invalid 'tools[0].function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]{1,64}$'.",
    );
    let mut zero = openai_body(json!([user("go")]));
    zero["max_completion_tokens"] = json!(0);
    assert_openai_400(
        &mock,
        &zero,
        "Invalid 'max_completion_tokens': integer below minimum value. Expected a value >= 1, but got 0 instead.",
    );
    let missing = openai_post(&mock, &openai_body(json!([user("go"), assistant(&["call_A"])])));
    assert_eq!(missing.json()["error"]["param"], "messages.[2].role");
    assert_eq!(mock.remaining(), 0);
}

#[test]
fn openai_valid_conversations_pass_and_sse_needs_a_streaming_request() {
    let mock = MockModel::start();
    // The last request is refused on purpose (SSE scripted for a plain request).
    mock.expect_violations();
    // Valid conversations pass: answered calls (in any order), both token caps, streams.
    mock.push(openai_text("ok"));
    mock.push(openai_text("streamed"));
    mock.push(Reply::Sse(vec![sse_event("ping", json!({}))]));
    let violations = mock.violations().len();
    let mut full = openai_body(json!([
        {"role": "system", "content": "sys"},
        user("go"),
        assistant(&["call_A", "call_B"]),
        tool("call_B"),
        {"role": "tool", "tool_call_id": "call_A", "content": [{"type": "text", "text": "aaa"}]},
        {"role": "assistant", "content": "Done."},
        user("thanks")
    ]));
    full["max_tokens"] = json!(100);
    full["max_completion_tokens"] = json!(100);
    full["tool_choice"] = json!("auto");
    full["parallel_tool_calls"] = json!(true);
    let response = openai_post(&mock, &full);
    assert_eq!(response.status, 200, "{}", response.text());
    full["stream"] = json!(true);
    full["stream_options"] = json!({"include_usage": false});
    let response = openai_post(&mock, &full);
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(accumulate_openai(&parse_sse(response.text())).0["choices"][0]["message"]["content"], "streamed");
    assert_eq!(mock.violations().len(), violations, "{:?}", mock.violations());

    // SSE scripted for a non-streaming request: 400 in the OpenAI envelope.
    let response = openai_post(&mock, &openai_body(json!([user("go")])));
    assert_eq!(response.status, 400);
    assert_eq!(response.json()["error"]["message"], "mock: SSE scripted but request is not streaming");
}

#[test]
fn openai_errors_use_the_openai_envelope() {
    let mock = MockModel::start();
    mock.push(openai_insufficient_quota());
    mock.push(rate_limited("2"));
    mock.push(overloaded());
    let body = openai_stream_body(json!([{"role": "user", "content": "hi"}]));
    let quota = openai_post(&mock, &body);
    assert_eq!(quota.status, 429);
    let error = &quota.json()["error"];
    assert_eq!(error["type"], "insufficient_quota");
    assert_eq!(error["code"], "insufficient_quota");
    assert!(error["message"].as_str().unwrap().starts_with("You exceeded your current quota"));
    let limited = openai_post(&mock, &body);
    assert_eq!(limited.status, 429);
    assert_eq!(limited.header("retry-after"), Some("2"));
    let error = limited.json();
    assert_eq!(error["error"]["code"], "rate_limit_exceeded");
    assert_eq!(error["error"]["param"], Value::Null);
    assert!(error.get("type").is_none(), "not the Anthropic envelope: {error}");
    let overloaded = openai_post(&mock, &body);
    assert_eq!(overloaded.status, 529);
    assert_eq!(overloaded.json()["error"]["type"], "overloaded_error");
    let none_left = openai_post(&mock, &body);
    assert_eq!(none_left.status, 500);
    assert_eq!(
        none_left.json(),
        json!({"error": {"message": "mock: no scripted reply left", "type": "server_error", "param": null, "code": null}})
    );
    // A message of the other API is a scripting error.
    mock.push(text_reply("anthropic"));
    let wrong = openai_post(&mock, &openai_body(json!([{"role": "user", "content": "hi"}])));
    assert_eq!(wrong.status, 500);
    assert!(mock.violations().is_empty());
}

#[test]
fn openai_requires_bearer_auth_unless_optional() {
    assert_eq!(OPENAI_HEADERS[0].1, format!("Bearer {API_KEY}"));
    let mock = MockModel::start();
    // This test sends invalid requests on purpose to check the mock's validation.
    mock.expect_violations();
    mock.push(openai_text("ok"));
    let body = openai_body(json!([{"role": "user", "content": "hi"}]));
    let expected = json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error",
        "param": null, "code": "invalid_api_key"}});
    for headers in [
        &[("content-type", "application/json")][..],
        &[("authorization", "Bearer nope")][..],
        &[("x-api-key", API_KEY)][..],
        &[("authorization", API_KEY)][..],
    ] {
        let response = exchange(&mock, OPENAI_PATH, headers, &body);
        assert_eq!(response.status, 401, "{headers:?}");
        assert_eq!(response.json(), expected);
    }
    assert_eq!(mock.remaining(), 1, "rejected requests consume no reply");
    assert_eq!(mock.violations().len(), 4);
    let lowercase = exchange(&mock, OPENAI_PATH, &[("Authorization", "bearer test-key-0123")], &body);
    assert_eq!(lowercase.status, 200);

    mock.set_openai_auth_optional(true);
    mock.push(openai_text("no key needed"));
    let ollama = exchange(&mock, OPENAI_PATH, &[("content-type", "application/json")], &body);
    assert_eq!(ollama.status, 200, "{}", ollama.text());
    assert_eq!(ollama.json()["choices"][0]["message"]["content"], "no key needed");
}

#[test]
fn hang_never_answers_until_the_client_or_the_mock_goes_away() {
    let mock = MockModel::start();
    mock.push(Reply::Hang);
    mock.push(text_reply("after the hang"));
    let body = body_with(json!([{"role": "user", "content": "hi"}]));
    let raw = request_bytes("POST", "/v1/messages", GOOD_HEADERS, body.to_string().as_bytes());

    let mut client = connect(&mock);
    client.write_all(&raw).unwrap();
    client.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 64];
    let err = client.read(&mut buf).expect_err("a hung request gets no answer");
    assert!(matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut), "{err}");
    assert!(started.elapsed() >= Duration::from_millis(250));
    assert_eq!(mock.requests().len(), 1, "recorded before answering");
    drop(client);

    let next = post(&mock, &body);
    assert_eq!(next.status, 200);
    assert_eq!(next.body["content"][0]["text"], "after the hang");

    // Dropping the mock ends a hanging connection.
    mock.push(Reply::Hang);
    let mut client = connect(&mock);
    client.write_all(&raw).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while mock.requests().len() < 3 {
        assert!(Instant::now() < deadline, "the hanging request never arrived");
        std::thread::sleep(Duration::from_millis(10));
    }
    let started = Instant::now();
    drop(mock);
    client.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    match client.read(&mut buf) {
        Ok(0) => {}
        Ok(n) => panic!("a hung request got {n} bytes"),
        Err(e) => assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{e}"),
    }
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[test]
fn file_uri_percent_encodes_like_vscode() {
    assert_eq!(common::file_uri(Path::new("/tmp/My Project/ü.rs")), "file:///tmp/My%20Project/%C3%BC.rs");
    assert_eq!(common::file_uri(Path::new("/a/b#c?(d)+e@f.rs")), "file:///a/b%23c%3F%28d%29%2Be%40f.rs");
    let path = Path::new("/tmp/My Project/ü 😀.rs");
    assert_eq!(common::uri_to_path(&common::file_uri(path)), path);
}

#[test]
fn apply_text_edits_uses_utf16_positions() {
    let text = "a😀b\r\nsecond line\nthird";
    let edits = [
        json!({"range": {"start": {"line": 0, "character": 3}, "end": {"line": 0, "character": 4}}, "newText": "B"}),
        json!({"range": {"start": {"line": 1, "character": 0}, "end": {"line": 1, "character": 6}}, "newText": "2nd"}),
        json!({"range": {"start": {"line": 2, "character": 99}, "end": {"line": 2, "character": 99}}, "newText": "!"}),
        json!({"range": {"start": {"line": 1, "character": 0}, "end": {"line": 1, "character": 0}}, "newText": ">"}),
    ];
    assert_eq!(common::apply_text_edits(text, &edits), "a😀B\r\n>2nd line\nthird!");
}

// ---------------------------------------------------------------------------------------------
// Usage that follows the request: prompt caching, the context limit, the economy session
// ---------------------------------------------------------------------------------------------

const EPHEMERAL: &str = "ephemeral";

/// An Anthropic body with a ~2,000-token system prompt carrying a breakpoint and `messages`.
fn cached_body(system: &str, messages: Value) -> Value {
    let mut body = body_with(messages);
    body["system"] = json!([{"type": "text", "text": system, "cache_control": {"type": EPHEMERAL}}]);
    body
}

fn user_text(text: &str, breakpoint: bool) -> Value {
    let mut block = json!({"type": "text", "text": text});
    if breakpoint {
        block["cache_control"] = json!({"type": EPHEMERAL});
    }
    json!({"role": "user", "content": [block]})
}

/// `(input, cache write, cache read)` of an Anthropic usage object.
fn cache_fields(usage: &Value) -> (u64, u64, u64) {
    let n = |f: &str| usage[f].as_u64().unwrap_or_else(|| panic!("usage.{f} in {usage}"));
    (n("input_tokens"), n("cache_creation_input_tokens"), n("cache_read_input_tokens"))
}

#[test]
fn cached_usage_reads_and_writes_at_the_breakpoints_and_follows_the_bytes() {
    let mock = MockModel::start();
    mock.set_usage_model(mock_model::UsageModel::cached());
    mock.push_all((0..5).map(|_| text_reply("ok")));
    let system = "S".repeat(8_000);
    let first = user_text(&"U".repeat(8_000), true);

    // 1: nothing cached yet; both breakpoints are written, the last block is the last one.
    let r1 = post(&mock, &cached_body(&system, json!([first])));
    assert_eq!(r1.status, 200, "{}", r1.body);
    let (input1, write1, read1) = cache_fields(&r1.body["usage"]);
    assert_eq!((input1, read1), (0, 0));
    assert!(write1 > 4_000, "{write1}");

    // 2: the next turn moves the rolling breakpoint to the new last block; the earlier prefix
    // (same bytes, its marker gone) is found by the lookback and read, the new part written.
    let second = json!([
        user_text(&"U".repeat(8_000), false),
        {"role": "assistant", "content": [{"type": "text", "text": "A".repeat(4_000)}]},
        user_text(&"V".repeat(4_000), true)
    ]);
    let r2 = post(&mock, &cached_body(&system, second.clone()));
    let (input2, write2, read2) = cache_fields(&r2.body["usage"]);
    assert_eq!(read2, write1);
    assert_eq!(input2, 0);
    assert!((1_900..=2_100).contains(&write2), "{write2}");

    // 3: the same request again (streamed): all of it is read, nothing written, and the
    // figures are in `message_start`.
    let mut streamed = cached_body(&system, second.clone());
    streamed["stream"] = json!(true);
    let r3 = exchange(&mock, "/v1/messages", GOOD_HEADERS, &streamed);
    assert_eq!(r3.status, 200, "{}", r3.text());
    let events = parse_sse(r3.text());
    let start = event_json(&events[0]);
    assert_eq!(cache_fields(&start["message"]["usage"]), (0, 0, read2 + write2));

    // 4: one byte changed in the system prompt: no prefix matches, everything is written again.
    let changed = format!("T{}", &system[1..]);
    let r4 = post(&mock, &cached_body(&changed, second));
    let (input4, write4, read4) = cache_fields(&r4.body["usage"]);
    assert_eq!((input4, read4), (0, 0));
    assert_eq!(write4, read2 + write2);

    // 5: no breakpoint at all: plain input, the same total.
    let mut plain = body_with(json!([user_text(&"U".repeat(8_000), false)]));
    plain["system"] = json!(system);
    let r5 = post(&mock, &plain);
    let (input5, write5, read5) = cache_fields(&r5.body["usage"]);
    assert_eq!((write5, read5), (0, 0));
    assert!(input5.abs_diff(write1) <= 8, "{input5} vs {write1}");

    let stats = mock.usage_stats();
    assert_eq!(stats.requests, 5);
    assert_eq!(stats.cache_read, read2 + read2 + write2);
    assert_eq!(stats.cache_write, write1 + write2 + write4);
    // Only request 4 invalidated what the one before it left in the cache, and rewrote it.
    assert_eq!(stats.rebuilds, 1);
    assert_eq!(stats.input, input5);
    assert_eq!(stats.naive_input, write1 + 3 * (read2 + write2) + input5);
    assert_eq!(stats.largest_request, read2 + write2);
    let billed = stats.input as f64 + 1.25 * stats.cache_write as f64 + 0.1 * stats.cache_read as f64;
    assert_eq!(stats.billed_input(), billed);
}

#[test]
fn prompts_below_the_minimum_are_silently_not_cached() {
    let mock = MockModel::start();
    mock.set_usage_model(mock_model::UsageModel::cached());
    mock.push_all((0..4).map(|_| text_reply("ok")));
    // ~600 tokens with a breakpoint, twice: under 1024, never written nor read.
    let small = cached_body(&"s".repeat(2_000), json!([user_text("hi", true)]));
    for _ in 0..2 {
        let response = post(&mock, &small);
        assert_eq!(response.status, 200, "{}", response.body);
        let (input, write, read) = cache_fields(&response.body["usage"]);
        assert_eq!((write, read), (0, 0));
        assert!(input > 500, "{input}");
    }
    // The minimum is configurable: at 100 tokens the same prompt is written, then read.
    mock.set_usage_model(mock_model::UsageModel::Cached { min_cache_tokens: 100 });
    let (_, write, read) = cache_fields(&post(&mock, &small).body["usage"]);
    assert!(write > 500 && read == 0, "{write} {read}");
    let (_, write_again, read_again) = cache_fields(&post(&mock, &small).body["usage"]);
    assert_eq!((write_again, read_again), (0, write));
    assert_eq!(mock.usage_stats().rebuilds, 0, "a first write is not a rebuild");
}

#[test]
fn naive_usage_stays_the_default() {
    let mock = MockModel::start();
    mock.push(text_reply("ok"));
    let body = cached_body(&"S".repeat(8_000), json!([user_text("hi", true)]));
    let response = post(&mock, &body);
    let (input, write, read) = cache_fields(&response.body["usage"]);
    assert_eq!((write, read), (0, 0));
    assert_eq!(input, (body.to_string().len() / 4) as u64);
    let stats = mock.usage_stats();
    assert_eq!((stats.requests, stats.naive_input, stats.input, stats.largest_request), (1, input, input, input));
}

#[test]
fn more_than_four_breakpoints_or_one_on_thinking_is_400() {
    let mock = MockModel::start();
    mock.expect_violations();
    mock.push(text_reply("ok"));
    let marked = |text: &str| json!({"type": "text", "text": text, "cache_control": {"type": EPHEMERAL}});
    // Four are fine (system + three message blocks).
    let four = cached_body("sys", json!([{"role": "user", "content": [marked("a"), marked("b"), marked("c")]}]));
    assert_eq!(post(&mock, &four).status, 200);
    // A fifth on a tool definition, or a top-level one, is refused.
    let mut on_tool = four.clone();
    on_tool["tools"][0]["cache_control"] = json!({"type": EPHEMERAL});
    assert_400(&mock, &on_tool, "A maximum of 4 blocks with cache_control may be provided. Found 5.");
    let mut top_level = four.clone();
    top_level["cache_control"] = json!({"type": EPHEMERAL});
    assert_400(&mock, &top_level, "A maximum of 4 blocks with cache_control may be provided. Found 5.");
    let six = cached_body(
        "sys",
        json!([{"role": "user", "content": [marked("a"), marked("b"), marked("c"), marked("d"), marked("e")]}]),
    );
    assert_400(&mock, &six, "A maximum of 4 blocks with cache_control may be provided. Found 6.");
    // Thinking blocks cannot carry one.
    let thinking = body_with(json!([
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "sig", "cache_control": {"type": EPHEMERAL}},
            {"type": "text", "text": "hello"}
        ]},
        {"role": "user", "content": "go on"}
    ]));
    assert_400(&mock, &thinking, "messages.1.content.0.thinking.cache_control: Extra inputs are not permitted");
    assert_eq!(mock.violations().len(), 4);
}

#[test]
fn a_prompt_over_the_context_limit_gets_the_real_error_in_both_formats() {
    let mock = MockModel::start();
    mock.set_context_limit(1_000);
    mock.push_all([text_reply("ok"), openai_text("ok")]);

    let long = body_with(json!([{"role": "user", "content": "x".repeat(8_000)}]));
    let tokens = (long.to_string().len() / 4) as u64;
    let response = post(&mock, &long);
    assert_eq!(response.status, 400);
    assert_eq!(response.body["type"], "error");
    assert_eq!(response.body["error"]["type"], "invalid_request_error");
    assert_eq!(response.error_message(), format!("prompt is too long: {tokens} tokens > 1000 maximum"));

    let long = openai_body(json!([{"role": "user", "content": "x".repeat(8_000)}]));
    let tokens = (long.to_string().len() / 4) as u64;
    let response = openai_post(&mock, &long);
    assert_eq!(response.status, 400);
    assert_eq!(
        response.json(),
        json!({"error": {
            "message": format!("This model's maximum context length is 1000 tokens. However, your messages resulted in {tokens} tokens. Please reduce the length of the messages."),
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded"
        }})
    );

    // Not violations, no reply consumed; shorter prompts are answered.
    assert!(mock.violations().is_empty());
    assert_eq!(mock.remaining(), 2);
    assert_eq!(post(&mock, &body_with(json!([{"role": "user", "content": "short"}]))).status, 200);
    assert_eq!(openai_post(&mock, &openai_body(json!([{"role": "user", "content": "short"}]))).status, 200);
    let stats = mock.usage_stats();
    assert_eq!((stats.too_long, stats.requests), (2, 2));
    assert!(stats.largest_request > 2_000);

    // With the cached model the limit applies to the canonical count.
    mock.set_usage_model(mock_model::UsageModel::cached());
    mock.push(text_reply("ok"));
    let response = post(&mock, &body_with(json!([{"role": "user", "content": "y".repeat(4_200)}])));
    assert_eq!(response.status, 400);
    assert!(response.error_message().starts_with("prompt is too long: 10"), "{}", response.error_message());
}

#[test]
fn openai_reports_prefix_cached_tokens_in_json_and_in_the_final_streamed_chunk() {
    let mock = MockModel::start();
    mock.set_usage_model(mock_model::UsageModel::cached());
    mock.push_all((0..3).map(|_| openai_text("ok")));
    let system = json!({"role": "system", "content": "S".repeat(8_000)});
    let user = json!({"role": "user", "content": "U".repeat(2_000)});

    let first = openai_post(&mock, &openai_body(json!([system, user]))).json();
    let total1 = first["usage"]["prompt_tokens"].as_u64().unwrap();
    assert_eq!(first["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    assert_eq!(first["usage"]["total_tokens"], total1 + first["usage"]["completion_tokens"].as_u64().unwrap());

    // The next turn extends the first prompt: its longest 128-token step is cached.
    let longer =
        json!([system, user, {"role": "assistant", "content": "A".repeat(1_000)}, {"role": "user", "content": "more"}]);
    let second = openai_post(&mock, &openai_body(longer.clone())).json();
    let total2 = second["usage"]["prompt_tokens"].as_u64().unwrap();
    let step = |total: u64| 1024 + (total - 1024) / 128 * 128;
    assert!(total2 > total1);
    assert_eq!(second["usage"]["prompt_tokens_details"]["cached_tokens"], step(total1));

    // The same again, streamed with include_usage: the final chunk carries it.
    let mut streamed = openai_stream_body(longer);
    streamed["stream_options"] = json!({"include_usage": true});
    let response = openai_post(&mock, &streamed);
    let events = parse_sse(response.text());
    let last = event_json(&events[events.len() - 2]);
    assert_eq!(last["choices"], json!([]));
    assert_eq!(last["usage"]["prompt_tokens"], total2);
    assert_eq!(last["usage"]["prompt_tokens_details"]["cached_tokens"], step(total2));

    let stats = mock.usage_stats();
    assert_eq!(stats.cache_read, step(total1) + step(total2));
    assert_eq!((stats.cache_write, stats.rebuilds), (0, 0));
    assert_eq!(stats.naive_input, total1 + 2 * total2);
}

#[test]
fn the_economy_session_has_thirty_replies_with_unique_ids() {
    let files = mock_model::economy_files();
    assert_eq!(files.len(), mock_model::ECONOMY_READS + 1);
    let modules = &files[..mock_model::ECONOMY_READS];
    assert!(modules.iter().all(|(_, text)| (20_000..21_000).contains(&text.len())));
    let paths: std::collections::HashSet<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(paths.len(), files.len());
    let (target, text) = files.last().unwrap();
    assert_eq!(target, mock_model::ECONOMY_TARGET);
    assert_eq!(text.matches(mock_model::ECONOMY_OLD_TEXT).count(), 1);
    assert!(!mock_model::economy_fixed(text));
    assert!(mock_model::economy_fixed(&text.replace(mock_model::ECONOMY_OLD_TEXT, mock_model::ECONOMY_NEW_TEXT)));

    let mut ids = std::collections::HashSet::new();
    let sessions = [mock_model::economy_replies(), mock_model::economy_replies()];
    for replies in &sessions {
        assert_eq!(replies.len(), 30);
        let bodies: Vec<&Value> = replies
            .iter()
            .map(|r| match r {
                Reply::Message(body) => body,
                other => panic!("{other:?}"),
            })
            .collect();
        for (i, body) in bodies[..mock_model::ECONOMY_READS].iter().enumerate() {
            assert_eq!(body["stop_reason"], "tool_use");
            let call = &body["content"][1];
            assert_eq!(call["name"], "read_file");
            assert_eq!(call["input"]["path"], mock_model::economy_module_path(i));
            assert!(ids.insert(call["id"].as_str().unwrap().to_string()));
        }
        let edit = &bodies[mock_model::ECONOMY_READS]["content"][1];
        assert_eq!(edit["name"], "edit_file");
        assert_eq!(edit["input"]["path"], mock_model::ECONOMY_TARGET);
        assert!(ids.insert(edit["id"].as_str().unwrap().to_string()));
        assert_eq!(bodies[29]["stop_reason"], "end_turn");
        assert_eq!(bodies[29]["content"][0]["text"], mock_model::ECONOMY_SUMMARY);
    }
}

#[test]
fn the_summary_reply_answers_requests_without_tools_and_leaves_the_script() {
    let mock = MockModel::start();
    mock.set_summary_reply("Read three files; nothing changed yet.");
    mock.push_all([tool_reply(&[("toolu_s1", "read_file", json!({"path": "a.py"}))]), openai_text("scripted")]);
    let tool = json!({"name": "read_file", "description": "d", "input_schema": {"type": "object"}});
    let mut body = body_with(json!([{"role": "user", "content": "summarise"}]));
    body["tools"] = json!([tool]);
    body["tool_choice"] = json!({"type": "none"});
    let response = post(&mock, &body);
    assert_eq!(response.status, 200, "{}", response.body);
    assert_eq!(response.body["content"][0]["text"], "Read three files; nothing changed yet.");
    // With tools allowed, the script answers.
    body.as_object_mut().unwrap().remove("tool_choice");
    assert_eq!(post(&mock, &body).body["content"][1]["type"], "tool_use");
    // OpenAI: `tool_choice: "none"`.
    let mut body = openai_body(json!([{"role": "user", "content": "summarise"}]));
    body["tools"] = json!([{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]);
    body["tool_choice"] = json!("none");
    let response = openai_post(&mock, &body);
    assert_eq!(response.json()["choices"][0]["message"]["content"], "Read three files; nothing changed yet.");
    assert_eq!(mock.remaining(), 1);
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
}

#[test]
fn extended_thinking_is_refused_as_the_real_api_refuses_it() {
    let mock = MockModel::start();
    // This test sends invalid requests on purpose to check the mock's validation.
    mock.expect_violations();
    let considerations = "Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#important-considerations-when-using-extended-thinking";
    let hi = json!([{"role": "user", "content": "hi"}]);
    let thinking = |messages: Value, budget: u64, max_tokens: u64| {
        let mut body = body_with(messages);
        body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
        body["max_tokens"] = json!(max_tokens);
        body
    };
    let with = |mut body: Value, field: &str, value: Value| {
        body[field] = value;
        body
    };

    // The budget: at least 1024, and under max_tokens.
    assert_400(
        &mock,
        &thinking(hi.clone(), 1000, 4096),
        "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024",
    );
    let under = "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size";
    assert_400(&mock, &thinking(hi.clone(), 2048, 2048), under);
    assert_400(&mock, &thinking(hi.clone(), 24_576, 8192), under);
    // A forced tool choice, and sampling changes.
    let good = thinking(hi.clone(), 2048, 4096);
    for choice in [json!({"type": "any"}), json!({"type": "tool", "name": "read_file"})] {
        assert_400(
            &mock,
            &with(good.clone(), "tool_choice", choice),
            "Thinking may not be enabled when tool_choice forces tool use.",
        );
    }
    assert_400(
        &mock,
        &with(good.clone(), "temperature", json!(0.2)),
        &format!("`temperature` may only be set to 1 when thinking is enabled. {considerations}"),
    );
    assert_400(
        &mock,
        &with(good.clone(), "top_k", json!(5)),
        &format!("`top_k` must be unset when thinking is enabled. {considerations}"),
    );
    assert_400(
        &mock,
        &with(good.clone(), "top_p", json!(0.5)),
        &format!("`top_p` must be greater than or equal to 0.95 or unset when thinking is enabled. {considerations}"),
    );
    let refused = mock.violations().len();

    // What thinking allows: `auto` and `none` (a summary request), the default sampling.
    for body in [
        good.clone(),
        with(good.clone(), "tool_choice", json!({"type": "auto"})),
        with(good.clone(), "tool_choice", json!({"type": "none"})),
        with(good.clone(), "temperature", json!(1)),
        with(good.clone(), "top_p", json!(0.95)),
        with(body_with(hi.clone()), "thinking", json!({"type": "disabled"})),
        // Without thinking, sampling and forced choices are fine.
        with(with(body_with(hi.clone()), "tool_choice", json!({"type": "any"})), "temperature", json!(0.2)),
    ] {
        mock.push(text_reply("ok"));
        let response = post(&mock, &body);
        assert_eq!(response.status, 200, "{body}: {}", response.body);
    }
    assert_eq!(mock.violations().len(), refused, "{:#?}", mock.violations());
}

#[test]
fn with_thinking_a_tool_result_turn_must_start_with_its_thinking_block_as_the_real_api_requires() {
    let mock = MockModel::start();
    // This test sends invalid requests on purpose to check the mock's validation.
    mock.expect_violations();
    let thinking = |messages: Value, budget: u64, max_tokens: u64| {
        let mut body = body_with(messages);
        body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
        body["max_tokens"] = json!(max_tokens);
        body
    };

    // A tool result after the final assistant turn: that turn must start with its thinking.
    let result =
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_A", "content": "x"}]});
    let call = json!({"type": "tool_use", "id": "toolu_A", "name": "read_file", "input": {"path": "a"}});
    let signed = json!({"type": "thinking", "thinking": "Read a first.", "signature": "EqQBCkgIAR=="});
    let turn = |content: Value| json!([{"role": "user", "content": "hi"}, {"role": "assistant", "content": content}, result.clone()]);
    let dropped = |found: &str| {
        format!(
            "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{found}`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
        )
    };
    assert_400(&mock, &thinking(turn(json!([call.clone()])), 2048, 4096), &dropped("tool_use"));
    let text = json!({"type": "text", "text": "Let me look."});
    assert_400(&mock, &thinking(turn(json!([text.clone(), call.clone()])), 2048, 4096), &dropped("text"));
    // Two exchanges into the turn, its first message is still the one that must think.
    let long_turn = |first: Value, later: Value| {
        json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [first, call.clone()]},
            result.clone(),
            {"role": "assistant", "content": [later, {"type": "tool_use", "id": "toolu_B", "name": "read_file", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_B", "content": "y"}]}
        ])
    };
    assert_400(&mock, &thinking(long_turn(text.clone(), signed.clone()), 2048, 4096), &dropped("text"));
    // The same on the counting endpoint, which has no max_tokens to compare the budget with.
    let mut count = thinking(turn(json!([call.clone()])), 2048, 1);
    count.as_object_mut().unwrap().remove("max_tokens");
    let counted = post_with(&mock, "/v1/messages/count_tokens", GOOD_HEADERS, &count);
    assert_eq!((counted.status, counted.error_message()), (400, dropped("tool_use").as_str()));
    let refused = 4;
    let mut count = thinking(turn(json!([signed.clone(), call.clone()])), 2048, 1);
    count.as_object_mut().unwrap().remove("max_tokens");
    assert_eq!(post_with(&mock, "/v1/messages/count_tokens", GOOD_HEADERS, &count).status, 200);
    for (body, why) in [
        (thinking(turn(json!([signed.clone(), text.clone(), call.clone()])), 2048, 4096), "kept"),
        (
            thinking(turn(json!([{"type": "redacted_thinking", "data": "opaque=="}, call.clone()])), 2048, 4096),
            "redacted",
        ),
        (body_with(turn(json!([text.clone(), call.clone()]))), "no thinking asked for"),
        // Claude thinks at the start of a turn only: its later messages need no thinking.
        (thinking(long_turn(signed.clone(), text.clone()), 2048, 4096), "a later message without thinking"),
        // A new user turn (no tool results) needs none either.
        (
            thinking(
                json!([
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": [call.clone()]},
                    result.clone(),
                    {"role": "assistant", "content": [text.clone()]},
                    {"role": "user", "content": "And the other file?"}
                ]),
                2048,
                4096,
            ),
            "a new user turn",
        ),
    ] {
        mock.push(text_reply("ok"));
        let response = post(&mock, &body);
        assert_eq!(response.status, 200, "{why}: {}", response.body);
    }
    assert_eq!(mock.violations().len(), refused, "{:#?}", mock.violations());
}

#[test]
fn reasoning_models_refuse_what_openai_refuses() {
    let mock = MockModel::start();
    // This test sends invalid requests on purpose to check the mock's validation.
    mock.expect_violations();
    let hi = json!([{"role": "user", "content": "hi"}]);
    let body = |model: &str, extra: Value| {
        let mut body = openai_body(hi.clone());
        body["model"] = json!(model);
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    let no_max_tokens =
        "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.";
    for model in ["o3", "o4-mini", "gpt-5", "gpt-5-mini-2025-08-07", "o1"] {
        assert_openai_400(&mock, &body(model, json!({"max_tokens": 64})), no_max_tokens);
    }
    assert_openai_400(
        &mock,
        &body("o4-mini", json!({"max_completion_tokens": 64, "temperature": 0.2})),
        "Unsupported value: 'temperature' does not support 0.2 with this model. Only the default (1) value is supported.",
    );
    for model in ["gpt-4.1", "gpt-4o-mini"] {
        assert_openai_400(
            &mock,
            &body(model, json!({"reasoning_effort": "high"})),
            "Unsupported parameter: 'reasoning_effort' is not supported with this model.",
        );
    }
    assert_openai_400(
        &mock,
        &body("o3", json!({"reasoning_effort": "extreme"})),
        "Invalid value: 'extreme'. Supported values are: 'minimal', 'low', 'medium', and 'high'.",
    );
    let error = openai_post(&mock, &body("o3", json!({"max_tokens": 64}))).json()["error"].clone();
    assert_eq!((&error["param"], &error["code"]), (&json!("max_tokens"), &json!("unsupported_parameter")));
    let refused = mock.violations().len();

    for accepted in [
        body("o3", json!({"max_completion_tokens": 64, "reasoning_effort": "high"})),
        body("gpt-5", json!({"max_completion_tokens": 64, "reasoning_effort": "minimal", "temperature": 1})),
        body("gpt-4.1", json!({"max_tokens": 64, "temperature": 0.2})),
        body("gpt-4o", json!({"max_completion_tokens": 64})),
        // A compatible server's model takes whatever it is sent.
        body("qwen3", json!({"max_tokens": 64, "reasoning_effort": "low"})),
    ] {
        mock.push(openai_text("ok"));
        let response = openai_post(&mock, &accepted);
        assert_eq!(response.status, 200, "{accepted}: {}", response.text());
    }
    assert_eq!(mock.violations().len(), refused);
}
