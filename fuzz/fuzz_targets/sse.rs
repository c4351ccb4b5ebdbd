//! SSE assembly of both providers.
//!
//! The stream assemblers (`Accumulator` in `providers::anthropic` and
//! `providers::openai`) are private, so this target reaches them the way the
//! server does: `ModelClient::complete` of `providers::Anthropic` and
//! `providers::OpenAi`, against an HTTP server of its own on 127.0.0.1 that
//! answers every request with the fuzzed body (loopback only; no retries).
//! It also fuzzes what is public on the side: `eventsource_stream` over the
//! same body in fuzz-chosen chunks (split mid-line and mid-UTF-8), and the
//! public decoders `anthropic::decode_response` and
//! `openai::decode_completion` on every event's JSON.
//!
//! Checks: nothing panics (a panic is a crash: the run would end with an
//! internal error instead of a retryable stream error); a chunked parse gives
//! the same events as a whole-body parse; `complete` returns (Ok or Err)
//! within the idle timeout.

#![no_main]

use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use agentfix::model::{Message, ModelRequest, StreamUpdate};
use agentfix::providers::openai::Flavor;
use agentfix::providers::{Anthropic, Endpoint, ModelClient, OpenAi, anthropic, openai};
use arbitrary::Arbitrary;
use eventsource_stream::Eventsource;
use futures::StreamExt;
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

// ---- fuzzed bodies -------------------------------------------------------

#[derive(Debug, Arbitrary)]
enum Word {
    // Anthropic event and block types.
    MessageStart,
    ContentBlockStart,
    ContentBlockDelta,
    ContentBlockStop,
    MessageDelta,
    MessageStop,
    Ping,
    Error,
    Text,
    ToolUse,
    Thinking,
    TextDelta,
    InputJsonDelta,
    ThinkingDelta,
    SignatureDelta,
    CitationsDelta,
    EndTurn,
    MaxTokens,
    Refusal,
    PauseTurn,
    // OpenAI.
    Done,
    Stop,
    Length,
    ToolCalls,
    ContentFilter,
    Function,
    // Anything.
    Json(String),
    Any(String),
}

impl Word {
    fn text(&self) -> String {
        match self {
            Word::MessageStart => "message_start",
            Word::ContentBlockStart => "content_block_start",
            Word::ContentBlockDelta => "content_block_delta",
            Word::ContentBlockStop => "content_block_stop",
            Word::MessageDelta => "message_delta",
            Word::MessageStop => "message_stop",
            Word::Ping => "ping",
            Word::Error => "error",
            Word::Text => "text",
            Word::ToolUse => "tool_use",
            Word::Thinking => "thinking",
            Word::TextDelta => "text_delta",
            Word::InputJsonDelta => "input_json_delta",
            Word::ThinkingDelta => "thinking_delta",
            Word::SignatureDelta => "signature_delta",
            Word::CitationsDelta => "citations_delta",
            Word::EndTurn => "end_turn",
            Word::MaxTokens => "max_tokens",
            Word::Refusal => "refusal",
            Word::PauseTurn => "pause_turn",
            Word::Done => "[DONE]",
            Word::Stop => "stop",
            Word::Length => "length",
            Word::ToolCalls => "tool_calls",
            Word::ContentFilter => "content_filter",
            Word::Function => "function",
            Word::Json(s) => return format!("{{\"a\":{}", Value::String(s.clone())),
            Word::Any(s) => return s.clone(),
        }
        .to_string()
    }
}

#[derive(Debug, Arbitrary)]
enum Key {
    Type,
    Index,
    Message,
    ContentBlock,
    Delta,
    Text,
    PartialJson,
    Thinking,
    Signature,
    Citation,
    Citations,
    Input,
    Name,
    Id,
    Content,
    StopReason,
    StopDetails,
    Usage,
    InputTokens,
    OutputTokens,
    Choices,
    ToolCalls,
    FunctionCall,
    Function,
    Arguments,
    FinishReason,
    Refusal,
    PromptTokens,
    CompletionTokens,
    ErrorKey,
    Any(String),
}

