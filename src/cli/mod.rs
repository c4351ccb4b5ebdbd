//! The headless command line: `agentfix fix PATH --line N` runs the same loop
//! over the files on disk and prints a unified diff (`--apply` writes it,
//! after a backup that `agentfix undo` restores). With `--diagnostics`, the
//! problems and their lines come from a compiler's or linter's output
//! (`failures`), for CI and scripts. `agentfix demo` (`demo`) runs the same
//! `fix` path with a scripted model on a sample file.
//!
//! Its parts:
//! `agentfix fix`: same `fix::run`, files from disk, unified diff; the
//! target's lines and problems from `--line`, `--range` or `--diagnostics`
//! (`--all`), `--model`/`--settings` as the editor layer (one parser, shared
//! with `check`); `check` (the settings in force as a walk over
//! `Config::in_force`, each with its source, then the key, prices, sandbox,
//! instructions, MCP servers and the connection), `replay`, `schema`,
//! `undo`; `workspace_root`
//! (`--root`'s default: the nearest ancestor with `.git`, else the current
//! directory); `print_progress` (one stderr line per turn and per retry;
//! streamed text and tool starts are for editors' status lines) and `deliver`
//! (diff, summary, the end line with `fix::Spend::with_turns`, a `note:` per
//! changed file that runs code, the API's error last); `run_fix` (the
//! language servers and MCP servers around one `fix::run`, for `fix` and
//! each task of `eval`); `eval` (`agentfix eval DIR`: a task set run through
//! the same `prepare` and `run_fix`, each proposal checked by the task's
//! own check)

mod demo;
mod eval;
mod failures;
mod report;
mod undo;

pub use demo::demo;
pub use eval::{EvalArgs, Report as EvalReport, eval};

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::agent::{RunEvent, Stop};
use crate::config::Config;
use crate::config::provider::{Effort, ProviderKind};
use crate::config::settings::Settings;
use crate::diagnostic::Diagnostic;
use crate::downstream::Downstream;
use crate::fix::{self, Prepared, ProgressLines, Request, Roots, Services, Setup, Target, Verdict};
use crate::follow_up::PastRun;
use crate::instructions::{Cut, Instructions};
use crate::mcp::McpServers;
use crate::model::StreamUpdate;
use crate::position::LineRange;
use crate::pricing::format_tokens;
use crate::providers::{self, ModelClient};
use crate::tools::{Approval, Approver};
use crate::workspace::{NoBuffers, Overlay, Workspace, real_path, runs_code, unified_diff};

/// Exit codes of `agentfix fix`.
pub mod exit {
    /// An edit was proposed (and applied with `--apply`).
    pub const EDIT: u8 = 0;
    /// The run ended without an edit.
    pub const NO_EDIT: u8 = 1;
    /// Usage or configuration error (for instance no API key).
    pub const USAGE: u8 = 2;
    /// The model API failed.
    pub const MODEL: u8 = 3;
    /// An edit was proposed (and applied with `--apply`) that did not pass
    /// its check (`verify`).
    pub const UNVERIFIED: u8 = 4;
}

/// Arguments of `agentfix fix`.
#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("lines").args(["line", "range", "diagnostics", "continue_run"]).required(true).multiple(true))]
pub struct FixArgs {
    /// The file with the problem.
    pub path: PathBuf,
    /// The 1-based line of the problem.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), conflicts_with = "range")]
    pub line: Option<u32>,
    /// The lines to fix, 1-based and inclusive: `12-20`.
    #[arg(long, value_name = "L1-L2", value_parser = parse_range)]
    pub range: Option<LineRange>,
    /// Compiler or linter output naming the problems (a file, or `-` for
    /// stdin): `path:line:col: message` lines (gcc, clang, mypy, ruff,
    /// eslint's unix format), cargo or rustc JSON, `pyright --outputjson`,
    /// `mypy -O json` or SARIF 2.1.0. Without --line or --range, the first
    /// diagnostic of the file and its line are fixed.
    #[arg(long, value_name = "FILE|-")]
    pub diagnostics: Option<PathBuf>,
    /// Fix every diagnostic given for the file in one run (the lines span them).
    #[arg(long, requires = "diagnostics")]
    pub all: bool,
    /// What to do, in words (default: fix the problem at that line).
    #[arg(long)]
    pub instruction: Option<String>,
    /// The workspace root; tools cannot leave it (default: the repository
    /// root, the nearest folder up from the current one with a `.git`, else
    /// the current directory).
    #[arg(long)]
    pub root: Option<PathBuf>,
    /// Write the proposed edit to disk instead of only printing it (after a
    /// backup: `agentfix undo` restores the files).
    #[arg(long)]
    pub apply: bool,
    /// The model for this run, over every other setting (the editor
    /// settings' `model`).
    #[arg(long, value_name = "ID", value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub model: Option<String>,
    /// The effort for this run (`low`, `medium`, `high`: a thinking budget
    /// or `reasoning_effort`, for models that have it), over every other
    /// setting.
    #[arg(long, value_name = "EFFORT", value_parser = parse_effort)]
    pub effort: Option<Effort>,
    /// Run N candidates of the fix (1 to 8) and propose the best, over the
    /// `candidates` setting.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=8))]
    pub candidates: Option<u32>,
    /// Continue the last run on this file (read from its transcript): its
    /// conversation, what became of its proposal, then --instruction.
    #[arg(long = "continue", id = "continue_run")]
    pub continue_run: bool,
    /// Editor settings to apply on top (JSON, as in initializationOptions;
    /// as `agentfix check --settings`).
    #[arg(long, value_name = "JSON")]
    pub settings: Option<String>,
    /// Print the outcome as one JSON object on stdout instead of the diff
    /// (run id, stop reason, files, diff, turns, tokens, cost, transcript,
    /// verification); progress stays on stderr, exit codes are unchanged.
    #[arg(long)]
    pub json: bool,
    /// Let the model run this configured command (see the `commands`
    /// setting); repeatable. Others are denied.
    #[arg(long = "allow-command", value_name = "NAME")]
    pub allow_command: Vec<String>,
}

