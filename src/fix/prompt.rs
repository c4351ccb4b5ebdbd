//! What the model reads first: the system prompt (agentfix's rules, then the
//! project's instructions) and the first user message built from the target
//! (its problems whole — range and covered text, code link, related places
//! with their lines, notes, the language server's quick fixes, at most 4 KB
//! each —, the lines around it, the enclosing symbols).

use std::path::Path;

use tokio_util::sync::CancellationToken;

use super::Target;
use crate::config::Config;
use crate::diagnostic::Diagnostic;
use crate::downstream::{FixChange, QuickFix, Symbol, SymbolSource};
use crate::instructions::Instructions;
use crate::position::Span;
use crate::tools::{cap, details, shown_path, span_text, tags};
use crate::workspace::{Overlay, Workspace};

/// Lines of code shown around the target in the first message.
const CONTEXT_LINES: u32 = 30;

pub const SYSTEM_PROMPT: &str = "You are agentfix, a coding agent inside the user's code editor. \
You fix one problem in the user's workspace using the tools you are given.\n\
- The files you read are what the editor holds, unsaved changes included.\n\
- Your edits are never written to disk. They are collected into one proposal that the user reviews as a diff and accepts or rejects.\n\
- Read the code before you change it. Make the smallest correct change; keep the file's style; do not reformat unrelated code.\n\
- edit_file needs an old_text that occurs exactly once in the file; copy it exactly, without line-number prefixes.\n\
- When you are done, stop calling tools and answer with one short sentence that says what you changed and why.";

/// The system prompt of a run on `target`: [`SYSTEM_PROMPT`], then the
/// project's instructions that apply to it when `projectInstructions` is
/// on, with the API key scrubbed. Built once per run, before its first
/// request: every request of the run sends these same bytes (the cached
/// prefix), so nothing volatile goes in.
pub fn system_prompt(config: &Config, workspace: &Workspace, target: &Path) -> String {
    if !config.project_instructions {
        return SYSTEM_PROMPT.to_string();
    }
    match Instructions::find(workspace, Some(target)).section() {
        Some(section) => config.key_redactor().redact_exact(&format!("{SYSTEM_PROMPT}\n\n{section}")).into_owned(),
        None => SYSTEM_PROMPT.to_string(),
    }
}

/// How long the first message may wait for the target's outline (a
/// language server's cold start included).
const OUTLINE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

/// The enclosing symbols of 0-based `line`, outermost first, with the
/// innermost one's children: `class Calc (lines 3-40) > method div (lines 10-14)`.
pub fn enclosing_outline(symbols: &[Symbol], line: u32) -> Option<String> {
    let mut chain: Vec<&Symbol> = Vec::new();
    let mut level = symbols;
    while let Some(s) = level.iter().find(|s| s.lines.contains(line)) {
        chain.push(s);
        level = &s.children;
    }
    let fmt = |s: &Symbol| {
        let (first, last) = s.lines.numbers();
        format!("{} {} (lines {first}-{last})", s.kind, s.name)
    };
    let inner = chain.last()?;
    let mut out = chain.iter().map(|s| fmt(s)).collect::<Vec<_>>().join(" > ");
    for c in inner.children.iter().take(40) {
        out.push_str(&format!("\n  {}", fmt(c)));
    }
    Some(out)
}

/// The most one problem takes in the first message, its details, related
/// places and quick fixes included; past it the rest is cut, visibly.
pub const PROBLEM_BYTES: usize = 4096;
/// Problems whose quick fixes are asked for (a fix-all may name many).
const QUICK_FIX_PROBLEMS: usize = 10;
/// Characters of a covered range, a quick fix's text or a related line shown.
const SHOWN_CHARS: usize = 300;

