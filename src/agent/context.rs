//! The context budget of the loop: an estimate of each request's prompt
//! tokens (bytes / 4, recalibrated by what the provider reported for the
//! previous request), and client-side context editing: the outputs of older
//! tool calls replaced by a one-line stub, in batches, every
//! `tool_use`/`tool_result` pair kept (only a result's content changes;
//! assistant messages are never touched, they are echoed verbatim).
//!
//! When to edit is a matter of budget (past [`EDIT_AT`] of the ceiling) and
//! of economy: carrying stale outputs costs their cache reads on every
//! request, and removing them costs one rewrite of the cached prompt after
//! the first of them. An edit is due when what the stale outputs have cost
//! to carry since the last edit reaches what the rewrite would cost (the
//! ski-rental rule: never more than twice the cost of the best schedule in
//! hindsight). Compaction, when editing is not enough, keeps the first
//! message (the task) and the newest exchanges and replaces what lies
//! between by a summary the model writes ([`compaction_split`]).

use std::collections::HashMap;

use crate::model::{Block, Message, Role, ToolSpec};
// Anthropic's weights; OpenAI bills no writes and reads at 0.1 to 0.5, so
// there the rule edits a little later than it could.
use crate::pricing::{CACHE_READ_WEIGHT, CACHE_WRITE_WEIGHT};

/// Bytes per token of the estimate before any usage was reported.
const BYTES_PER_TOKEN: f64 = 4.0;
/// Bounds of the recalibrated tokens-per-byte ratio (a provider reporting
/// nonsense cannot switch the budget off or stop every run).
const RATIO_BOUNDS: (f64, f64) = (0.05, 2.0);
/// Past this share of the ceiling, older tool outputs are stubbed.
pub(super) const EDIT_AT: f64 = 0.8;
/// The newest tool-result messages an edit keeps whole, at most.
pub(super) const KEEP_RESULTS: usize = 3;
/// Past the newest tool-result message (always kept), older ones are kept
/// whole only while the kept outputs stay within this many tokens: a few
/// small results (a grep, diagnostics) stay, one large file read does not
/// keep its predecessors alive.
pub(super) const KEEP_TOKENS: u64 = 8_000;
/// The end of every stub.
const STUB_TAIL: &str = ": output removed to save context; call the tool again if you need it]";

/// The estimate and its ceiling: `contextBudget`, or less once the model's
/// context window was measured by a refusal.
#[derive(Debug, Clone)]
pub(super) struct Budget {
    budget: u64,
    /// The context window as measured by a "prompt is too long" answer or a
    /// `model_context_window_exceeded` stop.
    measured: Option<u64>,
    tokens_per_byte: f64,
}

impl Budget {
    pub(super) fn new(budget: u64) -> Self {
        Self { budget, measured: None, tokens_per_byte: 1.0 / BYTES_PER_TOKEN }
    }

    /// No request estimated above this is sent.
    pub(super) fn ceiling(&self) -> u64 {
        self.measured.map_or(self.budget, |m| m.min(self.budget))
    }

    /// Past this, older tool outputs are stubbed.
    pub(super) fn edit_threshold(&self) -> u64 {
        (self.ceiling() as f64 * EDIT_AT) as u64
    }

    /// The estimated prompt tokens of a request of `bytes`.
    pub(super) fn estimate(&self, bytes: u64) -> u64 {
        (bytes as f64 * self.tokens_per_byte).ceil() as u64
    }

    /// A request of `bytes` was answered with `input_tokens` prompt tokens.
    pub(super) fn calibrate(&mut self, bytes: u64, input_tokens: u64) {
        if bytes > 0 && input_tokens > 0 {
            self.tokens_per_byte = (input_tokens as f64 / bytes as f64).clamp(RATIO_BOUNDS.0, RATIO_BOUNDS.1);
        }
    }

