//! Symbol knowledge from real language servers: agentfix is itself an LSP
//! *client* of the servers the project uses (rust-analyzer, pyright, …).
//!
//! Servers start lazily at first need, one per (language, root), from the
//! `languageServers` setting or defaults found on PATH. Documents are synced
//! lazily: before each query the server is given the run's current text of
//! the file (the editor's buffer, or the run's overlay edits), so answers and
//! diagnostics reflect what the agent sees; when a run ends, documents are
//! put back to the editor's text (or closed). A server that crashes or hangs
//! is restarted once; after that its tools answer with an error and agentfix
//! carries on. Versions sent to a server are its own monotonic counter
//! (editor and overlay texts interleave), not the editor's.
//!
//! Its parts:
//! agentfix as an LSP *client*: `client.rs` (JSON-RPC over a child's stdio:
//! reader/writer/stderr tasks, pending map, timeouts, size limits,
//! server→client requests answered), `mod.rs` (`Downstream`: servers per
//! (language, root), lazy start, one restart, lazy document sync, queries;
//! the `SymbolSource` trait; `QuickFix`/`FixChange`, the quick fixes a
//! server offers for a range, asked with its own diagnostics of the range
//! and never applied), `decode.rs` (LSP results, every union shape, to
//! our `Symbol`/`Location`/`QuickFix` and `diagnostic::Diagnostic`, columns
//! in characters), `error.rs`
//! (`DownstreamError`), `uri.rs`. The JSON-RPC envelope is a
//! `serde_json::Value`; params and results are `ls_types` (a result of the
//! wrong shape is a `Malformed` error for its query), used only inside: what
//! it hands out is our own types

mod client;
mod decode;
mod error;
pub mod uri;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::Value;
use tower_lsp_server::ls_types::notification::{DidChangeTextDocument, DidCloseTextDocument, DidOpenTextDocument};
use tower_lsp_server::ls_types::request::{
    CodeActionRequest, DocumentSymbolRequest, GotoDefinition, HoverRequest, References, Request, WorkspaceSymbolRequest,
};
use tower_lsp_server::ls_types::{self as lsp};

use crate::config::downstream::ServerConfig;
use crate::diagnostic::Diagnostic;
use crate::position::{LineRange, Span};
pub use client::Client;
pub use error::DownstreamError;
use uri::path_to_uri;

/// How long a server may take to start.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// Restarts after a crash or hang before a server is given up.
const MAX_RESTARTS: u32 = 1;

/// The language of a file, by extension (LSP language ids).
pub fn language_of(path: &Path) -> Option<&'static str> {
    Some(match path.extension()?.to_str()? {
        "py" | "pyi" => "python",
        "rs" => "rust",
        "ts" | "mts" | "cts" => "typescript",
        "tsx" => "typescriptreact",
        "js" | "mjs" | "cjs" => "javascript",
        "jsx" => "javascriptreact",
        "c" | "h" => "c",
        "cc" | "cpp" | "cxx" | "hpp" | "hh" | "hxx" => "cpp",
        "go" => "go",
        _ => return None,
    })
}

/// Default servers, in order of preference, per language family.
fn defaults(language: &str) -> &'static [&'static [&'static str]] {
    match language {
        "rust" => &[&["rust-analyzer"]],
        "python" => &[&["pyright-langserver", "--stdio"], &["basedpyright-langserver", "--stdio"], &["pylsp"]],
        "typescript" | "typescriptreact" | "javascript" | "javascriptreact" => {
            &[&["typescript-language-server", "--stdio"]]
        }
        "c" | "cpp" => &[&["clangd"]],
        "go" => &[&["gopls"]],
        _ => &[],
    }
}

fn on_path(program: &str) -> bool {
    let Some(paths) = std::env::var_os("PATH") else { return false };
    std::env::split_paths(&paths).any(|dir| {
        let p = dir.join(program);
        p.is_file() && std::fs::metadata(&p).map(|m| is_executable(&m)).unwrap_or(false)
    })
}

#[cfg(unix)]
fn is_executable(m: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    m.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
fn is_executable(_: &std::fs::Metadata) -> bool {
    true
}

/// A symbol of a document outline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    pub name: String,
    pub kind: &'static str,
    /// From the line of its range's start to that of its end.
    pub lines: LineRange,
    pub children: Vec<Symbol>,
}