/// `low`, `medium` or `high`.
fn parse_effort(s: &str) -> Result<Effort, String> {
    serde_json::from_value(serde_json::Value::String(s.trim().to_ascii_lowercase()))
        .map_err(|_| format!("`{s}` is not an effort (known: low, medium, high)"))
}

/// `L1-L2`, 1-based, `L1 <= L2`.
fn parse_range(s: &str) -> Result<LineRange, String> {
    let (a, b) = s.split_once('-').ok_or_else(|| format!("`{s}` is not a line range: expected L1-L2, like 12-20"))?;
    let number = |n: &str| {
        n.trim()
            .parse::<u32>()
            .ok()
            .filter(|&n| n >= 1)
            .ok_or_else(|| format!("`{n}` is not a line number (1 or more)"))
    };
    let (first, last) = (number(a)?, number(b)?);
    if first > last {
        return Err(format!("the range {first}-{last} ends before it starts"));
    }
    Ok(LineRange::from_numbers(first, last))
}

/// Arguments of `agentfix undo`.
#[derive(Debug, clap::Args)]
pub struct UndoArgs {
    /// The workspace whose last applied fix to undo (default: the
    /// repository root, as for `fix`).
    #[arg(long)]
    pub root: Option<PathBuf>,
    /// Restore even the files that changed since the fix was applied.
    #[arg(long, conflicts_with = "list")]
    pub force: bool,
    /// Show the fixes that can be undone, newest first, and change nothing.
    #[arg(long)]
    pub list: bool,
}

/// The editor layer given on the command line: `--settings JSON`, with
/// `--model` over it. `Err` says what is wrong with the JSON.
fn editor_layer(json: Option<&str>) -> Result<Settings, String> {
    match json.map(serde_json::from_str::<serde_json::Value>) {
        None => Ok(Settings::default()),
        Some(Ok(v)) => Settings::from_json(&v).map_err(|e| e.to_string()),
        Some(Err(e)) => Err(format!("not JSON: {e}")),
    }
}

/// Warnings about misspelt keys: every unknown key of `root`'s
/// agentfix.toml, and the keys of `--settings` that look like a misspelt
/// setting. They are accepted all the same.
fn settings_warnings(root: &Path, json: Option<&str>) -> Vec<String> {
    let mut out = Settings::file_warnings(root);
    if let Some(Ok(v)) = json.map(serde_json::from_str::<serde_json::Value>) {
        out.extend(Settings::unknown_keys(&v, true).into_iter().map(|w| format!("--settings: {w}")));
    }
    out
}

/// `agentfix check`: the MCP servers, each started or connected to (within
/// its timeout) and listed with the tools the model gets from it (the
/// resource tools too), then stopped; the number of servers that failed.
async fn print_mcp(config: &Config, root: &std::path::Path) -> u32 {
    let mcp = &config.mcp;
    if mcp.servers.is_empty() {
        println!("MCP servers: none");
        return 0;
    }
    let servers = McpServers::new(mcp, root);
    let mut failed = 0;
    for (name, listed) in servers.list().await {
        match listed {
            Ok(listing) => {
                let offered = listing.offered(&name);
                let names: Vec<String> = offered
                    .iter()
                    .map(|(tool, read_only)| format!("{tool}{}", if *read_only { " (read-only)" } else { "" }))
                    .collect();
                println!("MCP server {name}: {} tools: {}", offered.len(), names.join(", "));
            }
            Err(e) => {
                println!("MCP server {name}: {e}");
                failed += 1;
            }
        }
    }
    servers.stop().await;
    failed
}

/// Approves exactly the commands named (`--allow-command`; `eval`: the
/// workspace's configured commands), saying so on stderr unless `quiet`.
struct AllowList {
    names: Vec<String>,
    quiet: bool,
}

