//! `agentfix acp` end to end: an independent ACP client (the Python
//! `agent-client-protocol` package, `tests/acp/client.py`) drives the built
//! binary against the mock model, and checks every raw message agentfix
//! sends against the ACP JSON schema the spec publishes (from the npm
//! `@agentclientprotocol/sdk`), strictly: a property the schema does not
//! define is a violation. `tests/acp/install.sh` installs both (`.ci/run`
//! runs it); without them each test says `SKIPPED (needs …)` and passes,
//! but under CI it fails.

mod common;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::mcp_http::HttpServer;
use common::mock_model::{self, MockModel, Reply, sse_events, stalled, text_reply, tool_reply};
use serde_json::{Value, json};

const CALC: &str = "def div(a, b):\n    return a / b\n";
const FIXED: &str =
    "def div(a, b):\n    if b == 0:\n        raise ZeroDivisionError(\"b is zero\")\n    return a / b\n";

/// The schema file and the Python client, when installed; else `None`
/// after a `SKIPPED` line (a failure under CI, where .ci/run installs them).
fn client(test: &str) -> Option<PathBuf> {
    let schema = std::env::var_os("AGENTFIX_ACP_SCHEMA").map(PathBuf::from).unwrap_or_else(|| {
        let cache = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache"));
        cache.join("agentfix/acp-sdk-2.4.0/schema.json")
    });
    let python =
        Command::new("python3").args(["-c", "import acp, jsonschema"]).output().is_ok_and(|o| o.status.success());
    if python && schema.is_file() {
        return Some(schema);
    }
    let needs = "the Python agent-client-protocol client and the ACP schema; install: bash tests/acp/install.sh";
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{needs} are missing, but .ci/run installs them: the install step failed");
    }
    let line = format!("SKIPPED (needs {needs}): {test} did not run");
    println!("{line}");
    let _ = writeln!(std::io::stderr(), "{line}");
    None
}

/// A temporary folder with the workspace `ws/` (and the runs' cache beside
/// it); `calc.py` in the workspace.
fn workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap().join("ws");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("calc.py"), CALC).unwrap();
    (dir, root)
}

/// Runs the client's `script` against `agentfix acp [args]` in `root`,
/// returns its report after checking that it found no violation and that
/// agentfix exited 0 when stdin closed; the report's `log` is agentfix's
/// stderr (at `agentfix=debug`).
fn drive(schema: &Path, root: &Path, mock: &MockModel, script: Value, args: &[&str]) -> Value {
    let home = root.parent().unwrap();
    let file = home.join("script.json");
    std::fs::write(&file, script.to_string()).unwrap();
    let mut cmd = Command::new("python3");
    cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/acp/client.py"))
        .arg("--schema")
        .arg(schema)
        .arg("--script")
        .arg(&file)
        .arg("--")
        .arg(common::agentfix_bin())
        .arg("acp")
        .args(args)
        .current_dir(root);
    common::without_provider_env(&mut cmd);
    cmd.env("ANTHROPIC_API_KEY", mock_model::API_KEY)
        .env("ANTHROPIC_BASE_URL", mock.base_url())
        .env("AGENTFIX_DEFAULT_LANGUAGE_SERVERS", "0")
        .env("XDG_CACHE_HOME", home.join("cache"))
        .env("HOME", home.join("home"))
        .env("AGENTFIX_LOG", "agentfix=debug");
    let out = cmd.output().expect("python3 runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the client failed:\n{stderr}");
    let mut report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("the client's report is not JSON ({e}):\n{}\n{stderr}", String::from_utf8_lossy(&out.stdout))
    });
    let violations = report["violations"].as_array().unwrap();
    assert!(violations.is_empty(), "protocol violations:\n{}\n\nagentfix's log:\n{stderr}", pretty(violations));
    assert_eq!(report["exitCode"], 0, "{stderr}");
    if std::env::var_os("ACP_TEST_LOG").is_some() {
        eprintln!("{stderr}");
    }
    report["log"] = Value::String(stderr.into_owned());
    report
}

