//! A loopback mock of the Anthropic Messages API (`POST /v1/messages`) and the OpenAI Chat
//! Completions API (`POST /v1/chat/completions`) for integration tests, std threads only.
//!
//! [`MockModel::start`] binds `127.0.0.1:0` and serves HTTP/1.1 (keep-alive supported, one std
//! thread per connection); an OpenAI client uses `{base_url}/v1` as its base URL. Every request
//! is recorded ([`MockModel::requests`], [`MockModel::request_times`]) before it is answered and
//! validated the way the real API does it (wire-protocol sheet: auth, headers, body shape, tool
//! definitions and the tool-call / tool-result pairing rules of A4 and B2; extended thinking and
//! the fields reasoning models refuse, see `anthropic.rs` and `openai.rs`). A request that fails
//! validation is answered with the real error envelope of its API and its message is kept in
//! [`MockModel::violations`]. A valid request of either API consumes the next scripted [`Reply`]
//! (one FIFO queue for both); the `model` and input-token fields left null in a scripted reply
//! are filled in at send time.
//!
//! `POST /v1/messages/count_tokens` is validated like `/v1/messages` (same auth and headers; the
//! body without `max_tokens`, `stream` or the sampling fields, which are refused as the real API
//! refuses them) and answered `{"input_tokens": N}`, N being what `/v1/messages` reports as the
//! prompt's input tokens under the usage model in force ([`MockModel::set_usage_model`]). It
//! consumes no scripted reply and is kept apart ([`MockModel::count_requests`]): it is not in
//! [`MockModel::requests`] or [`MockModel::usage_stats`].
//!
//! A request with `"stream": true` gets its reply as server-sent events: a [`Reply::Message`]
//! is converted automatically ([`sse_events`] for Anthropic, [`openai_sse_chunks`] for OpenAI),
//! a [`Reply::Sse`] is sent chunk by chunk as scripted, and an error status is sent as a plain
//! JSON error (the API fails before the stream starts). Streams have no Content-Length and end
//! when the mock closes the connection.

mod anthropic;
mod http;
mod openai;
mod session;
mod stream;
mod usage;

use std::collections::VecDeque;
use std::io::{BufReader, ErrorKind, Read};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub use anthropic::{sse_error_after_start, sse_event, sse_events};
pub use openai::{
    openai_insufficient_quota, openai_message, openai_quirk_arguments_object, openai_quirk_empty_id,
    openai_quirk_name_repeated, openai_quirk_ollama_index0, openai_quirk_stop_with_tool_calls, openai_sse_chunks,
    openai_stream_error, openai_text, openai_tools,
};
pub use session::{
    ECONOMY_NEW_TEXT, ECONOMY_OLD_TEXT, ECONOMY_READS, ECONOMY_SUMMARY, ECONOMY_TARGET, economy_files, economy_fixed,
    economy_module_path, economy_replies,
};
pub use stream::{split_bytes, stalled, truncated};
pub use usage::{DEFAULT_MIN_CACHE_TOKENS, MAX_BREAKPOINTS, UsageModel, UsageStats};

use anthropic::{Endpoint, error_envelope};
use http::{Request, Response};
use stream::{split_chars, split_utf8};
use usage::{PromptCache, PromptUsage};

/// The only API key the mock accepts (header `x-api-key`, or `Authorization: Bearer` for OpenAI).
pub const API_KEY: &str = "test-key-0123";

