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
//! scrubbed of it anyway, and of anything shaped like a credential (see
//! `secrets::Redactor`). Protected files are never read, so never recorded.
//! Transcripts are readable by their owner only (mode 0600, folder 0700).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::{Value, json};

use crate::agent::{Outcome, RunEvent};
use crate::config::Config;
use crate::fix::Target;
use crate::model::{Block, Message, ModelResponse, Role, StopReason, ToolSpec, Usage};
use crate::secrets::Redactor;
use crate::workspace::{FileBase, FileChange};

/// Format version of the transcript lines.
pub const VERSION: u32 = 1;

/// A transcript being written. Write errors are logged once and then the
/// transcript goes quiet: a full disk must not break a fix.
pub struct Transcript {
    path: PathBuf,
    out: Mutex<Option<BufWriter<File>>>,
    redactor: Redactor,
}

/// Every string in `v` (keys included) with secrets scrubbed.
fn scrub(v: Value, r: &Redactor) -> Value {
    match v {
        Value::String(s) => Value::String(r.redact(&s).into_owned()),
        Value::Array(a) => Value::Array(a.into_iter().map(|v| scrub(v, r)).collect()),
        Value::Object(o) => {
            Value::Object(o.into_iter().map(|(k, v)| (r.redact(&k).into_owned(), scrub(v, r))).collect())
        }
        other => other,
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

    fn write(&self, record: Value) {
        let line = scrub(record, &self.redactor).to_string();
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(w) = out.as_mut()
            && let Err(e) = writeln!(w, "{line}").and_then(|_| w.flush())
        {
            tracing::warn!(path = %self.path.display(), "transcript disabled: {e}");
            *out = None;
        }
    }

    pub fn start(&self, config: &Config, root: &Path, target: &Target, system: &str, tools: &[ToolSpec]) {
        self.write(json!({
            "type": "start",
            "version": VERSION,
            "agentfix": env!("CARGO_PKG_VERSION"),
            "config": {
                "provider": config.provider.name(),
                "model": config.model,
                "baseUrl": config.base_url,
                "apiKey": if config.api_key.is_some() { "set" } else { "not set" },
                "maxTurns": config.max_turns,
                "maxTokens": config.max_tokens,
                "maxOutputTokens": config.max_output_tokens,
                "timeoutSecs": config.timeout.as_secs(),
            },
            "root": root,
            "target": {
                "path": target.path,
                "lines": [target.lines.0, target.lines.1],
                "instruction": target.instruction,
                "problems": target.problems.iter().map(|p| json!({
                    "line": p.line, "column": p.column, "severity": p.severity,
                    "source": p.source, "code": p.code, "message": p.message,
                })).collect::<Vec<_>>(),
            },
            "system": system,
            "tools": tools.iter().map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema})).collect::<Vec<_>>(),
        }));
    }

    pub fn event(&self, event: &RunEvent) {
        let record = match event {
            RunEvent::Request { turn, new_messages, max_output_tokens, allow_tools } => json!({
                "type": "request", "turn": turn, "max_output_tokens": max_output_tokens, "allow_tools": allow_tools,
                "new_messages": new_messages.iter().map(message_to_json).collect::<Vec<_>>(),
            }),
            RunEvent::Response { turn, response, elapsed_ms } => json!({
                "type": "response", "turn": turn, "elapsed_ms": elapsed_ms,
                "stop_reason": stop_reason_to_json(&response.stop_reason),
                "usage": {"input_tokens": response.usage.input_tokens, "output_tokens": response.usage.output_tokens},
                "message": message_to_json(&response.message),
            }),
            RunEvent::ToolResult { turn, id, name, input, output, elapsed_ms } => json!({
                "type": "tool_result", "turn": turn, "id": id, "name": name, "input": input,
                "content": output.content, "is_error": output.is_error, "fatal": output.fatal, "elapsed_ms": elapsed_ms,
            }),
            RunEvent::ToolCalls { .. } | RunEvent::Stream(_) => return,
        };
        self.write(record);
    }

    pub fn end(&self, outcome: &Outcome, files: &[FileBase], changes: &[FileChange], elapsed_ms: u64) {
        self.write(json!({
            "type": "end",
            "stop": outcome.stop.as_str(),
            "turns": outcome.turns,
            "usage": {"input_tokens": outcome.usage.input_tokens, "output_tokens": outcome.usage.output_tokens},
            "summary": outcome.summary,
            "elapsed_ms": elapsed_ms,
            "files": files.iter().map(|f| json!({"path": f.path, "version": f.version, "source": f.source, "text": f.text})).collect::<Vec<_>>(),
            "changes": changes.iter().map(change_to_json).collect::<Vec<_>>(),
        }));
    }
}

pub fn change_to_json(c: &FileChange) -> Value {
    json!({"path": c.path, "version": c.version, "created": c.original.is_none(), "new_text": c.new_text})
}