fn pretty(v: &[Value]) -> String {
    v.iter().map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string)).collect::<Vec<_>>().join("\n")
}

fn text(t: &str) -> Value {
    json!({"type": "text", "text": t})
}

/// The `update`s of prompt `i` whose `sessionUpdate` is `kind`.
fn updates<'a>(report: &'a Value, i: usize, kind: &str) -> Vec<&'a Value> {
    report["prompts"][i]["updates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| &n["update"])
        .filter(|u| u["sessionUpdate"] == kind)
        .collect()
}

/// The text of prompt `i`'s message chunks.
fn said(report: &Value, i: usize) -> String {
    updates(report, i, "agent_message_chunk").iter().filter_map(|u| u["content"]["text"].as_str()).collect()
}

fn push_fix(mock: &MockModel) {
    mock.push(tool_reply(&[("toolu_1", "read_file", json!({"path": "calc.py"}))]));
    mock.push(tool_reply(&[(
        "toolu_2",
        "edit_file",
        json!({"path": "calc.py", "old_text": "    return a / b\n", "new_text": "    if b == 0:\n        raise ZeroDivisionError(\"b is zero\")\n    return a / b\n"}),
    )]));
    mock.push(text_reply("Raise a clear error when b is zero."));
}

#[test]
fn a_fix_reads_edits_and_ends_its_turn_with_the_proposal_written_once_allowed() {
    let Some(schema) = client("a_fix_reads_edits_and_ends_its_turn_with_the_proposal_written_once_allowed") else {
        return;
    };
    let (_d, root) = workspace();
    let mock = MockModel::start();
    push_fix(&mock);
    let calc = root.join("calc.py");
    let script = json!({
        "cwd": root,
        "permissions": ["allow-once"],
        "prompts": [{"content": [text("fix the error on line 2 of calc.py")]}],
    });
    let report = drive(&schema, &root, &mock, script, &[]);
    assert_eq!(report["initialize"]["agentInfo"], json!({"name": "agentfix", "version": env!("CARGO_PKG_VERSION")}));
    assert_eq!(report["initialize"]["protocolVersion"], 1);
    assert_eq!(report["initialize"]["agentCapabilities"]["promptCapabilities"]["embeddedContext"], true);
    assert_eq!(report["initialize"]["agentCapabilities"]["loadSession"], false);
    let prompt = &report["prompts"][0];
    assert_eq!(prompt["stopReason"], "end_turn", "{prompt}");
    let calls = updates(&report, 0, "tool_call");
    let read = calls.iter().find(|c| c["toolCallId"] == "toolu_1").expect("the read's tool_call");
    // `status` left out is `pending`, the default.
    assert_eq!(
        (&read["kind"], &read["title"], &read["status"]),
        (&json!("read"), &json!("Read calc.py"), &Value::Null)
    );
    assert_eq!(read["locations"], json!([{"path": calc}]));
    let edit = calls.iter().find(|c| c["toolCallId"] == "toolu_2").expect("the edit's tool_call");
    assert_eq!(edit["kind"], "edit");
    let done = updates(&report, 0, "tool_call_update");
    let edited = done.iter().find(|u| u["toolCallId"] == "toolu_2" && u["status"] == "completed").unwrap();
    assert_eq!(edited["content"], json!([{"type": "diff", "path": calc, "oldText": CALC, "newText": FIXED}]));
    // The proposal: one edit call with the whole diff, allowed, then written.
    let proposal = calls.iter().find(|c| c["title"] == "Proposed changes: calc.py").expect("the proposal's tool_call");
    assert_eq!(proposal["content"], json!([{"type": "diff", "path": calc, "oldText": CALC, "newText": FIXED}]));
    assert_eq!(report["permissions"][0]["toolCallId"], proposal["toolCallId"]);
    assert_eq!(report["permissions"][0]["options"], json!(["allow-once", "allow-always", "reject"]));
    assert_eq!(report["writes"], json!([{"path": calc, "content": FIXED}]));
    let text = said(&report, 0);
    assert!(text.contains("Let me look.") && text.contains("Raise a clear error when b is zero."), "{text}");
    assert!(text.contains("Wrote the proposal to 1 file"), "{text}");
    // The client's read went through fs/read_text_file; the disk is the client's business.
    assert_eq!(report["reads"], json!([calc]));
    assert_eq!(std::fs::read_to_string(&calc).unwrap(), CALC);
    assert!(!updates(&report, 0, "usage_update").is_empty());
}

