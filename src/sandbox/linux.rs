//! The Linux helper: new user, mount, PID, IPC, UTS and network namespaces;
//! in them an init (PID 1) that builds the command's file system
//! (`view`, `mounts`), drops capabilities, applies Landlock and the
//! resource limits, and starts the command under a seccomp filter
//! (`seccomp`), then waits for it. The init's exit ends every process of
//! the namespace. See the module doc of `sandbox` for why.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use landlock::{
    ABI, Access, AccessFs, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope,
};

use super::view::{self, Mount};
use super::{
    EXIT_NO_LANDLOCK, EXIT_NO_SANDBOX, EXIT_SETUP_FAILED, EXIT_SPAWN_FAILED, ExecArgs, ResourceLimits, status_line,
};
use super::{mounts, seccomp};

/// The newest Landlock ABI whose rights this code asks for; older kernels
/// get what they support (best effort), a kernel without Landlock nothing,
/// which [`exec`] refuses.
const TARGET_ABI: ABI = ABI::V9;

/// Devices the command may read and write (and use ordinary ioctls on).
const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"];

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

    fn fd(&self) -> Option<i32> {
        self.0.as_ref().map(|f| f.as_raw_fd())
    }

    /// Closes the descriptor: nothing more is reported.
    fn close(&mut self) {
        self.0 = None;
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

/// How the sandbox's init (PID 1 of its namespace) starts the command.
struct Init {
    mounts: Vec<Mount>,
    cwd: PathBuf,
    network: bool,
    limits: ResourceLimits,
    /// What Landlock lets the command write.
    writable: Vec<PathBuf>,
    argv: Vec<CString>,
    filters: [seccompiler::BpfProgram; 2],
}

/// See [`super::exec`].
pub fn exec(args: ExecArgs) -> ExitCode {
    let mut status = Status::open(args.status_fd);
    close_inherited(status.fd());
    if args.argv.is_empty() {
        return status.fail("setup", EXIT_SETUP_FAILED, "no command to run");
    }
    // Blocked from the start, waited for with sigwaitinfo: none is lost
    // between the fork and the wait. The command starts with an empty mask.
    let signals = match block_signals() {
        Ok(set) => set,
        Err(e) => return status.fail("setup", EXIT_SETUP_FAILED, &format!("cannot block signals: {e}")),
    };
    let missing = super::missing(&super::probe_without_namespaces());
    if !missing.is_empty() {
        return status.fail("unavailable", EXIT_NO_SANDBOX, &super::refusal(&missing.join("; ")));
    }
    // Everything the view needs is read off the host before leaving it.
    let cwd = match std::env::current_dir() {
        Ok(cwd) => cwd,
        Err(e) => return status.fail("setup", EXIT_SETUP_FAILED, &format!("no working directory: {e}")),
    };
    let home = std::env::var_os("HOME").map(PathBuf::from).filter(|h| h.is_absolute() && h.parent().is_some());
    let inputs = view::Inputs::from_env(args.read.clone(), args.write.clone(), args.hide.clone(), args.network);
    let mut mounts = view::plan(&inputs, &view::host_kind, &|p| std::fs::read_link(p).ok());
    // Binds read their sources under `/oldroot`, where an absolute symlink
    // (a `~/.rustup` that links to another disk) would lead nowhere: each
    // source is resolved here, on the host.
    for m in &mut mounts {
        if let Mount::Bind { src, .. } = m
            && let Ok(real) = std::fs::canonicalize(&*src)
        {
            *src = real;
        }
    }
    let mut writable = args.write.clone();
    writable.extend(["/tmp", "/dev/shm"].map(PathBuf::from));
    writable.extend(home);
    let argv: Result<Vec<CString>, _> = args.argv.iter().map(|a| CString::new(a.as_bytes())).collect();
    let Ok(argv) = argv else {
        return status.fail("setup", EXIT_SETUP_FAILED, "an argument of the command contains a NUL byte");
    };
    let filters = match seccomp::programs() {
        Ok(f) => f,
        Err(e) => return status.fail("unavailable", EXIT_NO_SANDBOX, &super::refusal(&format!("seccomp: {e}"))),
    };
    let init = Init { mounts, cwd, network: args.network, limits: args.limits(), writable, argv, filters };
    // SAFETY: plain system calls.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    if let Err(e) = unshare(args.network) {
        return status.fail(
            "unavailable",
            EXIT_NO_SANDBOX,
            &super::refusal(&format!("the kernel refused new user, mount, PID, IPC, UTS and network namespaces ({e})")),
        );
    }
    if let Err(e) = map_ids(uid, gid) {
        return status.fail("setup", EXIT_SETUP_FAILED, &format!("cannot map the user into its namespace: {e}"));
    }
    // SAFETY: this process is single-threaded: the child may do anything.
    match unsafe { libc::fork() } {
        -1 => {
            let e = io::Error::last_os_error();
            status.fail("setup", EXIT_SETUP_FAILED, &format!("cannot start the sandbox's init: {e}"))
        }
        0 => {
            let code = run_init(&mut status, init, &signals);
            drop(status);
            // SAFETY: leaves at once; the namespace dies with its init.
            unsafe { libc::_exit(code) }
        }
        pid => {
            drop(status);
            ExitCode::from(wait_init(pid, &signals))
        }
    }
}

