//! One fix, independent of who asked for it (the LSP server or the headless
//! CLI): the system prompt (agentfix's rules, then the project's
//! instructions), the first user message built from the target, the tools
//! over a fresh overlay, and the agent loop.
//!
//! Its parts:
//! one fix independent of its caller: `Setup` (config + model), prompts (the
//! system prompt: `SYSTEM_PROMPT`, then the project instructions, built once
//! per run), overlay, toolbox, loop, transcript, the `Verdict`

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::agent::{self, ContextChange, Outcome, RunEvent, Stop};
use crate::config::limits::Limits;
use crate::config::limits::PartialEdits;
use crate::config::settings::Settings;
use crate::config::{Config, ConfigError};
use crate::diagnostic::Diagnostic;
use crate::downstream::{Downstream, Symbol, SymbolSource};
use crate::follow_up::{self, PastRun};
use crate::instructions::Instructions;
use crate::mcp::McpServers;
use crate::model::{Message, StreamUpdate, Usage};
use crate::position::LineRange;
use crate::pricing::{Price, TokenCounts, format_tokens, format_usd};
use crate::providers::ModelClient;
use crate::tools::{Approval, Approver, CommandSpec, RunCommand, Tool, ToolContext, ToolSet, Toolbox};
use crate::transcript::Transcript;
use crate::workspace::{FileChange, Overlay, Workspace};

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

