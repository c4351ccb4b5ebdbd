//! Proposals checked before they are offered (`verify`), end to end through
//! `agentfix fix` against the mock model: a verify command run in the
//! sandboxed scratch copy, its failure fed back to the model, the record on
//! stderr and the exit code.

mod common;

use std::path::PathBuf;
use std::process::{Command, Output};

use common::agentfix_bin;
use common::mock_model::*;
use serde_json::{Value, json};

const CALC: &str = "def div(a, b):\n    return a / b\n";
const BROKEN: &str = "    return a / b  # BROKEN\n";

/// The project's test: the guard is there and nothing is marked broken.
const TEST: &str = "grep -q 'b == 0' calc.py && ! grep -q BROKEN calc.py";

struct Ws {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

fn workspace() -> Ws {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap().join("ws");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("calc.py"), CALC).unwrap();
    Ws { _dir: dir, root }
}

/// `agentfix fix calc.py --line 2` with the `test` command as the verify
/// command, and `verify` over it.
fn fix(ws: &Ws, mock: &MockModel, verify: Value) -> Output {
    let settings = json!({"commands": {"test": ["sh", "-c", TEST]}, "verify": verify, "transcripts": false});
    fix_command(ws, mock, &settings, &[]).output().unwrap()
}

/// `agentfix fix calc.py --line 2 --allow-command test` with `settings` and
/// `more` arguments, against the mock, without language servers.
fn fix_command(ws: &Ws, mock: &MockModel, settings: &Value, more: &[&str]) -> Command {
    let mut cmd = Command::new(agentfix_bin());
    cmd.current_dir(&ws.root).args(["fix", "calc.py", "--line", "2", "--allow-command", "test"]).args(more);
    cmd.arg("--settings").arg(settings.to_string());
    common::without_provider_env(&mut cmd);
    cmd.env("AGENTFIX_DEFAULT_LANGUAGE_SERVERS", "0")
        .env("ANTHROPIC_API_KEY", API_KEY)
        .env("ANTHROPIC_BASE_URL", mock.base_url());
    cmd
}

fn edit(id: &str, old: &str, new: &str) -> Reply {
    tool_reply(&[(id, "edit_file", json!({"path": "calc.py", "old_text": old, "new_text": new}))])
}

/// A first attempt that breaks the file, then the model's word that it is done.
fn wrong_first_attempt(mock: &MockModel) {
    mock.push(edit("toolu_1", "    return a / b\n", BROKEN));
    mock.push(text_reply("Guarded the division."));
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The text of the last user message of a recorded request.
fn last_user_text(request: &Recorded) -> String {
    let messages = request.body["messages"].as_array().unwrap();
    let last = messages.last().unwrap();
    assert_eq!(last["role"], "user");
    last["content"].to_string()
}

#[test]
fn a_failing_verify_command_is_fed_back_and_the_second_proposal_is_offered_verified() {
    let ws = workspace();
    let mock = MockModel::start();
    wrong_first_attempt(&mock);
    mock.push(edit("toolu_2", BROKEN, "    if b == 0:\n        return 0\n    return a / b\n"));
    mock.push(text_reply("Now guarded for real."));
    let out = fix(&ws, &mock, json!({"commands": ["test"]}));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("round 1: not verified: test failed (checked in "), "{err}");
    assert!(err.contains("agentfix: verified: test passed ("), "{err}");
    let diff = String::from_utf8_lossy(&out.stdout);
    assert!(diff.contains("+    if b == 0:") && !diff.contains("BROKEN"), "{diff}");
    let requests = mock.requests();
    assert_eq!(requests.len(), 4, "two rounds of two turns");
    let findings = last_user_text(&requests[2]);
    assert!(
        findings.contains("agentfix checked your proposal") && findings.contains("The command `test` failed"),
        "{findings}"
    );
    assert!(findings.contains("[exit code 1]"), "the end of its output: {findings}");
    // The user's file is untouched.
    assert_eq!(std::fs::read_to_string(ws.root.join("calc.py")).unwrap(), CALC);
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
}

#[test]
fn a_model_that_never_gets_it_right_is_offered_not_verified_with_exit_4_or_dropped() {
    let ws = workspace();
    let mock = MockModel::start();
    wrong_first_attempt(&mock);
    mock.push(text_reply("It looks right to me."));
    let out = fix(&ws, &mock, json!({"commands": ["test"], "rounds": 2}));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(err.contains("agentfix: not verified: test failed"), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("BROKEN"), "the unverified proposal is still offered");
    assert_eq!(mock.requests().len(), 3, "the rounds stop at verify.rounds");

    // With offerUnverified false it is dropped, with what failed.
    let mock = MockModel::start();
    wrong_first_attempt(&mock);
    let out = fix(&ws, &mock, json!({"commands": ["test"], "rounds": 1, "offerUnverified": false}));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no edit offered (verify.offerUnverified = false): not verified: test failed"), "{err}");
    assert!(out.stdout.is_empty(), "no diff");
    assert_eq!(mock.requests().len(), 2, "one round");
}

