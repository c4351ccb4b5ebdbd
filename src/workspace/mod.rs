//! The files a run may see and change: the workspace roots and path
//! confinement, the editor's buffers layered over the disk, and the run's
//! private overlay of proposed edits.
//!
//! Nothing in this module writes the user's files: the overlay is memory,
//! and `scratch` writes only its own temporary copy.
//!
//! Its parts:
//! roots and path confinement (`paths`: symlinks followed even when dangling,
//! the protected-file deny-list with its hard-link index, single files
//! outside the roots, `runs_code`: the files that run code later, flagged for
//! review), `Overlay` (buffers over disk, the run's edits on top, the model's
//! reasons; `read_prefix`, the one way a file is read from the disk:
//! non-blocking, regular files only, bounded), `Edit` (the one byte-range
//! replacement: an agent's hunk, a user's change, a step of a document's
//! history), diff hunks, `rebase` (agent hunks over user changes), `scratch`
//! (a copy of the workspace with the overlay applied, for commands)

mod diff;
mod overlay;
mod paths;
mod rebase;
pub mod scratch;

use std::path::{Path, PathBuf};

pub use diff::{Edit, apply_hunks, hunks, sequential_hunks, unified_diff};
pub use overlay::{EditReason, FileBase, FileChange, Overlay, OverlayError, Prefix, Text, read_prefix};
pub use paths::{DEFAULT_PROTECTED, PathError, Protected, RUNS_CODE, Workspace, normalize, real_path, runs_code};
pub use rebase::{Conflict, Rebased, rebase};
pub use scratch::Scratch;

/// The text of an open editor buffer and its version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BufferText {
    pub text: String,
    pub version: i32,
    /// Which document and which state of it this text is: versions alone
    /// cannot tell (a reopened buffer starts again at 1; some clients send
    /// v5, v4, v5).
    pub pin: BufferPin,
}

/// One state of one open document: `generation` is new at every `didOpen`
/// (no pin taken before a close can match the document opened after it);
/// `seq` counts the changes applied since that open.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct BufferPin {
    pub generation: u64,
    pub seq: u64,
}

/// Where unsaved editor buffers come from. The LSP server's document store
/// implements it; the headless CLI uses [`NoBuffers`].
pub trait BufferSource: Send + Sync {
    /// The open buffer at `path` (an absolute path), if the editor has one.
    fn buffer(&self, path: &Path) -> Option<BufferText>;
    /// Every open buffer's path.
    fn open_paths(&self) -> Vec<PathBuf>;
    /// A stand-in for the disk's text of `path` (`Some(None)`: the file is
    /// missing). Only replay uses it; the default reads the real disk.
    fn disk_text(&self, _path: &Path) -> Option<Option<String>> {
        None
    }
    /// Whether a change the editor sent for `path`'s buffer could not be
    /// applied, so the copy here may differ from the editor's.
    fn out_of_sync(&self, _path: &Path) -> bool {
        false
    }
}

/// No editor: every file comes from the disk.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoBuffers;

impl BufferSource for NoBuffers {
    fn buffer(&self, _: &Path) -> Option<BufferText> {
        None
    }
    fn open_paths(&self) -> Vec<PathBuf> {
        Vec::new()
    }
}
