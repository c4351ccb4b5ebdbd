//! The LSP transport: one thread reads stdin, one thread writes stdout.
//!
//! The reader frames each message, decodes it once (the envelope checked,
//! `params` built as the one `serde_json::Value` the handlers read), and
//! calls the service itself, in wire order, so document notifications are
//! applied on this thread before the next message is read. A request the
//! service answers at once (a code action, most requests) is answered from
//! here; one that waits (a run, a query to a downstream server) becomes a
//! task on the runtime. The writer takes the answers and the server's own
//! requests and notifications (progress, `workspace/applyEdit`) from one
//! stream and writes each with one `write`. Between stdin and the handler
//! there is no task, pipe or second decoder (tower-lsp-server's `Server`
//! put three of them there, and a second parse of every keystroke).
//!
//! Malformed input never stops the server: a body that is not JSON, a JSON
//! value that is not a JSON-RPC message, a missing `Content-Length`, are
//! answered with a JSON-RPC error (`-32700` parse error or `-32600` invalid
//! request, with the message's `id` when it has a usable one) and reading
//! goes on.
//!
//! Memory stays bounded whatever arrives: the frames are read by
//! `agentfix_lsp_framing` (the one framer of the workspace), whose limits
//! are the transport's: a header line is at most 8 KB (a longer one is
//! reported and skipped, kept nowhere, up to the next `Content-Length:`, so
//! a client that wrote junk without a line break has its next message read
//! whole), and a body at most 64 MB.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::io::{Read, Write};
use std::sync::Arc;
use std::task::{Context, Poll};

use agentfix_lsp_framing::{Broken, Frame, SyncFrames};
use futures::{FutureExt, SinkExt, Stream, StreamExt};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tower::Service;
use tower_lsp_server::jsonrpc::{Error, ErrorCode, Id, Request, Response};

/// `didOpen` messages larger than this have their text set aside.
const STASH_OVER: usize = 1024 * 1024;

/// The member of a `didOpen`'s params that names its set-aside text.
pub const STASHED: &str = "agentfix/stashed";

/// Texts of large `didOpen`s, set aside by the transport and taken by the
/// service wrapper. tower-lsp-server's decoder holds a message three times
/// over (its buffer, serde's untagged-enum buffer, the `Value`), so a 50 MB
/// buffer would cost four times its size; the transport instead moves the
/// text out of the message, forwards the message with an empty text and a
/// [`STASHED`] number, and `ordered` builds the rope from the stash. Order
/// is kept: the text travels with its own message.
#[derive(Debug, Default)]
pub struct Stash {
    next: std::sync::atomic::AtomicU64,
    texts: std::sync::Mutex<std::collections::HashMap<u64, String>>,
}

impl Stash {
    fn put(&self, text: String) -> u64 {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.texts.lock().unwrap_or_else(|e| e.into_inner()).insert(id, text);
        id
    }

    /// The text set aside as `id`, once.
    pub fn take(&self, id: u64) -> Option<String> {
        self.texts.lock().unwrap_or_else(|e| e.into_inner()).remove(&id)
    }
}

#[derive(Deserialize)]
struct BigOpen<'a> {
    method: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    params: BigOpenParams<'a>,
}

#[derive(Deserialize)]
struct BigOpenParams<'a> {
    #[serde(rename = "textDocument", borrow)]
    text_document: BigOpenDocument<'a>,
}

#[derive(Deserialize)]
struct BigOpenDocument<'a> {
    uri: Value,
    #[serde(rename = "languageId")]
    language_id: Value,
    version: Value,
    #[serde(borrow)]
    text: &'a serde_json::value::RawValue,
}

