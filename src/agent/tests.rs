//! Loop tests against a scripted in-process model and fake tools.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::*;
use crate::config::limits::CostLimit;
use crate::model::{ModelErrorKind, ModelResponse, ToolSpec};
use crate::tools::ToolOutput;

/// Replies in order and records every request's messages; a request without
/// tools takes its reply from `no_tools` first, when that has one.
struct Scripted {
    replies: Mutex<VecDeque<Result<ModelResponse, ModelError>>>,
    no_tools: Mutex<VecDeque<Result<ModelResponse, ModelError>>>,
    seen: Mutex<Vec<Vec<Message>>>,
    /// The revisions of each request's messages.
    revisions: Mutex<Vec<Vec<u64>>>,
    /// (max_output_tokens, allow_tools) of each request.
    shapes: Mutex<Vec<(u32, bool)>>,
    /// `count_tokens` answers bytes / 4 × this; `None`: no counting.
    count_factor: Option<f64>,
    counted: Mutex<u32>,
    /// Output the provider adds to every request (a thinking budget).
    thinking: u32,
}

impl Scripted {
    fn new(replies: Vec<Result<ModelResponse, ModelError>>) -> Self {
        Self {
            replies: Mutex::new(replies.into()),
            no_tools: Mutex::new(VecDeque::new()),
            seen: Mutex::new(Vec::new()),
            revisions: Mutex::new(Vec::new()),
            shapes: Mutex::new(Vec::new()),
            count_factor: None,
            counted: Mutex::new(0),
            thinking: 0,
        }
    }

    /// `replies`, and `no_tools` for the requests without tools.
    fn with_no_tools(
        replies: Vec<Result<ModelResponse, ModelError>>,
        no_tools: Vec<Result<ModelResponse, ModelError>>,
    ) -> Self {
        let model = Self::new(replies);
        *model.no_tools.lock().unwrap() = no_tools.into();
        model
    }
}

#[async_trait]
impl ModelClient for Scripted {
    async fn complete(
        &self,
        request: ModelRequest<'_>,
        _updates: &(dyn Fn(StreamUpdate) + Send + Sync),
    ) -> Result<ModelResponse, ModelError> {
        self.seen.lock().unwrap().push(request.messages.to_vec());
        self.revisions.lock().unwrap().push(request.revisions.to_vec());
        self.shapes.lock().unwrap().push((request.max_output_tokens, request.allow_tools));
        let summary = if request.allow_tools { None } else { self.no_tools.lock().unwrap().pop_front() };
        let next = summary.or_else(|| self.replies.lock().unwrap().pop_front());
        match next {
            Some(r) => r,
            // An exhausted script hangs, like a stalled network.
            None => futures::future::pending().await,
        }
    }

    async fn check(&self) -> Result<String, ModelError> {
        Ok("scripted".into())
    }

    fn output_ceiling(&self, requested: u32) -> u32 {
        requested + self.thinking
    }

    async fn count_tokens(&self, request: ModelRequest<'_>) -> Result<Option<u64>, ModelError> {
        let Some(factor) = self.count_factor else { return Ok(None) };
        *self.counted.lock().unwrap() += 1;
        let bytes = context::request_bytes(request.system, request.messages, request.tools);
        Ok(Some((bytes as f64 / 4.0 * factor) as u64))
    }
}

fn reply(content: Vec<Block>, stop: StopReason) -> Result<ModelResponse, ModelError> {
    Ok(ModelResponse {
        message: Message { role: Role::Assistant, content, raw: None },
        stop_reason: stop,
        usage: Usage { input_tokens: 100, output_tokens: 10, ..Default::default() },
    })
}

fn call(id: &str, name: &str, input: Value) -> Block {
    Block::ToolUse { id: id.into(), name: name.into(), input: input.into() }
}

fn text(t: &str) -> Block {
    Block::Text { text: t.into() }
}

/// `echo` answers its input; `fail` fails; `slow` takes 50 ms; `fatal` ends
/// the run; `edit` changes its `path`, which [`ToolSet::state`] reports.
struct FakeTools {
    log: Mutex<Vec<String>>,
    changed: Mutex<Vec<String>>,
}

#[async_trait]
impl ToolSet for FakeTools {
    fn specs(&self) -> Vec<ToolSpec> {
        vec![ToolSpec { name: "echo".into(), description: "d".into(), input_schema: json!({"type": "object"}) }]
    }
    async fn call(&self, name: &str, input: &Value) -> ToolOutput {
        self.log.lock().unwrap().push(format!("start {name}"));
        let out = match name {
            "echo" => ToolOutput { content: input.to_string(), is_error: false, fatal: false },
            "slow" => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                ToolOutput { content: "slow done".into(), is_error: false, fatal: false }
            }
            "fatal" => ToolOutput { content: "disk on fire".into(), is_error: true, fatal: true },
            "edit" => {
                self.changed.lock().unwrap().push(input["path"].as_str().unwrap_or_default().to_string());
                ToolOutput { content: "edited".into(), is_error: false, fatal: false }
            }
            // `bytes` bytes (default 4000) after the input: a file's worth of output.
            "big" => {
                let n = input["bytes"].as_u64().unwrap_or(4000) as usize;
                ToolOutput { content: format!("{input}{}", "y".repeat(n)), is_error: false, fatal: false }
            }
            _ => ToolOutput { content: format!("no tool {name}"), is_error: true, fatal: false },
        };
        self.log.lock().unwrap().push(format!("end {name}"));
        out
    }

    fn state(&self) -> Option<String> {
        let changed = self.changed.lock().unwrap();
        (!changed.is_empty()).then(|| format!("Files changed so far: {}", changed.join(", ")))
    }
}

fn tools() -> FakeTools {
    FakeTools { log: Mutex::new(Vec::new()), changed: Mutex::new(Vec::new()) }
}

const LIMITS: Limits = Limits {
    max_turns: 10,
    max_tokens: 1_000_000,
    max_output_tokens: 1000,
    context_budget: 1_000_000,
    context_editing: crate::config::limits::ContextEditing::Economy,
    timeout: Duration::from_secs(60),
    max_cost: None,
};

