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

use agentfix::sandbox::{ResourceLimits, Sandbox};
use agentfix::tools::{Approval, Approver, CommandSpec, RunCommand, RunCommandInput, Tool, ToolContext, ToolError};
use agentfix::workspace::{NoBuffers, Overlay, Workspace};
use async_trait::async_trait;

const SECRETS: &[(&str, &str)] = &[
    ("ANTHROPIC_API_KEY", "sk-ant-sandbox-test-anthropic-0123456789"),
    ("OPENAI_API_KEY", "sk-sandbox-test-openai-0123456789abcdef"),
    ("AGENTFIX_API_KEY", "agentfix-sandbox-test-key-0123456789"),
    ("GITHUB_TOKEN", "ghp_sandboxtestgithubtoken0123456789abcd"),
    // Names the old deny list missed: no `_SUFFIX`, or a suffix it did not know.
    ("SECRET_KEY", "django-sandbox-secret-key-0123"),
    ("DATABASE_URL", "postgres://app:db-sandbox-password-0123@db/app"),
    ("PGPASSWORD", "pg-sandbox-password-0123"),
    ("MYSQL_PWD", "mysql-sandbox-password-0123"),
    ("API_KEY", "plain-sandbox-api-key-0123"),
    ("TOKEN", "plain-sandbox-token-0123"),
    ("AZURE_OPENAI_KEY", "azure-sandbox-key-0123"),
    ("SENTRY_DSN", "https://sentry-sandbox-key-0123@sentry.example/1"),
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

const OFFLINE: Sandbox = Sandbox::On { network: false, limits: ResourceLimits::DEFAULT };
const ONLINE: Sandbox = Sandbox::On { network: true, limits: ResourceLimits::DEFAULT };

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

// ---------------------------------------------------------------------------------------------
// The attacks of a hostile repository and a prompt-injected model, each run through the real
// helper as root and as a normal user (uid 65534 through `setpriv`). Every probe first prints
// `PROBE-INSIDE <hostname>`, so a probe that never ran inside the sandbox cannot pass.
// ---------------------------------------------------------------------------------------------

/// Who runs agentfix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    /// This test process's user (root on CI).
    Me,
    /// uid/gid 65534, through `setpriv`, when this process is root.
    Nobody,
}

const NOBODY: u32 = 65534;

/// The users to attack as: root and nobody when root (says SKIPPED for nobody without
/// `setpriv`, and fails under CI), else this normal user alone (says so).
fn users() -> Vec<Who> {
    if !is_root() {
        println!("SKIPPED as root: these tests run as root only when the test process is root");
        eprintln!("SKIPPED as root: these tests run as root only when the test process is root");
        return vec![Who::Me];
    }
    if std::process::Command::new("setpriv").arg("--version").output().is_err() {
        println!("SKIPPED as a normal user: no `setpriv` on PATH (util-linux)");
        eprintln!("SKIPPED as a normal user: no `setpriv` on PATH (util-linux)");
        assert!(std::env::var_os("CI").is_none(), "CI machines have setpriv");
        return vec![Who::Me];
    }
    vec![Who::Me, Who::Nobody]
}

/// A world for one probe: `base/` holds the copy the command may write (`copy/`), the user's
/// home (`home/`, with secrets) and the real workspace (`ws/`, with secrets). The command may read
/// `base/` (as with `commands.readPaths`), so the home's agentfix cache and the workspace must be
/// covered, not merely absent.
struct World {
    _dir: tempfile::TempDir,
    base: PathBuf,
    who: Who,
}

