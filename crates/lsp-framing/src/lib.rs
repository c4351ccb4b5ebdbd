//! The LSP base protocol's framing, once for all of agentfix: a message is a
//! block of `Name: value` header lines ending in a blank line, of which
//! `Content-Length` (any ASCII case) gives the length of the body that
//! follows. The server's transport, the downstream client, the test
//! harness, the examples and the fuzz target all read and write through
//! this crate.
//!
//! Reading ([`Frames`], over a `futures` `AsyncBufRead`; [`SyncFrames`] over
//! a `std::io::Read`) stays in bounded memory whatever arrives: a header
//! line is at most [`Limits::header_line`] bytes and a body at most
//! [`Limits::body`]. What breaks a frame is reported as a [`Frame::Broken`]
//! and reading can go on: an over-long header line is skipped, kept
//! nowhere, up to the next `Content-Length:` (so a peer that wrote junk
//! without a line break has its next message read whole), an over-large
//! body is read past. Stray blank lines between messages and header lines
//! that are not `Name: value` are ignored, as servers are lenient; a
//! [`Frames::strict`] reader (for a test harness checking what a server
//! writes) reports them instead.
//!
//! Writing is [`write_frame`] (or [`frame`], the bytes): the header
//! `Content-Length: N\r\n\r\n`, then the body.

use std::fmt;
use std::io::{self, Read, Write};

use futures::io::{AllowStdIo, AsyncBufRead, AsyncBufReadExt, AsyncReadExt};

/// Largest message body accepted by default (bigger ones are read past and
/// reported).
pub const MAX_BODY: usize = 64 * 1024 * 1024;
/// Largest header line accepted by default.
pub const MAX_HEADER_LINE: usize = 8 * 1024;

/// The header a message starts with, where reading starts again after an
/// over-long line (compared ignoring ASCII case; its first byte occurs
/// nowhere else in it, which the matcher in `resync` relies on).
const RESYNC_AT: &[u8] = b"content-length:";

/// How large a header line and a body may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub header_line: usize,
    pub body: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { header_line: MAX_HEADER_LINE, body: MAX_BODY }
    }
}

/// One frame of the input: a body, or why the headers were unusable.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    Body(Vec<u8>),
    Broken(Broken),
}

/// Why a frame has no body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Broken {
    /// The header block had no `Content-Length`.
    NoContentLength,
    /// `Content-Length` was not a number (its value, trimmed).
    BadContentLength(String),
    /// The body was longer than the limit: it was read past.
    TooLarge { len: usize, max: usize },
    /// A header line was longer than the limit (in bytes): the next read
    /// skips up to the next `Content-Length:`.
    LongHeaderLine(usize),
    /// The input ended inside the header block.
    EndedInHeaders,
    /// The input ended inside the body.
    EndedInBody,
    /// A blank line where a header was due (strict readers only).
    StrayBlankLine,
    /// A header line that is not `Name: value` (strict readers only).
    NotAHeader(String),
}

impl fmt::Display for Broken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Broken::NoContentLength => f.write_str("a message has no Content-Length header"),
            Broken::BadContentLength(v) => write!(f, "invalid Content-Length `{v}`"),
            Broken::TooLarge { len, max } => write!(f, "a message of {len} bytes is larger than {max} bytes"),
            Broken::LongHeaderLine(max) => write!(f, "a message header line is longer than {max} bytes"),
            Broken::EndedInHeaders => f.write_str("input ended inside message headers"),
            Broken::EndedInBody => f.write_str("input ended inside a message body"),
            Broken::StrayBlankLine => f.write_str("a blank line where a message header was expected"),
            Broken::NotAHeader(line) => write!(f, "not a message header line: {line:?}"),
        }
    }
}

impl std::error::Error for Broken {}

/// The frames of an asynchronous input, in bounded memory (see the crate
/// documentation).
pub struct Frames<R> {
    reader: R,
    limits: Limits,
    strict: bool,
    /// Bytes already read that begin the next header line (a
    /// `Content-Length:` found while skipping).
    pending: Vec<u8>,
    /// The over-long header line last reported (what of it was read), to
    /// skip past before the next frame.
    skip_after: Option<Vec<u8>>,
}

impl<R: AsyncBufRead + Unpin> Frames<R> {
    /// Frames of `reader`, with the default [`Limits`], lenient.
    pub fn new(reader: R) -> Self {
        Frames { reader, limits: Limits::default(), strict: false, pending: Vec::new(), skip_after: None }
    }

    /// The same reader with other limits.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The same reader, reporting stray blank lines and header lines that
    /// are not `Name: value` as broken frames (see [`Broken`]).
    pub fn strict(mut self) -> Self {
        self.strict = true;
        self
    }

