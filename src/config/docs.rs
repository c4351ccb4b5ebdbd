//! What is produced from the settings' declarations, and the tests that fail
//! when any of it drifts: the JSON Schema (`agentfix.schema.json`), the
//! table of docs/configuration.md (between its `<!-- settings` markers), and
//! VS Code's `contributes.configuration` (every key a declared setting with
//! its type, enum, default, minimum and doc sentence, user-settings-only
//! where agentfix.toml may not set it, or one of the extension's own keys,
//! `CLIENT_ONLY` in editors/vscode/src/settings.ts). Tests only:
//! `UPDATE_DOCS=1 cargo test --lib config::docs` rewrites the schema and the
//! table instead of failing.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::settings::{Declaration, EDITOR_KEYS, Settings};
use super::{Config, FILE_NAME};

/// The first line of the generated table's block in docs/configuration.md.
const BEGIN: &str = "<!-- settings: generated from the declarations in src/config/settings.rs by `UPDATE_DOCS=1 cargo test --lib config::docs`; do not edit by hand -->";
/// Its last line.
const END: &str = "<!-- end of the generated settings -->";

fn repo_file(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn updating() -> bool {
    std::env::var_os("UPDATE_DOCS").is_some_and(|v| !v.is_empty() && v != "0")
}

/// The declarations in the order the resolution takes them (and `agentfix
/// check` lists them): section by section.
pub(super) fn in_resolution_order() -> Vec<Declaration> {
    let config = Config::resolve(&Settings::default(), &Settings::default(), &|_| None).expect("the defaults resolve");
    let position = |name: &str| config.in_force.iter().position(|s| s.name == name).unwrap_or(usize::MAX);
    let mut declarations = Settings::declarations();
    declarations.sort_by_key(|d| position(&d.name));
    declarations
}

/// A JSON value as the table shows it in backticks: strings without quotes.
fn code(v: &Value) -> String {
    match v {
        Value::String(s) => format!("`{s}`"),
        other => format!("`{other}`"),
    }
}

/// One row of the table.
fn row(d: &Declaration) -> String {
    let vars: Vec<String> = d.env().iter().map(|v| format!("`{v}`")).collect();
    let env = match (vars.is_empty(), d.kind.as_str()) {
        (true, _) => "—".to_string(),
        (false, "boolean") => format!("{} (`0` = off)", vars.join(" / ")),
        (false, "object") => format!("{} (JSON)", vars.join(" / ")),
        (false, "array") => format!("{} (comma-separated)", vars.join(" / ")),
        (false, _) => vars.join(" / "),
    };
    let default = match (d.default(), d.default_text()) {
        (Some(v), _) => code(v),
        (None, Some(text)) => text.to_string(),
        (None, None) if d.kind == "object" || d.kind == "array" => "none".to_string(),
        (None, None) => "unset".to_string(),
    };
    let mut refused: Vec<String> = d.not_in_file_keys().iter().map(|(k, _)| format!("`{}.{k}`", d.name)).collect();
    // By name, whatever order the schema's maps keep.
    refused.sort();
    let lowers = super::settings::FILE_MAY_ONLY_LOWER.contains(&d.name.as_str());
    let file = match (d.not_in_file(), refused.is_empty()) {
        (Some(_), _) => "no".to_string(),
        _ if d.file_ignored().is_some() => "ignored, with a warning".to_string(),
        _ if lowers => "only lower".to_string(),
        (None, false) => format!("yes, but not {}", refused.join(", ")),
        (None, true) => "yes".to_string(),
    };
    let meaning = d.description().replace('\n', " ").replace('|', "\\|");
    format!("| `{}` | {env} | {default} | {file} | {meaning} |\n", d.name)
}

/// The generated block: the markers around the table of every setting.
pub(super) fn settings_table() -> String {
    let mut out =
        format!("{BEGIN}\n| setting | environment | default | {FILE_NAME} | meaning |\n|---|---|---|---|---|\n");
    for d in in_resolution_order() {
        out.push_str(&row(&d));
    }
    out.push_str(END);
    out
}

/// `doc` with the text between the markers (included) replaced by `block`.
fn splice(doc: &str, block: &str) -> Option<String> {
    let start = doc.find(BEGIN)?;
    let end = doc[start..].find(END)? + start + END.len();
    Some(format!("{}{block}{}", &doc[..start], &doc[end..]))
}

#[test]
fn docs_configuration_md_has_the_generated_settings_table() {
    let path = repo_file("docs/configuration.md");
    let doc = std::fs::read_to_string(&path).expect("docs/configuration.md");
    let wanted = splice(&doc, &settings_table()).expect("docs/configuration.md has the settings markers");
    if updating() {
        std::fs::write(&path, &wanted).expect("writing docs/configuration.md");
    }
    assert!(
        doc == wanted || updating(),
        "docs/configuration.md's settings table is stale: regenerate it with `UPDATE_DOCS=1 cargo test --lib config::docs`"
    );
}

#[test]
fn the_committed_json_schema_matches_the_settings_type() {
    let path = repo_file("agentfix.schema.json");
    let wanted = Settings::json_schema();
    if updating() {
        let text = serde_json::to_string_pretty(&wanted).expect("the schema is JSON") + "\n";
        std::fs::write(&path, text).expect("writing agentfix.schema.json");
    }
    let committed: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("agentfix.schema.json")).expect("it is JSON");
    assert_eq!(
        committed, wanted,
        "agentfix.schema.json is stale: regenerate it with `UPDATE_DOCS=1 cargo test --lib config::docs` (or `cargo run -- schema > agentfix.schema.json`)"
    );
}

