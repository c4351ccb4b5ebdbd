//! HTTP plumbing shared by the providers: the client, error mapping that
//! never exposes a key, retry hints from response headers, bodies read with
//! a cap, and an SSE parser whose idle timeout is a hard deadline.

use std::time::Duration;

use futures::{Stream, StreamExt};
use reqwest::header::HeaderMap;

use crate::model::{ModelError, ModelErrorKind};

/// Connection settings of one provider endpoint.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// Base URL without the trailing path the provider appends.
    pub base_url: String,
    pub api_key: Option<crate::config::provider::Secret>,
    /// Where the key came from, for error messages (`ANTHROPIC_API_KEY`).
    pub key_source: String,
    pub model: String,
    pub max_retries: u32,
    pub connect_timeout: Duration,
    /// Longest silence allowed while a response streams.
    pub idle_timeout: Duration,
}

/// The HTTP client for `endpoint`: one per process and connect timeout
/// (the only setting a client is built with), shared by every run, so that
/// a run reuses the connections of the runs before it (no new TCP and TLS
/// handshake) and the system's certificates are read once, not per run.
pub fn client(endpoint: &Endpoint) -> reqwest::Client {
    shared(endpoint.connect_timeout)
}

fn shared(connect_timeout: Duration) -> reqwest::Client {
    static CLIENTS: std::sync::Mutex<Vec<(Duration, reqwest::Client)>> = std::sync::Mutex::new(Vec::new());
    let mut clients = CLIENTS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, client)) = clients.iter().find(|(t, _)| *t == connect_timeout) {
        return client.clone();
    }
    let client = reqwest::Client::builder()
        .connect_timeout(connect_timeout)
        .user_agent(concat!("agentfix/", env!("CARGO_PKG_VERSION")))
        .build()
        .unwrap_or_default();
    clients.push((connect_timeout, client.clone()));
    client
}

/// The shared [`client`] of a model client, fetched on first use: making a
/// model client (before a run's first `$/progress`) never waits for the
/// client being built, which reads the system's certificates.
pub struct LazyClient {
    connect_timeout: Duration,
    client: std::sync::OnceLock<reqwest::Client>,
}

impl LazyClient {
    pub fn new(connect_timeout: Duration) -> Self {
        Self { connect_timeout, client: std::sync::OnceLock::new() }
    }

    pub fn client(&self) -> &reqwest::Client {
        self.client.get_or_init(|| shared(self.connect_timeout))
    }
}

/// Builds the client for `connect_timeout` ahead of the first run, off the
/// runtime's threads (reading the system's certificates takes a few
/// milliseconds): the first run then starts as fast as the next ones.
/// Nothing is dialed.
pub fn warm_up(connect_timeout: Duration) {
    drop(shared(connect_timeout));
}

/// A transport failure. reqwest's messages never include headers, so the
/// key cannot leak here.
pub fn network_error(provider: &str, e: &reqwest::Error) -> ModelError {
    let what = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else {
        "failed"
    };
    ModelError::new(ModelErrorKind::Network, None, format!("request to the {provider} API {what}: {}", error_chain(e)))
}

pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        let text = inner.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        src = inner.source();
    }
    s
}

/// The server's retry hints: `x-should-retry`, then `retry-after-ms`,
/// then `retry-after` (seconds or an HTTP date).
pub fn retry_hints(headers: &HeaderMap) -> (Option<bool>, Option<Duration>) {
    let get = |k: &str| headers.get(k).and_then(|v| v.to_str().ok()).map(str::trim);
    let should = match get("x-should-retry") {
        Some("true") => Some(true),
        Some("false") => Some(false),
        _ => None,
    };
    let after = get("retry-after-ms")
        .and_then(|v| v.parse::<f64>().ok())
        .map(|ms| Duration::from_secs_f64(ms.max(0.0) / 1000.0))
        .or_else(|| {
            let v = get("retry-after")?;
            if let Ok(secs) = v.parse::<f64>() {
                return Some(Duration::from_secs_f64(secs.max(0.0)));
            }
            let when = httpdate(v)?;
            Some(when.duration_since(std::time::SystemTime::now()).unwrap_or_default())
        });
    (should, after)
}

