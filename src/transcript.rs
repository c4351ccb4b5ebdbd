//! Run transcripts: one JSON object per line, written as the run goes, and
//! read back by `agentfix replay`.
//!
//! Records, in order: `start` (configuration without secrets, target,
//! system prompt, tool declarations), then per turn `request` (the messages
//! added since the last request), `response` (the assembled answer, its stop
//! reason, usage and time) and one `tool_result` per call, and finally `end`
//! (stop reason, usage, every file the run read with the buffer version and
//! text it read, and the proposed changes). The API key never appears: it is
//! not part of what is recorded, and every string of every record is
//! scrubbed of it anyway, and of anything shaped like a credential, with
//! the strongest scrub (`secrets::Redactor::redact`: assignments such as
//! `password: …` included, even in the files' text, since nobody edits a
//! transcript). Protected files are never read, so never recorded.
//! Transcripts are readable by their owner only (mode 0600, folder 0700).
//!
//! Every line is one [`Record`]; the writer ([`Transcript`]) and the reader
//! ([`read`], used by `agentfix replay`) share these types, so the format has
//! one definition. The `start` record carries the format [`VERSION`]: a
//! transcript without one, or with a newer one, is refused with a message
//! naming the line (there is no default: version 1 is the first format, so a
//! start record without a version was not written by agentfix). Unknown
//! record types, malformed lines and missing fields are refused the same way.
//! The records hold plain data of their own (no `fix` types), so this module
//! depends only on the loop, the model types, the configuration and the
//! workspace.
//!
//! Its parts:
//! JSONL records of a run: one serde `Record` enum (`start`, `request`,
//! `response`, `tool_result`, `end`) shared by the writer and the reader,
//! every string scrubbed on write (in place: a string is copied only when
//! something in it is scrubbed; the end record's file texts, whole buffers,
//! are written from the run's own texts by `EndTexts`, not through a
//! `Value`); the format `VERSION` is checked on read, a bad line is an
//! error naming it; neutral messages to and from records

use std::borrow::Cow;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

use crate::agent::{ContextChange, Outcome, RunEvent};
use crate::config::Config;
use crate::config::limits::ContextEditing;
use crate::model::{Block, Message, ModelResponse, Role, StopReason, ToolSpec, Usage};
use crate::secrets::Redactor;
use crate::workspace::{FileBase, FileChange};

/// Format version of the transcript lines.
pub const VERSION: u32 = 1;

/// One line of a transcript, tagged by its `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Record {
    Start(StartRecord),
    Request(RequestRecord),
    Response(ResponseRecord),
    ToolResult(ToolResultRecord),
    ContextEdit(ContextEditRecord),
    Check(CheckRecord),
    End(EndRecord),
}

/// The first record: what the run was configured with and asked to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StartRecord {
    /// [`VERSION`] of the writer.
    pub version: u32,
    /// The agentfix release that wrote the transcript.
    pub agentfix: String,
    pub config: ConfigRecord,
    pub root: PathBuf,
    pub target: TargetRecord,
    pub system: String,
    #[serde(with = "tool_specs")]
    pub tools: Vec<ToolSpec>,
}

/// The configuration in force, without secrets (field names as in the settings).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigRecord {
    pub provider: String,
    pub model: String,
    pub base_url: String,
    pub api_key: KeyState,
    pub max_turns: u32,
    pub max_tokens: u64,
    pub max_output_tokens: u32,
    pub timeout_secs: u64,
    /// Absent in transcripts written before context editing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_budget: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_editing: Option<ContextEditing>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
}

/// Whether an API key was configured; the key itself is never recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum KeyState {
    #[serde(rename = "set")]
    Set,
    #[serde(rename = "not set")]
    NotSet,
}

impl ConfigRecord {
    pub fn new(config: &Config) -> Self {
        Self {
            provider: config.provider.kind.name().to_string(),
            model: config.provider.model.clone(),
            base_url: config.provider.base_url.clone(),
            api_key: if config.provider.api_key.is_some() { KeyState::Set } else { KeyState::NotSet },
            max_turns: config.limits.max_turns,
            max_tokens: config.limits.max_tokens,
            max_output_tokens: config.limits.max_output_tokens,
            timeout_secs: config.limits.timeout.as_secs(),
            context_budget: Some(config.limits.context_budget),
            context_editing: Some(config.limits.context_editing),
            max_cost_usd: config.limits.max_cost.map(|c| c.usd),
        }
    }
}

/// What the run was asked to fix (`replay` converts it to and from `fix::Target`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetRecord {
    pub path: PathBuf,
    /// 1-based, inclusive.
    pub lines: (u32, u32),
    pub instruction: Option<String>,
    pub problems: Vec<ProblemRecord>,
}

/// A diagnostic of the target (1-based).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProblemRecord {
    pub line: u32,
    pub column: u32,
    pub severity: Option<String>,
    pub source: Option<String>,
    pub code: Option<String>,
    pub message: String,
}

/// A request about to be sent: the messages added since the previous one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    pub turn: u32,
    pub max_output_tokens: u32,
    pub allow_tools: bool,
    pub new_messages: Vec<MessageRecord>,
}

/// The model's assembled answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResponseRecord {
    pub turn: u32,
    pub elapsed_ms: u64,
    pub stop_reason: StopReasonRecord,
    #[serde(with = "UsageDef")]
    pub usage: Usage,
    pub message: MessageRecord,
}

impl ResponseRecord {
    /// The recorded response, as the model client returned it.
    pub fn response(&self) -> ModelResponse {
        ModelResponse {
            message: self.message.clone().into(),
            stop_reason: self.stop_reason.clone().into(),
            usage: self.usage,
        }
    }
}

