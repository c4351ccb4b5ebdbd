//! Diagnostics feedback after an edit: what the language server's
//! diagnostics of the edited file say before and after, appended to the
//! results of `edit_file` and `write_file`.

use super::{ToolContext, clip, diagnostics};

/// What changed in the language server's diagnostics of `path` with an
/// edit from `old` to `new` (`None`: a new file): appended to the results of
/// the edit tools so the model sees the real errors it fixed or introduced.
/// Never fails the edit: problems become a note.
pub(crate) async fn diagnostics_feedback(
    ctx: &ToolContext,
    path: &std::path::Path,
    old: Option<&str>,
    new: &str,
) -> String {
    use std::collections::HashMap;
    let Some(symbols) = &ctx.symbols else { return String::new() };
    if crate::downstream::language_of(path).is_none() {
        return String::new();
    }
    let shown = ctx.overlay.workspace().display(path);
    let before = match old {
        Some(old) => match symbols.diagnostics(path, old).await {
            Ok(d) => d,
            Err(e) => return format!("\n\n(No diagnostics for this edit: {e}.)"),
        },
        None => Vec::new(),
    };
    let after = match symbols.diagnostics(path, new).await {
        Ok(d) => d,
        Err(e) => return format!("\n\n(No diagnostics for this edit: {e}.)"),
    };
    // Compare by what a diagnostic says, not where: lines move with edits.
    let key = |d: &crate::diagnostic::Diagnostic| (d.severity, d.message.clone(), d.code.clone());
    let mut remaining: HashMap<_, usize> = HashMap::new();
    for d in &after {
        *remaining.entry(key(d)).or_default() += 1;
    }
    let mut fixed = Vec::new();
    for d in &before {
        match remaining.get_mut(&key(d)) {
            Some(n) if *n > 0 => *n -= 1,
            _ => fixed.push(d),
        }
    }
    let mut old_counts: HashMap<_, usize> = HashMap::new();
    for d in &before {
        *old_counts.entry(key(d)).or_default() += 1;
    }
    let mut introduced = Vec::new();
    for d in &after {
        match old_counts.get_mut(&key(d)) {
            Some(n) if *n > 0 => *n -= 1,
            _ => introduced.push(d),
        }
    }
    if before.is_empty() && after.is_empty() {
        return format!("\n\nDiagnostics of {shown}: none before or after this edit.");
    }
    let mut out = format!(
        "\n\nDiagnostics of {shown} after this edit: {} fixed, {} introduced, {} in all.",
        fixed.len(),
        introduced.len(),
        after.len()
    );
    for d in fixed.iter().take(20) {
        out.push_str(&format!(
            "\n- fixed (was line {}): {}: {}",
            d.at.line_number(),
            d.shown_severity(),
            clip(&d.message, 300)
        ));
    }
    for d in introduced.iter().take(20) {
        out.push_str(&format!("\n- introduced: {}", diagnostics::render(&shown, d)));
    }
    out
}
