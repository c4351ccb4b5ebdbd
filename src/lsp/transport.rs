//! A guard in front of the LSP transport's decoder.
//!
//! tower-lsp-server's framed reader stops for good after the first message it
//! cannot decode (a body that is not JSON, a JSON value that is not a
//! JSON-RPC message, a missing `Content-Length`, an unexpected
//! `Content-Type`), and the server then exits. This task reads stdin itself,
//! forwards every well-formed message unchanged, and replaces each malformed
//! one with the internal notification [`INVALID_MESSAGE`], which the
//! service wrapper answers with a JSON-RPC error (`-32700` parse error or
//! `-32600` invalid request). The server reports the problem and lives on.
//!
//! Memory stays bounded whatever arrives: a header line is at most
//! [`MAX_HEADER_LINE`] bytes (a longer one is reported and skipped, kept
//! nowhere, up to the next `Content-Length:`, so a client that wrote junk
//! without a line break has its next message read whole), and a body at
//! most [`MAX_BODY`].

use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};

/// The internal notification standing in for a malformed message.
pub const INVALID_MESSAGE: &str = "$/agentfix/invalidMessage";

/// Largest message body accepted (bigger ones are skipped and reported).
const MAX_BODY: usize = 64 * 1024 * 1024;
/// Largest header line accepted.
const MAX_HEADER_LINE: usize = 8 * 1024;

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
fn stash_text(mut body: Vec<u8>, stash: &Stash) -> Vec<u8> {
    if body.len() <= STASH_OVER || !body.windows(20).any(|w| w == b"textDocument/didOpen") {
        return body;
    }
    let (small, start, end) = {
        let Ok(open) = serde_json::from_slice::<BigOpen>(&body) else { return body };
        let raw = open.params.text_document.text.get();
        if open.method != "textDocument/didOpen" || !raw.starts_with('"') {
            return body;
        }
        let start = raw.as_ptr() as usize - body.as_ptr() as usize;
        let d = open.params.text_document;
        let small = json!({"jsonrpc": "2.0", "method": "textDocument/didOpen",
            "params": {"textDocument": {"uri": d.uri, "languageId": d.language_id, "version": d.version, "text": ""}}});
        (small, start + 1, start + raw.len() - 1)
    };
    let Some(len) = unescape_in_place(&mut body, start, end) else { return body };
    body.truncate(len);
    let Ok(text) = String::from_utf8(body) else {
        return invalid(-32700, "parse error: a didOpen text is not UTF-8", None);
    };
    let mut small = small;
    small["params"][STASHED] = Value::from(stash.put(text));
    small.to_string().into_bytes()
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

/// Copies LSP messages from `input` to `output` until `input` ends,
/// replacing malformed messages as the module documentation says.
#[cfg(test)]
pub async fn sanitize<R, W>(input: R, output: W)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    sanitize_with(input, output, None).await
}

/// [`sanitize`], setting the texts of large `didOpen`s aside in `stash`.
pub async fn sanitize_with<R, W>(input: R, mut output: W, stash: Option<std::sync::Arc<Stash>>)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut frames = Frames::new(input);
    loop {
        let frame = match frames.next().await {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) => {
                tracing::warn!("stdin read failed: {e}");
                break;
            }
        };
        // A good body is forwarded as it came, never copied: a 50 MB
        // didOpen must not cost several times its size here.
        let body = match frame {
            Frame::Body(bytes) => match (check(&bytes), &stash) {
                (Ok(()), Some(stash)) => stash_text(bytes, stash),
                (Ok(()), None) => bytes,
                (Err(invalid), _) => invalid,
            },
            Frame::Broken(reason) => invalid(-32700, &reason, None),
        };
        let header = format!("Content-Length: {}\r\n\r\n", body.len());
        let written = async {
            output.write_all(header.as_bytes()).await?;
            output.write_all(&body).await?;
            output.flush().await
        };
        if written.await.is_err() {
            break;
        }
    }
    let _ = output.shutdown().await;
}

enum Frame {
    Body(Vec<u8>),
    /// The headers were unusable; the reason is reported.
    Broken(String),
}

