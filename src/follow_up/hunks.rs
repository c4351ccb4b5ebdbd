//! What became of each hunk of a proposal: what the editor's review said
//! (`agentfix.reviewed`: accepted, rejected with the user's reason, or
//! changed), else worked out from the text the file holds now. The hunk's
//! new text still there: accepted; its old text there: rejected; neither:
//! changed.
//!
//! Worked out with two line diffs of the file as it is now, one from the
//! proposed text and one from the text the hunks were made on: a hunk's
//! lines are kept when no change of the diff touches them (or, for an
//! empty range, nothing was inserted or replaced at it). So the other hunks
//! of the file, taken or not, and the user's typing elsewhere do not change
//! what one hunk is said to be.

use std::collections::HashMap;
use std::ops::Range;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use similar::{DiffOp, DiffTag, TextDiff};

use crate::workspace::{Edit, apply_hunks};

/// What the user did with a hunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HunkOutcome {
    Accepted,
    Rejected,
    /// Applied and edited, or edited in place of it.
    Changed,
}

/// What an editor's review reported for one hunk (one change annotation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Review {
    pub outcome: HunkOutcome,
    /// The one line the user typed, if any.
    pub reason: Option<String>,
}

/// The most characters of a user's reason kept (one line).
pub const MAX_REASON_CHARS: usize = 300;

impl Review {
    /// A review with `reason` made one line, at most [`MAX_REASON_CHARS`]
    /// characters; a blank reason is none.
    pub fn new(outcome: HunkOutcome, reason: Option<&str>) -> Self {
        let reason = reason
            .map(|r| r.split_whitespace().collect::<Vec<_>>().join(" "))
            .filter(|r| !r.is_empty())
            .map(|r| r.chars().take(MAX_REASON_CHARS).collect());
        Self { outcome, reason }
    }
}

/// One file of a proposal as the editor received it: the text its hunks
/// were made on (after any rebase over the user's typing), the hunks, and
/// each hunk's change annotation id (hunks of one problem share one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentFile {
    pub path: PathBuf,
    pub display: String,
    pub base: String,
    pub hunks: Vec<Edit>,
    /// One per hunk; empty when the hunks carried none (a file a follow-up
    /// found in a transcript, or not sent at all).
    pub ids: Vec<String>,
}

/// What became of one hunk, for the follow-up's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HunkFate {
    /// `lines 4-5`, `line 9`, `the deletion of line 12`: where it is in the
    /// proposed text (a deletion: in the text it was made on), 1-based.
    pub lines: String,
    /// The hunk's first non-blank new line (a deletion: the first deleted
    /// one), trimmed, at most 80 characters.
    pub excerpt: String,
    pub outcome: HunkOutcome,
    /// Whether `outcome` is what the review reported (else worked out).
    pub reported: bool,
    pub reason: Option<String>,
    /// Reported, but the file no longer agrees (changed since the review).
    pub changed_since: bool,
}

impl SentFile {
    /// What became of each hunk, given the file's text now (`None`: the file
    /// does not exist) and the reviews reported by annotation id.
    pub fn fates(&self, current: Option<&str>, reviews: &HashMap<String, Review>) -> Vec<HunkFate> {
        let proposed = apply_hunks(&self.base, &self.hunks);
        let now = current.unwrap_or("");
        let from_proposed = TextDiff::from_lines(proposed.as_str(), now);
        let from_base = TextDiff::from_lines(self.base.as_str(), now);
        let mut shift: isize = 0;
        self.hunks
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let start = h.start.saturating_add_signed(shift);
                shift += h.text.len() as isize - (h.end - h.start) as isize;
                let in_base = line_of(&self.base, h.start)..line_of(&self.base, h.end);
                let in_proposed = line_of(&proposed, start)..line_of(&proposed, start + h.text.len());
                let inferred = if current.is_none() {
                    // A file that is gone holds nothing of the proposal; a new
                    // file (empty base) gone is its hunk rejected.
                    if self.base.is_empty() { HunkOutcome::Rejected } else { HunkOutcome::Changed }
                } else if kept(from_proposed.ops(), in_proposed.clone()) {
                    HunkOutcome::Accepted
                } else if kept(from_base.ops(), in_base.clone()) {
                    HunkOutcome::Rejected
                } else {
                    HunkOutcome::Changed
                };
                let review = self.ids.get(i).and_then(|id| reviews.get(id));
                let (outcome, reported) = match review {
                    Some(r) => (r.outcome, true),
                    None => (inferred, false),
                };
                let deleted = &self.base[h.start..h.end];
                let lines = if in_proposed.is_empty() {
                    format!("the deletion of {}", numbers(&in_base))
                } else {
                    numbers(&in_proposed)
                };
                HunkFate {
                    lines,
                    excerpt: excerpt(if h.text.trim().is_empty() { deleted } else { &h.text }),
                    outcome,
                    reported,
                    reason: review.and_then(|r| r.reason.clone()),
                    changed_since: reported && outcome != HunkOutcome::Changed && inferred != outcome,
                }
            })
            .collect()
    }
}

