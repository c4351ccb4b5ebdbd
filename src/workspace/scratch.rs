//! A scratch copy of the workspace with the run's overlay applied, so that a
//! command (tests, a linter, a build) sees the run's proposal without
//! anything being written to the user's files.
//!
//! The run's edits live only in its [`Overlay`]; a program cannot read an
//! overlay, so the command needs real files. Writing the edits into the
//! user's tree would break the promise that nothing touches the disk before
//! the user accepts the proposal, so the command runs in a copy instead:
//!
//! - **What is copied**: every file of the primary workspace root that is not
//!   ignored by `.gitignore`, `.ignore` or `.git/info/exclude` (the same rules
//!   as ripgrep and the `list_files` tool), hidden files included, with its
//!   relative path and permissions (executable bits). Files are copied with
//!   `std::fs::copy`, never hard-linked: a command writing a hard-linked file
//!   would write the user's file. (On Linux the copy uses `copy_file_range`,
//!   which shares the blocks on file systems with reflinks.) Modification
//!   times are not preserved: every copied file is newer than any earlier
//!   build, so incremental builds never mistake a copy for an already built
//!   file.
//! - **Then the run's view is written on top**: the text of each open editor
//!   buffer (unsaved edits) and every file the run changed or created
//!   ([`Overlay::changes`]). The copy shows the run's proposal, not the disk.
//! - **What is not copied**: ignored files and directories (`target/`,
//!   `node_modules/`, `.venv/`, build output, caches). They are often large,
//!   copying them on every command would make it slow, and build output is
//!   regenerated anyway. Projects that need an ignored dependency directory
//!   must create it in the command itself, for example
//!   `["sh", "-c", "npm ci && npm test"]` or
//!   `["sh", "-c", "python -m venv .venv && .venv/bin/pip install -e . && .venv/bin/pytest"]`;
//!   otherwise the command sees it missing. `.git/` is not copied either, so
//!   `git` commands do not work in the copy. Only the primary root is copied
//!   (other roots of a multi-root workspace are not), sockets and FIFOs are
//!   skipped, and a workspace of more than 200,000 files or 2 GiB is refused.
//! - **Symbolic links** are recreated only when their target is relative and
//!   stays inside the workspace, and still resolves inside the copy once
//!   everything is in place; links that point out of the workspace (or
//!   nowhere) are left out, so a command can never write through the copy
//!   into a file outside it.
//! - **Cargo builds** go to a persistent directory per workspace under the
//!   user's cache directory (`CARGO_TARGET_DIR`, see [`Scratch::env`]), so
//!   dependencies are built once across runs and the user's `target/` is
//!   never written.
//!
//! The copy lives in a fresh private temporary directory and is removed when
//! the [`Scratch`] is dropped.

use std::collections::HashSet;
use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

use super::{Overlay, Workspace};

/// A workspace with more files than this is not copied.
const MAX_FILES: usize = 200_000;
/// A workspace with more bytes than this is not copied.
const MAX_BYTES: u64 = 2 * 1024 * 1024 * 1024;

/// A scratch copy of the primary workspace root with the run's overlay
/// applied. Removed on drop.
pub struct Scratch {
    /// The private temporary directory holding the copy; `None` only while
    /// dropping.
    dir: Option<tempfile::TempDir>,
    /// The copy of the workspace root: `<dir>/<name of the root>`.
    root: PathBuf,
    /// `CARGO_TARGET_DIR` for commands run in the copy.
    target_dir: PathBuf,
    /// Entries that could not be copied, with the reason.
    skipped: Vec<String>,
}

impl std::fmt::Debug for Scratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scratch").field("root", &self.root).field("target_dir", &self.target_dir).finish()
    }
}

