//! Symbol tools and diagnostics feedback through a downstream language
//! server: the fake server (`examples/fake_lsp.rs`) for deterministic
//! protocol, timeout, crash and restart cases.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use common::mock_model::*;
use common::{agentfix_bin, tool_results};
use serde_json::{Value, json};

const CALC: &str = "class Calc:\n    def add(self, a, b):\n        return a + b\n\n    def div(self, a, b):\n        return a / b\n\nvalue = ERROR\n";
const MAIN: &str = "from calc import Calc\n\nprint(Calc().div(1, 2))\nprint(Calc().div(3, 4))\n";

struct Ws {
    _dir: tempfile::TempDir,
    root: PathBuf,
    log: PathBuf,
}

fn workspace() -> Ws {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let root = base.join("ws");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("calc.py"), CALC).unwrap();
    std::fs::write(root.join("main.py"), MAIN).unwrap();
    Ws { _dir: dir, root, log: base.join("fake_lsp.log") }
}

fn servers(extra_env: &[(&str, &str)]) -> String {
    let mut env = serde_json::Map::new();
    for (k, v) in extra_env {
        env.insert(k.to_string(), json!(v));
    }
    // The fake server takes its faults from the environment: wrap it in `env`.
    let mut command = vec!["env".to_string()];
    command.extend(extra_env.iter().map(|(k, v)| format!("{k}={v}")));
    command.push(common::example("fake_lsp").to_string_lossy().into_owned());
    json!({"python": {"command": command}}).to_string()
}

fn fix(ws: &Ws, mock: &MockModel, extra: &[(&str, &str)], line: &str) -> Output {
    let out = fix_command(ws, mock, extra, line).output().unwrap();
    eprintln!("agentfix stderr:\n{}", String::from_utf8_lossy(&out.stderr));
    out
}

fn fix_command(ws: &Ws, mock: &MockModel, extra: &[(&str, &str)], line: &str) -> Command {
    fix_command_with(ws, mock, extra, &["--line", line])
}

/// `agentfix fix calc.py ARGS…` with the fake server.
fn fix_command_with(ws: &Ws, mock: &MockModel, extra: &[(&str, &str)], args: &[&str]) -> Command {
    let mut cmd = Command::new(agentfix_bin());
    cmd.current_dir(&ws.root).args(["fix", "calc.py"]).args(args);
    for (k, _) in std::env::vars() {
        if k.starts_with("ANTHROPIC_") || k.starts_with("AGENTFIX_") || k.starts_with("FAKE_LSP") {
            cmd.env_remove(k);
        }
    }
    let mut fake_env = vec![("FAKE_LSP_LOG", ws.log.to_str().unwrap())];
    fake_env.extend(extra.iter().copied().filter(|(k, _)| k.starts_with("FAKE_LSP")));
    cmd.env("ANTHROPIC_API_KEY", API_KEY)
        .env("ANTHROPIC_BASE_URL", mock.base_url())
        .env("AGENTFIX_TRANSCRIPTS", "0")
        .env("AGENTFIX_DEFAULT_LANGUAGE_SERVERS", "0")
        .env("AGENTFIX_LANGUAGE_SERVERS", servers(&fake_env))
        .envs(extra.iter().copied().filter(|(k, _)| !k.starts_with("FAKE_LSP")));
    cmd
}

fn log_of(ws: &Ws) -> String {
    std::fs::read_to_string(&ws.log).unwrap_or_default()
}