impl World {
    fn new(who: Who) -> World {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let files = [
            ("copy/probe.txt", "in the copy\n"),
            ("ws/.env", "DATABASE_PASSWORD=ws-env-secret-0123\n"),
            ("ws/.git/config", "[http]\n\textraheader = AUTHORIZATION: basic git-config-token-4567\n"),
            ("ws/src/lib.py", "x = 1\n"),
            (
                "home/.ssh/id_rsa",
                "-----BEGIN OPENSSH PRIVATE KEY-----\nid-rsa-secret-89ab\n-----END OPENSSH PRIVATE KEY-----\n",
            ),
            ("home/.cache/agentfix/transcripts/old.jsonl", "{\"transcript-secret-cdef\": 1}\n"),
            ("home/.cache/agentfix/undo/backup", "undo-backup-secret-0246\n"),
        ];
        for (p, text) in files {
            let path = base.join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let world = World { _dir: dir, base, who };
        world.own(&world.base);
        world
    }

    /// Makes `path` (and everything under it) the user's: nobody's for [`Who::Nobody`].
    fn own(&self, path: &Path) {
        if self.who == Who::Nobody {
            let status =
                std::process::Command::new("chown").args(["-R", &format!("{NOBODY}:{NOBODY}")]).arg(path).status();
            assert!(status.unwrap().success());
        }
    }

    /// The agentfix binary to run: for nobody a copy in a folder anyone can enter (the build's own
    /// may lie under a home that is closed to other users).
    fn binary(&self) -> String {
        static COPY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
        if self.who == Who::Me {
            return env!("CARGO_BIN_EXE_agentfix").into();
        }
        let copy = COPY.get_or_init(|| {
            // Copies of earlier test processes that are gone are removed.
            for e in std::fs::read_dir(std::env::temp_dir()).into_iter().flatten().flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if let Some(pid) = name.strip_prefix("agentfix-sandbox-bin-")
                    && !Path::new("/proc").join(pid).exists()
                {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
            let dir = std::env::temp_dir().join(format!("agentfix-sandbox-bin-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
            let bin = dir.join("agentfix");
            std::fs::copy(env!("CARGO_BIN_EXE_agentfix"), &bin).unwrap();
            bin
        });
        copy.display().to_string()
    }

    /// The secrets the command must never print.
    fn secrets() -> [&'static str; 5] {
        [
            "ws-env-secret-0123",
            "git-config-token-4567",
            "id-rsa-secret-89ab",
            "transcript-secret-cdef",
            "undo-backup-secret-0246",
        ]
    }

    /// A command for `argv` as this world's user: through `setpriv` for nobody.
    fn as_user(&self, argv: &[&str]) -> std::process::Command {
        let mut cmd = match self.who {
            Who::Me => std::process::Command::new(argv[0]),
            Who::Nobody => {
                let mut c = std::process::Command::new("setpriv");
                c.args([&format!("--reuid={NOBODY}"), &format!("--regid={NOBODY}"), "--clear-groups", "--", argv[0]]);
                c
            }
        };
        cmd.args(&argv[1..]).env_clear().env("PATH", "/usr/bin:/bin").env("HOME", self.base.join("home"));
        cmd
    }

    /// The helper's command line for `python3 -c script` with `extra` helper arguments.
    fn helper(&self, extra: &[String], script: &str) -> std::process::Command {
        let b = |p: &str| self.base.join(p).display().to_string();
        let mut argv: Vec<String> = vec![self.binary(), "__sandbox-exec".into()];
        argv.extend(["--write".into(), b("copy"), "--read".into(), b(""), "--hide".into(), b("ws")]);
        argv.extend(["--hide".into(), b("home/.cache/agentfix")]);
        argv.extend(extra.iter().cloned());
        let prelude = "import socket\nprint('PROBE-INSIDE', socket.gethostname(), flush=True)\n";
        argv.extend(["--".into(), "python3".into(), "-c".into(), format!("{prelude}{script}")]);
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let mut cmd = self.as_user(&argv);
        cmd.current_dir(self.base.join("copy"));
        cmd
    }

    /// Runs `script` in the sandbox; its output (stdout and stderr), checked to come from inside.
    fn probe(&self, script: &str) -> String {
        self.probe_with(&[], script, |_| {})
    }

    fn probe_with(&self, extra: &[String], script: &str, prepare: impl FnOnce(&mut std::process::Command)) -> String {
        let mut cmd = self.helper(extra, script);
        prepare(&mut cmd);
        let out = cmd.output().unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(
            text.starts_with("PROBE-INSIDE agentfix-sandbox\n"),
            "{:?}: the probe did not run inside: {text}",
            self.who
        );
        assert!(out.status.success(), "{:?}: the probe failed: {text}", self.who);
        for secret in Self::secrets() {
            assert!(!text.contains(secret), "{:?}: {secret} leaked: {text}", self.who);
        }
        text
    }
}

#[test]
fn no_pathname_socket_of_the_host_is_reachable() {
    if !landlock() {
        return;
    }
    for who in users() {
        let w = World::new(who);
        // Where such sockets live: /tmp (tmux, X11, screen), the user's home (an agent's, a
        // language server's), and the workspace.
        let paths = [
            std::env::temp_dir().join(format!("agentfix-sock-{}-{who:?}", std::process::id())),
            w.base.join("home/agent.sock"),
            w.base.join("ws/.git/fsmonitor.sock"),
        ];
        let listeners: Vec<std::os::unix::net::UnixListener> = paths
            .iter()
            .map(|p| {
                let _ = std::fs::remove_file(p);
                let l = std::os::unix::net::UnixListener::bind(p).unwrap();
                l.set_nonblocking(true).unwrap();
                w.own(p);
                std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
                l
            })
            .collect();
        let script: String = paths
            .iter()
            .enumerate()
            .map(|(i, p)| {
                format!(
                    "try:\n    s = socket.socket(socket.AF_UNIX); s.connect({p:?}); s.sendall(b'run a shell'); print('s{i} connected')\n\
                     except OSError as e:\n    print('s{i} denied:', e)\n",
                    p = p.display().to_string()
                )
            })
            .collect();
        let out = w.probe(&script);
        for (i, l) in listeners.iter().enumerate() {
            assert!(refused(&out, &format!("s{i}")), "{who:?}: {out}");
            assert!(l.accept().is_err(), "{who:?}: {} got a connection: {out}", paths[i].display());
        }
        let _ = std::fs::remove_file(&paths[0]);
    }
}

/// A field of `/proc/PID/limits` (the soft limit of the line starting with `name`).
fn soft_limit(pid: u32, name: &str) -> String {
    let text = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = text.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("no {name}: {text}"));
    line[name.len()..].split_whitespace().next().unwrap().to_string()
}

/// The nice value of `pid` (field 19 of `/proc/PID/stat`).
fn nice(pid: u32) -> String {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let (_, rest) = stat.rsplit_once(')').unwrap();
    rest.split_whitespace().nth(16).unwrap().to_string()
}

#[test]
fn processes_outside_cannot_be_limited_slowed_or_pinned() {
    if !landlock() {
        return;
    }
    for who in users() {
        let w = World::new(who);
        // A process of the same user outside (agentfix itself, for the attack that made it die of
        // RLIMIT_FSIZE), and this test process.
        let mut victim = w.as_user(&["sleep", "60"]).spawn().unwrap();
        let pids = [victim.id(), std::process::id()];
        let before: Vec<(String, String)> = pids.iter().map(|&p| (soft_limit(p, "Max file size"), nice(p))).collect();
        let script = format!(
            "import os, resource\n\
             for pid in ({v}, {me}, 1, os.getppid()):\n\
             \x20   for name, act in (('prlimit', lambda: resource.prlimit(pid, resource.RLIMIT_FSIZE, (4096, 4096))),\n\
             \x20                     ('setpriority', lambda: os.setpriority(os.PRIO_PROCESS, pid, 19)),\n\
             \x20                     ('affinity', lambda: os.sched_setaffinity(pid, {{0}}))):\n\
             \x20       try:\n\
             \x20           act(); print(name, pid, 'ok')\n\
             \x20       except OSError as e:\n\
             \x20           print(name, pid, 'denied:', e)\n\
             resource.prlimit(0, resource.RLIMIT_NOFILE, (1024, 1024)); print('own limit ok')\n\
             os.setpriority(os.PRIO_PROCESS, 0, 1); print('own nice ok')\n",
            v = pids[0],
            me = pids[1]
        );
        let out = w.probe(&script);
        let after: Vec<(String, String)> = pids.iter().map(|&p| (soft_limit(p, "Max file size"), nice(p))).collect();
        let _ = victim.kill();
        let _ = victim.wait();
        assert_eq!(before, after, "{who:?}: an outside process was changed: {out}");
        assert!(!out.lines().any(|l| l.ends_with(" ok") && !l.starts_with("own")), "{who:?}: {out}");
        assert!(out.contains("\nprlimit 1 denied:") && out.contains("\nsetpriority 1 denied:"), "{who:?}: {out}");
        assert!(out.contains("\nown limit ok\nown nice ok\n"), "{who:?}: {out}");
    }
}

#[test]
fn no_datagram_or_connection_leaves_the_sandbox() {
    if !landlock() {
        return;
    }
    for who in users() {
        let w = World::new(who);
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        let script = format!(
            "{}try:\n    socket.getaddrinfo('pypi.org', 443); print('dns ok')\nexcept OSError as e:\n    print('dns denied:', e)\n",
            connect_script(tcp.local_addr().unwrap().port(), udp.local_addr().unwrap().port())
        );
        let out = w.probe(&script);
        assert!(out.contains("\ntcp failed:") && out.contains("\ndns denied:"), "{who:?}: {out}");
        assert!(!received(&udp), "{who:?}: a datagram reached the host: {out}");
        assert!(!accepted(&tcp, Duration::from_millis(200)), "{who:?}: {out}");
    }
}

#[test]
fn the_users_secrets_and_the_real_workspace_cannot_be_read() {
    if !landlock() {
        return;
    }
    for who in users() {
        let w = World::new(who);
        let b = |p: &str| w.base.join(p).display().to_string();
        let targets = [
            ("env", b("ws/.env")),
            ("gitconfig", b("ws/.git/config")),
            ("ssh", b("home/.ssh/id_rsa")),
            ("transcript", b("home/.cache/agentfix/transcripts/old.jsonl")),
            ("undo", b("home/.cache/agentfix/undo/backup")),
        ];
        let mut script: String = targets
            .iter()
            .map(|(name, p)| format!("try:\n    print('{name} ok', open({p:?}).read())\nexcept OSError as e:\n    print('{name} denied:', e)\n"))
            .collect();
        // Where the real root would show: other processes' command lines and environments.
        script.push_str(&format!(
            "import os\nfound = []\nfor pid in os.listdir('/proc'):\n\
             \x20   if not pid.isdigit() or int(pid) == os.getpid(): continue\n\
             \x20   for f in ('cmdline', 'environ'):\n\
             \x20       try:\n\
             \x20           if {ws:?}.encode() in open('/proc/%s/%s' % (pid, f), 'rb').read(): found.append(pid)\n\
             \x20       except OSError:\n\
             \x20           pass\n\
             print('root found in', found)\nprint('processes', sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))\n\
             print('shadow', len(open('/etc/shadow').read()) if os.access('/etc/shadow', os.R_OK) else 'denied')\n",
            ws = b("ws")
        ));
        let ws = b("ws");
        let mut holder = w.as_user(&["python3", "-c", "import time; time.sleep(30)", &ws]).spawn().unwrap();
        let out = w.probe(&script);
        let _ = holder.kill();
        let _ = holder.wait();
        for (name, _) in targets {
            assert!(refused(&out, name), "{who:?} {name}: {out}");
        }
        assert!(out.contains("\nroot found in []\n"), "{who:?}: {out}");
        assert!(out.contains("\nshadow 0\n") || out.contains("\nshadow denied\n"), "{who:?}: {out}");
        // Only the sandbox's own processes are there (its init and the probe).
        assert!(out.contains("\nprocesses [1, 2]\n"), "{who:?}: {out}");
        // What the command may see of the readable base: the copy and the home's other files.
        let out = w.probe(&format!(
            "import os\nprint(sorted(os.listdir({:?})))\nprint(sorted(os.listdir({:?})))\n",
            b("ws"),
            b("home/.cache/agentfix")
        ));
        assert!(out.contains("\n[]\n[]\n"), "{who:?}: the covered directories are not empty: {out}");
    }
}

#[test]
fn sysv_ipc_and_dev_shm_are_the_sandboxs_own() {
    if !landlock() {
        return;
    }
    for who in users() {
        let w = World::new(who);
        let key = 0x4146_0000 + (std::process::id() & 0xffff) as i32 + if who == Who::Nobody { 0x1_0000 } else { 0 };
        // A 0600 segment of the same user, made by a process of that user, as another program's.
        let make = format!(
            "import ctypes; c = ctypes.CDLL(None, use_errno=True); c.shmat.restype = ctypes.c_void_p\n\
             i = c.shmget({key}, 4096, 0o1000 | 0o600); p = c.shmat(i, None, 0)\n\
             ctypes.memmove(p, b'host-segment', 12); print(i)\n"
        );
        let made = w.as_user(&["python3", "-c", &make]).output().unwrap();
        assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
        let id: i32 = String::from_utf8_lossy(&made.stdout).trim().parse().unwrap();
        let shm_file = PathBuf::from(format!("/dev/shm/agentfix-host-{}-{who:?}", std::process::id()));
        std::fs::write(&shm_file, "host shm file\n").unwrap();
        std::fs::set_permissions(&shm_file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
        w.own(&shm_file);
        let left = PathBuf::from(format!("/dev/shm/agentfix-left-{}-{who:?}", std::process::id()));
        let script = format!(
            "import ctypes\nc = ctypes.CDLL(None, use_errno=True)\n\
             print('shmget', c.shmget({key}, 0, 0), ctypes.get_errno())\n\
             try:\n    print('shmfile ok', open({f:?}).read())\nexcept OSError as e:\n    print('shmfile denied:', e)\n\
             open({f:?}, 'w').write('overwritten')\n\
             open({l:?}, 'w').write('left for the next run'); print('wrote own shm')\n",
            f = shm_file.display().to_string(),
            l = left.display().to_string()
        );
        let out = w.probe(&script);
        // SAFETY: attaching and removing the segment this test made.
        let content = unsafe {
            let p = libc::shmat(id, std::ptr::null(), libc::SHM_RDONLY);
            let s = std::slice::from_raw_parts(p as *const u8, 12).to_vec();
            libc::shmdt(p);
            libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut());
            s
        };
        let host_file = std::fs::read_to_string(&shm_file).unwrap();
        let _ = std::fs::remove_file(&shm_file);
        assert!(out.contains(&format!("\nshmget -1 {}\n", libc::ENOENT)), "{who:?}: {out}");
        assert_eq!(content, b"host-segment", "{who:?}: {out}");
        assert!(refused(&out, "shmfile") && host_file == "host shm file\n", "{who:?}: {out}");
        assert!(out.contains("\nwrote own shm\n"), "{who:?}: {out}");
        assert!(!left.exists(), "{who:?}: a file in the sandbox's /dev/shm outlived the run");
    }
}

#[test]
fn inherited_descriptors_do_not_reach_the_command() {
    if !landlock() {
        return;
    }
    for who in users() {
        let w = World::new(who);
        let outside = w.base.join("outside.txt");
        std::fs::write(&outside, "mine\n").unwrap();
        let file = std::fs::OpenOptions::new().read(true).write(true).open(&outside).unwrap();
        let script = "import os\n\
            try:\n    os.write(9, b'overwritten'); print('fd9 ok')\nexcept OSError as e:\n    print('fd9 denied:', e)\n\
            print('fds', sorted(int(f) for f in os.listdir('/proc/self/fd')))\n";
        let out = w.probe_with(&[], script, |cmd| {
            use std::os::fd::AsRawFd;
            use std::os::unix::process::CommandExt;
            let fd = file.as_raw_fd();
            // SAFETY: dup2 between fork and exec: fd 9 open on the outside file, without
            // close-on-exec, as agentfix would have inherited it from its own parent.
            unsafe {
                cmd.pre_exec(move || if libc::dup2(fd, 9) < 0 { Err(std::io::Error::last_os_error()) } else { Ok(()) });
            }
        });
        assert!(out.contains("\nfd9 denied: [Errno 9] Bad file descriptor\n"), "{who:?}: {out}");
        // 0, 1, 2 and the one listdir opens.
        assert!(out.contains("\nfds [0, 1, 2, 3]\n"), "{who:?}: {out}");
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "mine\n");
    }
}

#[test]
fn resource_limits_bind_the_command() {
    if !landlock() {
        return;
    }
    for who in users() {
        let w = World::new(who);
        let limits =
            ResourceLimits { address_space_mb: 2048, processes: 256, file_size_mb: 1, cpu_secs: 30, open_files: 100 };
        let script = "import os\n\
            try:\n    open('big', 'wb').write(b'x' * (2 << 20)); print('big ok')\nexcept OSError as e:\n    print('big denied:', e)\n\
            print(open('/proc/self/limits').read())\n";
        let out = w.probe_with(&agentfix::sandbox::ExecArgs::limit_args(&limits), script, |_| {});
        assert!(out.contains("\nbig denied: [Errno 27] File too large\n"), "{who:?}: {out}");
        for (name, value) in [
            ("Max cpu time", "30"),
            ("Max file size", "1048576"),
            ("Max processes", "256"),
            ("Max open files", "100"),
            ("Max address space", "2147483648"),
            ("Max core file size", "0"),
        ] {
            let line = out.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("{name}: {out}"));
            assert_eq!(line[name.len()..].split_whitespace().next(), Some(value), "{who:?}: {line}");
        }
    }
}

/// Whether `python3 -m pytest` works here; says SKIPPED otherwise (and fails under CI, whose
/// `.ci/run` installs pytest).
fn pytest_installed() -> bool {
    let ok = std::process::Command::new("python3")
        .args(["-m", "pytest", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        println!("SKIPPED: pytest is not installed for python3 (.ci/run installs it)");
        eprintln!("SKIPPED: pytest is not installed for python3 (.ci/run installs it)");
        assert!(std::env::var_os("CI").is_none(), "CI installs pytest");
    }
    ok
}

#[tokio::test]
async fn a_real_pytest_run_passes_and_fails_in_the_sandbox() {
    if !landlock() || !pytest_installed() {
        return;
    }
    let (_d, root, ctx) = workspace(&[
        ("calc.py", "def add(a, b):\n    return a + b\n"),
        (
            "tests/test_calc.py",
            "from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n\ndef test_tmp(tmp_path):\n    (tmp_path / 'x').write_text('y')\n    assert (tmp_path / 'x').read_text() == 'y'\n",
        ),
        ("pyproject.toml", "[tool.pytest.ini_options]\npythonpath = [\".\"]\n"),
    ]);
    let t = tool(
        &[("test", command(&["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider"], Duration::from_secs(120)))],
        OFFLINE,
        &[],
    );
    let out = run(&t, &ctx, "test").await;
    assert!(out.contains("2 passed") && out.ends_with("[exit code 0]"), "{out}");
    // The model breaks the code in its overlay: the same suite now fails, in the copy only.
    model_writes(&ctx, &root, "calc.py", "def add(a, b):\n    return a - b\n");
    let out = run(&t, &ctx, "test").await;
    assert!(out.contains("1 failed, 1 passed") && out.ends_with("[exit code 1]"), "{out}");
    assert_eq!(std::fs::read_to_string(root.join("calc.py")).unwrap(), "def add(a, b):\n    return a + b\n");
}

#[tokio::test]
async fn a_real_cargo_test_passes_in_the_sandbox() {
    if !landlock() {
        return;
    }
    let (_d, _root, ctx) = workspace(&[
        ("Cargo.toml", "[package]\nname = \"calc\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n"),
        (
            "src/lib.rs",
            "pub fn add(a: i32, b: i32) -> i32 { a + b }\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() { assert_eq!(super::add(2, 3), 5); }\n}\n",
        ),
    ]);
    let t = tool(&[("test", command(&["cargo", "test", "--offline", "-q"], Duration::from_secs(300)))], OFFLINE, &[]);
    let out = run(&t, &ctx, "test").await;
    assert!(out.contains("test result: ok. 1 passed") && out.ends_with("[exit code 0]"), "{out}");
}

/// A command prefix that runs the rest where this user may create no user namespace: inside a
/// user namespace whose limit of nested ones is 0.
const NO_USER_NAMESPACES: &[&str] = &[
    "unshare",
    "--user",
    "--map-root-user",
    "sh",
    "-c",
    "echo 0 > /proc/sys/user/max_user_namespaces && exec \"$@\"",
    "sh",
];

/// `agentfix check --offline` with one configured command, inside `wrap` (a command prefix).
fn check_output(wrap: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut argv: Vec<&str> = wrap.to_vec();
    argv.extend([
        env!("CARGO_BIN_EXE_agentfix"),
        "check",
        "--offline",
        "--settings",
        r#"{"commands": {"test": ["true"]}}"#,
    ]);
    let out = std::process::Command::new(argv[0])
        .args(&argv[1..])
        .current_dir(dir.path())
        .env("AGENTFIX_DEFAULT_LANGUAGE_SERVERS", "0")
        .env("XDG_CACHE_HOME", dir.path().join("cache"))
        .output()
        .unwrap();
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[test]
fn check_lists_the_sandbox_layers_and_says_loudly_what_is_missing() {
    if !landlock() {
        return;
    }
    let out = check_output(&[]);
    assert!(out.contains("\ncommands: test (editor settings)\n"), "{out}");
    assert!(out.contains("\nsandbox: namespaces (user, mount, PID, IPC, UTS, network): ok\n"), "{out}");
    assert!(out.contains("\nsandbox: seccomp: ok\n") && out.contains("\nsandbox: Landlock: ABI "), "{out}");
    assert!(!out.contains("cannot run") && out.contains("\nsandbox: a trial command ran in it: ok\n"), "{out}");
    // A system where this user may create no user namespace (here: a user namespace whose
    // limit of nested ones is 0): check says what is missing, and no command runs.
    let out = check_output(NO_USER_NAMESPACES);
    assert!(out.contains("\nsandbox: namespaces (user, mount, PID, IPC, UTS, network): MISSING (this user cannot create user namespaces"), "{out}");
    assert!(out.contains("sandbox: the configured commands (test) cannot run: commands run in a sandbox, and this system cannot provide one: namespaces:"), "{out}");
    assert!(out.contains(r#""sandbox": "off""#), "{out}");
}

#[test]
fn the_helper_refuses_to_run_a_command_without_its_namespaces() {
    if !landlock() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(NO_USER_NAMESPACES[0])
        .args(&NO_USER_NAMESPACES[1..])
        .args([env!("CARGO_BIN_EXE_agentfix"), "__sandbox-exec", "--write"])
        .arg(dir.path())
        .args(["--", "sh", "-c", "echo RAN"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stdout.contains("RAN"), "the command ran unsandboxed: {stdout}");
    assert_eq!(out.status.code(), Some(i32::from(agentfix::sandbox::EXIT_NO_SANDBOX)), "{stderr}");
    assert!(stderr.contains("the kernel refused new user, mount, PID, IPC, UTS and network namespaces"), "{stderr}");
}

#[test]
fn a_toolchain_behind_an_absolute_symlink_is_still_found() {
    if !landlock() {
        return;
    }
    // `~/.tool` links to a folder elsewhere by absolute path, and the command runs `~/.tool/bin/hello`.
    let w = World::new(Who::Me);
    let real = w.base.join("disk/tool");
    std::fs::create_dir_all(real.join("bin")).unwrap();
    std::fs::write(real.join("bin/hello"), "#!/bin/sh\necho hello from the toolchain\n").unwrap();
    std::fs::set_permissions(real.join("bin/hello"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink(&real, w.base.join("home/.tool")).unwrap();
    let bin = w.base.join("home/.tool/bin");
    let out = w.probe_with(
        &[],
        "import subprocess\nprint(subprocess.run(['hello'], capture_output=True, text=True).stdout, end='')\n",
        |cmd| {
            cmd.env("PATH", format!("{}:/usr/bin:/bin", bin.display()));
        },
    );
    assert!(out.contains("\nhello from the toolchain\n"), "{out}");
}
