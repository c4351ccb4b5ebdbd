//! A load driver for language servers over stdio: starts each server given
//! with `--server NAME=COMMAND`, drives it as an editor would, and prints a
//! markdown table (one column per server) of the medians over `--runs` runs,
//! the servers interleaved run by run (run 1 of each server, then run 2 of
//! each, …) so that noise on the machine hits them all alike:
//!
//! - the time from spawning the process to the `initialize` response, and
//!   what the process had done by then: page faults, threads, CPU time;
//! - `textDocument/codeAction` p50 and p99 with `--docs` documents open
//!   (`--doc-lines` lines each), `--codeactions` requests sent one at a time,
//!   each waiting for its answer, at positions spread over the documents;
//! - `--keystrokes` single-keystroke incremental `didChange`s (typing, Enter,
//!   Backspace, over CJK and emoji, CRLF lines) on a `--edit-lines`-line
//!   document, then one codeAction, timed until that codeAction's answer;
//!   with `--verify NAME`, then `agentfix/documentText`, whose text and
//!   version must equal the driver's own copy (a mismatch is reported loudly
//!   and the driver exits with code 2);
//! - the peak RSS (`VmHWM` of `/proc/PID/status`) after opening `--rss-docs`
//!   documents of `--rss-lines` lines, read before the server is shut down.
//!
//! Each measure runs in a fresh process of the server. Positions are UTF-16
//! (the only encoding the driver offers). Server→client requests are
//! answered (`workspace/configuration` with nulls, `window/workDoneProgress/
//! create`, `client/registerCapability` and the like with `null`),
//! notifications ignored. Servers are shut down with `shutdown`/`exit` and
//! killed when they do not go in time. They run without the provider keys
//! of the driver's environment (`*_API_KEY`, `ANTHROPIC_*`, `OPENAI_*`);
//! `--env NAME=KEY=VALUE` adds variables for one server.

use std::collections::{HashMap, VecDeque};
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentfix_lsp_framing::{Frame, SyncFrames};
use clap::Parser;
use serde_json::{Value, json};

#[derive(Parser, Debug)]
#[command(about = "Measures language servers over stdio; prints a markdown table with one column per server")]
struct Args {
    /// A server to measure, `NAME=COMMAND` (the command is split at
    /// whitespace, no shell); repeat it, one per column.
    #[arg(long = "server", required = true, value_parser = parse_server)]
    servers: Vec<(String, String)>,
    /// Runs of every measure per server; the table shows the medians.
    #[arg(long, default_value_t = 15)]
    runs: usize,
    /// `NAME=JSON`: the `initializationOptions` of that server (none are
    /// sent otherwise).
    #[arg(long = "init-options", value_parser = parse_init_options)]
    init_options: Vec<(String, Value)>,
    /// `NAME=KEY=VALUE`: an environment variable for that server.
    #[arg(long = "env", value_parser = parse_env)]
    env: Vec<(String, String, String)>,
    /// A server that answers `agentfix/documentText`: after the keystrokes,
    /// and after opening the large documents, its copy must equal the
    /// driver's.
    #[arg(long)]
    verify: Vec<String>,
    /// A server that runs `agentfix.fix`: the time from its
    /// `workspace/executeCommand` to the first `$/progress` is measured (the
    /// run is cancelled then). Give it a provider that answers nothing, e.g.
    /// `--env NAME=ANTHROPIC_API_KEY=x --env NAME=ANTHROPIC_BASE_URL=http://127.0.0.1:9`.
    #[arg(long)]
    progress: Vec<String>,
    /// Documents open for the codeAction measure.
    #[arg(long, default_value_t = 1000)]
    docs: usize,
    /// Lines of each of those documents.
    #[arg(long, default_value_t = 200)]
    doc_lines: usize,
    /// codeAction requests timed, one at a time.
    #[arg(long, default_value_t = 1000)]
    codeactions: usize,
    /// Single-keystroke didChanges before the last codeAction.
    #[arg(long, default_value_t = 10_000)]
    keystrokes: usize,
    /// Lines of the document typed in.
    #[arg(long, default_value_t = 2000)]
    edit_lines: usize,
    /// Documents opened for the peak RSS measure.
    #[arg(long, default_value_t = 100)]
    rss_docs: usize,
    /// Lines of each of those documents.
    #[arg(long, default_value_t = 2000)]
    rss_lines: usize,
    /// Seconds to wait for any one answer (and for `initialize`) before the
    /// server is killed and its run counted as failed.
    #[arg(long, default_value_t = 120)]
    timeout_secs: u64,
}

fn parse_server(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((name, command)) if !name.trim().is_empty() && !command.trim().is_empty() => {
            Ok((name.trim().to_string(), command.trim().to_string()))
        }
        _ => Err(format!("expected NAME=COMMAND, got `{s}`")),
    }
}

fn parse_init_options(s: &str) -> Result<(String, Value), String> {
    let (name, json) = s.split_once('=').ok_or_else(|| format!("expected NAME=JSON, got `{s}`"))?;
    let value = serde_json::from_str(json).map_err(|e| format!("the JSON of `{name}` does not parse: {e}"))?;
    Ok((name.trim().to_string(), value))
}

