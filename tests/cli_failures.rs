//! `agentfix fix` for CI and scripts, against the mock model:
//! `--diagnostics` (a file or stdin) becomes the run's problems and lines,
//! `--all`, `--range`, `--model` and `--settings` as the top layer, and the
//! usage errors (exit 2) of input that names nothing to fix; pyright's UTF-16
//! columns reaching the model in characters.

mod common;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use common::mock_model::{self, MockModel, text_reply, tool_reply};
use common::{agentfix_bin, without_provider_env};
use serde_json::{Value, json};

const CALC: &str = "def div(a, b):\n    return a / b\n\n\ndef mul(a, b):\n    return a * c\n";

/// A temporary folder with the workspace `ws/` (holding `calc.py`) and a
/// private cache, so no test touches the user's.
struct Ws {
    dir: tempfile::TempDir,
    root: PathBuf,
}

fn workspace() -> Ws {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap().join("ws");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("calc.py"), CALC).unwrap();
    Ws { dir, root }
}

impl Ws {
    /// Runs `agentfix` in the root with `stdin`, the mock's key and URL
    /// (when given) and no language server.
    fn run(&self, mock: Option<&MockModel>, args: &[&str], stdin: &str, env: &[(&str, &str)]) -> Output {
        let mut cmd = Command::new(agentfix_bin());
        without_provider_env(&mut cmd);
        let cache = self.dir.path().join("cache");
        cmd.args(args)
            .current_dir(&self.root)
            .env("XDG_CACHE_HOME", &cache)
            .env("HOME", self.dir.path().join("home"))
            .env("AGENTFIX_DEFAULT_LANGUAGE_SERVERS", "0")
            .env("AGENTFIX_TRANSCRIPTS", "0");
        if let Some(mock) = mock {
            cmd.env("ANTHROPIC_API_KEY", mock_model::API_KEY).env("ANTHROPIC_BASE_URL", mock.base_url());
        }
        cmd.envs(env.iter().copied()).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("run agentfix");
        // A run that never reads its stdin closes the pipe: not an error here.
        let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
        child.wait_with_output().unwrap()
    }

