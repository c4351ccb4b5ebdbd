//! What a prompt asks to fix, as a `fix::Target`: the file and lines come
//! from its resource links and embedded resources (an @-mentioned file, a
//! `#L12` or `#L12:20` fragment for a selection) and from its text ("line 12
//! of src/calc.py", a pasted `src/calc.py:12:5: error: …`, a rustc `-->
//! src/main.rs:3:5`, a Python `File "calc.py", line 12`); a pasted error's
//! message becomes the target's problem. The whole text is the instruction.
//! Embedded resources carry the client's text of their file, which the run
//! reads first.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use agent_client_protocol::v1::schema::{ContentBlock, EmbeddedResourceResource};
use regex::Regex;

use crate::diagnostic::{Diagnostic, Severity};
use crate::fix::Target;
use crate::position::{LineCol, LineRange};

/// The prompt's ask.
#[derive(Debug, Clone)]
pub(super) struct Asked {
    pub target: Target,
    /// The texts the prompt embeds, by canonical path.
    pub embedded: Vec<(PathBuf, String)>,
}

/// Said when a prompt names no file and the session has no run to follow.
pub(super) const NO_FILE: &str = "Say which file to fix: name it with its line (\"fix the error on line 12 of src/calc.py\"), paste the compiler's error, or @-mention the file.";

/// One place the prompt names.
#[derive(Debug, Clone, PartialEq)]
struct Mention {
    path: PathBuf,
    /// 0-based lines, when given.
    lines: Option<LineRange>,
    problem: Option<Diagnostic>,
}

/// A file path as people paste it: at least one character before an
/// extension.
const PATH: &str = r"[A-Za-z0-9_./\\~@+-]*[A-Za-z0-9_-]\.[A-Za-z0-9]+";

static COMPILER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(r"(?m)(?:-->\s*)?(?P<path>{PATH}):(?P<line>\d+)(?::(?P<col>\d+))?(?::\s*(?P<msg>[^\n]+))?"))
        .expect("the pattern compiles")
});
static TRACEBACK: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"File "(?P<path>[^"\n]+)", line (?P<line>\d+)"#).expect("the pattern compiles"));
static WORDS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"(?i)lines? (?P<line>\d+)(?:\s*(?:-|–|to)\s*(?P<last>\d+))? (?:of|in) [`'\x22]?(?P<path>{PATH})"
    ))
    .expect("the pattern compiles")
});
static BARE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!(r"(?P<path>{PATH})")).expect("the pattern compiles"));
static FRAGMENT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^L(?P<line>\d+)(?:[:-]L?(?P<last>\d+))?").expect("the pattern compiles"));

/// What `prompt` asks to fix in the workspace at `root`; with no file
/// named, the session's `previous` target with the new instruction, else
/// [`NO_FILE`].
pub(super) fn asked(prompt: &[ContentBlock], root: &Path, previous: Option<&Target>) -> Result<Asked, String> {
    let text: Vec<&str> = prompt
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect();
    let text = text.join("\n");
    let instruction = Some(text.trim().to_string()).filter(|t| !t.is_empty());
    let (mut mentions, embedded) = resources(prompt);
    mentions.extend(in_text(&text, root));
    let Some(first) = mentions.iter().find(|m| m.lines.is_some()).or(mentions.first()) else {
        return match previous {
            Some(t) => Ok(Asked { target: Target { instruction, ..t.clone() }, embedded }),
            None => Err(NO_FILE.to_string()),
        };
    };
    let path = first.path.clone();
    let mine: Vec<&Mention> = mentions.iter().filter(|m| m.path == path).collect();
    let first_line = mine.iter().filter_map(|m| m.lines).map(|l| l.first).min();
    let last_line = mine.iter().filter_map(|m| m.lines).map(|l| l.last).max();
    let lines = match (first_line, last_line) {
        (Some(a), Some(b)) => LineRange::new(a, b.max(a)),
        _ => LineRange::line(0),
    };
    let mut problems: Vec<Diagnostic> = mine.iter().filter_map(|m| m.problem.clone()).collect();
    problems.dedup();
    Ok(Asked { target: Target { path, lines, problems, instruction }, embedded })
}