fn parse_env(s: &str) -> Result<(String, String, String), String> {
    let (name, rest) = s.split_once('=').ok_or_else(|| format!("expected NAME=KEY=VALUE, got `{s}`"))?;
    let (key, value) = rest.split_once('=').ok_or_else(|| format!("expected NAME=KEY=VALUE, got `{s}`"))?;
    Ok((name.trim().to_string(), key.to_string(), value.to_string()))
}

/// The request of `--verify`.
const DOCUMENT_TEXT: &str = "agentfix/documentText";

// ---------------------------------------------------------------------------
// The documents

/// Line `i` of generated document `doc`: code-like lines, some with CJK
/// and emoji (surrogate pairs in UTF-16), some blank.
fn line_text(doc: usize, i: usize) -> String {
    match i % 10 {
        0 => format!("def handler_{doc}_{i}(request, context):"),
        3 => format!("    # 注释 {i}: 値を確認 😀 ok"),
        7 => format!("    label = \"🦀 crab {i} 蟹\""),
        9 => String::new(),
        _ => format!("    value_{i} = request.get({i}) + context"),
    }
}

/// Some documents have CRLF line breaks.
fn line_break(doc: usize) -> &'static str {
    if doc % 4 == 1 { "\r\n" } else { "\n" }
}

fn document(doc: usize, lines: usize) -> String {
    let eol = line_break(doc);
    let mut text = String::new();
    for i in 0..lines {
        text.push_str(&line_text(doc, i));
        text.push_str(eol);
    }
    text
}

fn utf16_len(s: &str) -> u32 {
    s.encode_utf16().count() as u32
}

