//! `edit_file`: replace one exact, unique occurrence of a text in a file of
//! the run's view. Zero or several matches are tool errors that show the
//! model where to look; an `old_text` that matches nothing and holds
//! `[REDACTED]` (a credential the model was shown scrubbed, see
//! `secrets::Redactor::redact_file_text`) is refused as such.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Tool, ToolContext, ToolError, clip, numbered};

/// Input of `edit_file`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct EditFileInput {
    /// Path of the file, relative to the workspace root.
    pub path: String,
    /// The exact text to replace, including indentation; it must occur exactly once in the file. Include enough surrounding lines to make it unique.
    pub old_text: String,
    /// The replacement text.
    pub new_text: String,
    /// One short sentence saying why, shown to the user next to this change when they review it.
    #[serde(default)]
    pub reason: Option<String>,
}

pub struct EditFile;

#[async_trait]
impl Tool for EditFile {
    type Input = EditFileInput;
    const NAME: &'static str = "edit_file";
    const DESCRIPTION: &'static str = "Replace text in a file. `old_text` must match the file's current text exactly \
        (whitespace included) and occur exactly once. The edit is not saved to disk: it becomes part of a proposal \
        the user reviews. Returns the edited region with line numbers.";
    const FILE_SYSTEM: bool = true;

    async fn run(&self, input: EditFileInput, ctx: &ToolContext) -> Result<String, ToolError> {
        let path = ctx.overlay.resolve(&input.path)?;
        let shown = ctx.overlay.workspace().display(&path);
        if input.old_text.is_empty() {
            return Err(ToolError::Respond(
                "old_text is empty; to create a file or replace all of it, use write_file".into(),
            ));
        }
        if input.old_text == input.new_text {
            return Err(ToolError::Respond("old_text and new_text are identical; nothing to change".into()));
        }
        let mut summary = String::new();
        let mut texts = None;
        let result = ctx.overlay.update(&path, |text| {
            let (old, new) = match_line_endings(text, &input.old_text, &input.new_text);
            // At most the first few starts are kept; the rest are only counted.
            let mut matches = text.match_indices(old.as_str()).map(|(i, _)| i);
            let starts: Vec<usize> = matches.by_ref().take(SHOWN_MATCHES).collect();
            let more = matches.count();
            match starts.as_slice() {
                [start] if more == 0 => {
                    let mut edited = String::with_capacity(text.len() + new.len());
                    edited.push_str(&text[..*start]);
                    edited.push_str(&new);
                    edited.push_str(&text[start + old.len()..]);
                    summary = describe_edit(&shown, &edited, *start, new.len());
                    texts = Some((text.to_string(), edited.clone()));
                    Ok(edited)
                }
                // What agentfix hid from the model cannot match; say so rather than guess.
                [] if old.contains(crate::secrets::REDACTED) => Err(format!(
                    "old_text contains {r}, which stands for a credential agentfix hid from you: it is not the \
                     file's text, so it cannot match. Quote a part of {shown} without {r} (the lines around it), \
                     and leave the hidden value as it is",
                    r = crate::secrets::REDACTED
                )),
                [] => Err(not_found(&shown, text, &old)),
                many => {
                    let lines: Vec<String> = lines_of(text, many).iter().map(usize::to_string).collect();
                    let at = if more == 0 {
                        format!("at lines {}", lines.join(", "))
                    } else {
                        format!("the first {} at lines {}", many.len(), lines.join(", "))
                    };
                    Err(format!(
                        "old_text occurs {} times in {shown} ({at}); include more surrounding lines so that it occurs exactly once",
                        many.len() + more,
                    ))
                }
            }
        })?;
        result.map_err(ToolError::Respond)?;
        if let Some(reason) = &input.reason {
            ctx.overlay.note_reason(&path, reason, &input.new_text);
        }
        if let Some((before, after)) = texts {
            summary.push_str(&super::diagnostics_feedback(ctx, &path, Some(&before), &after).await);
        }
        Ok(summary)
    }
}

/// When the file uses CRLF and the model wrote LF, adapt the model's text.
fn match_line_endings(text: &str, old: &str, new: &str) -> (String, String) {
    if text.contains("\r\n") && !old.contains('\r') && !text.contains(old) {
        (old.replace('\n', "\r\n"), new.replace('\n', "\r\n"))
    } else {
        (old.to_string(), new.to_string())
    }
}

/// Matches whose lines an error names; the others are only counted.
const SHOWN_MATCHES: usize = 10;

/// 1-based line number of byte offset `at`.
fn line_of(text: &str, at: usize) -> usize {
    text[..at].matches('\n').count() + 1
}

