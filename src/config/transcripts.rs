//! The transcripts section: whether run transcripts are written, and where
//! (`transcripts`, `transcriptDir`).

use std::path::PathBuf;

use super::Source;
use super::layers::{Layers, pick};

/// Where run transcripts go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranscriptsConfig {
    /// `None` when transcripts are off.
    pub dir: Option<PathBuf>,
}

impl Layers<'_> {
    pub(super) fn transcripts(&mut self) -> TranscriptsConfig {
        let l = self;
        let on = pick!(l, "transcripts", transcripts, l.flag("AGENTFIX_TRANSCRIPTS"), true);
        let dir = pick!(
            l,
            "transcriptDir",
            transcript_dir,
            l.env("AGENTFIX_TRANSCRIPT_DIR").map(PathBuf::from),
            dirs::cache_dir().unwrap_or_else(std::env::temp_dir).join("agentfix").join("transcripts")
        );
        TranscriptsConfig { dir: on.then_some(dir) }
    }
}
