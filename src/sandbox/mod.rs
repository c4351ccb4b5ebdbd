//! The operating-system sandbox of `run_command`'s children.
//!
//! A configured command runs the project's code (its tests, build scripts),
//! and during a run that code was partly written by the model. The scratch
//! copy (`workspace::scratch`) keeps the user's files out of the command's
//! *working directory*, but nothing stops such code from opening the real
//! workspace by absolute path, writing `$HOME`, deleting files elsewhere,
//! talking to the network, or leaving a `setsid()` daemon behind. This module
//! closes those holes on Linux.
//!
//! Why it is built this way:
//!
//! - **A helper process that restricts itself, then starts the command.**
//!   `run_command` does not spawn the command; it spawns the agentfix binary
//!   itself with the hidden subcommand [`EXEC_SUBCOMMAND`]
//!   (`agentfix __sandbox-exec --write DIR… [--network] -- argv…`, see
//!   [`ExecArgs`]). That helper is a fresh, single-threaded process, which is
//!   what Landlock (per thread) and `unshare` want, and restrictions applied
//!   to it are inherited by everything it starts and cannot be lifted. This
//!   is the approach of codex's Linux sandbox. Restricting the language
//!   server itself (or a `pre_exec` hook in its multi-threaded process) would
//!   be unsound or impossible.
//! - **Landlock, not containers.** Landlock is an unprivileged LSM, stacked
//!   on whatever else the system enforces; it needs no root, no setuid
//!   helper, no user namespaces and no mount tricks, and it works inside
//!   containers. The helper allows reading and executing the file system
//!   (`/`, but of `/dev` only the harmless devices), and writing only to the
//!   directories given with `--write` (the scratch copy, its private
//!   temporary directory, the Cargo build cache) and to `/dev/null`-like
//!   devices and `/dev/shm`. Device nodes cannot be created anywhere.
//! - **No network by default.** A new network namespace (`unshare
//!   (CLONE_NEWNET)`, when permitted: as root, or with `CAP_SYS_ADMIN`) has
//!   only a loopback device that is down, so nothing connects anywhere,
//!   UDP and loopback included. Landlock's TCP rules (ABI 4+) deny every TCP
//!   `bind` and `connect` on top, which is all that is left when the
//!   namespace cannot be created.
//! - **A subreaper owns the process tree.** The helper calls
//!   `prctl(PR_SET_CHILD_SUBREAPER)`, so every orphaned descendant
//!   (a `setsid()` + double-fork daemon included, which the process-group
//!   kill cannot reach) is reparented to it. When the command exits, or on
//!   SIGTERM (sent by `run_command` on timeout or cancellation), the helper
//!   SIGKILLs every descendant it finds in `/proc`, reaps them until it has
//!   no child left, and exits with the command's exit code (128 + signal for
//!   a signal). Landlock's signal scope keeps its kills inside the sandbox.
//! - **Fail closed.** If the kernel has no Landlock at all, the helper does
//!   not run the command: it exits with [`EXIT_NO_LANDLOCK`] and says why on
//!   stderr. `run_command` checks up front too ([`landlock_abi`],
//!   [`availability`]) and refuses with a message that names the setting
//!   that turns the sandbox off (`commands.sandbox = "off"`, editor
//!   settings only).
//! - **A status pipe, not guesses from exit codes.** With `--status-fd`, the
//!   helper writes one line to that descriptor (closed before the command
//!   starts, so the command never sees it): `started`, or `error` with what
//!   failed, and `warn` lines. An exit code alone cannot tell a sandbox
//!   failure from a command that happens to exit with the same code.
//! - **Dangerous capabilities are dropped** from the bounding set before the
//!   command starts (module loading, raw I/O, `mknod`, `CAP_SYS_ADMIN`,
//!   `ptrace`, …), so a command run as root keeps only ordinary file
//!   ownership powers; `no_new_privs` is set, so setuid programs gain
//!   nothing.
//!
//! Not protected (yet): reads (the command can read what the user can,
//! outside `/dev`), pathname UNIX sockets on kernels before Landlock ABI 9,
//! UDP where the network namespace cannot be created, and every other
//! operating system (no macOS Seatbelt profile, nothing on Windows: there
//! `commands.sandbox` must be `"off"`).

#[cfg(target_os = "linux")]
mod linux;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

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
/// Exit code of the helper when the sandbox could not be set up (the
/// command did not run). `EX_OSERR` of sysexits.h.
pub const EXIT_SETUP_FAILED: u8 = 71;
/// Exit code of the helper when the command could not be started, as a
/// shell's for a command it cannot find.
pub const EXIT_SPAWN_FAILED: u8 = 127;

/// How `run_command` runs commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sandbox {
    /// Without a sandbox: the command can do whatever the user can.
    Off,
    /// Under Landlock through the helper; `network` allows network access.
    Landlock { network: bool },
}

impl Default for Sandbox {
    fn default() -> Self {
        Sandbox::Landlock { network: false }
    }
}

/// Arguments of `agentfix __sandbox-exec`.
#[derive(Debug, Clone, clap::Args)]
pub struct ExecArgs {
    /// A directory (or file) the command may write; repeat for more.
    #[arg(long = "write", value_name = "DIR")]
    pub write: Vec<PathBuf>,
    /// Allow network access (no network namespace, no TCP rules).
    #[arg(long)]
    pub network: bool,
    /// Do not create a network namespace; rely on Landlock's TCP rules
    /// alone (what happens without the privilege to create one; for tests).
    #[arg(long, hide = true)]
    pub no_netns: bool,
    /// An open descriptor to report on: `started`, `warn\t…`, `error\tKIND\t…` lines.
    #[arg(long, value_name = "FD")]
    pub status_fd: Option<i32>,
    /// The command and its arguments (after `--`); the program is looked up on PATH.
    #[arg(last = true, required = true, value_name = "ARGV")]
    pub argv: Vec<OsString>,
}