impl Scratch {
    /// Copies the workspace's primary root (minus ignored files and `.git/`)
    /// into a new temporary directory and writes the run's view on top:
    /// open buffers, then every change of `overlay`.
    pub fn create(overlay: &Overlay) -> io::Result<Scratch> {
        let workspace = overlay.workspace();
        let Some(source) = workspace.roots().first() else {
            return Err(io::Error::other("the workspace has no root folder to copy"));
        };
        if !fs::metadata(source)?.is_dir() {
            return Err(io::Error::other(format!("the workspace root {} is not a directory", source.display())));
        }
        let dir = tempfile::Builder::new().prefix("agentfix-scratch-").tempdir()?;
        let base = fs::canonicalize(dir.path()).unwrap_or_else(|_| dir.path().to_path_buf());
        let name = source.file_name().map(OsString::from).unwrap_or_else(|| OsString::from("workspace"));
        let root = base.join(name);
        // From here on, an error drops `scratch`, which removes the copy.
        let mut scratch = Scratch { dir: Some(dir), root, target_dir: target_dir_for(source), skipped: Vec::new() };
        fs::create_dir(&scratch.root)?;
        let copied = copy_tree(source, &scratch.root, workspace)?;
        scratch.skipped = copied.skipped;
        drop_escaping_links(&scratch.root, copied.links)?;
        apply_view(overlay, source, &scratch.root, &copied.files)?;
        Ok(scratch)
    }

    /// The copy of the workspace root: run commands here.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Environment to add to commands run in the copy: `CARGO_TARGET_DIR`,
    /// a persistent directory per workspace under the user's cache directory
    /// (`<cache>/agentfix/scratch-target/<hash of the workspace root>`), so
    /// Cargo builds are incremental across runs and never write into the
    /// user's `target/`; and `AGENTFIX_SCRATCH=1`.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("CARGO_TARGET_DIR".to_string(), self.target_dir.to_string_lossy().into_owned()),
            ("AGENTFIX_SCRATCH".to_string(), "1".to_string()),
        ]
    }

    /// Files and directories that could not be copied (unreadable, …), each
    /// with the reason; empty when the copy is complete.
    pub fn skipped(&self) -> &[String] {
        &self.skipped
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let Some(dir) = self.dir.take() else { return };
        let path = dir.path().to_path_buf();
        if dir.close().is_err() {
            // A command may have left read-only directories behind.
            make_tree_writable(&path);
            let _ = fs::remove_dir_all(&path);
        }
    }
}

/// The persistent Cargo target directory of the workspace at `root`.
fn target_dir_for(root: &Path) -> PathBuf {
    let base = dirs::cache_dir().unwrap_or_else(std::env::temp_dir);
    base.join("agentfix")
        .join("scratch-target")
        .join(format!("{:016x}", stable_hash(root.as_os_str().as_encoded_bytes())))
}

/// FNV-1a: unlike `DefaultHasher`, the same on every build and release.
fn stable_hash(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// What [`copy_tree`] made.
#[derive(Default)]
struct Copied {
    /// Relative paths of the regular files copied.
    files: HashSet<PathBuf>,
    /// Relative paths of the symbolic links recreated.
    links: Vec<PathBuf>,
    skipped: Vec<String>,
}

/// Copies the non-ignored files of `source` into `dest_root`.
fn copy_tree(source: &Path, dest_root: &Path, workspace: &Workspace) -> io::Result<Copied> {
    let mut copied = Copied::default();
    let mut bytes: u64 = 0;
    let walker = ignore::WalkBuilder::new(source)
        .hidden(false)
        .git_ignore(true)
        .git_global(false)
        .git_exclude(true)
        .require_git(false)
        .follow_links(false)
        // Protected files (`.env`, keys, `.git/`) stay out of the copy: a
        // command's output goes to the model.
        .filter_entry({
            let workspace = workspace.clone();
            move |e| e.file_name() != ".git" && !workspace.is_protected(e.path())
        })
        .build();
    for entry in walker {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                copied.skipped.push(e.to_string());
                continue;
            }
        };
        if entry.depth() == 0 {
            continue;
        }
        let Some(kind) = entry.file_type() else { continue };
        let Some(rel) = relative(source, entry.path()) else { continue };
        let dest = dest_root.join(&rel);
        let result = if kind.is_dir() {
            fs::create_dir_all(&dest)
        } else if kind.is_file() {
            if copied.files.len() >= MAX_FILES {
                return Err(too_large(&format!("more than {MAX_FILES} files")));
            }
            let copy = create_parent(&dest).and_then(|()| fs::copy(entry.path(), &dest));
            copy.map(|n| {
                bytes = bytes.saturating_add(n);
                copied.files.insert(rel.clone());
            })
        } else if kind.is_symlink() {
            copy_link(entry.path(), &rel, &dest).map(|made| {
                if made {
                    copied.links.push(rel.clone());
                }
            })
        } else {
            // Sockets, FIFOs and devices: reading a FIFO would block.
            Ok(())
        };
        if let Err(e) = result {
            copied.skipped.push(format!("{}: {e}", rel.display()));
        }
        if bytes > MAX_BYTES {
            return Err(too_large(&format!("more than {} MiB", MAX_BYTES / (1024 * 1024))));
        }
    }
    Ok(copied)
}

