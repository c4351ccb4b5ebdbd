//! Follow-ups: a new request that continues an earlier run's conversation
//! instead of starting from scratch. The earlier run's messages are kept
//! (the same prefix, so the prompt cache is read), and one user message says
//! what became of its proposal — applied in full, rejected, or changed since
//! (with the diff from what was proposed to what the file holds now) — then
//! gives the new instruction.
//!
//! What a run proposed is compared with the files as they are when the
//! follow-up starts, read through the follow-up's own overlay (so unsaved
//! buffers count); nothing here knows LSP or the CLI.
//!
//! Its parts:
//! follow-ups: `PastRun` (an earlier run's messages and `ProposedFile`s),
//! what became of each proposed file (`Fate`: applied, rejected, changed with
//! the diff), the follow-up's user message, the conversation continued so
//! that roles alternate and every call is answered;
//! `ProposedFile::touched_lines` (where a follow-up is offered);
//! `hunks`: what became of each hunk (the editor's review, else worked out
//! from the file), said per hunk with the user's reason.

mod hunks;

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::PathBuf;

pub use hunks::{HunkFate, HunkOutcome, MAX_REASON_CHARS, Review, SentFile};

use crate::model::{Block, Message, Role};
use crate::position::LineRange;
use crate::workspace::{FileChange, Overlay, unified_diff};

/// The most bytes of diff a follow-up shows per file; past it, the model is
/// told to read the file.
pub const MAX_DIFF_BYTES: usize = 12_000;

/// What the model is asked when a follow-up carries no instruction.
const NO_INSTRUCTION: &str =
    "Check the result against the original problem and finish the fix; if nothing is left to do, say so.";

/// One file of an earlier run's proposal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProposedFile {
    pub path: PathBuf,
    /// Workspace-relative, for the model.
    pub display: String,
    /// The text the run started from; `None` for a file it created.
    pub original: Option<String>,
    /// The text it proposed.
    pub proposed: String,
}

impl From<&FileChange> for ProposedFile {
    fn from(c: &FileChange) -> Self {
        Self {
            path: c.path.clone(),
            display: c.display.clone(),
            original: c.original.clone(),
            proposed: c.new_text.clone(),
        }
    }
}

impl ProposedFile {
    /// The lines of the proposed text that the proposal changed (0-based),
    /// one range per hunk: where a follow-up is offered.
    pub fn touched_lines(&self) -> Vec<LineRange> {
        let diff = similar::TextDiff::from_lines(self.original.as_deref().unwrap_or(""), &self.proposed);
        diff.ops()
            .iter()
            .filter(|op| op.tag() != similar::DiffTag::Equal)
            .map(|op| {
                let r = op.new_range();
                // A deletion touches the line where the text was.
                let last = r.end.max(r.start + 1) - 1;
                LineRange::new(r.start as u32, last as u32)
            })
            .collect()
    }
}

/// An earlier run, as a follow-up needs it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PastRun {
    /// Its whole conversation.
    pub messages: Vec<Message>,
    /// What it proposed (empty when it proposed nothing).
    pub proposed: Vec<ProposedFile>,
    /// Its proposal as the editor got it, per file (empty when it was not
    /// sent to an editor: the hunks are then made from `proposed`).
    pub sent: Vec<SentFile>,
    /// What the editor's review reported, by change annotation id.
    pub reviews: HashMap<String, Review>,
}

impl PastRun {
    /// The hunks of `file` as sent, else made from what it proposed.
    fn sent_file(&self, file: &ProposedFile) -> Cow<'_, SentFile> {
        match self.sent.iter().find(|s| s.path == file.path) {
            Some(sent) => Cow::Borrowed(sent),
            None => {
                let base = file.original.clone().unwrap_or_default();
                Cow::Owned(SentFile {
                    path: file.path.clone(),
                    display: file.display.clone(),
                    hunks: crate::workspace::hunks(&base, &file.proposed),
                    base,
                    ids: Vec::new(),
                })
            }
        }
    }
}

/// What became of one proposed file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    /// The file holds the proposed text.
    Applied,
    /// The file holds the text the run started from (or, for a created
    /// file, does not exist).
    Rejected,
    /// Something else: partly applied, or changed by the user since.
    Changed {
        /// From the proposed text to the current one (`None` when too long).
        diff: Option<String>,
    },
}

impl Fate {
    /// What became of `file`, whose current text is `current` (`None`: it
    /// does not exist).
    pub fn of(file: &ProposedFile, current: Option<&str>) -> Fate {
        match current {
            Some(now) if now == file.proposed => Fate::Applied,
            now if now == file.original.as_deref() => Fate::Rejected,
            now => {
                let diff = unified_diff(&file.display, Some(&file.proposed), now.unwrap_or(""));
                Fate::Changed { diff: (diff.len() <= MAX_DIFF_BYTES).then_some(diff) }
            }
        }
    }
}

