//! The tools the model can call. Each tool is one file: a typed input that
//! derives `JsonSchema` (its doc comments are what the model reads), a
//! `run` that computes the result over the run's [`ToolContext`], and text
//! rendering for the model.
//!
//! [`Toolbox`] is the [`ToolSet`] the agent loop sees: it validates input
//! against the tool's type and turns every failure into a tool error the
//! model can read.

mod diagnostics;
mod document_symbols;
mod edit_file;
mod find_definition;
mod find_references;
mod grep;
mod hover;
mod list_files;
mod read_file;
mod run_command;
mod symbol_support;
mod workspace_symbols;
mod write_file;

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::downstream::SymbolSource;
use crate::model::ToolSpec;
use crate::workspace::{Overlay, OverlayError};

pub use diagnostics::Diagnostics;
pub use document_symbols::DocumentSymbols;
pub use edit_file::EditFile;
pub use find_definition::FindDefinition;
pub use find_references::FindReferences;
pub use grep::Grep;
pub use hover::Hover;
pub use list_files::ListFiles;
pub use read_file::ReadFile;
pub use run_command::{Approval, Approver, CommandSpec, RunCommand, RunCommandInput};
pub use workspace_symbols::WorkspaceSymbols;
pub use write_file::WriteFile;

/// What a tool call sees: the run's overlay over buffers and disk, and the
/// language servers when the session has them.
#[derive(Clone)]
pub struct ToolContext {
    pub overlay: Arc<Overlay>,
    /// Symbol knowledge from downstream language servers.
    pub symbols: Option<Arc<dyn SymbolSource>>,
    /// The file being fixed.
    pub target: PathBuf,
    /// The diagnostics the editor sent with the code action (target file).
    pub editor_diagnostics: Vec<crate::downstream::Diagnostic>,
}

impl ToolContext {
    /// A context without language servers.
    pub fn plain(overlay: Arc<Overlay>, target: PathBuf) -> Self {
        Self { overlay, symbols: None, target, editor_diagnostics: Vec::new() }
    }
}

/// A failed tool call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// Sent back to the model as a tool result with `is_error: true`.
    #[error("{0}")]
    Respond(String),
    /// Ends the run: something the model cannot fix by trying again.
    #[error("{0}")]
    Fatal(String),
}

impl From<OverlayError> for ToolError {
    fn from(e: OverlayError) -> Self {
        ToolError::Respond(e.to_string())
    }
}

/// The result of one tool call, as the agent loop sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    pub content: String,
    pub is_error: bool,
    /// The run must stop after this call.
    pub fatal: bool,
}

/// The set of tools offered to the model in one run.
#[async_trait]
pub trait ToolSet: Send + Sync {
    fn specs(&self) -> Vec<ToolSpec>;
    async fn call(&self, name: &str, input: &Value) -> ToolOutput;
}

/// A tool with a typed input.
#[async_trait]
pub trait Tool: Send + Sync + 'static {
    type Input: DeserializeOwned + JsonSchema + Send;
    const NAME: &'static str;
    const DESCRIPTION: &'static str;
    /// The tool does synchronous file-system work (reads, walks). It then
    /// runs on the blocking pool, so a cancel (which drops the call) abandons
    /// the work instead of waiting for it, and no runtime worker is held by a
    /// slow disk. Tools that own child processes or streams stay on the
    /// runtime, where dropping the call stops them.
    const FILE_SYSTEM: bool = false;
    async fn run(&self, input: Self::Input, ctx: &ToolContext) -> Result<String, ToolError>;
}

/// Object-safe face of [`Tool`], used by the registry.
#[async_trait]
trait DynTool: Send + Sync {
    fn spec(&self) -> ToolSpec;
    async fn call(self: Arc<Self>, input: &Value, ctx: &ToolContext) -> Result<String, ToolError>;
}

#[async_trait]
impl<T: Tool> DynTool for T {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: T::NAME.to_string(),
            description: T::DESCRIPTION.to_string(),
            input_schema: input_schema::<T::Input>(),
        }
    }

    async fn call(self: Arc<Self>, input: &Value, ctx: &ToolContext) -> Result<String, ToolError> {
        let input: T::Input = serde_json::from_value(input.clone()).map_err(|e| {
            ToolError::Respond(format!(
                "invalid input for `{}`: {e}. Expected input schema: {}",
                T::NAME,
                input_schema::<T::Input>()
            ))
        })?;
        if !T::FILE_SYSTEM {
            return self.run(input, ctx).await;
        }
        let ctx = ctx.clone();
        let runtime = tokio::runtime::Handle::current();
        let work = tokio::task::spawn_blocking(move || runtime.block_on(self.run(input, &ctx)));
        match work.await {
            Ok(result) => result,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => Err(ToolError::Fatal(format!("`{}` was stopped: agentfix is shutting down", T::NAME))),
        }
    }
}

