//! The peak RSS of the server over a 50 MB unsaved buffer, as a ratio to the
//! text (the goal: under 3×), for the bench profile's `agentfix` and, side
//! by side in the same run, any other builds named in
//! `AGENTFIX_BENCH_BEFORE` (`NAME=PATH`, comma-separated; e.g. the binary
//! of an older commit):
//!
//! - `didOpen`: the peak growth over the RSS before the `didOpen`, once a
//!   code action after it is answered;
//! - `run`: the peak from then on (`VmHWM` set back with `clear_refs`)
//!   while `agentfix.fix` runs against the mock model, which reads a page of
//!   the buffer (101 lines from its middle), greps it, and ends;
//! - `in all`: the larger of the two, what the memory test asserts.
//!
//! Transcripts are written, as by default (the last record holds the
//! buffer as the run read it). Median of `AGENTFIX_BENCH_RUNS` (default 5) runs, the builds
//! interleaved run by run. `cargo bench --bench memory`.

use std::io::Write;
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use agentfix_lsp_framing::{Frame, SyncFrames};
use agentfix_mock_model::{API_KEY, MockModel, text_reply, tool_reply};
use serde_json::{Value, json};

/// The buffer's line (CJK and an emoji), as tests/memory.rs has it.
const LINE: &str = "x = '漢字 and some ascii text to fill the line'  # 😀\n";

struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: SyncFrames<ChildStdout>,
}

impl Server {
    fn start(bin: &str, root: &Path, base_url: &str) -> Server {
        let mut command = Command::new(bin);
        for (k, _) in std::env::vars() {
            if k.starts_with("ANTHROPIC_") || k.starts_with("OPENAI_") || k.starts_with("AGENTFIX_") {
                command.env_remove(k);
            }
        }
        let mut child = command
            .arg("--stdio")
            .current_dir(root)
            .env("ANTHROPIC_BASE_URL", base_url)
            .env("ANTHROPIC_API_KEY", API_KEY)
            .env("NO_PROXY", "127.0.0.1,localhost")
            .env("AGENTFIX_DEFAULT_LANGUAGE_SERVERS", "0")
            // Transcripts on, as by default (in the temporary workspace, removed with it).
            .env("AGENTFIX_TRANSCRIPTS", "1")
            .env("AGENTFIX_TRANSCRIPT_DIR", root.join(".transcripts"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {bin}: {e}"));
        let stdin = child.stdin.take().unwrap();
        let limits = agentfix_lsp_framing::Limits { body: 1 << 30, ..Default::default() };
        let stdout = SyncFrames::new(child.stdout.take().unwrap()).with_limits(limits);
        Server { child, stdin, stdout }
    }

    fn send(&mut self, message: &Value) {
        agentfix_lsp_framing::write_frame(&mut self.stdin, &serde_json::to_vec(message).unwrap()).unwrap();
        self.stdin.flush().unwrap();
    }

    fn response(&mut self, id: i64) -> Value {
        loop {
            let Ok(Some(Frame::Body(body))) = self.stdout.next_frame() else { panic!("the server stopped") };
            let v: Value = serde_json::from_slice(&body).unwrap();
            if v["id"] == id && v.get("method").is_none() {
                return v;
            }
        }
    }

    fn peak_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    fn reset_peak(&self) {
        std::fs::write(format!("/proc/{}/clear_refs", self.child.id()), "5").expect("clear_refs");
    }

    fn code_action(&mut self, id: i64, uri: &str) -> Value {
        let range = json!({"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}});
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "textDocument/codeAction",
            "params": {"textDocument": {"uri": uri}, "range": range, "context": {"diagnostics": []}}}));
        self.response(id)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One run of `bin`: (didOpen, run) peak growth in KiB, and the text's KiB.
fn measure(bin: &str) -> (u64, u64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let uri = format!("file://{}", root.join("big.py").display());
    let mock = MockModel::start();
    let mut server = Server::start(bin, &root, &mock.base_url());
    server.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"processId": null,
        "rootUri": format!("file://{}", root.display()), "capabilities": {"workspace": {"applyEdit": true}}}}));
    server.response(1);
    server.send(&json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}));
    server.code_action(2, &uri);
    let before = server.peak_kib();
    let half = 25 * 1024 * 1024 / LINE.len();
    let text = [LINE.repeat(half).as_str(), "needle_in_the_buffer = 42\n", LINE.repeat(half).as_str()].concat();
    let text_kib = text.len() as u64 / 1024;
    server.send(&json!({"jsonrpc": "2.0", "method": "textDocument/didOpen",
        "params": {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}}}));
    let actions = server.code_action(3, &uri);
    let opened = server.peak_kib() - before;
    server.reset_peak();
    let line = half + 1;
    mock.push(tool_reply(&[
        ("toolu_read", "read_file", json!({"path": "big.py", "start_line": line - 50, "end_line": line + 50})),
        ("toolu_grep", "grep", json!({"pattern": "needle_in_\\w+", "path": "big.py"})),
    ]));
    mock.push(text_reply("Nothing to change."));
    let argument = actions["result"][0]["command"]["arguments"][0].clone();
    server.send(&json!({"jsonrpc": "2.0", "id": 4, "method": "workspace/executeCommand",
        "params": {"command": "agentfix.fix", "arguments": [argument]}}));
    let result = server.response(4);
    assert_eq!(result["result"]["stopReason"], "end_turn", "{bin}: {result}");
    assert_eq!(mock.requests().len(), 2, "{bin}: the run did not read and grep");
    let run = server.peak_kib().saturating_sub(before);
    (opened, run, text_kib)
}

