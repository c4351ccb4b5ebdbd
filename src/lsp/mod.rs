//! The Language Server Protocol face of agentfix: the only module that knows
//! tower-lsp-server and LSP types.
//!
//! - `ordered`: wraps the service so that document notifications are applied
//!   in wire order and panics in handlers become error responses;
//! - `server`: the `LanguageServer` implementation (initialize, code actions,
//!   configuration);
//! - `session`: the session's state (documents, client support, settings,
//!   the registry of runs, downstream servers);
//! - `ext`: agentfix's own protocol (the command's argument and result);
//! - `run`: the `agentfix.fix` command, from arguments to `workspace/applyEdit`;
//! - `alternative`: the `agentfix.applyAlternative` command (a candidate a
//!   run did not choose, applied without asking the model);
//! - `progress`: `$/progress` reporting; `convert`: type conversions;
//! - `transport`: the reader thread (framing, each message decoded once,
//!   malformed ones answered, the service called in wire order) and the
//!   writer thread.
//!
//! Its parts:
//! the only module that knows tower-lsp-server and the server side of LSP
//! (`downstream` speaks LSP types inside, as a client, and hands out its own)

mod alternative;
mod approval;
mod convert;
mod ext;
mod first;
mod ordered;
mod progress;
mod proposal;
mod reviewed;
mod run;
mod server;
mod session;
/// Public for the `lsp_transport` fuzz target, which drives the reader and
/// writer threads themselves.
pub mod transport;

pub use ext::FIX_COMMAND;

// The work of two handlers that depends on nothing but its inputs, public
// so that `benches/lsp.rs` measures the code that runs (no hidden bench
// API): the code-action list of `textDocument/codeAction` with the finished
// runs kept for follow-ups, and the `WorkspaceEdit` a run's proposal is sent
// as.
pub use convert::{EditSupport, FileEdit, workspace_edit};
pub use server::code_actions;
pub use session::{KeptRun, KeptRuns};

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tower_lsp_server::LspService;

use session::Session;

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
/// And the last answers this long to be written.
const END_FLUSH: Duration = Duration::from_millis(200);

/// Serves LSP on stdin/stdout until the client says `exit` or closes stdin;
/// returns the process exit code: 0 when `shutdown` came first, else 1 (as
/// LSP says for `exit`; the same for a client that just went away).
///
/// Either way the session ends at once, without waiting for the client to
/// send anything else: every run is cancelled (its model request dropped,
/// its commands stopped) and the downstream servers are stopped, all within
/// [`END_BUDGET`]. The caller must not wait for the runtime's blocking
/// threads afterwards (stdin is read on a thread of its own, see
/// [`transport`], which is left behind while a client keeps its end open).
/// `input` is stdin after its first message ([`answer_first_on_stdio`]).
pub async fn serve_stdio(input: transport::Input<std::io::Stdin>) -> u8 {
    let session = Arc::new(Session::new());
    let (service, socket) = LspService::build(|client| {
        let _ = session.client.set(client.clone());
        server::Backend::new(client, session.clone())
    })
    .custom_method("window/workDoneProgress/cancel", server::Backend::work_done_progress_cancel)
    .custom_method(ext::DOCUMENT_TEXT_REQUEST, server::Backend::document_text)
    .finish();
    let service = ordered::Ordered::new(service, session.clone());
    let (server_messages, client_responses) = socket.split();
    let writer = match transport::start_writer(stdout_writer(), server_messages) {
        Ok(w) => w,
        Err(e) => {
            tracing::error!("cannot start the stdout thread: {e}");
            return 1;
        }
    };
    let input_ended = CancellationToken::new();
    let on_end = {
        let input_ended = input_ended.clone();
        move || input_ended.cancel()
    };
    let stash = Some(session.stash.clone());
    let reading = transport::start_reader(input, service, client_responses, writer.clone(), stash, CONCURRENCY, on_end);
    if let Err(e) = reading {
        tracing::error!("cannot start the stdin thread: {e}");
        return 1;
    }
    tokio::select! {
        () = session.ending.cancelled() => {}
        () = input_ended.cancelled() => {}
    }
    let why = if session.ending.is_cancelled() { "exit" } else { "end of input" };
    tracing::info!("{why}: ending the session");
    // The transport serves on meanwhile: the cancelled requests' answers go out.
    end_session(&session).await;
    let _ = tokio::task::spawn_blocking(move || writer.flush(END_FLUSH)).await;
    if session.shut_down.load(Ordering::SeqCst) { 0 } else { 1 }
}

/// Cancels every run, waits a little for them to end (dropping a run's
/// model request and commands stops them), and stops the downstream servers.
async fn end_session(session: &Session) {
    let deadline = tokio::time::Instant::now() + END_BUDGET;
    session.ending.cancel();
    session.runs.cancel_all();
    let runs_deadline = tokio::time::Instant::now() + END_RUNS;
    while !session.runs.is_empty() && tokio::time::Instant::now() < runs_deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    if !session.runs.is_empty() {
        tracing::warn!("runs still ending; the process exits without them");
    }
    // A dropped command is stopped by a task of its own: let it start.
    tokio::time::sleep(Duration::from_millis(50)).await;
    if tokio::time::timeout_at(deadline, session.stop_downstream()).await.is_err() {
        tracing::warn!("downstream servers did not stop in time; they are killed");
    }
}

/// Reads the first message on stdin and, when it is `initialize`, answers
/// it on stdout, before anything else starts (see `first`): the process
/// calls it first, then starts logging and the runtime, then
/// [`serve_stdio`].
pub fn answer_first_on_stdio() -> transport::Input<std::io::Stdin> {
    first::answer_first(std::io::stdin(), &mut stdout_writer())
}

/// stdout as a file of its own (a duplicate of the descriptor), so that
/// each message is one `write`: `std::io::Stdout` is line-buffered and
/// would cut every message at its header's line break.
fn stdout_writer() -> Box<dyn std::io::Write + Send> {
    use std::os::fd::AsFd;
    match std::io::stdout().as_fd().try_clone_to_owned() {
        Ok(fd) => Box::new(std::fs::File::from(fd)),
        Err(_) => Box::new(std::io::stdout()),
    }
}
