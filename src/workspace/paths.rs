//! Workspace roots and path confinement: every path a tool receives is
//! resolved here, and anything that leaves the roots (`..`, an absolute path
//! elsewhere, a symlink pointing out) is refused.

use std::collections::{HashSet, VecDeque};
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PathError {
    #[error("path `{0}` is outside the workspace")]
    Outside(String),
    #[error(
        "`{0}` is a protected file (secrets such as .env, keys and credentials are never shown to the model or edited); do not try to read or change it"
    )]
    Protected(String),
    #[error("path is empty")]
    Empty,
}

/// The built-in deny-list of protected files: gitignore-style patterns that
/// match at any depth (a trailing `/` means a directory and all under it),
/// ignoring case: `.ENV` and `.Git/config` are the same files on a
/// case-insensitive file system, and a repository must not get around the
/// list by spelling. Settings can add to it (`exclude`), never remove from it.
pub const DEFAULT_PROTECTED: &[&str] = &[
    ".env",
    ".env.*",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.jks",
    "*.keystore",
    "id_rsa*",
    "id_dsa*",
    "id_ed25519*",
    "id_ecdsa*",
    ".ssh/",
    ".gnupg/",
    ".aws/",
    ".azure/",
    ".config/gcloud/",
    ".docker/config.json",
    ".kube/config",
    ".npmrc",
    ".pypirc",
    ".netrc",
    ".git-credentials",
    "credentials.json",
    "*.tfstate",
    "*.tfstate.*",
    "*.tfvars",
    "*.tfvars.json",
    ".terraformrc",
    "terraform.rc",
    "*.env",
    // direnv runs it on `cd`, and it usually exports secrets.
    ".envrc",
    "secrets.yaml",
    "secrets.yml",
    "secrets.json",
    "*.secrets.*",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".config/gh/hosts.yml",
    ".pgpass",
    ".my.cnf",
    ".vault-token",
    ".htpasswd",
    "*.kdbx",
    ".git/",
];

/// Which paths are protected: the defaults plus the configured patterns.
#[derive(Debug, Clone)]
pub struct Protected {
    set: Arc<GlobSet>,
    patterns: Vec<String>,
}

impl Default for Protected {
    fn default() -> Self {
        Self::new(&[])
    }
}

impl Protected {
    /// The defaults and `extra`; an invalid extra pattern is skipped with a
    /// warning (the defaults always hold). Built once per process for each
    /// `extra` (the last few kept): compiling the globs took most of what a
    /// run did before its first progress, and every run builds its
    /// workspace.
    pub fn new(extra: &[String]) -> Self {
        static BUILT: Mutex<Vec<(Vec<String>, Protected)>> = Mutex::new(Vec::new());
        let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, p)) = built.iter().find(|(e, _)| e.as_slice() == extra) {
            return p.clone();
        }
        let p = Self::build(extra);
        if built.len() >= 8 {
            built.remove(0);
        }
        built.push((extra.to_vec(), p.clone()));
        p
    }

    fn build(extra: &[String]) -> Self {
        let mut builder = GlobSetBuilder::new();
        let mut patterns = Vec::new();
        for p in DEFAULT_PROTECTED.iter().map(|p| p.to_string()).chain(extra.iter().cloned()) {
            let globs = globs_of(&p);
            let built: Result<Vec<_>, _> = globs
                .iter()
                .map(|g| GlobBuilder::new(g).literal_separator(true).case_insensitive(true).build())
                .collect();
            match built {
                Ok(globs) => {
                    for g in globs {
                        builder.add(g);
                    }
                    patterns.push(p);
                }
                Err(e) => tracing::warn!("ignoring the protected-file pattern `{p}`: {e}"),
            }
        }
        // Every glob was checked above, so this cannot fail; if it did, fail
        // closed: everything is protected.
        let set = builder.build().unwrap_or_else(|e| {
            tracing::error!("protected-file patterns: {e}; protecting every file");
            let mut all = GlobSetBuilder::new();
            all.add(globset::Glob::new("**").expect("a valid glob"));
            all.build().unwrap_or_else(|_| GlobSet::empty())
        });
        Self { set: Arc::new(set), patterns }
    }

    /// Every pattern in force, defaults first.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// Whether `rel` (relative to a root, or an absolute path outside every
    /// root) is protected.
    pub fn matches(&self, rel: &Path) -> bool {
        let rel = rel.strip_prefix("/").unwrap_or(rel);
        self.set.is_match(rel)
    }
}

