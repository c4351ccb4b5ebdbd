//! The `agentfix.fix` command: parse the code action's argument, start the
//! run in its own task, report progress, and end in one versioned
//! `workspace/applyEdit`. The handler only waits for the task; if the
//! request is cancelled (`$/cancelRequest`), the dropped handler cancels the
//! run through a drop guard. Cancelling (that, the progress's Cancel button,
//! or the end of the session) also ends the wait for the editor's answer to
//! `workspace/applyEdit`: the file is free at once, whether the editor ever
//! answers or not.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tower_lsp_server::Client;
use tower_lsp_server::jsonrpc::{Error, ErrorCode, Result};
use tower_lsp_server::ls_types::request::ApplyWorkspaceEdit;
use tower_lsp_server::ls_types::{ApplyWorkspaceEditParams, MessageType, NumberOrString, WorkspaceEdit};

use super::approval::ClientApprover;
use super::ext::{CancelArguments, CancelResponse, FixArguments, FixResponse, RunEnded, RunStarted};
use super::ordered::panic_message;
use super::progress::RunProgress;
use super::session::{ClientSupport, KEPT_RUNS, KeptRun, RunGuard, Session};
use super::{convert, proposal};
use crate::agent::{RunEvent, Stop};
use crate::diagnostic::Diagnostic;
use crate::documents::PositionEncoding;
use crate::downstream::SymbolSource;
use crate::fix::{
    self, NoEdit, Prepared, ProgressLine, ProgressLines, Proposal, Refusal, Request, Roots, Services, Setup, Target,
    Verdict,
};
use crate::follow_up::{PastRun, ProposedFile, SentFile};
use crate::providers::ModelClient;
use crate::tools::Approver;
use crate::workspace::{BufferSource, runs_code};

/// At most one streamed-text progress report per this interval.
const STREAM_THROTTLE: Duration = Duration::from_millis(250);

/// How long the user may take to review the proposal in the editor.
const APPLY_EDIT_TIMEOUT: Duration = Duration::from_secs(600);

fn request_failed(message: String) -> Error {
    Error { code: ErrorCode::ServerError(-32803), message: message.into(), data: None }
}

/// Handles `workspace/executeCommand` for `agentfix.fix`: answers when the
/// run is over, or at once (`delivery`) with the run's id, the outcome then
/// sent as `agentfix/runEnded`.
pub async fn execute_fix(
    client: Client,
    session: Arc<Session>,
    arguments: Vec<Value>,
    work_done_token: Option<NumberOrString>,
) -> Result<Value> {
    let args = FixArguments::from_command(&arguments).map_err(Error::invalid_params)?;
    let asked = args.delivery;
    let mut started = start(&client, &session, args, work_done_token).await?;
    let delivery = asked.filter(|d| *d != crate::config::delivery::Delivery::Auto);
    let client_name = session.read_state(|s| s.client_name.clone());
    started.at_once = delivery.unwrap_or(started.prepared.config.delivery).at_once(client_name.as_deref());
    if !started.at_once {
        // Dropping this handler (e.g. on $/cancelRequest) cancels the run.
        let _cancel_on_drop = started.cancel.clone().drop_guard();
        let (result, _) = finish(client, session, started, Delivery::ApplyEdit).await?;
        return to_value(&result);
    }
    let answer = RunStarted { run_id: run_id(&started.registration), status: "started".into() };
    in_background(client, session, started, Delivery::ApplyEdit);
    to_value(&answer)
}

/// Runs a started fix to its end in a task of its own, then sends its
/// outcome as `agentfix/runEnded` (a crash too).
fn in_background(client: Client, session: Arc<Session>, started: Started, delivery: Delivery) {
    let run_id = run_id(&started.registration);
    tokio::spawn(async move {
        let result = match finish(client.clone(), session, started, delivery).await {
            Ok((result, _)) => result,
            Err(e) => crashed(run_id, e.message.into_owned()),
        };
        client.send_notification::<RunEnded>(result).await;
    });
}

fn to_value(v: &impl serde::Serialize) -> Result<Value> {
    serde_json::to_value(v).map_err(|e| Error {
        code: ErrorCode::InternalError,
        message: e.to_string().into(),
        data: None,
    })
}

