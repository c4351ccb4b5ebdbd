//! A fake editor: an LSP client that drives the real server binary over stdio.
//!
//! [`Editor::spawn`] starts the binary with piped stdio. A reader thread parses the LSP framing on
//! its stdout and hands each JSON message to the editor over an mpsc channel; another thread
//! collects stderr. While any wait function runs (and in [`Editor::pump`]) the editor answers the
//! server's requests (`workspace/applyEdit`, `workspace/configuration`, …) and records every
//! server→client request and notification, so nothing deadlocks.

use std::collections::{HashMap, HashSet};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::file_uri;

/// How long [`Editor::request`] waits for its response.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Environment variable prefixes removed from the server's environment.
const SCRUBBED_PREFIXES: &[&str] = &["ANTHROPIC_", "OPENAI_", "AGENTFIX_"];

/// Proxy variables removed so the server's HTTP client talks to 127.0.0.1 directly.
const PROXY_VARS: &[&str] = &["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"];

enum Incoming {
    Message(Value),
    Malformed(String),
}

enum Outcome {
    Done,
    TimedOut,
    Closed,
}

/// An LSP client connected to a spawned server process.
pub struct Editor {
    child: Child,
    stdin: Option<ChildStdin>,
    rx: Receiver<Incoming>,
    stderr: Arc<Mutex<String>>,
    next_id: i64,
    responses: HashMap<i64, Value>,
    stray_responses: Vec<Value>,
    messages: Vec<Value>,
    applied_edits: Vec<Value>,
    consumed: HashSet<usize>,
    workspace_folders: Value,
    stdout_closed: bool,
    /// Result sent for every `workspace/applyEdit` (default `{"applied": true}`).
    pub apply_response: Value,
    /// Whether `workspace/applyEdit` is answered at all (default true). When false the request
    /// is recorded (see [`Editor::applied_edits`]) but never answered, like an editor whose
    /// review is left open.
    pub answer_apply_edit: bool,
    /// Whether `window/workDoneProgress/create` is answered (default true). When false the
    /// request is recorded but never answered, like some clients do.
    pub answer_progress_create: bool,
    /// Value returned for every item of a `workspace/configuration` request (default null).
    pub configuration: Value,
    /// Like a real editor (default true): a `workspace/applyEdit` answered with `applied: true`
    /// is applied to the open buffers first (a versioned edit for another version is refused
    /// with `applied: false`, as VS Code does), and a `didChange` is sent for each changed
    /// buffer. False mimics a client that answers `applied: true` and changes nothing.
    pub apply_to_buffers: bool,
    /// With [`Editor::apply_to_buffers`]: the URIs whose changes are applied (`None`: all),
    /// like a review in which the user unticked the other files.
    pub apply_only: Option<Vec<String>>,
    /// The `clientInfo.name` `initialize` sends.
    pub client_name: String,
    /// The answer to every `window/showMessageRequest` (default null: dismissed).
    pub message_request_answer: Value,
    /// The open buffers: uri → (version, text).
    buffers: HashMap<String, (i32, String)>,
}

impl Editor {
    /// Spawns `bin` with `args` in `cwd`. The inherited environment loses every `ANTHROPIC_*`,
    /// `OPENAI_*`, `AGENTFIX_*` and proxy variable; `RUST_LOG=agentfix=debug` and
    /// `NO_PROXY=127.0.0.1,localhost` are set, then `env` is applied (so it can override them).
    pub fn spawn(bin: &str, args: &[&str], cwd: &Path, env: &[(&str, &str)]) -> Editor {
        let mut command = Command::new(bin);
        command.args(args).current_dir(cwd).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        for (key, _) in std::env::vars_os() {
            if let Some(name) = key.to_str()
                && (SCRUBBED_PREFIXES.iter().any(|p| name.starts_with(p)) || PROXY_VARS.contains(&name))
            {
                command.env_remove(&key);
            }
        }
        command
            .env("RUST_LOG", "agentfix=debug")
            .env("NO_PROXY", "127.0.0.1,localhost")
            .env("no_proxy", "127.0.0.1,localhost");
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().unwrap_or_else(|e| panic!("failed to spawn {bin} {args:?}: {e}"));

        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        thread::Builder::new()
            .name("editor-stdout".into())
            .spawn(move || read_lsp_messages(stdout, &tx))
            .expect("spawn stdout reader");

        let stderr = Arc::new(Mutex::new(String::new()));
        let stderr_pipe = child.stderr.take().expect("piped stderr");
        let sink = Arc::clone(&stderr);
        thread::Builder::new()
            .name("editor-stderr".into())
            .spawn(move || {
                let mut reader = BufReader::new(stderr_pipe);
                let mut line = Vec::new();
                while matches!(reader.read_until(b'\n', &mut line), Ok(n) if n > 0) {
                    sink.lock().unwrap_or_else(|e| e.into_inner()).push_str(&String::from_utf8_lossy(&line));
                    line.clear();
                }
            })
            .expect("spawn stderr reader");

        Editor {
            stdin: child.stdin.take(),
            child,
            rx,
            stderr,
            next_id: 1,
            responses: HashMap::new(),
            stray_responses: Vec::new(),
            messages: Vec::new(),
            applied_edits: Vec::new(),
            consumed: HashSet::new(),
            workspace_folders: Value::Null,
            stdout_closed: false,
            apply_response: json!({"applied": true}),
            answer_apply_edit: true,
            answer_progress_create: true,
            configuration: Value::Null,
            apply_to_buffers: true,
            apply_only: None,
            message_request_answer: Value::Null,
            buffers: HashMap::new(),
            client_name: "agentfix-test-editor".into(),
        }
    }

