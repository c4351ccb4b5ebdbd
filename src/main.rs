//! The `agentfix` binary: command-line parsing and logging setup; everything
//! else lives in the library.
//!
//! Its parts:
//! clap and logging setup only: the server logs at info by default, the
//! command line only errors unless `-v`/`-vv` (or `AGENTFIX_LOG`/`RUST_LOG`);
//! `--stdio` is top-level (a `global` flag shows in every subcommand's help)
//! and `lsp --stdio` has its own; the server's own command lines are read
//! without clap (`plain_server`); a one-line hint on stderr when the
//! server's stdin is a terminal

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

/// A language server that puts a coding-agent loop behind one code action.
///
/// Without a subcommand (or with `lsp` or `--stdio`) it serves the Language
/// Server Protocol over stdin/stdout.
#[derive(Debug, Parser)]
#[command(name = "agentfix", version, about, long_about)]
struct Cli {
    /// Serve LSP over stdio (the default; accepted because clients pass it).
    // Not `global`: a global flag is listed in every subcommand's help
    // (`fix --help` showed it); `agentfix lsp --stdio` has its own.
    #[arg(long)]
    stdio: bool,
    /// Show the log on stderr (`-v` info, `-vv` debug); AGENTFIX_LOG or
    /// RUST_LOG set the filter instead.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Option<Command>,
}

/// Arguments of `agentfix lsp`.
#[derive(Debug, clap::Args)]
struct LspArgs {
    /// Serve over stdio (the only transport; accepted because clients pass it).
    #[arg(long)]
    stdio: bool,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the Language Server Protocol over stdio.
    Lsp(LspArgs),
    /// Serve the Agent Client Protocol over stdio (for Zed, JetBrains,
    /// CodeCompanion, avante.nvim, agent-shell).
    Acp(agentfix::acp::AcpArgs),
    /// Run a scripted fix on a sample file: no key, no network, nothing
    /// written outside a temporary folder.
    Demo,
    /// Fix a problem in a file on disk and print the proposed diff.
    Fix(agentfix::cli::FixArgs),
    /// Run a task set (each subfolder of DIR: a broken workspace and its
    /// task.toml) and report how many tasks the fixes resolved.
    Eval(agentfix::cli::EvalArgs),
    /// Print the configuration in force and check that the provider answers.
    Check(agentfix::cli::CheckArgs),
    /// Put back the files the last `fix --apply` in this workspace changed.
    Undo(agentfix::cli::UndoArgs),
    /// Re-run a recorded transcript against its recorded model replies.
    Replay(agentfix::cli::ReplayArgs),
    /// Print the JSON Schema of the settings.
    Schema,
    /// Internal: run a command in the sandbox (started by `run_command`).
    #[command(name = "__sandbox-exec", hide = true)]
    SandboxExec(agentfix::sandbox::ExecArgs),
}

/// Whether the command line is one of the server's own (`agentfix`,
/// `agentfix --stdio`, `agentfix lsp [--stdio]`): those are told apart
/// without clap, whose building of every subcommand's arguments was a good
/// part of what the server did before its `initialize` answer.
fn plain_server(args: &[std::ffi::OsString]) -> bool {
    let args: Vec<Option<&str>> = args.iter().map(|a| a.to_str()).collect();
    matches!(args.as_slice(), [] | [Some("--stdio")] | [Some("lsp")] | [Some("lsp"), Some("--stdio")])
}

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let cli = if plain_server(&args) { Cli { stdio: true, verbose: 0, command: None } } else { Cli::parse() };
    // The sandbox helper must restrict itself while it is single-threaded:
    // before logging and the runtime.
    let command = match cli.command {
        Some(Command::SandboxExec(args)) => return agentfix::sandbox::exec(args),
        command => command,
    };
    // The server reads its first message before anything else starts, and
    // answers it when it is `initialize` (see `lsp::first`).
    let first = matches!(command, Some(Command::Lsp(_)) | None).then(|| {
        // A person who typed `agentfix` sees a server waiting in silence:
        // say what it is waiting for (the server carries on).
        if std::io::stdin().is_terminal() {
            eprintln!(
                "agentfix: waiting for an LSP client on stdin; run `agentfix --help` for the command line, `agentfix demo` to try it"
            );
        }
        agentfix::lsp::answer_first_on_stdio()
    });
    // Logs go to stderr only: stdout carries the protocol. The server's log
    // is the editor's server log (info by default); the command line is
    // quiet unless asked (`-v`), as its progress lines say what happens.
    let serving = matches!(command, Some(Command::Lsp(_) | Command::Acp(_)) | None);
    let default = match (serving, cli.verbose) {
        (true, 0) | (false, 1) => "agentfix=info",
        (false, 0) => "agentfix=error",
        _ => "agentfix=debug",
    };
    let filter = EnvFilter::try_from_env("AGENTFIX_LOG")
        .or_else(|_| EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| EnvFilter::new(default));
    tracing_subscriber::fmt().with_writer(std::io::stderr).with_env_filter(filter).with_ansi(false).init();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("agentfix: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let code = match command {
        Some(Command::Acp(args)) => runtime.block_on(agentfix::acp::serve(args)),
        Some(Command::Fix(args)) => runtime.block_on(agentfix::cli::fix(args)),
        Some(Command::Eval(args)) => runtime.block_on(agentfix::cli::eval(args)),
        Some(Command::Check(args)) => runtime.block_on(agentfix::cli::check(args)),
        Some(Command::Replay(args)) => runtime.block_on(agentfix::cli::replay(args)),
        Some(Command::Demo) => runtime.block_on(agentfix::cli::demo()),
        Some(Command::Undo(args)) => agentfix::cli::undo(args),
        Some(Command::Schema) => agentfix::cli::schema(),
        Some(Command::SandboxExec(_)) => unreachable!("handled before the runtime starts"),
        Some(Command::Lsp(_)) | None => {
            let _ = cli.stdio;
            match first {
                Some(first) => ExitCode::from(runtime.block_on(agentfix::lsp::serve_stdio(first))),
                None => unreachable!("the first message is read above"),
            }
        }
    };
    // What is left (a run still ending, a file read a cancel abandoned) is
    // dropped now, which kills its children; nothing waits for the client
    // or for a stalled disk.
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_s_own_command_lines_skip_clap_and_mean_what_clap_says() {
        let line = |args: &[&str]| args.iter().map(std::ffi::OsString::from).collect::<Vec<_>>();
        for args in [&[][..], &["--stdio"], &["lsp"], &["lsp", "--stdio"]] {
            assert!(plain_server(&line(args)), "{args:?}");
            let parsed = Cli::try_parse_from(std::iter::once("agentfix").chain(args.iter().copied())).unwrap();
            assert_eq!(parsed.verbose, 0);
            assert!(matches!(parsed.command, None | Some(Command::Lsp(_))), "{args:?}");
        }
        for args in [&["-v"][..], &["--stdio", "-v"], &["fix", "a.py"], &["--help"], &["lsp", "--stdio", "-vv"]] {
            assert!(!plain_server(&line(args)), "{args:?}");
        }
    }
}