/// The outcome of a run whose task failed (a panic: a bug).
fn crashed(run_id: String, message: String) -> FixResponse {
    FixResponse {
        run_id,
        applied: false,
        stop_reason: "internal_error".into(),
        turns: 0,
        input_tokens: 0,
        output_tokens: 0,
        cache_read_tokens: 0,
        cache_write_tokens: 0,
        cost_usd: None,
        message,
        transcript: None,
        conflicts: Vec::new(),
        verification: None,
        candidates: Vec::new(),
    }
}

/// Handles `workspace/executeCommand` for `agentfix.cancel`.
pub fn cancel(session: &Session, arguments: &[Value]) -> Result<Value> {
    let args = CancelArguments::from_command(arguments).map_err(Error::invalid_params)?;
    let id = args.run_id.strip_prefix("run-").and_then(|n| n.parse::<u64>().ok());
    to_value(&CancelResponse { cancelled: id.is_some_and(|id| session.runs.cancel_by_id(id)) })
}

/// Handles `codeAction/resolve` for clients without `workspace/applyEdit`
/// (they resolve `edit`). Unless `delivery` is `sync`, it answers at once:
/// with the last finished proposal for those lines when there is one the
/// files do not hold yet, else with no edit, the run started in the
/// background (said with `window/showMessage`; it ends in
/// `agentfix/runEnded`, its proposal kept for the next resolve). With
/// `sync`, the run happens inside the resolve and its proposal is the edit.
pub async fn resolve_fix(client: Client, session: Arc<Session>, argument: Value) -> Result<Option<WorkspaceEdit>> {
    let args = FixArguments::from_value(&argument).map_err(Error::invalid_params)?;
    let asked = args.delivery.filter(|d| *d != crate::config::delivery::Delivery::Auto);
    let setting = session.read_state(|s| s.editor_settings().delivery);
    if asked.or(setting) == Some(crate::config::delivery::Delivery::Sync) {
        return run_fix(client, session, args, None, Delivery::Return).await.map(|(_, edit)| edit);
    }
    if args.follow_up.is_none()
        && let Some(edit) = finished_proposal(&session, &args)
    {
        return Ok(Some(edit));
    }
    let mut started = start(&client, &session, args, None).await?;
    started.at_once = true;
    let run_id = run_id(&started.registration);
    let msg = format!(
        "Agent fix is working on it ({run_id}); pick the same code action again when it says its proposal is ready."
    );
    client.show_message(MessageType::INFO, msg).await;
    in_background(client, session, started, Delivery::Return);
    Ok(None)
}

/// The edit of the newest finished run whose proposal changed the lines of
/// `args`, when every file it changed still holds the text the run started
/// from (a proposal already taken, or overtaken by typing, is not offered
/// again).
fn finished_proposal(session: &Session, args: &FixArguments) -> Option<WorkspaceEdit> {
    let path = convert::uri_to_path(&args.uri)?;
    let run = session.kept.newest_touching(&path, convert::range_lines(&args.range))?;
    let current = |p: &std::path::Path| session.current_text(p);
    let untaken = run
        .past
        .proposed
        .iter()
        .all(|f| crate::follow_up::Fate::of(f, current(&f.path).as_deref()) == crate::follow_up::Fate::Rejected);
    if run.past.proposed.is_empty() || !untaken {
        return None;
    }
    let changes: Vec<crate::workspace::FileChange> = run
        .past
        .proposed
        .iter()
        .map(|f| crate::workspace::FileChange {
            path: f.path.clone(),
            display: f.display.clone(),
            version: None,
            pin: None,
            original: f.original.clone(),
            new_text: f.proposed.clone(),
            reasons: Vec::new(),
        })
        .collect();
    let outgoing = proposal::prepare(&changes, &session.docs);
    let state = session.state();
    let (edit, hunks, _) = convert::workspace_edit(&outgoing.files, state.encoding, state.support.edit);
    (hunks > 0).then_some(edit)
}

/// Where the proposal goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Delivery {
    /// `workspace/applyEdit`.
    ApplyEdit,
    /// Returned to the caller, as the resolved code action's edit.
    Return,
}

/// A run that passed every check, registered, about to start.
struct Started {
    prepared: Prepared,
    model: Arc<dyn ModelClient>,
    request: Request,
    /// The session's folders, for the downstream servers.
    roots: Vec<PathBuf>,
    /// The title when the model gives no summary.
    fallback_title: Option<String>,
    support: ClientSupport,
    encoding: PositionEncoding,
    work_done_token: Option<NumberOrString>,
    cancel: CancellationToken,
    /// Clears the run's registration when the run's task ends.
    registration: RunGuard,
    /// `agentfix.fix` answered at once: the outcome is said whatever it is
    /// (a client without a plugin has no other sign of it).
    at_once: bool,
}

