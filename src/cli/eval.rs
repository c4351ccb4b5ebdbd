//! `agentfix eval DIR`: runs a task set and says how often a fix resolved a
//! task and how often agentfix's own check (`verify`) predicted that.
//!
//! A task is a folder of DIR: `task.toml` ([`TaskFile`]: what to fix, as
//! `fix` takes it, and the `check` argv that judges the outcome) and
//! `workspace/`, the broken project, with its own `agentfix.toml`. Only
//! `workspace/` is copied for a run, so nothing else of the task folder
//! (the task file, a mock's script, hidden check files) can reach the
//! model; the check's argv never does either: eval runs it itself, in the
//! copy, after applying the proposal. The run verifies with what the
//! workspace sets up (its `commands`, approved by eval, its `verify`, the
//! language servers), so `agreed` (verified == resolved) measures the
//! check agentfix does for its users.
//!
//! Its parts: the task file and the task set's loading (each error names
//! its task, exit 2); the validation of every task through `fix`'s own
//! `prepare` on the original workspace before anything runs; the check
//! (`run_check`: in its own process group, a timeout, no credential in its
//! environment); one task with one model (`run_item`: copy, check that it
//! fails, once per task, shared by its models; `fix`'s `run_fix`, the
//! proposal written without a backup, the check); the progress line on
//! stderr; the [`Report`] (`--json`, camelCase) and its tables on stdout.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::{AllowList, FixArgs, Lent, exit, fail, parse_range, prepare, run_fix, undo};
use crate::fix::{FixResult, NoEdit, Verdict};
use crate::position::LineRange;
use crate::pricing::{format_tokens, format_usd};

/// Arguments of `agentfix eval`.
#[derive(Debug, clap::Args)]
pub struct EvalArgs {
    /// The task set: every subfolder is a task (its `task.toml` and its
    /// `workspace/`).
    pub dir: PathBuf,
    /// The models to run every task with, comma-separated (default: the
    /// configured model).
    #[arg(long, value_name = "M[,M2…]", value_delimiter = ',', value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub model: Vec<String>,
    /// Run N candidates of each fix (1 to 8) and propose the best, as `fix
    /// --candidates`.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=8))]
    pub candidates: Option<u32>,
    /// How many runs go at once.
    #[arg(long, value_name = "J", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub jobs: u32,
    /// Write the results as JSON to this file (for CI).
    #[arg(long, value_name = "OUT")]
    pub json: Option<PathBuf>,
    /// Editor settings to apply on top (JSON), as `fix --settings`.
    #[arg(long, value_name = "JSON")]
    pub settings: Option<String>,
}

/// `task.toml`: the target as `agentfix fix` takes it, and the check.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskFile {
    /// The file to fix, relative to `workspace/`.
    pub file: PathBuf,
    /// The 1-based line to fix (as `--line`).
    pub line: Option<u32>,
    /// The lines to fix, `"10-14"` (as `--range`).
    pub range: Option<String>,
    /// A compiler's or linter's output, relative to the task folder (as
    /// `--diagnostics`); its paths are relative to the workspace.
    pub diagnostics: Option<PathBuf>,
    /// Every diagnostic of the file in one run (as `--all`).
    #[serde(default)]
    pub all: bool,
    /// What to do, in words (as `--instruction`).
    pub instruction: Option<String>,
    /// The argv that exits 0 once the bug is fixed, run in the copy of the
    /// workspace; never shown to the run.
    pub check: Vec<String>,
    /// How long the check may run, in seconds (default 120).
    pub check_timeout_secs: Option<u64>,
}

/// The default of `checkTimeoutSecs`.
const CHECK_TIMEOUT_SECS: u64 = 120;

/// The variable that names the task folder in the check's environment
/// (for check files kept out of the workspace).
pub const TASK_DIR_VAR: &str = "AGENTFIX_EVAL_TASK";