/// One finished tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResultRecord {
    pub turn: u32,
    pub id: String,
    pub name: String,
    pub input: Value,
    pub content: String,
    pub is_error: bool,
    pub fatal: bool,
    pub elapsed_ms: u64,
}

/// The context was edited before the request of `turn` (the `edit`-th edit
/// of the run): what the later `request` records' history no longer holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextEditRecord {
    pub turn: u32,
    pub edit: u32,
    #[serde(flatten)]
    pub change: ContextChangeRecord,
    /// The estimated prompt tokens before and after.
    pub tokens_before: u64,
    pub tokens_after: u64,
}

/// The run's proposal was checked at the end of `round` (`fix::verify`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckRecord {
    pub round: u32,
    /// `verified: …` or `not verified: …`; `None` when nothing was set up to
    /// check the proposal.
    pub line: Option<String>,
    pub elapsed_ms: u64,
}

/// How the context was edited, tagged by its `kind`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ContextChangeRecord {
    /// The outputs of these tool calls became one-line stubs; `reason` is
    /// `economy`, `budget` or `refused`.
    Stubbed { reason: String, tool_use_ids: Vec<String> },
    /// The `replaced` messages after the first became `summary`, appended
    /// to the first message.
    Compacted { replaced: u32, summary: String },
}

impl From<&ContextChange> for ContextChangeRecord {
    fn from(change: &ContextChange) -> Self {
        match change {
            ContextChange::Stubbed { reason, tool_use_ids } => {
                ContextChangeRecord::Stubbed { reason: reason.as_str().to_string(), tool_use_ids: tool_use_ids.clone() }
            }
            ContextChange::Compacted { replaced, summary } => {
                ContextChangeRecord::Compacted { replaced: *replaced, summary: summary.clone() }
            }
        }
    }
}

/// The last record: how the run ended, what it read and what it proposes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EndRecord {
    /// `agent::Stop::as_str`.
    pub stop: String,
    pub turns: u32,
    #[serde(with = "UsageDef")]
    pub usage: Usage,
    pub summary: String,
    pub elapsed_ms: u64,
    pub files: Vec<FileRecord>,
    pub changes: Vec<ChangeRecord>,
    /// The conversation as it ended (after any context edits), for a
    /// follow-up (`agentfix fix --continue`); absent in older transcripts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<MessageRecord>,
}

/// A file the run read, as it read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRecord {
    pub path: PathBuf,
    /// The buffer version; `None` when the run read the disk.
    pub version: Option<i32>,
    /// `buffer`, `disk` or `missing`.
    pub source: String,
    /// `None` for a missing file.
    pub text: Option<String>,
}

impl From<&FileBase> for FileRecord {
    fn from(f: &FileBase) -> Self {
        Self {
            path: f.path.clone(),
            version: f.version,
            source: f.source.to_string(),
            text: f.text.as_deref().cloned(),
        }
    }
}

/// A proposed change of one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeRecord {
    pub path: PathBuf,
    pub version: Option<i32>,
    /// The run created the file.
    pub created: bool,
    pub new_text: String,
}

impl From<&FileChange> for ChangeRecord {
    fn from(c: &FileChange) -> Self {
        Self { path: c.path.clone(), version: c.version, created: c.original.is_none(), new_text: c.new_text.clone() }
    }
}

/// A neutral message: `{role, content: [block], raw}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageRecord {
    #[serde(with = "RoleDef")]
    pub role: Role,
    pub content: Vec<BlockRecord>,
    /// The provider's own encoding (`null` for messages the harness wrote).
    pub raw: Option<Value>,
}

/// A content block; blocks the loop does not interpret are `other` with the
/// provider's block as `value`. A `tool_use` input is the object, or the
/// text of a malformed input as a JSON string ([`crate::model::ToolInput::to_value`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum BlockRecord {
    Text { text: String },
    ToolUse { id: String, name: String, input: Value },
    ToolResult { tool_use_id: String, content: String, is_error: bool },
    Other { value: Value },
}

impl From<&Message> for MessageRecord {
    fn from(m: &Message) -> Self {
        Self { role: m.role, content: m.content.iter().map(BlockRecord::from).collect(), raw: m.raw.clone() }
    }
}

impl From<MessageRecord> for Message {
    fn from(m: MessageRecord) -> Self {
        Self { role: m.role, content: m.content.into_iter().map(Block::from).collect(), raw: m.raw }
    }
}

impl From<&Block> for BlockRecord {
    fn from(b: &Block) -> Self {
        match b.clone() {
            Block::Text { text } => Self::Text { text },
            Block::ToolUse { id, name, input } => Self::ToolUse { id, name, input: input.to_value() },
            Block::ToolResult { tool_use_id, content, is_error } => Self::ToolResult { tool_use_id, content, is_error },
            Block::Other(value) => Self::Other { value },
        }
    }
}

impl From<BlockRecord> for Block {
    fn from(b: BlockRecord) -> Self {
        match b {
            BlockRecord::Text { text } => Self::Text { text },
            BlockRecord::ToolUse { id, name, input } => Self::ToolUse { id, name, input: input.into() },
            BlockRecord::ToolResult { tool_use_id, content, is_error } => {
                Self::ToolResult { tool_use_id, content, is_error }
            }
            BlockRecord::Other { value } => Self::Other(value),
        }
    }
}

/// A stop reason: its API name (`"end_turn"`, `"model_context_window_exceeded"`,
/// …), `{"refusal": explanation}` or `{"other": name}`. An unknown name reads
/// as `StopReason::Other`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum StopReasonRecord {
    Name(String),
    // Before `Refusal`, whose only field may be absent.
    Other { other: String },
    Refusal { refusal: Option<String> },
}