fn too_large(what: &str) -> io::Error {
    io::Error::other(format!(
        "the workspace has {what} not ignored by .gitignore; it is too large to copy for a command \
         (add build output and data to .gitignore or .ignore)"
    ))
}

fn create_parent(path: &Path) -> io::Result<()> {
    match path.parent() {
        Some(parent) => fs::create_dir_all(parent),
        None => Ok(()),
    }
}

/// `path` relative to `root`, when it is under it and names something
/// (only plain components, not empty).
fn relative(root: &Path, path: &Path) -> Option<PathBuf> {
    let rel = path.strip_prefix(root).ok()?;
    let plain = rel.components().all(|c| matches!(c, Component::Normal(_)));
    (plain && !rel.as_os_str().is_empty()).then(|| rel.to_path_buf())
}

/// Recreates the link at `src` (relative path `rel`) as `dest` when its
/// target is relative and stays inside the workspace. Returns whether it did.
#[cfg(unix)]
fn copy_link(src: &Path, rel: &Path, dest: &Path) -> io::Result<bool> {
    let target = fs::read_link(src)?;
    if !stays_inside(rel, &target) {
        return Ok(false);
    }
    create_parent(dest)?;
    std::os::unix::fs::symlink(&target, dest)?;
    Ok(true)
}

#[cfg(not(unix))]
fn copy_link(_src: &Path, _rel: &Path, _dest: &Path) -> io::Result<bool> {
    Ok(false)
}

