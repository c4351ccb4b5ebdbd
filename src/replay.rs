//! `agentfix replay`: re-runs a recorded session with the recorded model
//! replies instead of the network, over the file texts the session read, and
//! checks that the same tool calls, the same tool results and the same final
//! edit come out. The first divergence is reported.
//!
//! Its parts:
//! `agentfix replay`: typed records read back, recorded responses as a
//! `ModelClient`, recorded files as a `BufferSource`, comparison; converts
//! `fix::Target` to and from `transcript::TargetRecord`

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::Value;

use crate::agent::RunEvent;
use crate::config::Config;
use crate::config::settings::Settings;
use crate::diagnostic::{Diagnostic, Severity};
use crate::downstream::Downstream;
use crate::fix::{self, FixResult, Request, Roots, Services, Setup, Target};
use crate::follow_up::{PastRun, ProposedFile};
use crate::model::{ModelError, ModelErrorKind, ModelRequest, ModelResponse, StreamUpdate};
use crate::position::{LineCol, LineRange};
use crate::providers::ModelClient;
use crate::transcript::{self, EndRecord, ProblemRecord, Record, StartRecord, TargetRecord, ToolResultRecord};
use crate::workspace::{BufferSource, BufferText};

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

/// `fix::Target` as the transcript records it. It lives here, where both
/// types are known, so that `transcript` does not depend on `fix`.
impl From<&Target> for TargetRecord {
    fn from(t: &Target) -> Self {
        Self {
            path: t.path.clone(),
            lines: (t.lines.first.saturating_add(1), t.lines.last.saturating_add(1)),
            instruction: t.instruction.clone(),
            problems: t
                .problems
                .iter()
                .map(|p| ProblemRecord {
                    line: p.at.line.saturating_add(1),
                    column: p.at.column.saturating_add(1),
                    severity: p.severity.map(|s| s.name().to_string()),
                    source: p.source.clone(),
                    code: p.code.clone(),
                    message: p.message.clone(),
                })
                .collect(),
        }
    }
}

/// The records replay needs, by kind (the first `start` and `end`).
struct Recording {
    start: StartRecord,
    end: EndRecord,
    responses: Vec<ModelResponse>,
    calls: Vec<ToolResultRecord>,
    /// Its checks (`verify`), one per round.
    checks: usize,
}

impl Recording {
    fn load(path: &Path) -> Result<Self, String> {
        let (mut start, mut end, mut responses, mut calls, mut checks) = (None, None, Vec::new(), Vec::new(), 0);
        for record in transcript::read(path)? {
            match record {
                Record::Start(s) => _ = start.get_or_insert(s),
                Record::End(e) => _ = end.get_or_insert(e),
                Record::Response(r) => responses.push(r.response()),
                Record::ToolResult(t) => calls.push(t),
                Record::Check(_) => checks += 1,
                Record::Request(_) | Record::ContextEdit(_) => {}
            }
        }
        let missing = |kind: &str| format!("the transcript has no `{kind}` record");
        Ok(Self {
            start: start.ok_or_else(|| missing("start"))?,
            end: end.ok_or_else(|| missing("end"))?,
            responses,
            calls,
            checks,
        })
    }
}

/// Moves recorded paths from the recorded root to the replay's.
struct Rebase {
    old: PathBuf,
    new: PathBuf,
}

impl Rebase {
    fn path(&self, p: &Path) -> PathBuf {
        p.strip_prefix(&self.old).map(|rel| self.new.join(rel)).unwrap_or_else(|_| p.to_path_buf())
    }
}

/// The recorded limits; no transcript of the replay itself.
fn config_of(start: &StartRecord) -> Result<Config, String> {
    let c = &start.config;
    let settings = Settings {
        max_turns: Some(c.max_turns),
        max_tokens: Some(c.max_tokens),
        max_output_tokens: Some(c.max_output_tokens),
        timeout_secs: Some(c.timeout_secs),
        context_budget: c.context_budget,
        context_editing: c.context_editing,
        max_cost_usd: c.max_cost_usd,
        model: Some(c.model.clone()),
        transcripts: Some(false),
        ..Default::default()
    };
    Config::resolve(&Settings::default(), &settings, &|_| None).map_err(|e| e.to_string())
}

