//! Project instructions: the files in which a repository tells coding agents
//! its conventions (`AGENTS.md`, `CLAUDE.md`, `.github/copilot-instructions.md`,
//! `.cursor/rules/*.md[c]`), found for one target and rendered for the
//! system prompt.
//!
//! They come from the repository, so they are read like anything else the
//! model sees: every path through the workspace's one gate
//! (`Workspace::resolve`: inside a root, symlinks followed and checked,
//! protected files refused), every file opened as the overlay opens files
//! (`read_prefix`: non-blocking, regular files only, a bounded read). What
//! they say can steer the model's text; it cannot widen what the tools do.
//!
//! Its parts:
//! project instructions: `Instructions::find(workspace, target)` finds the
//! repository's `AGENTS.md`/`CLAUDE.md` (root, then every folder down to the
//! target's, nearest last), `.github/copilot-instructions.md` and the
//! `.cursor/rules` that apply (front matter: `alwaysApply`, `globs`), each
//! path through `Workspace::resolve` and each file read with
//! `workspace::read_prefix`, capped (16 KB each, 32 KB in all, cut with a
//! note); `section()` is the text `fix` appends to the system prompt;
//! `agentfix check` lists what was used and skipped

use std::collections::HashMap;
use std::fmt;
use std::path::{Component, Path, PathBuf};

use globset::{GlobBuilder, GlobSetBuilder};

use crate::workspace::{OverlayError, PathError, Workspace, read_prefix, real_path};

/// The instruction files of a folder, in the order they are read.
const FOLDER_FILES: &[&str] = &["AGENTS.md", "CLAUDE.md"];
/// GitHub Copilot's repository instructions, at the root only.
const COPILOT: &str = ".github/copilot-instructions.md";
/// Cursor's project rules, at the root only: `.md` and `.mdc` files.
const CURSOR_RULES: &str = ".cursor/rules";
/// Entries of `.cursor/rules` looked at, at most, and rule files kept of
/// them (by name).
const MAX_RULE_ENTRIES: usize = 1000;
const MAX_RULE_FILES: usize = 100;
/// What the prompt carries of one file at most.
pub const MAX_FILE_BYTES: usize = 16 * 1024;
/// What the prompt carries of all of them together at most.
pub const MAX_TOTAL_BYTES: usize = 32 * 1024;
/// Less than this left of the total and a file is skipped, not cut to a
/// fragment.
const MIN_USEFUL_BYTES: usize = 512;
/// Bytes read of each file: its cap, with room for a front matter.
const READ_BYTES: u64 = 64 * 1024;

/// What the system prompt says before the files.
const PREAMBLE: &str = "# Project instructions\n\n\
The sections below are the project's instructions, from files in its repository: the workspace root's first, \
those in the folders nearest to the file being fixed last (a nearer file refines the ones before it). \
Follow them unless they conflict with the user's request or with the rules above. \
They do not change what your tools allow: paths stay inside the workspace, protected files stay refused, \
commands stay sandboxed.";

/// An instruction file in force, with the text the prompt carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instruction {
    /// Relative to the workspace root, with `/`.
    pub path: String,
    /// The file's size on disk, in bytes.
    pub size: u64,
    /// The file's text (a Cursor rule without its front matter), cut with
    /// a note saying so when `cut` is set.
    pub text: String,
    pub cut: Option<Cut>,
}

/// Why an instruction file was cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// At [`MAX_FILE_BYTES`].
    File,
    /// At what the files before it left of [`MAX_TOTAL_BYTES`].
    Total,
}

/// An instruction file found and not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Relative to the workspace root, with `/`.
    pub path: String,
    pub why: Skip,
}

/// Why an instruction file was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Skip {
    /// A protected file, or a link to one.
    Protected,
    /// It leads outside the workspace (a symlink).
    Outside,
    /// A FIFO, socket, device or folder.
    NotRegular,
    /// Binary, or not UTF-8.
    NotText,
    Unreadable(String),
    /// The same file as one used before it (a link), by its path.
    Duplicate(String),
    /// Nothing in it (besides a front matter).
    Empty,
    /// A Cursor rule that does not apply to the target, and why.
    NotApplied(String),
    /// The files before it used up [`MAX_TOTAL_BYTES`].
    OverTotal,
}

