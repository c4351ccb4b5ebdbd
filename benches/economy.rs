//! Token economy of a long fix (the "fix economy" issue): the measured session, 28
//! turns that each `read_file` a different ~20 KB module, one `edit_file`, then a one-line
//! summary, run through the real `fix::run` (real Anthropic provider, real toolbox over a temp
//! workspace) against the mock model with its cached usage model. Rows: prompt caching with
//! no context editing (the naive append every other row is measured against), editing only
//! near the budget (`contextEditing: budget`), the shipped defaults, and the defaults against a
//! model that refuses prompts over 60K tokens (with the defaults, and editing only near the budget,
//! where the refusal comes and is recovered from), and best of 3 with the defaults, its
//! candidates each exploring from the start (`candidatesFrom: start`, the others started once
//! the first has its first answer) or forked from one exploration at the first edit
//! (`candidatesFrom: first-edit`), against three separate runs (three times the defaults
//! row: each its own session, its own cache). It measures tokens, not time, so it is a plain
//! `main`: it prints a table, then checks the targets and exits non-zero when one is
//! missed. Then the first request of a run on one problem, the diagnostic thin (start,
//! severity, message, source, code: what the first message had before issue 25) against
//! whole (its range and the text it covers, its code's link, two related places with their
//! lines, two quick fixes from a language server): what the whole diagnostic adds to it.
//! `cargo bench --bench economy`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentfix::config::Config;
use agentfix::config::candidates::CandidatesFrom;
use agentfix::config::limits::{ContextEditing, DEFAULT_CONTEXT_BUDGET};
use agentfix::config::provider::ProviderKind;
use agentfix::config::settings::Settings;
use agentfix::diagnostic::{Diagnostic, Related, Severity};
use agentfix::downstream::{DownstreamError, FixChange, Location, QuickFix, Symbol, SymbolSource};
use agentfix::fix::{self, Request, Roots, Services, Setup, Target, Verdict};
use agentfix::position::{LineCol, Span};
use agentfix::pricing::{TokenCounts, format_usd, price_of};
use agentfix::workspace::NoBuffers;
use agentfix_mock_model::{self as mock_model, MockModel, UsageModel, UsageStats};

/// The model the session is priced at.
const MODEL: &str = "claude-sonnet-4-5";
/// The model id of the naive-append row: no known window, Sonnet's price.
const NAIVE_MODEL: &str = "naive-append-baseline";
/// The context limit of the second run.
const CONTEXT_LIMIT: u64 = 60_000;
/// The naive-append row: limits high enough that nothing cuts the
/// measurement short. The other rows run with the shipped maxTurns and
/// maxTokens.
const MAX_TURNS: u32 = 40;
const MAX_TOKENS: u64 = 100_000_000;
/// The target: billed input at most this share of the naive append.
const TARGET_SHARE: f64 = 0.10;

struct Row {
    name: &'static str,
    requests: usize,
    stats: UsageStats,
    output: u64,
    stop: String,
    right_edit: bool,
    /// Best of N: how many different proposals the candidates made.
    distinct: Option<usize>,
}

/// The budget of the naive-append row: no context editing at all.
const NO_BUDGET: u64 = 1_000_000_000_000;

/// How a row runs.
struct Session {
    name: &'static str,
    context_budget: u64,
    /// `None`: the shipped default.
    context_editing: Option<ContextEditing>,
    context_limit: Option<u64>,
    /// Best of this many, beginning there.
    candidates: Option<(u32, CandidatesFrom)>,
}

impl Session {
    const fn plain(name: &'static str, editing: Option<ContextEditing>, budget: u64, limit: Option<u64>) -> Self {
        Self { name, context_budget: budget, context_editing: editing, context_limit: limit, candidates: None }
    }
}