/// Files that run code later without anyone running them on purpose: when
/// git commits, when the folder is opened in an editor or a container, on
/// any build, install or test run. Each is a gitignore-style pattern (as
/// [`DEFAULT_PROTECTED`], ignoring case) and why it runs code. An edit of
/// one is proposed like any other, but flagged for review. Ordinary sources
/// (tests and Makefiles included: they run when asked to) are not here;
/// `.envrc` and `.git/hooks` are protected, never edited at all.
pub const RUNS_CODE: &[(&str, &str)] = &[
    (".husky/", "git runs husky's hooks"),
    (".githooks/", "git runs these hooks when core.hooksPath names the folder"),
    (".pre-commit-config.yaml", "pre-commit runs the hooks it names on `git commit`"),
    ("lefthook.yml", "lefthook runs the commands it names on git commands"),
    (".lefthook.yml", "lefthook runs the commands it names on git commands"),
    (".vscode/tasks.json", "VS Code runs its tasks, some when the folder opens"),
    (".vscode/launch.json", "VS Code runs the programs it names when you debug"),
    (".vscode/settings.json", "VS Code settings name programs the editor and its extensions run"),
    ("*.code-workspace", "VS Code settings and tasks name programs the editor runs"),
    (".devcontainer/", "dev containers run its commands when the folder opens in one"),
    (".cargo/config.toml", "cargo runs the runners, wrappers and aliases it names"),
    (".cargo/config", "cargo runs the runners, wrappers and aliases it names"),
    ("rust-toolchain.toml", "cargo and rustup run the toolchain it names"),
    ("rust-toolchain", "cargo and rustup run the toolchain it names"),
    ("build.rs", "cargo runs build scripts on every build, rust-analyzer when the folder opens"),
    ("conftest.py", "pytest runs it whenever it collects tests"),
    ("setup.py", "pip runs it to install the package"),
    ("package.json", "npm runs its scripts on install and test"),
    (".yarnrc.yml", "yarn runs the `yarnPath` it names"),
    (".github/workflows/", "GitHub Actions run it on push"),
    (".gitlab-ci.yml", "GitLab CI runs it on push"),
];

/// Why the file at `rel` (relative to its root, or an absolute path) runs
/// code when it is next used, if it does ([`RUNS_CODE`]).
pub fn runs_code(rel: &Path) -> Option<&'static str> {
    static SET: LazyLock<(GlobSet, Vec<&'static str>)> = LazyLock::new(|| {
        let mut builder = GlobSetBuilder::new();
        let mut reasons = Vec::new();
        for (pattern, why) in RUNS_CODE {
            for g in globs_of(pattern) {
                match GlobBuilder::new(&g).literal_separator(true).case_insensitive(true).build() {
                    Ok(glob) => {
                        builder.add(glob);
                        reasons.push(*why);
                    }
                    Err(e) => tracing::error!("the pattern `{pattern}` of RUNS_CODE: {e}"),
                }
            }
        }
        (builder.build().unwrap_or_else(|_| GlobSet::empty()), reasons)
    });
    let rel = rel.strip_prefix("/").unwrap_or(rel);
    let (set, reasons) = &*SET;
    set.matches(rel).first().and_then(|&i| reasons.get(i).copied())
}

/// The globs for one gitignore-style pattern: a leading `/` anchors it at
/// the root; otherwise it matches at any depth; anything under a match is
/// matched too.
fn globs_of(pattern: &str) -> Vec<String> {
    let p = pattern.trim().trim_end_matches('/');
    let (anchored, p) = match p.strip_prefix('/') {
        Some(rest) => (true, rest),
        None => (false, p),
    };
    let base = if anchored { p.to_string() } else { format!("**/{p}") };
    vec![base.clone(), format!("{base}/**")]
}

/// A file's identity: (device, inode).
type FileId = (u64, u64);

/// Entries a walk for [`Links`] reads at most; past that, every
/// multiply-linked file counts as protected (smaller in unit tests).
fn max_link_walk() -> usize {
    if cfg!(test) { 100 } else { 2_000_000 }
}