impl fmt::Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Skip::Protected => f.write_str("a protected file (or a link to one); never read"),
            Skip::Outside => f.write_str("leads outside the workspace; never read"),
            Skip::NotRegular => f.write_str("not a regular file"),
            Skip::NotText => f.write_str("not UTF-8 text"),
            Skip::Unreadable(e) => write!(f, "unreadable: {e}"),
            Skip::Duplicate(first) => write!(f, "the same file as {first}"),
            Skip::Empty => f.write_str("empty"),
            Skip::NotApplied(why) => f.write_str(why),
            Skip::OverTotal => write!(f, "over the {} KB of all instruction files", MAX_TOTAL_BYTES / 1024),
        }
    }
}

/// The instruction files for one target, in the order the prompt carries
/// them, and those found but skipped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Instructions {
    pub files: Vec<Instruction>,
    pub skipped: Vec<Skipped>,
}

/// A file that may hold instructions.
struct Candidate {
    path: PathBuf,
    kind: Kind,
}

enum Kind {
    Plain,
    /// A Cursor rule: its front matter decides whether it applies.
    Rule,
    /// A folder of rules that was refused, and why.
    Refused(Skip),
}

impl Instructions {
    /// The instruction files that apply to `target` (an absolute path), or
    /// with no target those of the workspace root alone: the root's
    /// `AGENTS.md`, `CLAUDE.md`, `.github/copilot-instructions.md` and
    /// `.cursor/rules/*` (by name), then the `AGENTS.md` and `CLAUDE.md` of
    /// every folder from the root down to the target's, nearest last. The
    /// root is the workspace root that holds the target; a target outside
    /// every root (a file the run sees alone) has none, as it has no
    /// agentfix.toml. Reads the disk, never the editor's buffers.
    pub fn find(workspace: &Workspace, target: Option<&Path>) -> Self {
        let mut found = Instructions::default();
        let roots = workspace.roots();
        let root = match target {
            Some(t) => roots.iter().find(|r| t.starts_with(r)),
            None => roots.first(),
        };
        let Some(root) = root else { return found };
        let mut candidates: Vec<Candidate> = FOLDER_FILES
            .iter()
            .chain([&COPILOT])
            .map(|n| Candidate { path: root.join(n), kind: Kind::Plain })
            .collect();
        candidates.extend(cursor_rules(workspace, root));
        let folders = target.and_then(Path::parent).and_then(|d| d.strip_prefix(root).ok());
        let mut folder = root.to_path_buf();
        for part in folders.into_iter().flat_map(Path::components) {
            let Component::Normal(name) = part else { continue };
            folder.push(name);
            candidates.extend(FOLDER_FILES.iter().map(|n| Candidate { path: folder.join(n), kind: Kind::Plain }));
        }
        let target_rel = target.and_then(|t| t.strip_prefix(root).ok()).map(slashed);
        let mut seen: HashMap<PathBuf, String> = HashMap::new();
        let mut left = MAX_TOTAL_BYTES;
        for c in candidates {
            let shown = workspace.display(&c.path);
            let outcome = match c.kind {
                Kind::Refused(why) => Err(why),
                Kind::Plain | Kind::Rule => read(workspace, &c, target_rel.as_deref(), &mut seen, left),
            };
            match outcome {
                Ok(None) => {}
                Ok(Some(file)) => {
                    left -= file.kept;
                    found.files.push(Instruction { path: shown, size: file.size, text: file.text, cut: file.cut });
                }
                Err(why) => {
                    match &why {
                        Skip::NotApplied(_) | Skip::Duplicate(_) => {
                            tracing::debug!("project instructions: {shown} skipped: {why}")
                        }
                        _ => tracing::warn!("project instructions: {shown} skipped: {why}"),
                    }
                    found.skipped.push(Skipped { path: shown, why });
                }
            }
        }
        found
    }

