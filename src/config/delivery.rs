//! The delivery section: whether `agentfix.fix` answers when the run and
//! the review are over, or at once with the outcome sent later as
//! `agentfix/runEnded` (`delivery`), used by the LSP front end.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ConfigError;
use super::Source;
use super::layers::{Layers, pick};

/// How `agentfix.fix` answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Delivery {
    /// At once for clients known to time out long requests (Helix, Emacs eglot), else when the run is over.
    #[default]
    Auto,
    /// When the run and the review are over, with the run's result.
    Sync,
    /// At once, with the run's id; the outcome follows as `agentfix/runEnded`.
    Async,
}

impl Delivery {
    /// Whether a run answers at once for a client named `client` (its
    /// `clientInfo.name`): `Auto` does for the clients whose default request
    /// timeout is far below a run (Helix 20 s, eglot 10 s).
    pub fn at_once(self, client: Option<&str>) -> bool {
        match self {
            Delivery::Sync => false,
            Delivery::Async => true,
            Delivery::Auto => client.is_some_and(|name| {
                let name = name.to_ascii_lowercase();
                name == "helix" || name.starts_with("eglot")
            }),
        }
    }
}

impl Layers<'_> {
    pub(super) fn delivery(&mut self) -> Result<Delivery, ConfigError> {
        let l = self;
        Ok(pick!(l, "delivery", delivery, None::<Delivery>, Delivery::Auto))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_answers_at_once_for_the_clients_that_time_out_long_requests() {
        for name in ["helix", "Eglot", "eglot"] {
            assert!(Delivery::Auto.at_once(Some(name)), "{name}");
        }
        for name in [Some("Visual Studio Code"), Some("Neovim"), None] {
            assert!(!Delivery::Auto.at_once(name), "{name:?}");
        }
        assert!(Delivery::Async.at_once(Some("Neovim")));
        assert!(!Delivery::Sync.at_once(Some("helix")));
    }
}
