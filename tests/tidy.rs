//! Tidy checks over the source tree, in the manner of rust-analyzer's
//! `tidy.rs`: every module file opens with a `//!` doc, and no module imports
//! what ARCHITECTURE.md's code map ("may use" column) and the invariants say
//! it must not. The files are read with std only; the check is a token scan
//! of the text outside comments and string literals, so `use` trees over
//! several lines and `crate::x::y` paths written inline are both seen.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

/// One layering rule. A path used in a file under `files` (and not under
/// `except_files`) is checked against `forbidden` and `allowed`: the longest
/// prefix that matches it, segment by segment, decides. So `forbidden:
/// ["crate"]` with `allowed: ["crate::model"]` reads "nothing from this crate
/// but `model`", and an allowed `crate::downstream` can still forbid
/// `crate::downstream::Downstream`.
struct Rule {
    files: &'static str,
    except_files: &'static [&'static str],
    forbidden: &'static [&'static str],
    allowed: &'static [&'static str],
    why: &'static str,
}

const LSP_TYPES: &[&str] = &["tower_lsp_server", "lsp_types", "ls_types"];

/// The rule table, from ARCHITECTURE.md ("Code map", "may use" column, and
/// the `lsp` row: "the only module that knows tower-lsp-server / LSP types")
/// and the shared style notes ("Dependency direction"). Keep the two
/// in step: a change of layering is a change of ARCHITECTURE.md first.
const RULES: &[Rule] = &[
    Rule {
        files: "src/",
        except_files: &["src/lsp/", "src/downstream/"],
        forbidden: LSP_TYPES,
        allowed: &[],
        why: "only `lsp` knows tower-lsp-server / LSP types (and `downstream`, inside, as a client)",
    },
    Rule {
        files: "src/",
        except_files: &["src/lsp/", "src/main.rs"],
        forbidden: &["crate::lsp"],
        allowed: &[],
        why: "only `main.rs` uses `lsp` (`cli` may use everything above but `lsp`)",
    },
    Rule {
        files: "src/",
        except_files: &["src/cli/", "src/main.rs"],
        forbidden: &["crate::cli"],
        allowed: &[],
        why: "only `main.rs` uses `cli`",
    },
    Rule {
        files: "src/",
        except_files: &["src/acp/", "src/main.rs"],
        forbidden: &["crate::acp"],
        allowed: &[],
        why: "only `main.rs` uses `acp` (`acp` may use everything above but `lsp` and `cli`)",
    },
    Rule {
        files: "src/",
        except_files: &["src/acp/"],
        forbidden: &["agent_client_protocol"],
        allowed: &[],
        why: "only `acp` knows the ACP SDK (`agent-client-protocol`)",
    },
    Rule {
        files: "src/",
        except_files: &["src/mcp/"],
        forbidden: &["rmcp"],
        allowed: &[],
        why: "only `mcp` knows the MCP SDK (`rmcp`); it hands out `tools::ExternalTool`s and its own `ServerTool`",
    },
    Rule {
        files: "src/",
        except_files: &["src/lsp/transport.rs", "src/downstream/client.rs"],
        forbidden: &["agentfix_lsp_framing"],
        allowed: &[],
        why: "LSP framing is `lsp::transport`'s (the server) and `downstream::client`'s (the client), both through the one framer",
    },
    Rule {
        files: "src/secrets.rs",
        except_files: &[],
        forbidden: &["crate"],
        allowed: &["crate::secrets"],
        why: "`secrets` may use nothing here",
    },
    Rule {
        files: "src/config/",
        except_files: &[],
        forbidden: &["crate"],
        allowed: &["crate::config", "crate::secrets::Redactor", "crate::secrets::PROVIDER_KEY_VARS", "crate::pricing"],
        why: "`config` may use `secrets` (the key's `Redactor`, the provider keys no MCP header may name) and `pricing` (the `prices` setting)",
    },
    Rule {
        files: "src/follow_up/",
        except_files: &[],
        forbidden: &["crate"],
        allowed: &["crate::follow_up", "crate::model", "crate::position", "crate::workspace"],
        why: "`follow_up` may use `model`, `position` and `workspace` (the overlay it reads the files through)",
    },
    Rule {
        files: "src/pricing.rs",
        except_files: &[],
        forbidden: &["crate"],
        allowed: &["crate::pricing"],
        why: "`pricing` may use nothing here",
    },
    Rule {
        files: "src/model.rs",
        except_files: &[],
        forbidden: &["crate"],
        allowed: &["crate::model", "crate::pricing::TokenCounts"],
        why: "`model` may use `pricing::TokenCounts` (how its usage is billed)",
    },
    Rule {
        files: "src/position.rs",
        except_files: &[],
        forbidden: &["crate"],
        allowed: &["crate::position"],
        why: "`position` may use nothing here",
    },
    Rule {
        files: "src/diagnostic.rs",
        except_files: &[],
        forbidden: &["crate"],
        allowed: &["crate::diagnostic", "crate::position"],
        why: "`diagnostic` may use `position`",
    },
    Rule {
        files: "src/documents/",
        except_files: &[],
        forbidden: &["crate"],
        // The trait it implements, with the types in its signature.
        allowed: &[
            "crate::documents",
            "crate::position",
            "crate::workspace::BufferSource",
            "crate::workspace::BufferText",
            "crate::workspace::BufferPin",
            "crate::workspace::Edit",
            "crate::workspace::sequential_hunks",
        ],
        why: "`documents` may use `position`, `workspace::BufferSource` (the trait it implements) and `workspace::Edit`",
    },
    Rule {
        files: "src/workspace/",
        except_files: &[],
        forbidden: &["crate"],
        allowed: &["crate::workspace"],
        why: "`workspace` may use nothing here",
    },
    Rule {
        files: "src/instructions.rs",
        except_files: &[],
        forbidden: &["crate"],
        allowed: &["crate::instructions", "crate::workspace"],
        why: "`instructions` may use `workspace` (its one gate for paths, its one way of reading files)",
    },
    Rule {
        files: "src/downstream/",
        except_files: &[],
        forbidden: &["crate"],
        allowed: &[
            "crate::downstream",
            "crate::config",
            "crate::secrets::credential_vars",
            "crate::diagnostic",
            "crate::position",
        ],
        why: "`downstream` may use `config`, `secrets::credential_vars`, `diagnostic` and `position`",
    },
    Rule {
        files: "src/sandbox/",
        except_files: &[],
        forbidden: &["crate"],
        allowed: &["crate::sandbox"],
        why: "`sandbox` may use `libc`, `landlock`, nothing here",
    },
    Rule {
        files: "src/tools/",
        except_files: &[],
        forbidden: &["crate", "crate::downstream::Downstream", "crate::downstream::client", "ropey", "reqwest"],
        allowed: &[
            "crate::tools",
            "crate::workspace",
            "crate::model",
            "crate::diagnostic",
            "crate::position",
            "crate::downstream",
            "crate::sandbox",
            "crate::secrets",
        ],
        why: "`tools` may use `workspace`, `model`, `diagnostic`, `position`, `downstream` (the \
              `SymbolSource` trait, not the servers), `sandbox` and `secrets` (for `run_command`)",
    },
    Rule {
        files: "src/mcp/",
        except_files: &[],
        forbidden: &["crate"],
        allowed: &[
            "crate::mcp",
            "crate::config::mcp::McpConfig",
            "crate::config::mcp::McpServerConfig",
            "crate::config::mcp::McpTransport",
            "crate::config::mcp::HttpServer",
            "crate::secrets::allowed_env",
            "crate::secrets::Redactor",
            "crate::model",
            "crate::tools::Approval",
            "crate::tools::Approver",
            "crate::tools::ExternalTool",
            "crate::tools::ToolError",
            "crate::tools::input_schema",
        ],
        why: "`mcp` may use `config::mcp::{McpConfig, McpServerConfig, McpTransport, HttpServer}`, \
              `secrets::{allowed_env, Redactor}`, `model` and \
              `tools::{Approval, Approver, ExternalTool, ToolError, input_schema}`",
    },
    Rule {
        files: "src/providers/",
        except_files: &[],
        forbidden: &["crate", "ropey"],
        allowed: &["crate::providers", "crate::model", "crate::config", "crate::secrets::Redactor"],
        why: "`providers` may use `model`, `config`, `secrets::Redactor`, reqwest: never tools, documents or the workspace",
    },
    Rule {
        files: "src/agent/",
        except_files: &[],
        forbidden: &["crate", "ropey", "reqwest"],
        // `ToolOutput` is what `ToolSet::call` returns.
        allowed: &[
            "crate::agent",
            "crate::model",
            "crate::providers::ModelClient",
            "crate::tools::ToolSet",
            "crate::tools::ToolOutput",
            "crate::config::limits",
            "crate::pricing",
        ],
        why: "`agent` may use `model`, `config::limits` (`Limits`, `ContextEditing`, `CostLimit`), `pricing`, `providers::ModelClient` and `tools::ToolSet` (traits only)",
    },
    Rule {
        files: "src/transcript.rs",
        except_files: &[],
        forbidden: &["crate"],
        // `ToolOutput` is part of `agent::RunEvent`.
        allowed: &[
            "crate::transcript",
            "crate::agent",
            "crate::model",
            "crate::config",
            "crate::secrets",
            "crate::workspace",
            "crate::tools::ToolOutput",
        ],
        why: "`transcript` may use `agent`, `model`, `config`, `secrets`, `workspace`, never `fix` (which uses it)",
    },
    Rule {
        files: "src/cli/failures.rs",
        except_files: &[],
        forbidden: &["crate"],
        allowed: &["crate::cli::failures", "crate::diagnostic", "crate::position", "crate::workspace::normalize"],
        why: "`cli::failures` may use `diagnostic`, `position` and `workspace::normalize`",
    },
    Rule {
        files: "src/cli/undo.rs",
        except_files: &[],
        forbidden: &["crate"],
        allowed: &["crate::cli::undo", "crate::workspace::FileChange", "crate::workspace::real_path"],
        why: "`cli::undo` may use `workspace::FileChange` and `workspace::real_path` (where a write lands)",
    },
    Rule {
        files: "src/fix/",
        except_files: &[],
        forbidden: &["crate::replay"],
        allowed: &[],
        why: "`fix` may use everything below it and knows no front end: `replay` is above it (`lsp` and `cli` too, by the rule of the top)",
    },
];