/// One task of the set.
struct Task {
    name: String,
    /// The task folder, canonical.
    dir: PathBuf,
    file: TaskFile,
    range: Option<LineRange>,
    /// `envAllow` of the task's configuration: what the check may inherit.
    env_allow: Vec<String>,
    /// Whether the check fails before any fix (`Err`: why the task is
    /// invalid), found once and shared by the task's models.
    valid: tokio::sync::OnceCell<Result<(), String>>,
}

impl Task {
    fn workspace(&self) -> PathBuf {
        self.dir.join("workspace")
    }

    /// `fix`'s arguments for this task over the workspace at `root`.
    fn fix_args(&self, root: &Path, model: Option<&str>, args: &EvalArgs) -> FixArgs {
        FixArgs {
            path: root.join(&self.file.file),
            line: self.file.line,
            range: self.range,
            diagnostics: self.file.diagnostics.as_ref().map(|d| self.dir.join(d)),
            all: self.file.all,
            instruction: self.file.instruction.clone(),
            root: Some(root.to_path_buf()),
            apply: false,
            model: model.map(str::to_string),
            effort: None,
            candidates: args.candidates,
            continue_run: false,
            settings: args.settings.clone(),
            allow_command: Vec::new(),
        }
    }
}

/// The tasks of `dir` (its subfolders, by name), each file read and
/// checked; the first error, naming its task.
fn load_tasks(dir: &Path) -> Result<Vec<Task>, String> {
    if dir.join("task.toml").is_file() {
        return Err(format!("{} is a task; pass the folder of tasks that holds it", dir.display()));
    }
    let entries = std::fs::read_dir(dir).map_err(|e| format!("cannot read the task set {}: {e}", dir.display()))?;
    let mut folders: Vec<PathBuf> = entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect();
    folders.retain(|p| !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')));
    folders.sort();
    if folders.is_empty() {
        return Err(format!("no tasks in {}: each task is a folder with a task.toml and a workspace/", dir.display()));
    }
    folders.iter().map(|f| load_task(f)).collect()
}

fn load_task(folder: &Path) -> Result<Task, String> {
    let name = folder.file_name().unwrap_or_default().to_string_lossy().into_owned();
    let bad = |why: String| format!("task {name}: {why}");
    let dir = std::fs::canonicalize(folder).map_err(|e| bad(e.to_string()))?;
    let text = std::fs::read_to_string(dir.join("task.toml")).map_err(|e| bad(format!("task.toml: {e}")))?;
    let file: TaskFile = toml::from_str(&text).map_err(|e| bad(format!("task.toml: {}", e.to_string().trim_end())))?;
    if file.check.is_empty() {
        return Err(bad("task.toml: `check` is empty: it is the argv that exits 0 once the bug is fixed".into()));
    }
    if file.line.is_none() && file.range.is_none() && file.diagnostics.is_none() {
        return Err(bad("task.toml: say which lines: `line`, `range` or `diagnostics`".into()));
    }
    if file.line.is_some() && file.range.is_some() {
        return Err(bad("task.toml: `line` and `range` together; give one".into()));
    }
    if file.line == Some(0) {
        return Err(bad("task.toml: `line` is 1-based".into()));
    }
    if file.all && file.diagnostics.is_none() {
        return Err(bad("task.toml: `all` needs `diagnostics`".into()));
    }
    let range =
        file.range.as_deref().map(parse_range).transpose().map_err(|e| bad(format!("task.toml: range: {e}")))?;
    if !dir.join("workspace").is_dir() {
        return Err(bad("no workspace/ folder beside task.toml".into()));
    }
    Ok(Task { name, dir, file, range, env_allow: Vec::new(), valid: tokio::sync::OnceCell::new() })
}

/// Checks every task as `fix` would before it runs (the file, the lines,
/// the diagnostics, the workspace's configuration, the key) on its
/// original workspace, and keeps what its check may inherit.
fn validate(tasks: &mut [Task], args: &EvalArgs, model: Option<&str>, say: &dyn Fn(&str)) -> Result<(), String> {
    for task in tasks {
        let (prepared, _, _) = prepare(&task.fix_args(&task.workspace(), model, args), say)
            .map_err(|e| format!("task {}: {e}", task.name))?;
        task.env_allow = prepared.config.commands.env_allow.clone();
    }
    Ok(())
}

/// How a check ended.
struct CheckRun {
    passed: bool,
    /// What to say when it did not pass: the exit, the output's last line.
    failure: String,
}

/// The characters of a check's last line of output its failure quotes.
const CHECK_LAST_LINE: usize = 200;

/// The bytes of each of a check's streams kept (their end).
const CHECK_OUTPUT_KEPT: usize = 64 * 1024;

/// Runs the task's check in `root` (its own process group, stdin closed,
/// the environment without credentials, the task folder in
/// [`TASK_DIR_VAR`]); the whole group is killed at the timeout or a
/// cancel. `Err` when it cannot start.
async fn run_check(task: &Task, root: &Path, cancel: &CancellationToken) -> Result<CheckRun, String> {
    let argv = &task.file.check;
    let mut cmd = tokio::process::Command::new(&argv[0]);
    cmd.args(&argv[1..]).current_dir(root).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.process_group(0).kill_on_drop(true).env(TASK_DIR_VAR, &task.dir);
    for var in crate::secrets::credential_vars(&task.env_allow) {
        cmd.env_remove(var);
    }
    let mut child = cmd.spawn().map_err(|e| format!("the check cannot start `{}`: {e}", argv[0]))?;
    let pid = child.id();
    let timeout = Duration::from_secs(task.file.check_timeout_secs.unwrap_or(CHECK_TIMEOUT_SECS));
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let waiting = async { tokio::join!(tail_of(stdout), tail_of(stderr), child.wait()) };
    tokio::pin!(waiting);
    let ended = tokio::select! {
        out = &mut waiting => Some(out),
        _ = tokio::time::sleep(timeout) => None,
        _ = cancel.cancelled() => None,
    };
    let Some((stdout, stderr, status)) = ended else {
        // Its group outlives it while the check's children do (no new
        // process takes the id of a group that has members).
        if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
            // SAFETY: kill(2) with a negative id signals the process group
            // the check leads; no memory is involved.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
        }
        let why = if cancel.is_cancelled() { "cancelled" } else { "timed out" };
        return Ok(CheckRun { passed: false, failure: format!("the check {why} after {} s", timeout.as_secs()) });
    };
    let status = status.map_err(|e| format!("the check: {e}"))?;
    let text = format!("{}{}", String::from_utf8_lossy(&stdout), String::from_utf8_lossy(&stderr));
    let last = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or_default().trim();
    let last: String = last.chars().take(CHECK_LAST_LINE).collect();
    let exit = status.code().map_or_else(|| "killed by a signal".to_string(), |c| format!("exit {c}"));
    Ok(CheckRun { passed: status.success(), failure: format!("the check failed ({exit}): {last}") })
}

