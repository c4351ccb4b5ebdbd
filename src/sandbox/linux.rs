//! The Linux helper: subreaper, network namespace, capability bounding set,
//! Landlock, then the command, supervised until it and everything it
//! started are gone. See the module doc of `sandbox` for why.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::FromRawFd;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope,
};

use super::{EXIT_NO_LANDLOCK, EXIT_SETUP_FAILED, EXIT_SPAWN_FAILED, ExecArgs, status_line};

/// The newest Landlock ABI whose rights this code asks for; older kernels
/// get what they support (best effort), a kernel without Landlock nothing,
/// which [`exec`] refuses.
const TARGET_ABI: ABI = ABI::V9;

/// Devices the command may read and write (and use ordinary ioctls on).
const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"];
/// Directories of `/dev` the command may write.
const DEVICE_DIRS: &[&str] = &["/dev/shm"];
/// Longest time spent killing what the command left behind.
const KILL_DEADLINE: Duration = Duration::from_secs(5);

/// Capabilities removed from the bounding set, so that a command run as
/// root does not get them at `execve`: loading modules, raw devices and
/// I/O ports, mounts and most of `CAP_SYS_ADMIN`, ptrace, device nodes,
/// network configuration, raw sockets, the clock, audit, MAC policy, BPF,
/// `open_by_handle_at`, immutable files, reboot, and changing capabilities
/// (last, since dropping the others needs it).
const DROPPED_CAPABILITIES: &[libc::c_int] = &[
    16, // CAP_SYS_MODULE
    17, // CAP_SYS_RAWIO
    21, // CAP_SYS_ADMIN
    19, // CAP_SYS_PTRACE
    27, // CAP_MKNOD
    12, // CAP_NET_ADMIN
    13, // CAP_NET_RAW
    25, // CAP_SYS_TIME
    35, // CAP_WAKE_ALARM
    29, // CAP_AUDIT_WRITE
    30, // CAP_AUDIT_CONTROL
    37, // CAP_AUDIT_READ
    32, // CAP_MAC_OVERRIDE
    33, // CAP_MAC_ADMIN
    34, // CAP_SYSLOG
    38, // CAP_PERFMON
    39, // CAP_BPF
    40, // CAP_CHECKPOINT_RESTORE
    2,  // CAP_DAC_READ_SEARCH
    9,  // CAP_LINUX_IMMUTABLE
    22, // CAP_SYS_BOOT
    20, // CAP_SYS_PACCT
    26, // CAP_SYS_TTY_CONFIG
    36, // CAP_BLOCK_SUSPEND
    8,  // CAP_SETPCAP
];

/// The Landlock ABI version of the running kernel, or why there is none.
pub fn landlock_abi() -> Result<i32, String> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: the documented version probe: no attribute, size 0.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0 as libc::size_t,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if v >= 1 {
        return Ok(i32::try_from(v).unwrap_or(i32::MAX));
    }
    let e = io::Error::last_os_error();
    Err(match e.raw_os_error() {
        Some(libc::ENOSYS) => "this Linux kernel is built without Landlock (it needs 5.13 or newer)".to_string(),
        Some(libc::EOPNOTSUPP) => {
            "Landlock is built into this kernel but not enabled (add `landlock` to the `lsm=` boot parameter)"
                .to_string()
        }
        _ => format!("the Landlock probe failed: {e}"),
    })
}

/// The status descriptor given with `--status-fd`, if any.
struct Status(Option<File>);

