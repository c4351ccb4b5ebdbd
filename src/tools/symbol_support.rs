//! What the symbol tools share: finding a symbol's column on a line (models
//! are bad at columns; they name the symbol and its 1-based line), rendering
//! locations with a source snippet, and the "no language server" error.

use std::path::Path;

use super::{ToolContext, ToolError, clip};
use crate::downstream::{Location, SymbolSource};

/// Where a symbol is, as the model names it: the input of `find_definition`
/// and `find_references`.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub struct SymbolAt {
    /// Path of the file where the symbol appears, relative to the workspace root.
    pub path: String,
    /// The 1-based line where the symbol appears.
    pub line: u64,
    /// The symbol's text as it appears on that line, e.g. `compute_total`.
    pub symbol: String,
    /// Which occurrence on the line, 1-based, when the symbol appears several times (default 1).
    #[serde(default)]
    pub occurrence: Option<u32>,
    /// Page of results, 1-based (50 per page).
    #[serde(default)]
    pub page: Option<u32>,
}

/// Which location query to make.
#[derive(Debug, Clone, Copy)]
pub enum LocationQuery {
    Definition,
    References,
}

/// Resolves `input` to a position and renders the locations the server
/// gives for it: `Definitions of `x` (a.py:3):` then `path:line: snippet`.
pub async fn locations(ctx: &ToolContext, input: &SymbolAt, query: LocationQuery) -> Result<String, ToolError> {
    let (abs, text, shown, line_text) = line_of(ctx, &input.path, input.line)?;
    let (column, note) = find_column(&line_text, &input.symbol, input.occurrence, &shown, input.line)?;
    let source = source(ctx)?;
    let line = (input.line - 1) as u32;
    let (found, title, what) = match query {
        LocationQuery::Definition => (source.definition(&abs, &text, line, column).await, "Definitions", "definitions"),
        LocationQuery::References => (source.references(&abs, &text, line, column).await, "References", "references"),
    };
    let found = found.map_err(|e| ToolError::Respond(e.to_string()))?;
    let mut out = format!("{title} of `{}` ({shown}:{}){note}:\n", input.symbol, input.line);
    out.push_str(&render_locations(ctx, &found, input.page, what));
    Ok(out)
}

/// Results per page for the paginated symbol tools.
pub const PAGE: usize = 50;

/// The symbol source, or the error the model reads when there is none.
pub fn source(ctx: &ToolContext) -> Result<&dyn SymbolSource, ToolError> {
    ctx.symbols.as_deref().ok_or_else(|| ToolError::Respond("no language servers are available in this session".into()))
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$'
}

/// The 0-based char column of the `occurrence`-th (1-based) `symbol` on
/// `line_text`, preferring whole-word matches. Errors say what the line
/// holds, so the model can correct itself.
pub fn find_column(
    line_text: &str,
    symbol: &str,
    occurrence: Option<u32>,
    shown: &str,
    line: u64,
) -> Result<(u32, String), ToolError> {
    let symbol = symbol.trim();
    if symbol.is_empty() {
        return Err(ToolError::Respond("symbol is empty".into()));
    }
    let chars: Vec<char> = line_text.chars().collect();
    let needle: Vec<char> = symbol.chars().collect();
    let mut all = Vec::new();
    let mut words = Vec::new();
    for i in 0..chars.len().saturating_sub(needle.len() - 1) {
        if chars[i..i + needle.len()] == needle[..] {
            all.push(i);
            let before = i.checked_sub(1).map(|j| chars[j]);
            let after = chars.get(i + needle.len()).copied();
            if !before.is_some_and(is_ident) && !after.is_some_and(is_ident) {
                words.push(i);
            }
        }
    }
    let found = if words.is_empty() { all } else { words };
    if found.is_empty() {
        return Err(ToolError::Respond(format!(
            "`{symbol}` does not occur on line {line} of {shown}; that line reads: {}",
            clip(line_text.trim(), 300)
        )));
    }
    let n = occurrence.unwrap_or(1).max(1) as usize;
    let Some(col) = found.get(n - 1) else {
        return Err(ToolError::Respond(format!(
            "`{symbol}` occurs only {} time(s) on line {line} of {shown}",
            found.len()
        )));
    };
    let note = if found.len() > 1 && occurrence.is_none() {
        format!(" (the first of {} occurrences on that line; pass occurrence to pick another)", found.len())
    } else {
        String::new()
    };
    Ok((*col as u32, note))
}

