//! The sandbox of `run_command` end to end: the tool runs configured commands through the built
//! agentfix binary's `__sandbox-exec` helper, and code the "model" wrote into the overlay tries to
//! escape the scratch copy.
//!
//! Every test needs Landlock. On a kernel without it a test prints `SKIPPED: <why>` and passes,
//! except under CI (`CI` set), where it fails: CI machines have Landlock.
//!
//! The process environment is shared by the tests of this binary, so it is set once, before any
//! test starts a process ([`init`]): the helper's path, a cache directory inside Cargo's target
//! directory, and credential variables that must never reach a command.
#![cfg(target_os = "linux")]

use std::collections::BTreeMap;
use std::net::{TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

use agentfix::sandbox::{Limits, Sandbox};
use agentfix::tools::{Approval, Approver, CommandSpec, RunCommand, RunCommandInput, Tool, ToolContext, ToolError};
use agentfix::workspace::{NoBuffers, Overlay, Workspace};
use async_trait::async_trait;

const SECRETS: &[(&str, &str)] = &[
    ("ANTHROPIC_API_KEY", "sk-ant-sandbox-test-anthropic-0123456789"),
    ("OPENAI_API_KEY", "sk-sandbox-test-openai-0123456789abcdef"),
    ("AGENTFIX_API_KEY", "agentfix-sandbox-test-key-0123456789"),
    ("GITHUB_TOKEN", "ghp_sandboxtestgithubtoken0123456789abcd"),
];
const NPM_TOKEN: &str = "npm-sandbox-test-token-0123456789";

/// Sets the process environment once, before any test of this binary starts a process.
fn init() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("sandbox-cache");
        std::fs::create_dir_all(&cache).unwrap();
        // SAFETY: every test calls `init` first, and `Once` makes the others wait until it is
        // done, so no other thread of this process reads the environment meanwhile.
        unsafe {
            std::env::set_var(agentfix::sandbox::HELPER_ENV, env!("CARGO_BIN_EXE_agentfix"));
            std::env::set_var("XDG_CACHE_HOME", &cache);
            for (name, value) in SECRETS {
                std::env::set_var(name, value);
            }
            std::env::set_var("NPM_TOKEN", NPM_TOKEN);
        }
    });
}

/// Whether the kernel has Landlock; says SKIPPED otherwise, and fails under CI.
fn landlock() -> bool {
    init();
    match agentfix::sandbox::landlock_abi() {
        Ok(_) => true,
        Err(why) => {
            println!("SKIPPED: no Landlock on this machine: {why}");
            eprintln!("SKIPPED: no Landlock on this machine: {why}");
            assert!(std::env::var_os("CI").is_none(), "CI machines have Landlock, this one does not: {why}");
            false
        }
    }
}

struct Always;

#[async_trait]
impl Approver for Always {
    async fn approve(&self, _name: &str, _argv: &[String]) -> Approval {
        Approval::Always
    }
}