/// The document typed in, as lines with their breaks, and the keystrokes.
struct Typing {
    lines: Vec<(String, &'static str)>,
    /// The line and byte offset of the cursor.
    cursor: (usize, usize),
}

/// An LSP range in UTF-16: ((start line, character), (end line, character)).
type Range = ((u32, u32), (u32, u32));

enum Key {
    Char(char),
    Enter,
    Backspace,
}

/// The keystroke sequence: typing a line of code with CJK and emoji, a
/// Backspace after every fifth character (so a CJK character and emoji are
/// deleted: ranges of 1 and 2 UTF-16 units), Enter at the end of the line;
/// every fifth line also a Backspace right after the Enter (joining the
/// lines across the CRLF again).
fn key(k: usize) -> Key {
    const TYPED: &str = "let 値 = \"🦀\"; // ok 😀";
    let per_line: Vec<char> = TYPED.chars().collect();
    // Per line: the characters, a Backspace after every fifth, then Enter.
    let mut cycle = Vec::new();
    for (i, c) in per_line.iter().enumerate() {
        cycle.push(Some(*c));
        if i % 5 == 4 {
            cycle.push(None); // Backspace: 値, 🦀, `/`, 😀
        }
    }
    let line_len = cycle.len() + 1; // + Enter
    let (line, at) = (k / (line_len + 1), k % (line_len + 1));
    if at == line_len {
        // After the Enter: a Backspace every fifth line, else a space.
        return if line % 5 == 4 { Key::Backspace } else { Key::Char(' ') };
    }
    match cycle.get(at) {
        Some(Some(c)) => Key::Char(*c),
        Some(None) => Key::Backspace,
        None => Key::Enter,
    }
}

impl Typing {
    fn new(lines: usize) -> Self {
        let doc = 9999;
        let lines: Vec<(String, &'static str)> = (0..lines.max(1)).map(|i| (line_text(doc, i), "\r\n")).collect();
        // Start at the end of a line with CJK and emoji in the middle of the document.
        let mut line = (lines.len() / 2).min(lines.len() - 1);
        while line + 1 < lines.len() && line % 10 != 3 {
            line += 1;
        }
        let cursor = (line, lines[line].0.len());
        Self { lines, cursor }
    }

    fn text(&self) -> String {
        let mut out = String::new();
        for (content, eol) in &self.lines {
            out.push_str(content);
            out.push_str(eol);
        }
        out
    }

    /// Applies one keystroke to the copy; returns the change as LSP sends it:
    /// the range (UTF-16) and the new text.
    fn press(&mut self, key: Key) -> (Range, String) {
        let (line, at) = self.cursor;
        let col = utf16_len(&self.lines[line].0[..at]);
        match key {
            Key::Char(c) => {
                self.lines[line].0.insert(at, c);
                self.cursor.1 += c.len_utf8();
                (((line as u32, col), (line as u32, col)), c.to_string())
            }
            Key::Enter => {
                let rest = self.lines[line].0.split_off(at);
                let eol = std::mem::replace(&mut self.lines[line].1, "\r\n");
                self.lines.insert(line + 1, (rest, eol));
                self.cursor = (line + 1, 0);
                (((line as u32, col), (line as u32, col)), "\r\n".to_string())
            }
            Key::Backspace if at > 0 => {
                let c = self.lines[line].0[..at].chars().next_back().unwrap_or(' ');
                self.lines[line].0.remove(at - c.len_utf8());
                self.cursor.1 -= c.len_utf8();
                (((line as u32, col - c.len_utf16() as u32), (line as u32, col)), String::new())
            }
            Key::Backspace if line > 0 => {
                let (content, eol) = self.lines.remove(line);
                let previous = &mut self.lines[line - 1];
                let previous_end = (previous.0.len(), utf16_len(&previous.0));
                previous.0.push_str(&content);
                previous.1 = eol;
                self.cursor = (line - 1, previous_end.0);
                ((((line - 1) as u32, previous_end.1), (line as u32, 0)), String::new())
            }
            Key::Backspace => (((0, 0), (0, 0)), String::new()),
        }
    }
}

fn file_uri(path: &Path) -> String {
    let mut uri = String::from("file://");
    for byte in path.to_string_lossy().bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~' | b'/') {
            uri.push(char::from(byte));
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri
}

// ---------------------------------------------------------------------------
// One server process

/// An LSP message: `Content-Length` header, then the body.
fn frame(message: &Value) -> Vec<u8> {
    agentfix_lsp_framing::frame(message.to_string().as_bytes())
}

/// The next message (`null` for a body that is not JSON); `None` at the end
/// of the output or a broken frame.
fn read_message<R: Read>(frames: &mut SyncFrames<R>) -> Option<Value> {
    match frames.next_frame().ok()?? {
        Frame::Body(body) => Some(serde_json::from_slice(&body).unwrap_or(Value::Null)),
        Frame::Broken(_) => None,
    }
}

/// What the driver answers to a server→client request.
fn answer(request: &Value) -> Value {
    let id = request["id"].clone();
    let result = match request["method"].as_str().unwrap_or_default() {
        "workspace/configuration" => {
            let items = request["params"]["items"].as_array().map_or(0, Vec::len);
            Value::Array(vec![Value::Null; items])
        }
        "window/workDoneProgress/create"
        | "client/registerCapability"
        | "client/unregisterCapability"
        | "window/showMessageRequest"
        | "workspace/codeLens/refresh"
        | "workspace/semanticTokens/refresh"
        | "workspace/inlayHint/refresh"
        | "workspace/diagnostic/refresh" => Value::Null,
        "workspace/workspaceFolders" => Value::Array(Vec::new()),
        "workspace/applyEdit" => json!({"applied": false, "failureReason": "lsp_load applies nothing"}),
        other => {
            return json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": format!("lsp_load does not answer {other}")}});
        }
    };
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

const STDERR_TAIL: usize = 8 * 1024;

struct Server {
    name: String,
    child: Child,
    stdin: Arc<Mutex<ChildStdin>>,
    responses: Receiver<(i64, Value)>,
    /// When each `$/progress` arrived.
    progress: Receiver<Instant>,
    stderr: Arc<Mutex<VecDeque<u8>>>,
    next_id: i64,
    timeout: Duration,
    spawned: Instant,
}

impl Server {
    fn spawn(
        name: &str,
        command: &str,
        env: &[(String, String)],
        cwd: &Path,
        timeout: Duration,
    ) -> Result<Self, String> {
        let mut words = command.split_whitespace();
        let program = words.next().ok_or_else(|| format!("{name}: empty command"))?;
        // The servers run in the workspace folder: a relative path is the driver's.
        let program = match Path::new(program) {
            p if p.is_relative() && program.contains('/') => {
                std::env::current_dir().map_or_else(|_| p.to_path_buf(), |d| d.join(p))
            }
            p => p.to_path_buf(),
        };
        let mut cmd = Command::new(program);
        cmd.args(words).current_dir(cwd).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        for (key, _) in std::env::vars_os() {
            let Some(k) = key.to_str() else { continue };
            let upper = k.to_ascii_uppercase();
            if upper.ends_with("_API_KEY")
                || upper.ends_with("_APIKEY")
                || upper.starts_with("ANTHROPIC_")
                || upper.starts_with("OPENAI_")
            {
                cmd.env_remove(&key);
            }
        }
        for (key, value) in env {
            cmd.env(key, value);
        }
        let spawned = Instant::now();
        let mut child = cmd.spawn().map_err(|e| format!("{name}: cannot start `{command}`: {e}"))?;
        let stdin = Arc::new(Mutex::new(child.stdin.take().ok_or("no stdin")?));
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let stderr_pipe = child.stderr.take().ok_or("no stderr")?;

        let (tx, responses) = mpsc::channel();
        let (progress_tx, progress) = mpsc::channel();
        let writer = Arc::clone(&stdin);
        std::thread::spawn(move || {
            let mut reader = SyncFrames::new(stdout);
            while let Some(message) = read_message(&mut reader) {
                match (message.get("id"), message.get("method")) {
                    (Some(_), Some(_)) => {
                        let reply = frame(&answer(&message));
                        let mut w = writer.lock().unwrap_or_else(|e| e.into_inner());
                        let _ = w.write_all(&reply).and_then(|()| w.flush());
                    }
                    (None, Some(method)) => {
                        if method == "$/progress" {
                            let _ = progress_tx.send(Instant::now());
                        }
                    }
                    (Some(id), None) => {
                        if let Some(id) = id.as_i64()
                            && tx.send((id, message)).is_err()
                        {
                            break;
                        }
                    }
                    (None, None) => {}
                }
            }
        });
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        let sink = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut pipe = stderr_pipe;
            let mut buf = [0u8; 8192];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let mut tail = sink.lock().unwrap_or_else(|e| e.into_inner());
                tail.extend(&buf[..n]);
                let excess = tail.len().saturating_sub(STDERR_TAIL);
                tail.drain(..excess);
            }
        });
        Ok(Self { name: name.to_string(), child, stdin, responses, progress, stderr, next_id: 1, timeout, spawned })
    }

