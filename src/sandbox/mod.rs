//! The operating-system sandbox of `run_command`'s children.
//!
//! A configured command runs the project's code (its tests, build scripts),
//! and during a run that code was partly written by the model: a hostile
//! repository and a prompt-injected model write it together. The scratch
//! copy (`workspace::scratch`) keeps the user's files out of the command's
//! working directory; this module keeps everything else out of its reach.
//!
//! Why it is built this way:
//!
//! - **A world of its own, built from namespaces**, as the trusted sandboxes
//!   of the field are (bubblewrap, which Flatpak and the coding agents use;
//!   codex's Linux sandbox; Chromium's). A user namespace lets a normal user
//!   create the rest; mount (the view of [`view`]: the system and the
//!   toolchains read-only, the copy writable, private `/tmp`, `/dev/shm`,
//!   `$HOME`, a fresh `/proc`, a minimal `/dev`, nothing else), PID (only
//!   the command's processes exist, and all end with it), IPC, UTS and
//!   network (only its own loopback). What cannot be reached by path cannot
//!   be attacked: no socket, file or process of the host is in the view.
//! - **seccomp and Landlock as defence in depth** ([`seccomp`] for what the
//!   namespaces do not cover: `ptrace`, keyrings, `prlimit` on others, new
//!   namespaces, mounts, …; Landlock for writes outside the writable paths,
//!   signals and abstract sockets).
//! - **A helper process that builds it, then starts the command.**
//!   `run_command` spawns the agentfix binary itself with the hidden
//!   subcommand [`EXEC_SUBCOMMAND`] ([`ExecArgs`]): a fresh, single-threaded
//!   process, which is what `unshare` and Landlock want. Restricting the
//!   language server itself (or a `pre_exec` hook in its multi-threaded
//!   process) would be unsound or impossible. Why not bubblewrap itself:
//!   ARCHITECTURE.md ("Commands run confined").
//! - **Degrade loudly, never quietly.** [`support`] probes what the system
//!   allows; where user namespaces, seccomp or Landlock are missing,
//!   commands are refused with [`refusal`], which says what is missing and
//!   how to proceed (`commands.sandbox = "off"`, editor settings only), and
//!   every front end says so before the run. There is no weaker mode.
//! - **A status pipe, not guesses from exit codes.** With `--status-fd`, the
//!   helper writes lines to that descriptor (closed before the command
//!   starts, so the command never sees it): `started`, or `error` with what
//!   failed, and `warn` lines. An exit code alone cannot tell a sandbox
//!   failure from a command that happens to exit with the same code.
//!
//! Not protected: every other operating system (no macOS Seatbelt profile,
//! nothing on Windows: there `commands.sandbox` must be `"off"`); a socket
//! inside a directory the user binds with `commands.readPaths` before
//! Landlock ABI 9; the processes limit for root (the kernel exempts it).
//!
//! Its parts:
//! the OS sandbox of `run_command`'s children: the hidden `agentfix
//! __sandbox-exec` helper (`linux.rs`: namespaces, then an init that builds
//! the view, drops capabilities, applies Landlock and limits, starts the
//! command under seccomp and waits), `view.rs` (the plan of mounts, pure),
//! `mounts.rs` (carrying it out), `seccomp.rs` (the filter), the probe of
//! what the system allows and the refusal

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
mod mounts;
#[cfg(target_os = "linux")]
mod seccomp;
pub mod view;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::OnceLock;

/// The hidden subcommand of the agentfix binary that runs a command in the
/// sandbox.
pub const EXEC_SUBCOMMAND: &str = "__sandbox-exec";

/// Environment variable naming the binary to start as the sandbox helper,
/// instead of this process's own executable (tests of the library, whose
/// executable is a test harness, point it at the built agentfix binary).
pub const HELPER_ENV: &str = "AGENTFIX_SANDBOX_EXE";

