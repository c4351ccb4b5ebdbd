//! The agent loop: ask the model, run every tool it calls, feed the results
//! back matched by id, and repeat until the model ends its turn or a limit
//! stops the run.
//!
//! The loop is provider-neutral and knows no LSP, HTTP or rope types: it sees
//! a [`ModelClient`], a [`ToolSet`] and a cancellation token, and reports what
//! happens through [`RunEvent`]s (progress and transcripts listen to them).
//!
//! Limits: `maxTurns`, `maxTokens` (input + output over the run), a wall
//! clock `timeout`, and a convergence guard (the same failing call three
//! times in a row, or several tool turns that bring nothing new). At a
//! limit, one last request without tools asks for a short summary.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use futures::future::join_all;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::model::{
    Block, Message, ModelError, ModelRequest, ModelResponse, Role, StopReason, StreamUpdate, ToolInput, Usage,
};
use crate::providers::ModelClient;
use crate::tools::{ToolOutput, ToolSet};

/// Consecutive `pause_turn` continuations allowed before the run stops.
const MAX_PAUSE_CONTINUATIONS: u32 = 5;
/// The same call failing this many times in a row stalls the run.
const SAME_FAILURE_LIMIT: u32 = 3;
/// This many tool turns in a row with only repeated results stall the run.
const NO_NEW_INFORMATION_TURNS: u32 = 4;
/// `max_tokens` ceiling when a cut-off tool call is retried with more room.
const MAX_OUTPUT_CEILING: u32 = 64_000;
/// Time allowed for the closing summary request: a quarter of the run's
/// time limit, between these bounds.
const SUMMARY_TIMEOUT: (Duration, Duration) = (Duration::from_secs(2), Duration::from_secs(30));

/// The limits of one run: the configuration's section, as it is.
pub use crate::config::Limits;

/// Something that happened during a run.
#[derive(Debug, Clone, PartialEq)]
pub enum RunEvent {
    /// A request is about to be sent; `new_messages` are the messages added
    /// since the previous request (all of them for the first).
    Request { turn: u32, new_messages: Vec<Message>, max_output_tokens: u32, allow_tools: bool },
    /// The model's complete answer.
    Response { turn: u32, response: ModelResponse, elapsed_ms: u64 },
    /// Streaming and retry news from the provider.
    Stream(StreamUpdate),
    /// The model asked for tools; `calls` are short descriptions such as
    /// `read_file calc.py`.
    ToolCalls { turn: u32, calls: Vec<String> },
    /// One tool call finished.
    ToolResult { turn: u32, id: String, name: String, input: ToolInput, output: ToolOutput, elapsed_ms: u64 },
}

/// Why a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// The model ended its turn.
    EndTurn,
    /// The model produced one of the stop sequences.
    StopSequence,
    MaxTurns,
    /// The run's token budget (`maxTokens`) was used up.
    TokenBudget,
    /// The wall-clock limit (`timeoutSecs`) passed.
    Timeout,
    /// The convergence guard saw no progress.
    Stalled(String),
    /// A response was cut at `max_tokens`.
    MaxTokens,
    Refusal {
        explanation: Option<String>,
    },
    ContextWindowExceeded,
    /// Too many `pause_turn` continuations in a row.
    PauseLimit,
    Cancelled,
    /// A tool failed in a way that ends the run.
    ToolFatal(String),
    /// The model API failed.
    ModelError(ModelError),
    /// A stop reason this version does not know.
    Unknown(String),
}