/// Uses the code map does not allow, found when this test was written and
/// left for the owners of those files (each is documented elsewhere in
/// ARCHITECTURE.md, in the invariants, but not in the code map). A listed
/// use that is no longer there fails the test too, so the list only shrinks.
const KNOWN_VIOLATIONS: &[(&str, &str)] = &[];

#[derive(Debug, Clone, PartialEq, Eq)]
struct Violation {
    file: String,
    line: usize,
    /// The path used, empty for a missing module doc.
    path: String,
    message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.message)
    }
}

/// Every check for one file; `file` is its path from the repository root
/// with `/` separators (`src/tools/mod.rs`).
fn check_file(file: &str, text: &str, rules: &[Rule]) -> Vec<Violation> {
    let mut found = Vec::new();
    if !opens_with_module_doc(text) {
        found.push(Violation {
            file: file.to_string(),
            line: 1,
            path: String::new(),
            message: "a module file opens with a `//!` doc comment saying what it is for".into(),
        });
    }
    let code = blank_comments_and_strings(text);
    for (path, line) in paths(&code) {
        for rule in rules {
            if applies(rule, file) && is_forbidden(rule, &path) {
                found.push(Violation {
                    file: file.to_string(),
                    line,
                    path: path.clone(),
                    message: format!("`{path}` is not allowed here: {}", rule.why),
                });
            }
        }
    }
    found
}