/// Exit code of the helper when the kernel offers no Landlock (the command
/// did not run). `EX_CONFIG` of sysexits.h.
pub const EXIT_NO_LANDLOCK: u8 = 78;
/// Exit code of the helper when the system cannot give the sandbox's
/// guarantees (no user namespaces, no seccomp): the command did not run.
/// `EX_UNAVAILABLE` of sysexits.h.
pub const EXIT_NO_SANDBOX: u8 = 69;
/// Exit code of the helper when the sandbox could not be set up (the
/// command did not run). `EX_OSERR` of sysexits.h.
pub const EXIT_SETUP_FAILED: u8 = 71;
/// Exit code of the helper when the command could not be started, as a
/// shell's for a command it cannot find.
pub const EXIT_SPAWN_FAILED: u8 = 127;

/// Resource limits of a sandboxed command (each process), `commands.limits`;
/// 0 leaves a limit as agentfix has it. The defaults let a real
/// `cargo test` or `pytest` run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceLimits {
    /// Address space of each process, in MiB (`RLIMIT_AS`).
    pub address_space_mb: u64,
    /// Processes and threads of the sandbox's user (`RLIMIT_NPROC`; the
    /// kernel does not apply it to root).
    pub processes: u64,
    /// Largest file a process may write, in MiB (`RLIMIT_FSIZE`).
    pub file_size_mb: u64,
    /// CPU time of each process, in seconds (`RLIMIT_CPU`).
    pub cpu_secs: u64,
    /// Open descriptors of each process (`RLIMIT_NOFILE`).
    pub open_files: u64,
}

impl Default for ResourceLimits {
    fn default() -> Self {
        ResourceLimits::DEFAULT
    }
}

impl ResourceLimits {
    /// The defaults.
    pub const DEFAULT: ResourceLimits = ResourceLimits {
        address_space_mb: 16 * 1024,
        processes: 4096,
        file_size_mb: 8 * 1024,
        cpu_secs: 3600,
        open_files: 8192,
    };

    /// The limits as `(resource, value)`, values in the kernel's units.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    fn rlimits(&self) -> Vec<(libc::c_int, u64)> {
        let mb = |v: u64| v.saturating_mul(1024 * 1024);
        vec![
            (libc::RLIMIT_AS as libc::c_int, mb(self.address_space_mb)),
            (libc::RLIMIT_NPROC as libc::c_int, self.processes),
            (libc::RLIMIT_FSIZE as libc::c_int, mb(self.file_size_mb)),
            (libc::RLIMIT_CPU as libc::c_int, self.cpu_secs),
            (libc::RLIMIT_NOFILE as libc::c_int, self.open_files),
        ]
    }

    /// Applies the limits to this process (what it starts inherits them):
    /// soft and hard alike, never above the hard limit it has. No core dumps.
    #[cfg(target_os = "linux")]
    fn apply(&self) {
        for (resource, value) in self.rlimits().into_iter().chain([(libc::RLIMIT_CORE as libc::c_int, 0)]) {
            if value == 0 && resource != libc::RLIMIT_CORE as libc::c_int {
                continue;
            }
            // SAFETY: plain getrlimit/setrlimit with valid structs.
            unsafe {
                let mut cur: libc::rlimit = std::mem::zeroed();
                if libc::getrlimit(resource as _, &mut cur) != 0 {
                    continue;
                }
                let v = value.min(cur.rlim_max);
                libc::setrlimit(resource as _, &libc::rlimit { rlim_cur: v, rlim_max: v });
            }
        }
    }
}

/// How `run_command` runs commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sandbox {
    /// Without a sandbox: the command can do whatever the user can.
    Off,
    /// In the sandbox; `network` keeps the host's network.
    On { network: bool, limits: ResourceLimits },
}

impl Default for Sandbox {
    fn default() -> Self {
        Sandbox::On { network: false, limits: ResourceLimits::default() }
    }
}