impl AllowList {
    fn say(&self, line: std::fmt::Arguments<'_>) {
        if self.quiet {
            tracing::info!("{line}");
        } else {
            eprintln!("agentfix: {line}");
        }
    }
}

#[async_trait::async_trait]
impl Approver for AllowList {
    async fn approve(&self, name: &str, argv: &[String]) -> Approval {
        if self.names.iter().any(|n| n == name) {
            self.say(format_args!("running `{name}` ({}) in a scratch copy", argv.join(" ")));
            Approval::Always
        } else {
            self.say(format_args!("the model asked to run `{name}`; denied (pass --allow-command {name} to allow it)"));
            Approval::Deny
        }
    }

    /// MCP tools are allowed by their full name (`--allow-command mcp__server__tool`).
    async fn approve_tool(&self, name: &str, _input: &str) -> Approval {
        if self.names.iter().any(|n| n == name) {
            self.say(format_args!("calling the MCP tool `{name}`"));
            Approval::Always
        } else {
            self.say(format_args!(
                "the model asked to call the MCP tool `{name}`; denied (pass --allow-command {name} to allow it)"
            ));
            Approval::Deny
        }
    }
}

/// The workspace root of `fix`, `check` and `undo`: `given`, else the
/// repository the current directory is in (the nearest ancestor with a
/// `.git`, file or folder: worktrees and submodules have a file), else the
/// current directory.
pub fn workspace_root(given: Option<&Path>) -> std::io::Result<PathBuf> {
    if let Some(root) = given {
        return Ok(root.to_path_buf());
    }
    let here = std::env::current_dir()?;
    Ok(here.ancestors().find(|a| a.join(".git").exists()).unwrap_or(&here).to_path_buf())
}

fn fail(code: u8, msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("agentfix: {msg}");
    ExitCode::from(code)
}

/// Arguments of `agentfix replay`.
#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// A transcript written by an earlier run (JSONL).
    pub transcript: PathBuf,
    /// Replay over this workspace instead of the recorded root.
    #[arg(long)]
    pub root: Option<PathBuf>,
}

/// Arguments of `agentfix check`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The workspace whose agentfix.toml applies (default: the repository
    /// root, as for `fix`).
    #[arg(long)]
    pub root: Option<PathBuf>,
    /// Do not contact the provider.
    #[arg(long)]
    pub offline: bool,
    /// Editor settings to apply on top (JSON, as in initializationOptions),
    /// so an editor plugin can show the configuration really in force.
    #[arg(long, value_name = "JSON")]
    pub settings: Option<String>,
    /// List the project instructions that apply to this file (default:
    /// those of the workspace root alone).
    #[arg(long, value_name = "FILE")]
    pub target: Option<PathBuf>,
}

/// `agentfix schema`: the JSON Schema of the settings.
pub fn schema() -> ExitCode {
    println!("{}", serde_json::to_string_pretty(&Settings::json_schema()).unwrap_or_default());
    ExitCode::SUCCESS
}

/// `agentfix replay`: exit 0 when the replay matches, 1 at a divergence.
pub async fn replay(args: ReplayArgs) -> ExitCode {
    match crate::replay::replay(&args.transcript, args.root.as_deref()).await {
        Err(e) => fail(exit::USAGE, e),
        Ok(r) => match r.divergence {
            None => {
                println!(
                    "replay matches the transcript: {} turns, {} tool calls, {} changed files",
                    r.turns, r.tool_calls, r.changed_files
                );
                ExitCode::SUCCESS
            }
            Some(d) => {
                println!("replay diverges: {d}");
                ExitCode::from(1)
            }
        },
    }
}