    /// A request of `bytes` was refused as too long with `message`: the
    /// window it names (`N tokens > M maximum`, or OpenAI's `maximum context
    /// length is M tokens … resulted in N tokens`) becomes the ceiling and
    /// `N` recalibrates the estimate; without numbers, the refused request's
    /// estimate is the ceiling.
    pub(super) fn refused(&mut self, bytes: u64, message: &str) {
        let ceiling = match window_in(message) {
            Some((prompt, window)) => {
                self.calibrate(bytes, prompt);
                window
            }
            None => self.estimate(bytes).saturating_sub(1),
        };
        self.lower(ceiling);
    }

    /// The context window is at most `tokens`.
    pub(super) fn lower(&mut self, tokens: u64) {
        let tokens = tokens.max(1);
        self.measured = Some(self.measured.map_or(tokens, |m| m.min(tokens)));
    }
}

/// `(prompt, window)` from a "too long" message: its last two numbers, the
/// larger being the prompt.
fn window_in(message: &str) -> Option<(u64, u64)> {
    let numbers: Vec<u64> = message
        .split(|c: char| !c.is_ascii_digit() && c != ',')
        .filter_map(|s| s.replace(',', "").parse().ok())
        .collect();
    let [.., a, b] = numbers[..] else { return None };
    let (prompt, window) = (a.max(b), a.min(b));
    (window > 0 && prompt > window).then_some((prompt, window))
}

/// The bytes of a request: system prompt, tool specs and messages (an
/// assistant message by its provider encoding when it has one).
#[cfg(test)]
pub(super) fn request_bytes(system: &str, messages: &[Message], specs: &[ToolSpec]) -> u64 {
    fixed_bytes(system, specs) + messages_bytes(messages)
}

/// The part of every request that does not change during a run: the system
/// prompt and the tool declarations.
pub(super) fn fixed_bytes(system: &str, specs: &[ToolSpec]) -> u64 {
    let specs: usize =
        specs.iter().map(|s| s.name.len() + s.description.len() + s.input_schema.to_string().len()).sum();
    (system.len() + specs) as u64
}

pub(super) fn messages_bytes(messages: &[Message]) -> u64 {
    messages.iter().map(message_bytes).sum::<u64>()
}

/// The bytes of one message as the estimate counts them.
pub(super) fn message_bytes(m: &Message) -> u64 {
    if let Some(raw) = &m.raw {
        return raw.to_string().len() as u64;
    }
    m.content
        .iter()
        .map(|b| match b {
            Block::Text { text } => text.len(),
            Block::ToolUse { id, name, input } => id.len() + name.len() + input.to_value().to_string().len(),
            Block::ToolResult { tool_use_id, content, .. } => tool_use_id.len() + content.len(),
            Block::Other(v) => v.to_string().len(),
        })
        .sum::<usize>() as u64
}

/// The stub that replaces the output of `call` (`read_file src/m07.py`).
pub(super) fn stub(call: &str) -> String {
    format!("[{call}{STUB_TAIL}")
}

fn is_results(m: &Message) -> bool {
    m.role == Role::User && m.content.iter().any(|b| matches!(b, Block::ToolResult { .. }))
}

/// `read_file src/m07.py` for every tool-use id of `messages`.
fn call_descriptions(messages: &[Message]) -> HashMap<String, String> {
    messages
        .iter()
        .flat_map(|m| m.tool_calls())
        .map(|(id, name, input)| (id.to_string(), super::describe_call(name, input)))
        .collect()
}

/// The index of the oldest tool-result message an edit keeps whole: the
/// newest always, older ones up to [`KEEP_RESULTS`] in all while their
/// outputs fit [`KEEP_TOKENS`]; `messages.len()` when there is none.
pub(super) fn kept_from(messages: &[Message], budget: &Budget) -> usize {
    let mut kept = messages.len();
    let (mut count, mut tokens) = (0, 0);
    for (i, m) in messages.iter().enumerate().rev().filter(|(_, m)| is_results(m)) {
        tokens += budget.estimate(message_bytes(m));
        if count == KEEP_RESULTS || (count > 0 && tokens > KEEP_TOKENS) {
            break;
        }
        count += 1;
        kept = i;
    }
    kept
}