/// Arguments of `agentfix __sandbox-exec`.
#[derive(Debug, Clone, clap::Args)]
pub struct ExecArgs {
    /// A directory (or file) the command may write; repeat for more.
    #[arg(long = "write", value_name = "DIR")]
    pub write: Vec<PathBuf>,
    /// A directory (or file) the command may read besides the system and
    /// the toolchains found on its PATH; repeat for more.
    #[arg(long = "read", value_name = "DIR")]
    pub read: Vec<PathBuf>,
    /// A path that must not be visible even inside something bound; repeat for more.
    #[arg(long = "hide", value_name = "PATH")]
    pub hide: Vec<PathBuf>,
    /// Keep the host's network (no network namespace).
    #[arg(long)]
    pub network: bool,
    /// An open descriptor to report on: `started`, `warn\t…`, `error\tKIND\t…` lines.
    #[arg(long, value_name = "FD")]
    pub status_fd: Option<i32>,
    /// `RLIMIT_AS` in MiB (0: unchanged).
    #[arg(long, value_name = "MIB")]
    pub limit_as_mb: Option<u64>,
    /// `RLIMIT_NPROC` (0: unchanged).
    #[arg(long, value_name = "N")]
    pub limit_processes: Option<u64>,
    /// `RLIMIT_FSIZE` in MiB (0: unchanged).
    #[arg(long, value_name = "MIB")]
    pub limit_file_mb: Option<u64>,
    /// `RLIMIT_CPU` in seconds (0: unchanged).
    #[arg(long, value_name = "SECS")]
    pub limit_cpu_secs: Option<u64>,
    /// `RLIMIT_NOFILE` (0: unchanged).
    #[arg(long, value_name = "N")]
    pub limit_open_files: Option<u64>,
    /// The command and its arguments (after `--`); the program is looked up on PATH.
    #[arg(last = true, required = true, value_name = "ARGV")]
    pub argv: Vec<OsString>,
}

impl ExecArgs {
    /// The limits given, the defaults for those not given.
    pub fn limits(&self) -> ResourceLimits {
        let d = ResourceLimits::default();
        ResourceLimits {
            address_space_mb: self.limit_as_mb.unwrap_or(d.address_space_mb),
            processes: self.limit_processes.unwrap_or(d.processes),
            file_size_mb: self.limit_file_mb.unwrap_or(d.file_size_mb),
            cpu_secs: self.limit_cpu_secs.unwrap_or(d.cpu_secs),
            open_files: self.limit_open_files.unwrap_or(d.open_files),
        }
    }

    /// The arguments that give `limits` to the helper.
    pub fn limit_args(limits: &ResourceLimits) -> Vec<String> {
        [
            ("--limit-as-mb", limits.address_space_mb),
            ("--limit-processes", limits.processes),
            ("--limit-file-mb", limits.file_size_mb),
            ("--limit-cpu-secs", limits.cpu_secs),
            ("--limit-open-files", limits.open_files),
        ]
        .into_iter()
        .flat_map(|(flag, v)| [flag.to_string(), v.to_string()])
        .collect()
    }
}

/// Runs `agentfix __sandbox-exec`: builds the sandbox, runs the command in
/// it, and returns its exit code. Must be called while the process is
/// still single-threaded (before any runtime starts).
pub fn exec(args: ExecArgs) -> ExitCode {
    #[cfg(target_os = "linux")]
    {
        linux::exec(args)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = args;
        eprintln!("agentfix sandbox: {}", unsupported_os());
        ExitCode::from(EXIT_NO_SANDBOX)
    }
}

#[cfg(not(target_os = "linux"))]
fn unsupported_os() -> String {
    format!("agentfix has no command sandbox on {} yet (only Linux)", std::env::consts::OS)
}

/// The Landlock ABI version of the running kernel, or why there is none.
pub fn landlock_abi() -> Result<i32, String> {
    #[cfg(target_os = "linux")]
    {
        linux::landlock_abi()
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err(unsupported_os())
    }
}

/// What the kernel and the machine allow, probed once per process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Support {
    /// The Landlock ABI, or why there is none.
    pub landlock: Result<i32, String>,
    /// Whether user, mount, PID, IPC, UTS and network namespaces can be
    /// created by this user, or why not.
    pub namespaces: Result<(), String>,
    /// Whether seccomp filters are available, or why not.
    pub seccomp: Result<(), String>,
}

