//! A loopback mock of the Anthropic Messages API (`POST /v1/messages`) for integration tests.
//!
//! [`MockModel::start`] binds `127.0.0.1:0` and serves HTTP/1.1 (keep-alive supported, one std
//! thread per connection). Every request is recorded ([`MockModel::requests`]) and validated the
//! way the real API does it (auth, `anthropic-version`, body shape, tool definitions and the
//! `tool_use` / `tool_result` pairing rules of the wire-protocol sheet, section A4). A request that
//! fails validation is answered with the real error envelope and its message is kept in
//! [`MockModel::violations`]. A valid request consumes the next scripted [`Reply`] (FIFO); the
//! `model` field and `usage.input_tokens` of a scripted message are filled in at send time.

use std::collections::{HashSet, VecDeque};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use serde_json::{Value, json};

/// The only API key the mock accepts (header `x-api-key`).
pub const API_KEY: &str = "test-key-0123";

/// Largest request body the mock reads (the real limit for Messages is 32 MB).
const MAX_BODY: usize = 32 * 1024 * 1024;

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

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// One scripted answer to a valid `POST /v1/messages`.
#[derive(Debug, Clone)]
pub enum Reply {
    /// `200 OK`, `application/json`. If the object's `model` is missing or null it is set to the
    /// requested model; a null `usage.input_tokens` is set to (request body length / 4).
    Message(Value),
    /// Any status with extra headers and a JSON body (e.g. a 429 with `retry-after`). A body whose
    /// `type` is `"message"` gets the same `model` / `input_tokens` filling as [`Reply::Message`].
    Status {
        status: u16,
        headers: Vec<(String, String)>,
        body: Value,
    },
    /// Sleep (on the connection's thread), then send the inner reply.
    Delay(Duration, Box<Reply>),
}

/// A request as the mock received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    /// Request path without the query string.
    pub path: String,
    /// Header names are lowercase; values are trimmed.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON, or `Value::Null` if it is not JSON (or empty).
    pub body: Value,
}

impl Recorded {
    /// The first header with this name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A general assistant message reply: `content` is the content-block array, `stop_reason` is put
/// as-is. `output_tokens` is 10 per block.
pub fn message(content: Value, stop_reason: &str) -> Reply {
    let blocks = content.as_array().map_or(1, Vec::len) as u64;
    Reply::Message(json!({
        "id": format!("msg_mock{:020}", next_id()),
        "type": "message",
        "role": "assistant",
        "model": null,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": null,
        "stop_details": null,
        "usage": {
            "input_tokens": null,
            "output_tokens": 10 * blocks,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0
        }
    }))
}

/// A single text block, `stop_reason: "end_turn"`.
pub fn text_reply(text: &str) -> Reply {
    message(json!([{"type": "text", "text": text}]), "end_turn")
}

/// A leading text block `"Let me look."`, then one `tool_use` block per `(id, name, input)`,
/// `stop_reason: "tool_use"`.
pub fn tool_reply(calls: &[(&str, &str, Value)]) -> Reply {
    let mut content = vec![json!({"type": "text", "text": "Let me look."})];
    content.extend(tool_use_blocks(calls));
    message(Value::Array(content), "tool_use")
}

/// Like [`tool_reply`] but with only the `tool_use` blocks (no leading text).
pub fn tool_reply_without_text(calls: &[(&str, &str, Value)]) -> Reply {
    message(Value::Array(tool_use_blocks(calls)), "tool_use")
}

fn tool_use_blocks(calls: &[(&str, &str, Value)]) -> Vec<Value> {
    calls
        .iter()
        .map(
            |(id, name, input)| json!({"type": "tool_use", "id": id, "name": name, "input": input}),
        )
        .collect()
}

/// An error reply with the real envelope, e.g. `error_reply(529, "overloaded_error", "Overloaded")`.
pub fn error_reply(status: u16, error_type: &str, message: &str) -> Reply {
    Reply::Status {
        status,
        headers: Vec::new(),
        body: error_envelope(error_type, message),
    }
}

fn error_envelope(error_type: &str, message: &str) -> Value {
    json!({
        "type": "error",
        "error": {"type": error_type, "message": message},
        "request_id": format!("req_mock{:020}", next_id())
    })
}

#[derive(Default)]
struct State {
    replies: VecDeque<Reply>,
    requests: Vec<Recorded>,
    violations: Vec<String>,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    stop: AtomicBool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The mock server. Dropping it stops accepting connections (open connections finish on their own).
pub struct MockModel {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl MockModel {
    /// Binds `127.0.0.1:0` and starts the accept loop.
    pub fn start() -> MockModel {
        let listener = TcpListener::bind("127.0.0.1:0").expect("mock model: bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("mock model: local_addr");
        let shared = Arc::new(Shared::default());
        let accept_shared = Arc::clone(&shared);
        let accept = thread::Builder::new()
            .name("mock-model-accept".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if accept_shared.stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = conn else { continue };
                    let conn_shared = Arc::clone(&accept_shared);
                    let _ = thread::Builder::new()
                        .name("mock-model-conn".into())
                        .spawn(move || serve_connection(stream, &conn_shared));
                }
            })
            .expect("mock model: spawn accept thread");
        MockModel {
            addr,
            shared,
            accept: Some(accept),
        }
    }