/// The last [`CHECK_OUTPUT_KEPT`] bytes of what `reader` gives until its
/// end (a check may print without end until its timeout).
async fn tail_of(reader: Option<impl tokio::io::AsyncRead + Unpin>) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let mut kept = Vec::new();
    let Some(mut reader) = reader else { return kept };
    let mut buf = [0u8; 8192];
    while let Ok(n @ 1..) = reader.read(&mut buf).await {
        kept.extend_from_slice(&buf[..n]);
        if kept.len() > 2 * CHECK_OUTPUT_KEPT {
            kept.drain(..kept.len() - CHECK_OUTPUT_KEPT);
        }
    }
    kept
}

/// Copies the task's workspace into a new temporary folder; the copy's
/// root is `ws/` in it.
async fn copy_workspace(task: &Task) -> Result<(tempfile::TempDir, PathBuf), String> {
    let from = task.workspace();
    tokio::task::spawn_blocking(move || {
        let dir = tempfile::Builder::new().prefix("agentfix-eval-").tempdir().map_err(|e| e.to_string())?;
        let root = std::fs::canonicalize(dir.path()).map_err(|e| e.to_string())?.join("ws");
        copy_tree(&from, &root).map_err(|e| format!("cannot copy {}: {e}", from.display()))?;
        Ok((dir, root))
    })
    .await
    .map_err(|e| e.to_string())?
}