/// What to fix.
#[derive(Debug, Clone)]
pub struct Target {
    /// Absolute path of the file.
    pub path: PathBuf,
    /// The lines the user pointed at.
    pub lines: LineRange,
    /// The editor's diagnostics the user asked about.
    pub problems: Vec<Diagnostic>,
    pub instruction: Option<String>,
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
            let lines: Vec<&str> = text.lines().collect();
            // Lines come from the wire: a range past the end shows the end.
            let count = lines.len();
            let first = (first as usize).clamp(1, count.max(1));
            let last = (last as usize).clamp(first, count.max(1));
            let from = first.saturating_sub(CONTEXT_LINES as usize).max(1);
            let to = last.saturating_add(CONTEXT_LINES as usize).min(count);
            if from <= to {
                out.push_str(&format!(
                    "\nLines {from}-{to} of `{shown}` ({} lines in all), as the editor holds it now:\n",
                    lines.len()
                ));
                for n in from..=to {
                    out.push_str(&format!("{n:>6}\t{}\n", lines[n - 1]));
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

/// Turns run events into one-line progress messages: `turn 2: read_file
/// calc.py`, `turn 3: preparing edit_file`, the tail of the model's text as
/// it streams, retries.
#[derive(Default)]
pub struct ProgressLines {
    turn: std::sync::atomic::AtomicU32,
    /// The tokens so far.
    usage: std::sync::Mutex<Usage>,
    text: std::sync::Mutex<Tail>,
    /// The model's price, when known: reports then show the cost so far.
    price: Option<Price>,
}

impl ProgressLines {
    /// Lines that show the cost so far at `price`.
    pub fn priced(price: Option<Price>) -> Self {
        Self { price, ..Self::default() }
    }
}

/// Characters of streamed text a progress line shows.
const TAIL_CHARS: usize = 80;

/// The end of the streamed text with whitespace runs flattened to one
/// space (what `split_whitespace().join(" ")` of the whole text would end
/// with), kept to at most `2 * TAIL_CHARS` characters: each piece costs its
/// own length, never the length of the text so far.
#[derive(Default)]
struct Tail {
    text: String,
    chars: usize,
    /// Whitespace came after the last character kept.
    space: bool,
}

impl Tail {
    fn clear(&mut self) {
        *self = Tail::default();
    }

    fn push(&mut self, piece: &str) {
        for c in piece.chars() {
            if c.is_whitespace() {
                self.space = true;
                continue;
            }
            if std::mem::take(&mut self.space) && self.chars > 0 {
                self.text.push(' ');
                self.chars += 1;
            }
            self.text.push(c);
            self.chars += 1;
            if self.chars >= 2 * TAIL_CHARS {
                let cut = self.text.char_indices().nth(self.chars - TAIL_CHARS).map_or(0, |(i, _)| i);
                self.text.drain(..cut);
                self.chars = TAIL_CHARS;
            }
        }
    }

    /// The last `TAIL_CHARS` characters.
    fn shown(&self) -> &str {
        let skip = self.chars.saturating_sub(TAIL_CHARS);
        let at = self.text.char_indices().nth(skip).map_or(self.text.len(), |(i, _)| i);
        &self.text[at..]
    }
}

/// A progress line; `streaming` lines may be dropped by a throttle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgressLine {
    pub text: String,
    pub streaming: bool,
}

impl ProgressLines {
    pub fn line(&self, event: &RunEvent) -> Option<ProgressLine> {
        use std::sync::atomic::Ordering::Relaxed;
        let turn = self.turn.load(Relaxed);
        let plain = |text: String| Some(ProgressLine { text, streaming: false });
        match event {
            RunEvent::Request { turn, .. } => {
                self.turn.store(*turn, Relaxed);
                self.text.lock().unwrap_or_else(|e| e.into_inner()).clear();
                None
            }
            RunEvent::ToolCalls { turn, calls } => {
                let usage = *self.usage.lock().unwrap_or_else(|e| e.into_inner());
                let spent = Spend::of(&usage, self.price).describe();
                plain(format!("turn {turn}: {} ({spent})", calls.join(", ")))
            }
            RunEvent::Stream(StreamUpdate::ToolStart(name)) => plain(format!("turn {turn}: preparing {name}")),
            RunEvent::Stream(StreamUpdate::Retrying { attempt, delay_ms, reason }) => {
                plain(format!("retry {attempt} in {:.1} s: {reason}", *delay_ms as f64 / 1000.0))
            }
            RunEvent::Stream(StreamUpdate::Text(piece)) => {
                let mut tail = self.text.lock().unwrap_or_else(|e| e.into_inner());
                tail.push(piece);
                Some(ProgressLine { text: format!("turn {turn}: {}", tail.shown()), streaming: true })
            }
            RunEvent::Response { response, .. } => {
                self.usage.lock().unwrap_or_else(|e| e.into_inner()).add(response.usage);
                None
            }
            RunEvent::ContextEdited { turn, change, tokens_before, tokens_after, .. } => {
                let (before, after) = (format_tokens(*tokens_before), format_tokens(*tokens_after));
                plain(match change {
                    ContextChange::Stubbed { tool_use_ids, .. } => format!(
                        "turn {turn}: removed {} older tool outputs to save context (~{before} → ~{after})",
                        tool_use_ids.len()
                    ),
                    ContextChange::Compacted { replaced, .. } => format!(
                        "turn {turn}: summarised {replaced} older messages to save context (~{before} → ~{after})"
                    ),
                })
            }
            RunEvent::ToolResult { .. } => None,
        }
    }
}

/// The tools, with credentials scrubbed from every result before the model
/// sees it, by what the result shows (see `secrets`' doc):
///
/// - the workspace's files (read_file, grep, list_files, the symbol tools,
///   the regions edit_file and write_file show): the exact key and the
///   high-confidence shapes ([`Redactor::redact_file_text`]), so that
///   `token = "…"` fixtures and `password: …` settings reach the model as
///   they are and it can quote them back in an edit;
/// - everything else (run_command, diagnostics, MCP tools, a tool added
///   later): [`Redactor::redact`], every shape. A command that prints
///   `~/.ssh/id_rsa` or its environment, or an MCP server that returns a
///   config, must not hand the model the credentials in it.
///
/// [`Redactor::redact_file_text`]: crate::secrets::Redactor::redact_file_text
/// [`Redactor::redact`]: crate::secrets::Redactor::redact
struct KeyScrubbed<'a> {
    inner: &'a dyn ToolSet,
    redactor: crate::secrets::Redactor,
}

/// The tools whose results show the workspace's files.
const FILE_TOOLS: &[&str] = &[
    crate::tools::ReadFile::NAME,
    crate::tools::Grep::NAME,
    crate::tools::ListFiles::NAME,
    crate::tools::EditFile::NAME,
    crate::tools::WriteFile::NAME,
    crate::tools::DocumentSymbols::NAME,
    crate::tools::FindDefinition::NAME,
    crate::tools::FindReferences::NAME,
    crate::tools::Hover::NAME,
    crate::tools::WorkspaceSymbols::NAME,
];

#[async_trait::async_trait]
impl ToolSet for KeyScrubbed<'_> {
    fn specs(&self) -> Vec<crate::model::ToolSpec> {
        self.inner.specs()
    }