/// The text of 1-based `line` of `path` in the run's view, resolving and
/// reading through the overlay.
pub fn line_of(
    ctx: &ToolContext,
    path: &str,
    line: u64,
) -> Result<(std::path::PathBuf, crate::workspace::Text, String, String), ToolError> {
    let abs = ctx.overlay.resolve(path)?;
    let text = ctx.overlay.read(&abs)?;
    let shown = ctx.overlay.workspace().display(&abs);
    let count = text.lines().count();
    if line == 0 || line as usize > count {
        return Err(ToolError::Respond(format!("{shown} has {count} lines; line {line} does not exist")));
    }
    let line_text = text.lines().nth(line as usize - 1).unwrap_or("").to_string();
    Ok((abs, text, shown, line_text))
}

/// `path:line: snippet` for each location, workspace-relative when inside
/// it, one page at a time.
pub fn render_locations(ctx: &ToolContext, locations: &[Location], page: Option<u32>, what: &str) -> String {
    let ws = ctx.overlay.workspace();
    // Results inside protected files are dropped: not even their lines.
    let all = locations.len();
    let locations: Vec<&Location> = locations.iter().filter(|l| !ws.is_protected(&l.path)).collect();
    let hidden = all - locations.len();
    let hidden = if hidden > 0 { format!("[{hidden} result(s) in protected files left out]\n") } else { String::new() };
    if locations.is_empty() {
        return format!(
            "No {what} found.{}",
            if hidden.is_empty() { "" } else { " (Results in protected files are left out.)" }
        );
    }
    let page = page.unwrap_or(1).max(1) as usize;
    let start = (page - 1) * PAGE;
    if start >= locations.len() {
        return format!("There are {} {what}; page {page} is past the end.", locations.len());
    }
    let end = (start + PAGE).min(locations.len());
    let mut out = hidden;
    for l in &locations[start..end] {
        let inside = ws.contains(&l.path);
        let shown = if inside { ws.display(&l.path) } else { l.path.display().to_string() };
        let snippet = if inside { snippet(ctx, &l.path, l.line) } else { None };
        let label = match (&l.kind, &l.name) {
            (Some(k), Some(n)) => format!("{k} {n} — "),
            _ => String::new(),
        };
        match snippet {
            Some(s) => out.push_str(&format!("{label}{shown}:{}: {}\n", u64::from(l.line) + 1, clip(s.trim(), 200))),
            None => out.push_str(&format!("{label}{shown}:{}\n", u64::from(l.line) + 1)),
        }
    }
    if end < locations.len() || page > 1 {
        out.push_str(&format!(
            "[{what} {}-{} of {}{}]\n",
            start + 1,
            end,
            locations.len(),
            if end < locations.len() { format!("; page={} shows more", page + 1) } else { String::new() }
        ));
    }
    out
}

fn snippet(ctx: &ToolContext, path: &Path, line: u32) -> Option<String> {
    let text = ctx.overlay.read(path).ok()?;
    text.lines().nth(line as usize).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_prefer_whole_words_and_count_chars() {
        assert_eq!(
            find_column("total = subtotal + total", "total", None, "a", 1).unwrap(),
            (0, " (the first of 2 occurrences on that line; pass occurrence to pick another)".into())
        );
        assert_eq!(find_column("total = subtotal + total", "total", Some(2), "a", 1).unwrap().0, 19);
        assert_eq!(find_column("漢字 = compute(漢字)", "compute", None, "a", 1).unwrap(), (5, String::new()));
        let e = find_column("x = 1", "y", None, "a.py", 3).unwrap_err();
        assert_eq!(e.to_string(), "`y` does not occur on line 3 of a.py; that line reads: x = 1");
        assert!(find_column("x = x", "x", Some(3), "a.py", 1).is_err());
        assert_eq!(
            find_column("foo.barbaz", "bar", None, "a", 1).unwrap().0,
            4,
            "a substring when no whole word matches"
        );
    }
}
