//! The loop against the mock model over the real wire: streaming, stop
//! reasons, retries, limits, the OpenAI providers, transcripts and replay,
//! and `agentfix check`. Most cases drive the headless `agentfix fix`, which
//! runs the same loop as the language server.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use common::agentfix_bin;
use common::mock_model::*;
use serde_json::{Value, json};

const CALC: &str = "def div(a, b):\n    return a / b\n";
const FIXED: &str = "def div(a, b):\n    if b == 0:\n        return 0\n    return a / b\n";

struct Ws {
    _dir: tempfile::TempDir,
    root: PathBuf,
    transcripts: PathBuf,
}

fn workspace(toml: &str) -> Ws {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let root = base.join("ws");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("calc.py"), CALC).unwrap();
    if !toml.is_empty() {
        std::fs::write(root.join("agentfix.toml"), toml).unwrap();
    }
    Ws { _dir: dir, root, transcripts: base.join("transcripts") }
}

fn run(ws: &Ws, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = Command::new(agentfix_bin());
    cmd.current_dir(&ws.root).args(args);
    common::without_provider_env(&mut cmd);
    cmd.env("AGENTFIX_TRANSCRIPT_DIR", &ws.transcripts)
        .env("AGENTFIX_DEFAULT_LANGUAGE_SERVERS", "0")
        .envs(env.iter().copied());
    cmd.output().unwrap()
}

fn anthropic_env(mock: &MockModel) -> Vec<(&'static str, String)> {
    vec![("ANTHROPIC_API_KEY", API_KEY.into()), ("ANTHROPIC_BASE_URL", mock.base_url())]
}

fn fix(ws: &Ws, mock: &MockModel) -> Output {
    let env = anthropic_env(mock);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    run(ws, &env, &["fix", "calc.py", "--line", "2"])
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn edit_call(id: &str) -> (String, &'static str, Value) {
    (
        id.to_string(),
        "edit_file",
        json!({"path": "calc.py", "old_text": "    return a / b\n", "new_text": "    if b == 0:\n        return 0\n    return a / b\n"}),
    )
}

fn edit_reply() -> Reply {
    let (id, name, input) = edit_call("toolu_edit");
    tool_reply(&[(&id, name, input)])
}

/// The message object inside a scripted reply.
fn message_of(r: Reply) -> Value {
    match r {
        Reply::Message(v) => v,
        other => panic!("not a message reply: {other:?}"),
    }
}

fn assert_fixed(ws: &Ws, out: &Output) {
    assert_eq!(out.status.code(), Some(0), "{}", stderr(out));
    let diff = String::from_utf8_lossy(&out.stdout);
    assert!(diff.contains("+    if b == 0:\n+        return 0\n"), "{diff}");
    assert_eq!(std::fs::read_to_string(ws.root.join("calc.py")).unwrap(), CALC);
}

#[test]
fn streams_split_mid_utf8_and_echoes_thinking_verbatim() {
    let ws = workspace("");
    let mock = MockModel::start();
    let mut first = message_of(edit_reply());
    first["model"] = json!("claude-sonnet-4-5");
    first["content"] = json!([
        {"type": "thinking", "thinking": "Division by zero, 漢字 😀", "signature": "EqQBCkgIARABGAIiQ=="},
        first["content"][0].clone(),
        first["content"][1].clone(),
    ]);
    mock.push(Reply::Sse(split_bytes(sse_events(&first))));
    mock.push(text_reply("Guarded b == 0."));
    let out = fix(&ws, &mock);
    assert_fixed(&ws, &out);
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
    let requests = mock.requests();
    assert_eq!(requests[0].body["stream"], true);
    // The assistant turn goes back exactly as it came, thinking signature included.
    assert_eq!(requests[1].body["messages"][1]["content"], first["content"]);
    // No effort set: no thinking asked for, max_tokens as configured.
    assert!(requests.iter().all(|r| r.body.get("thinking").is_none() && r.body["max_tokens"] == 8192));
}

/// A signed thinking block, as the API sends it before the rest of a turn.
fn thinking_block(signature: &str) -> Value {
    json!({"type": "thinking", "thinking": "b can be 0: guard it, keep the rest. 漢字", "signature": signature})
}

/// `reply` (a scripted message) as a model with extended thinking writes it: its thinking first.
fn thinking_first(reply: Reply, signature: &str) -> Value {
    let mut m = message_of(reply);
    let mut content = vec![thinking_block(signature)];
    content.extend(m["content"].as_array().unwrap().iter().cloned());
    m["content"] = Value::Array(content);
    m
}

#[test]
fn effort_runs_the_loop_with_extended_thinking_and_echoes_every_thinking_turn() {
    let ws = workspace("effort = \"high\"\n");
    let mock = MockModel::start();
    // Claude thinks at the start of the turn; after tool results it goes on without.
    let first = thinking_first(tool_reply(&[("toolu_read", "read_file", json!({"path": "calc.py"}))]), "EqQBCkgIAR==");
    mock.push(Reply::Message(first.clone()));
    mock.push(edit_reply());
    mock.push(text_reply("Guarded b == 0."));
    let out = fix(&ws, &mock);
    assert_fixed(&ws, &out);
    // The mock refuses a tool result in a thinking turn whose thinking was dropped: none was.
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    for r in &requests {
        assert_eq!(r.body["thinking"], json!({"type": "enabled", "budget_tokens": 24_576}));
        assert_eq!(r.body["max_tokens"], 8192 + 24_576, "the budget on top of maxOutputTokens");
    }
    assert_eq!(requests[1].body["messages"][1]["content"], first["content"]);
    assert_eq!(requests[2].body["messages"][1]["content"], first["content"]);

    // A run a limit stopped: the closing summary (`tool_choice: none`) keeps thinking on.
    let ws = workspace("effort = \"low\"\nmaxTurns = 1\n");
    let mock = MockModel::start();
    mock.push(Reply::Message(thinking_first(edit_reply(), "Eq3")));
    mock.push(text_reply("Guarded b == 0; out of turns."));
    let out = fix(&ws, &mock);
    assert!(stderr(&out).contains("Guarded b == 0; out of turns."), "{}", stderr(&out));
    let summary = mock.requests().last().unwrap().body.clone();
    assert_eq!(summary["tool_choice"], json!({"type": "none"}));
    assert_eq!(summary["thinking"], json!({"type": "enabled", "budget_tokens": 2048}));
    assert_eq!(summary["max_tokens"], 1024 + 2048);
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
}

#[test]
fn retryable_failures_are_retried_with_the_servers_delay() {
    let ws = workspace("");
    let mock = MockModel::start();
    mock.push(rate_limited_ms(300));
    mock.push(overloaded());
    mock.push(Reply::Sse(sse_error_after_start("overloaded_error", "Overloaded")));
    mock.push(edit_reply());
    mock.push(Reply::Sse(truncated(sse_events(&message_of(text_reply("Done."))), 3)));
    mock.push(text_reply("Guarded b == 0."));
    // Three retries are needed for the first turn, one for the second.
    let out = run(
        &ws,
        &[("ANTHROPIC_API_KEY", API_KEY), ("ANTHROPIC_BASE_URL", &mock.base_url()), ("AGENTFIX_MAX_RETRIES", "3")],
        &["fix", "calc.py", "--line", "2"],
    );
    assert_fixed(&ws, &out);
    let times = mock.request_times();
    assert_eq!(times.len(), 6);
    assert!(times[1] - times[0] >= Duration::from_millis(300), "retry-after-ms honoured: {:?}", times[1] - times[0]);
    assert!(stderr(&out).contains("retry 1 in 0.3 s"), "{}", stderr(&out));
}

#[test]
fn permanent_failures_are_not_retried_and_say_what_to_do() {
    let ws = workspace("");
    for (reply, expect) in [
        (server_error_no_retry(), "Anthropic API 500"),
        (error_reply(400, "invalid_request_error", "messages: bad"), "the API refused the request: messages: bad"),
        (error_reply(401, "authentication_error", "invalid x-api-key"), "the key from ANTHROPIC_API_KEY was rejected"),
    ] {
        let mock = MockModel::start();
        mock.push(reply);
        let out = fix(&ws, &mock);
        assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
        assert!(stderr(&out).contains(expect), "{}", stderr(&out));
        assert_eq!(mock.requests().len(), 1, "not retried: {expect}");
    }
}

#[test]
fn an_error_body_that_echoes_the_key_is_scrubbed_everywhere() {
    let ws = workspace("");
    let mock = MockModel::start();
    // A proxy that echoes the request's headers in its error body.
    mock.push(error_reply(
        400,
        "invalid_request_error",
        &format!("bad request; headers: x-api-key: {API_KEY}, Authorization: Bearer {API_KEY}"),
    ));
    let out = fix(&ws, &mock);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let all = format!("{}{}", stderr(&out), String::from_utf8_lossy(&out.stdout));
    assert!(all.contains("the API refused the request: bad request"), "{all}");
    assert!(!all.contains(API_KEY), "{all}");
    let transcript = std::fs::read_to_string(transcript_of(&ws)).unwrap();
    assert!(!transcript.contains(API_KEY));
}

#[test]
fn a_stalled_stream_hits_the_idle_timeout_and_is_retried() {
    let ws = workspace("idleTimeoutSecs = 1\n");
    let mock = MockModel::start();
    mock.push(Reply::Sse(stalled(sse_events(&message_of(edit_reply())), 2, Duration::from_secs(30))));
    mock.push(edit_reply());
    mock.push(text_reply("Guarded b == 0."));
    let out = fix(&ws, &mock);
    assert_fixed(&ws, &out);
    assert!(stderr(&out).contains("stalled"), "{}", stderr(&out));
}

#[test]
fn a_tool_call_cut_at_max_tokens_is_retried_with_more_room() {
    let ws = workspace("maxOutputTokens = 1000\n");
    let mock = MockModel::start();
    let mut cut = message_of(edit_reply());
    cut["stop_reason"] = json!("max_tokens");
    // The stream ends inside the tool input.
    let mut events = sse_events(&cut);
    let stop_at = events
        .iter()
        .position(|c| matches!(c, Chunk::Raw(s) if s.contains("content_block_stop") && s.contains("\"index\":1")))
        .unwrap();
    let tail: Vec<Chunk> = events
        .split_off(stop_at)
        .into_iter()
        .filter(|c| matches!(c, Chunk::Raw(s) if s.contains("message_delta") || s.contains("message_stop")))
        .collect();
    events.extend(tail);
    mock.push(Reply::Sse(events));
    mock.push(edit_reply());
    mock.push(text_reply("Guarded b == 0."));
    let out = fix(&ws, &mock);
    assert_fixed(&ws, &out);
    let requests = mock.requests();
    assert_eq!(requests[0].body["max_tokens"], 1000);
    assert_eq!(requests[1].body["max_tokens"], 2000);
    assert_eq!(requests[1].body["messages"].as_array().unwrap().len(), 1, "the cut turn is dropped");
}

#[test]
fn refusal_and_pause_turn() {
    let ws = workspace("");
    let mock = MockModel::start();
    let mut refusal = message_of(text_reply(""));
    refusal["content"] = json!([]);
    refusal["stop_reason"] = json!("refusal");
    refusal["stop_details"] =
        json!({"type": "refusal", "category": "cyber", "explanation": "This looks like malware."});
    mock.push(Reply::Message(refusal));
    let out = fix(&ws, &mock);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("the model declined: This looks like malware."), "{}", stderr(&out));

    let mock = MockModel::start();
    let mut paused = message_of(text_reply("Searching the web…"));
    paused["stop_reason"] = json!("pause_turn");
    mock.push(Reply::Message(paused));
    mock.push(edit_reply());
    mock.push(text_reply("Guarded b == 0."));
    let out = fix(&ws, &mock);
    assert_fixed(&ws, &out);
    let requests = mock.requests();
    // The continuation ends with the paused assistant turn: no new user message.
    let second = requests[1].body["messages"].as_array().unwrap();
    assert_eq!(second.len(), 2);
    assert_eq!(second[1]["role"], "assistant");
}

