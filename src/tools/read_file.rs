//! `read_file`: a file as the editor holds it (unsaved changes included),
//! else the disk, with numbered lines and a cap.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Tool, ToolContext, ToolError, clip, numbered};

/// At most this many lines per call.
pub const MAX_LINES: usize = 2000;
/// At most this many bytes of output per call.
pub const MAX_BYTES: usize = 100 * 1024;
/// Longer lines are cut.
const MAX_LINE_CHARS: usize = 2000;

/// Input of `read_file`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReadFileInput {
    /// Path of the file, relative to the workspace root.
    pub path: String,
    /// First line to show, 1-based (default 1).
    #[serde(default)]
    pub start_line: Option<u64>,
    /// Last line to show, 1-based and inclusive (default: as many as fit).
    #[serde(default)]
    pub end_line: Option<u64>,
}

pub struct ReadFile;

#[async_trait]
impl Tool for ReadFile {
    type Input = ReadFileInput;
    const NAME: &'static str = "read_file";
    const DESCRIPTION: &'static str = "Read a text file of the workspace with numbered lines. \
        Shows the editor's unsaved text when the file is open, and your own edits of this run. \
        Long files are shown in pages of at most 2000 lines; use start_line/end_line to read further.";
    const MORE: &'static str = "read further with start_line and end_line";
    const FILE_SYSTEM: bool = true;

    async fn run(&self, input: ReadFileInput, ctx: &ToolContext) -> Result<String, ToolError> {
        let path = ctx.overlay.resolve(&input.path)?;
        let text = ctx.overlay.read(&path)?;
        let shown = ctx.overlay.workspace().display(&path);
        Ok(render(&shown, &text, input.start_line, input.end_line))
    }
}

/// The page of `text` from `start` to `end`: the lines are counted in one
/// pass and the page taken in another, so a page of a large buffer costs
/// the page, not an index of every line.
fn render(shown: &str, text: &str, start: Option<u64>, end: Option<u64>) -> String {
    let total = text.lines().count();
    if total == 0 {
        return format!("{shown} is empty.");
    }
    let start = (start.unwrap_or(1).max(1) as usize).min(total + 1);
    if start > total {
        return format!("{shown} has only {total} lines; start_line {start} is past the end.");
    }
    let end = end.map_or(total, |e| (e as usize).clamp(start, total));
    let mut out = String::new();
    let mut last = start - 1;
    for (i, line) in text.lines().skip(start - 1).take(end + 1 - start).enumerate() {
        let n = start + i;
        let row = numbered(n, &clip(line, MAX_LINE_CHARS));
        if n - start >= MAX_LINES || out.len() + row.len() + 1 > MAX_BYTES {
            break;
        }
        out.push_str(&row);
        out.push('\n');
        last = n;
    }
    if last < end {
        out.push_str(&format!(
            "[{shown}: showing lines {start}-{last} of {total}; call read_file with start_line={} to read further]\n",
            last + 1
        ));
    } else if start > 1 || end < total {
        out.push_str(&format!("[{shown}: lines {start}-{end} of {total}]\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::test_support::context;

    fn input(path: &str, s: Option<u64>, e: Option<u64>) -> ReadFileInput {
        ReadFileInput { path: path.into(), start_line: s, end_line: e }
    }

    #[tokio::test]
    async fn reads_unsaved_buffer_with_line_numbers() {
        let (_d, ctx) = context(&[("a.py", "on disk\n")], &[("a.py", "x = 1\ny = 漢😀\r\n", 3)]);
        let out = ReadFile.run(input("a.py", None, None), &ctx).await.unwrap();
        assert_eq!(out, "     1\tx = 1\n     2\ty = 漢😀\n");
    }

    #[tokio::test]
    async fn ranges_and_paging() {
        let text: String = (1..=2500).map(|i| format!("line {i}\n")).collect();
        let (_d, ctx) = context(&[("big.txt", &text)], &[]);
        let out = ReadFile.run(input("big.txt", None, None), &ctx).await.unwrap();
        assert!(out.contains("  2000\tline 2000\n"));
        assert!(!out.contains("line 2001\n"));
        assert!(
            out.ends_with(
                "[big.txt: showing lines 1-2000 of 2500; call read_file with start_line=2001 to read further]\n"
            ),
            "{}",
            &out[out.len() - 200..]
        );
        let out = ReadFile.run(input("big.txt", Some(2499), Some(9999)), &ctx).await.unwrap();
        assert_eq!(out, "  2499\tline 2499\n  2500\tline 2500\n[big.txt: lines 2499-2500 of 2500]\n");
        let out = ReadFile.run(input("big.txt", Some(3000), None), &ctx).await.unwrap();
        assert!(out.contains("only 2500 lines"));
    }

    #[tokio::test]
    async fn byte_cap_applies_to_long_lines() {
        let text: String = (0..500).map(|_| "x".repeat(1000) + "\n").collect();
        let (_d, ctx) = context(&[("wide.txt", &text)], &[]);
        let out = ReadFile.run(input("wide.txt", None, None), &ctx).await.unwrap();
        assert!(out.len() <= MAX_BYTES + 200);
        assert!(out.contains("call read_file with start_line="));
    }

    #[tokio::test]
    async fn protected_files_are_refused_whatever_their_case() {
        let (_d, ctx) = context(&[(".ENV", "TOKEN=1\n"), ("ID_RSA", "key\n"), (".Git/config", "[core]\n")], &[]);
        for p in [".ENV", "ID_RSA", ".Git/config"] {
            let e = ReadFile.run(input(p, None, None), &ctx).await.unwrap_err().to_string();
            assert!(e.contains("is a protected file"), "{p}: {e}");
        }
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn another_name_of_a_protected_file_is_refused_and_of_an_ordinary_one_read() {
        let (d, ctx) = context(&[(".env", "TOKEN=1\n"), ("a.txt", "a\n")], &[]);
        std::fs::hard_link(d.path().join(".env"), d.path().join("notes.txt")).unwrap();
        std::fs::hard_link(d.path().join("a.txt"), d.path().join("b.txt")).unwrap();
        let e = ReadFile.run(input("notes.txt", None, None), &ctx).await.unwrap_err();
        assert_eq!(e, ToolError::Respond(crate::workspace::PathError::Protected("notes.txt".into()).to_string()));
        assert_eq!(ReadFile.run(input("b.txt", None, None), &ctx).await.unwrap(), "     1\ta\n");
    }

    #[tokio::test]
    async fn missing_file_and_escape_are_errors() {
        let (_d, ctx) = context(&[], &[]);
        let e = ReadFile.run(input("nope.py", None, None), &ctx).await.unwrap_err();
        assert_eq!(e, ToolError::Respond("file `nope.py` does not exist".into()));
        let e = ReadFile.run(input("../../etc/passwd", None, None), &ctx).await.unwrap_err();
        assert_eq!(e, ToolError::Respond("path `../../etc/passwd` is outside the workspace".into()));
    }
}