impl Status {
    fn open(fd: Option<i32>) -> Status {
        let Some(fd) = fd.filter(|&fd| fd > 2) else { return Status(None) };
        // SAFETY: plain fcntl calls on a descriptor number; the command must
        // never inherit it, so it is close-on-exec from here on.
        let open = unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } == 0;
        if !open {
            return Status(None);
        }
        // SAFETY: the parent handed this descriptor to us alone; this
        // process owns it from now on.
        Status(Some(unsafe { File::from_raw_fd(fd) }))
    }

    fn send(&mut self, fields: &[&str]) {
        if let Some(f) = &mut self.0 {
            let _ = f.write_all(status_line(fields).as_bytes());
        }
    }

    /// Reports a failure on stderr and the status descriptor; the exit code.
    fn fail(&mut self, kind: &str, code: u8, message: &str) -> ExitCode {
        eprintln!("agentfix sandbox: {message}");
        self.send(&["error", kind, message]);
        ExitCode::from(code)
    }
}

/// See [`super::exec`].
pub fn exec(args: ExecArgs) -> ExitCode {
    let mut status = Status::open(args.status_fd);
    let Some((program, rest)) = args.argv.split_first() else {
        return status.fail("setup", EXIT_SETUP_FAILED, "no command to run");
    };
    // Blocked from the start, waited for with sigwaitinfo: none is lost
    // between the spawn and the wait. The command starts with an empty mask
    // (the standard library resets it in the child).
    let signals = match block_signals() {
        Ok(set) => set,
        Err(e) => return status.fail("setup", EXIT_SETUP_FAILED, &format!("cannot block signals: {e}")),
    };
    // SAFETY: plain prctl; orphaned descendants are reparented to us.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0) } != 0 {
        let e = io::Error::last_os_error();
        return status.fail("setup", EXIT_SETUP_FAILED, &format!("cannot become a subreaper: {e}"));
    }
    let netns = !args.network && !args.no_netns && unshare_network();
    drop_capabilities();
    let abi = match restrict(&args.write, args.network) {
        Ok(abi) => abi,
        Err((kind, code, message)) => return status.fail(kind, code, &message),
    };
    if !args.network && !netns && abi < ABI::V4 {
        status.send(&[
            "warn",
            "the network is not blocked: this kernel's Landlock has no TCP rules (ABI 4, Linux 6.7) and no network \
             namespace could be created",
        ]);
    } else if !args.network && !netns {
        status.send(&["warn", "only TCP is blocked: no network namespace could be created, so UDP is not"]);
    }
    let child = match std::process::Command::new(program).args(rest).spawn() {
        Ok(child) => child,
        Err(e) => {
            eprintln!("agentfix sandbox: cannot start `{}`: {e}", Path::new(program).display());
            status.send(&["error", "spawn", &e.to_string()]);
            return ExitCode::from(EXIT_SPAWN_FAILED);
        }
    };
    status.send(&["started"]);
    drop(status);
    let pid = i32::try_from(child.id()).unwrap_or(-1);
    // The child is reaped with waitpid below, not through `child`.
    drop(child);
    ExitCode::from(supervise(pid, &signals))
}

/// Moves this process into a new network namespace, which has only a
/// loopback device that is down. False when that is not permitted.
fn unshare_network() -> bool {
    // SAFETY: plain system call; this process is single-threaded.
    unsafe { libc::unshare(libc::CLONE_NEWNET) == 0 }
}

/// Drops [`DROPPED_CAPABILITIES`] from the bounding set and clears the
/// ambient set; without the privilege to do so (not root), there is
/// nothing to drop.
fn drop_capabilities() {
    for &cap in DROPPED_CAPABILITIES {
        // SAFETY: plain prctl; EINVAL (unknown capability) and EPERM are ignored.
        unsafe {
            libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0);
        }
    }
    // SAFETY: plain prctl.
    unsafe {
        libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong, 0, 0, 0);
    }
}