/// The JSON Schema of a tool input, trimmed to what model APIs accept.
pub fn input_schema<T: JsonSchema>() -> Value {
    let mut v = serde_json::to_value(schemars::schema_for!(T)).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut v {
        map.remove("$schema");
        map.remove("title");
    }
    strip_formats(&mut v);
    v
}

/// Removes `format` annotations (`uint32`, …) that some APIs reject.
fn strip_formats(v: &mut Value) {
    match v {
        Value::Object(map) => {
            if map.get("format").is_some_and(Value::is_string) {
                map.remove("format");
            }
            map.values_mut().for_each(strip_formats);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_formats),
        _ => {}
    }
}

/// The tools of a run, bound to its context.
pub struct Toolbox {
    tools: Vec<Arc<dyn DynTool>>,
    /// `specs[i]` declares `tools[i]`; computed once per run.
    specs: Vec<ToolSpec>,
    ctx: ToolContext,
}

impl Toolbox {
    /// Every built-in tool; the symbol tools only when the context has
    /// language servers.
    pub fn standard(ctx: ToolContext) -> Self {
        let mut tools: Vec<Arc<dyn DynTool>> =
            vec![Arc::new(ReadFile), Arc::new(ListFiles), Arc::new(Grep), Arc::new(EditFile), Arc::new(WriteFile)];
        if ctx.symbols.is_some() {
            tools.push(Arc::new(DocumentSymbols));
            tools.push(Arc::new(WorkspaceSymbols));
            tools.push(Arc::new(FindDefinition));
            tools.push(Arc::new(FindReferences));
            tools.push(Arc::new(Hover));
            tools.push(Arc::new(Diagnostics));
        }
        let specs = tools.iter().map(|t| t.spec()).collect();
        Self { tools, specs, ctx }
    }

    /// Adds a tool built for this run; `note` is appended to its description
    /// (for instance the names of the configured commands).
    pub fn add<T: Tool>(&mut self, tool: T, note: &str) {
        let mut spec = DynTool::spec(&tool);
        if !note.is_empty() {
            spec.description = format!("{} {note}", spec.description);
        }
        self.tools.push(Arc::new(tool));
        self.specs.push(spec);
    }

    pub fn context(&self) -> &ToolContext {
        &self.ctx
    }
}

#[async_trait]
impl ToolSet for Toolbox {
    fn specs(&self) -> Vec<ToolSpec> {
        self.specs.clone()
    }

    async fn call(&self, name: &str, input: &Value) -> ToolOutput {
        let Some(tool) = self.specs.iter().position(|s| s.name == name).map(|i| Arc::clone(&self.tools[i])) else {
            let names: Vec<&str> = self.specs.iter().map(|s| s.name.as_str()).collect();
            return ToolOutput {
                content: format!("unknown tool `{name}`; the available tools are: {}", names.join(", ")),
                is_error: true,
                fatal: false,
            };
        };
        match tool.call(input, &self.ctx).await {
            Ok(content) => ToolOutput { content, is_error: false, fatal: false },
            Err(ToolError::Respond(content)) => ToolOutput { content, is_error: true, fatal: false },
            Err(ToolError::Fatal(content)) => ToolOutput { content, is_error: true, fatal: true },
        }
    }
}

