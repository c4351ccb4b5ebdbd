//! agentfix against real language servers and tools. pyright is installed by
//! `.ci/run` from the npm registry: under CI (`CI=true`) its absence fails
//! the test; elsewhere the test says why it did not run. Its CLI's
//! `--outputjson` report also feeds `agentfix fix --diagnostics`. rust-analyzer runs
//! only when `rust-analyzer --version` works on the machine (it cannot be
//! installed from the registries this project may use), and says so when not.

mod common;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use common::mock_model::*;
use common::{agentfix_bin, tool_results};
use serde_json::json;

fn works(program: &str, args: &[&str]) -> bool {
    Command::new(program).args(args).output().map(|o| o.status.success()).unwrap_or(false)
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(program).is_file()))
}

/// Whether a test may run; panics under CI when the server must be there
/// (`.ci/run` installs it). Otherwise a skipped test still passes (a test
/// cannot report "skipped" to libtest), so it says so where a plain `cargo
/// test` shows it: `SKIPPED (needs rust-analyzer on PATH): <test>`.
fn require(test: &str, needs: &str, present: bool, required_in_ci: bool) -> bool {
    if present {
        return true;
    }
    if required_in_ci && std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{needs} is missing, but .ci/run installs it: the install step failed");
    }
    common::say_skipped(test, needs);
    false
}

fn run(root: &PathBuf, mock: &MockModel, file: &str, line: &str) -> Output {
    let mut cmd = Command::new(agentfix_bin());
    cmd.current_dir(root).args(["fix", file, "--line", line]);
    for (k, _) in std::env::vars() {
        if k.starts_with("ANTHROPIC_") || k.starts_with("AGENTFIX_") {
            cmd.env_remove(k);
        }
    }
    cmd.env("ANTHROPIC_API_KEY", API_KEY).env("ANTHROPIC_BASE_URL", mock.base_url()).env("AGENTFIX_TRANSCRIPTS", "0");
    cmd.output().unwrap()
}

const MODELS: &str = "class User:\n    def __init__(self, name: str) -> None:\n        self.name = name\n\n\ndef make_user(name: str) -> User:\n    return User(name)\n";
const APP: &str = "from models import make_user\n\nuser = make_user(\"ann\")\nage: int = user.name\n";

