//! The load driver (`examples/lsp_load.rs`) with small numbers, against the
//! do-nothing floor (`examples/lsp_floor.rs`) and the agentfix binary: the
//! table has its rows and a figure in every cell, and agentfix's copy of
//! the typed-in and opened documents (`agentfix/documentText`) equals the
//! driver's. No figure is asserted: these are benchmarks, not limits.

mod common;

use std::process::{Command, Output};

use common::{agentfix_bin, without_provider_env};

fn drive(servers: &[(&str, String)], extra: &[&str]) -> Output {
    let mut cmd = Command::new(common::example("lsp_load"));
    without_provider_env(&mut cmd);
    cmd.args(["--runs", "1", "--docs", "5", "--keystrokes", "50", "--codeactions", "20"]).args([
        "--rss-docs",
        "3",
        "--rss-lines",
        "500",
        "--timeout-secs",
        "60",
    ]);
    for (name, command) in servers {
        cmd.arg("--server").arg(format!("{name}={command}"));
    }
    cmd.args(extra).env("AGENTFIX_DEFAULT_LANGUAGE_SERVERS", "0").output().unwrap()
}

const ROWS: [&str; 8] = [
    "| spawn → initialize response (ms) |",
    "|   page faults by the initialize response |",
    "|   threads at the initialize response |",
    "|   CPU time of all threads by the initialize response (ms) |",
    "| codeAction p50, 5 open documents × 200 lines (µs) |",
    "| codeAction p99, 5 open documents × 200 lines (µs) |",
    "| 50 keystrokes on a 2,000-line document, then a codeAction answered (ms) |",
    "| peak RSS (VmHWM) after opening 3 documents × 500 lines,",
];

#[test]
fn the_driver_measures_the_floor_and_agentfix_and_agentfixs_copy_is_the_editors() {
    let floor = common::example("lsp_floor").to_string_lossy().into_owned();
    let agentfix = format!("{} --stdio", agentfix_bin());
    // The run's provider answers nothing (a closed port): the first
    // progress comes before any model request.
    let out = drive(
        &[("floor", floor), ("agentfix", agentfix)],
        &[
            "--verify",
            "agentfix",
            "--progress",
            "agentfix",
            "--env",
            "agentfix=ANTHROPIC_API_KEY=sk-ant-lsp-load",
            "--env",
            "agentfix=ANTHROPIC_BASE_URL=http://127.0.0.1:9",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the driver failed ({}):\n{stdout}\n{stderr}", out.status);
    assert!(stdout.contains("| measure (median of 1 runs) | floor | agentfix |"), "{stdout}");
    for row in ROWS {
        let line = stdout.lines().find(|l| l.starts_with(row)).unwrap_or_else(|| panic!("no row `{row}`:\n{stdout}"));
        let cells: Vec<&str> = line.trim_matches('|').split('|').skip(1).map(str::trim).collect();
        assert_eq!(cells.len(), 2, "{line}");
        for cell in cells {
            assert!(cell.replace(',', "").parse::<f64>().is_ok(), "not a figure: `{cell}` in {line}\n{stderr}");
        }
    }
    let progress = stdout
        .lines()
        .find(|l| l.starts_with("| workspace/executeCommand agentfix.fix → first $/progress (ms) |"))
        .unwrap_or_else(|| panic!("no progress row:\n{stdout}\n{stderr}"));
    let cells: Vec<&str> = progress.trim_matches('|').split('|').skip(1).map(str::trim).collect();
    assert_eq!(cells[0], "—", "the floor is not measured: {progress}");
    assert!(cells[1].parse::<f64>().is_ok(), "not a figure: {progress}\n{stderr}");
    assert!(
        stdout.contains("Mirror check (agentfix): `agentfix/documentText` equals the driver's text and version in every run (4 documents checked)."),
        "{stdout}\n{stderr}"
    );
    assert!(!stdout.contains("MISMATCH") && !stderr.contains("MISMATCH"), "{stdout}\n{stderr}");
    assert!(stdout.contains("`cargo run --release --example lsp_load -- --runs 1 "), "{stdout}");
}

#[test]
fn a_server_whose_copy_cannot_be_checked_fails_the_mirror_check_loudly() {
    // The floor keeps no documents and answers agentfix/documentText with
    // MethodNotFound: the check must fail, not pass by default.
    let floor = common::example("lsp_floor").to_string_lossy().into_owned();
    let out = drive(&[("floor", floor)], &["--verify", "floor"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
    assert!(stdout.contains("MIRROR MISMATCH (floor)"), "{stdout}");
    assert!(stderr.contains("MIRROR MISMATCH (floor)") && stderr.contains("gave no {version, text}"), "{stderr}");
    // The table is still printed.
    assert!(stdout.lines().any(|l| l.starts_with(ROWS[0])), "{stdout}");
}