/// What changed in the language server's diagnostics of `path` with an
/// edit from `old` to `new` (`None`: a new file): appended to the results of
/// the edit tools so the model sees the real errors it fixed or introduced.
/// Never fails the edit: problems become a note.
pub(crate) async fn diagnostics_feedback(
    ctx: &ToolContext,
    path: &std::path::Path,
    old: Option<&str>,
    new: &str,
) -> String {
    use std::collections::HashMap;
    let Some(symbols) = &ctx.symbols else { return String::new() };
    if crate::downstream::language_of(path).is_none() {
        return String::new();
    }
    let shown = ctx.overlay.workspace().display(path);
    let before = match old {
        Some(old) => match symbols.diagnostics(path, old).await {
            Ok(d) => d,
            Err(e) => return format!("\n\n(No diagnostics for this edit: {e}.)"),
        },
        None => Vec::new(),
    };
    let after = match symbols.diagnostics(path, new).await {
        Ok(d) => d,
        Err(e) => return format!("\n\n(No diagnostics for this edit: {e}.)"),
    };
    // Compare by what a diagnostic says, not where: lines move with edits.
    let key = |d: &crate::downstream::Diagnostic| (d.severity, d.message.clone(), d.code.clone());
    let mut remaining: HashMap<_, usize> = HashMap::new();
    for d in &after {
        *remaining.entry(key(d)).or_default() += 1;
    }
    let mut fixed = Vec::new();
    for d in &before {
        match remaining.get_mut(&key(d)) {
            Some(n) if *n > 0 => *n -= 1,
            _ => fixed.push(d),
        }
    }
    let mut old_counts: HashMap<_, usize> = HashMap::new();
    for d in &before {
        *old_counts.entry(key(d)).or_default() += 1;
    }
    let mut introduced = Vec::new();
    for d in &after {
        match old_counts.get_mut(&key(d)) {
            Some(n) if *n > 0 => *n -= 1,
            _ => introduced.push(d),
        }
    }
    if before.is_empty() && after.is_empty() {
        return format!("\n\nDiagnostics of {shown}: none before or after this edit.");
    }
    let mut out = format!(
        "\n\nDiagnostics of {shown} after this edit: {} fixed, {} introduced, {} in all.",
        fixed.len(),
        introduced.len(),
        after.len()
    );
    for d in fixed.iter().take(20) {
        out.push_str(&format!("\n- fixed (was line {}): {}: {}", d.line + 1, d.severity, clip(&d.message, 300)));
    }
    for d in introduced.iter().take(20) {
        out.push_str(&format!("\n- introduced: {}", diagnostics::render(&shown, d)));
    }
    out
}

/// A glob for relative paths; one without `/` matches at any depth.
pub(crate) fn glob(pattern: &str) -> Result<globset::GlobMatcher, ToolError> {
    globset::GlobBuilder::new(pattern)
        .literal_separator(pattern.contains('/'))
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| ToolError::Respond(format!("invalid glob `{pattern}`: {e}")))
}

/// Numbers lines for the model: `   12\ttext`.
pub(crate) fn numbered(line_no: usize, text: &str) -> String {
    format!("{line_no:>6}\t{text}")
}