fn opens_with_module_doc(text: &str) -> bool {
    text.lines().find(|l| !l.trim().is_empty()).is_some_and(|l| l.trim_start().starts_with("//!"))
}

fn applies(rule: &Rule, file: &str) -> bool {
    file.starts_with(rule.files) && !rule.except_files.iter().any(|e| file.starts_with(e))
}

/// The longest matching prefix decides; a tie goes to `allowed`.
fn is_forbidden(rule: &Rule, path: &str) -> bool {
    let longest =
        |prefixes: &[&str]| prefixes.iter().filter(|p| is_path_prefix(p, path)).map(|p| p.split("::").count()).max();
    match (longest(rule.forbidden), longest(rule.allowed)) {
        (Some(f), Some(a)) => f > a,
        (Some(_), None) => true,
        _ => false,
    }
}

fn is_path_prefix(prefix: &str, path: &str) -> bool {
    let mut p = path.split("::");
    prefix.split("::").all(|seg| p.next() == Some(seg))
}

/// The text with comments and the contents of string and char literals
/// replaced by spaces, line breaks kept, so positions keep their line.
fn blank_comments_and_strings(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, c: char| out.push(if c == '\n' { '\n' } else { ' ' });
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        let prev_ident = i > 0 && is_ident_char(b[i - 1]);
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                blank(&mut out, b[i]);
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, b[i]);
                    i += 1;
                }
            }
        } else if !prev_ident && let Some(len) = raw_string_len(&b[i..]) {
            for &ch in &b[i..i + len] {
                blank(&mut out, ch);
            }
            i += len;
        } else if c == '"' || (c == 'b' && next == Some('"') && !prev_ident) {
            if c == 'b' {
                out.push(' ');
                i += 1;
            }
            out.push(' ');
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' && i + 1 < b.len() {
                    blank(&mut out, b[i]);
                    i += 1;
                }
                blank(&mut out, b[i]);
                i += 1;
            }
            if i < b.len() {
                out.push(' ');
                i += 1;
            }
        } else if c == '\''
            && let Some(len) = char_literal_len(&b[i..])
        {
            for &ch in &b[i..i + len] {
                blank(&mut out, ch);
            }
            i += len;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// `r"…"`, `r#"…"#`, `br##"…"##`: the literal's length in chars.
fn raw_string_len(s: &[char]) -> Option<usize> {
    let mut i = match s {
        ['b', 'r', ..] => 2,
        ['r', ..] => 1,
        _ => return None,
    };
    let hashes = s[i..].iter().take_while(|&&c| c == '#').count();
    i += hashes;
    if s.get(i) != Some(&'"') {
        return None;
    }
    i += 1;
    while i < s.len() {
        if s[i] == '"' && s[i + 1..].iter().take(hashes).filter(|&&c| c == '#').count() == hashes {
            return Some(i + 1 + hashes);
        }
        i += 1;
    }
    Some(s.len())
}

/// `'a'`, `'\n'`, `'\u{1F600}'` (not a lifetime `'a`): the length in chars.
fn char_literal_len(s: &[char]) -> Option<usize> {
    match s {
        ['\'', '\\', ..] => s[2..].iter().position(|&c| c == '\'').map(|p| p + 3),
        ['\'', _, '\'', ..] => Some(3),
        _ => None,
    }
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Every path in the code, with `use` trees expanded (`a::{b, c::{d}}` gives
/// `a::b` and `a::c::d`) and whitespace around `::` allowed, each with the
/// line of its last segment. A path starts at an identifier not preceded by
/// `::`, so `x::crate::y` is never read as `crate::y`.
fn paths(code: &str) -> Vec<(String, usize)> {
    let toks = tokens(code);
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let starts_path = matches!(toks[i].0, Tok::Ident(_))
            && toks.get(i + 1).is_some_and(|t| t.0 == Tok::PathSep)
            && (i == 0 || toks[i - 1].0 != Tok::PathSep);
        if starts_path {
            i = use_tree(&toks, i, String::new(), &mut out);
        } else {
            i += 1;
        }
    }
    out
}

/// Reads a path (or use tree) starting at `toks[i]`, below `prefix`; returns
/// the index after it.
fn use_tree(toks: &[(Tok, usize)], mut i: usize, prefix: String, out: &mut Vec<(String, usize)>) -> usize {
    let mut path = prefix;
    let mut line = toks.get(i).map_or(0, |t| t.1);
    loop {
        match toks.get(i) {
            Some((Tok::Ident(name), l)) => {
                if !path.is_empty() {
                    path.push_str("::");
                }
                path.push_str(name);
                line = *l;
                i += 1;
            }
            Some((Tok::Open, _)) => {
                i += 1;
                while let Some((t, _)) = toks.get(i) {
                    match t {
                        Tok::Close => return i + 1,
                        Tok::Comma => i += 1,
                        _ => {
                            let before = i;
                            i = use_tree(toks, i, path.clone(), out);
                            if i == before {
                                i += 1;
                            }
                        }
                    }
                }
                return i;
            }
            _ => break,
        }
        if toks.get(i).is_some_and(|t| t.0 == Tok::PathSep) {
            i += 1;
        } else {
            break;
        }
    }
    // `x as y` names `x`; `a::{self}` names `a`.
    if toks.get(i).is_some_and(|t| t.0 == Tok::Ident("as".into())) {
        i += 2;
    }
    let path = path.strip_suffix("::self").map(str::to_string).unwrap_or(path);
    if !path.is_empty() {
        out.push((path, line));
    }
    i
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(String),
    PathSep,
    Open,
    Close,
    Comma,
    Other,
}

fn tokens(code: &str) -> Vec<(Tok, usize)> {
    let chars: Vec<char> = code.chars().collect();
    let mut toks = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if is_ident_char(c) {
            let start = i;
            while i < chars.len() && is_ident_char(chars[i]) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let first = word.chars().next().unwrap_or('0');
            toks.push((if first.is_ascii_digit() { Tok::Other } else { Tok::Ident(word) }, line));
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            toks.push((Tok::PathSep, line));
            i += 2;
        } else {
            toks.push((
                match c {
                    '{' => Tok::Open,
                    '}' => Tok::Close,
                    ',' => Tok::Comma,
                    _ => Tok::Other,
                },
                line,
            ));
            i += 1;
        }
    }
    toks
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn source_tree_is_tidy() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    assert!(files.len() > 20, "expected the whole source tree, found {} files", files.len());
    // The workspace's other crates: their files open with `//!` too (no
    // rule of the table applies to them).
    rust_files(&root.join("crates"), &mut files);
    assert!(files.iter().any(|f| f.ends_with("crates/lsp-framing/src/lib.rs")), "the crates/ tree is read");

    let mut violations = Vec::new();
    for path in &files {
        let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let rel = path.strip_prefix(root).expect("under the manifest dir");
        let rel = rel.to_string_lossy().replace('\\', "/");
        violations.extend(check_file(&rel, &text, RULES));
    }

    let is_known = |v: &Violation, (file, path): &(&str, &str)| v.file == *file && is_path_prefix(path, &v.path);
    let stale: Vec<_> = KNOWN_VIOLATIONS.iter().filter(|k| !violations.iter().any(|v| is_known(v, k))).collect();
    let new: Vec<String> =
        violations.iter().filter(|v| !KNOWN_VIOLATIONS.iter().any(|k| is_known(v, k))).map(|v| v.to_string()).collect();
    assert!(new.is_empty(), "tidy: see ARCHITECTURE.md (code map)\n{}", new.join("\n"));
    assert!(stale.is_empty(), "tidy: these known violations are gone, remove them from KNOWN_VIOLATIONS: {stale:?}");
}

/// The checker itself, on sources that break each kind of rule, so the test
/// above cannot pass by finding nothing.
#[test]
fn checker_reports_each_kind_of_violation() {
    let lines = |file: &str, text: &str| -> Vec<(usize, String)> {
        check_file(file, text, RULES).into_iter().map(|v| (v.line, v.path)).collect()
    };

    // No module doc: an item doc or a plain comment is not one.
    assert_eq!(lines("src/tools/x.rs", "/// An item.\nfn f() {}\n"), vec![(1, String::new())]);
    assert_eq!(lines("src/lib.rs", "// lib\npub mod a;\n"), vec![(1, String::new())]);
    assert!(lines("src/lib.rs", "\n//! The crate.\npub mod a;\n").is_empty());

    // LSP types outside `lsp`, in a `use` and inline; allowed in `lsp`.
    let src = "//! Doc.\nuse tower_lsp_server::ls_types::Position;\nfn f(_: lsp_types::Range) {}\n";
    assert_eq!(
        lines("src/tools/hover.rs", src),
        vec![(2, "tower_lsp_server::ls_types::Position".into()), (3, "lsp_types::Range".into())]
    );
    assert!(lines("src/lsp/convert.rs", src).is_empty());
    assert!(lines("src/downstream/decode.rs", src).is_empty(), "the LSP client may speak LSP inside");
    // `self` and renames name what they import.
    let src = "//! Doc.\nuse tower_lsp_server::ls_types::{self as lsp, Position as P};\n";
    assert_eq!(
        lines("src/tools/hover.rs", src),
        vec![(2, "tower_lsp_server::ls_types".into()), (2, "tower_lsp_server::ls_types::Position".into())]
    );

    // A `use` tree over several lines, with a nested group: each leaf on its line.
    let src = "//! Doc.\nuse crate::{\n    model::Message,\n    documents::{\n        Documents,\n    },\n    tools::ToolSet,\n};\n";
    assert_eq!(lines("src/agent/mod.rs", src), vec![(5, "crate::documents::Documents".into())]);

    // Inline paths, with whitespace around `::`; trait-only rules.
    let src =
        "//! Doc.\nfn f() { let _ = crate::workspace::Overlay::new(); let _ = crate::tools\n    ::Toolbox::new(); }\n";
    assert_eq!(
        lines("src/agent/mod.rs", src),
        vec![(2, "crate::workspace::Overlay::new".into()), (3, "crate::tools::Toolbox::new".into())]
    );
    assert!(lines("src/agent/mod.rs", "//! Doc.\nuse crate::tools::{ToolOutput, ToolSet};\n").is_empty());

    // External crates a layer must not use.
    assert_eq!(
        lines("src/agent/mod.rs", "//! Doc.\nuse ropey::Rope;\nuse reqwest::Client;\n"),
        vec![(2, "ropey::Rope".into()), (3, "reqwest::Client".into())]
    );
    assert_eq!(
        lines("src/providers/http.rs", "//! Doc.\nuse ropey::Rope;\nuse reqwest::Client;\n"),
        vec![(2, "ropey::Rope".into())]
    );
    assert_eq!(lines("src/tools/grep.rs", "//! Doc.\nuse reqwest::Client;\n"), vec![(2, "reqwest::Client".into())]);
    // The transcript is below `fix`, which uses it.
    assert_eq!(
        lines("src/transcript.rs", "//! Doc.\nuse crate::fix::Target;\n"),
        vec![(2, "crate::fix::Target".into())]
    );
    assert_eq!(
        lines("src/fix/run.rs", "//! Doc.\nuse crate::replay::replay;\n"),
        vec![(2, "crate::replay::replay".into())]
    );

    // Layers: the lower ones use nothing above them; `lsp` and `cli` only from the top.
    assert_eq!(
        lines("src/model.rs", "//! Doc.\nuse crate::config::Config;\n"),
        vec![(2, "crate::config::Config".into())]
    );
    assert_eq!(
        lines("src/tools/grep.rs", "//! Doc.\nuse crate::providers::ModelClient;\n"),
        vec![(2, "crate::providers::ModelClient".into())]
    );
    assert_eq!(
        lines("src/providers/mod.rs", "//! Doc.\nuse crate::tools::Toolbox;\n"),
        vec![(2, "crate::tools::Toolbox".into())]
    );
    assert_eq!(
        lines("src/tools/hover.rs", "//! Doc.\nuse crate::downstream::Downstream;\n"),
        vec![(2, "crate::downstream::Downstream".into())]
    );
    assert!(lines("src/tools/hover.rs", "//! Doc.\nuse crate::downstream::SymbolSource;\n").is_empty());
    assert_eq!(
        lines("src/cli/mod.rs", "//! Doc.\nuse crate::lsp::serve_stdio;\n"),
        vec![(2, "crate::lsp::serve_stdio".into())]
    );
    assert_eq!(
        lines("src/fix/mod.rs", "//! Doc.\nuse crate::cli::FixArgs;\n"),
        vec![(2, "crate::cli::FixArgs".into())]
    );
    assert_eq!(
        lines("src/fix/setup.rs", "//! Doc.\nuse crate::lsp::Session;\n"),
        vec![(2, "crate::lsp::Session".into())]
    );
    assert!(lines("src/lsp/run.rs", "//! Doc.\nuse crate::fix;\n").is_empty());

    // Comments, strings and other paths are not code.
    let src = "//! Doc: `crate::lsp::x`.\n// use ropey::Rope;\n/* crate::lsp /* nested */ ropey::x */\nconst S: &str = \"crate::lsp::x\";\nconst R: &str = r#\"ropey::Rope \" \"#;\nconst C: char = '\"';\nfn f<'a>(_: &'a str) { x::crate::lsp::y(); }\n";
    assert!(lines("src/agent/mod.rs", src).is_empty(), "{:?}", lines("src/agent/mod.rs", src));
}

/// The GitHub anchor of a Markdown heading's text.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == '_' || *c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown text's headings (outside code fences).
fn anchors(text: &str) -> Vec<String> {
    let mut fence = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fence = !fence;
        } else if !fence && line.starts_with('#') && line.trim_start_matches('#').starts_with(' ') {
            out.push(slug(line.trim_start_matches('#')));
        }
    }
    out
}

