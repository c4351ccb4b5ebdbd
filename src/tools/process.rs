//! Process supervision for `run_command`: spawning the command, or the
//! sandbox helper with the command after `--`, in its own process group
//! (its own session when sandboxed, with the helper's status pipe), reading
//! the interleaved stdout and stderr into a capped [`Tail`], the timeout,
//! stopping (SIGTERM to the helper, then SIGKILL to the group) and reaping.
//! The tool itself (names, approval, the scratch copy, the result for the
//! model) is in `run_command.rs`; why the tree is killed this way is in its
//! module doc. It lives under `tools/`, not `sandbox/`, because it runs in a
//! `workspace::Scratch` (its root and environment), which `sandbox` may not
//! use.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::{BoxStream, SelectAll};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::sandbox::{self, HelperReport, Sandbox};
use crate::workspace::Scratch;

/// At most this many lines of output are shown.
const MAX_LINES: usize = 200;
/// At most this many bytes of output are shown.
pub(super) const MAX_BYTES: usize = 30 * 1024;
/// How long output is still read after the command's group was killed (a
/// process that left the group may hold the pipe open forever).
const DRAIN_GRACE: Duration = Duration::from_secs(2);
/// How long to wait for a killed command to be reaped.
const REAP_GRACE: Duration = Duration::from_secs(10);
/// How long the sandbox helper has after SIGTERM to kill what the command
/// started, before its whole group gets SIGKILL.
const STOP_GRACE: Duration = Duration::from_millis(500);
/// The descriptor the sandbox helper reports on.
#[cfg(unix)]
const STATUS_FD: i32 = 3;

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum End {
    Exited(i32),
    Signaled(i32),
    TimedOut,
    Unknown,
}

/// A command that ran.
pub(super) struct Finished {
    pub(super) output: Tail,
    pub(super) end: End,
    /// Whether the output was read to its end.
    pub(super) complete: bool,
    /// What the sandbox helper reported; `None` without the sandbox.
    pub(super) report: Option<HelperReport>,
}

/// How one command is started.
pub(super) struct Launch {
    pub(super) sandbox: Sandbox,
    /// The command's private temporary directory.
    pub(super) tmp: PathBuf,
    /// Build caches it may write besides the copy and `tmp`.
    pub(super) caches: Vec<PathBuf>,
    /// More directories the sandboxed command may read (`commands.readPaths`).
    pub(super) read: Vec<PathBuf>,
    /// Paths it must not see even inside a directory it may read (the real
    /// workspace, agentfix's own files).
    pub(super) hide: Vec<PathBuf>,
    /// The environment it gets (an allow list), before the copy's own.
    pub(super) env: Vec<(OsString, OsString)>,
}

type Chunks = BoxStream<'static, Vec<u8>>;

/// The chunks read from `reader` until its end (or an error).
fn chunks<R: AsyncRead + Unpin + Send + 'static>(reader: R) -> Chunks {
    futures::stream::unfold(reader, |mut reader| async move {
        let mut buf = vec![0u8; 8192];
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((buf, reader))
            }
        }
    })
    .boxed()
}

/// The command line to spawn for `argv`: the program itself, or the
/// sandbox helper with the program after `--`.
fn command_for(argv: &[String], scratch: &Scratch, launch: &Launch) -> io::Result<tokio::process::Command> {
    let Some((program, args)) = argv.split_first() else {
        return Err(io::Error::other("the command is empty"));
    };
    let program = program_path(program, scratch.root());
    let mut cmd = match launch.sandbox {
        Sandbox::Off => {
            let mut cmd = tokio::process::Command::new(program);
            cmd.args(args);
            cmd
        }
        Sandbox::On { network, limits } => {
            let mut cmd = tokio::process::Command::new(sandbox::helper_exe());
            cmd.arg(sandbox::EXEC_SUBCOMMAND);
            for dir in
                [scratch.root(), launch.tmp.as_path()].into_iter().chain(launch.caches.iter().map(PathBuf::as_path))
            {
                cmd.arg("--write").arg(dir);
            }
            for dir in &launch.read {
                cmd.arg("--read").arg(dir);
            }
            for path in &launch.hide {
                cmd.arg("--hide").arg(path);
            }
            if network {
                cmd.arg("--network");
            }
            cmd.args(sandbox::ExecArgs::limit_args(&limits));
            #[cfg(unix)]
            cmd.arg("--status-fd").arg(STATUS_FD.to_string());
            cmd.arg("--").arg(program).args(args);
            cmd
        }
    };
    cmd.env_clear()
        .envs(launch.env.iter().map(|(k, v)| (k, v)))
        .current_dir(scratch.root())
        .envs(scratch.env())
        .env("PWD", scratch.root())
        .env("TMPDIR", &launch.tmp)
        .env("TMP", &launch.tmp)
        .env("TEMP", &launch.tmp)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    Ok(cmd)
}

