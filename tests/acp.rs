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

use common::mock_model::{self, MockModel, text_reply, tool_reply};
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
/// agentfix exited 0 when stdin closed.
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
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("the client's report is not JSON ({e}):\n{}\n{stderr}", String::from_utf8_lossy(&out.stdout))
    });
    let violations = report["violations"].as_array().unwrap();
    assert!(violations.is_empty(), "protocol violations:\n{}\n\nagentfix's log:\n{stderr}", pretty(violations));
    assert_eq!(report["exitCode"], 0, "{stderr}");
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