/// Closes every descriptor above 2 that this process inherited but `keep`.
fn close_inherited(keep: Option<i32>) {
    let ranges: Vec<(u32, u32)> = match keep {
        Some(k) if k > 2 => vec![(3, k as u32 - 1), (k as u32 + 1, u32::MAX)],
        _ => vec![(3, u32::MAX)],
    };
    for (lo, hi) in ranges {
        if lo > hi {
            continue;
        }
        // SAFETY: plain close_range; descriptors of this process only.
        let r = unsafe { libc::syscall(libc::SYS_close_range, lo, hi, 0u32) };
        if r != 0 {
            // Before Linux 5.9: one by one.
            for fd in lo..hi.min(65_536) {
                // SAFETY: closing a descriptor number that may not be open.
                unsafe {
                    libc::close(fd as i32);
                }
            }
        }
    }
}

/// The namespaces of a sandboxed command: a network namespace unless it may use the network.
fn unshare(network: bool) -> io::Result<()> {
    let mut flags =
        libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_NEWIPC | libc::CLONE_NEWUTS;
    if !network {
        flags |= libc::CLONE_NEWNET;
    }
    // SAFETY: plain system call; this process is single-threaded.
    if unsafe { libc::unshare(flags) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Maps the user and group to themselves in the new user namespace (a
/// normal user stays itself, root stays root of the namespace only).
fn map_ids(uid: libc::uid_t, gid: libc::gid_t) -> io::Result<()> {
    match std::fs::write("/proc/self/setgroups", "deny") {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1\n"))?;
    std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1\n"))
}

/// PID 1 of the sandbox: builds the view, restricts itself, starts the
/// command and waits for it. Its exit ends every process of the namespace.
fn run_init(status: &mut Status, init: Init, signals: &libc::sigset_t) -> i32 {
    // SAFETY: plain prctl: the init dies with the helper that started it.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0);
    }
    forget_arguments();
    if let Err(e) = mounts::enter(&init.mounts) {
        status.fail("setup", EXIT_SETUP_FAILED, &format!("cannot build the sandbox's file system: {e}"));
        return i32::from(EXIT_SETUP_FAILED);
    }
    if let Err(e) = std::env::set_current_dir(&init.cwd) {
        status.fail("setup", EXIT_SETUP_FAILED, &format!("cannot enter {}: {e}", init.cwd.display()));
        return i32::from(EXIT_SETUP_FAILED);
    }
    // SAFETY: plain system call with a valid buffer.
    unsafe {
        libc::sethostname(HOSTNAME.as_ptr().cast(), HOSTNAME.len());
    }
    if !init.network
        && let Err(e) = loopback_up()
    {
        status.send(&["warn", &format!("the loopback device of the sandbox is down: {e}")]);
    }
    drop_capabilities();
    if let Err((kind, code, message)) = restrict(&init.writable) {
        status.fail(kind, code, &message);
        return i32::from(code);
    }
    init.limits.apply();
    let pid = match start(&init) {
        Ok(pid) => pid,
        Err(e) => {
            eprintln!("agentfix sandbox: cannot start `{}`: {e}", init.argv[0].to_string_lossy());
            status.send(&["error", "spawn", &e.to_string()]);
            return i32::from(EXIT_SPAWN_FAILED);
        }
    };
    status.send(&["started"]);
    status.close();
    i32::from(supervise(pid, signals))
}

const HOSTNAME: &str = "agentfix-sandbox";

/// Blanks this process's command line in memory, where `/proc/1/cmdline`
/// reads it: the init's arguments name the real workspace (`--hide`) and
/// the directories bound, which the command must not learn. Its
/// environment and memory are closed to the command as well (not dumpable).
fn forget_arguments() {
    // SAFETY: plain prctl.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0 as libc::c_ulong, 0, 0, 0);
    }
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else { return };
    let Some((_, rest)) = stat.rsplit_once(')') else { return };
    // Fields 48 and 49 (arg_start, arg_end); `rest` starts at field 3.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let (Some(start), Some(end)) =
        (fields.get(45).and_then(|f| f.parse::<usize>().ok()), fields.get(46).and_then(|f| f.parse::<usize>().ok()))
    else {
        return;
    };
    if start == 0 || end <= start || end - start > 1 << 20 {
        return;
    }
    // SAFETY: [start, end) is this process's own argument area (on its
    // stack, writable); the standard library copied the arguments at start,
    // and nothing reads this memory again.
    unsafe {
        std::ptr::write_bytes(start as *mut u8, 0, end - start);
    }
}

/// Forks and execs the command: descriptors above 2 closed, signals
/// unblocked, the seccomp filter installed. An `execvp` failure comes back
/// through a close-on-exec pipe.
fn start(init: &Init) -> io::Result<i32> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let (rd, wr) = (fds[0], fds[1]);
    let mut ptrs: Vec<*const libc::c_char> = init.argv.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    // SAFETY: this process is single-threaded.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // The child: only system calls from here to execvp.
        // SAFETY: plain system calls on this process, with valid pointers.
        unsafe {
            libc::close(rd);
            if wr > 3 {
                libc::syscall(libc::SYS_close_range, 3u32, (wr - 1) as u32, 0u32);
            }
            libc::syscall(libc::SYS_close_range, (wr + 1) as u32, u32::MAX, 0u32);
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            let errno = match seccomp::install(&init.filters) {
                Ok(()) => {
                    libc::execvp(ptrs[0], ptrs.as_ptr());
                    *libc::__errno_location()
                }
                Err(e) => e,
            };
            libc::write(wr, (&errno as *const i32).cast(), 4);
            libc::_exit(i32::from(EXIT_SPAWN_FAILED));
        }
    }
    // SAFETY: closing our copy of the write end.
    unsafe {
        libc::close(wr);
    }
    if pid < 0 {
        let e = io::Error::last_os_error();
        // SAFETY: closing the read end.
        unsafe {
            libc::close(rd);
        }
        return Err(e);
    }
    let mut errno = 0i32;
    // SAFETY: reads at most 4 bytes into `errno`, then closes the pipe.
    let n = unsafe {
        let n = loop {
            let n = libc::read(rd, (&mut errno as *mut i32).cast(), 4);
            if n >= 0 || *libc::__errno_location() != libc::EINTR {
                break n;
            }
        };
        libc::close(rd);
        n
    };
    if n == 4 {
        let mut st = 0;
        // SAFETY: reaping the child that failed.
        unsafe {
            libc::waitpid(pid, &mut st, 0);
        }
        return Err(io::Error::from_raw_os_error(errno));
    }
    Ok(pid)
}