/// A large `didOpen` with its text set aside, or the body unchanged. The
/// text is unescaped in place, inside the body's own buffer, which then
/// becomes the text: no second copy of it ever exists here.
// `Response` holds a `serde_json::Value`, which `preserve_order` (turned
// on by the ACP SDK) makes larger; it is built once per message.
#[allow(clippy::result_large_err)]
fn stash_text(mut body: Vec<u8>, stash: &Stash) -> Result<Vec<u8>, Response> {
    if body.len() <= STASH_OVER || !body.windows(20).any(|w| w == b"textDocument/didOpen") {
        return Ok(body);
    }
    let (small, start, end) = {
        let Ok(open) = serde_json::from_slice::<BigOpen>(&body) else { return Ok(body) };
        let raw = open.params.text_document.text.get();
        if open.method != "textDocument/didOpen" || !raw.starts_with('"') {
            return Ok(body);
        }
        let start = raw.as_ptr() as usize - body.as_ptr() as usize;
        let d = open.params.text_document;
        let small = json!({"jsonrpc": "2.0", "method": "textDocument/didOpen",
            "params": {"textDocument": {"uri": d.uri, "languageId": d.language_id, "version": d.version, "text": ""}}});
        (small, start + 1, start + raw.len() - 1)
    };
    let Some(len) = unescape_in_place(&mut body, start, end) else { return Ok(body) };
    body.truncate(len);
    let Ok(text) = String::from_utf8(body) else {
        return Err(invalid(-32700, "parse error: a didOpen text is not UTF-8", None));
    };
    let mut small = small;
    small["params"][STASHED] = Value::from(stash.put(text));
    Ok(small.to_string().into_bytes())
}

/// Decodes the JSON string literal body `buf[start..end]` (without its
/// quotes) into `buf[..n]`, returning `n`. The literal was already checked
/// to be valid JSON; `None` if it is not after all.
fn unescape_in_place(buf: &mut [u8], start: usize, end: usize) -> Option<usize> {
    let hex = |b: &[u8]| std::str::from_utf8(b).ok().and_then(|s| u32::from_str_radix(s, 16).ok());
    let (mut r, mut w) = (start, 0);
    while r < end {
        let b = buf[r];
        if b != b'\\' {
            buf[w] = b;
            r += 1;
            w += 1;
            continue;
        }
        let e = *buf.get(r + 1)?;
        r += 2;
        let c = match e {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let hi = hex(buf.get(r..r + 4)?)?;
                r += 4;
                if (0xD800..0xDC00).contains(&hi) && buf.get(r..r + 2) == Some(b"\\u") {
                    let lo = hex(buf.get(r + 2..r + 6)?)?;
                    if (0xDC00..0xE000).contains(&lo) {
                        r += 6;
                        char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))?
                    } else {
                        '\u{fffd}'
                    }
                } else {
                    char::from_u32(hi).unwrap_or('\u{fffd}')
                }
            }
            _ => return None,
        };
        // An escape is never shorter than the character it encodes.
        let mut tmp = [0u8; 4];
        let enc = c.encode_utf8(&mut tmp).as_bytes();
        buf[w..w + enc.len()].copy_from_slice(enc);
        w += enc.len();
    }
    Some(w)
}

/// A message from the client, decoded.
#[derive(Debug)]
pub enum Incoming {
    /// A request or a notification.
    Request(Request),
    /// The client's answer to one of our requests.
    Response(Response),
}

/// Decodes one message body: the message, or the error response that
/// answers it. Large `didOpen` texts are set aside in `stash` first.
// `Response` holds a `serde_json::Value`, which `preserve_order` (turned
// on by the ACP SDK) makes larger; it is built once per message.
#[allow(clippy::result_large_err)]
pub fn decode(body: Vec<u8>, stash: Option<&Stash>) -> Result<Incoming, Response> {
    let body = match stash {
        Some(stash) => stash_text(body, stash)?,
        None => body,
    };
    let envelope: Envelope = match serde_json::from_slice(&body) {
        Ok(e) => e,
        Err(e) if e.is_data() && !body.trim_ascii_start().starts_with(b"{") => {
            return Err(invalid(-32600, "invalid request: a JSON-RPC message must be an object", None));
        }
        Err(e) if e.is_data() => return Err(invalid(-32600, &format!("invalid request: {e}"), None)),
        Err(e) => return Err(invalid(-32700, &format!("parse error: {e}"), None)),
    };
    // What identifies the message in an error: a string or an integer.
    let id = envelope.id.map(|raw| serde_json::from_str::<Id>(raw.get()));
    let reply_id = match &id {
        Some(Ok(id @ (Id::Number(_) | Id::String(_)))) => Some(id.clone()),
        _ => None,
    };
    let method = envelope.method.map(|raw| serde_json::from_str::<String>(raw.get()));
    let is_response = id.is_some() && (envelope.result || envelope.error);
    let params_ok = matches!(envelope.params, None | Some(Value::Object(_) | Value::Array(_) | Value::Null));
    if !envelope.jsonrpc_2 {
        return Err(invalid(-32600, "invalid request: `jsonrpc` must be \"2.0\"", reply_id));
    }
    let has_method = matches!(method, Some(Ok(_)));
    if !(has_method || is_response) || !params_ok {
        return Err(invalid(-32600, "invalid request: not a JSON-RPC request, notification or response", reply_id));
    }
    let id = match id.transpose() {
        Ok(id) => id,
        Err(_) => return Err(invalid(-32600, "invalid request: `id` must be a string, an integer or null", None)),
    };
    match method {
        Some(Ok(method)) => {
            let mut request = Request::build(method);
            if let Some(params) = envelope.params {
                request = request.params(params);
            }
            if let Some(id) = id {
                request = request.id(id);
            }
            Ok(Incoming::Request(request.finish()))
        }
        // Responses answer our own requests: they are few and small, and
        // decoded a second time, whole.
        _ => serde_json::from_slice::<Response>(&body)
            .map(Incoming::Response)
            .map_err(|_| invalid(-32600, "invalid response: not a JSON-RPC response", reply_id)),
    }
}