#[test]
fn symbol_tools_answer_by_name_and_line() {
    let ws = workspace();
    let mock = MockModel::start();
    mock.push(tool_reply(&[
        ("t_outline", "document_symbols", json!({"path": "calc.py"})),
        ("t_def", "find_definition", json!({"path": "main.py", "line": 3, "symbol": "div"})),
        ("t_refs", "find_references", json!({"path": "main.py", "line": 3, "symbol": "div"})),
        ("t_hover", "hover", json!({"path": "main.py", "line": 3, "symbol": "Calc"})),
        ("t_ws", "workspace_symbols", json!({"query": "Cal"})),
        ("t_miss", "find_definition", json!({"path": "main.py", "line": 3, "symbol": "nope"})),
    ]));
    mock.push(text_reply("Looked around."));
    let out = fix(&ws, &mock, &[], "6");
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
    let r = tool_results(&mock);
    assert_eq!(
        r["t_outline"].0,
        "Outline of calc.py:\nclass Calc (lines 1-6)\n  method add (lines 2-3)\n  method div (lines 5-6)\n"
    );
    assert_eq!(r["t_def"].0, "Definitions of `div` (main.py:3):\ncalc.py:5: def div(self, a, b):\n");
    assert_eq!(
        r["t_refs"].0,
        "References of `div` (main.py:3):\ncalc.py:5: def div(self, a, b):\nmain.py:3: print(Calc().div(1, 2))\nmain.py:4: print(Calc().div(3, 4))\n"
    );
    assert_eq!(r["t_hover"].0, "`Calc` (main.py:3):\n```python\nclass Calc:\n```\n");
    assert_eq!(r["t_ws"].0, "class Calc — calc.py:1: class Calc:\n");
    assert_eq!(
        r["t_miss"],
        ("`nope` does not occur on line 3 of main.py; that line reads: print(Calc().div(1, 2))".to_string(), true)
    );
    // The first message carried the enclosing symbol's outline.
    let first = mock.requests()[0].body["messages"][0]["content"][0]["text"].as_str().unwrap().to_string();
    assert!(
        first.contains(
            "Enclosing symbols, from the language server:\nclass Calc (lines 1-6) > method div (lines 5-6)\n"
        ),
        "{first}"
    );
    // Symbol tools are declared only with a language server.
    let requests = mock.requests();
    let names: Vec<&str> =
        requests[0].body["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"find_references") && names.contains(&"diagnostics"), "{names:?}");
    // The server was shut down properly.
    assert!(log_of(&ws).contains("shutdown\nexit\n"), "{}", log_of(&ws));
}

#[test]
fn edits_report_the_diagnostics_they_fix_and_introduce() {
    let ws = workspace();
    let mock = MockModel::start();
    mock.push(tool_reply(&[(
        "t_fix",
        "edit_file",
        json!({"path": "calc.py", "old_text": "value = ERROR", "new_text": "value = 0"}),
    )]));
    mock.push(tool_reply(&[(
        "t_break",
        "edit_file",
        json!({"path": "calc.py", "old_text": "        return a + b", "new_text": "        return a + b  # ERROR"}),
    )]));
    mock.push(tool_reply(&[("t_diag", "diagnostics", json!({}))]));
    mock.push(text_reply("Done."));
    let out = fix(&ws, &mock, &[], "8");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let r = tool_results(&mock);
    assert!(
        r["t_fix"].0.ends_with("\n\nDiagnostics of calc.py after this edit: 1 fixed, 0 introduced, 0 in all.\n- fixed (was line 8): error: ERROR is not allowed here"),
        "{}",
        r["t_fix"].0
    );
    assert!(
        r["t_break"].0.ends_with(
            "\n\nDiagnostics of calc.py after this edit: 0 fixed, 1 introduced, 1 in all.\n\
             - introduced: calc.py:3:25-3:30: error: ERROR is not allowed here [fake E1]\n  \
             E1 is documented at https://fake.example/rules/E1\n  \
             related: calc.py:1: the file starts here\n    | class Calc:"
        ),
        "{}",
        r["t_break"].0
    );
    // The whole diagnostic: its range's end, its code's link, its related
    // place with that line's text.
    assert_eq!(
        r["t_diag"].0,
        "calc.py:3:25-3:30: error: ERROR is not allowed here [fake E1]\n  \
         E1 is documented at https://fake.example/rules/E1\n  \
         related: calc.py:1: the file starts here\n    | class Calc:\n"
    );
    // The disk was never touched; the server saw the run's versions.
    assert_eq!(std::fs::read_to_string(ws.root.join("calc.py")).unwrap(), CALC);
    let log = log_of(&ws);
    assert!(log.contains("textDocument/didOpen v1\n") && log.contains("textDocument/didChange v2\n"), "{log}");
}

#[test]
fn a_crashed_server_is_restarted_once() {
    let ws = workspace();
    let marker = ws.root.parent().unwrap().join("crashed-once");
    let mock = MockModel::start();
    mock.push(tool_reply(&[("t1", "find_definition", json!({"path": "main.py", "line": 3, "symbol": "div"}))]));
    mock.push(text_reply("ok"));
    let out = fix(
        &ws,
        &mock,
        &[("FAKE_LSP_CRASH_ON", "textDocument/definition"), ("FAKE_LSP_CRASH_ONCE", marker.to_str().unwrap())],
        "6",
    );
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(tool_results(&mock)["t1"].0, "Definitions of `div` (main.py:3):\ncalc.py:5: def div(self, a, b):\n");
    assert_eq!(log_of(&ws).matches("initialize\n").count(), 2, "{}", log_of(&ws));
}

#[test]
fn a_server_that_keeps_crashing_becomes_a_tool_error() {
    let ws = workspace();
    let mock = MockModel::start();
    mock.push(tool_reply(&[("t1", "find_references", json!({"path": "main.py", "line": 3, "symbol": "div"}))]));
    mock.push(tool_reply(&[("t2", "hover", json!({"path": "main.py", "line": 3, "symbol": "div"}))]));
    mock.push(tool_reply(&[("t3", "read_file", json!({"path": "main.py", "start_line": 3, "end_line": 3}))]));
    mock.push(text_reply("The language server is down; nothing changed."));
    let out = fix(&ws, &mock, &[("FAKE_LSP_CRASH_ON", "textDocument/references")], "6");
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let r = tool_results(&mock);
    assert!(r["t1"].1 && r["t1"].0.starts_with("language server for python unavailable: it exited"), "{:?}", r["t1"]);
    assert!(r["t2"].1 && r["t2"].0.starts_with("language server for python unavailable"), "{:?}", r["t2"]);
    assert_eq!(r["t3"], ("     3\tprint(Calc().div(1, 2))\n[main.py: lines 3-3 of 4]\n".to_string(), false));
}

#[test]
fn a_hanging_server_times_out_and_is_restarted() {
    let ws = workspace();
    let mock = MockModel::start();
    mock.push(tool_reply(&[("t1", "hover", json!({"path": "main.py", "line": 3, "symbol": "div"}))]));
    mock.push(text_reply("ok"));
    let started = std::time::Instant::now();
    let out = fix(
        &ws,
        &mock,
        &[("FAKE_LSP_HANG_ON", "textDocument/hover"), ("AGENTFIX_LANGUAGE_SERVER_TIMEOUT_MS", "700")],
        "6",
    );
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let r = tool_results(&mock);
    assert!(r["t1"].1, "{:?}", r["t1"]);
    assert!(r["t1"].0.contains("did not answer `textDocument/hover`"), "{:?}", r["t1"]);
    assert!(started.elapsed() < Duration::from_secs(60));
    assert_eq!(log_of(&ws).matches("initialize\n").count(), 2, "restarted once: {}", log_of(&ws));
}

#[test]
fn without_a_server_the_symbol_tools_are_not_offered() {
    let ws = workspace();
    std::fs::write(ws.root.join("notes.txt"), "plain text\n").unwrap();
    let mock = MockModel::start();
    mock.push(text_reply("Nothing to do."));
    let mut cmd = Command::new(agentfix_bin());
    cmd.current_dir(&ws.root)
        .args(["fix", "notes.txt", "--line", "1"])
        .env("ANTHROPIC_API_KEY", API_KEY)
        .env("ANTHROPIC_BASE_URL", mock.base_url())
        .env("AGENTFIX_TRANSCRIPTS", "0")
        .env("AGENTFIX_DEFAULT_LANGUAGE_SERVERS", "0");
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let names: Vec<String> = mock.requests()[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["read_file", "list_files", "grep", "edit_file", "write_file"]);
}

/// Keeps `Path` in use for helpers shared with other test files.
#[allow(dead_code)]
fn _unused(_: &Path, _: Value) {}

#[test]
fn through_the_editor_servers_see_unsaved_buffers_and_get_them_back() {
    use common::editor::Editor;
    use common::file_uri;
    let ws = workspace();
    let mock = MockModel::start();
    let servers: Value = serde_json::from_str(&servers(&[("FAKE_LSP_LOG", ws.log.to_str().unwrap())])).unwrap();
    let base = mock.base_url();
    let mut editor = Editor::spawn(
        agentfix_bin(),
        &["--stdio"],
        &ws.root,
        &[
            ("ANTHROPIC_API_KEY", API_KEY),
            ("ANTHROPIC_BASE_URL", &base),
            ("AGENTFIX_TRANSCRIPTS", "0"),
            ("AGENTFIX_DEFAULT_LANGUAGE_SERVERS", "0"),
        ],
    );
    editor.initialize(&ws.root, Editor::full_capabilities(), json!({"languageServers": servers}));
    // Unsaved: a new helper defined above the class, and a call to it.
    let unsaved = format!("def helper():\n    return 1\n\n{CALC}helper()\n");
    let path = ws.root.join("calc.py");
    editor.open(&path, "python", 4, &unsaved);
    mock.push(tool_reply(&[("t_def", "find_definition", json!({"path": "calc.py", "line": 12, "symbol": "helper"}))]));
    mock.push(tool_reply(&[(
        "t_edit",
        "edit_file",
        json!({"path": "calc.py", "old_text": "value = ERROR", "new_text": "value = helper()"}),
    )]));
    mock.push(text_reply("Replaced the error with a call."));
    let uri = file_uri(&path);
    let arg = json!({"uri": uri, "version": 4, "range": {"start": {"line": 10, "character": 0}, "end": {"line": 10, "character": 0}}, "diagnostics": []});
    let resp = editor.request("workspace/executeCommand", json!({"command": "agentfix.fix", "arguments": [arg]}));
    assert_eq!(resp["result"]["applied"], true, "{resp}");
    let r = tool_results(&mock);
    assert_eq!(r["t_def"].0, "Definitions of `helper` (calc.py:12):\ncalc.py:1: def helper():\n");
    assert!(r["t_edit"].0.contains("1 fixed, 0 introduced"), "{}", r["t_edit"].0);
    // The server had the buffer (v1), the run's edit (v2), then the text
    // before the run for the check of the proposal (v3), which is the
    // buffer: the release has nothing left to send.
    assert_eq!(resp["result"]["verification"]["diagnostics"], json!({"fixed": 1, "introduced": 0, "remaining": 0}));
    assert_eq!(resp["result"]["verification"]["verified"], true, "{resp}");
    let message = resp["result"]["message"].as_str().unwrap();
    assert!(message.starts_with("Agent fix: verified: 1 fixed, 0 new; Replaced the error with a call."), "{message}");
    let log = log_of(&ws);
    let syncs: Vec<&str> = log.lines().filter(|l| l.starts_with("textDocument/did")).collect();
    let expected = ["textDocument/didOpen v1", "textDocument/didChange v2", "textDocument/didChange v3"];
    assert_eq!(syncs, expected, "{log}");
    editor.shutdown();
    assert!(log_of(&ws).ends_with("shutdown\nexit\n"), "{}", log_of(&ws));
}

#[test]
fn a_language_server_never_inherits_the_key_or_other_credentials() {
    let ws = workspace();
    let dump = ws.root.parent().unwrap().join("server-env");
    let mock = MockModel::start();
    mock.push(tool_reply(&[("t_outline", "document_symbols", json!({"path": "calc.py"}))]));
    mock.push(text_reply("Looked."));
    let out = fix(
        &ws,
        &mock,
        &[
            ("FAKE_LSP_ENV_TO", dump.to_str().unwrap()),
            ("GITHUB_TOKEN", "ghp_not_for_servers"),
            ("AWS_SECRET_ACCESS_KEY", "aws-not-for-servers"),
            ("NPM_TOKEN", "npm-allowed"),
            ("AGENTFIX_ENV_ALLOW", "NPM_TOKEN"),
        ],
        "6",
    );
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let env = std::fs::read_to_string(&dump).expect("the server started and wrote its environment");
    assert!(env.lines().any(|l| l.starts_with("PATH=")), "{env}");
    assert!(env.contains("NPM_TOKEN=npm-allowed"), "an allowed variable passes: {env}");
    for leak in [API_KEY, "ghp_not_for_servers", "aws-not-for-servers"] {
        assert!(!env.contains(leak), "{leak} reached the language server");
    }
    assert!(!env.contains("ANTHROPIC_API_KEY="));
}

#[test]
fn symbol_results_in_protected_files_are_dropped() {
    let ws = workspace();
    // The project adds a protected pattern; the defaults (.env) hold anyway.
    std::fs::write(ws.root.join("agentfix.toml"), "exclude = [\"vault.py\"]\n").unwrap();
    std::fs::write(ws.root.join("vault.py"), "class Calcium:\n    pass\n").unwrap();
    std::fs::write(ws.root.join(".env"), "TOKEN=calc-secret\n").unwrap();
    let mock = MockModel::start();
    mock.push(tool_reply(&[
        ("t_ws", "workspace_symbols", json!({"query": "Cal"})),
        ("t_read", "read_file", json!({"path": "vault.py"})),
        ("t_env", "read_file", json!({"path": ".env"})),
        ("t_list", "list_files", json!({})),
        ("t_grep", "grep", json!({"pattern": "Calcium|calc-secret"})),
    ]));
    mock.push(text_reply("Looked."));
    let out = fix(&ws, &mock, &[], "6");
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let r = tool_results(&mock);
    assert!(r["t_ws"].0.contains("class Calc"), "{}", r["t_ws"].0);
    assert!(!r["t_ws"].0.contains("vault.py") && !r["t_ws"].0.contains("Calcium"), "{}", r["t_ws"].0);
    assert!(r["t_ws"].0.contains("1 result(s) in protected files left out"), "{}", r["t_ws"].0);
    for id in ["t_read", "t_env"] {
        assert!(r[id].1, "{id} is an error");
        assert!(r[id].0.contains("is a protected file"), "{}", r[id].0);
    }
    assert_eq!(r["t_list"].0, "agentfix.toml\ncalc.py\nmain.py\n");
    assert_eq!(r["t_grep"].0, "No matches for `Calcium|calc-secret`.");
    assert!(!mock.requests_text().contains("TOKEN=calc-secret"), "the secret never reached the model");
}

#[test]
fn a_server_flooding_stderr_without_a_line_break_costs_no_memory() {
    let measure = |flood: &str| {
        let ws = workspace();
        let mock = MockModel::start();
        mock.push(tool_reply(&[("t_outline", "document_symbols", json!({"path": "calc.py"}))]));
        mock.push(text_reply("Looked."));
        let (out, kib) =
            common::rss::run_measured(&mut fix_command(&ws, &mock, &[("FAKE_LSP_STDERR_FLOOD", flood)], "6"));
        assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(tool_results(&mock)["t_outline"].0.starts_with("Outline of calc.py:"));
        kib
    };
    let baseline = measure("0");
    let flooded = measure(&(64 * 1024 * 1024).to_string());
    // 64 MB of stderr used to cost about 67 MB.
    assert!(flooded < baseline + 16 * 1024, "peak RSS {flooded} KiB with the flood, {baseline} KiB without");
}

/// The first message of the run `mock` answered.
fn first_message(mock: &MockModel) -> String {
    mock.requests()[0].body["messages"][0]["content"][0]["text"].as_str().unwrap().to_string()
}

#[test]
fn the_first_message_carries_the_servers_quick_fixes_for_the_problem() {
    let ws = workspace();
    // CJK and an emoji before the problem: the server counts UTF-16 units
    // (`ERROR` at 16..21), the model reads characters (15..20, 1-based 16-21).
    let calc = CALC.replace("value = ERROR", "value = \"漢😀\" + ERROR");
    std::fs::write(ws.root.join("calc.py"), &calc).unwrap();
    std::fs::write(ws.root.join("errors.txt"), "calc.py:8:16: error: ERROR is not allowed here\n").unwrap();
    let mock = MockModel::start();
    mock.push(text_reply("Nothing to change."));
    let out = fix_command_with(&ws, &mock, &[], &["--diagnostics", "errors.txt"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let first = first_message(&mock);
    assert!(
        first.starts_with(
            "Fix this problem in `calc.py`:\n- line 8, column 16: error: ERROR is not allowed here\n  \
             quick fixes the language server offers for it (none is applied; make your own edit):\n  \
             - \"Replace `ERROR` with `0`\" (preferred): in `calc.py`: replace 8:16-8:21 (`ERROR`) with `0`\n  \
             - \"Explain E1\": runs a command on the language server; it has no edit to show\n\n"
        ),
        "{first}"
    );
    // The refactoring is not a quick fix.
    assert!(!first.contains("Extract variable"), "{first}");
    // The request carried what the server published for that range, and asked for quick fixes only.
    let log = log_of(&ws);
    let asked = log.lines().find(|l| l.starts_with("textDocument/codeAction ")).expect("a code action request");
    let context: Value = serde_json::from_str(asked.trim_start_matches("textDocument/codeAction ")).unwrap();
    assert_eq!(context["only"], json!(["quickfix"]));
    assert_eq!(context["triggerKind"], 1);
    let diagnostics = context["diagnostics"].as_array().unwrap();
    assert_eq!(diagnostics.len(), 1, "{context}");
    assert_eq!(diagnostics[0]["message"], "ERROR is not allowed here");
    assert_eq!(diagnostics[0]["range"]["start"], json!({"line": 7, "character": 16}));
    assert_eq!(diagnostics[0]["relatedInformation"][0]["message"], "the file starts here");
    // Nothing was applied.
    assert_eq!(std::fs::read_to_string(ws.root.join("calc.py")).unwrap(), calc);
}

#[test]
fn a_server_that_never_answers_code_actions_does_not_stall_the_run() {
    let ws = workspace();
    std::fs::write(ws.root.join("errors.txt"), "calc.py:8:9: error: ERROR is not allowed here\n").unwrap();
    let mock = MockModel::start();
    mock.push(text_reply("Nothing to change."));
    let started = std::time::Instant::now();
    let out = fix_command_with(
        &ws,
        &mock,
        &[("FAKE_LSP_HANG_ON", "textDocument/codeAction")],
        &["--diagnostics", "errors.txt"],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let first = first_message(&mock);
    assert!(
        first.starts_with("Fix this problem in `calc.py`:\n- line 8, column 9: error: ERROR is not allowed here\n\n"),
        "{first}"
    );
    // The request gave up after its timeout (5 s), not the outline's 15 s.
    assert!(started.elapsed() < Duration::from_secs(14), "{:?}", started.elapsed());
    assert!(log_of(&ws).contains("textDocument/codeAction"), "{}", log_of(&ws));
}