#[test]
fn a_row_says_what_the_declaration_says() {
    let find = |name: &str| Settings::declarations().into_iter().find(|d| d.name == name).unwrap();
    assert_eq!(
        row(&find("maxTurns")),
        "| `maxTurns` | `AGENTFIX_MAX_TURNS` | `40` | only lower | Model requests per run at most. |\n"
    );
    let base_url = row(&find("baseUrl"));
    assert!(
        base_url.starts_with("| `baseUrl` | `ANTHROPIC_BASE_URL` / `OPENAI_BASE_URL` | `https://api.anthropic.com` / "),
        "{base_url}"
    );
    assert!(base_url.contains(" | no | API base URL."), "{base_url}");
    let commands = row(&find("commands"));
    assert!(commands.starts_with("| `commands` | — | none | yes, but not `commands.autoApprove`, "), "{commands}");
    assert!(row(&find("transcripts")).contains("| `AGENTFIX_TRANSCRIPTS` (`0` = off) | `true` |"));
    assert_eq!(splice("a\nb", "x"), None);
    assert_eq!(splice(&format!("a\n{BEGIN}\nold\n{END}\nb"), "new").as_deref(), Some("a\nnew\nb"));
}

/// The names in `CLIENT_ONLY` of the VS Code extension's settings.ts: its
/// own settings, never sent to the server.
fn vscode_client_only() -> Vec<String> {
    let text = std::fs::read_to_string(repo_file("editors/vscode/src/settings.ts")).expect("settings.ts");
    let line = text.lines().find(|l| l.contains("CLIENT_ONLY") && l.contains("new Set([")).expect("CLIENT_ONLY");
    let list = &line[line.find("new Set([").unwrap() + 9..line.find("])").expect("the end of the set")];
    list.split(',').map(|s| s.trim().trim_matches('\'').to_string()).filter(|s| !s.is_empty()).collect()
}

/// VS Code's description with `agentfix.x` and `#agentfix.x#` written `x`.
fn vscode_text(p: &Value) -> String {
    let text = p["markdownDescription"].as_str().or(p["description"].as_str()).unwrap_or_default();
    let text = regex::Regex::new(r"`?#agentfix\.([A-Za-z.]+)#`?").unwrap().replace_all(text, "`$1`");
    text.replace("`agentfix.", "`")
}

