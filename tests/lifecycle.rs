//! The server's life over real stdio, and its end: `exit` acted on at once
//! whether or not the client keeps stdin open (exit code 0 after `shutdown`,
//! 1 without), an editor that dies mid-run (every run, model request,
//! command and downstream server ended at once), an `applyEdit` the editor
//! never answers (cancel frees the file), a huge header line (no memory
//! kept, the next message read), and the first message: an `initialize`
//! answered once (before the server starts) with the messages piped after
//! it served, anything else first answered by the service.
#![cfg(target_os = "linux")]

mod common;

use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::editor::Editor;
use common::mock_model::{self, MockModel, Reply, text_reply, tool_reply};
use common::{agentfix_bin, file_uri};
use serde_json::{Value, json};

const LONG: Duration = Duration::from_secs(30);
/// "At once", on a loaded 2-core machine: the bugs are "never" or minutes.
const PROMPTLY: Duration = Duration::from_secs(5);

struct Fx {
    _dir: tempfile::TempDir,
    root: PathBuf,
    mock: MockModel,
    editor: Editor,
}

fn start(files: &[(&str, &str)], init: Value) -> Fx {
    start_in(&[], files, init)
}

/// [`start`], with the server started through `wrap` (a command prefix) when it is not empty.
fn start_in(wrap: &[&str], files: &[(&str, &str)], init: Value) -> Fx {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap().join("ws");
    std::fs::create_dir_all(&root).unwrap();
    for (p, text) in files {
        std::fs::write(root.join(p), text).unwrap();
    }
    let mock = MockModel::start();
    let base = mock.base_url();
    let mut argv: Vec<&str> = wrap.to_vec();
    argv.extend([agentfix_bin(), "--stdio"]);
    let mut editor = Editor::spawn(
        argv[0],
        &argv[1..],
        &root,
        &[
            ("ANTHROPIC_API_KEY", mock_model::API_KEY),
            ("ANTHROPIC_BASE_URL", &base),
            ("AGENTFIX_TRANSCRIPTS", "0"),
            ("AGENTFIX_DEFAULT_LANGUAGE_SERVERS", "0"),
        ],
    );
    editor.initialize(&root, Editor::full_capabilities(), init);
    Fx { _dir: dir, root, mock, editor }
}