/// `agentfix check`: the configuration in force (never the key itself),
/// whether the provider answers; exit 1 on any problem.
pub async fn check(args: CheckArgs) -> ExitCode {
    let root = workspace_root(args.root.as_deref()).unwrap_or_default();
    println!("agentfix {}", env!("CARGO_PKG_VERSION"));
    let mut problems = 0;
    match Settings::load_file(&root) {
        Ok(Some(_)) => println!("{}: {}", crate::config::FILE_NAME, root.join(crate::config::FILE_NAME).display()),
        Ok(None) => println!("{}: none in {}", crate::config::FILE_NAME, root.display()),
        Err(e) => {
            println!("{}: {e}", crate::config::FILE_NAME);
            problems += 1;
        }
    }
    for w in settings_warnings(&root, args.settings.as_deref()) {
        println!("warning: {w}");
    }
    let editor = match editor_layer(args.settings.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            println!("settings: {e}");
            return ExitCode::from(1);
        }
    };
    let config = match Config::load(Some(&root), &editor) {
        Ok(c) => c,
        Err(e) => {
            println!("configuration: {e}");
            return ExitCode::from(1);
        }
    };
    print_settings(&config);
    let provider = &config.provider;
    let key_var = provider.kind.key_var();
    match (&provider.api_key, provider.kind.key_required()) {
        (Some(_), _) => println!("api key: {key_var} is set"),
        (None, false) => println!("api key: {key_var} is not set (optional for this provider)"),
        (None, true) => {
            println!("api key: {key_var} is NOT set");
            problems += 1;
        }
    }
    match config.price() {
        Some(p) => println!(
            "prices of {}: ${} input, ${} output, ${} cache read, ${} cache write per million tokens ({})",
            provider.model,
            p.input,
            p.output,
            p.cache_read_price(),
            p.cache_write_price(),
            match config.source("prices") {
                crate::config::Source::Default => "built in",
                other => other.describe(),
            }
        ),
        None => println!("prices of {}: unknown (costs are not shown; set `prices`)", provider.model),
    }
    problems += print_sandbox(&config);
    problems += print_instructions(&config, &root, args.target.as_deref());
    problems += print_mcp(&config, &root).await;
    if !args.offline && problems == 0 {
        match providers::from_config(&config.provider) {
            Err(e) => {
                println!("connection: {e}");
                problems += 1;
            }
            Ok(model) => match tokio::time::timeout(providers::CHECK_TIMEOUT, model.check()).await {
                Ok(Ok(what)) => println!("connection: ok ({what})"),
                Ok(Err(e)) => {
                    println!("connection: FAILED: {}", e.message);
                    problems += 1;
                }
                Err(_) => {
                    println!("connection: FAILED: no answer within {} s", providers::CHECK_TIMEOUT.as_secs());
                    problems += 1;
                }
            },
        }
    }
    if problems == 0 {
        println!("check: ok");
        ExitCode::SUCCESS
    } else {
        println!("check: {problems} problem{} above", if problems == 1 { "" } else { "s" });
        ExitCode::from(1)
    }
}

/// The settings in force, one line each with its value and where it came
/// from: a walk over what the resolution recorded (`Config::in_force`), so
/// a new setting shows with no line here. The API key is no setting, and
/// every line is scrubbed of it all the same.
fn print_settings(config: &Config) {
    let redactor = config.key_redactor();
    for s in &config.in_force {
        let line = format!("{}: {} ({}{})", s.name, s.shown(), s.source.describe(), setting_note(config, s.name));
        println!("{}", redactor.redact_exact(&line));
    }
}

/// What a setting's value does here, where the value alone does not say.
fn setting_note(config: &Config, name: &str) -> String {
    let provider = &config.provider;
    match name {
        "contextBudget" => crate::pricing::context_window(&provider.model)
            .map(|w| format!("; never above the window of {}, {w}", provider.model))
            .unwrap_or_default(),
        "countTokens" if provider.count_tokens && provider.kind != ProviderKind::Anthropic => {
            "; ignored: Anthropic only".to_string()
        }
        "effort" => providers::effort_note(provider),
        "projectInstructions" if !config.project_instructions => "; no instruction files are read".to_string(),
        "transcriptDir" if config.transcripts.dir.is_none() => "; transcripts are off".to_string(),
        _ => String::new(),
    }
}

/// What the command sandbox can give on this system, layer by layer, and
/// whether the configured commands can run. Returns the problems found
/// (commands configured that cannot run).
fn print_sandbox(config: &Config) -> u32 {
    let commands = &config.commands;
    let names: Vec<&str> = commands.entries.keys().map(String::as_str).collect();
    if commands.sandbox == crate::config::commands::CommandSandbox::Off {
        println!("sandbox: off (commands run with all of your rights)");
        return 0;
    }
    let support = crate::sandbox::support();
    let layer = |r: &Result<(), String>| r.as_ref().map_or_else(|e| format!("MISSING ({e})"), |()| "ok".to_string());
    println!(
        "sandbox: namespaces (user, mount, PID, IPC, UTS{}): {}",
        if commands.network { "; network: the host's" } else { ", network" },
        layer(&support.namespaces)
    );
    println!("sandbox: seccomp: {}", layer(&support.seccomp));
    match &support.landlock {
        Ok(v) => println!("sandbox: Landlock: ABI {v}"),
        Err(e) => println!("sandbox: Landlock: MISSING ({e})"),
    }
    if let Some(refusal) = fix::sandbox_refusal(config) {
        println!("sandbox: {refusal}");
        return 1;
    }
    if names.is_empty() {
        return 0;
    }
    // What the probes cannot tell (a container that forbids mounting a
    // fresh /proc, say): a command really run in the sandbox.
    match sandbox_trial() {
        Ok(()) => {
            println!("sandbox: a trial command ran in it: ok");
            0
        }
        Err(e) => {
            println!("sandbox: a trial command FAILED: {e}");
            1
        }
    }
}