/// The header a message starts with, where reading starts again after an
/// over-long line (compared ignoring ASCII case; its first byte occurs
/// nowhere else in it, which the matcher in [`Frames::resync`] relies on).
const RESYNC_AT: &[u8] = b"content-length:";

/// The frames of the input, in bounded memory (see the module documentation).
struct Frames<R> {
    reader: BufReader<R>,
    /// Bytes already read that begin the next header line (a
    /// `Content-Length:` found while skipping).
    pending: Vec<u8>,
}

impl<R: AsyncRead + Unpin> Frames<R> {
    fn new(input: R) -> Self {
        Self { reader: BufReader::new(input), pending: Vec::new() }
    }

    /// Reads one frame; `None` at a clean end of input.
    async fn next(&mut self) -> std::io::Result<Option<Frame>> {
        let mut content_length: Option<Result<usize, String>> = None;
        let mut saw_header = false;
        loop {
            let mut line = std::mem::take(&mut self.pending);
            saw_header |= !line.is_empty();
            let room = MAX_HEADER_LINE.saturating_sub(line.len()) as u64;
            let n = (&mut self.reader).take(room).read_until(b'\n', &mut line).await?;
            if n == 0 {
                return Ok(if saw_header {
                    Some(Frame::Broken("input ended inside message headers".into()))
                } else {
                    None
                });
            }
            if !line.ends_with(b"\n") && line.len() >= MAX_HEADER_LINE {
                self.resync(&line).await?;
                return Ok(Some(Frame::Broken(format!(
                    "a message header line is longer than {MAX_HEADER_LINE} bytes; skipped up to the next Content-Length"
                ))));
            }
            let text = String::from_utf8_lossy(&line);
            let text = text.trim_end_matches(['\r', '\n']);
            if text.is_empty() {
                if !saw_header {
                    continue; // Stray blank lines between messages.
                }
                break;
            }
            saw_header = true;
            if let Some((name, value)) = text.split_once(':')
                && name.trim().eq_ignore_ascii_case("content-length")
            {
                content_length = Some(
                    value.trim().parse::<usize>().map_err(|_| format!("invalid Content-Length `{}`", value.trim())),
                );
            }
        }
        let len = match content_length {
            None => {
                return Ok(Some(Frame::Broken("a message has no Content-Length header".into())));
            }
            Some(Err(e)) => return Ok(Some(Frame::Broken(e))),
            Some(Ok(len)) => len,
        };
        if len > MAX_BODY {
            tokio::io::copy(&mut (&mut self.reader).take(len as u64), &mut tokio::io::sink()).await?;
            return Ok(Some(Frame::Broken(format!("a message of {len} bytes is larger than {MAX_BODY} bytes"))));
        }
        let mut body = vec![0; len];
        match self.reader.read_exact(&mut body).await {
            Ok(_) => Ok(Some(Frame::Body(body))),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                Ok(Some(Frame::Broken("input ended inside a message body".into())))
            }
            Err(e) => Err(e),
        }
    }

    /// After the over-long line `read` (what of it was read: no line
    /// break), skips input without keeping it up to the next
    /// `Content-Length:`, which becomes `pending`, or to the end of the input.
    async fn resync(&mut self, read: &[u8]) -> std::io::Result<()> {
        let n = RESYNC_AT.len();
        // A header that begins inside what was read, but not at its start
        // (that is the over-long line itself): the last one.
        if let Some(p) =
            (1..read.len().saturating_sub(n - 1)).rev().find(|&p| read[p..p + n].eq_ignore_ascii_case(RESYNC_AT))
        {
            self.pending = read[p..].to_vec();
            return Ok(());
        }
        // Else the longest end of `read` that begins the header.
        let mut matched = (1..n)
            .rev()
            .find(|&k| read.len() > k && read[read.len() - k..].eq_ignore_ascii_case(&RESYNC_AT[..k]))
            .unwrap_or(0);
        loop {
            let buf = self.reader.fill_buf().await?;
            if buf.is_empty() {
                return Ok(());
            }
            let mut used = buf.len();
            for (i, b) in buf.iter().enumerate() {
                let b = b.to_ascii_lowercase();
                matched = if b == RESYNC_AT[matched] { matched + 1 } else { usize::from(b == RESYNC_AT[0]) };
                if matched == n {
                    used = i + 1;
                    break;
                }
            }
            self.reader.consume(used);
            if matched == n {
                self.pending = b"Content-Length:".to_vec();
                return Ok(());
            }
        }
    }
}

