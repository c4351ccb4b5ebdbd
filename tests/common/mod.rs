//! Shared integration-test harness: a loopback mock of the Anthropic Messages and OpenAI Chat
//! Completions APIs ([`mock_model`]), a fake LSP client driving the real server binary over stdio
//! ([`editor`]), the streamable HTTP MCP test server as a process ([`mcp_http`]), and small helpers
//! for URIs and LSP text edits.
#![allow(dead_code)]

pub mod editor;
pub mod mcp_http;
pub mod rss;
pub mod stdio;

/// The mock model is its own crate of the workspace (`crates/mock-model`),
/// shared with the examples and benches; the tests reach it here.
pub use agentfix_mock_model as mock_model;

use std::path::{Path, PathBuf};

use serde_json::Value;

/// Removes from `cmd` the provider, agentfix and proxy variables of the
/// test process, so a run sees only the environment its test gives it.
pub fn without_provider_env(cmd: &mut std::process::Command) {
    for (k, _) in std::env::vars() {
        if k.starts_with("ANTHROPIC_")
            || k.starts_with("OPENAI_")
            || k.starts_with("AGENTFIX_")
            || k.to_ascii_lowercase().ends_with("_proxy")
        {
            cmd.env_remove(k);
        }
    }
}

/// Says that `test` did not run for want of `needs`, as one line
/// `SKIPPED (needs …): <test> did not run`: on stdout, and straight to the
/// process's stderr, past the test harness's capture (which only takes
/// `print!`/`eprint!`), so it shows in the output of a plain `cargo test`,
/// not only with `--nocapture`. A skipped test still passes (a test cannot
/// report "skipped" to libtest); this line is how it is never silent.
pub fn say_skipped(test: &str, needs: &str) {
    use std::io::Write;
    let line = format!("SKIPPED (needs {needs}): {test} did not run");
    println!("{line}");
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// Whether process `pid` is gone (or a zombie left for whoever inherited
/// it to reap) within `secs` seconds.
pub fn gone_within(pid: i32, secs: u64) -> bool {
    let alive = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|stat| stat.rsplit(')').next().is_some_and(|rest| !rest.trim_start().starts_with('Z')))
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while alive() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    !alive()
}

/// A strict reader of what a server writes (`agentfix_lsp_framing`, the
/// server's own framer): a stray blank line or a header line that is not
/// `Name: value` is a fault, and bodies may be as large as 1 GB.
pub fn server_frames<R: std::io::Read>(output: R) -> agentfix_lsp_framing::SyncFrames<R> {
    let limits = agentfix_lsp_framing::Limits { body: 1 << 30, ..Default::default() };
    agentfix_lsp_framing::SyncFrames::new(output).with_limits(limits).strict()
}

/// The next JSON message of `frames`; `None` at the end of the output, an
/// error for a broken frame or a body that is not JSON.
pub fn read_json<R: std::io::Read>(frames: &mut agentfix_lsp_framing::SyncFrames<R>) -> Result<Option<Value>, String> {
    match frames.next_frame().map_err(|e| format!("read error: {e}"))? {
        None => Ok(None),
        Some(agentfix_lsp_framing::Frame::Broken(broken)) => Err(broken.to_string()),
        Some(agentfix_lsp_framing::Frame::Body(body)) => serde_json::from_slice(&body)
            .map(Some)
            .map_err(|e| format!("body is not JSON ({e}): {}", String::from_utf8_lossy(&body))),
    }
}

/// Path of the `agentfix` binary Cargo built for this integration test.
pub fn agentfix_bin() -> &'static str {
    env!("CARGO_BIN_EXE_agentfix")
}

/// An example of this crate (`examples/<name>.rs`), built next to the
/// test binary, once per test process (so never a stale one).
pub fn example(name: &str) -> PathBuf {
    static BUILT: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if !built.iter().any(|b| b == name) {
        let status = std::process::Command::new(env!("CARGO"))
            .args(["build", "--example", name])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .unwrap();
        assert!(status.success(), "cannot build the example {name}");
        built.push(name.to_string());
    }
    PathBuf::from(agentfix_bin()).parent().unwrap().join("examples").join(name)
}