impl Key {
    fn text(&self) -> &str {
        match self {
            Key::Type => "type",
            Key::Index => "index",
            Key::Message => "message",
            Key::ContentBlock => "content_block",
            Key::Delta => "delta",
            Key::Text => "text",
            Key::PartialJson => "partial_json",
            Key::Thinking => "thinking",
            Key::Signature => "signature",
            Key::Citation => "citation",
            Key::Citations => "citations",
            Key::Input => "input",
            Key::Name => "name",
            Key::Id => "id",
            Key::Content => "content",
            Key::StopReason => "stop_reason",
            Key::StopDetails => "stop_details",
            Key::Usage => "usage",
            Key::InputTokens => "input_tokens",
            Key::OutputTokens => "output_tokens",
            Key::Choices => "choices",
            Key::ToolCalls => "tool_calls",
            Key::FunctionCall => "function_call",
            Key::Function => "function",
            Key::Arguments => "arguments",
            Key::FinishReason => "finish_reason",
            Key::Refusal => "refusal",
            Key::PromptTokens => "prompt_tokens",
            Key::CompletionTokens => "completion_tokens",
            Key::ErrorKey => "error",
            Key::Any(s) => s,
        }
    }
}

#[derive(Debug, Arbitrary)]
enum J {
    Null,
    Bool(bool),
    Small(u8),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(Word),
    Arr(Vec<J>),
    Obj(Vec<(Key, J)>),
}

fn j(v: &J, depth: usize) -> Value {
    if depth > 8 {
        return Value::Null;
    }
    match v {
        J::Null => Value::Null,
        J::Bool(b) => Value::Bool(*b),
        J::Small(n) => json!(*n % 4),
        J::Int(i) => json!(i),
        J::UInt(u) => json!(u),
        J::Float(f) => serde_json::Number::from_f64(*f).map(Value::Number).unwrap_or(Value::Null),
        J::Str(w) => Value::String(w.text()),
        J::Arr(items) => Value::Array(items.iter().map(|i| j(i, depth + 1)).collect()),
        J::Obj(members) => {
            let mut m = Map::new();
            for (k, v) in members {
                m.insert(k.text().to_string(), j(v, depth + 1));
            }
            Value::Object(m)
        }
    }
}

#[derive(Debug, Arbitrary)]
enum Data {
    /// One JSON value on one `data:` line.
    Json(J),
    /// An object whose `type` is set (the usual shape of an event).
    Typed {
        ty: Word,
        members: Vec<(Key, J)>,
    },
    /// Text, split into `data:` lines at its newlines.
    Text(String),
    Done,
}

#[derive(Debug, Arbitrary)]
enum Line {
    Event { name: Option<Word>, data: Data, id: Option<String>, comment: Option<String> },
    Retry(String),
    Raw(String),
}

#[derive(Debug, Arbitrary, Clone, Copy)]
enum Eol {
    Lf,
    CrLf,
    Cr,
}

#[derive(Debug, Arbitrary)]
struct Input {
    lines: Vec<Line>,
    eol: Eol,
    /// OpenAI: answer as `application/json` (a non-streaming body).
    openai_json: bool,
    /// Chunk sizes for the in-memory eventsource parse (cycled).
    chunks: Vec<u8>,
}

fn body_of(input: &Input) -> Vec<u8> {
    let eol = match input.eol {
        Eol::Lf => "\n",
        Eol::CrLf => "\r\n",
        Eol::Cr => "\r",
    };
    let mut s = String::new();
    for l in &input.lines {
        match l {
            Line::Event { name, data, id, comment } => {
                if let Some(c) = comment {
                    s.push_str(&format!(":{}{eol}", c.replace(['\r', '\n'], " ")));
                }
                if let Some(n) = name {
                    s.push_str(&format!("event: {}{eol}", n.text().replace(['\r', '\n'], " ")));
                }
                if let Some(id) = id {
                    s.push_str(&format!("id: {}{eol}", id.replace(['\r', '\n'], " ")));
                }
                let data = match data {
                    Data::Json(v) => j(v, 0).to_string(),
                    Data::Typed { ty, members } => {
                        let mut m = Map::new();
                        m.insert("type".into(), Value::String(ty.text()));
                        for (k, v) in members {
                            m.insert(k.text().to_string(), j(v, 1));
                        }
                        Value::Object(m).to_string()
                    }
                    Data::Text(t) => t.clone(),
                    Data::Done => "[DONE]".into(),
                };
                for piece in data.split(['\r', '\n']) {
                    s.push_str(&format!("data: {piece}{eol}"));
                }
                s.push_str(eol);
            }
            Line::Retry(r) => s.push_str(&format!("retry: {}{eol}", r.replace(['\r', '\n'], " "))),
            Line::Raw(r) => s.push_str(r),
        }
    }
    s.into_bytes()
}

// ---- the loopback server ---------------------------------------------------

/// The next answer: (content type, body).
static ANSWER: Mutex<(String, Vec<u8>)> = Mutex::new((String::new(), Vec::new()));

