//! The agent loop: ask the model, run every tool it calls, feed the results
//! back matched by id, and repeat until the model ends its turn or a limit
//! stops the run.
//!
//! The loop is provider-neutral and knows no LSP, HTTP or rope types: it sees
//! a [`ModelClient`], a [`ToolSet`] and a cancellation token, and reports what
//! happens through [`RunEvent`]s (progress and transcripts listen to them).
//!
//! Limits: `maxTurns`, `maxTokens` (billed-equivalent tokens over the run),
//! `maxCostUsd`, a wall clock `timeout`, and a convergence guard (the same
//! failing call three times in a row, or several tool turns that bring
//! nothing new). At a limit, one last request without tools asks for a
//! short summary.
//!
//! Context: before each request its prompt tokens are estimated
//! ([`context`]); the outputs of older tool calls are replaced by stubs when
//! carrying them has cost what a cache rewrite would, or past about 80 % of
//! `contextBudget`. When that is not enough, one request without tools
//! summarises the older turns into the first message (compaction), and a
//! request that still would not fit is not sent (`context_budget`). A
//! "prompt is too long" refusal or a `model_context_window_exceeded` stop
//! measures the window: the context is edited to fit it and the request
//! retried once.
//!
//! Its parts:
//! the loop: `run(system, prompt, model, tools, limits, cancel, events) ->
//! Outcome`, with `maxTokens` and `maxCostUsd` as hard bounds; beside each
//! message its revision and measured bytes (`Run::push`/`renew`, kept in step
//! by the edits; debug builds check), so a turn's cost does not grow with the
//! history; `context.rs` (the estimate of a request's prompt tokens and its
//! ceiling; which outputs are stale, the ski-rental rule for when stubbing
//! them pays, the stubs; where a compaction splits); compaction itself
//! (`Run::compact`: one request without tools, the summary and
//! `ToolSet::state` appended to the first message)

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

mod context;

use futures::future::join_all;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::model::{
    Block, Message, ModelError, ModelErrorKind, ModelRequest, ModelResponse, Role, StopReason, StreamUpdate, ToolInput,
    ToolSpec, Usage,
};
use crate::providers::ModelClient;
use crate::tools::{ToolOutput, ToolSet};

/// Consecutive `pause_turn` continuations allowed before the run stops.
const MAX_PAUSE_CONTINUATIONS: u32 = 5;
/// The same call failing this many times in a row stalls the run.
const SAME_FAILURE_LIMIT: u32 = 3;
/// This many tool turns in a row with only repeated results stall the run.
const NO_NEW_INFORMATION_TURNS: u32 = 4;
/// The least output a request may be capped to by the run budget.
const MIN_OUTPUT_TOKENS: u32 = 256;
/// `max_tokens` of the closing summary request.
const SUMMARY_OUTPUT_TOKENS: u32 = 1024;
/// `max_tokens` ceiling when a cut-off tool call is retried with more room.
const MAX_OUTPUT_CEILING: u32 = 64_000;
/// Past this share of the ceiling, the provider counts the request's tokens
/// (when `countTokens` asks for it).
const COUNT_FROM: f64 = 0.4;
/// `max_tokens` of the compaction request.
const COMPACT_OUTPUT_TOKENS: u32 = 2048;
/// Compaction replaces at least this many estimated tokens (less is not
/// worth a request).
const MIN_COMPACTED_TOKENS: u64 = 2 * COMPACT_OUTPUT_TOKENS as u64;
/// What the compaction request asks.
const COMPACT_ASK: &str = "The conversation has grown too long: the turns so far will be replaced by a summary you write now. Do not call any tools. Write that summary for yourself: what you found (file paths, line numbers, names, the cause of the problem), what you changed and why, what you tried that did not work, and what is left to do. Be brief and specific; the task above stays as it is.";
/// Heads the summary in the first message after a compaction.
const COMPACTED_HEADER: &str = "[The earlier turns of this run were replaced by the summary below to save context. Files you changed keep your changes; read them again to see their current text.]";
/// Time allowed for the closing summary request: a quarter of the run's
/// time limit, between these bounds.
const SUMMARY_TIMEOUT: (Duration, Duration) = (Duration::from_secs(2), Duration::from_secs(30));

/// The limits of one run: the configuration's section, as it is.
use crate::config::limits::{ContextEditing, Limits};

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
    /// Before the request of `turn`, the context was edited (the `edit`-th
    /// edit of the run), taking the estimated prompt from `tokens_before` to
    /// `tokens_after`.
    ContextEdited { turn: u32, edit: u32, change: ContextChange, tokens_before: u64, tokens_after: u64 },
    /// The run's proposal was checked (`fix::verify`) at the end of
    /// `round`: `line` says how it went (`verified: …`, `not verified: …`;
    /// `None` when nothing was set up to check it), in `elapsed_ms`. Sent by
    /// the rounds around the loop, never by the loop itself.
    Checked { round: u32, line: Option<String>, elapsed_ms: u64 },
    /// With several candidates, where each one is, on one line (`best of
    /// 3: #1 turn 2 · #2 not verified · #3 waiting`): sent by best of N in
    /// place of the candidates' own progress, never by the loop itself.
    Candidates { line: String },
}

