//! Carries out a `view` plan in the sandbox's new mount namespace, the way
//! bubblewrap does: a tmpfs over `/tmp` becomes the root for a moment (the
//! host's tree under `/oldroot`), the view is built under `/newroot` from
//! `/oldroot`'s paths, and a second `pivot_root` leaves only the view, the
//! host's tree detached. Read-only binds are made read-only recursively
//! (`mount_setattr`, Linux 5.12; a remount of the top mount before), and
//! every mount is `nosuid` and, but for the devices, `nodev`.

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::view::Mount;

/// Devices of the host bound into the view's `/dev`.
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom"];

const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;
const MOUNT_ATTR_NOEXEC: u64 = 0x8;
const AT_RECURSIVE: libc::c_uint = 0x8000;

fn cstr(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| io::Error::other(format!("{} contains a NUL", p.display())))
}

fn mount(
    src: Option<&Path>,
    dst: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> io::Result<()> {
    let src = src.map(cstr).transpose()?;
    let dst_c = cstr(dst)?;
    let fstype = fstype.map(|t| CString::new(t).expect("no NUL"));
    let data = data.map(|d| CString::new(d).expect("no NUL"));
    let ptr = |c: &Option<CString>| c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
    // SAFETY: every pointer is null or a valid NUL-terminated string.
    let r = unsafe { libc::mount(ptr(&src), dst_c.as_ptr(), ptr(&fstype), flags, ptr(&data).cast()) };
    if r != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("mount {}: {e}", dst.display())));
    }
    Ok(())
}

/// Sets `attrs` on the mount at `path` (and those below it when `recursive`).
fn set_attrs(path: &Path, attrs: u64, recursive: bool) -> io::Result<()> {
    #[repr(C)]
    struct MountAttr {
        attr_set: u64,
        attr_clr: u64,
        propagation: u64,
        userns_fd: u64,
    }
    let c = cstr(path)?;
    let attr = MountAttr { attr_set: attrs, attr_clr: 0, propagation: 0, userns_fd: 0 };
    let flags = if recursive { AT_RECURSIVE } else { 0 };
    // SAFETY: a valid path and a mount_attr of the size given.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            c.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if r == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() != Some(libc::ENOSYS) {
        return Err(io::Error::new(e.kind(), format!("mount_setattr {}: {e}", path.display())));
    }
    // Before Linux 5.12: remount the top mount, keeping the flags it has
    // (a user namespace may not clear them).
    // SAFETY: `st` is written by statvfs.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid path and buffer.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut flags = libc::MS_BIND | libc::MS_REMOUNT;
    for (st_flag, ms) in [
        (libc::ST_RDONLY, libc::MS_RDONLY),
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ] {
        if st.f_flag & st_flag != 0 {
            flags |= ms;
        }
    }
    for (attr, ms) in [
        (MOUNT_ATTR_RDONLY, libc::MS_RDONLY),
        (MOUNT_ATTR_NOSUID, libc::MS_NOSUID),
        (MOUNT_ATTR_NODEV, libc::MS_NODEV),
        (MOUNT_ATTR_NOEXEC, libc::MS_NOEXEC),
    ] {
        if attrs & attr != 0 {
            flags |= ms;
        }
    }
    mount(None, path, None, flags, None)
}

fn tmpfs(dst: &Path, mode: u32, size_mb: u64, flags: libc::c_ulong) -> io::Result<()> {
    fs::create_dir_all(dst)?;
    let data = format!("mode={mode:o},size={}k", size_mb.max(1) * 1024);
    mount(Some(Path::new("tmpfs")), dst, Some("tmpfs"), flags | libc::MS_NOSUID | libc::MS_NODEV, Some(&data))
}

/// `p` (absolute) under `base`.
fn under(base: &str, p: &Path) -> PathBuf {
    Path::new(base).join(p.strip_prefix("/").unwrap_or(p))
}

/// A place for a bind of `src` at `dst`: a directory, or an empty file.
fn mount_point(src: &Path, dst: &Path) -> io::Result<()> {
    if fs::metadata(src)?.is_dir() {
        return fs::create_dir_all(dst);
    }
    if let Some(parent) = dst.parent() {
        fs::create_dir_all(parent)?;
    }
    if fs::symlink_metadata(dst).is_err() {
        fs::File::create(dst)?;
    }
    Ok(())
}

