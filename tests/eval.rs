//! `agentfix eval` over the shipped task set (`evals/`), through the built
//! binary against the mock model, each task's replies routed to its runs by
//! a marker from its target file (`evals/<task>/mock.json`): the results
//! in `--json` task by task (wrong first attempts caught by verification
//! and fixed in round 2, a verified fix the check refutes and a right fix
//! the workspace's tests cannot verify, both `agreed: false`), best of 3
//! with wrong candidates, several models, a task whose check already
//! passes (invalid, not counted), the usage errors (exit 2), and that no
//! request carries a check. The same set against a real model runs only
//! when `AGENTFIX_EVAL_MODEL` is set, and says `SKIPPED` otherwise.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use common::mock_model::{API_KEY, MockModel, error_reply, reply_from_json};
use common::{agentfix_bin, tool_results};
use serde_json::Value;

/// A task's script for the mock, from its `mock.json`.
struct Script {
    name: String,
    /// Text of the task's target file that routes a request to this task.
    marker: String,
    expect: Value,
    replies: Vec<Value>,
    /// Each candidate's replies, for `--candidates 3`.
    candidates: Vec<Vec<Value>>,
    /// The task's `check` argv (it must never reach the model).
    check: Vec<String>,
}

fn evals_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("evals")
}

/// Every task of the shipped set, by name.
fn scripts() -> Vec<Script> {
    let mut dirs: Vec<PathBuf> =
        std::fs::read_dir(evals_dir()).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    dirs.sort();
    dirs.iter()
        .map(|dir| {
            let mock: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("mock.json")).unwrap()).unwrap();
            let task: toml::Table = toml::from_str(&std::fs::read_to_string(dir.join("task.toml")).unwrap()).unwrap();
            let list = |v: &Value| v.as_array().cloned().unwrap_or_default();
            Script {
                name: dir.file_name().unwrap().to_string_lossy().into_owned(),
                marker: mock["marker"].as_str().unwrap().to_string(),
                expect: mock["expect"].clone(),
                replies: list(&mock["replies"]),
                candidates: list(&mock["candidates"]).iter().map(list).collect(),
                check: task["check"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()).collect(),
            }
        })
        .collect()
}

/// A temporary task set of the named shipped tasks (links to their folders).
fn subset(names: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for name in names {
        std::os::unix::fs::symlink(evals_dir().join(name), dir.path().join(name)).unwrap();
    }
    dir
}

/// `agentfix eval DIR ARGS` against the mock, with the test's own cache
/// folder and no language servers; the JSON report with `--json`.
fn eval(dir: &Path, mock: &MockModel, args: &[&str]) -> (Output, Option<Value>) {
    let cache = tempfile::tempdir().unwrap();
    let json = cache.path().join("report.json");
    let mut cmd = Command::new(agentfix_bin());
    cmd.arg("eval").arg(dir).args(args).arg("--json").arg(&json);
    common::without_provider_env(&mut cmd);
    cmd.env("AGENTFIX_DEFAULT_LANGUAGE_SERVERS", "0")
        .env("XDG_CACHE_HOME", cache.path())
        .env("ANTHROPIC_API_KEY", API_KEY)
        .env("ANTHROPIC_BASE_URL", mock.base_url());
    let out = cmd.output().unwrap();
    let report = std::fs::read_to_string(&json).ok().map(|t| serde_json::from_str(&t).unwrap());
    (out, report)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The report's row of `task` (with `model`, when given).
fn row<'a>(report: &'a Value, task: &str, model: Option<&str>) -> &'a Value {
    let rows = report["tasks"].as_array().unwrap();
    rows.iter()
        .find(|r| r["name"] == task && model.is_none_or(|m| r["model"] == m))
        .unwrap_or_else(|| panic!("no row for {task} in {report:#}"))
}

/// No request the mock received holds any of the checks: not the argv, not
/// its code (as it would be escaped in JSON, too).
fn assert_no_check_was_sent(mock: &MockModel, scripts: &[Script]) {
    let sent = mock.requests_text();
    for s in scripts {
        let whole = s.check.join(" ");
        assert!(!sent.contains(&whole), "{}'s check reached the model", s.name);
        for part in s.check.iter().filter(|p| p.len() >= 12) {
            let escaped = serde_json::to_string(part).unwrap();
            let escaped = &escaped[1..escaped.len() - 1];
            assert!(!sent.contains(part.as_str()) && !sent.contains(escaped), "{}'s check reached the model", s.name);
            // The lines of its code that the workspace does not show anyway.
            let shown = files_text(&evals_dir().join(&s.name).join("workspace"));
            for line in part.lines().map(str::trim).filter(|l| l.len() >= 24 && !shown.contains(l)) {
                assert!(!sent.contains(line), "{}'s check line `{line}` reached the model", s.name);
            }
        }
    }
}