/// What one `agentfix.<name>` property of package.json gets wrong about `d`.
fn vscode_mismatches(d: &Declaration, p: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let types: Vec<&str> = match &p["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).filter(|t| *t != "null").collect(),
        _ => Vec::new(),
    };
    if types != [d.kind.as_str()] {
        out.push(format!("type {types:?}, declared {}", d.kind));
    }
    let values: Vec<Value> = p["enum"].as_array().into_iter().flatten().filter(|v| *v != "").cloned().collect();
    if values != d.values {
        out.push(format!("enum {values:?}, declared {:?}", d.values));
    }
    // Where no one value is the default, the extension's is "not set".
    let unset = match d.kind.as_str() {
        "string" => json!(""),
        "object" => json!({}),
        "array" => json!([]),
        _ => Value::Null,
    };
    let default = d.default().cloned().unwrap_or(unset);
    if p["default"].as_f64().zip(default.as_f64()).map_or(p["default"] != default, |(a, b)| a != b) {
        out.push(format!("default {}, declared {default}", p["default"]));
    }
    if d.schema.get("minimum").and_then(Value::as_f64) != p.get("minimum").and_then(Value::as_f64) {
        out.push(format!("minimum {:?}, declared {:?}", p.get("minimum"), d.schema.get("minimum")));
    }
    if !vscode_text(p).starts_with(d.sentence()) {
        out.push(format!("its description does not start with the declared sentence: {:?}", d.sentence()));
    }
    let user_only = ["machine", "application"].contains(&p["scope"].as_str().unwrap_or_default());
    let repository_may_not =
        d.not_in_file().is_some() || d.file_ignored().is_some() || !d.not_in_file_keys().is_empty();
    if repository_may_not && !user_only {
        out.push("agentfix.toml may not set it, so a workspace may not either: give it \"scope\": \"machine\"".into());
    }
    out
}

#[test]
fn vscode_contributes_every_setting_as_declared() {
    let text = std::fs::read_to_string(repo_file("editors/vscode/package.json")).expect("package.json");
    let manifest: Value = serde_json::from_str(&text).expect("package.json is JSON");
    let properties = manifest["contributes"]["configuration"]["properties"].as_object().expect("properties");
    let own = vscode_client_only();
    let declarations = Settings::declarations();
    let mut problems = Vec::new();
    for (key, p) in properties {
        let Some(name) = key.strip_prefix("agentfix.") else {
            problems.push(format!("{key}: not in the agentfix section"));
            continue;
        };
        if own.iter().any(|o| o == name) {
            continue;
        }
        match declarations.iter().find(|d| d.name == name) {
            None => problems.push(format!("{key}: no such setting, nor one of CLIENT_ONLY in settings.ts")),
            Some(d) => problems.extend(vscode_mismatches(d, p).into_iter().map(|m| format!("{key}: {m}"))),
        }
    }
    for d in &declarations {
        if !properties.contains_key(&format!("agentfix.{}", d.name)) {
            problems.push(format!("agentfix.{}: declared, but missing from package.json", d.name));
        }
    }
    for o in &own {
        if !properties.contains_key(&format!("agentfix.{o}")) {
            problems.push(format!("agentfix.{o}: in CLIENT_ONLY, but not in package.json"));
        }
        if !EDITOR_KEYS.contains(&o.split('.').next().unwrap_or_default()) {
            problems.push(format!("agentfix.{o}: the extension's own, so it belongs in config::settings::EDITOR_KEYS"));
        }
    }
    assert!(own.len() >= 4, "CLIENT_ONLY read from settings.ts: {own:?}");
    assert!(problems.is_empty(), "editors/vscode/package.json drifted from the declarations:\n{}", problems.join("\n"));
}