type SetupError = (&'static str, u8, String);

/// Applies the Landlock ruleset to this process; the ABI in force.
fn restrict(write: &[PathBuf], network: bool) -> Result<ABI, SetupError> {
    let setup = |what: &str, e: &dyn std::fmt::Display| ("setup", EXIT_SETUP_FAILED, format!("{what}: {e}"));
    let all = AccessFs::from_all(TARGET_ABI);
    let read = AccessFs::from_read(TARGET_ABI);
    // Everything but creating device nodes.
    let writable = all & !(AccessFs::MakeChar | AccessFs::MakeBlock);
    let device = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev;
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)
        .map_err(|e| setup("Landlock file system rights", &e))?;
    if !network {
        // Handled, with no rule allowing any port: every TCP bind and connect is denied.
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(|e| setup("Landlock network rights", &e))?;
    }
    let ruleset = ruleset.scope(Scope::from_all(TARGET_ABI)).map_err(|e| setup("Landlock scopes", &e))?;
    let mut rules: Vec<(PathBuf, BitFlags<AccessFs>)> = Vec::new();
    // Read and execute everything but /dev, of which only the harmless
    // devices (no terminals, no disks).
    for entry in std::fs::read_dir("/").map_err(|e| setup("cannot list /", &e))?.flatten() {
        if entry.file_name() != "dev" {
            rules.push((entry.path(), read));
        }
    }
    rules.push((PathBuf::from("/dev"), AccessFs::ReadDir.into()));
    for dev in DEVICES {
        rules.push((PathBuf::from(dev), device));
    }
    for dir in DEVICE_DIRS {
        rules.push((PathBuf::from(dir), writable));
    }
    let mut created = ruleset.create().map_err(|e| setup("cannot create the Landlock ruleset", &e))?;
    for (path, access) in rules {
        let Some(rule) = path_rule(&path, access) else { continue };
        created = created.add_rule(rule).map_err(|e| setup(&format!("Landlock rule for {}", path.display()), &e))?;
    }
    // Explicit writable paths must exist: they are what the command needs.
    for path in write {
        let rule = path_rule(path, writable).ok_or_else(|| {
            let e = std::fs::metadata(path).err().map_or_else(|| "cannot open it".to_string(), |e| e.to_string());
            setup(&format!("cannot allow writing {}", path.display()), &e)
        })?;
        created = created.add_rule(rule).map_err(|e| setup(&format!("Landlock rule for {}", path.display()), &e))?;
    }
    let status = created.restrict_self().map_err(|e| setup("cannot enforce the Landlock ruleset", &e))?;
    let abi = ABI::from(status.landlock);
    if status.ruleset == RulesetStatus::NotEnforced || abi == ABI::Unsupported {
        let why = super::landlock_abi().err().unwrap_or_else(|| "the ruleset was not enforced".to_string());
        return Err((
            "no-landlock",
            EXIT_NO_LANDLOCK,
            format!(
                "refusing to run the command without a sandbox: {why}; set `commands.sandbox` to \"off\" in the editor settings to run commands unsandboxed"
            ),
        ));
    }
    Ok(abi)
}

/// A rule for `path` with `access`, narrowed to the rights of a file when
/// it is not a directory; `None` when it does not exist or cannot be opened.
fn path_rule(path: &Path, access: BitFlags<AccessFs>) -> Option<PathBeneath<PathFd>> {
    let meta = std::fs::metadata(path).ok()?;
    let access = if meta.is_dir() { access } else { access & AccessFs::from_file(TARGET_ABI) };
    if access.is_empty() {
        return None;
    }
    Some(PathBeneath::new(PathFd::new(path).ok()?, access))
}

/// Blocks the signals the supervisor waits for.
fn block_signals() -> io::Result<libc::sigset_t> {
    // SAFETY: `set` is initialized by sigemptyset before use; the calls
    // only read and write it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in [libc::SIGCHLD, libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::sigaddset(&mut set, sig);
        }
        if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(set)
    }
}