/// `from` copied to `to` (folders, files, symlinks as links).
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_tree(&src, &dst)?;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src)?, &dst)?;
        } else {
            std::fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}

/// Whether the task's check fails before any fix, in a copy of its own.
async fn check_fails(task: &Task, cancel: &CancellationToken) -> Result<(), String> {
    let (_dir, root) = copy_workspace(task).await?;
    match run_check(task, &root, cancel).await? {
        c if c.passed => Err("the check already passes before any fix".into()),
        _ => Ok(()),
    }
}

/// One run of one task with one model, as the report keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskRun {
    pub name: String,
    /// The model of the run, as the configuration resolved it.
    pub model: String,
    /// The check passed with the proposal applied.
    pub resolved: bool,
    /// agentfix's own check (`verify`) passed.
    pub verified: bool,
    /// `verified == resolved`: the verification told the truth.
    pub agreed: bool,
    pub turns: u32,
    /// Input and output tokens, cached input included.
    pub tokens: u64,
    /// `None` without a known price for the model.
    pub cost_usd: Option<f64>,
    /// Wall time of the fix run (not of the checks).
    pub secs: f64,
    /// The rounds of the run's verification (0: nothing was proposed).
    pub rounds: u32,
    /// Why the task is not resolved; none when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The run's transcript, when transcripts are on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript: Option<String>,
}

/// A task that is not counted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InvalidTask {
    pub name: String,
    /// Why: its check already passes, or cannot run.
    pub reason: String,
}

/// A task and model that did not run to the end (cancelled, or a copy or a
/// preparation failed): the exit code is then 1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NotRun {
    pub name: String,
    /// The model asked for; none for the configured one.
    pub model: Option<String>,
    pub reason: String,
}

/// One model's figures over the valid tasks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelSummary {
    pub model: String,
    pub tasks: u32,
    pub resolved: u32,
    pub verified: u32,
    pub agreed: u32,
    /// Every run's cost; `None` when a run's price is unknown.
    pub cost_usd: Option<f64>,
    /// `costUsd` over `resolved`; `None` when nothing was resolved.
    pub cost_per_resolved_usd: Option<f64>,
    pub median_secs: f64,
}

/// What `--json` writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Every valid task with every model, in task order, then model order.
    pub tasks: Vec<TaskRun>,
    /// The tasks not counted, in task order.
    pub invalid: Vec<InvalidTask>,
    pub not_run: Vec<NotRun>,
    /// One per model, in the order of `tasks`.
    pub models: Vec<ModelSummary>,
}

/// How one task with one model ended.
enum Ran {
    Run { run: TaskRun, model_failed: bool },
    Invalid(String),
    NotRun(String),
}

/// What every run shares.
struct Eval<'a> {
    args: &'a EvalArgs,
    progress: &'a Progress,
    cancel: CancellationToken,
}

/// One task with one model: the check must fail first (once per task);
/// then a copy, the fix, the proposal written, the check.
async fn run_item(eval: &Eval<'_>, task: &Task, model: Option<&str>) -> Ran {
    if eval.cancel.is_cancelled() {
        return Ran::NotRun("cancelled".into());
    }
    if let Err(why) = task.valid.get_or_init(|| check_fails(task, &eval.cancel)).await {
        return Ran::Invalid(why.clone());
    }
    let (_dir, root) = match copy_workspace(task).await {
        Ok(x) => x,
        Err(e) => return Ran::NotRun(e),
    };
    let say = |line: &str| eval.progress.say(line);
    let (prepared, client, request) = match prepare(&task.fix_args(&root, model, eval.args), &say) {
        Ok(x) => x,
        Err(e) => return Ran::NotRun(e),
    };
    let names = prepared.config.commands.entries.keys().cloned().collect();
    let lent = Lent {
        model: client,
        approver: Arc::new(AllowList { names, quiet: true }),
        progress: &|_| {},
        cancel: eval.cancel.child_token(),
    };
    let started = Instant::now();
    let result = run_fix(&prepared, lent, request).await;
    let secs = started.elapsed().as_secs_f64();
    if matches!(result.verdict, Verdict::Cancelled) {
        return Ran::NotRun("cancelled".into());
    }
    let mut run = task_run(&task.name, &prepared.config.provider.model, &result, secs);
    let changes = result.changes();
    if !changes.is_empty() {
        let checked = match undo::write_without_backup(&root, changes) {
            Ok(()) => run_check(task, &root, &eval.cancel).await,
            Err(e) => Err(e),
        };
        if eval.cancel.is_cancelled() {
            return Ran::NotRun("cancelled".into());
        }
        run.resolved = checked.as_ref().is_ok_and(|c| c.passed);
        run.note = match checked {
            Ok(c) if c.passed => None,
            Ok(c) => Some(c.failure),
            Err(e) => Some(e),
        };
    }
    run.agreed = run.verified == run.resolved;
    Ran::Run { run, model_failed: result.model_failed() }
}