impl From<&StopReason> for StopReasonRecord {
    fn from(r: &StopReason) -> Self {
        let name = |s: &str| Self::Name(s.to_string());
        match r {
            StopReason::EndTurn => name("end_turn"),
            StopReason::ToolUse => name("tool_use"),
            StopReason::MaxTokens => name("max_tokens"),
            StopReason::StopSequence => name("stop_sequence"),
            StopReason::PauseTurn => name("pause_turn"),
            StopReason::Refusal { explanation } => Self::Refusal { refusal: explanation.clone() },
            StopReason::ContextWindowExceeded => name("model_context_window_exceeded"),
            StopReason::Other(s) => Self::Other { other: s.clone() },
        }
    }
}

impl From<StopReasonRecord> for StopReason {
    fn from(r: StopReasonRecord) -> Self {
        match r {
            StopReasonRecord::Name(s) => match s.as_str() {
                "end_turn" => Self::EndTurn,
                "tool_use" => Self::ToolUse,
                "max_tokens" => Self::MaxTokens,
                "stop_sequence" => Self::StopSequence,
                "pause_turn" => Self::PauseTurn,
                "model_context_window_exceeded" => Self::ContextWindowExceeded,
                _ => Self::Other(s),
            },
            StopReasonRecord::Refusal { refusal } => Self::Refusal { explanation: refusal },
            StopReasonRecord::Other { other } => Self::Other(other),
        }
    }
}

/// The on-disk shape of the model types recorded as they are.
#[derive(Serialize, Deserialize)]
#[serde(remote = "Role", rename_all = "lowercase")]
enum RoleDef {
    User,
    Assistant,
}

#[derive(Serialize, Deserialize)]
#[serde(remote = "Usage")]
struct UsageDef {
    input_tokens: u64,
    output_tokens: u64,
    /// Absent in transcripts written before caching, and when zero.
    #[serde(default, skip_serializing_if = "is_zero")]
    cache_read_tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    cache_write_tokens: u64,
    /// Absent unless the server reported no usage.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    estimated: bool,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Serialize, Deserialize)]
#[serde(remote = "ToolSpec")]
struct ToolSpecDef {
    name: String,
    description: String,
    input_schema: Value,
}

/// `Vec<ToolSpec>` through [`ToolSpecDef`].
mod tool_specs {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::{ToolSpec, ToolSpecDef};

    #[derive(Serialize, Deserialize)]
    struct Spec(#[serde(with = "ToolSpecDef")] ToolSpec);

    pub fn serialize<S: Serializer>(tools: &[ToolSpec], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(tools.iter().map(|t| Spec(t.clone())))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<ToolSpec>, D::Error> {
        Ok(Vec::<Spec>::deserialize(d)?.into_iter().map(|s| s.0).collect())
    }
}

/// A transcript being written. Write errors are logged once and then the
/// transcript goes quiet: a full disk must not break a fix.
pub struct Transcript {
    path: PathBuf,
    out: Mutex<Option<BufWriter<File>>>,
    redactor: Redactor,
}

/// Scrubs secrets from every string in `v` (keys included), in place: a
/// string with nothing to scrub is not copied.
fn scrub(v: &mut Value, r: &Redactor) {
    match v {
        Value::String(s) => {
            if let Cow::Owned(scrubbed) = r.redact(s) {
                *s = scrubbed;
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|v| scrub(v, r)),
        Value::Object(o) => {
            if o.keys().any(|k| matches!(r.redact(k), Cow::Owned(_))) {
                *o = std::mem::take(o).into_iter().map(|(k, v)| (r.redact(&k).into_owned(), v)).collect();
            }
            o.values_mut().for_each(|v| scrub(v, r));
        }
        _ => {}
    }
}

/// The end record's `files` and `changes`, borrowed from the run: their
/// texts (whole buffers) are scrubbed and written as they stream out. Made
/// into a `Value` they were copied four times over (the record, its value,
/// the scrub, the line), a 50 MB buffer's 200 MB at the end of a run.
struct EndTexts<'a> {
    files: &'a [FileBase],
    changes: &'a [FileChange],
}

impl EndTexts<'_> {
    fn paths(&self) -> impl Iterator<Item = &Path> {
        self.files.iter().map(|f| f.path.as_path()).chain(self.changes.iter().map(|c| c.path.as_path()))
    }
}

/// A record's line: `record` (scrubbed, keys sorted) with, for the end
/// record, its `files` and `changes` from `end` (as `FileRecord` and
/// `ChangeRecord` write them, keys sorted).
struct Line<'a> {
    record: &'a Value,
    end: Option<EndTexts<'a>>,
    redactor: &'a Redactor,
}

/// `FileRecord`, borrowed, its fields in sorted order.
#[derive(Serialize)]
struct FileLine<'a> {
    path: Cow<'a, str>,
    source: Cow<'a, str>,
    text: Option<Cow<'a, str>>,
    version: Option<i32>,
}

/// `ChangeRecord`, borrowed, its fields in sorted order.
#[derive(Serialize)]
struct ChangeLine<'a> {
    created: bool,
    new_text: Cow<'a, str>,
    path: Cow<'a, str>,
    version: Option<i32>,
}