/// The first user message of a run. Reading the target through the overlay
/// pins the buffer version the run works from. `fixes` are the quick fixes
/// the language server offers for each problem, in order (fewer lists than
/// problems: none for the rest).
pub fn task_prompt(target: &Target, overlay: &Overlay, outline: Option<&str>, fixes: &[Vec<QuickFix>]) -> String {
    let ws = overlay.workspace();
    let shown = ws.display(&target.path);
    let read = overlay.read(&target.path);
    let mut out = String::new();
    let (first, last) = target.lines.numbers();
    if target.problems.is_empty() {
        if first == last {
            out.push_str(&format!("The user asks for a fix at line {first} of `{shown}`.\n"));
        } else {
            out.push_str(&format!("The user selected lines {first}-{last} of `{shown}`.\n"));
        }
    } else {
        let what = if target.problems.len() == 1 { "this problem" } else { "these problems" };
        out.push_str(&format!("Fix {what} in `{shown}`:\n"));
        for (i, p) in target.problems.iter().enumerate() {
            let offered = fixes.get(i).map_or(&[][..], Vec::as_slice);
            out.push_str(&problem(p, &target.path, read.as_deref().ok().map(String::as_str), overlay, offered));
        }
    }
    if let Some(i) = target.instruction.as_deref().filter(|i| !i.trim().is_empty()) {
        out.push_str(&format!("\nThe user's instruction: {}\n", i.trim()));
    }
    match read {
        Ok(text) => {
            // Counted, then the context taken: no index of every line (the
            // buffer may be large).
            let count = text.lines().count();
            // Lines come from the wire: a range past the end shows the end.
            let first = (first as usize).clamp(1, count.max(1));
            let last = (last as usize).clamp(first, count.max(1));
            let from = first.saturating_sub(CONTEXT_LINES as usize).max(1);
            let to = last.saturating_add(CONTEXT_LINES as usize).min(count);
            if from <= to {
                out.push_str(&format!(
                    "\nLines {from}-{to} of `{shown}` ({count} lines in all), as the editor holds it now:\n"
                ));
                for (n, line) in (from..=to).zip(text.lines().skip(from - 1)) {
                    out.push_str(&format!("{n:>6}\t{line}\n"));
                }
            } else {
                out.push_str(&format!("\n`{shown}` is empty.\n"));
            }
        }
        Err(e) => out.push_str(&format!("\n(The file could not be read: {e}.)\n")),
    }
    if let Some(outline) = outline {
        out.push_str(&format!("\nEnclosing symbols, from the language server:\n{outline}\n"));
    }
    // Paths relative to the root, never the absolute root: code the model
    // writes must not learn where the user's real files are.
    out.push_str("\nTool paths are relative to the workspace root.");
    out
}

/// One problem of the first message: `- line L, column C: severity:
/// message [source code]`, then, indented, its range (`L:C-L:C`, 1-based,
/// columns in characters, the end exclusive) with the text it covers in
/// `text` (the target's), its details as the tools show them too
/// (`tools::details`: its code's link, its related places with their line
/// in the run's view, its notes), and the quick fixes offered for it. At
/// most [`PROBLEM_BYTES`].
fn problem(p: &Diagnostic, target: &Path, text: Option<&str>, overlay: &Overlay, fixes: &[QuickFix]) -> String {
    let sev = p.severity.map_or("problem", |s| s.name());
    let mut out =
        format!("- line {}, column {}: {sev}: {}{}\n", p.at.line_number(), p.at.column_number(), p.message, tags(p));
    if let Some(span) = p.span() {
        let range = span_text(span);
        match text.map(|t| covered(t, span)).filter(|c| !c.is_empty()) {
            Some(c) if !c.contains('\n') => out.push_str(&format!("  range {range} covers `{}`\n", clip(&c))),
            Some(c) => {
                out.push_str(&format!("  range {range} covers:\n"));
                for l in clip(&c).lines() {
                    out.push_str(&format!("    | {l}\n"));
                }
            }
            None => out.push_str(&format!("  range {range}\n")),
        }
    }
    out.push_str(&details(p, overlay, SHOWN_CHARS, PROBLEM_BYTES));
    if !fixes.is_empty() {
        out.push_str("  quick fixes the language server offers for it (none is applied; make your own edit):\n");
        for f in fixes {
            out.push_str(&format!("  - {}\n", quick_fix(f, overlay, target, text)));
        }
    }
    cap(out, PROBLEM_BYTES, "problem")
}

