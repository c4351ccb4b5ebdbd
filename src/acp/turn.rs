//! One prompt of a session, from its content to its answer: what to fix
//! (`target`), the run's setup and checks (`fix::Setup::prepare`: the
//! target in the workspace, not protected), the run through `fix::run` with
//! the client's buffers, approvals and updates, the delivery, and the stop
//! reason. What a prompt leaves (its conversation, its proposal, its
//! target) is kept for the session's next prompt, which follows up on it.

use std::sync::Arc;

use agent_client_protocol::v1::schema::{ContentBlock, PromptResponse, StopReason};
use tokio_util::sync::CancellationToken;

use super::approval::PermissionApprover;
use super::buffers::ClientBuffers;
use super::delivery::{self, Delivered};
use super::peer::Peer;
use super::session::{Past, Session};
use super::target;
use super::updates::Updates;
use crate::agent::{RunEvent, Stop};
use crate::fix::{self, FixResult, Prepared, Request, Roots, Services, Setup, Verdict};
use crate::follow_up::{PastRun, ProposedFile};
use crate::providers::ModelClient;
use crate::workspace::BufferSource;

/// What the client offers that a prompt uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Offers {
    /// `fs.readTextFile`.
    pub read: bool,
    /// `fs.writeTextFile`.
    pub write: bool,
}

/// One `session/prompt`.
pub(super) struct Prompt {
    pub session: Arc<Session>,
    pub peer: Peer,
    pub offers: Offers,
    pub content: Vec<ContentBlock>,
    pub cancel: CancellationToken,
}

/// Runs the prompt to its answer; every update is sent before it returns.
pub(super) async fn run(prompt: Prompt) -> PromptResponse {
    let Prompt { session, peer, offers, content, cancel } = prompt;
    let past = session.past();
    let asked = match target::asked(&content, &session.root, past.as_ref().map(|p| &p.target)) {
        Ok(a) => a,
        Err(message) => return refused(&peer, message),
    };
    let request = Request { follow_up: past.map(|p| p.run), ..Request::new(asked.target.clone()) };
    let reader = offers.read.then(|| peer.clone());
    let buffers: Arc<dyn BufferSource> = Arc::new(ClientBuffers::new(reader, asked.embedded, cancel.clone()));
    let (prepared, model) = match prepare(&session, &request, buffers) {
        Ok(p) => p,
        Err(message) => return refused(&peer, message),
    };
    let config = &prepared.config;
    let window = crate::pricing::context_window(&config.provider.model)
        .map_or(config.limits.context_budget, |w| w.min(config.limits.context_budget));
    let updates = Arc::new(Updates::new(peer, prepared.overlay.clone(), config.key_redactor(), config.price(), window));
    let approver =
        Arc::new(PermissionApprover { updates: updates.clone(), session: session.clone(), cancel: cancel.clone() });
    let events = |e: RunEvent| updates.event(&e);
    let services = Services {
        model,
        symbols: Some(session.downstream(config)),
        approver: Some(approver),
        mcp: Some(session.mcp(config)),
        progress: &events,
        cancel: cancel.clone(),
    };
    let result = fix::run(&prepared, services, request.clone()).await;
    let delivered = delivery::deliver(&updates, &session, &result, offers.write, &cancel).await;
    let stop = stop_reason(&result, delivered, cancel.is_cancelled());
    if !matches!(stop, StopReason::Cancelled | StopReason::Refusal) {
        let proposed = result.changes().iter().map(ProposedFile::from).collect();
        let run = Arc::new(PastRun { messages: result.outcome.messages.clone(), proposed, ..PastRun::default() });
        session.keep(Past { run, target: request.target });
    }
    PromptResponse::new(stop)
}

/// Says why the prompt cannot run; the turn ends there.
fn refused(peer: &Peer, message: String) -> PromptResponse {
    peer.say(message);
    PromptResponse::new(StopReason::EndTurn)
}

/// The configuration and checks of `request`, and the model client, or
/// what to tell the user.
fn prepare(
    session: &Session,
    request: &Request,
    buffers: Arc<dyn BufferSource>,
) -> Result<(Prepared, Arc<dyn ModelClient>), String> {
    for w in crate::config::settings::Settings::file_warnings(&session.root) {
        tracing::warn!("{w}");
    }
    let setup = Setup::load(Some(&session.root), &session.editor, request).map_err(|e| format!("agentfix: {e}"))?;
    if let Some(refusal) = fix::sandbox_refusal(&setup.config) {
        tracing::warn!("{refusal}");
    }
    let prepared = setup
        .prepare(Roots::Containing(vec![session.root.clone()]), request, buffers)
        .map_err(|e| format!("agentfix cannot run: {e}."))?;
    let model = prepared.model().map_err(|e| format!("agentfix: {e}"))?;
    Ok((prepared, model))
}

/// ACP's stop reason for how the run ended: the harness's token, cost and
/// context limits are `max_tokens`, its turn, time and convergence limits
/// `max_turn_requests`; a model or tool failure ends the turn (the last
/// message says what failed).
fn stop_reason(result: &FixResult, delivered: Delivered, cancelled: bool) -> StopReason {
    if cancelled || delivered == Delivered::Cancelled || result.verdict == Verdict::Cancelled {
        return StopReason::Cancelled;
    }
    acp_stop(&result.outcome.stop)
}

/// ACP's name for how the loop stopped.
fn acp_stop(stop: &Stop) -> StopReason {
    match stop {
        Stop::MaxTokens
        | Stop::TokenBudget
        | Stop::CostBudget
        | Stop::ContextBudget { .. }
        | Stop::ContextWindowExceeded => StopReason::MaxTokens,
        Stop::MaxTurns | Stop::Timeout | Stop::Stalled(_) | Stop::PauseLimit => StopReason::MaxTurnRequests,
        Stop::Refusal { .. } => StopReason::Refusal,
        Stop::Cancelled => StopReason::Cancelled,
        Stop::EndTurn
        | Stop::StopSequence
        | Stop::ToolFatal(_)
        | Stop::ModelError(_)
        | Stop::Unknown(_)
        | Stop::Forked => StopReason::EndTurn,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stop_has_its_acp_stop_reason() {
        let cases = [
            (Stop::EndTurn, StopReason::EndTurn),
            (Stop::MaxTokens, StopReason::MaxTokens),
            (Stop::CostBudget, StopReason::MaxTokens),
            (Stop::ContextBudget { estimate: 2, ceiling: 1 }, StopReason::MaxTokens),
            (Stop::MaxTurns, StopReason::MaxTurnRequests),
            (Stop::Timeout, StopReason::MaxTurnRequests),
            (Stop::Stalled("same call".into()), StopReason::MaxTurnRequests),
            (Stop::Refusal { explanation: None }, StopReason::Refusal),
            (Stop::Cancelled, StopReason::Cancelled),
            (Stop::ToolFatal("x".into()), StopReason::EndTurn),
        ];
        for (stop, acp) in cases {
            assert_eq!(acp_stop(&stop), acp, "{stop:?}");
        }
    }
}