/// The Markdown files of the repository (not under `target/`, `node_modules/` or fuzz corpora).
fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let path = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if !["target", "node_modules", ".git", "corpus", "artifacts"].contains(&name.as_str()) {
                markdown_files(&path, out);
            }
        } else if name.ends_with(".md") {
            out.push(path);
        }
    }
}

#[test]
fn every_relative_link_and_anchor_of_the_docs_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    markdown_files(root, &mut files);
    assert!(files.iter().any(|f| f.ends_with("docs/security.md")), "{files:?}");
    let link = regex_lite_links;
    let mut broken = Vec::new();
    for file in &files {
        let text = fs::read_to_string(file).unwrap();
        for target in link(&text) {
            if target.starts_with("http") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = target.split_once('#').unwrap_or((target.as_str(), ""));
            let dest = if path.is_empty() { file.clone() } else { file.parent().unwrap().join(path) };
            let shown = format!("{}: {target}", file.strip_prefix(root).unwrap().display());
            if !dest.exists() {
                broken.push(format!("{shown} (no such file)"));
            } else if !anchor.is_empty()
                && dest.extension().is_some_and(|e| e == "md")
                && !anchors(&fs::read_to_string(&dest).unwrap()).iter().any(|a| a == anchor)
            {
                broken.push(format!("{shown} (no such heading)"));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The targets of the inline links `[text](target)` of a Markdown text.
fn regex_lite_links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        let Some(end) = rest.find(')') else { break };
        let target = &rest[..end];
        if !target.is_empty() && !target.contains(char::is_whitespace) {
            out.push(target.to_string());
        }
        rest = &rest[end..];
    }
    out
}

#[test]
fn the_link_check_finds_a_broken_anchor() {
    assert_eq!(
        anchors("# The `agentfix.fix` contract\n```\n# not a heading\n```\n## Security model\n"),
        ["the-agentfixfix-contract", "security-model"]
    );
    assert_eq!(regex_lite_links("see [a](docs/x.md#y) and [b](#z), not [c](a b)"), ["docs/x.md#y", "#z"]);
}

#[test]
fn every_test_a_doc_cites_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    markdown_files(root, &mut files);
    let mut missing = Vec::new();
    let mut checked = 0;
    for doc in &files {
        let text = fs::read_to_string(doc).unwrap();
        for (file, name) in cited_tests(&text) {
            checked += 1;
            let shown = format!("{}: `{file}::{name}`", doc.strip_prefix(root).unwrap().display());
            match fs::read_to_string(root.join(&file)) {
                Err(_) => missing.push(format!("{shown} (no such file)")),
                Ok(src) if !src.contains(&format!("fn {name}(")) && !src.contains(&format!("fn {name}<")) => {
                    missing.push(format!("{shown} (no such function)"))
                }
                Ok(_) => {}
            }
        }
    }
    // The fault matrix alone cites well over a hundred.
    assert!(checked > 100, "only {checked} citations found: is the citation format still `path.rs::name`?");
    assert!(missing.is_empty(), "docs cite tests that do not exist:\n{}", missing.join("\n"));
}

