//! Self-tests of the test harness: the loopback Anthropic mock (`tests/common/mock_model.rs`)
//! driven by a tiny std::net HTTP client, plus the URI and text-edit helpers. None of these need
//! the agentfix binary.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use common::mock_model::{
    self, API_KEY, MockModel, Reply, error_reply, message, text_reply, tool_reply,
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
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn error_message(&self) -> &str {
        self.body["error"]["message"].as_str().unwrap_or_default()
    }
}

fn connect(mock: &MockModel) -> TcpStream {
    let addr = mock.base_url().trim_start_matches("http://").to_string();
    let stream = TcpStream::connect(addr).expect("connect to mock");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
}

/// Reads one response (status line, headers, Content-Length body).
fn read_response(reader: &mut impl BufRead) -> HttpResponse {
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
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .map(|(_, v)| v.parse().unwrap())
        .expect("content-length");
    let mut body = vec![0; length];
    reader.read_exact(&mut body).expect("body");
    HttpResponse {
        status,
        headers,
        body: serde_json::from_slice(&body).expect("JSON response body"),
    }
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
    send(
        mock,
        &request_bytes("POST", path, &all, body.to_string().as_bytes()),
    )
}

const GOOD_HEADERS: &[(&str, &str)] = &[
    ("x-api-key", API_KEY),
    ("anthropic-version", "2023-06-01"),
    ("content-type", "application/json"),
];

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
    assert!(
        response.body["request_id"]
            .as_str()
            .is_some_and(|id| id.starts_with("req_"))
    );
    assert_eq!(mock.violations().last().map(String::as_str), Some(expected));
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
    assert_eq!(
        reply["content"],
        json!([{"type": "text", "text": "Hello there."}])
    );
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
    let first = post(
        &mock,
        &body_with(json!([{"role": "user", "content": "read a and b"}])),
    );
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
    let Reply::Message(mut pinned) = message(json!([{"type": "text", "text": "x"}]), "max_tokens")
    else {
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
    mock.push(Reply::Delay(
        Duration::from_millis(300),
        Box::new(text_reply("late")),
    ));
    let started = Instant::now();
    let response = post(
        &mock,
        &body_with(json!([{"role": "user", "content": "hi"}])),
    );
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(response.status, 200);
    assert_eq!(response.body["content"][0]["text"], "late");
}

#[test]
fn wrong_or_missing_api_key_is_401() {
    let mock = MockModel::start();
    mock.push(text_reply("unused"));
    let body = body_with(json!([{"role": "user", "content": "hi"}]));
    let wrong = post_with(
        &mock,
        "/v1/messages",
        &[("x-api-key", "nope"), ("anthropic-version", "2023-06-01")],
        &body,
    );
    assert_eq!(wrong.status, 401);
    assert_eq!(wrong.body["error"]["type"], "authentication_error");
    assert_eq!(wrong.error_message(), "invalid x-api-key");
    let missing = post_with(
        &mock,
        "/v1/messages",
        &[("anthropic-version", "2023-06-01")],
        &body,
    );
    assert_eq!(missing.status, 401);
    assert_eq!(mock.remaining(), 1, "rejected requests consume no reply");
    assert_eq!(mock.violations().len(), 2);
}

#[test]
fn missing_anthropic_version_is_400() {
    let mock = MockModel::start();
    let response = post_with(
        &mock,
        "/v1/messages",
        &[("x-api-key", API_KEY)],
        &body_with(json!([{"role": "user", "content": "hi"}])),
    );
    assert_eq!(response.status, 400);
    assert_eq!(response.body["error"]["type"], "invalid_request_error");
    assert_eq!(
        response.error_message(),
        "anthropic-version: header is required"
    );
}

#[test]
fn wrong_path_or_method_is_404_and_query_string_is_ignored() {
    let mock = MockModel::start();
    let body = body_with(json!([{"role": "user", "content": "hi"}]));
    let response = post_with(&mock, "/v1/complete", GOOD_HEADERS, &body);
    assert_eq!(response.status, 404);
    assert_eq!(response.body["error"]["type"], "not_found_error");
    let get = send(
        &mock,
        &request_bytes("GET", "/v1/messages", &[("connection", "close")], b""),
    );
    assert_eq!(get.status, 404);

    mock.push(text_reply("beta"));
    let beta = post_with(&mock, "/v1/messages?beta=true", GOOD_HEADERS, &body);
    assert_eq!(beta.status, 200, "body: {}", beta.body);
    assert_eq!(mock.requests().last().unwrap().path, "/v1/messages");
}

#[test]
fn invalid_bodies_are_400() {
    let mock = MockModel::start();
    let not_json = send(
        &mock,
        &request_bytes(
            "POST",
            "/v1/messages",
            &[
                ("x-api-key", API_KEY),
                ("anthropic-version", "2023-06-01"),
                ("connection", "close"),
            ],
            b"{not json",
        ),
    );
    assert_eq!(not_json.status, 400);
    assert_eq!(mock.requests()[0].body, Value::Null);

    let messages = json!([{"role": "user", "content": "hi"}]);
    assert_400(
        &mock,
        &json!({"model": "m", "messages": messages}),
        "max_tokens: Field required",
    );
    assert_400(
        &mock,
        &json!({"max_tokens": 5, "messages": messages}),
        "model: Field required",
    );
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
        &json!({"model": "m", "max_tokens": 5, "messages": messages, "stream": true}),
        "mock: streaming not scripted",
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
    let expected = "messages.0: all messages must have non-empty content except for the optional final assistant message";
    assert_400(
        &mock,
        &body_with(json!([{"role": "user", "content": ""}])),
        expected,
    );
    assert_400(
        &mock,
        &body_with(json!([{"role": "user", "content": []}])),
        expected,
    );
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
    let tool_use =
        |id: &str| json!({"type": "tool_use", "id": id, "name": "read_file", "input": {}});
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
    let response = post(
        &mock,
        &body_with(json!([{"role": "user", "content": "hi"}])),
    );
    assert_eq!(response.status, 500);
    assert_eq!(response.body["type"], "error");
    assert_eq!(response.body["error"]["type"], "api_error");
    assert_eq!(response.error_message(), "mock: no scripted reply left");
    assert!(mock.violations().is_empty());
}

#[test]
fn requests_records_everything_valid_or_not() {
    let mock = MockModel::start();
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
    assert!(
        requests[0]
            .headers
            .iter()
            .all(|(n, _)| *n == n.to_ascii_lowercase())
    );
    assert_eq!(requests[1].path, "/nowhere");
    assert_eq!(requests[2].header("x-api-key"), Some("bad"));
    assert_eq!(requests[3].body, json!({"model": "m"}));
    assert_eq!(mock.violations().len(), 3);
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

    writer
        .write_all(&request_bytes(
            "POST",
            "/v1/messages",
            GOOD_HEADERS,
            body.as_bytes(),
        ))
        .unwrap();
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

#[test]
fn file_uri_percent_encodes_like_vscode() {
    assert_eq!(
        common::file_uri(Path::new("/tmp/My Project/ü.rs")),
        "file:///tmp/My%20Project/%C3%BC.rs"
    );
    assert_eq!(
        common::file_uri(Path::new("/a/b#c?(d)+e@f.rs")),
        "file:///a/b%23c%3F%28d%29%2Be%40f.rs"
    );
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
    assert_eq!(
        common::apply_text_edits(text, &edits),
        "a😀B\r\n>2nd line\nthird!"
    );
}