impl Serialize for Line<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (Value::Object(record), Some(end)) = (self.record, &self.end) else { return self.record.serialize(s) };
        let r = self.redactor;
        // Checked by `record_with` before anything is written.
        let path = |p: &'_ Path| r.redact(p.to_str().unwrap_or_default()).into_owned();
        let mut map = s.serialize_map(Some(record.len()))?;
        for (key, value) in record {
            match key.as_str() {
                "files" => map.serialize_entry(
                    key,
                    &Seq(|| {
                        end.files.iter().map(|f| FileLine {
                            path: Cow::Owned(path(&f.path)),
                            source: r.redact(f.source),
                            text: f.text.as_deref().map(|t| r.redact(t)),
                            version: f.version,
                        })
                    }),
                )?,
                "changes" => map.serialize_entry(
                    key,
                    &Seq(|| {
                        end.changes.iter().map(|c| ChangeLine {
                            created: c.original.is_none(),
                            new_text: r.redact(&c.new_text),
                            path: Cow::Owned(path(&c.path)),
                            version: c.version,
                        })
                    }),
                )?,
                _ => map.serialize_entry(key, value)?,
            }
        }
        map.end()
    }
}

/// A sequence made as it is written.
struct Seq<F>(F);

impl<F, I> Serialize for Seq<F>
where
    F: Fn() -> I,
    I: Iterator<Item: Serialize>,
{
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq((self.0)())
    }
}

impl Transcript {
    /// Creates `dir/<time>-<pid>-<n>.jsonl`.
    pub fn create(dir: &Path, secrets: Vec<String>) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        }
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = dir.join(format!("{}-{}-{n}.jsonl", now.as_millis(), std::process::id()));
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let file = options.open(&path)?;
        Ok(Self { path, out: Mutex::new(Some(BufWriter::new(file))), redactor: Redactor::new(secrets) })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `record` as one line, every string scrubbed.
    pub fn record(&self, record: &Record) {
        self.record_with(record, None);
    }

    /// Writes `record` as one line, every string scrubbed, with the end
    /// record's `files` and `changes` (empty in `record`) taken from `end`.
    fn record_with(&self, record: &Record, end: Option<EndTexts<'_>>) {
        if let Some(end) = &end
            && let Some(path) = end.paths().find(|p| p.to_str().is_none())
        {
            // What serde refuses in a path; checked first, as nothing of a line may be written before it fails.
            return tracing::warn!(path = %self.path.display(), "transcript record left out: {} is not UTF-8", path.display());
        }
        match serde_json::to_value(record) {
            Ok(v) => self.write_line(v, end),
            // A path that is not UTF-8: the record is left out, the run goes on.
            Err(e) => tracing::warn!(path = %self.path.display(), "transcript record left out: {e}"),
        }
    }

    #[cfg(test)]
    fn write(&self, record: Value) {
        self.write_line(record, None);
    }

    fn write_line(&self, mut record: Value, end: Option<EndTexts<'_>>) {
        scrub(&mut record, &self.redactor);
        // Keys sorted, as version 1 writes them, whatever order serde_json's
        // maps keep (the ACP SDK turns on `preserve_order`).
        record.sort_all_objects();
        let line = Line { record: &record, end, redactor: &self.redactor };
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(w) = out.as_mut()
            && let Err(e) = serde_json::to_writer(&mut *w, &line)
                .map_err(std::io::Error::from)
                .and_then(|()| w.write_all(b"\n"))
                .and_then(|()| w.flush())
        {
            tracing::warn!(path = %self.path.display(), "transcript disabled: {e}");
            *out = None;
        }
    }

    /// The `start` record. `target` is the fix's target (`fix::Target`
    /// converts, see `replay`).
    pub fn start(
        &self,
        config: &Config,
        root: &Path,
        target: impl Into<TargetRecord>,
        system: &str,
        tools: &[ToolSpec],
    ) {
        self.record(&Record::Start(StartRecord {
            version: VERSION,
            agentfix: env!("CARGO_PKG_VERSION").to_string(),
            config: ConfigRecord::new(config),
            root: root.to_path_buf(),
            target: target.into(),
            system: system.to_string(),
            tools: tools.to_vec(),
        }));
    }

    pub fn event(&self, event: &RunEvent) {
        let record = match event {
            RunEvent::Request { turn, new_messages, max_output_tokens, allow_tools } => {
                Record::Request(RequestRecord {
                    turn: *turn,
                    max_output_tokens: *max_output_tokens,
                    allow_tools: *allow_tools,
                    new_messages: new_messages.iter().map(MessageRecord::from).collect(),
                })
            }
            RunEvent::Response { turn, response, elapsed_ms } => Record::Response(ResponseRecord {
                turn: *turn,
                elapsed_ms: *elapsed_ms,
                stop_reason: (&response.stop_reason).into(),
                usage: response.usage,
                message: (&response.message).into(),
            }),
            RunEvent::ToolResult { turn, id, name, input, output, elapsed_ms } => {
                Record::ToolResult(ToolResultRecord {
                    turn: *turn,
                    id: id.clone(),
                    name: name.clone(),
                    input: input.to_value(),
                    content: output.content.clone(),
                    is_error: output.is_error,
                    fatal: output.fatal,
                    elapsed_ms: *elapsed_ms,
                })
            }
            RunEvent::Checked { round, line, elapsed_ms } => {
                Record::Check(CheckRecord { round: *round, line: line.clone(), elapsed_ms: *elapsed_ms })
            }
            RunEvent::ContextEdited { turn, edit, change, tokens_before, tokens_after } => {
                Record::ContextEdit(ContextEditRecord {
                    turn: *turn,
                    edit: *edit,
                    change: change.into(),
                    tokens_before: *tokens_before,
                    tokens_after: *tokens_after,
                })
            }
            RunEvent::ToolCalls { .. } | RunEvent::Stream(_) | RunEvent::Candidates { .. } => return,
        };
        self.record(&record);
    }

    pub fn end(&self, outcome: &Outcome, files: &[FileBase], changes: &[FileChange], elapsed_ms: u64) {
        let record = Record::End(EndRecord {
            stop: outcome.stop.as_str().to_string(),
            turns: outcome.turns,
            usage: outcome.usage,
            summary: outcome.summary.clone(),
            elapsed_ms,
            // Written from `files` and `changes` themselves (`EndTexts`).
            files: Vec::new(),
            changes: Vec::new(),
            messages: outcome.messages.iter().map(MessageRecord::from).collect(),
        });
        self.record_with(&record, Some(EndTexts { files, changes }));
    }
}