/// Where the Rust sources a doc may cite live.
const SOURCE_DIRS: [&str; 5] = ["tests/", "src/", "benches/", "examples/", "crates/"];

/// The `path.rs::name` citations of a text (in backticks), e.g. `` `tests/lsp.rs::a_test` ``.
/// A citation whose name is not one (`src/x.rs::*`, `tests/a.rs::a…`) is
/// kept with its name as written, so that it is reported: it names no test
/// anyone could check.
fn cited_tests(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for part in text.split('`').skip(1).step_by(2) {
        let Some((file, name)) = part.split_once(".rs::") else { continue };
        let ok = |s: &str, extra: &str| {
            !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || extra.contains(c))
        };
        if SOURCE_DIRS.iter().any(|p| file.starts_with(p)) && ok(file, "/-") && !name.contains(' ') {
            out.push((format!("{file}.rs"), name.to_string()));
        }
    }
    out
}

/// The paths of Rust sources a text names in backticks (`tests/common/editor.rs`,
/// `src/lsp/transport.rs::x`), without what follows the path.
fn cited_sources(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for part in text.split('`').skip(1).step_by(2) {
        let path = part.split("::").next().unwrap_or_default();
        let plain = path.chars().all(|c| c.is_ascii_alphanumeric() || "_/-.".contains(c));
        if SOURCE_DIRS.iter().any(|p| path.starts_with(p)) && path.ends_with(".rs") && plain {
            out.push(path.to_string());
        }
    }
    out
}