/// How often a hanging connection checks whether the client left or the mock was dropped.
const HANG_POLL: Duration = Duration::from_millis(50);

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// One scripted answer to a valid request (either API).
#[derive(Debug, Clone)]
pub enum Reply {
    /// `200 OK`, `application/json`: an Anthropic message object, or an OpenAI `chat.completion`
    /// object for `/v1/chat/completions`. A missing or null `model` is set to the requested
    /// model; a null `usage.input_tokens` (Anthropic) or `usage.prompt_tokens` (OpenAI) is set to
    /// (request body length / 4), a null `usage.total_tokens` to prompt + completion tokens. For a
    /// streaming request the filled object is converted to SSE ([`sse_events`] /
    /// [`openai_sse_chunks`]). Sending a message of one API to the other is a scripting error:
    /// the mock answers 500 (not a violation).
    Message(Value),
    /// Any status with extra headers and a JSON body (e.g. a 429 with `retry-after`), sent as
    /// JSON even when the request asked for a stream. A body whose `type` is `"message"` (or
    /// `object` is `"chat.completion"`) gets the same filling as [`Reply::Message`]. On
    /// `/v1/chat/completions` an Anthropic error envelope is translated into the OpenAI one
    /// (`{"error":{"message","type","param":null,"code"}}`, code `rate_limit_exceeded` for a
    /// `rate_limit_error`, else null).
    Status { status: u16, headers: Vec<(String, String)>, body: Value },
    /// Sleep (on the connection's thread), then send the inner reply.
    Delay(Duration, Box<Reply>),
    /// A hand-written `200 text/event-stream` response, sent chunk by chunk; the connection is
    /// closed after the last chunk. Only for streaming requests: a non-streaming request gets a
    /// 400 "mock: SSE scripted but request is not streaming" (recorded as a violation). Whole
    /// [`Chunk::Raw`] events get the send-time filling of a null model / input-token count
    /// (`message_start`, `chat.completion.chunk`).
    Sse(Vec<Chunk>),
    /// Accept the request and never answer: the connection stays open until the client closes
    /// it or the mock is dropped (for timeout and cancel tests).
    Hang,
    /// A hand-written response with any status and headers (give `content-type`; the default is
    /// `application/json`), for streaming and non-streaming requests alike: the body is written
    /// chunk by chunk, close-delimited (no Content-Length), nothing filled in. With
    /// [`Chunk::Repeat`] a body of any size is streamed without being held in memory (a 256 MB
    /// error body, a never-ending line).
    Raw { status: u16, headers: Vec<(String, String)>, chunks: Vec<Chunk> },
}

/// A piece of a scripted stream ([`Reply::Sse`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Chunk {
    /// Text written as-is (typically one SSE event), then flushed.
    Raw(String),
    /// Bytes written as-is, then flushed (may end inside a UTF-8 character).
    Bytes(Vec<u8>),
    /// A pause before the next chunk.
    Sleep(Duration),
    /// Close the connection now, mid-stream; later chunks are not sent.
    Close,
    /// `piece` written `times` times, with `pause` after each write (none when zero): a flood
    /// or a trickle of any length, never held in memory whole. Writing stops when the client
    /// goes away. [`split_bytes`] keeps it as it is.
    Repeat { piece: Vec<u8>, times: u64, pause: Duration },
}

/// `piece` written `times` times with `pause` after each write ([`Chunk::Repeat`]).
pub fn repeat(piece: impl Into<Vec<u8>>, times: u64, pause: Duration) -> Chunk {
    Chunk::Repeat { piece: piece.into(), times, pause }
}

/// A [`Reply::Raw`] of `status` whose body is `prefix`, `len` bytes of `fill` sent in 64 KB
/// writes as fast as the client reads, then `suffix`: a huge body (a 256 MB error, say) without
/// a huge allocation.
pub fn huge_body(status: u16, content_type: &str, prefix: &str, fill: u8, len: u64, suffix: &str) -> Reply {
    const PIECE: u64 = 64 * 1024;
    let mut chunks = vec![Chunk::Raw(prefix.to_string())];
    if len / PIECE > 0 {
        chunks.push(repeat(vec![fill; PIECE as usize], len / PIECE, Duration::ZERO));
    }
    if !len.is_multiple_of(PIECE) {
        chunks.push(Chunk::Bytes(vec![fill; (len % PIECE) as usize]));
    }
    chunks.push(Chunk::Raw(suffix.to_string()));
    Reply::Raw { status, headers: vec![("content-type".into(), content_type.into())], chunks }
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
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
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
    calls.iter().map(|(id, name, input)| json!({"type": "tool_use", "id": id, "name": name, "input": input})).collect()
}

