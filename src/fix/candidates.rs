//! Best of N: several runs of the same task, each in its own overlay with a
//! short variation note and its share of the token and cost budgets, each
//! checked as `verify` says. The first starts alone and the others once its
//! first answer has come (they then read the prompt cache it wrote). They
//! are ranked (verified first, then fewer new errors, more problems fixed,
//! the smaller diff, the cheaper run) and the best is the run's result, its
//! turns, tokens and cost the sums over all of them.

use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::run::{Begin, FixResult, run_one};
use super::verdict::{Spend, Verdict};
use super::{Prepared, Request, Services};
use crate::agent::{RunEvent, Stop};
use crate::config::candidates::{CandidatesFrom, CandidatesStop};
use crate::config::limits::CostLimit;
use crate::follow_up;
use crate::workspace::{FileChange, unified_diff};

/// One candidate as the result lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CandidateSummary {
    /// From 1, as its variation note numbers it.
    pub index: u32,
    pub verified: bool,
    /// The one proposed.
    pub chosen: bool,
    /// Its cost at the model's list price (`None`: no price known).
    pub cost_usd: Option<f64>,
    /// Lines added and removed by its proposal (0: no proposal).
    pub lines_changed: u32,
    pub stop_reason: String,
}

/// A candidate that was not chosen but proposes something: offered as an
/// alternative to the chosen proposal (its edit made against the text the
/// run started from, like any proposal).
#[derive(Debug, Clone)]
pub struct Alternative {
    /// From 1, as in the result's `candidates`.
    pub index: u32,
    /// Its check's line (`not verified: test failed`), `None` when nothing
    /// was set up to check it.
    pub check: Option<String>,
    /// The model's closing text.
    pub summary: String,
    pub changes: Vec<FileChange>,
}

impl Alternative {
    /// `Agent fix: alternative 2 (not verified: test failed)`.
    pub fn title(&self) -> String {
        let check = self.check.as_deref().unwrap_or("not checked");
        format!("Agent fix: alternative {} ({check})", self.index)
    }
}

/// What makes each candidate differ from the others.
const NOTES: &[&str] = &[
    "take the most direct fix of the problem as reported",
    "look for the cause first: it may lie elsewhere than the line shown",
    "prefer the smallest change a careful reviewer would accept",
    "try another approach than the obvious one",
];

/// The variation note of candidate `index` (from 1) of `count`.
pub fn note(index: u32, count: u32) -> String {
    let hint = NOTES[(index as usize - 1) % NOTES.len()];
    format!("(This is candidate {index} of {count} independent attempts at this task: {hint}.)")
}

/// Lines added and removed by `changes`.
pub fn lines_changed(changes: &[FileChange]) -> u32 {
    let lines = |c: &FileChange| {
        unified_diff(&c.display, c.original.as_deref(), &c.new_text)
            .lines()
            .filter(|l| (l.starts_with('+') && !l.starts_with("+++")) || (l.starts_with('-') && !l.starts_with("---")))
            .count() as u32
    };
    changes.iter().map(lines).sum()
}

/// How a candidate ranks, smallest best: a proposal first, verified first,
/// then fewer new errors, more problems fixed, the smaller diff, the
/// cheaper run.
fn rank_key(r: &FixResult) -> (bool, bool, u32, i64, u32, u64) {
    let proposal = matches!(r.verdict, Verdict::Proposal(_));
    let verified = r.verification.as_ref().is_some_and(|v| v.verified);
    let diagnostics = r.verification.as_ref().and_then(|v| v.diagnostics);
    let introduced = diagnostics.map_or(0, |d| d.introduced);
    let fixed = diagnostics.map_or(0, |d| i64::from(d.fixed));
    let cost = (r.spend.cost_usd.unwrap_or(0.0) * 1e6) as u64 + r.outcome.usage.billed();
    (!proposal, !verified, introduced, -fixed, lines_changed(r.changes()), cost)
}