/// Runs `agentfix __sandbox-exec`: restricts this process, runs the command,
/// kills what it left behind, and returns its exit code. Must be called
/// while the process is still single-threaded (before any runtime starts).
pub fn exec(args: ExecArgs) -> ExitCode {
    #[cfg(target_os = "linux")]
    {
        linux::exec(args)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = args;
        eprintln!("agentfix sandbox: {}", unsupported_os());
        ExitCode::from(EXIT_NO_LANDLOCK)
    }
}

#[cfg(not(target_os = "linux"))]
fn unsupported_os() -> String {
    format!("agentfix has no command sandbox on {} yet (only Linux, with Landlock)", std::env::consts::OS)
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

/// Whether commands can run under `sandbox` on a kernel whose Landlock probe
/// gave `abi` ([`landlock_abi`]); the error is the whole message for the
/// model and the user, saying why and how to turn the sandbox off.
pub fn availability(sandbox: Sandbox, abi: &Result<i32, String>) -> Result<(), String> {
    match (sandbox, abi) {
        (Sandbox::Off, _) => Ok(()),
        (Sandbox::Landlock { .. }, Ok(v)) if *v >= 1 => Ok(()),
        (Sandbox::Landlock { .. }, Ok(v)) => Err(refusal(&format!("the kernel reports Landlock ABI {v}"))),
        (Sandbox::Landlock { .. }, Err(why)) => Err(refusal(why)),
    }
}

/// The refusal to run commands when the system cannot sandbox them
/// because of `why`: what happened and how the user can change it.
pub fn refusal(why: &str) -> String {
    format!(
        "commands run in a sandbox, and this system cannot provide one: {why}. No command was run. The user can \
         turn the sandbox off in their editor settings for agentfix (`\"commands\": {{\"sandbox\": \"off\"}}`; \
         commands then run with all of the user's rights), or use a Linux kernel with Landlock (5.13 or newer, \
         `landlock` in the `lsm=` boot parameter)"
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
    /// The sandbox could not be set up.
    Setup(String),
    /// The command could not be started (not found, not executable).
    Spawn(String),
}

/// What the helper reported on its status descriptor.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// The command was started.
    pub started: bool,
    pub failure: Option<Failure>,
    /// Protections that could not be applied (the command ran without them).
    pub warnings: Vec<String>,
}

impl Report {
    /// Reads the helper's status lines.
    pub fn parse(text: &str) -> Report {
        let mut report = Report::default();
        for line in text.lines() {
            let mut fields = line.splitn(3, '\t');
            match (fields.next(), fields.next(), fields.next()) {
                (Some("started"), None, None) => report.started = true,
                (Some("warn"), Some(msg), None) => report.warnings.push(msg.to_string()),
                (Some("error"), Some(kind), Some(msg)) => {
                    let msg = msg.to_string();
                    report.failure = Some(match kind {
                        "no-landlock" => Failure::NoLandlock(msg),
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
    fn availability_with_and_without_landlock() {
        let on = Sandbox::Landlock { network: false };
        assert_eq!(availability(on, &Ok(7)), Ok(()));
        assert_eq!(availability(on, &Ok(1)), Ok(()));
        assert_eq!(availability(Sandbox::Landlock { network: true }, &Ok(3)), Ok(()));
        let no = Err("this Linux kernel is built without Landlock".to_string());
        let msg = availability(on, &no).unwrap_err();
        assert!(msg.contains("this Linux kernel is built without Landlock"), "{msg}");
        assert!(msg.contains(r#""sandbox": "off""#), "{msg}");
        assert!(msg.contains("No command was run"), "{msg}");
        assert!(availability(on, &Ok(0)).unwrap_err().contains("ABI 0"));
        // Off runs whatever the kernel offers.
        assert_eq!(availability(Sandbox::Off, &no), Ok(()));
        assert_eq!(availability(Sandbox::Off, &Ok(7)), Ok(()));
    }

    #[test]
    fn status_lines_decide_and_exit_codes_are_the_fallback() {
        let started = Report::parse("warn\tno TCP rules\nstarted\n");
        assert_eq!(started.warnings, ["no TCP rules"]);
        // A started command's exit code is its own, whatever it is.
        for code in [Some(0), Some(i32::from(EXIT_NO_LANDLOCK)), Some(127), None] {
            assert_eq!(started.outcome(code), Ok(()));
        }
        let no = Report::parse(&status_line(&["error", "no-landlock", "Landlock is not enabled\nat boot"]));
        assert_eq!(
            no.outcome(Some(i32::from(EXIT_NO_LANDLOCK))),
            Err(Failure::NoLandlock("Landlock is not enabled at boot".into()))
        );
        let spawn = Report::parse("error\tspawn\tNo such file or directory (os error 2)\n");
        assert_eq!(spawn.outcome(Some(127)), Err(Failure::Spawn("No such file or directory (os error 2)".into())));
        // No status at all: the distinct exit code still means "no Landlock".
        let silent = Report::parse("");
        assert!(matches!(silent.outcome(Some(i32::from(EXIT_NO_LANDLOCK))), Err(Failure::NoLandlock(_))));
        assert!(matches!(silent.outcome(Some(0)), Err(Failure::Setup(m)) if m.contains("without starting")));
        assert!(matches!(silent.outcome(None), Err(Failure::Setup(_))));
    }
}
