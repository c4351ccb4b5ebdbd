//! The state of one LSP session, shared by the service wrapper (`ordered`)
//! and the handlers: the documents, the client's resolved capabilities and
//! the editor's settings, the runs in progress, the finished runs kept for
//! follow-ups, the downstream servers.
//! Locks are std locks, never held across an `.await`.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock};

use tokio_util::sync::CancellationToken;
use tower_lsp_server::Client;
use tower_lsp_server::ls_types::ClientCapabilities;

use super::convert::EditSupport;
use super::transport;
use crate::config::Config;
use crate::config::downstream::DownstreamConfig;
use crate::config::settings::Settings;
use crate::documents::{Documents, PositionEncoding};
use crate::downstream::Downstream;
use crate::fix::Alternative;
use crate::follow_up::{PastRun, ProposedFile, Review, SentFile};
use crate::mcp::McpServers;
use crate::position::LineRange;
use crate::workspace::Overlay;

/// Finished runs kept for follow-ups, at most; the oldest is dropped first.
pub const KEPT_RUNS: usize = 16;

pub struct Session {
    pub docs: Arc<Documents>,
    /// Downstream language servers, with the configuration they were made for.
    downstream: tokio::sync::Mutex<Option<(DownstreamConfig, Arc<Downstream>)>>,
    /// MCP tool servers, made for the configuration they hold.
    mcp: tokio::sync::Mutex<Option<Arc<McpServers>>>,
    state: RwLock<SessionState>,
    /// The runs in progress.
    pub runs: Arc<RunRegistry>,
    /// Finished runs, for follow-ups.
    pub kept: KeptRuns,
    /// What editors' reviews reported per hunk (`agentfix.reviewed`).
    pub reviews: Reviews,
    /// Held for writing while `workspace/configuration` is pulled, so that a
    /// run never starts with the settings of before the pull.
    pub config_gate: tokio::sync::RwLock<()>,
    /// Commands approved "Always in this workspace": (root, name).
    always: Mutex<HashSet<(PathBuf, String)>>,
    /// The client, for what the service wrapper must tell the user.
    pub client: OnceLock<Client>,
    /// Cancelled when the session ends (`exit`, or stdin closed); every
    /// run's cancellation is a child of it.
    pub ending: CancellationToken,
    /// Texts of large `didOpen`s, set aside by the transport (see
    /// `transport::Stash`).
    pub stash: Arc<transport::Stash>,
    /// Whether `shutdown` was received (the exit code depends on it).
    pub shut_down: AtomicBool,
    /// Warnings already shown to the user (each is shown once a session).
    said: Mutex<HashSet<String>>,
}

/// What `initialize` and the editor's settings said.
#[derive(Default, Clone)]
pub struct SessionState {
    pub encoding: PositionEncoding,
    pub support: ClientSupport,
    pub roots: Vec<PathBuf>,
    /// `initializationOptions`.
    pub init_settings: Settings,
    /// `clientInfo.name` (`delivery: auto` answers at once for some).
    pub client_name: Option<String>,
    /// The `agentfix` section from `workspace/configuration`, or the
    /// `settings` of `workspace/didChangeConfiguration`; wins over the above.
    pub pulled_settings: Settings,
}

impl SessionState {
    /// The editor's settings layer of the configuration.
    pub fn editor_settings(&self) -> Settings {
        self.init_settings.merged(&self.pulled_settings)
    }
}

/// The client capabilities agentfix acts on, resolved once in `initialize`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientSupport {
    /// `workspace.applyEdit`: the proposal can be sent.
    pub apply_edit: bool,
    /// `window.workDoneProgress`: the server may create progress tokens.
    pub work_done_progress: bool,
    /// `textDocument.codeAction.resolveSupport` names `edit`: a client
    /// without `applyEdit` can still take the proposal as the action's edit.
    pub resolve_edit: bool,
    /// `workspace.configuration`: settings are pulled.
    pub configuration: bool,
    /// What a `WorkspaceEdit` may contain.
    pub edit: EditSupport,
}

