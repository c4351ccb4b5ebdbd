//! End-to-end tests of the language server over real stdio: the built
//! binary, a fake editor, and a mock Anthropic server on 127.0.0.1.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::editor::Editor;
use common::mock_model::{self, MockModel, Recorded, Reply, text_reply, tool_reply, tool_reply_without_text};
use common::{agentfix_bin, apply_text_edits, file_uri};
use serde_json::{Value, json};

const LONG: Duration = Duration::from_secs(30);

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    mock: MockModel,
    editor: Editor,
}

struct Setup<'a> {
    files: &'a [(&'a str, &'a str)],
    caps: Value,
    init: Value,
    key: bool,
    env: Vec<(&'static str, &'static str)>,
    answer_progress_create: bool,
    /// The `clientInfo.name` (default: the test editor's).
    client: Option<&'static str>,
}

impl Default for Setup<'_> {
    fn default() -> Self {
        Self {
            files: &[],
            caps: Editor::full_capabilities(),
            init: Value::Null,
            key: true,
            env: Vec::new(),
            answer_progress_create: true,
            client: None,
        }
    }
}

fn start(setup: Setup<'_>) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap().join("ws");
    let transcripts = root.parent().unwrap().join("transcripts");
    std::fs::create_dir_all(&root).unwrap();
    for (p, text) in setup.files {
        let path = root.join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let mock = MockModel::start();
    let base = mock.base_url();
    let transcripts = transcripts.to_str().unwrap().to_string();
    let mut env: Vec<(&str, &str)> = vec![
        ("ANTHROPIC_BASE_URL", &base),
        ("AGENTFIX_TRANSCRIPT_DIR", &transcripts),
        ("AGENTFIX_DEFAULT_LANGUAGE_SERVERS", "0"),
    ];
    if setup.key {
        env.push(("ANTHROPIC_API_KEY", mock_model::API_KEY));
    }
    env.extend(setup.env.iter().copied());
    let mut editor = Editor::spawn(agentfix_bin(), &["--stdio"], &root, &env);
    editor.answer_progress_create = setup.answer_progress_create;
    if let Some(name) = setup.client {
        editor.client_name = name.into();
    }
    editor.initialize(&root, setup.caps, setup.init);
    Fixture { _dir: dir, root, mock, editor }
}

fn fixture(files: &[(&str, &str)]) -> Fixture {
    start(Setup { files, ..Default::default() })
}

fn diag(line: u32, from: u32, to: u32, message: &str) -> Value {
    json!({"range": {"start": {"line": line, "character": from}, "end": {"line": line, "character": to}},
           "severity": 1, "source": "pyright", "message": message})
}

impl Fixture {
    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// Asks for code actions at `diag`'s range and returns the first one.
    fn first_action(&mut self, rel: &str, diagnostic: Value) -> Value {
        let uri = file_uri(&self.path(rel));
        let resp = self.editor.request(
            "textDocument/codeAction",
            json!({"textDocument": {"uri": uri}, "range": diagnostic["range"], "context": {"diagnostics": [diagnostic]}}),
        );
        resp["result"][0].clone()
    }

    /// Asks for code actions at `diag`'s range and returns the first one's command argument.
    fn fix_argument(&mut self, rel: &str, diagnostic: Value) -> Value {
        self.first_action(rel, diagnostic)["command"]["arguments"][0].clone()
    }

    fn execute(&mut self, argument: Value) -> Value {
        self.editor.request("workspace/executeCommand", json!({"command": "agentfix.fix", "arguments": [argument]}))
    }

    fn fix(&mut self, rel: &str, diagnostic: Value) -> Value {
        let arg = self.fix_argument(rel, diagnostic);
        assert!(arg.is_object(), "no code action offered");
        self.execute(arg)
    }

    fn assert_no_violations(&self) {
        assert_eq!(self.mock.violations(), Vec::<String>::new(), "the mock API refused a request");
    }
}

/// The `tool_result` blocks of the last user message of a recorded request.
fn tool_results(r: &Recorded) -> Vec<Value> {
    let messages = r.body["messages"].as_array().unwrap();
    messages.last().unwrap()["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "tool_result")
        .cloned()
        .collect()
}

fn result_text(block: &Value) -> String {
    block["content"].as_str().map(str::to_string).unwrap_or_else(|| block["content"].to_string())
}

#[test]
fn initialize_advertises_actions_commands_and_negotiated_encoding() {
    let f = fixture(&[]);
    f.editor.shutdown();
    let dir = tempfile::tempdir().unwrap();
    let mut e = Editor::spawn(agentfix_bin(), &["--stdio"], dir.path(), &[]);
    let r = e.initialize(dir.path(), Editor::full_capabilities(), Value::Null);
    let caps = &r["capabilities"];
    assert_eq!(caps["positionEncoding"], "utf-16");
    assert_eq!(caps["textDocumentSync"]["change"], 2);
    // The saved text is how a document that fell out of sync comes back.
    assert_eq!(caps["textDocumentSync"]["save"], json!({"includeText": true}));
    assert_eq!(
        caps["executeCommandProvider"]["commands"],
        json!(["agentfix.fix", "agentfix.applyAlternative", "agentfix.cancel", "agentfix.reviewed"])
    );
    assert_eq!(
        caps["codeActionProvider"]["codeActionKinds"],
        json!(["quickfix", "refactor.rewrite", "source.fixAll.agentfix"])
    );
    assert_eq!(r["serverInfo"]["name"], "agentfix");
    e.shutdown();
    let mut caps = Editor::full_capabilities();
    caps["general"]["positionEncodings"] = json!(["utf-32", "utf-8", "utf-16"]);
    let mut e = Editor::spawn(agentfix_bin(), &["lsp"], dir.path(), &[]);
    let r = e.initialize(dir.path(), caps, Value::Null);
    assert_eq!(r["capabilities"]["positionEncoding"], "utf-8");
    assert!(e.shutdown().success());
}

#[test]
fn code_actions_cover_overlapping_diagnostics_and_selections() {
    let mut f = fixture(&[("calc.py", "x = 1 / 0\n")]);
    let uri = file_uri(&f.path("calc.py"));
    f.editor.open(&f.path("calc.py"), "python", 3, "x = 1 / 0\n");
    let long = "a".repeat(120) + "\nsecond line";
    let d1 = diag(0, 4, 9, "Division by zero");
    let d2 = diag(0, 0, 1, &long);
    let far = diag(5, 0, 1, "elsewhere");
    let cursor = json!({"start": {"line": 0, "character": 5}, "end": {"line": 0, "character": 5}});
    let resp = f.editor.request(
        "textDocument/codeAction",
        json!({"textDocument": {"uri": uri}, "range": cursor, "context": {"diagnostics": [d1, d2, far]}}),
    );
    let actions = resp["result"].as_array().unwrap();
    // The quick fix under the cursor, and (the client names no trigger kind,
    // so the user asked) a fix-all over every diagnostic of the request.
    assert_eq!(actions.len(), 2, "{actions:?}");
    assert_eq!(actions[1]["title"], "Agent fix: all 3 problems in this file");
    assert_eq!(actions[1]["kind"], "source.fixAll.agentfix");
    assert_eq!(actions[0]["title"], "Agent fix: Division by zero");
    assert_eq!(actions[0]["kind"], "quickfix");
    assert_eq!(actions[0]["diagnostics"], json!([d1]));
    assert_eq!(actions[0]["command"]["command"], "agentfix.fix");
    assert_eq!(
        actions[0]["command"]["arguments"],
        json!([{"uri": uri, "version": 3, "range": cursor, "diagnostics": [d1]}])
    );
    // A selection over both diagnostics: one quickfix each plus the selection rewrite.
    let sel = json!({"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 9}});
    let resp = f.editor.request(
        "textDocument/codeAction",
        json!({"textDocument": {"uri": uri}, "range": sel, "context": {"diagnostics": [d1, d2]}}),
    );
    let titles: Vec<String> =
        resp["result"].as_array().unwrap().iter().map(|a| a["title"].as_str().unwrap().to_string()).collect();
    assert_eq!(
        titles,
        vec![
            "Agent fix: Division by zero".to_string(),
            format!("Agent fix: {}…", "a".repeat(80)),
            "Agent fix: selection".into(),
            "Agent fix: all 2 problems in this file".into()
        ]
    );
    assert_eq!(resp["result"][2]["kind"], "refactor.rewrite");
    // `only` filters by kind.
    let resp = f.editor.request(
        "textDocument/codeAction",
        json!({"textDocument": {"uri": uri}, "range": sel, "context": {"diagnostics": [d1], "only": ["refactor"]}}),
    );
    assert_eq!(resp["result"].as_array().unwrap().len(), 1);
    // Without diagnostics in the request (Neovim 0.10+ and eglot send a
    // server only its own), the line itself is offered.
    let resp = f.editor.request(
        "textDocument/codeAction",
        json!({"textDocument": {"uri": uri}, "range": cursor, "context": {"diagnostics": []}}),
    );
    assert_eq!(resp["result"][0]["title"], "Agent fix: line 1");
    assert_eq!(resp["result"][0]["kind"], "refactor.rewrite");
    assert_eq!(resp["result"][0]["command"]["arguments"][0]["diagnostics"], json!([]));
    assert!(f.mock.requests().is_empty(), "code actions must never call the model");
}

#[test]
fn a_fix_reads_the_unsaved_buffer_and_ends_in_a_versioned_edit() {
    let disk = "def div(a, b):\n    return a / b\n";
    let mut f = fixture(&[("calc.py", disk)]);
    let unsaved = "def div(a, b):\n    # unsaved comment 漢😀\n    return a / b\n";
    let path = f.path("calc.py");
    f.editor.open(&path, "python", 7, unsaved);
    f.mock.push(tool_reply(&[("toolu_r1", "read_file", json!({"path": "calc.py"}))]));
    f.mock.push(tool_reply(&[(
        "toolu_e1",
        "edit_file",
        json!({"path": "calc.py", "old_text": "    return a / b\n", "new_text": "    if b == 0:\n        return 0\n    return a / b\n"}),
    )]));
    f.mock.push(text_reply("Guarded the division by zero."));
    let result = f.fix("calc.py", diag(2, 11, 16, "Possible division by zero"));
    // The label ends with what the run took: turns, tokens, and the cost at
    // the default model's list price.
    let label = "Agent fix: Guarded the division by zero. (1 file, 1 hunk; 3 turns, ";
    let message = result["result"]["message"].as_str().unwrap().to_string();
    assert!(message.starts_with(label) && message.contains(" tokens, $") && message.ends_with(')'), "{message}");
    // The one format of tokens and cost (`pricing::format_tokens`), as in the
    // progress reports and the CLI: `41,250 tokens, $0.05`.
    let spent = regex::Regex::new(r"; 3 turns, \d{1,3}(,\d{3})* tokens, \$\d+\.\d\d\)$").unwrap();
    assert!(spent.is_match(&message), "{message}");
    assert!(result["result"]["costUsd"].as_f64().is_some_and(|c| c > 0.0), "{result}");
    assert_eq!(
        result["result"],
        json!({"runId": result["result"]["runId"], "applied": true, "stopReason": "end_turn", "turns": 3,
               "inputTokens": result["result"]["inputTokens"], "outputTokens": 50,
               "cacheReadTokens": 0, "cacheWriteTokens": 0, "costUsd": result["result"]["costUsd"],
               "message": message,
               "transcript": result["result"]["transcript"], "conflicts": [], "candidates": [],
               // Nothing was set up to check it: no check ran, no line leads the label.
               "verification": {"verified": false, "rounds": 1, "diagnostics": null, "commands": []}})
    );
    f.assert_no_violations();
    let requests = f.mock.requests();
    assert_eq!(requests.len(), 3);
    for r in &requests {
        assert_eq!(r.header("x-api-key"), Some(mock_model::API_KEY));
        assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
        assert_eq!(r.body["tools"].as_array().unwrap().len(), 5, "tools go with every request");
    }
    // The first message carries the diagnostic and the buffer's text.
    let first = requests[0].body["messages"][0]["content"][0]["text"].as_str().unwrap().to_string();
    assert!(first.contains("line 3, column 12: error: Possible division by zero [pyright]"), "{first}");
    assert!(first.contains("# unsaved comment 漢😀"));
    // read_file saw the unsaved buffer, not the disk.
    let read = result_text(&tool_results(&requests[1])[0]);
    assert!(read.contains("     2\t    # unsaved comment 漢😀\n"), "{read}");
    // One versioned edit against buffer version 7 that produces the right text.
    let edits = f.editor.applied_edits();
    assert_eq!(edits.len(), 1);
    assert_eq!(edits[0]["label"], message.as_str());
    let doc_changes = edits[0]["edit"]["documentChanges"].as_array().unwrap();
    assert_eq!(doc_changes.len(), 1);
    assert_eq!(doc_changes[0]["textDocument"], json!({"uri": file_uri(&path), "version": 7}));
    let after = apply_text_edits(unsaved, doc_changes[0]["edits"].as_array().unwrap());
    assert_eq!(
        after,
        "def div(a, b):\n    # unsaved comment 漢😀\n    if b == 0:\n        return 0\n    return a / b\n"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), disk, "the server must never write to disk");
    // Progress: begin, a report naming the tool calls, end (which travels
    // apart from the response: wait for it).
    f.editor.wait_for_notification("$/progress", |p| p["value"]["kind"] == "end", LONG);
    let progress = f.editor.notifications("$/progress");
    let kinds: Vec<&str> = progress.iter().map(|p| p["value"]["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"begin"));
    assert_eq!(kinds.last(), Some(&"end"));
    assert_eq!(progress[0]["value"]["title"], "Agent fix");
    assert_eq!(progress[0]["value"]["message"], "turn 1: asking the model");
    let calls = progress
        .iter()
        .filter_map(|p| p["value"]["message"].as_str())
        .find(|m| m.starts_with("turn 1: read_file"))
        .unwrap();
    // Tokens so far, and the cost at the default model's list price.
    assert!(calls.contains(" tokens, ") && calls.ends_with("$0.01)"), "{calls}");
    let spent = regex::Regex::new(r"^turn 1: read_file calc\.py \(\d{1,3}(,\d{3})* tokens, <?\$0\.01\)$").unwrap();
    assert!(spent.is_match(calls), "{calls}");
    let reports: Vec<&str> = progress
        .iter()
        .filter(|p| p["value"]["kind"] == "report")
        .map(|p| p["value"]["message"].as_str().unwrap())
        // The token count at the end varies with the mock's arithmetic.
        .map(|m| m.split(" (").next().unwrap())
        .collect();
    // The model's streamed text, the tool being prepared, then the calls.
    assert_eq!(
        reports,
        [
            "turn 1: Let me",
            "turn 1: preparing read_file",
            "turn 1: read_file calc.py",
            "turn 2: preparing edit_file",
            "turn 2: edit_file calc.py"
        ]
    );
    assert!(f.editor.messages().iter().any(|m| m["method"] == "window/workDoneProgress/create"));
}

#[test]
fn two_tool_calls_in_one_turn_and_tool_errors_are_fed_back_by_id() {
    let mut f = fixture(&[("a.py", "alpha = 1\n"), ("b.py", "beta = 2\n")]);
    f.mock.push(tool_reply(&[
        ("toolu_a", "read_file", json!({"path": "a.py"})),
        ("toolu_b", "edit_file", json!({"path": "b.py", "old_text": "gamma", "new_text": "delta"})),
    ]));
    f.mock.push(tool_reply_without_text(&[("toolu_c", "no_such_tool", json!({}))]));
    f.mock.push(text_reply("Nothing to change."));
    let result = f.fix("a.py", diag(0, 0, 5, "unused"));
    assert_eq!(result["result"]["applied"], false);
    assert_eq!(result["result"]["stopReason"], "end_turn");
    f.assert_no_violations();
    let requests = f.mock.requests();
    let results = tool_results(&requests[1]);
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["tool_use_id"], "toolu_a");
    assert!(result_text(&results[0]).contains("alpha = 1"));
    assert_eq!(results[0].get("is_error"), None);
    assert_eq!(results[1]["tool_use_id"], "toolu_b");
    assert_eq!(results[1]["is_error"], true);
    assert!(result_text(&results[1]).starts_with("old_text was not found in b.py."), "{}", result_text(&results[1]));
    let results = tool_results(&requests[2]);
    assert_eq!(results[0]["is_error"], true);
    assert!(result_text(&results[0]).contains("unknown tool `no_such_tool`"));
    // No edit: no applyEdit, and the user is told why.
    assert!(f.editor.applied_edits().is_empty());
    f.editor.wait_for_notification(
        "window/showMessage",
        |m| m["message"].as_str().unwrap_or_default().contains("proposed no edit"),
        LONG,
    );
}

#[test]
fn max_turns_stops_a_run_that_never_ends() {
    let mut f = start(Setup { files: &[("a.py", "x\n")], init: json!({"maxTurns": 2}), ..Default::default() });
    for i in 0..5 {
        f.mock.push(tool_reply(&[(&format!("toolu_{i}"), "read_file", json!({"path": "a.py"}))]));
    }
    let result = f.fix("a.py", diag(0, 0, 1, "x"));
    assert_eq!(result["result"]["stopReason"], "max_turns");
    assert_eq!(result["result"]["turns"], 2);
    // Two turns, then one closing request that may not call tools.
    let requests = f.mock.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[2].body["tool_choice"], json!({"type": "none"}));
    assert!(requests[1].body.get("tool_choice").is_none());
    // The message travels apart from the response: wait for it.
    f.editor.wait_for_notification(
        "window/showMessage",
        |m| m["message"].as_str().unwrap_or_default().contains("maxTurns (2)"),
        LONG,
    );
}

#[test]
fn a_missing_key_is_a_clear_error_and_sends_nothing() {
    let mut f = start(Setup { files: &[("a.py", "x\n")], key: false, ..Default::default() });
    let result = f.fix("a.py", diag(0, 0, 1, "x"));
    let err = result["error"]["message"].as_str().unwrap();
    assert!(err.contains("ANTHROPIC_API_KEY is not set"), "{result}");
    let shown = f.editor.wait_for_notification("window/showMessage", |m| m["type"] == 1, LONG);
    assert!(shown["message"].as_str().unwrap().contains("ANTHROPIC_API_KEY"));
    assert!(f.mock.requests().is_empty());
    // The server is still serving.
    let r = f.editor.request("textDocument/codeAction", json!({"textDocument": {"uri": file_uri(&f.path("a.py"))},
        "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "context": {"diagnostics": []}}));
    assert_eq!(r["result"][0]["title"], "Agent fix: line 1");
    assert!(!f.editor.stderr().contains(mock_model::API_KEY));
}

#[test]
fn five_hundred_rapid_incremental_changes_apply_in_order() {
    let mut f = fixture(&[]);
    let path = f.path("seq.txt");
    f.editor.open(&path, "plaintext", 1, "");
    let mut expected = String::new();
    for i in 0..500u32 {
        // Each change appends at the end of the previous text: any reordering corrupts it.
        let piece = if i % 50 == 49 { format!("{i}😀\r\n") } else { format!("{i},") };
        let (line, col) = end_position(&expected);
        f.editor.change_incremental(&path, 2 + i as i32, ((line, col), (line, col)), &piece);
        expected.push_str(&piece);
    }
    f.mock.push(tool_reply(&[("toolu_1", "read_file", json!({"path": "seq.txt"}))]));
    f.mock.push(text_reply("Looked."));
    let result = f.execute(json!({"uri": file_uri(&path), "version": 501,
        "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "diagnostics": []}));
    assert_eq!(result["result"]["stopReason"], "end_turn", "{result}");
    let read = result_text(&tool_results(&f.mock.requests()[1])[0]);
    let numbered: String = expected
        .split_inclusive('\n')
        .enumerate()
        .map(|(i, l)| format!("{:>6}\t{}\n", i + 1, l.trim_end_matches(['\r', '\n'])))
        .collect();
    assert_eq!(read, numbered);
}

#[test]
fn document_text_is_the_servers_copy_after_incremental_changes() {
    let mut f = start(Setup { key: false, ..Default::default() });
    let path = f.path("mirror.py");
    let uri = file_uri(&path);
    let text = "# 中文注释 😀\r\ns = '漢字🦀'\r\nt = 1\nlast line without break";
    f.editor.open(&path, "python", 1, text);
    let asked = f.editor.request("agentfix/documentText", json!({"uri": uri}));
    assert_eq!(asked["result"], json!({"version": 1, "text": text}), "{asked}");
    // UTF-16 columns after surrogate pairs and CJK, CRLF lines, a line break
    // typed and one deleted, an emoji replaced: each change at its own version.
    let col_after_crab = "s = '漢字🦀".encode_utf16().count() as u32;
    type Range = ((u32, u32), (u32, u32));
    let changes: [(Range, &str); 6] = [
        (((1, col_after_crab), (1, col_after_crab)), "🙂x"),
        (((0, 2), (0, 4)), "汉字"),
        (((2, 5), (2, 5)), "\r\n"),
        (((0, "# 汉字注释 ".encode_utf16().count() as u32), (0, "# 汉字注释 😀".encode_utf16().count() as u32)), "🎉"),
        (((3, 0), (4, 0)), ""),
        (((3, 4), (3, 4)), "😀\n"),
    ];
    for (i, (range, new_text)) in changes.iter().enumerate() {
        f.editor.change_incremental(&path, 2 + i as i32, *range, new_text);
    }
    let expected = f.editor.buffer_text(&path).unwrap();
    assert_eq!(expected, "# 汉字注释 🎉\r\ns = '漢字🦀🙂x'\r\nt = 1\r\nlast😀\n line without break");
    let asked = f.editor.request("agentfix/documentText", json!({"uri": uri}));
    assert_eq!(asked["result"]["text"], expected, "{asked}");
    assert_eq!(asked["result"]["version"], 7, "{asked}");

    // Not open: never opened, or closed since.
    let other = file_uri(&f.path("never-opened.py"));
    let refused = f.editor.request("agentfix/documentText", json!({"uri": other}));
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains(&other), "{refused}");
    f.editor.close(&path);
    let refused = f.editor.request("agentfix/documentText", json!({"uri": uri}));
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains(&uri), "{refused}");
    assert!(f.mock.requests().is_empty(), "documentText never calls the model");
}

/// The UTF-16 position of the end of `text`.
fn end_position(text: &str) -> (u32, u32) {
    let line = text.matches('\n').count() as u32;
    let last = text.rsplit('\n').next().unwrap_or("");
    (line, last.encode_utf16().count() as u32)
}

#[test]
fn the_editors_diagnostic_reaches_the_model_whole() {
    for encoding in ["utf-16", "utf-8"] {
        let mut caps = Editor::full_capabilities();
        caps["general"]["positionEncodings"] = json!([encoding]);
        let mut f = start(Setup {
            caps,
            files: &[("app.py", "x = 1\n"), ("lib.py", "def helper():\n    pass\n")],
            ..Default::default()
        });
        // The target, unsaved, with CJK and an emoji before the problem and
        // CRLF ends; lib.py unsaved too: its related line comes from the buffer.
        let app = f.path("app.py");
        let text = "import lib\r\nname = '漢😀' + lib.helper(1)\r\n";
        f.editor.open(&app, "python", 4, text);
        f.editor.open(&f.path("lib.py"), "python", 2, "def helper(n: int) -> int:  # unsaved\n    return n\n");
        let before = "name = '漢😀' + ";
        let col = |s: &str| if encoding == "utf-8" { s.len() } else { s.encode_utf16().count() } as u32;
        let (from, to) = (col(before), col(&format!("{before}lib.helper(1)")));
        let diagnostic = json!({
            "range": {"start": {"line": 1, "character": from}, "end": {"line": 1, "character": to}},
            "severity": 1, "source": "pyright", "code": "reportCallIssue", "message": "Expected 0 positional arguments",
            "codeDescription": {"href": "https://github.com/microsoft/pyright/blob/main/docs/configuration.md#reportCallIssue"},
            "relatedInformation": [{"location": {"uri": file_uri(&f.path("lib.py")),
                "range": {"start": {"line": 0, "character": 4}, "end": {"line": 0, "character": 10}}},
                "message": "Function \"helper\" is defined here"}]});
        f.mock.push(text_reply("Nothing to change."));
        let result = f.fix("app.py", diagnostic);
        assert!(result["result"].is_object(), "{result}");
        f.assert_no_violations();
        let first = f.mock.requests()[0].body["messages"][0]["content"][0]["text"].as_str().unwrap().to_string();
        let expected = "Fix this problem in `app.py`:\n\
            - line 2, column 15: error: Expected 0 positional arguments [pyright reportCallIssue]\n  \
            range 2:15-2:28 covers `lib.helper(1)`\n  \
            reportCallIssue is documented at https://github.com/microsoft/pyright/blob/main/docs/configuration.md#reportCallIssue\n  \
            related: lib.py:1: Function \"helper\" is defined here\n    \
            | def helper(n: int) -> int:  # unsaved\n\n";
        assert!(first.starts_with(expected), "{encoding}: {first}");
    }
}

#[test]
fn edits_and_new_files_use_positions_in_the_negotiated_encoding() {
    for encoding in ["utf-16", "utf-8"] {
        let mut caps = Editor::full_capabilities();
        caps["general"]["positionEncodings"] = json!([encoding]);
        let mut f = start(Setup { caps, ..Default::default() });
        let path = f.path("w.py");
        let text = "s = '漢字😀'\r\nt = '😀'; u = 1\r\n";
        f.editor.open(&path, "python", 2, text);
        // Incremental change in the negotiated encoding: replace `1` with `2`.
        let col =
            if encoding == "utf-8" { "t = '😀'; u = ".len() } else { "t = '😀'; u = ".encode_utf16().count() } as u32;
        f.editor.change_incremental(&path, 3, ((1, col), (1, col + 1)), "2");
        f.mock.push(tool_reply(&[
            (
                "toolu_1",
                "edit_file",
                json!({"path": "w.py", "old_text": "t = '😀'; u = 2", "new_text": "t = '🙂'; u = 2"}),
            ),
            ("toolu_2", "write_file", json!({"path": "pkg/new_模块.py", "content": "x = 1\n"})),
        ]));
        f.mock.push(text_reply("Done."));
        let result = f.execute(json!({"uri": file_uri(&path), "version": 3,
            "range": {"start": {"line": 1, "character": 0}, "end": {"line": 1, "character": 0}}, "diagnostics": []}));
        assert_eq!(result["result"]["applied"], true, "{result}");
        f.assert_no_violations();
        let edit = &f.editor.applied_edits()[0]["edit"];
        let ops = edit["documentChanges"].as_array().unwrap();
        assert_eq!(ops.len(), 3, "{ops:?}");
        assert_eq!(ops[0]["kind"], "create");
        assert_eq!(ops[0]["uri"], file_uri(&f.path("pkg/new_模块.py")));
        assert_eq!(ops[1]["edits"][0]["newText"], "x = 1\n");
        assert_eq!(ops[2]["textDocument"]["version"], 3);
        let edits = ops[2]["edits"].as_array().unwrap();
        let after = if encoding == "utf-16" {
            apply_text_edits("s = '漢字😀'\r\nt = '😀'; u = 2\r\n", edits)
        } else {
            // Line-granular hunks start at column 0, so byte and UTF-16 columns agree here.
            assert_eq!(edits[0]["range"]["start"], json!({"line": 1, "character": 0}));
            assert_eq!(edits[0]["range"]["end"], json!({"line": 2, "character": 0}));
            apply_text_edits("s = '漢字😀'\r\nt = '😀'; u = 2\r\n", edits)
        };
        assert_eq!(after, "s = '漢字😀'\r\nt = '🙂'; u = 2\r\n");
        assert!(!f.path("pkg").exists());
    }
}

#[test]
fn clients_without_document_changes_get_plain_changes() {
    let mut caps = Editor::full_capabilities();
    caps["workspace"]["workspaceEdit"] = json!({});
    caps["window"]["workDoneProgress"] = json!(false);
    let mut f = start(Setup { files: &[("a.py", "x = 1\n")], caps, ..Default::default() });
    f.mock.push(tool_reply(&[(
        "toolu_1",
        "edit_file",
        json!({"path": "a.py", "old_text": "x = 1", "new_text": "x = 2"}),
    )]));
    f.mock.push(text_reply("Changed x."));
    let result = f.fix("a.py", diag(0, 0, 1, "x"));
    assert_eq!(result["result"]["applied"], true, "{result}");
    let edit = &f.editor.applied_edits()[0]["edit"];
    assert!(edit.get("documentChanges").is_none());
    let uri = file_uri(&f.path("a.py"));
    assert_eq!(apply_text_edits("x = 1\n", edit["changes"][&uri].as_array().unwrap()), "x = 2\n");
    // No progress without the capability.
    assert!(
        !f.editor
            .messages()
            .iter()
            .any(|m| m["method"] == "window/workDoneProgress/create" || m["method"] == "$/progress")
    );
}

#[test]
fn a_client_that_never_answers_progress_create_does_not_block_the_run() {
    let mut f = start(Setup { files: &[("a.py", "x\n")], answer_progress_create: false, ..Default::default() });
    f.mock.push(text_reply("Nothing to do."));
    let started = Instant::now();
    let result = f.fix("a.py", diag(0, 0, 1, "x"));
    assert_eq!(result["result"]["stopReason"], "end_turn");
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(f.editor.notifications("$/progress").is_empty(), "no progress on a token the client never accepted");
}

#[test]
fn requests_are_answered_while_a_run_is_pending_and_cancel_stops_it() {
    let mut f = fixture(&[("a.py", "x\n")]);
    f.mock.push(Reply::Delay(Duration::from_secs(20), Box::new(text_reply("late"))));
    let arg = f.fix_argument("a.py", diag(0, 0, 1, "x"));
    let id = f.editor.send_request("workspace/executeCommand", json!({"command": "agentfix.fix", "arguments": [arg]}));
    // Wait until the model request is in flight.
    let deadline = Instant::now() + LONG;
    while f.mock.requests().is_empty() {
        assert!(Instant::now() < deadline, "the run never called the model");
        f.editor.pump(Duration::from_millis(20));
    }
    let t = Instant::now();
    let r = f.editor.request("textDocument/codeAction", json!({"textDocument": {"uri": file_uri(&f.path("a.py"))},
        "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "context": {"diagnostics": []}}));
    assert_eq!(r["result"][0]["title"], "Agent fix: line 1");
    assert!(t.elapsed() < Duration::from_secs(5), "a pending run must not delay other requests");
    let t = Instant::now();
    f.editor.notify("$/cancelRequest", json!({"id": id}));
    let resp = f.editor.wait_response(id, LONG);
    assert_eq!(resp["error"]["code"], -32800, "{resp}");
    assert!(t.elapsed() < Duration::from_secs(5));
    let end = f.editor.wait_for_notification("$/progress", |p| p["value"]["kind"] == "end", LONG);
    assert_eq!(end["value"]["message"], "Agent fix cancelled; nothing was changed.");
    assert!(f.editor.applied_edits().is_empty());
}

#[test]
fn progress_cancel_button_cancels_the_run() {
    let mut f = fixture(&[("a.py", "x\n")]);
    f.mock.push(Reply::Delay(Duration::from_secs(20), Box::new(text_reply("late"))));
    let arg = f.fix_argument("a.py", diag(0, 0, 1, "x"));
    let id = f.editor.send_request("workspace/executeCommand", json!({"command": "agentfix.fix", "arguments": [arg]}));
    let begin = f.editor.wait_for_notification("$/progress", |p| p["value"]["kind"] == "begin", LONG);
    assert_eq!(begin["value"]["cancellable"], true);
    f.editor.notify("window/workDoneProgress/cancel", json!({"token": begin["token"]}));
    let resp = f.editor.wait_response(id, LONG);
    assert_eq!(resp["result"]["stopReason"], "cancelled", "{resp}");
    assert_eq!(resp["result"]["applied"], false);
}

#[test]
fn model_errors_are_shown_and_the_server_lives_on() {
    let mut f = fixture(&[("a.py", "x\n")]);
    f.mock.push(mock_model::error_reply(401, "authentication_error", "invalid x-api-key"));
    let result = f.fix("a.py", diag(0, 0, 1, "x"));
    assert_eq!(result["result"]["stopReason"], "model_error");
    let shown = f.editor.wait_for_notification("window/showMessage", |m| m["type"] == 1, LONG);
    assert!(
        shown["message"].as_str().unwrap().contains("the key from ANTHROPIC_API_KEY was rejected; check it"),
        "{shown}"
    );
}

#[test]
fn bad_input_gets_errors_and_panics_are_caught() {
    let mut f = start(Setup { env: vec![("AGENTFIX_DEBUG_COMMANDS", "1")], ..Default::default() });
    // Malformed JSON-RPC body.
    f.editor.send_raw(b"Content-Length: 9\r\n\r\n{not json");
    // Bad arguments.
    let r = f.editor.request("workspace/executeCommand", json!({"command": "agentfix.fix", "arguments": [{"uri": 5}]}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let r = f.editor.request("workspace/executeCommand", json!({"command": "agentfix.fix", "arguments": []}));
    assert_eq!(r["error"]["code"], -32602);
    let r = f.editor.request("workspace/executeCommand", json!({"command": "nope", "arguments": []}));
    assert!(r["error"]["message"].as_str().unwrap().contains("unknown command `nope`"));
    // A change to a document that is not open, with an absurd range, is ignored.
    f.editor.change_incremental(Path::new("/nowhere.txt"), 2, ((99, 99), (0, 0)), "x");
    // A panic inside a handler becomes an error response.
    let r = f.editor.request("workspace/executeCommand", json!({"command": "agentfix.debug.panic", "arguments": []}));
    assert_eq!(r["error"]["code"], -32603, "{r}");
    assert!(r["error"]["message"].as_str().unwrap().contains("debug panic requested"));
    // Out-of-range positions clamp in a real document.
    let path = f.path("c.txt");
    f.editor.open(&path, "plaintext", 1, "ab");
    f.editor.change_incremental(&path, 2, ((7, 7), (9, 9)), "!");
    // And the server still answers.
    let r = f.editor.request("textDocument/codeAction", json!({"textDocument": {"uri": file_uri(&path)},
        "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}}, "context": {"diagnostics": []}}));
    assert_eq!(r["result"][0]["title"], "Agent fix: selection");
    assert!(f.editor.stray_responses().iter().any(|r| r["error"]["code"] == -32700), "parse error answered");
    assert!(f.editor.shutdown().success());
}

#[test]
fn configuration_is_pulled_from_the_editor_and_repulled_on_change() {
    let mut f = start(Setup { files: &[("a.py", "x = 1\n")], init: json!({"maxTurns": 9}), ..Default::default() });
    // The editor's workspace/configuration answer wins over initializationOptions.
    f.editor.configuration = json!({"maxTurns": 1});
    f.editor.notify("workspace/didChangeConfiguration", json!({"settings": null}));
    f.editor.pump(Duration::from_millis(300));
    f.mock.push(tool_reply(&[(
        "toolu_1",
        "edit_file",
        json!({"path": "a.py", "old_text": "x = 1", "new_text": "x = 2"}),
    )]));
    f.mock.push(text_reply("Changed x; more was planned."));
    let result = f.fix("a.py", diag(0, 0, 1, "x"));
    assert_eq!(result["result"]["stopReason"], "max_turns", "{result}");
    assert_eq!(result["result"]["turns"], 1);
    // A run stopped by a limit offers its edits, labelled as such.
    assert_eq!(result["result"]["applied"], true);
    let label = f.editor.applied_edits()[0]["label"].as_str().unwrap().to_string();
    assert!(
        label.starts_with(
            "Agent fix: Changed x; more was planned. (stopped early: the run reached maxTurns (1)) (1 file, 1 hunk; 1 turn, "
        ),
        "{label}"
    );
    assert!(
        f.editor
            .messages()
            .iter()
            .any(|m| m["method"] == "workspace/configuration" && m["params"]["items"][0]["section"] == "agentfix")
    );
    // A changed setting is pulled again.
    f.editor.configuration = json!({"maxTurns": 2});
    f.editor.notify("workspace/didChangeConfiguration", json!({"settings": {}}));
    f.editor.pump(Duration::from_millis(300));
    f.mock.push(tool_reply(&[("toolu_2", "read_file", json!({"path": "a.py"}))]));
    f.mock.push(tool_reply(&[("toolu_3", "read_file", json!({"path": "a.py", "start_line": 1}))]));
    f.mock.push(text_reply("Nothing else."));
    let result = f.fix("a.py", diag(0, 0, 1, "x"));
    assert_eq!(result["result"]["turns"], 2, "{result}");
}

#[test]
fn cancel_aborts_a_streaming_request_quickly() {
    let mut f = fixture(&[("a.py", "x\n")]);
    f.mock.push(Reply::Hang);
    let arg = f.fix_argument("a.py", diag(0, 0, 1, "x"));
    let id = f.editor.send_request("workspace/executeCommand", json!({"command": "agentfix.fix", "arguments": [arg]}));
    let deadline = Instant::now() + LONG;
    while f.mock.requests().is_empty() {
        assert!(Instant::now() < deadline, "the run never called the model");
        f.editor.pump(Duration::from_millis(10));
    }
    let t = Instant::now();
    f.editor.notify("$/cancelRequest", json!({"id": id}));
    let resp = f.editor.wait_response(id, LONG);
    assert_eq!(resp["error"]["code"], -32800);
    let end = f.editor.wait_for_notification("$/progress", |p| p["value"]["kind"] == "end", LONG);
    assert_eq!(end["value"]["message"], "Agent fix cancelled; nothing was changed.");
    // Generous bound for a shared machine; the target (200 ms) is far below it.
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
}

/// A client that resolves `edit` and has no `workspace/applyEdit` (Vim's
/// ALE), with `init` as its initializationOptions.
fn resolving_client(init: Value) -> Fixture {
    let mut caps = Editor::full_capabilities();
    caps["workspace"]["applyEdit"] = json!(false);
    caps["textDocument"]["codeAction"]["resolveSupport"] = json!({"properties": ["edit"]});
    start(Setup { files: &[("a.py", "x = 1\n")], caps, init, ..Default::default() })
}

#[test]
fn clients_without_apply_edit_resolve_at_once_and_get_the_finished_proposal_on_the_next_resolve() {
    let mut f = resolving_client(Value::Null);
    f.editor.open(&f.path("a.py"), "python", 2, "x = 1\n");
    let action = f.first_action("a.py", diag(0, 0, 1, "x is wrong"));
    let edit = json!({"path": "a.py", "old_text": "x = 1", "new_text": "x = 2"});
    f.mock.push(Reply::Delay(Duration::from_secs(2), Box::new(tool_reply(&[("t1", "edit_file", edit)]))));
    f.mock.push(text_reply("Set x to 2."));
    // The resolve answers at once, without an edit: the run goes on.
    let t = Instant::now();
    let resolved = f.editor.request("codeAction/resolve", action.clone());
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert!(resolved["result"].get("edit").is_none_or(Value::is_null), "{resolved}");
    let ended = f.editor.wait_for_notification("agentfix/runEnded", |_| true, LONG);
    assert_eq!((ended["applied"].as_bool(), ended["stopReason"].as_str()), (Some(false), Some("end_turn")), "{ended}");
    assert!(
        ended["message"]
            .as_str()
            .unwrap()
            .ends_with("pick the same Agent fix code action on those lines again to apply it"),
        "{ended}"
    );
    // The same action again: the finished proposal, at once, no model asked.
    let asked = f.mock.requests().len();
    let resolved = f.editor.request("codeAction/resolve", action.clone());
    let doc = &resolved["result"]["edit"]["documentChanges"][0];
    assert_eq!(doc["textDocument"]["version"], 2, "{resolved}");
    assert_eq!(apply_text_edits("x = 1\n", doc["edits"].as_array().unwrap()), "x = 2\n");
    assert_eq!(f.mock.requests().len(), asked);
    // Once the buffer holds it, the action runs afresh.
    f.editor.change_full(&f.path("a.py"), 3, "x = 2\n");
    f.mock.push(text_reply("Nothing left to do."));
    let resolved = f.editor.request("codeAction/resolve", action);
    assert!(resolved["result"].get("edit").is_none_or(Value::is_null), "{resolved}");
    f.editor.wait_for_notification("agentfix/runEnded", |_| true, LONG);
    assert_eq!(f.mock.requests().len(), asked + 1);
    assert!(f.editor.applied_edits().is_empty(), "no workspace/applyEdit to a client that cannot take it");
}

#[test]
fn clients_without_apply_edit_get_the_fix_through_code_action_resolve() {
    // `delivery: sync`: the run happens inside the resolve.
    let mut f = resolving_client(json!({"delivery": "sync"}));
    f.editor.open(&f.path("a.py"), "python", 2, "x = 1\n");
    let uri = file_uri(&f.path("a.py"));
    let action = f.first_action("a.py", diag(0, 0, 1, "x is wrong"));
    assert!(action.get("command").is_none(), "{action}");
    assert_eq!(action["data"]["uri"], uri);
    f.mock.push(tool_reply(&[("t1", "edit_file", json!({"path": "a.py", "old_text": "x = 1", "new_text": "x = 2"}))]));
    f.mock.push(text_reply("Set x to 2."));
    let resolved = f.editor.request("codeAction/resolve", action);
    let edit = &resolved["result"]["edit"];
    let doc = &edit["documentChanges"][0];
    assert_eq!(doc["textDocument"]["version"], 2, "{resolved}");
    assert_eq!(apply_text_edits("x = 1\n", doc["edits"].as_array().unwrap()), "x = 2\n");
    assert!(f.editor.applied_edits().is_empty(), "no workspace/applyEdit to a client that cannot take it");
}

#[test]
fn clients_without_apply_edit_or_resolve_are_told_why() {
    let mut caps = Editor::full_capabilities();
    caps["workspace"]["applyEdit"] = json!(false);
    caps["textDocument"]["codeAction"].as_object_mut().unwrap().remove("resolveSupport");
    let mut f = start(Setup { files: &[("a.py", "x = 1\n")], caps, ..Default::default() });
    f.mock.push(tool_reply(&[("t1", "edit_file", json!({"path": "a.py", "old_text": "x = 1", "new_text": "x = 2"}))]));
    f.mock.push(text_reply("Set x to 2."));
    let result = f.fix("a.py", diag(0, 0, 1, "x"));
    assert_eq!(result["result"]["applied"], false);
    assert_eq!(
        result["result"]["message"],
        "Agent fix has a proposal, but this editor does not support workspace/applyEdit."
    );
    assert!(f.editor.applied_edits().is_empty());
}

#[test]
fn a_client_work_done_token_is_used_and_cancels_its_own_run() {
    let mut f = fixture(&[("a.py", "x\n")]);
    f.mock.push(Reply::Delay(Duration::from_secs(20), Box::new(text_reply("late"))));
    let arg = f.fix_argument("a.py", diag(0, 0, 1, "x"));
    let id = f.editor.send_request(
        "workspace/executeCommand",
        json!({"command": "agentfix.fix", "arguments": [arg], "workDoneToken": "my-run-7"}),
    );
    let begin = f.editor.wait_for_notification("$/progress", |p| p["value"]["kind"] == "begin", LONG);
    assert_eq!(begin["token"], "my-run-7");
    assert!(!f.editor.messages().iter().any(|m| m["method"] == "window/workDoneProgress/create"));
    f.editor.notify("window/workDoneProgress/cancel", json!({"token": "my-run-7"}));
    let resp = f.editor.wait_response(id, LONG);
    assert_eq!(resp["result"]["stopReason"], "cancelled", "{resp}");
}

fn fix_uri(f: &mut Fixture, uri: &str) -> Value {
    f.execute(json!({"uri": uri, "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "diagnostics": []}))
}

#[test]
fn untitled_remote_and_nul_uris_are_refused_with_a_clear_message() {
    let mut f = fixture(&[("a.py", "x\n")]);
    f.editor.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": "untitled:Untitled-1", "languageId": "python", "version": 1, "text": "import os\n"}}),
    );
    let a = f.path("a.py");
    for uri in [
        "untitled:Untitled-1".to_string(),
        "file://fileserver/share/a.py".to_string(),
        format!("{}%00.txt", file_uri(&a)),
        "git:/a.py?ref=HEAD".to_string(),
    ] {
        let resp = fix_uri(&mut f, &uri);
        let err = resp["error"]["message"].as_str().unwrap_or_default().to_string();
        assert!(err.contains("only on files saved on this machine"), "{uri}: {resp}");
    }
    assert!(f.mock.requests().is_empty(), "nothing was sent to the model");
    // The server lives on.
    assert!(f.editor.request("textDocument/codeAction", json!({"textDocument": {"uri": file_uri(&a)},
        "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "context": {"diagnostics": []}}))["result"]
        .is_array());
}

#[test]
fn a_file_outside_the_workspace_folders_is_seen_alone() {
    let mut f = fixture(&[("in.py", "inside = 1\n")]);
    let outside = f.root.parent().unwrap().join("home");
    std::fs::create_dir_all(outside.join(".ssh")).unwrap();
    std::fs::write(outside.join("notes.txt"), "a note\n").unwrap();
    std::fs::write(outside.join("other.txt"), "private other\n").unwrap();
    std::fs::write(outside.join(".ssh/id_rsa"), "PRIVATE KEY\n").unwrap();
    let notes = outside.join("notes.txt");
    f.editor.open(&notes, "plaintext", 1, "a note\n");
    let abs = |p: &Path| p.to_str().unwrap().to_string();
    f.mock.push(tool_reply(&[
        ("t_self", "read_file", json!({"path": abs(&notes)})),
        ("t_other", "read_file", json!({"path": abs(&outside.join("other.txt"))})),
        ("t_key", "read_file", json!({"path": abs(&outside.join(".ssh/id_rsa"))})),
        ("t_etc", "read_file", json!({"path": "/etc/hostname"})),
        ("t_list", "list_files", json!({"path": abs(&outside)})),
        ("t_all", "list_files", json!({})),
        ("t_grep", "grep", json!({"pattern": "private|PRIVATE"})),
    ]));
    f.mock.push(tool_reply(&[(
        "t_edit",
        "edit_file",
        json!({"path": abs(&notes), "old_text": "a note", "new_text": "a better note"}),
    )]));
    f.mock.push(text_reply("Improved the note."));
    let result = fix_uri(&mut f, &file_uri(&notes));
    assert_eq!(result["result"]["applied"], true, "{result}");
    f.assert_no_violations();
    let requests = f.mock.requests();
    let by_id: std::collections::HashMap<String, (String, bool)> = tool_results(&requests[1])
        .iter()
        .map(|b| (b["tool_use_id"].as_str().unwrap().to_string(), (result_text(b), b["is_error"] == true)))
        .collect();
    assert!(by_id["t_self"].0.contains("a note") && !by_id["t_self"].1);
    for id in ["t_other", "t_key", "t_etc", "t_list"] {
        assert!(by_id[id].1, "{id} must fail: {:?}", by_id[id]);
        assert!(by_id[id].0.contains("outside the workspace"), "{id}: {}", by_id[id].0);
    }
    assert_eq!(by_id["t_all"].0, "in.py\n", "the workspace, without the target's folder");
    assert!(!by_id["t_grep"].0.contains("private other"), "{}", by_id["t_grep"].0);
    assert!(!f.mock.requests_text().contains("PRIVATE KEY\\n"));
    assert_eq!(f.editor.buffer_text(&notes).unwrap(), "a better note\n");
}

#[test]
fn a_protected_target_is_refused() {
    let mut f = fixture(&[(".env", "API_TOKEN=abc\n"), ("config/.env.local", "X=1\n"), ("certs/tls.key", "k\n")]);
    for rel in [".env", "config/.env.local", "certs/tls.key"] {
        let uri = file_uri(&f.path(rel));
        let resp = fix_uri(&mut f, &uri);
        let err = resp["error"]["message"].as_str().unwrap_or_default().to_string();
        assert!(err.contains("is a protected file"), "{rel}: {resp}");
    }
    assert!(f.mock.requests().is_empty());
    let shown = f.editor.wait_for_notification("window/showMessage", |m| m["type"] == 2, LONG);
    assert!(shown["message"].as_str().unwrap().contains("protected"), "{shown}");
}

#[cfg(unix)]
#[test]
fn a_dangling_link_out_of_the_workspace_is_never_written_or_proposed() {
    let mut f = fixture(&[("a.py", "x = 1\n")]);
    let outside = f.root.parent().unwrap().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(outside.join("planted.py"), f.path("planted.py")).unwrap();
    f.mock.push(tool_reply(&[
        ("t_write", "write_file", json!({"path": "planted.py", "content": "import os\n"})),
        ("t_edit", "edit_file", json!({"path": "a.py", "old_text": "x = 1", "new_text": "x = 2"})),
    ]));
    f.mock.push(text_reply("Done."));
    let result = f.fix("a.py", diag(0, 0, 1, "x"));
    assert_eq!(result["result"]["applied"], true, "{result}");
    let results = tool_results(&f.mock.requests()[1]);
    assert_eq!(results[0]["is_error"], true);
    assert!(result_text(&results[0]).contains("outside the workspace"), "{}", result_text(&results[0]));
    let edits = f.editor.applied_edits();
    let text = edits[0].to_string();
    assert!(!text.contains("planted") && !text.contains("\"create\""), "{text}");
    assert!(!outside.join("planted.py").exists());
}

#[test]
fn an_error_that_echoes_the_key_never_reaches_the_editor() {
    let mut f = fixture(&[("a.py", "x\n")]);
    f.mock.push(mock_model::error_reply(
        400,
        "invalid_request_error",
        &format!("proxy says: Authorization: Bearer {k} (x-api-key {k})", k = mock_model::API_KEY),
    ));
    let result = f.fix("a.py", diag(0, 0, 1, "x"));
    assert_eq!(result["result"]["stopReason"], "model_error");
    let shown = f.editor.wait_for_notification("window/showMessage", |m| m["type"] == 1, LONG);
    f.editor.wait_for_notification("$/progress", |p| p["value"]["kind"] == "end", LONG);
    assert!(shown["message"].as_str().unwrap().contains("proxy says"), "{shown}");
    let everything = serde_json::to_string(&f.editor.messages()).unwrap() + &result.to_string() + &f.editor.stderr();
    assert!(!everything.contains(mock_model::API_KEY), "the key reached the editor: {everything}");
}

/// A `didChange` whose params do not deserialize (`character: -1`) for `path`, at `version`.
fn unparsable_change(f: &mut Fixture, path: &Path, version: i32) {
    f.editor.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": file_uri(path), "version": version},
               "contentChanges": [{"range": {"start": {"line": 0, "character": -1}, "end": {"line": 0, "character": 1}}, "text": "lost"}]}),
    );
}

fn out_of_sync_warnings(f: &Fixture) -> Vec<Value> {
    f.editor
        .notifications("window/showMessage")
        .into_iter()
        .filter(|m| m["message"].as_str().unwrap_or_default().contains("could not apply a change"))
        .collect()
}

#[test]
fn a_change_that_cannot_be_parsed_puts_the_document_out_of_sync_until_it_is_saved_with_its_text() {
    let mut f = fixture(&[("a.py", "x = 1\n")]);
    let path = f.path("a.py");
    f.editor.open(&path, "python", 1, "x = 1\n");
    unparsable_change(&mut f, &path, 2);
    let shown = f.editor.wait_for_notification(
        "window/showMessage",
        |m| m["message"].as_str().unwrap_or_default().contains("could not apply a change"),
        LONG,
    );
    assert_eq!(shown["type"], 2, "a warning: {shown}");
    let text = shown["message"].as_str().unwrap();
    assert!(text.contains("a.py") && text.contains("until you save it"), "{text}");
    // A range without `end` is lost too; the user is told once.
    f.editor.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": file_uri(&path), "version": 3},
               "contentChanges": [{"range": {"start": {"line": 0, "character": 0}}, "text": "lost"}]}),
    );
    f.editor.pump(Duration::from_millis(300));
    assert_eq!(out_of_sync_warnings(&f).len(), 1);
    // Agent fix is refused, with the reason, before anything reaches the model.
    let r = f.fix("a.py", diag(0, 0, 1, "x"));
    assert_eq!(r["error"]["code"], -32803, "{r}");
    assert!(r["error"]["message"].as_str().unwrap().starts_with("Agent fix cannot run: a.py is out of sync"), "{r}");
    // A save without the text does not help; one with the text does.
    f.editor.save(&path, None);
    let r = f.fix("a.py", diag(0, 0, 1, "x"));
    assert_eq!(r["error"]["code"], -32803, "{r}");
    assert!(f.mock.requests().is_empty());
    f.editor.save(&path, Some("x = 2  # as saved\n"));
    f.mock.push(text_reply("Nothing to do."));
    let r = f.fix("a.py", diag(0, 0, 1, "x"));
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    assert!(f.mock.requests_text().contains("x = 2  # as saved"), "the run saw the saved text");
    // Well-formed positions out of range still clamp: no warning, still in sync.
    f.editor.change_incremental(&path, 4, ((9, 9), (12, 0)), "!");
    f.mock.push(text_reply("Nothing to do."));
    let r = f.fix("a.py", diag(0, 0, 1, "x"));
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    assert_eq!(out_of_sync_warnings(&f).len(), 1);
}

#[test]
fn a_reopen_brings_an_out_of_sync_document_back_and_a_run_never_edits_one() {
    let mut f = fixture(&[("a.py", "a = 1\n"), ("b.py", "b = 1\n")]);
    let (a, b) = (f.path("a.py"), f.path("b.py"));
    f.editor.open(&a, "python", 1, "a = 1\n");
    f.editor.open(&b, "python", 1, "b = 1\n");
    unparsable_change(&mut f, &a, 2);
    unparsable_change(&mut f, &b, 2);
    f.editor.pump(Duration::from_millis(300));
    assert_eq!(out_of_sync_warnings(&f).len(), 2, "one warning per document");
    let r = f.fix("a.py", diag(0, 0, 1, "a"));
    assert_eq!(r["error"]["code"], -32803, "{r}");
    // A didOpen that cannot be parsed leaves a buffer agentfix does not know: the file is
    // not read from disk instead.
    let c = f.path("c.py");
    std::fs::write(&c, "c = 1\n").unwrap();
    f.editor.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": file_uri(&c), "languageId": "python", "version": "one", "text": "c = 1\n"}}),
    );
    f.editor.pump(Duration::from_millis(300));
    assert_eq!(out_of_sync_warnings(&f).len(), 3);
    let r = f.fix("c.py", diag(0, 0, 1, "c"));
    assert_eq!(r["error"]["code"], -32803, "{r}");
    // Reopened: in sync again.
    f.editor.open(&a, "python", 1, "a = 1\n");
    // The run edits both files: b.py, still out of sync, is left out and said so.
    f.mock.push(tool_reply(&[
        ("t1", "edit_file", json!({"path": "a.py", "old_text": "a = 1", "new_text": "a = 2"})),
        ("t2", "edit_file", json!({"path": "b.py", "old_text": "b = 1", "new_text": "b = 2"})),
    ]));
    f.mock.push(text_reply("Changed both."));
    let r = f.fix("a.py", diag(0, 0, 1, "a"));
    assert_eq!(r["result"]["applied"], true, "{r}");
    let conflicts = r["result"]["conflicts"].as_array().unwrap();
    assert_eq!(conflicts.len(), 1, "{r}");
    assert!(conflicts[0].as_str().unwrap().starts_with("b.py: not changed because agentfix's copy"), "{r}");
    let edits = f.editor.applied_edits();
    let changed: Vec<&str> = edits[0]["edit"]["documentChanges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["textDocument"]["uri"].as_str().unwrap())
        .collect();
    assert_eq!(changed, [file_uri(&a)]);
}

fn guard_edit() -> Value {
    json!({"path": "calc.py", "old_text": "    return a / b\n", "new_text": "    if b == 0:\n        return 0\n    return a / b\n"})
}

#[test]
fn a_run_can_pick_its_model_and_a_follow_up_continues_its_conversation() {
    let text = "def div(a, b):\n    return a / b\n";
    let mut f = fixture(&[("calc.py", text)]);
    let path = f.path("calc.py");
    let uri = file_uri(&path);
    f.editor.open(&path, "python", 1, text);
    f.mock.push(tool_reply(&[("toolu_e1", "edit_file", guard_edit())]));
    f.mock.push(text_reply("Guarded the division by zero."));
    let mut arg = f.fix_argument("calc.py", diag(1, 11, 16, "Possible division by zero"));
    arg["model"] = json!("claude-haiku-4-5");
    arg["effort"] = json!("low");
    let first = f.execute(arg);
    assert_eq!(first["result"]["applied"], true, "{first}");
    let run_id = first["result"]["runId"].as_str().unwrap().to_string();
    assert!(run_id.starts_with("run-"), "{run_id}");
    let requests = f.mock.requests();
    assert!(requests.iter().all(|r| r.body["model"] == "claude-haiku-4-5"), "the run's own model");
    // And its own effort: a low thinking budget (on the first request; the
    // scripted replies carry no thinking block to continue from).
    assert_eq!(requests[0].body["thinking"], json!({"type": "enabled", "budget_tokens": 2048}));
    // The user changes the guard's value after applying it.
    let applied = f.editor.buffer_text(&path).unwrap();
    assert!(applied.contains("return 0\n"), "{applied}");
    f.editor.change_full(&path, 3, &applied.replace("return 0\n", "return None\n"));

    // A follow-up is offered on the lines the run changed, not elsewhere.
    let actions = |f: &mut Fixture, line: u32| {
        let range = json!({"start": {"line": line, "character": 0}, "end": {"line": line, "character": 0}});
        let resp = f.editor.request(
            "textDocument/codeAction",
            json!({"textDocument": {"uri": uri}, "range": range, "context": {"diagnostics": []}}),
        );
        resp["result"].as_array().unwrap().clone()
    };
    let offered = actions(&mut f, 2);
    let follow =
        offered.iter().find(|a| a["title"] == "Agent fix: follow up…").unwrap_or_else(|| panic!("{offered:?}"));
    let mut arg = follow["command"]["arguments"][0].clone();
    assert_eq!(arg["followUp"], run_id.as_str());
    assert!(!actions(&mut f, 0).iter().any(|a| a["title"] == "Agent fix: follow up…"));

    // The follow-up sends the earlier conversation (same prefix), then what
    // became of the proposal and the new instruction.
    arg["instruction"] = json!("also handle negative numbers");
    f.mock.push(text_reply("Nothing more to change."));
    let second = f.execute(arg);
    assert_eq!(second["result"]["stopReason"], "end_turn", "{second}");
    assert_ne!(second["result"]["runId"], run_id.as_str());
    f.assert_no_violations();
    let requests = f.mock.requests();
    let (earlier, follow_up) = (&requests[1].body["messages"], &requests[2].body["messages"]);
    let earlier = earlier.as_array().unwrap();
    let now = follow_up.as_array().unwrap();
    assert_eq!(now.len(), earlier.len() + 2, "the earlier messages, its answer, the follow-up");
    for (i, m) in earlier.iter().enumerate() {
        assert_eq!(
            m["content"].as_array().map(|c| c.iter().map(|b| b["text"].clone()).collect::<Vec<_>>()),
            now[i]["content"].as_array().map(|c| c.iter().map(|b| b["text"].clone()).collect::<Vec<_>>()),
            "message {i}"
        );
    }
    let report = now.last().unwrap()["content"][0]["text"].as_str().unwrap().to_string();
    assert!(report.contains("`calc.py`: your proposal was applied in part or changed since"), "{report}");
    assert!(report.contains("-        return 0\n+        return None\n"), "{report}");
    assert!(report.ends_with("The user's request: also handle negative numbers"), "{report}");

    // A run that is not kept is refused with a clear message.
    let mut gone = f.fix_argument("calc.py", diag(1, 11, 16, "Possible division by zero"));
    gone["followUp"] = json!("run-999");
    let refused = f.execute(gone);
    let message = refused["error"]["message"].as_str().unwrap_or_default().to_string();
    assert!(message.contains("cannot follow up on run-999") && message.contains("last 16 runs"), "{refused}");
}

#[test]
fn fix_all_is_offered_only_when_asked_and_annotates_hunks_per_problem() {
    let text = "def div(a, b):\n    return a / b\n\n\ndef inv(x):\n    return 1 / x\n";
    let mut f = fixture(&[("calc.py", text)]);
    let path = f.path("calc.py");
    let uri = file_uri(&path);
    f.editor.open(&path, "python", 1, text);
    let (d1, d2) = (diag(1, 11, 16, "Possible division by zero"), diag(5, 11, 16, "Possible division by zero in inv"));
    let ask = |f: &mut Fixture, context: Value| {
        let cursor = json!({"start": {"line": 1, "character": 11}, "end": {"line": 1, "character": 11}});
        let resp = f.editor.request(
            "textDocument/codeAction",
            json!({"textDocument": {"uri": uri}, "range": cursor, "context": context}),
        );
        resp["result"].as_array().unwrap().clone()
    };
    let fix_all = |actions: &[Value]| actions.iter().find(|a| a["kind"] == "source.fixAll.agentfix").cloned();
    // Asked by the user (the context menu, a plugin's command): offered.
    let actions = ask(&mut f, json!({"diagnostics": [d1, d2], "triggerKind": 1}));
    let all = fix_all(&actions).unwrap_or_else(|| panic!("{actions:?}"));
    assert_eq!(all["title"], "Agent fix: all 2 problems in this file");
    assert_eq!(all["diagnostics"], json!([d1, d2]));
    // On save (VS Code's codeActionsOnSave) or the light bulb: never a model run.
    assert!(
        fix_all(&ask(&mut f, json!({"diagnostics": [d1, d2], "triggerKind": 2, "only": ["source.fixAll"]}))).is_none()
    );
    assert!(fix_all(&ask(&mut f, json!({"diagnostics": [d1, d2], "only": ["source.fixAll"]}))).is_none());
    assert!(fix_all(&ask(&mut f, json!({"diagnostics": [d1, d2], "triggerKind": 2}))).is_none());
    // Asked for explicitly by kind.
    let only = ask(&mut f, json!({"diagnostics": [d1, d2], "triggerKind": 1, "only": ["source.fixAll"]}));
    assert_eq!(only.len(), 1, "{only:?}");
    // One problem is not a fix-all.
    assert!(fix_all(&ask(&mut f, json!({"diagnostics": [d1], "triggerKind": 1}))).is_none());
    assert!(f.mock.requests().is_empty(), "code actions never call the model");

    // The run gets both problems; each hunk's annotation names its problem.
    f.mock.push(tool_reply(&[
        ("toolu_e1", "edit_file", guard_edit()),
        (
            "toolu_e2",
            "edit_file",
            json!({"path": "calc.py", "old_text": "    return 1 / x\n", "new_text": "    return 1 / x if x else 0\n"}),
        ),
    ]));
    f.mock.push(text_reply("Guarded both divisions."));
    let result = f.execute(all["command"]["arguments"][0].clone());
    assert_eq!(result["result"]["applied"], true, "{result}");
    let prompt = f.mock.requests()[0].body["messages"][0]["content"][0]["text"].as_str().unwrap().to_string();
    assert!(prompt.contains("Possible division by zero in inv") && prompt.contains("line 2, column 12"), "{prompt}");
    let edit = &f.editor.applied_edits()[0]["edit"];
    let labels: Vec<String> = edit["changeAnnotations"]
        .as_object()
        .unwrap()
        .values()
        .map(|a| a["label"].as_str().unwrap().to_string())
        .collect();
    assert!(labels.contains(&"calc.py:2: Possible division by zero".to_string()), "{labels:?}");
    assert!(labels.contains(&"calc.py:6: Possible division by zero in inv".to_string()), "{labels:?}");
    f.assert_no_violations();
}

#[test]
fn best_of_2_through_the_editor_lists_both_candidates_and_sums_what_they_took() {
    let mut f = fixture(&[("calc.py", "def div(a, b):\n    return a / b\n")]);
    let edit = |id: &str, new: &str| {
        tool_reply(&[(id, "edit_file", json!({"path": "calc.py", "old_text": "    return a / b\n", "new_text": new}))])
    };
    // Nothing checks them (no language server, no verify command): the
    // smaller diff wins.
    f.mock.push_for(
        "candidate 1 of 2",
        edit("toolu_1", "    # guard\n    if b == 0:\n        return 0\n    return a / b\n"),
    );
    f.mock.push_for("candidate 1 of 2", text_reply("Guarded it."));
    f.mock.push_for("candidate 2 of 2", edit("toolu_2", "    return a / b if b else 0\n"));
    f.mock.push_for("candidate 2 of 2", text_reply("Guarded it in one line."));
    let mut arg = f.fix_argument("calc.py", diag(1, 11, 16, "Possible division by zero"));
    arg["candidates"] = json!(2);
    let r = f.execute(arg);
    let result = &r["result"];
    assert_eq!(result["applied"], true, "{r}");
    let candidates = result["candidates"].as_array().expect("the candidates listed");
    assert_eq!(candidates.len(), 2, "{result}");
    let chosen: Vec<u64> =
        candidates.iter().filter(|c| c["chosen"] == true).map(|c| c["index"].as_u64().unwrap()).collect();
    assert_eq!(chosen, [2], "the smaller diff: {result}");
    assert_eq!(candidates[0]["linesChanged"], 3);
    assert_eq!(candidates[1]["linesChanged"], 2, "one removed, one added");
    assert_eq!(result["turns"], 4, "the turns of both: {result}");
    assert!(result["message"].as_str().unwrap().contains("Guarded it in one line."), "{result}");
    // More than eight is refused before anything reaches the model.
    let mut arg = f.fix_argument("calc.py", diag(1, 11, 16, "Possible division by zero"));
    arg["candidates"] = json!(50);
    let r = f.execute(arg);
    assert!(r["error"]["message"].as_str().unwrap_or_default().contains("candidates must be 1 to 8, not 50"), "{r}");
    assert_eq!(f.mock.requests().len(), 4);
    f.assert_no_violations();
}

#[test]
fn best_of_3_through_the_editor_offers_the_two_that_failed_as_alternatives() {
    const CALC: &str = "def div(a, b):\n    return a / b\n";
    let test = "python3 -c 'import calc; assert calc.div(1, 0) == 0'";
    let init = json!({
        "commands": {"test": ["sh", "-c", test], "autoApprove": true},
        "verify": {"commands": ["test"], "rounds": 1},
    });
    let mut f = start(Setup { files: &[("calc.py", CALC)], init, ..Default::default() });
    let calc = f.path("calc.py");
    f.editor.open(&calc, "python", 1, CALC);
    let edit = |id: &str, new: &str| {
        tool_reply(&[(id, "edit_file", json!({"path": "calc.py", "old_text": "    return a / b\n", "new_text": new}))])
    };
    // Candidates 1 and 2 return None for b == 0: the test fails; 3 passes.
    f.mock.push_for("candidate 1 of 3", edit("toolu_1", "    return a / b if b else None\n"));
    f.mock.push_for("candidate 1 of 3", text_reply("Returned None for zero."));
    f.mock.push_for("candidate 2 of 3", edit("toolu_2", "    return None if b == 0 else a / b\n"));
    f.mock.push_for("candidate 2 of 3", text_reply("Guarded with None."));
    f.mock.push_for("candidate 3 of 3", edit("toolu_3", "    return a / b if b else 0\n"));
    f.mock.push_for("candidate 3 of 3", text_reply("Returned 0 for zero."));
    let mut arg = f.fix_argument("calc.py", diag(1, 11, 16, "Possible division by zero"));
    arg["candidates"] = json!(3);
    let r = f.execute(arg);
    let result = &r["result"];
    assert_eq!(result["applied"], true, "{r}");
    let chosen: Vec<&Value> = result["candidates"].as_array().unwrap().iter().filter(|c| c["chosen"] == true).collect();
    assert_eq!(chosen.len(), 1);
    assert_eq!((chosen[0]["index"].as_u64(), chosen[0]["verified"].as_bool()), (Some(3), Some(true)), "{result}");
    assert_eq!(result["verification"]["verified"], true);
    let label = f.editor.applied_edits()[0]["label"].as_str().unwrap().to_string();
    assert!(label.starts_with("Agent fix: verified: test passed ("), "{label}");
    assert!(label.ends_with("; candidate 3 of 3)"), "the review says which candidate: {label}");
    assert_eq!(f.editor.buffer_text(&calc).unwrap(), "def div(a, b):\n    return a / b if b else 0\n");

    // On the same lines, the two others are offered, each with its check.
    let uri = file_uri(&calc);
    let at_line = json!({"start": {"line": 1, "character": 4}, "end": {"line": 1, "character": 4}});
    let actions = f.editor.request(
        "textDocument/codeAction",
        json!({"textDocument": {"uri": uri}, "range": at_line, "context": {"diagnostics": []}}),
    );
    let actions = actions["result"].as_array().unwrap().clone();
    let titles: Vec<&str> = actions.iter().map(|a| a["title"].as_str().unwrap()).collect();
    assert!(titles.contains(&"Agent fix: alternative 1 (not verified: test failed)"), "{titles:?}");
    assert!(titles.contains(&"Agent fix: alternative 2 (not verified: test failed)"), "{titles:?}");
    assert!(titles.contains(&"Agent fix: follow up…"), "{titles:?}");
    let second = actions.iter().find(|a| a["title"].as_str().unwrap().contains("alternative 2")).unwrap();
    assert_eq!(second["command"]["command"], "agentfix.applyAlternative");
    let requests = f.mock.requests().len();
    // Chosen one applied: alternative 2 replaces it (no mix of the two).
    let argument = second["command"]["arguments"][0].clone();
    let applied = f.editor.request(
        "workspace/executeCommand",
        json!({"command": "agentfix.applyAlternative", "arguments": [argument.clone()]}),
    );
    assert_eq!(applied["result"]["applied"], true, "{applied}");
    assert_eq!(f.editor.buffer_text(&calc).unwrap(), "def div(a, b):\n    return None if b == 0 else a / b\n");
    let label = f.editor.applied_edits()[1]["label"].as_str().unwrap().to_string();
    assert_eq!(label, "Agent fix: alternative 2 (not verified: test failed): Guarded with None. (1 file, 1 hunk)");
    assert_eq!(f.mock.requests().len(), requests, "no model is asked");
    // Its review reports on the alternative's hunks, and a follow-up on the
    // run tells of the alternative.
    let sent = &f.editor.applied_edits()[1]["edit"]["documentChanges"][0]["edits"][0];
    let run_id = argument["runId"].clone();
    let reviewed = f.editor.request(
        "workspace/executeCommand",
        json!({"command": "agentfix.reviewed", "arguments": [{"runId": run_id, "hunks": [
            {"annotationId": sent["annotationId"], "outcome": "accepted"}]}]}),
    );
    assert_eq!(reviewed["result"], json!({"recorded": 1, "unknown": []}), "{reviewed}");
    f.mock.push(text_reply("Fine as it is."));
    let mut follow = f.fix_argument("calc.py", diag(1, 11, 16, "Possible division by zero"));
    follow["followUp"] = run_id;
    f.editor.change_full(&calc, 5, "def div(a, b):\n    return None if b == 0 else a / b\n");
    follow["version"] = json!(5);
    let r = f.execute(follow);
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    let last = f.mock.requests().last().unwrap().body["messages"].as_array().unwrap().last().unwrap().clone();
    let report: String = last["content"].as_array().unwrap().iter().filter_map(|b| b["text"].as_str()).collect();
    assert!(report.contains("- `calc.py`: your proposal was applied in full."), "{report}");
    assert!(report.contains("  - line 2 (`return None if b == 0 else a / b`): accepted in the review.\n"), "{report}");
    // A run no longer kept, or an index it does not have, is said so.
    let mut unknown = argument.clone();
    unknown["index"] = json!(7);
    let r = f
        .editor
        .request("workspace/executeCommand", json!({"command": "agentfix.applyAlternative", "arguments": [unknown]}));
    assert_eq!(r["result"]["applied"], false, "{r}");
    assert!(
        r["result"]["message"].as_str().unwrap().contains("has no alternative 7 (it proposed 2 other candidate(s))"),
        "{r}"
    );
    let r = f.editor.request(
        "workspace/executeCommand",
        json!({"command": "agentfix.applyAlternative", "arguments": [{"runId": 5}]}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    f.assert_no_violations();
}

#[test]
fn a_client_that_times_out_requests_after_5_s_gets_a_20_s_fix_through_run_ended() {
    const CALC: &str = "def div(a, b):\n    return a / b\n";
    // Helix: `delivery: auto` answers at once.
    let mut f = start(Setup { files: &[("calc.py", CALC)], client: Some("helix"), ..Default::default() });
    let calc = f.path("calc.py");
    f.editor.open(&calc, "python", 1, CALC);
    let slow = |reply: Reply| Reply::Delay(Duration::from_secs(5), Box::new(reply));
    f.mock.push(slow(tool_reply(&[("toolu_r1", "read_file", json!({"path": "calc.py"}))])));
    f.mock.push(slow(tool_reply(&[("toolu_r2", "read_file", json!({"path": "calc.py", "offset": 1}))])));
    let guard =
        json!({"path": "calc.py", "old_text": "    return a / b\n", "new_text": "    return a / b if b else 0\n"});
    f.mock.push(slow(tool_reply(&[("toolu_e", "edit_file", guard)])));
    f.mock.push(slow(text_reply("Guarded the division.")));
    let arg = f.fix_argument("calc.py", diag(1, 11, 16, "Possible division by zero"));
    let started = Instant::now();
    let id = f.editor.send_request("workspace/executeCommand", json!({"command": "agentfix.fix", "arguments": [arg]}));
    // This client gives up on any request after 5 s.
    let answer = f.editor.wait_response(id, Duration::from_secs(5));
    let run_id = answer["result"]["runId"].as_str().expect("a run id at once").to_string();
    assert_eq!(answer["result"]["status"], "started", "{answer}");
    let ended = f.editor.wait_for_notification("agentfix/runEnded", |_| true, Duration::from_secs(60));
    assert!(started.elapsed() >= Duration::from_secs(20), "a 20 s run: {:?}", started.elapsed());
    let result = &ended;
    assert_eq!((result["runId"].as_str(), result["applied"].as_bool()), (Some(run_id.as_str()), Some(true)), "{ended}");
    assert_eq!(result["stopReason"], "end_turn");
    assert_eq!(result["turns"], 4);
    assert_eq!(f.editor.buffer_text(&calc).unwrap(), "def div(a, b):\n    return a / b if b else 0\n");
    // Said to a client without a plugin too.
    let said = f.editor.notifications("window/showMessage");
    let told = |m: &Value| m["message"].as_str().unwrap_or_default().starts_with("Agent fix: Guarded the division.");
    assert!(said.iter().any(told), "{said:?}");
    f.assert_no_violations();
}

#[test]
fn a_run_answered_at_once_is_cancelled_by_its_run_id() {
    const CALC: &str = "def div(a, b):\n    return a / b\n";
    let init = json!({"delivery": "async"});
    let mut f = start(Setup { files: &[("calc.py", CALC)], init, ..Default::default() });
    f.editor.open(&f.path("calc.py"), "python", 1, CALC);
    f.mock.push(Reply::Hang);
    let arg = f.fix_argument("calc.py", diag(1, 11, 16, "Possible division by zero"));
    let answer = f.execute(arg.clone());
    let run_id = answer["result"]["runId"].as_str().expect("answered at once").to_string();
    // Wait until the model is asked, then cancel by the id.
    let deadline = Instant::now() + LONG;
    while f.mock.requests().is_empty() && Instant::now() < deadline {
        f.editor.pump(Duration::from_millis(20));
    }
    let r = f
        .editor
        .request("workspace/executeCommand", json!({"command": "agentfix.cancel", "arguments": [{"runId": run_id}]}));
    assert_eq!(r["result"], json!({"cancelled": true}), "{r}");
    let ended = f.editor.wait_for_notification("agentfix/runEnded", |_| true, LONG);
    assert_eq!(ended["stopReason"], "cancelled", "{ended}");
    assert_eq!(ended["applied"], false);
    // Once over, the id cancels nothing; a bad argument is refused.
    let r = f
        .editor
        .request("workspace/executeCommand", json!({"command": "agentfix.cancel", "arguments": [{"runId": run_id}]}));
    assert_eq!(r["result"], json!({"cancelled": false}), "{r}");
    let r = f.editor.request("workspace/executeCommand", json!({"command": "agentfix.cancel", "arguments": []}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    // The argument wins over the setting: this one answers when it is over.
    f.mock.push(text_reply("Nothing to change."));
    let mut sync = arg;
    sync["delivery"] = json!("sync");
    let r = f.execute(sync);
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
}

#[test]
fn through_the_editor_a_failed_check_is_fed_back_and_the_second_proposal_is_offered_verified() {
    const CALC: &str = "def div(a, b):\n    return a / b\n";
    let test = "python3 -c 'import calc; assert calc.div(1, 0) == 0'";
    let init = json!({"commands": {"test": ["sh", "-c", test], "autoApprove": true}, "verify": {"commands": ["test"]}});
    let mut f = start(Setup { files: &[("calc.py", CALC)], init, ..Default::default() });
    let calc = f.path("calc.py");
    f.editor.open(&calc, "python", 1, CALC);
    let edit = |id: &str, old: &str, new: &str| {
        tool_reply(&[(id, "edit_file", json!({"path": "calc.py", "old_text": old, "new_text": new}))])
    };
    f.mock.push(edit("toolu_1", "    return a / b\n", "    return a / b if b else None\n"));
    f.mock.push(text_reply("Returned None for zero."));
    f.mock.push(edit("toolu_2", "    return a / b if b else None\n", "    return a / b if b else 0\n"));
    f.mock.push(text_reply("Returned 0 for zero, as the test wants."));
    let r = f.fix("calc.py", diag(1, 11, 16, "Possible division by zero"));
    let result = &r["result"];
    assert_eq!((result["applied"].as_bool(), result["turns"].as_u64()), (Some(true), Some(4)), "{r}");
    assert_eq!(result["verification"]["verified"], true, "{result}");
    assert_eq!(result["verification"]["rounds"], 2);
    // The findings went back as the next user message: what failed, the output's tail.
    let fed = f.mock.requests()[2].body["messages"].as_array().unwrap().last().unwrap().to_string();
    assert!(fed.contains("test") && fed.contains("AssertionError"), "{fed}");
    let label = f.editor.applied_edits()[0]["label"].as_str().unwrap().to_string();
    assert!(label.starts_with("Agent fix: verified: test passed ("), "{label}");
    assert_eq!(f.editor.buffer_text(&calc).unwrap(), "def div(a, b):\n    return a / b if b else 0\n");
    f.assert_no_violations();
}

#[test]
fn best_of_3_candidates_share_max_tokens_so_their_sum_stays_within_it() {
    const CALC: &str = "def div(a, b):\n    return a / b\n";
    let init = json!({"maxTokens": 12000});
    let mut f = start(Setup { files: &[("calc.py", CALC)], init, ..Default::default() });
    f.editor.open(&f.path("calc.py"), "python", 1, CALC);
    // Every candidate would read the file for ever.
    for k in 1..=3 {
        for turn in 0..40 {
            let id = format!("toolu_{k}_{turn}");
            let read = tool_reply(&[(&id, "read_file", json!({"path": "calc.py", "offset": turn % 2 + 1}))]);
            f.mock.push_for(&format!("candidate {k} of 3"), read);
        }
    }
    let mut arg = f.fix_argument("calc.py", diag(1, 11, 16, "Possible division by zero"));
    arg["candidates"] = json!(3);
    let r = f.execute(arg);
    let result = &r["result"];
    let spent = result["inputTokens"].as_u64().unwrap() + result["outputTokens"].as_u64().unwrap();
    assert!(spent <= 12000, "the sum of the candidates stays within maxTokens: {spent} {result}");
    let stops: Vec<&str> =
        result["candidates"].as_array().unwrap().iter().map(|c| c["stopReason"].as_str().unwrap()).collect();
    assert!(stops.iter().all(|s| *s == "token_budget" || *s == "stalled"), "{stops:?} {result}");
    assert!(stops.contains(&"token_budget"), "{stops:?}");
}

#[test]
fn an_editor_that_applies_without_review_gets_only_its_open_buffers_and_is_told_how_to_get_the_rest() {
    const CALC: &str = "def div(a, b):\n    return a / b\n";
    const UTIL: &str = "ZERO = None\n";
    let files = [("calc.py", CALC), ("util.py", UTIL)];
    let mut f = start(Setup { files: &files, client: Some("kakoune-lsp"), ..Default::default() });
    let calc = f.path("calc.py");
    f.editor.open(&calc, "python", 1, CALC);
    let edit = |id: &str, path: &str, old: &str, new: &str| {
        (id.to_string(), "edit_file", json!({"path": path, "old_text": old, "new_text": new}))
    };
    let calls = [
        edit("toolu_1", "calc.py", "    return a / b\n", "    return a / b if b else ZERO\n"),
        edit("toolu_2", "util.py", "ZERO = None\n", "ZERO = 0\n"),
        ("toolu_3".to_string(), "write_file", json!({"path": "new.py", "content": "X = 1\n"})),
    ];
    let calls: Vec<(&str, &str, Value)> = calls.iter().map(|(id, n, v)| (id.as_str(), *n, v.clone())).collect();
    f.mock.push(tool_reply(&calls));
    f.mock.push(text_reply("Guarded the division with ZERO."));
    let r = f.fix("calc.py", diag(1, 11, 16, "Possible division by zero"));
    let result = &r["result"];
    assert_eq!(result["applied"], true, "{r}");
    let edit = &f.editor.applied_edits()[0];
    let uris: Vec<&str> = edit["edit"]["documentChanges"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["textDocument"]["uri"].as_str())
        .collect();
    assert_eq!(uris, [file_uri(&calc)], "only the open buffer: {edit}");
    let label = edit["label"].as_str().unwrap();
    assert!(
        label.contains(
            "left out, since this editor applies edits without a review: new.py (a new file), util.py (not open)"
        ),
        "{label}"
    );
    assert!(label.contains("then use Agent fix: follow up… to get them"), "{label}");
    assert_eq!(result["conflicts"].as_array().unwrap().len(), 2, "{result}");
    assert_eq!(std::fs::read_to_string(f.path("util.py")).unwrap(), UTIL, "nothing reached the disk");
    assert!(!f.path("new.py").exists());
    // The way in: open the file, then follow up; the model hears it was not applied.
    let util = f.path("util.py");
    f.editor.open(&util, "python", 1, UTIL);
    f.mock.push(tool_reply(&[(
        "toolu_4",
        "edit_file",
        json!({"path": "util.py", "old_text": "ZERO = None\n", "new_text": "ZERO = 0\n"}),
    )]));
    f.mock.push(text_reply("Set ZERO."));
    let mut arg = f.fix_argument("calc.py", diag(1, 11, 16, "Possible division by zero"));
    arg["followUp"] = result["runId"].clone();
    let r = f.execute(arg);
    assert_eq!(r["result"]["applied"], true, "{r}");
    let told = f.mock.requests().last().unwrap().body.to_string();
    assert!(told.contains("util.py"), "the follow-up says what became of util.py");
    assert_eq!(f.editor.buffer_text(&util).unwrap(), "ZERO = 0\n");
}
