//! The do-nothing language server: the floor `examples/lsp_load.rs` measures
//! real servers against (what the pipe, the framing and JSON cost).
//!
//! Blocking std I/O on one thread. `initialize` is answered with incremental
//! sync and `codeActionProvider: true`, `textDocument/codeAction` with `[]`,
//! `shutdown` with `null`, any other request with MethodNotFound; every
//! notification is read and ignored (no document is kept); `exit` (or the
//! end of stdin) ends the process, with code 0 after `shutdown`, else 1.

use std::io::{BufRead, BufReader, Write};

use serde_json::{Value, json};

/// One message's body, or `None` at the end of input.
fn read(reader: &mut impl BufRead) -> Option<Vec<u8>> {
    let mut len = None;
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let header = line.trim_end();
        if header.is_empty() {
            if len.is_some() {
                break;
            }
            continue;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            len = value.trim().parse::<usize>().ok();
        }
    }
    let mut body = vec![0; len?];
    reader.read_exact(&mut body).ok()?;
    Some(body)
}

fn send(out: &mut impl Write, message: &Value) {
    let body = message.to_string();
    let _ = write!(out, "Content-Length: {}\r\n\r\n{body}", body.len());
    let _ = out.flush();
}

fn main() {
    let mut input = BufReader::with_capacity(1 << 16, std::io::stdin().lock());
    let mut out = std::io::stdout().lock();
    let mut shut_down = false;
    while let Some(body) = read(&mut input) {
        let Ok(message) = serde_json::from_slice::<Value>(&body) else { continue };
        let method = message["method"].as_str().unwrap_or_default();
        let Some(id) = message.get("id").cloned() else {
            if method == "exit" {
                break;
            }
            continue; // a notification: ignored
        };
        if message.get("method").is_none() {
            continue; // a response to nothing we asked
        }
        let answer = match method {
            "initialize" => json!({"jsonrpc": "2.0", "id": id, "result": {
                "capabilities": {"textDocumentSync": 2, "codeActionProvider": true},
                "serverInfo": {"name": "lsp_floor"}
            }}),
            "textDocument/codeAction" => json!({"jsonrpc": "2.0", "id": id, "result": []}),
            "shutdown" => {
                shut_down = true;
                json!({"jsonrpc": "2.0", "id": id, "result": null})
            }
            other => json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": format!("lsp_floor does not answer {other}")}}),
        };
        send(&mut out, &answer);
    }
    std::process::exit(if shut_down { 0 } else { 1 });
}