/// Shortens `s` to at most `max` chars, marking the cut.
pub(crate) fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let cut: String = s.chars().take(max).collect();
        format!("{cut}… [line truncated]")
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    use std::path::{Path, PathBuf};
    use std::sync::Arc;

    use super::ToolContext;
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Buffers whose every read blocks until released, like a stalled disk.
    struct Stalled(std::sync::Mutex<std::sync::mpsc::Receiver<()>>);

    impl crate::workspace::BufferSource for Stalled {
        fn buffer(&self, _path: &std::path::Path) -> Option<crate::workspace::BufferText> {
            let _ = self.0.lock().unwrap().recv_timeout(std::time::Duration::from_secs(20));
            None
        }
        fn open_paths(&self) -> Vec<PathBuf> {
            Vec::new()
        }
    }

    /// A single-threaded runtime, as in the worst case: a tool blocking on
    /// the runtime's thread would keep the timeout (standing in for the
    /// run's cancel) from ever firing.
    #[tokio::test(flavor = "current_thread")]
    async fn a_stalled_file_read_is_abandoned_by_a_cancel_and_the_runtime_stays_free() {
        let (_d, plain) = test_support::context(&[("a.txt", "x\n")], &[]);
        let (release, stalled) = std::sync::mpsc::channel();
        let overlay = Arc::new(Overlay::new(
            Arc::new(plain.overlay.workspace().clone()),
            Arc::new(Stalled(std::sync::Mutex::new(stalled))),
        ));
        let tb = Toolbox::standard(ToolContext::plain(overlay, plain.target.clone()));
        let started = std::time::Instant::now();
        let input = json!({"path": "a.txt"});
        let call = tb.call("read_file", &input);
        let abandoned = tokio::time::timeout(std::time::Duration::from_millis(200), call).await;
        assert!(abandoned.is_err(), "the read should still be stalled: {abandoned:?}");
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "the cancel waited for the read");
        // The runtime is free for other work meanwhile, and the abandoned
        // read ends when the disk answers.
        tokio::task::yield_now().await;
        release.send(()).unwrap();
        let plain_box = Toolbox::standard(plain);
        let out = plain_box.call("read_file", &json!({"path": "a.txt"})).await;
        assert!(!out.is_error && out.content.contains("x"), "{}", out.content);
    }

    #[tokio::test]
    async fn unknown_tools_and_bad_input_are_tool_errors() {
        let (_d, ctx) = test_support::context(&[("a.txt", "x\n")], &[]);
        let tb = Toolbox::standard(ctx);
        let out = tb.call("delete_everything", &json!({})).await;
        assert!(out.is_error && !out.fatal);
        assert!(out.content.contains("unknown tool `delete_everything`"), "{}", out.content);
        assert!(out.content.contains("read_file"));
        let out = tb.call("edit_file", &json!({"path": "a.txt"})).await;
        assert!(out.is_error);
        assert!(out.content.contains("missing field `old_text`"), "{}", out.content);
        let out = tb.call("read_file", &json!({"path": 5})).await;
        assert!(out.is_error && out.content.contains("invalid input for `read_file`"));
    }

    #[test]
    fn schemas_are_objects_with_descriptions_and_no_formats() {
        let (_d, ctx) = test_support::context(&[], &[]);
        let specs = Toolbox::standard(ctx).specs();
        let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["read_file", "list_files", "grep", "edit_file", "write_file"]);
        for s in &specs {
            assert_eq!(s.input_schema["type"], "object", "{}", s.name);
            assert!(!s.description.is_empty());
            assert!(!s.input_schema.to_string().contains("\"format\""), "{}", s.input_schema);
            for (_, prop) in s.input_schema["properties"].as_object().unwrap() {
                assert!(prop["description"].is_string(), "{}: {prop}", s.name);
            }
        }
    }

    #[tokio::test]
    async fn protected_files_are_refused_omitted_and_skipped_by_every_tool() {
        let (_d, ctx) = test_support::context(
            &[
                ("app.py", "TOKEN = load()\n"),
                ("credentials.json", "{\"TOKEN\": \"s3cret\"}\n"),
                ("certs/server.pem", "TOKEN s3cret\n"),
                ("infra/prod.tfstate", "TOKEN s3cret\n"),
                (".env", "TOKEN=s3cret\n"),
            ],
            &[],
        );
        let tb = Toolbox::standard(ctx);
        for (tool, input) in [
            ("read_file", json!({"path": "credentials.json"})),
            ("read_file", json!({"path": "./certs/../.env"})),
            ("edit_file", json!({"path": "credentials.json", "old_text": "s3cret", "new_text": "x"})),
            ("write_file", json!({"path": ".env", "content": "TOKEN=mine\n"})),
            ("write_file", json!({"path": "new/id_rsa", "content": "key\n"})),
            ("grep", json!({"pattern": "TOKEN", "path": "infra/prod.tfstate"})),
            ("list_files", json!({"path": ".git"})),
        ] {
            let out = tb.call(tool, &input).await;
            assert!(out.is_error && !out.fatal, "{tool} {input}: {}", out.content);
            assert!(out.content.contains("protected file") && out.content.contains("do not try"), "{}", out.content);
        }
        let out = tb.call("list_files", &json!({})).await;
        assert_eq!(out.content, "app.py\n");
        let out = tb.call("grep", &json!({"pattern": "TOKEN"})).await;
        assert_eq!(out.content, "app.py:1: TOKEN = load()\n");
        let out = tb.call("grep", &json!({"pattern": "s3cret", "include": "*.json"})).await;
        assert_eq!(out.content, "No matches for `s3cret`.");
    }

    #[tokio::test]
    async fn files_only_read_do_not_join_later_walks() {
        let (_d, ctx) = test_support::context(
            &[
                ("a.py", "x = 1\n"),
                (".hidden/h.py", "x = 2\n"),
                ("build/out.py", "x = 3\n"),
                (".gitignore", "build/\n"),
            ],
            &[],
        );
        let tb = Toolbox::standard(ctx);
        assert!(!tb.call("read_file", &json!({"path": ".hidden/h.py"})).await.is_error);
        assert!(!tb.call("read_file", &json!({"path": "build/out.py"})).await.is_error);
        assert_eq!(tb.call("list_files", &json!({})).await.content, "a.py\n");
        assert_eq!(tb.call("grep", &json!({"pattern": "x = "})).await.content, "a.py:1: x = 1\n");
        // A file the run changed does join them.
        assert!(!tb.call("write_file", &json!({"path": "build/out.py", "content": "x = 4\n"})).await.is_error);
        assert_eq!(tb.call("list_files", &json!({})).await.content, "a.py\nbuild/out.py\n");
    }
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
