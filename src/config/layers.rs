//! The layer resolution: built-in defaults < agentfix.toml < environment <
//! editor settings, one setting at a time, recording where each value came
//! from. `Layers` is the machinery ([`pick!`] takes one setting through the
//! layers; the environment is parsed only when no higher layer sets it, so a
//! bad variable under an editor setting is no error); each section's file
//! adds the `impl Layers` that resolves that section.

use super::settings::Settings;
use super::{ConfigError, Source};

/// The layers one setting is taken from, and where each setting came from.
pub(super) struct Layers<'a> {
    pub(super) file: &'a Settings,
    pub(super) editor: &'a Settings,
    pub(super) env: &'a dyn Fn(&str) -> Option<String>,
    pub(super) sources: Vec<(&'static str, Source)>,
}

/// One setting through the layers (editor > environment > file > default),
/// recording its source. The environment and the default are evaluated only
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
        $l.sources.push(($name, src));
        v
    }};
}

impl Layers<'_> {
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

pub(super) use pick;