impl ClientSupport {
    pub fn of(caps: &ClientCapabilities) -> Self {
        let workspace = caps.workspace.as_ref();
        Self {
            apply_edit: workspace.and_then(|w| w.apply_edit).unwrap_or(false),
            work_done_progress: caps.window.as_ref().and_then(|w| w.work_done_progress).unwrap_or(false),
            resolve_edit: caps
                .text_document
                .as_ref()
                .and_then(|t| t.code_action.as_ref())
                .and_then(|c| c.resolve_support.as_ref())
                .is_some_and(|r| r.properties.iter().any(|p| p == "edit")),
            configuration: workspace.and_then(|w| w.configuration).unwrap_or(false),
            edit: EditSupport::of(caps),
        }
    }

    /// Whether code actions go out without a command, to be run in
    /// `codeAction/resolve`: a client that cannot take `workspace/applyEdit`
    /// but resolves `edit` (Vim's ALE, old clients).
    pub fn runs_in_resolve(&self) -> bool {
        !self.apply_edit && self.resolve_edit
    }
}

impl Session {
    pub fn new() -> Self {
        Self {
            docs: Arc::new(Documents::new()),
            downstream: tokio::sync::Mutex::new(None),
            mcp: tokio::sync::Mutex::new(None),
            state: RwLock::new(SessionState::default()),
            runs: Arc::new(RunRegistry::default()),
            kept: KeptRuns::default(),
            reviews: Reviews::default(),
            always: Mutex::new(HashSet::new()),
            config_gate: tokio::sync::RwLock::new(()),
            client: OnceLock::new(),
            ending: CancellationToken::new(),
            stash: Arc::new(transport::Stash::default()),
            shut_down: AtomicBool::new(false),
            said: Mutex::default(),
        }
    }

    /// A new run's cancellation: cancelled with the session too.
    pub fn run_cancellation(&self) -> CancellationToken {
        self.ending.child_token()
    }

