//! The file system a sandboxed command sees, as a plan of mounts computed
//! from the host's view (before the helper leaves it) and carried out in the
//! command's new mount namespace (`linux.rs`).
//!
//! The view is built from nothing: an empty tmpfs root, into which the
//! system directories (`/usr`, `/etc`, `/lib*`, `/bin`, `/sbin`, `/opt`) are
//! bound read-only, the toolchains the command needs read-only (found from
//! its `PATH`, the toolchain variables such as `CARGO_HOME` and `RUSTUP_HOME`
//! and their default places under `$HOME`, plus `commands.readPaths`), the
//! directories it may write (the scratch copy, its temporary directory, the
//! build cache) read-write, a fresh `/proc` of its PID namespace, a minimal
//! `/dev`, and private tmpfs `/tmp`, `/dev/shm` and `$HOME`. Everything else
//! is simply not there: `/run/user` and its sockets, `/var`, the rest of
//! `$HOME` (`.ssh`, `.config`, agentfix's cache, transcripts and backups),
//! the real workspace. A path that must stay out but lies inside something
//! bound (`--hide`: the real workspace under `/opt`, say) is covered by an
//! empty directory, and so are the system's secrets inside `/etc`
//! (`shadow`, `gshadow`, `ssh/`) and credential files inside toolchain
//! directories (`credentials.toml` of Cargo).
//!
//! Every mount is given by its path inside the view, which is its path on
//! the host: the command finds its files where agentfix put them.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

/// System directories bound read-only (or recreated as the symlinks they are).
const SYSTEM: &[&str] = &["/usr", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/opt", "/nix"];

/// Files and directories of `/etc` that hold the system's secrets.
const ETC_SECRETS: &[&str] =
    &["/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/ssh", "/etc/sudoers", "/etc/sudoers.d"];

/// Toolchain variables whose directories are bound read-only, with their
/// default place under `$HOME` when unset.
pub const TOOLCHAIN_VARS: &[(&str, Option<&str>)] = &[
    ("CARGO_HOME", Some(".cargo")),
    ("RUSTUP_HOME", Some(".rustup")),
    ("PYENV_ROOT", Some(".pyenv")),
    ("NVM_DIR", Some(".nvm")),
    ("VOLTA_HOME", Some(".volta")),
    ("ASDF_DATA_DIR", Some(".asdf")),
    ("BUN_INSTALL", Some(".bun")),
    ("SDKMAN_DIR", Some(".sdkman")),
    ("GOPATH", Some("go")),
    ("GOROOT", None),
    ("GOMODCACHE", None),
    ("JAVA_HOME", None),
    ("VIRTUAL_ENV", None),
    ("CONDA_PREFIX", None),
    ("GEM_HOME", None),
    ("PNPM_HOME", None),
    ("DENO_DIR", None),
];

/// Credential files inside toolchain directories, covered by an empty file.
const TOOLCHAIN_SECRETS: &[&str] = &["credentials", "credentials.toml", ".credentials.toml"];

/// Size of the private `/tmp` and `/dev/shm` (each), in MiB: freed with the
/// run, so it cannot fill memory past it.
pub const TMPFS_MB: u64 = 2048;
/// Size of the private `$HOME`, in MiB.
pub const HOME_MB: u64 = 512;

/// One step of the view, by its path inside the view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mount {
    /// An empty tmpfs directory (`mode` in octal, `size` in MiB).
    Tmpfs { dst: PathBuf, mode: u32, size_mb: u64 },
    /// The host's `src` at `dst`, read-write when `write`.
    Bind { src: PathBuf, dst: PathBuf, write: bool },
    /// A symlink to `target` at `dst` (`/bin -> usr/bin`).
    Symlink { target: PathBuf, dst: PathBuf },
    /// A fresh `/proc` of the command's PID namespace.
    Proc { dst: PathBuf },
    /// The minimal `/dev`: null, zero, full, random, urandom, tty-less;
    /// `fd`, `stdin`, `stdout`, `stderr` links; a private `shm`.
    Dev { dst: PathBuf },
    /// An empty, read-only directory or file over something bound.
    Cover { dst: PathBuf, dir: bool },
}