impl HunkFate {
    /// The fate in words, for the follow-up's message: `lines 4-5
    /// (`if b == 0:`): rejected in the review; the user's reason: …`.
    pub fn sentence(&self) -> String {
        let what = match (self.outcome, self.reported) {
            (HunkOutcome::Accepted, true) => "accepted in the review",
            (HunkOutcome::Rejected, true) => "rejected in the review",
            (HunkOutcome::Changed, true) => "changed by the user in the review",
            (HunkOutcome::Accepted, false) => "accepted: the file holds your text there",
            (HunkOutcome::Rejected, false) => "not taken: the file holds its old text there",
            (HunkOutcome::Changed, false) => "changed: the file holds neither your text nor its old text there",
        };
        let mut s = format!("{} (`{}`): {what}", self.lines, self.excerpt);
        if self.changed_since {
            s.push_str(", and the file has changed there since");
        }
        if let Some(reason) = &self.reason {
            s.push_str(&format!("; the user's reason: {reason}"));
        }
        s
    }
}

/// The 0-based line at byte `at` of `text`: the `\n`s before it, plus one
/// when `at` is the end of an unterminated last line (a line of its own to
/// a line diff).
fn line_of(text: &str, at: usize) -> usize {
    let at = at.min(text.len());
    let newlines = text.as_bytes()[..at].iter().filter(|b| **b == b'\n').count();
    let partial_end = at == text.len() && at > 0 && !text.ends_with('\n');
    newlines + usize::from(partial_end)
}

/// `line 4`, `lines 4-6` for the 0-based `lines` (an empty range: the
/// line it is before).
fn numbers(lines: &Range<usize>) -> String {
    match lines.end.saturating_sub(lines.start) {
        0 | 1 => format!("line {}", lines.start + 1),
        _ => format!("lines {}-{}", lines.start + 1, lines.end),
    }
}

fn excerpt(text: &str) -> String {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    let mut out: String = line.chars().take(80).collect();
    if line.chars().count() > 80 {
        out.push('…');
    }
    out.replace('`', "'")
}