/// The report's record of a fix, unresolved until its check says so.
fn task_run(name: &str, model: &str, result: &FixResult, secs: f64) -> TaskRun {
    let verification = result.verification.as_ref();
    let tokens = &result.spend.tokens;
    let note = match &result.verdict {
        Verdict::Proposal(_) => None,
        Verdict::Cancelled => Some("cancelled".to_string()),
        Verdict::Discarded { reason, .. } => Some(format!("{reason}; the edits were discarded (partialEdits)")),
        Verdict::NoEdit(NoEdit::ModelError(m)) => Some(format!("the model API failed: {m}")),
        Verdict::NoEdit(NoEdit::Unverified(why)) => Some(format!("no edit offered: {why}")),
        Verdict::NoEdit(NoEdit::Stopped(why)) => Some(format!("no edit: {why}")),
        Verdict::NoEdit(NoEdit::Finished(_) | NoEdit::NoToolCall(_)) => Some("no edit proposed".to_string()),
    };
    TaskRun {
        name: name.to_string(),
        model: model.to_string(),
        resolved: false,
        verified: verification.is_some_and(|v| v.verified),
        agreed: false,
        turns: result.outcome.turns,
        tokens: tokens.prompt() + tokens.output,
        cost_usd: result.spend.cost_usd,
        secs,
        rounds: verification.map_or(0, |v| v.rounds),
        note,
        transcript: result.transcript.as_ref().map(|t| t.display().to_string()),
    }
}

/// The one line on stderr: a bar redrawn in place on a terminal, and a
/// line per finished run above it (alone when stderr is not a terminal).
/// Warnings are said once each; other notes go to the log.
struct Progress {
    total: usize,
    terminal: bool,
    state: Mutex<(usize, HashSet<String>)>,
}

/// The bar's width in characters.
const BAR: usize = 30;

impl Progress {
    fn new(total: usize) -> Self {
        use std::io::IsTerminal;
        Self { total, terminal: std::io::stderr().is_terminal(), state: Mutex::new((0, HashSet::new())) }
    }

    fn bar(&self, done: usize) -> String {
        let filled = (done * BAR).checked_div(self.total).unwrap_or(BAR);
        format!("[{}{}] {done}/{}", "#".repeat(filled), " ".repeat(BAR - filled), self.total)
    }

    /// Writes `line` above the bar (which is drawn again).
    fn line(&self, done: usize, line: &str) {
        if self.terminal {
            eprint!("\r\x1b[K{line}\n{}", self.bar(done));
            if done == self.total {
                eprintln!();
            }
        } else {
            eprintln!("{line}");
        }
    }

    fn start(&self) {
        if self.terminal {
            eprint!("\r\x1b[K{}", self.bar(0));
        }
    }

    /// A run ended: `what` says how.
    fn finished(&self, what: &str) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.0 += 1;
        let done = state.0;
        self.line(done, &format!("eval: {done}/{}: {what}", self.total));
    }

    /// A note of `prepare`: a warning once on stderr, the rest to the log.
    fn say(&self, note: &str) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if !note.starts_with("warning: ") {
            tracing::info!("{note}");
        } else if state.1.insert(note.to_string()) {
            self.line(state.0, &format!("agentfix: {note}"));
        }
    }
}