/// The tool results of the mock's request `n` (0-based): text and error flag.
fn results(mock: &MockModel, n: usize) -> Vec<(String, bool)> {
    let body = &mock.requests()[n].body;
    let last = body["messages"].as_array().unwrap().last().unwrap();
    let blocks = last["content"].as_array().unwrap();
    let result = |b: &Value| {
        let text = b["content"].as_str().map_or_else(|| b["content"].to_string(), str::to_string);
        (text, b["is_error"] == true)
    };
    blocks.iter().filter(|b| b["type"] == "tool_result").map(result).collect()
}

#[test]
fn the_model_reads_the_client_s_unsaved_buffer_through_fs_read_text_file() {
    let Some(schema) = client("the_model_reads_the_client_s_unsaved_buffer_through_fs_read_text_file") else { return };
    let (_d, root) = workspace();
    let mock = MockModel::start();
    mock.push(tool_reply(&[("toolu_1", "read_file", json!({"path": "calc.py"}))]));
    mock.push(text_reply("The buffer already guards b."));
    let calc = root.join("calc.py");
    let unsaved = "def div(a, b):\n    return a / b if b else UNSAVED\n";
    let script = json!({
        "cwd": root,
        "buffers": {calc.to_str().unwrap(): unsaved},
        "prompts": [{"content": [text("calc.py:2:12: error: division by zero")]}],
    });
    let report = drive(&schema, &root, &mock, script, &[]);
    assert_eq!(report["prompts"][0]["stopReason"], "end_turn");
    assert_eq!(report["reads"], json!([calc]), "one read: the overlay pins the text it read");
    // The first message quotes the buffer and the pasted error is the problem.
    let first = mock.requests()[0].body["messages"][0].to_string();
    assert!(first.contains("UNSAVED") && first.contains("error: division by zero"), "{first}");
    let (read, failed) = results(&mock, 1).remove(0);
    assert!(!failed && read.contains("UNSAVED"), "{read}");
    assert!(said(&report, 0).contains("No edit proposed."), "{}", said(&report, 0));
    assert_eq!(report["writes"], json!([]));
}

#[test]
fn a_command_asks_for_permission_with_its_argv_and_a_refusal_fails_the_call() {
    let Some(schema) = client("a_command_asks_for_permission_with_its_argv_and_a_refusal_fails_the_call") else {
        return;
    };
    let (_d, root) = workspace();
    let mock = MockModel::start();
    mock.push(tool_reply(&[("toolu_1", "run_command", json!({"name": "test"}))]));
    mock.push(text_reply("I could not run the tests."));
    let script = json!({
        "cwd": root,
        "permissions": ["reject"],
        "prompts": [{"content": [text("fix line 2 of calc.py")]}],
    });
    let settings = json!({"commands": {"test": ["python3", "-m", "pytest", "-q", "a b"]}}).to_string();
    let report = drive(&schema, &root, &mock, script, &["--settings", &settings]);
    let asked = &report["permissions"][0];
    assert_eq!(asked["toolCallId"], "toolu_1");
    assert_eq!(asked["title"], "Run `python3 -m pytest -q 'a b'` (command `test`) in a scratch copy of the workspace");
    assert_eq!(asked["options"], json!(["allow-once", "allow-always", "reject"]));
    let call = updates(&report, 0, "tool_call").into_iter().find(|c| c["toolCallId"] == "toolu_1").unwrap();
    assert_eq!(call["kind"], "execute");
    let last = updates(&report, 0, "tool_call_update").into_iter().rfind(|u| u["toolCallId"] == "toolu_1");
    assert_eq!(last.unwrap()["status"], "failed");
    let (said_to_model, failed) = results(&mock, 1).remove(0);
    assert!(failed, "{said_to_model}");
    assert_eq!(report["prompts"][0]["stopReason"], "end_turn");
}