/// How the proposal was delivered, for the message and the result.
#[derive(Default)]
pub(super) struct Delivered {
    pub message: String,
    pub applied: bool,
    pub cancelled: bool,
    pub conflicts: Vec<String>,
    /// The edit, for [`Delivery::Return`].
    pub edit: Option<WorkspaceEdit>,
    /// The proposal's files as the edit carries them, with each hunk's
    /// annotation id (what a follow-up reports per hunk).
    pub sent: Vec<SentFile>,
}

impl Delivered {
    fn said(message: impl Into<String>) -> Self {
        Self { message: message.into(), ..Self::default() }
    }
}

/// One run of `agentfix.fix` answered when it is over: start (checks,
/// setup, registration), then [`finish`].
async fn run_fix(
    client: Client,
    session: Arc<Session>,
    args: FixArguments,
    work_done_token: Option<NumberOrString>,
    delivery: Delivery,
) -> Result<(FixResponse, Option<WorkspaceEdit>)> {
    let started = start(&client, &session, args, work_done_token).await?;
    // Dropping this handler (e.g. on $/cancelRequest) cancels the run.
    let _cancel_on_drop = started.cancel.clone().drop_guard();
    finish(client, session, started, delivery).await
}

/// A started run, in a task of its own, with its progress, to its delivery
/// and result; a panic in it is an error said to the user.
async fn finish(
    client: Client,
    session: Arc<Session>,
    started: Started,
    delivery: Delivery,
) -> Result<(FixResponse, Option<WorkspaceEdit>)> {
    let task = {
        let (client, session) = (client.clone(), session.clone());
        async move {
            let progress = RunProgress::create(
                &client,
                started.support.work_done_progress,
                started.work_done_token.clone(),
                started.registration.token.clone(),
            )
            .await;
            progress.begin("Agent fix", "turn 1: asking the model").await;
            let result = run_with_progress(&client, &session, &started, &progress).await;
            let mut delivered = match &result.verdict {
                Verdict::Proposal(proposal) => {
                    let mut spent = spent(result.outcome.turns, &result.spend);
                    // Best of N: which candidate this is, in the review too.
                    if let Some(c) = result.candidates.iter().find(|c| c.chosen) {
                        spent.push_str(&format!("; candidate {} of {}", c.index, result.candidates.len()));
                    }
                    let check = result.verification.as_ref().and_then(|v| v.line());
                    let mut delivered =
                        deliver(&client, &session, &started, (proposal, check.as_deref()), &spent, delivery).await;
                    // Resolved at once: the edit waits for the next resolve.
                    if delivery == Delivery::Return && started.at_once && delivered.edit.take().is_some() {
                        delivered.applied = false;
                        delivered
                            .message
                            .push_str("; ready: pick the same Agent fix code action on those lines again to apply it");
                    }
                    delivered
                }
                verdict => Delivered {
                    cancelled: *verdict == Verdict::Cancelled,
                    ..Delivered::said(no_proposal(verdict, started.support, delivery))
                },
            };
            if !delivered.cancelled && result.verdict != Verdict::Cancelled {
                keep(&session, &started, &result, std::mem::take(&mut delivered.sent));
            }
            conclude(&client, &progress, &started, &result, delivered).await
        }
    };
    match tokio::spawn(task).await {
        Ok(v) => Ok(v),
        Err(e) => {
            let msg = if e.is_panic() {
                format!("Agent fix crashed: {}", panic_message(&*e.into_panic()))
            } else {
                "Agent fix was aborted".to_string()
            };
            tracing::error!("{msg}");
            client.show_message(MessageType::ERROR, &msg).await;
            Err(Error { code: ErrorCode::InternalError, message: msg.into(), data: None })
        }
    }
}

/// Shows `msg` and makes it the request's error.
async fn refuse(client: &Client, kind: MessageType, msg: String, error: fn(String) -> Error) -> Error {
    client.show_message(kind, &msg).await;
    error(msg)
}

