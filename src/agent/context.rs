//! The context budget of the loop: an estimate of each request's prompt
//! tokens (bytes / 4, recalibrated by what the provider reported for the
//! previous request), and client-side context editing: the outputs of older
//! tool calls replaced by a one-line stub, in batches, every
//! `tool_use`/`tool_result` pair kept (only a result's content changes;
//! assistant messages are never touched, they are echoed verbatim).

use std::collections::HashMap;

use crate::model::{Block, Message, Role, ToolSpec};

/// Bytes per token of the estimate before any usage was reported.
const BYTES_PER_TOKEN: f64 = 4.0;
/// Bounds of the recalibrated tokens-per-byte ratio (a provider reporting
/// nonsense cannot switch the budget off or stop every run).
const RATIO_BOUNDS: (f64, f64) = (0.05, 2.0);
/// Past this share of the ceiling, older tool outputs are stubbed.
pub(super) const EDIT_AT: f64 = 0.8;
/// The newest tool-result messages kept whole by an edit.
pub(super) const KEEP_RESULTS: usize = 3;
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
    messages.iter().map(message_bytes).sum::<usize>() as u64
}

fn message_bytes(m: &Message) -> usize {
    if let Some(raw) = &m.raw {
        return raw.to_string().len();
    }
    m.content
        .iter()
        .map(|b| match b {
            Block::Text { text } => text.len(),
            Block::ToolUse { id, name, input } => id.len() + name.len() + input.to_value().to_string().len(),
            Block::ToolResult { tool_use_id, content, .. } => tool_use_id.len() + content.len(),
            Block::Other(v) => v.to_string().len(),
        })
        .sum()
}

/// The stub that replaces the output of `call` (`read_file src/m07.py`).
pub(super) fn stub(call: &str) -> String {
    format!("[{call}{STUB_TAIL}")
}

/// Replaces the content of every tool result older than the newest `keep`
/// tool-result messages by its stub (results already stubbed, or shorter
/// than their stub, stay as they are); returns how many were replaced.
/// Ids, order, `is_error` and every assistant message stay as they were.
pub(super) fn stub_old_results(messages: &mut [Message], keep: usize) -> usize {
    let calls: HashMap<String, String> = messages
        .iter()
        .flat_map(|m| m.tool_calls())
        .map(|(id, name, input)| (id.to_string(), super::describe_call(name, input)))
        .collect();
    let is_results =
        |m: &Message| m.role == Role::User && m.content.iter().any(|b| matches!(b, Block::ToolResult { .. }));
    let Some(cut) = messages.iter().enumerate().filter(|(_, m)| is_results(m)).map(|(i, _)| i).rev().nth(keep) else {
        return 0;
    };
    let mut stubbed = 0;
    for m in messages[..=cut].iter_mut().filter(|m| m.role == Role::User) {
        for block in &mut m.content {
            if let Block::ToolResult { tool_use_id, content, .. } = block {
                let call = calls.get(tool_use_id.as_str()).map_or("tool call", String::as_str);
                let stub = stub(call);
                if content.len() > stub.len() {
                    *content = stub;
                    stubbed += 1;
                }
            }
        }
    }
    stubbed
}