/// Runs `argv` in the scratch copy, killed after `timeout`; errors only when
/// the command (or the sandbox helper) cannot start.
pub(super) async fn execute(
    argv: &[String],
    scratch: &Scratch,
    timeout: Duration,
    launch: &Launch,
) -> io::Result<Finished> {
    let sandboxed = matches!(launch.sandbox, Sandbox::On { .. });
    let started = spawn(argv, scratch, launch, sandboxed)?;
    let group = ProcessGroup::of(&started.child);
    // Exit without reaping, so the group can still be killed safely.
    let exit_watch = group.leader().map(|pid| tokio::task::spawn_blocking(move || wait_exit_unreaped(pid)));
    let mut running = Running(Some(Proc { child: started.child, group, exit_watch, graceful: sandboxed }));
    let proc = running.0.as_mut().expect("just started");
    #[cfg(unix)]
    let sources: Vec<Chunks> = vec![chunks(tokio::net::unix::pipe::Receiver::from_owned_fd(started.output.into())?)];
    #[cfg(not(unix))]
    let sources: Vec<Chunks> = {
        let out = proc.child.stdout.take().map(chunks);
        let err = proc.child.stderr.take().map(chunks);
        out.into_iter().chain(err).collect()
    };
    let mut output = futures::stream::select_all(sources);
    let mut tail = Tail::default();
    let waited = wait(proc, &mut output, &mut tail, timeout).await;
    let status = stop_and_reap(proc, waited.timed_out, waited.reaped).await;
    // Reaped (or given up on): nothing is left to stop if this call is dropped.
    drop(running.0.take());
    let complete = !waited.reading || drain(&mut output, &mut tail).await;
    let end = match (waited.timed_out, status) {
        (true, _) => End::TimedOut,
        (false, Some(status)) => end_of(status),
        (false, None) => End::Unknown,
    };
    #[cfg(unix)]
    let report = match started.status {
        Some(reader) => Some(read_report(reader).await),
        None => None,
    };
    #[cfg(not(unix))]
    let report = sandboxed.then(HelperReport::default);
    Ok(Finished { output: tail, end, complete, report })
}

/// A spawned command and the read ends of its pipes.
struct Started {
    child: tokio::process::Child,
    /// stdout and stderr, interleaved.
    #[cfg(unix)]
    output: io::PipeReader,
    /// The sandbox helper's status pipe.
    #[cfg(unix)]
    status: Option<io::PipeReader>,
}

/// Spawns the command (or the sandbox helper) with its pipes connected,
/// in a new process group, or a new session when sandboxed.
fn spawn(argv: &[String], scratch: &Scratch, launch: &Launch, sandboxed: bool) -> io::Result<Started> {
    let mut cmd = command_for(argv, scratch, launch)?;
    #[cfg(unix)]
    let (reader, status_pipe) = connect_pipes(&mut cmd, sandboxed)?;
    #[cfg(not(unix))]
    {
        let _ = sandboxed;
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    }
    let spawned = cmd.spawn();
    // The command holds our copies of the pipes' write ends: close them, or
    // the output never ends.
    drop(cmd);
    #[cfg(unix)]
    let status_pipe = status_pipe.map(|(status_reader, status_writer)| {
        drop(status_writer);
        status_reader
    });
    let child = spawned?;
    Ok(Started {
        child,
        #[cfg(unix)]
        output: reader,
        #[cfg(unix)]
        status: status_pipe,
    })
}