    /// Whether no instruction file is in force.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// What the system prompt carries after its own rules: a sentence on
    /// what these are and how far they go, then each file under a heading
    /// with its path. `None` without a file. The same files give the same
    /// bytes (the system prompt is the cached prefix).
    pub fn section(&self) -> Option<String> {
        if self.files.is_empty() {
            return None;
        }
        let mut out = PREAMBLE.to_string();
        for f in &self.files {
            out.push_str(&format!("\n\n## `{}`\n\n{}", f.path, f.text));
        }
        Some(out)
    }
}

/// The rule files of the root's `.cursor/rules`, by name; a folder that
/// leads out or is protected is refused, not listed.
fn cursor_rules(workspace: &Workspace, root: &Path) -> Vec<Candidate> {
    let folder = root.join(CURSOR_RULES);
    if std::fs::symlink_metadata(&folder).is_err() {
        return Vec::new();
    }
    if let Err(why) = resolve(workspace, &folder) {
        return vec![Candidate { path: folder, kind: Kind::Refused(why) }];
    }
    let Ok(entries) = std::fs::read_dir(&folder) else { return Vec::new() };
    let mut names: Vec<String> = entries
        .take(MAX_RULE_ENTRIES)
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".md") || n.ends_with(".mdc"))
        .collect();
    names.sort();
    names.truncate(MAX_RULE_FILES);
    names.into_iter().map(|n| Candidate { path: folder.join(n), kind: Kind::Rule }).collect()
}

/// One file read for the prompt.
struct Read {
    size: u64,
    text: String,
    /// Bytes of the file's text kept (the note not counted).
    kept: usize,
    cut: Option<Cut>,
}

/// The gate every path goes through: the tools' own.
fn resolve(workspace: &Workspace, path: &Path) -> Result<PathBuf, Skip> {
    let given = path.to_str().ok_or_else(|| Skip::Unreadable("the path is not UTF-8".into()))?;
    workspace.resolve(given).map_err(|e| match e {
        PathError::Protected(_) => Skip::Protected,
        PathError::Outside(_) | PathError::Empty => Skip::Outside,
    })
}

/// Reads one candidate: `Ok(None)` when there is no such file, `Err` when
/// it is there and not used.
fn read(
    workspace: &Workspace,
    c: &Candidate,
    target: Option<&str>,
    seen: &mut HashMap<PathBuf, String>,
    left: usize,
) -> Result<Option<Read>, Skip> {
    match std::fs::symlink_metadata(&c.path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Skip::Unreadable(e.to_string())),
        Ok(_) => {}
    }
    let path = resolve(workspace, &c.path)?;
    match std::fs::metadata(&path) {
        // A link, inside, to nothing.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Skip::Unreadable(e.to_string())),
        Ok(_) => {}
    }
    let shown = workspace.display(&path);
    let real = real_path(&path).unwrap_or_else(|| path.clone());
    if let Some(first) = seen.get(&real) {
        return Err(Skip::Duplicate(first.clone()));
    }
    let prefix = read_prefix(&path, &shown, READ_BYTES).map_err(|e| match e {
        OverlayError::NotRegular(_) | OverlayError::IsDirectory(_) => Skip::NotRegular,
        other => Skip::Unreadable(other.to_string()),
    })?;
    let partial = prefix.len > prefix.bytes.len() as u64;
    let text = match std::str::from_utf8(&prefix.bytes) {
        Ok(t) => t,
        // The read ended inside a character.
        Err(e) if partial && e.error_len().is_none() => {
            std::str::from_utf8(&prefix.bytes[..e.valid_up_to()]).map_err(|_| Skip::NotText)?
        }
        Err(_) => return Err(Skip::NotText),
    };
    if text.contains('\0') {
        return Err(Skip::NotText);
    }
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let body = if matches!(c.kind, Kind::Rule) { applied_rule(text, &c.path, target)? } else { text };
    let body = body.trim_matches(|ch: char| ch == '\n' || ch == '\r').trim_end();
    if body.is_empty() {
        return Err(Skip::Empty);
    }
    let (limit, cut) = if left < MAX_FILE_BYTES { (left, Cut::Total) } else { (MAX_FILE_BYTES, Cut::File) };
    if body.len() <= limit && !partial {
        seen.insert(real, workspace.display(&c.path));
        return Ok(Some(Read { size: prefix.len, text: body.to_string(), kept: body.len(), cut: None }));
    }
    if limit < MIN_USEFUL_BYTES {
        return Err(Skip::OverTotal);
    }
    seen.insert(real, workspace.display(&c.path));
    let kept = cut_at(body, limit);
    let note = match cut {
        Cut::File => format!(
            "[agentfix: cut here; the prompt carries the first {} KB of each instruction file, and this one has {} bytes]",
            MAX_FILE_BYTES / 1024,
            prefix.len
        ),
        Cut::Total => format!(
            "[agentfix: cut here; instruction files share {} KB in all, and the files before this one used the rest]",
            MAX_TOTAL_BYTES / 1024
        ),
    };
    Ok(Some(Read { size: prefix.len, text: format!("{kept}\n\n{note}"), kept: kept.len(), cut: Some(cut) }))
}

