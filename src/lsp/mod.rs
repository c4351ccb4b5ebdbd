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
//! - `progress`: `$/progress` reporting; `convert`: type conversions;
//! - `transport`: keeps malformed input from stopping the server.

mod approval;
pub mod bench_api;
mod convert;
mod ext;
mod ordered;
mod progress;
mod proposal;
mod run;
mod server;
mod session;
mod transport;

pub use ext::FIX_COMMAND;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tower_lsp_server::{LspService, Server};

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