#[test]
fn limits_end_in_a_summary_and_partial_edits_are_offered_or_discarded() {
    // The same failing call three times: stalled, with the edit made before offered.
    let ws = workspace("");
    let mock = MockModel::start();
    mock.push(edit_reply());
    for i in 0..3 {
        mock.push(tool_reply(&[(&format!("toolu_r{i}"), "read_file", json!({"path": "missing.py"}))]));
    }
    mock.push(text_reply("I guarded the division; missing.py does not exist."));
    let out = fix(&ws, &mock);
    assert_fixed(&ws, &out);
    let err = stderr(&out);
    assert!(err.contains("the run stalled: `read_file` failed 3 times in a row"), "{err}");
    assert!(err.contains("I guarded the division; missing.py does not exist."));
    assert_eq!(mock.requests().last().unwrap().body["tool_choice"], json!({"type": "none"}));

    let ws = workspace("partialEdits = \"discard\"\nmaxTurns = 1\n");
    let mock = MockModel::start();
    mock.push(edit_reply());
    mock.push(text_reply("Ran out of turns."));
    let out = fix(&ws, &mock);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("1 edited file(s) discarded (partialEdits = discard)"), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
}

#[test]
fn the_wall_clock_limit_stops_a_hanging_model() {
    let ws = workspace("timeoutSecs = 1\n");
    let mock = MockModel::start();
    mock.push(Reply::Hang);
    mock.push(Reply::Hang);
    let started = std::time::Instant::now();
    let out = fix(&ws, &mock);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("the run took longer than timeoutSecs (1 s)"), "{}", stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(20));
}

fn openai_env(mock: &MockModel, provider: &'static str) -> Vec<(&'static str, String)> {
    vec![
        ("AGENTFIX_PROVIDER", provider.into()),
        ("OPENAI_BASE_URL", format!("{}/v1", mock.base_url())),
        ("OPENAI_API_KEY", API_KEY.into()),
    ]
}

