//! Streaming under hostile or broken servers, through the built `agentfix fix` against the
//! mock model: long answers cost linear time, `idleTimeoutSecs` bounds an attempt whatever
//! arrives (a trickle, a flood of one line, comment lines without an event boundary), keep-alive
//! pings hold a slow stream open, and no body is read whole into memory (error bodies are cut at
//! 64 KB, a non-streaming answer and an SSE event at 16 MB, a stream that fails mid-way is
//! dropped). Memory is measured as the child's peak RSS (`VmHWM`), polled while it runs.

mod common;

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::agentfix_bin;
use common::mock_model::*;
use serde_json::{Value, json};

const CALC: &str = "def div(a, b):\n    return a / b\n";

/// Peak RSS growth (over a run that got a small error) allowed for a run fed a huge body.
const MAX_GROWTH_KB: u64 = 40 * 1024;

struct Ws {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

fn workspace(toml: &str) -> Ws {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap().join("ws");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("calc.py"), CALC).unwrap();
    if !toml.is_empty() {
        std::fs::write(root.join("agentfix.toml"), toml).unwrap();
    }
    Ws { _dir: dir, root }
}

/// What a finished `agentfix fix` left behind.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    elapsed: Duration,
    /// The child's peak resident set (`VmHWM`), in kB, as last seen while it ran.
    peak_kb: u64,
}

fn anthropic(mock: &MockModel) -> Vec<(&'static str, String)> {
    vec![("ANTHROPIC_API_KEY", API_KEY.into()), ("ANTHROPIC_BASE_URL", mock.base_url())]
}

fn compatible(mock: &MockModel) -> Vec<(&'static str, String)> {
    mock.set_openai_auth_optional(true);
    vec![("AGENTFIX_PROVIDER", "openai-compatible".into()), ("OPENAI_BASE_URL", format!("{}/v1", mock.base_url()))]
}

