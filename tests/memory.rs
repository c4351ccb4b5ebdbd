//! Memory bounds of the server over stdio, measured as the process's peak
//! RSS (`VmHWM`): a 50 MB unsaved buffer must cost less than three times
//! its text.

mod common;

use common::stdio::Server;
use serde_json::json;

#[test]
fn a_50_mb_unsaved_buffer_costs_less_than_three_times_its_text() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let path = root.join("big.py");
    let uri = common::file_uri(&path);
    let mut server = Server::start(&root);
    server.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"processId": null, "rootUri": common::file_uri(&root), "capabilities": {}}}));
    server.response(1);
    server.send(&json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}));
    // A request answered after the notification: everything before it is done.
    let range = json!({"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}});
    server.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "textDocument/codeAction",
        "params": {"textDocument": {"uri": uri}, "range": range, "context": {"diagnostics": []}}}));
    server.response(2);
    let before = server.peak_kib();
    let line = "x = '漢字 and some ascii text to fill the line'  # 😀\n";
    let text = line.repeat(50 * 1024 * 1024 / line.len());
    let text_kib = text.len() as u64 / 1024;
    server.send(&json!({"jsonrpc": "2.0", "method": "textDocument/didOpen",
        "params": {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}}}));
    drop(text);
    server.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "textDocument/codeAction",
        "params": {"textDocument": {"uri": uri}, "range": range, "context": {"diagnostics": []}}}));
    let actions = server.response(3);
    assert!(actions["result"].is_array(), "{actions}");
    let growth = server.peak_kib() - before;
    eprintln!("peak RSS grew by {growth} KiB for a {text_kib} KiB buffer ({:.2}x)", growth as f64 / text_kib as f64);
    assert!(growth < 3 * text_kib, "peak RSS grew by {growth} KiB for a {text_kib} KiB buffer");
}