/// The body itself when it is a JSON-RPC message, else a stand-in.
/// Checks that `body` is a JSON-RPC message; else the invalid-message
/// notification to send instead. The body is parsed without building it
/// (only the shape of each member is kept), so checking costs no copy of a
/// large `params`.
fn check(body: &[u8]) -> Result<(), Vec<u8>> {
    let shape: Envelope = match serde_json::from_slice(body) {
        Ok(s) => s,
        Err(e) if e.is_data() => {
            return Err(invalid(-32600, "invalid request: a JSON-RPC message must be an object", None));
        }
        Err(e) => return Err(invalid(-32700, &format!("parse error: {e}"), None)),
    };
    let id = shape.id.clone().filter(|id| id.is_string() || id.is_number());
    let has_method = shape.method == Some(Shape::String);
    let is_response = shape.id.is_some() && (shape.result || shape.error);
    let params_ok = matches!(shape.params, None | Some(Shape::Object | Shape::Array | Shape::Null));
    if !shape.jsonrpc_2 {
        return Err(invalid(-32600, "invalid request: `jsonrpc` must be \"2.0\"", id));
    }
    if !(has_method || is_response) || !params_ok {
        return Err(invalid(-32600, "invalid request: not a JSON-RPC request, notification or response", id));
    }
    // What tower-lsp-server's decoder takes, or it stops reading for good
    // (found by fuzzing): an id that is an integer in i64, a string or null;
    // a response it can decode (responses are small: answers to our requests).
    let id_ok = shape.id.as_ref().is_none_or(|id| id.is_string() || id.is_null() || id.is_i64());
    if !id_ok {
        return Err(invalid(-32600, "invalid request: `id` must be a string, an integer or null", None));
    }
    if !has_method && serde_json::from_slice::<tower_lsp_server::jsonrpc::Response>(body).is_err() {
        return Err(invalid(-32600, "invalid response: not a JSON-RPC response", id));
    }
    Ok(())
}

/// The kind of a JSON value, read without keeping it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Null,
    Bool,
    Number,
    String,
    Array,
    Object,
}

