//! The check of a proposal before it is offered: the diagnostics of every
//! changed file against those of its text before the run (fixed,
//! introduced, remaining; the target's problems first), and the configured
//! verify commands in the sandboxed scratch copy. What failed goes back to
//! the model as findings while rounds remain; the last round's record
//! ([`Verification`]) travels with the proposal to every front end.

use serde::{Deserialize, Serialize};

use crate::diagnostic::{Diagnostic, Severity};
use crate::downstream::SymbolSource;
use crate::tools::{RunCommand, ToolContext, ToolError};
use crate::workspace::FileChange;

/// How a proposal fared in its check: the `verification` of the
/// `agentfix.fix` result and of the CLI's summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Verification {
    /// Every check that ran passed, and at least one ran.
    pub verified: bool,
    /// The rounds the run took (a round: the loop to its end, then a check).
    pub rounds: u32,
    /// `None` when no language server covers a changed file (or the check
    /// is off): not run, which is no failure.
    pub diagnostics: Option<DiagnosticCounts>,
    /// The verify commands, in the configured order (empty: none configured).
    pub commands: Vec<CommandCheck>,
}

/// Errors of the changed files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiagnosticCounts {
    /// There before the run, gone after it.
    pub fixed: u32,
    /// New with the proposal.
    pub introduced: u32,
    /// There before and after.
    pub remaining: u32,
}

/// One verify command's run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandCheck {
    pub name: String,
    pub passed: bool,
    /// `None` when it did not exit by itself (killed, timed out, refused).
    pub exit_code: Option<i32>,
    pub secs: f64,
}

/// A diagnostic of one changed file, with the file's display path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileDiagnostic {
    pub file: String,
    pub diagnostic: Diagnostic,
}

/// The diagnostics of the changed files compared, before and after.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DiagnosticDiff {
    pub fixed: u32,
    /// New errors, in file order.
    pub introduced: Vec<FileDiagnostic>,
    pub remaining: u32,
    /// The target's problems still reported after the proposal.
    pub unfixed_targets: Vec<Diagnostic>,
}

/// Whether a diagnostic counts: errors (a missing severity reads as an
/// error, as editors show it); warnings and hints neither fail nor pass a
/// proposal.
fn is_error(d: &Diagnostic) -> bool {
    matches!(d.severity, None | Some(Severity::Error))
}

/// What identifies a diagnostic across an edit: lines move, so only its
/// severity, code and message.
fn key(d: &Diagnostic) -> (Option<Severity>, Option<&str>, &str) {
    (d.severity.or(Some(Severity::Error)), d.code.as_deref(), d.message.trim())
}

/// Compares `before` and `after` of each changed file (`(file, before,
/// after)`) as multisets by [`key`]; a target problem is unfixed when a
/// diagnostic of the target file after the proposal has its message.
pub fn compare(
    files: &[(String, Vec<Diagnostic>, Vec<Diagnostic>)],
    target_file: &str,
    targets: &[Diagnostic],
) -> DiagnosticDiff {
    let mut diff = DiagnosticDiff::default();
    for (file, before, after) in files {
        let mut left: Vec<&Diagnostic> = before.iter().filter(|d| is_error(d)).collect();
        for d in after.iter().filter(|d| is_error(d)) {
            match left.iter().position(|b| key(b) == key(d)) {
                Some(i) => {
                    left.swap_remove(i);
                    diff.remaining += 1;
                }
                None => diff.introduced.push(FileDiagnostic { file: file.clone(), diagnostic: d.clone() }),
            }
        }
        diff.fixed += left.len() as u32;
        if file == target_file {
            diff.unfixed_targets
                .extend(targets.iter().filter(|t| after.iter().any(|d| d.message.trim() == t.message.trim())).cloned());
        }
    }
    diff
}

impl DiagnosticDiff {
    pub fn counts(&self) -> DiagnosticCounts {
        DiagnosticCounts { fixed: self.fixed, introduced: self.introduced.len() as u32, remaining: self.remaining }
    }

    /// Whether the diagnostics pass: no new error, every target problem gone.
    pub fn passed(&self) -> bool {
        self.introduced.is_empty() && self.unfixed_targets.is_empty()
    }
}

/// `1 new error`, `2 new errors`.
fn plural(n: usize, one: &str) -> String {
    if n == 1 { format!("1 {one}") } else { format!("{n} {one}s") }
}