/// How a finished run reads in its progress line.
fn describe(task: &str, model: Option<&str>, ran: &Ran) -> String {
    let model = model.unwrap_or("configured model");
    match ran {
        Ran::Run { run, .. } => {
            let outcome = if run.resolved { "resolved" } else { "not resolved" };
            let verified = if run.verified { "verified" } else { "not verified" };
            let note = run.note.as_deref().map(|n| format!(": {n}")).unwrap_or_default();
            format!("{task} ({}): {outcome}, {verified}, {:.1} s{note}", run.model, run.secs)
        }
        Ran::Invalid(why) => format!("{task}: invalid, not counted: {why}"),
        Ran::NotRun(why) => format!("{task} ({model}): did not run: {why}"),
    }
}

/// `agentfix eval`: every task with every model; the tables on stdout, the
/// JSON with `--json`. Exit 0 when every run ran to its end, 1 when some
/// did not (a cancel, a failed copy), 2 for a usage error, 3 when the
/// model API failed in every run.
pub async fn eval(args: EvalArgs) -> ExitCode {
    let mut tasks = match load_tasks(&args.dir) {
        Ok(t) => t,
        Err(e) => return fail(exit::USAGE, format!("eval: {e}")),
    };
    // Each model once, in the order given; none: the configured one.
    let mut models: Vec<Option<&str>> = Vec::new();
    for m in &args.model {
        if !models.contains(&Some(m.trim())) {
            models.push(Some(m.trim()));
        }
    }
    if models.is_empty() {
        models.push(None);
    }
    let items: Vec<(usize, Option<&str>)> =
        (0..tasks.len()).flat_map(|t| models.iter().map(move |m| (t, *m))).collect();
    let progress = Progress::new(items.len());
    if let Err(e) = validate(&mut tasks, &args, models[0], &|note: &str| progress.say(note)) {
        return fail(exit::USAGE, format!("eval: {e}"));
    }
    let eval = Eval { args: &args, progress: &progress, cancel: super::cancelled_by_ctrl_c() };
    progress.start();
    let (eval, tasks) = (&eval, &tasks);
    let mut ran: Vec<(usize, Ran)> = futures::stream::iter(items.iter().copied().enumerate())
        .map(|(i, (t, model))| async move {
            let ran = run_item(eval, &tasks[t], model).await;
            eval.progress.finished(&describe(&tasks[t].name, model, &ran));
            (i, ran)
        })
        .buffer_unordered(args.jobs as usize)
        .collect()
        .await;
    ran.sort_by_key(|(i, _)| *i);
    let report = report(tasks, &items, ran.iter().map(|(_, r)| r));
    print!("{}", tables(&report));
    if let Some(out) = &args.json {
        let json = serde_json::to_string_pretty(&report).unwrap_or_default();
        if let Err(e) = std::fs::write(out, json + "\n") {
            return fail(exit::NO_EDIT, format!("eval: cannot write {}: {e}", out.display()));
        }
    }
    let failed: Vec<bool> = ran
        .iter()
        .filter_map(|(_, r)| if let Ran::Run { model_failed, .. } = r { Some(*model_failed) } else { None })
        .collect();
    if !failed.is_empty() && failed.iter().all(|f| *f) {
        return fail(exit::MODEL, "eval: the model API failed in every run");
    }
    ExitCode::from(if report.not_run.is_empty() { 0 } else { exit::NO_EDIT })
}