#[test]
fn the_shipped_task_set_runs_against_the_mock_and_no_check_reaches_the_model() {
    let scripts = scripts();
    let python = scripts.iter().filter(|s| s.name.starts_with("python-")).count();
    assert!(scripts.len() >= 20 && python >= 10 && scripts.len() - python >= 10, "{} tasks", scripts.len());
    // Each marker routes to one task: it is in that task's files alone.
    for s in &scripts {
        let holders: Vec<&str> = scripts
            .iter()
            .filter(|o| files_text(&evals_dir().join(&o.name).join("workspace")).contains(&s.marker))
            .map(|o| o.name.as_str())
            .collect();
        assert_eq!(holders, [s.name.as_str()], "the marker of {}", s.name);
    }
    let mock = MockModel::start();
    for s in &scripts {
        for r in &s.replies {
            mock.push_for(&s.marker, reply_from_json(r).unwrap());
        }
    }
    let started = Instant::now();
    let (out, report) = eval(&evals_dir(), &mock, &["--jobs", "4"]);
    let took = started.elapsed();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let report = report.unwrap();
    for s in &scripts {
        let r = row(&report, &s.name, None);
        let keys: Vec<&str> = r.as_object().unwrap().keys().map(String::as_str).collect();
        for key in ["name", "model", "resolved", "verified", "agreed", "turns", "tokens", "costUsd", "secs"] {
            assert!(keys.contains(&key), "{key} missing from {r}");
        }
        let (resolved, verified) = (&s.expect["resolved"], &s.expect["verified"]);
        assert_eq!((&r["resolved"], &r["verified"]), (resolved, verified), "{}: {r}", s.name);
        assert_eq!(r["agreed"], resolved == verified, "{}: {r}", s.name);
        assert_eq!(r["rounds"], s.expect["rounds"], "{}: {r}", s.name);
        assert_eq!(r["turns"], s.replies.len(), "{}: every scripted reply is a turn: {r}", s.name);
        assert!(r["tokens"].as_u64().unwrap() > 0 && r["costUsd"].as_f64().unwrap() > 0.0, "{r}");
        assert_eq!(r["model"], "claude-sonnet-4-5");
    }
    // Both ways of disagreeing are there: a verified fix the check refutes,
    // and a right fix that the workspace's broken test cannot verify.
    assert_eq!(row(&report, "python-empty-mean", None)["note"], "the check failed (exit 1): AssertionError: 0.0");
    assert_eq!(row(&report, "python-unrelated-failing-test", None)["agreed"], false);
    let (n, unresolved) = (scripts.len(), scripts.iter().filter(|s| s.expect["resolved"] == false).count());
    let summary = &report["models"][0];
    assert_eq!(
        (summary["tasks"].as_u64(), summary["resolved"].as_u64()),
        (Some(n as u64), Some((n - unresolved) as u64))
    );
    assert_eq!((report["invalid"].as_array().unwrap().len(), report["notRun"].as_array().unwrap().len()), (0, 0));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains(&format!("claude-sonnet-4-5  {} of {n}", n - unresolved)), "{table}");
    assert!(err.contains(&format!("eval: {n}/{n}: ")), "a progress line per run: {err}");
    // The workspaces' own commands were approved for the model.
    let results = tool_results(&mock);
    for id in ["report_run", "cents_run"] {
        assert!(results[id].0.contains("[exit code 0]"), "{id}: {:?}", results[id]);
    }
    assert_no_check_was_sent(&mock, &scripts);
    assert_eq!(mock.remaining(), 0, "every scripted reply was used");
    eprintln!("eval: {n} tasks with the mock took {:.1} s", took.as_secs_f64());
}

/// The text of every file under `dir`.
fn files_text(dir: &Path) -> String {
    let mut out = String::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        if path.is_dir() {
            out.push_str(&files_text(&path));
        } else {
            out.push_str(&std::fs::read_to_string(&path).unwrap_or_default());
        }
    }
    out
}

