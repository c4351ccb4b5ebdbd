//! The registry: the typed [`Tool`] trait, its object-safe face, the JSON
//! Schema of a tool input, and [`Toolbox`], the [`ToolSet`] a run offers the
//! model. Input is validated against the tool's type here, and every failure
//! becomes a tool error the model can read; file-system tools are moved to
//! the blocking pool here.

use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{
    Diagnostics, DocumentSymbols, EditFile, FindDefinition, FindReferences, Grep, Hover, ListFiles, ReadFile,
    ToolContext, ToolError, ToolOutput, ToolSet, WorkspaceSymbols, WriteFile,
};
use crate::model::ToolSpec;

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
    /// How the model gets what a result cut at its size limit left out.
    const MORE: &'static str = "ask for less (a narrower path, range or query)";
    async fn run(&self, input: Self::Input, ctx: &ToolContext) -> Result<String, ToolError>;
}

/// The size of a tool result at most, in bytes, unless `toolOutputLimits`
/// says otherwise for that tool. Each tool's own caps (lines, matches,
/// entries) come first; this one bounds what any result costs in context.
pub const DEFAULT_OUTPUT_BYTES: usize = 100 * 1024;

/// `content` cut to at most `limit` bytes, at a line break when there is
/// one, with a note saying so and how to get the rest.
fn cap_output(content: String, limit: usize, tool: &str, more: &str) -> String {
    if content.len() <= limit {
        return content;
    }
    let at = content.floor_char_boundary(limit);
    let at = content[..at].rfind('\n').map_or(at, |i| i + 1);
    let mut out = content[..at].to_string();
    if !out.ends_with('\n') && !out.is_empty() {
        out.push('\n');
    }
    out.push_str(&format!(
        "[the result was cut at {limit} bytes (toolOutputLimits.{tool}), {} bytes left out; {more}]",
        content.len() - at
    ));
    out
}

/// Object-safe face of [`Tool`], used by the registry.
#[async_trait]
trait DynTool: Send + Sync {
    fn spec(&self) -> ToolSpec;
    fn more(&self) -> &'static str;
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

    fn more(&self) -> &'static str {
        T::MORE
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

/// A tool whose name, description and schema are known only at run time
/// (an MCP server's tools): the input goes through as JSON, unchecked here;
/// the tool's own server validates it.
#[async_trait]
pub trait ExternalTool: Send + Sync + 'static {
    fn spec(&self) -> ToolSpec;
    async fn call(&self, input: &Value) -> Result<String, ToolError>;
}

/// [`ExternalTool`] in the registry.
struct External(Arc<dyn ExternalTool>);

#[async_trait]
impl DynTool for External {
    fn spec(&self) -> ToolSpec {
        self.0.spec()
    }

    fn more(&self) -> &'static str {
        "ask the tool for less"
    }

    async fn call(self: Arc<Self>, input: &Value, _ctx: &ToolContext) -> Result<String, ToolError> {
        self.0.call(input).await
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
/// The most bytes of diff [`Toolbox::state`] shows.
pub const STATE_DIFF_BYTES: usize = 16_000;

pub struct Toolbox {
    tools: Vec<Arc<dyn DynTool>>,
    /// `specs[i]` declares `tools[i]`; computed once per run.
    specs: Vec<ToolSpec>,
    ctx: ToolContext,
    /// Result size limits by tool name, over [`DEFAULT_OUTPUT_BYTES`].
    output_limits: std::collections::BTreeMap<String, usize>,
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
        Self { tools, specs, ctx, output_limits: Default::default() }
    }

    /// Result size limits by tool name (`toolOutputLimits`).
    pub fn with_output_limits(mut self, limits: std::collections::BTreeMap<String, usize>) -> Self {
        self.output_limits = limits;
        self
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

    /// Adds a tool known only at run time, under the name its spec gives.
    pub fn add_external(&mut self, tool: Arc<dyn ExternalTool>) {
        let tool = External(tool);
        self.specs.push(DynTool::spec(&tool));
        self.tools.push(Arc::new(tool));
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

    /// The files the run changed, as unified diffs of its private copy, or
    /// their paths alone when the diffs pass [`STATE_DIFF_BYTES`].
    fn state(&self) -> Option<String> {
        let changes = self.ctx.overlay.changes();
        if changes.is_empty() {
            return None;
        }
        let diffs: String = changes
            .iter()
            .map(|c| crate::workspace::unified_diff(&c.display, c.original.as_deref(), &c.new_text))
            .collect();
        let head = "Files this run has changed so far (in its private copy, which the tools read; the user reviews the changes at the end):";
        if diffs.len() <= STATE_DIFF_BYTES {
            return Some(format!("{head}\n{diffs}"));
        }
        let paths: Vec<String> = changes.iter().map(|c| format!("- {}", c.display)).collect();
        Some(format!(
            "{head}\n{}\n(The diff is too long to show here: read the files to see their current text.)",
            paths.join("\n")
        ))
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
        let limit = self.output_limits.get(name).copied().unwrap_or(DEFAULT_OUTPUT_BYTES).max(1);
        let more = tool.more();
        match tool.call(input, &self.ctx).await {
            Ok(content) => {
                ToolOutput { content: cap_output(content, limit, name, more), is_error: false, fatal: false }
            }
            Err(ToolError::Respond(content)) => ToolOutput { content, is_error: true, fatal: false },
            Err(ToolError::Fatal(content)) => ToolOutput { content, is_error: true, fatal: true },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use serde_json::json;

    use super::*;
    use crate::tools::test_support;
    use crate::workspace::Overlay;

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
    async fn results_are_cut_at_their_tools_limit_with_a_note_on_how_to_get_the_rest() {
        let text: String = (1..=400).map(|i| format!("line {i} 漢字\n")).collect();
        let (_d, ctx) = test_support::context(&[("big.txt", &text)], &[]);
        let limits = std::collections::BTreeMap::from([("read_file".to_string(), 1000)]);
        let tb = Toolbox::standard(ctx).with_output_limits(limits);
        let out = tb.call("read_file", &json!({"path": "big.txt"})).await;
        assert!(!out.is_error);
        let (kept, note) = out.content.rsplit_once("\n[").unwrap();
        assert!(kept.len() <= 1000 && kept.ends_with("漢字"), "cut at a line break: {kept:?}");
        assert!(
            note.starts_with("the result was cut at 1000 bytes (toolOutputLimits.read_file), ")
                && note.ends_with("bytes left out; read further with start_line and end_line]"),
            "{note}"
        );
        // Other tools keep the default, far above this listing.
        let out = tb.call("list_files", &json!({})).await;
        assert_eq!(out.content.trim(), "big.txt");
        // A one-line result longer than the limit is cut inside the line, on a char boundary.
        assert!(cap_output("漢".repeat(10), 7, "t", "m").starts_with("漢漢\n[the result was cut at 7 bytes"));
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
