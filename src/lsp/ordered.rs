//! A `tower::Service` around the LSP service that
//!
//! 1. applies `didOpen`, `didChange` and `didClose` inside `call()`, which
//!    the transport invokes strictly in wire order, before any `.await`
//!    (tower-lsp-server runs handlers concurrently, so a later notification
//!    could otherwise overtake an earlier one and corrupt the buffer mirror);
//! 2. turns a panic in any handler into a JSON-RPC error response (or a log
//!    line for notifications), so the server lives on.
//!
//! A document notification whose params do not parse (a position of -1, a
//! range without `end`) cannot be applied, so the server's copy of that
//! document may differ from the editor's from then on: the document is
//! marked out of sync, the user is told once, and no run touches it until a
//! `didOpen` or a `didSave` with its text (`save.includeText` is advertised)
//! brings the editor's text again.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::FutureExt;
use futures::future::BoxFuture;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use tower::Service;
use tower_lsp_server::jsonrpc::{Error, ErrorCode, Request, Response};
use tower_lsp_server::ls_types::{
    DidChangeTextDocumentParams, DidCloseTextDocumentParams, DidSaveTextDocumentParams, MessageType, Uri,
};

use super::session::Session;
use super::{convert, transport};

pub struct Ordered<S> {
    inner: S,
    session: Arc<Session>,
}

impl<S> Ordered<S> {
    pub fn new(inner: S, session: Arc<Session>) -> Self {
        Self { inner, session }
    }

    /// Applies a document notification; `None` for other methods, else
    /// what to tell the user, if anything.
    fn apply_document_notification(&self, req: &Request) -> Option<Option<String>> {
        let session = &self.session;
        match req.method() {
            "textDocument/didOpen" => {
                // Read in place: the text goes straight from the message
                // into the rope, never through a copy (a buffer can be 50 MB).
                let Some((uri, language, version, text)) = open_params(req) else {
                    return Some(self.lost(req));
                };
                let path = convert::uri_to_path(&uri);
                // A large text was set aside by the transport.
                let stashed = req.params().and_then(|p| p[transport::STASHED].as_u64());
                match stashed.and_then(|id| session.stash.take(id)) {
                    Some(text) => session.docs.open(uri.as_str(), path, language, version, &text),
                    None => session.docs.open(uri.as_str(), path, language, version, text),
                }
            }
            "textDocument/didChange" => {
                let Some(p) = params::<DidChangeTextDocumentParams>(req) else {
                    return Some(self.lost(req));
                };
                let changes: Vec<_> = p.content_changes.into_iter().map(convert::change_from_proto).collect();
                let uri = p.text_document.uri;
                if let Err(e) = session.docs.change(uri.as_str(), p.text_document.version, &changes, session.encoding())
                {
                    tracing::warn!("didChange ignored: {e}");
                }
            }
            "textDocument/didSave" => {
                let Some(p) = params::<DidSaveTextDocumentParams>(req) else {
                    return Some(self.lost(req));
                };
                let uri = p.text_document.uri;
                if let Some(text) = p.text
                    && session.docs.resync(uri.as_str(), &text) == Some(true)
                {
                    tracing::info!(uri = uri.as_str(), "the document is in sync again: its saved text was taken");
                }
            }
            "textDocument/didClose" => {
                let Some(p) = params::<DidCloseTextDocumentParams>(req) else {
                    return Some(self.lost(req));
                };
                if let Err(e) = session.docs.close(p.text_document.uri.as_str()) {
                    tracing::warn!("didClose ignored: {e}");
                }
            }
            _ => return None,
        }
        Some(None)
    }

