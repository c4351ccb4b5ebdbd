//! The end of a prompt: the proposal as one `tool_call` (kind `edit`) whose
//! content is a `diff` per changed file (the text the run read, then the
//! text it proposes); with a client that offers `fs.writeTextFile`, the user
//! is asked (`session/request_permission` on that call: Write / Always in
//! this session / Reject) and the final text of each file is sent with
//! `fs/write_text_file`, where the client's own review of agent edits
//! applies; without it, the diff is all there is and nothing is written.
//! Nothing reaches the client's files that the user did not see as a diff
//! and allow first. Then the last message: the check's line, what was
//! written, what the run took.

use std::time::Duration;

use agent_client_protocol::v1::schema::{
    Diff, PlanEntryStatus, SessionUpdate, ToolCall, ToolCallContent, ToolCallLocation, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields, ToolKind, WriteTextFileRequest,
};
use tokio_util::sync::CancellationToken;

use super::approval;
use super::session::Session;
use super::updates::Updates;
use crate::fix::{FixResult, NO_TOOL_CALL, NoEdit, Proposal, Verdict};
use crate::tools::Approval;
use crate::workspace::{FileChange, runs_code};

/// How long one `fs/write_text_file` may take.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// The name "always" approvals of writes are kept under in the session.
const WRITE: &str = "write proposals";

/// How the proposal ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Delivered {
    /// No proposal.
    Nothing,
    /// Written to the client's files.
    Written,
    /// The user rejected it (or did not answer).
    Rejected,
    /// The client cannot write files: shown as a diff only.
    Shown,
    /// Cancelled while asking or writing.
    Cancelled,
}

/// Delivers `result`'s proposal, then says the last message; returns how
/// the proposal ended.
pub(super) async fn deliver(
    updates: &Updates,
    session: &Session,
    result: &FixResult,
    can_write: bool,
    cancel: &CancellationToken,
) -> Delivered {
    let delivered = match &result.verdict {
        Verdict::Proposal(p) => propose(updates, session, p, can_write, cancel).await,
        _ => Delivered::Nothing,
    };
    let status = if delivered == Delivered::Written { PlanEntryStatus::Completed } else { PlanEntryStatus::Pending };
    updates.finish_plan(status);
    updates.peer.say(format!("\n\n{}", updates.redactor().redact(&last_message(result, delivered))));
    delivered
}

/// The proposal's `tool_call`, the permission, the writes.
async fn propose(
    updates: &Updates,
    session: &Session,
    proposal: &Proposal,
    can_write: bool,
    cancel: &CancellationToken,
) -> Delivered {
    let changes = &proposal.changes;
    let names: Vec<&str> = changes.iter().map(|c| c.display.as_str()).collect();
    let id = format!("proposal-{}", next_id());
    let diffs: Vec<ToolCallContent> = changes.iter().map(|c| ToolCallContent::Diff(diff(c))).collect();
    let locations = changes.iter().map(|c| ToolCallLocation::new(c.path.clone())).collect();
    let call = ToolCall::new(id.clone(), format!("Proposed changes: {}", names.join(", ")))
        .kind(ToolKind::Edit)
        .status(ToolCallStatus::Pending)
        .locations(locations)
        .content(diffs);
    updates.peer.update(SessionUpdate::ToolCall(call));
    if !can_write {
        updates.status(&id, ToolCallStatus::Completed);
        return Delivered::Shown;
    }
    if !session.always_allowed(WRITE) {
        let mut title = format!("Write the proposed changes to {}", names.join(", "));
        for c in changes {
            if let Some(why) = runs_code(std::path::Path::new(&c.display)) {
                title.push_str(&format!("; {} runs code ({why}): review it first", c.display));
            }
        }
        let ask = ToolCallUpdate::new(id.clone(), ToolCallUpdateFields::new().title(title));
        match approval::permission(
            updates,
            ask,
            ["Write the changes", "Always write proposals in this session", "Reject"],
            cancel,
        )
        .await
        {
            _ if cancel.is_cancelled() => {
                updates.status(&id, ToolCallStatus::Failed);
                return Delivered::Cancelled;
            }
            Some(Approval::Always) => session.allow_always(WRITE),
            Some(Approval::Once) => {}
            Some(Approval::Deny) | None => {
                updates.status(&id, ToolCallStatus::Failed);
                return Delivered::Rejected;
            }
        }
    }
    write(updates, &id, changes, cancel).await
}

