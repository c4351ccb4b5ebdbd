//! The commands section: what `run_command` may run (`CommandEntry` on the
//! wire, `CommandConfig` resolved), whether it asks, and how it is confined
//! (`CommandSandbox`, network, extra read paths, `CommandLimits`); the
//! `autoApprove`, `sandbox`, `network`, `readPaths` and `limits` keys never
//! from agentfix.toml.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::layers::{Layers, pick};
use super::{ConfigError, Source};

/// One entry of the `commands` setting: an argv, an argv with a timeout, or
/// (for the `autoApprove` and `network` keys only) a flag, or (for the
/// `sandbox` key only) a word.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum CommandEntry {
    /// `"autoApprove": true` runs configured commands without asking; `"network": true` lets them reach the network.
    Flag(bool),
    /// `"sandbox": "on"` (the default; `"landlock"` is the same) or `"off"`.
    Word(String),
    /// `["cargo", "test", "-q"]`.
    Argv(Vec<String>),
    /// `{"command": ["cargo", "test"], "timeoutSecs": 600}`.
    Full {
        command: Vec<String>,
        #[serde(rename = "timeoutSecs", default, skip_serializing_if = "Option::is_none")]
        timeout_secs: Option<u64>,
    },
    /// `"limits": {"addressSpaceMb": 16384, "processes": 4096, "fileSizeMb": 8192, "cpuSecs": 3600, "openFiles": 8192}`:
    /// resource limits of each sandboxed process (0 leaves one as it is).
    Limits(CommandLimits),
}

/// The `commands.limits` setting; a limit not given keeps its default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommandLimits {
    /// Address space of each process, in MiB (default 16384).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address_space_mb: Option<u64>,
    /// Processes and threads of the sandbox (default 4096; the kernel does not apply it to root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<u64>,
    /// Largest file a process may write, in MiB (default 8192).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_size_mb: Option<u64>,
    /// CPU time of each process, in seconds (default 3600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_secs: Option<u64>,
    /// Open files of each process (default 8192).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_files: Option<u64>,
}

/// A command the model may run through `run_command`, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandConfig {
    pub argv: Vec<String>,
    pub timeout: Duration,
}

/// Default timeout of a configured command.
pub const DEFAULT_COMMAND_TIMEOUT_SECS: u64 = 300;

/// The `commands.sandbox` setting: how configured commands are confined.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CommandSandbox {
    /// The sandbox (Linux: namespaces, seccomp, Landlock): the command sees
    /// the system and its toolchains read-only, writes only in the scratch
    /// copy, its temporary directory and the build cache; no network unless
    /// `commands.network`.
    #[default]
    On,
    /// No sandbox: commands can do whatever the user can.
    Off,
}

/// The commands the model may run, and how.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CommandsConfig {
    /// By name.
    pub entries: std::collections::BTreeMap<String, CommandConfig>,
    /// Run them without asking.
    pub auto_approve: bool,
    /// How they are confined (`commands.sandbox`).
    pub sandbox: CommandSandbox,
    /// Whether they may reach the network (`commands.network`).
    pub network: bool,
    /// More directories a sandboxed command may read (`commands.readPaths`).
    pub read_paths: Vec<std::path::PathBuf>,
    /// Resource limits of sandboxed commands (`commands.limits`).
    pub limits: CommandLimits,
    /// Credential variables they may inherit (`envAllow`).
    pub env_allow: Vec<String>,
}

impl Layers<'_> {
    pub(super) fn commands(&mut self) -> Result<CommandsConfig, ConfigError> {
        let l = self;
        let entries = pick!(
            l,
            "commands",
            commands,
            None::<std::collections::BTreeMap<String, CommandEntry>>,
            Default::default()
        );
        resolve_commands(entries)
    }
}

