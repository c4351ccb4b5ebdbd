//! LSP framing and decoding, and the transport's reader and writer
//! threads (`lsp::transport`).
//!
//! The frames are read by `agentfix_lsp_framing` (the framer of the whole
//! workspace) and decoded by `agentfix::lsp::transport` (public for this
//! target): the same code the server runs.
//!
//! Input: a sequence of pieces (well-framed JSON-RPC-ish messages with
//! fuzzed headers and bodies, or raw bytes), read in fuzz-chosen read
//! sizes. Checks:
//!
//! 1. reading frames ends once the input ends, and never panics;
//! 2. a frame that is not a message is answered with a `-32700` or
//!    `-32600` error;
//! 3. a frame the fuzzer built well-formed with a valid body decodes to the
//!    message it holds (its `jsonrpc`, `id`, `method`, `params`, `result`),
//!    in order, and an invalid one is refused;
//! 4. the whole input, followed by one request of our own, read by the real
//!    reader thread in front of a real tower-lsp-server service, gets that
//!    request answered through the real writer thread: nothing stops the
//!    transport. (Skipped when the input holds an `exit` notification,
//!    after which reading stops by design, and when it ends inside a
//!    message, which then takes our request as its rest.)

#![no_main]

use agentfix::lsp::transport;
use agentfix_lsp_framing::SyncFrames;
use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};
use tower_lsp_server::jsonrpc::Result as RpcResult;
use tower_lsp_server::ls_types::{InitializeParams, InitializeResult};
use tower_lsp_server::{LanguageServer, LspService};

mod common;

#[derive(Debug, Arbitrary)]
enum Piece {
    /// A frame with a correct `Content-Length` and a body.
    Frame { extra_headers: Vec<Header>, body: Body, blank_lines_before: u8 },
    /// A frame whose declared length is off by `delta`.
    BadLength { delta: i16, body: Body },
    /// Anything at all.
    Raw(Vec<u8>),
}

#[derive(Debug, Arbitrary)]
enum Header {
    ContentType(CharSet),
    LowerCaseLength,
    Other(String),
    Garbage(Vec<u8>),
}

#[derive(Debug, Arbitrary)]
enum CharSet {
    Utf8,
    Utf8NoDash,
    Utf16,
    None,
    Any(String),
}

#[derive(Debug, Arbitrary)]
enum Body {
    Message(Msg),
    Json(J),
    Bytes(Vec<u8>),
    Text(String),
}

/// A JSON-RPC-shaped object with fuzzed members.
#[derive(Debug, Arbitrary)]
struct Msg {
    jsonrpc: Option<J>,
    id: Option<J>,
    method: Option<J>,
    params: Option<J>,
    result: Option<J>,
    error: Option<J>,
    extra: Vec<(Key, J)>,
    /// Emit one member twice (JSON allows it; decoders disagree).
    duplicate: Option<u8>,
}

#[derive(Debug, Arbitrary)]
enum Key {
    Known(KnownKey),
    Any(String),
}

#[derive(Debug, Arbitrary, Clone, Copy)]
enum KnownKey {
    Jsonrpc,
    Id,
    Method,
    Params,
    Result,
    Error,
    Code,
    Message,
    Data,
}

impl KnownKey {
    fn name(self) -> &'static str {
        match self {
            KnownKey::Jsonrpc => "jsonrpc",
            KnownKey::Id => "id",
            KnownKey::Method => "method",
            KnownKey::Params => "params",
            KnownKey::Result => "result",
            KnownKey::Error => "error",
            KnownKey::Code => "code",
            KnownKey::Message => "message",
            KnownKey::Data => "data",
        }
    }
}

/// A JSON value, biased towards the values JSON-RPC members take.
#[derive(Debug, Arbitrary)]
enum J {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    /// A literal number text, e.g. `1e400`, `-0`, `1.0`.
    NumberText(NumberText),
    Str(Word),
    Arr(Vec<J>),
    Obj(Vec<(Key, J)>),
    ErrorObject {
        code: Box<J>,
        message: Box<J>,
    },
}

#[derive(Debug, Arbitrary)]
enum NumberText {
    Big,
    Exp,
    NegZero,
    OnePointZero,
    Huge,
}