/// A reply written as JSON, the scripts' format (`examples/mock_model.rs`'s
/// `replies.json`, the eval tasks' `mock.json`): `{"text": "…"}` ([`text_reply`]),
/// `{"tools": [["id", "name", {input}], …]}` ([`tool_reply`]), `{"message": {assistant
/// message object}}`, `{"status": 429, "body": {…}, "headers": [["retry-after", "1"]]}`,
/// `{"hang": true}`, or `{"delay_ms": 500, "reply": {…}}`.
pub fn reply_from_json(v: &Value) -> Result<Reply, String> {
    if let Some(t) = v.get("text").and_then(Value::as_str) {
        return Ok(text_reply(t));
    }
    if let Some(calls) = v.get("tools").and_then(Value::as_array) {
        let calls: Vec<(&str, &str, Value)> = calls
            .iter()
            .map(|c| (c[0].as_str().unwrap_or_default(), c[1].as_str().unwrap_or_default(), c[2].clone()))
            .collect();
        return Ok(tool_reply(&calls));
    }
    if let Some(m) = v.get("message") {
        return Ok(Reply::Message(m.clone()));
    }
    if let Some(status) = v.get("status").and_then(Value::as_u64) {
        let headers = v["headers"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|h| (h[0].as_str().unwrap_or_default().to_string(), h[1].as_str().unwrap_or_default().to_string()))
            .collect();
        return Ok(Reply::Status { status: status as u16, headers, body: v["body"].clone() });
    }
    if v.get("hang").and_then(Value::as_bool) == Some(true) {
        return Ok(Reply::Hang);
    }
    if let Some(ms) = v.get("delay_ms").and_then(Value::as_u64) {
        return Ok(Reply::Delay(Duration::from_millis(ms), Box::new(reply_from_json(&v["reply"])?)));
    }
    Err(format!("unknown reply {v}"))
}

/// An error reply with the real envelope, e.g. `error_reply(529, "overloaded_error", "Overloaded")`.
pub fn error_reply(status: u16, error_type: &str, message: &str) -> Reply {
    Reply::Status { status, headers: Vec::new(), body: error_envelope(error_type, message) }
}

