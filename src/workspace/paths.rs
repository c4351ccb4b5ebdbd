//! Workspace roots and path confinement: every path a tool receives is
//! resolved here, and anything that leaves the roots (`..`, an absolute path
//! elsewhere, a symlink pointing out) is refused.

use std::path::{Component, Path, PathBuf};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PathError {
    #[error("path `{0}` is outside the workspace")]
    Outside(String),
    #[error("path is empty")]
    Empty,
}

/// The workspace roots of a session. The first root is where relative paths
/// are resolved.
#[derive(Debug, Clone)]
pub struct Workspace {
    roots: Vec<PathBuf>,
}

impl Workspace {
    /// Roots are canonicalised when they exist, so symlinked roots compare
    /// equal to their targets.
    pub fn new(roots: Vec<PathBuf>) -> Self {
        let roots = roots.into_iter().map(|r| std::fs::canonicalize(&r).unwrap_or_else(|_| normalize(&r))).collect();
        Self { roots }
    }

    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    pub fn primary_root(&self) -> &Path {
        self.roots.first().map(PathBuf::as_path).unwrap_or(Path::new("/"))
    }

    /// Resolves a path given by the model (relative to the primary root, or
    /// absolute inside a root) to an absolute path inside the workspace.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, PathError> {
        let trimmed = path.trim();
        if trimmed.is_empty() {
            return Err(PathError::Empty);
        }
        let given = Path::new(trimmed);
        let joined = if given.is_absolute() { given.to_path_buf() } else { self.primary_root().join(given) };
        let lexical = normalize(&joined);
        let outside = || PathError::Outside(path.to_string());
        if !self.contains(&lexical) {
            return Err(outside());
        }
        // Symlinks: the real location of the deepest existing ancestor must
        // also be inside a root.
        let mut existing = lexical.as_path();
        loop {
            if let Ok(real) = std::fs::canonicalize(existing) {
                let rest = lexical.strip_prefix(existing).unwrap_or(Path::new(""));
                let real_full = real.join(rest);
                return if self.contains(&real_full) { Ok(lexical) } else { Err(outside()) };
            }
            match existing.parent() {
                Some(p) => existing = p,
                None => return Ok(lexical),
            }
        }
    }

    /// Whether an absolute, normalised path lies under one of the roots.
    pub fn contains(&self, path: &Path) -> bool {
        self.roots.iter().any(|r| path.starts_with(r))
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
}