impl Verification {
    /// The line that leads the edit's label, the review and the CLI's
    /// summary: `verified: 1 fixed, 0 new; test passed (4.1 s)`, `not
    /// verified: test failed`, `not verified: 1 new error`; `None` when
    /// nothing was set up to check the proposal.
    pub fn line(&self) -> Option<String> {
        if self.diagnostics.is_none() && self.commands.is_empty() {
            return None;
        }
        let secs = |c: &CommandCheck| format!("{:.1} s", c.secs);
        if self.verified {
            let mut parts = Vec::new();
            if let Some(d) = self.diagnostics {
                parts.push(format!("{} fixed, {} new", d.fixed, d.introduced));
            }
            parts.extend(self.commands.iter().map(|c| format!("{} passed ({})", c.name, secs(c))));
            return Some(format!("verified: {}", parts.join("; ")));
        }
        let mut failed = Vec::new();
        let commands_failed = self.commands.iter().any(|c| !c.passed);
        match self.diagnostics {
            Some(d) if d.introduced > 0 => failed.push(plural(d.introduced as usize, "new error")),
            // The diagnostics ran and brought nothing new, yet the check
            // failed without a failing command: a target problem is still
            // reported.
            Some(_) if !commands_failed => failed.push("the problem is still reported".to_string()),
            _ => {}
        }
        failed.extend(self.commands.iter().filter(|c| !c.passed).map(|c| format!("{} failed", c.name)));
        Some(format!("not verified: {}", failed.join("; ")))
    }
}

/// The characters of a failing command's output the findings carry.
const OUTPUT_TAIL_CHARS: usize = 4000;

/// The end of `text`, at most [`OUTPUT_TAIL_CHARS`] characters, cut at a
/// line start when one is near.
fn tail(text: &str) -> &str {
    let count = text.chars().count();
    if count <= OUTPUT_TAIL_CHARS {
        return text;
    }
    let at = text.char_indices().nth(count - OUTPUT_TAIL_CHARS).map_or(0, |(i, _)| i);
    let cut = &text[at..];
    match cut.find('\n') {
        Some(nl) if nl < 200 => &cut[nl + 1..],
        _ => cut,
    }
}

/// A failed command's name and what it printed (`run_command`'s text).
pub struct FailedCommand<'a> {
    pub name: &'a str,
    pub text: &'a str,
}

/// The next user message when the check failed: what failed, the new
/// diagnostics with their lines, the target problems still there, the end
/// of each failing command's output.
pub fn findings(diff: Option<&DiagnosticDiff>, failed: &[FailedCommand<'_>]) -> String {
    let mut out = String::from(
        "agentfix checked your proposal and it is not done yet. Fix what follows with the tools, then finish with one sentence.\n",
    );
    if let Some(diff) = diff {
        if !diff.introduced.is_empty() {
            out.push_str("\nNew diagnostics since your edits:\n");
            for d in &diff.introduced {
                let sev = d.diagnostic.severity.map_or("error", |s| s.name());
                out.push_str(&format!(
                    "- {} line {}, column {}: {sev}: {}\n",
                    d.file,
                    d.diagnostic.at.line_number(),
                    d.diagnostic.at.column_number(),
                    d.diagnostic.message
                ));
            }
        }
        if !diff.unfixed_targets.is_empty() {
            out.push_str("\nThe problems you were asked to fix are still reported:\n");
            for t in &diff.unfixed_targets {
                out.push_str(&format!("- line {}: {}\n", t.at.line_number(), t.message));
            }
        }
    }
    for c in failed {
        out.push_str(&format!(
            "\nThe command `{}` failed; the end of its output:\n```\n{}\n```\n",
            c.name,
            tail(c.text).trim_end()
        ));
    }
    out
}

/// What checks a proposal: the language servers (when the diagnostics
/// check is on) and the verify commands with the tool that runs them.
pub struct Checker<'a> {
    pub symbols: Option<&'a dyn SymbolSource>,
    pub commands: Option<&'a RunCommand>,
    /// `verify.commands`, in order.
    pub names: &'a [String],
}

/// How one verify command went.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandResult {
    pub check: CommandCheck,
    /// What it printed (`run_command`'s text), or why it did not run.
    pub text: String,
    /// It did not run (not approved, no sandbox, not configured): the
    /// model cannot fix that, so it is no finding.
    pub refused: bool,
}