/// Waits for the command `pid`; then, or on SIGTERM/SIGINT/SIGHUP, kills
/// every descendant. Returns the exit code to exit with.
fn supervise(pid: i32, signals: &libc::sigset_t) -> u8 {
    loop {
        // SAFETY: `info` is a valid, writable siginfo_t; `signals` is initialized.
        let sig = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::sigwaitinfo(signals, &mut info)
        };
        match sig {
            libc::SIGCHLD => {
                if let Some(code) = reap_until(pid) {
                    kill_descendants();
                    return code;
                }
            }
            libc::SIGTERM | libc::SIGINT | libc::SIGHUP => {
                kill_descendants();
                return 128 + sig as u8;
            }
            _ => {
                // EINTR or an error: check the child once more.
                let interrupted = io::Error::last_os_error().raw_os_error() == Some(libc::EINTR);
                if let Some(code) = reap_until(pid) {
                    kill_descendants();
                    return code;
                }
                if !interrupted {
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        }
    }
}

/// Reaps every exited child; the exit code of `pid` once it was reaped.
fn reap_until(pid: i32) -> Option<u8> {
    loop {
        let mut status = 0;
        // SAFETY: plain waitpid with a valid status pointer.
        let r = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if r <= 0 {
            if r < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD) {
                // The command is gone without us seeing it: unknown.
                return Some(EXIT_SETUP_FAILED);
            }
            return None;
        }
        if r == pid {
            return Some(exit_code(status));
        }
    }
}

fn exit_code(status: libc::c_int) -> u8 {
    if libc::WIFEXITED(status) {
        (libc::WEXITSTATUS(status) & 0xff) as u8
    } else if libc::WIFSIGNALED(status) {
        128u8.saturating_add(libc::WTERMSIG(status) as u8)
    } else {
        EXIT_SETUP_FAILED
    }
}

/// SIGKILLs every descendant of this process and reaps them, until it has
/// no child left (as the subreaper, every orphan becomes its child) or
/// [`KILL_DEADLINE`] passes.
fn kill_descendants() {
    let me = std::process::id() as i32;
    let deadline = Instant::now() + KILL_DEADLINE;
    loop {
        for pid in descendants(me) {
            // SAFETY: plain kill of a positive pid found under this process
            // (Landlock's signal scope keeps it inside the sandbox anyway).
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        loop {
            let mut status = 0;
            // SAFETY: plain waitpid with a valid status pointer.
            let r = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if r > 0 {
                continue;
            }
            if r < 0 {
                match io::Error::last_os_error().raw_os_error() {
                    Some(libc::EINTR) => continue,
                    // No child left: no descendant left.
                    _ => return,
                }
            }
            break;
        }
        if Instant::now() >= deadline {
            return;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The processes whose parent chain leads to `root`, from `/proc`.
fn descendants(root: i32) -> Vec<i32> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        if let Some(ppid) = parent_of(&stat) {
            children.entry(ppid).or_default().push(pid);
        }
    }
    let mut found = Vec::new();
    let mut seen = HashSet::new();
    let mut stack = vec![root];
    while let Some(p) = stack.pop() {
        for &c in children.get(&p).map(Vec::as_slice).unwrap_or_default() {
            if c > 1 && c != root && seen.insert(c) {
                found.push(c);
                stack.push(c);
            }
        }
    }
    found
}

/// The parent pid in a `/proc/PID/stat` line (the field after the state,
/// which follows the command name in parentheses).
fn parent_of(stat: &str) -> Option<i32> {
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    let _state = fields.next()?;
    fields.next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parent_pids_from_stat_lines() {
        assert_eq!(parent_of("42 (sh) S 7 42 42 0 -1"), Some(7));
        assert_eq!(parent_of("42 (a) b) (c) R 9 1 1"), Some(9));
        assert_eq!(parent_of("garbage"), None);
        let me = std::process::id() as i32;
        let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        assert!(descendants(me).contains(&(child.id() as i32)));
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn exit_codes_of_wait_statuses() {
        assert_eq!(exit_code(3 << 8), 3);
        assert_eq!(exit_code(9), 137);
    }

    #[test]
    fn the_probe_gives_a_version_or_a_reason() {
        // Whatever the kernel: a version, or a reason.
        match landlock_abi() {
            Ok(v) => assert!(v >= 1),
            Err(why) => assert!(!why.is_empty()),
        }
    }
}
