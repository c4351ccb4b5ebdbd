//! The agent loop: ask the model, run every tool it calls, feed the results
//! back matched by id, and repeat until the model ends its turn or a limit
//! stops the run.
//!
//! The loop is provider-neutral and knows no LSP, HTTP or rope types: it sees
//! a [`ModelClient`], a [`ToolSet`] and a cancellation token, and reports what
//! happens through [`RunEvent`]s.

use futures::future::join_all;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::model::{Block, Message, ModelError, ModelRequest, Role, StopReason, Usage};
use crate::providers::ModelClient;
use crate::tools::ToolSet;

/// Consecutive `pause_turn` continuations allowed before the run stops.
const MAX_PAUSE_CONTINUATIONS: u32 = 5;

/// The limits of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Model requests at most.
    pub max_turns: u32,
    /// Input + output tokens over the whole run at most.
    pub max_tokens: u64,
    /// `max_tokens` of each request.
    pub max_output_tokens: u32,
}

/// Something that happened during a run, for progress reporting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunEvent {
    /// The model asked for tools in `turn`; `calls` are short descriptions
    /// such as `read_file calc.py`.
    ToolCalls { turn: u32, calls: Vec<String> },
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

    /// A sentence for the user.
    pub fn describe(&self, limits: &Limits) -> String {
        match self {
            Stop::EndTurn | Stop::StopSequence => "the model finished".into(),
            Stop::MaxTurns => format!("the run reached maxTurns ({})", limits.max_turns),
            Stop::TokenBudget => format!(
                "the run used up its token budget (maxTokens {})",
                limits.max_tokens
            ),
            Stop::MaxTokens => format!(
                "a model response was cut off at {} output tokens",
                limits.max_output_tokens
            ),
            Stop::Refusal { explanation } => match explanation {
                Some(e) => format!("the model declined: {e}"),
                None => "the model declined the request".into(),
            },
            Stop::ContextWindowExceeded => {
                "the conversation no longer fits the model's context window".into()
            }
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
    /// Model requests made.
    pub turns: u32,
    pub usage: Usage,
    /// The model's last text, usually a one-line summary of the change.
    pub summary: String,
    /// The whole conversation.
    pub messages: Vec<Message>,
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
    let specs = tools.specs();
    let mut messages = vec![Message::user_text(prompt)];
    let mut usage = Usage::default();
    let mut turns = 0u32;
    let mut pauses = 0u32;
    let mut summary = String::new();
    let stop = loop {
        if turns >= limits.max_turns {
            break Stop::MaxTurns;
        }
        if usage.total() >= limits.max_tokens {
            break Stop::TokenBudget;
        }
        turns += 1;
        let request = ModelRequest {
            system,
            messages: &messages,
            tools: &specs,
            max_output_tokens: limits.max_output_tokens,
        };
        let response = tokio::select! {
            biased;
            _ = cancel.cancelled() => break Stop::Cancelled,
            r = model.complete(request) => r,
        };
        let response = match response {
            Ok(r) => r,
            Err(e) => break Stop::ModelError(e),
        };
        usage.add(response.usage);
        let text = response.message.text();
        if !text.trim().is_empty() {
            summary = text;
        }
        let calls: Vec<(String, String, Value)> = response
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
                o = join_all(calls.iter().map(|(_, name, input)| tools.call(name, input))) => o,
            };
            let mut fatal = None;
            let content = calls
                .iter()
                .zip(outputs)
                .map(|((id, name, _), out)| {
                    tracing::debug!(tool = %name, is_error = out.is_error, "tool call done");
                    if out.fatal && fatal.is_none() {
                        fatal = Some(out.content.clone());
                    }
                    Block::ToolResult {
                        tool_use_id: id.clone(),
                        content: out.content,
                        is_error: out.is_error,
                    }
                })
                .collect();
            messages.push(Message {
                role: Role::User,
                content,
                raw: None,
            });
            if let Some(e) = fatal {
                break Stop::ToolFatal(e);
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
            StopReason::EndTurn | StopReason::ToolUse | StopReason::PauseTurn => {
                break Stop::EndTurn;
            }
            StopReason::StopSequence => break Stop::StopSequence,
            StopReason::MaxTokens => break Stop::MaxTokens,
            StopReason::Refusal { explanation } => break Stop::Refusal { explanation },
            StopReason::ContextWindowExceeded => break Stop::ContextWindowExceeded,
            StopReason::Other(s) => break Stop::Unknown(s),
        }
    };
    tracing::info!(
        stop = stop.as_str(),
        turns,
        input_tokens = usage.input_tokens,
        output_tokens = usage.output_tokens,
        "run ended"
    );
    Outcome {
        stop,
        turns,
        usage,
        summary,
        messages,
    }
}

/// `read_file calc.py`: the tool's name and its main argument.
pub fn describe_call(name: &str, input: &Value) -> String {
    let arg = ["path", "pattern", "query", "symbol"]
        .iter()
        .find_map(|k| input.get(*k).and_then(Value::as_str))
        .map(|s| s.chars().take(60).collect::<String>());
    match arg {
        Some(a) => format!("{name} {a}"),
        None => name.to_string(),
    }
}

#[cfg(test)]
mod tests;
