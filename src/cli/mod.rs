//! The headless command line: `agentfix fix PATH --line N` runs the same loop
//! over the files on disk and prints a unified diff (`--apply` writes it).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::agent::{RunEvent, Stop};
use crate::config::{Config, Settings};
use crate::fix::{self, Target};
use crate::providers;
use crate::workspace::{NoBuffers, Workspace, unified_diff};

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
}

fn fail(code: u8, msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("agentfix: {msg}");
    ExitCode::from(code)
}

/// Runs `agentfix fix`.
pub async fn fix(args: FixArgs) -> ExitCode {
    let root = match args
        .root
        .clone()
        .map_or_else(std::env::current_dir, Ok)
        .and_then(std::fs::canonicalize)
    {
        Ok(r) => r,
        Err(e) => return fail(exit::USAGE, format!("cannot use the workspace root: {e}")),
    };
    let path = match std::fs::canonicalize(&args.path) {
        Ok(p) if p.is_file() => p,
        Ok(_) => {
            return fail(
                exit::USAGE,
                format!("{} is not a file", args.path.display()),
            );
        }
        Err(e) => return fail(exit::USAGE, format!("{}: {e}", args.path.display())),
    };
    let workspace = Arc::new(Workspace::new(vec![root.clone()]));
    if !workspace.contains(&path) {
        return fail(
            exit::USAGE,
            format!(
                "{} is outside the workspace root {}; pass --root",
                path.display(),
                root.display()
            ),
        );
    }
    let config = match Config::from_process_env(&Settings::default()) {
        Ok(c) => c,
        Err(e) => return fail(exit::USAGE, e),
    };
    let model = match providers::from_config(&config) {
        Ok(m) => m,
        Err(e) => return fail(exit::USAGE, e),
    };
    let target = Target {
        path,
        lines: (args.line, args.line),
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
    let events = |e: RunEvent| match e {
        RunEvent::ToolCalls { turn, calls } => eprintln!("turn {turn}: {}", calls.join(", ")),
    };
    let result = fix::run(
        &config,
        &*model,
        workspace,
        Arc::new(NoBuffers),
        &target,
        &cancel,
        &events,
    )
    .await;
    let outcome = &result.outcome;
    let mut stdout = std::io::stdout().lock();
    for change in &result.changes {
        let _ = stdout.write_all(
            unified_diff(
                &change.display,
                change.original.as_deref(),
                &change.new_text,
            )
            .as_bytes(),
        );
    }
    let _ = stdout.flush();
    eprintln!(
        "agentfix: {} after {} turn(s), {} input + {} output tokens",
        outcome.stop.describe(&result.limits),
        outcome.turns,
        outcome.usage.input_tokens,
        outcome.usage.output_tokens
    );
    if !outcome.summary.is_empty() {
        eprintln!("agentfix: {}", outcome.summary.trim());
    }
    if let Stop::ModelError(_) = outcome.stop {
        return ExitCode::from(exit::MODEL);
    }
    if result.changes.is_empty() {
        return fail(exit::NO_EDIT, "no edit proposed");
    }
    if outcome.stop == Stop::Cancelled {
        return fail(exit::NO_EDIT, "cancelled; nothing written");
    }
    if args.apply {
        for change in &result.changes {
            let written = change
                .path
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|_| std::fs::write(&change.path, &change.new_text));
            if let Err(e) = written {
                return fail(
                    exit::USAGE,
                    format!("could not write {}: {e}", change.display),
                );
            }
            eprintln!("agentfix: wrote {}", change.display);
        }
    }
    ExitCode::from(exit::EDIT)
}
