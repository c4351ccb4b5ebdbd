//! agentfix as an Agent Client Protocol agent (`agentfix acp`): a front end
//! beside the LSP server and the CLI, through the same seam (`fix::run`),
//! speaking ACP v1 over stdin/stdout with the official SDK
//! (`agent-client-protocol`, the only module that knows it; its types are
//! generated from the spec's schema).
//!
//! A client (Zed, a JetBrains IDE, CodeCompanion, avante.nvim, agent-shell)
//! starts `agentfix acp`, opens a session on a folder (`session/new`: its
//! `cwd` is the workspace root, its `mcpServers` join the settings'), and
//! sends prompts that say what to fix (`fix the error on line 12 of
//! src/calc.py`, a pasted compiler error, an @-mentioned file). Each prompt is
//! one run; a later prompt of the session follows up on the one before. The
//! run's events stream back as `session/update`s, approvals go through
//! `session/request_permission`, the model reads the client's buffers
//! through `fs/read_text_file` when the client offers it, and the proposal
//! is shown as `diff` content, then written with `fs/write_text_file` once
//! the user allowed it (when the client offers it).
//!
//! ACP has no settings channel: the editor layer of the settings comes from
//! `--settings JSON|FILE`, over the environment and agentfix.toml as in the
//! other front ends.
//!
//! Its parts:
//! - `server`: the SDK's agent over stdio, `initialize`, `session/new`,
//!   `session/prompt` (spawned), `session/cancel`, the end of the session;
//! - `session`: one ACP session (its root, settings, MCP servers, language
//!   servers, the run a follow-up continues, its "always" approvals);
//! - `turn`: one prompt from its content to its answer;
//! - `target`: the prompt's content as a `fix::Target` (files, lines,
//!   problems, the instruction) and the buffers it embeds;
//! - `peer`: the client as the turn sees it (updates, requests with a
//!   timeout and the turn's cancel);
//! - `updates`: `RunEvent`s as `session/update`s (message chunks, tool
//!   calls with their kind, locations and content, diffs, plan, usage);
//! - `approval`: the `tools::Approver` over `session/request_permission`;
//! - `buffers`: the `workspace::BufferSource` over `fs/read_text_file`;
//! - `delivery`: the proposal as `diff` content, the permission to write it,
//!   `fs/write_text_file`, the last message.

mod approval;
mod buffers;
mod delivery;
mod peer;
mod server;
mod session;
mod target;
mod turn;
mod updates;

use std::process::ExitCode;

use crate::config::settings::Settings;

/// Arguments of `agentfix acp`.
#[derive(Debug, clap::Args)]
pub struct AcpArgs {
    /// Editor settings (JSON, as in initializationOptions, or the path of a
    /// file holding it): ACP has no settings channel, so clients pass them
    /// here; they go over the environment and agentfix.toml.
    #[arg(long, value_name = "JSON|FILE")]
    pub settings: Option<String>,
}

/// Runs `agentfix acp` until the client closes stdin: exit 0, or 1 when
/// the connection failed, 2 for unusable `--settings`.
pub async fn serve(args: AcpArgs) -> ExitCode {
    let editor = match editor_layer(args.settings.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("agentfix: --settings: {e}");
            return ExitCode::from(2);
        }
    };
    server::serve(editor).await
}

/// The editor layer from `--settings`: JSON when it starts with `{`, else
/// a file of JSON. Unknown keys are logged and accepted.
fn editor_layer(arg: Option<&str>) -> Result<Settings, String> {
    let Some(arg) = arg else { return Ok(Settings::default()) };
    let text = if arg.trim_start().starts_with('{') {
        arg.to_string()
    } else {
        std::fs::read_to_string(arg).map_err(|e| format!("{arg}: {e}"))?
    };
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| format!("not JSON: {e}"))?;
    for w in Settings::unknown_keys(&value, true) {
        tracing::warn!("--settings: {w}");
    }
    Settings::from_json(&value).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_come_as_json_or_from_a_file() {
        assert_eq!(editor_layer(None).unwrap(), Settings::default());
        let s = editor_layer(Some(r#"{"model": "m1", "maxTurns": 3}"#)).unwrap();
        assert_eq!((s.model.as_deref(), s.max_turns), (Some("m1"), Some(3)));
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.json");
        std::fs::write(&file, r#" {"model": "m2"} "#).unwrap();
        assert_eq!(editor_layer(file.to_str()).unwrap().model.as_deref(), Some("m2"));
        let e = editor_layer(Some("/nonexistent/agentfix.json")).unwrap_err();
        assert!(e.starts_with("/nonexistent/agentfix.json: "), "{e}");
        assert!(editor_layer(Some("{not json")).unwrap_err().starts_with("not JSON"));
    }
}
