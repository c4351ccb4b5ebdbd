//! A small JSON-RPC/LSP client over a child process's stdio: one task reads,
//! one writes, one drains stderr; pending requests by id, each with a
//! timeout; bounded header and message sizes; the server→client requests
//! servers expect are answered; `kill_on_drop`, and `shutdown`/`exit` on the
//! way out. Messages are `serde_json::Value`s: LSP types stay in `src/lsp/`.

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{Notify, mpsc, oneshot};

use super::uri::path_to_uri;

/// Largest message accepted from a server.
const MAX_MESSAGE: usize = 64 * 1024 * 1024;
/// Largest header line accepted.
const MAX_HEADER_LINE: usize = 8 * 1024;
/// Bytes of stderr kept for error messages.
const STDERR_TAIL: usize = 4096;

/// Diagnostics a server published for one document.
#[derive(Debug, Clone, Default)]
pub struct Published {
    pub version: Option<i64>,
    pub items: Vec<Value>,
    pub at: Option<Instant>,
    /// Counts publications, so waiters can tell a new one from an old one.
    pub serial: u64,
}

type Pending = Arc<Mutex<HashMap<i64, oneshot::Sender<Result<Value, String>>>>>;

/// Shared between the client handle and its tasks.
struct Shared {
    pending: Pending,
    diagnostics: Mutex<HashMap<String, Published>>,
    published: Notify,
    dead: AtomicBool,
    death: Mutex<Option<String>>,
    stderr: Mutex<String>,
    /// Answer to `workspace/configuration` items.
    settings: Value,
    folders: Value,
}

impl Shared {
    fn die(&self, why: String) {
        if !self.dead.swap(true, Ordering::SeqCst) {
            *self.death.lock().unwrap_or_else(|e| e.into_inner()) = Some(why.clone());
        }
        let pending: Vec<_> = self.pending.lock().unwrap_or_else(|e| e.into_inner()).drain().collect();
        for (_, tx) in pending {
            let _ = tx.send(Err(why.clone()));
        }
        self.published.notify_waiters();
    }
}

/// A running language server.
pub struct Client {
    name: String,
    shared: Arc<Shared>,
    out: mpsc::UnboundedSender<Vec<u8>>,
    next_id: AtomicI64,
    child: Mutex<Option<Child>>,
    /// The server's `InitializeResult.capabilities`.
    pub capabilities: Value,
}