/// Reads a transcript file into its records.
pub fn read(path: &Path) -> Result<Vec<Record>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    parse(&text).map_err(|(line, e)| format!("{}:{line}: {e}", path.display()))
}

/// The records of a transcript's text; an error carries its 1-based line.
/// Blank lines are skipped.
pub fn parse(text: &str) -> Result<Vec<Record>, (usize, String)> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| parse_line(l).map_err(|e| (i + 1, e)))
        .collect()
}

pub fn parse_line(line: &str) -> Result<Record, String> {
    let v: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    // The version first: a newer format may not decode as this one.
    if v["type"] == "start" {
        match v.get("version").map(Value::as_u64) {
            None => return Err("the start record has no `version`: not an agentfix transcript".into()),
            Some(Some(n)) if (1..=u64::from(VERSION)).contains(&n) => {}
            Some(Some(n)) if n > u64::from(VERSION) => {
                return Err(format!(
                    "transcript format version {n} is newer than this agentfix reads (up to {VERSION}); \
                     replay it with a newer agentfix"
                ));
            }
            Some(_) => return Err(format!("the start record has an invalid `version`: {}", v["version"])),
        }
    }
    serde_json::from_value(v).map_err(|e| format!("not a transcript record: {e}"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn cache_tokens_are_recorded_only_when_there_are_some() {
        #[derive(Debug, PartialEq, Serialize, Deserialize)]
        struct W(#[serde(with = "UsageDef")] Usage);
        let plain = W(Usage { input_tokens: 10, output_tokens: 2, ..Default::default() });
        assert_eq!(serde_json::to_string(&plain).unwrap(), r#"{"input_tokens":10,"output_tokens":2}"#);
        let cached = W(Usage {
            input_tokens: 10,
            output_tokens: 2,
            cache_read_tokens: 6,
            cache_write_tokens: 3,
            estimated: false,
        });
        let line = serde_json::to_string(&cached).unwrap();
        assert_eq!(line, r#"{"input_tokens":10,"output_tokens":2,"cache_read_tokens":6,"cache_write_tokens":3}"#);
        assert_eq!(serde_json::from_str::<W>(&line).unwrap(), cached);
    }

    /// Lines written by the untyped writer (`json!` per record) before the
    /// records were typed: version 1 as it exists on users' disks.
    const V1_LINES: &str = r#"{"agentfix":"0.1.0","config":{"apiKey":"not set","baseUrl":"https://api.anthropic.com","maxOutputTokens":8192,"maxTokens":2000000,"maxTurns":7,"model":"claude-sonnet-4-5","provider":"anthropic","timeoutSecs":300},"root":"/ws","system":"You are agentfix.","target":{"instruction":"guard","lines":[3,4],"path":"/ws/calc.py","problems":[{"code":null,"column":5,"line":3,"message":"division by zero","severity":"error","source":"pyright"}]},"tools":[{"description":"Reads a file.","input_schema":{"properties":{"path":{"type":"string"}},"type":"object"},"name":"read_file"}],"type":"start","version":1}
{"allow_tools":true,"max_output_tokens":8192,"new_messages":[{"content":[{"text":"Fix calc.py","type":"text"}],"raw":null,"role":"user"}],"turn":1,"type":"request"}
{"elapsed_ms":12,"message":{"content":[{"text":"Reading.","type":"text"},{"id":"toolu_1","input":{"path":"calc.py"},"name":"read_file","type":"tool_use"},{"type":"other","value":{"signature":"sig","thinking":"hm","type":"thinking"}}],"raw":[{"text":"Reading.","type":"text"}],"role":"assistant"},"stop_reason":"tool_use","turn":1,"type":"response","usage":{"input_tokens":100,"output_tokens":20}}
{"content":"1: def div(a, b):","elapsed_ms":3,"fatal":false,"id":"toolu_1","input":{"path":"calc.py"},"is_error":false,"name":"read_file","turn":1,"type":"tool_result"}
{"allow_tools":false,"max_output_tokens":8192,"new_messages":[{"content":[{"content":"1: def div(a, b):","is_error":true,"tool_use_id":"toolu_1","type":"tool_result"}],"raw":null,"role":"user"}],"turn":2,"type":"request"}
{"elapsed_ms":9,"message":{"content":[{"text":"No.","type":"text"}],"raw":null,"role":"assistant"},"stop_reason":{"refusal":"policy"},"turn":2,"type":"response","usage":{"input_tokens":150,"output_tokens":2}}
{"changes":[{"created":false,"new_text":"def div(a, b):\n    pass\n","path":"/ws/calc.py","version":4}],"elapsed_ms":40,"files":[{"path":"/ws/calc.py","source":"buffer","text":"def div(a, b):\n","version":4},{"path":"/ws/gone.py","source":"missing","text":null,"version":null}],"stop":"end_turn","summary":"Guarded b == 0.","turns":2,"type":"end","usage":{"input_tokens":250,"output_tokens":22}}"#;

    fn through_json<T: Serialize + serde::de::DeserializeOwned>(t: &T) -> T {
        serde_json::from_value(serde_json::to_value(t).unwrap()).unwrap()
    }

    #[test]
    fn messages_round_trip() {
        let m = Message {
            role: Role::Assistant,
            content: vec![
                Block::Text { text: "hi 漢".into() },
                Block::ToolUse { id: "t1".into(), name: "read_file".into(), input: json!({"path": "a"}).into() },
                Block::Other(json!({"type": "thinking", "signature": "s"})),
            ],
            raw: Some(json!([{"type": "text", "text": "hi 漢"}])),
        };
        assert_eq!(Message::from(through_json(&MessageRecord::from(&m))), m);
        let u = Message {
            role: Role::User,
            content: vec![Block::ToolResult { tool_use_id: "t1".into(), content: "x".into(), is_error: true }],
            raw: None,
        };
        assert_eq!(Message::from(through_json(&MessageRecord::from(&u))), u);
        for r in [
            StopReason::EndTurn,
            StopReason::ToolUse,
            StopReason::MaxTokens,
            StopReason::StopSequence,
            StopReason::ContextWindowExceeded,
            StopReason::Refusal { explanation: Some("no".into()) },
            StopReason::Refusal { explanation: None },
            StopReason::Other("new".into()),
            StopReason::PauseTurn,
        ] {
            assert_eq!(StopReason::from(through_json(&StopReasonRecord::from(&r))), r);
        }
        // A name this version does not know is kept.
        let unknown: StopReasonRecord = serde_json::from_value(json!("brand_new")).unwrap();
        assert_eq!(StopReason::from(unknown), StopReason::Other("brand_new".into()));
    }

    #[test]
    fn version_1_lines_read_and_write_back_byte_for_byte() {
        let records = parse(V1_LINES).expect("version 1 reads");
        assert_eq!(records.len(), 7);
        for (record, line) in records.iter().zip(V1_LINES.lines()) {
            let mut v = serde_json::to_value(record).unwrap();
            v.sort_all_objects();
            assert_eq!(v.to_string(), line);
        }
        let Record::Start(start) = &records[0] else { panic!("{:?}", records[0]) };
        assert_eq!((start.version, start.config.max_turns, start.config.api_key), (1, 7, KeyState::NotSet));
        assert_eq!(start.target.lines, (3, 4));
        assert_eq!(start.target.problems[0].code, None);
        assert_eq!(start.tools[0].name, "read_file");
        let Record::Response(first) = &records[2] else { panic!("{:?}", records[2]) };
        let response = first.response();
        assert_eq!(response.stop_reason, StopReason::ToolUse);
        assert_eq!(response.usage, Usage { input_tokens: 100, output_tokens: 20, ..Default::default() });
        assert_eq!(response.message.tool_calls().count(), 1);
        assert!(matches!(&response.message.content[2], Block::Other(v) if v["signature"] == "sig"));
        let Record::Response(refusal) = &records[5] else { panic!("{:?}", records[5]) };
        assert_eq!(refusal.response().stop_reason, StopReason::Refusal { explanation: Some("policy".into()) });
        let Record::End(end) = &records[6] else { panic!("{:?}", records[6]) };
        assert_eq!(
            end.files[1],
            FileRecord { path: "/ws/gone.py".into(), version: None, source: "missing".into(), text: None }
        );
        assert_eq!(end.changes[0].version, Some(4));
    }

    #[test]
    fn context_edits_are_recorded_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let t = Transcript::create(dir.path(), vec![]).unwrap();
        t.event(&RunEvent::ContextEdited {
            turn: 9,
            edit: 1,
            change: ContextChange::Stubbed {
                reason: crate::agent::StubReason::Economy,
                tool_use_ids: vec!["toolu_1".into(), "toolu_2".into()],
            },
            tokens_before: 30_000,
            tokens_after: 9_000,
        });
        t.event(&RunEvent::ContextEdited {
            turn: 12,
            edit: 2,
            change: ContextChange::Compacted { replaced: 14, summary: "Read calc.py; guarded b.".into() },
            tokens_before: 85_000,
            tokens_after: 12_000,
        });
        let written = std::fs::read_to_string(t.path()).unwrap();
        let lines: Vec<&str> = written.lines().collect();
        assert_eq!(
            lines[0],
            r#"{"edit":1,"kind":"stubbed","reason":"economy","tokens_after":9000,"tokens_before":30000,"tool_use_ids":["toolu_1","toolu_2"],"turn":9,"type":"context_edit"}"#
        );
        let records = read(t.path()).unwrap();
        let Record::ContextEdit(c) = &records[1] else { panic!("{:?}", records[1]) };
        assert_eq!(
            (&c.change, c.turn, c.tokens_after),
            (&ContextChangeRecord::Compacted { replaced: 14, summary: "Read calc.py; guarded b.".into() }, 12, 12_000)
        );
    }

    /// The run events of [`V1_LINES`].
    fn v1_events() -> [RunEvent; 6] {
        [
            RunEvent::Request {
                turn: 1,
                new_messages: vec![Message::user_text("Fix calc.py")],
                max_output_tokens: 8192,
                allow_tools: true,
            },
            RunEvent::Response {
                turn: 1,
                elapsed_ms: 12,
                response: ModelResponse {
                    message: Message {
                        role: Role::Assistant,
                        content: vec![
                            Block::Text { text: "Reading.".into() },
                            Block::ToolUse {
                                id: "toolu_1".into(),
                                name: "read_file".into(),
                                input: json!({"path": "calc.py"}).into(),
                            },
                            Block::Other(json!({"type": "thinking", "thinking": "hm", "signature": "sig"})),
                        ],
                        raw: Some(json!([{"type": "text", "text": "Reading."}])),
                    },
                    stop_reason: StopReason::ToolUse,
                    usage: Usage { input_tokens: 100, output_tokens: 20, ..Default::default() },
                },
            },
            RunEvent::ToolCalls { turn: 1, calls: vec!["read_file calc.py".into()] },
            RunEvent::ToolResult {
                turn: 1,
                id: "toolu_1".into(),
                name: "read_file".into(),
                input: json!({"path": "calc.py"}).into(),
                output: crate::tools::ToolOutput { content: "1: def div(a, b):".into(), is_error: false, fatal: false },
                elapsed_ms: 3,
            },
            RunEvent::Request {
                turn: 2,
                new_messages: vec![Message {
                    role: Role::User,
                    content: vec![Block::ToolResult {
                        tool_use_id: "toolu_1".into(),
                        content: "1: def div(a, b):".into(),
                        is_error: true,
                    }],
                    raw: None,
                }],
                max_output_tokens: 8192,
                allow_tools: false,
            },
            RunEvent::Response {
                turn: 2,
                elapsed_ms: 9,
                response: ModelResponse {
                    message: Message {
                        role: Role::Assistant,
                        content: vec![Block::Text { text: "No.".into() }],
                        raw: None,
                    },
                    stop_reason: StopReason::Refusal { explanation: Some("policy".into()) },
                    usage: Usage { input_tokens: 150, output_tokens: 2, ..Default::default() },
                },
            },
        ]
    }

    #[test]
    fn the_writer_writes_version_1_and_reads_it_back() {
        let dir = tempfile::tempdir().unwrap();
        let t = Transcript::create(dir.path(), vec![]).unwrap();
        let settings = crate::config::settings::Settings { max_turns: Some(7), ..Default::default() };
        let config = Config::resolve(&Default::default(), &settings, &|_| None).unwrap();
        let target = TargetRecord {
            path: "/ws/calc.py".into(),
            lines: (3, 4),
            instruction: Some("guard".into()),
            problems: vec![ProblemRecord {
                line: 3,
                column: 5,
                severity: Some("error".into()),
                source: Some("pyright".into()),
                code: None,
                message: "division by zero".into(),
            }],
        };
        let schema = json!({"type": "object", "properties": {"path": {"type": "string"}}});
        let tools =
            vec![ToolSpec { name: "read_file".into(), description: "Reads a file.".into(), input_schema: schema }];
        t.start(&config, Path::new("/ws"), target, "You are agentfix.", &tools);
        let events = v1_events();
        for e in &events {
            t.event(e);
        }
        let outcome = Outcome {
            stop: crate::agent::Stop::EndTurn,
            turns: 2,
            usage: Usage { input_tokens: 250, output_tokens: 22, ..Default::default() },
            summary: "Guarded b == 0.".into(),
            messages: vec![],
        };
        let files = [
            FileBase {
                path: "/ws/calc.py".into(),
                source: "buffer",
                version: Some(4),
                text: Some(std::sync::Arc::new("def div(a, b):\n".into())),
            },
            FileBase { path: "/ws/gone.py".into(), source: "missing", version: None, text: None },
        ];
        let changes = [FileChange {
            path: "/ws/calc.py".into(),
            display: "calc.py".into(),
            version: Some(4),
            pin: None,
            original: Some("def div(a, b):\n".into()),
            new_text: "def div(a, b):\n    pass\n".into(),
            reasons: vec![],
        }];
        t.end(&outcome, &files, &changes, 40);
        let written = std::fs::read_to_string(t.path()).unwrap();
        // The context settings joined version 1 later, as optional fields.
        let expected = V1_LINES
            .replace("\"agentfix\":\"0.1.0\"", &format!("\"agentfix\":\"{}\"", env!("CARGO_PKG_VERSION")))
            .replace(
                "\"baseUrl\":\"https://api.anthropic.com\",",
                "\"baseUrl\":\"https://api.anthropic.com\",\"contextBudget\":100000,\"contextEditing\":\"economy\",",
            );
        assert_eq!(written.lines().collect::<Vec<_>>(), expected.lines().collect::<Vec<_>>());
        let records = read(t.path()).unwrap();
        let Record::Response(r) = &records[2] else { panic!("{:?}", records[2]) };
        let RunEvent::Response { response, .. } = &events[1] else { unreachable!() };
        assert_eq!(&r.response(), response);
        let Record::End(end) = &records[6] else { panic!("{:?}", records[6]) };
        assert_eq!(end.changes, vec![ChangeRecord::from(&changes[0])]);
    }

    #[test]
    fn bad_lines_are_refused_with_their_line_number() {
        let start = V1_LINES.lines().next().unwrap();
        let err = |text: String| parse(&text).expect_err("refused");
        let (line, e) = err(format!("{start}\n\n{{\"type\": \"end\""));
        assert_eq!(line, 3);
        assert!(e.starts_with("not JSON: "), "{e}");
        let (line, e) = err(format!("{start}\n{{\"type\": \"bogus\", \"turn\": 1}}"));
        assert_eq!(line, 2);
        assert!(e.contains("unknown variant `bogus`"), "{e}");
        let (line, e) = err(format!("{start}\n{{\"type\": \"tool_result\", \"id\": \"t\"}}"));
        assert_eq!(line, 2);
        assert!(e.contains("missing field"), "{e}");
        let (line, e) = err(format!("{start}\n[1, 2]"));
        assert_eq!(line, 2);
        assert!(e.starts_with("not a transcript record: "), "{e}");

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        std::fs::write(&path, format!("{start}\nnot json\n")).unwrap();
        let e = read(&path).expect_err("refused");
        assert!(e.starts_with(&format!("{}:2: not JSON: ", path.display())), "{e}");
    }

    #[test]
    fn a_missing_or_newer_version_is_refused() {
        let start: Value = serde_json::from_str(V1_LINES.lines().next().unwrap()).unwrap();
        let with = |version: Option<Value>| {
            let mut v = start.clone();
            match version {
                Some(n) => v["version"] = n,
                None => drop(v.as_object_mut().unwrap().remove("version")),
            }
            parse(&v.to_string())
        };
        assert!(with(Some(json!(1))).is_ok());
        let (line, e) = with(None).expect_err("no version");
        assert_eq!((line, e.as_str()), (1, "the start record has no `version`: not an agentfix transcript"));
        let (line, e) = with(Some(json!(VERSION + 1))).expect_err("newer");
        assert_eq!(line, 1);
        assert!(e.starts_with(&format!("transcript format version {} is newer", VERSION + 1)), "{e}");
        let (_, e) = with(Some(json!(0))).expect_err("zero");
        assert_eq!(e, "the start record has an invalid `version`: 0");
        let (_, e) = with(Some(json!("1"))).expect_err("a string");
        assert_eq!(e, "the start record has an invalid `version`: \"1\"");
    }

    #[test]
    fn the_end_record_streams_its_texts_scrubbed_as_a_value_would_write_them() {
        let dir = tempfile::tempdir().unwrap();
        let t = Transcript::create(dir.path(), vec!["sk-ant-secret-123".into()]).unwrap();
        let outcome = Outcome {
            stop: crate::agent::Stop::EndTurn,
            turns: 1,
            usage: Usage::default(),
            summary: "sk-ant-secret-123 done".into(),
            messages: vec![],
        };
        let text = "漢字 = '😀'\r\nkey = \"sk-ant-secret-123\"\npassword: hunter22";
        let files = [
            FileBase {
                path: "/ws/sk-ant-secret-123/漢.py".into(),
                source: "buffer",
                version: Some(2),
                text: Some(std::sync::Arc::new(text.into())),
            },
            FileBase { path: "/ws/gone.py".into(), source: "missing", version: None, text: None },
        ];
        let change = |original: Option<&str>| FileChange {
            path: "/ws/new.py".into(),
            display: "new.py".into(),
            version: None,
            pin: None,
            original: original.map(String::from),
            new_text: "x = 'sk-ant-secret-123'\n".into(),
            reasons: vec![],
        };
        let changes = [change(None), change(Some("x = 1\n"))];
        t.end(&outcome, &files, &changes, 9);
        // What the whole record made into a value, scrubbed and sorted, writes.
        let mut expected = serde_json::to_value(Record::End(EndRecord {
            stop: "end_turn".into(),
            turns: 1,
            usage: Usage::default(),
            summary: outcome.summary.clone(),
            elapsed_ms: 9,
            files: files.iter().map(FileRecord::from).collect(),
            changes: changes.iter().map(ChangeRecord::from).collect(),
            messages: vec![],
        }))
        .unwrap();
        let redactor = Redactor::new(vec!["sk-ant-secret-123".into()]);
        scrub(&mut expected, &redactor);
        expected.sort_all_objects();
        let written = std::fs::read_to_string(t.path()).unwrap();
        assert_eq!(written, format!("{expected}\n"));
        assert!(!written.contains("sk-ant-secret") && !written.contains("hunter22"), "{written}");
        assert!(written.contains(r#""text":"漢字 = '😀'\r\nkey"#), "{written}");
        let Record::End(end) = &read(t.path()).unwrap()[0] else { panic!("{written}") };
        assert_eq!((end.files.len(), end.changes[0].created, end.changes[1].created), (2, true, false));
        // A path serde cannot write leaves the record out, and no part of it is written.
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            let odd = FileBase { path: std::ffi::OsStr::from_bytes(b"/ws/\xff.py").into(), ..files[1].clone() };
            t.end(&outcome, &[odd], &[], 1);
            assert_eq!(std::fs::read_to_string(t.path()).unwrap(), written);
        }
    }

    #[test]
    fn secrets_are_scrubbed_from_every_line() {
        let dir = tempfile::tempdir().unwrap();
        let t = Transcript::create(dir.path(), vec!["sk-ant-secret-123".into()]).unwrap();
        t.write(json!({"type": "x", "text": "the key is sk-ant-secret-123"}));
        // Credential-shaped strings anywhere in a record, a cut-off private key included.
        t.write(json!({"type": "tool_result", "content": [{"text": "AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA"}], "auth": "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.x"}));
        let text = std::fs::read_to_string(t.path()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "{\"text\":\"the key is [REDACTED]\",\"type\":\"x\"}");
        let second: Value = serde_json::from_str(lines[1]).expect("still JSON");
        assert_eq!(second["content"][0]["text"], "AWS_ACCESS_KEY_ID=[REDACTED]\n[REDACTED]");
        assert_eq!(second["auth"], "Authorization: Bearer [REDACTED]");
        // Every shape, in a file's text too, and in keys.
        t.write(json!({"type": "end", "files": [{"text": "DATABASE_URL=postgres://app:hunter2@db/app\npassword: hunter22\n"}],
            "token=t0k3n-value": 1}));
        let text = std::fs::read_to_string(t.path()).unwrap();
        let third: Value = serde_json::from_str(text.lines().nth(2).unwrap()).unwrap();
        assert_eq!(third["files"][0]["text"], "DATABASE_URL=postgres://app:[REDACTED]@db/app\npassword: [REDACTED]\n");
        assert_eq!(third["token=[REDACTED]"], 1);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(t.path()).unwrap().permissions().mode() & 0o777, 0o600);
        }
    }
}