/// The members of a message, read in one pass: `params` built, the others
/// kept as the raw text they are (only `jsonrpc`, `id` and `method` are
/// decoded further, and they are small). A member given twice counts once,
/// the last one.
#[derive(Debug, Default)]
struct Envelope<'a> {
    jsonrpc_2: bool,
    id: Option<&'a RawValue>,
    method: Option<&'a RawValue>,
    params: Option<Value>,
    result: bool,
    error: bool,
}

impl<'de> Deserialize<'de> for Envelope<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Envelope<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON-RPC message object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<Envelope<'de>, A::Error> {
                let mut e = Envelope::default();
                while let Some(key) = a.next_key::<Cow<'de, str>>()? {
                    match key.as_ref() {
                        "jsonrpc" => {
                            let raw: &RawValue = a.next_value()?;
                            e.jsonrpc_2 = serde_json::from_str::<Cow<str>>(raw.get()).is_ok_and(|v| v == "2.0");
                        }
                        "id" => e.id = Some(a.next_value()?),
                        "method" => e.method = Some(a.next_value()?),
                        "params" => e.params = Some(a.next_value()?),
                        "result" => e.result = a.next_value::<&RawValue>().map(|_| true)?,
                        "error" => e.error = a.next_value::<&RawValue>().map(|_| true)?,
                        _ => {
                            a.next_value::<serde::de::IgnoredAny>()?;
                        }
                    }
                }
                Ok(e)
            }
        }
        d.deserialize_map(V)
    }
}

fn invalid(code: i64, message: &str, id: Option<Id>) -> Response {
    tracing::warn!("malformed message from the client: {message}");
    let code = if code == -32600 { ErrorCode::InvalidRequest } else { ErrorCode::ParseError };
    Response::from_error(id.unwrap_or(Id::Null), Error { code, message: message.to_string().into(), data: None })
}

/// A frame decoded (see [`decode`]); a broken one is answered with a parse
/// error saying why.
// `Response` holds a `serde_json::Value`, which `preserve_order` (turned
// on by the ACP SDK) makes larger; it is built once per message.
#[allow(clippy::result_large_err)]
pub fn decode_frame(frame: Frame, stash: Option<&Stash>) -> Result<Incoming, Response> {
    match frame {
        Frame::Body(body) => decode(body, stash),
        Frame::Broken(b @ Broken::LongHeaderLine(_)) => {
            Err(invalid(-32700, &format!("{b}; skipped up to the next Content-Length"), None))
        }
        Frame::Broken(b) => Err(invalid(-32700, &b.to_string(), None)),
    }
}

/// What the writer writes.
enum Outgoing {
    Response(Response),
    /// A request or notification of the server's own.
    Request(Request),
    /// Written once everything sent before it is: then the sender is told.
    Flush(std::sync::mpsc::Sender<()>),
}

/// The writer's side of the transport, for whoever has an answer to send.
#[derive(Clone)]
pub struct Writer {
    tx: futures::channel::mpsc::UnboundedSender<Outgoing>,
}

