//! agentfix's own protocol on top of LSP: the `agentfix.fix` command's
//! argument and result, and the `agentfix/documentText` request's params and
//! result. Editor plugins (VS Code, Neovim, Emacs), extensions that bundle
//! agentfix and test drivers build the arguments and read the results, so
//! these shapes are a stable contract, written down in docs/protocol.md ("The
//! `agentfix.fix` contract" and "The `agentfix/documentText` request"
//! sections); a test keeps the two in agreement.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tower_lsp_server::ls_types::{Diagnostic, Range, Uri};

use crate::follow_up::HunkOutcome;

/// The command the code actions carry.
pub const FIX_COMMAND: &str = "agentfix.fix";

/// How `agentfix.fix`'s argument is named in its errors.
const FIX_SHAPE: &str = "{uri, version, range, diagnostics, instruction?}";

/// The one argument of `command`, shaped `shape`, of an `executeCommand`
/// request, which must carry exactly one.
fn only_argument<T: serde::de::DeserializeOwned>(command: &str, shape: &str, arguments: &[Value]) -> Result<T, String> {
    match arguments {
        [one] => argument(command, shape, one),
        _ => Err(format!("{command} expects exactly one argument {shape}, got {}", arguments.len())),
    }
}

/// `value` as `command`'s argument, shaped `shape`.
fn argument<T: serde::de::DeserializeOwned>(command: &str, shape: &str, value: &Value) -> Result<T, String> {
    T::deserialize(value).map_err(|e| format!("{command} expects one argument {shape}: {e}"))
}

/// The one argument of `agentfix.fix` (and the `data` of a code action run
/// in `codeAction/resolve`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FixArguments {
    /// The document to fix.
    pub uri: Uri,
    /// Its version when the code action was made (`null`: not open); the run
    /// works on the current text whatever it says.
    #[serde(default)]
    pub version: Option<i32>,
    /// What the user pointed at.
    pub range: Range,
    /// The problems to fix (may be empty).
    #[serde(default)]
    pub diagnostics: Vec<Diagnostic>,
    /// Free text from the user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instruction: Option<String>,
    /// The model of this run, over the settings' `model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The effort of this run (`low`, `medium`, `high`), over the
    /// settings' `effort`; for models that have it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<crate::config::provider::Effort>,
    /// The `runId` of an earlier run this one continues: its conversation,
    /// what became of its proposal, then `instruction`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub follow_up: Option<String>,
    /// How many candidates this run makes (1 to 8), over the settings'
    /// `candidates`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidates: Option<u32>,
    /// When the other candidates stop, over the settings' `candidatesStop`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidates_stop: Option<crate::config::candidates::CandidatesStop>,
    /// How this command answers, over the settings' `delivery`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<crate::config::delivery::Delivery>,
}

impl FixArguments {
    /// The argument of an `executeCommand` request, which must carry exactly one.
    pub fn from_command(arguments: &[Value]) -> Result<Self, String> {
        only_argument(FIX_COMMAND, FIX_SHAPE, arguments)
    }

    pub fn from_value(value: &Value) -> Result<Self, String> {
        argument(FIX_COMMAND, FIX_SHAPE, value)
    }

    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// The answer to `agentfix.fix`, sent when the run ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FixResponse {
    /// This run, for a follow-up (`followUp`).
    pub run_id: String,
    /// Whether the editor applied the proposal (or took it as the resolved
    /// action's edit).
    pub applied: bool,
    /// How the run ended: a value of the stopReason table of docs/protocol.md.
    pub stop_reason: String,
    /// Model requests made.
    pub turns: u32,
    /// Every prompt token, cached or not.
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Of `input_tokens`, those read from the prompt cache.
    pub cache_read_tokens: u64,
    /// Of `input_tokens`, those written to the prompt cache.
    pub cache_write_tokens: u64,
    /// What the run cost at the model's list prices (`null`: no price known
    /// for the model).
    pub cost_usd: Option<f64>,
    /// What the user was told.
    pub message: String,
    /// The run's transcript, when transcripts are on (else `null`).
    pub transcript: Option<PathBuf>,
    /// One sentence per hunk or file left out of the proposal.
    pub conflicts: Vec<String>,
    /// How the proposal fared in agentfix's own check (`null` without a
    /// proposal).
    pub verification: Option<crate::fix::verify::Verification>,
    /// With several candidates, each of them, the chosen one marked (empty
    /// for a single run).
    pub candidates: Vec<crate::fix::CandidateSummary>,
}

