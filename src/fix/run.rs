//! The run: the loop over the prepared overlay with the run's tools, the
//! transcript, and the [`FixResult`].

use std::path::{Path, PathBuf};

use super::prompt::{SYSTEM_PROMPT, first_context, system_prompt, task_prompt};
use super::rounds::{Ended, Rounds};
use super::toolbox::{KeyScrubbed, UntilEdit, toolbox};
use super::verdict::{Spend, Verdict};
use super::verify::{Checker, Verification};
use super::{Prepared, Request, Services};
use crate::agent::{Outcome, RunEvent, Stop};
use crate::config::Config;
use crate::config::limits::Limits;
use crate::downstream::{QuickFix, SymbolSource};
use crate::follow_up;
use crate::model::Message;
use crate::tools::{ToolContext, ToolSet};
use crate::transcript::Transcript;
use crate::workspace::{FileChange, Overlay};

/// The result of one fix.
pub struct FixResult {
    pub outcome: Outcome,
    pub verdict: Verdict,
    /// The tokens and cost of the run.
    pub spend: Spend,
    pub limits: Limits,
    /// The transcript file, when transcripts are on.
    pub transcript: Option<PathBuf>,
    /// How the proposal fared in its check; `None` without a proposal.
    pub verification: Option<Verification>,
    /// With several candidates, each of them (the chosen one marked); empty
    /// for a single run.
    pub candidates: Vec<super::CandidateSummary>,
    /// With several candidates, the others that propose something, to
    /// offer as alternatives; empty for a single run.
    pub alternatives: Vec<super::Alternative>,
}

impl FixResult {
    /// The proposed changes; none unless the verdict is a proposal.
    pub fn changes(&self) -> &[FileChange] {
        match &self.verdict {
            Verdict::Proposal(p) => &p.changes,
            _ => &[],
        }
    }

    /// Whether the model API failed (the CLI's exit code 3), whatever was
    /// proposed before it did.
    pub fn model_failed(&self) -> bool {
        matches!(self.outcome.stop, Stop::ModelError(_))
    }
}

/// Runs one fix to the end over the prepared overlay; with a follow-up,
/// continuing that run's conversation. Nothing is written anywhere but the
/// transcript.
pub async fn run(prepared: &Prepared, services: Services<'_>, request: Request) -> FixResult {
    let count = request.candidates.unwrap_or(prepared.config.candidates.count);
    if count > 1 {
        return super::candidates::run(prepared, services, request, count).await;
    }
    run_one(prepared, services, &request, Begin::Task { note: None }).await
}

/// Where a run begins.
pub(super) enum Begin {
    /// The task (or the follow-up's conversation), a candidate's variation
    /// note at the end of its first message.
    Task { note: Option<String> },
    /// The task, to the model's first edit: the run ends `Forked` there,
    /// before running it (best of N from the first edit).
    Explore,
    /// A conversation forked from an exploration.
    Forked(Vec<Message>),
}