    async fn call(&self, name: &str, input: &serde_json::Value) -> crate::tools::ToolOutput {
        let mut out = self.inner.call(name, input).await;
        let clean = if FILE_TOOLS.contains(&name) {
            self.redactor.redact_file_text(&out.content)
        } else {
            self.redactor.redact(&out.content)
        };
        if let std::borrow::Cow::Owned(clean) = clean {
            out.content = clean;
        }
        out
    }

    /// The run's changes, as diffs of files.
    fn state(&self) -> Option<String> {
        self.inner.state().map(|s| self.redactor.redact_file_text(&s).into_owned())
    }
}

/// `commands.autoApprove`: every configured command may run.
struct AutoApprove;

#[async_trait::async_trait]
impl Approver for AutoApprove {
    async fn approve(&self, _: &str, _: &[String]) -> Approval {
        Approval::Always
    }
}

/// How a fix ended, decided once here for every front end: the LSP server
/// turns it into a message and an edit, the CLI into a diff and an exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The run was cancelled (by the user, the request or the end of the
    /// session); nothing is proposed.
    Cancelled,
    /// A limit stopped the run and `partialEdits` is `discard`: the edits to
    /// `files` files were dropped. `reason` says which limit.
    Discarded { files: usize, reason: String },
    /// The run ended without an edit.
    NoEdit(NoEdit),
    /// Edits to propose.
    Proposal(Proposal),
}

/// Why a run ended without an edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoEdit {
    /// The model API failed; the message says what to do.
    ModelError(String),
    /// The model finished without editing; its summary (maybe empty) says why.
    Finished(String),
    /// A limit or a failing tool stopped the run first; the reason says which.
    Stopped(String),
    /// An OpenAI-compatible server's model answered its first turn without
    /// calling any tool: the server most likely dropped the tools
    /// ([`NO_TOOL_CALL`] says how to make it pass them). The model's text,
    /// cut by [`brief`].
    NoToolCall(String),
}

/// What a compatible server needs to show the tools to its model.
pub const NO_TOOL_CALL: &str = "the model called no tool; the server may not have passed the tools to it \
     (llama-server: start it with --jinja and a chat template that supports tools; \
     llama-cpp-python: --chat_format chatml-function-calling)";

/// Lines and characters of a model's text shown in a message.
const BRIEF_LINES: usize = 3;
const BRIEF_CHARS: usize = 300;

/// `text` cut to its first [`BRIEF_LINES`] non-empty lines and
/// [`BRIEF_CHARS`] characters, with `…` where something was left out: a
/// small model's rambling answer is no message to show whole.
pub fn brief(text: &str) -> String {
    let lines: Vec<&str> = text.lines().map(str::trim_end).filter(|l| !l.trim().is_empty()).collect();
    let mut out = lines.iter().take(BRIEF_LINES).copied().collect::<Vec<_>>().join("\n");
    let mut cut = lines.len() > BRIEF_LINES;
    if out.chars().count() > BRIEF_CHARS {
        out = out.chars().take(BRIEF_CHARS).collect::<String>().trim_end().to_string();
        cut = true;
    }
    if cut {
        out.push('…');
    }
    out
}

/// The edits of a run, to review.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposal {
    /// One per changed file.
    pub changes: Vec<FileChange>,
    /// The model's closing text.
    pub summary: String,
    /// Why the run stopped before the model finished, when it did (the
    /// edits are then partial, offered because `partialEdits` is `offer`).
    pub stopped_early: Option<String>,
}

impl Verdict {
    /// Decides how a run that ended with `outcome` and left `changes` went.
    /// `compatible`: the provider is an OpenAI-compatible server, which may
    /// drop the tools silently.
    fn of(
        outcome: &Outcome,
        changes: Vec<FileChange>,
        cancelled: bool,
        limits: &Limits,
        partial: PartialEdits,
        compatible: bool,
    ) -> Self {
        let reason = outcome.stop.describe(limits);
        if cancelled || outcome.stop == Stop::Cancelled {
            return Verdict::Cancelled;
        }
        let natural = outcome.stop.is_natural();
        if !natural && partial == PartialEdits::Discard && !changes.is_empty() {
            return Verdict::Discarded { files: changes.len(), reason };
        }
        if changes.is_empty() {
            let no_call = !outcome.messages.iter().any(|m| m.tool_calls().next().is_some());
            return Verdict::NoEdit(match &outcome.stop {
                Stop::ModelError(e) => NoEdit::ModelError(e.message.clone()),
                s if s.is_natural() && compatible && outcome.turns == 1 && no_call => {
                    NoEdit::NoToolCall(brief(outcome.summary.trim()))
                }
                s if s.is_natural() => NoEdit::Finished(brief(outcome.summary.trim())),
                _ => NoEdit::Stopped(reason),
            });
        }
        Verdict::Proposal(Proposal {
            changes,
            summary: outcome.summary.clone(),
            stopped_early: (!natural).then_some(reason),
        })
    }
}