    /// Reads one frame; `None` at a clean end of input (between frames).
    pub async fn next_frame(&mut self) -> io::Result<Option<Frame>> {
        if let Some(read) = self.skip_after.take() {
            self.resync(&read).await?;
        }
        let len = match self.headers().await? {
            Headers::End => return Ok(None),
            Headers::Broken(b) => return Ok(Some(Frame::Broken(b))),
            Headers::Length(len) => len,
        };
        if len > self.limits.body {
            futures::io::copy(&mut (&mut self.reader).take(len as u64), &mut futures::io::sink()).await?;
            return Ok(Some(Frame::Broken(Broken::TooLarge { len, max: self.limits.body })));
        }
        let mut body = vec![0; len];
        match self.reader.read_exact(&mut body).await {
            Ok(()) => Ok(Some(Frame::Body(body))),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(Some(Frame::Broken(Broken::EndedInBody))),
            Err(e) => Err(e),
        }
    }

    /// Reads a header block up to its blank line.
    async fn headers(&mut self) -> io::Result<Headers> {
        let max = self.limits.header_line;
        let mut content_length: Option<Result<usize, Broken>> = None;
        let mut saw_header = false;
        loop {
            let mut line = std::mem::take(&mut self.pending);
            saw_header |= !line.is_empty();
            let room = max.saturating_sub(line.len()) as u64;
            let n = (&mut self.reader).take(room).read_until(b'\n', &mut line).await?;
            if n == 0 {
                return Ok(if saw_header { Headers::Broken(Broken::EndedInHeaders) } else { Headers::End });
            }
            if !line.ends_with(b"\n") && line.len() >= max {
                self.skip_after = Some(line);
                return Ok(Headers::Broken(Broken::LongHeaderLine(max)));
            }
            let text = String::from_utf8_lossy(&line);
            let text = text.trim_end_matches(['\r', '\n']);
            if text.is_empty() {
                if saw_header {
                    break;
                }
                if self.strict {
                    return Ok(Headers::Broken(Broken::StrayBlankLine));
                }
                continue; // Stray blank lines between messages.
            }
            saw_header = true;
            let Some((name, value)) = text.split_once(':') else {
                if self.strict {
                    return Ok(Headers::Broken(Broken::NotAHeader(text.to_string())));
                }
                continue;
            };
            if name.trim().eq_ignore_ascii_case("content-length") {
                let value = value.trim();
                content_length = Some(value.parse::<usize>().map_err(|_| Broken::BadContentLength(value.into())));
            }
        }
        Ok(match content_length {
            None => Headers::Broken(Broken::NoContentLength),
            Some(Err(b)) => Headers::Broken(b),
            Some(Ok(len)) => Headers::Length(len),
        })
    }

    /// After the over-long line `read` (what of it was read: no line
    /// break), skips input without keeping it up to the next
    /// `Content-Length:`, which becomes `pending`, or to the end of the input.
    async fn resync(&mut self, read: &[u8]) -> io::Result<()> {
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
            let buf = match self.reader.fill_buf().await {
                Ok(buf) => buf,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
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
            self.reader.consume_unpin(used);
            if matched == n {
                self.pending = b"Content-Length:".to_vec();
                return Ok(());
            }
        }
    }
}

/// What a header block gave.
enum Headers {
    /// The input ended before it began.
    End,
    Broken(Broken),
    Length(usize),
}

/// The frames of a blocking `std::io::Read` (buffered here, 64 KB), as
/// [`Frames`] reads them.
pub struct SyncFrames<R: Read>(Frames<AllowStdIo<io::BufReader<R>>>);

impl<R: Read> SyncFrames<R> {
    /// Frames of `input`, with the default [`Limits`], lenient.
    pub fn new(input: R) -> Self {
        SyncFrames(Frames::new(AllowStdIo::new(io::BufReader::with_capacity(1 << 16, input))))
    }

    /// The same reader with other limits.
    pub fn with_limits(self, limits: Limits) -> Self {
        SyncFrames(self.0.with_limits(limits))
    }

    /// The same reader, strict (see [`Frames::strict`]).
    pub fn strict(self) -> Self {
        SyncFrames(self.0.strict())
    }

    /// Reads one frame, blocking; `None` at a clean end of input. (A
    /// blocking reader never leaves the future pending: it completes in
    /// its first poll.)
    pub fn next_frame(&mut self) -> io::Result<Option<Frame>> {
        futures::executor::block_on(self.0.next_frame())
    }
}

/// The header of a body of `len` bytes.
pub fn header(len: usize) -> String {
    format!("Content-Length: {len}\r\n\r\n")
}

/// One message: the header, then `body`.
pub fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = header(body.len()).into_bytes();
    out.extend_from_slice(body);
    out
}

