//! Token economy of a long fix (the "fix economy" issue): the measured session, 28
//! turns that each `read_file` a different ~20 KB module, one `edit_file`, then a one-line
//! summary, run through the real `fix::run` (real Anthropic provider, real toolbox over a temp
//! workspace) against the mock model with its cached usage model: with `contextBudget` at its
//! default, once without and once with a 60K-token context limit, and once with the budget out
//! of the way (the run as it was before context editing). It measures tokens, not time, so it
//! is a plain `main`: it prints a table and the targets, and asserts nothing.
//! `cargo bench --bench economy`.

#[path = "../tests/common"]
mod common {
    #[allow(dead_code)]
    pub mod mock_model;
}

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentfix::config::{Config, DEFAULT_CONTEXT_BUDGET, ProviderKind, Settings};
use agentfix::fix::{self, Target, Verdict};
use agentfix::pricing::{TokenCounts, format_usd, price_of};
use agentfix::workspace::{NoBuffers, Overlay, Workspace};
use common::mock_model::{self, MockModel, UsageModel, UsageStats};
use tokio_util::sync::CancellationToken;

/// The model the session is priced at.
const MODEL: &str = "claude-sonnet-4-5";
/// The context limit of the second run.
const CONTEXT_LIMIT: u64 = 60_000;
/// The "before" row: limits high enough that nothing cuts the measurement
/// short. The other rows run with the shipped maxTurns and maxTokens.
const MAX_TURNS: u32 = 40;
const MAX_TOKENS: u64 = 100_000_000;

struct Row {
    name: &'static str,
    requests: usize,
    stats: UsageStats,
    output: u64,
    stop: String,
    right_edit: bool,
}

/// The budget of the "no budget" row: the run as it was before context editing.
const NO_BUDGET: u64 = 1_000_000_000_000;

fn settings(base_url: String, context_budget: u64) -> Settings {
    Settings {
        provider: Some(ProviderKind::Anthropic),
        model: Some(MODEL.into()),
        base_url: Some(base_url),
        // The shipped defaults, but for the "before" row.
        max_turns: (context_budget == NO_BUDGET).then_some(MAX_TURNS),
        max_tokens: (context_budget == NO_BUDGET).then_some(MAX_TOKENS),
        context_budget: Some(context_budget),
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

fn run_session(
    runtime: &tokio::runtime::Runtime,
    name: &'static str,
    context_budget: u64,
    context_limit: Option<u64>,
) -> Row {
    let dir = tempfile::tempdir().unwrap();
    let root: PathBuf = std::fs::canonicalize(dir.path()).unwrap();
    write_workspace(&root);
    let mock = MockModel::start();
    mock.set_usage_model(UsageModel::cached());
    if let Some(limit) = context_limit {
        mock.set_context_limit(limit);
    }
    mock.push_all(mock_model::economy_replies());

    // Only the key comes from the "environment": nothing of the host's leaks in.
    let env = |var: &str| (var == "ANTHROPIC_API_KEY").then(|| mock_model::API_KEY.to_string());
    let config =
        Config::resolve(&Settings::default(), &settings(mock.base_url(), context_budget), &env).expect("configuration");
    let model = agentfix::providers::from_config(&config.provider).expect("provider");
    let workspace = Arc::new(Workspace::new(vec![root.clone()]));
    let overlay = Arc::new(Overlay::new(workspace, Arc::new(NoBuffers)));
    let target_path = root.join(mock_model::ECONOMY_TARGET);
    let target = Target {
        path: target_path.clone(),
        lines: agentfix::position::LineRange::from_numbers(7, 7),
        problems: Vec::new(),
        instruction: None,
    };
    let result =
        runtime.block_on(fix::run(&config, &*model, overlay, None, None, &target, &CancellationToken::new(), &|_| {}));
    let right_edit = matches!(&result.verdict, Verdict::Proposal(p)
        if p.changes.len() == 1 && p.changes[0].path == target_path && mock_model::economy_fixed(&p.changes[0].new_text));
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
    }
}

fn main() {
    // `cargo bench` passes `--bench`; there is nothing to filter.
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    // The default budget is set explicitly so the table says what it measured.
    let rows = [
        run_session(&runtime, "no budget (before)", NO_BUDGET, None),
        run_session(&runtime, "defaults", DEFAULT_CONTEXT_BUDGET, None),
        run_session(&runtime, "context limit 60K", DEFAULT_CONTEXT_BUDGET, Some(CONTEXT_LIMIT)),
    ];
    let price = price_of(MODEL, &BTreeMap::new());
    println!();
    println!(
        "economy: {} reads of ~20 KB, 1 edit, 1 summary; {MODEL}, mock with prompt caching (min 1024 tokens); the shipped maxTurns, maxTokens and contextBudget {DEFAULT_CONTEXT_BUDGET} (first row: maxTurns {MAX_TURNS}, maxTokens {MAX_TOKENS}, no budget)",
        mock_model::ECONOMY_READS
    );
    println!(
        "{:<18} {:>8} {:>12} {:>12} {:>7} {:>9} {:>8} {:>8} {:>14} {:>10}",
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
    for row in &rows {
        let s = &row.stats;
        let billed = s.billed_input();
        let ratio = if s.naive_input == 0 { 0.0 } else { 100.0 * billed / s.naive_input as f64 };
        let tokens =
            TokenCounts { input: s.input, output: row.output, cache_read: s.cache_read, cache_write: s.cache_write };
        let cost = price.map_or_else(|| "n/a".to_string(), |p| format_usd(p.cost(&tokens)));
        println!(
            "{:<18} {:>8} {:>12} {:>12.0} {:>6.1}% {:>9} {:>8} {:>8} {:>14} {:>10}",
            row.name,
            row.requests,
            s.naive_input,
            billed,
            ratio,
            s.largest_request,
            s.rebuilds,
            cost,
            row.stop,
            if row.right_edit { "yes" } else { "no" }
        );
        if s.too_long > 0 {
            println!("{:<18} {} request(s) refused: prompt is too long", "", s.too_long);
        }
    }
    println!(
        "targets (issue \"fix economy\"): billed <= 10% of naive; no request over contextBudget; right edit with the defaults; right edit under the 60K limit"
    );
}