/// Whether the lines `lines` of a diff's old text come through it
/// untouched: no change overlaps them and nothing is inserted among them;
/// for an empty range, nothing is inserted at it or replaced across it.
fn kept(ops: &[DiffOp], lines: Range<usize>) -> bool {
    ops.iter().filter(|op| op.tag() != DiffTag::Equal).all(|op| {
        let old = op.old_range();
        if lines.is_empty() {
            let at = lines.start;
            match op.tag() {
                DiffTag::Insert => old.start != at,
                DiffTag::Delete => !(old.start < at && at < old.end),
                _ => !(old.start <= at && at <= old.end),
            }
        } else if old.is_empty() {
            !(lines.start < old.start && old.start < lines.end)
        } else {
            old.end <= lines.start || lines.end <= old.start
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspace::hunks;

    fn sent(base: &str, proposed: &str) -> SentFile {
        let hunks = hunks(base, proposed);
        let ids = (0..hunks.len()).map(|i| format!("agentfix-0-{i}")).collect();
        SentFile { path: "/ws/calc.py".into(), display: "calc.py".into(), base: base.into(), hunks, ids }
    }

    fn outcomes(file: &SentFile, now: Option<&str>) -> Vec<HunkOutcome> {
        file.fates(now, &HashMap::new()).iter().map(|f| f.outcome).collect()
    }

    use HunkOutcome::{Accepted, Changed, Rejected};

    #[test]
    fn each_hunk_is_accepted_rejected_or_changed_whatever_the_others_are() {
        let base = "def div(a, b):\n    return a / b\n\n\ndef mul(a, b):\n    return a * b\n";
        let proposed = "def div(a, b):\n    if b == 0:\n        raise ZeroDivisionError\n    return a / b\n\n\ndef mul(a, b):\n    return int(a) * int(b)\n";
        let file = sent(base, proposed);
        assert_eq!(file.hunks.len(), 2);
        assert_eq!(outcomes(&file, Some(proposed)), [Accepted, Accepted]);
        assert_eq!(outcomes(&file, Some(base)), [Rejected, Rejected]);
        // The first taken, the second not.
        let first = "def div(a, b):\n    if b == 0:\n        raise ZeroDivisionError\n    return a / b\n\n\ndef mul(a, b):\n    return a * b\n";
        assert_eq!(outcomes(&file, Some(first)), [Accepted, Rejected]);
        // The second taken and edited; typing elsewhere changes nothing.
        let edited = "# top\ndef div(a, b):\n    return a / b\n\n\ndef mul(a, b):\n    return int(a) * int(b) + 0\n";
        assert_eq!(outcomes(&file, Some(edited)), [Rejected, Changed]);
        let fates = file.fates(Some(first), &HashMap::new());
        assert_eq!(fates[0].lines, "lines 2-3");
        assert_eq!(fates[0].excerpt, "if b == 0:");
        assert_eq!(fates[1].lines, "line 8");
        assert_eq!(
            fates[1].sentence(),
            "line 8 (`return int(a) * int(b)`): not taken: the file holds its old text there"
        );
    }

    #[test]
    fn deletions_insertions_and_new_files() {
        let file = sent("a\nb\nc\n", "a\nc\n");
        assert_eq!(outcomes(&file, Some("a\nc\n")), [Accepted]);
        assert_eq!(outcomes(&file, Some("a\nb\nc\n")), [Rejected]);
        assert_eq!(outcomes(&file, Some("a\nB\nc\n")), [Changed]);
        assert_eq!(file.fates(Some("a\nc\n"), &HashMap::new())[0].lines, "the deletion of line 2");
        // An insertion next to a line the user changed is still itself.
        let file = sent("a\nb\n", "a\nX\nb\n");
        assert_eq!(outcomes(&file, Some("A\nX\nb\n")), [Accepted]);
        assert_eq!(outcomes(&file, Some("a\nb\n")), [Rejected]);
        assert_eq!(outcomes(&file, Some("a\nY\nb\n")), [Changed]);
        // A new file: there, or gone.
        let file = sent("", "new\n");
        assert_eq!(outcomes(&file, Some("new\n")), [Accepted]);
        assert_eq!(outcomes(&file, None), [Rejected]);
    }

    #[test]
    fn crlf_wide_characters_and_no_final_newline() {
        let base = "# 漢字\r\nx = '😀'\r\ny = 1";
        let proposed = "# 漢字\r\nx = '😀😀'\r\ny = 2";
        let file = sent(base, proposed);
        assert_eq!(file.hunks.len(), 1, "{:?}", file.hunks);
        assert_eq!(outcomes(&file, Some(proposed)), [Accepted]);
        assert_eq!(outcomes(&file, Some(base)), [Rejected]);
        assert_eq!(outcomes(&file, Some("# 漢字\r\nx = '😀😀'\r\ny = 3")), [Changed]);
        assert_eq!(file.fates(Some(base), &HashMap::new())[0].lines, "lines 2-3");
        // The last line alone, unterminated.
        let file = sent("a\nb", "a\nc");
        assert_eq!(outcomes(&file, Some("a\nc")), [Accepted]);
        assert_eq!(file.fates(Some("a\nc"), &HashMap::new())[0].lines, "line 2");
    }

    #[test]
    fn a_review_wins_and_says_when_the_file_changed_since() {
        let file = sent("a\nb\nc\nd\n", "a\nB\nc\nD\n");
        let reviews = HashMap::from([
            ("agentfix-0-0".to_string(), Review::new(Rejected, Some("  keep b:\n it is\tused  "))),
            ("agentfix-0-1".to_string(), Review::new(Accepted, None)),
        ]);
        // The user undid the accepted hunk after the review.
        let fates = file.fates(Some("a\nb\nc\nd\n"), &reviews);
        assert_eq!((fates[0].outcome, fates[0].reported, fates[0].changed_since), (Rejected, true, false));
        assert_eq!(fates[0].reason.as_deref(), Some("keep b: it is used"));
        assert_eq!(fates[0].sentence(), "line 2 (`B`): rejected in the review; the user's reason: keep b: it is used");
        assert_eq!((fates[1].outcome, fates[1].changed_since), (Accepted, true));
        assert!(fates[1].sentence().ends_with("accepted in the review, and the file has changed there since"));
        let long = "x".repeat(2 * MAX_REASON_CHARS);
        assert_eq!(Review::new(Rejected, Some(&long)).reason.unwrap().chars().count(), MAX_REASON_CHARS);
        assert_eq!(Review::new(Rejected, Some(" \n ")).reason, None);
    }
}