/// The report of the runs of `items` (task index and model), in order.
fn report<'a>(tasks: &[Task], items: &[(usize, Option<&str>)], ran: impl Iterator<Item = &'a Ran>) -> Report {
    let mut report = Report { tasks: Vec::new(), invalid: Vec::new(), not_run: Vec::new(), models: Vec::new() };
    for (&(t, model), ran) in items.iter().zip(ran) {
        let name = tasks[t].name.clone();
        match ran {
            Ran::Run { run, .. } => report.tasks.push(run.clone()),
            Ran::Invalid(reason) if !report.invalid.iter().any(|i| i.name == name) => {
                report.invalid.push(InvalidTask { name, reason: reason.clone() })
            }
            Ran::Invalid(_) => {}
            Ran::NotRun(reason) => {
                report.not_run.push(NotRun { name, model: model.map(str::to_string), reason: reason.clone() })
            }
        }
    }
    let mut names: Vec<&str> = Vec::new();
    for run in &report.tasks {
        if !names.contains(&run.model.as_str()) {
            names.push(&run.model);
        }
    }
    let models = names.iter().map(|m| summary(m, report.tasks.iter().filter(|r| r.model == *m).collect())).collect();
    report.models = models;
    report
}

/// One model's figures over its runs.
fn summary(model: &str, runs: Vec<&TaskRun>) -> ModelSummary {
    let count = |f: fn(&TaskRun) -> bool| runs.iter().filter(|r| f(r)).count() as u32;
    let resolved = count(|r| r.resolved);
    let cost_usd = runs.iter().map(|r| r.cost_usd).sum::<Option<f64>>();
    let mut secs: Vec<f64> = runs.iter().map(|r| r.secs).collect();
    secs.sort_by(f64::total_cmp);
    let median_secs = match secs.len() {
        0 => 0.0,
        n if n % 2 == 1 => secs[n / 2],
        n => (secs[n / 2 - 1] + secs[n / 2]) / 2.0,
    };
    ModelSummary {
        model: model.to_string(),
        tasks: runs.len() as u32,
        resolved,
        verified: count(|r| r.verified),
        agreed: count(|r| r.agreed),
        cost_usd,
        cost_per_resolved_usd: cost_usd.filter(|_| resolved > 0).map(|c| c / f64::from(resolved)),
        median_secs,
    }
}