/// Writes one message (the header, then `body`); does not flush.
pub fn write_frame(out: &mut impl Write, body: &[u8]) -> io::Result<()> {
    out.write_all(header(body.len()).as_bytes())?;
    out.write_all(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(input: &[u8]) -> Vec<Frame> {
        let mut frames = SyncFrames::new(input);
        let mut out = Vec::new();
        while let Some(f) = frames.next_frame().unwrap() {
            out.push(f);
        }
        out
    }

    fn body(s: &str) -> Frame {
        Frame::Body(s.as_bytes().to_vec())
    }

    #[test]
    fn a_written_frame_reads_back_with_other_headers_any_case_and_blank_lines_between() {
        let mut input = Vec::new();
        write_frame(&mut input, b"{}").unwrap();
        input.extend_from_slice(b"\r\n\ncontent-length:  3 \r\nContent-Type: x; charset=utf-8\r\njunk\r\n\r\nabc");
        input.extend_from_slice(&frame("漢".as_bytes()));
        assert_eq!(frames(&input), [body("{}"), body("abc"), body("漢")]);
        assert_eq!(frame(b"xy"), b"Content-Length: 2\r\n\r\nxy");
        assert!(frames(b"").is_empty());
    }

    #[test]
    fn broken_headers_are_reported_with_the_server_s_messages_and_reading_goes_on() {
        let input = b"Content-Length: x\r\n\r\nContent-Type: y\r\n\r\nContent-Length: 2\r\n\r\nok";
        let got = frames(input);
        assert_eq!(
            got,
            [Frame::Broken(Broken::BadContentLength("x".into())), Frame::Broken(Broken::NoContentLength), body("ok")]
        );
        assert_eq!(Broken::BadContentLength("x".into()).to_string(), "invalid Content-Length `x`");
        assert_eq!(Broken::NoContentLength.to_string(), "a message has no Content-Length header");
        assert_eq!(frames(b"Content-Length: 9\r\n\r\nabc"), [Frame::Broken(Broken::EndedInBody)]);
        assert_eq!(frames(b"Content-Length: 9\r\n"), [Frame::Broken(Broken::EndedInHeaders)]);
    }

    #[test]
    fn limits_bound_the_body_and_the_header_line() {
        let limits = Limits { header_line: 64, body: 4 };
        let input = b"Content-Length: 6\r\n\r\n123456Content-Length: 4\r\n\r\n1234";
        let mut f = SyncFrames::new(&input[..]).with_limits(limits);
        assert_eq!(f.next_frame().unwrap(), Some(Frame::Broken(Broken::TooLarge { len: 6, max: 4 })));
        assert_eq!(f.next_frame().unwrap(), Some(body("1234")));
        // An over-long line is reported at once; the skip to the next
        // Content-Length happens on the next read.
        let input = format!("{}Content-Length: 2\r\n\r\nok", "x".repeat(1000));
        let mut f = SyncFrames::new(input.as_bytes()).with_limits(limits);
        assert_eq!(f.next_frame().unwrap(), Some(Frame::Broken(Broken::LongHeaderLine(64))));
        assert_eq!(f.next_frame().unwrap(), Some(body("ok")));
        assert_eq!(f.next_frame().unwrap(), None);
    }

    #[test]
    fn a_strict_reader_reports_what_a_lenient_one_ignores() {
        let strict = |input: &[u8]| SyncFrames::new(input).strict().next_frame().unwrap();
        assert_eq!(strict(b"\r\nContent-Length: 2\r\n\r\nok"), Some(Frame::Broken(Broken::StrayBlankLine)));
        assert_eq!(
            strict(b"Content-Length: 2\r\nnonsense\r\n\r\nok"),
            Some(Frame::Broken(Broken::NotAHeader("nonsense".into())))
        );
        assert_eq!(strict(b"Content-Length: 2\r\n\r\nok"), Some(body("ok")));
    }

    #[test]
    fn the_async_reader_reads_in_small_pieces() {
        // A reader that returns one byte per read.
        struct Trickle<'a>(&'a [u8]);
        impl futures::io::AsyncRead for Trickle<'_> {
            fn poll_read(
                mut self: std::pin::Pin<&mut Self>,
                _: &mut std::task::Context<'_>,
                buf: &mut [u8],
            ) -> std::task::Poll<io::Result<usize>> {
                let n = self.0.len().min(buf.len()).min(1);
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                std::task::Poll::Ready(Ok(n))
            }
        }
        let input = [frame(b"[1]"), frame(b"{\"a\":2}")].concat();
        let mut f = Frames::new(futures::io::BufReader::new(Trickle(&input)));
        futures::executor::block_on(async {
            assert_eq!(f.next_frame().await.unwrap(), Some(body("[1]")));
            assert_eq!(f.next_frame().await.unwrap(), Some(body("{\"a\":2}")));
            assert_eq!(f.next_frame().await.unwrap(), None);
        });
    }
}
