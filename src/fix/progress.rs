//! Run events as one-line progress messages, for an editor's status line
//! and the CLI's stderr.

use super::verdict::Spend;
use crate::agent::{ContextChange, RunEvent};
use crate::model::{StreamUpdate, Usage};
use crate::pricing::{Price, format_tokens};

/// Turns run events into one-line progress messages: `turn 2: read_file
/// calc.py`, `turn 3: preparing edit_file`, the tail of the model's text as
/// it streams, retries.
#[derive(Default)]
pub struct ProgressLines {
    turn: std::sync::atomic::AtomicU32,
    /// The tokens so far.
    usage: std::sync::Mutex<Usage>,
    text: std::sync::Mutex<Tail>,
    /// The model's price, when known: reports then show the cost so far.
    price: Option<Price>,
}

impl ProgressLines {
    /// Lines that show the cost so far at `price`.
    pub fn priced(price: Option<Price>) -> Self {
        Self { price, ..Self::default() }
    }
}

/// Characters of streamed text a progress line shows.
const TAIL_CHARS: usize = 80;

/// The end of the streamed text with whitespace runs flattened to one
/// space (what `split_whitespace().join(" ")` of the whole text would end
/// with), kept to at most `2 * TAIL_CHARS` characters: each piece costs its
/// own length, never the length of the text so far.
#[derive(Default)]
struct Tail {
    text: String,
    chars: usize,
    /// Whitespace came after the last character kept.
    space: bool,
}

impl Tail {
    fn clear(&mut self) {
        *self = Tail::default();
    }

    fn push(&mut self, piece: &str) {
        for c in piece.chars() {
            if c.is_whitespace() {
                self.space = true;
                continue;
            }
            if std::mem::take(&mut self.space) && self.chars > 0 {
                self.text.push(' ');
                self.chars += 1;
            }
            self.text.push(c);
            self.chars += 1;
            if self.chars >= 2 * TAIL_CHARS {
                let cut = self.text.char_indices().nth(self.chars - TAIL_CHARS).map_or(0, |(i, _)| i);
                self.text.drain(..cut);
                self.chars = TAIL_CHARS;
            }
        }
    }

    /// The last `TAIL_CHARS` characters.
    fn shown(&self) -> &str {
        let skip = self.chars.saturating_sub(TAIL_CHARS);
        let at = self.text.char_indices().nth(skip).map_or(self.text.len(), |(i, _)| i);
        &self.text[at..]
    }
}

/// A progress line; `streaming` lines may be dropped by a throttle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgressLine {
    pub text: String,
    pub streaming: bool,
}

