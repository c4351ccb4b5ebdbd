//! A `tower::Service` around the LSP service that
//!
//! 1. applies `didOpen`, `didChange` and `didClose` inside `call()`, which
//!    the transport invokes strictly in wire order, before any `.await`
//!    (tower-lsp-server runs handlers concurrently, so a later notification
//!    could otherwise overtake an earlier one and corrupt the buffer mirror);
//! 2. turns a panic in any handler into a JSON-RPC error response (or a log
//!    line for notifications), so the server lives on.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::FutureExt;
use futures::future::BoxFuture;
use serde::de::DeserializeOwned;
use tower::Service;
use tower_lsp_server::jsonrpc::{Error, ErrorCode, Request, Response};
use tower_lsp_server::ls_types::{DidChangeTextDocumentParams, DidCloseTextDocumentParams, DidOpenTextDocumentParams};

use super::Session;
use super::{convert, transport};

pub struct Ordered<S> {
    inner: S,
    session: Arc<Session>,
}

impl<S> Ordered<S> {
    pub fn new(inner: S, session: Arc<Session>) -> Self {
        Self { inner, session }
    }

    /// Applies a document notification; returns false for other methods.
    fn apply_document_notification(&self, req: &Request) -> bool {
        let session = &self.session;
        match req.method() {
            "textDocument/didOpen" => {
                if let Some(p) = params::<DidOpenTextDocumentParams>(req) {
                    let d = p.text_document;
                    let path = convert::uri_to_path(&d.uri);
                    session.docs.open(d.uri.as_str(), path, &d.language_id, d.version, &d.text);
                }
                true
            }
            "textDocument/didChange" => {
                if let Some(p) = params::<DidChangeTextDocumentParams>(req) {
                    let changes: Vec<_> = p.content_changes.into_iter().map(convert::change_from_proto).collect();
                    let uri = p.text_document.uri;
                    if let Err(e) =
                        session.docs.change(uri.as_str(), p.text_document.version, &changes, session.encoding())
                    {
                        tracing::warn!("didChange ignored: {e}");
                    }
                }
                true
            }
            "textDocument/didClose" => {
                if let Some(p) = params::<DidCloseTextDocumentParams>(req)
                    && let Err(e) = session.docs.close(p.text_document.uri.as_str())
                {
                    tracing::warn!("didClose ignored: {e}");
                }
                true
            }
            _ => false,
        }
    }
}

fn params<T: DeserializeOwned>(req: &Request) -> Option<T> {
    let value = req.params().cloned().unwrap_or(serde_json::Value::Null);
    match serde_json::from_value(value) {
        Ok(p) => Some(p),
        Err(e) => {
            tracing::warn!(method = req.method(), "ignoring notification with invalid params: {e}");
            None
        }
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
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
        if method == transport::INVALID_MESSAGE {
            return futures::future::ready(Ok(invalid_message_response(req.params()))).boxed();
        }
        let applied = std::panic::catch_unwind(AssertUnwindSafe(|| self.apply_document_notification(&req)));
        match applied {
            Ok(true) => return futures::future::ready(Ok(None)).boxed(),
            Ok(false) => {}
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

/// The error response for a malformed message (see `transport`).
fn invalid_message_response(params: Option<&serde_json::Value>) -> Option<Response> {
    let p = params.cloned().unwrap_or_default();
    let id = serde_json::from_value(p["id"].clone()).unwrap_or(tower_lsp_server::jsonrpc::Id::Null);
    let code = match p["code"].as_i64() {
        Some(-32600) => ErrorCode::InvalidRequest,
        _ => ErrorCode::ParseError,
    };
    let message = p["message"].as_str().unwrap_or("malformed message").to_string();
    Some(Response::from_error(id, Error { code, message: message.into(), data: None }))
}
