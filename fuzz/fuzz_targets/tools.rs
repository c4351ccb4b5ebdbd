//! Tool input decoding and the tools behind it:
//! `tools::Toolbox::standard(ToolContext::plain(..))` then
//! `ToolSet::call(name, &arbitrary_json)`, a few calls per input over one
//! run's overlay, on a temp workspace made once (files with CRLF, CJK and
//! emoji, an empty file, ignored and hidden files, protected files, symlinks
//! inside, dangling and out of the workspace) and one open editor buffer.
//!
//! Checks:
//! - nothing panics; no call is `fatal` (only `run_command` may end a run);
//! - the disk is never written: the workspace's files are the same after
//!   every input;
//! - no output shows a protected file's or an outside file's secret;
//! - the run's changes (`Overlay::changes`) turn into line hunks that
//!   reproduce the new text.

#![no_main]

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use agentfix::tools::{ToolContext, ToolSet, Toolbox};
use agentfix::workspace::{BufferPin, BufferSource, BufferText, Overlay, Workspace, apply_hunks, hunks};
use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};

mod common;

const SECRET: &str = "S3CRET-d41d8cd98f";
const OUTSIDE: &str = "OUTSIDE-8f00b204e9";

/// (relative path, text) of the files on disk; the first ones may be quoted
/// by the fuzzer (`Val::FileText`), protected ones never.
const FILES: &[(&str, &str)] = &[
    ("a.txt", "alpha\nbeta\ngamma\nbeta\n"),
    ("src/main.rs", "fn main() {\n    println!(\"hi\");\n}\n"),
    ("crlf.txt", "one\r\ntwo\r\nthree\r\n"),
    ("uni.txt", "漢字\n😀 emoji\ne\u{301}\n\u{2028}sep\n"),
    ("empty.txt", ""),
    ("build/out.txt", "ignored\n"),
    (".hidden/h.txt", "hidden\n"),
    ("sub/deep/x.py", "x = 1\nx = 1\n"),
    (".gitignore", "build/\n"),
];
const QUOTABLE: usize = 8;
const PROTECTED: &[(&str, &str)] =
    &[(".env", SECRET), ("certs/server.pem", SECRET), (".ssh/id_rsa", SECRET), ("config/.env.local", SECRET)];

struct Fixture {
    _dir: tempfile::TempDir,
    _outside: tempfile::TempDir,
    root: PathBuf,
    ws: Arc<Workspace>,
    snapshot: Vec<(PathBuf, Option<Vec<u8>>)>,
}

fn snapshot(root: &Path) -> Vec<(PathBuf, Option<Vec<u8>>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&d).unwrap().flatten().map(|e| e.path()).collect();
        entries.sort();
        for p in entries {
            let meta = std::fs::symlink_metadata(&p).unwrap();
            if meta.is_dir() {
                stack.push(p.clone());
                out.push((p, None));
            } else if meta.file_type().is_symlink() {
                out.push((p.clone(), Some(std::fs::read_link(&p).unwrap().into_os_string().into_encoded_bytes())));
            } else {
                out.push((p.clone(), Some(std::fs::read(&p).unwrap())));
            }
        }
    }
    out
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        for (p, text) in FILES.iter().chain(PROTECTED) {
            let path = root.join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        std::fs::write(outside.path().join("secret.txt"), OUTSIDE).unwrap();
        std::os::unix::fs::symlink(root.join("a.txt"), root.join("link.txt")).unwrap();
        std::os::unix::fs::symlink("missing/target.txt", root.join("dangling.txt")).unwrap();
        std::os::unix::fs::symlink(".env", root.join("env_link")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret.txt"), root.join("outside_link.txt")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("outside_dir")).unwrap();
        std::os::unix::fs::symlink("loop_b", root.join("loop_a")).unwrap();
        std::os::unix::fs::symlink("loop_a", root.join("loop_b")).unwrap();
        let ws = Arc::new(Workspace::new(vec![root.clone()]));
        let snapshot = snapshot(&root);
        Fixture { _dir: dir, _outside: outside, root, ws, snapshot }
    })
}

/// One open buffer.
struct Buffers(Vec<(PathBuf, String)>);

impl BufferSource for Buffers {
    fn buffer(&self, path: &Path) -> Option<BufferText> {
        self.0.iter().find(|(p, _)| p == path).map(|(_, t)| BufferText {
            text: t.clone(),
            version: 3,
            pin: BufferPin { generation: 1, seq: 2 },
        })
    }
    fn open_paths(&self) -> Vec<PathBuf> {
        self.0.iter().map(|(p, _)| p.clone()).collect()
    }
}