/// The text `span` (lines as `str::lines` counts them, columns in
/// characters, clamped to the text) covers.
fn covered(text: &str, span: Span) -> String {
    let mut out = String::new();
    for (n, line) in text.lines().enumerate().skip(span.start.line as usize) {
        let n = n as u32;
        if n > span.end.line {
            break;
        }
        let from = if n == span.start.line { span.start.column as usize } else { 0 };
        let to = if n == span.end.line { span.end.column as usize } else { usize::MAX };
        if n > span.start.line {
            out.push('\n');
        }
        out.extend(line.chars().skip(from).take(to.saturating_sub(from)));
    }
    out
}

/// At most [`SHOWN_CHARS`] of `s`, marked when cut.
fn clip(s: &str) -> String {
    crate::tools::shortened(s, SHOWN_CHARS)
}

/// `"title" (preferred): in `a.py`: replace 3:5-3:9 (`old`) with `new`` —
/// the edit as text, per file, or what the action has instead.
/// `text` is the target's, at `target`: its old text is shown.
fn quick_fix(f: &QuickFix, overlay: &Overlay, target: &Path, text: Option<&str>) -> String {
    let mut out = format!("\"{}\"", f.title.replace('\n', " "));
    if f.preferred {
        out.push_str(" (preferred)");
    }
    let mut parts: Vec<String> = Vec::new();
    let mut file: Option<String> = None;
    let mut hidden = 0;
    for c in &f.changes {
        let (path, what) = match c {
            FixChange::Edit { path, span, text: new } => {
                let old = text.filter(|_| path == target).map(|t| covered(t, *span));
                let old = old.filter(|o| !o.is_empty()).map(|o| format!(" (`{}`)", escaped(&o))).unwrap_or_default();
                let what = if span.start == span.end {
                    format!("insert `{}` at {}:{}", escaped(new), span.start.line_number(), span.start.column_number())
                } else if new.is_empty() {
                    format!("delete {}{old}", span_text(*span))
                } else {
                    format!("replace {}{old} with `{}`", span_text(*span), escaped(new))
                };
                (path, what)
            }
            FixChange::Create(path) => (path, "create the file".to_string()),
            FixChange::Delete(path) => (path, "delete the file".to_string()),
            FixChange::Rename { from, to } => match shown_path(overlay, to) {
                Some(to) => (from, format!("rename the file to `{to}`")),
                None => {
                    hidden += 1;
                    continue;
                }
            },
        };
        let Some(shown) = shown_path(overlay, path) else {
            hidden += 1;
            continue;
        };
        if file.as_deref() == Some(shown.as_str()) {
            parts.push(what);
        } else {
            parts.push(format!("in `{shown}`: {what}"));
            file = Some(shown);
        }
    }
    match (parts.is_empty(), f.command) {
        (true, true) => out.push_str(": runs a command on the language server; it has no edit to show"),
        (true, false) if hidden == 0 => out.push_str(": it has no edit to show"),
        (true, false) => {}
        (false, command) => {
            out.push_str(": ");
            out.push_str(&parts.join("; "));
            if command {
                out.push_str("; and runs a command on the language server");
            }
        }
    }
    if hidden > 0 {
        out.push_str(&format!(" ({hidden} change(s) of protected files left out)"));
    }
    out
}

/// `s` in one line: newlines, returns and tabs as `\n`, `\r`, `\t`; at
/// most [`SHOWN_CHARS`].
fn escaped(s: &str) -> String {
    clip(&s.replace('\\', "\\\\").replace('\n', "\\n").replace('\r', "\\r").replace('\t', "\\t"))
}