/// Brings up the loopback device of the new network namespace.
fn loopback_up() -> io::Result<()> {
    #[repr(C)]
    struct IfReq {
        name: [u8; 16],
        flags: libc::c_short,
        pad: [u8; 22],
    }
    // SAFETY: a socket used for two ioctls on a properly sized request.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut req = IfReq { name: [0; 16], flags: 0, pad: [0; 22] };
        req.name[..2].copy_from_slice(b"lo");
        let r = if libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req) < 0 {
            Err(io::Error::last_os_error())
        } else {
            req.flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
            if libc::ioctl(fd, libc::SIOCSIFFLAGS, &req) < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
        };
        libc::close(fd);
        r
    }
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
fn restrict(write: &[PathBuf]) -> Result<ABI, SetupError> {
    let setup = |what: &str, e: &dyn std::fmt::Display| ("setup", EXIT_SETUP_FAILED, format!("{what}: {e}"));
    let all = AccessFs::from_all(TARGET_ABI);
    let read = AccessFs::from_read(TARGET_ABI);
    // Everything but creating device nodes.
    let writable = all & !(AccessFs::MakeChar | AccessFs::MakeBlock);
    let device = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev;
    let ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)
        .map_err(|e| setup("Landlock file system rights", &e))?;
    let ruleset = ruleset.scope(Scope::from_all(TARGET_ABI)).map_err(|e| setup("Landlock scopes", &e))?;
    let mut rules: Vec<(PathBuf, BitFlags<AccessFs>)> = Vec::new();
    // Read and execute everything but /dev, of which only the harmless
    // devices (no terminals, no disks).
    for entry in std::fs::read_dir("/").map_err(|e| setup("cannot list /", &e))?.flatten() {
        if entry.file_name() != "dev" {
            rules.push((entry.path(), read));
        }
    }
    rules.push((PathBuf::from("/"), AccessFs::ReadDir.into()));
    rules.push((PathBuf::from("/dev"), AccessFs::ReadDir.into()));
    for dev in DEVICES {
        rules.push((PathBuf::from(dev), device));
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

/// The helper outside: waits for the sandbox's init; on SIGTERM, SIGINT or
/// SIGHUP kills it, which kills every process of its namespace.
fn wait_init(pid: i32, signals: &libc::sigset_t) -> u8 {
    loop {
        match wait_signal(signals) {
            sig @ (libc::SIGTERM | libc::SIGINT | libc::SIGHUP) => {
                // SAFETY: plain kill and waitpid of our own child.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                    let mut st = 0;
                    libc::waitpid(pid, &mut st, 0);
                }
                return 128 + sig as u8;
            }
            _ => {
                let mut st = 0;
                // SAFETY: plain waitpid with a valid status pointer.
                let r = unsafe { libc::waitpid(pid, &mut st, libc::WNOHANG) };
                if r == pid {
                    return exit_code(st);
                }
                if r < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD) {
                    return EXIT_SETUP_FAILED;
                }
            }
        }
    }
}

/// The next of `signals` (0 after an interruption or an error).
fn wait_signal(signals: &libc::sigset_t) -> i32 {
    // SAFETY: `info` is a valid, writable siginfo_t; `signals` is initialized.
    let sig = unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        libc::sigwaitinfo(signals, &mut info)
    };
    if sig < 0 {
        if io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            std::thread::sleep(Duration::from_millis(10));
        }
        return 0;
    }
    sig
}

/// The init inside: reaps every process that ends (orphans come to PID 1)
/// until the command `pid` has; then, or on a signal to stop, returns the
/// exit code to exit with, and its exit kills what is left.
fn supervise(pid: i32, signals: &libc::sigset_t) -> u8 {
    loop {
        let sig = wait_signal(signals);
        if matches!(sig, libc::SIGTERM | libc::SIGINT | libc::SIGHUP) {
            return 128 + sig as u8;
        }
        loop {
            let mut status = 0;
            // SAFETY: plain waitpid with a valid status pointer.
            let r = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if r == pid {
                return exit_code(status);
            }
            if r > 0 {
                continue;
            }
            if r < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD) {
                return EXIT_SETUP_FAILED;
            }
            break;
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
#[cfg(test)]
mod tests {
    use super::*;

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