#[derive(Debug, Arbitrary)]
enum ToolName {
    ReadFile,
    ListFiles,
    Grep,
    EditFile,
    WriteFile,
    RunCommand,
    Any(String),
}

impl ToolName {
    fn name(&self) -> &str {
        match self {
            ToolName::ReadFile => "read_file",
            ToolName::ListFiles => "list_files",
            ToolName::Grep => "grep",
            ToolName::EditFile => "edit_file",
            ToolName::WriteFile => "write_file",
            ToolName::RunCommand => "run_command",
            ToolName::Any(s) => s,
        }
    }
}

#[derive(Debug, Arbitrary)]
enum Field {
    Path,
    StartLine,
    EndLine,
    Pattern,
    Include,
    OldText,
    NewText,
    Content,
    Reason,
    Any(String),
}

impl Field {
    fn name(&self) -> &str {
        match self {
            Field::Path => "path",
            Field::StartLine => "start_line",
            Field::EndLine => "end_line",
            Field::Pattern => "pattern",
            Field::Include => "include",
            Field::OldText => "old_text",
            Field::NewText => "new_text",
            Field::Content => "content",
            Field::Reason => "reason",
            Field::Any(s) => s,
        }
    }
}

#[derive(Debug, Arbitrary)]
enum PathWord {
    File(u8),
    Protected(u8),
    Link,
    Dangling,
    EnvLink,
    OutsideLink,
    OutsideDir,
    OutsideDirFile,
    Loop,
    Sub,
    Dot,
    Empty,
    Slash,
    DotDot,
    Sneaky,
    EtcPasswd,
    Absolute(u8),
    New,
    TrailingSlash,
    Nul,
    Any(String),
}

fn path_text(p: &PathWord, root: &Path) -> String {
    match p {
        PathWord::File(i) => FILES[*i as usize % FILES.len()].0.to_string(),
        PathWord::Protected(i) => PROTECTED[*i as usize % PROTECTED.len()].0.to_string(),
        PathWord::Link => "link.txt".into(),
        PathWord::Dangling => "dangling.txt".into(),
        PathWord::EnvLink => "env_link".into(),
        PathWord::OutsideLink => "outside_link.txt".into(),
        PathWord::OutsideDir => "outside_dir".into(),
        PathWord::OutsideDirFile => "outside_dir/secret.txt".into(),
        PathWord::Loop => "loop_a".into(),
        PathWord::Sub => "sub".into(),
        PathWord::Dot => ".".into(),
        PathWord::Empty => "".into(),
        PathWord::Slash => "/".into(),
        PathWord::DotDot => "../".into(),
        PathWord::Sneaky => "sub/../.env".into(),
        PathWord::EtcPasswd => "/etc/passwd".into(),
        PathWord::Absolute(i) => root.join(FILES[*i as usize % FILES.len()].0).to_string_lossy().into_owned(),
        PathWord::New => "new/dir/file.txt".into(),
        PathWord::TrailingSlash => "a.txt/".into(),
        PathWord::Nul => "a.txt\0".into(),
        PathWord::Any(s) => s.clone(),
    }
}

#[derive(Debug, Arbitrary)]
enum Val {
    Path(PathWord),
    Text(String),
    /// A slice of one of the files' text (so `edit_file` finds matches).
    FileText {
        file: u8,
        start: u8,
        len: u8,
        lf_only: bool,
    },
    Regex(RegexWord),
    Glob(GlobWord),
    Int(i64),
    UInt(u64),
    Float(f64),
    Bool(bool),
    Null,
    Arr(Vec<Val>),
    Obj(Vec<(Field, Val)>),
}

#[derive(Debug, Arbitrary)]
enum RegexWord {
    Word,
    AnyChar,
    Anchored,
    Unicode,
    Bad,
    Empty,
    Crlf,
}

#[derive(Debug, Arbitrary)]
enum GlobWord {
    Star,
    DoubleStar,
    Ext,
    Braces,
    Bad,
    Path,
}