/// A place in a file (0-based line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub path: PathBuf,
    pub line: u32,
    /// Only for workspace symbols.
    pub name: Option<String>,
    pub kind: Option<&'static str>,
}

/// A quick fix a language server offers for a range: its title and what it
/// would change. agentfix never applies one: the first message shows it to
/// the model, which makes its own edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuickFix {
    pub title: String,
    /// The server marks it as the fix to take (`isPreferred`).
    pub preferred: bool,
    /// Its edit; empty for a command-only action.
    pub changes: Vec<FixChange>,
    /// It runs a command on the server, whose effect agentfix cannot show.
    pub command: bool,
}

/// One change of a quick fix's edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FixChange {
    /// `span` of `path` (0-based lines; columns in characters where the
    /// server's text of `path` is known, else in the server's units)
    /// becomes `text`.
    Edit {
        path: PathBuf,
        span: Span,
        text: String,
    },
    Create(PathBuf),
    Rename {
        from: PathBuf,
        to: PathBuf,
    },
    Delete(PathBuf),
}

/// How long one `textDocument/codeAction` may take: the quick fixes are a
/// hint for the first message, and a slow server must not stall the run.
pub const QUICK_FIX_TIMEOUT: Duration = Duration::from_secs(5);

/// What the tools ask of language servers. `text` is the run's current text
/// of `path`; positions are 0-based lines and char columns in that text.
#[async_trait]
pub trait SymbolSource: Send + Sync {
    /// Whether a language server is configured or found for `path`'s language.
    fn available(&self, path: &Path) -> bool;
    async fn document_symbols(&self, path: &Path, text: &str) -> Result<Vec<Symbol>, DownstreamError>;
    async fn workspace_symbols(&self, language_hint: &Path, query: &str) -> Result<Vec<Location>, DownstreamError>;
    async fn definition(
        &self,
        path: &Path,
        text: &str,
        line: u32,
        column: u32,
    ) -> Result<Vec<Location>, DownstreamError>;
    async fn references(
        &self,
        path: &Path,
        text: &str,
        line: u32,
        column: u32,
    ) -> Result<Vec<Location>, DownstreamError>;
    async fn hover(&self, path: &Path, text: &str, line: u32, column: u32) -> Result<Option<String>, DownstreamError>;
    /// The diagnostics of `text`, waiting (bounded) for the server to settle.
    async fn diagnostics(&self, path: &Path, text: &str) -> Result<Vec<Diagnostic>, DownstreamError>;
    /// Gives servers back the editor's text (`None`: not open in the editor)
    /// of the documents a run synced.
    async fn release(&self, docs: &[(PathBuf, Option<String>)]);
    /// The quick fixes the server offers for each of `spans` of `text`
    /// (0-based lines, char columns), one list per span, each asked with
    /// the diagnostics the server published for `text` that overlap its
    /// span. Never applied. A source without the notion offers none.
    async fn quick_fixes(
        &self,
        _path: &Path,
        _text: &str,
        spans: &[Span],
    ) -> Result<Vec<Vec<QuickFix>>, DownstreamError> {
        Ok(vec![Vec::new(); spans.len()])
    }
}

/// Timing of the waits on servers: the configuration's, as it is.
use crate::config::downstream::DiagnosticsWait;

/// One running (or failed) server.
struct Server {
    client: Client,
    language: String,
    /// Documents the server has: path → (version, text).
    docs: tokio::sync::Mutex<HashMap<PathBuf, (i32, String)>>,
    /// The server's position encoding.
    utf8: bool,
}

enum Slot {
    Running(Arc<Server>),
    Failed(DownstreamError),
}

/// All downstream servers of a session.
pub struct Downstream {
    configured: HashMap<String, ServerConfig>,
    /// Whether defaults found on PATH are used for unconfigured languages.
    defaults: bool,
    roots: Vec<PathBuf>,
    servers: tokio::sync::Mutex<HashMap<(String, PathBuf), (Slot, u32)>>,
    wait: DiagnosticsWait,
    /// Documents given a non-editor text, to put back at release.
    dirty: Mutex<HashSet<PathBuf>>,
    /// Credential variables the servers may inherit (`envAllow`).
    env_allow: Vec<String>,
}

