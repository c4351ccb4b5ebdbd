//! A tiny stdio MCP server for the tests (newline-delimited JSON-RPC, the
//! legacy `initialize` handshake), with two tools:
//!
//! - `lookup` (`readOnlyHint: true`): answers `found <query>`, with whether
//!   `ANTHROPIC_API_KEY` is in its environment and the value of
//!   `MCP_TEST_EXTRA`; the query `crash` exits the process mid-call, `hang`
//!   never answers, `image` answers with an image block, `env:A,B` with
//!   `A=set B=unset`: which of the variables are in its environment;
//! - `write_note` (no annotations): answers `wrote <text>`, or an error
//!   result (`isError`) for the text `fail`.
//!
//! Resources, in two pages of `resources/list` (the second after the cursor
//! `page2`): `test://notes/readme` (text) on the first, `test://data.bin`
//! (a blob) on the second; `resources/read` of any other uri is the
//! JSON-RPC error -32002 (resource not found).
//!
//! Each start appends `start <pid>` to the file `MCP_TEST_LOG` names, when set.

use std::io::{BufRead, Write};

use serde_json::{Value, json};

fn main() {
    if let Ok(log) = std::env::var("MCP_TEST_LOG")
        && let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(log)
    {
        // One write call: servers started together append to the same file,
        // and `writeln!` on a File writes piece by piece (the pieces interleaved).
        let _ = f.write_all(format!("start {}\n", std::process::id()).as_bytes());
    }
    let stdin = std::io::stdin();
    let mut out = std::io::stdout();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let Ok(msg) = serde_json::from_str::<Value>(&line) else { continue };
        let (Some(id), Some(method)) = (msg.get("id").cloned(), msg["method"].as_str()) else { continue };
        let reply = match method {
            "initialize" => json!({"result": {
                "protocolVersion": msg["params"]["protocolVersion"].as_str().unwrap_or("2025-06-18"),
                "capabilities": {"tools": {}, "resources": {}},
                "serverInfo": {"name": "mcp-test-server", "version": "1.0.0"}
            }}),
            "tools/list" => json!({"result": {"tools": [
                {
                    "name": "lookup",
                    "description": "Looks a thing up.",
                    "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
                    "annotations": {"readOnlyHint": true}
                },
                {
                    "name": "write_note",
                    "description": "Writes a note.",
                    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
                }
            ]}}),
            "tools/call" => {
                let args = &msg["params"]["arguments"];
                match msg["params"]["name"].as_str() {
                    Some("lookup") => match args["query"].as_str().unwrap_or("") {
                        "crash" => std::process::exit(3),
                        "hang" => continue,
                        "image" => json!({"result": {"content": [
                            {"type": "text", "text": "a picture:"},
                            {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"}
                        ]}}),
                        q if q.starts_with("env:") => {
                            let set = |name: &str| if std::env::var_os(name).is_some() { "set" } else { "unset" };
                            let text: Vec<String> = q[4..].split(',').map(|n| format!("{n}={}", set(n))).collect();
                            json!({"result": {"content": [{"type": "text", "text": text.join(" ")}]}})
                        }
                        q => {
                            let key = if std::env::var_os("ANTHROPIC_API_KEY").is_some() { "set" } else { "unset" };
                            let extra = std::env::var("MCP_TEST_EXTRA").unwrap_or_default();
                            let text = format!("found {q} (key {key}, extra {extra})");
                            json!({"result": {"content": [{"type": "text", "text": text}]}})
                        }
                    },
                    Some("write_note") => match args["text"].as_str().unwrap_or("") {
                        "fail" => {
                            json!({"result": {"content": [{"type": "text", "text": "note refused"}], "isError": true}})
                        }
                        t => json!({"result": {"content": [{"type": "text", "text": format!("wrote {t}")}]}}),
                    },
                    _ => json!({"error": {"code": -32602, "message": "unknown tool"}}),
                }
            }
            "resources/list" => match msg["params"]["cursor"].as_str() {
                None => json!({"result": {"resources": [
                    {"uri": "test://notes/readme", "name": "readme", "mimeType": "text/markdown", "description": "The notes."}
                ], "nextCursor": "page2"}}),
                Some("page2") => json!({"result": {"resources": [
                    {"uri": "test://data.bin", "name": "data", "mimeType": "application/octet-stream"}
                ]}}),
                Some(_) => json!({"error": {"code": -32602, "message": "invalid cursor"}}),
            },
            "resources/read" => match msg["params"]["uri"].as_str().unwrap_or("") {
                "test://notes/readme" => json!({"result": {"contents": [
                    {"uri": "test://notes/readme", "mimeType": "text/markdown", "text": "# Notes\nstdio resource text"}
                ]}}),
                "test://data.bin" => json!({"result": {"contents": [
                    {"uri": "test://data.bin", "mimeType": "application/octet-stream", "blob": "AAECAwQFBgc="}
                ]}}),
                uri => json!({"error": {"code": -32002, "message": format!("Resource not found: {uri}")}}),
            },
            "ping" => json!({"result": {}}),
            _ => json!({"error": {"code": -32601, "message": "method not found"}}),
        };
        let mut reply = reply;
        reply["jsonrpc"] = "2.0".into();
        reply["id"] = id;
        if writeln!(out, "{reply}").and_then(|()| out.flush()).is_err() {
            break;
        }
    }
}