/// `models.py` and `app.py` (an error on line 4) with a pyright config, or
/// `None` (said, and failed under CI) without pyright-langserver.
fn pyright_project(test: &str) -> Option<(tempfile::TempDir, PathBuf)> {
    let needs = "pyright-langserver on PATH; install: npm install -g pyright@1.1.414";
    if !require(test, needs, on_path("pyright-langserver"), true) {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::write(root.join("models.py"), MODELS).unwrap();
    std::fs::write(root.join("app.py"), APP).unwrap();
    std::fs::write(root.join("pyrightconfig.json"), "{}\n").unwrap();
    Some((dir, root))
}

#[test]
fn pyright_answers_symbols_across_files_and_confirms_a_fix() {
    let Some((_dir, root)) = pyright_project("pyright_answers_symbols_across_files_and_confirms_a_fix") else { return };
    let mock = MockModel::start();
    mock.push(tool_reply(&[
        ("t_outline", "document_symbols", json!({"path": "models.py"})),
        ("t_def", "find_definition", json!({"path": "app.py", "line": 3, "symbol": "make_user"})),
        ("t_refs", "find_references", json!({"path": "models.py", "line": 6, "symbol": "make_user"})),
        ("t_hover", "hover", json!({"path": "app.py", "line": 4, "symbol": "name"})),
    ]));
    mock.push(tool_reply(&[("t_diag", "diagnostics", json!({"path": "app.py"}))]));
    mock.push(tool_reply(&[(
        "t_edit",
        "edit_file",
        json!({"path": "app.py", "old_text": "age: int = user.name", "new_text": "age: str = user.name"}),
    )]));
    mock.push(text_reply("Declared age as str, which user.name is."));
    let out = run(&root, &mock, "app.py", "4");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let r = tool_results(&mock);
    let outline = &r["t_outline"].0;
    assert!(
        outline.contains("class User (lines 1-3)") && outline.contains("function make_user (lines 6-7)"),
        "{outline}"
    );
    assert_eq!(
        r["t_def"].0,
        "Definitions of `make_user` (app.py:3):\nmodels.py:6: def make_user(name: str) -> User:\n"
    );
    let refs = &r["t_refs"].0;
    for want in
        ["models.py:6: def make_user", "app.py:1: from models import make_user", "app.py:3: user = make_user(\"ann\")"]
    {
        assert!(refs.contains(want), "{want} not in {refs}");
    }
    assert!(r["t_hover"].0.contains("str"), "{:?}", r["t_hover"]);
    assert!(r["t_diag"].0.starts_with("app.py:4:"), "{:?}", r["t_diag"]);
    assert!(r["t_diag"].0.contains("[Pyright"), "{:?}", r["t_diag"]);
    let edit = &r["t_edit"].0;
    assert!(edit.contains("Diagnostics of app.py after this edit: 1 fixed, 0 introduced, 0 in all."), "{edit}");
    // The first message already carried pyright's view of the target line.
    let first = mock.requests()[0].body["messages"][0]["content"][0]["text"].as_str().unwrap().to_string();
    assert!(first.contains("Lines 1-4 of `app.py`"), "{first}");
    let diff = String::from_utf8_lossy(&out.stdout);
    assert!(diff.contains("-age: int = user.name\n+age: str = user.name\n"), "{diff}");
}

/// The check of a proposal against real pyright: a first attempt that
/// fixes the error but brings a new one is caught and fed back; the second
/// is offered verified.
#[test]
fn pyright_catches_a_proposal_that_brings_a_new_error_and_the_second_is_verified() {
    let Some((_dir, root)) =
        pyright_project("pyright_catches_a_proposal_that_brings_a_new_error_and_the_second_is_verified")
    else {
        return;
    };
    let mock = MockModel::start();
    let edit = |id: &str, old: &str, new: &str| {
        tool_reply(&[(id, "edit_file", json!({"path": "app.py", "old_text": old, "new_text": new}))])
    };
    mock.push(edit("t_1", "age: int = user.name", "age: int = len(user.nam)"));
    mock.push(text_reply("Took the length of the name."));
    mock.push(edit("t_2", "user.nam)", "user.name)"));
    mock.push(text_reply("Fixed the attribute's name."));
    let out = run(&root, &mock, "app.py", "4");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("round 1: not verified: 1 new error (checked in "), "{stderr}");
    assert!(stderr.contains("agentfix: verified: 1 fixed, 0 new"), "{stderr}");
    let requests = mock.requests();
    assert_eq!(requests.len(), 4, "two rounds: {stderr}");
    let findings = requests[2].body["messages"].as_array().unwrap().last().unwrap()["content"].to_string();
    assert!(findings.contains("New diagnostics since your edits") && findings.contains("app.py line 4"), "{findings}");
    assert!(findings.contains("nam"), "pyright's message names the attribute: {findings}");
    let diff = String::from_utf8_lossy(&out.stdout);
    assert!(diff.contains("+age: int = len(user.name)\n"), "{diff}");
    assert_eq!(std::fs::read_to_string(root.join("app.py")).unwrap(), APP, "the file is untouched");
}

const DOUBLE: &str = "def double(x: int) -> int:\n    return x * 2\n\n\nprint(double(\"4\"))\n";