/// The editor's diagnostics of the run, whole, their columns as characters
/// of the buffer's lines when the editor has it open (the target, by the
/// version check of `start`).
fn problems_of(session: &Session, args: &FixArguments, encoding: PositionEncoding) -> Vec<Diagnostic> {
    let rope = session.docs.get(args.uri.as_str()).map(|d| d.rope);
    args.diagnostics.iter().map(|d| convert::diagnostic_from_proto(d, rope.as_ref(), encoding)).collect()
}

/// Everything before the run: the target's path, the configuration and
/// model, the refusals (protected, out of sync, busy), the registration.
async fn start(
    client: &Client,
    session: &Arc<Session>,
    args: FixArguments,
    work_done_token: Option<NumberOrString>,
) -> Result<Started> {
    let Some(path) = convert::uri_to_path(&args.uri) else {
        let msg = format!(
            "Agent fix works only on files saved on this machine (a local file: URI), not on `{}`; save the buffer in a workspace folder and try again.",
            args.uri.as_str()
        );
        return Err(refuse(client, MessageType::WARNING, msg, Error::invalid_params).await);
    };
    let past = match &args.follow_up {
        None => None,
        Some(id) => match past_run(session, id) {
            Some(past) => Some(past),
            None => {
                let msg = format!(
                    "Agent fix cannot follow up on {id}: agentfix keeps the last {KEPT_RUNS} runs of this session, and that one is not among them (or the server restarted). Start a new Agent fix."
                );
                return Err(refuse(client, MessageType::WARNING, msg, request_failed).await);
            }
        },
    };
    // A configuration pull in progress finishes first (it is bounded).
    drop(session.config_gate.read().await);
    let state = session.state();
    // The session's folders, whatever the target: a file outside them is
    // added alone (never its folder), and no agentfix.toml is read for it.
    let roots = state.roots.clone();
    let target = Target {
        path: path.clone(),
        lines: convert::range_lines(&args.range),
        problems: problems_of(session, &args, state.encoding),
        instruction: args.instruction.clone(),
    };
    let request = Request {
        follow_up: past,
        model: args.model.clone(),
        effort: args.effort,
        candidates: args.candidates,
        candidates_stop: args.candidates_stop,
        ..Request::new(target)
    };
    if let Some(root) = roots.first() {
        for w in crate::config::settings::Settings::file_warnings(root) {
            tracing::warn!("{w}");
            // In the editor too, once a session: what a repository sets
            // against its user is left out, and the user should know.
            if session.first_time(&w) {
                client.show_message(MessageType::WARNING, format!("agentfix: {w}")).await;
            }
        }
    }
    if let Some(v) = args.version
        && let Some(doc) = session.docs.get(args.uri.as_str())
        && doc.version != v
    {
        tracing::info!(
            asked = v,
            current = doc.version,
            "the buffer changed since the code action; working on the current text"
        );
    }
    let (prepared, model) = prepare(client, session, &roots, &state.editor_settings(), &request).await?;
    let workspace = prepared.workspace();
    let overlay = prepared.overlay.clone();
    // Cancelled with the session too.
    let cancel = session.run_cancellation();
    // The client's token when it sent one (then cancel by that token works
    // per run), else our own.
    let client_token = work_done_token.as_ref().map(|t| match t {
        NumberOrString::String(s) => s.clone(),
        NumberOrString::Number(n) => n.to_string(),
    });
    let registration = match session.runs.register(path.clone(), overlay.clone(), cancel.clone(), client_token) {
        Ok(r) => r,
        Err(other) => {
            let msg = format!(
                "Agent fix is already working on {} (run {other}); wait for it to finish or cancel it, then try again.",
                workspace.display(&path)
            );
            return Err(refuse(client, MessageType::WARNING, msg, request_failed).await);
        }
    };
    Ok(Started {
        prepared,
        model,
        request,
        roots,
        fallback_title: args.diagnostics.first().map(|d| d.message.clone()),
        support: state.support,
        encoding: state.encoding,
        work_done_token,
        cancel,
        registration,
        at_once: false,
    })
}