struct Env {
    rt: tokio::runtime::Runtime,
    anthropic: Anthropic,
    openai: OpenAi,
}

fn env() -> &'static Env {
    static E: OnceLock<Env> = OnceLock::new();
    E.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        rt.spawn(async move {
            loop {
                let Ok((sock, _)) = listener.accept().await else { continue };
                tokio::spawn(serve(sock));
            }
        });
        let endpoint = |base: String| Endpoint {
            base_url: base,
            api_key: None,
            key_source: "FUZZ_KEY".into(),
            model: "fuzz-model".into(),
            max_retries: 0,
            connect_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(10),
        };
        let anthropic = Anthropic::new(endpoint(format!("http://{addr}")));
        let openai = OpenAi::new(endpoint(format!("http://{addr}/v1")), Flavor::OpenAi);
        Env { rt, anthropic, openai }
    })
}

/// HTTP/1.1 with keep-alive: reads a request, answers with [`ANSWER`].
async fn serve(sock: tokio::net::TcpStream) {
    let _ = sock.set_nodelay(true);
    let (r, mut w) = sock.into_split();
    let mut r = BufReader::new(r);
    loop {
        let mut len = 0usize;
        let mut first = true;
        loop {
            let mut line = String::new();
            match r.read_line(&mut line).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            let t = line.trim_end();
            if t.is_empty() {
                if first {
                    continue;
                }
                break;
            }
            first = false;
            if let Some((k, v)) = t.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                len = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; len];
        if r.read_exact(&mut body).await.is_err() {
            return;
        }
        let (ct, answer) = ANSWER.lock().unwrap().clone();
        let mut out =
            format!("HTTP/1.1 200 OK\r\nContent-Type: {ct}\r\nContent-Length: {}\r\n\r\n", answer.len()).into_bytes();
        out.extend_from_slice(&answer);
        if w.write_all(&out).await.is_err() {
            return;
        }
    }
}

fn request() -> ModelRequest<'static> {
    static MESSAGES: OnceLock<Vec<Message>> = OnceLock::new();
    let messages = MESSAGES.get_or_init(|| vec![Message::user_text("fix it")]);
    ModelRequest { system: "fuzz", messages, tools: &[], max_output_tokens: 64, allow_tools: true, revisions: &[] }
}

fn ignore(_: StreamUpdate) {}

fuzz_target!(|input: Input| {
    let body = body_of(&input);
    let env = env();

    // eventsource-stream: a chunked parse equals the whole-body parse.
    let whole: Vec<_> = env.rt.block_on(
        futures::stream::iter([Ok::<_, std::io::Error>(body.clone())])
            .eventsource()
            .map(|r| r.map_err(|e| e.to_string()))
            .collect(),
    );
    let sizes: Vec<usize> = input.chunks.iter().map(|&c| c as usize % 17 + 1).collect();
    let mut chunks = Vec::new();
    let mut at = 0;
    let mut k = 0;
    while at < body.len() {
        let n = if sizes.is_empty() { body.len() } else { sizes[k % sizes.len()] };
        k += 1;
        let end = (at + n).min(body.len());
        chunks.push(Ok::<_, std::io::Error>(body[at..end].to_vec()));
        at = end;
    }
    let split: Vec<_> =
        env.rt.block_on(futures::stream::iter(chunks).eventsource().map(|r| r.map_err(|e| e.to_string())).collect());
    assert_eq!(whole, split, "eventsource-stream parses a chunked body differently");

    // The public decoders, on every event's JSON.
    for ev in whole.iter().flatten() {
        if let Ok(v) = serde_json::from_str::<Value>(&ev.data) {
            let _ = anthropic::decode_response(v.clone());
            let _ = openai::decode_completion(&v, "OpenAI");
            for key in ["message", "delta"] {
                let _ = anthropic::decode_response(v[key].clone());
                let _ = openai::decode_completion(&v[key], "OpenAI");
            }
        }
    }

    // The assemblers, through the providers over loopback HTTP.
    *ANSWER.lock().unwrap() = ("text/event-stream".into(), body.clone());
    let r = env.rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(30), env.anthropic.complete(request(), &ignore)).await
    });
    assert!(r.is_ok(), "Anthropic::complete did not return");
    let ct = if input.openai_json { "application/json" } else { "text/event-stream" };
    *ANSWER.lock().unwrap() = (ct.into(), body);
    let r = env.rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(30), env.openai.complete(request(), &ignore)).await
    });
    assert!(r.is_ok(), "OpenAi::complete did not return");
});