/// Where a candidate is, for the progress line.
#[derive(Debug, Clone, PartialEq)]
enum State {
    /// Not started: it waits for the first candidate's first answer.
    Waiting,
    Turn(u32),
    Retrying(u32),
    /// Its last check said so (it may go on with another round).
    Checked {
        verified: bool,
    },
    /// Ended: `verified`, `not verified`, `no edit`, `cancelled`, …
    Ended(&'static str),
}

impl State {
    /// The state after `event`, when it changes it.
    fn after(&self, event: &RunEvent) -> Option<State> {
        use crate::model::StreamUpdate::Retrying;
        Some(match event {
            RunEvent::Request { turn, .. } => State::Turn(*turn),
            RunEvent::Stream(Retrying { attempt, .. }) => State::Retrying(*attempt),
            RunEvent::Checked { line: Some(line), .. } => State::Checked { verified: line.starts_with("verified") },
            _ => return None,
        })
        .filter(|s| s != self)
    }

    /// How a finished candidate ended.
    fn ended(result: &FixResult) -> State {
        State::Ended(match &result.verdict {
            Verdict::Proposal(_) => match &result.verification {
                Some(v) if v.verified => "verified",
                Some(v) if v.line().is_some() => "not verified",
                _ => "proposed",
            },
            Verdict::Cancelled => "cancelled",
            _ => "no edit",
        })
    }

    fn describe(&self) -> String {
        match self {
            State::Waiting => "waiting".into(),
            State::Turn(turn) => format!("turn {turn}"),
            State::Retrying(attempt) => format!("retry {attempt}"),
            State::Checked { verified: true } => "verified".into(),
            State::Checked { verified: false } => "not verified".into(),
            State::Ended(how) => format!("{how} (done)"),
        }
    }
}

/// Every candidate's state, said on one line whenever one changes.
struct Board(std::sync::Mutex<Vec<State>>);

impl Board {
    fn new(count: u32) -> Self {
        Self(std::sync::Mutex::new(vec![State::Waiting; count as usize]))
    }

    /// Sets candidate `index`'s state (from 1) and returns the new line.
    fn set(&self, index: u32, state: State) -> String {
        let mut states = self.0.lock().unwrap_or_else(|e| e.into_inner());
        states[index as usize - 1] = state;
        let each: Vec<String> =
            states.iter().enumerate().map(|(i, s)| format!("#{} {}", i + 1, s.describe())).collect();
        format!("best of {}: {}", states.len(), each.join(" · "))
    }