fn target_of(t: &TargetRecord, rebase: &Rebase) -> Target {
    Target {
        path: rebase.path(&t.path),
        lines: LineRange::from_numbers(t.lines.0, t.lines.1),
        instruction: t.instruction.clone(),
        problems: t
            .problems
            .iter()
            .map(|p| Diagnostic {
                at: LineCol::new(p.line.saturating_sub(1), p.column.saturating_sub(1)),
                // Records hold `Severity::name`s; another word reads as none given.
                severity: p.severity.as_deref().and_then(|s| s.parse::<Severity>().ok()),
                source: p.source.clone(),
                code: p.code.clone(),
                message: p.message.clone(),
                ..Default::default()
            })
            .collect(),
    }
}

fn files_of(end: &EndRecord, rebase: &Rebase) -> RecordedFiles {
    let mut files = RecordedFiles { buffers: HashMap::new(), disk: HashMap::new() };
    for f in &end.files {
        let p = rebase.path(&f.path);
        match (f.source.as_str(), f.version, f.text.clone()) {
            ("buffer", Some(version), Some(text)) => {
                files.buffers.insert(p, BufferText { text, version, pin: Default::default() });
            }
            (_, _, text) => {
                files.disk.insert(p, text);
            }
        }
    }
    files
}

/// A tool call the replay made.
struct Call {
    name: String,
    input: Value,
    content: String,
    is_error: bool,
}

/// Runs the fix over the recorded files with the recorded responses; the
/// calls it made, by id.
async fn run_recorded(
    config: &Config,
    recording: &Recording,
    root: &Path,
    files: RecordedFiles,
    target: &Target,
) -> Result<(FixResult, HashMap<String, Call>), String> {
    let model = Recorded(Mutex::new(recording.responses.iter().cloned().collect()));
    let calls = Mutex::new(HashMap::new());
    let events = |e: RunEvent| {
        if let RunEvent::ToolResult { id, name, input, output, .. } = e {
            let call = Call { name, input: input.to_value(), content: output.content, is_error: output.is_error };
            calls.lock().unwrap_or_else(|e| e.into_inner()).insert(id, call);
        }
    };
    // Symbol tools replay against the language servers found here, when the
    // recorded run had them.
    let had_symbols = recording.start.tools.iter().any(|t| t.name == "document_symbols");
    let downstream = Arc::new(Downstream::from_config(&config.downstream, vec![root.to_path_buf()]));
    let symbols: Option<Arc<dyn crate::downstream::SymbolSource>> = had_symbols.then(|| downstream.clone() as _);
    let request = Request::new(target.clone());
    let prepared = Setup::new(config.clone())
        .prepare(Roots::Folders(vec![root.to_path_buf()]), &request, Arc::new(files))
        .map_err(|e| e.to_string())?
        // The system prompt the run sent (project instructions included),
        // not one built again from today's files.
        .with_system(recording.start.system.clone());
    let services = Services { symbols, ..Services::model_only(Arc::new(model), &events) };
    let result = fix::run(&prepared, services, request).await;
    downstream.stop_all().await;
    Ok((result, calls.into_inner().unwrap_or_else(|e| e.into_inner())))
}

/// The first recorded call the replay did not make the same way.
fn compare_calls(recorded: &[ToolResultRecord], replayed: &HashMap<String, Call>) -> Option<String> {
    for r in recorded {
        let (id, turn, name) = (&r.id, r.turn, &r.name);
        let Some(got) = replayed.get(id) else {
            return Some(format!("turn {turn}: the replay made no call `{id}` ({name})"));
        };
        if got.name != *name || got.input != r.input {
            return Some(format!(
                "turn {turn}, call `{id}`: recorded {name} {}, replayed {} {}",
                r.input, got.name, got.input
            ));
        }
        if got.content != r.content || got.is_error != r.is_error {
            return Some(format!(
                "turn {turn}, call `{id}` ({name}): the tool result differs\n  recorded: {}\n  replayed: {}",
                clip(&r.content),
                clip(&got.content)
            ));
        }
    }
    (replayed.len() != recorded.len())
        .then(|| format!("the replay made {} tool calls, the recording {}", replayed.len(), recorded.len()))
}

