//! `diagnostics`: the current errors and warnings of the run's view of the
//! files, from the language servers, merged with those the editor sent with
//! the code action, each whole (`diagnostic_text::render`: range, link,
//! related places, notes; at most 1 KB each).

use std::collections::BTreeSet;
use std::path::PathBuf;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::diagnostic_text::render;
use super::{Tool, ToolContext, ToolError};
use crate::diagnostic::Diagnostic;

/// Diagnostics shown at most.
const MAX_DIAGNOSTICS: usize = 200;

/// Input of `diagnostics`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct DiagnosticsInput {
    /// A file, relative to the workspace root (default: the file being fixed and every file you changed).
    #[serde(default)]
    pub path: Option<String>,
}

pub struct Diagnostics;

#[async_trait]
impl Tool for Diagnostics {
    type Input = DiagnosticsInput;
    const NAME: &'static str = "diagnostics";
    const DESCRIPTION: &'static str = "Current errors and warnings from the language servers for your view of the files (your edits included), plus those the editor reported. Use it to check your changes.";

    async fn run(&self, input: DiagnosticsInput, ctx: &ToolContext) -> Result<String, ToolError> {
        let files: Vec<PathBuf> = match &input.path {
            Some(p) => vec![ctx.overlay.resolve(p)?],
            None => {
                let mut set: BTreeSet<PathBuf> = ctx.overlay.changes().into_iter().map(|c| c.path).collect();
                set.insert(ctx.target.clone());
                set.into_iter().collect()
            }
        };
        let ws = ctx.overlay.workspace();
        let mut all: Vec<(String, Diagnostic)> = Vec::new();
        let mut notes = Vec::new();
        for file in files {
            let shown = ws.display(&file);
            let text = ctx.overlay.read(&file)?;
            let mut found: Vec<Diagnostic> = Vec::new();
            match &ctx.symbols {
                Some(s) => match s.diagnostics(&file, &text).await {
                    Ok(d) => found.extend(d),
                    Err(e) => notes.push(format!("{shown}: {e}")),
                },
                None => notes.push(format!("{shown}: no language server in this session")),
            }
            // The editor's own diagnostics, for the file being fixed, as of the code action.
            if file == ctx.target {
                for p in &ctx.editor_diagnostics {
                    if !found.iter().any(|d| d.at.line == p.at.line && d.message == p.message) {
                        found.push(p.clone());
                    }
                }
            }
            found.sort_by_key(|d| d.at);
            all.extend(found.into_iter().map(|d| (shown.clone(), d)));
        }
        let mut out = if all.is_empty() { "No diagnostics.\n".to_string() } else { String::new() };
        let total = all.len();
        // Rendered only as far as shown: related places read files.
        for (shown, d) in all.iter().take(MAX_DIAGNOSTICS) {
            out.push_str(&render(shown, d, &ctx.overlay));
        }
        if total > MAX_DIAGNOSTICS {
            out.push_str(&format!("[{MAX_DIAGNOSTICS} of {total} diagnostics shown]\n"));
        }
        for n in notes {
            out.push_str(&format!("({n})\n"));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::diagnostic::{Related, Severity};
    use crate::position::LineCol;
    use crate::tools::diagnostic_text::{DIAGNOSTIC_BYTES, cut_marker};
    use crate::tools::test_support::{Reports, context};

    /// An error of `fake` with code `E1` from `at` to `end` (0-based).
    fn error(at: (u32, u32), end: Option<(u32, u32)>, message: &str) -> Diagnostic {
        Diagnostic {
            at: LineCol::new(at.0, at.1),
            end: end.map(|(l, c)| LineCol::new(l, c)),
            severity: Some(Severity::Error),
            message: message.into(),
            source: Some("fake".into()),
            code: Some("E1".into()),
            ..Default::default()
        }
    }

    async fn run(ctx: &ToolContext, reports: Vec<(&'static str, Diagnostic)>) -> String {
        let ctx = ToolContext { symbols: Some(Arc::new(Reports::by_marker(reports))), ..ctx.clone() };
        Diagnostics.run(DiagnosticsInput { path: None }, &ctx).await.unwrap()
    }

    #[tokio::test]
    async fn each_diagnostic_comes_whole_with_character_columns() {
        // CJK and an emoji (two UTF-16 units, four bytes) before the range:
        // the columns the model reads count characters. `lib.py` is open
        // with unsaved text: its related line comes from the buffer.
        let (_d, ctx) = context(
            &[("m.py", "a = 1\nname = \"漢字😀\" + undefined_thing\n"), ("lib.py", "old\n"), (".env", "KEY=1\n")],
            &[("lib.py", "def 漢字😀(n):  # unsaved\n", 3)],
        );
        let root = ctx.overlay.workspace().primary_root().to_path_buf();
        let mut whole = error((1, 15), Some((1, 30)), "undefined name\n`undefined_thing`");
        whole.code_link = Some("https://fake.example/rules/E1".into());
        whole.related = vec![
            Related { path: root.join("lib.py"), line: 0, message: "漢字😀 is defined here".into() },
            Related { path: root.join(".env"), line: 0, message: "secret place".into() },
            Related { path: "/elsewhere/std.py".into(), line: 9, message: "outside".into() },
        ];
        whole.notes = vec!["help: define it\nabove its use".into()];
        let plain = Diagnostic { severity: Some(Severity::Warning), ..error((0, 4), None, "a plain one") };
        let out = run(&ctx, vec![("undefined_thing", whole), ("a = 1", plain)]).await;
        assert_eq!(
            out,
            "m.py:1:5: warning: a plain one [fake E1]\n\
             m.py:2:16-2:31: error: undefined name `undefined_thing` [fake E1]\n  \
             E1 is documented at https://fake.example/rules/E1\n  \
             related: lib.py:1: 漢字😀 is defined here\n    | def 漢字😀(n):  # unsaved\n  \
             related: /elsewhere/std.py:10: outside\n  \
             (1 related place(s) in protected files left out)\n  \
             help: define it\n    above its use\n"
        );
        assert!(!out.contains(".env") && !out.contains("KEY"), "{out}");
    }

    #[tokio::test]
    async fn a_diagnostic_is_cut_at_1_kb_visibly() {
        let (_d, ctx) = context(&[("m.py", "x = 1\n")], &[]);
        let root = ctx.overlay.workspace().primary_root().to_path_buf();
        let cut = cut_marker(DIAGNOSTIC_BYTES, "diagnostic");
        assert_eq!(cut, "  [… the rest of this diagnostic is cut: over 1 KB]\n");
        // Many related places: cut at a line's end.
        let mut many = error((0, 0), Some((0, 1)), "many places");
        many.related = (0..100)
            .map(|i| Related { path: root.join("m.py"), line: 0, message: format!("related place number {i}") })
            .collect();
        // One long note in one line (ASCII): cut inside it.
        let mut long_note = error((0, 0), Some((0, 1)), "long note");
        long_note.notes = vec!["n".repeat(3000)];
        // A message of multi-byte characters: clipped, then cut inside it.
        let cjk = error((0, 0), Some((0, 1)), &"漢".repeat(3000));
        let out = run(&ctx, vec![("x", many), ("x", long_note), ("x", cjk)]).await;
        let shown: Vec<&str> = out.split_inclusive(cut.as_str()).collect();
        assert_eq!(shown.len(), 3, "{out}");
        for one in &shown {
            assert!(one.len() <= DIAGNOSTIC_BYTES && one.len() > DIAGNOSTIC_BYTES - 200, "{}: {one}", one.len());
        }
        assert!(shown[0].starts_with("m.py:1:1-1:2: error: many places [fake E1]\n  related: m.py:1:"), "{out}");
        // Whole lines before the cut, unless a line alone is too long.
        let last_line = |one: &str| one.strip_suffix(cut.as_str()).unwrap().lines().last().unwrap().to_string();
        let last = last_line(shown[0]);
        assert!(last == "    | x = 1" || last.starts_with("  related: m.py:1: related place number"), "{}", shown[0]);
        assert!(last_line(shown[1]).starts_with("  nnn"), "{}", shown[1]);
        assert!(last_line(shown[2]).starts_with("m.py:1:1-1:2: error: 漢漢"), "{}", shown[2]);
    }
}
