//! Minimal HTTP/1.1 plumbing of the mock model server: request parsing (Content-Length and
//! chunked bodies, `Expect: 100-continue`, keep-alive), JSON responses, and close-delimited
//! `text/event-stream` responses written chunk by chunk.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::Instant;

use serde_json::Value;

use super::{Chunk, next_id};

/// Largest request body the mock reads (the real limit for Messages is 32 MB).
const MAX_BODY: usize = 32 * 1024 * 1024;

pub(super) struct Request {
    pub(super) method: String,
    pub(super) path: String,
    pub(super) headers: Vec<(String, String)>,
    pub(super) body: Vec<u8>,
    pub(super) keep_alive: bool,
    /// When the request line arrived.
    pub(super) arrived: Instant,
}

impl Request {
    /// The first header with this (lowercase) name.
    pub(super) fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// A complete JSON response.
pub(super) struct Response {
    pub(super) status: u16,
    pub(super) headers: Vec<(String, String)>,
    pub(super) body: Value,
    /// Also send `x-request-id` (the OpenAI spelling) next to `request-id`.
    pub(super) openai: bool,
}

pub(super) fn bad(message: impl Into<String>) -> io::Error {
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
    String::from_utf8(buf).map(Some).map_err(|_| bad("non-UTF-8 bytes in request head"))
}

/// Reads one request; `None` when the client closed the connection between requests.
pub(super) fn read_request(reader: &mut BufReader<TcpStream>, writer: &mut TcpStream) -> io::Result<Option<Request>> {
    // RFC 9112 allows empty lines before the request line.
    let request_line = loop {
        match read_line(reader)? {
            None => return Ok(None),
            Some(line) if line.trim().is_empty() => continue,
            Some(line) => break line,
        }
    };
    let arrived = Instant::now();
    let mut parts = request_line.split_whitespace();
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next())
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
        let (name, value) = line.split_once(':').ok_or_else(|| bad(format!("bad header line {line:?}")))?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    // Absolute-form targets (sent to proxies) carry scheme and authority.
    let target = target.strip_prefix("http://").map_or(target, |rest| rest.find('/').map_or("/", |i| &rest[i..]));
    let path = target.split(['?', '#']).next().unwrap_or("").to_string();
    let mut request =
        Request { method: method.to_string(), path, headers, body: Vec::new(), keep_alive: false, arrived };
    let connection = request.header("connection").unwrap_or("").to_ascii_lowercase();
    request.keep_alive =
        if version == "HTTP/1.0" { connection.contains("keep-alive") } else { !connection.contains("close") };
    if request.header("expect").is_some_and(|e| e.eq_ignore_ascii_case("100-continue")) {
        writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
        writer.flush()?;
    }
    let chunked = request.header("transfer-encoding").is_some_and(|te| te.to_ascii_lowercase().contains("chunked"));
    if chunked {
        request.body = read_chunked(reader)?;
    } else if let Some(len) = request.header("content-length") {
        let len: usize = len.parse().map_err(|_| bad(format!("bad Content-Length {len:?}")))?;
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
        let size = usize::from_str_radix(size, 16).map_err(|_| bad(format!("bad chunk size line {line:?}")))?;
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

fn request_id_headers(request_id: &str, openai: bool) -> String {
    let mut head = format!("request-id: {request_id}\r\n");
    if openai {
        head.push_str(&format!("x-request-id: {request_id}\r\n"));
    }
    head
}

pub(super) fn write_response(writer: &mut TcpStream, response: &Response, keep_alive: bool) -> io::Result<()> {
    let body = serde_json::to_vec(&response.body).expect("serialize JSON");
    let request_id = response
        .body
        .get("request_id")
        .and_then(Value::as_str)
        .map_or_else(|| format!("req_mock{:020}", next_id()), str::to_string);
    let mut head = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{}connection: {}\r\n",
        response.status,
        reason(response.status),
        body.len(),
        request_id_headers(&request_id, response.openai),
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

/// Writes a `200 text/event-stream` head (no Content-Length: the body ends when the connection
/// closes), then the chunks one by one, flushing after each. Stops at [`Chunk::Close`]; the
/// caller closes the connection either way.
pub(super) fn write_stream(writer: &mut TcpStream, chunks: &[Chunk], openai: bool) -> io::Result<()> {
    let request_id = format!("req_mock{:020}", next_id());
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n{}connection: close\r\n\r\n",
        request_id_headers(&request_id, openai),
    );
    writer.write_all(head.as_bytes())?;
    writer.flush()?;
    write_chunks(writer, chunks)
}

/// Writes a response of any status with the given headers (`content-type: application/json`
/// unless they name one), close-delimited, then the chunks as [`write_stream`] does.
pub(super) fn write_raw(
    writer: &mut TcpStream,
    status: u16,
    headers: &[(String, String)],
    chunks: &[Chunk],
    openai: bool,
) -> io::Result<()> {
    let request_id = format!("req_mock{:020}", next_id());
    let mut head = format!(
        "HTTP/1.1 {status} {}\r\n{}connection: close\r\n",
        reason(status),
        request_id_headers(&request_id, openai)
    );
    if !headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("content-type")) {
        head.push_str("content-type: application/json\r\n");
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    writer.write_all(head.as_bytes())?;
    writer.flush()?;
    write_chunks(writer, chunks)
}

fn write_chunks(writer: &mut TcpStream, chunks: &[Chunk]) -> io::Result<()> {
    for chunk in chunks {
        match chunk {
            Chunk::Raw(text) => writer.write_all(text.as_bytes())?,
            Chunk::Bytes(bytes) => writer.write_all(bytes)?,
            Chunk::Sleep(pause) => thread::sleep(*pause),
            Chunk::Close => return Ok(()),
            Chunk::Repeat { piece, times, pause } => {
                for _ in 0..*times {
                    writer.write_all(piece)?;
                    if !pause.is_zero() {
                        writer.flush()?;
                        thread::sleep(*pause);
                    }
                }
            }
        }
        writer.flush()?;
    }
    Ok(())
}