/// Whether the final edit is the recorded one.
fn compare_changes(end: &EndRecord, rebase: &Rebase, result: &FixResult) -> Option<String> {
    let recorded: Vec<(PathBuf, Option<i32>, &str)> =
        end.changes.iter().map(|c| (rebase.path(&c.path), c.version, c.new_text.as_str())).collect();
    let got: Vec<(PathBuf, Option<i32>, &str)> =
        result.changes().iter().map(|c| (c.path.clone(), c.version, c.new_text.as_str())).collect();
    if recorded == got {
        return None;
    }
    Some(match recorded.iter().zip(&got).find(|(a, b)| a != b) {
        Some((a, b)) => format!(
            "the final edit differs in {}\n  recorded (version {:?}):\n{}\n  replayed (version {:?}):\n{}",
            a.0.display(),
            a.1,
            clip(a.2),
            b.1,
            clip(b.2)
        ),
        None => format!("the final edit changes {} files, the recording {}", got.len(), recorded.len()),
    })
}

/// The first divergence: tool calls, then the stop, then the final edit.
fn compare(
    recording: &Recording,
    rebase: &Rebase,
    result: &FixResult,
    calls: &HashMap<String, Call>,
) -> Option<String> {
    compare_calls(&recording.calls, calls)
        .or_else(|| {
            let (stop, recorded) = (result.outcome.stop.as_str(), &recording.end.stop);
            (stop != recorded).then(|| format!("the run stopped with `{stop}`, the recording with `{recorded}`"))
        })
        .or_else(|| compare_changes(&recording.end, rebase, result))
}

fn clip(s: &str) -> String {
    crate::tools::shortened(s, 400)
}

/// Replays `path`; `root` moves the workspace (the recorded root by default).
pub async fn replay(path: &Path, root: Option<&Path>) -> Result<Report, String> {
    let recording = Recording::load(path)?;
    // A later round starts from the check's findings (a command's output,
    // the language servers' diagnostics), which the transcript does not
    // hold: only the first round could be replayed, and a partial replay
    // would be reported as a divergence it is not.
    if recording.checks > 1 {
        return Err(format!(
            "{}: the run took {} rounds of verification (each round after the first starts from its check's findings, which the transcript does not record); replay re-runs runs of one round only",
            path.display(),
            recording.checks
        ));
    }
    let old = recording.start.root.clone();
    let rebase = Rebase { new: root.map(Path::to_path_buf).unwrap_or_else(|| old.clone()), old };
    let config = config_of(&recording.start)?;
    let target = target_of(&recording.start.target, &rebase);
    let files = files_of(&recording.end, &rebase);
    let (result, calls) = run_recorded(&config, &recording, &rebase.new, files, &target).await?;
    let divergence = compare(&recording, &rebase, &result, &calls);
    Ok(Report {
        turns: result.outcome.turns,
        tool_calls: calls.len(),
        changed_files: result.changes().len(),
        divergence,
    })
}

/// The newest transcript in `dir` of a run on `target` (an absolute path)
/// in the workspace `root`, for `agentfix fix --continue`.
pub fn latest_run(dir: &Path, root: &Path, target: &Path) -> Result<PathBuf, String> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => Some(entries),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(format!("cannot read the transcripts in {}: {e}", dir.display())),
    };
    let mut paths: Vec<(std::time::SystemTime, PathBuf)> = entries
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
        .collect();
    // Newest first; the name (time, pid, n) breaks ties.
    paths.sort_by(|a, b| b.cmp(a));
    paths
        .into_iter()
        .map(|(_, p)| p)
        .find(|p| {
            // Only the first line is read: the start record names root and target.
            let first = std::fs::File::open(p).ok().and_then(|f| {
                use std::io::BufRead;
                std::io::BufReader::new(f).lines().next()?.ok()
            });
            matches!(first.as_deref().map(transcript::parse_line), Some(Ok(Record::Start(s))) if s.root == root && s.target.path == target)
        })
        .ok_or_else(|| {
            format!(
                "no earlier run on {} in {} to continue (transcripts are read from {})",
                target.display(),
                root.display(),
                dir.display()
            )
        })
}