/// Which multiply-linked files are other names of protected files. A hard
/// link (`ln .env notes.txt`) has a name the deny-list does not know, so a
/// regular file with more than one link is looked up here by its identity.
/// The protected files' identities come from a walk of the roots (hidden
/// and ignored files included: `.env` usually is ignored), made the first
/// time a multiply-linked file is met, and again whenever one is met that
/// neither that walk nor a lookup since saw, since a link made after the walk
/// would otherwise go unseen. Such files are rare, so most runs never walk.
#[derive(Debug, Default)]
struct Links {
    /// The multiply-linked protected files of the roots, as the last walk
    /// found them; `None` before the first walk.
    protected: Option<HashSet<FileId>>,
    /// The last walk did not see every file (a folder it could not read,
    /// or more than [`max_link_walk`] entries): every multiply-linked file
    /// counts as protected.
    incomplete: bool,
    /// Multiply-linked files looked up since and found to be no protected
    /// file's other name.
    cleared: HashSet<FileId>,
}

/// The workspace roots of a session. The first root is where relative paths
/// are resolved.
#[derive(Debug, Clone)]
pub struct Workspace {
    roots: Vec<PathBuf>,
    /// Single files a run may see besides the roots: the target of a run on
    /// a file outside every workspace folder (never its folder).
    files: Vec<PathBuf>,
    protected: Protected,
    /// Shared by the clones of one workspace (a run's tools and walks).
    links: Arc<Mutex<Links>>,
}

impl Workspace {
    /// Roots are canonicalised when they exist, so symlinked roots compare
    /// equal to their targets. An empty or relative root is dropped: it
    /// would contain every path.
    pub fn new(roots: Vec<PathBuf>) -> Self {
        let roots = roots
            .into_iter()
            .filter(|r| r.is_absolute())
            .map(|r| std::fs::canonicalize(&r).unwrap_or_else(|_| normalize(&r)))
            .collect();
        Self { roots, files: Vec::new(), protected: Protected::default(), links: Arc::default() }
    }

    /// Adds protected-file patterns to the defaults.
    pub fn with_protected(mut self, extra: &[String]) -> Self {
        self.protected = Protected::new(extra);
        self.links = Arc::default();
        self
    }

    /// Lets the run see one file outside the roots (and nothing else there).
    pub fn with_file(mut self, file: PathBuf) -> Self {
        if file.is_absolute() && !self.contains(&file) {
            let real = real_path(&file).unwrap_or_else(|| normalize(&file));
            self.files.push(normalize(&file));
            if real != normalize(&file) {
                self.files.push(real);
            }
        }
        self
    }

    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// The single files outside the roots the run may see.
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    pub fn protected(&self) -> &Protected {
        &self.protected
    }

    /// The directory relative paths are resolved against: the first root,
    /// or (with no root) the folder of the one file the run may see, which
    /// still grants nothing but that file.
    pub fn primary_root(&self) -> &Path {
        self.roots
            .first()
            .map(PathBuf::as_path)
            .or_else(|| self.files.first().and_then(|f| f.parent()))
            .unwrap_or(Path::new("/"))
    }