/// The longest start of `text` within `max` bytes that ends at a line
/// break, if one is in its second half, else at a character boundary.
fn cut_at(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    match text[..end].rfind('\n') {
        Some(nl) if nl >= end / 2 => text[..nl].trim_end(),
        _ => &text[..end],
    }
}

/// `a/b.py`, whatever the platform's separator.
fn slashed(p: &Path) -> String {
    p.components().filter_map(|c| c.as_os_str().to_str()).collect::<Vec<_>>().join("/")
}

/// A Cursor rule's front matter: the keys that decide whether it applies.
#[derive(Debug, Default, PartialEq, Eq)]
struct FrontMatter {
    always_apply: bool,
    globs: Vec<String>,
}

/// The body of a Cursor rule that applies to `target` (relative to the
/// root), its front matter removed; `alwaysApply: true` applies
/// everywhere, `globs` to the files they match (a glob without `/` at any
/// depth), and a rule with neither (one the user or the model picks by
/// name or `description`) is skipped. A `.md` rule without a front matter
/// always applies.
fn applied_rule<'t>(text: &'t str, path: &Path, target: Option<&str>) -> Result<&'t str, Skip> {
    let (front, body) = front_matter(text);
    let plain_md = path.extension().is_some_and(|e| e == "md");
    let front = match front {
        Some(f) => f,
        None if plain_md => return Ok(body),
        None => FrontMatter::default(),
    };
    if front.always_apply {
        return Ok(body);
    }
    if front.globs.is_empty() {
        return Err(Skip::NotApplied(
            "a Cursor rule without `alwaysApply: true` or `globs` (applied only when asked for)".into(),
        ));
    }
    let globs = front.globs.join(", ");
    let Some(target) = target else {
        return Err(Skip::NotApplied(format!("a Cursor rule only for files matching {globs}")));
    };
    let mut set = GlobSetBuilder::new();
    for g in &front.globs {
        let g = g.strip_prefix("./").unwrap_or(g);
        let pattern = match g.strip_prefix('/') {
            Some(anchored) => anchored.to_string(),
            None if g.contains('/') || g.starts_with("**") => g.to_string(),
            None => format!("**/{g}"),
        };
        match GlobBuilder::new(&pattern).literal_separator(true).build() {
            Ok(glob) => _ = set.add(glob),
            Err(e) => return Err(Skip::NotApplied(format!("a Cursor rule with an invalid glob `{g}`: {e}"))),
        }
    }
    let matches = set.build().is_ok_and(|s| s.is_match(target));
    if matches { Ok(body) } else { Err(Skip::NotApplied(format!("a Cursor rule for files matching {globs}"))) }
}