/// What an edit before the next request would do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stale {
    /// Tool outputs it would replace.
    pub(super) results: usize,
    /// Estimated tokens it would remove (the outputs less their stubs).
    pub(super) saved: u64,
    /// Estimated tokens of what follows the first replaced output, up to
    /// the newest message, after the edit: what the prompt cache writes
    /// again.
    pub(super) rewrite: u64,
}

impl Stale {
    /// Whether carrying the stale outputs has cost (`carried`,
    /// billed-equivalent tokens since the last edit) what removing them
    /// costs.
    pub(super) fn worth_editing(&self, carried: f64) -> bool {
        carried >= CACHE_WRITE_WEIGHT * self.rewrite as f64
    }

    /// What one more request carrying them costs (their cache reads).
    pub(super) fn carry(&self) -> f64 {
        CACHE_READ_WEIGHT * self.saved as f64
    }
}

/// The outputs an edit would replace: those of the tool results before
/// [`kept_from`] that are longer than their stub.
/// `sizes` are the messages' [`message_bytes`].
pub(super) fn stale(messages: &[Message], sizes: &[u64], budget: &Budget) -> Option<Stale> {
    let kept = kept_from(messages, budget);
    let calls = call_descriptions(messages);
    let (mut first, mut results, mut saved) = (None, 0, 0);
    for (i, m) in messages[..kept].iter().enumerate().filter(|(_, m)| m.role == Role::User) {
        for block in &m.content {
            if let Block::ToolResult { tool_use_id, content, .. } = block {
                let stub = stub_of(&calls, tool_use_id);
                if content.len() > stub.len() {
                    first.get_or_insert(i);
                    results += 1;
                    saved += content.len() - stub.len();
                }
            }
        }
    }
    let first = first?;
    let after: u64 = sizes[first..messages.len().saturating_sub(1).max(first)].iter().sum();
    Some(Stale {
        results,
        saved: budget.estimate(saved as u64),
        rewrite: budget.estimate(after.saturating_sub(saved as u64)),
    })
}

fn stub_of(calls: &HashMap<String, String>, id: &str) -> String {
    stub(calls.get(id).map_or("tool call", String::as_str))
}

/// One output replaced by its stub.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Stubbed {
    /// The index of its message.
    pub(super) message: usize,
    pub(super) tool_use_id: String,
    /// The content it had.
    pub(super) content: String,
}

/// Replaces the content of every tool result before [`kept_from`] by its
/// stub (results already stubbed, or shorter than their stub, stay as they
/// are) and returns what was replaced. Ids, order, `is_error` and every
/// assistant message stay as they were.
pub(super) fn stub_stale(messages: &mut [Message], budget: &Budget) -> Vec<Stubbed> {
    let kept = kept_from(messages, budget);
    let calls = call_descriptions(messages);
    let mut stubbed = Vec::new();
    for (i, m) in messages[..kept].iter_mut().enumerate().filter(|(_, m)| m.role == Role::User) {
        for block in &mut m.content {
            if let Block::ToolResult { tool_use_id, content, .. } = block {
                let stub = stub_of(&calls, tool_use_id);
                if content.len() > stub.len() {
                    let content = std::mem::replace(content, stub);
                    stubbed.push(Stubbed { message: i, tool_use_id: tool_use_id.clone(), content });
                }
            }
        }
    }
    stubbed
}

/// Where a compaction splits `messages`: the summary replaces
/// `messages[1..split]` (the first message, the task, stays) and
/// `messages[split..]`, from an assistant message on, stays as it is. The
/// split is the latest boundary at or before the kept tool results (see
/// [`kept_from`]) for which `fits(split)` holds (the summarising request,
/// which carries `messages[..split]`, must fit the budget), and must leave
/// at least one message to replace; `None` when there is none.
pub(super) fn compaction_split(messages: &[Message], budget: &Budget, fits: impl Fn(usize) -> bool) -> Option<usize> {
    // The kept results answer the assistant message before them, which stays too.
    let tail = kept_from(messages, budget).min(messages.len()).saturating_sub(1);
    (2..=tail)
        .rev()
        .filter(|&s| messages[s].role == Role::Assistant && messages[s - 1].role == Role::User)
        .find(|&s| fits(s))
}
