//! How a run ended, decided once for every front end ([`Verdict`]), and
//! what it spent ([`Spend`]).

use crate::agent::{Outcome, Stop};
use crate::config::limits::{Limits, PartialEdits};
use crate::model::Usage;
use crate::pricing::{Price, TokenCounts, format_tokens, format_usd};
use crate::workspace::FileChange;

use super::verify::{Checked, Verification};

/// How a fix ended, decided once here for every front end: the LSP server
/// turns it into a message and an edit, the CLI into a diff and an exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The run was cancelled (by the user, the request or the end of the
    /// session); nothing is proposed.
    Cancelled,
    /// A limit stopped the run and `partialEdits` is `discard`: the edits to
    /// `files` files were dropped. `reason` says which limit.
    Discarded { files: usize, reason: String },
    /// The run ended without an edit.
    NoEdit(NoEdit),
    /// Edits to propose.
    Proposal(Proposal),
}

/// Why a run ended without an edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoEdit {
    /// The model API failed; the message says what to do.
    ModelError(String),
    /// The model finished without editing; its summary (maybe empty) says why.
    Finished(String),
    /// A limit or a failing tool stopped the run first; the reason says which.
    Stopped(String),
    /// An OpenAI-compatible server's model answered its first turn without
    /// calling any tool: the server most likely dropped the tools
    /// ([`NO_TOOL_CALL`] says how to make it pass them). The model's text,
    /// cut by [`brief`].
    NoToolCall(String),
    /// The proposal did not verify and `verify.offerUnverified` is false:
    /// the check's line and what it found.
    Unverified(String),
}

/// What a compatible server needs to show the tools to its model.
pub const NO_TOOL_CALL: &str = "the model called no tool; the server may not have passed the tools to it \
     (llama-server: start it with --jinja and a chat template that supports tools; \
     llama-cpp-python: --chat_format chatml-function-calling)";

/// Lines and characters of a model's text shown in a message.
const BRIEF_LINES: usize = 3;
const BRIEF_CHARS: usize = 300;

/// `text` cut to its first [`BRIEF_LINES`] non-empty lines and
/// [`BRIEF_CHARS`] characters, with `…` where something was left out: a
/// small model's rambling answer is no message to show whole.
pub fn brief(text: &str) -> String {
    let lines: Vec<&str> = text.lines().map(str::trim_end).filter(|l| !l.trim().is_empty()).collect();
    let mut out = lines.iter().take(BRIEF_LINES).copied().collect::<Vec<_>>().join("\n");
    let mut cut = lines.len() > BRIEF_LINES;
    if out.chars().count() > BRIEF_CHARS {
        out = out.chars().take(BRIEF_CHARS).collect::<String>().trim_end().to_string();
        cut = true;
    }
    if cut {
        out.push('…');
    }
    out
}

/// The edits of a run, to review.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposal {
    /// One per changed file.
    pub changes: Vec<FileChange>,
    /// The model's closing text.
    pub summary: String,
    /// Why the run stopped before the model finished, when it did (the
    /// edits are then partial, offered because `partialEdits` is `offer`).
    pub stopped_early: Option<String>,
}

impl Verdict {
    /// A proposal that did not verify is dropped, with the findings, unless
    /// `offer` (`verify.offerUnverified`); one that nothing was set up to
    /// check is offered.
    pub(super) fn checked(self, verification: Option<&Verification>, checked: Option<&Checked>, offer: bool) -> Self {
        let (Verdict::Proposal(_), Some(v), Some(c)) = (&self, verification, checked) else { return self };
        match v.line() {
            Some(line) if !v.verified && !offer => {
                Verdict::NoEdit(NoEdit::Unverified(format!("{line}. {}", brief(c.findings().trim()))))
            }
            _ => self,
        }
    }

    /// Decides how a run that ended with `outcome` and left `changes` went.
    /// `compatible`: the provider is an OpenAI-compatible server, which may
    /// drop the tools silently.
    pub(super) fn of(
        outcome: &Outcome,
        changes: Vec<FileChange>,
        cancelled: bool,
        limits: &Limits,
        partial: PartialEdits,
        compatible: bool,
    ) -> Self {
        let reason = outcome.stop.describe(limits);
        if cancelled || outcome.stop == Stop::Cancelled {
            return Verdict::Cancelled;
        }
        let natural = outcome.stop.is_natural();
        if !natural && partial == PartialEdits::Discard && !changes.is_empty() {
            return Verdict::Discarded { files: changes.len(), reason };
        }
        if changes.is_empty() {
            let no_call = !outcome.messages.iter().any(|m| m.tool_calls().next().is_some());
            return Verdict::NoEdit(match &outcome.stop {
                Stop::ModelError(e) => NoEdit::ModelError(e.message.clone()),
                s if s.is_natural() && compatible && outcome.turns == 1 && no_call => {
                    NoEdit::NoToolCall(brief(outcome.summary.trim()))
                }
                s if s.is_natural() => NoEdit::Finished(brief(outcome.summary.trim())),
                _ => NoEdit::Stopped(reason),
            });
        }
        Verdict::Proposal(Proposal {
            changes,
            summary: outcome.summary.clone(),
            stopped_early: (!natural).then_some(reason),
        })
    }
}

/// What a run used: its tokens by kind, and their cost when the model's
/// price is known.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Spend {
    pub tokens: TokenCounts,
    pub cost_usd: Option<f64>,
    /// The server reported no usage for some response; its tokens are
    /// estimated from the bytes ([`Usage::estimated`]).
    pub estimated: bool,
}