/// How the context was edited.
#[derive(Debug, Clone, PartialEq)]
pub enum ContextChange {
    /// The outputs of these tool calls were replaced by one-line stubs.
    Stubbed { reason: StubReason, tool_use_ids: Vec<String> },
    /// The `replaced` messages after the first were replaced by `summary`,
    /// appended to the first message (the task), which the model wrote in
    /// a request without tools.
    Compacted { replaced: u32, summary: String },
}

/// Why older tool outputs were stubbed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StubReason {
    /// Carrying them had cost what rewriting the prompt cache costs.
    Economy,
    /// The request passed about 80 % of its ceiling.
    Budget,
    /// The model's window was measured by a refusal or a full window.
    Refused,
}

impl StubReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StubReason::Economy => "economy",
            StubReason::Budget => "budget",
            StubReason::Refused => "refused",
        }
    }
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
    /// The run's money budget (`maxCostUsd`) was used up.
    CostBudget,
    /// The wall-clock limit (`timeoutSecs`) passed.
    Timeout,
    /// The next request would not fit the context (`contextBudget`, or the
    /// model's window as measured), even with older tool outputs removed;
    /// it was not sent.
    ContextBudget {
        /// Its estimated prompt tokens.
        estimate: u64,
        /// The ceiling it passed.
        ceiling: u64,
    },
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
    /// The tools asked to stop before running the model's calls (best of N
    /// forks the run there, `candidatesFrom: first-edit`); the conversation
    /// ends with those calls, not run.
    Forked,
}