/// A workspace on disk with `files`, a context over it, and its root.
fn workspace(files: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf, ToolContext) {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    for (p, text) in files {
        let path = root.join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let overlay = Arc::new(Overlay::new(Arc::new(Workspace::new(vec![root.clone()])), Arc::new(NoBuffers)));
    let target = root.join(files.first().map_or("target", |(p, _)| *p));
    (dir, root, ToolContext::plain(overlay, target))
}

/// What the model does: write `text` at `rel` in the run's overlay (never on disk).
fn model_writes(ctx: &ToolContext, root: &Path, rel: &str, text: &str) {
    ctx.overlay.write(&root.join(rel), text.to_string()).unwrap();
}

fn command(argv: &[&str], timeout: Duration) -> CommandSpec {
    CommandSpec { argv: argv.iter().map(|a| a.to_string()).collect(), timeout }
}

fn tool(commands: &[(&str, CommandSpec)], sandbox: Sandbox, env_allow: &[&str]) -> RunCommand {
    let commands: BTreeMap<String, CommandSpec> = commands.iter().map(|(n, s)| (n.to_string(), s.clone())).collect();
    RunCommand::new(commands, Arc::new(Always))
        .with_sandbox(sandbox)
        .with_env_allow(env_allow.iter().map(|s| s.to_string()).collect())
}

const OFFLINE: Sandbox = Sandbox::On { network: false, limits: Limits::DEFAULT };
const ONLINE: Sandbox = Sandbox::On { network: true, limits: Limits::DEFAULT };

async fn run(tool: &RunCommand, ctx: &ToolContext, name: &str) -> String {
    match tool.run(RunCommandInput { name: name.to_string() }, ctx).await {
        Ok(out) => out,
        Err(e) => panic!("run_command `{name}` failed: {e:?}"),
    }
}

/// Runs `script` (written by the model into the overlay as `probe.py`) with python3.
async fn python(ctx: &ToolContext, root: &Path, script: &str, sandbox: Sandbox) -> String {
    model_writes(ctx, root, "probe.py", script);
    let t = tool(&[("probe", command(&["python3", "probe.py"], Duration::from_secs(60)))], sandbox, &[]);
    run(&t, ctx, "probe").await
}

/// Whether the probe's attempt `name` failed because the target is not in the command's world
/// (ENOENT), is read-only (EROFS) or is denied (EACCES, EPERM).
fn refused(out: &str, name: &str) -> bool {
    [
        "[Errno 2] No such file",
        "[Errno 30] Read-only file system",
        "[Errno 13] Permission denied",
        "[Errno 1] Operation not permitted",
    ]
    .iter()
    .any(|e| out.contains(&format!("\n{name} denied: {e}")))
}

/// Python that tries `action` (code using `path`) and prints `NAME ok` or `NAME denied: error`.
fn attempt(name: &str, path: &Path, action: &str) -> String {
    format!(
        "try:\n    path = {path:?}\n    {action}\n    print('{name} ok')\nexcept OSError as e:\n    print('{name} denied:', e)\n",
        path = path.display().to_string()
    )
}

#[tokio::test]
async fn writing_the_real_workspace_by_absolute_path_fails() {
    if !landlock() {
        return;
    }
    let (_d, root, ctx) = workspace(&[("src/lib.py", "ORIGINAL = True\n"), ("README", "readme\n")]);
    let lib = root.join("src/lib.py");
    let script = [
        attempt("overwrite", &lib, "open(path, 'w').write('PWNED = True\\n')"),
        attempt("append", &lib, "open(path, 'a').write('PWNED = True\\n')"),
        attempt("truncate", &lib, "os.truncate(path, 0)"),
        attempt("create", &root.join("new.py"), "open(path, 'x').write('x')"),
        attempt("mkdir", &root.join("newdir"), "os.mkdir(path)"),
        attempt("symlink", &root.join("link"), "os.symlink('/etc/passwd', path)"),
    ]
    .join("");
    let out = python(&ctx, &root, &format!("import os\n{script}"), OFFLINE).await;
    for name in ["overwrite", "append", "truncate", "create", "mkdir", "symlink"] {
        assert!(refused(&out, name), "{name}: {out}");
    }
    assert!(out.ends_with("[exit code 0]"), "{out}");
    assert_eq!(std::fs::read_to_string(&lib).unwrap(), "ORIGINAL = True\n");
    for absent in ["new.py", "newdir", "link", "probe.py"] {
        assert!(std::fs::symlink_metadata(root.join(absent)).is_err(), "{absent} appeared in the workspace");
    }
}

#[tokio::test]
async fn writing_outside_the_copy_fails() {
    if !landlock() {
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    let existing = outside.path().join("notes.txt");
    std::fs::write(&existing, "mine\n").unwrap();
    let (_d, root, ctx) = workspace(&[("a.txt", "a\n")]);
    let home = PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into()));
    let in_home = home.join(format!(".agentfix-sandbox-probe-{}", std::process::id()));
    let in_tmp = std::env::temp_dir().join(format!("agentfix-sandbox-probe-{}", std::process::id()));
    let script = [
        attempt("new", &outside.path().join("new.txt"), "open(path, 'w').write('x')"),
        attempt("existing", &existing, "open(path, 'w').write('overwritten\\n')"),
        attempt("home", &in_home, "open(path, 'w').write('x')"),
        attempt("tmp", &in_tmp, "open(path, 'w').write('x')"),
    ]
    .join("");
    let out = python(&ctx, &root, &script, OFFLINE).await;
    let landed = (in_home.exists(), in_tmp.exists());
    let _ = std::fs::remove_file(&in_home);
    let _ = std::fs::remove_file(&in_tmp);
    // The outside directory is not in the command's world at all.
    for name in ["new", "existing"] {
        assert!(refused(&out, name), "{name}: {out}");
    }
    // $HOME and /tmp are private to the run: a write lands there and is gone with it.
    assert!(out.contains("\nhome ok\n") && out.contains("\ntmp ok\n"), "{out}");
    assert_eq!(landed, (false, false), "a write reached the real $HOME or /tmp: {out}");
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "mine\n");
    assert!(!outside.path().join("new.txt").exists());
}