    /// A VS Code–like `ClientCapabilities` object.
    pub fn full_capabilities() -> Value {
        json!({
            "general": {
                "positionEncodings": ["utf-16"],
                "regularExpressions": {"engine": "ECMAScript", "version": "ES2020"},
                "markdown": {"parser": "marked", "version": "1.1.0"}
            },
            "workspace": {
                "applyEdit": true,
                "workspaceEdit": {
                    "documentChanges": true,
                    "resourceOperations": ["create", "rename", "delete"],
                    "failureHandling": "textOnlyTransactional",
                    "normalizesLineEndings": true,
                    "changeAnnotationSupport": {"groupsOnLabel": true}
                },
                "configuration": true,
                "workspaceFolders": true,
                "didChangeConfiguration": {"dynamicRegistration": true},
                "didChangeWatchedFiles": {"dynamicRegistration": true, "relativePatternSupport": true},
                "executeCommand": {"dynamicRegistration": true}
            },
            "window": {
                "workDoneProgress": true,
                "showMessage": {"messageActionItem": {"additionalPropertiesSupport": true}}
            },
            "textDocument": {
                "synchronization": {
                    "dynamicRegistration": true,
                    "willSave": true,
                    "willSaveWaitUntil": true,
                    "didSave": true
                },
                "codeAction": {
                    "dynamicRegistration": true,
                    "isPreferredSupport": true,
                    "disabledSupport": true,
                    "dataSupport": true,
                    "honorsChangeAnnotations": true,
                    "resolveSupport": {"properties": ["edit"]},
                    "codeActionLiteralSupport": {
                        "codeActionKind": {
                            "valueSet": [
                                "",
                                "quickfix",
                                "refactor",
                                "refactor.extract",
                                "refactor.inline",
                                "refactor.rewrite",
                                "source",
                                "source.organizeImports"
                            ]
                        }
                    }
                },
                "publishDiagnostics": {
                    "relatedInformation": true,
                    "versionSupport": false,
                    "tagSupport": {"valueSet": [1, 2]},
                    "codeDescriptionSupport": true,
                    "dataSupport": true
                }
            }
        })
    }