impl Stop {
    /// The `stopReason` reported to the editor and the CLI.
    pub fn as_str(&self) -> &'static str {
        match self {
            Stop::EndTurn => "end_turn",
            Stop::StopSequence => "stop_sequence",
            Stop::MaxTurns => "max_turns",
            Stop::TokenBudget => "token_budget",
            Stop::Timeout => "timeout",
            Stop::Stalled(_) => "stalled",
            Stop::MaxTokens => "max_tokens",
            Stop::Refusal { .. } => "refusal",
            Stop::ContextWindowExceeded => "context_window_exceeded",
            Stop::PauseLimit => "pause_limit",
            Stop::Cancelled => "cancelled",
            Stop::ToolFatal(_) => "tool_error",
            Stop::ModelError(_) => "model_error",
            Stop::Unknown(_) => "unknown",
        }
    }

    /// Whether the model finished on its own terms.
    pub fn is_natural(&self) -> bool {
        matches!(self, Stop::EndTurn | Stop::StopSequence)
    }

    /// Whether a harness limit (not the model, not the user) ended the run:
    /// these get a closing summary request.
    pub fn is_limit(&self) -> bool {
        matches!(self, Stop::MaxTurns | Stop::TokenBudget | Stop::Timeout | Stop::Stalled(_) | Stop::PauseLimit)
    }

    /// A sentence for the user.
    pub fn describe(&self, limits: &Limits) -> String {
        match self {
            Stop::EndTurn | Stop::StopSequence => "the model finished".into(),
            Stop::MaxTurns => format!("the run reached maxTurns ({})", limits.max_turns),
            Stop::TokenBudget => format!("the run used up its token budget (maxTokens {})", limits.max_tokens),
            Stop::Timeout => format!("the run took longer than timeoutSecs ({} s)", limits.timeout.as_secs()),
            Stop::Stalled(why) => format!("the run stalled: {why}"),
            Stop::MaxTokens => format!("a model response was cut off at {} output tokens", limits.max_output_tokens),
            Stop::Refusal { explanation } => match explanation {
                Some(e) => format!("the model declined: {e}"),
                None => "the model declined the request".into(),
            },
            Stop::ContextWindowExceeded => "the conversation no longer fits the model's context window".into(),
            Stop::PauseLimit => "the model paused too many times in a row".into(),
            Stop::Cancelled => "cancelled".into(),
            Stop::ToolFatal(e) => format!("a tool failed: {e}"),
            Stop::ModelError(e) => e.message.clone(),
            Stop::Unknown(s) => format!("the model stopped for an unknown reason `{s}`"),
        }
    }
}

/// What a run did.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub stop: Stop,
    /// Model requests made (the closing summary request not included).
    pub turns: u32,
    pub usage: Usage,
    /// The model's last text, usually a one-line summary of the change.
    pub summary: String,
    /// The whole conversation.
    pub messages: Vec<Message>,
}

/// Detects runs that go round in circles.
#[derive(Default)]
struct Convergence {
    /// Consecutive failures per (tool, input).
    failures: HashMap<String, u32>,
    /// Every (tool, input, result) seen.
    seen: HashSet<String>,
    idle_turns: u32,
}