/// `fs/write_text_file` of every change; the call `completed`, or `failed`
/// with what could not be written.
async fn write(updates: &Updates, id: &str, changes: &[FileChange], cancel: &CancellationToken) -> Delivered {
    updates.status(id, ToolCallStatus::InProgress);
    let mut failed = Vec::new();
    for c in changes {
        let request = WriteTextFileRequest::new(updates.peer.session.clone(), c.path.clone(), c.new_text.clone());
        if let Err(e) = updates.peer.ask(request, WRITE_TIMEOUT, cancel).await {
            if cancel.is_cancelled() {
                updates.status(id, ToolCallStatus::Failed);
                return Delivered::Cancelled;
            }
            failed.push(format!("{}: {e:?}", c.display));
        }
    }
    if failed.is_empty() {
        updates.status(id, ToolCallStatus::Completed);
        return Delivered::Written;
    }
    let fields = ToolCallUpdateFields::new()
        .status(ToolCallStatus::Failed)
        .content(vec![ToolCallContent::from(format!("not written: {}", failed.join("; ")))]);
    updates.peer.update(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(id.to_string(), fields)));
    Delivered::Rejected
}

/// A file's change as a `diff`: `oldText` is absent for a created file.
fn diff(change: &FileChange) -> Diff {
    Diff::new(change.path.clone(), change.new_text.clone()).old_text(change.original.clone())
}

/// A number unique in the process, for the proposal's tool call id.
fn next_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// The prompt's last message: the check's line first (`verified: 1 fixed,
/// 0 new; test passed (4.1 s)`), what became of the proposal, what the run
/// took.
pub(super) fn last_message(result: &FixResult, delivered: Delivered) -> String {
    let mut lines = Vec::new();
    if let Some(line) = result.verification.as_ref().and_then(|v| v.line()) {
        lines.push(line);
    }
    let files = result.changes().len();
    let plural = if files == 1 { "" } else { "s" };
    let said = match (&result.verdict, delivered) {
        (_, Delivered::Cancelled) | (Verdict::Cancelled, _) => "Cancelled; nothing was changed.".to_string(),
        (Verdict::Proposal(p), d) => {
            let early = p.stopped_early.as_ref().map(|r| format!(" (stopped early: {r})")).unwrap_or_default();
            match d {
                Delivered::Written => {
                    format!("Wrote the proposal to {files} file{plural}{early}; review it in your editor.")
                }
                Delivered::Rejected => format!("The proposal to change {files} file{plural} was not written{early}."),
                _ => format!(
                    "Proposed changes to {files} file{plural}{early}, shown above as a diff; this client cannot write files (no fs.writeTextFile), so nothing was written."
                ),
            }
        }
        (Verdict::Discarded { files, reason }, _) => {
            format!("Stopped early ({reason}); the edits to {files} file(s) were discarded (partialEdits = discard).")
        }
        (Verdict::NoEdit(NoEdit::Finished(_)), _) => "No edit proposed.".to_string(),
        (Verdict::NoEdit(NoEdit::Stopped(reason)), _) => format!("No edit proposed: {reason}."),
        (Verdict::NoEdit(NoEdit::ModelError(message)), _) => format!("The model API failed: {message}"),
        (Verdict::NoEdit(NoEdit::Unverified(why)), _) => {
            format!("The proposal was dropped (verify.offerUnverified = false): {why}")
        }
        (Verdict::NoEdit(NoEdit::NoToolCall(_)), _) => format!("No edit proposed: {NO_TOOL_CALL}."),
    };
    lines.push(said);
    lines.push(format!("({})", result.spend.with_turns(result.outcome.turns)));
    lines.join("\n")
}