impl Client {
    /// Spawns `command` in `root`, runs `initialize`/`initialized`.
    pub async fn start(
        name: &str,
        command: &[String],
        root: &Path,
        initialization_options: Option<Value>,
        settings: Value,
        timeout: Duration,
        env_allow: &[String],
    ) -> Result<Client, String> {
        let (program, args) = command.split_first().ok_or_else(|| format!("{name}: empty command"))?;
        let mut cmd = Command::new(program);
        // A language server never sees the provider key or other credentials.
        for var in crate::secrets::credential_vars(env_allow) {
            cmd.env_remove(var);
        }
        let mut child = cmd
            .args(args)
            .current_dir(root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start `{}`: {e}", command.join(" ")))?;
        let root_uri = path_to_uri(root);
        let folder_name = root.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let shared = Arc::new(Shared {
            pending: Arc::new(Mutex::new(HashMap::new())),
            diagnostics: Mutex::new(HashMap::new()),
            published: Notify::new(),
            dead: AtomicBool::new(false),
            death: Mutex::new(None),
            stderr: Mutex::new(String::new()),
            settings,
            folders: json!([{"uri": root_uri, "name": folder_name}]),
        });
        let (out, mut out_rx) = mpsc::unbounded_channel::<Vec<u8>>();
        let mut stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let stderr = child.stderr.take().ok_or("no stderr")?;
        {
            let shared = shared.clone();
            tokio::spawn(async move {
                while let Some(bytes) = out_rx.recv().await {
                    if stdin.write_all(&bytes).await.is_err() || stdin.flush().await.is_err() {
                        shared.die("its stdin closed".into());
                        break;
                    }
                }
            });
        }
        {
            let shared = shared.clone();
            let out = out.clone();
            tokio::spawn(async move {
                let mut reader = BufReader::new(stdout);
                loop {
                    match read_message(&mut reader).await {
                        Ok(Some(msg)) => dispatch(&shared, &out, msg),
                        Ok(None) => {
                            shared.die("it exited".into());
                            break;
                        }
                        Err(e) => {
                            shared.die(format!("it sent a malformed message: {e}"));
                            break;
                        }
                    }
                }
            });
        }
        {
            let shared = shared.clone();
            let name = name.to_string();
            tokio::spawn(async move {
                drain_stderr(stderr, |line| {
                    tracing::debug!(server = %name, "stderr: {line}");
                    let mut tail = shared.stderr.lock().unwrap_or_else(|e| e.into_inner());
                    tail.push_str(line);
                    tail.push('\n');
                    if tail.len() > STDERR_TAIL {
                        let cut = tail.len() - STDERR_TAIL;
                        let cut = (cut..tail.len()).find(|i| tail.is_char_boundary(*i)).unwrap_or(tail.len());
                        tail.drain(..cut);
                    }
                })
                .await
            });
        }
        let client = Client {
            name: name.to_string(),
            shared,
            out,
            next_id: AtomicI64::new(1),
            child: Mutex::new(Some(child)),
            capabilities: Value::Null,
        };
        let params = json!({
            "processId": std::process::id(),
            "clientInfo": {"name": "agentfix", "version": env!("CARGO_PKG_VERSION")},
            "rootUri": root_uri,
            "rootPath": root,
            "workspaceFolders": client.shared.folders,
            "initializationOptions": initialization_options,
            "capabilities": {
                "general": {"positionEncodings": ["utf-8", "utf-16"]},
                "workspace": {"configuration": true, "workspaceFolders": true, "symbol": {}},
                "window": {"workDoneProgress": true},
                "textDocument": {
                    "synchronization": {"didSave": false, "dynamicRegistration": false},
                    "documentSymbol": {"hierarchicalDocumentSymbolSupport": true},
                    "definition": {"linkSupport": false},
                    "references": {},
                    "hover": {"contentFormat": ["plaintext", "markdown"]},
                    "publishDiagnostics": {"versionSupport": true, "relatedInformation": false}
                }
            }
        });
        let result = client.request("initialize", params, timeout).await?;
        client.notify("initialized", json!({}));
        Ok(Client { capabilities: result["capabilities"].clone(), ..client })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn is_dead(&self) -> bool {
        self.shared.dead.load(Ordering::SeqCst)
    }

    /// Why the server died, with the tail of its stderr.
    pub fn death(&self) -> String {
        let why =
            self.shared.death.lock().unwrap_or_else(|e| e.into_inner()).clone().unwrap_or_else(|| "unknown".into());
        let tail = self.shared.stderr.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let last: Vec<&str> = tail.lines().rev().take(3).collect::<Vec<_>>().into_iter().rev().collect();
        if last.is_empty() { why } else { format!("{why} ({})", last.join(" / ")) }
    }

    fn send(&self, msg: &Value) {
        let body = msg.to_string();
        let mut bytes = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        bytes.extend_from_slice(body.as_bytes());
        if self.out.send(bytes).is_err() {
            self.shared.die("its writer stopped".into());
        }
    }

    pub fn notify(&self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Sends a request and waits for its result at most `timeout`. On a
    /// timeout the request is cancelled with `$/cancelRequest`.
    pub async fn request(&self, method: &str, params: Value, timeout: Duration) -> Result<Value, String> {
        if self.is_dead() {
            return Err(format!("{} is not running: {}", self.name, self.death()));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.shared.pending.lock().unwrap_or_else(|e| e.into_inner()).insert(id, tx);
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(r)) => r.map_err(|e| format!("{} failed `{method}`: {e}", self.name)),
            Ok(Err(_)) => Err(format!("{} dropped `{method}`", self.name)),
            Err(_) => {
                self.shared.pending.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
                self.notify("$/cancelRequest", json!({"id": id}));
                Err(format!("{} did not answer `{method}` within {} s", self.name, timeout.as_secs_f32()))
            }
        }
    }

    /// The diagnostics last published for `uri`.
    pub fn published(&self, uri: &str) -> Published {
        self.shared.diagnostics.lock().unwrap_or_else(|e| e.into_inner()).get(uri).cloned().unwrap_or_default()
    }

    /// Waits for the diagnostics of `uri` after the change that made
    /// `version` (sent at `since`): the first publication for that version
    /// (or, from servers that do not say, any publication after `since`),
    /// then `quiet` without a newer one, `max` at most. `None` if nothing
    /// came in time.
    pub async fn settled_diagnostics(
        &self,
        uri: &str,
        version: i64,
        since: Instant,
        quiet: Duration,
        max: Duration,
    ) -> Option<Vec<Value>> {
        let deadline = tokio::time::Instant::now() + max;
        let fresh = |p: &Published| match p.version {
            Some(v) => v >= version,
            None => p.at.is_some_and(|t| t >= since),
        };
        loop {
            let notified = self.shared.published.notified();
            let p = self.published(uri);
            if fresh(&p) {
                let at = p.at.unwrap_or_else(Instant::now);
                let quiet_until = tokio::time::Instant::from_std(at + quiet);
                if tokio::time::Instant::now() >= quiet_until || tokio::time::Instant::now() >= deadline {
                    return Some(p.items);
                }
                tokio::select! {
                    _ = notified => {}
                    _ = tokio::time::sleep_until(quiet_until.min(deadline)) => {}
                }
                continue;
            }
            if self.is_dead() {
                return None;
            }
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep_until(deadline) => return None,
            }
        }
    }

    /// `shutdown` then `exit`, then the process is killed if still there.
    pub async fn stop(&self) {
        if !self.is_dead() {
            let _ = self.request("shutdown", Value::Null, Duration::from_secs(2)).await;
            self.notify("exit", Value::Null);
        }
        let child = self.child.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(mut child) = child
            && tokio::time::timeout(Duration::from_secs(2), child.wait()).await.is_err()
        {
            let _ = child.kill().await;
        }
        // Whatever the reader has seen yet, this server is gone.
        self.shared.die("it was stopped".into());
    }
}

/// Routes one message from the server.
fn dispatch(shared: &Shared, out: &mpsc::UnboundedSender<Vec<u8>>, msg: Value) {
    let method = msg["method"].as_str();
    let id = msg.get("id").cloned();
    match (method, id) {
        (None, Some(id)) => {
            let Some(id) = id.as_i64() else { return };
            let tx = shared.pending.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
            if let Some(tx) = tx {
                let r = if let Some(err) = msg.get("error") {
                    Err(err["message"].as_str().unwrap_or("error").to_string())
                } else {
                    Ok(msg.get("result").cloned().unwrap_or(Value::Null))
                };
                let _ = tx.send(r);
            }
        }
        (Some(method), Some(id)) => {
            let result = match method {
                "workspace/configuration" => {
                    let n = msg["params"]["items"].as_array().map_or(0, Vec::len);
                    Ok(Value::Array(vec![shared.settings.clone(); n]))
                }
                "window/workDoneProgress/create" | "client/registerCapability" | "client/unregisterCapability" => {
                    Ok(Value::Null)
                }
                "workspace/workspaceFolders" => Ok(shared.folders.clone()),
                "window/showMessageRequest" | "window/showDocument" => Ok(Value::Null),
                "workspace/applyEdit" => {
                    Ok(json!({"applied": false, "failureReason": "agentfix does not take edits from language servers"}))
                }
                _ => Err(json!({"code": -32601, "message": format!("agentfix does not handle {method}")})),
            };
            let reply = match result {
                Ok(r) => json!({"jsonrpc": "2.0", "id": id, "result": r}),
                Err(e) => json!({"jsonrpc": "2.0", "id": id, "error": e}),
            };
            let body = reply.to_string();
            let mut bytes = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
            bytes.extend_from_slice(body.as_bytes());
            let _ = out.send(bytes);
        }
        (Some("textDocument/publishDiagnostics"), None) => {
            let p = &msg["params"];
            if let Some(uri) = p["uri"].as_str() {
                let mut map = shared.diagnostics.lock().unwrap_or_else(|e| e.into_inner());
                let entry = map.entry(normalize_uri(uri)).or_default();
                entry.version = p["version"].as_i64();
                entry.items = p["diagnostics"].as_array().cloned().unwrap_or_default();
                entry.at = Some(Instant::now());
                entry.serial += 1;
                drop(map);
                shared.published.notify_waiters();
            }
        }
        _ => {}
    }
}

/// Servers differ in how they escape URIs (`%3A` vs `:`); compare decoded.
pub fn normalize_uri(uri: &str) -> String {
    super::uri::uri_to_path(uri).map(|p| path_to_uri(&p)).unwrap_or_else(|| uri.to_string())
}

/// Reads one framed message; `None` at end of input.
/// Longest stderr line kept (the rest of a longer line is dropped).
const MAX_STDERR_LINE: usize = 2048;

/// Reads a server's stderr to its end, in bounded memory whatever it
/// writes: lines are cut at [`MAX_STDERR_LINE`] bytes (marked with `…`),
/// invalid UTF-8 is replaced, and reading goes on after both, so a server
/// never blocks on a full stderr pipe.
async fn drain_stderr<R: tokio::io::AsyncRead + Unpin>(mut reader: R, mut on_line: impl FnMut(&str)) {
    use tokio::io::AsyncReadExt;
    let mut buf = vec![0u8; 8192];
    let mut line: Vec<u8> = Vec::new();
    let mut cut = false;
    let mut emit = |line: &mut Vec<u8>, cut: &mut bool| {
        let mut text = String::from_utf8_lossy(line).into_owned();
        if *cut {
            text.push('…');
        }
        on_line(text.trim_end_matches('\r'));
        line.clear();
        *cut = false;
    };
    loop {
        let n = match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for piece in buf[..n].split_inclusive(|b| *b == b'\n') {
            let (body, ends) = match piece.strip_suffix(b"\n") {
                Some(body) => (body, true),
                None => (piece, false),
            };
            let room = MAX_STDERR_LINE.saturating_sub(line.len());
            line.extend_from_slice(&body[..body.len().min(room)]);
            cut |= body.len() > room;
            if ends {
                emit(&mut line, &mut cut);
            }
        }
    }
    if !line.is_empty() || cut {
        emit(&mut line, &mut cut);
    }
}

async fn read_message<R: tokio::io::AsyncBufRead + Unpin>(reader: &mut R) -> Result<Option<Value>, String> {
    let mut length: Option<usize> = None;
    let mut any = false;
    loop {
        let mut line = Vec::new();
        let n = (&mut *reader)
            .take(MAX_HEADER_LINE as u64)
            .read_until(b'\n', &mut line)
            .await
            .map_err(|e| e.to_string())?;
        if n == 0 {
            return if any { Err("input ended inside headers".into()) } else { Ok(None) };
        }
        if !line.ends_with(b"\n") {
            return Err("a header line is too long".into());
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end();
        if text.is_empty() {
            if any {
                break;
            }
            continue;
        }
        any = true;
        if let Some((k, v)) = text.split_once(':')
            && k.trim().eq_ignore_ascii_case("content-length")
        {
            length = Some(v.trim().parse().map_err(|_| format!("bad Content-Length `{}`", v.trim()))?);
        }
    }
    let len = length.ok_or("no Content-Length")?;
    if len > MAX_MESSAGE {
        return Err(format!("a message of {len} bytes is too large"));
    }
    let mut body = vec![0; len];
    reader.read_exact(&mut body).await.map_err(|e| e.to_string())?;
    serde_json::from_slice(&body).map(Some).map_err(|e| format!("not JSON: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_are_read_and_limits_enforced() {
        let body = r#"{"jsonrpc":"2.0","id":1,"result":null}"#;
        let input = format!("Content-Length: {}\r\nContent-Type: x\r\n\r\n{body}", body.len());
        let mut r = BufReader::new(input.as_bytes());
        assert_eq!(read_message(&mut r).await.unwrap().unwrap()["id"], 1);
        assert_eq!(read_message(&mut r).await.unwrap(), None);
        let huge = format!("Content-Length: {}\r\n\r\n", MAX_MESSAGE + 1);
        assert!(read_message(&mut BufReader::new(huge.as_bytes())).await.unwrap_err().contains("too large"));
        let long = "X".repeat(MAX_HEADER_LINE + 10);
        assert!(read_message(&mut BufReader::new(long.as_bytes())).await.is_err());
        assert!(
            read_message(&mut BufReader::new(&b"Content-Length: 5\r\n\r\n{nope"[..]))
                .await
                .unwrap_err()
                .starts_with("not JSON")
        );
    }

    #[tokio::test]
    async fn stderr_is_drained_in_bounded_memory_whatever_it_holds() {
        // 64 MB without a line break, then invalid UTF-8, then ordinary lines.
        let mut data = vec![b'x'; 64 * 1024 * 1024];
        data.extend_from_slice(b"\n\xff\xfe bad\r\nok\nlast");
        let mut lines = Vec::new();
        let mut longest = 0;
        drain_stderr(&data[..], |l| {
            longest = longest.max(l.len());
            lines.push(l.chars().take(5).collect::<String>());
        })
        .await;
        assert_eq!(lines, ["xxxxx", "\u{fffd}\u{fffd} ba", "ok", "last"]);
        assert!(longest <= MAX_STDERR_LINE + '…'.len_utf8(), "{longest}");
    }
}
