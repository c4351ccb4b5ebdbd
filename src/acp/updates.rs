//! A run's events as `session/update`s, in the order they happen (so every
//! update of a turn is sent before the prompt's answer):
//!
//! | event | update |
//! |---|---|
//! | streamed text | `agent_message_chunk` |
//! | a retry, best-of-N's line | `agent_thought_chunk` |
//! | a response | `usage_update` (context used, window, cost so far); a `tool_call` per tool call (`pending`, with its `kind`, `locations` and `rawInput`); a `plan` the first time the model's text lists numbered steps |
//! | the tools start | `tool_call_update` `in_progress` (those that ask first: when allowed) |
//! | a tool's result | `tool_call_update` `completed` or `failed`, with a `diff` (path, oldText, newText: the file before and after) for an edit, else the result's text |
//! | a check | the `tool_call`s of the verify commands `completed` |
//!
//! What the approver and the delivery need of it (the open calls, the
//! check's calls, the texts last shown) is kept here too.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use agent_client_protocol::v1::schema::{
    Cost, Diff, Plan, PlanEntry, PlanEntryPriority, PlanEntryStatus, SessionUpdate, ToolCall, ToolCallContent,
    ToolCallLocation, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, ToolKind, UsageUpdate,
};
use serde_json::Value;

use super::peer::Peer;
use crate::agent::{RunEvent, describe_call};
use crate::model::{Block, ModelResponse, StreamUpdate, ToolInput, Usage};
use crate::pricing::Price;
use crate::secrets::Redactor;
use crate::tools::{ToolOutput, shortened};
use crate::workspace::{Overlay, Text};

/// The most characters of a tool's result shown in the client.
const MAX_SHOWN: usize = 4000;

/// One turn's updates.
pub(super) struct Updates {
    pub peer: Peer,
    overlay: Arc<Overlay>,
    redactor: Redactor,
    price: Option<Price>,
    /// The context window the usage is measured against.
    window: u64,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    open: Vec<Open>,
    /// The `tool_call`s made for verify commands, finished by the check.
    checks: Vec<String>,
    made: u32,
    /// Each changed file's text as the last diff showed it.
    shown: HashMap<PathBuf, Text>,
    usage: Usage,
    plan: Vec<String>,
}

/// A tool call sent and not finished.
struct Open {
    id: String,
    name: String,
    input: Value,
    /// An approval was asked for it.
    asked: bool,
}

/// The tools that ask the user before they run.
fn asks_first(name: &str) -> bool {
    name == "run_command" || name.starts_with("mcp__")
}

impl Updates {
    pub fn new(peer: Peer, overlay: Arc<Overlay>, redactor: Redactor, price: Option<Price>, window: u64) -> Self {
        Self { peer, overlay, redactor, price, window, state: Mutex::default() }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends what `event` shows.
    pub fn event(&self, event: &RunEvent) {
        match event {
            RunEvent::Stream(StreamUpdate::Text(t)) => self.peer.say(self.redactor.redact(t).into_owned()),
            RunEvent::Stream(StreamUpdate::Retrying { attempt, delay_ms, reason }) => {
                let reason = self.redactor.redact(reason);
                self.peer.think(format!("retry {attempt} in {:.1} s: {reason}", *delay_ms as f64 / 1000.0));
            }
            RunEvent::Response { response, .. } => self.response(response),
            RunEvent::ToolCalls { .. } => {
                let started: Vec<String> =
                    self.state().open.iter().filter(|o| !asks_first(&o.name)).map(|o| o.id.clone()).collect();
                for id in started {
                    self.status(&id, ToolCallStatus::InProgress);
                }
            }
            RunEvent::ToolResult { id, name, input, output, .. } => self.result(id, name, input, output),
            RunEvent::Checked { line, .. } => {
                let checks = std::mem::take(&mut self.state().checks);
                let failed = line.as_deref().is_some_and(|l| l.starts_with("not verified"));
                let status = if failed { ToolCallStatus::Failed } else { ToolCallStatus::Completed };
                for id in checks {
                    let mut fields = ToolCallUpdateFields::new().status(status);
                    if let Some(line) = line {
                        fields = fields.content(vec![ToolCallContent::from(line.clone())]);
                    }
                    self.peer.update(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(id, fields)));
                }
            }
            RunEvent::Candidates { line } => self.peer.think(line.clone()),
            RunEvent::Stream(StreamUpdate::ToolStart(_))
            | RunEvent::Request { .. }
            | RunEvent::ContextEdited { .. } => {}
        }
    }

