//! `list_files`: the workspace's files, gitignore-aware, with open buffers and
//! the run's new files included.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Tool, ToolContext, ToolError, files_under};

/// At most this many paths per call.
pub const MAX_FILES: usize = 1000;

/// Input of `list_files`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListFilesInput {
    /// Directory to list, relative to the workspace root (default: the root).
    #[serde(default)]
    pub path: Option<String>,
    /// Glob the relative paths must match, e.g. `**/*.py` or `*.rs` (a pattern without `/` matches at any depth).
    #[serde(default)]
    pub pattern: Option<String>,
}

pub struct ListFiles;

#[async_trait]
impl Tool for ListFiles {
    type Input = ListFilesInput;
    const NAME: &'static str = "list_files";
    const DESCRIPTION: &'static str = "List files of the workspace (recursively, skipping files ignored by .gitignore \
        and hidden files), one relative path per line, sorted. Optionally under a directory and filtered by a glob.";
    const MORE: &'static str = "narrow the listing with path or pattern";
    const FILE_SYSTEM: bool = true;

    async fn run(&self, input: ListFilesInput, ctx: &ToolContext) -> Result<String, ToolError> {
        let ws = ctx.overlay.workspace();
        let dir = match input.path.as_deref() {
            Some(p) if !p.trim().is_empty() && p.trim() != "." => ctx.overlay.resolve(p)?,
            _ => ws.primary_root().to_path_buf(),
        };
        if dir.is_file() {
            return Err(ToolError::Respond(format!("`{}` is a file; use read_file to read it", ws.display(&dir))));
        }
        let glob = match input.pattern.as_deref().filter(|p| !p.is_empty()) {
            None => None,
            Some(p) => Some(super::glob(p)?),
        };
        // Walk more than we show so that a selective glob still finds matches.
        let (files, walk_truncated) = files_under(ctx, &dir, MAX_FILES * 20);
        let mut shown = Vec::new();
        let mut more = false;
        for f in files {
            let rel = ws.display(&f);
            let name_or_rel =
                f.strip_prefix(&dir).map(|r| r.to_string_lossy().into_owned()).unwrap_or_else(|_| rel.clone());
            if glob.as_ref().is_some_and(|g| !g.is_match(&name_or_rel) && !g.is_match(&rel)) {
                continue;
            }
            if shown.len() == MAX_FILES {
                more = true;
                break;
            }
            shown.push(rel);
        }
        if shown.is_empty() {
            return Ok(format!(
                "No files found under `{}`{}.",
                ws.display(&dir),
                input.pattern.map(|p| format!(" matching `{p}`")).unwrap_or_default()
            ));
        }
        let mut out = shown.join("\n");
        out.push('\n');
        if more || walk_truncated {
            out.push_str(&format!("[listing stopped after {} files; narrow it with path or pattern]\n", shown.len()));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::test_support::context;

    fn input(path: Option<&str>, pattern: Option<&str>) -> ListFilesInput {
        ListFilesInput { path: path.map(Into::into), pattern: pattern.map(Into::into) }
    }

    #[tokio::test]
    async fn respects_gitignore_and_includes_buffers_and_new_files() {
        let (_d, ctx) = context(
            &[
                (".gitignore", "build/\n*.log\n"),
                ("src/a.py", ""),
                ("src/b.rs", ""),
                ("build/out.py", ""),
                ("x.log", ""),
                (".hidden/h.py", ""),
            ],
            &[("src/unsaved_new.py", "buffer only", 1)],
        );
        let created = ctx.overlay.resolve("src/created.py").unwrap();
        ctx.overlay.write(&created, "new".into()).unwrap();
        let out = ListFiles.run(input(None, None), &ctx).await.unwrap();
        assert_eq!(out, "src/a.py\nsrc/b.rs\nsrc/created.py\nsrc/unsaved_new.py\n");
        let out = ListFiles.run(input(Some("src"), Some("*.py")), &ctx).await.unwrap();
        assert_eq!(out, "src/a.py\nsrc/created.py\nsrc/unsaved_new.py\n");
        let out = ListFiles.run(input(None, Some("src/*.rs")), &ctx).await.unwrap();
        assert_eq!(out, "src/b.rs\n");
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn another_name_of_a_protected_file_is_left_out() {
        let (d, ctx) = context(&[(".env", "TOKEN=1\n"), ("a.txt", ""), ("b.txt", "")], &[]);
        std::fs::hard_link(d.path().join(".env"), d.path().join("notes.txt")).unwrap();
        // Two names of an ordinary file are both listed.
        std::fs::hard_link(d.path().join("b.txt"), d.path().join("c.txt")).unwrap();
        let out = ListFiles.run(input(None, None), &ctx).await.unwrap();
        assert_eq!(out, "a.txt\nb.txt\nc.txt\n");
    }

    #[tokio::test]
    async fn errors_and_empty_results_are_clear() {
        let (_d, ctx) = context(&[("a.txt", "")], &[]);
        assert!(ListFiles.run(input(Some(".."), None), &ctx).await.is_err());
        let e = ListFiles.run(input(None, Some("[")), &ctx).await.unwrap_err();
        assert!(e.to_string().contains("invalid glob"));
        let out = ListFiles.run(input(None, Some("*.zig")), &ctx).await.unwrap();
        assert_eq!(out, "No files found under `.` matching `*.zig`.");
        let e = ListFiles.run(input(Some("a.txt"), None), &ctx).await.unwrap_err();
        assert!(e.to_string().contains("is a file"));
    }

    #[tokio::test]
    async fn caps_the_listing() {
        let names: Vec<(String, &str)> = (0..1100).map(|i| (format!("f{i:04}.txt"), "")).collect();
        let files: Vec<(&str, &str)> = names.iter().map(|(n, t)| (n.as_str(), *t)).collect();
        let (_d, ctx) = context(&files, &[]);
        let out = ListFiles.run(input(None, None), &ctx).await.unwrap();
        assert_eq!(out.lines().count(), MAX_FILES + 1);
        assert!(out.ends_with("[listing stopped after 1000 files; narrow it with path or pattern]\n"));
    }
}
