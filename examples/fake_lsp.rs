//! A fake language server for deterministic tests of agentfix's downstream
//! client (std only, one thread). It understands a toy Python: `class X:` and
//! `def f(…):` lines are symbols (nested by indentation), a word's definition
//! is the line that defines it, references are whole-word occurrences in the
//! open documents and the `.py` files of the root, and every line containing
//! `ERROR` gets an error diagnostic (published with the document version,
//! UTF-16 columns, a `codeDescription` link and a related place: the
//! document's first line). Code actions: for each diagnostic of the
//! request's context, a quick fix replacing its range with `0`; then a
//! command-only action and a refactoring (which clients asking for quick
//! fixes only should drop).
//!
//! Faults, by environment variable:
//! - `FAKE_LSP_CRASH_ON=method`: exit(1) on receiving that request;
//!   with `FAKE_LSP_CRASH_ONCE=path`, only if `path` does not exist yet (it
//!   is created), so a restarted server works;
//! - `FAKE_LSP_HANG_ON=method`: never answer that request;
//! - `FAKE_LSP_LOG=path`: append every method received, one per line (a
//!   code action request with its `context`);
//! - `FAKE_LSP_ENV_TO=path`: write its environment there at start, `K=V` a line;
//! - `FAKE_LSP_STDERR_FLOOD=bytes`: write that many bytes to stderr at start,
//!   without a line break.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use agentfix_lsp_framing::{Frame, SyncFrames};
use serde_json::{Value, json};

/// The next message; `None` at the end of input or on anything malformed
/// (which ends the server).
fn read<R: std::io::Read>(frames: &mut SyncFrames<R>) -> Option<Value> {
    match frames.next_frame().ok()?? {
        Frame::Body(body) => serde_json::from_slice(&body).ok(),
        Frame::Broken(_) => None,
    }
}

fn send(v: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = agentfix_lsp_framing::write_frame(&mut out, v.to_string().as_bytes());
    let _ = out.flush();
}

fn uri_to_path(uri: &str) -> PathBuf {
    let rest = uri.trim_start_matches("file://");
    let mut out = Vec::new();
    let b = rest.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Ok(x) = u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("zz"), 16)
        {
            out.push(x);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    PathBuf::from(String::from_utf8_lossy(&out).into_owned())
}

fn path_to_uri(p: &std::path::Path) -> String {
    let mut s = String::from("file://");
    for b in p.to_string_lossy().bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => s.push(b as char),
            _ => s.push_str(&format!("%{b:02X}")),
        }
    }
    s
}

struct State {
    root: PathBuf,
    docs: BTreeMap<String, (i64, String)>,
}

impl State {
    /// Every line that has `w` as a word, in every document.
    fn references(&self, w: &str) -> Value {
        let mut out = Vec::new();
        for (u, text) in self.texts() {
            for (i, l) in text.lines().enumerate() {
                let words: Vec<&str> = l.split(|c: char| !(c.is_alphanumeric() || c == '_')).collect();
                if !w.is_empty() && words.contains(&w) {
                    out.push(loc(&u, i));
                }
            }
        }
        Value::Array(out)
    }

    /// Every `def` and `class` whose name contains `q`.
    fn workspace_symbols(&self, q: &str) -> Value {
        let mut out = Vec::new();
        for (u, text) in self.texts() {
            for (i, l) in text.lines().enumerate() {
                let t = l.trim_start();
                if let Some(rest) = t.strip_prefix("def ").or_else(|| t.strip_prefix("class ")) {
                    let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                    if name.contains(q) {
                        out.push(json!({"name": name, "kind": if t.starts_with("class") { 5 } else { 12 }, "location": loc(&u, i)}));
                    }
                }
            }
        }
        Value::Array(out)
    }

    /// Every known text: open documents win over the root's .py files.
    fn texts(&self) -> Vec<(String, String)> {
        let mut all: BTreeMap<String, String> = BTreeMap::new();
        if let Ok(entries) = std::fs::read_dir(&self.root) {
            for e in entries.flatten() {
                let p = e.path();
                if p.extension().is_some_and(|x| x == "py")
                    && let Ok(t) = std::fs::read_to_string(&p)
                {
                    all.insert(path_to_uri(&p), t);
                }
            }
        }
        for (uri, (_, text)) in &self.docs {
            all.insert(uri.clone(), text.clone());
        }
        all.into_iter().collect()
    }

    fn word_at(&self, uri: &str, line: u64, character: u64) -> String {
        let text = self.docs.get(uri).map(|d| d.1.clone()).unwrap_or_default();
        let l: Vec<u16> = text.lines().nth(line as usize).unwrap_or("").encode_utf16().collect();
        let is_word = |c: u16| char::from_u32(c as u32).is_some_and(|c| c.is_alphanumeric() || c == '_');
        let mut s = (character as usize).min(l.len());
        while s > 0 && is_word(l[s - 1]) {
            s -= 1;
        }
        let mut e = (character as usize).min(l.len());
        while e < l.len() && is_word(l[e]) {
            e += 1;
        }
        String::from_utf16_lossy(&l[s..e])
    }

