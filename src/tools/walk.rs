//! The run's view of the file tree for `list_files` and `grep`: the walk
//! (ignore files, protected folders, open buffers and the run's new files)
//! and globs over relative paths.

use super::{ToolContext, ToolError};

/// A glob for relative paths; one without `/` matches at any depth.
pub(crate) fn glob(pattern: &str) -> Result<globset::GlobMatcher, ToolError> {
    globset::GlobBuilder::new(pattern)
        .literal_separator(pattern.contains('/'))
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| ToolError::Respond(format!("invalid glob `{pattern}`: {e}")))
}

/// Every file under `dir` in the run's view, sorted: the disk walked like
/// ripgrep does (`.gitignore`, `.ignore`, hidden files skipped), plus open
/// buffers and files the run created under `dir`, minus nothing else.
/// Stops after `limit` files; the flag says whether it stopped early.
pub(crate) fn files_under(ctx: &ToolContext, dir: &std::path::Path, limit: usize) -> (Vec<std::path::PathBuf>, bool) {
    use std::collections::BTreeSet;
    let ws = ctx.overlay.workspace();
    let mut files = BTreeSet::new();
    let mut truncated = false;
    // Only folders inside a root are walked: outside the roots a run sees
    // single files, never their folder.
    let walked = ws.roots().iter().any(|r| dir.starts_with(r));
    let walker = ignore::WalkBuilder::new(dir)
        .hidden(true)
        .git_ignore(true)
        .git_global(false)
        .git_exclude(true)
        .require_git(false)
        .follow_links(false)
        .sort_by_file_path(|a, b| a.cmp(b))
        // Protected folders (`.git/`, `.ssh/`) are not even entered.
        .filter_entry({
            let ws = ws.clone();
            move |e| !ws.is_protected(e.path())
        })
        .build();
    for entry in walker.filter(|_| walked).flatten() {
        if entry.file_type().is_some_and(|t| t.is_file()) {
            let p = entry.into_path();
            if ws.contains(&p) && !ws.is_protected(&p) {
                files.insert(p);
            }
            if files.len() >= limit {
                truncated = true;
                break;
            }
        }
    }
    // Open buffers, the single files of the run, and files the run created.
    let extra = ctx
        .overlay
        .buffers()
        .open_paths()
        .into_iter()
        .chain(ws.files().iter().cloned())
        .chain(ctx.overlay.touched().into_iter().filter(|(_, t)| t.is_some()).map(|(p, _)| p));
    for p in extra {
        if p.starts_with(dir) && ws.contains(&p) && !ws.is_protected(&p) && !files.contains(&p) {
            if files.len() >= limit {
                truncated = true;
                break;
            }
            files.insert(p);
        }
    }
    (files.into_iter().collect(), truncated)
}