/// What the first message takes from the language server: the target's
/// outline and the quick fixes for its problems (none for a follow-up,
/// whose first message is its report), asked together: both wait on the
/// same server (its start, its analysis).
pub(super) async fn first_context(
    symbols: Option<&dyn SymbolSource>,
    overlay: &Overlay,
    request: &super::Request,
    cancel: &CancellationToken,
) -> (Option<String>, Vec<Vec<QuickFix>>) {
    let target = &request.target;
    let fixes = async {
        match request.follow_up {
            None => quick_fixes(symbols, overlay, target, cancel).await,
            Some(_) => Vec::new(),
        }
    };
    tokio::join!(outline(symbols, overlay, target, cancel), fixes)
}

/// The quick fixes the language server offers for the first problems of
/// the target, for the first message, if it answers in time: one list per
/// problem, in order (empty without a server or an answer).
async fn quick_fixes(
    symbols: Option<&dyn SymbolSource>,
    overlay: &Overlay,
    target: &Target,
    cancel: &CancellationToken,
) -> Vec<Vec<QuickFix>> {
    let (Some(s), Ok(text)) = (symbols, overlay.read(&target.path)) else { return Vec::new() };
    let spans: Vec<Span> =
        target.problems.iter().take(QUICK_FIX_PROBLEMS).map(|p| p.span().unwrap_or(Span::new(p.at, p.at))).collect();
    if spans.is_empty() {
        return Vec::new();
    }
    tokio::select! {
        _ = cancel.cancelled() => Vec::new(),
        r = tokio::time::timeout(OUTLINE_TIMEOUT, s.quick_fixes(&target.path, &text, &spans)) => match r {
            Ok(Ok(fixes)) => fixes,
            Ok(Err(e)) => {
                tracing::info!("no quick fixes for the first message: {e}");
                Vec::new()
            }
            Err(_) => Vec::new(),
        },
    }
}

