//! The layer resolution: built-in defaults < agentfix.toml < environment <
//! editor settings, one setting at a time, recording where each value came
//! from. `Layers` is the machinery (`pick!` takes one setting through the
//! layers; the environment is parsed only when no higher layer sets it, so a
//! bad variable under an editor setting is no error); each section's file
//! adds the `impl Layers` that resolves that section.

use serde::Serialize;

use super::settings::Settings;
use super::{ConfigError, InForce, Source};

/// The layers one setting is taken from, and each setting in force with
/// where it came from.
pub(super) struct Layers<'a> {
    pub(super) file: &'a Settings,
    pub(super) editor: &'a Settings,
    pub(super) env: &'a dyn Fn(&str) -> Option<String>,
    pub(super) in_force: Vec<InForce>,
}

/// One setting through the layers (editor > environment > file > default),
/// recording its value and source. The environment and the default are evaluated only
/// when no higher layer sets it, so a bad variable under an editor setting
/// is no error.
macro_rules! pick {
    ($l:ident, $name:literal, $field:ident, $env:expr, $default:expr) => {{
        let (v, src) = if let Some(v) = $l.editor.$field.clone() {
            (v, Source::Editor)
        } else if let Some(v) = $env {
            (v, Source::Env)
        } else if let Some(v) = $l.file.$field.clone() {
            (v, Source::File)
        } else {
            ($default, Source::Default)
        };
        $l.record($name, src, &v);
        v
    }};
}

/// A bound that agentfix.toml may only tighten: the value the editor, the
/// environment or the default gives, or the file's when it is lower (a
/// repository may lower a budget of its user's, never raise it).
macro_rules! pick_lowest {
    ($l:ident, $name:literal, $field:ident, $env:expr, $default:expr) => {{
        let (v, src) = if let Some(v) = $l.editor.$field.clone() {
            (v, Source::Editor)
        } else if let Some(v) = $env {
            (v, Source::Env)
        } else {
            ($default, Source::Default)
        };
        let (v, src) = match $l.file.$field.clone() {
            Some(f) if f < v => (f, Source::File),
            _ => (v, src),
        };
        $l.record($name, src, &v);
        v
    }};
}

impl Layers<'_> {
    /// Records `name`'s value in force and where it came from.
    pub(super) fn record(&mut self, name: &'static str, source: Source, value: &impl Serialize) {
        let value = serde_json::to_value(value).unwrap_or_default();
        self.in_force.push(InForce { name, source, value });
    }

    /// Replaces the recorded value of `name`, once a section has adjusted it.
    pub(super) fn adjust(&mut self, name: &str, value: &impl Serialize) {
        if let Some(s) = self.in_force.iter_mut().find(|s| s.name == name) {
            s.value = serde_json::to_value(value).unwrap_or_default();
        }
    }

    /// A variable of the environment; empty counts as unset.
    pub(super) fn env(&self, var: &str) -> Option<String> {
        (self.env)(var).filter(|v| !v.trim().is_empty())
    }

    /// A numeric variable of the environment.
    pub(super) fn num(&self, var: &str) -> Result<Option<u64>, ConfigError> {
        self.env(var)
            .map(|v| v.trim().parse::<u64>().map_err(|_| ConfigError::Invalid(format!("{var}=`{v}` is not a number"))))
            .transpose()
    }

    /// A flag of the environment: anything but `0` and `false` is on.
    pub(super) fn flag(&self, var: &str) -> Option<bool> {
        self.env(var).map(|v| v != "0" && v != "false")
    }
}

pub(super) use {pick, pick_lowest};

