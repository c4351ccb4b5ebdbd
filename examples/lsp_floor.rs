//! The do-nothing language server: the floor `examples/lsp_load.rs` measures
//! real servers against (what the pipe, the framing and JSON cost).
//!
//! Blocking std I/O on one thread, framed by `agentfix_lsp_framing` (as the
//! agentfix server is). `initialize` is answered with incremental
//! sync and `codeActionProvider: true`, `textDocument/codeAction` with `[]`,
//! `shutdown` with `null`, any other request with MethodNotFound; every
//! notification is read and ignored (no document is kept); `exit` (or the
//! end of stdin) ends the process, with code 0 after `shutdown`, else 1.

use std::io::Write;

use agentfix_lsp_framing::{Frame, SyncFrames};
use serde_json::{Value, json};

/// One message's body, or `None` at the end of input (or a broken frame).
fn read<R: std::io::Read>(frames: &mut SyncFrames<R>) -> Option<Vec<u8>> {
    match frames.next_frame().ok()?? {
        Frame::Body(body) => Some(body),
        Frame::Broken(_) => None,
    }
}

fn send(out: &mut impl Write, message: &Value) {
    let _ = agentfix_lsp_framing::write_frame(out, message.to_string().as_bytes());
    let _ = out.flush();
}

fn main() {
    let mut input = SyncFrames::new(std::io::stdin().lock());
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