/// 1-based line numbers of ascending byte offsets, in one pass over the text
/// up to the last of them (not one pass from the start per offset).
fn lines_of(text: &str, offsets: &[usize]) -> Vec<usize> {
    let mut line = 1;
    let mut from = 0;
    offsets
        .iter()
        .map(|&at| {
            line += text.as_bytes()[from..at].iter().filter(|b| **b == b'\n').count();
            from = at;
            line
        })
        .collect()
}

/// The edited region with two lines of context, numbered.
fn describe_edit(shown: &str, edited: &str, start: usize, new_len: usize) -> String {
    let first = line_of(edited, start);
    let last = line_of(edited, start + new_len);
    let lines: Vec<&str> = edited.lines().collect();
    let from = first.saturating_sub(2).max(1);
    let to = (last + 2).min(lines.len());
    let mut out = format!("Edited {shown}. Lines {from}-{to} now read:\n");
    for n in from..=to {
        if let Some(l) = lines.get(n - 1) {
            out.push_str(&numbered(n, &clip(l, 300)));
            out.push('\n');
        }
    }
    out
}

/// The error for an `old_text` with no exact match, with the closest
/// candidates so the model can correct itself.
fn not_found(shown: &str, text: &str, old: &str) -> String {
    let mut msg = format!("old_text was not found in {shown}.");
    let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let old_lines: Vec<&str> = old.lines().filter(|l| !l.trim().is_empty()).collect();
    let file_lines: Vec<&str> = text.lines().collect();
    // A match that differs only in whitespace.
    if let Some(first) = old_lines.first() {
        let want = squash(&old_lines.join("\n"));
        for (i, l) in file_lines.iter().enumerate() {
            if squash(l) == squash(first) {
                let window = file_lines[i..(i + old_lines.len() + 4).min(file_lines.len())]
                    .iter()
                    .filter(|l| !l.trim().is_empty())
                    .take(old_lines.len())
                    .copied()
                    .collect::<Vec<_>>()
                    .join("\n");
                if squash(&window) == want {
                    msg.push_str(&format!(
                        " The text at line {} matches except for whitespace or indentation; copy it exactly from read_file output (without the line-number prefix).",
                        i + 1
                    ));
                    return msg;
                }
            }
        }
    }
    // Otherwise the lines most similar to the first line of old_text.
    let Some(first) = old_lines.first() else {
        return msg;
    };
    let mut scored: Vec<(f32, usize)> = file_lines
        .iter()
        .enumerate()
        .take(20_000)
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| (similar::TextDiff::from_chars(first.trim(), l.trim()).ratio(), i))
        .filter(|(r, _)| *r >= 0.5)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    if scored.is_empty() {
        msg.push_str(" No similar line exists; read the file again to see its current text.");
    } else {
        msg.push_str(" Closest lines to the start of old_text:\n");
        for (_, i) in scored.into_iter().take(3) {
            msg.push_str(&numbered(i + 1, &clip(file_lines[i], 300)));
            msg.push('\n');
        }
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::test_support::context;

    fn input(path: &str, old: &str, new: &str) -> EditFileInput {
        EditFileInput { path: path.into(), old_text: old.into(), new_text: new.into(), reason: None }
    }

    #[tokio::test]
    async fn unique_match_is_replaced_in_the_overlay_only() {
        let (_d, ctx) = context(&[("calc.py", "def div(a, b):\n    return a / b\n")], &[]);
        let out = EditFile
            .run(input("calc.py", "    return a / b\n", "    if b == 0:\n        return 0\n    return a / b\n"), &ctx)
            .await
            .unwrap();
        assert!(out.starts_with("Edited calc.py. Lines 1-4 now read:\n"), "{out}");
        assert!(out.contains("     2\t    if b == 0:\n"));
        let path = ctx.overlay.resolve("calc.py").unwrap();
        assert_eq!(
            ctx.overlay.read(&path).unwrap().as_str(),
            "def div(a, b):\n    if b == 0:\n        return 0\n    return a / b\n"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "def div(a, b):\n    return a / b\n");
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn a_multiply_linked_file_is_not_edited() {
        let (d, ctx) = context(&[("a.py", "x = 1\n"), (".env", "TOKEN=1\n")], &[]);
        std::fs::hard_link(d.path().join("a.py"), d.path().join("b.py")).unwrap();
        std::fs::hard_link(d.path().join(".env"), d.path().join("notes.txt")).unwrap();
        let e = EditFile.run(input("b.py", "x = 1", "x = 2"), &ctx).await.unwrap_err().to_string();
        assert!(e.starts_with("`b.py` has other names (hard links)"), "{e}");
        let e = EditFile.run(input("notes.txt", "TOKEN=1", "TOKEN=2"), &ctx).await.unwrap_err().to_string();
        assert!(e.contains("is a protected file"), "{e}");
        assert!(ctx.overlay.changes().is_empty());
    }

    #[tokio::test]
    async fn several_matches_name_their_lines() {
        let (_d, ctx) = context(&[("a.py", "x = 1\ny = 2\nx = 1\n")], &[]);
        let e = EditFile.run(input("a.py", "x = 1", "x = 3"), &ctx).await.unwrap_err();
        assert_eq!(
            e.to_string(),
            "old_text occurs 2 times in a.py (at lines 1, 3); include more surrounding lines so that it occurs exactly once"
        );
    }

    #[tokio::test]
    async fn twenty_thousand_matches_name_the_first_few_and_count_the_rest() {
        let text: String = (0..20_000).map(|i| format!("x = 1  # {i}\n")).collect();
        let (_d, ctx) = context(&[("many.py", &text)], &[]);
        let e = EditFile.run(input("many.py", "x = 1", "x = 2"), &ctx).await.unwrap_err().to_string();
        assert_eq!(
            e,
            "old_text occurs 20000 times in many.py (the first 10 at lines 1, 2, 3, 4, 5, 6, 7, 8, 9, 10); include more surrounding lines so that it occurs exactly once"
        );
        assert!(e.len() < 4096);
        assert_eq!(lines_of("a\nb\nc\nb\n", &[2, 6]), [2, 4]);
    }

    #[tokio::test]
    async fn no_match_shows_whitespace_hint_or_closest_lines() {
        let (_d, ctx) = context(&[("a.py", "def f():\n    return compute(x)\n")], &[]);
        let e = EditFile.run(input("a.py", "def f():\n  return compute(x)", "z"), &ctx).await.unwrap_err();
        assert!(e.to_string().contains("The text at line 1 matches except for whitespace"), "{e}");
        let e = EditFile.run(input("a.py", "return compute(y)", "z"), &ctx).await.unwrap_err();
        assert_eq!(
            e.to_string(),
            "old_text was not found in a.py. Closest lines to the start of old_text:\n     2\t    return compute(x)\n"
        );
        let e = EditFile.run(input("a.py", "qqqqqqqq", "z"), &ctx).await.unwrap_err();
        assert!(e.to_string().contains("No similar line exists"));
    }

    #[tokio::test]
    async fn old_text_with_a_redaction_is_refused_and_the_file_kept() {
        let text = "KEY = \"ghp_abcdefghijklmnopqrstuvwxyz0123456789\"\nlog = \"[REDACTED] stays\"\n";
        let (_d, ctx) = context(&[("a.py", text)], &[]);
        let e = EditFile.run(input("a.py", "KEY = \"[REDACTED]\"", "KEY = None"), &ctx).await.unwrap_err();
        assert!(e.to_string().starts_with("old_text contains [REDACTED], which stands for a credential"), "{e}");
        assert!(e.to_string().contains("Quote a part of a.py without [REDACTED]"), "{e}");
        let path = ctx.overlay.resolve("a.py").unwrap();
        assert_eq!(ctx.overlay.read(&path).unwrap().as_str(), text);
        // A file that really holds the text is edited as any other.
        EditFile.run(input("a.py", "\"[REDACTED] stays\"", "\"[REDACTED] went\""), &ctx).await.unwrap();
        assert!(ctx.overlay.read(&path).unwrap().ends_with("log = \"[REDACTED] went\"\n"));
    }

    #[tokio::test]
    async fn crlf_files_accept_lf_old_text() {
        let (_d, ctx) = context(&[], &[("w.py", "a = 1\r\nb = '漢😀'\r\n", 5)]);
        EditFile.run(input("w.py", "a = 1\nb = '漢😀'", "a = 2\nb = '漢😀'"), &ctx).await.unwrap();
        let path = ctx.overlay.resolve("w.py").unwrap();
        assert_eq!(ctx.overlay.read(&path).unwrap().as_str(), "a = 2\r\nb = '漢😀'\r\n");
    }

    #[tokio::test]
    async fn empty_or_identical_text_and_missing_file_are_errors() {
        let (_d, ctx) = context(&[("a.py", "x\n")], &[]);
        assert!(EditFile.run(input("a.py", "", "y"), &ctx).await.unwrap_err().to_string().contains("use write_file"));
        assert!(EditFile.run(input("a.py", "x", "x"), &ctx).await.unwrap_err().to_string().contains("identical"));
        assert_eq!(
            EditFile.run(input("b.py", "x", "y"), &ctx).await.unwrap_err().to_string(),
            "file `b.py` does not exist"
        );
    }
}
