//! `agentfix replay`: re-runs a recorded session with the recorded model
//! replies instead of the network, over the file texts the session read, and
//! checks that the same tool calls, the same tool results and the same final
//! edit come out. The first divergence is reported.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::agent::RunEvent;
use crate::config::{Config, Settings};
use crate::downstream::{DiagnosticsWait, Downstream};
use crate::fix::{self, Problem, Target};
use crate::model::{ModelError, ModelErrorKind, ModelRequest, ModelResponse, StreamUpdate};
use crate::providers::ModelClient;
use crate::transcript::{self, response_from_json};
use crate::workspace::{BufferSource, BufferText, Overlay, Workspace};

/// What a replay found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub turns: u32,
    pub tool_calls: usize,
    pub changed_files: usize,
    /// `None` when the replay matched the transcript.
    pub divergence: Option<String>,
}

/// Answers with the recorded responses, in order.
struct Recorded(Mutex<VecDeque<ModelResponse>>);

#[async_trait]
impl ModelClient for Recorded {
    async fn complete(
        &self,
        _: ModelRequest<'_>,
        _: &(dyn Fn(StreamUpdate) + Send + Sync),
    ) -> Result<ModelResponse, ModelError> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).pop_front().ok_or_else(|| {
            ModelError::new(
                ModelErrorKind::InvalidRequest,
                None,
                "replay: the run asked for more model responses than were recorded",
            )
        })
    }

    async fn check(&self) -> Result<String, ModelError> {
        Ok("recorded transcript".into())
    }
}

/// The file texts the recorded run read.
struct RecordedFiles {
    buffers: HashMap<PathBuf, BufferText>,
    disk: HashMap<PathBuf, Option<String>>,
}

impl BufferSource for RecordedFiles {
    fn buffer(&self, path: &Path) -> Option<BufferText> {
        self.buffers.get(path).cloned()
    }
    fn open_paths(&self) -> Vec<PathBuf> {
        self.buffers.keys().cloned().collect()
    }
    fn disk_text(&self, path: &Path) -> Option<Option<String>> {
        self.disk.get(path).cloned()
    }
}

fn record<'a>(records: &'a [Value], kind: &str) -> Result<&'a Value, String> {
    records.iter().find(|r| r["type"] == kind).ok_or_else(|| format!("the transcript has no `{kind}` record"))
}

fn clip(s: &str) -> String {
    let c: String = s.chars().take(400).collect();
    if s.chars().count() > 400 { format!("{c}…") } else { c }
}

