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

use serde::Deserialize;
use serde_json::{Value, json};
use tower_lsp_server::Client;
use tower_lsp_server::jsonrpc::{Error, ErrorCode, Result};
use tower_lsp_server::ls_types::request::ApplyWorkspaceEdit;
use tower_lsp_server::ls_types::{
    ApplyWorkspaceEditParams, Diagnostic, MessageType, NumberOrString, Range, Uri, WorkspaceEdit,
};

use super::approval::ClientApprover;
use super::progress::RunProgress;
use super::{Session, convert, proposal};
use crate::agent::{RunEvent, Stop};
use crate::config::Config;
use crate::downstream::SymbolSource;
use crate::fix::{self, ProgressLine, ProgressLines, Target};
use crate::providers;
use crate::tools::Approver;
use crate::workspace::{Overlay, Workspace};

/// At most one streamed-text progress report per this interval.
const STREAM_THROTTLE: Duration = Duration::from_millis(250);

/// How long the user may take to review the proposal in the editor.
const APPLY_EDIT_TIMEOUT: Duration = Duration::from_secs(600);

/// The argument object of `agentfix.fix`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct FixArgs {
    uri: Uri,
    #[serde(default)]
    version: Option<i32>,
    range: Range,
    #[serde(default)]
    diagnostics: Vec<Diagnostic>,
    #[serde(default)]
    instruction: Option<String>,
}

fn request_failed(message: String) -> Error {
    Error { code: ErrorCode::ServerError(-32803), message: message.into(), data: None }
}

/// Handles `workspace/executeCommand` for `agentfix.fix`.
pub async fn execute_fix(
    client: Client,
    session: Arc<Session>,
    arguments: Vec<Value>,
    work_done_token: Option<NumberOrString>,
) -> Result<Value> {
    run_fix(client, session, arguments, work_done_token, false).await.map(|(result, _)| result)
}

/// Handles `codeAction/resolve` for clients without `workspace/applyEdit`
/// (they resolve `edit`): the same run, with the proposal returned as the
/// action's edit instead of sent with `workspace/applyEdit`.
pub async fn resolve_fix(client: Client, session: Arc<Session>, argument: Value) -> Result<Option<WorkspaceEdit>> {
    run_fix(client, session, vec![argument], None, true).await.map(|(_, edit)| edit)
}

