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

use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};

/// The internal notification standing in for a malformed message.
pub const INVALID_MESSAGE: &str = "$/agentfix/invalidMessage";

/// Largest message body accepted (bigger ones are skipped and reported).
const MAX_BODY: usize = 64 * 1024 * 1024;
/// Largest header line accepted.
const MAX_HEADER_LINE: usize = 8 * 1024;

/// Copies LSP messages from `input` to `output` until `input` ends,
/// replacing malformed messages as the module documentation says.
pub async fn sanitize<R, W>(input: R, mut output: W)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut reader = BufReader::new(input);
    loop {
        let frame = match read_frame(&mut reader).await {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) => {
                tracing::warn!("stdin read failed: {e}");
                break;
            }
        };
        let body = match frame {
            Frame::Body(bytes) => checked(&bytes),
            Frame::Broken(reason) => invalid(-32700, &reason, None),
        };
        let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        out.extend_from_slice(&body);
        if output.write_all(&out).await.is_err() || output.flush().await.is_err() {
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

/// Reads one frame; `None` at a clean end of input.
async fn read_frame<R: AsyncBufRead + Unpin>(reader: &mut R) -> std::io::Result<Option<Frame>> {
    let mut content_length: Option<Result<usize, String>> = None;
    let mut saw_header = false;
    loop {
        let mut line = Vec::new();
        let n = (&mut *reader).take(MAX_HEADER_LINE as u64).read_until(b'\n', &mut line).await?;
        if n == 0 {
            return Ok(if saw_header {
                Some(Frame::Broken("input ended inside message headers".into()))
            } else {
                None
            });
        }
        if !line.ends_with(b"\n") && line.len() >= MAX_HEADER_LINE {
            // Skip the rest of an over-long line.
            let mut rest = Vec::new();
            reader.read_until(b'\n', &mut rest).await?;
            return Ok(Some(Frame::Broken("a message header line is too long".into())));
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
            content_length =
                Some(value.trim().parse::<usize>().map_err(|_| format!("invalid Content-Length `{}`", value.trim())));
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
        tokio::io::copy(&mut (&mut *reader).take(len as u64), &mut tokio::io::sink()).await?;
        return Ok(Some(Frame::Broken(format!("a message of {len} bytes is larger than {MAX_BODY} bytes"))));
    }
    let mut body = vec![0; len];
    match reader.read_exact(&mut body).await {
        Ok(_) => Ok(Some(Frame::Body(body))),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            Ok(Some(Frame::Broken("input ended inside a message body".into())))
        }
        Err(e) => Err(e),
    }
}

/// The body itself when it is a JSON-RPC message, else a stand-in.
fn checked(body: &[u8]) -> Vec<u8> {
    let value: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return invalid(-32700, &format!("parse error: {e}"), None),
    };
    let Some(obj) = value.as_object() else {
        return invalid(-32600, "invalid request: a JSON-RPC message must be an object", None);
    };
    let id = obj.get("id").filter(|id| id.is_string() || id.is_number()).cloned();
    let has_method = obj.get("method").is_some_and(Value::is_string);
    let is_response = obj.contains_key("id") && (obj.contains_key("result") || obj.contains_key("error"));
    let params_ok = obj.get("params").is_none_or(|p| p.is_object() || p.is_array() || p.is_null());
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid(-32600, "invalid request: `jsonrpc` must be \"2.0\"", id);
    }
    if !(has_method || is_response) || !params_ok {
        return invalid(-32600, "invalid request: not a JSON-RPC request, notification or response", id);
    }
    body.to_vec()
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
}
