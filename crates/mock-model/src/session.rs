//! The scripted session of the "fix economy" issue: 28 turns that each `read_file` a
//! different ~20 KB module, one `edit_file` on the target, then `end_turn` with a one-line
//! summary (30 replies). The replies depend on nothing the client sends, so they stay valid
//! whatever the client keeps, stubs or compacts; the test (or bench) creates the files with
//! [`economy_files`] under the workspace root and pushes [`economy_replies`].

use serde_json::json;

use super::{Reply, next_id, text_reply, tool_reply};

/// Turns that read a module before the edit.
pub const ECONOMY_READS: usize = 28;
/// The file the session edits, relative to the workspace root.
pub const ECONOMY_TARGET: &str = "src/stats.py";
/// The text the edit replaces (once in the target).
pub const ECONOMY_OLD_TEXT: &str = "    return total / count\n";
/// What it becomes.
pub const ECONOMY_NEW_TEXT: &str = "    if count == 0:\n        return 0.0\n    return total / count\n";
/// The closing one-line summary.
pub const ECONOMY_SUMMARY: &str = "Guarded mean() against an empty list, which divided by zero.";

/// Bytes of each module, at least.
const MODULE_BYTES: usize = 20_000;

/// The workspace-relative path of module `i` (0-based).
pub fn economy_module_path(i: usize) -> String {
    format!("src/module_{i:02}.py")
}

fn module_text(i: usize) -> String {
    let mut text = format!("\"\"\"Module {i}: helpers the statistics depend on.\"\"\"\n\nfrom .stats import mean\n\n");
    let mut j = 0;
    while text.len() < MODULE_BYTES {
        text.push_str(&format!(
            "def helper_{i:02}_{j:03}(values, factor={j}):\n    \"\"\"Scale batch {j} of module {i}, then average it.\"\"\"\n    return mean([v * factor + {i} for v in values])\n\n"
        ));
        j += 1;
    }
    text
}

fn target_text() -> String {
    format!(
        "\"\"\"Statistics every module uses.\"\"\"\n\n\ndef mean(values):\n    total = sum(values)\n    count = len(values)\n{ECONOMY_OLD_TEXT}"
    )
}

/// `(workspace-relative path, text)` of the 28 modules and the target, to write under the root.
pub fn economy_files() -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> =
        (0..ECONOMY_READS).map(|i| (economy_module_path(i), module_text(i))).collect();
    files.push((ECONOMY_TARGET.to_string(), target_text()));
    files
}

/// Whether `text` (the target after the run) holds the session's edit, once, and nothing else.
pub fn economy_fixed(text: &str) -> bool {
    text == target_text().replace(ECONOMY_OLD_TEXT, ECONOMY_NEW_TEXT)
}

/// The 30 replies: 28 `read_file` turns, the `edit_file` turn, the summary. Tool-use ids are
/// unique (within the session and across sessions).
pub fn economy_replies() -> Vec<Reply> {
    let session = next_id();
    let mut replies: Vec<Reply> = (0..ECONOMY_READS)
        .map(|i| {
            let id = format!("toolu_econ{session}_read{i:02}");
            tool_reply(&[(&id, "read_file", json!({"path": economy_module_path(i)}))])
        })
        .collect();
    let id = format!("toolu_econ{session}_edit");
    replies.push(tool_reply(&[(
        &id,
        "edit_file",
        json!({
            "path": ECONOMY_TARGET,
            "old_text": ECONOMY_OLD_TEXT,
            "new_text": ECONOMY_NEW_TEXT,
            "reason": "mean() of an empty list divided by zero."
        }),
    )]));
    replies.push(text_reply(ECONOMY_SUMMARY));
    replies
}