/// `file://` URI of `path`, encoded the way VS Code (vscode-uri) does it: everything except
/// `A-Z a-z 0-9 - . _ ~ /` is percent-encoded (UTF-8, uppercase hex), so spaces become `%20` and
/// non-ASCII characters their encoded bytes. A relative path is resolved against the current
/// directory first.
pub fn file_uri(path: &Path) -> String {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().expect("current directory").join(path)
    };
    let raw: Vec<u8> = if cfg!(windows) {
        absolute.to_string_lossy().replace('\\', "/").into_bytes()
    } else {
        absolute.as_os_str().as_encoded_bytes().to_vec()
    };
    let mut uri = String::from("file://");
    if raw.first() != Some(&b'/') {
        uri.push('/');
    }
    for byte in raw {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~' | b'/') {
            uri.push(char::from(byte));
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri
}

/// Inverse of [`file_uri`] (for `file:///…` URIs on Unix): percent-decodes the path part.
pub fn uri_to_path(uri: &str) -> PathBuf {
    let rest = uri.strip_prefix("file://").unwrap_or_else(|| panic!("not a file URI: {uri}"));
    // Skip an authority (normally empty).
    let path = &rest[rest.find('/').unwrap_or(rest.len())..];
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = bytes.get(i + 1..i + 3)
            && hex.iter().all(u8::is_ascii_hexdigit)
            && let Some(byte) = std::str::from_utf8(hex).ok().and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    PathBuf::from(String::from_utf8(out).unwrap_or_else(|e| panic!("URI {uri} is not UTF-8: {e}")))
}

/// Byte offset of an LSP position (`line`, UTF-16 `character`) in `text`. Lines end at `\n`,
/// `\r\n` or `\r`; a character past the end of its line clamps to the line end, a line past the
/// end of the text clamps to the end of the text.
pub fn position_to_offset(text: &str, line: u32, character: u32) -> usize {
    let bytes = text.as_bytes();
    let mut start = 0;
    for _ in 0..line {
        let Some(i) = bytes[start..].iter().position(|&b| b == b'\n' || b == b'\r') else {
            return text.len();
        };
        start += i + 1;
        if bytes[start - 1] == b'\r' && bytes.get(start) == Some(&b'\n') {
            start += 1;
        }
    }
    let mut units = 0;
    for (i, c) in text[start..].char_indices() {
        if c == '\n' || c == '\r' || units >= character as usize {
            return start + i;
        }
        units += c.len_utf16();
    }
    text.len()
}

/// Applies LSP `TextEdit`s (`{range:{start,end}, newText}`, UTF-16 positions, all relative to
/// the original `text`) the way an editor does. Panics if edits overlap.
pub fn apply_text_edits(text: &str, edits: &[Value]) -> String {
    let offset = |pos: &Value| -> usize {
        let line = pos["line"].as_u64().expect("position.line") as u32;
        let character = pos["character"].as_u64().expect("position.character") as u32;
        position_to_offset(text, line, character)
    };
    let mut spans: Vec<(usize, usize, usize, &str)> = edits
        .iter()
        .enumerate()
        .map(|(i, edit)| {
            let start = offset(&edit["range"]["start"]);
            let end = offset(&edit["range"]["end"]);
            assert!(start <= end, "text edit with start after end: {edit}");
            let new_text = edit["newText"].as_str().expect("TextEdit.newText");
            (start, end, i, new_text)
        })
        .collect();
    // Same start: keep array order (LSP: inserts at one position apply in array order).
    spans.sort_by_key(|&(start, end, i, _)| (start, end, i));
    let mut out = String::with_capacity(text.len());
    let mut cursor = 0;
    for (start, end, i, new_text) in spans {
        assert!(start >= cursor, "text edit {i} overlaps an earlier edit: {}", edits[i]);
        out.push_str(&text[cursor..start]);
        out.push_str(new_text);
        cursor = end;
    }
    out.push_str(&text[cursor..]);
    out
}

/// Every `tool_result` the mock model received, by `tool_use_id`: the text and
/// whether it was an error.
pub fn tool_results(mock: &mock_model::MockModel) -> std::collections::HashMap<String, (String, bool)> {
    let mut out = std::collections::HashMap::new();
    for r in mock.requests() {
        for m in r.body["messages"].as_array().into_iter().flatten() {
            for b in m["content"].as_array().into_iter().flatten() {
                if b["type"] == "tool_result" {
                    out.insert(
                        b["tool_use_id"].as_str().unwrap_or_default().to_string(),
                        (b["content"].as_str().unwrap_or_default().to_string(), b["is_error"] == true),
                    );
                }
            }
        }
    }
    out
}