    /// The line after `event` of candidate `index`, when it changes a state.
    fn after(&self, index: u32, event: &RunEvent) -> Option<String> {
        let now = self.0.lock().unwrap_or_else(|e| e.into_inner())[index as usize - 1].clone();
        now.after(event).map(|state| self.set(index, state))
    }
}

/// The index of the best of `results`.
pub(super) fn best(results: &[FixResult]) -> usize {
    (0..results.len()).min_by_key(|&i| (rank_key(&results[i]), i)).unwrap_or(0)
}

/// Runs `count` candidates of `request` and returns the best, with every
/// candidate's turns, tokens and cost summed and each listed. From the
/// first edit (`candidatesFrom`), one exploration runs to the model's first
/// edit and the candidates go on from there: the first with that edit, the
/// others asked again with their notes.
pub(super) async fn run(prepared: &Prepared, services: Services<'_>, request: Request, count: u32) -> FixResult {
    if prepared.config.candidates.from == CandidatesFrom::Start {
        let begins = (1..=count).map(|i| Begin::Task { note: Some(note(i, count)) }).collect();
        let results = race(prepared, &services, &request, begins, Stagger::AfterFirstAnswer, None).await;
        return combine(results, services.cancel.is_cancelled(), prepared, None);
    }
    let started = std::time::Instant::now();
    let explored = run_one(prepared, services.clone(), &request, Begin::Explore).await;
    // No edit to fork at (the model finished, a limit, a cancel): that is
    // the run.
    if explored.outcome.stop != Stop::Forked {
        return explored;
    }
    let shared = &explored.outcome.messages;
    let begins = (1..=count)
        .map(|i| Begin::Forked(if i == 1 { shared.clone() } else { follow_up::continued(shared, note(i, count)) }))
        .collect();
    let spent = Spent { turns: explored.outcome.turns, usage: explored.outcome.usage, elapsed: started.elapsed() };
    let results = race(prepared, &services, &request, begins, Stagger::None, Some(spent)).await;
    combine(results, services.cancel.is_cancelled(), prepared, Some(&explored))
}

/// When the candidates after the first start.
#[derive(Clone, Copy, PartialEq)]
enum Stagger {
    /// Once the first has its first answer (the prompt cache is written).
    AfterFirstAnswer,
    /// All at once.
    None,
}

/// What an exploration took before the candidates forked.
#[derive(Clone, Copy)]
struct Spent {
    turns: u32,
    usage: crate::model::Usage,
    elapsed: std::time::Duration,
}

/// Runs one candidate per `begins` entry (indexes from 1) concurrently, each
/// in a fresh overlay with its share of what `spent` left, and returns
/// their results by index.
async fn race(
    prepared: &Prepared,
    services: &Services<'_>,
    request: &Request,
    begins: Vec<Begin>,
    stagger: Stagger,
    spent: Option<Spent>,
) -> Vec<(u32, FixResult)> {
    let count = begins.len() as u32;
    let stop = request.candidates_stop.unwrap_or(prepared.config.candidates.stop);
    let first_answer = tokio::sync::Notify::new();
    let answered = AtomicBool::new(stagger == Stagger::None);
    let tokens: Vec<CancellationToken> = (0..count).map(|_| services.cancel.child_token()).collect();
    let board = Board::new(count);
    let config = share(&prepared.config, count, spent);
    let mut running: FuturesUnordered<_> = begins
        .into_iter()
        .zip(1..)
        .map(|(begin, index)| {
            let (tokens, board, config) = (&tokens, &board, &config);
            let (first_answer, answered) = (&first_answer, &answered);
            async move {
                let token = &tokens[index as usize - 1];
                // Woken by the first candidate's first answer (or its end);
                // the wait is registered before the flag is read, so a
                // wake-up between the two is not lost.
                let woken = first_answer.notified();
                if index > 1 && !answered.load(Ordering::SeqCst) {
                    tokio::select! {
                        _ = woken => {}
                        _ = token.cancelled() => {}
                    }
                }
                let progress = |e: RunEvent| {
                    if index == 1 && matches!(e, RunEvent::Response { .. }) && !answered.swap(true, Ordering::SeqCst) {
                        first_answer.notify_waiters();
                    }
                    // One line for all, in place of each candidate's own
                    // (its transcript has them all).
                    if let Some(line) = board.after(index, &e) {
                        (services.progress)(RunEvent::Candidates { line });
                    }
                };
                let mine = Services { cancel: token.clone(), progress: &progress, ..services.clone() };
                let result = run_one(&prepared.fresh(config.clone()), mine, request, begin).await;
                if index == 1 && !answered.swap(true, Ordering::SeqCst) {
                    first_answer.notify_waiters();
                }
                let line = board.set(index, State::ended(&result));
                (services.progress)(RunEvent::Candidates { line });
                (index, result)
            }
        })
        .collect();
    let mut results: Vec<(u32, FixResult)> = Vec::new();
    while let Some((index, result)) = running.next().await {
        let verified = result.verification.as_ref().is_some_and(|v| v.verified);
        if verified && stop == CandidatesStop::FirstVerified {
            for (i, t) in tokens.iter().enumerate() {
                if i as u32 + 1 != index {
                    t.cancel();
                }
            }
        }
        results.push((index, result));
    }
    drop(running);
    results.sort_by_key(|(i, _)| *i);
    results
}

/// A candidate's configuration: its share of what `spent` left of
/// `maxTokens` and `maxCostUsd` (so that their sum bounds the run), and of
/// `maxTurns` and the wall clock after it.
fn share(config: &crate::config::Config, count: u32, spent: Option<Spent>) -> crate::config::Config {
    let mut config = config.clone();
    let price = config.price();
    let l = &mut config.limits;
    if let Some(spent) = spent {
        l.max_tokens = l.max_tokens.saturating_sub(spent.usage.billed());
        let cost = Spend::of(&spent.usage, price).cost_usd.unwrap_or(0.0);
        l.max_cost = l.max_cost.map(|c| CostLimit { usd: (c.usd - cost).max(0.0), ..c });
        l.max_turns = l.max_turns.saturating_sub(spent.turns);
        l.timeout = l.timeout.saturating_sub(spent.elapsed);
    }
    l.max_tokens /= u64::from(count);
    l.max_cost = l.max_cost.map(|c| CostLimit { usd: c.usd / f64::from(count), ..c });
    config
}

/// The best of `results` (by index) with the sums (the exploration's too,
/// when they forked from one) and the list; a cancel by the user cancels the
/// whole.
fn combine(
    results: Vec<(u32, FixResult)>,
    cancelled: bool,
    prepared: &Prepared,
    explored: Option<&FixResult>,
) -> FixResult {
    let (indexes, mut results): (Vec<u32>, Vec<FixResult>) = results.into_iter().unzip();
    let chosen = best(&results);
    let summaries = indexes
        .iter()
        .zip(&results)
        .enumerate()
        .map(|(i, (&index, r))| CandidateSummary {
            index,
            verified: r.verification.as_ref().is_some_and(|v| v.verified),
            chosen: i == chosen,
            cost_usd: r.spend.cost_usd,
            lines_changed: lines_changed(r.changes()),
            stop_reason: r.outcome.stop.as_str().to_string(),
        })
        .collect();
    let (mut turns, mut usage) = (0, crate::model::Usage::default());
    for r in explored.into_iter().chain(&results) {
        turns += r.outcome.turns;
        usage.add(r.outcome.usage);
    }
    let alternatives = indexes
        .iter()
        .zip(&results)
        .enumerate()
        .filter(|(i, _)| *i != chosen)
        .filter_map(|(_, (&index, r))| match &r.verdict {
            Verdict::Proposal(p) => Some(Alternative {
                index,
                check: r.verification.as_ref().and_then(|v| v.line()),
                summary: p.summary.clone(),
                changes: p.changes.clone(),
            }),
            _ => None,
        })
        .collect();
    let mut best = results.swap_remove(chosen);
    (best.outcome.turns, best.outcome.usage) = (turns, usage);
    best.spend = Spend::of(&usage, prepared.config.price());
    best.candidates = summaries;
    best.alternatives = alternatives;
    if cancelled {
        best.outcome.stop = Stop::Cancelled;
        best.verdict = Verdict::Cancelled;
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_number_the_candidates_and_differ() {
        assert!(note(2, 3).starts_with("(This is candidate 2 of 3 independent attempts"));
        assert_ne!(note(1, 3), note(2, 3));
    }

    #[test]
    fn the_progress_line_says_where_each_candidate_is() {
        use crate::model::StreamUpdate;
        let board = Board::new(3);
        let request = |turn| RunEvent::Request { turn, new_messages: vec![], max_output_tokens: 1, allow_tools: true };
        assert_eq!(board.after(1, &request(1)).unwrap(), "best of 3: #1 turn 1 · #2 waiting · #3 waiting");
        assert_eq!(board.after(1, &request(1)), None, "no new line without a change");
        assert_eq!(board.after(1, &RunEvent::ToolCalls { turn: 1, calls: vec!["read_file a.py".into()] }), None);
        let retry = RunEvent::Stream(StreamUpdate::Retrying { attempt: 1, delay_ms: 400, reason: "429".into() });
        assert_eq!(board.after(2, &retry).unwrap(), "best of 3: #1 turn 1 · #2 retry 1 · #3 waiting");
        let checked = |line: &str| RunEvent::Checked { round: 1, line: Some(line.into()), elapsed_ms: 5 };
        assert_eq!(
            board.after(1, &checked("not verified: test failed")).unwrap(),
            "best of 3: #1 not verified · #2 retry 1 · #3 waiting"
        );
        assert_eq!(board.after(1, &request(3)).unwrap(), "best of 3: #1 turn 3 · #2 retry 1 · #3 waiting");
        assert_eq!(board.set(3, State::Ended("verified")), "best of 3: #1 turn 3 · #2 retry 1 · #3 verified (done)");
    }

    #[test]
    fn lines_changed_counts_added_and_removed_lines() {
        let change = FileChange {
            path: "/w/a.py".into(),
            display: "a.py".into(),
            version: None,
            pin: None,
            original: Some("a\nb\nc\n".into()),
            new_text: "a\nB\nc\nd\n".into(),
            reasons: Vec::new(),
        };
        assert_eq!(lines_changed(&[change]), 3, "b removed, B and d added");
    }
}