/// Splits a leading `---` … `---` block off `text`: the keys agentfix
/// reads from it (a small YAML subset: `key: value`, `[a, b]` and `- a`
/// lists, quotes), and the rest. No closing `---`: no front matter.
fn front_matter(text: &str) -> (Option<FrontMatter>, &str) {
    let mut lines = text.split_inclusive('\n');
    if lines.next().map(str::trim_end) != Some("---") {
        return (None, text);
    }
    let mut offset = text.split_inclusive('\n').next().map_or(0, str::len);
    let mut front = FrontMatter::default();
    let mut in_globs = false;
    for line in lines {
        offset += line.len();
        let l = line.trim_end();
        if l == "---" {
            return (Some(front), &text[offset..]);
        }
        if in_globs && let Some(item) = l.trim_start().strip_prefix('-') {
            front.globs.extend(items(item));
            continue;
        }
        in_globs = false;
        let Some((key, value)) = l.split_once(':') else { continue };
        let value = value.trim();
        match key.trim() {
            "alwaysApply" => front.always_apply = unquote(value).eq_ignore_ascii_case("true"),
            "globs" if value.is_empty() => in_globs = true,
            "globs" => front.globs.extend(items(value.trim_start_matches('[').trim_end_matches(']'))),
            _ => {}
        }
    }
    (None, text)
}

/// The comma-separated, maybe quoted, items of a value.
fn items(value: &str) -> Vec<String> {
    value.split(',').map(|s| unquote(s.trim()).to_string()).filter(|s| !s.is_empty()).collect()
}