/// Sends stdout and stderr to one pipe and, when sandboxed, gives the
/// helper the status pipe as [`STATUS_FD`] in a new session; otherwise the
/// command gets a new process group. Returns the output's read end and the
/// status pipe (both ends: the write end is closed after the spawn).
#[cfg(unix)]
fn connect_pipes(
    cmd: &mut tokio::process::Command,
    sandboxed: bool,
) -> io::Result<(io::PipeReader, Option<(io::PipeReader, io::PipeWriter)>)> {
    let (reader, writer) = io::pipe()?;
    cmd.stdout(writer.try_clone()?).stderr(writer);
    let status = if sandboxed {
        use std::os::fd::AsRawFd;
        let (status_reader, status_writer) = io::pipe()?;
        let fd = status_writer.as_raw_fd();
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: only async-signal-safe system calls between fork and
        // exec. The helper dies with the thread that started it (a runtime
        // worker, which lives as long as agentfix), so a command never
        // outlives agentfix; a parent already gone is caught by `getppid`.
        // A new session (which is also a new process group, the one
        // `ProcessGroup` kills) leaves the controlling terminal behind; the
        // status pipe becomes the helper's descriptor STATUS_FD, without
        // close-on-exec (the helper sets it again for its command).
        unsafe {
            cmd.pre_exec(move || {
                #[cfg(target_os = "linux")]
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0
                    || libc::getppid() != parent
                {
                    return Err(io::Error::other("agentfix exited before the sandbox started"));
                }
                #[cfg(not(target_os = "linux"))]
                let _ = parent;
                if libc::setsid() < 0 {
                    return Err(io::Error::last_os_error());
                }
                let r = if fd == STATUS_FD { libc::fcntl(fd, libc::F_SETFD, 0) } else { libc::dup2(fd, STATUS_FD) };
                if r < 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        Some((status_reader, status_writer))
    } else {
        cmd.process_group(0);
        None
    };
    Ok((reader, status))
}

/// How the wait for the command ended.
struct Waited {
    /// The timeout fired first.
    timed_out: bool,
    /// The exit status, when the command was reaped the ordinary way.
    reaped: Option<io::Result<std::process::ExitStatus>>,
    /// The output has not ended yet.
    reading: bool,
}

/// Reads output into `tail` until the command exits or `timeout` passes.
async fn wait(proc: &mut Proc, output: &mut SelectAll<Chunks>, tail: &mut Tail, timeout: Duration) -> Waited {
    let mut reading = true;
    let mut reaped = None;
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let timed_out = loop {
        tokio::select! {
            exited = watch(&mut proc.exit_watch) => {
                if let Ok(Ok(())) = exited {
                    break false;
                }
                // Else fall back to waiting the ordinary way.
            }
            status = proc.child.wait(), if proc.exit_watch.is_none() => {
                reaped = Some(status);
                break false;
            }
            () = &mut deadline => break true,
            chunk = output.next(), if reading => match chunk {
                Some(chunk) => tail.push(&chunk),
                None => reading = false,
            },
        }
    };
    Waited { timed_out, reaped, reading }
}

/// Stops what is left (after a timeout with the sandbox helper's grace),
/// kills the group before the leader is reaped, and reaps it, giving up
/// after [`REAP_GRACE`].
async fn stop_and_reap(
    proc: &mut Proc,
    timed_out: bool,
    reaped: Option<io::Result<std::process::ExitStatus>>,
) -> Option<std::process::ExitStatus> {
    if timed_out {
        proc.stop().await;
    } else {
        proc.group.kill();
    }
    match reaped {
        Some(status) => status.ok(),
        None => tokio::time::timeout(REAP_GRACE, proc.child.wait()).await.ok().and_then(Result::ok),
    }
}

/// Reads the rest of the output into `tail`, for at most [`DRAIN_GRACE`];
/// whether it ended.
async fn drain(output: &mut SelectAll<Chunks>, tail: &mut Tail) -> bool {
    tokio::time::timeout(DRAIN_GRACE, async {
        while let Some(chunk) = output.next().await {
            tail.push(&chunk);
        }
    })
    .await
    .is_ok()
}

/// Reads the sandbox helper's status lines (it has exited: the pipe ends).
#[cfg(unix)]
async fn read_report(reader: io::PipeReader) -> HelperReport {
    let mut text = Vec::new();
    if let Ok(mut pipe) = tokio::net::unix::pipe::Receiver::from_owned_fd(reader.into()) {
        let _ = tokio::time::timeout(DRAIN_GRACE, pipe.read_to_end(&mut text)).await;
    }
    HelperReport::parse(&String::from_utf8_lossy(&text))
}

/// A started command, until it is reaped.
struct Proc {
    child: tokio::process::Child,
    group: ProcessGroup,
    exit_watch: Option<tokio::task::JoinHandle<io::Result<()>>>,
    /// Whether the leader is the sandbox helper, which kills the whole tree
    /// on SIGTERM.
    graceful: bool,
}

impl Proc {
    /// Stops the command: SIGTERM to the sandbox helper and a short grace
    /// for it to kill every descendant, then SIGKILL to the whole group.
    async fn stop(&mut self) {
        if self.graceful
            && let Some(pid) = self.group.leader()
        {
            #[cfg(unix)]
            // SAFETY: plain system call; `pid > 1` is our unreaped child.
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
            let _ = tokio::time::timeout(STOP_GRACE, watch(&mut self.exit_watch)).await;
        }
        self.group.kill();
        let _ = self.child.start_kill();
    }
}

/// Owns a [`Proc`] while the call runs: when the call is dropped (the run
/// was cancelled or timed out), the command is stopped like on a timeout,
/// in the background.
struct Running(Option<Proc>);

impl Drop for Running {
    fn drop(&mut self) {
        let Some(mut proc) = self.0.take() else { return };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    proc.stop().await;
                    let _ = tokio::time::timeout(REAP_GRACE, proc.child.wait()).await;
                });
            }
            Err(_) => {
                proc.group.kill();
                let _ = proc.child.start_kill();
            }
        }
    }
}