/// The probe of this process ([`Support`]), made at its first use.
pub fn support() -> &'static Support {
    static SUPPORT: OnceLock<Support> = OnceLock::new();
    SUPPORT.get_or_init(|| {
        let mut s = probe_without_namespaces();
        s.namespaces = probe_namespaces();
        s
    })
}

/// The probes that need no child process (the namespaces are assumed).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn probe_without_namespaces() -> Support {
    #[cfg(target_os = "linux")]
    let seccomp = if seccomp::available() { Ok(()) } else { Err("this kernel has no seccomp filters".to_string()) };
    #[cfg(not(target_os = "linux"))]
    let seccomp = Err(unsupported_os());
    Support { landlock: landlock_abi(), namespaces: Ok(()), seccomp }
}

/// Forks a child that creates the sandbox's namespaces and exits: whether
/// this user may.
fn probe_namespaces() -> Result<(), String> {
    #[cfg(target_os = "linux")]
    {
        let flags = libc::CLONE_NEWUSER
            | libc::CLONE_NEWNS
            | libc::CLONE_NEWPID
            | libc::CLONE_NEWIPC
            | libc::CLONE_NEWUTS
            | libc::CLONE_NEWNET;
        // SAFETY: the child calls only unshare and _exit, which are
        // async-signal-safe, so forking this multi-threaded process is sound.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: see above.
            unsafe {
                let code = if libc::unshare(flags) == 0 { 0 } else { *libc::__errno_location() };
                libc::_exit(code.clamp(0, 255));
            }
        }
        if pid < 0 {
            return Err(format!("cannot fork to probe namespaces: {}", std::io::Error::last_os_error()));
        }
        let mut status = 0;
        // SAFETY: waiting for the child just forked.
        unsafe {
            while libc::waitpid(pid, &mut status, 0) < 0
                && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
            {}
        }
        match libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)) {
            Some(0) => Ok(()),
            Some(errno) => Err(namespace_hint(&std::io::Error::from_raw_os_error(errno).to_string())),
            None => Err("the namespace probe was killed".to_string()),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err(unsupported_os())
    }
}

/// Why namespaces cannot be created, with what to do about it.
fn namespace_hint(error: &str) -> String {
    let read = |p: &str| std::fs::read_to_string(p).map(|s| s.trim().to_string()).unwrap_or_default();
    let mut why = format!("this user cannot create user namespaces ({error})");
    if read("/proc/sys/kernel/unprivileged_userns_clone") == "0" {
        why.push_str("; `kernel.unprivileged_userns_clone` is 0 (sysctl -w kernel.unprivileged_userns_clone=1)");
    }
    if read("/proc/sys/user/max_user_namespaces") == "0" {
        why.push_str("; `user.max_user_namespaces` is 0 (sysctl -w user.max_user_namespaces=10000)");
    }
    if read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1" {
        why.push_str(
            "; AppArmor restricts unprivileged user namespaces (Ubuntu 23.10+: give agentfix an AppArmor profile with \
             `userns,`, or sysctl -w kernel.apparmor_restrict_unprivileged_userns=0)",
        );
    }
    why
}

/// What of the sandbox's guarantees this system cannot give, each saying
/// why; empty when commands can run sandboxed.
pub fn missing(support: &Support) -> Vec<String> {
    let mut out = Vec::new();
    if let Err(why) = &support.namespaces {
        out.push(format!("namespaces: {why}"));
    }
    if let Err(why) = &support.seccomp {
        out.push(format!("seccomp: {why}"));
    }
    match &support.landlock {
        Ok(v) if *v >= 1 => {}
        Ok(v) => out.push(format!("Landlock: the kernel reports ABI {v}")),
        Err(why) => out.push(format!("Landlock: {why}")),
    }
    out
}

/// Whether commands can run under `sandbox` on a system that gave
/// `support`; the error is the whole message for the model and the user,
/// saying what is missing and how to turn the sandbox off.
pub fn availability(sandbox: Sandbox, support: &Support) -> Result<(), String> {
    if sandbox == Sandbox::Off {
        return Ok(());
    }
    let missing = missing(support);
    if missing.is_empty() { Ok(()) } else { Err(refusal(&missing.join("; "))) }
}

