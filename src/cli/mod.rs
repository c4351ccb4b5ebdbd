//! The headless command line: `agentfix fix PATH --line N` runs the same loop
//! over the files on disk and prints a unified diff (`--apply` writes it).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::agent::RunEvent;
use crate::config::{Config, ProviderKind, Settings};
use crate::downstream::SymbolSource;
use crate::fix::{self, ProgressLines, Setup, Target, Verdict};
use crate::instructions::{Cut, Instructions};
use crate::providers;
use crate::tools::{Approval, Approver};
use crate::workspace::{NoBuffers, Overlay, Workspace, unified_diff};

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
}

/// Arguments of `agentfix fix`.
#[derive(Debug, clap::Args)]
pub struct FixArgs {
    /// The file with the problem.
    pub path: PathBuf,
    /// The 1-based line of the problem.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub line: u32,
    /// What to do, in words (default: fix the problem at that line).
    #[arg(long)]
    pub instruction: Option<String>,
    /// The workspace root; tools cannot leave it (default: the current directory).
    #[arg(long)]
    pub root: Option<PathBuf>,
    /// Write the proposed edit to disk instead of only printing it.
    #[arg(long)]
    pub apply: bool,
    /// Let the model run this configured command (see the `commands`
    /// setting); repeatable. Others are denied.
    #[arg(long = "allow-command", value_name = "NAME")]
    pub allow_command: Vec<String>,
}

/// Approves exactly the commands named with `--allow-command`.
struct AllowList(Vec<String>);

#[async_trait::async_trait]
impl Approver for AllowList {
    async fn approve(&self, name: &str, argv: &[String]) -> Approval {
        if self.0.iter().any(|n| n == name) {
            eprintln!("agentfix: running `{name}` ({}) in a scratch copy", argv.join(" "));
            Approval::Always
        } else {
            eprintln!("agentfix: the model asked to run `{name}`; denied (pass --allow-command {name} to allow it)");
            Approval::Deny
        }
    }
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
    /// The workspace whose agentfix.toml applies (default: the current directory).
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
    let root = args.root.clone().map_or_else(std::env::current_dir, Ok).unwrap_or_default();
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
    let editor = match args.settings.as_deref().map(serde_json::from_str::<serde_json::Value>) {
        None => Settings::default(),
        Some(Ok(v)) => match Settings::from_json(&v) {
            Ok(s) => s,
            Err(e) => {
                println!("settings: {e}");
                return ExitCode::from(1);
            }
        },
        Some(Err(e)) => {
            println!("settings: not JSON: {e}");
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
    let src = |name: &str| config.source(name).describe();
    let provider = &config.provider;
    println!("provider: {} ({})", provider.kind.name(), src("provider"));
    println!("model: {} ({})", provider.model, src("model"));
    println!("baseUrl: {} ({})", provider.base_url, src("baseUrl"));
    let key_var = provider.kind.key_var();
    match (&provider.api_key, provider.kind.key_required()) {
        (Some(_), _) => println!("api key: {key_var} is set"),
        (None, false) => println!("api key: {key_var} is not set (optional for this provider)"),
        (None, true) => {
            println!("api key: {key_var} is NOT set");
            problems += 1;
        }
    }
    let limits = &config.limits;
    println!("maxTurns: {} ({})", limits.max_turns, src("maxTurns"));
    println!("maxTokens: {} ({})", limits.max_tokens, src("maxTokens"));
    println!("maxOutputTokens: {} ({})", limits.max_output_tokens, src("maxOutputTokens"));
    match limits.max_cost {
        Some(cap) => println!("maxCostUsd: {} ({})", cap.usd, src("maxCostUsd")),
        None => println!("maxCostUsd: none (default)"),
    }
    match crate::pricing::context_window(&provider.model) {
        Some(w) => println!(
            "contextBudget: {} ({}; never above the window of {}, {w})",
            limits.context_budget,
            src("contextBudget"),
            provider.model
        ),
        None => println!("contextBudget: {} ({})", limits.context_budget, src("contextBudget")),
    }
    println!("contextEditing: {:?} ({})", limits.context_editing, src("contextEditing"));
    println!("timeoutSecs: {} ({})", limits.timeout.as_secs(), src("timeoutSecs"));
    println!("maxRetries: {} ({})", provider.max_retries, src("maxRetries"));
    let ignored = if provider.count_tokens && provider.kind != ProviderKind::Anthropic {
        "; ignored: Anthropic only"
    } else {
        ""
    };
    println!("countTokens: {} ({}{ignored})", provider.count_tokens, src("countTokens"));
    let effort = provider.effort.map_or("none", |e| e.name());
    println!("effort: {effort} ({}{})", src("effort"), providers::effort_note(provider));
    match config.price() {
        Some(p) => println!(
            "prices of {}: ${} input, ${} output, ${} cache read, ${} cache write per million tokens ({})",
            provider.model,
            p.input,
            p.output,
            p.cache_read_price(),
            p.cache_write_price(),
            if config.source("prices") == crate::config::Source::Default { "built in" } else { src("prices") }
        ),
        None => println!("prices of {}: unknown (costs are not shown; set `prices`)", provider.model),
    }
    println!("partialEdits: {:?} ({})", config.partial_edits, src("partialEdits"));
    match &config.transcripts.dir {
        Some(d) => println!("transcripts: {}", d.display()),
        None => println!("transcripts: off"),
    }
    problems += print_instructions(&config, &root, args.target.as_deref());
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
    if problems == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) }
}

