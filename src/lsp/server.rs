//! The `LanguageServer` implementation: converts in, delegates, converts out.
//! Document sync happens in `ordered`, before requests reach this code.

use std::sync::Arc;

use serde_json::Value;
use tower_lsp_server::jsonrpc::{Error, Result};
use tower_lsp_server::ls_types::{
    CodeAction, CodeActionContext, CodeActionKind, CodeActionOptions, CodeActionOrCommand, CodeActionParams,
    CodeActionProviderCapability, CodeActionResponse, CodeActionTriggerKind, Command, ConfigurationItem, Diagnostic,
    DidChangeConfigurationParams, ExecuteCommandOptions, ExecuteCommandParams, InitializeParams, InitializeResult,
    InitializedParams, MessageType, NumberOrString, Range, SaveOptions, ServerCapabilities, ServerInfo,
    TextDocumentSyncCapability, TextDocumentSyncKind, TextDocumentSyncOptions, TextDocumentSyncSaveOptions,
    WorkDoneProgressCancelParams,
};
use tower_lsp_server::{Client, LanguageServer};

use super::ext::{
    ALTERNATIVE_COMMAND, AlternativeArguments, CANCEL_COMMAND, DocumentText, DocumentTextParams, FIX_COMMAND,
    FixArguments, REVIEWED_COMMAND,
};
use super::session::{ClientSupport, Session};
use super::{alternative, convert, reviewed, run};
use crate::config::settings::Settings;
use crate::documents::{Documents, PositionEncoding};

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
            Ok(Ok(values)) => match settings_from(values.first().unwrap_or(&Value::Null)) {
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

    /// `agentfix/documentText`: the server's copy of an open document, as
    /// every document notification before this request left it (they are
    /// applied in wire order, before any request is handled: `ordered`).
    pub async fn document_text(&self, params: DocumentTextParams) -> Result<DocumentText> {
        let uri = params.uri;
        match self.session.docs.get(uri.as_str()) {
            Some(doc) => Ok(DocumentText { version: doc.version, text: doc.rope.to_string() }),
            None => Err(Error::invalid_params(format!("{} is not open", uri.as_str()))),
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

/// The code action kind of "fix all problems in this file".
pub const FIX_ALL_KIND: &str = "source.fixAll.agentfix";

/// One code action to offer.
struct Offer {
    title: String,
    kind: CodeActionKind,
    diagnostics: Vec<Diagnostic>,
    /// Whether the action names `diagnostics` as the ones it fixes.
    attach: bool,
    range: Range,
    follow_up: Option<String>,
    /// An alternative of a kept run: applied, no model asked.
    alternative: Option<AlternativeArguments>,
}

impl Offer {
    fn new(title: String, kind: CodeActionKind, diagnostics: Vec<Diagnostic>, attach: bool, range: Range) -> Self {
        Self { title, kind, diagnostics, attach, range, follow_up: None, alternative: None }
    }
}

/// Whether the request was made by the user rather than by the editor on
/// its own (VS Code's code actions on save, the light bulb): a fix-all runs
/// a model, so it is offered only then. A client that does not say counts
/// as the user, unless it asks only for `source.fixAll` kinds (what the
/// editors ask on save).
fn explicitly_requested(context: &CodeActionContext) -> bool {
    match context.trigger_kind {
        Some(kind) => kind == CodeActionTriggerKind::INVOKED,
        None => !context
            .only
            .as_ref()
            .is_some_and(|only| !only.is_empty() && only.iter().all(|k| k.as_str().starts_with("source.fixAll"))),
    }
}

/// The actions for a request: a quick fix per diagnostic under the cursor,
/// "line N" or "selection", a fix-all when the context carries several
/// diagnostics and the user asked, and a follow-up and the alternatives
/// (the candidates not chosen) on lines a recent run changed or would have
/// (`kept` finds it).
fn offers(
    params: &CodeActionParams,
    only: Option<&Vec<CodeActionKind>>,
    kept: impl Fn(&std::path::Path, crate::position::LineRange) -> Option<super::session::KeptRun>,
) -> Vec<Offer> {
    let range = params.range;
    let context = &params.context;
    let mut offers = Vec::new();
    let overlapping: Vec<Diagnostic> =
        context.diagnostics.iter().filter(|d| convert::overlaps(&d.range, &range)).cloned().collect();
    if kind_allowed(only, &CodeActionKind::QUICKFIX) {
        for d in &overlapping {
            offers.push(Offer::new(action_title(&d.message), CodeActionKind::QUICKFIX, vec![d.clone()], true, range));
        }
    }
    let empty = range.start == range.end;
    if kind_allowed(only, &CodeActionKind::REFACTOR_REWRITE) {
        // Some clients (Neovim 0.10+, eglot) send a server only its own
        // diagnostics, and agentfix publishes none: offer the line itself.
        if empty && context.diagnostics.is_empty() {
            let title = format!("Agent fix: line {}", u64::from(range.start.line) + 1);
            offers.push(Offer::new(title, CodeActionKind::REFACTOR_REWRITE, Vec::new(), false, range));
        }
        if !empty {
            offers.push(Offer::new(
                "Agent fix: selection".into(),
                CodeActionKind::REFACTOR_REWRITE,
                overlapping.clone(),
                false,
                range,
            ));
        }
        let path = convert::uri_to_path(&params.text_document.uri);
        if let Some(run) = path.and_then(|p| kept(&p, convert::range_lines(&range))) {
            for a in run.alternatives.iter() {
                offers.push(Offer {
                    alternative: Some(AlternativeArguments { run_id: run.id.clone(), index: a.index }),
                    ..Offer::new(a.title(), CodeActionKind::REFACTOR_REWRITE, Vec::new(), false, range)
                });
            }
            offers.push(Offer {
                follow_up: Some(run.id),
                ..Offer::new(
                    "Agent fix: follow up…".into(),
                    CodeActionKind::REFACTOR_REWRITE,
                    overlapping,
                    false,
                    range,
                )
            });
        }
    }
    let fix_all = CodeActionKind::new(FIX_ALL_KIND);
    if context.diagnostics.len() > 1 && kind_allowed(only, &fix_all) && explicitly_requested(context) {
        let mut all = context.diagnostics.clone();
        all.sort_by_key(|d| (d.range.start.line, d.range.start.character));
        let span = Range {
            start: all[0].range.start,
            end: all.iter().map(|d| d.range.end).max_by_key(|p| (p.line, p.character)).unwrap_or(range.end),
        };
        let title = format!("Agent fix: all {} problems in this file", all.len());
        offers.push(Offer::new(title, fix_all, all, true, span));
    }
    offers
}

/// The code actions for a request, as `textDocument/codeAction` answers
/// them: one fix action per offer (`kept` finds a recent run to follow up,
/// as [`KeptRuns::newest_touching`](super::KeptRuns::newest_touching)
/// does); clients that run the fix in `codeAction/resolve` (`resolve_edit`)
/// get it without a command, the argument in `data`. Looks up only the
/// request's document in `docs` (its version), never the others.
pub fn code_actions(
    docs: &Documents,
    resolve_edit: bool,
    params: &CodeActionParams,
    kept: impl Fn(&std::path::Path, crate::position::LineRange) -> Option<super::session::KeptRun>,
) -> CodeActionResponse {
    let uri = &params.text_document.uri;
    let version = docs.version(uri.as_str());
    let action = |offer: Offer| {
        let title = offer.title;
        if let Some(alternative) = offer.alternative {
            let arg = alternative.to_value();
            let (command, data) = if resolve_edit {
                (None, Some(arg))
            } else {
                let command =
                    Command { title: title.clone(), command: ALTERNATIVE_COMMAND.into(), arguments: Some(vec![arg]) };
                (Some(command), None)
            };
            return CodeActionOrCommand::CodeAction(CodeAction {
                title,
                kind: Some(offer.kind),
                command,
                data,
                ..Default::default()
            });
        }
        let (diagnostics, attached) =
            if offer.attach { (offer.diagnostics.clone(), Some(offer.diagnostics)) } else { (offer.diagnostics, None) };
        let arg = FixArguments {
            uri: uri.clone(),
            version,
            range: offer.range,
            diagnostics,
            instruction: None,
            model: None,
            effort: None,
            follow_up: offer.follow_up,
            candidates: None,
            candidates_stop: None,
            delivery: None,
        }
        .to_value();
        let (command, data) = if resolve_edit {
            (None, Some(arg))
        } else {
            (Some(Command { title: title.clone(), command: FIX_COMMAND.into(), arguments: Some(vec![arg]) }), None)
        };
        CodeActionOrCommand::CodeAction(CodeAction {
            title,
            kind: Some(offer.kind),
            diagnostics: attached,
            command,
            data,
            ..Default::default()
        })
    };
    offers(params, params.context.only.as_ref(), kept).into_iter().map(action).collect()
}

impl LanguageServer for Backend {
    async fn initialize(&self, params: InitializeParams) -> Result<InitializeResult> {
        let (result, initial) = initialize_answer(&params)?;
        tracing::info!(encoding = ?initial.encoding, roots = ?initial.roots, "initialize");
        self.session.update(|s| {
            s.encoding = initial.encoding;
            s.support = initial.support;
            s.roots = initial.roots;
            s.init_settings = initial.settings;
            s.client_name = initial.client_name;
        });
        Ok(result)
    }

    async fn initialized(&self, _: InitializedParams) {
        tracing::info!("initialized");
        // The HTTP client and the protected-file globs, built now rather
        // than in the first run.
        let timeout = std::time::Duration::from_secs(crate::config::provider::DEFAULT_CONNECT_TIMEOUT_SECS);
        drop(tokio::task::spawn_blocking(move || {
            crate::providers::http::warm_up(timeout);
            // The protected-file globs every run's workspace needs.
            drop(crate::workspace::Protected::default());
        }));
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
        match settings_from(&params.settings) {
            Ok(new) => self.set_pulled_settings(new, "workspace/didChangeConfiguration"),
            Err(e) => self.client.show_message(MessageType::ERROR, format!("agentfix: {e}")).await,
        }
    }

    async fn code_action(&self, params: CodeActionParams) -> Result<Option<CodeActionResponse>> {
        let session = &self.session;
        let resolve_edit = session.support().runs_in_resolve();
        let kept = |path: &std::path::Path, lines| session.kept.newest_touching(path, lines);
        Ok(Some(code_actions(&session.docs, resolve_edit, &params, kept)))
    }

    async fn code_action_resolve(&self, mut action: CodeAction) -> Result<CodeAction> {
        // Only actions offered without a command (clients without
        // workspace/applyEdit) are resolved: the run happens here.
        let Some(argument) = action.data.take().filter(|_| action.command.is_none()) else {
            return Ok(action);
        };
        let edit = match AlternativeArguments::from_value(&argument) {
            Ok(alternative) => alternative::resolve(&self.session, &alternative)?,
            Err(_) => run::resolve_fix(self.client.clone(), self.session.clone(), argument).await?,
        };
        action.edit = edit;
        Ok(action)
    }

    async fn execute_command(&self, params: ExecuteCommandParams) -> Result<Option<Value>> {
        match params.command.as_str() {
            FIX_COMMAND => {
                let token = params.work_done_progress_params.work_done_token;
                run::execute_fix(self.client.clone(), self.session.clone(), params.arguments, token).await.map(Some)
            }
            CANCEL_COMMAND => run::cancel(&self.session, &params.arguments).map(Some),
            ALTERNATIVE_COMMAND => alternative::execute(&self.client, &self.session, &params.arguments).await.map(Some),
            REVIEWED_COMMAND => reviewed::execute(&self.session, &params.arguments).map(Some),
            "agentfix.debug.panic" if std::env::var_os("AGENTFIX_DEBUG_COMMANDS").is_some() => {
                panic!("debug panic requested")
            }
            other => Err(Error::invalid_params(format!(
                "unknown command `{other}`; agentfix offers `{FIX_COMMAND}`, `{ALTERNATIVE_COMMAND}`, `{CANCEL_COMMAND}` and `{REVIEWED_COMMAND}`"
            ))),
        }
    }
}

/// What `initialize` sets in the session.
pub(super) struct Initial {
    encoding: PositionEncoding,
    support: ClientSupport,
    roots: Vec<std::path::PathBuf>,
    settings: Settings,
    client_name: Option<String>,
}

/// The answer to `initialize`, and what it sets in the session: a function
/// of the params alone, so that it can be sent before the server has
/// started (`lsp::first`) and again be what the service answers.
pub(super) fn initialize_answer(params: &InitializeParams) -> Result<(InitializeResult, Initial)> {
    let encoding = convert::negotiate_encoding(&params.capabilities);
    let mut roots: Vec<_> =
        params.workspace_folders.iter().flatten().filter_map(|f| convert::uri_to_path(&f.uri)).collect();
    #[allow(deprecated)]
    if roots.is_empty()
        && let Some(root) = params.root_uri.as_ref().and_then(convert::uri_to_path)
    {
        roots.push(root);
    }
    let settings = match params.initialization_options.as_ref().map(settings_from).transpose() {
        Ok(s) => s.unwrap_or_default(),
        Err(e) => return Err(Error::invalid_params(e.to_string())),
    };
    let initial = Initial {
        encoding,
        support: ClientSupport::of(&params.capabilities),
        roots,
        settings,
        client_name: params.client_info.as_ref().map(|c| c.name.clone()),
    };
    let result = InitializeResult {
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
                code_action_kinds: Some(vec![
                    CodeActionKind::QUICKFIX,
                    CodeActionKind::REFACTOR_REWRITE,
                    CodeActionKind::new(FIX_ALL_KIND),
                ]),
                resolve_provider: Some(true),
                ..Default::default()
            })),
            execute_command_provider: Some(ExecuteCommandOptions {
                commands: vec![
                    FIX_COMMAND.to_string(),
                    ALTERNATIVE_COMMAND.to_string(),
                    CANCEL_COMMAND.to_string(),
                    REVIEWED_COMMAND.to_string(),
                ],
                ..Default::default()
            }),
            ..Default::default()
        },
        server_info: Some(ServerInfo { name: "agentfix".into(), version: Some(env!("CARGO_PKG_VERSION").into()) }),
        offset_encoding: None,
    };
    Ok((result, initial))
}

/// The editor's settings, with a warning in the log for each key that looks
/// like a misspelt setting (unknown keys stay accepted).
fn settings_from(v: &Value) -> std::result::Result<Settings, crate::config::ConfigError> {
    for w in Settings::unknown_keys(v, true) {
        tracing::warn!("editor settings: {w}");
    }
    Settings::from_json(v)
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