pub fn message_to_json(m: &Message) -> Value {
    json!({
        "role": match m.role { Role::User => "user", Role::Assistant => "assistant" },
        "content": m.content.iter().map(block_to_json).collect::<Vec<_>>(),
        "raw": m.raw,
    })
}

fn block_to_json(b: &Block) -> Value {
    match b {
        Block::Text { text } => json!({"type": "text", "text": text}),
        Block::ToolUse { id, name, input } => json!({"type": "tool_use", "id": id, "name": name, "input": input}),
        Block::ToolResult { tool_use_id, content, is_error } => {
            json!({"type": "tool_result", "tool_use_id": tool_use_id, "content": content, "is_error": is_error})
        }
        Block::Other(v) => json!({"type": "other", "value": v}),
    }
}

pub fn message_from_json(v: &Value) -> Message {
    let role = if v["role"] == "assistant" { Role::Assistant } else { Role::User };
    let content = v["content"].as_array().into_iter().flatten().map(block_from_json).collect();
    let raw = if v["raw"].is_null() { None } else { Some(v["raw"].clone()) };
    Message { role, content, raw }
}

fn block_from_json(b: &Value) -> Block {
    let s = |k: &str| b[k].as_str().unwrap_or_default().to_string();
    match b["type"].as_str() {
        Some("text") => Block::Text { text: s("text") },
        Some("tool_use") => Block::ToolUse { id: s("id"), name: s("name"), input: b["input"].clone() },
        Some("tool_result") => Block::ToolResult {
            tool_use_id: s("tool_use_id"),
            content: s("content"),
            is_error: b["is_error"].as_bool().unwrap_or(false),
        },
        _ => Block::Other(b["value"].clone()),
    }
}

fn stop_reason_to_json(r: &StopReason) -> Value {
    match r {
        StopReason::EndTurn => json!("end_turn"),
        StopReason::ToolUse => json!("tool_use"),
        StopReason::MaxTokens => json!("max_tokens"),
        StopReason::StopSequence => json!("stop_sequence"),
        StopReason::PauseTurn => json!("pause_turn"),
        StopReason::Refusal { explanation } => json!({"refusal": explanation}),
        StopReason::ContextWindowExceeded => json!("model_context_window_exceeded"),
        StopReason::Other(s) => json!({"other": s}),
    }
}

fn stop_reason_from_json(v: &Value) -> StopReason {
    match v.as_str() {
        Some("end_turn") => StopReason::EndTurn,
        Some("tool_use") => StopReason::ToolUse,
        Some("max_tokens") => StopReason::MaxTokens,
        Some("stop_sequence") => StopReason::StopSequence,
        Some("pause_turn") => StopReason::PauseTurn,
        Some("model_context_window_exceeded") => StopReason::ContextWindowExceeded,
        Some(other) => StopReason::Other(other.to_string()),
        None if v.get("refusal").is_some() => {
            StopReason::Refusal { explanation: v["refusal"].as_str().map(str::to_string) }
        }
        None => StopReason::Other(v["other"].as_str().unwrap_or_default().to_string()),
    }
}

/// A recorded response, for replay.
pub fn response_from_json(v: &Value) -> ModelResponse {
    ModelResponse {
        message: message_from_json(&v["message"]),
        stop_reason: stop_reason_from_json(&v["stop_reason"]),
        usage: Usage {
            input_tokens: v["usage"]["input_tokens"].as_u64().unwrap_or(0),
            output_tokens: v["usage"]["output_tokens"].as_u64().unwrap_or(0),
        },
    }
}

/// Reads a transcript file into its records.
pub fn read(path: &Path) -> Result<Vec<Value>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| serde_json::from_str(l).map_err(|e| format!("{}:{}: not JSON: {e}", path.display(), i + 1)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip() {
        let m = Message {
            role: Role::Assistant,
            content: vec![
                Block::Text { text: "hi 漢".into() },
                Block::ToolUse { id: "t1".into(), name: "read_file".into(), input: json!({"path": "a"}) },
                Block::Other(json!({"type": "thinking", "signature": "s"})),
            ],
            raw: Some(json!([{"type": "text", "text": "hi 漢"}])),
        };
        assert_eq!(message_from_json(&message_to_json(&m)), m);
        let u = Message {
            role: Role::User,
            content: vec![Block::ToolResult { tool_use_id: "t1".into(), content: "x".into(), is_error: true }],
            raw: None,
        };
        assert_eq!(message_from_json(&message_to_json(&u)), u);
        for r in [
            StopReason::EndTurn,
            StopReason::Refusal { explanation: Some("no".into()) },
            StopReason::Other("new".into()),
            StopReason::PauseTurn,
        ] {
            assert_eq!(stop_reason_from_json(&stop_reason_to_json(&r)), r);
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
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(t.path()).unwrap().permissions().mode() & 0o777, 0o600);
        }
    }
}
