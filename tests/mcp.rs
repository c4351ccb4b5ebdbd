//! MCP tool servers through `agentfix fix` and `agentfix check`, against
//! the mock model, `examples/mcp_test_server.rs` (stdio) and
//! `examples/mcp_http_test_server.rs` (streamable HTTP, rmcp's server on
//! 127.0.0.1): the tools namespaced in the request, read-only calls run,
//! others denied unless `autoApprove`d or allowed, error results, a crash
//! (restarted once), a hang (the per-call timeout), the environment by
//! allow list, credentials in results redacted, resources as tools over
//! both transports, the HTTP server's `${env:…}` Authorization header (its
//! value never shown, a refused one leaving that server out), `check`.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::agentfix_bin;
use common::mcp_http::HttpServer;
use common::mock_model::{self, MockModel, text_reply, tool_reply};
use serde_json::{Value, json};

struct Ws {
    _dir: tempfile::TempDir,
    root: PathBuf,
    log: PathBuf,
}

fn workspace() -> Ws {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let root = base.join("ws");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("calc.py"), "def div(a, b):\n    return a / b\n").unwrap();
    Ws { _dir: dir, root, log: base.join("starts.log") }
}

impl Ws {
    fn starts(&self) -> usize {
        self.pids().len()
    }

    /// The process ids of the servers started, in order.
    fn pids(&self) -> Vec<u32> {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        log.lines().filter_map(|l| l.strip_prefix("start ")?.parse().ok()).collect()
    }

