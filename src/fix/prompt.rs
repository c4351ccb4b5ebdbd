//! What the model reads first: the system prompt (agentfix's rules, then the
//! project's instructions) and the first user message built from the target
//! (its problems, the lines around it, the enclosing symbols).

use std::path::Path;

use tokio_util::sync::CancellationToken;

use super::Target;
use crate::config::Config;
use crate::downstream::{Symbol, SymbolSource};
use crate::instructions::Instructions;
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

/// The first user message of a run. Reading the target through the overlay
/// pins the buffer version the run works from.
pub fn task_prompt(target: &Target, overlay: &Overlay, outline: Option<&str>) -> String {
    let ws = overlay.workspace();
    let shown = ws.display(&target.path);
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
        for p in &target.problems {
            let mut tags = Vec::new();
            if let Some(s) = &p.source {
                tags.push(s.clone());
            }
            if let Some(c) = &p.code {
                tags.push(c.clone());
            }
            let tags = if tags.is_empty() { String::new() } else { format!(" [{}]", tags.join(" ")) };
            let sev = p.severity.map_or("problem", |s| s.name());
            out.push_str(&format!(
                "- line {}, column {}: {sev}: {}{tags}\n",
                p.at.line_number(),
                p.at.column_number(),
                p.message
            ));
        }
    }
    if let Some(i) = target.instruction.as_deref().filter(|i| !i.trim().is_empty()) {
        out.push_str(&format!("\nThe user's instruction: {}\n", i.trim()));
    }
    match overlay.read(&target.path) {
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

/// The enclosing symbols of the target's line for the first message, from
/// the language server, if it answers in time.
pub(super) async fn outline(
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
            }],
            instruction: Some(" be brief ".into()),
        };
        let p = task_prompt(&target, &ctx.overlay, Some("class Calc (lines 1-100)"));
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
        let p = task_prompt(&t, &ctx.overlay, None);
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
        let p = task_prompt(&t, &ctx.overlay, None);
        assert!(p.starts_with("The user selected lines 3-7 of `a.py`.\n"), "{p}");
        assert!(p.contains("`a.py` is empty."));
    }
}