impl Mount {
    pub fn dst(&self) -> &Path {
        match self {
            Mount::Tmpfs { dst, .. }
            | Mount::Bind { dst, .. }
            | Mount::Symlink { dst, .. }
            | Mount::Proc { dst }
            | Mount::Dev { dst }
            | Mount::Cover { dst, .. } => dst,
        }
    }
}

/// What the view is made from, read off the host.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    /// `$HOME`, when absolute.
    pub home: Option<PathBuf>,
    /// The entries of the command's `PATH`.
    pub path: Vec<PathBuf>,
    /// The toolchain variables that are set ([`TOOLCHAIN_VARS`]).
    pub vars: Vec<(String, PathBuf)>,
    /// More directories to bind read-only (`commands.readPaths`).
    pub read: Vec<PathBuf>,
    /// Directories the command may write.
    pub write: Vec<PathBuf>,
    /// Paths that must not be visible.
    pub hide: Vec<PathBuf>,
    /// With the host's network: the file `/etc/resolv.conf` leads to, which
    /// often lies outside `/etc` (systemd-resolved's under `/run`), so that
    /// names resolve.
    pub resolv: Option<PathBuf>,
}

impl Inputs {
    /// The inputs of this process: `HOME`, `PATH` and the toolchain variables.
    pub fn from_env(read: Vec<PathBuf>, write: Vec<PathBuf>, hide: Vec<PathBuf>, network: bool) -> Inputs {
        let home = std::env::var_os("HOME").map(PathBuf::from).filter(|h| h.is_absolute());
        let path = std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
        let vars = TOOLCHAIN_VARS
            .iter()
            .filter_map(|(name, _)| {
                let v = std::env::var_os(name).filter(|v| !v.is_empty())?;
                Some((name.to_string(), PathBuf::from(v)))
            })
            .collect();
        let resolv = network.then(|| std::fs::canonicalize("/etc/resolv.conf").ok()).flatten();
        Inputs { home, path, vars, read, write, hide, resolv }
    }
}

/// What the host has at a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Missing,
    Dir,
    File,
    /// A symlink (not followed).
    Link,
}

/// The kind of `path` on this host.
pub fn host_kind(path: &Path) -> Kind {
    match std::fs::symlink_metadata(path) {
        Err(_) => Kind::Missing,
        Ok(m) if m.file_type().is_symlink() => Kind::Link,
        Ok(m) if m.is_dir() => Kind::Dir,
        Ok(_) => Kind::File,
    }
}