    fn response(&self, response: &ModelResponse) {
        let total = {
            let mut state = self.state();
            state.usage.add(response.usage);
            state.usage
        };
        let used = response.usage.input_tokens + response.usage.output_tokens;
        let cost = self.price.map(|p| Cost::new(p.cost(&total.tokens()), "USD"));
        self.peer.update(SessionUpdate::UsageUpdate(UsageUpdate::new(used, self.window).cost(cost)));
        self.plan(&response.message.text());
        for block in &response.message.content {
            let Block::ToolUse { id, name, input } = block else { continue };
            let value = input.to_value();
            self.state().open.push(Open { id: id.clone(), name: name.clone(), input: value.clone(), asked: false });
            let call = ToolCall::new(id.clone(), title(name, input))
                .kind(kind(name))
                .status(ToolCallStatus::Pending)
                .locations(self.locations(input))
                .raw_input(value);
            self.peer.update(SessionUpdate::ToolCall(call));
        }
    }

    /// A `plan` of the numbered steps in the model's text, the first time
    /// it writes some.
    fn plan(&self, text: &str) {
        let steps = numbered_steps(text);
        if steps.len() < 2 || !self.state().plan.is_empty() {
            return;
        }
        self.state().plan = steps;
        self.send_plan(PlanEntryStatus::Pending);
    }

    /// The plan again with every step `status` (the run's end).
    pub fn finish_plan(&self, status: PlanEntryStatus) {
        if !self.state().plan.is_empty() {
            self.send_plan(status);
        }
    }

    fn send_plan(&self, status: PlanEntryStatus) {
        let steps = self.state().plan.clone();
        let entries = steps
            .into_iter()
            .map(|s| PlanEntry::new(self.redactor.redact(&s).into_owned(), PlanEntryPriority::Medium, status.clone()))
            .collect();
        self.peer.update(SessionUpdate::Plan(Plan::new(entries)));
    }

    fn result(&self, id: &str, name: &str, input: &ToolInput, output: &ToolOutput) {
        self.state().open.retain(|o| o.id != id);
        let status = if output.is_error { ToolCallStatus::Failed } else { ToolCallStatus::Completed };
        let diff = (!output.is_error && matches!(name, "edit_file" | "write_file")).then(|| self.diff(input)).flatten();
        let content = match diff {
            Some(diff) => vec![ToolCallContent::Diff(diff)],
            None => vec![ToolCallContent::from(
                self.redactor.redact(&crate::tools::clip(&output.content, MAX_SHOWN)).into_owned(),
            )],
        };
        let fields = ToolCallUpdateFields::new().status(status).content(content);
        self.peer.update(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(id.to_string(), fields)));
    }

    /// The edited file before this edit (as the last diff showed it, else
    /// as the run read it) and after it.
    fn diff(&self, input: &ToolInput) -> Option<Diff> {
        let path = self.overlay.resolve(input.as_object()?.get("path")?.as_str()?).ok()?;
        let now = self.overlay.read(&path).ok()?;
        let before = self.state().shown.insert(path.clone(), now.clone());
        let before = before.or_else(|| self.overlay.bases().into_iter().find(|b| b.path == path).and_then(|b| b.text));
        Some(Diff::new(path, now.as_str()).old_text(before.as_deref().cloned()))
    }

    /// The file a call names, with its line (1-based) when it gives one.
    fn locations(&self, input: &ToolInput) -> Vec<ToolCallLocation> {
        let Some(map) = input.as_object() else { return Vec::new() };
        let Some(path) = map.get("path").and_then(Value::as_str).and_then(|p| self.overlay.resolve(p).ok()) else {
            return Vec::new();
        };
        let line = ["start_line", "line"].iter().find_map(|k| map.get(*k).and_then(Value::as_u64));
        let line = line.and_then(|l| u32::try_from(l).ok());
        vec![ToolCallLocation::new(path).line(line)]
    }

    /// Sends `status` for the call `id`.
    pub fn status(&self, id: &str, status: ToolCallStatus) {
        let fields = ToolCallUpdateFields::new().status(status);
        self.peer.update(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(id.to_string(), fields)));
    }

    /// The id of the open call of `tool` that `input` matches and that was
    /// not asked about yet, now asked about.
    pub fn claim(&self, tool: &str, matches: impl Fn(&Value) -> bool) -> Option<String> {
        let mut state = self.state();
        let open = state.open.iter_mut().find(|o| o.name == tool && !o.asked && matches(&o.input))?;
        open.asked = true;
        Some(open.id.clone())
    }

    /// A new `tool_call` (pending) for work the model did not call, such as
    /// a verify command: finished by the check.
    pub fn made_call(&self, prefix: &str, title: String, kind: ToolKind, raw_input: Value) -> String {
        let id = {
            let mut state = self.state();
            state.made += 1;
            let id = format!("{prefix}-{}", state.made);
            if prefix == "check" {
                state.checks.push(id.clone());
            }
            id
        };
        let call = ToolCall::new(id.clone(), title).kind(kind).status(ToolCallStatus::Pending).raw_input(raw_input);
        self.peer.update(SessionUpdate::ToolCall(call));
        id
    }

    /// What scrubs the key and credential shapes from what the client is
    /// shown.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }
}