/// Runs `true` through the sandbox helper in an empty folder.
fn sandbox_trial() -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let out = std::process::Command::new(crate::sandbox::helper_exe())
        .arg(crate::sandbox::EXEC_SUBCOMMAND)
        .arg("--write")
        .arg(dir.path())
        .args(["--", "true"])
        .current_dir(dir.path())
        .env_clear()
        .envs(crate::secrets::allowed_env(&[]))
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot start {}: {e}", crate::sandbox::helper_exe().display()))?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    Err(stderr.lines().last().unwrap_or("").trim_start_matches("agentfix sandbox: ").to_string())
}

/// The project instructions `check` finds for `root`, or for `target`
/// within it: each file in force with its size and whether it was cut,
/// each one skipped and why. Returns the problems found (a target outside
/// the root).
fn print_instructions(config: &Config, root: &std::path::Path, target: Option<&std::path::Path>) -> u32 {
    if !config.project_instructions {
        return 0;
    }
    let workspace = Workspace::new(vec![root.to_path_buf()]).with_protected(&config.exclude);
    let target = match target.map(std::fs::canonicalize) {
        None => None,
        Some(Ok(t)) if workspace.contains(&t) => Some(t),
        Some(Ok(t)) => {
            println!("project instructions: {} is outside the workspace root {}", t.display(), root.display());
            return 1;
        }
        Some(Err(e)) => {
            println!("project instructions: --target: {e}");
            return 1;
        }
    };
    let found = Instructions::find(&workspace, target.as_deref());
    let scope = match &target {
        Some(t) => format!("for {}", workspace.display(t)),
        None => "for the workspace root".to_string(),
    };
    if found.is_empty() {
        println!("project instructions {scope}: none");
    } else {
        let carried: usize = found.files.iter().map(|f| f.text.len()).sum();
        println!("project instructions {scope}: {} file(s), {carried} bytes in the system prompt", found.files.len());
    }
    for f in &found.files {
        let cut = match f.cut {
            None => String::new(),
            Some(Cut::File) => format!("; cut at {} KB", crate::instructions::MAX_FILE_BYTES / 1024),
            Some(Cut::Total) => {
                format!(
                    "; cut: the {} KB of all instruction files ran out",
                    crate::instructions::MAX_TOTAL_BYTES / 1024
                )
            }
        };
        println!("  {} ({} bytes{cut})", f.path, f.size);
    }
    for s in &found.skipped {
        println!("  skipped {}: {}", s.path, s.why);
    }
    0
}

/// Runs `agentfix fix`.
pub async fn fix(args: FixArgs) -> ExitCode {
    let (prepared, model, request) = match prepare(&args, &|line| eprintln!("agentfix: {line}")) {
        Ok(x) => x,
        Err(e) => return fail(exit::USAGE, e),
    };
    let root = prepared.workspace().primary_root().to_path_buf();
    let lines = ProgressLines::priced(prepared.config.price());
    let events = |e: RunEvent| print_progress(&lines, &e);
    let run = Lent {
        model,
        approver: Arc::new(AllowList { names: args.allow_command.clone(), quiet: false }),
        progress: &events,
        cancel: cancelled_by_ctrl_c(),
    };
    let result = run_fix(&prepared, run, request).await;
    let apply = args.apply.then_some(root.as_path());
    if !args.json {
        return deliver(&result, apply, true);
    }
    let code = deliver(&result, apply, false);
    // Written when every change is on disk as proposed.
    let written = apply.is_some()
        && !result.changes().is_empty()
        && result.changes().iter().all(|c| std::fs::read_to_string(&c.path).is_ok_and(|t| t == c.new_text));
    let report = report::FixReport::of(&result, written);
    println!("{}", serde_json::to_string(&report).unwrap_or_default());
    code
}

/// A token cancelled by Ctrl-C.
fn cancelled_by_ctrl_c() -> CancellationToken {
    let cancel = CancellationToken::new();
    let on_ctrl_c = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_ctrl_c.cancel();
        }
    });
    cancel
}

/// What a command-line front end lends a run besides the language servers
/// and MCP tools [`run_fix`] starts for it.
struct Lent<'a> {
    model: Arc<dyn ModelClient>,
    approver: Arc<dyn Approver>,
    progress: &'a (dyn Fn(RunEvent) + Send + Sync),
    cancel: CancellationToken,
}

/// Runs the prepared fix with the configured language servers and MCP
/// servers over its root, stopped when it ends (`fix`, and each task of
/// `eval`).
async fn run_fix(prepared: &Prepared, lent: Lent<'_>, request: Request) -> fix::FixResult {
    let root = prepared.workspace().primary_root().to_path_buf();
    let config = &prepared.config;
    let downstream = Arc::new(Downstream::from_config(&config.downstream, vec![root.clone()]));
    let mcp = Arc::new(McpServers::new(&config.mcp, &root));
    let services = Services {
        model: lent.model,
        symbols: Some(downstream.clone()),
        approver: Some(lent.approver),
        mcp: Some(mcp.clone()),
        progress: lent.progress,
        cancel: lent.cancel,
    };
    let result = fix::run(prepared, services, request).await;
    // The log is quiet on the command line: a server the run went without
    // is said here.
    for why in mcp.failures().await {
        eprintln!("warning: {why}");
    }
    downstream.stop_all().await;
    mcp.stop().await;
    result
}

