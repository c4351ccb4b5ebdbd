//! The headless `agentfix fix` command against the mock model: diff on
//! stdout, exit codes, `--apply`.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::agentfix_bin;
use common::mock_model::{self, MockModel, error_reply, text_reply, tool_reply};
use serde_json::{Value, json};

fn agentfix(root: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(agentfix_bin());
    cmd.args(args).current_dir(root);
    for (k, _) in std::env::vars() {
        if k.starts_with("ANTHROPIC_") || k.starts_with("AGENTFIX_") || k.to_ascii_lowercase().ends_with("_proxy") {
            cmd.env_remove(k);
        }
    }
    // Hermetic: no language server from PATH.
    cmd.env("AGENTFIX_DEFAULT_LANGUAGE_SERVERS", "0").envs(env.iter().copied());
    cmd.output().expect("run agentfix")
}

fn workspace() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::write(root.join("calc.py"), "def div(a, b):\n    return a / b\n").unwrap();
    (dir, root)
}

fn env(mock: &MockModel) -> Vec<(&'static str, String)> {
    vec![("ANTHROPIC_API_KEY", mock_model::API_KEY.to_string()), ("ANTHROPIC_BASE_URL", mock.base_url())]
}

fn run(root: &Path, mock: &MockModel, args: &[&str]) -> Output {
    let env = env(mock);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    agentfix(root, args, &env)
}

fn push_fix(mock: &MockModel) {
    mock.push(tool_reply(&[(
        "toolu_1",
        "edit_file",
        json!({"path": "calc.py", "old_text": "    return a / b\n", "new_text": "    if b == 0:\n        raise ZeroDivisionError(\"b is zero\")\n    return a / b\n"}),
    )]));
    mock.push(text_reply("Raise a clear error when b is zero."));
}

#[test]
fn fix_prints_a_unified_diff_and_leaves_the_disk_alone() {
    let (_d, root) = workspace();
    let mock = MockModel::start();
    push_fix(&mock);
    let out = run(&root, &mock, &["fix", "calc.py", "--line", "2", "--instruction", "guard b"]);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(
        stdout,
        "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,4 @@\n def div(a, b):\n+    if b == 0:\n+        raise ZeroDivisionError(\"b is zero\")\n     return a / b\n"
    );
    assert!(stderr.contains("turn 1: edit_file calc.py"), "{stderr}");
    assert!(stderr.contains("Raise a clear error when b is zero."));
    assert_eq!(std::fs::read_to_string(root.join("calc.py")).unwrap(), "def div(a, b):\n    return a / b\n");
    let first = mock.requests()[0].body["messages"][0]["content"][0]["text"].as_str().unwrap().to_string();
    assert!(
        first.starts_with("The user asks for a fix at line 2 of `calc.py`.\n\nThe user's instruction: guard b\n"),
        "{first}"
    );
    assert!(mock.violations().is_empty());
}