    fn stderr_tail(&self) -> String {
        let tail = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        let bytes: Vec<u8> = tail.iter().copied().collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    fn fail(&self, what: &str) -> String {
        let tail = self.stderr_tail();
        let tail = tail.trim_end();
        if tail.is_empty() {
            format!("{}: {what}", self.name)
        } else {
            format!("{}: {what}; the end of its stderr:\n{tail}", self.name)
        }
    }

    fn write(&self, bytes: &[u8]) -> Result<(), String> {
        let mut w = self.stdin.lock().unwrap_or_else(|e| e.into_inner());
        w.write_all(bytes).and_then(|()| w.flush()).map_err(|e| self.fail(&format!("writing to it failed: {e}")))
    }

    fn notify(&self, method: &str, params: Value) -> Result<(), String> {
        self.write(&frame(&json!({"jsonrpc": "2.0", "method": method, "params": params})))
    }

    /// A request's frame and id, to send later.
    fn prepare(&mut self, method: &str, params: Value) -> (i64, Vec<u8>) {
        let id = self.next_id;
        self.next_id += 1;
        (id, frame(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})))
    }

    fn wait(&self, id: i64, method: &str) -> Result<Value, String> {
        let deadline = Instant::now() + self.timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.responses.recv_timeout(left) {
                Ok((got, response)) if got == id => return Ok(response),
                Ok(_) => {} // a late answer to something else
                Err(RecvTimeoutError::Timeout) => {
                    return Err(self.fail(&format!("no answer to {method} within {:?}", self.timeout)));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(self.fail(&format!("closed its output before answering {method}")));
                }
            }
        }
    }

    /// Sends a request and waits for its answer (the whole response).
    fn request(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let (id, bytes) = self.prepare(method, params);
        self.write(&bytes)?;
        self.wait(id, method)
    }

    /// `initialize` and `initialized`; the milliseconds from the spawn to
    /// the `initialize` response, and what the process had done by then.
    fn initialize(&mut self, root: &Path, options: Option<&Value>) -> Result<Started, String> {
        let uri = file_uri(root);
        let mut params = json!({
            "processId": std::process::id(),
            "clientInfo": {"name": "lsp_load", "version": "1"},
            "rootPath": root.to_string_lossy(),
            "rootUri": uri,
            "workspaceFolders": [{"uri": uri, "name": "ws"}],
            "capabilities": {
                "general": {"positionEncodings": ["utf-16"]},
                "workspace": {
                    "applyEdit": true,
                    "workspaceEdit": {"documentChanges": true},
                    "configuration": true,
                    "workspaceFolders": true
                },
                "window": {"workDoneProgress": true},
                "textDocument": {
                    "synchronization": {"didSave": true},
                    "codeAction": {
                        "dataSupport": true,
                        "resolveSupport": {"properties": ["edit"]},
                        "codeActionLiteralSupport": {"codeActionKind": {"valueSet":
                            ["", "quickfix", "refactor", "refactor.rewrite", "source"]}}
                    }
                }
            },
            "trace": "off"
        });
        if let Some(options) = options {
            params["initializationOptions"] = options.clone();
        }
        let response = self.request("initialize", params)?;
        let elapsed = self.spawned.elapsed();
        // Read at once, before `initialized` is sent: what the server did
        // before its answer (and the little it did since, which cannot be
        // told apart from outside).
        let (faults, threads, cpu_ms) = self.counters();
        if response.get("result").is_none() {
            return Err(self.fail(&format!("initialize failed: {response}")));
        }
        self.notify("initialized", json!({}))?;
        Ok(Started { ms: elapsed.as_secs_f64() * 1e3, faults, threads, cpu_ms })
    }

    /// The process's page faults (minor and major, `/proc/PID/stat`), its
    /// threads, and the CPU time of all of them (`/proc/PID/task/*/schedstat`,
    /// nanoseconds), in ms; `NaN` where a file cannot be read.
    fn counters(&self) -> (f64, f64, f64) {
        let pid = self.child.id();
        let faults = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok().and_then(|stat| {
            // The fields after the command's `(…)`: state is field 3, minflt 10, majflt 12.
            let rest: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
            Some(rest.get(7)?.parse::<f64>().ok()? + rest.get(9)?.parse::<f64>().ok()?)
        });
        let tasks: Vec<_> = std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten().collect();
        let cpu_ns: u64 = tasks
            .iter()
            .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
            .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
            .sum();
        let threads = if tasks.is_empty() { f64::NAN } else { tasks.len() as f64 };
        let cpu_ms = if tasks.is_empty() { f64::NAN } else { cpu_ns as f64 / 1e6 };
        (faults.unwrap_or(f64::NAN), threads, cpu_ms)
    }

    fn open(&self, uri: &str, version: i32, text: &str) -> Result<(), String> {
        self.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri, "languageId": "python", "version": version, "text": text}}),
        )
    }

    /// The peak resident set size (`VmHWM`), in MiB.
    fn peak_rss_mib(&self) -> Result<f64, String> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .map_err(|e| self.fail(&format!("cannot read its /proc status: {e}")))?;
        let kb = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .ok_or_else(|| self.fail("no VmHWM in its /proc status"))?;
        Ok(kb / 1024.0)
    }

    /// `shutdown`, `exit`, and a wait for the process; killed when it does
    /// not end in time.
    fn shutdown(mut self) -> Result<(), String> {
        let grace = self.timeout.min(Duration::from_secs(10));
        self.timeout = grace;
        let answered = self.request("shutdown", Value::Null);
        let _ = self.write(&frame(&json!({"jsonrpc": "2.0", "method": "exit"})));
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return answered.map(|_| ());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Err(self.fail("did not exit after shutdown and exit; killed"))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

// ---------------------------------------------------------------------------
// The measures

/// A start: spawn → `initialize` response, and the server's counters then.
struct Started {
    ms: f64,
    faults: f64,
    threads: f64,
    cpu_ms: f64,
}

struct Plan<'a> {
    args: &'a Args,
    root: std::path::PathBuf,
    /// Bytes of text opened for the RSS measure.
    rss_text_bytes: usize,
}