/// Whether the relative `target` of the link at `link` (relative to the
/// root) stays under the root, read lexically.
fn stays_inside(link: &Path, target: &Path) -> bool {
    let mut depth = link.parent().map_or(0, |p| p.components().count());
    for c in target.components() {
        match c {
            Component::Normal(_) => depth = depth.saturating_add(1),
            Component::CurDir => {}
            Component::ParentDir => match depth.checked_sub(1) {
                Some(d) => depth = d,
                None => return false,
            },
            Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    true
}

/// Removes every recreated link that does not resolve inside the copy.
/// A lexical check alone is not enough: `a -> .` makes `b -> a/../x` leave
/// the root. Removing a link can break another, hence the loop.
fn drop_escaping_links(root: &Path, mut links: Vec<PathBuf>) -> io::Result<()> {
    if links.is_empty() {
        return Ok(());
    }
    let real_root = fs::canonicalize(root)?;
    loop {
        let before = links.len();
        links.retain(|rel| {
            let path = root.join(rel);
            let inside = fs::canonicalize(&path).is_ok_and(|real| real.starts_with(&real_root));
            if !inside {
                let _ = fs::remove_file(&path);
            }
            inside
        });
        if links.len() == before {
            return Ok(());
        }
    }
}

/// Writes the run's view over the copy: open buffers of copied (or not yet
/// saved) files, then every file the run changed or created.
fn apply_view(overlay: &Overlay, source: &Path, root: &Path, copied: &HashSet<PathBuf>) -> io::Result<()> {
    let buffers = overlay.buffers();
    for path in buffers.open_paths() {
        let Some(rel) = relative(source, &path) else { continue };
        if overlay.workspace().is_protected(&path) {
            continue;
        }
        // Not a buffer of an ignored file (a dependency, build output).
        let unsaved = matches!(fs::symlink_metadata(&path), Err(e) if e.kind() == io::ErrorKind::NotFound);
        if !copied.contains(&rel) && !unsaved {
            continue;
        }
        if let Some(buffer) = buffers.buffer(&path) {
            write_text(root, &rel, &buffer.text)?;
        }
    }
    for change in overlay.changes() {
        let Some(rel) = relative(source, &change.path) else { continue };
        write_text(root, &rel, &change.new_text)?;
    }
    Ok(())
}

/// Writes `text` at `rel` in the copy, creating directories and keeping the
/// mode of a file already there.
fn write_text(root: &Path, rel: &Path, text: &str) -> io::Result<()> {
    let dest = root.join(rel);
    let with_path =
        |e: io::Error| io::Error::new(e.kind(), format!("could not write {} in the scratch copy: {e}", rel.display()));
    create_parent(&dest).map_err(with_path)?;
    match fs::metadata(&dest) {
        Ok(meta) if meta.is_dir() => Err(with_path(io::Error::other("a directory is in the way"))),
        Ok(meta) => write_keeping_mode(&dest, text, &meta).map_err(with_path),
        Err(_) => fs::write(&dest, text).map_err(with_path),
    }
}

#[cfg(unix)]
fn write_keeping_mode(dest: &Path, text: &str, meta: &fs::Metadata) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = meta.permissions().mode();
    let read_only = mode & 0o200 == 0;
    if read_only {
        fs::set_permissions(dest, fs::Permissions::from_mode(mode | 0o200))?;
    }
    let written = fs::write(dest, text);
    if read_only {
        let _ = fs::set_permissions(dest, fs::Permissions::from_mode(mode));
    }
    written
}

#[cfg(not(unix))]
fn write_keeping_mode(dest: &Path, text: &str, _meta: &fs::Metadata) -> io::Result<()> {
    fs::write(dest, text)
}

/// Gives the owner full access to every directory under `top` (links not
/// followed), so that the tree can be removed.
#[cfg(unix)]
fn make_tree_writable(top: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mut stack = vec![top.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(meta) = fs::symlink_metadata(&dir) else { continue };
        if !meta.is_dir() {
            continue;
        }
        let _ = fs::set_permissions(&dir, fs::Permissions::from_mode(meta.permissions().mode() | 0o700));
        let Ok(entries) = fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(entry.path());
            }
        }
    }
}