fn settings(base_url: String, session: &Session) -> Settings {
    let naive = session.context_budget == NO_BUDGET;
    // The naive-append row runs under a model id with no known context
    // window (else contextBudget is capped at Sonnet's 200K and edits past
    // 160K), at Sonnet's price.
    let model = if naive { NAIVE_MODEL } else { MODEL };
    let prices = naive.then(|| BTreeMap::from([(NAIVE_MODEL.to_string(), price_of(MODEL, &BTreeMap::new()).unwrap())]));
    Settings {
        provider: Some(ProviderKind::Anthropic),
        model: Some(model.into()),
        prices,
        base_url: Some(base_url),
        // The shipped defaults, but for the naive-append row.
        max_turns: naive.then_some(MAX_TURNS),
        // Best of N shares maxTokens among the candidates: high enough that
        // none is cut short.
        max_tokens: (naive || session.candidates.is_some()).then_some(MAX_TOKENS),
        candidates: session.candidates.map(|(n, _)| n),
        candidates_from: session.candidates.map(|(_, from)| from),
        context_budget: Some(session.context_budget),
        context_editing: session.context_editing,
        transcripts: Some(false),
        default_language_servers: Some(false),
        ..Settings::default()
    }
}

fn write_workspace(root: &Path) {
    for (path, text) in mock_model::economy_files() {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

fn run_session(runtime: &tokio::runtime::Runtime, session: &Session) -> Row {
    let name = session.name;
    let dir = tempfile::tempdir().unwrap();
    let root: PathBuf = std::fs::canonicalize(dir.path()).unwrap();
    write_workspace(&root);
    let mock = MockModel::start();
    mock.set_usage_model(UsageModel::cached());
    // A compaction or closing summary, should one come, takes no scripted reply.
    mock.set_summary_reply("Read the modules; mean() divides by len(values) with no guard.");
    if let Some(limit) = session.context_limit {
        mock.set_context_limit(limit);
    }
    script(&mock, session.candidates);

    // Only the key comes from the "environment": nothing of the host's leaks in.
    let env = |var: &str| (var == "ANTHROPIC_API_KEY").then(|| mock_model::API_KEY.to_string());
    let config =
        Config::resolve(&Settings::default(), &settings(mock.base_url(), session), &env).expect("configuration");
    let target_path = root.join(mock_model::ECONOMY_TARGET);
    let request = Request::new(Target {
        path: target_path.clone(),
        lines: agentfix::position::LineRange::from_numbers(7, 7),
        problems: Vec::new(),
        instruction: None,
    });
    let prepared = Setup::new(config)
        .prepare(Roots::Containing(vec![root.clone()]), &request, Arc::new(NoBuffers))
        .expect("a target");
    let model = prepared.model().expect("provider");
    let result = runtime.block_on(fix::run(&prepared, Services::model_only(model, &|_| {}), request));
    // Either guard is right (best of N: the last candidate writes the other).
    let right = |text: &str| mock_model::economy_fixed(&text.replace(OTHER_GUARD, mock_model::ECONOMY_NEW_TEXT));
    let right_edit = matches!(&result.verdict, Verdict::Proposal(p)
        if p.changes.len() == 1 && p.changes[0].path == target_path && right(&p.changes[0].new_text));
    let distinct = session.candidates.map(|_| {
        let mut proposals: Vec<String> = result.alternatives.iter().map(|a| a.changes[0].new_text.clone()).collect();
        proposals.extend(result.changes().first().map(|c| c.new_text.clone()));
        proposals.sort();
        proposals.dedup();
        proposals.len()
    });
    let violations = mock.violations();
    if !violations.is_empty() {
        println!("{name}: the mock refused requests as the real API would: {violations:#?}");
    }
    mock.expect_violations();
    Row {
        name,
        requests: mock.requests().len(),
        stats: mock.usage_stats(),
        output: result.outcome.usage.output_tokens,
        stop: result.outcome.stop.as_str().to_string(),
        right_edit,
        distinct,
    }
}

/// The guard as the last candidate of a best of N writes it.
const OTHER_GUARD: &str = "    if not count:\n        return 0.0\n    return total / count\n";

/// The session's replies: once, or per candidate (routed by each one's
/// note; from the first edit, the exploration's reads and edit once, then
/// the first candidate's summary, routed by that edit's id, and the others'
/// edits and summaries). The last candidate writes the guard another way,
/// so that the candidates do not all agree.
fn script(mock: &MockModel, candidates: Option<(u32, CandidatesFrom)>) {
    let Some((n, from)) = candidates else {
        mock.push_all(mock_model::economy_replies());
        return;
    };
    // Each candidate's edit has an id of its own; the last writes the guard another way.
    let edit = |k: u32| {
        let new_text = if k == n { OTHER_GUARD } else { mock_model::ECONOMY_NEW_TEXT };
        let input = serde_json::json!({"path": mock_model::ECONOMY_TARGET, "old_text": mock_model::ECONOMY_OLD_TEXT,
            "new_text": new_text, "reason": "mean() of an empty list divided by zero."});
        mock_model::tool_reply(&[(&format!("toolu_econ_edit_{k}"), "edit_file", input)])
    };
    let mut replies: Vec<Vec<mock_model::Reply>> = (1..=n)
        .map(|k| {
            let mut replies = mock_model::economy_replies();
            replies[mock_model::ECONOMY_READS] = edit(k);
            replies
        })
        .collect();
    let marker = |k: u32| format!("candidate {k} of {n}");
    match from {
        CandidatesFrom::Start => {
            for (k, replies) in (1..).zip(replies) {
                replies.into_iter().for_each(|r| mock.push_for(&marker(k), r));
            }
        }
        CandidatesFrom::FirstEdit => {
            let mut first = replies.remove(0);
            let summary = first.pop().unwrap();
            mock.push_all(first);
            mock.push_for("toolu_econ_edit_1", summary);
            for (k, replies) in (2..).zip(replies) {
                replies.into_iter().skip(mock_model::ECONOMY_READS).for_each(|r| mock.push_for(&marker(k), r));
            }
        }
    }
}

fn main() {
    // `cargo bench` passes `--bench`; there is nothing to filter.
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    // The default budget is set explicitly so the table says what it measured.
    let budget = DEFAULT_CONTEXT_BUDGET;
    let sessions = [
        Session::plain("caching, no editing", Some(ContextEditing::Budget), NO_BUDGET, None),
        Session::plain("editing near budget", Some(ContextEditing::Budget), budget, None),
        Session::plain("defaults", None, budget, None),
        Session::plain("defaults, 60K window", None, budget, Some(CONTEXT_LIMIT)),
        // The window bites only when the context grows past it: editing near the budget.
        Session::plain("near budget, 60K", Some(ContextEditing::Budget), budget, Some(CONTEXT_LIMIT)),
        Session {
            candidates: Some((3, CandidatesFrom::Start)),
            ..Session::plain("best of 3, start", None, budget, None)
        },
        Session {
            candidates: Some((3, CandidatesFrom::FirstEdit)),
            ..Session::plain("best of 3, 1st edit", None, budget, None)
        },
    ];
    let rows: Vec<Row> = sessions.iter().map(|s| run_session(&runtime, s)).collect();
    print_table(&rows);
    let naive_append = rows[0].stats.naive_input as f64;
    let (defaults, window) = (&rows[2], &rows[3]);
    let cost = |r: &Row| row_cost(r).unwrap_or(f64::NAN);
    let three = 3.0 * cost(defaults);
    println!("best of 3 against three separate runs (3 x the defaults row, {}):", format_usd(three));
    for r in &rows[5..] {
        println!(
            "  {:<20} {} = {:.2} x three runs; {} different proposals of 3; the right edit: {}",
            r.name,
            format_usd(cost(r)),
            cost(r) / three,
            r.distinct.unwrap_or(0),
            if r.right_edit { "yes" } else { "no" }
        );
    }
    let checks = [
        (
            format!("billed input <= {:.0} % of the naive append (defaults)", TARGET_SHARE * 100.0),
            defaults.stats.billed_input() <= TARGET_SHARE * naive_append,
        ),
        (
            format!("no request over contextBudget {DEFAULT_CONTEXT_BUDGET} (every row but the first)"),
            rows[1..].iter().all(|r| r.stats.largest_request <= DEFAULT_CONTEXT_BUDGET),
        ),
        ("the right edit with the shipped defaults".to_string(), defaults.right_edit),
        ("the right edit against the 60K window".to_string(), window.right_edit && rows[4].right_edit),
        (
            "best of 3 (either start) costs less than three separate runs".to_string(),
            rows[5..].iter().all(|r| cost(r) < three),
        ),
        ("best of 3 proposes the right edit".to_string(), rows[5..].iter().all(|r| r.right_edit)),
    ];
    print_first_request(&runtime);
    println!("targets (issue \"fix economy\"):");
    for (what, met) in &checks {
        println!("  {} {what}", if *met { "met:   " } else { "MISSED:" });
    }
    if checks.iter().any(|(_, met)| !met) {
        std::process::exit(1);
    }
}

/// What a row cost at the session's model's list price.
fn row_cost(row: &Row) -> Option<f64> {
    let s = &row.stats;
    let tokens =
        TokenCounts { input: s.input, output: row.output, cache_read: s.cache_read, cache_write: s.cache_write };
    price_of(MODEL, &BTreeMap::new()).map(|p| p.cost(&tokens))
}

/// The table of the rows, billed input as a share of the first row's naive input.
fn print_table(rows: &[Row]) {
    let naive_append = rows[0].stats.naive_input as f64;
    println!();
    println!(
        "economy: {} reads of ~20 KB, 1 edit, 1 summary; {MODEL}, mock with prompt caching (min 1024 tokens); the shipped maxTurns, maxTokens and contextBudget {DEFAULT_CONTEXT_BUDGET} (first row: maxTurns {MAX_TURNS}, maxTokens {MAX_TOKENS}, no budget); billed% is of the first row's naive input (the naive append)",
        mock_model::ECONOMY_READS
    );
    println!(
        "{:<20} {:>8} {:>12} {:>12} {:>7} {:>9} {:>8} {:>8} {:>10} {:>10}",
        "run",
        "requests",
        "naive input",
        "billed input",
        "billed%",
        "largest",
        "rebuilds",
        "cost",
        "stop",
        "right edit"
    );
    for row in rows {
        let s = &row.stats;
        let cost = row_cost(row).map_or_else(|| "n/a".to_string(), format_usd);
        println!(
            "{:<20} {:>8} {:>12} {:>12.0} {:>6.1}% {:>9} {:>8} {:>8} {:>10} {:>10}",
            row.name,
            row.requests,
            s.naive_input,
            s.billed_input(),
            100.0 * s.billed_input() / naive_append,
            s.largest_request,
            s.rebuilds,
            cost,
            row.stop,
            if row.right_edit { "yes" } else { "no" }
        );
        if s.too_long > 0 {
            println!("{:<20} {} request(s) refused: prompt is too long", "", s.too_long);
        }
    }
}

/// A language server that offers the problem's two quick fixes and
/// nothing else (no outline, no diagnostics): the same tools in both runs
/// of [`print_first_request`], so only the first message differs.
struct Fixes {
    target: PathBuf,
    offer: bool,
}

#[async_trait::async_trait]
impl SymbolSource for Fixes {
    fn available(&self, _: &Path) -> bool {
        true
    }
    async fn document_symbols(&self, _: &Path, _: &str) -> Result<Vec<Symbol>, DownstreamError> {
        Ok(Vec::new())
    }
    async fn workspace_symbols(&self, _: &Path, _: &str) -> Result<Vec<Location>, DownstreamError> {
        Ok(Vec::new())
    }
    async fn definition(&self, _: &Path, _: &str, _: u32, _: u32) -> Result<Vec<Location>, DownstreamError> {
        Ok(Vec::new())
    }
    async fn references(&self, _: &Path, _: &str, _: u32, _: u32) -> Result<Vec<Location>, DownstreamError> {
        Ok(Vec::new())
    }
    async fn hover(&self, _: &Path, _: &str, _: u32, _: u32) -> Result<Option<String>, DownstreamError> {
        Ok(None)
    }
    async fn diagnostics(&self, _: &Path, _: &str) -> Result<Vec<Diagnostic>, DownstreamError> {
        Ok(Vec::new())
    }
    async fn release(&self, _: &[(PathBuf, Option<String>)]) {}
    async fn quick_fixes(&self, _: &Path, _: &str, spans: &[Span]) -> Result<Vec<Vec<QuickFix>>, DownstreamError> {
        if !self.offer {
            return Ok(vec![Vec::new(); spans.len()]);
        }
        let guard = FixChange::Edit {
            path: self.target.clone(),
            span: Span::new(LineCol::new(6, 0), LineCol::new(6, 0)),
            text: "    if count == 0:\n        return 0.0\n".into(),
        };
        let fixes = vec![
            QuickFix { title: "Guard the division".into(), preferred: true, changes: vec![guard], command: false },
            QuickFix {
                title: "Ignore zero-division for this line".into(),
                preferred: false,
                changes: vec![],
                command: true,
            },
        ];
        Ok(vec![fixes; spans.len()])
    }
}

/// The problem of the target's line 7, thin or whole.
fn problem(root: &Path, whole: bool) -> Diagnostic {
    let thin = Diagnostic {
        at: LineCol::new(6, 11),
        severity: Some(Severity::Error),
        message: "Possible division by zero: `count` is 0 when `values` is empty".into(),
        source: Some("lint".into()),
        code: Some("zero-division".into()),
        ..Default::default()
    };
    if !whole {
        return thin;
    }
    Diagnostic {
        end: Some(LineCol::new(6, 24)),
        code_link: Some("https://lint.example/rules/zero-division".into()),
        related: vec![
            Related {
                path: root.join(mock_model::ECONOMY_TARGET),
                line: 5,
                message: "`count` is assigned here".into(),
            },
            Related {
                path: root.join(mock_model::economy_module_path(0)),
                line: 2,
                message: "`mean` is called here with a list that may be empty".into(),
            },
        ],
        ..thin
    }
}

/// The tokens of the first request of a one-request run on the problem
/// (the mock's count: bytes / 4 of the canonical prompt).
fn first_request(runtime: &tokio::runtime::Runtime, whole: bool) -> (u64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let root: PathBuf = std::fs::canonicalize(dir.path()).unwrap();
    write_workspace(&root);
    let mock = MockModel::start();
    mock.set_usage_model(UsageModel::cached());
    mock.push(mock_model::text_reply("Nothing to change."));
    let env = |var: &str| (var == "ANTHROPIC_API_KEY").then(|| mock_model::API_KEY.to_string());
    let session = Session::plain("first request", None, DEFAULT_CONTEXT_BUDGET, None);
    let config =
        Config::resolve(&Settings::default(), &settings(mock.base_url(), &session), &env).expect("configuration");
    let target = root.join(mock_model::ECONOMY_TARGET);
    let request = Request::new(Target {
        path: target.clone(),
        lines: agentfix::position::LineRange::from_numbers(7, 7),
        problems: vec![problem(&root, whole)],
        instruction: None,
    });
    let prepared = Setup::new(config)
        .prepare(Roots::Containing(vec![root.clone()]), &request, Arc::new(NoBuffers))
        .expect("a target");
    let model = prepared.model().expect("provider");
    let symbols: Arc<dyn SymbolSource> = Arc::new(Fixes { target, offer: whole });
    let services = Services { symbols: Some(symbols), ..Services::model_only(model, &|_| {}) };
    runtime.block_on(fix::run(&prepared, services, request));
    let requests = mock.requests();
    let message = requests[0].body["messages"][0]["content"][0]["text"].as_str().unwrap_or("").len() as u64 / 4;
    (mock.usage_stats().largest_request, message)
}

/// The first request with the problem thin and whole.
fn print_first_request(runtime: &tokio::runtime::Runtime) {
    let (thin, thin_message) = first_request(runtime, false);
    let (whole, whole_message) = first_request(runtime, true);
    println!("the first request of a run on one problem (tokens, the mock's count):");
    println!("  {:<44} {:>8} {:>14}", "", "request", "first message");
    println!("  {:<44} {:>8} {:>14}", "thin diagnostic (before issue 25)", thin, thin_message);
    println!("  {:<44} {:>8} {:>14}", "whole: range, link, 2 related, 2 quick fixes", whole, whole_message);
    println!(
        "  {:<44} {:>8} {:>14}  ({:+.1} % of the request)",
        "added",
        whole as i64 - thin as i64,
        whole_message as i64 - thin_message as i64,
        100.0 * (whole as f64 - thin as f64) / thin as f64
    );
}