struct Spec<'a> {
    name: &'a str,
    command: &'a str,
    env: Vec<(String, String)>,
    init_options: Option<&'a Value>,
    verify: bool,
    progress: bool,
}

#[derive(Default)]
struct Samples {
    init_ms: Vec<f64>,
    init_faults: Vec<f64>,
    init_threads: Vec<f64>,
    init_cpu_ms: Vec<f64>,
    p50_us: Vec<f64>,
    p99_us: Vec<f64>,
    keys_ms: Vec<f64>,
    rss_mib: Vec<f64>,
    progress_ms: Vec<f64>,
    failures: Vec<String>,
    mismatches: Vec<String>,
    verified: usize,
}

impl Plan<'_> {
    fn start(&self, spec: &Spec<'_>, samples: &mut Samples) -> Result<Server, String> {
        let timeout = Duration::from_secs(self.args.timeout_secs);
        let mut server = Server::spawn(spec.name, spec.command, &spec.env, &self.root, timeout)?;
        let started = server.initialize(&self.root, spec.init_options)?;
        samples.init_ms.push(started.ms);
        samples.init_faults.push(started.faults);
        samples.init_threads.push(started.threads);
        samples.init_cpu_ms.push(started.cpu_ms);
        Ok(server)
    }

    fn uri(&self, name: &str) -> String {
        file_uri(&self.root.join(name))
    }

    fn code_action(uri: &str, line: u32, col: u32, end: Option<u32>, diagnostic: bool, invoked: bool) -> Value {
        let range = json!({"start": {"line": line, "character": col},
                           "end": {"line": line, "character": end.unwrap_or(col)}});
        let diagnostics = if diagnostic {
            json!([{"range": range, "severity": 1, "source": "lsp_load", "message": "lsp_load: a diagnostic"}])
        } else {
            json!([])
        };
        json!({"textDocument": {"uri": uri}, "range": range,
               "context": {"diagnostics": diagnostics, "triggerKind": if invoked { 1 } else { 2 }}})
    }

    /// The codeAction measure: p50 and p99 in µs.
    fn code_actions(&self, spec: &Spec<'_>, samples: &mut Samples) -> Result<(), String> {
        let args = self.args;
        let mut server = self.start(spec, samples)?;
        let docs = args.docs.max(1);
        let lines = args.doc_lines.max(1);
        for d in 0..docs {
            server.open(&self.uri(&format!("src/doc_{d:04}.py")), 1, &document(d, lines))?;
        }
        // Every request spread over documents, lines and columns.
        let mut requests = Vec::with_capacity(args.codeactions);
        for i in 0..args.codeactions.max(1) + 1 {
            let d = (i * 7919 + 13) % docs;
            let line = (i * 37) % lines;
            let text = line_text(d, line);
            let chars = text.chars().count();
            let upto: String = text.chars().take((i * 11) % (chars + 1)).collect();
            let col = utf16_len(&upto);
            let (end, invoked) = if i % 10 == 0 { (Some(utf16_len(&text)), true) } else { (None, false) };
            let params = Self::code_action(
                &self.uri(&format!("src/doc_{d:04}.py")),
                line as u32,
                if end.is_some() { 0 } else { col },
                end,
                i % 3 == 0,
                invoked,
            );
            requests.push(server.prepare("textDocument/codeAction", params));
        }
        // The first waits for every didOpen to be taken in: not timed.
        let mut requests = requests.into_iter();
        if let Some((id, bytes)) = requests.next() {
            server.write(&bytes)?;
            server.wait(id, "textDocument/codeAction")?;
        }
        let mut times = Vec::with_capacity(args.codeactions);
        for (id, bytes) in requests {
            let t = Instant::now();
            server.write(&bytes)?;
            let response = server.wait(id, "textDocument/codeAction")?;
            times.push(t.elapsed().as_secs_f64() * 1e6);
            if response.get("result").is_none() {
                return Err(server.fail(&format!("codeAction failed: {response}")));
            }
        }
        samples.p50_us.push(percentile(&mut times, 50.0));
        samples.p99_us.push(percentile(&mut times, 99.0));
        server.shutdown()
    }

    /// The keystroke measure (ms), then the mirror check.
    fn keystrokes(&self, spec: &Spec<'_>, samples: &mut Samples, run: usize) -> Result<(), String> {
        let args = self.args;
        let mut server = self.start(spec, samples)?;
        let uri = self.uri("src/typed_in.py");
        let mut typing = Typing::new(args.edit_lines);
        server.open(&uri, 1, &typing.text())?;
        let (line, at) = typing.cursor;
        let col = utf16_len(&typing.lines[line].0[..at]);
        server.request("textDocument/codeAction", Self::code_action(&uri, line as u32, col, None, false, false))?;
        // Every frame made beforehand: only the server's work (and the pipe) is timed.
        let mut frames = Vec::with_capacity(args.keystrokes);
        for k in 0..args.keystrokes {
            let (((sl, sc), (el, ec)), text) = typing.press(key(k));
            let version = 2 + k as i64;
            frames.push(frame(&json!({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
                "textDocument": {"uri": uri, "version": version},
                "contentChanges": [{"range": {"start": {"line": sl, "character": sc}, "end": {"line": el, "character": ec}},
                                    "text": text}]
            }})));
        }
        let (line, at) = typing.cursor;
        let col = utf16_len(&typing.lines[line].0[..at]);
        let (id, last) =
            server.prepare("textDocument/codeAction", Self::code_action(&uri, line as u32, col, None, false, false));
        let t = Instant::now();
        for f in &frames {
            server.write(f)?;
        }
        server.write(&last)?;
        let response = server.wait(id, "textDocument/codeAction")?;
        samples.keys_ms.push(t.elapsed().as_secs_f64() * 1e3);
        if response.get("result").is_none() {
            return Err(server.fail(&format!("codeAction failed: {response}")));
        }
        if spec.verify {
            let expected = typing.text();
            let version = 1 + args.keystrokes as i64;
            self.verify(&mut server, samples, run, &uri, &expected, version)?;
        }
        server.shutdown()
    }

    /// The executeCommand → first `$/progress` measure (ms).
    fn progress(&self, spec: &Spec<'_>, samples: &mut Samples) -> Result<(), String> {
        let mut server = self.start(spec, samples)?;
        let path = self.root.join("src/run_me.py");
        std::fs::create_dir_all(self.root.join("src")).map_err(|e| e.to_string())?;
        let text = document(0, 50);
        std::fs::write(&path, &text).map_err(|e| e.to_string())?;
        let uri = file_uri(&path);
        server.open(&uri, 1, &text)?;
        // Answered once the didOpen is taken in.
        server.request("textDocument/codeAction", Self::code_action(&uri, 3, 0, None, false, false))?;
        let range = json!({"start": {"line": 3, "character": 0}, "end": {"line": 3, "character": 4}});
        let (id, bytes) = server.prepare(
            "workspace/executeCommand",
            json!({"command": "agentfix.fix", "arguments": [{
            "uri": uri, "version": 1, "range": range,
            "diagnostics": [{"range": range, "severity": 1, "message": "lsp_load: a diagnostic"}]}]}),
        );
        while server.progress.try_recv().is_ok() {}
        let t = Instant::now();
        server.write(&bytes)?;
        let first = server
            .progress
            .recv_timeout(server.timeout)
            .map_err(|_| server.fail("no $/progress after workspace/executeCommand agentfix.fix"))?;
        samples.progress_ms.push(first.duration_since(t).as_secs_f64() * 1e3);
        server.notify("$/cancelRequest", json!({"id": id}))?;
        server.wait(id, "workspace/executeCommand")?;
        server.shutdown()
    }

    /// The peak RSS measure (MiB), then the mirror check of the opened documents.
    fn memory(&self, spec: &Spec<'_>, samples: &mut Samples, run: usize) -> Result<(), String> {
        let args = self.args;
        let mut server = self.start(spec, samples)?;
        let docs = args.rss_docs.max(1);
        for d in 0..docs {
            server.open(&self.uri(&format!("big/doc_{d:03}.py")), 1, &document(d, args.rss_lines))?;
        }
        // Answered once every didOpen before it is taken in.
        let last = self.uri(&format!("big/doc_{:03}.py", docs - 1));
        server.request("textDocument/codeAction", Self::code_action(&last, 0, 0, None, false, false))?;
        samples.rss_mib.push(server.peak_rss_mib()?);
        if spec.verify {
            for d in [0, 1.min(docs - 1), docs - 1] {
                let uri = self.uri(&format!("big/doc_{d:03}.py"));
                self.verify(&mut server, samples, run, &uri, &document(d, args.rss_lines), 1)?;
            }
        }
        server.shutdown()
    }

    fn verify(
        &self,
        server: &mut Server,
        samples: &mut Samples,
        run: usize,
        uri: &str,
        expected: &str,
        version: i64,
    ) -> Result<(), String> {
        let response = server.request(DOCUMENT_TEXT, json!({"uri": uri}))?;
        let result = &response["result"];
        let problem = match (result["text"].as_str(), result["version"].as_i64()) {
            (Some(text), Some(v)) if text == expected && v == version => None,
            (Some(text), Some(v)) => Some(describe_difference(text, v, expected, version)),
            _ => Some(format!("{DOCUMENT_TEXT} gave no {{version, text}}: {response}")),
        };
        match problem {
            None => samples.verified += 1,
            Some(p) => samples.mismatches.push(format!("run {run}, {uri}: {p}")),
        }
        Ok(())
    }
}

