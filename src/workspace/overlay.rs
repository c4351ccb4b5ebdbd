//! A run's private view of the workspace: the editor's buffers over the disk,
//! with the run's own edits on top. The first read of a file pins the text
//! (and buffer version) the run works from, so every later read and the final
//! versioned edit agree on one base.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use super::{BufferPin, BufferSource, PathError, Workspace, real_path};

/// Files larger than this are not loaded into a run.
const MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OverlayError {
    #[error(transparent)]
    Path(#[from] PathError),
    #[error("`{0}` is not a regular file")]
    NotRegular(String),
    #[error("file `{0}` does not exist")]
    NotFound(String),
    #[error("`{0}` is a directory, not a file")]
    IsDirectory(String),
    #[error("file `{0}` is not UTF-8 text")]
    NotText(String),
    #[error("file `{0}` is larger than {MAX_FILE_BYTES} bytes")]
    TooLarge(String),
    #[error("could not read `{0}`: {1}")]
    Io(String, String),
    #[error(
        "`{0}` has other names (hard links), so a change to it would change them too; agentfix does not edit such a file: do not try to change it, tell the user instead"
    )]
    HardLinked(String),
}

/// The first bytes of a regular file, and its length when it was opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prefix {
    pub bytes: Vec<u8>,
    pub len: u64,
}

/// Reads at most `limit` bytes of a regular file, without ever blocking on
/// something else: it is opened non-blocking (a FIFO swapped in after a
/// metadata check would otherwise wait for a writer forever) and checked
/// through the open descriptor. The one way files are read from the disk,
/// by the overlay and by whoever reads the workspace besides the tools
/// (project instructions); the path must have been through
/// [`Workspace::resolve`] first.
pub fn read_prefix(path: &Path, shown: &str, limit: u64) -> Result<Prefix, OverlayError> {
    use std::io::Read;
    let io = |e: std::io::Error| OverlayError::Io(shown.to_string(), e.to_string());
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK | libc::O_NOCTTY);
    let file = options.open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(OverlayError::NotRegular(shown.to_string()));
    }
    let mut bytes = Vec::with_capacity(meta.len().min(limit) as usize);
    file.take(limit).read_to_end(&mut bytes).map_err(io)?;
    Ok(Prefix { bytes, len: meta.len() })
}

/// Reads a whole regular file of at most [`MAX_FILE_BYTES`].
fn read_regular(path: &Path, shown: &str) -> Result<Vec<u8>, OverlayError> {
    let prefix = read_prefix(path, shown, MAX_FILE_BYTES + 1)?;
    if prefix.bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(OverlayError::TooLarge(shown.to_string()));
    }
    Ok(prefix.bytes)
}

/// A file's text in a run: shared, never copied by a read. The base and
/// the run's current text are one allocation until the run changes the
/// file, and every read hands out the same one (a 50 MB buffer read and
/// searched by a run exists once here, not once per read).
pub type Text = Arc<String>;

/// Where a file's base text came from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Base {
    /// An open editor buffer at this version (and this state of it).
    Buffer { text: Text, version: i32, pin: BufferPin },
    /// The disk (no buffer open).
    Disk { text: Text },
    /// The file did not exist.
    Missing,
}

impl Base {
    fn text(&self) -> Option<&Text> {
        match self {
            Base::Buffer { text, .. } | Base::Disk { text } => Some(text),
            Base::Missing => None,
        }
    }
}

#[derive(Debug)]
struct Entry {
    base: Base,
    /// The run's current text; `None` while a missing file is not created.
    current: Option<Text>,
    /// The model's reasons for its edits of this file, with the text each
    /// edit inserted (to tell which hunk a reason belongs to).
    reasons: Vec<EditReason>,
}

impl Entry {
    /// Whether the run's text is still its base (the same allocation, which
    /// a read never copies, or an edit that put the text back).
    fn unchanged(&self) -> bool {
        match (&self.current, self.base.text()) {
            (Some(now), Some(base)) => Arc::ptr_eq(now, base) || now == base,
            (None, None) => true,
            _ => false,
        }
    }
}

/// Why the model made one edit (the edit tools' optional `reason`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditReason {
    pub reason: String,
    /// The text the edit inserted.
    pub inserted: String,
}

/// One file the run changed, relative to the base it read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    pub path: PathBuf,
    /// The workspace-relative display path.
    pub display: String,
    /// The buffer version the run read; `None` when it read the disk.
    pub version: Option<i32>,
    /// The state of the buffer the run read (which open of the document,
    /// how many changes into it); `None` when it read the disk.
    pub pin: Option<BufferPin>,
    /// The base text; `None` for a file the run created.
    pub original: Option<String>,
    pub new_text: String,
    /// The model's reasons for its edits of this file, in order.
    pub reasons: Vec<EditReason>,
}

