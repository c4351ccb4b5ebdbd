//! The `LanguageServer` implementation: converts in, delegates, converts out.
//! Document sync happens in `ordered`, before requests reach this code.

use std::sync::Arc;

use serde_json::Value;
use tower_lsp_server::jsonrpc::{Error, Result};
use tower_lsp_server::ls_types::{
    CodeAction, CodeActionKind, CodeActionOptions, CodeActionOrCommand, CodeActionParams, CodeActionProviderCapability,
    CodeActionResponse, Command, ConfigurationItem, Diagnostic, DidChangeConfigurationParams, ExecuteCommandOptions,
    ExecuteCommandParams, InitializeParams, InitializeResult, InitializedParams, MessageType, NumberOrString,
    SaveOptions, ServerCapabilities, ServerInfo, TextDocumentSyncCapability, TextDocumentSyncKind,
    TextDocumentSyncOptions, TextDocumentSyncSaveOptions, WorkDoneProgressCancelParams,
};
use tower_lsp_server::{Client, LanguageServer};

use super::ext::{FIX_COMMAND, FixArguments};
use super::session::{ClientSupport, Session};
use super::{convert, run};
use crate::config::Settings;

/// How long to wait for `workspace/configuration`.
const CONFIGURATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// Code action titles are cut to this many chars of the diagnostic message.
const TITLE_CHARS: usize = 80;

pub struct Backend {
    client: Client,
    session: Arc<Session>,
}

impl Backend {
    pub fn new(client: Client, session: Arc<Session>) -> Self {
        Self { client, session }
    }

    fn supports_configuration(&self) -> bool {
        self.session.support().configuration
    }

    /// Pulls the `agentfix` section with `workspace/configuration`, when the
    /// client supports it; never waits more than a few seconds.
    async fn pull_configuration(&self) {
        if !self.supports_configuration() {
            return;
        }
        let _pulling = self.session.config_gate.write().await;
        let item = ConfigurationItem { scope_uri: None, section: Some("agentfix".into()) };
        match tokio::time::timeout(CONFIGURATION_TIMEOUT, self.client.configuration(vec![item])).await {
            Ok(Ok(values)) => match Settings::from_json(values.first().unwrap_or(&Value::Null)) {
                Ok(s) => self.set_pulled_settings(s, "workspace/configuration"),
                Err(e) => self.client.show_message(MessageType::ERROR, format!("agentfix: {e}")).await,
            },
            Ok(Err(e)) => tracing::warn!("workspace/configuration failed: {e}"),
            Err(_) => tracing::warn!("the client did not answer workspace/configuration in time"),
        }
    }

    /// Takes the editor's settings, logging the names of those that changed
    /// (never their values).
    fn set_pulled_settings(&self, new: Settings, source: &str) {
        let mut changed = Vec::new();
        self.session.update(|st| {
            changed = changed_settings(&st.pulled_settings, &new);
            st.pulled_settings = new;
        });
        if changed.is_empty() {
            tracing::info!("{source}: no setting changed");
        } else {
            tracing::info!("{source}: changed {}", changed.join(", "));
        }
    }

    /// `window/workDoneProgress/cancel`: the user pressed Cancel on a run's progress.
    pub async fn work_done_progress_cancel(&self, params: WorkDoneProgressCancelParams) {
        let token = match &params.token {
            NumberOrString::String(s) => s.clone(),
            NumberOrString::Number(n) => n.to_string(),
        };
        if !self.session.runs.cancel_by_token(&token) {
            tracing::debug!(token, "cancel for an unknown or finished run");
        }
    }
}

