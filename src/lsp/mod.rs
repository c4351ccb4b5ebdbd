//! The Language Server Protocol face of agentfix: the only module that knows
//! tower-lsp-server and LSP types.
//!
//! - `ordered`: wraps the service so that document notifications are applied
//!   in wire order and panics in handlers become error responses;
//! - `server`: the `LanguageServer` implementation (initialize, code actions,
//!   configuration);
//! - `run`: the `agentfix.fix` command, from arguments to `workspace/applyEdit`;
//! - `progress`: `$/progress` reporting; `convert`: type conversions;
//! - `transport`: keeps malformed input from stopping the server.

mod approval;
mod convert;
mod ordered;
mod progress;
mod proposal;
mod run;
mod server;
mod transport;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tower_lsp_server::ls_types::ClientCapabilities;
use tower_lsp_server::{Client, LspService, Server};

use crate::config::{Config, Settings};
use crate::documents::{Documents, PositionEncoding};
use crate::downstream::{DiagnosticsWait, Downstream};
use crate::workspace::Overlay;

/// The command the code actions carry.
pub const FIX_COMMAND: &str = "agentfix.fix";

/// How many requests the server works on at once. Runs of `agentfix.fix`
/// each hold one slot while they last, so this is far above the default 4:
/// other requests must never wait behind runs.
const CONCURRENCY: usize = 64;

/// How long the end of the session (after `exit`, or when stdin closes) may
/// take in all: runs cancelled and ended, their commands stopped, the
/// downstream servers stopped.
const END_BUDGET: Duration = Duration::from_millis(900);
/// Of which the runs may take this long to end.
const END_RUNS: Duration = Duration::from_millis(500);

/// State shared by the service wrapper and the handlers. Locks are std
/// locks, never held across an `.await`.
pub struct Session {
    pub docs: Arc<Documents>,
    /// Downstream language servers, with the configuration they were made for.
    downstream: tokio::sync::Mutex<Option<(Config, Arc<Downstream>)>>,
    state: RwLock<SessionState>,
    /// Cancellation of runs in progress, by progress token.
    runs: Mutex<HashMap<String, CancellationToken>>,
    /// Held for writing while `workspace/configuration` is pulled, so that a
    /// run never starts with the settings of before the pull.
    config_gate: tokio::sync::RwLock<()>,
    /// Commands approved "Always in this workspace": (root, name).
    always: Mutex<std::collections::HashSet<(PathBuf, String)>>,
    /// Runs in progress, by id.
    active: Mutex<HashMap<u64, RunEntry>>,
    next_run: AtomicU64,
    /// The client, for what the service wrapper must tell the user.
    client: OnceLock<Client>,
    /// Cancelled when the session ends (`exit`, or stdin closed); every
    /// run's cancellation is a child of it.
    ending: CancellationToken,
    /// Texts of large `didOpen`s, set aside by the transport (see
    /// `transport::Stash`).
    stash: Arc<transport::Stash>,
    /// Whether `shutdown` was received (the exit code depends on it).
    shut_down: AtomicBool,
}

/// A run in progress: its target, its overlay (to see what it edits) and
/// its cancellation.
struct RunEntry {
    target: PathBuf,
    overlay: Arc<Overlay>,
    cancel: CancellationToken,
}

#[derive(Default, Clone)]
struct SessionState {
    encoding: PositionEncoding,
    caps: ClientCapabilities,
    roots: Vec<PathBuf>,
    /// `initializationOptions`.
    init_settings: Settings,
    /// The `agentfix` section from `workspace/configuration`, or the
    /// `settings` of `workspace/didChangeConfiguration`; wins over the above.
    pulled_settings: Settings,
}

impl SessionState {
    /// The editor's settings layer of the configuration.
    fn editor_settings(&self) -> Settings {
        self.init_settings.merged(&self.pulled_settings)
    }
}

impl Session {
    fn new() -> Self {
        Self {
            docs: Arc::new(Documents::new()),
            downstream: tokio::sync::Mutex::new(None),
            state: RwLock::new(SessionState::default()),
            runs: Mutex::new(HashMap::new()),
            active: Mutex::new(HashMap::new()),
            always: Mutex::new(std::collections::HashSet::new()),
            config_gate: tokio::sync::RwLock::new(()),
            next_run: AtomicU64::new(1),
            client: OnceLock::new(),
            ending: CancellationToken::new(),
            stash: Arc::new(transport::Stash::default()),
            shut_down: AtomicBool::new(false),
        }
    }