/// The resolution against the declarations: every declared setting is
/// resolved and recorded once, with its declared default, from the
/// environment variables and the layers it declares, and no other variable
/// is read.
#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::settings::{Declaration, Settings};
    use super::super::{Config, Source};

    /// A value of `d`'s type.
    fn sample(d: &Declaration) -> Value {
        match (d.values.first(), d.kind.as_str()) {
            (Some(v), _) => v.clone(),
            (None, "integer") => json!(7),
            (None, "number") => json!(0.5),
            (None, "boolean") => json!(false),
            (None, "object") => json!({}),
            (None, "array") => json!(["a"]),
            (None, _) if d.name == "baseUrl" => json!("http://x/v1"),
            (None, _) => json!("x"),
        }
    }

    /// The same, as an environment variable spells it.
    fn as_env(v: &Value) -> String {
        match v {
            Value::String(s) => s.clone(),
            Value::Bool(b) => if *b { "1" } else { "0" }.to_string(),
            Value::Array(items) => items.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(","),
            other => other.to_string(),
        }
    }

    fn resolve(file: &Settings, editor: &Settings, env: &[(&str, String)]) -> Config {
        let env = |k: &str| env.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone());
        Config::resolve(file, editor, &env).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn every_setting_resolves_to_its_declared_default_once() {
        let declarations = Settings::declarations();
        assert!(declarations.len() >= 30, "{}", declarations.len());
        let c = resolve(&Settings::default(), &Settings::default(), &[]);
        let names: Vec<&str> = c.in_force.iter().map(|s| s.name).collect();
        for d in &declarations {
            let recorded: Vec<_> = c.in_force.iter().filter(|s| s.name == d.name).collect();
            assert_eq!(recorded.len(), 1, "{} is recorded once by the resolution: {names:?}", d.name);
            assert_eq!(recorded[0].source, Source::Default, "{}", d.name);
            match (d.default(), d.default_text()) {
                (Some(default), _) => assert_eq!(&recorded[0].value, default, "{}: the declared default", d.name),
                (None, Some(_)) => {}
                (None, None) => assert_eq!(recorded[0].shown(), "none", "{} is unset by default", d.name),
            }
        }
        assert!(names.iter().all(|n| declarations.iter().any(|d| d.name == *n)), "{names:?}");
    }

    #[test]
    fn every_setting_comes_from_the_layers_it_declares() {
        for d in Settings::declarations() {
            let value = sample(&d);
            let one = json!({ d.name.clone(): value.clone() });
            for var in d.env() {
                // `baseUrl`'s variables are one per provider.
                let provider = if var.starts_with("OPENAI_") { "openai" } else { "anthropic" };
                let env = [(var, as_env(&value)), ("AGENTFIX_PROVIDER", provider.to_string())];
                let c = resolve(&Settings::default(), &Settings::default(), &env);
                assert_eq!(c.source(&d.name), Source::Env, "{} from {var}", d.name);
            }
            let editor = Settings::from_json(&one).unwrap();
            assert_eq!(resolve(&Settings::default(), &editor, &[]).source(&d.name), Source::Editor, "{}", d.name);
            let toml = toml::to_string(&one).unwrap();
            match (Settings::from_toml(&toml), d.not_in_file()) {
                // Read, then left out: a repository may not set it against its user.
                (Ok(file), None) if d.file_ignored().is_some() => {
                    assert_eq!(resolve(&file, &Settings::default(), &[]).source(&d.name), Source::Default, "{}", d.name)
                }
                (Ok(file), None) => {
                    assert_eq!(resolve(&file, &Settings::default(), &[]).source(&d.name), Source::File, "{}", d.name)
                }
                (Err(e), Some(why)) => {
                    assert!(e.to_string().contains(&format!("may not set `{}` ({why})", d.name)), "{e}")
                }
                (got, declared) => panic!("{}: agentfix.toml gave {got:?}, declared {declared:?}", d.name),
            }
            for (key, why) in d.not_in_file_keys() {
                let e = Settings::from_toml(&toml::to_string(&json!({ d.name.clone(): { key: true } })).unwrap());
                let e = e.unwrap_err().to_string();
                assert!(e.contains(&format!("may not set `{}.{key}` ({why})", d.name)), "{e}");
            }
        }
    }

    /// A variable named in a string literal of the resolution (outside the
    /// tests) is declared by a setting, or is a provider's key.
    #[test]
    fn every_environment_variable_read_is_declared() {
        let declared: Vec<String> = Settings::declarations().iter().flat_map(|d| d.env()).map(str::to_string).collect();
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/config");
        let literal = regex::Regex::new(r#""((?:AGENTFIX|ANTHROPIC|OPENAI)_[A-Z_]+)""#).unwrap();
        let mut read = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap_or_default().to_string();
            read.extend(literal.captures_iter(&code).map(|c| c[1].to_string()));
        }
        assert!(read.iter().any(|v| v == "AGENTFIX_MAX_TURNS"), "{read:?}");
        let undeclared: Vec<_> = read.iter().filter(|v| !v.ends_with("_API_KEY") && !declared.contains(v)).collect();
        assert!(undeclared.is_empty(), "read but not declared (`x-env`): {undeclared:?}");
    }
}
