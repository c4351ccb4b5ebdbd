//! The client's buffers as a run's `BufferSource`: the texts the prompt
//! embeds first, then `fs/read_text_file` when the client offers it (an
//! editor answers with its buffer, unsaved changes included), else the
//! disk. The overlay asks only for paths it has confined to the workspace
//! and checked against the protected files, so the client is never asked
//! for anything else. A read the client refuses, or does not answer within
//! [`READ_TIMEOUT`], falls back to the disk.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use agent_client_protocol::v1::schema::ReadTextFileRequest;
use tokio::runtime::{Handle, RuntimeFlavor};
use tokio_util::sync::CancellationToken;

use super::peer::Peer;
use crate::workspace::{BufferPin, BufferSource, BufferText};

/// How long one `fs/read_text_file` may take.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// A text longer than this from the client is not taken (the overlay reads
/// no larger file from the disk either).
const MAX_TEXT_BYTES: usize = 8 * 1024 * 1024;

pub(super) struct ClientBuffers {
    /// `None`: the client does not offer `fs.readTextFile`.
    peer: Option<Peer>,
    embedded: HashMap<PathBuf, String>,
    cancel: CancellationToken,
    runtime: Handle,
    reads: AtomicU64,
}

impl ClientBuffers {
    pub fn new(peer: Option<Peer>, embedded: Vec<(PathBuf, String)>, cancel: CancellationToken) -> Self {
        Self {
            peer,
            embedded: embedded.into_iter().collect(),
            cancel,
            runtime: Handle::current(),
            reads: AtomicU64::new(0),
        }
    }

    /// The client's text of `path`, or `None` (refused, no answer in time,
    /// the turn cancelled, or a runtime that cannot wait).
    fn read(&self, peer: &Peer, path: &Path) -> Option<String> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let (peer, cancel, asked) = (peer.clone(), self.cancel.clone(), path.to_path_buf());
        let request = ReadTextFileRequest::new(peer.session.clone(), asked.clone());
        self.runtime.spawn(async move {
            let answer = peer.ask(request, READ_TIMEOUT, &cancel).await;
            let text = match answer {
                Ok(r) => Some(r.content),
                Err(e) => {
                    tracing::debug!(path = %asked.display(), "fs/read_text_file: {e:?}; reading the disk");
                    None
                }
            };
            let _ = tx.send(text);
        });
        // The overlay is synchronous; it is called on the blocking pool (the
        // file tools) and on the runtime's workers, where waiting must hand
        // the worker's other tasks on first.
        let wait = || rx.recv().ok().flatten();
        match Handle::try_current().map(|h| h.runtime_flavor()) {
            Ok(RuntimeFlavor::CurrentThread) => {
                tracing::warn!("fs/read_text_file cannot be waited for on this runtime; reading the disk");
                None
            }
            Ok(_) => tokio::task::block_in_place(wait),
            Err(_) => wait(),
        }
    }
}

impl BufferSource for ClientBuffers {
    fn buffer(&self, path: &Path) -> Option<BufferText> {
        let text = match self.embedded.get(path) {
            Some(text) => text.clone(),
            None => self.read(self.peer.as_ref()?, path)?,
        };
        if text.len() > MAX_TEXT_BYTES {
            return None;
        }
        // Every read is its own state of the buffer: nothing here keeps
        // versions, and a proposal is not rebased in ACP.
        let seq = self.reads.fetch_add(1, Ordering::Relaxed);
        Some(BufferText { text, version: 0, pin: BufferPin { generation: 0, seq } })
    }

    fn open_paths(&self) -> Vec<PathBuf> {
        self.embedded.keys().cloned().collect()
    }
}