/// Parses an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
fn httpdate(s: &str) -> Option<std::time::SystemTime> {
    let parts: Vec<&str> = s.split_whitespace().collect();
    let [_, day, month, year, time, "GMT"] = parts.as_slice() else { return None };
    let month = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        .iter()
        .position(|m| m == month)? as i64
        + 1;
    let (day, year): (i64, i64) = (day.parse().ok()?, year.parse().ok()?);
    let hms: Vec<i64> = time.split(':').map(|p| p.parse().ok()).collect::<Option<_>>()?;
    let [h, m, sec] = hms.as_slice() else { return None };
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + m * 60 + sec;
    u64::try_from(secs).ok().map(|s| std::time::UNIX_EPOCH + Duration::from_secs(s))
}

/// Whether an HTTP status is worth retrying (the SDKs' rule).
pub fn status_retryable(status: u16) -> bool {
    matches!(status, 408 | 409 | 429) || status >= 500
}

/// Largest part of an error body that is read (the rest is never downloaded).
pub const MAX_ERROR_BODY: usize = 64 * 1024;
/// Largest successful non-streaming JSON answer accepted.
pub const MAX_JSON_BODY: usize = 16 * 1024 * 1024;
/// Largest SSE event accepted: its `data` so far plus the line still arriving.
pub const MAX_EVENT: usize = 16 * 1024 * 1024;
/// Largest streamed response accepted, all events together.
pub const MAX_STREAM: u64 = 256 * 1024 * 1024;

/// `64 KB`, `16 MB`.
pub fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{} MB", b >> 20),
        b if b >= 1 << 10 => format!("{} KB", b >> 10),
        b => format!("{b} bytes"),
    }
}

/// At most `cap` bytes of a body.
#[derive(Debug, Default)]
pub struct Capped {
    pub bytes: Vec<u8>,
    /// More followed and was not read.
    pub cut: bool,
    /// The body could not be read to its end (or to the cap): a transport
    /// error or `within` ran out.
    pub failed: Option<String>,
}

impl Capped {
    pub fn text(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.bytes)
    }
}

/// Reads a body up to `cap` bytes, for at most `within` in all; the rest is
/// never read (dropping the response closes the connection).
pub async fn read_capped(mut response: reqwest::Response, cap: usize, within: Duration) -> Capped {
    let mut out = Capped::default();
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, response.chunk()).await {
            Err(_) => {
                out.failed = Some(format!("no complete body within {} s", within.as_secs_f32()));
                return out;
            }
            Ok(Err(e)) => {
                out.failed = Some(error_chain(&e));
                return out;
            }
            Ok(Ok(None)) => return out,
            Ok(Ok(Some(chunk))) => {
                let room = cap - out.bytes.len();
                if chunk.len() > room {
                    out.bytes.extend_from_slice(&chunk[..room]);
                    out.cut = true;
                    return out;
                }
                out.bytes.extend_from_slice(&chunk);
            }
        }
    }
}

/// An error body, read with [`MAX_ERROR_BODY`] as the cap, and the note to
/// add to the error message when it was cut.
pub async fn error_body(response: reqwest::Response, within: Duration) -> (String, Option<String>) {
    let body = read_capped(response, MAX_ERROR_BODY, within).await;
    let note = body.cut.then(|| format!(" (the error body was cut at {})", size(MAX_ERROR_BODY as u64)));
    (body.text().into_owned(), note)
}

/// One server-sent event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Event {
    /// The `event:` field, `message` when there was none.
    pub event: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// The SSE events of a streaming response body, parsed as they arrive
/// (the WHATWG rules: `\n`, `\r\n` or `\r` ends a line, `:` starts a
/// comment, `data:` lines are joined, a blank line ends an event).
///
/// The idle timeout is a deadline, not a silence timer: it starts when the
/// headers arrive and only the end of an event moves it (a blank line after
/// at least one line, so a `: ping` keep-alive counts, as llama-cpp-python
/// sends them before a slow first token; bytes of an unfinished event never
/// do, whether they trickle or flood). Work and memory are linear in the
/// bytes received: a line is scanned once, the buffer holds only the line
/// still arriving, an event is limited to [`MAX_EVENT`] and the whole
/// stream to [`MAX_STREAM`].
pub struct Sse<S> {
    body: S,
    provider: &'static str,
    idle: Duration,
    deadline: tokio::time::Instant,
    /// Received bytes not yet parsed start at `pos`.
    buf: Vec<u8>,
    pos: usize,
    /// Bytes from `pos` known to hold no line end.
    scanned: usize,
    /// The last line ended with `\r`: a `\n` right after it belongs to it.
    after_cr: bool,
    first_line: bool,
    /// A line of the current event was seen (a blank line then ends it).
    in_event: bool,
    event: String,
    data: String,
    has_data: bool,
    received: u64,
    ended: bool,
    max_event: usize,
    max_stream: u64,
    /// Bytes examined for line ends: each received byte once (a test checks).
    examined: u64,
    /// Bytes received since the task last yielded.
    unyielded: usize,
}