/// The configuration, the checks of `request` and the model client, or the
/// refusal said to the user.
async fn prepare(
    client: &Client,
    session: &Session,
    roots: &[PathBuf],
    editor: &crate::config::settings::Settings,
    request: &Request,
) -> Result<(Prepared, Arc<dyn ModelClient>)> {
    let buffers: Arc<dyn BufferSource> = session.docs.clone();
    let setup = Setup::load(roots.first().map(PathBuf::as_path), editor, request);
    if let Ok(setup) = &setup
        && let Some(refusal) = fix::sandbox_refusal(&setup.config)
    {
        // Said once per session, in the editor and in its log: every run
        // would say the same.
        static SAID: std::sync::Once = std::sync::Once::new();
        let mut first = false;
        SAID.call_once(|| first = true);
        if first {
            tracing::warn!("{refusal}");
            client.show_message(MessageType::WARNING, format!("Agent fix: {refusal}")).await;
        }
    }
    let prepared = setup.and_then(|setup| {
        let prepared = setup.prepare(Roots::Folders(roots.to_vec()), request, buffers)?;
        let model = prepared.model()?;
        Ok((prepared, model))
    });
    match prepared {
        Ok(p) => Ok(p),
        Err(e @ Refusal::Config(_)) => {
            client.show_message(MessageType::ERROR, format!("Agent fix: {e}")).await;
            Err(request_failed(e.to_string()))
        }
        Err(e) => {
            let msg = format!("Agent fix cannot run: {e}.");
            Err(refuse(client, MessageType::WARNING, msg, request_failed).await)
        }
    }
}

/// The run itself, its events forwarded to the progress (streamed text
/// throttled; whatever reaches the user scrubbed of the key and of
/// credential-shaped strings, since a model or a proxy may echo them).
async fn run_with_progress(
    client: &Client,
    session: &Arc<Session>,
    started: &Started,
    progress: &RunProgress,
) -> fix::FixResult {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<ProgressLine>();
    let forward = {
        let progress = progress.clone();
        let redactor = started.prepared.config.key_redactor();
        tokio::spawn(async move {
            // Streamed text is throttled; tool calls and retries always go out.
            let mut last_sent: Option<Instant> = None;
            while let Some(line) = rx.recv().await {
                if line.streaming && last_sent.is_some_and(|t| t.elapsed() < STREAM_THROTTLE) {
                    continue;
                }
                last_sent = Some(Instant::now());
                progress.report(redactor.redact(&line.text).into_owned()).await;
            }
        })
    };
    let lines = ProgressLines::priced(started.prepared.config.price());
    let events = move |e: RunEvent| {
        if let Some(line) = lines.line(&e) {
            let _ = tx.send(line);
        }
    };
    let config = &started.prepared.config;
    let downstream: Arc<dyn SymbolSource> = session.downstream(config, &started.roots).await;
    let approver: Arc<dyn Approver> = Arc::new(ClientApprover {
        client: client.clone(),
        session: session.clone(),
        root: started.prepared.overlay.workspace().primary_root().to_path_buf(),
    });
    let mcp = session.mcp(config, &started.roots).await;
    let services = Services {
        model: started.model.clone(),
        symbols: Some(downstream),
        approver: Some(approver),
        mcp: Some(mcp),
        progress: &events,
        cancel: started.cancel.clone(),
    };
    let result = fix::run(&started.prepared, services, started.request.clone()).await;
    drop(events);
    let _ = forward.await;
    result
}

/// What the user is told when there is no proposal to deliver.
fn no_proposal(verdict: &Verdict, support: ClientSupport, delivery: Delivery) -> String {
    match verdict {
        Verdict::Cancelled => "Agent fix cancelled; nothing was changed.".to_string(),
        Verdict::Discarded { files, reason } => format!(
            "Agent fix stopped early ({reason}); its edits to {files} file(s) were discarded (partialEdits = discard)."
        ),
        Verdict::NoEdit(NoEdit::ModelError(message)) => format!("Agent fix failed: {message}"),
        Verdict::NoEdit(NoEdit::Finished(summary)) => format!("Agent fix proposed no edit. {summary}"),
        Verdict::NoEdit(NoEdit::Stopped(reason)) => format!("Agent fix proposed no edit: {reason}."),
        Verdict::NoEdit(NoEdit::Unverified(why)) => {
            format!("Agent fix dropped its proposal (verify.offerUnverified = false): {why}")
        }
        Verdict::NoEdit(NoEdit::NoToolCall(said)) if said.is_empty() => {
            format!("Agent fix proposed no edit: {}.", fix::NO_TOOL_CALL)
        }
        Verdict::NoEdit(NoEdit::NoToolCall(said)) => {
            format!("Agent fix proposed no edit: {}. The model said: {said}", fix::NO_TOOL_CALL)
        }
        Verdict::Proposal(_) => {
            debug_assert!(!support.apply_edit && delivery == Delivery::ApplyEdit);
            "Agent fix has a proposal, but this editor does not support workspace/applyEdit.".to_string()
        }
    }
}