    /// Resolves a path given by the model (relative to the primary root, or
    /// absolute inside a root) to an absolute path inside the workspace.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, PathError> {
        let trimmed = path.trim();
        if trimmed.is_empty() {
            return Err(PathError::Empty);
        }
        if trimmed.contains('\0') {
            return Err(PathError::Outside(path.replace('\0', "\\0")));
        }
        let given = Path::new(trimmed);
        let joined = if given.is_absolute() { given.to_path_buf() } else { self.primary_root().join(given) };
        let lexical = normalize(&joined);
        let outside = || PathError::Outside(path.to_string());
        if !self.contains(&lexical) {
            return Err(outside());
        }
        // Symlinks, dangling ones included: where the path really leads
        // must be inside too, and not protected.
        let real = real_path(&lexical).ok_or_else(outside)?;
        if !self.contains(&real) {
            return Err(outside());
        }
        if self.is_protected(&lexical) || self.is_protected(&real) {
            return Err(PathError::Protected(self.display(&lexical)));
        }
        Ok(lexical)
    }

    /// Whether an absolute, normalised path lies under one of the roots, or
    /// is one of the single files.
    pub fn contains(&self, path: &Path) -> bool {
        self.roots.iter().any(|r| path.starts_with(r)) || self.files.iter().any(|f| f == path)
    }

    /// Whether an absolute path is protected: matched relative to its root,
    /// or as a whole outside the roots, or (a regular file with more than
    /// one link, not followed if it is a symlink) another name of a
    /// protected file of the roots.
    pub fn is_protected(&self, path: &Path) -> bool {
        let rel = self.roots.iter().find_map(|r| path.strip_prefix(r).ok()).unwrap_or(path);
        self.protected.matches(rel) || self.is_link_to_protected(path)
    }

    /// Whether `path` is a regular file with other names, one of them a
    /// protected file of the roots.
    fn is_link_to_protected(&self, path: &Path) -> bool {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            match std::fs::symlink_metadata(path) {
                Ok(m) if m.is_file() && m.nlink() > 1 => self.protected_link((m.dev(), m.ino())),
                _ => false,
            }
        }
        #[cfg(not(unix))]
        {
            let _ = path;
            false
        }
    }

    /// Whether the multiply-linked file `id` is a protected file: from what
    /// the last walk found, else after a new walk.
    fn protected_link(&self, id: FileId) -> bool {
        // Held through the walk: other lookups of the run wait for its
        // answer rather than walk again.
        let mut links = self.links.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(known) = &links.protected {
            if links.incomplete || known.contains(&id) {
                return true;
            }
            if links.cleared.contains(&id) {
                return false;
            }
        }
        let (known, complete) = self.walk_protected_links();
        let protected = !complete || known.contains(&id);
        links.protected = Some(known);
        links.incomplete = !complete;
        if !protected {
            links.cleared.insert(id);
        }
        protected
    }

    /// The identities of the protected regular files of the roots that have
    /// more than one link, and whether the walk saw every file. No ignore
    /// file or hidden-file rule applies; symlinks are not followed (a link
    /// to a protected file is refused by its target's path); only protected
    /// names are looked at closer (one `lstat` each), every other entry costs
    /// its directory's read alone.
    fn walk_protected_links(&self) -> (HashSet<FileId>, bool) {
        let mut found = HashSet::new();
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let mut seen = 0;
            for root in &self.roots {
                let walker = ignore::WalkBuilder::new(root).standard_filters(false).follow_links(false).build();
                for entry in walker {
                    seen += 1;
                    // A folder it cannot read may hold a protected file.
                    let Ok(entry) = entry else { return (found, false) };
                    if seen > max_link_walk() {
                        return (found, false);
                    }
                    if !entry.file_type().is_some_and(|t| t.is_file()) {
                        continue;
                    }
                    let Ok(rel) = entry.path().strip_prefix(root) else { continue };
                    if !self.protected.matches(rel) {
                        continue;
                    }
                    match entry.metadata() {
                        Ok(m) if m.nlink() > 1 => {
                            found.insert((m.dev(), m.ino()));
                        }
                        Ok(_) => {}
                        Err(_) => return (found, false),
                    }
                }
            }
        }
        (found, true)
    }

    /// Whether a file a run is asked to work on is protected: its path, or
    /// where its symlinks lead.
    pub fn is_protected_target(&self, path: &Path) -> bool {
        self.is_protected(path) || real_path(path).is_some_and(|r| self.is_protected(&r))
    }

    /// The path as the model should see it: relative to its root, with `/`.
    pub fn display(&self, path: &Path) -> String {
        for root in &self.roots {
            if let Ok(rel) = path.strip_prefix(root) {
                let s = rel.to_string_lossy().replace('\\', "/");
                return if s.is_empty() { ".".to_string() } else { s };
            }
        }
        path.to_string_lossy().into_owned()
    }
}

/// Most symlinks followed in one path (as Linux's `MAXSYMLINKS`).
const MAX_LINKS: usize = 40;