/// The names (as the editor spells them) of the settings that differ
/// between `old` and `new`, in order; never their values.
fn changed_settings(old: &Settings, new: &Settings) -> Vec<String> {
    let as_map = |s: &Settings| match serde_json::to_value(s) {
        Ok(Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    };
    let (old, new) = (as_map(old), as_map(new));
    let mut names: Vec<String> = old
        .keys()
        .chain(new.keys().filter(|k| !old.contains_key(*k)))
        .filter(|k| old.get(*k).unwrap_or(&Value::Null) != new.get(*k).unwrap_or(&Value::Null))
        .cloned()
        .collect();
    names.sort();
    names
}

/// `Agent fix: <first line of the message, at most 80 chars>`.
fn action_title(message: &str) -> String {
    let first = message.lines().next().unwrap_or("").trim();
    let mut title: String = first.chars().take(TITLE_CHARS).collect();
    if first.chars().count() > TITLE_CHARS {
        title.push('…');
    }
    format!("Agent fix: {title}")
}

/// Whether `kind` passes the request's `only` filter (prefix match, as the
/// specification says: `refactor` admits `refactor.rewrite`).
fn kind_allowed(only: Option<&Vec<CodeActionKind>>, kind: &CodeActionKind) -> bool {
    only.is_none_or(|only| {
        only.iter().any(|o| kind.as_str() == o.as_str() || kind.as_str().starts_with(&format!("{}.", o.as_str())))
    })
}

impl LanguageServer for Backend {
    async fn initialize(&self, params: InitializeParams) -> Result<InitializeResult> {
        let encoding = convert::negotiate_encoding(&params.capabilities);
        let mut roots: Vec<_> =
            params.workspace_folders.iter().flatten().filter_map(|f| convert::uri_to_path(&f.uri)).collect();
        #[allow(deprecated)]
        if roots.is_empty()
            && let Some(root) = params.root_uri.as_ref().and_then(convert::uri_to_path)
        {
            roots.push(root);
        }
        let settings = match params.initialization_options.as_ref().map(Settings::from_json).transpose() {
            Ok(s) => s.unwrap_or_default(),
            Err(e) => return Err(Error::invalid_params(e.to_string())),
        };
        tracing::info!(?encoding, ?roots, "initialize");
        self.session.update(|s| {
            s.encoding = encoding;
            s.support = ClientSupport::of(&params.capabilities);
            s.roots = roots;
            s.init_settings = settings;
        });
        Ok(InitializeResult {
            capabilities: ServerCapabilities {
                position_encoding: Some(convert::encoding_kind(encoding)),
                text_document_sync: Some(TextDocumentSyncCapability::Options(TextDocumentSyncOptions {
                    open_close: Some(true),
                    change: Some(TextDocumentSyncKind::INCREMENTAL),
                    // The saved text brings a document that fell out of sync
                    // back (see `ordered`).
                    save: Some(TextDocumentSyncSaveOptions::SaveOptions(SaveOptions { include_text: Some(true) })),
                    ..Default::default()
                })),
                code_action_provider: Some(CodeActionProviderCapability::Options(CodeActionOptions {
                    code_action_kinds: Some(vec![CodeActionKind::QUICKFIX, CodeActionKind::REFACTOR_REWRITE]),
                    resolve_provider: Some(true),
                    ..Default::default()
                })),
                execute_command_provider: Some(ExecuteCommandOptions {
                    commands: vec![FIX_COMMAND.to_string()],
                    ..Default::default()
                }),
                ..Default::default()
            },
            server_info: Some(ServerInfo { name: "agentfix".into(), version: Some(env!("CARGO_PKG_VERSION").into()) }),
            offset_encoding: None,
        })
    }

    async fn initialized(&self, _: InitializedParams) {
        tracing::info!("initialized");
        self.pull_configuration().await;
    }

    async fn shutdown(&self) -> Result<()> {
        self.session.shut_down.store(true, std::sync::atomic::Ordering::SeqCst);
        self.session.runs.cancel_all();
        self.session.stop_downstream().await;
        Ok(())
    }

    async fn did_change_configuration(&self, params: DidChangeConfigurationParams) {
        if self.supports_configuration() {
            // The notification's payload is unreliable across clients: pull.
            self.pull_configuration().await;
            return;
        }
        match Settings::from_json(&params.settings) {
            Ok(new) => self.set_pulled_settings(new, "workspace/didChangeConfiguration"),
            Err(e) => self.client.show_message(MessageType::ERROR, format!("agentfix: {e}")).await,
        }
    }

    async fn code_action(&self, params: CodeActionParams) -> Result<Option<CodeActionResponse>> {
        let resolve_edit = self.session.support().runs_in_resolve();
        let uri = params.text_document.uri;
        let version = self.session.docs.get(uri.as_str()).map(|d| d.version);
        let only = params.context.only.as_ref();
        let mut actions = Vec::new();
        // One fix action; clients that run the fix in codeAction/resolve get
        // it without a command, the argument in `data`.
        let action = |title: String, kind: CodeActionKind, diagnostics: Vec<Diagnostic>, attach: bool| {
            let arg = FixArguments {
                uri: uri.clone(),
                version,
                range: params.range,
                diagnostics: diagnostics.clone(),
                instruction: None,
            }
            .to_value();
            let (command, data) = if resolve_edit {
                (None, Some(arg))
            } else {
                (Some(Command { title: title.clone(), command: FIX_COMMAND.into(), arguments: Some(vec![arg]) }), None)
            };
            CodeActionOrCommand::CodeAction(CodeAction {
                title,
                kind: Some(kind),
                diagnostics: attach.then_some(diagnostics),
                command,
                data,
                ..Default::default()
            })
        };
        let overlapping: Vec<Diagnostic> =
            params.context.diagnostics.iter().filter(|d| convert::overlaps(&d.range, &params.range)).cloned().collect();
        if kind_allowed(only, &CodeActionKind::QUICKFIX) {
            for d in &overlapping {
                actions.push(action(action_title(&d.message), CodeActionKind::QUICKFIX, vec![d.clone()], true));
            }
        }
        let empty = params.range.start == params.range.end;
        if kind_allowed(only, &CodeActionKind::REFACTOR_REWRITE) {
            // Some clients (Neovim 0.10+, eglot) send a server only its own
            // diagnostics, and agentfix publishes none: offer the line itself.
            if empty && params.context.diagnostics.is_empty() {
                let title = format!("Agent fix: line {}", u64::from(params.range.start.line) + 1);
                actions.push(action(title, CodeActionKind::REFACTOR_REWRITE, Vec::new(), false));
            }
            if !empty {
                actions.push(action(
                    "Agent fix: selection".into(),
                    CodeActionKind::REFACTOR_REWRITE,
                    overlapping,
                    false,
                ));
            }
        }
        Ok(Some(actions))
    }

    async fn code_action_resolve(&self, mut action: CodeAction) -> Result<CodeAction> {
        // Only actions offered without a command (clients without
        // workspace/applyEdit) are resolved: the run happens here.
        let Some(argument) = action.data.take().filter(|_| action.command.is_none()) else {
            return Ok(action);
        };
        let edit = run::resolve_fix(self.client.clone(), self.session.clone(), argument).await?;
        action.edit = edit;
        Ok(action)
    }

    async fn execute_command(&self, params: ExecuteCommandParams) -> Result<Option<Value>> {
        match params.command.as_str() {
            FIX_COMMAND => {
                let token = params.work_done_progress_params.work_done_token;
                run::execute_fix(self.client.clone(), self.session.clone(), params.arguments, token).await.map(Some)
            }
            "agentfix.debug.panic" if std::env::var_os("AGENTFIX_DEBUG_COMMANDS").is_some() => {
                panic!("debug panic requested")
            }
            other => Err(Error::invalid_params(format!("unknown command `{other}`; agentfix offers `{FIX_COMMAND}`"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn titles_take_the_first_line_cut_at_80_chars() {
        assert_eq!(action_title("Undefined name `x`\nmore detail"), "Agent fix: Undefined name `x`");
        let long = "é".repeat(100);
        let t = action_title(&long);
        assert_eq!(t.chars().count(), "Agent fix: ".len() + 80 + 1);
        assert!(t.ends_with('…'));
    }

    #[test]
    fn a_settings_change_is_described_by_the_names_that_changed() {
        let old = Settings::from_json(&json!({"model": "m1", "maxTurns": 5, "commands": {"test": ["cargo", "test"]}}))
            .unwrap();
        assert!(changed_settings(&old, &old.clone()).is_empty());
        let new =
            Settings::from_json(&json!({"model": "m2", "maxTurns": 5, "commands": {"test": ["cargo", "test", "-q"]}, "baseUrl": "http://proxy.local/secret-path"}))
                .unwrap();
        let changed = changed_settings(&old, &new);
        assert_eq!(changed, ["baseUrl", "commands", "model"]);
        // Names only: no value reaches the log line.
        let line = changed.join(", ");
        for value in ["m1", "m2", "cargo", "proxy.local", "secret-path"] {
            assert!(!line.contains(value), "{line}");
        }
        // A setting that goes away is a change too.
        assert_eq!(changed_settings(&new, &Settings::default()), ["baseUrl", "commands", "maxTurns", "model"]);
    }

    #[test]
    fn only_filter_matches_by_prefix() {
        let only = vec![CodeActionKind::REFACTOR];
        assert!(kind_allowed(Some(&only), &CodeActionKind::REFACTOR_REWRITE));
        assert!(!kind_allowed(Some(&only), &CodeActionKind::QUICKFIX));
        assert!(kind_allowed(None, &CodeActionKind::QUICKFIX));
    }
}
