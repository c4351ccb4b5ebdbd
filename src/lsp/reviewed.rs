//! The `agentfix.reviewed` command: what the user did with each hunk of a
//! run's proposal, sent by an editor's review when it ends (VS Code's
//! extension, Neovim's review). Recorded for the run by change annotation
//! id; a follow-up on the run says it per hunk, with the user's reason.
//! Without it, the follow-up works each hunk's outcome out from the file.

use serde_json::Value;
use tower_lsp_server::jsonrpc::{Error, ErrorCode, Result};

use super::ext::{ReviewedArguments, ReviewedResponse};
use super::session::{KEPT_RUNS, Session};
use crate::follow_up::Review;

/// Handles `workspace/executeCommand` for `agentfix.reviewed`.
pub fn execute(session: &Session, arguments: &[Value]) -> Result<Value> {
    let args = ReviewedArguments::from_command(arguments).map_err(Error::invalid_params)?;
    let kept = session.kept.get(&args.run_id);
    let running =
        args.run_id.strip_prefix("run-").and_then(|n| n.parse().ok()).is_some_and(|id| session.runs.is_running(id));
    if kept.is_none() && !running {
        return Err(Error::invalid_params(format!(
            "agentfix.reviewed: {} is not a run of this session that agentfix still keeps (the last {KEPT_RUNS}), nor one running",
            args.run_id
        )));
    }
    // A run still running has sent nothing yet to check the ids against.
    let known = |id: &str| kept.as_ref().is_none_or(|r| r.past.sent.iter().any(|f| f.ids.iter().any(|i| i == id)));
    let (recorded, unknown): (Vec<_>, Vec<_>) = args.hunks.into_iter().partition(|h| known(&h.annotation_id));
    let answer =
        ReviewedResponse { recorded: recorded.len(), unknown: unknown.into_iter().map(|h| h.annotation_id).collect() };
    session.reviews.record(
        &args.run_id,
        recorded.into_iter().map(|h| (h.annotation_id, Review::new(h.outcome, h.reason.as_deref()))),
    );
    serde_json::to_value(answer).map_err(|e| Error {
        code: ErrorCode::InternalError,
        message: e.to_string().into(),
        data: None,
    })
}