impl Fx {
    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    fn fix_params(&self, rel: &str) -> Value {
        let arg = json!({"uri": file_uri(&self.path(rel)),
            "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "diagnostics": []});
        json!({"command": "agentfix.fix", "arguments": [arg]})
    }

    fn send_fix(&mut self, rel: &str) -> i64 {
        let params = self.fix_params(rel);
        self.editor.send_request("workspace/executeCommand", params)
    }

    /// Waits until the mock has received `n` requests.
    fn wait_requests(&mut self, n: usize) {
        let deadline = Instant::now() + LONG;
        while self.mock.requests().len() < n {
            assert!(Instant::now() < deadline, "the run never reached model request {n}");
            self.editor.pump(Duration::from_millis(10));
        }
    }

    /// Waits until the editor was sent a `workspace/applyEdit`.
    fn wait_apply_edit(&mut self) {
        let deadline = Instant::now() + LONG;
        while self.editor.applied_edits().is_empty() {
            assert!(Instant::now() < deadline, "no workspace/applyEdit came");
            self.editor.pump(Duration::from_millis(10));
        }
    }

    /// Waits up to [`PROMPTLY`] for the server to exit, stdin left as it is.
    fn exit_status(&mut self) -> std::process::ExitStatus {
        let t = Instant::now();
        match self.editor.wait_exit(PROMPTLY) {
            Some(status) => {
                eprintln!("the server exited {:?} later", t.elapsed());
                status
            }
            None => panic!(
                "the server still runs {:?} later\n--- stderr:\n{}",
                t.elapsed(),
                tail(&self.editor.stderr(), 6000)
            ),
        }
    }
}

fn tail(s: &str, max: usize) -> &str {
    let mut start = s.len().saturating_sub(max);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// A process that exists and is not a zombie.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name in parentheses.
        Ok(stat) => stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Live processes whose command line (arguments joined by spaces) passes `pred`.
fn processes_where(pred: impl Fn(&str) -> bool) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if pred(cmdline.trim_end()) && alive(pid) {
            out.push(pid);
        }
    }
    out
}

/// Live processes whose command line contains `needle`.
fn processes_with(needle: &str) -> Vec<u32> {
    processes_where(|c| c.contains(needle))
}

/// Live children of `parent` whose command line contains `needle`.
fn children_with(parent: u32, needle: &str) -> Vec<u32> {
    processes_with(needle)
        .into_iter()
        .filter(|pid| {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
            status.lines().any(|l| l.strip_prefix("PPid:").is_some_and(|v| v.trim() == parent.to_string()))
        })
        .collect()
}

/// Waits up to [`PROMPTLY`] until none of `pids` is alive; panics naming the survivors.
fn assert_all_end(pids: &[u32], what: &str) {
    let deadline = Instant::now() + PROMPTLY;
    loop {
        let left: Vec<u32> = pids.iter().copied().filter(|&p| alive(p)).collect();
        if left.is_empty() {
            return;
        }
        if Instant::now() >= deadline {
            for &p in &left {
                // SAFETY: plain system call; do not leave them behind.
                unsafe { libc::kill(p as i32, libc::SIGKILL) };
            }
            panic!("{what} still alive after the server exited: {left:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Kills, when dropped, every process whose command line contains one of its needles.
struct Reaper(Vec<String>);

impl Drop for Reaper {
    fn drop(&mut self) {
        for needle in &self.0 {
            for pid in processes_with(needle) {
                // SAFETY: plain system call on a process this test started.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            }
        }
    }
}

/// The fake language server, built as an example next to the test binary.
fn fake_lsp() -> PathBuf {
    let exe = PathBuf::from(agentfix_bin());
    let path = exe.parent().unwrap().join("examples").join("fake_lsp");
    if !path.exists() {
        let status =
            std::process::Command::new(env!("CARGO")).args(["build", "--example", "fake_lsp"]).status().unwrap();
        assert!(status.success(), "cannot build the fake language server");
    }
    path
}

/// The peak resident set of `pid`, in kB (`VmHWM`).
fn peak_rss_kb(pid: u32) -> u64 {
    common::rss::peak_kib(pid).unwrap_or_else(|| panic!("no VmHWM in /proc/{pid}/status"))
}

#[test]
fn exit_after_shutdown_ends_the_process_at_once_with_code_0_while_stdin_stays_open() {
    let mut f = start(&[("a.py", "x = 1\n")], Value::Null);
    f.mock.push(text_reply("Nothing to do."));
    let params = f.fix_params("a.py");
    let r = f.editor.request("workspace/executeCommand", params);
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    let r = f.editor.request("shutdown", Value::Null);
    assert!(r.get("error").is_none(), "{r}");
    // `exit`, and stdin stays open: no further message, no EOF.
    f.editor.notify("exit", Value::Null);
    let status = f.exit_status();
    assert_eq!(status.code(), Some(0), "{status}");
}

#[test]
fn exit_without_shutdown_mid_run_ends_the_process_at_once_with_code_1() {
    let mut f = start(&[("a.py", "x = 1\n")], Value::Null);
    f.mock.push(Reply::Hang);
    f.send_fix("a.py");
    f.wait_requests(1);
    f.editor.notify("exit", Value::Null);
    let status = f.exit_status();
    assert_eq!(status.code(), Some(1), "{status}");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(f.mock.requests().len(), 1, "no model request after exit");
}

#[test]
fn the_editor_dying_mid_run_ends_the_run_its_language_server_and_the_process() {
    let lsp = fake_lsp();
    let init = json!({"languageServers": {"python": {"command": [lsp.to_str().unwrap()]}}});
    let mut f = start(&[("a.py", "def f():\n    return 1\n")], init);
    // The run starts the downstream server, then waits on a model that never answers.
    f.mock.push(tool_reply(&[("t1", "document_symbols", json!({"path": "a.py"}))]));
    f.mock.push(Reply::Hang);
    f.send_fix("a.py");
    f.wait_requests(2);
    let servers = children_with(f.editor.pid(), "fake_lsp");
    assert!(!servers.is_empty(), "the downstream server was not started");
    // The editor goes away: stdin closes, no shutdown, no exit.
    f.editor.close_stdin();
    let status = f.exit_status();
    assert_eq!(status.code(), Some(1), "no shutdown came first: {status}");
    assert_all_end(&servers, "the downstream language server");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(f.mock.requests().len(), 2, "no model request after the editor left");
}

/// Starts a run whose command holds (a `sleep` only this test starts), ends agentfix with `end`
/// once the command runs, and checks that the command and all it started end with agentfix.
/// Without Landlock the command runs unsandboxed, unless `sandboxed` (then the test says
/// SKIPPED).
fn a_held_command_ends_with_agentfix(line: u32, sandboxed: bool, end: impl FnOnce(&mut Fx)) {
    let marker = format!("agentfix-lifecycle-{}-{line}", std::process::id());
    let sleep = format!("sleep 3600.{}{line}", std::process::id());
    let script = format!("{sleep}; echo {marker}");
    // Whatever happens, nothing of the command outlives the test.
    let _reaper = Reaper(vec![marker.clone(), sleep.clone()]);
    let mut commands = json!({"hold": ["sh", "-c", script], "autoApprove": true});
    if let Err(why) = agentfix::sandbox::landlock_abi() {
        assert!(std::env::var_os("CI").is_none(), "CI machines have Landlock: {why}");
        if sandboxed {
            println!("SKIPPED: no Landlock ({why}): the sandbox's parent-death signal is not tested");
            return;
        }
        eprintln!("no Landlock ({why}): the command runs without the sandbox");
        commands["sandbox"] = json!("off");
    }
    let mut f = start(&[("a.py", "x = 1\n")], json!({"commands": commands}));
    f.mock.push(tool_reply(&[("t1", "run_command", json!({"name": "hold"}))]));
    f.send_fix("a.py");
    let deadline = Instant::now() + LONG;
    // The shell (and the sandbox helper, whose arguments name it), and the
    // `sleep` it started.
    let started = loop {
        if !processes_where(|c| c == sleep).is_empty() {
            break processes_with(&marker).into_iter().chain(processes_with(&sleep)).collect::<Vec<_>>();
        }
        assert!(Instant::now() < deadline, "the command never started\n{}", tail(&f.editor.stderr(), 6000));
        f.editor.pump(Duration::from_millis(20));
    };
    end(&mut f);
    assert_all_end(&started, "the command");
    assert!(processes_with(&marker).is_empty() && processes_with(&sleep).is_empty());
}

#[test]
fn the_editor_dying_while_a_command_runs_kills_the_command() {
    a_held_command_ends_with_agentfix(line!(), false, |f| {
        f.editor.close_stdin();
        let status = f.exit_status();
        assert_eq!(status.code(), Some(1), "{status}");
    });
}

#[test]
fn agentfix_killed_while_a_command_runs_takes_the_command_with_it() {
    // SIGKILL: agentfix cleans nothing up; the sandbox's parent-death signal must.
    a_held_command_ends_with_agentfix(line!(), true, |f| {
        let killed = std::process::Command::new("kill").args(["-9", &f.editor.pid().to_string()]).status().unwrap();
        assert!(killed.success());
        let status = f.exit_status();
        assert_eq!(status.signal(), Some(9), "{status}");
    });
}

#[test]
fn cancel_ends_the_wait_for_an_apply_edit_the_editor_never_answers() {
    let mut f = start(&[("a.py", "x = 1\n")], Value::Null);
    f.editor.answer_apply_edit = false;
    f.editor.open(&f.path("a.py"), "python", 1, "x = 1\n");
    f.mock.push(tool_reply(&[("t1", "edit_file", json!({"path": "a.py", "old_text": "x = 1", "new_text": "x = 2"}))]));
    f.mock.push(text_reply("Set x to 2."));
    let id = f.send_fix("a.py");
    f.wait_apply_edit();
    // Other requests are answered meanwhile.
    let t = Instant::now();
    let r = f.editor.request("textDocument/codeAction", json!({"textDocument": {"uri": file_uri(&f.path("a.py"))},
        "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "context": {"diagnostics": []}}));
    assert_eq!(r["result"][0]["title"], "Agent fix: line 1", "{r}");
    assert!(t.elapsed() < PROMPTLY, "{:?}", t.elapsed());
    let t = Instant::now();
    f.editor.notify("$/cancelRequest", json!({"id": id}));
    let r = f.editor.wait_response(id, LONG);
    assert_eq!(r["error"]["code"], -32800, "{r}");
    let end = f.editor.wait_for_notification("$/progress", |p| p["value"]["kind"] == "end", LONG);
    assert!(end["value"]["message"].as_str().unwrap().contains("cancelled while waiting for the editor"), "{end}");
    assert!(t.elapsed() < PROMPTLY, "{:?}", t.elapsed());
    // The file is free: a second run on it is accepted.
    f.mock.push(text_reply("Nothing more to do."));
    let params = f.fix_params("a.py");
    let r = f.editor.request("workspace/executeCommand", params);
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
}

#[test]
fn the_progress_cancel_button_ends_the_wait_for_an_unanswered_apply_edit() {
    let mut f = start(&[("a.py", "x = 1\n")], Value::Null);
    f.editor.answer_apply_edit = false;
    f.editor.open(&f.path("a.py"), "python", 1, "x = 1\n");
    f.mock.push(tool_reply(&[("t1", "edit_file", json!({"path": "a.py", "old_text": "x = 1", "new_text": "x = 2"}))]));
    f.mock.push(text_reply("Set x to 2."));
    let id = f.send_fix("a.py");
    let begin = f.editor.wait_for_notification("$/progress", |p| p["value"]["kind"] == "begin", LONG);
    f.wait_apply_edit();
    let t = Instant::now();
    f.editor.notify("window/workDoneProgress/cancel", json!({"token": begin["token"]}));
    let r = f.editor.wait_response(id, PROMPTLY + Duration::from_secs(1));
    assert!(t.elapsed() < PROMPTLY, "{:?}", t.elapsed());
    assert_eq!(r["result"]["stopReason"], "cancelled", "{r}");
    assert_eq!(r["result"]["applied"], false);
    assert!(r["result"]["message"].as_str().unwrap().contains("cancelled while waiting for the editor"), "{r}");
    f.mock.push(text_reply("Nothing more to do."));
    let params = f.fix_params("a.py");
    let r = f.editor.request("workspace/executeCommand", params);
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
}

#[test]
fn a_64_mb_header_line_costs_no_memory_and_the_next_message_is_answered() {
    let dir = tempfile::tempdir().unwrap();
    let mut e = Editor::spawn(agentfix_bin(), &["--stdio"], dir.path(), &[]);
    e.initialize(dir.path(), Editor::full_capabilities(), Value::Null);
    let pid = e.pid();
    let before = peak_rss_kb(pid);
    // 64 MB without a line break, then a request right after it.
    e.send_raw(&vec![b'x'; 64 << 20]);
    let r = e.request("workspace/executeCommand", json!({"command": "nope", "arguments": []}));
    assert!(r["error"]["message"].as_str().unwrap().contains("unknown command `nope`"), "{r}");
    let after = peak_rss_kb(pid);
    assert!(
        e.stray_responses().iter().any(|r| r["error"]["code"] == -32700
            && r["error"]["message"].as_str().unwrap().contains("longer than 8192 bytes")),
        "{:?}",
        e.stray_responses()
    );
    let growth_mb = after.saturating_sub(before) / 1024;
    assert!(growth_mb < 20, "peak RSS grew by {growth_mb} MB ({before} kB → {after} kB)");
    assert!(e.shutdown().success());
}

#[test]
fn the_editor_is_told_before_the_run_when_commands_cannot_be_sandboxed() {
    if let Err(why) = agentfix::sandbox::landlock_abi() {
        assert!(std::env::var_os("CI").is_none(), "CI machines have Landlock: {why}");
        println!("SKIPPED: no Landlock ({why})");
        return;
    }
    // A system where this user may create no user namespace: a user namespace whose limit of
    // nested ones is 0.
    let wrap = [
        "unshare",
        "--user",
        "--map-root-user",
        "sh",
        "-c",
        "echo 0 > /proc/sys/user/max_user_namespaces && exec \"$@\"",
        "sh",
    ];
    let commands = json!({"test": ["sh", "-c", "echo RAN"], "autoApprove": true});
    let mut f = start_in(&wrap, &[("a.py", "x = 1\n")], json!({"commands": commands}));
    f.mock.push(tool_reply(&[("t1", "run_command", json!({"name": "test"}))]));
    f.mock.push(text_reply("The tests cannot run here."));
    let id = f.send_fix("a.py");
    let shown = f.editor.wait_for_notification(
        "window/showMessage",
        |m| m["message"].as_str().is_some_and(|t| t.contains("cannot run")),
        LONG,
    );
    let text = shown["message"].as_str().unwrap();
    assert_eq!(shown["type"], 2, "a warning: {shown}");
    assert!(text.contains("the configured commands (test) cannot run") && text.contains("namespaces:"), "{text}");
    assert!(text.contains(r#""sandbox": "off""#), "{text}");
    let r = f.editor.wait_response(id, LONG);
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    // The model was told the same, and the command never ran.
    let sent = f.mock.requests().last().cloned().unwrap().body.to_string();
    assert!(sent.contains("this system cannot provide one") && !sent.contains("RAN"), "{sent}");
    // Said once per session, not at every run.
    f.mock.push(text_reply("Nothing more."));
    let params = f.fix_params("a.py");
    let r = f.editor.request("workspace/executeCommand", params);
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    let warnings = f.editor.notifications("window/showMessage");
    assert_eq!(warnings.iter().filter(|m| m.to_string().contains("configured commands")).count(), 1, "{warnings:?}");
}

/// Sends `messages` (each a JSON value, or raw bytes) in one write, closes
/// stdin, and reads everything the server writes until it ends: its
/// messages and its exit status.
fn converse(root: &std::path::Path, messages: &[Result<Value, &[u8]>]) -> (Vec<Value>, std::process::ExitStatus) {
    use std::io::Write;
    let mut bytes = Vec::new();
    for m in messages {
        match m {
            Ok(v) => bytes.extend(agentfix_lsp_framing::frame(&serde_json::to_vec(v).unwrap())),
            Err(raw) => bytes.extend_from_slice(raw),
        }
    }
    let mut child = std::process::Command::new(agentfix_bin())
        .arg("--stdio")
        .current_dir(root)
        .env_remove("ANTHROPIC_API_KEY")
        .env("AGENTFIX_DEFAULT_LANGUAGE_SERVERS", "0")
        .env("AGENTFIX_TRANSCRIPTS", "0")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&bytes).unwrap();
    drop(stdin);
    let mut frames = common::server_frames(child.stdout.take().unwrap());
    let mut out = Vec::new();
    while let Some(v) = common::read_json(&mut frames).unwrap() {
        out.push(v);
    }
    (out, child.wait().unwrap())
}

fn initialize_request(id: i64, root: &std::path::Path, options: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "processId": null,
        "capabilities": {"general": {"positionEncodings": ["utf-8", "utf-16"]}},
        "workspaceFolders": [{"uri": file_uri(root), "name": "ws"}],
        "initializationOptions": options,
    }})
}

fn answers(out: &[Value], id: i64) -> Vec<&Value> {
    out.iter().filter(|m| m["id"] == id && m.get("method").is_none()).collect()
}

#[test]
fn initialize_is_answered_once_before_the_server_starts_and_what_follows_is_served() {
    let dir = tempfile::tempdir().unwrap();
    // A folder name in CJK and emoji: its URI is percent-encoded.
    let root = std::fs::canonicalize(dir.path()).unwrap().join("工作 🦀");
    std::fs::create_dir_all(&root).unwrap();
    let file = root.join("a.py");
    std::fs::write(&file, "x = 1\r\n").unwrap();
    let uri = file_uri(&file);
    let (out, status) = converse(
        &root,
        &[
            Ok(initialize_request(1, &root, json!({"maxTurns": 3}))),
            Ok(json!({"jsonrpc": "2.0", "method": "initialized", "params": {}})),
            Ok(json!({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument":
                {"uri": uri, "languageId": "python", "version": 1, "text": "x = 1\r\n"}}})),
            Ok(json!({"jsonrpc": "2.0", "id": 2, "method": "textDocument/codeAction", "params": {
                "textDocument": {"uri": uri},
                "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}},
                "context": {"diagnostics": []}}})),
            Ok(json!({"jsonrpc": "2.0", "id": 3, "method": "shutdown"})),
            Ok(json!({"jsonrpc": "2.0", "method": "exit"})),
        ],
    );
    let init = answers(&out, 1);
    assert_eq!(init.len(), 1, "initialize answered once: {out:?}");
    assert_eq!(init[0]["result"]["capabilities"]["positionEncoding"], "utf-8", "{}", init[0]);
    assert_eq!(init[0]["result"]["serverInfo"]["name"], "agentfix");
    // The service had the initialize too: the requests after it are served, not refused as
    // "not initialized" (-32002).
    let actions = answers(&out, 2);
    assert_eq!(actions.len(), 1, "{out:?}");
    assert_eq!(actions[0]["result"][0]["title"], "Agent fix: selection", "{}", actions[0]);
    assert_eq!(answers(&out, 3)[0]["result"], Value::Null);
    assert_eq!(status.code(), Some(0), "exit after shutdown: {out:?}");
}

#[test]
fn a_first_message_that_is_not_an_initialize_to_accept_is_answered_by_the_service() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    // A request before initialize: "not initialized"; then initialize works.
    let (out, _) = converse(
        &root,
        &[Ok(json!({"jsonrpc": "2.0", "id": 1, "method": "shutdown"})), Ok(initialize_request(2, &root, json!({})))],
    );
    assert_eq!(answers(&out, 1)[0]["error"]["code"], -32002, "{out:?}");
    assert_eq!(answers(&out, 2).len(), 1, "{out:?}");
    assert!(answers(&out, 2)[0]["result"]["capabilities"].is_object(), "{out:?}");
    // A broken first message: a parse error; then initialize works.
    let (out, _) =
        converse(&root, &[Err(b"Content-Length: 9\r\n\r\n{not json"), Ok(initialize_request(1, &root, json!({})))]);
    assert_eq!(out[0]["error"]["code"], -32700, "{out:?}");
    assert_eq!(answers(&out, 1).len(), 1, "{out:?}");
    assert!(answers(&out, 1)[0]["result"]["capabilities"].is_object(), "{out:?}");
    // Settings the server refuses: one error, the service's.
    let (out, _) = converse(&root, &[Ok(initialize_request(1, &root, json!({"maxTurns": "many"})))]);
    let init = answers(&out, 1);
    assert_eq!(init.len(), 1, "{out:?}");
    assert_eq!(init[0]["error"]["code"], -32602, "{out:?}");
    // No params at all: the service's "invalid params".
    let (out, _) = converse(&root, &[Ok(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize"}))]);
    assert_eq!(answers(&out, 1).len(), 1, "{out:?}");
    assert_eq!(answers(&out, 1)[0]["error"]["code"], -32602, "{out:?}");
}