    /// A new run's cancellation: cancelled with the session too.
    fn run_cancellation(&self) -> CancellationToken {
        self.ending.child_token()
    }

    fn state(&self) -> SessionState {
        self.state.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn update(&self, f: impl FnOnce(&mut SessionState)) {
        f(&mut self.state.write().unwrap_or_else(|e| e.into_inner()));
    }

    /// Reads the state under its lock, without cloning it (for the hot
    /// paths: code actions, document sync).
    fn read_state<T>(&self, f: impl FnOnce(&SessionState) -> T) -> T {
        f(&self.state.read().unwrap_or_else(|e| e.into_inner()))
    }

    fn encoding(&self) -> PositionEncoding {
        self.read_state(|s| s.encoding)
    }

    fn register_run(&self, token: &str, cancel: CancellationToken) {
        self.runs.lock().unwrap_or_else(|e| e.into_inner()).insert(token.to_string(), cancel);
    }

    fn unregister_run(&self, token: &str) {
        self.runs.lock().unwrap_or_else(|e| e.into_inner()).remove(token);
    }

    /// Cancels the run reporting progress on `token`; false if none.
    fn cancel_run(&self, token: &str) -> bool {
        match self.runs.lock().unwrap_or_else(|e| e.into_inner()).get(token) {
            Some(c) => {
                c.cancel();
                true
            }
            None => false,
        }
    }

    fn cancel_all_runs(&self) {
        for c in self.runs.lock().unwrap_or_else(|e| e.into_inner()).values() {
            c.cancel();
        }
    }

    /// The downstream servers for `config` (recreated when the
    /// `languageServers` setting or the roots changed).
    async fn downstream(&self, config: &Config, roots: &[PathBuf]) -> Arc<Downstream> {
        let mut slot = self.downstream.lock().await;
        if let Some((old, ds)) = slot.as_ref()
            && old.language_servers == config.language_servers
            && old.diagnostics_settle == config.diagnostics_settle
            && old.diagnostics_timeout == config.diagnostics_timeout
            && old.language_server_timeout == config.language_server_timeout
            && old.default_language_servers == config.default_language_servers
            && old.env_allow == config.env_allow
            && ds.roots() == roots
        {
            return ds.clone();
        }
        if let Some((_, old)) = slot.take() {
            old.stop_all().await;
        }
        let wait = DiagnosticsWait {
            settle: config.diagnostics_settle,
            max: config.diagnostics_timeout,
            query: config.language_server_timeout,
        };
        let ds = Arc::new(
            Downstream::new(config.language_servers.clone(), roots.to_vec(), wait)
                .with_defaults(config.default_language_servers)
                .with_env_allow(config.env_allow.clone()),
        );
        *slot = Some((config.clone(), ds.clone()));
        ds
    }

    async fn stop_downstream(&self) {
        if let Some((_, ds)) = self.downstream.lock().await.take() {
            ds.stop_all().await;
        }
    }

    /// The run that already targets or has edited `path`, if any: a second
    /// run on such a file is refused (its edits would race the first's). A
    /// cancelled run proposes nothing, so it holds no file while it winds down.
    fn busy_with(&self, path: &std::path::Path) -> Option<u64> {
        let active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        active
            .iter()
            .filter(|(_, run)| !run.cancel.is_cancelled())
            .find(|(_, run)| run.target == path || run.overlay.changes().iter().any(|c| c.path == path))
            .map(|(id, _)| *id)
    }

    fn set_active(&self, id: u64, target: PathBuf, overlay: Arc<Overlay>, cancel: CancellationToken) {
        self.active.lock().unwrap_or_else(|e| e.into_inner()).insert(id, RunEntry { target, overlay, cancel });
    }

    fn has_active(&self) -> bool {
        !self.active.lock().unwrap_or_else(|e| e.into_inner()).is_empty()
    }

    fn clear_active(&self, id: u64) {
        self.active.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
    }

    fn always_allowed(&self, root: &std::path::Path, name: &str) -> bool {
        self.always.lock().unwrap_or_else(|e| e.into_inner()).contains(&(root.to_path_buf(), name.to_string()))
    }

    fn allow_always(&self, root: &std::path::Path, name: &str) {
        self.always.lock().unwrap_or_else(|e| e.into_inner()).insert((root.to_path_buf(), name.to_string()));
    }

    fn next_run_id(&self) -> u64 {
        self.next_run.fetch_add(1, Ordering::Relaxed)
    }
}

/// Serves LSP on stdin/stdout until the client says `exit` or closes stdin;
/// returns the process exit code: 0 when `shutdown` came first, else 1 (as
/// LSP says for `exit`; the same for a client that just went away).
///
/// Either way the session ends at once, without waiting for the client to
/// send anything else: every run is cancelled (its model request dropped,
/// its commands stopped) and the downstream servers are stopped, all within
/// [`END_BUDGET`]. The caller must not wait for the runtime's blocking
/// threads afterwards (stdin is read on a thread of its own, see
/// [`stdin_reader`]).
pub async fn serve_stdio() -> u8 {
    let session = Arc::new(Session::new());
    let (service, socket) = LspService::build(|client| {
        let _ = session.client.set(client.clone());
        server::Backend::new(client, session.clone())
    })
    .custom_method("window/workDoneProgress/cancel", server::Backend::work_done_progress_cancel)
    .finish();
    let service = ordered::Ordered::new(service, session.clone());
    // Malformed input must not stop the transport: stdin goes through the
    // sanitizer, which hands the server only well-formed messages.
    let (to_server, from_sanitizer) = tokio::io::duplex(1 << 16);
    let input_ended = CancellationToken::new();
    {
        let input_ended = input_ended.clone();
        let stash = session.stash.clone();
        tokio::spawn(async move {
            transport::sanitize_with(stdin_reader(), to_server, Some(stash)).await;
            input_ended.cancel();
        });
    }
    let serve = Server::new(from_sanitizer, tokio::io::stdout(), socket).concurrency_level(CONCURRENCY).serve(service);
    tokio::pin!(serve);
    let served = tokio::select! {
        () = &mut serve => true,
        () = session.ending.cancelled() => false,
        () = input_ended.cancelled() => false,
    };
    let why = if session.ending.is_cancelled() { "exit" } else { "end of input" };
    tracing::info!("{why}: ending the session");
    let end = end_session(&session);
    if served {
        end.await;
    } else {
        // Keep serving meanwhile: the cancelled requests' answers go out.
        let (_, _) = tokio::join!(end, tokio::time::timeout(END_BUDGET, &mut serve));
    }
    if session.shut_down.load(Ordering::SeqCst) { 0 } else { 1 }
}

/// Cancels every run, waits a little for them to end (dropping a run's
/// model request and commands stops them), and stops the downstream servers.
async fn end_session(session: &Session) {
    let deadline = tokio::time::Instant::now() + END_BUDGET;
    session.ending.cancel();
    session.cancel_all_runs();
    let runs_deadline = tokio::time::Instant::now() + END_RUNS;
    while session.has_active() && tokio::time::Instant::now() < runs_deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    if session.has_active() {
        tracing::warn!("runs still ending; the process exits without them");
    }
    // A dropped command is stopped by a task of its own: let it start.
    tokio::time::sleep(Duration::from_millis(50)).await;
    if tokio::time::timeout_at(deadline, session.stop_downstream()).await.is_err() {
        tracing::warn!("downstream servers did not stop in time; they are killed");
    }
}

/// stdin, read on a thread of its own. tokio's stdin reads on the
/// runtime's blocking pool, and a runtime does not shut down while a read
/// there waits for a client that keeps its end open; this thread is simply
/// left behind when the process exits.
fn stdin_reader() -> tokio::io::DuplexStream {
    use std::io::Read;
    use tokio::io::AsyncWriteExt;
    let (mut tx, rx) = tokio::io::duplex(1 << 16);
    let spawned = std::thread::Builder::new().name("agentfix-stdin".into()).spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = match stdin.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::warn!("stdin read failed: {e}");
                    break;
                }
            };
            if futures::executor::block_on(tx.write_all(&buf[..n])).is_err() {
                break;
            }
        }
        let _ = futures::executor::block_on(tx.shutdown());
    });
    if let Err(e) = spawned {
        tracing::error!("cannot start the stdin thread: {e}");
    }
    rx
}