    /// `http://127.0.0.1:PORT`, no trailing slash.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Appends a scripted reply; each valid `POST /v1/messages` consumes one, in order.
    pub fn push(&self, reply: Reply) {
        self.shared.lock().replies.push_back(reply);
    }

    /// How many scripted replies have not been consumed yet.
    pub fn remaining(&self) -> usize {
        self.shared.lock().replies.len()
    }

    /// Every request received so far (valid or not), in arrival order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.lock().requests.clone()
    }

    /// The error message of every 4xx the mock produced itself (validation failures and malformed
    /// HTTP). Scripted replies with a 4xx status are not violations.
    pub fn violations(&self) -> Vec<String> {
        self.shared.lock().violations.clone()
    }
}

impl Drop for MockModel {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept() so the loop sees the stop flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(handle) = self.accept.take() {
            let _ = handle.join();
        }
    }
}

struct Request {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    keep_alive: bool,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Value,
}

impl Response {
    fn error(status: u16, error_type: &str, message: &str) -> Response {
        Response {
            status,
            headers: Vec::new(),
            body: error_envelope(error_type, message),
        }
    }
}

fn serve_connection(stream: TcpStream, shared: &Shared) {
    let _ = stream.set_nodelay(true);
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    loop {
        let request = match read_request(&mut reader, &mut writer) {
            Ok(Some(request)) => request,
            Ok(None) => return,
            Err(err) => {
                let message = format!("mock: malformed HTTP request: {err}");
                shared.lock().violations.push(message.clone());
                let response = Response::error(400, "invalid_request_error", &message);
                let _ = write_response(&mut writer, &response, false);
                return;
            }
        };
        let keep_alive = request.keep_alive;
        let response = handle(shared, request);
        if write_response(&mut writer, &response, keep_alive).is_err() || !keep_alive {
            let _ = writer.shutdown(std::net::Shutdown::Both);
            return;
        }
    }
}

fn bad(message: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.into())
}

/// Reads one line (up to `\n`), without the line terminator. `None` on EOF before any byte.
fn read_line(reader: &mut impl BufRead) -> io::Result<Option<String>> {
    let mut buf = Vec::new();
    let n = reader.take(64 * 1024).read_until(b'\n', &mut buf)?;
    if n == 0 {
        return Ok(None);
    }
    if buf.last() != Some(&b'\n') {
        return Err(bad("line too long or truncated"));
    }
    while matches!(buf.last(), Some(b'\n' | b'\r')) {
        buf.pop();
    }
    String::from_utf8(buf)
        .map(Some)
        .map_err(|_| bad("non-UTF-8 bytes in request head"))
}

fn read_request(
    reader: &mut BufReader<TcpStream>,
    writer: &mut TcpStream,
) -> io::Result<Option<Request>> {
    // RFC 9112 allows empty lines before the request line.
    let request_line = loop {
        match read_line(reader)? {
            None => return Ok(None),
            Some(line) if line.trim().is_empty() => continue,
            Some(line) => break line,
        }
    };
    let mut parts = request_line.split_whitespace();
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad(format!("bad request line {request_line:?}")));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(bad(format!("unsupported HTTP version {version:?}")));
    }
    let mut headers = Vec::new();
    loop {
        let line = read_line(reader)?.ok_or_else(|| bad("EOF inside request headers"))?;
        if line.is_empty() {
            break;
        }
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| bad(format!("bad header line {line:?}")))?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    // Absolute-form targets (sent to proxies) carry scheme and authority.
    let target = target
        .strip_prefix("http://")
        .map_or(target, |rest| rest.find('/').map_or("/", |i| &rest[i..]));
    let path = target.split(['?', '#']).next().unwrap_or("").to_string();
    let mut request = Request {
        method: method.to_string(),
        path,
        headers,
        body: Vec::new(),
        keep_alive: false,
    };
    let connection = request
        .header("connection")
        .unwrap_or("")
        .to_ascii_lowercase();
    request.keep_alive = if version == "HTTP/1.0" {
        connection.contains("keep-alive")
    } else {
        !connection.contains("close")
    };
    if request
        .header("expect")
        .is_some_and(|e| e.eq_ignore_ascii_case("100-continue"))
    {
        writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
        writer.flush()?;
    }
    let chunked = request
        .header("transfer-encoding")
        .is_some_and(|te| te.to_ascii_lowercase().contains("chunked"));
    if chunked {
        request.body = read_chunked(reader)?;
    } else if let Some(len) = request.header("content-length") {
        let len: usize = len
            .parse()
            .map_err(|_| bad(format!("bad Content-Length {len:?}")))?;
        if len > MAX_BODY {
            return Err(bad(format!("body of {len} bytes is too large")));
        }
        let mut body = vec![0; len];
        reader.read_exact(&mut body)?;
        request.body = body;
    }
    Ok(Some(request))
}