#[test]
fn every_source_file_a_doc_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    markdown_files(root, &mut files);
    let mut missing = Vec::new();
    for doc in &files {
        for path in cited_sources(&fs::read_to_string(doc).unwrap()) {
            if !root.join(&path).is_file() {
                missing.push(format!("{}: `{path}`", doc.strip_prefix(root).unwrap().display()));
            }
        }
    }
    assert!(missing.is_empty(), "docs name source files that do not exist:\n{}", missing.join("\n"));
}

#[test]
fn cited_sources_are_paths_in_backticks() {
    let text = "`tests/common/editor.rs`, `src/lsp/x.rs::y`, `crates/a-b/src/lib.rs`, `src/x.rs and more`, `a.rs`";
    assert_eq!(cited_sources(text), ["tests/common/editor.rs", "src/lsp/x.rs", "crates/a-b/src/lib.rs"]);
}

/// The text files of the repository a checkout holds (not `target/`, `.git/`,
/// `node_modules/` or fuzz outputs).
fn repository_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let path = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        let skipped = ["target", "node_modules", ".git", "corpus", "artifacts", "coverage", "Cargo.lock"];
        if skipped.contains(&name.as_str()) || name.starts_with('.') && name != ".ci" {
            continue;
        }
        if path.is_dir() {
            repository_files(&path, out);
        } else {
            out.push(path);
        }
    }
}