/// How many bytes [`Sse::next`] handles before it lets other tasks run.
const YIELD_EVERY: usize = 256 * 1024;

/// The events of `response`, with `idle` as the deadline for each.
pub fn sse(
    response: reqwest::Response,
    idle: Duration,
    provider: &'static str,
) -> Sse<impl Stream<Item = reqwest::Result<impl AsRef<[u8]>>> + Unpin> {
    Sse::new(Box::pin(response.bytes_stream()), idle, provider)
}

impl<S, B, E> Sse<S>
where
    S: Stream<Item = Result<B, E>> + Unpin,
    B: AsRef<[u8]>,
    E: std::fmt::Display,
{
    pub fn new(body: S, idle: Duration, provider: &'static str) -> Self {
        Self {
            body,
            provider,
            idle,
            deadline: tokio::time::Instant::now() + idle,
            buf: Vec::new(),
            pos: 0,
            scanned: 0,
            after_cr: false,
            first_line: true,
            in_event: false,
            event: String::new(),
            data: String::new(),
            has_data: false,
            received: 0,
            ended: false,
            max_event: MAX_EVENT,
            max_stream: MAX_STREAM,
            examined: 0,
            unyielded: 0,
        }
    }

    /// The next event; `None` when the body ends (an unfinished event at the
    /// end is dropped, as the spec says). An error when the deadline passes
    /// without an event ending, when the body breaks, or when a limit is hit.
    pub async fn next(&mut self) -> Result<Option<Event>, ModelError> {
        loop {
            if let Some(ev) = self.parse()? {
                return Ok(Some(ev));
            }
            if self.ended {
                return Ok(None);
            }
            // Checked here too: a body that is always ready (a flood) would
            // otherwise never let the timer fire.
            if tokio::time::Instant::now() >= self.deadline {
                return Err(self.stalled());
            }
            match tokio::time::timeout_at(self.deadline, self.body.next()).await {
                Err(_) => return Err(self.stalled()),
                Ok(None) => self.ended = true,
                Ok(Some(Err(e))) => {
                    return Err(ModelError::new(
                        ModelErrorKind::Network,
                        None,
                        format!("the {} stream broke: {e}", self.provider),
                    ));
                }
                Ok(Some(Ok(chunk))) => {
                    self.push(chunk.as_ref())?;
                    self.unyielded += chunk.as_ref().len();
                    if self.unyielded >= YIELD_EVERY {
                        // A body that is always ready would keep this task
                        // (and whatever it is raced against: cancel, the
                        // wall clock) from ever being polled otherwise.
                        self.unyielded = 0;
                        tokio::task::yield_now().await;
                    }
                }
            }
        }
    }

    fn stalled(&self) -> ModelError {
        ModelError::new(
            ModelErrorKind::Network,
            None,
            format!("the {} stream stalled: no complete event for {} s", self.provider, self.idle.as_secs_f32()),
        )
    }

    fn too_large(&self, what: String) -> ModelError {
        let mut e = ModelError::new(
            ModelErrorKind::Decode,
            Some(200),
            format!("the {} stream sent {what}; a response that large is not accepted", self.provider),
        );
        e.retryable = false;
        e
    }

    fn push(&mut self, chunk: &[u8]) -> Result<(), ModelError> {
        self.received += chunk.len() as u64;
        if self.received > self.max_stream {
            return Err(self.too_large(format!("more than {}", size(self.max_stream))));
        }
        if self.pos > 0 {
            // Only the unfinished line is left to move.
            self.buf.drain(..self.pos);
            self.pos = 0;
            if self.buf.capacity() > (1 << 20) && self.buf.len() < self.buf.capacity() / 4 {
                self.buf.shrink_to(self.buf.len().max(64 * 1024));
            }
        }
        self.buf.extend_from_slice(chunk);
        self.check_event_size()
    }

    fn check_event_size(&self) -> Result<(), ModelError> {
        if self.data.len() + self.event.len() + (self.buf.len() - self.pos) > self.max_event {
            return Err(self.too_large(format!("an event over {}", size(self.max_event as u64))));
        }
        Ok(())
    }

    /// The next complete line in the buffer, without its end.
    fn line(&mut self) -> Option<(usize, usize)> {
        if self.after_cr {
            if self.pos == self.buf.len() {
                return None;
            }
            if self.buf[self.pos] == b'\n' {
                self.pos += 1;
            }
            self.after_cr = false;
        }
        let start = self.pos;
        let from = start + self.scanned;
        match self.buf[from..].iter().position(|&b| b == b'\n' || b == b'\r') {
            None => {
                self.examined += (self.buf.len() - from) as u64;
                self.scanned = self.buf.len() - start;
                None
            }
            Some(i) => {
                self.examined += i as u64 + 1;
                let end = from + i;
                self.after_cr = self.buf[end] == b'\r';
                self.pos = end + 1;
                self.scanned = 0;
                Some((start, end))
            }
        }
    }

    /// Parses the complete lines received; the first event they finish.
    fn parse(&mut self) -> Result<Option<Event>, ModelError> {
        while let Some((mut start, end)) = self.line() {
            if std::mem::take(&mut self.first_line) && self.buf[start..end].starts_with("\u{feff}".as_bytes()) {
                start += 3;
            }
            let line = &self.buf[start..end];
            if line.is_empty() {
                if !std::mem::take(&mut self.in_event) {
                    continue;
                }
                self.deadline = tokio::time::Instant::now() + self.idle;
                let event = std::mem::take(&mut self.event);
                if !std::mem::take(&mut self.has_data) {
                    continue;
                }
                let mut data = std::mem::take(&mut self.data);
                data.pop(); // the `\n` after the last data line
                let event = if event.is_empty() { "message".to_string() } else { event };
                return Ok(Some(Event { event, data }));
            }
            self.in_event = true;
            if line[0] == b':' {
                continue;
            }
            let (field, value) = match line.iter().position(|&b| b == b':') {
                Some(i) => {
                    let value = &line[i + 1..];
                    (&line[..i], value.strip_prefix(b" ").unwrap_or(value))
                }
                None => (line, &[][..]),
            };
            match field {
                b"event" => self.event = String::from_utf8_lossy(value).into_owned(),
                b"data" => {
                    self.data.push_str(&String::from_utf8_lossy(value));
                    self.data.push('\n');
                    self.has_data = true;
                    self.check_event_size()?;
                }
                _ => {} // `id`, `retry` and unknown fields do not matter here.
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[tokio::test]
    async fn clients_for_one_endpoint_share_their_connections() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        // A keep-alive HTTP/1.1 server on loopback that counts connections.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 1024];
                    while let Ok(n) = socket.read(&mut chunk).await {
                        if n == 0 {
                            break;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            buf.drain(..end + 4);
                            let _ = socket.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").await;
                        }
                    }
                });
            }
        });
        let endpoint = Endpoint {
            base_url: format!("http://{addr}"),
            api_key: None,
            key_source: String::new(),
            model: "m".into(),
            max_retries: 0,
            // A timeout no other test uses: this test's own client.
            connect_timeout: Duration::from_millis(4321),
            idle_timeout: Duration::from_secs(5),
        };
        for _ in 0..3 {
            // A new provider per run, as `from_config` builds them.
            let text = client(&endpoint).get(format!("http://{addr}/v1/models")).send().await.unwrap().text().await;
            assert_eq!(text.unwrap(), "ok");
        }
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1, "three runs, one connection");
    }

    #[test]
    fn retry_hints_prefer_ms_then_seconds_then_dates() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_hints(&h), (None, Some(Duration::from_secs(2))));
        h.insert("retry-after-ms", HeaderValue::from_static("150"));
        assert_eq!(retry_hints(&h).1, Some(Duration::from_millis(150)));
        h.insert("x-should-retry", HeaderValue::from_static("false"));
        assert_eq!(retry_hints(&h).0, Some(false));
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("Sun, 06 Nov 1994 08:49:37 GMT"));
        assert_eq!(retry_hints(&h).1, Some(Duration::ZERO), "a past date means now");
        assert_eq!(
            httpdate("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(std::time::UNIX_EPOCH + Duration::from_secs(784_111_777))
        );
        assert_eq!(httpdate("yesterday"), None);
    }

    #[test]
    fn retryable_statuses_follow_the_sdks() {
        for s in [408, 409, 429, 500, 502, 503, 529] {
            assert!(status_retryable(s), "{s}");
        }
        for s in [400, 401, 403, 404, 413, 422] {
            assert!(!status_retryable(s), "{s}");
        }
    }

    /// A body that yields `pieces` with `pause` before each (virtual time in
    /// paused tests).
    type Body = std::pin::Pin<Box<dyn Stream<Item = Result<Vec<u8>, String>> + Send>>;

    fn body(pieces: Vec<Vec<u8>>, pause: Duration) -> Body {
        if pause.is_zero() {
            return Box::pin(futures::stream::iter(pieces.into_iter().map(Ok)));
        }
        Box::pin(futures::stream::iter(pieces).then(move |p| async move {
            tokio::time::sleep(pause).await;
            Ok(p)
        }))
    }

    fn parser(pieces: &[&[u8]]) -> Sse<Body> {
        Sse::new(body(pieces.iter().map(|p| p.to_vec()).collect(), Duration::ZERO), Duration::from_secs(5), "Test")
    }

    async fn all<S: Stream<Item = Result<Vec<u8>, String>> + Unpin>(sse: &mut Sse<S>) -> Vec<(String, String)> {
        let mut out = Vec::new();
        while let Some(ev) = sse.next().await.unwrap() {
            out.push((ev.event, ev.data));
        }
        out
    }

    fn ev(event: &str, data: &str) -> (String, String) {
        (event.to_string(), data.to_string())
    }

    #[tokio::test]
    async fn sse_follows_the_whatwg_rules_whatever_the_chunking() {
        let stream = "\u{feff}event: message_start\ndata: {\"a\":1}\n\n: ping\n\nevent: x\r\ndata:two\r\ndata:  lines\r\n\r\n\
                      data: cr\rid: 7\rretry: 10\runknown\r\rdata: é漢😀\n\nevent: only-a-name\n\ndata: unfinished";
        let want =
            vec![ev("message_start", "{\"a\":1}"), ev("x", "two\n lines"), ev("message", "cr"), ev("message", "é漢😀")];
        assert_eq!(all(&mut parser(&[stream.as_bytes()])).await, want);
        // Every byte in its own chunk: `\r` then `\n` in the next one, UTF-8 split.
        let bytes: Vec<&[u8]> = stream.as_bytes().chunks(1).collect();
        assert_eq!(all(&mut parser(&bytes)).await, want);
        for n in [2, 3, 5, 7] {
            let bytes: Vec<&[u8]> = stream.as_bytes().chunks(n).collect();
            assert_eq!(all(&mut parser(&bytes)).await, want, "pieces of {n}");
        }
    }

    #[tokio::test]
    async fn a_long_line_is_examined_once_whatever_the_chunking() {
        let line = format!("data: {}\n\n", "x".repeat(200_000));
        let bytes: Vec<&[u8]> = line.as_bytes().chunks(1).collect();
        let mut sse = parser(&bytes);
        let got = sse.next().await.unwrap().unwrap();
        assert_eq!(got.data.len(), 200_000);
        assert_eq!(sse.examined, line.len() as u64, "each byte examined once, not once per chunk");
        assert!(sse.buf.capacity() < 1 << 20);
    }

    #[tokio::test(start_paused = true)]
    async fn the_idle_deadline_is_moved_only_by_the_end_of_an_event() {
        let idle = Duration::from_secs(1);
        // A trickle: one byte every 100 ms, no event boundary, for a minute.
        let started = tokio::time::Instant::now();
        let mut sse = Sse::new(body(vec![b"x".to_vec(); 600], Duration::from_millis(100)), idle, "Test");
        let e = sse.next().await.unwrap_err();
        assert_eq!(e.message, "the Test stream stalled: no complete event for 1 s");
        assert!(e.retryable);
        assert!(started.elapsed() <= idle + Duration::from_millis(1), "{:?}", started.elapsed());
        // Comment lines without the blank line that ends an event.
        let started = tokio::time::Instant::now();
        let mut sse = Sse::new(body(vec![b": keep-alive\n".to_vec(); 600], Duration::from_millis(100)), idle, "Test");
        assert!(sse.next().await.unwrap_err().message.contains("stalled"));
        assert!(started.elapsed() <= idle + Duration::from_millis(1));
        // Lone blank lines are not events either.
        let mut sse = Sse::new(body(vec![b"\n".to_vec(); 600], Duration::from_millis(100)), idle, "Test");
        assert!(sse.next().await.unwrap_err().message.contains("stalled"));
        // Keep-alive comments every 400 ms hold the stream open for 4 s; then the event.
        let mut pieces = vec![b": ping\n\n".to_vec(); 10];
        pieces.push(b"data: late\n\n".to_vec());
        let started = tokio::time::Instant::now();
        let mut sse = Sse::new(body(pieces, Duration::from_millis(400)), idle, "Test");
        assert_eq!(sse.next().await.unwrap().unwrap().data, "late");
        assert!(started.elapsed() >= Duration::from_secs(4));
    }

    #[tokio::test(start_paused = true)]
    async fn a_flood_that_is_always_ready_still_meets_the_deadline() {
        // Never a pending poll: only the explicit check can end this.
        let idle = Duration::from_secs(1);
        let flood = futures::stream::repeat_with(|| Ok::<_, String>(vec![b'x'; 1024]));
        let mut sse = Sse::new(Box::pin(flood), idle, "Test");
        sse.max_event = usize::MAX;
        sse.max_stream = u64::MAX;
        // Paused time does not move by itself: advance it from a side task.
        let clock = tokio::spawn(async {
            loop {
                tokio::time::advance(Duration::from_millis(100)).await;
                tokio::task::yield_now().await;
            }
        });
        let e = tokio::time::timeout(Duration::from_secs(30), sse.next()).await;
        clock.abort();
        assert!(e.expect("ended").unwrap_err().message.contains("stalled"));
    }

    #[tokio::test]
    async fn events_and_streams_have_a_size_limit() {
        let mut sse = parser(&[b"data: 0123456789", b"0123456789", b"0123456789\n\n"]);
        sse.max_event = 25;
        let e = sse.next().await.unwrap_err();
        assert_eq!(e.message, "the Test stream sent an event over 25 bytes; a response that large is not accepted");
        assert!(!e.retryable);
        // Many data lines add up too.
        let mut sse = parser(&[b"data: 0123456789\n", b"data: 0123456789\n", b"data: 0123456789\n\n"]);
        sse.max_event = 25;
        assert!(sse.next().await.unwrap_err().message.contains("an event over 25 bytes"));
        // Small events, but too many of them.
        let mut sse = parser(&[&b"data: a\n\n"[..]; 10]);
        sse.max_stream = 50;
        let mut n = 0;
        let e = loop {
            match sse.next().await {
                Ok(Some(_)) => n += 1,
                Ok(None) => panic!("no limit"),
                Err(e) => break e,
            }
        };
        assert_eq!(n, 5);
        assert_eq!(e.message, "the Test stream sent more than 50 bytes; a response that large is not accepted");
    }

    #[tokio::test]
    async fn a_broken_body_is_a_retryable_error() {
        let pieces: Vec<Result<Vec<u8>, String>> = vec![Ok(b"data: a\n\n".to_vec()), Err("connection reset".into())];
        let mut sse = Sse::new(futures::stream::iter(pieces), Duration::from_secs(1), "Test");
        assert_eq!(sse.next().await.unwrap().unwrap().data, "a");
        let e = sse.next().await.unwrap_err();
        assert_eq!((e.message.as_str(), e.retryable), ("the Test stream broke: connection reset", true));
    }

    #[test]
    fn sizes_read_well() {
        assert_eq!(size(MAX_ERROR_BODY as u64), "64 KB");
        assert_eq!(size(MAX_EVENT as u64), "16 MB");
        assert_eq!(size(300), "300 bytes");
    }
}