/// The answer to `agentfix.fix` when it answers at once (`delivery`): the
/// outcome follows as [`RunEnded`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunStarted {
    pub run_id: String,
    /// Always `started`.
    pub status: String,
}

/// The notification that ends a run started with an answer at once: its
/// params are what `agentfix.fix` would have answered.
pub enum RunEnded {}

impl tower_lsp_server::ls_types::notification::Notification for RunEnded {
    type Params = FixResponse;
    const METHOD: &'static str = "agentfix/runEnded";
}

/// The command that cancels a run by its `runId`.
pub const CANCEL_COMMAND: &str = "agentfix.cancel";

/// The one argument of `agentfix.cancel`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CancelArguments {
    pub run_id: String,
}

impl CancelArguments {
    /// The argument of an `executeCommand` request, which must carry exactly one.
    pub fn from_command(arguments: &[Value]) -> Result<Self, String> {
        only_argument(CANCEL_COMMAND, "{runId}", arguments)
    }
}

/// The answer to `agentfix.cancel`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelResponse {
    /// Whether a run was running under that id (it ends `cancelled`).
    pub cancelled: bool,
}

/// The command of an alternative's code action: applies a candidate that
/// was not chosen (no model is asked).
pub const ALTERNATIVE_COMMAND: &str = "agentfix.applyAlternative";

/// The one argument of `agentfix.applyAlternative` (and the `data` of an
/// alternative's code action resolved in `codeAction/resolve`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AlternativeArguments {
    /// The run whose candidate it is (kept as long as for follow-ups).
    pub run_id: String,
    /// The candidate's `index` in the run's `candidates`.
    pub index: u32,
}

impl AlternativeArguments {
    /// The argument of an `executeCommand` request, which must carry exactly one.
    pub fn from_command(arguments: &[Value]) -> Result<Self, String> {
        only_argument(ALTERNATIVE_COMMAND, "{runId, index}", arguments)
    }

    pub fn from_value(value: &Value) -> Result<Self, String> {
        argument(ALTERNATIVE_COMMAND, "{runId, index}", value)
    }

    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// The answer to `agentfix.applyAlternative`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AlternativeResponse {
    /// Whether the editor applied it.
    pub applied: bool,
    /// What the user was told.
    pub message: String,
    /// One sentence per hunk or file left out.
    pub conflicts: Vec<String>,
}

/// The command an editor's review sends when it ends: what the user did
/// with each hunk (change annotation) of a run's proposal.
pub const REVIEWED_COMMAND: &str = "agentfix.reviewed";

/// The one argument of `agentfix.reviewed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReviewedArguments {
    /// The run whose proposal was reviewed.
    pub run_id: String,
    pub hunks: Vec<HunkReview>,
}

impl ReviewedArguments {
    /// The argument of an `executeCommand` request, which must carry exactly one.
    pub fn from_command(arguments: &[Value]) -> Result<Self, String> {
        only_argument(REVIEWED_COMMAND, "{runId, hunks: [{annotationId, outcome, reason?}]}", arguments)
    }
}

/// What the user did with one hunk: the `annotationId` of its edit in the
/// `workspace/applyEdit` (hunks of one problem share one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HunkReview {
    pub annotation_id: String,
    /// `accepted`, `rejected` or `changed`.
    pub outcome: HunkOutcome,
    /// The one line the user typed (rejected hunks, mostly).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The answer to `agentfix.reviewed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewedResponse {
    /// How many hunks' outcomes were recorded.
    pub recorded: usize,
    /// The annotation ids the run's proposal has none of (not recorded).
    pub unknown: Vec<String>,
}

/// The request that returns the server's copy of an open document.
pub const DOCUMENT_TEXT_REQUEST: &str = "agentfix/documentText";

/// The params of `agentfix/documentText`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DocumentTextParams {
    /// The open document.
    pub uri: Uri,
}