#[derive(Debug, Arbitrary)]
enum Word {
    V2,
    Initialize,
    Shutdown,
    Exit,
    DidOpen,
    DidChange,
    CancelRequest,
    /// The internal notification an earlier transport made of bad input.
    Invalid,
    Dollar(String),
    Any(String),
}

impl Word {
    fn text(&self) -> String {
        match self {
            Word::V2 => "2.0".into(),
            Word::Initialize => "initialize".into(),
            Word::Shutdown => "shutdown".into(),
            // Kept out of the end-to-end check (see check 4).
            Word::Exit => "exit".into(),
            Word::DidOpen => "textDocument/didOpen".into(),
            Word::DidChange => "textDocument/didChange".into(),
            Word::CancelRequest => "$/cancelRequest".into(),
            Word::Invalid => "$/agentfix/invalidMessage".into(),
            Word::Dollar(s) => format!("$/{s}"),
            Word::Any(s) => s.clone(),
        }
    }
}

fn key_text(k: &Key) -> String {
    match k {
        Key::Known(k) => k.name().to_string(),
        Key::Any(s) => s.clone(),
    }
}

/// JSON text of `j` (numbers may be written in ways `Value` cannot hold).
fn write_json(j: &J, out: &mut String, depth: usize) {
    if depth > 20 {
        out.push_str("null");
        return;
    }
    match j {
        J::Null => out.push_str("null"),
        J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        J::Int(i) => out.push_str(&i.to_string()),
        J::UInt(u) => out.push_str(&u.to_string()),
        J::Float(f) => out.push_str(&json!(f).to_string()),
        J::NumberText(n) => out.push_str(match n {
            NumberText::Big => "18446744073709551616",
            NumberText::Exp => "1e3",
            NumberText::NegZero => "-0",
            NumberText::OnePointZero => "1.0",
            NumberText::Huge => "1e400",
        }),
        J::Str(w) => out.push_str(&Value::String(w.text()).to_string()),
        J::Arr(items) => {
            out.push('[');
            for (i, it) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(it, out, depth + 1);
            }
            out.push(']');
        }
        J::Obj(members) => {
            out.push('{');
            for (i, (k, v)) in members.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key_text(k)).to_string());
                out.push(':');
                write_json(v, out, depth + 1);
            }
            out.push('}');
        }
        J::ErrorObject { code, message } => {
            out.push_str("{\"code\":");
            write_json(code, out, depth + 1);
            out.push_str(",\"message\":");
            write_json(message, out, depth + 1);
            out.push('}');
        }
    }
}

fn msg_text(m: &Msg) -> String {
    let mut members: Vec<(String, &J)> = Vec::new();
    let known = [
        ("jsonrpc", &m.jsonrpc),
        ("id", &m.id),
        ("method", &m.method),
        ("params", &m.params),
        ("result", &m.result),
        ("error", &m.error),
    ];
    for (k, v) in known {
        if let Some(v) = v {
            members.push((k.to_string(), v));
        }
    }
    for (k, v) in &m.extra {
        members.push((key_text(k), v));
    }
    if let Some(d) = m.duplicate
        && !members.is_empty()
    {
        let i = d as usize % members.len();
        let (k, v) = (members[i].0.clone(), members[i].1);
        members.push((k, v));
    }
    let mut out = String::from("{");
    for (i, (k, v)) in members.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&Value::String(k.clone()).to_string());
        out.push(':');
        write_json(v, &mut out, 0);
    }
    out.push('}');
    out
}

fn body_bytes(b: &Body) -> Vec<u8> {
    match b {
        Body::Message(m) => msg_text(m).into_bytes(),
        Body::Json(j) => {
            let mut s = String::new();
            write_json(j, &mut s, 0);
            s.into_bytes()
        }
        Body::Bytes(b) => b.clone(),
        Body::Text(t) => t.clone().into_bytes(),
    }
}

#[derive(Debug, Arbitrary)]
struct Input {
    pieces: Vec<Piece>,
    /// Sizes of the reads the sanitizer's input returns (cycled).
    reads: Vec<u8>,
}

/// An in-memory reader that hands out its data in the given read sizes.
struct Chunked {
    data: Vec<u8>,
    pos: usize,
    sizes: Vec<usize>,
    next: usize,
}