/// The enclosing symbols of the target's line for the first message, from
/// the language server, if it answers in time.
async fn outline(
    symbols: Option<&dyn SymbolSource>,
    overlay: &Overlay,
    target: &Target,
    cancel: &CancellationToken,
) -> Option<String> {
    let (Some(s), Ok(text)) = (symbols, overlay.read(&target.path)) else { return None };
    tokio::select! {
        _ = cancel.cancelled() => None,
        r = tokio::time::timeout(OUTLINE_TIMEOUT, s.document_symbols(&target.path, &text)) => match r {
            Ok(Ok(syms)) => enclosing_outline(&syms, target.lines.first),
            Ok(Err(e)) => {
                tracing::info!("no outline for the first message: {e}");
                None
            }
            Err(_) => None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnostic::Diagnostic;
    use crate::position::LineRange;
    use crate::tools::test_support::context;
    #[test]
    fn prompt_carries_problem_instruction_and_numbered_context() {
        let text: String = (1..=100).map(|i| format!("line {i}\n")).collect();
        let (_d, ctx) = context(&[], &[("calc.py", &text, 9)]);
        let target = Target {
            path: ctx.overlay.resolve("calc.py").unwrap(),
            lines: LineRange::line(49),
            problems: vec![Diagnostic {
                at: crate::position::LineCol::new(49, 2),
                severity: Some(crate::diagnostic::Severity::Error),
                source: Some("pyright".into()),
                code: Some("reportX".into()),
                message: "bad thing".into(),
                ..Default::default()
            }],
            instruction: Some(" be brief ".into()),
        };
        let p = task_prompt(&target, &ctx.overlay, Some("class Calc (lines 1-100)"), &[]);
        assert!(
            p.starts_with("Fix this problem in `calc.py`:\n- line 50, column 3: error: bad thing [pyright reportX]\n"),
            "{p}"
        );
        assert!(p.contains("\nThe user's instruction: be brief\n"));
        assert!(p.contains("Lines 20-80 of `calc.py` (100 lines in all)"));
        assert!(p.contains("    20\tline 20\n") && p.contains("    80\tline 80\n") && !p.contains("line 81\n"));
        assert!(p.contains("\nEnclosing symbols, from the language server:\nclass Calc (lines 1-100)\n"));
        // Files are named relative to the root; the absolute root is never sent.
        let root = ctx.overlay.workspace().primary_root().to_string_lossy().into_owned();
        assert!(!p.contains(&root), "{p}");
        assert!(p.ends_with("Tool paths are relative to the workspace root."), "{p}");
        // The read pinned the buffer version for the final edit.
        let path = target.path.clone();
        ctx.overlay.write(&path, "changed\n".into()).unwrap();
        assert_eq!(ctx.overlay.changes()[0].version, Some(9));
    }

    #[test]
    fn the_enclosing_outline_follows_the_line() {
        let sym = |name: &str, kind, s, e, children| Symbol {
            name: name.into(),
            kind,
            lines: LineRange::new(s, e),
            children,
        };
        let outline = vec![
            sym("helper", "function", 0, 2, vec![]),
            sym("Calc", "class", 4, 20, vec![sym("add", "method", 5, 7, vec![]), sym("div", "method", 9, 12, vec![])]),
        ];
        assert_eq!(enclosing_outline(&outline, 10).unwrap(), "class Calc (lines 5-21) > method div (lines 10-13)");
        assert_eq!(
            enclosing_outline(&outline, 4).unwrap(),
            "class Calc (lines 5-21)\n  method add (lines 6-8)\n  method div (lines 10-13)"
        );
        assert_eq!(enclosing_outline(&outline, 3), None);
    }

    #[test]
    fn a_range_at_the_last_u32_line_shows_the_end_of_the_file() {
        let text: String = (1..=50).map(|i| format!("line {i}\n")).collect();
        let (_d, ctx) = context(&[("a.py", &text)], &[]);
        let t = Target {
            path: ctx.overlay.resolve("a.py").unwrap(),
            lines: LineRange::line(u32::MAX),
            problems: vec![],
            instruction: None,
        };
        let p = task_prompt(&t, &ctx.overlay, None, &[]);
        assert!(!p.contains("is empty"), "{p}");
        assert!(p.contains("Lines 20-50 of `a.py` (50 lines in all)"), "{p}");
        let outline =
            vec![Symbol { name: "f".into(), kind: "function", lines: LineRange::new(0, u32::MAX), children: vec![] }];
        assert_eq!(enclosing_outline(&outline, 2).unwrap(), "function f (lines 1-4294967296)");
    }

    #[test]
    fn prompt_without_problems_names_the_lines() {
        let (_d, ctx) = context(&[("a.py", "")], &[]);
        let t = Target {
            path: ctx.overlay.resolve("a.py").unwrap(),
            lines: LineRange::new(2, 6),
            problems: vec![],
            instruction: None,
        };
        let p = task_prompt(&t, &ctx.overlay, None, &[]);
        assert!(p.starts_with("The user selected lines 3-7 of `a.py`.\n"), "{p}");
        assert!(p.contains("`a.py` is empty."));
    }

    use crate::diagnostic::{Related, Severity};
    use crate::position::LineCol;

    /// A problem of `target` with `extra` set.
    fn problem_at(line: u32, from: u32, to: (u32, u32), message: &str) -> Diagnostic {
        Diagnostic {
            at: LineCol::new(line, from),
            end: Some(LineCol::new(to.0, to.1)),
            severity: Some(Severity::Error),
            source: Some("fake".into()),
            code: Some("E1".into()),
            message: message.into(),
            ..Default::default()
        }
    }

    fn target_of(ctx: &crate::tools::ToolContext, path: &str, problems: Vec<Diagnostic>) -> Target {
        Target {
            path: ctx.overlay.resolve(path).unwrap(),
            lines: LineRange::line(problems.first().map_or(0, |p| p.at.line)),
            problems,
            instruction: None,
        }
    }

    #[test]
    fn a_problem_shows_its_range_in_characters_and_the_text_it_covers() {
        // CJK and an emoji (two UTF-16 units, four bytes) before the range,
        // CRLF line ends: the columns count characters, the `\r` is no text.
        let text = "a = 1\r\nname = \"漢字😀\" + undefined_thing\r\nz = 2\r\n";
        let (_d, ctx) = context(&[("m.py", text)], &[]);
        let mut p = problem_at(1, 15, (1, 30), "undefined name");
        p.code_link = Some("https://example.com/rules/E1".into());
        let prompt = task_prompt(&target_of(&ctx, "m.py", vec![p]), &ctx.overlay, None, &[]);
        assert!(
            prompt.starts_with(
                "Fix this problem in `m.py`:\n- line 2, column 16: error: undefined name [fake E1]\n  \
                 range 2:16-2:31 covers `undefined_thing`\n  E1 is documented at https://example.com/rules/E1\n\n"
            ),
            "{prompt}"
        );
        // Over lines: each line of what it covers, the last to the end column.
        let p = problem_at(0, 4, (1, 8), "spans lines");
        let prompt = task_prompt(&target_of(&ctx, "m.py", vec![p]), &ctx.overlay, None, &[]);
        assert!(prompt.contains("  range 1:5-2:9 covers:\n    | 1\n    | name = \"\n"), "{prompt}");
        // An empty range covers nothing; a problem with a start only has no range.
        let empty = problem_at(2, 1, (2, 1), "here");
        let start_only = Diagnostic { end: None, ..problem_at(2, 0, (0, 0), "start only") };
        let prompt = task_prompt(&target_of(&ctx, "m.py", vec![empty, start_only]), &ctx.overlay, None, &[]);
        assert!(
            prompt.contains(
                "- line 3, column 2: error: here [fake E1]\n  range 3:2-3:2\n- line 3, column 1: error: start only [fake E1]\n\n"
            ),
            "{prompt}"
        );
    }

    #[test]
    fn related_places_show_their_line_as_the_run_sees_it() {
        // `lib.py` is open with unsaved text: its line comes from the
        // buffer, not the disk; protected files are not even named.
        let (_d, ctx) = context(
            &[("m.py", "x = helper(1)\n"), ("lib.py", "def helper():\n    pass\n"), (".env", "KEY=1\n")],
            &[("lib.py", "def helper(n: int):  # unsaved\n    pass\n", 3)],
        );
        let root = ctx.overlay.workspace().primary_root().to_path_buf();
        let mut p = problem_at(0, 4, (0, 13), "wrong arguments");
        p.related = vec![
            Related { path: root.join("lib.py"), line: 0, message: "helper is defined here".into() },
            Related { path: root.join(".env"), line: 0, message: "secret place".into() },
            Related { path: "/elsewhere/std.py".into(), line: 9, message: "outside\nthe workspace".into() },
        ];
        p.notes = vec!["help: pass an int".into()];
        let prompt = task_prompt(&target_of(&ctx, "m.py", vec![p]), &ctx.overlay, None, &[]);
        assert!(
            prompt.contains(
                "  range 1:5-1:14 covers `helper(1)`\n  related: lib.py:1: helper is defined here\n    | def helper(n: int):  # unsaved\n  \
                 related: /elsewhere/std.py:10: outside the workspace\n  (1 related place(s) in protected files left out)\n  help: pass an int\n"
            ),
            "{prompt}"
        );
        assert!(!prompt.contains(".env") && !prompt.contains("KEY"), "{prompt}");
    }

    #[test]
    fn quick_fixes_show_their_edits_as_text_and_commands_as_titles() {
        let (_d, ctx) = context(&[("m.py", "value = ERROR\n"), ("other.py", ""), (".env", "")], &[]);
        let root = ctx.overlay.workspace().primary_root().to_path_buf();
        let m = root.join("m.py");
        let span = |l1, c1, l2, c2| Span::new(LineCol::new(l1, c1), LineCol::new(l2, c2));
        let fixes = vec![vec![
            QuickFix {
                title: "Replace with `0`".into(),
                preferred: true,
                changes: vec![
                    FixChange::Edit { path: m.clone(), span: span(0, 8, 0, 13), text: "0".into() },
                    FixChange::Edit { path: m.clone(), span: span(0, 0, 0, 0), text: "import os\n".into() },
                    FixChange::Edit { path: root.join("other.py"), span: span(2, 0, 3, 0), text: String::new() },
                    FixChange::Edit { path: root.join(".env"), span: span(0, 0, 0, 0), text: "X=1".into() },
                ],
                command: false,
            },
            QuickFix { title: "Ignore E1 for this line".into(), preferred: false, changes: vec![], command: true },
            QuickFix { title: "Nothing".into(), preferred: false, changes: vec![], command: false },
            QuickFix {
                title: "Move".into(),
                preferred: false,
                changes: vec![FixChange::Rename { from: m.clone(), to: root.join("n.py") }],
                command: true,
            },
        ]];
        let p = problem_at(0, 8, (0, 13), "ERROR is not allowed here");
        let prompt = task_prompt(&target_of(&ctx, "m.py", vec![p]), &ctx.overlay, None, &fixes);
        let expected = "  quick fixes the language server offers for it (none is applied; make your own edit):\n  \
            - \"Replace with `0`\" (preferred): in `m.py`: replace 1:9-1:14 (`ERROR`) with `0`; insert `import os\\n` at 1:1; \
            in `other.py`: delete 3:1-4:1 (1 change(s) of protected files left out)\n  \
            - \"Ignore E1 for this line\": runs a command on the language server; it has no edit to show\n  \
            - \"Nothing\": it has no edit to show\n  \
            - \"Move\": in `m.py`: rename the file to `n.py`; and runs a command on the language server\n\n";
        assert!(prompt.contains(expected), "{prompt}");
        // Nothing is applied: the files are as they were.
        assert_eq!(ctx.overlay.read(&m).unwrap().as_str(), "value = ERROR\n");
        assert!(ctx.overlay.changes().is_empty());
    }

    #[test]
    fn a_problem_is_cut_at_4_kb_visibly() {
        const CUT: &str = "  [… the rest of this problem is cut: over 4 KB]\n";
        assert_eq!(crate::tools::cut_marker(PROBLEM_BYTES, "problem"), CUT);
        let (_d, ctx) = context(&[("m.py", "x = 1\n")], &[]);
        let root = ctx.overlay.workspace().primary_root().to_path_buf();
        let mut p = problem_at(0, 0, (0, 1), "m");
        p.related = (0..200)
            .map(|i| Related { path: root.join("m.py"), line: 0, message: format!("related place number {i}") })
            .collect();
        let one = problem(&p, &root.join("m.py"), Some("x = 1\n"), &ctx.overlay, &[]);
        assert!(one.len() <= PROBLEM_BYTES, "{}", one.len());
        assert!(one.ends_with("related place number 0\n    | x = 1\n") || one.ends_with(CUT), "{one}");
        assert!(one.ends_with(CUT) && one.len() > PROBLEM_BYTES - 200, "{one}");
        // A message alone over the cap, with multi-byte text, is cut inside it.
        let long = Diagnostic { message: "漢".repeat(3000), ..problem_at(0, 0, (0, 1), "") };
        let one = problem(&long, &root.join("m.py"), Some("x = 1\n"), &ctx.overlay, &[]);
        assert!(one.len() <= PROBLEM_BYTES && one.ends_with(CUT), "{}", one.len());
        // Each problem has its own 4 KB: the second is whole.
        let prompt = task_prompt(
            &target_of(&ctx, "m.py", vec![p.clone(), problem_at(0, 0, (0, 1), "second")]),
            &ctx.overlay,
            None,
            &[],
        );
        assert!(prompt.contains(&format!("{CUT}- line 1, column 1: error: second [fake E1]\n")), "{prompt}");
    }
}