impl Downstream {
    pub fn new(configured: HashMap<String, ServerConfig>, roots: Vec<PathBuf>, wait: DiagnosticsWait) -> Self {
        // Canonical roots, as `workspace::Workspace` uses, so paths compare.
        let roots = roots.into_iter().map(|r| std::fs::canonicalize(&r).unwrap_or(r)).collect();
        Self {
            configured,
            defaults: true,
            roots,
            servers: tokio::sync::Mutex::new(HashMap::new()),
            wait,
            dirty: Mutex::new(HashSet::new()),
            env_allow: Vec::new(),
        }
    }

    /// Credential variables the servers may inherit (`envAllow`).
    /// The servers `config` asks for, over `roots`.
    pub fn from_config(config: &crate::config::downstream::DownstreamConfig, roots: Vec<PathBuf>) -> Self {
        Self::new(config.servers.clone(), roots, config.wait)
            .with_defaults(config.defaults)
            .with_env_allow(config.env_allow.clone())
    }

    pub fn with_env_allow(mut self, allow: Vec<String>) -> Self {
        self.env_allow = allow;
        self
    }

    /// Whether the defaults found on PATH serve unconfigured languages.
    pub fn with_defaults(mut self, defaults: bool) -> Self {
        self.defaults = defaults;
        self
    }

    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// The server command for a language: configured, else the first
    /// default on PATH.
    pub fn config_for(&self, language: &str) -> Option<ServerConfig> {
        let family = match language {
            "typescriptreact" | "javascriptreact" | "javascript" => "typescript",
            "cpp" => "c",
            other => other,
        };
        for key in [language, family] {
            if let Some(c) = self.configured.get(key) {
                // An empty command turns the language off.
                return (!c.command.is_empty()).then(|| c.clone());
            }
        }
        if !self.defaults {
            return None;
        }
        defaults(language).iter().find(|cmd| on_path(cmd[0])).map(|cmd| ServerConfig {
            command: cmd.iter().map(|s| s.to_string()).collect(),
            initialization_options: None,
            settings: None,
            root_markers: Vec::new(),
        })
    }

    /// The root for `path`: the nearest ancestor inside the workspace with a
    /// root marker, else the workspace root holding it.
    fn root_for(&self, path: &Path, config: &ServerConfig) -> PathBuf {
        let ws_root = self.roots.iter().find(|r| path.starts_with(r)).cloned();
        if !config.root_markers.is_empty() {
            let mut dir = path.parent();
            while let Some(d) = dir {
                if config.root_markers.iter().any(|m| d.join(m).exists()) {
                    return d.to_path_buf();
                }
                if ws_root.as_deref() == Some(d) {
                    break;
                }
                dir = d.parent();
            }
        }
        ws_root.or_else(|| path.parent().map(Path::to_path_buf)).unwrap_or_else(|| PathBuf::from("/"))
    }

    /// The server for `path`, started (or restarted once) as needed.
    async fn server_for(&self, path: &Path) -> Result<Arc<Server>, DownstreamError> {
        let language = language_of(path).ok_or_else(|| DownstreamError::UnknownLanguage(path.to_path_buf()))?;
        let config = self.config_for(language).ok_or_else(|| DownstreamError::NoServer(language.to_string()))?;
        let root = self.root_for(path, &config);
        let key = (language.to_string(), root.clone());
        let mut servers = self.servers.lock().await;
        let current = match servers.get(&key) {
            Some((Slot::Running(s), n)) => Some((Ok(s.clone()), *n)),
            Some((Slot::Failed(why), n)) => Some((Err(why.clone()), *n)),
            None => None,
        };
        let restarts = match current {
            Some((Ok(s), _)) if !s.client.is_dead() => return Ok(s),
            Some((Ok(s), n)) => {
                tracing::warn!(language, "language server died: {}", s.client.death());
                if n >= MAX_RESTARTS {
                    let why = DownstreamError::Unavailable { language: language.to_string(), why: s.client.death() };
                    servers.insert(key, (Slot::Failed(why.clone()), n));
                    return Err(why);
                }
                n + 1
            }
            Some((Err(why), _)) => return Err(why),
            None => 0,
        };
        match self.start_server(language, &config, &root, restarts).await {
            Ok(server) => {
                servers.insert(key, (Slot::Running(server.clone()), restarts));
                Ok(server)
            }
            Err(e) => {
                let why = DownstreamError::Unavailable { language: language.to_string(), why: e.to_string() };
                servers.insert(key, (Slot::Failed(why.clone()), restarts));
                Err(why)
            }
        }
    }