/// The files of the prompt's resource links and embedded resources, and
/// the embedded texts.
fn resources(prompt: &[ContentBlock]) -> (Vec<Mention>, Vec<(PathBuf, String)>) {
    let mut mentions = Vec::new();
    let mut embedded = Vec::new();
    for block in prompt {
        let (uri, text) = match block {
            ContentBlock::ResourceLink(link) => (link.uri.as_str(), None),
            ContentBlock::Resource(r) => match &r.resource {
                EmbeddedResourceResource::TextResourceContents(t) => (t.uri.as_str(), Some(&t.text)),
                _ => continue,
            },
            _ => continue,
        };
        let Some((path, lines)) = file_uri(uri) else { continue };
        let path = std::fs::canonicalize(&path).unwrap_or(path);
        if let Some(text) = text {
            embedded.push((path.clone(), text.clone()));
        }
        mentions.push(Mention { path, lines, problem: None });
    }
    (mentions, embedded)
}

/// A local `file:` URI's path and its line fragment (`#L12`, `#L12:20`,
/// `#L12-L20`; 1-based). Other URIs (and hosts) are not files here.
fn file_uri(uri: &str) -> Option<(PathBuf, Option<LineRange>)> {
    let rest = uri.strip_prefix("file://")?;
    let (rest, fragment) = rest.split_once('#').map_or((rest, None), |(r, f)| (r, Some(f)));
    if !rest.starts_with('/') {
        return None;
    }
    let bytes = percent_decode(rest.split('?').next().unwrap_or(rest))?;
    if bytes.contains(&0) {
        return None;
    }
    let lines = fragment.and_then(|f| FRAGMENT.captures(f)).and_then(|c| {
        let first = c["line"].parse::<u32>().ok()?;
        let last = c.name("last").and_then(|l| l.as_str().parse::<u32>().ok()).unwrap_or(first);
        Some(LineRange::from_numbers(first, last.max(first)))
    });
    Some((PathBuf::from(String::from_utf8(bytes).ok()?), lines))
}

fn percent_decode(s: &str) -> Option<Vec<u8>> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(out)
}

/// The places the text names that are files under `root` (or absolute),
/// in the order of the text; a compiler line's message is its problem.
fn in_text(text: &str, root: &Path) -> Vec<Mention> {
    let mut found: Vec<(usize, Mention)> = Vec::new();
    let file = |p: &str| {
        let p = Path::new(p.trim_start_matches("./"));
        let path = if p.is_absolute() { p.to_path_buf() } else { root.join(p) };
        std::fs::canonicalize(path).ok().filter(|p| p.is_file())
    };
    let number = |c: &regex::Captures, name: &str| c.name(name).and_then(|m| m.as_str().parse::<u32>().ok());
    for c in COMPILER.captures_iter(text) {
        let (Some(path), Some(line)) = (file(&c["path"]), number(&c, "line")) else { continue };
        let column = number(&c, "col").unwrap_or(1);
        let problem = c.name("msg").map(|m| problem(m.as_str(), line, column));
        found.push((c.get(0).map_or(0, |m| m.start()), Mention { path, lines: Some(one(line)), problem }));
    }
    for c in TRACEBACK.captures_iter(text) {
        let (Some(path), Some(line)) = (file(&c["path"]), number(&c, "line")) else { continue };
        found.push((c.get(0).map_or(0, |m| m.start()), Mention { path, lines: Some(one(line)), problem: None }));
    }
    for c in WORDS.captures_iter(text) {
        let (Some(path), Some(line)) = (file(&c["path"]), number(&c, "line")) else { continue };
        let last = number(&c, "last").unwrap_or(line).max(line);
        let lines = Some(LineRange::from_numbers(line, last));
        found.push((c.get(0).map_or(0, |m| m.start()), Mention { path, lines, problem: None }));
    }
    for c in BARE.captures_iter(text) {
        let Some(path) = file(&c["path"]) else { continue };
        found.push((c.get(0).map_or(0, |m| m.start()), Mention { path, lines: None, problem: None }));
    }
    found.sort_by_key(|(at, _)| *at);
    found.into_iter().map(|(_, m)| m).collect()
}

fn one(line: u32) -> LineRange {
    LineRange::from_numbers(line, line)
}