/// Awaits the exit watcher, or never when there is none (or it finished).
async fn watch(
    handle: &mut Option<tokio::task::JoinHandle<io::Result<()>>>,
) -> Result<io::Result<()>, tokio::task::JoinError> {
    match handle {
        Some(h) => {
            let result = h.await;
            *handle = None;
            result
        }
        None => std::future::pending().await,
    }
}

fn end_of(status: std::process::ExitStatus) -> End {
    if let Some(code) = status.code() {
        return End::Exited(code);
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return End::Signaled(signal);
        }
    }
    End::Unknown
}

/// A relative program path with a directory (`./run-tests.sh`) names the
/// copy's file, not one relative to the server's directory.
fn program_path(program: &str, root: &Path) -> PathBuf {
    let path = Path::new(program);
    if path.is_relative() && path.components().count() > 1 { root.join(path) } else { path.to_path_buf() }
}

/// The command's process group (its leader's pid), killed with SIGKILL by
/// [`ProcessGroup::kill`] or on drop. Valid only while the leader is not
/// reaped: until then its pid cannot be reused.
struct ProcessGroup(Option<i32>);

impl ProcessGroup {
    fn of(child: &tokio::process::Child) -> Self {
        // Never 0 or 1: `kill(0)` and `kill(-1)` mean our own group and everything.
        Self(child.id().and_then(|id| i32::try_from(id).ok()).filter(|&pid| pid > 1))
    }

    fn leader(&self) -> Option<i32> {
        self.0
    }