/// The refusal to run commands when the system cannot sandbox them
/// because of `why`: what happened and how the user can change it.
pub fn refusal(why: &str) -> String {
    format!(
        "commands run in a sandbox, and this system cannot provide one: {why}. No command was run. The user can \
         fix what is missing (Linux with user namespaces for this user, seccomp, and Landlock: 5.13 or newer with \
         `landlock` in the `lsm=` boot parameter), or turn the sandbox off in their editor settings for agentfix \
         (`\"commands\": {{\"sandbox\": \"off\"}}`; commands then run with all of the user's rights)"
    )
}

/// The binary to start as the sandbox helper: [`HELPER_ENV`] when set, else
/// this process's own executable (`/proc/self/exe` on Linux, which still
/// works after the binary was replaced on disk by an upgrade).
pub fn helper_exe() -> PathBuf {
    if let Some(exe) = std::env::var_os(HELPER_ENV).filter(|v| !v.is_empty()) {
        return PathBuf::from(exe);
    }
    if cfg!(target_os = "linux") {
        return PathBuf::from("/proc/self/exe");
    }
    std::env::current_exe().unwrap_or_else(|_| PathBuf::from("agentfix"))
}

/// What went wrong before the command ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The kernel offers no Landlock.
    NoLandlock(String),
    /// The system cannot give the sandbox's guarantees (the whole refusal).
    Unavailable(String),
    /// The sandbox could not be set up.
    Setup(String),
    /// The command could not be started (not found, not executable).
    Spawn(String),
}

/// What the helper reported on its status descriptor.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HelperReport {
    /// The command was started.
    pub started: bool,
    pub failure: Option<Failure>,
    /// Protections that could not be applied (the command ran without them).
    pub warnings: Vec<String>,
}

impl HelperReport {
    /// Reads the helper's status lines.
    pub fn parse(text: &str) -> HelperReport {
        let mut report = HelperReport::default();
        for line in text.lines() {
            let mut fields = line.splitn(3, '\t');
            match (fields.next(), fields.next(), fields.next()) {
                (Some("started"), None, None) => report.started = true,
                (Some("warn"), Some(msg), None) => report.warnings.push(msg.to_string()),
                (Some("error"), Some(kind), Some(msg)) => {
                    let msg = msg.to_string();
                    report.failure = Some(match kind {
                        "no-landlock" => Failure::NoLandlock(msg),
                        "unavailable" => Failure::Unavailable(msg),
                        "spawn" => Failure::Spawn(msg),
                        _ => Failure::Setup(msg),
                    });
                }
                _ => {}
            }
        }
        report
    }

    /// Whether the command ran, given the helper's exit code (`None` when
    /// it was killed): the status lines decide; without them, the exit code
    /// of a helper that never said `started` tells what happened.
    pub fn outcome(&self, exit_code: Option<i32>) -> Result<(), Failure> {
        if let Some(failure) = &self.failure {
            return Err(failure.clone());
        }
        if self.started {
            return Ok(());
        }
        Err(match exit_code {
            Some(code) if code == i32::from(EXIT_NO_LANDLOCK) => {
                Failure::NoLandlock("the sandbox helper found no Landlock in this kernel".into())
            }
            Some(code) if code == i32::from(EXIT_NO_SANDBOX) => {
                Failure::Unavailable(refusal("the sandbox helper could not create its namespaces"))
            }
            Some(code) => Failure::Setup(format!(
                "the sandbox helper exited with code {code} without starting the command (is `{}` the agentfix binary?)",
                helper_exe().display()
            )),
            None => Failure::Setup("the sandbox helper was killed before it started the command".into()),
        })
    }
}