/// Turns the proposal into one edit against the documents as they are now
/// (rebased over the user's typing, out-of-sync files left out) and delivers
/// it: `workspace/applyEdit`, or returned for the resolved code action.
async fn deliver(
    client: &Client,
    session: &Arc<Session>,
    started: &Started,
    (proposal, check): (&Proposal, Option<&str>),
    spent: &str,
    delivery: Delivery,
) -> Delivered {
    if !started.support.apply_edit && delivery == Delivery::ApplyEdit {
        return Delivered::said(no_proposal(&Verdict::Proposal(proposal.clone()), started.support, delivery));
    }
    // A file whose copy fell out of sync with the editor gets no edit: its
    // positions could land anywhere.
    let (stale, changes): (Vec<_>, Vec<_>) = proposal
        .changes
        .iter()
        .cloned()
        .partition(|c| session.docs.get_by_path(&c.path).is_some_and(|d| d.out_of_sync));
    let mut outgoing = proposal::prepare(&changes, &session.docs);
    // Hunks are annotated with the problem they address (a fix-all's review
    // accepts them per problem).
    let problems: Vec<(u32, String)> =
        started.request.target.problems.iter().map(|d| (d.at.line, d.message.clone())).collect();
    for file in outgoing.files.iter_mut().filter(|f| f.path == started.request.target.path) {
        file.problems = problems.clone();
    }
    let mut conflicts = outgoing.conflicts.clone();
    // An editor that applies edits without a review (and writes the files
    // it has not open) gets only its open buffers; the rest is said.
    let unreviewed = unreviewed_files(session, &mut outgoing);
    conflicts.extend(stale.iter().map(|c| {
        format!(
            "{}: not changed because agentfix's copy of it is out of sync with the editor (save it, then run Agent fix again)",
            c.display
        )
    }));
    let (edit, hunks, skipped) = convert::workspace_edit(&outgoing.files, started.encoding, started.support.edit);
    let sent = sent_files(&outgoing.files, &skipped);
    let files = outgoing.files.len() - skipped.len();
    let title =
        first_line(&proposal.summary).or_else(|| started.fallback_title.clone()).unwrap_or_else(|| "proposal".into());
    let early = proposal.stopped_early.as_ref().map(|r| format!(" (stopped early: {r})")).unwrap_or_default();
    let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    // The check leads: `verified: …` or `not verified: …`.
    let lead = check.map(|c| format!("{c}; ")).unwrap_or_default();
    let mut label =
        format!("Agent fix: {lead}{title}{early} ({}, {}; {spent})", plural(files, "file"), plural(hunks, "hunk"));
    if !unreviewed.is_empty() {
        label.push_str(&format!(
            "; left out, since this editor applies edits without a review: {} (open them in the editor, an empty buffer for a new file, then use Agent fix: follow up… to get them)",
            unreviewed.join(", ")
        ));
    }
    // Said in the label too: a client without change annotations shows no
    // other sign of it.
    for f in outgoing.files.iter().filter(|f| !skipped.contains(&f.display)) {
        if let Some(why) = runs_code(std::path::Path::new(&f.display)) {
            label.push_str(&format!("; {} runs code ({why}): review it before accepting", f.display));
        }
    }
    let mut message = label.clone();
    if !skipped.is_empty() {
        message.push_str(&format!("; left out (the editor cannot create files): {}", skipped.join(", ")));
    }
    for c in &conflicts {
        message.push_str(&format!("; {c}"));
    }
    // In the result too (the label already says it).
    conflicts
        .extend(unreviewed.iter().map(|f| format!("{f}: left out, since this editor applies edits without a review")));
    if hunks == 0 {
        let message = format!("Agent fix: nothing left to apply. {}", conflicts.join("; "));
        return Delivered { message, conflicts, ..Delivered::default() };
    }
    if delivery == Delivery::Return {
        return Delivered { message, applied: true, conflicts, edit: Some(edit), cancelled: false, sent };
    }
    let answer = apply_edit(client, session, &started.cancel, label, edit, outgoing.files).await;
    // An applied proposal keeps its label as the message; every other
    // answer says what happened instead.
    Delivered { message: if answer.message.is_empty() { message } else { answer.message }, conflicts, sent, ..answer }
}