impl Convergence {
    /// Records one tool turn; `Some(reason)` when the run should stop.
    fn record(&mut self, results: &[(&str, &ToolInput, &ToolOutput)]) -> Option<String> {
        let mut new_information = false;
        for (name, input, out) in results {
            let call = format!("{name} {}", input.to_value());
            if out.is_error {
                let n = self.failures.entry(call.clone()).or_default();
                *n += 1;
                if *n >= SAME_FAILURE_LIMIT {
                    return Some(format!(
                        "`{name}` failed {n} times in a row with the same input: {}",
                        first_line(&out.content)
                    ));
                }
            } else {
                self.failures.remove(&call);
            }
            if self.seen.insert(format!("{call} {} {}", out.is_error, out.content)) {
                new_information = true;
            }
        }
        if new_information {
            self.idle_turns = 0;
            None
        } else {
            self.idle_turns += 1;
            (self.idle_turns >= NO_NEW_INFORMATION_TURNS)
                .then(|| format!("{} tool turns in a row brought nothing new", self.idle_turns))
        }
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

/// The tool result for a [`ToolInput::Malformed`] input (a truncated or
/// malformed tool call): the model reads why, the tool is not called.
fn malformed_input(name: &str, raw: &str, error: &str) -> ToolOutput {
    tracing::debug!(tool = name, error, "a tool call's input is not a JSON object");
    let shown: String = raw.chars().take(300).collect();
    ToolOutput {
        content: format!(
            "the input of `{name}` was not a JSON object: {shown}. Call the tool again with a JSON object that matches its schema."
        ),
        is_error: true,
        fatal: false,
    }
}

/// Runs the loop from a first user message to a stop.
pub async fn run(
    system: &str,
    prompt: String,
    model: &dyn ModelClient,
    tools: &dyn ToolSet,
    limits: &Limits,
    cancel: &CancellationToken,
    events: &(dyn Fn(RunEvent) + Send + Sync),
) -> Outcome {
    let deadline = tokio::time::Instant::now() + limits.timeout;
    let specs = tools.specs();
    let mut messages = vec![Message::user_text(prompt)];
    let mut sent = 0usize;
    let mut usage = Usage::default();
    let mut turns = 0u32;
    let mut pauses = 0u32;
    let mut max_output = limits.max_output_tokens;
    let mut widened = false;
    let mut summary = String::new();
    let mut guard = Convergence::default();
    let stream = |u: StreamUpdate| events(RunEvent::Stream(u));
    let stop = loop {
        if turns >= limits.max_turns {
            break Stop::MaxTurns;
        }
        if usage.total() >= limits.max_tokens {
            break Stop::TokenBudget;
        }
        turns += 1;
        events(RunEvent::Request {
            turn: turns,
            new_messages: messages[sent..].to_vec(),
            max_output_tokens: max_output,
            allow_tools: true,
        });
        sent = messages.len();
        let request = ModelRequest {
            system,
            messages: &messages,
            tools: &specs,
            max_output_tokens: max_output,
            allow_tools: true,
        };
        let started = Instant::now();
        let response = tokio::select! {
            biased;
            _ = cancel.cancelled() => break Stop::Cancelled,
            _ = tokio::time::sleep_until(deadline) => break Stop::Timeout,
            r = model.complete(request, &stream) => r,
        };
        let response = match response {
            Ok(r) => r,
            Err(e) => break Stop::ModelError(e),
        };
        events(RunEvent::Response {
            turn: turns,
            response: response.clone(),
            elapsed_ms: started.elapsed().as_millis() as u64,
        });
        usage.add(response.usage);
        // A response cut at max_tokens: a cut-off tool call is dropped and the
        // request retried once with more room; otherwise the run ends.
        if response.stop_reason == StopReason::MaxTokens {
            let cut_tool = matches!(response.message.content.last(), Some(Block::ToolUse { .. }));
            if cut_tool && !widened && max_output < MAX_OUTPUT_CEILING {
                widened = true;
                max_output = max_output.saturating_mul(2).min(MAX_OUTPUT_CEILING);
                tracing::info!(max_output, "a tool call was cut off at max_tokens; retrying with more room");
                continue;
            }
            let text = response.message.text();
            if !text.trim().is_empty() {
                summary = text;
            }
            break Stop::MaxTokens;
        }
        let text = response.message.text();
        if !text.trim().is_empty() {
            summary = text;
        }
        let calls: Vec<(String, String, ToolInput)> = response
            .message
            .tool_calls()
            .map(|(id, name, input)| (id.to_string(), name.to_string(), input.clone()))
            .collect();
        let stop_reason = response.stop_reason.clone();
        let empty = response.message.content.is_empty();
        if !empty {
            messages.push(response.message);
        }
        // A tool turn is recognised by its tool calls, not by stop_reason.
        if !calls.is_empty() {
            events(RunEvent::ToolCalls {
                turn: turns,
                calls: calls.iter().map(|(_, n, i)| describe_call(n, i)).collect(),
            });
            let outputs = tokio::select! {
                biased;
                _ = cancel.cancelled() => break Stop::Cancelled,
                _ = tokio::time::sleep_until(deadline) => break Stop::Timeout,
                o = join_all(calls.iter().map(|c| run_call(tools, events, turns, c))) => o,
            };
            let fatal = outputs.iter().find(|o| o.fatal).map(|o| o.content.clone());
            let judged: Vec<(&str, &ToolInput, &ToolOutput)> =
                calls.iter().zip(&outputs).map(|((_, n, i), o)| (n.as_str(), i, o)).collect();
            let stalled = guard.record(&judged);
            let content = calls
                .iter()
                .zip(outputs)
                .map(|((id, _, _), out)| Block::ToolResult {
                    tool_use_id: id.clone(),
                    content: out.content,
                    is_error: out.is_error,
                })
                .collect();
            messages.push(Message { role: Role::User, content, raw: None });
            if let Some(e) = fatal {
                break Stop::ToolFatal(e);
            }
            if let Some(why) = stalled {
                break Stop::Stalled(why);
            }
            pauses = 0;
            continue;
        }
        match stop_reason {
            StopReason::PauseTurn if !empty => {
                pauses += 1;
                if pauses > MAX_PAUSE_CONTINUATIONS {
                    break Stop::PauseLimit;
                }
                // Continue the paused turn: no new user message.
                continue;
            }
            StopReason::EndTurn | StopReason::ToolUse | StopReason::PauseTurn => break Stop::EndTurn,
            StopReason::StopSequence => break Stop::StopSequence,
            StopReason::MaxTokens => break Stop::MaxTokens,
            StopReason::Refusal { explanation } => break Stop::Refusal { explanation },
            StopReason::ContextWindowExceeded => break Stop::ContextWindowExceeded,
            StopReason::Other(s) => {
                tracing::warn!(stop_reason = %s, "ending the run on an unknown stop reason");
                break Stop::Unknown(s);
            }
        }
    };
    if stop.is_limit()
        && let Some(text) =
            closing_summary(system, &mut messages, &specs, &stop, limits, model, cancel, events, &mut usage).await
    {
        summary = text;
    }
    tracing::info!(
        stop = stop.as_str(),
        turns,
        input_tokens = usage.input_tokens,
        output_tokens = usage.output_tokens,
        "run ended"
    );
    Outcome { stop, turns, usage, summary, messages }
}

/// Runs one tool call (a malformed input gets its error result, the tool is
/// not called) and reports it.
async fn run_call(
    tools: &dyn ToolSet,
    events: &(dyn Fn(RunEvent) + Send + Sync),
    turn: u32,
    (id, name, input): &(String, String, ToolInput),
) -> ToolOutput {
    let started = Instant::now();
    let out = match input {
        ToolInput::Object(map) => tools.call(name, &Value::Object(map.clone())).await,
        ToolInput::Malformed { raw, error } => malformed_input(name, raw, error),
    };
    let elapsed_ms = started.elapsed().as_millis() as u64;
    events(RunEvent::ToolResult {
        turn,
        id: id.clone(),
        name: name.clone(),
        input: input.clone(),
        output: out.clone(),
        elapsed_ms,
    });
    out
}

/// One last request without tools: what was done, what is left.
#[allow(clippy::too_many_arguments)]
async fn closing_summary(
    system: &str,
    messages: &mut Vec<Message>,
    specs: &[crate::model::ToolSpec],
    stop: &Stop,
    limits: &Limits,
    model: &dyn ModelClient,
    cancel: &CancellationToken,
    events: &(dyn Fn(RunEvent) + Send + Sync),
    usage: &mut Usage,
) -> Option<String> {
    let ask = format!(
        "The run has to stop now: {}. Do not call any tools. In at most three sentences, say what you changed so far and what is left to do.",
        stop.describe(limits)
    );
    let sent = messages.len();
    match messages.last_mut() {
        Some(last) if last.role == Role::User => last.content.push(Block::Text { text: ask }),
        _ => messages.push(Message::user_text(ask)),
    }
    let new = if sent > 0 { messages[sent - 1..].to_vec() } else { messages.clone() };
    events(RunEvent::Request { turn: 0, new_messages: new, max_output_tokens: 1024, allow_tools: false });
    let request = ModelRequest { system, messages, tools: specs, max_output_tokens: 1024, allow_tools: false };
    let stream = |u: StreamUpdate| events(RunEvent::Stream(u));
    let started = Instant::now();
    let response = tokio::select! {
        biased;
        _ = cancel.cancelled() => return None,
        _ = tokio::time::sleep((limits.timeout / 4).clamp(SUMMARY_TIMEOUT.0, SUMMARY_TIMEOUT.1)) => return None,
        r = model.complete(request, &stream) => r.ok()?,
    };
    events(RunEvent::Response {
        turn: 0,
        response: response.clone(),
        elapsed_ms: started.elapsed().as_millis() as u64,
    });
    usage.add(response.usage);
    let text = response.message.text();
    messages.push(response.message);
    (!text.trim().is_empty()).then_some(text)
}

/// `read_file calc.py`: the tool's name and its main argument.
pub fn describe_call(name: &str, input: &ToolInput) -> String {
    let arg = input
        .as_object()
        .and_then(|map| ["path", "pattern", "query", "symbol"].iter().find_map(|k| map.get(*k).and_then(Value::as_str)))
        .map(|s| s.chars().take(60).collect::<String>());
    match arg {
        Some(a) => format!("{name} {a}"),
        None => name.to_string(),
    }
}

#[cfg(test)]
mod tests;