/// The mounts of the view, parents before children. `kind` tells what the
/// host has at a path (symlinks not followed), `exists` whether a path
/// leads somewhere (symlinks followed), `link` a symlink's target.
pub fn plan(input: &Inputs, kind: &dyn Fn(&Path) -> Kind, link: &dyn Fn(&Path) -> Option<PathBuf>) -> Vec<Mount> {
    let exists = |p: &Path| match kind(p) {
        Kind::Missing => false,
        Kind::Link => link(p).is_some_and(|t| kind(&p.parent().unwrap_or(Path::new("/")).join(t)) != Kind::Missing),
        _ => true,
    };
    let (mut mounts, system) = system_mounts(kind, link);
    mounts.push(Mount::Proc { dst: "/proc".into() });
    mounts.push(Mount::Dev { dst: "/dev".into() });
    mounts.push(Mount::Tmpfs { dst: "/tmp".into(), mode: 0o1777, size_mb: TMPFS_MB });
    let home = input.home.clone().filter(|h| h.parent().is_some() && !under_any(h, &system));
    if let Some(home) = &home {
        mounts.push(Mount::Tmpfs { dst: home.clone(), mode: 0o700, size_mb: HOME_MB });
    }
    let covered = |p: &Path| under_any(p, &system);
    let hidden = |p: &Path| input.hide.iter().any(|h| p.starts_with(h) || h.starts_with(p));
    let mut tools: BTreeSet<PathBuf> = BTreeSet::new();
    let mut consider = |p: PathBuf| {
        let p = clean(&p);
        if !p.is_absolute() || p.parent().is_none() || covered(&p) || hidden(&p) || !exists(&p) {
            return;
        }
        if let Some(home) = &home
            && home.starts_with(&p)
        {
            return;
        }
        tools.insert(p);
    };
    for entry in &input.path {
        for root in toolchain_roots(entry, home.as_deref()) {
            consider(root);
        }
    }
    for (name, default) in TOOLCHAIN_VARS {
        match input.vars.iter().find(|(n, _)| n == name) {
            Some((_, v)) => consider(v.clone()),
            None => {
                if let (Some(home), Some(default)) = (&home, default) {
                    consider(home.join(default));
                }
            }
        }
    }
    // A read path may hold `$HOME` (which stays private, mounted over it) or
    // hidden paths (covered inside it), but may not be `$HOME` itself or lie
    // inside a hidden path.
    for p in &input.read {
        let p = clean(p);
        let inside_hidden = input.hide.iter().any(|h| p.starts_with(h));
        let is_home = home.as_ref().is_some_and(|h| *h == p);
        if p.is_absolute() && p.parent().is_some() && exists(&p) && !covered(&p) && !inside_hidden && !is_home {
            tools.insert(p);
        }
    }
    // Nested toolchain directories are bound with their parent, unless the
    // private `$HOME` lies between them and would cover the nested one.
    let between = |p: &Path, q: &Path| home.as_ref().is_some_and(|h| p.starts_with(h) && !q.starts_with(h));
    let roots: Vec<PathBuf> = tools
        .iter()
        .filter(|p| !tools.iter().any(|q| q != *p && p.starts_with(q) && !between(p, q)))
        .cloned()
        .collect();
    for root in &roots {
        mounts.push(Mount::Bind { src: root.clone(), dst: root.clone(), write: false });
        for secret in TOOLCHAIN_SECRETS {
            let path = root.join(secret);
            if kind(&path) == Kind::File {
                mounts.push(Mount::Cover { dst: path, dir: false });
            }
        }
    }
    if let Some(r) = input.resolv.as_ref().filter(|r| r.is_absolute() && !covered(r) && kind(r) == Kind::File) {
        mounts.push(Mount::Bind { src: r.clone(), dst: r.clone(), write: false });
    }
    for w in &input.write {
        let w = clean(w);
        mounts.push(Mount::Bind { src: w.clone(), dst: w, write: true });
    }
    cover_hidden(&mut mounts, &input.hide, kind);
    // Parents first; the order among equals is kept.
    mounts.sort_by_key(|m| m.dst().components().count());
    mounts
}

/// The system directories (bound read-only, or the symlink they are) with
/// the secrets of `/etc` covered, and the directories bound.
fn system_mounts(kind: &dyn Fn(&Path) -> Kind, link: &dyn Fn(&Path) -> Option<PathBuf>) -> (Vec<Mount>, Vec<PathBuf>) {
    let mut mounts = Vec::new();
    let mut system = Vec::new();
    for dir in SYSTEM.iter().map(PathBuf::from) {
        match kind(&dir) {
            Kind::Missing => {}
            Kind::Link => {
                if let Some(target) = link(&dir) {
                    mounts.push(Mount::Symlink { target, dst: dir.clone() });
                    system.push(dir);
                }
            }
            _ => {
                mounts.push(Mount::Bind { src: dir.clone(), dst: dir.clone(), write: false });
                system.push(dir);
            }
        }
    }
    for secret in ETC_SECRETS.iter().map(PathBuf::from) {
        match kind(&secret) {
            Kind::Dir => mounts.push(Mount::Cover { dst: secret, dir: true }),
            Kind::File => mounts.push(Mount::Cover { dst: secret, dir: false }),
            _ => {}
        }
    }
    (mounts, system)
}

/// Covers what must stay out (`hide`) but lies inside something bound.
fn cover_hidden(mounts: &mut Vec<Mount>, hide: &[PathBuf], kind: &dyn Fn(&Path) -> Kind) {
    let bound: Vec<PathBuf> = mounts
        .iter()
        .filter_map(|m| match m {
            Mount::Bind { dst, .. } => Some(dst.clone()),
            _ => None,
        })
        .collect();
    for h in hide {
        let h = clean(h);
        if bound.iter().any(|b| h.starts_with(b) && &h != b) && kind(&h) == Kind::Dir {
            mounts.push(Mount::Cover { dst: h, dir: true });
        }
    }
}