#[test]
fn a_cancel_mid_stream_ends_the_prompt_cancelled() {
    let Some(schema) = client("a_cancel_mid_stream_ends_the_prompt_cancelled") else { return };
    let (_d, root) = workspace();
    let mock = MockModel::start();
    let Reply::Message(message) = text_reply("Thinking about it for a long time") else { unreachable!() };
    // The text's first delta (after message_start, content_block_start and
    // ping), then a stall the cancel must not wait for.
    mock.push(Reply::Sse(stalled(sse_events(&message), 4, std::time::Duration::from_secs(60))));
    let script = json!({
        "cwd": root,
        "prompts": [{"content": [text("fix line 2 of calc.py")], "cancelOn": "agent_message_chunk"}],
    });
    let started = std::time::Instant::now();
    let report = drive(&schema, &root, &mock, script, &[]);
    assert_eq!(report["prompts"][0]["stopReason"], "cancelled", "{}", report["prompts"][0]);
    assert!(started.elapsed() < std::time::Duration::from_secs(30), "{:?}", started.elapsed());
    assert!(said(&report, 0).contains("Cancelled; nothing was changed."), "{}", said(&report, 0));
    assert_eq!(report["writes"], json!([]));
}

#[test]
fn a_later_prompt_follows_up_on_the_same_conversation() {
    let Some(schema) = client("a_later_prompt_follows_up_on_the_same_conversation") else { return };
    let (_d, root) = workspace();
    let mock = MockModel::start();
    push_fix(&mock);
    mock.push(text_reply("Negative numbers divide fine."));
    let script = json!({
        "cwd": root,
        "permissions": ["allow-always"],
        "prompts": [
            {"content": [text("fix the error on line 2 of calc.py")]},
            {"content": [text("also handle negative numbers")]},
        ],
    });
    let report = drive(&schema, &root, &mock, script, &[]);
    assert_eq!(report["prompts"][1]["stopReason"], "end_turn", "{}", report["prompts"][1]);
    let requests = mock.requests();
    assert_eq!(requests.len(), 4);
    let messages = requests[3].body["messages"].as_array().unwrap();
    // The first run's conversation, unchanged, then the follow-up.
    let before = requests[2].body["messages"].as_array().unwrap();
    assert_eq!((before.len(), messages.len()), (5, 7), "the answer and the follow-up added");
    // The same, but for the rolling cache breakpoints.
    let plain =
        |m: &[Value]| Value::Array(m.to_vec()).to_string().replace(r#","cache_control":{"type":"ephemeral"}"#, "");
    assert_eq!(plain(&messages[..5]), plain(before));
    let follow = messages.last().unwrap().to_string();
    assert!(follow.contains("The user follows up on your previous fix"), "{follow}");
    assert!(
        follow.contains("`calc.py`: your proposal was applied in full"),
        "the client holds the written text: {follow}"
    );
    assert!(follow.contains("also handle negative numbers"), "{follow}");
    // "Always" held for the session: one question for two proposals' worth of writes.
    assert_eq!(report["permissions"].as_array().unwrap().len(), 1);
}

#[test]
fn an_mcp_server_of_session_new_gives_the_model_its_tools() {
    let Some(schema) = client("an_mcp_server_of_session_new_gives_the_model_its_tools") else { return };
    let (_d, root) = workspace();
    let mock = MockModel::start();
    mock.push(tool_reply(&[
        ("toolu_1", "mcp__test__lookup", json!({"query": "q"})),
        ("toolu_2", "mcp__test__write_note", json!({"text": "hi"})),
    ]));
    mock.push(text_reply("Looked it up."));
    let server = json!({
        "name": "test",
        "command": common::example("mcp_test_server"),
        "args": [],
        "env": [{"name": "MCP_TEST_EXTRA", "value": "x1"}],
    });
    let script = json!({
        "cwd": root,
        "mcpServers": [server],
        "permissions": ["allow-once"],
        "prompts": [{"content": [text("fix line 2 of calc.py")]}],
    });
    let report = drive(&schema, &root, &mock, script, &[]);
    let tools = mock.requests()[0].body["tools"].to_string();
    assert!(tools.contains("mcp__test__lookup") && tools.contains("mcp__test__write_note"), "{tools}");
    let results = results(&mock, 1);
    assert_eq!(results[0], ("found q (key unset, extra x1)".to_string(), false), "read-only: run without asking");
    assert!(!results[1].1, "allowed once: {results:?}");
    let asked = report["permissions"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "only the tool that is not read-only asks: {asked:?}");
    assert_eq!(
        (&asked[0]["toolCallId"], &asked[0]["title"]),
        (&json!("toolu_2"), &json!("Call the MCP tool `mcp__test__write_note`"))
    );
    let calls = updates(&report, 0, "tool_call");
    assert!(calls.iter().filter(|c| c["toolCallId"] != "toolu_0").all(|c| c["kind"] == "fetch"), "{calls:?}");
    assert_eq!(calls[0]["title"], "test: lookup");
}

#[test]
fn an_http_mcp_server_of_session_new_serves_the_model_with_the_client_s_headers_as_sent() {
    let Some(schema) = client("an_http_mcp_server_of_session_new_serves_the_model_with_the_client_s_headers_as_sent")
    else {
        return;
    };
    let (_d, root) = workspace();
    // The client's value as it sent it: expanded against agentfix's
    // environment (HOME is set), it would be refused.
    let token = "acp-t0ken-${env:HOME}";
    let http = HttpServer::start(token, &root.parent().unwrap().join("http.log"));
    let mock = MockModel::start();
    mock.push(tool_reply(&[
        ("toolu_1", "mcp__web__lookup", json!({"query": "q"})),
        ("toolu_2", "mcp__web__lookup", json!({"query": "auth"})),
    ]));
    mock.push(text_reply("Looked it up."));
    let server = json!({
        "type": "http",
        "name": "web",
        "url": http.url,
        "headers": [{"name": "Authorization", "value": format!("Bearer {token}")}],
    });
    let script = json!({
        "cwd": root,
        "mcpServers": [server],
        "prompts": [{"content": [text("fix line 2 of calc.py")]}],
    });
    let report = drive(&schema, &root, &mock, script, &[]);
    let log = report["log"].as_str().unwrap();
    let mcp = &report["initialize"]["agentCapabilities"]["mcpCapabilities"];
    assert_eq!((&mcp["http"], &mcp["sse"]), (&json!(true), &json!(false)), "{mcp}");
    assert_eq!(report["prompts"][0]["stopReason"], "end_turn", "{log}");
    let tools = mock.requests()[0].body["tools"].to_string();
    assert!(tools.contains("mcp__web__lookup") && tools.contains("mcp__web__write_note"), "{tools}\n{log}");
    // The tool's result reached the model; the echoed header is scrubbed.
    let got = results(&mock, 1);
    assert_eq!(got[0], ("found q over http".to_string(), false), "{log}");
    assert_eq!(got[1], ("auth header: [REDACTED]".to_string(), false));
    let auth = http.auth();
    assert!(!auth.is_empty() && auth.iter().all(|l| l == "auth ok"), "{auth:?}");
    let calls = updates(&report, 0, "tool_call");
    let lookup = calls.iter().find(|c| c["toolCallId"] == "toolu_1").unwrap();
    assert_eq!((&lookup["kind"], &lookup["title"]), (&json!("fetch"), &json!("web: lookup")));
    assert!(log.contains("MCP server connected"), "{log}");
    let everything = format!("{log}{}", report["raw"]);
    assert!(!everything.contains("acp-t0ken"), "the header's value is in no log and no message: {everything}");
}

#[test]
fn an_sse_mcp_server_of_session_new_is_skipped_with_a_warning_and_the_turn_goes_on() {
    let Some(schema) = client("an_sse_mcp_server_of_session_new_is_skipped_with_a_warning_and_the_turn_goes_on") else {
        return;
    };
    let (_d, root) = workspace();
    let mock = MockModel::start();
    mock.push(text_reply("Nothing to change."));
    let server = json!({
        "type": "sse",
        "name": "old",
        "url": "http://127.0.0.1:9/sse-path",
        "headers": [{"name": "Authorization", "value": "Bearer sse-s3cret"}],
    });
    let script = json!({
        "cwd": root,
        "mcpServers": [server],
        "prompts": [{"content": [text("fix line 2 of calc.py")]}],
    });
    let report = drive(&schema, &root, &mock, script, &[]);
    let log = report["log"].as_str().unwrap();
    assert_eq!(report["prompts"][0]["stopReason"], "end_turn", "{log}");
    assert!(
        log.contains(
            "MCP server `old` of session/new skipped: agentfix does not support the legacy HTTP+SSE transport"
        ),
        "{log}"
    );
    assert!(!log.contains("sse-s3cret") && !log.contains("sse-path"), "neither its headers nor its url: {log}");
    let tools = mock.requests()[0].body["tools"].to_string();
    assert!(!tools.contains("mcp__old"), "{tools}");
}

#[test]
fn a_client_without_fs_gets_the_proposal_as_a_diff_and_nothing_is_written() {
    let Some(schema) = client("a_client_without_fs_gets_the_proposal_as_a_diff_and_nothing_is_written") else {
        return;
    };
    let (_d, root) = workspace();
    let mock = MockModel::start();
    push_fix(&mock);
    let calc = root.join("calc.py");
    let script = json!({
        "cwd": root,
        "fs": {"read": false, "write": false},
        "prompts": [{"content": [text("fix the error on line 2 of calc.py")]}],
    });
    let report = drive(&schema, &root, &mock, script, &[]);
    assert_eq!(report["prompts"][0]["stopReason"], "end_turn");
    assert_eq!((&report["reads"], &report["writes"], &report["permissions"]), (&json!([]), &json!([]), &json!([])));
    let calls = updates(&report, 0, "tool_call");
    let proposal = calls.iter().find(|c| c["title"] == "Proposed changes: calc.py").unwrap();
    assert_eq!(proposal["content"], json!([{"type": "diff", "path": calc, "oldText": CALC, "newText": FIXED}]));
    let text = said(&report, 0);
    assert!(text.contains("this client cannot write files (no fs.writeTextFile), so nothing was written"), "{text}");
    assert_eq!(std::fs::read_to_string(&calc).unwrap(), CALC, "read from the disk, never written");
}

#[test]
fn a_verify_command_asks_as_a_check_and_its_line_leads_the_last_message() {
    let Some(schema) = client("a_verify_command_asks_as_a_check_and_its_line_leads_the_last_message") else {
        return;
    };
    let (_d, root) = workspace();
    let mock = MockModel::start();
    push_fix(&mock);
    let script = json!({
        "cwd": root,
        // The check's command, then the proposal's write.
        "permissions": ["reject", "allow-once"],
        "prompts": [{"content": [text("fix the error on line 2 of calc.py")]}],
    });
    let settings = json!({"commands": {"test": ["true"]}, "verify": {"commands": ["test"], "rounds": 1}}).to_string();
    let report = drive(&schema, &root, &mock, script, &["--settings", &settings]);
    let asked = report["permissions"].as_array().unwrap();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert_eq!(asked[0]["title"], "Run `true` (command `test`) in a scratch copy of the workspace");
    let check =
        updates(&report, 0, "tool_call").into_iter().find(|c| c["toolCallId"] == asked[0]["toolCallId"]).unwrap();
    assert_eq!((&check["kind"], &check["title"]), (&json!("execute"), &json!("Check: run `true`")));
    let text = said(&report, 0);
    let last =
        updates(&report, 0, "agent_message_chunk").last().unwrap()["content"]["text"].as_str().unwrap().to_string();
    assert!(last.trim_start().starts_with("not verified: "), "the check's line first: {last}\n{text}");
    assert!(last.contains("Wrote the proposal to 1 file"), "{last}");
}