impl Spend {
    pub fn of(usage: &Usage, price: Option<Price>) -> Self {
        let tokens = usage.tokens();
        Self { tokens, cost_usd: price.map(|p| p.cost(&tokens)), estimated: usage.estimated }
    }

    /// `41,250 tokens, $0.07` (or without the cost; `~41,250 tokens
    /// (estimated)` when the server reported none): the one way tokens and
    /// cost are shown, in progress lines, labels and the CLI's last line.
    pub fn describe(&self) -> String {
        let tokens = format_tokens(self.tokens.prompt() + self.tokens.output);
        let tokens = if self.estimated { format!("~{tokens} (estimated)") } else { tokens };
        match self.cost_usd {
            Some(c) => format!("{tokens}, {}", format_usd(c)),
            None => tokens,
        }
    }

    /// `6 turns, 41,250 tokens, $0.07`: [`Spend::describe`] after the turns.
    pub fn with_turns(&self, turns: u32) -> String {
        format!("{turns} turn{}, {}", if turns == 1 { "" } else { "s" }, self.describe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Message;
    use std::time::Duration;
    /// Small limits for the verdict tests.
    fn test_limits() -> Limits {
        Limits {
            max_turns: 4,
            max_tokens: 1000,
            max_output_tokens: 100,
            context_budget: 100_000,
            context_editing: crate::config::limits::ContextEditing::Economy,
            timeout: Duration::from_secs(9),
            max_cost: None,
        }
    }

    #[test]
    fn the_verdict_is_decided_once_in_order_cancel_discard_no_edit_proposal() {
        use crate::model::{ModelError, ModelErrorKind, Usage};
        let limits = test_limits();
        let outcome = |stop: Stop| Outcome {
            stop,
            turns: 1,
            usage: Usage::default(),
            summary: " Fixed the guard.\n".into(),
            messages: Vec::new(),
        };
        let change = FileChange {
            path: "/w/a.py".into(),
            display: "a.py".into(),
            version: None,
            pin: None,
            original: Some("a\n".into()),
            new_text: "b\n".into(),
            reasons: Vec::new(),
        };
        let (offer, discard) = (PartialEdits::Offer, PartialEdits::Discard);
        let v = |stop, changes: Vec<FileChange>, cancelled, partial| {
            Verdict::of(&outcome(stop), changes, cancelled, &limits, partial, false)
        };
        // Cancelled wins, by the loop or by the token after it ended.
        assert_eq!(v(Stop::Cancelled, vec![change.clone()], false, offer), Verdict::Cancelled);
        assert_eq!(v(Stop::EndTurn, vec![change.clone()], true, offer), Verdict::Cancelled);
        // A limit with partialEdits = discard drops the edits, and says which limit.
        assert_eq!(
            v(Stop::MaxTurns, vec![change.clone()], false, discard),
            Verdict::Discarded { files: 1, reason: "the run reached maxTurns (4)".into() }
        );
        // A natural end keeps its edits whatever partialEdits says.
        let Verdict::Proposal(p) = v(Stop::EndTurn, vec![change.clone()], false, discard) else { panic!() };
        assert_eq!((p.changes.len(), p.stopped_early), (1, None));
        assert_eq!(p.summary, " Fixed the guard.\n");
        // A limit with partialEdits = offer offers them, stopped early.
        let Verdict::Proposal(p) = v(Stop::MaxTurns, vec![change], false, offer) else { panic!() };
        assert_eq!(p.stopped_early.as_deref(), Some("the run reached maxTurns (4)"));
        // No edit: why.
        let error = ModelError::new(ModelErrorKind::Auth, Some(401), "bad key");
        assert_eq!(
            v(Stop::ModelError(error), vec![], false, discard),
            Verdict::NoEdit(NoEdit::ModelError("bad key".into()))
        );
        assert_eq!(
            v(Stop::EndTurn, vec![], false, offer),
            Verdict::NoEdit(NoEdit::Finished("Fixed the guard.".into()))
        );
        assert_eq!(
            v(Stop::MaxTurns, vec![], false, discard),
            Verdict::NoEdit(NoEdit::Stopped("the run reached maxTurns (4)".into()))
        );
    }

    #[test]
    fn a_compatible_server_whose_model_calls_no_tool_is_told_how_to_pass_tools_and_texts_are_cut() {
        let limits = test_limits();
        let talk = "I'm ready to help.\nWhat's the task?\nTell me more.\nAnd more.";
        let outcome = Outcome {
            stop: Stop::EndTurn,
            turns: 1,
            usage: crate::model::Usage::default(),
            summary: talk.into(),
            messages: vec![Message::user_text("fix")],
        };
        let v = |compatible| Verdict::of(&outcome, vec![], false, &limits, PartialEdits::Offer, compatible);
        let cut = "I'm ready to help.\nWhat's the task?\nTell me more.…";
        assert_eq!(v(true), Verdict::NoEdit(NoEdit::NoToolCall(cut.into())));
        assert_eq!(v(false), Verdict::NoEdit(NoEdit::Finished(cut.into())));
        assert!(NO_TOOL_CALL.contains("--jinja") && NO_TOOL_CALL.contains("--chat_format chatml-function-calling"));
        let long = brief(&"x".repeat(1000));
        assert_eq!((long.chars().count(), long.ends_with('…')), (301, true));
        assert_eq!(brief("short"), "short");
    }
}
