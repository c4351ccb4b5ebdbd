//! Memory bounds of the server over stdio, measured as the process's peak
//! RSS (`VmHWM`): a 50 MB unsaved buffer must cost less than three times
//! its text, opened and then read and searched by a run.

mod common;

use common::mock_model::{self, MockModel, text_reply, tool_reply};
use common::stdio::Server;
use serde_json::{Value, json};

/// The 50 MB buffer's line (CJK and an emoji, so every encoding has work).
const LINE: &str = "x = '漢字 and some ascii text to fill the line'  # 😀\n";

/// A server with a workspace at `root`, initialized with `capabilities`,
/// after a request answered (so everything `initialized` started is done).
fn initialized(root: &std::path::Path, env: &[(&str, &str)], capabilities: Value) -> Server {
    let mut server = Server::start_with(root, env);
    server.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"processId": null, "rootUri": common::file_uri(root), "capabilities": capabilities}}));
    server.response(1);
    server.send(&json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}));
    server
}

fn code_action(server: &mut Server, id: i64, uri: &str) -> Value {
    let range = json!({"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}});
    server.send(&json!({"jsonrpc": "2.0", "id": id, "method": "textDocument/codeAction",
        "params": {"textDocument": {"uri": uri}, "range": range, "context": {"diagnostics": []}}}));
    let actions = server.response(id);
    assert!(actions["result"].is_array(), "{actions}");
    actions
}

fn open(server: &mut Server, uri: &str, text: String) {
    server.send(&json!({"jsonrpc": "2.0", "method": "textDocument/didOpen",
        "params": {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}}}));
}

fn ratio(kib: u64, text_kib: u64) -> f64 {
    kib as f64 / text_kib as f64
}

#[test]
fn a_50_mb_unsaved_buffer_costs_less_than_three_times_its_text() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let uri = common::file_uri(&root.join("big.py"));
    let mut server = initialized(&root, &[], json!({}));
    code_action(&mut server, 2, &uri);
    let before = server.peak_kib();
    let text = LINE.repeat(50 * 1024 * 1024 / LINE.len());
    let text_kib = text.len() as u64 / 1024;
    open(&mut server, &uri, text);
    code_action(&mut server, 3, &uri);
    let growth = server.peak_kib() - before;
    eprintln!("peak RSS grew by {growth} KiB for a {text_kib} KiB buffer ({:.2}x)", ratio(growth, text_kib));
    assert!(growth < 3 * text_kib, "peak RSS grew by {growth} KiB for a {text_kib} KiB buffer");
}

/// A run over the 50 MB buffer that reads a page of it and greps it, then
/// ends: the peak over the RSS before the `didOpen` stays under three times
/// the text (it was 7.5 times: the buffer copied out of its rope for the
/// run, copied again as the run's text, and once more for every read and
/// search), with its transcript written, as by default (whose last record,
/// which holds the buffer as the run read it, copied it four times more).
#[test]
fn a_run_that_reads_and_greps_a_50_mb_unsaved_buffer_costs_less_than_three_times_its_text() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let uri = common::file_uri(&root.join("big.py"));
    let mock = MockModel::start();
    let base = mock.base_url();
    let transcripts = tempfile::tempdir().unwrap();
    let env = [
        ("ANTHROPIC_BASE_URL", base.as_str()),
        ("ANTHROPIC_API_KEY", mock_model::API_KEY),
        ("NO_PROXY", "127.0.0.1,localhost"),
        ("no_proxy", "127.0.0.1,localhost"),
        ("AGENTFIX_TRANSCRIPTS", "1"),
        ("AGENTFIX_TRANSCRIPT_DIR", transcripts.path().to_str().unwrap()),
    ];
    let mut server = initialized(&root, &env, json!({"workspace": {"applyEdit": true}}));
    code_action(&mut server, 2, &uri);
    let before = server.peak_kib();
    let half = 25 * 1024 * 1024 / LINE.len();
    let needle = "needle_in_the_buffer = 42\n";
    let text = [LINE.repeat(half).as_str(), needle, LINE.repeat(half).as_str()].concat();
    let text_kib = text.len() as u64 / 1024;
    open(&mut server, &uri, text);
    let actions = code_action(&mut server, 3, &uri);
    let opened = server.peak_kib() - before;
    let reset = server.reset_peak();
    let line = half + 1;
    mock.push(tool_reply(&[
        ("toolu_read", "read_file", json!({"path": "big.py", "start_line": line - 50, "end_line": line + 50})),
        ("toolu_grep", "grep", json!({"pattern": "needle_in_\\w+", "path": "big.py"})),
    ]));
    mock.push(text_reply("Nothing to change."));
    let argument = actions["result"][0]["command"]["arguments"][0].clone();
    assert!(argument.is_object(), "{actions}");
    server.send(&json!({"jsonrpc": "2.0", "id": 4, "method": "workspace/executeCommand",
        "params": {"command": "agentfix.fix", "arguments": [argument]}}));
    let result = server.response(4);
    assert_eq!(result["result"]["stopReason"], "end_turn", "{result}");
    let run = server.peak_kib();
    // The run really read the page and found the line.
    let requests = mock.requests();
    assert_eq!(requests.len(), 2, "{result}");
    let results = requests[1].body["messages"].as_array().unwrap().last().unwrap()["content"].to_string();
    assert!(results.contains(&format!("{line:>6}\\tneedle_in_the_buffer = 42")), "{results}");
    assert!(results.contains(&format!("big.py:{line}: needle_in_the_buffer = 42")), "{results}");
    assert!(results.contains(&format!("[big.py: lines {}-{} of {}]", line - 50, line + 50, 2 * half + 1)), "{results}");
    let growth = if reset { opened.max(run.saturating_sub(before)) } else { run - before };
    eprintln!(
        "peak RSS grew by {growth} KiB for a {text_kib} KiB buffer ({:.2}x): the didOpen {:.2}x, the run {}",
        ratio(growth, text_kib),
        ratio(opened, text_kib),
        if reset { format!("{:.2}x", ratio(run.saturating_sub(before), text_kib)) } else { "not apart".into() }
    );
    assert!(growth < 3 * text_kib, "peak RSS grew by {growth} KiB for a {text_kib} KiB buffer");
    // The transcript was written, the buffer in its last record.
    let written: Vec<_> = std::fs::read_dir(transcripts.path()).unwrap().flatten().collect();
    assert_eq!(written.len(), 1, "{written:?}");
    let last = std::fs::read_to_string(written[0].path()).unwrap().lines().last().map(str::to_owned).unwrap();
    let end: Value = serde_json::from_str(&last).unwrap();
    assert_eq!(end["type"], "end", "{}", &last[..200]);
    assert_eq!(end["files"][0]["text"].as_str().map(str::len), Some(2 * half * LINE.len() + needle.len()));
}