    /// Kills every process of the group, once.
    fn kill(&mut self) {
        #[cfg(unix)]
        if let Some(pid) = self.0.take() {
            // SAFETY: plain system call; `pid > 1`, so `-pid` names exactly
            // the command's group.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
        #[cfg(not(unix))]
        {
            self.0 = None;
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Blocks until the child `pid` has exited, leaving it unreaped.
#[cfg(unix)]
fn wait_exit_unreaped(pid: i32) -> io::Result<()> {
    let id = libc::id_t::try_from(pid).map_err(io::Error::other)?;
    loop {
        // SAFETY: `info` is a valid, writable siginfo_t; WNOWAIT leaves the
        // child to be reaped by tokio.
        let r = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::waitid(libc::P_PID, id, &mut info, libc::WEXITED | libc::WNOWAIT)
        };
        if r == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

#[cfg(not(unix))]
fn wait_exit_unreaped(_pid: i32) -> io::Result<()> {
    Err(io::Error::other("not supported"))
}

/// The end of a command's output, bounded in memory whatever its size.
#[derive(Debug, Default)]
pub(super) struct Tail {
    buf: Vec<u8>,
    /// Bytes and line breaks dropped from the front of `buf`.
    dropped_bytes: u64,
    dropped_lines: u64,
    /// The last byte dropped.
    dropped_last: Option<u8>,
}

impl Tail {
    fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
        if self.buf.len() > 4 * MAX_BYTES {
            let cut = self.buf.len() - 2 * MAX_BYTES;
            self.dropped_lines += line_breaks(&self.buf[..cut]);
            self.dropped_bytes += cut as u64;
            self.dropped_last = self.buf[..cut].last().copied();
            self.buf.drain(..cut);
        }
    }

    /// The last [`MAX_LINES`] lines and at most [`MAX_BYTES`], after a line
    /// saying how much was cut above them.
    pub(super) fn render(&self) -> String {
        let body = self.buf.strip_suffix(b"\n").unwrap_or(&self.buf);
        let mut start = 0;
        let mut seen = 0;
        for (i, b) in body.iter().enumerate().rev() {
            if *b == b'\n' {
                seen += 1;
                if seen == MAX_LINES {
                    start = i + 1;
                    break;
                }
            }
        }
        if body.len() - start > MAX_BYTES {
            start = body.len() - MAX_BYTES;
            // Not inside a UTF-8 sequence.
            while body.get(start).is_some_and(|b| b & 0xC0 == 0x80) {
                start += 1;
            }
        }
        let (cut, kept) = body.split_at(start);
        let kept = String::from_utf8_lossy(kept);
        let cut_bytes = self.dropped_bytes + cut.len() as u64;
        if cut_bytes == 0 {
            return kept.into_owned();
        }
        let lines = self.dropped_lines + line_breaks(cut);
        let before_kept = cut.last().copied().or(self.dropped_last);
        let lines = match (lines, before_kept != Some(b'\n')) {
            (0, true) => "the start of a long line".to_string(),
            (1, false) => "1 line".to_string(),
            (n, false) => format!("{n} lines"),
            (n, true) => format!("{n} lines and the start of the next"),
        };
        format!("[… {} of earlier output cut: {lines} …]\n{kept}", size(cut_bytes))
    }
}

/// `3088 bytes`, `98 KB`, `12 MB`.
fn size(bytes: u64) -> String {
    match bytes {
        0..10_240 => format!("{bytes} bytes"),
        10_240..10_485_760 => format!("{} KB", bytes / 1024),
        _ => format!("{} MB", bytes / (1024 * 1024)),
    }
}

fn line_breaks(bytes: &[u8]) -> u64 {
    bytes.iter().filter(|b| **b == b'\n').count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_caps_lines_and_bytes() {
        let mut tail = Tail::default();
        assert_eq!(tail.render(), "");
        tail.push(b"a\nb\n");
        assert_eq!(tail.render(), "a\nb");
        let mut tail = Tail::default();
        for i in 0..100_000 {
            tail.push(format!("line {i}\n").as_bytes());
        }
        let text = tail.render();
        assert!(text.starts_with("[… 1061 KB of earlier output cut: 99800 lines …]\nline 99800\n"), "{}", &text[..100]);
        assert!(text.ends_with("\nline 99999"));
        assert_eq!(text.lines().count(), 201);
        assert!(tail.buf.len() <= 4 * MAX_BYTES);
        // A cut never splits a UTF-8 sequence.
        let mut tail = Tail::default();
        tail.push("é".repeat(MAX_BYTES).as_bytes());
        let text = tail.render();
        assert!(text.lines().nth(1).unwrap().chars().all(|c| c == 'é'));
    }
}