/// The ratios of every run of one build: didOpen, run, in all.
type Ratios = (Vec<f64>, Vec<f64>, Vec<f64>);

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is taken.
    let mut builds = vec![("agentfix".to_string(), env!("CARGO_BIN_EXE_agentfix").to_string())];
    if let Ok(before) = std::env::var("AGENTFIX_BENCH_BEFORE") {
        for item in before.split(',').filter(|s| !s.is_empty()) {
            let (name, path) = item.split_once('=').expect("AGENTFIX_BENCH_BEFORE: NAME=PATH,…");
            builds.insert(0, (name.to_string(), path.to_string()));
        }
    }
    let runs: usize = std::env::var("AGENTFIX_BENCH_RUNS").ok().and_then(|r| r.parse().ok()).unwrap_or(5);
    let mut samples: Vec<Ratios> = vec![(Vec::new(), Vec::new(), Vec::new()); builds.len()];
    for run in 1..=runs {
        for ((name, bin), s) in builds.iter().zip(&mut samples) {
            let (opened, ran, text) = measure(bin);
            let ratio = |kib: u64| kib as f64 / text as f64;
            eprintln!("run {run}/{runs} {name}: didOpen {:.2}x, run {:.2}x", ratio(opened), ratio(ran));
            s.0.push(ratio(opened));
            s.1.push(ratio(ran));
            s.2.push(ratio(opened.max(ran)));
        }
    }
    let names: Vec<&str> = builds.iter().map(|(n, _)| n.as_str()).collect();
    println!("peak RSS growth / text, 50 MB unsaved buffer, median of {runs} interleaved runs");
    println!("| measure | {} |", names.join(" | "));
    println!("|---|{}", "---:|".repeat(names.len()));
    let rows = ["didOpen, then a codeAction", "agentfix.fix: read_file of a page, grep, end", "in all (goal < 3)"];
    for (i, row) in rows.into_iter().enumerate() {
        let pick = |s: &Ratios| [&s.0, &s.1, &s.2][i].clone();
        let cells: Vec<String> = samples.iter().map(|s| format!("{:.2}", median(pick(s)))).collect();
        println!("| {row} | {} |", cells.join(" | "));
    }
}
