//! The way back from `agentfix fix --apply`: before it writes, every file it
//! changes is copied, and every file it creates listed, in a backup under
//! the user's cache directory; `agentfix undo` puts the last one back.
//!
//! A backup is a folder `<cache>/agentfix/backups/<root key>/<time>-<pid>/`
//! (folders 0700, files 0600, as transcripts are) holding one copy per
//! changed file (`0`, `1`, …) and `manifest.json` (a [`Manifest`]), written
//! last: a folder without one is an interrupted backup and is never used.
//! The manifest keeps the SHA-256 of the text the fix wrote to each file,
//! so `undo` can tell that a file changed since, and then refuses (touching
//! nothing) unless forced. An undone backup is removed, so the next `undo`
//! goes one fix further back. The newest [`KEEP`] backups of a root are kept.
//! The editor needs none of this: there the proposal is an edit of the
//! buffers, and the editor's undo reverts it.
//!
//! Files are never rewritten in place, by `--apply` or by `undo`: the new
//! text goes to a new file beside the old one, which is synced and renamed
//! over it ([`replace`]). A hard link of the old file (another name for it,
//! perhaps a protected one, perhaps outside the workspace) keeps its text,
//! and nobody ever reads half a file.
//!
//! Its parts:
//! `--apply`'s backups and `agentfix undo`: copies of the changed files and
//! the list of created ones under the user cache dir (0700/0600, `Manifest`
//! with the SHA-256 of what was written, written last; newest 20 per root),
//! written before any file; restore refused when a file changed since, unless
//! forced; every write of a user's file (`replace`) a new file beside it with
//! the old one's permissions, synced and renamed over it, never in place

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::workspace::{FileChange, real_path};

/// Backups kept per workspace root.
pub const KEEP: usize = 20;

/// Format version of `manifest.json`.
const MANIFEST_VERSION: u32 = 1;

const MANIFEST: &str = "manifest.json";

/// What one `--apply` did, as `manifest.json` records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub version: u32,
    /// The workspace root (canonical).
    pub root: PathBuf,
    /// When the fix was applied, in milliseconds since the Unix epoch.
    pub applied_at_ms: u64,
    pub files: Vec<BackedUp>,
    /// Folders the apply made for new files, outermost first.
    #[serde(default)]
    pub created_dirs: Vec<PathBuf>,
}

/// One file an apply wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackedUp {
    /// Absolute.
    pub path: PathBuf,
    /// Relative to the root, for messages.
    pub display: String,
    /// The copy of the file as it was, in the backup folder; `None` when
    /// the apply created the file.
    pub backup: Option<String>,
    /// SHA-256 (hex) of the text the apply wrote.
    pub applied_sha256: String,
}

/// What `undo` did, or why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Undo {
    /// No backup for this root.
    Nothing,
    /// These files changed since the fix was applied (one sentence each);
    /// nothing was touched.
    Refused(Vec<String>),
    /// Changed files put back, created files removed (display paths).
    Done { restored: Vec<String>, removed: Vec<String> },
}

/// One backup, for `undo --list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub applied_at_ms: u64,
    /// Display paths with what undo would do: `calc.py (restore)`, `new.py (remove)`.
    pub files: Vec<String>,
}

/// The backups of `root`: `<cache>/agentfix/backups/<name>-<hash>`.
pub fn backups_of(root: &Path) -> PathBuf {
    let base = dirs::cache_dir().unwrap_or_else(std::env::temp_dir);
    base.join("agentfix").join("backups").join(root_key(root))
}

/// The last folder name of `root`, made safe, and a hash of the whole path.
fn root_key(root: &Path) -> String {
    let name: String = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '_' })
        .take(32)
        .collect();
    let hash = sha256_hex(root.as_os_str().as_encoded_bytes());
    let name = name.trim_start_matches('.');
    if name.is_empty() { hash[..16].to_string() } else { format!("{name}-{}", &hash[..16]) }
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn now_ms() -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    u64::try_from(now.as_millis()).unwrap_or(u64::MAX)
}