/// Where an absolute path really leads: every symlink on the way is
/// followed, dangling ones included (a link to a missing file still decides
/// where a write through it would land); `None` on a link loop.
pub fn real_path(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::from("/");
    let mut pending: VecDeque<OsString> = path.components().map(|c| c.as_os_str().to_os_string()).collect();
    let mut links = 0;
    while let Some(part) = pending.pop_front() {
        match Path::new(&part).components().next() {
            Some(Component::RootDir) | Some(Component::Prefix(_)) => out = PathBuf::from(&part),
            Some(Component::ParentDir) => {
                out.pop();
            }
            Some(Component::CurDir) | None => {}
            Some(Component::Normal(name)) => {
                let candidate = out.join(name);
                match std::fs::symlink_metadata(&candidate) {
                    Ok(m) if m.file_type().is_symlink() => {
                        links += 1;
                        if links > MAX_LINKS {
                            return None;
                        }
                        let target = std::fs::read_link(&candidate).ok()?;
                        for c in target.components().rev() {
                            pending.push_front(c.as_os_str().to_os_string());
                        }
                    }
                    _ => out = candidate,
                }
            }
        }
    }
    Some(out)
}

/// Lexical normalisation: removes `.` and resolves `..` without touching the
/// file system. `..` above the root stays at the root.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for comp in path.components() {
        match comp {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protected_globs_are_compiled_once_per_set_of_patterns() {
        let extra = vec!["secrets/".to_string(), "*.sqlite".to_string()];
        let (a, b) = (Protected::new(&extra), Protected::new(&extra));
        assert!(Arc::ptr_eq(&a.set, &b.set), "the second workspace reuses the compiled globs");
        assert!(b.matches(Path::new("secrets/key.txt")) && b.matches(Path::new("db.sqlite")));
        assert!(b.matches(Path::new(".env")) && !b.matches(Path::new("src/main.rs")));
        let other = Protected::new(&["*.db".to_string()]);
        assert!(!Arc::ptr_eq(&a.set, &other.set));
        assert!(other.matches(Path::new("x.db")) && !other.matches(Path::new("db.sqlite")));
    }

    fn ws() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/a.py"), "x").unwrap();
        let ws = Workspace::new(vec![dir.path().to_path_buf()]);
        (dir, ws)
    }

    #[test]
    fn relative_and_absolute_paths_inside_resolve() {
        let (_d, ws) = ws();
        let root = ws.primary_root().to_path_buf();
        assert_eq!(ws.resolve("src/a.py").unwrap(), root.join("src/a.py"));
        assert_eq!(ws.resolve("./src/../src/a.py").unwrap(), root.join("src/a.py"));
        assert_eq!(ws.resolve(root.join("src/new.py").to_str().unwrap()).unwrap(), root.join("src/new.py"));
        assert_eq!(ws.display(&root.join("src/a.py")), "src/a.py");
    }

    #[test]
    fn escapes_are_refused() {
        let (_d, ws) = ws();
        assert!(matches!(ws.resolve("../outside.txt"), Err(PathError::Outside(_))));
        assert!(matches!(ws.resolve("src/../../x"), Err(PathError::Outside(_))));
        assert!(matches!(ws.resolve("/etc/passwd"), Err(PathError::Outside(_))));
        assert_eq!(ws.resolve("  "), Err(PathError::Empty));
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_pointing_out_are_refused() {
        let (d, ws) = ws();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(outside.path(), d.path().join("link")).unwrap();
        assert!(matches!(ws.resolve("link/secret"), Err(PathError::Outside(_))));
        assert!(matches!(ws.resolve("link/new-file"), Err(PathError::Outside(_))));
        std::os::unix::fs::symlink(d.path().join("src"), d.path().join("inner")).unwrap();
        assert!(ws.resolve("inner/a.py").is_ok());
    }

    #[cfg(unix)]
    #[test]
    fn dangling_links_are_followed_to_where_a_write_would_land() {
        let (d, ws) = ws();
        let outside = tempfile::tempdir().unwrap();
        let missing = outside.path().join("not-yet");
        std::os::unix::fs::symlink(&missing, d.path().join("out.py")).unwrap();
        assert!(matches!(ws.resolve("out.py"), Err(PathError::Outside(_))));
        // A relative link through a missing directory, and a chain of links.
        std::os::unix::fs::symlink("../../../../../../../../../tmp/x", d.path().join("src/rel")).unwrap();
        assert!(matches!(ws.resolve("src/rel"), Err(PathError::Outside(_))));
        std::os::unix::fs::symlink("out.py", d.path().join("chain")).unwrap();
        assert!(matches!(ws.resolve("chain"), Err(PathError::Outside(_))));
        // A dangling link that stays inside is fine.
        std::os::unix::fs::symlink("src/later.py", d.path().join("later")).unwrap();
        assert!(ws.resolve("later").is_ok());
        // A loop is refused, not followed forever.
        std::os::unix::fs::symlink("loop2", d.path().join("loop1")).unwrap();
        std::os::unix::fs::symlink("loop1", d.path().join("loop2")).unwrap();
        assert!(matches!(ws.resolve("loop1"), Err(PathError::Outside(_))));
        assert!(!missing.exists());
    }

    #[test]
    fn protected_files_are_refused_at_any_depth_and_extra_patterns_add() {
        let (_d, ws) = ws();
        for p in [
            ".env",
            ".env.local",
            "deploy/.env.production",
            "certs/server.pem",
            "tls.key",
            "id_rsa",
            "keys/id_ed25519.pub",
            ".ssh/config",
            "home/.aws/credentials",
            ".config/gcloud/application_default_credentials.json",
            ".docker/config.json",
            ".kube/config",
            ".npmrc",
            ".netrc",
            ".git-credentials",
            "credentials.json",
            "infra/terraform.tfstate",
            ".git/config",
            ".git/hooks/pre-commit",
        ] {
            assert!(matches!(ws.resolve(p), Err(PathError::Protected(_))), "{p} is not protected");
        }
        for p in [
            "src/a.py",
            "environment.py",
            "keys.py",
            "docs/git.md",
            "src/env/mod.rs",
            ".gitignore",
            "src/secrets.py",
            "docs/secrets.md",
            ".venv/lib/site.py",
            "env.example",
            ".cargo/config.toml",
            "infra/main.tf",
        ] {
            assert!(ws.resolve(p).is_ok(), "{p} is protected");
        }
        let ws = ws.with_protected(&["secrets/".into(), "*.sqlite".into(), "/top-only.txt".into()]);
        assert!(matches!(ws.resolve("config/secrets/db.yml"), Err(PathError::Protected(_))));
        assert!(matches!(ws.resolve("data/app.sqlite"), Err(PathError::Protected(_))));
        assert!(matches!(ws.resolve("top-only.txt"), Err(PathError::Protected(_))));
        assert!(ws.resolve("sub/top-only.txt").is_ok());
        // The defaults still hold with extra patterns.
        assert!(matches!(ws.resolve(".env"), Err(PathError::Protected(_))));
        let msg = ws.resolve(".env").unwrap_err().to_string();
        assert!(msg.contains("protected") && msg.contains("do not try"), "{msg}");
    }

    #[test]
    fn the_newer_defaults_are_protected() {
        let (_d, ws) = ws();
        for p in [
            "config/secrets.yaml",
            "secrets.yml",
            "deploy/secrets.json",
            "app.secrets.json",
            "prod.env",
            "deploy/staging.env",
            ".envrc",
            "sub/.envrc",
            ".cargo/credentials",
            "home/.cargo/credentials.toml",
            ".config/gh/hosts.yml",
            "infra/prod.tfvars",
            "infra/prod.tfvars.json",
            ".pgpass",
            ".vault-token",
            ".my.cnf",
            ".git-credentials",
            ".terraformrc",
            "terraform.rc",
            ".docker/config.json",
            "web/.htpasswd",
            "vault/passwords.kdbx",
        ] {
            assert!(matches!(ws.resolve(p), Err(PathError::Protected(_))), "{p} is not protected");
        }
    }

    #[test]
    fn protection_ignores_case() {
        let (_d, ws) = ws();
        for p in [
            ".ENV",
            ".Env.Local",
            "ID_RSA",
            "keys/Id_Ed25519.PUB",
            "certs/SERVER.PEM",
            ".Git/config",
            ".GIT/hooks/pre-commit",
            "sub/.gIt/HEAD",
            ".SSH/config",
            "PROD.ENV",
            "Secrets.YAML",
        ] {
            assert!(matches!(ws.resolve(p), Err(PathError::Protected(_))), "{p} is not protected");
        }
        // The user's own patterns too.
        let ws = ws.with_protected(&["private/".into()]);
        assert!(matches!(ws.resolve("Private/notes.md"), Err(PathError::Protected(_))));
        assert!(ws.resolve("src/Git.md").is_ok());
    }

    #[test]
    fn files_that_run_code_are_told_from_ordinary_sources() {
        for (p, why) in [
            (".husky/pre-commit", "git runs husky's hooks"),
            (".githooks/pre-push", "git runs these hooks when core.hooksPath names the folder"),
            (".pre-commit-config.yaml", "pre-commit runs the hooks it names on `git commit`"),
            ("lefthook.yml", "lefthook runs the commands it names on git commands"),
            (".vscode/tasks.json", "VS Code runs its tasks, some when the folder opens"),
            (".VSCode/Settings.json", "VS Code settings name programs the editor and its extensions run"),
            (".vscode/launch.json", "VS Code runs the programs it names when you debug"),
            ("app.code-workspace", "VS Code settings and tasks name programs the editor runs"),
            (".devcontainer/devcontainer.json", "dev containers run its commands when the folder opens in one"),
            (".cargo/config.toml", "cargo runs the runners, wrappers and aliases it names"),
            (".cargo/config", "cargo runs the runners, wrappers and aliases it names"),
            ("rust-toolchain.toml", "cargo and rustup run the toolchain it names"),
            ("crates/core/build.rs", "cargo runs build scripts on every build, rust-analyzer when the folder opens"),
            ("tests/conftest.py", "pytest runs it whenever it collects tests"),
            ("setup.py", "pip runs it to install the package"),
            ("web/package.json", "npm runs its scripts on install and test"),
            (".yarnrc.yml", "yarn runs the `yarnPath` it names"),
            (".github/workflows/ci.yml", "GitHub Actions run it on push"),
            (".gitlab-ci.yml", "GitLab CI runs it on push"),
            ("/home/u/proj/build.rs", "cargo runs build scripts on every build, rust-analyzer when the folder opens"),
        ] {
            assert_eq!(runs_code(Path::new(p)), Some(why), "{p}");
        }
        for p in [
            "src/main.rs",
            "src/build.rs.md",
            "tests/test_calc.py",
            "Makefile",
            "pyproject.toml",
            "package-lock.json",
            ".vscode/extensions.json",
            ".github/copilot-instructions.md",
            "docs/setup.py.txt",
            "src/rebuild.rs",
        ] {
            assert_eq!(runs_code(Path::new(p)), None, "{p}");
        }
        // Every pattern compiled: one reason per glob, two globs per pattern.
        assert!(RUNS_CODE.iter().all(|(p, _)| runs_code(Path::new(p.trim_end_matches('/'))).is_some()));
    }

    #[cfg(unix)]
    #[test]
    fn a_link_to_a_protected_file_is_protected() {
        let (d, ws) = ws();
        std::fs::write(d.path().join(".env"), "TOKEN=1").unwrap();
        std::os::unix::fs::symlink(".env", d.path().join("settings.txt")).unwrap();
        assert!(matches!(ws.resolve("settings.txt"), Err(PathError::Protected(_))));
    }

    #[cfg(unix)]
    #[test]
    fn a_hard_link_to_a_protected_file_is_protected_wherever_that_file_hides() {
        let (d, ws) = ws();
        let root = d.path();
        std::fs::write(root.join(".env"), "TOKEN=1").unwrap();
        std::fs::hard_link(root.join(".env"), root.join("notes.txt")).unwrap();
        // In an ignored, hidden folder, and under `.git/`: the walk sees them.
        std::fs::write(root.join(".gitignore"), ".deploy/\n").unwrap();
        std::fs::create_dir_all(root.join(".deploy/keys")).unwrap();
        std::fs::write(root.join(".deploy/keys/ID_RSA"), "key").unwrap();
        std::fs::hard_link(root.join(".deploy/keys/ID_RSA"), root.join("src/key.txt")).unwrap();
        std::fs::create_dir(root.join(".git")).unwrap();
        std::fs::write(root.join(".git/config"), "[core]").unwrap();
        std::fs::hard_link(root.join(".git/config"), root.join("src/cfg.txt")).unwrap();
        // Two names of an ordinary file are fine.
        std::fs::write(root.join("src/b.py"), "b").unwrap();
        std::fs::hard_link(root.join("src/b.py"), root.join("src/b2.py")).unwrap();
        for p in ["notes.txt", "src/key.txt", "src/cfg.txt"] {
            assert_eq!(ws.resolve(p), Err(PathError::Protected(p.into())), "{p}");
            assert!(ws.is_protected(&ws.resolve("src").unwrap().parent().unwrap().join(p)), "{p}");
        }
        assert!(ws.resolve("src/b2.py").is_ok());
        assert!(ws.resolve("src/a.py").is_ok());
        // A symlink to the hard link is refused by where it leads.
        std::os::unix::fs::symlink("notes.txt", root.join("alias.txt")).unwrap();
        assert!(matches!(ws.resolve("alias.txt"), Err(PathError::Protected(_))));
    }

    #[cfg(unix)]
    #[test]
    fn a_hard_link_made_after_the_walk_is_still_found() {
        let (d, ws) = ws();
        let root = d.path();
        std::fs::write(root.join("src/b.py"), "b").unwrap();
        std::fs::hard_link(root.join("src/b.py"), root.join("src/b2.py")).unwrap();
        std::fs::write(root.join("id_ed25519"), "key").unwrap();
        // The first multiply-linked file walks the roots; the key had one link then.
        assert!(ws.resolve("src/b2.py").is_ok());
        std::fs::hard_link(root.join("id_ed25519"), root.join("src/later.txt")).unwrap();
        assert!(matches!(ws.resolve("src/later.txt"), Err(PathError::Protected(_))));
        assert!(ws.resolve("src/b2.py").is_ok(), "a cleared file stays cleared");
        // Clones share what was found.
        let clone = ws.clone();
        assert!(clone.links.lock().unwrap().protected.as_ref().is_some_and(|p| p.len() == 1));
    }

    #[cfg(unix)]
    #[test]
    fn a_walk_that_cannot_see_everything_protects_every_multiply_linked_file() {
        let (d, ws) = ws();
        let root = d.path();
        for i in 0..max_link_walk() {
            std::fs::write(root.join(format!("f{i:03}.txt")), "").unwrap();
        }
        std::fs::write(root.join("src/b.py"), "b").unwrap();
        std::fs::hard_link(root.join("src/b.py"), root.join("src/b2.py")).unwrap();
        assert!(matches!(ws.resolve("src/b2.py"), Err(PathError::Protected(_))));
        // Files with one name are unaffected.
        assert!(ws.resolve("src/a.py").is_ok());
    }

    #[test]
    fn a_file_outside_the_roots_grants_only_itself() {
        let outside = tempfile::tempdir().unwrap();
        let note = outside.path().join("notes.txt");
        std::fs::write(&note, "n").unwrap();
        std::fs::write(outside.path().join("id_rsa"), "k").unwrap();
        std::fs::write(outside.path().join("other.txt"), "o").unwrap();
        let ws = Workspace::new(vec![]).with_file(std::fs::canonicalize(&note).unwrap());
        let note = std::fs::canonicalize(&note).unwrap();
        assert_eq!(ws.resolve(note.to_str().unwrap()).unwrap(), note);
        assert!(ws.resolve("notes.txt").is_ok());
        assert!(matches!(ws.resolve("other.txt"), Err(PathError::Outside(_))));
        assert!(matches!(ws.resolve("id_rsa"), Err(PathError::Outside(_))));
        assert!(matches!(ws.resolve("."), Err(PathError::Outside(_))));
        assert!(matches!(ws.resolve("/etc/passwd"), Err(PathError::Outside(_))));
        // An empty or relative root contains nothing, not everything.
        let ws = Workspace::new(vec![PathBuf::new(), PathBuf::from("rel")]);
        assert!(ws.roots().is_empty());
        assert!(matches!(ws.resolve("/etc/passwd"), Err(PathError::Outside(_))));
        // A protected file stays protected outside the roots.
        let ssh = Workspace::new(vec![]).with_file("/home/u/.ssh/id_rsa".into());
        assert!(ssh.is_protected(Path::new("/home/u/.ssh/id_rsa")));
        assert!(ws.resolve("a\0b").is_err());
    }
}