impl Writer {
    fn send(&self, response: Response) {
        let _ = self.tx.unbounded_send(Outgoing::Response(response));
    }

    /// Waits until everything sent so far is written (or `timeout` passed,
    /// or the writer is gone): the last answers go out before the process
    /// ends.
    pub fn flush(&self, timeout: std::time::Duration) {
        let (tx, rx) = std::sync::mpsc::channel();
        if self.tx.unbounded_send(Outgoing::Flush(tx)).is_ok() {
            let _ = rx.recv_timeout(timeout);
        }
    }
}

/// Starts the writer thread: it writes the answers sent to the returned
/// [`Writer`] and the server's own messages from `server_messages`, one
/// `write` each, until both end or `output` fails. Its queue is not
/// bounded: a client that stops reading its input holds up only what is
/// sent to it (a handler never waits for the writer).
pub fn start_writer<W, M>(output: W, server_messages: M) -> std::io::Result<Writer>
where
    W: Write + Send + 'static,
    M: Stream<Item = Request> + Send + Unpin + 'static,
{
    let (tx, rx) = futures::channel::mpsc::unbounded();
    let mut messages = futures::stream::select(rx, server_messages.map(Outgoing::Request));
    let mut output = std::io::BufWriter::with_capacity(1 << 16, output);
    std::thread::Builder::new().name("agentfix-stdout".into()).spawn(move || {
        futures::executor::block_on(async {
            while let Some(message) = messages.next().await {
                let body = match message {
                    Outgoing::Response(r) => serde_json::to_vec(&r),
                    Outgoing::Request(r) => serde_json::to_vec(&r),
                    Outgoing::Flush(done) => {
                        let _ = output.flush();
                        let _ = done.send(());
                        continue;
                    }
                };
                let Ok(body) = body else { continue };
                let written = agentfix_lsp_framing::write_frame(&mut output, &body).and_then(|()| output.flush());
                if let Err(e) = written {
                    tracing::warn!("stdout write failed: {e}");
                    break;
                }
            }
        });
    })?;
    Ok(Writer { tx })
}

/// What the reader thread reads: the frames of an input, and those read
/// from it before the server started (by `lsp::first`), each with whether
/// its request was answered then.
pub struct Input<I: Read> {
    frames: SyncFrames<I>,
    /// Read ahead, in wire order: the first frame (maybe answered) and,
    /// when it was answered, what the input gave next (a frame, its end or
    /// an error), which the reader sees as it would have.
    ahead: VecDeque<(std::io::Result<Option<Frame>>, bool)>,
}

impl<I: Read> Input<I> {
    /// The frames of `input`, none read yet.
    pub fn new(input: I) -> Self {
        Input { frames: SyncFrames::new(input), ahead: VecDeque::new() }
    }

    /// The frames of `input`, of which the first is read now: when
    /// `answer` gives the body of its answer, that is written to `output`
    /// (one write), and the reader, which hands the frame to the service
    /// first, does not send the service's answer to it. After an answer
    /// this also waits for what the client sends next (`initialized`), so
    /// that the server starts its threads after the client has read the
    /// answer, not while it wakes up to read it (on two cores they
    /// competed: that was most of the time to the answer over the floor's).
    pub fn answered_first(input: I, output: &mut impl Write, answer: impl FnOnce(&[u8]) -> Option<Vec<u8>>) -> Self {
        let mut frames = SyncFrames::new(input);
        let first = match frames.next_frame() {
            Ok(Some(frame)) => frame,
            // The input ended (or failed) at once: the reader sees that again.
            Ok(None) | Err(_) => return Input { frames, ahead: VecDeque::new() },
        };
        let answered = match &first {
            Frame::Body(body) => answer(body).is_some_and(|answer| {
                output.write_all(&agentfix_lsp_framing::frame(&answer)).and_then(|()| output.flush()).is_ok()
            }),
            Frame::Broken(_) => false,
        };
        let mut ahead = VecDeque::from([(Ok(Some(first)), answered)]);
        if answered {
            ahead.push_back((frames.next_frame(), false));
        }
        Input { frames, ahead }
    }