/// The project instructions `check` finds for `root`, or for `target`
/// within it: each file in force with its size and whether it was cut,
/// each one skipped and why. Returns the problems found (a target outside
/// the root).
fn print_instructions(config: &Config, root: &std::path::Path, target: Option<&std::path::Path>) -> u32 {
    let source = config.source("projectInstructions").describe();
    if !config.project_instructions {
        println!("projectInstructions: false ({source}; no instruction files are read)");
        return 0;
    }
    println!("projectInstructions: true ({source})");
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
    let (setup, workspace, path) = match prepare(&args) {
        Ok(x) => x,
        Err(e) => return fail(exit::USAGE, e),
    };
    let root = workspace.primary_root().to_path_buf();
    let target = Target {
        path,
        lines: crate::position::LineRange::from_numbers(args.line, args.line),
        problems: Vec::new(),
        instruction: args.instruction.clone(),
    };
    let cancel = CancellationToken::new();
    let on_ctrl_c = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_ctrl_c.cancel();
        }
    });
    let lines = ProgressLines::priced(setup.config.price());
    let events = |e: RunEvent| {
        if let Some(line) = lines.line(&e)
            && !line.streaming
        {
            eprintln!("{}", line.text);
        }
    };
    let downstream = Arc::new(setup.downstream(vec![root]));
    let symbols: Arc<dyn SymbolSource> = downstream.clone();
    let overlay = Arc::new(Overlay::new(Arc::new(workspace), Arc::new(NoBuffers)));
    let approver: Arc<dyn Approver> = Arc::new(AllowList(args.allow_command.clone()));
    let result =
        fix::run(&setup.config, &*setup.model, overlay, Some(symbols), Some(approver), &target, None, &cancel, &events)
            .await;
    downstream.stop_all().await;
    deliver(&result, args.apply)
}

/// The configuration, the run's workspace and the target's path, or why not.
fn prepare(args: &FixArgs) -> Result<(Setup, Workspace, PathBuf), String> {
    let root = args
        .root
        .clone()
        .map_or_else(std::env::current_dir, Ok)
        .and_then(std::fs::canonicalize)
        .map_err(|e| format!("cannot use the workspace root: {e}"))?;
    let path = match std::fs::canonicalize(&args.path) {
        Ok(p) if p.is_file() => p,
        Ok(_) => return Err(format!("{} is not a file", args.path.display())),
        Err(e) => return Err(format!("{}: {e}", args.path.display())),
    };
    let setup = Setup::load(Some(&root), &Settings::default()).map_err(|e| e.to_string())?;
    let workspace = setup.workspace(vec![root.clone()]);
    if !workspace.contains(&path) {
        return Err(format!("{} is outside the workspace root {}; pass --root", path.display(), root.display()));
    }
    if workspace.is_protected_target(&path) {
        return Err(format!(
            "{} is a protected file (secrets such as .env files, keys and credentials are never sent to the model)",
            workspace.display(&path)
        ));
    }
    Ok((setup, workspace, path))
}

/// Prints the diff and the run's end, writes the edits with `--apply`, and
/// maps the verdict to the exit code.
fn deliver(result: &fix::FixResult, apply: bool) -> ExitCode {
    let outcome = &result.outcome;
    let mut stdout = std::io::stdout().lock();
    for change in result.changes() {
        let _ =
            stdout.write_all(unified_diff(&change.display, change.original.as_deref(), &change.new_text).as_bytes());
    }
    let _ = stdout.flush();
    let u = &outcome.usage;
    let cached = if u.cache_read_tokens + u.cache_write_tokens > 0 {
        format!(" ({} read from the prompt cache, {} written to it)", u.cache_read_tokens, u.cache_write_tokens)
    } else {
        String::new()
    };
    let cost = result.spend.cost_usd.map(|c| format!(", {}", crate::pricing::format_usd(c))).unwrap_or_default();
    eprintln!(
        "agentfix: {} after {} turn(s), {} input{cached} + {} output tokens{cost}",
        outcome.stop.describe(&result.limits),
        outcome.turns,
        u.input_tokens,
        u.output_tokens
    );
    if !outcome.summary.is_empty() {
        eprintln!("agentfix: {}", outcome.summary.trim());
    }
    if result.model_failed() {
        return ExitCode::from(exit::MODEL);
    }
    if let Some(t) = &result.transcript {
        eprintln!("agentfix: transcript: {}", t.display());
    }
    let changes = match &result.verdict {
        Verdict::Cancelled => return fail(exit::NO_EDIT, "cancelled; nothing written"),
        Verdict::Discarded { files, .. } => {
            return fail(
                exit::NO_EDIT,
                format!("the run stopped early; {files} edited file(s) discarded (partialEdits = discard)"),
            );
        }
        Verdict::NoEdit(_) => return fail(exit::NO_EDIT, "no edit proposed"),
        Verdict::Proposal(p) => &p.changes,
    };
    if apply {
        for change in changes {
            let written = change
                .path
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|_| std::fs::write(&change.path, &change.new_text));
            if let Err(e) = written {
                return fail(exit::USAGE, format!("could not write {}: {e}", change.display));
            }
            eprintln!("agentfix: wrote {}", change.display);
        }
    }
    ExitCode::from(exit::EDIT)
}
