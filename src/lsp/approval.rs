//! Asking the user before the agent runs a configured command (or calls an
//! MCP tool that is not read-only):
//! `window/showMessageRequest` "Allow agentfix to run `cargo test`?" with
//! Allow once / Always in this workspace / Deny, the argv shown exactly
//! (shell-quoted, control characters escaped: see
//! `tools::run_command::display_argv`). "Always" is remembered for
//! the workspace until the server exits. A client that does not answer in
//! time (or cannot show the request) means "Deny".

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tower_lsp_server::Client;
use tower_lsp_server::ls_types::{MessageActionItem, MessageType};

use super::session::Session;
use crate::tools::{Approval, Approver, RunCommand};

/// How long the user has to answer.
const ASK_TIMEOUT: Duration = Duration::from_secs(300);

const ONCE: &str = "Allow once";
const ALWAYS: &str = "Always in this workspace";
const DENY: &str = "Deny";

pub struct ClientApprover {
    pub client: Client,
    pub session: Arc<Session>,
    pub root: PathBuf,
}

#[async_trait]
impl Approver for ClientApprover {
    async fn approve(&self, name: &str, argv: &[String]) -> Approval {
        // The exact argv, shell-quoted with control characters escaped: a
        // repository-defined command cannot hide its tail behind line breaks.
        let shown = RunCommand::display_argv(argv);
        let question =
            format!("Allow agentfix to run `{shown}` (command `{name}`) in a scratch copy of the workspace?");
        // "Always" covers this argv: a repository that changes what the
        // name runs is asked about again.
        self.ask(&format!("{name}\u{0}{shown}"), question).await
    }

    async fn approve_tool(&self, name: &str, input: &str) -> Approval {
        // Compact JSON: control characters are escaped, so nothing hides on a second line.
        let input = crate::tools::clip(input, 400);
        self.ask(name, format!("Allow agentfix to call the MCP tool `{name}` with {input}?")).await
    }
}

impl ClientApprover {
    /// Asks `question` (unless `key` was allowed always in this workspace).
    async fn ask(&self, key: &str, question: String) -> Approval {
        if self.session.always_allowed(&self.root, key) {
            return Approval::Always;
        }
        let actions =
            [ONCE, ALWAYS, DENY].map(|t| MessageActionItem { title: t.into(), properties: Default::default() });
        let asked = self.client.show_message_request(MessageType::INFO, question, Some(actions.to_vec()));
        match tokio::time::timeout(ASK_TIMEOUT, asked).await {
            Ok(Ok(Some(choice))) if choice.title == ONCE => Approval::Once,
            Ok(Ok(Some(choice))) if choice.title == ALWAYS => {
                self.session.allow_always(&self.root, key);
                Approval::Always
            }
            Ok(Ok(_)) => Approval::Deny,
            Ok(Err(e)) => {
                tracing::warn!("window/showMessageRequest failed: {e}");
                Approval::Deny
            }
            Err(_) => Approval::Deny,
        }
    }
}