/// Runs `agentfix fix calc.py --line 2` with `env`, polling the child's `VmHWM` every 20 ms
/// until it exits (a zombie has none, so the last reading before the exit is kept).
fn fix(ws: &Ws, env: &[(&'static str, String)]) -> Run {
    let mut cmd = Command::new(agentfix_bin());
    cmd.current_dir(&ws.root).args(["fix", "calc.py", "--line", "2"]);
    common::without_provider_env(&mut cmd);
    cmd.env("AGENTFIX_DEFAULT_LANGUAGE_SERVERS", "0")
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = cmd.spawn().unwrap();
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let mut peak_kb = 0;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if let Some(kb) = common::rss::peak_kib(child.id()) {
            peak_kb = peak_kb.max(kb);
        }
        if started.elapsed() > Duration::from_secs(240) {
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Run {
        code: status.code(),
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
        elapsed: started.elapsed(),
        peak_kb,
    }
}

fn with(env: Vec<(&'static str, String)>, extra: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
    let mut env = env;
    env.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
    env
}

fn message_of(r: Reply) -> Value {
    match r {
        Reply::Message(v) => v,
        other => panic!("not a message reply: {other:?}"),
    }
}

fn edit_reply() -> Reply {
    tool_reply(&[(
        "toolu_edit",
        "edit_file",
        json!({"path": "calc.py", "old_text": "    return a / b\n", "new_text": "    if b == 0:\n        return 0\n    return a / b\n"}),
    )])
}

fn openai_edit_reply() -> Reply {
    openai_tools(&[(
        "call_edit",
        "edit_file",
        json!({"path": "calc.py", "old_text": "    return a / b\n", "new_text": "    if b == 0:\n        return 0\n    return a / b\n"}),
    )])
}

fn assert_fixed(run: &Run) {
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(run.stdout.contains("+    if b == 0:\n+        return 0\n"), "{}", run.stdout);
}

/// Words of ~8 characters, `len` bytes in all, ending with a marker.
fn long_text(len: usize) -> String {
    let mut text = String::with_capacity(len + 16);
    let mut n = 0u64;
    while text.len() < len {
        text.push_str(&format!("w{:06} ", n % 1_000_000));
        n += 1;
        if n.is_multiple_of(12) {
            text.push('\n');
        }
    }
    text.push_str("THE-END");
    text
}

// ---------------------------------------------------------------------------------------------
// Long answers

/// The text of the transcript a run names on its stderr.
fn transcript_of(run: &Run) -> String {
    let path = run.stderr.lines().find_map(|l| l.strip_prefix("agentfix: transcript: ")).expect("a transcript");
    std::fs::read_to_string(path.trim()).unwrap()
}

#[test]
fn a_long_streamed_answer_costs_linear_time() {
    // 256 KB in 7-character deltas (~37,000 events): quadratic assembly took ~36 s here
    // (128 KB: 8.9 s); linear work is well under a second. The bound is generous on purpose.
    // The CLI shows the first lines of the model's text; the transcript has all of it.
    let ws = workspace("");
    let mock = MockModel::start();
    let text = long_text(256 * 1024);
    mock.push(edit_reply());
    mock.push(text_reply(&text));
    let run = fix(&ws, &with(anthropic(&mock), &[("AGENTFIX_TRANSCRIPT_DIR", ws.root.join(".t").to_str().unwrap())]));
    assert_fixed(&run);
    let recorded = transcript_of(&run);
    assert!(recorded.contains(text.trim_end_matches("THE-END").lines().last().unwrap().trim()), "whole text kept");
    assert!(recorded.contains("THE-END"));
    eprintln!("256 KB streamed: {:?}", run.elapsed);
    assert!(run.elapsed < Duration::from_secs(15), "256 KB of streamed text took {:?}", run.elapsed);

    // The same through OpenAI's chunks.
    let ws = workspace("");
    let mock = MockModel::start();
    mock.push(openai_edit_reply());
    mock.push(openai_text(&text));
    let run = fix(&ws, &with(compatible(&mock), &[("AGENTFIX_TRANSCRIPT_DIR", ws.root.join(".t").to_str().unwrap())]));
    assert_fixed(&run);
    assert!(transcript_of(&run).contains("THE-END"));
    eprintln!("256 KB streamed: {:?}", run.elapsed);
    assert!(run.elapsed < Duration::from_secs(15), "256 KB of streamed text took {:?}", run.elapsed);
}

// ---------------------------------------------------------------------------------------------
// The idle timeout is a hard bound per attempt

/// The attempt ended near the 1 s idle timeout, was retried, and the retry finished the fix.
fn assert_stalled_then_retried(run: &Run, mock: &MockModel) {
    assert_fixed(run);
    assert!(run.stderr.contains("stalled"), "{}", run.stderr);
    let times = mock.request_times();
    assert_eq!(times.len(), 3, "one retry, then the second turn");
    let attempt = times[1] - times[0];
    assert!(attempt >= Duration::from_millis(900), "ended before the idle timeout: {attempt:?}");
    assert!(attempt < Duration::from_secs(8), "the idle timeout (1 s) was overrun: {attempt:?}");
}

#[test]
fn a_trickle_without_an_event_boundary_ends_by_the_idle_timeout() {
    let ws = workspace("idleTimeoutSecs = 1\n");
    let mock = MockModel::start();
    // One byte every 100 ms, never a newline, for a minute.
    mock.push(Reply::Sse(vec![
        Chunk::Raw("event: message_start\ndata: {\"type\":\"message_start\",\"pad\":\"".into()),
        repeat(*b"x", 600, Duration::from_millis(100)),
    ]));
    mock.push(edit_reply());
    mock.push(text_reply("Guarded b == 0."));
    let run = fix(&ws, &anthropic(&mock));
    assert_stalled_then_retried(&run, &mock);
}

#[test]
fn a_flood_of_one_line_ends_by_the_idle_timeout() {
    let ws = workspace("idleTimeoutSecs = 1\n");
    let mock = MockModel::start();
    // 4 MB of one line at once, then 64 KB every 100 ms (under the 16 MB event cap for
    // minutes): the line never ends, so the attempt must end by the deadline.
    let piece = vec![b'x'; 64 * 1024];
    mock.push(Reply::Sse(vec![
        Chunk::Raw("data: {\"choices\":[{\"delta\":{\"content\":\"".into()),
        repeat(piece.clone(), 64, Duration::ZERO),
        repeat(piece, 3000, Duration::from_millis(100)),
    ]));
    mock.push(openai_edit_reply());
    mock.push(openai_text("Guarded b == 0."));
    let run = fix(&ws, &compatible(&mock));
    assert_stalled_then_retried(&run, &mock);
}

#[test]
fn comment_lines_without_a_blank_line_end_by_the_idle_timeout() {
    let ws = workspace("idleTimeoutSecs = 1\n");
    let mock = MockModel::start();
    // Comment lines as fast as the client reads, but never the blank line that ends an event.
    let piece = ": keep-alive\n".repeat(4096).into_bytes();
    let mut events = sse_events(&message_of(edit_reply()));
    events.insert(1, repeat(piece, 200_000, Duration::ZERO));
    mock.push(Reply::Sse(events));
    mock.push(edit_reply());
    mock.push(text_reply("Guarded b == 0."));
    let run = fix(&ws, &anthropic(&mock));
    assert_stalled_then_retried(&run, &mock);
}

#[test]
fn keep_alive_pings_hold_a_slow_stream_open() {
    // llama-cpp-python keeps a slow prompt alive with `: ping` comments (py-idle-ping): each
    // ping is a complete event, so it resets the idle deadline.
    let ws = workspace("idleTimeoutSecs = 1\n");
    let mock = MockModel::start();
    let mut chunks = vec![repeat(&b": ping - 2026-12-01 08:11:38.102824+00:00\n\n"[..], 8, Duration::from_millis(400))];
    chunks.extend(openai_sse_chunks(&message_of(openai_edit_reply()), true));
    mock.push(Reply::Sse(chunks));
    mock.push(openai_text("Guarded b == 0."));
    let run = fix(&ws, &compatible(&mock));
    assert_fixed(&run);
    assert!(!run.stderr.contains("stalled"), "{}", run.stderr);
    assert_eq!(mock.requests().len(), 2, "not retried: {}", run.stderr);
}

// ---------------------------------------------------------------------------------------------
// Bodies are never read whole

/// The peak RSS of a run whose first request fails with a small, final error.
fn baseline_kb(env: fn(&MockModel) -> Vec<(&'static str, String)>) -> u64 {
    let ws = workspace("");
    let mock = MockModel::start();
    mock.push(server_error_no_retry());
    let run = fix(&ws, &env(&mock));
    assert_eq!(run.code, Some(3), "{}", run.stderr);
    run.peak_kb
}

fn assert_small_growth(run: &Run, baseline: u64, what: &str) {
    if std::env::var_os("SHOW_STDERR").is_some() {
        eprintln!("{}", run.stderr);
    }
    assert!(run.peak_kb > 0 && baseline > 0, "VmHWM was read");
    let growth = run.peak_kb.saturating_sub(baseline);
    eprintln!("{what}: peak RSS {} kB, baseline {baseline} kB, in {:?}", run.peak_kb, run.elapsed);
    assert!(
        growth < MAX_GROWTH_KB,
        "{what}: peak RSS {} kB against {baseline} kB without it (+{} MB)",
        run.peak_kb,
        growth / 1024
    );
}

#[test]
fn a_huge_error_body_is_read_with_a_cap() {
    let baseline = baseline_kb(anthropic);
    let ws = workspace("");
    let mock = MockModel::start();
    let Reply::Raw { status, mut headers, chunks } = huge_body(
        500,
        "application/json",
        "{\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"",
        b'x',
        256 << 20,
        "\"}}",
    ) else {
        unreachable!()
    };
    headers.push(("x-should-retry".into(), "false".into()));
    mock.push(Reply::Raw { status, headers, chunks });
    let run = fix(&ws, &anthropic(&mock));
    assert_eq!(run.code, Some(3), "{}", run.stderr);
    assert!(run.stderr.contains("Anthropic API 500: the API failed"), "{}", run.stderr);
    assert!(run.stderr.contains("the error body was cut at 64 KB"), "{}", run.stderr);
    assert_small_growth(&run, baseline, "a 256 MB error body");
}

#[test]
fn a_huge_non_streaming_answer_is_refused_at_16_mb() {
    // A compatible server that ignores `stream` and answers with one JSON body.
    let baseline = baseline_kb(compatible);
    let ws = workspace("");
    let mock = MockModel::start();
    mock.push(huge_body(
        200,
        "application/json",
        "{\"object\":\"chat.completion\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"",
        b'x',
        256 << 20,
        "\"},\"finish_reason\":\"stop\"}]}",
    ));
    let run = fix(&ws, &compatible(&mock));
    assert_eq!(run.code, Some(3), "{}", run.stderr);
    assert!(run.stderr.contains("the OpenAI-compatible API sent an answer over 16 MB"), "{}", run.stderr);
    assert_eq!(mock.requests().len(), 1, "not retried");
    // Up to 16 MB is read, no more.
    assert_small_growth(&run, baseline, "a 256 MB JSON answer");
}

#[test]
fn an_sse_event_over_16_mb_is_refused() {
    let ws = workspace("idleTimeoutSecs = 60\n");
    let mock = MockModel::start();
    let mut events = sse_events(&message_of(edit_reply()));
    // One never-ending `data:` line, as fast as the client reads: 256 MB if it read them all.
    events.insert(1, Chunk::Raw("event: content_block_delta\ndata: ".into()));
    events.insert(2, repeat(vec![b'x'; 64 * 1024], 4096, Duration::ZERO));
    mock.push(Reply::Sse(events));
    let run = fix(&ws, &anthropic(&mock));
    assert_eq!(run.code, Some(3), "{}", run.stderr);
    assert!(run.stderr.contains("the Anthropic stream sent an event over 16 MB"), "{}", run.stderr);
    assert_eq!(mock.requests().len(), 1, "not retried");
    assert!(run.elapsed < Duration::from_secs(30), "ended by the cap, not the idle timeout: {:?}", run.elapsed);
}

#[test]
fn a_stream_that_fails_mid_way_is_not_read_to_its_end() {
    // An error event, then 256 MB more: the client stops at the error and drops the body.
    let baseline = baseline_kb(anthropic);
    let ws = workspace("");
    let mock = MockModel::start();
    let mut chunks = sse_error_after_start("api_error", "Internal server error");
    chunks.push(repeat(": padding that nobody should read\n\n".repeat(2000).into_bytes(), 4000, Duration::ZERO));
    mock.push(Reply::Sse(chunks));
    let run = fix(&ws, &with(anthropic(&mock), &[("AGENTFIX_MAX_RETRIES", "0")]));
    assert_eq!(run.code, Some(3), "{}", run.stderr);
    assert!(run.stderr.contains("Anthropic API stream error: the API failed: Internal server error"), "{}", run.stderr);
    assert_small_growth(&run, baseline, "an error event followed by 256 MB");
    assert!(run.elapsed < Duration::from_secs(30), "{:?}", run.elapsed);

    let baseline = baseline_kb(compatible);
    let ws = workspace("");
    let mock = MockModel::start();
    let mut chunks = openai_stream_error("The server had an error while processing your request.");
    chunks.push(repeat(vec![b'x'; 64 * 1024], 4096, Duration::ZERO));
    mock.push(Reply::Sse(chunks));
    let run = fix(&ws, &with(compatible(&mock), &[("AGENTFIX_MAX_RETRIES", "0")]));
    assert_eq!(run.code, Some(3), "{}", run.stderr);
    assert!(run.stderr.contains("The server had an error"), "{}", run.stderr);
    assert_small_growth(&run, baseline, "an OpenAI error chunk followed by 256 MB");
}