#[cfg(not(unix))]
fn make_tree_writable(_top: &Path) {}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::workspace::{BufferSource, BufferText, NoBuffers, Workspace};

    /// A workspace on disk with `files`, and an overlay over it.
    fn workspace(files: &[(&str, &str)], buffers: Arc<dyn BufferSource>) -> (tempfile::TempDir, PathBuf, Overlay) {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        for (p, text) in files {
            let path = root.join(p);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        }
        let overlay = Overlay::new(Arc::new(Workspace::new(vec![root.clone()])), buffers);
        (dir, root, overlay)
    }

    fn read(root: &Path, rel: &str) -> Option<String> {
        fs::read_to_string(root.join(rel)).ok()
    }

    #[test]
    fn the_copy_has_tracked_files_and_the_overlays_versions() {
        let (_d, root, overlay) = workspace(
            &[("a.txt", "disk a\n"), ("src/b.txt", "disk b\n"), (".config/hidden.toml", "h = 1\n")],
            Arc::new(NoBuffers),
        );
        overlay.write(&root.join("a.txt"), "edited a\n".into()).unwrap();
        overlay.write(&root.join("new/dir/c.txt"), "created c\n".into()).unwrap();
        let scratch = Scratch::create(&overlay).unwrap();
        let s = scratch.root();
        assert_ne!(s, root.as_path());
        assert!(!s.starts_with(&root));
        assert_eq!(read(s, "a.txt").as_deref(), Some("edited a\n"));
        assert_eq!(read(s, "src/b.txt").as_deref(), Some("disk b\n"));
        assert_eq!(read(s, "new/dir/c.txt").as_deref(), Some("created c\n"));
        assert_eq!(read(s, ".config/hidden.toml").as_deref(), Some("h = 1\n"));
        assert!(scratch.skipped().is_empty(), "{:?}", scratch.skipped());
        // The disk is untouched.
        assert_eq!(read(&root, "a.txt").as_deref(), Some("disk a\n"));
        assert!(!root.join("new").exists());
    }

    struct Open(Vec<(PathBuf, String)>);
    impl BufferSource for Open {
        fn buffer(&self, path: &Path) -> Option<BufferText> {
            self.0.iter().find(|(p, _)| p == path).map(|(_, t)| BufferText {
                text: t.clone(),
                version: 1,
                pin: Default::default(),
            })
        }
        fn open_paths(&self) -> Vec<PathBuf> {
            self.0.iter().map(|(p, _)| p.clone()).collect()
        }
    }

    #[test]
    fn unsaved_buffers_are_part_of_the_view_but_not_of_ignored_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        fs::write(root.join(".gitignore"), "target/\n").unwrap();
        fs::write(root.join("lib.rs"), "disk\n").unwrap();
        fs::create_dir(root.join("target")).unwrap();
        fs::write(root.join("target/gen.rs"), "generated\n").unwrap();
        let buffers = Open(vec![
            (root.join("lib.rs"), "unsaved\n".into()),
            (root.join("untitled.rs"), "never saved\n".into()),
            (root.join("target/gen.rs"), "open generated\n".into()),
        ]);
        let overlay = Overlay::new(Arc::new(Workspace::new(vec![root.clone()])), Arc::new(buffers));
        let scratch = Scratch::create(&overlay).unwrap();
        assert_eq!(read(scratch.root(), "lib.rs").as_deref(), Some("unsaved\n"));
        assert_eq!(read(scratch.root(), "untitled.rs").as_deref(), Some("never saved\n"));
        assert!(!scratch.root().join("target").exists());
    }

    #[test]
    fn ignored_files_and_git_are_not_copied() {
        let (_d, root, overlay) = workspace(
            &[
                (".gitignore", "target/\nnode_modules/\n*.log\n"),
                (".ignore", "data/\n"),
                ("src/main.rs", "fn main() {}\n"),
                ("target/x", "build output\n"),
                ("node_modules/y/index.js", "dep\n"),
                ("data/big.csv", "1,2\n"),
                ("debug.log", "log\n"),
                (".git/config", "[core]\n"),
                (".git/HEAD", "ref: refs/heads/main\n"),
                ("sub/.git", "gitdir: ../.git/modules/sub\n"),
                ("sub/file", "in submodule\n"),
            ],
            Arc::new(NoBuffers),
        );
        let scratch = Scratch::create(&overlay).unwrap();
        let s = scratch.root();
        assert!(s.join("src/main.rs").is_file());
        assert!(s.join(".gitignore").is_file());
        assert!(s.join("sub/file").is_file());
        for absent in ["target", "node_modules", "data", "debug.log", ".git", "sub/.git"] {
            assert!(fs::symlink_metadata(s.join(absent)).is_err(), "{absent} was copied");
        }
        assert!(root.join("target/x").is_file());
    }

    #[test]
    fn protected_files_are_not_copied_even_as_unsaved_buffers() {
        let (_d, root, _) = workspace(
            &[
                ("app.py", "import os\n"),
                (".env", "TOKEN=s3cret\n"),
                ("certs/tls.key", "key\n"),
                ("deploy/credentials.json", "{}\n"),
                (".ssh/id_ed25519", "key\n"),
            ],
            Arc::new(NoBuffers),
        );
        let buffers = Arc::new(Open(vec![(root.join("config/.env.local"), "TOKEN=unsaved\n".into())]));
        let overlay = Overlay::new(Arc::new(Workspace::new(vec![root.clone()])), buffers);
        let scratch = Scratch::create(&overlay).unwrap();
        let s = scratch.root();
        assert!(s.join("app.py").is_file());
        for absent in [".env", "certs/tls.key", "deploy/credentials.json", ".ssh", "config/.env.local"] {
            assert!(fs::symlink_metadata(s.join(absent)).is_err(), "{absent} was copied");
        }
        assert!(root.join(".env").is_file());
    }

    #[cfg(unix)]
    #[test]
    fn permissions_are_kept_and_read_only_files_can_take_the_overlay() {
        use std::os::unix::fs::PermissionsExt;
        let (_d, root, overlay) =
            workspace(&[("run.sh", "#!/bin/sh\necho hi\n"), ("ro.txt", "old\n")], Arc::new(NoBuffers));
        fs::set_permissions(root.join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
        fs::set_permissions(root.join("ro.txt"), fs::Permissions::from_mode(0o444)).unwrap();
        overlay.write(&root.join("ro.txt"), "new\n".into()).unwrap();
        let scratch = Scratch::create(&overlay).unwrap();
        let mode = |p: &str| fs::metadata(scratch.root().join(p)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode("run.sh"), 0o755);
        assert_eq!(mode("ro.txt"), 0o444);
        assert_eq!(read(scratch.root(), "ro.txt").as_deref(), Some("new\n"));
        let out = std::process::Command::new("./run.sh").current_dir(scratch.root()).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\n");
    }

    #[cfg(unix)]
    #[test]
    fn writing_every_file_of_the_copy_leaves_the_users_files_alone() {
        use std::os::unix::fs::MetadataExt;
        let files = [("a.txt", "one\n"), ("src/b.rs", "two\n"), (".hidden", "three\n"), ("deep/er/c", "four\n")];
        let (_d, root, overlay) = workspace(&files, Arc::new(NoBuffers));
        std::os::unix::fs::symlink("src/b.rs", root.join("link-to-b")).unwrap();
        let scratch = Scratch::create(&overlay).unwrap();
        for (p, _) in files {
            let (orig, copy) = (fs::metadata(root.join(p)).unwrap(), fs::metadata(scratch.root().join(p)).unwrap());
            assert!(orig.ino() != copy.ino() || orig.dev() != copy.dev(), "{p} is the same inode");
            assert_eq!(orig.nlink(), 1, "{p} gained a hard link");
        }
        // A command that writes every file of the copy, through the link too.
        let status = std::process::Command::new("sh")
            .args(["-c", "echo via-link > link-to-b; find . -type f -exec sh -c 'echo overwritten > \"$1\"' _ {} \\;"])
            .current_dir(scratch.root())
            .status()
            .unwrap();
        assert!(status.success());
        assert_eq!(read(scratch.root(), "a.txt").as_deref(), Some("overwritten\n"));
        for (p, text) in files {
            assert_eq!(read(&root, p).as_deref(), Some(text), "{p} changed on disk");
        }
        assert!(fs::symlink_metadata(scratch.root().join("link-to-b")).unwrap().file_type().is_symlink());
    }

    #[cfg(unix)]
    #[test]
    fn links_out_of_the_workspace_are_not_followed() {
        use std::os::unix::fs::symlink;
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret"), "secret\n").unwrap();
        let (_d, root, overlay) = workspace(&[("src/a.txt", "a\n")], Arc::new(NoBuffers));
        symlink(outside.path(), root.join("abs-dir")).unwrap();
        symlink(outside.path().join("secret"), root.join("abs-file")).unwrap();
        symlink(root.join("src/a.txt"), root.join("abs-inside")).unwrap();
        symlink("../../escape", root.join("src/up")).unwrap();
        symlink("missing", root.join("dangling")).unwrap();
        // Lexically inside, really the user's file: `dot/..` is the root's
        // parent, so `dot/dot/…/../../…` climbs to `/` and back down to the
        // original root.
        symlink(".", root.join("dot")).unwrap();
        let climb = format!("{}{}", "dot/".repeat(16), "../".repeat(16));
        let back = root.strip_prefix("/").unwrap().join("src/a.txt");
        symlink(format!("{climb}{}", back.display()), root.join("tricky")).unwrap();
        assert!(stays_inside(Path::new("tricky"), &fs::read_link(root.join("tricky")).unwrap()));
        assert_eq!(fs::read_to_string(root.join("tricky")).unwrap(), "a\n");
        symlink("src", root.join("src-link")).unwrap();
        symlink("../src/a.txt", root.join("src/self")).unwrap();
        let scratch = Scratch::create(&overlay).unwrap();
        let s = scratch.root();
        for absent in ["abs-dir", "abs-file", "abs-inside", "src/up", "dangling", "tricky"] {
            assert!(fs::symlink_metadata(s.join(absent)).is_err(), "{absent} was recreated");
        }
        assert!(fs::symlink_metadata(s.join("src-link")).unwrap().file_type().is_symlink());
        assert_eq!(read(s, "src-link/a.txt").as_deref(), Some("a\n"));
        assert_eq!(read(s, "src/self").as_deref(), Some("a\n"));
        assert!(fs::canonicalize(s.join("dot")).unwrap().starts_with(fs::canonicalize(s).unwrap()));
        // Writing through the kept links stays in the copy.
        fs::write(s.join("src-link/a.txt"), "changed\n").unwrap();
        assert_eq!(read(&root, "src/a.txt").as_deref(), Some("a\n"));
        assert_eq!(fs::read_to_string(outside.path().join("secret")).unwrap(), "secret\n");
    }

    #[test]
    fn env_points_cargo_at_a_stable_target_outside_the_workspace() {
        let (_d, root, overlay) = workspace(&[("Cargo.toml", "[package]\n")], Arc::new(NoBuffers));
        let (a, b) = (Scratch::create(&overlay).unwrap(), Scratch::create(&overlay).unwrap());
        assert_ne!(a.root(), b.root());
        assert_eq!(a.env(), b.env());
        let env = a.env();
        let target = &env.iter().find(|(k, _)| k == "CARGO_TARGET_DIR").unwrap().1;
        assert!(
            Path::new(target).ends_with(format!(
                "agentfix/scratch-target/{:016x}",
                stable_hash(root.as_os_str().as_encoded_bytes())
            ))
        );
        assert!(!Path::new(target).starts_with(&root));
        assert!(env.contains(&("AGENTFIX_SCRATCH".to_string(), "1".to_string())));
        assert_eq!(stable_hash(b"/home/u/project"), stable_hash(b"/home/u/project"));
        assert_ne!(stable_hash(b"/home/u/project"), stable_hash(b"/home/u/project2"));
    }

    #[cfg(unix)]
    #[test]
    fn the_copy_is_removed_on_drop_even_with_read_only_directories() {
        use std::os::unix::fs::PermissionsExt;
        let (_d, _root, overlay) = workspace(&[("a.txt", "a\n")], Arc::new(NoBuffers));
        let scratch = Scratch::create(&overlay).unwrap();
        let top = scratch.root().parent().unwrap().to_path_buf();
        fs::create_dir(scratch.root().join("locked")).unwrap();
        fs::write(scratch.root().join("locked/f"), "x").unwrap();
        fs::set_permissions(scratch.root().join("locked"), fs::Permissions::from_mode(0o555)).unwrap();
        drop(scratch);
        assert!(!top.exists());
    }

    #[test]
    fn lexical_link_check() {
        assert!(stays_inside(Path::new("a/link"), Path::new("../b")));
        assert!(stays_inside(Path::new("link"), Path::new("./b/../c")));
        assert!(!stays_inside(Path::new("link"), Path::new("../x")));
        assert!(!stays_inside(Path::new("a/link"), Path::new("b/../../../x")));
        assert!(!stays_inside(Path::new("link"), Path::new("/etc/passwd")));
    }
}