impl ProgressLines {
    pub fn line(&self, event: &RunEvent) -> Option<ProgressLine> {
        use std::sync::atomic::Ordering::Relaxed;
        let turn = self.turn.load(Relaxed);
        let plain = |text: String| Some(ProgressLine { text, streaming: false });
        match event {
            RunEvent::Request { turn, .. } => {
                self.turn.store(*turn, Relaxed);
                self.text.lock().unwrap_or_else(|e| e.into_inner()).clear();
                None
            }
            RunEvent::ToolCalls { turn, calls } => {
                let usage = *self.usage.lock().unwrap_or_else(|e| e.into_inner());
                let spent = Spend::of(&usage, self.price).describe();
                plain(format!("turn {turn}: {} ({spent})", calls.join(", ")))
            }
            RunEvent::Stream(StreamUpdate::ToolStart(name)) => plain(format!("turn {turn}: preparing {name}")),
            RunEvent::Stream(StreamUpdate::Retrying { attempt, delay_ms, reason }) => {
                plain(format!("retry {attempt} in {:.1} s: {reason}", *delay_ms as f64 / 1000.0))
            }
            RunEvent::Stream(StreamUpdate::Text(piece)) => {
                let mut tail = self.text.lock().unwrap_or_else(|e| e.into_inner());
                tail.push(piece);
                Some(ProgressLine { text: format!("turn {turn}: {}", tail.shown()), streaming: true })
            }
            RunEvent::Response { response, .. } => {
                self.usage.lock().unwrap_or_else(|e| e.into_inner()).add(response.usage);
                None
            }
            RunEvent::ContextEdited { turn, change, tokens_before, tokens_after, .. } => {
                let (before, after) = (format_tokens(*tokens_before), format_tokens(*tokens_after));
                plain(match change {
                    ContextChange::Stubbed { tool_use_ids, .. } => format!(
                        "turn {turn}: removed {} older tool outputs to save context (~{before} → ~{after})",
                        tool_use_ids.len()
                    ),
                    ContextChange::Compacted { replaced, .. } => format!(
                        "turn {turn}: summarised {replaced} older messages to save context (~{before} → ~{after})"
                    ),
                })
            }
            // Nothing to say when nothing was set up to check the proposal.
            RunEvent::Checked { round, line, elapsed_ms } => line.as_ref().and_then(|line| {
                plain(format!("round {round}: {line} (checked in {:.1} s)", *elapsed_ms as f64 / 1000.0))
            }),
            RunEvent::Candidates { line } => plain(line.clone()),
            RunEvent::ToolResult { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn progress_lines_name_the_calls_and_the_tokens_so_far() {
        use crate::model::{Message, ModelResponse, StopReason, Usage};
        let lines = ProgressLines::default();
        lines.line(&RunEvent::Request { turn: 2, new_messages: vec![], max_output_tokens: 1, allow_tools: true });
        let response = ModelResponse {
            message: Message::user_text("x"),
            stop_reason: StopReason::ToolUse,
            usage: Usage { input_tokens: 4000, output_tokens: 600, ..Default::default() },
        };
        assert_eq!(lines.line(&RunEvent::Response { turn: 2, response, elapsed_ms: 1 }), None);
        let line = lines.line(&RunEvent::ToolCalls { turn: 2, calls: vec!["read_file a.py".into()] }).unwrap();
        assert_eq!(line, ProgressLine { text: "turn 2: read_file a.py (4,600 tokens)".into(), streaming: false });
    }

    fn text_line(lines: &ProgressLines, piece: &str) -> String {
        let line = lines.line(&RunEvent::Stream(StreamUpdate::Text(piece.into()))).unwrap();
        assert!(line.streaming);
        line.text
    }

    /// What the progress line showed before it kept only a tail: the whole
    /// text flattened, its last 80 characters.
    fn flattened_tail(text: &str) -> String {
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let chars: Vec<char> = flat.chars().collect();
        chars[chars.len().saturating_sub(80)..].iter().collect()
    }

    #[test]
    fn streamed_text_shows_its_flattened_tail_and_keeps_only_that() {
        let lines = ProgressLines::default();
        lines.line(&RunEvent::Request { turn: 3, new_messages: vec![], max_output_tokens: 1, allow_tools: true });
        assert_eq!(text_line(&lines, "  \n "), "turn 3: ");
        assert_eq!(text_line(&lines, "Let me\n\n  look"), "turn 3: Let me look");
        assert_eq!(text_line(&lines, " "), "turn 3: Let me look", "trailing whitespace waits for the next word");
        assert_eq!(text_line(&lines, "\tat 漢字 😀"), "turn 3: Let me look at 漢字 😀");
        // 128 KB in 7-character pieces: the line is the tail, and only a bounded tail is kept.
        let mut all = String::from("  \n Let me\n\n  look \tat 漢字 😀");
        let word: String = (0..20_000).map(|i| format!("wörd{i}{}", if i % 9 == 0 { "\n\n" } else { " " })).collect();
        let chars: Vec<char> = word.chars().collect();
        for (n, piece) in chars.chunks(7).enumerate() {
            let piece: String = piece.iter().collect();
            all.push_str(&piece);
            let line = text_line(&lines, &piece);
            // The reference flattens the whole text: only now and then, or the test is quadratic.
            if n % 499 == 0 || n == chars.len().div_ceil(7) - 1 {
                assert_eq!(line, format!("turn 3: {}", flattened_tail(&all)));
            }
            let kept = lines.text.lock().unwrap();
            assert!(kept.text.chars().count() < 2 * TAIL_CHARS + 1, "kept {} chars", kept.text.len());
            assert!(kept.text.capacity() < 4 * 4 * TAIL_CHARS, "capacity {}", kept.text.capacity());
        }
        assert!(all.len() > 128 * 1024);
        // A new request starts a new text.
        lines.line(&RunEvent::Request { turn: 4, new_messages: vec![], max_output_tokens: 1, allow_tools: true });
        assert_eq!(text_line(&lines, "Done."), "turn 4: Done.");
    }

    proptest::proptest! {
        #[test]
        fn the_tail_is_the_end_of_the_flattened_text(pieces in proptest::collection::vec("[a b\n\t\u{3000}é😀]{0,40}", 0..40)) {
            let lines = ProgressLines::default();
            let mut all = String::new();
            for piece in &pieces {
                all.push_str(piece);
                proptest::prop_assert_eq!(text_line(&lines, piece), format!("turn 0: {}", flattened_tail(&all)));
            }
        }
    }
}