/// One check of a proposal.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Checked {
    /// `None` when no language server covers a changed file.
    pub diff: Option<DiagnosticDiff>,
    pub commands: Vec<CommandResult>,
}

impl Checked {
    /// Whether at least one check ran and every one that ran passed.
    pub fn passed(&self) -> bool {
        let ran = self.diff.is_some() || self.commands.iter().any(|c| !c.refused);
        ran && self.diff.as_ref().is_none_or(DiagnosticDiff::passed) && self.commands.iter().all(|c| c.check.passed)
    }

    /// Whether the model can act on what failed (a round of feedback helps).
    pub fn has_findings(&self) -> bool {
        self.diff.as_ref().is_some_and(|d| !d.passed()) || self.commands.iter().any(|c| !c.refused && !c.check.passed)
    }

    /// The record of this check after `rounds` rounds.
    pub fn record(&self, rounds: u32) -> Verification {
        Verification {
            verified: self.passed(),
            rounds,
            diagnostics: self.diff.as_ref().map(DiagnosticDiff::counts),
            commands: self.commands.iter().map(|c| c.check.clone()).collect(),
        }
    }

    /// The findings for the model (see [`findings`]).
    pub fn findings(&self) -> String {
        let failed: Vec<FailedCommand<'_>> = self
            .commands
            .iter()
            .filter(|c| !c.refused && !c.check.passed)
            .map(|c| FailedCommand { name: &c.check.name, text: &c.text })
            .collect();
        findings(self.diff.as_ref(), &failed)
    }
}

impl Checker<'_> {
    /// Checks `changes` (the overlay of `ctx` holds them): the diagnostics of
    /// each changed file a language server covers, before and after, then
    /// each verify command in the scratch copy.
    pub async fn check(&self, ctx: &ToolContext, changes: &[FileChange], target_problems: &[Diagnostic]) -> Checked {
        let diff = match self.symbols {
            Some(symbols) => diagnostics_diff(symbols, changes, &ctx.target, target_problems).await,
            None => None,
        };
        let mut commands = Vec::new();
        for name in self.names {
            commands.push(self.command(name, ctx).await);
        }
        Checked { diff, commands }
    }

    async fn command(&self, name: &str, ctx: &ToolContext) -> CommandResult {
        let refused = |text: String| CommandResult {
            check: CommandCheck { name: name.to_string(), passed: false, exit_code: None, secs: 0.0 },
            text,
            refused: true,
        };
        let Some(tool) = self.commands else {
            return refused(format!("`{name}` is not a configured command, or no one can approve it"));
        };
        match tool.run_named(name, ctx).await {
            Ok(run) => CommandResult {
                check: CommandCheck {
                    name: name.to_string(),
                    passed: run.passed(),
                    exit_code: run.exit_code,
                    secs: run.secs,
                },
                text: run.text,
                refused: false,
            },
            Err(ToolError::Respond(why) | ToolError::Fatal(why)) => refused(why),
        }
    }
}