/// `pyright --outputjson app.py | agentfix fix app.py --diagnostics - --apply`,
/// then pyright again: the scripted fix is the right one.
#[test]
fn a_real_pyright_report_becomes_the_problem_and_the_applied_fix_clears_it() {
    if !require(
        "a_real_pyright_report_becomes_the_problem_and_the_applied_fix_clears_it",
        "the pyright CLI on PATH; install: npm install -g pyright@1.1.414",
        on_path("pyright"),
        true,
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let home = std::fs::canonicalize(dir.path()).unwrap();
    let root = home.join("ws");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("app.py"), DOUBLE).unwrap();
    std::fs::write(root.join("pyrightconfig.json"), "{}\n").unwrap();
    let pyright = || Command::new("pyright").args(["--outputjson", "app.py"]).current_dir(&root).output().unwrap();
    let report = pyright();
    assert_eq!(report.status.code(), Some(1), "pyright reports the error: {}", String::from_utf8_lossy(&report.stdout));

    let mock = MockModel::start();
    mock.push(tool_reply(&[(
        "t_edit",
        "edit_file",
        json!({"path": "app.py", "old_text": "double(\"4\")", "new_text": "double(4)"}),
    )]));
    mock.push(text_reply("Pass an int, as double expects."));
    let mut cmd = Command::new(agentfix_bin());
    common::without_provider_env(&mut cmd);
    cmd.current_dir(&root)
        .args(["fix", "app.py", "--diagnostics", "-", "--apply"])
        .env("ANTHROPIC_API_KEY", API_KEY)
        .env("ANTHROPIC_BASE_URL", mock.base_url())
        .env("AGENTFIX_TRANSCRIPTS", "0")
        .env("AGENTFIX_DEFAULT_LANGUAGE_SERVERS", "0")
        .env("XDG_CACHE_HOME", home.join("cache"))
        .env("HOME", home.join("home"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    child.stdin.take().unwrap().write_all(&report.stdout).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("agentfix: fixing 1 diagnostic(s) of app.py from pyright JSON (lines 5-5)"), "{stderr}");
    let first = mock.requests()[0].body["messages"][0]["content"][0]["text"].as_str().unwrap().to_string();
    assert!(
        first.starts_with(
            "Fix this problem in `app.py`:\n- line 5, column 14: error: Argument of type \"Literal['4']\" cannot be assigned to parameter \"x\""
        ),
        "{first}"
    );
    assert!(first.contains(" [pyright reportArgumentType]\n"), "{first}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("-print(double(\"4\"))\n+print(double(4))\n"));
    assert_eq!(std::fs::read_to_string(root.join("app.py")).unwrap(), DOUBLE.replace("double(\"4\")", "double(4)"));
    let again = pyright();
    assert_eq!(again.status.code(), Some(0), "{}", String::from_utf8_lossy(&again.stdout));
}

#[test]
fn rust_analyzer_answers_symbols_when_installed() {
    // Not installed by .ci/run (no registry this project uses has it), so
    // never required: skipped, visibly, where it is missing.
    if !require(
        "rust_analyzer_answers_symbols_when_installed",
        "rust-analyzer on PATH; install: rustup component add rust-analyzer",
        works("rust-analyzer", &["--version"]),
        false,
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(root.join("Cargo.toml"), "[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n")
        .unwrap();
    std::fs::write(
        root.join("src/lib.rs"),
        "pub fn double(x: i32) -> i32 {\n    x * 2\n}\n\npub fn quad(x: i32) -> i32 {\n    double(double(x))\n}\n",
    )
    .unwrap();
    let mock = MockModel::start();
    mock.push(tool_reply(&[
        ("t_outline", "document_symbols", json!({"path": "src/lib.rs"})),
        ("t_def", "find_definition", json!({"path": "src/lib.rs", "line": 6, "symbol": "double"})),
    ]));
    mock.push(text_reply("Looked."));
    let out = run(&root, &mock, "src/lib.rs", "6");
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let r = tool_results(&mock);
    assert!(r["t_outline"].0.contains("function double (lines 1-3)"), "{:?}", r["t_outline"]);
    assert!(r["t_def"].0.contains("src/lib.rs:1: pub fn double"), "{:?}", r["t_def"]);
}