/// The run a transcript recorded, as a follow-up continues it: the
/// conversation as it ended and what it proposed (the base texts from the
/// files it read).
pub fn past_run(path: &Path) -> Result<PastRun, String> {
    let recording = Recording::load(path)?;
    let end = &recording.end;
    if end.messages.is_empty() {
        return Err(format!(
            "{} records no conversation to continue (written by an older agentfix, or the run sent nothing)",
            path.display()
        ));
    }
    let base = |p: &Path| end.files.iter().find(|f| f.path == p).and_then(|f| f.text.clone());
    let proposed = end
        .changes
        .iter()
        .map(|c| ProposedFile {
            path: c.path.clone(),
            display: c
                .path
                .strip_prefix(&recording.start.root)
                .map_or_else(|_| c.path.display().to_string(), |p| p.display().to_string()),
            original: if c.created { None } else { base(&c.path) },
            proposed: c.new_text.clone(),
        })
        .collect();
    Ok(PastRun { messages: end.messages.iter().cloned().map(Into::into).collect(), proposed, ..PastRun::default() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_malformed_transcript_is_an_error_naming_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        std::fs::write(&path, "{\"type\": \"start\", \"version\": 1}\n").unwrap();
        let e = replay(&path, None).await.expect_err("refused");
        assert!(e.starts_with(&format!("{}:1: not a transcript record: missing field", path.display())), "{e}");
        std::fs::write(&path, "\n{\"type\": \"request\", \"turn\": \"one\"}\n").unwrap();
        let e = replay(&path, None).await.expect_err("refused");
        assert!(e.starts_with(&format!("{}:2: not a transcript record: ", path.display())), "{e}");
        std::fs::write(&path, "").unwrap();
        assert_eq!(replay(&path, None).await.expect_err("refused"), "the transcript has no `start` record");
    }

    #[test]
    fn the_latest_run_on_a_file_is_found_and_read_back_for_a_follow_up() {
        use crate::agent::{Outcome, Stop};
        use crate::model::{Message, Usage};
        use crate::workspace::{FileBase, FileChange};
        let dir = tempfile::tempdir().unwrap();
        let config = Config::resolve(&Settings::default(), &Settings::default(), &|_| None).unwrap();
        let root = Path::new("/ws");
        let write = |target: &str, messages: Vec<Message>| {
            let t = transcript::Transcript::create(dir.path(), vec![]).unwrap();
            let target = TargetRecord { path: root.join(target), lines: (1, 1), instruction: None, problems: vec![] };
            t.start(&config, root, target, "sys", &[]);
            let outcome =
                Outcome { stop: Stop::EndTurn, turns: 1, usage: Usage::default(), summary: "s".into(), messages };
            let files = [FileBase {
                path: root.join("calc.py"),
                source: "disk",
                version: None,
                text: Some(std::sync::Arc::new("old\n".into())),
            }];
            let changes = [FileChange {
                path: root.join("calc.py"),
                display: "calc.py".into(),
                version: None,
                pin: None,
                original: Some("old\n".into()),
                new_text: "new\n".into(),
                reasons: vec![],
            }];
            t.end(&outcome, &files, &changes, 1);
            // Distinct modification times.
            std::thread::sleep(std::time::Duration::from_millis(20));
            t.path().to_path_buf()
        };
        let conversation = vec![Message::user_text("fix calc.py"), Message::user_text("later")];
        let _older = write("calc.py", vec![Message::user_text("older")]);
        let newest = write("calc.py", conversation.clone());
        let _other = write("other.py", vec![Message::user_text("other")]);
        assert_eq!(latest_run(dir.path(), root, &root.join("calc.py")).unwrap(), newest);
        let e = latest_run(dir.path(), Path::new("/elsewhere"), &root.join("calc.py")).unwrap_err();
        assert!(e.contains("no earlier run on /ws/calc.py in /elsewhere"), "{e}");
        let past = past_run(&newest).unwrap();
        assert_eq!(past.messages, conversation);
        assert_eq!(
            past.proposed,
            vec![ProposedFile {
                path: root.join("calc.py"),
                display: "calc.py".into(),
                original: Some("old\n".into()),
                proposed: "new\n".into()
            }]
        );
        let empty = write("calc.py", vec![]);
        assert!(past_run(&empty).unwrap_err().contains("records no conversation to continue"));
    }
}