    pub fn state(&self) -> SessionState {
        self.state.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn update(&self, f: impl FnOnce(&mut SessionState)) {
        f(&mut self.state.write().unwrap_or_else(|e| e.into_inner()));
    }

    /// Reads the state under its lock, without cloning it (for the hot
    /// paths: code actions, document sync).
    pub fn read_state<T>(&self, f: impl FnOnce(&SessionState) -> T) -> T {
        f(&self.state.read().unwrap_or_else(|e| e.into_inner()))
    }

    pub fn encoding(&self) -> PositionEncoding {
        self.read_state(|s| s.encoding)
    }

    pub fn support(&self) -> ClientSupport {
        self.read_state(|s| s.support)
    }

    /// The downstream servers for `config` (recreated when the
    /// `languageServers` setting or the roots changed).
    pub async fn downstream(&self, config: &Config, roots: &[PathBuf]) -> Arc<Downstream> {
        let mut slot = self.downstream.lock().await;
        if let Some((old, ds)) = slot.as_ref()
            && *old == config.downstream
            && ds.roots() == roots
        {
            return ds.clone();
        }
        if let Some((_, old)) = slot.take() {
            old.stop_all().await;
        }
        let ds = Arc::new(Downstream::from_config(&config.downstream, roots.to_vec()));
        *slot = Some((config.downstream.clone(), ds.clone()));
        ds
    }

    /// The MCP servers for `config`, kept for the session so their tool
    /// lists are listed once (recreated, the old ones stopped, when the
    /// `mcpServers` or `envAllow` settings changed); they run in the first root.
    pub async fn mcp(&self, config: &Config, roots: &[PathBuf]) -> Arc<McpServers> {
        let mut slot = self.mcp.lock().await;
        if let Some(m) = slot.as_ref()
            && *m.config() == config.mcp
        {
            return m.clone();
        }
        if let Some(old) = slot.take() {
            old.stop().await;
        }
        let cwd = roots.first().cloned().unwrap_or_else(|| PathBuf::from("/"));
        let m = Arc::new(McpServers::new(&config.mcp, &cwd));
        *slot = Some(m.clone());
        m
    }

    /// Stops the downstream language servers and the MCP servers.
    pub async fn stop_downstream(&self) {
        if let Some((_, ds)) = self.downstream.lock().await.take() {
            ds.stop_all().await;
        }
        if let Some(m) = self.mcp.lock().await.take() {
            m.stop().await;
        }
    }

    pub fn always_allowed(&self, root: &Path, name: &str) -> bool {
        self.always.lock().unwrap_or_else(|e| e.into_inner()).contains(&(root.to_path_buf(), name.to_string()))
    }

    /// What `path` holds now: the editor's buffer when it is open, else the
    /// disk (`None`: neither).
    pub fn current_text(&self, path: &Path) -> Option<String> {
        match self.docs.get_by_path(path) {
            Some(doc) => Some(doc.rope.to_string()),
            None => std::fs::read_to_string(path).ok(),
        }
    }

    /// Whether `warning` is new to this session (then it is shown).
    pub fn first_time(&self, warning: &str) -> bool {
        self.said.lock().unwrap_or_else(|e| e.into_inner()).insert(warning.to_string())
    }

    pub fn allow_always(&self, root: &Path, name: &str) {
        self.always.lock().unwrap_or_else(|e| e.into_inner()).insert((root.to_path_buf(), name.to_string()));
    }
}

/// A finished run a follow-up can continue.
#[derive(Debug, Clone)]
pub struct KeptRun {
    /// Its `runId`.
    pub id: String,
    pub past: Arc<PastRun>,
    /// With several candidates, the ones not chosen that propose something
    /// (offered as alternatives while the run is kept).
    pub alternatives: Arc<[Alternative]>,
}

impl KeptRun {
    /// Whether its proposal changed `lines` (0-based) of `path`.
    pub fn touched(&self, path: &Path, lines: LineRange) -> bool {
        self.past
            .proposed
            .iter()
            .filter(|f| f.path == path)
            .flat_map(|f| f.touched_lines())
            .any(|t| t.first <= lines.last && lines.first <= t.last)
    }
}

/// The last [`KEPT_RUNS`] finished runs, newest last, each with the lines
/// its proposal changed per file, found once when it is kept: a code action
/// request asks which run touched its lines, and diffing every kept
/// proposal again at each request cost more than everything else it does.
#[derive(Default)]
pub struct KeptRuns(Mutex<VecDeque<(KeptRun, Touched)>>);

/// The lines a kept run's proposal changed, per file.
type Touched = Vec<(PathBuf, Vec<LineRange>)>;

impl KeptRuns {
    fn lock(&self) -> MutexGuard<'_, VecDeque<(KeptRun, Touched)>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps `run` (a follow-up's run replaces none: each has its own id),
    /// dropping the oldest past [`KEPT_RUNS`].
    pub fn keep(&self, run: KeptRun) {
        // The lines of the alternatives count too: an alternative is offered
        // on the lines it would change.
        let alternatives = run.alternatives.iter().flat_map(|a| a.changes.iter().map(ProposedFile::from));
        let touched = run
            .past
            .proposed
            .iter()
            .cloned()
            .chain(alternatives)
            .map(|f| (f.path.clone(), f.touched_lines()))
            .collect();
        let mut runs = self.lock();
        runs.push_back((run, touched));
        while runs.len() > KEPT_RUNS {
            runs.pop_front();
        }
    }

    pub fn get(&self, id: &str) -> Option<KeptRun> {
        self.lock().iter().find(|(r, _)| r.id == id).map(|(r, _)| r.clone())
    }

    /// Replaces what run `id` proposed and sent (an alternative the user
    /// took instead); returns what it was, `None` when the run is not kept.
    /// The lines it touched stay: they count its alternatives already.
    pub fn replace_proposal(&self, id: &str, proposed: Vec<ProposedFile>, sent: Vec<SentFile>) -> Option<Arc<PastRun>> {
        let mut runs = self.lock();
        let (run, _) = runs.iter_mut().find(|(r, _)| r.id == id)?;
        let replaced = PastRun { proposed, sent, ..(*run.past).clone() };
        Some(std::mem::replace(&mut run.past, Arc::new(replaced)))
    }

    /// Puts back what [`KeptRuns::replace_proposal`] replaced.
    pub fn restore(&self, id: &str, past: Arc<PastRun>) {
        if let Some((run, _)) = self.lock().iter_mut().find(|(r, _)| r.id == id) {
            run.past = past;
        }
    }