/// The diagnostics of the changed files a language server covers, before
/// (the text the run read) and after (the proposal); `None` when it covers
/// none of them or none answered.
async fn diagnostics_diff(
    symbols: &dyn SymbolSource,
    changes: &[FileChange],
    target: &std::path::Path,
    target_problems: &[Diagnostic],
) -> Option<DiagnosticDiff> {
    let mut files = Vec::new();
    let mut target_file = String::new();
    for c in changes.iter().filter(|c| symbols.available(&c.path)) {
        // The proposal first: the server most likely holds it already (the
        // edit's feedback synced it), so only the text before costs a sync.
        let after = symbols.diagnostics(&c.path, &c.new_text).await;
        let before = match &c.original {
            Some(original) => symbols.diagnostics(&c.path, original).await,
            None => Ok(Vec::new()),
        };
        match (before, after) {
            (Ok(before), Ok(after)) => {
                if c.path == target {
                    target_file = c.display.clone();
                }
                files.push((c.display.clone(), before, after));
            }
            (Err(e), _) | (_, Err(e)) => tracing::info!("no diagnostics check of {}: {e}", c.display),
        }
    }
    (!files.is_empty()).then(|| compare(&files, &target_file, target_problems))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::position::LineCol;

    fn d(line: u32, severity: Option<Severity>, message: &str) -> Diagnostic {
        Diagnostic { at: LineCol::new(line, 0), severity, message: message.into(), ..Default::default() }
    }

    #[test]
    fn diagnostics_compare_by_message_whatever_the_lines_and_target_problems_come_first() {
        let e = Some(Severity::Error);
        let before = vec![d(3, e, "undefined name `x`"), d(9, e, "unused import"), d(9, Some(Severity::Hint), "hint")];
        // The edit moved `unused import` down a line, fixed `x`, added an error and a warning.
        let after = vec![
            d(10, e, "unused import"),
            d(4, e, "\"y\" is not defined"),
            d(5, Some(Severity::Warning), "shadowed"),
            d(1, Some(Severity::Information), "info"),
        ];
        let target = d(3, e, "undefined name `x`");
        let files = vec![("a.py".to_string(), before, after)];
        let diff = compare(&files, "a.py", std::slice::from_ref(&target));
        // The warning is neither counted nor failed on.
        assert_eq!(diff.counts(), DiagnosticCounts { fixed: 1, introduced: 1, remaining: 1 });
        assert!(diff.unfixed_targets.is_empty());
        assert!(!diff.passed(), "a new error fails");
        // A target problem still reported fails, even with nothing new.
        let still = vec![("a.py".to_string(), vec![target.clone()], vec![d(7, e, "undefined name `x`")])];
        let diff = compare(&still, "a.py", std::slice::from_ref(&target));
        assert_eq!((diff.remaining, diff.unfixed_targets.len(), diff.passed()), (1, 1, false));
        // Two equal errors before, one after: one fixed, one remaining.
        let twice = vec![("b.rs".to_string(), vec![d(1, e, "m"), d(2, e, "m")], vec![d(1, e, "m")])];
        assert_eq!(compare(&twice, "a.py", &[]).counts(), DiagnosticCounts { fixed: 1, introduced: 0, remaining: 1 });
    }

    fn check(name: &str, passed: bool, secs: f64) -> CommandCheck {
        CommandCheck { name: name.into(), passed, exit_code: Some(if passed { 0 } else { 1 }), secs }
    }

    #[test]
    fn the_line_says_what_passed_or_what_failed_in_the_issue_s_words() {
        let counts = DiagnosticCounts { fixed: 1, introduced: 0, remaining: 0 };
        let v = Verification {
            verified: true,
            rounds: 1,
            diagnostics: Some(counts),
            commands: vec![check("test", true, 4.1)],
        };
        assert_eq!(v.line().unwrap(), "verified: 1 fixed, 0 new; test passed (4.1 s)");
        let v =
            Verification { verified: false, rounds: 2, diagnostics: None, commands: vec![check("test", false, 2.0)] };
        assert_eq!(v.line().unwrap(), "not verified: test failed");
        let diff = DiagnosticDiff {
            introduced: vec![FileDiagnostic { file: "a.py".into(), diagnostic: d(1, None, "bad") }],
            ..DiagnosticDiff::default()
        };
        let v = Verification { verified: false, rounds: 2, diagnostics: Some(diff.counts()), commands: vec![] };
        assert_eq!(v.line().unwrap(), "not verified: 1 new error");
        let still = DiagnosticCounts { fixed: 0, introduced: 0, remaining: 1 };
        let v = Verification {
            verified: false,
            rounds: 2,
            diagnostics: Some(still),
            commands: vec![check("test", true, 1.0)],
        };
        assert_eq!(v.line().unwrap(), "not verified: the problem is still reported");
        let nothing = Verification { verified: false, rounds: 1, diagnostics: None, commands: vec![] };
        assert_eq!(nothing.line(), None, "nothing set up to check: no line");
    }

    #[test]
    fn findings_name_the_new_diagnostics_and_the_end_of_a_failing_output() {
        let diff = DiagnosticDiff {
            introduced: vec![FileDiagnostic {
                file: "src/a.rs".into(),
                diagnostic: d(4, Some(Severity::Error), "mismatched types"),
            }],
            unfixed_targets: vec![d(9, Some(Severity::Error), "E0308")],
            ..DiagnosticDiff::default()
        };
        let long: String = (0..2000).map(|i| format!("line {i}\n")).collect();
        let text = format!("{long}test result: FAILED. 1 passed; 1 failed\n[exit code 101]");
        let f = findings(Some(&diff), &[FailedCommand { name: "test", text: &text }]);
        assert!(f.contains("- src/a.rs line 5, column 1: error: mismatched types\n"), "{f}");
        assert!(f.contains("still reported:\n- line 10: E0308\n"), "{f}");
        assert!(f.contains("The command `test` failed") && f.ends_with("[exit code 101]\n```\n"), "{f}");
        assert!(!f.contains("line 0\n") && f.len() < 5000, "only the end of the output: {}", f.len());
    }

    /// Python files only; an error for each line with `bad` in it, the
    /// line as its message.
    fn lines() -> crate::tools::test_support::Reports {
        crate::tools::test_support::Reports::new(|text| {
            text.lines()
                .enumerate()
                .filter(|(_, l)| l.contains("bad"))
                .map(|(n, l)| d(n as u32, Some(Severity::Error), l.trim()))
                .collect()
        })
    }

    struct Yes;

    #[async_trait::async_trait]
    impl crate::tools::Approver for Yes {
        async fn approve(&self, _: &str, _: &[String]) -> crate::tools::Approval {
            crate::tools::Approval::Always
        }
    }

    fn test_command(script: &str) -> RunCommand {
        let spec = crate::tools::CommandSpec {
            argv: vec!["sh".into(), "-c".into(), script.into()],
            timeout: std::time::Duration::from_secs(30),
        };
        RunCommand::new([("test".to_string(), spec)].into(), std::sync::Arc::new(Yes))
            .with_sandbox(crate::sandbox::Sandbox::Off)
    }

    #[tokio::test]
    async fn a_check_runs_the_diagnostics_before_and_after_and_the_verify_commands_in_the_copy() {
        let (_d, ctx) =
            crate::tools::test_support::context(&[("a.py", "x = bad\ny = 1\n"), ("notes.txt", "bad\n")], &[]);
        let a = ctx.overlay.resolve("a.py").unwrap();
        let notes = ctx.overlay.resolve("notes.txt").unwrap();
        ctx.overlay.write(&a, "x = good\ny = 1\n".into()).unwrap();
        ctx.overlay.write(&notes, "still bad\n".into()).unwrap();
        let target = [d(0, Some(Severity::Error), "x = bad")];
        let command = test_command("grep -q good a.py");
        let names = vec!["test".to_string()];
        let checker = Checker { symbols: Some(&lines()), commands: Some(&command), names: &names };
        let checked = checker.check(&ctx, &ctx.overlay.changes(), &target).await;
        // notes.txt has no language server: only a.py is compared.
        assert_eq!(checked.diff.as_ref().unwrap().counts(), DiagnosticCounts { fixed: 1, introduced: 0, remaining: 0 });
        assert!(checked.commands[0].check.passed && checked.commands[0].check.exit_code == Some(0), "{checked:?}");
        assert!(checked.passed() && !checked.has_findings());
        let record = checked.record(1);
        assert_eq!(record.line().unwrap().split(" (").next(), Some("verified: 1 fixed, 0 new; test passed"));

        // A new error and a failing command: findings for the model.
        ctx.overlay.write(&a, "x = good\ny = bad call\n".into()).unwrap();
        let failing = test_command("echo 'assert failed' >&2; exit 3");
        let checker = Checker { symbols: Some(&lines()), commands: Some(&failing), names: &names };
        let checked = checker.check(&ctx, &ctx.overlay.changes(), &target).await;
        assert!(!checked.passed() && checked.has_findings());
        assert_eq!(checked.commands[0].check.exit_code, Some(3));
        let f = checked.findings();
        assert!(f.contains("- a.py line 2, column 1: error: y = bad call") && f.contains("assert failed"), "{f}");
        assert_eq!(checked.record(2).line().unwrap(), "not verified: 1 new error; test failed");

        // Nothing that can run (no server, an unknown command): not verified, and nothing to feed back.
        let names = vec!["lint".to_string()];
        let checker = Checker { symbols: None, commands: Some(&command), names: &names };
        let checked = checker.check(&ctx, &ctx.overlay.changes(), &target).await;
        assert!(!checked.passed() && !checked.has_findings() && checked.commands[0].refused, "{checked:?}");
    }
}
