//! The test suite's mock model server as a standalone process, for the
//! editor integration tests (Neovim, VS Code, Emacs) that cannot link Rust.
//!
//! ```text
//! cargo run --example mock_model -- --replies replies.json [--log requests.jsonl]
//! ```
//!
//! Prints the base URL (`http://127.0.0.1:PORT`) on the first line of stdout,
//! then serves both `POST /v1/messages` (Anthropic, SSE when asked) and
//! `POST /v1/chat/completions` (OpenAI) until stdin closes. The API key is
//! `test-key-0123`. `replies.json` is an array consumed in order; each item is
//! one of `{"text": "…"}`, `{"tools": [["id", "name", {input}], …]}`,
//! `{"message": {assistant message object}}`, `{"status": 429, "body": {…},
//! "headers": [["retry-after", "1"]]}`, `{"hang": true}`, or
//! `{"delay_ms": 500, "reply": {…}}` (read by the mock crate's
//! `reply_from_json`). An item with `"for": "<marker>"` as
//! well (`{"for": "candidate 2 of 3", "text": "…"}`) answers only requests
//! whose body contains the marker, such as a best-of-N candidate's note;
//! those consume their own items in order, before the plain ones
//! (`MockModel::push_for`). With `--log`, every request received is appended
//! to the file as one JSON line `{method, path, body}`.

use std::io::{BufRead, Write};
use std::time::Duration;

use agentfix_mock_model::{self as mock_model, MockModel};
use serde_json::Value;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let Some(path) = arg("--replies") else {
        eprintln!("usage: mock_model --replies replies.json [--log requests.jsonl]");
        std::process::exit(2);
    };
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let items: Vec<Value> = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mock = MockModel::start();
    for item in &items {
        let r = mock_model::reply_from_json(item).unwrap_or_else(|e| panic!("{path}: {e}"));
        match item.get("for").and_then(Value::as_str) {
            Some(marker) => mock.push_for(marker, r),
            None => mock.push(r),
        }
    }
    println!("{}", mock.base_url());
    let _ = std::io::stdout().flush();
    let log = arg("--log");
    let mut written = 0;
    let mut all = String::new();
    // Readers poll the log while requests arrive: write a complete new file
    // and rename it over the old one, so a reader never sees half a line.
    let mut flush_log = |written: &mut usize| {
        if let Some(log) = &log {
            let requests = mock.requests();
            if requests.len() > *written {
                for r in &requests[*written..] {
                    let line = serde_json::json!({"method": r.method, "path": r.path, "body": r.body});
                    all.push_str(&format!("{line}\n"));
                }
                let tmp = format!("{log}.tmp");
                std::fs::write(&tmp, &all).expect("write log");
                std::fs::rename(&tmp, log).expect("replace log");
                *written = requests.len();
            }
        }
    };
    // Serve until stdin closes; keep the log current meanwhile.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        for line in stdin.lock().lines() {
            if line.is_err() {
                break;
            }
        }
        let _ = tx.send(());
    });
    loop {
        flush_log(&mut written);
        if rx.recv_timeout(Duration::from_millis(50)).is_ok() {
            break;
        }
    }
    flush_log(&mut written);
}