fn describe_difference(text: &str, version: i64, expected: &str, expected_version: i64) -> String {
    if text == expected {
        return format!("the text matches but the version is {version}, not {expected_version}");
    }
    let at = text.bytes().zip(expected.bytes()).take_while(|(a, b)| a == b).count();
    let context = |s: &str| {
        let mut from = at.saturating_sub(40);
        while !s.is_char_boundary(from) {
            from -= 1;
        }
        let mut to = (at + 40).min(s.len());
        while !s.is_char_boundary(to) {
            to += 1;
        }
        format!("{:?}", &s[from.min(s.len())..to])
    };
    format!(
        "the server's text ({} bytes, version {version}) differs from the driver's ({} bytes, version {expected_version}) from byte {at}: server {} vs driver {}",
        text.len(),
        expected.len(),
        context(text),
        context(expected)
    )
}

/// Nearest-rank percentile.
fn percentile(values: &mut [f64], p: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * values.len() as f64).ceil() as usize;
    values[rank.clamp(1, values.len()) - 1]
}

fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

/// Thousands separated, `decimals` after the point.
fn number(value: f64, decimals: usize) -> String {
    let s = format!("{value:.decimals$}");
    let (int, frac) = s.split_once('.').map_or((s.as_str(), None), |(i, f)| (i, Some(f)));
    let mut grouped = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    match frac {
        Some(f) => format!("{grouped}.{f}"),
        None => grouped,
    }
}

