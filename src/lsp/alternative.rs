//! The `agentfix.applyAlternative` command: one of the candidates a run did
//! not choose, applied as the user picks it from the code actions. No model
//! is asked: the candidate's edit, made against the text the run started
//! from, is carried over what the files hold now like any proposal (see
//! `proposal`) and sent with one `workspace/applyEdit`, or returned as the
//! resolved action's edit.
//!
//! When a file holds the chosen proposal (the user accepted it), the
//! alternative replaces it: its edit is made from the chosen text, and the
//! files only the chosen proposal changed are put back as they were, so
//! that what the user gets is the alternative, not a mix of two candidates.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use tower_lsp_server::Client;
use tower_lsp_server::jsonrpc::{Error, ErrorCode, Result};
use tower_lsp_server::ls_types::{MessageType, WorkspaceEdit};

use super::convert;
use super::ext::{AlternativeArguments, AlternativeResponse};
use super::proposal::{self, Outgoing};
use super::run::{self, apply_edit};
use super::session::{KEPT_RUNS, Session};
use crate::fix::Alternative;
use crate::follow_up::ProposedFile;
use crate::workspace::FileChange;

/// Handles `workspace/executeCommand` for `agentfix.applyAlternative`.
pub async fn execute(client: &Client, session: &Arc<Session>, arguments: &[Value]) -> Result<Value> {
    let args = AlternativeArguments::from_command(arguments).map_err(Error::invalid_params)?;
    let answer = match find(session, &args) {
        Err(message) => {
            client.show_message(MessageType::WARNING, &message).await;
            AlternativeResponse { applied: false, message, conflicts: Vec::new() }
        }
        Ok((alternative, chosen)) => deliver(client, session, &args.run_id, &alternative, &chosen).await,
    };
    serde_json::to_value(answer).map_err(|e| Error {
        code: ErrorCode::InternalError,
        message: e.to_string().into(),
        data: None,
    })
}

/// Handles `codeAction/resolve` of an alternative's action (clients that
/// resolve `edit` instead of taking `workspace/applyEdit`).
pub fn resolve(session: &Session, args: &AlternativeArguments) -> Result<Option<WorkspaceEdit>> {
    let (alternative, chosen) = find(session, args).map_err(Error::invalid_params)?;
    let outgoing = outgoing(session, &alternative, &chosen);
    let state = session.state();
    let (edit, hunks, _) = convert::workspace_edit(&outgoing.files, state.encoding, state.support.edit);
    Ok((hunks > 0).then_some(edit))
}

/// The alternative and the run's chosen proposal, or what to tell the user.
fn find(
    session: &Session,
    args: &AlternativeArguments,
) -> std::result::Result<(Alternative, Vec<ProposedFile>), String> {
    let Some(run) = session.kept.get(&args.run_id) else {
        return Err(format!(
            "Agent fix cannot apply an alternative of {}: agentfix keeps the last {KEPT_RUNS} runs of this session, and that one is not among them (or the server restarted).",
            args.run_id
        ));
    };
    match run.alternatives.iter().find(|a| a.index == args.index) {
        Some(a) => Ok((a.clone(), run.past.proposed.clone())),
        None => Err(format!(
            "{} has no alternative {} (it proposed {} other candidate(s)).",
            args.run_id,
            args.index,
            run.alternatives.len()
        )),
    }
}

/// Sends the alternative with `workspace/applyEdit` and says what became of it.
async fn deliver(
    client: &Client,
    session: &Arc<Session>,
    run_id: &str,
    alternative: &Alternative,
    chosen: &[ProposedFile],
) -> AlternativeResponse {
    let state = session.state();
    let outgoing = outgoing(session, alternative, chosen);
    let conflicts = outgoing.conflicts.clone();
    if !state.support.apply_edit {
        let message =
            "Agent fix has the alternative, but this editor does not support workspace/applyEdit.".to_string();
        client.show_message(MessageType::WARNING, &message).await;
        return AlternativeResponse { applied: false, message, conflicts };
    }
    let (edit, hunks, skipped) = convert::workspace_edit(&outgoing.files, state.encoding, state.support.edit);
    if hunks == 0 {
        let message = format!("Agent fix: nothing left to apply. {}", conflicts.join("; "));
        client.show_message(MessageType::WARNING, &message).await;
        return AlternativeResponse { applied: false, message, conflicts };
    }
    let label = label(alternative, outgoing.files.len(), hunks);
    // The run's proposal is now the alternative, before the review can end
    // and report on its hunks (their annotation ids are the alternative's);
    // put back when the editor does not apply it.
    let proposed = alternative.changes.iter().map(ProposedFile::from).collect();
    let before = session.kept.replace_proposal(run_id, proposed, run::sent_files(&outgoing.files, &skipped));
    let reviews = session.reviews.take(run_id);
    let cancel = session.run_cancellation();
    let sent = apply_edit(client, session, &cancel, label.clone(), edit, outgoing.files).await;
    if !sent.applied {
        if let Some(before) = before {
            session.kept.restore(run_id, before);
        }
        session.reviews.record(run_id, reviews);
    }
    let mut message = if sent.message.is_empty() { label } else { sent.message };
    for c in &conflicts {
        message.push_str(&format!("; {c}"));
    }
    if !sent.applied || !conflicts.is_empty() {
        client.show_message(MessageType::WARNING, &message).await;
    }
    AlternativeResponse { applied: sent.applied, message, conflicts }
}

