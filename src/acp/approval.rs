//! Asking the user before a command or an MCP tool runs, through
//! `session/request_permission`: the request carries the tool call (the
//! model's `run_command` or MCP call, or a new `tool_call` for a verify
//! command), with the command's argv exactly (shell-quoted, control
//! characters escaped: `tools::run_command::display_argv`), and the options
//! Allow once / Always in this session / Reject. "Always" holds for the
//! session; what the user settings approve for good (`commands.autoApprove`,
//! an MCP server's `autoApprove`, never agentfix.toml's) never asks. No
//! answer in [`ASK_TIMEOUT`], a cancelled prompt or a failed request means
//! Reject, and a rejected call ends `failed`.

use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest, ToolCallContent,
    ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, ToolKind,
};
use async_trait::async_trait;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::session::Session;
use super::updates::Updates;
use crate::tools::{Approval, Approver, RunCommand};

/// How long the user has to answer.
pub(super) const ASK_TIMEOUT: Duration = Duration::from_secs(300);

pub(super) const ALLOW_ONCE: &str = "allow-once";
pub(super) const ALLOW_ALWAYS: &str = "allow-always";
pub(super) const REJECT: &str = "reject";

pub(super) struct PermissionApprover {
    pub updates: Arc<Updates>,
    pub session: Arc<Session>,
    pub cancel: CancellationToken,
}

#[async_trait]
impl Approver for PermissionApprover {
    async fn approve(&self, name: &str, argv: &[String]) -> Approval {
        let shown = RunCommand::display_argv(argv);
        let title = format!("Run `{shown}` (command `{name}`) in a scratch copy of the workspace");
        let input = json!({"name": name, "argv": argv});
        let id = match self.updates.claim("run_command", |i| i.get("name").and_then(Value::as_str) == Some(name)) {
            Some(id) => id,
            // Not the model's call: a verify command of the check.
            None => self.updates.made_call("check", format!("Check: run `{shown}`"), ToolKind::Execute, input.clone()),
        };
        let call = ToolCallUpdate::new(
            id,
            ToolCallUpdateFields::new()
                .title(title)
                .kind(ToolKind::Execute)
                .status(ToolCallStatus::Pending)
                .raw_input(input)
                .content(vec![ToolCallContent::from(format!("$ {shown}"))]),
        );
        self.ask(name, call).await
    }

    async fn approve_tool(&self, name: &str, input: &str) -> Approval {
        let value: Value = serde_json::from_str(input).unwrap_or(Value::String(input.to_string()));
        let id = self.updates.claim(name, |i| *i == value);
        let title = super::updates::title(name, &value.clone().into());
        let id = id.unwrap_or_else(|| {
            self.updates.made_call("tool", title.clone(), super::updates::kind(name), value.clone())
        });
        let shown = crate::tools::clip(input, 400);
        let call = ToolCallUpdate::new(
            id,
            ToolCallUpdateFields::new()
                .title(format!("Call the MCP tool `{name}`"))
                .status(ToolCallStatus::Pending)
                .raw_input(value)
                .content(vec![ToolCallContent::from(shown)]),
        );
        self.ask(name, call).await
    }
}

impl PermissionApprover {
    /// Asks about `call` (unless `name` was allowed always in this session);
    /// the call goes `in_progress` when allowed, `failed` when not.
    async fn ask(&self, name: &str, call: ToolCallUpdate) -> Approval {
        let id = call.tool_call_id.to_string();
        if self.session.always_allowed(name) {
            self.updates.status(&id, ToolCallStatus::InProgress);
            return Approval::Always;
        }
        let approval =
            match permission(&self.updates, call, ["Allow once", "Always in this session", "Reject"], &self.cancel)
                .await
            {
                Some(a) => a,
                None => Approval::Deny,
            };
        if approval == Approval::Always {
            self.session.allow_always(name);
        }
        let status = if approval == Approval::Deny { ToolCallStatus::Failed } else { ToolCallStatus::InProgress };
        self.updates.status(&id, status);
        approval
    }
}

/// One `session/request_permission` about `call` with three options:
/// allow once, allow always, reject, named `labels`; `None` when there is
/// no answer (timed out, cancelled, or the client failed).
pub(super) async fn permission(
    updates: &Updates,
    call: ToolCallUpdate,
    [once, always, reject]: [&str; 3],
    cancel: &CancellationToken,
) -> Option<Approval> {
    let options = vec![
        PermissionOption::new(ALLOW_ONCE, once, PermissionOptionKind::AllowOnce),
        PermissionOption::new(ALLOW_ALWAYS, always, PermissionOptionKind::AllowAlways),
        PermissionOption::new(REJECT, reject, PermissionOptionKind::RejectOnce),
    ];
    let request = RequestPermissionRequest::new(updates.peer.session.clone(), call, options);
    match updates.peer.ask(request, ASK_TIMEOUT, cancel).await {
        Ok(answer) => match answer.outcome {
            RequestPermissionOutcome::Selected(s) if &*s.option_id.0 == ALLOW_ONCE => Some(Approval::Once),
            RequestPermissionOutcome::Selected(s) if &*s.option_id.0 == ALLOW_ALWAYS => Some(Approval::Always),
            _ => Some(Approval::Deny),
        },
        Err(e) => {
            tracing::info!("session/request_permission got no answer ({e:?}): rejected");
            None
        }
    }
}