/// The answer to `agentfix/documentText`: what the server believes the
/// editor's buffer holds, after every document notification that came
/// before the request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DocumentText {
    /// The version of the last `didOpen` or `didChange` applied.
    pub version: i32,
    /// The whole text, byte for byte (line breaks as they came).
    pub text: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The field names of the table under `heading` in `section` of
    /// docs/protocol.md, with whether the table marks them optional (`?`).
    fn protocol_fields(section: &str, heading: &str) -> Vec<(String, bool)> {
        let doc = include_str!("../../docs/protocol.md");
        let start = doc.find(section).unwrap_or_else(|| panic!("docs/protocol.md has no `{section}`"));
        let rest = &doc[start..];
        let at = rest.find(heading).unwrap_or_else(|| panic!("docs/protocol.md's `{section}` has no `{heading}`"));
        rest[at..]
            .lines()
            .skip_while(|l| !l.starts_with('|'))
            .take_while(|l| l.starts_with('|'))
            .skip(2)
            .map(|row| {
                let name = row.split('|').nth(1).unwrap_or("").trim().trim_matches('`').to_string();
                match name.strip_suffix('?') {
                    Some(n) => (n.to_string(), true),
                    None => (name, false),
                }
            })
            .collect()
    }

    /// That the table under `heading` of `section` names exactly `value`'s fields.
    fn assert_documented(section: &str, heading: &str, value: &Value) {
        let mut fields = keys(value);
        let mut documented: Vec<String> = protocol_fields(section, heading).into_iter().map(|(n, _)| n).collect();
        fields.sort();
        documented.sort();
        assert_eq!(documented, fields, "docs/protocol.md's `{section}`, `{heading}`");
    }

    fn keys(v: &Value) -> Vec<String> {
        v.as_object().map(|o| o.keys().cloned().collect()).unwrap_or_default()
    }

    #[test]
    fn the_protocol_doc_describes_the_argument_and_the_result_as_they_are() {
        const SECTION: &str = "## The `agentfix.fix` contract";
        let argument = FixArguments {
            uri: "file:///w/a.py".parse().unwrap(),
            version: Some(3),
            range: Range::default(),
            diagnostics: Vec::new(),
            instruction: Some("be brief".into()),
            model: Some("claude-haiku-4-5".into()),
            effort: Some(crate::config::provider::Effort::High),
            follow_up: Some("run-3".into()),
            candidates: Some(3),
            candidates_stop: Some(crate::config::candidates::CandidatesStop::FirstVerified),
            delivery: Some(crate::config::delivery::Delivery::Async),
        };
        let mut documented = protocol_fields(SECTION, "Argument");
        let mut fields = keys(&argument.to_value());
        documented.sort();
        fields.sort();
        assert_eq!(documented.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>(), fields);
        // The optional ones are exactly those an argument may leave out.
        for (name, optional) in &documented {
            let mut v = argument.to_value();
            v.as_object_mut().unwrap().remove(name);
            assert_eq!(
                FixArguments::from_value(&v).is_ok(),
                *optional,
                "docs/protocol.md says `{name}` optional: {optional}"
            );
        }

        let result = FixResponse {
            run_id: "run-1".into(),
            applied: true,
            stop_reason: "end_turn".into(),
            turns: 2,
            input_tokens: 10,
            output_tokens: 5,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            cost_usd: Some(0.01),
            message: "m".into(),
            transcript: None,
            conflicts: vec![],
            verification: Some(crate::fix::verify::Verification {
                verified: false,
                rounds: 2,
                diagnostics: Some(crate::fix::verify::DiagnosticCounts { fixed: 1, introduced: 1, remaining: 0 }),
                commands: vec![crate::fix::verify::CommandCheck {
                    name: "test".into(),
                    passed: false,
                    exit_code: Some(1),
                    secs: 4.1,
                }],
            }),
            candidates: vec![crate::fix::CandidateSummary {
                index: 2,
                verified: true,
                chosen: true,
                cost_usd: Some(0.02),
                lines_changed: 3,
                stop_reason: "end_turn".into(),
            }],
        };
        let value = serde_json::to_value(&result).unwrap();
        assert_eq!(
            value["candidates"],
            json!([{"index": 2, "verified": true, "chosen": true, "costUsd": 0.02, "linesChanged": 3, "stopReason": "end_turn"}])
        );
        assert_eq!(
            value["verification"],
            json!({"verified": false, "rounds": 2, "diagnostics": {"fixed": 1, "introduced": 1, "remaining": 0},
                   "commands": [{"name": "test", "passed": false, "exitCode": 1, "secs": 4.1}]}),
            "the record as docs/protocol.md spells it"
        );
        assert_documented(SECTION, "Result", &value);
        assert_eq!(value["transcript"], Value::Null, "an absent transcript is sent as null");
        assert_eq!(serde_json::from_value::<FixResponse>(value).unwrap(), result);
    }

    #[test]
    fn the_protocol_doc_describes_the_alternative_command_as_it_is() {
        const SECTION: &str = "## Alternatives";
        let argument = AlternativeArguments { run_id: "run-2".into(), index: 3 };
        let value = argument.to_value();
        let mut documented = protocol_fields(SECTION, "Argument");
        let mut fields = keys(&value);
        documented.sort();
        fields.sort();
        assert_eq!(documented.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>(), fields);
        assert_eq!(AlternativeArguments::from_command(&[value]).unwrap(), argument);
        assert!(AlternativeArguments::from_command(&[]).unwrap_err().contains("exactly one argument"));
        // An `agentfix.fix` argument is not one (resolve tells them apart).
        let fix = json!({"uri": "file:///w/a.py", "range": Range::default(), "runId": "run-1", "index": 1});
        assert!(AlternativeArguments::from_value(&fix).is_err());
        let result = AlternativeResponse { applied: true, message: "m".into(), conflicts: vec![] };
        let value = serde_json::to_value(&result).unwrap();
        assert_documented(SECTION, "Result", &value);
    }

    #[test]
    fn the_protocol_doc_describes_the_reviewed_command_as_it_is() {
        const SECTION: &str = "## Follow-ups";
        let value = json!({"runId": "run-2", "hunks": [
            {"annotationId": "agentfix-0-1", "outcome": "rejected", "reason": "keep it"},
            {"annotationId": "agentfix-0-problem-0", "outcome": "changed"},
        ]});
        assert_documented(SECTION, "Argument of `agentfix.reviewed`", &value);
        let argument = ReviewedArguments::from_command(std::slice::from_ref(&value)).unwrap();
        assert_eq!(argument.hunks[0].outcome, HunkOutcome::Rejected);
        assert_eq!(argument.hunks[1].reason, None);
        assert_eq!(serde_json::to_value(&argument).unwrap(), value);
        for bad in [
            json!({"runId": "run-2", "hunks": [{"annotationId": "a", "outcome": "maybe"}]}),
            json!({"runId": "run-2", "hunks": [{"annotationId": "a", "outcome": "accepted", "why": "x"}]}),
            json!({"runId": "run-2"}),
        ] {
            let e = ReviewedArguments::from_command(&[bad]).unwrap_err();
            assert!(e.starts_with("agentfix.reviewed expects one argument {runId, hunks"), "{e}");
        }
        let result = ReviewedResponse { recorded: 1, unknown: vec!["agentfix-9-0".into()] };
        assert_documented(SECTION, "Result", &serde_json::to_value(&result).unwrap());
    }

    #[test]
    fn the_protocol_doc_describes_the_document_text_request_as_it_is() {
        const SECTION: &str = "## The `agentfix/documentText` request";
        let doc = include_str!("../../docs/protocol.md");
        assert!(doc.contains(DOCUMENT_TEXT_REQUEST), "docs/protocol.md names the request");
        let params = DocumentTextParams { uri: "file:///w/a.py".parse().unwrap() };
        let value = serde_json::to_value(&params).unwrap();
        let mut documented = protocol_fields(SECTION, "Params");
        let mut fields = keys(&value);
        documented.sort();
        fields.sort();
        assert_eq!(documented.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>(), fields);
        assert!(documented.iter().all(|(_, optional)| !optional), "every param is required");
        assert!(serde_json::from_value::<DocumentTextParams>(json!({})).is_err());
        assert_eq!(serde_json::from_value::<DocumentTextParams>(value).unwrap(), params);

        let result = DocumentText { version: 7, text: "a\r\n変数 😀\n".into() };
        let value = serde_json::to_value(&result).unwrap();
        assert_documented(SECTION, "Result", &value);
        assert_eq!(serde_json::from_value::<DocumentText>(value).unwrap(), result);
    }

    #[test]
    fn arguments_round_trip_and_wrong_counts_are_refused() {
        let v = json!({"uri": "file:///w/a.py", "version": null, "range": {"start": {"line": 1, "character": 0}, "end": {"line": 1, "character": 0}}});
        let a = FixArguments::from_command(std::slice::from_ref(&v)).unwrap();
        assert_eq!(a.version, None);
        assert!(a.diagnostics.is_empty() && a.instruction.is_none());
        // As the code actions send it: version null, diagnostics present, no instruction.
        assert_eq!(
            a.to_value(),
            json!({"uri": "file:///w/a.py", "version": null, "range": v["range"], "diagnostics": []})
        );
        assert!(FixArguments::from_command(&[]).unwrap_err().contains("exactly one argument"));
        assert!(FixArguments::from_command(&[json!({"uri": 5})]).unwrap_err().contains("expects one argument"));
    }
}
