//! `agentfix demo`: a whole `agentfix fix` on a sample file, with no key and
//! no network. A scripted [`ModelClient`] in the binary plays the model (it
//! reads the file, edits it, says what it did); everything else is the real
//! run: `fix::run`, the standard toolbox over an overlay of a temporary
//! workspace, the progress lines, the summary and the unified diff that
//! `agentfix fix` prints. Nothing is written outside the temporary folder
//! (no transcript, no backup), and the folder is removed at the end.
//!
//! Its parts:
//! `agentfix demo`: a scripted `ModelClient` in the binary (read, edit,
//! summary by turn; made-up usage), a sample file in a temporary folder, then
//! the real `fix::run` with the standard toolbox, `print_progress` and
//! `deliver`; configuration from the built-in defaults alone
//! (`Config::resolve` without the environment), transcripts and language
//! servers off, so nothing outside the folder is read or written and nothing
//! is dialed

use std::process::ExitCode;
use std::sync::Arc;

use serde_json::json;

use super::{deliver, exit, fail, print_progress};
use crate::agent::RunEvent;
use crate::config::Config;
use crate::config::settings::Settings;
use crate::diagnostic::{Diagnostic, Severity};
use crate::fix::{self, ProgressLines, Request, Roots, Services, Setup, Target};
use crate::model::{Block, Message, ModelError, ModelRequest, ModelResponse, Role, StopReason, StreamUpdate, Usage};
use crate::position::{LineCol, LineRange};
use crate::providers::ModelClient;
use crate::workspace::NoBuffers;

/// The sample: a function that divides by zero on an empty list.
const SAMPLE: &str = "def average(values):\n    return sum(values) / len(values)\n\n\nprint(average([]))\n";
const SAMPLE_NAME: &str = "stats.py";
const OLD_LINE: &str = "    return sum(values) / len(values)\n";
const NEW_LINES: &str = "    if not values:\n        return 0.0\n    return sum(values) / len(values)\n";
const SUMMARY: &str = "Return 0.0 for an empty list instead of dividing by zero.";

/// The model of the demo: answers by the turn it is at (the assistant
/// messages so far), streaming its text and tool starts as a provider does.
/// Its token counts are made up, in the range a real run of this size has.
struct Scripted;

impl Scripted {
    fn reply(content: Vec<Block>, stop: StopReason, turn: u64) -> ModelResponse {
        ModelResponse {
            message: Message { role: Role::Assistant, content, raw: None },
            stop_reason: stop,
            usage: Usage { input_tokens: 2_400 + 450 * turn, output_tokens: 60 + 30 * turn, ..Default::default() },
        }
    }
}

#[async_trait::async_trait]
impl ModelClient for Scripted {
    async fn complete(
        &self,
        request: ModelRequest<'_>,
        updates: &(dyn Fn(StreamUpdate) + Send + Sync),
    ) -> Result<ModelResponse, ModelError> {
        let turn = request.messages.iter().filter(|m| m.role == Role::Assistant).count() as u64;
        let call = |id: &str, name: &str, input: serde_json::Value| {
            updates(StreamUpdate::ToolStart(name.to_string()));
            Block::ToolUse { id: id.into(), name: name.into(), input: input.into() }
        };
        let text = |t: &str| {
            updates(StreamUpdate::Text(t.to_string()));
            Block::Text { text: t.to_string() }
        };
        Ok(match turn {
            0 if request.allow_tools => Scripted::reply(
                vec![
                    text("Let me read the function first."),
                    call("toolu_demo_1", "read_file", json!({"path": SAMPLE_NAME})),
                ],
                StopReason::ToolUse,
                turn,
            ),
            1 if request.allow_tools => Scripted::reply(
                vec![call(
                    "toolu_demo_2",
                    "edit_file",
                    json!({"path": SAMPLE_NAME, "old_text": OLD_LINE, "new_text": NEW_LINES,
                           "reason": "len(values) is 0 for an empty list"}),
                )],
                StopReason::ToolUse,
                turn,
            ),
            _ => Scripted::reply(vec![text(SUMMARY)], StopReason::EndTurn, turn),
        })
    }

    async fn check(&self) -> Result<String, ModelError> {
        Ok("the demo's scripted model".into())
    }
}

/// Runs the demo; exit 0 when the scripted fix was proposed, as `agentfix
/// fix` exits.
pub async fn demo() -> ExitCode {
    let dir = match tempfile::Builder::new().prefix("agentfix-demo-").tempdir() {
        Ok(d) => d,
        Err(e) => return fail(exit::USAGE, format!("demo: cannot create a temporary folder: {e}")),
    };
    let root = match std::fs::canonicalize(dir.path()) {
        Ok(r) => r,
        Err(e) => return fail(exit::USAGE, format!("demo: {e}")),
    };
    let path = root.join(SAMPLE_NAME);
    if let Err(e) = std::fs::write(&path, SAMPLE) {
        return fail(exit::USAGE, format!("demo: cannot write {}: {e}", path.display()));
    }
    // Built-in defaults only (the environment and the user's settings play
    // no part), without transcripts or language servers: the run touches
    // nothing outside the folder and depends on nothing installed.
    let editor = Settings { transcripts: Some(false), default_language_servers: Some(false), ..Settings::default() };
    let config = match Config::resolve(&Settings::default(), &editor, &|_| None) {
        Ok(c) => c,
        Err(e) => return fail(exit::USAGE, format!("demo: {e}")),
    };
    eprintln!("agentfix demo: a scripted model (no API key, no network) fixes {SAMPLE_NAME} in {}:", root.display());
    for (n, line) in SAMPLE.lines().enumerate() {
        eprintln!("{:>6}\t{line}", n + 1);
    }
    eprintln!("agentfix demo: `agentfix fix {SAMPLE_NAME} --line 2`, with this problem:");
    let problem = Diagnostic {
        at: LineCol::new(1, 11),
        severity: Some(Severity::Error),
        source: Some("demo".into()),
        message: "ZeroDivisionError: division by zero when `values` is empty".into(),
        ..Default::default()
    };
    eprintln!("  {SAMPLE_NAME}:2:12: error: {}", problem.message);
    let request = Request::new(Target { path, lines: LineRange::line(1), problems: vec![problem], instruction: None });
    let lines = ProgressLines::priced(config.price());
    let prepared = match Setup::new(config).prepare(Roots::Containing(vec![root]), &request, Arc::new(NoBuffers)) {
        Ok(p) => p,
        Err(e) => return fail(exit::USAGE, format!("demo: {e}")),
    };
    let events = |e: RunEvent| print_progress(&lines, &e);
    let result = fix::run(&prepared, Services::model_only(Arc::new(Scripted), &events), request).await;
    let code = deliver(&result, None, true);
    eprintln!(
        "agentfix demo: the diff above went to stdout and the file is unchanged. With ANTHROPIC_API_KEY set, \
         `agentfix fix FILE --line N` does the same with a real model (add --apply to write the edit)."
    );
    code
}
