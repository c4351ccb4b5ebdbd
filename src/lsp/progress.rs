//! Work-done progress for a run: the server creates its own token (no client
//! sends one with `executeCommand`), only when the client declared
//! `window.workDoneProgress`, and never waits on the client without a
//! timeout (some clients never answer `window/workDoneProgress/create`).

use std::time::Duration;

use tower_lsp_server::Client;
use tower_lsp_server::ls_types::notification::Progress;
use tower_lsp_server::ls_types::{
    NumberOrString, ProgressParams, ProgressParamsValue, WorkDoneProgress, WorkDoneProgressBegin, WorkDoneProgressEnd,
    WorkDoneProgressReport,
};

/// How long to wait for the client to accept a progress token.
const CREATE_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Clone)]
pub struct RunProgress {
    client: Client,
    /// `None` when the client does not support progress or did not accept
    /// the token in time: then nothing is sent.
    token: Option<NumberOrString>,
}

impl RunProgress {
    /// Uses the client's own token when it sent one with the request (no
    /// creation needed), else creates the token `name` if the client
    /// supports progress.
    pub async fn create(client: &Client, supported: bool, given: Option<NumberOrString>, name: String) -> Self {
        if let Some(token) = given {
            return Self { client: client.clone(), token: Some(token) };
        }
        let token = NumberOrString::String(name);
        let accepted = supported
            && match tokio::time::timeout(CREATE_TIMEOUT, client.create_work_done_progress(token.clone())).await {
                Ok(Ok(())) => true,
                Ok(Err(e)) => {
                    tracing::debug!("client refused the progress token: {e}");
                    false
                }
                Err(_) => {
                    tracing::debug!("client did not answer window/workDoneProgress/create in time");
                    false
                }
            };
        Self { client: client.clone(), token: accepted.then_some(token) }
    }

    async fn send(&self, value: WorkDoneProgress) {
        if let Some(token) = &self.token {
            self.client
                .send_notification::<Progress>(ProgressParams {
                    token: token.clone(),
                    value: ProgressParamsValue::WorkDone(value),
                })
                .await;
        }
    }

    pub async fn begin(&self, title: &str, message: &str) {
        self.send(WorkDoneProgress::Begin(WorkDoneProgressBegin {
            title: title.to_string(),
            cancellable: Some(true),
            message: Some(message.to_string()),
            percentage: None,
        }))
        .await;
    }

    pub async fn report(&self, message: String) {
        self.send(WorkDoneProgress::Report(WorkDoneProgressReport {
            cancellable: Some(true),
            message: Some(message),
            percentage: None,
        }))
        .await;
    }

    pub async fn end(&self, message: String) {
        self.send(WorkDoneProgress::End(WorkDoneProgressEnd { message: Some(message) })).await;
    }
}