    fn definitions(&self, word: &str) -> Vec<(String, usize, String)> {
        let mut out = Vec::new();
        for (uri, text) in self.texts() {
            for (i, l) in text.lines().enumerate() {
                let t = l.trim_start();
                for kw in ["def ", "class "] {
                    if let Some(rest) = t.strip_prefix(kw) {
                        let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                        if name == word {
                            out.push((uri.clone(), i, l.to_string()));
                        }
                    }
                }
            }
        }
        out
    }
}

fn loc(uri: &str, line: usize) -> Value {
    json!({"uri": uri, "range": {"start": {"line": line, "character": 0}, "end": {"line": line, "character": 1}}})
}

fn symbols(text: &str) -> Value {
    let lines: Vec<&str> = text.lines().collect();
    let mut top: Vec<Value> = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let indent = l.len() - l.trim_start().len();
        let t = l.trim_start();
        let (kind, rest) = if let Some(r) = t.strip_prefix("class ") {
            (5, r)
        } else if let Some(r) = t.strip_prefix("def ") {
            (if indent > 0 { 6 } else { 12 }, r)
        } else {
            continue;
        };
        let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        let mut end = i;
        for (j, m) in lines.iter().enumerate().skip(i + 1) {
            let mi = m.len() - m.trim_start().len();
            if !m.trim().is_empty() && mi <= indent {
                break;
            }
            if !m.trim().is_empty() {
                end = j;
            }
        }
        let sym = json!({"name": name, "kind": kind, "range": {"start": {"line": i, "character": 0}, "end": {"line": end, "character": 0}},
            "selectionRange": {"start": {"line": i, "character": 0}, "end": {"line": i, "character": 0}}, "children": []});
        if indent > 0
            && let Some(parent) = top.last_mut()
        {
            parent["children"].as_array_mut().unwrap().push(sym);
            continue;
        }
        top.push(sym);
    }
    Value::Array(top)
}

fn publish(uri: &str, version: i64, text: &str) {
    let diags: Vec<Value> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains("ERROR"))
        .map(|(i, l)| {
            // UTF-16 units, as the server declares.
            let c = l[..l.find("ERROR").unwrap_or(0)].encode_utf16().count();
            json!({"range": {"start": {"line": i, "character": c}, "end": {"line": i, "character": c + 5}},
                   "severity": 1, "source": "fake", "code": "E1", "message": format!("ERROR is not allowed here"),
                   "codeDescription": {"href": "https://fake.example/rules/E1"},
                   "relatedInformation": [{"location": loc(uri, 0), "message": "the file starts here"}]})
        })
        .collect();
    send(
        &json!({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": {"uri": uri, "version": version, "diagnostics": diags}}),
    );
}

/// A quick fix for each diagnostic of the context (its range becomes `0`),
/// a command-only action, and a refactoring.
fn code_actions(uri: &str, p: &Value) -> Value {
    let mut out: Vec<Value> = p["context"]["diagnostics"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| {
            json!({"title": "Replace `ERROR` with `0`", "kind": "quickfix", "isPreferred": true, "diagnostics": [d],
                   "edit": {"changes": {uri: [{"range": d["range"], "newText": "0"}]}}})
        })
        .collect();
    out.push(json!({"title": "Explain E1", "command": "fake.explain", "arguments": []}));
    out.push(json!({"title": "Extract variable", "kind": "refactor.extract",
        "edit": {"changes": {uri: [{"range": p["range"], "newText": "x"}]}}}));
    Value::Array(out)
}

fn main() {
    let crash_on = std::env::var("FAKE_LSP_CRASH_ON").ok();
    let crash_once = std::env::var("FAKE_LSP_CRASH_ONCE").ok();
    let hang_on = std::env::var("FAKE_LSP_HANG_ON").ok();
    let log = std::env::var("FAKE_LSP_LOG").ok();
    start_effects();
    let mut state = State { root: std::env::current_dir().unwrap_or_default(), docs: BTreeMap::new() };
    let mut reader = SyncFrames::new(std::io::stdin().lock());
    eprintln!("fake_lsp: started");
    while let Some(msg) = read(&mut reader) {
        let method = msg["method"].as_str().unwrap_or("").to_string();
        let id = msg.get("id").cloned();
        if let Some(log) = &log
            && let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(log)
        {
            let version =
                msg["params"]["textDocument"]["version"].as_i64().map(|v| format!(" v{v}")).unwrap_or_default();
            let context = match method.as_str() {
                "textDocument/codeAction" => format!(" {}", msg["params"]["context"]),
                _ => String::new(),
            };
            let _ = f.write_all(format!("{method}{version}{context}\n").as_bytes()); // One write: logs are shared.
        }
        if method.is_empty() {
            continue; // A response to one of our requests.
        }
        if crash_on.as_deref() == Some(method.as_str()) {
            let first = match &crash_once {
                Some(p) => std::fs::OpenOptions::new().write(true).create_new(true).open(p).is_ok(),
                None => true,
            };
            if first {
                eprintln!("fake_lsp: crashing on {method}");
                std::process::exit(1);
            }
        }
        if hang_on.as_deref() == Some(method.as_str()) && id.is_some() {
            continue;
        }
        let p = &msg["params"];
        let uri = p["textDocument"]["uri"].as_str().unwrap_or("").to_string();
        match answer(&mut state, &method, p, uri) {
            Answer::Result(result) => {
                if let Some(id) = id {
                    send(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
                }
            }
            Answer::NotHandled => {
                if let Some(id) = id {
                    send(&json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "not handled"}}));
                }
            }
            Answer::None => {}
        }
    }
}

