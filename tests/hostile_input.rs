//! Input no editor sends, over the server's real stdio: every message gets
//! an answer or is reported, and the server answers the next request.

mod common;

use common::stdio::Server;
use serde_json::json;

fn started() -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let mut server = Server::start(&root);
    server.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"processId": null, "rootUri": common::file_uri(&root), "capabilities": {}}}));
    server.response(1);
    server.send(&json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}));
    (dir, server)
}

fn still_answers(server: &mut Server, id: i64) {
    server.send(&json!({"jsonrpc": "2.0", "id": id, "method": "workspace/executeCommand",
        "params": {"command": "nope", "arguments": []}}));
    let r = server.response(id);
    assert!(r["error"]["message"].as_str().unwrap().contains("unknown command"), "{r}");
}

#[test]
fn deeply_nested_json_is_a_parse_error_not_a_stack_overflow() {
    let (_d, mut server) = started();
    let depth = 100_000;
    let body = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"x\",\"params\":{}{}}}",
        "[".repeat(depth),
        "]".repeat(depth)
    );
    server.send_raw(format!("Content-Length: {}\r\n\r\n{body}", body.len()).as_bytes());
    still_answers(&mut server, 2);
    assert!(server.seen.iter().any(|m| m["error"]["code"] == -32700), "{:?}", server.seen);
}

#[test]
fn a_body_over_64_mb_is_skipped_in_flat_memory_and_reported() {
    let (_d, mut server) = started();
    still_answers(&mut server, 2);
    let before = server.peak_kib();
    let len = 100 * 1024 * 1024;
    server.send_raw(format!("Content-Length: {len}\r\n\r\n").as_bytes());
    let chunk = vec![b' '; 1 << 20];
    for _ in 0..len / chunk.len() {
        server.send_raw(&chunk);
    }
    still_answers(&mut server, 3);
    assert!(server.seen.iter().any(|m| m["error"]["code"] == -32700), "{:?}", server.seen);
    let growth = server.peak_kib() - before;
    assert!(growth < 16 * 1024, "a skipped 100 MB body raised the peak by {growth} KiB");
}