/// `Read calc.py`, `Edit calc.py`, `Run `test``: what a call does, for
/// people.
pub(super) fn title(name: &str, input: &ToolInput) -> String {
    let arg = |k: &str| input.as_object().and_then(|m| m.get(k)).and_then(Value::as_str).map(|s| shortened(s, 80));
    let path = arg("path");
    match (name, path) {
        ("read_file", Some(p)) => format!("Read {p}"),
        ("edit_file", Some(p)) => format!("Edit {p}"),
        ("write_file", Some(p)) => format!("Write {p}"),
        ("list_files", p) => format!("List {}", p.unwrap_or_else(|| ".".into())),
        ("grep", p) => {
            let within = p.map(|p| format!(" in {p}")).unwrap_or_default();
            format!("Search `{}`{within}", arg("pattern").unwrap_or_default())
        }
        ("run_command", _) => format!("Run `{}`", arg("name").unwrap_or_default()),
        ("diagnostics", p) => format!("Diagnostics of {}", p.unwrap_or_else(|| "the workspace".into())),
        _ => match name.strip_prefix("mcp__").and_then(|rest| rest.split_once("__")) {
            Some((server, tool)) => format!("{server}: {tool}"),
            None => describe_call(name, input),
        },
    }
}

/// The ACP kind of a tool.
pub(super) fn kind(name: &str) -> ToolKind {
    match name {
        "read_file" | "diagnostics" | "hover" | "document_symbols" => ToolKind::Read,
        "list_files" | "grep" | "workspace_symbols" | "find_definition" | "find_references" => ToolKind::Search,
        "edit_file" | "write_file" => ToolKind::Edit,
        "run_command" => ToolKind::Execute,
        n if n.starts_with("mcp__") && n.to_ascii_lowercase().contains("think") => ToolKind::Think,
        n if n.starts_with("mcp__") => ToolKind::Fetch,
        _ => ToolKind::Other,
    }
}

/// The steps of a numbered list (`1. Read the file`, `2) Guard b`), in
/// order; none when the text has no such list.
fn numbered_steps(text: &str) -> Vec<String> {
    let mut steps = Vec::new();
    for line in text.lines() {
        let line = line.trim_start();
        let digits = line.chars().take_while(char::is_ascii_digit).count();
        let rest = &line[digits..];
        if digits == 0 || !(rest.starts_with(". ") || rest.starts_with(") ")) {
            continue;
        }
        let step = rest[2..].trim();
        if !step.is_empty() {
            steps.push(shortened(step, 200));
        }
    }
    steps
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn calls_have_a_title_and_a_kind() {
        let input = |v: Value| ToolInput::from(v);
        assert_eq!(title("read_file", &input(json!({"path": "calc.py"}))), "Read calc.py");
        assert_eq!(title("grep", &input(json!({"pattern": "div", "path": "src"}))), "Search `div` in src");
        assert_eq!(title("run_command", &input(json!({"name": "test"}))), "Run `test`");
        assert_eq!(title("mcp__gh__search", &input(json!({}))), "gh: search");
        assert_eq!(title("list_files", &input(json!({}))), "List .");
        assert_eq!(kind("edit_file"), ToolKind::Edit);
        assert_eq!(kind("grep"), ToolKind::Search);
        assert_eq!(kind("run_command"), ToolKind::Execute);
        assert_eq!(kind("mcp__seq__sequential_thinking"), ToolKind::Think);
        assert_eq!(kind("mcp__gh__search"), ToolKind::Fetch);
        assert_eq!(kind("find_definition"), ToolKind::Search);
    }

    #[test]
    fn a_numbered_list_is_a_plan() {
        assert_eq!(numbered_steps("I will:\n1. Read calc.py\n2) Guard b\n\nDone."), vec!["Read calc.py", "Guard b"]);
        assert!(numbered_steps("Version 2.0 of the API.").is_empty());
    }
}
