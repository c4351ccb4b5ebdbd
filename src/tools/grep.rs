//! `grep`: a regular-expression search over the workspace with ripgrep's
//! engine, open buffers and the run's edits winning over the disk.

use std::collections::HashSet;

use async_trait::async_trait;
use grep_regex::RegexMatcherBuilder;
use grep_searcher::{BinaryDetection, SearcherBuilder, sinks::UTF8};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Tool, ToolContext, ToolError, clip, files_under};

/// At most this many matching lines per call.
pub const MAX_MATCHES: usize = 200;
/// Files searched per call at most.
const MAX_FILES: usize = 20_000;

/// [`MAX_FILES`], smaller in unit tests so that cutting is cheap to test.
fn max_files() -> usize {
    if cfg!(test) { 50 } else { MAX_FILES }
}

/// Input of `grep`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct GrepInput {
    /// Regular expression (Rust regex syntax, like ripgrep), e.g. `def \w+\(` or `TODO`.
    pub pattern: String,
    /// File or directory to search, relative to the workspace root (default: the whole workspace).
    #[serde(default)]
    pub path: Option<String>,
    /// Only search files whose name or relative path matches this glob, e.g. `*.py`.
    #[serde(default)]
    pub include: Option<String>,
}

pub struct Grep;

#[async_trait]
impl Tool for Grep {
    type Input = GrepInput;
    const NAME: &'static str = "grep";
    const DESCRIPTION: &'static str = "Search file contents with a regular expression, skipping files ignored by \
        .gitignore. Prints `path:line: text` for each matching line (at most 200), searching the editor's unsaved \
        text and your own edits where they exist.";
    const MORE: &'static str = "narrow the search with path, include or a more specific pattern";
    const FILE_SYSTEM: bool = true;