fn shell_quote(arg: &str) -> String {
    if !arg.is_empty() && arg.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,@+".contains(c)) {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', "'\\''"))
    }
}

fn main() {
    let args = Args::parse();
    let code = run(args);
    std::process::exit(code);
}

/// Everything but the exit, so that the temporary folder is removed.
fn run(args: Args) -> i32 {
    let names: Vec<&str> = args.servers.iter().map(|(n, _)| n.as_str()).collect();
    if let Err(code) = check_names(&args, &names) {
        return code;
    }
    let dir = match tempfile::Builder::new().prefix("lsp_load-").tempdir() {
        Ok(dir) => dir,
        Err(e) => {
            eprintln!("lsp_load: cannot make a temporary folder: {e}");
            return 1;
        }
    };
    let root = dir.path().join("ws");
    if let Err(e) = std::fs::create_dir_all(&root) {
        eprintln!("lsp_load: cannot make {}: {e}", root.display());
        return 1;
    }
    let rss_text_bytes = (0..args.rss_docs.max(1)).map(|d| document(d, args.rss_lines).len()).sum();
    let plan = Plan { root, rss_text_bytes, args: &args };

    let specs: Vec<Spec<'_>> = args
        .servers
        .iter()
        .map(|(name, command)| Spec {
            name,
            command,
            env: args.env.iter().filter(|(n, _, _)| n == name).map(|(_, k, v)| (k.clone(), v.clone())).collect(),
            init_options: args.init_options.iter().find(|(n, _)| n == name).map(|(_, v)| v),
            verify: args.verify.contains(name),
            progress: args.progress.contains(name),
        })
        .collect();
    let samples = measure(&plan, &specs, &names);
    print_table(&plan, &names, &samples);
    let code = verdict(&specs, &samples);
    drop(plan);
    drop(dir);
    code
}

/// Every server name given once, and every per-server flag naming one.
fn check_names(args: &Args, names: &[&str]) -> Result<(), i32> {
    for (i, name) in names.iter().enumerate() {
        if names[..i].contains(name) {
            eprintln!("lsp_load: the server name `{name}` is given twice");
            return Err(64);
        }
    }
    for name in args
        .init_options
        .iter()
        .map(|(n, _)| n)
        .chain(args.env.iter().map(|(n, _, _)| n))
        .chain(&args.verify)
        .chain(&args.progress)
    {
        if !names.contains(&name.as_str()) {
            eprintln!("lsp_load: `{name}` names no --server (servers: {})", names.join(", "));
            return Err(64);
        }
    }
    Ok(())
}