/// What a run used: its tokens by kind, and their cost when the model's
/// price is known.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Spend {
    pub tokens: TokenCounts,
    pub cost_usd: Option<f64>,
    /// The server reported no usage for some response; its tokens are
    /// estimated from the bytes ([`Usage::estimated`]).
    pub estimated: bool,
}

impl Spend {
    pub fn of(usage: &Usage, price: Option<Price>) -> Self {
        let tokens = usage.tokens();
        Self { tokens, cost_usd: price.map(|p| p.cost(&tokens)), estimated: usage.estimated }
    }

    /// `41,250 tokens, $0.07` (or without the cost; `~41,250 tokens
    /// (estimated)` when the server reported none): the one way tokens and
    /// cost are shown, in progress lines, labels and the CLI's last line.
    pub fn describe(&self) -> String {
        let tokens = format_tokens(self.tokens.prompt() + self.tokens.output);
        let tokens = if self.estimated { format!("~{tokens} (estimated)") } else { tokens };
        match self.cost_usd {
            Some(c) => format!("{tokens}, {}", format_usd(c)),
            None => tokens,
        }
    }

    /// `6 turns, 41,250 tokens, $0.07`: [`Spend::describe`] after the turns.
    pub fn with_turns(&self, turns: u32) -> String {
        format!("{turns} turn{}, {}", if turns == 1 { "" } else { "s" }, self.describe())
    }
}

/// The result of one fix.
pub struct FixResult {
    pub outcome: Outcome,
    pub verdict: Verdict,
    /// The tokens and cost of the run.
    pub spend: Spend,
    pub limits: Limits,
    /// The transcript file, when transcripts are on.
    pub transcript: Option<PathBuf>,
}

impl FixResult {
    /// The proposed changes; none unless the verdict is a proposal.
    pub fn changes(&self) -> &[FileChange] {
        match &self.verdict {
            Verdict::Proposal(p) => &p.changes,
            _ => &[],
        }
    }

    /// Whether the model API failed (the CLI's exit code 3), whatever was
    /// proposed before it did.
    pub fn model_failed(&self) -> bool {
        matches!(self.outcome.stop, Stop::ModelError(_))
    }
}

/// What both front ends need before a run: the configuration in force and
/// the model client it names.
pub struct Setup {
    pub config: Config,
    pub model: Arc<dyn ModelClient>,
}

impl Setup {
    /// Loads the configuration for `root` over the editor's settings, and
    /// the provider it names.
    pub fn load(root: Option<&Path>, editor: &Settings) -> Result<Self, ConfigError> {
        let config = Config::load(root, editor)?;
        let model = crate::providers::from_config(&config.provider)?;
        Ok(Self { config, model })
    }

    /// The run's view of `roots`: the configured `exclude` patterns on top of
    /// the built-in protected files.
    pub fn workspace(&self, roots: Vec<PathBuf>) -> Workspace {
        Workspace::new(roots).with_protected(&self.config.exclude)
    }

    /// The downstream language servers the configuration asks for, over `roots`.
    pub fn downstream(&self, roots: Vec<PathBuf>) -> Downstream {
        Downstream::from_config(&self.config.downstream, roots)
    }
}

/// Runs one fix to the end over `overlay` (fresh, owned by the caller so it
/// can watch what the run edits); with `past`, as a follow-up that continues
/// that run's conversation. Nothing is written anywhere but the transcript.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    config: &Config,
    model: &dyn ModelClient,
    overlay: Arc<Overlay>,
    symbols: Option<Arc<dyn SymbolSource>>,
    approver: Option<Arc<dyn Approver>>,
    mcp: Option<Arc<McpServers>>,
    target: &Target,
    past: Option<&PastRun>,
    cancel: &CancellationToken,
    events: &(dyn Fn(RunEvent) + Send + Sync),
) -> FixResult {
    // Off the runtime: it reads the disk (a few small files, each opened
    // without blocking).
    let (c, ws, path) = (config.clone(), overlay.workspace().clone(), target.path.clone());
    let system = tokio::task::spawn_blocking(move || system_prompt(&c, &ws, &path)).await.unwrap_or_else(|e| {
        tracing::warn!("no project instructions: {e}");
        SYSTEM_PROMPT.to_string()
    });
    run_with_system(&system, config, model, overlay, symbols, approver, mcp, target, past, cancel, events).await
}