/// The directories to bind for one `PATH` entry: under `$HOME`, the
/// toolchain's top directory (`~/.cargo` for `~/.cargo/bin`), but of
/// `~/.local` only `bin` and `lib`; elsewhere the entry's parent when the
/// entry is a `bin` directory (the toolchain's `lib` is beside it), or the
/// entry itself.
fn toolchain_roots(entry: &Path, home: Option<&Path>) -> Vec<PathBuf> {
    let entry = clean(entry);
    if let Some(home) = home
        && let Ok(rest) = entry.strip_prefix(home)
    {
        let mut parts = rest.components();
        return match parts.next() {
            None => Vec::new(),
            Some(Component::Normal(first)) if first == ".local" => {
                vec![home.join(".local/bin"), home.join(".local/lib")]
            }
            Some(Component::Normal(first)) => vec![home.join(first)],
            Some(_) => Vec::new(),
        };
    }
    if entry.file_name().is_some_and(|n| n == "bin")
        && let Some(parent) = entry.parent().filter(|p| p.parent().is_some())
    {
        return vec![parent.to_path_buf()];
    }
    vec![entry]
}

/// Whether `p` is one of `dirs` or below one.
fn under_any(p: &Path, dirs: &[PathBuf]) -> bool {
    dirs.iter().any(|d| p.starts_with(d))
}