fn val(v: &Val, root: &Path, depth: usize) -> Value {
    if depth > 6 {
        return Value::Null;
    }
    match v {
        Val::Path(p) => Value::String(path_text(p, root)),
        Val::Text(s) => Value::String(s.clone()),
        Val::FileText { file, start, len, lf_only } => {
            let text = FILES[*file as usize % QUOTABLE].1;
            let a = text.floor_char_boundary(*start as usize % (text.len() + 1));
            let b = text.floor_char_boundary((a + *len as usize % 24).min(text.len()));
            let s = &text[a..b.max(a)];
            Value::String(if *lf_only { s.replace("\r\n", "\n") } else { s.to_string() })
        }
        Val::Regex(r) => Value::String(
            match r {
                RegexWord::Word => r"\w+",
                RegexWord::AnyChar => ".",
                RegexWord::Anchored => "^beta$",
                RegexWord::Unicode => r"\p{Han}+|😀",
                RegexWord::Bad => "(unclosed",
                RegexWord::Empty => "",
                RegexWord::Crlf => r"two\r?$",
            }
            .into(),
        ),
        Val::Glob(g) => Value::String(
            match g {
                GlobWord::Star => "*",
                GlobWord::DoubleStar => "**/*.txt",
                GlobWord::Ext => "*.py",
                GlobWord::Braces => "{a,b}.txt",
                GlobWord::Bad => "[",
                GlobWord::Path => "sub/**",
            }
            .into(),
        ),
        Val::Int(i) => Value::from(*i),
        Val::UInt(u) => Value::from(*u),
        Val::Float(f) => serde_json::Number::from_f64(*f).map(Value::Number).unwrap_or(Value::Null),
        Val::Bool(b) => Value::Bool(*b),
        Val::Null => Value::Null,
        Val::Arr(items) => Value::Array(items.iter().map(|i| val(i, root, depth + 1)).collect()),
        Val::Obj(members) => obj(members, root, depth + 1),
    }
}

fn obj(members: &[(Field, Val)], root: &Path, depth: usize) -> Value {
    let mut m = Map::new();
    for (k, v) in members {
        m.insert(k.name().to_string(), val(v, root, depth));
    }
    Value::Object(m)
}

#[derive(Debug, Arbitrary)]
enum In {
    Fields(Vec<(Field, Val)>),
    Value(Val),
    /// JSON text, used when it parses.
    Raw(String),
}

#[derive(Debug, Arbitrary)]
struct Call {
    tool: ToolName,
    input: In,
}

#[derive(Debug, Arbitrary)]
struct Input {
    /// The open buffer: which file (or one only open in the editor), its text.
    buffer: Option<(u8, String)>,
    /// The run's target file.
    target: u8,
    calls: Vec<Call>,
}

fuzz_target!(|input: Input| {
    let f = fixture();
    let mentions_secret = {
        let d = format!("{input:?}");
        d.contains("S3CRET") || d.contains("OUTSIDE-")
    };
    let buffers = Buffers(
        input
            .buffer
            .iter()
            .map(|(i, text)| {
                let rel = if (*i as usize) < FILES.len() { FILES[*i as usize].0 } else { "only_open.txt" };
                (f.root.join(rel), text.clone())
            })
            .collect(),
    );
    let overlay = Arc::new(Overlay::new(f.ws.clone(), Arc::new(buffers)));
    let target = f.root.join(FILES[input.target as usize % FILES.len()].0);
    let toolbox = Toolbox::standard(ToolContext::plain(overlay.clone(), target));
    let rt = common::runtime();
    for call in input.calls.iter().take(6) {
        let value = match &call.input {
            In::Fields(fields) => obj(fields, &f.root, 0),
            In::Value(v) => val(v, &f.root, 0),
            In::Raw(s) => match serde_json::from_str(s) {
                Ok(v) => v,
                Err(_) => continue,
            },
        };
        let out = rt.block_on(toolbox.call(call.tool.name(), &value));
        assert!(!out.fatal, "{} {value}: a fatal tool error: {}", call.tool.name(), out.content);
        if !mentions_secret {
            assert!(
                !out.content.contains(SECRET) && !out.content.contains(OUTSIDE),
                "{} {value} showed a protected or outside file: {}",
                call.tool.name(),
                out.content
            );
        }
    }
    for c in overlay.changes() {
        let original = c.original.clone().unwrap_or_default();
        assert!(f.ws.contains(&c.path), "a change outside the workspace: {}", c.path.display());
        assert!(!f.ws.is_protected(&c.path), "a change of a protected file: {}", c.path.display());
        let hs = hunks(&original, &c.new_text);
        assert_eq!(apply_hunks(&original, &hs), c.new_text);
    }
    assert!(snapshot(&f.root) == f.snapshot, "the tools changed the disk");
});