/// One line on stderr per turn (its tool calls and the tokens so far), one
/// per retry and per context edit. Streamed text and "preparing edit_file"
/// are for an editor's status line, which replaces them in place; on a
/// terminal they would repeat the turn.
fn print_progress(lines: &ProgressLines, event: &RunEvent) {
    if let RunEvent::Stream(StreamUpdate::ToolStart(_)) = event {
        lines.line(event);
        return;
    }
    if let Some(line) = lines.line(event)
        && !line.streaming
    {
        eprintln!("{}", line.text);
    }
}

/// The checked run, its model client and the request, or why not. The
/// arguments are checked before the key is asked for: a wrong line or file
/// says so, whatever the provider. What it notes on the way (warnings, the
/// diagnostics chosen) goes to `say`.
fn prepare(args: &FixArgs, say: &dyn Fn(&str)) -> Result<(Prepared, Arc<dyn ModelClient>, Request), String> {
    let root = workspace_root(args.root.as_deref())
        .and_then(std::fs::canonicalize)
        .map_err(|e| format!("cannot use the workspace root: {e}"))?;
    let path = match std::fs::canonicalize(&args.path) {
        Ok(p) if p.is_file() => p,
        Ok(_) => return Err(format!("{} is not a file", args.path.display())),
        Err(e) => return Err(format!("{}: {e}", args.path.display())),
    };
    let editor = editor_layer(args.settings.as_deref()).map_err(|e| format!("--settings: {e}"))?;
    for w in settings_warnings(&root, args.settings.as_deref()) {
        say(&format!("warning: {w}"));
    }
    // The lines are chosen once the workspace is known (a diagnostic's path
    // is read relative to it).
    let target =
        Target { path, lines: LineRange::line(0), problems: Vec::new(), instruction: args.instruction.clone() };
    let mut request =
        Request { model: args.model.clone(), effort: args.effort, candidates: args.candidates, ..Request::new(target) };
    let setup = Setup::load(Some(&root), &editor, &request).map_err(|e| e.to_string())?;
    let prepared =
        setup.prepare(Roots::Containing(vec![root]), &request, Arc::new(NoBuffers)).map_err(|e| e.to_string())?;
    let path = &request.target.path;
    (request.target.lines, request.target.problems) = match choose_lines(args, &prepared.overlay, path, say) {
        // A follow-up needs no lines: its message says what to look at.
        Err(_) if args.continue_run && args.line.is_none() && args.range.is_none() && args.diagnostics.is_none() => {
            (LineRange::line(0), Vec::new())
        }
        other => other?,
    };
    let root = prepared.workspace().primary_root();
    request.follow_up = past_run(args, &prepared.config, root, path, say)?.map(Arc::new);
    let model = prepared.model().map_err(|e| e.to_string())?;
    if let Some(refusal) = fix::sandbox_refusal(&prepared.config) {
        say(&format!("warning: {refusal}"));
    }
    Ok((prepared, model, request))
}

/// With `--continue`, the last run on the target, from its transcript.
fn past_run(
    args: &FixArgs,
    config: &Config,
    root: &Path,
    target: &Path,
    say: &dyn Fn(&str),
) -> Result<Option<PastRun>, String> {
    if !args.continue_run {
        return Ok(None);
    }
    let Some(dir) = &config.transcripts.dir else {
        return Err("--continue reads the last run from its transcript, and transcripts are off (`transcripts`)".into());
    };
    let path = crate::replay::latest_run(dir, root, target)?;
    say(&format!("continuing the run of {}", path.display()));
    crate::replay::past_run(&path).map(Some)
}

/// The most `--diagnostics` input read (as a model error body's cap is
/// there for the wire: everything from outside is bounded).
const MAX_DIAGNOSTICS_INPUT: u64 = 64 << 20;