fn unquote(s: &str) -> &str {
    let s = s.trim();
    for q in ['"', '\''] {
        if let Some(inner) = s.strip_prefix(q).and_then(|r| r.strip_suffix(q)) {
            return inner;
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let p = dir.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        let ws = Workspace::new(vec![dir.path().to_path_buf()]);
        (dir, ws)
    }

    fn target(ws: &Workspace, rel: &str) -> PathBuf {
        ws.primary_root().join(rel)
    }

    fn paths(found: &Instructions) -> Vec<&str> {
        found.files.iter().map(|f| f.path.as_str()).collect()
    }

    fn skipped(found: &Instructions) -> Vec<(&str, Skip)> {
        found.skipped.iter().map(|s| (s.path.as_str(), s.why.clone())).collect()
    }

    #[test]
    fn the_roots_files_come_first_and_the_nearest_folders_last() {
        let (_d, ws) = tree(&[
            ("AGENTS.md", "root agents\n"),
            ("CLAUDE.md", "root claude\n"),
            (".github/copilot-instructions.md", "copilot\n"),
            (".cursor/rules/b-style.md", "plain md rule\n"),
            (".cursor/rules/a-always.mdc", "---\ndescription: all\nalwaysApply: true\n---\nalways rule\n"),
            (".cursor/rules/notes.txt", "not a rule\n"),
            ("src/AGENTS.md", "src agents\n"),
            ("src/app/CLAUDE.md", "app claude\n"),
            ("src/app/AGENTS.md", "app agents\n"),
            ("other/AGENTS.md", "a sibling folder: never\n"),
            ("src/app/deeper/AGENTS.md", "below the target: never\n"),
        ]);
        let found = Instructions::find(&ws, Some(&target(&ws, "src/app/main.py")));
        assert_eq!(
            paths(&found),
            [
                "AGENTS.md",
                "CLAUDE.md",
                ".github/copilot-instructions.md",
                ".cursor/rules/a-always.mdc",
                ".cursor/rules/b-style.md",
                "src/AGENTS.md",
                "src/app/AGENTS.md",
                "src/app/CLAUDE.md",
            ]
        );
        assert_eq!(found.files[3].text, "always rule", "the front matter is stripped");
        assert_eq!(found.files[0].size, 12);
        assert!(found.skipped.is_empty(), "{:?}", found.skipped);
        let section = found.section().unwrap();
        assert!(section.starts_with(PREAMBLE), "{section}");
        assert!(
            section.contains("\n\n## `AGENTS.md`\n\nroot agents\n\n## `CLAUDE.md`\n\nroot claude\n\n"),
            "{section}"
        );
        assert!(section.ends_with("## `src/app/CLAUDE.md`\n\napp claude"), "{section}");
        // The same files, the same bytes.
        assert_eq!(Instructions::find(&ws, Some(&target(&ws, "src/app/main.py"))).section().unwrap(), section);
        // Without a target: the root's alone.
        let root = Instructions::find(&ws, None);
        assert_eq!(paths(&root), &paths(&found)[..5]);
        // No instruction file: nothing for the prompt.
        let (_e, empty) = tree(&[("a.py", "x\n")]);
        let none = Instructions::find(&empty, Some(&target(&empty, "a.py")));
        assert!(none.is_empty() && none.skipped.is_empty() && none.section().is_none());
        assert!(Instructions::find(&Workspace::new(vec![]), None).is_empty());
        // A file outside every root, seen alone, gets none of the root's.
        let outside = tempfile::tempdir().unwrap();
        let lone = std::fs::canonicalize(outside.path()).unwrap().join("lone.py");
        std::fs::write(&lone, "x\n").unwrap();
        std::fs::write(outside.path().join("AGENTS.md"), "its folder's\n").unwrap();
        let alone = Instructions::find(&ws.clone().with_file(lone.clone()), Some(&lone));
        assert!(alone.is_empty() && alone.skipped.is_empty(), "{alone:?}");
    }

    #[test]
    fn each_file_and_the_total_are_capped_with_a_visible_note() {
        let line = "- keep every public function documented and tested\n";
        let big = line.repeat(20 * 1024 / line.len());
        let fifteen = line.repeat(15 * 1024 / line.len());
        let (_d, ws) = tree(&[
            ("AGENTS.md", &big),
            ("CLAUDE.md", &fifteen),
            ("a/AGENTS.md", &fifteen),
            ("a/b/AGENTS.md", &"the nearest, after the total\n".repeat(30)),
        ]);
        let found = Instructions::find(&ws, Some(&target(&ws, "a/b/c.py")));
        assert_eq!(paths(&found), ["AGENTS.md", "CLAUDE.md", "a/AGENTS.md"]);
        let [first, second, third] = &found.files[..] else { panic!() };
        assert_eq!((first.cut, first.size), (Some(Cut::File), big.len() as u64));
        let (kept, note) = first.text.split_once("\n\n[agentfix: cut here;").unwrap();
        assert!(kept.len() <= MAX_FILE_BYTES && kept.len() > MAX_FILE_BYTES - line.len(), "{}", kept.len());
        assert!(kept.ends_with("tested"), "cut at a line break");
        assert!(note.contains("the first 16 KB of each instruction file, and this one has 20"), "{note}");
        assert_eq!((second.cut, second.text.len()), (None, fifteen.trim_end().len()));
        // 32 KB in all: the third is cut at what is left, and says why.
        assert_eq!(third.cut, Some(Cut::Total));
        assert!(third.text.ends_with("share 32 KB in all, and the files before this one used the rest]"));
        let carried: usize =
            found.files.iter().map(|f| f.text.split("\n\n[agentfix: cut here;").next().unwrap().len()).sum();
        assert!(carried <= MAX_TOTAL_BYTES, "{carried}");
        assert_eq!(skipped(&found), [("a/b/AGENTS.md", Skip::OverTotal)]);
        // A cut never splits a character.
        assert_eq!(cut_at("ab😀cd", 4), "ab");
        assert_eq!(cut_at("short", 99), "short");
    }

    #[test]
    fn cursor_rules_apply_by_always_apply_or_by_globs_and_lose_their_front_matter() {
        let (_d, ws) = tree(&[
            (
                ".cursor/rules/always.mdc",
                "---\ndescription: \"house style\"\nglobs:\nalwaysApply: true\n---\n\nAlways.\n",
            ),
            (".cursor/rules/py.mdc", "---\nglobs: \"*.py\", docs/*.md\nalwaysApply: false\n---\nPython rule.\n"),
            (".cursor/rules/list.mdc", "---\nglobs:\n  - \"src/**/*.py\"\n  - '*.pyi'\n---\nListed rule.\n"),
            (".cursor/rules/flow.mdc", "---\r\nglobs: [\"*.ts\", \"*.tsx\"]\r\n---\r\nTypeScript rule.\r\n"),
            (".cursor/rules/manual.mdc", "---\ndescription: only when asked\nalwaysApply: false\n---\nManual.\n"),
            (".cursor/rules/bare.mdc", "No front matter at all.\n"),
            (".cursor/rules/open.mdc", "---\nalwaysApply: true\nnever closed\n"),
            (".cursor/rules/empty.mdc", "---\nalwaysApply: true\n---\n\n"),
        ]);
        let found = Instructions::find(&ws, Some(&target(&ws, "src/pkg/mod.py")));
        assert_eq!(paths(&found), [".cursor/rules/always.mdc", ".cursor/rules/list.mdc", ".cursor/rules/py.mdc"]);
        assert_eq!(
            found.files.iter().map(|f| f.text.as_str()).collect::<Vec<_>>(),
            ["Always.", "Listed rule.", "Python rule."]
        );
        let why = skipped(&found);
        assert_eq!(
            why.iter().map(|(p, _)| *p).collect::<Vec<_>>(),
            [
                ".cursor/rules/bare.mdc",
                ".cursor/rules/empty.mdc",
                ".cursor/rules/flow.mdc",
                ".cursor/rules/manual.mdc",
                ".cursor/rules/open.mdc",
            ]
        );
        assert_eq!(why[1].1, Skip::Empty);
        assert_eq!(why[2].1, Skip::NotApplied("a Cursor rule for files matching *.ts, *.tsx".into()));
        for (_, w) in [&why[0], &why[3], &why[4]] {
            assert!(w.to_string().contains("without `alwaysApply: true` or `globs`"), "{w}");
        }
        // `docs/*.md` is anchored at the root; a TypeScript target gets the flow rule.
        let ts = Instructions::find(&ws, Some(&target(&ws, "web/app.tsx")));
        assert_eq!(paths(&ts), [".cursor/rules/always.mdc", ".cursor/rules/flow.mdc"]);
        let doc = Instructions::find(&ws, Some(&target(&ws, "docs/a.md")));
        assert!(paths(&doc).contains(&".cursor/rules/py.mdc"));
        assert!(!paths(&Instructions::find(&ws, Some(&target(&ws, "x/docs/a.md")))).contains(&".cursor/rules/py.mdc"));
        // For the root alone, a glob rule is listed with the files it is for.
        let root = Instructions::find(&ws, None);
        assert_eq!(paths(&root), [".cursor/rules/always.mdc"]);
        assert!(
            root.skipped.iter().any(|s| s.why.to_string() == "a Cursor rule only for files matching *.py, docs/*.md")
        );
    }

    #[cfg(unix)]
    #[test]
    fn links_to_protected_files_or_out_of_the_root_are_never_read() {
        use std::os::unix::fs::symlink;
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("notes.md"), "OUTSIDE TEXT\n").unwrap();
        std::fs::create_dir(outside.path().join("rules")).unwrap();
        std::fs::write(outside.path().join("rules/x.md"), "OUTSIDE RULE\n").unwrap();
        let (d, ws) = tree(&[(".env", "TOKEN=SECRET-VALUE\n"), ("deploy/id_rsa", "KEY\n"), ("a.py", "x\n")]);
        let root = d.path();
        symlink(".env", root.join("AGENTS.md")).unwrap();
        symlink(outside.path().join("notes.md"), root.join("CLAUDE.md")).unwrap();
        std::fs::create_dir_all(root.join(".github")).unwrap();
        symlink("../deploy/id_rsa", root.join(".github/copilot-instructions.md")).unwrap();
        std::fs::create_dir_all(root.join(".cursor")).unwrap();
        symlink(outside.path().join("rules"), root.join(".cursor/rules")).unwrap();
        // A dangling link out: refused, not skipped as missing.
        std::fs::create_dir_all(root.join("sub")).unwrap();
        symlink(outside.path().join("missing.md"), root.join("sub/AGENTS.md")).unwrap();
        let found = Instructions::find(&ws, Some(&target(&ws, "sub/a.py")));
        assert!(found.is_empty(), "{:?}", found.files);
        assert_eq!(
            skipped(&found),
            [
                ("AGENTS.md", Skip::Protected),
                ("CLAUDE.md", Skip::Outside),
                (".github/copilot-instructions.md", Skip::Protected),
                (".cursor/rules", Skip::Outside),
                ("sub/AGENTS.md", Skip::Outside),
            ]
        );
        // `exclude` protects instruction files too: the same check.
        let (_e, ws) = tree(&[("AGENTS.md", "private\n"), ("CLAUDE.md", "shared\n")]);
        let ws = ws.with_protected(&["/AGENTS.md".into()]);
        let found = Instructions::find(&ws, None);
        assert_eq!((paths(&found), skipped(&found)), (vec!["CLAUDE.md"], vec![("AGENTS.md", Skip::Protected)]));
    }

    #[cfg(unix)]
    #[test]
    fn links_inside_are_followed_once_and_binary_files_are_skipped() {
        use std::os::unix::fs::symlink;
        let (d, ws) = tree(&[("AGENTS.md", "shared rules\n"), ("docs/agents.md", "linked\n"), ("a.py", "x\n")]);
        let root = d.path();
        // The common setup: CLAUDE.md is a link to AGENTS.md.
        symlink("AGENTS.md", root.join("CLAUDE.md")).unwrap();
        std::fs::create_dir_all(root.join("sub")).unwrap();
        symlink("../docs/agents.md", root.join("sub/AGENTS.md")).unwrap();
        std::fs::write(root.join("sub/CLAUDE.md"), b"\xff\xfe binary \x00\x01").unwrap();
        // A link to a missing file inside is no file at all.
        std::fs::create_dir_all(root.join(".github")).unwrap();
        symlink("missing.md", root.join(".github/copilot-instructions.md")).unwrap();
        let found = Instructions::find(&ws, Some(&target(&ws, "sub/a.py")));
        assert_eq!(paths(&found), ["AGENTS.md", "sub/AGENTS.md"]);
        assert_eq!(found.files[1].text, "linked");
        assert_eq!(
            skipped(&found),
            [("CLAUDE.md", Skip::Duplicate("AGENTS.md".into())), ("sub/CLAUDE.md", Skip::NotText),]
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_skipped_without_waiting_for_a_writer() {
        let (d, ws) = tree(&[("CLAUDE.md", "after the fifo\n")]);
        let fifo = std::ffi::CString::new(d.path().join("AGENTS.md").to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        std::fs::create_dir(d.path().join("sub")).unwrap();
        let nested = std::ffi::CString::new(d.path().join("sub/CLAUDE.md").to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(nested.as_ptr(), 0o600) }, 0);
        let (tx, rx) = std::sync::mpsc::channel();
        let t = ws.primary_root().join("sub/a.py");
        std::thread::spawn(move || tx.send(Instructions::find(&ws, Some(&t))).unwrap());
        let found = rx.recv_timeout(std::time::Duration::from_secs(10)).expect("no wait on a FIFO");
        assert_eq!(paths(&found), ["CLAUDE.md"]);
        assert_eq!(skipped(&found), [("AGENTS.md", Skip::NotRegular), ("sub/CLAUDE.md", Skip::NotRegular)]);
    }

    #[test]
    fn front_matter_is_a_small_yaml_subset() {
        let (f, body) = front_matter("---\nglobs: a.py,b/*.rs\nalwaysApply: 'TRUE'\n---\nbody\n");
        assert_eq!(
            (f.unwrap(), body),
            (FrontMatter { always_apply: true, globs: vec!["a.py".into(), "b/*.rs".into()] }, "body\n")
        );
        assert_eq!(front_matter("no\n---\n"), (None, "no\n---\n"));
        assert_eq!(front_matter("---\n---\n").0, Some(FrontMatter::default()));
    }
}