#[test]
fn no_file_names_the_machine_it_was_written_on() {
    // The checkout's own absolute path: what a path copied from one
    // machine's build output or shell looks like. (Not its parent or
    // `$HOME`: tests use paths such as `/home/me/ws` or `/root/.cargo` as
    // data, which one machine or another has.)
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let needles = [root.display().to_string()];
    let mut files = Vec::new();
    repository_files(root, &mut files);
    assert!(files.iter().any(|f| f.ends_with("src/main.rs")), "{files:?}");
    let mut found = Vec::new();
    for file in &files {
        let Ok(text) = fs::read_to_string(file) else { continue }; // binary
        for needle in &needles {
            if let Some(line) = text.lines().position(|l| l.contains(needle.as_str())) {
                found.push(format!("{}:{}: {needle}", file.strip_prefix(root).unwrap().display(), line + 1));
            }
        }
    }
    assert!(found.is_empty(), "absolute paths of this machine in the repository:\n{}", found.join("\n"));
}

#[test]
fn citations_are_read_from_backticks() {
    let text = "see `tests/lsp.rs::a_b`, `src/x/y.rs::c` and `tests/a.rs::…_the_rest`, not `foo::bar`";
    let cited = |file: &str, name: &str| (file.to_string(), name.to_string());
    assert_eq!(
        cited_tests(text),
        [cited("tests/lsp.rs", "a_b"), cited("src/x/y.rs", "c"), cited("tests/a.rs", "…_the_rest")]
    );
    // A wildcard is cited as written, and reported as no such function.
    assert_eq!(cited_tests("`src/lsp/proposal.rs::*`"), [cited("src/lsp/proposal.rs", "*")]);
}