    /// Whether the first frame, still to be handed to the service, was
    /// answered, and how many frames were read ahead.
    #[cfg(test)]
    pub(super) fn first_answered(&self) -> Option<(bool, usize)> {
        let read = self.ahead.iter().filter(|(frame, _)| matches!(frame, Ok(Some(_)))).count();
        self.ahead.front().map(|(_, answered)| (*answered, read))
    }
}

/// Starts the reader thread: it reads messages from `input` until it ends
/// (or `exit` came), calls `service` with each request in wire order, and
/// hands the client's responses to `client_responses`. Answers go to
/// `writer`. At most `concurrency` requests wait at once; the next one
/// waits for a slot (runs hold theirs while they last). `on_end` is called
/// when reading stops.
pub fn start_reader<I, S, C>(
    input: Input<I>,
    mut service: S,
    mut client_responses: C,
    writer: Writer,
    stash: Option<Arc<Stash>>,
    concurrency: usize,
    on_end: impl FnOnce() + Send + 'static,
) -> std::io::Result<()>
where
    I: Read + Send + 'static,
    S: Service<Request, Response = Option<Response>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: std::fmt::Display,
    C: futures::Sink<Response> + Send + Unpin + 'static,
{
    let runtime = tokio::runtime::Handle::current();
    let slots = Arc::new(tokio::sync::Semaphore::new(concurrency));
    std::thread::Builder::new().name("agentfix-stdin".into()).spawn(move || {
        // However reading stops, the session hears of it.
        struct OnDrop<F: FnOnce()>(Option<F>);
        impl<F: FnOnce()> Drop for OnDrop<F> {
            fn drop(&mut self) {
                if let Some(f) = self.0.take() {
                    f();
                }
            }
        }
        let _end = OnDrop(Some(on_end));
        // Handlers polled here may spawn tasks and start timers.
        let _runtime = runtime.enter();
        let Input { mut frames, mut ahead } = input;
        loop {
            // What `lsp::first` read ahead (and maybe answered), then the rest.
            let (next, answered) = ahead.pop_front().unwrap_or_else(|| (frames.next_frame(), false));
            let frame = match next {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!("stdin read failed: {e}");
                    break;
                }
            };
            let request = match decode_frame(frame, stash.as_deref()) {
                Ok(Incoming::Request(r)) => r,
                Ok(Incoming::Response(r)) => {
                    if futures::executor::block_on(client_responses.send(r)).is_err() {
                        tracing::debug!("a response came after the session ended");
                    }
                    continue;
                }
                Err(answer) => {
                    writer.send(answer);
                    continue;
                }
            };
            let method = request.method().to_string();
            if !ready(&mut service) {
                break;
            }
            let mut answer = service.call(request).boxed();
            // An answer already sent is not sent again.
            let to = (!answered).then(|| writer.clone());
            match answer.poll_unpin(&mut Context::from_waker(std::task::Waker::noop())) {
                Poll::Ready(answer) => deliver(answer, to.as_ref(), &method),
                Poll::Pending => {
                    let Ok(slot) = futures::executor::block_on(slots.clone().acquire_owned()) else { break };
                    let writer = to;
                    let (done_tx, done) = std::sync::mpsc::channel::<()>();
                    let task_method = method.clone();
                    runtime.spawn(async move {
                        deliver(answer.await, writer.as_ref(), &task_method);
                        drop(slot);
                        let _ = done_tx.send(());
                    });
                    // Nothing is read until `initialize` is answered, as
                    // LSP says clients must wait.
                    if method == "initialize" {
                        let _ = done.recv();
                    }
                }
            }
            if method == "exit" {
                break;
            }
        }
    })?;
    Ok(())
}

/// Waits until the service takes a request; `false` when it never will.
fn ready<S: Service<Request>>(service: &mut S) -> bool
where
    S::Error: std::fmt::Display,
{
    loop {
        match service.poll_ready(&mut Context::from_waker(std::task::Waker::noop())) {
            Poll::Ready(Ok(())) => return true,
            Poll::Ready(Err(e)) => {
                tracing::info!("the server takes no more requests: {e}");
                return false;
            }
            // Only while `initialize` runs, which the reader waits for.
            Poll::Pending => std::thread::sleep(std::time::Duration::from_millis(1)),
        }
    }
}