    /// A file next to the workspace (diagnostics are read from anywhere).
    fn outside_file(&self, name: &str, text: &str) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_string_lossy().into_owned()
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The text of the run's first message.
fn first_message(mock: &MockModel) -> String {
    mock.requests()[0].body["messages"][0]["content"][0]["text"].as_str().unwrap().to_string()
}

fn push_mul_fix(mock: &MockModel, path: &str) {
    mock.push(tool_reply(&[(
        "toolu_1",
        "edit_file",
        json!({"path": path, "old_text": "    return a * c\n", "new_text": "    return a * b\n"}),
    )]));
    mock.push(text_reply("Use b, the parameter."));
}

#[test]
fn plain_diagnostics_from_a_file_give_the_first_problem_of_the_file_and_its_line() {
    let ws = workspace();
    let mock = MockModel::start();
    push_mul_fix(&mock, "calc.py");
    let input = ws.outside_file(
        "mypy.txt",
        "other.py:1: error: Name \"x\" is not defined  [name-defined]\n\
         calc.py:6:16: error: Name \"c\" is not defined  [name-defined]\n\
         calc.py:2:12: note: Revealed type is \"Any\"\n\
         Found 2 errors in 2 files (checked 2 source files)\n",
    );
    let out = ws.run(Some(&mock), &["fix", "calc.py", "--diagnostics", &input], "", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // Without --all: the first diagnostic of the file in file order (line 2).
    let first = first_message(&mock);
    assert!(
        first.starts_with("Fix this problem in `calc.py`:\n- line 2, column 12: info: Revealed type is \"Any\"\n\n"),
        "{first}"
    );
    assert!(stderr(&out).contains("agentfix: fixing 1 diagnostic(s) of calc.py from plain text (lines 2-2)"));
    assert!(String::from_utf8_lossy(&out.stdout).contains("-    return a * c\n+    return a * b\n"));
}

/// `cargo build --message-format=json 2>/dev/null | agentfix fix src/lib.rs --diagnostics - --all`.
#[test]
fn all_cargo_diagnostics_from_stdin_become_the_problems_and_span_the_lines() {
    let ws = workspace();
    std::fs::create_dir(ws.root.join("src")).unwrap();
    std::fs::write(
        ws.root.join("src/lib.rs"),
        "pub fn f() -> u32 {\n    \"a\"\n}\n\npub fn g() {\n    let x = 1;\n}\n",
    )
    .unwrap();
    let span = |file: &str, line: u32, (from, to): (u32, u32), primary: bool, label: &str, replacement: Value| {
        json!({"file_name": file, "byte_start": 0, "byte_end": 1, "line_start": line, "line_end": line,
            "column_start": from, "column_end": to, "is_primary": primary, "text": [], "label": label,
            "suggested_replacement": replacement, "suggestion_applicability": null, "expansion": null})
    };
    let message = |level: &str, code: &str, msg: &str, spans: Vec<Value>, children: Value| {
        json!({"reason": "compiler-message", "package_id": "path+file:///w#demo@0.1.0", "manifest_path": "/w/Cargo.toml",
            "target": {"kind": ["lib"], "name": "demo"},
            "message": {"$message_type": "diagnostic", "message": msg, "code": {"code": code, "explanation": null},
                "level": level, "children": children, "rendered": msg, "spans": spans}})
        .to_string()
    };
    // As rustc 1.95 reports them (abridged): the mismatch with the return
    // type's span, the unused variable with its note and suggestion.
    let unused = message(
        "warning",
        "unused_variables",
        "unused variable: `x`",
        vec![span("src/lib.rs", 6, (9, 10), true, "", Value::Null)],
        json!([{"message": "`#[warn(unused_variables)]` on by default", "code": null, "level": "note", "spans": [],
                "children": [], "rendered": null},
               {"message": "if this is intentional, prefix it with an underscore", "code": null, "level": "help",
                "spans": [span("src/lib.rs", 6, (9, 10), true, "", json!("_x"))], "children": [], "rendered": null}]),
    );
    let mismatch = message(
        "error",
        "E0308",
        "mismatched types",
        vec![
            span("src/lib.rs", 1, (15, 18), false, "expected `u32` because of return type", Value::Null),
            span("src/lib.rs", 2, (5, 8), true, "expected `u32`, found `&str`", Value::Null),
        ],
        json!([]),
    );
    let dep = message(
        "warning",
        "dead_code",
        "unused",
        vec![span("/home/u/.cargo/registry/src/dep-1.0/src/lib.rs", 1, (1, 2), true, "", Value::Null)],
        json!([]),
    );
    let stdin = [
        json!({"reason": "compiler-artifact", "package_id": "dep", "target": {"name": "dep"}, "fresh": true})
            .to_string(),
        unused,
        mismatch,
        dep,
        json!({"reason": "build-finished", "success": false}).to_string(),
    ]
    .join("\n");
    let mock = MockModel::start();
    mock.push(tool_reply(&[(
        "toolu_1",
        "edit_file",
        json!({"path": "src/lib.rs", "old_text": "    \"a\"\n", "new_text": "    1\n"}),
    )]));
    mock.push(text_reply("Return a number."));
    let out = ws.run(Some(&mock), &["fix", "src/lib.rs", "--diagnostics", "-", "--all"], &stdin, &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let first = first_message(&mock);
    assert!(
        first.starts_with(
            "Fix these problems in `src/lib.rs`:\n\
             - line 2, column 5: error: mismatched types: expected `u32`, found `&str` [rustc E0308]\n  \
             range 2:5-2:8 covers `\"a\"`\n  \
             E0308 is documented at https://doc.rust-lang.org/error_codes/E0308.html\n  \
             related: src/lib.rs:1: expected `u32` because of return type\n    \
             | pub fn f() -> u32 {\n\
             - line 6, column 9: warning: unused variable: `x` [rustc unused_variables]\n  \
             range 6:9-6:10 covers `x`\n  \
             related: src/lib.rs:6: help: if this is intentional, prefix it with an underscore (replace 6:9-6:10 with `_x`)\n    \
             |     let x = 1;\n  \
             note: `#[warn(unused_variables)]` on by default\n\n"
        ),
        "{first}"
    );
    assert!(first.contains("Lines 1-7 of `src/lib.rs` (7 lines in all)"), "{first}");
    assert!(err.contains("agentfix: fixing 2 diagnostic(s) of src/lib.rs from cargo JSON (lines 2-6)"), "{err}");
    assert!(
        err.contains("outside the workspace root (never opened): /home/u/.cargo/registry/src/dep-1.0/src/lib.rs"),
        "{err}"
    );
}

#[test]
fn a_non_ascii_path_and_crlf_input_with_a_range() {
    let ws = workspace();
    std::fs::create_dir(ws.root.join("módulo")).unwrap();
    std::fs::write(ws.root.join("módulo/calc.py"), CALC).unwrap();
    // ruff's concise format, written on Windows; absolute and relative paths.
    let root = ws.root.display();
    let stdin = format!(
        "{root}/módulo/calc.py:1:5: F811 Redefinition of unused `div`\r\nmódulo/calc.py:6:16: F821 Undefined name `c`\r\nFound 2 errors.\r\n"
    );
    let mock = MockModel::start();
    push_mul_fix(&mock, "módulo/calc.py");
    let out =
        ws.run(Some(&mock), &["fix", "módulo/calc.py", "--diagnostics", "-", "--range", "5-6", "--all"], &stdin, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let first = first_message(&mock);
    // Only the diagnostics within the range.
    assert!(
        first.starts_with(
            "Fix this problem in `módulo/calc.py`:\n- line 6, column 16: problem: Undefined name `c` [F821]\n\n"
        ),
        "{first}"
    );
}

#[test]
fn input_that_names_nothing_to_fix_is_a_usage_error_and_sends_nothing() {
    let ws = workspace();
    let mock = MockModel::start();
    let fix = |stdin: &str, extra: &[&str]| {
        let mut args = vec!["fix", "calc.py", "--diagnostics", "-"];
        args.extend_from_slice(extra);
        let out = ws.run(Some(&mock), &args, stdin, &[]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        stderr(&out)
    };
    assert!(fix("", &[]).contains("agentfix: the diagnostics input is empty: nothing to fix"));
    assert!(fix("other.py:3: error: x\n", &[]).contains(
        "agentfix: the diagnostics (plain text, 1 about other files) name no line of calc.py: nothing to fix"
    ));
    assert!(
        fix("calc.py:6: error: x\n", &["--line", "2"])
            .contains("name no line of calc.py within lines 2-2: nothing to fix")
    );
    let all_outside = fix("/etc/hosts:1: error: x\n", &[]);
    assert!(all_outside.contains("outside the workspace root (never opened): /etc/hosts"), "{all_outside}");
    assert!(all_outside.contains("name no line of calc.py"), "{all_outside}");
    let e = fix("Success: no issues found in 1 source file\n", &[]);
    assert!(e.contains("agentfix: line 1 of the diagnostics input: `Success: no issues found"), "{e}");
    let e = fix("{\"reason\":\"build-finished\",\"success\":true}\n", &[]);
    assert!(e.contains("the diagnostics input (cargo JSON) reports no problem with a line to fix"), "{e}");
    let e = fix("{\"generalDiagnostics\": [\n{\"file\": 1}]}\n", &[]);
    assert!(e.contains("agentfix: line 2 of the diagnostics input: invalid type: integer `1`"), "{e}");
    let missing = ws.dir.path().join("missing.json");
    let out = ws.run(Some(&mock), &["fix", "calc.py", "--diagnostics", missing.to_str().unwrap()], "", &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--diagnostics "), "{}", stderr(&out));
    assert!(mock.requests().is_empty());
}

#[test]
fn ranges_and_lines_are_checked_against_the_file() {
    let ws = workspace();
    let mock = MockModel::start();
    mock.push(text_reply("Nothing to change."));
    let out = ws.run(Some(&mock), &["fix", "calc.py", "--range", "5-6"], "", &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(first_message(&mock).starts_with("The user selected lines 5-6 of `calc.py`.\n"));
    for (args, says) in [
        (&["--range", "3-2"][..], "ends before it starts"),
        (&["--range", "0-2"], "`0` is not a line number"),
        (&["--range", "2"], "expected L1-L2"),
        (&["--range", "1-7"], "line 7 is past the end of calc.py (6 lines)"),
        (&["--line", "7"], "line 7 is past the end of calc.py (6 lines)"),
        (&["--line", "1", "--range", "1-2"], "cannot be used with"),
        (&["--all", "--line", "1"], "--diagnostics"),
        (&[], "--line"),
    ] {
        let mut a = vec!["fix", "calc.py"];
        a.extend_from_slice(args);
        let out = ws.run(Some(&mock), &a, "", &[]);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
    assert_eq!(mock.requests().len(), 1);
}

#[test]
fn model_and_settings_are_the_top_layer() {
    let ws = workspace();
    std::fs::write(ws.root.join("agentfix.toml"), "model = \"from-file\"\nmaxOutputTokens = 999\n").unwrap();
    let env = [("AGENTFIX_MODEL", "from-env")];
    let request = |args: &[&str]| {
        let mock = MockModel::start();
        mock.push(text_reply("Fine."));
        let mut a = vec!["fix", "calc.py", "--line", "1"];
        a.extend_from_slice(args);
        let out = ws.run(Some(&mock), &a, "", &env);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        let body = mock.requests()[0].body.clone();
        (body["model"].as_str().unwrap().to_string(), body["max_tokens"].as_u64().unwrap())
    };
    assert_eq!(request(&[]), ("from-env".to_string(), 999));
    let settings = r#"{"model": "from-settings", "maxOutputTokens": 1234}"#;
    assert_eq!(request(&["--settings", settings]), ("from-settings".to_string(), 1234));
    assert_eq!(request(&["--settings", settings, "--model", "from-flag"]), ("from-flag".to_string(), 1234));
    assert_eq!(request(&["--model", "from-flag"]), ("from-flag".to_string(), 999));
    // The same layer `agentfix check --settings` shows.
    let out = ws.run(None, &["check", "--offline", "--settings", settings], "", &env);
    assert!(String::from_utf8_lossy(&out.stdout).contains("\nmodel: from-settings (editor settings)\n"));
    let bad = |args: &[&str], says: &str| {
        let mut a = vec!["fix", "calc.py", "--line", "1"];
        a.extend_from_slice(args);
        let out = ws.run(None, &a, "", &[]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains(says), "{}", stderr(&out));
    };
    bad(&["--settings", "{model"], "agentfix: --settings: not JSON: ");
    bad(&["--settings", r#"{"maxTurns": "many"}"#], "agentfix: --settings: invalid agentfix settings: ");
    bad(&["--model", ""], "--model");
}

#[test]
fn diagnostics_of_a_file_under_a_symlinked_folder_match_the_target() {
    let ws = workspace();
    std::fs::create_dir(ws.root.join("real")).unwrap();
    std::fs::write(ws.root.join("real/calc.py"), CALC).unwrap();
    std::os::unix::fs::symlink(ws.root.join("real"), ws.root.join("link")).unwrap();
    let mock = MockModel::start();
    push_mul_fix(&mock, "real/calc.py");
    let out = ws.run(Some(&mock), &["fix", "real/calc.py", "--diagnostics", "-"], "link/calc.py:6:16: error: c\n", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(first_message(&mock).starts_with("Fix this problem in `real/calc.py`:\n- line 6, column 16: error: c\n"));
}

/// A SARIF log (as CodeQL writes one): the result's region end, its rule's
/// `helpUri` and a related location in another file, whose line the first
/// message quotes.
#[test]
fn sarif_related_locations_reach_the_first_message() {
    let ws = workspace();
    std::fs::write(ws.root.join("util.py"), "def mul(x, y):\n    return x * y\n").unwrap();
    let sarif = json!({"version": "2.1.0", "runs": [{
        "tool": {"driver": {"name": "CodeQL", "rules": [{"id": "py/undefined", "helpUri": "https://codeql.example/py-undefined"}]}},
        "results": [{"ruleId": "py/undefined", "level": "error", "message": {"text": "Name `c` is not defined."},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": "calc.py"},
                "region": {"startLine": 6, "startColumn": 16, "endColumn": 17}}}],
            "relatedLocations": [{"id": 1, "message": {"text": "a `mul` that multiplies its own parameters"},
                "physicalLocation": {"artifactLocation": {"uri": "util.py"}, "region": {"startLine": 2, "startColumn": 5}}}]}]}]});
    let mock = MockModel::start();
    push_mul_fix(&mock, "calc.py");
    let out = ws.run(Some(&mock), &["fix", "calc.py", "--diagnostics", "-"], &sarif.to_string(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let first = first_message(&mock);
    assert!(
        first.starts_with(
            "Fix this problem in `calc.py`:\n- line 6, column 16: error: Name `c` is not defined. [CodeQL py/undefined]\n  \
             range 6:16-6:17 covers `c`\n  py/undefined is documented at https://codeql.example/py-undefined\n  \
             related: util.py:2: a `mul` that multiplies its own parameters\n    |     return x * y\n\n"
        ),
        "{first}"
    );
}

/// `pyright --outputjson` counts columns in UTF-16 units: past CJK (one
/// unit) and an emoji (two) on a CRLF line, the column the model reads is
/// in characters, and the range covers the name pyright meant.
#[test]
fn pyright_utf16_columns_reach_the_first_message_in_characters() {
    let ws = workspace();
    std::fs::write(ws.root.join("emoji.py"), "def mul(a, b):\r\n    s = '漢😀'; return a * c\r\n").unwrap();
    let report = json!({"version": "1.1.414", "generalDiagnostics": [{
        "file": ws.root.join("emoji.py"), "severity": "error", "message": "\"c\" is not defined",
        "range": {"start": {"line": 1, "character": 26}, "end": {"line": 1, "character": 27}},
        "rule": "reportUndefinedVariable"}]});
    let mock = MockModel::start();
    mock.push(tool_reply(&[(
        "toolu_1",
        "edit_file",
        json!({"path": "emoji.py", "old_text": "a * c", "new_text": "a * b"}),
    )]));
    mock.push(text_reply("Use b, the parameter."));
    let out = ws.run(Some(&mock), &["fix", "emoji.py", "--diagnostics", "-"], &report.to_string(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let first = first_message(&mock);
    assert!(
        first.starts_with(
            "Fix this problem in `emoji.py`:\n- line 2, column 26: error: \"c\" is not defined [pyright reportUndefinedVariable]\n  \
             range 2:26-2:27 covers `c`\n"
        ),
        "{first}"
    );
}