impl std::io::Read for Chunked {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.data.len() - self.pos;
        let mut n = if self.sizes.is_empty() { left } else { self.sizes[self.next % self.sizes.len()] };
        self.next += 1;
        n = n.min(left).min(buf.len());
        buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// What a well-formed frame built by the fuzzer must come out as.
fn expected_forward(body: &[u8]) -> bool {
    // A body the sanitizer must let through unchanged: a JSON-RPC 2.0
    // request/notification with a string method and a structured or absent
    // params, or a response. Decided here with `Value` like the sanitizer
    // does; check 4 is what tells whether the decoder agrees.
    let Ok(v) = serde_json::from_slice::<Value>(body) else { return false };
    let Some(o) = v.as_object() else { return false };
    if o.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return false;
    }
    let has_method = o.get("method").is_some_and(Value::is_string);
    let is_response = o.contains_key("id") && (o.contains_key("result") || o.contains_key("error"));
    let params_ok = o.get("params").is_none_or(|p| p.is_object() || p.is_array() || p.is_null());
    (has_method || is_response) && params_ok
}

struct Backend;

impl LanguageServer for Backend {
    async fn initialize(&self, _: InitializeParams) -> RpcResult<InitializeResult> {
        Ok(InitializeResult::default())
    }
    async fn shutdown(&self) -> RpcResult<()> {
        Ok(())
    }
}

const END_ID: &str = "agentfix-fuzz-end";