/// The base a run read for one file (for transcripts and replay).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileBase {
    pub path: PathBuf,
    /// `buffer`, `disk` or `missing`.
    pub source: &'static str,
    pub version: Option<i32>,
    pub text: Option<Text>,
}

/// The overlay of one run.
pub struct Overlay {
    workspace: Arc<Workspace>,
    buffers: Arc<dyn BufferSource>,
    files: Mutex<BTreeMap<PathBuf, Entry>>,
}

impl Overlay {
    pub fn new(workspace: Arc<Workspace>, buffers: Arc<dyn BufferSource>) -> Self {
        Self { workspace, buffers, files: Mutex::new(BTreeMap::new()) }
    }

    /// A new overlay over the same workspace and buffers, with no edits
    /// (a candidate's own).
    pub fn fresh(&self) -> Self {
        Self::new(self.workspace.clone(), self.buffers.clone())
    }

    pub fn workspace(&self) -> &Workspace {
        &self.workspace
    }

    pub fn buffers(&self) -> &dyn BufferSource {
        &*self.buffers
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<PathBuf, Entry>> {
        self.files.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Resolves a model-given path inside the workspace.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, OverlayError> {
        Ok(self.workspace.resolve(path)?)
    }

    fn load(&self, path: &Path) -> Result<Base, OverlayError> {
        let shown = self.workspace.display(path);
        // Whoever named the path (the model through `resolve`, the editor's
        // target), the overlay itself never loads a path outside the run's
        // view or a protected one.
        let real = real_path(path);
        if !self.workspace.contains(path) || real.as_ref().is_none_or(|r| !self.workspace.contains(r)) {
            return Err(PathError::Outside(shown).into());
        }
        if self.workspace.is_protected(path) || real.is_some_and(|r| self.workspace.is_protected(&r)) {
            return Err(PathError::Protected(shown).into());
        }
        if let Some(buf) = self.buffers.buffer(path) {
            return Ok(Base::Buffer { text: Arc::new(buf.text), version: buf.version, pin: buf.pin });
        }
        if let Some(pinned) = self.buffers.disk_text(path) {
            return Ok(pinned.map_or(Base::Missing, |text| Base::Disk { text: Arc::new(text) }));
        }
        match std::fs::metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Base::Missing),
            Err(e) => return Err(OverlayError::Io(shown, e.to_string())),
            Ok(m) if m.is_dir() => return Err(OverlayError::IsDirectory(shown)),
            // A FIFO, socket or device could block or never end.
            Ok(m) if !m.is_file() => return Err(OverlayError::NotRegular(shown)),
            Ok(m) if m.len() > MAX_FILE_BYTES => return Err(OverlayError::TooLarge(shown)),
            Ok(_) => {}
        }
        let bytes = read_regular(path, &shown)?;
        let text = String::from_utf8(bytes).map_err(|_| OverlayError::NotText(shown))?;
        Ok(Base::Disk { text: Arc::new(text) })
    }

    /// Runs `f` on the entry for `path`, pinning the base on first use.
    fn with_entry<T>(
        &self,
        path: &Path,
        f: impl FnOnce(&mut Entry) -> Result<T, OverlayError>,
    ) -> Result<T, OverlayError> {
        // The file is read without the lock: slow I/O on one file must not
        // hold up every other tool call of the run. If two calls race, the
        // first base inserted wins, so every reader agrees on one.
        let loaded = if self.lock().contains_key(path) { None } else { Some(self.load(path)?) };
        let mut files = self.lock();
        let entry = files.entry(path.to_path_buf()).or_insert_with(|| {
            let base = loaded.unwrap_or(Base::Missing);
            let current = base.text().cloned();
            Entry { base, current, reasons: Vec::new() }
        });
        f(entry)
    }

    /// The run's current text of `path` (absolute, already resolved):
    /// shared, not a copy.
    pub fn read(&self, path: &Path) -> Result<Text, OverlayError> {
        let shown = self.workspace.display(path);
        self.with_entry(path, |e| e.current.clone().ok_or(OverlayError::NotFound(shown)))
    }

    /// Whether `path` exists in the run's view.
    pub fn exists(&self, path: &Path) -> bool {
        self.read(path).is_ok()
    }