fn fix_with(ws: &Ws, env: &[(&'static str, String)]) -> Output {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    run(ws, &env, &["fix", "calc.py", "--line", "2"])
}

#[test]
fn openai_streams_tool_calls_and_answers_every_call_id() {
    let ws = workspace("");
    let mock = MockModel::start();
    let (id, name, input) = edit_call("call_edit");
    mock.push(openai_tools(&[("call_read", "read_file", json!({"path": "calc.py"})), (&id, name, input)]));
    mock.push(openai_text("Guarded b == 0."));
    let out = fix_with(&ws, &openai_env(&mock, "openai"));
    assert_fixed(&ws, &out);
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
    let r = mock.requests();
    assert_eq!(r[0].path, "/v1/chat/completions");
    assert_eq!(r[0].header("authorization"), Some(format!("Bearer {API_KEY}").as_str()));
    assert_eq!(r[0].body["stream_options"], json!({"include_usage": true}));
    assert!(r[0].body.get("max_completion_tokens").is_some());
    let msgs = r[1].body["messages"].as_array().unwrap();
    let tool_ids: Vec<&str> =
        msgs.iter().filter(|m| m["role"] == "tool").map(|m| m["tool_call_id"].as_str().unwrap()).collect();
    assert_eq!(tool_ids, ["call_read", "call_edit"]);
}

#[test]
fn openai_compatible_quirks_are_normalised() {
    type Quirk = fn(&[(&str, &str, Value)]) -> Reply;
    let quirks: Vec<Quirk> = vec![
        openai_quirk_stop_with_tool_calls,
        openai_quirk_ollama_index0,
        openai_quirk_arguments_object,
        openai_quirk_empty_id,
        openai_quirk_name_repeated,
    ];
    for (i, quirk) in quirks.into_iter().enumerate() {
        let ws = workspace("");
        let mock = MockModel::start();
        mock.set_openai_auth_optional(true);
        let (id, name, input) = edit_call("call_edit");
        mock.push(quirk(&[("call_read", "read_file", json!({"path": "calc.py"})), (&id, name, input)]));
        mock.push(openai_text("Guarded b == 0."));
        // A compatible server: baseUrl required, no key sent.
        let env = vec![
            ("AGENTFIX_PROVIDER", "openai-compatible".to_string()),
            ("OPENAI_BASE_URL", format!("{}/v1", mock.base_url())),
        ];
        let out = fix_with(&ws, &env);
        assert_fixed(&ws, &out);
        assert!(mock.violations().is_empty(), "quirk {i}: {:?}", mock.violations());
        let r = mock.requests();
        assert_eq!(r[0].header("authorization"), None);
        assert!(r[0].body.get("max_tokens").is_some());
        let tool_msgs = r[1].body["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "tool").count();
        assert_eq!(tool_msgs, 2, "quirk {i}");
    }
}

/// A compatible server at the mock, no key.
fn compatible_env(mock: &MockModel) -> Vec<(&'static str, String)> {
    mock.set_openai_auth_optional(true);
    vec![
        ("AGENTFIX_PROVIDER", "openai-compatible".to_string()),
        ("OPENAI_BASE_URL", format!("{}/v1", mock.base_url())),
        ("AGENTFIX_MODEL", "smollm2".to_string()),
    ]
}

#[test]
fn llama_cpp_python_gets_tool_choice_auto_unstreamed_string_content_and_estimated_usage() {
    let ws = workspace("");
    let mock = MockModel::start();
    mock.set_llama_cpp_python(true);
    let (id, name, input) = edit_call("call__0_edit_file");
    mock.push(openai_tools(&[(&id, name, input)]));
    mock.push(openai_text("Guarded b == 0."));
    // The logs (quiet by default on the command line) say it once.
    let mut env = compatible_env(&mock);
    env.push(("RUST_LOG", "agentfix=info".to_string()));
    let out = fix_with(&ws, &env);
    assert_fixed(&ws, &out);
    let r = mock.requests();
    // The stream that ended after one ping, then the same request whole; the second turn
    // unstreamed from the start, with "" beside its tool call.
    assert_eq!(r.len(), 3, "{}", stderr(&out));
    assert_eq!((&r[0].body["stream"], &r[0].body["tool_choice"]), (&json!(true), &json!("auto")));
    assert_eq!(r[1].body["stream"], false);
    assert!(r[1].body.get("stream_options").is_none());
    assert_eq!(r[2].body["stream"], false);
    let assistant = r[2].body["messages"].as_array().unwrap().iter().find(|m| m["role"] == "assistant").unwrap();
    assert_eq!(assistant["content"], "");
    // The duplicate in function_call ("edit_file:") was not a second call.
    let tools = r[2].body["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "tool").count();
    assert_eq!(tools, 1);
    let err = stderr(&out);
    assert!(err.contains("estimated: the server reported no usage") && err.contains(" ~"), "{err}");
    assert_eq!(err.matches("asks for unstreamed answers from now on").count(), 1, "{err}");
}

#[test]
fn a_server_setting_error_is_not_retried_and_says_which_setting() {
    // cpp-nojinja: llama-server without --jinja answers every request with tools 500.
    let ws = workspace("");
    let mock = MockModel::start();
    let body = json!({"error": {"code": 500, "message": "tools param requires --jinja flag", "type": "server_error"}});
    mock.push(Reply::Status { status: 500, headers: vec![], body });
    let out = fix_with(&ws, &compatible_env(&mock));
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("start llama-server with --jinja"), "{}", stderr(&out));
    assert_eq!(mock.requests().len(), 1, "not retried");
}

#[test]
fn a_compatible_model_that_calls_no_tool_is_told_how_to_make_the_server_pass_tools() {
    // probe-py-notc-stream: the tools never reached the model, which talks instead.
    let ws = workspace("");
    let mock = MockModel::start();
    let talk = (1..=8).map(|i| format!("Line {i} of a long answer about nothing in particular.")).collect::<Vec<_>>();
    mock.push(openai_text(&talk.join("\n")));
    let out = fix_with(&ws, &compatible_env(&mock));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("the model called no tool") && err.contains("--chat_format chatml-function-calling"), "{err}");
    assert!(err.contains("Line 3 of") && !err.contains("Line 4 of") && err.contains('…'), "{err}");
}

#[test]
fn check_finds_the_model_in_the_list_where_the_lookup_is_404() {
    let ws = workspace("");
    let mock = MockModel::start();
    mock.set_llama_cpp_python(true);
    let env = compatible_env(&mock);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let out = run(&ws, &env, &["check"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{said}{}", stderr(&out));
    assert!(said.contains("/v1/models, which lists smollm2 (GET") && said.contains("was 404"), "{said}");
    let other = [("AGENTFIX_MODEL", "qwen"), env[0], env[1]];
    let out = run(&ws, &other, &["check"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{said}{}", stderr(&out));
    assert!(said.contains("the server has one model, smollm2, and answers with it"), "{said}");
}

#[test]
fn openai_quota_errors_are_final() {
    let ws = workspace("");
    let mock = MockModel::start();
    mock.push(openai_insufficient_quota());
    let out = fix_with(&ws, &openai_env(&mock, "openai"));
    assert_eq!(out.status.code(), Some(3));
    assert!(stderr(&out).contains("out of quota"), "{}", stderr(&out));
    assert_eq!(mock.requests().len(), 1);
}

fn transcript_of(ws: &Ws) -> PathBuf {
    let mut files: Vec<PathBuf> = std::fs::read_dir(&ws.transcripts).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    files.pop().expect("a transcript was written")
}

#[test]
fn transcripts_replay_and_report_the_first_divergence() {
    let ws = workspace("");
    std::fs::write(ws.root.join("secret.txt"), format!("key={API_KEY}\n")).unwrap();
    let mock = MockModel::start();
    mock.push(tool_reply(&[
        ("toolu_s", "read_file", json!({"path": "secret.txt"})),
        ("toolu_c", "read_file", json!({"path": "calc.py"})),
    ]));
    mock.push(edit_reply());
    mock.push(text_reply("Guarded b == 0."));
    let out = fix(&ws, &mock);
    assert_fixed(&ws, &out);
    let path = transcript_of(&ws);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains(API_KEY), "the key never reaches a transcript");
    assert!(!mock.requests_text().contains(API_KEY), "nor the model, through a tool result");
    assert!(text.contains("[REDACTED]"));
    let kinds: Vec<String> =
        text.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()["type"].as_str().unwrap().to_string()).collect();
    assert_eq!(kinds.first().map(String::as_str), Some("start"));
    assert_eq!(kinds.last().map(String::as_str), Some("end"));
    assert_eq!(kinds.iter().filter(|k| *k == "response").count(), 3);
    assert_eq!(kinds.iter().filter(|k| *k == "tool_result").count(), 3);
    let end: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(end["changes"][0]["new_text"], FIXED);

    // Replay offline: same calls, same results, same edit.
    let replay = |p: &Path| run(&ws, &[], &["replay", p.to_str().unwrap()]);
    std::fs::write(ws.root.join("calc.py"), "changed on disk since\n").unwrap();
    let out = replay(&path);
    assert_eq!(out.status.code(), Some(0), "{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "replay matches the transcript: 3 turns, 3 tool calls, 1 changed files\n"
    );

    // A transcript whose recorded result no longer matches what the tools return.
    let tampered = ws.transcripts.join("tampered.jsonl");
    let edited: Vec<String> = text
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            if v["type"] == "tool_result" && v["id"] == "toolu_c" {
                v["content"] = json!("something else");
            }
            v.to_string()
        })
        .collect();
    std::fs::write(&tampered, edited.join("\n")).unwrap();
    let out = replay(&tampered);
    assert_eq!(out.status.code(), Some(1));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.starts_with("replay diverges: turn 1, call `toolu_c` (read_file): the tool result differs"), "{said}");
}

#[test]
fn check_reports_the_configuration_and_the_connection() {
    let ws = workspace("maxTurns = 7\n");
    let mock = MockModel::start();
    let env = anthropic_env(&mock);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let out = run(&ws, &env, &["check"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(said.contains("provider: anthropic (default)"));
    assert!(said.contains("api key: ANTHROPIC_API_KEY is set"));
    assert!(said.contains("maxTurns: 7 (agentfix.toml)"));
    assert!(said.contains("countTokens: false (default)"), "{said}");
    assert!(said.contains("effort: none (default)"), "{said}");
    assert!(said.contains("connection: ok (HTTP 200 from GET"), "{said}");
    assert!(!said.contains(API_KEY) && !stderr(&out).contains(API_KEY));

    let bad = [("ANTHROPIC_API_KEY", "wrong-key-123"), ("ANTHROPIC_BASE_URL", env[1].1)];
    let out = run(&ws, &bad, &["check"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("connection: FAILED"));
    let out = run(
        &ws,
        &env,
        &["check", "--offline", "--settings", r#"{"agentfix": {"model": "from-the-editor", "maxTurns": 3}}"#],
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(
        said.contains("model: from-the-editor (editor settings)") && said.contains("maxTurns: 3 (editor settings)"),
        "{said}"
    );
    let settings = r#"{"provider": "openai", "countTokens": true}"#;
    let out = run(&ws, &[("OPENAI_API_KEY", "k")], &["check", "--offline", "--settings", settings]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("countTokens: true (editor settings; ignored: Anthropic only)"), "{said}");
    // What the effort does with the model, or why it does nothing.
    for (settings, env, line) in [
        (
            r#"{"effort": "high"}"#,
            ("ANTHROPIC_API_KEY", "k"),
            "effort: high (editor settings; extended thinking, budget_tokens 24576 on top of maxOutputTokens)",
        ),
        (
            r#"{"model": "claude-3-5-haiku-latest"}"#,
            ("AGENTFIX_EFFORT", "low"),
            "effort: low (environment; ignored: claude-3-5-haiku-latest is not known to have extended thinking)",
        ),
        (
            r#"{"provider": "openai", "model": "o4-mini", "effort": "medium"}"#,
            ("OPENAI_API_KEY", "k"),
            "effort: medium (editor settings; reasoning_effort \"medium\")",
        ),
        (
            r#"{"provider": "openai", "effort": "medium"}"#,
            ("OPENAI_API_KEY", "k"),
            "effort: medium (editor settings; ignored: gpt-4.1 is not a reasoning model)",
        ),
    ] {
        let out = run(&ws, &[env, ("ANTHROPIC_API_KEY", "k")], &["check", "--offline", "--settings", settings]);
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(said.contains(line), "{settings}: {said}");
    }
    let out = run(&ws, &[], &["check", "--offline"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("ANTHROPIC_API_KEY is NOT set"));

    let evil = workspace("baseUrl = \"http://127.0.0.1:9/steal\"\n");
    let out = run(&evil, &env, &["fix", "calc.py", "--line", "1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("may not set `baseUrl` (a repository must not choose where your API key is sent)"),
        "{}",
        stderr(&out)
    );
}

/// The text of the one system block of every request the mock received.
fn system_prompts(mock: &MockModel) -> Vec<String> {
    mock.requests()
        .iter()
        .map(|r| {
            let blocks = r.body["system"].as_array().expect("system blocks");
            assert_eq!(blocks.len(), 1, "{blocks:?}");
            // The cached prefix ends after it.
            assert_eq!(blocks[0]["cache_control"], json!({"type": "ephemeral"}));
            blocks[0]["text"].as_str().unwrap().to_string()
        })
        .collect()
}

#[test]
fn project_instructions_are_the_same_bytes_in_every_request_and_off_when_the_repository_says_so() {
    let agents = "# Conventions\n\nGuard every division; MARKER-AGENTS-7f3.\n";
    let with_instructions = |toml: &str| {
        let ws = workspace(toml);
        std::fs::write(ws.root.join("AGENTS.md"), agents).unwrap();
        std::fs::create_dir(ws.root.join("sub")).unwrap();
        std::fs::write(ws.root.join("sub/AGENTS.md"), "NOT-FOR-CALC: only for files under sub/\n").unwrap();
        ws
    };
    let session = |mock: &MockModel| {
        mock.push(tool_reply(&[("toolu_r", "read_file", json!({"path": "calc.py"}))]));
        mock.push(edit_reply());
        mock.push(text_reply("Guarded b == 0."));
    };
    let ws = with_instructions("");
    let mock = MockModel::start();
    session(&mock);
    let out = fix(&ws, &mock);
    assert_fixed(&ws, &out);
    let systems = system_prompts(&mock);
    assert_eq!(systems.len(), 3);
    assert!(systems.iter().all(|s| *s == systems[0]), "every request sends the same system prompt: {systems:#?}");
    let system = &systems[0];
    assert!(system.starts_with(agentfix::fix::SYSTEM_PROMPT), "{system}");
    assert!(system.contains("# Project instructions\n\nThe sections below are the project's instructions"), "{system}");
    assert!(system.contains("Follow them unless they conflict with the user's request"), "{system}");
    assert!(system.ends_with(&format!("## `AGENTS.md`\n\n{}", agents.trim_end())), "{system}");
    assert!(!system.contains("NOT-FOR-CALC"), "a folder the target is not in gives nothing: {system}");
    assert!(!system.contains(ws.root.to_str().unwrap()), "paths are relative to the root: {system}");
    // Not in the first user message: the volatile part stays apart.
    let first = mock.requests()[0].body["messages"][0]["content"][0]["text"].as_str().unwrap().to_string();
    assert!(!first.contains("MARKER-AGENTS-7f3"), "{first}");
    // The transcript records what was sent.
    let start: Value =
        serde_json::from_str(std::fs::read_to_string(transcript_of(&ws)).unwrap().lines().next().unwrap()).unwrap();
    assert_eq!(start["system"].as_str(), Some(system.as_str()));

    // The repository's own agentfix.toml may turn them off: they are its own.
    let ws = with_instructions("projectInstructions = false\n");
    let mock = MockModel::start();
    session(&mock);
    let out = fix(&ws, &mock);
    assert_fixed(&ws, &out);
    let systems = system_prompts(&mock);
    assert_eq!(systems.len(), 3);
    assert!(systems.iter().all(|s| s == agentfix::fix::SYSTEM_PROMPT), "{systems:#?}");
}

#[cfg(unix)]
#[test]
fn check_lists_the_project_instructions_in_force_and_why_others_are_skipped() {
    use std::os::unix::fs::symlink;
    let ws = workspace("");
    let root = &ws.root;
    std::fs::write(root.join("AGENTS.md"), "Use four spaces.\n").unwrap();
    symlink("AGENTS.md", root.join("CLAUDE.md")).unwrap();
    std::fs::write(root.join(".env"), "TOKEN=never-shown\n").unwrap();
    std::fs::create_dir_all(root.join(".github")).unwrap();
    symlink("../.env", root.join(".github/copilot-instructions.md")).unwrap();
    std::fs::create_dir_all(root.join(".cursor/rules")).unwrap();
    std::fs::write(root.join(".cursor/rules/py.mdc"), "---\nglobs: *.py\n---\nType hints everywhere.\n").unwrap();
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::write(root.join("sub/AGENTS.md"), "x".repeat(20_000)).unwrap();
    std::fs::write(root.join("sub/a.py"), "pass\n").unwrap();
    let key = [("ANTHROPIC_API_KEY", "k")];
    let out = run(&ws, &key, &["check", "--offline"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(
        said.contains("\nprojectInstructions: true (default)\n")
            && said.contains(
                "\nproject instructions for the workspace root: 1 file(s), 16 bytes in the system prompt\n\
         \x20 AGENTS.md (17 bytes)\n\
         \x20 skipped CLAUDE.md: the same file as AGENTS.md\n\
         \x20 skipped .github/copilot-instructions.md: a protected file (or a link to one); never read\n\
         \x20 skipped .cursor/rules/py.mdc: a Cursor rule only for files matching *.py\n"
            ),
        "{said}"
    );
    assert!(!said.contains("never-shown"));
    let out = run(&ws, &key, &["check", "--offline", "--target", "sub/a.py"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(said.contains("project instructions for sub/a.py: 3 file(s)"), "{said}");
    assert!(
        said.contains(
            "\n  AGENTS.md (17 bytes)\n  .cursor/rules/py.mdc (43 bytes)\n  sub/AGENTS.md (20000 bytes; cut at 16 KB)\n"
        ),
        "{said}"
    );
    let outside = tempfile::NamedTempFile::new().unwrap();
    let out = run(&ws, &key, &["check", "--offline", "--target", outside.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("is outside the workspace root"));

    let off = workspace("projectInstructions = false\n");
    std::fs::write(off.root.join("AGENTS.md"), "Use four spaces.\n").unwrap();
    let out = run(&off, &key, &["check", "--offline"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("projectInstructions: false (agentfix.toml; no instruction files are read)\n"), "{said}");
    assert!(!said.contains("AGENTS.md"), "{said}");
    let empty = workspace("");
    let out = run(&empty, &key, &["check", "--offline"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("project instructions for the workspace root: none\n"));
}

#[test]
fn schema_command_prints_the_committed_schema() {
    let ws = workspace("");
    let out = run(&ws, &[], &["schema"]);
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let committed: Value = serde_json::from_str(include_str!("../agentfix.schema.json")).unwrap();
    assert_eq!(printed, committed);
}

/// Modules of about 20 KB (some 6,000 tokens each as the mock counts) for the context tests.
const BIG_MODULES: usize = 8;

fn big_module(i: usize) -> String {
    (0..200)
        .map(|j| format!("def helper_{i}_{j:03}(values):\n    return [v * {j} + {i} for v in values]\n\n"))
        .collect()
}

/// `BIG_MODULES` reads, the edit, the summary, in the replies of `api`; returns the
/// run's output and the mock. Context edits only near the budget (`contextEditing =
/// "budget"`), which is what these sessions test.
fn context_session(api: &str, extra_env: &[(&'static str, String)], limit: Option<u64>) -> (Ws, MockModel, Output) {
    let ws = workspace("maxTurns = 20\ncontextEditing = \"budget\"\n");
    for i in 0..BIG_MODULES {
        std::fs::write(ws.root.join(format!("m{i}.py")), big_module(i)).unwrap();
    }
    let mock = MockModel::start();
    if let Some(limit) = limit {
        mock.set_context_limit(limit);
    }
    let mut env = match api {
        "anthropic" => anthropic_env(&mock),
        _ => openai_env(&mock, "openai"),
    };
    env.extend(extra_env.iter().cloned());
    for i in 0..BIG_MODULES {
        let (id, input) = (format!("call_read{i}"), json!({"path": format!("m{i}.py")}));
        mock.push(match api {
            "anthropic" => tool_reply(&[(&id.replace("call_", "toolu_"), "read_file", input)]),
            _ => openai_tools(&[(&id, "read_file", input)]),
        });
    }
    let (id, name, input) = edit_call("call_edit");
    mock.push(match api {
        "anthropic" => tool_reply(&[("toolu_edit", name, input)]),
        _ => openai_tools(&[(&id, name, input)]),
    });
    mock.push(match api {
        "anthropic" => text_reply("Guarded b == 0."),
        _ => openai_text("Guarded b == 0."),
    });
    let out = fix_with(&ws, &env);
    (ws, mock, out)
}

const STUB: &str = ": output removed to save context; call the tool again if you need it]";

#[test]
fn prompt_too_long_is_recovered_by_editing_the_context_for_both_providers() {
    for api in ["anthropic", "openai"] {
        // The eighth read no longer fits 30K: the API refuses it once, the loop stubs the
        // older reads, retries, and keeps under the measured window from then on.
        let (ws, mock, out) = context_session(api, &[], Some(30_000));
        assert_fixed(&ws, &out);
        assert!(mock.violations().is_empty(), "{api}: {:?}", mock.violations());
        let stats = mock.usage_stats();
        assert_eq!(stats.too_long, 1, "{api}: one refusal, then the measured window holds");
        assert_eq!(stats.requests as usize, BIG_MODULES + 2, "{api}: every scripted reply was used");
        let requests = mock.requests();
        let last = requests.last().unwrap().body.to_string();
        assert!(last.contains(&format!("[read_file m0.py{STUB}")), "{api}: {last:.300}");
        assert!(last.contains("def helper_7_199"), "{api}: the newest read is whole");
    }
}

#[test]
fn llama_servers_context_overflow_is_recovered_by_editing_the_context() {
    // cpp-ctx-2048: HTTP 400 exceed_context_size_error, the sizes in n_prompt_tokens and n_ctx.
    let ws = workspace("maxTurns = 20\ncontextEditing = \"budget\"\n");
    for i in 0..BIG_MODULES {
        std::fs::write(ws.root.join(format!("m{i}.py")), big_module(i)).unwrap();
    }
    let mock = MockModel::start();
    for i in 0..BIG_MODULES {
        mock.push(openai_tools(&[(&format!("call_read{i}"), "read_file", json!({"path": format!("m{i}.py")}))]));
    }
    let message = "request (40000 tokens) exceeds the available context size (30000 tokens), try increasing it";
    let body = json!({"error": {"code": 400, "message": message, "type": "exceed_context_size_error",
        "n_prompt_tokens": 40000, "n_ctx": 30000}});
    mock.push(Reply::Status { status: 400, headers: vec![], body });
    let (id, name, input) = edit_call("call_edit");
    mock.push(openai_tools(&[(&id, name, input)]));
    mock.push(openai_text("Guarded b == 0."));
    let out = fix_with(&ws, &compatible_env(&mock));
    assert_fixed(&ws, &out);
    let requests = mock.requests();
    assert_eq!(requests.len(), BIG_MODULES + 3, "{}", stderr(&out));
    let retried = requests[BIG_MODULES + 1].body.to_string();
    assert!(retried.contains(&format!("[read_file m0.py{STUB}")), "{retried:.300}");
}

#[test]
fn the_context_budget_keeps_every_request_under_it_for_both_providers() {
    for api in ["anthropic", "openai"] {
        let budget = [("AGENTFIX_CONTEXT_BUDGET", "25000".to_string())];
        let (ws, mock, out) = context_session(api, &budget, None);
        assert_fixed(&ws, &out);
        assert!(mock.violations().is_empty(), "{api}: {:?}", mock.violations());
        let stats = mock.usage_stats();
        assert!(stats.largest_request <= 25_000, "{api}: largest request {}", stats.largest_request);
        assert_eq!(stats.requests as usize, BIG_MODULES + 2);
        let last = mock.requests().last().unwrap().body.to_string();
        assert!(last.contains(&format!("[read_file m0.py{STUB}")), "{api}");

        // One whole read of a module (about 4,800 tokens) with the task does not fit 5K,
        // and there are no older turns to summarise: the run stops before sending it.
        let budget = [("AGENTFIX_CONTEXT_BUDGET", "5000".to_string())];
        let (_ws, mock, out) = context_session(api, &budget, None);
        assert_eq!(out.status.code(), Some(1), "{api}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains("would not fit the context") && err.contains("contextBudget 5000"), "{api}: {err}");
        assert!(mock.usage_stats().largest_request <= 5_000, "{api}: {}", mock.usage_stats().largest_request);
        assert!(mock.violations().is_empty(), "{api}: {:?}", mock.violations());
    }
}

/// The configured provider for the mock, as `providers::from_config` builds it from `settings`
/// (editor settings) with `key` as the provider's key.
fn provider_for(mock: &MockModel, settings: Value, key: &str) -> std::sync::Arc<dyn agentfix::providers::ModelClient> {
    let editor = agentfix::config::settings::Settings::from_json(&settings).unwrap();
    let openai = editor.provider.is_some_and(|p| p != agentfix::config::provider::ProviderKind::Anthropic);
    let editor = agentfix::config::settings::Settings {
        base_url: Some(if openai { format!("{}/v1", mock.base_url()) } else { mock.base_url() }),
        ..editor
    };
    let key = key.to_string();
    let env = move |var: &str| matches!(var, "ANTHROPIC_API_KEY" | "OPENAI_API_KEY").then(|| key.clone());
    let config = agentfix::config::Config::resolve(&Default::default(), &editor, &env).unwrap();
    agentfix::providers::from_config(&config.provider).unwrap()
}

/// A hand-written stream of a thinking turn: the thinking in several `thinking_delta`s, its
/// `signature_delta`, a text and a `read_file` call, split at every few bytes.
fn thinking_stream(signature: &str) -> Vec<Chunk> {
    let start = json!({"message": {"id": "msg_think", "type": "message", "role": "assistant", "model": null,
        "content": [], "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": null, "output_tokens": 1}}});
    let delta = |index: u64, delta: Value| sse_event("content_block_delta", json!({"index": index, "delta": delta}));
    let events = vec![
        sse_event("message_start", start),
        sse_event(
            "content_block_start",
            json!({"index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        ),
        delta(0, json!({"type": "thinking_delta", "thinking": "The file first; "})),
        delta(0, json!({"type": "thinking_delta", "thinking": "then the guard. 😀"})),
        delta(0, json!({"type": "signature_delta", "signature": signature})),
        sse_event("content_block_stop", json!({"index": 0})),
        sse_event("content_block_start", json!({"index": 1, "content_block": {"type": "text", "text": ""}})),
        delta(1, json!({"type": "text_delta", "text": "Reading."})),
        sse_event("content_block_stop", json!({"index": 1})),
        sse_event(
            "content_block_start",
            json!({"index": 2, "content_block": {"type": "tool_use", "id": "toolu_sse", "name": "read_file", "input": {}}}),
        ),
        delta(2, json!({"type": "input_json_delta", "partial_json": "{\"path\": "})),
        delta(2, json!({"type": "input_json_delta", "partial_json": "\"calc.py\"}"})),
        sse_event("content_block_stop", json!({"index": 2})),
        sse_event(
            "message_delta",
            json!({"delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 40}}),
        ),
        sse_event("message_stop", json!({})),
    ];
    split_bytes(events)
}

/// The first request of a fix, its thinking turn, and the tool result that answers it.
fn thinking_round(answer: agentfix::model::Message) -> (Vec<agentfix::model::Message>, Vec<agentfix::model::ToolSpec>) {
    use agentfix::model::{Block, Message, Role};
    let (_, tools) = counted_conversation();
    let id = answer.tool_calls().next().map(|(id, _, _)| id.to_string()).expect("a tool call");
    let messages = vec![
        Message::user_text("Fix the division in calc.py."),
        answer,
        Message {
            role: Role::User,
            content: vec![Block::ToolResult { tool_use_id: id, content: CALC.into(), is_error: false }],
            raw: None,
        },
    ];
    (messages, tools)
}

#[tokio::test]
async fn a_thinking_turn_and_its_tool_result_round_trip_through_the_provider_json_and_sse() {
    use agentfix::model::{Message, ModelRequest};
    let mock = MockModel::start();
    let model = provider_for(&mock, json!({"model": "claude-sonnet-4-5", "effort": "medium"}), API_KEY);
    let (_, tools) = counted_conversation();
    let task = vec![Message::user_text("Fix the division in calc.py.")];
    fn ask<'a>(messages: &'a [Message], tools: &'a [agentfix::model::ToolSpec]) -> ModelRequest<'a> {
        ModelRequest {
            system: "You fix code.",
            messages,
            tools,
            max_output_tokens: 1024,
            allow_tools: true,
            revisions: &[],
        }
    }
    // A message object (streamed by the mock as thinking_delta and signature_delta events)…
    let json_turn = thinking_first(tool_reply(&[("toolu_json", "read_file", json!({"path": "calc.py"}))]), "EuYBCkQ=");
    // …and a hand-written stream.
    for (scripted, raw) in [
        (Reply::Message(json_turn.clone()), Some(json_turn["content"].clone())),
        (Reply::Sse(thinking_stream("EqQBCkgIAR==")), None),
    ] {
        mock.push(scripted);
        let turn = model.complete(ask(&task, &tools), &|_| {}).await.unwrap();
        let echoed = turn.message.raw.clone().expect("the turn is kept as it came");
        assert_eq!(echoed[0]["type"], "thinking");
        if let Some(raw) = raw {
            assert_eq!(echoed, raw);
        } else {
            assert_eq!(
                echoed[0],
                json!({"type": "thinking", "thinking": "The file first; then the guard. 😀", "signature": "EqQBCkgIAR=="})
            );
        }
        let (messages, _) = thinking_round(turn.message);
        mock.push(text_reply("Guarded b == 0."));
        let done = model.complete(ask(&messages, &tools), &|_| {}).await.unwrap();
        assert_eq!(done.message.text(), "Guarded b == 0.");
        let sent = mock.requests().last().unwrap().body.clone();
        assert_eq!(sent["thinking"], json!({"type": "enabled", "budget_tokens": 8192}));
        assert_eq!(sent["max_tokens"], 1024 + 8192);
        assert_eq!(sent["messages"][1]["content"], echoed, "the thinking turn goes back verbatim");
        // The summary request too: thinking with `tool_choice: none`.
        mock.push(text_reply("Guarded b == 0."));
        let summary = ModelRequest { allow_tools: false, ..ask(&messages, &tools) };
        model.complete(summary, &|_| {}).await.unwrap();
        let sent = mock.requests().last().unwrap().body.clone();
        assert_eq!(
            (&sent["tool_choice"], &sent["thinking"]["budget_tokens"]),
            (&json!({"type": "none"}), &json!(8192))
        );
    }
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
    assert_eq!(mock.remaining(), 0);
}

#[tokio::test]
async fn a_thinking_turn_without_its_thinking_block_is_sent_without_thinking_not_refused() {
    use agentfix::model::ModelRequest;
    let mock = MockModel::start();
    let model = provider_for(&mock, json!({"model": "claude-sonnet-4-5", "effort": "low"}), API_KEY);
    let turn = thinking_first(tool_reply(&[("toolu_drop", "read_file", json!({"path": "calc.py"}))]), "EuYBCkQ=");
    let mut rebuilt = agentfix::providers::anthropic::decode_response(turn).unwrap().message;
    // The turn's start without its thinking (a history edited by its caller): with thinking on,
    // the mock refuses that as the API does, so the provider goes without thinking for it.
    rebuilt.raw.as_mut().unwrap().as_array_mut().unwrap().remove(0);
    let (messages, tools) = thinking_round(rebuilt);
    let request = ModelRequest {
        system: "You fix code.",
        messages: &messages,
        tools: &tools,
        max_output_tokens: 1024,
        allow_tools: true,
        revisions: &[],
    };
    mock.push(text_reply("Guarded b == 0."));
    model.complete(request, &|_| {}).await.unwrap();
    let sent = mock.requests().last().unwrap().body.clone();
    assert!(sent.get("thinking").is_none() && sent["max_tokens"] == 1024, "{sent}");
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
}

#[tokio::test]
async fn effort_reaches_openai_as_reasoning_effort_only_where_the_model_takes_it() {
    use agentfix::model::{Message, ModelRequest};
    let mock = MockModel::start();
    mock.set_openai_auth_optional(true);
    let messages = vec![Message::user_text("Fix the division in calc.py.")];
    let (_, tools) = counted_conversation();
    let request = ModelRequest {
        system: "You fix code.",
        messages: &messages,
        tools: &tools,
        max_output_tokens: 512,
        allow_tools: true,
        revisions: &[],
    };
    // (settings, reasoning_effort sent, the output cap's field): the mock refuses max_tokens on
    // reasoning models and reasoning_effort on GPT-4 models, as OpenAI does.
    for (settings, effort, cap) in [
        (json!({"provider": "openai", "model": "o3"}), None, "max_completion_tokens"),
        (json!({"provider": "openai", "model": "o3", "effort": "medium"}), Some("medium"), "max_completion_tokens"),
        (json!({"provider": "openai", "model": "gpt-5-mini", "effort": "high"}), Some("high"), "max_completion_tokens"),
        (json!({"provider": "openai", "model": "gpt-4.1", "effort": "high"}), None, "max_completion_tokens"),
        (json!({"provider": "openai-compatible", "model": "qwen3"}), None, "max_tokens"),
        (json!({"provider": "openai-compatible", "model": "qwen3", "effort": "low"}), Some("low"), "max_tokens"),
    ] {
        let model = provider_for(&mock, settings.clone(), API_KEY);
        mock.push(openai_text("Guarded b == 0."));
        model.complete(request, &|_| {}).await.unwrap_or_else(|e| panic!("{settings}: {e:?}"));
        let sent = mock.requests().last().unwrap().body.clone();
        assert_eq!(sent.get("reasoning_effort").and_then(Value::as_str), effort, "{settings}");
        assert_eq!(sent[cap], 512, "{settings}");
        let other = if cap == "max_tokens" { "max_completion_tokens" } else { "max_tokens" };
        assert!(sent.get(other).is_none() && sent.get("temperature").is_none(), "{settings}: {sent}");
        assert_eq!(model.output_ceiling(512), 512, "reasoning counts within the cap");
    }
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
}

/// A conversation with a tool call and a long result: system blocks, tools and cache markers
/// all count.
fn counted_conversation() -> (Vec<agentfix::model::Message>, Vec<agentfix::model::ToolSpec>) {
    use agentfix::model::{Block, Message, Role, ToolSpec};
    let messages = vec![
        Message::user_text("Fix the division in calc.py."),
        Message {
            role: Role::Assistant,
            content: vec![Block::ToolUse {
                id: "toolu_count".into(),
                name: "read_file".into(),
                input: json!({"path": "calc.py"}).into(),
            }],
            raw: None,
        },
        Message {
            role: Role::User,
            content: vec![Block::ToolResult {
                tool_use_id: "toolu_count".into(),
                content: CALC.repeat(300),
                is_error: false,
            }],
            raw: None,
        },
    ];
    let tools = vec![ToolSpec {
        name: "read_file".into(),
        description: "Read a file".into(),
        input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
    }];
    (messages, tools)
}

#[tokio::test]
async fn count_tokens_answers_what_the_request_will_report_as_its_input() {
    let mock = MockModel::start();
    mock.set_usage_model(UsageModel::cached());
    let model = provider_for(&mock, json!({"countTokens": true}), API_KEY);
    let (messages, tools) = counted_conversation();
    let request = agentfix::model::ModelRequest {
        system: "You fix code.",
        messages: &messages,
        tools: &tools,
        max_output_tokens: 1024,
        allow_tools: true,
        revisions: &[],
    };
    let counted = model.count_tokens(request).await.unwrap().expect("a count");
    assert!(mock.requests().is_empty() && mock.usage_stats().requests == 0, "a count is no model request");
    mock.push(text_reply("Guarded b == 0."));
    let response = model.complete(request, &|_| {}).await.unwrap();
    assert_eq!(response.usage.input_tokens, counted, "{:?}", response.usage);
    assert!(response.usage.cache_write_tokens > 0, "the cache markers count too: {:?}", response.usage);
    assert_eq!((mock.remaining(), mock.usage_stats().requests), (0, 1), "the count took no scripted reply");

    let counts = mock.count_requests();
    assert_eq!(counts.len(), 1);
    let (count, sent) = (&counts[0], &mock.requests()[0]);
    assert_eq!(count.path, "/v1/messages/count_tokens");
    for header in ["x-api-key", "anthropic-version", "content-type"] {
        assert_eq!(count.header(header), sent.header(header), "{header}");
    }
    assert!(count.body.get("max_tokens").is_none() && count.body.get("stream").is_none(), "{}", count.body);
    // The same prompt, field by field: system blocks, tools and cache markers included.
    for field in ["model", "system", "tools", "messages"] {
        assert_eq!(count.body[field], sent.body[field], "{field}");
    }
}

#[tokio::test]
async fn count_tokens_sends_nothing_when_the_setting_is_off_or_the_provider_has_no_endpoint() {
    let mock = MockModel::start();
    let (messages, tools) = counted_conversation();
    let request = agentfix::model::ModelRequest {
        system: "You fix code.",
        messages: &messages,
        tools: &tools,
        max_output_tokens: 1024,
        allow_tools: true,
        revisions: &[],
    };
    for settings in [
        json!({}),
        json!({"countTokens": false}),
        json!({"provider": "openai", "countTokens": true}),
        json!({"provider": "openai-compatible", "countTokens": true}),
    ] {
        let model = provider_for(&mock, settings.clone(), API_KEY);
        assert_eq!(model.count_tokens(request).await, Ok(None), "{settings}");
    }
    assert!(mock.count_requests().is_empty() && mock.requests().is_empty());
}

#[tokio::test]
async fn a_refused_count_is_a_model_error_without_the_key_and_is_not_retried() {
    use agentfix::model::{Message, ModelErrorKind, ModelRequest};
    let mock = MockModel::start();
    // Both requests are refused on purpose.
    mock.expect_violations();
    let messages = vec![Message::user_text("hi")];
    let request = ModelRequest {
        system: "s",
        messages: &messages,
        tools: &[],
        max_output_tokens: 16,
        allow_tools: true,
        revisions: &[],
    };
    let wrong = "sk-ant-wrong-key-0123456789";
    let e = provider_for(&mock, json!({"countTokens": true}), wrong).count_tokens(request).await.unwrap_err();
    assert_eq!((e.kind, e.status), (ModelErrorKind::Auth, Some(401)), "{e:?}");
    assert!(e.message.contains("ANTHROPIC_API_KEY was rejected") && !e.message.contains(wrong), "{}", e.message);
    let model = provider_for(&mock, json!({"countTokens": true}), API_KEY);
    let e = model.count_tokens(ModelRequest { messages: &[], ..request }).await.unwrap_err();
    assert_eq!((e.kind, e.status), (ModelErrorKind::InvalidRequest, Some(400)), "{e:?}");
    assert!(e.message.contains("messages: List should have at least 1 item"), "{}", e.message);
    assert_eq!(mock.count_requests().len(), 2, "a 4xx is not retried");
    assert!(mock.requests().is_empty());
}

/// The edit first, then `turns` turns of long reasoning with a small `grep` each, then the
/// summary, in the replies of `api`.
fn talkative_session(api: &str, turns: usize) -> Vec<Reply> {
    let (id, name, input) = edit_call("call_edit");
    let mut replies = vec![match api {
        "anthropic" => tool_reply(&[("toolu_edit", name, input)]),
        _ => openai_tools(&[(&id, name, input)]),
    }];
    for i in 0..turns {
        let thought = format!("Step {i}: {}", "I am weighing what else could divide by zero here. ".repeat(120));
        let input = json!({"pattern": format!("helper_{i}")});
        replies.push(match api {
            "anthropic" => message(
                json!([{"type": "text", "text": thought}, {"type": "tool_use", "id": format!("toolu_grep{i}"), "name": "grep", "input": input}]),
                "tool_use",
            ),
            _ => openai_message(
                json!({"content": thought, "tool_calls": [{"id": format!("call_grep{i}"), "type": "function", "function": {"name": "grep", "arguments": input.to_string()}}]}),
                "tool_calls",
            ),
        });
    }
    replies.push(match api {
        "anthropic" => text_reply("Guarded b == 0."),
        _ => openai_text("Guarded b == 0."),
    });
    replies
}

#[test]
fn with_effort_a_compacted_turn_goes_on_without_thinking_as_the_api_requires() {
    // As in the compaction test below: past 80 % of 12,000 the older turns are summarised.
    let ws = workspace("maxTurns = 30\n");
    let mock = MockModel::start();
    mock.set_summary_reply("Guarded the division in calc.py; searched the helpers; none left.");
    let mut replies = talkative_session("anthropic", 14);
    // The turn's first message thinks, as Claude does; compaction will not keep it.
    replies[0] = Reply::Message(thinking_first(replies.remove(0), "EqQBCkgIAR=="));
    mock.push_all(replies);
    let mut env = anthropic_env(&mock);
    env.push(("AGENTFIX_CONTEXT_BUDGET", "12000".into()));
    env.push(("AGENTFIX_EFFORT", "low".into()));
    let out = fix_with(&ws, &env);
    assert_fixed(&ws, &out);
    // Sending thinking after the compaction would have been refused (the turn no longer starts
    // with its thinking block): the mock saw no such request.
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
    let requests = mock.requests();
    let compaction = requests.iter().position(|r| r.body["tool_choice"]["type"] == "none").expect("a compaction");
    let thinks = |r: &Recorded| r.body["thinking"] == json!({"type": "enabled", "budget_tokens": 2048});
    assert!(requests[..=compaction].iter().all(thinks), "before, and the compaction request itself");
    let after = &requests[compaction + 1..];
    assert!(!after.is_empty() && after.iter().all(|r| r.body.get("thinking").is_none()));
    // Without thinking, max_tokens is what the loop asks: 8192, or 2048 for a later compaction.
    let asked = |r: &Recorded| if r.body["tool_choice"]["type"] == "none" { 2048 } else { 8192 };
    assert!(after.iter().all(|r| r.body["max_tokens"] == asked(r)), "no budget, no extra room");
}

#[test]
fn compaction_summarises_older_turns_and_keeps_the_overlays_changes_for_both_providers() {
    for api in ["anthropic", "openai"] {
        // About 1,500 tokens of reasoning a turn and nothing to stub: past 80 % of a
        // 12,000 budget the older turns are summarised; the early edit survives.
        let ws = workspace("maxTurns = 30\n");
        let mock = MockModel::start();
        let summary = "Guarded the division in calc.py; searched the helpers for other divisions; none left.";
        mock.set_summary_reply(summary);
        mock.push_all(talkative_session(api, 14));
        let mut env = match api {
            "anthropic" => anthropic_env(&mock),
            _ => openai_env(&mock, "openai"),
        };
        env.push(("AGENTFIX_CONTEXT_BUDGET", "12000".into()));
        let out = fix_with(&ws, &env);
        assert_fixed(&ws, &out);
        assert!(mock.violations().is_empty(), "{api}: {:?}", mock.violations());
        assert_eq!(mock.remaining(), 0, "{api}: every scripted reply was used");
        let requests = mock.requests();
        let none = |r: &&Recorded| match api {
            "anthropic" => r.body["tool_choice"]["type"] == "none",
            _ => r.body["tool_choice"] == "none",
        };
        let at = requests.iter().position(|r| none(&r)).unwrap_or_else(|| panic!("{api}: no compaction request"));
        let after = requests[at + 1].body.to_string();
        assert!(after.contains(summary), "{api}: {after:.400}");
        // The diff of the run's change is in the first message after compaction.
        assert!(after.contains("Files this run has changed so far"), "{api}");
        assert!(after.contains("+    if b == 0:"), "{api}");
        assert!(!after.contains("Step 0: "), "{api}: the older turns are gone");
        let stats = mock.usage_stats();
        assert!(stats.largest_request <= 12_000, "{api}: largest request {}", stats.largest_request);
        assert!(stderr(&out).contains("summarised"), "{api}: {}", stderr(&out));
    }
}

#[test]
fn the_first_message_quotes_the_target_without_the_key_or_high_confidence_credentials() {
    let ws = workspace("");
    let text = format!(
        "KEY = \"{API_KEY}\"\nGITHUB = \"ghp_abcdefghijklmnopqrstuvwxyz0123456789\"\ntoken = \"t0k3n-fixture\"\n{CALC}"
    );
    std::fs::write(ws.root.join("calc.py"), text).unwrap();
    let mock = MockModel::start();
    mock.push(text_reply("Nothing to change."));
    let out = fix(&ws, &mock);
    let requests = mock.requests();
    assert_eq!(requests.len(), 1, "{}", stderr(&out));
    let first = requests[0].body["messages"][0].to_string();
    assert!(first.contains("KEY = \\\"[REDACTED]\\\""), "{first}");
    assert!(first.contains("GITHUB = \\\"[REDACTED]\\\""), "{first}");
    // An assignment the model may have to edit stays as the file has it.
    assert!(first.contains("token = \\\"t0k3n-fixture\\\""), "{first}");
    assert!(!mock.requests_text().contains(API_KEY));
}