#[tokio::test]
async fn deleting_or_moving_files_outside_the_copy_fails() {
    if !landlock() {
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    let (keep, moved) = (outside.path().join("keep.txt"), outside.path().join("moved.txt"));
    std::fs::write(&keep, "keep\n").unwrap();
    std::fs::write(&moved, "moved\n").unwrap();
    std::fs::create_dir(outside.path().join("dir")).unwrap();
    let (_d, root, ctx) = workspace(&[("a.txt", "a\n")]);
    model_writes(
        &ctx,
        &root,
        "clean.sh",
        "rm -f \"$1/keep.txt\"\nmv \"$1/moved.txt\" ./stolen.txt\nrmdir \"$1/dir\"\nrm -rf \"$1\"\n",
    );
    let spec = command(&["sh", "clean.sh", outside.path().to_str().unwrap()], Duration::from_secs(30));
    let out = run(&tool(&[("clean", spec)], OFFLINE, &[]), &ctx, "clean").await;
    // The outside directory is not in the command's world.
    assert!(out.contains("rm: cannot remove") || out.contains("No such file"), "{out}");
    assert_eq!(std::fs::read_to_string(&keep).unwrap(), "keep\n");
    assert_eq!(std::fs::read_to_string(&moved).unwrap(), "moved\n");
    assert!(outside.path().join("dir").is_dir());
}

/// Python that connects to 127.0.0.1:`port` over TCP and sends a UDP datagram to `udp`.
fn connect_script(port: u16, udp: u16) -> String {
    format!(
        "import socket\n\
         try:\n    socket.create_connection(('127.0.0.1', {port}), timeout=5).sendall(b'hello')\n    print('tcp connected')\n\
         except OSError as e:\n    print('tcp failed:', e)\n\
         try:\n    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'hello', ('127.0.0.1', {udp}))\n    print('udp sent')\n\
         except OSError as e:\n    print('udp failed:', e)\n"
    )
}

/// Whether `listener` gets a connection within `wait`.
fn accepted(listener: &TcpListener, wait: Duration) -> bool {
    listener.set_nonblocking(true).unwrap();
    let until = Instant::now() + wait;
    while Instant::now() < until {
        if listener.accept().is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn received(socket: &UdpSocket) -> bool {
    socket.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    socket.recv(&mut [0u8; 16]).is_ok()
}

#[tokio::test]
async fn the_network_is_off_by_default_and_on_with_commands_network() {
    if !landlock() {
        return;
    }
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let script = connect_script(listener.local_addr().unwrap().port(), udp.local_addr().unwrap().port());
    let (_d, root, ctx) = workspace(&[("a.txt", "a\n")]);
    let out = python(&ctx, &root, &script, OFFLINE).await;
    assert!(out.contains("\ntcp failed:"), "{out}");
    assert!(!accepted(&listener, Duration::from_millis(200)), "the command connected: {out}");
    // The command has a network namespace of its own: its loopback is not the host's.
    assert!(!received(&udp), "a datagram got out: {out}");
    let out = python(&ctx, &root, &script, ONLINE).await;
    assert!(out.contains("\ntcp connected\n"), "{out}");
    assert!(accepted(&listener, Duration::from_secs(5)), "{out}");
    assert!(out.contains("\nudp sent\n"), "{out}");
    assert!(received(&udp), "{out}");
}

fn is_root() -> bool {
    // SAFETY: plain system call.
    unsafe { libc::geteuid() == 0 }
}

#[tokio::test]
async fn an_ordinary_test_suite_still_passes_in_the_copy() {
    if !landlock() {
        return;
    }
    let (_d, root, ctx) = workspace(&[("calc.py", "def add(a, b):\n    return a + b\n")]);
    model_writes(
        &ctx,
        &root,
        "test_calc.py",
        "import os, subprocess, sys, tempfile\n\
         from calc import add\n\
         assert add(2, 3) == 5\n\
         open('out.txt', 'w').write('in the copy')\n\
         assert open('out.txt').read() == 'in the copy'\n\
         os.makedirs('build/x', exist_ok=True); os.rename('out.txt', 'build/x/out.txt'); os.remove('build/x/out.txt')\n\
         tmp = os.environ['TMPDIR']\n\
         assert os.environ['TMP'] == tmp == os.environ['TEMP'] == tempfile.gettempdir(), tmp\n\
         open(os.path.join(tmp, 'scratch.txt'), 'w').write('tmp')\n\
         assert open(os.path.join(tmp, 'scratch.txt')).read() == 'tmp'\n\
         with tempfile.NamedTemporaryFile() as f: f.write(b'x'); f.flush()\n\
         open(os.devnull, 'w').write('discarded')\n\
         open(os.path.join(os.environ['CARGO_TARGET_DIR'], 'probe'), 'w').write('cache')\n\
         os.remove(os.path.join(os.environ['CARGO_TARGET_DIR'], 'probe'))\n\
         print(subprocess.run(['sh', '-c', 'echo child; echo to-stderr > /dev/stderr'], check=True).returncode)\n\
         print('tmpdir', tmp)\n\
         print('all tests passed')\n",
    );
    let t = tool(&[("test", command(&["python3", "test_calc.py"], Duration::from_secs(60)))], OFFLINE, &[]);
    let out = run(&t, &ctx, "test").await;
    assert!(out.contains("\nchild\nto-stderr\n0\n"), "{out}");
    assert!(out.ends_with("all tests passed\n[exit code 0]"), "{out}");
    let tmp = out.lines().find_map(|l| l.strip_prefix("tmpdir ")).unwrap();
    assert!(!tmp.starts_with(&*std::env::temp_dir().join("tmp").to_string_lossy()), "{tmp}");
    assert!(tmp.contains("agentfix-scratch-"), "{tmp}");
    assert!(!Path::new(tmp).exists(), "the private temporary directory {tmp} was left behind");
    assert!(!root.join("out.txt").exists() && !root.join("build").exists());
}

/// A `setsid()` + double-fork daemon that becomes `sleep argv[2]` (a marker only this test uses),
/// then the parent sleeps `argv[1]` s.
const DAEMON: &str = "import os, sys, time\n\
    if os.fork() == 0:\n\
    \x20   os.setsid()\n\
    \x20   if os.fork() == 0:\n\
    \x20       null = os.open(os.devnull, os.O_RDWR)\n\
    \x20       for fd in (0, 1, 2): os.dup2(null, fd)\n\
    \x20       os.execvp('sleep', ['sleep', sys.argv[2]])\n\
    \x20   print('daemon started', flush=True)\n\
    \x20   os._exit(0)\n\
    os.wait()\n\
    time.sleep(float(sys.argv[1]))\n\
    print('parent done', flush=True)\n";

/// A `sleep` argument no other process has: 300 s and a fraction unique to this test.
fn marker(line: u32) -> String {
    format!("300.{}{line}", std::process::id())
}

/// The host's processes whose command line is `sleep <marker>`.
fn sleepers(marker: &str) -> Vec<u32> {
    let want = format!("sleep\0{marker}\0");
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == want.as_bytes()))
        .collect()
}

/// Whether every `sleep <marker>` is gone within `wait`; kills any left, so a failing test leaves nothing.
fn sleepers_gone_within(marker: &str, wait: Duration) -> bool {
    let until = Instant::now() + wait;
    while !sleepers(marker).is_empty() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left = sleepers(marker);
    for pid in &left {
        let _ = std::process::Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
    left.is_empty()
}

#[tokio::test]
async fn a_setsid_daemon_does_not_survive_the_command() {
    if !landlock() {
        return;
    }
    let (_d, root, ctx) = workspace(&[("a.txt", "a\n")]);
    model_writes(&ctx, &root, "daemon.py", DAEMON);
    let m = marker(line!());
    let t = tool(&[("d", command(&["python3", "daemon.py", "0", &m], Duration::from_secs(60)))], OFFLINE, &[]);
    let started = Instant::now();
    let out = run(&t, &ctx, "d").await;
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
    assert!(out.contains("daemon started\n") && out.ends_with("parent done\n[exit code 0]"), "{out}");
    assert!(sleepers_gone_within(&m, Duration::from_millis(500)), "the setsid daemon survived: {out}");
}

#[tokio::test]
async fn a_setsid_daemon_does_not_survive_the_timeout() {
    if !landlock() {
        return;
    }
    let (_d, root, ctx) = workspace(&[("a.txt", "a\n")]);
    model_writes(&ctx, &root, "daemon.py", DAEMON);
    let m = marker(line!());
    let t = tool(&[("d", command(&["python3", "daemon.py", "60", &m], Duration::from_secs(2)))], OFFLINE, &[]);
    let started = Instant::now();
    let out = run(&t, &ctx, "d").await;
    assert!(started.elapsed() < Duration::from_secs(8), "took {:?}", started.elapsed());
    assert!(out.contains("daemon started\n") && out.ends_with("[killed after 2 s timeout]"), "{out}");
    assert!(sleepers_gone_within(&m, Duration::from_millis(500)), "the setsid daemon survived the timeout: {out}");
}

#[tokio::test]
async fn a_setsid_daemon_does_not_survive_a_dropped_call() {
    if !landlock() {
        return;
    }
    let (_d, root, ctx) = workspace(&[("a.txt", "a\n")]);
    model_writes(&ctx, &root, "daemon.py", DAEMON);
    let m = marker(line!());
    let t = tool(&[("d", command(&["python3", "daemon.py", "60", &m], Duration::from_secs(60)))], OFFLINE, &[]);
    let call = t.run(RunCommandInput { name: "d".into() }, &ctx);
    tokio::time::timeout(Duration::from_secs(20), async {
        tokio::pin!(call);
        loop {
            tokio::select! {
                r = &mut call => panic!("the call ended: {r:?}"),
                () = tokio::time::sleep(Duration::from_millis(50)) => {
                    if !sleepers(&m).is_empty() {
                        return;
                    }
                }
            }
        }
    })
    .await
    .expect("the daemon never started");
    // The call was dropped above (as when the run is cancelled): the tree must still die, stopped
    // by a task on this runtime, so wait without blocking it.
    let until = Instant::now() + Duration::from_secs(3);
    while !sleepers(&m).is_empty() && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(sleepers_gone_within(&m, Duration::ZERO), "the setsid daemon survived a dropped call");
}

#[tokio::test]
async fn credentials_never_reach_the_command_unless_allowed() {
    if !landlock() {
        return;
    }
    let (_d, _root, ctx) = workspace(&[("a.txt", "a\n")]);
    let me = std::process::id();
    let script = format!("env; echo; cat /proc/{me}/environ || echo 'environ of the server: denied'");
    let spec = command(&["sh", "-c", &script], Duration::from_secs(30));
    for (allow, npm) in [(&[][..], false), (&["NPM_TOKEN"][..], true)] {
        let out = run(&tool(&[("env", spec.clone())], OFFLINE, allow), &ctx, "env").await;
        for (name, value) in SECRETS {
            assert!(!out.contains(&format!("\n{name}=")), "{name} reached the command: {out}");
            assert!(!out.contains(value), "the value of {name} reached the command: {out}");
        }
        assert_eq!(out.contains(&format!("\nNPM_TOKEN={NPM_TOKEN}\n")), npm, "allow {allow:?}: {out}");
        assert!(out.contains("\nPATH="), "{out}");
        assert!(out.contains("\nenviron of the server: denied\n"), "{out}");
    }
}

#[tokio::test]
async fn a_missing_program_is_a_tool_error_through_the_sandbox() {
    if !landlock() {
        return;
    }
    let (_d, _root, ctx) = workspace(&[("a.txt", "a\n")]);
    let t = tool(&[("missing", command(&["agentfix-no-such-program"], Duration::from_secs(10)))], OFFLINE, &[]);
    let Err(ToolError::Respond(msg)) = t.run(RunCommandInput { name: "missing".into() }, &ctx).await else {
        panic!("expected a tool error");
    };
    assert!(msg.starts_with("could not start `agentfix-no-such-program`: No such file"), "{msg}");
    // A command that exits with the helper's own codes is still just a command.
    let t = tool(&[("code", command(&["sh", "-c", "exit 78"], Duration::from_secs(10)))], OFFLINE, &[]);
    assert!(run(&t, &ctx, "code").await.ends_with("[exit code 78]"));
}

#[tokio::test]
async fn root_cannot_make_device_nodes_in_the_copy() {
    if !landlock() {
        return;
    }
    if !is_root() {
        println!("SKIPPED: only root could make device nodes anyway");
        eprintln!("SKIPPED: only root could make device nodes anyway");
        return;
    }
    let (_d, root, ctx) = workspace(&[("a.txt", "a\n")]);
    let disk = "import os, stat\n\
        try:\n    os.mknod('disk', stat.S_IFBLK | 0o600, os.makedev(7, 0))\n    print('mknod ok')\n\
        except OSError as e:\n    print('mknod denied:', e)\n";
    let out = python(&ctx, &root, disk, OFFLINE).await;
    assert!(out.contains("\nmknod denied: [Errno 13] Permission denied"), "{out}");
}