/// [`run`] with a given system prompt: replay sends the recorded one.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn run_with_system(
    system: &str,
    config: &Config,
    model: &dyn ModelClient,
    overlay: Arc<Overlay>,
    symbols: Option<Arc<dyn SymbolSource>>,
    approver: Option<Arc<dyn Approver>>,
    mcp: Option<Arc<McpServers>>,
    target: &Target,
    past: Option<&PastRun>,
    cancel: &CancellationToken,
    events: &(dyn Fn(RunEvent) + Send + Sync),
) -> FixResult {
    let started = std::time::Instant::now();
    let root = overlay.workspace().primary_root().to_path_buf();
    // Symbol tools only when a language server exists for the target.
    let symbols = symbols.filter(|s| s.available(&target.path));
    let outline = outline(symbols.as_deref(), &overlay, target, cancel).await;
    // The first message quotes the target's file (and a follow-up the
    // user's changes): scrubbed as the file tools' results are.
    let redactor = config.key_redactor();
    let messages = match past {
        Some(past) => {
            let report = follow_up::report(past, &overlay, target.instruction.as_deref());
            follow_up::continued(&past.messages, redactor.redact_file_text(&report).into_owned())
        }
        None => {
            let prompt = task_prompt(target, &overlay, outline.as_deref());
            vec![Message::user_text(redactor.redact_file_text(&prompt).into_owned())]
        }
    };
    let ctx = ToolContext {
        overlay: overlay.clone(),
        symbols: symbols.clone(),
        target: target.path.clone(),
        editor_diagnostics: target.problems.clone(),
    };
    let mut toolbox = toolbox(config, ctx, approver.clone());
    if let Some(mcp) = mcp.filter(|m| !m.is_empty()) {
        // The specs go with the first request: the servers must have listed
        // their tools by then (once per session; later runs use the list).
        let taken: Vec<String> = toolbox.specs().into_iter().map(|s| s.name).collect();
        tokio::select! {
            _ = cancel.cancelled() => {}
            tools = mcp.tools(&taken, approver) => tools.into_iter().for_each(|t| toolbox.add_external(t)),
        }
    }
    let limits = config.limits;
    let transcript = open_transcript(config);
    if let Some(t) = &transcript {
        t.start(config, &root, target, system, &toolbox.specs());
    }
    let observe = |e: RunEvent| {
        if let Some(t) = &transcript {
            t.event(&e);
        }
        events(e);
    };
    let tools = KeyScrubbed { inner: &toolbox, redactor: config.key_redactor() };
    let outcome = agent::run(system, messages, model, &tools, &limits, cancel, &observe).await;
    let changes = overlay.changes();
    if let Some(s) = &symbols {
        release(s.as_ref(), &overlay).await;
    }
    if let Some(t) = &transcript {
        t.end(&outcome, &overlay.bases(), &changes, started.elapsed().as_millis() as u64);
    }
    let compatible = config.provider.kind == crate::config::provider::ProviderKind::OpenaiCompatible;
    let verdict = Verdict::of(&outcome, changes, cancel.is_cancelled(), &limits, config.partial_edits, compatible);
    let spend = Spend::of(&outcome.usage, config.price());
    FixResult { outcome, verdict, spend, limits, transcript: transcript.map(|t| t.path().to_path_buf()) }
}