/// Splits the `commands` setting into commands and the `autoApprove`,
/// `sandbox` and `network` keys.
fn resolve_commands(entries: std::collections::BTreeMap<String, CommandEntry>) -> Result<CommandsConfig, ConfigError> {
    let mut commands = std::collections::BTreeMap::new();
    let mut auto = false;
    let mut sandbox = CommandSandbox::default();
    let mut network = false;
    let mut read_paths = Vec::new();
    let mut limits = CommandLimits::default();
    for (name, entry) in entries {
        let (argv, timeout) = match (name.as_str(), entry) {
            ("readPaths", CommandEntry::Argv(paths)) => {
                for p in paths {
                    let path = std::path::PathBuf::from(&p);
                    if !path.is_absolute() {
                        return Err(ConfigError::Invalid(format!("commands.readPaths: `{p}` is not an absolute path")));
                    }
                    read_paths.push(path);
                }
                continue;
            }
            ("readPaths", _) => {
                return Err(ConfigError::Invalid("commands.readPaths must be a list of absolute paths".into()));
            }
            ("limits", CommandEntry::Limits(l)) => {
                limits = l;
                continue;
            }
            ("limits", _) => {
                return Err(ConfigError::Invalid(
                    "commands.limits must be an object of addressSpaceMb, processes, fileSizeMb, cpuSecs, openFiles"
                        .into(),
                ));
            }
            ("autoApprove", CommandEntry::Flag(b)) => {
                auto = b;
                continue;
            }
            ("autoApprove", _) => {
                return Err(ConfigError::Invalid("commands.autoApprove must be true or false".into()));
            }
            ("network", CommandEntry::Flag(b)) => {
                network = b;
                continue;
            }
            ("network", _) => {
                return Err(ConfigError::Invalid("commands.network must be true or false".into()));
            }
            ("sandbox", CommandEntry::Word(w)) if w == "on" || w == "landlock" => {
                sandbox = CommandSandbox::On;
                continue;
            }
            ("sandbox", CommandEntry::Word(w)) if w == "off" => {
                sandbox = CommandSandbox::Off;
                continue;
            }
            ("sandbox", _) => {
                return Err(ConfigError::Invalid("commands.sandbox must be \"on\" or \"off\"".into()));
            }
            (_, CommandEntry::Flag(_) | CommandEntry::Word(_) | CommandEntry::Limits(_)) => {
                return Err(ConfigError::Invalid(format!(
                    "commands.{name} must be a command (a list of strings), not a flag or a word"
                )));
            }
            (_, CommandEntry::Argv(argv)) => (argv, None),
            (_, CommandEntry::Full { command, timeout_secs }) => (command, timeout_secs),
        };
        if argv.is_empty() || argv[0].trim().is_empty() {
            return Err(ConfigError::Invalid(format!("commands.{name} is empty")));
        }
        if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            return Err(ConfigError::Invalid(format!(
                "commands: `{name}` is not a valid name (letters, digits, - and _)"
            )));
        }
        let timeout = Duration::from_secs(timeout.unwrap_or(DEFAULT_COMMAND_TIMEOUT_SECS).max(1));
        commands.insert(name, CommandConfig { argv, timeout });
    }
    Ok(CommandsConfig {
        entries: commands,
        auto_approve: auto,
        sandbox,
        network,
        read_paths,
        limits,
        env_allow: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::super::test_resolve as resolve;
    use super::*;
    use crate::config::settings::Settings;
    use serde_json::json;

    #[test]
    fn commands_parse_with_timeouts_and_auto_approve() {
        let editor = Settings::from_json(&json!({"commands": {"test": ["cargo", "test", "-q"], "lint": {"command": ["ruff", "check"], "timeoutSecs": 9}, "autoApprove": true}})).unwrap();
        let c = resolve(&Settings::default(), &editor, &[]).unwrap();
        assert_eq!(
            c.commands.entries["test"],
            CommandConfig { argv: vec!["cargo".into(), "test".into(), "-q".into()], timeout: Duration::from_secs(300) }
        );
        assert_eq!(c.commands.entries["lint"].timeout, Duration::from_secs(9));
        assert!(c.commands.auto_approve);
        let file = Settings::from_toml("[commands]\ntest = [\"pytest\"]\n").unwrap();
        let c = resolve(&file, &Settings::default(), &[]).unwrap();
        assert_eq!(c.commands.entries["test"].argv, ["pytest"]);
        assert!(!c.commands.auto_approve);
        assert!(
            Settings::from_toml("[commands]\nautoApprove = true\n")
                .unwrap_err()
                .to_string()
                .contains("commands.autoApprove")
        );
        let bad = Settings::from_json(&json!({"commands": {"test": []}})).unwrap();
        assert_eq!(resolve(&Settings::default(), &bad, &[]).unwrap_err().to_string(), "commands.test is empty");
        let bad = Settings::from_json(&json!({"commands": {"test": true}})).unwrap();
        assert!(resolve(&Settings::default(), &bad, &[]).is_err());
    }

    #[test]
    fn the_sandbox_is_on_and_offline_by_default_and_only_the_editor_changes_that() {
        let c = resolve(&Settings::default(), &Settings::default(), &[]).unwrap();
        assert_eq!((c.commands.sandbox, c.commands.network), (CommandSandbox::On, false));
        let editor =
            Settings::from_json(&json!({"commands": {"test": ["pytest"], "sandbox": "off", "network": true}})).unwrap();
        let c = resolve(&Settings::default(), &editor, &[]).unwrap();
        assert_eq!((c.commands.sandbox, c.commands.network), (CommandSandbox::Off, true));
        assert_eq!(c.commands.entries.keys().collect::<Vec<_>>(), ["test"]);
        let editor = Settings::from_json(&json!({"commands": {"sandbox": "landlock", "network": false}})).unwrap();
        let c = resolve(&Settings::default(), &editor, &[]).unwrap();
        assert_eq!((c.commands.sandbox, c.commands.network), (CommandSandbox::On, false));
        assert!(c.commands.entries.is_empty());
        // A repository cannot loosen the sandbox of its own commands.
        for text in [
            "[commands]\nsandbox = \"off\"\n",
            "[commands]\nsandbox = \"landlock\"\n",
            "[commands]\nsandbox = \"on\"\n",
            "[commands]\nnetwork = true\n",
            "[commands]\ntest = [\"pytest\"]\nnetwork = false\n",
        ] {
            let e = Settings::from_toml(text).unwrap_err().to_string();
            assert!(e.contains("may not set `commands."), "{text}: {e}");
            assert!(e.contains("sandbox") || e.contains("network"), "{text}: {e}");
        }
        // Wrong shapes are errors that name the key.
        for (value, key) in [
            (json!({"sandbox": "bubblewrap"}), "commands.sandbox"),
            (json!({"sandbox": true}), "commands.sandbox"),
            (json!({"network": "yes"}), "commands.network"),
            (json!({"network": ["curl"]}), "commands.network"),
            (json!({"test": "pytest"}), "commands.test"),
        ] {
            let editor = Settings::from_json(&json!({ "commands": value })).unwrap();
            let e = resolve(&Settings::default(), &editor, &[]).unwrap_err().to_string();
            assert!(e.contains(key), "{value}: {e}");
        }
    }

    #[test]
    fn read_paths_and_limits_of_commands() {
        let s = Settings::from_json(&json!({"commands": {
            "test": ["pytest"],
            "readPaths": ["/data/models"],
            "limits": {"addressSpaceMb": 1024, "cpuSecs": 60}
        }}))
        .unwrap();
        let c = resolve(&Settings::default(), &s, &[]).unwrap();
        assert_eq!(c.commands.read_paths, [std::path::PathBuf::from("/data/models")]);
        assert_eq!(
            c.commands.limits,
            CommandLimits { address_space_mb: Some(1024), cpu_secs: Some(60), ..Default::default() }
        );
        assert_eq!(c.commands.entries.len(), 1);
        for (bad, what) in [
            (json!({"readPaths": ["relative"]}), "not an absolute path"),
            (json!({"readPaths": true}), "commands.readPaths"),
            (json!({"limits": ["x"]}), "commands.limits"),
        ] {
            let e = Settings::from_json(&json!({"commands": bad}))
                .map_err(|e| e.to_string())
                .and_then(|s| resolve(&Settings::default(), &s, &[]).map(|_| ()).map_err(|e| e.to_string()))
                .unwrap_err();
            assert!(e.contains(what), "{bad}: {e}");
        }
        // A repository cannot widen what its commands read or how much they may use.
        for text in ["[commands]\nreadPaths = [\"/home\"]\n", "[commands]\nlimits = { cpuSecs = 1 }\n"] {
            let e = Settings::from_toml(text).unwrap_err().to_string();
            assert!(e.contains("may not set `commands."), "{text}: {e}");
        }
    }
}
