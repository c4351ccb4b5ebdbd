//! The configuration for a request, and the checks every front end makes
//! before a run, each with its one message.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::Request;
use crate::config::settings::Settings;
use crate::config::{Config, ConfigError};
use crate::downstream::Downstream;
use crate::providers::ModelClient;
use crate::workspace::{BufferSource, Overlay, Workspace};

/// The configuration in force for one request.
pub struct Setup {
    pub config: Config,
}

/// The folders a run works in.
#[derive(Debug, Clone)]
pub enum Roots {
    /// The target must lie in one of these (the CLI's `--root`).
    Containing(Vec<PathBuf>),
    /// The editor's folders: a target outside them is added alone (never
    /// its folder).
    Folders(Vec<PathBuf>),
}

/// Why a request cannot run; the message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error("{path} is outside the workspace root {root}; open its folder as the workspace (CLI: pass --root)")]
    Outside { path: String, root: String },
    #[error("{0} is a protected file (secrets such as .env files, keys and credentials are never sent to the model)")]
    Protected(String),
    #[error(
        "{0} is out of sync: a change the editor sent for it could not be applied, so agentfix's copy may differ from yours; save the file (or close and reopen it), then try again"
    )]
    OutOfSync(String),
}

/// A request checked against its workspace: the configuration and the
/// fresh overlay the run edits (owned by the front end too, so it can watch
/// what the run edits).
pub struct Prepared {
    pub config: Config,
    pub overlay: Arc<Overlay>,
    /// The system prompt to send instead of building it (replay sends the
    /// recorded one).
    pub(super) system: Option<String>,
}

impl Setup {
    /// Loads the configuration for `root` over the editor's settings, with
    /// the request's model and effort over them.
    pub fn load(root: Option<&Path>, editor: &Settings, request: &Request) -> Result<Self, Refusal> {
        Ok(Self { config: Config::load(root, &request.settings_over(editor))? })
    }

    /// A configuration resolved elsewhere (the demo's defaults, a
    /// transcript's record, a bench's settings).
    pub fn new(config: Config) -> Self {
        Self { config }
    }

    /// The downstream language servers the configuration asks for, over `roots`.
    pub fn downstream(&self, roots: Vec<PathBuf>) -> Downstream {
        Downstream::from_config(&self.config.downstream, roots)
    }

    /// The run's workspace (the configured `exclude` patterns on top of the
    /// built-in protected files) and overlay over `buffers`, once the
    /// request's target is in it, not protected, and in sync with the
    /// editor's buffer.
    pub fn prepare(self, roots: Roots, request: &Request, buffers: Arc<dyn BufferSource>) -> Result<Prepared, Refusal> {
        if let Some(count) = request.candidates {
            crate::config::candidates::checked_count(count)?;
        }
        let path = &request.target.path;
        let workspace = match roots {
            Roots::Folders(roots) => Workspace::new(roots).with_protected(&self.config.exclude).with_file(path.clone()),
            Roots::Containing(roots) => {
                let workspace = Workspace::new(roots).with_protected(&self.config.exclude);
                if !workspace.contains(path) {
                    let root = workspace.primary_root().display().to_string();
                    return Err(Refusal::Outside { path: path.display().to_string(), root });
                }
                workspace
            }
        };
        if workspace.is_protected_target(path) {
            return Err(Refusal::Protected(workspace.display(path)));
        }
        if buffers.out_of_sync(path) {
            return Err(Refusal::OutOfSync(workspace.display(path)));
        }
        let overlay = Arc::new(Overlay::new(Arc::new(workspace), buffers));
        Ok(Prepared { config: self.config, overlay, system: None })
    }
}

impl Prepared {
    /// The same run over a fresh overlay with `config` (a candidate's share
    /// of the limits).
    pub(super) fn fresh(&self, config: Config) -> Prepared {
        Prepared { config, overlay: Arc::new(self.overlay.fresh()), system: self.system.clone() }
    }

