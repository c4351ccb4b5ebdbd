//! Test support for the tools and their callers: a temp workspace with
//! files on disk and open buffers, as a [`ToolContext`]; [`Reports`], a
//! language server that knows only diagnostics (Python's).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::ToolContext;
use crate::diagnostic::Diagnostic;
use crate::downstream::{DownstreamError, Location, Symbol, SymbolSource};
use crate::workspace::{BufferSource, BufferText, Overlay, Workspace};

/// Open buffers for tests: (relative path, text, version).
pub struct Buffers(pub Vec<(PathBuf, String, i32)>);

impl BufferSource for Buffers {
    fn buffer(&self, path: &Path) -> Option<BufferText> {
        self.0.iter().find(|(p, _, _)| p == path).map(|(_, t, v)| BufferText {
            text: t.clone(),
            version: *v,
            pin: Default::default(),
        })
    }
    fn open_paths(&self) -> Vec<PathBuf> {
        self.0.iter().map(|(p, _, _)| p.clone()).collect()
    }
}

/// A temp workspace with `files` on disk and `buffers` open.
pub fn context(files: &[(&str, &str)], buffers: &[(&str, &str, i32)]) -> (tempfile::TempDir, ToolContext) {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    for (p, text) in files {
        let path = root.join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let bufs = Buffers(buffers.iter().map(|(p, t, v)| (root.join(p), t.to_string(), *v)).collect());
    let first = files.first().map(|(p, _)| *p).or_else(|| buffers.first().map(|(p, _, _)| *p)).unwrap_or("target");
    let target = root.join(first);
    let ws = Arc::new(Workspace::new(vec![root]));
    (dir, ToolContext::plain(Arc::new(Overlay::new(ws, Arc::new(bufs))), target))
}

/// A language server of Python files (`.py`) that knows only
/// diagnostics: those `report` gives for a text; nothing else is known.
pub struct Reports(Box<Report>);

/// What [`Reports`] reports for a text.
type Report = dyn Fn(&str) -> Vec<Diagnostic> + Send + Sync;

impl Reports {
    pub fn new(report: impl Fn(&str) -> Vec<Diagnostic> + Send + Sync + 'static) -> Self {
        Self(Box::new(report))
    }

    /// Each `(marker, diagnostic)` reported, in order, for a text that
    /// contains the marker.
    pub fn by_marker(list: Vec<(&'static str, Diagnostic)>) -> Self {
        Self::new(move |text| list.iter().filter(|(m, _)| text.contains(m)).map(|(_, d)| d.clone()).collect())
    }
}

#[async_trait::async_trait]
impl SymbolSource for Reports {
    fn available(&self, path: &Path) -> bool {
        path.extension().is_some_and(|e| e == "py")
    }
    async fn document_symbols(&self, _: &Path, _: &str) -> Result<Vec<Symbol>, DownstreamError> {
        Ok(Vec::new())
    }
    async fn workspace_symbols(&self, _: &Path, _: &str) -> Result<Vec<Location>, DownstreamError> {
        Ok(Vec::new())
    }
    async fn definition(&self, _: &Path, _: &str, _: u32, _: u32) -> Result<Vec<Location>, DownstreamError> {
        Ok(Vec::new())
    }
    async fn references(&self, _: &Path, _: &str, _: u32, _: u32) -> Result<Vec<Location>, DownstreamError> {
        Ok(Vec::new())
    }
    async fn hover(&self, _: &Path, _: &str, _: u32, _: u32) -> Result<Option<String>, DownstreamError> {
        Ok(None)
    }
    async fn diagnostics(&self, _: &Path, text: &str) -> Result<Vec<Diagnostic>, DownstreamError> {
        Ok((self.0)(text))
    }
    async fn release(&self, _: &[(PathBuf, Option<String>)]) {}
}