/// The most lines a function may span, its signature and closing brace
/// included.
const MAX_FUNCTION_LINES: usize = 100;

/// Each function of `text` (comments and strings blanked) as its name, first
/// line (1-based) and the lines it spans; functions without a body are left
/// out.
fn function_lengths(text: &str) -> Vec<(String, usize, usize)> {
    let code: Vec<char> = blank_comments_and_strings(text).chars().collect();
    let line_at = |i: usize| code[..i].iter().filter(|c| **c == '\n').count() + 1;
    let mut out = Vec::new();
    let mut i = 0;
    while i + 3 < code.len() {
        let starts = code[i] == 'f'
            && code[i + 1] == 'n'
            && code[i + 2].is_whitespace()
            && (i == 0 || !is_ident_char(code[i - 1]));
        if !starts {
            i += 1;
            continue;
        }
        let mut j = i + 2;
        while j < code.len() && code[j].is_whitespace() {
            j += 1;
        }
        let name: String = code[j..].iter().take_while(|c| is_ident_char(**c)).collect();
        // The body starts at the first `{` outside parentheses and brackets
        // (`[u8; 4]` has a `;`); a `;` there ends a bodiless declaration.
        let mut depth = 0i32;
        let mut body = None;
        while j < code.len() {
            match code[j] {
                '(' | '[' => depth += 1,
                ')' | ']' => depth -= 1,
                '{' if depth == 0 => {
                    body = Some(j);
                    break;
                }
                ';' if depth == 0 => break,
                _ => {}
            }
            j += 1;
        }
        let Some(open) = body else {
            i = j;
            continue;
        };
        let mut braces = 0i32;
        let mut k = open;
        while k < code.len() {
            match code[k] {
                '{' => braces += 1,
                '}' => {
                    braces -= 1;
                    if braces == 0 {
                        break;
                    }
                }
                _ => {}
            }
            k += 1;
        }
        let first = line_at(i);
        out.push((name, first, line_at(k.min(code.len() - 1)) - first + 1));
        // Functions nested in this one are measured too.
        i = open + 1;
    }
    out
}

#[test]
fn no_function_is_over_100_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "crates", "tests", "benches", "examples", "fuzz/fuzz_targets"] {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(files.len() > 60, "expected every Rust file, found {}", files.len());
    let long: Vec<String> = files
        .iter()
        .flat_map(|path| {
            let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
            let rel = path.strip_prefix(root).expect("under the manifest dir").display().to_string();
            function_lengths(&text)
                .into_iter()
                .filter(|(_, _, lines)| *lines > MAX_FUNCTION_LINES)
                .map(move |(name, line, lines)| format!("{rel}:{line}: fn {name} spans {lines} lines"))
        })
        .collect();
    assert!(
        long.is_empty(),
        "functions over {MAX_FUNCTION_LINES} lines; cut them into named parts:\n{}",
        long.join("\n")
    );
}

#[test]
fn function_lengths_count_bodies_not_declarations() {
    let src = "trait T {\n    fn f(&self);\n}\nfn g(a: [u8; 4]) -> u8 {\n    let s = \"}\";\n    // }\n    a[0]\n}\nfn h() {}\n";
    let lengths = function_lengths(src);
    assert_eq!(lengths, vec![("g".to_string(), 4, 5), ("h".to_string(), 9, 1)]);
    let long = format!("fn long() {{\n{}}}\n", "    x();\n".repeat(100));
    assert_eq!(function_lengths(&long), vec![("long".to_string(), 1, 102)]);
}
