//! A small JSON-RPC/LSP client over a child process's stdio: one task reads,
//! one writes, one drains stderr; pending requests by id, each with a
//! timeout; bounded header and message sizes; the server→client requests
//! servers expect are answered; `kill_on_drop`, and `shutdown`/`exit` on the
//! way out. The envelope (id, method, params, result, error) is a
//! `serde_json::Value`; params and results are LSP types (`ls_types`), and a
//! result of the wrong shape is a `Malformed` error for its request. No LSP
//! type leaves `downstream`.

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentfix_lsp_framing::{Frame, Frames};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};
use tokio::sync::{Notify, mpsc, oneshot};
use tokio_util::compat::TokioAsyncReadCompatExt;
use tower_lsp_server::ls_types::notification::{self, Notification};
use tower_lsp_server::ls_types::request::{self, Request};
use tower_lsp_server::ls_types::{self as lsp};

use super::error::DownstreamError;
use super::uri::path_to_uri;

/// Bytes of stderr kept for error messages.
const STDERR_TAIL: usize = 4096;

/// Diagnostics a server published for one document.
#[derive(Debug, Clone, Default)]
pub(super) struct Published {
    pub version: Option<i32>,
    pub items: Vec<lsp::Diagnostic>,
    pub at: Option<Instant>,
    /// Counts publications, so waiters can tell a new one from an old one.
    pub serial: u64,
}

/// Why a request got no result.
#[derive(Debug)]
enum Failure {
    /// A JSON-RPC error response.
    Error { code: i64, message: String },
    /// The server died first.
    Died(String),
}

type Pending = Arc<Mutex<HashMap<i64, oneshot::Sender<Result<Value, Failure>>>>>;

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
    folders: Vec<lsp::WorkspaceFolder>,
}

impl Shared {
    fn new(settings: Value, folders: Vec<lsp::WorkspaceFolder>) -> Self {
        Shared {
            pending: Arc::new(Mutex::new(HashMap::new())),
            diagnostics: Mutex::new(HashMap::new()),
            published: Notify::new(),
            dead: AtomicBool::new(false),
            death: Mutex::new(None),
            stderr: Mutex::new(String::new()),
            settings,
            folders,
        }
    }

    fn die(&self, why: String) {
        if !self.dead.swap(true, Ordering::SeqCst) {
            *self.death.lock().unwrap_or_else(|e| e.into_inner()) = Some(why.clone());
        }
        let pending: Vec<_> = self.pending.lock().unwrap_or_else(|e| e.into_inner()).drain().collect();
        for (_, tx) in pending {
            let _ = tx.send(Err(Failure::Died(why.clone())));
        }
        self.published.notify_waiters();
    }