    /// This run sends `system` as its system prompt, as it is.
    pub(crate) fn with_system(mut self, system: String) -> Self {
        self.system = Some(system);
        self
    }

    pub fn workspace(&self) -> &Workspace {
        self.overlay.workspace()
    }

    /// The model client the configuration names (a missing key is said
    /// here, after the checks of the request).
    pub fn model(&self) -> Result<Arc<dyn ModelClient>, Refusal> {
        Ok(crate::providers::from_config(&self.config.provider)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fix::Target;
    use crate::position::LineRange;
    use crate::workspace::{BufferText, NoBuffers};

    fn request(path: PathBuf) -> Request {
        Request::new(Target { path, lines: LineRange::line(0), problems: Vec::new(), instruction: None })
    }

    fn setup() -> Setup {
        Setup::new(Config::resolve(&Settings::default(), &Settings::default(), &|_| None).unwrap())
    }

    /// Every buffer is out of sync.
    struct Stale;

    impl BufferSource for Stale {
        fn buffer(&self, _: &Path) -> Option<BufferText> {
            None
        }
        fn open_paths(&self) -> Vec<PathBuf> {
            Vec::new()
        }
        fn out_of_sync(&self, _: &Path) -> bool {
            true
        }
    }

    #[test]
    fn prepare_refuses_outside_protected_and_out_of_sync_targets_with_one_message_each() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let other = tempfile::tempdir().unwrap();
        let outside = std::fs::canonicalize(other.path()).unwrap().join("x.py");
        std::fs::write(&outside, "x\n").unwrap();
        std::fs::write(root.join(".env"), "K=v\n").unwrap();
        std::fs::write(root.join("a.py"), "a\n").unwrap();
        let no: Arc<dyn BufferSource> = Arc::new(NoBuffers);
        let refused = |roots, path: &Path, buffers: &Arc<dyn BufferSource>| {
            setup().prepare(roots, &request(path.to_path_buf()), buffers.clone()).err().map(|e| e.to_string())
        };
        let err = refused(Roots::Containing(vec![root.clone()]), &outside, &no).unwrap();
        assert!(err.contains("is outside the workspace root") && err.contains("--root"), "{err}");
        // The editor's folders take a file outside them alone.
        let prepared = setup().prepare(Roots::Folders(vec![root.clone()]), &request(outside.clone()), no.clone());
        let prepared = prepared.unwrap();
        assert!(prepared.workspace().contains(&outside) && !prepared.workspace().contains(&other.path().join("y")));
        let err = refused(Roots::Folders(vec![root.clone()]), &root.join(".env"), &no).unwrap();
        assert!(err.starts_with(".env is a protected file"), "{err}");
        let stale: Arc<dyn BufferSource> = Arc::new(Stale);
        let err = refused(Roots::Folders(vec![root.clone()]), &root.join("a.py"), &stale).unwrap();
        assert!(err.starts_with("a.py is out of sync"), "{err}");
        assert_eq!(refused(Roots::Containing(vec![root.clone()]), &root.join("a.py"), &no), None);
        let many = Request { candidates: Some(50), ..request(root.join("a.py")) };
        let err = setup().prepare(Roots::Folders(vec![root.clone()]), &many, no.clone()).err().unwrap().to_string();
        assert_eq!(err, "candidates must be 1 to 8, not 50");
    }

    #[test]
    fn the_request_s_model_and_effort_go_over_the_editor_s_settings() {
        let editor = Settings { model: Some("editor-model".into()), ..Settings::default() };
        let mut r = request("/w/a.py".into());
        assert_eq!(r.settings_over(&editor).model.as_deref(), Some("editor-model"));
        r.model = Some("  ".into());
        assert_eq!(r.settings_over(&editor).model.as_deref(), Some("editor-model"), "a blank model is none");
        r.model = Some(" run-model ".into());
        r.effort = Some(crate::config::provider::Effort::High);
        let s = r.settings_over(&editor);
        assert_eq!((s.model.as_deref(), s.effort), (Some("run-model"), Some(crate::config::provider::Effort::High)));
    }
}