/// Replays `path`; `root` moves the workspace (the recorded root by default).
pub async fn replay(path: &Path, root: Option<&Path>) -> Result<Report, String> {
    let records = transcript::read(path)?;
    let start = record(&records, "start")?;
    let end = record(&records, "end")?;
    let old_root = PathBuf::from(start["root"].as_str().ok_or("the start record has no root")?);
    let new_root = root.map(Path::to_path_buf).unwrap_or_else(|| old_root.clone());
    let rebase = |p: &str| -> PathBuf {
        let p = Path::new(p);
        p.strip_prefix(&old_root).map(|rel| new_root.join(rel)).unwrap_or_else(|_| p.to_path_buf())
    };
    // Limits as recorded; no transcript of the replay itself.
    let c = &start["config"];
    let settings = Settings {
        max_turns: c["maxTurns"].as_u64().map(|n| n as u32),
        max_tokens: c["maxTokens"].as_u64(),
        max_output_tokens: c["maxOutputTokens"].as_u64().map(|n| n as u32),
        timeout_secs: c["timeoutSecs"].as_u64(),
        transcripts: Some(false),
        ..Default::default()
    };
    let config = Config::resolve(&Settings::default(), &settings, &|_| None).map_err(|e| e.to_string())?;
    let t = &start["target"];
    let target = Target {
        path: rebase(t["path"].as_str().unwrap_or_default()),
        lines: (t["lines"][0].as_u64().unwrap_or(1) as u32, t["lines"][1].as_u64().unwrap_or(1) as u32),
        instruction: t["instruction"].as_str().map(str::to_string),
        problems: t["problems"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| Problem {
                line: p["line"].as_u64().unwrap_or(1) as u32,
                column: p["column"].as_u64().unwrap_or(1) as u32,
                severity: p["severity"].as_str().map(str::to_string),
                source: p["source"].as_str().map(str::to_string),
                code: p["code"].as_str().map(str::to_string),
                message: p["message"].as_str().unwrap_or_default().to_string(),
            })
            .collect(),
    };
    let mut files = RecordedFiles { buffers: HashMap::new(), disk: HashMap::new() };
    for f in end["files"].as_array().into_iter().flatten() {
        let p = rebase(f["path"].as_str().unwrap_or_default());
        let text = f["text"].as_str().map(str::to_string);
        match (f["source"].as_str(), f["version"].as_i64(), text) {
            (Some("buffer"), Some(v), Some(text)) => {
                files.buffers.insert(p, BufferText { text, version: v as i32, pin: Default::default() });
            }
            (_, _, text) => {
                files.disk.insert(p, text);
            }
        }
    }
    let responses: VecDeque<ModelResponse> =
        records.iter().filter(|r| r["type"] == "response").map(response_from_json).collect();
    let recorded_calls: Vec<&Value> = records.iter().filter(|r| r["type"] == "tool_result").collect();
    let model = Recorded(Mutex::new(responses));
    let results: Mutex<HashMap<String, (String, Value, String, bool)>> = Mutex::new(HashMap::new());
    let events = |e: RunEvent| {
        if let RunEvent::ToolResult { id, name, input, output, .. } = e {
            results
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(id, (name, input, output.content, output.is_error));
        }
    };
    let workspace = Arc::new(Workspace::new(vec![new_root.clone()]));
    // Symbol tools replay against the language servers found here, when the
    // recorded run had them.
    let had_symbols = start["tools"].as_array().into_iter().flatten().any(|t| t["name"] == "document_symbols");
    let downstream = Arc::new(
        Downstream::new(config.language_servers.clone(), vec![new_root.clone()], DiagnosticsWait::default())
            .with_defaults(config.default_language_servers),
    );
    let symbols: Option<Arc<dyn crate::downstream::SymbolSource>> = had_symbols.then(|| downstream.clone() as _);
    let result = fix::run(
        &config,
        &model,
        Arc::new(Overlay::new(workspace, Arc::new(files))),
        symbols,
        None,
        &target,
        &CancellationToken::new(),
        &events,
    )
    .await;
    downstream.stop_all().await;
    let replayed = results.into_inner().unwrap_or_else(|e| e.into_inner());

    let mut divergence = None;
    for r in &recorded_calls {
        let id = r["id"].as_str().unwrap_or_default();
        let turn = r["turn"].as_u64().unwrap_or(0);
        let name = r["name"].as_str().unwrap_or_default();
        let Some((rname, rinput, rcontent, rerror)) = replayed.get(id) else {
            divergence = Some(format!("turn {turn}: the replay made no call `{id}` ({name})"));
            break;
        };
        let content = r["content"].as_str().unwrap_or_default();
        if rname != name || *rinput != r["input"] {
            divergence =
                Some(format!("turn {turn}, call `{id}`: recorded {name} {}, replayed {rname} {rinput}", r["input"]));
        } else if rcontent != content || *rerror != r["is_error"].as_bool().unwrap_or(false) {
            divergence = Some(format!(
                "turn {turn}, call `{id}` ({name}): the tool result differs\n  recorded: {}\n  replayed: {}",
                clip(content),
                clip(rcontent)
            ));
        }
        if divergence.is_some() {
            break;
        }
    }
    if divergence.is_none() && replayed.len() != recorded_calls.len() {
        divergence =
            Some(format!("the replay made {} tool calls, the recording {}", replayed.len(), recorded_calls.len()));
    }
    if divergence.is_none() && result.outcome.stop.as_str() != end["stop"].as_str().unwrap_or_default() {
        divergence = Some(format!(
            "the run stopped with `{}`, the recording with `{}`",
            result.outcome.stop.as_str(),
            end["stop"]
        ));
    }
    if divergence.is_none() {
        let recorded: Vec<(PathBuf, Option<i64>, String)> = end["changes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                (
                    rebase(c["path"].as_str().unwrap_or_default()),
                    c["version"].as_i64(),
                    c["new_text"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect();
        let got: Vec<(PathBuf, Option<i64>, String)> =
            result.changes().iter().map(|c| (c.path.clone(), c.version.map(i64::from), c.new_text.clone())).collect();
        if recorded != got {
            let first = recorded.iter().zip(&got).find(|(a, b)| a != b);
            divergence = Some(match first {
                Some((a, b)) => format!(
                    "the final edit differs in {}\n  recorded (version {:?}):\n{}\n  replayed (version {:?}):\n{}",
                    a.0.display(),
                    a.1,
                    clip(&a.2),
                    b.1,
                    clip(&b.2)
                ),
                None => format!("the final edit changes {} files, the recording {}", got.len(), recorded.len()),
            });
        }
    }
    Ok(Report {
        turns: result.outcome.turns,
        tool_calls: replayed.len(),
        changed_files: result.changes().len(),
        divergence,
    })
}