#[test]
fn without_anything_to_check_the_proposal_is_offered_as_before() {
    let ws = workspace();
    let mock = MockModel::start();
    wrong_first_attempt(&mock);
    // The command exists but is not a verify command; no language server.
    let out = fix(&ws, &mock, json!({}));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("verified"), "no line when nothing was set up to check: {err}");
    assert!(!err.contains("round 1"), "nor a progress line: {err}");
    assert_eq!(mock.requests().len(), 2);
}

#[test]
fn a_cancel_during_the_check_ends_the_run_at_once_and_kills_the_command() {
    let ws = workspace();
    let mock = MockModel::start();
    wrong_first_attempt(&mock);
    let pid_file = ws.root.parent().unwrap().join("command-pid");
    // A verify command that would run for a minute, its pid written first.
    let slow = format!("echo $$ > {}; exec sleep 60", pid_file.display());
    let settings = json!({"commands": {"test": ["sh", "-c", slow], "sandbox": "off"}, "verify": {"commands": ["test"]}, "transcripts": false});
    let mut cmd = fix_command(&ws, &mock, &settings, &[]);
    let child = cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    // The loop has ended (two requests) and the check has started.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while mock.requests().len() < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    let cancelled = std::time::Instant::now();
    // SAFETY: signalling our own child process by its pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let took = cancelled.elapsed();
    let err = stderr(&out);
    assert!(took < std::time::Duration::from_secs(10), "the cancel ended the check at once: {took:?}; {err}");
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("cancelled; nothing written"), "{err}");
    assert!(out.stdout.is_empty(), "nothing offered");
    // The command ran, and was killed with the run (its process group).
    let pid: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    assert!(common::gone_within(pid, 3), "the command {pid} outlived the run");
}

/// `agentfix fix` with `--candidates N` and extra settings over the test command.
fn fix_candidates(ws: &Ws, mock: &MockModel, n: u32, extra: Value) -> (Output, std::time::Duration) {
    let mut settings =
        json!({"commands": {"test": ["sh", "-c", TEST]}, "verify": {"commands": ["test"]}, "transcripts": false});
    for (k, v) in extra.as_object().unwrap() {
        settings[k] = v.clone();
    }
    let mut cmd = fix_command(ws, mock, &settings, &["--candidates", &n.to_string()]);
    let started = std::time::Instant::now();
    let out = cmd.output().unwrap();
    (out, started.elapsed())
}

const GUARD: &str = "    if b == 0:\n        return 0\n    return a / b\n";

#[test]
fn best_of_3_proposes_the_one_candidate_that_verifies() {
    let ws = workspace();
    let mock = MockModel::start();
    // Candidates 1 and 2 break the file and insist; candidate 3 fixes it.
    for k in [1, 2] {
        let me = format!("candidate {k} of 3");
        mock.push_for(&me, edit(&format!("toolu_{k}"), "    return a / b\n", BROKEN));
        mock.push_for(&me, text_reply("Guarded the division."));
        mock.push_for(&me, text_reply("It looks right to me."));
    }
    mock.push_for("candidate 3 of 3", edit("toolu_3", "    return a / b\n", GUARD));
    mock.push_for("candidate 3 of 3", text_reply("Guarded the division by zero."));
    let (out, _) = fix_candidates(&ws, &mock, 3, json!({}));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let diff = String::from_utf8_lossy(&out.stdout);
    assert!(diff.contains("+    if b == 0:") && !diff.contains("BROKEN"), "{diff}");
    assert!(err.contains("agentfix: candidate 3 of 3: verified, 2 lines changed"), "{err}");
    assert!(err.contains("(chosen)") && err.matches("(chosen)").count() == 1, "{err}");
    assert!(err.contains("agentfix: candidate 1 of 3: not verified, 2 lines changed"), "{err}");
    // Progress is one line for all the candidates, never theirs interleaved.
    let board: Vec<&str> = err.lines().filter(|l| l.starts_with("best of 3: #1 ")).collect();
    assert!(board.first() == Some(&"best of 3: #1 turn 1 · #2 waiting · #3 waiting"), "{err}");
    assert!(board.iter().any(|l| l.contains("#1 not verified · ")), "{err}");
    assert!(board.iter().any(|l| l.ends_with("#3 verified (done)")), "{err}");
    assert!(!err.lines().any(|l| l.starts_with("turn ")), "no candidate's own progress: {err}");
    // Every candidate ran its rounds: 3 + 3 + 2 requests, each with its own note.
    let requests = mock.requests();
    assert_eq!(requests.len(), 8, "{err}");
    for k in 1..=3 {
        let mine = requests.iter().filter(|r| r.body.to_string().contains(&format!("candidate {k} of 3"))).count();
        assert_eq!(mine, if k == 3 { 2 } else { 3 }, "candidate {k}'s requests");
    }
    // The others started once the first had its first answer.
    assert!(requests[0].body.to_string().contains("candidate 1 of 3"), "the first candidate starts alone");
    assert_eq!(mock.remaining(), 0);
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
}