/// One run of `agentfix.fix`; `return_edit` returns the proposal instead of
/// sending it.
async fn run_fix(
    client: Client,
    session: Arc<Session>,
    arguments: Vec<Value>,
    work_done_token: Option<NumberOrString>,
    return_edit: bool,
) -> Result<(Value, Option<WorkspaceEdit>)> {
    let args: FixArgs = match arguments.as_slice() {
        [one] => serde_json::from_value(one.clone()).map_err(|e| {
            Error::invalid_params(format!(
                "agentfix.fix expects one argument {{uri, version, range, diagnostics, instruction?}}: {e}"
            ))
        })?,
        _ => {
            return Err(Error::invalid_params(format!(
                "agentfix.fix expects exactly one argument {{uri, version, range, diagnostics, instruction?}}, got {}",
                arguments.len()
            )));
        }
    };
    let Some(path) = convert::uri_to_path(&args.uri) else {
        let msg = format!(
            "Agent fix works only on files saved on this machine (a local file: URI), not on `{}`; save the buffer in a workspace folder and try again.",
            args.uri.as_str()
        );
        client.show_message(MessageType::WARNING, &msg).await;
        return Err(Error::invalid_params(msg));
    };
    // A configuration pull in progress finishes first (it is bounded).
    drop(session.config_gate.read().await);
    let state = session.state();
    // The session's folders, whatever the target: a file outside them is
    // added alone (never its folder), and no agentfix.toml is read for it.
    let roots = state.roots.clone();
    let setup = Config::load(roots.first().map(PathBuf::as_path), &state.editor_settings())
        .and_then(|config| providers::from_config(&config).map(|model| (config, model)));
    let (config, model) = match setup {
        Ok(x) => x,
        Err(e) => {
            client.show_message(MessageType::ERROR, format!("Agent fix: {e}")).await;
            return Err(request_failed(e.to_string()));
        }
    };
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
    let ds_roots = roots.clone();
    let workspace = Arc::new(Workspace::new(roots).with_protected(&config.exclude).with_file(path.clone()));
    if workspace.is_protected_target(&path) {
        let msg = format!(
            "Agent fix does not work on {}: it is a protected file (secrets such as .env files, keys and credentials are never sent to the model).",
            workspace.display(&path)
        );
        client.show_message(MessageType::WARNING, &msg).await;
        return Err(request_failed(msg));
    }
    if session.docs.get(args.uri.as_str()).or_else(|| session.docs.get_by_path(&path)).is_some_and(|d| d.out_of_sync) {
        let msg = format!(
            "Agent fix is off for {}: a change the editor sent for it could not be applied, so agentfix's copy may differ from yours. Save the file (or close and reopen it), then try again.",
            workspace.display(&path)
        );
        client.show_message(MessageType::WARNING, &msg).await;
        return Err(request_failed(msg));
    }
    if let Some(other) = session.busy_with(&path) {
        let msg = format!(
            "Agent fix is already working on {} (run {other}); wait for it to finish or cancel it, then try again.",
            workspace.display(&path)
        );
        client.show_message(MessageType::WARNING, &msg).await;
        return Err(request_failed(msg));
    }
    let overlay = Arc::new(Overlay::new(workspace, session.docs.clone()));
    let target = Target {
        path,
        lines: convert::range_lines(&args.range),
        problems: args.diagnostics.iter().map(convert::problem_from_proto).collect(),
        instruction: args.instruction.clone(),
    };
    let fallback_title = args.diagnostics.first().map(|d| d.message.clone());

    // Cancelled with the session too.
    let cancel = session.run_cancellation();
    // Dropping this handler (e.g. on $/cancelRequest) cancels the run.
    let _guard = cancel.clone().drop_guard();
    let run_id = session.next_run_id();
    session.set_active(run_id, target.path.clone(), overlay.clone(), cancel.clone());
    // The client's token when it sent one (then cancel by that token works
    // per run), else our own.
    let token_name = match &work_done_token {
        Some(NumberOrString::String(s)) => s.clone(),
        Some(NumberOrString::Number(n)) => n.to_string(),
        None => format!("agentfix/fix/{run_id}"),
    };
    let supports_progress = state.caps.window.as_ref().and_then(|w| w.work_done_progress).unwrap_or(false);
    let supports_apply = state.caps.workspace.as_ref().and_then(|w| w.apply_edit).unwrap_or(false);
    let edit_support = convert::EditSupport::of(&state.caps);
    let encoding = state.encoding;

    let task = {
        let session = session.clone();
        let client = client.clone();
        let cancel = cancel.clone();
        async move {
            // The file is free again when the task ends, however it ends.
            session.register_run(&token_name, cancel.clone());
            let _active = ActiveRun(session.clone(), run_id, token_name.clone());
            let progress = RunProgress::create(&client, supports_progress, work_done_token, token_name.clone()).await;
            progress.begin("Agent fix", "turn 1: asking the model").await;
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<ProgressLine>();
            // Whatever reaches the user is scrubbed of the key and of
            // credential-shaped strings (a model or a proxy may echo them).
            let redactor = config.key_redactor();
            let forward = {
                let progress = progress.clone();
                let redactor = redactor.clone();
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
            let lines = ProgressLines::default();
            let events = move |e: RunEvent| {
                if let Some(line) = lines.line(&e) {
                    let _ = tx.send(line);
                }
            };
            let downstream: Arc<dyn SymbolSource> = session.downstream(&config, &ds_roots).await;
            let approver: Arc<dyn Approver> = Arc::new(ClientApprover {
                client: client.clone(),
                session: session.clone(),
                root: overlay.workspace().primary_root().to_path_buf(),
            });
            let result =
                fix::run(&config, &*model, overlay, Some(downstream), Some(approver), &target, &cancel, &events).await;
            drop(events);
            let _ = forward.await;
            let outcome = &result.outcome;
            let reason = outcome.stop.describe(&result.limits);
            let mut applied = false;
            let mut returned: Option<WorkspaceEdit> = None;
            let mut conflicts: Vec<String> = Vec::new();
            let mut cancelled = outcome.stop == Stop::Cancelled;
            let mut message;
            if cancelled || cancel.is_cancelled() {
                cancelled = true;
                message = "Agent fix cancelled; nothing was changed.".to_string();
            } else if result.discarded > 0 {
                message = format!(
                    "Agent fix stopped early ({reason}); its edits to {} file(s) were discarded (partialEdits = discard).",
                    result.discarded
                );
            } else if result.changes.is_empty() {
                message = match &outcome.stop {
                    Stop::ModelError(e) => format!("Agent fix failed: {}", e.message),
                    s if s.is_natural() => {
                        format!("Agent fix proposed no edit. {}", outcome.summary.trim())
                    }
                    _ => format!("Agent fix proposed no edit: {reason}."),
                };
            } else if !supports_apply && !return_edit {
                message = "Agent fix has a proposal, but this editor does not support workspace/applyEdit.".to_string();
            } else {
                // A file whose copy fell out of sync with the editor gets no
                // edit: its positions could land anywhere.
                let (stale, changes): (Vec<_>, Vec<_>) = result
                    .changes
                    .iter()
                    .cloned()
                    .partition(|c| session.docs.get_by_path(&c.path).is_some_and(|d| d.out_of_sync));
                let prepared = proposal::prepare(&changes, &session.docs);
                conflicts = prepared.conflicts.clone();
                conflicts.extend(stale.iter().map(|c| {
                    format!(
                        "{}: not changed because agentfix's copy of it is out of sync with the editor (save it, then run Agent fix again)",
                        c.display
                    )
                }));
                let (edit, hunks, skipped) = convert::workspace_edit(&prepared.files, encoding, edit_support);
                let files = prepared.files.len() - skipped.len();
                let title = first_line(&outcome.summary).or(fallback_title).unwrap_or_else(|| "proposal".into());
                let early =
                    if outcome.stop.is_natural() { String::new() } else { format!(" (stopped early: {reason})") };
                let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
                let label = format!("Agent fix: {title}{early} ({}, {})", plural(files, "file"), plural(hunks, "hunk"));
                message = label.clone();
                if !skipped.is_empty() {
                    message.push_str(&format!("; left out (the editor cannot create files): {}", skipped.join(", ")));
                }
                for c in &conflicts {
                    message.push_str(&format!("; {c}"));
                }
                if hunks == 0 {
                    message = format!("Agent fix: nothing left to apply. {}", conflicts.join("; "));
                } else if return_edit {
                    returned = Some(edit);
                    applied = true;
                } else {
                    let request = client
                        .send_request::<ApplyWorkspaceEdit>(ApplyWorkspaceEditParams { label: Some(label), edit });
                    // Cancel ends the wait: the editor may never answer.
                    let answer = tokio::select! {
                        // Cancelled already: the request is not even sent.
                        biased;
                        () = cancel.cancelled() => None,
                        a = tokio::time::timeout(APPLY_EDIT_TIMEOUT, request) => Some(a),
                    };
                    match answer {
                        None => {
                            cancelled = true;
                            message = "Agent fix cancelled while waiting for the editor to apply its proposal; agentfix no longer waits for the answer.".to_string();
                        }
                        Some(Ok(Ok(r))) if r.applied => {
                            applied = true;
                            // Confirmed apart from the answer: some clients
                            // (eglot) send the didChange only once the command
                            // has returned.
                            let (session, client, files) = (session.clone(), client.clone(), prepared.files.clone());
                            tokio::spawn(async move {
                                let missing = confirm_applied(&session, &files).await;
                                if !missing.is_empty() {
                                    let msg = format!(
                                        "The editor said it applied the agent's proposal, but {} did not change (a stale edit may have been dropped). Run Agent fix again.",
                                        missing.join(", ")
                                    );
                                    client.show_message(MessageType::WARNING, msg).await;
                                }
                            });
                        }
                        Some(Ok(Ok(r))) => {
                            message = match r.failure_reason {
                                Some(f) => format!("The editor did not apply the agent's proposal: {f}."),
                                None => "The editor did not apply the agent's proposal (in a review such as VS Code's Refactor Preview, tick the changes to apply).".to_string(),
                            }
                        }
                        Some(Ok(Err(e))) => {
                            message = format!("The editor refused the agent's proposal: {}", e.message)
                        }
                        Some(Err(_)) => message = "The editor did not answer workspace/applyEdit in time.".to_string(),
                    }
                }
            }
            let message = redactor.redact(&message).into_owned();
            progress.end(message.clone()).await;
            let shown = !applied || !conflicts.is_empty() || !result.changes.is_empty() && !outcome.stop.is_natural();
            if shown {
                let kind = match outcome.stop {
                    _ if cancelled => MessageType::INFO,
                    Stop::ModelError(_) | Stop::ToolFatal(_) => MessageType::ERROR,
                    _ if applied && conflicts.is_empty() => MessageType::INFO,
                    _ => MessageType::WARNING,
                };
                client.show_message(kind, &message).await;
            }
            let stop_reason = if cancelled { Stop::Cancelled.as_str() } else { outcome.stop.as_str() };
            let result = json!({
                "applied": applied,
                "stopReason": stop_reason,
                "turns": outcome.turns,
                "inputTokens": outcome.usage.input_tokens,
                "outputTokens": outcome.usage.output_tokens,
                "message": message,
                "transcript": result.transcript,
                "conflicts": conflicts,
            });
            (result, returned)
        }
    };
    match tokio::spawn(task).await {
        Ok(v) => Ok(v),
        Err(e) => {
            let msg = if e.is_panic() {
                let p = e.into_panic();
                let text = p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".into());
                format!("Agent fix crashed: {text}")
            } else {
                "Agent fix was aborted".to_string()
            };
            tracing::error!("{msg}");
            client.show_message(MessageType::ERROR, &msg).await;
            Err(Error { code: ErrorCode::InternalError, message: msg.into(), data: None })
        }
    }
}

/// Marks a run finished when dropped: its file is free, its progress token
/// cancels nothing any more.
struct ActiveRun(Arc<Session>, u64, String);

impl Drop for ActiveRun {
    fn drop(&mut self) {
        self.0.unregister_run(&self.2);
        self.0.clear_active(self.1);
    }
}

/// How long to wait for the `didChange` that should follow an applied edit.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(2);

/// The open documents an applied edit did not change: some clients answer
/// `applied: true` after silently dropping an edit for a stale version, so
/// the `didChange` that must follow is the real confirmation.
async fn confirm_applied(session: &Session, files: &[convert::FileEdit]) -> Vec<String> {
    let deadline = Instant::now() + CONFIRM_TIMEOUT;
    loop {
        let missing: Vec<String> = files
            .iter()
            .filter(|f| !f.hunks.is_empty())
            .filter_map(|f| {
                let sent = f.version?;
                let doc = session.docs.get_by_path(&f.path)?;
                (doc.version <= sent).then(|| f.display.clone())
            })
            .collect();
        if missing.is_empty() || Instant::now() >= deadline {
            return missing;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

fn first_line(s: &str) -> Option<String> {
    let line = s.lines().map(str::trim).find(|l| !l.is_empty())?;
    let mut t: String = line.chars().take(80).collect();
    if line.chars().count() > 80 {
        t.push('…');
    }
    Some(t)
}