fn read_chunked(reader: &mut BufReader<TcpStream>) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line = read_line(reader)?.ok_or_else(|| bad("EOF inside chunked body"))?;
        let size = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size, 16)
            .map_err(|_| bad(format!("bad chunk size line {line:?}")))?;
        if size == 0 {
            // Trailer section, terminated by an empty line.
            loop {
                let trailer = read_line(reader)?.ok_or_else(|| bad("EOF inside trailers"))?;
                if trailer.is_empty() {
                    return Ok(body);
                }
            }
        }
        if body.len() + size > MAX_BODY {
            return Err(bad("chunked body is too large"));
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..])?;
        let mut crlf = [0u8; 2];
        reader.read_exact(&mut crlf)?;
        if &crlf != b"\r\n" {
            return Err(bad("chunk data not followed by CRLF"));
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        402 => "Payment Required",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Payload Too Large",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        529 => "Overloaded",
        _ => "Unknown",
    }
}

fn write_response(writer: &mut TcpStream, response: &Response, keep_alive: bool) -> io::Result<()> {
    let body = serde_json::to_vec(&response.body).expect("serialize JSON");
    let request_id = response
        .body
        .get("request_id")
        .and_then(Value::as_str)
        .map_or_else(|| format!("req_mock{:020}", next_id()), str::to_string);
    let mut head = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nrequest-id: {}\r\nconnection: {}\r\n",
        response.status,
        reason(response.status),
        body.len(),
        request_id,
        if keep_alive { "keep-alive" } else { "close" },
    );
    for (name, value) in &response.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(&body);
    writer.write_all(&bytes)?;
    writer.flush()
}

fn handle(shared: &Shared, request: Request) -> Response {
    let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
    shared.lock().requests.push(Recorded {
        method: request.method.clone(),
        path: request.path.clone(),
        headers: request.headers.clone(),
        body: body.clone(),
    });
    if let Err((status, error_type, message)) = validate(&request, &body) {
        shared.lock().violations.push(message.clone());
        return Response::error(status, error_type, &message);
    }
    let Some(reply) = shared.lock().replies.pop_front() else {
        return Response::error(500, "api_error", "mock: no scripted reply left");
    };
    let model = body["model"].as_str().unwrap_or_default();
    let input_tokens = (request.body.len() / 4).max(1) as u64;
    render(reply, model, input_tokens)
}

fn render(reply: Reply, model: &str, input_tokens: u64) -> Response {
    match reply {
        Reply::Message(body) => Response {
            status: 200,
            headers: Vec::new(),
            body: fill_message(body, model, input_tokens),
        },
        Reply::Status {
            status,
            headers,
            body,
        } => {
            let body = if body.get("type").and_then(Value::as_str) == Some("message") {
                fill_message(body, model, input_tokens)
            } else {
                body
            };
            Response {
                status,
                headers,
                body,
            }
        }
        Reply::Delay(delay, inner) => {
            thread::sleep(delay);
            render(*inner, model, input_tokens)
        }
    }
}