    /// A document notification that could not be applied: the document it
    /// names, if open (or being opened: it is then open with no text), is
    /// out of sync from now on. Returns what to tell the user the first time.
    fn lost(&self, req: &Request) -> Option<String> {
        let document = req.params().and_then(|p| p.get("textDocument"));
        let uri = document.and_then(|d| serde_json::from_value::<Uri>(d.get("uri")?.clone()).ok())?;
        let version = document.and_then(|d| d["version"].as_i64()).and_then(|v| i32::try_from(v).ok());
        let docs = &self.session.docs;
        if req.method() == "textDocument/didOpen" && docs.get(uri.as_str()).is_none() {
            // The editor has a buffer agentfix knows nothing of: stand in
            // for it, so that no run reads the file from disk instead.
            let language = document.and_then(|d| d["languageId"].as_str()).unwrap_or_default();
            docs.open(uri.as_str(), convert::uri_to_path(&uri), language, version.unwrap_or(0), "");
        }
        let newly = docs.mark_out_of_sync(uri.as_str(), version)?;
        tracing::warn!(uri = uri.as_str(), method = req.method(), "document out of sync: a notification was lost");
        let name = convert::uri_to_path(&uri).map_or_else(|| uri.as_str().to_string(), |p| p.display().to_string());
        newly.then(|| {
            format!(
                "agentfix could not apply a change the editor sent for {name}, so its copy of the file may differ from yours. Agent fix is off for this file until you save it (or close and reopen it)."
            )
        })
    }
}

/// The fields of a `didOpen`, borrowed from the message.
fn open_params(req: &Request) -> Option<(Uri, &str, i32, &str)> {
    let d = req.params()?.get("textDocument")?;
    let uri = Uri::deserialize(d.get("uri")?).ok()?;
    let version = i32::try_from(d.get("version")?.as_i64()?).ok()?;
    Some((uri, d.get("languageId")?.as_str()?, version, d.get("text")?.as_str()?))
}

fn params<T: DeserializeOwned>(req: &Request) -> Option<T> {
    let null = serde_json::Value::Null;
    // Deserialized from a reference: the params are not cloned first.
    match T::deserialize(req.params().unwrap_or(&null)) {
        Ok(p) => Some(p),
        Err(e) => {
            tracing::warn!(method = req.method(), "ignoring notification with invalid params: {e}");
            None
        }
    }
}

pub(super) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

impl<S> Service<Request> for Ordered<S>
where
    S: Service<Request, Response = Option<Response>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = Option<Response>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Option<Response>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let method = req.method().to_string();
        let id = req.id().cloned();
        let applied = std::panic::catch_unwind(AssertUnwindSafe(|| self.apply_document_notification(&req)));
        match applied {
            Ok(Some(None)) => return futures::future::ready(Ok(None)).boxed(),
            Ok(Some(Some(message))) => {
                let Some(client) = self.session.client.get().cloned() else {
                    return futures::future::ready(Ok(None)).boxed();
                };
                return async move {
                    client.show_message(MessageType::WARNING, message).await;
                    Ok(None)
                }
                .boxed();
            }
            Ok(None) => {}
            Err(panic) => {
                tracing::error!(%method, "panic while applying a document notification: {}", panic_message(&*panic));
                return futures::future::ready(Ok(None)).boxed();
            }
        }
        let fut = match std::panic::catch_unwind(AssertUnwindSafe(|| self.inner.call(req))) {
            Ok(f) => f,
            Err(panic) => {
                return futures::future::ready(Ok(panic_response(&method, id, &*panic))).boxed();
            }
        };
        if method == "exit" {
            // The session ends now (see `serve_stdio`), whatever else the
            // client sends or does not send.
            self.session.ending.cancel();
        }
        async move {
            match AssertUnwindSafe(fut).catch_unwind().await {
                Ok(r) => r,
                Err(panic) => Ok(panic_response(&method, id, &*panic)),
            }
        }
        .boxed()
    }
}

fn panic_response(
    method: &str,
    id: Option<tower_lsp_server::jsonrpc::Id>,
    panic: &(dyn std::any::Any + Send),
) -> Option<Response> {
    let msg = panic_message(panic);
    tracing::error!(%method, "handler panicked: {msg}");
    id.map(|id| {
        Response::from_error(
            id,
            Error {
                code: ErrorCode::InternalError,
                message: format!("agentfix: internal error in `{method}`: {msg}").into(),
                data: None,
            },
        )
    })
}