fuzz_target!(|input: Input| {
    let mut data = Vec::new();
    // Bodies of frames that must pass unchanged, in order, when every piece
    // is a well-formed frame (raw pieces can swallow what follows them).
    let mut all_framed = true;
    let mut must_forward: Vec<Option<Vec<u8>>> = Vec::new();
    for p in &input.pieces {
        match p {
            Piece::Frame { extra_headers, body, blank_lines_before } => {
                for _ in 0..(*blank_lines_before % 3) {
                    data.extend_from_slice(b"\r\n");
                }
                let body = body_bytes(body);
                let mut lower = false;
                let mut headers = Vec::new();
                let mut clean = true;
                for h in extra_headers {
                    match h {
                        Header::ContentType(cs) => {
                            let v = match cs {
                                CharSet::Utf8 => "application/vscode-jsonrpc; charset=utf-8".to_string(),
                                CharSet::Utf8NoDash => "application/vscode-jsonrpc; charset=utf8".to_string(),
                                CharSet::Utf16 => "application/vscode-jsonrpc; charset=utf-16".to_string(),
                                CharSet::None => "application/vscode-jsonrpc".to_string(),
                                CharSet::Any(s) => s.replace(['\r', '\n'], " "),
                            };
                            headers.extend_from_slice(format!("Content-Type: {v}\r\n").as_bytes());
                        }
                        Header::LowerCaseLength => lower = true,
                        Header::Other(s) => {
                            let s = s.replace(['\r', '\n'], " ");
                            if s.trim().is_empty() || s.to_ascii_lowercase().contains("content-length") {
                                clean = false;
                            }
                            headers.extend_from_slice(format!("X-{s}: 1\r\n").as_bytes());
                        }
                        Header::Garbage(g) => {
                            clean = false;
                            headers.extend_from_slice(g);
                            headers.extend_from_slice(b"\r\n");
                        }
                    }
                }
                let name = if lower { "content-length" } else { "Content-Length" };
                data.extend_from_slice(format!("{name}: {}\r\n", body.len()).as_bytes());
                data.extend_from_slice(&headers);
                data.extend_from_slice(b"\r\n");
                data.extend_from_slice(&body);
                if clean && headers.len() < 8000 {
                    must_forward.push(expected_forward(&body).then_some(body));
                } else {
                    all_framed = false;
                }
            }
            Piece::BadLength { delta, body } => {
                let body = body_bytes(body);
                let len = (body.len() as i64 + *delta as i64).max(0);
                data.extend_from_slice(format!("Content-Length: {len}\r\n\r\n").as_bytes());
                data.extend_from_slice(&body);
                all_framed = false;
            }
            Piece::Raw(bytes) => {
                data.extend_from_slice(bytes);
                all_framed = false;
            }
        }
    }
    let sizes: Vec<usize> = input.reads.iter().map(|&s| s as usize + 1).collect();

    // 1. Reading ends once the input ends, and never panics.
    let mut frames = SyncFrames::new(Chunked { data: data.clone(), pos: 0, sizes: sizes.clone(), next: 0 });
    let mut decoded = Vec::new();
    while let Some(frame) = frames.next_frame().expect("in-memory reads do not fail") {
        decoded.push(transport::decode_frame(frame, None));
    }

    // 2. Every error answers with a JSON-RPC error code of the two.
    let mut has_exit = false;
    for d in &decoded {
        match d {
            Ok(transport::Incoming::Request(r)) => has_exit |= r.method() == "exit",
            Ok(transport::Incoming::Response(_)) => {}
            Err(answer) => {
                let code = answer.error().expect("an answer to a bad message is an error").code.code();
                assert!(code == -32700 || code == -32600, "unexpected error code {code}");
            }
        }
    }

    // 3. Well-formed frames decode to what they say, in order.
    if all_framed {
        assert_eq!(decoded.len(), must_forward.len(), "one message or error per input frame");
        for (got, want) in decoded.iter().zip(&must_forward) {
            match (got, want) {
                (Ok(message), Some(want)) => {
                    let want: Value = serde_json::from_slice(want).unwrap();
                    // The members each kind has (a request's `result`, or
                    // a response's `method`, is not part of it; a response's
                    // error is decoded whole, so its extra members may go).
                    let (got, members) = match message {
                        transport::Incoming::Request(r) => {
                            (serde_json::to_value(r).unwrap(), &["jsonrpc", "id", "method", "params"][..])
                        }
                        transport::Incoming::Response(r) => {
                            (serde_json::to_value(r).unwrap(), &["jsonrpc", "id", "result"][..])
                        }
                    };
                    for member in members {
                        assert_eq!(got.get(member), want.get(member), "`{member}` of a valid message changed");
                    }
                }
                (Err(_), Some(want)) => {
                    let want = String::from_utf8_lossy(want);
                    // Refused rightly: a response that is not one
                    // tower-lsp-server can take (no string method), or an id
                    // that is not a string, an integer in i64 or null.
                    let v: Value = serde_json::from_str(&want).unwrap_or_default();
                    let response = v.get("method").is_none_or(|m| !m.is_string());
                    let bad_id = v.get("id").is_some_and(|id| !(id.is_string() || id.is_i64() || id.is_null()));
                    assert!(response || bad_id, "a valid message was refused: {want}");
                }
                (Ok(_), None) => panic!("an invalid message was taken"),
                (Err(_), None) => {}
            }
        }
    }

    // 4. The real transport, in front of a real tower-lsp-server service,
    // reads all of it and still answers a request of our own after it.
    // Only when the input ends where a message ends: an input cut inside
    // headers or a body takes our request as the rest of its own.
    let cut = decoded.last().is_some_and(|d| {
        d.as_ref().err().and_then(|e| e.error()).is_some_and(|e| e.message.starts_with("input ended inside"))
    });
    if has_exit || cut {
        return;
    }
    let end = json!({"jsonrpc": "2.0", "id": END_ID, "method": "agentfix/fuzzEnd"}).to_string();
    data.extend_from_slice(&agentfix_lsp_framing::frame(end.as_bytes()));
    let output = Shared::default();
    let rt = common::runtime();
    rt.block_on(async {
        let (service, socket) = LspService::new(|_client| Backend);
        let (server_messages, client_responses) = socket.split();
        let writer = transport::start_writer(output.clone(), server_messages).unwrap();
        let (ended_tx, ended) = tokio::sync::oneshot::channel();
        let reader = Chunked { data, pos: 0, sizes, next: 0 };
        transport::start_reader(transport::Input::new(reader), service, client_responses, writer.clone(), None, 4, move || {
            let _ = ended_tx.send(());
        })
        .unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(20), ended)
            .await
            .expect("the reader did not stop after its input ended")
            .unwrap();
        // Answers still on their way.
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        tokio::task::spawn_blocking(move || writer.flush(std::time::Duration::from_secs(20))).await.unwrap();
    });
    let answered = String::from_utf8_lossy(&output.0.lock().unwrap()).into_owned();
    assert!(
        answered.contains(&format!("\"id\":\"{END_ID}\"")),
        "the server stopped reading: a message broke the transport; server output: {answered}"
    );
});

/// A `Write` into memory that the test keeps a handle on.
#[derive(Clone, Default)]
struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
