//! One fix, whoever asked for it: the LSP server, the CLI, the demo, the
//! economy bench (and any front end to come) go through the same seam. A
//! front end builds a [`Request`] (what to fix, a follow-up, the per-run
//! model and effort) and loads a [`Setup`] with it; [`Setup::prepare`] makes
//! the checks every front end needs (the target is in the workspace, is not a
//! protected file, is in sync with the editor), each with its one message
//! ([`Refusal`]); the front end then hands [`run`] the [`Prepared`] run, its
//! [`Services`] (model client, symbols, approver, MCP tools, progress sink,
//! cancellation) and the request, and gets a [`FixResult`] back. Nothing in
//! here knows which front end asked.
//!
//! Its parts:
//! - `setup`: the configuration for a request, the checks, the overlay;
//! - `prompt`: the system prompt ([`SYSTEM_PROMPT`], then the project's
//!   instructions, built once per run) and the first user message;
//! - `toolbox`: the run's tools, their results scrubbed of credentials;
//! - `run`: the loop over the overlay, the transcript, the [`FixResult`];
//! - `rounds`: the loop, the check of its proposal, and the loop again with
//!   the findings while `verify.rounds` remain;
//! - `verdict`: how a run ended ([`Verdict`]) and what it spent ([`Spend`]);
//! - `candidates`: several runs of the task in their own overlays, ranked,
//!   the best proposed (`candidates`);
//! - `progress`: run events as one-line progress messages;
//! - `verify`: the check of a proposal (diagnostics, verify commands) and its
//!   record ([`verify::Verification`]).

mod candidates;
mod progress;
mod prompt;
mod rounds;
mod run;
mod setup;
mod toolbox;
mod verdict;
pub mod verify;

use std::path::PathBuf;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::agent::RunEvent;
use crate::config::candidates::CandidatesStop;
use crate::config::provider::Effort;
use crate::config::settings::Settings;
use crate::diagnostic::Diagnostic;
use crate::downstream::SymbolSource;
use crate::follow_up::PastRun;
use crate::mcp::McpServers;
use crate::position::LineRange;
use crate::providers::ModelClient;
use crate::tools::Approver;

pub use candidates::{Alternative, CandidateSummary};
pub use progress::{ProgressLine, ProgressLines};
pub use prompt::{SYSTEM_PROMPT, enclosing_outline, system_prompt, task_prompt};
pub use run::{FixResult, run};
pub use setup::{Prepared, Refusal, Roots, Setup};
pub use toolbox::sandbox_refusal;
pub use verdict::{NO_TOOL_CALL, NoEdit, Proposal, Spend, Verdict, brief};

/// What to fix.
#[derive(Debug, Clone)]
pub struct Target {
    /// Absolute path of the file.
    pub path: PathBuf,
    /// The lines the user pointed at.
    pub lines: LineRange,
    /// The editor's diagnostics the user asked about.
    pub problems: Vec<Diagnostic>,
    pub instruction: Option<String>,
}

/// What a front end asks for: the target, and how this one run differs from
/// the configuration.
#[derive(Debug, Clone)]
pub struct Request {
    pub target: Target,
    /// The earlier run this one continues (its conversation and proposal).
    pub follow_up: Option<Arc<PastRun>>,
    /// This run's model, over every layer of the configuration (blank: none).
    pub model: Option<String>,
    /// This run's reasoning effort, over every layer of the configuration.
    pub effort: Option<Effort>,
    /// How many candidates this run makes, over the `candidates` setting.
    pub candidates: Option<u32>,
    /// When the other candidates stop, over the `candidatesStop` setting.
    pub candidates_stop: Option<CandidatesStop>,
}

impl Request {
    /// A fresh run on `target` with the configured model and effort.
    pub fn new(target: Target) -> Self {
        Self { target, follow_up: None, model: None, effort: None, candidates: None, candidates_stop: None }
    }

    /// `editor` with this run's model and effort over it.
    fn settings_over(&self, editor: &Settings) -> Settings {
        let mut settings = editor.clone();
        if let Some(model) = self.model.as_deref().map(str::trim).filter(|m| !m.is_empty()) {
            settings.model = Some(model.to_string());
        }
        if self.effort.is_some() {
            settings.effort = self.effort;
        }
        settings
    }
}

/// What a run uses from its front end.
#[derive(Clone)]
pub struct Services<'a> {
    pub model: Arc<dyn ModelClient>,
    /// Symbols and diagnostics from language servers (none: no symbol tools).
    pub symbols: Option<Arc<dyn SymbolSource>>,
    /// Who approves commands (none: `run_command` is not offered).
    pub approver: Option<Arc<dyn Approver>>,
    pub mcp: Option<Arc<McpServers>>,
    /// Every event of the run, as it happens.
    pub progress: &'a (dyn Fn(RunEvent) + Send + Sync),
    pub cancel: CancellationToken,
}

impl<'a> Services<'a> {
    /// Only a model and a progress sink: no language servers, no commands,
    /// no MCP tools, never cancelled from outside.
    pub fn model_only(model: Arc<dyn ModelClient>, progress: &'a (dyn Fn(RunEvent) + Send + Sync)) -> Self {
        Self { model, symbols: None, approver: None, mcp: None, progress, cancel: CancellationToken::new() }
    }
}