    /// The newest run whose proposal changed `lines` of `path` (what
    /// [`KeptRun::touched`] says, from the lines found when it was kept).
    pub fn newest_touching(&self, path: &Path, lines: LineRange) -> Option<KeptRun> {
        let overlaps = |t: &LineRange| t.first <= lines.last && lines.first <= t.last;
        self.lock()
            .iter()
            .rev()
            .find(|(_, touched)| touched.iter().any(|(p, t)| p == path && t.iter().any(overlaps)))
            .map(|(r, _)| r.clone())
    }
}

/// What editors' reviews reported, per run and change annotation id, for
/// the last [`KEPT_RUNS`] runs reported on (the oldest dropped first). Apart
/// from [`KeptRuns`]: a review may end before its run is kept.
#[derive(Default)]
pub struct Reviews(Mutex<VecDeque<(String, HashMap<String, Review>)>>);

impl Reviews {
    fn lock(&self) -> MutexGuard<'_, VecDeque<(String, HashMap<String, Review>)>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records `hunks` for `run_id`; a hunk reported again takes the new
    /// outcome.
    pub fn record(&self, run_id: &str, hunks: impl IntoIterator<Item = (String, Review)>) {
        let mut runs = self.lock();
        let at = match runs.iter().position(|(id, _)| id == run_id) {
            Some(at) => at,
            None => {
                runs.push_back((run_id.to_string(), HashMap::new()));
                if runs.len() > KEPT_RUNS {
                    runs.pop_front();
                }
                runs.len() - 1
            }
        };
        runs[at].1.extend(hunks);
    }

    /// What was reported for `run_id` (empty when nothing was).
    pub fn of(&self, run_id: &str) -> HashMap<String, Review> {
        self.lock().iter().find(|(id, _)| id == run_id).map(|(_, r)| r.clone()).unwrap_or_default()
    }

    /// Forgets what was reported for `run_id` (its proposal was replaced)
    /// and returns it.
    pub fn take(&self, run_id: &str) -> HashMap<String, Review> {
        let mut runs = self.lock();
        runs.iter_mut().find(|(id, _)| id == run_id).map(|(_, r)| std::mem::take(r)).unwrap_or_default()
    }
}

/// The runs in progress: one entry per run, made and cleared by one
/// [`RunGuard`].
#[derive(Default)]
pub struct RunRegistry {
    next: AtomicU64,
    runs: Mutex<HashMap<u64, RunEntry>>,
}

/// A run in progress.
struct RunEntry {
    /// The progress token its reports go out on (cancel by it).
    token: String,
    target: PathBuf,
    /// What it has edited so far.
    overlay: Arc<Overlay>,
    cancel: CancellationToken,
}

/// A registered run: its id and progress token. Dropping it clears the
/// entry, so the run's file is free and its token cancels nothing, however
/// the run ends.
pub struct RunGuard {
    registry: Arc<RunRegistry>,
    pub id: u64,
    pub token: String,
}

impl Drop for RunGuard {
    fn drop(&mut self) {
        self.registry.lock().remove(&self.id);
    }
}