/// Makes `dir` and its missing parents, owner-only.
fn private_dir(dir: &Path) -> io::Result<()> {
    fs::create_dir_all(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Writes a new owner-only file.
fn private_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Gives the file at `path` (symlinks followed, as a write through them
/// would be) the content `bytes`, and makes its folder first if need be,
/// without writing into the file that is there: a new file in the same
/// folder (created exclusively, never through a link left in its place;
/// owner-only until it has the old file's permissions) is written, synced
/// and renamed over it, then the folder is synced. The old file's other
/// hard links keep the old text. What a rename cannot keep: the old file's
/// owner (the new one is the user's), extended attributes, and a file in a
/// folder the user cannot write fails instead of being written.
fn replace(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let path = real_path(path).unwrap_or_else(|| path.to_path_buf());
    let dir = path.parent().ok_or_else(|| io::Error::other(format!("{} has no folder", path.display())))?;
    fs::create_dir_all(dir)?;
    let old = match fs::symlink_metadata(&path) {
        Ok(m) if m.is_file() => Some(m.permissions()),
        Ok(_) => return Err(io::Error::other(format!("{} is not a regular file", path.display()))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    let name: String = path.file_name().unwrap_or_default().to_string_lossy().chars().take(64).collect();
    let (tmp, mut file) = new_beside(dir, &name, old.is_some())?;
    let written = (|| {
        file.write_all(bytes)?;
        if let Some(permissions) = old {
            file.set_permissions(permissions)?;
        }
        file.sync_all()?;
        drop(file);
        fs::rename(&tmp, &path)
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    // The rename is durable once the folder is; a file system that cannot
    // sync a folder has lost nothing else.
    if let Ok(d) = fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// A new file in `dir` beside `name` that nothing else names
/// (`.<name>.agentfix-<pid>-<n>`), owner-only when `private`, else with
/// the mode of any new file (0666 less the umask).
fn new_beside(dir: &Path, name: &str, private: bool) -> io::Result<(PathBuf, fs::File)> {
    for n in 0..100 {
        let tmp = dir.join(format!(".{name}.agentfix-{}-{n}", std::process::id()));
        let mut options = fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, if private { 0o600 } else { 0o666 });
        match options.open(&tmp) {
            Ok(file) => return Ok((tmp, file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(io::ErrorKind::AlreadyExists, format!("no free temporary name beside {name}")))
}

/// Saves a backup of what writing `changes` will overwrite, then writes
/// them ([`replace`]: never in place); returns the display paths written.
/// Nothing is written when the backup cannot be made, or when a file's
/// symlinks now lead out of `root`; when a write fails, the files already
/// written are put back and the backup dropped.
pub fn apply(root: &Path, changes: &[FileChange]) -> Result<Vec<String>, String> {
    // Where each change lands, backed up and written there (the manifest
    // names the file, not a link to it).
    let changes = &landing(root, changes)?;
    let backups = backups_of(root);
    let (dir, manifest) = save(&backups, root, changes)
        .map_err(|e| format!("cannot save a backup in {}: {e}; nothing written", backups.display()))?;
    for (n, change) in changes.iter().enumerate() {
        let written = replace(&change.path, change.new_text.as_bytes());
        if let Err(e) = written {
            let back = restore(&dir, &manifest, n + 1);
            let _ = fs::remove_dir_all(&dir);
            return Err(match back {
                Ok(()) => format!("could not write {}: {e}; the files written before it were put back", change.display),
                Err(b) => format!("could not write {}: {e}; and putting back the others failed: {b}", change.display),
            });
        }
    }
    prune(&backups, &dir);
    Ok(changes.iter().map(|c| c.display.clone()).collect())
}

/// Each change with the path it lands on (symlinks followed), or why
/// none may be written: one leads out of `root`.
fn landing(root: &Path, changes: &[FileChange]) -> Result<Vec<FileChange>, String> {
    let mut targets = Vec::with_capacity(changes.len());
    for change in changes {
        match real_path(&change.path) {
            Some(real) if real.starts_with(root) => targets.push(FileChange { path: real, ..change.clone() }),
            _ => return Err(format!("{} now leads outside {}; nothing written", change.display, root.display())),
        }
    }
    Ok(targets)
}

/// Writes `changes` into a throwaway copy of a workspace (`agentfix eval`'s):
/// as [`apply`] writes them ([`replace`], confined to `root`), without the
/// backup, which nobody would undo.
pub fn write_without_backup(root: &Path, changes: &[FileChange]) -> Result<(), String> {
    for change in landing(root, changes)? {
        replace(&change.path, change.new_text.as_bytes())
            .map_err(|e| format!("could not write {}: {e}", change.display))?;
    }
    Ok(())
}

/// Writes the backup folder: copies of the files as they are on disk now
/// (whatever the run read), then the manifest.
fn save(backups: &Path, root: &Path, changes: &[FileChange]) -> io::Result<(PathBuf, Manifest)> {
    // `backups/` and the root's folder in it: the file names alone say
    // which projects were fixed.
    if let Some(all) = backups.parent() {
        private_dir(all)?;
    }
    private_dir(backups)?;
    let applied_at_ms = now_ms();
    let mut name = format!("{applied_at_ms:016}-{}", std::process::id());
    let mut n = 0;
    let dir = loop {
        let dir = backups.join(&name);
        match fs::create_dir(&dir) {
            Ok(()) => break dir,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 100 => {
                n += 1;
                name = format!("{applied_at_ms:016}-{}-{n}", std::process::id());
            }
            Err(e) => return Err(e),
        }
    };
    let result = (|| {
        private_dir(&dir)?;
        let mut files = Vec::new();
        let mut created_dirs: Vec<PathBuf> = Vec::new();
        for (i, change) in changes.iter().enumerate() {
            let backup = match fs::read(&change.path) {
                Ok(bytes) => {
                    let name = i.to_string();
                    private_file(&dir.join(&name), &bytes)?;
                    Some(name)
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    let mut missing: Vec<PathBuf> =
                        change.path.ancestors().skip(1).take_while(|a| !a.exists()).map(Path::to_path_buf).collect();
                    missing.reverse();
                    for d in missing {
                        if !created_dirs.contains(&d) {
                            created_dirs.push(d);
                        }
                    }
                    None
                }
                Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", change.display))),
            };
            files.push(BackedUp {
                path: change.path.clone(),
                display: change.display.clone(),
                backup,
                applied_sha256: sha256_hex(change.new_text.as_bytes()),
            });
        }
        let manifest =
            Manifest { version: MANIFEST_VERSION, root: root.to_path_buf(), applied_at_ms, files, created_dirs };
        let json = serde_json::to_vec_pretty(&manifest).map_err(io::Error::other)?;
        private_file(&dir.join(MANIFEST), &json)?;
        Ok(manifest)
    })();
    match result {
        Ok(manifest) => Ok((dir, manifest)),
        Err(e) => {
            let _ = fs::remove_dir_all(&dir);
            Err(e)
        }
    }
}

/// Puts back the first `count` files of `manifest` from `dir`.
fn restore(dir: &Path, manifest: &Manifest, count: usize) -> io::Result<()> {
    for f in manifest.files.iter().take(count) {
        match &f.backup {
            Some(copy) => {
                let bytes = fs::read(dir.join(copy))?;
                replace(&f.path, &bytes)?;
            }
            None => match fs::remove_file(&f.path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            },
        }
    }
    // Innermost first; a folder someone put other files in stays.
    for d in manifest.created_dirs.iter().rev() {
        let _ = fs::remove_dir(d);
    }
    Ok(())
}

/// The complete backups in `backups`, newest first.
fn complete(backups: &Path) -> io::Result<Vec<PathBuf>> {
    let mut dirs: Vec<PathBuf> = match fs::read_dir(backups) {
        Ok(entries) => {
            entries.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.join(MANIFEST).is_file()).collect()
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e),
    };
    dirs.sort();
    dirs.reverse();
    Ok(dirs)
}

/// Keeps the newest [`KEEP`] backups; drops older ones, and interrupted
/// ones older than `current`.
fn prune(backups: &Path, current: &Path) {
    let Ok(entries) = fs::read_dir(backups) else { return };
    let mut all: Vec<PathBuf> = entries.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.is_dir()).collect();
    all.sort();
    all.reverse();
    let mut kept = 0;
    for dir in all {
        let whole = dir.join(MANIFEST).is_file();
        let drop = if whole {
            kept += 1;
            kept > KEEP
        } else {
            dir.as_path() < current
        };
        if drop && let Err(e) = fs::remove_dir_all(&dir) {
            tracing::warn!("could not remove the old backup {}: {e}", dir.display());
        }
    }
}

fn read_manifest(dir: &Path) -> Result<Manifest, String> {
    let path = dir.join(MANIFEST);
    let text = fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let m: Manifest =
        serde_json::from_slice(&text).map_err(|e| format!("{} is not a backup manifest: {e}", path.display()))?;
    if m.version > MANIFEST_VERSION {
        return Err(format!("{} was written by a newer agentfix (version {})", path.display(), m.version));
    }
    Ok(m)
}

/// Why undoing `f` would lose work: it is not what the apply wrote.
fn changed_since(f: &BackedUp) -> Result<Option<String>, String> {
    match fs::read(&f.path) {
        Ok(now) if sha256_hex(&now) == f.applied_sha256 => Ok(None),
        Ok(_) => Ok(Some(format!("{} changed since the fix was applied", f.display))),
        // A created file already gone: nothing to remove.
        Err(e) if e.kind() == io::ErrorKind::NotFound && f.backup.is_none() => Ok(None),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            Ok(Some(format!("{} was deleted since the fix was applied", f.display)))
        }
        Err(e) => Err(format!("cannot read {}: {e}", f.display)),
    }
}

/// Restores the last applied fix of `root`: refused when a file changed
/// since, unless `force`. The backup is removed once restored.
pub fn undo(root: &Path, force: bool) -> Result<Undo, String> {
    let backups = backups_of(root);
    let Some(dir) =
        complete(&backups).map_err(|e| format!("cannot read {}: {e}", backups.display()))?.into_iter().next()
    else {
        return Ok(Undo::Nothing);
    };
    let manifest = read_manifest(&dir)?;
    // The manifest lives in the user's own cache; still, it only ever
    // names files inside the root it was made for.
    if manifest.root != root || manifest.files.iter().any(|f| !f.path.starts_with(root)) {
        return Err(format!("{} does not belong to {}", dir.join(MANIFEST).display(), root.display()));
    }
    let mut changed = Vec::new();
    for f in &manifest.files {
        changed.extend(changed_since(f)?);
    }
    if !changed.is_empty() && !force {
        return Ok(Undo::Refused(changed));
    }
    restore(&dir, &manifest, manifest.files.len())
        .map_err(|e| format!("restoring from {} failed: {e}; the backup is kept", dir.display()))?;
    if let Err(e) = fs::remove_dir_all(&dir) {
        tracing::warn!("could not remove the used backup {}: {e}", dir.display());
    }
    let (restored, removed) = manifest.files.iter().partition::<Vec<_>, _>(|f| f.backup.is_some());
    Ok(Undo::Done {
        restored: restored.into_iter().map(|f| f.display.clone()).collect(),
        removed: removed.into_iter().map(|f| f.display.clone()).collect(),
    })
}

/// The backups of `root`, newest first (what `undo` would restore first).
pub fn list(root: &Path) -> Result<Vec<Entry>, String> {
    let backups = backups_of(root);
    let dirs = complete(&backups).map_err(|e| format!("cannot read {}: {e}", backups.display()))?;
    let mut out = Vec::new();
    for dir in dirs {
        let m = read_manifest(&dir)?;
        let files = m
            .files
            .iter()
            .map(|f| format!("{} ({})", f.display, if f.backup.is_some() { "restore" } else { "remove" }))
            .collect();
        out.push(Entry { applied_at_ms: m.applied_at_ms, files });
    }
    Ok(out)
}

/// `2026-11-29 14:03:09 UTC`.
pub fn format_utc(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC", rest / 3600, rest % 3600 / 60, rest % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(root: &Path, rel: &str, original: Option<&str>, new_text: &str) -> FileChange {
        FileChange {
            path: root.join(rel),
            display: rel.into(),
            version: None,
            pin: None,
            original: original.map(Into::into),
            new_text: new_text.into(),
            reasons: Vec::new(),
        }
    }

    #[test]
    fn a_backup_puts_back_bytes_and_removes_what_was_created() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("ws");
        fs::create_dir(&root).unwrap();
        fs::write(root.join("a.py"), "x = 1\r\ny = 2").unwrap();
        let changes = [
            change(&root, "a.py", Some("x = 1\r\ny = 2"), "x = 1\r\ny = 3"),
            change(&root, "new/deep/b.py", None, "B = 1\n"),
        ];
        let backups = tmp.path().join("backups").join(root_key(&root));
        let (dir, manifest) = save(&backups, &root, &changes).unwrap();
        assert_eq!(manifest.created_dirs, vec![root.join("new"), root.join("new/deep")]);
        assert_eq!(manifest.files[0].backup.as_deref(), Some("0"));
        assert_eq!(manifest.files[1].backup, None);
        assert_eq!(manifest.files[1].applied_sha256, sha256_hex(b"B = 1\n"));
        assert_eq!(read_manifest(&dir).unwrap(), manifest);
        for c in &changes {
            fs::create_dir_all(c.path.parent().unwrap()).unwrap();
            fs::write(&c.path, &c.new_text).unwrap();
        }
        assert_eq!(changed_since(&manifest.files[0]), Ok(None));
        fs::write(root.join("new/deep/other.txt"), "the user's").unwrap();
        restore(&dir, &manifest, 2).unwrap();
        assert_eq!(fs::read(root.join("a.py")).unwrap(), b"x = 1\r\ny = 2");
        assert!(!root.join("new/deep/b.py").exists());
        // A folder that holds someone else's file stays.
        assert!(root.join("new/deep/other.txt").exists());
        assert_eq!(changed_since(&manifest.files[0]), Ok(Some("a.py changed since the fix was applied".into())));
    }

    #[cfg(unix)]
    #[test]
    fn a_file_is_replaced_never_rewritten_so_its_other_links_keep_their_text() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let tmp = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(tmp.path()).unwrap();
        fs::create_dir(root.join("ws")).unwrap();
        fs::create_dir(root.join("elsewhere")).unwrap();
        let file = root.join("ws/a.py");
        fs::write(&file, "old\n").unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o754)).unwrap();
        fs::hard_link(&file, root.join("elsewhere/link.py")).unwrap();
        let inode = fs::metadata(&file).unwrap().ino();
        replace(&file, b"new\n").unwrap();
        assert_eq!(fs::read(&file).unwrap(), b"new\n");
        assert_eq!(fs::read(root.join("elsewhere/link.py")).unwrap(), b"old\n");
        let now = fs::metadata(&file).unwrap();
        assert_ne!(now.ino(), inode);
        assert_eq!((now.nlink(), now.permissions().mode() & 0o7777), (1, 0o754));
        // Through a symlink: the file it names is replaced, the link stays.
        std::os::unix::fs::symlink("a.py", root.join("ws/alias.py")).unwrap();
        replace(&root.join("ws/alias.py"), b"via the link\n").unwrap();
        assert!(fs::symlink_metadata(root.join("ws/alias.py")).unwrap().file_type().is_symlink());
        assert_eq!(fs::read(&file).unwrap(), b"via the link\n");
        // A link planted at the temporary name is not written through.
        let planted = root.join(format!("ws/.a.py.agentfix-{}-0", std::process::id()));
        std::os::unix::fs::symlink(root.join("elsewhere/link.py"), &planted).unwrap();
        replace(&file, b"third\n").unwrap();
        assert_eq!(fs::read(root.join("elsewhere/link.py")).unwrap(), b"old\n");
        assert!(fs::symlink_metadata(&planted).unwrap().file_type().is_symlink());
        fs::remove_file(&planted).unwrap();
        // A new file in a new folder; nothing temporary is left behind.
        replace(&root.join("ws/new/b.py"), b"b\n").unwrap();
        assert_eq!(fs::read(root.join("ws/new/b.py")).unwrap(), b"b\n");
        let mut left: Vec<String> =
            fs::read_dir(root.join("ws")).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        left.sort();
        assert_eq!(left, ["a.py", "alias.py", "new"]);
        // Not a regular file: refused, untouched.
        fs::create_dir(root.join("ws/dir")).unwrap();
        assert!(replace(&root.join("ws/dir"), b"x").is_err());
        assert!(root.join("ws/dir").is_dir());
    }

    #[test]
    fn only_the_newest_backups_are_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let backups = tmp.path();
        let make = |name: &str, whole: bool| {
            fs::create_dir(backups.join(name)).unwrap();
            if whole {
                fs::write(backups.join(name).join(MANIFEST), "{}").unwrap();
            }
        };
        for i in 0..(KEEP + 5) {
            make(&format!("{:016}-1", 1000 + i), true);
        }
        make("0000000000000999-7", false);
        make("9999999999999999-7", false);
        let current = backups.join(format!("{:016}-1", 1000 + KEEP + 4));
        prune(backups, &current);
        let left = complete(backups).unwrap();
        assert_eq!(left.len(), KEEP);
        assert_eq!(left[0], current);
        assert_eq!(left[KEEP - 1], backups.join(format!("{:016}-1", 1005)));
        // An interrupted backup older than this one goes; a newer one may be another run's.
        assert!(!backups.join("0000000000000999-7").exists());
        assert!(backups.join("9999999999999999-7").exists());
    }

    #[test]
    fn dates_and_keys() {
        assert_eq!(format_utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(format_utc(951_782_400_000), "2000-02-29 00:00:00 UTC");
        assert_eq!(format_utc(1_796_138_007_218), "2026-12-01 15:13:27 UTC");
        let a = root_key(Path::new("/home/u/my proj"));
        assert!(a.starts_with("my_proj-") && a.len() == "my_proj-".len() + 16, "{a}");
        assert_ne!(a, root_key(Path::new("/home/v/my proj")));
        assert_eq!(root_key(Path::new("/")).len(), 16);
        assert!(root_key(Path::new("/w/.hidden")).starts_with("hidden-"));
        assert!(root_key(Path::new("/w/проект")).starts_with("______-"));
    }
}