/// The enclosing symbols of the target's line for the first message, from
/// the language server, if it answers in time.
async fn outline(
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

/// The run's tools: the standard ones, and `run_command` when commands are
/// configured and someone can approve them.
fn toolbox(config: &Config, ctx: ToolContext, approver: Option<Arc<dyn Approver>>) -> Toolbox {
    let mut toolbox = Toolbox::standard(ctx).with_output_limits(config.tools.output_limits.clone());
    let commands = &config.commands;
    let (false, Some(approver)) = (commands.entries.is_empty(), approver) else { return toolbox };
    let approver: Arc<dyn Approver> = if commands.auto_approve { Arc::new(AutoApprove) } else { approver };
    let specs = commands
        .entries
        .iter()
        .map(|(name, c)| (name.clone(), CommandSpec { argv: c.argv.clone(), timeout: c.timeout }))
        .collect();
    let sandbox = match commands.sandbox {
        crate::config::commands::CommandSandbox::Off => crate::sandbox::Sandbox::Off,
        crate::config::commands::CommandSandbox::On => {
            let d = crate::sandbox::Limits::default();
            let l = &commands.limits;
            let limits = crate::sandbox::Limits {
                address_space_mb: l.address_space_mb.unwrap_or(d.address_space_mb),
                processes: l.processes.unwrap_or(d.processes),
                file_size_mb: l.file_size_mb.unwrap_or(d.file_size_mb),
                cpu_secs: l.cpu_secs.unwrap_or(d.cpu_secs),
                open_files: l.open_files.unwrap_or(d.open_files),
            };
            crate::sandbox::Sandbox::On { network: commands.network, limits }
        }
    };
    let tool = RunCommand::new(specs, approver)
        .with_sandbox(sandbox)
        .with_env_allow(commands.env_allow.clone())
        .with_read_paths(commands.read_paths.clone());
    let names = tool.names().join(", ");
    toolbox.add(tool, &format!("The configured commands are: {names}."));
    toolbox
}

/// Why the configured commands cannot run, when they are configured, the
/// sandbox is on and this system cannot give it (what is missing, how to
/// proceed): said before the run by every front end, not only when the
/// model first tries a command.
pub fn sandbox_refusal(config: &Config) -> Option<String> {
    let commands = &config.commands;
    if commands.entries.is_empty() || commands.sandbox == crate::config::commands::CommandSandbox::Off {
        return None;
    }
    let names: Vec<&str> = commands.entries.keys().map(String::as_str).collect();
    crate::sandbox::availability(crate::sandbox::Sandbox::default(), crate::sandbox::support())
        .err()
        .map(|refusal| format!("the configured commands ({}) cannot run: {refusal}", names.join(", ")))
}

/// The run's transcript, when transcripts are on and the folder is writable.
fn open_transcript(config: &Config) -> Option<Transcript> {
    let dir = config.transcripts.dir.as_deref()?;
    let secrets = config.provider.api_key.iter().map(|k| k.expose().to_string()).collect();
    Transcript::create(dir, secrets)
        .map_err(|e| tracing::warn!("no transcript: cannot write in {}: {e}", dir.display()))
        .ok()
}

/// Gives the language servers the editor's text again for every file the
/// run read.
async fn release(symbols: &dyn SymbolSource, overlay: &Overlay) {
    let docs: Vec<_> = overlay
        .bases()
        .into_iter()
        .map(|b| {
            let text = overlay.buffers().buffer(&b.path).map(|t| t.text);
            (b.path, text)
        })
        .collect();
    symbols.release(&docs).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::test_support::context;
    use std::time::Duration;

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

    /// Answers every call, and the state, with the same text.
    struct Prints(String);

    #[async_trait::async_trait]
    impl ToolSet for Prints {
        fn specs(&self) -> Vec<crate::model::ToolSpec> {
            Vec::new()
        }
        async fn call(&self, _: &str, _: &serde_json::Value) -> crate::tools::ToolOutput {
            crate::tools::ToolOutput { content: self.0.clone(), is_error: false, fatal: false }
        }
        fn state(&self) -> Option<String> {
            Some(self.0.clone())
        }
    }

    #[tokio::test]
    async fn tool_results_are_scrubbed_by_what_they_show() {
        // The attack: a command prints `~/.ssh/id_rsa` and a token.
        let key = "the-provider-key-0123";
        let printed = format!(
            "$ sh -c 'cat ~/.ssh/id_rsa; env'\n-----BEGIN OPENSSH PRIVATE KEY-----\n\
             b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n\
             -----END OPENSSH PRIVATE KEY-----\ntoken=t0k3n-value-42\nAPI key {key}\n[exit code 0]"
        );
        let inner = Prints(printed);
        let tools = KeyScrubbed { inner: &inner, redactor: crate::secrets::Redactor::new([key.to_string()]) };
        let full = "$ sh -c 'cat ~/.ssh/id_rsa; env'\n[REDACTED]\ntoken=[REDACTED]\nAPI key [REDACTED]\n[exit code 0]";
        let file =
            "$ sh -c 'cat ~/.ssh/id_rsa; env'\n[REDACTED]\ntoken=t0k3n-value-42\nAPI key [REDACTED]\n[exit code 0]";
        let input = serde_json::json!({});
        for name in ["run_command", "diagnostics", "mcp__github__get_file", "a_tool_added_later"] {
            assert_eq!(tools.call(name, &input).await.content, full, "{name}");
        }
        for name in FILE_TOOLS {
            assert_eq!(tools.call(name, &input).await.content, file, "{name}");
        }
        assert_eq!(tools.state().as_deref(), Some(file));
    }

    /// Small limits for the verdict tests.
    fn test_limits() -> Limits {
        Limits {
            max_turns: 4,
            max_tokens: 1000,
            max_output_tokens: 100,
            context_budget: 100_000,
            context_editing: crate::config::limits::ContextEditing::Economy,
            timeout: Duration::from_secs(9),
            max_cost: None,
        }
    }

    #[test]
    fn the_verdict_is_decided_once_in_order_cancel_discard_no_edit_proposal() {
        use crate::model::{ModelError, ModelErrorKind, Usage};
        let limits = test_limits();
        let outcome = |stop: Stop| Outcome {
            stop,
            turns: 1,
            usage: Usage::default(),
            summary: " Fixed the guard.\n".into(),
            messages: Vec::new(),
        };
        let change = FileChange {
            path: "/w/a.py".into(),
            display: "a.py".into(),
            version: None,
            pin: None,
            original: Some("a\n".into()),
            new_text: "b\n".into(),
            reasons: Vec::new(),
        };
        let (offer, discard) = (PartialEdits::Offer, PartialEdits::Discard);
        let v = |stop, changes: Vec<FileChange>, cancelled, partial| {
            Verdict::of(&outcome(stop), changes, cancelled, &limits, partial, false)
        };
        // Cancelled wins, by the loop or by the token after it ended.
        assert_eq!(v(Stop::Cancelled, vec![change.clone()], false, offer), Verdict::Cancelled);
        assert_eq!(v(Stop::EndTurn, vec![change.clone()], true, offer), Verdict::Cancelled);
        // A limit with partialEdits = discard drops the edits, and says which limit.
        assert_eq!(
            v(Stop::MaxTurns, vec![change.clone()], false, discard),
            Verdict::Discarded { files: 1, reason: "the run reached maxTurns (4)".into() }
        );
        // A natural end keeps its edits whatever partialEdits says.
        let Verdict::Proposal(p) = v(Stop::EndTurn, vec![change.clone()], false, discard) else { panic!() };
        assert_eq!((p.changes.len(), p.stopped_early), (1, None));
        assert_eq!(p.summary, " Fixed the guard.\n");
        // A limit with partialEdits = offer offers them, stopped early.
        let Verdict::Proposal(p) = v(Stop::MaxTurns, vec![change], false, offer) else { panic!() };
        assert_eq!(p.stopped_early.as_deref(), Some("the run reached maxTurns (4)"));
        // No edit: why.
        let error = ModelError::new(ModelErrorKind::Auth, Some(401), "bad key");
        assert_eq!(
            v(Stop::ModelError(error), vec![], false, discard),
            Verdict::NoEdit(NoEdit::ModelError("bad key".into()))
        );
        assert_eq!(
            v(Stop::EndTurn, vec![], false, offer),
            Verdict::NoEdit(NoEdit::Finished("Fixed the guard.".into()))
        );
        assert_eq!(
            v(Stop::MaxTurns, vec![], false, discard),
            Verdict::NoEdit(NoEdit::Stopped("the run reached maxTurns (4)".into()))
        );
    }

    #[test]
    fn a_compatible_server_whose_model_calls_no_tool_is_told_how_to_pass_tools_and_texts_are_cut() {
        let limits = test_limits();
        let talk = "I'm ready to help.\nWhat's the task?\nTell me more.\nAnd more.";
        let outcome = Outcome {
            stop: Stop::EndTurn,
            turns: 1,
            usage: crate::model::Usage::default(),
            summary: talk.into(),
            messages: vec![Message::user_text("fix")],
        };
        let v = |compatible| Verdict::of(&outcome, vec![], false, &limits, PartialEdits::Offer, compatible);
        let cut = "I'm ready to help.\nWhat's the task?\nTell me more.…";
        assert_eq!(v(true), Verdict::NoEdit(NoEdit::NoToolCall(cut.into())));
        assert_eq!(v(false), Verdict::NoEdit(NoEdit::Finished(cut.into())));
        assert!(NO_TOOL_CALL.contains("--jinja") && NO_TOOL_CALL.contains("--chat_format chatml-function-calling"));
        let long = brief(&"x".repeat(1000));
        assert_eq!((long.chars().count(), long.ends_with('…')), (301, true));
        assert_eq!(brief("short"), "short");
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
    fn progress_lines_name_the_calls_and_the_tokens_so_far() {
        use crate::model::{Message, ModelResponse, StopReason, Usage};
        let lines = ProgressLines::default();
        lines.line(&RunEvent::Request { turn: 2, new_messages: vec![], max_output_tokens: 1, allow_tools: true });
        let response = ModelResponse {
            message: Message::user_text("x"),
            stop_reason: StopReason::ToolUse,
            usage: Usage { input_tokens: 4000, output_tokens: 600, ..Default::default() },
        };
        assert_eq!(lines.line(&RunEvent::Response { turn: 2, response, elapsed_ms: 1 }), None);
        let line = lines.line(&RunEvent::ToolCalls { turn: 2, calls: vec!["read_file a.py".into()] }).unwrap();
        assert_eq!(line, ProgressLine { text: "turn 2: read_file a.py (4,600 tokens)".into(), streaming: false });
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

    fn text_line(lines: &ProgressLines, piece: &str) -> String {
        let line = lines.line(&RunEvent::Stream(StreamUpdate::Text(piece.into()))).unwrap();
        assert!(line.streaming);
        line.text
    }

    /// What the progress line showed before it kept only a tail: the whole
    /// text flattened, its last 80 characters.
    fn flattened_tail(text: &str) -> String {
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let chars: Vec<char> = flat.chars().collect();
        chars[chars.len().saturating_sub(80)..].iter().collect()
    }

    #[test]
    fn streamed_text_shows_its_flattened_tail_and_keeps_only_that() {
        let lines = ProgressLines::default();
        lines.line(&RunEvent::Request { turn: 3, new_messages: vec![], max_output_tokens: 1, allow_tools: true });
        assert_eq!(text_line(&lines, "  \n "), "turn 3: ");
        assert_eq!(text_line(&lines, "Let me\n\n  look"), "turn 3: Let me look");
        assert_eq!(text_line(&lines, " "), "turn 3: Let me look", "trailing whitespace waits for the next word");
        assert_eq!(text_line(&lines, "\tat 漢字 😀"), "turn 3: Let me look at 漢字 😀");
        // 128 KB in 7-character pieces: the line is the tail, and only a bounded tail is kept.
        let mut all = String::from("  \n Let me\n\n  look \tat 漢字 😀");
        let word: String = (0..20_000).map(|i| format!("wörd{i}{}", if i % 9 == 0 { "\n\n" } else { " " })).collect();
        let chars: Vec<char> = word.chars().collect();
        for (n, piece) in chars.chunks(7).enumerate() {
            let piece: String = piece.iter().collect();
            all.push_str(&piece);
            let line = text_line(&lines, &piece);
            // The reference flattens the whole text: only now and then, or the test is quadratic.
            if n % 499 == 0 || n == chars.len().div_ceil(7) - 1 {
                assert_eq!(line, format!("turn 3: {}", flattened_tail(&all)));
            }
            let kept = lines.text.lock().unwrap();
            assert!(kept.text.chars().count() < 2 * TAIL_CHARS + 1, "kept {} chars", kept.text.len());
            assert!(kept.text.capacity() < 4 * 4 * TAIL_CHARS, "capacity {}", kept.text.capacity());
        }
        assert!(all.len() > 128 * 1024);
        // A new request starts a new text.
        lines.line(&RunEvent::Request { turn: 4, new_messages: vec![], max_output_tokens: 1, allow_tools: true });
        assert_eq!(text_line(&lines, "Done."), "turn 4: Done.");
    }

    proptest::proptest! {
        #[test]
        fn the_tail_is_the_end_of_the_flattened_text(pieces in proptest::collection::vec("[a b\n\t\u{3000}é😀]{0,40}", 0..40)) {
            let lines = ProgressLines::default();
            let mut all = String::new();
            for piece in &pieces {
                all.push_str(piece);
                proptest::prop_assert_eq!(text_line(&lines, piece), format!("turn 0: {}", flattened_tail(&all)));
            }
        }
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