    /// Keeps the last [`STDERR_TAIL`] bytes of the server's stderr.
    fn stderr_line(&self, line: &str) {
        let mut tail = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        tail.push_str(line);
        tail.push('\n');
        if tail.len() > STDERR_TAIL {
            let cut = tail.len() - STDERR_TAIL;
            let cut = (cut..tail.len()).find(|i| tail.is_char_boundary(*i)).unwrap_or(tail.len());
            tail.drain(..cut);
        }
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
    capabilities: lsp::ServerCapabilities,
}

/// Spawns the server process with piped stdio and without credentials.
fn spawn(command: &[String], name: &str, root: &Path, env_allow: &[String]) -> Result<Child, DownstreamError> {
    let (program, args) =
        command.split_first().ok_or_else(|| DownstreamError::Spawn(format!("{name}: empty command")))?;
    let mut cmd = Command::new(program);
    // A language server never sees the provider key or other credentials.
    for var in crate::secrets::credential_vars(env_allow) {
        cmd.env_remove(var);
    }
    cmd.args(args)
        .current_dir(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| DownstreamError::Spawn(format!("cannot start `{}`: {e}", command.join(" "))))
}

/// 10 ms steps the writer waits, after a failed write, for the reader to
/// report the server's exit (the truer reason).
const WRITE_FAILURE_GRACE_STEPS: u32 = 20;

/// Writes queued frames to the server's stdin.
fn spawn_writer(shared: Arc<Shared>, mut stdin: ChildStdin, mut out_rx: mpsc::UnboundedReceiver<Vec<u8>>) {
    tokio::spawn(async move {
        while let Some(bytes) = out_rx.recv().await {
            if stdin.write_all(&bytes).await.is_err() || stdin.flush().await.is_err() {
                // Almost always the server exited: give the reader, which
                // sees its stdout end, a moment to say so first.
                for _ in 0..WRITE_FAILURE_GRACE_STEPS {
                    if shared.dead.load(Ordering::SeqCst) {
                        break;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
                shared.die("its stdin closed".into());
                break;
            }
        }
    });
}

/// Reads and dispatches the server's messages until its stdout ends.
fn spawn_reader(shared: Arc<Shared>, out: mpsc::UnboundedSender<Vec<u8>>, stdout: ChildStdout) {
    tokio::spawn(async move {
        let mut frames = Frames::new(futures::io::BufReader::new(stdout.compat()));
        loop {
            match read_message(&mut frames).await {
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

/// Drains the server's stderr into the log and the kept tail.
fn spawn_stderr(shared: Arc<Shared>, name: String, stderr: ChildStderr) {
    tokio::spawn(async move {
        drain_stderr(stderr, |line| {
            tracing::debug!(server = %name, "stderr: {line}");
            shared.stderr_line(line);
        })
        .await
    });
}

/// What agentfix tells a server in `initialize`.
#[allow(deprecated)] // rootUri and rootPath: older servers still read them.
fn initialize_params(
    root: &Path,
    root_uri: lsp::Uri,
    folders: Vec<lsp::WorkspaceFolder>,
    initialization_options: Option<Value>,
) -> lsp::InitializeParams {
    let capabilities = lsp::ClientCapabilities {
        general: Some(lsp::GeneralClientCapabilities {
            position_encodings: Some(vec![lsp::PositionEncodingKind::UTF8, lsp::PositionEncodingKind::UTF16]),
            ..Default::default()
        }),
        workspace: Some(lsp::WorkspaceClientCapabilities {
            // The shapes `decode::quick_fixes` reads a quick fix's edit in.
            workspace_edit: Some(lsp::WorkspaceEditClientCapabilities {
                document_changes: Some(true),
                resource_operations: Some(vec![
                    lsp::ResourceOperationKind::Create,
                    lsp::ResourceOperationKind::Rename,
                    lsp::ResourceOperationKind::Delete,
                ]),
                ..Default::default()
            }),
            configuration: Some(true),
            workspace_folders: Some(true),
            symbol: Some(lsp::WorkspaceSymbolClientCapabilities::default()),
            ..Default::default()
        }),
        window: Some(lsp::WindowClientCapabilities { work_done_progress: Some(true), ..Default::default() }),
        text_document: Some(lsp::TextDocumentClientCapabilities {
            synchronization: Some(lsp::TextDocumentSyncClientCapabilities {
                did_save: Some(false),
                dynamic_registration: Some(false),
                ..Default::default()
            }),
            document_symbol: Some(lsp::DocumentSymbolClientCapabilities {
                hierarchical_document_symbol_support: Some(true),
                ..Default::default()
            }),
            definition: Some(lsp::GotoCapability { link_support: Some(false), ..Default::default() }),
            references: Some(lsp::ReferenceClientCapabilities::default()),
            hover: Some(lsp::HoverClientCapabilities {
                content_format: Some(vec![lsp::MarkupKind::PlainText, lsp::MarkupKind::Markdown]),
                ..Default::default()
            }),
            // Where the conflicting definition is, the rule's page: the
            // first message shows both (`fix::prompt`).
            publish_diagnostics: Some(lsp::PublishDiagnosticsClientCapabilities {
                version_support: Some(true),
                related_information: Some(true),
                code_description_support: Some(true),
                ..Default::default()
            }),
            // Quick fixes as literals with their edits (no resolve: the edit
            // comes in the answer), shown to the model, never applied.
            code_action: Some(lsp::CodeActionClientCapabilities {
                code_action_literal_support: Some(lsp::CodeActionLiteralSupport {
                    code_action_kind: lsp::CodeActionKindLiteralSupport {
                        value_set: vec![lsp::CodeActionKind::QUICKFIX.as_str().to_string()],
                    },
                }),
                is_preferred_support: Some(true),
                disabled_support: Some(true),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    lsp::InitializeParams {
        process_id: Some(std::process::id()),
        client_info: Some(lsp::ClientInfo { name: "agentfix".into(), version: Some(env!("CARGO_PKG_VERSION").into()) }),
        root_uri: Some(root_uri),
        root_path: Some(root.to_string_lossy().into_owned()),
        workspace_folders: Some(folders),
        initialization_options,
        capabilities,
        ..Default::default()
    }
}

/// Decodes the result of request `R`; a wrong shape is `Malformed`.
pub(super) fn decode_result<R: Request>(server: &str, result: Value) -> Result<R::Result, DownstreamError> {
    serde_json::from_value(result).map_err(|e| DownstreamError::Malformed {
        server: server.to_string(),
        method: R::METHOD.to_string(),
        why: e.to_string(),
    })
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
    ) -> Result<Client, DownstreamError> {
        let root_uri = super::decode::uri_of(root).ok_or_else(|| DownstreamError::BadPath(root.to_path_buf()))?;
        let mut child = spawn(command, name, root, env_allow)?;
        let folder_name = root.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let folders = vec![lsp::WorkspaceFolder { uri: root_uri.clone(), name: folder_name }];
        let shared = Arc::new(Shared::new(settings, folders.clone()));
        let (out, out_rx) = mpsc::unbounded_channel::<Vec<u8>>();
        let missing = |pipe: &str| DownstreamError::Spawn(format!("no {pipe}"));
        let stdin = child.stdin.take().ok_or_else(|| missing("stdin"))?;
        let stdout = child.stdout.take().ok_or_else(|| missing("stdout"))?;
        let stderr = child.stderr.take().ok_or_else(|| missing("stderr"))?;
        spawn_writer(shared.clone(), stdin, out_rx);
        spawn_reader(shared.clone(), out.clone(), stdout);
        spawn_stderr(shared.clone(), name.to_string(), stderr);
        let client = Client {
            name: name.to_string(),
            shared,
            out,
            next_id: AtomicI64::new(1),
            child: Mutex::new(Some(child)),
            capabilities: lsp::ServerCapabilities::default(),
        };
        let params = initialize_params(root, root_uri, folders, initialization_options);
        let result = client.request::<request::Initialize>(params, timeout).await?;
        client.notify::<notification::Initialized>(lsp::InitializedParams {});
        Ok(Client { capabilities: result.capabilities, ..client })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the server counts positions in UTF-8 bytes (else UTF-16).
    pub fn utf8(&self) -> bool {
        self.capabilities.position_encoding.as_ref() == Some(&lsp::PositionEncodingKind::UTF8)
    }

    /// Whether the server answers `textDocument/codeAction`.
    pub fn offers_code_actions(&self) -> bool {
        match &self.capabilities.code_action_provider {
            Some(lsp::CodeActionProviderCapability::Simple(on)) => *on,
            Some(lsp::CodeActionProviderCapability::Options(_)) => true,
            None => false,
        }
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

    fn send(&self, msg: &Outgoing<'_>) {
        if self.out.send(frame(msg)).is_err() {
            self.shared.die("its writer stopped".into());
        }
    }

    /// Sends notification `N`.
    pub(super) fn notify<N: Notification>(&self, params: N::Params) {
        let params = serde_json::to_value(params).unwrap_or(Value::Null);
        self.send(&Outgoing::notification(N::METHOD, params));
    }

    /// Sends request `R` and waits for its result at most `timeout`. On a
    /// timeout the request is cancelled with `$/cancelRequest`.
    pub(super) async fn request<R: Request>(
        &self,
        params: R::Params,
        timeout: Duration,
    ) -> Result<R::Result, DownstreamError> {
        let params = serde_json::to_value(params).map_err(|e| DownstreamError::Malformed {
            server: self.name.clone(),
            method: R::METHOD.to_string(),
            why: format!("cannot encode the request: {e}"),
        })?;
        let result = self.request_value(R::METHOD, params, timeout).await?;
        decode_result::<R>(&self.name, result)
    }

    async fn request_value(&self, method: &str, params: Value, timeout: Duration) -> Result<Value, DownstreamError> {
        if self.is_dead() {
            return Err(DownstreamError::NotRunning { server: self.name.clone(), why: self.death() });
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.shared.pending.lock().unwrap_or_else(|e| e.into_inner()).insert(id, tx);
        self.send(&Outgoing::request(id, method, params));
        let (server, method) = (self.name.clone(), method.to_string());
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(Ok(result))) => Ok(result),
            Ok(Ok(Err(Failure::Error { code, message }))) => {
                Err(DownstreamError::ServerError { server, method, code, message })
            }
            Ok(Ok(Err(Failure::Died(why)))) => Err(DownstreamError::Crashed { server, method, why }),
            Ok(Err(_)) => Err(DownstreamError::Dropped { server, method }),
            Err(_) => {
                self.shared.pending.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
                let id = i32::try_from(id)
                    .map(lsp::NumberOrString::Number)
                    .unwrap_or_else(|_| lsp::NumberOrString::String(id.to_string()));
                self.notify::<notification::Cancel>(lsp::CancelParams { id });
                Err(DownstreamError::Timeout { server, method, secs: timeout.as_secs_f32() })
            }
        }
    }

    /// The diagnostics last published for `uri`.
    pub(super) fn published(&self, uri: &str) -> Published {
        self.shared.diagnostics.lock().unwrap_or_else(|e| e.into_inner()).get(uri).cloned().unwrap_or_default()
    }

    /// Waits for the diagnostics of `uri` after the change that made
    /// `version` (sent at `since`): the first publication for that version
    /// (or, from servers that do not say, any publication after `since`),
    /// then `quiet` without a newer one, `max` at most. `None` if nothing
    /// came in time.
    pub(super) async fn settled_diagnostics(
        &self,
        uri: &str,
        version: i32,
        since: Instant,
        quiet: Duration,
        max: Duration,
    ) -> Option<Vec<lsp::Diagnostic>> {
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
            let _ = self.request::<request::Shutdown>((), Duration::from_secs(2)).await;
            self.notify::<notification::Exit>(());
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

/// The JSON-RPC envelope agentfix sends: a request, a notification or a
/// response to a server's request. Params and results inside are LSP types,
/// encoded by the caller.
#[derive(Debug, Serialize)]
struct Outgoing<'a> {
    jsonrpc: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    method: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<RpcError>,
}

impl<'a> Outgoing<'a> {
    fn new() -> Self {
        Self { jsonrpc: "2.0", id: None, method: None, params: None, result: None, error: None }
    }

    fn request(id: i64, method: &'a str, params: Value) -> Self {
        Self { id: Some(id.into()), method: Some(method), params: Some(params), ..Self::new() }
    }

    fn notification(method: &'a str, params: Value) -> Self {
        Self { method: Some(method), params: Some(params), ..Self::new() }
    }

    fn response(id: Value, outcome: Result<Value, RpcError>) -> Self {
        match outcome {
            // A result of `null` is still a result: the key must be there.
            Ok(result) => Self { id: Some(id), result: Some(result), ..Self::new() },
            Err(error) => Self { id: Some(id), error: Some(error), ..Self::new() },
        }
    }
}

/// A JSON-RPC message from the server, as far as routing needs it. Lenient:
/// a server's sloppy error object still ends its request.
#[derive(Debug, Deserialize)]
struct Incoming {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    params: Option<Value>,
    #[serde(default)]
    result: Option<Value>,
    #[serde(default)]
    error: Option<RpcError>,
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct RpcError {
    #[serde(default)]
    code: i64,
    #[serde(default = "RpcError::unnamed")]
    message: String,
}

impl RpcError {
    fn unnamed() -> String {
        "error".into()
    }
}

/// One message with its `Content-Length` header.
fn frame(msg: &impl Serialize) -> Vec<u8> {
    agentfix_lsp_framing::frame(serde_json::to_string(msg).unwrap_or_default().as_bytes())
}

/// Routes one message from the server.
fn dispatch(shared: &Shared, out: &mpsc::UnboundedSender<Vec<u8>>, msg: Value) {
    let Ok(msg) = serde_json::from_value::<Incoming>(msg) else { return };
    match (msg.method.as_deref(), msg.id) {
        (None, Some(id)) => {
            let Some(id) = id.as_i64() else { return };
            let tx = shared.pending.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
            if let Some(tx) = tx {
                let r = match msg.error {
                    Some(RpcError { code, message }) => Err(Failure::Error { code, message }),
                    None => Ok(msg.result.unwrap_or(Value::Null)),
                };
                let _ = tx.send(r);
            }
        }
        (Some(method), Some(id)) => {
            let reply = Outgoing::response(id, answer(shared, method, msg.params.unwrap_or(Value::Null)));
            let _ = out.send(frame(&reply));
        }
        (Some(notification::PublishDiagnostics::METHOD), None) => {
            match serde_json::from_value::<lsp::PublishDiagnosticsParams>(msg.params.unwrap_or(Value::Null)) {
                Ok(p) => publish(shared, p),
                Err(e) => tracing::warn!("ignoring malformed publishDiagnostics: {e}"),
            }
        }
        _ => {}
    }
}

/// Keeps the diagnostics a server published and wakes the waiters.
fn publish(shared: &Shared, p: lsp::PublishDiagnosticsParams) {
    let mut map = shared.diagnostics.lock().unwrap_or_else(|e| e.into_inner());
    let entry = map.entry(normalize_uri(p.uri.as_str())).or_default();
    entry.version = p.version;
    entry.items = p.diagnostics;
    entry.at = Some(Instant::now());
    entry.serial += 1;
    drop(map);
    shared.published.notify_waiters();
}

/// The result of request `R`, encoded.
fn reply<R: Request>(result: R::Result) -> Result<Value, RpcError> {
    Ok(serde_json::to_value(result).unwrap_or(Value::Null))
}

/// Answers a server→client request (`Err`: a JSON-RPC error object).
fn answer(shared: &Shared, method: &str, params: Value) -> Result<Value, RpcError> {
    use request::{
        ApplyWorkspaceEdit, RegisterCapability, ShowDocument, ShowMessageRequest, UnregisterCapability,
        WorkDoneProgressCreate, WorkspaceConfiguration, WorkspaceFoldersRequest,
    };
    match method {
        WorkspaceConfiguration::METHOD => {
            // The same settings for every item (lenient: no items, none).
            let n = serde_json::from_value::<lsp::ConfigurationParams>(params).map_or(0, |p| p.items.len());
            reply::<WorkspaceConfiguration>(vec![shared.settings.clone(); n])
        }
        WorkDoneProgressCreate::METHOD => reply::<WorkDoneProgressCreate>(()),
        RegisterCapability::METHOD => reply::<RegisterCapability>(()),
        UnregisterCapability::METHOD => reply::<UnregisterCapability>(()),
        WorkspaceFoldersRequest::METHOD => reply::<WorkspaceFoldersRequest>(Some(shared.folders.clone())),
        ShowMessageRequest::METHOD => reply::<ShowMessageRequest>(None),
        ShowDocument::METHOD => reply::<ShowDocument>(lsp::ShowDocumentResult { success: false }),
        ApplyWorkspaceEdit::METHOD => reply::<ApplyWorkspaceEdit>(lsp::ApplyWorkspaceEditResponse {
            applied: false,
            failure_reason: Some("agentfix does not take edits from language servers".into()),
            failed_change: None,
        }),
        _ => Err(RpcError { code: -32601, message: format!("agentfix does not handle {method}") }),
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

/// The next message from a server; `None` when its stdout ended. Any
/// framing fault (the limits are the framer's: 8 KB header lines, 64 MB
/// bodies) or a body that is not JSON ends the connection.
async fn read_message<R: futures::io::AsyncBufRead + Unpin>(frames: &mut Frames<R>) -> Result<Option<Value>, String> {
    match frames.next_frame().await.map_err(|e| e.to_string())? {
        None => Ok(None),
        Some(Frame::Broken(broken)) => Err(broken.to_string()),
        Some(Frame::Body(body)) => serde_json::from_slice(&body).map(Some).map_err(|e| format!("not JSON: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_envelope_is_json_rpc_and_a_null_result_is_still_sent() {
        let v = |o: &Outgoing| serde_json::to_value(o).unwrap();
        assert_eq!(
            v(&Outgoing::request(3, "textDocument/hover", json!({"a": 1}))),
            json!({"jsonrpc": "2.0", "id": 3, "method": "textDocument/hover", "params": {"a": 1}})
        );
        assert_eq!(
            v(&Outgoing::notification("exit", Value::Null)),
            json!({"jsonrpc": "2.0", "method": "exit", "params": null})
        );
        assert_eq!(
            v(&Outgoing::response(json!("x"), Ok(Value::Null))),
            json!({"jsonrpc": "2.0", "id": "x", "result": null})
        );
        let error = RpcError { code: -32601, message: "no".into() };
        assert_eq!(
            v(&Outgoing::response(json!(4), Err(error))),
            json!({"jsonrpc": "2.0", "id": 4, "error": {"code": -32601, "message": "no"}})
        );
        // A sloppy error object from a server still reads.
        let m: Incoming = serde_json::from_value(json!({"id": 1, "error": {}})).unwrap();
        assert_eq!(m.error, Some(RpcError { code: 0, message: "error".into() }));
    }

    #[tokio::test]
    async fn frames_are_read_and_limits_enforced() {
        // Over a tokio reader, as from a child's stdout.
        let frames = |input: Vec<u8>| Frames::new(futures::io::BufReader::new(std::io::Cursor::new(input).compat()));
        let body = r#"{"jsonrpc":"2.0","id":1,"result":null}"#;
        let input = format!("Content-Length: {}\r\nContent-Type: x\r\n\r\n{body}", body.len());
        let mut r = frames(input.into_bytes());
        assert_eq!(read_message(&mut r).await.unwrap().unwrap()["id"], 1);
        assert_eq!(read_message(&mut r).await.unwrap(), None);
        let huge = format!("Content-Length: {}\r\n\r\n", agentfix_lsp_framing::MAX_BODY + 1);
        assert!(read_message(&mut frames(huge.into_bytes())).await.unwrap_err().contains("larger than"));
        let long = "X".repeat(agentfix_lsp_framing::MAX_HEADER_LINE + 10);
        assert!(read_message(&mut frames(long.into_bytes())).await.unwrap_err().contains("header line is longer"));
        let bad = b"Content-Length: 5\r\n\r\n{nope".to_vec();
        assert!(read_message(&mut frames(bad)).await.unwrap_err().starts_with("not JSON"));
    }

    #[test]
    fn malformed_results_are_errors_of_their_query() {
        let e =
            decode_result::<request::GotoDefinition>("fake (python)", json!([{"uri": "file:///a.py"}])).unwrap_err();
        assert!(matches!(e, DownstreamError::Malformed { .. }), "{e:?}");
        assert!(
            e.to_string().starts_with("fake (python) sent a malformed answer to `textDocument/definition`: "),
            "{e}"
        );
        assert!(decode_result::<request::HoverRequest>("s", json!({"contents": 7})).is_err());
        assert!(decode_result::<request::DocumentSymbolRequest>("s", json!({"name": "x"})).is_err());
        assert!(decode_result::<request::WorkspaceSymbolRequest>("s", json!("x")).is_err());
        assert!(decode_result::<request::References>("s", json!([1])).is_err());
        assert!(decode_result::<request::Initialize>("s", json!({"serverInfo": {}})).is_err());
        // `null` is the protocol's "nothing", not an error.
        assert_eq!(decode_result::<request::HoverRequest>("s", Value::Null).unwrap(), None);
        assert_eq!(decode_result::<request::GotoDefinition>("s", Value::Null).unwrap(), None);
        let init = decode_result::<request::Initialize>("s", json!({"capabilities": {"positionEncoding": "utf-8"}}));
        assert_eq!(init.unwrap().capabilities.position_encoding, Some(lsp::PositionEncodingKind::UTF8));
    }

    #[test]
    fn the_client_declares_related_information_code_links_and_quick_fix_literals() {
        let root: lsp::Uri = "file:///w".parse().unwrap();
        let params = initialize_params(Path::new("/w"), root, vec![], None);
        let caps = serde_json::to_value(&params.capabilities).unwrap();
        let published = &caps["textDocument"]["publishDiagnostics"];
        assert_eq!(
            (&published["relatedInformation"], &published["codeDescriptionSupport"]),
            (&json!(true), &json!(true))
        );
        let actions = &caps["textDocument"]["codeAction"];
        assert_eq!(actions["codeActionLiteralSupport"]["codeActionKind"]["valueSet"], json!(["quickfix"]));
        // No resolve: servers put the edit in the answer.
        assert!(actions.get("resolveSupport").is_none(), "{actions}");
        assert_eq!(caps["workspace"]["workspaceEdit"]["documentChanges"], json!(true));
    }

    #[test]
    fn server_requests_are_answered() {
        let root: lsp::Uri = "file:///w".parse().unwrap();
        let shared =
            Shared::new(json!({"python": {"x": 1}}), vec![lsp::WorkspaceFolder { uri: root, name: "w".into() }]);
        let items = json!({"items": [{"section": "python"}, {}]});
        assert_eq!(
            answer(&shared, "workspace/configuration", items),
            Ok(json!([{"python": {"x": 1}}, {"python": {"x": 1}}]))
        );
        assert_eq!(answer(&shared, "workspace/configuration", json!(null)), Ok(json!([])));
        assert_eq!(answer(&shared, "window/workDoneProgress/create", json!({"token": "t"})), Ok(Value::Null));
        assert_eq!(answer(&shared, "client/registerCapability", json!({"registrations": []})), Ok(Value::Null));
        assert_eq!(
            answer(&shared, "workspace/workspaceFolders", Value::Null),
            Ok(json!([{"uri": "file:///w", "name": "w"}]))
        );
        let applied = answer(&shared, "workspace/applyEdit", json!({})).unwrap();
        assert_eq!(applied["applied"], false);
        assert_eq!(answer(&shared, "x/unknown", Value::Null).unwrap_err().code, -32601);
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
