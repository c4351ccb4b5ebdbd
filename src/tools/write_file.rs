//! `write_file`: create a file, or replace a file's whole text, in the run's
//! overlay.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Tool, ToolContext, ToolError};

/// Input of `write_file`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WriteFileInput {
    /// Path of the file, relative to the workspace root. Missing directories are created with it.
    pub path: String,
    /// The complete new text of the file.
    pub content: String,
    /// One short sentence saying why, shown to the user next to this change when they review it.
    #[serde(default)]
    pub reason: Option<String>,
}

pub struct WriteFile;

#[async_trait]
impl Tool for WriteFile {
    type Input = WriteFileInput;
    const NAME: &'static str = "write_file";
    const DESCRIPTION: &'static str = "Create a new file, or replace the whole text of an existing one. Prefer \
        edit_file for changes to existing files. Nothing is saved to disk: it becomes part of a proposal the user reviews.";
    const FILE_SYSTEM: bool = true;

    async fn run(&self, input: WriteFileInput, ctx: &ToolContext) -> Result<String, ToolError> {
        let path = ctx.overlay.resolve(&input.path)?;
        let shown = ctx.overlay.workspace().display(&path);
        let lines = input.content.lines().count();
        let before = ctx.overlay.read(&path).ok();
        // The model was shown this file with its credentials as `[REDACTED]`:
        // writing that back would replace them with the placeholder.
        if let Some(old) = &before
            && input.content.contains(crate::secrets::REDACTED)
            && !old.contains(crate::secrets::REDACTED)
            && crate::secrets::Redactor::default().redact_file_text(old) != old.as_str()
        {
            return Err(ToolError::Respond(format!(
                "{shown} holds credentials you were shown as {r}; writing the whole file would replace them with \
                 {r}. Change the parts you mean to change with edit_file instead, outside the {r} lines",
                r = crate::secrets::REDACTED
            )));
        }
        let existed = ctx.overlay.write(&path, input.content.clone())?;
        if let Some(reason) = &input.reason {
            ctx.overlay.note_reason(&path, reason, &input.content);
        }
        let mut out = if existed {
            format!("Replaced the text of {shown} ({lines} lines).")
        } else {
            format!("Created {shown} ({lines} lines).")
        };
        out.push_str(
            &super::diagnostics_feedback(ctx, &path, before.as_deref().map(String::as_str), &input.content).await,
        );
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::test_support::context;

    #[tokio::test]
    async fn a_file_with_redacted_credentials_is_not_overwritten_with_the_placeholder() {
        let text = "KEY = \"ghp_abcdefghijklmnopqrstuvwxyz0123456789\"\nx = 1\n";
        let (_d, ctx) = context(&[("conf.py", text)], &[]);
        let input = |content: &str| WriteFileInput { path: "conf.py".into(), content: content.into(), reason: None };
        let e = WriteFile.run(input("KEY = \"[REDACTED]\"\nx = 2\n"), &ctx).await.unwrap_err();
        assert!(matches!(&e, ToolError::Respond(m) if m.contains("edit_file")), "{e:?}");
        assert_eq!(ctx.overlay.read(&ctx.overlay.resolve("conf.py").unwrap()).unwrap().as_str(), text);
        // Without the placeholder, or in a file that had none to hide, writing works.
        WriteFile.run(input("KEY = None\nx = 2\n"), &ctx).await.unwrap();
        WriteFile.run(input("log = \"[REDACTED] is what we print\"\n"), &ctx).await.unwrap();
    }

    #[tokio::test]
    async fn creates_and_replaces_without_touching_disk() {
        let (_d, ctx) = context(&[("old.txt", "old\n")], &[]);
        let out = WriteFile
            .run(WriteFileInput { path: "pkg/new.py".into(), content: "a\nb\n".into(), reason: None }, &ctx)
            .await
            .unwrap();
        assert_eq!(out, "Created pkg/new.py (2 lines).");
        let out = WriteFile
            .run(WriteFileInput { path: "old.txt".into(), content: "new\n".into(), reason: None }, &ctx)
            .await
            .unwrap();
        assert_eq!(out, "Replaced the text of old.txt (1 lines).");
        let root = ctx.overlay.workspace().primary_root().to_path_buf();
        assert!(!root.join("pkg").exists());
        assert_eq!(std::fs::read_to_string(root.join("old.txt")).unwrap(), "old\n");
        assert_eq!(ctx.overlay.changes().len(), 2);
    }

    #[tokio::test]
    async fn protected_files_are_refused_whatever_their_case() {
        let (_d, ctx) = context(&[("a.py", "")], &[]);
        for p in [".Git/config", ".GIT/hooks/pre-commit", ".ENV", "ID_RSA"] {
            let input = WriteFileInput { path: p.into(), content: "x\n".into(), reason: None };
            let e = WriteFile.run(input, &ctx).await.unwrap_err().to_string();
            assert!(e.contains("is a protected file"), "{p}: {e}");
        }
        assert!(ctx.overlay.changes().is_empty());
    }

    #[tokio::test]
    async fn refuses_paths_outside_and_directories() {
        let (_d, ctx) = context(&[("dir/x.txt", "")], &[]);
        let e = WriteFile
            .run(WriteFileInput { path: "/tmp/evil".into(), content: String::new(), reason: None }, &ctx)
            .await
            .unwrap_err();
        assert_eq!(e.to_string(), "path `/tmp/evil` is outside the workspace");
        let e = WriteFile
            .run(WriteFileInput { path: "dir".into(), content: String::new(), reason: None }, &ctx)
            .await
            .unwrap_err();
        assert_eq!(e.to_string(), "`dir` is a directory, not a file");
    }
}