    /// Every server started is gone (soon after agentfix ended).
    fn assert_servers_gone(&self) {
        let alive = |pid: &u32| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| !s.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')))
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while self.pids().iter().any(alive) {
            assert!(std::time::Instant::now() < deadline, "an MCP server outlived agentfix: {:?}", self.pids());
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// A server entry of `mcpServers` that logs its starts.
    fn entry(&self, extra: Value) -> Value {
        let mut e = json!({
            "command": common::example("mcp_test_server"),
            "env": {"MCP_TEST_EXTRA": "x1", "MCP_TEST_LOG": self.log},
        });
        e.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        e
    }
}

fn agentfix(root: &Path, mock: &MockModel, args: &[&str]) -> Output {
    agentfix_with_env(root, mock, args, &[])
}

/// `agentfix` with `env` set too.
fn agentfix_with_env(root: &Path, mock: &MockModel, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(agentfix_bin());
    cmd.args(args).current_dir(root);
    for (k, _) in std::env::vars() {
        if k.starts_with("ANTHROPIC_") || k.starts_with("AGENTFIX_") || k.to_ascii_lowercase().ends_with("_proxy") {
            cmd.env_remove(k);
        }
    }
    let home = root.parent().unwrap();
    cmd.env("AGENTFIX_DEFAULT_LANGUAGE_SERVERS", "0")
        .env("XDG_CACHE_HOME", home.join("cache"))
        .env("HOME", home.join("home"))
        .env("ANTHROPIC_API_KEY", mock_model::API_KEY)
        .env("ANTHROPIC_BASE_URL", mock.base_url())
        .envs(env.iter().copied());
    cmd.output().expect("run agentfix")
}

/// The tool results of the request after `n` tool turns, by tool_use id.
fn results(mock: &MockModel, request: usize) -> Vec<(String, bool)> {
    let body = &mock.requests()[request].body;
    let last = body["messages"].as_array().unwrap().last().unwrap();
    last["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "tool_result")
        .map(|b| {
            let text = match &b["content"] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (text, b["is_error"] == true)
        })
        .collect()
}

/// Every file under `dir`, as text.
fn all_text_under(dir: &Path) -> String {
    let mut out = String::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.push_str(&all_text_under(&path));
        } else {
            out.push_str(&String::from_utf8_lossy(&std::fs::read(&path).unwrap_or_default()));
        }
    }
    out
}

/// The names of the tools in the model's first request.
fn offered(mock: &MockModel) -> Vec<String> {
    let tools = mock.requests()[0].body["tools"].as_array().cloned().unwrap_or_default();
    tools.iter().filter_map(|t| t["name"].as_str().map(str::to_string)).collect()
}

#[test]
fn tools_are_namespaced_read_only_ones_run_and_the_others_ask_or_are_auto_approved() {
    let ws = workspace();
    let mock = MockModel::start();
    mock.push(tool_reply(&[
        ("toolu_1", "mcp__test__lookup", json!({"query": "q"})),
        ("toolu_2", "mcp__test__write_note", json!({"text": "hi"})),
        ("toolu_3", "mcp__auto__write_note", json!({"text": "yo"})),
        ("toolu_4", "mcp__auto__write_note", json!({"text": "fail"})),
        ("toolu_5", "mcp__test__lookup", json!({"query": "image"})),
    ]));
    mock.push(text_reply("Nothing to change."));
    let settings = json!({"mcpServers": {
        "test": ws.entry(json!({})),
        "auto": ws.entry(json!({"autoApprove": ["write_note"]})),
    }});
    let out = agentfix(&ws.root, &mock, &["fix", "calc.py", "--line", "2", "--settings", &settings.to_string()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let requests = mock.requests();
    assert_eq!(requests.len(), 2, "{stderr}");
    let tools = requests[0].body["tools"].as_array().unwrap();
    let lookup = tools.iter().find(|t| t["name"] == "mcp__test__lookup").expect("namespaced");
    assert_eq!(lookup["input_schema"]["properties"]["query"]["type"], "string");
    assert!(lookup["description"].as_str().unwrap().contains("Looks a thing up."));
    for name in ["mcp__auto__lookup", "mcp__auto__write_note", "mcp__test__write_note", "read_file"] {
        assert!(tools.iter().any(|t| t["name"] == name), "{name} in {tools:?}");
    }
    let got = results(&mock, 1);
    // Read-only: ran without asking; the server never saw the API key, but its own env.
    assert_eq!(got[0], ("found q (key unset, extra x1)".to_string(), false));
    // Not read-only: the CLI denies it unless allowed.
    assert!(got[1].1 && got[1].0.contains("denied"), "{got:?}");
    assert!(stderr.contains("denied (pass --allow-command mcp__test__write_note"), "{stderr}");
    // autoApprove: no ask; an isError result is a tool error, and the run went on.
    assert_eq!(got[2], ("wrote yo".to_string(), false));
    assert_eq!(got[3], ("note refused".to_string(), true));
    assert!(got[4].0.starts_with("a picture:\n[image content (image/png)"), "{got:?}");
    // Each server started once (lazily, for the run's tool list), and stopped at the end.
    assert_eq!(ws.starts(), 2);
    ws.assert_servers_gone();

    // --allow-command allows a non-read-only MCP tool by its full name.
    let mock = MockModel::start();
    mock.push(tool_reply(&[("toolu_1", "mcp__test__write_note", json!({"text": "hi"}))]));
    mock.push(text_reply("Nothing to change."));
    let settings = json!({"mcpServers": {"test": ws.entry(json!({}))}});
    let args = [
        "fix",
        "calc.py",
        "--line",
        "2",
        "--settings",
        &settings.to_string(),
        "--allow-command",
        "mcp__test__write_note",
    ];
    agentfix(&ws.root, &mock, &args);
    assert_eq!(results(&mock, 1)[0], ("wrote hi".to_string(), false));
}

#[test]
fn a_crashed_server_is_restarted_once_and_a_hung_call_times_out() {
    let ws = workspace();
    let mock = MockModel::start();
    let call =
        |id: &str, server: &str, q: &str| tool_reply(&[(id, &format!("mcp__{server}__lookup"), json!({"query": q}))]);
    mock.push(call("toolu_1", "test", "crash"));
    mock.push(call("toolu_2", "test", "q"));
    mock.push(call("toolu_3", "test", "crash"));
    mock.push(call("toolu_4", "test", "q"));
    mock.push(call("toolu_5", "slow", "hang"));
    mock.push(call("toolu_6", "slow", "q"));
    mock.push(text_reply("Nothing to change."));
    let settings = json!({"mcpServers": {
        "test": ws.entry(json!({})),
        "slow": {"command": common::example("mcp_test_server"), "timeoutSecs": 1},
    }});
    let out = agentfix(&ws.root, &mock, &["fix", "calc.py", "--line", "2", "--settings", &settings.to_string()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(mock.requests().len(), 7, "{stderr}");
    let r = |n| results(&mock, n)[0].clone();
    let (crash, failed) = r(1);
    assert!(failed && crash.contains("failed during the call"), "{crash}");
    assert_eq!(r(2), ("found q (key unset, extra x1)".to_string(), false), "restarted");
    assert!(r(3).1);
    let (gone, failed) = r(4);
    assert!(failed && gone.contains("went away again after it was started again"), "{gone}");
    assert!(stderr.contains("warning: MCP server `test` went away again"), "{stderr}");
    assert_eq!(ws.starts(), 2, "one start and one restart");
    let (hung, failed) = r(5);
    assert!(failed && hung.contains("did not answer within 1 s"), "{hung}");
    // The server is kept after a timeout: the next call answers.
    assert_eq!(r(6), ("found q (key unset, extra )".to_string(), false));
}

#[test]
fn check_lists_the_servers_and_their_tools_or_why_not() {
    let ws = workspace();
    let http = HttpServer::start("check-t0ken", &ws.root.parent().unwrap().join("http.log"));
    let mock = MockModel::start();
    let settings = json!({"mcpServers": {
        "test": ws.entry(json!({})),
        "broken": {"command": "/nonexistent/mcp-server"},
        "web": {"url": http.url, "headers": {"Authorization": "Bearer ${env:MCP_TEST_CHECK_TOKEN}"}},
        "neither": {"args": ["x"]},
    }});
    let args = ["check", "--offline", "--settings", &settings.to_string()];
    let out = agentfix_with_env(&ws.root, &mock, &args, &[("MCP_TEST_CHECK_TOKEN", "check-t0ken")]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(
            "MCP server test: 4 tools: mcp__test__lookup (read-only), mcp__test__write_note, \
             mcp__test__list_resources (read-only), mcp__test__read_resource (read-only)\n"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "MCP server web: 4 tools: mcp__web__lookup (read-only), mcp__web__write_note, \
             mcp__web__list_resources (read-only), mcp__web__read_resource (read-only)\n"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("MCP server broken: cannot start MCP server `broken`"), "{stdout}");
    assert!(stdout.contains("MCP server neither: MCP server `neither` has neither `command`"), "{stdout}");
    assert!(!stdout.contains("check-t0ken"), "{stdout}");
    assert_ne!(out.status.code(), Some(0), "a server that cannot start is a problem");
}

#[test]
fn agentfix_toml_may_not_set_mcp_servers() {
    let ws = workspace();
    std::fs::write(ws.root.join("agentfix.toml"), "[mcpServers.evil]\ncommand = \"sh\"\n").unwrap();
    let mock = MockModel::start();
    let out = agentfix(&ws.root, &mock, &["fix", "calc.py", "--line", "2"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("may not set `mcpServers`"));
    // An HTTP server neither: the repository would choose where requests
    // (and the user's headers) go.
    let toml =
        "[mcpServers.web]\nurl = \"http://127.0.0.1:9/mcp\"\nheaders = { Authorization = \"Bearer ${env:HOME}\" }\n";
    std::fs::write(ws.root.join("agentfix.toml"), toml).unwrap();
    let out = agentfix(&ws.root, &mock, &["fix", "calc.py", "--line", "2"]);
    assert_ne!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("agentfix.toml may not set `mcpServers`"), "{stderr}");
    assert!(mock.requests().is_empty());
}

#[test]
fn in_the_editor_a_call_asks_once_with_always_and_the_server_serves_the_whole_session() {
    use common::editor::Editor;
    use common::file_uri;
    use std::time::Duration;

    let ws = workspace();
    let mock = MockModel::start();
    let base = mock.base_url();
    let mut editor = Editor::spawn(
        agentfix_bin(),
        &["--stdio"],
        &ws.root,
        &[
            ("ANTHROPIC_API_KEY", mock_model::API_KEY),
            ("ANTHROPIC_BASE_URL", &base),
            ("AGENTFIX_TRANSCRIPTS", "0"),
            ("AGENTFIX_DEFAULT_LANGUAGE_SERVERS", "0"),
        ],
    );
    let init = json!({"mcpServers": {"test": ws.entry(json!({}))}});
    editor.initialize(&ws.root, Editor::full_capabilities(), init);
    let calc = ws.root.join("calc.py");
    editor.open(&calc, "python", 1, "def div(a, b):\n    return a / b\n");
    editor.message_request_answer = json!({"title": "Always in this workspace"});
    let arg = json!({"uri": file_uri(&calc), "version": 1,
        "range": {"start": {"line": 1, "character": 0}, "end": {"line": 1, "character": 0}}, "diagnostics": []});
    for _ in 0..2 {
        mock.push(tool_reply(&[("t1", "mcp__test__write_note", json!({"text": "hi"}))]));
        mock.push(tool_reply(&[("t2", "mcp__test__lookup", json!({"query": "q"}))]));
        mock.push(text_reply("Nothing to change."));
        let id =
            editor.send_request("workspace/executeCommand", json!({"command": "agentfix.fix", "arguments": [arg]}));
        editor.wait_response(id, Duration::from_secs(60));
    }
    let asked: Vec<Value> =
        editor.messages().into_iter().filter(|m| m["method"] == "window/showMessageRequest").collect();
    assert_eq!(asked.len(), 1, "asked once, then remembered for the workspace");
    assert_eq!(
        asked[0]["params"]["message"],
        "Allow agentfix to call the MCP tool `mcp__test__write_note` with {\"text\":\"hi\"}?"
    );
    for request in [1, 4] {
        assert_eq!(results(&mock, request)[0], ("wrote hi".to_string(), false));
    }
    assert_eq!(results(&mock, 2)[0].0, "found q (key unset, extra x1)");
    assert_eq!(ws.starts(), 1, "one start for the session: the second run used the kept list and server");
    assert!(editor.shutdown().success());
    ws.assert_servers_gone();
}

#[test]
fn credentials_in_a_tool_result_reach_the_model_redacted_and_files_keep_their_assignments() {
    let ws = workspace();
    let printed = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gunVTLw\n\
                   -----END RSA PRIVATE KEY-----\ntoken=t0k3n-from-the-server";
    std::fs::write(ws.root.join("fixture.py"), format!("KEY = '''{printed}'''\n")).unwrap();
    let mock = MockModel::start();
    mock.push(tool_reply(&[
        ("toolu_1", "mcp__test__lookup", json!({"query": printed})),
        ("toolu_2", "read_file", json!({"path": "fixture.py"})),
    ]));
    mock.push(text_reply("Nothing to change."));
    let settings = json!({"mcpServers": {"test": ws.entry(json!({}))}});
    let out = agentfix(&ws.root, &mock, &["fix", "calc.py", "--line", "2", "--settings", &settings.to_string()]);
    assert_eq!(mock.requests().len(), 2, "{}", String::from_utf8_lossy(&out.stderr));
    let got = results(&mock, 1);
    // An external tool's output: every shape.
    assert_eq!(got[0], ("found [REDACTED]\ntoken=[REDACTED] (key unset, extra x1)".to_string(), false));
    // A file: the private key, but not the assignment the model may have to edit.
    assert!(got[1].0.contains("KEY = '''[REDACTED]\n"), "{got:?}");
    assert!(got[1].0.contains("token=t0k3n-from-the-server'''"), "{got:?}");
    assert!(!got[1].0.contains("MIIEow"), "{got:?}");
}

#[test]
fn a_server_gets_the_allow_list_and_env_allow_never_a_secret_under_an_unlisted_name() {
    let ws = workspace();
    let mock = MockModel::start();
    let names = "SECRET_KEY,DATABASE_URL,PGPASSWORD,SENTRY_DSN,ANTHROPIC_API_KEY,UNLISTED_SETTING,\
                 PATH,HOME,MY_TOOL_CONFIG,MCP_TEST_EXTRA";
    mock.push(tool_reply(&[("toolu_1", "mcp__test__lookup", json!({"query": format!("env:{names}")}))]));
    mock.push(text_reply("Nothing to change."));
    let settings = json!({"envAllow": ["MY_TOOL_*"], "mcpServers": {"test": ws.entry(json!({}))}});
    let env = [
        ("SECRET_KEY", "django-insecure-x9"),
        ("DATABASE_URL", "postgres://app:hunter2@db/app"),
        ("PGPASSWORD", "hunter2"),
        ("SENTRY_DSN", "https://abc@o1.ingest.sentry.io/1"),
        // Not credential-shaped, yet not on the allow list: a deny list would pass it.
        ("UNLISTED_SETTING", "x"),
        ("MY_TOOL_CONFIG", "/etc/my-tool.toml"),
    ];
    let args = ["fix", "calc.py", "--line", "2", "--settings", &settings.to_string()];
    let out = agentfix_with_env(&ws.root, &mock, &args, &env);
    assert_eq!(mock.requests().len(), 2, "{}", String::from_utf8_lossy(&out.stderr));
    // The server's own `env` (MCP_TEST_EXTRA) is set too.
    let expected = "SECRET_KEY=unset DATABASE_URL=unset PGPASSWORD=unset SENTRY_DSN=unset ANTHROPIC_API_KEY=unset \
                    UNLISTED_SETTING=unset PATH=set HOME=set MY_TOOL_CONFIG=set MCP_TEST_EXTRA=set";
    assert_eq!(results(&mock, 1)[0], (expected.to_string(), false));
}

#[test]
fn an_http_server_gets_its_env_header_serves_tools_and_resources_and_the_token_never_shows() {
    let ws = workspace();
    let token = "http-t0ken-5d1e";
    let http = HttpServer::start(token, &ws.root.parent().unwrap().join("http.log"));
    let mock = MockModel::start();
    let read = |id: &'static str, uri: &str| (id, "mcp__web__read_resource", json!({ "uri": uri }));
    mock.push(tool_reply(&[
        ("toolu_1", "mcp__web__lookup", json!({"query": "q"})),
        ("toolu_2", "mcp__web__list_resources", json!({})),
        read("toolu_3", "test://notes/readme"),
        read("toolu_4", "test://logo.png"),
        read("toolu_5", "test://nope"),
    ]));
    mock.push(text_reply("Nothing to change."));
    let settings = json!({"mcpServers": {"web": {
        "url": http.url,
        "headers": {"Authorization": "Bearer ${env:MCP_TEST_TOKEN_VAR}"},
    }}});
    let args = ["fix", "calc.py", "--line", "2", "--settings", &settings.to_string()];
    // Every crate's log at its most verbose: rmcp's, reqwest's and hyper's too.
    let env = [("MCP_TEST_TOKEN_VAR", token), ("AGENTFIX_LOG", "trace")];
    let out = agentfix_with_env(&ws.root, &mock, &args, &env);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(mock.requests().len(), 2, "{stderr}");
    let names = offered(&mock);
    for name in ["mcp__web__lookup", "mcp__web__write_note", "mcp__web__list_resources", "mcp__web__read_resource"] {
        assert!(names.iter().any(|n| n == name), "{name} in {names:?}");
    }
    // The header reached the server with the variable's value.
    let auth = http.auth();
    assert!(!auth.is_empty() && auth.iter().all(|l| l == "auth ok"), "{auth:?}");
    let got = results(&mock, 1);
    assert_eq!(got[0], ("found q over http".to_string(), false));
    let (listing, failed) = &got[1];
    assert!(!failed, "{listing}");
    assert!(listing.contains("- test://notes/readme — readme (text/markdown): The project's notes."), "{listing}");
    assert!(listing.contains("- test://logo.png — logo (image/png)"), "{listing}");
    assert_eq!(got[2], ("[resource test://notes/readme (text/plain)]\n# Notes\nDivide with care.".to_string(), false));
    assert_eq!(got[3], ("[binary resource test://logo.png, 8 bytes, not shown]".to_string(), false));
    let (unknown, failed) = &got[4];
    assert!(failed, "{unknown}");
    assert!(unknown.contains("MCP server `web` refused the read of `test://nope`"), "{unknown}");
    assert!(unknown.contains("no resource test://nope"), "{unknown}");
    // The value is nowhere: not in the log (every crate's, at trace), the
    // transcript, or anything the model was sent.
    assert!(stderr.contains("MCP server connected") && stderr.contains("TRACE"), "the log was on: {stderr}");
    let transcripts = all_text_under(&ws.root.parent().unwrap().join("cache"));
    assert!(transcripts.contains("mcp__web__read_resource"), "the transcript was written");
    let sent: String = mock.requests().iter().map(|r| r.body.to_string()).collect();
    for (what, text) in [("log", stderr.as_ref()), ("transcript", transcripts.as_str()), ("requests", sent.as_str())] {
        assert!(!text.contains(token), "the token in the {what}: {text}");
    }

    // A server that echoes the Authorization header it got: the model and
    // the transcript see it scrubbed. (rmcp's own trace log would print the
    // message it received, so this run keeps the default log.)
    let mock = MockModel::start();
    mock.push(tool_reply(&[("toolu_1", "mcp__web__lookup", json!({"query": "auth"}))]));
    mock.push(text_reply("Nothing to change."));
    let out = agentfix_with_env(&ws.root, &mock, &args, &[("MCP_TEST_TOKEN_VAR", token)]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(results(&mock, 1)[0], ("auth header: [REDACTED]".to_string(), false), "{stderr}");
    let transcripts = all_text_under(&ws.root.parent().unwrap().join("cache"));
    let sent: String = mock.requests().iter().map(|r| r.body.to_string()).collect();
    for (what, text) in [("log", stderr.as_ref()), ("transcript", transcripts.as_str()), ("requests", sent.as_str())] {
        assert!(!text.contains(token), "the echoed token in the {what}: {text}");
    }
}

#[test]
fn a_refused_token_or_a_missing_variable_leaves_that_server_out_and_the_run_goes_on() {
    let ws = workspace();
    let http = HttpServer::start("the-right-t0ken", &ws.root.parent().unwrap().join("http.log"));
    let mock = MockModel::start();
    mock.push(tool_reply(&[("toolu_1", "mcp__test__lookup", json!({"query": "q"}))]));
    mock.push(text_reply("Nothing to change."));
    let settings = json!({"mcpServers": {
        "web": {"url": http.url, "headers": {"Authorization": "Bearer ${env:MCP_TEST_TOKEN_VAR}"}},
        "unset": {"url": http.url, "headers": {"Authorization": "Bearer ${env:MCP_TEST_NEVER_SET}"}},
        "test": ws.entry(json!({})),
    }});
    let args = ["fix", "calc.py", "--line", "2", "--settings", &settings.to_string()];
    let out = agentfix_with_env(&ws.root, &mock, &args, &[("MCP_TEST_TOKEN_VAR", "a-wrong-t0ken")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(mock.requests().len(), 2, "{stderr}");
    let names = offered(&mock);
    assert!(names.iter().any(|n| n == "mcp__test__lookup"), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("mcp__web__") || n.starts_with("mcp__unset__")), "{names:?}");
    assert_eq!(results(&mock, 1)[0], ("found q (key unset, extra x1)".to_string(), false));
    assert_eq!(http.auth(), ["auth refused"], "one handshake, refused, not retried");
    let refused = format!("warning: MCP server `web` ({}) refused the credentials (", http.url);
    assert!(stderr.contains(&refused) && stderr.contains("HTTP 401"), "{stderr}");
    assert!(
        stderr.contains(
            "warning: MCP server `unset`: header `Authorization` names the environment variable `MCP_TEST_NEVER_SET`, which is not set"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("a-wrong-t0ken"), "{stderr}");
}

#[test]
fn a_stdio_servers_resources_are_listed_page_by_page_and_read_without_asking() {
    let ws = workspace();
    let mock = MockModel::start();
    let read = |id: &'static str, uri: &str| (id, "mcp__test__read_resource", json!({ "uri": uri }));
    mock.push(tool_reply(&[
        ("toolu_1", "mcp__test__list_resources", json!({})),
        ("toolu_2", "mcp__test__list_resources", json!({"cursor": "page2"})),
        read("toolu_3", "test://notes/readme"),
        read("toolu_4", "test://data.bin"),
        read("toolu_5", "test://missing"),
        ("toolu_6", "mcp__test__read_resource", json!({})),
    ]));
    mock.push(text_reply("Nothing to change."));
    let settings = json!({"mcpServers": {"test": ws.entry(json!({}))}});
    let out = agentfix(&ws.root, &mock, &["fix", "calc.py", "--line", "2", "--settings", &settings.to_string()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(mock.requests().len(), 2, "{stderr}");
    let tools = mock.requests()[0].body["tools"].as_array().unwrap().clone();
    let read_spec = tools.iter().find(|t| t["name"] == "mcp__test__read_resource").unwrap();
    assert_eq!(read_spec["input_schema"]["required"], json!(["uri"]));
    let got = results(&mock, 1);
    assert_eq!(
        got[0],
        (
            "Resources of MCP server `test` (read one with `mcp__test__read_resource`):\n\
             - test://notes/readme — readme (text/markdown): The notes.\n\
             More: call `mcp__test__list_resources` with {\"cursor\": \"page2\"}."
                .to_string(),
            false
        )
    );
    assert_eq!(
        got[1],
        (
            "Resources of MCP server `test` (read one with `mcp__test__read_resource`):\n\
             - test://data.bin — data (application/octet-stream)"
                .to_string(),
            false
        )
    );
    assert_eq!(
        got[2],
        ("[resource test://notes/readme (text/markdown)]\n# Notes\nstdio resource text".to_string(), false)
    );
    assert_eq!(
        got[3],
        ("[binary resource test://data.bin (application/octet-stream), 8 bytes, not shown]".to_string(), false)
    );
    assert!(got[4].1 && got[4].0.contains("refused the read of `test://missing`: "), "{got:?}");
    assert!(got[4].0.contains("Resource not found: test://missing"), "{got:?}");
    assert!(got[5].1 && got[5].0.contains("invalid input for `mcp__test__read_resource`"), "{got:?}");
    // Read-only: the command line, which denies what needs approval, never asked.
    assert!(!stderr.contains("denied"), "{stderr}");
}
