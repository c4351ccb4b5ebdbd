//! LSP framing and the stdin sanitizer (`lsp::transport::sanitize_with`,
//! without a stash: fuzz inputs never reach its 1 MB `didOpen` threshold).
//!
//! `agentfix::lsp::transport` is a private module, so its source file is
//! compiled into this target as it is (`#[path]` below): the same code the
//! server runs, nothing copied. Once the library exposes `sanitize`, use
//! `agentfix::lsp::...` instead.
//!
//! Input: a sequence of pieces (well-framed JSON-RPC-ish messages with
//! fuzzed headers and bodies, or raw bytes), fed to the sanitizer in
//! fuzz-chosen read sizes. Checks:
//!
//! 1. `sanitize` ends once its input ends, and never panics;
//! 2. its output is a sequence of `Content-Length: N\r\n\r\n` frames whose
//!    bodies are JSON-RPC 2.0 objects (a request, notification or response),
//!    with nothing left over;
//! 3. a frame the fuzzer built well-formed with a valid body is forwarded
//!    byte for byte, in order;
//! 4. every output body decodes as tower-lsp-server's `jsonrpc::Request`
//!    or `jsonrpc::Response` (its decoder's `Message` is exactly one of
//!    the two), and the output, followed by one request of our own, fed to
//!    tower-lsp-server's real `Server` (the decoder the sanitizer guards),
//!    gets that request answered: nothing the sanitizer lets through stops
//!    the server. (Skipped when the output holds an `exit` notification,
//!    after which the server stops by design.)

#![no_main]

use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, ReadBuf};
use tower_lsp_server::jsonrpc::{Request, Response, Result as RpcResult};
use tower_lsp_server::ls_types::{InitializeParams, InitializeResult};
use tower_lsp_server::{LanguageServer, LspService, Server};

#[path = "../../src/lsp/transport.rs"]
#[allow(dead_code)]
mod transport;

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
            Word::Invalid => transport::INVALID_MESSAGE.into(),
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

impl AsyncRead for Chunked {
    fn poll_read(mut self: Pin<&mut Self>, _: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        let left = this.data.len() - this.pos;
        let mut n = if this.sizes.is_empty() { left } else { this.sizes[this.next % this.sizes.len()] };
        this.next += 1;
        n = n.min(left).min(buf.remaining());
        buf.put_slice(&this.data[this.pos..this.pos + n]);
        this.pos += n;
        Poll::Ready(Ok(()))
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

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap())
}

/// Splits the sanitizer's output into frame bodies; panics on anything else.
fn frames(mut rest: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while !rest.is_empty() {
        let head_end = rest.windows(4).position(|w| w == b"\r\n\r\n").expect("output frame without header end");
        let head = std::str::from_utf8(&rest[..head_end]).expect("output header is not UTF-8");
        let len: usize = head
            .strip_prefix("Content-Length: ")
            .unwrap_or_else(|| panic!("output header is not one Content-Length: {head:?}"))
            .parse()
            .expect("output Content-Length is not a number");
        let body = &rest[head_end + 4..];
        assert!(body.len() >= len, "output frame body shorter than its Content-Length");
        out.push(body[..len].to_vec());
        rest = &body[len..];
    }
    out
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
    let reader = Chunked { data, pos: 0, sizes, next: 0 };

    let rt = runtime();
    let mut out = Vec::new();
    rt.block_on(async {
        tokio::time::timeout(std::time::Duration::from_secs(20), transport::sanitize_with(reader, &mut out, None))
            .await
            .expect("sanitize did not end after its input ended");
    });

    // 2. Framing and JSON-RPC shape of every output message.
    let bodies = frames(&out);
    let mut has_exit = false;
    for b in &bodies {
        let v: Value = serde_json::from_slice(b).expect("output body is not JSON");
        let o = v.as_object().expect("output body is not an object");
        assert_eq!(o.get("jsonrpc").and_then(Value::as_str), Some("2.0"), "output without jsonrpc 2.0");
        let has_method = o.get("method").is_some_and(Value::is_string);
        let is_response = o.contains_key("id") && (o.contains_key("result") || o.contains_key("error"));
        assert!(has_method || is_response, "output is neither a request nor a response");
        if o.get("method").and_then(Value::as_str) == Some("exit") {
            has_exit = true;
        }
    }

    // 3. Well-formed frames pass unchanged and in order.
    if all_framed {
        assert_eq!(bodies.len(), must_forward.len(), "one output frame per input frame");
        for (got, want) in bodies.iter().zip(&must_forward) {
            match want {
                Some(want) => assert_eq!(got, want, "a valid message was not forwarded unchanged"),
                None => {
                    let v: Value = serde_json::from_slice(got).unwrap();
                    assert_eq!(v["method"], transport::INVALID_MESSAGE, "an invalid message was forwarded");
                }
            }
        }
    }

    // 4. tower-lsp-server's decoder takes all of it and still answers.
    for b in &bodies {
        let text = std::str::from_utf8(b).expect("output body is not UTF-8");
        assert!(
            serde_json::from_str::<Response>(text).is_ok() || serde_json::from_str::<Request>(text).is_ok(),
            "the sanitizer let through a message tower-lsp-server cannot decode (its server then stops reading): {text}"
        );
    }
    if has_exit {
        return;
    }
    let end = json!({"jsonrpc": "2.0", "id": END_ID, "method": "agentfix/fuzzEnd"}).to_string();
    out.extend_from_slice(format!("Content-Length: {}\r\n\r\n{end}", end.len()).as_bytes());
    let answered = rt.block_on(async {
        let (service, socket) = LspService::new(|_client| Backend);
        let mut responses = Vec::new();
        let stdin: &[u8] = &out;
        tokio::time::timeout(
            std::time::Duration::from_secs(20),
            Server::new(stdin, &mut responses, socket).serve(service),
        )
        .await
        .expect("the server did not stop after its input ended");
        let text = String::from_utf8_lossy(&responses).into_owned();
        text
    });
    assert!(
        answered.contains(&format!("\"id\":\"{END_ID}\"")),
        "the server stopped reading: a message the sanitizer let through broke tower-lsp-server's decoder; \
         server output: {answered}"
    );
});