/// Every measure of every server, the servers interleaved run by run.
fn measure<'a>(plan: &Plan<'_>, specs: &[Spec<'a>], names: &[&'a str]) -> HashMap<&'a str, Samples> {
    let args = plan.args;
    let mut samples: HashMap<&str, Samples> = names.iter().map(|n| (*n, Samples::default())).collect();
    for run in 1..=args.runs.max(1) {
        for spec in specs {
            let s = samples.get_mut(spec.name).expect("one per server");
            let mut outcomes =
                vec![plan.code_actions(spec, s), plan.keystrokes(spec, s, run), plan.memory(spec, s, run)];
            if spec.progress {
                outcomes.push(plan.progress(spec, s));
            }
            for outcome in outcomes {
                if let Err(e) = outcome {
                    eprintln!("lsp_load: run {run}: {e}");
                    s.failures.push(e);
                }
            }
            let last = |v: &[f64], d: usize| v.last().map_or("—".to_string(), |x| number(*x, d));
            eprintln!(
                "run {run}/{} {}: initialize {} ms, codeAction p50 {} µs p99 {} µs, keystrokes {} ms, VmHWM {} MiB",
                args.runs.max(1),
                spec.name,
                last(&s.init_ms, 1),
                last(&s.p50_us, 0),
                last(&s.p99_us, 0),
                last(&s.keys_ms, 1),
                last(&s.rss_mib, 1)
            );
        }
    }

    samples
}

/// The Markdown table of the medians, and how it was measured.
fn print_table(plan: &Plan<'_>, names: &[&str], samples: &HashMap<&str, Samples>) {
    let args = plan.args;
    let runs = args.runs.max(1);
    let cell = |v: &[f64], decimals: usize| match median(v) {
        None => "failed".to_string(),
        Some(m) if v.len() < runs => format!("{} ({} of {runs} runs)", number(m, decimals), v.len()),
        Some(m) => number(m, decimals),
    };
    let row = |label: String, pick: &dyn Fn(&Samples) -> &Vec<f64>, decimals: usize| {
        let cells: Vec<String> = names.iter().map(|n| cell(pick(&samples[n]), decimals)).collect();
        println!("| {label} | {} |", cells.join(" | "));
    };
    println!("| measure (median of {runs} runs) | {} |", names.join(" | "));
    println!("|---|{}", "---:|".repeat(names.len()));
    row("spawn → initialize response (ms)".into(), &|s| &s.init_ms, 1);
    row("  page faults by the initialize response".into(), &|s| &s.init_faults, 0);
    row("  threads at the initialize response".into(), &|s| &s.init_threads, 0);
    row("  CPU time of all threads by the initialize response (ms)".into(), &|s| &s.init_cpu_ms, 2);
    let open = format!("{} open documents × {} lines", number(args.docs as f64, 0), number(args.doc_lines as f64, 0));
    row(format!("codeAction p50, {open} (µs)"), &|s| &s.p50_us, 0);
    row(format!("codeAction p99, {open} (µs)"), &|s| &s.p99_us, 0);
    row(
        format!(
            "{} keystrokes on a {}-line document, then a codeAction answered (ms)",
            number(args.keystrokes as f64, 0),
            number(args.edit_lines as f64, 0)
        ),
        &|s| &s.keys_ms,
        1,
    );
    row(
        format!(
            "peak RSS (VmHWM) after opening {} documents × {} lines, {} MiB of text (MiB)",
            number(args.rss_docs.max(1) as f64, 0),
            number(args.rss_lines as f64, 0),
            number(plan.rss_text_bytes as f64 / (1024.0 * 1024.0), 1)
        ),
        &|s| &s.rss_mib,
        1,
    );
    if !args.progress.is_empty() {
        // Measured only for the servers named by --progress.
        let cells: Vec<String> = names
            .iter()
            .map(|n| if args.progress.iter().any(|p| p == n) { cell(&samples[n].progress_ms, 2) } else { "—".into() })
            .collect();
        println!("| workspace/executeCommand agentfix.fix → first $/progress (ms) | {} |", cells.join(" | "));
    }
    println!();
    println!(
        "Each measure in a fresh process of each server; the servers interleaved run by run; spawn → initialize over every start (three per run); {} codeAction requests one at a time, each after the answer to the previous.",
        number(args.codeactions.max(1) as f64, 0)
    );
    println!();
    let command: Vec<String> = std::env::args().skip(1).map(|a| shell_quote(&a)).collect();
    println!("`cargo run --release --example lsp_load -- {}`", command.join(" "));
}

/// The exit code: 2 when a mirror check failed, 1 when a run failed.
fn verdict(specs: &[Spec<'_>], samples: &HashMap<&str, Samples>) -> i32 {
    let mut code = 0;
    for spec in specs.iter().filter(|s| s.verify) {
        let s = &samples[spec.name];
        if s.mismatches.is_empty() && s.verified > 0 {
            println!();
            println!(
                "Mirror check ({}): `{DOCUMENT_TEXT}` equals the driver's text and version in every run ({} documents checked).",
                spec.name, s.verified
            );
        } else {
            code = 2;
            eprintln!();
            eprintln!("MIRROR MISMATCH ({}): the server's copy is not the editor's text", spec.name);
            for m in &s.mismatches {
                eprintln!("  {m}");
            }
            if s.verified == 0 && s.mismatches.is_empty() {
                eprintln!("  no document could be checked");
            }
            println!();
            println!("MIRROR MISMATCH ({}): see stderr.", spec.name);
        }
    }
    if samples.values().any(|s| !s.failures.is_empty()) {
        eprintln!("lsp_load: some runs failed (see above)");
        if code == 0 {
            code = 1;
        }
    }
    code
}
