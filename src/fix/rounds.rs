//! The rounds of a run: the loop to its end, then the check of what it
//! proposes; while the check fails with findings the model can act on and
//! rounds remain, the findings go back as the next user message and the
//! loop goes on within what is left of the same limits.

use std::time::Instant;

use tokio_util::sync::CancellationToken;

use super::verify::{Checked, Checker, Verification};
use crate::agent::{self, Outcome, RunEvent, Stop};
use crate::config::limits::{CostLimit, Limits};
use crate::diagnostic::Diagnostic;
use crate::follow_up;
use crate::model::{Message, Usage};
use crate::providers::ModelClient;
use crate::secrets::Redactor;
use crate::tools::{ToolContext, ToolSet};

/// Everything a round needs, the same for every round.
pub(super) struct Rounds<'a> {
    pub system: &'a str,
    pub model: &'a dyn ModelClient,
    pub tools: &'a dyn ToolSet,
    pub limits: Limits,
    pub cancel: &'a CancellationToken,
    pub observe: &'a (dyn Fn(RunEvent) + Send + Sync),
    pub checker: Checker<'a>,
    /// The run's overlay and target, for the check.
    pub ctx: &'a ToolContext,
    /// The problems the user asked about.
    pub problems: &'a [Diagnostic],
    /// `verify.rounds`.
    pub rounds: u32,
    /// Scrubs the findings (a command's output) before the model reads them.
    pub redactor: Redactor,
}

/// The run's outcome over every round (turns and usage summed, the last
/// round's stop, summary and conversation) and the last check's record
/// (`None` when the run proposes nothing).
pub(super) struct Ended {
    pub outcome: Outcome,
    pub verification: Option<Verification>,
    /// The last check, for the message of an unverified proposal.
    pub checked: Option<Checked>,
}

impl Rounds<'_> {
    pub(super) async fn run(&self, mut messages: Vec<Message>) -> Ended {
        let started = Instant::now();
        let (mut turns, mut usage) = (0u32, Usage::default());
        let mut round = 1;
        loop {
            let limits = self.left(turns, &usage, started);
            let mut outcome =
                agent::run(self.system, messages, self.model, self.tools, &limits, self.cancel, self.observe).await;
            turns += outcome.turns;
            usage.add(outcome.usage);
            let changes = self.ctx.overlay.changes();
            if changes.is_empty() || self.cancel.is_cancelled() || outcome.stop == Stop::Cancelled {
                (outcome.turns, outcome.usage) = (turns, usage);
                return Ended { outcome, verification: None, checked: None };
            }
            let checking = Instant::now();
            // A cancel ends the check too (a test suite may run for minutes):
            // the run is cancelled, nothing is offered.
            let checked = tokio::select! {
                checked = self.checker.check(self.ctx, &changes, self.problems) => checked,
                _ = self.cancel.cancelled() => {
                    (outcome.turns, outcome.usage, outcome.stop) = (turns, usage, Stop::Cancelled);
                    return Ended { outcome, verification: None, checked: None };
                }
            };
            let record = checked.record(round);
            (self.observe)(RunEvent::Checked {
                round,
                line: record.line(),
                elapsed_ms: checking.elapsed().as_millis() as u64,
            });
            let again = !checked.passed()
                && checked.has_findings()
                && outcome.stop.is_natural()
                && round < self.rounds
                && !self.spent(turns, &usage, started)
                && !self.cancel.is_cancelled();
            if !again {
                (outcome.turns, outcome.usage) = (turns, usage);
                return Ended { outcome, verification: Some(record), checked: Some(checked) };
            }
            let findings = self.redactor.redact(&checked.findings()).into_owned();
            messages = follow_up::continued(&outcome.messages, findings);
            round += 1;
        }
    }

    /// What is left of the run's limits after `turns` turns, `usage` and the
    /// time since `started`.
    fn left(&self, turns: u32, usage: &Usage, started: Instant) -> Limits {
        let l = self.limits;
        Limits {
            max_turns: l.max_turns.saturating_sub(turns),
            max_tokens: l.max_tokens.saturating_sub(usage.billed()),
            timeout: l.timeout.saturating_sub(started.elapsed()),
            max_cost: l.max_cost.map(|c| CostLimit { usd: (c.usd - c.price.cost(&usage.tokens())).max(0.0), ..c }),
            ..l
        }
    }

    /// Whether nothing is left for another round.
    fn spent(&self, turns: u32, usage: &Usage, started: Instant) -> bool {
        let left = self.left(turns, usage, started);
        left.max_turns == 0
            || left.max_tokens == 0
            || left.timeout.is_zero()
            || left.max_cost.is_some_and(|c| c.usd <= 0.0)
    }
}