/// Builds the view and makes it this process's root; `/` is then the view
/// and the host's tree is gone from this mount namespace.
pub fn enter(mounts: &[Mount]) -> io::Result<()> {
    // Nothing done here reaches the host's mount namespace.
    mount(None, Path::new("/"), None, libc::MS_REC | libc::MS_PRIVATE, None)?;
    tmpfs(Path::new("/tmp"), 0o755, 1, 0)?;
    fs::create_dir("/tmp/newroot")?;
    fs::create_dir("/tmp/oldroot")?;
    fs::write("/tmp/empty", b"")?;
    tmpfs(Path::new("/tmp/newroot"), 0o755, 1, 0)?;
    pivot_root(Path::new("/tmp"), Path::new("/tmp/oldroot"))?;
    std::env::set_current_dir("/")?;
    let mut read_only = Vec::new();
    for m in mounts {
        let dst = under("/newroot", m.dst());
        match m {
            Mount::Tmpfs { mode, size_mb, .. } => tmpfs(&dst, *mode, *size_mb, 0)?,
            Mount::Bind { src, write, .. } => {
                let src = under("/oldroot", src);
                mount_point(&src, &dst).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", m.dst().display())))?;
                mount(Some(&src), &dst, None, libc::MS_BIND | libc::MS_REC, None)?;
                let ro = if *write { 0 } else { MOUNT_ATTR_RDONLY };
                set_attrs(&dst, ro | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, true)?;
            }
            Mount::Symlink { target, .. } => {
                if let Some(parent) = dst.parent() {
                    fs::create_dir_all(parent)?;
                }
                std::os::unix::fs::symlink(target, &dst)?;
            }
            Mount::Proc { .. } => {
                fs::create_dir_all(&dst)?;
                let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
                mount(Some(Path::new("proc")), &dst, Some("proc"), flags, None)?;
            }
            Mount::Dev { .. } => dev(&dst)?,
            Mount::Cover { dir: true, .. } => {
                tmpfs(&dst, 0o755, 1, 0)?;
                read_only.push(dst);
            }
            Mount::Cover { dir: false, .. } => {
                mount(Some(Path::new("/empty")), &dst, None, libc::MS_BIND, None)?;
                read_only.push(dst);
            }
        }
    }
    for dst in read_only {
        set_attrs(&dst, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, false)?;
    }
    set_attrs(Path::new("/newroot"), MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, false)?;
    std::env::set_current_dir("/newroot")?;
    pivot_root(Path::new("."), Path::new("."))?;
    // SAFETY: plain system call on a valid path.
    if unsafe { libc::umount2(c".".as_ptr(), libc::MNT_DETACH) } != 0 {
        return Err(io::Error::last_os_error());
    }
    std::env::set_current_dir("/")
}

/// The minimal `/dev`: the harmless devices, the standard links, a private `shm`.
fn dev(dst: &Path) -> io::Result<()> {
    tmpfs(dst, 0o755, 1, libc::MS_NOEXEC)?;
    // Devices need a mount without `nodev`: each is a bind of the host's node.
    for d in DEVICES {
        let node = dst.join(d);
        fs::File::create(&node)?;
        mount(Some(&Path::new("/oldroot/dev").join(d)), &node, None, libc::MS_BIND, None)?;
        set_attrs(&node, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, false)?;
    }
    for (link, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        std::os::unix::fs::symlink(target, dst.join(link))?;
    }
    tmpfs(&dst.join("shm"), 0o1777, super::view::TMPFS_MB, libc::MS_NOEXEC)?;
    // The /dev tmpfs itself is read-only from here on.
    set_attrs(dst, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, false)
}

fn pivot_root(new_root: &Path, put_old: &Path) -> io::Result<()> {
    let (n, o) = (cstr(new_root)?, cstr(put_old)?);
    // SAFETY: two valid paths.
    if unsafe { libc::syscall(libc::SYS_pivot_root, n.as_ptr(), o.as_ptr()) } != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("pivot_root {}: {e}", new_root.display())));
    }
    Ok(())
}