impl<'de> serde::Deserialize<'de> for Shape {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Shape;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_unit<E>(self) -> Result<Shape, E> {
                Ok(Shape::Null)
            }
            fn visit_none<E>(self) -> Result<Shape, E> {
                Ok(Shape::Null)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Shape, E> {
                Ok(Shape::Bool)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Shape, E> {
                Ok(Shape::Number)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Shape, E> {
                Ok(Shape::Number)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Shape, E> {
                Ok(Shape::Number)
            }
            fn visit_str<E>(self, _: &str) -> Result<Shape, E> {
                Ok(Shape::String)
            }
            // Elements are read as shapes too (not `IgnoredAny`), so that
            // serde_json's recursion limit holds: the decoder behind us
            // stops for good on JSON nested deeper than it.
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<Shape, A::Error> {
                while a.next_element::<Shape>()?.is_some() {}
                Ok(Shape::Array)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<Shape, A::Error> {
                while a.next_entry::<serde::de::IgnoredAny, Shape>()?.is_some() {}
                Ok(Shape::Object)
            }
        }
        d.deserialize_any(V)
    }
}

/// A scalar JSON value (strings of at most 256 bytes), or `None` for
/// anything else, which is read without being kept.
struct Scalar(Option<Value>);

impl<'de> serde::Deserialize<'de> for Scalar {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Scalar;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_unit<E>(self) -> Result<Scalar, E> {
                Ok(Scalar(Some(Value::Null)))
            }
            fn visit_bool<E>(self, b: bool) -> Result<Scalar, E> {
                Ok(Scalar(Some(Value::Bool(b))))
            }
            fn visit_i64<E>(self, n: i64) -> Result<Scalar, E> {
                Ok(Scalar(Some(Value::from(n))))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Scalar, E> {
                Ok(Scalar(Some(Value::from(n))))
            }
            fn visit_f64<E>(self, n: f64) -> Result<Scalar, E> {
                Ok(Scalar(Some(Value::from(n))))
            }
            fn visit_str<E>(self, s: &str) -> Result<Scalar, E> {
                Ok(Scalar((s.len() <= 256).then(|| Value::from(s))))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, a: A) -> Result<Scalar, A::Error> {
                Shape::deserialize(serde::de::value::SeqAccessDeserializer::new(a)).map(|_| Scalar(None))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, a: A) -> Result<Scalar, A::Error> {
                Shape::deserialize(serde::de::value::MapAccessDeserializer::new(a)).map(|_| Scalar(None))
            }
        }
        d.deserialize_any(V)
    }
}

/// What [`check`] needs of a message: the top-level members' shapes, the
/// `id` itself when it is small (a string or a number), whether `jsonrpc`
/// is "2.0".
#[derive(Debug, Default)]
struct Envelope {
    jsonrpc_2: bool,
    id: Option<Value>,
    method: Option<Shape>,
    params: Option<Shape>,
    result: bool,
    error: bool,
}

impl<'de> serde::Deserialize<'de> for Envelope {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Envelope;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON-RPC message object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<Envelope, A::Error> {
                let mut e = Envelope::default();
                while let Some(key) = a.next_key::<std::borrow::Cow<'de, str>>()? {
                    match key.as_ref() {
                        "jsonrpc" => e.jsonrpc_2 = a.next_value::<Scalar>()?.0 == Some(Value::from("2.0")),
                        // A container id is kept as `false`: present, but not usable.
                        "id" => e.id = Some(a.next_value::<Scalar>()?.0.unwrap_or(Value::Bool(false))),
                        "method" => e.method = Some(a.next_value()?),
                        "params" => e.params = Some(a.next_value()?),
                        "result" => e.result = a.next_value::<Shape>().map(|_| true)?,
                        "error" => e.error = a.next_value::<Shape>().map(|_| true)?,
                        _ => {
                            a.next_value::<Shape>()?;
                        }
                    }
                }
                Ok(e)
            }
        }
        d.deserialize_map(V)
    }
}