#[test]
fn apply_writes_the_edit() {
    let (_d, root) = workspace();
    let mock = MockModel::start();
    push_fix(&mock);
    let out = run(&root, &mock, &["fix", "calc.py", "--line", "2", "--apply"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(root.join("calc.py")).unwrap(),
        "def div(a, b):\n    if b == 0:\n        raise ZeroDivisionError(\"b is zero\")\n    return a / b\n"
    );
}

#[test]
fn exit_codes_say_what_happened() {
    let (_d, root) = workspace();
    // No edit: 1.
    let mock = MockModel::start();
    mock.push(text_reply("The code is fine."));
    let out = run(&root, &mock, &["fix", "calc.py", "--line", "1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no edit proposed"));
    // Model/API error: 3.
    let mock = MockModel::start();
    mock.push(error_reply(529, "overloaded_error", "Overloaded"));
    let out = run(&root, &mock, &["fix", "calc.py", "--line", "1"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Anthropic API 529"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // No key: 2, and nothing sent.
    let mock = MockModel::start();
    let base = mock.base_url();
    let out = agentfix(&root, &["fix", "calc.py", "--line", "1"], &[("ANTHROPIC_BASE_URL", &base)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("ANTHROPIC_API_KEY is not set"));
    assert!(mock.requests().is_empty());
    // Usage errors: 2.
    assert_eq!(run(&root, &mock, &["fix", "missing.py", "--line", "1"]).status.code(), Some(2));
    assert_eq!(run(&root, &mock, &["fix", "calc.py", "--line", "0"]).status.code(), Some(2));
    assert_eq!(run(&root, &mock, &["fix", "calc.py"]).status.code(), Some(2));
    let outside = tempfile::NamedTempFile::new().unwrap();
    let out = run(&root, &mock, &["fix", outside.path().to_str().unwrap(), "--line", "1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("outside the workspace root"));
}

#[test]
fn version_and_help() {
    let dir = tempfile::tempdir().unwrap();
    let out = agentfix(dir.path(), &["--version"], &[]);
    assert_eq!(String::from_utf8(out.stdout).unwrap(), format!("agentfix {}\n", env!("CARGO_PKG_VERSION")));
    let out = agentfix(dir.path(), &["--help"], &[]);
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(help.contains("fix") && help.contains("lsp") && help.contains("--stdio"), "{help}");
}

#[test]
fn commands_run_only_when_allowed_on_the_command_line() {
    let (_d, root) = workspace();
    std::fs::write(
        root.join("agentfix.toml"),
        "[commands]\nshow = [\"sh\", \"-c\", \"grep -c 'b == 0' calc.py || true\"]\n",
    )
    .unwrap();
    let script = |mock: &MockModel| {
        push_fix_first(mock);
        mock.push(tool_reply(&[("toolu_run", "run_command", json!({"name": "show"}))]));
        mock.push(text_reply("Checked."));
    };
    let mock = MockModel::start();
    script(&mock);
    let out = run(&root, &mock, &["fix", "calc.py", "--line", "2", "--allow-command", "show"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let result = last_tool_result(&mock);
    assert_eq!(result["is_error"], Value::Null);
    assert!(
        result["content"].as_str().unwrap().contains("\n1\n[exit code 0]"),
        "the scratch copy has the edit: {result}"
    );
    let mock = MockModel::start();
    script(&mock);
    let out = run(&root, &mock, &["fix", "calc.py", "--line", "2"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("denied (pass --allow-command show to allow it)"));
    assert_eq!(last_tool_result(&mock)["is_error"], true);
}

fn push_fix_first(mock: &MockModel) {
    mock.push(tool_reply(&[(
        "toolu_1",
        "edit_file",
        json!({"path": "calc.py", "old_text": "    return a / b\n", "new_text": "    if b == 0:\n        raise ZeroDivisionError(\"b is zero\")\n    return a / b\n"}),
    )]));
}

fn last_tool_result(mock: &MockModel) -> Value {
    let requests = mock.requests();
    requests.last().unwrap().body["messages"].as_array().unwrap().last().unwrap()["content"][0].clone()
}

#[test]
fn the_run_reports_its_cache_tokens_and_cost_and_check_shows_the_prices() {
    let (_d, root) = workspace();
    let mock = MockModel::start();
    mock.set_usage_model(mock_model::UsageModel::Cached { min_cache_tokens: 10 });
    push_fix(&mock);
    let out = run(&root, &mock, &["fix", "calc.py", "--line", "2"]);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    // The second request reads the prefix the first one wrote; the default
    // model has a list price.
    let end = stderr.lines().find(|l| l.contains("output tokens")).unwrap_or_default().to_string();
    assert!(end.contains(" read from the prompt cache, ") && end.contains(" written to it)"), "{end}");
    assert!(end.contains(" output tokens, $"), "{end}");
    let stats = mock.usage_stats();
    assert!(stats.cache_read > 0 && stats.cache_write > 0, "{stats:?}");

    let out = run(&root, &mock, &["check", "--offline"]);
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.contains("prices of claude-sonnet-4-5: $3 input, $15 output, $0.3 cache read, $3.75 cache write per million tokens (built in)"),
        "{stdout}"
    );
    assert!(stdout.contains("\nmaxCostUsd: none (default)\n"), "{stdout}");
    assert!(stdout.contains("\ncontextEditing: Economy (default)\n"), "{stdout}");
    std::fs::write(root.join("agentfix.toml"), "maxCostUsd = 0.25\n").unwrap();
    let out = run(&root, &mock, &["check", "--offline"]);
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("\nmaxCostUsd: 0.25 (agentfix.toml)\n"), "{stdout}");
}