fn fill_message(mut body: Value, model: &str, input_tokens: u64) -> Value {
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

type Invalid = (u16, &'static str, String);

fn invalid(message: impl Into<String>) -> Invalid {
    (400, "invalid_request_error", message.into())
}

fn validate(request: &Request, body: &Value) -> Result<(), Invalid> {
    if request.method != "POST" || request.path != "/v1/messages" {
        return Err((
            404,
            "not_found_error",
            format!("Not found: {} {}", request.method, request.path),
        ));
    }
    if request.header("x-api-key") != Some(API_KEY) {
        return Err((401, "authentication_error", "invalid x-api-key".into()));
    }
    match request.header("anthropic-version") {
        None => return Err(invalid("anthropic-version: header is required")),
        Some("2023-06-01" | "2023-01-01") => {}
        Some(other) => {
            return Err(invalid(format!(
                "anthropic-version: invalid version {other:?}"
            )));
        }
    }
    if request.body.is_empty() {
        return Err(invalid("mock: request body is empty (expected JSON)"));
    }
    if let Err(err) = serde_json::from_slice::<Value>(&request.body) {
        return Err(invalid(format!(
            "There was an error parsing the body of your request: {err}"
        )));
    }
    validate_body(body).map_err(invalid)?;
    if body.get("stream") == Some(&Value::Bool(true)) {
        return Err(invalid("mock: streaming not scripted"));
    }
    Ok(())
}

fn validate_body(body: &Value) -> Result<(), String> {
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
    match object.get("max_tokens") {
        None | Some(Value::Null) => return Err("max_tokens: Field required".into()),
        Some(v) if v.as_u64().is_some_and(|n| n >= 1) => {}
        Some(v) if v.is_i64() || v.is_u64() => {
            return Err("max_tokens: Input should be greater than or equal to 1".into());
        }
        Some(_) => return Err("max_tokens: Input should be a valid integer".into()),
    }
    let messages = match object.get("messages") {
        None | Some(Value::Null) => return Err("messages: Field required".into()),
        Some(Value::Array(messages)) if !messages.is_empty() => messages,
        Some(Value::Array(_)) => {
            return Err(
                "messages: List should have at least 1 item after validation, not 0".into(),
            );
        }
        Some(_) => return Err("messages: Input should be a valid list".into()),
    };
    if let Some(unknown) = object.keys().find(|k| !KNOWN_FIELDS.contains(&k.as_str())) {
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
    validate_messages(messages, tool_names.as_ref().is_some_and(|n| !n.is_empty()))
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
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn is_valid_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
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
                return Err(format!(
                    "tools.{i}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
                ));
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
                        return Err(format!(
                            "tools.{i}.input_schema.type: Input should be 'object'"
                        ));
                    }
                }
                Some(_) => {
                    return Err(format!(
                        "tools.{i}.input_schema: Input should be a valid dictionary"
                    ));
                }
            }
            if let Some(description) = tool.get("description")
                && !description.is_string()
            {
                return Err(format!(
                    "tools.{i}.description: Input should be a valid string"
                ));
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
                return Err(format!(
                    "tool_choice.tool.name: tool `{name}` is not in the provided tools"
                ));
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
        return Err(
            "tool_choice.disable_parallel_tool_use: Input should be a valid boolean".into(),
        );
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
                return Err(format!(
                    "messages.{n}.role: Input should be 'user' or 'assistant'"
                ));
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
                return Err(format!(
                    "messages.{n}.content: Input should be a valid string or list"
                ));
            }
        }
        if let Some(extra) = object.keys().find(|k| *k != "role" && *k != "content") {
            return Err(format!(
                "messages.{n}.{extra}: Extra inputs are not permitted"
            ));
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
        if !has_tools
            && let Some(k) = blocks
                .iter()
                .position(|b| matches!(block_type(b), "tool_use" | "tool_result"))
        {
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
                return Err(format!(
                    "messages.{n}.content.{k}: `tool_use` ids must be unique"
                ));
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
fn check_tool_results_follow(
    messages: &[Value],
    roles: &[&str],
    n: usize,
    ids: &[String],
) -> Result<(), String> {
    let next = if roles.get(n + 1) == Some(&"user") {
        blocks_of(&messages[n + 1]["content"])
    } else {
        Vec::new()
    };
    let result_id = |b: &Value| -> Option<String> {
        (block_type(b) == "tool_result")
            .then(|| b["tool_use_id"].as_str().unwrap_or_default().to_string())
    };
    let anywhere: HashSet<String> = next.iter().filter_map(result_id).collect();
    let missing: Vec<&str> = ids
        .iter()
        .filter(|id| !anywhere.contains(*id))
        .map(String::as_str)
        .collect();
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
        return Err(format!(
            "{at}.type: `{kind}` blocks are not allowed in {role} messages"
        ));
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
                    return Err(format!(
                        "{at}.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
                    ));
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
            return Err(format!(
                "{at}.tool_use_id: String should match pattern '^[a-zA-Z0-9_-]+$'"
            ));
        }
    }
    match object.get("content") {
        None | Some(Value::String(_)) => {}
        Some(Value::Array(parts)) => {
            for (j, part) in parts.iter().enumerate() {
                match block_type(part) {
                    "text" => {
                        if !part.get("text").is_some_and(Value::is_string) {
                            return Err(format!(
                                "{at}.content.{j}.text: Input should be a valid string"
                            ));
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
            return Err(format!(
                "{at}.content: Input should be a valid string or list"
            ));
        }
    }
    if let Some(flag) = object.get("is_error")
        && !flag.is_boolean()
    {
        return Err(format!("{at}.is_error: Input should be a valid boolean"));
    }
    Ok(())
}