/// Rows as columns padded to their widest cell.
fn columns(rows: &[Vec<String>]) -> String {
    let widths: Vec<usize> = (0..rows.first().map_or(0, Vec::len))
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row.iter().zip(&widths).map(|(cell, w)| format!("{cell:<w$}")).collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// The tables printed at the end: a row per run, then one per model, then
/// the tasks not counted.
fn tables(report: &Report) -> String {
    let yes = |b: bool| if b { "yes" } else { "no" }.to_string();
    let usd = |c: Option<f64>| c.map_or_else(|| "-".to_string(), format_usd);
    let mut runs = vec![
        ["task", "model", "resolved", "verified", "agreed", "turns", "tokens", "cost", "time"]
            .map(String::from)
            .to_vec(),
    ];
    runs.extend(report.tasks.iter().map(|r| {
        vec![
            r.name.clone(),
            r.model.clone(),
            yes(r.resolved),
            yes(r.verified),
            yes(r.agreed),
            r.turns.to_string(),
            format_tokens(r.tokens).split(' ').next().unwrap_or_default().to_string(),
            usd(r.cost_usd),
            format!("{:.1} s", r.secs),
        ]
    }));
    let mut models = vec![
        ["model", "resolved", "cost per resolved", "median time", "verification agreed"].map(String::from).to_vec(),
    ];
    models.extend(report.models.iter().map(|m| {
        vec![
            m.model.clone(),
            format!("{} of {}", m.resolved, m.tasks),
            usd(m.cost_per_resolved_usd),
            format!("{:.1} s", m.median_secs),
            format!("{} of {}", m.agreed, m.tasks),
        ]
    }));
    let mut out = format!("{}\n{}", columns(&runs), columns(&models));
    for i in &report.invalid {
        out.push_str(&format!("invalid, not counted: {}: {}\n", i.name, i.reason));
    }
    for n in &report.not_run {
        out.push_str(&format!("did not run: {} ({}): {}\n", n.name, n.model.as_deref().unwrap_or("-"), n.reason));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(name: &str, model: &str, resolved: bool, verified: bool, cost: Option<f64>, secs: f64) -> TaskRun {
        TaskRun {
            name: name.into(),
            model: model.into(),
            resolved,
            verified,
            agreed: resolved == verified,
            turns: 2,
            tokens: 1000,
            cost_usd: cost,
            secs,
            rounds: 1,
            note: None,
            transcript: None,
        }
    }

    #[test]
    fn a_model_s_summary_counts_its_runs_and_takes_the_median_time() {
        let runs = [
            run("a", "m", true, true, Some(0.02), 1.0),
            run("b", "m", false, true, Some(0.04), 4.0),
            run("c", "m", true, false, Some(0.03), 2.0),
            run("d", "m", true, true, Some(0.03), 3.0),
        ];
        let s = summary("m", runs.iter().collect());
        assert_eq!((s.tasks, s.resolved, s.verified, s.agreed), (4, 3, 3, 2));
        assert!((s.cost_per_resolved_usd.unwrap() - 0.04).abs() < 1e-9, "{s:?}");
        assert!((s.median_secs - 2.5).abs() < 1e-9);
        let unpriced = [run("a", "m", true, true, None, 1.0), run("b", "m", false, false, Some(0.1), 2.0)];
        let s = summary("m", unpriced.iter().collect());
        assert_eq!((s.cost_usd, s.cost_per_resolved_usd, s.median_secs), (None, None, 1.5));
        let unresolved = [run("a", "m", false, false, Some(0.1), 5.0)];
        assert_eq!(summary("m", unresolved.iter().collect()).cost_per_resolved_usd, None);
    }

    #[test]
    fn the_tables_show_every_run_and_each_model_s_line() {
        let report = Report {
            tasks: vec![run("py-off-by-one", "m", true, true, Some(0.5), 1.25)],
            invalid: vec![InvalidTask {
                name: "done".into(),
                reason: "the check already passes before any fix".into(),
            }],
            not_run: Vec::new(),
            models: vec![summary("m", vec![&run("py-off-by-one", "m", true, true, Some(0.5), 1.25)])],
        };
        let t = tables(&report);
        assert!(t.starts_with("task           model  resolved  verified  agreed  turns  tokens  cost   time\n"), "{t}");
        assert!(t.contains("\npy-off-by-one  m      yes       yes       yes     2      1,000   $0.50  1.2 s\n"), "{t}");
        assert!(t.contains("\nm      1 of 1    $0.50              1.2 s        1 of 1\n"), "{t}");
        assert!(t.ends_with("invalid, not counted: done: the check already passes before any fix\n"), "{t}");
    }

    #[test]
    fn a_task_file_refuses_unknown_keys_and_names_its_task() {
        let dir = tempfile::tempdir().unwrap();
        let task = dir.path().join("py-bad");
        std::fs::create_dir_all(task.join("workspace")).unwrap();
        std::fs::write(task.join("task.toml"), "file = \"a.py\"\nline = 1\ncheck = [\"true\"]\nchek = 1\n").unwrap();
        let err = load_tasks(dir.path()).err().unwrap();
        assert!(err.starts_with("task py-bad: task.toml: ") && err.contains("unknown field `chek`"), "{err}");
        std::fs::write(task.join("task.toml"), "file = \"a.py\"\nrange = \"4-2\"\ncheck = [\"true\"]\n").unwrap();
        let err = load_tasks(dir.path()).err().unwrap();
        assert_eq!(err, "task py-bad: task.toml: range: the range 4-2 ends before it starts");
        std::fs::write(task.join("task.toml"), "file = \"a.py\"\ncheck = [\"true\"]\n").unwrap();
        let err = load_tasks(dir.path()).err().unwrap();
        assert_eq!(err, "task py-bad: task.toml: say which lines: `line`, `range` or `diagnostics`");
        std::fs::write(task.join("task.toml"), "file = \"a.py\"\nline = 3\ncheck = [\"true\"]\n").unwrap();
        let tasks = load_tasks(dir.path()).unwrap();
        assert_eq!((tasks[0].name.as_str(), tasks[0].file.line), ("py-bad", Some(3)));
        let err = load_tasks(&task).err().unwrap();
        assert!(err.ends_with("py-bad is a task; pass the folder of tasks that holds it"), "{err}");
    }
}