fn invalid(code: i64, message: &str, id: Option<Value>) -> Vec<u8> {
    tracing::warn!("malformed message from the client: {message}");
    let msg =
        json!({"jsonrpc": "2.0", "method": INVALID_MESSAGE, "params": {"code": code, "message": message, "id": id}});
    msg.to_string().into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn run(input: &[u8]) -> Vec<Value> {
        let (mut w, r) = tokio::io::duplex(1 << 20);
        let mut out = Vec::new();
        sanitize(input, &mut out).await;
        drop(r);
        let _ = w.shutdown().await;
        let mut msgs = Vec::new();
        let mut rest = &out[..];
        while !rest.is_empty() {
            let text = std::str::from_utf8(rest).unwrap();
            let (head, tail) = text.split_once("\r\n\r\n").unwrap();
            let len: usize = head.trim_start_matches("Content-Length: ").parse().unwrap();
            msgs.push(serde_json::from_str(&tail[..len]).unwrap());
            rest = &tail.as_bytes()[len..];
        }
        msgs
    }

    fn frame(body: &str) -> String {
        format!(
            "Content-Length: {}\r\nContent-Type: application/vscode-jsonrpc; charset=utf-16\r\n\r\n{body}",
            body.len()
        )
    }

    #[tokio::test]
    async fn good_messages_pass_and_bad_ones_become_invalid_notifications() {
        let good = r#"{"jsonrpc":"2.0","id":1,"method":"shutdown"}"#;
        let input = format!(
            "{}{}{}{}Content-Length: x\r\n\r\n{}",
            frame(good),
            frame("{not json"),
            frame(r#"{"jsonrpc":"2.0","id":7,"params":{}}"#),
            frame("[1,2]"),
            frame(good)
        );
        let msgs = run(input.as_bytes()).await;
        assert_eq!(msgs.len(), 6, "{msgs:?}");
        assert_eq!(msgs[0]["method"], "shutdown");
        assert_eq!(msgs[1]["method"], INVALID_MESSAGE);
        assert_eq!(msgs[1]["params"]["code"], -32700);
        assert_eq!(
            msgs[2]["params"],
            json!({"code": -32600, "message": "invalid request: not a JSON-RPC request, notification or response", "id": 7})
        );
        assert_eq!(msgs[3]["params"]["code"], -32600);
        assert_eq!(msgs[4]["params"]["message"], "invalid Content-Length `x`");
        assert_eq!(msgs[5]["method"], "shutdown");
    }

    #[tokio::test]
    async fn truncated_input_is_reported_then_ends() {
        let msgs = run(b"Content-Length: 50\r\n\r\n{\"jsonrpc\"").await;
        assert_eq!(msgs.len(), 1);
        assert_eq!(msgs[0]["params"]["message"], "input ended inside a message body");
        assert!(run(b"").await.is_empty());
    }

    #[tokio::test]
    async fn an_over_long_header_line_is_reported_and_reading_resumes_at_the_next_message() {
        let good = r#"{"jsonrpc":"2.0","id":1,"method":"shutdown"}"#;
        let reported = |m: &Value| {
            m["method"] == INVALID_MESSAGE
                && m["params"]["code"] == -32700
                && m["params"]["message"]
                    .as_str()
                    .unwrap()
                    .starts_with("a message header line is longer than 8192 bytes; skipped")
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
            let msgs = run(input.as_bytes()).await;
            assert_eq!(msgs.len(), 3, "{msgs:?}");
            assert!(reported(&msgs[0]), "{:?}", msgs[0]);
            assert_eq!(msgs[1]["method"], "shutdown");
            assert_eq!(msgs[2]["method"], "shutdown");
        }
        // Junk up to the end of the input: reported once.
        let msgs = run("q".repeat(50_000).as_bytes()).await;
        assert_eq!(msgs.len(), 1, "{msgs:?}");
        assert!(reported(&msgs[0]));
        // Junk ending in a bare `Content-Length:`.
        let msgs = run(format!("{}Content-Length:", "q".repeat(50_000)).as_bytes()).await;
        assert_eq!(msgs.len(), 2, "{msgs:?}");
        assert_eq!(msgs[1]["params"]["message"], "input ended inside message headers");
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
        let out: Value = serde_json::from_slice(&stash_text(msg.to_string().into_bytes(), &stash)).unwrap();
        assert_eq!(
            out["params"]["textDocument"],
            json!({"uri": "file:///a.py", "languageId": "python", "version": 3, "text": ""})
        );
        let id = out["params"][STASHED].as_u64().unwrap();
        assert_eq!(stash.take(id).unwrap(), text);
        assert_eq!(stash.take(id), None);
        // Small messages and other methods pass unchanged.
        let small = br#"{"jsonrpc":"2.0","method":"textDocument/didOpen","params":{}}"#.to_vec();
        assert_eq!(stash_text(small.clone(), &stash), small);
    }

    #[test]
    fn ids_and_responses_the_decoder_behind_would_stop_on_are_invalid() {
        // Found by fuzzing (fuzz/regressions/lsp_transport): each of these
        // passed the check and then stopped tower-lsp-server's reader.
        for bad in [
            r#"{"jsonrpc":"2.0","id":true,"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"result":null}"#,
            r#"{"jsonrpc":"2.0","id":true,"result":null}"#,
            r#"{"jsonrpc":"2.0","id":18446744073709551615,"result":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":null,"error":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":1}}"#,
        ] {
            let out: Value = serde_json::from_slice(&check(bad.as_bytes()).unwrap_err()).unwrap();
            assert_eq!(out["method"], INVALID_MESSAGE, "{bad}");
            assert_eq!(out["params"]["code"], -32600, "{bad}");
        }
        for good in [
            r#"{"jsonrpc":"2.0","id":-3,"method":"x","params":[]}"#,
            r#"{"jsonrpc":"2.0","id":"a","result":{"x":1}}"#,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"m"}}"#,
            r#"{"jsonrpc":"2.0","method":"n"}"#,
        ] {
            assert!(check(good.as_bytes()).is_ok(), "{good}");
            let body = good.as_bytes();
            let decoded = serde_json::from_slice::<tower_lsp_server::jsonrpc::Request>(body).is_ok()
                || serde_json::from_slice::<tower_lsp_server::jsonrpc::Response>(body).is_ok();
            assert!(decoded, "{good}");
        }
    }
}