/// 429 `rate_limit_error` with `retry-after: SECS` (seconds, may be fractional or an HTTP date).
pub fn rate_limited(retry_after_secs: &str) -> Reply {
    Reply::Status {
        status: 429,
        headers: vec![("retry-after".into(), retry_after_secs.into())],
        body: error_envelope("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
    }
}

/// 429 `rate_limit_error` with `retry-after-ms: MS`.
pub fn rate_limited_ms(ms: u64) -> Reply {
    Reply::Status {
        status: 429,
        headers: vec![("retry-after-ms".into(), ms.to_string())],
        body: error_envelope("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
    }
}

/// 529 `overloaded_error` "Overloaded".
pub fn overloaded() -> Reply {
    error_reply(529, "overloaded_error", "Overloaded")
}

/// 500 `api_error` with `x-should-retry: false` (the SDKs must not retry it).
pub fn server_error_no_retry() -> Reply {
    Reply::Status {
        status: 500,
        headers: vec![("x-should-retry".into(), "false".into())],
        body: error_envelope("api_error", "Internal server error"),
    }
}

#[derive(Default)]
struct State {
    replies: VecDeque<Reply>,
    /// Replies for the requests whose body contains every one of some
    /// markers ([`MockModel::push_for`], [`MockModel::push_for_all`]),
    /// tried before `replies`.
    routed: Vec<(Vec<String>, VecDeque<Reply>)>,
    requests: Vec<Recorded>,
    count_requests: Vec<Recorded>,
    times: Vec<Instant>,
    violations: Vec<String>,
    usage_model: UsageModel,
    /// The text that answers every request without tools ([`MockModel::set_summary_reply`]).
    summary_reply: Option<String>,
    /// What the previous answered request left in the prompt cache, in tokens.
    cached_prefix: u64,
    context_limit: Option<u64>,
    cache: PromptCache,
    stats: UsageStats,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    stop: AtomicBool,
    openai_auth_optional: AtomicBool,
    llama_cpp_python: AtomicBool,
    violations_expected: AtomicBool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The mock server. Dropping it stops accepting connections and ends hanging ones
/// ([`Reply::Hang`]); other open connections finish on their own. Dropping it also fails the
/// test if any request was a protocol violation (see [`MockModel::expect_violations`]). Connection threads are
/// detached, so none of them keeps the test process alive.
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
        MockModel { addr, shared, accept: Some(accept) }
    }

    /// `http://127.0.0.1:PORT`, no trailing slash (OpenAI clients use `{base_url}/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Appends a scripted reply; each valid request (either API) consumes one, in order.
    pub fn push(&self, reply: Reply) {
        self.shared.lock().replies.push_back(reply);
    }

    /// Appends a scripted reply for the requests whose JSON body contains
    /// `marker` (concurrent runs told apart by what they send, such as a
    /// candidate's note); they consume these in order before the plain queue.
    pub fn push_for(&self, marker: &str, reply: Reply) {
        self.push_for_all(&[marker], reply);
    }

    /// Appends a scripted reply for the requests whose JSON body contains
    /// every one of `markers` (a task's text and a model's name, say: runs
    /// told apart by two things at once); one queue per set of markers.
    pub fn push_for_all(&self, markers: &[&str], reply: Reply) {
        let mut state = self.shared.lock();
        match state
            .routed
            .iter_mut()
            .find(|(m, _)| m.len() == markers.len() && m.iter().zip(markers).all(|(a, b)| a.as_str() == *b))
        {
            Some((_, queue)) => queue.push_back(reply),
            None => state.routed.push((markers.iter().map(|m| m.to_string()).collect(), VecDeque::from([reply]))),
        }
    }

    /// How many scripted replies have not been consumed yet (routed ones included).
    pub fn remaining(&self) -> usize {
        let state = self.shared.lock();
        state.replies.len() + state.routed.iter().map(|(_, q)| q.len()).sum::<usize>()
    }

    /// Every request received so far (valid or not), in arrival order. A request is recorded
    /// before its reply is sent, so polling this tells that a request is in flight.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.lock().requests.clone()
    }

    /// When each request of [`MockModel::requests`] arrived (its request line was read).
    /// Every request body as JSON text, joined: to check what never reached the model.
    pub fn requests_text(&self) -> String {
        self.requests().iter().map(|r| r.body.to_string()).collect::<Vec<_>>().join("\n")
    }

    /// Every `POST /v1/messages/count_tokens` received so far (valid or not), in arrival order;
    /// they are in neither [`MockModel::requests`] nor [`MockModel::usage_stats`].
    pub fn count_requests(&self) -> Vec<Recorded> {
        self.shared.lock().count_requests.clone()
    }

    pub fn request_times(&self) -> Vec<Instant> {
        self.shared.lock().times.clone()
    }

    /// The error message of every 4xx the mock produced itself (validation failures, malformed
    /// HTTP, SSE scripted for a non-streaming request). Scripted 4xx replies are not violations.
    pub fn violations(&self) -> Vec<String> {
        self.shared.lock().violations.clone()
    }

    /// For a test that sends invalid requests on purpose (the mock's own validation tests):
    /// dropping the mock then does not fail on the violations it recorded.
    pub fn expect_violations(&self) {
        self.shared.violations_expected.store(true, Ordering::SeqCst);
    }

    /// With `true`, `/v1/chat/completions` accepts requests without (or with any)
    /// `Authorization` header, like Ollama. Default `false`: `Bearer {API_KEY}` is required.
    pub fn set_openai_auth_optional(&self, optional: bool) {
        self.shared.openai_auth_optional.store(optional, Ordering::SeqCst);
    }

    /// With `true`, `/v1/chat/completions` behaves like llama-cpp-python 0.3 (recorded in
    /// `shared/fixtures/real-openai-compatible` beside the repository): an assistant `content` that is not a
    /// string is refused with its HTTP 500 pydantic error, and tools without `tool_choice` are
    /// not shown to the model (both recorded as violations); a streamed request with
    /// `tool_choice: "auto"` gets one `: ping` comment and the connection closes, consuming no
    /// reply (probe-py-auto-stream); usage is never reported (`stream_options` ignored); a
    /// non-streamed tool call is repeated in the legacy `function_call`, its name with a
    /// trailing colon (probe-py-auto-json); `GET /v1/models/{id}` is 404 and `GET /v1/models`
    /// lists the one model it serves, `smollm2` (check-py).
    pub fn set_llama_cpp_python(&self, on: bool) {
        self.shared.llama_cpp_python.store(on, Ordering::SeqCst);
    }

    /// How prompt usage is reported from now on (default [`UsageModel::Naive`]). With
    /// [`UsageModel::Cached`], every message reply's input fields are overwritten with the
    /// request's canonical token count split into plain input, cache writes and cache reads
    /// (Anthropic, also in `message_start`) or `prompt_tokens` and
    /// `prompt_tokens_details.cached_tokens` (OpenAI, also in the final streamed chunk).
    pub fn set_usage_model(&self, model: UsageModel) {
        self.shared.lock().usage_model = model;
    }

    /// A context window of `limit` prompt tokens (as the usage model counts them): a valid
    /// request over it gets the real 400 "prompt is too long" (Anthropic) or
    /// `context_length_exceeded` (OpenAI) without consuming a reply. Not a violation: the
    /// client is expected to recover. Counted in [`UsageStats::too_long`].
    pub fn set_context_limit(&self, limit: u64) {
        self.shared.lock().context_limit = Some(limit);
    }

    /// Every request without tools (Anthropic `tool_choice: none`, OpenAI `"none"`, or no
    /// tools at all) is answered with `text` and consumes no scripted reply: what a
    /// compaction or a closing summary asks for, whatever the script holds.
    pub fn set_summary_reply(&self, text: &str) {
        self.shared.lock().summary_reply = Some(text.to_string());
    }

    /// The usage counters so far ([`UsageStats`]).
    pub fn usage_stats(&self) -> UsageStats {
        self.shared.lock().stats
    }

    /// Appends every reply of `replies` ([`MockModel::push`] each).
    pub fn push_all(&self, replies: impl IntoIterator<Item = Reply>) {
        self.shared.lock().replies.extend(replies);
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
        // Every test checks the protocol: a request the real API would refuse fails the test
        // that made it, unless the test said it sends them on purpose. Only in test crates:
        // `examples/mock_model.rs` serves the editors' tests as a process whose exit stays as is.
        if cfg!(test) && !thread::panicking() && !self.shared.violations_expected.load(Ordering::SeqCst) {
            let violations = self.violations();
            assert!(violations.is_empty(), "the mock model refused requests as the real API would: {violations:#?}");
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Api {
    Anthropic,
    OpenAi,
}

/// What the connection thread does with a request.
enum Action {
    Respond(Response),
    Stream(Vec<Chunk>),
    Raw { status: u16, headers: Vec<(String, String)>, chunks: Vec<Chunk> },
    Hang,
}

/// What rendering a reply needs to know about the request.
struct Context {
    api: Api,
    model: String,
    input_tokens: u64,
    /// The cached usage model's figures, which replace the input fields of a message reply.
    usage: Option<PromptUsage>,
    stream: bool,
    include_usage: bool,
    /// [`MockModel::set_llama_cpp_python`]: no usage, tool calls repeated in `function_call`.
    llama_cpp_python: bool,
}

fn serve_connection(stream: TcpStream, shared: &Shared) {
    let _ = stream.set_nodelay(true);
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    loop {
        let request = match http::read_request(&mut reader, &mut writer) {
            Ok(Some(request)) => request,
            Ok(None) => return,
            Err(err) => {
                let message = format!("mock: malformed HTTP request: {err}");
                shared.lock().violations.push(message.clone());
                let response = anthropic_error(400, "invalid_request_error", &message);
                let _ = http::write_response(&mut writer, &response, false);
                return;
            }
        };
        let keep_alive = request.keep_alive;
        let openai = request.path == "/v1/chat/completions";
        match handle(shared, &request) {
            Action::Respond(response) => {
                if http::write_response(&mut writer, &response, keep_alive).is_err() || !keep_alive {
                    let _ = writer.shutdown(Shutdown::Both);
                    return;
                }
            }
            Action::Stream(chunks) => {
                let _ = http::write_stream(&mut writer, &chunks, openai);
                let _ = writer.shutdown(Shutdown::Both);
                return;
            }
            Action::Raw { status, headers, chunks } => {
                let _ = http::write_raw(&mut writer, status, &headers, &chunks, openai);
                let _ = writer.shutdown(Shutdown::Both);
                return;
            }
            Action::Hang => {
                hang(&mut reader, shared);
                let _ = writer.shutdown(Shutdown::Both);
                return;
            }
        }
    }
}

/// Keeps the connection open, discarding anything the client sends, until the client closes it
/// (or the socket fails) or the mock is dropped.
fn hang(reader: &mut BufReader<TcpStream>, shared: &Shared) {
    if reader.get_ref().set_read_timeout(Some(HANG_POLL)).is_err() {
        return;
    }
    let mut buf = [0u8; 4096];
    while !shared.stop.load(Ordering::SeqCst) {
        match reader.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {}
            Err(_) => return,
        }
    }
}

fn anthropic_error(status: u16, error_type: &str, message: &str) -> Response {
    Response { status, headers: Vec::new(), body: error_envelope(error_type, message), openai: false }
}

/// An error the mock produced itself, in the envelope of `api`.
fn mock_error(api: Api, status: u16, error_type: &str, message: &str) -> Response {
    match api {
        Api::Anthropic => anthropic_error(status, error_type, message),
        Api::OpenAi => {
            let error_type = if status >= 500 { "server_error" } else { "invalid_request_error" };
            Response {
                status,
                headers: Vec::new(),
                body: openai::error_body(message, error_type, None, None),
                openai: true,
            }
        }
    }
}

fn handle(shared: &Shared, request: &Request) -> Action {
    let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
    if request.method == "POST" && request.path == "/v1/messages/count_tokens" {
        return Action::Respond(count_tokens(shared, request, body));
    }
    {
        let mut state = shared.lock();
        state.requests.push(Recorded {
            method: request.method.clone(),
            path: request.path.clone(),
            headers: request.headers.clone(),
            body: body.clone(),
        });
        state.times.push(request.arrived);
    }
    if let Some(action) = models(shared, request) {
        return action;
    }
    let lcp = shared.llama_cpp_python.load(Ordering::SeqCst);
    let api = match validated(shared, request, &body, lcp) {
        Ok(api) => api,
        Err(action) => return action,
    };
    let naive_tokens = (request.body.len() / 4).max(1) as u64;
    let (reply, usage) = match next_reply(shared, api, &body, naive_tokens) {
        Ok(r) => r,
        Err(action) => return action,
    };
    let context = Context {
        api,
        model: body["model"].as_str().unwrap_or_default().to_string(),
        input_tokens: naive_tokens,
        usage,
        stream: body["stream"] == Value::Bool(true),
        include_usage: body["stream_options"]["include_usage"] == Value::Bool(true) && !lcp,
        llama_cpp_python: lcp,
    };
    render(shared, reply, &context)
}

/// `GET /v1/models` (llama-cpp-python's list) and `GET /v1/models/{id}`
/// (the lookup `agentfix check` makes), when `request` is one.
fn models(shared: &Shared, request: &Request) -> Option<Action> {
    let lcp = shared.llama_cpp_python.load(Ordering::SeqCst);
    if lcp && request.method == "GET" && request.path.starts_with("/v1/models") {
        let body = if request.path == "/v1/models" {
            json!({"object": "list", "data": [{"id": "smollm2", "object": "model", "owned_by": "me", "permissions": []}]})
        } else {
            json!({"detail": "Not Found"})
        };
        let status = if request.path == "/v1/models" { 200 } else { 404 };
        return Some(Action::Respond(Response { status, headers: Vec::new(), body, openai: true }));
    }
    // Model lookup (`GET /v1/models/{id}`), as `agentfix check` uses it: the
    // Anthropic form (x-api-key) or the OpenAI form (Bearer).
    if request.method == "GET"
        && let Some(id) = request.path.strip_prefix("/v1/models/")
    {
        let header = |name: &str| request.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
        let anthropic = header("anthropic-version").is_some();
        let authorized = if anthropic {
            header("x-api-key") == Some(API_KEY)
        } else {
            header("authorization") == Some(format!("Bearer {API_KEY}").as_str())
                || shared.openai_auth_optional.load(Ordering::SeqCst)
        };
        let api = if anthropic { Api::Anthropic } else { Api::OpenAi };
        if !authorized {
            return Some(Action::Respond(mock_error(api, 401, "authentication_error", "invalid x-api-key")));
        }
        let body = if anthropic {
            serde_json::json!({"type": "model", "id": id, "display_name": id})
        } else {
            serde_json::json!({"object": "model", "id": id, "owned_by": "mock"})
        };
        return Some(Action::Respond(Response { status: 200, headers: Vec::new(), body, openai: !anthropic }));
    }
    None
}

/// The API `request` is for, once it passes the real API's validation (and
/// llama-cpp-python's refusals when it plays that server); else the answer.
fn validated(shared: &Shared, request: &Request, body: &Value, lcp: bool) -> Result<Api, Action> {
    let api = match (request.method.as_str(), request.path.as_str()) {
        ("POST", "/v1/messages") => Api::Anthropic,
        ("POST", "/v1/chat/completions") => Api::OpenAi,
        _ => {
            let message = format!("Not found: {} {}", request.method, request.path);
            shared.lock().violations.push(message.clone());
            return Err(Action::Respond(anthropic_error(404, "not_found_error", &message)));
        }
    };
    let rejected = match api {
        Api::Anthropic => anthropic::validate(request, body, Endpoint::Messages)
            .map_err(|(status, error_type, message)| {
                let response = anthropic_error(status, error_type, &message);
                (message, response)
            })
            .err(),
        Api::OpenAi => {
            let optional = shared.openai_auth_optional.load(Ordering::SeqCst);
            openai::validate(request, body, optional)
                .map_err(|invalid| {
                    let response =
                        Response { status: invalid.status, headers: Vec::new(), body: invalid.body(), openai: true };
                    (invalid.message, response)
                })
                .err()
        }
    };
    if let Some((message, response)) = rejected {
        shared.lock().violations.push(message);
        return Err(Action::Respond(response));
    }
    if lcp && api == Api::OpenAi {
        if let Some(refusal) = openai::llama_cpp_python_refusal(body) {
            let message = refusal["error"]["message"].as_str().unwrap_or_default().to_string();
            shared.lock().violations.push(format!("llama-cpp-python: {message}"));
            return Err(Action::Respond(Response { status: 500, headers: Vec::new(), body: refusal, openai: true }));
        }
        if body["stream"] == true && allows_tools(api, body) && body["tool_choice"] == "auto" {
            return Err(Action::Stream(vec![Chunk::Raw(": ping - 2026-12-01 08:06:20.134805+00:00\n\n".into())]));
        }
    }
    Ok(api)
}

/// The next scripted reply (or the summary reply) and the usage it reports,
/// with the statistics counted; else the answer (a prompt over the context
/// limit, no reply left).
fn next_reply(
    shared: &Shared,
    api: Api,
    body: &Value,
    naive_tokens: u64,
) -> Result<(Reply, Option<PromptUsage>), Action> {
    let mut state = shared.lock();
    let usage = match state.usage_model {
        UsageModel::Naive => None,
        UsageModel::Cached { min_cache_tokens } => Some(match api {
            Api::Anthropic => usage::anthropic_usage(body, &state.cache, min_cache_tokens),
            Api::OpenAi => usage::openai_usage(body, &state.cache, min_cache_tokens),
        }),
    };
    let prompt = usage.as_ref().map_or(naive_tokens, |u| u.total);
    state.stats.largest_request = state.stats.largest_request.max(prompt);
    if let Some(limit) = state.context_limit
        && prompt > limit
    {
        state.stats.too_long += 1;
        return Err(Action::Respond(prompt_too_long(api, prompt, limit)));
    }
    let summary = state.summary_reply.clone().filter(|_| !allows_tools(api, body));
    let Some(reply) = summary
        .map(|text| match api {
            Api::Anthropic => text_reply(&text),
            Api::OpenAi => openai::openai_text(&text),
        })
        .or_else(|| {
            let text = body.to_string();
            let routed =
                state.routed.iter_mut().find(|(m, q)| !q.is_empty() && m.iter().all(|m| text.contains(m.as_str())));
            routed.and_then(|(_, q)| q.pop_front())
        })
        .or_else(|| state.replies.pop_front())
    else {
        return Err(Action::Respond(mock_error(api, 500, "api_error", "mock: no scripted reply left")));
    };
    let cached_before =
        std::mem::replace(&mut state.cached_prefix, usage.as_ref().map_or(0, |u| u.cache_read + u.cache_write));
    let stats = &mut state.stats;
    stats.requests += 1;
    stats.naive_input += prompt;
    match &usage {
        None => stats.input += prompt,
        Some(u) => {
            stats.input += u.input;
            stats.cache_read += u.cache_read;
            stats.cache_write += u.cache_write;
            stats.rebuilds += u64::from(u.cache_read < cached_before && u.cache_write > 0);
        }
    }
    if let Some(u) = &usage {
        state.cache.commit(u);
    }
    Ok((reply, usage))
}

/// `POST /v1/messages/count_tokens`: recorded apart, validated like `/v1/messages`, answered
/// with the prompt tokens `/v1/messages` would report for the same prompt: the canonical count
/// with [`UsageModel::Cached`]; with [`UsageModel::Naive`] this body's length / 4 (a few tokens
/// short of the Messages body's, which also carries `max_tokens` and `stream`). No reply is
/// consumed, no usage counted, and the context limit does not apply (the real endpoint counts
/// a prompt of any length).
fn count_tokens(shared: &Shared, request: &Request, body: Value) -> Response {
    let mut state = shared.lock();
    state.count_requests.push(Recorded {
        method: request.method.clone(),
        path: request.path.clone(),
        headers: request.headers.clone(),
        body: body.clone(),
    });
    if let Err((status, error_type, message)) = anthropic::validate(request, &body, Endpoint::CountTokens) {
        state.violations.push(message.clone());
        return anthropic_error(status, error_type, &message);
    }
    let input_tokens = match state.usage_model {
        UsageModel::Naive => (request.body.len() / 4).max(1) as u64,
        UsageModel::Cached { .. } => usage::anthropic_prompt_tokens(&body),
    };
    Response { status: 200, headers: Vec::new(), body: json!({"input_tokens": input_tokens}), openai: false }
}

/// Whether a request lets the model call tools.
fn allows_tools(api: Api, body: &Value) -> bool {
    let has_tools = body["tools"].as_array().is_some_and(|t| !t.is_empty());
    let none = match api {
        Api::Anthropic => body["tool_choice"]["type"] == "none",
        Api::OpenAi => body["tool_choice"] == "none",
    };
    has_tools && !none
}

/// The real answer to a prompt over the context window, in the envelope of `api`.
fn prompt_too_long(api: Api, prompt: u64, limit: u64) -> Response {
    match api {
        Api::Anthropic => anthropic_error(
            400,
            "invalid_request_error",
            &format!("prompt is too long: {prompt} tokens > {limit} maximum"),
        ),
        Api::OpenAi => Response {
            status: 400,
            headers: Vec::new(),
            body: openai::error_body(
                &format!(
                    "This model's maximum context length is {limit} tokens. However, your messages resulted in {prompt} tokens. Please reduce the length of the messages."
                ),
                "invalid_request_error",
                Some("messages"),
                Some("context_length_exceeded"),
            ),
            openai: true,
        },
    }
}

/// A null model / input-token count filled in, for a message or completion object.
fn fill(body: Value, context: &Context) -> Value {
    if body["type"] == "message" {
        let body = anthropic::fill_message(body, &context.model, context.input_tokens);
        match &context.usage {
            Some(usage) => anthropic::apply_usage(body, usage),
            None => body,
        }
    } else if body["object"] == "chat.completion" {
        let body = openai::fill_completion(body, &context.model, context.input_tokens);
        match &context.usage {
            Some(usage) => openai::apply_usage(body, usage),
            None => body,
        }
    } else {
        body
    }
}

fn render(shared: &Shared, reply: Reply, context: &Context) -> Action {
    let openai = context.api == Api::OpenAi;
    match reply {
        Reply::Message(body) => {
            let mismatch = match context.api {
                Api::Anthropic => body["object"] == "chat.completion",
                Api::OpenAi => body["type"] == "message",
            };
            if mismatch {
                let path = if openai { "/v1/chat/completions" } else { "/v1/messages" };
                let message = format!("mock: the scripted reply does not belong to {path}");
                return Action::Respond(mock_error(context.api, 500, "api_error", &message));
            }
            let body = match context.api {
                Api::Anthropic => anthropic::fill_message(body, &context.model, context.input_tokens),
                Api::OpenAi => openai::fill_completion(body, &context.model, context.input_tokens),
            };
            let body = match (&context.usage, context.api) {
                (None, _) => body,
                (Some(usage), Api::Anthropic) => anthropic::apply_usage(body, usage),
                (Some(usage), Api::OpenAi) => openai::apply_usage(body, usage),
            };
            if context.stream {
                return Action::Stream(match context.api {
                    Api::Anthropic => sse_events(&body),
                    Api::OpenAi => openai_sse_chunks(&body, context.include_usage),
                });
            }
            let body = if context.llama_cpp_python { openai::as_llama_cpp_python(body) } else { body };
            Action::Respond(Response { status: 200, headers: Vec::new(), body, openai })
        }
        Reply::Status { status, headers, body } => {
            let body = fill(body, context);
            let body = if openai { openai::translate_error(body) } else { body };
            Action::Respond(Response { status, headers, body, openai })
        }
        Reply::Delay(delay, inner) => {
            thread::sleep(delay);
            render(shared, *inner, context)
        }
        Reply::Sse(chunks) => {
            if !context.stream {
                let message = "mock: SSE scripted but request is not streaming";
                shared.lock().violations.push(message.into());
                return Action::Respond(mock_error(context.api, 400, "invalid_request_error", message));
            }
            let chunks = chunks
                .into_iter()
                .map(|chunk| match context.api {
                    Api::Anthropic => anthropic::fill_chunk(chunk, &context.model, context.input_tokens),
                    Api::OpenAi => openai::fill_chunk(chunk, &context.model),
                })
                .collect();
            Action::Stream(chunks)
        }
        Reply::Raw { status, headers, chunks } => Action::Raw { status, headers, chunks },
        Reply::Hang => Action::Hang,
    }
}