/// Sends the service's answer to `writer`; with none, the answer was sent
/// before the service started (`lsp::first`), and the service's own must
/// agree with it.
fn deliver<E: std::fmt::Display>(answer: Result<Option<Response>, E>, writer: Option<&Writer>, method: &str) {
    match answer {
        Ok(Some(response)) => match writer {
            Some(writer) => writer.send(response),
            None if response.is_ok() => tracing::debug!(%method, "answered before the server started"),
            None => {
                tracing::error!(%method, "answered before the server started, but the server refuses it: {response:?}")
            }
        },
        Ok(None) => {}
        Err(e) => tracing::error!(%method, "request failed: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentfix_lsp_framing::MAX_HEADER_LINE;

    /// Every frame of `input` decoded: each message, or the error that
    /// answers it, as JSON.
    fn run(input: &[u8]) -> Vec<Value> {
        let mut frames = SyncFrames::new(input);
        let mut msgs = Vec::new();
        while let Some(frame) = frames.next_frame().unwrap() {
            msgs.push(match decode_frame(frame, None) {
                Ok(Incoming::Request(r)) => serde_json::to_value(r).unwrap(),
                Ok(Incoming::Response(r)) => serde_json::to_value(r).unwrap(),
                Err(answer) => serde_json::to_value(answer).unwrap(),
            });
        }
        msgs
    }

    fn error(m: &Value) -> (i64, &str) {
        (m["error"]["code"].as_i64().unwrap(), m["error"]["message"].as_str().unwrap())
    }

    fn frame(body: &str) -> String {
        format!(
            "Content-Length: {}\r\nContent-Type: application/vscode-jsonrpc; charset=utf-16\r\n\r\n{body}",
            body.len()
        )
    }

    #[test]
    fn good_messages_pass_and_bad_ones_are_answered_with_errors() {
        let good = r#"{"jsonrpc":"2.0","id":1,"method":"shutdown"}"#;
        let input = format!(
            "{}{}{}{}Content-Length: x\r\n\r\n{}",
            frame(good),
            frame("{not json"),
            frame(r#"{"jsonrpc":"2.0","id":7,"params":{}}"#),
            frame("[1,2]"),
            frame(good)
        );
        let msgs = run(input.as_bytes());
        assert_eq!(msgs.len(), 6, "{msgs:?}");
        assert_eq!(msgs[0], json!({"jsonrpc": "2.0", "id": 1, "method": "shutdown"}));
        assert_eq!(error(&msgs[1]).0, -32700);
        assert_eq!(msgs[1]["id"], Value::Null);
        assert_eq!(
            msgs[2],
            json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -32600, "message": "invalid request: not a JSON-RPC request, notification or response"}})
        );
        assert_eq!(error(&msgs[3]), (-32600, "invalid request: a JSON-RPC message must be an object"));
        assert_eq!(error(&msgs[4]), (-32700, "invalid Content-Length `x`"));
        assert_eq!(msgs[5]["method"], "shutdown");
    }

    #[test]
    fn truncated_input_is_reported_then_ends() {
        let msgs = run(b"Content-Length: 50\r\n\r\n{\"jsonrpc\"");
        assert_eq!(msgs.len(), 1);
        assert_eq!(error(&msgs[0]).1, "input ended inside a message body");
        assert!(run(b"").is_empty());
    }

    #[test]
    fn an_over_long_header_line_is_reported_and_reading_resumes_at_the_next_message() {
        let good = r#"{"jsonrpc":"2.0","id":1,"method":"shutdown"}"#;
        let reported = |m: &Value| {
            let (code, message) = error(m);
            code == -32700 && message.starts_with("a message header line is longer than 8192 bytes; skipped")
        };
        // Junk without a line break, then messages; junk ending in a line
        // break; junk that ends where the next header begins, at every
        // offset around the line limit.
        let mut cases = vec![
            format!("{}{}{}", "x".repeat(100_000), frame(good), frame(good)),
            format!("{}\r\n{}{}", "Y".repeat(MAX_HEADER_LINE), frame(good), frame(good)),
        ];
        for n in MAX_HEADER_LINE - 19..=MAX_HEADER_LINE + 2 {
            cases.push(format!("{}{}{}", "z".repeat(n), frame(good), frame(good)));
        }
        for input in cases {
            let msgs = run(input.as_bytes());
            assert_eq!(msgs.len(), 3, "{msgs:?}");
            assert!(reported(&msgs[0]), "{:?}", msgs[0]);
            assert_eq!(msgs[1]["method"], "shutdown");
            assert_eq!(msgs[2]["method"], "shutdown");
        }
        // Junk up to the end of the input: reported once.
        let msgs = run("q".repeat(50_000).as_bytes());
        assert_eq!(msgs.len(), 1, "{msgs:?}");
        assert!(reported(&msgs[0]));
        // Junk ending in a bare `Content-Length:`.
        let msgs = run(format!("{}Content-Length:", "q".repeat(50_000)).as_bytes());
        assert_eq!(msgs.len(), 2, "{msgs:?}");
        assert_eq!(error(&msgs[1]).1, "input ended inside message headers");
    }

    #[test]
    fn escapes_are_decoded_in_place_exactly_as_serde_json_does() {
        let text = "a\"b\\c/\u{8}\u{c}\n\r\t漢😀\u{1}\u{7f}é end";
        let literal = serde_json::to_string(text).unwrap();
        // serde_json writes the control character \u0001 as \u0001; add a
        // surrogate pair and a lone one by hand.
        let literal = format!("{}\\ud83d\\ude00\\ud800x\"", &literal[..literal.len() - 1]);
        let want: String = serde_json::from_str::<String>(&literal).unwrap_or_else(|_| format!("{text}😀\u{fffd}x"));
        let mut buf = format!("xx{literal}yy").into_bytes();
        let n = unescape_in_place(&mut buf, 3, 2 + literal.len() - 1).unwrap();
        assert_eq!(std::str::from_utf8(&buf[..n]).unwrap(), want);
    }

    #[test]
    fn a_large_did_open_is_forwarded_small_with_its_text_set_aside() {
        let text = "line \"one\"\n漢字 😀\n".repeat(100_000);
        let msg = json!({"jsonrpc": "2.0", "method": "textDocument/didOpen",
            "params": {"textDocument": {"uri": "file:///a.py", "languageId": "python", "version": 3, "text": text}}});
        let stash = Stash::default();
        let out: Value = serde_json::from_slice(&stash_text(msg.to_string().into_bytes(), &stash).unwrap()).unwrap();
        assert_eq!(
            out["params"]["textDocument"],
            json!({"uri": "file:///a.py", "languageId": "python", "version": 3, "text": ""})
        );
        let id = out["params"][STASHED].as_u64().unwrap();
        assert_eq!(stash.take(id).unwrap(), text);
        assert_eq!(stash.take(id), None);
        // Small messages and other methods pass unchanged.
        let small = br#"{"jsonrpc":"2.0","method":"textDocument/didOpen","params":{}}"#.to_vec();
        assert_eq!(stash_text(small.clone(), &stash).unwrap(), small);
    }

    #[test]
    fn ids_and_responses_that_cannot_be_decoded_are_invalid() {
        // Found by fuzzing (fuzz/regressions/lsp_transport), when a check
        // came before tower-lsp-server's decoder: each of these stopped it.
        for bad in [
            r#"{"jsonrpc":"2.0","id":true,"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"result":null}"#,
            r#"{"jsonrpc":"2.0","id":true,"result":null}"#,
            r#"{"jsonrpc":"2.0","id":18446744073709551615,"result":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":null,"error":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":1}}"#,
        ] {
            let out = serde_json::to_value(decode(bad.as_bytes().to_vec(), None).unwrap_err()).unwrap();
            assert_eq!(error(&out).0, -32600, "{bad}");
        }
        for good in [
            r#"{"jsonrpc":"2.0","id":-3,"method":"x","params":[]}"#,
            r#"{"jsonrpc":"2.0","id":"a","result":{"x":1}}"#,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"m"}}"#,
            r#"{"jsonrpc":"2.0","method":"n"}"#,
        ] {
            let decoded = match decode(good.as_bytes().to_vec(), None).unwrap() {
                Incoming::Request(r) => serde_json::to_value(r).unwrap(),
                Incoming::Response(r) => serde_json::to_value(r).unwrap(),
            };
            assert_eq!(decoded, serde_json::from_str::<Value>(good).unwrap(), "{good}");
        }
    }
}