async fn go(model: &Scripted, tools: &FakeTools, limits: Limits) -> (Outcome, Vec<RunEvent>) {
    let events = Mutex::new(Vec::new());
    let out = run("sys", vec![Message::user_text("fix it")], model, tools, &limits, &CancellationToken::new(), &|e| {
        events.lock().unwrap().push(e)
    })
    .await;
    (out, events.into_inner().unwrap())
}

#[tokio::test]
async fn two_calls_in_one_turn_run_concurrently_and_results_match_by_id() {
    let model = Scripted::new(vec![
        reply(
            vec![
                text("Looking."),
                call("toolu_b", "slow", json!({})),
                call("toolu_a", "echo", json!({"path": "x.py"})),
            ],
            StopReason::ToolUse,
        ),
        reply(vec![text("Done: fixed.")], StopReason::EndTurn),
    ]);
    let t = tools();
    let (out, events) = go(&model, &t, LIMITS).await;
    assert_eq!(out.stop, Stop::EndTurn);
    assert_eq!(out.turns, 2);
    assert_eq!(out.summary, "Done: fixed.");
    assert_eq!(out.usage, Usage { input_tokens: 200, output_tokens: 20, ..Default::default() });
    // Both started before either ended: concurrent.
    assert_eq!(&t.log.lock().unwrap()[..2], ["start slow", "start echo"]);
    let seen = model.seen.lock().unwrap();
    let second = &seen[1];
    assert_eq!(second.len(), 3);
    assert_eq!(second[1].role, Role::Assistant);
    assert_eq!(
        second[2].content,
        vec![
            Block::ToolResult { tool_use_id: "toolu_b".into(), content: "slow done".into(), is_error: false },
            Block::ToolResult { tool_use_id: "toolu_a".into(), content: r#"{"path":"x.py"}"#.into(), is_error: false },
        ]
    );
    let calls: Vec<&RunEvent> = events.iter().filter(|e| matches!(e, RunEvent::ToolCalls { .. })).collect();
    assert_eq!(calls, vec![&RunEvent::ToolCalls { turn: 1, calls: vec!["slow".into(), "echo x.py".into()] }]);
    let results: Vec<(&str, &str)> = events
        .iter()
        .filter_map(|e| match e {
            RunEvent::ToolResult { id, name, .. } => Some((id.as_str(), name.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 2);
    assert!(results.contains(&("toolu_b", "slow")) && results.contains(&("toolu_a", "echo")));
}

#[tokio::test]
async fn tool_errors_are_fed_back_not_fatal() {
    let model = Scripted::new(vec![
        reply(vec![call("t1", "nope", json!({}))], StopReason::ToolUse),
        reply(vec![text("ok")], StopReason::EndTurn),
    ]);
    let (out, _) = go(&model, &tools(), LIMITS).await;
    assert_eq!(out.stop, Stop::EndTurn);
    let seen = model.seen.lock().unwrap();
    assert_eq!(
        seen[1][2].content,
        vec![Block::ToolResult { tool_use_id: "t1".into(), content: "no tool nope".into(), is_error: true }]
    );
}

#[tokio::test]
async fn max_turns_stops_a_model_that_never_ends() {
    let replies =
        (0..10).map(|i| reply(vec![call(&format!("t{i}"), "echo", json!({}))], StopReason::ToolUse)).collect();
    let model = Scripted::new(replies);
    let (out, _) = go(&model, &tools(), Limits { max_turns: 3, ..LIMITS }).await;
    assert_eq!(out.stop, Stop::MaxTurns);
    assert_eq!(out.turns, 3);
    // Three turns, then the closing summary request without tools.
    assert_eq!(*model.shapes.lock().unwrap(), vec![(1000, true), (1000, true), (1000, true), (1024, false)]);
    let seen = model.seen.lock().unwrap();
    let last_user = seen[3].last().unwrap();
    // The last turn's calls were answered, then the summary question follows the results.
    assert!(matches!(last_user.content[0], Block::ToolResult { .. }));
    assert!(
        matches!(&last_user.content[1], Block::Text { text } if text.contains("the run reached maxTurns (3)") && text.contains("Do not call any tools"))
    );
}

#[tokio::test]
async fn token_budget_stops_the_run() {
    let replies =
        (0..10).map(|i| reply(vec![call(&format!("t{i}"), "echo", json!({}))], StopReason::ToolUse)).collect();
    let model = Scripted::new(replies);
    let (out, _) = go(&model, &tools(), Limits { max_tokens: 700, ..LIMITS }).await;
    assert_eq!(out.stop, Stop::TokenBudget);
    // maxTokens is a hard bound: a request that could pass it is not sent,
    // the others ask for no more output than is left, and the closing
    // summary, which would not fit, is skipped.
    assert!(out.usage.billed() <= 700, "{:?}", out.usage);
    assert!(out.turns >= 2, "{}", out.turns);
    let shapes = model.shapes.lock().unwrap().clone();
    assert_eq!(shapes.len() as u32, out.turns, "no summary request: {shapes:?}");
    assert!(shapes.iter().all(|&(max_output, tools)| tools && max_output <= 1000), "{shapes:?}");
    assert!(shapes.last().unwrap().0 < 1000, "the last request is capped to what is left: {shapes:?}");
}

#[tokio::test]
async fn the_run_budget_counts_cache_reads_at_a_tenth() {
    // Mostly cached prompts: 1,000 prompt tokens of which 900 read from the
    // cache bill 190 (+10 output), so a budget that naive counting would
    // exhaust in two turns lasts for many.
    let cached = |i: u32| {
        Ok(ModelResponse {
            message: Message {
                role: Role::Assistant,
                content: vec![call(&format!("t{i}"), "echo", json!({"path": format!("f{i}.py")}))],
                raw: None,
            },
            stop_reason: StopReason::ToolUse,
            usage: Usage { input_tokens: 1000, output_tokens: 10, cache_read_tokens: 900, ..Default::default() },
        })
    };
    let model = Scripted::new((0..6).map(cached).collect());
    let (out, _) = go(&model, &tools(), Limits { max_tokens: 1300, max_output_tokens: 300, ..LIMITS }).await;
    assert_eq!(out.stop, Stop::TokenBudget);
    assert!(out.turns >= 4, "{} turns", out.turns);
    assert!(out.usage.billed() <= 1300 && out.usage.total() > 2 * 1300, "{:?}", out.usage);
}

#[tokio::test]
async fn tool_turn_is_detected_by_calls_even_with_end_turn() {
    let model = Scripted::new(vec![
        reply(vec![call("t1", "echo", json!({}))], StopReason::EndTurn),
        reply(vec![text("done")], StopReason::EndTurn),
    ]);
    let (out, _) = go(&model, &tools(), LIMITS).await;
    assert_eq!(out.turns, 2);
}

#[tokio::test]
async fn pause_turn_continues_without_a_user_message() {
    let model = Scripted::new(vec![
        reply(vec![text("searching")], StopReason::PauseTurn),
        reply(vec![text("done")], StopReason::EndTurn),
    ]);
    let (out, _) = go(&model, &tools(), LIMITS).await;
    assert_eq!(out.stop, Stop::EndTurn);
    let seen = model.seen.lock().unwrap();
    assert_eq!(seen[1].len(), 2);
    assert_eq!(seen[1][1].role, Role::Assistant);
}

#[tokio::test]
async fn other_stop_reasons_end_the_run() {
    for (reason, want) in [
        (StopReason::MaxTokens, Stop::MaxTokens),
        (StopReason::Refusal { explanation: Some("no".into()) }, Stop::Refusal { explanation: Some("no".into()) }),
        (StopReason::Other("new".into()), Stop::Unknown("new".into())),
        (StopReason::StopSequence, Stop::StopSequence),
    ] {
        let model = Scripted::new(vec![reply(vec![text("x")], reason)]);
        assert_eq!(go(&model, &tools(), LIMITS).await.0.stop, want);
    }
}

#[tokio::test]
async fn model_errors_and_fatal_tools_end_the_run() {
    let err = ModelError::new(ModelErrorKind::Auth, Some(401), "bad key");
    let model = Scripted::new(vec![Err(err.clone())]);
    assert_eq!(go(&model, &tools(), LIMITS).await.0.stop, Stop::ModelError(err));
    let model = Scripted::new(vec![reply(vec![call("t", "fatal", json!({}))], StopReason::ToolUse)]);
    assert_eq!(go(&model, &tools(), LIMITS).await.0.stop, Stop::ToolFatal("disk on fire".into()));
}

#[tokio::test]
async fn cancel_interrupts_a_pending_request() {
    let model = Scripted::new(vec![]);
    let cancel = CancellationToken::new();
    let c2 = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        c2.cancel();
    });
    let t = tools();
    let out = tokio::time::timeout(
        Duration::from_secs(5),
        run("s", vec![Message::user_text("p")], &model, &t, &LIMITS, &cancel, &|_| {}),
    )
    .await
    .expect("cancel must end the run");
    assert_eq!(out.stop, Stop::Cancelled);
}

#[test]
fn calls_are_described_by_their_main_argument() {
    assert_eq!(describe_call("read_file", &json!({"path": "calc.py"}).into()), "read_file calc.py");
    assert_eq!(describe_call("grep", &json!({"pattern": "def"}).into()), "grep def");
    assert_eq!(describe_call("list_files", &json!({}).into()), "list_files");
}

#[tokio::test]
async fn a_limit_ends_with_the_models_summary() {
    let model = Scripted::new(vec![
        reply(vec![call("t0", "echo", json!({"n": 0}))], StopReason::ToolUse),
        reply(vec![text("I read the file; the fix is still to do.")], StopReason::EndTurn),
    ]);
    let (out, _) = go(&model, &tools(), Limits { max_turns: 1, ..LIMITS }).await;
    assert_eq!(out.stop, Stop::MaxTurns);
    assert_eq!(out.summary, "I read the file; the fix is still to do.");
}

#[tokio::test(start_paused = true)]
async fn the_wall_clock_limit_stops_a_hanging_model() {
    let model = Scripted::new(vec![]);
    let (out, _) = go(&model, &tools(), Limits { timeout: Duration::from_secs(5), ..LIMITS }).await;
    assert_eq!(out.stop, Stop::Timeout);
}

#[tokio::test]
async fn the_same_failing_call_three_times_stalls_the_run() {
    let replies =
        (0..10).map(|i| reply(vec![call(&format!("t{i}"), "nope", json!({"x": 1}))], StopReason::ToolUse)).collect();
    let model = Scripted::new(replies);
    let (out, _) = go(&model, &tools(), LIMITS).await;
    assert_eq!(out.stop, Stop::Stalled("`nope` failed 3 times in a row with the same input: no tool nope".into()));
    assert_eq!(out.turns, 3);
}

#[tokio::test]
async fn turns_without_new_information_stall_the_run() {
    let replies = (0..10)
        .map(|i| reply(vec![call(&format!("t{i}"), "echo", json!({"same": true}))], StopReason::ToolUse))
        .collect();
    let model = Scripted::new(replies);
    let (out, _) = go(&model, &tools(), LIMITS).await;
    assert_eq!(out.stop, Stop::Stalled("4 tool turns in a row brought nothing new".into()));
    // The first turn was new; four repeats followed.
    assert_eq!(out.turns, 5);
}

#[tokio::test]
async fn a_tool_call_cut_at_max_tokens_is_retried_once_with_more_room() {
    let cut = || {
        reply(vec![text("Editing."), call("t1", "echo", Value::String("{\"path\": \"a".into()))], StopReason::MaxTokens)
    };
    let model = Scripted::new(vec![cut(), reply(vec![text("done")], StopReason::EndTurn)]);
    let (out, _) = go(&model, &tools(), LIMITS).await;
    assert_eq!(out.stop, Stop::EndTurn);
    assert_eq!(*model.shapes.lock().unwrap(), vec![(1000, true), (2000, true)]);
    // The cut-off turn was dropped, not echoed.
    assert_eq!(model.seen.lock().unwrap()[1].len(), 1);
    let model = Scripted::new(vec![cut(), cut()]);
    let (out, _) = go(&model, &tools(), LIMITS).await;
    assert_eq!(out.stop, Stop::MaxTokens);
}

#[tokio::test]
async fn malformed_tool_input_is_a_tool_error_without_calling_the_tool() {
    let model = Scripted::new(vec![
        reply(vec![call("t1", "echo", Value::String("{oops".into()))], StopReason::ToolUse),
        reply(vec![text("ok")], StopReason::EndTurn),
    ]);
    let t = tools();
    let (out, _) = go(&model, &t, LIMITS).await;
    assert_eq!(out.stop, Stop::EndTurn);
    assert!(t.log.lock().unwrap().is_empty());
    let seen = model.seen.lock().unwrap();
    assert!(
        matches!(&seen[1][2].content[0], Block::ToolResult { is_error: true, content, .. } if content.starts_with("the input of `echo` was not a JSON object: {oops"))
    );
}

#[tokio::test]
async fn the_malformed_variant_gets_the_error_result_and_is_reported_as_it_came() {
    let malformed = ToolInput::Malformed { raw: "{\"path\": 1,".into(), error: "EOF while parsing".into() };
    let model = Scripted::new(vec![
        reply(
            vec![
                Block::ToolUse { id: "t1".into(), name: "echo".into(), input: malformed.clone() },
                call("t2", "echo", json!({"path": "a"})),
            ],
            StopReason::ToolUse,
        ),
        reply(vec![text("ok")], StopReason::EndTurn),
    ]);
    let t = tools();
    let (out, events) = go(&model, &t, LIMITS).await;
    assert_eq!(out.stop, Stop::EndTurn);
    assert_eq!(*t.log.lock().unwrap(), vec!["start echo", "end echo"], "only the well-formed call ran");
    let seen = model.seen.lock().unwrap();
    assert_eq!(
        seen[1][2].content[0],
        Block::ToolResult {
            tool_use_id: "t1".into(),
            content: "the input of `echo` was not a JSON object: {\"path\": 1,. Call the tool again with a JSON object that matches its schema.".into(),
            is_error: true,
        }
    );
    assert_eq!(
        seen[1][2].content[1],
        Block::ToolResult { tool_use_id: "t2".into(), content: r#"{"path":"a"}"#.into(), is_error: false }
    );
    let reported = events.iter().find_map(|e| match e {
        RunEvent::ToolResult { id, input, .. } if id == "t1" => Some(input.clone()),
        _ => None,
    });
    assert_eq!(reported, Some(malformed));
}

/// A reply that reports `input_tokens` prompt tokens (0: none, the estimate
/// stays at bytes / 4).
fn reply_with(content: Vec<Block>, stop: StopReason, input_tokens: u64) -> Result<ModelResponse, ModelError> {
    Ok(ModelResponse {
        message: Message { role: Role::Assistant, content, raw: None },
        stop_reason: stop,
        usage: Usage { input_tokens, output_tokens: 10, ..Default::default() },
    })
}

/// `n` tool turns, each calling `big` on its own file with `bytes` of output.
fn big_turns(n: usize, bytes: u64) -> Vec<Result<ModelResponse, ModelError>> {
    (0..n)
        .map(|i| {
            let input = json!({"path": format!("m{i:02}.py"), "bytes": bytes});
            reply_with(vec![call(&format!("t{i}"), "big", input)], StopReason::ToolUse, 0)
        })
        .collect()
}

/// The estimate of each request the model saw, at bytes / 4.
fn seen_estimates(model: &Scripted) -> Vec<u64> {
    let specs = tools().specs();
    model.seen.lock().unwrap().iter().map(|m| context::request_bytes("sys", m, &specs).div_ceil(4)).collect()
}

fn edits(events: &[RunEvent]) -> Vec<(u32, u32)> {
    events
        .iter()
        .filter_map(|e| match e {
            RunEvent::ContextEdited { turn, change: ContextChange::Stubbed { tool_use_ids, .. }, .. } => {
                Some((*turn, tool_use_ids.len() as u32))
            }
            _ => None,
        })
        .collect()
}

/// Every tool_use of an assistant message is answered, in order, by the
/// next message.
fn assert_pairs_valid(messages: &[Message]) {
    for (i, m) in messages.iter().enumerate() {
        let ids: Vec<&str> = m.tool_calls().map(|(id, _, _)| id).collect();
        if ids.is_empty() {
            continue;
        }
        let answered: Vec<&str> = messages[i + 1]
            .content
            .iter()
            .filter_map(|b| match b {
                Block::ToolResult { tool_use_id, .. } => Some(tool_use_id.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(ids, answered, "message {i}");
    }
}

fn result_content<'a>(messages: &'a [Message], id: &str) -> &'a str {
    messages
        .iter()
        .flat_map(|m| &m.content)
        .find_map(|b| match b {
            Block::ToolResult { tool_use_id, content, .. } if tool_use_id == id => Some(content.as_str()),
            _ => None,
        })
        .unwrap()
}

#[test]
fn stubs_keep_every_pair_and_the_newest_results_whole() {
    let mut messages = vec![Message::user_text("fix it")];
    for i in 0..5 {
        messages.push(Message {
            role: Role::Assistant,
            content: vec![
                text("Reading."),
                call(&format!("t{i}"), "read_file", json!({"path": format!("src/m{i}.py")})),
            ],
            raw: Some(json!({"opaque": i})),
        });
        messages.push(Message {
            role: Role::User,
            content: vec![Block::ToolResult {
                tool_use_id: format!("t{i}"),
                content: "x".repeat(500),
                is_error: i == 1,
            }],
            raw: None,
        });
    }
    let before = messages.clone();
    let budget = context::Budget::new(100_000);
    let stubbed = context::stub_stale(&mut messages, &budget);
    assert_eq!(stubbed.iter().map(|s| s.tool_use_id.as_str()).collect::<Vec<_>>(), ["t0", "t1"]);
    assert_eq!(stubbed[0].content, "x".repeat(500), "what was replaced is returned");
    assert_pairs_valid(&messages);
    assert_eq!(messages.len(), before.len());
    assert_eq!(
        messages[2].content,
        vec![Block::ToolResult {
            tool_use_id: "t0".into(),
            content: "[read_file src/m0.py: output removed to save context; call the tool again if you need it]".into(),
            is_error: false,
        }]
    );
    assert!(
        matches!(&messages[4].content[0], Block::ToolResult { is_error: true, content, .. } if content.starts_with("[read_file src/m1.py: output removed"))
    );
    // The newest three results and every other message are untouched.
    for (i, (now, was)) in messages.iter().zip(&before).enumerate() {
        if i != 2 && i != 4 {
            assert_eq!(now, was, "message {i}");
        }
    }
    // Already stubbed: a second edit changes nothing.
    assert!(context::stub_stale(&mut messages, &budget).is_empty());
    // Fewer result messages than kept: nothing to do.
    assert!(context::stub_stale(&mut before[..5].to_vec(), &budget).is_empty());
}

#[test]
fn the_estimate_is_bytes_over_four_recalibrated_by_reported_usage() {
    let mut b = context::Budget::new(100_000);
    assert_eq!((b.estimate(4000), b.ceiling(), b.edit_threshold()), (1000, 100_000, 80_000));
    // The previous request of 4000 bytes was 1500 tokens.
    b.calibrate(4000, 1500);
    assert_eq!(b.estimate(8000), 3000);
    // Nothing reported: the ratio stays.
    b.calibrate(8000, 0);
    assert_eq!(b.estimate(8000), 3000);
    // A refusal measures the window (Anthropic's and OpenAI's wording) and the prompt.
    b.refused(
        100_000,
        "Anthropic API 400: the conversation no longer fits: prompt is too long: 61000 tokens > 60000 maximum",
    );
    assert_eq!((b.ceiling(), b.estimate(100_000)), (60_000, 61_000));
    b.refused(
        100_000,
        "OpenAI API 400: x: This model's maximum context length is 50,000 tokens. However, your messages resulted in 52,000 tokens.",
    );
    assert_eq!((b.ceiling(), b.estimate(100_000)), (50_000, 52_000));
    // Without numbers, the refused request's estimate is the ceiling.
    let mut b = context::Budget::new(100_000);
    b.refused(40_000, "Anthropic API 400: prompt is too long");
    assert_eq!(b.ceiling(), 9_999);
    // The ceiling is never above contextBudget.
    let mut b = context::Budget::new(30_000);
    b.lower(60_000);
    assert_eq!(b.ceiling(), 30_000);
}

#[tokio::test]
async fn older_tool_outputs_are_stubbed_in_batches_near_the_budget() {
    // 1 KB (250 tokens) per result, budget 5000: the first edit comes past 4000.
    let mut replies = big_turns(36, 1000);
    replies.push(reply(vec![text("done")], StopReason::EndTurn));
    let model = Scripted::new(replies);
    let limits = Limits { max_turns: 40, context_budget: 5000, ..LIMITS };
    let (out, events) = go(&model, &tools(), limits).await;
    assert_eq!(out.stop, Stop::EndTurn);
    assert_eq!(out.turns, 37);
    let edits = edits(&events);
    assert_eq!(edits.len(), 3, "{edits:?}");
    // Each edit stubs a batch: everything but the newest three results.
    assert!(edits.iter().all(|&(_, stubbed)| stubbed >= 10), "{edits:?}");
    assert!(edits.windows(2).all(|w| w[1].0 - w[0].0 >= 10), "the cached prefix is rebuilt rarely: {edits:?}");
    let estimates = seen_estimates(&model);
    assert!(estimates.iter().all(|&e| e <= 5000), "{estimates:?}");
    let last = model.seen.lock().unwrap().last().unwrap().clone();
    assert_pairs_valid(&last);
    assert!(result_content(&last, "t0").starts_with("[big m00.py: output removed to save context"));
    for id in ["t33", "t34", "t35"] {
        assert!(result_content(&last, id).ends_with(&"y".repeat(1000)), "{id} is kept whole");
    }
    // The edit is reported before the request it shrank.
    let edit_at = events.iter().position(|e| matches!(e, RunEvent::ContextEdited { .. })).unwrap();
    assert!(matches!(&events[edit_at + 1], RunEvent::Request { turn, .. } if *turn == edits[0].0));
}

#[tokio::test]
async fn a_request_over_the_budget_is_never_sent() {
    // 1000 tokens per result, budget 2500: three kept results no longer fit.
    let model = Scripted::new(big_turns(10, 4000));
    let limits = Limits { context_budget: 2500, ..LIMITS };
    let (out, events) = go(&model, &tools(), limits).await;
    let Stop::ContextBudget { estimate, ceiling } = out.stop else { panic!("{:?}", out.stop) };
    assert!(estimate > 2500 && ceiling == 2500, "{estimate} {ceiling}");
    assert_eq!(out.stop.as_str(), "context_budget");
    assert!(out.stop.describe(&limits).contains("contextBudget 2500"), "{}", out.stop.describe(&limits));
    assert_eq!(out.turns, 3);
    let estimates = seen_estimates(&model);
    assert_eq!(estimates.len(), 3, "no closing summary request either");
    assert!(estimates.iter().all(|&e| e <= 2500), "{estimates:?}");
    assert!(edits(&events).is_empty(), "nothing older than the newest three to stub");
}

fn too_long() -> Result<ModelResponse, ModelError> {
    Err(ModelError::new(
        ModelErrorKind::ContextTooLong,
        Some(400),
        "Anthropic API 400: the conversation no longer fits the model's context window: prompt is too long: 6000 tokens > 5000 maximum",
    ))
}

#[tokio::test]
async fn prompt_too_long_edits_the_context_and_retries_once() {
    let mut replies = big_turns(5, 4000);
    replies.push(too_long());
    replies.push(reply(vec![text("done")], StopReason::EndTurn));
    let model = Scripted::new(replies);
    let (out, events) = go(&model, &tools(), LIMITS).await;
    assert_eq!(out.stop, Stop::EndTurn);
    assert_eq!(out.turns, 6, "the retry is the same turn");
    assert_eq!(edits(&events), vec![(6, 2)], "below 80 % of contextBudget, edited anyway");
    let seen = model.seen.lock().unwrap();
    assert_eq!(seen.len(), 7);
    assert_eq!(seen[5].len(), seen[6].len());
    assert_pairs_valid(&seen[6]);
    assert!(result_content(&seen[5], "t0").ends_with("yyy"));
    assert!(result_content(&seen[6], "t0").starts_with("[big m00.py: output removed"));
    assert!(result_content(&seen[6], "t2").ends_with("yyy"));
}

#[tokio::test]
async fn prompt_too_long_twice_is_a_model_error() {
    let mut replies = big_turns(5, 4000);
    replies.push(too_long());
    replies.push(too_long());
    let model = Scripted::new(replies);
    let (out, _) = go(&model, &tools(), LIMITS).await;
    assert!(matches!(&out.stop, Stop::ModelError(e) if e.kind == ModelErrorKind::ContextTooLong), "{:?}", out.stop);
    assert_eq!(model.seen.lock().unwrap().len(), 7, "one retry, no more");
}

#[tokio::test]
async fn a_full_context_window_drops_the_turn_edits_and_retries_once() {
    let mut replies = big_turns(5, 4000);
    replies.push(reply_with(vec![text("Half an ans")], StopReason::ContextWindowExceeded, 5000));
    replies.push(reply(vec![text("done")], StopReason::EndTurn));
    let model = Scripted::new(replies);
    let (out, events) = go(&model, &tools(), LIMITS).await;
    assert_eq!(out.stop, Stop::EndTurn);
    assert_eq!(edits(&events).len(), 1);
    let seen = model.seen.lock().unwrap().clone();
    assert_eq!(seen[6].len(), seen[5].len(), "the cut-off turn is not echoed");
    assert!(result_content(&seen[6], "t1").starts_with("[big m01.py: output removed"));
    // Twice in a row: the run ends as before.
    let mut replies = big_turns(5, 4000);
    replies.push(reply_with(vec![text("Half")], StopReason::ContextWindowExceeded, 5000));
    replies.push(reply_with(vec![text("Half")], StopReason::ContextWindowExceeded, 5000));
    let model = Scripted::new(replies);
    assert_eq!(go(&model, &tools(), LIMITS).await.0.stop, Stop::ContextWindowExceeded);
}

/// The economy edits of a run: (turn, reason, outputs stubbed).
fn stub_edits(events: &[RunEvent]) -> Vec<(u32, StubReason, usize)> {
    events
        .iter()
        .filter_map(|e| match e {
            RunEvent::ContextEdited { turn, change: ContextChange::Stubbed { reason, tool_use_ids }, .. } => {
                Some((*turn, *reason, tool_use_ids.len()))
            }
            _ => None,
        })
        .collect()
}

/// How many tool outputs of `messages` are whole (not stubbed).
fn whole_outputs(messages: &[Message]) -> usize {
    messages
        .iter()
        .flat_map(|m| &m.content)
        .filter(
            |b| matches!(b, Block::ToolResult { content, .. } if !content.contains("output removed to save context")),
        )
        .count()
}

#[test]
fn the_newest_results_are_kept_whole_while_they_are_small() {
    let result = |id: &str, bytes: usize| Message {
        role: Role::User,
        content: vec![Block::ToolResult { tool_use_id: id.into(), content: "z".repeat(bytes), is_error: false }],
        raw: None,
    };
    let asking = |id: &str| Message { role: Role::Assistant, content: vec![call(id, "big", json!({}))], raw: None };
    let budget = context::Budget::new(1_000_000);
    // Small results: the newest three.
    let mut messages = vec![Message::user_text("fix it")];
    for i in 0..5 {
        messages.push(asking(&format!("t{i}")));
        messages.push(result(&format!("t{i}"), 2_000));
    }
    assert_eq!(context::kept_from(&messages, &budget), 6);
    // A large newest result keeps only itself; older ones are kept while
    // the kept outputs stay within 8,000 tokens.
    messages.push(asking("t5"));
    messages.push(result("t5", 30_000));
    assert_eq!(context::kept_from(&messages, &budget), 12);
    messages.push(asking("t6"));
    messages.push(result("t6", 4_000));
    assert_eq!(context::kept_from(&messages, &budget), 14, "t5 would pass 8,000 tokens");
    // The stale outputs, what an edit saves and what it makes the cache write again.
    let sizes: Vec<u64> = messages.iter().map(context::message_bytes).collect();
    let stale = context::stale(&messages, &sizes, &budget).unwrap();
    assert_eq!(stale.results, 6);
    assert!(stale.saved > 30_000 / 4 && stale.saved < 42_000 / 4, "{stale:?}");
    assert!(stale.rewrite < 200, "only stubs and small messages follow the first: {stale:?}");
    assert!(!stale.worth_editing(0.0) && stale.worth_editing(1.25 * stale.rewrite as f64));
}

#[tokio::test]
async fn a_revision_names_one_message_and_unchanged_messages_keep_theirs() {
    // Stubbing and compaction both change messages: a revision seen twice
    // must be the same message, and a message sent again unchanged keeps
    // its revision, so providers can send again what they encoded.
    let mut replies = big_turns(8, 40_000);
    replies.push(reply_with(vec![text("done")], StopReason::EndTurn, 0));
    let model = Scripted::new(replies);
    let (out, events) = go(&model, &tools(), Limits { max_turns: 20, ..LIMITS }).await;
    assert_eq!(out.stop, Stop::EndTurn);
    assert!(!stub_edits(&events).is_empty(), "the run edits its context");
    let seen = model.seen.lock().unwrap().clone();
    let revisions = model.revisions.lock().unwrap().clone();
    let mut named: std::collections::HashMap<u64, Message> = std::collections::HashMap::new();
    let mut reused = 0;
    for (messages, revisions) in seen.iter().zip(&revisions) {
        assert_eq!(messages.len(), revisions.len(), "one revision per message");
        for (m, r) in messages.iter().zip(revisions) {
            match named.get(r) {
                Some(before) => {
                    assert_eq!(before, m, "revision {r} was given to a changed message");
                    reused += 1;
                }
                None => {
                    named.insert(*r, m.clone());
                }
            }
        }
    }
    for pair in seen.windows(2).zip(revisions.windows(2)) {
        let ((a, b), (ra, rb)) = ((&pair.0[0], &pair.0[1]), (&pair.1[0], &pair.1[1]));
        for i in 0..a.len().min(b.len()) {
            if a[i] == b[i] {
                assert_eq!(ra[i], rb[i], "message {i} did not change but got a new revision");
            }
        }
    }
    assert!(reused > seen.len(), "unchanged messages are sent with their revisions: {reused}");
}

#[tokio::test]
async fn large_stale_outputs_are_stubbed_for_economy_long_before_the_budget() {
    // 40 KB (10K tokens) per result, budget 1M: never near it.
    let mut replies = big_turns(8, 40_000);
    replies.push(reply_with(vec![text("done")], StopReason::EndTurn, 0));
    let model = Scripted::new(replies);
    let (out, events) = go(&model, &tools(), Limits { max_turns: 20, ..LIMITS }).await;
    assert_eq!(out.stop, Stop::EndTurn);
    let edits = stub_edits(&events);
    assert!(edits.len() >= 3, "{edits:?}");
    assert!(edits.iter().all(|&(_, reason, _)| reason == StubReason::Economy), "{edits:?}");
    let seen = model.seen.lock().unwrap().clone();
    // A stale output is carried until carrying it has cost a cache
    // rewrite (one request here), never longer.
    assert!(
        seen.iter().all(|m| whole_outputs(m) <= 2),
        "{:?}",
        seen.iter().map(|m| whole_outputs(m)).collect::<Vec<_>>()
    );
    let last = seen.last().unwrap();
    assert_pairs_valid(last);
    assert!(result_content(last, "t7").ends_with(&"y".repeat(40_000)), "the newest is whole");
    assert!(result_content(last, "t0").starts_with("[big m00.py: output removed"));
    // `contextEditing: budget`: only near the budget, so here never.
    let mut replies = big_turns(8, 40_000);
    replies.push(reply_with(vec![text("done")], StopReason::EndTurn, 0));
    let model = Scripted::new(replies);
    let limits = Limits { max_turns: 20, context_editing: ContextEditing::Budget, ..LIMITS };
    let (out, events) = go(&model, &tools(), limits).await;
    assert_eq!((out.stop, stub_edits(&events).len()), (Stop::EndTurn, 0));
    assert_eq!(whole_outputs(model.seen.lock().unwrap().last().unwrap()), 8);
}

#[tokio::test]
async fn re_reading_a_stubbed_output_is_not_a_stall() {
    // Alternating reads of two large files: each read of a file whose
    // output was stubbed brings it back, which is new information.
    let mut replies: Vec<_> = (0..10)
        .map(|i| {
            let input = json!({"path": if i % 2 == 0 { "a.py" } else { "b.py" }, "bytes": 40_000});
            reply_with(vec![call(&format!("t{i}"), "big", input)], StopReason::ToolUse, 0)
        })
        .collect();
    replies.push(reply_with(vec![text("done")], StopReason::EndTurn, 0));
    let model = Scripted::new(replies);
    let (out, events) = go(&model, &tools(), Limits { max_turns: 20, ..LIMITS }).await;
    assert_eq!(out.stop, Stop::EndTurn, "{:?}", out.stop);
    assert!(!stub_edits(&events).is_empty());
    // Without edits, the same reads are a circle.
    let replies: Vec<_> = (0..10)
        .map(|i| {
            let input = json!({"path": if i % 2 == 0 { "a.py" } else { "b.py" }, "bytes": 100});
            reply_with(vec![call(&format!("t{i}"), "big", input)], StopReason::ToolUse, 0)
        })
        .collect();
    let model = Scripted::new(replies);
    let (out, _) = go(&model, &tools(), Limits { max_turns: 20, ..LIMITS }).await;
    assert!(matches!(out.stop, Stop::Stalled(_)), "{:?}", out.stop);
}

/// `n` turns of long reasoning text (nothing to stub) and a small call
/// each; the first call edits `calc.py`.
fn talkative_turns(n: usize, text_bytes: usize) -> Vec<Result<ModelResponse, ModelError>> {
    (0..n)
        .map(|i| {
            let (name, input) = if i == 0 { ("edit", json!({"path": "calc.py"})) } else { ("echo", json!({"i": i})) };
            let thought = format!("Turn {i}: {}", "thinking ".repeat(text_bytes / 9));
            reply_with(vec![text(&thought), call(&format!("t{i}"), name, input)], StopReason::ToolUse, 0)
        })
        .collect()
}

#[tokio::test]
async fn compaction_summarises_older_turns_and_keeps_the_tools_state() {
    // 8 KB (2,000 tokens) of text per turn, budget 20,000: past 16,000
    // after eight turns, with no tool output worth stubbing.
    let mut replies = talkative_turns(12, 8_000);
    replies.push(reply_with(vec![text("done")], StopReason::EndTurn, 0));
    let summary = "Edited calc.py to guard the division; checked the callers; nothing is left.";
    let model = Scripted::with_no_tools(replies, vec![reply_with(vec![text(summary)], StopReason::EndTurn, 0)]);
    let limits = Limits { max_turns: 20, context_budget: 20_000, ..LIMITS };
    let (out, events) = go(&model, &tools(), limits).await;
    assert_eq!(out.stop, Stop::EndTurn, "{:?}", out.stop);
    assert_eq!(out.turns, 13, "the compaction request is not a turn");
    let compactions: Vec<(u32, u32, &str)> = events
        .iter()
        .filter_map(|e| match e {
            RunEvent::ContextEdited { turn, change: ContextChange::Compacted { replaced, summary }, .. } => {
                Some((*turn, *replaced, summary.as_str()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(compactions.len(), 1, "{compactions:?}");
    let (turn, replaced, reported) = compactions[0];
    assert_eq!(reported, summary);
    let seen = model.seen.lock().unwrap().clone();
    let shapes = model.shapes.lock().unwrap().clone();
    let at = shapes.iter().position(|&(_, tools)| !tools).unwrap();
    assert_eq!(at, turn as usize - 1, "compaction comes before the request of its turn");
    assert!(shapes[at].0 <= 2048);
    // The compaction request: the history up to the newest exchange, then the ask.
    let asked = &seen[at];
    assert!(
        matches!(asked.last().unwrap().content.last(), Some(Block::Text { text }) if text.contains("replaced by a summary") && text.contains("Do not call any tools"))
    );
    // After it: the task, the summary and the changed files in the first
    // message, then the newest exchange; every pair valid.
    let after = &seen[at + 1];
    assert_eq!(after.len(), seen[at - 1].len() + 2 - replaced as usize, "{} {}", after.len(), replaced);
    let first = after[0].text();
    assert!(first.starts_with("fix it"), "{first}");
    assert!(first.contains(summary) && first.contains("Files changed so far: calc.py"), "{first}");
    assert_eq!(after[1].role, Role::Assistant);
    assert_pairs_valid(after);
    // No request over the budget, the compaction request included.
    let estimates = seen_estimates(&model);
    assert!(estimates.iter().all(|&e| e <= 20_000), "{estimates:?}");
    assert!(estimates[at + 1] < estimates[at - 1] / 2, "{estimates:?}");
}

#[tokio::test]
async fn a_failed_compaction_stops_the_run_only_when_the_request_would_not_fit() {
    let replies = talkative_turns(14, 8_000);
    let empty = reply_with(vec![], StopReason::EndTurn, 0);
    let model = Scripted::with_no_tools(replies, vec![empty.clone(), empty]);
    let limits = Limits { max_turns: 20, context_budget: 20_000, ..LIMITS };
    let (out, _) = go(&model, &tools(), limits).await;
    let Stop::ContextBudget { ceiling, .. } = out.stop else { panic!("{:?}", out.stop) };
    assert_eq!(ceiling, 20_000);
    let shapes = model.shapes.lock().unwrap().clone();
    let compactions = shapes.iter().filter(|&&(_, tools)| !tools).count();
    assert_eq!(compactions, 2, "once past the threshold, once more when it no longer fits: {shapes:?}");
    let estimates = seen_estimates(&model);
    assert!(estimates.iter().all(|&e| e <= 20_000), "{estimates:?}");
}

#[tokio::test]
async fn max_cost_is_a_hard_bound_at_the_models_price() {
    let price = crate::pricing::Price { input: 3.0, output: 15.0, cache_read: None, cache_write: None };
    let turn = |i: u32| {
        Ok(ModelResponse {
            message: Message {
                role: Role::Assistant,
                content: vec![call(&format!("t{i}"), "echo", json!({}))],
                raw: None,
            },
            stop_reason: StopReason::ToolUse,
            usage: Usage { input_tokens: 1000, output_tokens: 100, ..Default::default() },
        })
    };
    let model = Scripted::new((0..10).map(turn).collect());
    // $0.0045 a turn: two fit in a cent, and the third could pass it.
    let limits = Limits { max_cost: Some(CostLimit { usd: 0.01, price }), ..LIMITS };
    let (out, _) = go(&model, &tools(), limits).await;
    assert_eq!(out.stop, Stop::CostBudget);
    assert_eq!((out.stop.as_str(), out.turns), ("cost_budget", 2));
    assert!(out.stop.describe(&limits).contains("maxCostUsd 0.01"), "{}", out.stop.describe(&limits));
    assert!(price.cost(&out.usage.tokens()) <= 0.01, "{:?}", out.usage);
    assert_eq!(model.shapes.lock().unwrap().len(), 2, "no closing summary: it would not fit");
    // The last affordable request asks for no more output than the money left buys.
    let model = Scripted::new((0..10).map(turn).collect());
    let limits = Limits { max_cost: Some(CostLimit { usd: 0.0125, price }), ..LIMITS };
    let (out, _) = go(&model, &tools(), limits).await;
    assert_eq!(out.stop, Stop::CostBudget);
    let shapes = model.shapes.lock().unwrap().clone();
    assert!(shapes.last().unwrap().0 < 1000, "{shapes:?}");
}

#[tokio::test]
async fn the_providers_count_makes_the_budget_exact() {
    // Six results of 1,000 tokens by bytes / 4, budget 10,000: under the
    // edit threshold by the estimate, over it by the provider's count
    // (half as much again).
    let run = |factor: Option<f64>| async move {
        let mut replies = big_turns(6, 4000);
        replies.push(reply_with(vec![text("done")], StopReason::EndTurn, 0));
        let model = Scripted { count_factor: factor, ..Scripted::new(replies) };
        let limits = Limits { context_budget: 10_000, context_editing: ContextEditing::Budget, ..LIMITS };
        let (out, events) = go(&model, &tools(), limits).await;
        assert_eq!(out.stop, Stop::EndTurn);
        (stub_edits(&events), *model.counted.lock().unwrap())
    };
    let (edits, counted) = run(None).await;
    assert_eq!((edits.len(), counted), (0, 0));
    let (edits, counted) = run(Some(1.5)).await;
    assert!(matches!(edits[..], [(7, StubReason::Budget, _)]), "{edits:?}");
    // Only past 40 % of the ceiling is the count asked for.
    assert!((2..7).contains(&counted), "{counted}");
}

#[tokio::test]
async fn a_thinking_budget_counts_against_max_tokens() {
    // 2,000 tokens of thinking on top of what each request asks for: the
    // requests ask for that much less, and the run ends sooner.
    let replies =
        || (0..20).map(|i| reply(vec![call(&format!("t{i}"), "echo", json!({"i": i}))], StopReason::ToolUse)).collect();
    let limits = Limits { max_tokens: 2_500, ..LIMITS };
    let plain = Scripted::new(replies());
    let (without, _) = go(&plain, &tools(), limits).await;
    let thinking = Scripted { thinking: 2_000, ..Scripted::new(replies()) };
    let (with, _) = go(&thinking, &tools(), limits).await;
    assert_eq!((without.stop, with.stop), (Stop::MaxTurns, Stop::TokenBudget));
    assert!(with.turns < without.turns, "{} vs {}", with.turns, without.turns);
    assert_eq!(plain.shapes.lock().unwrap()[0].0, 1000);
    let first = thinking.shapes.lock().unwrap()[0].0;
    assert!(first < 500, "the first request leaves room for its thinking: {first}");
}