    /// Refuses to change a file with more than one link (symlinks
    /// followed). Its other names may be anywhere, outside the roots too,
    /// where no walk can see them; the editor may save it in place, so the
    /// change would reach them all. Another name of a protected file is
    /// refused as protected.
    fn editable(&self, path: &Path) -> Result<(), OverlayError> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            if let Ok(m) = std::fs::metadata(path)
                && m.is_file()
                && m.nlink() > 1
            {
                let shown = self.workspace.display(path);
                if self.workspace.is_protected_target(path) {
                    return Err(PathError::Protected(shown).into());
                }
                return Err(OverlayError::HardLinked(shown));
            }
        }
        Ok(())
    }

    /// Replaces the whole text of `path` (creating it if needed). Returns
    /// whether the file existed in the run's view before.
    pub fn write(&self, path: &Path, text: String) -> Result<bool, OverlayError> {
        self.editable(path)?;
        self.with_entry(path, |e| {
            let existed = e.current.is_some();
            e.current = Some(Arc::new(text));
            Ok(existed)
        })
    }

    /// Atomically transforms the current text of an existing file.
    pub fn update<E>(
        &self,
        path: &Path,
        f: impl FnOnce(&str) -> Result<String, E>,
    ) -> Result<Result<(), E>, OverlayError> {
        self.editable(path)?;
        let shown = self.workspace.display(path);
        self.with_entry(path, |e| {
            let current = e.current.as_deref().ok_or(OverlayError::NotFound(shown))?;
            Ok(f(current).map(|new| e.current = Some(Arc::new(new))))
        })
    }

    /// Records the model's reason for an edit of `path` that inserted `inserted`.
    pub fn note_reason(&self, path: &Path, reason: &str, inserted: &str) {
        let reason = reason.trim();
        if reason.is_empty() {
            return;
        }
        if let Some(e) = self.lock().get_mut(path) {
            e.reasons.push(EditReason { reason: reason.chars().take(300).collect(), inserted: inserted.to_string() });
        }
    }

    /// Whether the run changed anything.
    pub fn is_dirty(&self) -> bool {
        self.lock().values().any(|e| !e.unchanged())
    }

    /// The files the run created or changed (their current text; `None`
    /// for one it emptied out of existence): used by `grep` and
    /// `list_files` so that the run sees its own edits. A file only read is
    /// not here, so reading a hidden or ignored file does not make later
    /// walks include it.
    pub fn touched(&self) -> Vec<(PathBuf, Option<Text>)> {
        self.lock().iter().filter(|(_, e)| !e.unchanged()).map(|(p, e)| (p.clone(), e.current.clone())).collect()
    }

    /// Every file the run read or wrote, with the base it started from.
    pub fn bases(&self) -> Vec<FileBase> {
        self.lock()
            .iter()
            .map(|(path, e)| {
                let (source, version, text) = match &e.base {
                    Base::Buffer { text, version, .. } => ("buffer", Some(*version), Some(text.clone())),
                    Base::Disk { text } => ("disk", None, Some(text.clone())),
                    Base::Missing => ("missing", None, None),
                };
                FileBase { path: path.clone(), source, version, text }
            })
            .collect()
    }

    /// Every file the run changed, in path order.
    pub fn changes(&self) -> Vec<FileChange> {
        self.lock()
            .iter()
            .filter_map(|(path, e)| {
                if e.unchanged() {
                    return None;
                }
                let new_text = e.current.as_deref()?.clone();
                let (version, pin, original) = match &e.base {
                    Base::Buffer { text, version, pin } => (Some(*version), Some(*pin), Some(text.to_string())),
                    Base::Disk { text } => (None, None, Some(text.to_string())),
                    Base::Missing => (None, None, None),
                };
                Some(FileChange {
                    path: path.clone(),
                    display: self.workspace.display(path),
                    version,
                    pin,
                    original,
                    new_text,
                    reasons: e.reasons.clone(),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspace::BufferText;

    struct OneBuffer(PathBuf, String, i32);
    impl BufferSource for OneBuffer {
        fn buffer(&self, path: &Path) -> Option<BufferText> {
            (path == self.0).then(|| BufferText { text: self.1.clone(), version: self.2, pin: Default::default() })
        }
        fn open_paths(&self) -> Vec<PathBuf> {
            vec![self.0.clone()]
        }
    }

    fn setup() -> (tempfile::TempDir, Overlay, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let ws = Arc::new(Workspace::new(vec![dir.path().to_path_buf()]));
        let root = ws.primary_root().to_path_buf();
        std::fs::write(root.join("open.py"), "disk text\n").unwrap();
        std::fs::write(root.join("closed.py"), "closed\n").unwrap();
        let buffers = Arc::new(OneBuffer(root.join("open.py"), "buffer text\n".into(), 4));
        let ov = Overlay::new(ws, buffers);
        (dir, ov, root.join("open.py"), root.join("closed.py"))
    }

    #[test]
    fn buffers_win_over_disk_and_edits_stay_private() {
        let (_d, ov, open, closed) = setup();
        assert_eq!(ov.read(&open).unwrap().as_str(), "buffer text\n");
        assert_eq!(ov.read(&closed).unwrap().as_str(), "closed\n");
        ov.write(&open, "changed\n".into()).unwrap();
        assert_eq!(ov.read(&open).unwrap().as_str(), "changed\n");
        assert_eq!(std::fs::read_to_string(&open).unwrap(), "disk text\n");
        let changes = ov.changes();
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].version, Some(4));
        assert_eq!(changes[0].original.as_deref(), Some("buffer text\n"));
        assert_eq!(changes[0].display, "open.py");
    }

    #[test]
    fn new_files_have_no_original_and_unchanged_files_no_change() {
        let (_d, ov, _open, closed) = setup();
        let new = ov.resolve("pkg/new.py").unwrap();
        assert_eq!(ov.read(&new), Err(OverlayError::NotFound("pkg/new.py".into())));
        assert!(!ov.write(&new, "hello\n".into()).unwrap());
        ov.write(&closed, "closed\n".into()).unwrap();
        let changes = ov.changes();
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].original, None);
        assert_eq!(changes[0].version, None);
        assert!(!new.exists());
    }

    #[test]
    fn update_is_atomic_and_reports_the_closure_error() {
        let (_d, ov, open, _) = setup();
        let r: Result<(), &str> = ov.update(&open, |_| Err("nope")).unwrap();
        assert_eq!(r, Err("nope"));
        assert!(!ov.is_dirty());
        ov.update::<()>(&open, |t| Ok(t.replace("buffer", "edited"))).unwrap().unwrap();
        assert_eq!(ov.read(&open).unwrap().as_str(), "edited text\n");
        assert!(ov.is_dirty());
    }

    #[test]
    fn directories_and_binary_files_are_errors() {
        let (_d, ov, open, _) = setup();
        let root = open.parent().unwrap().to_path_buf();
        std::fs::create_dir(root.join("dir")).unwrap();
        std::fs::write(root.join("bin"), [0xff, 0xfe, 0x00]).unwrap();
        assert!(matches!(ov.read(&root.join("dir")), Err(OverlayError::IsDirectory(_))));
        assert!(matches!(ov.read(&root.join("bin")), Err(OverlayError::NotText(_))));
    }

    #[cfg(unix)]
    #[test]
    fn multiply_linked_files_are_read_but_never_edited() {
        let (_d, ov, open, closed) = setup();
        let root = closed.parent().unwrap().to_path_buf();
        std::fs::hard_link(&closed, root.join("twin.py")).unwrap();
        std::os::unix::fs::symlink("closed.py", root.join("alias.py")).unwrap();
        assert_eq!(ov.read(&closed).unwrap().as_str(), "closed\n");
        for p in [&closed, &root.join("twin.py"), &root.join("alias.py")] {
            let shown = ov.workspace().display(p);
            assert_eq!(ov.write(p, "x".into()), Err(OverlayError::HardLinked(shown.clone())));
            assert_eq!(ov.update::<()>(p, |t| Ok(t.to_uppercase())), Err(OverlayError::HardLinked(shown)));
        }
        assert!(ov.changes().is_empty());
        // Another name of a protected file is refused as protected, read or edit.
        std::fs::write(root.join(".env"), "TOKEN=1\n").unwrap();
        std::fs::hard_link(root.join(".env"), root.join("notes.txt")).unwrap();
        let notes = root.join("notes.txt");
        assert_eq!(ov.read(&notes), Err(OverlayError::Path(PathError::Protected("notes.txt".into()))));
        assert_eq!(ov.write(&notes, "x".into()), Err(OverlayError::Path(PathError::Protected("notes.txt".into()))));
        // An open buffer of a linked file is not edited either.
        std::fs::hard_link(&open, root.join("open-twin.py")).unwrap();
        assert!(matches!(ov.write(&open, "x".into()), Err(OverlayError::HardLinked(_))));
    }

    #[cfg(unix)]
    #[test]
    fn fifos_and_devices_are_refused_without_blocking_and_other_files_still_read() {
        let (_d, ov, open, closed) = setup();
        let root = open.parent().unwrap().to_path_buf();
        let fifo = root.join("pipe");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // On a thread, so that a regression hangs only the thread and fails the test.
        let (tx, rx) = std::sync::mpsc::channel();
        let ov = Arc::new(ov);
        let reader = ov.clone();
        std::thread::spawn(move || {
            let _ = tx.send(reader.read(&fifo));
        });
        let r = rx.recv_timeout(std::time::Duration::from_secs(10)).expect("reading a FIFO must not block");
        assert_eq!(r, Err(OverlayError::NotRegular("pipe".into())));
        assert_eq!(ov.read(&closed).unwrap().as_str(), "closed\n");
        // A link out (to a device) is refused by resolve; the overlay refuses it too.
        std::os::unix::fs::symlink("/dev/zero", root.join("zero")).unwrap();
        assert_eq!(ov.read(&root.join("zero")), Err(OverlayError::Path(PathError::Outside("zero".into()))));
    }
}