/// The files of an edit as a follow-up needs them: the text each hunk was
/// made on, the hunks, their annotation ids; `skipped` (left out of the
/// edit) are not among them.
pub(super) fn sent_files(files: &[convert::FileEdit], skipped: &[String]) -> Vec<SentFile> {
    files
        .iter()
        .zip(convert::annotation_ids(files))
        .filter(|(f, _)| !skipped.contains(&f.display))
        .map(|(f, ids)| SentFile {
            path: f.path.clone(),
            display: f.display.clone(),
            base: f.text.clone(),
            hunks: f.hunks.clone(),
            ids,
        })
        .collect()
}

/// The clients known to apply a `workspace/applyEdit` without a review and
/// to write to disk the files they do not have open (kakoune-lsp).
fn applies_unreviewed(client: Option<&str>) -> bool {
    client.is_some_and(|name| matches!(name.to_ascii_lowercase().as_str(), "kakoune-lsp" | "kak-lsp"))
}

/// For a client that applies edits without a review, takes the new files
/// and the files it has not open out of `outgoing`; returns them, each
/// with why (`new.py (a new file)`).
fn unreviewed_files(session: &Session, outgoing: &mut proposal::Outgoing) -> Vec<String> {
    if !applies_unreviewed(session.read_state(|s| s.client_name.clone()).as_deref()) {
        return Vec::new();
    }
    let mut left = Vec::new();
    outgoing.files.retain(|f| {
        let why = if f.create {
            "a new file"
        } else if session.docs.get_by_path(&f.path).is_none() {
            "not open"
        } else {
            return true;
        };
        left.push(format!("{} ({why})", f.display));
        false
    });
    left
}

/// Sends `workspace/applyEdit` and waits for the answer, for the user's
/// review time at most; a cancel ends the wait (the editor may never
/// answer). The message is set when the answer replaces the proposal's label.
pub(super) async fn apply_edit(
    client: &Client,
    session: &Arc<Session>,
    cancel: &CancellationToken,
    label: String,
    edit: WorkspaceEdit,
    files: Vec<convert::FileEdit>,
) -> Delivered {
    let request = client.send_request::<ApplyWorkspaceEdit>(ApplyWorkspaceEditParams { label: Some(label), edit });
    let answer = tokio::select! {
        // Cancelled already: the request is not even sent.
        biased;
        () = cancel.cancelled() => None,
        a = tokio::time::timeout(APPLY_EDIT_TIMEOUT, request) => Some(a),
    };
    let refused = |m: String| Delivered::said(m);
    match answer {
        None => Delivered {
            cancelled: true,
            ..Delivered::said("Agent fix cancelled while waiting for the editor to apply its proposal; agentfix no longer waits for the answer.")
        },
        Some(Ok(Ok(r))) if r.applied => {
            // Confirmed apart from the answer: some clients (eglot) send the
            // didChange only once the command has returned.
            let (session, client) = (session.clone(), client.clone());
            tokio::spawn(async move {
                let (missing, checked) = confirm_applied(&session, &files).await;
                // Some files changed and others did not: the user applied
                // part of it in a review (VS Code's extension unticks whole
                // files), not a dropped edit.
                if !missing.is_empty() && missing.len() == checked {
                    let msg = format!(
                        "The editor said it applied the agent's proposal, but {} did not change (a stale edit may have been dropped). Run Agent fix again.",
                        missing.join(", ")
                    );
                    client.show_message(MessageType::WARNING, msg).await;
                }
            });
            Delivered { applied: true, ..Delivered::default() }
        }
        Some(Ok(Ok(r))) => refused(match r.failure_reason {
            Some(f) => format!("The editor did not apply the agent's proposal: {f}."),
            None => "The editor did not apply the agent's proposal (in a review such as VS Code's Refactor Preview, tick the changes to apply).".to_string(),
        }),
        Some(Ok(Err(e))) => refused(format!("The editor refused the agent's proposal: {}", e.message)),
        Some(Err(_)) => refused("The editor did not answer workspace/applyEdit in time.".to_string()),
    }
}