/// One status line of tab-separated fields, without tabs or line breaks
/// inside a field.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn status_line(fields: &[&str]) -> String {
    let clean: Vec<String> =
        fields.iter().map(|f| f.chars().map(|c| if c.is_control() { ' ' } else { c }).collect()).collect();
    format!("{}\n", clean.join("\t"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn availability_says_exactly_what_is_missing() {
        let on = Sandbox::default();
        let all = Support { landlock: Ok(7), namespaces: Ok(()), seccomp: Ok(()) };
        assert_eq!(availability(on, &all), Ok(()));
        assert_eq!(availability(on, &Support { landlock: Ok(1), ..all.clone() }), Ok(()));
        let no_ns =
            Support { namespaces: Err("this user cannot create user namespaces (EPERM)".into()), ..all.clone() };
        let msg = availability(on, &no_ns).unwrap_err();
        assert!(msg.contains("namespaces: this user cannot create user namespaces (EPERM)"), "{msg}");
        assert!(msg.contains(r#""sandbox": "off""#) && msg.contains("No command was run"), "{msg}");
        let none = Support {
            landlock: Err("this Linux kernel is built without Landlock".into()),
            namespaces: Err("no".into()),
            seccomp: Err("this kernel has no seccomp filters".into()),
        };
        assert_eq!(missing(&none).len(), 3, "{:?}", missing(&none));
        let msg = availability(on, &none).unwrap_err();
        for part in ["namespaces: no", "seccomp: this kernel has no seccomp filters", "Landlock: this Linux kernel"] {
            assert!(msg.contains(part), "{part}: {msg}");
        }
        assert!(availability(on, &Support { landlock: Ok(0), ..all.clone() }).unwrap_err().contains("ABI 0"));
        // Off runs whatever the system offers.
        assert_eq!(availability(Sandbox::Off, &none), Ok(()));
    }

    #[test]
    fn this_machine_can_sandbox() {
        // The machines this project runs on (developers' and CI's) have namespaces, seccomp and Landlock.
        assert_eq!(missing(support()), Vec::<String>::new());
    }

    #[test]
    fn limits_reach_the_helper_and_back() {
        let limits = ResourceLimits { address_space_mb: 1, processes: 2, file_size_mb: 3, cpu_secs: 4, open_files: 5 };
        let mut argv = vec!["x".to_string()];
        argv.extend(ExecArgs::limit_args(&limits));
        argv.extend(["--".to_string(), "true".to_string()]);
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            args: ExecArgs,
        }
        let cli = <Cli as clap::Parser>::try_parse_from(argv).unwrap();
        assert_eq!(cli.args.limits(), limits);
        let none = <Cli as clap::Parser>::try_parse_from(["x", "--", "true"]).unwrap();
        assert_eq!(none.args.limits(), ResourceLimits::default());
    }

    #[test]
    fn status_lines_decide_and_exit_codes_are_the_fallback() {
        let started = HelperReport::parse("warn\tno TCP rules\nstarted\n");
        assert_eq!(started.warnings, ["no TCP rules"]);
        // A started command's exit code is its own, whatever it is.
        for code in [Some(0), Some(i32::from(EXIT_NO_LANDLOCK)), Some(127), None] {
            assert_eq!(started.outcome(code), Ok(()));
        }
        let no = HelperReport::parse(&status_line(&["error", "no-landlock", "Landlock is not enabled\nat boot"]));
        assert_eq!(
            no.outcome(Some(i32::from(EXIT_NO_LANDLOCK))),
            Err(Failure::NoLandlock("Landlock is not enabled at boot".into()))
        );
        let spawn = HelperReport::parse("error\tspawn\tNo such file or directory (os error 2)\n");
        assert_eq!(spawn.outcome(Some(127)), Err(Failure::Spawn("No such file or directory (os error 2)".into())));
        // No status at all: the distinct exit code still means "no Landlock".
        let silent = HelperReport::parse("");
        assert!(matches!(silent.outcome(Some(i32::from(EXIT_NO_LANDLOCK))), Err(Failure::NoLandlock(_))));
        assert!(matches!(silent.outcome(Some(0)), Err(Failure::Setup(m)) if m.contains("without starting")));
        assert!(matches!(silent.outcome(None), Err(Failure::Setup(_))));
    }
}
