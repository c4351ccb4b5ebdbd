//! How a diagnostic reads for the model, in one place for the `diagnostics`
//! tool, the feedback after edits and the first message (`fix::prompt`,
//! which adds the covered text and the quick fixes): its range `L:C-L:C`
//! (1-based, columns in characters, the end exclusive), its `[source code]`
//! tag, and its details indented under it (the code's documentation link,
//! the related places with their line as the run's view holds it, the
//! notes), bounded, the cut visible.
//!
//! Its parts: `render` (one diagnostic whole, at most [`DIAGNOSTIC_BYTES`]:
//! the tool's and the feedback's), `details`, `span_text`, `tags`,
//! `shown_path` (a related place's or a quick fix's path), `cap` and
//! `cut_marker`.

use std::path::Path;

use super::{clip, shortened};
use crate::diagnostic::Diagnostic;
use crate::position::Span;
use crate::workspace::Overlay;

/// The most one diagnostic takes in the `diagnostics` tool and in the
/// feedback after an edit, its details included; past it the rest is cut,
/// visibly. The first message gives each problem 4 KB: there it is the
/// task, here one of up to 200.
pub(crate) const DIAGNOSTIC_BYTES: usize = 1024;
/// Characters of a message on a diagnostic's first line.
const MESSAGE_CHARS: usize = 400;
/// Characters of a related place's line in the tool and the feedback.
const LINE_CHARS: usize = 200;

/// One diagnostic of `shown` (the file as the model names it), as the tool
/// and the feedback give it: `path:L:C-L:C: severity: message [source
/// code]` (`path:L:C` when it has no end), then its [`details`]; each line
/// ends with `\n`. At most [`DIAGNOSTIC_BYTES`]. A diagnostic with nothing
/// more is that one line.
pub(crate) fn render(shown: &str, d: &Diagnostic, overlay: &Overlay) -> String {
    let at = match d.span() {
        Some(span) => span_text(span),
        None => format!("{}:{}", d.at.line_number(), d.at.column_number()),
    };
    let message = clip(&d.message.replace('\n', " "), MESSAGE_CHARS);
    let mut out = format!("{shown}:{at}: {}: {message}{}\n", d.shown_severity(), tags(d));
    out.push_str(&details(d, overlay, LINE_CHARS, DIAGNOSTIC_BYTES));
    cap(out, DIAGNOSTIC_BYTES, "diagnostic")
}

/// `L:C-L:C`, 1-based.
pub(crate) fn span_text(span: Span) -> String {
    format!(
        "{}:{}-{}:{}",
        span.start.line_number(),
        span.start.column_number(),
        span.end.line_number(),
        span.end.column_number()
    )
}

/// ` [source code]`, or nothing when it has neither.
pub(crate) fn tags(d: &Diagnostic) -> String {
    let tags: Vec<&str> = [d.source.as_deref(), d.code.as_deref()].into_iter().flatten().collect();
    if tags.is_empty() { String::new() } else { format!(" [{}]", tags.join(" ")) }
}

/// What comes with a diagnostic, two spaces in, each line ending with
/// `\n` (nothing when it has none of it): its code's documentation link;
/// each related place, `related: path:line: message`, with that line's
/// text (at most `line_chars`) read through the run's view (unsaved
/// buffers and the run's edits) when the place is in the workspace, places
/// in protected files counted, never named; its notes. Stops once past
/// `bytes`: the caller's [`cap`] cuts there, and no more files are read.
pub(crate) fn details(d: &Diagnostic, overlay: &Overlay, line_chars: usize, bytes: usize) -> String {
    let mut out = String::new();
    if let Some(link) = &d.code_link {
        out.push_str(&format!("  {} is documented at {link}\n", d.code.as_deref().unwrap_or("its rule")));
    }
    let ws = overlay.workspace();
    let mut hidden = 0;
    for r in &d.related {
        if out.len() > bytes {
            return out;
        }
        let Some(shown) = shown_path(overlay, &r.path) else {
            hidden += 1;
            continue;
        };
        out.push_str(&format!("  related: {shown}:{}: {}\n", u64::from(r.line) + 1, r.message.replace('\n', " ")));
        let text = if ws.contains(&r.path) { overlay.read(&r.path).ok() } else { None };
        if let Some(line) = text.as_deref().and_then(|t| t.lines().nth(r.line as usize)) {
            out.push_str(&format!("    | {}\n", shortened(line, line_chars)));
        }
    }
    if hidden > 0 {
        out.push_str(&format!("  ({hidden} related place(s) in protected files left out)\n"));
    }
    for n in &d.notes {
        if out.len() > bytes {
            return out;
        }
        out.push_str(&format!("  {}\n", n.trim_end().replace('\n', "\n    ")));
    }
    out
}

/// How the path of a related place or a quick fix is shown: relative to
/// the root inside the workspace, as it is outside (as the symbol tools
/// show results there); `None` for a protected file (not even its name).
pub(crate) fn shown_path(overlay: &Overlay, path: &Path) -> Option<String> {
    let ws = overlay.workspace();
    if ws.is_protected(path) {
        return None;
    }
    Some(if ws.contains(path) { ws.display(path) } else { path.display().to_string() })
}

/// What ends a `what` cut at `max` bytes by [`cap`]:
/// `  [… the rest of this problem is cut: over 4 KB]`.
pub(crate) fn cut_marker(max: usize, what: &str) -> String {
    format!("  [… the rest of this {what} is cut: over {} KB]\n", max / 1024)
}

/// `out` (lines ending with `\n`) cut to `max` bytes, at a line's end when
/// one is near enough, with the visible [`cut_marker`].
pub(crate) fn cap(mut out: String, max: usize, what: &str) -> String {
    if out.len() <= max {
        return out;
    }
    let cut = cut_marker(max, what);
    // Room for the marker and the newline a cut inside a line adds.
    let mut at = max.saturating_sub(cut.len() + 1);
    while !out.is_char_boundary(at) {
        at -= 1;
    }
    // At the end of a line when one ends in the last quarter.
    if let Some(nl) = out[..at].rfind('\n').filter(|nl| *nl >= at * 3 / 4) {
        at = nl + 1;
    } else {
        out.truncate(at);
        out.push('\n');
        at = out.len();
    }
    out.truncate(at);
    out.push_str(&cut);
    out
}