/// Ends the progress, tells the user what happened when there is something
/// to tell, and builds the command's result.
async fn conclude(
    client: &Client,
    progress: &RunProgress,
    started: &Started,
    result: &fix::FixResult,
    delivered: Delivered,
) -> (FixResponse, Option<WorkspaceEdit>) {
    let outcome = &result.outcome;
    let message = started.prepared.config.key_redactor().redact(&delivered.message).into_owned();
    progress.end(message.clone()).await;
    let partial = matches!(&result.verdict, Verdict::Proposal(p) if p.stopped_early.is_some());
    let (applied, cancelled) = (delivered.applied, delivered.cancelled);
    if started.at_once || !applied || !delivered.conflicts.is_empty() || partial {
        let kind = match outcome.stop {
            _ if cancelled => MessageType::INFO,
            Stop::ModelError(_) | Stop::ToolFatal(_) => MessageType::ERROR,
            _ if applied && delivered.conflicts.is_empty() => MessageType::INFO,
            _ => MessageType::WARNING,
        };
        client.show_message(kind, &message).await;
    }
    let stop_reason = if cancelled { Stop::Cancelled.as_str() } else { outcome.stop.as_str() };
    let answer = FixResponse {
        run_id: run_id(&started.registration),
        applied,
        stop_reason: stop_reason.to_string(),
        turns: outcome.turns,
        input_tokens: outcome.usage.input_tokens,
        output_tokens: outcome.usage.output_tokens,
        cache_read_tokens: outcome.usage.cache_read_tokens,
        cache_write_tokens: outcome.usage.cache_write_tokens,
        cost_usd: result.spend.cost_usd,
        message,
        transcript: result.transcript.clone(),
        conflicts: delivered.conflicts,
        verification: result.verification.clone(),
        candidates: result.candidates.clone(),
    };
    (answer, delivered.edit)
}

/// The kept run `id` as a follow-up continues it, with what the editor's
/// review reported per hunk when it did.
fn past_run(session: &Session, id: &str) -> Option<Arc<PastRun>> {
    let run = session.kept.get(id)?;
    Some(match session.reviews.of(id) {
        reviews if reviews.is_empty() => run.past,
        reviews => Arc::new(PastRun { reviews, ..(*run.past).clone() }),
    })
}

/// The `runId` of a run.
fn run_id(registration: &RunGuard) -> String {
    format!("run-{}", registration.id)
}

/// Keeps a finished run for follow-ups: its conversation, what it
/// proposed and what the editor got of it.
fn keep(session: &Session, started: &Started, result: &fix::FixResult, sent: Vec<SentFile>) {
    let proposed = match &result.verdict {
        Verdict::Proposal(p) => p.changes.iter().map(ProposedFile::from).collect(),
        _ => Vec::new(),
    };
    session.kept.keep(KeptRun {
        id: run_id(&started.registration),
        past: Arc::new(PastRun { messages: result.outcome.messages.clone(), proposed, sent, ..PastRun::default() }),
        alternatives: result.alternatives.clone().into(),
    });
}

/// How long to wait for the `didChange` that should follow an applied edit.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(2);

/// The open documents an applied edit did not change: some clients answer
/// `applied: true` after silently dropping an edit for a stale version, so
/// the `didChange` that must follow is the real confirmation.
/// Returns them, and how many open documents were checked.
async fn confirm_applied(session: &Session, files: &[convert::FileEdit]) -> (Vec<String>, usize) {
    let deadline = Instant::now() + CONFIRM_TIMEOUT;
    loop {
        let open: Vec<(&convert::FileEdit, bool)> = files
            .iter()
            .filter(|f| !f.hunks.is_empty())
            .filter_map(|f| {
                let sent = f.version?;
                let doc = session.docs.get_by_path(&f.path)?;
                Some((f, doc.version <= sent))
            })
            .collect();
        let missing: Vec<String> = open.iter().filter(|(_, same)| *same).map(|(f, _)| f.display.clone()).collect();
        if missing.is_empty() || Instant::now() >= deadline {
            return (missing, open.len());
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// `6 turns, 41,250 tokens, $0.07`: what the run took, for the label.
fn spent(turns: u32, spend: &fix::Spend) -> String {
    spend.with_turns(turns)
}

fn first_line(s: &str) -> Option<String> {
    let line = s.lines().map(str::trim).find(|l| !l.is_empty())?;
    let mut t: String = line.chars().take(80).collect();
    if line.chars().count() > 80 {
        t.push('…');
    }
    Some(t)
}