#[test]
fn best_of_3_over_two_tasks_proposes_the_candidate_that_verifies() {
    let scripts: Vec<Script> = scripts().into_iter().filter(|s| !s.candidates.is_empty()).collect();
    assert!(scripts.len() >= 2, "the tasks with candidate scripts");
    let names: Vec<&str> = scripts.iter().map(|s| s.name.as_str()).collect();
    let dir = subset(&names);
    let mock = MockModel::start();
    for s in &scripts {
        assert_eq!(s.candidates.len(), 3, "{}", s.name);
        for (k, replies) in s.candidates.iter().enumerate() {
            let me = format!("candidate {} of 3", k + 1);
            for r in replies {
                mock.push_for_all(&[&s.marker, &me], reply_from_json(r).unwrap());
            }
        }
    }
    let (out, report) = eval(dir.path(), &mock, &["--candidates", "3", "--jobs", "2"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report = report.unwrap();
    for s in &scripts {
        let r = row(&report, &s.name, None);
        assert_eq!(
            (&r["resolved"], &r["verified"], &r["agreed"]),
            (&Value::Bool(true), &Value::Bool(true), &Value::Bool(true))
        );
        let turns: usize = s.candidates.iter().map(Vec::len).sum();
        assert_eq!(r["turns"], turns, "the candidates' turns add up: {r}");
    }
    assert_eq!(mock.remaining(), 0, "every candidate ran its rounds");
    assert_no_check_was_sent(&mock, &scripts);
}

#[test]
fn every_task_runs_once_per_model() {
    let names = ["python-missing-none-nickname", "rust-wrong-operator-leap-year"];
    let scripts: Vec<Script> = scripts().into_iter().filter(|s| names.contains(&s.name.as_str())).collect();
    let dir = subset(&names);
    let mock = MockModel::start();
    for model in ["mock-a", "mock-b"] {
        let mine = format!("\"model\":\"{model}\"");
        for s in &scripts {
            for r in &s.replies {
                mock.push_for_all(&[&s.marker, &mine], reply_from_json(r).unwrap());
            }
        }
    }
    let (out, report) = eval(dir.path(), &mock, &["--model", "mock-a,mock-b", "--jobs", "4"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report = report.unwrap();
    assert_eq!(report["tasks"].as_array().unwrap().len(), 4, "{report:#}");
    for (model, summary) in ["mock-a", "mock-b"].iter().zip(report["models"].as_array().unwrap()) {
        for name in names {
            assert_eq!(row(&report, name, Some(model))["resolved"], true);
        }
        assert_eq!(
            (&summary["model"], &summary["resolved"], &summary["tasks"]),
            (&Value::from(*model), &Value::from(2), &Value::from(2))
        );
        // No price is known for these models: no cost, said as such.
        assert_eq!((&summary["costUsd"], &summary["costPerResolvedUsd"]), (&Value::Null, &Value::Null));
    }
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.lines().any(|l| l.starts_with("mock-b") && l.contains("2 of 2")), "{table}");
    assert_eq!(mock.remaining(), 0);
}

#[test]
fn a_task_whose_check_already_passes_is_invalid_and_not_counted() {
    let dir = subset(&["python-zero-retries"]);
    let done = dir.path().join("already-fixed");
    std::fs::create_dir_all(done.join("workspace")).unwrap();
    std::fs::write(done.join("workspace/calc.py"), "def double(x):\n    return 2 * x\n").unwrap();
    let check = "check = [\"python3\", \"-c\", \"from calc import double; assert double(2) == 4\"]\n";
    std::fs::write(done.join("task.toml"), format!("file = \"calc.py\"\nline = 2\n{check}")).unwrap();
    let script = scripts().into_iter().find(|s| s.name == "python-zero-retries").unwrap();
    let mock = MockModel::start();
    for r in &script.replies {
        mock.push_for(&script.marker, reply_from_json(r).unwrap());
    }
    let (out, report) = eval(dir.path(), &mock, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report = report.unwrap();
    assert_eq!(
        report["invalid"],
        serde_json::json!([{"name": "already-fixed", "reason": "the check already passes before any fix"}])
    );
    assert_eq!(report["tasks"].as_array().unwrap().len(), 1, "{report:#}");
    assert_eq!((&report["models"][0]["tasks"], &report["models"][0]["resolved"]), (&Value::from(1), &Value::from(1)));
    assert!(!mock.requests_text().contains("def double"), "the invalid task never ran");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("invalid, not counted: already-fixed: the check already passes before any fix"), "{table}");
}

/// A task in `dir` whose workspace is `name.py` (`{name} = 1`), fixed
/// at line 1 by the script pushed for it, judged by `check`.
fn one_line_task(dir: &Path, mock: &MockModel, name: &str, check: &str) -> PathBuf {
    let task = dir.join(name);
    std::fs::create_dir_all(task.join("workspace")).unwrap();
    std::fs::write(task.join("workspace").join(format!("{name}.py")), format!("{name} = 1\n")).unwrap();
    std::fs::write(task.join("task.toml"), format!("file = \"{name}.py\"\nline = 1\n{check}")).unwrap();
    let edit = serde_json::json!({"tools": [["t1", "edit_file", {"path": format!("{name}.py"), "old_text": "= 1", "new_text": "= 2"}]]});
    mock.push_for(&format!("{name} = "), reply_from_json(&edit).unwrap());
    mock.push_for(&format!("{name} = "), reply_from_json(&serde_json::json!({"text": "Done."})).unwrap());
    std::fs::canonicalize(task).unwrap()
}

#[test]
fn the_check_gets_no_key_and_its_process_group_dies_at_its_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let mock = MockModel::start();
    let shows =
        "check = [\"sh\", \"-c\", 'echo \"key=${ANTHROPIC_API_KEY:-unset} task=$AGENTFIX_EVAL_TASK\"; exit 1']\n";
    let env_task = one_line_task(dir.path(), &mock, "envtask", shows);
    // A check that leaves a child behind and hangs: killed with its group.
    let hangs = "check = [\"sh\", \"-c\", 'sleep 60 & echo $! > \"$AGENTFIX_EVAL_TASK/sleeper\"; wait']\ncheckTimeoutSecs = 1\n";
    let slow_task = one_line_task(dir.path(), &mock, "slowtask", hangs);
    let (out, report) = eval(dir.path(), &mock, &["--jobs", "2"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report = report.unwrap();
    let note = row(&report, "envtask", None)["note"].as_str().unwrap().to_string();
    assert_eq!(note, format!("the check failed (exit 1): key=unset task={}", env_task.display()));
    assert_eq!(row(&report, "slowtask", None)["note"], "the check timed out after 1 s");
    let sleeper: i32 = std::fs::read_to_string(slow_task.join("sleeper")).unwrap().trim().parse().unwrap();
    assert!(common::gone_within(sleeper, 3), "the check's child {sleeper} outlived its timeout");
}

#[test]
fn usage_errors_exit_2_and_name_the_task() {
    let mock = MockModel::start();
    let dir = tempfile::tempdir().unwrap();
    let (out, _) = eval(&dir.path().join("missing"), &mock, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("agentfix: eval: cannot read the task set"), "{}", stderr(&out));
    let (out, _) = eval(dir.path(), &mock, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("agentfix: eval: no tasks in"), "{}", stderr(&out));
    // An unknown key of task.toml, named with its task.
    let task = dir.path().join("broken");
    std::fs::create_dir_all(task.join("workspace")).unwrap();
    std::fs::write(task.join("workspace/a.py"), "x = 1\n").unwrap();
    std::fs::write(task.join("task.toml"), "file = \"a.py\"\nline = 1\ncheck = [\"false\"]\nchek = [\"true\"]\n")
        .unwrap();
    let (out, report) = eval(dir.path(), &mock, &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("agentfix: eval: task broken: task.toml: ") && err.contains("unknown field `chek`"), "{err}");
    assert!(report.is_none(), "nothing ran, nothing written");
    // A line past the end of the file, found before anything runs.
    std::fs::write(task.join("task.toml"), "file = \"a.py\"\nline = 9\ncheck = [\"false\"]\n").unwrap();
    let (out, _) = eval(dir.path(), &mock, &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("agentfix: eval: task broken: line 9 is past the end of a.py (1 lines)"), "{err}");
    let (out, _) = eval(dir.path(), &mock, &["--jobs", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(mock.requests().is_empty(), "no usage error reaches the model");
}

#[test]
fn a_model_api_that_fails_every_run_exits_3() {
    let dir = subset(&["python-zero-retries", "rust-wrong-operator-leap-year"]);
    let mock = MockModel::start();
    for _ in 0..2 {
        mock.push(error_reply(401, "authentication_error", "invalid x-api-key"));
    }
    let (out, report) = eval(dir.path(), &mock, &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.ends_with("agentfix: eval: the model API failed in every run\n"), "{err}");
    let report = report.unwrap();
    for name in ["python-zero-retries", "rust-wrong-operator-leap-year"] {
        let r = row(&report, name, None);
        assert_eq!(r["resolved"], false);
        assert!(r["note"].as_str().unwrap().starts_with("the model API failed: "), "{r}");
    }
}

/// The shipped set against the model `AGENTFIX_EVAL_MODEL`, with the
/// provider configured as for `agentfix fix` (its key, or
/// `AGENTFIX_PROVIDER=openai-compatible` and `OPENAI_BASE_URL` for a local
/// server). Only the run is asserted (every task ran, the report is
/// whole), not what a model resolves.
#[test]
fn the_task_set_against_a_real_model_when_one_is_configured() {
    let test = "the_task_set_against_a_real_model_when_one_is_configured";
    let Some(model) = std::env::var("AGENTFIX_EVAL_MODEL").ok().filter(|m| !m.is_empty()) else {
        common::say_skipped(test, "AGENTFIX_EVAL_MODEL and a provider's key or base URL; see docs/eval.md");
        return;
    };
    let out_dir = tempfile::tempdir().unwrap();
    let json = out_dir.path().join("report.json");
    let out = Command::new(agentfix_bin())
        .arg("eval")
        .arg(evals_dir())
        .args(["--model", &model, "--jobs", "2", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    eprintln!("{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["tasks"].as_array().unwrap().len(), scripts().len(), "{report:#}");
}