/// `p` without `.` components and trailing separators (`..` is kept: such a
/// path is refused by the kernel's bind, not silently changed here).
fn clean(p: &Path) -> PathBuf {
    p.components().filter(|c| !matches!(c, Component::CurDir)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A host made of `entries`: a path and what it is (`d` dir, `f` file, `l:target` link).
    fn host(entries: &[(&str, &str)]) -> (impl Fn(&Path) -> Kind, impl Fn(&Path) -> Option<PathBuf>) {
        let map: HashMap<PathBuf, String> = entries.iter().map(|(p, k)| (PathBuf::from(p), k.to_string())).collect();
        let map2 = map.clone();
        let kind = move |p: &Path| match map.get(p).map(String::as_str) {
            None => {
                // A directory that has an entry below it exists too.
                if map.keys().any(|k| k.starts_with(p) && k != p) { Kind::Dir } else { Kind::Missing }
            }
            Some("d") => Kind::Dir,
            Some("f") => Kind::File,
            Some(_) => Kind::Link,
        };
        let link = move |p: &Path| map2.get(p).and_then(|k| k.strip_prefix("l:")).map(PathBuf::from);
        (kind, link)
    }

    fn binds(mounts: &[Mount]) -> Vec<(String, bool)> {
        mounts
            .iter()
            .filter_map(|m| match m {
                Mount::Bind { dst, write, .. } => Some((dst.display().to_string(), *write)),
                _ => None,
            })
            .collect()
    }

    fn covers(mounts: &[Mount]) -> Vec<String> {
        mounts
            .iter()
            .filter_map(|m| match m {
                Mount::Cover { dst, .. } => Some(dst.display().to_string()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn the_system_toolchains_and_the_copy_but_nothing_else_of_home() {
        let (kind, link) = host(&[
            ("/usr", "d"),
            ("/etc/passwd", "f"),
            ("/etc/shadow", "f"),
            ("/etc/ssh", "d"),
            ("/bin", "l:usr/bin"),
            ("/usr/bin", "d"),
            ("/opt", "d"),
            ("/root/.cargo/bin", "d"),
            ("/root/.cargo/credentials.toml", "f"),
            ("/root/.rustup", "d"),
            ("/root/.pyenv/shims", "d"),
            ("/root/.ssh/id_rsa", "f"),
            ("/root/.local/bin", "d"),
            ("/root/.local/share/keyrings", "d"),
            ("/root/.cache/agentfix/scratch-target/x", "d"),
            ("/tmp/agentfix-scratch-1/proj", "d"),
            ("/tmp/agentfix-scratch-1/tmp-2", "d"),
            ("/srv/tools/node/bin", "d"),
        ]);
        let input = Inputs {
            home: Some("/root".into()),
            path: [
                "/root/.cargo/bin",
                "/root/.pyenv/shims",
                "/root/.local/bin",
                "/usr/bin",
                "/bin",
                "/srv/tools/node/bin",
                "relative/bin",
                "/root",
            ]
            .iter()
            .map(PathBuf::from)
            .collect(),
            vars: Vec::new(),
            read: Vec::new(),
            write: vec![
                "/tmp/agentfix-scratch-1/proj".into(),
                "/tmp/agentfix-scratch-1/tmp-2".into(),
                "/root/.cache/agentfix/scratch-target/x".into(),
            ],
            hide: vec!["/work/proj".into()],
            resolv: None,
        };
        let mounts = plan(&input, &kind, &link);
        let b = binds(&mounts);
        for ro in [
            "/usr",
            "/etc",
            "/opt",
            "/root/.cargo",
            "/root/.rustup",
            "/root/.pyenv",
            "/root/.local/bin",
            "/srv/tools/node",
        ] {
            assert!(b.contains(&(ro.to_string(), false)), "{ro} not bound read-only: {b:?}");
        }
        for rw in
            ["/tmp/agentfix-scratch-1/proj", "/tmp/agentfix-scratch-1/tmp-2", "/root/.cache/agentfix/scratch-target/x"]
        {
            assert!(b.contains(&(rw.to_string(), true)), "{rw} not bound read-write: {b:?}");
        }
        // Nothing else of $HOME, and never $HOME itself or a relative PATH entry.
        for absent in ["/root", "/root/.ssh", "/root/.local", "/root/.local/share/keyrings", "/root/.cache", "relative"]
        {
            assert!(!b.iter().any(|(p, _)| p == absent), "{absent} is bound: {b:?}");
        }
        assert!(mounts.contains(&Mount::Symlink { target: "usr/bin".into(), dst: "/bin".into() }));
        assert!(mounts.contains(&Mount::Tmpfs { dst: "/root".into(), mode: 0o700, size_mb: HOME_MB }));
        let c = covers(&mounts);
        for covered in ["/etc/shadow", "/etc/ssh", "/root/.cargo/credentials.toml"] {
            assert!(c.contains(&covered.to_string()), "{covered} is not covered: {c:?}");
        }
        // Parents come before what is mounted inside them.
        let at = |p: &str| mounts.iter().position(|m| m.dst() == Path::new(p)).unwrap();
        assert!(at("/root") < at("/root/.cargo") && at("/tmp") < at("/tmp/agentfix-scratch-1/proj"));
        assert!(at("/etc") < at("/etc/shadow") && at("/root/.cargo") < at("/root/.cargo/credentials.toml"));
    }

    #[test]
    fn toolchain_variables_and_read_paths_are_bound_and_hidden_paths_covered() {
        let (kind, link) = host(&[
            ("/usr", "d"),
            ("/opt/work/proj/src", "d"),
            ("/opt/work/proj/.venv/bin", "d"),
            ("/data/rustup", "d"),
            ("/data/models", "d"),
            ("/home/u/.cargo/bin", "d"),
        ]);
        let input = Inputs {
            home: Some("/home/u".into()),
            path: vec!["/opt/work/proj/.venv/bin".into()],
            vars: vec![
                ("RUSTUP_HOME".into(), "/data/rustup".into()),
                ("VIRTUAL_ENV".into(), "/opt/work/proj/.venv".into()),
            ],
            read: vec!["/data/models".into(), "/nonexistent".into()],
            write: Vec::new(),
            hide: vec!["/opt/work/proj".into()],
            resolv: None,
        };
        let mounts = plan(&input, &kind, &link);
        let b = binds(&mounts);
        for ro in ["/data/rustup", "/data/models", "/home/u/.cargo"] {
            assert!(b.contains(&(ro.to_string(), false)), "{ro}: {b:?}");
        }
        assert!(!b.iter().any(|(p, _)| p == "/nonexistent"), "{b:?}");
        // The real workspace lies inside /opt: it is covered, and its venv is not bound.
        assert!(covers(&mounts).contains(&"/opt/work/proj".to_string()), "{mounts:?}");
        assert!(!b.iter().any(|(p, _)| p.starts_with("/opt/work")), "{b:?}");
    }

    proptest::proptest! {
        /// Whatever the PATH, the variables, the read paths and the hidden paths: parents are
        /// mounted before what lies inside them (so the private `$HOME` lies over a read path that
        /// holds it), `/` and `$HOME` are never bound, and nothing hidden is bound.
        #[test]
        fn plans_keep_their_invariants(
            path in proptest::collection::vec(0usize..CANDIDATES.len(), 0..8),
            vars in proptest::collection::vec((0usize..TOOLCHAIN_VARS.len(), 0usize..CANDIDATES.len()), 0..4),
            read in proptest::collection::vec(0usize..CANDIDATES.len(), 0..3),
            hide in proptest::collection::vec(0usize..CANDIDATES.len(), 0..3),
            home in 0usize..3,
        ) {
            let entries: Vec<(&str, &str)> = CANDIDATES.iter().map(|c| (*c, "d")).chain([("/usr", "d"), ("/etc/shadow", "f")]).collect();
            let (kind, link) = host(&entries);
            let home = ["/root", "/home/u", "/srv"][home];
            let pick = |v: &[usize]| v.iter().map(|&i| PathBuf::from(CANDIDATES[i])).collect::<Vec<_>>();
            let hide = pick(&hide);
            let input = Inputs {
                home: Some(home.into()),
                path: pick(&path),
                vars: vars.iter().map(|&(v, c)| (TOOLCHAIN_VARS[v].0.to_string(), PathBuf::from(CANDIDATES[c]))).collect(),
                read: pick(&read),
                write: vec!["/tmp/agentfix-scratch-1/ws".into()],
                hide: hide.clone(),
                resolv: None,
            };
            let mounts = plan(&input, &kind, &link);
            for (i, a) in mounts.iter().enumerate() {
                for b in &mounts[..i] {
                    proptest::prop_assert!(!(b.dst().starts_with(a.dst()) && b.dst() != a.dst()), "{:?} before its parent {:?}", b, a);
                }
                if let Mount::Bind { dst, write: false, .. } = a {
                    proptest::prop_assert!(dst != Path::new("/") && dst != Path::new(home), "{dst:?} exposes $HOME");
                    for h in &hide {
                        proptest::prop_assert!(!dst.starts_with(h), "{dst:?} is hidden by {h:?}");
                    }
                }
            }
        }
    }

    const CANDIDATES: &[&str] = &[
        "/root/.cargo/bin",
        "/root/.rustup",
        "/root/.local/bin",
        "/root",
        "/home/u/.nvm/versions/node/bin",
        "/home/u/proj/.venv/bin",
        "/home/u/proj",
        "/home/u",
        "/srv/tools/go/bin",
        "/srv/tools",
        "/srv",
        "/opt/work/proj",
        "/usr/local/bin",
        "/data/rustup",
    ];

    #[test]
    fn with_the_network_the_resolver_file_is_bound_where_it_lies() {
        let (kind, link) = host(&[
            ("/etc/resolv.conf", "l:../run/systemd/resolve/stub-resolv.conf"),
            ("/run/systemd/resolve/stub-resolv.conf", "f"),
            ("/run/user/0/bus", "f"),
        ]);
        let stub = PathBuf::from("/run/systemd/resolve/stub-resolv.conf");
        let input = Inputs { resolv: Some(stub.clone()), ..Inputs::default() };
        let b = binds(&plan(&input, &kind, &link));
        assert!(b.contains(&(stub.display().to_string(), false)), "{b:?}");
        // Only that file: nothing else of /run.
        assert!(!b.iter().any(|(p, _)| p == "/run" || p.starts_with("/run/user")), "{b:?}");
        // Without the network (no `resolv`), nothing of /run at all.
        assert!(!binds(&plan(&Inputs::default(), &kind, &link)).iter().any(|(p, _)| p.starts_with("/run")));
    }
}
