//! The candidates section: how many runs of the same task a fix makes, the
//! best of which is proposed (`candidates`), when the others stop
//! (`candidatesStop`) and where they begin (`candidatesFrom`), used by
//! `fix::candidates`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ConfigError;
use super::Source;
use super::layers::{Layers, pick};

/// The most candidates a fix may run.
pub const MAX_CANDIDATES: u32 = 8;

/// When the other candidates stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CandidatesStop {
    /// Every candidate finishes.
    #[default]
    All,
    /// The others are cancelled when one verifies.
    FirstVerified,
}

/// Where the candidates begin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CandidatesFrom {
    /// Each explores the task on its own.
    #[default]
    Start,
    /// One exploration, forked into the candidates at the model's first edit.
    FirstEdit,
}

/// How many candidates, when they stop and where they begin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CandidatesConfig {
    /// 1 to [`MAX_CANDIDATES`]; 1 is a single run.
    pub count: u32,
    pub stop: CandidatesStop,
    pub from: CandidatesFrom,
}

impl Default for CandidatesConfig {
    fn default() -> Self {
        Self { count: 1, stop: CandidatesStop::All, from: CandidatesFrom::Start }
    }
}

/// `count` checked against 1 ..= [`MAX_CANDIDATES`].
pub fn checked_count(count: u32) -> Result<u32, ConfigError> {
    if (1..=MAX_CANDIDATES).contains(&count) {
        Ok(count)
    } else {
        Err(ConfigError::Invalid(format!("candidates must be 1 to {MAX_CANDIDATES}, not {count}")))
    }
}

impl Layers<'_> {
    pub(super) fn candidates(&mut self) -> Result<CandidatesConfig, ConfigError> {
        let l = self;
        let count = pick!(l, "candidates", candidates, None::<u32>, 1);
        let stop = pick!(l, "candidatesStop", candidates_stop, None::<CandidatesStop>, CandidatesStop::All);
        let from = pick!(l, "candidatesFrom", candidates_from, None::<CandidatesFrom>, CandidatesFrom::Start);
        Ok(CandidatesConfig { count: checked_count(count)?, stop, from })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::config::settings::Settings;

    #[test]
    fn one_candidate_by_default_and_at_most_eight() {
        let resolve = |v: serde_json::Value| {
            Config::resolve(&Settings::default(), &Settings::from_json(&v).unwrap(), &|_| None).map(|c| c.candidates)
        };
        assert_eq!(resolve(serde_json::json!({})).unwrap(), CandidatesConfig::default());
        let c = resolve(serde_json::json!({"candidates": 3, "candidatesStop": "first-verified"})).unwrap();
        assert_eq!(c, CandidatesConfig { count: 3, stop: CandidatesStop::FirstVerified, from: CandidatesFrom::Start });
        let c = resolve(serde_json::json!({"candidates": 2, "candidatesFrom": "first-edit"})).unwrap();
        assert_eq!(c.from, CandidatesFrom::FirstEdit);
        let wrong = Settings::from_json(&serde_json::json!({"candidatesFrom": "middle"})).unwrap_err().to_string();
        assert!(wrong.contains("unknown variant `middle`, expected `start` or `first-edit`"), "{wrong}");
        assert_eq!(
            resolve(serde_json::json!({"candidates": 9})).unwrap_err().to_string(),
            "candidates must be 1 to 8, not 9"
        );
        assert!(resolve(serde_json::json!({"candidates": 0})).is_err());
    }
}
