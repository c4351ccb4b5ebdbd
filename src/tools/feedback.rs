//! Diagnostics feedback after an edit: what the language server's
//! diagnostics of the edited file say before and after, appended to the
//! results of `edit_file` and `write_file`: each fixed one in a line, each
//! introduced one whole (`diagnostic_text::render`).

use super::{ToolContext, clip, diagnostic_text};

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
        let whole = diagnostic_text::render(&shown, d, &ctx.overlay);
        out.push_str(&format!("\n- introduced: {}", whole.trim_end_matches('\n')));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::diagnostic::{Diagnostic, Related, Severity};
    use crate::position::LineCol;
    use crate::tools::test_support::{Reports, context};

    #[tokio::test]
    async fn an_introduced_diagnostic_comes_whole_and_a_plain_one_in_a_line() {
        let (_d, ctx) = context(&[("m.py", "x = 1\n")], &[]);
        let path = ctx.overlay.resolve("m.py").unwrap();
        let new = "x = 漢字😀 + BAD\ny = WORSE\n";
        let whole = Diagnostic {
            at: LineCol::new(0, 10),
            end: Some(LineCol::new(0, 13)),
            severity: Some(Severity::Error),
            message: "BAD is not defined".into(),
            source: Some("fake".into()),
            code: Some("E1".into()),
            code_link: Some("https://fake.example/rules/E1".into()),
            related: vec![Related { path: path.clone(), line: 1, message: "and used here".into() }],
            notes: vec!["note: names are case-sensitive".into()],
        };
        let plain = Diagnostic {
            at: LineCol::new(1, 4),
            severity: Some(Severity::Warning),
            message: "WORSE is unused".into(),
            ..Default::default()
        };
        let gone = Diagnostic { message: "x is never read".into(), ..Default::default() };
        let reports = Reports::by_marker(vec![("BAD", whole), ("WORSE", plain), ("x = 1", gone)]);
        let ctx = ToolContext { symbols: Some(Arc::new(reports)), ..ctx };
        // The edit is in the run's view before its feedback: the related
        // line is the new one.
        ctx.overlay.write(&path, new.into()).unwrap();
        let out = diagnostics_feedback(&ctx, &path, Some("x = 1\n"), new).await;
        assert_eq!(
            out,
            "\n\nDiagnostics of m.py after this edit: 1 fixed, 2 introduced, 2 in all.\n\
             - fixed (was line 1): error: x is never read\n\
             - introduced: m.py:1:11-1:14: error: BAD is not defined [fake E1]\n  \
             E1 is documented at https://fake.example/rules/E1\n  \
             related: m.py:2: and used here\n    | y = WORSE\n  \
             note: names are case-sensitive\n\
             - introduced: m.py:2:5: warning: WORSE is unused"
        );
    }
}