#[test]
fn first_verified_cancels_the_other_candidates() {
    let ws = workspace();
    let mock = MockModel::start();
    mock.push_for("candidate 1 of 3", edit("toolu_1", "    return a / b\n", GUARD));
    mock.push_for("candidate 1 of 3", text_reply("Guarded the division by zero."));
    // The others hang on a stream of pings for half a minute.
    for k in [2, 3] {
        mock.push_for(
            &format!("candidate {k} of 3"),
            Reply::Sse(vec![repeat(&b": ping\n\n"[..], 300, std::time::Duration::from_millis(100))]),
        );
    }
    let (out, took) = fix_candidates(&ws, &mock, 3, json!({"candidatesStop": "first-verified"}));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(took < std::time::Duration::from_secs(15), "the others were cancelled, not waited for: {took:?}");
    assert!(err.contains("agentfix: candidate 1 of 3: verified") && err.contains("(chosen)"), "{err}");
    for k in [2, 3] {
        let line = err.lines().find(|l| l.starts_with(&format!("agentfix: candidate {k} of 3: "))).unwrap_or_default();
        assert!(line.contains("not verified, 0 lines changed") && line.ends_with("cancelled"), "{err}");
    }
}

#[test]
fn from_the_first_edit_the_reading_is_paid_once_and_the_candidates_fork_there() {
    let ws = workspace();
    let mock = MockModel::start();
    // The exploration: one read, then the first edit, where it forks.
    mock.push(tool_reply(&[("toolu_read", "read_file", json!({"path": "calc.py"}))]));
    mock.push(edit("toolu_first", "    return a / b\n", BROKEN));
    // Candidate 1 goes on with that edit (its requests carry its result),
    // and insists after the failing check.
    mock.push_for("toolu_first", text_reply("Guarded the division."));
    mock.push_for("toolu_first", text_reply("It looks right to me."));
    // Candidates 2 and 3 are asked again, with their notes.
    mock.push_for("candidate 2 of 3", edit("toolu_2", "    return a / b\n", GUARD));
    mock.push_for("candidate 2 of 3", text_reply("Guarded the division by zero."));
    let none = "    # None, not an error\n    if b == 0:\n        return None\n    return a / b\n";
    mock.push_for("candidate 3 of 3", edit("toolu_3", "    return a / b\n", none));
    mock.push_for("candidate 3 of 3", text_reply("Returned None for zero."));
    let (out, _) = fix_candidates(&ws, &mock, 3, json!({"candidatesFrom": "first-edit"}));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("agentfix: candidate 1 of 3: not verified"), "{err}");
    assert!(err.contains("agentfix: candidate 2 of 3: verified") && err.contains("(chosen)"), "{err}");
    let diff = String::from_utf8_lossy(&out.stdout);
    assert!(diff.contains("+        return 0") && !diff.contains("BROKEN"), "{diff}");
    let requests = mock.requests();
    // 2 to explore, then 2 each (candidate 1's edit was the exploration's).
    assert_eq!(requests.len(), 8, "{err}");
    let explored = requests[1].body["messages"].as_array().unwrap().clone();
    for k in [2, 3] {
        let mine: Vec<&Recorded> =
            requests.iter().filter(|r| r.body.to_string().contains(&format!("candidate {k} of 3"))).collect();
        let messages = mine[0].body["messages"].as_array().unwrap();
        // The exploration's conversation, with the note after its read's result.
        assert_eq!(messages.len(), explored.len(), "candidate {k}");
        assert_eq!(messages[..explored.len() - 1], explored[..explored.len() - 1], "candidate {k}");
        let last = messages.last().unwrap()["content"].as_array().unwrap();
        assert_eq!(last[0]["type"], "tool_result");
        assert!(last.last().unwrap()["text"].as_str().unwrap().contains(&format!("candidate {k} of 3")));
        assert!(!mine[0].body.to_string().contains("toolu_first"), "the first edit is not theirs");
    }
    assert_eq!(mock.remaining(), 0);
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());

    // A model that finishes without an edit: nothing to fork, one run.
    let mock = MockModel::start();
    mock.push(text_reply("The division is fine as it is."));
    let (out, _) = fix_candidates(&ws, &mock, 3, json!({"candidatesFrom": "first-edit"}));
    let err = stderr(&out);
    assert_eq!(mock.requests().len(), 1, "{err}");
    assert!(!err.contains("candidate 1 of 3"), "{err}");
}

#[test]
fn replay_says_plainly_that_it_cannot_replay_a_run_of_two_rounds() {
    let ws = workspace();
    let mock = MockModel::start();
    wrong_first_attempt(&mock);
    mock.push(edit("toolu_2", BROKEN, GUARD));
    mock.push(text_reply("Guarded the division by zero."));
    let transcripts = ws.root.parent().unwrap().join("transcripts");
    let settings = json!({"commands": {"test": ["sh", "-c", TEST]}, "verify": {"commands": ["test"]},
        "transcriptDir": transcripts.to_str().unwrap()});
    let out = fix_command(&ws, &mock, &settings, &[]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let transcript = std::fs::read_dir(&transcripts).unwrap().next().unwrap().unwrap().path();
    let out = Command::new(agentfix_bin()).args(["replay"]).arg(&transcript).output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("the run took 2 rounds of verification") && err.contains("replay re-runs runs of one round only"),
        "{err}"
    );
}