/// What the test asked the server to do at start: flood stderr, write its
/// environment to a file.
fn start_effects() {
    if let Some(n) = std::env::var("FAKE_LSP_STDERR_FLOOD").ok().and_then(|n| n.parse::<usize>().ok()) {
        let chunk = vec![b'x'; 1 << 20];
        let mut err = std::io::stderr().lock();
        let mut left = n;
        while left > 0 {
            let k = left.min(chunk.len());
            let _ = err.write_all(&chunk[..k]);
            left -= k;
        }
        let _ = err.flush();
    }
    if let Ok(path) = std::env::var("FAKE_LSP_ENV_TO") {
        let env: String = std::env::vars().map(|(k, v)| format!("{k}={v}\n")).collect();
        let _ = std::fs::write(path, env);
    }
}

/// What a message gets back.
enum Answer {
    Result(Value),
    /// Nothing (a notification).
    None,
    /// The method is not handled: an error for a request.
    NotHandled,
}

/// Handles one message.
fn answer(state: &mut State, method: &str, p: &Value, uri: String) -> Answer {
    let result = match method {
        "initialize" => {
            if let Some(r) = p["rootUri"].as_str() {
                state.root = uri_to_path(r);
            }
            json!({"capabilities": {"positionEncoding": "utf-16", "textDocumentSync": 1, "documentSymbolProvider": true,
                "definitionProvider": true, "referencesProvider": true, "hoverProvider": true, "workspaceSymbolProvider": true,
                "codeActionProvider": true},
                "serverInfo": {"name": "fake_lsp"}})
        }
        "initialized" => {
            // Ask what real servers ask, to check the client answers.
            send(
                &json!({"jsonrpc": "2.0", "id": "cfg-1", "method": "workspace/configuration", "params": {"items": [{"section": "python"}]}}),
            );
            send(
                &json!({"jsonrpc": "2.0", "id": "prog-1", "method": "window/workDoneProgress/create", "params": {"token": "t"}}),
            );
            return Answer::None;
        }
        "textDocument/didOpen" => {
            let v = p["textDocument"]["version"].as_i64().unwrap_or(0);
            let text = p["textDocument"]["text"].as_str().unwrap_or("").to_string();
            publish(&uri, v, &text);
            state.docs.insert(uri, (v, text));
            return Answer::None;
        }
        "textDocument/didChange" => {
            let v = p["textDocument"]["version"].as_i64().unwrap_or(0);
            let text = p["contentChanges"][0]["text"].as_str().unwrap_or("").to_string();
            publish(&uri, v, &text);
            state.docs.insert(uri, (v, text));
            return Answer::None;
        }
        "textDocument/didClose" => {
            state.docs.remove(&uri);
            return Answer::None;
        }
        "textDocument/documentSymbol" => symbols(&state.docs.get(&uri).map(|d| d.1.clone()).unwrap_or_default()),
        "textDocument/definition" => {
            let w = state.word_at(
                &uri,
                p["position"]["line"].as_u64().unwrap_or(0),
                p["position"]["character"].as_u64().unwrap_or(0),
            );
            Value::Array(state.definitions(&w).into_iter().map(|(u, l, _)| loc(&u, l)).collect())
        }
        "textDocument/references" => {
            let w = state.word_at(
                &uri,
                p["position"]["line"].as_u64().unwrap_or(0),
                p["position"]["character"].as_u64().unwrap_or(0),
            );
            state.references(&w)
        }
        "textDocument/hover" => {
            let w = state.word_at(
                &uri,
                p["position"]["line"].as_u64().unwrap_or(0),
                p["position"]["character"].as_u64().unwrap_or(0),
            );
            match state.definitions(&w).first() {
                Some((_, _, line)) => {
                    json!({"contents": {"kind": "markdown", "value": format!("```python\n{}\n```", line.trim())}})
                }
                None => Value::Null,
            }
        }
        "workspace/symbol" => state.workspace_symbols(p["query"].as_str().unwrap_or("")),
        "textDocument/codeAction" => code_actions(&uri, p),
        "shutdown" => Value::Null,
        "exit" => std::process::exit(0),
        _ => return Answer::NotHandled,
    };
    Answer::Result(result)
}
