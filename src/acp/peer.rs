//! The client as one session sees it: `session/update` notifications, and
//! requests to the client that end with the turn's cancel or a timeout (a
//! client that never answers must not hold a run).

use std::time::Duration;

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{ContentBlock, ContentChunk, SessionId, SessionNotification, SessionUpdate};
use agent_client_protocol::{Client, JsonRpcRequest};
use tokio_util::sync::CancellationToken;

/// One session's side of the connection.
#[derive(Clone)]
pub(super) struct Peer {
    cx: ConnectionTo<Client>,
    pub session: SessionId,
}

/// Why a request to the client got no answer.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum NoAnswer {
    Cancelled,
    TimedOut,
    /// The client answered with an error, or the connection is gone.
    Failed(String),
}

impl Peer {
    pub fn new(cx: ConnectionTo<Client>, session: SessionId) -> Self {
        Self { cx, session }
    }

    /// Sends one `session/update` (a connection gone is logged: the turn
    /// ends on its own when the client is).
    pub fn update(&self, update: SessionUpdate) {
        if let Err(e) = self.cx.send_notification(SessionNotification::new(self.session.clone(), update)) {
            tracing::debug!("session/update not sent: {e}");
        }
    }

    /// An `agent_message_chunk` of `text`.
    pub fn say(&self, text: impl Into<String>) {
        let text = text.into();
        if !text.is_empty() {
            self.update(SessionUpdate::AgentMessageChunk(ContentChunk::new(ContentBlock::from(text))));
        }
    }

    /// An `agent_thought_chunk` of `text`.
    pub fn think(&self, text: impl Into<String>) {
        self.update(SessionUpdate::AgentThoughtChunk(ContentChunk::new(ContentBlock::from(text.into()))));
    }

    /// Sends `request` and waits for the answer, at most `timeout`, and not
    /// past `cancel` (the request is then withdrawn with `$/cancel_request`
    /// as the SDK does for a dropped request).
    pub async fn ask<R: JsonRpcRequest>(
        &self,
        request: R,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<R::Response, NoAnswer> {
        let answer = self.cx.send_request(request).block_task();
        tokio::select! {
            biased;
            () = cancel.cancelled() => Err(NoAnswer::Cancelled),
            a = tokio::time::timeout(timeout, answer) => match a {
                Ok(Ok(r)) => Ok(r),
                Ok(Err(e)) => Err(NoAnswer::Failed(e.to_string())),
                Err(_) => Err(NoAnswer::TimedOut),
            },
        }
    }
}