/// The run's lines and problems: from `--line`/`--range`, from the
/// diagnostics given for the file (the first, or `--all`), or both (the
/// diagnostics on those lines). The files the diagnostics name are read
/// (for their columns) through a fresh overlay of the run's workspace, as
/// the run reads them but without pinning them as its bases.
fn choose_lines(
    args: &FixArgs,
    overlay: &Overlay,
    path: &Path,
    say: &dyn Fn(&str),
) -> Result<(LineRange, Vec<Diagnostic>), String> {
    let workspace = overlay.workspace();
    let shown = workspace.display(path);
    let given = args.line.map(|n| LineRange::from_numbers(n, n)).or(args.range);
    if let Some(lines) = given {
        let count = line_count(path).map_err(|e| format!("{shown}: {e}"))?;
        let (_, last) = lines.numbers();
        if last > count {
            return Err(format!("line {last} is past the end of {shown} ({count} lines)"));
        }
    }
    let Some(source) = &args.diagnostics else {
        return given
            .map(|l| (l, Vec::new()))
            .ok_or_else(|| "say which lines: --line, --range or --diagnostics".into());
    };
    let text = read_diagnostics(source)?;
    let files = overlay.fresh();
    let found = failures::parse(&text, workspace.primary_root(), &|p| files.read(p).ok()).map_err(|e| e.to_string())?;
    if !found.outside.is_empty() {
        say(&format!(
            "left out the diagnostics of {} path(s) outside the workspace root (never opened): {}",
            found.outside.len(),
            found.outside.join(", ")
        ));
    }
    // Paths are lexical; the target is canonical. Each path's real place
    // is looked up once (it lies inside the root).
    let mut same: HashMap<PathBuf, bool> = HashMap::new();
    let all = found.diagnostics.len();
    let mut mine: Vec<Diagnostic> = found
        .diagnostics
        .into_iter()
        .filter(|d| {
            *same.entry(d.path.clone()).or_insert_with(|| d.path == path || real_path(&d.path).as_deref() == Some(path))
        })
        .map(|d| d.diagnostic)
        .collect();
    let others = all - mine.len();
    // File order; the input's order among diagnostics at one place.
    mine.sort_by_key(|d| d.at);
    if let Some(lines) = given {
        mine.retain(|d| lines.contains(d.at.line));
    }
    if !args.all {
        mine.truncate(1);
    }
    let (Some(first), Some(last)) = (mine.first(), mine.last()) else {
        let within = given.map(|l| l.numbers()).map(|(a, b)| format!(" within lines {a}-{b}")).unwrap_or_default();
        return Err(format!(
            "the diagnostics ({}, {others} about other files) name no line of {shown}{within}: nothing to fix",
            found.format.name()
        ));
    };
    let lines = given.unwrap_or(LineRange::new(first.at.line, last.at.line));
    let (a, b) = lines.numbers();
    say(&format!("fixing {} diagnostic(s) of {shown} from {} (lines {a}-{b})", mine.len(), found.format.name()));
    Ok((lines, mine))
}

/// Lines of the file as an editor numbers them (an empty file has line 1).
fn line_count(path: &Path) -> std::io::Result<u64> {
    let bytes = std::fs::read(path)?;
    let breaks = bytes.iter().filter(|&&b| b == b'\n').count() as u64;
    let unterminated = u64::from(bytes.last().is_some_and(|&b| b != b'\n'));
    Ok((breaks + unterminated).max(1))
}

