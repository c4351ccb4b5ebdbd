//! `agentfix fix --json`: the run's outcome as one JSON object on stdout,
//! for a CI job or a bot (the progress stays on stderr, the exit codes are
//! those of `fix`). The shape is a contract, documented in docs/cli.md
//! ("`--json`"); a test keeps the two in agreement.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::fix::FixResult;
use crate::fix::verify::Verification;
use crate::workspace::unified_diff;

/// What `agentfix fix --json` prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FixReport {
    /// The run, as its transcript is named (`null` when transcripts are off).
    pub run_id: Option<String>,
    /// How the run ended: a value of docs/protocol.md's stopReason table.
    pub stop_reason: String,
    /// Each file the proposal changes (empty without a proposal).
    pub files: Vec<FileReport>,
    /// The proposal as one unified diff (empty without a proposal).
    pub diff: String,
    pub turns: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// At the model's list price (`null`: no price known).
    pub cost_usd: Option<f64>,
    /// The transcript file (`null` when transcripts are off).
    pub transcript: Option<PathBuf>,
    /// How the proposal fared in its check (`null` without a proposal).
    pub verification: Option<Verification>,
}

/// One changed file of the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileReport {
    /// Relative to the workspace root.
    pub path: String,
    /// `modified` or `created`; `written` / `created and written` once
    /// `--apply` has put it on disk.
    pub status: String,
}

impl FixReport {
    /// The report of `result`; `applied` when `--apply` wrote the files.
    pub fn of(result: &FixResult, applied: bool) -> Self {
        let changes = result.changes();
        let files = changes
            .iter()
            .map(|c| {
                let status = match (c.original.is_none(), applied) {
                    (false, false) => "modified",
                    (true, false) => "created",
                    (false, true) => "written",
                    (true, true) => "created and written",
                };
                FileReport { path: c.display.clone(), status: status.into() }
            })
            .collect();
        let diff = changes.iter().map(|c| unified_diff(&c.display, c.original.as_deref(), &c.new_text)).collect();
        let transcript = result.transcript.clone();
        let run_id = transcript.as_deref().and_then(Path::file_stem).map(|s| s.to_string_lossy().into_owned());
        let u = &result.outcome.usage;
        FixReport {
            run_id,
            stop_reason: result.outcome.stop.as_str().to_string(),
            files,
            diff,
            turns: result.outcome.turns,
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cost_usd: result.spend.cost_usd,
            transcript,
            verification: result.verification.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docs_cli_describes_the_report_as_it_is() {
        let doc = include_str!("../../docs/cli.md");
        let start = doc.find("### `--json`").expect("docs/cli.md has a `--json` section");
        let fields: Vec<String> = doc[start..]
            .lines()
            .skip_while(|l| !l.starts_with('|'))
            .take_while(|l| l.starts_with('|'))
            .skip(2)
            .map(|row| row.split('|').nth(1).unwrap_or("").trim().trim_matches('`').to_string())
            .collect();
        let report = FixReport {
            run_id: None,
            stop_reason: "end_turn".into(),
            files: vec![],
            diff: String::new(),
            turns: 1,
            input_tokens: 1,
            output_tokens: 1,
            cost_usd: None,
            transcript: None,
            verification: None,
        };
        let value = serde_json::to_value(&report).unwrap();
        let mut keys: Vec<String> = value.as_object().unwrap().keys().cloned().collect();
        let mut documented = fields;
        keys.sort();
        documented.sort();
        assert_eq!(documented, keys);
    }
}