impl Stop {
    /// The `stopReason` reported to the editor and the CLI.
    pub fn as_str(&self) -> &'static str {
        match self {
            Stop::EndTurn => "end_turn",
            Stop::StopSequence => "stop_sequence",
            Stop::MaxTurns => "max_turns",
            Stop::TokenBudget => "token_budget",
            Stop::CostBudget => "cost_budget",
            Stop::Timeout => "timeout",
            Stop::ContextBudget { .. } => "context_budget",
            Stop::Stalled(_) => "stalled",
            Stop::MaxTokens => "max_tokens",
            Stop::Refusal { .. } => "refusal",
            Stop::ContextWindowExceeded => "context_window_exceeded",
            Stop::PauseLimit => "pause_limit",
            Stop::Cancelled => "cancelled",
            Stop::ToolFatal(_) => "tool_error",
            Stop::ModelError(_) => "model_error",
            Stop::Unknown(_) => "unknown",
            Stop::Forked => "forked",
        }
    }

    /// Whether the model finished on its own terms.
    pub fn is_natural(&self) -> bool {
        matches!(self, Stop::EndTurn | Stop::StopSequence)
    }

    /// Whether a harness limit (not the model, not the user) ended the run:
    /// these get a closing summary request.
    pub fn is_limit(&self) -> bool {
        matches!(
            self,
            Stop::MaxTurns | Stop::TokenBudget | Stop::CostBudget | Stop::Timeout | Stop::Stalled(_) | Stop::PauseLimit
        )
    }

    /// A sentence for the user.
    pub fn describe(&self, limits: &Limits) -> String {
        match self {
            Stop::EndTurn | Stop::StopSequence => "the model finished".into(),
            Stop::MaxTurns => format!("the run reached maxTurns ({})", limits.max_turns),
            Stop::TokenBudget => format!("the run used up its token budget (maxTokens {})", limits.max_tokens),
            Stop::CostBudget => match limits.max_cost {
                Some(c) => format!("the run used up its budget (maxCostUsd {})", c.usd),
                None => "the run used up its budget (maxCostUsd)".into(),
            },
            Stop::Timeout => format!("the run took longer than timeoutSecs ({} s)", limits.timeout.as_secs()),
            Stop::ContextBudget { estimate, ceiling } => format!(
                "the next request (about {estimate} tokens) would not fit the context ({} tokens; contextBudget {}) even with older tool outputs removed and older turns summarised",
                ceiling, limits.context_budget
            ),
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
            Stop::Forked => "the run was forked into candidates at the model's first edit".into(),
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
    /// Every (tool, input, result) seen, with how many of its outputs the
    /// model still has in its context.
    seen: HashMap<String, usize>,
    /// The `seen` entry of each tool-use id.
    keys: HashMap<String, String>,
    idle_turns: u32,
}

impl Convergence {
    /// Records one tool turn; `Some(reason)` when the run should stop.
    fn record(&mut self, results: &[(&str, &str, &ToolInput, &ToolOutput)]) -> Option<String> {
        let mut new_information = false;
        for (id, name, input, out) in results {
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
            let key = format!("{call} {} {}", out.is_error, out.content);
            self.keys.insert(id.to_string(), key.clone());
            let held = self.seen.entry(key).or_default();
            new_information |= *held == 0;
            *held += 1;
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

impl Convergence {
    /// The output of `id` left the context (stubbed or compacted): calling
    /// the tool again to see it is new information, not a circle.
    fn forget(&mut self, id: &str) {
        if let Some(held) = self.keys.remove(id).and_then(|key| self.seen.get_mut(&key)) {
            *held = held.saturating_sub(1);
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

/// One tool call of a turn.
struct ToolCall {
    id: String,
    name: String,
    input: ToolInput,
}

/// What the steps of a run share: its inputs and the state carried from
/// turn to turn.
struct Run<'a> {
    system: &'a str,
    model: &'a dyn ModelClient,
    tools: &'a dyn ToolSet,
    limits: &'a Limits,
    cancel: &'a CancellationToken,
    events: &'a (dyn Fn(RunEvent) + Send + Sync),
    deadline: tokio::time::Instant,
    specs: Vec<ToolSpec>,
    /// The bytes of the system prompt and `specs`, which every request
    /// carries unchanged (measured once).
    fixed_bytes: u64,
    messages: Vec<Message>,
    /// Per message: its revision (a new one whenever it changes, see
    /// `ModelRequest::revisions`) and its bytes as the estimate counts
    /// them, measured once. Kept in step by `push`, `renew` and the
    /// compaction's splice.
    revisions: Vec<u64>,
    sizes: Vec<u64>,
    /// Messages already reported in a `RunEvent::Request`.
    sent: usize,
    usage: Usage,
    /// Billed-equivalent tokens per prompt token of the last request (1
    /// without a cache; about 0.1 when most of it was read from the cache).
    billed_share: f64,
    turns: u32,
    /// Consecutive `pause_turn` continuations.
    pauses: u32,
    max_output: u32,
    /// Whether `max_output` was widened for a cut-off tool call.
    widened: bool,
    summary: String,
    guard: Convergence,
    budget: context::Budget,
    /// Context edits made so far.
    context_edits: u32,
    /// What the stale tool outputs have cost to carry since the last edit,
    /// in billed-equivalent tokens.
    carried: f64,
    /// Blocks of the first message (the task) before any compaction
    /// summary.
    task_blocks: usize,
    /// Whether the next request edits the context whatever its estimate
    /// (after a `model_context_window_exceeded` stop).
    force_edit: bool,
    /// Whether a compaction failed (then it is tried again only for a
    /// request that would not fit at all).
    compact_failed: bool,
    /// Whether the previous response stopped at the context window.
    window_retried: bool,
}

/// Runs the loop from a conversation that ends with a user message (the
/// task, or a follow-up of an earlier run: its messages, then the new
/// request) to a stop. The first message is the task, which context edits
/// keep.
pub async fn run(
    system: &str,
    messages: Vec<Message>,
    model: &dyn ModelClient,
    tools: &dyn ToolSet,
    limits: &Limits,
    cancel: &CancellationToken,
    events: &(dyn Fn(RunEvent) + Send + Sync),
) -> Outcome {
    let mut run = Run {
        system,
        model,
        tools,
        limits,
        cancel,
        events,
        deadline: tokio::time::Instant::now() + limits.timeout,
        fixed_bytes: 0,
        specs: tools.specs(),
        task_blocks: messages.first().map_or(0, |m| m.content.len()),
        revisions: messages.iter().map(|_| crate::model::next_revision()).collect(),
        sizes: messages.iter().map(context::message_bytes).collect(),
        messages,
        sent: 0,
        usage: Usage::default(),
        billed_share: 1.0,
        turns: 0,
        pauses: 0,
        max_output: limits.max_output_tokens,
        widened: false,
        summary: String::new(),
        guard: Convergence::default(),
        budget: context::Budget::new(limits.context_budget),
        context_edits: 0,
        carried: 0.0,
        force_edit: false,
        compact_failed: false,
        window_retried: false,
    };
    run.fixed_bytes = context::fixed_bytes(run.system, &run.specs);
    // A conversation that ends with the model's calls (a forked run) runs
    // them first.
    if let Some(calls) = pending_calls(&run.messages)
        && let ControlFlow::Break(stop) = run.tool_turn(calls).await
    {
        return run.end(stop).await;
    }
    let stop = loop {
        if let ControlFlow::Break(stop) = run.turn().await {
            break stop;
        }
    };
    run.end(stop).await
}

/// The model's calls that end `messages`, not run yet.
fn pending_calls(messages: &[Message]) -> Option<Vec<ToolCall>> {
    let last = messages.last().filter(|m| m.role == Role::Assistant)?;
    let calls: Vec<ToolCall> = last
        .tool_calls()
        .map(|(id, name, input)| ToolCall { id: id.to_string(), name: name.to_string(), input: input.clone() })
        .collect();
    (!calls.is_empty()).then_some(calls)
}

impl Run<'_> {
    /// One turn: a request, then its tool calls or its stop.
    async fn turn(&mut self) -> ControlFlow<Stop> {
        self.check_limits()?;
        let response = self.request().await?;
        self.usage.add(response.usage);
        if response.stop_reason == StopReason::MaxTokens {
            return self.cut_off(response);
        }
        if response.stop_reason == StopReason::ContextWindowExceeded && !self.window_retried {
            return self.window_full(&response);
        }
        self.window_retried = false;
        self.keep_summary(&response.message);
        let calls: Vec<ToolCall> = response
            .message
            .tool_calls()
            .map(|(id, name, input)| ToolCall { id: id.to_string(), name: name.to_string(), input: input.clone() })
            .collect();
        let empty = response.message.content.is_empty();
        if !empty {
            self.push(response.message);
        }
        // A tool turn is recognised by its tool calls, not by stop_reason.
        if !calls.is_empty() {
            return self.tool_turn(calls).await;
        }
        self.text_turn_stop(response.stop_reason, empty)
    }

    /// The turn and budget limits, checked before each request: `maxTokens`
    /// and `maxCostUsd` are never exceeded, so a request that could pass
    /// them (its estimate at the last request's billed share of the prompt,
    /// plus all the output it may write) is not sent.
    fn check_limits(&self) -> ControlFlow<Stop> {
        if self.turns >= self.limits.max_turns {
            return ControlFlow::Break(Stop::MaxTurns);
        }
        match self.output_room(self.request_bytes(), self.max_output) {
            Ok(_) => ControlFlow::Continue(()),
            Err(stop) => ControlFlow::Break(stop),
        }
    }

    /// The output a request of `bytes` may ask for (`want` at most) so that
    /// the run cannot pass `maxTokens` or `maxCostUsd`; the stop when less
    /// than [`MIN_OUTPUT_TOKENS`] would be left, and the request is not sent.
    fn output_room(&self, bytes: u64, want: u32) -> Result<u32, Stop> {
        let least = want.min(MIN_OUTPUT_TOKENS);
        let prompt = (self.budget.estimate(bytes) as f64 * self.billed_share).ceil() as u64;
        // What the provider may add to the output it is asked for (a
        // thinking budget) counts against the bounds too.
        let extra = u64::from(self.model.output_ceiling(want).saturating_sub(want));
        let room = self.limits.max_tokens.saturating_sub(self.usage.billed() + prompt + extra);
        let room = u32::try_from(room).unwrap_or(u32::MAX).min(want);
        if room < least {
            return Err(Stop::TokenBudget);
        }
        let Some(cap) = self.limits.max_cost else { return Ok(room) };
        // The prompt at the input price (its billed share already weighs
        // the cache), the output (and any thinking) at the output price.
        let spent = cap.price.cost(&self.usage.tokens());
        let left = cap.usd - spent - prompt as f64 * cap.price.input / 1_000_000.0;
        let affordable =
            if cap.price.output > 0.0 { left * 1_000_000.0 / cap.price.output - extra as f64 } else { f64::MAX };
        let room = room.min(affordable.max(0.0).floor().min(f64::from(u32::MAX)) as u32);
        if room < least || left < 0.0 {
            return Err(Stop::CostBudget);
        }
        Ok(room)
    }

    /// `work`, unless the run is cancelled or its time is up first.
    async fn race<T>(&self, work: impl Future<Output = T>) -> ControlFlow<Stop, T> {
        tokio::select! {
            biased;
            _ = self.cancel.cancelled() => ControlFlow::Break(Stop::Cancelled),
            _ = tokio::time::sleep_until(self.deadline) => ControlFlow::Break(Stop::Timeout),
            v = work => ControlFlow::Continue(v),
        }
    }

    /// Sends the next request with tools, raced against the limits, and
    /// reports it and its response. The context is fitted first; a "prompt
    /// is too long" refusal measures the window, and the request is sent
    /// once more after an edit.
    async fn request(&mut self) -> ControlFlow<Stop, ModelResponse> {
        let force = std::mem::take(&mut self.force_edit);
        self.fit(self.turns + 1, force).await?;
        self.turns += 1;
        let mut retried = false;
        loop {
            match self.send().await? {
                Ok(response) => return ControlFlow::Continue(response),
                Err(e) if e.kind == ModelErrorKind::ContextTooLong && !retried => {
                    retried = true;
                    tracing::info!(
                        ceiling = self.budget.ceiling(),
                        error = %e.message,
                        "the prompt did not fit the context window; editing the context and retrying once"
                    );
                    self.fit(self.turns, true).await?;
                }
                Err(e) => return ControlFlow::Break(Stop::ModelError(e)),
            }
        }
    }

    /// The estimated bytes of the next request.
    fn request_bytes(&self) -> u64 {
        self.fixed_bytes + self.sizes.iter().sum::<u64>()
    }

    /// Appends a message to the conversation.
    fn push(&mut self, message: Message) {
        self.revisions.push(crate::model::next_revision());
        self.sizes.push(context::message_bytes(&message));
        self.messages.push(message);
    }

    /// After `messages[i]` changed: a new revision, measured again.
    fn renew(&mut self, i: usize) {
        self.revisions[i] = crate::model::next_revision();
        self.sizes[i] = context::message_bytes(&self.messages[i]);
    }

    /// The estimated prompt tokens of the next request.
    fn estimate(&self) -> u64 {
        self.budget.estimate(self.request_bytes())
    }

    /// Makes the next request fit: older tool outputs are stubbed when due
    /// ([`Run::edit`]); past the edit threshold still, the older turns are
    /// summarised ([`Run::compact`]); a request that still does not fit is
    /// not sent.
    async fn fit(&mut self, turn: u32, force: bool) -> ControlFlow<Stop> {
        self.count().await?;
        let mut estimate = self.edit(turn, force);
        if estimate > self.budget.edit_threshold() && (!self.compact_failed || estimate > self.budget.ceiling()) {
            estimate = self.compact(turn).await?;
        }
        let ceiling = self.budget.ceiling();
        if estimate > ceiling {
            return ControlFlow::Break(Stop::ContextBudget { estimate, ceiling });
        }
        ControlFlow::Continue(())
    }

    /// Past [`COUNT_FROM`] of the ceiling, the provider's exact count of the
    /// next request (`countTokens`) recalibrates the estimate; without one
    /// (the setting off, another provider, a failed count) the estimate
    /// stays as it is.
    async fn count(&mut self) -> ControlFlow<Stop> {
        let bytes = self.request_bytes();
        if (self.budget.estimate(bytes) as f64) < self.budget.ceiling() as f64 * COUNT_FROM {
            return ControlFlow::Continue(());
        }
        let request = ModelRequest {
            system: self.system,
            messages: &self.messages,
            tools: &self.specs,
            max_output_tokens: self.max_output,
            allow_tools: true,
            revisions: &self.revisions,
        };
        match self.race(self.model.count_tokens(request)).await? {
            Ok(Some(tokens)) => self.budget.calibrate(bytes, tokens),
            Ok(None) => {}
            Err(e) => tracing::debug!(error = %e.message, "token count failed; the estimate stands"),
        }
        ControlFlow::Continue(())
    }

    /// Stubs the stale tool outputs, in one batch, when a refusal measured
    /// the window (`force`), when the request passes the edit threshold, or
    /// when carrying them has cost what the cache rewrite after an edit
    /// costs; returns the estimate of the next request.
    fn edit(&mut self, turn: u32, force: bool) -> u64 {
        let before = self.estimate();
        let Some(stale) = context::stale(&self.messages, &self.sizes, &self.budget) else { return before };
        let reason = if force {
            StubReason::Refused
        } else if before > self.budget.edit_threshold() {
            StubReason::Budget
        } else if self.limits.context_editing == ContextEditing::Economy && stale.worth_editing(self.carried) {
            StubReason::Economy
        } else {
            // Carried once more, by this request.
            self.carried += stale.carry();
            return before;
        };
        let stubbed = context::stub_stale(&mut self.messages, &self.budget);
        for s in &stubbed {
            self.guard.forget(&s.tool_use_id);
        }
        let mut changed: Vec<usize> = stubbed.iter().map(|s| s.message).collect();
        changed.dedup();
        for i in changed {
            self.renew(i);
        }
        self.carried = 0.0;
        let after = self.estimate();
        self.context_edits += 1;
        tracing::info!(
            turn,
            reason = reason.as_str(),
            stubbed = stubbed.len(),
            before,
            after,
            "older tool outputs removed to save context"
        );
        (self.events)(RunEvent::ContextEdited {
            turn,
            edit: self.context_edits,
            change: ContextChange::Stubbed {
                reason,
                tool_use_ids: stubbed.into_iter().map(|s| s.tool_use_id).collect(),
            },
            tokens_before: before,
            tokens_after: after,
        });
        after
    }

    /// Compaction: one request without tools (the same system prompt and
    /// tools, so it reads the cache) asks the model to summarise the turns
    /// between the first message and the newest exchanges; the summary, and
    /// what the tools hold that must not be lost (the files changed so far),
    /// are appended to the first message and those turns are dropped.
    /// Returns the estimate of the next request, unchanged when nothing
    /// could be compacted or the model gave no summary.
    async fn compact(&mut self, turn: u32) -> ControlFlow<Stop, u64> {
        let before = self.estimate();
        let ask_bytes = COMPACT_ASK.len() as u64;
        let fits = |split: usize| {
            let head = self.budget.estimate(context::messages_bytes(&self.messages[1..split]));
            let bytes = self.fixed_bytes + context::messages_bytes(&self.messages[..split]) + ask_bytes;
            head >= MIN_COMPACTED_TOKENS && self.budget.estimate(bytes) <= self.budget.ceiling()
        };
        let Some(split) = context::compaction_split(&self.messages, &self.budget, fits) else {
            tracing::info!(turn, before, "nothing to compact");
            return ControlFlow::Continue(before);
        };
        let mut messages = self.messages[..split].to_vec();
        if let Some(last) = messages.last_mut() {
            last.content.push(Block::Text { text: COMPACT_ASK.into() });
        }
        let bytes = self.fixed_bytes + context::messages_bytes(&messages);
        let max_output = match self.output_room(bytes, COMPACT_OUTPUT_TOKENS) {
            Ok(room) => room,
            Err(stop) => return ControlFlow::Break(stop),
        };
        (self.events)(RunEvent::Request {
            turn,
            new_messages: vec![Message::user_text(COMPACT_ASK)],
            max_output_tokens: max_output,
            allow_tools: false,
        });
        let request = ModelRequest {
            system: self.system,
            messages: &messages,
            tools: &self.specs,
            max_output_tokens: max_output,
            allow_tools: false,
            revisions: &[],
        };
        let events = self.events;
        let stream = |u: StreamUpdate| events(RunEvent::Stream(u));
        let started = Instant::now();
        let response = match self.race(self.model.complete(request, &stream)).await? {
            Ok(response) => response,
            Err(e) => {
                tracing::warn!(turn, error = %e.message, "the compaction request failed");
                self.compact_failed = true;
                return ControlFlow::Continue(before);
            }
        };
        self.usage.add(response.usage);
        self.budget.calibrate(bytes, response.usage.input_tokens);
        events(RunEvent::Response {
            turn,
            response: response.clone(),
            elapsed_ms: started.elapsed().as_millis() as u64,
        });
        let summary = response.message.text();
        if summary.trim().is_empty() {
            tracing::warn!(turn, "the compaction request gave no summary");
            self.compact_failed = true;
            return ControlFlow::Continue(before);
        }
        for (id, _, _) in self.messages[1..split].iter().flat_map(|m| m.tool_calls()) {
            self.guard.forget(id);
        }
        let mut first = self.messages[0].clone();
        first.content.truncate(self.task_blocks);
        first.content.push(Block::Text { text: format!("{COMPACTED_HEADER}\n\n{}", summary.trim()) });
        if let Some(state) = self.tools.state() {
            first.content.push(Block::Text { text: state });
        }
        self.revisions.splice(..split, [crate::model::next_revision()]);
        self.sizes.splice(..split, [context::message_bytes(&first)]);
        self.messages.splice(..split, [first]);
        // The messages not reported yet are the newest, in the tail.
        self.sent = 1 + self.sent.saturating_sub(split);
        self.carried = 0.0;
        let after = self.estimate();
        self.context_edits += 1;
        tracing::info!(turn, replaced = split - 1, before, after, "older turns summarised to save context");
        events(RunEvent::ContextEdited {
            turn,
            edit: self.context_edits,
            change: ContextChange::Compacted { replaced: (split - 1) as u32, summary },
            tokens_before: before,
            tokens_after: after,
        });
        ControlFlow::Continue(after)
    }

    /// Sends the conversation as it is, reports the request and its
    /// response, and feeds the estimate what the provider measured.
    async fn send(&mut self) -> ControlFlow<Stop, Result<ModelResponse, ModelError>> {
        debug_assert_eq!(
            self.sizes,
            self.messages.iter().map(context::message_bytes).collect::<Vec<_>>(),
            "a message changed without `renew`"
        );
        // Capped so that the run cannot pass `maxTokens` (checked before).
        let bytes = self.request_bytes();
        let max_output = self.output_room(bytes, self.max_output).unwrap_or(MIN_OUTPUT_TOKENS.min(self.max_output));
        (self.events)(RunEvent::Request {
            turn: self.turns,
            new_messages: self.messages[self.sent..].to_vec(),
            max_output_tokens: max_output,
            allow_tools: true,
        });
        self.sent = self.messages.len();
        let request = ModelRequest {
            system: self.system,
            messages: &self.messages,
            tools: &self.specs,
            max_output_tokens: max_output,
            allow_tools: true,
            revisions: &self.revisions,
        };
        let stream = |u: StreamUpdate| (self.events)(RunEvent::Stream(u));
        let started = Instant::now();
        let result = self.race(self.model.complete(request, &stream)).await?;
        match &result {
            Ok(response) => {
                self.budget.calibrate(bytes, response.usage.input_tokens);
                let u = response.usage;
                if u.input_tokens > 0 {
                    let billed_input = u.billed().saturating_sub(u.output_tokens);
                    self.billed_share = (billed_input as f64 / u.input_tokens as f64).clamp(0.05, 1.5);
                }
                (self.events)(RunEvent::Response {
                    turn: self.turns,
                    response: response.clone(),
                    elapsed_ms: started.elapsed().as_millis() as u64,
                });
            }
            Err(e) if e.kind == ModelErrorKind::ContextTooLong => self.budget.refused(bytes, &e.message),
            Err(_) => {}
        }
        ControlFlow::Continue(result)
    }

    /// A response stopped because the context window filled up: it is
    /// dropped (a truncated turn is never acted on), the window it measured
    /// becomes the ceiling with room for a whole response, and the next
    /// request is sent once more after an edit.
    fn window_full(&mut self, response: &ModelResponse) -> ControlFlow<Stop> {
        self.window_retried = true;
        self.force_edit = true;
        let used = response.usage.input_tokens + response.usage.output_tokens;
        let room = used.saturating_sub(u64::from(self.max_output)).max(response.usage.input_tokens * 3 / 4);
        self.budget.lower(room);
        tracing::info!(
            ceiling = self.budget.ceiling(),
            "the context window filled up; editing the context and retrying once"
        );
        ControlFlow::Continue(())
    }

    /// A response cut at max_tokens: a cut-off tool call is dropped and the
    /// request retried once with more room; otherwise the run ends.
    fn cut_off(&mut self, response: ModelResponse) -> ControlFlow<Stop> {
        let cut_tool = matches!(response.message.content.last(), Some(Block::ToolUse { .. }));
        if cut_tool && !self.widened && self.max_output < MAX_OUTPUT_CEILING {
            self.widened = true;
            self.max_output = self.max_output.saturating_mul(2).min(MAX_OUTPUT_CEILING);
            tracing::info!(
                max_output = self.max_output,
                "a tool call was cut off at max_tokens; retrying with more room"
            );
            return ControlFlow::Continue(());
        }
        self.keep_summary(&response.message);
        ControlFlow::Break(Stop::MaxTokens)
    }

    /// The model's last non-blank text is the run's summary.
    fn keep_summary(&mut self, message: &Message) {
        let text = message.text();
        if !text.trim().is_empty() {
            self.summary = text;
        }
    }

    /// Runs every call of a tool turn concurrently, raced against the
    /// limits, and adds their results in one user message; a fatal result
    /// or the convergence guard ends the run.
    async fn tool_turn(&mut self, calls: Vec<ToolCall>) -> ControlFlow<Stop> {
        let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
        if self.tools.stops_before(&names) {
            return ControlFlow::Break(Stop::Forked);
        }
        (self.events)(RunEvent::ToolCalls {
            turn: self.turns,
            calls: calls.iter().map(|c| describe_call(&c.name, &c.input)).collect(),
        });
        let (tools, events, turn) = (self.tools, self.events, self.turns);
        let outputs = self.race(join_all(calls.iter().map(|c| run_call(tools, events, turn, c)))).await?;
        let fatal = outputs.iter().find(|o| o.fatal).map(|o| o.content.clone());
        let judged: Vec<(&str, &str, &ToolInput, &ToolOutput)> =
            calls.iter().zip(&outputs).map(|(c, o)| (c.id.as_str(), c.name.as_str(), &c.input, o)).collect();
        let stalled = self.guard.record(&judged);
        let content = calls
            .into_iter()
            .zip(outputs)
            .map(|(c, out)| Block::ToolResult { tool_use_id: c.id, content: out.content, is_error: out.is_error })
            .collect();
        self.push(Message { role: Role::User, content, raw: None });
        if let Some(e) = fatal {
            return ControlFlow::Break(Stop::ToolFatal(e));
        }
        if let Some(why) = stalled {
            return ControlFlow::Break(Stop::Stalled(why));
        }
        self.pauses = 0;
        ControlFlow::Continue(())
    }

    /// A turn without tool calls: a paused turn is continued (no new user
    /// message), anything else ends the run.
    fn text_turn_stop(&mut self, stop_reason: StopReason, empty: bool) -> ControlFlow<Stop> {
        ControlFlow::Break(match stop_reason {
            StopReason::PauseTurn if !empty => {
                self.pauses += 1;
                if self.pauses <= MAX_PAUSE_CONTINUATIONS {
                    return ControlFlow::Continue(());
                }
                Stop::PauseLimit
            }
            StopReason::EndTurn | StopReason::ToolUse | StopReason::PauseTurn => Stop::EndTurn,
            StopReason::StopSequence => Stop::StopSequence,
            StopReason::MaxTokens => Stop::MaxTokens,
            StopReason::Refusal { explanation } => Stop::Refusal { explanation },
            StopReason::ContextWindowExceeded => Stop::ContextWindowExceeded,
            StopReason::Other(s) => {
                tracing::warn!(stop_reason = %s, "ending the run on an unknown stop reason");
                Stop::Unknown(s)
            }
        })
    }

    /// The end of the run: a closing summary at a limit, then the outcome.
    async fn end(mut self, stop: Stop) -> Outcome {
        if stop.is_limit()
            && let Some(text) = self.closing_summary(&stop).await
        {
            self.summary = text;
        }
        tracing::info!(
            stop = stop.as_str(),
            turns = self.turns,
            input_tokens = self.usage.input_tokens,
            output_tokens = self.usage.output_tokens,
            context_edits = self.context_edits,
            "run ended"
        );
        Outcome { stop, turns: self.turns, usage: self.usage, summary: self.summary, messages: self.messages }
    }

    /// One last request without tools: what was done, what is left.
    async fn closing_summary(&mut self, stop: &Stop) -> Option<String> {
        // The summary request obeys both budgets too: skipped rather than
        // sent past them.
        if self.edit(0, false) > self.budget.ceiling()
            || self.output_room(self.request_bytes(), SUMMARY_OUTPUT_TOKENS) != Ok(SUMMARY_OUTPUT_TOKENS)
        {
            tracing::info!("no closing summary: it would not fit the budget");
            return None;
        }
        let ask = format!(
            "The run has to stop now: {}. Do not call any tools. In at most three sentences, say what you changed so far and what is left to do.",
            stop.describe(self.limits)
        );
        let sent = self.messages.len();
        match self.messages.last_mut() {
            Some(last) if last.role == Role::User => {
                last.content.push(Block::Text { text: ask });
                self.renew(sent - 1);
            }
            _ => self.push(Message::user_text(ask)),
        }
        let messages = &self.messages;
        let new = if sent > 0 { messages[sent - 1..].to_vec() } else { messages.clone() };
        let events = self.events;
        events(RunEvent::Request {
            turn: 0,
            new_messages: new,
            max_output_tokens: SUMMARY_OUTPUT_TOKENS,
            allow_tools: false,
        });
        let request = ModelRequest {
            system: self.system,
            messages,
            tools: &self.specs,
            max_output_tokens: SUMMARY_OUTPUT_TOKENS,
            allow_tools: false,
            revisions: &self.revisions,
        };
        let stream = |u: StreamUpdate| events(RunEvent::Stream(u));
        let started = Instant::now();
        let response = tokio::select! {
            biased;
            _ = self.cancel.cancelled() => return None,
            _ = tokio::time::sleep((self.limits.timeout / 4).clamp(SUMMARY_TIMEOUT.0, SUMMARY_TIMEOUT.1)) => return None,
            r = self.model.complete(request, &stream) => r.ok()?,
        };
        events(RunEvent::Response {
            turn: 0,
            response: response.clone(),
            elapsed_ms: started.elapsed().as_millis() as u64,
        });
        self.usage.add(response.usage);
        let text = response.message.text();
        self.push(response.message);
        (!text.trim().is_empty()).then_some(text)
    }
}

/// Runs one tool call (a malformed input gets its error result, the tool is
/// not called) and reports it.
async fn run_call(
    tools: &dyn ToolSet,
    events: &(dyn Fn(RunEvent) + Send + Sync),
    turn: u32,
    call: &ToolCall,
) -> ToolOutput {
    let started = Instant::now();
    let out = match &call.input {
        ToolInput::Object(map) => tools.call(&call.name, &Value::Object(map.clone())).await,
        ToolInput::Malformed { raw, error } => malformed_input(&call.name, raw, error),
    };
    let elapsed_ms = started.elapsed().as_millis() as u64;
    events(RunEvent::ToolResult {
        turn,
        id: call.id.clone(),
        name: call.name.clone(),
        input: call.input.clone(),
        output: out.clone(),
        elapsed_ms,
    });
    out
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