/// A pasted compiler line's message (`error: x`, `warning[W1]: y`, `E501
/// line too long`) as a problem at 1-based `line` and `column`.
fn problem(message: &str, line: u32, column: u32) -> Diagnostic {
    let message = message.trim();
    let lower = message.to_ascii_lowercase();
    let severity = if lower.starts_with("warning") {
        Some(Severity::Warning)
    } else if lower.starts_with("note") || lower.starts_with("info") {
        Some(Severity::Information)
    } else {
        Some(Severity::Error)
    };
    Diagnostic {
        at: LineCol::new(line.saturating_sub(1), column.saturating_sub(1)),
        severity,
        message: message.to_string(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use agent_client_protocol::v1::schema::{EmbeddedResource, ResourceLink, TextResourceContents};

    use super::*;

    fn workspace() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(root.join("src")).unwrap();
        std::fs::write(root.join("src/calc.py"), "def div(a, b):\n    return a / b\n").unwrap();
        std::fs::write(root.join("main.rs"), "fn main() {}\n").unwrap();
        (dir, root)
    }

    fn text(t: &str) -> Vec<ContentBlock> {
        vec![ContentBlock::from(t.to_string())]
    }

    #[test]
    fn the_text_names_the_file_and_line_in_words_or_as_a_compiler_does() {
        let (_d, root) = workspace();
        let calc = root.join("src/calc.py");
        let a = asked(&text("fix the error on line 2 of src/calc.py"), &root, None).unwrap();
        assert_eq!((a.target.path.clone(), a.target.lines), (calc.clone(), LineRange::line(1)));
        assert_eq!(a.target.instruction.as_deref(), Some("fix the error on line 2 of src/calc.py"));
        assert!(a.target.problems.is_empty());
        let a = asked(&text("src/calc.py:2:12: error: division by zero\n"), &root, None).unwrap();
        assert_eq!(a.target.lines, LineRange::line(1));
        let p = &a.target.problems[0];
        assert_eq!(
            (p.at, p.severity, p.message.as_str()),
            (LineCol::new(1, 11), Some(Severity::Error), "error: division by zero")
        );
        let rustc = "error[E0308]: mismatched types\n --> main.rs:1:5\n";
        assert_eq!(asked(&text(rustc), &root, None).unwrap().target.path, root.join("main.rs"));
        let py = format!("Traceback:\n  File \"{}\", line 2, in div\nZeroDivisionError", calc.display());
        assert_eq!(asked(&text(&py), &root, None).unwrap().target.lines, LineRange::line(1));
        let a = asked(&text("look at lines 1-2 in `src/calc.py` please"), &root, None).unwrap();
        assert_eq!(a.target.lines, LineRange::new(0, 1));
        // A file named without a line: line 1.
        let a = asked(&text("src/calc.py divides by zero"), &root, None).unwrap();
        assert_eq!((a.target.path, a.target.lines), (calc, LineRange::line(0)));
        // Names of files that do not exist are not targets.
        assert_eq!(asked(&text("fix line 3 of nothing.py"), &root, None).unwrap_err(), NO_FILE);
    }

    #[test]
    fn resources_name_the_file_with_the_selection_and_embed_the_client_s_text() {
        let (_d, root) = workspace();
        let calc = root.join("src/calc.py");
        let uri = format!("file://{}#L2:2", calc.display());
        let link = ContentBlock::ResourceLink(ResourceLink::new("calc.py", uri));
        let a = asked(&[ContentBlock::from("guard b".to_string()), link], &root, None).unwrap();
        assert_eq!((a.target.path.clone(), a.target.lines), (calc.clone(), LineRange::line(1)));
        assert!(a.embedded.is_empty());
        let contents = TextResourceContents::new("unsaved\n", format!("file://{}", calc.display()).replace(' ', "%20"));
        let embedded =
            ContentBlock::Resource(EmbeddedResource::new(EmbeddedResourceResource::TextResourceContents(contents)));
        let a = asked(&[embedded], &root, None).unwrap();
        assert_eq!(a.embedded, vec![(calc.clone(), "unsaved\n".to_string())]);
        assert_eq!(a.target.instruction, None);
        assert_eq!(file_uri("file://host/x.py"), None);
        assert_eq!(file_uri("https://example.com/x.py"), None);
        assert_eq!(file_uri("file:///a%20b.py#L3-L5"), Some(("/a b.py".into(), Some(LineRange::new(2, 4)))));
    }

    #[test]
    fn without_a_file_a_prompt_follows_the_session_s_last_target() {
        let (_d, root) = workspace();
        let before = Target {
            path: root.join("src/calc.py"),
            lines: LineRange::line(1),
            problems: Vec::new(),
            instruction: Some("first".into()),
        };
        let a = asked(&text("also handle negative numbers"), &root, Some(&before)).unwrap();
        assert_eq!((a.target.path, a.target.lines), (before.path.clone(), before.lines));
        assert_eq!(a.target.instruction.as_deref(), Some("also handle negative numbers"));
    }
}