/// The follow-up's user message: what became of each proposed file and
/// each of its hunks (with the user's reason when the review gave one), a
/// reminder that earlier tool results may be stale, and the instruction.
pub fn report(past: &PastRun, overlay: &Overlay, instruction: Option<&str>) -> String {
    let mut text = String::from("The user follows up on your previous fix.\n");
    if past.proposed.is_empty() {
        text.push_str("Your previous run proposed no change.\n");
    }
    for file in &past.proposed {
        let current = overlay.read(&file.path).ok();
        let current = current.as_deref().map(String::as_str);
        let fate = Fate::of(file, current);
        let name = &file.display;
        match fate {
            Fate::Applied => text.push_str(&format!("- `{name}`: your proposal was applied in full.\n")),
            Fate::Rejected => text.push_str(&format!(
                "- `{name}`: your proposal was rejected; the file is as it was before your run.\n"
            )),
            Fate::Changed { diff: Some(diff) } => text.push_str(&format!(
                "- `{name}`: your proposal was applied in part or changed since; from what you proposed to what the file holds now:\n{diff}\n"
            )),
            Fate::Changed { diff: None } => text.push_str(&format!(
                "- `{name}`: your proposal was applied in part or changed a lot since; read the file to see its current text.\n"
            )),
        }
        for hunk in past.sent_file(file).fates(current, &past.reviews) {
            text.push_str(&format!("  - {}.\n", hunk.sentence()));
        }
    }
    text.push_str(
        "Files may have changed since your earlier tool results: read them again before you edit. Your edits go to a new proposal, which the user reviews.\n\n",
    );
    let instruction = instruction.map(str::trim).filter(|i| !i.is_empty()).unwrap_or(NO_INSTRUCTION);
    text.push_str(&format!("The user's request: {instruction}"));
    text
}

/// The conversation of `past` continued by the user message `text`: a
/// trailing assistant turn whose tool calls were never answered (a run
/// cancelled mid-turn) is dropped, and a trailing user message gets `text`
/// as one more block, so roles keep alternating and every call is
/// answered.
pub fn continued(past: &[Message], text: String) -> Vec<Message> {
    let mut messages = past.to_vec();
    while messages.last().is_some_and(|m| m.role == Role::Assistant && m.tool_calls().next().is_some()) {
        messages.pop();
    }
    match messages.last_mut() {
        Some(last) if last.role == Role::User => last.content.push(Block::Text { text }),
        _ => messages.push(Message::user_text(text)),
    }
    messages
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::workspace::{NoBuffers, Workspace};

    fn proposed(original: Option<&str>, proposed: &str) -> ProposedFile {
        ProposedFile {
            path: "/ws/calc.py".into(),
            display: "calc.py".into(),
            original: original.map(str::to_string),
            proposed: proposed.into(),
        }
    }

    #[test]
    fn the_fate_of_a_proposal_is_read_from_the_current_text() {
        let file = proposed(Some("a\nb\n"), "a\nB\nc\n");
        assert_eq!(Fate::of(&file, Some("a\nB\nc\n")), Fate::Applied);
        assert_eq!(Fate::of(&file, Some("a\nb\n")), Fate::Rejected);
        let Fate::Changed { diff: Some(diff) } = Fate::of(&file, Some("a\nB\n")) else { panic!() };
        assert!(diff.contains("-c\n") && diff.starts_with("--- a/calc.py"), "{diff}");
        // A created file that is gone was rejected.
        assert_eq!(Fate::of(&proposed(None, "new\n"), None), Fate::Rejected);
        let huge = "x\n".repeat(MAX_DIFF_BYTES);
        assert_eq!(Fate::of(&file, Some(&huge)), Fate::Changed { diff: None });
    }

    #[test]
    fn touched_lines_are_the_hunks_in_the_proposed_text() {
        let file = proposed(Some("a\nb\nc\nd\n"), "a\nB\nc\nd\ne\n");
        assert_eq!(file.touched_lines(), vec![LineRange::new(1, 1), LineRange::new(4, 4)]);
        // A deletion touches the line where the text was.
        let file = proposed(Some("a\nb\nc\n"), "a\nc\n");
        assert_eq!(file.touched_lines(), vec![LineRange::new(1, 1)]);
    }

    #[test]
    fn the_report_says_what_became_of_each_file_and_the_request() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::write(root.join("kept.py"), "new\n").unwrap();
        std::fs::write(root.join("undone.py"), "old\n").unwrap();
        let overlay = Overlay::new(Arc::new(Workspace::new(vec![root.clone()])), Arc::new(NoBuffers));
        let file = |name: &str| ProposedFile {
            path: root.join(name),
            display: name.into(),
            original: Some("old\n".into()),
            proposed: "new\n".into(),
        };
        let past = PastRun { proposed: vec![file("kept.py"), file("undone.py")], ..PastRun::default() };
        let text = report(&past, &overlay, Some("  also handle negative numbers "));
        assert!(text.contains("- `kept.py`: your proposal was applied in full."), "{text}");
        assert!(text.contains("- `undone.py`: your proposal was rejected"), "{text}");
        // And per hunk.
        assert!(text.contains("\n  - line 1 (`new`): accepted: the file holds your text there.\n"), "{text}");
        assert!(text.contains("\n  - line 1 (`new`): not taken: the file holds its old text there.\n"), "{text}");
        assert!(text.ends_with("The user's request: also handle negative numbers"), "{text}");
        let text = report(&PastRun::default(), &overlay, None);
        assert!(text.contains("proposed no change") && text.contains(NO_INSTRUCTION), "{text}");
    }

    #[test]
    fn a_continued_conversation_alternates_and_answers_every_call() {
        let assistant = |content: Vec<Block>| Message { role: Role::Assistant, content, raw: None };
        let call = Block::ToolUse { id: "t1".into(), name: "read_file".into(), input: json!({}).into() };
        let done = vec![Message::user_text("fix"), assistant(vec![Block::Text { text: "Done.".into() }])];
        let next = continued(&done, "more".into());
        assert_eq!(next.len(), 3);
        assert_eq!(next[2], Message::user_text("more"));
        // Cancelled mid-turn: the unanswered call is dropped; the task gets the text.
        let cut = vec![Message::user_text("fix"), assistant(vec![call])];
        let next = continued(&cut, "more".into());
        assert_eq!(next.len(), 1);
        assert_eq!(next[0].content.len(), 2);
    }
}