    /// Starts the server of `config` for `language` in `root`.
    async fn start_server(
        &self,
        language: &str,
        config: &ServerConfig,
        root: &Path,
        restarts: u32,
    ) -> Result<Arc<Server>, DownstreamError> {
        let name = format!("{} ({language})", config.command[0]);
        let settings = config.settings.clone().unwrap_or(Value::Null);
        let client = Client::start(
            &name,
            &config.command,
            root,
            config.initialization_options.clone(),
            settings,
            START_TIMEOUT,
            &self.env_allow,
        )
        .await?;
        let utf8 = client.utf8();
        tracing::info!(server = %name, root = %root.display(), restarts, "language server started");
        Ok(Arc::new(Server {
            client,
            language: language.to_string(),
            docs: tokio::sync::Mutex::new(HashMap::new()),
            utf8,
        }))
    }

    /// Gives the server `text` for `path` (didOpen or a full didChange) if it
    /// has something else; returns the version and when it was sent.
    async fn sync(&self, server: &Server, path: &Path, text: &str) -> Result<(i32, Instant), DownstreamError> {
        let uri = document_uri(path)?;
        let mut docs = server.docs.lock().await;
        Ok(match docs.get_mut(path) {
            Some((v, t)) if t == text => (*v, Instant::now() - Duration::from_secs(3600)),
            Some((v, t)) => {
                *v += 1;
                *t = text.to_string();
                server.client.notify::<DidChangeTextDocument>(lsp::DidChangeTextDocumentParams {
                    text_document: lsp::VersionedTextDocumentIdentifier { uri, version: *v },
                    content_changes: vec![lsp::TextDocumentContentChangeEvent {
                        range: None,
                        range_length: None,
                        text: text.to_string(),
                    }],
                });
                (*v, Instant::now())
            }
            None => {
                server.client.notify::<DidOpenTextDocument>(lsp::DidOpenTextDocumentParams {
                    text_document: lsp::TextDocumentItem {
                        uri,
                        language_id: server.language.clone(),
                        version: 1,
                        text: text.to_string(),
                    },
                });
                docs.insert(path.to_path_buf(), (1, text.to_string()));
                (1, Instant::now())
            }
        })
    }