/// One run from `begin`.
pub(super) async fn run_one(prepared: &Prepared, services: Services<'_>, request: &Request, begin: Begin) -> FixResult {
    let started = std::time::Instant::now();
    let (config, overlay, target) = (&prepared.config, prepared.overlay.clone(), &request.target);
    let system = match &prepared.system {
        Some(system) => system.clone(),
        None => built_system_prompt(config, &overlay, &target.path).await,
    };
    let Services { model, symbols, approver, mcp, progress, cancel } = services;
    let cancel = &cancel;
    let root = overlay.workspace().primary_root().to_path_buf();
    // Symbol tools only when a language server exists for the target.
    let symbols = symbols.filter(|s| s.available(&target.path));
    let explores = matches!(begin, Begin::Explore);
    let messages = match begin {
        // A fork goes on from its conversation: nothing to read again.
        Begin::Forked(messages) => messages,
        begin => {
            let (outline, fixes) = first_context(symbols.as_deref(), &overlay, request, cancel).await;
            let first = first_messages(config, &overlay, request, outline.as_deref(), &fixes);
            match begin {
                Begin::Task { note: Some(note) } => follow_up::continued(&first, note),
                _ => first,
            }
        }
    };
    let ctx = ToolContext {
        overlay: overlay.clone(),
        symbols: symbols.clone(),
        target: target.path.clone(),
        editor_diagnostics: target.problems.clone(),
    };
    let (mut toolbox, commands) = toolbox(config, ctx.clone(), approver.clone());
    if let Some(mcp) = mcp.filter(|m| !m.is_empty()) {
        // The specs go with the first request: the servers must have listed
        // their tools by then (once per session; later runs use the list).
        let taken: Vec<String> = toolbox.specs().into_iter().map(|s| s.name).collect();
        tokio::select! {
            _ = cancel.cancelled() => {}
            tools = mcp.tools(&taken, approver) => tools.into_iter().for_each(|t| toolbox.add_external(t)),
        }
    }
    let limits = config.limits;
    let transcript = open_transcript(config);
    if let Some(t) = &transcript {
        t.start(config, &root, target, &system, &toolbox.specs());
    }
    let observe = |e: RunEvent| {
        if let Some(t) = &transcript {
            t.event(&e);
        }
        progress(e);
    };
    let scrubbed = KeyScrubbed::new(&toolbox, config.key_redactor());
    let until_edit = UntilEdit(&scrubbed);
    let tools: &dyn ToolSet = if explores { &until_edit } else { &scrubbed };
    let checker = Checker {
        symbols: symbols.as_deref().filter(|_| config.verify.diagnostics),
        commands: commands.as_ref(),
        names: &config.verify.commands,
    };
    let rounds = Rounds {
        system: &system,
        model: &*model,
        tools,
        limits,
        cancel,
        observe: &observe,
        checker,
        ctx: &ctx,
        problems: &target.problems,
        rounds: config.verify.rounds,
        redactor: config.key_redactor(),
    };
    let Ended { outcome, verification, checked } = rounds.run(messages).await;
    let changes = overlay.changes();
    if let Some(s) = &symbols {
        release(s.as_ref(), &overlay).await;
    }
    if let Some(t) = &transcript {
        t.end(&outcome, &overlay.bases(), &changes, started.elapsed().as_millis() as u64);
    }
    let compatible = config.provider.kind == crate::config::provider::ProviderKind::OpenaiCompatible;
    let verdict = Verdict::of(&outcome, changes, cancel.is_cancelled(), &limits, config.partial_edits, compatible);
    let verdict = verdict.checked(verification.as_ref(), checked.as_ref(), config.verify.offer_unverified);
    let spend = Spend::of(&outcome.usage, config.price());
    let transcript = transcript.map(|t| t.path().to_path_buf());
    FixResult {
        outcome,
        verdict,
        spend,
        limits,
        transcript,
        verification,
        candidates: Vec::new(),
        alternatives: Vec::new(),
    }
}

/// The system prompt for `target`, built off the runtime: it reads the disk
/// (a few small files, each opened without blocking).
async fn built_system_prompt(config: &Config, overlay: &Overlay, target: &Path) -> String {
    let (c, ws, path) = (config.clone(), overlay.workspace().clone(), target.to_path_buf());
    tokio::task::spawn_blocking(move || system_prompt(&c, &ws, &path)).await.unwrap_or_else(|e| {
        tracing::warn!("no project instructions: {e}");
        SYSTEM_PROMPT.to_string()
    })
}

/// The conversation a run starts from: the task, or a follow-up's past
/// conversation with the user's report. Both quote the workspace's files,
/// so they are scrubbed as the file tools' results are.
fn first_messages(
    config: &Config,
    overlay: &Overlay,
    request: &Request,
    outline: Option<&str>,
    fixes: &[Vec<QuickFix>],
) -> Vec<Message> {
    let redactor = config.key_redactor();
    let target = &request.target;
    match request.follow_up.as_deref() {
        Some(past) => {
            let report = follow_up::report(past, overlay, target.instruction.as_deref());
            follow_up::continued(&past.messages, redactor.redact_file_text(&report).into_owned())
        }
        None => {
            let prompt = task_prompt(target, overlay, outline, fixes);
            vec![Message::user_text(redactor.redact_file_text(&prompt).into_owned())]
        }
    }
}

/// The run's transcript, when transcripts are on and the folder is writable.
fn open_transcript(config: &Config) -> Option<Transcript> {
    let dir = config.transcripts.dir.as_deref()?;
    let secrets = config.provider.api_key.iter().map(|k| k.expose().to_string()).collect();
    Transcript::create(dir, secrets)
        .map_err(|e| tracing::warn!("no transcript: cannot write in {}: {e}", dir.display()))
        .ok()
}

/// Gives the language servers the editor's text again for every file the
/// run read.
async fn release(symbols: &dyn SymbolSource, overlay: &Overlay) {
    let docs: Vec<_> = overlay
        .bases()
        .into_iter()
        .map(|b| {
            let text = overlay.buffers().buffer(&b.path).map(|t| t.text);
            (b.path, text)
        })
        .collect();
    symbols.release(&docs).await;
}