/// `Agent fix: alternative 2 (not verified: test failed): <summary> (1 file, 2 hunks)`.
fn label(alternative: &Alternative, files: usize, hunks: usize) -> String {
    let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    let summary = alternative.summary.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("alternative");
    let summary: String = summary.chars().take(80).collect();
    format!("{}: {summary} ({}, {})", alternative.title(), plural(files, "file"), plural(hunks, "hunk"))
}

/// The alternative's edits against the documents as they are now.
fn outgoing(session: &Session, alternative: &Alternative, chosen: &[ProposedFile]) -> Outgoing {
    proposal::prepare(&over_chosen(&alternative.changes, chosen, |p| session.current_text(p)), &session.docs)
}

/// `alternative`'s changes, made to replace `chosen` in the files that hold
/// it now (`current` reads a file's text: the buffer, else the disk).
fn over_chosen(
    alternative: &[FileChange],
    chosen: &[ProposedFile],
    current: impl Fn(&Path) -> Option<String>,
) -> Vec<FileChange> {
    let applied = |c: &ProposedFile| {
        c.original.as_deref() != Some(&c.proposed) && current(&c.path).as_deref() == Some(&c.proposed)
    };
    let applied: Vec<&ProposedFile> = chosen.iter().filter(|c| applied(c)).collect();
    let mut changes: Vec<FileChange> = alternative
        .iter()
        .map(|change| match applied.iter().find(|c| c.path == change.path) {
            // From the chosen text, as a file read from the disk is (its
            // text is checked against the buffer or the disk).
            Some(c) => FileChange { original: Some(c.proposed.clone()), version: None, pin: None, ..change.clone() },
            None => change.clone(),
        })
        .collect();
    // Files only the chosen proposal changed go back to what the run
    // started from (a file it created is left alone: no edit deletes one).
    for c in applied.iter().filter(|c| !alternative.iter().any(|a| a.path == c.path)) {
        if let Some(original) = &c.original {
            changes.push(FileChange {
                path: c.path.clone(),
                display: c.display.clone(),
                version: None,
                pin: None,
                original: Some(c.proposed.clone()),
                new_text: original.clone(),
                reasons: Vec::new(),
            });
        }
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::path::PathBuf;

    fn change(path: &str, original: &str, new_text: &str) -> FileChange {
        FileChange {
            path: path.into(),
            display: path.trim_start_matches('/').into(),
            version: Some(1),
            pin: Some(crate::workspace::BufferPin { generation: 1, seq: 0 }),
            original: Some(original.into()),
            new_text: new_text.into(),
            reasons: vec![],
        }
    }

    fn proposed(path: &str, original: &str, proposed: &str) -> ProposedFile {
        ProposedFile {
            path: path.into(),
            display: path.trim_start_matches('/').into(),
            original: Some(original.into()),
            proposed: proposed.into(),
        }
    }

    #[test]
    fn an_alternative_is_made_against_the_start_unless_the_chosen_one_was_applied() {
        let alternative = [change("/w/a.py", "x = 1\n", "x = 2\n")];
        let chosen = [proposed("/w/a.py", "x = 1\n", "x = 3\n"), proposed("/w/b.py", "b\n", "B\n")];
        // Rejected: the files hold what the run started from.
        let files: HashMap<PathBuf, &str> = [("/w/a.py".into(), "x = 1\n"), ("/w/b.py".into(), "b\n")].into();
        let now = over_chosen(&alternative, &chosen, |p| files.get(p).map(|t| t.to_string()));
        assert_eq!(now, alternative.to_vec(), "as the candidate made it");
        // Accepted: the alternative replaces the chosen text, and the file
        // only the chosen one changed goes back.
        let files: HashMap<PathBuf, &str> = [("/w/a.py".into(), "x = 3\n"), ("/w/b.py".into(), "B\n")].into();
        let now = over_chosen(&alternative, &chosen, |p| files.get(p).map(|t| t.to_string()));
        assert_eq!(now.len(), 2);
        assert_eq!(
            (now[0].original.as_deref(), now[0].new_text.as_str(), now[0].pin),
            (Some("x = 3\n"), "x = 2\n", None)
        );
        assert_eq!(
            (now[1].display.as_str(), now[1].original.as_deref(), now[1].new_text.as_str()),
            ("w/b.py", Some("B\n"), "b\n")
        );
    }

    #[test]
    fn the_label_leads_with_the_alternative_and_its_check() {
        let a = Alternative {
            index: 2,
            check: Some("not verified: test failed".into()),
            summary: "\nUse <= in the loop\nmore".into(),
            changes: vec![],
        };
        assert_eq!(
            label(&a, 1, 2),
            "Agent fix: alternative 2 (not verified: test failed): Use <= in the loop (1 file, 2 hunks)"
        );
        let unchecked = Alternative { check: None, ..a };
        assert_eq!(unchecked.title(), "Agent fix: alternative 2 (not checked)");
    }
}