impl RunRegistry {
    fn lock(&self) -> MutexGuard<'_, HashMap<u64, RunEntry>> {
        self.runs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a run on `target` unless another run already targets or
    /// has edited it (its edits would race the other's): then `Err` with the
    /// other run's id. The check and the registration are one step. The
    /// progress token is the client's when it sent one, else our own.
    pub fn register(
        self: &Arc<Self>,
        target: PathBuf,
        overlay: Arc<Overlay>,
        cancel: CancellationToken,
        client_token: Option<String>,
    ) -> Result<RunGuard, u64> {
        let mut runs = self.lock();
        if let Some(other) = busy_with(&runs, &target) {
            return Err(other);
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let token = client_token.unwrap_or_else(|| format!("agentfix/fix/{id}"));
        runs.insert(id, RunEntry { token: token.clone(), target, overlay, cancel });
        Ok(RunGuard { registry: self.clone(), id, token })
    }

    /// Cancels run `id` (the number of its `runId`); false if it is not
    /// running.
    pub fn cancel_by_id(&self, id: u64) -> bool {
        self.lock().get(&id).map(|r| r.cancel.cancel()).is_some()
    }

    /// Cancels the run reporting progress on `token`; false if none.
    pub fn cancel_by_token(&self, token: &str) -> bool {
        let runs = self.lock();
        let found = runs.values().filter(|r| r.token == token).map(|r| r.cancel.cancel()).count();
        found > 0
    }

    pub fn cancel_all(&self) {
        for run in self.lock().values() {
            run.cancel.cancel();
        }
    }

    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Whether run `id` (the number of its `runId`) is running.
    pub fn is_running(&self, id: u64) -> bool {
        self.lock().contains_key(&id)
    }
}

/// The run that already targets or has edited `path`, if any. A cancelled
/// run proposes nothing, so it holds no file while it winds down.
fn busy_with(runs: &HashMap<u64, RunEntry>, path: &Path) -> Option<u64> {
    runs.iter()
        .filter(|(_, run)| !run.cancel.is_cancelled())
        .find(|(_, run)| run.target == path || run.overlay.changes().iter().any(|c| c.path == path))
        .map(|(id, _)| *id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspace::{NoBuffers, Workspace};

    fn overlay(root: &Path) -> Arc<Overlay> {
        Arc::new(Overlay::new(Arc::new(Workspace::new(vec![root.to_path_buf()])), Arc::new(NoBuffers)))
    }

    #[test]
    fn finished_runs_are_kept_bounded_and_found_by_the_lines_they_touched() {
        use crate::follow_up::ProposedFile;
        let kept = KeptRuns::default();
        let run = |n: usize| KeptRun {
            id: format!("run-{n}"),
            past: Arc::new(PastRun {
                messages: vec![],
                proposed: vec![ProposedFile {
                    path: "/ws/a.py".into(),
                    display: "a.py".into(),
                    original: Some("0\n1\n2\n".into()),
                    // Run n changes line n % 3 (0-based).
                    proposed: (0..3).map(|i| if i == n % 3 { "X\n".to_string() } else { format!("{i}\n") }).collect(),
                }],
                ..PastRun::default()
            }),
            alternatives: Arc::new([]),
        };
        for n in 0..KEPT_RUNS + 2 {
            kept.keep(run(n));
        }
        assert!(kept.get("run-0").is_none() && kept.get("run-1").is_none(), "the oldest are dropped");
        assert!(kept.get("run-2").is_some());
        // The newest run that changed line 0: the last n with n % 3 == 0.
        let newest = kept.newest_touching(Path::new("/ws/a.py"), LineRange::line(0)).unwrap();
        let last = (0..KEPT_RUNS + 2).filter(|n| n % 3 == 0).max().unwrap();
        assert_eq!(newest.id, format!("run-{last}"));
        let newest = kept.newest_touching(Path::new("/ws/a.py"), LineRange::new(1, 2)).unwrap();
        assert_eq!(newest.id, format!("run-{}", KEPT_RUNS + 1));
        assert!(kept.newest_touching(Path::new("/ws/b.py"), LineRange::line(0)).is_none());
    }

    #[test]
    fn one_guard_registers_and_clears_a_run_and_a_busy_file_is_refused_atomically() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let (a, b) = (root.join("a.py"), root.join("b.py"));
        std::fs::write(&a, "x\n").unwrap();
        std::fs::write(&b, "y\n").unwrap();
        let registry = Arc::new(RunRegistry::default());
        let cancel = CancellationToken::new();
        let first = registry.register(a.clone(), overlay(&root), cancel.clone(), None).unwrap();
        assert_eq!(first.token, format!("agentfix/fix/{}", first.id));
        // The same file is busy; another file is not, and keeps the client's token.
        assert_eq!(registry.register(a.clone(), overlay(&root), CancellationToken::new(), None).err(), Some(first.id));
        let ov = overlay(&root);
        let second = registry.register(b.clone(), ov.clone(), CancellationToken::new(), Some("tok".into())).unwrap();
        assert_eq!(second.token, "tok");
        // A file a run has edited is busy too.
        ov.write(&a, "edited\n".into()).unwrap();
        drop(first);
        assert_eq!(registry.register(a.clone(), overlay(&root), CancellationToken::new(), None).err(), Some(second.id));
        // Cancel by token reaches that run only; a cancelled run holds no file.
        assert!(!registry.cancel_by_token("nope"));
        assert!(registry.cancel_by_token("tok"));
        assert!(!cancel.is_cancelled());
        let third = registry.register(a, overlay(&root), CancellationToken::new(), None).unwrap();
        drop((second, third));
        assert!(registry.is_empty());
    }
}