    async fn run(&self, input: GrepInput, ctx: &ToolContext) -> Result<String, ToolError> {
        let ws = ctx.overlay.workspace();
        let matcher = RegexMatcherBuilder::new()
            .build(&input.pattern)
            .map_err(|e| ToolError::Respond(format!("invalid regular expression `{}`: {e}", input.pattern)))?;
        let include = match input.include.as_deref().filter(|p| !p.is_empty()) {
            None => None,
            Some(p) => Some(super::glob(p)?),
        };
        let target = match input.path.as_deref() {
            Some(p) if !p.trim().is_empty() && p.trim() != "." => ctx.overlay.resolve(p)?,
            _ => ws.primary_root().to_path_buf(),
        };
        let (files, cut) = if target.is_file() || ctx.overlay.exists(&target) {
            (vec![target.clone()], false)
        } else {
            files_under(ctx, &target, max_files())
        };
        let cut_note = if cut {
            format!(
                "[the search stopped after {} files without reaching the end of `{}`; narrow it with path or include]\n",
                files.len(),
                ws.display(&target)
            )
        } else {
            String::new()
        };
        let in_memory: HashSet<_> = ctx
            .overlay
            .buffers()
            .open_paths()
            .into_iter()
            .chain(ctx.overlay.touched().into_iter().map(|(p, _)| p))
            .collect();
        let mut searcher = SearcherBuilder::new().binary_detection(BinaryDetection::quit(0)).line_number(true).build();
        let mut out = String::new();
        let mut count = 0;
        let mut more = false;
        for file in files {
            let rel = ws.display(&file);
            if let Some(g) = &include {
                let name = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                if !g.is_match(&name) && !g.is_match(&rel) {
                    continue;
                }
            }
            let mut sink = UTF8(|line_no, line| {
                if count == MAX_MATCHES {
                    more = true;
                    return Ok(false);
                }
                count += 1;
                out.push_str(&format!("{rel}:{line_no}: {}\n", clip(line.trim_end_matches(['\n', '\r']), 300)));
                Ok(true)
            });
            // A file that cannot be read (binary, permissions) is skipped.
            let _ = if in_memory.contains(&file) {
                match ctx.overlay.read(&file) {
                    Ok(text) => searcher.search_slice(&matcher, text.as_bytes(), &mut sink),
                    Err(_) => continue,
                }
            } else {
                searcher.search_path(&matcher, &file, &mut sink)
            };
            if more {
                break;
            }
        }
        if count == 0 {
            return Ok(if cut {
                format!("No matches for `{}` in the files searched.\n{cut_note}", input.pattern)
            } else {
                format!("No matches for `{}`.", input.pattern)
            });
        }
        if more {
            out.push_str(&format!("[stopped after {MAX_MATCHES} matches; narrow the pattern, path or include]\n"));
        } else {
            out.push_str(&cut_note);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::test_support::context;

    fn input(pattern: &str, path: Option<&str>, include: Option<&str>) -> GrepInput {
        GrepInput { pattern: pattern.into(), path: path.map(Into::into), include: include.map(Into::into) }
    }

    #[tokio::test]
    async fn buffers_and_edits_win_over_disk() {
        let (_d, ctx) = context(
            &[
                ("a.py", "def old():\n    pass\n"),
                ("b.py", "x = old()\n"),
                ("ignored/c.py", "old\n"),
                (".gitignore", "ignored/\n"),
            ],
            &[("a.py", "def renamed():\n    pass\n", 2)],
        );
        let b = ctx.overlay.resolve("b.py").unwrap();
        ctx.overlay.write(&b, "x = 1\ny = old()\n".into()).unwrap();
        let out = Grep.run(input("old", None, None), &ctx).await.unwrap();
        assert_eq!(out, "b.py:2: y = old()\n");
        let out = Grep.run(input(r"def \w+", None, Some("*.py")), &ctx).await.unwrap();
        assert_eq!(out, "a.py:1: def renamed():\n");
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn another_name_of_a_protected_file_is_skipped_silently() {
        let (d, ctx) = context(&[(".env", "TOKEN=hunter2\n"), ("a.txt", "TOKEN=placeholder\n")], &[]);
        std::fs::hard_link(d.path().join(".env"), d.path().join("notes.txt")).unwrap();
        let out = Grep.run(input("TOKEN", None, None), &ctx).await.unwrap();
        assert_eq!(out, "a.txt:1: TOKEN=placeholder\n");
        let e = Grep.run(input("TOKEN", Some("notes.txt"), None), &ctx).await.unwrap_err();
        assert!(e.to_string().contains("is a protected file"), "{e}");
    }

    #[tokio::test]
    async fn single_file_path_and_no_match() {
        let (_d, ctx) = context(&[("a.txt", "漢字 hit\nmiss\n"), ("b.txt", "hit\n")], &[]);
        let out = Grep.run(input("hit", Some("a.txt"), None), &ctx).await.unwrap();
        assert_eq!(out, "a.txt:1: 漢字 hit\n");
        let out = Grep.run(input("zzz", None, None), &ctx).await.unwrap();
        assert_eq!(out, "No matches for `zzz`.");
    }

    #[tokio::test]
    async fn bad_regex_is_a_tool_error_and_matches_are_capped() {
        let text: String = (0..300).map(|i| format!("hit {i}\n")).collect();
        let (_d, ctx) = context(&[("many.txt", &text)], &[]);
        let e = Grep.run(input("(unclosed", None, None), &ctx).await.unwrap_err();
        assert!(e.to_string().starts_with("invalid regular expression `(unclosed`"), "{e}");
        let out = Grep.run(input("hit", None, None), &ctx).await.unwrap();
        assert_eq!(out.lines().count(), MAX_MATCHES + 1);
        assert!(out.ends_with("[stopped after 200 matches; narrow the pattern, path or include]\n"));
    }

    #[tokio::test]
    async fn a_search_cut_short_says_so_instead_of_no_matches() {
        let names: Vec<(String, &str)> = (0..80).map(|i| (format!("f{i:03}.txt"), "nothing\n")).collect();
        let mut files: Vec<(&str, &str)> = names.iter().map(|(n, t)| (n.as_str(), *t)).collect();
        files.push(("zz.txt", "needle\n"));
        let (_d, ctx) = context(&files, &[]);
        let out = Grep.run(input("needle", None, None), &ctx).await.unwrap();
        assert_eq!(
            out,
            "No matches for `needle` in the files searched.\n[the search stopped after 50 files without reaching the end of `.`; narrow it with path or include]\n"
        );
        let out = Grep.run(input("nothing", None, Some("f00*.txt")), &ctx).await.unwrap();
        assert!(out.ends_with("narrow it with path or include]\n"), "{out}");
        let out = Grep.run(input("needle", Some("zz.txt"), None), &ctx).await.unwrap();
        assert_eq!(out, "zz.txt:1: needle\n");
    }
}
