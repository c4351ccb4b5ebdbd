//! The agent side of the connection, through the SDK's v1 builder over
//! stdio (one JSON-RPC message per line): `initialize` (protocol v1; no
//! `loadSession`, since a session's conversation lives in memory; prompts
//! with embedded context and resource links; stdio and HTTP MCP servers,
//! not the legacy SSE transport; no
//! authentication methods, as the key comes from the environment;
//! `agentInfo` with the binary's version), `session/new`, `session/prompt`
//! (the run is spawned: the SDK's dispatch loop must stay free for the
//! client's answers to our requests and for `session/cancel`), and
//! `session/cancel`. Other methods get the SDK's "method not found". When
//! the client closes stdin, every run is cancelled and the sessions' servers
//! are stopped.

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, ClientCapabilities, Implementation, InitializeRequest, InitializeResponse,
    McpCapabilities, NewSessionRequest, NewSessionResponse, PromptCapabilities, PromptRequest, PromptResponse,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, Error, Stdio, on_receive_notification, on_receive_request};
use tokio_util::sync::CancellationToken;

use super::peer::Peer;
use super::session::Session;
use super::turn::{self, Offers, Prompt};
use crate::config::settings::Settings;

/// The agent's state over the connection.
struct Server {
    /// The `--settings` layer.
    editor: Settings,
    client: OnceLock<ClientCapabilities>,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    next: AtomicU64,
    /// Cancelled when the client goes away; every run's cancel is a child.
    shutdown: CancellationToken,
}

/// Serves ACP on stdin/stdout until the client closes stdin.
pub(super) async fn serve(editor: Settings) -> ExitCode {
    let server = Arc::new(Server {
        editor,
        client: OnceLock::new(),
        sessions: Mutex::default(),
        next: AtomicU64::new(1),
        shutdown: CancellationToken::new(),
    });
    let (s1, s2, s3, s4) = (server.clone(), server.clone(), server.clone(), server.clone());
    let served = Agent
        .v1()
        .name("agentfix")
        .on_receive_request(
            async move |req: InitializeRequest, responder: Responder<InitializeResponse>, _: ConnectionTo<Client>| {
                responder.respond(s1.initialize(req))
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |req: NewSessionRequest, responder: Responder<NewSessionResponse>, _: ConnectionTo<Client>| {
                responder.respond_with_result(s2.new_session(req))
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |req: PromptRequest, responder: Responder<PromptResponse>, cx: ConnectionTo<Client>| {
                s3.prompt(req, responder, cx)
            },
            on_receive_request!(),
        )
        .on_receive_notification(
            async move |n: CancelNotification, _: ConnectionTo<Client>| {
                if let Some(s) = s4.session(&n.session_id.0) {
                    s.cancel();
                }
                Ok(())
            },
            on_receive_notification!(),
        )
        .connect_to(Stdio::new())
        .await;
    server.shutdown.cancel();
    let sessions: Vec<Arc<Session>> = lock(&server.sessions).drain().map(|(_, s)| s).collect();
    for s in sessions {
        s.stop().await;
    }
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("the ACP connection failed: {e}");
            ExitCode::from(1)
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Server {
    fn initialize(&self, req: InitializeRequest) -> InitializeResponse {
        let _ = self.client.set(req.client_capabilities);
        let prompts = PromptCapabilities::new().embedded_context(true);
        let capabilities = AgentCapabilities::new()
            .load_session(false)
            .prompt_capabilities(prompts)
            .mcp_capabilities(McpCapabilities::new().http(true).sse(false));
        InitializeResponse::new(ProtocolVersion::V1)
            .agent_capabilities(capabilities)
            .agent_info(Implementation::new("agentfix", env!("CARGO_PKG_VERSION")))
    }

    fn new_session(&self, req: NewSessionRequest) -> Result<NewSessionResponse, Error> {
        let id = format!("agentfix-{}-{}", std::process::id(), self.next.fetch_add(1, Ordering::Relaxed));
        let session = Session::new(req.cwd, &self.editor, &req.mcp_servers)
            .map_err(|e| Error::invalid_params().data(serde_json::Value::String(e.to_string())))?;
        tracing::info!(session = %id, root = %session.root.display(), "session started");
        lock(&self.sessions).insert(id.clone(), Arc::new(session));
        Ok(NewSessionResponse::new(id))
    }

    fn session(&self, id: &str) -> Option<Arc<Session>> {
        lock(&self.sessions).get(id).cloned()
    }

    fn offers(&self) -> Offers {
        self.client
            .get()
            .map_or_else(Offers::default, |c| Offers { read: c.fs.read_text_file, write: c.fs.write_text_file })
    }

    /// Starts the prompt's run in a task of its own, which answers the
    /// request when the run and its delivery are over (a panic is answered
    /// with an error).
    fn prompt(
        &self,
        req: PromptRequest,
        responder: Responder<PromptResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let Some(session) = self.session(&req.session_id.0) else {
            let why = format!("no session {}", req.session_id.0);
            return responder.respond_with_error(Error::invalid_params().data(serde_json::Value::String(why)));
        };
        let cancel = self.shutdown.child_token();
        let Some(running) = session.begin(cancel.clone()) else {
            let why = "a prompt is already running in this session";
            return responder.respond_with_error(Error::invalid_request().data(serde_json::Value::String(why.into())));
        };
        let prompt = Prompt {
            session: session.clone(),
            peer: Peer::new(cx, req.session_id.clone()),
            offers: self.offers(),
            content: req.prompt,
            cancel,
        };
        tokio::spawn(async move {
            let answer = tokio::spawn(turn::run(prompt)).await;
            drop(running);
            let sent = match answer {
                Ok(response) => responder.respond(response),
                Err(e) => {
                    let why = if e.is_panic() { "the run crashed" } else { "the run was aborted" };
                    tracing::error!("{why}: {e}");
                    responder.respond_with_error(Error::internal_error().data(serde_json::Value::String(why.into())))
                }
            };
            if let Err(e) = sent {
                tracing::debug!("session/prompt not answered: {e}");
            }
        });
        Ok(())
    }
}