/// The `--diagnostics` input: a file, or stdin for `-`; at most
/// `MAX_DIAGNOSTICS_INPUT` bytes; bytes that are not UTF-8 are replaced.
fn read_diagnostics(source: &Path) -> Result<String, String> {
    let name = if source == Path::new("-") { "stdin".to_string() } else { source.display().to_string() };
    let mut bytes = Vec::new();
    let read = if source == Path::new("-") {
        std::io::stdin().lock().take(MAX_DIAGNOSTICS_INPUT + 1).read_to_end(&mut bytes)
    } else {
        std::fs::File::open(source).and_then(|f| f.take(MAX_DIAGNOSTICS_INPUT + 1).read_to_end(&mut bytes))
    };
    read.map_err(|e| format!("--diagnostics {name}: {e}"))?;
    if bytes.len() as u64 > MAX_DIAGNOSTICS_INPUT {
        return Err(format!("--diagnostics {name}: more than {} MB", MAX_DIAGNOSTICS_INPUT >> 20));
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Prints the diff and the run's end, writes the edits with `--apply` (into
/// this root, after a backup), and maps the verdict to the exit code.
fn deliver(result: &fix::FixResult, apply: Option<&Path>, diff: bool) -> ExitCode {
    let outcome = &result.outcome;
    let mut stdout = std::io::stdout().lock();
    for change in result.changes().iter().filter(|_| diff) {
        let _ =
            stdout.write_all(unified_diff(&change.display, change.original.as_deref(), &change.new_text).as_bytes());
    }
    let _ = stdout.flush();
    drop(stdout);
    if !outcome.summary.trim().is_empty() {
        eprintln!("agentfix: {}", crate::fix::brief(outcome.summary.trim()));
    }
    if let Some(t) = &result.transcript {
        eprintln!("agentfix: transcript: {}", t.display());
    }
    // The run's end, then what it took (one format with the progress lines
    // and the editor's label), then the cache's part of it.
    let u = &outcome.usage;
    let cached = if u.cache_read_tokens + u.cache_write_tokens > 0 {
        format!(
            "; {} read from the prompt cache, {} written to it",
            format_tokens(u.cache_read_tokens),
            format_tokens(u.cache_write_tokens)
        )
    } else {
        String::new()
    };
    // A server without usage (llama-cpp-python): four bytes a token.
    let estimated = if u.estimated { "; estimated: the server reported no usage" } else { "" };
    let spent = format!("{}{cached}{estimated}", result.spend.with_turns(outcome.turns));
    if let Stop::ModelError(e) = &outcome.stop {
        // The API's message last, whole: it is the sentence to act on.
        return fail(exit::MODEL, format!("the model API failed ({spent}): {}", e.message.trim()));
    }
    eprintln!("agentfix: {} ({spent})", outcome.stop.describe(&result.limits));
    let changes = match &result.verdict {
        Verdict::Cancelled => return fail(exit::NO_EDIT, "cancelled; nothing written"),
        Verdict::Discarded { files, .. } => {
            return fail(
                exit::NO_EDIT,
                format!("the run stopped early; {files} edited file(s) discarded (partialEdits = discard)"),
            );
        }
        Verdict::NoEdit(crate::fix::NoEdit::NoToolCall(_)) => {
            return fail(exit::NO_EDIT, format!("no edit proposed: {}", crate::fix::NO_TOOL_CALL));
        }
        Verdict::NoEdit(crate::fix::NoEdit::Unverified(why)) => {
            return fail(exit::NO_EDIT, format!("no edit offered (verify.offerUnverified = false): {why}"));
        }
        Verdict::NoEdit(_) => return fail(exit::NO_EDIT, "no edit proposed"),
        Verdict::Proposal(p) => &p.changes,
    };
    // Best of N: each candidate, the chosen one marked.
    for c in &result.candidates {
        let checked = if c.verified { "verified" } else { "not verified" };
        let cost = c.cost_usd.map(|usd| format!(", {}", crate::pricing::format_usd(usd))).unwrap_or_default();
        let chosen = if c.chosen { " (chosen)" } else { "" };
        eprintln!(
            "agentfix: candidate {} of {}: {checked}, {} lines changed{cost}, {}{chosen}",
            c.index,
            result.candidates.len(),
            c.lines_changed,
            c.stop_reason
        );
    }
    // The check's line, as the editor's label leads with it.
    let line = result.verification.as_ref().and_then(|v| v.line());
    if let Some(line) = &line {
        eprintln!("agentfix: {line}");
    }
    let unverified = line.is_some() && result.verification.as_ref().is_some_and(|v| !v.verified);
    // A change that runs code later (a git hook, the editor's tasks, a
    // build script) reads like configuration in the diff: say so.
    for change in changes {
        if let Some(why) = runs_code(Path::new(&change.display)) {
            let then = if apply.is_some() {
                "review it before it runs (`agentfix undo` takes it back)"
            } else {
                "review it before accepting"
            };
            eprintln!("agentfix: note: {} runs code ({why}); {then}", change.display);
        }
    }
    if let Some(root) = apply {
        match undo::apply(root, changes) {
            Ok(written) => {
                for file in written {
                    eprintln!("agentfix: wrote {file}");
                }
                eprintln!("agentfix: `agentfix undo` puts the files back as they were");
            }
            Err(e) => return fail(exit::USAGE, e),
        }
    }
    ExitCode::from(if unverified { exit::UNVERIFIED } else { exit::EDIT })
}

/// `agentfix undo`: restores the files of the last `fix --apply` in the
/// root (exit 0), or says why not (nothing to undo, or files changed
/// since: exit 1; an unusable root or backup: exit 2). `--list` shows the
/// backups instead.
pub fn undo(args: UndoArgs) -> ExitCode {
    let root = match workspace_root(args.root.as_deref()).and_then(std::fs::canonicalize) {
        Ok(r) => r,
        Err(e) => return fail(exit::USAGE, format!("cannot use the workspace root: {e}")),
    };
    if args.list {
        return match undo::list(&root) {
            Err(e) => fail(exit::USAGE, e),
            Ok(entries) if entries.is_empty() => fail(exit::NO_EDIT, format!("nothing to undo in {}", root.display())),
            Ok(entries) => {
                for e in entries {
                    println!("{}: {}", undo::format_utc(e.applied_at_ms), e.files.join(", "));
                }
                ExitCode::SUCCESS
            }
        };
    }
    match undo::undo(&root, args.force) {
        Err(e) => fail(exit::USAGE, e),
        Ok(undo::Undo::Nothing) => fail(exit::NO_EDIT, format!("nothing to undo in {}", root.display())),
        Ok(undo::Undo::Refused(changed)) => fail(
            exit::NO_EDIT,
            format!(
                "nothing undone: {}; pass --force to put back the files as they were before the fix anyway",
                changed.join("; ")
            ),
        ),
        Ok(undo::Undo::Done { restored, removed }) => {
            for f in restored {
                eprintln!("agentfix: restored {f}");
            }
            for f in removed {
                eprintln!("agentfix: removed {f} (the fix created it)");
            }
            ExitCode::SUCCESS
        }
    }
}