    /// Sends a request and waits up to 30 s for its response; returns the whole response object
    /// (with `result` or `error`).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params);
        self.wait_response(id, REQUEST_TIMEOUT)
    }

    /// Sends a request and returns its id without waiting.
    pub fn send_request(&mut self, method: &str, params: Value) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        let mut message = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if !params.is_null() {
            message["params"] = params;
        }
        self.send_or_panic(&message);
        id
    }

    /// Waits for the response with this id (pumping meanwhile); panics on timeout or if the
    /// server closes its stdout first.
    pub fn wait_response(&mut self, id: i64, timeout: Duration) -> Value {
        match self.pump_until(timeout, |e| e.responses.contains_key(&id)) {
            Outcome::Done => self.responses.remove(&id).expect("response present"),
            Outcome::TimedOut => self.fail(&format!("no response to request {id} within {timeout:?}")),
            Outcome::Closed => self.fail(&format!("server closed stdout before answering request {id}")),
        }
    }

    /// Sends a notification.
    pub fn notify(&mut self, method: &str, params: Value) {
        let mut message = json!({"jsonrpc": "2.0", "method": method});
        if !params.is_null() {
            message["params"] = params;
        }
        self.send_or_panic(&message);
    }

    /// Writes raw bytes to the server's stdin (for malformed-input tests). Write errors are
    /// ignored (the server may legitimately have gone away).
    pub fn send_raw(&mut self, bytes: &[u8]) {
        if let Some(stdin) = self.stdin.as_mut() {
            let _ = stdin.write_all(bytes).and_then(|()| stdin.flush());
        }
    }

    /// Sends `initialize` (processId, rootUri, rootPath, workspaceFolders, the given capabilities
    /// and initializationOptions), then `initialized`; returns the `result` (panics on an error
    /// response).
    pub fn initialize(&mut self, root: &Path, capabilities: Value, initialization_options: Value) -> Value {
        let uri = file_uri(root);
        let name = root.file_name().map_or_else(|| uri.clone(), |n| n.to_string_lossy().into_owned());
        self.workspace_folders = json!([{"uri": uri, "name": name}]);
        let response = self.request(
            "initialize",
            json!({
                "processId": std::process::id(),
                "clientInfo": {"name": self.client_name, "version": "0.0.0"},
                "locale": "en",
                "rootPath": root.to_string_lossy(),
                "rootUri": uri,
                "workspaceFolders": self.workspace_folders.clone(),
                "capabilities": capabilities,
                "initializationOptions": initialization_options,
                "trace": "off"
            }),
        );
        let Some(result) = response.get("result").cloned() else {
            self.fail(&format!("initialize failed: {response}"));
        };
        self.notify("initialized", json!({}));
        result
    }

    /// `textDocument/didOpen`.
    pub fn open(&mut self, path: &Path, language_id: &str, version: i32, text: &str) {
        self.buffers.insert(file_uri(path), (version, text.to_string()));
        self.notify(
            "textDocument/didOpen",
            json!({"textDocument": {
                "uri": file_uri(path),
                "languageId": language_id,
                "version": version,
                "text": text
            }}),
        );
    }

    /// `textDocument/didChange` with one full-content change.
    pub fn change_full(&mut self, path: &Path, version: i32, text: &str) {
        self.buffers.insert(file_uri(path), (version, text.to_string()));
        self.notify(
            "textDocument/didChange",
            json!({
                "textDocument": {"uri": file_uri(path), "version": version},
                "contentChanges": [{"text": text}]
            }),
        );
    }

    /// `textDocument/didChange` with one ranged change; `range` is
    /// `((start_line, start_character), (end_line, end_character))` in UTF-16 units.
    pub fn change_incremental(&mut self, path: &Path, version: i32, range: ((u32, u32), (u32, u32)), text: &str) {
        let ((start_line, start_character), (end_line, end_character)) = range;
        if let Some((v, _)) = self.buffers.get_mut(&file_uri(path)) {
            *v = version;
        }
        self.apply_incremental_to_buffer(path, range, text);
        self.notify(
            "textDocument/didChange",
            json!({
                "textDocument": {"uri": file_uri(path), "version": version},
                "contentChanges": [{
                    "range": {
                        "start": {"line": start_line, "character": start_character},
                        "end": {"line": end_line, "character": end_character}
                    },
                    "text": text
                }]
            }),
        );
    }

    /// `textDocument/didSave`, with the buffer's text (`includeText`) when `text` is given; the
    /// buffer becomes that text.
    pub fn save(&mut self, path: &Path, text: Option<&str>) {
        let mut params = json!({"textDocument": {"uri": file_uri(path)}});
        if let Some(text) = text {
            if let Some((_, buffer)) = self.buffers.get_mut(&file_uri(path)) {
                *buffer = text.to_string();
            }
            params["text"] = json!(text);
        }
        self.notify("textDocument/didSave", params);
    }

    /// `textDocument/didClose`.
    pub fn close(&mut self, path: &Path) {
        self.buffers.remove(&file_uri(path));
        self.notify("textDocument/didClose", json!({"textDocument": {"uri": file_uri(path)}}));
    }

    /// The editor's current text of an open buffer.
    pub fn buffer_text(&self, path: &Path) -> Option<String> {
        self.buffers.get(&file_uri(path)).map(|(_, t)| t.clone())
    }

    fn apply_incremental_to_buffer(&mut self, path: &Path, range: ((u32, u32), (u32, u32)), text: &str) {
        if let Some((_, buffer)) = self.buffers.get_mut(&file_uri(path)) {
            let ((sl, sc), (el, ec)) = range;
            let edit = json!({"range": {"start": {"line": sl, "character": sc}, "end": {"line": el, "character": ec}}, "newText": text});
            *buffer = super::apply_text_edits(buffer, &[edit]);
        }
    }

    /// Applies the `documentChanges` of a `WorkspaceEdit` to the open buffers, all or nothing,
    /// and sends a full `didChange` per changed buffer. Edits to files that are not open are
    /// accepted and ignored (a real editor would open them).
    fn apply_workspace_edit(&mut self, edit: &Value) -> Value {
        let mut updates: Vec<(String, String)> = Vec::new();
        for op in edit["documentChanges"].as_array().into_iter().flatten() {
            let Some(uri) = op["textDocument"]["uri"].as_str() else { continue };
            if self.apply_only.as_ref().is_some_and(|only| !only.iter().any(|u| u == uri)) {
                continue;
            }
            let Some((version, text)) = self.buffers.get(uri) else { continue };
            if let Some(v) = op["textDocument"]["version"].as_i64()
                && v != i64::from(*version)
            {
                return json!({"applied": false, "failureReason": format!("{uri} is at version {version}, not {v}")});
            }
            let edits: Vec<Value> = op["edits"].as_array().cloned().unwrap_or_default();
            updates.push((uri.to_string(), super::apply_text_edits(text, &edits)));
        }
        for (uri, text) in updates {
            let entry = self.buffers.get_mut(&uri).expect("checked above");
            entry.0 += 1;
            entry.1 = text.clone();
            let version = entry.0;
            self.notify(
                "textDocument/didChange",
                json!({"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]}),
            );
        }
        json!({"applied": true})
    }

    /// Every server→client request and notification so far, in order (responses excluded).
    pub fn messages(&self) -> Vec<Value> {
        self.messages.clone()
    }

    /// The params of every `workspace/applyEdit` so far.
    pub fn applied_edits(&self) -> Vec<Value> {
        self.applied_edits.clone()
    }

    /// The params of every notification with this method so far.
    pub fn notifications(&self, method: &str) -> Vec<Value> {
        self.messages
            .iter()
            .filter(|m| m.get("id").is_none() && m["method"] == method)
            .map(|m| m.get("params").cloned().unwrap_or(Value::Null))
            .collect()
    }

    /// Responses whose id is not one this editor issued (e.g. `id: null` after a parse error).
    pub fn stray_responses(&self) -> Vec<Value> {
        self.stray_responses.clone()
    }

    /// Returns the params of the first notification with this method, matching `pred`, that no
    /// earlier call returned, whether it already arrived or arrives within `timeout`; panics
    /// otherwise.
    pub fn wait_for_notification(&mut self, method: &str, pred: impl Fn(&Value) -> bool, timeout: Duration) -> Value {
        let mut found = None;
        let outcome = self.pump_until(timeout, |e| {
            found = e.messages.iter().enumerate().position(|(i, m)| {
                !e.consumed.contains(&i)
                    && m.get("id").is_none()
                    && m["method"] == method
                    && pred(m.get("params").unwrap_or(&Value::Null))
            });
            found.is_some()
        });
        match (outcome, found) {
            (Outcome::Done, Some(index)) => {
                self.consumed.insert(index);
                self.messages[index].get("params").cloned().unwrap_or(Value::Null)
            }
            (Outcome::Closed, _) => {
                self.fail(&format!("server closed stdout while waiting for a matching {method} notification"))
            }
            _ => self.fail(&format!("no matching {method} notification within {timeout:?}")),
        }
    }

    /// Processes incoming messages for `timeout` (returns early only if the server closed stdout).
    pub fn pump(&mut self, timeout: Duration) {
        let _ = self.pump_until(timeout, |_| false);
    }

    /// Everything the server wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Closes the server's stdin (EOF without `exit`).
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Waits up to `timeout` for the process to exit (pumping meanwhile); `None` if still running.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            let slice = (deadline - now).min(Duration::from_millis(20));
            if self.stdout_closed {
                thread::sleep(slice);
            } else {
                let _ = self.pump_until(slice, |_| false);
            }
        }
    }

    /// `shutdown` request (must succeed within 10 s), `exit` notification, stdin closed; waits up
    /// to 10 s for the process and kills it otherwise.
    pub fn shutdown(mut self) -> ExitStatus {
        let id = self.send_request("shutdown", Value::Null);
        let response = self.wait_response(id, Duration::from_secs(10));
        if response.get("error").is_some() {
            self.fail(&format!("shutdown failed: {response}"));
        }
        let exit = json!({"jsonrpc": "2.0", "method": "exit"});
        let _ = self.send(&exit);
        self.close_stdin();
        if let Some(status) = self.wait_exit(Duration::from_secs(10)) {
            return status;
        }
        let _ = self.child.kill();
        self.child.wait().expect("wait for killed server")
    }

    fn send(&mut self, message: &Value) -> io::Result<()> {
        let body = serde_json::to_vec(message).expect("serialize JSON");
        let stdin =
            self.stdin.as_mut().ok_or_else(|| io::Error::new(io::ErrorKind::BrokenPipe, "stdin already closed"))?;
        stdin.write_all(&agentfix_lsp_framing::frame(&body))?;
        stdin.flush()
    }

    fn send_or_panic(&mut self, message: &Value) {
        if let Err(err) = self.send(message) {
            self.fail(&format!("failed to write {message} to the server: {err}"));
        }
    }

    fn pump_until(&mut self, timeout: Duration, mut done: impl FnMut(&Self) -> bool) -> Outcome {
        let deadline = Instant::now() + timeout;
        loop {
            if done(self) {
                return Outcome::Done;
            }
            if self.stdout_closed {
                return Outcome::Closed;
            }
            let now = Instant::now();
            if now >= deadline {
                return Outcome::TimedOut;
            }
            match self.rx.recv_timeout(deadline - now) {
                Ok(incoming) => self.handle(incoming),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => self.stdout_closed = true,
            }
        }
    }

    fn handle(&mut self, incoming: Incoming) {
        let message = match incoming {
            Incoming::Message(message) => message,
            Incoming::Malformed(err) => {
                self.stdout_closed = true;
                self.fail(&format!("server wrote malformed LSP output: {err}"));
            }
        };
        let method = message.get("method").and_then(Value::as_str).map(str::to_owned);
        match (method, message.get("id").cloned()) {
            (Some(method), Some(id)) => {
                let params = message.get("params").cloned().unwrap_or(Value::Null);
                self.messages.push(message);
                self.answer(&method, id, params);
            }
            (Some(_), None) => self.messages.push(message),
            (None, id) => match id.as_ref().and_then(Value::as_i64) {
                Some(id) if (1..self.next_id).contains(&id) => {
                    self.responses.insert(id, message);
                }
                _ => self.stray_responses.push(message),
            },
        }
    }

    fn answer(&mut self, method: &str, id: Value, params: Value) {
        let result = match method {
            "workspace/applyEdit" => {
                self.applied_edits.push(params.clone());
                if !self.answer_apply_edit {
                    return;
                }
                let answer = self.apply_response.clone();
                if self.apply_to_buffers && answer["applied"] == true {
                    Ok(self.apply_workspace_edit(&params["edit"]))
                } else {
                    Ok(answer)
                }
            }
            "window/workDoneProgress/create" => {
                if !self.answer_progress_create {
                    return;
                }
                Ok(Value::Null)
            }
            "workspace/configuration" => {
                let items = params["items"].as_array().map_or(0, Vec::len);
                Ok(Value::Array(vec![self.configuration.clone(); items]))
            }
            "workspace/workspaceFolders" => Ok(self.workspace_folders.clone()),
            "window/showMessageRequest" => Ok(self.message_request_answer.clone()),
            "client/registerCapability" | "client/unregisterCapability" => Ok(Value::Null),
            _ => Err(json!({"code": -32601, "message": format!("Method not found: {method}")})),
        };
        let response = match result {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
        };
        // A write failure means the server is gone; the waiting caller will notice.
        let _ = self.send(&response);
    }

    /// Panics with `what`, the exit status if any, the last server messages and the stderr tail.
    fn fail(&mut self, what: &str) -> ! {
        let status = match self.child.try_wait() {
            Ok(Some(status)) => format!("exited with {status}"),
            Ok(None) => "still running".to_string(),
            Err(err) => format!("unknown ({err})"),
        };
        let recent: Vec<String> = self.messages.iter().rev().take(10).rev().map(Value::to_string).collect();
        panic!(
            "{what}\n--- server process: {status}\n--- last server→client messages:\n{}\n--- server stderr (tail):\n{}",
            tail(&recent.join("\n"), 8_000),
            tail(&self.stderr(), 20_000)
        );
    }
}

impl Drop for Editor {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The last `max` bytes of `s` (at a char boundary).
fn tail(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// Reads LSP-framed JSON messages until EOF or a framing error.
fn read_lsp_messages(stdout: impl Read, tx: &Sender<Incoming>) {
    let mut frames = super::server_frames(stdout);
    loop {
        match super::read_json(&mut frames) {
            Ok(Some(message)) => {
                if tx.send(Incoming::Message(message)).is_err() {
                    return;
                }
            }
            Ok(None) => return,
            Err(err) => {
                let _ = tx.send(Incoming::Malformed(err));
                return;
            }
        }
    }
}