    /// Runs request `R` after syncing; a dead or hung server is restarted
    /// once and the query repeated.
    async fn query<R: Request>(
        &self,
        path: &Path,
        text: &str,
        params: impl Fn(&Server) -> R::Params,
    ) -> Result<R::Result, DownstreamError> {
        let mut attempt = 0;
        loop {
            let server = self.server_for(path).await?;
            self.sync(&server, path, text).await?;
            self.dirty.lock().unwrap_or_else(|e| e.into_inner()).insert(path.to_path_buf());
            match server.client.request::<R>(params(&server), self.wait.query).await {
                Ok(v) => return Ok(v),
                Err(e) if attempt < MAX_RESTARTS && (server.client.is_dead() || e.is_timeout()) => {
                    tracing::warn!("{e}; restarting the language server");
                    server.client.stop().await;
                    attempt += 1;
                }
                Err(_) if server.client.is_dead() => {
                    return Err(DownstreamError::Unavailable {
                        language: server.language.clone(),
                        why: server.client.death(),
                    });
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The LSP position of a 0-based line and char column of `text`, in the
    /// server's encoding.
    fn position(server: &Server, text: &str, line: u32, column: u32) -> lsp::Position {
        let line_text = text.split('\n').nth(line as usize).unwrap_or("");
        let prefix: String = line_text.chars().take(column as usize).collect();
        let character = if server.utf8 { prefix.len() } else { prefix.encode_utf16().count() };
        lsp::Position { line, character: u32::try_from(character).unwrap_or(u32::MAX) }
    }

    /// The request at a position of `path`.
    fn at(server: &Server, uri: &lsp::Uri, text: &str, line: u32, column: u32) -> lsp::TextDocumentPositionParams {
        lsp::TextDocumentPositionParams {
            text_document: lsp::TextDocumentIdentifier { uri: uri.clone() },
            position: Self::position(server, text, line, column),
        }
    }

    /// Stops every server (shutdown/exit).
    pub async fn stop_all(&self) {
        let servers: Vec<Arc<Server>> = self
            .servers
            .lock()
            .await
            .values()
            .filter_map(|(s, _)| match s {
                Slot::Running(s) => Some(s.clone()),
                Slot::Failed(_) => None,
            })
            .collect();
        for s in servers {
            s.client.stop().await;
        }
    }
}

/// Whether two ranges share a position (ends inclusive: a diagnostic that
/// touches the span counts).
fn overlaps(a: &lsp::Range, b: &lsp::Range) -> bool {
    let le = |p: &lsp::Position, q: &lsp::Position| (p.line, p.character) <= (q.line, q.character);
    le(&a.start, &b.end) && le(&b.start, &a.end)
}

/// The URI a server is given for `path`.
fn document_uri(path: &Path) -> Result<lsp::Uri, DownstreamError> {
    decode::uri_of(path).ok_or_else(|| DownstreamError::BadPath(path.to_path_buf()))
}

#[async_trait]
impl SymbolSource for Downstream {
    fn available(&self, path: &Path) -> bool {
        language_of(path).and_then(|l| self.config_for(l)).is_some()
    }

    async fn document_symbols(&self, path: &Path, text: &str) -> Result<Vec<Symbol>, DownstreamError> {
        let uri = document_uri(path)?;
        let r = self
            .query::<DocumentSymbolRequest>(path, text, |_| lsp::DocumentSymbolParams {
                text_document: lsp::TextDocumentIdentifier { uri: uri.clone() },
                work_done_progress_params: Default::default(),
                partial_result_params: Default::default(),
            })
            .await?;
        Ok(decode::symbols(r))
    }

    async fn workspace_symbols(&self, language_hint: &Path, query: &str) -> Result<Vec<Location>, DownstreamError> {
        let server = self.server_for(language_hint).await?;
        let params = lsp::WorkspaceSymbolParams {
            query: query.to_string(),
            work_done_progress_params: Default::default(),
            partial_result_params: Default::default(),
        };
        let r = server.client.request::<WorkspaceSymbolRequest>(params, self.wait.query).await?;
        Ok(decode::workspace_symbols(r))
    }

    async fn definition(
        &self,
        path: &Path,
        text: &str,
        line: u32,
        column: u32,
    ) -> Result<Vec<Location>, DownstreamError> {
        let uri = document_uri(path)?;
        let r = self
            .query::<GotoDefinition>(path, text, |s| lsp::GotoDefinitionParams {
                text_document_position_params: Self::at(s, &uri, text, line, column),
                work_done_progress_params: Default::default(),
                partial_result_params: Default::default(),
            })
            .await?;
        Ok(decode::definitions(r))
    }

    async fn references(
        &self,
        path: &Path,
        text: &str,
        line: u32,
        column: u32,
    ) -> Result<Vec<Location>, DownstreamError> {
        let uri = document_uri(path)?;
        let r = self
            .query::<References>(path, text, |s| lsp::ReferenceParams {
                text_document_position: Self::at(s, &uri, text, line, column),
                work_done_progress_params: Default::default(),
                partial_result_params: Default::default(),
                context: lsp::ReferenceContext { include_declaration: true },
            })
            .await?;
        Ok(decode::references(r))
    }

    async fn hover(&self, path: &Path, text: &str, line: u32, column: u32) -> Result<Option<String>, DownstreamError> {
        let uri = document_uri(path)?;
        let r = self
            .query::<HoverRequest>(path, text, |s| lsp::HoverParams {
                text_document_position_params: Self::at(s, &uri, text, line, column),
                work_done_progress_params: Default::default(),
            })
            .await?;
        Ok(decode::hover_text(r))
    }

    async fn diagnostics(&self, path: &Path, text: &str) -> Result<Vec<Diagnostic>, DownstreamError> {
        let server = self.server_for(path).await?;
        let (version, sent) = self.sync(&server, path, text).await?;
        self.dirty.lock().unwrap_or_else(|e| e.into_inner()).insert(path.to_path_buf());
        let uri = path_to_uri(path);
        match server.client.settled_diagnostics(&uri, version, sent, self.wait.settle, self.wait.max).await {
            Some(items) => Ok(decode::diagnostics(&items, text, server.utf8)),
            None if server.client.is_dead() => {
                Err(DownstreamError::Unavailable { language: server.language.clone(), why: server.client.death() })
            }
            None => Err(DownstreamError::NoDiagnostics {
                server: server.client.name().to_string(),
                secs: self.wait.max.as_secs_f32(),
            }),
        }
    }

    async fn quick_fixes(
        &self,
        path: &Path,
        text: &str,
        spans: &[Span],
    ) -> Result<Vec<Vec<QuickFix>>, DownstreamError> {
        let server = self.server_for(path).await?;
        if spans.is_empty() || !server.client.offers_code_actions() {
            return Ok(vec![Vec::new(); spans.len()]);
        }
        let (version, sent) = self.sync(&server, path, text).await?;
        self.dirty.lock().unwrap_or_else(|e| e.into_inner()).insert(path.to_path_buf());
        // The context of each request: what the server published for this
        // text (none in time: an empty context, servers still answer).
        let published = server
            .client
            .settled_diagnostics(&path_to_uri(path), version, sent, self.wait.settle, self.wait.max)
            .await
            .unwrap_or_default();
        let uri = document_uri(path)?;
        let asks = spans.iter().map(|span| {
            let range = lsp::Range {
                start: Self::position(&server, text, span.start.line, span.start.column),
                end: Self::position(&server, text, span.end.line, span.end.column),
            };
            let diagnostics = published.iter().filter(|d| overlaps(&d.range, &range)).cloned().collect();
            let params = lsp::CodeActionParams {
                text_document: lsp::TextDocumentIdentifier { uri: uri.clone() },
                range,
                context: lsp::CodeActionContext {
                    diagnostics,
                    only: Some(vec![lsp::CodeActionKind::QUICKFIX]),
                    trigger_kind: Some(lsp::CodeActionTriggerKind::INVOKED),
                },
                work_done_progress_params: Default::default(),
                partial_result_params: Default::default(),
            };
            server.client.request::<CodeActionRequest>(params, QUICK_FIX_TIMEOUT)
        });
        let answers = futures::future::join_all(asks).await;
        let docs = server.docs.lock().await;
        let text_of = |p: &Path| docs.get(p).map(|(_, t)| t.clone());
        Ok(answers
            .into_iter()
            .map(|a| match a {
                Ok(r) => decode::quick_fixes(r, &text_of, server.utf8),
                Err(e) => {
                    tracing::info!("no quick fixes: {e}");
                    Vec::new()
                }
            })
            .collect())
    }

    async fn release(&self, docs: &[(PathBuf, Option<String>)]) {
        let docs: Vec<(PathBuf, Option<String>)> = {
            let mut dirty = self.dirty.lock().unwrap_or_else(|e| e.into_inner());
            docs.iter().filter(|(p, _)| dirty.remove(p)).cloned().collect()
        };
        for (path, editor_text) in docs {
            let Ok(server) = self.server_for(&path).await else { continue };
            match editor_text {
                Some(text) => {
                    // A path without a URI was never synced.
                    let _ = self.sync(&server, &path, &text).await;
                }
                None => {
                    if server.docs.lock().await.remove(&path).is_some()
                        && let Ok(uri) = document_uri(&path)
                    {
                        server.client.notify::<DidCloseTextDocument>(lsp::DidCloseTextDocumentParams {
                            text_document: lsp::TextDocumentIdentifier { uri },
                        });
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn languages_and_defaults() {
        assert_eq!(language_of(Path::new("a/b.py")), Some("python"));
        assert_eq!(language_of(Path::new("x.tsx")), Some("typescriptreact"));
        assert_eq!(language_of(Path::new("Makefile")), None);
        let ds = Downstream::new(
            HashMap::from([(
                "python".to_string(),
                ServerConfig {
                    command: vec!["my-pyls".into()],
                    initialization_options: None,
                    settings: None,
                    root_markers: vec![],
                },
            )]),
            vec![],
            DiagnosticsWait::default(),
        );
        assert_eq!(ds.config_for("python").unwrap().command, ["my-pyls"]);
    }

    #[test]
    fn root_markers_pick_the_nearest_project() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        std::fs::create_dir_all(root.join("pkg/sub")).unwrap();
        std::fs::write(root.join("pkg/pyproject.toml"), "").unwrap();
        let ds = Downstream::new(HashMap::new(), vec![root.clone()], DiagnosticsWait::default());
        let cfg = ServerConfig {
            command: vec!["x".into()],
            initialization_options: None,
            settings: None,
            root_markers: vec!["pyproject.toml".into()],
        };
        assert_eq!(ds.root_for(&root.join("pkg/sub/a.py"), &cfg), root.join("pkg"));
        assert_eq!(ds.root_for(&root.join("other/a.py"), &cfg), root);
    }
}
